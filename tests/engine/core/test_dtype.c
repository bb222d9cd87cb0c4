/* ctest-labels: unit */
/* Bit-exact dtype conversions checked against first principles: every narrow
 * format is decoded here from its definition (sign, biased exponent,
 * mantissa, subnormals), and rounding is checked against the exact midpoint
 * between neighbouring representable values. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/dtype.h"

/* A narrow float format as published: exponent and mantissa widths, bias,
 * largest finite positive code, and whether all-ones exponents mean Inf/NaN
 * (IEEE style) or only S.1111.111 is NaN (e4m3fn). */
typedef struct fmt {
    const char *name;
    int ebits, mbits, bias;
    uint32_t max_code; /* largest finite positive code */
    int ieee_specials;
} fmt_t;

static const fmt_t BF16 = {"bf16", 8, 7, 127, 0x7F7F, 1};
static const fmt_t FP16 = {"fp16", 5, 10, 15, 0x7BFF, 1};
static const fmt_t FP8 = {"fp8_e4m3", 4, 3, 7, 0x7E, 0};

static uint32_t sign_bit(const fmt_t *f)
{
    return 1u << (f->ebits + f->mbits);
}

static int ref_is_nan(const fmt_t *f, uint32_t code)
{
    uint32_t abs_code = code & (sign_bit(f) - 1);
    uint32_t emax = (1u << f->ebits) - 1;
    uint32_t exp = abs_code >> f->mbits, mant = abs_code & ((1u << f->mbits) - 1);
    if (f->ieee_specials) return exp == emax && mant != 0;
    return abs_code == (sign_bit(f) - 1);
}

/* Value of a non-NaN code from the format's definition. */
static double ref_decode(const fmt_t *f, uint32_t code)
{
    int neg = (code & sign_bit(f)) != 0;
    uint32_t abs_code = code & (sign_bit(f) - 1);
    uint32_t emax = (1u << f->ebits) - 1;
    uint32_t exp = abs_code >> f->mbits, mant = abs_code & ((1u << f->mbits) - 1);
    double v;
    if (f->ieee_specials && exp == emax)
        v = INFINITY;
    else if (exp == 0)
        v = ldexp((double)mant, 1 - f->bias - f->mbits);
    else
        v = ldexp(1.0 + ldexp((double)mant, -f->mbits), (int)exp - f->bias);
    return neg ? -v : v;
}

/* The value one step above the largest finite code, as if the exponent range
 * continued: rounding up to it means overflow (Inf, or NaN for e4m3fn). */
static double ref_next_after_max(const fmt_t *f)
{
    double max = ref_decode(f, f->max_code);
    double below = ref_decode(f, f->max_code - 1);
    return max + (max - below);
}

static double ref_positive_value(const fmt_t *f, uint32_t code)
{
    return code > f->max_code ? ref_next_after_max(f) : ref_decode(f, code);
}

/* Round |x| (finite, exact in double) to the format by locating the two
 * neighbouring codes and comparing with their exact midpoint. Returns the
 * code without sign; max_code + 1 means overflow. */
static uint32_t ref_round_abs(const fmt_t *f, double ax)
{
    if (ax >= ref_next_after_max(f)) return f->max_code + 1;
    uint32_t lo = 0, hi = f->max_code + 1; /* invariant: value(lo) <= ax < value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ref_positive_value(f, mid) <= ax)
            lo = mid;
        else
            hi = mid;
    }
    double mid = (ref_positive_value(f, lo) + ref_positive_value(f, hi)) / 2;
    if (ax < mid) return lo;
    if (ax > mid) return hi;
    return (lo & 1) ? hi : lo;
}

typedef uint32_t (*encode_fn)(float);
typedef float (*decode_fn)(uint32_t);

static uint32_t enc_bf16(float x)
{
    return dcr_f32_to_bf16(x);
}
static uint32_t enc_fp16(float x)
{
    return dcr_f32_to_f16(x);
}
static uint32_t enc_fp8(float x)
{
    return dcr_f32_to_fp8e4m3(x);
}
static float dec_bf16(uint32_t c)
{
    return dcr_bf16_to_f32((uint16_t)c);
}
static float dec_fp16(uint32_t c)
{
    return dcr_f16_to_f32((uint16_t)c);
}
static float dec_fp8(uint32_t c)
{
    return dcr_fp8e4m3_to_f32((uint8_t)c);
}

/* The expected code for any FP32 input: NaN -> a NaN of the same sign;
 * Inf -> Inf, or NaN without Inf; finite -> nearest, ties to even. */
static void check_encode(const fmt_t *f, encode_fn enc, float x)
{
    uint32_t got = enc(x);
    uint32_t sign = signbit(x) ? sign_bit(f) : 0;
    if (isnan(x)) {
        if (!ref_is_nan(f, got) || (got & sign_bit(f)) != sign) {
            fail_msg("%s: NaN 0x%08x -> 0x%x is not a NaN of the same sign", f->name,
                     dcr_f32_bits(x), got);
        }
        return;
    }
    uint32_t expect = sign | ref_round_abs(f, fabs((double)x));
    if (got != expect) {
        fail_msg("%s: fp32 0x%08x (%a) -> 0x%x, expected 0x%x", f->name, dcr_f32_bits(x), (double)x,
                 got, expect);
    }
}

static void check_decode_all(const fmt_t *f, decode_fn dec)
{
    uint32_t n = sign_bit(f) << 1;
    for (uint32_t c = 0; c < n; c++) {
        float got = dec(c);
        if (ref_is_nan(f, c)) {
            assert_true(isnan(got));
            assert_int_equal(!!signbit(got), !!(c & sign_bit(f)));
            /* BF16 widens by a plain shift, as torch does, so every payload
             * survives; the other formats' NaNs come out quiet. */
            if (f == &BF16)
                assert_int_equal(dcr_f32_bits(got), c << 16);
            else
                assert_true(dcr_f32_bits(got) & 0x00400000u);
            continue;
        }
        double expect = ref_decode(f, c);
        if ((double)got != expect || !!signbit(got) != !!(c & sign_bit(f))) {
            fail_msg("%s: code 0x%x decodes to %a, expected %a", f->name, c, (double)got, expect);
        }
    }
}

static void check_roundtrip_all(const fmt_t *f, decode_fn dec, encode_fn enc)
{
    uint32_t n = sign_bit(f) << 1;
    for (uint32_t c = 0; c < n; c++) {
        uint32_t back = enc(dec(c));
        if (ref_is_nan(f, c)) {
            assert_true(ref_is_nan(f, back));
            assert_int_equal(back & sign_bit(f), c & sign_bit(f));
        } else if (back != c) {
            fail_msg("%s: code 0x%x round-trips to 0x%x", f->name, c, back);
        }
    }
}

/* For every pair of neighbouring positive codes, the exact midpoint and the
 * FP32 values just below and above it (and their negatives). */
static void check_boundaries(const fmt_t *f, encode_fn enc)
{
    for (uint32_t c = 0; c <= f->max_code; c++) {
        double lo = ref_positive_value(f, c), hi = ref_positive_value(f, c + 1);
        float mid = (float)((lo + hi) / 2);
        assert_true((double)mid == (lo + hi) / 2); /* the midpoint is exact in FP32 */
        float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
        uint32_t even = (c & 1) ? c + 1 : c;
        const float xs[] = {(float)lo, below, mid, above};
        const uint32_t expect[] = {c, c, even, c + 1};
        for (int i = 0; i < 4; i++) {
            for (int s = 0; s < 2; s++) {
                float x = s ? -xs[i] : xs[i];
                uint32_t want = expect[i] | (s ? sign_bit(f) : 0);
                uint32_t got = enc(x);
                if (got != want) {
                    fail_msg("%s: %a (near codes 0x%x/0x%x) -> 0x%x, expected 0x%x", f->name,
                             (double)x, c, c + 1, got, want);
                }
                check_encode(f, enc, x);
            }
        }
    }
}

static uint64_t test_seed;

static uint64_t next_rand(uint64_t *s)
{
    /* splitmix64, kept local so the test does not trust the code under test. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void check_random(const fmt_t *f, encode_fn enc, int count)
{
    uint64_t s = test_seed;
    for (int i = 0; i < count; i++) {
        uint64_t r = next_rand(&s);
        /* Half of the draws are concentrated near the format's range, where
         * all the interesting rounding happens. */
        uint32_t bits = (uint32_t)r;
        if (i & 1) {
            int e = (int)((r >> 32) % (unsigned)(2 * f->bias + 30)) - f->bias - f->mbits - 4;
            float x = ldexpf(1.0f + (float)((r >> 40) & 0xFFFFFF) / 16777216.0f, e);
            bits = dcr_f32_bits(x) | (uint32_t)(r & 0x80000000u);
        }
        check_encode(f, enc, dcr_f32_from_bits(bits));
    }
}

static void test_bf16_decode_and_roundtrip(void **state)
{
    (void)state;
    check_decode_all(&BF16, dec_bf16);
    check_roundtrip_all(&BF16, dec_bf16, enc_bf16);
}

static void test_fp16_decode_and_roundtrip(void **state)
{
    (void)state;
    check_decode_all(&FP16, dec_fp16);
    check_roundtrip_all(&FP16, dec_fp16, enc_fp16);
}

static void test_fp8_decode_and_roundtrip(void **state)
{
    (void)state;
    check_decode_all(&FP8, dec_fp8);
    check_roundtrip_all(&FP8, dec_fp8, enc_fp8);
    /* Published landmarks of e4m3fn. */
    assert_true(dcr_fp8e4m3_to_f32(0x7E) == 448.0f);
    assert_true(dcr_fp8e4m3_to_f32(0xFE) == -448.0f);
    assert_true(dcr_fp8e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    assert_true(dcr_fp8e4m3_to_f32(0x08) == ldexpf(1.0f, -6));
    assert_true(dcr_fp8e4m3_to_f32(0x38) == 1.0f);
    assert_true(isnan(dcr_fp8e4m3_to_f32(0x7F)) && isnan(dcr_fp8e4m3_to_f32(0xFF)));
    assert_true(dcr_fp8e4m3_to_f32(0x78) == 256.0f); /* exponent 15 is finite here */
}

static void test_bf16_boundaries(void **state)
{
    (void)state;
    check_boundaries(&BF16, enc_bf16);
}

static void test_fp16_boundaries(void **state)
{
    (void)state;
    check_boundaries(&FP16, enc_fp16);
}

static void test_fp8_boundaries(void **state)
{
    (void)state;
    check_boundaries(&FP8, enc_fp8);
}

static void test_random_inputs(void **state)
{
    (void)state;
    check_random(&BF16, enc_bf16, 300000);
    check_random(&FP16, enc_fp16, 300000);
    check_random(&FP8, enc_fp8, 300000);
}

static float f(uint32_t bits)
{
    return dcr_f32_from_bits(bits);
}

/* Hand-made cases, each worked out on paper. */
static void test_bf16_cases(void **state)
{
    (void)state;
    /* 1 + 2^-8 is halfway between 1.0 (0x3F80) and 1 + 2^-7 (0x3F81): even wins. */
    assert_int_equal(dcr_f32_to_bf16(f(0x3F808000)), 0x3F80);
    assert_int_equal(dcr_f32_to_bf16(f(0x3F808001)), 0x3F81);
    assert_int_equal(dcr_f32_to_bf16(f(0x3F807FFF)), 0x3F80);
    /* 1 + 3 * 2^-8 is halfway between 0x3F81 (odd) and 0x3F82: rounds up. */
    assert_int_equal(dcr_f32_to_bf16(f(0x3F818000)), 0x3F82);
    assert_int_equal(dcr_f32_to_bf16(f(0xBF818000)), 0xBF82);
    assert_int_equal(dcr_f32_to_bf16(f(0xBF808000)), 0xBF80);
    /* Max finite FP32 is above the midpoint to 2^128: Inf. */
    assert_int_equal(dcr_f32_to_bf16(f(0x7F7FFFFF)), 0x7F80);
    assert_int_equal(dcr_f32_to_bf16(f(0xFF7FFFFF)), 0xFF80);
    assert_int_equal(dcr_f32_to_bf16(f(0x7F7F7FFF)), 0x7F7F);
    assert_int_equal(dcr_f32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(dcr_f32_to_bf16(-INFINITY), 0xFF80);
    /* NaN keeps sign and top payload; it keeps its top half as is while
     * that is a NaN (signalling ones too: BF16 -> FP32 -> BF16 is the
     * identity on every bit), and gets the quiet bit only when its payload
     * sits wholly in the dropped low bits. */
    assert_int_equal(dcr_f32_to_bf16(f(0x7FC00000)), 0x7FC0);
    assert_int_equal(dcr_f32_to_bf16(f(0xFFC00000)), 0xFFC0);
    assert_int_equal(dcr_f32_to_bf16(f(0x7F800001)), 0x7FC0);
    assert_int_equal(dcr_f32_to_bf16(f(0xFF800001)), 0xFFC0);
    assert_int_equal(dcr_f32_to_bf16(f(0x7FA10000)), 0x7FA1);
    assert_int_equal(dcr_f32_to_bf16(f(0xFF810000)), 0xFF81);
    assert_int_equal(dcr_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(dcr_f32_to_bf16(0.0f), 0x0000);
    /* FP32 subnormals: 0x00010000 is exactly bf16 0x0001; half of it ties to 0. */
    assert_int_equal(dcr_f32_to_bf16(f(0x00010000)), 0x0001);
    assert_int_equal(dcr_f32_to_bf16(f(0x00008000)), 0x0000);
    assert_int_equal(dcr_f32_to_bf16(f(0x00008001)), 0x0001);
    assert_int_equal(dcr_f32_to_bf16(f(0x00018000)), 0x0002);
    assert_int_equal(dcr_f32_to_bf16(f(0x80008001)), 0x8001);
    assert_int_equal(dcr_f32_to_bf16(f(0x007FFFFF)), 0x0080); /* rounds up to min normal */
    assert_true(dcr_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
}

static void test_fp16_cases(void **state)
{
    (void)state;
    assert_int_equal(dcr_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(dcr_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(dcr_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(dcr_f32_to_f16(65520.0f), 0x7C00); /* tie, 0x7BFF odd: overflow */
    assert_int_equal(dcr_f32_to_f16(-65520.0f), 0xFC00);
    assert_int_equal(dcr_f32_to_f16(1e10f), 0x7C00);
    assert_int_equal(dcr_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00);     /* tie to even */
    assert_int_equal(dcr_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02); /* tie to even */
    assert_int_equal(dcr_f32_to_f16(nextafterf(1.0f + ldexpf(1.0f, -11), 2.0f)), 0x3C01);
    assert_int_equal(dcr_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(dcr_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie to even: 0 */
    assert_int_equal(dcr_f32_to_f16(-ldexpf(1.0f, -25)), 0x8000);
    assert_int_equal(dcr_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)), 0x0001);
    assert_int_equal(dcr_f32_to_f16(1.5f * ldexpf(1.0f, -24)), 0x0002);
    assert_int_equal(dcr_f32_to_f16(ldexpf(1.0f, -14)), 0x0400); /* min normal */
    assert_int_equal(dcr_f32_to_f16(ldexpf(1023.0f, -24)), 0x03FF);
    assert_int_equal(dcr_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400); /* tie: up to even */
    assert_int_equal(dcr_f32_to_f16(f(0x00000001)), 0x0000);
    assert_int_equal(dcr_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(dcr_f32_to_f16(INFINITY), 0x7C00);
    assert_int_equal(dcr_f32_to_f16(-INFINITY), 0xFC00);
    uint16_t n = dcr_f32_to_f16(f(0xFF800001));
    assert_int_equal(n & 0xFE00, 0xFE00); /* negative quiet NaN */
    assert_true(dcr_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(dcr_f16_to_f32(0x7BFF) == 65504.0f);
    assert_true(isinf(dcr_f16_to_f32(0xFC00)) && dcr_f16_to_f32(0xFC00) < 0);
}

static void test_fp8_cases(void **state)
{
    (void)state;
    assert_int_equal(dcr_f32_to_fp8e4m3(1.0f), 0x38);
    assert_int_equal(dcr_f32_to_fp8e4m3(1.0625f), 0x38); /* tie between 1 and 1.125 */
    assert_int_equal(dcr_f32_to_fp8e4m3(1.1875f), 0x3A); /* tie between 1.125 and 1.25 */
    assert_int_equal(dcr_f32_to_fp8e4m3(-1.1875f), 0xBA);
    assert_int_equal(dcr_f32_to_fp8e4m3(448.0f), 0x7E);
    assert_int_equal(dcr_f32_to_fp8e4m3(464.0f), 0x7E); /* tie, 0x7E even: stays finite */
    assert_int_equal(dcr_f32_to_fp8e4m3(nextafterf(464.0f, 1e9f)), 0x7F);
    assert_int_equal(dcr_f32_to_fp8e4m3(480.0f), 0x7F);
    assert_int_equal(dcr_f32_to_fp8e4m3(-500.0f), 0xFF);
    assert_int_equal(dcr_f32_to_fp8e4m3(1e30f), 0x7F);
    assert_int_equal(dcr_f32_to_fp8e4m3(INFINITY), 0x7F);
    assert_int_equal(dcr_f32_to_fp8e4m3(-INFINITY), 0xFF);
    assert_int_equal(dcr_f32_to_fp8e4m3(NAN), 0x7F);
    assert_int_equal(dcr_f32_to_fp8e4m3(f(0xFFC00000)), 0xFF);
    assert_int_equal(dcr_f32_to_fp8e4m3(-0.0f), 0x80);
    assert_int_equal(dcr_f32_to_fp8e4m3(ldexpf(1.0f, -9)), 0x01);
    assert_int_equal(dcr_f32_to_fp8e4m3(ldexpf(1.0f, -10)), 0x00); /* tie to even: 0 */
    assert_int_equal(dcr_f32_to_fp8e4m3(-ldexpf(1.0f, -10)), 0x80);
    assert_int_equal(dcr_f32_to_fp8e4m3(ldexpf(3.0f, -10)), 0x02);  /* tie 1|2 -> 2 */
    assert_int_equal(dcr_f32_to_fp8e4m3(ldexpf(5.0f, -10)), 0x02);  /* tie 2|3 -> 2 */
    assert_int_equal(dcr_f32_to_fp8e4m3(ldexpf(15.0f, -10)), 0x08); /* tie 7|8 -> min normal */
    assert_int_equal(dcr_f32_to_fp8e4m3(f(0x00000001)), 0x00);
}

static void test_convert_matches_scalar(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *src = malloc(N * 2);
    uint32_t *f32 = malloc(N * 4);
    uint16_t *h = malloc(N * 2);
    uint8_t *q = malloc(N);
    for (uint32_t i = 0; i < N; i++) src[i] = (uint16_t)i;

    dcr_convert(f32, DCR_DTYPE_FP32, src, DCR_DTYPE_BF16, N);
    for (uint32_t i = 0; i < N; i++) assert_int_equal(f32[i], (uint32_t)i << 16);
    dcr_convert(h, DCR_DTYPE_FP16, src, DCR_DTYPE_BF16, N);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(h[i], dcr_f32_to_f16(dcr_bf16_to_f32((uint16_t)i)));
    dcr_convert(q, DCR_DTYPE_FP8_E4M3, src, DCR_DTYPE_FP16, N);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(q[i], dcr_f32_to_fp8e4m3(dcr_f16_to_f32((uint16_t)i)));
    dcr_convert(h, DCR_DTYPE_BF16, f32, DCR_DTYPE_FP32, N);
    for (uint32_t i = 0; i < N; i++) {
        if (!isnan(dcr_bf16_to_f32((uint16_t)i))) assert_int_equal(h[i], i);
    }

    /* Every FP8 value is exact in BF16 and FP16. */
    uint8_t all8[256];
    for (int i = 0; i < 256; i++) all8[i] = (uint8_t)i;
    dcr_convert(h, DCR_DTYPE_BF16, all8, DCR_DTYPE_FP8_E4M3, 256);
    for (int i = 0; i < 256; i++) {
        float a = dcr_fp8e4m3_to_f32((uint8_t)i), b = dcr_bf16_to_f32(h[i]);
        assert_true(isnan(a) ? isnan(b) : dcr_f32_bits(a) == dcr_f32_bits(b));
    }

    /* Same-type conversion copies bits, signalling NaN payloads included. */
    uint32_t snan[3] = {0x7F800001u, 0xFFA00005u, 0x80000000u}, out[3];
    dcr_convert(out, DCR_DTYPE_FP32, snan, DCR_DTYPE_FP32, 3);
    assert_memory_equal(out, snan, sizeof snan);

    /* Unaligned buffers are fine: words are read byte by byte. */
    unsigned char raw[1 + 8 * 4], dst[1 + 8 * 2];
    for (int i = 0; i < 8; i++) {
        uint32_t w = dcr_f32_bits((float)i * 1.5f);
        for (int b = 0; b < 4; b++) raw[1 + 4 * i + b] = (unsigned char)(w >> (8 * b));
    }
    dcr_convert(dst + 1, DCR_DTYPE_BF16, raw + 1, DCR_DTYPE_FP32, 8);
    for (int i = 0; i < 8; i++) {
        uint16_t w = (uint16_t)(dst[1 + 2 * i] | dst[2 + 2 * i] << 8);
        assert_true(dcr_bf16_to_f32(w) == (float)i * 1.5f);
    }
    free(src);
    free(f32);
    free(h);
    free(q);
}

static void test_names_and_sizes(void **state)
{
    (void)state;
    assert_int_equal(dcr_dtype_size(DCR_DTYPE_BF16), 2);
    assert_int_equal(dcr_dtype_size(DCR_DTYPE_FP16), 2);
    assert_int_equal(dcr_dtype_size(DCR_DTYPE_FP32), 4);
    assert_int_equal(dcr_dtype_size(DCR_DTYPE_FP8_E4M3), 1);
    const char *alias[] = {"bfloat16", "float16", "float32", "float8_e4m3fn"};
    for (int t = 0; t < DCR_DTYPE_COUNT; t++) {
        dcr_dtype_t d = DCR_DTYPE_COUNT;
        assert_int_equal(dcr_dtype_parse(dcr_dtype_name((dcr_dtype_t)t), &d), DCR_OK);
        assert_int_equal(d, t);
        d = DCR_DTYPE_COUNT;
        assert_int_equal(dcr_dtype_parse(alias[t], &d), DCR_OK);
        assert_int_equal(d, t);
        assert_true(dcr_dtype_has_nan((dcr_dtype_t)t));
    }
    dcr_dtype_t keep = DCR_DTYPE_FP16;
    assert_int_equal(dcr_dtype_parse("int8", &keep), DCR_EINVAL);
    assert_int_equal(keep, DCR_DTYPE_FP16);
    assert_non_null(strstr(dcr_error_detail(), "int8"));
    assert_int_equal(dcr_dtype_parse(NULL, &keep), DCR_EINVAL);

    uint16_t b = 0xC040; /* -3.0 in bf16 */
    assert_true(dcr_dtype_load_f64(DCR_DTYPE_BF16, &b) == -3.0);
    uint8_t q = 0x7E;
    assert_true(dcr_dtype_load_f64(DCR_DTYPE_FP8_E4M3, &q) == 448.0);
    assert_true(dcr_f32_bits(dcr_f32_from_bits(0x7FA00001u)) == 0x7FA00001u);
}

/* Bit-level NaN test against the value-level one, every 8- and 16-bit
 * pattern, and FP32 boundary patterns. */
static void test_bits_isnan_matches_values(void **state)
{
    const dcr_dtype_t narrow[] = {DCR_DTYPE_BF16, DCR_DTYPE_FP16, DCR_DTYPE_FP8_E4M3};
    for (int d = 0; d < 3; d++) {
        uint32_t count = narrow[d] == DCR_DTYPE_FP8_E4M3 ? 256u : 65536u;
        for (uint32_t b = 0; b < count; b++) {
            unsigned char elem[8] = {0};
            dcr_dtype_store_bits(narrow[d], elem, b);
            assert_int_equal(dcr_dtype_load_bits(narrow[d], elem), b);
            double v = dcr_dtype_load_f64(narrow[d], elem);
            assert_int_equal(dcr_dtype_bits_isnan(narrow[d], b) != 0, v != v);
        }
    }
    const uint32_t f32[] = {0x7F800000u, 0x7F800001u, 0xFFC00000u,
                            0x7F7FFFFFu, 0x00000001u, 0x80000000u};
    for (int i = 0; i < 6; i++) {
        float v = dcr_f32_from_bits(f32[i]);
        assert_int_equal(dcr_dtype_bits_isnan(DCR_DTYPE_FP32, f32[i]) != 0, v != v);
    }
}

int main(void)
{
    const char *env = getenv("DCR_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_dtype: random seed %llu (set DCR_TEST_SEED to repeat)\n",
           (unsigned long long)test_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits_isnan_matches_values),
        cmocka_unit_test(test_bf16_decode_and_roundtrip),
        cmocka_unit_test(test_fp16_decode_and_roundtrip),
        cmocka_unit_test(test_fp8_decode_and_roundtrip),
        cmocka_unit_test(test_bf16_boundaries),
        cmocka_unit_test(test_fp16_boundaries),
        cmocka_unit_test(test_fp8_boundaries),
        cmocka_unit_test(test_random_inputs),
        cmocka_unit_test(test_bf16_cases),
        cmocka_unit_test(test_fp16_cases),
        cmocka_unit_test(test_fp8_cases),
        cmocka_unit_test(test_convert_matches_scalar),
        cmocka_unit_test(test_names_and_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
