/* The coordinator of one transition at a time: attempts, delivery and
 * application threads per rollout node, acknowledgments, joint commit,
 * baseline update, overwrite retries. */
#include "dcr/coord.h"

#include <blake2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/trace.h"

#define RECV_POLL_MS 50

dcr_status_t dcr_rl_mode_parse(const char *text, dcr_rl_mode_t *out_p)
{
    if (!strcmp(text, "sync")) *out_p = DCR_RL_SYNC;
    else if (!strcmp(text, "async")) *out_p = DCR_RL_ASYNC;
    else return dcr_error_set(DCR_EINVAL, "RL mode '%s' is not sync or async", text);
    return DCR_OK;
}

const char *dcr_rl_mode_name(dcr_rl_mode_t mode)
{
    return mode == DCR_RL_SYNC ? "sync" : "async";
}

dcr_coord_config_t dcr_coord_config_default(const char *id, int receivers_per_node)
{
    dcr_coord_config_t cfg = {id, DCR_RL_SYNC, receivers_per_node, 3, 600000, 120000};
    return cfg;
}

struct dcr_coord {
    dcr_coord_config_t cfg; /* cfg.id points at id below */
    char id[DCR_CONTROL_ID_MAX];
    dcr_coord_parties_t p;
    int nodes;
    dcr_commit_record_t record; /* K^v as last read or committed */
    pthread_rwlock_t gate;
    uint32_t *required;
    uint64_t *sent;             /* payloads per owner in the current attempt */
};

/* ---- setup ------------------------------------------------------------------ */

static bool record_is_fresh(const dcr_commit_record_t *r)
{
    dcr_commit_record_t zero;
    memset(&zero, 0, sizeof(zero));
    return dcr_commit_record_equal(r, &zero);
}

/* K^{v+1} chains K^v, the attempt and the version, so a record names the
 * exact lineage of baselines it commits. */
static void next_baseline(const dcr_commit_record_t *prev, uint64_t tau, uint8_t out[DCR_CONTROL_BASELINE_BYTES])
{
    uint8_t in[DCR_CONTROL_BASELINE_BYTES + 16];
    uint64_t version = prev->version + 1;
    memcpy(in, prev->baseline, DCR_CONTROL_BASELINE_BYTES);
    memcpy(in + DCR_CONTROL_BASELINE_BYTES, &tau, 8);
    memcpy(in + DCR_CONTROL_BASELINE_BYTES + 8, &version, 8);
    blake2b(out, in, NULL, DCR_CONTROL_BASELINE_BYTES, sizeof(in), 0);
}

static dcr_status_t bind_initial(dcr_coord_t *c)
{
    DCR_CHECK(dcr_control_read(c->p.control, &c->record));
    if (!record_is_fresh(&c->record)) return DCR_OK;
    dcr_commit_record_t initial;
    memset(&initial, 0, sizeof(initial));
    const char seed[] = "dcr initial baseline";
    blake2b(initial.baseline, seed, NULL, DCR_CONTROL_BASELINE_BYTES, sizeof(seed), 0);
    initial.committed_ns = 1;
    DCR_CHECK(dcr_control_cas(c->p.control, &c->record, &initial));
    c->record = initial;
    return DCR_OK;
}

dcr_status_t dcr_coord_create(const dcr_coord_config_t *cfg, const dcr_coord_parties_t *parties,
                              dcr_coord_t **out_p)
{
    if (cfg->receivers_per_node < 1 || parties->nreceivers < 1 || parties->nreceivers % cfg->receivers_per_node ||
        cfg->max_attempts < 1 || parties->world < 1)
        return dcr_error_set(DCR_EINVAL, "coordinator: %d receivers in nodes of %d, %d attempts, %d owners",
                             parties->nreceivers, cfg->receivers_per_node, cfg->max_attempts, parties->world);
    dcr_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "coordinator");
    c->cfg = *cfg;
    snprintf(c->id, sizeof(c->id), "%s", cfg->id ? cfg->id : "");
    c->cfg.id = c->id;
    c->p = *parties;
    c->nodes = parties->nreceivers / cfg->receivers_per_node;
    c->required = malloc((size_t)parties->nreceivers * sizeof(uint32_t));
    c->sent = calloc((size_t)parties->world, sizeof(uint64_t));
    pthread_rwlock_init(&c->gate, NULL);
    if (!c->required || !c->sent) {
        dcr_coord_destroy(c);
        return dcr_error_set(DCR_ENOMEM, "coordinator");
    }
    for (int i = 0; i < parties->nreceivers; i++) c->required[i] = (uint32_t)i;
    dcr_status_t st = bind_initial(c);
    if (st != DCR_OK) {
        dcr_coord_destroy(c);
        return st;
    }
    *out_p = c;
    return DCR_OK;
}

void dcr_coord_destroy(dcr_coord_t *c)
{
    if (!c) return;
    pthread_rwlock_destroy(&c->gate);
    free(c->required);
    free(c->sent);
    free(c);
}

uint64_t dcr_coord_version(const dcr_coord_t *c)
{
    return c->record.version;
}

void dcr_coord_gate_enter(dcr_coord_t *c)
{
    pthread_rwlock_rdlock(&c->gate);
}

void dcr_coord_gate_leave(dcr_coord_t *c)
{
    pthread_rwlock_unlock(&c->gate);
}

/* ---- rollout nodes -------------------------------------------------------------- */

typedef struct staged_payload {
    uint8_t *data;
    size_t len;
} staged_payload_t;

typedef struct node_run {
    dcr_coord_t *c;
    int node;
    pthread_t thread;
    dcr_status_t status;
    double last_apply_end;
    /* Async RL: the compressed payloads held in host memory while requests
     * are still served at v (bounded only by the delta's size). */
    staged_payload_t *staged;
    size_t nstaged, cap_staged;
} node_run_t;

static void free_staged(node_run_t *n)
{
    for (size_t i = 0; i < n->nstaged; i++) free(n->staged[i].data);
    free(n->staged);
    n->staged = NULL;
    n->nstaged = n->cap_staged = 0;
}

static dcr_status_t stage_compressed(node_run_t *n, const dcr_delivery_t *d)
{
    if (n->nstaged == n->cap_staged) {
        size_t cap = n->cap_staged ? 2 * n->cap_staged : 64;
        staged_payload_t *p = realloc(n->staged, cap * sizeof(*p));
        if (!p) return dcr_error_set(DCR_ENOMEM, "staging %zu payloads on rollout node %d", cap, n->node);
        n->staged = p;
        n->cap_staged = cap;
    }
    uint8_t *copy = malloc(d->len ? d->len : 1);
    if (!copy) return dcr_error_set(DCR_ENOMEM, "staging a payload of %zu bytes", d->len);
    memcpy(copy, d->data, d->len);
    n->staged[n->nstaged++] = (staged_payload_t){copy, d->len};
    return DCR_OK;
}

static dcr_receiver_t *node_receiver(const node_run_t *n, int k)
{
    return n->c->p.receivers[n->node * n->c->cfg.receivers_per_node + k];
}

/* Hands one delivered payload to every receiver of the node: applied at once
 * in sync RL; in async RL the compressed bytes are staged once for the node. */
static dcr_status_t node_take(node_run_t *n, const dcr_delivery_t *d)
{
    if (n->c->cfg.rl == DCR_RL_ASYNC) {
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_STAGING, DCR_ACTOR_NODE, n->node);
        dcr_status_t st = stage_compressed(n, d);
        dcr_trace_end(&span);
        return st;
    }
    for (int k = 0; k < n->c->cfg.receivers_per_node; k++) {
        dcr_ingest_t disposition;
        dcr_receiver_t *r = node_receiver(n, k);
        int id = n->node * n->c->cfg.receivers_per_node + k;
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, id);
        dcr_status_t st = dcr_receiver_apply_payload(r, d->data, d->len, &disposition);
        dcr_trace_end(&span);
        n->last_apply_end = dcr_clock_s();
        DCR_CHECK(st);
    }
    return DCR_OK;
}

static dcr_status_t node_deliver(node_run_t *n)
{
    dcr_coord_t *c = n->c;
    double idle_since = dcr_clock_s();
    for (;;) {
        dcr_delivery_t d;
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_RECV, DCR_ACTOR_NODE, n->node);
        dcr_status_t st = dcr_transport_recv(c->p.transport, n->node, RECV_POLL_MS, &d);
        if (st == DCR_OK)
            dcr_trace_end(&span);
        else
            dcr_trace_cancel(&span); /* only receptions count, not idle polls */
        if (st == DCR_ECLOSED) return DCR_OK;
        if (st == DCR_EAGAIN) {
            if ((dcr_clock_s() - idle_since) * 1000.0 > c->cfg.stall_timeout_ms)
                return dcr_error_set(DCR_ETIMEOUT, "rollout node %d received nothing for %d ms", n->node,
                                     c->cfg.stall_timeout_ms);
            continue;
        }
        DCR_CHECK(st);
        st = node_take(n, &d);
        dcr_transport_release(c->p.transport, n->node, &d);
        if (st != DCR_OK) {
            dcr_error_prefix("rollout node %d: ", n->node);
            return st;
        }
        idle_since = dcr_clock_s();
    }
}

static void *node_main(void *arg)
{
    node_run_t *n = arg;
    n->status = node_deliver(n);
    return NULL;
}

/* Async RL: the node's staged delta applied by each of its receivers, after the gate closed. */
static void *node_apply_staged(void *arg)
{
    node_run_t *n = arg;
    for (size_t i = 0; i < n->nstaged && n->status == DCR_OK; i++) {
        dcr_delivery_t d = {n->staged[i].data, n->staged[i].len, NULL};
        for (int k = 0; k < n->c->cfg.receivers_per_node && n->status == DCR_OK; k++) {
            dcr_ingest_t disposition;
            dcr_trace_span_t span =
                dcr_trace_begin(DCR_STAGE_APPLY, DCR_ACTOR_RECEIVER, n->node * n->c->cfg.receivers_per_node + k);
            n->status = dcr_receiver_apply_payload(node_receiver(n, k), d.data, d.len, &disposition);
            dcr_trace_end(&span);
        }
        n->last_apply_end = dcr_clock_s();
    }
    free_staged(n);
    return NULL;
}

static dcr_status_t join_nodes(node_run_t *nodes, int count, int started, double *apply_end)
{
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < started; i++) pthread_join(nodes[i].thread, NULL);
    for (int i = 0; i < count; i++) {
        if (nodes[i].last_apply_end > *apply_end) *apply_end = nodes[i].last_apply_end;
        if (st == DCR_OK && nodes[i].status != DCR_OK) st = nodes[i].status;
    }
    return st;
}

static dcr_status_t run_nodes(dcr_coord_t *c, node_run_t *nodes, void *(*fn)(void *))
{
    for (int i = 0; i < c->nodes; i++) {
        nodes[i].c = c;
        nodes[i].node = i;
        if (pthread_create(&nodes[i].thread, NULL, fn, &nodes[i])) {
            double ignored = 0;
            join_nodes(nodes, i, i, &ignored);
            return dcr_error_set(DCR_ENOMEM, "starting rollout node threads");
        }
    }
    return DCR_OK;
}

/* ---- one attempt -------------------------------------------------------------------- */

typedef struct attempt_sink {
    dcr_coord_t *c;
} attempt_sink_t;

static dcr_status_t sink_submit(void *ctx, int owner, uint64_t payload_id, const uint8_t *buf, size_t len)
{
    dcr_coord_t *c = ctx;
    /* The transport bound: submission until the queueing acknowledgment. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, owner);
    dcr_status_t st = dcr_transport_send(c->p.transport, owner, payload_id, buf, len);
    dcr_trace_end(&span);
    DCR_CHECK(st);
    c->sent[owner]++; /* one sender thread per owner: no race */
    return DCR_OK;
}

static dcr_status_t flush_owners(dcr_coord_t *c)
{
    for (int o = 0; o < c->p.world; o++) DCR_CHECK(dcr_transport_finish(c->p.transport, o, c->sent[o]));
    return DCR_OK;
}

static dcr_status_t begin_attempt(dcr_coord_t *c, uint64_t *tau_p)
{
    dcr_control_prepare_t req = {c->cfg.id, c->record.version, c->required, (size_t)c->p.nreceivers,
                                 c->cfg.deadline_ms};
    DCR_CHECK(dcr_control_prepare(c->p.control, &req, tau_p));
    DCR_CHECK(dcr_transport_open_attempt(c->p.transport, *tau_p));
    for (int i = 0; i < c->p.nreceivers; i++) DCR_CHECK(dcr_receiver_begin_attempt(c->p.receivers[i], *tau_p));
    memset(c->sent, 0, (size_t)c->p.world * sizeof(uint64_t));
    return DCR_OK;
}

/* Stream: construction feeds the transport while every node receives and
 * applies (or stages). Returns once every node holds every payload. */
static dcr_status_t stream(dcr_coord_t *c, dcr_storage_t *const *candidate, uint64_t tau, bool overwrite,
                           node_run_t *nodes, dcr_refit_result_t *res)
{
    dcr_status_t st = run_nodes(c, nodes, node_main);
    if (st != DCR_OK) return st;
    dcr_payload_sink_t sink = {sink_submit, c};
    st = dcr_constructor_run(c->p.constructor, candidate, tau, c->p.xor_allowed, overwrite, &sink, &res->construct);
    res->construction_end = dcr_clock_s();
    if (st == DCR_OK) st = flush_owners(c);
    if (st != DCR_OK) dcr_transport_stop_and_wait(c->p.transport); /* wakes the nodes */
    dcr_status_t nodes_st = join_nodes(nodes, c->nodes, c->nodes, &res->apply_end);
    res->delivery_end = dcr_clock_s();
    return st != DCR_OK ? st : nodes_st;
}

/* Async RL: gate closes after the last payload; in-flight requests finish
 * (the write lock waits for them); then the staged delta is applied. */
static dcr_status_t apply_async(dcr_coord_t *c, node_run_t *nodes, bool *gate_closed, dcr_refit_result_t *res)
{
    if (!*gate_closed) {
        pthread_rwlock_wrlock(&c->gate);
        *gate_closed = true;
    }
    for (int i = 0; i < c->nodes; i++) nodes[i].status = DCR_OK; /* keep what each node staged */
    DCR_CHECK(run_nodes(c, nodes, node_apply_staged));
    return join_nodes(nodes, c->nodes, c->nodes, &res->apply_end);
}

static dcr_status_t acknowledge(dcr_coord_t *c, uint64_t tau)
{
    for (int i = 0; i < c->p.nreceivers; i++) {
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_ACK, DCR_ACTOR_RECEIVER, (int)c->required[i]);
        dcr_status_t st = dcr_control_ack(c->p.control, tau, c->required[i]);
        dcr_trace_end(&span);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

static dcr_status_t commit(dcr_coord_t *c, uint64_t tau, dcr_refit_result_t *res)
{
    uint8_t next[DCR_CONTROL_BASELINE_BYTES];
    dcr_commit_record_t committed;
    next_baseline(&c->record, tau, next);
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0);
    dcr_status_t st = dcr_control_commit(c->p.control, c->cfg.id, tau, &c->record, next, &committed);
    dcr_trace_end(&span);
    if (st != DCR_OK) {
        /* An unanswered commit may still have taken effect: the record tells. */
        dcr_commit_record_t now;
        if (dcr_control_read(c->p.control, &now) != DCR_OK || now.attempt != tau) return st;
        committed = now;
    }
    res->commit_end = dcr_clock_s();
    c->record = committed;
    /* Owners update their baselines only now, after the joint commit. */
    DCR_CHECK(dcr_constructor_commit(c->p.constructor));
    res->t1 = dcr_clock_s();
    res->version = committed.version;
    res->tau = tau;
    return DCR_OK;
}

static dcr_status_t attempt(dcr_coord_t *c, dcr_storage_t *const *candidate, bool overwrite, node_run_t *nodes,
                            bool *gate_closed, dcr_refit_result_t *res)
{
    uint64_t tau;
    DCR_CHECK(begin_attempt(c, &tau));
    if (c->cfg.rl == DCR_RL_SYNC && !*gate_closed) {
        pthread_rwlock_wrlock(&c->gate);
        *gate_closed = true;
    }
    if (res->t0 == 0.0) res->t0 = dcr_clock_s();
    for (int i = 0; i < c->nodes; i++) free_staged(&nodes[i]); /* a failed attempt's staging */
    memset(nodes, 0, (size_t)c->nodes * sizeof(*nodes));
    DCR_CHECK(stream(c, candidate, tau, overwrite, nodes, res));
    if (c->cfg.rl == DCR_RL_ASYNC) DCR_CHECK(apply_async(c, nodes, gate_closed, res));
    DCR_CHECK(acknowledge(c, tau));
    return commit(c, tau, res);
}

static void receiver_drops(const dcr_coord_t *c, dcr_refit_result_t *res)
{
    for (int i = 0; i < c->p.nreceivers; i++) {
        dcr_receiver_stats_t s;
        dcr_receiver_stats(c->p.receivers[i], &s);
        res->duplicates += s.duplicates;
        res->stale += s.stale + s.stale_dropped;
    }
}

dcr_status_t dcr_coord_refit(dcr_coord_t *c, dcr_storage_t *const *candidate, dcr_refit_result_t *out_p)
{
    dcr_refit_result_t res;
    memset(&res, 0, sizeof(res));
    dcr_trace_set_refit((uint32_t)(c->record.version + 1)); /* intervals carry the version they build */
    node_run_t *nodes = calloc((size_t)c->nodes, sizeof(*nodes));
    if (!nodes) return dcr_error_set(DCR_ENOMEM, "rollout node state");
    dcr_transport_counters_t before, after;
    dcr_transport_counters(c->p.transport, &before);
    bool gate_closed = false;
    dcr_status_t st = DCR_EATTEMPT;
    char first_error[512] = "";
    for (int a = 0; a < c->cfg.max_attempts; a++) {
        res.attempts = a + 1;
        /* A retry resends the complete changed set as absolute overwrites. */
        st = attempt(c, candidate, a > 0, nodes, &gate_closed, &res);
        if (st == DCR_OK) break;
        if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", dcr_error_line(st));
        DCR_LOG_WARN("attempt %d of the transition to version %llu failed: %s", a + 1,
                     (unsigned long long)c->record.version + 1, dcr_error_line(st));
        dcr_transport_stop_and_wait(c->p.transport);
    }
    if (gate_closed) pthread_rwlock_unlock(&c->gate);
    for (int i = 0; i < c->nodes; i++) free_staged(&nodes[i]);
    free(nodes);
    dcr_transport_counters(c->p.transport, &after);
    if (st != DCR_OK)
        return dcr_error_set(DCR_EFATAL, "version %llu stays committed: %d attempts failed (first: %s)",
                             (unsigned long long)c->record.version, res.attempts, first_error);
    res.latency_s = res.t1 - res.t0;
    dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, (uint64_t)(res.t0 * 1e9), (uint64_t)(res.t1 * 1e9));
    res.finalization_s = res.apply_end > 0 ? res.t1 - res.apply_end : 0.0;
    res.payload_bytes = res.construct.payload_bytes;
    res.cross_bytes = after.cross_bytes - before.cross_bytes;
    receiver_drops(c, &res);
    if (out_p) *out_p = res;
    return DCR_OK;
}
