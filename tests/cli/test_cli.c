/* ctest-labels: integration
 *
 * The dcr command as a user meets it: exit codes, one-line errors, JSON
 * output with the documented keys, and figures that must match the seed
 * (Table D.2 item counts). Runs the binary named by DCR_CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"
#include <jansson.h>

#include "cli_run.h"

static void test_help_and_usage_errors(void **state)
{
    static result_t r;
    run(&r, "--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "inventory"));
    const char *commands[] = {"inventory", "construct",  "table2",           "payload",
                              "bench",     "microbench", "microbench apply", "verify-paths",
                              "bounds",    "sim",        "sim plan",         "faults"};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        char args[64];
        snprintf(args, sizeof(args), "%s --help", commands[i]);
        run(&r, args);
        assert_int_equal(r.rc, 0);
        assert_non_null(strstr(r.out, "usage: dcr"));
    }
    expect_error("frobnicate", 2, "unknown command");
    expect_error("inventory --bogus", 2, "unknown option");
    expect_error("inventory --scale", 2, "needs a value");
    expect_error("inventory --scale 0", 2, "--scale");
    expect_error("inventory --scale 2x", 2, "integer");
    expect_error("inventory --model no-such-model", 2, "no-such-model");
    expect_error("inventory --tp 3 --gpus-per-node 3", 2, "tp 3");
    expect_error("inventory --mapping nonsense", 2, "nonsense");
    expect_error("construct --change-rate 2", 2, "--change-rate");
    expect_error("construct --mode Q", 2, "mode");
    expect_error("payload verify /nonexistent/file", 2, "/nonexistent/file");
    expect_error("payload", 2, "inspect");
    expect_error("construct --shuffle --no-shuffle", 2, "contradict");
    expect_error("construct --rounds 0", 2, "--rounds");
    expect_error("microbench apply --rates 0,2", 2, "--rates");
    expect_error("microbench frobnicate", 2, "apply");
}

/* The seed's Table D.2: 18,480t + 241 affine items at TP = ETP = t. */
static void test_inventory_matches_seed(void **state)
{
    const int degrees[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        char args[128];
        int t = degrees[i];
        snprintf(
            args, sizeof(args),
            "inventory --json --gpus-per-node %d --tp %d --etp %d --serve-tp %d --mapping paper", t,
            t, t, t);
        json_t *j = run_json(args);
        const char *keys[] = {"model",        "tensors",        "params",
                              "bytes",        "mapping",        "tp",
                              "etp",          "affine_tensors", "residual_tensors",
                              "affine_items", "residual_items", "affine_byte_share"};
        for (int k = 0; k < 12; k++)
            if (!json_object_get(j, keys[k])) fail_msg("inventory --json lacks %s", keys[k]);
        assert_int_equal(json_integer_value(json_object_get(j, "tensors")), 18867);
        assert_int_equal(json_integer_value(json_object_get(j, "affine_items")), 18480 * t + 241);
        assert_int_equal(json_integer_value(json_object_get(j, "residual_tensors")), 146);
        double share = json_real_value(json_object_get(j, "affine_byte_share"));
        assert_true(share > 0.962 && share < 0.964);
        /* The seed: 18,721 / 74,161 / 148,081 XOR items of 18,867 / 74,307 / 148,227, as prewarm
         * decides them. */
        assert_int_equal(json_integer_value(json_object_get(j, "xor_items")), 18480 * t + 241);
        assert_int_equal(json_integer_value(json_object_get(j, "overwrite_items")), 146);
        share = json_real_value(json_object_get(j, "xor_byte_share"));
        assert_true(share > 0.962 && share < 0.964);
        assert_string_equal(json_string_value(json_object_get(j, "mapping")), "paper");
        json_decref(j);
    }
}

/* Users get the extended mapping unless they name the seed's: every q/k/v
 * piece, padded-vocab row and Mamba component is affine, so the residual
 * tensors are the norms, routers and the like only (146 with paper's q/k/v,
 * embedding and head among them; Qwen3-30B-A3B has no Mamba). */
static void test_inventory_default_mapping_is_extended(void **state)
{
    (void)state;
    json_t *j = run_json("inventory --json");
    assert_string_equal(json_string_value(json_object_get(j, "mapping")), "extended");
    int64_t residual = json_integer_value(json_object_get(j, "residual_tensors"));
    json_decref(j);
    j = run_json("inventory --json --mapping paper");
    assert_string_equal(json_string_value(json_object_get(j, "mapping")), "paper");
    assert_int_equal(json_integer_value(json_object_get(j, "residual_tensors")), 146);
    assert_true(residual < 146);
    json_decref(j);
}

static void test_construct_payloads_verify(void **state)
{
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "cli-payloads"));
    char args[512];
    snprintf(args, sizeof(args),
             "construct --json --scale 64 --layers 2 --gpus-per-node 2 --tp 2 --keep-payloads %s",
             dir);
    json_t *j = run_json(args);
    const char *keys[] = {"construction_s", "changed_elements", "raw_changed_value_bytes",
                          "payload_bytes",  "payloads",         "xor_items",
                          "overwrite_items"};
    for (int k = 0; k < 7; k++)
        if (!json_object_get(j, keys[k])) fail_msg("construct --json lacks %s", keys[k]);
    int64_t payloads = json_integer_value(json_object_get(j, "payloads"));
    assert_true(payloads >= 2); /* two owners with changes */
    json_decref(j);
    /* Every kept payload verifies; a corrupted copy does not. */
    static result_t r;
    snprintf(args, sizeof(args), "ls %s/*.dcrp | wc -l > %s/count", dir, dir);
    assert_int_equal(system(args), 0);
    char count[32], path[600];
    snprintf(path, sizeof(path), "%s/count", dir);
    assert_int_equal(atoi(slurp(path, count, sizeof(count))), payloads + 0);
    unlink(path);
    snprintf(path, sizeof(path), "%s/tau1-owner0-0.dcrp", dir);
    snprintf(args, sizeof(args), "payload verify %s", path);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    snprintf(args, sizeof(args), "payload inspect %s", path);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "owner 0"));
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
    snprintf(args, sizeof(args), "payload verify %s", path);
    expect_error(args, 1, "tau1-owner0-0.dcrp");
    snprintf(args, sizeof(args), "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

/* dcr bench --keep-payloads DIR keeps what it promises: after the run the
 * store in DIR holds the last attempt's manifest and payloads, and each of
 * them verifies as a payload of that attempt. */
static void test_bench_keeps_payloads(void **state)
{
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "cli-kept"));
    char args[512];
    snprintf(args, sizeof(args),
             "bench --json --scale 64 --layers 1 --warmup 0 --refits 2 --keep-payloads %s", dir);
    json_t *j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_decref(j);
    /* Two refits, one attempt each: attempt 2 is the last. */
    char path[700];
    snprintf(path, sizeof(path), "%s/objstore-objstore/attempt-2/MANIFEST", dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof(path), "%s/objstore-objstore/attempt-2/payload-0-0.dcrp", dir);
    static result_t r;
    snprintf(args, sizeof(args), "payload inspect %s", path);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "attempt 2, owner 0, payload 0"));
    snprintf(args, sizeof(args), "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

static void test_construct_modes(void **state)
{
    json_t *j = run_json("construct --json --scale 64 --layers 2 --mode all --change-rate 0.05");
    json_t *modes = json_object_get(j, "modes");
    assert_non_null(modes);
    json_t *x = json_object_get(modes, "X"), *p = json_object_get(modes, "P"),
           *f = json_object_get(modes, "F");
    assert_non_null(x);
    assert_non_null(p);
    assert_non_null(f);
    /* Same changed set in every mode; P and F carry no XOR items. */
    json_int_t raw = json_integer_value(json_object_get(x, "raw_changed_value_bytes"));
    assert_int_equal(raw, json_integer_value(json_object_get(p, "raw_changed_value_bytes")));
    assert_int_equal(raw, json_integer_value(json_object_get(f, "raw_changed_value_bytes")));
    assert_int_equal(json_integer_value(json_object_get(p, "xor_items")), 0);
    assert_int_equal(json_integer_value(json_object_get(f, "xor_items")), 0);
    assert_true(json_integer_value(json_object_get(x, "xor_items")) > 0);
    json_decref(j);
}

/* dcr bench: the documented JSON keys, bounds within the window, a
 * readable Chrome trace and an HDF5 results file. */
static void test_bench_json_trace_results(void **state)
{
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "cli-bench"));
    char args[1024];
    snprintf(
        args, sizeof(args),
        "bench --json --scale 64 --layers 1 --warmup 0 --refits 2 --trace %s/t.json --out %s/r.h5",
        dir, dir);
    json_t *j = run_json(args);
    const char *keys[] = {"checkpoint_bytes",
                          "mean_latency_s",
                          "reference_s",
                          "speedup",
                          "payload_bytes_mean",
                          "cross_bytes_mean",
                          "raw_changed_value_bytes_mean",
                          "bit_exact",
                          "refits",
                          "construction_lb_s_mean",
                          "transport_lb_s_mean",
                          "finalization_s_mean"};
    for (int k = 0; k < 12; k++)
        if (!json_object_get(j, keys[k])) fail_msg("bench --json lacks %s", keys[k]);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), 2);
    const char *rkeys[] = {
        "latency_s",        "payload_bytes", "cross_bytes",       "raw_changed_value_bytes",
        "changed_elements", "bit_exact",     "construction_lb_s", "transport_lb_s",
        "finalization_s"};
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(refits, i);
        for (int k = 0; k < 9; k++)
            if (!json_object_get(r, rkeys[k])) fail_msg("bench refit lacks %s", rkeys[k]);
        double lat = json_real_value(json_object_get(r, "latency_s"));
        double clb = json_real_value(json_object_get(r, "construction_lb_s"));
        double tlb = json_real_value(json_object_get(r, "transport_lb_s"));
        assert_true(clb > 0 && clb <= lat && tlb > 0 &&
                    tlb <= lat); /* unions clipped to the window */
    }
    json_decref(j);
    snprintf(args, sizeof(args), "bounds %s/t.json --json", dir);
    j = run_json(args);
    assert_non_null(json_object_get(j, "refits"));
    json_decref(j);
    snprintf(args, sizeof(args), "%s/r.h5", dir);
    FILE *f = fopen(args, "rb");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof(args), "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

static const char *run_directory_of(const json_t *j)
{
    const char *where =
        json_string_value(json_object_get(json_object_get(j, "config"), "run_directory"));
    if (!where) fail_msg("bench --json: config lacks run_directory");
    return where;
}

/* Where dcr bench puts its files: by default the run directory in memory
 * (when /dev/shm is a tmpfs) and the control plane on the disk; a user's
 * --workdir holds both; without room in memory (here: a window of a
 * million retained versions) the run directory is on the disk, with one
 * warning. The configuration says which. */
static void test_bench_run_directory_layouts(void **state)
{
    bool shm = testfiles_shm_is_memory();
    const char *tiny = "bench --json --scale 64 --layers 1 --warmup 0 --refits 1";
    char args[1024];
    json_t *j = run_json(tiny);
    assert_string_equal(run_directory_of(j), shm ? "memory" : "disk");
    json_decref(j);

    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "cli-layout"));
    snprintf(args, sizeof(args), "%s --workdir %s/run", tiny, dir);
    j = run_json(args);
    assert_string_equal(run_directory_of(j), "disk");
    json_decref(j);
    snprintf(args, sizeof(args), "%s/run/control.db", dir);
    assert_int_equal(access(args, F_OK), 0);
    assert_int_equal(testfiles_rmtree(dir), 0);

    static result_t r;
    snprintf(args, sizeof(args), "%s --retain 1000000", tiny);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    json_error_t e;
    j = json_loads(r.out, 0, &e);
    assert_non_null(j);
    assert_string_equal(run_directory_of(j), "disk");
    json_decref(j);
    if (shm) assert_non_null(strstr(r.err, "bytes free: the run directory is "));
}

/* verify-paths: every path class of a layout exercised, no mismatch. */
static void test_verify_paths(void **state)
{
    json_t *j = run_json("verify-paths --json --model llama-3.2-3b --scale 64 --layers 1 "
                         "--serve-tp 2 --fp32-norms --trials 2");
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 0);
    assert_true(json_integer_value(json_object_get(j, "cases")) == 4);
    json_t *by = json_object_get(j, "by_path");
    assert_true(json_integer_value(json_object_get(json_object_get(by, "xor"), "items")) > 0);
    assert_true(json_integer_value(json_object_get(json_object_get(by, "cast"), "items")) > 0);
    json_decref(j);
    j = run_json("verify-paths --json --model nemotron-3-nano-30b-a3b --scale 64 --layers 6 "
                 "--serve-tp 2 --serve-ep --trials 2");
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 0);
    by = json_object_get(j, "by_path");
    assert_true(json_integer_value(json_object_get(json_object_get(by, "transform"), "items")) > 0);
    assert_true(json_integer_value(json_object_get(json_object_get(by, "skipped"), "items")) > 0);
    assert_true(json_integer_value(json_object_get(json_object_get(by, "overwrite"), "items")) > 0);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_usage_errors),
        cmocka_unit_test(test_inventory_matches_seed),
        cmocka_unit_test(test_inventory_default_mapping_is_extended),
        cmocka_unit_test(test_construct_payloads_verify),
        cmocka_unit_test(test_bench_keeps_payloads),
        cmocka_unit_test(test_construct_modes),
        cmocka_unit_test(test_bench_json_trace_results),
        cmocka_unit_test(test_bench_run_directory_layouts),
        cmocka_unit_test(test_verify_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
