/* The coordinator's parties in its own process (coord-parties.h, "local"):
 * the rollout nodes are dcr_rollout_node_t threads over the coordinator's
 * receivers, the owners its constructor, which sends through the
 * coordinator's transport handle. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord-parties.h"
#include "dcr/clock.h"
#include "dcr/trace.h"

/* ---- rollout nodes on threads ----------------------------------------------------- */

typedef struct local_nodes {
    dcr__nodes_env_t env;
    dcr_rollout_node_t **node; /* one per node */
} local_nodes_t;

static void nodes_destroy(void *impl)
{
    local_nodes_t *n = impl;
    if (!n) return;
    for (int i = 0; n->node && i < n->env.nodes; i++) dcr_rollout_node_destroy(n->node[i]);
    free(n->node);
    free(n);
}

static dcr_status_t nodes_create(const dcr__nodes_env_t *env, void **impl_p)
{
    local_nodes_t *n = calloc(1, sizeof(*n));
    if (n) n->node = calloc((size_t)env->nodes, sizeof(*n->node));
    if (!n || !n->node) {
        free(n);
        return dcr_error_set(DCR_ENOMEM, "%d rollout nodes", env->nodes);
    }
    n->env = *env;
    int per = env->cfg->receivers_per_node;
    for (int i = 0; i < env->nodes; i++) {
        dcr_rollout_node_config_t nc = {
            i, i * per, per, env->cfg->rl == DCR_RL_ASYNC, env->cfg->stall_timeout_ms, 0, 0};
        dcr_status_t st =
            dcr_rollout_node_create(&nc, &env->receivers, env->transport, &n->node[i]);
        if (st != DCR_OK) {
            nodes_destroy(n);
            return st;
        }
    }
    *impl_p = n;
    return DCR_OK;
}

/* Every node is in this process: none is ever away. */
static dcr_status_t nodes_absent(void *impl, int node, bool *absent_p)
{
    (void)impl;
    (void)node;
    *absent_p = false;
    return DCR_OK;
}

static dcr_status_t nodes_present(void *impl)
{
    (void)impl;
    return DCR_OK;
}

static dcr_status_t nodes_begin(void *impl, const dcr__attempt_t *a)
{
    local_nodes_t *n = impl;
    const dcr_rollout_node_env_t *r = &n->env.receivers;
    for (size_t i = 0; i < a->nrequired; i++)
        DCR_CHECK(dcr_receiver_begin_attempt(r->receiver(r->ctx, (int)a->required[i]), a->tau));
    return DCR_OK;
}

/* Waits for the nodes' threads; the first failure, and the end of the last
 * loader application, in *apply_end. */
static dcr_status_t join_nodes(local_nodes_t *n, int started, double *apply_end)
{
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < started; i++) {
        dcr_status_t s = dcr_rollout_node_join(n->node[i]);
        if (st == DCR_OK) st = s;
        double end = dcr_rollout_node_last_apply_end(n->node[i]);
        if (end > *apply_end) *apply_end = end;
    }
    return st;
}

/* One step (deliver, or apply what was staged) on every node's thread. */
static dcr_status_t run_nodes(local_nodes_t *n, uint64_t tau, bool apply)
{
    for (int i = 0; i < n->env.nodes; i++) {
        dcr_status_t st = apply ? dcr_rollout_node_start_apply(n->node[i], tau)
                                : dcr_rollout_node_start_deliver(n->node[i], tau);
        if (st != DCR_OK) {
            char why[512];
            snprintf(why, sizeof(why), "%s", dcr_error_detail());
            double ignored = 0;
            join_nodes(n, i, &ignored);
            return dcr_error_set(st, "%s", why);
        }
    }
    return DCR_OK;
}

static dcr_status_t nodes_deliver(void *impl, const dcr__attempt_t *a)
{
    return run_nodes(impl, a->tau, false);
}

/* A death in this process is seen by the node threads' own checks. */
static dcr_status_t nodes_check(void *impl, const dcr__attempt_t *a)
{
    (void)impl;
    (void)a;
    return DCR_OK;
}

/* The threads end with the stream, also a failed one (the coordinator
 * stopped the transport, which wakes them). */
static dcr_status_t nodes_delivered(void *impl, const dcr__attempt_t *a, bool sent,
                                    double *apply_end_p)
{
    local_nodes_t *n = impl;
    (void)a;
    (void)sent;
    return join_nodes(n, n->env.nodes, apply_end_p);
}

static dcr_status_t nodes_apply_staged(void *impl, const dcr__attempt_t *a, double *apply_end_p)
{
    local_nodes_t *n = impl;
    DCR_CHECK(run_nodes(n, a->tau, true));
    return join_nodes(n, n->env.nodes, apply_end_p);
}

static void nodes_discard(void *impl)
{
    local_nodes_t *n = impl;
    for (int i = 0; i < n->env.nodes; i++) dcr_rollout_node_discard(n->node[i]);
}

static dcr_status_t nodes_acknowledge(void *impl, const dcr__attempt_t *a)
{
    local_nodes_t *n = impl;
    const dcr_rollout_node_env_t *r = &n->env.receivers;
    for (size_t i = 0; i < a->nrequired; i++) {
        dcr_trace_span_t span =
            dcr_trace_begin(DCR_STAGE_ACK, DCR_ACTOR_RECEIVER, (int)a->required[i]);
        dcr_status_t st = dcr_control_ack(n->env.control, a->tau, a->required[i]);
        dcr_trace_end(&span);
        DCR_CHECK(st);
    }
    /* A receiver that died after its acknowledgment fails the attempt too:
     * every required receiver must still hold P^{v+1} when v+1 is published. */
    for (size_t i = 0; i < a->nrequired; i++)
        DCR_CHECK(r->alive(r->ctx, (int)a->required[i], DCR_COORD_POINT_ACKED, a->tau));
    return DCR_OK;
}

/* One transport in one process counts every crossing byte itself. */
static int64_t nodes_cross_bytes(void *impl, int64_t owner_uploads)
{
    local_nodes_t *n = impl;
    (void)owner_uploads;
    dcr_transport_counters_t tc;
    dcr_transport_counters(n->env.transport, &tc);
    return tc.cross_bytes;
}

static void nodes_drops(void *impl, uint64_t *duplicates_p, uint64_t *stale_p)
{
    local_nodes_t *n = impl;
    const dcr_rollout_node_env_t *r = &n->env.receivers;
    for (int i = 0; i < n->env.nreceivers; i++) {
        dcr_receiver_stats_t s;
        dcr_receiver_stats(r->receiver(r->ctx, i), &s);
        *duplicates_p += s.duplicates;
        *stale_p += s.stale + s.stale_dropped;
    }
}

const dcr__nodes_ops_t dcr__nodes_local = {
    .hdr = {.version = DCR__NODES_OPS_VERSION, .name = "local"},
    .create = nodes_create,
    .destroy = nodes_destroy,
    .absent = nodes_absent,
    .present = nodes_present,
    .begin = nodes_begin,
    .deliver = nodes_deliver,
    .check = nodes_check,
    .delivered = nodes_delivered,
    .apply_staged = nodes_apply_staged,
    .discard = nodes_discard,
    .acknowledge = nodes_acknowledge,
    .cross_bytes = nodes_cross_bytes,
    .drops = nodes_drops,
};

/* ---- owners: the coordinator's constructor ---------------------------------------- */

typedef struct local_owners {
    dcr__owners_env_t env;
    uint64_t *sent; /* payloads per owner in the current attempt */
    pthread_mutex_t why_lock;
    char sink_why[512]; /* the first send failure of the attempt */
} local_owners_t;

static void owners_destroy(void *impl)
{
    local_owners_t *o = impl;
    if (!o) return;
    pthread_mutex_destroy(&o->why_lock);
    free(o->sent);
    free(o);
}

static dcr_status_t owners_create(const dcr__owners_env_t *env, void **impl_p)
{
    if (!env->constructor)
        return dcr_error_set(DCR_EINVAL, "coordinator: no constructor for owners in this process");
    local_owners_t *o = calloc(1, sizeof(*o));
    if (o) o->sent = calloc((size_t)env->world, sizeof(uint64_t));
    if (!o || !o->sent) {
        free(o);
        return dcr_error_set(DCR_ENOMEM, "owners of %d", env->world);
    }
    o->env = *env;
    pthread_mutex_init(&o->why_lock, NULL);
    *impl_p = o;
    return DCR_OK;
}

/* The owners start constructing now: t0 of the transition's first attempt. */
static void owners_begin(void *impl, dcr_refit_result_t *res)
{
    local_owners_t *o = impl;
    memset(o->sent, 0, (size_t)o->env.world * sizeof(uint64_t));
    if (res->t0 == 0.0) res->t0 = dcr_clock_s();
}

static dcr_status_t sink_submit(void *ctx, int owner, uint64_t payload_id, const uint8_t *buf,
                                size_t len)
{
    local_owners_t *o = ctx;
    /* The transport bound: submission until the queueing acknowledgment. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, owner);
    dcr_status_t st = dcr_transport_send(o->env.transport, owner, payload_id, buf, len);
    dcr_trace_end(&span);
    if (st != DCR_OK) {
        /* Details are thread-local: keep the first sender's for the coordinator. */
        pthread_mutex_lock(&o->why_lock);
        if (!o->sink_why[0])
            snprintf(o->sink_why, sizeof(o->sink_why), "owner %d: %s", owner, dcr_error_detail());
        pthread_mutex_unlock(&o->why_lock);
        return st;
    }
    o->sent[owner]++; /* one sender thread per owner: no race */
    return DCR_OK;
}

typedef struct finish_arg {
    local_owners_t *o;
    int owner;
    bool started;
    dcr_status_t st;
    char why[512];
} finish_arg_t;

static void *finish_one(void *arg)
{
    finish_arg_t *f = arg;
    f->st = dcr_transport_finish(f->o->env.transport, f->owner, f->o->sent[f->owner]);
    if (f->st != DCR_OK) snprintf(f->why, sizeof(f->why), "%s", dcr_error_detail());
    return NULL;
}

/* Every owner finishes at once, as owner processes do: each finish crosses
 * its owner's link (a latency each), so one after another they would add
 * up. An owner whose thread does not start finishes on this one. */
static dcr_status_t finish_all(local_owners_t *o)
{
    int world = o->env.world;
    finish_arg_t *args = calloc((size_t)world, sizeof(*args));
    pthread_t *th = calloc((size_t)world, sizeof(*th));
    if (!args || !th) {
        free(args);
        free(th);
        return dcr_error_set(DCR_ENOMEM, "finishing %d owners", world);
    }
    for (int w = 0; w < world; w++) {
        args[w] = (finish_arg_t){.o = o, .owner = w, .started = false};
        args[w].started = pthread_create(&th[w], NULL, finish_one, &args[w]) == 0;
        if (!args[w].started) finish_one(&args[w]);
    }
    dcr_status_t st = DCR_OK;
    for (int w = 0; w < world; w++) {
        if (args[w].started) pthread_join(th[w], NULL);
        if (st == DCR_OK && args[w].st != DCR_OK) st = dcr_error_set(args[w].st, "%s", args[w].why);
    }
    free(args);
    free(th);
    return st;
}

static dcr_status_t owners_construct(void *impl, const dcr__attempt_t *a,
                                     dcr_storage_t *const *candidate, bool overwrite,
                                     dcr_refit_result_t *res)
{
    local_owners_t *o = impl;
    dcr_payload_sink_t sink = {sink_submit, o};
    o->sink_why[0] = '\0';
    dcr_status_t st = dcr_constructor_run(o->env.constructor, candidate, a->tau, o->env.xor_allowed,
                                          overwrite, &sink, &res->construct);
    res->construction_end = dcr_clock_s();
    if (st == DCR_OK) st = finish_all(o);
    /* A sender's own line says more than the constructor's. */
    if (st != DCR_OK && o->sink_why[0]) return dcr_error_set(st, "%s", o->sink_why);
    return st;
}

static dcr_status_t owners_commit(void *impl, const dcr_commit_record_t *committed,
                                  dcr_refit_result_t *res)
{
    local_owners_t *o = impl;
    (void)committed;
    DCR_CHECK(dcr_constructor_commit(o->env.constructor));
    res->t1 = dcr_clock_s();
    return DCR_OK;
}

/* This handle's payload bytes: beside node processes, its own rollout side
 * (the transport always has one) is nobody's, and what it prefetches
 * crosses nothing real, so uploads are counted on their own. */
static int64_t owners_uploads(void *impl)
{
    local_owners_t *o = impl;
    dcr_transport_counters_t tc;
    dcr_transport_counters(o->env.transport, &tc);
    return tc.payload_bytes;
}

const dcr__owners_ops_t dcr__owners_local = {
    .hdr = {.version = DCR__OWNERS_OPS_VERSION, .name = "local"},
    .create = owners_create,
    .destroy = owners_destroy,
    .begin = owners_begin,
    .construct = owners_construct,
    .commit = owners_commit,
    .uploads = owners_uploads,
};
