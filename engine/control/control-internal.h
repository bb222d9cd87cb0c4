/* Shared between the control-plane wrapper and its built-in backends; not part
 * of the public interface. */
#ifndef DCR_CONTROL_INTERNAL_H
#define DCR_CONTROL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "dcr/control.h"

/* Built-in backends, listed in the registry of control.c. */
extern const dcr_control_ops_t dcr__control_sqlite_ops;
extern const dcr_control_ops_t dcr__control_etcd_ops;

/* True if id is a usable coordinator id: 1..DCR_CONTROL_ID_MAX-1 printable
 * ASCII characters. Backends also apply it to ids they read back. */
bool dcr__control_id_valid(const char *id);

/* The control plane's clock: wall-clock nanoseconds since the epoch, because
 * deadlines and commit times are compared across processes and machines
 * (the seed assumes coordinators and control plane clock-synchronized). */
int64_t dcr__control_now_ns(void);

/* The "commit record changed" refusal (DCR_ECONFLICT) both backends give
 * when a compare-and-set or commit finds another record than expected;
 * where names the control plane (path or address). */
dcr_status_t dcr__control_record_changed(const char *where, const dcr_commit_record_t *now);

/* The commit checks every backend makes on what it read of attempt tau (a,
 * already known to be the latest) and the record (cur), in this order, so
 * that backends answer a failure alike: the attempt's coordinator is the
 * committing one (fencing first: a replaced coordinator learns that before
 * anything else), the record is still expected (the compare-and-set
 * condition), a was prepared from cur's version, and now (the control
 * plane's clock) is not past a's deadline. The acknowledgments are the
 * backend's to check after these. DCR_ECONFLICT or DCR_ETIMEOUT, one line
 * starting with where. */
dcr_status_t dcr__control_commit_check(const char *where, const char *coordinator, uint64_t tau,
                                       const dcr_control_attempt_t *a,
                                       const dcr_commit_record_t *expected,
                                       const dcr_commit_record_t *cur, int64_t now);

/* ---- the wake file (wake.c) -------------------------------------------------------- */

/* A control plane kept in a file notifies its waiters through a file of
 * the store that lives as long as any handle is open (SQLite's PATH-wal,
 * the write-ahead log): every handle that committed a change then touches
 * its times (a poke), and a waiting handle sleeps on an inotify watch of
 * it. No file of its own: the store's files stay what SQLite makes. Best
 * effort by design: where the file or inotify is unavailable, sleep says
 * so and the backend naps instead, and a poke that is lost (suppressed,
 * drained by another thread of the handle) costs a waiter no more than the
 * period it sleeps at most before it looks again. */
#define DCR__WAKE_SUFFIX "-wal"
typedef struct dcr__wake {
    pthread_mutex_t mu;
    char *path; /* STORE-wal */
    int ino_fd; /* inotify instance, at the first sleep; -1 before */
    int wd;     /* the watch of path; -1 when none (not yet, or the file went away) */
} dcr__wake_t;

/* Prepares w for the store at store_path; opens nothing yet. */
dcr_status_t dcr__wake_init(dcr__wake_t *w, const char *store_path);
void dcr__wake_fini(dcr__wake_t *w);
/* Tells waiters that a change was committed (call after the commit). */
void dcr__wake_poke(dcr__wake_t *w);
/* Sleeps until a poke or timeout_ms: 1 when woken (by a poke, or by any
 * event on the file), 2 when a signal interrupted the sleep (the caller
 * returns, so that its stop flag is seen), 0 at the timeout, -1 at once
 * when no watch can be set up (the caller naps instead). */
int dcr__wake_sleep(dcr__wake_t *w, int timeout_ms);
/* Tests: drop every poke of this process from now on (true) or not. */
void dcr__wake_suppress_pokes(bool suppressed);

#endif
