/* ctest-labels: unit */
/* The interval recorder: every span recorded exactly once with its tags, from
 * several threads at once and across chunk boundaries; nothing recorded while
 * disabled; snapshots taken while threads record see, per thread, a prefix of
 * what it recorded; reset; the NVTX message format. Also prints the cost of a
 * span (a benchmark, not an assertion: timed tests are flaky on shared CPUs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/trace.h"

/* Spans per thread: more than two recorder chunks (1024 each), so chunk
 * hand-over is exercised. */
#define SPANS   2600
#define THREADS 4
/* id = thread * ID_STRIDE + sequence number, so each span is identifiable. */
#define ID_STRIDE 100000

static int setup(void **state)
{
    (void)state;
    dcr_trace_enable(false);
    dcr_trace_reset();
    dcr_trace_set_refit(0);
    return 0;
}

static dcr_trace_interval_t *snapshot(size_t *n)
{
    dcr_trace_interval_t *iv = (dcr_trace_interval_t *)&iv;
    assert_int_equal(dcr_trace_snapshot(&iv, n), DCR_OK);
    return iv;
}

static void test_names(void **state)
{
    (void)state;
    for (int s = 0; s < DCR_STAGE_COUNT; s++) {
        dcr_stage_t back = DCR_STAGE_COUNT;
        assert_int_equal(dcr_stage_from_name(dcr_stage_name((dcr_stage_t)s), &back), DCR_OK);
        assert_int_equal(back, s);
    }
    for (int a = 0; a < DCR_ACTOR_COUNT; a++) {
        dcr_actor_t back = DCR_ACTOR_COUNT;
        assert_int_equal(dcr_actor_from_name(dcr_actor_name((dcr_actor_t)a), &back), DCR_OK);
        assert_int_equal(back, a);
    }
    assert_string_equal(dcr_stage_name(DCR_STAGE_COMPARE), "compare");
    assert_string_equal(dcr_stage_name(DCR_STAGE_REFIT), "refit");
    assert_string_equal(dcr_actor_name(DCR_ACTOR_ENDPOINT), "endpoint");
    assert_string_equal(dcr_stage_name(DCR_STAGE_COUNT), "?");
    assert_string_equal(dcr_actor_name((dcr_actor_t)-1), "?");
    dcr_stage_t s = DCR_STAGE_ZSTD;
    assert_int_equal(dcr_stage_from_name("Compare", &s), DCR_ENOTFOUND);
    assert_int_equal(dcr_stage_from_name(NULL, &s), DCR_ENOTFOUND);
    assert_int_equal(s, DCR_STAGE_ZSTD);
}

static void test_disabled_records_nothing(void **state)
{
    (void)state;
    assert_false(dcr_trace_enabled());
    dcr_trace_span_t sp = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 1);
    assert_int_equal(sp.start_ns, 0);
    dcr_trace_end(&sp);
    dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 10, 20);
    size_t n = 99;
    dcr_trace_interval_t *iv = snapshot(&n);
    assert_int_equal(n, 0);
    assert_null(iv);
}

static void test_tags_and_order(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    dcr_trace_set_refit(7);
    dcr_trace_span_t outer = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 3);
    dcr_trace_span_t inner = dcr_trace_begin(DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, -2);
    /* The refit tag is the one current at begin, not at end. */
    dcr_trace_set_refit(8);
    dcr_trace_end(&inner);
    dcr_trace_end(&outer);
    dcr_trace_end(&outer); /* a second end does nothing */
    dcr_trace_end(NULL);
    dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 5, 6);
    dcr_trace_record_refit(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 4, 42, 1, 2);
    /* Dropped: end before start, and tags out of range. */
    dcr_trace_record(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 4, 9, 8);
    dcr_trace_record(DCR_STAGE_COUNT, DCR_ACTOR_RECEIVER, 4, 1, 2);
    dcr_trace_record(DCR_STAGE_APPLY, DCR_ACTOR_COUNT, 4, 1, 2);
    /* A cancelled span leaves nothing, and its end then does nothing either. */
    dcr_trace_span_t cancelled = dcr_trace_begin(DCR_STAGE_RECV, DCR_ACTOR_NODE, 1);
    assert_int_not_equal(cancelled.start_ns, 0);
    dcr_trace_cancel(&cancelled);
    dcr_trace_end(&cancelled);
    dcr_trace_cancel(NULL);
    dcr_trace_span_t bad = dcr_trace_begin(DCR_STAGE_COUNT, DCR_ACTOR_OWNER, 0);
    assert_int_equal(bad.start_ns, 0);
    dcr_trace_end(&bad);

    size_t n = 0;
    dcr_trace_interval_t *iv = snapshot(&n);
    assert_int_equal(n, 4);
    /* Sorted by start: the two recorded ones (tiny times), then outer, inner. */
    assert_int_equal(iv[0].stage, DCR_STAGE_APPLY);
    assert_int_equal(iv[0].refit, 42);
    assert_int_equal(iv[0].id, 4);
    assert_int_equal(iv[1].stage, DCR_STAGE_REFIT);
    assert_int_equal(iv[1].refit, 8);
    assert_int_equal(iv[1].start_ns, 5);
    assert_int_equal(iv[1].end_ns, 6);
    assert_int_equal(iv[2].stage, DCR_STAGE_SEND);
    assert_int_equal(iv[2].actor, DCR_ACTOR_ENDPOINT);
    assert_int_equal(iv[2].id, 3);
    assert_int_equal(iv[2].refit, 7);
    assert_int_equal(iv[3].stage, DCR_STAGE_ZSTD);
    assert_int_equal(iv[3].actor, DCR_ACTOR_OWNER);
    assert_int_equal(iv[3].id, -2);
    assert_int_equal(iv[3].refit, 7);
    /* The inner span lies within the outer one. */
    assert_true(iv[2].start_ns <= iv[3].start_ns && iv[3].end_ns <= iv[2].end_ns);
    assert_true(iv[2].start_ns < iv[2].end_ns || iv[2].start_ns == iv[2].end_ns);
    assert_int_equal(dcr_trace_dropped(), 0);
    free(iv);
}

typedef struct worker {
    int thread;
    atomic_bool *go;
} worker_t;

/* Records SPANS spans, alternating begin/end spans and recorded intervals,
 * each with tags derived from its sequence number. */
static void *record_spans(void *arg)
{
    const worker_t *w = arg;
    while (w->go && !atomic_load(w->go)) {
    }
    for (int i = 0; i < SPANS; i++) {
        int id = w->thread * ID_STRIDE + i;
        dcr_stage_t stage = (dcr_stage_t)(i % DCR_STAGE_COUNT);
        dcr_actor_t actor = (dcr_actor_t)(w->thread % DCR_ACTOR_COUNT);
        if (i % 2) {
            dcr_trace_span_t sp = dcr_trace_begin(stage, actor, id);
            dcr_trace_end(&sp);
        } else {
            uint64_t t = dcr_clock_ns();
            dcr_trace_record_refit(stage, actor, id, (uint32_t)i, t, t + (uint64_t)i);
        }
    }
    return NULL;
}

/* Checks each interval's tags against its id and returns, per thread, how
 * many were seen, failing on duplicates. With prefix set, also checks that
 * each thread's intervals are exactly its first count ones. */
static void check_intervals(const dcr_trace_interval_t *iv, size_t n, size_t counts[THREADS],
                            bool prefix)
{
    static unsigned char seen[THREADS][SPANS];
    memset(seen, 0, sizeof(seen));
    memset(counts, 0, THREADS * sizeof(counts[0]));
    for (size_t k = 0; k < n; k++) {
        int t = iv[k].id / ID_STRIDE, i = iv[k].id % ID_STRIDE;
        assert_true(t >= 0 && t < THREADS && i < SPANS);
        assert_int_equal(iv[k].stage, i % DCR_STAGE_COUNT);
        assert_int_equal(iv[k].actor, t % DCR_ACTOR_COUNT);
        assert_true(iv[k].end_ns >= iv[k].start_ns);
        if (i % 2 == 0) {
            assert_int_equal(iv[k].refit, (uint32_t)i);
            assert_int_equal(iv[k].end_ns - iv[k].start_ns, (uint64_t)i);
        }
        assert_int_equal(seen[t][i], 0);
        seen[t][i] = 1;
        counts[t]++;
    }
    for (int t = 0; prefix && t < THREADS; t++)
        for (size_t i = 0; i < SPANS; i++) assert_int_equal(seen[t][i], i < counts[t]);
}

static void run_workers(atomic_bool *go, pthread_t *th, worker_t *w)
{
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker_t){t, go};
        assert_int_equal(pthread_create(&th[t], NULL, record_spans, &w[t]), 0);
    }
}

static void test_threads_each_span_once(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    pthread_t th[THREADS];
    worker_t w[THREADS];
    run_workers(NULL, th, w);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    size_t n = 0, counts[THREADS];
    dcr_trace_interval_t *iv = snapshot(&n);
    assert_int_equal(n, THREADS * SPANS);
    check_intervals(iv, n, counts, true);
    for (size_t k = 1; k < n; k++) assert_true(iv[k - 1].start_ns <= iv[k].start_ns);
    free(iv);
}

static void test_snapshot_while_recording(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    atomic_bool go = false;
    pthread_t th[THREADS];
    worker_t w[THREADS];
    run_workers(&go, th, w);
    atomic_store(&go, true);
    size_t last = 0, counts[THREADS];
    int snapshots = 0;
    /* Every snapshot is consistent on its own and never shrinks. */
    while (last < THREADS * SPANS) {
        size_t n = 0;
        dcr_trace_interval_t *iv = snapshot(&n);
        check_intervals(iv, n, counts, true);
        assert_true(n >= last);
        last = n;
        free(iv);
        snapshots++;
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    print_message("snapshot while recording: %d snapshots\n", snapshots);
}

static void test_reset(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    for (int i = 0; i < 1500; i++) dcr_trace_record(DCR_STAGE_ACK, DCR_ACTOR_RECEIVER, i, 1, 2);
    dcr_trace_span_t open = dcr_trace_begin(DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 9);
    size_t n = 0;
    free(snapshot(&n));
    assert_int_equal(n, 1500);
    dcr_trace_reset();
    free(snapshot(&n));
    assert_int_equal(n, 0);
    /* This thread's buffer was freed; recording goes on in a fresh one, and
     * the span open across the reset is recorded when it ends. */
    dcr_trace_record(DCR_STAGE_SYNC, DCR_ACTOR_RECEIVER, 1, 3, 4);
    dcr_trace_end(&open);
    dcr_trace_interval_t *iv = snapshot(&n);
    assert_int_equal(n, 2);
    assert_int_equal(iv[0].stage, DCR_STAGE_SYNC);
    assert_int_equal(iv[1].stage, DCR_STAGE_COMMIT);
    assert_int_equal(iv[1].id, 9);
    free(iv);
    /* Threads that recorded before a reset record again after it. */
    pthread_t th[THREADS];
    worker_t w[THREADS];
    run_workers(NULL, th, w);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    dcr_trace_reset();
    run_workers(NULL, th, w);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    size_t counts[THREADS];
    iv = snapshot(&n);
    assert_int_equal(n, THREADS * SPANS);
    check_intervals(iv, n, counts, true);
    free(iv);
}

/* snapshot_since copies only the intervals ending at or after its time. */
static void test_snapshot_since(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    for (int i = 1; i <= 10; i++)
        dcr_trace_record(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, i, 0, (uint64_t)(10 * i));
    size_t n = 0;
    dcr_trace_interval_t *iv = NULL;
    assert_int_equal(dcr_trace_snapshot_since(55, &iv, &n), DCR_OK);
    assert_int_equal(n, 5);
    for (size_t k = 0; k < n; k++) assert_true(iv[k].end_ns >= 60);
    free(iv);
    assert_int_equal(dcr_trace_snapshot_since(101, &iv, &n), DCR_OK);
    assert_int_equal(n, 0);
    assert_null(iv);
    free(snapshot(&n));
    assert_int_equal(n, 10);
}

enum { DISCARD_SPANS = 300, LIVE_ID = 7 };

typedef struct discard_worker {
    int id;
    atomic_bool *release; /* NULL: end at once */
} discard_worker_t;

static void *record_then_wait(void *arg)
{
    discard_worker_t *w = arg;
    for (int i = 0; i < DISCARD_SPANS; i++)
        dcr_trace_record(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, w->id, (uint64_t)i, (uint64_t)i + 1);
    while (w->release && !atomic_load(w->release)) usleep(1000);
    return NULL;
}

/* discard_before frees what threads that ended or filled their buffers
 * recorded, while a live thread keeps its current buffer and records on. */
static void test_discard_before(void **state)
{
    (void)state;
    dcr_trace_enable(true);
    for (int i = 0; i < 3; i++) dcr_trace_record(DCR_STAGE_ACK, DCR_ACTOR_COORD, -1, 1, 5);
    pthread_t th[THREADS], live;
    discard_worker_t w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (discard_worker_t){t, NULL};
        assert_int_equal(pthread_create(&th[t], NULL, record_then_wait, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    atomic_bool release = false;
    discard_worker_t lw = {LIVE_ID, &release};
    assert_int_equal(pthread_create(&live, NULL, record_then_wait, &lw), 0);
    size_t n = 0;
    /* Wait until the live thread recorded everything. */
    for (;;) {
        free(snapshot(&n));
        if (n == 3 + (THREADS + 1) * DISCARD_SPANS) break;
        usleep(1000);
    }
    /* Nothing ended before time 1. */
    dcr_trace_discard_before(1);
    free(snapshot(&n));
    assert_int_equal(n, 3 + (THREADS + 1) * DISCARD_SPANS);
    dcr_trace_discard_before(1000);
    dcr_trace_interval_t *iv = snapshot(&n);
    size_t mine = 0, live_kept = 0;
    uint64_t live_first_end = UINT64_MAX;
    for (size_t k = 0; k < n; k++) {
        if (iv[k].id == -1) mine++;
        assert_true(iv[k].id == -1 || iv[k].id == LIVE_ID);
        if (iv[k].id == LIVE_ID) {
            live_kept++;
            if (iv[k].end_ns < live_first_end) live_first_end = iv[k].end_ns;
        }
    }
    free(iv);
    /* This thread's current buffer stays; of the live thread only its
     * current buffer, the latest intervals it recorded. */
    assert_int_equal(mine, 3);
    assert_true(live_kept > 0 && live_kept < DISCARD_SPANS);
    assert_int_equal(live_first_end, (uint64_t)(DISCARD_SPANS - live_kept + 1));
    atomic_store(&release, true);
    pthread_join(live, NULL);
    dcr_trace_discard_before(1000);
    free(snapshot(&n));
    assert_int_equal(n, 3);
    /* Recording goes on as before. */
    dcr_trace_record(DCR_STAGE_ACK, DCR_ACTOR_COORD, -1, 1, 5000);
    dcr_trace_discard_before(1000);
    free(snapshot(&n));
    assert_int_equal(n, 4);
}

static void test_message_format(void **state)
{
    (void)state;
    char buf[96];
    dcr_trace_format_message(buf, sizeof(buf), DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 3, 7);
    assert_string_equal(buf, "compare owner=3 refit=7");
    dcr_trace_interval_t iv = {11, 22, 0, 0, 0, 0};
    assert_int_equal(dcr_trace_parse_message(buf, &iv), DCR_OK);
    assert_int_equal(iv.stage, DCR_STAGE_COMPARE);
    assert_int_equal(iv.actor, DCR_ACTOR_OWNER);
    assert_int_equal(iv.id, 3);
    assert_int_equal(iv.refit, 7);
    assert_int_equal(iv.start_ns, 11); /* times untouched */
    /* Every stage, actor and the extreme numbers round-trip. */
    for (int s = 0; s < DCR_STAGE_COUNT; s++)
        for (int a = 0; a < DCR_ACTOR_COUNT; a++) {
            int id = s % 2 ? INT32_MIN : INT32_MAX;
            uint32_t refit = a % 2 ? UINT32_MAX : 0;
            dcr_trace_format_message(buf, sizeof(buf), (dcr_stage_t)s, (dcr_actor_t)a, id, refit);
            assert_int_equal(dcr_trace_parse_message(buf, &iv), DCR_OK);
            assert_int_equal(iv.stage, s);
            assert_int_equal(iv.actor, a);
            assert_int_equal(iv.id, id);
            assert_int_equal(iv.refit, refit);
        }
    const char *bad[] = {
        "",
        "compare",
        "compare owner=3",
        "compare owner=3 refit=",
        "compare owner=3 refit=7 ",
        "compare owner=3 refit=7x",
        "compare  owner=3 refit=7",
        "Compare owner=3 refit=7",
        "compare boss=3 refit=7",
        "compare owner= refit=7",
        "compare owner=+3 refit=7",
        "compare owner=2147483648 refit=7",
        "compare owner=3 refit=-1",
        "compare owner=3 refit=4294967296",
        "compare owner=3 epoch=7",
        "compare owner=3 refit=99999999999999999999999",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dcr_trace_interval_t keep = {1, 2, 3, 4, 0, 5};
        if (dcr_trace_parse_message(bad[i], &keep) != DCR_EPARSE) fail_msg("accepted '%s'", bad[i]);
        assert_int_equal(keep.refit, 3);
        assert_int_equal(keep.id, 5);
    }
}

/* The cost of a span, disabled and enabled: a benchmark printed for the
 * record, never asserted. */
static void test_span_overhead(void **state)
{
    (void)state;
    enum { N = 200000 };
    uint64_t t = dcr_clock_ns();
    for (int i = 0; i < N; i++) {
        dcr_trace_span_t sp = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, i);
        dcr_trace_end(&sp);
    }
    double off = (double)(dcr_clock_ns() - t) / N;
    dcr_trace_enable(true);
    t = dcr_clock_ns();
    for (int i = 0; i < N; i++) {
        dcr_trace_span_t sp = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, i);
        dcr_trace_end(&sp);
    }
    double on = (double)(dcr_clock_ns() - t) / N;
    t = dcr_clock_ns();
    for (int i = 0; i < N; i++) (void)dcr_clock_ns();
    double clock = (double)(dcr_clock_ns() - t) / N;
    size_t n = 0;
    free(snapshot(&n));
    assert_int_equal(n, N);
    print_message("span overhead: disabled %.1f ns, enabled %.1f ns per span (one clock read "
                  "%.1f ns; %d spans)\n",
                  off, on, clock, N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_names, setup),
        cmocka_unit_test_setup(test_disabled_records_nothing, setup),
        cmocka_unit_test_setup(test_tags_and_order, setup),
        cmocka_unit_test_setup(test_threads_each_span_once, setup),
        cmocka_unit_test_setup(test_snapshot_while_recording, setup),
        cmocka_unit_test_setup(test_reset, setup),
        cmocka_unit_test_setup(test_snapshot_since, setup),
        cmocka_unit_test_setup(test_discard_before, setup),
        cmocka_unit_test_setup(test_message_format, setup),
        cmocka_unit_test_setup(test_span_overhead, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
