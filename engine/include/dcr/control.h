/* The control plane: the durable commit record that binds policy version v to
 * its source baseline K^v, and the attempt bookkeeping around the joint commit
 * (DESIGN.md sections 2 G5 and 5 steps 2, 6 and 7).
 *
 * Protocol, as the coordinator uses it:
 *   1. dcr_control_read() gives the committed record K^v. A new coordinator
 *      (failover) always reads it first: if it already names the attempt the
 *      old coordinator was running, that attempt committed and nothing needs
 *      retrying.
 *   2. dcr_control_prepare() registers attempt tau for v -> v+1 with a fixed
 *      set of required receivers and a commit deadline. Every prepare replaces
 *      the previous attempt; a coordinator that has been replaced by another
 *      one is refused from then on (DCR_ECONFLICT), so exactly one coordinator
 *      can drive a transition at a time.
 *   3. Each required receiver calls dcr_control_ack(tau, receiver) after its
 *      device synchronization; acks of a replaced attempt are refused, so a
 *      stale attempt's acknowledgments never count for a newer one.
 *   4. dcr_control_commit() publishes v+1 by compare-and-set against K^v, and
 *      only if tau is still the latest attempt, its deadline has not passed,
 *      and every required receiver has acknowledged tau. Version v stays
 *      committed through every failure until this succeeds.
 *
 * The control plane also holds the receiver membership, which the active
 * coordinator changes only between attempts (a receiver leaves when it dies
 * or holds writes no retry can repair, and joins after restoring the
 * committed version by a dense refit), so that a new coordinator after a
 * failover starts from the membership its predecessor left.
 *
 * Waiting: a party that waits for another's write (an acknowledgment, a
 * status record, the next attempt) takes the control plane's position
 * before it reads (dcr_control_position) and, while what it read does not
 * satisfy it, sleeps in dcr_control_wait until a change after that
 * position, instead of reading again at a fixed rate. A backend that can
 * notify wakes the waiter within about a millisecond of the write; every
 * wait is bounded by its timeout, so a lost notification or a writer that
 * died costs at most the caller's timeout, never a hang.
 *
 * Receivers also leave their prewarm report (an opaque blob, e.g. the
 * per-tensor XOR/overwrite classification) under their receiver id, for the
 * coordinator to read during setup.
 *
 * A backend is a dcr_control_ops_t found by name ("sqlite": one file for the
 * processes of one host; "etcd": an etcd v3 cluster shared across hosts, see
 * engine/control/control_etcd.c for its keys; or one registered from outside
 * the engine with dcr_control_register, such as faults/'s "faulty:<name>",
 * which wraps another backend); callers only use
 * the dcr_control_* wrappers below, never a backend's slots. Backends may be
 * shared by several processes: every state change is atomic, so racing
 * prepares, acks, commits and compare-and-sets see one serial order. */
#ifndef DCR_CONTROL_H
#define DCR_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/ops.h"
#include "dcr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the source-baseline identifier K^v (room for a BLAKE2b-256 digest;
 * shorter ids are zero-padded by the caller). */
#define DCR_CONTROL_BASELINE_BYTES 32
/* Coordinator ids are 1..63 printable ASCII characters, unique per coordinator
 * incarnation (a restarted coordinator must use a new id). */
#define DCR_CONTROL_ID_MAX 64
/* Upper bounds that keep a malformed request or stored row from asking for
 * unbounded memory. */
#define DCR_CONTROL_RECEIVERS_MAX 65536u
#define DCR_CONTROL_REPORT_MAX    (64u << 20)
/* Largest value of any version, attempt id or timestamp: backends store them as
 * signed 64-bit integers. */
#define DCR_CONTROL_VALUE_MAX INT64_MAX

/* The durable commit record. A fresh control plane holds the empty record
 * (everything zero); the harness binds version 0 to its initial baseline with
 * dcr_control_cas() after the dense initial load. Two records are equal when
 * every field is equal (dcr_commit_record_equal). */
typedef struct dcr_commit_record {
    uint64_t version;                             /* policy version v */
    uint8_t baseline[DCR_CONTROL_BASELINE_BYTES]; /* K^v: source-baseline id/digest */
    uint64_t attempt;                             /* tau that committed it; 0 if none */
    int64_t committed_ns;                         /* wall clock (ns since the epoch) */
} dcr_commit_record_t;

/* What prepare registers. Pointers are only read during the call. */
typedef struct dcr_control_prepare {
    const char *coordinator;   /* id of the calling coordinator */
    uint64_t from_version;     /* v of the transition v -> v+1; must be committed */
    const uint32_t *receivers; /* required receivers, distinct, 1..RECEIVERS_MAX */
    size_t n_receivers;
    uint32_t deadline_ms; /* commit must happen within this long after prepare; > 0 */
} dcr_control_prepare_t;

/* One registered attempt, as dcr_control_attempt() reports it. */
typedef struct dcr_control_attempt {
    uint64_t tau;
    uint64_t from_version;
    char coordinator[DCR_CONTROL_ID_MAX];
    int64_t prepared_ns; /* wall clock of the prepare */
    int64_t deadline_ns; /* wall clock after which commit is refused */
    uint32_t n_required;
} dcr_control_attempt_t;

/* Where the creator points a backend. */
typedef struct dcr_control_config {
    /* Backend address: for "sqlite" a database file path (created if absent;
     * ":memory:" and "" are refused because other processes could not see it);
     * for "etcd" etcd://HOST:PORT[/PREFIX], every key under PREFIX/ (default
     * "dcr"), which no one else may write. */
    const char *address;
    /* How long one call may wait for a busy control plane before failing with
     * DCR_ECONTROL; 0 selects 5000 ms. For etcd: the limit of each HTTP request
     * (connect included) and of the re-reads after lost compares. */
    int timeout_ms;
} dcr_control_config_t;

/* What a backend guarantees; callers and the conformance suite branch on
 * these, never on a backend's name. A wrapping backend (its header's parent
 * set, dcr/ops.h) states what the backend it wraps guarantees. */
typedef struct dcr_control_props {
    /* The address is a network endpoint (a URL) that processes on other
     * hosts reach; without it the address is a file path, shared only by
     * processes that see the same file system. */
    bool networked;
    /* The record, attempts and reports outlive every handle: a store
     * closed by all and opened again holds what was written. */
    bool durable;
} dcr_control_props_t;

/* The ops table layout this header describes; a backend sets version to it,
 * and the registry refuses tables written for another layout. */
#define DCR_CONTROL_OPS_VERSION 7

typedef struct dcr_control dcr_control_t;

/* A backend. Every slot may block on I/O and on other processes up to the
 * configured timeout; none calls back into the caller. Slots receive arguments
 * the wrapper has already validated (non-NULL, in range), write out-parameters
 * only when returning DCR_OK, and report failures with dcr_error_set. A
 * backend must serialize calls on one handle itself if it keeps per-handle
 * state that is not thread-safe. */
typedef struct dcr_control_ops {
    dcr_ops_header_t hdr; /* version DCR_CONTROL_OPS_VERSION; a wrapper's parent */
    dcr_control_props_t props;
    /* Connects to (and if needed initializes) the store and sets *out_p to
     * the backend's handle, whose struct opens with a dcr_control_t (the
     * wrapper sets its ops); owned by the wrapper until destroy. self is the
     * table the backend was found in (a wrapper's names its parent). */
    dcr_status_t (*create)(const struct dcr_control_ops *self, const dcr_control_config_t *cfg,
                           dcr_control_t **out_p);
    /* Releases everything create acquired, the handle included. Never fails;
     * the wrapper never passes NULL. */
    void (*destroy)(dcr_control_t *c);
    /* Copies the committed record into *rec_p. */
    dcr_status_t (*read)(dcr_control_t *c, dcr_commit_record_t *rec_p);
    /* Atomically replaces the record with *desired if it equals *expected;
     * DCR_ECONFLICT (record unchanged) otherwise. */
    dcr_status_t (*cas)(dcr_control_t *c, const dcr_commit_record_t *expected,
                        const dcr_commit_record_t *desired);
    /* Registers a new attempt atomically: DCR_ECONFLICT if req->coordinator
     * was replaced or from_version is not the committed version. Sets *tau_p
     * to a value above every tau issued before by this store. */
    dcr_status_t (*prepare)(dcr_control_t *c, const dcr_control_prepare_t *req, uint64_t *tau_p);
    /* Describes attempt tau (0: the latest); DCR_ENOTFOUND if none. */
    dcr_status_t (*attempt)(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p);
    /* Writes min(cap, n) required receivers of tau in ascending order to out
     * and n to *n_p. */
    dcr_status_t (*required)(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                             size_t *n_p);
    /* Records that receiver holds P^{v+1} for tau; idempotent. DCR_ECONFLICT
     * if tau was replaced, DCR_EINVAL if receiver is not required by tau. */
    dcr_status_t (*ack)(dcr_control_t *c, uint64_t tau, uint32_t receiver);
    /* Like required, for the receivers that acknowledged tau. */
    dcr_status_t (*acks)(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap, size_t *n_p);
    /* The joint commit, atomically: see dcr_control_commit. */
    dcr_status_t (*commit)(dcr_control_t *c, const char *coordinator, uint64_t tau,
                           const dcr_commit_record_t *expected,
                           const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                           dcr_commit_record_t *rec_p);
    /* Stores (replaces) receiver's prewarm report; copies data. */
    dcr_status_t (*report_put)(dcr_control_t *c, uint32_t receiver, const void *data, size_t len);
    /* Sets *data_p to a malloc'd copy of receiver's report (caller frees) and
     * *len_p to its length; DCR_ENOTFOUND if the receiver left none. */
    dcr_status_t (*report_get)(dcr_control_t *c, uint32_t receiver, void **data_p, size_t *len_p);
    /* Replaces the membership with members[0..n) (distinct, n may be 0)
     * atomically: DCR_ECONFLICT if coordinator was replaced, as for prepare. */
    dcr_status_t (*membership_put)(dcr_control_t *c, const char *coordinator,
                                   const uint32_t *members, size_t n);
    /* Like required, for the members; DCR_ENOTFOUND if no membership was
     * ever recorded. */
    dcr_status_t (*membership_get)(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p);
    /* Change notification, optional (both slots or neither; without them
     * the wrapper's dcr_control_wait naps DCR_CONTROL_POLL_MS at a time).
     * position: a number that grows with every change of the store that
     * this handle can see, cheap to take (no request to a server where
     * avoidable); 0 when unknown. It must not exceed what a read started
     * after it would see: a change after a read is a change after the
     * position taken before it. wait: returns DCR_OK as soon as the store
     * may hold a change after `since` (spurious returns are allowed),
     * DCR_ETIMEOUT after timeout_ms (> 0) without one; it must not block
     * longer than timeout_ms, and a notification it cannot get (a dropped
     * watch, a full queue) must degrade to looking again within its own
     * fallback period, not to a longer wait. */
    uint64_t (*position)(dcr_control_t *c);
    dcr_status_t (*wait)(dcr_control_t *c, uint64_t since, int timeout_ms);
    /* Optional: ack for n receivers in one write, all or none (without it
     * the wrapper acknowledges them one by one). */
    dcr_status_t (*ack_many)(dcr_control_t *c, uint64_t tau, const uint32_t *receivers, size_t n);
    /* Optional: ack_many and report_put(id) in one write, all or none (see
     * dcr_control_ack_report; without it the wrapper calls the two in turn). */
    dcr_status_t (*ack_report)(dcr_control_t *c, uint64_t tau, const uint32_t *receivers, size_t n,
                               uint32_t id, const void *data, size_t len);
} dcr_control_ops_t;

/* The handle header: a backend's handle struct opens with it (every kind's
 * handle does, dcr/ops.h), so the wrappers reach the table through the
 * handle and a wrapping backend embeds one like any other. */
struct dcr_control {
    const dcr_control_ops_t *ops;
};

/* Adds a backend from outside the engine (the table is borrowed and must
 * stay valid for the process). It needs version DCR_CONTROL_OPS_VERSION, a
 * name, create, destroy and every call slot. Registering the same table
 * again is a no-op; another table under a taken name, or a full registry
 * (64), is DCR_EINVAL. Thread-safe. */
dcr_status_t dcr_control_register(const dcr_control_ops_t *ops);
/* Registry: backends compiled into libdcr in a fixed order, then those
 * registered, in registration order. */
size_t dcr_control_backend_count(void);
/* Name of backend i (< count), or NULL. */
const char *dcr_control_backend_name(size_t i);
/* The backend registered under name (built-in or registered); NULL when
 * unknown. */
const dcr_control_ops_t *dcr_control_find(const char *name);

/* Opens backend `name` at cfg->address. DCR_ENOTFOUND for an unknown name,
 * DCR_EINVAL for a bad address, DCR_ECONTROL if the store cannot be opened or
 * holds something that is not a dcr control plane. The handle may be shared by
 * the threads of one process (a backend serializes calls as needed); a child
 * process must open its own. */
dcr_status_t dcr_control_create(const char *name, const dcr_control_config_t *cfg,
                                dcr_control_t **out_p);
/* Closes the handle; accepts NULL. No call on it may be in flight. */
void dcr_control_destroy(dcr_control_t *c);
/* The backend's name; valid while c lives. */
const char *dcr_control_name(const dcr_control_t *c);
/* True if every field of a and b is equal. */
bool dcr_commit_record_equal(const dcr_commit_record_t *a, const dcr_commit_record_t *b);

/* The committed record. DCR_ECONTROL if the store is unreachable or its
 * content is malformed. */
dcr_status_t dcr_control_read(dcr_control_t *c, dcr_commit_record_t *rec_p);

/* Writes *desired verbatim if the record still equals *expected, else
 * DCR_ECONFLICT. Not fenced by attempts: meant for binding version 0 to the
 * initial baseline and for operator repair; refits commit with
 * dcr_control_commit. */
dcr_status_t dcr_control_cas(dcr_control_t *c, const dcr_commit_record_t *expected,
                             const dcr_commit_record_t *desired);

/* Registers attempt *tau_p for from_version -> from_version+1. Refused with
 * DCR_ECONFLICT if this coordinator was replaced (another coordinator
 * prepared after this one's last prepare) or if from_version is not the
 * committed version. A coordinator may prepare again to retry; each prepare
 * replaces all earlier attempts. */
dcr_status_t dcr_control_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                 uint64_t *tau_p);

/* Attempt tau, or the latest attempt when tau is 0 (what endpoints compare
 * payloads against to ignore replaced attempts). DCR_ENOTFOUND if none.
 * Backends may forget attempts older than the last commit (their
 * acknowledgments can never count again), so for those this, required and
 * acks may also answer DCR_ENOTFOUND; the latest attempt is always kept. */
dcr_status_t dcr_control_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p);

/* The required receivers of tau in ascending order: writes min(cap, n) of
 * them to out (which may be NULL when cap is 0) and n to *n_p. */
dcr_status_t dcr_control_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                  size_t *n_p);

/* Receiver's acknowledgment that it holds P^{v+1} for tau; repeating it is
 * harmless. DCR_ECONFLICT (nothing recorded) if tau was replaced by a later
 * prepare, DCR_ENOTFOUND for an unknown tau, DCR_EINVAL if receiver is not
 * required by tau. */
dcr_status_t dcr_control_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver);

/* The acknowledgments of n receivers (1..DCR_CONTROL_ACK_MANY_MAX) of one
 * process, as dcr_control_ack each: one write where the backend can (a
 * rollout node holds several receivers, and each write is a round trip on
 * the refit's path), all recorded or none when it refuses one of them. */
#define DCR_CONTROL_ACK_MANY_MAX 64
dcr_status_t dcr_control_ack_many(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                  size_t n);

/* dcr_control_ack_many for receivers[0..n) of tau, then
 * dcr_control_report_put of report id: in one write where the backend can
 * (a rollout node acknowledges its receivers and reports itself done, and
 * every write is a round trip on the refit's path, and a wake-up of every
 * waiter). Either way the report is never visible before the
 * acknowledgments, and a refused acknowledgment (replaced attempt, a
 * receiver not required) writes no report. In one write, all or none; a
 * backend without it may leave the acknowledgments recorded when the
 * report's write fails. Arguments and status codes as for the two calls. */
dcr_status_t dcr_control_ack_report(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                    size_t n, uint32_t id, const void *data, size_t len);

/* The receivers that acknowledged tau, like dcr_control_required. */
dcr_status_t dcr_control_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                              size_t *n_p);

/* The joint commit: atomically replaces the record *expected (K^v) with
 * {v+1, baseline, tau, now} and sets *rec_p to it. Refused, leaving the record
 * unchanged, with
 *   DCR_ECONFLICT  if tau is not the latest attempt, coordinator did not
 *                  prepare tau, the record no longer equals *expected, or
 *                  tau was prepared for another version;
 *   DCR_ETIMEOUT   if tau's deadline has passed;
 *   DCR_EATTEMPT   if a required receiver has not acknowledged tau.
 * After a failed or unanswered commit, read the record: it names tau exactly
 * when this attempt committed. */
dcr_status_t dcr_control_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                const dcr_commit_record_t *expected,
                                const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                dcr_commit_record_t *rec_p);

/* Stores receiver's prewarm report (len <= DCR_CONTROL_REPORT_MAX, copied),
 * replacing an earlier one. */
dcr_status_t dcr_control_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                    size_t len);

/* A malloc'd copy of receiver's report in *data_p (the caller frees it with
 * free(); NULL when len is 0) and its length in *len_p. DCR_ENOTFOUND if the
 * receiver has not reported. */
dcr_status_t dcr_control_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                    size_t *len_p);

/* ---- waiting for a change ---------------------------------------------------------------- */

/* How long one dcr_control_wait naps on a backend without notification
 * (the polling rate the waits had before backends could notify). */
#define DCR_CONTROL_POLL_MS 1

/* The control plane's change position as this handle can tell it: take it
 * before reading what you wait for, and pass it to dcr_control_wait while
 * the read does not satisfy you. 0 means unknown (then a wait only naps). */
uint64_t dcr_control_position(dcr_control_t *c);

/* Sleeps until the control plane may hold a change after position `since`
 * (DCR_OK; the caller reads again, and may find nothing new), or until
 * timeout_ms (1..600000) passed without one (DCR_ETIMEOUT). Never blocks
 * longer than timeout_ms: the caller's deadline, a stop flag or a writer
 * that died are the caller's to check between waits. DCR_EINVAL for a NULL
 * handle or a timeout out of range. */
dcr_status_t dcr_control_wait(dcr_control_t *c, uint64_t since, int timeout_ms);

/* What this process asked of its control planes since it started, over
 * every handle: reads (record, attempts, lists, reports), writes (cas,
 * prepare, ack, commit, report and membership puts), waits and the waits
 * that ended on a change (wakeups; the rest timed out). Thread-safe. */
typedef struct dcr_control_counts {
    uint64_t reads, writes, waits, wakeups;
} dcr_control_counts_t;
void dcr_control_counts(dcr_control_counts_t *out_p);

/* Records the receiver membership: members[0..n) in any order, distinct, n
 * may be 0 (every receiver is out), at most DCR_CONTROL_RECEIVERS_MAX. Only the active coordinator
 * may change it, between attempts: refused with DCR_ECONFLICT if coordinator was replaced (another
 * coordinator prepared after this one's last prepare). */
dcr_status_t dcr_control_membership_put(dcr_control_t *c, const char *coordinator,
                                        const uint32_t *members, size_t n);

/* The recorded members in ascending order, like dcr_control_required;
 * DCR_ENOTFOUND if none was ever recorded (a fresh control plane). */
dcr_status_t dcr_control_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p);

#ifdef __cplusplus
}
#endif
#endif
