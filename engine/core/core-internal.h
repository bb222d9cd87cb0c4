/* Helpers shared between engine/core files; not part of the public interface. */
#ifndef DCR_CORE_INTERNAL_H
#define DCR_CORE_INTERNAL_H

#include <stdint.h>

#include "dcr/dtype.h"

/* One element of `dtype` at p (any alignment, little-endian) as FP32 bits. */
uint32_t dcr__dtype_load_f32bits(dcr_dtype_t dtype, const void *p);
/* Rounds FP32 bits into one element of `dtype` at p (any alignment). */
void dcr__dtype_store_f32bits(dcr_dtype_t dtype, void *p, uint32_t f32bits);

#endif
