/* ctest-labels: unit integration */
/* The control-plane conformance suite, run against every registered backend
 * (each gets a fresh, empty store per test), then the SQLite backend's own
 * checks: addresses, WAL, busy timeout, and malformed files and rows.
 *
 * What store a backend gets follows from the addresses it accepts, never from
 * its name: a backend that opens a file path gets a fresh file in a temporary
 * directory; one that opens an etcd:// URL gets a fresh prefix on a real etcd
 * this test starts (etcd_server.h) and stops. If etcd cannot start, or a
 * backend accepts neither, the suite fails. Expected values come from the
 * protocol's rules (DESIGN.md section 5 and the seed's joint commit), never
 * from running the code. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testfiles.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/control.h"
#include "engine/control/control_test_util.h"
#include "engine/control/etcd_server.h"

/* ---- fixtures --------------------------------------------------------------- */

static const char *g_backend; /* backend the running group tests */
/* What the running backend opens: a file path, or a URL of g_etcd. */
typedef enum store_kind { STORE_FILE, STORE_ETCD } store_kind_t;
static store_kind_t g_kind;
static etcd_server_t g_etcd;

typedef struct fixture {
    char dir[PATH_MAX];     /* temporary directory of a file backend; "" otherwise */
    char address[PATH_MAX]; /* what dcr_control_create receives */
    dcr_control_t *c;
} fixture_t;

/* A fresh, empty store for one test; false if this backend has no test server. */
static bool fixture_address_of(fixture_t *fx, store_kind_t kind)
{
    static unsigned serial;
    if (kind == STORE_FILE) {
        if (!testfiles_tmpdir(fx->dir, sizeof fx->dir, "control")) return false;
        snprintf(fx->address, sizeof fx->address, "%s/control.db", fx->dir);
        return true;
    }
    fx->dir[0] = '\0';
    snprintf(fx->address, sizeof fx->address, "etcd://%s/dcr-test/%d-%u", g_etcd.hostport,
             (int)getpid(), serial++);
    return true;
}

static bool fixture_address(fixture_t *fx)
{
    return fixture_address_of(fx, g_kind);
}

static void fixture_remove_files(fixture_t *fx)
{
    if (fx->dir[0] == '\0') return;
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    char path[PATH_MAX + 16];
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", fx->address, suffixes[i]);
        unlink(path);
    }
    rmdir(fx->dir);
}

static dcr_control_t *open_handle(const fixture_t *fx, int timeout_ms)
{
    dcr_control_config_t cfg = {fx->address, timeout_ms};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create(g_backend, &cfg, &c);
    if (st != DCR_OK) fail_msg("create %s at %s: %s", g_backend, fx->address, dcr_error_line(st));
    return c;
}

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    if (fx == NULL || !fixture_address(fx)) return -1;
    fx->c = open_handle(fx, 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    dcr_control_destroy(fx->c);
    fixture_remove_files(fx);
    free(fx);
    return 0;
}

/* ---- helpers ----------------------------------------------------------------- */

static void ack_all(dcr_control_t *c, uint64_t tau, const uint32_t *receivers, size_t n)
{
    for (size_t i = 0; i < n; i++) assert_status(dcr_control_ack(c, tau, receivers[i]), DCR_OK);
}

static void assert_record_equal(const dcr_commit_record_t *a, const dcr_commit_record_t *b)
{
    assert_true(a->version == b->version);
    assert_true(a->attempt == b->attempt);
    assert_true(a->committed_ns == b->committed_ns);
    assert_memory_equal(a->baseline, b->baseline, DCR_CONTROL_BASELINE_BYTES);
}

static void assert_record_is(dcr_control_t *c, const dcr_commit_record_t *want)
{
    dcr_commit_record_t now;
    assert_status(dcr_control_read(c, &now), DCR_OK);
    assert_record_equal(&now, want);
}

static const uint32_t k_receivers[] = {9, 3, 7};
/* k_receivers as dcr_control_acks lists them, and two of them ({9, 3}). */
static const uint32_t k_receivers_sorted[] = {3, 7, 9};
static const uint32_t k_two_sorted[] = {3, 9};

/* ---- conformance: commit record ------------------------------------------------ */

static void test_initial_record_is_empty(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t rec, zero;
    memset(&rec, 0xab, sizeof rec);
    memset(&zero, 0, sizeof zero);
    assert_status(dcr_control_read(fx->c, &rec), DCR_OK);
    assert_record_equal(&rec, &zero);
    dcr_control_attempt_t info;
    assert_status(dcr_control_attempt(fx->c, 0, &info), DCR_ENOTFOUND);
    assert_string_equal(dcr_control_name(fx->c), g_backend);
}

static void test_cas_success_and_conflict(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t empty = {0}, r1 = {0}, r2 = {0};
    r1.version = 4;
    baseline_of(r1.baseline, 4);
    r1.attempt = 12;
    r1.committed_ns = 1234567;
    r2 = r1;
    r2.version = 5;
    assert_true(dcr_commit_record_equal(&r1, &r1));
    assert_false(dcr_commit_record_equal(&r1, &r2));

    assert_status(dcr_control_cas(fx->c, &empty, &r1), DCR_OK);
    assert_record_is(fx->c, &r1);
    /* The record no longer equals `empty`, so this must lose and change nothing. */
    assert_status(dcr_control_cas(fx->c, &empty, &r2), DCR_ECONFLICT);
    assert_record_is(fx->c, &r1);
    /* Equality covers every field: a different timestamp alone is a conflict. */
    dcr_commit_record_t stale = r1;
    stale.committed_ns++;
    assert_status(dcr_control_cas(fx->c, &stale, &r2), DCR_ECONFLICT);
    stale = r1;
    stale.baseline[31] ^= 1;
    assert_status(dcr_control_cas(fx->c, &stale, &r2), DCR_ECONFLICT);
    assert_status(dcr_control_cas(fx->c, &r1, &r2), DCR_OK);
    assert_record_is(fx->c, &r2);
}

/* ---- conformance: attempts ------------------------------------------------------- */

static void test_tau_strictly_increasing(void **state)
{
    fixture_t *fx = *state;
    dcr_control_t *other = open_handle(fx, 0);
    bootstrap(fx->c);
    const char *coords[] = {"coord-a", "coord-a", "coord-b", "coord-c", "coord-c"};
    dcr_control_t *handles[] = {fx->c, fx->c, other, fx->c, other};
    uint64_t last = 0;
    for (size_t i = 0; i < 5; i++) {
        uint64_t tau = 0;
        assert_status(prepare(handles[i], coords[i], 0, k_receivers, 3, 10000, &tau), DCR_OK);
        assert_true(tau > last);
        last = tau;
    }
    dcr_control_attempt_t info;
    memset(&info, 0, sizeof info);
    assert_status(dcr_control_attempt(fx->c, 0, &info), DCR_OK);
    assert_true(info.tau == last);
    assert_string_equal(info.coordinator, "coord-c");
    assert_true(info.from_version == 0);
    assert_int_equal(info.n_required, 3);
    assert_true(info.prepared_ns > 0);
    /* The deadline is prepare time plus 10 s. */
    assert_true(info.deadline_ns - info.prepared_ns == 10000LL * 1000000);
    dcr_control_attempt_t same;
    assert_status(dcr_control_attempt(other, last, &same), DCR_OK);
    assert_true(same.tau == last && same.prepared_ns == info.prepared_ns);
    assert_status(dcr_control_attempt(fx->c, last + 1, &same), DCR_ENOTFOUND);

    uint32_t got[8] = {0};
    size_t n = 0;
    assert_status(dcr_control_required(fx->c, last, got, 8, &n), DCR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(got[0], 3);
    assert_int_equal(got[1], 7);
    assert_int_equal(got[2], 9);
    dcr_control_destroy(other);
}

static void test_prepare_needs_committed_version(void **state)
{
    fixture_t *fx = *state;
    bootstrap(fx->c);
    uint64_t tau = 99;
    assert_status(prepare(fx->c, "coord", 1, k_receivers, 3, 1000, &tau), DCR_ECONFLICT);
    assert_true(tau == 99);
}

static void test_replaced_coordinator_refused(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c);
    uint64_t tau_a = 0, tau_b = 0, tau = 0;
    uint8_t k1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(k1, 1);
    assert_status(prepare(fx->c, "old", 0, k_receivers, 3, 10000, &tau_a), DCR_OK);
    ack_all(fx->c, tau_a, k_receivers, 3);
    /* Failover: a new coordinator reads the record and prepares; the old one is
     * now fenced off for good, whatever it tries. */
    assert_status(prepare(fx->c, "new", 0, k_receivers, 3, 10000, &tau_b), DCR_OK);
    assert_status(prepare(fx->c, "old", 0, k_receivers, 3, 10000, &tau), DCR_ECONFLICT);
    dcr_commit_record_t out;
    memset(&out, 0x5a, sizeof out);
    dcr_commit_record_t untouched = out;
    assert_status(dcr_control_commit(fx->c, "old", tau_a, &k0, k1, &out), DCR_ECONFLICT);
    assert_memory_equal(&out, &untouched, sizeof out);
    assert_record_is(fx->c, &k0);
    /* Nor may anyone commit the new attempt under another name. */
    ack_all(fx->c, tau_b, k_receivers, 3);
    assert_status(dcr_control_commit(fx->c, "old", tau_b, &k0, k1, &out), DCR_ECONFLICT);
    /* Every backend answers with the same checks in the same order (control.c). */
    assert_non_null(strstr(dcr_error_detail(), "belongs to coordinator new, not old"));
    assert_status(dcr_control_commit(fx->c, "new", tau_b, &k0, k1, &out), DCR_OK);
    assert_true(out.version == 1 && out.attempt == tau_b);
    assert_memory_equal(out.baseline, k1, sizeof k1);
    assert_status(prepare(fx->c, "old", 1, k_receivers, 3, 10000, &tau), DCR_ECONFLICT);
    /* The active coordinator carries on with the next transition. */
    assert_status(prepare(fx->c, "new", 1, k_receivers, 3, 10000, &tau), DCR_OK);
    assert_true(tau > tau_b);
}

static void test_commit_publishes_next_version(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c), k1;
    uint64_t tau = 0;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
    dcr_control_attempt_t info;
    assert_status(dcr_control_attempt(fx->c, tau, &info), DCR_OK);
    ack_all(fx->c, tau, k_receivers, 3);
    /* A CAS that expects anything but K^0 loses. */
    dcr_commit_record_t wrong = k0;
    wrong.version = 7;
    assert_status(dcr_control_commit(fx->c, "coord", tau, &wrong, base1, &k1), DCR_ECONFLICT);
    assert_non_null(strstr(dcr_error_detail(), "the commit record changed (now version 0,"));
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k0, base1, &k1), DCR_OK);
    assert_true(k1.version == 1 && k1.attempt == tau);
    assert_true(k1.committed_ns >= info.prepared_ns && k1.committed_ns <= info.deadline_ns);
    assert_memory_equal(k1.baseline, base1, sizeof base1);
    assert_record_is(fx->c, &k1);
    /* A retried commit (lost reply) loses the CAS; the record names tau, which
     * is how the caller learns that the first one took effect. */
    dcr_commit_record_t again;
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k0, base1, &again), DCR_ECONFLICT);
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k1, base1, &again), DCR_ECONFLICT);
    assert_non_null(strstr(dcr_error_detail(), "was prepared for version 0, but version 1 is"));
    assert_record_is(fx->c, &k1);
}

/* ---- conformance: acknowledgments -------------------------------------------------- */

static void test_acks_idempotent_and_keyed_by_tau(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c), rec;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    uint64_t tau1 = 0, tau2 = 0;
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau1), DCR_OK);
    assert_status(dcr_control_ack(fx->c, tau1, 7), DCR_OK);
    assert_status(dcr_control_ack(fx->c, tau1, 7), DCR_OK);
    uint32_t got[4] = {0};
    size_t n = 0;
    assert_status(dcr_control_acks(fx->c, tau1, got, 4, &n), DCR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(got[0], 7);
    assert_status(dcr_control_ack(fx->c, tau1, 4), DCR_EINVAL);
    assert_status(dcr_control_ack(fx->c, tau1 + 100, 7), DCR_ENOTFOUND);
    assert_status(dcr_control_commit(fx->c, "coord", tau1, &k0, base1, &rec), DCR_EATTEMPT);
    assert_status(dcr_control_ack(fx->c, tau1, 9), DCR_OK);
    assert_status(dcr_control_ack(fx->c, tau1, 3), DCR_OK);
    /* A short buffer still learns the full count. */
    memset(got, 0, sizeof got);
    assert_status(dcr_control_acks(fx->c, tau1, got, 2, &n), DCR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(got[0], 3);
    assert_int_equal(got[1], 7);
    assert_int_equal(got[2], 0);
    assert_status(dcr_control_acks(fx->c, tau1, NULL, 0, &n), DCR_OK);
    assert_int_equal(n, 3);

    /* A retry by the same coordinator starts from no acknowledgments: those of
     * tau1 do not count for tau2, and late ones for tau1 are refused. */
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau2), DCR_OK);
    assert_status(dcr_control_acks(fx->c, tau2, got, 4, &n), DCR_OK);
    assert_int_equal(n, 0);
    assert_status(dcr_control_ack(fx->c, tau1, 3), DCR_ECONFLICT);
    assert_status(dcr_control_commit(fx->c, "coord", tau1, &k0, base1, &rec), DCR_ECONFLICT);
    assert_status(dcr_control_commit(fx->c, "coord", tau2, &k0, base1, &rec), DCR_EATTEMPT);
    assert_status(dcr_control_acks(fx->c, tau2, got, 4, &n), DCR_OK);
    assert_int_equal(n, 0);
    ack_all(fx->c, tau2, k_receivers, 3);
    assert_status(dcr_control_commit(fx->c, "coord", tau2, &k0, base1, &rec), DCR_OK);
    /* After the commit a repeated ack of the committed attempt is harmless. */
    assert_status(dcr_control_ack(fx->c, tau2, 9), DCR_OK);
    assert_record_is(fx->c, &rec);
}

/* The acknowledgments of tau are exactly want[0..n), in ascending order. */
static void assert_acks_are(dcr_control_t *c, uint64_t tau, const uint32_t *want, size_t n)
{
    uint32_t got[4] = {0};
    size_t got_n = 0;
    assert_status(dcr_control_acks(c, tau, got, 4, &got_n), DCR_OK);
    assert_int_equal(got_n, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
}

/* A bootstrapped store with its first attempt prepared for k_receivers:
 * *k0_p the bootstrap record, base1 the next baseline; returns the attempt. */
static uint64_t first_attempt(fixture_t *fx, dcr_commit_record_t *k0_p,
                              uint8_t base1[DCR_CONTROL_BASELINE_BYTES])
{
    *k0_p = bootstrap(fx->c);
    baseline_of(base1, 1);
    uint64_t tau = 0;
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
    return tau;
}

/* Several receivers in one write: all recorded, or none when one of them is
 * not required or the attempt was replaced; then a commit on them. */
static void test_ack_many_all_or_none(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0, rec;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    uint64_t tau1 = first_attempt(fx, &k0, base1), tau2 = 0;
    const uint32_t with_stranger[] = {3, 4, 9}; /* 4 is not required */
    assert_status(dcr_control_ack_many(fx->c, tau1, with_stranger, 3), DCR_EINVAL);
    assert_acks_are(fx->c, tau1, NULL, 0);
    assert_status(dcr_control_ack_many(fx->c, tau1, NULL, 1), DCR_EINVAL);
    assert_status(dcr_control_ack_many(fx->c, tau1, k_receivers, 0), DCR_EINVAL);
    const uint32_t two[] = {9, 3};
    assert_status(dcr_control_ack_many(fx->c, tau1, two, 2), DCR_OK);
    assert_acks_are(fx->c, tau1, k_two_sorted, 2);
    assert_status(dcr_control_commit(fx->c, "coord", tau1, &k0, base1, &rec), DCR_EATTEMPT);
    /* Replaced: nothing of tau1 is recorded any more, tau2 starts empty. */
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau2), DCR_OK);
    assert_status(dcr_control_ack_many(fx->c, tau1, k_receivers, 3), DCR_ECONFLICT);
    assert_acks_are(fx->c, tau2, NULL, 0);
    assert_status(dcr_control_ack_many(fx->c, tau2, k_receivers, 3), DCR_OK);
    assert_acks_are(fx->c, tau2, k_receivers_sorted, 3);
    assert_status(dcr_control_commit(fx->c, "coord", tau2, &k0, base1, &rec), DCR_OK);
    assert_record_is(fx->c, &rec);
}

/* report id's value is exactly want (len bytes), read through c. */
static void assert_report_is(dcr_control_t *c, uint32_t id, const void *want, size_t len)
{
    void *got = NULL;
    size_t got_len = 0;
    assert_status(dcr_control_report_get(c, id, &got, &got_len), DCR_OK);
    assert_int_equal(got_len, len);
    if (len > 0) assert_memory_equal(got, want, len);
    free(got);
}

/* Acknowledgments with a report: the report stands exactly when the
 * acknowledgments do. A refused acknowledgment (a receiver not required, a
 * replaced attempt) leaves the report as it was; a large report (etcd
 * keeps it in parts) goes with its acknowledgments too. */
static void test_ack_report_all_or_none(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0, rec;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    uint64_t tau1 = first_attempt(fx, &k0, base1), tau2 = 0;
    void *none = NULL;
    size_t none_len = 0;
    const uint32_t with_stranger[] = {3, 4, 9}; /* 4 is not required */
    assert_status(dcr_control_ack_report(fx->c, tau1, with_stranger, 3, 40, "done", 4), DCR_EINVAL);
    assert_acks_are(fx->c, tau1, NULL, 0);
    assert_status(dcr_control_report_get(fx->c, 40, &none, &none_len), DCR_ENOTFOUND);
    assert_status(dcr_control_ack_report(fx->c, tau1, NULL, 1, 40, "done", 4), DCR_EINVAL);
    assert_status(dcr_control_ack_report(fx->c, tau1, k_receivers, 0, 40, "done", 4), DCR_EINVAL);
    assert_status(dcr_control_ack_report(fx->c, tau1, k_receivers, 3, 40, NULL, 4), DCR_EINVAL);
    assert_status(dcr_control_report_get(fx->c, 40, &none, &none_len), DCR_ENOTFOUND);
    const uint32_t two[] = {9, 3};
    assert_status(dcr_control_ack_report(fx->c, tau1, two, 2, 40, "done 1", 6), DCR_OK);
    assert_acks_are(fx->c, tau1, k_two_sorted, 2);
    assert_report_is(fx->c, 40, "done 1", 6);
    /* Replaced: the late acknowledgment is refused and its report with it. */
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau2), DCR_OK);
    assert_status(dcr_control_ack_report(fx->c, tau1, k_receivers, 3, 40, "late", 4),
                  DCR_ECONFLICT);
    assert_report_is(fx->c, 40, "done 1", 6);
    assert_acks_are(fx->c, tau2, NULL, 0);
    size_t big_len = (1u << 20) + 3; /* above one etcd value's part */
    uint8_t *big = malloc(big_len);
    assert_non_null(big);
    for (size_t i = 0; i < big_len; i++) big[i] = (uint8_t)(i * 31u + 7u);
    assert_status(dcr_control_ack_report(fx->c, tau2, k_receivers, 3, 40, big, big_len), DCR_OK);
    assert_acks_are(fx->c, tau2, k_receivers_sorted, 3);
    assert_report_is(fx->c, 40, big, big_len);
    free(big);
    assert_status(dcr_control_commit(fx->c, "coord", tau2, &k0, base1, &rec), DCR_OK);
    assert_record_is(fx->c, &rec);
}

static void test_required_set_is_fixed(void **state)
{
    fixture_t *fx = *state;
    bootstrap(fx->c);
    const uint32_t small[] = {1};
    const uint32_t large[] = {1, 2, 3, 4};
    uint64_t tau1 = 0, tau2 = 0;
    assert_status(prepare(fx->c, "coord", 0, large, 4, 10000, &tau1), DCR_OK);
    assert_status(prepare(fx->c, "coord", 0, small, 1, 10000, &tau2), DCR_OK);
    size_t n = 0;
    uint32_t got[4];
    assert_status(dcr_control_required(fx->c, tau2, got, 4, &n), DCR_OK);
    assert_int_equal(n, 1);
    assert_status(dcr_control_ack(fx->c, tau2, 4), DCR_EINVAL);
}

/* ---- conformance: deadlines and prewarm reports ------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void test_deadline_expiry(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c), rec;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    uint64_t tau = 0;
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 20, &tau), DCR_OK);
    ack_all(fx->c, tau, k_receivers, 3);
    sleep_ms(80);
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k0, base1, &rec), DCR_ETIMEOUT);
    assert_non_null(strstr(dcr_error_detail(), "missed its commit deadline by"));
    assert_record_is(fx->c, &k0);
    /* The retry gets a fresh deadline. */
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
    ack_all(fx->c, tau, k_receivers, 3);
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k0, base1, &rec), DCR_OK);
}

static void test_prewarm_reports_round_trip(void **state)
{
    fixture_t *fx = *state;
    dcr_control_t *coordinator = open_handle(fx, 0);
    size_t len = 1 << 20;
    uint8_t *blob = malloc(len);
    assert_non_null(blob);
    for (size_t i = 0; i < len; i++) blob[i] = (uint8_t)(i * 2654435761u >> 13);
    assert_status(dcr_control_report_put(fx->c, 5, blob, len), DCR_OK);
    assert_status(dcr_control_report_put(fx->c, 6, "xo", 2), DCR_OK);

    void *got = NULL;
    size_t got_len = 0;
    assert_status(dcr_control_report_get(coordinator, 5, &got, &got_len), DCR_OK);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, blob, len);
    free(got);
    /* A later report replaces the earlier one. */
    assert_status(dcr_control_report_put(fx->c, 5, "ox", 2), DCR_OK);
    assert_status(dcr_control_report_get(coordinator, 5, &got, &got_len), DCR_OK);
    assert_int_equal(got_len, 2);
    assert_memory_equal(got, "ox", 2);
    free(got);
    assert_status(dcr_control_report_put(fx->c, 8, NULL, 0), DCR_OK);
    got = blob;
    assert_status(dcr_control_report_get(coordinator, 8, &got, &got_len), DCR_OK);
    assert_null(got);
    assert_int_equal(got_len, 0);
    got = blob;
    assert_status(dcr_control_report_get(coordinator, 7, &got, &got_len), DCR_ENOTFOUND);
    assert_ptr_equal(got, blob);
    assert_status(dcr_control_report_put(fx->c, 5, blob, DCR_CONTROL_REPORT_MAX + 1ull),
                  DCR_EINVAL);
    free(blob);
    dcr_control_destroy(coordinator);
}

/* ---- conformance: races ------------------------------------------------------------- */

#define N_RACERS 8

typedef struct racer {
    const fixture_t *fx;
    pthread_barrier_t *barrier;
    int index;
    dcr_status_t cas_status;
    dcr_status_t commit_status;
    uint64_t tau;
    dcr_commit_record_t expected;
} racer_t;

static dcr_commit_record_t racer_record(int index)
{
    dcr_commit_record_t r = {0};
    r.version = 1;
    baseline_of(r.baseline, 100 + (unsigned)index);
    r.committed_ns = 1000 + index;
    return r;
}

/* Each racer has its own handle, as separate processes would. */
static void *cas_racer(void *arg)
{
    racer_t *r = arg;
    dcr_control_config_t cfg = {r->fx->address, 0};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create(g_backend, &cfg, &c);
    pthread_barrier_wait(r->barrier);
    if (st == DCR_OK) {
        dcr_commit_record_t mine = racer_record(r->index);
        st = dcr_control_cas(c, &r->expected, &mine);
    }
    r->cas_status = st;
    dcr_control_destroy(c);
    return NULL;
}

static void test_concurrent_cas_threads(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, N_RACERS);
    racer_t racers[N_RACERS];
    pthread_t threads[N_RACERS];
    for (int i = 0; i < N_RACERS; i++) {
        racers[i] = (racer_t){.fx = fx, .barrier = &barrier, .index = i, .expected = k0};
        assert_int_equal(pthread_create(&threads[i], NULL, cas_racer, &racers[i]), 0);
    }
    int winners = 0, winner = -1;
    for (int i = 0; i < N_RACERS; i++) {
        pthread_join(threads[i], NULL);
        if (racers[i].cas_status == DCR_OK)
            winners++, winner = i;
        else
            assert_int_equal(racers[i].cas_status, DCR_ECONFLICT);
    }
    pthread_barrier_destroy(&barrier);
    assert_int_equal(winners, 1);
    dcr_commit_record_t want = racer_record(winner);
    assert_record_is(fx->c, &want);
}

/* Every racer is a coordinator: all prepare, then all try to commit. Prepares
 * all succeed with distinct ids, and only the last one prepared can commit. */
static void *commit_racer(void *arg)
{
    racer_t *r = arg;
    dcr_control_config_t cfg = {r->fx->address, 0};
    dcr_control_t *c = NULL;
    char id[32];
    snprintf(id, sizeof id, "coord-%d", r->index);
    const uint32_t receivers[] = {0};
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    dcr_status_t st = dcr_control_create(g_backend, &cfg, &c);
    pthread_barrier_wait(r->barrier);
    if (st == DCR_OK) st = prepare(c, id, 0, receivers, 1, 10000, &r->tau);
    r->cas_status = st;
    pthread_barrier_wait(r->barrier);
    if (st == DCR_OK) {
        dcr_control_ack(c, r->tau, 0);
        dcr_commit_record_t rec;
        st = dcr_control_commit(c, id, r->tau, &r->expected, base1, &rec);
    }
    r->commit_status = st;
    dcr_control_destroy(c);
    return NULL;
}

static void test_concurrent_prepare_and_commit_threads(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, N_RACERS);
    racer_t racers[N_RACERS];
    pthread_t threads[N_RACERS];
    for (int i = 0; i < N_RACERS; i++) {
        racers[i] = (racer_t){.fx = fx, .barrier = &barrier, .index = i, .expected = k0};
        assert_int_equal(pthread_create(&threads[i], NULL, commit_racer, &racers[i]), 0);
    }
    for (int i = 0; i < N_RACERS; i++) pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    uint64_t max_tau = 0;
    int winners = 0, winner = -1;
    for (int i = 0; i < N_RACERS; i++) {
        assert_status(racers[i].cas_status, DCR_OK);
        for (int j = 0; j < i; j++) assert_true(racers[i].tau != racers[j].tau);
        if (racers[i].tau > max_tau) max_tau = racers[i].tau;
        if (racers[i].commit_status == DCR_OK)
            winners++, winner = i;
        else
            assert_int_equal(racers[i].commit_status, DCR_ECONFLICT);
    }
    assert_int_equal(winners, 1);
    assert_true(racers[winner].tau == max_tau);
    dcr_commit_record_t rec;
    assert_status(dcr_control_read(fx->c, &rec), DCR_OK);
    assert_true(rec.version == 1 && rec.attempt == max_tau);
}

#define N_PROCS 4

/* Child process body: wait for the start signal, race one CAS, report by exit
 * code (0 won, 1 lost the CAS, 2 anything else). */
static void cas_child(const fixture_t *fx, int start_fd, int index,
                      const dcr_commit_record_t *expected)
{
    char go;
    dcr_control_config_t cfg = {fx->address, 0};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create(g_backend, &cfg, &c);
    if (read(start_fd, &go, 1) < 0) _exit(2);
    if (st == DCR_OK) {
        dcr_commit_record_t mine = racer_record(index);
        st = dcr_control_cas(c, expected, &mine);
    }
    dcr_control_destroy(c);
    _exit(st == DCR_OK ? 0 : st == DCR_ECONFLICT ? 1 : 2);
}

static void test_concurrent_cas_processes(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t k0 = bootstrap(fx->c);
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pids[N_PROCS];
    for (int i = 0; i < N_PROCS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(pipefd[1]);
            cas_child(fx, pipefd[0], i, &k0);
        }
    }
    /* Closing the write end wakes every child at once. */
    close(pipefd[0]);
    close(pipefd[1]);
    int winners = 0, winner = -1;
    for (int i = 0; i < N_PROCS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_true(WEXITSTATUS(status) <= 1);
        if (WEXITSTATUS(status) == 0) winners++, winner = i;
    }
    assert_int_equal(winners, 1);
    dcr_commit_record_t want = racer_record(winner);
    assert_record_is(fx->c, &want);
}

/* ---- conformance: membership ------------------------------------------------------------ */

static void assert_members(dcr_control_t *c, const uint32_t *want, size_t n)
{
    uint32_t got[8];
    size_t count = 99;
    assert_status(dcr_control_membership_get(c, got, 8, &count), DCR_OK);
    assert_int_equal(count, n);
    for (size_t i = 0; i < n && i < 8; i++) assert_int_equal(got[i], want[i]);
}

/* Membership is recorded whole, read back sorted, may be empty, survives a
 * reopen (a new coordinator's view), and a replaced coordinator cannot
 * change it. */
static void test_membership(void **state)
{
    fixture_t *fx = *state;
    uint32_t out[4] = {0};
    size_t n = 77;
    assert_status(dcr_control_membership_get(fx->c, out, 4, &n), DCR_ENOTFOUND);
    assert_int_equal(n, 77);
    assert_status(dcr_control_membership_put(fx->c, "old", k_receivers, 3), DCR_OK);
    const uint32_t sorted[] = {3, 7, 9};
    assert_members(fx->c, sorted, 3);
    /* A short buffer gets the first members and the full count. */
    assert_status(dcr_control_membership_get(fx->c, out, 1, &n), DCR_OK);
    assert_true(n == 3 && out[0] == 3);
    /* Receiver 7 dies: it leaves. Then every receiver is out. */
    const uint32_t left[] = {9, 3};
    assert_status(dcr_control_membership_put(fx->c, "old", left, 2), DCR_OK);
    const uint32_t left_sorted[] = {3, 9};
    assert_members(fx->c, left_sorted, 2);
    assert_status(dcr_control_membership_put(fx->c, "old", NULL, 0), DCR_OK);
    assert_members(fx->c, NULL, 0);
    assert_status(dcr_control_membership_put(fx->c, "old", left, 2), DCR_OK);
    dcr_control_destroy(fx->c);
    fx->c = open_handle(fx, 0);
    assert_members(fx->c, left_sorted, 2);
    /* A new coordinator prepares: the old one is fenced off. */
    bootstrap(fx->c);
    uint64_t tau = 0;
    assert_status(prepare(fx->c, "old", 0, left, 2, 10000, &tau), DCR_OK);
    assert_status(prepare(fx->c, "new", 0, left, 2, 10000, &tau), DCR_OK);
    assert_status(dcr_control_membership_put(fx->c, "old", k_receivers, 3), DCR_ECONFLICT);
    assert_members(fx->c, left_sorted, 2);
    assert_status(dcr_control_membership_put(fx->c, "new", k_receivers, 3), DCR_OK);
    assert_members(fx->c, sorted, 3);
    /* Bad input changes nothing. */
    const uint32_t dup[] = {4, 5, 4};
    assert_status(dcr_control_membership_put(fx->c, "new", dup, 3), DCR_EINVAL);
    assert_status(dcr_control_membership_put(fx->c, "new", NULL, 2), DCR_EINVAL);
    assert_status(dcr_control_membership_put(fx->c, "bad id", k_receivers, 3), DCR_EINVAL);
    assert_status(dcr_control_membership_get(fx->c, NULL, 2, &n), DCR_EINVAL);
    assert_members(fx->c, sorted, 3);
}

/* ---- conformance: durability, a wrapping backend, arguments ---------------------------- */

static void test_reopen_preserves_state(void **state)
{
    fixture_t *fx = *state;
    if (!dcr_control_find(g_backend)->props.durable) skip(); /* nothing to preserve */
    dcr_commit_record_t k0 = bootstrap(fx->c), k1;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    uint64_t tau = 0, next = 0;
    assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
    ack_all(fx->c, tau, k_receivers, 3);
    assert_status(dcr_control_commit(fx->c, "coord", tau, &k0, base1, &k1), DCR_OK);
    assert_status(dcr_control_report_put(fx->c, 3, "report", 6), DCR_OK);
    assert_status(prepare(fx->c, "coord", 1, k_receivers, 3, 10000, &next), DCR_OK);
    dcr_control_destroy(fx->c);

    fx->c = open_handle(fx, 0);
    assert_record_is(fx->c, &k1);
    dcr_control_attempt_t info;
    assert_status(dcr_control_attempt(fx->c, 0, &info), DCR_OK);
    assert_true(info.tau == next && info.from_version == 1);
    void *got = NULL;
    size_t len = 0;
    assert_status(dcr_control_report_get(fx->c, 3, &got, &len), DCR_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(got, "report", 6);
    free(got);
    uint64_t after = 0;
    assert_status(prepare(fx->c, "other", 1, k_receivers, 3, 10000, &after), DCR_OK);
    assert_true(after > next);
    assert_status(prepare(fx->c, "coord", 1, k_receivers, 3, 10000, &after), DCR_ECONFLICT);
}

/* ---- a backend registered from outside the engine that wraps another -------- */

typedef struct wrap {
    dcr_control_t pub; /* first: the handle header */
    dcr_control_t *inner;
} wrap_t;

static bool g_wrap_down;       /* calls are refused before the wrapped backend */
static bool g_wrap_lose_reply; /* a commit that took effect reports a lost reply */
static int g_wrap_calls;

#define WRAP_ENTER(c)                                                                              \
    wrap_t *w = (wrap_t *)(c);                                                                     \
    g_wrap_calls++;                                                                                \
    if (g_wrap_down) return dcr_error_set(DCR_ECONTROL, "injected: control plane unavailable")

/* The table's header names the backend it wraps as its parent. */
static dcr_status_t wrap_create(const dcr_control_ops_t *self, const dcr_control_config_t *cfg,
                                dcr_control_t **out_p)
{
    const dcr_control_ops_t *parent = self->hdr.parent;
    wrap_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    dcr_status_t st = dcr_control_create(parent->hdr.name, cfg, &w->inner);
    if (st != DCR_OK) {
        free(w);
        return st;
    }
    *out_p = &w->pub;
    return DCR_OK;
}

static void wrap_destroy(dcr_control_t *c)
{
    wrap_t *w = (wrap_t *)c;
    dcr_control_destroy(w->inner);
    free(w);
}

static dcr_status_t wrap_read(dcr_control_t *c, dcr_commit_record_t *rec_p)
{
    WRAP_ENTER(c);
    dcr_status_t st = dcr_control_read(w->inner, rec_p);
    /* Scribbles on the out-parameter before failing: the wrapper must not
     * pass it on. */
    if (st == DCR_OK && g_wrap_lose_reply) {
        memset(rec_p, 0x55, sizeof *rec_p);
        return dcr_error_set(DCR_ECONTROL, "injected: reply lost");
    }
    return st;
}

static dcr_status_t wrap_cas(dcr_control_t *c, const dcr_commit_record_t *e,
                             const dcr_commit_record_t *d)
{
    WRAP_ENTER(c);
    return dcr_control_cas(w->inner, e, d);
}

static dcr_status_t wrap_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                 uint64_t *tau_p)
{
    WRAP_ENTER(c);
    return dcr_control_prepare(w->inner, req, tau_p);
}

static dcr_status_t wrap_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p)
{
    WRAP_ENTER(c);
    return dcr_control_attempt(w->inner, tau, info_p);
}

static dcr_status_t wrap_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                  size_t *n_p)
{
    WRAP_ENTER(c);
    return dcr_control_required(w->inner, tau, out, cap, n_p);
}

static dcr_status_t wrap_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver)
{
    WRAP_ENTER(c);
    return dcr_control_ack(w->inner, tau, receiver);
}

static dcr_status_t wrap_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                              size_t *n_p)
{
    WRAP_ENTER(c);
    return dcr_control_acks(w->inner, tau, out, cap, n_p);
}

static dcr_status_t wrap_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                const dcr_commit_record_t *expected,
                                const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                dcr_commit_record_t *rec_p)
{
    WRAP_ENTER(c);
    dcr_status_t st = dcr_control_commit(w->inner, coordinator, tau, expected, baseline, rec_p);
    if (st == DCR_OK && g_wrap_lose_reply)
        return dcr_error_set(DCR_ECONTROL, "injected: reply lost");
    return st;
}

static dcr_status_t wrap_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                    size_t len)
{
    WRAP_ENTER(c);
    return dcr_control_report_put(w->inner, receiver, data, len);
}

static dcr_status_t wrap_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                    size_t *len_p)
{
    WRAP_ENTER(c);
    return dcr_control_report_get(w->inner, receiver, data_p, len_p);
}

static dcr_status_t wrap_membership_put(dcr_control_t *c, const char *coordinator,
                                        const uint32_t *members, size_t n)
{
    WRAP_ENTER(c);
    return dcr_control_membership_put(w->inner, coordinator, members, n);
}

static dcr_status_t wrap_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p)
{
    WRAP_ENTER(c);
    return dcr_control_membership_get(w->inner, out, cap, n_p);
}

/* A fault-injecting backend registered from the test wraps the backend
 * under test: refused calls and lost replies reach the caller as errors
 * with its out-parameters untouched, and the commit whose reply was lost
 * took effect. */
static void test_wrapping_backend(void **state)
{
    fixture_t *fx = *state;
    static char names[4][64];
    static dcr_control_ops_t tables[4];
    static int ntables;
    char name[64];
    snprintf(name, sizeof name, "wrap:%s", g_backend);
    bool known = false;
    for (size_t i = 0; i < dcr_control_backend_count(); i++)
        known |= strcmp(dcr_control_backend_name(i), name) == 0;
    if (!known) {
        assert_true(ntables < 4);
        snprintf(names[ntables], sizeof names[ntables], "%s", name);
        const dcr_control_ops_t *parent = dcr_control_find(g_backend);
        tables[ntables] = (dcr_control_ops_t){
            .hdr = {.version = DCR_CONTROL_OPS_VERSION, .name = names[ntables], .parent = parent},
            .props = parent->props,
            .create = wrap_create,
            .destroy = wrap_destroy,
            .read = wrap_read,
            .cas = wrap_cas,
            .prepare = wrap_prepare,
            .attempt = wrap_attempt,
            .required = wrap_required,
            .ack = wrap_ack,
            .acks = wrap_acks,
            .commit = wrap_commit,
            .report_put = wrap_report_put,
            .report_get = wrap_report_get,
            .membership_put = wrap_membership_put,
            .membership_get = wrap_membership_get};
        assert_status(dcr_control_register(&tables[ntables]), DCR_OK);
        assert_status(dcr_control_register(&tables[ntables]), DCR_OK); /* again: a no-op */
        dcr_control_ops_t other = tables[ntables];
        assert_status(dcr_control_register(&other), DCR_EINVAL); /* name taken */
        ntables++;
    }
    dcr_control_ops_t partial = {.hdr.name = "wrap:partial", .create = wrap_create};
    assert_status(dcr_control_register(&partial), DCR_EINVAL);
    dcr_control_ops_t old = tables[0];
    old.hdr.name = "wrap:old-layout";
    old.hdr.version = DCR_CONTROL_OPS_VERSION - 1; /* written for another layout */
    assert_status(dcr_control_register(&old), DCR_EINVAL);
    dcr_control_config_t cfg = {fx->address, 0};
    dcr_control_t *c = NULL;
    assert_status(dcr_control_create(name, &cfg, &c), DCR_OK);
    assert_string_equal(dcr_control_name(c), name);

    dcr_commit_record_t k0 = bootstrap(c);
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    uint64_t tau = 0;
    assert_status(prepare(c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
    /* Without an ack_report slot: the acknowledgments, then the report,
     * and no report when they are refused. */
    const uint32_t stranger[] = {4};
    void *none = NULL;
    size_t none_len = 0;
    assert_status(dcr_control_ack_report(c, tau, stranger, 1, 12, "done", 4), DCR_EINVAL);
    assert_status(dcr_control_report_get(fx->c, 12, &none, &none_len), DCR_ENOTFOUND);
    assert_status(dcr_control_ack_report(c, tau, k_receivers, 3, 12, "done", 4), DCR_OK);
    assert_report_is(fx->c, 12, "done", 4);
    dcr_commit_record_t out, sentinel;
    memset(&sentinel, 0x77, sizeof sentinel);
    out = sentinel;
    /* Down: refused before the wrapped backend, nothing changes. */
    g_wrap_down = true;
    assert_status(dcr_control_commit(c, "coord", tau, &k0, base1, &out), DCR_ECONTROL);
    assert_memory_equal(&out, &sentinel, sizeof out);
    g_wrap_down = false;
    assert_record_is(fx->c, &k0);
    /* Lost reply: the commit takes effect, the caller sees an error and its
     * out-parameters untouched; reading the record tells it what happened. */
    g_wrap_lose_reply = true;
    assert_status(dcr_control_commit(c, "coord", tau, &k0, base1, &out), DCR_ECONTROL);
    assert_memory_equal(&out, &sentinel, sizeof out);
    assert_status(dcr_control_read(c, &out), DCR_ECONTROL);
    assert_memory_equal(&out, &sentinel, sizeof out);
    g_wrap_lose_reply = false;
    assert_status(dcr_control_read(c, &out), DCR_OK);
    assert_true(out.version == 1 && out.attempt == tau);
    assert_record_is(fx->c, &out); /* the backend under test holds it too */
    assert_true(g_wrap_calls >= 8);
    dcr_control_destroy(c);
}

static void test_invalid_arguments(void **state)
{
    fixture_t *fx = *state;
    dcr_control_t *c = fx->c;
    dcr_commit_record_t rec = {0};
    uint64_t tau = 0;
    dcr_control_config_t cfg = {fx->address, 0};
    dcr_control_t *none = NULL;
    assert_status(dcr_control_create("no-such-backend", &cfg, &none), DCR_ENOTFOUND);
    assert_null(none);
    cfg.timeout_ms = -1;
    assert_status(dcr_control_create(g_backend, &cfg, &none), DCR_EINVAL);
    dcr_control_destroy(NULL);
    assert_status(dcr_control_read(NULL, &rec), DCR_EINVAL);
    assert_status(dcr_control_read(c, NULL), DCR_EINVAL);
    rec.version = (uint64_t)INT64_MAX + 1;
    assert_status(dcr_control_cas(c, &rec, &rec), DCR_EINVAL);

    const char *bad_ids[] = {"", "has space", "tab\t", "\x80high",
                             "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        assert_status(prepare(c, bad_ids[i], 0, k_receivers, 3, 1000, &tau), DCR_EINVAL);
    }
    assert_status(prepare(c, NULL, 0, k_receivers, 3, 1000, &tau), DCR_EINVAL);
    const uint32_t dup[] = {4, 5, 4};
    assert_status(prepare(c, "coord", 0, dup, 3, 1000, &tau), DCR_EINVAL);
    assert_status(prepare(c, "coord", 0, k_receivers, 0, 1000, &tau), DCR_EINVAL);
    assert_status(prepare(c, "coord", 0, NULL, 3, 1000, &tau), DCR_EINVAL);
    assert_status(prepare(c, "coord", 0, k_receivers, 3, 0, &tau), DCR_EINVAL);
    assert_status(prepare(c, "coord", 0, k_receivers, DCR_CONTROL_RECEIVERS_MAX + 1, 1000, &tau),
                  DCR_EINVAL);
    assert_status(dcr_control_ack(c, 0, 1), DCR_EINVAL);
    size_t n = 0;
    assert_status(dcr_control_acks(c, 1, NULL, 4, &n), DCR_EINVAL);
    assert_status(dcr_control_required(c, 1, NULL, 0, NULL), DCR_EINVAL);
    assert_status(dcr_control_acks(c, 1, NULL, 0, &n), DCR_ENOTFOUND);
    uint8_t base[DCR_CONTROL_BASELINE_BYTES] = {0};
    assert_status(dcr_control_commit(c, "coord", 1, &rec, base, NULL), DCR_EINVAL);
    assert_status(dcr_control_report_put(c, 1, NULL, 5), DCR_EINVAL);
    assert_status(dcr_control_report_get(c, 1, NULL, &n), DCR_EINVAL);
    /* Nothing above may have changed the store. */
    dcr_commit_record_t zero = {0};
    assert_record_is(c, &zero);
    /* Every refusal leaves one clear line. */
    assert_status(prepare(c, "coord", 0, dup, 3, 1000, &tau), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_line(DCR_EINVAL), "receiver 4 is listed twice"));
}

/* ---- sqlite backend --------------------------------------------------------------------- */

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", sql, err);
    sqlite3_close(db);
}

static void test_sqlite_addresses(void **state)
{
    fixture_t *fx = *state;
    dcr_control_t *c = NULL;
    const char *refused[] = {":memory:", ""};
    for (size_t i = 0; i < 2; i++) {
        dcr_control_config_t cfg = {refused[i], 0};
        assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_EINVAL);
    }
    dcr_control_config_t cfg = {NULL, 0};
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_EINVAL);
    char missing[PATH_MAX + 32];
    snprintf(missing, sizeof missing, "%s/no/such/dir/control.db", fx->dir);
    cfg.address = missing;
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_ECONTROL);
    assert_non_null(strstr(dcr_error_detail(), missing));
    assert_null(c);

    /* The file is in WAL mode, so receivers can read while a commit is written. */
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    assert_int_equal(sqlite3_open(fx->address, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(stmt, 0), "wal");
    sqlite3_finalize(stmt);
    sqlite3_close(db);
}

/* A writer that holds the lock longer than the timeout makes calls fail with
 * DCR_ECONTROL after about the timeout, never hang. */
static void test_sqlite_busy_timeout(void **state)
{
    fixture_t *fx = *state;
    dcr_control_t *c = open_handle(fx, 100);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(fx->address, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dcr_commit_record_t rec = {0};
    assert_status(dcr_control_cas(c, &rec, &rec), DCR_ECONTROL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(waited >= 0.09 && waited < 3.0);
    assert_non_null(strstr(dcr_error_detail(), "busy"));
    /* WAL: reading is not blocked by the writer. */
    assert_status(dcr_control_read(c, &rec), DCR_OK);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_status(dcr_control_cas(c, &rec, &rec), DCR_OK);
    dcr_control_destroy(c);
}

/* A writer that finds the write lock held takes it soon after its release.
 * A transaction of the control plane holds it for about a millisecond, and
 * SQLite's own handler slept 1, 2, 5, 10, 15 ms between tries: a write
 * waiting on a 20 ms hold got the lock about 13 ms after the release. The
 * lag from the release to the write's return is compared with the same
 * write uncontended, the least of three tries of each, so that one slow
 * sync on a loaded disk does not decide. */
#define HOLD_MS 20
typedef struct lock_holder {
    const char *address;
    int ready[2];   /* a byte once the lock is held */
    double release; /* when the holder let the lock go */
} lock_holder_t;

static void *hold_write_lock(void *arg)
{
    lock_holder_t *h = arg;
    sqlite3 *db = NULL;
    bool held = sqlite3_open(h->address, &db) == SQLITE_OK &&
                sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
    if (write(h->ready[1], held ? "y" : "n", 1) != 1) held = false;
    if (held) usleep(HOLD_MS * 1000);
    h->release = dcr_clock_s();
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    return NULL;
}

static void test_sqlite_busy_handoff(void **state)
{
    fixture_t *fx = *state;
    dcr_commit_record_t rec;
    assert_status(dcr_control_read(fx->c, &rec), DCR_OK);
    double uncontended = 1e9, lag = 1e9;
    for (int i = 0; i < 3; i++) {
        double t0 = dcr_clock_s();
        assert_status(dcr_control_cas(fx->c, &rec, &rec), DCR_OK);
        double took = dcr_clock_s() - t0;
        if (took < uncontended) uncontended = took;
        lock_holder_t h = {.address = fx->address};
        assert_int_equal(pipe(h.ready), 0);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, hold_write_lock, &h), 0);
        char held = 0;
        assert_int_equal(read(h.ready[0], &held, 1), 1);
        dcr_status_t st = dcr_control_cas(fx->c, &rec, &rec);
        double done = dcr_clock_s();
        pthread_join(th, NULL);
        close(h.ready[0]);
        close(h.ready[1]);
        assert_int_equal(held, 'y');
        assert_status(st, DCR_OK);
        if (done - h.release < lag) lag = done - h.release;
    }
    printf("a write after a %d ms hold: %.2f ms from the release; uncontended %.2f ms\n", HOLD_MS,
           lag * 1e3, uncontended * 1e3);
    if (lag > uncontended + 0.006)
        fail_msg("a write took the lock %.2f ms after its release (uncontended %.2f ms)", lag * 1e3,
                 uncontended * 1e3);
}

static void test_sqlite_foreign_files(void **state)
{
    fixture_t *fx = *state;
    dcr_control_destroy(fx->c);
    fx->c = NULL;
    dcr_control_t *c = NULL;
    dcr_control_config_t cfg = {fx->address, 0};

    /* A file of schema version 1 (before membership) gains it when opened. */
    raw_exec(fx->address, "DROP TABLE dcr_member; DROP TABLE dcr_membership; "
                          "PRAGMA user_version = 1");
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_OK);
    uint32_t members[2];
    size_t n = 0;
    assert_status(dcr_control_membership_get(c, members, 2, &n), DCR_ENOTFOUND);
    assert_status(dcr_control_membership_put(c, "coord", k_receivers, 2), DCR_OK);
    assert_status(dcr_control_membership_get(c, members, 2, &n), DCR_OK);
    assert_true(n == 2 && members[0] == 3 && members[1] == 9);
    dcr_control_destroy(c);
    c = NULL;

    raw_exec(fx->address, "PRAGMA user_version = 99");
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_ECONTROL);
    assert_non_null(strstr(dcr_error_detail(), "schema version 99"));
    raw_exec(fx->address, "PRAGMA user_version = 1; PRAGMA application_id = 7");
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_ECONTROL);
    assert_non_null(strstr(dcr_error_detail(), "another application"));
    fixture_remove_files(fx);

    /* Not a database at all: garbage bytes where the file should be. */
    assert_int_equal(mkdir(fx->dir, 0700), 0);
    FILE *f = fopen(fx->address, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8192; i++) fputc((i * 7919) & 0xff, f);
    fclose(f);
    assert_status(dcr_control_create("sqlite", &cfg, &c), DCR_ECONTROL);
    assert_null(c);
}

/* The calls run_op makes. */
typedef enum dcr_control_op {
    DCR_CONTROL_OP_READ,
    DCR_CONTROL_OP_CAS,
    DCR_CONTROL_OP_PREPARE,
    DCR_CONTROL_OP_ATTEMPT,
    DCR_CONTROL_OP_REQUIRED,
    DCR_CONTROL_OP_ACK,
    DCR_CONTROL_OP_ACKS,
    DCR_CONTROL_OP_COMMIT,
    DCR_CONTROL_OP_REPORT_PUT,
    DCR_CONTROL_OP_REPORT_GET,
    DCR_CONTROL_OP_MEMBERSHIP_PUT,
    DCR_CONTROL_OP_MEMBERSHIP_GET,
} dcr_control_op_t;

/* Damage done to the file between two calls, and the call that must notice. */
typedef struct corruption {
    const char *sql;
    dcr_control_op_t op;
    const char *field; /* expected in the error detail */
} corruption_t;

static const corruption_t k_corruptions[] = {
    {"UPDATE dcr_record SET baseline = x'00'", DCR_CONTROL_OP_READ, "dcr_record.baseline"},
    {"UPDATE dcr_record SET baseline = 'text'", DCR_CONTROL_OP_COMMIT, "dcr_record.baseline"},
    {"UPDATE dcr_record SET version = 'seven'", DCR_CONTROL_OP_READ, "dcr_record.version"},
    {"UPDATE dcr_record SET version = -3", DCR_CONTROL_OP_PREPARE, "dcr_record.version"},
    {"UPDATE dcr_record SET attempt = 2.5", DCR_CONTROL_OP_CAS, "dcr_record.attempt"},
    {"UPDATE dcr_record SET committed_ns = -1", DCR_CONTROL_OP_READ, "dcr_record.committed_ns"},
    {"DELETE FROM dcr_record", DCR_CONTROL_OP_READ, "dcr_record"},
    {"UPDATE dcr_attempt SET coordinator = ''", DCR_CONTROL_OP_ATTEMPT, "dcr_attempt.coordinator"},
    {"UPDATE dcr_attempt SET coordinator = x'0102'", DCR_CONTROL_OP_PREPARE,
     "dcr_attempt.coordinator"},
    {"UPDATE dcr_attempt SET coordinator = 'has space'", DCR_CONTROL_OP_ACK,
     "dcr_attempt.coordinator"},
    {"UPDATE dcr_attempt SET deadline_ns = prepared_ns - 1", DCR_CONTROL_OP_ATTEMPT,
     "dcr_attempt.deadline_ns"},
    {"UPDATE dcr_attempt SET n_required = 0", DCR_CONTROL_OP_COMMIT, "dcr_attempt.n_required"},
    {"UPDATE dcr_attempt SET from_version = 'x'", DCR_CONTROL_OP_REQUIRED,
     "dcr_attempt.from_version"},
    {"INSERT INTO dcr_required SELECT max(tau), 99 FROM dcr_attempt", DCR_CONTROL_OP_REQUIRED,
     "dcr_required"},
    {"UPDATE dcr_required SET receiver = -1 WHERE receiver = 3", DCR_CONTROL_OP_REQUIRED,
     "dcr_required.receiver"},
    {"UPDATE dcr_ack SET receiver = 1 << 40 WHERE receiver = 3", DCR_CONTROL_OP_ACKS,
     "dcr_ack.receiver"},
    {"INSERT INTO dcr_ack SELECT max(tau), 50 FROM dcr_attempt", DCR_CONTROL_OP_ACKS, "dcr_ack"},
    {"UPDATE dcr_report SET body = 42", DCR_CONTROL_OP_REPORT_GET, "dcr_report.body"},
    {"UPDATE dcr_report SET body = 'text'", DCR_CONTROL_OP_REPORT_GET, "dcr_report.body"},
    {"UPDATE dcr_member SET receiver = -4 WHERE receiver = 3", DCR_CONTROL_OP_MEMBERSHIP_GET,
     "dcr_member.receiver"},
    {"DELETE FROM dcr_member WHERE receiver = 3", DCR_CONTROL_OP_MEMBERSHIP_GET, "dcr_member"},
    {"UPDATE dcr_membership SET n_members = 'x'", DCR_CONTROL_OP_MEMBERSHIP_GET,
     "dcr_membership.n_members"},
    {"UPDATE dcr_attempt SET coordinator = 'has space'", DCR_CONTROL_OP_MEMBERSHIP_PUT,
     "dcr_attempt.coordinator"},
};

static dcr_status_t run_op(dcr_control_t *c, dcr_control_op_t op, uint64_t tau,
                           const dcr_commit_record_t *k0)
{
    dcr_commit_record_t rec;
    dcr_control_attempt_t info;
    uint32_t list[8];
    size_t n;
    void *data = NULL;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    switch (op) {
    case DCR_CONTROL_OP_READ:
        return dcr_control_read(c, &rec);
    case DCR_CONTROL_OP_CAS:
        return dcr_control_cas(c, k0, k0);
    case DCR_CONTROL_OP_PREPARE:
        return prepare(c, "coord", 0, k_receivers, 3, 10000, &tau);
    case DCR_CONTROL_OP_ATTEMPT:
        return dcr_control_attempt(c, 0, &info);
    case DCR_CONTROL_OP_REQUIRED:
        return dcr_control_required(c, tau, list, 8, &n);
    case DCR_CONTROL_OP_ACK:
        return dcr_control_ack(c, tau, 3);
    case DCR_CONTROL_OP_ACKS:
        return dcr_control_acks(c, tau, list, 8, &n);
    case DCR_CONTROL_OP_COMMIT:
        return dcr_control_commit(c, "coord", tau, k0, base1, &rec);
    case DCR_CONTROL_OP_REPORT_PUT:
        return dcr_control_report_put(c, 3, "r", 1);
    case DCR_CONTROL_OP_REPORT_GET: {
        dcr_status_t st = dcr_control_report_get(c, 3, &data, &n);
        free(data);
        return st;
    }
    case DCR_CONTROL_OP_MEMBERSHIP_PUT:
        return dcr_control_membership_put(c, "coord", k_receivers, 3);
    case DCR_CONTROL_OP_MEMBERSHIP_GET:
        return dcr_control_membership_get(c, list, 8, &n);
    }
    return DCR_EINVAL;
}

static void test_sqlite_malformed_rows(void **state)
{
    fixture_t *fx = *state;
    for (size_t i = 0; i < sizeof k_corruptions / sizeof k_corruptions[0]; i++) {
        const corruption_t *k = &k_corruptions[i];
        /* A fresh store with every table populated: a committed record, an
         * open attempt with all acks, and a report. */
        dcr_control_destroy(fx->c);
        fixture_remove_files(fx);
        assert_int_equal(mkdir(fx->dir, 0700), 0);
        fx->c = open_handle(fx, 0);
        dcr_commit_record_t k0 = bootstrap(fx->c);
        uint64_t tau = 0;
        assert_status(prepare(fx->c, "coord", 0, k_receivers, 3, 10000, &tau), DCR_OK);
        ack_all(fx->c, tau, k_receivers, 3);
        assert_status(dcr_control_report_put(fx->c, 3, "report", 6), DCR_OK);
        assert_status(dcr_control_membership_put(fx->c, "coord", k_receivers, 3), DCR_OK);

        raw_exec(fx->address, k->sql);
        dcr_error_clear();
        dcr_status_t st = run_op(fx->c, k->op, tau, &k0);
        if (st != DCR_ECONTROL || strstr(dcr_error_detail(), k->field) == NULL) {
            fail_msg("after \"%s\": got %s (%s), want control error naming %s", k->sql,
                     dcr_status_str(st), dcr_error_detail(), k->field);
        }
        print_message("%s -> %s\n", k->sql, dcr_error_line(st));
    }
}

/* ---- main ------------------------------------------------------------------------------- */

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Sets g_kind to the kind of store g_backend's props say it opens, and
 * checks that the backend opens one there; false if not. */
static bool probe_kind(void)
{
    g_kind = dcr_control_find(g_backend)->props.networked ? STORE_ETCD : STORE_FILE;
    fixture_t probe = {0};
    if (!fixture_address_of(&probe, g_kind)) return false;
    dcr_control_config_t cfg = {probe.address, 2000};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create(g_backend, &cfg, &c);
    dcr_control_destroy(c);
    fixture_remove_files(&probe);
    return st == DCR_OK;
}

int main(void)
{
    const struct CMUnitTest conformance[] = {
        CASE(test_initial_record_is_empty),
        CASE(test_cas_success_and_conflict),
        CASE(test_tau_strictly_increasing),
        CASE(test_prepare_needs_committed_version),
        CASE(test_replaced_coordinator_refused),
        CASE(test_commit_publishes_next_version),
        CASE(test_acks_idempotent_and_keyed_by_tau),
        CASE(test_ack_many_all_or_none),
        CASE(test_ack_report_all_or_none),
        CASE(test_required_set_is_fixed),
        CASE(test_deadline_expiry),
        CASE(test_prewarm_reports_round_trip),
        CASE(test_concurrent_cas_threads),
        CASE(test_concurrent_prepare_and_commit_threads),
        CASE(test_concurrent_cas_processes),
        CASE(test_reopen_preserves_state),
        CASE(test_membership),
        CASE(test_wrapping_backend),
        CASE(test_invalid_arguments),
    };
    const struct CMUnitTest sqlite_only[] = {
        CASE(test_sqlite_addresses),      CASE(test_sqlite_busy_timeout),
        CASE(test_sqlite_busy_handoff),   CASE(test_sqlite_foreign_files),
        CASE(test_sqlite_malformed_rows),
    };
    int failed = 0;
    /* One test by name (a glob), as in test_faults: DCR_TEST_FILTER. */
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    assert_true(dcr_control_backend_count() >= 1);
    if (!etcd_server_start(&g_etcd)) {
        fprintf(stderr, "FAILED: cannot start etcd for the control-plane conformance suite\n");
        return 1;
    }
    /* The backends there are now: test_wrapping_backend adds its own. */
    for (size_t i = 0, n = dcr_control_backend_count(); i < n; i++) {
        g_backend = dcr_control_backend_name(i);
        if (!probe_kind()) {
            fprintf(stderr, "FAILED: control backend %s does not open the address its props name\n",
                    g_backend);
            failed++;
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "control conformance: %s", g_backend);
        failed += cmocka_run_group_tests_name(name, conformance, NULL, NULL);
    }
    etcd_server_stop(&g_etcd);
    g_backend = "sqlite";
    g_kind = STORE_FILE;
    failed += cmocka_run_group_tests_name("control sqlite", sqlite_only, NULL, NULL);
    return failed;
}
