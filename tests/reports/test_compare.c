/* ctest-labels: unit
 *
 * dcr compare and the results reader behind it: a round trip of files
 * written by dcr_results_append, malformed and foreign files rejected with
 * one error line, and verdicts on hand-made result files whose outcome is
 * clear by construction (a clear regression, a change within the noise, an
 * improvement, a refit that was not bit-exact, unmatched runs). The CLI's
 * exit status is checked when DCR_CLI names the binary (CTest sets it). */
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
#include <hdf5.h>
#include <jansson.h>

#include "reports/compare.h"
#include "reports/results_read.h"
#include "workloads/harness/results.h"

#define NREF 5

/* Per-refit values of the nine columns; unset columns get plausible constants. */
typedef struct fake_run {
    const char *config;
    double latency[NREF], payload[NREF], exact[NREF];
    double finalization; /* 0: 0.1 s */
    size_t n;
} fake_run_t;

static void temp_path(char *path, size_t len, const char *tag)
{
    snprintf(path, len, "/tmp/dcr-cmp-%s-%d.h5", tag, (int)getpid());
    unlink(path);
}

static void append_run(const char *path, const fake_run_t *f)
{
    double cols[DCR_RESULTS_NCOLUMNS][NREF];
    for (size_t i = 0; i < f->n; i++) {
        cols[0][i] = f->latency[i];
        cols[1][i] = f->payload[i] ? f->payload[i] : 1000;
        cols[2][i] = 3000;
        cols[3][i] = 500;
        cols[4][i] = 250;
        cols[5][i] = f->exact[i];
        cols[6][i] = 0.01;
        cols[7][i] = 0.5;
        cols[8][i] = f->finalization ? f->finalization : 0.1;
    }
    dcr_results_column_t c[DCR_RESULTS_NCOLUMNS];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        c[k] = (dcr_results_column_t){dcr_results_column_names[k], cols[k]};
    dcr_results_run_t run = {"bench",
                             f->config,
                             "{\"checkpoint_bytes\":1000000,\"reference_s\":2.0}",
                             f->n,
                             DCR_RESULTS_NCOLUMNS,
                             c,
                             0,
                             NULL};
    char name[64];
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
}

static fake_run_t fake(const char *config, const double *lat, const double *payload, double exact)
{
    fake_run_t f = {.config = config, .n = NREF};
    for (int i = 0; i < NREF; i++) {
        f.latency[i] = lat[i];
        f.payload[i] = payload ? payload[i] : 1000;
        f.exact[i] = exact;
    }
    return f;
}

static const dcr_compare_metric_t *metric(const dcr_compare_t *c, size_t pair, const char *name)
{
    for (int m = 0; m < DCR_COMPARE_NMETRICS; m++)
        if (!strcmp(c->pairs[pair].metrics[m].name, name)) return &c->pairs[pair].metrics[m];
    fail_msg("no metric %s", name);
    return NULL;
}

/* ---- reader ---- */

static void test_round_trip(void **state)
{
    char path[128];
    temp_path(path, sizeof(path), "rt");
    double lat[NREF] = {1.5, 0.25, 3.0, 2.0, 1.0};
    fake_run_t a =
        fake("{\"model\":\"m\",\"transport\":\"objstore\",\"workdir\":\"/x\"}", lat, NULL, 1);
    append_run(path, &a);
    a.config = "{\"model\":\"m\",\"transport\":\"relay\"}";
    a.n = 3;
    append_run(path, &a);
    dcr_results_set_t *set = NULL;
    assert_int_equal(dcr_results_read(path, &set), DCR_OK);
    assert_int_equal(set->nruns, 2);
    assert_string_equal(set->runs[0].name, "/runs/000000");
    assert_string_equal(set->runs[1].name, "/runs/000001");
    assert_string_equal(set->runs[0].command, "bench");
    assert_int_equal(set->runs[0].nrefits, NREF);
    assert_int_equal(set->runs[1].nrefits, 3);
    assert_int_equal(set->runs[0].ncolumns, DCR_RESULTS_NCOLUMNS);
    const double *l = dcr_results_column(&set->runs[0], "latency_s");
    for (int i = 0; i < NREF; i++) assert_true(l[i] == lat[i]);
    assert_true(dcr_results_column(&set->runs[0], "finalization_s")[2] == 0.1);
    assert_null(dcr_results_column(&set->runs[0], "nope"));
    assert_true(dcr_results_summary_number(&set->runs[0], "reference_s") == 2.0);
    assert_true(isnan(dcr_results_summary_number(&set->runs[0], "missing")));
    assert_true(strlen(set->runs[0].git_revision) > 0 && strlen(set->runs[0].time) == 20);
    /* The workdir cannot change a measurement, so the key drops it. */
    assert_null(strstr(set->runs[0].config_key, "workdir"));
    dcr_results_stats_t s = dcr_results_stats(l, NREF);
    assert_true(s.min == 0.25 && s.max == 3.0 && s.median == 1.5 && s.n == NREF);
    double even[4] = {4, 1, 3, 2};
    assert_true(dcr_results_stats(even, 4).median == 2.5);
    /* NaN marks an unmeasured figure (a bound of an unrecorded refit): left out. */
    double gaps[5] = {NAN, 4, NAN, 1, 7};
    dcr_results_stats_t g = dcr_results_stats(gaps, 5);
    assert_true(g.n == 3 && g.min == 1 && g.median == 4 && g.max == 7 && g.mean == 4);
    double none[2] = {NAN, NAN};
    assert_true(dcr_results_stats(none, 2).n == 0 && dcr_results_stats(none, 2).mean == 0);
    dcr_results_set_destroy(set);
    unlink(path);
}

/* A failure is DCR_EPARSE (or want) with one line naming the file and `needle`. */
static void expect_rejected(const char *path, dcr_status_t want, const char *needle)
{
    dcr_results_set_t *set = (dcr_results_set_t *)0x1;
    dcr_status_t st = dcr_results_read(path, &set);
    if (st != want)
        fail_msg("%s: status %d, expected %d (%s)", needle, st, want, dcr_error_line(st));
    assert_true(set == (dcr_results_set_t *)0x1); /* untouched on failure */
    const char *line = dcr_error_line(st);
    assert_null(strchr(line, '\n'));
    if (!strstr(line, needle)) fail_msg("'%s' lacks '%s'", line, needle);
    assert_non_null(strstr(line, path));
}

/* Writes a valid one-run file, then lets `damage` break it with the HDF5 API. */
static void damaged(const char *path, void (*damage)(hid_t f))
{
    unlink(path);
    double lat[NREF] = {1, 1, 1, 1, 1};
    fake_run_t a = fake("{\"model\":\"m\"}", lat, NULL, 1);
    append_run(path, &a);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    damage(f);
    H5Fclose(f);
}

static void replace_string_attr(hid_t f, const char *obj, const char *name, const char *value)
{
    hid_t g = H5Oopen(f, obj, H5P_DEFAULT);
    H5Adelete(g, name);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, value);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Oclose(g);
}

static void replace_column(hid_t f, const char *name, hid_t file_type, const double *v, hsize_t n)
{
    hid_t g = H5Gopen2(f, "/runs/000000/refits", H5P_DEFAULT);
    H5Ldelete(g, name, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(g, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
    H5Sclose(space);
    H5Gclose(g);
}

static void set_version_2(hid_t f)
{
    int v = 2;
    hid_t a = H5Aopen(f, "dcr_results_version", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &v);
    H5Aclose(a);
}
static void drop_version(hid_t f)
{
    H5Adelete(f, "dcr_results_version");
}
static void drop_config(hid_t f)
{
    hid_t g = H5Gopen2(f, "/runs/000000", H5P_DEFAULT);
    H5Adelete(g, "config");
    H5Gclose(g);
}
static void bad_config_json(hid_t f)
{
    replace_string_attr(f, "/runs/000000", "config", "{\"model\": ");
}
static void config_not_object(hid_t f)
{
    replace_string_attr(f, "/runs/000000", "summary", "[1,2]");
}
static void drop_column(hid_t f)
{
    H5Ldelete(f, "/runs/000000/refits/transport_lb_s", H5P_DEFAULT);
}
static void short_column(hid_t f)
{
    double v[2] = {1, 1};
    replace_column(f, "payload_bytes", H5T_IEEE_F64LE, v, 2);
}
static void nan_latency(hid_t f)
{
    double v[NREF] = {1, 1, NAN, 1, 1};
    replace_column(f, "latency_s", H5T_IEEE_F64LE, v, NREF);
}
static void bit_exact_two(hid_t f)
{
    double v[NREF] = {1, 1, 2, 1, 1};
    replace_column(f, "bit_exact", H5T_IEEE_F64LE, v, NREF);
}
static void integer_column(hid_t f)
{
    double v[NREF] = {1, 1, 1, 1, 1};
    replace_column(f, "cross_bytes", H5T_STD_I64LE, v, NREF);
}
static void stray_run(hid_t f)
{
    hid_t g = H5Gcreate2(f, "/runs/extra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
}
static void runs_not_group(hid_t f)
{
    H5Ldelete(f, "/runs", H5P_DEFAULT);
    hsize_t n = 1;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(f, "runs", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(space);
}

/* Other HDF5 writers (h5py by default) store variable-length strings. */
static void vl_machine(hid_t f)
{
    hid_t g = H5Gopen2(f, "/runs/000000", H5P_DEFAULT);
    H5Adelete(g, "machine");
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, "machine", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char *value = "written elsewhere";
    H5Awrite(a, type, &value);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Gclose(g);
}

static void test_variable_length_strings(void **state)
{
    char path[128];
    temp_path(path, sizeof(path), "vl");
    damaged(path, vl_machine);
    dcr_results_set_t *set = NULL;
    assert_int_equal(dcr_results_read(path, &set), DCR_OK);
    assert_string_equal(set->runs[0].machine, "written elsewhere");
    dcr_results_set_destroy(set);
    unlink(path);
}

static void test_rejects_malformed(void **state)
{
    char path[128];
    temp_path(path, sizeof(path), "bad");
    expect_rejected(path, DCR_EIO, "cannot read");
    FILE *f = fopen(path, "w");
    fputs("{\"traceEvents\": []}\n", f);
    fclose(f);
    expect_rejected(path, DCR_EPARSE, "not an HDF5 file");
    unlink(path);
    hid_t h = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(h);
    expect_rejected(path, DCR_EPARSE, "not a dcr results file");
    struct {
        void (*damage)(hid_t);
        const char *needle;
    } cases[] = {
        {set_version_2, "results version 2"},
        {drop_version, "no attribute dcr_results_version"},
        {drop_config, "attribute 'config' is missing"},
        {bad_config_json, "'config' is not a JSON object"},
        {config_not_object, "'summary' is not a JSON object"},
        {drop_column, "refits/transport_lb_s is missing"},
        {short_column, "refits/payload_bytes has 2 values"},
        {nan_latency, "refits/latency_s[2]"},
        {bit_exact_two, "not 0 or 1"},
        {integer_column, "refits/cross_bytes is not a 1-D floating-point dataset"},
        {stray_run, "/runs/extra: is not a run"},
        {runs_not_group, "/runs: is not a group"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        damaged(path, cases[i].damage);
        expect_rejected(path, DCR_EPARSE, cases[i].needle);
    }
    unlink(path);
}

/* Bounds of refits run with the recorder off are stored as NaN (dcr bench
 * --trace-overhead): read back as NaN, where a NaN latency is refused. */
static void unmeasured_bounds(hid_t f)
{
    double v[NREF] = {0.5, NAN, NAN, 0.5, 0.5};
    replace_column(f, "transport_lb_s", H5T_IEEE_F64LE, v, NREF);
    replace_column(f, "construction_lb_s", H5T_IEEE_F64LE, v, NREF);
    replace_column(f, "finalization_s", H5T_IEEE_F64LE, v, NREF);
}
static void test_unmeasured_bounds(void **state)
{
    char path[128];
    temp_path(path, sizeof(path), "gaps");
    damaged(path, unmeasured_bounds);
    dcr_results_set_t *set = NULL;
    assert_int_equal(dcr_results_read(path, &set), DCR_OK);
    const double *t = dcr_results_column(&set->runs[0], "transport_lb_s");
    assert_true(t[0] == 0.5 && isnan(t[1]) && isnan(t[2]));
    dcr_results_stats_t st = dcr_results_stats(t, NREF);
    assert_true(st.n == 3 && st.mean == 0.5);
    dcr_results_set_destroy(set);
    unlink(path);
}

/* ---- verdicts ---- */

static dcr_results_stats_t st3(double a, double b, double c)
{
    double v[3] = {a, b, c};
    return dcr_results_stats(v, 3);
}

static void test_judge_rule(void **state)
{
    dcr_results_stats_t base = st3(1.00, 1.01, 1.02);
    /* 30% slower, every NEW refit worse than every BASE refit. */
    dcr_results_stats_t n = st3(1.29, 1.30, 1.31);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_REGRESSED);
    /* The same change under a 50% threshold is within it. */
    assert_int_equal(dcr_compare_judge(&base, &n, 50), DCR_COMPARE_SAME);
    /* Median 20% up, but the refits overlap and the difference (0.2) is
     * below NEW's spread (1.0): noise. */
    n = st3(0.7, 1.21, 1.7);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_NOISE);
    /* Overlapping ranges but a median shift beyond both spreads: regressed. */
    base = st3(1.0, 1.05, 1.5);
    n = st3(1.4, 1.6, 1.7);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_REGRESSED);
    /* Mirror image: improvement. */
    base = st3(1.00, 1.01, 1.02);
    n = st3(0.70, 0.71, 0.72);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_IMPROVED);
    /* Within the threshold. */
    n = st3(1.04, 1.05, 1.06);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_SAME);
    /* No ratio from a zero BASE median. */
    base = st3(0, 0, 0);
    assert_int_equal(dcr_compare_judge(&base, &n, 10), DCR_COMPARE_NA);
}

static const double steady[NREF] = {1.00, 1.01, 1.02, 0.99, 1.00};

static void write_pair(const char *base, const char *cur, const double *new_lat,
                       const double *new_payload, double new_exact)
{
    unlink(base);
    unlink(cur);
    const char *cfg = "{\"model\":\"m\",\"transport\":\"objstore\",\"refits\":5}";
    fake_run_t b = fake(cfg, steady, NULL, 1);
    append_run(base, &b);
    /* Only the number of timed refits differs: still the same configuration. */
    fake_run_t n = fake("{\"model\":\"m\",\"transport\":\"objstore\",\"refits\":8}", new_lat,
                        new_payload, new_exact);
    append_run(cur, &n);
}

static dcr_compare_t *compare(const char *base, const char *cur, double threshold)
{
    dcr_compare_t *c = NULL;
    assert_int_equal(dcr_compare_files(base, cur, threshold, &c), DCR_OK);
    assert_int_equal(c->npairs, 1);
    return c;
}

static void test_files_regression(void **state)
{
    char base[128], cur[128];
    temp_path(base, sizeof(base), "base");
    temp_path(cur, sizeof(cur), "new");
    double slow[NREF] = {1.30, 1.31, 1.29, 1.32, 1.30};
    write_pair(base, cur, slow, NULL, 1);
    dcr_compare_t *c = compare(base, cur, 10);
    const dcr_compare_metric_t *m = metric(c, 0, "latency_s");
    assert_int_equal(m->verdict, DCR_COMPARE_REGRESSED);
    assert_true(fabs(m->ratio - 1.30 / 1.00) < 1e-12);
    assert_true(m->base.median == 1.00 && m->cur.median == 1.30);
    assert_int_equal(metric(c, 0, "payload_bytes")->verdict, DCR_COMPARE_SAME);
    assert_int_equal(c->regressions, 1);
    assert_true(c->pairs[0].regressed);
    char *text = dcr_compare_json(c);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "regression");
    json_t *m0 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "matched"), 0), "metrics"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "name")), "latency_s");
    assert_string_equal(json_string_value(json_object_get(m0, "verdict")), "regressed");
    assert_true(json_real_value(json_object_get(json_object_get(m0, "new"), "median")) == 1.30);
    json_decref(j);
    free(text);
    dcr_compare_destroy(c);
    /* A large enough threshold lets it pass. */
    c = compare(base, cur, 40);
    assert_int_equal(c->regressions, 0);
    dcr_compare_destroy(c);
    unlink(base);
    unlink(cur);
}

static void test_files_noise_improvement_bitexact(void **state)
{
    char base[128], cur[128];
    temp_path(base, sizeof(base), "base");
    temp_path(cur, sizeof(cur), "new");
    /* Median 15% up, but one refit is as fast as BASE and NEW's spread (0.8)
     * exceeds the shift: noise, no regression. */
    double noisy[NREF] = {1.00, 1.15, 1.80, 1.10, 1.20};
    write_pair(base, cur, noisy, NULL, 1);
    dcr_compare_t *c = compare(base, cur, 10);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_NOISE);
    assert_int_equal(c->regressions, 0);
    dcr_compare_destroy(c);
    /* Payload halved, latency unchanged: improvement, no regression. */
    double half[NREF] = {500, 501, 499, 500, 502};
    write_pair(base, cur, steady, half, 1);
    c = compare(base, cur, 10);
    assert_int_equal(metric(c, 0, "payload_bytes")->verdict, DCR_COMPARE_IMPROVED);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_SAME);
    assert_int_equal(c->regressions, 0);
    dcr_compare_destroy(c);
    /* A refit that was not bit-exact is a regression whatever the threshold. */
    write_pair(base, cur, steady, NULL, 0);
    c = compare(base, cur, 1000);
    assert_int_equal(metric(c, 0, "bit_exact")->verdict, DCR_COMPARE_REGRESSED);
    assert_int_equal(c->regressions, 1);
    dcr_compare_destroy(c);
    unlink(base);
    unlink(cur);
}

/* A part of the refit (here finalization, constant so beyond any noise)
 * fails the run only when it moved by more than the threshold's share of the
 * refit latency (1 s here, so 0.1 s at 10%). */
static void test_files_component_rule(void **state)
{
    char base[128], cur[128];
    temp_path(base, sizeof(base), "base");
    temp_path(cur, sizeof(cur), "new");
    double fin[2] = {0.15, 0.30};
    dcr_compare_verdict_t want[2] = {DCR_COMPARE_MINOR, DCR_COMPARE_REGRESSED};
    for (int k = 0; k < 2; k++) {
        unlink(base);
        unlink(cur);
        fake_run_t b = fake("{\"model\":\"m\"}", steady, NULL, 1);
        append_run(base, &b);
        fake_run_t n = b;
        n.finalization = fin[k]; /* +50% (0.05 s), then +200% (0.2 s) */
        append_run(cur, &n);
        dcr_compare_t *c = compare(base, cur, 10);
        assert_int_equal(metric(c, 0, "finalization_s")->verdict, want[k]);
        assert_string_equal(dcr_compare_verdict_name(want[k]), k ? "REGRESSED" : "minor");
        assert_int_equal(c->regressions, k == 1);
        dcr_compare_destroy(c);
    }
    unlink(base);
    unlink(cur);
}

static void test_files_unmatched_and_pooled(void **state)
{
    char base[128], cur[128];
    temp_path(base, sizeof(base), "base");
    temp_path(cur, sizeof(cur), "new");
    fake_run_t a = fake("{\"model\":\"m\",\"transport\":\"objstore\"}", steady, NULL, 1);
    append_run(base, &a);
    append_run(base, &a); /* pooled with the first */
    fake_run_t only_base = fake("{\"model\":\"m\",\"transport\":\"relay\"}", steady, NULL, 1);
    append_run(base, &only_base);
    append_run(cur, &a);
    fake_run_t only_new =
        fake("{\"model\":\"m\",\"transport\":\"objstore\",\"seed\":7}", steady, NULL, 0);
    append_run(cur, &only_new);
    dcr_compare_t *c = NULL;
    assert_int_equal(dcr_compare_files(base, cur, 10, &c), DCR_OK);
    assert_int_equal(c->npairs, 1);
    assert_int_equal(metric(c, 0, "latency_s")->base.n, 2 * NREF);
    assert_int_equal(metric(c, 0, "latency_s")->cur.n, NREF);
    /* An unmatched NEW run is listed, not judged, even with bit_exact 0. */
    assert_int_equal(c->regressions, 0);
    char *text = dcr_compare_json(c);
    json_t *j = json_loads(text, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "unmatched_base")), 1);
    assert_int_equal(json_array_size(json_object_get(j, "unmatched_new")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "ok");
    json_decref(j);
    free(text);
    dcr_compare_destroy(c);
    /* A broken NEW file is the reader's one-line error. */
    assert_int_equal(dcr_compare_files(base, "/nonexistent/new.h5", 10, &c), DCR_EIO);
    unlink(base);
    unlink(cur);
}

/* ---- the command ---- */

static int run_cli(const char *args)
{
    const char *cli = getenv("DCR_CLI");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s compare %s >/dev/null 2>&1", cli, args);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_cli_exit_status(void **state)
{
    if (!getenv("DCR_CLI")) skip();
    char base[128], cur[128], args[512];
    temp_path(base, sizeof(base), "base");
    temp_path(cur, sizeof(cur), "new");
    double slow[NREF] = {1.30, 1.31, 1.29, 1.32, 1.30};
    write_pair(base, cur, slow, NULL, 1);
    snprintf(args, sizeof(args), "%s %s", base, cur);
    assert_int_equal(run_cli(args), 1);
    snprintf(args, sizeof(args), "%s %s --json --threshold 40", base, cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s", base, base);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s", base);
    assert_int_equal(run_cli(args), 2);
    snprintf(args, sizeof(args), "%s %s --threshold -5", base, cur);
    assert_int_equal(run_cli(args), 2);
    /* Nothing matches: listed, exit 0, unless --require-match. */
    unlink(cur);
    fake_run_t other = fake("{\"model\":\"other\"}", steady, NULL, 1);
    append_run(cur, &other);
    snprintf(args, sizeof(args), "%s %s", base, cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s --require-match", base, cur);
    assert_int_equal(run_cli(args), 1);
    unlink(base);
    unlink(cur);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_rejects_malformed),
        cmocka_unit_test(test_unmeasured_bounds),
        cmocka_unit_test(test_variable_length_strings),
        cmocka_unit_test(test_judge_rule),
        cmocka_unit_test(test_files_regression),
        cmocka_unit_test(test_files_noise_improvement_bitexact),
        cmocka_unit_test(test_files_component_rule),
        cmocka_unit_test(test_files_unmatched_and_pooled),
        cmocka_unit_test(test_cli_exit_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
