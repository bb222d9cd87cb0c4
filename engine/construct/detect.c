/* Change detection: which stored words differ between two buffers. This is
 * the inner loop of every refit's construction, run over the whole model, so
 * it streams at memory bandwidth in the common unchanged case and extracts
 * changed positions without a branch per element when there are some. */
#include <pthread.h>
#include <string.h>

#include "dcr/construct.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* One bit per byte of a 16-byte block: set where the byte's word is equal. */
static inline unsigned equal_bytes(const unsigned char *a, const unsigned char *b, size_t es)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)a);
    __m128i y = _mm_loadu_si128((const __m128i *)(const void *)b);
    __m128i eq = es == 1   ? _mm_cmpeq_epi8(x, y)
                 : es == 2 ? _mm_cmpeq_epi16(x, y)
                           : _mm_cmpeq_epi32(x, y);
    return (unsigned)_mm_movemask_epi8(eq);
}

/* positions[m] lists the set bits of the byte m, padded to 8 entries; with
 * it, 8 lanes' positions are stored at once and the count advances by the
 * popcount, so extraction has no data-dependent branch. */
static unsigned char positions[256][8];
static pthread_once_t positions_once = PTHREAD_ONCE_INIT;

static void build_positions(void)
{
    for (int m = 0; m < 256; m++)
        for (int bit = 0, k = 0; bit < 8; bit++)
            if (m & (1 << bit)) positions[m][k++] = (unsigned char)bit;
}

/* Stores base + position for the set bits of an 8-lane mask (8 entries are
 * written; only popcount of them count). */
static inline size_t store_lanes(uint32_t *out, uint32_t base, unsigned mask8)
{
    __m128i pos8 = _mm_loadl_epi64((const __m128i *)(const void *)positions[mask8]);
    __m128i zero = _mm_setzero_si128(), vbase = _mm_set1_epi32((int)base);
    __m128i pos16 = _mm_unpacklo_epi8(pos8, zero);
    _mm_storeu_si128((__m128i *)(void *)out, _mm_add_epi32(_mm_unpacklo_epi16(pos16, zero), vbase));
    _mm_storeu_si128((__m128i *)(void *)(out + 4),
                     _mm_add_epi32(_mm_unpackhi_epi16(pos16, zero), vbase));
    return (size_t)__builtin_popcount(mask8);
}

/* Compares one 32-byte block of 16-bit words: a 16-bit mask of changed lanes. */
static inline unsigned changed_lanes16(const unsigned char *a, const unsigned char *b)
{
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)a);
    __m128i y0 = _mm_loadu_si128((const __m128i *)(const void *)b);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(a + 16));
    __m128i y1 = _mm_loadu_si128((const __m128i *)(const void *)(b + 16));
    /* Pack the two 16-bit compare results into one byte per lane. */
    __m128i eq = _mm_packs_epi16(_mm_cmpeq_epi16(x0, y0), _mm_cmpeq_epi16(x1, y1));
    return ~(unsigned)_mm_movemask_epi8(eq) & 0xFFFFu;
}

#define SEGMENT_BLOCKS 128 /* 4 KiB of each buffer */

/* BF16/FP16 words (the common case), 16 lanes per 32-byte block, adapting
 * per 4 KiB segment: where changed blocks were rare in the last segment a
 * block without changes costs one predictable branch; where they were
 * common (a quarter of them) every block stores its lanes unconditionally, which
 * avoids a mispredicted branch per block. out needs 16 entries of slack
 * past the last change, so the last 64 bytes take the scalar path. */
static size_t detect_words16(const unsigned char *a, const unsigned char *b, size_t n,
                             uint32_t *out, size_t *done_p)
{
    size_t count = 0, i = 0, bytes = n * 2;
    int dense = 0;
    pthread_once(&positions_once, build_positions);
    while (i + 64 <= bytes) {
        size_t hits = 0, end = i + 32 * SEGMENT_BLOCKS;
        if (end > bytes - 32) end = bytes - 32;
        for (; i + 32 <= end; i += 32) {
            unsigned diff = changed_lanes16(a + i, b + i);
            if (!dense && !diff) continue;
            hits += diff != 0;
            uint32_t base = (uint32_t)(i / 2);
            count += store_lanes(out + count, base, diff & 0xFF);
            count += store_lanes(out + count, base + 8, diff >> 8);
        }
        dense = hits * 4 >= SEGMENT_BLOCKS; /* one block in four changed */
    }
    *done_p = i / 2;
    return count;
}

/* 32 bytes per step: one compare-and-test while the words agree; with
 * changes, the set bits of the block's change mask are walked, one
 * iteration per changed element. */
static size_t detect_sse2(const unsigned char *a, const unsigned char *b, size_t n, size_t es,
                          uint32_t *out, size_t *done_p)
{
    size_t bytes = n * es, count = 0, i = 0;
    /* The lowest byte bit of each lane stands for the whole lane. */
    uint32_t lane_bits = es == 1 ? 0xFFFFFFFFu : es == 2 ? 0x55555555u : 0x11111111u;
    for (; i + 32 <= bytes; i += 32) {
        uint32_t eq =
            equal_bytes(a + i, b + i, es) | (uint32_t)equal_bytes(a + i + 16, b + i + 16, es) << 16;
        if (eq == 0xFFFFFFFFu) continue;
        uint32_t diff = ~eq & lane_bits, base = (uint32_t)(i / es);
        while (diff) {
            out[count++] = base + (uint32_t)__builtin_ctz(diff) / (uint32_t)es;
            diff &= diff - 1;
        }
    }
    *done_p = i / es;
    return count;
}
#endif

size_t dcr_detect_changes(const void *a, const void *b, size_t n, size_t elem_size, uint32_t *out)
{
    const unsigned char *pa = a, *pb = b;
    size_t count = 0, done = 0;
#if defined(__SSE2__)
    if (elem_size == 2)
        count = detect_words16(pa, pb, n, out, &done);
    else if (elem_size == 1 || elem_size == 4)
        count = detect_sse2(pa, pb, n, elem_size, out, &done);
#endif
    for (size_t e = done; e < n; e++) /* the tail, and element sizes without a vector path */
        if (memcmp(pa + e * elem_size, pb + e * elem_size, elem_size)) out[count++] = (uint32_t)e;
    return count;
}
