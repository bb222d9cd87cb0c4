/* ctest-labels: unit */
/* Lower bounds, finalization and latency of a refit against cases computed
 * by hand from the seed's definitions (overlaps counted once, clipping to
 * [t0, t1], intervals outside the window ignored, the busiest of several
 * owners, finalization from the last apply), and against a brute-force
 * nanosecond-by-nanosecond count on random traces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/rng.h"
#include "dcr/trace.h"

#define IV(s, e, stage, actor, id)                                                                 \
    {                                                                                              \
        (s), (e), 0, (stage), (actor), (id)                                                        \
    }
#define IVR(s, e, refit, stage, actor, id)                                                         \
    {                                                                                              \
        (s), (e), (refit), (stage), (actor), (id)                                                  \
    }

/* Exactly ns nanoseconds in seconds, the way a reader would convert it. */
static void assert_seconds(double got, int64_t ns)
{
    double want = (double)ns * 1e-9;
    if (fabs(got - want) > 1e-15) fail_msg("got %.12g s, expected %lld ns", got, (long long)ns);
}

/* Window [1000, 2000]. Owner 0: compare [1100,1300] and project [1200,1400]
 * overlap, so together they cover [1100,1400] = 300, plus zstd [1500,1600] =
 * 100: 400. Owner 1: encode [1000,1350] = 350. Owner 2: compare [500,1100]
 * clips to [1000,1100] = 100, compare [1900,2500] clips to [1900,2000] = 100,
 * two compares wholly outside count 0: 200. Construction = 400 (owner 0).
 * Endpoint 0: sends [1100,1200] and [1150,1250] cover 150, [1300,1400] 100:
 * 250; endpoint 1: [1000,1260] = 260. Transport = 260 (endpoint 1). Applies
 * end last at 1800 (one after the window is ignored): finalization 200.
 * Latency 1000; remainder 1000 - (400 + 200) = 400. */
static const dcr_trace_interval_t case_a[] = {
    IV(1000, 2000, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
    IV(1100, 1300, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0),
    IV(1200, 1400, DCR_STAGE_PROJECT, DCR_ACTOR_OWNER, 0),
    IV(1500, 1600, DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 0),
    IV(1000, 1350, DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, 1),
    IV(500, 1100, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 2),
    IV(1900, 2500, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 2),
    IV(2500, 2600, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 2),
    IV(100, 900, DCR_STAGE_RESIDUAL, DCR_ACTOR_OWNER, 2),
    IV(1100, 1200, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0),
    IV(1150, 1250, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0),
    IV(1300, 1400, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0),
    IV(1000, 1260, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 1),
    IV(1500, 1700, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 1),
    IV(1600, 1800, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 1),
    IV(1750, 1790, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0),
    IV(2100, 2200, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0),
    /* Stages and actors that neither bound takes, however long. */
    IV(1000, 2000, DCR_STAGE_COMPARE, DCR_ACTOR_RECEIVER, 0),
    IV(1000, 2000, DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, 0),
    IV(1000, 2000, DCR_STAGE_SEND, DCR_ACTOR_OWNER, 0),
    IV(1000, 2000, DCR_STAGE_RECV, DCR_ACTOR_NODE, 0),
    IV(1000, 2000, DCR_STAGE_STAGING, DCR_ACTOR_ENDPOINT, 1),
};
#define NA (sizeof(case_a) / sizeof(case_a[0]))

static void test_hand_case(void **state)
{
    (void)state;
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(case_a, NA, 0, &b), DCR_OK);
    assert_seconds(b.construction_lb_s, 400);
    assert_int_equal(b.busiest_owner, 0);
    assert_seconds(b.transport_lb_s, 260);
    assert_int_equal(b.busiest_endpoint, 1);
    assert_seconds(b.finalization_s, 200);
    assert_seconds(b.latency_s, 1000);
    assert_seconds(b.remainder_s, 400);

    /* Order does not matter. */
    dcr_trace_interval_t rev[NA];
    for (size_t i = 0; i < NA; i++) rev[i] = case_a[NA - 1 - i];
    dcr_bounds_t r;
    assert_int_equal(dcr_bounds_compute(rev, NA, 0, &r), DCR_OK);
    assert_memory_equal(&r, &b, sizeof(b));
}

/* The object store: an endpoint's transport intervals are its uploads (send)
 * and the rollout nodes' downloads of its payloads (fetch), counted once
 * where they overlap. Window [0, 1000]. Endpoint 0: send [100,200], fetches
 * [210,300] and [250,330] by two nodes: 100 + 120 = 220. Endpoint 1: send
 * [0,150] = 150. Fetch intervals on a node are not an endpoint's. Transport
 * = 220 (endpoint 0); by sends alone it would be 150 (endpoint 1). */
static void test_fetch_extends_send(void **state)
{
    (void)state;
    const dcr_trace_interval_t iv[] = {
        IV(0, 1000, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IV(100, 200, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0),
        IV(210, 300, DCR_STAGE_FETCH, DCR_ACTOR_ENDPOINT, 0),
        IV(250, 330, DCR_STAGE_FETCH, DCR_ACTOR_ENDPOINT, 0),
        IV(0, 150, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 1),
        IV(0, 1000, DCR_STAGE_FETCH, DCR_ACTOR_NODE, 1),
    };
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(iv, sizeof(iv) / sizeof(iv[0]), 0, &b), DCR_OK);
    assert_seconds(b.transport_lb_s, 220);
    assert_int_equal(b.busiest_endpoint, 0);
}

/* Post-apply checks are not latency: checks [1850,1900] and [1880,1950]
 * cover 100 after the last apply (1800), [1050,1100] 50 before it. Latency
 * 1000 - 150 = 850, finalization 200 - 100 = 100, remainder 850 - 500 = 350. */
static void test_checks_excluded(void **state)
{
    (void)state;
    dcr_trace_interval_t iv[NA + 3];
    memcpy(iv, case_a, sizeof(case_a));
    iv[NA] = (dcr_trace_interval_t)IV(1850, 1900, DCR_STAGE_CHECK, DCR_ACTOR_RECEIVER, 0);
    iv[NA + 1] = (dcr_trace_interval_t)IV(1880, 1950, DCR_STAGE_CHECK, DCR_ACTOR_RECEIVER, 1);
    iv[NA + 2] = (dcr_trace_interval_t)IV(1050, 1100, DCR_STAGE_CHECK, DCR_ACTOR_RECEIVER, 1);
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(iv, NA + 3, 0, &b), DCR_OK);
    assert_seconds(b.latency_s, 850);
    assert_seconds(b.finalization_s, 100);
    assert_seconds(b.remainder_s, 350);
    assert_seconds(b.construction_lb_s, 400);
}

/* Two refits: each bound counts only what lies in its own window, and a
 * compare tagged with the previous refit but inside this window still counts
 * (the tag only selects the window). */
static void test_windows_by_time(void **state)
{
    (void)state;
    const dcr_trace_interval_t iv[] = {
        IVR(0, 100, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(10, 60, 1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 5),
        IVR(200, 400, 2, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(190, 230, 1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 5), /* 30 inside window 2 */
        IVR(250, 300, 2, DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 5),
        IVR(260, 390, 2, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0),
    };
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(iv, 6, 1, &b), DCR_OK);
    assert_seconds(b.construction_lb_s, 50);
    assert_seconds(b.latency_s, 100);
    assert_seconds(b.finalization_s, 0); /* nothing applied in window 1 */
    assert_seconds(b.remainder_s, 50);
    assert_int_equal(b.busiest_endpoint, -1);
    assert_seconds(b.transport_lb_s, 0);
    assert_int_equal(dcr_bounds_compute(iv, 6, 2, &b), DCR_OK);
    assert_seconds(b.construction_lb_s, 80);
    assert_int_equal(b.busiest_owner, 5);
    assert_seconds(b.finalization_s, 10);
    assert_seconds(b.remainder_s, 200 - 90);

    uint32_t *refits = NULL;
    size_t nr = 0;
    assert_int_equal(dcr_bounds_refits(iv, 6, &refits, &nr), DCR_OK);
    assert_int_equal(nr, 2);
    assert_int_equal(refits[0], 1);
    assert_int_equal(refits[1], 2);
    free(refits);
}

static void test_ties_and_errors(void **state)
{
    (void)state;
    /* Equal unions: the smaller id wins, negative ids included. */
    const dcr_trace_interval_t tie[] = {
        IV(0, 100, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IV(10, 20, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 3),
        IV(30, 40, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, -5),
        IV(50, 60, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 8),
        IV(50, 60, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 7),
        /* Touching intervals: one run with no gap and no double count. */
        IV(20, 30, DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, 9),
        IV(10, 20, DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, 9),
        IV(15, 15, DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, 9), /* empty */
    };
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(tie, 8, 0, &b), DCR_OK);
    assert_seconds(b.construction_lb_s, 20);
    assert_int_equal(b.busiest_owner, 9);
    assert_seconds(b.transport_lb_s, 10);
    assert_int_equal(b.busiest_endpoint, 7);
    assert_int_equal(dcr_bounds_compute(tie, 5, 0, &b), DCR_OK);
    assert_seconds(b.construction_lb_s, 10);
    assert_int_equal(b.busiest_owner, -5);

    dcr_bounds_t keep = {.busiest_owner = 77};
    assert_int_equal(dcr_bounds_compute(tie, 8, 4, &keep), DCR_ENOTFOUND);
    assert_int_equal(keep.busiest_owner, 77);
    const dcr_trace_interval_t two[] = {IV(0, 10, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
                                        IV(20, 30, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0)};
    assert_int_equal(dcr_bounds_compute(two, 2, 0, &keep), DCR_EINVAL);
    assert_int_equal(dcr_bounds_compute(NULL, 0, 0, &keep), DCR_ENOTFOUND);
    assert_int_equal(dcr_bounds_compute(tie, 8, 0, NULL), DCR_EINVAL);
    assert_int_equal(keep.busiest_owner, 77);
}

/* A compute interval after the last apply (a mis-tagged trace) makes the
 * remainder negative; it is reported, not hidden. */
static void test_negative_remainder_reported(void **state)
{
    (void)state;
    const dcr_trace_interval_t iv[] = {
        IV(0, 100, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IV(0, 90, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0),
        IV(10, 20, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0),
    };
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(iv, 3, 0, &b), DCR_OK);
    assert_seconds(b.finalization_s, 80);
    assert_seconds(b.remainder_s, 100 - (90 + 80));
}

static void test_mean(void **state)
{
    (void)state;
    dcr_bounds_t b[2] = {{1, 2, 3, 4, 5, 1, 2}, {3, 4, 5, 6, -1, 3, 4}};
    dcr_bounds_t m;
    dcr_bounds_mean(b, 2, &m);
    assert_true(m.construction_lb_s == 2 && m.transport_lb_s == 3 && m.finalization_s == 4);
    assert_true(m.latency_s == 5 && m.remainder_s == 2);
    assert_int_equal(m.busiest_owner, -1);
    assert_int_equal(m.busiest_endpoint, -1);
    dcr_bounds_mean(b, 0, &m);
    assert_true(m.latency_s == 0);
}

/* ---- property: random traces against a brute-force count ---- */

#define SPAN   600 /* window [T0, T0 + SPAN] */
#define T0     200
#define ACTORS 4

/* Covered nanoseconds of one actor's intervals within the window, by marking
 * every nanosecond: independent of the sweep under test. */
static int64_t brute_union(const dcr_trace_interval_t *iv, size_t n, bool owner, int id)
{
    static unsigned char mark[SPAN];
    memset(mark, 0, sizeof(mark));
    for (size_t i = 0; i < n; i++) {
        bool take = owner ? iv[i].actor == DCR_ACTOR_OWNER && iv[i].stage <= DCR_STAGE_ZSTD
                          : iv[i].actor == DCR_ACTOR_ENDPOINT &&
                                (iv[i].stage == DCR_STAGE_SEND || iv[i].stage == DCR_STAGE_FETCH);
        if (!take || iv[i].id != id) continue;
        for (uint64_t t = iv[i].start_ns; t < iv[i].end_ns; t++)
            if (t >= T0 && t < T0 + SPAN) mark[t - T0] = 1;
    }
    int64_t covered = 0;
    for (int t = 0; t < SPAN; t++) covered += mark[t];
    return covered;
}

static void random_trace(dcr_rng_t *rng, dcr_trace_interval_t *iv, size_t n)
{
    iv[0] = (dcr_trace_interval_t)IV(T0, T0 + SPAN, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0);
    for (size_t i = 1; i < n; i++) {
        uint64_t s = dcr_rng_below(rng, SPAN + 2 * T0);
        uint64_t e = s + dcr_rng_below(rng, 150);
        uint16_t stage = (uint16_t)dcr_rng_below(rng, DCR_STAGE_APPLY + 2);
        if (stage == DCR_STAGE_APPLY) stage = DCR_STAGE_RECV;
        if (stage == DCR_STAGE_APPLY + 1) stage = DCR_STAGE_FETCH;
        uint16_t actor = (uint16_t)dcr_rng_below(rng, 3);
        iv[i] = (dcr_trace_interval_t){s, e, 0, stage, actor, (int32_t)dcr_rng_below(rng, ACTORS)};
    }
}

static void test_random_against_brute_force(void **state)
{
    (void)state;
    const char *env = getenv("DCR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : 0x7ace;
    print_message("seed %#llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int round = 0; round < 200; round++) {
        dcr_trace_interval_t iv[60];
        size_t n = 1 + dcr_rng_below(&rng, 59);
        random_trace(&rng, iv, n);
        int64_t want_c = 0, want_t = 0;
        int owner = -1, endpoint = -1;
        for (int id = 0; id < ACTORS; id++) {
            int64_t c = brute_union(iv, n, true, id), t = brute_union(iv, n, false, id);
            if (c > want_c) want_c = c, owner = id;
            if (t > want_t) want_t = t, endpoint = id;
        }
        dcr_bounds_t b;
        assert_int_equal(dcr_bounds_compute(iv, n, 0, &b), DCR_OK);
        assert_seconds(b.construction_lb_s, want_c);
        assert_seconds(b.transport_lb_s, want_t);
        /* With no covered time the busiest id is still the first with any
         * interval, or -1; only compare when some time was covered. */
        if (want_c) assert_int_equal(b.busiest_owner, owner);
        if (want_t) assert_int_equal(b.busiest_endpoint, endpoint);
        assert_true(b.construction_lb_s <= b.latency_s && b.transport_lb_s <= b.latency_s);
    }
}

/* dcr_bounds_compute_all against dcr_bounds_compute refit by refit (the
 * oracle checked above) on random traces of several windows, some intervals
 * reaching over window edges, in random order. */
static void test_compute_all_matches_per_refit(void **state)
{
    (void)state;
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 0xa11);
    enum { N = 400, WINDOWS = 6 };
    for (int round = 0; round < 50; round++) {
        dcr_trace_interval_t iv[N], copy[N];
        for (int w = 0; w < WINDOWS; w++)
            iv[w] = (dcr_trace_interval_t)IVR(1000 * (w + 1), 1000 * (w + 1) + 600, (uint32_t)w + 1,
                                              DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0);
        for (int i = WINDOWS; i < N; i++) {
            uint64_t s = dcr_rng_below(&rng, 1000 * (WINDOWS + 1));
            uint64_t e = s + dcr_rng_below(&rng, round % 5 == 0 ? 3000 : 200);
            uint16_t stage = (uint16_t)dcr_rng_below(&rng, DCR_STAGE_REFIT);
            iv[i] = (dcr_trace_interval_t){s,
                                           e,
                                           (uint32_t)dcr_rng_below(&rng, WINDOWS + 1),
                                           stage,
                                           (uint16_t)dcr_rng_below(&rng, 3),
                                           (int32_t)dcr_rng_below(&rng, ACTORS)};
        }
        for (int i = N - 1; i > 0; i--) { /* shuffle */
            int j = (int)dcr_rng_below(&rng, (uint64_t)i + 1);
            dcr_trace_interval_t t = iv[i];
            iv[i] = iv[j];
            iv[j] = t;
        }
        memcpy(copy, iv, sizeof(iv));
        uint32_t *refits = NULL;
        size_t nr = 0;
        assert_int_equal(dcr_bounds_refits(iv, N, &refits, &nr), DCR_OK);
        assert_int_equal(nr, WINDOWS);
        dcr_bounds_t all[WINDOWS];
        assert_int_equal(dcr_bounds_compute_all(copy, N, refits, nr, all), DCR_OK);
        for (size_t k = 1; k < N; k++) assert_true(copy[k - 1].start_ns <= copy[k].start_ns);
        for (size_t r = 0; r < nr; r++) {
            dcr_bounds_t one;
            assert_int_equal(dcr_bounds_compute(iv, N, refits[r], &one), DCR_OK);
            assert_memory_equal(&one, &all[r], sizeof(one));
        }
        free(refits);
    }
    /* The same errors: two windows for one refit, a window missing. */
    dcr_trace_interval_t two[] = {IVR(0, 10, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
                                  IVR(20, 30, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0)};
    const uint32_t one_refit = 1, missing = 9;
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute_all(two, 2, &one_refit, 1, &b), DCR_EINVAL);
    assert_int_equal(dcr_bounds_compute_all(two, 2, &missing, 1, &b), DCR_ENOTFOUND);
}

#define SEC 1000000000ull

/* Sorted by start, as the check requires. */
static dcr_status_t check_sorted(dcr_trace_interval_t *iv, size_t n)
{
    uint32_t *refits = NULL;
    size_t nr = 0;
    assert_int_equal(dcr_bounds_refits(iv, n, &refits, &nr), DCR_OK);
    dcr_bounds_t b[8];
    assert_true(nr <= 8);
    dcr_status_t st = dcr_bounds_compute_all(iv, n, refits, nr, b);
    free(refits);
    if (st != DCR_OK) return st;
    return dcr_bounds_check_windows(iv, n, DCR_BOUNDS_TOLERANCE_NS);
}

/* Intervals outside every window by more than the tolerance, and windows
 * that run on past their work, are refused with one line naming them. */
static void test_check_windows(void **state)
{
    (void)state;
    const uint64_t T = 100 * SEC;
    /* Within the tolerance on both sides: accepted. */
    dcr_trace_interval_t ok[] = {
        IVR(T, T + SEC, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T - SEC / 2, T + SEC / 2, 1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0),
        IVR(T + SEC / 2, T + SEC + SEC / 2, 1, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
    };
    assert_int_equal(check_sorted(ok, 3), DCR_OK);
    /* The reproduction: an interval ending at 2^63 - 1 ns. */
    dcr_trace_interval_t far[] = {
        IVR(T, T + SEC, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T, T + SEC, 1, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
        IVR(T + SEC / 2, INT64_MAX, 1, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 3),
    };
    assert_int_equal(check_sorted(far, 3), DCR_EINVAL);
    const char *d = dcr_error_detail();
    if (!strstr(d, "send endpoint=3 refit=1") || !strstr(d, "9223372036854775807") ||
        !strstr(d, "outside every refit window") || strchr(d, '\n'))
        fail_msg("detail: %s", d);
    /* 1.5 s before the window: refused. */
    dcr_trace_interval_t early[] = {
        IVR(T - SEC - SEC / 2, T - SEC - SEC / 4, 1, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 1),
        IVR(T, T + SEC, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T, T + SEC, 1, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
    };
    assert_int_equal(check_sorted(early, 3), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "apply receiver=1"));
    /* The window itself ends at 2^63 - 1: it ran on long after its work. */
    dcr_trace_interval_t window[] = {
        IVR(T, INT64_MAX, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T, T + SEC, 1, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
    };
    assert_int_equal(check_sorted(window, 2), DCR_EINVAL);
    d = dcr_error_detail();
    if (!strstr(d, "window refit") || !strstr(d, "after the last interval")) fail_msg("%s", d);
    /* A window with nothing in it. */
    dcr_trace_interval_t empty[] = {
        IVR(T, T + SEC, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T, T + SEC, 2, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
        IVR(T + 10 * SEC, T + 11 * SEC, 2, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
        IVR(T + 10 * SEC, T + 11 * SEC, 2, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0),
        IVR(T + 20 * SEC, T + 21 * SEC, 3, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0),
    };
    assert_int_equal(check_sorted(empty, 5), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "refit=3"));
    assert_non_null(strstr(dcr_error_detail(), "holds no stage interval"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_fetch_extends_send),
        cmocka_unit_test(test_checks_excluded),
        cmocka_unit_test(test_windows_by_time),
        cmocka_unit_test(test_ties_and_errors),
        cmocka_unit_test(test_negative_remainder_reported),
        cmocka_unit_test(test_mean),
        cmocka_unit_test(test_random_against_brute_force),
        cmocka_unit_test(test_compute_all_matches_per_refit),
        cmocka_unit_test(test_check_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
