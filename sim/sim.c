/* The simulator's driver: one simulated configuration run as two SimGrid
 * runs (refit, reference) in forked children, since SimGrid keeps one
 * engine per process. Cluster presets and checks are in cluster.c. */
#include "sim/sim.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/platform.h"
#include "sim/readfile.h"
#include "sim/sim-internal.h"
#include "workloads/harness/interrupt.h"

dcr_sim_spec_t dcr_sim_spec_default(void)
{
    dcr_sim_spec_t s;
    memset(&s, 0, sizeof(s));
    s.scenario = dcr_scenario_spec_default();
    s.transport = "objstore";
    s.change_rate = 0.03;
    s.mode = DCR_MODE_X;
    s.cluster = dcr_sim_cluster_default();
    return s;
}

/* ---- one SimGrid run in a child process ----------------------------------------- */

typedef dcr_status_t (*dcr__sim_fn)(const dcr_sim_spec_t *, const dcr_sim_workload_t *,
                                    const char *, dcr__sim_out_t *);

/* What the child writes back: its status, figures and error detail. */
typedef struct dcr__child_msg {
    int status;
    dcr__sim_out_t out;
    char detail[1024];
} dcr__child_msg_t;

static void dcr__child(int fd, dcr__sim_fn fn, const dcr_sim_spec_t *spec,
                       const dcr_sim_workload_t *w, const char *platform)
{
    dcr__child_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.status = fn(spec, w, platform, &msg.out);
    if (msg.status != DCR_OK) snprintf(msg.detail, sizeof(msg.detail), "%s", dcr_error_detail());
    dcr__sim_write_all(fd, &msg, sizeof(msg));
    close(fd);
    fflush(NULL);
    /* SimGrid's teardown of a finished simulation is of no use here. */
    _exit(0);
}

dcr_status_t dcr__sim_read_all(int fd, void *buf, size_t len, size_t *got_p)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {dcr_interrupt_fd(), POLLIN, 0}};
        int np = pf[1].fd >= 0 ? 2 : 1;
        if (dcr_interrupted()) return dcr_interrupt_check("sim");
        if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
            return dcr_error_set(DCR_EIO, "sim: waiting for the simulation: %s", strerror(errno));
        if (dcr_interrupted()) return dcr_interrupt_check("sim");
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(fd, p + got, len - got);
        if (n == 0) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return dcr_error_set(DCR_EIO, "sim: reading the simulation's result: %s",
                                 strerror(errno));
        got += (size_t)n;
    }
    *got_p = got;
    return DCR_OK;
}

void dcr__sim_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, p + done, len - done);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) done += (size_t)n;
    }
}

pid_t dcr__fork_tied(int fds[2])
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        /* The parent may have died before the request took effect, hence
         * the check after it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        close(fds[0]);
        return 0;
    }
    close(fds[1]);
    return pid;
}

/* One SimGrid run under way in a forked child. */
typedef struct dcr__job {
    const char *what;
    pid_t pid;
    int fd; /* the child's result */
} dcr__job_t;

static dcr_status_t dcr__job_start(dcr__sim_fn fn, const char *what, const dcr_sim_spec_t *spec,
                                   const dcr_sim_workload_t *w, const char *platform,
                                   dcr__job_t *job)
{
    int fds[2];
    if (pipe(fds) != 0) return dcr_error_set(DCR_EIO, "sim: pipe: %s", strerror(errno));
    pid_t pid = dcr__fork_tied(fds);
    if (pid < 0) return dcr_error_set(DCR_EIO, "sim: fork: %s", strerror(errno));
    if (pid == 0) dcr__child(fds[1], fn, spec, w, platform);
    *job = (dcr__job_t){what, pid, fds[0]};
    return DCR_OK;
}

/* Stops a job that is no longer wanted (an earlier one failed). */
static void dcr__job_kill(dcr__job_t *job)
{
    kill(job->pid, SIGKILL);
    close(job->fd);
    while (waitpid(job->pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* Waits for the job's result and reaps the child. */
static dcr_status_t dcr__job_finish(dcr__job_t *job, dcr__sim_out_t *out)
{
    dcr__child_msg_t msg;
    size_t got = 0;
    dcr_status_t st = dcr__sim_read_all(job->fd, &msg, sizeof(msg), &got);
    close(job->fd);
    if (st == DCR_EINTR) kill(job->pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(job->pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    DCR_CHECK(st);
    if (got != sizeof(msg))
        return dcr_error_set(
            DCR_EINVAL,
            "sim: the %s simulation ended without a result (%s %d; SimGrid's message, "
            "if any, is above)",
            job->what, WIFSIGNALED(wstatus) ? "signal" : "exit status",
            WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : WEXITSTATUS(wstatus));
    if (msg.status != DCR_OK) return dcr_error_set((dcr_status_t)msg.status, "%s", msg.detail);
    *out = msg.out;
    return DCR_OK;
}

static dcr_status_t dcr__fork_run(dcr__sim_fn fn, const char *what, const dcr_sim_spec_t *spec,
                                  const dcr_sim_workload_t *w, const char *platform,
                                  dcr__sim_out_t *out)
{
    dcr__job_t job;
    DCR_CHECK(dcr__job_start(fn, what, spec, w, platform, &job));
    return dcr__job_finish(&job, out);
}

/* ---- the driver ---------------------------------------------------------------------- */

/* Owner pairs that exchange residual parts, for the generated platform's routes. */
static uint8_t *dcr__part_pairs(const dcr_sim_workload_t *w)
{
    uint8_t *pairs = calloc((size_t)w->world * (size_t)w->world + 1, 1);
    for (int o = 0; pairs && o < w->world; o++)
        for (int i = 0; i < w->owners[o].nsteps; i++) {
            const dcr_sim_step_t *s = &w->owners[o].steps[i];
            if (s->kind == DCR_SIM_STEP_SEND_PART)
                pairs[(size_t)o * (size_t)w->world + (size_t)s->peer] = 1;
        }
    return pairs;
}

static dcr_status_t dcr__platform(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                  char **path_p, bool *tmp_p)
{
    *tmp_p = false;
    if (spec->cluster.platform_xml) {
        DCR_CHECK(dcr_sim_check_regular("--platform", spec->cluster.platform_xml));
        *path_p = strdup(spec->cluster.platform_xml);
        return *path_p ? DCR_OK : dcr_error_set(DCR_ENOMEM, "sim: platform path");
    }
    uint8_t *pairs = dcr__part_pairs(w);
    if (!pairs) return dcr_error_set(DCR_ENOMEM, "sim: part routes");
    dcr_status_t st = dcr_sim_platform_tmpfile(&spec->cluster, pairs, path_p);
    free(pairs);
    *tmp_p = st == DCR_OK;
    if (*tmp_p) dcr_interrupt_cleanup_add(*path_p);
    return st;
}

static void dcr__fill(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                      const dcr__sim_out_t *refit, double reference_s, dcr_sim_result_t *r)
{
    memset(r, 0, sizeof(*r));
    r->latency_s = refit->latency_s;
    r->construction_lb_s = refit->construction_lb_s;
    r->transport_lb_s = refit->transport_lb_s;
    r->finalization_s = refit->finalization_s;
    r->construction_end_s = refit->construction_end_s;
    r->apply_end_s = refit->apply_end_s;
    r->reference_s = reference_s;
    r->speedup = r->latency_s > 0 ? reference_s / r->latency_s : 0;
    r->checkpoint_bytes = w->checkpoint_bytes;
    r->payload_bytes = w->payload_bytes;
    r->cross_bytes = refit->cross_bytes;
    r->raw_value_bytes = w->raw_value_bytes;
    r->records = w->records;
    r->payloads = w->npayloads;
    r->items = w->items;
    r->owners = w->world;
    r->receivers = spec->cluster.rollout_nodes * spec->cluster.rollout_gpus;
    r->staging_max = refit->staging_max;
    r->staging_cap = refit->staging_cap;
    r->receive_lb_s = refit->receive_lb_s;
}

dcr_sim_shares_t dcr_sim_result_shares(const dcr_sim_result_t *r)
{
    dcr_sim_shares_t s = {0, 0, 0, 0, 0};
    if (!(r->latency_s > 0)) return s;
    s.construction = r->construction_lb_s / r->latency_s;
    s.transport = r->transport_lb_s / r->latency_s;
    s.finalization = r->finalization_s / r->latency_s;
    s.receive = r->receive_lb_s / r->latency_s;
    s.gap_s = r->latency_s - fmax(r->construction_lb_s, r->transport_lb_s) - r->finalization_s;
    return s;
}

static dcr_status_t dcr__check_workload(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w)
{
    const dcr_sim_cluster_t *c = &spec->cluster;
    DCR_CHECK(dcr_sim_cluster_validate(c));
    if (!spec->transport ||
        (strcmp(spec->transport, "objstore") && strcmp(spec->transport, "relay")))
        return dcr_error_set(DCR_EINVAL, "sim: transport '%s' is not objstore or relay",
                             spec->transport ? spec->transport : "(null)");
    if (w->world != c->train_nodes * c->train_gpus || w->train_nodes != c->train_nodes)
        return dcr_error_set(DCR_EINVAL,
                             "sim: the workload has %d owners on %d nodes, the cluster %d x %d",
                             w->world, w->train_nodes, c->train_nodes, c->train_gpus);
    for (int p = 0; p < w->npayloads; p++)
        if (w->payloads[p].owner < 0 || w->payloads[p].owner >= w->world ||
            w->payloads[p].bytes < 0)
            return dcr_error_set(DCR_EINVAL, "sim: payload %d has owner %d and %lld bytes", p,
                                 w->payloads[p].owner, (long long)w->payloads[p].bytes);
    for (int o = 0; o < w->world; o++)
        for (int i = 0; i < w->owners[o].nsteps; i++) {
            const dcr_sim_step_t *s = &w->owners[o].steps[i];
            bool bad =
                (s->kind == DCR_SIM_STEP_SEND_PART && (s->peer < 0 || s->peer >= w->world)) ||
                (s->kind == DCR_SIM_STEP_FLUSH && (s->payload < 0 || s->payload >= w->npayloads)) ||
                s->seconds < 0 || s->bytes < 0;
            if (bad) return dcr_error_set(DCR_EINVAL, "sim: owner %d step %d is malformed", o, i);
        }
    return DCR_OK;
}

dcr_status_t dcr_sim_platform_check(const dcr_sim_cluster_t *c)
{
    if (!c->platform_xml) return DCR_OK;
    DCR_CHECK(dcr_sim_check_regular("--platform", c->platform_xml));
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = *c;
    dcr__sim_out_t out;
    dcr_status_t st = dcr__fork_run(dcr__sim_probe_platform, "platform check", &spec, NULL,
                                    c->platform_xml, &out);
    if (st == DCR_OK) return DCR_OK;
    /* The child died in SimGrid's parser: its message went nowhere. */
    if (strstr(dcr_error_detail(), "ended without a result"))
        return dcr_error_set(DCR_EINVAL, "--platform %s: SimGrid cannot load it as a platform",
                             c->platform_xml);
    dcr_error_prefix("--platform %s: ", c->platform_xml);
    return st;
}

/* Nodes on the relay tree's leftmost root-to-leaf path: the depth of the
 * last node, plus one. */
static int dcr__chain_nodes(int nodes, int fanout)
{
    int depth = 0;
    for (int i = nodes - 1; i > 0; i = dcr_sim_relay_parent(i, fanout)) depth++;
    return depth + 1;
}

static int dcr__fast_nodes(const dcr_sim_spec_t *spec)
{
    const dcr_sim_cluster_t *c = &spec->cluster;
    return strcmp(spec->transport, "relay") ? 1 : dcr__chain_nodes(c->rollout_nodes, c->fanout);
}

bool dcr_sim_fast_path(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w)
{
    const dcr_sim_cluster_t *c = &spec->cluster;
    return !spec->full && !c->platform_xml && c->shared_cores == 0 && c->agg_nodes == 0 &&
           w->serve_tp > 0 && c->rollout_gpus % w->serve_tp == 0 &&
           dcr__fast_nodes(spec) < c->rollout_nodes;
}

/* spec as the fast path simulates it (itself where the path does not apply). */
static dcr_sim_spec_t dcr__fast_spec(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w)
{
    dcr_sim_spec_t fast = *spec;
    if (dcr_sim_fast_path(spec, w)) {
        fast.cluster.agg_nodes = spec->cluster.rollout_nodes;
        fast.cluster.agg_chain = !strcmp(spec->transport, "relay");
        fast.cluster.rollout_nodes = dcr__fast_nodes(spec);
    }
    return fast;
}

/* One SimGrid run of fn on spec's platform, started: the platform file
 * (a generated one is removed when the job ends) and the child. */
typedef struct dcr__platform_job {
    dcr__job_t job;
    char *platform;
    bool tmp;
} dcr__platform_job_t;

static void dcr__platform_job_free(dcr__platform_job_t *pj)
{
    if (pj->tmp) {
        dcr_interrupt_cleanup_remove(pj->platform);
        unlink(pj->platform);
    }
    free(pj->platform);
    pj->platform = NULL;
    pj->tmp = false;
}

static dcr_status_t dcr__platform_job_start(dcr__sim_fn fn, const char *what,
                                            const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                            dcr__platform_job_t *pj)
{
    memset(pj, 0, sizeof(*pj));
    dcr_status_t st = dcr__platform(spec, w, &pj->platform, &pj->tmp);
    if (st == DCR_OK) st = dcr__job_start(fn, what, spec, w, pj->platform, &pj->job);
    if (st != DCR_OK) dcr__platform_job_free(pj);
    return st;
}

static dcr_status_t dcr__platform_job_finish(dcr__platform_job_t *pj, dcr__sim_out_t *out)
{
    dcr_status_t st = dcr__job_finish(&pj->job, out);
    dcr__platform_job_free(pj);
    return st;
}

static void dcr__platform_job_kill(dcr__platform_job_t *pj)
{
    dcr__job_kill(&pj->job);
    dcr__platform_job_free(pj);
}

dcr_status_t dcr_sim_run_workload(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                  dcr_sim_result_t *out_p)
{
    DCR_CHECK(dcr__check_workload(spec, w));
    /* The fast path simulates fewer nodes that stand for all of them. */
    dcr_sim_spec_t fast = dcr__fast_spec(spec, w);
    /* The reference goes through the object store whatever the refit's
     * transport, so its fast path is the object store's (one node). */
    dcr_sim_spec_t by_store = *spec;
    by_store.transport = "objstore";
    dcr_sim_spec_t ref_fast = dcr__fast_spec(&by_store, w);
    /* The two runs are independent: both children run at once (two cores
     * here, and a loaded machine gives two processes twice the share). */
    dcr__platform_job_t refit_job, ref_job;
    DCR_CHECK(dcr__platform_job_start(dcr__sim_refit, "refit", &fast, w, &refit_job));
    if (!spec->no_reference) {
        dcr_status_t st =
            dcr__platform_job_start(dcr__sim_reference, "reference", &ref_fast, w, &ref_job);
        if (st != DCR_OK) {
            dcr__platform_job_kill(&refit_job);
            return st;
        }
    }
    dcr__sim_out_t refit, ref;
    memset(&ref, 0, sizeof(ref));
    dcr_status_t st = dcr__platform_job_finish(&refit_job, &refit);
    if (!spec->no_reference) {
        if (st == DCR_OK)
            st = dcr__platform_job_finish(&ref_job, &ref);
        else
            dcr__platform_job_kill(&ref_job);
    }
    DCR_CHECK(st);
    dcr__fill(spec, w, &refit, ref.reference_s, out_p);
    return DCR_OK;
}

dcr_status_t dcr_sim_run(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                         dcr_sim_result_t *out_p)
{
    dcr_sim_workload_t *w = NULL;
    DCR_CHECK(dcr_sim_workload_build(spec, cal, &w));
    dcr_status_t st = dcr_sim_run_workload(spec, w, out_p);
    dcr_sim_workload_destroy(w);
    return st;
}
