/* The coordinator of one transition at a time: attempts, the rollout nodes'
 * delivery and application (dcr/rollout_node.h, on threads of this process),
 * acknowledgments, joint commit, baseline update, overwrite retries. */
#include "dcr/coord.h"

#include <blake2.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/trace.h"

dcr_status_t dcr_rl_mode_parse(const char *text, dcr_rl_mode_t *out_p)
{
    if (!strcmp(text, "sync"))
        *out_p = DCR_RL_SYNC;
    else if (!strcmp(text, "async"))
        *out_p = DCR_RL_ASYNC;
    else
        return dcr_error_set(DCR_EINVAL, "RL mode '%s' is not sync or async", text);
    return DCR_OK;
}

const char *dcr_rl_mode_name(dcr_rl_mode_t mode)
{
    return mode == DCR_RL_SYNC ? "sync" : "async";
}

dcr_coord_config_t dcr_coord_config_default(const char *id, int receivers_per_node)
{
    dcr_coord_config_t cfg = {id,    DCR_RL_SYNC, receivers_per_node, 3, 600000, 120000, 20, false,
                              60000, false};
    return cfg;
}

struct dcr_coord {
    dcr_coord_config_t cfg; /* cfg.id points at id below */
    char id[DCR_CONTROL_ID_MAX];
    dcr_coord_parties_t p;
    int nodes;
    int64_t owner_uploads; /* remote owners: payload bytes their reports counted (V_payload sent) */
    dcr_commit_record_t record; /* K^v as last read or committed */
    dcr_gate_t *gate;           /* the receivers' request gates */
    bool own_gate;              /* made here because the parties brought none */
    uint32_t *required;         /* the live receivers when the attempt was prepared */
    size_t nrequired;
    uint64_t *sent;        /* payloads per owner in the current attempt */
    dcr_receiver_t **recv; /* slot i: receiver i (replaced by a restart); caller-owned */
    atomic_uchar *alive;   /* membership; cleared by node threads when a receiver dies */
    /* The membership changed since the control plane last recorded it. */
    atomic_bool membership_pending;
    uint64_t *taus; /* attempts of the current transition */
    pthread_mutex_t why_lock;
    char sink_why[512]; /* the first send failure of the attempt */
    int ntaus;
    int last_attempts;
    dcr_rollout_node_t **node; /* the rollout nodes' runtime, one per node */
    dcr_node_totals_t *totals; /* remote: each node process's counters over the run */
};

/* ---- rollout nodes -------------------------------------------------------------- */

/* The rollout nodes run as threads of this process (dcr/rollout_node.h);
 * their receivers, membership and gates are the coordinator's. */

/* Leaves receiver id out of the membership when the rollout side marked
 * it dead on its gate (dcr_gate_kill); true when it was a member until now.
 * The change reaches the control plane before the next attempt. */
static bool note_death(dcr_coord_t *c, int id)
{
    if (!dcr_gate_dead(c->gate, id) || !atomic_exchange(&c->alive[id], 0)) return false;
    atomic_store(&c->membership_pending, true);
    return true;
}

/* A receiver found dead at this point fails the attempt (the retry leaves
 * it out). Its gate stays closed until a restore. */
static dcr_status_t check_alive(dcr_coord_t *c, int id, dcr_coord_point_t point, uint64_t tau)
{
    if (!dcr_gate_dead(c->gate, id)) return DCR_OK;
    note_death(c, id);
    return dcr_error_set(DCR_EATTEMPT, "receiver %d died (%s) in attempt %llu", id,
                         dcr_coord_point_name(point), (unsigned long long)tau);
}

/* Deaths the nodes' checks did not meet (a receiver that died between
 * attempts, or after its last payload) leave the membership too. */
static void note_deaths(dcr_coord_t *c)
{
    for (int i = 0; i < c->p.nreceivers; i++) note_death(c, i);
}

static dcr_receiver_t *env_receiver(void *ctx, int id)
{
    return ((dcr_coord_t *)ctx)->recv[id];
}

static bool env_member(void *ctx, int id)
{
    return atomic_load(&((dcr_coord_t *)ctx)->alive[id]) != 0;
}

static dcr_status_t env_alive(void *ctx, int id, dcr_coord_point_t point, uint64_t tau)
{
    return check_alive(ctx, id, point, tau);
}

static void env_dirty(void *ctx, int id)
{
    dcr_gate_mark_dirty(((dcr_coord_t *)ctx)->gate, id);
}

static dcr_status_t make_nodes(dcr_coord_t *c)
{
    c->node = calloc((size_t)c->nodes, sizeof(*c->node));
    if (!c->node) return dcr_error_set(DCR_ENOMEM, "%d rollout nodes", c->nodes);
    dcr_rollout_node_env_t env = {.receiver = env_receiver,
                                  .member = env_member,
                                  .alive = env_alive,
                                  .dirty = env_dirty,
                                  .ctx = c};
    for (int i = 0; i < c->nodes; i++) {
        int per = c->cfg.receivers_per_node;
        dcr_rollout_node_config_t nc = {
            i, i * per, per, c->cfg.rl == DCR_RL_ASYNC, c->cfg.stall_timeout_ms, 0, 0};
        DCR_CHECK(dcr_rollout_node_create(&nc, &env, c->p.transport, &c->node[i]));
    }
    return DCR_OK;
}

/* Waits for the nodes' threads; the first failure, and the end of the last
 * loader application, in *apply_end. */
static dcr_status_t join_nodes(dcr_coord_t *c, int started, double *apply_end)
{
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < started; i++) {
        dcr_status_t s = dcr_rollout_node_join(c->node[i]);
        if (st == DCR_OK) st = s;
        double end = dcr_rollout_node_last_apply_end(c->node[i]);
        if (end > *apply_end) *apply_end = end;
    }
    return st;
}

/* One step (deliver, or apply what was staged) on every node's thread. */
static dcr_status_t run_nodes(dcr_coord_t *c, uint64_t tau, bool apply)
{
    for (int i = 0; i < c->nodes; i++) {
        dcr_status_t st = apply ? dcr_rollout_node_start_apply(c->node[i], tau)
                                : dcr_rollout_node_start_deliver(c->node[i], tau);
        if (st != DCR_OK) {
            char why[512];
            snprintf(why, sizeof(why), "%s", dcr_error_detail());
            double ignored = 0;
            join_nodes(c, i, &ignored);
            return dcr_error_set(st, "%s", why);
        }
    }
    return DCR_OK;
}

static void discard_staged(dcr_coord_t *c)
{
    for (int i = 0; c->node && i < c->nodes; i++) dcr_rollout_node_discard(c->node[i]);
}

/* ---- setup ------------------------------------------------------------------ */

static bool record_is_fresh(const dcr_commit_record_t *r)
{
    dcr_commit_record_t zero;
    memset(&zero, 0, sizeof(zero));
    return dcr_commit_record_equal(r, &zero);
}

/* K^{v+1} chains K^v, the attempt and the version, so a record names the
 * exact lineage of baselines it commits. */
static void next_baseline(const dcr_commit_record_t *prev, uint64_t tau,
                          uint8_t out[DCR_CONTROL_BASELINE_BYTES])
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

/* The parties' gates, or private ones; every slot is bound to its receiver. */
static dcr_status_t use_gate(dcr_coord_t *c, const dcr_coord_parties_t *parties)
{
    c->gate = parties->gate;
    if (!c->gate) {
        DCR_CHECK(dcr_gate_create(parties->nreceivers, &c->gate));
        c->own_gate = true;
    } else if (dcr_gate_slots(c->gate) != parties->nreceivers) {
        return dcr_error_set(DCR_EINVAL, "coordinator: a request gate of %d slots for %d receivers",
                             dcr_gate_slots(c->gate), parties->nreceivers);
    }
    for (int i = 0; i < parties->nreceivers; i++) {
        c->recv[i] = parties->receivers ? parties->receivers[i] : NULL;
        atomic_init(&c->alive[i], 1);
        dcr_gate_bind(c->gate, i, c->recv[i]);
    }
    return DCR_OK;
}

/* ---- membership, recorded in the control plane ------------------------------------ */

/* Writes the live receivers as the membership; on failure the change stays
 * pending and the next attempt writes it before its prepare. */
static dcr_status_t record_membership(dcr_coord_t *c)
{
    uint32_t *members = malloc((size_t)c->p.nreceivers * sizeof(uint32_t));
    if (!members) return dcr_error_set(DCR_ENOMEM, "membership of %d", c->p.nreceivers);
    size_t n = 0;
    for (int i = 0; i < c->p.nreceivers; i++)
        if (atomic_load(&c->alive[i])) members[n++] = (uint32_t)i;
    atomic_store(&c->membership_pending, true);
    dcr_status_t st = dcr_control_membership_put(c->p.control, c->cfg.id, members, n);
    if (st == DCR_OK) atomic_store(&c->membership_pending, false);
    free(members);
    return st;
}

/* Between attempts: a death seen during the attempt reaches the control
 * plane before anything else happens, so no later crash can lose it. */
static void flush_membership(dcr_coord_t *c)
{
    if (!atomic_load(&c->membership_pending)) return;
    dcr_status_t st = record_membership(c);
    if (st != DCR_OK)
        DCR_LOG_WARN("membership not recorded yet (the next attempt retries): %s",
                     dcr_error_line(st));
}

/* The membership the control plane holds (a predecessor's, after a
 * failover); a fresh control plane gets every receiver. Receivers out of it
 * serve nothing until restored. */
static dcr_status_t load_membership(dcr_coord_t *c)
{
    int n = c->p.nreceivers;
    uint32_t *members = malloc((size_t)n * sizeof(uint32_t));
    if (!members) return dcr_error_set(DCR_ENOMEM, "membership of %d", n);
    size_t count = 0;
    dcr_status_t st = dcr_control_membership_get(c->p.control, members, (size_t)n, &count);
    if (st == DCR_ENOTFOUND) {
        free(members);
        return record_membership(c);
    }
    if (st == DCR_OK && (count > (size_t)n || (count > 0 && members[count - 1] >= (uint32_t)n)))
        st = dcr_error_set(DCR_ECONTROL,
                           "the recorded membership names receivers beyond the %d of this "
                           "coordinator",
                           n);
    for (int i = 0; st == DCR_OK && i < n; i++) atomic_store(&c->alive[i], 0);
    for (size_t k = 0; st == DCR_OK && k < count; k++) atomic_store(&c->alive[members[k]], 1);
    for (int i = 0; st == DCR_OK && i < n; i++)
        if (!atomic_load(&c->alive[i])) dcr_gate_close(c->gate, i, 0);
    free(members);
    return st;
}

dcr_status_t dcr_coord_create(const dcr_coord_config_t *cfg, const dcr_coord_parties_t *parties,
                              dcr_coord_t **out_p)
{
    if (cfg->receivers_per_node < 1 || parties->nreceivers < 1 ||
        parties->nreceivers % cfg->receivers_per_node || cfg->max_attempts < 1 ||
        parties->world < 1)
        return dcr_error_set(
            DCR_EINVAL, "coordinator: %d receivers in nodes of %d, %d attempts, %d owners",
            parties->nreceivers, cfg->receivers_per_node, cfg->max_attempts, parties->world);
    if (cfg->remote_owners && !cfg->remote_nodes)
        return dcr_error_set(DCR_EINVAL, "coordinator: owners as processes need rollout nodes as "
                                         "processes (remote_nodes)");
    if (!cfg->remote_owners && !parties->constructor)
        return dcr_error_set(DCR_EINVAL, "coordinator: no constructor for owners in this process");
    if (cfg->remote_nodes && cfg->rl != DCR_RL_SYNC)
        return dcr_error_set(DCR_EINVAL,
                             "coordinator: rollout nodes as processes run sync RL only");
    dcr_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "coordinator");
    c->cfg = *cfg;
    snprintf(c->id, sizeof(c->id), "%s", cfg->id ? cfg->id : "");
    c->cfg.id = c->id;
    c->p = *parties;
    c->nodes = parties->nreceivers / cfg->receivers_per_node;
    c->required = malloc((size_t)parties->nreceivers * sizeof(uint32_t));
    c->sent = calloc((size_t)parties->world, sizeof(uint64_t));
    c->recv = calloc((size_t)parties->nreceivers, sizeof(*c->recv));
    c->alive = calloc((size_t)parties->nreceivers, sizeof(*c->alive));
    c->taus = calloc((size_t)cfg->max_attempts, sizeof(uint64_t));
    pthread_mutex_init(&c->why_lock, NULL);
    if (!c->required || !c->sent || !c->recv || !c->alive || !c->taus) {
        dcr_coord_destroy(c);
        return dcr_error_set(DCR_ENOMEM, "coordinator");
    }
    dcr_status_t st = use_gate(c, parties);
    if (st == DCR_OK && !cfg->remote_nodes) st = make_nodes(c);
    if (st == DCR_OK && cfg->remote_nodes &&
        !(c->totals = calloc((size_t)c->nodes, sizeof(*c->totals))))
        st = dcr_error_set(DCR_ENOMEM, "node totals");
    if (st == DCR_OK) st = bind_initial(c);
    if (st == DCR_OK) st = load_membership(c);
    if (st == DCR_OK) note_deaths(c); /* recorded by the first attempt */
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
    for (int i = 0; c->node && i < c->nodes; i++) dcr_rollout_node_destroy(c->node[i]);
    free(c->node);
    free(c->totals);
    if (c->own_gate) dcr_gate_destroy(c->gate);
    pthread_mutex_destroy(&c->why_lock);
    free(c->required);
    free(c->sent);
    free(c->recv);
    free((void *)c->alive);
    free(c->taus);
    free(c);
}

uint64_t dcr_coord_version(const dcr_coord_t *c)
{
    return c->record.version;
}

int dcr_coord_last_attempts(const dcr_coord_t *c)
{
    return c->last_attempts;
}

dcr_gate_t *dcr_coord_gate(const dcr_coord_t *c)
{
    return c->gate;
}

/* ---- one attempt -------------------------------------------------------------------- */

typedef struct attempt_sink {
    dcr_coord_t *c;
} attempt_sink_t;

static dcr_status_t sink_submit(void *ctx, int owner, uint64_t payload_id, const uint8_t *buf,
                                size_t len)
{
    dcr_coord_t *c = ctx;
    /* The transport bound: submission until the queueing acknowledgment. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, owner);
    dcr_status_t st = dcr_transport_send(c->p.transport, owner, payload_id, buf, len);
    dcr_trace_end(&span);
    if (st != DCR_OK) {
        /* Details are thread-local: keep the first sender's for the coordinator. */
        pthread_mutex_lock(&c->why_lock);
        if (!c->sink_why[0])
            snprintf(c->sink_why, sizeof(c->sink_why), "owner %d: %s", owner, dcr_error_detail());
        pthread_mutex_unlock(&c->why_lock);
        return st;
    }
    c->sent[owner]++; /* one sender thread per owner: no race */
    return DCR_OK;
}

static dcr_status_t flush_owners(dcr_coord_t *c)
{
    for (int o = 0; o < c->p.world; o++)
        DCR_CHECK(dcr_transport_finish(c->p.transport, o, c->sent[o]));
    return DCR_OK;
}

/* A node's report read to decide its membership: tries, and try t waits
 * t times the retry step first (60 ms in all, past a brief control-plane
 * outage; the transition's own retries, with their backoff, come after). */
#define REPORT_TRIES    4
#define REPORT_RETRY_NS 10000000L

static dcr_status_t node_not_started(dcr_coord_t *c, int node, bool *not_started_p);

/* The required receivers of the next attempt: the live ones, but for those
 * of a node process not started yet (an elastic join, dcr/coord.h). Each
 * node's report is read once, for all its receivers. */
static dcr_status_t collect_required(dcr_coord_t *c)
{
    c->nrequired = 0;
    int per = c->cfg.receivers_per_node;
    bool not_started = false;
    for (int i = 0; i < c->p.nreceivers; i++) {
        if (c->cfg.remote_nodes && i % per == 0)
            DCR_CHECK(node_not_started(c, i / per, &not_started));
        if (!atomic_load(&c->alive[i]) || not_started) continue;
        c->required[c->nrequired++] = (uint32_t)i;
    }
    return DCR_OK;
}

/* ---- rollout nodes as processes -------------------------------------------------- */

#define NODE_POLL_NS     500000L /* between reads of the nodes' reports */
#define NODE_CHECK_POLLS 20u     /* owners' report polls per look at the nodes (10 ms) */

static const char *phase_name(dcr_node_phase_t p)
{
    static const char *const names[] = {"ready", "joined", "done", "failed", "gone", "restarting"};
    return (unsigned)p <= DCR_NODE_RESTARTING ? names[p] : "?";
}

/* A node whose report (read with status st) says its process died or is
 * being replaced fails the attempt at once, naming it: nothing it held for
 * this attempt survives the process. */
static dcr_status_t node_present(int node, dcr_status_t st, const dcr_node_report_t *r)
{
    if (st == DCR_OK && (r->phase == DCR_NODE_GONE || r->phase == DCR_NODE_RESTARTING))
        return dcr_error_set(DCR_EATTEMPT, "rollout node %d is gone: %s", node, r->why);
    return DCR_OK;
}

/* Whether a node process was never started (its report: GONE with pid 0,
 * as a launcher writes for a node added later): not a member of attempts
 * prepared before it reports for itself. A node with no report at all is a
 * member (its process is expected; the attempt waits for it to join). A
 * read that fails (a busy or briefly unreachable control plane) is tried
 * again; when every try fails, no attempt is prepared: a node whose state
 * is unknown must neither become a member (a joiner not started would fail
 * the attempt) nor be left out (a started node would miss it). */
static dcr_status_t node_not_started(dcr_coord_t *c, int node, bool *not_started_p)
{
    dcr_status_t st = DCR_OK;
    for (int t = 0; t < REPORT_TRIES; t++) {
        if (t > 0) dcr_clock_nap_ns((long)t * REPORT_RETRY_NS);
        dcr_node_report_t r;
        st = dcr_node_report_get(c->p.control, node, &r);
        if (st == DCR_OK || st == DCR_ENOTFOUND) {
            *not_started_p = st == DCR_OK && r.phase == DCR_NODE_GONE && r.pid == 0;
            return DCR_OK;
        }
    }
    dcr_error_prefix("cannot read rollout node %d's report to decide whether the next attempt "
                     "includes it (%d tries): ",
                     node, REPORT_TRIES);
    return st;
}

/* node_present for every node of a required receiver (read errors are left
 * to the caller's own wait: a busy control plane is not a death). */
static dcr_status_t required_nodes_present(dcr_coord_t *c)
{
    int per = c->cfg.receivers_per_node;
    for (size_t i = 0; i < c->nrequired; i++) {
        int node = (int)c->required[i] / per;
        if (i > 0 && (int)c->required[i - 1] / per == node) continue; /* required ascends */
        dcr_node_report_t r;
        DCR_CHECK(node_present(node, dcr_node_report_get(c->p.control, node, &r), &r));
    }
    return DCR_OK;
}

/* Waits until every node of a required receiver reports `phase` (or, for
 * JOINED, a later one) for tau (DONE: *apply_end_p gets the last apply's end across them). A node
 * that reports FAILED fails the attempt with its line; one that stays behind longer than the join
 * (or stall) timeout fails it naming the node. */
static dcr_status_t wait_nodes(dcr_coord_t *c, uint64_t tau, dcr_node_phase_t phase,
                               double *apply_end_p)
{
    int per = c->cfg.receivers_per_node;
    int limit_ms = phase == DCR_NODE_JOINED ? c->cfg.join_timeout_ms : c->cfg.stall_timeout_ms;
    double t0 = dcr_clock_s();
    for (size_t i = 0; i < c->nrequired; i++) {
        int node = (int)c->required[i] / per;
        if (i > 0 && (int)c->required[i - 1] / per == node) continue; /* one report per node */
        for (;;) {
            dcr_node_report_t r;
            dcr_status_t st = dcr_node_report_get(c->p.control, node, &r);
            DCR_CHECK(node_present(node, st, &r));
            /* READY for tau or later after it joined: a new process (a
             * restart) that holds the committed version, not tau's writes. */
            if (st == DCR_OK && phase == DCR_NODE_DONE && r.phase == DCR_NODE_READY && r.tau >= tau)
                return dcr_error_set(DCR_EATTEMPT, "rollout node %d restarted during attempt %llu",
                                     node, (unsigned long long)tau);
            if (st == DCR_OK && r.tau == tau && r.phase == DCR_NODE_FAILED)
                return dcr_error_set(DCR_EATTEMPT, "rollout node %d failed attempt %llu: %s", node,
                                     (unsigned long long)tau, r.why);
            /* DONE for tau answers a wait for JOINED too: a node that joined
             * and finished while an earlier node was read has moved on. */
            if (st == DCR_OK && r.tau == tau &&
                (r.phase == phase || (phase == DCR_NODE_JOINED && r.phase == DCR_NODE_DONE))) {
                if (apply_end_p && r.apply_end > *apply_end_p) *apply_end_p = r.apply_end;
                break;
            }
            if (st != DCR_OK && st != DCR_ENOTFOUND && st != DCR_ECONTROL) return st;
            if ((dcr_clock_s() - t0) * 1000.0 > limit_ms)
                return dcr_error_set(
                    DCR_ETIMEOUT,
                    "rollout node %d did not report %s for attempt %llu within %d ms (last "
                    "report: %s)",
                    node, phase_name(phase), (unsigned long long)tau, limit_ms,
                    st == DCR_OK ? phase_name(r.phase) : "none");
            dcr_clock_nap_ns(NODE_POLL_NS);
        }
    }
    return DCR_OK;
}

/* Remote nodes: their downloads as their reports count them. Uploads are
 * this handle's payload bytes: its own rollout side (the transport always
 * has one) is nobody's, and what it prefetches crosses nothing real. */
static int64_t remote_cross_bytes(dcr_coord_t *c)
{
    int64_t sum = 0;
    for (int n = 0; c->totals && n < c->nodes; n++) {
        dcr_node_report_t r;
        if (dcr_node_report_get(c->p.control, n, &r) == DCR_OK)
            dcr_node_totals_update(&c->totals[n], &r);
        sum += c->totals[n].cross_base + c->totals[n].cross_last;
    }
    return sum;
}

/* Before an attempt: a node of a live receiver that is restarting is back
 * (its new process restored the committed version), so that membership
 * stays fixed during the attempt. A node gone for good fails the attempt
 * in wait_nodes at once. */
static dcr_status_t wait_present(dcr_coord_t *c)
{
    int per = c->cfg.receivers_per_node;
    double t0 = dcr_clock_s();
    for (int node = 0; node < c->nodes; node++) {
        bool needed = false;
        for (int k = 0; k < per; k++) needed |= atomic_load(&c->alive[node * per + k]) != 0;
        for (;;) {
            dcr_node_report_t r;
            dcr_status_t st = dcr_node_report_get(c->p.control, node, &r);
            if (!needed || (st == DCR_OK && r.phase != DCR_NODE_RESTARTING)) break;
            if ((dcr_clock_s() - t0) * 1000.0 > c->cfg.join_timeout_ms)
                return dcr_error_set(
                    DCR_EATTEMPT, "rollout node %d has no process (%s) after %d ms", node,
                    st == DCR_OK ? r.why : "it never reported", c->cfg.join_timeout_ms);
            dcr_clock_nap_ns(NODE_POLL_NS);
        }
    }
    return DCR_OK;
}

/* After the nodes' acknowledgments: each of them must still hold P^{v+1}
 * when v+1 is published; a node that died or restarted since fails the
 * attempt, as a receiver death after its acknowledgment does in one process. */
static dcr_status_t nodes_still_done(dcr_coord_t *c, uint64_t tau)
{
    int per = c->cfg.receivers_per_node;
    for (size_t i = 0; i < c->nrequired; i++) {
        int node = (int)c->required[i] / per;
        /* required is ascending: each node's report is read once. */
        if (i > 0 && (int)c->required[i - 1] / per == node) continue;
        dcr_node_report_t r;
        if (dcr_node_report_get(c->p.control, node, &r) != DCR_OK || r.tau != tau ||
            r.phase != DCR_NODE_DONE)
            return dcr_error_set(DCR_EATTEMPT,
                                 "rollout node %d is no longer done with attempt "
                                 "%llu before the commit",
                                 node, (unsigned long long)tau);
    }
    return DCR_OK;
}

/* ---- owners as processes ---------------------------------------------------------- */

/* Waits for the owners' report of `phase` for tau; FAILED for tau fails the
 * attempt with their line, silence beyond the stall timeout names what was
 * awaited. While they send, a required node that is gone or restarting
 * fails the attempt at once (a dead relay node would stall the owners until
 * the stall timeout); after the commit (COMMITTED) the nodes no longer
 * matter. */
static dcr_status_t wait_owners(dcr_coord_t *c, uint64_t tau, dcr_owners_phase_t phase,
                                dcr_owners_report_t *out_p)
{
    double t0 = dcr_clock_s();
    unsigned polls = 0;
    for (;;) {
        dcr_owners_report_t r;
        dcr_status_t st = dcr_owners_report_get(c->p.control, &r);
        /* A tau above this one: the owner job is gone (its launcher said so). */
        if (st == DCR_OK && r.tau >= tau && r.phase == DCR_OWNERS_FAILED)
            return dcr_error_set(DCR_EATTEMPT, "the owners failed attempt %llu: %s",
                                 (unsigned long long)tau, r.why);
        if (st == DCR_OK && r.tau == tau && r.phase == phase) {
            *out_p = r;
            return DCR_OK;
        }
        if (st != DCR_OK && st != DCR_ENOTFOUND && st != DCR_ECONTROL) return st;
        /* Every NODE_CHECK_POLLS polls: one read per node, not a flood. */
        if (phase == DCR_OWNERS_SENT && polls++ % NODE_CHECK_POLLS == 0)
            DCR_CHECK(required_nodes_present(c));
        if ((dcr_clock_s() - t0) * 1000.0 > c->cfg.stall_timeout_ms)
            return dcr_error_set(DCR_ETIMEOUT,
                                 "the owners did not report %s for attempt %llu within %d ms",
                                 phase == DCR_OWNERS_SENT ? "sent" : "committed",
                                 (unsigned long long)tau, c->cfg.stall_timeout_ms);
        dcr_clock_nap_ns(NODE_POLL_NS);
    }
}

/* The owners' side of an attempt when they are processes: their report
 * replaces the construction run. */
static dcr_status_t remote_construct(dcr_coord_t *c, uint64_t tau, dcr_refit_result_t *res)
{
    dcr_owners_report_t r;
    DCR_CHECK(wait_owners(c, tau, DCR_OWNERS_SENT, &r));
    c->owner_uploads += r.construct.payload_bytes; /* each payload is uploaded once */
    res->construct = r.construct;
    if (res->t0 == 0.0) res->t0 = r.t0;
    res->construction_end = r.construction_end;
    return DCR_OK;
}

static dcr_status_t begin_attempt(dcr_coord_t *c, uint64_t *tau_p)
{
    DCR_CHECK(collect_required(c));
    if (c->nrequired == 0) return dcr_error_set(DCR_EFATAL, "no live receiver is left to refit");
    if (c->cfg.remote_nodes) DCR_CHECK(wait_present(c));
    dcr_control_prepare_t req = {c->cfg.id, c->record.version, c->required, c->nrequired,
                                 c->cfg.deadline_ms};
    DCR_CHECK(dcr_control_prepare(c->p.control, &req, tau_p));
    if (c->ntaus < c->cfg.max_attempts) c->taus[c->ntaus++] = *tau_p;
    dcr_gate_announce(c->gate, *tau_p); /* gate operations of older attempts are void now */
    DCR_CHECK(dcr_transport_open_attempt(c->p.transport, *tau_p));
    memset(c->sent, 0, (size_t)c->p.world * sizeof(uint64_t));
    /* Node processes begin the attempt themselves; nothing may be sent
     * before each has opened it on its transport handle. */
    if (c->cfg.remote_nodes) {
        DCR_CHECK(dcr_coord_report_opened(c->p.control, *tau_p));
        return wait_nodes(c, *tau_p, DCR_NODE_JOINED, NULL);
    }
    for (size_t i = 0; i < c->nrequired; i++)
        DCR_CHECK(dcr_receiver_begin_attempt(c->recv[c->required[i]], *tau_p));
    return DCR_OK;
}

/* Stream: construction feeds the transport while every node receives and
 * applies (or stages). Returns once every node holds every payload. */
static dcr_status_t stream(dcr_coord_t *c, dcr_storage_t *const *candidate, uint64_t tau,
                           bool overwrite, dcr_refit_result_t *res)
{
    dcr_status_t st = c->cfg.remote_nodes ? DCR_OK : run_nodes(c, tau, false);
    if (st != DCR_OK) return st;
    dcr_payload_sink_t sink = {sink_submit, c};
    c->sink_why[0] = '\0';
    if (c->cfg.remote_owners) {
        st = remote_construct(c, tau, res);
    } else {
        st = dcr_constructor_run(c->p.constructor, candidate, tau, c->p.xor_allowed, overwrite,
                                 &sink, &res->construct);
        res->construction_end = dcr_clock_s();
        if (st == DCR_OK) st = flush_owners(c);
    }
    char why[600];
    snprintf(why, sizeof(why), "%s", c->sink_why[0] ? c->sink_why : dcr_error_detail());
    if (st != DCR_OK) dcr_transport_stop_and_wait(c->p.transport); /* wakes the nodes */
    dcr_status_t nodes_st = DCR_OK;
    if (!c->cfg.remote_nodes)
        nodes_st = join_nodes(c, c->nodes, &res->apply_end);
    else if (st == DCR_OK)
        nodes_st = wait_nodes(c, tau, DCR_NODE_DONE, &res->apply_end);
    res->delivery_end = dcr_clock_s();
    /* A receiver's death is the root cause of whatever the owners saw after it. */
    if (nodes_st == DCR_EATTEMPT || st == DCR_OK) return nodes_st;
    return dcr_error_set(st, "%s", why);
}

/* Closes the gates of the attempt's required receivers; each close waits
 * for the requests in flight on its receiver. */
static void close_gates(dcr_coord_t *c, uint64_t tau)
{
    for (size_t i = 0; i < c->nrequired; i++) dcr_gate_close(c->gate, (int)c->required[i], tau);
}

/* Async RL: gate closes after the last payload; in-flight requests finish;
 * then the staged delta is applied. */
static dcr_status_t apply_async(dcr_coord_t *c, uint64_t tau, dcr_refit_result_t *res)
{
    close_gates(c, tau);
    DCR_CHECK(run_nodes(c, tau, true));
    return join_nodes(c, c->nodes, &res->apply_end);
}

/* Remote nodes acknowledged their receivers before they reported DONE:
 * the control plane must hold every required receiver's acknowledgment. */
static dcr_status_t acks_recorded(dcr_coord_t *c, uint64_t tau)
{
    size_t cap = (size_t)c->p.nreceivers, n = 0;
    uint32_t *acked = malloc(cap * sizeof(uint32_t));
    if (!acked) return dcr_error_set(DCR_ENOMEM, "acknowledgments of %zu receivers", cap);
    dcr_status_t st = dcr_control_acks(c->p.control, tau, acked, cap, &n);
    size_t k = 0; /* both lists ascend */
    for (size_t i = 0; st == DCR_OK && i < c->nrequired; i++) {
        while (k < n && k < cap && acked[k] < c->required[i]) k++;
        if (k == n || k == cap || acked[k] != c->required[i])
            st = dcr_error_set(DCR_EATTEMPT,
                               "receiver %u's acknowledgment of attempt %llu is not in the "
                               "control plane",
                               c->required[i], (unsigned long long)tau);
    }
    free(acked);
    return st;
}

static dcr_status_t acknowledge(dcr_coord_t *c, uint64_t tau)
{
    /* Each node process acknowledged its receivers. */
    if (c->cfg.remote_nodes) {
        DCR_CHECK(acks_recorded(c, tau));
        return nodes_still_done(c, tau);
    }
    for (size_t i = 0; i < c->nrequired; i++) {
        dcr_trace_span_t span =
            dcr_trace_begin(DCR_STAGE_ACK, DCR_ACTOR_RECEIVER, (int)c->required[i]);
        dcr_status_t st = dcr_control_ack(c->p.control, tau, c->required[i]);
        dcr_trace_end(&span);
        DCR_CHECK(st);
    }
    /* A receiver that died after its acknowledgment fails the attempt too:
     * every required receiver must still hold P^{v+1} when v+1 is published. */
    for (size_t i = 0; i < c->nrequired; i++)
        DCR_CHECK(check_alive(c, (int)c->required[i], DCR_COORD_POINT_ACKED, tau));
    return DCR_OK;
}

/* Owner processes update their baselines when they see the commit record;
 * t1 is theirs. The commit stands whatever happens here: owners that never
 * report leave t1 at the coordinator's time, with a warning. */
static void owners_committed(dcr_coord_t *c, const dcr_commit_record_t *committed,
                             dcr_refit_result_t *res)
{
    dcr_owners_report_t r;
    res->version = committed->version;
    res->tau = committed->attempt;
    if (wait_owners(c, committed->attempt, DCR_OWNERS_COMMITTED, &r) == DCR_OK) {
        res->t1 = r.t1;
        return;
    }
    DCR_LOG_WARN("version %llu committed, but %s", (unsigned long long)committed->version,
                 dcr_error_detail());
    res->t1 = dcr_clock_s();
}

/* Owners update their baselines only after the joint commit. */
static dcr_status_t finish_commit(dcr_coord_t *c, const dcr_commit_record_t *committed,
                                  dcr_refit_result_t *res)
{
    res->commit_end = dcr_clock_s();
    c->record = *committed;
    if (c->cfg.remote_owners) {
        owners_committed(c, committed, res);
        return DCR_OK;
    }
    DCR_CHECK(dcr_constructor_commit(c->p.constructor));
    res->t1 = dcr_clock_s();
    res->version = committed->version;
    res->tau = committed->attempt;
    return DCR_OK;
}

/* True when the record commits one of this transition's attempts: a commit
 * whose reply was lost took effect. */
static bool committed_by_us(const dcr_coord_t *c, const dcr_commit_record_t *now)
{
    if (now->version != c->record.version + 1) return false;
    for (int i = 0; i < c->ntaus; i++)
        if (now->attempt == c->taus[i]) return true;
    return false;
}

static dcr_status_t commit(dcr_coord_t *c, uint64_t tau, dcr_refit_result_t *res)
{
    uint8_t next[DCR_CONTROL_BASELINE_BYTES];
    dcr_commit_record_t committed;
    next_baseline(&c->record, tau, next);
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_COMMIT, DCR_ACTOR_COORD, 0);
    dcr_status_t st =
        dcr_control_commit(c->p.control, c->cfg.id, tau, &c->record, next, &committed);
    dcr_trace_end(&span);
    if (st != DCR_OK) {
        /* An unanswered commit may still have taken effect: the record tells. */
        dcr_status_t failed = st;
        char why[512];
        snprintf(why, sizeof(why), "%s", dcr_error_line(st));
        dcr_commit_record_t now;
        if (dcr_control_read(c->p.control, &now) != DCR_OK || now.attempt != tau)
            return dcr_error_set(failed, "%s", why);
        committed = now;
    }
    return finish_commit(c, &committed, res);
}

static dcr_status_t attempt(dcr_coord_t *c, dcr_storage_t *const *candidate, bool overwrite,
                            dcr_refit_result_t *res)
{
    uint64_t tau = 0;
    note_deaths(c);
    if (atomic_load(&c->membership_pending)) DCR_CHECK(record_membership(c));
    DCR_CHECK(begin_attempt(c, &tau));
    if (c->cfg.rl == DCR_RL_SYNC) close_gates(c, tau);
    if (res->t0 == 0.0 && !c->cfg.remote_owners) res->t0 = dcr_clock_s();
    discard_staged(c); /* a failed attempt's staging */
    DCR_CHECK(stream(c, candidate, tau, overwrite, res));
    if (c->cfg.rl == DCR_RL_ASYNC) DCR_CHECK(apply_async(c, tau, res));
    DCR_CHECK(acknowledge(c, tau));
    return commit(c, tau, res);
}

static void receiver_drops(const dcr_coord_t *c, dcr_refit_result_t *res)
{
    if (c->cfg.remote_nodes) return; /* counted in the node processes */
    for (int i = 0; i < c->p.nreceivers; i++) {
        dcr_receiver_stats_t s;
        dcr_receiver_stats(c->recv[i], &s);
        res->duplicates += s.duplicates;
        res->stale += s.stale + s.stale_dropped;
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Whether a failed attempt may be retried: not when no receiver is left,
 * or when another coordinator has replaced this one. */
static bool retryable(dcr_status_t st)
{
    return st != DCR_EFATAL && st != DCR_ECONFLICT;
}

/* A prepare or commit refused with a conflict: either a commit of ours whose
 * reply was lost took effect (done), or another coordinator replaced us. */
static dcr_status_t settle_conflict(dcr_coord_t *c, dcr_refit_result_t *res)
{
    dcr_commit_record_t now;
    if (dcr_control_read(c->p.control, &now) == DCR_OK && committed_by_us(c, &now))
        return finish_commit(c, &now, res);
    return dcr_error_set(DCR_ECONFLICT, "coordinator %s was replaced by a newer one", c->cfg.id);
}

static int live_count(const dcr_coord_t *c)
{
    int n = 0;
    for (int i = 0; i < c->p.nreceivers; i++) n += atomic_load(&c->alive[i]) != 0;
    return n;
}

/* The tau gate operations at the end of this transition carry: its last
 * attempt's, or 0 (between attempts) when none was prepared. */
static uint64_t last_tau(const dcr_coord_t *c)
{
    return c->ntaus > 0 ? c->taus[c->ntaus - 1] : 0;
}

/* After a transition that stopped for good: a receiver that took payloads
 * (of this coordinator or of a crashed one) may hold a mixture of v and v+1
 * that no later transition (with another candidate) can repair, so it
 * leaves the membership, its gate closed, until a dense refit restores it.
 * Untouched receivers still hold P^v and serve again. */
static int drop_dirty(dcr_coord_t *c)
{
    int n = 0;
    for (int i = 0; i < c->p.nreceivers; i++) {
        if (!atomic_load(&c->alive[i])) continue;
        if (dcr_gate_open(c->gate, i, last_tau(c), false)) continue;
        if (dcr_gate_dirty(c->gate, i) && atomic_exchange(&c->alive[i], 0)) n++;
    }
    if (n > 0) atomic_store(&c->membership_pending, true);
    return n;
}

/* The joint commit vouches for every required receiver: all hold P^{v+1}. */
static void open_committed(dcr_coord_t *c, uint64_t tau)
{
    for (size_t i = 0; i < c->nrequired; i++)
        dcr_gate_open(c->gate, (int)c->required[i], tau, true);
}

/* Attempts until one commits; all_overwrite makes the first one an
 * overwrite attempt too (after a failover). */
static dcr_status_t transition(dcr_coord_t *c, dcr_storage_t *const *candidate, bool all_overwrite,
                               dcr_refit_result_t *res)
{
    dcr_trace_set_refit(
        (uint32_t)(c->record.version + 1)); /* intervals carry the version they build */
    dcr_transport_counters_t before, after;
    dcr_transport_counters(c->p.transport, &before);
    int64_t nodes_before = remote_cross_bytes(c), uploads_before = c->owner_uploads;
    dcr_status_t st = DCR_EATTEMPT;
    char first_error[512] = "";
    int live_before = live_count(c);
    c->ntaus = 0;
    c->last_attempts = 0;
    for (int a = 0; a < c->cfg.max_attempts; a++) {
        if (a > 0 && c->cfg.retry_backoff_ms > 0) sleep_ms(a * c->cfg.retry_backoff_ms);
        res->attempts = a + 1;
        /* A retry resends the complete changed set as absolute overwrites. */
        c->last_attempts = a + 1;
        st = attempt(c, candidate, all_overwrite || a > 0, res);
        if (st == DCR_ECONFLICT) st = settle_conflict(c, res);
        if (st == DCR_OK) break;
        if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", dcr_error_line(st));
        DCR_LOG_WARN("attempt %d of the transition to version %llu failed: %s", a + 1,
                     (unsigned long long)c->record.version + 1, dcr_error_line(st));
        dcr_transport_stop_and_wait(c->p.transport); /* cannot fail (dcr/transport.h) */
        /* A replaced coordinator changes nothing, membership included. */
        if (!retryable(st)) break;
        note_deaths(c);
        flush_membership(c);
    }
    /* A replaced coordinator does nothing more: what it closed stays closed
     * until its successor commits or restores (its gate operations are void
     * anyway). */
    if (st == DCR_OK) open_committed(c, res->tau);
    discard_staged(c);
    dcr_transport_counters(c->p.transport, &after);
    res->receivers_died = live_before - live_count(c);
    if (st != DCR_OK) {
        int dirty = 0;
        if (st != DCR_ECONFLICT) {
            note_deaths(c);
            dirty = drop_dirty(c);
            flush_membership(c);
        }
        return dcr_error_set(
            st == DCR_ECONFLICT ? DCR_ECONFLICT : DCR_EFATAL,
            "version %llu stays committed: %d attempt%s failed (first: %s); %d receiver%s with "
            "partial writes left out until restored; operator intervention needed",
            (unsigned long long)c->record.version, res->attempts, res->attempts == 1 ? "" : "s",
            first_error, dirty, dirty == 1 ? "" : "s");
    }
    res->latency_s = res->t1 - res->t0;
    dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, (uint64_t)(res->t0 * 1e9),
                     (uint64_t)(res->t1 * 1e9));
    res->finalization_s = res->apply_end > 0 ? res->t1 - res->apply_end : 0.0;
    res->payload_bytes = res->construct.payload_bytes;
    res->cross_bytes = after.cross_bytes - before.cross_bytes;
    if (c->cfg.remote_nodes)
        res->cross_bytes = (c->cfg.remote_owners ? c->owner_uploads - uploads_before
                                                 : after.payload_bytes - before.payload_bytes) +
                           remote_cross_bytes(c) - nodes_before;
    receiver_drops(c, res);
    return DCR_OK;
}

dcr_status_t dcr_coord_refit(dcr_coord_t *c, dcr_storage_t *const *candidate,
                             dcr_refit_result_t *out_p)
{
    dcr_refit_result_t res;
    memset(&res, 0, sizeof(res));
    DCR_CHECK(transition(c, candidate, false, &res));
    if (out_p) *out_p = res;
    return DCR_OK;
}

/* A new coordinator's first read: an unavailable control plane gets the
 * same backoff as a retried attempt before the failover gives up. */
static dcr_status_t read_record_patiently(dcr_coord_t *c)
{
    dcr_status_t st = DCR_ECONTROL;
    for (int a = 0; a < c->cfg.max_attempts && st == DCR_ECONTROL; a++) {
        if (a > 0) sleep_ms(a * c->cfg.retry_backoff_ms);
        st = dcr_control_read(c->p.control, &c->record);
    }
    return st;
}

dcr_status_t dcr_coord_resume(dcr_coord_t *c, dcr_storage_t *const *candidate,
                              uint64_t from_version, dcr_refit_result_t *out_p)
{
    dcr_refit_result_t res;
    memset(&res, 0, sizeof(res));
    DCR_CHECK(read_record_patiently(c));
    if (c->record.version == from_version + 1) {
        /* The crashed coordinator's commit took effect: only the owners'
         * baseline update of that commit is left, and the gates it left
         * closed reopen. Its attempt required every live member (a death
         * fails an attempt before its commit, and membership changes only
         * between attempts), so the commit vouches for each of them. */
        res.t0 = dcr_clock_s();
        if (c->cfg.remote_owners)
            owners_committed(c, &c->record, &res);
        else
            DCR_CHECK(dcr_constructor_commit(c->p.constructor));
        for (int i = 0; i < c->p.nreceivers; i++)
            if (atomic_load(&c->alive[i])) dcr_gate_open(c->gate, i, c->record.attempt, true);
        if (!c->cfg.remote_owners) res.t1 = dcr_clock_s();
        res.version = c->record.version;
        res.tau = c->record.attempt;
    } else if (c->record.version == from_version) {
        DCR_CHECK(transition(c, candidate, true, &res));
    } else {
        return dcr_error_set(
            DCR_ECONFLICT, "failover: the commit record holds version %llu, not %llu or %llu",
            (unsigned long long)c->record.version, (unsigned long long)from_version,
            (unsigned long long)from_version + 1);
    }
    if (out_p) *out_p = res;
    return DCR_OK;
}

/* ---- membership ------------------------------------------------------------------ */

bool dcr_coord_receiver_alive(const dcr_coord_t *c, int receiver)
{
    return receiver >= 0 && receiver < c->p.nreceivers && atomic_load(&c->alive[receiver]);
}

int dcr_coord_live_receivers(const dcr_coord_t *c)
{
    return live_count(c);
}

dcr_receiver_t *dcr_coord_receiver(const dcr_coord_t *c, int receiver)
{
    return receiver >= 0 && receiver < c->p.nreceivers ? c->recv[receiver] : NULL;
}

dcr_status_t dcr_coord_receiver_kill(dcr_coord_t *c, int receiver)
{
    if (receiver < 0 || receiver >= c->p.nreceivers)
        return dcr_error_set(DCR_EINVAL, "receiver %d out of range 0..%d", receiver,
                             c->p.nreceivers - 1);
    atomic_store(&c->alive[receiver], 0);
    dcr_status_t st = record_membership(c);
    if (st == DCR_ECONFLICT) {
        /* A replaced coordinator changes nothing, neither membership nor gates. */
        atomic_store(&c->alive[receiver], 1);
        atomic_store(&c->membership_pending, false);
        return st;
    }
    dcr_gate_close(c->gate, receiver, 0); /* dead, whether recorded yet or not */
    return st;
}

dcr_status_t dcr_coord_receiver_restart(dcr_coord_t *c, int receiver, dcr_coord_restore_fn restore,
                                        void *ctx)
{
    if (receiver < 0 || receiver >= c->p.nreceivers || !restore)
        return dcr_error_set(DCR_EINVAL, "restart of receiver %d (of %d) needs a restore function",
                             receiver, c->p.nreceivers);
    /* The committed version, as the control plane holds it, not as this
     * coordinator last saw it: a failover may have moved it. */
    DCR_CHECK(dcr_control_read(c->p.control, &c->record));
    dcr_receiver_t *r = NULL;
    dcr_status_t st = restore(ctx, receiver, c->record.version, &r);
    if (st != DCR_OK) {
        dcr_error_prefix("restoring receiver %d to version %llu: ", receiver,
                         (unsigned long long)c->record.version);
        return st;
    }
    /* The gate stayed closed since the death; the restored receiver serves
     * the committed version from now on. */
    dcr_gate_close(c->gate, receiver, 0);
    c->recv[receiver] = r;
    dcr_gate_bind(c->gate, receiver, r);
    /* It joins once the control plane has recorded it; until then it stays
     * out (the caller finds it in the slot either way). */
    atomic_store(&c->alive[receiver], 1);
    st = record_membership(c);
    if (st != DCR_OK) {
        atomic_store(&c->alive[receiver], 0);
        atomic_store(&c->membership_pending, false); /* the recorded membership is unchanged */
        return st;
    }
    dcr_gate_open(c->gate, receiver, 0, true);
    return DCR_OK;
}
