/* A rollout node's runtime: delivery, staging and application of one
 * attempt's payloads by the node's receivers. */
#include "dcr/rollout_node.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/thread.h"
#include "dcr/trace.h"
#include "receiver-internal.h"

#define DEFAULT_POLL_MS 50

const char *dcr_coord_point_name(dcr_coord_point_t point)
{
    static const char *const names[] = {"delivery", "apply", "acked"};
    return point >= 0 && point <= DCR_COORD_POINT_ACKED ? names[point] : "?";
}

typedef struct staged_payload {
    uint8_t *data;
    size_t len;
} staged_payload_t;

struct dcr_rollout_node {
    dcr_rollout_node_config_t cfg;
    dcr_rollout_node_env_t env;
    dcr_transport_t *transport;
    double last_apply_end;
    /* Async RL: the compressed payloads held in host memory while requests
     * are still served at v (bounded only by the delta's size). */
    staged_payload_t *staged;
    size_t nstaged, cap_staged;
    /* The thread of start_deliver / start_apply. */
    dcr_thread_t thread; /* carries the step's status and detail to the join */
    bool running;
    atomic_bool finished;
    /* The step's end, for a waiter that sleeps until it (rollout_node_wait)
     * rather than looking at `finished` at a fixed rate. */
    pthread_mutex_t end_mu;
    pthread_cond_t end_cv;
    bool apply_step; /* the thread runs apply_staged, not deliver */
    uint64_t tau;
};

dcr_status_t dcr_rollout_node_create(const dcr_rollout_node_config_t *cfg,
                                     const dcr_rollout_node_env_t *env, dcr_transport_t *transport,
                                     dcr_rollout_node_t **out_p)
{
    if (cfg == NULL || env == NULL || transport == NULL || out_p == NULL || env->receiver == NULL ||
        env->member == NULL || cfg->receivers < 1 || cfg->node < 0 || cfg->first_receiver < 0 ||
        cfg->transport_base < 0 || cfg->transport_base > cfg->node)
        return dcr_error_set(DCR_EINVAL, "rollout node: a transport, an environment with receiver "
                                         "and member, and >= 1 receiver are required");
    dcr_rollout_node_t *n = calloc(1, sizeof(*n));
    if (n == NULL) return dcr_error_set(DCR_ENOMEM, "rollout node %d", cfg->node);
    n->cfg = *cfg;
    if (n->cfg.poll_ms <= 0) n->cfg.poll_ms = DEFAULT_POLL_MS;
    n->env = *env;
    n->transport = transport;
    pthread_mutex_init(&n->end_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->end_cv, &ca);
    pthread_condattr_destroy(&ca);
    *out_p = n;
    return DCR_OK;
}

void dcr_rollout_node_discard(dcr_rollout_node_t *n)
{
    for (size_t i = 0; i < n->nstaged; i++) free(n->staged[i].data);
    free(n->staged);
    n->staged = NULL;
    n->nstaged = n->cap_staged = 0;
}

void dcr_rollout_node_destroy(dcr_rollout_node_t *n)
{
    if (n == NULL) return;
    if (n->running) dcr_rollout_node_join(n);
    dcr_rollout_node_discard(n);
    pthread_cond_destroy(&n->end_cv);
    pthread_mutex_destroy(&n->end_mu);
    free(n);
}

double dcr_rollout_node_last_apply_end(const dcr_rollout_node_t *n)
{
    return n->last_apply_end;
}

static dcr_status_t stage_compressed(dcr_rollout_node_t *n, const dcr_delivery_t *d)
{
    if (n->nstaged == n->cap_staged) {
        size_t cap = n->cap_staged ? 2 * n->cap_staged : 64;
        staged_payload_t *p = realloc(n->staged, cap * sizeof(*p));
        if (!p)
            return dcr_error_set(DCR_ENOMEM, "staging %zu payloads on rollout node %d", cap,
                                 n->cfg.node);
        n->staged = p;
        n->cap_staged = cap;
    }
    uint8_t *copy = malloc(d->len ? d->len : 1);
    if (!copy) return dcr_error_set(DCR_ENOMEM, "staging a payload of %zu bytes", d->len);
    memcpy(copy, d->data, d->len);
    n->staged[n->nstaged++] = (staged_payload_t){copy, d->len};
    return DCR_OK;
}

static bool member(const dcr_rollout_node_t *n, int id)
{
    return n->env.member(n->env.ctx, id);
}

static dcr_status_t alive(const dcr_rollout_node_t *n, int id, dcr_coord_point_t point,
                          uint64_t tau)
{
    return n->env.alive ? n->env.alive(n->env.ctx, id, point, tau) : DCR_OK;
}

/* One payload applied by member receiver id. */
static dcr_status_t apply_one(dcr_rollout_node_t *n, int id, const uint8_t *data, size_t len,
                              uint64_t tau)
{
    dcr_ingest_t disposition;
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, id);
    if (n->env.dirty) n->env.dirty(n->env.ctx, id);
    dcr_status_t st =
        dcr_receiver_apply_payload(n->env.receiver(n->env.ctx, id), data, len, &disposition);
    dcr_trace_end(&span);
    n->last_apply_end = dcr_clock_s();
    DCR_CHECK(st);
    return alive(n, id, DCR_COORD_POINT_APPLY, tau);
}

/* Hands one delivered payload to every receiver of the node: applied at once
 * in sync RL; in async RL the compressed bytes are staged once for the node. */
static dcr_status_t take(dcr_rollout_node_t *n, const dcr_delivery_t *d, uint64_t tau)
{
    int first = n->cfg.first_receiver, end = first + n->cfg.receivers;
    for (int id = first; id < end; id++)
        if (member(n, id)) DCR_CHECK(alive(n, id, DCR_COORD_POINT_DELIVERY, tau));
    if (n->cfg.stage) {
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_STAGING, DCR_ACTOR_NODE, n->cfg.node);
        dcr_status_t st = stage_compressed(n, d);
        dcr_trace_end(&span);
        return st;
    }
    for (int id = first; id < end; id++)
        if (member(n, id)) DCR_CHECK(apply_one(n, id, d->data, d->len, tau));
    return DCR_OK;
}

static dcr_status_t failed_with(dcr_status_t st, const char *why)
{
    return dcr_error_set(st, "%s", why);
}

dcr_status_t dcr_rollout_node_deliver(dcr_rollout_node_t *n, uint64_t tau)
{
    dcr_rollout_node_discard(n); /* a failed attempt's staging */
    n->last_apply_end = 0;
    double idle_since = dcr_clock_s();
    dcr_status_t failed = DCR_OK;
    char why[512] = "";
    for (;;) {
        dcr_delivery_t d;
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_RECV, DCR_ACTOR_NODE, n->cfg.node);
        dcr_status_t st = dcr_transport_recv(n->transport, n->cfg.node - n->cfg.transport_base,
                                             n->cfg.poll_ms, &d);
        if (st == DCR_OK)
            dcr_trace_end(&span);
        else
            dcr_trace_cancel(&span); /* only receptions count, not idle polls */
        if (st == DCR_ECLOSED) return failed != DCR_OK ? failed_with(failed, why) : DCR_OK;
        if (st == DCR_ETIMEOUT) {
            if ((dcr_clock_s() - idle_since) * 1000.0 > n->cfg.stall_timeout_ms)
                return dcr_error_set(DCR_ETIMEOUT, "rollout node %d received nothing for %d ms",
                                     n->cfg.node, n->cfg.stall_timeout_ms);
            continue;
        }
        if (st != DCR_OK) return failed != DCR_OK ? failed_with(failed, why) : st;
        if (failed == DCR_OK) {
            st = take(n, &d, tau);
            if (st != DCR_OK) {
                dcr_error_prefix("rollout node %d: ", n->cfg.node);
                failed = st;
                snprintf(why, sizeof(why), "%s", dcr_error_detail());
            }
        }
        dcr_transport_release(n->transport, n->cfg.node - n->cfg.transport_base, &d);
        idle_since = dcr_clock_s();
    }
}

dcr_status_t dcr_rollout_node_apply_staged(dcr_rollout_node_t *n, uint64_t tau)
{
    dcr_status_t st = DCR_OK;
    int first = n->cfg.first_receiver, end = first + n->cfg.receivers;
    for (size_t i = 0; i < n->nstaged && st == DCR_OK; i++)
        for (int id = first; id < end && st == DCR_OK; id++)
            if (member(n, id)) st = apply_one(n, id, n->staged[i].data, n->staged[i].len, tau);
    dcr_rollout_node_discard(n); /* frees only: the error detail stays */
    return st;
}

/* ---- on a thread of its own ---- */

static dcr_status_t node_thread(void *arg)
{
    dcr_rollout_node_t *n = arg;
    dcr_status_t st = n->apply_step ? dcr_rollout_node_apply_staged(n, n->tau)
                                    : dcr_rollout_node_deliver(n, n->tau);
    /* Under the lock: a waiter that found it unset is inside its wait. */
    pthread_mutex_lock(&n->end_mu);
    atomic_store(&n->finished, true);
    pthread_cond_broadcast(&n->end_cv);
    pthread_mutex_unlock(&n->end_mu);
    return st;
}

static dcr_status_t start(dcr_rollout_node_t *n, uint64_t tau, bool apply_step)
{
    if (n->running)
        return dcr_error_set(DCR_EINVAL, "rollout node %d: a step is still running", n->cfg.node);
    n->tau = tau;
    n->apply_step = apply_step;
    atomic_store(&n->finished, false);
    if (dcr_thread_run(&n->thread, DCR_THREAD_NODE, node_thread, n, "dcr-node-%d", n->cfg.node))
        return dcr_error_set(DCR_ENOMEM, "starting the thread of rollout node %d", n->cfg.node);
    n->running = true;
    return DCR_OK;
}

dcr_status_t dcr_rollout_node_start_deliver(dcr_rollout_node_t *n, uint64_t tau)
{
    return start(n, tau, false);
}

dcr_status_t dcr_rollout_node_start_apply(dcr_rollout_node_t *n, uint64_t tau)
{
    return start(n, tau, true);
}

dcr_status_t dcr_rollout_node_join(dcr_rollout_node_t *n)
{
    if (!n->running) return DCR_OK;
    n->running = false;
    return dcr_thread_join(&n->thread);
}

bool dcr_rollout_node_finished(dcr_rollout_node_t *n)
{
    return !n->running || atomic_load(&n->finished);
}

bool dcr_rollout_node_wait(dcr_rollout_node_t *n, int timeout_ms)
{
    if (dcr_rollout_node_finished(n)) return true;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long ms = timeout_ms > 0 ? timeout_ms : 0;
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&n->end_mu);
    int rc = 0;
    while (!atomic_load(&n->finished) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&n->end_cv, &n->end_mu, &until);
    pthread_mutex_unlock(&n->end_mu);
    return atomic_load(&n->finished);
}
