/* ctest-labels: integration
 *
 * dcr bench --ab-binary OTHER_DCR from the command line. With this build on
 * both sides the results file has the layout an --ab run of the same flags
 * writes (two runs, side A then B, the same refits columns in the same
 * order, block 0..n-1 on both, the same summary keys; the config adds only
 * ab_binary and dcr_version, each side's binary's --version line), both
 * sides bit-exact with equal payload bytes pair by pair, and dcr compare
 * on the file gives a verdict and finds no configuration key in which the
 * sides differ (the worker ran exactly this configuration). A side B that
 * is not dcr, ends early or sends garbage ends the run with exit 1, one
 * line, and no results file; combinations that cannot work are usage
 * errors (exit 2, one line). The runs use DCR_LOG=warn so that stderr holds
 * only what the command reports. */
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

#include "cli_run.h"
#include "reports/results_read.h"
#include "workloads/harness/results.h"

static char dir[128], args[8192];
static const char *const small = "--scale 64 --layers 2 --warmup 1 --refits 10";

static const char *dcr_path(void)
{
    const char *c = getenv("DCR_CLI");
    return c ? c : DCR_CLI_PATH;
}

static const char *in_dir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static int setup(void **state)
{
    (void)state;
    setenv("DCR_LOG", "warn", 1);
    snprintf(dir, sizeof(dir), "/tmp/dcr-test-cli-ab-binary-%d", (int)getpid());
    return mkdir(dir, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static dcr_results_set_t *read_set(const char *path)
{
    dcr_results_set_t *set = NULL;
    if (dcr_results_read(path, &set) != DCR_OK) fail_msg("%s: %s", path, dcr_error_detail());
    assert_int_equal(set->nruns, 2);
    return set;
}

/* Whether two JSON objects have the same keys, but for those in `extra`
 * (which only b has). */
static void same_keys(const json_t *a, const json_t *b, const char *const *extra, size_t nextra)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)a, key, v) if (!json_object_get(b, key))
        fail_msg("key %s missing", key);
    size_t extra_seen = 0;
    json_object_foreach((json_t *)b, key, v)
    {
        if (json_object_get(a, key)) continue;
        bool allowed = false;
        for (size_t i = 0; i < nextra; i++) allowed |= !strcmp(key, extra[i]);
        if (!allowed) fail_msg("unexpected key %s", key);
        extra_seen++;
    }
    assert_int_equal(extra_seen, nextra);
}

static void test_same_binary_file(void **state)
{
    (void)state;
    static result_t r;
    char bin[256], ab[256];
    snprintf(bin, sizeof(bin), "%s", in_dir("bin.h5"));
    snprintf(ab, sizeof(ab), "%s", in_dir("ab.h5"));
    snprintf(args, sizeof(args), "bench %s --ab-binary %s --out %s", small, dcr_path(), bin);
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s: exit %d: %s", args, r.rc, r.err);
    assert_non_null(strstr(r.out, "side B "));
    snprintf(args, sizeof(args), "bench %s --ab same --out %s", small, ab);
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s: exit %d: %s", args, r.rc, r.err);
    dcr_results_set_t *b = read_set(bin), *a = read_set(ab);
    static const char *const extra[] = {"ab_binary", "dcr_version"};
    for (size_t k = 0; k < 2; k++) {
        const dcr_results_stored_run_t *x = &b->runs[k], *y = &a->runs[k];
        assert_string_equal(json_string_value(json_object_get(x->summary, DCR_RESULTS_AB_SIDE)),
                            k ? "B" : "A");
        assert_int_equal(x->nrefits, 10);
        assert_int_equal(x->ncolumns, y->ncolumns);
        for (size_t c = 0; c < x->ncolumns; c++)
            assert_string_equal(x->columns[c].name, y->columns[c].name);
        const double *block = dcr_results_column(x, DCR_RESULTS_BLOCK);
        const double *exact = dcr_results_column(x, "bit_exact");
        assert_non_null(block);
        for (size_t i = 0; i < x->nrefits; i++) assert_true(block[i] == (double)i && exact[i] == 1);
        same_keys(y->summary, x->summary, NULL, 0);
        same_keys(y->config, x->config, extra, 2);
        assert_string_equal(json_string_value(json_object_get(x->config, "ab")), "binary");
        const char *v = json_string_value(json_object_get(x->config, "dcr_version"));
        assert_true(v && !strncmp(v, "dcr ", 4));
    }
    const double *pa = dcr_results_column(&b->runs[0], "payload_bytes"),
                 *pb = dcr_results_column(&b->runs[1], "payload_bytes");
    for (size_t i = 0; i < 10; i++) assert_true(pa[i] > 0 && pa[i] == pb[i]);
    dcr_results_set_destroy(a);
    dcr_results_set_destroy(b);
    snprintf(args, sizeof(args), "compare %s --json", bin);
    run(&r, args);
    if (r.rc != 0 && r.rc != 1) fail_msg("dcr %s: exit %d: %s", args, r.rc, r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    if (!j) fail_msg("dcr %s: not JSON: %s", args, e.text);
    const char *verdict = json_string_value(json_object_get(j, "verdict"));
    assert_non_null(verdict);
    assert_int_equal(r.rc, !strcmp(verdict, "regressed"));
    assert_true(json_is_true(json_object_get(j, "paired")));
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "ab"), "differs")), 0);
    json_decref(j);
}

/* Without --refits an A/B run makes DCR_BENCH_AB_DEFAULT_REFITS (40) timed
 * refits a side; the worker, started without the flag too, makes as many
 * (a count the two disagree on would end the run). */
static void test_default_refits_a_side(void **state)
{
    (void)state;
    static result_t r;
    char out[256];
    snprintf(out, sizeof(out), "%s", in_dir("default.h5"));
    snprintf(args, sizeof(args),
             "bench --scale 64 --layers 2 --warmup 0 --no-verify "
             "--ab-binary %s --out %s",
             dcr_path(), out);
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s: exit %d: %s", args, r.rc, r.err);
    dcr_results_set_t *set = read_set(out);
    for (size_t k = 0; k < 2; k++) assert_int_equal(set->runs[k].nrefits, 40);
    dcr_results_set_destroy(set);
}

/* A script answering --version like dcr, else running body. */
static const char *script(const char *name, const char *body)
{
    const char *path = in_dir(name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then echo 'dcr 9.9.9 (git fake)'; exit 0; fi\n"
            "%s\n",
            body);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    return path;
}

static void expect_failed_run(const char *script_path, const char *needle)
{
    char exe[256], out[256];
    snprintf(exe, sizeof(exe), "%s", script_path);
    snprintf(out, sizeof(out), "%s", in_dir("never.h5"));
    snprintf(args, sizeof(args), "bench %s --ab-binary %s --out %s", small, exe, out);
    expect_error(args, 1, needle);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);
}

static void test_hostile_side_b(void **state)
{
    (void)state;
    char notdcr[256];
    snprintf(notdcr, sizeof(notdcr), "%s", in_dir("notdcr"));
    FILE *f = fopen(notdcr, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho hello; echo world >&2\n");
    fclose(f);
    assert_int_equal(chmod(notdcr, 0755), 0);
    expect_failed_run(notdcr, "is not a dcr binary");
    expect_failed_run(script("early", "echo 'dcr bench: unknown flag' >&2; exit 3"),
                      "ended before its hello: it exited with status 3");
    expect_failed_run(script("garbage", "echo '{\"oops\"' >&3; echo noise; sleep 30"),
                      "sent a malformed hello");
}

static void test_usage(void **state)
{
    (void)state;
    const char *self = dcr_path();
    static const char *const cases[][2] = {
        {"--ab same", "not with --ab"},
        {"--processes", "not with --processes or --testbed"},
        {"--testbed netns", "not with --processes or --testbed"},
        {"--trace t.json", "keeps no stage trace"},
        {"--readers 2", "--ab-binary does not take --readers"},
        {"--trace-overhead", "--ab-binary does not take --trace-overhead"},
        {"--refits 0", "--refits"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(args, sizeof(args), "bench --ab-binary %s %s", self, cases[i][0]);
        expect_error(args, 2, cases[i][1]);
    }
    snprintf(args, sizeof(args), "bench --ab-binary %s --workdir %s", self, in_dir("wd"));
    expect_error(args, 2, "each side makes its own");
    snprintf(args, sizeof(args), "bench --ab-binary %s", in_dir("absent"));
    expect_error(args, 2, "--ab-binary");
    snprintf(args, sizeof(args), "bench --ab-binary %s", dir);
    expect_error(args, 2, "not a regular file");
    expect_error("bench --ab-worker 999", 2, "--ab-worker 999: not an open socket");
    expect_error("bench --ab-worker 3 --out x.h5", 2, "not with --out or --json");
    snprintf(args, sizeof(args), "bench --ab-worker 3 --ab-binary %s", self);
    expect_error(args, 2, "--ab-worker: not with --ab-binary");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_hostile_side_b),
        cmocka_unit_test(test_same_binary_file),
        cmocka_unit_test(test_default_refits_a_side),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
