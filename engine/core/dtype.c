/* Element types and bit-exact conversions, done on bit patterns with integer
 * arithmetic only, so results never depend on the FPU's rounding mode, flush-
 * to-zero settings or the compiler's floating-point contraction. */
#include "dcr/dtype.h"

#include <string.h>

#include "core-internal.h"
#include "endian-internal.h"

#define DCR__F32_SIGN  0x80000000u
#define DCR__F32_EXP   0x7F800000u
#define DCR__F32_MANT  0x007FFFFFu
#define DCR__F32_QUIET 0x00400000u

uint32_t dcr_f32_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

float dcr_f32_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

size_t dcr_dtype_size(dcr_dtype_t dtype)
{
    switch (dtype) {
    case DCR_DTYPE_BF16:
        return 2;
    case DCR_DTYPE_FP16:
        return 2;
    case DCR_DTYPE_FP32:
        return 4;
    case DCR_DTYPE_FP8_E4M3:
        return 1;
    case DCR_DTYPE_COUNT:
        break;
    }
    return 0;
}

const char *dcr_dtype_name(dcr_dtype_t dtype)
{
    switch (dtype) {
    case DCR_DTYPE_BF16:
        return "bf16";
    case DCR_DTYPE_FP16:
        return "fp16";
    case DCR_DTYPE_FP32:
        return "fp32";
    case DCR_DTYPE_FP8_E4M3:
        return "fp8_e4m3";
    case DCR_DTYPE_COUNT:
        break;
    }
    return "invalid";
}

dcr_status_t dcr_dtype_parse(const char *name, dcr_dtype_t *out_p)
{
    static const struct {
        const char *name;
        dcr_dtype_t dtype;
    } names[] = {
        {"bf16", DCR_DTYPE_BF16},         {"bfloat16", DCR_DTYPE_BF16},
        {"fp16", DCR_DTYPE_FP16},         {"float16", DCR_DTYPE_FP16},
        {"fp32", DCR_DTYPE_FP32},         {"float32", DCR_DTYPE_FP32},
        {"fp8_e4m3", DCR_DTYPE_FP8_E4M3}, {"float8_e4m3fn", DCR_DTYPE_FP8_E4M3},
    };
    if (name == NULL) return dcr_error_set(DCR_EINVAL, "dtype name is missing");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            if (out_p != NULL) *out_p = names[i].dtype;
            return DCR_OK;
        }
    }
    return dcr_error_set(DCR_EINVAL,
                         "unknown dtype \"%s\"; expected bf16, fp16, fp32, fp8_e4m3 "
                         "(or bfloat16, float16, float32, float8_e4m3fn)",
                         name);
}

int dcr_dtype_has_nan(dcr_dtype_t dtype)
{
    return (unsigned)dtype < DCR_DTYPE_COUNT;
}

/* x >> shift rounded to nearest, ties to even. Every narrowing conversion
 * reduces to this: the caller lines up the target's last kept bit at `shift`,
 * and a carry out of the mantissa correctly bumps the exponent (or reaches
 * the Inf/NaN encoding, which the caller checks). */
static uint32_t dcr__shift_rne(uint32_t x, unsigned shift)
{
    if (shift == 0) return x;
    if (shift > 31) return 0; /* x < 2^32 is below half of 2^shift */
    uint32_t kept = x >> shift;
    uint32_t rest = x & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u))) kept++;
    return kept;
}

/* Rounds a finite nonzero |FP32| (exp8 biased exponent, mant23) to a narrower
 * float with `mbits` mantissa bits and exponent bias `bias`, returning the
 * unsigned target code (may equal or exceed the target's Inf/NaN code; the
 * caller decides what an overflow means). */
static uint32_t dcr__narrow(uint32_t abs_bits, unsigned mbits, int bias)
{
    int exp8 = (int)(abs_bits >> 23);
    uint32_t mant = abs_bits & DCR__F32_MANT;
    int e = exp8 - 127 + bias; /* target biased exponent if normal */
    if (e >= 1) {
        /* Keep the exponent in the high bits so a mantissa carry rolls into it. */
        uint32_t x = ((uint32_t)e << 23) | mant;
        return dcr__shift_rne(x, 23u - mbits);
    }
    /* Target subnormal: the unit is 2^(1 - bias - mbits). An FP32 subnormal
     * (exp8 == 0) is far below every target unit here and rounds to zero. */
    if (exp8 == 0) return 0;
    uint32_t full = mant | 0x00800000u;
    unsigned shift = (unsigned)(23 - (int)mbits + 1 - e);
    return dcr__shift_rne(full, shift);
}

float dcr_bf16_to_f32(uint16_t bits)
{
    return dcr_f32_from_bits((uint32_t)bits << 16);
}

uint16_t dcr_f32_to_bf16(float value)
{
    uint32_t bits = dcr_f32_bits(value);
    if ((bits & ~DCR__F32_SIGN) > DCR__F32_EXP) {
        /* A NaN keeps its top half when that is still a NaN (payload bits
         * among the kept ones), signalling or quiet: a BF16 NaN widened to
         * FP32 then comes back bit for bit. Only a NaN whose payload lies
         * wholly in the dropped bits gets the quiet bit, so that it cannot
         * become Inf. */
        uint16_t top = (uint16_t)(bits >> 16);
        return (top & 0x007Fu) != 0 ? top : (uint16_t)(top | 0x0040u);
    }
    /* BF16 shares FP32's exponent, so rounding the low half is the whole job;
     * the carry into the exponent yields Inf exactly when it should. */
    uint32_t lsb = (bits >> 16) & 1u;
    return (uint16_t)((bits + 0x7FFFu + lsb) >> 16);
}

float dcr_f16_to_f32(uint16_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1Fu;
    uint32_t mant = bits & 0x3FFu;
    if (exp == 0x1F) {
        uint32_t payload = mant << 13;
        if (mant != 0) payload |= DCR__F32_QUIET;
        return dcr_f32_from_bits(sign | DCR__F32_EXP | payload);
    }
    if (exp == 0) {
        if (mant == 0) return dcr_f32_from_bits(sign);
        /* Subnormal: normalize so the leading 1 becomes the implicit bit. */
        int e = 1 - 15 + 127;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            e--;
        }
        return dcr_f32_from_bits(sign | ((uint32_t)e << 23) | ((mant & 0x3FFu) << 13));
    }
    return dcr_f32_from_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t dcr_f32_to_f16(float value)
{
    uint32_t bits = dcr_f32_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & ~DCR__F32_SIGN;
    if (abs_bits > DCR__F32_EXP) return (uint16_t)(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
    if (abs_bits == DCR__F32_EXP) return (uint16_t)(sign | 0x7C00u);
    if (abs_bits == 0) return sign;
    if ((int)(abs_bits >> 23) - 127 + 15 >= 31) return (uint16_t)(sign | 0x7C00u);
    uint32_t code = dcr__narrow(abs_bits, 10, 15);
    if (code >= 0x7C00u) code = 0x7C00u; /* rounded past max finite */
    return (uint16_t)(sign | code);
}

float dcr_fp8e4m3_to_f32(uint8_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x80u) << 24;
    uint32_t exp = (bits >> 3) & 0xFu;
    uint32_t mant = bits & 0x7u;
    if (exp == 0xF && mant == 0x7) return dcr_f32_from_bits(sign | DCR__F32_EXP | DCR__F32_QUIET);
    if (exp == 0) {
        if (mant == 0) return dcr_f32_from_bits(sign);
        int e = 1 - 7 + 127;
        while ((mant & 0x8u) == 0) {
            mant <<= 1;
            e--;
        }
        return dcr_f32_from_bits(sign | ((uint32_t)e << 23) | ((mant & 0x7u) << 20));
    }
    return dcr_f32_from_bits(sign | ((exp - 7 + 127) << 23) | (mant << 20));
}

uint8_t dcr_f32_to_fp8e4m3(float value)
{
    uint32_t bits = dcr_f32_bits(value);
    uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
    uint32_t abs_bits = bits & ~DCR__F32_SIGN;
    /* No Inf in e4m3fn: Inf, NaN and anything rounding above 448 map to NaN. */
    if (abs_bits >= DCR__F32_EXP) return (uint8_t)(sign | 0x7Fu);
    if (abs_bits == 0) return sign;
    if ((int)(abs_bits >> 23) - 127 + 7 > 15) return (uint8_t)(sign | 0x7Fu);
    uint32_t code = dcr__narrow(abs_bits, 3, 7);
    if (code > 0x7Eu) return (uint8_t)(sign | 0x7Fu);
    return (uint8_t)(sign | code);
}

/* One element of `dtype` at p, as FP32 bits (exact for every type here). */
uint32_t dcr__dtype_load_f32bits(dcr_dtype_t dtype, const void *p)
{
    uint32_t w = (uint32_t)dcr__le(p, (int)dcr_dtype_size(dtype));
    switch (dtype) {
    case DCR_DTYPE_BF16:
        return w << 16;
    case DCR_DTYPE_FP16:
        return dcr_f32_bits(dcr_f16_to_f32((uint16_t)w));
    case DCR_DTYPE_FP32:
        return w;
    case DCR_DTYPE_FP8_E4M3:
        return dcr_f32_bits(dcr_fp8e4m3_to_f32((uint8_t)w));
    case DCR_DTYPE_COUNT:
        break;
    }
    return 0;
}

/* Stores FP32 bits into one element of `dtype` at p, rounding as documented. */
void dcr__dtype_store_f32bits(dcr_dtype_t dtype, void *p, uint32_t f32bits)
{
    float f = dcr_f32_from_bits(f32bits);
    uint32_t w = 0;
    switch (dtype) {
    case DCR_DTYPE_BF16:
        w = dcr_f32_to_bf16(f);
        break;
    case DCR_DTYPE_FP16:
        w = dcr_f32_to_f16(f);
        break;
    case DCR_DTYPE_FP32:
        w = f32bits;
        break;
    case DCR_DTYPE_FP8_E4M3:
        w = dcr_f32_to_fp8e4m3(f);
        break;
    case DCR_DTYPE_COUNT:
        return;
    }
    dcr__put_le(p, w, (int)dcr_dtype_size(dtype));
}

static void dcr__convert_bf16_to_f32(uint32_t *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (uint32_t)src[i] << 16;
}

static void dcr__convert_f32_to_bf16(uint16_t *dst, const uint32_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = dcr_f32_to_bf16(dcr_f32_from_bits(src[i]));
}

/* Whether p is suitably aligned for direct word access of `size` bytes. */
static int dcr__aligned(const void *p, size_t size)
{
    return ((uintptr_t)p % size) == 0;
}

void dcr_convert(void *dst, dcr_dtype_t to, const void *src, dcr_dtype_t from, size_t n)
{
    if (n == 0 || (unsigned)to >= DCR_DTYPE_COUNT || (unsigned)from >= DCR_DTYPE_COUNT) return;
    if (to == from) {
        memmove(dst, src, n * dcr_dtype_size(to));
        return;
    }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* The BF16 <-> FP32 pair dominates refit traffic (FP32 masters, BF16
     * weights), so it gets tight loops when the buffers are aligned. */
    if (from == DCR_DTYPE_BF16 && to == DCR_DTYPE_FP32 && dcr__aligned(src, 2) &&
        dcr__aligned(dst, 4)) {
        dcr__convert_bf16_to_f32(dst, src, n);
        return;
    }
    if (from == DCR_DTYPE_FP32 && to == DCR_DTYPE_BF16 && dcr__aligned(src, 4) &&
        dcr__aligned(dst, 2)) {
        dcr__convert_f32_to_bf16(dst, src, n);
        return;
    }
#endif
    size_t ssize = dcr_dtype_size(from);
    size_t dsize = dcr_dtype_size(to);
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++) {
        dcr__dtype_store_f32bits(to, d + i * dsize, dcr__dtype_load_f32bits(from, s + i * ssize));
    }
}

double dcr_dtype_load_f64(dcr_dtype_t dtype, const void *elem)
{
    return (double)dcr_f32_from_bits(dcr__dtype_load_f32bits(dtype, elem));
}

uint64_t dcr_dtype_load_bits(dcr_dtype_t dtype, const void *elem)
{
    uint64_t bits = 0;
    memcpy(&bits, elem, dcr_dtype_size(dtype));
    return bits;
}

void dcr_dtype_store_bits(dcr_dtype_t dtype, void *elem, uint64_t bits)
{
    memcpy(elem, &bits, dcr_dtype_size(dtype));
}

int dcr_dtype_bits_isnan(dcr_dtype_t dtype, uint64_t b)
{
    switch (dtype) {
    case DCR_DTYPE_BF16:
        return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
    case DCR_DTYPE_FP16:
        return (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0;
    case DCR_DTYPE_FP32:
        return (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) != 0;
    case DCR_DTYPE_FP8_E4M3:
        return (b & 0x7Fu) == 0x7Fu;
    default:
        return 0;
    }
}
