/* ctest-labels: unit */
/* The generator against a reference implementation of the published
 * algorithms (splitmix64 seeding, xoshiro256**), written out here, plus
 * statistical sanity with loose bounds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "dcr/rng.h"

static uint64_t ref_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t ref_xoshiro(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void test_matches_reference(void **state)
{
    (void)state;
    const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefcafef00dull, UINT64_MAX};
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        uint64_t x = seeds[k], s[4];
        for (int i = 0; i < 4; i++) s[i] = ref_splitmix64(&x);
        dcr_rng_t r;
        dcr_rng_seed(&r, seeds[k]);
        for (int i = 0; i < 1000; i++) assert_true(dcr_rng_u64(&r) == ref_xoshiro(s));
    }
    /* Seed 0's first state word is splitmix64's published first output. */
    dcr_rng_t r;
    dcr_rng_seed(&r, 0);
    assert_true(r.s[0] == 0xe220a8397b1dcdafull);
}

static void test_same_seed_same_sequence(void **state)
{
    (void)state;
    dcr_rng_t a, b, c;
    dcr_rng_seed(&a, 7);
    dcr_rng_seed(&b, 7);
    dcr_rng_seed(&c, 8);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = dcr_rng_u64(&a);
        assert_true(x == dcr_rng_u64(&b));
        differ += x != dcr_rng_u64(&c);
    }
    assert_true(differ > 95);
    for (int i = 0; i < 101; i++) assert_true(dcr_rng_normal(&a) == dcr_rng_normal(&b));
    /* Reseeding drops a cached normal. */
    dcr_rng_seed(&a, 7);
    dcr_rng_seed(&b, 7);
    assert_true(dcr_rng_normal(&a) == dcr_rng_normal(&b));
}

static void test_split(void **state)
{
    (void)state;
    dcr_rng_t parent, copy;
    dcr_rng_seed(&parent, 123);
    (void)dcr_rng_normal(&parent); /* leave a cached value, which children must not inherit */
    copy = parent;

    dcr_rng_t c1 = dcr_rng_split(&parent, 1), c1b = dcr_rng_split(&parent, 1);
    dcr_rng_t c2 = dcr_rng_split(&parent, 2);
    assert_memory_equal(parent.s, copy.s, sizeof parent.s); /* parent not advanced */
    assert_int_equal(c1.has_spare, 0);

    int diff12 = 0, diffp = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x1 = dcr_rng_u64(&c1);
        assert_true(x1 == dcr_rng_u64(&c1b));
        diff12 += x1 != dcr_rng_u64(&c2);
        diffp += x1 != dcr_rng_u64(&copy);
    }
    assert_int_equal(diff12, 1000);
    assert_int_equal(diffp, 1000);

    /* Nested splits are reproducible too, and differ from the seed path. */
    dcr_rng_t g1 = dcr_rng_split(&c2, 5), g2 = dcr_rng_split(&c2, 5), seeded;
    dcr_rng_seed(&seeded, 5);
    assert_true(dcr_rng_u64(&g1) == dcr_rng_u64(&g2));
    assert_true(dcr_rng_u64(&g1) != dcr_rng_u64(&seeded));
}

static void test_below(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, 99);
    const uint64_t bounds[] = {1, 2, 3, 7, 10, 1000003, (1ull << 63) + 1, UINT64_MAX};
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        for (int i = 0; i < 10000; i++) assert_true(dcr_rng_below(&r, bounds[k]) < bounds[k]);
    }
    /* Roughly uniform over 10 buckets (expected 10000 each, sd about 95). */
    int count[10] = {0};
    for (int i = 0; i < 100000; i++) count[dcr_rng_below(&r, 10)]++;
    for (int b = 0; b < 10; b++) assert_true(count[b] > 9500 && count[b] < 10500);
    /* With bound 1.5 * 2^63 a plain modulo would put 62.5% of the draws in
     * the lower half of the range; unbiased draws split about evenly. */
    int low = 0;
    for (int i = 0; i < 100000; i++)
        low += dcr_rng_below(&r, (1ull << 63) + (1ull << 62)) < (1ull << 62) * 3 / 2;
    assert_true(low > 48500 && low < 51500);
}

static void test_uniform_and_normal(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, 2024);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = dcr_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
    }
    assert_true(fabs(sum / 100000 - 0.5) < 0.01);

    enum { N = 100000 };
    double m = 0, m2 = 0;
    int within1 = 0;
    for (int i = 0; i < N; i++) {
        double z = dcr_rng_normal(&r);
        assert_true(isfinite(z));
        m += z;
        m2 += z * z;
        within1 += fabs(z) < 1.0;
    }
    m /= N;
    double var = m2 / N - m * m;
    assert_true(fabs(m) < 0.02);         /* sd of the mean is about 0.003 */
    assert_true(fabs(var - 1.0) < 0.03); /* sd of the variance is about 0.0045 */
    /* P(|Z| < 1) = 0.6827. */
    assert_true(fabs((double)within1 / N - 0.6827) < 0.01);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_below),
        cmocka_unit_test(test_uniform_and_normal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
