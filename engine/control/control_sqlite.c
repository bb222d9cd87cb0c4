/* The SQLite control-plane backend: the embedded default, one database file
 * that every process of a run opens by name.
 *
 * Why it is safe across processes: the file is in WAL mode with a busy
 * timeout, every state change runs in one BEGIN IMMEDIATE transaction (which
 * takes the single write lock before reading anything), so racing prepares,
 * acks, commits and compare-and-sets from any number of connections execute
 * one after another and each sees the last one's result. synchronous=FULL
 * makes a returned commit survive a power loss, not just a process crash;
 * acknowledgments and reports are written with NORMAL (dcr__sq_txn_unsynced
 * says why: the commit that counts acknowledgments makes them durable, and
 * a report is a party's status, which a power loss ends with the party).
 *
 * Why it never trusts the file: other tools, disks and older builds can leave
 * anything in it, so every value read back is checked for type and range and
 * a bad one is a DCR_ECONTROL error naming the table and field.
 *
 * Attempts older than the last commit are pruned at that commit (their
 * acknowledgments can never count again); coordinators are remembered forever
 * so a replaced one stays refused. */
#include "control-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/clock.h"

#define DCR__SQ_SCHEMA_VERSION 2
/* PRAGMA application_id marks the file as ours: "dcr1" as a big-endian word. */
#define DCR__SQ_APP_ID          1684238897
#define DCR__SQ_DEFAULT_TIMEOUT 5000
#define DCR__SQ_STR(x)          #x
#define DCR__SQ_XSTR(x)         DCR__SQ_STR(x)
/* The longest a wait sleeps on the wake file before it looks at the data
 * version again: what a lost poke costs a waiter at most. */
#define DCR__SQ_WAKE_FALLBACK_MS 50
/* Without a wake file (no inotify): the naps of a wait, doubling from the
 * first to the last while nothing changes. */
#define DCR__SQ_NAP_MIN_US 500
#define DCR__SQ_NAP_MAX_US 8000
/* A try for a lock held by another connection: the sleeps before the next
 * try, doubling from the first to the last (dcr__sq_busy says why). */
#define DCR__SQ_BUSY_MIN_US 50
#define DCR__SQ_BUSY_MAX_US 2000

typedef struct dcr__sq {
    dcr_control_t pub; /* first: the handle header */
    sqlite3 *db;
    /* One connection cannot run two transactions at once, so threads sharing
     * a handle take turns for a whole transaction. */
    pthread_mutex_t mu;
    char *path;
    int timeout_ms;
    /* Change notification: the wake file every committing handle pokes,
     * and this handle's own committed writes, which its connection's data
     * version does not count (dcr__sq_position). */
    dcr__wake_t wake;
    atomic_uint_fast64_t own_writes;
    uint64_t busy_since_ns; /* the first failed try for the lock now awaited */
} dcr__sq_t;

static dcr__sq_t *dcr__sq_of(dcr_control_t *c)
{
    return (dcr__sq_t *)c;
}

static const char dcr__sq_schema[] =
    "CREATE TABLE dcr_record(id INTEGER PRIMARY KEY, version INTEGER NOT NULL,"
    " baseline BLOB NOT NULL, attempt INTEGER NOT NULL, committed_ns INTEGER NOT NULL);"
    "INSERT INTO dcr_record VALUES(1, 0, zeroblob(32), 0, 0);"
    "CREATE TABLE dcr_attempt(tau INTEGER PRIMARY KEY, coordinator TEXT NOT NULL,"
    " from_version INTEGER NOT NULL, prepared_ns INTEGER NOT NULL,"
    " deadline_ns INTEGER NOT NULL, n_required INTEGER NOT NULL);"
    "CREATE TABLE dcr_coordinator(id TEXT PRIMARY KEY) WITHOUT ROWID;"
    "CREATE TABLE dcr_required(tau INTEGER NOT NULL, receiver INTEGER NOT NULL,"
    " PRIMARY KEY(tau, receiver)) WITHOUT ROWID;"
    "CREATE TABLE dcr_ack(tau INTEGER NOT NULL, receiver INTEGER NOT NULL,"
    " PRIMARY KEY(tau, receiver)) WITHOUT ROWID;"
    "CREATE TABLE dcr_report(receiver INTEGER PRIMARY KEY, body BLOB NOT NULL);"
    "PRAGMA application_id = " DCR__SQ_XSTR(DCR__SQ_APP_ID) ";"
                                                            "PRAGMA user_version = 1;";

/* Version 2 adds the receiver membership: one row saying who recorded it
 * last (its absence: never recorded) and one row per member. */
static const char dcr__sq_schema_v2[] =
    "CREATE TABLE dcr_membership(id INTEGER PRIMARY KEY, coordinator TEXT NOT NULL,"
    " changed_ns INTEGER NOT NULL, n_members INTEGER NOT NULL);"
    "CREATE TABLE dcr_member(receiver INTEGER PRIMARY KEY);"
    "PRAGMA user_version = 2;";

/* ---- errors and statements ---------------------------------------------- */

static dcr_status_t dcr__sq_fail(dcr__sq_t *s, const char *what)
{
    int rc = sqlite3_errcode(s->db);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
        return dcr_error_set(DCR_ECONTROL, "%s: %s: busy for more than %d ms", s->path, what,
                             s->timeout_ms);
    }
    return dcr_error_set(DCR_ECONTROL, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static dcr_status_t dcr__sq_malformed(dcr__sq_t *s, const char *field, const char *expected)
{
    return dcr_error_set(DCR_ECONTROL, "%s: malformed %s: expected %s", s->path, field, expected);
}

static dcr_status_t dcr__sq_exec(dcr__sq_t *s, const char *sql, const char *what)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return dcr__sq_fail(s, what);
    return DCR_OK;
}

static dcr_status_t dcr__sq_stmt(dcr__sq_t *s, const char *sql, sqlite3_stmt **stmt_p)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, stmt_p, NULL) != SQLITE_OK) {
        *stmt_p = NULL;
        return dcr__sq_fail(s, "prepare statement");
    }
    return DCR_OK;
}

/* Runs a statement that returns no rows; binds are done by the caller. */
static dcr_status_t dcr__sq_run(dcr__sq_t *s, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step(stmt);
    dcr_status_t st = rc == SQLITE_DONE ? DCR_OK : dcr__sq_fail(s, what);
    sqlite3_finalize(stmt);
    return st;
}

/* ---- validated column reads ---------------------------------------------- */

static dcr_status_t dcr__sq_int(dcr__sq_t *s, sqlite3_stmt *stmt, int col, int64_t lo, int64_t hi,
                                const char *field, int64_t *out_p)
{
    if (sqlite3_column_type(stmt, col) != SQLITE_INTEGER) {
        return dcr__sq_malformed(s, field, "an integer");
    }
    int64_t v = sqlite3_column_int64(stmt, col);
    if (v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, "an integer in [%lld, %lld], found %lld", (long long)lo,
                 (long long)hi, (long long)v);
        return dcr__sq_malformed(s, field, range);
    }
    *out_p = v;
    return DCR_OK;
}

static dcr_status_t dcr__sq_u64(dcr__sq_t *s, sqlite3_stmt *stmt, int col, const char *field,
                                uint64_t *out_p)
{
    int64_t v = 0;
    DCR_CHECK(dcr__sq_int(s, stmt, col, 0, INT64_MAX, field, &v));
    *out_p = (uint64_t)v;
    return DCR_OK;
}

static dcr_status_t dcr__sq_receiver(dcr__sq_t *s, sqlite3_stmt *stmt, int col, const char *field,
                                     uint32_t *out_p)
{
    int64_t v = 0;
    DCR_CHECK(dcr__sq_int(s, stmt, col, 0, UINT32_MAX, field, &v));
    *out_p = (uint32_t)v;
    return DCR_OK;
}

/* ---- transactions ---------------------------------------------------------- */

typedef dcr_status_t (*dcr__sq_body_fn)(dcr__sq_t *s, void *ctx);

/* Runs body inside one transaction, committing only if it succeeded. Writers
 * use BEGIN IMMEDIATE: taking the write lock up front is what makes a racing
 * read-check-write sequence atomic, and it is where the busy timeout applies
 * (a deferred transaction that upgrades later can fail without waiting). */
static dcr_status_t dcr__sq_txn_locked(dcr__sq_t *s, bool write, dcr__sq_body_fn body, void *ctx)
{
    dcr_status_t st = dcr__sq_exec(s, write ? "BEGIN IMMEDIATE" : "BEGIN", "begin transaction");
    if (st == DCR_OK) {
        st = body(s, ctx);
        if (st == DCR_OK) st = dcr__sq_exec(s, "COMMIT", "commit transaction");
        if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    return st;
}

/* After a write transaction: a committed one is a change the waiters of
 * every handle must hear of (the poke comes after the commit, so what
 * wakes them is already readable). */
static void dcr__sq_changed(dcr__sq_t *s, dcr_status_t st)
{
    if (st != DCR_OK) return;
    atomic_fetch_add(&s->own_writes, 1);
    dcr__wake_poke(&s->wake);
}

static dcr_status_t dcr__sq_txn(dcr__sq_t *s, bool write, dcr__sq_body_fn body, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    dcr_status_t st = dcr__sq_txn_locked(s, write, body, ctx);
    pthread_mutex_unlock(&s->mu);
    if (write) dcr__sq_changed(s, st);
    return st;
}

/* A write transaction that returns without waiting for the disk
 * (synchronous=NORMAL for it alone): for acknowledgments and reports (see
 * dcr__sq_report_put for reports). Why that is
 * enough: WAL appends transactions in order and a FULL commit syncs the log
 * up to itself, so every acknowledgment a commit counted is on disk once
 * that commit returns. An acknowledgment lost to a power failure before its
 * commit leaves the attempt uncommitted (a commit needs every one), which
 * the coordinator retries as after any failure; and the WAL needs every
 * process on one host, so the power failure also ended the receiver that
 * acknowledged. Each FULL acknowledgment cost an fsync (8-86 ms per refit
 * on a loaded machine) on the critical path as processes. */
static dcr_status_t dcr__sq_txn_unsynced(dcr__sq_t *s, dcr__sq_body_fn body, void *ctx)
{
    pthread_mutex_lock(&s->mu);
    dcr_status_t st = dcr__sq_exec(s, "PRAGMA synchronous = NORMAL", "relax synchronous");
    if (st == DCR_OK) st = dcr__sq_txn_locked(s, true, body, ctx);
    /* Back to FULL whatever happened: every other write must be durable. */
    dcr_status_t back = dcr__sq_exec(s, "PRAGMA synchronous = FULL", "set synchronous");
    pthread_mutex_unlock(&s->mu);
    dcr__sq_changed(s, st);
    return st != DCR_OK ? st : back;
}

/* ---- rows ------------------------------------------------------------------ */

static dcr_status_t dcr__sq_record_row(dcr__sq_t *s, sqlite3_stmt *stmt, dcr_commit_record_t *rec)
{
    int64_t ts = 0;
    DCR_CHECK(dcr__sq_u64(s, stmt, 0, "dcr_record.version", &rec->version));
    if (sqlite3_column_type(stmt, 1) != SQLITE_BLOB ||
        sqlite3_column_bytes(stmt, 1) != DCR_CONTROL_BASELINE_BYTES) {
        return dcr__sq_malformed(s, "dcr_record.baseline", "a 32-byte blob");
    }
    memcpy(rec->baseline, sqlite3_column_blob(stmt, 1), DCR_CONTROL_BASELINE_BYTES);
    DCR_CHECK(dcr__sq_u64(s, stmt, 2, "dcr_record.attempt", &rec->attempt));
    DCR_CHECK(dcr__sq_int(s, stmt, 3, 0, INT64_MAX, "dcr_record.committed_ns", &ts));
    rec->committed_ns = ts;
    return DCR_OK;
}

static dcr_status_t dcr__sq_load_record(dcr__sq_t *s, dcr_commit_record_t *rec_p)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(
        s, "SELECT version, baseline, attempt, committed_ns FROM dcr_record WHERE id = 1", &stmt));
    int rc = sqlite3_step(stmt);
    dcr_commit_record_t rec = {0};
    dcr_status_t st;
    if (rc == SQLITE_ROW) {
        st = dcr__sq_record_row(s, stmt, &rec);
    } else if (rc == SQLITE_DONE) {
        st = dcr__sq_malformed(s, "dcr_record", "one commit record row, found none");
    } else {
        st = dcr__sq_fail(s, "read commit record");
    }
    sqlite3_finalize(stmt);
    if (st == DCR_OK) *rec_p = rec;
    return st;
}

static dcr_status_t dcr__sq_attempt_row(dcr__sq_t *s, sqlite3_stmt *stmt, dcr_control_attempt_t *a)
{
    int64_t v = 0;
    DCR_CHECK(dcr__sq_u64(s, stmt, 0, "dcr_attempt.tau", &a->tau));
    if (a->tau == 0) return dcr__sq_malformed(s, "dcr_attempt.tau", "a positive integer");
    /* The type must be read before the text: reading converts the value. */
    bool is_text = sqlite3_column_type(stmt, 1) == SQLITE_TEXT;
    const char *coord = (const char *)sqlite3_column_text(stmt, 1);
    if (!is_text || !dcr__control_id_valid(coord)) {
        return dcr__sq_malformed(s, "dcr_attempt.coordinator", "1..63 printable ASCII characters");
    }
    strcpy(a->coordinator, coord);
    DCR_CHECK(dcr__sq_u64(s, stmt, 2, "dcr_attempt.from_version", &a->from_version));
    DCR_CHECK(dcr__sq_int(s, stmt, 3, 0, INT64_MAX, "dcr_attempt.prepared_ns", &v));
    a->prepared_ns = v;
    DCR_CHECK(dcr__sq_int(s, stmt, 4, a->prepared_ns, INT64_MAX, "dcr_attempt.deadline_ns", &v));
    a->deadline_ns = v;
    DCR_CHECK(dcr__sq_int(s, stmt, 5, 1, DCR_CONTROL_RECEIVERS_MAX, "dcr_attempt.n_required", &v));
    a->n_required = (uint32_t)v;
    return DCR_OK;
}

/* Attempt tau, or the latest one when tau is 0. *found_p tells whether it
 * exists; a missing attempt is not an error here because callers decide. */
static dcr_status_t dcr__sq_load_attempt(dcr__sq_t *s, uint64_t tau, dcr_control_attempt_t *a_p,
                                         bool *found_p)
{
    static const char cols[] =
        "SELECT tau, coordinator, from_version, prepared_ns, deadline_ns, n_required "
        "FROM dcr_attempt ";
    char sql[256];
    snprintf(sql, sizeof sql, "%s%s", cols,
             tau == 0 ? "ORDER BY tau DESC LIMIT 1" : "WHERE tau = ?1");
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, sql, &stmt));
    if (tau != 0) sqlite3_bind_int64(stmt, 1, (int64_t)tau);
    int rc = sqlite3_step(stmt);
    dcr_control_attempt_t a;
    dcr_status_t st = DCR_OK;
    if (rc == SQLITE_ROW) {
        st = dcr__sq_attempt_row(s, stmt, &a);
    } else if (rc != SQLITE_DONE) {
        st = dcr__sq_fail(s, "read attempt");
    }
    sqlite3_finalize(stmt);
    if (st != DCR_OK) return st;
    *found_p = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW) *a_p = a;
    return DCR_OK;
}

static dcr_status_t dcr__sq_not_found(dcr__sq_t *s, uint64_t tau)
{
    return dcr_error_set(DCR_ENOTFOUND, "%s: attempt %llu does not exist", s->path,
                         (unsigned long long)tau);
}

/* Resolves tau for ack and commit, which only the latest attempt may do. */
static dcr_status_t dcr__sq_load_latest_as(dcr__sq_t *s, uint64_t tau, dcr_control_attempt_t *a_p)
{
    dcr_control_attempt_t latest;
    bool found = false;
    DCR_CHECK(dcr__sq_load_attempt(s, 0, &latest, &found));
    if (!found || tau > latest.tau) return dcr__sq_not_found(s, tau);
    if (tau < latest.tau) {
        return dcr_error_set(DCR_ECONFLICT,
                             "%s: attempt %llu was replaced by attempt %llu of "
                             "coordinator %s",
                             s->path, (unsigned long long)tau, (unsigned long long)latest.tau,
                             latest.coordinator);
    }
    *a_p = latest;
    return DCR_OK;
}

/* Steps a bound statement whose rows are receiver ids (column 0 of `field`)
 * and finalizes it: min(cap, n) of them to out, n to *n_p. */
static dcr_status_t dcr__sq_step_receivers(dcr__sq_t *s, sqlite3_stmt *stmt, const char *field,
                                           uint32_t *out, size_t cap, size_t *n_p)
{
    dcr_status_t st = DCR_OK;
    size_t n = 0;
    int rc = SQLITE_DONE;
    while (st == DCR_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        uint32_t r;
        st = dcr__sq_receiver(s, stmt, 0, field, &r);
        if (st == DCR_OK && n < cap) out[n] = r;
        n++;
    }
    if (st == DCR_OK && rc != SQLITE_DONE) st = dcr__sq_fail(s, "read receivers");
    sqlite3_finalize(stmt);
    if (st == DCR_OK) *n_p = n;
    return st;
}

/* Receivers of one attempt from table (dcr_required or dcr_ack), ascending. */
static dcr_status_t dcr__sq_load_receivers(dcr__sq_t *s, const char *table, uint64_t tau,
                                           uint32_t *out, size_t cap, size_t *n_p)
{
    char sql[128], field[64];
    snprintf(sql, sizeof sql, "SELECT receiver FROM %s WHERE tau = ?1 ORDER BY receiver", table);
    snprintf(field, sizeof field, "%s.receiver", table);
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, sql, &stmt));
    sqlite3_bind_int64(stmt, 1, (int64_t)tau);
    return dcr__sq_step_receivers(s, stmt, field, out, cap, n_p);
}

/* ---- create and destroy ------------------------------------------------ */

static dcr_status_t dcr__sq_pragma_int(dcr__sq_t *s, const char *sql, int64_t *out_p)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, sql, &stmt));
    dcr_status_t st = DCR_OK;
    if (sqlite3_step(stmt) != SQLITE_ROW) {
        st = dcr__sq_fail(s, sql);
    } else {
        *out_p = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    return st;
}

/* Creates the schema in an empty file, or checks that a non-empty one is a
 * dcr control plane of this schema version. Runs inside BEGIN IMMEDIATE so
 * two processes opening a new file at once create it once. */
static dcr_status_t dcr__sq_init_body(dcr__sq_t *s, void *ctx)
{
    (void)ctx;
    int64_t app = 0, version = 0, tables = 0;
    DCR_CHECK(dcr__sq_pragma_int(s, "PRAGMA application_id", &app));
    DCR_CHECK(dcr__sq_pragma_int(s, "PRAGMA user_version", &version));
    DCR_CHECK(dcr__sq_pragma_int(s, "SELECT count(*) FROM sqlite_master", &tables));
    if (app == 0 && version == 0 && tables == 0) {
        DCR_CHECK(dcr__sq_exec(s, dcr__sq_schema, "create schema"));
        app = DCR__SQ_APP_ID;
        version = 1;
    }
    if (app == DCR__SQ_APP_ID && version == 1) {
        /* Files of version 1 (no membership) gain it in place. */
        DCR_CHECK(dcr__sq_exec(s, dcr__sq_schema_v2, "add the membership to the schema"));
        version = 2;
    }
    if (app != DCR__SQ_APP_ID) {
        return dcr_error_set(DCR_ECONTROL,
                             "%s: the file is an SQLite database of another "
                             "application (application_id %lld), not a dcr control plane",
                             s->path, (long long)app);
    }
    if (version != DCR__SQ_SCHEMA_VERSION) {
        return dcr_error_set(DCR_ECONTROL, "%s: schema version %lld, this build reads version %d",
                             s->path, (long long)version, DCR__SQ_SCHEMA_VERSION);
    }
    return DCR_OK;
}

/* ---- the file is checked before anything is written to it ---------------- */

static uint32_t dcr__sq_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static dcr_status_t dcr__sq_foreign(const dcr__sq_t *s, long long app)
{
    return dcr_error_set(DCR_ECONTROL,
                         "%s: the file is an SQLite database of another application "
                         "(application_id %lld), not a dcr control plane; left untouched",
                         s->path, app);
}

/* A read-only look at a file whose header carries no application_id: dcr's
 * own file while its creator's schema is still only in the WAL, an empty
 * database, or someone else's. A read-only connection writes nothing to the
 * database file (a WAL-mode file may get its -shm index). */
static dcr_status_t dcr__sq_peek_readonly(const dcr__sq_t *s)
{
    sqlite3 *db = NULL;
    long long v[3] = {-1, -1, -1};
    static const char *const sql[3] = {"PRAGMA application_id", "PRAGMA user_version",
                                       "SELECT count(*) FROM sqlite_master"};
    int rc = sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    for (int i = 0; i < 3 && rc == SQLITE_OK; i++) {
        sqlite3_stmt *stmt = NULL;
        rc = sqlite3_prepare_v2(db, sql[i], -1, &stmt, NULL);
        if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
            v[i] = sqlite3_column_int64(stmt, 0);
        else if (rc == SQLITE_OK)
            rc = sqlite3_errcode(db);
        sqlite3_finalize(stmt);
    }
    dcr_status_t st = DCR_OK;
    if (rc != SQLITE_OK)
        st =
            dcr_error_set(DCR_ECONTROL, "%s: cannot read it as a control plane: %s; left untouched",
                          s->path, db != NULL ? sqlite3_errmsg(db) : "out of memory");
    else if (v[0] != DCR__SQ_APP_ID && !(v[0] == 0 && v[1] == 0 && v[2] == 0))
        st = dcr__sq_foreign(s, v[0]);
    sqlite3_close_v2(db);
    return st;
}

/* Before the read-write open (which switches the file to WAL, moving its
 * change counter): a new name or an empty file is fine; anything else must
 * be an SQLite file whose header says dcr (application_id) at a schema
 * version this build reads, or, without an id, a database that a read-only
 * look finds empty or dcr's. A foreign file is refused unchanged. */
static dcr_status_t dcr__sq_precheck(const dcr__sq_t *s)
{
    int fd = open(s->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return DCR_OK;
        return dcr_error_set(DCR_ECONTROL, "%s: %s", s->path, strerror(errno));
    }
    struct stat sb;
    unsigned char h[100];
    ssize_t n = -1;
    bool regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    if (regular && sb.st_size > 0) n = pread(fd, h, sizeof h, 0);
    close(fd);
    if (!regular)
        return dcr_error_set(DCR_ECONTROL, "%s: not a regular file; left untouched", s->path);
    if (sb.st_size == 0) return DCR_OK;
    if (n != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        return dcr_error_set(DCR_ECONTROL,
                             "%s: not an SQLite database, not a dcr control plane; left untouched",
                             s->path);
    uint32_t app = dcr__sq_be32(h + 68), version = dcr__sq_be32(h + 60);
    if (app == DCR__SQ_APP_ID) {
        if (version > DCR__SQ_SCHEMA_VERSION)
            return dcr_error_set(DCR_ECONTROL,
                                 "%s: schema version %u, this build reads version %d; left "
                                 "untouched",
                                 s->path, version, DCR__SQ_SCHEMA_VERSION);
        return DCR_OK;
    }
    if (app != 0) return dcr__sq_foreign(s, (long long)app);
    return dcr__sq_peek_readonly(s);
}

/* SQLite's busy handler (sqlite3_busy_timeout) for a lock another
 * connection holds: sleeps 1, 2, 5, 10, ... ms between tries. A transaction
 * of this control plane holds the write lock for 0.1-1 ms (an
 * acknowledgment, a report, a commit's sync), so a writer that found it
 * held tried again up to milliseconds after its release, on the refit's
 * path as processes (two nodes report at the same moment). This one tries
 * again after 50 us, doubling to 2 ms, until the handle's timeout has passed
 * since the first try. It runs inside a call on the connection, which
 * holds the handle's lock (s->mu), so busy_since_ns has one writer. */
static int dcr__sq_busy(void *ctx, int tries)
{
    dcr__sq_t *s = ctx;
    uint64_t now = dcr_clock_ns();
    if (tries == 0) s->busy_since_ns = now;
    if (now - s->busy_since_ns >= (uint64_t)s->timeout_ms * 1000000u) return 0;
    unsigned sleep_us = DCR__SQ_BUSY_MAX_US;
    if (tries < 6 && (DCR__SQ_BUSY_MIN_US << tries) < DCR__SQ_BUSY_MAX_US)
        sleep_us = DCR__SQ_BUSY_MIN_US << tries;
    usleep(sleep_us);
    return 1;
}

/* WAL lets readers (receivers polling the latest attempt) proceed while a
 * writer commits; FULL sync makes the commit record durable on return. */
static dcr_status_t dcr__sq_configure(dcr__sq_t *s)
{
    sqlite3_busy_handler(s->db, dcr__sq_busy, s);
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "PRAGMA journal_mode = WAL", &stmt));
    int rc = sqlite3_step(stmt);
    const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(stmt, 0) : NULL;
    bool wal = mode != NULL && sqlite3_stricmp(mode, "wal") == 0;
    dcr_status_t st = rc == SQLITE_ROW ? DCR_OK : dcr__sq_fail(s, "enable WAL");
    sqlite3_finalize(stmt);
    DCR_CHECK(st);
    if (!wal) {
        return dcr_error_set(DCR_ECONTROL, "%s: cannot use WAL journal mode", s->path);
    }
    DCR_CHECK(dcr__sq_exec(s, "PRAGMA synchronous = FULL", "set synchronous"));
    return dcr__sq_txn(s, true, dcr__sq_init_body, NULL);
}

static void dcr__sq_free(dcr__sq_t *s)
{
    if (s == NULL) return;
    sqlite3_close_v2(s->db);
    dcr__wake_fini(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

static void dcr__sq_destroy(dcr_control_t *c)
{
    dcr__sq_free(dcr__sq_of(c));
}

static dcr_status_t dcr__sq_create(const dcr_control_ops_t *self, const dcr_control_config_t *cfg,
                                   dcr_control_t **out_p)
{
    (void)self;
    const char *path = cfg->address;
    /* An in-memory or temporary database would be private to this
     * connection: other processes would see a different control plane. */
    if (path == NULL || path[0] == '\0' || strcmp(path, ":memory:") == 0) {
        return dcr_error_set(DCR_EINVAL,
                             "control plane address '%s': expected a database file path that "
                             "every process can open (not \"\" or \":memory:\")",
                             path == NULL ? "(null)" : path);
    }
    dcr__sq_t *s = calloc(1, sizeof *s);
    if (s == NULL || (s->path = strdup(path)) == NULL || pthread_mutex_init(&s->mu, NULL) != 0) {
        if (s != NULL) free(s->path);
        free(s);
        return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", path);
    }
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DCR__SQ_DEFAULT_TIMEOUT;
    if (dcr__wake_init(&s->wake, path) != DCR_OK) {
        dcr__sq_free(s);
        return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", path);
    }
    /* No URI parsing: the address is always a plain file name. The handle
     * serializes its own calls, so SQLite's per-connection mutex is redundant. */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    dcr_status_t st = dcr__sq_precheck(s);
    if (st == DCR_OK && sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
        st = s->db != NULL ? dcr__sq_fail(s, "open")
                           : dcr_error_set(DCR_ENOMEM, "%s: open failed", path);
    }
    if (st == DCR_OK) st = dcr__sq_configure(s);
    if (st != DCR_OK) {
        dcr__sq_free(s);
        return st;
    }
    *out_p = &s->pub;
    return DCR_OK;
}

/* ---- operations ------------------------------------------------------------ */

static dcr_status_t dcr__sq_read_body(dcr__sq_t *s, void *ctx)
{
    return dcr__sq_load_record(s, ctx);
}

static dcr_status_t dcr__sq_read(dcr_control_t *c, dcr_commit_record_t *rec_p)
{
    dcr_commit_record_t rec = {0};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), false, dcr__sq_read_body, &rec));
    *rec_p = rec;
    return DCR_OK;
}

static dcr_status_t dcr__sq_store_record(dcr__sq_t *s, const dcr_commit_record_t *rec)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s,
                           "UPDATE dcr_record SET version = ?1, baseline = ?2, attempt = ?3,"
                           " committed_ns = ?4 WHERE id = 1",
                           &stmt));
    sqlite3_bind_int64(stmt, 1, (int64_t)rec->version);
    sqlite3_bind_blob(stmt, 2, rec->baseline, DCR_CONTROL_BASELINE_BYTES, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 3, (int64_t)rec->attempt);
    sqlite3_bind_int64(stmt, 4, rec->committed_ns);
    return dcr__sq_run(s, stmt, "write commit record");
}

typedef struct dcr__sq_cas_ctx {
    const dcr_commit_record_t *expected;
    const dcr_commit_record_t *desired;
} dcr__sq_cas_ctx_t;

static dcr_status_t dcr__sq_cas_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_cas_ctx_t *x = ctx;
    dcr_commit_record_t cur;
    DCR_CHECK(dcr__sq_load_record(s, &cur));
    if (!dcr_commit_record_equal(&cur, x->expected))
        return dcr__control_record_changed(s->path, &cur);
    return dcr__sq_store_record(s, x->desired);
}

static dcr_status_t dcr__sq_cas(dcr_control_t *c, const dcr_commit_record_t *expected,
                                const dcr_commit_record_t *desired)
{
    dcr__sq_cas_ctx_t x = {expected, desired};
    return dcr__sq_txn(dcr__sq_of(c), true, dcr__sq_cas_body, &x);
}

typedef struct dcr__sq_prepare_ctx {
    const dcr_control_prepare_t *req;
    uint64_t tau;
} dcr__sq_prepare_ctx_t;

static dcr_status_t dcr__sq_coordinator_known(dcr__sq_t *s, const char *id, bool *known_p)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "SELECT 1 FROM dcr_coordinator WHERE id = ?1", &stmt));
    sqlite3_bind_text(stmt, 1, id, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return dcr__sq_fail(s, "read coordinators");
    *known_p = rc == SQLITE_ROW;
    return DCR_OK;
}

/* A coordinator is replaced once another one prepared after it; it stays
 * refused forever, which is why ids must be unique per incarnation. */
static dcr_status_t dcr__sq_check_active(dcr__sq_t *s, const char *coordinator,
                                         const dcr_control_attempt_t *latest, bool have_latest)
{
    if (!have_latest || strcmp(latest->coordinator, coordinator) == 0) return DCR_OK;
    bool known = false;
    DCR_CHECK(dcr__sq_coordinator_known(s, coordinator, &known));
    if (!known) return DCR_OK;
    return dcr_error_set(DCR_ECONFLICT,
                         "%s: coordinator %s was replaced by coordinator %s "
                         "(attempt %llu)",
                         s->path, coordinator, latest->coordinator,
                         (unsigned long long)latest->tau);
}

static dcr_status_t dcr__sq_insert_attempt(dcr__sq_t *s, const dcr_control_attempt_t *a)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "INSERT INTO dcr_attempt VALUES(?1, ?2, ?3, ?4, ?5, ?6)", &stmt));
    sqlite3_bind_int64(stmt, 1, (int64_t)a->tau);
    sqlite3_bind_text(stmt, 2, a->coordinator, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 3, (int64_t)a->from_version);
    sqlite3_bind_int64(stmt, 4, a->prepared_ns);
    sqlite3_bind_int64(stmt, 5, a->deadline_ns);
    sqlite3_bind_int64(stmt, 6, a->n_required);
    DCR_CHECK(dcr__sq_run(s, stmt, "insert attempt"));
    DCR_CHECK(dcr__sq_stmt(s, "INSERT OR IGNORE INTO dcr_coordinator VALUES(?1)", &stmt));
    sqlite3_bind_text(stmt, 1, a->coordinator, -1, SQLITE_TRANSIENT);
    return dcr__sq_run(s, stmt, "insert coordinator");
}

static dcr_status_t dcr__sq_insert_required(dcr__sq_t *s, uint64_t tau, const uint32_t *receivers,
                                            size_t n)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "INSERT INTO dcr_required VALUES(?1, ?2)", &stmt));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < n && st == DCR_OK; i++) {
        sqlite3_reset(stmt);
        sqlite3_bind_int64(stmt, 1, (int64_t)tau);
        sqlite3_bind_int64(stmt, 2, receivers[i]);
        if (sqlite3_step(stmt) != SQLITE_DONE) st = dcr__sq_fail(s, "insert required receiver");
    }
    sqlite3_finalize(stmt);
    return st;
}

/* The next tau exceeds every attempt id this store has seen, including one a
 * repair CAS may have written into the record. */
static dcr_status_t dcr__sq_next_tau(dcr__sq_t *s, const dcr_commit_record_t *rec,
                                     const dcr_control_attempt_t *latest, bool have_latest,
                                     uint64_t *tau_p)
{
    uint64_t top = rec->attempt;
    if (have_latest && latest->tau > top) top = latest->tau;
    if (top >= DCR_CONTROL_VALUE_MAX) {
        return dcr_error_set(DCR_ECONTROL, "%s: attempt ids are exhausted", s->path);
    }
    *tau_p = top + 1;
    return DCR_OK;
}

static dcr_status_t dcr__sq_prepare_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_prepare_ctx_t *x = ctx;
    const dcr_control_prepare_t *req = x->req;
    dcr_commit_record_t rec = {0};
    dcr_control_attempt_t latest, a;
    bool have_latest = false;
    DCR_CHECK(dcr__sq_load_record(s, &rec));
    DCR_CHECK(dcr__sq_load_attempt(s, 0, &latest, &have_latest));
    DCR_CHECK(dcr__sq_check_active(s, req->coordinator, &latest, have_latest));
    if (rec.version != req->from_version) {
        return dcr_error_set(DCR_ECONFLICT,
                             "%s: prepare for version %llu, but version %llu is "
                             "committed",
                             s->path, (unsigned long long)req->from_version,
                             (unsigned long long)rec.version);
    }
    memset(&a, 0, sizeof a);
    DCR_CHECK(dcr__sq_next_tau(s, &rec, &latest, have_latest, &a.tau));
    strcpy(a.coordinator, req->coordinator);
    a.from_version = req->from_version;
    a.prepared_ns = dcr__control_now_ns();
    a.deadline_ns = a.prepared_ns + (int64_t)req->deadline_ms * 1000000;
    a.n_required = (uint32_t)req->n_receivers;
    DCR_CHECK(dcr__sq_insert_attempt(s, &a));
    DCR_CHECK(dcr__sq_insert_required(s, a.tau, req->receivers, req->n_receivers));
    x->tau = a.tau;
    return DCR_OK;
}

static dcr_status_t dcr__sq_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                    uint64_t *tau_p)
{
    dcr__sq_prepare_ctx_t x = {req, 0};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), true, dcr__sq_prepare_body, &x));
    *tau_p = x.tau;
    return DCR_OK;
}

typedef struct dcr__sq_attempt_ctx {
    uint64_t tau;
    dcr_control_attempt_t info;
} dcr__sq_attempt_ctx_t;

static dcr_status_t dcr__sq_attempt_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_attempt_ctx_t *x = ctx;
    bool found = false;
    DCR_CHECK(dcr__sq_load_attempt(s, x->tau, &x->info, &found));
    if (found) return DCR_OK;
    if (x->tau != 0) return dcr__sq_not_found(s, x->tau);
    return dcr_error_set(DCR_ENOTFOUND, "%s: no attempt was prepared yet", s->path);
}

static dcr_status_t dcr__sq_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p)
{
    dcr__sq_attempt_ctx_t x = {.tau = tau};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), false, dcr__sq_attempt_body, &x));
    *info_p = x.info;
    return DCR_OK;
}

typedef struct dcr__sq_list_ctx {
    const char *table;
    uint64_t tau;
    uint32_t *out;
    size_t cap;
    size_t n;
} dcr__sq_list_ctx_t;

/* Lists must agree with the attempt row: more acks than required receivers,
 * or a required set of the wrong size, means the file was damaged. */
static dcr_status_t dcr__sq_list_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_list_ctx_t *x = ctx;
    dcr_control_attempt_t a;
    bool found = false;
    DCR_CHECK(dcr__sq_load_attempt(s, x->tau, &a, &found));
    if (!found) return dcr__sq_not_found(s, x->tau);
    DCR_CHECK(dcr__sq_load_receivers(s, x->table, x->tau, x->out, x->cap, &x->n));
    bool is_required = strcmp(x->table, "dcr_required") == 0;
    if (is_required ? x->n != a.n_required : x->n > a.n_required) {
        char expected[64];
        snprintf(expected, sizeof expected, "%s%u rows for attempt %llu, found %zu",
                 is_required ? "" : "at most ", a.n_required, (unsigned long long)x->tau, x->n);
        return dcr__sq_malformed(s, x->table, expected);
    }
    return DCR_OK;
}

static dcr_status_t dcr__sq_list(dcr_control_t *c, const char *table, uint64_t tau, uint32_t *out,
                                 size_t cap, size_t *n_p)
{
    dcr__sq_list_ctx_t x = {table, tau, out, cap, 0};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), false, dcr__sq_list_body, &x));
    *n_p = x.n;
    return DCR_OK;
}

static dcr_status_t dcr__sq_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                     size_t *n_p)
{
    return dcr__sq_list(c, "dcr_required", tau, out, cap, n_p);
}

static dcr_status_t dcr__sq_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                 size_t *n_p)
{
    return dcr__sq_list(c, "dcr_ack", tau, out, cap, n_p);
}

typedef struct dcr__sq_ack_ctx {
    uint64_t tau;
    const uint32_t *receivers;
    size_t n;
} dcr__sq_ack_ctx_t;

static dcr_status_t dcr__sq_is_required(dcr__sq_t *s, uint64_t tau, uint32_t receiver)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(
        dcr__sq_stmt(s, "SELECT 1 FROM dcr_required WHERE tau = ?1 AND receiver = ?2", &stmt));
    sqlite3_bind_int64(stmt, 1, (int64_t)tau);
    sqlite3_bind_int64(stmt, 2, receiver);
    int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc == SQLITE_ROW) return DCR_OK;
    if (rc != SQLITE_DONE) return dcr__sq_fail(s, "read required receivers");
    return dcr_error_set(DCR_EINVAL,
                         "%s: receiver %u is not a required receiver of attempt "
                         "%llu",
                         s->path, receiver, (unsigned long long)tau);
}

/* Every receiver is checked before the first insert; the transaction makes
 * the inserts all or none anyway. */
static dcr_status_t dcr__sq_ack_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_ack_ctx_t *x = ctx;
    dcr_control_attempt_t a;
    DCR_CHECK(dcr__sq_load_latest_as(s, x->tau, &a));
    for (size_t i = 0; i < x->n; i++) DCR_CHECK(dcr__sq_is_required(s, x->tau, x->receivers[i]));
    for (size_t i = 0; i < x->n; i++) {
        sqlite3_stmt *stmt;
        DCR_CHECK(dcr__sq_stmt(s, "INSERT OR IGNORE INTO dcr_ack VALUES(?1, ?2)", &stmt));
        sqlite3_bind_int64(stmt, 1, (int64_t)x->tau);
        sqlite3_bind_int64(stmt, 2, x->receivers[i]);
        DCR_CHECK(dcr__sq_run(s, stmt, "insert ack"));
    }
    return DCR_OK;
}

static dcr_status_t dcr__sq_ack_many(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                     size_t n)
{
    dcr__sq_ack_ctx_t x = {tau, receivers, n};
    return dcr__sq_txn_unsynced(dcr__sq_of(c), dcr__sq_ack_body, &x);
}

static dcr_status_t dcr__sq_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver)
{
    return dcr__sq_ack_many(c, tau, &receiver, 1);
}

typedef struct dcr__sq_commit_ctx {
    const char *coordinator;
    uint64_t tau;
    const dcr_commit_record_t *expected;
    const uint8_t *baseline;
    dcr_commit_record_t rec;
} dcr__sq_commit_ctx_t;

/* The first required receiver of tau without an acknowledgment, if any. */
static dcr_status_t dcr__sq_check_acked(dcr__sq_t *s, uint64_t tau)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s,
                           "SELECT r.receiver, count(*) OVER () FROM dcr_required r"
                           " WHERE r.tau = ?1 AND NOT EXISTS (SELECT 1 FROM dcr_ack a"
                           " WHERE a.tau = r.tau AND a.receiver = r.receiver)"
                           " ORDER BY r.receiver LIMIT 1",
                           &stmt));
    sqlite3_bind_int64(stmt, 1, (int64_t)tau);
    int rc = sqlite3_step(stmt);
    dcr_status_t st = DCR_OK;
    if (rc == SQLITE_ROW) {
        long long missing = sqlite3_column_int64(stmt, 1);
        st = dcr_error_set(DCR_EATTEMPT,
                           "%s: attempt %llu cannot commit: receiver %lld and %lld "
                           "other(s) have not acknowledged it",
                           s->path, (unsigned long long)tau, sqlite3_column_int64(stmt, 0),
                           missing - 1);
    } else if (rc != SQLITE_DONE) {
        st = dcr__sq_fail(s, "read acknowledgments");
    }
    sqlite3_finalize(stmt);
    return st;
}

/* Nothing older than the committed attempt can ever count again. */
static dcr_status_t dcr__sq_prune(dcr__sq_t *s, uint64_t tau)
{
    static const char *const sql[] = {
        "DELETE FROM dcr_ack WHERE tau < ?1",
        "DELETE FROM dcr_required WHERE tau < ?1",
        "DELETE FROM dcr_attempt WHERE tau < ?1",
    };
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        sqlite3_stmt *stmt;
        DCR_CHECK(dcr__sq_stmt(s, sql[i], &stmt));
        sqlite3_bind_int64(stmt, 1, (int64_t)tau);
        DCR_CHECK(dcr__sq_run(s, stmt, "prune old attempts"));
    }
    return DCR_OK;
}

/* The checks every backend makes (control.c), then the acknowledgments. */
static dcr_status_t dcr__sq_commit_check(dcr__sq_t *s, dcr__sq_commit_ctx_t *x,
                                         const dcr_control_attempt_t *a,
                                         const dcr_commit_record_t *cur, int64_t now)
{
    DCR_CHECK(dcr__control_commit_check(s->path, x->coordinator, x->tau, a, x->expected, cur, now));
    return dcr__sq_check_acked(s, x->tau);
}

static dcr_status_t dcr__sq_commit_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_commit_ctx_t *x = ctx;
    dcr_control_attempt_t a;
    dcr_commit_record_t cur;
    DCR_CHECK(dcr__sq_load_latest_as(s, x->tau, &a));
    DCR_CHECK(dcr__sq_load_record(s, &cur));
    int64_t now = dcr__control_now_ns();
    DCR_CHECK(dcr__sq_commit_check(s, x, &a, &cur, now));
    x->rec.version = cur.version + 1;
    memcpy(x->rec.baseline, x->baseline, DCR_CONTROL_BASELINE_BYTES);
    x->rec.attempt = x->tau;
    x->rec.committed_ns = now;
    DCR_CHECK(dcr__sq_store_record(s, &x->rec));
    return dcr__sq_prune(s, x->tau);
}

static dcr_status_t dcr__sq_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                   const dcr_commit_record_t *expected,
                                   const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                   dcr_commit_record_t *rec_p)
{
    dcr__sq_commit_ctx_t x = {coordinator, tau, expected, baseline, {0}};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), true, dcr__sq_commit_body, &x));
    *rec_p = x.rec;
    return DCR_OK;
}

typedef struct dcr__sq_report_ctx {
    uint32_t receiver;
    const void *data;
    size_t len;
    void *copy;
} dcr__sq_report_ctx_t;

static dcr_status_t dcr__sq_report_put_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_report_ctx_t *x = ctx;
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "INSERT OR REPLACE INTO dcr_report VALUES(?1, ?2)", &stmt));
    sqlite3_bind_int64(stmt, 1, x->receiver);
    /* zeroblob keeps an empty report a BLOB (a NULL pointer would bind NULL). */
    if (x->len == 0) {
        sqlite3_bind_zeroblob(stmt, 2, 0);
    } else {
        sqlite3_bind_blob64(stmt, 2, x->data, x->len, SQLITE_STATIC);
    }
    return dcr__sq_run(s, stmt, "write prewarm report");
}

/* Without an fsync (dcr__sq_txn_unsynced): a report is a party's own
 * status (a prewarm report, a node's or the owners' phase), which every
 * reader treats as "not yet" while it is missing or old, and which only a
 * power loss can lose: the WAL keeps every party on this host, so the loss
 * also ends the party that wrote it, and its new process writes it again.
 * As processes, three reports lie on each refit's path (the coordinator's
 * open, the nodes' joined and done), each a sync of the log with FULL. A
 * process crash loses nothing either way. */
static dcr_status_t dcr__sq_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                       size_t len)
{
    dcr__sq_report_ctx_t x = {receiver, data, len, NULL};
    return dcr__sq_txn_unsynced(dcr__sq_of(c), dcr__sq_report_put_body, &x);
}

typedef struct dcr__sq_ack_report_ctx {
    dcr__sq_ack_ctx_t ack;
    dcr__sq_report_ctx_t report;
} dcr__sq_ack_report_ctx_t;

/* The acknowledgments first: a refused one fails the transaction before
 * the report is written, and a rollback drops both. */
static dcr_status_t dcr__sq_ack_report_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_ack_report_ctx_t *x = ctx;
    DCR_CHECK(dcr__sq_ack_body(s, &x->ack));
    return dcr__sq_report_put_body(s, &x->report);
}

/* Unsynced, as each of the two it joins is. */
static dcr_status_t dcr__sq_ack_report(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                       size_t n, uint32_t id, const void *data, size_t len)
{
    dcr__sq_ack_report_ctx_t x = {{tau, receivers, n}, {id, data, len, NULL}};
    return dcr__sq_txn_unsynced(dcr__sq_of(c), dcr__sq_ack_report_body, &x);
}

static dcr_status_t dcr__sq_report_row(dcr__sq_t *s, sqlite3_stmt *stmt, dcr__sq_report_ctx_t *x)
{
    /* Type first: asking an integer for its bytes would convert it to text. */
    if (sqlite3_column_type(stmt, 0) != SQLITE_BLOB) {
        return dcr__sq_malformed(s, "dcr_report.body", "a blob");
    }
    const void *blob = sqlite3_column_blob(stmt, 0);
    int n = sqlite3_column_bytes(stmt, 0);
    if (n < 0 || (size_t)n > DCR_CONTROL_REPORT_MAX) {
        return dcr__sq_malformed(s, "dcr_report.body", "a blob of at most 64 MiB");
    }
    x->len = (size_t)n;
    if (n == 0) return DCR_OK;
    x->copy = malloc((size_t)n);
    if (x->copy == NULL) {
        return dcr_error_set(DCR_ENOMEM, "%s: report of %d bytes: allocation failed", s->path, n);
    }
    memcpy(x->copy, blob, (size_t)n);
    return DCR_OK;
}

static dcr_status_t dcr__sq_report_get_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_report_ctx_t *x = ctx;
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "SELECT body FROM dcr_report WHERE receiver = ?1", &stmt));
    sqlite3_bind_int64(stmt, 1, x->receiver);
    int rc = sqlite3_step(stmt);
    dcr_status_t st;
    if (rc == SQLITE_ROW) {
        st = dcr__sq_report_row(s, stmt, x);
    } else if (rc == SQLITE_DONE) {
        st = dcr_error_set(DCR_ENOTFOUND, "%s: receiver %u has no prewarm report", s->path,
                           x->receiver);
    } else {
        st = dcr__sq_fail(s, "read prewarm report");
    }
    sqlite3_finalize(stmt);
    return st;
}

static dcr_status_t dcr__sq_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                       size_t *len_p)
{
    dcr__sq_report_ctx_t x = {receiver, NULL, 0, NULL};
    dcr_status_t st = dcr__sq_txn(dcr__sq_of(c), false, dcr__sq_report_get_body, &x);
    if (st != DCR_OK) {
        free(x.copy);
        return st;
    }
    *data_p = x.copy;
    *len_p = x.len;
    return DCR_OK;
}

typedef struct dcr__sq_membership_ctx {
    const char *coordinator;
    const uint32_t *members;
    size_t n;
    uint32_t *out;
    size_t cap;
} dcr__sq_membership_ctx_t;

static dcr_status_t dcr__sq_membership_put_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_membership_ctx_t *x = ctx;
    dcr_control_attempt_t latest;
    bool have_latest = false;
    DCR_CHECK(dcr__sq_load_attempt(s, 0, &latest, &have_latest));
    DCR_CHECK(dcr__sq_check_active(s, x->coordinator, &latest, have_latest));
    DCR_CHECK(dcr__sq_exec(s, "DELETE FROM dcr_member", "clear membership"));
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "INSERT INTO dcr_member VALUES(?1)", &stmt));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < x->n && st == DCR_OK; i++) {
        sqlite3_reset(stmt);
        sqlite3_bind_int64(stmt, 1, x->members[i]);
        if (sqlite3_step(stmt) != SQLITE_DONE) st = dcr__sq_fail(s, "insert member");
    }
    sqlite3_finalize(stmt);
    DCR_CHECK(st);
    DCR_CHECK(
        dcr__sq_stmt(s, "INSERT OR REPLACE INTO dcr_membership VALUES(1, ?1, ?2, ?3)", &stmt));
    sqlite3_bind_text(stmt, 1, x->coordinator, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, dcr__control_now_ns());
    sqlite3_bind_int64(stmt, 3, (int64_t)x->n);
    return dcr__sq_run(s, stmt, "write membership");
}

static dcr_status_t dcr__sq_membership_put(dcr_control_t *c, const char *coordinator,
                                           const uint32_t *members, size_t n)
{
    dcr__sq_membership_ctx_t x = {coordinator, members, n, NULL, 0};
    return dcr__sq_txn(dcr__sq_of(c), true, dcr__sq_membership_put_body, &x);
}

/* The recorded member count; *found_p false when none was ever recorded. */
static dcr_status_t dcr__sq_membership_count(dcr__sq_t *s, int64_t *count_p, bool *found_p)
{
    sqlite3_stmt *stmt;
    DCR_CHECK(dcr__sq_stmt(s, "SELECT n_members FROM dcr_membership WHERE id = 1", &stmt));
    int rc = sqlite3_step(stmt);
    dcr_status_t st = DCR_OK;
    if (rc == SQLITE_ROW) {
        st = dcr__sq_int(s, stmt, 0, 0, DCR_CONTROL_RECEIVERS_MAX, "dcr_membership.n_members",
                         count_p);
    } else if (rc != SQLITE_DONE) {
        st = dcr__sq_fail(s, "read membership");
    }
    sqlite3_finalize(stmt);
    if (st == DCR_OK) *found_p = rc == SQLITE_ROW;
    return st;
}

/* Members must agree with the recorded count, as lists agree with their attempt. */
static dcr_status_t dcr__sq_membership_get_body(dcr__sq_t *s, void *ctx)
{
    dcr__sq_membership_ctx_t *x = ctx;
    int64_t count = 0;
    bool found = false;
    DCR_CHECK(dcr__sq_membership_count(s, &count, &found));
    if (!found) return dcr_error_set(DCR_ENOTFOUND, "%s: no membership was recorded yet", s->path);
    sqlite3_stmt *stmt;
    size_t n = 0;
    DCR_CHECK(dcr__sq_stmt(s, "SELECT receiver FROM dcr_member ORDER BY receiver", &stmt));
    DCR_CHECK(dcr__sq_step_receivers(s, stmt, "dcr_member.receiver", x->out, x->cap, &n));
    if ((int64_t)n != count) {
        char expected[64];
        snprintf(expected, sizeof expected, "%lld rows, found %zu", (long long)count, n);
        return dcr__sq_malformed(s, "dcr_member", expected);
    }
    x->n = n;
    return DCR_OK;
}

static dcr_status_t dcr__sq_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p)
{
    dcr__sq_membership_ctx_t x = {NULL, NULL, 0, out, cap};
    DCR_CHECK(dcr__sq_txn(dcr__sq_of(c), false, dcr__sq_membership_get_body, &x));
    *n_p = x.n;
    return DCR_OK;
}

/* ---- change notification ----------------------------------------------------------- */

/* The connection's data version (SQLite bumps it whenever another
 * connection committed since this one last looked: a read of the WAL
 * index, no disk I/O) plus this handle's own committed writes: together
 * they grow with every change any handle makes. 0 when unreadable. */
static uint64_t dcr__sq_position(dcr_control_t *c)
{
    dcr__sq_t *s = dcr__sq_of(c);
    int64_t v = 0;
    pthread_mutex_lock(&s->mu);
    dcr_status_t st = dcr__sq_pragma_int(s, "PRAGMA data_version", &v);
    pthread_mutex_unlock(&s->mu);
    if (st != DCR_OK || v <= 0) return 0;
    return (uint64_t)v + atomic_load(&s->own_writes);
}

/* Sleeps on the wake file, looking at the position after every poke and at
 * least every DCR__SQ_WAKE_FALLBACK_MS; without a wake file, naps that
 * double while nothing changes. */
static dcr_status_t dcr__sq_wait(dcr_control_t *c, uint64_t since, int timeout_ms)
{
    dcr__sq_t *s = dcr__sq_of(c);
    uint64_t deadline = dcr_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    long nap_us = DCR__SQ_NAP_MIN_US;
    for (;;) {
        uint64_t pos = dcr__sq_position(c);
        if (pos != 0 && pos != since) return DCR_OK;
        uint64_t now = dcr_clock_ns();
        if (now >= deadline) return DCR_ETIMEOUT;
        uint64_t left_us = (deadline - now + 999) / 1000;
        int slice_ms = (int)((left_us + 999) / 1000);
        if (slice_ms > DCR__SQ_WAKE_FALLBACK_MS) slice_ms = DCR__SQ_WAKE_FALLBACK_MS;
        int woke = dcr__wake_sleep(&s->wake, slice_ms);
        if (woke == 2) return DCR_OK; /* a signal: the caller looks at its stop flag */
        if (woke >= 0) continue;
        long us = (uint64_t)nap_us < left_us ? nap_us : (long)left_us;
        dcr_clock_nap_ns(us * 1000L);
        if (nap_us < DCR__SQ_NAP_MAX_US) nap_us *= 2;
    }
}

const dcr_control_ops_t dcr__control_sqlite_ops = {
    .hdr = {.version = DCR_CONTROL_OPS_VERSION, .name = "sqlite"},
    .props = {.durable = true},
    .create = dcr__sq_create,
    .destroy = dcr__sq_destroy,
    .read = dcr__sq_read,
    .cas = dcr__sq_cas,
    .prepare = dcr__sq_prepare,
    .attempt = dcr__sq_attempt,
    .required = dcr__sq_required,
    .ack = dcr__sq_ack,
    .acks = dcr__sq_acks,
    .ack_many = dcr__sq_ack_many,
    .ack_report = dcr__sq_ack_report,
    .commit = dcr__sq_commit,
    .report_put = dcr__sq_report_put,
    .report_get = dcr__sq_report_get,
    .membership_put = dcr__sq_membership_put,
    .membership_get = dcr__sq_membership_get,
    .position = dcr__sq_position,
    .wait = dcr__sq_wait,
};
