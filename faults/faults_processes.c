/* dcr faults train|campaign --processes: refits with the rollout nodes as
 * processes of this host, real SIGKILLs aimed at points of the refit, the
 * restarted processes restoring from their resident files or the retained
 * versions (else by dense refit), and a verifier process comparing every
 * committed version (faults/faults_run.h). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/rollout_node.h"
#include "faults/faults_run.h"
#include "workloads/interrupt.h"
#include "workloads/retainer.h"
#include "workloads/roles/restore.h"
#include "workloads/roles/launch.h"
#include "workloads/roles/roles.h"
#include "workloads/roles/world.h"
#include "workloads/serve/vllm_layout.h"
#include "workloads/workdir.h"

#define WATCH_POLL_NS  1000000L /* the watcher's look at the aimed node */
#define REPORT_WAIT_MS 10000    /* a kill waits this long for the death to be reported */
#define DIGEST_WAIT_MS 10000    /* corrupt_digest: for version 1's first digests file */

const char *dcr_faults_kill_point_name(dcr_faults_kill_point_t point)
{
    static const char *const names[DCR_FAULTS_KILL_POINTS] = {"delivery", "apply", "acked",
                                                              "coordinator"};
    return point >= 0 && point < DCR_FAULTS_KILL_POINTS ? names[point] : "?";
}

bool dcr_fault_kind_reaches_processes(dcr_fault_kind_t kind)
{
    switch (kind) {
    case DCR_FAULT_DROP:
    case DCR_FAULT_REORDER:
    case DCR_FAULT_CORRUPT:
    case DCR_FAULT_TRUNCATE_OBJECT:
    case DCR_FAULT_REMOVE_OBJECT:
    case DCR_FAULT_OWNER_CRASH:
    case DCR_FAULT_CONTROL_BUSY:
    case DCR_FAULT_CONTROL_DOWN:
    case DCR_FAULT_COMMIT_REPLY:
    case DCR_FAULT_COORD_CRASH:
        return true;
    default: /* inside a node process, on the relay, or a simulated receiver death */
        return false;
    }
}

/* The kill armed now (under kill_lock). */
typedef struct aimed {
    bool armed;
    dcr_faults_kill_point_t point;
    int node;
    uint64_t after_tau; /* only attempts prepared after arming count */
    uint64_t seen_tau;  /* delivery: the attempt whose JOINED the watcher saw first */
    int64_t bytes0;     /* delivery: the owners' payload bytes then */
} aimed_t;

typedef struct prun {
    const dcr_faults_processes_config_t *cfg;
    const dcr_bench_config_t *b;
    dcr_role_world_t *world; /* the owners' weights: world->shards hold world->version */
    int nrecv, nodes;
    uint8_t *xor_allowed;
    dcr_constructor_t *con;
    dcr_transport_t *transport;
    dcr_control_t *control;
    dcr_coord_t *coord;
    dcr_faults_t *faults;
    dcr_role_launcher_t *launcher;
    bool started; /* node processes */
    dcr_workdir_t wd;
    char id[96];
    int incarnation;
    uint64_t version;         /* committed, as the owners' baselines hold it */
    bool resume;              /* the last transition stopped: the next one is all overwrites */
    dcr_retainer_t *retainer; /* committed versions kept for replay (--retain K) */
    /* kills */
    pthread_mutex_t kill_lock;
    aimed_t aim;
    uint64_t acked_tau; /* the last attempt whose ACK step the coordinator entered */
    int by_point[DCR_FAULTS_KILL_POINTS];
    aimed_t *kills; /* the schedule: nkills, due so far, the next to arm */
    int nkills, due, next;
    dcr_control_t *watch_control; /* the watcher's own handle: faults act on the coordinator's */
    pthread_t watcher;
    bool watching;
    atomic_bool watch_stop;
} prun_t;

static void nap_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* ---- kills ------------------------------------------------------------------ */

/* Sends the armed kill to its node's process `pid` and returns once the
 * death is reported in the control plane; the arm is spent when the signal
 * went out. All under kill_lock, which the coordinator's ACK step takes
 * too: a watcher's kill is reported before the coordinator checks that
 * every node is still done, and one the watcher would send after that
 * check (between it and the commit) is not sent. */
static void fire(prun_t *r, const aimed_t *k, int pid, uint64_t tau, bool watcher)
{
    pthread_mutex_lock(&r->kill_lock);
    bool late = watcher && tau <= r->acked_tau;
    bool sent = !late && r->aim.armed &&
                dcr_role_launcher_kill_node(r->launcher, k->node, pid, REPORT_WAIT_MS);
    if (sent) {
        r->aim.armed = false;
        r->by_point[k->point]++;
    }
    pthread_mutex_unlock(&r->kill_lock);
    if (sent)
        DCR_LOG_WARN("faults: SIGKILL to rollout-node %d (pid %d) at %s of attempt %" PRIu64,
                     k->node, pid, dcr_faults_kill_point_name(k->point), tau);
}

/* The watcher's look at a delivery or apply kill's node. */
static void watch_once(prun_t *r)
{
    pthread_mutex_lock(&r->kill_lock);
    aimed_t k = r->aim;
    pthread_mutex_unlock(&r->kill_lock);
    if (!k.armed || k.point > DCR_FAULTS_KILL_APPLY) return;
    int pid = dcr_role_launcher_node_pid(r->launcher, k.node);
    dcr_node_report_t rep;
    if (pid <= 0 || dcr_node_report_get(r->watch_control, k.node, &rep) != DCR_OK ||
        rep.pid != (int32_t)pid || rep.phase != DCR_NODE_JOINED || rep.tau <= k.after_tau)
        return;
    if (k.point == DCR_FAULTS_KILL_DELIVERY) {
        /* Mid-delivery: the owners have published a payload of this attempt
         * since the node joined it. */
        dcr_transport_counters_t tc;
        dcr_transport_counters(r->transport, &tc);
        if (k.seen_tau != rep.tau) {
            pthread_mutex_lock(&r->kill_lock);
            r->aim.seen_tau = rep.tau;
            r->aim.bytes0 = tc.payload_bytes;
            pthread_mutex_unlock(&r->kill_lock);
            return;
        }
        if (tc.payload_bytes <= k.bytes0) return;
    } else {
        char path[4300];
        dcr_role_apply_marker_path(r->wd.path, k.node, rep.tau, path, sizeof(path));
        if (access(path, F_OK) != 0) return;
    }
    fire(r, &k, pid, rep.tau, true);
}

static void *watch_main(void *arg)
{
    prun_t *r = arg;
    while (!atomic_load(&r->watch_stop)) {
        watch_once(r);
        nap_ns(WATCH_POLL_NS);
    }
    return NULL;
}

/* The kill schedule, drawn from the seed before the first step so that it
 * does not depend on timing: one kill (point, node) every kill_every steps. */
static dcr_status_t draw_kills(prun_t *r)
{
    int every = r->cfg->run.kill_every;
    r->nkills = every > 0 ? r->cfg->run.steps / every : 0;
    r->kills = calloc(r->nkills > 0 ? (size_t)r->nkills : 1, sizeof(aimed_t));
    if (!r->kills) return dcr_error_set(DCR_ENOMEM, "%d kills", r->nkills);
    dcr_rng_t *rng = dcr_faults_rng(r->faults);
    for (int i = 0; i < r->nkills; i++) {
        r->kills[i].armed = true;
        r->kills[i].point = (dcr_faults_kill_point_t)dcr_rng_below(rng, DCR_FAULTS_KILL_ACKED + 1);
        r->kills[i].node = (int)dcr_rng_below(rng, (uint64_t)r->nodes);
    }
    return DCR_OK;
}

/* A kill falls due every kill_every steps; the next due one is armed once
 * the one before has fired (it stays armed across attempts and steps until
 * it does), for attempts prepared from now on. */
static void arm_kill(prun_t *r, int step)
{
    int every = r->cfg->run.kill_every;
    if (every > 0 && (step + 1) % every == 0 && r->due < r->nkills) r->due++;
    pthread_mutex_lock(&r->kill_lock);
    bool busy = r->aim.armed;
    pthread_mutex_unlock(&r->kill_lock);
    if (busy || r->next >= r->due) return;
    aimed_t k = r->kills[r->next++];
    dcr_control_attempt_t a;
    if (dcr_control_attempt(r->control, 0, &a) == DCR_OK) k.after_tau = a.tau;
    pthread_mutex_lock(&r->kill_lock);
    r->aim = k;
    pthread_mutex_unlock(&r->kill_lock);
    DCR_LOG_INFO("faults: step %d: a SIGKILL to rollout-node %d armed at %s", step + 1, k.node,
                 dcr_faults_kill_point_name(k.point));
}

/* ---- setup ------------------------------------------------------------------ */

/* The XOR policy from a probe of every slot's loader (shape only): the
 * receivers themselves live in the node processes. */
static dcr_status_t make_policy(prun_t *r)
{
    const dcr_scenario_t *sc = r->world->sc;
    size_t nc = r->world->nc;
    r->xor_allowed = calloc(nc + 1, 1);
    dcr_receiver_t **probe = calloc((size_t)r->nrecv, sizeof(*probe));
    dcr_status_t st = r->xor_allowed && probe ? DCR_OK : dcr_error_set(DCR_ENOMEM, "XOR policy");
    dcr_receiver_config_t base = {.shape_only = true};
    for (int i = 0; st == DCR_OK && i < r->nrecv; i++) {
        st = dcr_serve_receiver_create(&sc->model, sc->inventory, &r->world->serve, i, &base,
                                       &probe[i]);
        if (st == DCR_OK) st = dcr_receiver_prewarm(probe[i]);
    }
    for (size_t c = 0; st == DCR_OK && c < nc; c++)
        r->xor_allowed[c] = r->b->mode == DCR_MODE_X && dcr_serve_xor_allowed(probe, r->nrecv, c);
    for (int i = 0; probe && i < r->nrecv; i++) dcr_receiver_destroy(probe[i]);
    free(probe);
    return st;
}

static dcr_status_t start_coordinator(prun_t *r)
{
    char id[128];
    snprintf(id, sizeof(id), "%s-c%d", r->id, ++r->incarnation);
    dcr_coord_config_t cc = dcr_coord_config_default(id, r->world->serve.gpus_per_node);
    cc.rl = DCR_RL_SYNC;
    cc.remote_nodes = true;
    cc.max_attempts = r->cfg->run.max_attempts;
    cc.deadline_ms = r->cfg->run.deadline_ms;
    dcr_coord_parties_t parties = {r->con,         r->world->sc->layout->world,
                                   r->transport,   r->control,
                                   NULL,           r->nrecv,
                                   r->xor_allowed, NULL};
    return dcr_coord_create(&cc, &parties, &r->coord);
}

static dcr_status_t make_parties(prun_t *r)
{
    const dcr_bench_config_t *b = r->b;
    const dcr_scenario_t *sc = r->world->sc;
    dcr_construct_config_t cc = dcr_construct_config_default();
    cc.mode = b->mode;
    cc.shuffle = b->shuffle;
    cc.payload_key = b->payload_key;
    dcr_bench_targets(b, dcr_inventory_bytes(sc->inventory), sc->layout->world, &cc.chunk_bytes,
                      &cc.bucket_bytes);
    DCR_CHECK(dcr_constructor_create(sc->layout, &cc, r->world->shards, &r->con));
    /* The owners' handle over the store the node processes open too, and
     * the coordinator's control plane, both wrapped by faulty backends
     * (faults.h): the faults of this process act there. */
    DCR_CHECK(dcr_faults_create(b->seed, &r->faults));
    DCR_CHECK(dcr_faults_bind(r->faults));
    char db[4200];
    dcr_role_control_path(r->wd.path, db, sizeof(db));
    /* The run's clearing handle (this process is the coordinator). */
    dcr_role_handle_t as = {.backend = "faulty:objstore"};
    dcr_status_t st = dcr_role_transport_open_as(b, r->wd.path, sc->train.nodes, sc->layout->world,
                                                 1, &as, &r->transport);
    if (st == DCR_OK)
        st = dcr_bench_control_open_as("faulty:", b->control_path, db, r->id, &r->control);
    dcr_faults_unbind(r->faults);
    DCR_CHECK(st);
    /* Retention as dcr bench runs it (workloads/retainer.h), on the store's
     * own files rather than through the faulty backend: a restarted or
     * lagging node replays what it keeps (workloads/roles/restore.h). */
    char dir[4200];
    dcr_role_objstore_dir(r->wd.path, dir, sizeof(dir));
    DCR_CHECK(dcr_retainer_create(dir, NULL, b->retain > 0 ? b->retain : DCR_RETAIN_DEFAULT,
                                  &r->retainer));
    if (dcr_bench_control_is_etcd(b->control_path)) {
        char url[1024];
        DCR_CHECK(dcr_bench_control_url(b->control_path, r->id, url, sizeof(url)));
        DCR_CHECK(dcr_role_control_url_write(r->wd.path, url));
    }
    return start_coordinator(r);
}

/* The node processes (after the control plane holds version 0), with the
 * apply markers on, and the watcher. */
static dcr_status_t start_nodes(prun_t *r)
{
    DCR_CHECK(dcr_role_kill_points_create(r->wd.path));
    DCR_CHECK(dcr_role_launcher_create(r->b, r->cfg->run_args, r->cfg->nargs, &r->launcher));
    dcr_role_launcher_set_restart(r->launcher, true);
    const dcr_bench_processes_t *h = dcr_role_launcher_hooks(r->launcher);
    r->started = true;
    DCR_CHECK(h->start(h->ctx, r->wd.path, r->wd.temp));
    DCR_CHECK(dcr_role_control_open(r->b, r->wd.path, &r->watch_control));
    r->watching = pthread_create(&r->watcher, NULL, watch_main, r) == 0;
    if (!r->watching) return dcr_error_set(DCR_EIO, "cannot start the kill watcher thread");
    return DCR_OK;
}

static dcr_status_t setup(prun_t *r)
{
    snprintf(r->id, sizeof(r->id), "faults-%d-%" PRIu64 "-%llu", (int)getpid(), r->b->seed,
             (unsigned long long)dcr_clock_ns());
    DCR_CHECK(dcr_role_world_create(r->b, &r->world));
    r->nodes = r->world->serve.nodes;
    r->nrecv = dcr_serve_receivers(&r->world->serve);
    DCR_CHECK(dcr_workdir_open(r->b->workdir_flag ? r->b->workdir_flag : "--workdir", r->b->workdir,
                               "dcr-faults", &r->wd));
    DCR_CHECK(make_policy(r));
    DCR_CHECK(make_parties(r));
    DCR_CHECK(draw_kills(r));
    return start_nodes(r);
}

static void stop_watcher(prun_t *r)
{
    atomic_store(&r->watch_stop, true);
    if (r->watching) pthread_join(r->watcher, NULL);
    r->watching = false;
}

static void teardown(prun_t *r)
{
    stop_watcher(r);
    if (r->started) {
        const dcr_bench_processes_t *h = dcr_role_launcher_hooks(r->launcher);
        h->stop(h->ctx);
    }
    dcr_control_destroy(r->watch_control);
    dcr_coord_destroy(r->coord);
    dcr_control_destroy(r->control);
    dcr_transport_destroy(r->transport);
    dcr_faults_destroy(r->faults); /* after the backends that inject its faults */
    dcr_constructor_destroy(r->con);
    dcr_role_launcher_destroy(r->launcher);
    dcr_retainer_destroy(r->retainer);
    free(r->xor_allowed);
    free(r->kills);
    dcr_role_world_destroy(r->world);
    dcr_workdir_close(&r->wd);
}

/* ---- one step ------------------------------------------------------------------ */

static dcr_status_t arm_faults(prun_t *r, int step)
{
    const dcr_faults_run_config_t *run = &r->cfg->run;
    for (int k = 0; k < run->faults_per_step; k++) {
        dcr_fault_t x;
        do
            x = dcr_faults_draw(r->faults, "objstore", r->world->sc->layout->world, r->nodes,
                                r->nrecv, NULL);
        while (!dcr_fault_kind_reaches_processes(x.kind));
        DCR_CHECK(dcr_faults_arm(r->faults, &x));
    }
    for (int k = 0; k < run->nplan; k++)
        if (run->plan[k].step == step) DCR_CHECK(dcr_faults_arm(r->faults, &run->plan[k].fault));
    return DCR_OK;
}

static dcr_status_t start_coordinator_cb(void *ctx)
{
    return start_coordinator(ctx);
}

/* A crashed coordinator (object) is replaced by a new one. */
static dcr_status_t fail_over(prun_t *r, int step, dcr_faults_summary_t *s)
{
    return dcr_faults_fail_over(&r->coord, r->nrecv, start_coordinator_cb, r, step, s);
}

static dcr_status_t transition(prun_t *r, int step, dcr_faults_summary_t *s)
{
    dcr_faults_coordinators_t c = {&r->coord, r->nrecv, r->faults, start_coordinator_cb, NULL, r};
    return dcr_faults_transition(&c, r->world->shards, r->version, r->resume, step, s);
}

/* Waits for the last commit's retention. A version the store's faults left
 * unretainable (a payload removed or truncated after it was applied) is a
 * gap: a node behind it restores densely, which the run must survive. */
static void retain_join(prun_t *r)
{
    dcr_status_t st = dcr_retainer_join(r->retainer, NULL, NULL, NULL);
    if (st != DCR_OK)
        DCR_LOG_WARN("faults: %s; a node behind it restores densely", dcr_error_line(st));
}

/* The transition committed: keep its payloads under versions/ (the next
 * attempt's open clears its prefix, so this is joined before then). */
static dcr_status_t retain_start(prun_t *r)
{
    dcr_commit_record_t rec;
    dcr_status_t st = dcr_control_read(r->control, &rec);
    if (st != DCR_OK) {
        DCR_LOG_WARN("faults: version %" PRIu64 " not retained (the record: %s)", r->version,
                     dcr_error_line(st));
        return DCR_OK;
    }
    if (rec.version != r->version) return DCR_OK; /* a later record: not this commit's */
    return dcr_retainer_start(r->retainer, rec.attempt, rec.version);
}

static dcr_status_t one_step(prun_t *r, int step, dcr_faults_summary_t *s)
{
    arm_kill(r, step);
    DCR_CHECK(arm_faults(r, step));
    /* The candidate is the world's next version; after a stop it is still there. */
    DCR_CHECK(dcr_role_world_advance(r->world, r->version + 1));
    retain_join(r);
    dcr_status_t st = transition(r, step, s);
    dcr_faults_disarm(r->faults);
    if (st == DCR_OK) {
        s->commits++;
        r->version++;
        r->resume = false;
        DCR_CHECK(retain_start(r));
    } else if (st == DCR_EFATAL || st == DCR_ECONFLICT) {
        s->stops++;
        r->resume = true;
        DCR_LOG_WARN("faults: step %d stopped: %s", step + 1, dcr_error_line(st));
        if (st == DCR_ECONFLICT) {
            /* Replaced by a newer coordinator: only a new one goes on. */
            DCR_CHECK(fail_over(r, step, s));
        }
    } else {
        return st;
    }
    /* After a stop the world holds the candidate, not the committed weights. */
    bool at_committed = r->world->version == r->version;
    DCR_CHECK(dcr_faults_check_owners(r->control, r->version, r->con,
                                      at_committed ? r->world->shards : NULL, r->xor_allowed, step,
                                      s));
    s->steps++;
    DCR_LOG_INFO("faults: step %d: version %" PRIu64 " committed", step + 1, r->version);
    return DCR_OK;
}

/* ---- the verifier ------------------------------------------------------------------ */

/* corrupt_digest: a well-formed digests file of receiver 0 at version 1
 * whose middle parameter's digest differs in one bit, so that the
 * verifier's comparison itself (not a checksum) must catch it. */
static dcr_status_t corrupt_digest(prun_t *r)
{
    char path[4300];
    dcr_role_digest_path(r->wd.path, 1, 0, path, sizeof(path));
    uint8_t *out = NULL;
    dcr_param_digests_t d;
    memset(&d, 0, sizeof(d));
    dcr_status_t st = dcr_role_read_digests(path, DIGEST_WAIT_MS, &d);
    size_t outlen = 0;
    if (st == DCR_OK && d.count == 0)
        st = dcr_error_set(DCR_EINVAL, "corrupt_digest: %s lists no parameter", path);
    if (st == DCR_OK) {
        d.digests[d.count / 2][0] ^= 0x01;
        st = dcr_param_digests_encode(&d, &out, &outlen);
    }
    FILE *f = st == DCR_OK ? fopen(path, "wb") : NULL;
    if (st == DCR_OK && (!f || fwrite(out, 1, outlen, f) != outlen))
        st = dcr_error_set(DCR_EIO, "corrupt_digest: cannot rewrite %s", path);
    if (f && fclose(f) != 0 && st == DCR_OK)
        st = dcr_error_set(DCR_EIO, "corrupt_digest: cannot rewrite %s", path);
    if (st == DCR_OK)
        DCR_LOG_WARN("faults: corrupt_digest: %s: one bit of %s's digest flipped", path,
                     d.names[d.count / 2]);
    dcr_param_digests_free(&d);
    free(out);
    return st;
}

static dcr_status_t verify(prun_t *r, dcr_faults_summary_t *s)
{
    if (r->version == 0) return DCR_OK;
    if (r->cfg->corrupt_digest) DCR_CHECK(corrupt_digest(r));
    bool *ok = calloc((size_t)r->version, sizeof(bool));
    if (!ok) return dcr_error_set(DCR_ENOMEM, "%" PRIu64 " versions", r->version);
    const dcr_bench_processes_t *h = dcr_role_launcher_hooks(r->launcher);
    dcr_status_t st = h->verify(h->ctx, r->wd.path, 1, r->version, ok);
    for (uint64_t v = 0; st == DCR_OK && v < r->version; v++) {
        s->checks += r->nrecv;
        if (ok[v]) continue;
        s->mismatches++;
        DCR_LOG_ERROR("faults: the verifier found version %" PRIu64 " not bit-exact", v + 1);
    }
    free(ok);
    return st;
}

/* ---- runs ------------------------------------------------------------------ */

static dcr_status_t check_config(const dcr_faults_processes_config_t *cfg)
{
    const dcr_faults_run_config_t *run = &cfg->run;
    if (run->steps < 1 || run->max_attempts < 1 || run->kill_every < 0 ||
        run->faults_per_step < 0 || run->deadline_ms == 0)
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes: %d steps, %d attempts, kill every %d, %d faults "
                             "per step: expected >= 1 step and attempt, no negative count",
                             run->steps, run->max_attempts, run->kill_every, run->faults_per_step);
    if (strcmp(run->bench.transport, "objstore") || run->bench.rl != DCR_RL_SYNC)
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes needs --transport objstore and --rl sync (got "
                             "%s, %s): the relay tree lives in one process",
                             run->bench.transport, dcr_rl_mode_name(run->bench.rl));
    for (int k = 0; k < run->nplan; k++)
        if (!dcr_fault_kind_reaches_processes(run->plan[k].fault.kind))
            return dcr_error_set(DCR_EINVAL, "fault %s cannot reach a processes run",
                                 dcr_fault_kind_name(run->plan[k].fault.kind));
    return DCR_OK;
}

dcr_status_t dcr_faults_processes_run(const dcr_faults_processes_config_t *cfg,
                                      dcr_faults_processes_summary_t *out_p)
{
    DCR_CHECK(check_config(cfg));
    prun_t r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.b = &cfg->run.bench;
    pthread_mutex_init(&r.kill_lock, NULL);
    dcr_faults_processes_summary_t out;
    memset(&out, 0, sizeof(out));
    dcr_faults_summary_t *s = &out.s;
    dcr_status_t st = setup(&r);
    int step = 0;
    for (; st == DCR_OK && step < cfg->run.steps; step++) {
        st = dcr_interrupt_check("faults");
        if (st == DCR_OK) st = one_step(&r, step, s);
    }
    stop_watcher(&r); /* no kill after the last step */
    if (r.retainer) retain_join(&r);
    /* A last step that stopped cleanly is a stop, as in a thread run: the
     * record still names the owners' version, and a next step would take
     * the same candidate up again. */
    if (st == DCR_OK && r.world->version != r.version)
        DCR_LOG_WARN("faults: version %" PRIu64 " of the last step stopped uncommitted",
                     r.world->version);
    if (st == DCR_OK) st = verify(&r, s);
    if (r.faults) dcr_faults_counts(r.faults, s->faults_by_kind);
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) s->faults += s->faults_by_kind[k];
    s->version = r.version;
    if (r.launcher) {
        out.sigkills = dcr_role_launcher_sigkills(r.launcher);
        out.restarts = dcr_role_launcher_restarts(r.launcher);
    }
    int per = r.world ? r.world->serve.gpus_per_node : 0;
    memcpy(out.sigkills_by_point, r.by_point, sizeof(r.by_point));
    out.kills_drawn = r.due;
    out.node_processes = r.nodes;
    s->kills = out.sigkills * per;
    s->restores = out.restarts * per;
    /* Every node process's restore records, restarted ones' included. */
    if (st == DCR_OK && r.wd.path[0])
        st = dcr_restore_totals(r.wd.path, out.restores_by_kind, out.restore_bytes,
                                out.restore_dense_bytes, out.restore_s);
    if (st == DCR_OK && r.wd.path[0]) st = dcr_restore_causes(r.wd.path, out.restores_by_cause);
    teardown(&r);
    pthread_mutex_destroy(&r.kill_lock);
    DCR_CHECK(st);
    *out_p = out;
    return DCR_OK;
}

static char **args_with_seed(const dcr_faults_processes_config_t *cfg, const char *seed, int *n_p)
{
    char **a = calloc((size_t)cfg->nargs + 2, sizeof(char *));
    if (!a) return NULL;
    int n = 0;
    bool set = false;
    for (int i = 0; i < cfg->nargs; i++) {
        a[n++] = cfg->run_args[i];
        if (!strcmp(cfg->run_args[i], "--seed") && i + 1 < cfg->nargs) {
            a[n++] = (char *)seed;
            set = true;
            i++;
        }
    }
    if (!set) {
        a[n++] = "--seed";
        a[n++] = (char *)seed;
    }
    *n_p = n;
    return a;
}

char **dcr_faults_seeded(const dcr_faults_processes_config_t *cfg, uint64_t seed,
                         dcr_faults_processes_config_t *run, char seed_text[32])
{
    *run = *cfg;
    run->run.bench.seed = seed;
    snprintf(seed_text, 32, "%" PRIu64, seed);
    char **args = args_with_seed(cfg, seed_text, &run->nargs);
    run->run_args = args;
    return args;
}

void dcr_faults_processes_summary_add(dcr_faults_processes_summary_t *a,
                                      const dcr_faults_processes_summary_t *b)
{
    dcr_faults_summary_add(&a->s, &b->s);
    a->sigkills += b->sigkills;
    for (int k = 0; k < DCR_FAULTS_KILL_POINTS; k++)
        a->sigkills_by_point[k] += b->sigkills_by_point[k];
    a->kills_drawn += b->kills_drawn;
    a->restarts += b->restarts;
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        a->restores_by_kind[k] += b->restores_by_kind[k];
        a->restore_bytes[k] += b->restore_bytes[k];
        a->restore_dense_bytes[k] += b->restore_dense_bytes[k];
        a->restore_s[k] += b->restore_s[k];
    }
    for (int c = 0; c < DCR_RESTORE_CAUSES; c++) a->restores_by_cause[c] += b->restores_by_cause[c];
    a->node_processes = b->node_processes;
}

dcr_status_t dcr_faults_processes_campaign(const dcr_faults_processes_config_t *cfg, int seeds,
                                           uint64_t base_seed,
                                           dcr_faults_processes_summary_t *out_p)
{
    if (seeds < 1) return dcr_error_set(DCR_EINVAL, "campaign needs >= 1 seed, got %d", seeds);
    dcr_faults_processes_summary_t total;
    memset(&total, 0, sizeof(total));
    for (int i = 0; i < seeds; i++) {
        dcr_faults_processes_config_t run;
        char seed[32];
        char **args = dcr_faults_seeded(cfg, base_seed + (uint64_t)i, &run, seed);
        if (!args) return dcr_error_set(DCR_ENOMEM, "role arguments");
        DCR_LOG_INFO("faults: processes campaign run %d of %d: seed %s", i + 1, seeds, seed);
        dcr_faults_processes_summary_t s;
        dcr_status_t st = dcr_faults_processes_run(&run, &s);
        free(args);
        if (st != DCR_OK) {
            dcr_error_prefix("campaign seed %s (processes): ", seed);
            return st;
        }
        dcr_faults_processes_summary_add(&total, &s);
    }
    *out_p = total;
    return DCR_OK;
}
