/* Child processes of dcr bench --processes: rollout nodes, the verifier,
 * the janitor of a temporary run directory. */
#include "deploy/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/coord.h"
#include "dcr/log.h"
#include "dcr/parties.h"
#include "dcr/rollout_node.h"
#include "dcr/trace.h"
#include "deploy/restorer.h"
#include "deploy/role_memory.h"
#include "deploy/roles.h"
#include "workloads/harness/workdir.h"

#define STOP_GRACE_MS    5000 /* SIGTERM to SIGKILL */
#define MONITOR_POLL_NS  20000000L
#define KILL_POLL_NS     2000000L /* watching reports for a kill point */
#define READY_TIMEOUT_MS 120000   /* a node's world, dense load and prewarm */
#define JOIN_WAIT_MS     120000   /* a joining node: its world, anchor or dense load, replay */

typedef struct child {
    dcr_process_t proc; /* proc.err_fd: the read end of its stderr */
    char role[48];
    pthread_t prefixer; /* copies proc.err_fd to our stderr, prefixed */
    bool prefixing;
    bool gone_reported; /* the monitor reported its death in the control plane */
} child_t;

/* argv[0..n) in front of the command line of the process named `role`. */
struct role_prefix {
    char role[48];
    char **argv;
    int n;
};

struct dcr_role_launcher {
    const dcr_run_config_t *run;
    char exe[4096];
    char **args; /* the run flags */
    int nargs;
    char workdir[4096];
    /* The control plane's file when the bench chose it (start_nodes): every
     * role gets it as --control; empty: the run's own. */
    char control[4200];
    dcr_bench_processes_t hooks;
    child_t *nodes;
    int nnodes;
    dcr_process_t janitor; /* pid -1 before it started */
    int janitor_fd;        /* write end: its EOF is our end */
    pthread_t monitor;
    bool monitoring;
    atomic_bool stopping;
    bool restart;
    atomic_int restarts;
    /* Real kills (--sigkill-every): see maybe_kill. */
    int kill_every;
    atomic_int sigkills;
    bool armed;
    int kill_node, kill_point;
    uint64_t kill_version, armed_tau;
    pthread_mutex_t lock; /* waitpid of node children */
    /* Owners as an MPI job (dcr_role_launcher_set_owners): mpirun's child. */
    bool owner_job;
    child_t owners;
    bool owners_started;
    /* The coordinator process (with the owner job): requests on coord_in,
     * answers on coord_out (see refit_remote). */
    child_t coord;
    bool coord_started;
    FILE *coord_in, *coord_out;
    int coord_every; /* dcr_role_launcher_set_coordinator_kills */
    int refits;      /* transitions the coordinator processes finished */
    atomic_int coord_kills, coord_restarts;
    /* Spawn prefixes by role name (dcr_role_launcher_set_prefix) and the
     * owner job's transport arguments (dcr_role_launcher_set_mpirun_args). */
    struct role_prefix *prefixes;
    int nprefixes;
    /* Memory per role (role_memory.h), gathered when the roles stopped;
     * NULL before. */
    json_t *memory;
    char **mpi_args; /* NULL: the one-host shared-memory arguments */
    int nmpi_args;
    /* An elastic join (dcr_role_launcher_set_join): the node started late,
     * -1 for none; when its process started and what it joined at. */
    int join_node;
    bool join_started;
    atomic_bool join_done; /* set by the monitor once it saw the node READY */
    double join_t0, join_s;
    uint64_t join_version;
    /* dcr_role_launcher_set_join_at: the monitor starts the node once this
     * version is committed (0: the harness calls dcr_role_launcher_join). */
    uint64_t join_at_version;
    atomic_bool join_gave_up; /* its start failed: no join will come */
    /* The node's receivers' restores at the join, read once it stopped. */
    bool join_read;
    uint64_t join_kinds[DCR_RESTORE_KINDS], join_bytes, join_dense_bytes;
};

/* The run's control plane, opened by the launcher: where the bench put it
 * when it chose (l->control), else the run's own. */
static dcr_status_t launcher_control_open(const dcr_role_launcher_t *l, dcr_control_t **out_p)
{
    return dcr_role_control_open_at(l->control[0] ? l->control : l->run->control_path, l->workdir,
                                    out_p);
}

static void nap_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* ---- stderr, prefixed ---- */

static void *prefix_main(void *arg)
{
    child_t *c = arg;
    char buf[4096], line[8192];
    size_t used = 0;
    ssize_t n;
    while ((n = read(c->proc.err_fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
        for (ssize_t i = 0; i < n; i++) {
            if (used < sizeof(line) - 1) line[used++] = buf[i];
            if (buf[i] != '\n' && used < sizeof(line) - 1) continue;
            line[used] = '\0';
            fprintf(stderr, "[%s] %s%s", c->role, line, line[used - 1] == '\n' ? "" : "\n");
            used = 0;
        }
    }
    if (used > 0) {
        line[used] = '\0';
        fprintf(stderr, "[%s] %s\n", c->role, line);
    }
    return NULL;
}

/* ---- spawning ---- */

static const struct role_prefix *find_prefix(const dcr_role_launcher_t *l, const char *role)
{
    for (int i = 0; i < l->nprefixes; i++)
        if (!strcmp(l->prefixes[i].role, role)) return &l->prefixes[i];
    return NULL;
}

/* `prefix... pre... exe head... <run flags>` for the role (malloc'd,
 * NULL-terminated, borrowed strings): the role's spawn prefix (e.g. `ip
 * netns exec NS`) first, which must exec the rest in place, so that the pid
 * and PR_SET_PDEATHSIG are the role's own; then a launcher such as mpirun. */
static char **role_argv(const dcr_role_launcher_t *l, const char *role, char *const *pre, int npre,
                        char *const *head, int nhead)
{
    const struct role_prefix *rp = find_prefix(l, role);
    int nfix = rp ? rp->n : 0, n = 0;
    char **argv = calloc((size_t)(nfix + npre + 1 + nhead + l->nargs + 2 + 1), sizeof(char *));
    if (!argv) return NULL;
    for (int i = 0; i < nfix; i++) argv[n++] = rp->argv[i];
    for (int i = 0; i < npre; i++) argv[n++] = pre[i];
    argv[n++] = (char *)l->exe;
    for (int i = 0; i < nhead; i++) argv[n++] = head[i];
    for (int i = 0; i < l->nargs; i++) argv[n++] = l->args[i];
    if (l->control[0]) {
        argv[n++] = "--control";
        argv[n++] = (char *)l->control;
    }
    return argv;
}

/* Starts the role (role_argv; the first program found on PATH when it is
 * a bare name, dcr/spawn.h) with env_add in its environment; its stderr
 * goes through a prefixer, its stdin from *in_fd_p and its stdout to
 * *out_fd_p when those are not NULL (else ours and its stderr). The child
 * gets `deathsig` when we die. */
static dcr_status_t spawn_with(dcr_role_launcher_t *l, const char *role, char *const *pre, int npre,
                               const char *const *env_add, int deathsig, char *const *head,
                               int nhead, child_t *c, int *in_fd_p, int *out_fd_p)
{
    char **argv = role_argv(l, role, pre, npre, head, nhead);
    if (!argv) return dcr_error_set(DCR_ENOMEM, "arguments of %s", role);
    /* Our stdout carries the results (--json): a role writes only to its
     * own pipes. */
    dcr_spawn_options_t o = {.env_add = env_add,
                             .in = {in_fd_p ? DCR_SPAWN_PIPE : DCR_SPAWN_INHERIT},
                             .out = {out_fd_p ? DCR_SPAWN_PIPE : DCR_SPAWN_STDERR},
                             .err = {DCR_SPAWN_PIPE},
                             .deathsig = deathsig};
    dcr_process_t p;
    dcr_status_t st = dcr_spawn(&o, argv, &p);
    free(argv);
    if (st != DCR_OK) {
        dcr_error_prefix("%s: ", role);
        return st;
    }
    memset(c, 0, sizeof(*c));
    c->proc = p;
    snprintf(c->role, sizeof(c->role), "%s", role);
    c->prefixing = pthread_create(&c->prefixer, NULL, prefix_main, c) == 0;
    if (out_fd_p) *out_fd_p = p.out_fd;
    if (in_fd_p) *in_fd_p = p.in_fd;
    c->proc.in_fd = c->proc.out_fd = -1; /* the caller's now */
    return DCR_OK;
}

static dcr_status_t spawn(dcr_role_launcher_t *l, const char *role, char *const *head, int nhead,
                          child_t *c, int *out_fd_p)
{
    return spawn_with(l, role, NULL, 0, NULL, SIGKILL, head, nhead, c, NULL, out_fd_p);
}

static void child_finish(child_t *c)
{
    if (c->prefixing) pthread_join(c->prefixer, NULL);
    c->prefixing = false;
    dcr_process_close(&c->proc);
}

/* ---- the janitor: removes a temporary run directory once we are gone ---- */

dcr_status_t dcr_role_spawn_guardian(const char *what, char *const *sh_argv, dcr_process_t *p,
                                     int *fd_p)
{
    /* stdin is the pipe: EOF when we have ended, however. Its output goes
     * to /dev/null, so it holds no pipe of ours open after we end. */
    dcr_spawn_options_t o = {.exe = "/bin/sh",
                             .what = what,
                             .in = {DCR_SPAWN_PIPE},
                             .out = {DCR_SPAWN_DEVNULL},
                             .err = {DCR_SPAWN_DEVNULL},
                             .detach = true};
    DCR_CHECK(dcr_spawn(&o, sh_argv, p));
    *fd_p = p->in_fd;
    p->in_fd = -1;
    return DCR_OK;
}

/* The janitor: once the launcher is gone (the children die with it:
 * PDEATHSIG), the temporary run directory goes, and the folder of a
 * control plane the bench chose (a temporary one of its own too). */
static dcr_status_t start_janitor(dcr_role_launcher_t *l)
{
    char control_dir[sizeof l->control];
    snprintf(control_dir, sizeof control_dir, "%s", l->control);
    char *slash = strrchr(control_dir, '/');
    if (slash)
        *slash = '\0';
    else
        control_dir[0] = '\0';
    char *argv[] = {
        "sh",       "-c",        "cat >/dev/null; sleep 0.5; rm -rf -- \"$0\" ${1:+\"$1\"}",
        l->workdir, control_dir, NULL};
    return dcr_role_spawn_guardian("janitor", argv, &l->janitor, &l->janitor_fd);
}

/* ---- the owners: an MPI job ---- */

/* The run's training ranks: one owner process each. */
static int owner_ranks(const dcr_role_launcher_t *l)
{
    const dcr_train_config_t *t = &l->run->scenario.train;
    return t->nodes * t->gpus_per_node;
}

/* The owner job's environment. OpenMPI's session folder goes into the run
 * directory, and so do the shared-memory segments of its ranks (btl vader)
 * when the run directory is in memory: so that whatever ends the run, a
 * SIGKILL included, removing the run directory removes them too (by
 * default they are TMPDIR/ompi.* and /dev/shm/vader_segment.*, which a
 * killed job leaves behind). As root, mpirun refuses to start without
 * OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM): set for the job only. */
typedef struct owner_env {
    char session[4200], backing[4200];
    const char *vars[5];
} owner_env_t;

static const char *const *owner_job_env(const dcr_role_launcher_t *l, owner_env_t *e)
{
    int n = 0;
    snprintf(e->session, sizeof e->session, "OMPI_MCA_orte_tmpdir_base=%s", l->workdir);
    e->vars[n++] = e->session;
    if (dcr_workdir_is_memory(l->workdir)) {
        snprintf(e->backing, sizeof e->backing, "OMPI_MCA_btl_vader_backing_directory=%s",
                 l->workdir);
        e->vars[n++] = e->backing;
    }
    if (geteuid() == 0) {
        e->vars[n++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
        e->vars[n++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    e->vars[n] = NULL;
    return e->vars;
}

/* `mpirun -np P dcr owner --workdir W <run flags>` on this host: shared
 * memory between the ranks (btl self,vader; no single-copy mechanism, which
 * needs ptrace rights containers often lack), no core binding and
 * oversubscription allowed (the ranks share this host with every other
 * role), each rank's lines tagged by mpirun with its rank, in the
 * environment of owner_job_env. mpirun gets SIGTERM when we die, on which
 * it ends its ranks. */
static dcr_status_t spawn_owners(dcr_role_launcher_t *l)
{
    char np[16];
    snprintf(np, sizeof(np), "%d", owner_ranks(l));
    char *one_host[] = {"--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism",
                        "none"};
    char *const *net = l->mpi_args ? l->mpi_args : one_host;
    int nnet = l->mpi_args ? l->nmpi_args : (int)(sizeof(one_host) / sizeof(one_host[0]));
    char *base[] = {"mpirun", "-np", np, "--oversubscribe", "--bind-to", "none", "--tag-output"};
    enum { NBASE = sizeof(base) / sizeof(base[0]) };
    char **pre = calloc((size_t)(NBASE + nnet), sizeof(char *));
    if (!pre) return dcr_error_set(DCR_ENOMEM, "arguments of the owner job");
    memcpy(pre, base, sizeof(base));
    for (int i = 0; i < nnet; i++) pre[NBASE + i] = net[i];
    char *head[] = {"owner", "--workdir", l->workdir};
    owner_env_t env;
    pthread_mutex_lock(&l->lock);
    dcr_status_t st = spawn_with(l, "owners", pre, NBASE + nnet, owner_job_env(l, &env), SIGTERM,
                                 head, 3, &l->owners, NULL, NULL);
    free(pre);
    pthread_mutex_unlock(&l->lock);
    if (st == DCR_OK) l->owners_started = true;
    return st;
}

/* The owner job ended during the run: say so in the control plane for it
 * (FAILED with a tau above every attempt), so that the coordinator fails
 * at once instead of waiting out its stall timeout. */
static void report_owners_gone(dcr_role_launcher_t *l, dcr_control_t *control)
{
    char how[64];
    dcr_process_describe(l->owners.proc.status, how, sizeof(how));
    DCR_LOG_ERROR("the owner job (mpirun, pid %d) %s", (int)l->owners.proc.pid, how);
    if (!control) return;
    dcr_owners_report_t r;
    memset(&r, 0, sizeof(r));
    r.phase = DCR_OWNERS_FAILED;
    r.tau = DCR_CONTROL_VALUE_MAX;
    snprintf(r.why, sizeof(r.why), "the owner job (mpirun, pid %d) %s", (int)l->owners.proc.pid,
             how);
    dcr_owners_report_put(control, &r);
}

static void stop_child(child_t *c)
{
    if (!c->proc.reaped) dcr_process_stop(&c->proc, 0, STOP_GRACE_MS);
    child_finish(c);
}

/* ---- watching the node processes ---- */

/* A node process died while the run needed it: say so in the control plane
 * on its behalf, so that the coordinator fails the attempt at once. */
static void report_gone(dcr_role_launcher_t *l, dcr_control_t *control, int node, const child_t *c,
                        bool restarting)
{
    char how[64];
    dcr_process_describe(c->proc.status, how, sizeof(how));
    DCR_LOG_ERROR("rollout-node %d (pid %d) %s", node, (int)c->proc.pid, how);
    if (!control) return;
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.node = (uint32_t)node;
    r.phase = restarting ? DCR_NODE_RESTARTING : DCR_NODE_GONE;
    r.pid = (int32_t)c->proc.pid;
    snprintf(r.why, sizeof(r.why), "process %d %s", (int)c->proc.pid, how);
    dcr_control_attempt_t a;
    if (dcr_control_attempt(control, 0, &a) == DCR_OK) r.tau = a.tau;
    dcr_node_report_put(control, &r);
}

static dcr_status_t spawn_node(dcr_role_launcher_t *l, int i)
{
    char node[16], role[48];
    snprintf(node, sizeof(node), "%d", i);
    snprintf(role, sizeof(role), "rollout-node %d", i);
    /* Resident files (live: the weights move into them once, then a
     * commit writes a header): only when a restarted process can use them. */
    char *head[] = {"rollout-node", "--node", node, "--workdir", l->workdir, "--resident"};
    return spawn(l, role, head, l->restart ? 6 : 5, &l->nodes[i], NULL);
}

/* A new process in the dead one's place. It is a child of the monitor
 * thread: PR_SET_PDEATHSIG follows the thread that forked, so it dies when
 * the monitor ends (at stop), as the others die with the launcher. */
static void restart_node(dcr_role_launcher_t *l, int i)
{
    child_finish(&l->nodes[i]);
    pthread_mutex_lock(&l->lock);
    dcr_status_t st = spawn_node(l, i);
    pthread_mutex_unlock(&l->lock);
    if (st != DCR_OK) {
        DCR_LOG_ERROR("restarting rollout-node %d: %s", i, dcr_error_detail());
        l->nodes[i].proc.reaped = true;
        return;
    }
    atomic_fetch_add(&l->restarts, 1);
    DCR_LOG_WARN("rollout-node %d restarted as pid %d", i, (int)l->nodes[i].proc.pid);
}

/* Real kills: after every kill_every-th committed version the next node in
 * turn gets SIGKILL at the next point in turn, as this thread sees its
 * reports (every 2 ms): "joined" (it began the next attempt on its
 * receivers and opened it; delivery starts once every node has) or "done"
 * (its receivers applied every payload and acknowledged; the joint commit
 * may or may not have happened yet). The restart brings it back. */
static void maybe_kill(dcr_role_launcher_t *l, dcr_control_t *control)
{
    static const char *const points[] = {"joined", "done"};
    if (!l->armed) {
        dcr_commit_record_t rec;
        if (dcr_control_read(control, &rec) != DCR_OK || rec.version == 0 ||
            rec.version % (uint64_t)l->kill_every || rec.version == l->kill_version)
            return;
        int k = atomic_load(&l->sigkills);
        l->kill_version = rec.version;
        l->armed_tau = rec.attempt;
        l->kill_node = k % l->nnodes;
        l->kill_point = (k / l->nnodes) % 2;
        l->armed = true;
        return;
    }
    dcr_node_report_t r;
    if (dcr_node_report_get(control, l->kill_node, &r) != DCR_OK) return;
    pthread_mutex_lock(&l->lock);
    child_t *c = &l->nodes[l->kill_node];
    bool hit = !c->proc.reaped && r.pid == (int32_t)c->proc.pid && r.tau > l->armed_tau &&
               r.phase == (l->kill_point ? DCR_NODE_DONE : DCR_NODE_JOINED);
    if (hit) dcr_process_kill(&c->proc, SIGKILL);
    pthread_mutex_unlock(&l->lock);
    if (!hit) return;
    atomic_fetch_add(&l->sigkills, 1);
    l->armed = false;
    DCR_LOG_WARN("SIGKILL to rollout-node %d (pid %d) at %s of attempt %llu", l->kill_node,
                 (int)r.pid, points[l->kill_point], (unsigned long long)r.tau);
}

static dcr_status_t write_joined(const dcr_role_launcher_t *l, int node, uint64_t version);

/* The monitor's look at a joining node: its first READY report (with its
 * pid) is the join, at the version it names. */
static void poll_join(dcr_role_launcher_t *l, dcr_control_t *control)
{
    dcr_node_report_t r;
    int pid = dcr_role_launcher_node_pid(l, l->join_node);
    if (pid == 0 || dcr_node_report_get(control, l->join_node, &r) != DCR_OK ||
        r.pid != (int32_t)pid || r.phase != DCR_NODE_READY)
        return;
    if (write_joined(l, l->join_node, r.version) != DCR_OK) {
        DCR_LOG_WARN("rollout-node %d joined, but: %s", l->join_node, dcr_error_detail());
        return;
    }
    l->join_version = r.version;
    l->join_s = dcr_clock_s() - l->join_t0;
    atomic_store(&l->join_done, true);
    DCR_LOG_INFO("rollout-node %d joined at version %llu, %.3f s after its start", l->join_node,
                 (unsigned long long)r.version, l->join_s);
}

/* dcr_role_launcher_set_join_at: the node's process starts once the
 * version is committed; the attempts prepared after it is READY include it.
 * A start that fails is logged, and the verification fails for want of
 * the join (verify_versions). */
static void join_when_due(dcr_role_launcher_t *l, dcr_control_t *control)
{
    dcr_commit_record_t rec;
    if (dcr_control_read(control, &rec) != DCR_OK || rec.version < l->join_at_version) return;
    if (dcr_role_launcher_join(l) != DCR_OK) {
        DCR_LOG_ERROR("rollout-node %d could not join: %s", l->join_node, dcr_error_detail());
        atomic_store(&l->join_gave_up, true);
    }
}

static void *monitor_main(void *arg)
{
    dcr_role_launcher_t *l = arg;
    dcr_control_t *control = NULL;
    if (launcher_control_open(l, &control) != DCR_OK) control = NULL;
    while (!atomic_load(&l->stopping)) {
        for (int i = 0; i < l->nnodes; i++) {
            child_t *c = &l->nodes[i];
            pthread_mutex_lock(&l->lock);
            bool died = !c->proc.reaped && dcr_process_wait(&c->proc, 0) == DCR_OK;
            pthread_mutex_unlock(&l->lock);
            if (!died || atomic_load(&l->stopping)) continue;
            report_gone(l, control, i, c, l->restart);
            pthread_mutex_lock(&l->lock);
            c->gone_reported = true;
            pthread_mutex_unlock(&l->lock);
            if (l->restart) restart_node(l, i);
        }
        if (l->owners_started) {
            pthread_mutex_lock(&l->lock);
            child_t *c = &l->owners;
            bool died = !c->proc.reaped && dcr_process_wait(&c->proc, 0) == DCR_OK;
            pthread_mutex_unlock(&l->lock);
            if (died && !atomic_load(&l->stopping)) report_owners_gone(l, control);
        }
        if (l->kill_every > 0 && control) maybe_kill(l, control);
        if (control && l->join_node >= 0 && !atomic_load(&l->join_done)) {
            pthread_mutex_lock(&l->lock);
            bool started = l->join_started;
            pthread_mutex_unlock(&l->lock);
            if (started)
                poll_join(l, control);
            else if (l->join_at_version > 0 && !atomic_load(&l->join_gave_up))
                join_when_due(l, control);
        }
        nap_ns(l->kill_every > 0 ? KILL_POLL_NS : MONITOR_POLL_NS);
    }
    dcr_control_destroy(control);
    return NULL;
}

/* ---- the coordinator process ---- */

static dcr_status_t spawn_coordinator(dcr_role_launcher_t *l)
{
    char *head[] = {"coordinator", "--workdir", l->workdir};
    int in = -1, out = -1;
    /* A request to a coordinator that just died must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    DCR_CHECK(spawn_with(l, "coordinator", NULL, 0, NULL, SIGKILL, head, 3, &l->coord, &in, &out));
    l->coord_in = fdopen(in, "w");
    l->coord_out = fdopen(out, "r");
    l->coord_started = true;
    if (!l->coord_in || !l->coord_out)
        return dcr_error_set(DCR_ENOMEM, "the coordinator process's pipes");
    return DCR_OK;
}

static void stop_coordinator(dcr_role_launcher_t *l)
{
    if (!l->coord_started) return;
    if (l->coord_in) fclose(l->coord_in); /* its end of requests: it exits */
    l->coord_in = NULL;
    stop_child(&l->coord);
    if (l->coord_out) fclose(l->coord_out);
    l->coord_out = NULL;
    l->coord_started = false;
}

/* Waits until the coordinator process reached kill point `point` of the
 * attempt after `tau0` ("opened": it opened the attempt on its handle, the
 * owners and nodes are about to stream; "sent": the owners reported every
 * payload sent, it waits for the nodes), then SIGKILLs it. Gives up after
 * 30 s (the transition was over before the point). */
static void kill_coordinator_at(dcr_role_launcher_t *l, dcr_control_t *control, uint64_t tau0,
                                int point)
{
    static const char *const points[] = {"opened", "sent"};
    for (int t = 0; t < 30000 / 2; t++) {
        uint64_t opened = 0;
        dcr_owners_report_t r;
        bool hit = point == 0 ? dcr_coord_opened(control, &opened) == DCR_OK && opened > tau0
                              : dcr_owners_report_get(control, &r) == DCR_OK &&
                                    r.phase == DCR_OWNERS_SENT && r.tau > tau0;
        if (hit) {
            dcr_process_kill(&l->coord.proc, SIGKILL);
            atomic_fetch_add(&l->coord_kills, 1);
            DCR_LOG_WARN("SIGKILL to the coordinator (pid %d) at %s of the attempt after %llu",
                         (int)l->coord.proc.pid, points[point], (unsigned long long)tau0);
            return;
        }
        nap_ns(KILL_POLL_NS);
    }
}

/* One transition through the coordinator process. If it dies (a kill, a
 * crash), a new process resumes the transition from the commit record and
 * the latest attempt, as often as it takes up to 5 times. */
static dcr_status_t refit_remote(void *ctx, dcr_refit_result_t *out)
{
    dcr_role_launcher_t *l = ctx;
    dcr_control_t *control = NULL;
    DCR_CHECK(launcher_control_open(l, &control));
    dcr_commit_record_t rec;
    dcr_control_attempt_t a;
    dcr_status_t st = dcr_control_read(control, &rec);
    uint64_t from = rec.version, tau0 = 0;
    if (dcr_control_attempt(control, 0, &a) == DCR_OK) tau0 = a.tau;
    bool resume = false, kill_now = l->coord_every > 0 && (l->refits + 1) % l->coord_every == 0;
    for (int tries = 0; st == DCR_OK; tries++) {
        if (!l->coord_started && (st = spawn_coordinator(l)) != DCR_OK) break;
        if (resume)
            fprintf(l->coord_in, "resume %llu\n", (unsigned long long)from);
        else
            fprintf(l->coord_in, "refit\n");
        fflush(l->coord_in);
        if (kill_now) {
            kill_coordinator_at(l, control, tau0, atomic_load(&l->coord_kills) % 2);
            kill_now = false;
        }
        char line[2048];
        if (fgets(line, sizeof(line), l->coord_out)) {
            st = dcr_role_refit_result_parse(line, out);
            if (st != DCR_OK) break;
            l->refits++;
            /* The seed's window, on this host's one clock, into our trace. */
            dcr_trace_set_refit((uint32_t)out->version);
            dcr_trace_record(DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0, (uint64_t)(out->t0 * 1e9),
                             (uint64_t)(out->t1 * 1e9));
            break;
        }
        /* The coordinator process ended without an answer. */
        dcr_process_wait(&l->coord.proc, -1);
        char how[64];
        dcr_process_describe(l->coord.proc.status, how, sizeof(how));
        stop_coordinator(l);
        if (l->coord_every == 0 || tries >= 5) {
            st = dcr_error_set(DCR_EATTEMPT,
                               "the coordinator process (pid %d) %s during the "
                               "transition from version %llu",
                               (int)l->coord.proc.pid, how, (unsigned long long)from);
            break;
        }
        DCR_LOG_WARN("the coordinator process (pid %d) %s; a new one resumes the transition from "
                     "version %llu",
                     (int)l->coord.proc.pid, how, (unsigned long long)from);
        atomic_fetch_add(&l->coord_restarts, 1);
        resume = true;
    }
    dcr_control_destroy(control);
    return st;
}

/* ---- the hooks ---- */

static void stop_nodes(void *ctx);

/* A node joins only attempts prepared after its start (a late joiner must
 * not join a stream half sent): the first refit waits for every node's
 * first report. */
static dcr_status_t wait_ready(dcr_role_launcher_t *l)
{
    dcr_control_t *control = NULL;
    DCR_CHECK(launcher_control_open(l, &control));
    dcr_status_t st = DCR_OK;
    for (int i = 0; st == DCR_OK && i < l->nnodes; i++) {
        if (i == l->join_node && !l->join_started) continue;
        for (int t = 0;; t++) {
            dcr_node_report_t r;
            if (dcr_node_report_get(control, i, &r) == DCR_OK &&
                r.pid == (int32_t)l->nodes[i].proc.pid)
                break;
            pthread_mutex_lock(&l->lock);
            bool dead = l->nodes[i].proc.reaped;
            pthread_mutex_unlock(&l->lock);
            if (dead || t * 10 > READY_TIMEOUT_MS) {
                st = dcr_error_set(DCR_ETIMEOUT,
                                   "rollout-node %d (pid %d) did not report ready within %d ms", i,
                                   (int)l->nodes[i].proc.pid, READY_TIMEOUT_MS);
                break;
            }
            nap_ns(10000000L);
        }
    }
    for (int t = 0; st == DCR_OK && l->owners_started; t++) {
        dcr_owners_report_t r;
        if (dcr_owners_report_get(control, &r) == DCR_OK && r.phase == DCR_OWNERS_READY) break;
        pthread_mutex_lock(&l->lock);
        bool dead = l->owners.proc.reaped;
        pthread_mutex_unlock(&l->lock);
        if (dead || t * 10 > READY_TIMEOUT_MS)
            st = dcr_error_set(DCR_ETIMEOUT,
                               "the owner job (mpirun -np %d, pid %d) did not report ready "
                               "within %d ms%s",
                               owner_ranks(l), (int)l->owners.proc.pid, READY_TIMEOUT_MS,
                               dead ? " (it ended; see its lines above)" : "");
        nap_ns(10000000L);
    }
    dcr_control_destroy(control);
    return st;
}

/* The node of an elastic join, before its process starts: no process to
 * wait for, kill or reap, and a GONE report with pid 0 so that the
 * coordinator leaves it out of the attempts until it reports itself. */
static dcr_status_t report_not_started(dcr_role_launcher_t *l, int node)
{
    child_t *c = &l->nodes[node];
    c->proc = (dcr_process_t){
        .pid = 0, .reaped = true, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
    c->gone_reported = true;
    dcr_control_t *control = NULL;
    DCR_CHECK(launcher_control_open(l, &control));
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.node = (uint32_t)node;
    r.phase = DCR_NODE_GONE;
    snprintf(r.why, sizeof(r.why), "not started yet (an elastic join)");
    dcr_status_t st = dcr_node_report_put(control, &r);
    dcr_control_destroy(control);
    return st;
}

static dcr_status_t start_nodes(void *ctx, const char *workdir, const char *control, bool temporary)
{
    dcr_role_launcher_t *l = ctx;
    snprintf(l->workdir, sizeof(l->workdir), "%s", workdir);
    snprintf(l->control, sizeof(l->control), "%s", control ? control : "");
    if (temporary) DCR_CHECK(start_janitor(l));
    l->nnodes = l->run->serve.nodes;
    l->nodes = calloc((size_t)l->nnodes, sizeof(child_t));
    if (!l->nodes) return dcr_error_set(DCR_ENOMEM, "%d rollout-node processes", l->nnodes);
    for (int i = 0; i < l->nnodes; i++)
        l->nodes[i].proc =
            (dcr_process_t){.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
    for (int i = 0; i < l->nnodes; i++) {
        dcr_status_t st = i == l->join_node ? report_not_started(l, i) : spawn_node(l, i);
        if (st != DCR_OK) {
            l->nnodes = i;
            stop_nodes(l);
            return st;
        }
    }
    if (l->owner_job) {
        dcr_status_t st = spawn_owners(l);
        if (st == DCR_OK) st = spawn_coordinator(l);
        if (st != DCR_OK) {
            stop_nodes(l);
            return st;
        }
    }
    l->monitoring = pthread_create(&l->monitor, NULL, monitor_main, l) == 0;
    return wait_ready(l);
}

static bool join_started(dcr_role_launcher_t *l)
{
    pthread_mutex_lock(&l->lock);
    bool started = l->join_started;
    pthread_mutex_unlock(&l->lock);
    return started;
}

/* The joined node's first restore records, one per receiver of a node,
 * while the run folder is still there. */
static void read_join(dcr_role_launcher_t *l)
{
    const dcr_serve_config_t *sv = &l->run->serve;
    int per = sv->gpus_per_node ? sv->gpus_per_node : sv->tp;
    l->join_read = dcr_restore_first(l->workdir, l->join_node, per, l->join_kinds, &l->join_bytes,
                                     &l->join_dense_bytes) == DCR_OK;
    if (!l->join_read)
        DCR_LOG_WARN("rollout-node %d: its restore records at the join: %s", l->join_node,
                     dcr_error_detail());
}

/* One line per role: its peak beside what it must hold. */
static void log_memory(const json_t *all)
{
    size_t i;
    const json_t *m;
    json_array_foreach(all, i, m)
    {
        double peak = (double)json_integer_value(json_object_get(m, "peak_rss_bytes")),
               need = (double)json_integer_value(json_object_get(m, "required_bytes")),
               harness = (double)json_integer_value(json_object_get(m, "harness_bytes"));
        DCR_LOG_INFO("memory: %s %d peak %.1f MiB, holds %.1f MiB (peak %.2fx), harness "
                     "%.1f MiB",
                     json_string_value(json_object_get(m, "role")),
                     (int)json_integer_value(json_object_get(m, "id")), peak / 1048576.0,
                     need / 1048576.0, need > 0 ? peak / need : 0.0, harness / 1048576.0);
    }
}

/* The roles' memory figures, once every role has stopped. */
static void read_memory(dcr_role_launcher_t *l)
{
    json_decref(l->memory);
    l->memory = dcr_role_memory_collect(l->workdir);
    log_memory(l->memory);
}

static void stop_nodes(void *ctx)
{
    dcr_role_launcher_t *l = ctx;
    atomic_store(&l->stopping, true);
    if (l->monitoring) pthread_join(l->monitor, NULL);
    l->monitoring = false;
    for (int i = 0; i < l->nnodes; i++) dcr_process_kill(&l->nodes[i].proc, SIGTERM);
    /* mpirun forwards SIGTERM to its ranks and waits for them. */
    if (l->owners_started) dcr_process_kill(&l->owners.proc, SIGTERM);
    for (int i = 0; i < l->nnodes; i++) stop_child(&l->nodes[i]);
    if (l->owners_started) stop_child(&l->owners);
    l->owners_started = false;
    stop_coordinator(l);
    read_memory(l);
    /* Every node process has stopped: its restore records are complete. */
    if (atomic_load(&l->join_done) && !l->join_read) read_join(l);
    free(l->nodes);
    l->nodes = NULL;
    l->nnodes = 0;
}

/* The verifier process prints "version <v> bit-exact yes|no" per version. */
static dcr_status_t verify_versions(void *ctx, const char *workdir, uint64_t first, uint64_t last,
                                    bool *ok)
{
    dcr_role_launcher_t *l = ctx;
    /* The verifier skips a joined node's versions before its join: it
     * needs to know the join (<workdir>/joined/n<node>). */
    if (l->join_node >= 0 && !dcr_role_launcher_joined(l, JOIN_WAIT_MS, NULL, NULL))
        return dcr_error_set(DCR_ETIMEOUT,
                             "rollout node %d, an elastic join, %s (no READY within %d ms of the "
                             "last refit)",
                             l->join_node, join_started(l) ? "did not join" : "never started",
                             JOIN_WAIT_MS);
    char a[32], b[32];
    snprintf(a, sizeof(a), "%llu", (unsigned long long)first);
    snprintf(b, sizeof(b), "%llu", (unsigned long long)last);
    char *head[] = {"verify-digests", "--workdir", (char *)workdir, "--first", a, "--last", b};
    child_t c;
    int out = -1;
    DCR_CHECK(spawn(l, "verifier", head, 7, &c, &out));
    FILE *f = fdopen(out, "r");
    char line[256];
    size_t seen = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long v;
        char yes[8];
        if (sscanf(line, "version %llu bit-exact %7s", &v, yes) == 2 && v >= first && v <= last) {
            ok[v - first] = !strcmp(yes, "yes");
            seen++;
        }
    }
    if (f)
        fclose(f);
    else
        close(out);
    dcr_process_wait(&c.proc, -1);
    child_finish(&c);
    bool clean = WIFEXITED(c.proc.status) && WEXITSTATUS(c.proc.status) <= 1;
    if (!clean || seen != last - first + 1) {
        char how[64];
        dcr_process_describe(c.proc.status, how, sizeof(how));
        return dcr_error_set(DCR_EIO, "the verifier process %s after %zu of %llu versions", how,
                             seen, (unsigned long long)(last - first + 1));
    }
    return DCR_OK;
}

/* ---- lifetime ---- */

dcr_status_t dcr_role_launcher_create(const dcr_run_config_t *run, char *const *run_args, int nargs,
                                      dcr_role_launcher_t **out_p)
{
    dcr_role_launcher_t *l = calloc(1, sizeof(*l));
    if (!l) return dcr_error_set(DCR_ENOMEM, "launcher");
    l->run = run;
    l->janitor_fd = -1;
    l->janitor.pid = -1;
    pthread_mutex_init(&l->lock, NULL);
    ssize_t n = readlink("/proc/self/exe", l->exe, sizeof(l->exe) - 1);
    l->args = calloc((size_t)nargs + 1, sizeof(char *));
    if (n <= 0 || !l->args) {
        dcr_role_launcher_destroy(l);
        return dcr_error_set(DCR_EIO, "cannot find this executable (/proc/self/exe)");
    }
    l->exe[n] = '\0';
    for (int i = 0; i < nargs; i++) {
        l->args[i] = strdup(run_args[i]);
        if (!l->args[i]) {
            dcr_role_launcher_destroy(l);
            return dcr_error_set(DCR_ENOMEM, "launcher arguments");
        }
        l->nargs = i + 1;
    }
    l->hooks = (dcr_bench_processes_t){start_nodes, verify_versions, stop_nodes, l, false, NULL};
    l->join_node = -1;
    *out_p = l;
    return DCR_OK;
}

static void free_argv(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* A copy of v[0..n), NULL-terminated; NULL when out of memory. */
static char **copy_argv(char *const *v, int n)
{
    char **c = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            free_argv(c, i);
            return NULL;
        }
    return c;
}

dcr_status_t dcr_role_launcher_set_prefix(dcr_role_launcher_t *l, const char *role,
                                          char *const *argv, int n)
{
    if (strlen(role) >= sizeof(l->prefixes[0].role))
        return dcr_error_set(DCR_EINVAL, "spawn prefix: role name '%s' too long", role);
    struct role_prefix *rp = (struct role_prefix *)find_prefix(l, role);
    if (!rp) {
        struct role_prefix *grown =
            realloc(l->prefixes, (size_t)(l->nprefixes + 1) * sizeof(*grown));
        if (!grown) return dcr_error_set(DCR_ENOMEM, "spawn prefix of %s", role);
        l->prefixes = grown;
        rp = &l->prefixes[l->nprefixes++];
        snprintf(rp->role, sizeof(rp->role), "%s", role);
    } else {
        free_argv(rp->argv, rp->n);
    }
    rp->argv = n > 0 ? copy_argv(argv, n) : NULL;
    rp->n = rp->argv ? n : 0;
    if (n > 0 && !rp->argv) return dcr_error_set(DCR_ENOMEM, "spawn prefix of %s", role);
    return DCR_OK;
}

dcr_status_t dcr_role_launcher_set_mpirun_args(dcr_role_launcher_t *l, char *const *args, int n)
{
    free_argv(l->mpi_args, l->nmpi_args);
    l->mpi_args = copy_argv(args, n);
    l->nmpi_args = l->mpi_args ? n : 0;
    return l->mpi_args ? DCR_OK : dcr_error_set(DCR_ENOMEM, "mpirun arguments");
}

void dcr_role_launcher_destroy(dcr_role_launcher_t *l)
{
    if (!l) return;
    if (l->nodes) stop_nodes(l);
    if (l->janitor_fd >= 0) close(l->janitor_fd); /* the janitor finds nothing left to do */
    if (l->janitor.pid > 0) dcr_process_wait(&l->janitor, -1);
    for (int i = 0; i < l->nargs; i++) free(l->args[i]);
    free(l->args);
    for (int i = 0; i < l->nprefixes; i++) free_argv(l->prefixes[i].argv, l->prefixes[i].n);
    free(l->prefixes);
    free_argv(l->mpi_args, l->nmpi_args);
    json_decref(l->memory);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

void dcr_role_launcher_set_owners(dcr_role_launcher_t *l, bool on)
{
    l->owner_job = on;
    l->hooks.owners = on;
    l->hooks.refit = on ? refit_remote : NULL;
}

void dcr_role_launcher_set_coordinator_kills(dcr_role_launcher_t *l, int every)
{
    l->coord_every = every > 0 ? every : 0;
}

int dcr_role_launcher_coordinator_kills(const dcr_role_launcher_t *l)
{
    return atomic_load(&((dcr_role_launcher_t *)l)->coord_kills);
}

int dcr_role_launcher_coordinator_restarts(const dcr_role_launcher_t *l)
{
    return atomic_load(&((dcr_role_launcher_t *)l)->coord_restarts);
}

int dcr_role_launcher_owner_processes(const dcr_role_launcher_t *l)
{
    return l->owner_job ? owner_ranks(l) : 0;
}

void dcr_role_launcher_set_restart(dcr_role_launcher_t *l, bool on)
{
    l->restart = on;
}

void dcr_role_launcher_set_kills(dcr_role_launcher_t *l, int every)
{
    l->kill_every = every > 0 ? every : 0;
    if (l->kill_every) l->restart = true;
}

int dcr_role_launcher_sigkills(const dcr_role_launcher_t *l)
{
    return atomic_load(&((dcr_role_launcher_t *)l)->sigkills);
}

int dcr_role_launcher_restarts(const dcr_role_launcher_t *l)
{
    return atomic_load(&((dcr_role_launcher_t *)l)->restarts);
}

const dcr_bench_processes_t *dcr_role_launcher_hooks(dcr_role_launcher_t *l)
{
    return &l->hooks;
}

/* ---- kills aimed by a harness (dcr faults --processes) ---- */

int dcr_role_launcher_node_pid(dcr_role_launcher_t *l, int node)
{
    if (node < 0 || node >= l->nnodes) return 0;
    pthread_mutex_lock(&l->lock);
    int pid = l->nodes[node].proc.reaped || l->nodes[node].proc.pid < 0
                  ? 0
                  : (int)l->nodes[node].proc.pid;
    pthread_mutex_unlock(&l->lock);
    return pid;
}

bool dcr_role_launcher_pause_node(dcr_role_launcher_t *l, int node, int pid, bool pause)
{
    if (node < 0 || node >= l->nnodes || pid <= 0) return false;
    pthread_mutex_lock(&l->lock);
    child_t *c = &l->nodes[node];
    /* Under the lock, as for a kill: never a recycled pid. */
    bool hit = c->proc.pid == (pid_t)pid && dcr_process_kill(&c->proc, pause ? SIGSTOP : SIGCONT);
    pthread_mutex_unlock(&l->lock);
    return hit;
}

bool dcr_role_launcher_kill_node(dcr_role_launcher_t *l, int node, int pid, int wait_ms)
{
    if (node < 0 || node >= l->nnodes || pid <= 0) return false;
    pthread_mutex_lock(&l->lock);
    child_t *c = &l->nodes[node];
    /* Under the lock the monitor can neither reap nor replace it: the pid
     * is still our child's, never a recycled one. */
    bool hit = c->proc.pid == (pid_t)pid && dcr_process_kill(&c->proc, SIGKILL);
    pthread_mutex_unlock(&l->lock);
    if (!hit) return false;
    atomic_fetch_add(&l->sigkills, 1);
    /* The death is known to the coordinator once the monitor reported it
     * (GONE or RESTARTING); a restart replaces the child's entry. */
    for (int waited = 0; waited < wait_ms; waited++) {
        pthread_mutex_lock(&l->lock);
        bool seen = c->proc.pid != (pid_t)pid || c->gone_reported;
        pthread_mutex_unlock(&l->lock);
        if (seen) break;
        nap_ns(1000000L);
    }
    return true;
}

/* ---- an elastic join ---- */

void dcr_role_launcher_set_join(dcr_role_launcher_t *l, int node)
{
    l->join_node = node;
}

dcr_status_t dcr_role_launcher_join(dcr_role_launcher_t *l)
{
    if (l->join_node < 0 || l->join_node >= l->nnodes || l->join_started)
        return dcr_error_set(DCR_EINVAL, "no rollout node waits to join (node %d of %d)",
                             l->join_node, l->nnodes);
    child_finish(&l->nodes[l->join_node]);
    pthread_mutex_lock(&l->lock);
    l->join_t0 = dcr_clock_s();
    dcr_status_t st = spawn_node(l, l->join_node);
    if (st == DCR_OK) l->join_started = true;
    pthread_mutex_unlock(&l->lock);
    if (st != DCR_OK) {
        l->nodes[l->join_node].proc.reaped = true;
        return st;
    }
    DCR_LOG_INFO("rollout-node %d joins: started as pid %d", l->join_node,
                 (int)l->nodes[l->join_node].proc.pid);
    return DCR_OK;
}

/* <workdir>/joined/n<node>: the version the node first reported READY at
 * (the verifier reads no digests of its receivers for earlier versions:
 * the node did not exist then). */
static dcr_status_t write_joined(const dcr_role_launcher_t *l, int node, uint64_t version)
{
    char dir[4200], path[4300], tmp[4400];
    snprintf(dir, sizeof dir, "%s/joined", l->workdir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/n%d", dir, node);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return dcr_error_set(DCR_EIO, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "%llu\n", (unsigned long long)version);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return dcr_error_set(DCR_EIO, "cannot write %s", path);
    return DCR_OK;
}

void dcr_role_launcher_set_join_at(dcr_role_launcher_t *l, int node, uint64_t version)
{
    l->join_node = node;
    l->join_at_version = version;
}

bool dcr_role_launcher_join_result(const dcr_role_launcher_t *l, dcr_role_join_t *out_p)
{
    if (!l->join_read) return false;
    dcr_role_join_t j = {.node = l->join_node,
                         .version = l->join_version,
                         .seconds = l->join_s,
                         .bytes = l->join_bytes,
                         .dense_bytes = l->join_dense_bytes};
    memcpy(j.by_kind, l->join_kinds, sizeof(j.by_kind));
    *out_p = j;
    return true;
}

bool dcr_role_launcher_joined(dcr_role_launcher_t *l, int wait_ms, uint64_t *version_p,
                              double *seconds_p)
{
    /* Also while the monitor may start it (set_join_at): wait for that;
     * wait_ms bounds both waits together. */
    double t0 = dcr_clock_s();
    while (!join_started(l) && l->join_at_version > 0 && !atomic_load(&l->join_gave_up) &&
           (dcr_clock_s() - t0) * 1000.0 < wait_ms)
        nap_ns(10000000L);
    if (!join_started(l)) return false;
    while (!atomic_load(&l->join_done) && (dcr_clock_s() - t0) * 1000.0 < wait_ms)
        nap_ns(10000000L);
    if (!atomic_load(&l->join_done)) return false;
    if (version_p) *version_p = l->join_version;
    if (seconds_p) *seconds_p = l->join_s;
    return true;
}

json_t *dcr_role_launcher_memory_json(const dcr_role_launcher_t *l)
{
    return l && l->memory ? json_deep_copy(l->memory) : json_array();
}
