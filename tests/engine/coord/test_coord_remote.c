/* ctest-labels: integration
 *
 * The coordinator with rollout nodes and owners as processes, the other
 * processes played by a thread that writes their reports into the control
 * plane: while the coordinator waits for the owners to report "sent", a
 * required node that reports GONE or RESTARTING fails the attempt at once,
 * naming the node, instead of after the stall timeout (a dead relay node
 * keeps the owners from ever finishing, so their report never comes). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/control.h"
#include "dcr/coord.h"
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
    dcr_status_t st;        /* the thread's own failures */
} fake_nodes_t;

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
    dcr_clock_nap_ns(200000000L); /* the coordinator is waiting for the owners by now */
    if (f->st == DCR_OK) f->st = put_node(f->control, DEAD_NODE, f->death, tau);
    return NULL;
}

static void run_case(dcr_node_phase_t death)
{
    char dir[256], path[320];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "coord-remote"));
    snprintf(path, sizeof(path), "%s/control.db", dir);
    dcr_control_config_t ctl = {path, 0};
    dcr_control_t *control = NULL;
    assert_int_equal(dcr_control_create("sqlite", &ctl, &control), DCR_OK);
    snprintf(path, sizeof(path), "%s/objstore", dir);
    dcr_transport_config_t tc = {
        .train_nodes = 1, .world = 1, .rollout_nodes = NODES, .dir = path, .send_only = true};
    dcr_transport_t *transport = NULL;
    assert_int_equal(dcr_transport_create("objstore", &tc, &transport), DCR_OK);

    dcr_coord_config_t cc = dcr_coord_config_default("test-coord-remote", 1);
    cc.max_attempts = 1;
    cc.stall_timeout_ms = STALL_MS;
    cc.join_timeout_ms = STALL_MS;
    cc.remote_nodes = cc.remote_owners = true;
    dcr_coord_parties_t parties = {NULL, 1, transport, control, NULL, NODES, NULL, NULL};
    dcr_coord_t *c = NULL;
    assert_int_equal(dcr_coord_create(&cc, &parties, &c), DCR_OK);

    fake_nodes_t f = {control, death, DCR_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_nodes_main, &f), 0);
    double t0 = dcr_clock_s();
    dcr_refit_result_t res;
    dcr_status_t st = dcr_coord_refit(c, NULL, &res);
    double took = dcr_clock_s() - t0;
    char line[1024];
    snprintf(line, sizeof(line), "%s", dcr_error_line(st));
    pthread_join(th, NULL);
    assert_int_equal(f.st, DCR_OK);
    /* One failed attempt: the version stays, the first error names the node. */
    assert_int_equal(st, DCR_EFATAL);
    if (!strstr(line, "rollout node 1 is gone")) fail_msg("unexpected failure: %s", line);
    if (took > PROMPT_S) fail_msg("the failure took %.1f s (stall timeout %d ms)", took, STALL_MS);

    dcr_coord_destroy(c);
    dcr_transport_destroy(transport);
    dcr_control_destroy(control);
    assert_int_equal(testfiles_rmtree(dir), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gone_node_fails_the_owners_wait),
        cmocka_unit_test(test_restarting_node_fails_the_owners_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
