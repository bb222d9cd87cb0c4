/* ctest-labels: unit
 *
 * The undo log of the in-place baseline update (construct/inplace.c)
 * against a dense oracle: trackers of random word sizes and lengths
 * (several 2^16-word segment spans), updated by random ascending change
 * sets over consecutive sub-runs and trackers, must equal the candidate at
 * every updated word and the original elsewhere, a refused update must
 * write nothing, and applying the log must give back the original bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "construct/construct-internal.h"
#include "dcr/rng.h"
#include "testkit.h"

typedef struct tracker_case {
    size_t es, n;
    unsigned char *tracker, *original, *cand, *expect;
} tracker_case_t;

static void case_open(tracker_case_t *t, dcr_rng_t *rng)
{
    static const size_t sizes[] = {1, 2, 4, 8};
    t->es = sizes[dcr_rng_below(rng, 4)];
    t->n = 1 + dcr_rng_below(rng, 5 * 65536);
    size_t bytes = t->n * t->es;
    t->tracker = malloc(bytes);
    t->original = malloc(bytes);
    t->cand = malloc(bytes);
    t->expect = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) t->tracker[i] = (unsigned char)dcr_rng_below(rng, 256);
    memcpy(t->original, t->tracker, bytes);
    memcpy(t->expect, t->tracker, bytes);
    for (size_t i = 0; i < bytes; i++) t->cand[i] = (unsigned char)dcr_rng_below(rng, 256);
}

static void case_close(tracker_case_t *t)
{
    free(t->tracker);
    free(t->original);
    free(t->cand);
    free(t->expect);
}

/* Random ascending positions in [0, len) at about the given rate. */
static size_t draw_changes(dcr_rng_t *rng, size_t len, double rate, uint32_t *idx)
{
    size_t n = 0;
    for (size_t k = 0; k < len; k++)
        if (dcr_rng_uniform(rng) < rate) idx[n++] = (uint32_t)k;
    return n;
}

static void test_undo_log_against_dense_oracle(void **state)
{
    uint64_t seed = testkit_seed(0x1d0);
    print_message("seed 0x%llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    uint32_t *idx = malloc(((size_t)1 << 20) * sizeof(uint32_t));
    int refused = 0, accepted = 0;
    for (int round = 0; round < 40; round++) {
        tracker_case_t cases[3];
        int ncases = 1 + (int)dcr_rng_below(&rng, 3);
        for (int c = 0; c < ncases; c++) case_open(&cases[c], &rng);
        /* Limits from none to unbounded, so that some updates are refused. */
        dcr__undo_log_t log = {0};
        const size_t limits[] = {0, 64, 1 << 12, 1 << 16, 1 << 20, SIZE_MAX / 2};
        log.limit = limits[dcr_rng_below(&rng, 6)];
        const double rates[] = {0.0005, 0.01, 0.05, 0.3, 1.0};
        for (int c = 0; c < ncases; c++) {
            tracker_case_t *t = &cases[c];
            double rate = rates[dcr_rng_below(&rng, 5)];
            /* Consecutive sub-runs of random length, as a task's box runs. */
            for (size_t pos = 0; pos < t->n;) {
                size_t len = 1 + dcr_rng_below(&rng, 3 * 65536);
                if (len > t->n - pos) len = t->n - pos;
                size_t n = draw_changes(&rng, len, rate, idx);
                unsigned char *tr = t->tracker + pos * t->es;
                unsigned char *before = malloc(len * t->es + 1);
                memcpy(before, tr, len * t->es);
                bool was_full = log.full;
                bool ok = dcr__undo_update(&log, tr, t->cand + pos * t->es, idx, n, t->es);
                if (ok) {
                    assert_false(was_full && n > 0);
                    for (size_t i = 0; i < n; i++)
                        memcpy(t->expect + (pos + idx[i]) * t->es, t->cand + (pos + idx[i]) * t->es,
                               t->es);
                    accepted += n > 0;
                } else {
                    assert_true(log.full);
                    assert_memory_equal(tr, before, len * t->es); /* all or nothing */
                    refused++;
                }
                assert_true(log.len <= log.limit);
                free(before);
                pos += len;
            }
            assert_memory_equal(t->tracker, t->expect, t->n * t->es);
        }
        if (dcr_rng_below(&rng, 4) == 0) {
            dcr__undo_forget(&log); /* committed: the updates stay */
            for (int c = 0; c < ncases; c++)
                assert_memory_equal(cases[c].tracker, cases[c].expect, cases[c].n * cases[c].es);
        } else {
            dcr__undo_apply(&log);
            for (int c = 0; c < ncases; c++)
                assert_memory_equal(cases[c].tracker, cases[c].original, cases[c].n * cases[c].es);
        }
        assert_int_equal(log.len, 0);
        assert_false(log.full);
        dcr__undo_free(&log);
        for (int c = 0; c < ncases; c++) case_close(&cases[c]);
    }
    assert_true(refused > 0);
    assert_true(accepted > 0);
    free(idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_undo_log_against_dense_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
