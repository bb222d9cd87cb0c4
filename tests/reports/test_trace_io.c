/* ctest-labels: unit */
/* Trace files: the Chrome trace round trip is exact to the nanosecond and
 * opens as the Chrome format expects (complete events, microsecond ts/dur,
 * named processes); malformed files are rejected with one error naming the
 * file; an Nsight Systems SQLite export built here with the documented schema
 * reads back the ranges of domain "dcr" only, with the refit window inferred;
 * and `dcr bounds` prints the bounds of such traces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testfiles.h"

#include "dcr/rng.h"
#include "dcr/trace.h"
#include "reports/trace_io.h"

static char dir[256];

static int make_dir(void **state)
{
    (void)state;
    return testfiles_tmpdir(dir, sizeof(dir), "trace-io") ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    return testfiles_rmtree(dir);
}

static const char *tmp_path(const char *name)
{
    static char path[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/%s", dir, name);
    return path[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Field by field: the struct has padding that memcmp would compare. */
static void assert_intervals_equal(const dcr_trace_interval_t *a, const dcr_trace_interval_t *b,
                                   size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].start_ns != b[i].start_ns || a[i].end_ns != b[i].end_ns ||
            a[i].refit != b[i].refit || a[i].stage != b[i].stage || a[i].actor != b[i].actor ||
            a[i].id != b[i].id)
            fail_msg("interval %zu differs: [%llu, %llu] refit %u stage %u actor %u id %d vs "
                     "[%llu, %llu] refit %u stage %u actor %u id %d",
                     i, (unsigned long long)a[i].start_ns, (unsigned long long)a[i].end_ns,
                     a[i].refit, a[i].stage, a[i].actor, a[i].id, (unsigned long long)b[i].start_ns,
                     (unsigned long long)b[i].end_ns, b[i].refit, b[i].stage, b[i].actor, b[i].id);
}

/* ---- Chrome ---- */

static void random_intervals(dcr_rng_t *rng, dcr_trace_interval_t *iv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* Large absolute times (a monotonic clock after months of uptime),
         * odd nanoseconds, and every stage, actor and sign of id. */
        uint64_t s = (1ull << 52) + dcr_rng_below(rng, 1ull << 40);
        uint64_t e = s + (i % 7 ? dcr_rng_below(rng, 1ull << 34) : 0);
        iv[i] = (dcr_trace_interval_t){s,
                                       e,
                                       (uint32_t)dcr_rng_u64(rng),
                                       (uint16_t)(i % DCR_STAGE_COUNT),
                                       (uint16_t)(i % DCR_ACTOR_COUNT),
                                       (int32_t)dcr_rng_u64(rng)};
    }
    iv[0].refit = UINT32_MAX;
    iv[1].id = INT32_MIN;
    iv[2].id = INT32_MAX;
}

static void test_chrome_round_trip(void **state)
{
    (void)state;
    enum { N = 300 };
    dcr_trace_interval_t iv[N];
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 0xc0ffee);
    random_intervals(&rng, iv, N);
    const char *path = tmp_path("round.json");
    assert_int_equal(dcr_trace_write_chrome(path, iv, N), DCR_OK);
    dcr_trace_interval_t *back = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_read_chrome(path, &back, &n), DCR_OK);
    assert_int_equal(n, N);
    assert_intervals_equal(back, iv, N);
    free(back);
    assert_int_equal(access(tmp_path("round.json.tmp"), F_OK), -1);

    /* No intervals: a valid trace that reads back empty. */
    assert_int_equal(dcr_trace_write_chrome(path, NULL, 0), DCR_OK);
    back = (dcr_trace_interval_t *)&back;
    n = 7;
    assert_int_equal(dcr_trace_read_chrome(path, &back, &n), DCR_OK);
    assert_int_equal(n, 0);
    assert_null(back);
}

/* What a viewer sees: complete events with ts/dur in microseconds from the
 * earliest start, and processes named for the actor kinds. */
static void test_chrome_format(void **state)
{
    (void)state;
    const dcr_trace_interval_t iv[] = {
        {5000001234, 5000003235, 3, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 2},
        {5000000000, 5000000999, 3, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0},
    };
    const char *path = tmp_path("format.json");
    assert_int_equal(dcr_trace_write_chrome(path, iv, 2), DCR_OK);
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) fail_msg("not JSON: %s", err.text);
    json_t *events = json_object_get(root, "traceEvents");
    assert_true(json_is_array(events));
    int x = 0, names = 0;
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *e = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        assert_non_null(ph);
        assert_non_null(name);
        if (!strcmp(ph, "M") && !strcmp(name, "process_name")) {
            const char *pname =
                json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            names += pname && (!strcmp(pname, "owner") || !strcmp(pname, "endpoint"));
            continue;
        }
        if (strcmp(ph, "X")) continue;
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        if (x++ == 0) {
            assert_string_equal(name, "send");
            assert_true(fabs(ts - 1.234) < 1e-9 && fabs(dur - 2.001) < 1e-9);
        } else {
            assert_string_equal(name, "compare");
            assert_true(fabs(ts) < 1e-12 && fabs(dur - 0.999) < 1e-9);
        }
        assert_true(json_is_integer(json_object_get(e, "pid")));
        assert_true(json_is_integer(json_object_get(e, "tid")));
    }
    assert_int_equal(x, 2);
    assert_int_equal(names, 2);
    json_decref(root);
}

/* One malformed file: rejected with DCR_EPARSE, the path in the detail, and
 * the outputs untouched. */
static void expect_rejected(const char *text, const char *needle)
{
    const char *path = tmp_path("bad.json");
    write_text(path, text);
    dcr_trace_interval_t *iv = (dcr_trace_interval_t *)&iv;
    size_t n = 42;
    dcr_status_t s = dcr_trace_read_chrome(path, &iv, &n);
    if (s != DCR_EPARSE) fail_msg("accepted (%d): %s", s, text);
    assert_ptr_equal(iv, (dcr_trace_interval_t *)&iv);
    assert_int_equal(n, 42);
    const char *detail = dcr_error_detail();
    if (!strstr(detail, path) || !strstr(detail, needle))
        fail_msg("detail '%s' lacks the path or '%s'", detail, needle);
    assert_null(strchr(detail, '\n'));
}

#define ARGS(refit, stage, actor, id, s, e)                                                        \
    "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"dcr\",\"name\":\"x\",\"args\":{\"refit\":" refit    \
    ",\"stage\":" stage ",\"actor\":" actor ",\"id\":" id ",\"start_ns\":" s ",\"end_ns\":" e      \
    "}}]}"

static void test_chrome_rejects_malformed(void **state)
{
    (void)state;
    expect_rejected("", "not a JSON trace");
    expect_rejected("{\"traceEvents\":[", "not a JSON trace");
    expect_rejected("{\"traceEvents\":[],\"traceEvents\":[]}", "not a JSON trace");
    expect_rejected("{\"events\":[]}", "traceEvents");
    expect_rejected("{\"traceEvents\":{}}", "traceEvents");
    expect_rejected("[1]", "event 0 is not an object");
    expect_rejected("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"dcr\"}]}", "args");
    expect_rejected(ARGS("-1", "\"send\"", "\"owner\"", "1", "1", "2"), "refit");
    expect_rejected(ARGS("4294967296", "\"send\"", "\"owner\"", "1", "1", "2"), "refit");
    expect_rejected(ARGS("1.5", "\"send\"", "\"owner\"", "1", "1", "2"), "refit");
    expect_rejected(ARGS("1", "\"shipping\"", "\"owner\"", "1", "1", "2"), "stage");
    expect_rejected(ARGS("1", "3", "\"owner\"", "1", "1", "2"), "stage");
    expect_rejected(ARGS("1", "\"send\"", "\"boss\"", "1", "1", "2"), "actor");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "2147483648", "1", "2"), "id");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "\"1\"", "1", "2"), "id");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "1", "-1", "2"), "start_ns");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "1", "1.0", "2"), "start_ns");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "1", "1", "\"2\""), "end_ns");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "1", "5", "4"), "before start_ns");
    expect_rejected(ARGS("1", "\"send\"", "\"owner\"", "1", "1", "99999999999999999999"),
                    "not a JSON trace");

    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_read_chrome(tmp_path("missing.json"), &iv, &n), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "missing.json"));
}

/* Events from other tools merged into the file, and the array form. */
static void test_chrome_skips_foreign_events(void **state)
{
    (void)state;
    const char *path = tmp_path("merged.json");
    write_text(path,
               "[{\"ph\":\"B\",\"name\":\"a\",\"ts\":1},{\"ph\":\"X\",\"cat\":\"torch\",\"ts\":1},"
               "{\"ph\":\"X\",\"cat\":\"dcr\",\"args\":{\"refit\":2,\"stage\":\"apply\","
               "\"actor\":\"receiver\",\"id\":1,\"start_ns\":10,\"end_ns\":30}}]");
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_read_chrome(path, &iv, &n), DCR_OK);
    assert_int_equal(n, 1);
    const dcr_trace_interval_t want = {10, 30, 2, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 1};
    assert_intervals_equal(&iv[0], &want, 1);
    free(iv);
}

static void test_chrome_write_refuses(void **state)
{
    (void)state;
    dcr_trace_interval_t bad = {5, 4, 0, DCR_STAGE_SEND, DCR_ACTOR_OWNER, 0};
    assert_int_equal(dcr_trace_write_chrome(tmp_path("w.json"), &bad, 1), DCR_EINVAL);
    bad = (dcr_trace_interval_t){1, 2, 0, DCR_STAGE_COUNT, DCR_ACTOR_OWNER, 0};
    assert_int_equal(dcr_trace_write_chrome(tmp_path("w.json"), &bad, 1), DCR_EINVAL);
    assert_int_equal(access(tmp_path("w.json"), F_OK), -1);
    bad.stage = DCR_STAGE_SEND;
    assert_int_equal(dcr_trace_write_chrome(tmp_path("no/such/dir/w.json"), &bad, 1), DCR_EIO);
}

/* The recorder's snapshot through a file gives the same bounds. */
static void test_recorder_to_file(void **state)
{
    (void)state;
    dcr_trace_reset();
    dcr_trace_enable(true);
    dcr_trace_set_refit(4);
    dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, 100, 900);
    dcr_trace_record(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 1, 150, 450);
    dcr_trace_record(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 1, 300, 600);
    dcr_trace_record(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0, 500, 700);
    dcr_trace_span_t sp = dcr_trace_begin(DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 2);
    dcr_trace_end(&sp);
    dcr_trace_enable(false);
    dcr_trace_interval_t *iv = NULL, *back = NULL;
    size_t n = 0, nb = 0;
    assert_int_equal(dcr_trace_snapshot(&iv, &n), DCR_OK);
    assert_int_equal(n, 5);
    const char *path = tmp_path("recorded.json");
    assert_int_equal(dcr_trace_write_chrome(path, iv, n), DCR_OK);
    assert_int_equal(dcr_trace_read_chrome(path, &back, &nb), DCR_OK);
    assert_int_equal(nb, n);
    assert_intervals_equal(back, iv, n);
    dcr_bounds_t a, b;
    assert_int_equal(dcr_bounds_compute(iv, n, 4, &a), DCR_OK);
    assert_int_equal(dcr_bounds_compute(back, nb, 4, &b), DCR_OK);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_true(fabs(a.construction_lb_s - 300e-9) < 1e-15);
    free(iv);
    free(back);
    dcr_trace_reset();
}

/* ---- Nsight Systems ---- */

/* The NVTX_EVENTS and StringIds tables as the Nsight Systems export
 * documentation gives them (a subset of the columns would do; all are here
 * so that the reader is tested against the real shape). */
static const char *nsys_schema =
    "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,"
    " rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,"
    " endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds(id), domainId INTEGER,"
    " uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,"
    " int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);";

/* globalTid of thread tid in process pid, as nsys serializes it. */
#define GTID(pid, tid) ((1ll << 56) | ((long long)(pid) << 24) | (tid))

static void sql(sqlite3 *db, const char *text)
{
    char *err = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", text, err);
}

static void nvtx_row(sqlite3 *db, long long start, const char *end, int type, const char *text,
                     long long gtid, const char *text_id, int domain)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) "
             "VALUES (%lld, %s, %d, %s%s%s, %lld, %s, %d);",
             start, end, type, text ? "'" : "", text ? text : "NULL", text ? "'" : "", gtid,
             text_id, domain);
    sql(db, buf);
}

/* A small export: process 100 registers "dcr" as domain 1 and "other" as
 * domain 2; process 200 has its own domain 1 named "torch". Only the first
 * domain's closed ranges belong to dcr. */
static const char *build_nsys(const char *name, const char *bad_message)
{
    const char *path = tmp_path(name);
    unlink(path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sql(db, nsys_schema);
    sql(db, "INSERT INTO StringIds VALUES (1, 'zstd owner=1 refit=3'), (2, 'unrelated');");
    long long p = GTID(100, 100), q = GTID(100, 101), other = GTID(200, 200);
    nvtx_row(db, 5, "NULL", 75, "dcr", p, "NULL", 1);
    nvtx_row(db, 6, "NULL", 75, "other", p, "NULL", 2);
    nvtx_row(db, 7, "NULL", 75, "torch", other, "NULL", 1);
    nvtx_row(db, 1000, "1400", 59, "compare owner=0 refit=3", p, "NULL", 1);
    nvtx_row(db, 1100, "1300", 59, "compare owner=1 refit=3", q, "NULL", 1);
    nvtx_row(db, 1300, "1500", 59, NULL, q, "1", 1); /* registered string */
    nvtx_row(db, 1450, "1700", 60, "send endpoint=0 refit=3", q, "NULL", 1);
    nvtx_row(db, 1800, "1900", 70, "apply receiver=2 refit=3", p, "NULL", 1);
    nvtx_row(db, 1950, "2100", 71, "baseline owner=0 refit=3", p, "NULL", 1);
    nvtx_row(db, 1960, "2050", 59, "baseline owner=1 refit=3", q, "NULL", 1);
    /* Not dcr's: other domains, the default domain, a mark, an open range. */
    nvtx_row(db, 1000, "5000", 59, "compare owner=7 refit=3", p, "NULL", 2);
    nvtx_row(db, 1000, "5000", 59, "compare owner=8 refit=3", other, "NULL", 1);
    nvtx_row(db, 1000, "5000", 59, "compare owner=9 refit=3", p, "NULL", 0);
    nvtx_row(db, 1000, "NULL", 34, "compare owner=9 refit=3", p, "NULL", 1);
    nvtx_row(db, 3000, "NULL", 59, "compare owner=0 refit=4", p, "NULL", 1);
    if (bad_message) nvtx_row(db, 2500, "2600", 59, bad_message, p, "NULL", 1);
    sqlite3_close(db);
    return path;
}

static void test_nsys_import(void **state)
{
    (void)state;
    const char *path = build_nsys("nsys.sqlite", NULL);
    assert_true(dcr_trace_file_is_sqlite(path));
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_read_nsys(path, &iv, &n), DCR_OK);
    const dcr_trace_interval_t want[] = {
        {1000, 1400, 3, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0},
        {1100, 1300, 3, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 1},
        {1300, 1500, 3, DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 1},
        {1450, 1700, 3, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 0},
        {1800, 1900, 3, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 2},
        {1950, 2100, 3, DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, 0},
        {1960, 2050, 3, DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, 1},
        /* Inferred: the first compute start to the last baseline end. */
        {1000, 2100, 3, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0},
    };
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    assert_intervals_equal(iv, want, n);
    /* Owner 1: [1100,1300] + [1300,1500] touch: 400. Endpoint 0: 250.
     * Finalization 2100 - 1900 = 200, latency 1100, remainder 500. */
    dcr_bounds_t b;
    assert_int_equal(dcr_bounds_compute(iv, n, 3, &b), DCR_OK);
    assert_true(fabs(b.construction_lb_s - 400e-9) < 1e-15 && b.busiest_owner == 0);
    assert_true(fabs(b.transport_lb_s - 250e-9) < 1e-15);
    assert_true(fabs(b.finalization_s - 200e-9) < 1e-15);
    assert_true(fabs(b.remainder_s - 500e-9) < 1e-15);
    free(iv);
}

static void expect_nsys_error(const char *path, dcr_status_t want, const char *needle)
{
    dcr_trace_interval_t *iv = (dcr_trace_interval_t *)&iv;
    size_t n = 42;
    dcr_status_t s = dcr_trace_read_nsys(path, &iv, &n);
    if (s != want) fail_msg("%s: got %d, expected %d (%s)", path, s, want, dcr_error_detail());
    assert_ptr_equal(iv, (dcr_trace_interval_t *)&iv);
    assert_int_equal(n, 42);
    const char *detail = dcr_error_detail();
    if (!strstr(detail, path) || !strstr(detail, needle))
        fail_msg("detail '%s' lacks the path or '%s'", detail, needle);
}

static void test_nsys_rejects(void **state)
{
    (void)state;
    expect_nsys_error(build_nsys("bad1.sqlite", "compare owner=x refit=3"), DCR_EPARSE, "at 2500");
    expect_nsys_error(build_nsys("bad2.sqlite", "shipping endpoint=0 refit=3"), DCR_EPARSE,
                      "stage");

    const char *text = tmp_path("text.sqlite");
    write_text(text, "{\"traceEvents\":[]}");
    expect_nsys_error(text, DCR_EPARSE, "not an SQLite database");
    expect_nsys_error(tmp_path("absent.sqlite"), DCR_EIO, "cannot open");
    /* The SQLite magic, then garbage. */
    const char *corrupt = tmp_path("corrupt.sqlite");
    FILE *f = fopen(corrupt, "wb");
    assert_non_null(f);
    fwrite("SQLite format 3", 1, 16, f);
    for (int i = 0; i < 4096; i++) fputc(0xff, f);
    fclose(f);
    expect_nsys_error(corrupt, DCR_EPARSE, "unreadable SQLite database");

    /* SQLite, but not an export: no NVTX_EVENTS, or one without the columns. */
    const char *empty = tmp_path("empty.sqlite");
    unlink(empty);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(empty, &db), SQLITE_OK);
    sql(db, "CREATE TABLE t (x INTEGER);");
    sqlite3_close(db);
    expect_nsys_error(empty, DCR_EPARSE, "no NVTX_EVENTS table");
    const char *narrow = tmp_path("narrow.sqlite");
    unlink(narrow);
    assert_int_equal(sqlite3_open(narrow, &db), SQLITE_OK);
    sql(db, "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, text TEXT);");
    sqlite3_close(db);
    expect_nsys_error(narrow, DCR_EPARSE, "columns");

    /* An export without a "dcr" domain, and one with a range ending early. */
    const char *none = tmp_path("none.sqlite");
    unlink(none);
    assert_int_equal(sqlite3_open(none, &db), SQLITE_OK);
    sql(db, nsys_schema);
    nvtx_row(db, 5, "NULL", 75, "torch", GTID(1, 1), "NULL", 1);
    nvtx_row(db, 10, "20", 59, "compare owner=0 refit=1", GTID(1, 1), "NULL", 1);
    sqlite3_close(db);
    expect_nsys_error(none, DCR_ENOTFOUND, "domain");
    const char *back = tmp_path("back.sqlite");
    unlink(back);
    assert_int_equal(sqlite3_open(back, &db), SQLITE_OK);
    sql(db, nsys_schema);
    nvtx_row(db, 5, "NULL", 75, "dcr", GTID(1, 1), "NULL", 1);
    nvtx_row(db, 30, "20", 59, "compare owner=0 refit=1", GTID(1, 1), "NULL", 1);
    sqlite3_close(db);
    expect_nsys_error(back, DCR_EPARSE, "before it starts");
}

/* ---- dcr bounds ---- */

typedef struct cli_result {
    int rc;
    char out[1 << 14], err[1 << 12];
} cli_result_t;

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
}

static void run_cli(cli_result_t *r, const char *args)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    char cmd[1024], out[128], err[128];
    snprintf(out, sizeof(out), "%s/cli.out", dir);
    snprintf(err, sizeof(err), "%s/cli.err", dir);
    snprintf(cmd, sizeof(cmd), "%s bounds %s >%s 2>%s", cli, args, out, err);
    int status = system(cmd);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    slurp(out, r->out, sizeof(r->out));
    slurp(err, r->err, sizeof(r->err));
}

static double json_num(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_number(v)) fail_msg("no number '%s'", key);
    return json_number_value(v);
}

static void test_cli_bounds(void **state)
{
    (void)state;
    /* Two refits. Refit 1: window [0, 1000], owner 0 computes [100,400],
     * endpoint 2 sends [200,700], apply ends at 800: construction 300,
     * transport 500, finalization 200, remainder 300. Refit 2: window
     * [2000, 2500], owner 1 computes [2000,2100] and [2050,2250] (250),
     * nothing sent or applied: remainder 250. */
    const dcr_trace_interval_t iv[] = {
        {0, 1000, 1, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0},
        {100, 400, 1, DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0},
        {200, 700, 1, DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 2},
        {750, 800, 1, DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0},
        {2000, 2500, 2, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0},
        {2000, 2100, 2, DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, 1},
        {2050, 2250, 2, DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 1},
    };
    const char *path = tmp_path("cli.json");
    assert_int_equal(dcr_trace_write_chrome(path, iv, 7), DCR_OK);
    char args[256];
    snprintf(args, sizeof(args), "%s --json", path);
    static cli_result_t r;
    run_cli(&r, args);
    if (r.rc != 0) fail_msg("dcr bounds failed: %s", r.err);
    json_error_t e;
    json_t *root = json_loads(r.out, 0, &e);
    if (!root) fail_msg("not JSON: %s", e.text);
    json_t *refits = json_object_get(root, "refits"), *means = json_object_get(root, "means");
    assert_int_equal(json_array_size(refits), 2);
    json_t *r1 = json_array_get(refits, 0), *r2 = json_array_get(refits, 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "refit")), 1);
    assert_true(fabs(json_num(r1, "construction_lb_s") - 300e-9) < 1e-15);
    assert_true(fabs(json_num(r1, "transport_lb_s") - 500e-9) < 1e-15);
    assert_true(fabs(json_num(r1, "finalization_s") - 200e-9) < 1e-15);
    assert_true(fabs(json_num(r1, "latency_s") - 1000e-9) < 1e-15);
    assert_true(fabs(json_num(r1, "remainder_s") - 300e-9) < 1e-15);
    assert_int_equal(json_integer_value(json_object_get(r1, "busiest_endpoint")), 2);
    assert_true(fabs(json_num(r2, "construction_lb_s") - 250e-9) < 1e-15);
    assert_int_equal(json_integer_value(json_object_get(r2, "busiest_owner")), 1);
    assert_true(fabs(json_num(means, "construction_lb_s") - 275e-9) < 1e-15);
    assert_true(fabs(json_num(means, "transport_lb_s") - 250e-9) < 1e-15);
    assert_true(fabs(json_num(means, "finalization_s") - 100e-9) < 1e-15);
    assert_true(fabs(json_num(means, "latency_s") - 750e-9) < 1e-15);
    json_decref(root);

    /* The critical path of refit 1 by hand: wait [0,100] from t0, compare
     * [100,200] (back from 700 the send covers to its start, 200, where
     * the compare still runs), send [200,700], wait [700,750], apply
     * [750,800], wait [800,1000] to t1. Refit 2: wait [2250,2500], zstd
     * [2050,2250], encode [2000,2050]. Means over the two refits. */
    snprintf(args, sizeof(args), "%s --json --critical-path", path);
    run_cli(&r, args);
    if (r.rc != 0) fail_msg("dcr bounds --critical-path failed: %s", r.err);
    root = json_loads(r.out, 0, &e);
    if (!root) fail_msg("not JSON: %s", e.text);
    json_t *cp = json_object_get(root, "critical_path");
    assert_true(fabs(json_num(cp, "window_s") - 750e-9) < 1e-15);
    /* waits: refit 1: 100 + 50 + 200 = 350; refit 2: 250; mean 300 */
    assert_true(fabs(json_num(cp, "wait_s") - 300e-9) < 1e-15);
    double sum = 0.0, send = -1.0;
    json_t *rows = json_object_get(cp, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        sum += json_num(row, "mean_s");
        if (!strcmp(json_string_value(json_object_get(row, "segment")), "send endpoint"))
            send = json_num(row, "mean_s");
    }
    assert_true(fabs(sum - 750e-9) < 1e-15);  /* the rows account for the whole window */
    assert_true(fabs(send - 250e-9) < 1e-15); /* 500 in refit 1, none in refit 2 */
    json_decref(root);
    snprintf(args, sizeof(args), "%s --critical-path", path);
    run_cli(&r, args);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "wait apply receiver -> t1"));

    run_cli(&r, path);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "construction_lb_s"));
    assert_non_null(strstr(r.out, "mean"));

    /* An nsys export, detected by its magic or named with --nsys. */
    const char *nsys = build_nsys("cli.sqlite", NULL);
    snprintf(args, sizeof(args), "%s --json", nsys);
    run_cli(&r, args);
    if (r.rc != 0) fail_msg("dcr bounds on nsys failed: %s", r.err);
    root = json_loads(r.out, 0, &e);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "source")), "nsys");
    r1 = json_array_get(json_object_get(root, "refits"), 0);
    assert_true(fabs(json_num(r1, "construction_lb_s") - 400e-9) < 1e-15);
    json_decref(root);

    /* Failures: one line on stderr, exit 1 for bad files, 2 for usage. */
    const char *bad = tmp_path("cli-bad.json");
    write_text(bad, "{\"traceEvents\": 3}");
    run_cli(&r, bad);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "cli-bad.json"));
    size_t len = strlen(r.err);
    assert_true(len > 0 && r.err[len - 1] == '\n');
    assert_null(memchr(r.err, '\n', len - 1)); /* one line */
    snprintf(args, sizeof(args), "%s --nsys", path);
    run_cli(&r, args);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "not an SQLite database"));
    const char *empty = tmp_path("cli-empty.json");
    assert_int_equal(dcr_trace_write_chrome(empty, NULL, 0), DCR_OK);
    run_cli(&r, empty);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "no refit window"));
    run_cli(&r, "");
    assert_int_equal(r.rc, 2);
    run_cli(&r, "a b");
    assert_int_equal(r.rc, 2);
    run_cli(&r, "--bogus x");
    assert_int_equal(r.rc, 2);
}

/* ---- what a reader refuses to read (issue 32) ---- */

/* Every reader refuses a path that is not a regular file, at once: a FIFO
 * with no writer (an open without O_NONBLOCK would wait for one forever,
 * which the alarm turns into a failure) and a character device that never
 * ends (/dev/zero, read whole, would fill memory). */
static void expect_not_regular(const char *path)
{
    dcr_trace_interval_t *iv = (dcr_trace_interval_t *)&iv;
    size_t n = 42;
    alarm(20);
    assert_int_equal(dcr_trace_read_chrome(path, &iv, &n), DCR_EIO);
    if (!strstr(dcr_error_detail(), "not a regular file"))
        fail_msg("chrome reader on %s: '%s'", path, dcr_error_detail());
    assert_false(dcr_trace_file_is_sqlite(path));
    assert_int_equal(dcr_trace_read_nsys(path, &iv, &n), DCR_EIO);
    if (!strstr(dcr_error_detail(), "not a regular file"))
        fail_msg("nsys reader on %s: '%s'", path, dcr_error_detail());
    alarm(0);
    assert_ptr_equal(iv, (dcr_trace_interval_t *)&iv);
    assert_int_equal(n, 42);
}

static void test_refuses_non_regular_files(void **state)
{
    (void)state;
    const char *fifo = tmp_path("trace.fifo");
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_not_regular(fifo);
    const char *zero = tmp_path("zero.json"); /* a trace path that leads to /dev/zero */
    unlink(zero);
    assert_int_equal(symlink("/dev/zero", zero), 0);
    expect_not_regular(zero);
    expect_not_regular(dir); /* a directory */

    static cli_result_t r;
    alarm(60);
    run_cli(&r, fifo);
    alarm(0);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "not a regular file"));
    unlink(fifo);
    unlink(zero);
}

/* A file over DCR_TRACE_FILE_MAX is refused by its size before anything is
 * mapped (a sparse file: no disk is used). */
static void test_refuses_oversized_file(void **state)
{
    (void)state;
    const char *big = tmp_path("big.json");
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    if (ftruncate(fd, (off_t)(DCR_TRACE_FILE_MAX + 1)) != 0) {
        close(fd);
        unlink(big);
        skip(); /* a file system without sparse files of that size */
    }
    close(fd);
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_read_chrome(big, &iv, &n), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "more than a trace may hold"));
    assert_int_equal(dcr_trace_read_nsys(big, &iv, &n), DCR_EINVAL);
    assert_null(iv);
    unlink(big);
}

/* Writes {"traceEvents":[EVENT]} with a foreign event whose "name" string
 * makes the event exactly event_bytes long, and returns the path. */
static const char *trace_with_event_of(const char *name, size_t event_bytes)
{
    const char *head = "{\"ph\":\"X\",\"cat\":\"other\",\"name\":\"", *tail = "\"}";
    size_t fill = event_bytes - strlen(head) - strlen(tail);
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"traceEvents\":[", f);
    fputs(head, f);
    for (size_t i = 0; i < fill; i++) fputc('a', f);
    fputs(tail, f);
    fputs("]}", f);
    fclose(f);
    return path;
}

/* One event larger than DCR_TRACE_VALUE_MAX is refused, naming the event
 * (before, a 200 MB event cost 655 MB of jansson's tree); one at the cap is
 * read (and skipped: it is not a dcr event), so the cap is exactly where it
 * says. A root value other than traceEvents has the same cap. */
static void test_refuses_oversized_event(void **state)
{
    (void)state;
    dcr_trace_interval_t *iv = NULL;
    size_t n = 7;
    const char *ok = trace_with_event_of("at-cap.json", DCR_TRACE_VALUE_MAX);
    assert_int_equal(dcr_trace_read_chrome(ok, &iv, &n), DCR_OK);
    assert_int_equal(n, 0);
    const char *over = trace_with_event_of("over-cap.json", DCR_TRACE_VALUE_MAX + 1);
    assert_int_equal(dcr_trace_read_chrome(over, &iv, &n), DCR_EPARSE);
    if (!strstr(dcr_error_detail(), "event 0") ||
        !strstr(dcr_error_detail(), "more than one event may hold"))
        fail_msg("detail: %s", dcr_error_detail());

    const char *root = tmp_path("root-value.json");
    FILE *f = fopen(root, "w");
    assert_non_null(f);
    fputs("{\"otherData\":\"", f);
    for (size_t i = 0; i < DCR_TRACE_VALUE_MAX; i++) fputc('b', f);
    fputs("\",\"traceEvents\":[]}", f);
    fclose(f);
    assert_int_equal(dcr_trace_read_chrome(root, &iv, &n), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "outside traceEvents"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chrome_round_trip),
        cmocka_unit_test(test_chrome_format),
        cmocka_unit_test(test_chrome_rejects_malformed),
        cmocka_unit_test(test_chrome_skips_foreign_events),
        cmocka_unit_test(test_chrome_write_refuses),
        cmocka_unit_test(test_recorder_to_file),
        cmocka_unit_test(test_nsys_import),
        cmocka_unit_test(test_nsys_rejects),
        cmocka_unit_test(test_cli_bounds),
        cmocka_unit_test(test_refuses_non_regular_files),
        cmocka_unit_test(test_refuses_oversized_file),
        cmocka_unit_test(test_refuses_oversized_event),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
