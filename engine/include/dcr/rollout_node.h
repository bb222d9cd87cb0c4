/* A rollout node's runtime: the receivers of one rollout node taking the
 * payloads of an attempt from the transport (DESIGN.md section 5 steps 4
 * and 5). In sync RL each delivered payload is applied at once by every
 * member receiver; in async RL the compressed payloads are staged in host
 * memory while requests are still served at v, and applied after the gate
 * closed.
 *
 * The node does not own its receivers, their membership or their request
 * gates: the environment (dcr_rollout_node_env_t) answers for them, so that
 * the same runtime serves as a thread of an in-process coordinator and as
 * the main loop of a rollout-node process (DESIGN.md section 11). */
#ifndef DCR_ROLLOUT_NODE_H
#define DCR_ROLLOUT_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/control.h"
#include "dcr/receiver.h"
#include "dcr/status.h"
#include "dcr/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a receiver's liveness is checked during an attempt. */
typedef enum dcr_coord_point {
    DCR_COORD_POINT_DELIVERY = 0, /* a payload reached its node, before this receiver takes it */
    DCR_COORD_POINT_APPLY =
        1, /* after this receiver applied (or staged) a payload: partial writes */
    DCR_COORD_POINT_ACKED = 2, /* after its acknowledgment, before the joint commit */
} dcr_coord_point_t;

/* "delivery", "apply", "acked". */
const char *dcr_coord_point_name(dcr_coord_point_t point);

/* What the node asks about its receivers; ids are global receiver ids.
 * Called from the node's thread; must be thread-safe if shared. */
typedef struct dcr_rollout_node_env {
    /* The receiver in slot id now (a restart may replace it). */
    dcr_receiver_t *(*receiver)(void *ctx, int id);
    /* Whether receiver id is a member: non-members take nothing. */
    bool (*member)(void *ctx, int id);
    /* DCR_OK when receiver id is still alive at this point of attempt tau;
     * otherwise the error that fails the attempt (the environment records
     * the death). NULL: always alive. */
    dcr_status_t (*alive)(void *ctx, int id, dcr_coord_point_t point, uint64_t tau);
    /* Receiver id is about to hold writes of an uncommitted attempt (its
     * request gate's dirty mark). NULL: nothing to mark. */
    void (*dirty)(void *ctx, int id);
    void *ctx;
} dcr_rollout_node_env_t;

typedef struct dcr_rollout_node_config {
    int node;             /* the transport's rollout node index */
    int first_receiver;   /* global id of its first receiver */
    int receivers;        /* receivers on this node (>= 1) */
    bool stage;           /* async RL: stage compressed payloads, apply later */
    int stall_timeout_ms; /* receiving nothing this long fails the attempt */
    int poll_ms;          /* one wait on the transport (0: 50 ms) */
    /* The node's index on the transport is node - transport_base: 0 in a
     * process whose own transport handle serves this node alone. */
    int transport_base;
} dcr_rollout_node_config_t;

typedef struct dcr_rollout_node dcr_rollout_node_t;

/* The node over `transport` (borrowed; it must outlive the node). The env
 * is copied. */
dcr_status_t dcr_rollout_node_create(const dcr_rollout_node_config_t *cfg,
                                     const dcr_rollout_node_env_t *env, dcr_transport_t *transport,
                                     dcr_rollout_node_t **out_p);
/* Frees staged payloads; accepts NULL. No thread of it may run. */
void dcr_rollout_node_destroy(dcr_rollout_node_t *n);

/* Receives attempt tau's payloads until its stream ends (DCR_ECLOSED from
 * the transport), applying or staging each. After a failure (a receiver
 * died, an apply failed) it keeps draining without applying, so that
 * back-pressure never blocks the owners of a failed attempt, and returns
 * the failure at the end. DCR_ETIMEOUT after stall_timeout_ms of silence.
 * Staged payloads of an earlier attempt are dropped first. */
dcr_status_t dcr_rollout_node_deliver(dcr_rollout_node_t *n, uint64_t tau);
/* Async RL, after the gate closed: every staged payload applied by every
 * member receiver, then the staging freed. */
dcr_status_t dcr_rollout_node_apply_staged(dcr_rollout_node_t *n, uint64_t tau);
/* Drops staged payloads (a failed attempt's). */
void dcr_rollout_node_discard(dcr_rollout_node_t *n);
/* dcr_clock_s of the end of the node's last loader application (0: none
 * since create). */
double dcr_rollout_node_last_apply_end(const dcr_rollout_node_t *n);

/* The same two steps on a thread of the node's own (DCR_THREAD_NODE), for
 * hosts that run several nodes in one process; join returns the step's
 * status with its detail. One step at a time per node. */
dcr_status_t dcr_rollout_node_start_deliver(dcr_rollout_node_t *n, uint64_t tau);
dcr_status_t dcr_rollout_node_start_apply(dcr_rollout_node_t *n, uint64_t tau);
dcr_status_t dcr_rollout_node_join(dcr_rollout_node_t *n);
/* True once the step started last has ended (join then returns at once). */
bool dcr_rollout_node_finished(dcr_rollout_node_t *n);
/* Sleeps until the step started last has ended or timeout_ms (>= 0) passed,
 * and says which: woken by the step's end itself, so a caller that watches
 * something else meanwhile (a newer attempt, a stop flag) looks at it once
 * per timeout instead of looking at `finished` at a fixed rate. */
bool dcr_rollout_node_wait(dcr_rollout_node_t *n, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
