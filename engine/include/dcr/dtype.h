/* Element types and bit-exact conversions.
 *
 * Values are handled as their stored bit patterns (uint16_t for BF16/FP16,
 * uint32_t for FP32, uint8_t for FP8 e4m3). Narrowing conversions round to
 * nearest, ties to even, like PyTorch's .to(); NaN stays NaN (quiet), Inf
 * stays Inf where the target has one, -0.0 keeps its sign, and subnormals of
 * the target are produced exactly. Widening BF16 -> FP32 is a plain 16-bit
 * shift (as in torch), so even signalling NaN payloads survive it; FP16 and
 * FP8 NaNs widen to quiet NaNs of the same sign. */
#ifndef DCR_DTYPE_H
#define DCR_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

typedef enum dcr_dtype {
    DCR_DTYPE_BF16 = 0,
    DCR_DTYPE_FP16 = 1,
    DCR_DTYPE_FP32 = 2,
    DCR_DTYPE_FP8_E4M3 = 3, /* OCP e4m3fn: no Inf, NaN = S.1111.111, max 448 */
    DCR_DTYPE_COUNT
} dcr_dtype_t;

/* Bytes per element. */
size_t dcr_dtype_size(dcr_dtype_t dtype);

/* Lower-case name as in Hugging Face configs ("bf16", "fp16", "fp32", "fp8_e4m3"). */
const char *dcr_dtype_name(dcr_dtype_t dtype);

/* Accepts the names above and "bfloat16", "float16", "float32", "float8_e4m3fn". */
dcr_status_t dcr_dtype_parse(const char *name, dcr_dtype_t *out_p);

/* Whether the type can encode NaN (all four can; kept for future integer types). */
int dcr_dtype_has_nan(dcr_dtype_t dtype);

float dcr_bf16_to_f32(uint16_t bits);
uint16_t dcr_f32_to_bf16(float value);
float dcr_f16_to_f32(uint16_t bits);
uint16_t dcr_f32_to_f16(float value);
float dcr_fp8e4m3_to_f32(uint8_t bits);
/* Like torch's float8_e4m3fn cast, it does not saturate: a value whose
 * rounding exceeds 448 becomes NaN. Quantizers scale first, so an
 * out-of-range input is a bug they should see. */
uint8_t dcr_f32_to_fp8e4m3(float value);

/* Bit pattern helpers for FP32 without aliasing violations. */
uint32_t dcr_f32_bits(float value);
float dcr_f32_from_bits(uint32_t bits);

/* Converts n elements from src (type from) to dst (type to); both contiguous,
 * little-endian words. Same-type conversion copies bits unchanged. Conversion
 * goes through FP32, which is exact for every source type here. */
void dcr_convert(void *dst, dcr_dtype_t to, const void *src, dcr_dtype_t from, size_t n);

/* One element's stored bits as an integer (zero-extended) and back: the
 * bit-level view that comparisons, XOR masks and placeholders work on. */
uint64_t dcr_dtype_load_bits(dcr_dtype_t dtype, const void *elem);
void dcr_dtype_store_bits(dcr_dtype_t dtype, void *elem, uint64_t bits);
/* Whether stored bits encode a NaN of the dtype (any payload, either sign). */
int dcr_dtype_bits_isnan(dcr_dtype_t dtype, uint64_t bits);

/* One element as double (for printing and tests). */
double dcr_dtype_load_f64(dcr_dtype_t dtype, const void *elem);

#endif
