/* ctest-labels: unit */
/* The NVTX side of tracing, end to end, with a fake tool attached the way
 * Nsight Systems attaches (NVTX's static injection hook): spans push and pop
 * balanced ranges in domain "dcr" whose messages carry the tags, only while
 * recording is on; cancelled spans pop too; and the ranges the tool saw,
 * stored as an nsys SQLite export stores them, read back through
 * dcr_trace_read_nsys to the recorder's own intervals and bounds. Skipped in
 * builds without the nvtx3 headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/trace.h"

#ifdef DCR_HAVE_NVTX
#include <pthread.h>
#include <sqlite3.h>

#include "reports/trace_io.h"

/* Types only: the NVTX implementation lives in the engine's trace.c. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

/* One range the fake tool saw, timed by the tool's own clock reads. */
typedef struct tool_range {
    uint64_t start, end;
    char msg[96];
    int tid;
} tool_range_t;

#define MAX_RANGES 256
#define MAX_DEPTH  8

static pthread_mutex_t tool_lock = PTHREAD_MUTEX_INITIALIZER;
static tool_range_t ranges[MAX_RANGES];
static int nranges, domains_created, bad_pops;
static char domain_name[32];
static struct nvtxDomainRegistration_st *const fake_domain = (void *)&domain_name;

static _Thread_local int stack[MAX_DEPTH], depth, thread_no;

static nvtxDomainHandle_t NVTX_API fake_domain_create(const char *name)
{
    pthread_mutex_lock(&tool_lock);
    snprintf(domain_name, sizeof(domain_name), "%s", name);
    domains_created++;
    pthread_mutex_unlock(&tool_lock);
    return fake_domain;
}

static int NVTX_API fake_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&tool_lock);
    int k = nranges < MAX_RANGES && d == fake_domain && depth < MAX_DEPTH ? nranges++ : -1;
    if (k >= 0) {
        ranges[k].start = dcr_clock_ns();
        ranges[k].tid = thread_no;
        snprintf(ranges[k].msg, sizeof(ranges[k].msg), "%s",
                 a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?");
        stack[depth++] = k;
    }
    pthread_mutex_unlock(&tool_lock);
    return depth - 1;
}

static int NVTX_API fake_pop(nvtxDomainHandle_t d)
{
    uint64_t now = dcr_clock_ns();
    pthread_mutex_lock(&tool_lock);
    if (d != fake_domain || depth == 0)
        bad_pops++;
    else
        ranges[stack[--depth]].end = now;
    pthread_mutex_unlock(&tool_lock);
    return depth;
}

/* What an NVTX tool does when the loader finds it: fill in the slots it serves. */
static int NVTX_API fake_init(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)fake_domain_create;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)fake_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)fake_pop;
    return 1;
}

/* The strong definition of NVTX's weak static-injection hook. */
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = fake_init;

static void test_ranges_follow_spans(void **state)
{
    (void)state;
    dcr_trace_reset();
    /* Off: no range, and the domain is not even created yet. */
    dcr_trace_span_t off = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0);
    dcr_trace_end(&off);
    assert_int_equal(nranges, 0);

    dcr_trace_enable(true);
    assert_int_equal(domains_created, 1);
    assert_string_equal(domain_name, "dcr");
    dcr_trace_set_refit(7);
    dcr_trace_span_t outer = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, 2);
    dcr_trace_span_t inner = dcr_trace_begin(DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, 3);
    assert_true(inner.nvtx);
    assert_int_equal(depth, 2);
    dcr_trace_end(&inner);
    dcr_trace_span_t gone = dcr_trace_begin(DCR_STAGE_RECV, DCR_ACTOR_NODE, 1);
    dcr_trace_cancel(&gone);
    dcr_trace_end(&outer);
    assert_int_equal(depth, 0);
    assert_int_equal(bad_pops, 0);
    assert_int_equal(nranges, 3);
    assert_string_equal(ranges[0].msg, "send endpoint=2 refit=7");
    assert_string_equal(ranges[1].msg, "zstd owner=3 refit=7");
    assert_string_equal(ranges[2].msg, "recv node=1 refit=7");
    /* The range encloses the recorded interval (push before the first clock
     * read, pop after the last). */
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_snapshot(&iv, &n), DCR_OK);
    assert_int_equal(n, 2); /* the cancelled span is not recorded */
    assert_true(ranges[0].start <= iv[0].start_ns && iv[0].end_ns <= ranges[0].end);
    free(iv);
    dcr_trace_enable(false);
    nranges = 0;
}

/* The ranges the tool saw, as `nsys export --type sqlite` stores them. */
static void write_export(const char *path)
{
    sqlite3 *db = NULL;
    unlink(path);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *err = NULL;
    int rc = sqlite3_exec(db,
                          "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
                          "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER,"
                          " eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,"
                          " color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,"
                          " textId INTEGER, domainId INTEGER);"
                          "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId)"
                          " VALUES (0, 75, 'dcr', 4294967297, 1);",
                          NULL, NULL, &err);
    if (rc != SQLITE_OK) fail_msg("%s", err);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO NVTX_EVENTS (start, end, eventType, text,"
                                        " globalTid, domainId) VALUES (?, ?, 59, ?, ?, 1)",
                                        -1, &st, NULL),
                     SQLITE_OK);
    for (int i = 0; i < nranges; i++) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)ranges[i].start);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)ranges[i].end);
        sqlite3_bind_text(st, 3, ranges[i].msg, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, 4294967296ll + ranges[i].tid); /* pid 256 */
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

typedef struct owner_arg {
    int owner;
} owner_arg_t;

/* One owner: compare then zstd, each a span on this thread. */
static void *owner_work(void *p)
{
    const owner_arg_t *a = p;
    thread_no = a->owner + 1;
    dcr_trace_span_t s = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, a->owner);
    usleep(2000 * (unsigned)(a->owner + 1));
    dcr_trace_end(&s);
    s = dcr_trace_begin(DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, a->owner);
    usleep(1000);
    dcr_trace_end(&s);
    s = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, a->owner);
    usleep(1000);
    dcr_trace_end(&s);
    s = dcr_trace_begin(DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, a->owner);
    dcr_trace_end(&s);
    return NULL;
}

/* The same refit seen by the recorder and through an nsys export of the
 * tool's ranges: the same tags, and bounds that agree to within the time
 * between the tool's and the recorder's clock reads. Each range encloses its
 * interval, so no union or window of the ranges exceeds the recorder's by
 * more than the sum of those enclosures, measured here (a fixed allowance
 * fails when a loaded machine preempts a thread between the two reads). */
static void test_nsys_round_trip(void **state)
{
    (void)state;
    dcr_trace_reset();
    nranges = 0;
    dcr_trace_enable(true);
    dcr_trace_set_refit(3);
    pthread_t th[3];
    owner_arg_t args[3];
    for (int i = 0; i < 3; i++) {
        args[i].owner = i;
        assert_int_equal(pthread_create(&th[i], NULL, owner_work, &args[i]), 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    dcr_trace_span_t apply = dcr_trace_begin(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, 0);
    dcr_trace_end(&apply);
    dcr_trace_enable(false);
    assert_int_equal(bad_pops, 0);
    assert_int_equal(nranges, 13);

    char path[64];
    snprintf(path, sizeof(path), "/tmp/dcr-nvtx-%d.sqlite", (int)getpid());
    write_export(path);
    dcr_trace_interval_t *rec = NULL, *imp = NULL;
    size_t nrec = 0, nimp = 0;
    assert_int_equal(dcr_trace_snapshot(&rec, &nrec), DCR_OK);
    assert_int_equal(dcr_trace_read_nsys(path, &imp, &nimp), DCR_OK);
    unlink(path);
    assert_int_equal(nimp, nrec + 1); /* plus the inferred window */
    uint64_t enclosure_ns = 0;
    for (int i = 0; i < nranges; i++) enclosure_ns += ranges[i].end - ranges[i].start;
    for (size_t i = 0; i < nrec; i++) enclosure_ns -= rec[i].end_ns - rec[i].start_ns;
    /* The recorder's window, inferred the same way, for a like-for-like comparison. */
    assert_int_equal(dcr_trace_infer_windows(&rec, &nrec), DCR_OK);
    dcr_bounds_t a, b;
    assert_int_equal(dcr_bounds_compute(rec, nrec, 3, &a), DCR_OK);
    assert_int_equal(dcr_bounds_compute(imp, nimp, 3, &b), DCR_OK);
    /* The busiest owner is the one whose recorded compute lasted longest.
     * The sleeps make owner 2's the longest on an idle machine, but under
     * load a sleep overruns by more than their differences, so the oracle
     * is the recorded compute itself, summed here (each owner's spans run
     * one after another on its thread: no overlap). The import may pick
     * another owner only when that owner's compute is within the slack. */
    const double slack = (double)enclosure_ns * 1e-9 + 1e-12;
    uint64_t compute_ns[3] = {0, 0, 0};
    for (size_t i = 0; i < nrec; i++)
        if (rec[i].actor == DCR_ACTOR_OWNER && rec[i].id >= 0 && rec[i].id < 3 &&
            (rec[i].stage == DCR_STAGE_COMPARE || rec[i].stage == DCR_STAGE_ZSTD))
            compute_ns[rec[i].id] += rec[i].end_ns - rec[i].start_ns;
    int busiest = 0;
    for (int k = 1; k < 3; k++)
        if (compute_ns[k] > compute_ns[busiest]) busiest = k;
    assert_int_equal(a.busiest_owner, busiest);
    assert_true(b.busiest_owner >= 0 && b.busiest_owner < 3);
    assert_true((double)compute_ns[b.busiest_owner] * 1e-9 >=
                (double)compute_ns[busiest] * 1e-9 - slack);
    assert_true(a.construction_lb_s > 0.005);
    assert_true(b.construction_lb_s >= a.construction_lb_s - 1e-12);
    assert_true(b.construction_lb_s - a.construction_lb_s < slack);
    assert_true(b.transport_lb_s >= a.transport_lb_s - 1e-12);
    assert_true(b.transport_lb_s - a.transport_lb_s < slack);
    assert_true(b.latency_s - a.latency_s < slack && a.latency_s - b.latency_s < slack);
    free(rec);
    free(imp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_follow_spans),
        cmocka_unit_test(test_nsys_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
static void test_no_nvtx(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_nvtx)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
