/* How the coordinator reaches its parties: one interface, two
 * implementations (DESIGN.md sections 4 and 11).
 *
 * The coordinator drives two sides it does not own: the rollout nodes,
 * which receive, apply and acknowledge an attempt, and the owners, which
 * construct and send it and update their baselines after the commit. Each
 * side is an ops table that opens with the header every table does
 * (dcr_ops_header_t: version and name, dcr/ops.h) and says create/destroy:
 *   - "local": the side runs in this process (threads of the coordinator;
 *     what `dcr bench` does in one process): the rollout nodes are
 *     dcr_rollout_node_t threads over the coordinator's receivers, the
 *     owners its dcr_constructor_t;
 *   - "remote": the side is processes of its own (the deployment's roles),
 *     reached through the control plane only: the coordinator waits for
 *     and reads their status records (dcr/parties.h) and publishes its
 *     own "opened" record.
 * coord.c calls both sides through the wrappers below and never asks which
 * implementation it holds; dcr__coord_parties_open is the one place that
 * picks them (by name, from dcr_coord_config_t's nodes and owners).
 * Every slot may block up to the timeouts of the configuration; every
 * failure is reported with dcr_error_set and fails the attempt. */
#ifndef DCR_COORD_PARTIES_H
#define DCR_COORD_PARTIES_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/coord.h"
#include "dcr/ops.h"

/* The attempt in progress as both sides see it. */
typedef struct dcr__attempt {
    uint64_t tau;
    const uint32_t *required; /* the attempt's required receivers, ascending */
    size_t nrequired;
} dcr__attempt_t;

/* What the coordinator lends the rollout side; borrowed for the side's
 * lifetime. */
typedef struct dcr__nodes_env {
    const dcr_coord_config_t *cfg;
    int nodes, nreceivers;
    dcr_transport_t *transport; /* the coordinator's handle */
    dcr_control_t *control;
    /* The coordinator's receivers: slots, membership, liveness checks (which
     * record deaths) and dirty marks. */
    dcr_rollout_node_env_t receivers;
} dcr__nodes_env_t;

#define DCR__NODES_OPS_VERSION 2

typedef struct dcr__nodes_ops {
    dcr_ops_header_t hdr; /* version DCR__NODES_OPS_VERSION; name "local", "remote" */
    dcr_status_t (*create)(const dcr__nodes_env_t *env, void **impl_p);
    void (*destroy)(void *impl); /* accepts NULL */
    /* Whether node's receivers stay out of the next attempt although they
     * are members (a node process not started yet). */
    dcr_status_t (*absent)(void *impl, int node, bool *absent_p);
    /* Before the prepare: every node of a live receiver is there to take
     * part (a restarting process is back). */
    dcr_status_t (*present)(void *impl);
    /* After the coordinator opened tau on its transport handle: tau begins
     * on every required receiver; returns once every node can receive. */
    dcr_status_t (*begin)(void *impl, const dcr__attempt_t *a);
    /* Before the owners send: the nodes start receiving tau. */
    dcr_status_t (*deliver)(void *impl, const dcr__attempt_t *a);
    /* Between polls while the owners send: an error when a required node
     * is gone (it would stall the owners until the stall timeout). */
    dcr_status_t (*check)(void *impl, const dcr__attempt_t *a);
    /* After the owners finished (sent: without an error): returns once every
     * node holds every payload of tau (sync: applied), the end of the last
     * loader application in *apply_end_p when later. */
    dcr_status_t (*delivered)(void *impl, const dcr__attempt_t *a, bool sent, double *apply_end_p);
    /* Async RL, after the gates closed: every staged payload applied. NULL:
     * the side runs sync RL only (create refuses async). */
    dcr_status_t (*apply_staged)(void *impl, const dcr__attempt_t *a, double *apply_end_p);
    /* Drops what a failed attempt staged. */
    void (*discard)(void *impl);
    /* Every required receiver's acknowledgment of tau is in the control
     * plane, and each still holds P^{v+1}. */
    dcr_status_t (*acknowledge)(void *impl, const dcr__attempt_t *a);
    /* V_cross over the run so far (a counter: the coordinator takes
     * differences), given the owners' uploads so far. */
    int64_t (*cross_bytes)(void *impl, int64_t owner_uploads);
    /* Payloads the receivers dropped by rule over the run (0 where the
     * nodes count them themselves). */
    void (*drops)(void *impl, uint64_t *duplicates_p, uint64_t *stale_p);
} dcr__nodes_ops_t;

/* What the coordinator lends the owners' side. */
typedef struct dcr__owners_env {
    const dcr_coord_config_t *cfg;
    dcr_constructor_t *constructor;
    int world;
    dcr_transport_t *transport;
    dcr_control_t *control;
    const uint8_t *xor_allowed;
    /* Called between polls while the owners send; an error fails the
     * attempt (the rollout side's check). */
    dcr_status_t (*watch)(void *ctx, const dcr__attempt_t *a);
    void *ctx;
} dcr__owners_env_t;

#define DCR__OWNERS_OPS_VERSION 2

typedef struct dcr__owners_ops {
    dcr_ops_header_t hdr; /* version DCR__OWNERS_OPS_VERSION; name "local", "remote" */
    dcr_status_t (*create)(const dcr__owners_env_t *env, void **impl_p);
    void (*destroy)(void *impl); /* accepts NULL */
    /* The attempt's gates are closed; the owners are about to start (t0,
     * when the side starts them itself). */
    void (*begin)(void *impl, dcr_refit_result_t *res);
    /* Constructs and sends tau (or waits until the owner processes did):
     * res gets t0 (once), the construction figures and construction_end. */
    dcr_status_t (*construct)(void *impl, const dcr__attempt_t *a, dcr_storage_t *const *candidate,
                              bool overwrite, dcr_refit_result_t *res);
    /* After the joint commit: the owners update their baselines; res->t1. */
    dcr_status_t (*commit)(void *impl, const dcr_commit_record_t *committed,
                           dcr_refit_result_t *res);
    /* Payload bytes the owners uploaded over the run (a counter). */
    int64_t (*uploads)(void *impl);
} dcr__owners_ops_t;

extern const dcr__nodes_ops_t dcr__nodes_local, dcr__nodes_remote;
extern const dcr__owners_ops_t dcr__owners_local, dcr__owners_remote;

typedef struct dcr__nodes {
    const dcr__nodes_ops_t *ops;
    void *impl;
} dcr__nodes_t;

typedef struct dcr__owners {
    const dcr__owners_ops_t *ops;
    void *impl;
} dcr__owners_t;

/* Picks both sides by the names cfg's nodes and owners give (the only
 * reader of them; NULL is "local", an unknown name DCR_EINVAL) and creates
 * them; on an error nothing is left to destroy. */
dcr_status_t dcr__coord_parties_open(const dcr__nodes_env_t *nenv, const dcr__owners_env_t *oenv,
                                     dcr__nodes_t *nodes_p, dcr__owners_t *owners_p);
/* Accepts sides never created (zeroed). */
void dcr__coord_parties_close(dcr__nodes_t *nodes, dcr__owners_t *owners);

/* ---- the wrappers coord.c calls ---------------------------------------------------- */

static inline dcr_status_t dcr__nodes_absent(dcr__nodes_t *n, int node, bool *absent_p)
{
    return n->ops->absent(n->impl, node, absent_p);
}
static inline dcr_status_t dcr__nodes_present(dcr__nodes_t *n)
{
    return n->ops->present(n->impl);
}
static inline dcr_status_t dcr__nodes_begin(dcr__nodes_t *n, const dcr__attempt_t *a)
{
    return n->ops->begin(n->impl, a);
}
static inline dcr_status_t dcr__nodes_deliver(dcr__nodes_t *n, const dcr__attempt_t *a)
{
    return n->ops->deliver(n->impl, a);
}
static inline dcr_status_t dcr__nodes_check(dcr__nodes_t *n, const dcr__attempt_t *a)
{
    return n->ops->check(n->impl, a);
}
static inline dcr_status_t dcr__nodes_delivered(dcr__nodes_t *n, const dcr__attempt_t *a, bool sent,
                                                double *apply_end_p)
{
    return n->ops->delivered(n->impl, a, sent, apply_end_p);
}
static inline dcr_status_t dcr__nodes_apply_staged(dcr__nodes_t *n, const dcr__attempt_t *a,
                                                   double *apply_end_p)
{
    if (!n->ops->apply_staged)
        return dcr_error_set(DCR_EINVAL, "rollout nodes \"%s\" apply as payloads arrive only",
                             n->ops->hdr.name);
    return n->ops->apply_staged(n->impl, a, apply_end_p);
}
static inline void dcr__nodes_discard(dcr__nodes_t *n)
{
    if (n->ops) n->ops->discard(n->impl);
}
static inline dcr_status_t dcr__nodes_acknowledge(dcr__nodes_t *n, const dcr__attempt_t *a)
{
    return n->ops->acknowledge(n->impl, a);
}
static inline int64_t dcr__nodes_cross_bytes(dcr__nodes_t *n, int64_t owner_uploads)
{
    return n->ops->cross_bytes(n->impl, owner_uploads);
}
static inline void dcr__nodes_drops(dcr__nodes_t *n, uint64_t *duplicates_p, uint64_t *stale_p)
{
    n->ops->drops(n->impl, duplicates_p, stale_p);
}

static inline void dcr__owners_begin(dcr__owners_t *o, dcr_refit_result_t *res)
{
    o->ops->begin(o->impl, res);
}
static inline dcr_status_t dcr__owners_construct(dcr__owners_t *o, const dcr__attempt_t *a,
                                                 dcr_storage_t *const *candidate, bool overwrite,
                                                 dcr_refit_result_t *res)
{
    return o->ops->construct(o->impl, a, candidate, overwrite, res);
}
static inline dcr_status_t
dcr__owners_commit(dcr__owners_t *o, const dcr_commit_record_t *committed, dcr_refit_result_t *res)
{
    return o->ops->commit(o->impl, committed, res);
}
static inline int64_t dcr__owners_uploads(dcr__owners_t *o)
{
    return o->ops->uploads(o->impl);
}

#endif
