/* ctest-labels: unit */
/* The core hash map against a naive oracle: a list of (key, value) entries
 * in insertion order, searched linearly. Random sequences of adds, gets with
 * and without a match, upserts and clears, over key ranges small enough to
 * repeat keys often and wide enough to spread, must give the oracle's
 * answers; the seed is logged (DCR_TEST_SEED repeats a run). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dcr/map.h"
#include "dcr/rng.h"

static uint64_t test_seed;

typedef struct oracle {
    uint64_t *keys, *vals;
    size_t len, cap;
} oracle_t;

static void oracle_add(oracle_t *o, uint64_t key, uint64_t val)
{
    if (o->len == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 64;
        o->keys = realloc(o->keys, o->cap * sizeof(*o->keys));
        o->vals = realloc(o->vals, o->cap * sizeof(*o->vals));
        assert_non_null(o->keys);
        assert_non_null(o->vals);
    }
    o->keys[o->len] = key;
    o->vals[o->len++] = val;
}

/* Index of the first entry with key whose value has `parity` (-1: any). */
static int64_t oracle_find(const oracle_t *o, uint64_t key, int parity)
{
    for (size_t i = 0; i < o->len; i++)
        if (o->keys[i] == key && (parity < 0 || (int)(o->vals[i] & 1) == parity)) return (int64_t)i;
    return -1;
}

static int match_parity(uint64_t val, const void *arg)
{
    return (int)(val & 1) == *(const int *)arg;
}

static uint64_t draw_key(dcr_rng_t *rng, uint64_t range)
{
    /* Mostly a small range (repeats), sometimes any 64-bit key, 0 included. */
    uint64_t r = dcr_rng_below(rng, 8);
    if (r == 0) return dcr_rng_u64(rng);
    if (r == 1) return 0;
    return dcr_rng_below(rng, range) << (r == 2 ? 32 : 0);
}

static void check_get(const dcr_map_t *m, const oracle_t *o, uint64_t key, int parity)
{
    uint64_t got = 0;
    bool found = parity < 0 ? dcr_map_get(m, key, NULL, NULL, &got)
                            : dcr_map_get(m, key, match_parity, &parity, &got);
    int64_t want = oracle_find(o, key, parity);
    if (found != (want >= 0))
        fail_msg("seed %llu: key %llu parity %d: map says %d, oracle %d",
                 (unsigned long long)test_seed, (unsigned long long)key, parity, found, want >= 0);
    if (found && got != o->vals[want])
        fail_msg("seed %llu: key %llu: value %llu, oracle %llu", (unsigned long long)test_seed,
                 (unsigned long long)key, (unsigned long long)got,
                 (unsigned long long)o->vals[want]);
}

static void run_sequence(dcr_rng_t *rng, uint64_t range, int ops)
{
    dcr_map_t m = {0};
    oracle_t o = {0};
    for (int i = 0; i < ops; i++) {
        uint64_t key = draw_key(rng, range), val = dcr_rng_u64(rng);
        uint64_t op = dcr_rng_below(rng, 100);
        if (op < 40) {
            assert_int_equal(dcr_map_add(&m, key, val), DCR_OK);
            oracle_add(&o, key, val);
        } else if (op < 70) {
            uint64_t *slot;
            bool added;
            assert_int_equal(dcr_map_upsert(&m, key, val, &slot, &added), DCR_OK);
            int64_t at = oracle_find(&o, key, -1);
            assert_int_equal(added, at < 0);
            if (at < 0) {
                oracle_add(&o, key, val);
                at = (int64_t)o.len - 1;
            }
            assert_true(*slot == o.vals[at]);
            /* Writing through the slot changes the stored value. */
            *slot ^= 1;
            o.vals[at] ^= 1;
        } else if (op < 99) {
            check_get(&m, &o, key, (int)dcr_rng_below(rng, 3) - 1);
        } else {
            dcr_map_clear(&m);
            o.len = 0;
        }
        assert_int_equal(m.len, o.len);
    }
    /* Finally every key the oracle holds, with each match. */
    for (size_t i = 0; i < o.len; i++)
        for (int parity = -1; parity <= 1; parity++) check_get(&m, &o, o.keys[i], parity);
    dcr_map_free(&m);
    assert_int_equal(m.len, 0);
    assert_false(dcr_map_get(&m, 1, NULL, NULL, NULL));
    free(o.keys);
    free(o.vals);
}

static void test_against_oracle(void **state)
{
    (void)state;
    dcr_rng_t rng;
    dcr_rng_seed(&rng, test_seed);
    const uint64_t ranges[] = {4, 64, 5000, UINT64_MAX / 2};
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
        for (int k = 0; k < 4; k++) run_sequence(&rng, ranges[r], 6000);
}

/* Growth while equal keys wrap around the end of the slots keeps their
 * insertion order: the first match is always the first added. */
static void test_equal_keys_keep_order(void **state)
{
    (void)state;
    dcr_map_t m = {0};
    for (uint64_t key = 0; key < 3; key++)
        for (uint64_t v = 0; v < 200; v++) assert_int_equal(dcr_map_add(&m, key, v), DCR_OK);
    for (uint64_t key = 0; key < 3; key++) {
        for (int parity = 0; parity <= 1; parity++) {
            uint64_t got = 99;
            assert_true(dcr_map_get(&m, key, match_parity, &parity, &got));
            assert_true(got == (uint64_t)parity);
        }
    }
    assert_int_equal(m.len, 600);
    dcr_map_clear(&m);
    assert_false(dcr_map_get(&m, 0, NULL, NULL, NULL));
    dcr_map_free(&m);
}

int main(void)
{
    const char *env = getenv("DCR_TEST_SEED");
    test_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_map: random seed %llu (set DCR_TEST_SEED to repeat)\n",
           (unsigned long long)test_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_oracle),
        cmocka_unit_test(test_equal_keys_keep_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
