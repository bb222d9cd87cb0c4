/* ctest-labels: integration
 *
 * dcr faults train|campaign --processes --kill-coordinator-every N: every role
 * a process (owners as an MPI job, the coordinator, rollout nodes, the
 * verifier). Rollout-node processes are SIGKILLed at delivery, apply and
 * after the ack and restarted; the coordinator process is SIGKILLed in every
 * N-th transition and a new coordinator process resumes it from the control
 * plane. The oracle is the verifier process, which shares nothing with the
 * refit: it rebuilds the seeded world from the run flags and compares every
 * receiver's per-parameter digests of every committed version with a dense
 * refit. Lost versions: steps whose transition did not commit the next
 * version, so the committed version must equal the steps. Nothing (process,
 * run directory) may be left behind. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "../cli/cli_run.h"
#include "procs_test.h"

#define SMALL "--scale 64 --layers 2"

static int setup(void **state)
{
    (void)state;
    return run_tmp_setup("dcr-faults-coord-test");
}

static int teardown(void **state)
{
    (void)state;
    return run_tmp_teardown();
}

/* The run's figures every such run must show: all steps committed in turn
 * (none lost), the verifier's comparison of every receiver of every
 * version clean, every coordinator kill followed by a failover, every
 * killed node process restarted, and every role a process. */
static void assert_clean(const json_t *j, int steps)
{
    assert_int_equal(num(j, "steps"), steps);
    assert_int_equal(num(j, "mismatches"), 0);
    assert_int_equal(num(j, "lost"), 0);
    json_int_t ck = num(j, "coordinator_kills");
    assert_true(ck >= 1);
    assert_int_equal(num(j, "coordinator_restarts"), ck);
    assert_int_equal(num(j, "restarts"), num(j, "sigkills"));
    assert_int_equal(num(j, "faults"), 0);
    const json_t *p = json_object_get(j, "processes");
    assert_int_equal(num(p, "owners"), 4); /* the default training layout: 2 x 2 ranks */
    assert_int_equal(num(p, "coordinator"), 1);
    assert_int_equal(num(p, "rollout_nodes"), 2);
    assert_int_equal(num(p, "verifier"), 1);
}

/* 12 steps, a node kill due every step, the coordinator killed in every
 * third transition (at "opened" and "sent" in turn): at least 9 node
 * SIGKILLs, the three points all hit (seed 3's schedule, drawn up front,
 * has each; a kill that misses stays armed), 4 coordinator kills each with
 * a failover, versions 1..12 committed and bit-exact on every receiver. */
static void test_train_node_and_coordinator_kills(void **state)
{
    (void)state;
    json_t *j = run_json("faults train --processes --kill-coordinator-every 3 " SMALL
                         " --seed 3 --steps 12 --kill-every 1 --json");
    assert_clean(j, 12);
    assert_int_equal(num(j, "commits"), 12);
    assert_int_equal(num(j, "version"), 12);
    assert_int_equal(num(j, "coordinator_kills"), 4);
    json_int_t kills = num(j, "sigkills");
    assert_true(kills >= 9);
    assert_true(kills >= num(j, "kills_drawn") - 1); /* only the last may still be armed */
    const json_t *points = json_object_get(j, "sigkills_by_point");
    static const char *const names[] = {"delivery", "apply", "acked"};
    json_int_t sum = 0;
    for (int k = 0; k < 3; k++) {
        if (num(points, names[k]) < 1) fail_msg("no SIGKILL at %s", names[k]);
        sum += num(points, names[k]);
    }
    assert_int_equal(sum, kills);
    /* Every coordinator kill (at "opened" or "sent") costs its attempt:
     * the count comes from the control plane's attempts, a killed
     * coordinator's included, not from the last coordinator's own. */
    assert_true(num(j, "retries") >= num(j, "coordinator_kills"));
    json_decref(j);
    run_tmp_assert_nothing_left();
}

/* A campaign: each seed its own run (and node-kill schedule); the summary
 * adds them up. */
static void test_campaign(void **state)
{
    (void)state;
    json_t *j = run_json("faults campaign --processes --kill-coordinator-every 2 " SMALL
                         " --seeds 2 --seed 20 --steps 2 --kill-every 1 --json");
    assert_clean(j, 4);
    assert_int_equal(num(j, "commits"), 4);
    assert_int_equal(num(j, "version"), 2); /* the last run's */
    assert_int_equal(num(j, "coordinator_kills"), 2);
    assert_int_equal(num(j, "kills_drawn"), 4);
    assert_restores(j, num(j, "restores"));
    json_decref(j);
    run_tmp_assert_nothing_left();
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_error("faults train --kill-coordinator-every 2 " SMALL, 2, "--processes");
    expect_error("faults train --processes --kill-coordinator-every 2 --faults-per-step 1 " SMALL,
                 2, "--faults-per-step");
    expect_error("faults train --processes --kill-coordinator-every 2 --attempts 3 " SMALL, 2,
                 "--attempts");
    expect_error("faults campaign --processes --kill-coordinator-every 2 --corrupt-digest " SMALL,
                 2, "--corrupt-digest");
    expect_error("faults train --processes --kill-coordinator-every -1 " SMALL, 2,
                 "--kill-coordinator-every");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_train_node_and_coordinator_kills),
        cmocka_unit_test(test_campaign),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
