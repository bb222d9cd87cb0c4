/* Multi-step refit runs under injected faults, with the checks after every
 * step: live receivers against a dense refit of the committed version, the
 * commit record against the owners' version, the owners' baselines against
 * the committed weights. */
#define _XOPEN_SOURCE 700
#include "faults/faults_run.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "workloads/harness/interrupt.h"
#include "workloads/harness/readers.h"
#include "workloads/change/budget.h"
#include "workloads/harness/workdir.h"

dcr_faults_run_config_t dcr_faults_run_config_default(void)
{
    dcr_faults_run_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.bench = dcr_bench_config_default();
    cfg.bench.run.scenario.scale = 64;
    cfg.bench.run.scenario.layers = 2;
    cfg.bench.run.link =
        (dcr_link_config_t){0, 0, 0, 0}; /* faults, not link pacing, are under test */
    cfg.bench.run.adamw = true;
    cfg.steps = 50;
    cfg.kill_every = 5;
    cfg.restart_after = 5;
    cfg.max_attempts = 4;
    cfg.deadline_ms = 600000;
    cfg.readers = 1;
    return cfg;
}

dcr_faults_campaign_config_t dcr_faults_campaign_config_default(void)
{
    dcr_faults_campaign_config_t c;
    c.run = dcr_faults_run_config_default();
    c.run.steps = 4;
    c.run.kill_every = 2;
    c.run.restart_after = 1;
    c.run.faults_per_step = 2;
    c.seeds = 20;
    c.base_seed = 1;
    return c;
}

typedef struct frun {
    const dcr_faults_run_config_t *cfg;
    dcr_serve_config_t serve;
    dcr_scenario_t *sc;
    size_t nc, ns;
    dcr_storage_t **canonical, **committed, **candidate;
    dcr_receiver_t **recv; /* the current receiver of every slot; owned here */
    int nrecv;
    int *restart_at; /* step at which a dead receiver restarts; -1: alive */
    uint8_t *xor_allowed;
    dcr_constructor_t *con;
    dcr_transport_t *transport;
    dcr_control_t *control;
    dcr_coord_t *coord;
    dcr_faults_t *faults;
    dcr_adamw_t *adamw;
    dcr_workdir_t wd; /* workloads/harness/workdir.h */
    const char *workdir;
    char objdir[4200];
    int incarnation;  /* coordinators started so far */
    uint64_t version; /* the version the owners' baselines hold */
    dcr_gate_t *gate; /* the receivers' request gates: they outlive coordinators */
    dcr_readers_t *readers;
    /* What a request may read, per TP rank: digests of dense refits of the
     * committed version (cur) and of the candidate (next); gen changes with
     * them, and a read that spans a change is not judged. */
    pthread_mutex_t expect_lock;
    uint8_t (*cur)[DCR_READ_DIGEST_BYTES], (*next)[DCR_READ_DIGEST_BYTES];
    uint64_t gen;
    int64_t gate_reads, gate_violations; /* under expect_lock */
    int commit_checks, commit_violations;
    bool gate_broken; /* break_gate did its damage */
} frun_t;

/* ---- setup ------------------------------------------------------------------ */

static dcr_status_t make_workdir(frun_t *r)
{
    /* A temporary folder under TMPDIR (swept of dead runs' ones), or the
     * folder the caller named when it is dcr's (workloads/harness/workdir.h). */
    DCR_CHECK(dcr_workdir_open("--workdir", r->cfg->bench.run.workdir, "dcr-faults", &r->wd));
    r->workdir = r->wd.path;
    return DCR_OK;
}

/* A receiver holding L_r(W^committed): a fresh one, dense-loaded and prewarmed. */
static dcr_status_t dense_receiver(frun_t *r, int i, dcr_receiver_t **out_p)
{
    dcr_receiver_t *x = NULL;
    DCR_CHECK(dcr_serve_receiver_create(&r->sc->model, r->sc->inventory, &r->serve, i, NULL, &x));
    dcr_status_t st = dcr_receiver_load_dense_all(x, r->canonical);
    if (st == DCR_OK) st = dcr_receiver_prewarm(x);
    if (st != DCR_OK) {
        dcr_receiver_destroy(x);
        return st;
    }
    *out_p = x;
    return DCR_OK;
}

static dcr_status_t export_committed(frun_t *r)
{
    return dcr_megatron_export(&r->sc->model, &r->sc->train, r->sc->layout, r->committed,
                               r->canonical);
}

static dcr_status_t make_receivers(frun_t *r)
{
    r->nrecv = dcr_serve_receivers(&r->serve);
    r->recv = calloc((size_t)r->nrecv, sizeof(*r->recv));
    r->restart_at = malloc((size_t)r->nrecv * sizeof(int));
    r->xor_allowed = calloc(r->nc + 1, 1);
    if (!r->recv || !r->restart_at || !r->xor_allowed)
        return dcr_error_set(DCR_ENOMEM, "%d receivers", r->nrecv);
    for (int i = 0; i < r->nrecv; i++) {
        r->restart_at[i] = -1;
        DCR_CHECK(dense_receiver(r, i, &r->recv[i]));
    }
    for (size_t c = 0; c < r->nc; c++)
        r->xor_allowed[c] =
            r->cfg->bench.run.mode == DCR_MODE_X && dcr_serve_xor_allowed(r->recv, r->nrecv, c);
    return DCR_OK;
}

/* ---- what requests may see ------------------------------------------------------- */

/* Per TP rank, the digest of a dense refit of `shards`: the oracle of what
 * every receiver of that rank holds at that version. */
static dcr_status_t dense_digests(frun_t *r, dcr_storage_t **shards,
                                  uint8_t (*out)[DCR_READ_DIGEST_BYTES])
{
    DCR_CHECK(
        dcr_megatron_export(&r->sc->model, &r->sc->train, r->sc->layout, shards, r->canonical));
    for (int rank = 0; rank < r->serve.tp; rank++) {
        dcr_receiver_t *dense = NULL;
        DCR_CHECK(dcr_serve_receiver_create(&r->sc->model, r->sc->inventory, &r->serve, rank, NULL,
                                            &dense));
        dcr_status_t st = dcr_receiver_load_dense_all(dense, r->canonical);
        if (st == DCR_OK) dcr_receiver_digest(dense, out[rank]);
        dcr_receiver_destroy(dense);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

static size_t digests_bytes(const frun_t *r)
{
    return (size_t)r->serve.tp * DCR_READ_DIGEST_BYTES;
}

/* Before a transition: requests may see P^v or the candidate's P^{v+1}. */
static dcr_status_t expect_candidate(frun_t *r)
{
    uint8_t(*next)[DCR_READ_DIGEST_BYTES] = malloc(digests_bytes(r));
    if (!next) return dcr_error_set(DCR_ENOMEM, "digests");
    dcr_status_t st = dense_digests(r, r->candidate, next);
    if (st == DCR_OK) {
        pthread_mutex_lock(&r->expect_lock);
        memcpy(r->next, next, digests_bytes(r));
        r->gen++;
        pthread_mutex_unlock(&r->expect_lock);
    }
    free(next);
    return st;
}

/* After a commit: P^{v+1} is the committed version. */
static void expect_committed(frun_t *r)
{
    pthread_mutex_lock(&r->expect_lock);
    memcpy(r->cur, r->next, digests_bytes(r));
    r->gen++;
    pthread_mutex_unlock(&r->expect_lock);
}

static dcr_status_t make_expectations(frun_t *r)
{
    r->cur = malloc(digests_bytes(r));
    r->next = malloc(digests_bytes(r));
    if (!r->cur || !r->next) return dcr_error_set(DCR_ENOMEM, "digests");
    DCR_CHECK(dense_digests(r, r->committed, r->cur));
    memcpy(r->next, r->cur, digests_bytes(r));
    return DCR_OK;
}

/* Whether digest d of receiver `slot` is P^v or P^{v+1}; expect_lock held. */
static bool expected(const frun_t *r, int slot, const uint8_t *d)
{
    int rank = dcr_serve_tp_rank(&r->serve, slot);
    return !memcmp(d, r->cur[rank], DCR_READ_DIGEST_BYTES) ||
           !memcmp(d, r->next[rank], DCR_READ_DIGEST_BYTES);
}

static uint64_t reader_gen(void *ctx, int slot)
{
    (void)slot;
    frun_t *r = ctx;
    pthread_mutex_lock(&r->expect_lock);
    uint64_t gen = r->gen;
    pthread_mutex_unlock(&r->expect_lock);
    return gen;
}

static void reader_seen(void *ctx, int slot, uint64_t gen, const uint8_t *d)
{
    frun_t *r = ctx;
    pthread_mutex_lock(&r->expect_lock);
    if (gen == r->gen) {
        r->gate_reads++;
        if (!expected(r, slot, d) && r->gate_violations++ == 0)
            DCR_LOG_ERROR("faults: a request read receiver %d through its gate in a mixed state "
                          "(neither P^v nor P^{v+1})",
                          slot);
    }
    pthread_mutex_unlock(&r->expect_lock);
}

static dcr_status_t start_readers(frun_t *r)
{
    if (r->cfg->readers <= 0) return DCR_OK;
    dcr_readers_config_t rc = {r->gate, r->cfg->readers, NULL, 0, 1000, reader_gen, reader_seen, r};
    return dcr_readers_start(&rc, &r->readers);
}

/* ---- what the harness watches through the faulty backends ------------------------ */

static bool holds_expected(frun_t *r, int slot, bool next_only)
{
    uint8_t d[DCR_READ_DIGEST_BYTES];
    dcr_receiver_digest(dcr_coord_receiver(r->coord, slot), d);
    int rank = dcr_serve_tp_rank(&r->serve, slot);
    pthread_mutex_lock(&r->expect_lock);
    bool ok = next_only ? !memcmp(d, r->next[rank], DCR_READ_DIGEST_BYTES) : expected(r, slot, d);
    pthread_mutex_unlock(&r->expect_lock);
    return ok;
}

/* break_gate: once receiver `slot` holds a mix, its gate opens as if a
 * commit had vouched for it, and the watcher waits for a reader to notice. */
static void break_gate(frun_t *r, int slot, uint64_t tau)
{
    if (holds_expected(r, slot, false)) return;
    pthread_mutex_lock(&r->expect_lock);
    bool first = !r->gate_broken;
    r->gate_broken = true;
    pthread_mutex_unlock(&r->expect_lock);
    if (!first) return;
    DCR_LOG_WARN("faults: break_gate: receiver %d's gate opens in the middle of its apply", slot);
    dcr_gate_open(r->gate, slot, tau, true);
    for (int waited = 0; waited < 10000; waited += 5) {
        pthread_mutex_lock(&r->expect_lock);
        int64_t seen = r->gate_violations;
        pthread_mutex_unlock(&r->expect_lock);
        if (seen > 0) break;
        usleep(5000);
    }
}

/* Right before the joint commit every required receiver (every live one:
 * deaths fail the attempt before this step) must hold P^{v+1}. */
static void check_before_commit(frun_t *r)
{
    for (int i = 0; i < r->nrecv; i++) {
        if (!dcr_coord_receiver_alive(r->coord, i)) continue;
        r->commit_checks++;
        if (holds_expected(r, i, true)) continue;
        r->commit_violations++;
        DCR_LOG_ERROR("faults: the joint commit is about to happen while receiver %d does not "
                      "hold P^{v+1}",
                      i);
    }
}

/* The faulty backends' events: a joint commit on its way (the check
 * before it), and a node that took a payload (break_gate: sync RL applies
 * it there; async RL applies after delivery, where no backend call lies). */
static void watch(void *ctx, dcr_faults_event_t ev, int who, uint64_t tau)
{
    frun_t *r = ctx;
    if (ev == DCR_FAULTS_EVENT_COMMIT) check_before_commit(r);
    if (ev != DCR_FAULTS_EVENT_TAKEN || !r->cfg->break_gate) return;
    int per = r->serve.gpus_per_node;
    for (int slot = who * per; slot < (who + 1) * per && slot < r->nrecv; slot++)
        if (dcr_coord_receiver_alive(r->coord, slot)) break_gate(r, slot, tau);
}

/* A coordinator incarnation: a new id each time, the current receivers and
 * gates; it reads the membership from the control plane. */
static dcr_status_t start_coordinator(frun_t *r)
{
    char id[64];
    snprintf(id, sizeof(id), "faults-%d-%d", (int)getpid(), ++r->incarnation);
    dcr_coord_config_t cc = dcr_coord_config_default(id, r->serve.gpus_per_node);
    cc.rl = r->cfg->bench.run.rl;
    cc.max_attempts = r->cfg->max_attempts;
    cc.deadline_ms = r->cfg->deadline_ms;
    cc.stall_timeout_ms = 20000;
    dcr_coord_parties_t parties = {
        r->con,   r->sc->layout->world, r->transport, r->control, r->recv,
        r->nrecv, r->xor_allowed,       r->gate};
    return dcr_coord_create(&cc, &parties, &r->coord);
}

static dcr_status_t make_parties(frun_t *r)
{
    const dcr_bench_config_t *b = &r->cfg->bench;
    dcr_construct_config_t cc = dcr_construct_config_default();
    cc.mode = b->run.mode;
    cc.shuffle = b->run.shuffle;
    dcr_run_targets(&b->run, dcr_inventory_bytes(r->sc->inventory), r->sc->layout->world,
                    &cc.chunk_bytes, &cc.bucket_bytes);
    DCR_CHECK(dcr_constructor_create(r->sc->layout, &cc, r->committed, &r->con));
    char run[96];
    snprintf(run, sizeof(run), "faults-%d-%llu-%llu", (int)getpid(),
             (unsigned long long)b->run.seed, (unsigned long long)dcr_clock_ns());
    /* A store the user named is shared by runs: each keeps its objects
     * under its own prefix there. */
    if (b->run.store && !strcmp(b->run.transport, "objstore")) {
        size_t n = strlen(b->run.store);
        while (n > 1 && b->run.store[n - 1] == '/') n--; /* "s3://B/P/": no empty component */
        snprintf(r->objdir, sizeof(r->objdir), "%.*s/%s", (int)n, b->run.store, run);
    } else
        snprintf(r->objdir, sizeof(r->objdir), "%s/objstore", r->workdir);
    /* Faults act through backends that wrap the real ones (faults.h): the
     * injector is bound while they are created. */
    DCR_CHECK(dcr_faults_create(b->run.seed, &r->faults));
    /* Receiver kills mark the slots dead on the gates, as the serving
     * process would; the harness watches commits and applies. */
    dcr_faults_set_rollout(r->faults, r->gate, r->serve.gpus_per_node);
    dcr_faults_watch(r->faults, watch, r);
    DCR_CHECK(dcr_faults_bind(r->faults));
    char name[64];
    snprintf(name, sizeof(name), "faulty:%s", b->run.transport);
    dcr_transport_config_t tc = {.train_nodes = r->sc->train.nodes,
                                 .world = r->sc->layout->world,
                                 .rollout_nodes = r->serve.nodes,
                                 .link = b->run.link,
                                 .dir = r->objdir,
                                 .fanout = b->run.fanout,
                                 .queue_payloads = 8,
                                 .s3_endpoint = b->run.store ? b->run.s3_endpoint : NULL};
    dcr_status_t st = dcr_transport_create(name, &tc, &r->transport);
    char db[4200];
    snprintf(db, sizeof(db), "%s/control.db", r->workdir);
    /* Only an etcd URL is shared by the runs (each in its namespace); a
     * SQLite control plane is always this run's own file. */
    const char *etcd = dcr_run_control_is_etcd(b->run.control_path) ? b->run.control_path : NULL;
    if (st == DCR_OK) st = dcr_run_control_open_as("faulty:", etcd, db, run, &r->control);
    dcr_faults_unbind(r->faults);
    DCR_CHECK(st);
    return start_coordinator(r);
}

static dcr_status_t setup(frun_t *r)
{
    const dcr_bench_config_t *b = &r->cfg->bench;
    r->serve = b->run.serve;
    dcr_scenario_spec_t spec = b->run.scenario;
    spec.align_extra = r->serve.tp;
    DCR_CHECK(dcr_scenario_create(&spec, &r->sc));
    DCR_CHECK(dcr_serve_config_validate(&r->sc->model, &r->serve));
    DCR_CHECK(dcr_serve_register_loaders());
    r->nc = dcr_inventory_count(r->sc->inventory);
    r->ns = (size_t)r->sc->layout->nshards;
    DCR_CHECK(
        dcr_scenario_check_memory(r->sc, "faults",
                                  &(dcr_run_shape_t){.canonical_copies = 1,
                                                     .shard_copies = 2,
                                                     .trackers = b->run.mode != DCR_MODE_F,
                                                     .receivers = dcr_serve_receivers(&r->serve),
                                                     .serve_tp = r->serve.tp,
                                                     .verifiers = 1,
                                                     .adamw = b->run.adamw,
                                                     .transient = true}));
    DCR_CHECK(make_workdir(r));
    DCR_CHECK(dcr_scenario_alloc_canonical(r->sc, &r->canonical));
    DCR_CHECK(dcr_scenario_alloc_shards(r->sc, &r->committed));
    DCR_CHECK(dcr_scenario_alloc_shards(r->sc, &r->candidate));
    dcr_scenario_init_weights(r->sc, b->run.seed, r->canonical);
    DCR_CHECK(dcr_megatron_import(&r->sc->model, &r->sc->train, r->sc->layout, r->canonical,
                                  r->committed));
    if (b->run.adamw)
        DCR_CHECK(dcr_adamw_create(r->sc, r->committed, b->run.lr, b->run.seed + 7, &r->adamw));
    DCR_CHECK(make_receivers(r));
    DCR_CHECK(make_expectations(r));
    DCR_CHECK(dcr_gate_create(r->nrecv, &r->gate));
    DCR_CHECK(make_parties(r));
    return start_readers(r);
}

static void teardown(frun_t *r)
{
    dcr_readers_stop(r->readers);
    dcr_coord_destroy(r->coord);
    dcr_gate_destroy(r->gate);
    free(r->cur);
    free(r->next);
    dcr_adamw_destroy(r->adamw);
    dcr_control_destroy(r->control);
    dcr_transport_destroy(r->transport);
    dcr_faults_destroy(r->faults); /* after the backends that inject its faults */
    dcr_constructor_destroy(r->con);
    for (int i = 0; r->recv && i < r->nrecv; i++) dcr_receiver_destroy(r->recv[i]);
    free(r->recv);
    free(r->restart_at);
    free(r->xor_allowed);
    dcr_scenario_free_tensors(r->canonical, r->nc);
    dcr_scenario_free_tensors(r->committed, r->ns);
    dcr_scenario_free_tensors(r->candidate, r->ns);
    dcr_scenario_destroy(r->sc);
    dcr_workdir_close(&r->wd);
}

/* ---- membership ------------------------------------------------------------------ */

static dcr_status_t restore_cb(void *ctx, int i, uint64_t version, dcr_receiver_t **out_p)
{
    frun_t *r = ctx;
    if (version != r->version)
        return dcr_error_set(DCR_ECONFLICT,
                             "the commit record holds version %" PRIu64 ", the owners %" PRIu64,
                             version, r->version);
    DCR_CHECK(export_committed(r));
    return dense_receiver(r, i, out_p);
}

static dcr_status_t restart_due(frun_t *r, int step, dcr_faults_summary_t *s)
{
    for (int i = 0; i < r->nrecv; i++) {
        if (r->restart_at[i] < 0 || r->restart_at[i] > step) continue;
        DCR_CHECK(dcr_coord_receiver_restart(r->coord, i, restore_cb, r));
        dcr_receiver_destroy(r->recv[i]);
        r->recv[i] = dcr_coord_receiver(r->coord, i);
        r->restart_at[i] = -1;
        s->restores++;
        DCR_LOG_INFO("faults: step %d: receiver %d restarted at version %" PRIu64
                     " by a dense refit",
                     step + 1, i, r->version);
    }
    return DCR_OK;
}

/* Receivers the last transition lost: killed ones restart restart_after
 * steps later; ones left with partial writes by a stopped transition at the
 * next step (the operator's dense refit). Kills are counted where they fire
 * (kills_fired), since a stopped transition loses killed receivers too. */
static void note_deaths(frun_t *r, int step, bool stopped)
{
    int after = r->cfg->restart_after > 0 ? r->cfg->restart_after : 1;
    for (int i = 0; i < r->nrecv; i++) {
        if (r->restart_at[i] >= 0 || dcr_coord_receiver_alive(r->coord, i)) continue;
        r->restart_at[i] = step + (stopped ? 1 : after);
    }
}

/* Receiver kills that have fired since the injector was created. */
static int64_t kills_fired(const frun_t *r)
{
    int64_t counts[DCR_FAULT_KIND_COUNT] = {0};
    if (r->faults) dcr_faults_counts(r->faults, counts);
    return counts[DCR_FAULT_KILL_DELIVERY] + counts[DCR_FAULT_KILL_APPLY] +
           counts[DCR_FAULT_KILL_ACKED];
}

/* ---- one step ------------------------------------------------------------------ */

static dcr_status_t arm_step(frun_t *r, int step)
{
    const dcr_faults_run_config_t *cfg = r->cfg;
    bool *alive = calloc(r->nrecv > 0 ? (size_t)r->nrecv : 1, sizeof(bool));
    if (!alive) return dcr_error_set(DCR_ENOMEM, "membership");
    for (int i = 0; i < r->nrecv; i++) alive[i] = dcr_coord_receiver_alive(r->coord, i);
    dcr_status_t st = DCR_OK;
    if (cfg->kill_every > 0 && (step + 1) % cfg->kill_every == 0) {
        /* The Figure 9 kill: a receiver chosen at random dies mid-refit. */
        dcr_rng_t *rng = dcr_faults_rng(r->faults);
        dcr_fault_t kill = {DCR_FAULT_KILL_DELIVERY + (int)dcr_rng_below(rng, 3), -1, 0, 0, 0, 0};
        kill.nth = kill.kind == DCR_FAULT_KILL_ACKED ? 0 : (int)dcr_rng_below(rng, 2);
        int live = 0;
        for (int i = 0; i < r->nrecv; i++) live += alive[i];
        if (live > 0) {
            int k = (int)dcr_rng_below(rng, (uint64_t)live);
            for (int i = 0; i < r->nrecv; i++)
                if (alive[i] && k-- == 0) kill.target = i;
            st = dcr_faults_arm(r->faults, &kill);
        }
    }
    for (int k = 0; st == DCR_OK && k < cfg->faults_per_step; k++) {
        dcr_fault_t x = dcr_faults_draw(r->faults, cfg->bench.run.transport, r->sc->layout->world,
                                        r->serve.nodes, r->nrecv, alive);
        st = dcr_faults_arm(r->faults, &x);
    }
    for (int k = 0; st == DCR_OK && k < cfg->nplan; k++)
        if (cfg->plan[k].step == step) st = dcr_faults_arm(r->faults, &cfg->plan[k].fault);
    free(alive);
    return st;
}

static dcr_status_t move_weights(frun_t *r, int step)
{
    for (size_t s = 0; s < r->ns; s++)
        memcpy(r->candidate[s]->data, r->committed[s]->data, r->committed[s]->bytes);
    int64_t changed = 0;
    if (r->adamw) return dcr_adamw_step(r->adamw, r->candidate, r->canonical, &changed);
    return dcr_scenario_inject_uniform(r->sc, r->cfg->bench.run.change_rate,
                                       r->cfg->bench.run.seed + 1000 + (uint64_t)step, r->candidate,
                                       r->canonical, &changed);
}

/* A failover: the crashed coordinator is destroyed and a successor
 * started (retried while the control plane is unavailable); the membership
 * the crashed one held must be what the new one reads from the control
 * plane, else s->membership_mismatches counts it. */
static dcr_status_t fail_over(frun_t *r, int step, dcr_faults_summary_t *s)
{
    bool *held = calloc(r->nrecv > 0 ? (size_t)r->nrecv : 1, sizeof(bool));
    if (!held) return dcr_error_set(DCR_ENOMEM, "membership");
    for (int i = 0; i < r->nrecv; i++) held[i] = dcr_coord_receiver_alive(r->coord, i);
    dcr_coord_destroy(r->coord);
    r->coord = NULL;
    /* The supervisor starts another one while the control plane is unavailable. */
    dcr_status_t st = DCR_ECONTROL;
    for (int tries = 0; tries < 4 && st == DCR_ECONTROL; tries++) {
        if (tries > 0) usleep(50000);
        st = start_coordinator(r);
    }
    for (int i = 0; st == DCR_OK && i < r->nrecv; i++) {
        if (dcr_coord_receiver_alive(r->coord, i) == held[i]) continue;
        DCR_LOG_ERROR("faults: step %d: after the failover receiver %d is %s, it was %s", step + 1,
                      i, held[i] ? "out" : "in", held[i] ? "in" : "out");
        s->membership_mismatches++;
        break;
    }
    free(held);
    return st;
}

/* The transition from the run's version to its candidate: a refit; after
 * each crash the injector fired, the receivers that died under the crashed
 * coordinator are due for a restart (the new one reads them out of the
 * recorded membership), a failover, and a resume by the new coordinator
 * (every attempt an overwrite retry). Attempts, retries and failovers go
 * into s. */
static dcr_status_t transition(frun_t *r, int step, dcr_faults_summary_t *s)
{
    dcr_refit_result_t res;
    memset(&res, 0, sizeof(res));
    dcr_status_t st = dcr_coord_refit(r->coord, r->candidate, &res);
    int last = dcr_coord_last_attempts(r->coord);
    s->attempts += last;
    s->retries += last > 1 ? last - 1 : 0;
    while (st != DCR_OK && dcr_faults_take_crash(r->faults)) {
        DCR_LOG_WARN("faults: %s; a new coordinator takes over", dcr_error_line(st));
        note_deaths(r, step, false);
        DCR_CHECK(fail_over(r, step, s));
        s->failovers++;
        memset(&res, 0, sizeof(res));
        st = dcr_coord_resume(r->coord, r->candidate, r->version, &res);
        last = dcr_coord_last_attempts(r->coord);
        s->attempts += last;
        s->retries += last;
    }
    return st;
}

/* ---- checks ------------------------------------------------------------------ */

static dcr_status_t count_submit(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    (void)owner;
    (void)id;
    (void)buf;
    (void)len;
    ++*(int64_t *)ctx;
    return DCR_OK;
}

/* After a step: the commit record must name `version` (else s->lost) and
 * the owners' baselines must hold `committed`, the weights of that version
 * (else s->baseline_mismatches; NULL: not checked); `step` (0-based) for
 * the log. */
static dcr_status_t check_owners(dcr_control_t *control, uint64_t version, dcr_constructor_t *con,
                                 dcr_storage_t *const *committed, const uint8_t *xor_allowed,
                                 int step, dcr_faults_summary_t *s)
{
    dcr_commit_record_t rec;
    DCR_CHECK(dcr_control_read(control, &rec));
    if (rec.version != version) {
        DCR_LOG_ERROR("faults: step %d: the commit record names version %" PRIu64
                      ", the owners hold %" PRIu64,
                      step + 1, rec.version, version);
        s->lost++;
    }
    if (!committed) return DCR_OK;
    /* The baselines hold the committed weights exactly when comparing the
     * committed weights with them finds no change. */
    int64_t payloads = 0;
    dcr_payload_sink_t sink = {count_submit, &payloads};
    dcr_construct_stats_t st;
    DCR_CHECK(dcr_constructor_run(con, committed, UINT64_MAX >> 1, xor_allowed, false, &sink, &st));
    if (st.changed_elements != 0) {
        DCR_LOG_ERROR("faults: step %d: the owners' baselines differ from the committed weights",
                      step + 1);
        s->baseline_mismatches++;
    }
    return DCR_OK;
}

static dcr_status_t check_step(frun_t *r, int step, dcr_faults_summary_t *s)
{
    DCR_CHECK(check_owners(r->control, r->version, r->con, r->committed, r->xor_allowed, step, s));
    DCR_CHECK(export_committed(r));
    for (int rank = 0; rank < r->serve.tp; rank++) {
        dcr_receiver_t *dense = NULL;
        DCR_CHECK(dcr_serve_receiver_create(&r->sc->model, r->sc->inventory, &r->serve, rank, NULL,
                                            &dense));
        dcr_status_t st = dcr_receiver_load_dense_all(dense, r->canonical);
        for (int i = 0; st == DCR_OK && i < r->nrecv; i++) {
            if (dcr_serve_tp_rank(&r->serve, i) != rank || !dcr_coord_receiver_alive(r->coord, i))
                continue;
            const char *param = NULL;
            int64_t elem = -1;
            s->checks++;
            if (!dcr_receiver_equal(r->recv[i], dense, &param, &elem)) {
                DCR_LOG_ERROR(
                    "faults: step %d: receiver %d differs from the dense refit at %s[%lld]",
                    step + 1, i, param ? param : "?", (long long)elem);
                s->mismatches++;
            }
        }
        dcr_receiver_destroy(dense);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

static dcr_status_t one_step(frun_t *r, int step, dcr_faults_summary_t *s)
{
    DCR_CHECK(restart_due(r, step, s));
    DCR_CHECK(arm_step(r, step));
    DCR_CHECK(move_weights(r, step));
    DCR_CHECK(expect_candidate(r));
    int64_t kills_before = kills_fired(r);
    dcr_status_t st = transition(r, step, s);
    s->kills += (int)(kills_fired(r) - kills_before);
    dcr_faults_disarm(r->faults); /* faults that did not fire do not leak into the checks */
    if (st == DCR_OK) {
        s->commits++;
        r->version++;
        expect_committed(r);
        dcr_storage_t **swap = r->committed; /* the candidate is committed */
        r->committed = r->candidate;
        r->candidate = swap;
    } else if (st == DCR_EFATAL || st == DCR_ECONFLICT) {
        /* Retries could not repair it: version v stays committed; training
         * goes on and the next step's delta is taken from v. */
        s->stops++;
        DCR_LOG_WARN("faults: step %d stopped: %s", step + 1, dcr_error_line(st));
    } else {
        return st;
    }
    note_deaths(r, step, st != DCR_OK);
    DCR_CHECK(check_step(r, step, s));
    s->steps++;
    DCR_LOG_INFO("faults: step %d: version %" PRIu64 ", %d live receivers", step + 1, r->version,
                 dcr_coord_live_receivers(r->coord));
    return DCR_OK;
}

dcr_status_t dcr_faults_run(const dcr_faults_run_config_t *cfg, dcr_faults_summary_t *out_p)
{
    if (cfg->steps < 1 || cfg->max_attempts < 1 || cfg->kill_every < 0 ||
        cfg->faults_per_step < 0 || cfg->deadline_ms == 0 || cfg->readers < 0 ||
        (cfg->break_gate && cfg->readers < 1))
        return dcr_error_set(DCR_EINVAL,
                             "faults: %d steps, %d attempts, kill every %d, %d faults per step, "
                             "%d readers%s: expected >= 1 step and attempt, no negative count",
                             cfg->steps, cfg->max_attempts, cfg->kill_every, cfg->faults_per_step,
                             cfg->readers, cfg->break_gate ? " (break_gate needs one)" : "");
    DCR_CHECK(dcr_bench_config_check(&cfg->bench, false));
    frun_t r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    pthread_mutex_init(&r.expect_lock, NULL);
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    dcr_status_t st = setup(&r);
    for (int i = 0; st == DCR_OK && i < cfg->steps; i++) {
        /* Between steps is the safe point for a stop signal. */
        st = dcr_interrupt_check("faults");
        if (st == DCR_OK) st = one_step(&r, i, &s);
    }
    if (r.faults) dcr_faults_counts(r.faults, s.faults_by_kind);
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) s.faults += s.faults_by_kind[k];
    s.version = r.version;
    teardown(&r);
    pthread_mutex_destroy(&r.expect_lock);
    s.gate_reads = r.gate_reads;
    s.gate_violations = r.gate_violations;
    s.commit_checks = r.commit_checks;
    s.commit_violations = r.commit_violations;
    DCR_CHECK(st);
    *out_p = s;
    return DCR_OK;
}

void dcr_faults_summary_add(dcr_faults_summary_t *a, const dcr_faults_summary_t *b)
{
    a->steps += b->steps;
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) a->faults_by_kind[k] += b->faults_by_kind[k];
    a->faults += b->faults;
    a->attempts += b->attempts;
    a->retries += b->retries;
    a->commits += b->commits;
    a->stops += b->stops;
    a->failovers += b->failovers;
    a->kills += b->kills;
    a->restores += b->restores;
    a->mismatches += b->mismatches;
    a->baseline_mismatches += b->baseline_mismatches;
    a->lost += b->lost;
    a->checks += b->checks;
    a->gate_reads += b->gate_reads;
    a->gate_violations += b->gate_violations;
    a->commit_checks += b->commit_checks;
    a->commit_violations += b->commit_violations;
    a->membership_mismatches += b->membership_mismatches;
    a->version = b->version;
}

dcr_status_t dcr_faults_campaign(const dcr_faults_campaign_config_t *cfg,
                                 dcr_faults_summary_t *out_p)
{
    if (cfg->seeds < 1)
        return dcr_error_set(DCR_EINVAL, "campaign needs >= 1 seed, got %d", cfg->seeds);
    dcr_faults_summary_t total;
    memset(&total, 0, sizeof(total));
    for (int i = 0; i < cfg->seeds; i++) {
        dcr_faults_run_config_t run = cfg->run;
        run.bench.run.transport = i % 2 ? "relay" : "objstore";
        run.bench.run.rl = (i / 2) % 2 ? DCR_RL_ASYNC : DCR_RL_SYNC;
        run.bench.run.seed = cfg->base_seed + (uint64_t)i;
        DCR_LOG_INFO("faults: campaign run %d of %d: seed %" PRIu64 ", %s, %s RL", i + 1,
                     cfg->seeds, run.bench.run.seed, run.bench.run.transport,
                     dcr_rl_mode_name(run.bench.run.rl));
        dcr_faults_summary_t s;
        dcr_status_t st = dcr_faults_run(&run, &s);
        if (st != DCR_OK) {
            dcr_error_prefix("campaign seed %" PRIu64 " (%s, %s): ", run.bench.run.seed,
                             run.bench.run.transport, dcr_rl_mode_name(run.bench.run.rl));
            return st;
        }
        dcr_faults_summary_add(&total, &s);
    }
    *out_p = total;
    return DCR_OK;
}
