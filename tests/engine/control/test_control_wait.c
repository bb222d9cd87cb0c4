/* ctest-labels: unit integration */
/* Waiting for a change of the control plane (dcr_control_position and
 * dcr_control_wait, dcr/control.h), on every built-in backend: SQLite (one
 * file; the WAL's inotify poke) and etcd (a v3 watch through the JSON
 * gateway, on a real etcd this test starts).
 *
 * What is checked, with margins that hold on a loaded 2-core machine:
 *   - a waiter wakes soon after another handle's write (well before its
 *     timeout), and what it reads then holds the write;
 *   - a change made between the position and the wait is not lost: the
 *     wait returns at once;
 *   - an idle wait sleeps out its timeout without burning the CPU (a poll
 *     at the old 0.5-2 ms rate costs a read per period);
 *   - a lost notification (pokes suppressed) still ends the wait by the
 *     backend's fallback look, long before the timeout;
 *   - a writer that died (SQLite: killed holding the write lock; etcd: the
 *     server stopped) leaves the waiter to end at its deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/control-internal.h"
#include "dcr/clock.h"
#include "dcr/control.h"
#include "engine/control/control_test_util.h"
#include "engine/control/etcd_server.h"
#include "testfiles.h"

/* Far above any wake-up on a loaded machine, far below the timeouts that a
 * missing notification would run into. */
#define WAKE_WITHIN_MS 2000
#define LONG_WAIT_MS   20000

static etcd_server_t g_etcd;
static bool g_etcd_up;
static const char *g_backend;
static char g_dir[PATH_MAX];
static char g_address[PATH_MAX];

static double now_ms(void)
{
    return (double)dcr_clock_ns() / 1e6;
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static dcr_control_t *open_handle(void)
{
    dcr_control_config_t cfg = {g_address, 5000};
    dcr_control_t *c = NULL;
    assert_int_equal(dcr_control_create(g_backend, &cfg, &c), DCR_OK);
    return c;
}

static int setup(void **state)
{
    (void)state;
    static unsigned serial;
    if (strcmp(g_backend, "sqlite") == 0) {
        if (!testfiles_tmpdir(g_dir, sizeof g_dir, "control-wait")) return -1;
        snprintf(g_address, sizeof g_address, "%s/control.db", g_dir);
    } else {
        g_dir[0] = '\0';
        snprintf(g_address, sizeof g_address, "etcd://%s/dcr-wait/%d-%u", g_etcd.hostport,
                 (int)getpid(), serial++);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_dir[0] == '\0') return 0;
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s%s", g_address, side[i]);
        unlink(path);
    }
    rmdir(g_dir);
    return 0;
}

/* A writer on its own handle: waits delay_ms, then writes a report. */
typedef struct writer {
    int delay_ms;
    double wrote_ms;
    dcr_status_t st; /* checked by the main thread (cmocka asserts there only) */
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    dcr_control_config_t cfg = {g_address, 5000};
    dcr_control_t *c = NULL;
    w->st = dcr_control_create(g_backend, &cfg, &c);
    dcr_clock_nap_ns((long)w->delay_ms * 1000000L);
    if (w->st == DCR_OK) w->st = dcr_control_report_put(c, 7, "new", 3);
    w->wrote_ms = now_ms();
    dcr_control_destroy(c);
    return NULL;
}

/* True when the report of receiver 7 holds "new". */
static bool sees_write(dcr_control_t *c)
{
    void *data = NULL;
    size_t len = 0;
    bool seen = dcr_control_report_get(c, 7, &data, &len) == DCR_OK && len == 3 &&
                memcmp(data, "new", 3) == 0;
    free(data);
    return seen;
}

/* Waits on c for the write of a writer started now with delay_ms; returns
 * how long after the write the waiter woke. */
static double wait_for_writer(dcr_control_t *c, int delay_ms)
{
    writer_t w = {delay_ms, 0, DCR_OK};
    pthread_t th;
    uint64_t pos = dcr_control_position(c);
    assert_false(sees_write(c));
    assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
    dcr_status_t st = dcr_control_wait(c, pos, LONG_WAIT_MS);
    double woke = now_ms();
    pthread_join(th, NULL);
    assert_int_equal(w.st, DCR_OK);
    assert_int_equal(st, DCR_OK);
    assert_true(sees_write(c));
    return woke - w.wrote_ms;
}

static void test_wakes_on_write(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    assert_true(dcr_control_position(c) > 0); /* both backends can tell */
    /* The writer writes 300 ms in: a wait that returned before the write
     * would have failed the checks above (nothing to see yet). */
    double late = wait_for_writer(c, 300);
    if (late > WAKE_WITHIN_MS) fail_msg("woke %.0f ms after the write", late);
    dcr_control_destroy(c);
}

static void test_change_before_wait_not_lost(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    dcr_control_t *other = open_handle();
    uint64_t pos = dcr_control_position(c);
    assert_false(sees_write(c));
    assert_int_equal(dcr_control_report_put(other, 7, "new", 3), DCR_OK);
    double t0 = now_ms();
    assert_int_equal(dcr_control_wait(c, pos, LONG_WAIT_MS), DCR_OK);
    double took = now_ms() - t0;
    if (took > WAKE_WITHIN_MS) fail_msg("a change before the wait took %.0f ms to see", took);
    assert_true(sees_write(c));
    dcr_control_destroy(other);
    dcr_control_destroy(c);
}

/* An idle wait of one second: it ends at its timeout, not before, and
 * costs the waiting thread little CPU. Reading the control plane every
 * 0.5 ms (the coordinator's rate before waits) is 2000 reads a second,
 * tens of milliseconds of CPU at the least. */
static void test_idle_wait_sleeps(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    uint64_t pos = dcr_control_position(c);
    double t0 = now_ms(), cpu0 = thread_cpu_ms();
    dcr_status_t st = dcr_control_wait(c, pos, 1000);
    double took = now_ms() - t0, cpu = thread_cpu_ms() - cpu0;
    assert_int_equal(st, DCR_ETIMEOUT);
    if (took < 990) fail_msg("an idle wait of 1000 ms ended after %.0f ms", took);
    if (cpu > 20.0) fail_msg("an idle wait of 1000 ms used %.1f ms of CPU", cpu);
    dcr_control_destroy(c);
}

/* Pokes lost: the waiter still sees the write at its next fallback look. */
static void test_lost_notification_fallback(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    dcr__wake_suppress_pokes(true);
    double late = wait_for_writer(c, 100);
    dcr__wake_suppress_pokes(false);
    if (late > WAKE_WITHIN_MS)
        fail_msg("without a notification the waiter woke %.0f ms after the write", late);
    dcr_control_destroy(c);
}

/* A writer process killed while it holds SQLite's write lock: the waiter's
 * looks do not wait for the lock (WAL readers never do), and the wait ends
 * at its deadline. */
static void test_sqlite_writer_died(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *db = NULL;
        if (sqlite3_open(g_address, &db) != SQLITE_OK ||
            sqlite3_exec(db, "BEGIN IMMEDIATE; DELETE FROM dcr_report;", NULL, NULL, NULL) !=
                SQLITE_OK)
            _exit(1);
        if (write(ready[1], "x", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    char b;
    close(ready[1]);
    assert_int_equal(read(ready[0], &b, 1), 1);
    close(ready[0]);
    uint64_t pos = dcr_control_position(c);
    double t0 = now_ms();
    dcr_status_t st = dcr_control_wait(c, pos, 300);
    double took = now_ms() - t0;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(st, DCR_ETIMEOUT);
    if (took < 290 || took > 300 + WAKE_WITHIN_MS)
        fail_msg("a wait of 300 ms beside a dead writer took %.0f ms", took);
    dcr_control_destroy(c);
}

/* The etcd server gone: every watch fails, and the wait ends at its
 * deadline (its retries are naps within it). Runs last: it stops etcd. */
static void test_etcd_server_died(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    uint64_t pos = dcr_control_position(c);
    etcd_server_stop(&g_etcd);
    g_etcd_up = false;
    double t0 = now_ms();
    dcr_status_t st = dcr_control_wait(c, pos, 300);
    double took = now_ms() - t0;
    assert_int_equal(st, DCR_ETIMEOUT);
    if (took < 290 || took > 300 + WAKE_WITHIN_MS)
        fail_msg("a wait of 300 ms with etcd gone took %.0f ms", took);
    dcr_control_destroy(c);
}

/* A backend without the wait slots: dcr_control_wait naps a poll period
 * (and a position of 0 does the same on any backend). */
static void test_unknown_position_naps(void **state)
{
    (void)state;
    dcr_control_t *c = open_handle();
    double t0 = now_ms();
    assert_int_equal(dcr_control_wait(c, 0, 10000), DCR_OK);
    double took = now_ms() - t0;
    if (took > WAKE_WITHIN_MS) fail_msg("a wait from an unknown position took %.0f ms", took);
    assert_int_equal(dcr_control_wait(NULL, 1, 10), DCR_EINVAL);
    assert_int_equal(dcr_control_wait(c, 1, 0), DCR_EINVAL);
    dcr_control_destroy(c);
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest common[] = {
        CASE(test_wakes_on_write),
        CASE(test_change_before_wait_not_lost),
        CASE(test_idle_wait_sleeps),
        CASE(test_unknown_position_naps),
    };
    const struct CMUnitTest sqlite_only[] = {
        CASE(test_lost_notification_fallback),
        CASE(test_sqlite_writer_died),
    };
    const struct CMUnitTest etcd_only[] = {
        CASE(test_etcd_server_died),
    };
    int failed = 0;
    g_backend = "sqlite";
    failed += cmocka_run_group_tests_name("control wait: sqlite", common, NULL, NULL);
    failed += cmocka_run_group_tests_name("control wait: sqlite only", sqlite_only, NULL, NULL);
    if (!etcd_server_start(&g_etcd)) {
        fprintf(stderr, "FAILED: cannot start etcd for the control-plane wait tests\n");
        return failed + 1;
    }
    g_etcd_up = true;
    g_backend = "etcd";
    failed += cmocka_run_group_tests_name("control wait: etcd", common, NULL, NULL);
    failed += cmocka_run_group_tests_name("control wait: etcd only", etcd_only, NULL, NULL);
    if (g_etcd_up) etcd_server_stop(&g_etcd);
    return failed;
}
