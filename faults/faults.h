/* Fault injection for refits (DESIGN.md sections 4 and 9): faults armed
 * from a plan act only through backends that wrap the real ones, as SQLite's
 * test VFS wraps its parent VFS ("faulty:<name>" transports, object stores,
 * control planes and group backends, registered with the engine's registries
 * by dcr_faults_register), so no engine code path carries a test branch.
 * Every injection is drawn from a seeded generator (dcr/rng.h), counted by
 * kind and logged (warn level) with what it hit.
 *
 * A faulty backend is created by name like any other:
 *   "faulty:objstore", "faulty:relay"   transports; "faulty:objstore" keeps
 *                                       its payloads in "faulty:<store URL>"
 *   "faulty:<store URL>"                object stores ("faulty:s3://B/P",
 *                                       "faulty:/tmp/x"): the object faults
 *   "faulty:sqlite", "faulty:etcd"      control planes
 *   "faulty:inproc", "faulty:mpi"       group backends (training side)
 * It injects the faults of the injector bound (dcr_faults_bind) when it was
 * created, for its whole life; created with none bound, it passes every
 * call through.
 *
 * An armed fault fires once, at the `nth` matching event after it was
 * armed (0: the first), and is then spent. Matching is per kind: the
 * operation it intercepts and, where set (>= 0), the owner, rollout node,
 * receiver or protocol step it targets. */
#ifndef DCR_FAULTS_H
#define DCR_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/control.h"
#include "dcr/coord.h"
#include "dcr/rng.h"
#include "dcr/status.h"
#include "dcr/transport.h"

/* The coordinator's protocol steps at which a coordinator crash fires, each
 * a call of its control plane ("faulty:<name>", faulty_control.c): */
typedef enum dcr_coord_step {
    DCR_COORD_STEP_PREPARE = 0,   /* its prepare call, before it takes effect */
    DCR_COORD_STEP_STREAM = 1,    /* its prepare took effect: before construction and delivery */
    DCR_COORD_STEP_ACK = 2,       /* its first acknowledgment call (or, rollout nodes as
                                     processes, its read of the acknowledgments): every
                                     payload applied */
    DCR_COORD_STEP_COMMIT = 3,    /* its joint commit call, before it takes effect */
    DCR_COORD_STEP_COMMITTED = 4, /* its commit took effect: before the owners' baseline update */
    DCR_COORD_STEP_COUNT
} dcr_coord_step_t;

/* "prepare", "stream", "ack", "commit", "committed". */
const char *dcr_coord_step_name(dcr_coord_step_t step);

typedef enum dcr_fault_kind {
    DCR_FAULT_DROP = 0,  /* a payload is lost on its way; the owner sees the transfer fail */
    DCR_FAULT_DUPLICATE, /* a rollout node gets a payload twice (its receivers drop the copy) */
    DCR_FAULT_REORDER,   /* one owner's payload is held back so later ones overtake it */
    DCR_FAULT_DELAY,     /* a rollout node's reception stalls for `ms` */
    DCR_FAULT_CORRUPT,   /* one byte of a payload's compressed body is flipped in flight */
    DCR_FAULT_TRUNCATE_OBJECT, /* objstore: a payload object is stored cut in half */
    DCR_FAULT_REMOVE_OBJECT,   /* objstore: a payload object disappears as it is stored */
    DCR_FAULT_RELAY_LINK,      /* relay: an owner's connection to the root drops */
    DCR_FAULT_CONTROL_BUSY,    /* the control plane answers `count` calls `ms` late */
    DCR_FAULT_CONTROL_DOWN,    /* the control plane refuses `count` calls (unavailable) */
    DCR_FAULT_COMMIT_REPLY,    /* the joint commit takes effect but its reply is lost */
    DCR_FAULT_KILL_DELIVERY,   /* a receiver dies as a payload reaches its node */
    DCR_FAULT_KILL_APPLY,      /* a receiver dies after its node took a payload (sync RL: applied,
                                  partial writes; async RL: staged) */
    DCR_FAULT_KILL_ACKED,      /* a receiver dies after its acknowledgment, before the commit */
    DCR_FAULT_COORD_CRASH,     /* the coordinator crashes at protocol step `step` */
    DCR_FAULT_OWNER_CRASH,     /* an owner crashes before uploading a payload */
    DCR_FAULT_GROUP_DROP,      /* a message between owners (group backend) is lost */
    DCR_FAULT_GROUP_DELAY,     /* a message between owners arrives `ms` late */
    /* Network faults of a testbed run (dcr faults --processes --testbed
     * netns, faults/faults_run.h): acted out on the kernel's links by
     * scripts/testbed.sh, never in one process (dcr_fault_kind_applies is
     * false for them). Each lasts `ms`, then is undone. */
    DCR_FAULT_LINK_DOWN,   /* testbed host `target`'s link is down */
    DCR_FAULT_NET_LOSS,    /* host `target` loses `count`% of what it receives */
    DCR_FAULT_NET_REORDER, /* host `target` gets `count`% of what it receives reordered */
    DCR_FAULT_PARTITION,   /* rollout host `target` and the services host cannot reach each other */
    DCR_FAULT_KIND_COUNT
} dcr_fault_kind_t;

/* Short names ("drop", "kill_apply", ...) used in logs, CLI and JSON. */
const char *dcr_fault_kind_name(dcr_fault_kind_t kind);

typedef struct dcr_fault {
    dcr_fault_kind_t kind;
    int target;            /* owner (send and group faults: the sender), node (delay, duplicate),
                              receiver (kills); -1: any */
    int nth;               /* fires at the nth matching event after arming (0: first) */
    int ms;                /* delay, reorder and busy duration */
    int count;             /* control faults: calls affected */
    dcr_coord_step_t step; /* coordinator crash */
} dcr_fault_t;

typedef struct dcr_faults dcr_faults_t;

/* seed: where random plans and random choices come from. */
dcr_status_t dcr_faults_create(uint64_t seed, dcr_faults_t **out_p);
/* Destroy the backends created while f was bound first; unbinds f. Accepts
 * NULL. */
void dcr_faults_destroy(dcr_faults_t *f);

/* Registers the faulty:<name> transport, object-store, control-plane and
 * group backends for every backend of those registries that is not itself
 * faulty.
 * Idempotent and thread-safe; call before creating a faulty backend. */
dcr_status_t dcr_faults_register(void);
/* Makes f the injector of every faulty:<name> backend created from now on
 * until dcr_faults_unbind(f); each keeps it for its life, so f must outlive
 * the backends created meanwhile. One injector at a time per process:
 * DCR_EINVAL while another is bound. Also registers (dcr_faults_register). */
dcr_status_t dcr_faults_bind(dcr_faults_t *f);
/* Ends f's binding (backends already created keep injecting f's faults).
 * A no-op when f is not the bound injector. */
void dcr_faults_unbind(dcr_faults_t *f);
/* The rollout side the receiver kills act on: a kill marks the receiver's
 * slot dead on `gate` (dcr_gate_kill), as the serving process that lost it
 * would, and the coordinator leaves it out. Receiver id r lives on rollout
 * node r / receivers_per_node (the transport's node index). Without a gate
 * (NULL, the default) kill faults never fire. The gate must outlive the
 * backends created while f was bound. */
void dcr_faults_set_rollout(dcr_faults_t *f, dcr_gate_t *gate, int receivers_per_node);

/* What a harness sees of the calls the faulty backends pass on (the script
 * of SQLite's test VFS): observation only, never a fault. */
typedef enum dcr_faults_event {
    /* Rollout node `who` gives back a payload it took (dcr_transport_release):
     * in sync RL its receivers applied it. */
    DCR_FAULTS_EVENT_TAKEN = 0,
    /* A joint commit of attempt tau is about to reach the control plane. */
    DCR_FAULTS_EVENT_COMMIT = 1,
} dcr_faults_event_t;
/* Called on the thread of the call, before the call's faults act; must be
 * thread-safe (several nodes' threads). */
typedef void (*dcr_faults_watch_fn)(void *ctx, dcr_faults_event_t ev, int who, uint64_t tau);
/* Sets the watcher (NULL removes it); between transitions. */
void dcr_faults_watch(dcr_faults_t *f, dcr_faults_watch_fn fn, void *ctx);

/* Arms one fault (copied). At most 64 are armed at once. */
dcr_status_t dcr_faults_arm(dcr_faults_t *f, const dcr_fault_t *fault);
/* Drops every armed fault that has not fired (between transitions). */
void dcr_faults_disarm(dcr_faults_t *f);
/* Whether a fault of this kind can act on this transport ("objstore",
 * "relay"): file faults need the object store, link faults the relay. */
bool dcr_fault_kind_applies(dcr_fault_kind_t kind, const char *transport);
/* A random fault of a kind that applies, drawn from f's generator, for a
 * pipeline of `owners` owners, `nodes` rollout nodes and `receivers`
 * receivers. Kills target a receiver for which alive[r] is true (NULL: any). */
dcr_fault_t dcr_faults_draw(dcr_faults_t *f, const char *transport, int owners, int nodes,
                            int receivers, const bool *alive);
/* f's generator, for the harness's own seeded choices. */
dcr_rng_t *dcr_faults_rng(dcr_faults_t *f);

/* Faults that fired, per kind (counts[DCR_FAULT_KIND_COUNT]), since create. */
void dcr_faults_counts(const dcr_faults_t *f, int64_t *counts);
/* True once since a coordinator crash fired (the harness starts a new one).
 * A crash is the coordinator process dying at that call: from then on every
 * call of a faulty control plane bound to f is refused with DCR_ECONFLICT,
 * the status by which a coordinator stops without changing anything more,
 * as a replaced one does; taking the crash (the new coordinator's process
 * and connection) ends that. */
bool dcr_faults_take_crash(dcr_faults_t *f);

#endif
