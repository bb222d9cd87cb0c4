/* ctest-labels: unit */
/* The name hash must never change: ownership and residual-baseline placement
 * depend on it. The expected values are computed here from the published
 * definitions (FNV-1a 64 with its offset basis and prime, then the splitmix64
 * finalizer), and those reference functions are themselves pinned to
 * published test vectors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dcr/hash.h"

static uint64_t ref_fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1 64-bit offset basis */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull; /* FNV 64-bit prime */
    }
    return h;
}

static uint64_t ref_splitmix64_finalize(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_reference_vectors(void **state)
{
    (void)state;
    /* Published FNV-1a 64 vectors. */
    assert_true(ref_fnv1a64((const unsigned char *)"", 0) == 0xcbf29ce484222325ull);
    assert_true(ref_fnv1a64((const unsigned char *)"a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(ref_fnv1a64((const unsigned char *)"foobar", 6) == 0x85944171f73967e8ull);
    /* splitmix64's first output for seed 0 (state += golden gamma, then mix). */
    assert_true(ref_splitmix64_finalize(0x9e3779b97f4a7c15ull) == 0xe220a8397b1dcdafull);
    assert_true(dcr_hash64_mix(0x9e3779b97f4a7c15ull) == 0xe220a8397b1dcdafull);
}

static void test_known_answers(void **state)
{
    (void)state;
    const char *names[] = {
        "",
        "a",
        "foobar",
        "model.embed_tokens.weight",
        "model.layers.3.mlp.experts.17.up_proj.weight",
        "model.layers.3.mlp.experts.18.up_proj.weight",
        "lm_head.weight",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        uint64_t expect = ref_splitmix64_finalize(ref_fnv1a64((const unsigned char *)names[i], n));
        assert_true(dcr_hash64(names[i], n) == expect);
        assert_true(dcr_hash64_str(names[i]) == expect);
    }
    /* Bytes, not strings: embedded zeros and high bytes count. */
    const unsigned char bytes[] = {0x00, 0xff, 0x80, 0x00, 0x7f};
    assert_true(dcr_hash64(bytes, sizeof bytes) ==
                ref_splitmix64_finalize(ref_fnv1a64(bytes, sizeof bytes)));
    assert_true(dcr_hash64(bytes, 1) != dcr_hash64("", 0));
    assert_true(dcr_hash64_str(NULL) == dcr_hash64("", 0));
    for (uint64_t x = 0; x < 1000; x++)
        assert_true(dcr_hash64_mix(x) == ref_splitmix64_finalize(x));
}

/* Names that differ in a trailing digit spread over owners (loose bound). */
static void test_spread(void **state)
{
    (void)state;
    enum { OWNERS = 8, NAMES = 8000 };
    int count[OWNERS] = {0};
    char name[96];
    for (int i = 0; i < NAMES; i++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.down_proj.weight", i / 128,
                 i % 128);
        count[dcr_hash64_str(name) % OWNERS]++;
    }
    for (int o = 0; o < OWNERS; o++) assert_true(count[o] > 800 && count[o] < 1200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vectors),
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
