/* Change detection: which stored words differ between two buffers. This is
 * the inner loop of every refit's construction, run over the whole model, so
 * it streams at memory bandwidth in the common unchanged case and extracts
 * changed positions without a branch per element when there are some.
 *
 * Kernels: the widest one the CPU runs is chosen once at first use (AVX-512
 * and AVX2 are compiled with target attributes, so the build needs no -m
 * flags and runs on any x86-64); SSE2 is the baseline of x86-64, scalar the
 * reference everywhere else. */
#include <pthread.h>
#include <string.h>

#include "device/device-internal.h"
#include "dcr/device.h"

typedef size_t (*detect_fn)(const unsigned char *a, const unsigned char *b, size_t n, size_t es,
                            uint32_t *out, size_t *done_p);

/* No vector part: the element loop in dcr__detect_changes_with does all. */
static size_t detect_none(const unsigned char *a, const unsigned char *b, size_t n, size_t es,
                          uint32_t *out, size_t *done_p)
{
    *done_p = 0;
    return 0;
}

#if defined(__SSE2__)
#include <immintrin.h>

/* positions[m] lists the set bits of the byte m, padded to 8 entries, and
 * lane_count[m] counts them; with these, 8 lanes' positions are stored at
 * once and the count advances by the count, so extraction has no
 * data-dependent branch. (A table, not popcount: SSE2 alone has no popcnt
 * instruction and the builtin becomes a library call.) */
static unsigned char positions[256][8];
static unsigned char lane_count[256];
static pthread_once_t positions_once = PTHREAD_ONCE_INIT;

static void build_positions(void)
{
    for (int m = 0; m < 256; m++)
        for (int bit = 0; bit < 8; bit++)
            if (m & (1 << bit)) positions[m][lane_count[m]++] = (unsigned char)bit;
}

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

/* Stores base + position for the set bits of an 8-lane mask (8 entries are
 * written; only lane_count of them count). */
static inline size_t store_lanes(uint32_t *out, uint32_t base, unsigned mask8)
{
    __m128i pos8 = _mm_loadl_epi64((const __m128i *)(const void *)positions[mask8]);
    __m128i zero = _mm_setzero_si128(), vbase = _mm_set1_epi32((int)base);
    __m128i pos16 = _mm_unpacklo_epi8(pos8, zero);
    _mm_storeu_si128((__m128i *)(void *)out, _mm_add_epi32(_mm_unpacklo_epi16(pos16, zero), vbase));
    _mm_storeu_si128((__m128i *)(void *)(out + 4),
                     _mm_add_epi32(_mm_unpackhi_epi16(pos16, zero), vbase));
    return lane_count[mask8];
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

/* BF16/FP16 words, 16 lanes per 32-byte block, adapting per 4 KiB segment:
 * where changed blocks were rare in the last segment a block without changes
 * costs one predictable branch; where they were common (a quarter of them)
 * every block stores its lanes unconditionally, which avoids a mispredicted
 * branch per block. out needs 16 entries of slack past the last change, so
 * the last 64 bytes take the scalar path. */
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
    if (es == 2) return detect_words16(a, b, n, out, done_p);
    if (es != 1 && es != 4) return detect_none(a, b, n, es, out, done_p);
    size_t bytes = n * es, count = 0, i = 0;
    /* The lowest byte bit of each lane stands for the whole lane. */
    uint32_t lane_bits = es == 1 ? 0xFFFFFFFFu : 0x11111111u;
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

/* The wide kernels below take 64 bytes per step with no branch but the loop's:
 * the compare yields one bit per lane, and the changed lanes' positions are
 * stored in fixed-size groups whose unused tail the next group overwrites.
 * Every store stays below n: a group's store at out + count (count being at
 * most the group's first position) ends at most at the group's last lane.
 * Each is written once for a constant element size and instantiated per size,
 * so the lane arithmetic folds away. */
#define WIDE_BLOCK 64

#define AVX2_TARGET __attribute__((target("avx2,popcnt"), always_inline)) inline

/* Changed lanes of 64 bytes, bit k for lane k. */
static AVX2_TARGET uint64_t changed_lanes_avx2(const unsigned char *a, const unsigned char *b,
                                               size_t es)
{
    __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)a);
    __m256i y0 = _mm256_loadu_si256((const __m256i *)(const void *)b);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(a + 32));
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32));
    if (es == 1)
        return ~((uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x0, y0)) |
                 (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x1, y1)) << 32);
    if (es == 2) { /* pack to a byte per lane; packs interleaves 128-bit halves, so reorder */
        __m256i eq = _mm256_packs_epi16(_mm256_cmpeq_epi16(x0, y0), _mm256_cmpeq_epi16(x1, y1));
        eq = _mm256_permute4x64_epi64(eq, 0xD8);
        return ~(uint64_t)(uint32_t)_mm256_movemask_epi8(eq) & 0xFFFFFFFFu;
    }
    unsigned lo = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x0, y0)));
    unsigned hi = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x1, y1)));
    return ~(uint64_t)(lo | hi << 8) & 0xFFFFu;
}

static AVX2_TARGET size_t scan_avx2(const unsigned char *a, const unsigned char *b, size_t n,
                                    size_t es, uint32_t *out, size_t *done_p)
{
    const size_t lanes = WIDE_BLOCK / es, bytes = n * es;
    size_t count = 0, i = 0;
    for (; i + WIDE_BLOCK <= bytes; i += WIDE_BLOCK) {
        uint64_t diff = changed_lanes_avx2(a + i, b + i, es);
        __m256i base = _mm256_set1_epi32((int)(i / es));
        for (size_t g = 0; g < lanes; g += 8) {
            unsigned m8 = (unsigned)(diff >> g) & 0xFFu;
            __m128i pos8 = _mm_loadl_epi64((const __m128i *)(const void *)positions[m8]);
            __m256i pos = _mm256_add_epi32(_mm256_cvtepu8_epi32(pos8), base);
            _mm256_storeu_si256((__m256i *)(void *)(out + count),
                                _mm256_add_epi32(pos, _mm256_set1_epi32((int)g)));
            count += (size_t)__builtin_popcount(m8);
        }
    }
    *done_p = i / es;
    return count;
}

__attribute__((target("avx2,popcnt"))) static size_t detect_avx2(const unsigned char *a,
                                                                 const unsigned char *b, size_t n,
                                                                 size_t es, uint32_t *out,
                                                                 size_t *done_p)
{
    pthread_once(&positions_once, build_positions);
    switch (es) {
    case 1:
        return scan_avx2(a, b, n, 1, out, done_p);
    case 2:
        return scan_avx2(a, b, n, 2, out, done_p);
    case 4:
        return scan_avx2(a, b, n, 4, out, done_p);
    default:
        return detect_none(a, b, n, es, out, done_p);
    }
}

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,popcnt"), always_inline)) inline

/* Changed lanes of 64 bytes, bit k for lane k. */
static AVX512_TARGET uint64_t changed_lanes_avx512(const unsigned char *a, const unsigned char *b,
                                                   size_t es)
{
    __m512i x = _mm512_loadu_si512((const void *)a), y = _mm512_loadu_si512((const void *)b);
    return es == 1   ? (uint64_t)_mm512_cmpneq_epi8_mask(x, y)
           : es == 2 ? (uint64_t)_mm512_cmpneq_epi16_mask(x, y)
                     : (uint64_t)_mm512_cmpneq_epi32_mask(x, y);
}

/* vpcompressd packs the positions of the changed lanes of a 16-lane group
 * into the low entries of a register, which is stored whole. */
static AVX512_TARGET size_t scan_avx512(const unsigned char *a, const unsigned char *b, size_t n,
                                        size_t es, uint32_t *out, size_t *done_p)
{
    const size_t lanes = WIDE_BLOCK / es, bytes = n * es;
    const __m512i ramp = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t count = 0, i = 0;
    for (; i + WIDE_BLOCK <= bytes; i += WIDE_BLOCK) {
        uint64_t diff = changed_lanes_avx512(a + i, b + i, es);
        __m512i pos = _mm512_add_epi32(ramp, _mm512_set1_epi32((int)(i / es)));
        for (size_t g = 0; g < lanes; g += 16) {
            __mmask16 k = (__mmask16)(diff >> g);
            __m512i at = _mm512_add_epi32(pos, _mm512_set1_epi32((int)g));
            _mm512_storeu_si512((void *)(out + count), _mm512_maskz_compress_epi32(k, at));
            /* Counted from diff, not k: gcc 12 spilled k with a 16-bit kmovw
             * and popcnt reloaded 32 bits of the slot, counting stale stack
             * bytes as changes (seen in the ThreadSanitizer build). */
            count += (size_t)__builtin_popcountll((diff >> g) & 0xFFFFu);
        }
    }
    *done_p = i / es;
    return count;
}

__attribute__((target("avx512f,avx512bw,popcnt"))) static size_t
detect_avx512(const unsigned char *a, const unsigned char *b, size_t n, size_t es, uint32_t *out,
              size_t *done_p)
{
    switch (es) {
    case 1:
        return scan_avx512(a, b, n, 1, out, done_p);
    case 2:
        return scan_avx512(a, b, n, 2, out, done_p);
    case 4:
        return scan_avx512(a, b, n, 4, out, done_p);
    default:
        return detect_none(a, b, n, es, out, done_p);
    }
}
#endif

typedef struct detect_kernel {
    const char *name;
    detect_fn fn;
} detect_kernel_t;

static const detect_kernel_t kernels[DCR__DETECT_KERNEL_COUNT] = {
    {"scalar", detect_none},
#if defined(__SSE2__)
    {"sse2", detect_sse2},
    {"avx2", detect_avx2},
    {"avx512", detect_avx512},
#else
    {"sse2", NULL},
    {"avx2", NULL},
    {"avx512", NULL},
#endif
};

bool dcr__detect_kernel_supported(dcr__detect_kernel_t kernel)
{
    if ((unsigned)kernel >= DCR__DETECT_KERNEL_COUNT || !kernels[kernel].fn) return false;
#if defined(__SSE2__)
    __builtin_cpu_init();
    if (kernel == DCR__DETECT_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
    if (kernel == DCR__DETECT_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("popcnt");
#endif
    return true;
}

const char *dcr__detect_kernel_name(dcr__detect_kernel_t kernel)
{
    return (unsigned)kernel < DCR__DETECT_KERNEL_COUNT ? kernels[kernel].name : "unknown";
}

size_t dcr__detect_changes_with(dcr__detect_kernel_t kernel, const void *a, const void *b, size_t n,
                                size_t elem_size, uint32_t *out)
{
    const unsigned char *pa = a, *pb = b;
    size_t done = 0, count = kernels[kernel].fn(pa, pb, n, elem_size, out, &done);
    for (size_t e = done; e < n; e++) /* the tail, and element sizes without a vector path */
        if (memcmp(pa + e * elem_size, pb + e * elem_size, elem_size)) out[count++] = (uint32_t)e;
    return count;
}

static dcr__detect_kernel_t best_kernel;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void choose_kernel(void)
{
    for (int k = DCR__DETECT_KERNEL_COUNT - 1; k > 0; k--)
        if (dcr__detect_kernel_supported((dcr__detect_kernel_t)k)) {
            best_kernel = (dcr__detect_kernel_t)k;
            return;
        }
    best_kernel = DCR__DETECT_SCALAR;
}

const char *dcr_detect_kernel(void)
{
    pthread_once(&best_once, choose_kernel);
    return dcr__detect_kernel_name(best_kernel);
}

size_t dcr_detect_changes(const void *a, const void *b, size_t n, size_t elem_size, uint32_t *out)
{
    pthread_once(&best_once, choose_kernel);
    return dcr__detect_changes_with(best_kernel, a, b, n, elem_size, out);
}
