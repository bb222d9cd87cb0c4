/* ctest-labels: integration
 *
 * dcr bench --ab in one process (dcr_bench_run_ab): both sides run every
 * refit and every one is verified bit-exact against a dense refit; the
 * refits carry pair ids (the k-th refit of each side in pair k); two sides with the
 * same seed make the same changes (equal payload bytes refit by refit,
 * an independent sign that B is A's workload); the sides' rules refuse
 * what they cannot share. The results file gets two runs, side A then
 * side B, each with the block column and its ab_side, and dcr compare of
 * that one file pairs them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "reports/compare.h"
#include "reports/results_read.h"
#include "workloads/harness/bench.h"
#include "workloads/harness/results.h"
#include "workloads/harness/results_json.h"

static dcr_bench_config_t small(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.run.scenario.scale = 64;
    c.run.scenario.layers = 2;
    c.warmup = 1;
    c.refits = 5;
    return c;
}

static void run_ab_ok(const dcr_bench_config_t *a, const dcr_bench_config_t *b,
                      dcr_bench_result_t r[2])
{
    if (dcr_bench_run_ab(a, b, r) != DCR_OK) fail_msg("%s", dcr_error_detail());
    for (int s = 0; s < 2; s++) {
        assert_int_equal(r[s].ab_side, 'A' + s);
        assert_int_equal(r[s].nrefits, a->refits);
        assert_true(r[s].bit_exact);
        for (int i = 0; i < r[s].nrefits; i++) {
            assert_true(r[s].refits[i].verified && r[s].refits[i].bit_exact);
            assert_int_equal(r[s].refits[i].block, i);
            assert_true(r[s].refits[i].latency_s > 0);
        }
    }
}

static void test_same_sides_same_work(void **state)
{
    (void)state;
    dcr_bench_config_t a = small(), b = small();
    dcr_bench_result_t r[2];
    run_ab_ok(&a, &b, r);
    for (int i = 0; i < a.refits; i++) {
        assert_true(r[0].refits[i].payload_bytes > 0);
        assert_int_equal(r[0].refits[i].payload_bytes, r[1].refits[i].payload_bytes);
        assert_int_equal(r[0].refits[i].changed_elements, r[1].refits[i].changed_elements);
    }
    dcr_bench_result_free(&r[0]);
    dcr_bench_result_free(&r[1]);
}

/* B changes more elements: its payloads are larger in every refit. */
static void test_b_changed(void **state)
{
    (void)state;
    dcr_bench_config_t a = small(), b = small();
    b.run.change_rate = 2 * a.run.change_rate;
    dcr_bench_result_t r[2];
    run_ab_ok(&a, &b, r);
    for (int i = 0; i < a.refits; i++)
        assert_true(r[1].refits[i].changed_elements > r[0].refits[i].changed_elements);
    dcr_bench_result_free(&r[0]);
    dcr_bench_result_free(&r[1]);
}

static void expect_refused(const dcr_bench_config_t *a, const dcr_bench_config_t *b,
                           const char *needle)
{
    dcr_bench_result_t r[2];
    assert_int_equal(dcr_bench_run_ab(a, b, r), DCR_EINVAL);
    if (!strstr(dcr_error_line(DCR_EINVAL), needle))
        fail_msg("expected '%s' in '%s'", needle, dcr_error_line(DCR_EINVAL));
}

static void test_rules(void **state)
{
    (void)state;
    dcr_bench_config_t a = small(), b = small();
    b.refits = 6;
    expect_refused(&a, &b, "same --warmup and --refits");
    b = small();
    b.readers = 1;
    expect_refused(&a, &b, "--readers");
    b = small();
    b.run.workdir = "/tmp";
    expect_refused(&a, &b, "--workdir");
    b = small();
    b.keep_trace = true;
    expect_refused(&a, &b, "--trace");
    b = small();
    b.trace_overhead = true;
    b.refits = a.refits;
    expect_refused(&a, &b, "--trace-overhead");
}

/* The file layout: two runs, A then B, with the block column and ab_side;
 * a plain run has neither; dcr compare of the one file pairs the sides and
 * names the key they differ in. */
static void test_results_layout(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "/tmp/dcr-test-bench-ab-%d.h5", (int)getpid());
    unlink(path);
    dcr_bench_config_t a = small(), b = small();
    a.refits = b.refits = 12;
    a.verify = b.verify = false;
    b.run.link.cross_gbps = 0.5;
    dcr_bench_result_t r[2];
    if (dcr_bench_run_ab(&a, &b, r) != DCR_OK) fail_msg("%s", dcr_error_detail());
    const dcr_bench_config_t *cfg[2] = {&a, &b};
    for (int s = 0; s < 2; s++) {
        json_t *config = dcr_bench_config_json(cfg[s], "uniform", NULL);
        /* Side B as another build would record it (--ab-binary): its run
         * carries that build's revision, not this binary's. */
        if (s == 1)
            json_object_set_new(config, "dcr_version", json_string("dcr 0.1.0 (git feedbeef0123)"));
        assert_int_equal(dcr_bench_results_append(path, &r[s], config), DCR_OK);
        json_decref(config);
    }
    dcr_bench_result_t plain = r[0];
    plain.ab_side = 0;
    json_t *config = dcr_bench_config_json(&a, "uniform", NULL);
    assert_int_equal(dcr_bench_results_append(path, &plain, config), DCR_OK);
    json_decref(config);
    dcr_results_set_t *set = NULL;
    assert_int_equal(dcr_results_read(path, &set), DCR_OK);
    assert_int_equal(set->nruns, 3);
    for (size_t k = 0; k < 2; k++) {
        const dcr_results_stored_run_t *run = &set->runs[k];
        assert_string_equal(json_string_value(json_object_get(run->summary, DCR_RESULTS_AB_SIDE)),
                            k ? "B" : "A");
        const double *block = dcr_results_column(run, DCR_RESULTS_BLOCK);
        assert_non_null(block);
        assert_int_equal(run->nrefits, 12);
        for (size_t i = 0; i < run->nrefits; i++) assert_true(block[i] == (double)i);
    }
    assert_string_equal(set->runs[0].git_revision, dcr_results_git_revision());
    assert_string_equal(set->runs[1].git_revision, "feedbeef0123");
    assert_null(dcr_results_column(&set->runs[2], DCR_RESULTS_BLOCK));
    assert_null(json_object_get(set->runs[2].summary, DCR_RESULTS_AB_SIDE));
    /* The last run is a plain one: the pair before it is still found. */
    size_t ia = 9, ib = 9;
    assert_int_equal(dcr_results_ab_pair(set, &ia, &ib), DCR_OK);
    assert_int_equal(ia, 0);
    assert_int_equal(ib, 1);
    dcr_results_set_destroy(set);
    dcr_compare_opts_t opts = dcr_compare_opts_default();
    dcr_compare_t *c = NULL;
    assert_int_equal(dcr_compare_ab_file(path, &opts, &c), DCR_OK);
    assert_true(c->ab && c->opts.paired);
    assert_int_equal(c->npairs, 1);
    /* The sides differ in the link and in the build that made them. */
    assert_int_equal(c->nab_keys, 2);
    assert_string_equal(c->ab_keys[0], "cross_gbps");
    assert_string_equal(c->ab_keys[1], "dcr_version");
    assert_int_equal(c->pairs[0].metrics[0].nblocks, 12);
    dcr_compare_destroy(c);
    unlink(path);
    dcr_bench_result_free(&r[0]);
    dcr_bench_result_free(&r[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_same_sides_same_work),
        cmocka_unit_test(test_b_changed),
        cmocka_unit_test(test_results_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
