/* Change detection: which stored words differ between two buffers. This is
 * the inner loop of every refit's construction, run over the whole model, so
 * it is written to stream at memory bandwidth in the common unchanged case. */
#include <string.h>

#include "construct-internal.h"

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Appends the positions of differing words inside one 8-byte block that
 * starts at element `base`. */
static size_t scan_block(uint64_t diff, size_t base, size_t elem_size, uint32_t *out, size_t count)
{
    size_t per_block = 8 / elem_size;
    uint64_t lane_mask = elem_size == 8 ? ~0ull : ((1ull << (8 * elem_size)) - 1);
    for (size_t k = 0; k < per_block; k++)
        if ((diff >> (8 * elem_size * k)) & lane_mask) out[count++] = (uint32_t)(base + k);
    return count;
}

size_t dcr__detect_changes(const void *a, const void *b, size_t n, size_t elem_size, uint32_t *out)
{
    const unsigned char *pa = a, *pb = b;
    size_t bytes = n * elem_size, count = 0, i = 0;
    if (elem_size <= 8 && 8 % elem_size == 0) {
        size_t per_block = 8 / elem_size;
        /* 32 bytes per step: one OR-reduced test, taken rarely at low change rates. */
        for (; i + 32 <= bytes; i += 32) {
            uint64_t d0 = load64(pa + i) ^ load64(pb + i), d1 = load64(pa + i + 8) ^ load64(pb + i + 8);
            uint64_t d2 = load64(pa + i + 16) ^ load64(pb + i + 16);
            uint64_t d3 = load64(pa + i + 24) ^ load64(pb + i + 24);
            if (!(d0 | d1 | d2 | d3)) continue;
            size_t e = i / elem_size;
            if (d0) count = scan_block(d0, e, elem_size, out, count);
            if (d1) count = scan_block(d1, e + per_block, elem_size, out, count);
            if (d2) count = scan_block(d2, e + 2 * per_block, elem_size, out, count);
            if (d3) count = scan_block(d3, e + 3 * per_block, elem_size, out, count);
        }
    }
    for (size_t e = i / elem_size; e < n; e++)
        if (memcmp(pa + e * elem_size, pb + e * elem_size, elem_size)) out[count++] = (uint32_t)e;
    return count;
}
