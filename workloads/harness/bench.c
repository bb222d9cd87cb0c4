/* The end-to-end benchmark: setup (outside the window), the reference,
 * warm-up and timed refits through the coordinator, dense-refit checks. */
#define _XOPEN_SOURCE 700
#include "workloads/harness/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

#include <pthread.h>
#include <stdatomic.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/objstore.h"
#include "dcr/parties.h"
#include "dcr/recovery.h"
#include "dcr/rollout_node.h"
#include "dcr/trace.h"
#include "workloads/change/budget.h"
#include "workloads/change/change_profile.h"
#include "workloads/change/ckpt_init.h"
#include "workloads/harness/bench_ab.h"
#include "workloads/harness/interrupt.h"
#include "workloads/harness/readers.h"
#include "workloads/harness/refusals.h"
#include "dcr/recovery.h"
#include "workloads/harness/rundir.h"
#include "workloads/harness/workdir.h"

_Static_assert(DCR_RESTORE_KINDS == 5,
               "dcr_bench_result_t sizes its restore arrays for five kinds");

dcr_bench_config_t dcr_bench_config_default(void)
{
    dcr_bench_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.run = dcr_run_config_default();
    cfg.warmup = 2;
    cfg.refits = 5;
    cfg.verify = true;
    return cfg;
}

typedef struct bench {
    const dcr_bench_config_t *cfg;
    dcr_scenario_t *sc;
    dcr_serve_config_t serve;
    size_t nc, ns;
    dcr_storage_t **canonical; /* scratch: initial weights, then the oracle's W^{v+1} */
    /* The training shards: version v between refits; each step changes them
     * in place into v+1 and refits from them. One set is enough because the
     * owners compare against their own trackers, never against these. */
    dcr_storage_t **shards;
    dcr_receiver_t **receivers;
    int nrecv;
    uint8_t *xor_allowed;
    dcr_constructor_t *con;
    dcr_transport_t *transport;
    dcr_control_t *control;
    dcr_coord_t *coord;
    dcr_adamw_t *adamw;
    dcr_workdir_t wd; /* workloads/harness/workdir.h */
    const char *workdir;
    bool workdir_in_memory;
    /* The control plane's own folder and file with the run directory in
     * memory (see make_workdir); empty otherwise. */
    dcr_workdir_t control_wd;
    char control_file[4200];
    /* request emulation */
    dcr_readers_t *readers;
    atomic_int epoch; /* refit in progress (1-based); readers tag observations with it */
    pthread_mutex_t seen_lock;
    struct seen {
        int epoch;
        uint8_t digest[16];
    } * seen;
    size_t nseen, cap_seen;
    int64_t requests, mismatches;
    int64_t memory_estimate;
    bool started;                   /* rollout-node processes were started */
    dcr_node_totals_t *node_totals; /* their CPU over the run, across restarts */
    /* Retention of the last commit (dcr/recovery.h); NULL: none. Its
     * cost goes to retain_out, the timed refit that committed (NULL: a
     * warm-up). */
    dcr_retainer_t *retainer;
    dcr_bench_refit_t *retain_out;
} bench_t;

/* ---- setup ---------------------------------------------------------------- */

/* What a run directory in memory may come to hold: every retained version
 * and two attempts in flight, each as large as the checkpoint at worst (a
 * step that changes every value). */
static uint64_t workdir_memory_need(const bench_t *b)
{
    uint64_t versions = (uint64_t)(b->cfg->run.retain > 0 ? b->cfg->run.retain : 0) + 2;
    return versions * (uint64_t)dcr_inventory_bytes(b->sc->inventory);
}

/* The run directory (dcr_bench_config_t.workdir_in_memory): the user's, a
 * temporary one in memory with the control plane's file in a temporary
 * folder on the disk, or a temporary one on the disk holding both. */
static dcr_status_t make_workdir(bench_t *b)
{
    const dcr_run_config_t *run = &b->cfg->run;
    const char *memory = b->cfg->workdir_in_memory && !run->workdir
                             ? dcr_workdir_memory_parent(workdir_memory_need(b))
                             : NULL;
    if (!memory) {
        DCR_CHECK(dcr_workdir_open(b->cfg->workdir_flag ? b->cfg->workdir_flag : "--workdir",
                                   run->workdir, "dcr-bench", &b->wd));
        b->workdir = b->wd.path;
        if (b->cfg->workdir_in_memory && !run->workdir)
            DCR_LOG_WARN("bench: /dev/shm is not memory or lacks %llu bytes free: the run "
                         "directory is %s",
                         (unsigned long long)workdir_memory_need(b), b->workdir);
        return DCR_OK;
    }
    DCR_CHECK(dcr_workdir_open_temp(memory, "dcr-bench", &b->wd));
    b->workdir = b->wd.path;
    b->workdir_in_memory = true;
    if (!run->control_path) {
        /* Dead runs' folders in TMPDIR, of this layout or the other, go. */
        dcr_workdir_sweep(dcr_workdir_tmpdir(), "dcr-bench");
        DCR_CHECK(dcr_workdir_open_temp(NULL, "dcr-bench-control", &b->control_wd));
        snprintf(b->control_file, sizeof b->control_file, "%s/control.db", b->control_wd.path);
    }
    DCR_LOG_INFO("bench: run directory %s (in memory), control plane %s", b->workdir,
                 run->control_path ? run->control_path : b->control_file);
    return DCR_OK;
}

/* The control plane's address when the bench chose it (make_workdir);
 * NULL: the run's (run.control_path, or the run directory's control.db). */
static const char *chosen_control(const bench_t *b)
{
    return b->control_file[0] ? b->control_file : NULL;
}

/* Rollout nodes as processes: their receivers live there; the XOR policy
 * comes from shape-only probes of every receiver's layout. */
static dcr_status_t make_policy_remote(bench_t *b)
{
    b->nrecv = dcr_serve_receivers(&b->serve);
    return dcr_run_xor_policy(b->sc, &b->serve, b->cfg->run.mode, &b->xor_allowed);
}

/* Whether the receivers' resident storage is host memory (no --device, or
 * cpu), which verification compares in place. */
static bool host_receivers(const bench_t *b)
{
    const char *dev = b->cfg->run.device;
    return dev == NULL || strcmp(dev, "cpu") == 0;
}

static dcr_status_t make_receivers(bench_t *b)
{
    if (b->cfg->processes) return make_policy_remote(b);
    b->nrecv = dcr_serve_receivers(&b->serve);
    b->receivers = calloc((size_t)b->nrecv, sizeof(*b->receivers));
    if (!b->receivers) return dcr_error_set(DCR_ENOMEM, "%d receivers", b->nrecv);
    for (int i = 0; i < b->nrecv; i++) {
        dcr_receiver_config_t base = {.device = b->cfg->run.device};
        DCR_CHECK(dcr_serve_receiver_create(&b->sc->model, b->sc->inventory, &b->serve, i, &base,
                                            &b->receivers[i]));
        dcr_receiver_set_payload_key(b->receivers[i], &b->cfg->run.payload_key);
        DCR_CHECK(dcr_receiver_load_dense_all(b->receivers[i], b->canonical));
        DCR_CHECK(dcr_receiver_prewarm(b->receivers[i]));
    }
    b->xor_allowed = calloc(b->nc + 1, 1);
    if (!b->xor_allowed) return dcr_error_set(DCR_ENOMEM, "XOR policy");
    for (size_t c = 0; c < b->nc; c++)
        b->xor_allowed[c] =
            b->cfg->run.mode == DCR_MODE_X && dcr_serve_xor_allowed(b->receivers, b->nrecv, c);
    return DCR_OK;
}

/* rollout_nodes: the endpoints this handle serves (one, unused, when the
 * nodes are processes with handles of their own). */
static dcr_status_t make_transport(bench_t *b, const char *name, int rollout_nodes,
                                   dcr_transport_t **out_p)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/objstore-%s", b->workdir, name);
    bool store = b->cfg->run.store != NULL && strcmp(name, "objstore") == 0;
    dcr_transport_config_t tc = {.train_nodes = b->sc->train.nodes,
                                 .world = b->sc->layout->world,
                                 .rollout_nodes = rollout_nodes,
                                 .link = b->cfg->run.link,
                                 .dir = store ? b->cfg->run.store : dir,
                                 .fanout = b->cfg->run.fanout,
                                 .queue_payloads = 8,
                                 .s3_endpoint = store ? b->cfg->run.s3_endpoint : NULL,
                                 .keep_objects = b->cfg->keep_payloads,
                                 /* processes: the clearing handle, read by nobody (the
                                    relay's: a whole tree in this process, which only the
                                    reference uses) */
                                 .send_only =
                                     b->cfg->processes != NULL && strcmp(name, "relay") != 0};
    DCR_CHECK(dcr_transport_create(name, &tc, out_p));
    dcr_transport_set_payload_key(*out_p, &b->cfg->run.payload_key);
    if (b->cfg->run.retain > 0 && !strcmp(name, "objstore") &&
        !strcmp(b->cfg->run.transport, "objstore") && b->retainer == NULL) {
        /* Its own handle on the run transport's store (the first made):
         * retention copies what the transport wrote (dcr/recovery.h). The
         * reference's handle, made later, must not clear it again. */
        DCR_CHECK(dcr_retainer_create(tc.dir, tc.s3_endpoint, b->cfg->run.retain, &b->retainer));
    }
    return DCR_OK;
}

static dcr_status_t make_parties(bench_t *b)
{
    dcr_construct_config_t cc = dcr_run_construct_config(&b->cfg->run, b->sc);
    DCR_LOG_INFO("bench: chunk target %zu bytes, bucket target %zu bytes", cc.chunk_bytes,
                 cc.bucket_bytes);
    /* Owners as processes (an MPI job) construct there: none here. */
    if (!(b->cfg->processes && b->cfg->processes->owners))
        DCR_CHECK(dcr_constructor_create(b->sc->layout, &cc, b->shards, &b->con));
    DCR_CHECK(make_transport(b, b->cfg->run.transport, b->cfg->processes ? 1 : b->serve.nodes,
                             &b->transport));
    /* Owners here and versions retained: each commit's records are kept
     * for the version's repair set (dcr/construct.h, issue 19). */
    if (b->con && b->retainer) dcr_constructor_keep_records(b->con, true);
    char db[4200];
    dcr_rundir_control_path(b->workdir, db, sizeof(db)); /* where the role processes look too */
    char id[64];
    snprintf(id, sizeof(id), "bench-%d-%llu", (int)getpid(), (unsigned long long)dcr_clock_ns());
    const char *control = chosen_control(b) ? chosen_control(b) : b->cfg->run.control_path;
    DCR_CHECK(dcr_run_control_open(control, db, id, &b->control));
    if (b->cfg->processes && dcr_run_control_is_etcd(b->cfg->run.control_path)) {
        /* The role processes join this run's etcd namespace, not a fresh one. */
        char url[1024];
        DCR_CHECK(dcr_run_control_url(b->cfg->run.control_path, id, url, sizeof url));
        DCR_CHECK(dcr_rundir_control_url_write(b->workdir, url));
    }
    dcr_coord_config_t coc = dcr_coord_config_default(id, b->serve.gpus_per_node);
    coc.rl = b->cfg->run.rl;
    coc.nodes = b->cfg->processes != NULL ? "remote" : "local";
    coc.owners = b->cfg->processes && b->cfg->processes->owners ? "remote" : "local";
    dcr_coord_parties_t parties = {
        b->con,   b->sc->layout->world, b->transport, b->control, b->receivers,
        b->nrecv, b->xor_allowed,       NULL};
    DCR_CHECK(dcr_coord_create(&coc, &parties, &b->coord));
    /* The control plane holds version 0 now: node processes restore it. */
    if (b->cfg->processes) {
        b->node_totals = calloc((size_t)b->serve.nodes, sizeof(*b->node_totals));
        if (!b->node_totals) return dcr_error_set(DCR_ENOMEM, "node totals");
        DCR_LOG_INFO("bench: starting %d rollout-node processes", b->serve.nodes);
        DCR_CHECK(b->cfg->processes->start(b->cfg->processes->ctx, b->workdir, chosen_control(b),
                                           b->wd.temp));
        b->started = true;
    }
    return DCR_OK;
}

static dcr_status_t setup(bench_t *b)
{
    b->serve = b->cfg->run.serve;
    dcr_scenario_spec_t spec = b->cfg->run.scenario;
    spec.align_extra = b->serve.tp;
    DCR_CHECK(dcr_scenario_create(&spec, &b->sc));
    DCR_CHECK(dcr_serve_config_validate(&b->sc->model, &b->serve));
    DCR_CHECK(dcr_serve_register_loaders());
    b->nc = dcr_inventory_count(b->sc->inventory);
    b->ns = (size_t)b->sc->layout->nshards;
    dcr_run_shape_t shape = {.canonical_copies = 1,
                             .shard_copies = 1, /* changed in place */
                             /* mode F keeps whole committed tensors instead */
                             .trackers = true,
                             .receivers = dcr_serve_receivers(&b->serve),
                             .serve_tp = b->serve.tp,
                             /* host receivers compare with the oracle in place;
                                the others against one dense receiver at a time */
                             .verifiers = b->cfg->verify && !host_receivers(b) ? 1 : 0,
                             .adamw = b->cfg->run.adamw,
                             .transient = true};
    dcr_memory_estimate_t est;
    dcr_scenario_estimate(b->sc, &shape, &est);
    b->memory_estimate = dcr_memory_estimate_total(&est);
    DCR_CHECK(dcr_memory_check("bench", &est, b->sc->max_memory));
    DCR_CHECK(make_workdir(b));
    DCR_CHECK(dcr_scenario_alloc_canonical(b->sc, &b->canonical));
    DCR_CHECK(dcr_scenario_alloc_shards(b->sc, &b->shards));
    DCR_LOG_INFO("bench: %s, %zu tensors, %lld bytes; %d owners, %d receivers on %d nodes",
                 b->sc->model.name, b->nc, (long long)dcr_inventory_bytes(b->sc->inventory),
                 b->sc->layout->world, dcr_serve_receivers(&b->serve), b->serve.nodes);
    if (b->cfg->run.init)
        DCR_CHECK(dcr_ckpt_init_canonical(b->sc, b->cfg->run.init, b->canonical));
    else
        dcr_scenario_init_weights(b->sc, b->cfg->run.seed, b->canonical);
    DCR_CHECK(
        dcr_megatron_import(&b->sc->model, &b->sc->train, b->sc->layout, b->canonical, b->shards));
    /* The committed canonical version is the export of the training shards:
     * an FP8 export re-quantizes the imported masters, so the initial weights
     * themselves are not what a full reload would load. */
    DCR_CHECK(
        dcr_megatron_export(&b->sc->model, &b->sc->train, b->sc->layout, b->shards, b->canonical));
    if (b->cfg->run.adamw)
        DCR_CHECK(
            dcr_adamw_create(b->sc, b->shards, b->cfg->run.lr, b->cfg->run.seed + 7, &b->adamw));
    DCR_LOG_INFO("bench: dense load and prewarm of the receivers");
    DCR_CHECK(make_receivers(b));
    DCR_LOG_INFO("bench: baselines, %s transport, work dir %s", b->cfg->run.transport, b->workdir);
    return make_parties(b);
}

static void teardown(bench_t *b)
{
    if (b->started) b->cfg->processes->stop(b->cfg->processes->ctx);
    free(b->node_totals);
    dcr_adamw_destroy(b->adamw);
    dcr_coord_destroy(b->coord);
    dcr_retainer_destroy(b->retainer);
    dcr_control_destroy(b->control);
    dcr_transport_destroy(b->transport);
    dcr_constructor_destroy(b->con);
    for (int i = 0; b->receivers && i < b->nrecv; i++) dcr_receiver_destroy(b->receivers[i]);
    free(b->receivers);
    free(b->xor_allowed);
    dcr_scenario_free_tensors(b->canonical, b->nc);
    dcr_scenario_free_tensors(b->shards, b->ns);
    dcr_scenario_destroy(b->sc);
    dcr_workdir_close(&b->wd);
    dcr_workdir_close(&b->control_wd);
}

/* ---- request emulation -------------------------------------------------------- */

/* Requests tag what they read with the refit in progress. */
static uint64_t reader_epoch(void *ctx, int slot)
{
    (void)slot;
    return (uint64_t)atomic_load(&((bench_t *)ctx)->epoch);
}

/* A request read receiver 0 through the gate; the gate must only ever let
 * it see P^v or P^{v+1}. */
static void reader_seen(void *ctx, int slot, uint64_t epoch, const uint8_t d[16])
{
    (void)slot;
    bench_t *b = ctx;
    pthread_mutex_lock(&b->seen_lock);
    if (b->nseen == b->cap_seen) {
        size_t cap = b->cap_seen ? 2 * b->cap_seen : 256;
        void *p = realloc(b->seen, cap * sizeof(*b->seen));
        if (p) {
            b->seen = p;
            b->cap_seen = cap;
        }
    }
    if (b->nseen < b->cap_seen) {
        b->seen[b->nseen].epoch = (int)epoch;
        memcpy(b->seen[b->nseen++].digest, d, 16);
    }
    pthread_mutex_unlock(&b->seen_lock);
}

static dcr_status_t start_readers(bench_t *b)
{
    pthread_mutex_init(&b->seen_lock, NULL);
    if (b->cfg->readers <= 0) return DCR_OK;
    static const int receiver0 = 0;
    dcr_readers_config_t rc = {dcr_coord_gate(b->coord),
                               b->cfg->readers,
                               &receiver0,
                               1,
                               500,
                               reader_epoch,
                               reader_seen,
                               b};
    return dcr_readers_start(&rc, &b->readers);
}

static void stop_readers(bench_t *b)
{
    dcr_readers_stop(b->readers);
    b->readers = NULL;
}

/* Checks the observations made during refit `epoch` against the digests of
 * receiver 0 before and after it, then forgets them. */
static void check_requests(bench_t *b, int epoch, const uint8_t before[16], const uint8_t after[16])
{
    pthread_mutex_lock(&b->seen_lock);
    size_t keep = 0;
    for (size_t i = 0; i < b->nseen; i++) {
        if (b->seen[i].epoch != epoch) {
            if (b->seen[i].epoch > epoch)
                b->seen[keep++] = b->seen[i]; /* between refits: not checked */
            continue;
        }
        b->requests++;
        if (memcmp(b->seen[i].digest, before, 16) && memcmp(b->seen[i].digest, after, 16))
            b->mismatches++;
    }
    b->nseen = keep;
    pthread_mutex_unlock(&b->seen_lock);
}

/* ---- reference ---------------------------------------------------------------- */

/* The seed's transport-only full-checkpoint reference: each training node
 * uploads its 1/N of the checkpoint, each rollout node downloads all of it,
 * over the same emulated links, or by the caller's hook (cfg->reference). */
static dcr_status_t reference(bench_t *b, const char *transport, double *seconds_p)
{
    int nodes = b->sc->train.nodes;
    int64_t total = dcr_inventory_bytes(b->sc->inventory);
    int64_t *share = calloc((size_t)nodes, sizeof(int64_t));
    if (!share) return dcr_error_set(DCR_ENOMEM, "reference shares");
    for (int i = 0; i < nodes; i++) share[i] = total / nodes + (i < total % nodes);
    if (b->cfg->reference && !strcmp(transport, "objstore")) {
        dcr_status_t st =
            b->cfg->reference(b->cfg->reference_ctx, share, nodes, b->serve.nodes, seconds_p);
        free(share);
        return st;
    }
    dcr_transport_t *t = NULL;
    dcr_status_t st = make_transport(b, transport, b->serve.nodes, &t);
    if (st == DCR_OK) st = dcr_transport_reference(t, share, seconds_p);
    dcr_transport_destroy(t);
    free(share);
    return st;
}

/* ---- refits ------------------------------------------------------------------- */

/* Every receiver compared bit for bit with what a dense load of the oracle
 * (the committed version, exported into the canonical tensors) would leave
 * in it, in place: no second receiver is built. */
static dcr_status_t verify_in_place(bench_t *b, bool *exact_p)
{
    *exact_p = true;
    for (int i = 0; i < b->nrecv; i++) {
        const char *param = NULL;
        int64_t elem = -1;
        bool equal = false;
        DCR_CHECK(dcr_receiver_compare_dense(b->receivers[i], b->canonical, &equal, &param, &elem));
        if (!equal) {
            DCR_LOG_ERROR("bench: receiver %d differs from the dense refit at %s[%lld]", i,
                          param ? param : "?", (long long)elem);
            *exact_p = false;
        }
    }
    return DCR_OK;
}

/* Every receiver against a dense refit of the committed version. Receivers
 * on host memory compare in place; on a device the host cannot address, one
 * fresh receiver per TP rank (receivers of one TP rank hold the same bits). */
static dcr_status_t verify(bench_t *b, bool *exact_p)
{
    DCR_CHECK(
        dcr_megatron_export(&b->sc->model, &b->sc->train, b->sc->layout, b->shards, b->canonical));
    if (host_receivers(b)) return verify_in_place(b, exact_p);
    *exact_p = true;
    for (int rank = 0; rank < b->serve.tp; rank++) {
        dcr_receiver_t *dense = NULL;
        DCR_CHECK(dcr_serve_receiver_create(&b->sc->model, b->sc->inventory, &b->serve, rank, NULL,
                                            &dense));
        dcr_status_t st = dcr_receiver_load_dense_all(dense, b->canonical);
        for (int i = 0; st == DCR_OK && i < b->nrecv; i++) {
            if (dcr_serve_tp_rank(&b->serve, i) != rank) continue;
            const char *param = NULL;
            int64_t elem = -1;
            if (!dcr_receiver_equal(b->receivers[i], dense, &param, &elem)) {
                DCR_LOG_ERROR("bench: receiver %d differs from the dense refit at %s[%lld]", i,
                              param ? param : "?", (long long)elem);
                *exact_p = false;
            }
        }
        dcr_receiver_destroy(dense);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

/* The lower bounds of the refit that built `version`, from the recorder. */
static dcr_status_t refit_bounds(uint64_t version, uint64_t since_ns, dcr_bench_refit_t *out)
{
    /* Only what ended after the step began can touch its window: the cost of
     * the copy and the sort stays that of one refit however long the run. */
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_trace_snapshot_since(since_ns, &iv, &n));
    dcr_bounds_t bounds;
    dcr_status_t st = dcr_bounds_compute(iv, n, (uint32_t)version, &bounds);
    for (size_t i = 0; i < n; i++) out->intervals += iv[i].refit == (uint32_t)version;
    free(iv);
    DCR_CHECK(st);
    out->construction_lb_s = bounds.construction_lb_s;
    out->transport_lb_s = bounds.transport_lb_s;
    out->bound_finalization_s = bounds.finalization_s;
    out->remainder_s = bounds.remainder_s;
    out->traced = true;
    return DCR_OK;
}

/* Whether timed refit i is recorded: every one, or with trace_overhead the
 * pattern on, off, off, on (repeated), which cancels a linear drift. */
static bool refit_traced(const dcr_bench_config_t *cfg, int i)
{
    return !cfg->trace_overhead || i % 4 == 0 || i % 4 == 3;
}

/* CPU seconds the rollout-node processes reported so far (0 in one process). */
static double nodes_cpu(bench_t *b)
{
    double sum = 0;
    for (int n = 0; b->node_totals && n < b->serve.nodes; n++) {
        dcr_node_report_t r;
        if (dcr_node_report_get(b->control, n, &r) == DCR_OK)
            dcr_node_totals_update(&b->node_totals[n], &r);
        sum += b->node_totals[n].cpu_base + b->node_totals[n].cpu_last;
    }
    return sum;
}

/* CPU seconds the owner processes reported so far (0 with owners here). */
static double owners_cpu(bench_t *b)
{
    dcr_owners_report_t r;
    if (!b->cfg->processes || !b->cfg->processes->owners ||
        dcr_owners_report_get(b->control, &r) != DCR_OK)
        return 0;
    return r.cpu_s;
}

/* Node processes: the verifier process checks every timed refit's version
 * (refit i of the run commits version i + 1). */
static dcr_status_t verify_processes(bench_t *b, dcr_bench_result_t *res)
{
    if (!b->cfg->verify || res->nrefits == 0) return DCR_OK;
    uint64_t first = (uint64_t)b->cfg->warmup + 1, last = first + (uint64_t)res->nrefits - 1;
    bool *ok = calloc((size_t)res->nrefits, sizeof(bool));
    if (!ok) return dcr_error_set(DCR_ENOMEM, "verification table");
    DCR_LOG_INFO("bench: verifier process for versions %llu..%llu", (unsigned long long)first,
                 (unsigned long long)last);
    dcr_status_t st =
        b->cfg->processes->verify(b->cfg->processes->ctx, b->workdir, first, last, ok);
    for (int i = 0; st == DCR_OK && i < res->nrefits; i++) {
        res->refits[i].verified = true;
        res->refits[i].bit_exact = ok[i];
    }
    free(ok);
    return st;
}

/* Waits for the running retention (if any); its cost goes to the refit
 * that committed, with the time this wait blocked. */
static dcr_status_t retain_join(bench_t *b)
{
    if (!b->retainer) return DCR_OK;
    dcr_retain_stats_t stats;
    double wait_s = 0;
    bool ran = false;
    DCR_CHECK(dcr_retainer_join(b->retainer, &stats, &wait_s, &ran));
    if (ran && b->retain_out) {
        b->retain_out->retain_bytes = (int64_t)stats.bytes;
        b->retain_out->retain_s = stats.seconds;
        b->retain_out->retain_wait_s = wait_s;
    }
    b->retain_out = NULL;
    return DCR_OK;
}

/* The commit record of r is durable: copy the version's payloads in the
 * background, outside the window. */
static dcr_status_t retain_start(bench_t *b, const dcr_refit_result_t *r, dcr_bench_refit_t *out)
{
    /* one_refit joined the previous copy before this refit began. */
    b->retain_out = out;
    /* With the owners here: the committed run's records go with the copy
     * as the version's repair set (none with owner processes: they store
     * their own parts). */
    dcr_repair_records_t *set = NULL;
    if (b->con) dcr_constructor_take_repair(b->con, &set);
    dcr_construct_config_t cc = dcr_run_construct_config(&b->cfg->run, b->sc);
    return dcr_retainer_start_repair(b->retainer, r->tau, r->version, set, &cc,
                                     b->sc->layout->world);
}

/* The caller's store's CPU seconds so far (dcr_bench_config_t.store_cpu_s), -1 when unknown. */
static double store_cpu(const bench_t *b)
{
    return b->cfg->store_cpu_s ? b->cfg->store_cpu_s(b->cfg->store_cpu_ctx) : -1.0;
}

static dcr_status_t one_refit(bench_t *b, int step, bool timed, dcr_bench_refit_t *out)
{
    bool traced = !timed || refit_traced(b->cfg, step - b->cfg->warmup);
    uint64_t wall0 = dcr_clock_ns();
    int64_t injected = 0;
    DCR_CHECK(dcr_scenario_step(b->sc, b->adamw, b->cfg->run.profile, b->cfg->run.change_rate,
                                dcr_scenario_step_seed(b->cfg->run.seed, (uint64_t)step), b->shards,
                                b->canonical, &injected));
    uint8_t before[16], after[16];
    if (b->readers) dcr_receiver_digest(b->receivers[0], before);
    atomic_store(&b->epoch, step + 1);
    dcr_refit_result_t r;
    double cpu0[DCR_THREAD_ROLES], cpu1[DCR_THREAD_ROLES];
    dcr_thread_cpu(cpu0);
    double nodes_cpu0 = nodes_cpu(b), owners_cpu0 = owners_cpu(b);
    /* The next attempt clears the last committed one's payloads. */
    DCR_CHECK(retain_join(b));
    dcr_trace_enable(traced);
    const dcr_bench_processes_t *procs = b->cfg->processes;
    double store0 = store_cpu(b);
    dcr_status_t st = procs && procs->refit ? procs->refit(procs->ctx, &r)
                                            : dcr_coord_refit(b->coord, b->shards, &r);
    double store1 = store_cpu(b);
    dcr_trace_enable(true);
    dcr_thread_cpu(cpu1);
    if (b->readers) {
        /* Observations tagged with this refit were made before, during or
         * just after it: each must be P^v or P^{v+1}. */
        atomic_store(&b->epoch, 0);
        dcr_receiver_digest(b->receivers[0], after);
        check_requests(b, step + 1, before, after);
    }
    DCR_CHECK(st);
    memset(out, 0, sizeof(*out));
    /* The commit record is durable: keep the version's payloads before the
     * next attempt opens and clears them (after the window, never in it). */
    if (b->retainer) DCR_CHECK(retain_start(b, &r, timed ? out : NULL));
    out->latency_s = r.latency_s;
    out->construction_s = r.construct.construction_s;
    out->finalization_s = r.finalization_s;
    out->payload_bytes = r.payload_bytes;
    out->cross_bytes = r.cross_bytes;
    out->raw_changed_value_bytes = r.construct.raw_changed_value_bytes;
    out->changed_elements = r.construct.changed_elements;
    out->records = r.construct.records;
    out->payloads = r.construct.payloads;
    out->attempts = r.attempts;
    out->bit_exact = true;
    for (int k = 0; k < DCR_THREAD_ROLES; k++) out->cpu_s[k] = cpu1[k] - cpu0[k];
    if (store0 >= 0 && store1 >= store0) out->store_cpu_s = store1 - store0;
    /* Node processes: their whole CPU between the refit's ends, as they report it. */
    if (b->cfg->processes) out->cpu_s[DCR_THREAD_NODE] = nodes_cpu(b) - nodes_cpu0;
    /* Owner processes: their whole CPU between their reports before and after. */
    if (b->cfg->processes && b->cfg->processes->owners)
        out->cpu_s[DCR_THREAD_OWNER] = owners_cpu(b) - owners_cpu0;
    /* Node processes' intervals join this process's trace (one host, one clock). */
    if (traced && b->cfg->processes)
        DCR_CHECK(dcr_rundir_trace_import(b->workdir, b->serve.nodes, r.tau));
    if (traced) DCR_CHECK(refit_bounds(r.version, wall0, out));
    if (!b->cfg->keep_trace) dcr_trace_discard_before(dcr_clock_ns());
    if (timed && b->cfg->verify && !b->cfg->processes) {
        DCR_CHECK(verify(b, &out->bit_exact));
        out->verified = true;
    }
    if (timed && b->cfg->after_refit)
        DCR_CHECK(b->cfg->after_refit(b->cfg->after_refit_ctx, r.version, b->receivers, b->nrecv));
    out->wall_s = (double)(dcr_clock_ns() - wall0) * 1e-9;
#ifdef __GLIBC__
    /* Outside the timed window: the refit's freed buffers (payloads, staging,
     * the threads' arenas) go back to the system instead of piling up as
     * resident memory nothing uses between refits. */
    malloc_trim(0);
#endif
    out->rss_bytes = dcr_rss_bytes();
    DCR_LOG_INFO("bench: %s refit %d: %.3f s, %lld payload bytes, %s", timed ? "timed" : "warm-up",
                 step + 1, r.latency_s, (long long)r.payload_bytes,
                 out->verified ? (out->bit_exact ? "bit-exact" : "MISMATCH") : "not checked");
    return DCR_OK;
}

/* Mean latency and intervals of the refits recorded (on) or not. */
static void summarize_overhead(dcr_bench_result_t *res)
{
    double lat[2] = {0, 0}, intervals = 0;
    int count[2] = {0, 0};
    for (int i = 0; i < res->nrefits; i++) {
        int on = res->refits[i].traced;
        lat[on] += res->refits[i].latency_s;
        count[on]++;
        intervals += (double)res->refits[i].intervals;
    }
    res->overhead.refits_on = count[1];
    res->overhead.refits_off = count[0];
    res->overhead.latency_on_s = count[1] ? lat[1] / count[1] : 0;
    res->overhead.latency_off_s = count[0] ? lat[0] / count[0] : 0;
    res->overhead.intervals_per_refit = count[1] ? intervals / count[1] : 0;
}

void dcr_bench_result_means(dcr_bench_result_t *res)
{
    double lat = 0, pay = 0, cross = 0, raw = 0, clb = 0, tlb = 0, fin = 0;
    int traced = 0;
    memset(res->cpu_mean_s, 0, sizeof(res->cpu_mean_s));
    res->store_cpu_mean_s = 0;
    res->bit_exact = true;
    for (int i = 0; i < res->nrefits; i++) {
        traced += res->refits[i].traced;
        clb += res->refits[i].construction_lb_s;
        tlb += res->refits[i].transport_lb_s;
        fin += res->refits[i].bound_finalization_s;
        lat += res->refits[i].latency_s;
        pay += (double)res->refits[i].payload_bytes;
        cross += (double)res->refits[i].cross_bytes;
        raw += (double)res->refits[i].raw_changed_value_bytes;
        res->bit_exact &= res->refits[i].bit_exact;
        for (int k = 0; k < DCR_THREAD_ROLES; k++)
            res->cpu_mean_s[k] += res->refits[i].cpu_s[k] / res->nrefits;
        res->store_cpu_mean_s += res->refits[i].store_cpu_s / res->nrefits;
    }
    int n = res->nrefits > 0 ? res->nrefits : 1, nt = traced > 0 ? traced : 1;
    res->mean_latency_s = lat / n;
    res->construction_lb_mean_s = clb / nt;
    res->transport_lb_mean_s = tlb / nt;
    res->finalization_mean_s = fin / nt;
    summarize_overhead(res);
    res->payload_bytes_mean = pay / n;
    res->cross_bytes_mean = cross / n;
    res->raw_changed_value_bytes_mean = raw / n;
    res->speedup = res->mean_latency_s > 0 ? res->reference_s / res->mean_latency_s : 0;
}

static void summarize(const bench_t *b, dcr_bench_result_t *res)
{
    dcr_bench_result_means(res);
    res->store_cpu_measured = b->cfg->store_cpu_s != NULL;
    res->checkpoint_bytes = dcr_inventory_bytes(b->sc->inventory);
    res->receivers = b->nrecv;
    res->requests = b->requests;
    res->request_mismatches = b->mismatches;
    res->owners = b->sc->layout->world;
    /* With --processes the receivers live in the rollout-node processes:
     * their refusals come from the work folder (gather_refusals). */
    for (int i = 0; b->receivers && i < b->nrecv; i++) {
        if (!b->receivers[i]) continue;
        dcr_receiver_stats_t rs;
        dcr_receiver_stats(b->receivers[i], &rs);
        res->payloads_rejected += (int64_t)rs.rejected;
        res->payloads_unauthenticated += (int64_t)rs.unauthenticated;
    }
    dcr_transport_counters_t tcount;
    dcr_transport_counters(b->transport, &tcount);
    res->payloads_rejected += tcount.rejected;
    res->payloads_unauthenticated += tcount.unauthenticated;
    res->memory_estimate_bytes = b->memory_estimate;
    res->peak_rss_bytes = dcr_peak_rss_bytes();
    res->workdir_in_memory = b->workdir_in_memory;
    for (size_t c = 0; c < b->nc; c++) {
        res->xor_tensors += b->xor_allowed[c] != 0;
        res->overwrite_tensors += b->xor_allowed[c] == 0;
    }
}

/* Node processes: what their receivers and transport handles refused, as
 * each wrote it at its last report (workloads/harness/refusals.h). */
static dcr_status_t gather_refusals(const bench_t *b, dcr_bench_result_t *res)
{
    dcr_refusals_t r;
    DCR_CHECK(dcr_refusals_totals(b->workdir, &r));
    res->payloads_rejected += (int64_t)r.rejected;
    res->payloads_unauthenticated += (int64_t)r.unauthenticated;
    return DCR_OK;
}

/* Nanoseconds one span (begin and end) costs this thread with recording on;
 * leaves the recorder reset. */
static double span_cost_ns(void)
{
    enum { SPANS = 200000 };
    dcr_trace_reset();
    dcr_trace_enable(true);
    uint64_t t0 = dcr_clock_ns();
    for (int i = 0; i < SPANS; i++) {
        dcr_trace_span_t s = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, 0);
        dcr_trace_end(&s);
    }
    uint64_t t1 = dcr_clock_ns();
    dcr_trace_reset();
    return (double)(t1 - t0) / SPANS;
}

dcr_status_t dcr_bench_config_check(const dcr_bench_config_t *cfg, bool process_roles)
{
    if (cfg->warmup < 0 || cfg->refits < 1)
        return dcr_error_set(DCR_EINVAL, "bench needs >= 1 timed refit");
    if (process_roles && cfg->readers > 0)
        return dcr_error_set(DCR_EINVAL,
                             "--processes needs --rl sync, without --readers (got %s, %d readers)",
                             dcr_rl_mode_name(cfg->run.rl), cfg->readers);
    DCR_CHECK(dcr_run_config_check(&cfg->run, process_roles));
    if (cfg->keep_payloads && strcmp(cfg->run.transport, "objstore"))
        return dcr_error_set(
            DCR_EINVAL, "--keep-payloads needs --transport objstore (the relay keeps nothing)");
    if (cfg->trace_overhead && cfg->refits < 4)
        return dcr_error_set(DCR_EINVAL,
                             "--trace-overhead needs at least 4 timed refits (--refits), got %d",
                             cfg->refits);
    return DCR_OK;
}

dcr_status_t dcr_bench_run(const dcr_bench_config_t *cfg, dcr_bench_result_t *out_p)
{
    DCR_CHECK(dcr_bench_config_check(cfg, cfg->processes != NULL));
    bench_t b;
    memset(&b, 0, sizeof(b));
    b.cfg = cfg;
    dcr_trace_reset();
    dcr_trace_enable(true);
    dcr_bench_result_t res;
    memset(&res, 0, sizeof(res));
    if (cfg->trace_overhead) res.overhead.span_ns = span_cost_ns();
    dcr_status_t st = setup(&b);
    if (st == DCR_OK) st = dcr_interrupt_check("bench");
    if (st == DCR_OK) {
        DCR_LOG_INFO("bench: full-checkpoint reference over the object store");
        st = reference(&b, "objstore", &res.reference_s);
    }
    if (st == DCR_OK) st = dcr_interrupt_check("bench");
    if (st == DCR_OK && !strcmp(cfg->run.transport, "relay")) {
        DCR_LOG_INFO("bench: full-checkpoint reference through the relay tree");
        st = reference(&b, "relay", &res.relay_reference_s);
    }
    if (st == DCR_OK) st = start_readers(&b);
    res.refits = calloc((size_t)cfg->refits, sizeof(dcr_bench_refit_t));
    if (st == DCR_OK && !res.refits) st = dcr_error_set(DCR_ENOMEM, "refit table");
    for (int i = 0; st == DCR_OK && i < cfg->warmup + cfg->refits; i++) {
        dcr_bench_refit_t warm;
        bool timed = i >= cfg->warmup;
        /* Between refits is the safe point for a stop signal. */
        st = dcr_interrupt_check("bench");
        if (st != DCR_OK) break;
        st = one_refit(&b, i, timed, timed ? &res.refits[i - cfg->warmup] : &warm);
        if (st == DCR_OK && timed) res.nrefits++;
    }
    stop_readers(&b);
    dcr_status_t rst = retain_join(&b);
    if (st == DCR_OK) st = rst;
    if (st == DCR_OK && cfg->processes) st = verify_processes(&b, &res);
    /* A node restarted after the last commit may still be restoring: its
     * line may come too late for these totals. */
    if (st == DCR_OK && cfg->processes)
        st = dcr_restore_totals(b.workdir, res.restores_by_kind, res.restore_bytes,
                                res.restore_dense_bytes, res.restore_s);
    if (st == DCR_OK) summarize(&b, &res);
    if (st == DCR_OK && cfg->processes) st = gather_refusals(&b, &res);
    res.node_processes = cfg->processes ? b.serve.nodes : 0;
    teardown(&b);
    free(b.seen);
    pthread_mutex_destroy(&b.seen_lock);
    if (st != DCR_OK) {
        free(res.refits);
        return st;
    }
    *out_p = res;
    return DCR_OK;
}

void dcr_bench_result_free(dcr_bench_result_t *r)
{
    if (r) free(r->refits);
}

/* ---- interleaved A/B (dcr bench --ab) ---------------------------------------- */

dcr_status_t dcr_bench_ab_check(const dcr_bench_config_t *a, const dcr_bench_config_t *b)
{
    return dcr_bench_ab_check_as("--ab", a, b);
}

dcr_status_t dcr_bench_ab_check_as(const char *flag, const dcr_bench_config_t *a,
                                   const dcr_bench_config_t *b)
{
    const dcr_bench_config_t *side[2] = {a, b};
    if (a->warmup != b->warmup || a->refits != b->refits)
        return dcr_error_set(DCR_EINVAL, "%s: both sides take the same --warmup and --refits",
                             flag);
    for (int s = 0; s < 2; s++) {
        const dcr_bench_config_t *c = side[s];
        if (c->processes || c->reference)
            return dcr_error_set(DCR_EINVAL,
                                 "%s runs each side in one process: not with "
                                 "--processes or --testbed",
                                 flag);
        if (c->readers > 0) return dcr_error_set(DCR_EINVAL, "%s does not take --readers", flag);
        if (c->trace_overhead)
            return dcr_error_set(DCR_EINVAL, "%s does not take --trace-overhead", flag);
        if (c->keep_trace)
            return dcr_error_set(DCR_EINVAL, "%s keeps no stage trace (drop --trace)", flag);
        if (c->run.workdir || c->run.control_path || c->run.store)
            return dcr_error_set(DCR_EINVAL,
                                 "%s: each side makes its own temporary work folder, control "
                                 "plane and store: drop --workdir, --keep-payloads, --control "
                                 "and --store",
                                 flag);
    }
    return DCR_OK;
}

/* ---- a bench set up for refits one at a time (bench.h, dcr_bench_session) ---- */

struct dcr_bench_session {
    bench_t b;
};

bool dcr_bench_session_workdir_in_memory(const dcr_bench_session_t *s)
{
    return s->b.workdir_in_memory;
}

dcr_status_t dcr_bench_session_create(const dcr_bench_config_t *cfg, dcr_bench_session_t **out_p)
{
    DCR_CHECK(dcr_bench_config_check(cfg, false));
    if (cfg->processes || cfg->reference || cfg->readers > 0)
        return dcr_error_set(DCR_EINVAL, "a bench session runs every role in this process, "
                                         "without request readers");
    dcr_bench_session_t *s = calloc(1, sizeof(*s));
    if (!s) return dcr_error_set(DCR_ENOMEM, "bench session");
    s->b.cfg = cfg;
    pthread_mutex_init(&s->b.seen_lock, NULL);
    dcr_status_t st = setup(&s->b);
    if (st != DCR_OK) {
        dcr_bench_session_destroy(s);
        return st;
    }
    *out_p = s;
    return DCR_OK;
}

dcr_status_t dcr_bench_session_refit(dcr_bench_session_t *s, int step, bool timed,
                                     dcr_bench_refit_t *out)
{
    DCR_CHECK(dcr_interrupt_check("bench"));
    return one_refit(&s->b, step, timed, out);
}

dcr_status_t dcr_bench_session_finish(dcr_bench_session_t *s, dcr_bench_result_t *res)
{
    DCR_CHECK(retain_join(&s->b));
    summarize(&s->b, res);
    return DCR_OK;
}

void dcr_bench_session_destroy(dcr_bench_session_t *s)
{
    if (!s) return;
    teardown(&s->b);
    free(s->b.seen);
    pthread_mutex_destroy(&s->b.seen_lock);
    free(s);
}

dcr_status_t dcr_bench_run_ab(const dcr_bench_config_t *a, const dcr_bench_config_t *bcfg,
                              dcr_bench_result_t out[2])
{
    DCR_CHECK(dcr_bench_config_check(a, false));
    DCR_CHECK(dcr_bench_config_check(bcfg, false));
    DCR_CHECK(dcr_bench_ab_check(a, bcfg));
    dcr_trace_reset();
    dcr_trace_enable(true);
    dcr_bench_side_t *side[2] = {NULL, NULL};
    const dcr_bench_config_t *cfg[2] = {a, bcfg};
    dcr_status_t st = DCR_OK;
    for (int s = 0; st == DCR_OK && s < 2; s++) {
        DCR_LOG_INFO("bench --ab: setting up side %c", 'A' + s);
        st = dcr_bench_side_local(cfg[s], &side[s]);
    }
    if (st == DCR_OK) st = dcr_bench_ab_alternate(side, a->warmup, a->refits, out);
    dcr_bench_side_destroy(side[0]);
    dcr_bench_side_destroy(side[1]);
    return st;
}
