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

#endif
