/* ctest-labels: integration
 *
 * dcr faults train|campaign --processes: rollout nodes as processes of this
 * host, SIGKILLed at delivery, apply and after the ack; each killed node is
 * restarted as a new process that restores the committed version by a dense
 * refit. The oracle is the verifier process: it shares nothing with the
 * refit, rebuilds the seeded world from the run flags, and compares every
 * receiver's per-parameter digests of every committed version with a dense
 * refit of that version. A digests file with one flipped bit must fail the
 * run, so the check can fail. No process or run directory is left behind. */
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
    return run_tmp_setup("dcr-faults-procs-test");
}

static int teardown(void **state)
{
    (void)state;
    return run_tmp_teardown();
}

/* The summary keys of dcr faults train, all present, and what every run
 * must show: nothing lost, nothing different from the dense refits. */
static void assert_clean(const json_t *j, int steps)
{
    static const char *const keys[] = {"steps",
                                       "faults",
                                       "attempts",
                                       "retries",
                                       "commits",
                                       "stops",
                                       "failovers",
                                       "kills",
                                       "restores",
                                       "mismatches",
                                       "baseline_mismatches",
                                       "lost",
                                       "checks",
                                       "version",
                                       "gate_reads",
                                       "gate_violations",
                                       "commit_checks",
                                       "commit_violations",
                                       "membership_mismatches"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) (void)num(j, keys[i]);
    assert_non_null(json_object_get(j, "faults_by_kind"));
    assert_int_equal(num(j, "steps"), steps);
    assert_int_equal(num(j, "mismatches"), 0);
    assert_int_equal(num(j, "baseline_mismatches"), 0);
    assert_int_equal(num(j, "lost"), 0);
    assert_int_equal(num(j, "membership_mismatches"), 0);
}

/* One SIGKILL a step: at least 9 of receiver-side processes, at each of the
 * three points; each one restarted; every version committed and every
 * receiver of every version equal to the verifier's dense refit. */
static void test_sigkills_at_every_point(void **state)
{
    (void)state;
    json_t *j = run_json("faults train --processes " SMALL " --seed 3 --steps 12 --kill-every 1 "
                         "--json");
    assert_clean(j, 12);
    assert_int_equal(num(j, "commits"), 12);
    assert_int_equal(num(j, "version"), 12);
    json_int_t kills = num(j, "sigkills"), drawn = num(j, "kills_drawn");
    assert_int_equal(drawn, 12);
    /* A kill that missed its point stays armed for the next attempt: only
     * the last one drawn may still be armed at the end. */
    assert_true(kills >= 9 && kills >= drawn - 1);
    json_t *points = json_object_get(j, "sigkills_by_point");
    json_int_t sum = 0;
    /* The schedule of seed 3 (drawn up front) has every point; each kill
     * stays armed until it fires. */
    for (int k = 0; k < 3; k++) {
        static const char *const names[] = {"delivery", "apply", "acked"};
        json_int_t n = num(points, names[k]);
        if (n < 1) fail_msg("no SIGKILL at %s", names[k]);
        sum += n;
    }
    assert_int_equal(num(points, "coordinator"), 0);
    assert_int_equal(sum, kills);
    assert_int_equal(num(j, "restarts"), kills);
    /* Every kill landed before its attempt's commit (mid-refit): each one
     * failed its attempt, and one overwrite retry committed. */
    assert_int_equal(num(j, "retries"), kills);
    assert_int_equal(num(j, "attempts"), 12 + kills);
    const json_t *p = json_object_get(j, "processes");
    assert_int_equal(num(p, "rollout_nodes"), 2);
    assert_int_equal(num(p, "verifier"), 1);
    assert_restores(j, num(j, "restores"));
    json_decref(j);
    run_tmp_assert_nothing_left();
}

/* A transition that stops after node writes: with one attempt per step, a
 * SIGKILL after every node acknowledged (all writes applied) makes the
 * coordinator give up, leaving the surviving node's receivers holding the
 * stopped attempt's writes. Each such node must restore its committed
 * version before the next attempt (restores_by_cause "dirty": without the
 * node-side fix none is made), from its resident copy (a clean restore that
 * moves nothing), and every committed version stays bit-exact. The kill
 * schedule of seed 3 is drawn up front and holds an acked kill. */
static void test_stopped_attempt_leaves_no_dirty_node(void **state)
{
    (void)state;
    json_t *j = run_json("faults train --processes " SMALL " --seed 3 --steps 6 --kill-every 2 "
                         "--attempts 1 --json");
    assert_clean(j, 6);
    json_int_t kills = num(j, "sigkills");
    json_int_t acked = num(json_object_get(j, "sigkills_by_point"), "acked");
    assert_true(acked >= 1);
    /* Every kill lands before its attempt's commit; with one attempt the
     * step stops, and the next takes the same candidate up again. */
    assert_int_equal(num(j, "stops"), kills);
    assert_int_equal(num(j, "commits"), 6 - kills);
    assert_int_equal(num(j, "version"), 6 - kills);
    const json_t *causes = json_object_get(j, "restores_by_cause");
    assert_non_null(causes);
    json_int_t dirty = num(causes, "dirty");
    /* The survivor of each acked kill (2 receivers) at least; a delivery
     * or apply kill's survivor only when a payload reached it first. */
    assert_true(dirty >= 2 * acked);
    assert_int_equal(dirty % 2, 0);
    const json_t *clean = json_object_get(json_object_get(j, "restores_by_kind"), "clean");
    assert_true(num(clean, "count") >= dirty);
    assert_int_equal(num(clean, "bytes"), 0);
    assert_restores(j, dirty);
    json_decref(j);
    run_tmp_assert_nothing_left();
}

/* The request gate across processes: a restarted node process reports READY
 * (and may serve) only after it restored and checked every receiver. Each
 * process's log is one ordered stream: for every node, each READY of a
 * process after the first (a restart) must come after that process's
 * restore lines, one per receiver (cause "start"), with no READY between. */
static void test_restarted_node_ready_after_restore(void **state)
{
    (void)state;
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    char log[300], cmd[1200];
    snprintf(log, sizeof log, "%s/ready.log", g_tmp);
    snprintf(cmd, sizeof cmd,
             "%s faults train --processes " SMALL " --seed 3 --steps 5 --kill-every 1 "
             "--json >/dev/null 2>%s",
             cli, log);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    int readies[2] = {0, 0}, restored[2] = {0, 0}, restarts = 0;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        int n = -1;
        if (sscanf(line, "[rollout-node %d]", &n) != 1 || n < 0 || n > 1) {
            restarts += strstr(line, " restarted as pid ") != NULL;
            continue;
        }
        if (strstr(line, " restore ") && strstr(line, "(start)")) restored[n]++;
        if (!strstr(line, "READY at version")) continue;
        /* The first process of a node loads version 0: setup, no record. */
        if (readies[n]++ > 0 && restored[n] != 2)
            fail_msg("rollout node %d: READY after %d of its 2 receivers' restores: %s", n,
                     restored[n], line);
        restored[n] = 0;
    }
    fclose(f);
    unlink(log);
    assert_true(restarts >= 3);
    /* Every restart that got as far as READY was checked above; all but
     * perhaps the last one (killed at the last step) got there. */
    assert_true(readies[0] + readies[1] >= 2 + restarts - 1);
    run_tmp_assert_nothing_left();
}

/* One flipped bit in one receiver's digests of version 1 (a well-formed
 * file): the verifier names it and the run fails. */
static void test_corrupt_digest_is_a_mismatch(void **state)
{
    (void)state;
    static result_t r;
    run(&r, "faults train --processes " SMALL " --seed 4 --steps 3 --kill-every 2 "
            "--corrupt-digest --json");
    assert_int_equal(r.rc, 1);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    if (!j) fail_msg("no JSON on stdout: %s", e.text);
    assert_int_equal(num(j, "mismatches"), 1);
    assert_int_equal(num(j, "lost"), 0);
    json_decref(j);
    assert_non_null(strstr(r.err, "version 1, receiver 0: parameter "));
    assert_non_null(strstr(r.err, "1 bit mismatches"));
    run_tmp_assert_nothing_left();
}

/* Process kills with the faults that reach a processes run; those acting
 * inside a node, on the relay, or simulating a receiver's death are never
 * drawn. */
static void test_campaign_with_processes(void **state)
{
    (void)state;
    json_t *j = run_json("faults campaign --processes " SMALL " --seeds 2 --steps 4 "
                         "--faults-per-step 2 --kill-every 2 --seed 11 --json");
    assert_clean(j, 8);
    assert_int_equal(num(j, "kills_drawn"), 4);
    assert_true(num(j, "sigkills") >= 3);
    assert_true(num(j, "faults") > 0 && num(j, "faults") <= 16); /* armed; those that fired */
    const json_t *kinds = json_object_get(j, "faults_by_kind");
    static const char *const never[] = {"duplicate",     "delay",      "relay_link",
                                        "kill_delivery", "kill_apply", "kill_acked"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        assert_int_equal(num(kinds, never[i]), 0);
    json_decref(j);
    run_tmp_assert_nothing_left();
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_error("faults train --processes --transport relay " SMALL, 2, "objstore");
    expect_error("faults train --processes --rl async " SMALL, 2, "--rl sync");
    expect_error("faults train --corrupt-digest " SMALL, 2, "--processes");
    expect_error("faults campaign --processes --readers 2 " SMALL, 2, "--readers");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_sigkills_at_every_point),
        cmocka_unit_test(test_stopped_attempt_leaves_no_dirty_node),
        cmocka_unit_test(test_restarted_node_ready_after_restore),
        cmocka_unit_test(test_corrupt_digest_is_a_mismatch),
        cmocka_unit_test(test_campaign_with_processes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
