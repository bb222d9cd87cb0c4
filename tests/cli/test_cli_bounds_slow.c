/* ctest-labels: slow
 *
 * dcr bounds on a generated trace of a million intervals (250 refits of
 * 4000): it must finish within BIG_TRACE_S of CPU time (user + system of the
 * command, which a loaded machine does not stretch the way it stretches wall
 * time: two suites at once on two cores made the wall time fail a fixed
 * limit) with a bounded resident set and the figures the generator implies,
 * and so must its critical path (--critical-path: the compares as work, the
 * rest as waits); and a trace with an interval ending at 2^63 - 1 ns is
 * refused with one line naming that interval (exit 1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testfiles.h"
#include <jansson.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"

#define REFITS      250
#define PER_REFIT   4000 /* the window and 3999 compare intervals */
#define SLOT_NS     100000
#define SPAN_NS     50000
#define WINDOW_NS   500000000ull
#define BIG_TRACE_S 10.0
#define MAX_RSS     (1024.0 * 1024 * 1024)
/* A sanitized build's dcr is several times slower and larger: there the
 * figures are printed and the results checked, but not held to the limits. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIMITS_HOLD 0
#else
#define LIMITS_HOLD 1
#endif

static void write_event(FILE *f, bool *first, uint64_t s, uint64_t e, unsigned refit,
                        const char *stage, const char *actor, int id)
{
    fprintf(f,
            "%s{\"ph\":\"X\",\"cat\":\"dcr\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":0,"
            "\"dur\":0,\"args\":{\"refit\":%u,\"stage\":\"%s\",\"actor\":\"%s\",\"id\":%d,"
            "\"start_ns\":%llu,\"end_ns\":%llu}}",
            *first ? "" : ",\n", stage, id, refit, stage, actor, id, (unsigned long long)s,
            (unsigned long long)e);
    *first = false;
}

/* Refit r's window starts at r seconds and lasts WINDOW_NS; interval j of it
 * is a compare of owner j % 8 in slot j, none overlapping. Owners 0..6 get
 * 500 intervals, owner 7 499: the construction bound is 500 x SPAN_NS on
 * owner 0, the latency WINDOW_NS. */
static void write_trace(const char *path, bool poison)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"format\":\"dcr-trace\"},\n"
               "\"traceEvents\":[\n");
    bool first = true;
    int refits = poison ? 2 : REFITS;
    for (int r = 1; r <= refits; r++) {
        uint64_t t0 = (uint64_t)r * 1000000000ull;
        write_event(f, &first, t0, t0 + WINDOW_NS, (unsigned)r, "refit", "coord", 0);
        for (int j = 0; j < PER_REFIT - 1; j++)
            write_event(f, &first, t0 + (uint64_t)j * SLOT_NS, t0 + (uint64_t)j * SLOT_NS + SPAN_NS,
                        (unsigned)r, "compare", "owner", j % 8);
    }
    if (poison) write_event(f, &first, 1500000000ull, INT64_MAX, 1, "send", "endpoint", 3);
    fprintf(f, "\n]}\n");
    assert_int_equal(fclose(f), 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* User plus system CPU seconds of the reaped children. */
static double cpu_s(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 + (double)ru->ru_stime.tv_sec +
           ru->ru_stime.tv_usec * 1e-6;
}

static void test_million_intervals(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "bounds-big"));
    char path[128], args[256];
    snprintf(path, sizeof(path), "%s/big.json", dir);
    write_trace(path, false);
    snprintf(args, sizeof(args), "bounds %s --json", path);
    static result_t r;
    struct rusage ru0, ru;
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru0), 0);
    double t0 = now_s();
    run(&r, args);
    double wall = now_s() - t0;
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
    double took = cpu_s(&ru) - cpu_s(&ru0);
    double rss = (double)ru.ru_maxrss * 1024;
    unlink(path);
    rmdir(dir);
    print_message("dcr bounds on %d intervals: %.2f s CPU (%.2f s wall), peak RSS %.0f MiB\n",
                  REFITS * PER_REFIT, took, wall, rss / (1 << 20));
    if (r.rc != 0) fail_msg("exit %d: %s", r.rc, r.err);
    json_error_t jerr;
    json_t *j = json_loads(r.out, 0, &jerr);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "refits")), REFITS);
    json_t *means = json_object_get(j, "means");
    assert_true(fabs(json_real_value(json_object_get(means, "latency_s")) - WINDOW_NS * 1e-9) <
                1e-9);
    assert_true(fabs(json_real_value(json_object_get(means, "construction_lb_s")) -
                     500 * SPAN_NS * 1e-9) < 1e-9);
    json_t *first = json_array_get(json_object_get(j, "refits"), 0);
    assert_int_equal(json_integer_value(json_object_get(first, "busiest_owner")), 0);
    json_decref(j);
    if (LIMITS_HOLD && took > BIG_TRACE_S)
        fail_msg("took %.2f s of CPU (limit %.0f s)", took, BIG_TRACE_S);
    if (LIMITS_HOLD && rss > MAX_RSS)
        fail_msg("peak RSS %.0f MiB (limit %.0f MiB)", rss / (1 << 20), MAX_RSS / (1 << 20));
}

/* The critical path of the same trace: per refit the 3999 compares, none
 * overlapping, are the work on it (3999 x SPAN_NS) and the gaps between
 * them, and after the last one, are waits, which fill the rest of the
 * window; within the same CPU limit (a walk that cost n per step would take
 * hours here). */
static void test_million_intervals_critical_path(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "bounds-path"));
    char path[128], args[256];
    snprintf(path, sizeof(path), "%s/big.json", dir);
    write_trace(path, false);
    snprintf(args, sizeof(args), "bounds %s --json --critical-path", path);
    static result_t r;
    struct rusage ru0, ru;
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru0), 0);
    run(&r, args);
    assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
    double took = cpu_s(&ru) - cpu_s(&ru0);
    unlink(path);
    rmdir(dir);
    print_message("dcr bounds --critical-path on %d intervals: %.2f s CPU\n", REFITS * PER_REFIT,
                  took);
    if (r.rc != 0) fail_msg("exit %d: %s", r.rc, r.err);
    json_error_t jerr;
    json_t *j = json_loads(r.out, 0, &jerr);
    assert_non_null(j);
    json_t *cp = json_object_get(j, "critical_path");
    const double work = (PER_REFIT - 1) * SPAN_NS * 1e-9, window = WINDOW_NS * 1e-9;
    assert_true(fabs(json_real_value(json_object_get(cp, "window_s")) - window) < 1e-9);
    assert_true(fabs(json_real_value(json_object_get(cp, "wait_s")) - (window - work)) < 1e-9);
    json_t *rows = json_object_get(cp, "rows");
    double compare = 0.0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        if (!strcmp(json_string_value(json_object_get(row, "segment")), "compare owner"))
            compare = json_real_value(json_object_get(row, "mean_s"));
    }
    assert_true(fabs(compare - work) < 1e-9);
    json_decref(j);
    if (LIMITS_HOLD && took > BIG_TRACE_S)
        fail_msg("took %.2f s of CPU (limit %.0f s)", took, BIG_TRACE_S);
}

static void test_interval_at_int64_max_refused(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "bounds-far"));
    char path[128], args[256];
    snprintf(path, sizeof(path), "%s/far.json", dir);
    write_trace(path, true);
    snprintf(args, sizeof(args), "bounds %s", path);
    expect_error(args, 1, "send endpoint=3 refit=1 [1500000000, 9223372036854775807] ns lies");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interval_at_int64_max_refused),
        cmocka_unit_test(test_million_intervals),
        cmocka_unit_test(test_million_intervals_critical_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
