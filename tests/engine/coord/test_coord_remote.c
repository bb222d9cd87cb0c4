/* ctest-labels: integration
 *
 * The coordinator with rollout nodes and owners as processes, the other
 * processes played by a thread that writes their reports into the control
 * plane: while the coordinator waits for the owners to report "sent", a
 * required node that reports GONE or RESTARTING fails the attempt at once,
 * naming the node, instead of after the stall timeout (a dead relay node
 * keeps the owners from ever finishing, so their report never comes).
 *
 * Membership under a failing control plane: a node added later (its
 * launcher's report GONE with pid 0) is left out of the attempts prepared
 * before it starts, also when reading its report fails for a moment; when
 * the report cannot be read at all, no attempt is prepared, and the error
 * names the node. A wrapping control plane ("flaky:sqlite", registered
 * here) fails reads of one node's report as the case asks.
 *
 * Before the commit: a node the coordinator read DONE before it last waited
 * for a change is read again (it may have died since); one read DONE after
 * that last wait is not, since nothing happened in between (each read was a
 * control-plane round trip between the last DONE and the commit).
 *
 * Waiting without polling: while the owners stay silent for two seconds,
 * the coordinator reads the control plane on changes and every 100 ms, not
 * every 0.5 ms as it did (2 s at that rate is thousands of reads; hundreds
 * even if a loaded host stretched each nap to 4 ms). */
#define _POSIX_C_SOURCE 200809L
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

#include "dcr/clock.h"
#include "dcr/control.h"
#include "dcr/coord.h"
#include "coord/coord-parties.h"
#include "coord/parties-internal.h"
#include "dcr/parties.h"
#include "dcr/rollout_node.h"
#include "dcr/transport.h"
#include "testfiles.h"

#define NODES     2
#define STALL_MS  60000 /* far above what the test allows itself */
#define PROMPT_S  10.0  /* the failure must come well before STALL_MS */
#define DEAD_NODE 1

typedef struct fake_nodes {
    dcr_control_t *control;
    dcr_node_phase_t death; /* what DEAD_NODE reports once both joined */
    int owners_fail_ms;     /* > 0: no death; the owners report FAILED this long after */
    dcr_status_t st;        /* the thread's own failures */
} fake_nodes_t;

#define OWNERS_SILENT_MS 2000
/* Reads the whole refit may make while the owners are silent (the waits
 * make about 3 per 100 ms; the setup and the fake nodes a few dozen). */
#define QUIET_READS_MAX 300

/* A SQLite control plane in a fresh folder named after tag (dir[0..256)
 * gets the folder). */
static dcr_control_t *tmp_control(const char *tag, char *dir)
{
    char path[320];
    assert_true(testfiles_tmpdir(dir, 256, tag));
    snprintf(path, sizeof(path), "%s/control.db", dir);
    dcr_control_config_t ctl = {path, 0};
    dcr_control_t *control = NULL;
    assert_int_equal(dcr_control_create("sqlite", &ctl, &control), DCR_OK);
    return control;
}

static dcr_status_t put_node(dcr_control_t *control, int node, dcr_node_phase_t phase, uint64_t tau)
{
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.node = (uint32_t)node;
    r.phase = phase;
    r.tau = tau;
    r.pid = 1000 + node;
    snprintf(r.why, sizeof(r.why), "%s", phase == DCR_NODE_GONE ? "killed by the test" : "");
    return dcr_node_report_put(control, &r);
}

/* The node processes: ready at first; once the coordinator opened an
 * attempt, both join it; a moment later DEAD_NODE dies. The owners never
 * report. */
static void *fake_nodes_main(void *arg)
{
    fake_nodes_t *f = arg;
    for (int n = 0; n < NODES && f->st == DCR_OK; n++)
        f->st = put_node(f->control, n, DCR_NODE_READY, 0);
    uint64_t tau = 0;
    double t0 = dcr_clock_s();
    while (f->st == DCR_OK && dcr_coord_opened(f->control, &tau) != DCR_OK) {
        if (dcr_clock_s() - t0 > PROMPT_S) return NULL; /* the test fails on the coordinator */
        dcr_clock_nap_ns(5000000L);
    }
    for (int n = 0; n < NODES && f->st == DCR_OK; n++)
        f->st = put_node(f->control, n, DCR_NODE_JOINED, tau);
    if (f->owners_fail_ms > 0) {
        for (int ms = 0; ms < f->owners_fail_ms; ms += 100) /* a nap is under a second */
            dcr_clock_nap_ns(100000000L);
        dcr_owners_report_t r;
        memset(&r, 0, sizeof(r));
        r.phase = DCR_OWNERS_FAILED;
        r.tau = tau;
        snprintf(r.why, sizeof(r.why), "failed by the test");
        if (f->st == DCR_OK) f->st = dcr_owners_report_put(f->control, &r);
        return NULL;
    }
    dcr_clock_nap_ns(200000000L); /* the coordinator is waiting for the owners by now */
    if (f->st == DCR_OK) f->st = put_node(f->control, DEAD_NODE, f->death, tau);
    return NULL;
}

/* One refit whose attempt fails: by DEAD_NODE's death, or (owners_fail_ms
 * > 0) by the owners' FAILED report after that long; the error line must
 * contain expect. *reads_p: the control-plane reads of the refit. */
static void run_case_reads(dcr_node_phase_t death, int owners_fail_ms, const char *expect,
                           uint64_t *reads_p)
{
    char dir[256], path[320];
    dcr_control_t *control = tmp_control("coord-remote", dir);
    snprintf(path, sizeof(path), "%s/objstore", dir);
    dcr_transport_config_t tc = {
        .train_nodes = 1, .world = 1, .rollout_nodes = NODES, .dir = path, .send_only = true};
    dcr_transport_t *transport = NULL;
    assert_int_equal(dcr_transport_create("objstore", &tc, &transport), DCR_OK);

    dcr_coord_config_t cc = dcr_coord_config_default("test-coord-remote", 1);
    cc.max_attempts = 1;
    cc.stall_timeout_ms = STALL_MS;
    cc.join_timeout_ms = STALL_MS;
    cc.nodes = cc.owners = "remote";
    dcr_coord_parties_t parties = {NULL, 1, transport, control, NULL, NODES, NULL, NULL};
    dcr_coord_t *c = NULL;
    assert_int_equal(dcr_coord_create(&cc, &parties, &c), DCR_OK);

    fake_nodes_t f = {control, death, owners_fail_ms, DCR_OK};
    pthread_t th;
    dcr_control_counts_t n0, n1;
    dcr_control_counts(&n0);
    assert_int_equal(pthread_create(&th, NULL, fake_nodes_main, &f), 0);
    double t0 = dcr_clock_s();
    dcr_refit_result_t res;
    dcr_status_t st = dcr_coord_refit(c, NULL, &res);
    double took = dcr_clock_s() - t0;
    dcr_control_counts(&n1);
    *reads_p = n1.reads - n0.reads;
    char line[1024];
    snprintf(line, sizeof(line), "%s", dcr_error_line(st));
    pthread_join(th, NULL);
    assert_int_equal(f.st, DCR_OK);
    /* One failed attempt: the version stays, the first error names the node. */
    assert_int_equal(st, DCR_EFATAL);
    if (!strstr(line, expect)) fail_msg("unexpected failure: %s", line);
    if (took > PROMPT_S) fail_msg("the failure took %.1f s (stall timeout %d ms)", took, STALL_MS);

    dcr_coord_destroy(c);
    dcr_transport_destroy(transport);
    dcr_control_destroy(control);
    assert_int_equal(testfiles_rmtree(dir), 0);
}

static void run_case(dcr_node_phase_t death)
{
    uint64_t reads = 0;
    run_case_reads(death, 0, "rollout node 1 is gone", &reads);
}

/* ---- membership when a node's report cannot be read ---- */

#define FLAKY_NODE 1 /* the node added later, whose report reads fail */
#define PER        2 /* receivers per node */

/* How many reads of FLAKY_NODE's report fail from now on (-1: all), and
 * how many did; the coordinator's threads read it, the test sets it. */
static atomic_int g_fail_left, g_failed;

typedef struct flaky {
    dcr_control_t pub; /* first: the handle header */
    dcr_control_t *inner;
} flaky_t;

static dcr_status_t flaky_create(const dcr_control_ops_t *self, const dcr_control_config_t *cfg,
                                 dcr_control_t **out_p)
{
    (void)self;
    flaky_t *x = calloc(1, sizeof(*x));
    if (!x) return dcr_error_set(DCR_ENOMEM, "flaky control plane");
    dcr_status_t st = dcr_control_create("sqlite", cfg, &x->inner);
    if (st != DCR_OK) {
        free(x);
        return st;
    }
    *out_p = &x->pub;
    return DCR_OK;
}

static void flaky_destroy(dcr_control_t *c)
{
    flaky_t *x = (flaky_t *)c;
    if (x) dcr_control_destroy(x->inner);
    free(x);
}

static dcr_status_t flaky_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                     size_t *len_p)
{
    flaky_t *x = (flaky_t *)c;
    if (receiver == DCR_NODE_REPORT_ID(FLAKY_NODE)) {
        int left = atomic_load(&g_fail_left);
        if (left != 0) {
            if (left > 0) atomic_fetch_sub(&g_fail_left, 1);
            atomic_fetch_add(&g_failed, 1);
            return dcr_error_set(DCR_ECONTROL, "flaky: the control plane did not answer");
        }
    }
    return dcr_control_report_get(x->inner, receiver, data_p, len_p);
}

/* Every other slot passes through. */
#define PASS(c) (((flaky_t *)(c))->inner)
static dcr_status_t flaky_read(dcr_control_t *i, dcr_commit_record_t *r)
{
    return dcr_control_read(PASS(i), r);
}
static dcr_status_t flaky_cas(dcr_control_t *i, const dcr_commit_record_t *e,
                              const dcr_commit_record_t *d)
{
    return dcr_control_cas(PASS(i), e, d);
}
static dcr_status_t flaky_prepare(dcr_control_t *i, const dcr_control_prepare_t *q, uint64_t *tau_p)
{
    return dcr_control_prepare(PASS(i), q, tau_p);
}
static dcr_status_t flaky_attempt(dcr_control_t *i, uint64_t tau, dcr_control_attempt_t *a)
{
    return dcr_control_attempt(PASS(i), tau, a);
}
static dcr_status_t flaky_required(dcr_control_t *i, uint64_t tau, uint32_t *out, size_t cap,
                                   size_t *n_p)
{
    return dcr_control_required(PASS(i), tau, out, cap, n_p);
}
static dcr_status_t flaky_ack(dcr_control_t *i, uint64_t tau, uint32_t r)
{
    return dcr_control_ack(PASS(i), tau, r);
}
static dcr_status_t flaky_acks(dcr_control_t *i, uint64_t tau, uint32_t *out, size_t cap,
                               size_t *n_p)
{
    return dcr_control_acks(PASS(i), tau, out, cap, n_p);
}
static dcr_status_t flaky_commit(dcr_control_t *i, const char *co, uint64_t tau,
                                 const dcr_commit_record_t *e,
                                 const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                 dcr_commit_record_t *rec_p)
{
    return dcr_control_commit(PASS(i), co, tau, e, baseline, rec_p);
}
static dcr_status_t flaky_report_put(dcr_control_t *i, uint32_t r, const void *data, size_t len)
{
    return dcr_control_report_put(PASS(i), r, data, len);
}
static dcr_status_t flaky_membership_put(dcr_control_t *i, const char *co, const uint32_t *m,
                                         size_t n)
{
    return dcr_control_membership_put(PASS(i), co, m, n);
}
static dcr_status_t flaky_membership_get(dcr_control_t *i, uint32_t *out, size_t cap, size_t *n_p)
{
    return dcr_control_membership_get(PASS(i), out, cap, n_p);
}

static const dcr_control_ops_t flaky_ops = {
    .hdr = {.version = DCR_CONTROL_OPS_VERSION, .name = "flaky:sqlite"},
    .props = {.networked = false, .durable = true},
    .create = flaky_create,
    .destroy = flaky_destroy,
    .read = flaky_read,
    .cas = flaky_cas,
    .prepare = flaky_prepare,
    .attempt = flaky_attempt,
    .required = flaky_required,
    .ack = flaky_ack,
    .acks = flaky_acks,
    .commit = flaky_commit,
    .report_put = flaky_report_put,
    .report_get = flaky_report_get,
    .membership_put = flaky_membership_put,
    .membership_get = flaky_membership_get,
};

/* Node 0 READY, node FLAKY_NODE not started (GONE, pid 0, as a launcher of
 * an elastic join writes it); reads of FLAKY_NODE's report fail `fail`
 * times (-1: always). One refit of one attempt, which cannot commit (node
 * 0 never joins: the join timeout is short); *line gets its error. The
 * attempt prepared, if any: its receivers in required[0..*nreq_p). */
static void membership_case(int fail, char *line, size_t cap, uint32_t *required, size_t *nreq_p)
{
    assert_int_equal(dcr_control_register(&flaky_ops), DCR_OK);
    char dir[256], path[320];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "coord-members"));
    snprintf(path, sizeof(path), "%s/control.db", dir);
    dcr_control_config_t ctl = {path, 0};
    dcr_control_t *plain = NULL, *flaky = NULL;
    assert_int_equal(dcr_control_create("sqlite", &ctl, &plain), DCR_OK);
    assert_int_equal(dcr_control_create("flaky:sqlite", &ctl, &flaky), DCR_OK);
    assert_int_equal(put_node(plain, 0, DCR_NODE_READY, 0), DCR_OK);
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.node = FLAKY_NODE;
    r.phase = DCR_NODE_GONE; /* pid 0: never started */
    assert_int_equal(dcr_node_report_put(plain, &r), DCR_OK);
    snprintf(path, sizeof(path), "%s/objstore", dir);
    dcr_transport_config_t tc = {
        .train_nodes = 1, .world = 1, .rollout_nodes = NODES, .dir = path, .send_only = true};
    dcr_transport_t *transport = NULL;
    assert_int_equal(dcr_transport_create("objstore", &tc, &transport), DCR_OK);
    dcr_coord_config_t cc = dcr_coord_config_default("test-coord-members", PER);
    cc.max_attempts = 1;
    cc.stall_timeout_ms = 500;
    cc.join_timeout_ms = 500;
    cc.nodes = cc.owners = "remote";
    dcr_coord_parties_t parties = {NULL, 1, transport, flaky, NULL, NODES * PER, NULL, NULL};
    dcr_coord_t *c = NULL;
    assert_int_equal(dcr_coord_create(&cc, &parties, &c), DCR_OK);

    atomic_store(&g_failed, 0);
    atomic_store(&g_fail_left, fail); /* from the refit on: creating it reads no report */
    dcr_refit_result_t res;
    dcr_status_t st = dcr_coord_refit(c, NULL, &res);
    atomic_store(&g_fail_left, 0);
    assert_int_not_equal(st, DCR_OK);
    snprintf(line, cap, "%s", dcr_error_line(st));
    dcr_control_attempt_t a;
    *nreq_p = 0;
    if (dcr_control_attempt(plain, 0, &a) == DCR_OK)
        assert_int_equal(dcr_control_required(plain, a.tau, required, NODES * PER, nreq_p), DCR_OK);

    dcr_coord_destroy(c);
    dcr_transport_destroy(transport);
    dcr_control_destroy(flaky);
    dcr_control_destroy(plain);
    assert_int_equal(testfiles_rmtree(dir), 0);
}

/* Three failed reads of the joiner's report (fewer than the tries), then
 * it answers: the attempt leaves the joiner out (only node 0's receivers 0
 * and 1 are required), as without the failures. Taking a failed read for
 * "started" would require receivers 2 and 3 too. */
static void test_failed_report_read_is_retried(void **state)
{
    (void)state;
    char line[1024];
    uint32_t required[NODES * PER];
    size_t n = 0;
    membership_case(3, line, sizeof line, required, &n);
    assert_int_equal(atomic_load(&g_failed), 3);
    if (n != 2) fail_msg("%zu receivers required (expected node 0's 2): %s", n, line);
    assert_int_equal(required[0], 0);
    assert_int_equal(required[1], 1);
    /* The attempt failed on node 0, which never joined, not on the joiner. */
    if (!strstr(line, "rollout node 0")) fail_msg("unexpected failure: %s", line);
}

/* The joiner's report never reads: no attempt is prepared, and the error
 * names the node and the tries. Each try reads it once per node: once per
 * receiver would fail at least PER times the tries (the transition reads
 * every node's byte counts once more, before it). */
static void test_unreadable_report_prepares_no_attempt(void **state)
{
    (void)state;
    char line[1024];
    uint32_t required[NODES * PER];
    size_t n = 0;
    membership_case(-1, line, sizeof line, required, &n);
    assert_int_equal(n, 0);
    const char *at = strstr(line, "cannot read rollout node 1's report");
    if (!at) fail_msg("unexpected failure: %s", line);
    int tries = 0;
    const char *paren = strstr(at, "(");
    assert_non_null(paren);
    assert_int_equal(sscanf(paren, "(%d tries)", &tries), 1);
    assert_true(tries >= 2);
    assert_true(atomic_load(&g_failed) >= tries && atomic_load(&g_failed) < PER * tries);
}

static void test_gone_node_fails_the_owners_wait(void **state)
{
    (void)state;
    run_case(DCR_NODE_GONE);
}

static void test_restarting_node_fails_the_owners_wait(void **state)
{
    (void)state;
    run_case(DCR_NODE_RESTARTING);
}

static void test_silent_owners_are_not_polled(void **state)
{
    (void)state;
    uint64_t reads = 0;
    double t0 = dcr_clock_s();
    run_case_reads(DCR_NODE_GONE, OWNERS_SILENT_MS, "the owners failed attempt", &reads);
    double took = dcr_clock_s() - t0;
    /* The wait lasted the owners' silence: the reads were spread over it. */
    assert_true(took * 1000.0 >= OWNERS_SILENT_MS);
    if (reads > QUIET_READS_MAX)
        fail_msg("%llu control-plane reads while the owners were silent for %d ms",
                 (unsigned long long)reads, OWNERS_SILENT_MS);
}

/* ---- the re-read of the nodes' reports before the commit ---- */

typedef struct late_done {
    dcr_control_t *control;
    uint64_t tau;
    dcr_status_t st;
} late_done_t;

/* Node 1 reports DONE a moment after the coordinator started waiting. */
static void *late_done_main(void *arg)
{
    late_done_t *l = arg;
    dcr_clock_nap_ns(100000000L);
    l->st = put_node(l->control, 1, DCR_NODE_DONE, l->tau);
    return NULL;
}

static void test_still_done_rereads_only_nodes_read_before_a_wait(void **state)
{
    (void)state;
    char dir[256];
    dcr_control_t *control = tmp_control("coord-still-done", dir);
    dcr_coord_config_t cc = dcr_coord_config_default("test-still-done", 1);
    cc.stall_timeout_ms = cc.join_timeout_ms = STALL_MS;
    dcr__nodes_env_t env = {.cfg = &cc, .nodes = NODES, .nreceivers = NODES, .control = control};
    void *nodes = NULL;
    assert_int_equal(dcr__nodes_remote.create(&env, &nodes), DCR_OK);
    const uint32_t required[NODES] = {0, 1};
    dcr__attempt_t a = {7, required, NODES};
    double apply_end = 0.0;

    /* Both DONE at the first look: the check before the commit reads nothing. */
    for (int n = 0; n < NODES; n++)
        assert_int_equal(put_node(control, n, DCR_NODE_DONE, 7), DCR_OK);
    assert_int_equal(dcr__nodes_remote.delivered(nodes, &a, true, &apply_end), DCR_OK);
    dcr_control_counts_t n0, n1;
    dcr_control_counts(&n0);
    assert_int_equal(dcr__nodes_remote.acknowledge(nodes, &a), DCR_OK);
    dcr_control_counts(&n1);
    assert_int_equal(n1.reads - n0.reads, 0);

    /* Attempt 8: node 0 DONE at once, node 1 only after a wait, and node 0
     * dies before the commit: it was read before that wait, so it is read
     * again, and the attempt fails naming it. */
    a.tau = 8;
    assert_int_equal(put_node(control, 0, DCR_NODE_DONE, 8), DCR_OK);
    assert_int_equal(put_node(control, 1, DCR_NODE_JOINED, 8), DCR_OK);
    late_done_t l = {control, 8, DCR_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, late_done_main, &l), 0);
    assert_int_equal(dcr__nodes_remote.delivered(nodes, &a, true, &apply_end), DCR_OK);
    pthread_join(th, NULL);
    assert_int_equal(l.st, DCR_OK);
    assert_int_equal(put_node(control, 0, DCR_NODE_GONE, 8), DCR_OK);
    assert_int_equal(dcr__nodes_remote.acknowledge(nodes, &a), DCR_EATTEMPT);
    assert_non_null(strstr(dcr_error_detail(), "rollout node 0 is no longer done"));

    dcr__nodes_remote.destroy(nodes);
    dcr_control_destroy(control);
    assert_int_equal(testfiles_rmtree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_owners_are_not_polled),
        cmocka_unit_test(test_gone_node_fails_the_owners_wait),
        cmocka_unit_test(test_restarting_node_fails_the_owners_wait),
        cmocka_unit_test(test_failed_report_read_is_retried),
        cmocka_unit_test(test_unreadable_report_prepares_no_attempt),
        cmocka_unit_test(test_still_done_rereads_only_nodes_read_before_a_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
