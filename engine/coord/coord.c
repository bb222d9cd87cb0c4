/* The coordinator of one transition at a time: attempts, membership,
 * request gates, joint commit and overwrite retries. Its parties (the
 * rollout nodes and the owners, in this process or as processes) are
 * reached through one interface (coord-parties.h), whichever they are. */
#include "dcr/coord.h"

#include <blake2.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/trace.h"

#include "coord-parties.h"

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
    dcr_coord_config_t cfg = {id,    DCR_RL_SYNC, receivers_per_node, 3, 600000, 120000, 20, NULL,
                              60000, NULL};
    return cfg;
}

struct dcr_coord {
    dcr_coord_config_t cfg; /* cfg.id points at id below */
    char id[DCR_CONTROL_ID_MAX];
    dcr_coord_parties_t p;
    int nodes;
    dcr__nodes_t rollout;       /* the rollout nodes' side */
    dcr__owners_t owners;       /* the owners' side */
    dcr_commit_record_t record; /* K^v as last read or committed */
    dcr_gate_t *gate;           /* the receivers' request gates */
    bool own_gate;              /* made here because the parties brought none */
    uint32_t *required;         /* the live receivers when the attempt was prepared */
    size_t nrequired;
    dcr_receiver_t **recv; /* slot i: receiver i (replaced by a restart); caller-owned */
    atomic_uchar *alive;   /* membership; cleared by node threads when a receiver dies */
    /* The membership changed since the control plane last recorded it. */
    atomic_bool membership_pending;
    uint64_t *taus; /* attempts of the current transition */
    int ntaus;
    int last_attempts;
};

/* ---- receivers ------------------------------------------------------------------ */

/* The receivers, their membership and gates are the coordinator's; the
 * rollout side reaches them through this environment. */

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

static dcr_status_t watch_nodes(void *ctx, const dcr__attempt_t *a)
{
    return dcr__nodes_check(&((dcr_coord_t *)ctx)->rollout, a);
}

/* Both sides of the parties, over this coordinator's receivers. */
static dcr_status_t open_parties(dcr_coord_t *c)
{
    dcr__nodes_env_t nenv = {&c->cfg,
                             c->nodes,
                             c->p.nreceivers,
                             c->p.transport,
                             c->p.control,
                             {.receiver = env_receiver,
                              .member = env_member,
                              .alive = env_alive,
                              .dirty = env_dirty,
                              .ctx = c}};
    dcr__owners_env_t oenv = {&c->cfg,      c->p.constructor, c->p.world,  c->p.transport,
                              c->p.control, c->p.xor_allowed, watch_nodes, c};
    return dcr__coord_parties_open(&nenv, &oenv, &c->rollout, &c->owners);
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
    dcr_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "coordinator");
    c->cfg = *cfg;
    snprintf(c->id, sizeof(c->id), "%s", cfg->id ? cfg->id : "");
    c->cfg.id = c->id;
    c->p = *parties;
    c->nodes = parties->nreceivers / cfg->receivers_per_node;
    c->required = malloc((size_t)parties->nreceivers * sizeof(uint32_t));
    c->recv = calloc((size_t)parties->nreceivers, sizeof(*c->recv));
    c->alive = calloc((size_t)parties->nreceivers, sizeof(*c->alive));
    c->taus = calloc((size_t)cfg->max_attempts, sizeof(uint64_t));
    if (!c->required || !c->recv || !c->alive || !c->taus) {
        dcr_coord_destroy(c);
        return dcr_error_set(DCR_ENOMEM, "coordinator");
    }
    dcr_status_t st = open_parties(c);
    if (st == DCR_OK) {
        /* The caller's names need not outlive this call: keep the tables'. */
        c->cfg.nodes = c->rollout.ops->hdr.name;
        c->cfg.owners = c->owners.ops->hdr.name;
    }
    if (st == DCR_OK) st = use_gate(c, parties);
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
    dcr__coord_parties_close(&c->rollout, &c->owners);
    if (c->own_gate) dcr_gate_destroy(c->gate);
    free(c->required);
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

/* The required receivers of the next attempt: the live ones, but for those
 * of a node process not started yet (an elastic join, dcr/coord.h). Each
 * node's report is read once, for all its receivers. */
static dcr_status_t collect_required(dcr_coord_t *c)
{
    c->nrequired = 0;
    int per = c->cfg.receivers_per_node;
    bool not_started = false;
    for (int i = 0; i < c->p.nreceivers; i++) {
        if (i % per == 0) DCR_CHECK(dcr__nodes_absent(&c->rollout, i / per, &not_started));
        if (!atomic_load(&c->alive[i]) || not_started) continue;
        c->required[c->nrequired++] = (uint32_t)i;
    }
    return DCR_OK;
}

/* The attempt tau as the parties see it. */
static dcr__attempt_t attempt_view(const dcr_coord_t *c, uint64_t tau)
{
    dcr__attempt_t a = {tau, c->required, c->nrequired};
    return a;
}

static dcr_status_t begin_attempt(dcr_coord_t *c, uint64_t *tau_p)
{
    DCR_CHECK(collect_required(c));
    if (c->nrequired == 0) return dcr_error_set(DCR_EFATAL, "no live receiver is left to refit");
    DCR_CHECK(dcr__nodes_present(&c->rollout));
    dcr_control_prepare_t req = {c->cfg.id, c->record.version, c->required, c->nrequired,
                                 c->cfg.deadline_ms};
    DCR_CHECK(dcr_control_prepare(c->p.control, &req, tau_p));
    if (c->ntaus < c->cfg.max_attempts) c->taus[c->ntaus++] = *tau_p;
    dcr_gate_announce(c->gate, *tau_p); /* gate operations of older attempts are void now */
    DCR_CHECK(dcr_transport_open_attempt(c->p.transport, *tau_p));
    /* Nothing may be sent before every node can receive. */
    dcr__attempt_t a = attempt_view(c, *tau_p);
    return dcr__nodes_begin(&c->rollout, &a);
}

/* Stream: construction feeds the transport while every node receives and
 * applies (or stages). Returns once every node holds every payload. */
static dcr_status_t stream(dcr_coord_t *c, dcr_storage_t *const *candidate, uint64_t tau,
                           bool overwrite, dcr_refit_result_t *res)
{
    dcr__attempt_t a = attempt_view(c, tau);
    DCR_CHECK(dcr__nodes_deliver(&c->rollout, &a));
    dcr_status_t st = dcr__owners_construct(&c->owners, &a, candidate, overwrite, res);
    char why[600];
    snprintf(why, sizeof(why), "%s", dcr_error_detail());
    if (st != DCR_OK) dcr_transport_stop_and_wait(c->p.transport); /* wakes the nodes */
    dcr_status_t nodes_st = dcr__nodes_delivered(&c->rollout, &a, st == DCR_OK, &res->apply_end);
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
    dcr__attempt_t a = attempt_view(c, tau);
    return dcr__nodes_apply_staged(&c->rollout, &a, &res->apply_end);
}

/* Owners update their baselines only after the joint commit. */
static dcr_status_t finish_commit(dcr_coord_t *c, const dcr_commit_record_t *committed,
                                  dcr_refit_result_t *res)
{
    res->commit_end = dcr_clock_s();
    c->record = *committed;
    DCR_CHECK(dcr__owners_commit(&c->owners, committed, res));
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
    dcr__owners_begin(&c->owners, res);
    dcr__nodes_discard(&c->rollout); /* a failed attempt's staging */
    DCR_CHECK(stream(c, candidate, tau, overwrite, res));
    if (c->cfg.rl == DCR_RL_ASYNC) DCR_CHECK(apply_async(c, tau, res));
    dcr__attempt_t a = attempt_view(c, tau);
    DCR_CHECK(dcr__nodes_acknowledge(&c->rollout, &a));
    return commit(c, tau, res);
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
    int64_t cross_before = dcr__nodes_cross_bytes(&c->rollout, dcr__owners_uploads(&c->owners));
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
    dcr__nodes_discard(&c->rollout);
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
    res->cross_bytes =
        dcr__nodes_cross_bytes(&c->rollout, dcr__owners_uploads(&c->owners)) - cross_before;
    dcr__nodes_drops(&c->rollout, &res->duplicates, &res->stale);
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
        DCR_CHECK(dcr__owners_commit(&c->owners, &c->record, &res));
        for (int i = 0; i < c->p.nreceivers; i++)
            if (atomic_load(&c->alive[i])) dcr_gate_open(c->gate, i, c->record.attempt, true);
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
