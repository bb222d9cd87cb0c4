/* ctest-labels: unit
 *
 * dcr compare of one interleaved A/B file (dcr bench --ab --out): the
 * reader finds the pair (side A then side B, by the summary's ab_side) and
 * splits each side into its ABBA blocks (the block column); the comparison
 * is paired block by block, the keys the sides differ in are left out of
 * matching and named. Verdicts on files whose answer is known by
 * construction: B 1.3x slower than A in every block under a load that
 * moves 0.6-1.5x between blocks (REGRESSED, estimate 1.3), B equal to A
 * under the same drift (same), too few blocks (too few, remedy named), and
 * the CLI's exit statuses for each (0, 1, 2, 3, 4) when DCR_CLI names the
 * binary. */
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

#include "reports/compare.h"
#include "reports/results_read.h"
#include "workloads/harness/results.h"

#define NMAX 64

static char path[128];

static int file_setup(void **state)
{
    (void)state;
    snprintf(path, sizeof(path), "/tmp/dcr-test-compare-ab-%d.h5", (int)getpid());
    unlink(path);
    return 0;
}

static int file_teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static const char *const cfg_a = "{\"model\":\"m\",\"cross_gbps\":0.25,\"ab\":\"link_gbps=0.2\"}";
static const char *const cfg_b = "{\"model\":\"m\",\"cross_gbps\":0.2,\"ab\":\"link_gbps=0.2\"}";

/* One side: latencies lat[0..n), block ids i / 2 (blocks = NULL) or the
 * given ones, side "A", "B" or NULL (a plain run: no block column). */
static void append_side(const char *config, const char *side, const double *lat,
                        const double *blocks, size_t n)
{
    double cols[DCR_RESULTS_NCOLUMNS + 1][NMAX];
    for (size_t i = 0; i < n; i++) {
        cols[DCR_RESULTS_LATENCY_S][i] = lat[i];
        cols[DCR_RESULTS_PAYLOAD_BYTES][i] = 1000;
        cols[DCR_RESULTS_CROSS_BYTES][i] = 3000;
        cols[DCR_RESULTS_RAW_CHANGED_VALUE_BYTES][i] = 500;
        cols[DCR_RESULTS_CHANGED_ELEMENTS][i] = 250;
        cols[DCR_RESULTS_BIT_EXACT][i] = 1;
        cols[DCR_RESULTS_CONSTRUCTION_LB_S][i] = 0.01 * lat[i];
        cols[DCR_RESULTS_TRANSPORT_LB_S][i] = 0.5 * lat[i];
        cols[DCR_RESULTS_FINALIZATION_S][i] = 0.01 * lat[i];
        cols[DCR_RESULTS_NCOLUMNS][i] = blocks ? blocks[i] : (double)(i / 2);
    }
    dcr_results_column_t c[DCR_RESULTS_NCOLUMNS + 1];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        c[k] = (dcr_results_column_t){dcr_results_column_names[k], cols[k]};
    c[DCR_RESULTS_NCOLUMNS] = (dcr_results_column_t){DCR_RESULTS_BLOCK, cols[DCR_RESULTS_NCOLUMNS]};
    char summary[128];
    if (side)
        snprintf(summary, sizeof(summary), "{\"reference_s\":0,\"%s\":\"%s\"}", DCR_RESULTS_AB_SIDE,
                 side);
    else
        snprintf(summary, sizeof(summary), "{\"reference_s\":2}");
    dcr_results_run_t run = {"bench", config, summary, n,   DCR_RESULTS_NCOLUMNS + (side ? 1 : 0),
                             c,       0,      NULL,    NULL};
    char name[64];
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
}

/* An A/B file of `blocks` ABBA blocks (2 refits a side each) under a load
 * that moves 0.6-1.5x from block to block, B = ratio x A in every block
 * (its two refits swapped, so no refit of B equals one of A's scaled). */
static void write_ab(size_t blocks, double ratio)
{
    static const double level[8] = {1.0, 0.6, 1.5, 0.8, 1.3, 0.7, 1.1, 0.9};
    double a[NMAX], b[NMAX];
    size_t n = 2 * blocks;
    for (size_t i = 0; i < n; i++) {
        double base = i % 2 ? 0.52 : 0.48;
        a[i] = base * level[(i / 2) % 8];
        b[i] = (i % 2 ? 0.48 : 0.52) * level[(i / 2) % 8] * ratio;
    }
    unlink(path);
    append_side(cfg_a, "A", a, NULL, n);
    append_side(cfg_b, "B", b, NULL, n);
}

static const dcr_compare_metric_t *latency(const dcr_compare_t *c)
{
    assert_int_equal(c->npairs, 1);
    assert_string_equal(c->pairs[0].metrics[0].name, "latency_s");
    return &c->pairs[0].metrics[0];
}

static dcr_compare_t *compare_ab(void)
{
    dcr_compare_opts_t opts = dcr_compare_opts_default();
    dcr_compare_t *c = NULL;
    if (dcr_compare_ab_file(path, &opts, &c) != DCR_OK) fail_msg("%s", dcr_error_detail());
    return c;
}

static void test_regression_by_construction(void **state)
{
    (void)state;
    write_ab(10, 1.3);
    dcr_compare_t *c = compare_ab();
    const dcr_compare_metric_t *m = latency(c);
    assert_int_equal(m->verdict, DCR_COMPARE_REGRESSED);
    assert_int_equal(m->nblocks, 10);
    /* every block's ratio is exactly 1.3 (medians of {0.48, 0.52} x level) */
    for (size_t i = 0; i < m->nblocks; i++) assert_true(fabs(m->block_ratios[i] - 1.3) < 1e-9);
    assert_true(fabs(m->ratio - 1.3) < 1e-9 && m->lo > 1.1);
    assert_int_equal(c->regressions > 0, 1);
    /* payload and the other columns are equal: not regressed */
    assert_int_equal(c->pairs[0].metrics[1].verdict, DCR_COMPARE_SAME);
    char *text = dcr_compare_json(c);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "regression");
    assert_true(json_is_true(json_object_get(j, "paired")));
    json_t *ab = json_object_get(j, "ab");
    assert_string_equal(json_string_value(json_object_get(ab, "order")), "ABBA");
    json_t *d = json_array_get(json_object_get(ab, "differs"), 0);
    assert_string_equal(json_string_value(json_object_get(d, "key")), "cross_gbps");
    assert_true(json_real_value(json_object_get(d, "a")) == 0.25);
    assert_true(json_real_value(json_object_get(d, "b")) == 0.2);
    assert_int_equal(json_array_size(json_object_get(ab, "differs")), 1);
    json_t *m0 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "matched"), 0), "metrics"), 0);
    json_t *iv = json_object_get(m0, "interval");
    assert_true(json_real_value(json_array_get(iv, 0)) > 1.1);
    assert_non_null(strstr(json_string_value(json_object_get(m0, "reason")), "10 paired blocks"));
    json_decref(j);
    free(text);
    dcr_compare_destroy(c);
}

static void test_identical_sides(void **state)
{
    (void)state;
    write_ab(10, 1.0);
    dcr_compare_t *c = compare_ab();
    const dcr_compare_metric_t *m = latency(c);
    assert_int_equal(m->verdict, DCR_COMPARE_SAME);
    assert_true(fabs(m->ratio - 1.0) < 1e-9);
    assert_int_equal(c->regressions, 0);
    dcr_compare_destroy(c);
    /* The unpaired comparison of the same refits (two plain runs) cannot
     * see through the drift: the paired one is what removes it. */
}

/* dcr bench --ab appends side B after side A, often in a later second:
 * the pairing is by block id, not by the times the runs were appended. */
static void test_sides_appended_seconds_apart(void **state)
{
    (void)state;
    double a[20], b[20];
    for (int i = 0; i < 20; i++) {
        a[i] = 0.5 + 0.01 * (i % 3);
        b[i] = 1.3 * a[i];
    }
    unlink(path);
    append_side(cfg_a, "A", a, NULL, 20);
    sleep(1);
    append_side(cfg_b, "B", b, NULL, 20);
    dcr_compare_t *c = compare_ab();
    assert_int_equal(latency(c)->verdict, DCR_COMPARE_REGRESSED);
    dcr_compare_destroy(c);
}

static void test_too_few_blocks(void **state)
{
    (void)state;
    write_ab(5, 1.3); /* 10 refits a side: enough refits, 5 blocks < 6 */
    dcr_compare_t *c = compare_ab();
    const dcr_compare_metric_t *m = latency(c);
    assert_int_equal(m->verdict, DCR_COMPARE_TOO_FEW);
    assert_non_null(strstr(m->reason, "--refits"));
    dcr_compare_destroy(c);
}

static void test_split_and_pair(void **state)
{
    (void)state;
    unlink(path);
    double lat[6] = {1, 2, 3, 4, 5, 6}, ids[6] = {2, 0, 2, 1, 0, 0};
    append_side(cfg_a, NULL, lat, NULL, 6); /* a plain run first */
    append_side(cfg_a, "A", lat, ids, 6);
    append_side(cfg_b, "B", lat, ids, 6);
    dcr_results_set_t *set = NULL, *blocks = NULL;
    assert_int_equal(dcr_results_read(path, &set), DCR_OK);
    size_t a = 0, b = 0;
    assert_int_equal(dcr_results_ab_pair(set, &a, &b), DCR_OK);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(dcr_results_split_blocks(set, a, &blocks), DCR_OK);
    assert_int_equal(blocks->nruns, 3);
    /* block 0: refits 1, 4, 5; block 1: refit 3; block 2: refits 0, 2 */
    const double want0[] = {2, 5, 6}, want2[] = {1, 3};
    assert_int_equal(blocks->runs[0].nrefits, 3);
    assert_int_equal(blocks->runs[1].nrefits, 1);
    assert_int_equal(blocks->runs[2].nrefits, 2);
    for (int i = 0; i < 3; i++)
        assert_true(dcr_results_column(&blocks->runs[0], "latency_s")[i] == want0[i]);
    assert_true(dcr_results_column(&blocks->runs[1], "latency_s")[0] == 4);
    for (int i = 0; i < 2; i++)
        assert_true(dcr_results_column(&blocks->runs[2], "latency_s")[i] == want2[i]);
    assert_non_null(strstr(blocks->runs[2].name, "#block2"));
    dcr_results_set_destroy(blocks);
    /* the plain run has no blocks */
    assert_int_equal(dcr_results_split_blocks(set, 0, &blocks), DCR_EINVAL);
    dcr_results_set_destroy(set);
}

static void test_refused(void **state)
{
    (void)state;
    double lat[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, half[12];
    for (int i = 0; i < 12; i++) half[i] = i / 2 + 0.5;
    dcr_compare_opts_t opts = dcr_compare_opts_default();
    dcr_compare_t *c = NULL;
    /* no A/B run */
    unlink(path);
    append_side(cfg_a, NULL, lat, NULL, 12);
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "no interleaved A/B run"));
    /* side B without its side A just before it */
    append_side(cfg_b, "B", lat, NULL, 12);
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "is not its side A"));
    /* a block id that is not a whole number */
    unlink(path);
    append_side(cfg_a, "A", lat, half, 12);
    append_side(cfg_b, "B", lat, half, 12);
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "not a whole number"));
    /* --match-ignore has nothing to do with one file */
    write_ab(10, 1.0);
    const char *keys[] = {"cross_gbps"};
    opts.ignore = keys;
    opts.nignore = 1;
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_EINVAL);
    /* missing file: the reader's error, not a usage error */
    unlink(path);
    opts.nignore = 0;
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_EIO);
}

static int run_cli(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s compare %s >/dev/null 2>&1", getenv("DCR_CLI"), args);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 0 none, 1 regression, 2 usage, 3 inconclusive with --strict, 4 unreadable. */
static void test_cli_exit_status(void **state)
{
    (void)state;
    if (!getenv("DCR_CLI")) skip();
    char args[512];
    write_ab(10, 1.3);
    snprintf(args, sizeof(args), "%s", path);
    assert_int_equal(run_cli(args), 1);
    snprintf(args, sizeof(args), "%s --json --threshold 40", path);
    assert_int_equal(run_cli(args), 0);
    write_ab(10, 1.0);
    snprintf(args, sizeof(args), "%s --strict", path);
    assert_int_equal(run_cli(args), 0);
    write_ab(5, 1.3);
    snprintf(args, sizeof(args), "%s", path);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s --strict", path);
    assert_int_equal(run_cli(args), 3);
    snprintf(args, sizeof(args), "%s --match-ignore link_gbps", path);
    assert_int_equal(run_cli(args), 2);
    double lat[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    unlink(path);
    append_side(cfg_a, NULL, lat, NULL, 12);
    snprintf(args, sizeof(args), "%s", path);
    assert_int_equal(run_cli(args), 2);
    unlink(path);
    assert_int_equal(run_cli(args), 4);
    FILE *f = fopen(path, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    assert_int_equal(run_cli(args), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_regression_by_construction, file_setup, file_teardown),
        cmocka_unit_test_setup_teardown(test_identical_sides, file_setup, file_teardown),
        cmocka_unit_test_setup_teardown(test_sides_appended_seconds_apart, file_setup,
                                        file_teardown),
        cmocka_unit_test_setup_teardown(test_too_few_blocks, file_setup, file_teardown),
        cmocka_unit_test_setup_teardown(test_split_and_pair, file_setup, file_teardown),
        cmocka_unit_test_setup_teardown(test_refused, file_setup, file_teardown),
        cmocka_unit_test_setup_teardown(test_cli_exit_status, file_setup, file_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
