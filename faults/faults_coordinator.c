/* dcr faults train|campaign --processes --kill-coordinator-every N: the whole
 * process deployment (owner job, coordinator process, rollout-node
 * processes, verifier process) driven by dcr_bench_run through the role
 * launcher, with rollout-node SIGKILLs aimed from the control plane and
 * coordinator-process SIGKILLs with failover (faults/faults_run.h). */
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

#include "dcr/log.h"
#include "dcr/rng.h"
#include "dcr/rollout_node.h"
#include "faults/faults_run.h"
#include "workloads/roles/launch.h"
#include "workloads/roles/restore.h"
#include "workloads/roles/roles.h"

#define WATCH_POLL_NS  1000000L /* the watcher's look at the aimed node */
#define REPORT_WAIT_MS 10000    /* a kill waits this long for the death to be reported */

/* A rollout-node kill of the schedule. */
typedef struct node_kill {
    dcr_faults_kill_point_t point;
    int node;
    uint64_t after_tau; /* only attempts prepared after arming count */
} node_kill_t;

typedef struct crun {
    const dcr_faults_processes_config_t *cfg;
    dcr_bench_config_t bench; /* the run: steps refits, no warm-up, the hooks below */
    dcr_role_launcher_t *launcher;
    dcr_bench_processes_t inner; /* the launcher's hooks */
    dcr_bench_processes_t hooks; /* ours around them */
    char workdir[4096];
    uint64_t causes[DCR_RESTORE_CAUSES]; /* restore records by cause, read at stop */
    dcr_control_t *control;              /* the watcher's own handle */
    dcr_control_t *arm_control;          /* the main thread's (arming) */
    /* The schedule: nkills drawn up front, `due` fallen due so far, `next`
     * the next to arm; `aim` the armed one (under lock). */
    node_kill_t *kills;
    int nkills, due, next;
    pthread_mutex_t lock;
    bool armed;
    node_kill_t aim;
    int by_point[DCR_FAULTS_KILL_POINTS];
    pthread_t watcher;
    bool watching;
    atomic_bool watch_stop;
    /* Transitions as the coordinator processes answered them. */
    int step, attempts, retries, commits, lost;
    uint64_t version; /* committed */
} crun_t;

static void nap_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* ---- the watcher: rollout-node kills seen from the control plane ---- */

/* Where the node's report rep stands in an attempt prepared after the arm:
 * delivery (JOINED, no apply marked yet), apply (JOINED, its first apply
 * marked: partial writes) or acked (DONE: applied and acknowledged);
 * DCR_FAULTS_KILL_POINTS when it is in none of them. */
static dcr_faults_kill_point_t point_of(crun_t *r, int node, const dcr_node_report_t *rep,
                                        uint64_t after_tau)
{
    if (rep->tau <= after_tau) return DCR_FAULTS_KILL_POINTS;
    if (rep->phase == DCR_NODE_DONE) return DCR_FAULTS_KILL_ACKED;
    if (rep->phase != DCR_NODE_JOINED) return DCR_FAULTS_KILL_POINTS;
    char path[4300];
    dcr_role_apply_marker_path(r->workdir, node, rep->tau, path, sizeof(path));
    return access(path, F_OK) == 0 ? DCR_FAULTS_KILL_APPLY : DCR_FAULTS_KILL_DELIVERY;
}

/* The armed kill fires at its point or, when the watcher first sees the
 * node past it (the delivery and apply windows can be shorter than a
 * poll on a loaded host), at the next point it sees in the same attempt,
 * counted where it landed: every armed kill lands in its first attempt.
 * At acked, whether the coordinator process commits before the signal
 * lands is a race this process cannot close; the log names the commit
 * record's attempt read just before each signal. */
static void watch_once(crun_t *r)
{
    pthread_mutex_lock(&r->lock);
    bool armed = r->armed;
    node_kill_t k = r->aim;
    pthread_mutex_unlock(&r->lock);
    if (!armed) return;
    int pid = dcr_role_launcher_node_pid(r->launcher, k.node);
    dcr_node_report_t rep;
    if (pid <= 0 || dcr_node_report_get(r->control, k.node, &rep) != DCR_OK ||
        rep.pid != (int32_t)pid)
        return;
    dcr_faults_kill_point_t at = point_of(r, k.node, &rep, k.after_tau);
    if (at == DCR_FAULTS_KILL_POINTS || at < k.point) return;
    dcr_commit_record_t rec;
    uint64_t committed = dcr_control_read(r->control, &rec) == DCR_OK ? rec.attempt : 0;
    /* The arm is spent before the signal goes out: the launcher returns
     * only once the death is reported in the control plane, and the next
     * step may arm the next kill meanwhile. It sends the signal only to
     * that very process; if it has gone, the arm comes back unless a newer
     * one took its place. */
    pthread_mutex_lock(&r->lock);
    r->armed = false;
    pthread_mutex_unlock(&r->lock);
    bool sent = dcr_role_launcher_kill_node(r->launcher, k.node, pid, REPORT_WAIT_MS);
    pthread_mutex_lock(&r->lock);
    if (sent)
        r->by_point[at]++;
    else if (!r->armed)
        r->armed = true; /* r->aim is still k */
    pthread_mutex_unlock(&r->lock);
    if (!sent) return;
    DCR_LOG_WARN("faults: SIGKILL to rollout-node %d (pid %d) at %s of attempt %" PRIu64
                 " (aimed at %s; the commit record named attempt %" PRIu64 " just before)",
                 k.node, pid, dcr_faults_kill_point_name(at), rep.tau,
                 dcr_faults_kill_point_name(k.point), committed);
}

static void *watch_main(void *arg)
{
    crun_t *r = arg;
    while (!atomic_load(&r->watch_stop)) {
        watch_once(r);
        nap_ns(WATCH_POLL_NS);
    }
    return NULL;
}

static void stop_watcher(crun_t *r)
{
    atomic_store(&r->watch_stop, true);
    if (r->watching) pthread_join(r->watcher, NULL);
    r->watching = false;
}

/* The schedule, drawn from the seed before the first step so that it does
 * not depend on timing: one kill (point, node) every kill_every steps. */
static dcr_status_t draw_kills(crun_t *r)
{
    int every = r->cfg->run.kill_every;
    r->nkills = every > 0 ? r->cfg->run.steps / every : 0;
    r->kills = calloc(r->nkills > 0 ? (size_t)r->nkills : 1, sizeof(node_kill_t));
    if (!r->kills) return dcr_error_set(DCR_ENOMEM, "%d kills", r->nkills);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, r->bench.seed ^ 0x6b696c6c73ull); /* "kills" */
    for (int i = 0; i < r->nkills; i++) {
        r->kills[i].point = (dcr_faults_kill_point_t)dcr_rng_below(&rng, DCR_FAULTS_KILL_ACKED + 1);
        r->kills[i].node = (int)dcr_rng_below(&rng, (uint64_t)r->bench.serve.nodes);
    }
    return DCR_OK;
}

/* A kill falls due every kill_every steps; the next due one is armed once
 * the one before has fired (it stays armed across attempts and steps until
 * it does), for attempts prepared from now on. */
static void arm_kill(crun_t *r)
{
    int every = r->cfg->run.kill_every;
    if (every > 0 && (r->step + 1) % every == 0 && r->due < r->nkills) r->due++;
    pthread_mutex_lock(&r->lock);
    bool busy = r->armed;
    pthread_mutex_unlock(&r->lock);
    if (busy || r->next >= r->due) return;
    node_kill_t k = r->kills[r->next++];
    dcr_control_attempt_t a;
    if (dcr_control_attempt(r->arm_control, 0, &a) == DCR_OK) k.after_tau = a.tau;
    pthread_mutex_lock(&r->lock);
    r->aim = k;
    r->armed = true;
    pthread_mutex_unlock(&r->lock);
    DCR_LOG_INFO("faults: step %d: a SIGKILL to rollout-node %d armed at %s", r->step + 1, k.node,
                 dcr_faults_kill_point_name(k.point));
}

/* ---- our hooks around the launcher's ---- */

/* The apply markers on (the node processes look for their directory when
 * they start), the launcher's roles, then the watcher. */
static dcr_status_t hook_start(void *ctx, const char *workdir, bool temporary)
{
    crun_t *r = ctx;
    snprintf(r->workdir, sizeof(r->workdir), "%s", workdir);
    DCR_CHECK(dcr_role_kill_points_create(workdir));
    DCR_CHECK(r->inner.start(r->inner.ctx, workdir, temporary));
    DCR_CHECK(dcr_role_control_open(&r->bench, workdir, &r->control));
    DCR_CHECK(dcr_role_control_open(&r->bench, workdir, &r->arm_control));
    DCR_CHECK(draw_kills(r));
    r->watching = pthread_create(&r->watcher, NULL, watch_main, r) == 0;
    if (!r->watching) return dcr_error_set(DCR_EIO, "cannot start the kill watcher thread");
    return DCR_OK;
}

/* One step: arm its kill, then the transition through the coordinator
 * process (failovers inside, dcr_role_launcher_set_coordinator_kills). */
static dcr_status_t hook_refit(void *ctx, dcr_refit_result_t *out)
{
    crun_t *r = ctx;
    arm_kill(r);
    dcr_control_attempt_t a;
    uint64_t tau0 = dcr_control_attempt(r->arm_control, 0, &a) == DCR_OK ? a.tau : 0;
    dcr_status_t st = r->inner.refit(r->inner.ctx, out);
    r->step++;
    DCR_CHECK(st);
    /* Attempt numbers are the control plane's, one per attempt of any
     * coordinator process: a killed coordinator's attempts count too. */
    int attempts = out->tau > tau0 ? (int)(out->tau - tau0) : out->attempts;
    r->attempts += attempts;
    r->retries += attempts - 1;
    if (out->version == r->version + 1)
        r->commits++;
    else
        r->lost++;
    r->version = out->version;
    return DCR_OK;
}

static dcr_status_t hook_verify(void *ctx, const char *workdir, uint64_t first, uint64_t last,
                                bool *ok)
{
    crun_t *r = ctx;
    stop_watcher(r); /* no kill after the last step */
    return r->inner.verify(r->inner.ctx, workdir, first, last, ok);
}

static void hook_stop(void *ctx)
{
    crun_t *r = ctx;
    stop_watcher(r);
    r->inner.stop(r->inner.ctx);
    /* Every node process has stopped: its restore records are complete. */
    if (r->workdir[0] && dcr_restore_causes(r->workdir, r->causes) != DCR_OK)
        DCR_LOG_WARN("faults: restore causes: %s", dcr_error_detail());
}

/* ---- runs ---- */

static dcr_status_t check_config(const dcr_faults_processes_config_t *cfg, int every)
{
    const dcr_faults_run_config_t *run = &cfg->run;
    if (run->steps < 1 || run->kill_every < 0 || every < 1)
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes --kill-coordinator-every %d: %d steps, kill every "
                             "%d: expected >= 1 step, >= 1 for the coordinator, no negative count",
                             every, run->steps, run->kill_every);
    if (run->faults_per_step > 0 || run->nplan > 0)
        return dcr_error_set(DCR_EINVAL,
                             "--kill-coordinator-every: %d faults per step and %d planned: "
                             "expected none (this process's faults cannot reach owners and "
                             "coordinator that are processes)",
                             run->faults_per_step, run->nplan);
    if (cfg->corrupt_digest)
        return dcr_error_set(DCR_EINVAL, "--corrupt-digest does not apply with "
                                         "--kill-coordinator-every");
    if (strcmp(run->bench.transport, "objstore") || run->bench.rl != DCR_RL_SYNC)
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes needs --transport objstore and --rl sync (got "
                             "%s, %s)",
                             run->bench.transport, dcr_rl_mode_name(run->bench.rl));
#ifndef DCR_HAVE_MPI
    return dcr_error_set(DCR_EUNSUPPORTED, "--kill-coordinator-every needs the owners as an "
                                           "OpenMPI job: this dcr was built without MPI");
#else
    return DCR_OK;
#endif
}

static dcr_status_t make_launcher(crun_t *r, int every)
{
    DCR_CHECK(dcr_role_launcher_create(&r->bench, r->cfg->run_args, r->cfg->nargs, &r->launcher));
    dcr_role_launcher_set_owners(r->launcher, true);
    dcr_role_launcher_set_restart(r->launcher, true);
    dcr_role_launcher_set_coordinator_kills(r->launcher, every);
    r->inner = *dcr_role_launcher_hooks(r->launcher);
    r->hooks = r->inner;
    r->hooks.start = hook_start;
    r->hooks.refit = hook_refit;
    r->hooks.verify = hook_verify;
    r->hooks.stop = hook_stop;
    r->hooks.ctx = r;
    r->bench.processes = &r->hooks;
    return DCR_OK;
}

/* The summary from the bench's result and our counts. */
static void summarize(crun_t *r, const dcr_bench_result_t *res, dcr_faults_coordinator_summary_t *o)
{
    dcr_faults_summary_t *s = &o->p.s;
    s->steps = r->step;
    s->attempts = r->attempts;
    s->retries = r->retries;
    s->commits = r->commits;
    s->lost = r->lost + (r->cfg->run.steps - r->step);
    s->version = r->version;
    for (int i = 0; i < res->nrefits; i++) {
        s->checks += res->receivers;
        s->mismatches += !res->refits[i].bit_exact;
    }
    int nodes = res->node_processes > 0 ? res->node_processes : 1;
    int per = res->receivers / nodes;
    o->p.sigkills = dcr_role_launcher_sigkills(r->launcher);
    o->p.restarts = dcr_role_launcher_restarts(r->launcher);
    o->coordinator_kills = dcr_role_launcher_coordinator_kills(r->launcher);
    o->coordinator_restarts = dcr_role_launcher_coordinator_restarts(r->launcher);
    o->owner_processes = dcr_role_launcher_owner_processes(r->launcher);
    memcpy(o->p.sigkills_by_point, r->by_point, sizeof(r->by_point));
    o->p.sigkills_by_point[DCR_FAULTS_KILL_COORDINATOR] = o->coordinator_kills;
    o->p.kills_drawn = r->due;
    o->p.node_processes = res->node_processes;
    s->failovers = o->coordinator_restarts;
    s->kills = o->p.sigkills * per;
    s->restores = o->p.restarts * per;
    /* The bench run read every node process's restore records. */
    memcpy(o->p.restores_by_kind, res->restores_by_kind, sizeof(o->p.restores_by_kind));
    memcpy(o->p.restore_bytes, res->restore_bytes, sizeof(o->p.restore_bytes));
    memcpy(o->p.restore_dense_bytes, res->restore_dense_bytes, sizeof(o->p.restore_dense_bytes));
    memcpy(o->p.restore_s, res->restore_s, sizeof(o->p.restore_s));
    memcpy(o->p.restores_by_cause, r->causes, sizeof(o->p.restores_by_cause));
}

dcr_status_t dcr_faults_coordinator_run(const dcr_faults_processes_config_t *cfg,
                                        int coordinator_every,
                                        dcr_faults_coordinator_summary_t *out_p)
{
    DCR_CHECK(check_config(cfg, coordinator_every));
    crun_t r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.bench = cfg->run.bench;
    r.bench.warmup = 0;
    r.bench.refits = cfg->run.steps;
    r.bench.verify = true;
    r.bench.keep_trace = false;
    pthread_mutex_init(&r.lock, NULL);
    dcr_bench_result_t res;
    memset(&res, 0, sizeof(res));
    dcr_status_t st = make_launcher(&r, coordinator_every);
    if (st == DCR_OK) st = dcr_bench_run(&r.bench, &res);
    stop_watcher(&r);
    dcr_faults_coordinator_summary_t out;
    memset(&out, 0, sizeof(out));
    if (st == DCR_OK) summarize(&r, &res, &out);
    dcr_bench_result_free(&res);
    dcr_role_launcher_destroy(r.launcher);
    dcr_control_destroy(r.control);
    dcr_control_destroy(r.arm_control);
    free(r.kills);
    pthread_mutex_destroy(&r.lock);
    DCR_CHECK(st);
    *out_p = out;
    return DCR_OK;
}

dcr_status_t dcr_faults_coordinator_campaign(const dcr_faults_processes_config_t *cfg,
                                             int coordinator_every, int seeds, uint64_t base_seed,
                                             dcr_faults_coordinator_summary_t *out_p)
{
    if (seeds < 1) return dcr_error_set(DCR_EINVAL, "campaign needs >= 1 seed, got %d", seeds);
    dcr_faults_coordinator_summary_t total;
    memset(&total, 0, sizeof(total));
    for (int i = 0; i < seeds; i++) {
        dcr_faults_processes_config_t run;
        char seed[32];
        char **args = dcr_faults_seeded(cfg, base_seed + (uint64_t)i, &run, seed);
        if (!args) return dcr_error_set(DCR_ENOMEM, "role arguments");
        DCR_LOG_INFO("faults: coordinator-kill campaign run %d of %d: seed %s", i + 1, seeds, seed);
        dcr_faults_coordinator_summary_t s;
        dcr_status_t st = dcr_faults_coordinator_run(&run, coordinator_every, &s);
        free(args);
        if (st != DCR_OK) {
            dcr_error_prefix("campaign seed %s (processes): ", seed);
            return st;
        }
        dcr_faults_processes_summary_add(&total.p, &s.p);
        total.coordinator_kills += s.coordinator_kills;
        total.coordinator_restarts += s.coordinator_restarts;
        total.owner_processes = s.owner_processes;
    }
    *out_p = total;
    return DCR_OK;
}
