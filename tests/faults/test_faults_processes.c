/* ctest-labels: integration
 *
 * dcr faults train|campaign --processes: every role a process of this host
 * (owners as an MPI job, the coordinator, rollout nodes, the verifier).
 * Rollout-node processes are SIGKILLed at delivery, apply and after the ack
 * and restarted as new processes that restore the committed version before
 * they join; the coordinator process is SIGKILLed in every N-th transition
 * (default 10) and a new coordinator process resumes it from the control
 * plane. A campaign adds the faults this process acts out on what the roles
 * share (corrupt store objects, stopped node processes, a locked control
 * plane). The oracle is the verifier process: it shares nothing with the
 * refit, rebuilds the seeded world from the run flags, and compares every
 * receiver's per-parameter digests of every committed version with a dense
 * refit of that version. A digests file with one flipped bit must fail the
 * run, so the check can fail. Lost versions: steps whose transition did not
 * commit the next version. An elastic join (--join-at, --anchor-every): a
 * node started mid-run joins from an anchor plus replay (or densely)
 * without stalling the others. No process or run directory is left behind. */
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
 * must show: nothing lost, nothing different from the dense refits, every
 * coordinator kill followed by a failover (a new process that resumed),
 * every killed node process restarted, and every role a process. */
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
    assert_int_equal(num(j, "commits"), steps);
    assert_int_equal(num(j, "mismatches"), 0);
    assert_int_equal(num(j, "baseline_mismatches"), 0);
    assert_int_equal(num(j, "lost"), 0);
    assert_int_equal(num(j, "membership_mismatches"), 0);
    /* Without a join every version is checked on all 2 x 2 receivers. */
    if (!json_is_object(json_object_get(j, "join")))
        assert_int_equal(num(j, "checks"), 4 * num(j, "steps"));
    json_int_t ck = num(j, "coordinator_kills");
    assert_int_equal(num(j, "coordinator_restarts"), ck);
    assert_int_equal(num(j, "failovers"), ck);
    assert_int_equal(num(json_object_get(j, "sigkills_by_point"), "coordinator"), ck);
    assert_int_equal(num(j, "restarts"), num(j, "sigkills"));
    const json_t *p = json_object_get(j, "processes");
    assert_int_equal(num(p, "owners"), 4); /* the default training layout: 2 x 2 ranks */
    assert_int_equal(num(p, "coordinator"), 1);
    assert_int_equal(num(p, "rollout_nodes"), 2);
    assert_int_equal(num(p, "verifier"), 1);
}

/* A run's JSON (stdout) and its whole stderr (in `log`, which the caller
 * unlinks). */
static json_t *run_logged(const char *args, char *log, size_t cap)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    char out[300], cmd[1500];
    snprintf(log, cap, "%s/run.log", g_tmp);
    snprintf(out, sizeof out, "%s/run.json", g_tmp);
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", cli, args, out, log);
    int rc = system(cmd);
    json_error_t e;
    json_t *j = json_load_file(out, 0, &e);
    unlink(out);
    if (rc != 0) fail_msg("dcr %s failed (exit %d; its stderr: %s)", args, rc, log);
    if (!j) fail_msg("dcr %s: output is not JSON: %s", args, e.text);
    return j;
}

/* The request gate across processes: a restarted node process reports READY
 * (and may serve) only after it restored and checked every receiver. Each
 * process's log is one ordered stream: for every node, each READY of a
 * process after the first (a restart) must come after that process's
 * restore lines, one per receiver (cause "start"), with no READY between.
 * Returns the restarts the launcher logged. */
static int assert_ready_after_restore(const char *log)
{
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
    /* Every restart that got as far as READY was checked above; all but
     * perhaps the last one (killed at the last step) got there. */
    assert_true(readies[0] + readies[1] >= 2 + restarts - 1);
    return restarts;
}

/* The default run's shape, shortened: a node kill due every step (the
 * default: every 5th) and the default coordinator kills (every 10th
 * transition). At least 9 node SIGKILLs, the three points all hit (seed 3's
 * schedule, drawn up front, has each; a kill that misses stays armed), one
 * coordinator kill with its failover, versions 1..10 committed and
 * bit-exact on every receiver, and every restarted node READY only after
 * its restore. */
static void test_train_default_kills(void **state)
{
    (void)state;
    char log[300];
    json_t *j = run_logged("faults train --processes " SMALL " --seed 3 --steps 10 --kill-every 1 "
                           "--json",
                           log, sizeof log);
    assert_clean(j, 10);
    assert_int_equal(num(j, "version"), 10);
    assert_int_equal(num(j, "coordinator_kills"), 1); /* the 10th transition */
    assert_int_equal(num(j, "faults"), 0);
    json_int_t kills = num(j, "sigkills"), drawn = num(j, "kills_drawn");
    assert_int_equal(drawn, 10);
    /* A kill that missed its point stays armed for the next attempt: only
     * the last one drawn may still be armed at the end. */
    assert_true(kills >= 9 && kills >= drawn - 1);
    const json_t *points = json_object_get(j, "sigkills_by_point");
    static const char *const names[] = {"delivery", "apply", "acked"};
    json_int_t sum = 0;
    for (int k = 0; k < 3; k++) {
        if (num(points, names[k]) < 1) fail_msg("no SIGKILL at %s", names[k]);
        sum += num(points, names[k]);
    }
    assert_int_equal(sum, kills);
    /* The coordinator kill (at "opened") costs its attempt: the count comes
     * from the control plane's attempts, a killed coordinator's included. */
    assert_true(num(j, "retries") >= num(j, "coordinator_kills"));
    /* Live resident weights: a node holding writes of an attempt that did
     * not commit (a survivor) takes part in the overwrite retry with both
     * its receivers as they are, repaired in place (checked against the
     * oracle before it acknowledges); so does a node killed after its first
     * write of an attempt, restarted dirty. Kills at apply happen (above):
     * at least one repair, each moving a retry's payloads, far below a
     * dense refit. */
    const json_t *causes = json_object_get(j, "restores_by_cause");
    json_int_t dirty = num(causes, "dirty");
    assert_int_equal(dirty % 2, 0);
    const json_t *kinds = json_object_get(j, "restores_by_kind");
    const json_t *clean = json_object_get(kinds, "clean");
    const json_t *repair = json_object_get(kinds, "repair");
    assert_int_equal(num(clean, "bytes"), 0);
    assert_true(num(repair, "count") >= 1);
    assert_true(num(repair, "bytes") > 0);
    assert_true(num(repair, "bytes") * 5 < num(repair, "dense_bytes"));
    assert_true(num(clean, "count") + num(repair, "count") >= dirty);
    assert_restores(j, num(j, "restores"));
    json_decref(j);
    assert_true(assert_ready_after_restore(log) >= 9);
    unlink(log);
    run_tmp_assert_nothing_left();
}

/* One flipped bit in one receiver's digests of version 1 (a well-formed
 * file): the verifier names it and the run fails. --kill-coordinator-every
 * 0 turns the coordinator kills off. */
static void test_corrupt_digest_is_a_mismatch(void **state)
{
    (void)state;
    static result_t r;
    run(&r, "faults train --processes " SMALL " --seed 4 --steps 2 --kill-every 2 "
            "--kill-coordinator-every 0 --corrupt-digest --json");
    assert_int_equal(r.rc, 1);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    if (!j) fail_msg("no JSON on stdout: %s", e.text);
    assert_int_equal(num(j, "mismatches"), 1);
    assert_int_equal(num(j, "lost"), 0);
    assert_int_equal(num(j, "coordinator_kills"), 0);
    json_decref(j);
    assert_non_null(strstr(r.err, "version 1, receiver 0: parameter "));
    assert_non_null(strstr(r.err, "1 bit mismatches"));
    run_tmp_assert_nothing_left();
}

/* Process kills (nodes and coordinator) with the faults this process acts
 * out; those acting inside a role, on the relay, or simulating a death are
 * never drawn. Each seed its own run (schedule and faults drawn from it);
 * the summary adds them up. */
static void test_campaign_with_processes(void **state)
{
    (void)state;
    json_t *j = run_json("faults campaign --processes " SMALL " --seeds 2 --steps 2 "
                         "--faults-per-step 2 --kill-every 1 "
                         "--seed 11 --json");
    assert_clean(j, 4);
    assert_int_equal(num(j, "version"), 2); /* the last run's */
    /* The campaign's default coordinator kills: in every 2nd transition. */
    assert_int_equal(num(j, "coordinator_kills"), 2);
    assert_int_equal(num(j, "kills_drawn"), 4);
    assert_true(num(j, "sigkills") >= 2); /* per run, only the last may still be armed */
    json_int_t faults = num(j, "faults");
    assert_true(faults > 0 && faults <= 8); /* armed; those that fired */
    const json_t *kinds = json_object_get(j, "faults_by_kind");
    static const char *const acted[] = {"corrupt", "delay", "control_busy"};
    json_int_t sum = 0;
    for (size_t i = 0; i < sizeof(acted) / sizeof(acted[0]); i++) sum += num(kinds, acted[i]);
    assert_int_equal(sum, faults);
    assert_restores(j, num(j, "restores"));
    json_decref(j);
    run_tmp_assert_nothing_left();
}

/* The join's figures (--join-at): node 1, the step, two receivers'
 * restores of `kind`, a version committed by then, READY within the run. */
static const json_t *assert_join(const json_t *j, const char *kind, int at, int steps)
{
    const json_t *join = json_object_get(j, "join");
    if (!json_is_object(join)) fail_msg("no join object in the results");
    assert_int_equal(num(join, "node"), 1);
    assert_int_equal(num(join, "at_step"), at);
    /* It started after step at-1 committed version at, so it holds that or later. */
    json_int_t joined = num(join, "version");
    assert_true(joined >= at && joined <= steps);
    /* Checks performed: node 0's 2 receivers at every version, node 1's at
     * the version it joined at and after (none before: it did not exist). */
    assert_int_equal(num(j, "checks"), 2 * steps + 2 * (steps - joined + 1));
    assert_true(json_real_value(json_object_get(join, "seconds")) > 0);
    const json_t *kinds = json_object_get(join, "restores_by_kind");
    assert_int_equal(json_object_size(kinds), 1);
    assert_int_equal(num(kinds, kind), 2);
    return join;
}

/* An elastic join: the last rollout node's process starts before step 3
 * while the others refit on (attempts never wait for it), joins from the
 * newest anchor (written by node 0 every 2 commits) plus replay, and every
 * version from its join on is bit-exact on its receivers too (the verifier
 * process, a dense refit of each version). Its bytes: one tensor-parallel
 * shard's object each plus the replay, below the dense refits'. Without
 * anchors the same join is dense, moving exactly the dense bytes. */
static void test_elastic_join(void **state)
{
    (void)state;
    char log[300];
    json_t *j = run_logged("faults train --processes " SMALL " --seed 5 --steps 8 --join-at 3 "
                           "--anchor-every 2 --kill-every 0 --kill-coordinator-every 0 --json",
                           log, sizeof log);
    assert_clean(j, 8);
    assert_int_equal(num(j, "sigkills"), 0);
    const json_t *join = assert_join(j, "anchor", 3, 8);
    assert_true(num(join, "bytes") > 0);
    assert_true(num(join, "bytes") < num(join, "dense_bytes"));
    json_decref(j);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    int anchored = 0, joined = 0;
    while (fgets(line, sizeof line, f)) {
        anchored += strstr(line, "[rollout-node 1]") && strstr(line, "restore anchor") &&
                    strstr(line, "joined from the anchor of version");
        joined += strstr(line, "rollout-node 1 joined at version") != NULL;
    }
    fclose(f);
    unlink(log);
    assert_int_equal(anchored, 2);
    assert_int_equal(joined, 1);
    run_tmp_assert_nothing_left();

    j = run_json("faults train --processes " SMALL " --seed 5 --steps 6 --join-at 2 "
                 "--kill-every 0 --kill-coordinator-every 0 --json");
    assert_clean(j, 6);
    join = assert_join(j, "dense", 2, 6);
    assert_int_equal(num(join, "bytes"), num(join, "dense_bytes"));
    json_decref(j);
    run_tmp_assert_nothing_left();
}

/* The text output of a run with a join: the join's line names the node,
 * its step and its receivers' restores by kind (both from the anchor), and
 * the restores line lists the anchor kind too. */
static void test_join_in_text_output(void **state)
{
    (void)state;
    static result_t r;
    run(&r, "faults train --processes " SMALL " --seed 5 --steps 4 --join-at 2 --anchor-every 1 "
            "--kill-every 0 --kill-coordinator-every 0");
    if (r.rc != 0) fail_msg("exit %d: %s", r.rc, r.err);
    const char *line = strstr(r.out, "elastic join: rollout node 1 started before step 2, ready at "
                                     "version ");
    if (!line) fail_msg("no join line in: %s", r.out);
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    const char *anchor = strstr(line, "anchor 2;");
    if (!anchor || anchor > end)
        fail_msg("the join line lacks its 2 anchor restores: %.300s", line);
    const char *restores = strstr(r.out, "receiver restores: clean ");
    assert_non_null(restores);
    assert_non_null(strstr(restores, ", anchor 2; bytes moved "));
    run_tmp_assert_nothing_left();
}

/* The relay transport between processes, with node and coordinator kills:
 * every restore takes the relay root's retention window on node 0 (read
 * through relay://): seed 7's two kills are aimed at delivery, and each
 * killed node comes back without a dense refit (a version missing from the
 * window would make it dense: "gap" in the log); every version bit-exact
 * on every receiver, none lost. */
static void test_relay_restores_from_the_root_window(void **state)
{
    (void)state;
    char log[300];
    json_t *j = run_logged("faults train --processes " SMALL " --seed 7 --steps 12 --transport "
                           "relay --json",
                           log, sizeof log);
    assert_clean(j, 12);
    assert_true(num(j, "sigkills") >= 1);
    /* A node killed at delivery comes back clean (it had written nothing
     * yet: how far it got depends on the machine's load) or by a repair;
     * never densely. Replays through relay:// are pinned byte for byte by
     * test_relay_replay. */
    const json_t *kinds = json_object_get(j, "restores_by_kind");
    assert_int_equal(num(json_object_get(kinds, "dense"), "count"), 0);
    assert_restores(j, num(j, "restores"));
    json_decref(j);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    int retained = 0;
    while (fgets(line, sizeof line, f))
        retained += strstr(line, "[rollout-node 0]") && strstr(line, "relay root: retained");
    fclose(f);
    unlink(log);
    assert_true(retained >= 1);
    run_tmp_assert_nothing_left();
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_error("faults train --processes --transport relay --join-at 2 " SMALL, 2, "objstore");
    expect_error("faults train --processes --transport relay --anchor-every 2 " SMALL, 2,
                 "objstore");
    expect_error("faults train --testbed netns --transport relay " SMALL, 2, "objstore");
    expect_error("faults train --processes --transport carrier-pigeon " SMALL, 2,
                 "objstore or relay");
    expect_error("faults train --processes --rl async " SMALL, 2, "--rl sync");
    expect_error("faults train --corrupt-digest " SMALL, 2, "--processes");
    expect_error("faults campaign --processes --readers 2 " SMALL, 2, "--readers");
    expect_error("faults train --kill-coordinator-every 2 " SMALL, 2, "--processes");
    expect_error("faults train --processes --attempts 3 " SMALL, 2, "--attempts");
    expect_error("faults train --processes --kill-coordinator-every -1 " SMALL, 2,
                 "--kill-coordinator-every");
    expect_error("faults train --join-at 2 " SMALL, 2, "--processes");
    expect_error("faults train --anchor-every 2 " SMALL, 2, "--processes");
    expect_error("faults train --processes --anchor-every 9 " SMALL, 2, "retention window");
    expect_error("faults train --processes --steps 4 --join-at 4 " SMALL, 2, "below --steps");
    expect_error("faults train --processes --rollout-nodes 1 --join-at 2 " SMALL, 2,
                 "2 rollout nodes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_train_default_kills),
        cmocka_unit_test(test_corrupt_digest_is_a_mismatch),
        cmocka_unit_test(test_campaign_with_processes),
        cmocka_unit_test(test_elastic_join),
        cmocka_unit_test(test_join_in_text_output),
        cmocka_unit_test(test_relay_restores_from_the_root_window),
    };
    /* One test by name (a glob), as in test_cli_processes: DCR_TEST_FILTER. */
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
