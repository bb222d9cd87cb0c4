/* The coordinator: one transition v -> v+1 across both clusters
 * (DESIGN.md section 5): prepare -> open apply -> stream -> flush -> wait for
 * every required receiver's acknowledgment -> joint commit by compare-and-set
 * -> owners update their baselines -> cleanup, with overwrite retries when an
 * attempt fails.
 *
 * The coordinator drives parties it does not own: the constructor (owners),
 * a transport, the control plane and the receivers, grouped into rollout
 * nodes. Payload bytes reach receivers only through the transport, and
 * commit and acknowledgments only through the control plane (G4). */
#ifndef DCR_COORD_H
#define DCR_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/construct.h"
#include "dcr/control.h"
#include "dcr/parties.h"
#include "dcr/receiver.h"
#include "dcr/rollout_node.h"
#include "dcr/status.h"
#include "dcr/transport.h"

typedef enum dcr_rl_mode {
    /* The request gate closes when the first attempt starts; payloads are
     * applied as they arrive. */
    DCR_RL_SYNC = 0,
    /* Payloads are staged while requests are served at v; the gate closes
     * after the last payload, in-flight requests finish, the delta is
     * applied, and the gate reopens when the transition ends. */
    DCR_RL_ASYNC = 1,
} dcr_rl_mode_t;

dcr_status_t dcr_rl_mode_parse(const char *text, dcr_rl_mode_t *out_p);
const char *dcr_rl_mode_name(dcr_rl_mode_t mode);

typedef struct dcr_coord_config {
    const char *id; /* coordinator id, unique per coordinator run (copied) */
    dcr_rl_mode_t rl;
    int receivers_per_node; /* receiver i lives on rollout node i / receivers_per_node */
    int max_attempts;       /* first attempt plus overwrite retries (>= 1) */
    uint32_t deadline_ms;   /* commit deadline per attempt */
    int stall_timeout_ms;   /* a node that receives nothing this long fails the attempt */
    int retry_backoff_ms; /* pause before retry k is k times this (a busy control plane recovers) */
    /* Which implementation of the parties interface serves each side
     * (engine/coord/coord-parties.h), by name: "local" (NULL means it) or
     * "remote"; any other name is refused with DCR_EINVAL. The coordinator
     * runs one protocol and these two choices are read in one place only,
     * during dcr_coord_create (the strings need not outlive it).
     *
     * nodes "local": the rollout nodes are dcr_rollout_node_t threads of this
     * process over parties->receivers.
     *
     * nodes "remote": the rollout nodes are processes of their own (DESIGN.md section 11):
     * the coordinator runs no node and touches no receiver. Each node
     * process learns of an attempt from the control plane, begins it on its
     * receivers, opens it on its own transport handle, reports JOINED
     * (dcr_node_report_t, dcr/parties.h), applies, acknowledges its receivers itself and
     * reports DONE or FAILED. The coordinator opens the attempt on its own
     * transport handle, waits until every node of a required receiver
     * joined, then lets the owners stream, and waits for DONE. Sync RL only;
     * parties->receivers may be NULL. A node whose report says GONE with
     * pid 0 (never started: a node added mid-run, its launcher's report)
     * is left out of the attempts prepared while it says so, as a
     * receiver killed and not restarted is; membership changes only
     * between attempts. A node with no report at all is a member; one
     * whose report cannot be read (4 tries) fails the attempt before it
     * is prepared, naming the node. */
    const char *nodes;
    int join_timeout_ms; /* remote: a node that has not joined an attempt this long fails it */
    /* owners "local": parties->constructor constructs and sends in this
     * process.
     *
     * owners "remote": the owners are processes too (`mpirun -np P dcr owner`;
     * needs nodes "remote"): the coordinator holds no constructor (parties->
     * constructor may be NULL) and sends nothing. The owners learn of an
     * attempt from the control plane, decide XOR or overwrite themselves (a
     * second attempt for one from_version is a retry, all overwrites), open
     * it on their own transport handles after this coordinator's (its opened
     * report) and report their record (dcr_owners_report_t): SENT with their
     * construction figures once every owner finished the attempt on the
     * transport (t0 is their construction start), then, after the commit,
     * COMMITTED with t1 once every owner updated its baseline. The
     * coordinator waits for SENT (stall timeout), the nodes' DONE, commits,
     * and waits for COMMITTED (stall timeout) for t1. */
    const char *owners;
} dcr_coord_config_t;

/* Sync RL, 3 attempts, 10 min deadline, 2 min stall timeout, 20 ms backoff,
 * rollout nodes in this process (a join timeout of 1 min when remote). */
dcr_coord_config_t dcr_coord_config_default(const char *id, int receivers_per_node);

typedef struct dcr_gate dcr_gate_t;

typedef struct dcr_coord_parties {
    dcr_constructor_t *constructor;
    int world; /* owners (training ranks) */
    dcr_transport_t
        *transport; /* created for `world` owners and nreceivers / receivers_per_node nodes */
    dcr_control_t *control;
    dcr_receiver_t **receivers; /* prewarmed, holding the committed version */
    int nreceivers;
    const uint8_t *xor_allowed; /* per canonical tensor: XOR on every receiver's path */
    /* The receivers' request gates, shared by every coordinator of the
     * rollout cluster (one slot per receiver; the coordinator binds its
     * receivers to them); NULL: the coordinator makes its own. Caller-owned,
     * must outlive the coordinator. */
    dcr_gate_t *gate;
} dcr_coord_parties_t;

/* Figures of one transition. Times are seconds on dcr_clock_s's axis. */
typedef struct dcr_refit_result {
    uint64_t version; /* committed after the transition */
    uint64_t tau;     /* attempt that committed */
    int attempts;
    double t0, t1;    /* first owner starts construction; last owner finished its baseline update */
    double latency_s; /* t1 - t0 */
    double construction_end, delivery_end, apply_end, commit_end;
    double finalization_s;           /* end of the last loader application to t1 */
    dcr_construct_stats_t construct; /* of the committed attempt */
    int64_t payload_bytes;           /* V_payload of the committed attempt */
    int64_t cross_bytes;             /* V_cross of the whole transition (retries included) */
    uint64_t duplicates, stale;      /* payloads receivers dropped by rule */
    int receivers_died; /* required receivers found dead during the transition (left out of retries)
                         */
} dcr_refit_result_t;

typedef struct dcr_coord dcr_coord_t;

/* Reads the commit record; a fresh control plane is bound to version 0
 * with the initial baseline. */
dcr_status_t dcr_coord_create(const dcr_coord_config_t *cfg, const dcr_coord_parties_t *parties,
                              dcr_coord_t **out_p);
/* Accepts NULL. */
void dcr_coord_destroy(dcr_coord_t *c);

/* The committed version. */
uint64_t dcr_coord_version(const dcr_coord_t *c);
/* Attempts the last transition made (refit or resume), also when it failed
 * or crashed: the figure a failed call cannot return in its result. */
int dcr_coord_last_attempts(const dcr_coord_t *c);

/* One transition to the candidate weights (candidate[i] holds shard i). On
 * success every receiver holds P^{v+1}, the commit record names it, and the
 * owners' baselines are updated. When every attempt fails, version v stays
 * committed and served, and the error says why (DCR_EFATAL: operator
 * intervention). */
dcr_status_t dcr_coord_refit(dcr_coord_t *c, dcr_storage_t *const *candidate,
                             dcr_refit_result_t *out_p);

/* ---- failures (DESIGN.md section 5 step 7) ------------------------------------- */

/* How a receiver's death reaches the coordinator: the rollout side marks
 * its slot dead on the request gates (dcr_gate_kill), as the serving process
 * that lost the receiver's device would; the rollout nodes' liveness checks
 * during an attempt, the check after the acknowledgments and the start of
 * every attempt read the mark. A dead receiver fails the attempt it was
 * required by and is left out of every later one (recorded in the control
 * plane) until dcr_coord_receiver_restart. */

/* Membership changes only between attempts: these calls are made between
 * transitions, never during dcr_coord_refit. The required receivers of an
 * attempt are the live ones. Every change (these calls, and deaths seen
 * during an attempt, before the next one starts) is recorded in the control
 * plane, where a coordinator reads it when it is created: a new coordinator
 * after a failover starts from its predecessor's membership, and a fresh
 * control plane gets every receiver. A replaced coordinator's changes are
 * refused (DCR_ECONFLICT). */
bool dcr_coord_receiver_alive(const dcr_coord_t *c, int receiver);
int dcr_coord_live_receivers(const dcr_coord_t *c);
/* Marks a receiver dead (killed); its storage is no longer trusted and its
 * gate closes. An error says the control plane did not record it (yet). */
dcr_status_t dcr_coord_receiver_kill(dcr_coord_t *c, int receiver);
/* A (re)started receiver restores the committed version before it joins:
 * restore builds a fresh, prewarmed receiver holding L_r(W^version) by a
 * dense refit (the caller owns it, and keeps owning the old one). It joins
 * (and its gate opens) once the control plane recorded it; on an error after
 * the restore it sits in the slot, out of the membership. */
typedef dcr_status_t (*dcr_coord_restore_fn)(void *ctx, int receiver, uint64_t version,
                                             dcr_receiver_t **out_p);
dcr_status_t dcr_coord_receiver_restart(dcr_coord_t *c, int receiver, dcr_coord_restore_fn restore,
                                        void *ctx);
/* The receiver currently in slot `receiver` (the restored one after a restart). */
dcr_receiver_t *dcr_coord_receiver(const dcr_coord_t *c, int receiver);

/* Failover: a new coordinator (new id, created after the old one crashed)
 * finishes the transition from_version -> from_version+1 that the old one
 * left. It reads the commit record first: if the old coordinator's commit
 * took effect, only the owners' baseline update is left to do (res->attempts
 * is 0); otherwise it runs the transition again, every attempt as absolute
 * overwrites, since receivers may hold any mixture of old and new values.
 * DCR_ECONFLICT if the record is neither from_version nor its successor. */
dcr_status_t dcr_coord_resume(dcr_coord_t *c, dcr_storage_t *const *candidate,
                              uint64_t from_version, dcr_refit_result_t *out_p);

/* ---- the request gate (DESIGN.md section 5 steps 5 and 7) -------------------------------
 *
 * One gate per receiver slot, on the rollout side: it outlives coordinators,
 * so a crashed coordinator leaves closed what it closed, and only a later
 * coordinator's commit, or a restore by dense refit, reopens a receiver that
 * may hold a mixture of v and v+1. Requests (readers) enter a slot's gate
 * and read the receiver bound to it while they hold it; closing waits for
 * the readers inside to leave, so a reader sees P^v or P^{v+1}, never a mix.
 *
 * Gate operations of an attempt carry its tau: once a later attempt has
 * been announced, operations of older ones are ignored (a replaced
 * coordinator cannot reopen anything). tau 0 marks a membership change
 * between attempts (a kill, a restore), which no attempt races.
 *
 * A slot is dirty from the first payload a receiver applies until a commit
 * or a restore vouches for its state; an open that does not vouch leaves a
 * dirty slot closed. Every call is thread-safe. */
/* `slots` gates, all open and clean, with no receiver bound. */
dcr_status_t dcr_gate_create(int slots, dcr_gate_t **out_p);
/* Accepts NULL. No reader may be inside. */
void dcr_gate_destroy(dcr_gate_t *g);
int dcr_gate_slots(const dcr_gate_t *g);

/* Readers: waits up to timeout_ms (< 0: for ever, 0: not at all) for the
 * slot's gate to be open, and returns the receiver bound to it, which stays
 * valid and unchanged until dcr_gate_leave; NULL when the gate stayed
 * closed, no receiver is bound, or slot is out of range. */
dcr_receiver_t *dcr_gate_enter(dcr_gate_t *g, int slot, int timeout_ms);
void dcr_gate_leave(dcr_gate_t *g, int slot);

/* The coordinator's side. announce raises the latest attempt the gates
 * know (never lowers it). */
void dcr_gate_announce(dcr_gate_t *g, uint64_t tau);
/* Closes the slot and waits until no reader is inside; false (and nothing
 * done) for an attempt older than the latest announced one. */
bool dcr_gate_close(dcr_gate_t *g, int slot, uint64_t tau);
/* Opens the slot. verified: the caller knows the receiver holds a committed
 * version (after the joint commit or a restore), which clears the dirty
 * mark; otherwise a dirty slot stays closed. False when the slot stays
 * closed (dirty, or tau older than the latest announced attempt). */
bool dcr_gate_open(dcr_gate_t *g, int slot, uint64_t tau, bool verified);
/* Marks the slot's receiver as holding writes of an uncommitted attempt. */
void dcr_gate_mark_dirty(dcr_gate_t *g, int slot);
bool dcr_gate_dirty(const dcr_gate_t *g, int slot);
bool dcr_gate_is_open(const dcr_gate_t *g, int slot);
/* Binds the receiver that serves the slot; only while the slot is closed
 * (a restart), or before any reader uses the gate. Binding another receiver
 * than the one bound (a restored one) clears the dead mark; binding the same
 * one again (a new coordinator over the same parties) does not. */
void dcr_gate_bind(dcr_gate_t *g, int slot, dcr_receiver_t *r);

/* The rollout side's word that the receiver bound to the slot died (its
 * device or process failed): the slot closes, waiting for the readers
 * inside, and stays closed, whatever any attempt vouches, until a receiver
 * is bound again (a restore). Any thread; tau-independent. Coordinators
 * read the mark (dcr_gate_dead) and leave the receiver out. */
void dcr_gate_kill(dcr_gate_t *g, int slot);
bool dcr_gate_dead(const dcr_gate_t *g, int slot);

/* The coordinator's gates: parties->gate, or its own when that was NULL. */
dcr_gate_t *dcr_coord_gate(const dcr_coord_t *c);

#endif
