/* ctest-labels: unit
 *
 * How a rank other than 0 of the owners' job takes its next order
 * (deploy/owner_orders.h), over a real SQLite control plane and an inproc
 * group of two: the commit of the attempt it sent comes from the control
 * plane with no word from rank 0 (the hop that was most of finalization as
 * processes), rank 0's order for that commit is then dropped as a
 * duplicate, a commit of another attempt still waits for rank 0's restore,
 * and an order that contradicts a commit taken early is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testfiles.h"
#include "engine/control/control_test_util.h"
#include "deploy/owner_orders.h"

static const uint32_t k_receivers[] = {0, 1};

typedef struct fixture {
    char dir[4096];
    dcr_control_t *control;
    dcr_group_t *rank[2];
    dcr_owner_orders_t follower; /* rank 1's */
    dcr_commit_record_t k0;
} fixture_t;

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    if (!fx || !testfiles_tmpdir(fx->dir, sizeof fx->dir, "owner-orders")) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/control.db", fx->dir);
    dcr_control_config_t cfg = {path, 0};
    assert_status(dcr_control_create("sqlite", &cfg, &fx->control), DCR_OK);
    int n = 0;
    assert_status(dcr_group_create("inproc", 2, fx->rank, &n), DCR_OK);
    assert_int_equal(n, 2);
    fx->follower = (dcr_owner_orders_t){.g = fx->rank[1], .control = fx->control};
    fx->k0 = bootstrap(fx->control);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    dcr_group_destroy(fx->rank[0]);
    dcr_group_destroy(fx->rank[1]);
    dcr_control_destroy(fx->control);
    testfiles_rmtree(fx->dir);
    free(fx);
    return 0;
}

/* The coordinator's part: attempt tau from version 0, acknowledged and
 * committed as version 1. */
static uint64_t commit_attempt(fixture_t *fx)
{
    uint64_t tau = 0;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    assert_status(prepare(fx->control, "coord", 0, k_receivers, 2, 10000, &tau), DCR_OK);
    for (size_t i = 0; i < 2; i++)
        assert_status(dcr_control_ack(fx->control, tau, k_receivers[i]), DCR_OK);
    dcr_commit_record_t k1;
    assert_status(dcr_control_commit(fx->control, "coord", tau, &fx->k0, base1, &k1), DCR_OK);
    return tau;
}

static void rank0_orders(fixture_t *fx, uint32_t kind, uint64_t tau, uint64_t version)
{
    dcr_owner_order_t o = {kind, 0, tau, version - (kind == DCR_OWNER_ATTEMPT), version};
    assert_status(dcr_group_send(fx->rank[0], 1, DCR_OWNER_TAG_ORDER, &o, sizeof o), DCR_OK);
}

/* Attempt tau, which this rank sent from version 0, is committed; rank 0
 * has said nothing and the stop flag is up (a rank that waits for rank 0's
 * order would stop): the rank takes the commit from the control plane. */
static uint64_t take_commit_early(fixture_t *fx)
{
    uint64_t tau = commit_attempt(fx);
    volatile sig_atomic_t stop = 1;
    dcr_owner_order_t o;
    assert_status(dcr_owner_next_order(&fx->follower, 0, tau, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_COMMIT);
    assert_true(o.tau == tau && o.version == 1);
    return tau;
}

static void test_commit_without_rank0_then_its_duplicate_dropped(void **state)
{
    fixture_t *fx = *state;
    uint64_t tau = take_commit_early(fx);
    volatile sig_atomic_t stop = 0;
    dcr_owner_order_t o;
    /* Rank 0's commit order comes, then its next attempt: the first is the
     * duplicate, the rank's next order is the attempt. */
    rank0_orders(fx, DCR_OWNER_COMMIT, tau, 1);
    rank0_orders(fx, DCR_OWNER_ATTEMPT, tau + 1, 1);
    assert_status(dcr_owner_next_order(&fx->follower, 1, 0, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_ATTEMPT);
    assert_true(o.tau == tau + 1);
}

static void test_commit_of_another_attempt_waits_for_the_restore(void **state)
{
    fixture_t *fx = *state;
    uint64_t tau = commit_attempt(fx);
    /* This rank sent another attempt (a later one): version 1 was committed
     * without it, and only rank 0 orders what follows. */
    rank0_orders(fx, DCR_OWNER_RESTORE, tau, 1);
    volatile sig_atomic_t stop = 0;
    dcr_owner_order_t o;
    assert_status(dcr_owner_next_order(&fx->follower, 0, tau + 1, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_RESTORE);
    assert_true(o.version == 1);
    /* Nor a commit of our attempt for a version the baselines do not
     * precede: a rank at version 1 sees nothing new in version 1. */
    rank0_orders(fx, DCR_OWNER_RESTORE, tau, 1);
    assert_status(dcr_owner_next_order(&fx->follower, 1, tau, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_RESTORE);
}

static void test_uncommitted_attempt_follows_rank0(void **state)
{
    fixture_t *fx = *state;
    uint64_t tau = 0;
    assert_status(prepare(fx->control, "coord", 0, k_receivers, 2, 10000, &tau), DCR_OK);
    /* Attempt tau is not committed: rank 0's retry order is what comes. */
    dcr_owner_order_t retry = {DCR_OWNER_ATTEMPT, 1, tau + 1, 0, 0};
    assert_status(dcr_group_send(fx->rank[0], 1, DCR_OWNER_TAG_ORDER, &retry, sizeof retry),
                  DCR_OK);
    volatile sig_atomic_t stop = 0;
    dcr_owner_order_t o;
    assert_status(dcr_owner_next_order(&fx->follower, 0, tau, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_ATTEMPT);
    assert_true(o.tau == tau + 1 && o.overwrite == 1);
}

static void test_contradicting_order_is_an_error(void **state)
{
    fixture_t *fx = *state;
    uint64_t tau = take_commit_early(fx);
    volatile sig_atomic_t stop = 0;
    dcr_owner_order_t o;
    rank0_orders(fx, DCR_OWNER_RESTORE, tau, 1);
    assert_status(dcr_owner_next_order(&fx->follower, 1, 0, &stop, &o), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "but rank 0 then ordered 3"));
}

static void test_stop_after_an_early_commit(void **state)
{
    fixture_t *fx = *state;
    (void)take_commit_early(fx);
    volatile sig_atomic_t stop = 0;
    dcr_owner_order_t o;
    /* Rank 0 stopped before it read the record: a stop, not an error. */
    rank0_orders(fx, DCR_OWNER_STOP, 0, 0);
    assert_status(dcr_owner_next_order(&fx->follower, 1, 0, &stop, &o), DCR_OK);
    assert_int_equal(o.kind, DCR_OWNER_STOP);
}

static void test_commit_test_is_ours(void **state)
{
    (void)state;
    dcr_commit_record_t rec = {.version = 5, .attempt = 9};
    assert_true(dcr_owner_commit_is_ours(&rec, 4, 9));
    assert_false(dcr_owner_commit_is_ours(&rec, 4, 0)); /* nothing sent */
    assert_false(dcr_owner_commit_is_ours(&rec, 4, 8)); /* another attempt */
    assert_false(dcr_owner_commit_is_ours(&rec, 3, 9)); /* a version skipped */
    assert_false(dcr_owner_commit_is_ours(&rec, 5, 9)); /* already held */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_without_rank0_then_its_duplicate_dropped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_commit_of_another_attempt_waits_for_the_restore, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_uncommitted_attempt_follows_rank0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contradicting_order_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_after_an_early_commit, setup, teardown),
        cmocka_unit_test(test_commit_test_is_ours),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
