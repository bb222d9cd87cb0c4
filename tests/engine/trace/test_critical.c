/* ctest-labels: unit */
/* The critical path of a refit (dcr_critical_path): a case walked by hand
 * (work and the waits between, labelled by both sides), and on random traces
 * the properties that make it an accounting of the window, checked against
 * the intervals directly: the segments tile [t0, t1] (so they sum to the
 * window), each work segment lies inside a recorded interval of its tags,
 * and no recorded interval overlaps a wait's interior (a wait is time in
 * which nothing recorded ran). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dcr/rng.h"
#include "dcr/trace.h"

#define IV(s, e, stage, actor, id)                                                                 \
    {                                                                                              \
        (s), (e), 1, (stage), (actor), (id)                                                        \
    }

typedef struct want {
    uint64_t s, e;
    bool wait;
    uint16_t stage, actor, after_stage;
} want_t;

/* Window [0, 1000]: owner 0 compares [100, 300], endpoint 2 sends
 * [250, 600], receiver 1 applies [650, 800], the coordinator commits
 * [850, 900]; an interval outside the window and the window itself are not
 * on the path. Walking back from 1000: waits after the commit, the commit,
 * the hand-off from apply to commit, the apply, the hand-off from send to
 * apply, the send back to 250 where the compare still ran, the compare back
 * to 100, and the wait from t0. */
static void test_by_hand(void **state)
{
    (void)state;
    const dcr_trace_interval_t iv[] = {
        IV(0, 1000, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IV(100, 300, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0),
        IV(250, 600, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 2),
        IV(650, 800, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 1),
        IV(850, 900, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
        IV(1200, 1300, DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, 0),
    };
    const want_t want[] = {
        {0, 100, true, DCR_STAGE_REFIT, DCR_ACTOR_COORD, DCR_STAGE_COMPARE},
        {100, 250, false, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, DCR_STAGE_SEND},
        {250, 600, false, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, DCR_STAGE_APPLY},
        {600, 650, true, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, DCR_STAGE_APPLY},
        {650, 800, false, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, DCR_STAGE_COMMIT},
        {800, 850, true, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, DCR_STAGE_COMMIT},
        {850, 900, false, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, DCR_STAGE_REFIT},
        {900, 1000, true, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, DCR_STAGE_REFIT},
    };
    dcr_path_segment_t *seg = NULL;
    size_t n = 0;
    assert_int_equal(dcr_critical_path(iv, 6, 0, 1000, &seg, &n), DCR_OK);
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++) {
        if (seg[i].start_ns != want[i].s || seg[i].end_ns != want[i].e ||
            seg[i].wait != want[i].wait || seg[i].stage != want[i].stage ||
            seg[i].actor != want[i].actor || seg[i].after_stage != want[i].after_stage)
            fail_msg("segment %zu: [%llu, %llu] wait %d stage %u actor %u after %u", i,
                     (unsigned long long)seg[i].start_ns, (unsigned long long)seg[i].end_ns,
                     seg[i].wait, seg[i].stage, seg[i].actor, seg[i].after_stage);
    }
    free(seg);

    /* An empty window has no segment; a window with nothing in it is one wait. */
    assert_int_equal(dcr_critical_path(iv, 6, 500, 500, &seg, &n), DCR_OK);
    assert_int_equal(n, 0);
    assert_null(seg);
    assert_int_equal(dcr_critical_path(iv, 6, 2000, 3000, &seg, &n), DCR_OK);
    assert_int_equal(n, 1);
    assert_true(seg[0].wait && seg[0].start_ns == 2000 && seg[0].end_ns == 3000);
    free(seg);
    assert_int_equal(dcr_critical_path(iv, 6, 10, 5, &seg, &n), DCR_EINVAL);
}

/* Whether some interval of the segment's tags contains it. */
static bool inside_an_interval(const dcr_trace_interval_t *iv, size_t n,
                               const dcr_path_segment_t *g)
{
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == g->stage && iv[i].actor == g->actor && iv[i].id == g->id &&
            iv[i].start_ns <= g->start_ns && iv[i].end_ns >= g->end_ns)
            return true;
    return false;
}

/* Whether some interval (the window aside) ran during (s, e); an empty
 * interval ran for no time. */
static bool anything_overlaps(const dcr_trace_interval_t *iv, size_t n, uint64_t s, uint64_t e)
{
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage != DCR_STAGE_REFIT && iv[i].end_ns > iv[i].start_ns && iv[i].start_ns < e &&
            iv[i].end_ns > s)
            return true;
    return false;
}

static void test_random_traces_are_tiled(void **state)
{
    (void)state;
    const char *env = getenv("DCR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    print_message("seed %#llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + dcr_rng_below(&rng, 60);
        dcr_trace_interval_t iv[64];
        for (size_t i = 0; i < n; i++) {
            uint64_t s = dcr_rng_below(&rng, 12000), len = dcr_rng_below(&rng, 1500);
            iv[i] = (dcr_trace_interval_t)IV(s, s + len, (uint16_t)dcr_rng_below(&rng, 16),
                                             (uint16_t)dcr_rng_below(&rng, DCR_ACTOR_COUNT),
                                             (int32_t)dcr_rng_below(&rng, 4));
        }
        uint64_t t0 = 1000 + dcr_rng_below(&rng, 2000), t1 = t0 + dcr_rng_below(&rng, 9000);
        dcr_path_segment_t *seg = NULL;
        size_t ns = 0;
        assert_int_equal(dcr_critical_path(iv, n, t0, t1, &seg, &ns), DCR_OK);
        uint64_t at = t0;
        for (size_t k = 0; k < ns; k++) {
            const dcr_path_segment_t *g = &seg[k];
            if (g->start_ns != at || g->end_ns <= g->start_ns)
                fail_msg("round %d: segment %zu [%llu, %llu] does not continue at %llu", round, k,
                         (unsigned long long)g->start_ns, (unsigned long long)g->end_ns,
                         (unsigned long long)at);
            at = g->end_ns;
            if (!g->wait && !inside_an_interval(iv, n, g))
                fail_msg("round %d: work segment %zu lies in no interval of its tags", round, k);
            if (g->wait && anything_overlaps(iv, n, g->start_ns, g->end_ns))
                fail_msg("round %d: an interval ran during wait %zu [%llu, %llu]", round, k,
                         (unsigned long long)g->start_ns, (unsigned long long)g->end_ns);
        }
        assert_true(at == t1);
        free(seg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_random_traces_are_tiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
