/* ctest-labels: unit
 *
 * dcr_construct_diff against a byte-by-byte oracle: the records of two
 * versions of one tensor are exactly the elements whose stored bytes differ
 * (-0.0 against +0.0 and NaN payloads included, equal NaNs not), with the
 * new word or old ^ new, ascending, whatever the room given per call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/construct.h"
#include "dcr/dtype.h"
#include "dcr/rng.h"

/* Two versions of n words: random, then about one word in 30 changed, with
 * sign-of-zero and NaN-payload changes and equal NaNs planted. */
static void make_versions(dcr_rng_t *rng, size_t n, size_t es, unsigned char *a, unsigned char *b)
{
    for (size_t i = 0; i < n * es; i++) a[i] = (unsigned char)dcr_rng_u64(rng);
    memcpy(b, a, n * es);
    for (size_t k = 0; k < n; k++)
        if (dcr_rng_below(rng, 30) == 0)
            b[k * es + dcr_rng_below(rng, es)] ^= 1u << dcr_rng_below(rng, 8);
    if (n < 8 || es < 2) return;
    uint32_t neg0 = 0x80000000u, pos0 = 0, nan1 = 0x7fc00000u, nan2 = 0x7fc00001u;
    size_t top = es - 2; /* the high half of a word: sign and exponent bits */
    uint16_t h_neg0 = 0x8000, h_pos0 = 0, h_nan1 = 0x7e00, h_nan2 = 0x7e01;
    if (es == 4) {
        memcpy(a + 1 * es, &neg0, 4), memcpy(b + 1 * es, &pos0, 4);
        memcpy(a + 2 * es, &nan1, 4), memcpy(b + 2 * es, &nan2, 4);
        memcpy(a + 3 * es, &nan1, 4), memcpy(b + 3 * es, &nan1, 4); /* equal NaNs: no record */
    } else {
        memcpy(a + 1 * es + top, &h_neg0, 2), memcpy(b + 1 * es + top, &h_pos0, 2);
        memcpy(a + 2 * es + top, &h_nan1, 2), memcpy(b + 2 * es + top, &h_nan2, 2);
        memcpy(a + 3 * es + top, &h_nan1, 2), memcpy(b + 3 * es + top, &h_nan1, 2);
    }
}

/* The oracle: positions whose bytes differ, by memcmp. */
static size_t oracle(const unsigned char *a, const unsigned char *b, size_t n, size_t es,
                     int64_t *idx)
{
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (memcmp(a + k * es, b + k * es, es)) idx[m++] = (int64_t)k;
    return m;
}

/* Runs the diff to the end with `cap` records of room per call, gathering
 * everything into idx/vals; returns the record count. */
static size_t diff_all(const unsigned char *a, const unsigned char *b, size_t n, dcr_dtype_t dt,
                       dcr_encoding_t enc, size_t cap, int64_t *idx, unsigned char *vals)
{
    size_t es = dcr_dtype_size(dt), total = 0;
    int64_t from = 0;
    int64_t *ci = malloc(cap * sizeof(*ci));
    unsigned char *cv = malloc(cap * es);
    while (from < (int64_t)n) {
        size_t got = 0;
        int64_t before = from;
        assert_int_equal(dcr_construct_diff(a, b, (int64_t)n, dt, enc, &from, ci, cv, cap, &got),
                         DCR_OK);
        assert_true(from > before);
        assert_true(got <= cap);
        memcpy(idx + total, ci, got * sizeof(*ci));
        memcpy(vals + total * es, cv, got * es);
        total += got;
    }
    free(ci);
    free(cv);
    return total;
}

static void check_case(dcr_rng_t *rng, size_t n, dcr_dtype_t dt, size_t cap)
{
    size_t es = dcr_dtype_size(dt);
    unsigned char *a = malloc(n * es), *b = malloc(n * es), *vals = malloc(n * es);
    int64_t *want = malloc(n * sizeof(*want)), *got = malloc(n * sizeof(*got));
    make_versions(rng, n, es, a, b);
    size_t m = oracle(a, b, n, es, want);
    assert_true(m > 0);
    for (int enc = DCR_ENCODING_XOR; enc <= DCR_ENCODING_OVERWRITE; enc++) {
        assert_int_equal(diff_all(a, b, n, dt, (dcr_encoding_t)enc, cap, got, vals), m);
        assert_memory_equal(got, want, m * sizeof(*want));
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < es; j++) {
                size_t at = (size_t)want[i] * es + j;
                unsigned char expect = enc == DCR_ENCODING_XOR ? a[at] ^ b[at] : b[at];
                assert_int_equal(vals[i * es + j], expect);
            }
    }
    free(a), free(b), free(vals), free(want), free(got);
}

static void test_matches_byte_oracle(void **state)
{
    (void)state;
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 31);
    size_t big = ((size_t)1 << 20) * 2 + 12345; /* three sub-runs, the last partial */
    check_case(&rng, 1000, DCR_DTYPE_FP32, 1000);
    check_case(&rng, 1000, DCR_DTYPE_BF16, 7); /* shortened sub-runs */
    check_case(&rng, big, DCR_DTYPE_FP16, (size_t)1 << 20);
    check_case(&rng, big, DCR_DTYPE_BF16, 50000);
    check_case(&rng, big, DCR_DTYPE_FP32, big);
    check_case(&rng, 9, DCR_DTYPE_FP8_E4M3, 1);
}

static void test_unchanged_and_empty(void **state)
{
    (void)state;
    uint16_t a[100] = {0}, v[100];
    int64_t idx[100], from = 0;
    size_t got = 99;
    assert_int_equal(
        dcr_construct_diff(a, a, 100, DCR_DTYPE_BF16, DCR_ENCODING_XOR, &from, idx, v, 100, &got),
        DCR_OK);
    assert_int_equal(got, 0);
    assert_int_equal(from, 100);
    from = 0;
    assert_int_equal(
        dcr_construct_diff(a, a, 0, DCR_DTYPE_BF16, DCR_ENCODING_XOR, &from, idx, v, 0, &got),
        DCR_OK);
    assert_int_equal(from, 0);
}

static void test_bad_arguments_write_nothing(void **state)
{
    (void)state;
    uint16_t a[4] = {1, 2, 3, 4}, b[4] = {0}, v[4];
    int64_t idx[4], from = 0;
    size_t got = 0;
    assert_int_equal(
        dcr_construct_diff(a, b, 4, DCR_DTYPE_COUNT, DCR_ENCODING_XOR, &from, idx, v, 4, &got),
        DCR_EINVAL);
    assert_int_equal(
        dcr_construct_diff(a, b, 4, DCR_DTYPE_BF16, DCR_ENCODING_COUNT, &from, idx, v, 4, &got),
        DCR_EINVAL);
    assert_int_equal(
        dcr_construct_diff(a, b, 4, DCR_DTYPE_BF16, DCR_ENCODING_XOR, &from, idx, v, 0, &got),
        DCR_EINVAL);
    from = 5;
    assert_int_equal(
        dcr_construct_diff(a, b, 4, DCR_DTYPE_BF16, DCR_ENCODING_XOR, &from, idx, v, 4, &got),
        DCR_EINVAL);
    assert_int_equal(from, 5);
    assert_int_equal(got, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_byte_oracle),
        cmocka_unit_test(test_unchanged_and_empty),
        cmocka_unit_test(test_bad_arguments_write_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
