/* dcr faults train|campaign --processes: the whole process deployment (owner
 * job, coordinator process, rollout-node processes, verifier process) driven
 * by dcr_bench_run through the role launcher, with rollout-node SIGKILLs and
 * faults aimed from the control plane and the store's files, and
 * coordinator-process SIGKILLs with failover (faults/faults_run.h). */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/parties.h"
#include "dcr/rng.h"
#include "dcr/rollout_node.h"
#include "faults/faults_run.h"
#include "deploy/launch.h"
#include "deploy/restorer.h"
#include "deploy/roles.h"
#include "deploy/testbed.h"

#define WATCH_POLL_NS  1000000L /* the watcher's look at the aimed node and the armed faults */
#define REPORT_WAIT_MS 10000    /* a kill waits this long for the death to be reported */
#define DIGEST_WAIT_MS 10000    /* corrupt_digest: for version 1's first digests file */
#define JOIN_WAIT_MS   120000   /* the joining node: its world, anchor or dense load, replay */
#define STALL_MS_MIN   50       /* delay and control_busy last 50..449 ms: below the */
#define STALL_MS_SPAN  400      /* roles' SQLite busy timeout (5 s) with room to spare */
#define MAX_FAULTS     64       /* armed at once, as dcr_faults_arm allows */

const char *dcr_faults_kill_point_name(dcr_faults_kill_point_t point)
{
    static const char *const names[DCR_FAULTS_KILL_POINTS] = {"delivery", "apply", "acked",
                                                              "coordinator"};
    return point >= 0 && point < DCR_FAULTS_KILL_POINTS ? names[point] : "?";
}

bool dcr_fault_kind_reaches_processes(dcr_fault_kind_t kind)
{
    return kind == DCR_FAULT_CORRUPT || kind == DCR_FAULT_DELAY || kind == DCR_FAULT_CONTROL_BUSY;
}

/* A rollout-node kill of the schedule. */
typedef struct node_kill {
    dcr_faults_kill_point_t point;
    int node;
    uint64_t after_tau; /* only attempts prepared after arming count */
} node_kill_t;

/* A network fault on a testbed (--testbed): a thread that puts it in place
 * through scripts/testbed.sh, waits its ms and undoes it. */
typedef struct net_job {
    dcr_testbed_t *tb;
    dcr_fault_t f;
    char host[16]; /* t<i> or r<i> */
    pthread_t th;
    atomic_bool done;
    bool ok; /* the fault was in place (read after done) */
} net_job_t;

/* A fault this process executes, armed for one step's attempts. */
typedef struct armed_fault {
    dcr_fault_t f;
    bool fired;
    bool holding;      /* delay: the node is stopped; control_busy: the lock is held */
    int pid;           /* delay: the stopped process */
    uint64_t until_ns; /* delay, control_busy: when the hold ends */
    sqlite3 *db;       /* control_busy: the handle holding the lock */
    net_job_t *net;    /* a network fault's thread, while it runs */
} armed_fault_t;

typedef struct prun {
    const dcr_faults_processes_config_t *cfg;
    dcr_bench_config_t bench; /* the run: steps refits, no warm-up, the hooks below */
    dcr_role_launcher_t *launcher;
    dcr_bench_processes_t inner; /* the launcher's hooks */
    dcr_bench_processes_t hooks; /* ours around them */
    char workdir[4096];
    char control_file[4200];             /* where the bench put the control plane; empty: its own */
    uint64_t causes[DCR_RESTORE_CAUSES]; /* restore records by cause, read at stop */
    dcr_control_t *control;              /* the kill watcher's own handle */
    dcr_control_t *fault_control;        /* the fault watcher's */
    dcr_control_t *arm_control;          /* the main thread's (arming) */
    dcr_rng_t rng;                       /* the kill schedule's and the faults' draws */
    bool sqlite;                         /* the control plane is the run's SQLite file */
    bool netem;                          /* --testbed: its kernel has netem (net_reorder) */
    /* The schedule: nkills drawn up front, `due` fallen due so far, `next`
     * the next to arm; `aim` the armed one. Under lock, with the faults. */
    node_kill_t *kills;
    int nkills, due, next;
    pthread_mutex_t lock;
    bool armed;
    node_kill_t aim;
    int by_point[DCR_FAULTS_KILL_POINTS];
    armed_fault_t faults[MAX_FAULTS];
    int nfaults;
    uint64_t faults_after_tau;      /* the step's faults act on attempts after this one */
    char corrupted[MAX_FAULTS][96]; /* objects the step's corrupt faults hit, one each */
    int ncorrupted;
    int64_t fired[DCR_FAULT_KIND_COUNT];
    int64_t drawn[DCR_FAULT_KIND_COUNT];
    pthread_t watchers[2]; /* kills, faults */
    int watching;          /* threads started */
    atomic_bool watch_stop;
    /* Transitions as the coordinator processes answered them. */
    int step, attempts, retries, commits, lost;
    uint64_t version; /* committed */
    /* The elastic join (cfg->join_at): whether its node reported READY, at
     * which version; its figures once the node processes stopped. */
    bool joined;
    uint64_t join_version;
    dcr_role_join_t join;
} prun_t;

static void nap_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static uint64_t latest_tau(dcr_control_t *control)
{
    dcr_control_attempt_t a;
    return dcr_control_attempt(control, 0, &a) == DCR_OK ? a.tau : 0;
}

/* ---- rollout-node kills, seen from the control plane ---- */

/* Where the node's report rep stands in an attempt prepared after the arm:
 * delivery (JOINED, no apply marked yet), apply (JOINED, its first apply
 * marked: partial writes) or acked (DONE: applied and acknowledged);
 * DCR_FAULTS_KILL_POINTS when it is in none of them. */
static dcr_faults_kill_point_t point_of(prun_t *r, int node, const dcr_node_report_t *rep,
                                        uint64_t after_tau)
{
    if (rep->tau <= after_tau) return DCR_FAULTS_KILL_POINTS;
    if (rep->phase == DCR_NODE_DONE) return DCR_FAULTS_KILL_ACKED;
    if (rep->phase != DCR_NODE_JOINED) return DCR_FAULTS_KILL_POINTS;
    char path[4300];
    dcr_rundir_apply_marker_path(r->workdir, node, rep->tau, path, sizeof(path));
    return access(path, F_OK) == 0 ? DCR_FAULTS_KILL_APPLY : DCR_FAULTS_KILL_DELIVERY;
}

/* The armed kill fires at its point or, when the watcher first sees the
 * node past it (the delivery and apply windows can be shorter than a
 * poll on a loaded host), at the next point it sees in the same attempt,
 * counted where it landed: every armed kill lands in its first attempt.
 * At acked, whether the coordinator process commits before the signal
 * lands is a race this process cannot close; the log names the commit
 * record's attempt read just before each signal. */
static void kill_once(prun_t *r)
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

/* The schedule, drawn from the seed before the first step so that it does
 * not depend on timing: one kill (point, node) every kill_every steps. */
static dcr_status_t draw_kills(prun_t *r)
{
    int every = r->cfg->run.kill_every;
    r->nkills = every > 0 ? r->cfg->run.steps / every : 0;
    r->kills = calloc(r->nkills > 0 ? (size_t)r->nkills : 1, sizeof(node_kill_t));
    if (!r->kills) return dcr_error_set(DCR_ENOMEM, "%d kills", r->nkills);
    for (int i = 0; i < r->nkills; i++) {
        r->kills[i].point =
            (dcr_faults_kill_point_t)dcr_rng_below(&r->rng, DCR_FAULTS_KILL_ACKED + 1);
        r->kills[i].node = (int)dcr_rng_below(&r->rng, (uint64_t)r->bench.run.serve.nodes);
    }
    return DCR_OK;
}

/* A kill falls due every kill_every steps; the next due one is armed once
 * the one before has fired (it stays armed across attempts and steps until
 * it does), for attempts prepared from now on. */
static void arm_kill(prun_t *r, uint64_t tau)
{
    int every = r->cfg->run.kill_every;
    if (every > 0 && (r->step + 1) % every == 0 && r->due < r->nkills) r->due++;
    pthread_mutex_lock(&r->lock);
    bool busy = r->armed;
    pthread_mutex_unlock(&r->lock);
    if (busy || r->next >= r->due) return;
    node_kill_t k = r->kills[r->next++];
    k.after_tau = tau;
    pthread_mutex_lock(&r->lock);
    r->aim = k;
    r->armed = true;
    pthread_mutex_unlock(&r->lock);
    DCR_LOG_INFO("faults: step %d: a SIGKILL to rollout-node %d armed at %s", r->step + 1, k.node,
                 dcr_faults_kill_point_name(k.point));
}

/* ---- faults this process executes (faults_run.h) ---- */

/* corrupt: one byte in the middle of a stored payload object of attempt
 * tau (of owner target, -1: any) that no fault of the step hit yet (a
 * second flip would undo the first) flipped; the object is replaced whole
 * by a rename, as the directory store writes, so that a reader sees either
 * version of it. False when there is none yet. */
static bool corrupt_object(prun_t *r, const dcr_fault_t *f, uint64_t tau)
{
    char dir[4400];
    dcr_rundir_objstore_dir(r->workdir, dir, sizeof(dir));
    size_t dl = strlen(dir);
    snprintf(dir + dl, sizeof(dir) - dl, "/attempt-%" PRIu64, tau);
    DIR *d = r->ncorrupted < MAX_FAULTS ? opendir(dir) : NULL;
    if (!d) return false;
    char name[256] = "";
    for (struct dirent *e; (e = readdir(d));) {
        unsigned owner;
        unsigned long long id;
        if (sscanf(e->d_name, "payload-%u-%llu.dcrp", &owner, &id) != 2) continue;
        if (f->target >= 0 && owner != (unsigned)f->target) continue;
        char key[96];
        snprintf(key, sizeof(key), "attempt-%" PRIu64 "/%.60s", tau, e->d_name);
        bool hit = false;
        for (int i = 0; i < r->ncorrupted && !hit; i++) hit = !strcmp(r->corrupted[i], key);
        if (hit) continue;
        snprintf(name, sizeof(name), "%s", e->d_name);
        snprintf(r->corrupted[r->ncorrupted++], sizeof(r->corrupted[0]), "%s", key);
        break;
    }
    closedir(d);
    if (!name[0]) return false;
    char path[4800], tmp[4900];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/.tmp-fault-%d", dir, (int)getpid());
    FILE *in = fopen(path, "rb");
    if (!in) return false; /* cleared meanwhile: the attempt is over */
    fseek(in, 0, SEEK_END);
    long len = ftell(in);
    fseek(in, 0, SEEK_SET);
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    bool ok = buf && fread(buf, 1, (size_t)len, in) == (size_t)len;
    fclose(in);
    FILE *out = ok ? fopen(tmp, "wb") : NULL;
    if (out) {
        buf[len / 2] ^= 0x01;
        ok = fwrite(buf, 1, (size_t)len, out) == (size_t)len;
        ok = fclose(out) == 0 && ok && rename(tmp, path) == 0;
        if (!ok) unlink(tmp);
    } else {
        ok = false;
    }
    free(buf);
    if (ok)
        DCR_LOG_WARN("faults: corrupt: byte %ld of %s flipped (attempt %" PRIu64 ")", len / 2, path,
                     tau);
    return ok;
}

/* control_busy: an exclusive transaction on the control plane's file, held
 * until released; every other process's write waits for it. */
static bool control_lock(prun_t *r, armed_fault_t *x)
{
    char db[4200];
    if (r->control_file[0])
        snprintf(db, sizeof db, "%s", r->control_file);
    else
        dcr_rundir_control_path(r->workdir, db, sizeof(db));
    if (sqlite3_open_v2(db, &x->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(x->db);
        x->db = NULL;
        return false;
    }
    sqlite3_busy_timeout(x->db, 100); /* a writer in the way: try again at the next poll */
    if (sqlite3_exec(x->db, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK) return true;
    sqlite3_close(x->db);
    x->db = NULL;
    return false;
}

/* Ends a hold: the stopped node continues, the lock is released. */
static void release(prun_t *r, armed_fault_t *x)
{
    if (!x->holding) return;
    x->holding = false;
    if (x->f.kind == DCR_FAULT_DELAY) {
        dcr_role_launcher_pause_node(r->launcher, x->f.target, x->pid, false);
    } else if (x->net) {
        /* Its thread undoes the fault after its ms: bounded. */
        pthread_join(x->net->th, NULL);
        if (x->net->ok) r->fired[x->f.kind]++;
        free(x->net);
        x->net = NULL;
    } else if (x->db) {
        sqlite3_exec(x->db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(x->db);
        x->db = NULL;
    }
}

static bool is_net_kind(dcr_fault_kind_t kind)
{
    return kind == DCR_FAULT_LINK_DOWN || kind == DCR_FAULT_NET_LOSS ||
           kind == DCR_FAULT_NET_REORDER || kind == DCR_FAULT_PARTITION;
}

static void *net_main(void *arg)
{
    net_job_t *j = arg;
    char secs[32], pct[16];
    snprintf(secs, sizeof(secs), "%.3f", j->f.ms / 1000.0);
    snprintf(pct, sizeof(pct), "%d", j->f.count);
    const char *on[5] = {NULL}, *off[4] = {NULL};
    switch (j->f.kind) {
    case DCR_FAULT_LINK_DOWN: /* the script brings the link back up after secs */
        on[0] = "link-down", on[1] = j->host, on[2] = secs;
        break;
    case DCR_FAULT_PARTITION:
        on[0] = "partition", on[1] = j->host, on[2] = "svc";
        off[0] = "heal", off[1] = j->host, off[2] = "svc";
        break;
    default: /* net_loss, net_reorder */
        on[0] = "netem", on[1] = j->host, on[3] = pct;
        on[2] = j->f.kind == DCR_FAULT_NET_LOSS ? "--loss" : "--reorder";
        off[0] = "clear", off[1] = j->host;
        break;
    }
    dcr_status_t st = dcr_testbed_fault(j->tb, on);
    j->ok = st == DCR_OK;
    if (j->ok)
        DCR_LOG_WARN("faults: %s: host %s for %d ms (%d%%)", dcr_fault_kind_name(j->f.kind),
                     j->host, j->f.ms, on[3] ? j->f.count : 100);
    else
        DCR_LOG_WARN("faults: %s on host %s did not take: %s", dcr_fault_kind_name(j->f.kind),
                     j->host, dcr_error_detail());
    /* Undone even when it did not take: the script may have done part of it. */
    if (off[0]) {
        nap_ns((long)j->f.ms * 1000000L);
        if (dcr_testbed_fault(j->tb, off) != DCR_OK)
            DCR_LOG_WARN("faults: undoing %s on host %s: %s", dcr_fault_kind_name(j->f.kind),
                         j->host, dcr_error_detail());
    }
    atomic_store(&j->done, true);
    return NULL;
}

/* The testbed host a network fault acts on: t<i> for targets below the
 * training hosts, r<i> after them; a partition's target is a rollout host. */
static void net_host(const prun_t *r, const dcr_fault_t *f, char *out, size_t cap)
{
    int train = r->bench.run.scenario.train.nodes;
    if (f->kind != DCR_FAULT_PARTITION && f->target < train)
        snprintf(out, cap, "t%d", f->target);
    else
        snprintf(out, cap, "r%d", f->kind == DCR_FAULT_PARTITION ? f->target : f->target - train);
}

/* Starts a network fault's thread unless another one acts on the same
 * host (its undoing, `clear` or a link coming back up, would end this one
 * early): it then starts at a later poll. */
static bool net_start(prun_t *r, armed_fault_t *x)
{
    char host[16];
    net_host(r, &x->f, host, sizeof(host));
    for (int i = 0; i < r->nfaults; i++)
        if (r->faults[i].net && !strcmp(r->faults[i].net->host, host)) return false;
    net_job_t *j = calloc(1, sizeof(*j));
    if (!j) return false;
    j->tb = r->cfg->testbed;
    j->f = x->f;
    snprintf(j->host, sizeof(j->host), "%s", host);
    atomic_init(&j->done, false);
    if (pthread_create(&j->th, NULL, net_main, j) != 0) {
        free(j);
        return false;
    }
    x->net = j;
    return true;
}

/* One armed fault at attempt tau (> the step's first). */
static void fault_once(prun_t *r, armed_fault_t *x, uint64_t tau)
{
    if (x->holding) {
        if (x->net ? atomic_load(&x->net->done) : dcr_clock_ns() >= x->until_ns) release(r, x);
        return;
    }
    if (x->fired) return;
    bool hit = false;
    if (x->f.kind == DCR_FAULT_CORRUPT) {
        hit = corrupt_object(r, &x->f, tau);
    } else if (x->f.kind == DCR_FAULT_DELAY) {
        /* Once the node joined: its reception stalls (one stall at a time
         * per node: a second SIGCONT would end the first early). */
        for (int i = 0; i < r->nfaults; i++)
            if (r->faults[i].holding && r->faults[i].f.kind == DCR_FAULT_DELAY &&
                r->faults[i].f.target == x->f.target)
                return;
        int pid = dcr_role_launcher_node_pid(r->launcher, x->f.target);
        dcr_node_report_t rep;
        memset(&rep, 0, sizeof(rep));
        hit = pid > 0 && dcr_node_report_get(r->fault_control, x->f.target, &rep) == DCR_OK &&
              rep.pid == (int32_t)pid && rep.tau > r->faults_after_tau &&
              rep.phase == DCR_NODE_JOINED &&
              dcr_role_launcher_pause_node(r->launcher, x->f.target, pid, true);
        x->pid = pid;
        if (hit)
            DCR_LOG_WARN("faults: delay: rollout-node %d (pid %d) stopped for %d ms in attempt "
                         "%" PRIu64,
                         x->f.target, pid, x->f.ms, rep.tau);
    } else if (is_net_kind(x->f.kind)) {
        hit = r->cfg->testbed && net_start(r, x);
    } else if (x->f.kind == DCR_FAULT_CONTROL_BUSY) {
        hit = control_lock(r, x);
        if (hit)
            DCR_LOG_WARN("faults: control_busy: the control plane locked for %d ms in attempt "
                         "%" PRIu64,
                         x->f.ms, tau);
    }
    if (!hit) return;
    x->fired = true;
    if (!x->net) r->fired[x->f.kind]++; /* a network fault's: once it took (release) */
    x->holding = x->f.kind != DCR_FAULT_CORRUPT;
    x->until_ns = dcr_clock_ns() + (uint64_t)x->f.ms * 1000000ull;
}

static void faults_once(prun_t *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t tau = r->nfaults > 0 ? latest_tau(r->fault_control) : 0;
    for (int i = 0; tau > r->faults_after_tau && i < r->nfaults; i++)
        fault_once(r, &r->faults[i], tau);
    pthread_mutex_unlock(&r->lock);
}

/* Whether a network fault already drawn for this step acts on f's host. */
static bool net_host_taken(const prun_t *r, const dcr_fault_t *f)
{
    char host[16], other[16];
    net_host(r, f, host, sizeof(host));
    for (int i = 0; i < r->nfaults; i++) {
        if (!is_net_kind(r->faults[i].f.kind)) continue;
        net_host(r, &r->faults[i].f, other, sizeof(other));
        if (!strcmp(host, other)) return true;
    }
    return false;
}

/* On a testbed: delay or a network fault (see faults_run.h). A network
 * fault goes to a host no other network fault of the step acts on while
 * one is free: two on one host run one after the other (net_start), and
 * the second could find the step over and never fire. */
static dcr_fault_t draw_testbed_fault(prun_t *r)
{
    dcr_fault_kind_t kinds[] = {DCR_FAULT_DELAY, DCR_FAULT_LINK_DOWN, DCR_FAULT_NET_LOSS,
                                DCR_FAULT_PARTITION, DCR_FAULT_NET_REORDER};
    dcr_fault_t f = {.kind = kinds[dcr_rng_below(&r->rng, r->netem ? 5 : 4)], .target = -1};
    f.ms = STALL_MS_MIN + (int)dcr_rng_below(&r->rng, STALL_MS_SPAN);
    int nodes = r->bench.run.serve.nodes, hosts = r->bench.run.scenario.train.nodes + nodes;
    bool on_node = f.kind == DCR_FAULT_DELAY || f.kind == DCR_FAULT_PARTITION;
    int range = on_node ? nodes : hosts;
    f.target = (int)dcr_rng_below(&r->rng, (uint64_t)range);
    for (int k = 1; k < range && is_net_kind(f.kind) && net_host_taken(r, &f); k++)
        f.target = (f.target + 1) % range;
    if (f.kind == DCR_FAULT_NET_LOSS) f.count = 5 + (int)dcr_rng_below(&r->rng, 25);
    if (f.kind == DCR_FAULT_NET_REORDER) f.count = 10 + (int)dcr_rng_below(&r->rng, 40);
    return f;
}

/* Whether the testbed's kernel can reorder (netem): a reordering of 1% on
 * r0, undone at once; the script's line says why not. */
static bool testbed_has_netem(dcr_testbed_t *tb)
{
    const char *on[] = {"netem", "r0", "--reorder", "1", NULL}, *off[] = {"clear", "r0", NULL};
    bool ok = dcr_testbed_fault(tb, on) == DCR_OK;
    if (dcr_testbed_fault(tb, off) != DCR_OK) DCR_LOG_WARN("faults: %s", dcr_error_detail());
    if (!ok) DCR_LOG_WARN("faults: the testbed cannot reorder (no netem): net_reorder not drawn");
    return ok;
}

/* A random fault of a kind this process executes, from the run's seed. */
static dcr_fault_t draw_fault(prun_t *r)
{
    if (r->cfg->testbed) return draw_testbed_fault(r);
    /* Over the relay no payload is a file this process could corrupt. */
    bool relay = !strcmp(r->bench.run.transport, "relay");
    dcr_fault_kind_t kinds[] = {DCR_FAULT_CORRUPT, DCR_FAULT_DELAY, DCR_FAULT_CONTROL_BUSY};
    int first = relay ? 1 : 0, n = (r->sqlite ? 3 : 2) - first;
    dcr_fault_t f = {.kind = kinds[first + (int)dcr_rng_below(&r->rng, (uint64_t)n)], .target = -1};
    f.ms = STALL_MS_MIN + (int)dcr_rng_below(&r->rng, STALL_MS_SPAN);
    if (f.kind == DCR_FAULT_DELAY)
        f.target = (int)dcr_rng_below(&r->rng, (uint64_t)r->bench.run.serve.nodes);
    return f;
}

/* The step's faults (drawn and planned), for attempts after tau. */
static void arm_faults(prun_t *r, uint64_t tau)
{
    const dcr_faults_run_config_t *run = &r->cfg->run;
    pthread_mutex_lock(&r->lock);
    r->nfaults = r->ncorrupted = 0;
    r->faults_after_tau = tau;
    for (int k = 0; k < run->faults_per_step && r->nfaults < MAX_FAULTS; k++)
        r->faults[r->nfaults++] = (armed_fault_t){.f = draw_fault(r)};
    for (int k = 0; k < run->nplan && r->nfaults < MAX_FAULTS; k++)
        if (run->plan[k].step == r->step)
            r->faults[r->nfaults++] = (armed_fault_t){.f = run->plan[k].fault};
    for (int i = 0; i < r->nfaults; i++) r->drawn[r->faults[i].f.kind]++;
    pthread_mutex_unlock(&r->lock);
}

/* After the step: holds end, unfired faults are dropped. */
static void disarm_faults(prun_t *r)
{
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->nfaults; i++) release(r, &r->faults[i]);
    r->nfaults = 0;
    pthread_mutex_unlock(&r->lock);
}

/* ---- the watcher threads ---- */

/* Kills and faults each have a thread: a kill waits until the death is
 * reported in the control plane, which waits for a control_busy lock,
 * whose release must not wait for that kill. */
static void *kills_main(void *arg)
{
    prun_t *r = arg;
    while (!atomic_load(&r->watch_stop)) {
        kill_once(r);
        nap_ns(WATCH_POLL_NS);
    }
    return NULL;
}

static void *faults_main(void *arg)
{
    prun_t *r = arg;
    while (!atomic_load(&r->watch_stop)) {
        faults_once(r);
        nap_ns(WATCH_POLL_NS);
    }
    return NULL;
}

static void stop_watcher(prun_t *r)
{
    atomic_store(&r->watch_stop, true);
    for (int i = 0; i < r->watching; i++) pthread_join(r->watchers[i], NULL);
    r->watching = 0;
    disarm_faults(r);
}

/* ---- the verifier's test (corrupt_digest) ---- */

/* A well-formed digests file of receiver 0 at version 1 whose middle
 * parameter's digest differs in one bit, so that the verifier's comparison
 * itself (not a checksum) must catch it. */
static dcr_status_t corrupt_digest(const char *workdir)
{
    char path[4300];
    dcr_rundir_digest_path(workdir, 1, 0, path, sizeof(path));
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

/* ---- our hooks around the launcher's ---- */

/* The apply markers on (the node processes look for their directory when
 * they start), the launcher's roles, then the watcher. */
static dcr_status_t hook_start(void *ctx, const char *workdir, const char *control, bool temporary)
{
    prun_t *r = ctx;
    snprintf(r->workdir, sizeof(r->workdir), "%s", workdir);
    snprintf(r->control_file, sizeof(r->control_file), "%s", control ? control : "");
    DCR_CHECK(dcr_rundir_kill_points_create(workdir));
    DCR_CHECK(r->inner.start(r->inner.ctx, workdir, control, temporary));
    const char *at = control ? control : r->bench.run.control_path;
    DCR_CHECK(dcr_role_control_open_at(at, workdir, &r->control));
    DCR_CHECK(dcr_role_control_open_at(at, workdir, &r->fault_control));
    DCR_CHECK(dcr_role_control_open_at(at, workdir, &r->arm_control));
    DCR_CHECK(draw_kills(r));
    void *(*mains[2])(void *) = {kills_main, faults_main};
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&r->watchers[i], NULL, mains[i], r) != 0)
            return dcr_error_set(DCR_EIO, "cannot start the kill and fault watcher threads");
        r->watching = i + 1;
    }
    return DCR_OK;
}

/* One step: arm its kill and faults, then the transition through the
 * coordinator process (failovers inside,
 * dcr_role_launcher_set_coordinator_kills). */
static dcr_status_t hook_refit(void *ctx, dcr_refit_result_t *out)
{
    prun_t *r = ctx;
    /* Between attempts: the joining node's process starts, refits go on. */
    if (r->cfg->join_at > 0 && r->step == r->cfg->join_at)
        DCR_CHECK(dcr_role_launcher_join(r->launcher));
    uint64_t tau0 = latest_tau(r->arm_control);
    arm_kill(r, tau0);
    arm_faults(r, tau0);
    dcr_status_t st = r->inner.refit(r->inner.ctx, out);
    disarm_faults(r);
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
    prun_t *r = ctx;
    stop_watcher(r); /* no kill or fault after the last step */
    if (r->cfg->join_at > 0) {
        r->joined = dcr_role_launcher_joined(r->launcher, JOIN_WAIT_MS, &r->join_version, NULL);
        if (!r->joined)
            return dcr_error_set(DCR_ETIMEOUT,
                                 "rollout node %d, started before step %d, did not join (no READY "
                                 "within %d ms of the last step)",
                                 r->bench.run.serve.nodes - 1, r->cfg->join_at, JOIN_WAIT_MS);
    }
    if (r->cfg->corrupt_digest && first <= 1 && last >= 1) DCR_CHECK(corrupt_digest(workdir));
    return r->inner.verify(r->inner.ctx, workdir, first, last, ok);
}

static void hook_stop(void *ctx)
{
    prun_t *r = ctx;
    stop_watcher(r);
    r->inner.stop(r->inner.ctx);
    /* Every node process has stopped: its restore records are complete. */
    if (r->workdir[0] && dcr_restore_causes(r->workdir, r->causes) != DCR_OK)
        DCR_LOG_WARN("faults: restore causes: %s", dcr_error_detail());
    /* Without its restore figures (a warning said why): where it joined. */
    if (r->joined && !dcr_role_launcher_join_result(r->launcher, &r->join))
        r->join =
            (dcr_role_join_t){.node = r->bench.run.serve.nodes - 1, .version = r->join_version};
}

/* ---- runs ---- */

static dcr_status_t check_config(const dcr_faults_processes_config_t *cfg)
{
    const dcr_faults_run_config_t *run = &cfg->run;
    if (run->steps < 1 || run->kill_every < 0 || run->faults_per_step < 0 ||
        cfg->coordinator_every < 0)
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes: %d steps, kill every %d, %d faults per step, "
                             "coordinator kill every %d: expected >= 1 step, no negative count",
                             run->steps, run->kill_every, run->faults_per_step,
                             cfg->coordinator_every);
    if (cfg->join_at < 0 ||
        (cfg->join_at > 0 && (cfg->join_at >= run->steps || run->bench.run.serve.nodes < 2)))
        return dcr_error_set(DCR_EINVAL,
                             "--join-at %d: expected a step in 1..%d (below --steps) and at least "
                             "2 rollout nodes (got %d)",
                             cfg->join_at, run->steps - 1, run->bench.run.serve.nodes);
    /* The run configuration's own rules (transport, sync RL, anchors within
     * the window), as dcr bench --processes checks them. */
    DCR_CHECK(dcr_bench_config_check(&run->bench, true));
    bool relay = !strcmp(run->bench.run.transport, "relay");
    /* A node that starts late has no place in a relay tree laid out at
     * the start, and a testbed's roles share its S3 store. */
    if (relay && (cfg->join_at > 0 || cfg->testbed))
        return dcr_error_set(DCR_EINVAL,
                             "faults --processes --transport relay: %s needs "
                             "--transport objstore",
                             cfg->join_at > 0 ? "--join-at" : "--testbed");
    bool sqlite = run->bench.run.control_path == NULL;
    for (int k = 0; k < run->nplan; k++) {
        dcr_fault_kind_t kind = run->plan[k].fault.kind;
        if (relay && kind == DCR_FAULT_CORRUPT)
            return dcr_error_set(DCR_EINVAL, "fault corrupt acts on the object store's files: it "
                                             "needs --transport objstore");
        if (cfg->testbed && (kind == DCR_FAULT_DELAY || is_net_kind(kind))) continue;
        if (is_net_kind(kind))
            return dcr_error_set(DCR_EINVAL, "fault %s needs a testbed (--testbed netns)",
                                 dcr_fault_kind_name(kind));
        if (cfg->testbed)
            return dcr_error_set(DCR_EINVAL,
                                 "fault %s cannot reach a testbed run (expected delay, link_down, "
                                 "net_loss, net_reorder or partition)",
                                 dcr_fault_kind_name(kind));
        if (!dcr_fault_kind_reaches_processes(kind) || (kind == DCR_FAULT_CONTROL_BUSY && !sqlite))
            return dcr_error_set(DCR_EINVAL,
                                 "fault %s cannot reach a processes run (expected corrupt, delay, "
                                 "or control_busy on the SQLite control plane)",
                                 dcr_fault_kind_name(kind));
    }
#ifndef DCR_HAVE_MPI
    return dcr_error_set(DCR_EUNSUPPORTED, "faults --processes needs the owners as an OpenMPI "
                                           "job: this dcr was built without MPI");
#else
    return DCR_OK;
#endif
}

static dcr_status_t make_launcher(prun_t *r)
{
    DCR_CHECK(
        dcr_role_launcher_create(&r->bench.run, r->cfg->run_args, r->cfg->nargs, &r->launcher));
    if (r->cfg->join_at > 0) dcr_role_launcher_set_join(r->launcher, r->bench.run.serve.nodes - 1);
    dcr_role_launcher_set_owners(r->launcher, true);
    dcr_role_launcher_set_restart(r->launcher, true);
    dcr_role_launcher_set_coordinator_kills(r->launcher, r->cfg->coordinator_every);
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

/* The receivers the verifier checked at `version` (refit i of a run
 * without warm-up commits version i + 1): a joined node's are checked from
 * the version it joined at on (deploy/verify_role.c), since it
 * held none before. */
static int checks_of(const prun_t *r, uint64_t version, int receivers, int per)
{
    bool absent = r->cfg->join_at > 0 && (!r->joined || version < r->join_version);
    return absent ? receivers - per : receivers;
}

/* The summary from the bench's result and our counts. */
static void summarize(prun_t *r, const dcr_bench_result_t *res, dcr_faults_processes_summary_t *o)
{
    dcr_faults_summary_t *s = &o->s;
    s->steps = r->step;
    s->attempts = r->attempts;
    s->retries = r->retries;
    s->commits = r->commits;
    s->lost = r->lost + (r->cfg->run.steps - r->step);
    s->version = r->version;
    memcpy(o->faults_drawn, r->drawn, sizeof(o->faults_drawn));
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) {
        s->faults_by_kind[k] = r->fired[k];
        s->faults += r->fired[k];
    }
    int nodes = res->node_processes > 0 ? res->node_processes : 1;
    int per = res->receivers / nodes;
    for (int i = 0; i < res->nrefits; i++) {
        s->checks += checks_of(r, (uint64_t)i + 1, res->receivers, per);
        s->mismatches += !res->refits[i].bit_exact;
    }
    o->sigkills = dcr_role_launcher_sigkills(r->launcher);
    o->restarts = dcr_role_launcher_restarts(r->launcher);
    o->coordinator_kills = dcr_role_launcher_coordinator_kills(r->launcher);
    o->coordinator_restarts = dcr_role_launcher_coordinator_restarts(r->launcher);
    o->owner_processes = dcr_role_launcher_owner_processes(r->launcher);
    memcpy(o->sigkills_by_point, r->by_point, sizeof(r->by_point));
    o->sigkills_by_point[DCR_FAULTS_KILL_COORDINATOR] = o->coordinator_kills;
    o->kills_drawn = r->due;
    o->node_processes = res->node_processes;
    s->failovers = o->coordinator_restarts;
    s->kills = o->sigkills * per;
    s->restores = o->restarts * per;
    /* The bench run read every node process's restore records. */
    memcpy(o->restores_by_kind, res->restores_by_kind, sizeof(o->restores_by_kind));
    memcpy(o->restore_bytes, res->restore_bytes, sizeof(o->restore_bytes));
    memcpy(o->restore_dense_bytes, res->restore_dense_bytes, sizeof(o->restore_dense_bytes));
    memcpy(o->restore_s, res->restore_s, sizeof(o->restore_s));
    memcpy(o->restores_by_cause, r->causes, sizeof(o->restores_by_cause));
    if (r->joined) {
        o->join = r->join;
        o->join.at_step = r->cfg->join_at;
    }
}

dcr_status_t dcr_faults_processes_run(const dcr_faults_processes_config_t *cfg,
                                      dcr_faults_processes_summary_t *out_p)
{
    DCR_CHECK(check_config(cfg));
    prun_t r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.bench = cfg->run.bench;
    r.bench.warmup = 0;
    r.bench.refits = cfg->run.steps;
    r.bench.verify = true;
    r.bench.keep_trace = false;
    r.sqlite = cfg->run.bench.run.control_path == NULL;
    dcr_rng_seed(&r.rng, r.bench.run.seed ^ 0x6b696c6c73ull); /* "kills" */
    pthread_mutex_init(&r.lock, NULL);
    dcr_bench_result_t res;
    memset(&res, 0, sizeof(res));
    dcr_status_t st = make_launcher(&r);
    if (st == DCR_OK && cfg->testbed) {
        st = dcr_testbed_place_roles(cfg->testbed, r.launcher,
                                     r.bench.run.scenario.train.gpus_per_node);
        r.netem = testbed_has_netem(cfg->testbed);
    }
    if (st == DCR_OK) st = dcr_bench_run(&r.bench, &res);
    stop_watcher(&r);
    dcr_faults_processes_summary_t out;
    memset(&out, 0, sizeof(out));
    if (st == DCR_OK) summarize(&r, &res, &out);
    dcr_bench_result_free(&res);
    dcr_role_launcher_destroy(r.launcher);
    dcr_control_destroy(r.control);
    dcr_control_destroy(r.fault_control);
    dcr_control_destroy(r.arm_control);
    free(r.kills);
    pthread_mutex_destroy(&r.lock);
    DCR_CHECK(st);
    *out_p = out;
    return DCR_OK;
}

/* The role flags with --seed `seed` (replaced or appended) and, when
 * store is not NULL, --store `store` in place of the one given; borrowed
 * strings: free the array only. NULL when out of memory. */
static char **args_with_seed(const dcr_faults_processes_config_t *cfg, const char *seed,
                             const char *store, int *n_p)
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
        } else if (store && !strcmp(cfg->run_args[i], "--store") && i + 1 < cfg->nargs) {
            a[n++] = (char *)store;
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

/* a += b, for campaign totals (process counts: b's). */
static void summary_add(dcr_faults_processes_summary_t *a, const dcr_faults_processes_summary_t *b)
{
    dcr_faults_summary_add(&a->s, &b->s);
    a->sigkills += b->sigkills;
    for (int k = 0; k < DCR_FAULTS_KILL_POINTS; k++)
        a->sigkills_by_point[k] += b->sigkills_by_point[k];
    a->kills_drawn += b->kills_drawn;
    a->restarts += b->restarts;
    a->coordinator_kills += b->coordinator_kills;
    a->coordinator_restarts += b->coordinator_restarts;
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        a->restores_by_kind[k] += b->restores_by_kind[k];
        a->restore_bytes[k] += b->restore_bytes[k];
        a->restore_dense_bytes[k] += b->restore_dense_bytes[k];
        a->restore_s[k] += b->restore_s[k];
    }
    for (int c = 0; c < DCR_RESTORE_CAUSES; c++) a->restores_by_cause[c] += b->restores_by_cause[c];
    a->join = b->join; /* the last run's */
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) a->faults_drawn[k] += b->faults_drawn[k];
    a->node_processes = b->node_processes;
    a->owner_processes = b->owner_processes;
}

dcr_status_t dcr_faults_processes_campaign(const dcr_faults_processes_config_t *cfg, int seeds,
                                           uint64_t base_seed,
                                           dcr_faults_processes_summary_t *out_p)
{
    if (seeds < 1) return dcr_error_set(DCR_EINVAL, "campaign needs >= 1 seed, got %d", seeds);
    dcr_faults_processes_summary_t total;
    memset(&total, 0, sizeof(total));
    for (int i = 0; i < seeds; i++) {
        dcr_faults_processes_config_t run = *cfg;
        char seed[32], store[64];
        run.run.bench.run.seed = base_seed + (uint64_t)i;
        snprintf(seed, sizeof(seed), "%" PRIu64, run.run.bench.run.seed);
        /* On a testbed every run shares its S3 store: each its own prefix,
         * so that no run restores from another's retained versions. */
        snprintf(store, sizeof(store), "s3://dcr/faults-%s", seed);
        if (cfg->testbed) run.run.bench.run.store = store;
        char **args = args_with_seed(cfg, seed, cfg->testbed ? store : NULL, &run.nargs);
        if (!args) return dcr_error_set(DCR_ENOMEM, "role arguments");
        run.run_args = args;
        DCR_LOG_INFO("faults: processes campaign run %d of %d: seed %s", i + 1, seeds, seed);
        dcr_faults_processes_summary_t s;
        dcr_status_t st = dcr_faults_processes_run(&run, &s);
        free(args);
        if (st != DCR_OK) {
            dcr_error_prefix("campaign seed %s (processes): ", seed);
            return st;
        }
        summary_add(&total, &s);
    }
    *out_p = total;
    return DCR_OK;
}
