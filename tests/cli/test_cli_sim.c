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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                         "--change-rate 0.03 --transport objstore --json");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_errors),
        cmocka_unit_test(test_paper_row_json),
        cmocka_unit_test(test_plan_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
