/* ctest-labels: unit
 *
 * dcr_rollout_node_wait, what a rollout-node process sleeps in while its
 * node thread delivers (deploy/node_role.c): it times out while the stream
 * is open, and the delivery's end wakes it at once, long before its
 * timeout. The stream is a real one (the object store over a temporary
 * folder): the owners end it by finishing with no payloads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../engine/transport/transport_test_util.h"
#include "dcr/rollout_node.h"

static dcr_receiver_t *no_receiver(void *ctx, int id)
{
    (void)ctx;
    (void)id;
    return NULL; /* never asked: no payload arrives */
}

static bool no_member(void *ctx, int id)
{
    (void)ctx;
    (void)id;
    return false;
}

typedef struct finisher {
    dcr_transport_t *t;
    int world, delay_ms;
    dcr_status_t st;
} finisher_t;

/* Every owner ends the stream after delay_ms (no payloads). */
static void *finish_main(void *arg)
{
    finisher_t *f = arg;
    usleep((useconds_t)f->delay_ms * 1000);
    f->st = DCR_OK;
    for (int o = 0; o < f->world && f->st == DCR_OK; o++) f->st = dcr_transport_finish(f->t, o, 0);
    return NULL;
}

static void test_wait_wakes_at_the_end(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof dir, "rnwait"));
    dcr_transport_config_t c = tp_config(dir, 1, 2, 1);
    dcr_transport_t *t = tp_create("objstore", &c);
    assert_int_equal(dcr_transport_open_attempt(t, 1), DCR_OK);
    dcr_rollout_node_config_t nc = {0, 0, 1, false, 60000, 20, 0};
    dcr_rollout_node_env_t env = {.receiver = no_receiver, .member = no_member};
    dcr_rollout_node_t *n = NULL;
    assert_int_equal(dcr_rollout_node_create(&nc, &env, t, &n), DCR_OK);
    assert_int_equal(dcr_rollout_node_start_deliver(n, 1), DCR_OK);

    /* The stream is open: the wait sleeps its whole timeout. */
    double t0 = dcr_clock_s();
    assert_false(dcr_rollout_node_wait(n, 60));
    assert_true(dcr_clock_s() - t0 >= 0.055);
    assert_false(dcr_rollout_node_finished(n));

    /* The owners end it 100 ms from now; a 20 s wait returns with it. */
    finisher_t f = {t, 2, 100, DCR_EIO};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, finish_main, &f), 0);
    t0 = dcr_clock_s();
    assert_true(dcr_rollout_node_wait(n, 20000));
    double waited = dcr_clock_s() - t0;
    pthread_join(th, NULL);
    assert_int_equal(f.st, DCR_OK);
    print_message("woke %.3f s after the wait began (owners finished at 0.100 s)\n", waited);
    assert_true(waited >= 0.09 && waited < 10.0);
    assert_true(dcr_rollout_node_finished(n));
    assert_true(dcr_rollout_node_wait(n, 0)); /* at once, once ended */
    assert_int_equal(dcr_rollout_node_join(n), DCR_OK);
    dcr_rollout_node_destroy(n);
    dcr_transport_destroy(t);
    testfiles_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_wakes_at_the_end),
    };
    return cmocka_run_group_tests_name("rollout node wait", tests, NULL, NULL);
}
