/* ctest-labels: unit */
/* The group conformance suite, run against every registered backend. Each
 * test is a per-rank body: for an in-process backend the runner starts one
 * thread per endpoint of one group, for a cross-process backend every process
 * of the MPI job runs the body on its own endpoint. Tests branch on the
 * backend's properties, never on its name.
 *
 * Launched plainly (ctest's test_group), the binary runs the registry checks
 * and every in-process backend; launched by mpirun (test_group_mpi_np2/np4,
 * registered in CMakeLists.txt when MPI is found), it initializes MPI with
 * MPI_THREAD_MULTIPLE and runs every cross-process backend; only rank 0's
 * cmocka report reaches stdout, every rank's failures reach stderr and its
 * exit code, so any failing rank fails the mpirun.
 *
 * Expected values come from what the test itself sent (payloads name their
 * source, destination and sequence number; large payloads are a counter-based
 * pseudo-random stream regenerated on the receiving side) and, for timeouts,
 * from the monotonic clock. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef DCR_HAVE_MPI
#include <mpi.h>
#endif

#include "dcr/group.h"
#include "group/group-internal.h"

#define INPROC_RANKS  4 /* in-process group size: the same as the largest mpirun */
#define MAX_ENDPOINTS 16
#define WAIT_MS       30000 /* generous: a loaded 2-core machine, 4 oversubscribed ranks */

static const char *g_backend; /* backend under test */
static int g_mpi_world;       /* processes of the MPI job; 0 when not under mpirun */

typedef struct fixture {
    dcr_group_t *ep[MAX_ENDPOINTS];
    int count;
} fixture_t;

static fixture_t g_fx;

/* A per-rank body returns the number of failed checks (0: passed). It must not
 * use cmocka assertions: in-process ranks run on threads of their own. */
typedef int (*body_fn)(dcr_group_t *g);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s rank %d: check failed: %s\n", __FILE__, __LINE__,           \
                    g_backend, dcr_group_rank(g), #cond);                                          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_STATUS(expr, want)                                                                   \
    do {                                                                                           \
        dcr_status_t st_ = (expr);                                                                 \
        if (st_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s rank %d: %s returned %s, expected %s\n", __FILE__,          \
                    __LINE__, g_backend, dcr_group_rank(g), #expr, dcr_error_line(st_),            \
                    dcr_status_str(want));                                                         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, DCR_OK)

static const dcr_group_props_t *props(void)
{
    return &dcr_group_find(g_backend)->props;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The i-th 64-bit word of stream `seed` (splitmix64 of a counter), so the
 * receiver regenerates what the sender sent without sharing memory. */
static uint64_t stream_word(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int group_setup(void **state)
{
    int size = props()->cross_process ? g_mpi_world : INPROC_RANKS;
    memset(&g_fx, 0, sizeof g_fx);
    dcr_status_t st = dcr_group_create(g_backend, size, g_fx.ep, &g_fx.count);
    if (st != DCR_OK) {
        fprintf(stderr, "group_create(%s, %d): %s\n", g_backend, size, dcr_error_line(st));
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    for (int i = 0; i < g_fx.count; i++) dcr_group_destroy(g_fx.ep[i]);
    g_fx.count = 0;
    return 0;
}

typedef struct rank_run {
    pthread_t thread;
    body_fn body;
    dcr_group_t *g;
    int failures;
} rank_run_t;

static void *rank_main(void *arg)
{
    rank_run_t *r = arg;
    r->failures = r->body(r->g);
    return NULL;
}

/* Runs body on every endpoint this process holds, concurrently. */
static void run_ranks(body_fn body)
{
    rank_run_t runs[MAX_ENDPOINTS];
    int failures = 0;
    if (g_fx.count == 1) {
        failures = body(g_fx.ep[0]);
    } else {
        for (int i = 0; i < g_fx.count; i++) {
            runs[i] = (rank_run_t){.body = body, .g = g_fx.ep[i]};
            assert_int_equal(pthread_create(&runs[i].thread, NULL, rank_main, &runs[i]), 0);
        }
        for (int i = 0; i < g_fx.count; i++) {
            pthread_join(runs[i].thread, NULL);
            failures += runs[i].failures;
        }
    }
    assert_int_equal(failures, 0);
}

/* ---- bodies -------------------------------------------------------------- */

/* recv with the suite's timeout, for loops that cannot return at once:
 * reports a failure on stderr and returns 0. */
static int recv_logged(dcr_group_t *g, int tag, dcr_group_msg_t *m)
{
    dcr_status_t st = dcr_group_recv(g, tag, WAIT_MS, m);
    if (st != DCR_OK)
        fprintf(stderr, "%s rank %d: recv tag %d: %s\n", g_backend, dcr_group_rank(g), tag,
                dcr_error_line(st));
    return st == DCR_OK;
}

/* Every rank sends a tag-11 and a tag-12 message to every rank (itself
 * included), then takes the tag-12 ones first: recv matches the tag, not the
 * arrival order, and takes from any source. A zero-length message travels too. */
static int body_tags_any_source(dcr_group_t *g)
{
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    CHECK(size >= 1 && size <= MAX_ENDPOINTS && me >= 0 && me < size);
    for (int dst = 0; dst < size; dst++) {
        for (int tag = 11; tag <= 12; tag++) {
            int32_t words[3] = {me, dst, tag};
            CHECK_OK(dcr_group_send(g, dst, tag, words, sizeof words));
        }
    }
    CHECK_OK(dcr_group_send(g, me, 13, NULL, 0));
    for (int tag = 12; tag >= 11; tag--) {
        int seen[MAX_ENDPOINTS] = {0};
        for (int k = 0; k < size; k++) {
            dcr_group_msg_t m;
            CHECK_OK(dcr_group_recv(g, tag, WAIT_MS, &m));
            const int32_t *w = m.data;
            int ok = m.tag == tag && m.len == 3 * sizeof(int32_t) && m.src >= 0 && m.src < size &&
                     w[0] == m.src && w[1] == me && w[2] == tag && !seen[m.src];
            if (ok) seen[m.src] = 1;
            dcr_group_release(g, &m);
            CHECK(ok);
            CHECK(m.data == NULL); /* release clears it */
        }
    }
    dcr_group_msg_t m;
    CHECK_OK(dcr_group_recv(g, 13, WAIT_MS, &m));
    CHECK(m.src == me && m.len == 0 && m.tag == 13);
    dcr_group_release(g, &m);
    return 0;
}

/* Messages of one (src, tag) pair arrive in send order, also when the sender
 * interleaves destinations and the receiver takes from any source. */
static int body_order_per_pair(dcr_group_t *g)
{
    enum { K = 400 };
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    for (int32_t seq = 0; seq < K; seq++) {
        for (int dst = 0; dst < size; dst++) {
            int32_t words[2] = {me, seq};
            CHECK_OK(dcr_group_send(g, dst, 21, words, sizeof words));
        }
    }
    int32_t next[MAX_ENDPOINTS] = {0};
    for (int k = 0; k < size * K; k++) {
        dcr_group_msg_t m;
        CHECK_OK(dcr_group_recv(g, 21, WAIT_MS, &m));
        const int32_t *w = m.data;
        int ok = m.len == 2 * sizeof(int32_t) && w[0] == m.src && w[1] == next[m.src];
        next[m.src]++;
        dcr_group_release(g, &m);
        CHECK(ok);
    }
    for (int r = 0; r < size; r++) CHECK(next[r] == K);
    return 0;
}

/* recv waits at least timeout_ms and then fails with DCR_ETIMEOUT; 0 only
 * looks; a message sent while a long recv waits wakes it. */
static int body_timeouts(dcr_group_t *g)
{
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    dcr_group_msg_t m = {0};
    double t0 = now_ms();
    CHECK_STATUS(dcr_group_recv(g, 31, 0, &m), DCR_ETIMEOUT);
    CHECK(now_ms() - t0 < 1000);
    CHECK(m.data == NULL); /* nothing written on failure */
    t0 = now_ms();
    CHECK_STATUS(dcr_group_recv(g, 31, 120, &m), DCR_ETIMEOUT);
    double waited = now_ms() - t0;
    CHECK(waited >= 120 && waited < 10000);
    CHECK(strstr(dcr_error_detail(), "120 ms") != NULL);
    if (size >= 2 && me == 1) {
        struct timespec pause = {0, 200 * 1000000L};
        nanosleep(&pause, NULL);
        CHECK_OK(dcr_group_send(g, 0, 33, "other", 5)); /* another tag does not satisfy 32 */
        CHECK_OK(dcr_group_send(g, 0, 32, "late", 4));
    }
    if (size >= 2 && me == 0) {
        CHECK_OK(dcr_group_recv(g, 32, WAIT_MS, &m));
        int ok = m.src == 1 && m.len == 4 && memcmp(m.data, "late", 4) == 0;
        dcr_group_release(g, &m);
        CHECK(ok);
        CHECK_OK(dcr_group_recv(g, 33, WAIT_MS, &m));
        ok = m.src == 1 && m.len == 5 && memcmp(m.data, "other", 5) == 0;
        dcr_group_release(g, &m);
        CHECK(ok);
    }
    return 0;
}

/* 64 MiB around a ring: every rank sends before any receives, so a send that
 * waited for its receiver to call recv would deadlock here. */
static int body_large(dcr_group_t *g)
{
    const size_t words = (64u << 20) / sizeof(uint64_t);
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    int dst = (me + 1) % size, src = (me + size - 1) % size;
    uint64_t *buf = malloc(words * sizeof(uint64_t));
    CHECK(buf != NULL);
    for (size_t i = 0; i < words; i++) buf[i] = stream_word((uint64_t)me, i);
    dcr_status_t st = dcr_group_send(g, dst, 41, buf, words * sizeof(uint64_t));
    free(buf); /* the group copied it */
    CHECK_OK(st);
    dcr_group_msg_t m;
    CHECK_OK(dcr_group_recv(g, 41, WAIT_MS, &m));
    int ok = m.src == src && m.len == words * sizeof(uint64_t);
    const uint64_t *got = m.data;
    for (size_t i = 0; ok && i < words; i++) ok = got[i] == stream_word((uint64_t)src, i);
    dcr_group_release(g, &m);
    CHECK(ok);
    return 0;
}

/* Many small messages of varying length to the next rank, checked in order. */
static int body_many_small(dcr_group_t *g)
{
    enum { N = 20000 };
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    int dst = (me + 1) % size, src = (me + size - 1) % size;
    uint8_t buf[64];
    for (int i = 0; i < N; i++) {
        size_t len = 1 + (size_t)(stream_word((uint64_t)me, (uint64_t)i) % sizeof buf);
        for (size_t b = 0; b < len; b++) buf[b] = (uint8_t)(i + b + (size_t)me);
        CHECK_OK(dcr_group_send(g, dst, 51, buf, len));
    }
    unsigned char *seen = calloc(N, 1);
    CHECK(seen != NULL);
    int bad = 0;
    for (int k = 0; k < N && !bad; k++) {
        dcr_group_msg_t m;
        if (!recv_logged(g, 51, &m)) {
            bad = 1;
            break;
        }
        /* The sequence number is recovered from the length and first byte
         * when the backend orders the pair; otherwise by search. */
        int found = -1;
        for (int i = props()->ordered_per_pair ? k : 0; i < (props()->ordered_per_pair ? k + 1 : N);
             i++) {
            size_t len = 1 + (size_t)(stream_word((uint64_t)src, (uint64_t)i) % sizeof buf);
            if (len != m.len || seen[i]) continue;
            const uint8_t *d = m.data;
            size_t b = 0;
            while (b < len && d[b] == (uint8_t)(i + b + (size_t)src)) b++;
            if (b == len) {
                found = i;
                break;
            }
        }
        bad = m.src != src || found < 0;
        if (found >= 0) seen[found] = 1;
        dcr_group_release(g, &m);
    }
    free(seen);
    CHECK(!bad);
    return 0;
}

/* Several threads share one endpoint: they send to every rank and receive
 * concurrently; every message arrives exactly once. */
enum { T_THREADS = 4, T_MSGS = 300 };

typedef struct shared_ep {
    dcr_group_t *g;
    pthread_mutex_t lock;
    uint16_t got[MAX_ENDPOINTS][T_THREADS][T_MSGS]; /* times (src, thread, seq) arrived */
    int failures;
    int t;
} shared_ep_t;

static void *share_thread(void *arg)
{
    shared_ep_t *s = arg;
    dcr_group_t *g = s->g;
    pthread_mutex_lock(&s->lock);
    int t = s->t++;
    pthread_mutex_unlock(&s->lock);
    int me = dcr_group_rank(g), size = dcr_group_size(g), fail = 0;
    for (int32_t seq = 0; seq < T_MSGS && !fail; seq++) {
        for (int dst = 0; dst < size && !fail; dst++) {
            int32_t words[3] = {me, t, seq};
            fail = dcr_group_send(g, dst, 61, words, sizeof words) != DCR_OK;
        }
    }
    /* Each thread takes an equal share of what arrives at this endpoint. */
    for (int k = 0; k < size * T_MSGS && !fail; k++) {
        dcr_group_msg_t m;
        if (!recv_logged(g, 61, &m)) {
            fail = 1;
            break;
        }
        const int32_t *w = m.data;
        if (m.len != 3 * sizeof(int32_t) || w[0] != m.src || w[1] < 0 || w[1] >= T_THREADS ||
            w[2] < 0 || w[2] >= T_MSGS) {
            fail = 1;
        } else {
            pthread_mutex_lock(&s->lock);
            s->got[m.src][w[1]][w[2]]++;
            pthread_mutex_unlock(&s->lock);
        }
        dcr_group_release(g, &m);
    }
    pthread_mutex_lock(&s->lock);
    s->failures += fail;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int body_threads_share_endpoint(dcr_group_t *g)
{
    shared_ep_t *s = calloc(1, sizeof *s);
    CHECK(s != NULL);
    s->g = g;
    pthread_mutex_init(&s->lock, NULL);
    pthread_t th[T_THREADS];
    for (int i = 0; i < T_THREADS; i++) pthread_create(&th[i], NULL, share_thread, s);
    for (int i = 0; i < T_THREADS; i++) pthread_join(th[i], NULL);
    int exact = s->failures == 0;
    for (int src = 0; src < dcr_group_size(g); src++)
        for (int t = 0; t < T_THREADS; t++)
            for (int q = 0; q < T_MSGS; q++) exact = exact && s->got[src][t][q] == 1;
    pthread_mutex_destroy(&s->lock);
    free(s);
    CHECK(exact);
    return 0;
}

/* Messages nobody takes (small and 1 MiB, to self and the next rank) are
 * freed by destroy; release twice or of NULL does nothing. Runs under ASan in
 * the sanitizer build, which reports a leak. */
static int body_release_destroy(dcr_group_t *g)
{
    int me = dcr_group_rank(g), size = dcr_group_size(g);
    size_t big = 1u << 20;
    char *buf = calloc(1, big);
    CHECK(buf != NULL);
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < 3 && st == DCR_OK; i++) st = dcr_group_send(g, me, 71, "keep", 4);
    if (st == DCR_OK) st = dcr_group_send(g, (me + 1) % size, 72, buf, big);
    free(buf);
    CHECK_OK(st);
    dcr_group_msg_t m;
    CHECK_OK(dcr_group_recv(g, 71, WAIT_MS, &m));
    dcr_group_release(g, &m);
    dcr_group_release(g, &m);
    dcr_group_release(g, NULL);
    /* Both tag-72 and two tag-71 messages stay for destroy to free. */
    return 0;
}

/* The wrappers refuse bad arguments with one clear line, before any backend. */
static int body_bad_arguments(dcr_group_t *g)
{
    int size = dcr_group_size(g);
    const dcr_group_props_t *p = &dcr_group_backend(g)->props;
    CHECK_STATUS(dcr_group_send(g, -1, 1, "x", 1), DCR_EINVAL);
    CHECK_STATUS(dcr_group_send(g, size, 1, "x", 1), DCR_EINVAL);
    CHECK(strstr(dcr_error_detail(), "expected 0..") != NULL);
    CHECK_STATUS(dcr_group_send(g, 0, -1, "x", 1), DCR_EINVAL);
    if (p->max_tag < INT_MAX)
        CHECK_STATUS(dcr_group_send(g, 0, p->max_tag + 1, "x", 1), DCR_EINVAL);
    if (p->max_message < SIZE_MAX)
        CHECK_STATUS(dcr_group_send(g, 0, 1, "x", p->max_message + 1), DCR_EINVAL);
    CHECK_STATUS(dcr_group_send(g, 0, 1, NULL, 5), DCR_EINVAL);
    dcr_group_msg_t m;
    CHECK_STATUS(dcr_group_recv(g, -1, 0, &m), DCR_EINVAL);
    CHECK_STATUS(dcr_group_recv(g, 1, 0, NULL), DCR_EINVAL);
    CHECK(strcmp(dcr_group_backend(g)->hdr.name, g_backend) == 0);
    return 0;
}

/* test_<name> runs body_<name> on every rank. */
#define RANK_TEST(name)                                                                            \
    static void test_##name(void **state)                                                          \
    {                                                                                              \
        run_ranks(body_##name);                                                                    \
    }

RANK_TEST(tags_any_source)
RANK_TEST(timeouts)
RANK_TEST(large)
RANK_TEST(many_small)
RANK_TEST(threads_share_endpoint)
RANK_TEST(release_destroy)
RANK_TEST(bad_arguments)

static void test_order_per_pair(void **state)
{
    if (!props()->ordered_per_pair) skip();
    run_ranks(body_order_per_pair);
}

/* One endpoint per process for a cross-process backend, size of them for an
 * in-process one; ranks are 0..size-1 and distinct. */
static void test_create_shape(void **state)
{
    const dcr_group_props_t *p = props();
    int want = p->cross_process ? 1 : INPROC_RANKS;
    int size = p->cross_process ? g_mpi_world : INPROC_RANKS;
    assert_int_equal(g_fx.count, want);
    int seen = 0;
    for (int i = 0; i < g_fx.count; i++) {
        assert_int_equal(dcr_group_size(g_fx.ep[i]), size);
        int r = dcr_group_rank(g_fx.ep[i]);
        assert_true(r >= 0 && r < size && !(seen & (1 << r)));
        seen |= 1 << r;
    }
    /* A size that does not match the job, or no size for an in-process group. */
    dcr_group_t *extra[MAX_ENDPOINTS];
    int n = -1;
    assert_int_equal(dcr_group_create(g_backend, p->cross_process ? size + 1 : 0, extra, &n),
                     DCR_EINVAL);
    assert_int_equal(n, -1);
    assert_true(strlen(dcr_error_detail()) > 0);
}

static int run_suite(const char *backend)
{
    g_backend = backend;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_shape, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_tags_any_source, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_order_per_pair, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_timeouts, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_large, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_many_small, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_endpoint, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_release_destroy, group_setup, group_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, group_setup, group_teardown),
    };
    char name[64];
    snprintf(name, sizeof name, "group conformance: %s", backend);
    return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}

/* ---- registry and mailbox (plain launch only) ---------------------------- */

static void test_registry(void **state)
{
    size_t n = dcr_group_backend_count();
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        const char *name = dcr_group_backend_name(i);
        assert_non_null(name);
        const dcr_group_ops_t *ops = dcr_group_find(name);
        assert_non_null(ops);
        assert_string_equal(ops->hdr.name, name);
        assert_int_equal(ops->hdr.version, DCR_GROUP_OPS_VERSION);
        assert_true(ops->props.max_tag >= 32767 && ops->props.max_message >= (64u << 20));
    }
    assert_null(dcr_group_backend_name(n));
    assert_null(dcr_group_find("no-such-backend"));
    assert_null(dcr_group_find(NULL));
    dcr_group_t *g[2];
    int count = -1;
    assert_int_equal(dcr_group_create("no-such-backend", 2, g, &count), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_detail(), "no-such-backend"));
    assert_int_equal(dcr_group_create(NULL, 2, g, &count), DCR_EINVAL);
    assert_int_equal(dcr_group_create(dcr_group_backend_name(0), 2, g, NULL), DCR_EINVAL);
    assert_int_equal(count, -1);
}

/* Outside an MPI job, a cross-process backend refuses to start (MPI not
 * initialized), and a build without one says it is not compiled in. */
static void test_cross_process_outside_job(void **state)
{
    dcr_group_t *g[1];
    int count = -1;
    int cross = 0;
    for (size_t i = 0; i < dcr_group_backend_count(); i++) {
        const dcr_group_ops_t *ops = dcr_group_find(dcr_group_backend_name(i));
        if (!ops->props.cross_process) continue;
        cross = 1;
        assert_int_equal(dcr_group_create(ops->hdr.name, 0, g, &count), DCR_EINVAL);
        assert_non_null(strstr(dcr_error_detail(), "MPI"));
    }
    if (!cross) {
        assert_int_equal(dcr_group_create("mpi", 0, g, &count), DCR_ENOTFOUND);
        assert_non_null(strstr(dcr_error_detail(), "not compiled"));
    }
    assert_int_equal(count, -1);
}

/* The backends' shared mailbox: once a backend fails it (its receiving
 * thread lost a message), every take reports the failure, also for a tag
 * whose message is queued, and a taker waiting without limit wakes up. */
typedef struct taker {
    dcr__group_mbox_t *box;
    dcr_status_t st;
} taker_t;

static void *take_forever(void *arg)
{
    taker_t *t = arg;
    dcr_group_msg_t m;
    t->st = dcr__group_mbox_take(t->box, 0, 2, -1, &m);
    return NULL;
}

static void test_mailbox_failure(void **state)
{
    dcr__group_mbox_t box;
    dcr__group_mbox_init(&box);
    void *data = malloc(4);
    assert_non_null(data);
    assert_int_equal(dcr__group_mbox_put(&box, 1, 1, data, 4), DCR_OK);
    taker_t t = {&box, DCR_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take_forever, &t), 0);
    struct timespec pause = {0, 50 * 1000000L};
    nanosleep(&pause, NULL);
    dcr__group_mbox_fail(&box, DCR_ETRANSPORT, "rank 0 lost a message");
    dcr__group_mbox_fail(&box, DCR_ENOMEM, "second failure"); /* the first one stays */
    pthread_join(th, NULL);
    assert_int_equal(t.st, DCR_ETRANSPORT);
    dcr_group_msg_t m = {0};
    assert_int_equal(dcr__group_mbox_take(&box, 0, 1, 0, &m), DCR_ETRANSPORT);
    assert_string_equal(dcr_error_detail(), "rank 0 lost a message");
    assert_null(m.data);
    dcr__group_mbox_fini(&box); /* frees the queued message */
}

static int run_local_checks(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_cross_process_outside_job),
        cmocka_unit_test(test_mailbox_failure),
    };
    return cmocka_run_group_tests_name("group registry and mailbox", tests, NULL, NULL);
}

/* Runs the suite on every registered backend whose kind fits this launch. */
static int run_backends(int cross_process)
{
    int failed = 0;
    for (size_t i = 0; i < dcr_group_backend_count(); i++) {
        const char *name = dcr_group_backend_name(i);
        if (dcr_group_find(name)->props.cross_process == (cross_process != 0))
            failed += run_suite(name);
    }
    return failed;
}

#ifdef DCR_HAVE_MPI
/* A job initialized below MPI_THREAD_MULTIPLE: every cross-process backend
 * refuses to create, naming the level it got (the receiving thread needs
 * MULTIPLE). */
static void test_thread_level_refused(void **state)
{
    for (size_t i = 0; i < dcr_group_backend_count(); i++) {
        const dcr_group_ops_t *ops = dcr_group_find(dcr_group_backend_name(i));
        if (!ops->props.cross_process) continue;
        dcr_group_t *g[1];
        int count = -1;
        assert_int_equal(dcr_group_create(ops->hdr.name, 0, g, &count), DCR_EINVAL);
        assert_non_null(strstr(dcr_error_detail(), "MPI_THREAD_SERIALIZED"));
        assert_int_equal(count, -1);
    }
}

static int run_under_mpi(void)
{
    int provided = 0, rank = 0;
    /* test_group_mpi_thread_level asks for a level the backends refuse. */
    const char *level = getenv("DCR_TEST_GROUP_MPI_LEVEL");
    int serialized = level && strcmp(level, "serialized") == 0;
    if (MPI_Init_thread(NULL, NULL, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE,
                        &provided) != MPI_SUCCESS) {
        fprintf(stderr, "test_group: MPI_Init_thread failed\n");
        return 1;
    }
    if (serialized) {
        int failed = 1;
        if (provided == MPI_THREAD_SERIALIZED) {
            const struct CMUnitTest tests[] = {cmocka_unit_test(test_thread_level_refused)};
            failed = cmocka_run_group_tests_name("group mpi thread level", tests, NULL, NULL);
        } else {
            fprintf(stderr, "test_group: asked for MPI_THREAD_SERIALIZED, got level %d\n",
                    provided);
        }
        MPI_Finalize();
        return failed ? 1 : 0;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_mpi_world);
    /* One report is enough: the other ranks' cmocka output (both streams)
     * goes to a temporary file that reaches stderr only when they failed. */
    FILE *quiet = NULL;
    int err_fd = -1;
    if (rank != 0) {
        fflush(stdout);
        fflush(stderr);
        quiet = tmpfile();
        err_fd = dup(STDERR_FILENO);
        if (!quiet || err_fd < 0 || dup2(fileno(quiet), STDOUT_FILENO) < 0 ||
            dup2(fileno(quiet), STDERR_FILENO) < 0) {
            fprintf(stderr, "test_group: rank %d: cannot redirect its output\n", rank);
            return 1;
        }
    }
    int failed = run_backends(1);
    if (quiet) {
        fflush(stdout);
        fflush(stderr);
        dup2(err_fd, STDERR_FILENO);
        if (failed) {
            char line[512];
            rewind(quiet);
            while (fgets(line, sizeof line, quiet)) fprintf(stderr, "rank %d: %s", rank, line);
        }
        fclose(quiet);
    }
    if (failed) fprintf(stderr, "test_group: rank %d: %d test(s) failed\n", rank, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
#endif

int main(void)
{
#ifdef DCR_HAVE_MPI
    /* mpirun (OpenMPI) and other PMIx launchers put these in every rank. */
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK")) return run_under_mpi();
#endif
    int failed = run_local_checks();
    failed += run_backends(0);
    return failed ? 1 : 0;
}
