/* The simulator's driver: cluster presets and checks, and one simulated
 * configuration run as two SimGrid runs (refit, reference) in forked
 * children, since SimGrid keeps one engine per process. */
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
#include "sim/sim-internal.h"
#include "workloads/interrupt.h"

dcr_sim_cluster_t dcr_sim_cluster_default(void)
{
    dcr_sim_cluster_t c;
    memset(&c, 0, sizeof(c));
    c.train_nodes = c.train_gpus = c.rollout_nodes = c.rollout_gpus = 1;
    c.cross_gbps = 10;
    c.flow_gbps = 10;
    c.local_gbps = 100;
    c.fabric_gbps = 400;
    c.latency_ms = 1;
    c.local_latency_ms = 0.01;
    c.store_gbps = 0;
    c.store_latency_ms = 10;
    c.store_list_ms = 10;
    c.store_flows = 8; /* the engine's object store (OBJ_FLOWS): eight GETs in flight per node */
    c.fanout = 2;
    c.queue_payloads = 8;
    c.owner_queue = 2; /* dcr_construct_config_default's queue depth */
    c.ack_rtt = true;
    c.ref_object_mib = 8; /* the engine's reference objects */
    return c;
}

/* The seed gives nodes, GPUs, the 5 Gbps per node cross-cluster flow and
 * S3. The rest are stated assumptions, not fitted to the seed's results:
 * the per-flow cap equals the node's measured 5 Gbps (one flow can reach
 * it), two AWS regions are 30 ms apart one way, an S3 request adds 20 ms and
 * a listing sees a new object after 20 ms, rollout nodes reach each other
 * at 100 Gbps, training nodes at 400 Gbps, and the reference's checkpoint
 * files are 64 MiB objects. */
dcr_sim_cluster_t dcr_sim_cluster_testbed(void)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.train_nodes = 8;
    c.train_gpus = 4;
    c.rollout_nodes = 8;
    c.rollout_gpus = 8;
    c.cross_gbps = 5;
    c.flow_gbps = 5;
    c.local_gbps = 100;
    c.fabric_gbps = 400;
    c.latency_ms = 30;
    c.store_latency_ms = 20;
    c.store_list_ms = 20;
    c.ref_object_mib = 64;
    c.store_flows = 2; /* a stated assumption of the paper calibration (paper-testbed.json) */
    /* The seed's receivers hold 32 resident groups of at most 8 decoded
     * payloads plus one group under assembly: 264 payload slots. */
    c.staging_payloads = 264;
    return c;
}

dcr_sim_cluster_t dcr_sim_cluster_nemo_rl(void)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_testbed();
    /* Stated by the document: 32 producers (8 x 4 is a guess of the split),
     * a balanced binary tree, 32 batches of 8 payloads plus the partial
     * one per receiver, 64 MiB multipart parts. */
    c.fanout = 2;
    c.staging_payloads = 264;
    c.ref_object_mib = 64;
    /* Guesses: the S3 client's 10 Gbps throughput target as each node's
     * rate and per-flow cap; rollout nodes as the seed's (8 x 8 H100);
     * 30 ms one way, 20 ms per S3 request and listing; 8 downloads per
     * node; no extra relay-root cap, no startup. */
    c.cross_gbps = c.flow_gbps = 10;
    c.store_flows = 8;
    c.relay_gbps = 0;
    c.startup_ms = 0;
    return c;
}

static dcr_status_t dcr__check_rate(const char *name, double v)
{
    if (!isfinite(v) || v < 0)
        return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %g, expected a finite value >= 0",
                             name, v);
    return DCR_OK;
}

static dcr_status_t dcr__check_count(const char *name, int v, int max)
{
    if (v < 1 || v > max)
        return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %d, expected 1..%d", name, v, max);
    return DCR_OK;
}

dcr_status_t dcr_sim_cluster_validate(const dcr_sim_cluster_t *c)
{
    DCR_CHECK(dcr__check_count("train_nodes", c->train_nodes, 4096));
    DCR_CHECK(dcr__check_count("train_gpus", c->train_gpus, 64));
    DCR_CHECK(dcr__check_count("rollout_nodes", c->rollout_nodes, 4096));
    DCR_CHECK(dcr__check_count("rollout_gpus", c->rollout_gpus, 64));
    DCR_CHECK(dcr__check_count("store_flows", c->store_flows, 64));
    DCR_CHECK(dcr__check_count("fanout", c->fanout, 64));
    DCR_CHECK(dcr__check_count("queue_payloads", c->queue_payloads, 1 << 20));
    DCR_CHECK(dcr__check_count("owner_queue", c->owner_queue, 1 << 20));
    if (c->staging_payloads < 0 || c->staging_payloads > (1 << 20))
        return dcr_error_set(DCR_EINVAL, "sim cluster: staging_payloads is %d, expected 0..%d",
                             c->staging_payloads, 1 << 20);
    if (c->shared_cores < 0 || c->shared_cores > 4096)
        return dcr_error_set(DCR_EINVAL, "sim cluster: shared_cores is %d, expected 0..4096",
                             c->shared_cores);
    const struct {
        const char *name;
        double v;
    } rates[] = {{"cross_gbps", c->cross_gbps},         {"flow_gbps", c->flow_gbps},
                 {"local_gbps", c->local_gbps},         {"fabric_gbps", c->fabric_gbps},
                 {"latency_ms", c->latency_ms},         {"local_latency_ms", c->local_latency_ms},
                 {"store_gbps", c->store_gbps},         {"store_latency_ms", c->store_latency_ms},
                 {"store_list_ms", c->store_list_ms},   {"store_put_ms", c->store_put_ms},
                 {"ref_object_mib", c->ref_object_mib}, {"relay_gbps", c->relay_gbps},
                 {"startup_ms", c->startup_ms}};
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        DCR_CHECK(dcr__check_rate(rates[i].name, rates[i].v));
    if (c->ref_object_mib <= 0)
        return dcr_error_set(DCR_EINVAL, "sim cluster: ref_object_mib must be > 0");
    return DCR_OK;
}

/* The numeric fields a calibration or a user may set by name. */
typedef struct dcr__cluster_field {
    const char *key;
    size_t offset;
    bool is_int;
} dcr__cluster_field_t;

/* clang-format off */
#define DCR__CD(name) {#name, offsetof(dcr_sim_cluster_t, name), false}
#define DCR__CI(name) {#name, offsetof(dcr_sim_cluster_t, name), true}
/* clang-format on */
static const dcr__cluster_field_t dcr__cluster_fields[] = {
    DCR__CD(cross_gbps),   DCR__CD(flow_gbps),        DCR__CD(local_gbps),
    DCR__CD(fabric_gbps),  DCR__CD(latency_ms),       DCR__CD(local_latency_ms),
    DCR__CD(store_gbps),   DCR__CD(store_latency_ms), DCR__CD(store_list_ms),
    DCR__CD(store_put_ms), DCR__CD(ref_object_mib),   DCR__CI(store_flows),
    DCR__CI(fanout),       DCR__CI(queue_payloads),   DCR__CI(owner_queue),
    DCR__CD(relay_gbps),   DCR__CD(startup_ms),       DCR__CI(staging_payloads),
};

dcr_status_t dcr_sim_cluster_set(dcr_sim_cluster_t *c, const char *key, double v)
{
    for (size_t i = 0; i < sizeof(dcr__cluster_fields) / sizeof(dcr__cluster_fields[0]); i++) {
        const dcr__cluster_field_t *f = &dcr__cluster_fields[i];
        if (strcmp(key, f->key)) continue;
        if (!f->is_int) {
            *(double *)((char *)c + f->offset) = v;
            return DCR_OK;
        }
        if (!(v == floor(v) && fabs(v) <= 1e9))
            return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %g, expected a whole number", key,
                                 v);
        *(int *)((char *)c + f->offset) = (int)v;
        return DCR_OK;
    }
    return dcr_error_set(DCR_EINVAL, "sim cluster: no numeric field \"%s\"", key);
}

dcr_status_t dcr_sim_cluster_apply_calibration(dcr_sim_cluster_t *c,
                                               const dcr_sim_calibration_t *cal)
{
    for (int i = 0; i < cal->ncluster; i++)
        DCR_CHECK(dcr_sim_cluster_set(c, cal->cluster[i].key, cal->cluster[i].value));
    return dcr_sim_cluster_validate(c);
}

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
    const char *p = (const char *)&msg;
    for (size_t done = 0; done < sizeof(msg);) {
        ssize_t n = write(fd, p + done, sizeof(msg) - done);
        if (n <= 0 && errno != EINTR) break;
        if (n > 0) done += (size_t)n;
    }
    close(fd);
    fflush(NULL);
    /* SimGrid's teardown of a finished simulation is of no use here. */
    _exit(0);
}

/* Reads the child's result, waking for a stop signal (workloads/interrupt.h):
 * DCR_EINTR then, and the caller kills the child. */
static dcr_status_t dcr__read_msg(int fd, dcr__child_msg_t *msg, size_t *got_p)
{
    char *p = (char *)msg;
    size_t got = 0;
    while (got < sizeof(*msg)) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {dcr_interrupt_fd(), POLLIN, 0}};
        int np = pf[1].fd >= 0 ? 2 : 1;
        if (dcr_interrupted()) return dcr_interrupt_check("sim");
        if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
            return dcr_error_set(DCR_EIO, "sim: waiting for the simulation: %s", strerror(errno));
        if (dcr_interrupted()) return dcr_interrupt_check("sim");
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(fd, p + got, sizeof(*msg) - got);
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

static dcr_status_t dcr__fork_run(dcr__sim_fn fn, const char *what, const dcr_sim_spec_t *spec,
                                  const dcr_sim_workload_t *w, const char *platform,
                                  dcr__sim_out_t *out)
{
    int fds[2];
    if (pipe(fds) != 0) return dcr_error_set(DCR_EIO, "sim: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return dcr_error_set(DCR_EIO, "sim: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* The child dies with its parent, even by SIGKILL, so a killed dcr
         * sim leaves no simulation running; the parent may have died before
         * the request took effect, hence the check after it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
        /* The parent handles stop signals; the child just dies with it. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        close(fds[0]);
        dcr__child(fds[1], fn, spec, w, platform);
    }
    close(fds[1]);
    dcr__child_msg_t msg;
    size_t got = 0;
    dcr_status_t st = dcr__read_msg(fds[0], &msg, &got);
    close(fds[0]);
    if (st == DCR_EINTR) kill(pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    DCR_CHECK(st);
    if (got != sizeof(msg))
        return dcr_error_set(
            DCR_EINVAL,
            "sim: the %s simulation ended without a result (%s %d; SimGrid's message, "
            "if any, is above)",
            what, WIFSIGNALED(wstatus) ? "signal" : "exit status",
            WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : WEXITSTATUS(wstatus));
    if (msg.status != DCR_OK) return dcr_error_set((dcr_status_t)msg.status, "%s", msg.detail);
    *out = msg.out;
    return DCR_OK;
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
        if (access(spec->cluster.platform_xml, R_OK) != 0)
            return dcr_error_set(DCR_EINVAL, "sim: platform %s: %s", spec->cluster.platform_xml,
                                 strerror(errno));
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

dcr_status_t dcr_sim_run_workload(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                  dcr_sim_result_t *out_p)
{
    DCR_CHECK(dcr__check_workload(spec, w));
    char *platform = NULL;
    bool tmp = false;
    dcr__sim_out_t refit, ref;
    dcr_status_t st = dcr__platform(spec, w, &platform, &tmp);
    if (st == DCR_OK) st = dcr__fork_run(dcr__sim_refit, "refit", spec, w, platform, &refit);
    memset(&ref, 0, sizeof(ref));
    if (st == DCR_OK && !spec->no_reference)
        st = dcr__fork_run(dcr__sim_reference, "reference", spec, w, platform, &ref);
    if (st == DCR_OK) dcr__fill(spec, w, &refit, ref.reference_s, out_p);
    if (tmp) {
        dcr_interrupt_cleanup_remove(platform);
        unlink(platform);
    }
    free(platform);
    return st;
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
