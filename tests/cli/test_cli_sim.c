/* ctest-labels: integration
 *
 * dcr sim as a user meets it: help, one-line errors for bad input, and the
 * JSON rows of the paper testbed and of a plan sweep with the keys the
 * issue names. Runs the binary named by DCR_CLI (default: the built one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli_run.h"

static void test_help_and_errors(void **state)
{
    static result_t r;
    run(&r, "sim --help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--testbed"));
    run(&r, "sim plan --help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--rollout-nodes"));
    expect_error("simulate", 2, "simulate");
    expect_error("sim --testbed moon", 2, "--testbed moon");
    expect_error("sim --calibration /nonexistent/cal.json", 1, "/nonexistent/cal.json");
    expect_error("sim --testbed paper --model no-such-model", 2, "no-such-model");
    expect_error("sim plan --rollout-nodes 0,2", 2, "--rollout-nodes");
    expect_error("sim plan --gbps fast", 2, "--gbps");
    expect_error("sim plan --change-rate 2", 2, "--change-rate");
    expect_error("sim plan --transport carrier-pigeon", 2, "carrier-pigeon");
    /* Checked before a calibration is measured (that takes seconds). */
    expect_error("sim --change-rate 3", 2, "--change-rate");
    expect_error("sim --transport carrier-pigeon", 2, "carrier-pigeon");
    /* Usage errors exit 2 whatever finds them (issue 15). */
    expect_error("sim --change-rate 2", 2, "--change-rate");
    expect_error("sim --tp 3", 2, "tp");
    expect_error("sim --layers 100000", 2, "layers 100000");
    expect_error("sim --mode Z", 2, "mode");
    expect_error("sim --latency-ms 0x10", 2, "decimal");
    expect_error("sim plan -o /proc/version", 2, "-o /proc/version");
    expect_error("sim --jsonl --json", 2, "--jsonl");
    expect_error("sim --jsonl --validate", 2, "--jsonl");
}

static const char *const k_row_keys[] = {
    "model",       "checkpoint_bytes", "transport",     "change_rate",       "latency_s",
    "reference_s", "speedup",          "payload_bytes", "construction_lb_s", "transport_lb_s"};

static void check_row(json_t *row)
{
    for (size_t i = 0; i < sizeof(k_row_keys) / sizeof(k_row_keys[0]); i++)
        if (!json_object_get(row, k_row_keys[i])) fail_msg("row lacks \"%s\"", k_row_keys[i]);
    double lat = json_real_value(json_object_get(row, "latency_s"));
    double ref = json_real_value(json_object_get(row, "reference_s"));
    assert_true(lat >= json_real_value(json_object_get(row, "construction_lb_s")));
    assert_true(lat >= json_real_value(json_object_get(row, "transport_lb_s")));
    assert_true(fabs(json_real_value(json_object_get(row, "speedup")) - ref / lat) < 1e-6 * ref);
}

/* One row of the paper testbed: the documented keys, the seed's 30B range
 * beside it, and the fitted calibration's provenance. */
static void test_paper_row_json(void **state)
{
    json_t *j = run_json("sim --testbed paper --model nemotron-3-nano-30b-a3b --transport relay "
                         "--change-rate 0.03 --json");
    json_t *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(rows), 1);
    json_t *row = json_array_get(rows, 0);
    check_row(row);
    json_t *seed = json_object_get(row, "seed");
    assert_string_equal(json_string_value(json_object_get(seed, "size")), "30B");
    json_t *range = json_object_get(seed, "latency_s");
    assert_true(json_real_value(json_array_get(range, 0)) == 8.3);
    assert_true(json_real_value(json_array_get(range, 1)) == 14.5);
    assert_true(json_array_size(json_object_get(j, "calibration_provenance")) >= 2);
    json_decref(j);
}

/* A plan sweep: every grid point is a row with its node count and rate. */
static void test_plan_json(void **state)
{
    json_t *j = run_json("sim plan --model llama-3.2-3b --rollout-nodes 1,2 --gbps 1,2 "
                         "--change-rate 0.03 --transport objstore --no-crossover --json");
    json_t *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(rows), 4);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        check_row(row);
        assert_int_equal(json_integer_value(json_object_get(row, "rollout_nodes")), 1 + (i % 2));
        assert_true(json_real_value(json_object_get(row, "gbps")) == (double)(1 + i / 2));
    }
    json_decref(j);
}

/* ---- one cluster, every entry point --------------------------------------------- */

/* latency_s of the first row of a JSON run. */
static double first_latency(const char *args)
{
    json_t *j = run_json(args);
    json_t *row = json_array_get(json_object_get(j, "rows"), 0);
    if (!row) fail_msg("dcr %s: no rows", args);
    double lat = json_real_value(json_object_get(row, "latency_s"));
    assert_non_null(json_object_get(j, "description"));
    json_decref(j);
    return lat;
}

#define LAYOUT " --model nemotron-3-nano-30b-a3b --tp 4 --ep 8 --etp 1 "

/* The complaint: `sim`, `sim plan` and `sim --testbed` gave three
 * answers for one cluster. One description (the seed's testbed) through
 * each entry point, by preset name, by file and by --testbed, must give
 * one latency (within 1%), also with a link-rate override given as
 * `sim --cross-gbps` and as `sim plan --gbps`. */
static void test_one_cluster_every_entry_point(void **state)
{
    const char *relay[] = {
        "sim" LAYOUT "--transport relay --change-rate 0.05 --json",
        "sim --testbed paper" LAYOUT "--transport relay --change-rate 0.05 --json",
        "sim --cluster paper-testbed" LAYOUT "--transport relay --change-rate 0.05 --json",
        "sim --cluster " DCR_SOURCE_DIR "/sim/clusters/paper-testbed.json" LAYOUT
        "--transport relay --change-rate 0.05 --json",
        "sim plan --rollout-nodes 8" LAYOUT
        "--transport relay --change-rate 0.05 --no-crossover --json",
    };
    double first = 0;
    for (size_t i = 0; i < sizeof(relay) / sizeof(relay[0]); i++) {
        double lat = first_latency(relay[i]);
        if (i == 0) first = lat;
        if (!(lat > 0) || fabs(lat - first) > 0.01 * first)
            fail_msg("dcr %s: %.4f s, the first entry point %.4f s", relay[i], lat, first);
    }
    /* A flag overrides a field the same way on every entry point. */
    double sim100 = first_latency("sim" LAYOUT "--transport objstore --change-rate 0.05 "
                                  "--cross-gbps 100 --rollout-nodes 64 --json");
    double plan100 = first_latency("sim plan --rollout-nodes 64 --gbps 100" LAYOUT
                                   "--transport objstore --change-rate 0.05 --no-crossover --json");
    if (fabs(sim100 - plan100) > 0.01 * plan100)
        fail_msg("sim --cross-gbps 100: %.4f s, sim plan --gbps 100: %.4f s", sim100, plan100);
    /* nemo-rl: by --testbed and by --cluster. */
    double nemo = first_latency("sim --testbed nemo-rl --model paper-120b-hybrid --tp 4 --ep 8 "
                                "--etp 1 --transport objstore --change-rate 0.03 --json");
    double nemo_c = first_latency("sim --cluster nemo-rl --model paper-120b-hybrid --tp 4 --ep 8 "
                                  "--etp 1 --transport objstore --change-rate 0.03 --json");
    if (fabs(nemo - nemo_c) > 0.01 * nemo) fail_msg("nemo-rl %.4f s, --cluster %.4f", nemo, nemo_c);
}

/* The echo: every field of the description with what was overridden, and
 * a plan's direct answers. */
static void test_description_and_crossover(void **state)
{
    json_t *j = run_json("sim plan --rollout-nodes 8,16 --change-rate 0.05" LAYOUT
                         "--transport objstore --store-flows 4 --no-sensitivity --json");
    json_t *d = json_object_get(j, "description");
    assert_int_equal(json_integer_value(json_object_get(d, "store_flows")), 4);
    assert_non_null(strstr(json_string_value(json_object_get(d, "overridden")), "store_flows"));
    assert_true(json_real_value(json_object_get(d, "cross_gbps")) == 3.846);
    assert_non_null(json_object_get(json_object_get(d, "assumptions"), "store_get_rps"));
    json_t *c = json_array_get(json_object_get(j, "crossover"), 0);
    assert_non_null(c);
    assert_int_equal(json_integer_value(json_object_get(c, "rollout_nodes")), 16);
    /* The reference is slower than the refit at 5%, so the break-even rate is above 5%;
     * a line-rate reload of the checkpoint is faster than the reference. */
    double vs_ref = json_real_value(json_object_get(c, "vs_reference"));
    assert_true(vs_ref > 0.05 || json_is_null(json_object_get(c, "vs_reference")));
    assert_true(json_real_value(json_object_get(c, "line_rate_reload_s")) <
                json_real_value(json_object_get(c, "reference_s")));
    json_decref(j);
}

/* Issue 32's hostile inputs: one line, exit 2, nothing blocks. */
static void test_hostile_inputs(void **state)
{
    expect_error("sim --platform /nonexistent.xml", 2, "/nonexistent.xml");
    char dir[] = "/tmp/planner-testXXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[256], xml[256], cal[256], args[1024];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof(args), "sim --platform %s", fifo);
    expect_error(args, 2, "not a regular file");
    snprintf(args, sizeof(args), "sim --calibration %s", fifo);
    expect_error(args, 2, "not a regular file");
    snprintf(args, sizeof(args), "sim --cluster %s", fifo);
    expect_error(args, 2, "not a regular file");
    /* A platform whose link carries nothing. */
    snprintf(xml, sizeof(xml), "%s/zero.xml", dir);
    snprintf(args, sizeof(args), "sim --write-platform %s", xml);
    static result_t r;
    run(&r, args);
    assert_int_equal(r.rc, 0);
    snprintf(args, sizeof(args),
             "sed -i 's/id=\"xflow-tx-0\" bandwidth=\"[0-9.e+]*Bps\"/id=\"xflow-tx-0\" "
             "bandwidth=\"0Bps\"/' %s",
             xml);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof(args), "sim --platform %s", xml);
    expect_error(args, 2, "xflow");
    snprintf(args, sizeof(args), "sed -i 's/bandwidth=\"0Bps\"/bandwidth=\"-5Bps\"/' %s", xml);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof(args), "sim --platform %s", xml);
    expect_error(args, 2, "--platform");
    /* Not XML at all. */
    snprintf(args, sizeof(args), "sh -c 'echo garbage > %s'", xml);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof(args), "sim --platform %s", xml);
    expect_error(args, 2, "SimGrid cannot load it");
    /* A calibration with an absurd figure. */
    snprintf(cal, sizeof(cal), "%s/cal.json", dir);
    snprintf(
        args, sizeof(args),
        "sed 's/\"ack_s\": [0-9.e+-]*/\"ack_s\": 1e300/' %s/sim/calibrations/paper-testbed.json "
        "> %s",
        DCR_SOURCE_DIR, cal);
    assert_int_equal(system(args), 0);
    snprintf(args, sizeof(args), "sim --calibration %s", cal);
    expect_error(args, 2, "ack_s");
    snprintf(args, sizeof(args), "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

/* A sweep streamed with --jsonl and stopped after its first row: the file
 * holds that row, complete and valid, with the row the same configuration
 * gives alone (a separate run); progress went to stderr. */
static void test_sweep_jsonl_interrupted(void **state)
{
    char dir[] = "/tmp/dcr-sim-jsonl-XXXXXX", rows[4200], err[4200];
    assert_non_null(mkdtemp(dir));
    snprintf(rows, sizeof(rows), "%s/rows.jsonl", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen(rows, "w", stdout) || !freopen(err, "w", stderr)) _exit(127);
        /* The seed's testbed: 20 rows, minutes; the first (30B) in seconds. */
        execl(cli, cli, "sim", "--testbed", "paper", "--jsonl", (char *)NULL);
        _exit(127);
    }
    static char text[1 << 16];
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 6000 && !exited; i++) { /* 10 minutes at most, for a loaded machine */
        slurp(rows, text, sizeof(text));
        if (strchr(text, '\n')) break;
        exited = waitpid(pid, &status, WNOHANG) == pid;
        usleep(100000);
    }
    assert_false(exited);
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* Stopped before its 20 rows: the sweep did not finish. */
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    slurp(rows, text, sizeof(text));
    int lines = 0;
    json_t *first = NULL;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
        *nl = '\0';
        json_error_t jerr;
        json_t *row = json_loads(line, 0, &jerr);
        if (!row) fail_msg("line %d is not JSON: %s", lines + 1, jerr.text);
        check_row(row);
        if (!first)
            first = row;
        else
            json_decref(row);
    }
    assert_true(lines >= 1 && lines < 20);
    assert_string_equal(json_string_value(json_object_get(first, "model")),
                        "nemotron-3-nano-30b-a3b");
    assert_string_equal(json_string_value(json_object_get(first, "transport")), "objstore");
    assert_true(json_real_value(json_object_get(first, "change_rate")) == 0.03);
    json_t *alone = run_json("sim --testbed paper --model nemotron-3-nano-30b-a3b --transport "
                             "objstore --change-rate 0.03 --json");
    json_t *row = json_array_get(json_object_get(alone, "rows"), 0);
    assert_true(json_real_value(json_object_get(first, "latency_s")) ==
                json_real_value(json_object_get(row, "latency_s")));
    json_decref(alone);
    json_decref(first);
    slurp(err, text, sizeof(text));
    assert_non_null(strstr(text, "sim: 1/20 nemotron-3-nano-30b-a3b objstore 3%"));
    snprintf(text, sizeof(text), "rm -rf %s", dir);
    assert_int_equal(system(text), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_errors),
        cmocka_unit_test(test_paper_row_json),
        cmocka_unit_test(test_plan_json),
        cmocka_unit_test(test_one_cluster_every_entry_point),
        cmocka_unit_test(test_description_and_crossover),
        cmocka_unit_test(test_hostile_inputs),
        cmocka_unit_test(test_sweep_jsonl_interrupted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
