/* Internals shared by the construct module's files. */
#ifndef DCR_CONSTRUCT_INTERNAL_H
#define DCR_CONSTRUCT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/source.h"

/* Positions k in [0, n) where the elem_size-byte words of a and b differ in
 * any bit, written ascending to out (room for n entries); returns how many.
 * Compares bit patterns, never values, and scans 32 bytes per step with no
 * per-element branch while the words agree. */
size_t dcr__detect_changes(const void *a, const void *b, size_t n, size_t elem_size, uint32_t *out);

/* Calls fn(src, dst, len, ctx) for each run of a box map: len consecutive
 * elements starting at shard index src and canonical index dst (both with
 * unit stride), in box order. Maps whose innermost strides are not 1 yield
 * runs of length 1. */
void dcr__box_runs(const dcr_box_map_t *map, void (*fn)(int64_t src, int64_t dst, int64_t len, void *ctx),
                   void *ctx);

#endif
