/* ctest-labels: integration
 *
 * dcr report on a hand-made results file and a hand-made trace: report.md
 * and every figure (PNG and SVG) written, table entries equal to figures
 * worked out by hand from the inputs (medians, speedups, the bounds of the
 * drawn refit), the median-latency refit chosen by default, and one-line
 * failures for a missing gnuplot, a foreign results file and a refit that
 * is not in the trace; the trend over several files and the base-against-
 * new figure; and the documented schema read back with h5py. The figure
 * checks are skipped when gnuplot is absent, the h5py check when Debian's
 * python3-h5py is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "dcr/trace.h"
#include "reports/report.h"
#include "reports/results_read.h"
#include "reports/trace_io.h"
#include "workloads/harness/results.h"

#define NREF 5
#define S    1000000000ull /* ns per second */

static char dir[128], results[160], trace[160];

static void append(const char *path, const char *config, const double *lat, double payload,
                   double ckpt)
{
    double cols[DCR_RESULTS_NCOLUMNS][NREF];
    for (int i = 0; i < NREF; i++) {
        cols[0][i] = lat[i];
        cols[1][i] = payload;
        cols[2][i] = 3 * payload;
        cols[3][i] = payload / 2;
        cols[4][i] = payload / 4;
        cols[5][i] = 1;
        cols[6][i] = 0.1;
        cols[7][i] = 0.4;
        cols[8][i] = 0.05;
    }
    dcr_results_column_t c[DCR_RESULTS_NCOLUMNS];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        c[k] = (dcr_results_column_t){dcr_results_column_names[k], cols[k]};
    char summary[128];
    snprintf(summary, sizeof(summary), "{\"checkpoint_bytes\":%.0f,\"reference_s\":2.0}", ckpt);
    dcr_results_run_t run = {"bench", config, summary, NREF, DCR_RESULTS_NCOLUMNS,
                             c,       0,      NULL,    NULL};
    char name[64];
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
}

static void make_results(void)
{
    static const char *fmt =
        "{\"model\":\"toy_model\",\"scale\":%d,\"layers\":2,\"transport\":\"%s\","
        "\"changes\":\"uniform\",\"change_rate\":%g,\"lr\":1e-6,\"mode\":\"%s\","
        "\"rl\":\"sync\",\"seed\":42,\"refits\":5}";
    static const double lat[NREF] = {5, 1, 4, 2, 3}; /* median 3, min 1, max 5 */
    static const double fast[NREF] = {0.5, 0.25, 1, 0.5, 0.75};
    const char *transports[2] = {"objstore", "relay"};
    double rates[2] = {0.01, 0.03};
    char cfg[512];
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 2; r++)
            for (int sc = 0; sc < 2; sc++) {
                snprintf(cfg, sizeof(cfg), fmt, sc ? 16 : 64, transports[t], rates[r], "X");
                append(results, cfg, sc ? lat : fast, 1e6 * (r + 1) * (sc ? 4 : 1), sc ? 4e8 : 1e8);
            }
    snprintf(cfg, sizeof(cfg), fmt, 16, "objstore", 0.03, "F");
    append(results, cfg, lat, 9e6, 4e8);
}

static dcr_trace_interval_t iv(uint32_t refit, dcr_stage_t stage, dcr_actor_t actor, int id,
                               double a, double b)
{
    return (dcr_trace_interval_t){(uint64_t)(a * S), (uint64_t)(b * S), refit,
                                  (uint16_t)stage,   (uint16_t)actor,   id};
}

/* Refit 1 (latency 1 s): construction bound 0.3 s (owner 1), transport bound
 * 0.6 s (endpoint 1), finalization 2.0 - 1.8 = 0.2 s, remainder
 * 1 - (0.6 + 0.2) = 0.2 s. Refits 2 and 3 are bare windows of 3 s and 2 s, so
 * the median latency is refit 3's. */
static void make_trace(void)
{
    /* Not in start order: the bounds must not depend on the file's order. */
    dcr_trace_interval_t v[] = {
        iv(3, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 7.0, 9.0),
        iv(1, DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, 0, 1.95, 2.0),
        iv(1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 1.0, 2.0),
        iv(1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0, 1.0, 1.2),
        iv(1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 1, 1.0, 1.3),
        iv(1, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0, 1.2, 1.7),
        iv(1, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 1, 1.3, 1.9),
        iv(1, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0, 1.5, 1.8),
        iv(1, DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0, 1.9, 1.95),
        iv(2, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 3.0, 6.0),
    };
    assert_int_equal(dcr_trace_write_chrome(trace, v, sizeof(v) / sizeof(v[0])), DCR_OK);
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/dcr-report-%d", (int)getpid());
    snprintf(results, sizeof(results), "%s.h5", dir);
    snprintf(trace, sizeof(trace), "%s.json", dir);
    unlink(results);
    make_results();
    make_trace();
    return 0;
}

/* Each test starts without the output folder. */
static int remove_dir(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static int teardown(void **state)
{
    remove_dir(state);
    unlink(results);
    unlink(trace);
    return 0;
}

static char *slurp(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s was not written", path);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!n) fail_msg("%s is empty", path);
    return buf;
}

static void expect_in(const char *text, const char *needle)
{
    if (!strstr(text, needle)) fail_msg("report.md lacks '%s' in:\n%s", needle, text);
}

static bool have_gnuplot(void)
{
    char buf[4096];
    return dcr_report_find_gnuplot(NULL, buf, sizeof(buf)) == DCR_OK;
}

static void expect_ok(const dcr_report_opts_t *o)
{
    dcr_status_t st = dcr_report_write(o);
    if (st != DCR_OK) fail_msg("dcr report: %s", dcr_error_line(st));
}

static void test_report_files_and_tables(void **state)
{
    if (!have_gnuplot()) skip();
    dcr_report_opts_t o = {
        .results_path = results, .out_dir = dir, .trace_path = trace, .refit = -1};
    expect_ok(&o);
    static const char *figs[] = {"fig10_latency", "payload_vs_rate", "timeline"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s.png", figs[i]);
        assert_memory_equal(slurp(name), "\x89PNG", 4);
        snprintf(name, sizeof(name), "%s.svg", figs[i]);
        assert_non_null(strstr(slurp(name), "<svg"));
        snprintf(name, sizeof(name), "%s.gp", figs[i]);
        slurp(name);
    }
    const char *md = slurp("report.md");
    expect_in(md, "9 runs in 9 configurations");
    expect_in(md, "![refit latency and speedup vs checkpoint size](fig10_latency.png)");
    expect_in(md, "![payload bytes vs change rate](payload_vs_rate.png)");
    expect_in(md, "![timeline of one refit](timeline.png)");
    /* Scale 16 runs: latencies {5,1,4,2,3} -> median 3 [1, 5]; reference 2 s -> speedup 2/3. */
    expect_in(md, "| toy_model s16 l2, relay, 3% uniform, X, sync | 400 | 1 | 5 | 3 [1, 5] | 2 | "
                  "0.667x | 5 of 5 |");
    /* Scale 64: {0.5,0.25,1,0.5,0.75} -> median 0.5, speedup 4. */
    expect_in(md, "| 0.5 [0.25, 1] | 2 | 4x |");
    /* Payload 2 x 4 = 8 MB at 3% (scale 16): raw 4 MB, cross 24 MB, 2e6 changed
     * elements, payload/raw 2, payload/checkpoint 8e6 / 4e8 = 0.02. */
    expect_in(md,
              "| toy_model s16 l2, objstore, 3% uniform, X, sync | 400 | 3% | 2000000 | 4 [4, 4] "
              "| 8 [8, 8] | 24 [24, 24] | 2.000 | 0.0200 |");
    /* Table 2 analog: modes X and F of the same workload side by side (F: 9 MB, raw 4.5 MB). */
    expect_in(md, "| mode X | mode F |");
    expect_in(md, "| 3% uniform | 8 (2.000) | 9 (2.000) |");
    /* Bounds table: latency mean 3 / (max(0.1, 0.4) + 0.05) = 6.667. */
    expect_in(md, "| 6.667 |");
    /* The default timeline refit is the one of median latency: refit 3. */
    expect_in(md, "## Timeline of refit 3");
    remove_dir(state);

    o.refit = 1;
    expect_ok(&o);
    md = slurp("report.md");
    expect_in(md, "## Timeline of refit 1");
    expect_in(md, "| 1 | 0.3 | 1 | 0.6 | 1 | 0.2 | 0.2 |");
    /* Seven stage intervals of refit 1 fall in its window, none of the other refits'. */
    const char *dat = slurp("data/timeline.dat");
    int lines = 0;
    for (const char *p = dat; *p; p++)
        if ((p == dat || p[-1] == '\n') && *p >= '0' && *p <= '9') lines++;
    assert_int_equal(lines, 7);
}

/* Lines of text that start with prefix. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; *p; p++)
        if ((p == text || p[-1] == '\n') && !strncmp(p, prefix, len)) n++;
    return n;
}

/* Runs that differ only in their seed are a series each in both figures:
 * 70 of them (once there was room for 64, and the rest went silently) give
 * 70 series of one point each. */
static void test_report_many_series(void **state)
{
    if (!have_gnuplot()) skip();
    enum { NSERIES = 70 };
    char many[192];
    snprintf(many, sizeof(many), "%s-many.h5", dir);
    unlink(many);
    static const double lat[NREF] = {5, 1, 4, 2, 3};
    for (int k = 0; k < NSERIES; k++) {
        char cfg[512];
        snprintf(cfg, sizeof(cfg),
                 "{\"model\":\"toy_model\",\"scale\":16,\"layers\":2,\"transport\":"
                 "\"relay\",\"changes\":\"uniform\",\"change_rate\":0.01,\"lr\":1e-6,"
                 "\"mode\":\"X\",\"rl\":\"sync\",\"seed\":%d,\"refits\":5}",
                 k + 1);
        append(many, cfg, lat, 1e6, 4e8);
    }
    dcr_report_opts_t o = {.results_path = many, .out_dir = dir, .refit = -1};
    expect_ok(&o);
    const char *dat = slurp("data/fig10_latency.dat");
    assert_int_equal(count_lines(dat, "# series "), NSERIES);
    assert_int_equal(count_lines(dat, "400 "), NSERIES); /* one point each, at 400 MB */
    dat = slurp("data/payload_vs_rate.dat");
    assert_int_equal(count_lines(dat, "# series "), NSERIES);
    assert_int_equal(count_lines(dat, "1 "), NSERIES); /* one point each, at 1% */
    const char *gp = slurp("payload_vs_rate.body.gp");
    char last[64];
    snprintf(last, sizeof(last), "index %d ", NSERIES - 1);
    assert_non_null(strstr(gp, last));
    unlink(many);
}

/* Replaces a run's string attribute (the machine of a run written elsewhere). */
static void set_machine(const char *path, const char *run, const char *value)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t g = H5Gopen2(f, run, H5P_DEFAULT);
    H5Adelete(g, "machine");
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, "machine", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, value);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Gclose(g);
    H5Fclose(f);
}

static const char *const trend_cfg =
    "{\"model\":\"toy_model\",\"scale\":16,\"layers\":2,\"transport\":\"relay\",\"changes\":"
    "\"uniform\",\"change_rate\":0.03,\"lr\":1e-6,\"mode\":\"X\",\"rl\":\"sync\",\"refits\":5}";

/* Two files, five runs of one configuration with latencies {5,1,4,2,3} x k
 * (median 3k), k = 1, 2, 3 in the first file and 4, 5 in the second, plus
 * one run of the same configuration on another machine: the trend has two
 * series (five points with medians 3, 6, 9, 12, 15 in time order, and one),
 * with distinct labels; --base draws the second file against the first. */
static void test_report_trend_and_base(void **state)
{
    if (!have_gnuplot()) skip();
    char first[192], second[192];
    snprintf(first, sizeof(first), "%s-t1.h5", dir);
    snprintf(second, sizeof(second), "%s-t2.h5", dir);
    unlink(first);
    unlink(second);
    for (int k = 1; k <= 5; k++) {
        double lat[NREF] = {5.0 * k, 1.0 * k, 4.0 * k, 2.0 * k, 3.0 * k};
        append(k <= 3 ? first : second, trend_cfg, lat, 1e6, 4e8);
    }
    double lat[NREF] = {5, 1, 4, 2, 3};
    append(second, trend_cfg, lat, 1e6, 4e8);
    set_machine(second, "/runs/000002", "another machine");
    const char *more[1] = {second};
    dcr_report_opts_t o = {.results_path = first,
                           .more_paths = more,
                           .nmore = 1,
                           .base_path = second,
                           .out_dir = dir,
                           .refit = -1};
    expect_ok(&o);
    assert_memory_equal(slurp("trend.png"), "\x89PNG", 4);
    assert_memory_equal(slurp("base_vs_new.png"), "\x89PNG", 4);
    const char *dat = slurp("data/trend.dat");
    assert_int_equal(count_lines(dat, "# series "), 2);
    /* The first series: order k-1 and median 3k first on each row. */
    for (int k = 1; k <= 5; k++) {
        char row[64];
        snprintf(row, sizeof(row), "%d %d ", k - 1, 3 * k);
        if (!strstr(dat, row)) fail_msg("trend.dat lacks '%s' in\n%s", row, dat);
    }
    const char *gp = slurp("trend.body.gp");
    assert_non_null(strstr(gp, " on another machine"));
    /* The seed's figure keeps the two machines apart too, under two names. */
    gp = slurp("fig10_latency.body.gp");
    assert_non_null(strstr(gp, " on another machine'"));
    assert_non_null(strstr(gp, " on Linux"));
    const char *md = slurp("report.md");
    expect_in(md, "## Trend over runs");
    expect_in(md, "## BASE against NEW");
    expect_in(md, "![base against new](base_vs_new.png)");
    unlink(first);
    unlink(second);
}

/* The schema table of docs/formats/results.md, read with h5py: every object
 * it lists exists in a file dcr writes, with the documented kind. */
static void test_results_readable_by_h5py(void **state)
{
    if (system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) skip();
    char h5[192], py[192], doc[512];
    snprintf(h5, sizeof(h5), "%s-h5py.h5", dir);
    snprintf(py, sizeof(py), "%s-h5py.py", dir);
    snprintf(doc, sizeof(doc), "%s/docs/formats/results.md", DCR_SOURCE_DIR);
    unlink(h5);
    /* A run with every column, the block column of an A/B side (the
     * schema lists it too) and an intervals table. */
    enum { NCOLS = DCR_RESULTS_NCOLUMNS + 1 };
    double cols[NCOLS][NREF];
    for (int k = 0; k < NCOLS; k++)
        for (int i = 0; i < NREF; i++) cols[k][i] = k == 5 ? 1 : 0.5 * (i + 1);
    dcr_results_column_t c[NCOLS];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        c[k] = (dcr_results_column_t){dcr_results_column_names[k], cols[k]};
    c[DCR_RESULTS_NCOLUMNS] = (dcr_results_column_t){DCR_RESULTS_BLOCK, cols[DCR_RESULTS_NCOLUMNS]};
    int64_t intervals[3][6] = {{0, 10, 0, 0, 0, 0}, {5, 20, 0, 5, 1, 0}, {20, 30, 1, 7, 2, 1}};
    dcr_results_run_t run = {"bench", trend_cfg, "{\"reference_s\":2.0}",        NREF, NCOLS,
                             c,       3,         (const int64_t(*)[6])intervals, NULL};
    char name[64];
    assert_int_equal(dcr_results_append(h5, &run, name, sizeof(name)), DCR_OK);
    FILE *f = fopen(py, "w");
    assert_non_null(f);
    /* The script parses the table itself, so that a row added to the docs
     * without the object in the file fails here. */
    fprintf(
        f,
        "import re, sys, json, h5py\n"
        "doc = open(sys.argv[1]).read().split('<!-- schema')[1].split('\\n\\n')[0]\n"
        "rows = [l for l in doc.splitlines() if l.startswith('| `')]\n"
        "f = h5py.File(sys.argv[2], 'r')\n"
        "n = 0\n"
        "for l in rows:\n"
        "    cells = [x.strip() for x in l.strip('|').split('|')]\n"
        "    m = re.match(r'`([^`]+)`(?: attribute `([^`]+)`)?$', cells[0])\n"
        "    path, attr = m.group(1).replace('NNNNNN', '000000'), m.group(2)\n"
        "    kind = cells[1]\n"
        "    if attr:\n"
        "        v = f[path].attrs[attr]\n"
        "        if 'JSON' in kind: assert isinstance(json.loads(v), dict), (path, attr)\n"
        "        elif kind.startswith('string'): assert isinstance(v, (str, bytes)), (path, attr)\n"
        "        else: assert int(v) == 1, (path, attr)\n"
        "    elif kind == 'group':\n"
        "        assert isinstance(f[path], h5py.Group), path\n"
        "    else:\n"
        "        d = f[path][()]\n"
        "        if kind.startswith('float64'):\n"
        "            assert d.dtype == 'float64' and d.shape == (%d,), (path, d.dtype, d.shape)\n"
        "        else:\n"
        "            assert d.dtype == 'int64' and d.shape == (3, 6), (path, d.dtype, d.shape)\n"
        "    n += 1\n"
        "print('objects', n)\n",
        NREF);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %s 2>&1", py, doc, h5);
    FILE *p = popen(cmd, "r");
    char out[4096] = "";
    size_t got = fread(out, 1, sizeof(out) - 1, p);
    out[got] = 0;
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("h5py: %s", out);
    /* 1 root attribute, the group, 6 attributes, 9 columns, block, intervals. */
    assert_string_equal(out, "objects 19\n");
    unlink(h5);
    unlink(py);
}

static void test_report_failures(void **state)
{
    dcr_report_opts_t o = {
        .results_path = results, .out_dir = dir, .refit = -1, .gnuplot = "/nonexistent/gnuplot"};
    dcr_status_t st = dcr_report_write(&o);
    assert_int_equal(st, DCR_EUNSUPPORTED);
    assert_non_null(strstr(dcr_error_line(st), "gnuplot not found"));
    struct stat sb;
    assert_int_not_equal(stat(dir, &sb), 0); /* nothing written */
    if (!have_gnuplot()) return;
    o.gnuplot = NULL;
    o.results_path = trace; /* JSON, not HDF5 */
    st = dcr_report_write(&o);
    if (st != DCR_EPARSE) fail_msg("%s", dcr_error_line(st));
    assert_non_null(strstr(dcr_error_line(st), "not an HDF5 file"));
    o.results_path = results;
    o.trace_path = trace;
    o.refit = 9;
    st = dcr_report_write(&o);
    assert_int_equal(st, DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_line(st), "no refit 9"));
}

static void test_cli(void **state)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli || !have_gnuplot()) skip();
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s report %s -o %s --trace %s >/dev/null 2>&1", cli, results, dir,
             trace);
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    slurp("timeline.png");
    snprintf(cmd, sizeof(cmd),
             "DCR_GNUPLOT=/nonexistent/gp %s report %s -o %s 2>&1 >/dev/null | grep -c gnuplot",
             cli, results, dir);
    FILE *p = popen(cmd, "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof(line), p));
    pclose(p);
    assert_string_equal(line, "1\n"); /* one clear line */
    snprintf(cmd, sizeof(cmd), "%s report %s >/dev/null 2>&1", cli, results);
    status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    /* --threshold without --base: usage; an unreadable results file: 4. */
    snprintf(cmd, sizeof(cmd), "%s report %s -o %s --threshold 5 >/dev/null 2>&1", cli, results,
             dir);
    status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
    snprintf(cmd, sizeof(cmd), "%s report %s /nonexistent/more.h5 -o %s >/dev/null 2>&1", cli,
             results, dir);
    status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_report_files_and_tables, remove_dir),
        cmocka_unit_test_teardown(test_report_many_series, remove_dir),
        cmocka_unit_test_teardown(test_report_trend_and_base, remove_dir),
        cmocka_unit_test_teardown(test_results_readable_by_h5py, remove_dir),
        cmocka_unit_test_teardown(test_report_failures, remove_dir),
        cmocka_unit_test_teardown(test_cli, remove_dir),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
