/* ctest-labels: unit
 *
 * dcr compare and the results reader behind it: a round trip of files
 * written by dcr_results_append, malformed, oversized and foreign files
 * rejected with one error line, the statistics checked against independent
 * oracles (medians by sorting, the rank statistic by hand, the bootstrap's
 * false-alarm rate, coverage and power on samples drawn from known
 * distributions over many seeds), verdicts on hand-made result files whose
 * outcome is clear by construction, matching on measured output choices
 * and --match-ignore. The CLI's exit status (0, 1, 2, 3, 4) is checked
 * when DCR_CLI names the binary (CTest sets it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <jansson.h>

#include "dcr/rng.h"
#include "reports/bootstrap.h"
#include "reports/compare.h"
#include "reports/paired.h"
#include "reports/results_read.h"
#include "workloads/harness/results.h"

#define NREF 5  /* refits of the reader's test runs */
#define NV   12 /* refits of the verdict tests' runs: above the 10-sample minimum */
#define NMAX 64

/* Per-refit values of the nine columns; unset columns get plausible constants. */
typedef struct fake_run {
    const char *config;
    double latency[NMAX], payload[NMAX], exact[NMAX];
    double finalization; /* 0: 0.1 s */
    size_t n;
} fake_run_t;

/* Every file of this test lives in one directory, removed with whatever is
 * left in it when the group ends (a failed check skips a test's own unlink). */
static char tmpdir[64];

static int make_tmpdir(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/dcr-test-compare-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[384];
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    return rmdir(tmpdir);
}

static void temp_path(char *path, size_t len, const char *tag)
{
    snprintf(path, len, "%s/%s.h5", tmpdir, tag);
    unlink(path);
}

/* The BASE, NEW and a third file of a file-level test (setup and teardown). */
typedef struct files {
    char base[128], cur[128], other[128];
} files_t;

static int files_setup(void **state)
{
    static files_t f;
    temp_path(f.base, sizeof(f.base), "base");
    temp_path(f.cur, sizeof(f.cur), "new");
    temp_path(f.other, sizeof(f.other), "other");
    *state = &f;
    return 0;
}

static int files_teardown(void **state)
{
    files_t *f = *state;
    unlink(f->base);
    unlink(f->cur);
    unlink(f->other);
    return 0;
}

static void append_run(const char *path, const fake_run_t *f)
{
    double cols[DCR_RESULTS_NCOLUMNS][NMAX];
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
                             NULL,
                             NULL};
    char name[64];
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
}

static fake_run_t fake_n(const char *config, size_t n, const double *lat, const double *payload,
                         double exact)
{
    fake_run_t f = {.config = config, .n = n};
    for (size_t i = 0; i < n; i++) {
        f.latency[i] = lat[i];
        f.payload[i] = payload ? payload[i] : 1000;
        f.exact[i] = exact;
    }
    return f;
}

static fake_run_t fake(const char *config, const double *lat, const double *payload, double exact)
{
    return fake_n(config, NREF, lat, payload, exact);
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

/* A chunked column declaring 2^28 values (2 GiB as doubles) in a file of a
 * few KB, never written: refused from its declaration, before a byte of it
 * is allocated (issue 32). */
static void huge_chunked_column(hid_t f)
{
    hid_t g = H5Gopen2(f, "/runs/000000/refits", H5P_DEFAULT);
    H5Ldelete(g, "latency_s", H5P_DEFAULT);
    hsize_t n = (hsize_t)1 << 28, chunk = 1024;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t ds = H5Dcreate2(g, "latency_s", H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Gclose(g);
}
/* The same under the per-column cap and the file size: a column whose
 * storage does not hold its declared values. */
static void unwritten_chunked_column(hid_t f)
{
    hid_t g = H5Gopen2(f, "/runs/000000/refits", H5P_DEFAULT);
    H5Ldelete(g, "latency_s", H5P_DEFAULT);
    hsize_t n = NREF, chunk = 4;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t ds = H5Dcreate2(g, "latency_s", H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Gclose(g);
}
static void scalar_column(hid_t f)
{
    hid_t g = H5Gopen2(f, "/runs/000000/refits", H5P_DEFAULT);
    H5Ldelete(g, "latency_s", H5P_DEFAULT);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t ds =
        H5Dcreate2(g, "latency_s", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(space);
    H5Gclose(g);
}
static void version_not_integer(hid_t f)
{
    H5Adelete(f, "dcr_results_version");
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "dcr_results_version", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    double v = 1;
    H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
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

/* A results file with 8 bytes changed (0xff at offset 120, in an object
 * header) on which libhdf5 1.10 dies with SIGSEGV inside H5Aexists; before
 * the reader parsed in a child first, dcr compare and dcr report crashed
 * with it (issue 32). Now one error line, whatever the library does. */
static void test_damaged_file_that_crashes_libhdf5(void **state)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/reports/results_damaged_segv.h5", DCR_SOURCE_DIR);
    dcr_results_set_t *set = (dcr_results_set_t *)0x1;
    dcr_status_t st = dcr_results_read(path, &set);
    assert_int_equal(st, DCR_EPARSE);
    assert_true(set == (dcr_results_set_t *)0x1);
    const char *line = dcr_error_line(st);
    assert_null(strchr(line, '\n'));
    assert_non_null(strstr(line, "results_damaged_segv.h5"));
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
        {huge_chunked_column, "refits/latency_s declares 268435456"},
        {unwritten_chunked_column, "refits/latency_s stores fewer bytes"},
        {scalar_column, "refits/latency_s is not a 1-D floating-point dataset"},
        {version_not_integer, "dcr_results_version is not one integer"},
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

/* ---- statistics, against independent oracles ---- */

static double standard_normal(dcr_rng_t *r)
{
    /* Box-Muller: exact for a standard normal given uniform inputs. */
    double u = dcr_rng_uniform(r), v = dcr_rng_uniform(r);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* n draws of scale * exp(sigma * Z): skewed like refit latencies, with a
 * known median (scale). */
static void draw_lognormal(dcr_rng_t *r, double *v, size_t n, double scale, double sigma)
{
    for (size_t i = 0; i < n; i++) v[i] = scale * exp(sigma * standard_normal(r));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sorted_median(const double *v, size_t n)
{
    double t[NMAX];
    memcpy(t, v, n * sizeof(double));
    qsort(t, n, sizeof(double), cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The selection-based median against sorting, with many ties. */
static void test_median_matches_sorting(void **state)
{
    dcr_rng_t r;
    dcr_rng_seed(&r, 11);
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = 1 + dcr_rng_below(&r, NMAX);
        double v[NMAX];
        for (size_t i = 0; i < n; i++)
            v[i] = trial % 2 ? (double)dcr_rng_below(&r, 4) : dcr_rng_uniform(&r);
        double want = sorted_median(v, n);
        assert_true(dcr_bootstrap_median(v, n) == want);
    }
}

/* P(NEW > BASE) counted by hand. */
static void test_prob_greater_by_hand(void **state)
{
    double b1[3] = {1, 2, 3}, c1[1] = {2};
    assert_true(dcr_bootstrap_prob_greater(b1, 3, c1, 1) == 0.5); /* 1 + 0.5 + 0 over 3 */
    double b2[2] = {1, 1}, c2[2] = {2, 3};
    assert_true(dcr_bootstrap_prob_greater(b2, 2, c2, 2) == 1.0);
    assert_true(dcr_bootstrap_prob_greater(c2, 2, b2, 2) == 0.0);
    double b3[2] = {1, NAN}, c3[2] = {NAN, 2};
    assert_true(dcr_bootstrap_prob_greater(b3, 2, c3, 2) == 1.0); /* NaN takes part in no pair */
    assert_true(isnan(dcr_bootstrap_prob_greater(b3, 0, c3, 2)));
}

static void test_interval_basics(void **state)
{
    double lo, hi, lo2, hi2;
    /* Constant samples: every resample has the same ratio. */
    double two[12], three[12];
    for (int i = 0; i < 12; i++) two[i] = 2, three[i] = 3;
    assert_int_equal(dcr_bootstrap_ratio_ci(two, 12, three, 12, 0.95, 1000, 1, &lo, &hi), DCR_OK);
    assert_true(lo == 1.5 && hi == 1.5);
    /* Same input, same seed: the same interval; it holds the sample ratio. */
    dcr_rng_t r;
    dcr_rng_seed(&r, 5);
    double b[30], n[30];
    draw_lognormal(&r, b, 30, 1.0, 0.3);
    draw_lognormal(&r, n, 30, 1.1, 0.3);
    assert_int_equal(dcr_bootstrap_ratio_ci(b, 30, n, 30, 0.95, 2000, 9, &lo, &hi), DCR_OK);
    assert_int_equal(dcr_bootstrap_ratio_ci(b, 30, n, 30, 0.95, 2000, 9, &lo2, &hi2), DCR_OK);
    assert_true(lo == lo2 && hi == hi2);
    double ratio = sorted_median(n, 30) / sorted_median(b, 30);
    assert_true(lo <= ratio && ratio <= hi && lo < hi);
    /* One run per side: the two-stage bootstrap is the plain one. */
    size_t one_b[1] = {30}, one_n[1] = {30};
    dcr_bootstrap_sample_t sb = {b, 30, one_b, 1}, sn = {n, 30, one_n, 1};
    assert_int_equal(dcr_bootstrap_ratio_ci_runs(&sb, &sn, 0.95, 2000, 9, &lo2, &hi2), DCR_OK);
    assert_true(lo == lo2 && hi == hi2);
    /* Three runs a side whose levels differ by far more than their refits
     * (drift between processes, by construction): resampling runs widens
     * the interval beyond the refits-only one. */
    double drift_b[30], drift_n[30];
    size_t runs[3] = {10, 10, 10};
    for (int i = 0; i < 30; i++) {
        double level = i < 10 ? 0.8 : i < 20 ? 1.0 : 1.25;
        drift_b[i] = level * (1 + 0.01 * (i % 3));
        drift_n[i] = level * 1.02 * (1 + 0.01 * ((i + 1) % 3));
    }
    dcr_bootstrap_sample_t db = {drift_b, 30, runs, 3}, dn = {drift_n, 30, runs, 3};
    double flat_lo, flat_hi;
    assert_int_equal(
        dcr_bootstrap_ratio_ci(drift_b, 30, drift_n, 30, 0.95, 2000, 9, &flat_lo, &flat_hi),
        DCR_OK);
    assert_int_equal(dcr_bootstrap_ratio_ci_runs(&db, &dn, 0.95, 2000, 9, &lo2, &hi2), DCR_OK);
    assert_true(hi2 - lo2 > flat_hi - flat_lo);
    /* A higher level gives a wider interval. */
    assert_int_equal(dcr_bootstrap_ratio_ci(b, 30, n, 30, 0.99, 2000, 9, &lo2, &hi2), DCR_OK);
    assert_true(lo2 <= lo && hi2 >= hi);
}

typedef struct tally {
    int regressed, inconclusive, same, improved, too_few, covered;
} tally_t;

/* Judges `trials` pairs of samples drawn from lognormals of medians 1 and
 * shift (both of spread sigma), n per side, at the default options. */
static tally_t judge_many(int trials, size_t n, double shift, double sigma, uint64_t seed)
{
    tally_t t = {0};
    dcr_compare_opts_t o = dcr_compare_opts_default();
    dcr_rng_t r;
    dcr_rng_seed(&r, seed);
    for (int i = 0; i < trials; i++) {
        double b[NMAX * 2], c[NMAX * 2], lo, hi;
        draw_lognormal(&r, b, n, 1.0, sigma);
        draw_lognormal(&r, c, n, shift, sigma);
        dcr_compare_verdict_t v;
        char reason[192];
        assert_int_equal(dcr_compare_judge(b, n, c, n, &o, &lo, &hi, &v, reason, sizeof(reason)),
                         DCR_OK);
        t.regressed += v == DCR_COMPARE_REGRESSED;
        t.inconclusive += v == DCR_COMPARE_INCONCLUSIVE;
        t.same += v == DCR_COMPARE_SAME;
        t.improved += v == DCR_COMPARE_IMPROVED;
        t.too_few += v == DCR_COMPARE_TOO_FEW;
        t.covered += lo <= shift && shift <= hi;
    }
    return t;
}

/* Identical distributions (the oracle: no change, by construction). With
 * spread 0.1 and 20 refits a side, the standard error of the log ratio of
 * medians is about 1.25 * 0.1 * sqrt(2 / 20) = 0.04, so a regression call
 * (lower end above 1.1) needs the sample ratio 2.4 + 1.96 standard errors
 * out: never, in practice. With spread 0.3 (this machine's noisiest
 * latencies) it is 1.96 + 0.8 = 2.8 standard errors, a rate of 0.3%; the
 * test allows 1%. The interval must cover the true ratio 1 about 95% of
 * the time (the percentile bootstrap of a median at n = 20 is a little
 * short of nominal; 88% is the floor). */
static void test_no_false_alarm_on_identical(void **state)
{
    tally_t t = judge_many(400, 20, 1.0, 0.1, 101);
    assert_int_equal(t.regressed, 0);
    assert_int_equal(t.improved, 0);
    assert_true(t.covered >= 352 && t.covered <= 398);
    t = judge_many(400, 20, 1.0, 0.3, 202);
    assert_true(t.regressed <= 4);
    assert_true(t.covered >= 352);
}

/* A 20% slowdown (the oracle: medians 1 and 1.2 by construction). Spread
 * 0.1 and 80 refits a side: standard error 0.02, so the lower end clears
 * 1.1 when the sample log ratio exceeds log 1.1 + 1.96 * 0.02 = 0.134,
 * 2.4 standard errors below the true log 1.2 = 0.182: 99% of pairs; the
 * test asks 95%. With 12 refits and spread 0.3 the interval is too wide:
 * rarely regressed, mostly inconclusive, never "same" below... allowed. */
static void test_detects_twenty_percent(void **state)
{
    tally_t t = judge_many(200, 80, 1.2, 0.1, 303);
    assert_true(t.regressed >= 190);
    assert_int_equal(t.same + t.improved, 0);
    t = judge_many(200, 12, 1.2, 0.3, 404);
    assert_true(t.inconclusive > t.regressed);
    /* An improvement of 30% with little noise. */
    t = judge_many(100, 20, 0.7, 0.05, 505);
    assert_int_equal(t.improved, 100);
}

static void test_too_few_samples(void **state)
{
    dcr_compare_opts_t o = dcr_compare_opts_default();
    double b[12], c[12], lo, hi;
    for (int i = 0; i < 12; i++) b[i] = 1, c[i] = 2;
    dcr_compare_verdict_t v;
    char reason[192];
    assert_int_equal(dcr_compare_judge(b, 9, c, 12, &o, &lo, &hi, &v, reason, sizeof(reason)),
                     DCR_OK);
    assert_int_equal(v, DCR_COMPARE_TOO_FEW);
    assert_non_null(strstr(reason, "BASE 9, NEW 12, at least 10"));
    assert_true(isnan(lo) && isnan(hi));
    /* NaN values (unmeasured) do not count. */
    b[3] = NAN;
    assert_int_equal(dcr_compare_judge(b, 10, c, 12, &o, &lo, &hi, &v, reason, sizeof(reason)),
                     DCR_OK);
    assert_int_equal(v, DCR_COMPARE_TOO_FEW);
    b[3] = 1;
    assert_int_equal(dcr_compare_judge(b, 10, c, 12, &o, &lo, &hi, &v, reason, sizeof(reason)),
                     DCR_OK);
    assert_int_equal(v, DCR_COMPARE_REGRESSED);
    assert_non_null(strstr(reason, "lies above"));
    /* No ratio from a zero BASE median. */
    for (int i = 0; i < 12; i++) b[i] = 0;
    assert_int_equal(dcr_compare_judge(b, 12, c, 12, &o, &lo, &hi, &v, reason, sizeof(reason)),
                     DCR_OK);
    assert_int_equal(v, DCR_COMPARE_NA);
}

/* ---- verdicts on files ---- */

static double steady[NV];
static const char *const cfg12 = "{\"model\":\"m\",\"transport\":\"objstore\",\"refits\":12}";

/* 1.00 +- 2%, deterministic. */
static void fill_steady(void)
{
    for (int i = 0; i < NV; i++) steady[i] = 1.0 + 0.01 * (double)((i * 7) % 5 - 2);
}

static void scaled(double *out, double k)
{
    for (int i = 0; i < NV; i++) out[i] = steady[i] * k;
}

static void write_pair(const char *base, const char *cur, const double *new_lat,
                       const double *new_payload, double new_exact)
{
    unlink(base);
    unlink(cur);
    fill_steady();
    fake_run_t b = fake_n(cfg12, NV, steady, NULL, 1);
    append_run(base, &b);
    /* Only the number of timed refits differs: still the same configuration. */
    fake_run_t n = fake_n("{\"model\":\"m\",\"transport\":\"objstore\",\"refits\":8}", NV, new_lat,
                          new_payload, new_exact);
    append_run(cur, &n);
}

static dcr_compare_t *compare_opts(const char *base, const char *cur, const dcr_compare_opts_t *o,
                                   size_t want_pairs)
{
    dcr_compare_t *c = NULL;
    assert_int_equal(dcr_compare_files(base, cur, o, &c), DCR_OK);
    assert_int_equal(c->npairs, want_pairs);
    return c;
}

static dcr_compare_t *compare(const char *base, const char *cur, double threshold)
{
    dcr_compare_opts_t o = dcr_compare_opts_default();
    o.threshold_pct = threshold;
    return compare_opts(base, cur, &o, 1);
}

static void test_files_regression(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    double slow[NV];
    fill_steady();
    scaled(slow, 1.30);
    write_pair(base, cur, slow, NULL, 1);
    dcr_compare_t *c = compare(base, cur, 10);
    const dcr_compare_metric_t *m = metric(c, 0, "latency_s");
    assert_int_equal(m->verdict, DCR_COMPARE_REGRESSED);
    assert_true(fabs(m->ratio - 1.30) < 1e-12);
    assert_true(m->lo > 1.1 && m->lo <= 1.30 && m->hi >= 1.30);
    assert_true(m->prob_greater == 1.0);
    assert_int_equal(metric(c, 0, "payload_bytes")->verdict, DCR_COMPARE_SAME);
    assert_int_equal(c->regressions, 1);
    assert_true(c->pairs[0].regressed);
    char *text = dcr_compare_json(c);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "verdict")), "regression");
    json_t *regs = json_object_get(j, "regressions");
    assert_true(json_is_array(regs) && json_array_size(regs) == 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(regs, 0), "metric")),
                        "latency_s");
    json_t *m0 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "matched"), 0), "metrics"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "name")), "latency_s");
    assert_string_equal(json_string_value(json_object_get(m0, "verdict")), "regressed");
    assert_non_null(strstr(json_string_value(json_object_get(m0, "reason")), "lies above"));
    assert_non_null(strstr(json_string_value(json_object_get(m0, "test")), "bootstrap"));
    json_t *iv = json_object_get(m0, "interval");
    assert_true(json_array_size(iv) == 2 &&
                fabs(json_real_value(json_array_get(iv, 0)) - m->lo) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m0, "base"), "n")), NV);
    assert_true(fabs(json_real_value(json_object_get(json_object_get(m0, "new"), "median")) -
                     m->cur.median) < 1e-9);
    json_decref(j);
    free(text);
    dcr_compare_destroy(c);
    /* A large enough threshold lets it pass. */
    c = compare(base, cur, 40);
    assert_int_equal(c->regressions, 0);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_SAME);
    dcr_compare_destroy(c);
}

static void test_files_inconclusive_improvement_bitexact(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    /* Median 15% up, but NEW alternates between 0.8 and 1.5: the interval
     * reaches from below 1 to above 1.1, so no verdict either way. */
    double noisy[NV];
    for (int i = 0; i < NV; i++) noisy[i] = i % 2 ? 1.5 : 0.8 + 0.01 * i;
    write_pair(base, cur, noisy, NULL, 1);
    dcr_compare_t *c = compare(base, cur, 10);
    const dcr_compare_metric_t *m = metric(c, 0, "latency_s");
    assert_int_equal(m->verdict, DCR_COMPARE_INCONCLUSIVE);
    assert_true(m->lo < 1.1 && m->hi > 1.1);
    assert_non_null(strstr(m->reason, "straddles"));
    assert_int_equal(c->regressions, 0);
    assert_int_equal(c->inconclusive, 1);
    dcr_compare_destroy(c);
    /* Payload halved, latency unchanged: improvement, no regression. */
    double half[NV];
    for (int i = 0; i < NV; i++) half[i] = 500 + i % 3;
    fill_steady();
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
}

/* A part of the refit (here finalization, constant so beyond any noise)
 * fails the run only when it moved by more than the threshold's share of the
 * refit latency (1 s here, so 0.1 s at 10%) and the latency regressed too. */
static void test_files_component_rule(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    double fin[3] = {0.15, 0.30, 0.30}, lat_scale[3] = {1, 1, 1.3};
    dcr_compare_verdict_t want[3] = {DCR_COMPARE_MINOR, DCR_COMPARE_MINOR, DCR_COMPARE_REGRESSED};
    size_t regressions[3] = {0, 0, 2}; /* the last: latency_s and finalization_s */
    fill_steady();
    for (int k = 0; k < 3; k++) {
        unlink(base);
        unlink(cur);
        fake_run_t b = fake_n("{\"model\":\"m\"}", NV, steady, NULL, 1);
        append_run(base, &b);
        fake_run_t n = b;
        n.finalization = fin[k]; /* +50% (0.05 s), then +200% (0.2 s) */
        for (int i = 0; i < NV; i++) n.latency[i] = steady[i] * lat_scale[k];
        append_run(cur, &n);
        dcr_compare_t *c = compare(base, cur, 10);
        assert_int_equal(metric(c, 0, "finalization_s")->verdict, want[k]);
        assert_int_equal(c->regressions, regressions[k]);
        if (k == 1)
            assert_non_null(strstr(metric(c, 0, "finalization_s")->reason, "did not regress"));
        dcr_compare_destroy(c);
    }
}

static void test_files_unmatched_and_pooled(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    fill_steady();
    fake_run_t a = fake_n("{\"model\":\"m\",\"transport\":\"objstore\"}", NV, steady, NULL, 1);
    append_run(base, &a);
    append_run(base, &a); /* pooled with the first */
    fake_run_t only_base = fake_n("{\"model\":\"m\",\"transport\":\"relay\"}", NV, steady, NULL, 1);
    append_run(base, &only_base);
    append_run(cur, &a);
    fake_run_t only_new =
        fake_n("{\"model\":\"m\",\"transport\":\"objstore\",\"seed\":7}", NV, steady, NULL, 0);
    append_run(cur, &only_new);
    dcr_compare_opts_t o = dcr_compare_opts_default();
    dcr_compare_t *c = compare_opts(base, cur, &o, 1);
    assert_int_equal(metric(c, 0, "latency_s")->base.n, 2 * NV);
    assert_int_equal(metric(c, 0, "latency_s")->cur.n, NV);
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
    assert_int_equal(dcr_compare_files(base, "/nonexistent/new.h5", &o, &c), DCR_EIO);
}

/* Output choices that change what is measured keep runs apart; an older
 * file without them reads as verified and recorded throughout, its run
 * directory on the disk; a different
 * machine keeps runs apart; --match-ignore pairs them on purpose. */
static void test_matching_choices_and_ignore(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    fill_steady();
    struct {
        const char *base_cfg, *new_cfg;
        size_t pairs;
    } cases[] = {
        {"{\"model\":\"m\"}", "{\"model\":\"m\",\"verify\":true,\"trace_overhead\":false}", 1},
        {"{\"model\":\"m\"}", "{\"model\":\"m\",\"verify\":false}", 0},
        {"{\"model\":\"m\"}", "{\"model\":\"m\",\"trace_overhead\":true}", 0},
        {"{\"model\":\"m\"}", "{\"model\":\"m\",\"run_directory\":\"disk\"}", 1},
        {"{\"model\":\"m\"}", "{\"model\":\"m\",\"run_directory\":\"memory\"}", 0},
        {"{\"model\":\"m\",\"cross_gbps\":0.25}", "{\"model\":\"m\",\"cross_gbps\":0.2}", 0},
    };
    dcr_compare_opts_t o = dcr_compare_opts_default();
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        unlink(base);
        unlink(cur);
        fake_run_t b = fake_n(cases[k].base_cfg, NV, steady, NULL, 1);
        fake_run_t n = fake_n(cases[k].new_cfg, NV, steady, NULL, 1);
        append_run(base, &b);
        append_run(cur, &n);
        dcr_compare_destroy(compare_opts(base, cur, &o, cases[k].pairs));
    }
    const char *keys[] = {"cross_gbps"};
    o.ignore = keys;
    o.nignore = 1;
    dcr_compare_destroy(compare_opts(base, cur, &o, 1));
    /* A key no run has is refused: a typo must not silently match nothing. */
    const char *typo[] = {"link_gbbs"};
    o.ignore = typo;
    dcr_compare_t *c = NULL;
    assert_int_equal(dcr_compare_files(base, cur, &o, &c), DCR_EINVAL);
    /* Another machine: apart, unless ignored. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(cur, H5F_ACC_RDWR, H5P_DEFAULT);
    replace_string_attr(f, "/runs/000000", "machine", "another box");
    H5Fclose(f);
    const char *both[] = {"cross_gbps", "machine"};
    o.ignore = keys;
    dcr_compare_destroy(compare_opts(base, cur, &o, 0));
    o.ignore = both;
    o.nignore = 2;
    dcr_compare_destroy(compare_opts(base, cur, &o, 1));
}

/* ---- paired blocks ---- */

/* P(W+ <= w) by enumerating all 2^n sign patterns (the oracle). */
static double enumerated_cdf(int n, long w)
{
    long hits = 0;
    for (long mask = 0; mask < (1L << n); mask++) {
        long sum = 0;
        for (int i = 0; i < n; i++)
            if (mask >> i & 1) sum += i + 1;
        hits += sum <= w;
    }
    return (double)hits / (double)(1L << n);
}

/* The exact null distribution against enumeration and against the
 * published two-sided 5% critical values of the signed-rank test (the
 * largest T with P(W+ <= T) <= 0.025: n = 6..12, 15, 20). */
static void test_signed_rank_null_distribution(void **state)
{
    for (int n = 1; n <= 12; n++)
        for (long w = -1; w <= n * (n + 1) / 2 + 1; w++)
            assert_true(fabs(dcr_paired_signed_rank_cdf((size_t)n, w) - enumerated_cdf(n, w)) <
                        1e-12);
    const int n_of[] = {6, 7, 8, 9, 10, 11, 12, 15, 20};
    const long critical[] = {0, 2, 3, 5, 8, 10, 13, 25, 52};
    for (size_t i = 0; i < sizeof(n_of) / sizeof(n_of[0]); i++) {
        assert_true(dcr_paired_signed_rank_cdf((size_t)n_of[i], critical[i]) <= 0.025);
        assert_true(dcr_paired_signed_rank_cdf((size_t)n_of[i], critical[i] + 1) > 0.025);
    }
    assert_int_equal(dcr_paired_min_blocks(0.95), 6); /* 2^-6 <= 0.025 < 2^-5 */
    assert_int_equal(dcr_paired_min_blocks(0.90), 5);
    assert_int_equal(dcr_paired_min_blocks(0.99), 8);
}

/* Whether the two-sided signed-rank test at the level keeps the centre d0,
 * with tails by enumeration (the oracle of the interval: the set of centres
 * the test does not reject). */
static bool test_keeps(const double *d, int n, double d0, double level)
{
    int rank_of[32];
    for (int i = 0; i < n; i++) {
        rank_of[i] = 1;
        for (int j = 0; j < n; j++) rank_of[i] += fabs(d[j] - d0) < fabs(d[i] - d0);
    }
    long w = 0, m = n * (n + 1) / 2;
    for (int i = 0; i < n; i++)
        if (d[i] > d0) w += rank_of[i];
    double below = enumerated_cdf(n, w), above = 1 - enumerated_cdf(n, w - 1);
    (void)m;
    return below > (1 - level) / 2 && above > (1 - level) / 2;
}

static void test_signed_rank_interval_inverts_the_test(void **state)
{
    dcr_rng_t r;
    dcr_rng_seed(&r, 29);
    for (int trial = 0; trial < 60; trial++) {
        int n = 6 + (int)dcr_rng_below(&r, 9);
        double d[32], level = trial % 3 == 0 ? 0.90 : 0.95;
        for (int i = 0; i < n; i++) d[i] = 0.1 + 0.2 * standard_normal(&r);
        dcr_paired_interval_t ci;
        assert_int_equal(dcr_paired_signed_rank_ci(d, (size_t)n, level, &ci), DCR_OK);
        const double eps = 1e-9;
        assert_true(test_keeps(d, n, ci.lo + eps, level));
        assert_false(test_keeps(d, n, ci.lo - eps, level));
        assert_true(test_keeps(d, n, ci.hi - eps, level));
        assert_false(test_keeps(d, n, ci.hi + eps, level));
        assert_true(ci.lo <= ci.estimate && ci.estimate <= ci.hi && ci.coverage >= level);
    }
    /* Too few blocks for the level, and a value that is not finite. */
    double d[6] = {0.1, 0.2, 0.3, 0.1, 0.2, 0.3};
    dcr_paired_interval_t ci;
    assert_int_equal(dcr_paired_signed_rank_ci(d, 5, 0.95, &ci), DCR_EINVAL);
    assert_int_equal(dcr_paired_signed_rank_ci(d, 6, 0.95, &ci), DCR_OK);
    assert_true(ci.lo == 0.1 && ci.hi == 0.3 && fabs(ci.coverage - (1 - 2.0 / 64)) < 1e-12);
    d[2] = INFINITY;
    assert_int_equal(dcr_paired_signed_rank_ci(d, 6, 0.95, &ci), DCR_EINVAL);
}

/* An interleaved job under a drifting load, by construction: round r's
 * machine level L_r (a step from 1.0 to 1.35 halfway, the back-to-back
 * drift seen here, times a round-to-round spread of 0.25); the two blocks
 * of a round see L_r times their own small deviation (adjacent in time);
 * refits are lognormal around the block's level, NEW's times `ratio`. */
typedef struct drift_job {
    size_t rounds, block;
    double base[24][32], cur[24][32];
} drift_job_t;

static void draw_drift_job(dcr_rng_t *r, drift_job_t *j, double ratio)
{
    for (size_t k = 0; k < j->rounds; k++) {
        double level = (k < j->rounds / 2 ? 1.0 : 1.35) * exp(0.25 * standard_normal(r));
        draw_lognormal(r, j->base[k], j->block, level * exp(0.02 * standard_normal(r)), 0.1);
        draw_lognormal(r, j->cur[k], j->block, ratio * level * exp(0.02 * standard_normal(r)), 0.1);
    }
}

/* The paired verdict (lower end of the interval of the block ratios above
 * 1.1) from the job, as dcr compare --paired judges it. */
static bool paired_regressed(const drift_job_t *j)
{
    double d[24];
    for (size_t k = 0; k < j->rounds; k++)
        d[k] = log(sorted_median(j->cur[k], j->block) / sorted_median(j->base[k], j->block));
    dcr_paired_interval_t ci;
    assert_int_equal(dcr_paired_signed_rank_ci(d, j->rounds, 0.95, &ci), DCR_OK);
    return exp(ci.lo) > 1.1;
}

/* The unpaired verdict of BASE rounds [b0, b1) against NEW rounds [n0, n1),
 * pooled as runs (the two-stage bootstrap). */
static dcr_compare_verdict_t unpaired_verdict(const drift_job_t *j, size_t b0, size_t b1, size_t n0,
                                              size_t n1)
{
    double b[24 * 32], c[24 * 32], lo, hi;
    size_t lb[24], ln[24], nb = 0, nn = 0;
    for (size_t k = b0; k < b1; k++, nb++) {
        memcpy(b + nb * j->block, j->base[k], j->block * sizeof(double));
        lb[nb] = j->block;
    }
    for (size_t k = n0; k < n1; k++, nn++) {
        memcpy(c + nn * j->block, j->cur[k], j->block * sizeof(double));
        ln[nn] = j->block;
    }
    dcr_bootstrap_sample_t sb = {b, nb * j->block, lb, nb}, sn = {c, nn * j->block, ln, nn};
    dcr_compare_opts_t o = dcr_compare_opts_default();
    dcr_compare_verdict_t v;
    char reason[192];
    assert_int_equal(dcr_compare_judge_runs(&sb, &sn, &o, &lo, &hi, &v, reason, sizeof(reason)),
                     DCR_OK);
    return v;
}

/* Identical sides: one BASE run just before the step of the load and one
 * NEW run just after it (two runs back to back, as the user did)
 * are called a regression by the unpaired test in many trials: the step is
 * read as a slowdown. The same drift never fools the paired test. A true 20%
 * slowdown under the same drift is called by the paired test in at least
 * 95% of trials (12 blocks of 20 refits: the block log ratios spread by
 * about 0.05, so the lower end sits near log 1.2 - 0.04 > log 1.1), far
 * more often than by the unpaired test of the same interleaved blocks. */
static void test_paired_blocks_cancel_drift(void **state)
{
    dcr_rng_t r;
    dcr_rng_seed(&r, 2929);
    static drift_job_t j = {.rounds = 12, .block = 20};
    int fooled_unpaired = 0, fooled_paired = 0, called_paired = 0, called_unpaired = 0;
    const int trials = 100;
    for (int t = 0; t < trials; t++) {
        draw_drift_job(&r, &j, 1.0);
        fooled_unpaired += unpaired_verdict(&j, 5, 6, 6, 7) == DCR_COMPARE_REGRESSED;
        fooled_paired += paired_regressed(&j);
        draw_drift_job(&r, &j, 1.2);
        called_paired += paired_regressed(&j);
        called_unpaired += unpaired_verdict(&j, 0, 12, 0, 12) == DCR_COMPARE_REGRESSED;
    }
    print_message("drift: unpaired false alarms %d/%d, paired %d/%d; 20%% slowdown called "
                  "paired %d/%d, unpaired %d/%d\n",
                  fooled_unpaired, trials, fooled_paired, trials, called_paired, trials,
                  called_unpaired, trials);
    assert_true(fooled_unpaired >= trials * 2 / 5);
    assert_int_equal(fooled_paired, 0);
    assert_true(called_paired >= 95);
    assert_true(called_unpaired < called_paired / 2);
}

/* Writes `rounds` blocks a side, interleaved as scripts/ab-bench.sh does
 * (BASE block r, then NEW block r), BASE's at the round's level and NEW's
 * at ratio times it; pause_s > 0 writes every BASE block first and NEW's
 * after the pause (not interleaved). */
static void write_blocks(const char *base, const char *cur, size_t rounds, double ratio,
                         unsigned pause_s)
{
    static const double level[8] = {1.0, 0.7, 1.4, 0.9, 1.3, 0.8, 1.1, 0.75};
    unlink(base);
    unlink(cur);
    fill_steady();
    for (size_t pass = 0; pass < (pause_s ? 2u : 1u); pass++) {
        if (pass) sleep(pause_s);
        for (size_t k = 0; k < rounds; k++) {
            double b[NV], n[NV];
            for (int i = 0; i < NV; i++) {
                b[i] = steady[i] * level[k % 8];
                n[i] = steady[(i + 1) % NV] * level[k % 8] * ratio;
            }
            fake_run_t fb = fake_n(cfg12, NV, b, NULL, 1), fn = fake_n(cfg12, NV, n, NULL, 1);
            if (!pause_s || pass == 0) append_run(base, &fb);
            if (!pause_s || pass == 1) append_run(cur, &fn);
        }
    }
}

static void test_files_paired(void **state)
{
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur;
    dcr_compare_opts_t paired = dcr_compare_opts_default(), unpaired = paired;
    paired.paired = true;
    /* 1.2x under a drift of 0.7-1.4x between rounds: the paired interval
     * holds 1.2 and lies above 1.1; the pooled, unpaired one straddles. */
    write_blocks(base, cur, 6, 1.2, 0);
    dcr_compare_t *c = compare_opts(base, cur, &paired, 1);
    const dcr_compare_metric_t *m = metric(c, 0, "latency_s");
    assert_int_equal(m->verdict, DCR_COMPARE_REGRESSED);
    assert_int_equal(m->nblocks, 6);
    assert_true(m->lo > 1.1 && m->lo <= 1.2 && m->hi >= 1.2 && fabs(m->ratio - 1.2) < 0.01);
    assert_true(fabs(m->coverage - (1 - 2.0 / 64)) < 1e-12);
    assert_non_null(strstr(m->reason, "6 paired blocks"));
    char *text = dcr_compare_json(c);
    json_t *j = json_loads(text, 0, NULL);
    assert_true(json_is_true(json_object_get(j, "paired")));
    json_t *m0 = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "matched"), 0), "metrics"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(m0, "test")), "signed-rank"));
    assert_int_equal(json_integer_value(json_object_get(m0, "blocks")), 6);
    assert_int_equal(json_array_size(json_object_get(m0, "block_ratios")), 6);
    assert_true(json_is_real(json_object_get(m0, "pooled_ratio")));
    json_decref(j);
    free(text);
    dcr_compare_destroy(c);
    c = compare_opts(base, cur, &unpaired, 1);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_INCONCLUSIVE);
    dcr_compare_destroy(c);
    /* Identical sides under the same drift: same. */
    write_blocks(base, cur, 6, 1.0, 0);
    c = compare_opts(base, cur, &paired, 1);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_SAME);
    assert_int_equal(c->regressions, 0);
    dcr_compare_destroy(c);
    /* Five blocks cannot reach 95%: too few, with the remedy named. */
    write_blocks(base, cur, 5, 1.2, 0);
    c = compare_opts(base, cur, &paired, 1);
    assert_int_equal(metric(c, 0, "latency_s")->verdict, DCR_COMPARE_TOO_FEW);
    assert_non_null(strstr(metric(c, 0, "latency_s")->reason, "--rounds"));
    dcr_compare_destroy(c);
    /* Unequal block counts, and blocks that did not run side by side, are refused. */
    fake_run_t extra = fake_n(cfg12, NV, steady, NULL, 1);
    append_run(cur, &extra);
    assert_int_equal(dcr_compare_files(base, cur, &paired, &c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "one NEW block per BASE block"));
    write_blocks(base, cur, 6, 1.0, 1);
    assert_int_equal(dcr_compare_files(base, cur, &paired, &c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "not interleaved"));
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

/* Every exit status CI acts on: 0 none, 1 regression, 2 usage,
 * 3 inconclusive (only with --strict), 4 unreadable input. */
static void test_cli_exit_status(void **state)
{
    if (!getenv("DCR_CLI")) skip();
    const files_t *fx = *state;
    const char *base = fx->base, *cur = fx->cur, *other = fx->other;
    char args[768];
    double slow[NV];
    fill_steady();
    scaled(slow, 1.30);
    write_pair(base, cur, slow, NULL, 1);
    snprintf(args, sizeof(args), "%s %s", base, cur);
    assert_int_equal(run_cli(args), 1);
    snprintf(args, sizeof(args), "%s %s --json --threshold 40", base, cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s", base, base);
    assert_int_equal(run_cli(args), 0);
    /* Usage: 2. */
    snprintf(args, sizeof(args), "%s", base);
    assert_int_equal(run_cli(args), 2);
    snprintf(args, sizeof(args), "%s %s --threshold -5", base, cur);
    assert_int_equal(run_cli(args), 2);
    snprintf(args, sizeof(args), "%s %s --min-samples 1", base, cur);
    assert_int_equal(run_cli(args), 2);
    snprintf(args, sizeof(args), "%s %s --match-ignore no_such_key", base, cur);
    assert_int_equal(run_cli(args), 2);
    /* Inconclusive: 0, and 3 with --strict; too few refits the same. */
    double noisy[NV];
    for (int i = 0; i < NV; i++) noisy[i] = i % 2 ? 1.5 : 0.8 + 0.01 * i;
    write_pair(base, cur, noisy, NULL, 1);
    snprintf(args, sizeof(args), "%s %s", base, cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s --strict", base, cur);
    assert_int_equal(run_cli(args), 3);
    write_pair(base, cur, steady, NULL, 1);
    snprintf(args, sizeof(args), "%s %s --strict --min-samples 13", base, cur);
    assert_int_equal(run_cli(args), 3);
    snprintf(args, sizeof(args), "%s %s --strict", base, cur);
    assert_int_equal(run_cli(args), 0);
    /* Unreadable input: 4 (missing, not HDF5, another schema version). */
    snprintf(args, sizeof(args), "%s /nonexistent/dcr-new.h5", base);
    assert_int_equal(run_cli(args), 4);
    FILE *f = fopen(other, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "%s %s", other, cur);
    assert_int_equal(run_cli(args), 4);
    damaged(other, set_version_2);
    snprintf(args, sizeof(args), "%s %s", base, other);
    assert_int_equal(run_cli(args), 4);
    /* Nothing matches: listed, exit 0, unless --require-match. */
    unlink(cur);
    fake_run_t o = fake_n("{\"model\":\"other\"}", NV, steady, NULL, 1);
    append_run(cur, &o);
    snprintf(args, sizeof(args), "%s %s", base, cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s --require-match", base, cur);
    assert_int_equal(run_cli(args), 1);
}

/* --paired exits like the unpaired comparison; --match-ignore takes the
 * bench flag's name link_gbps for the recorded key cross_gbps. */
static void test_cli_paired_and_flag_names(void **state)
{
    if (!getenv("DCR_CLI")) skip();
    const files_t *fx = *state;
    char args[768];
    write_blocks(fx->base, fx->cur, 6, 1.2, 0);
    snprintf(args, sizeof(args), "%s %s --paired", fx->base, fx->cur);
    assert_int_equal(run_cli(args), 1);
    snprintf(args, sizeof(args), "%s %s --paired --threshold 30", fx->base, fx->cur);
    assert_int_equal(run_cli(args), 0);
    write_blocks(fx->base, fx->cur, 6, 1.0, 1);
    snprintf(args, sizeof(args), "%s %s --paired", fx->base, fx->cur);
    assert_int_equal(run_cli(args), 2);
    unlink(fx->base);
    unlink(fx->cur);
    fill_steady();
    fake_run_t b = fake_n("{\"model\":\"m\",\"cross_gbps\":0.25}", NV, steady, NULL, 1),
               n = fake_n("{\"model\":\"m\",\"cross_gbps\":0.2}", NV, steady, NULL, 1);
    append_run(fx->base, &b);
    append_run(fx->cur, &n);
    snprintf(args, sizeof(args), "%s %s --match-ignore link_gbps --require-match", fx->base,
             fx->cur);
    assert_int_equal(run_cli(args), 0);
    snprintf(args, sizeof(args), "%s %s --require-match", fx->base, fx->cur);
    assert_int_equal(run_cli(args), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_rejects_malformed),
        cmocka_unit_test(test_damaged_file_that_crashes_libhdf5),
        cmocka_unit_test(test_unmeasured_bounds),
        cmocka_unit_test(test_variable_length_strings),
        cmocka_unit_test(test_median_matches_sorting),
        cmocka_unit_test(test_prob_greater_by_hand),
        cmocka_unit_test(test_interval_basics),
        cmocka_unit_test(test_no_false_alarm_on_identical),
        cmocka_unit_test(test_detects_twenty_percent),
        cmocka_unit_test(test_too_few_samples),
        cmocka_unit_test(test_signed_rank_null_distribution),
        cmocka_unit_test(test_signed_rank_interval_inverts_the_test),
        cmocka_unit_test(test_paired_blocks_cancel_drift),
        cmocka_unit_test_setup_teardown(test_files_regression, files_setup, files_teardown),
        cmocka_unit_test_setup_teardown(test_files_inconclusive_improvement_bitexact, files_setup,
                                        files_teardown),
        cmocka_unit_test_setup_teardown(test_files_component_rule, files_setup, files_teardown),
        cmocka_unit_test_setup_teardown(test_files_unmatched_and_pooled, files_setup,
                                        files_teardown),
        cmocka_unit_test_setup_teardown(test_matching_choices_and_ignore, files_setup,
                                        files_teardown),
        cmocka_unit_test_setup_teardown(test_files_paired, files_setup, files_teardown),
        cmocka_unit_test_setup_teardown(test_cli_exit_status, files_setup, files_teardown),
        cmocka_unit_test_setup_teardown(test_cli_paired_and_flag_names, files_setup,
                                        files_teardown),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
