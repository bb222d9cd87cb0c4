/* A rollout-node process: its receivers, its own transport handle, and the
 * control-plane protocol of deploy/roles.h. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/recovery.h"
#include "dcr/outpath.h"
#include "dcr/parties.h"
#include "dcr/rollout_node.h"
#include "dcr/trace.h"
#include "workloads/harness/refusals.h"
#include "deploy/restorer.h"
#include "deploy/role_memory.h"
#include "deploy/roles.h"
#include "deploy/world.h"
#include "workloads/serve/vllm_layout.h"

/* Waiting for an attempt, a commit or the coordinator's open: the longest
 * one wait for a change of the control plane sleeps before the node reads
 * again (a lost notification, the stop flag, the turn's timeout). */
#define IDLE_WAIT_MS 100
/* Watching for a newer attempt (and the stop flag) while delivering: one
 * control-plane read each time (on etcd a request, about 80 a refit at 5 ms,
 * most of a node's reads). It bounds how long a node keeps delivering a
 * replaced attempt, which costs only a failure's recovery time, never a
 * refit's. The delivery's end itself wakes the node at once
 * (dcr_rollout_node_wait): the acknowledgment waits on it, inside the
 * refit's window (it was a look every 250 us, 4,000 wake-ups a second per
 * node beside the owners' construction on a shared host). */
#define DELIVER_POLL_MS 50
#define TURN_TIMEOUT_MS 30000 /* waiting for the handles before this one to open */
/* After a commit, the longest a node waits for the owners to say their
 * baselines are updated before it hashes its receivers anyway (an owner
 * job that died after the commit says nothing until its restart). */
#define OWNERS_DONE_WAIT_MS 250

dcr_status_t dcr_role_relay_retain_url(const dcr_run_config_t *run, const char *workdir, int node,
                                       char *url, size_t cap)
{
    if (node == 0) {
        char dir[4200];
        dcr_rundir_relay_retain_dir(workdir, dir, sizeof(dir));
        snprintf(url, cap, "dir:%s", dir);
        return DCR_OK;
    }
    dcr_control_t *c = NULL;
    DCR_CHECK(dcr_role_control_open(run, workdir, &c));
    char addr[256];
    dcr_status_t st = dcr_node_endpoint_get(c, 0, addr, sizeof(addr));
    if (st == DCR_OK && strlen(addr) + 9 > cap)
        st = dcr_error_set(DCR_ECONTROL, "relay root: a published address of %zu bytes",
                           strlen(addr));
    if (st == DCR_OK) snprintf(url, cap, "relay://%s", addr);
    dcr_control_destroy(c);
    return st;
}

dcr_status_t dcr_role_control_open(const dcr_run_config_t *cfg, const char *workdir,
                                   dcr_control_t **out_p)
{
    return dcr_role_control_open_at(cfg->control_path, workdir, out_p);
}

dcr_status_t dcr_role_control_open_at(const char *control, const char *workdir,
                                      dcr_control_t **out_p)
{
    char path[4200];
    if (dcr_run_control_is_etcd(control)) {
        char url[1024];
        snprintf(path, sizeof(path), "%s/control.url", workdir);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(url, 1, sizeof(url) - 1, f) : 0;
        if (f) fclose(f);
        if (n == 0 || n == sizeof(url) - 1 || memchr(url, '\n', n) != NULL)
            return dcr_error_set(DCR_ECONTROL,
                                 "the run's etcd namespace in %s is missing or "
                                 "malformed",
                                 path);
        url[n] = '\0';
        return dcr_run_control_open(url, NULL, NULL, out_p);
    }
    dcr_rundir_control_path(workdir, path, sizeof(path));
    return dcr_run_control_open(control, path, NULL, out_p);
}

static dcr_status_t relay_publish(void *ctx, int node, const char *addr)
{
    dcr_role_relay_t *d = ctx;
    return dcr_node_endpoint_put(d->control, node, addr);
}

static dcr_status_t relay_lookup(void *ctx, int node, char *addr, size_t cap)
{
    dcr_role_relay_t *d = ctx;
    return dcr_node_endpoint_get(d->control, node, addr, cap);
}

void dcr_role_relay_close(dcr_role_relay_t *d)
{
    if (d == NULL) return;
    dcr_control_destroy(d->control);
    d->control = NULL;
}

/* The relay tree's part of this process (roles.h, "Endpoints"). */
static dcr_status_t relay_open(const dcr_run_config_t *cfg, const char *workdir, int train_nodes,
                               int world, const dcr_role_handle_t *as, dcr_transport_t **out_p)
{
    if (!as->relay)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "--transport relay: this role's handle has no relay directory");
    dcr_role_relay_t *d = as->relay;
    d->dir = (dcr_relay_directory_t){relay_publish, relay_lookup, d};
    if (!d->control) DCR_CHECK(dcr_role_control_open(cfg, workdir, &d->control));
    const char *host = getenv("DCR_RELAY_HOST");
    dcr_transport_config_t tc = {.train_nodes = train_nodes,
                                 .world = world,
                                 .rollout_nodes = cfg->serve.nodes,
                                 .link = cfg->link,
                                 .fanout = cfg->fanout,
                                 .queue_payloads = 8,
                                 .relay_dir = &d->dir,
                                 .relay_node = as->send_only ? -1 : as->node,
                                 .relay_host = host && *host ? host : NULL};
    DCR_CHECK(dcr_transport_create("relay", &tc, out_p));
    dcr_transport_set_payload_key(*out_p, &cfg->payload_key);
    return DCR_OK;
}

dcr_status_t dcr_role_transport_open_as(const dcr_run_config_t *cfg, const char *workdir,
                                        int train_nodes, int world, int rollout_nodes,
                                        const dcr_role_handle_t *as, dcr_transport_t **out_p)
{
    if (!strcmp(cfg->transport, "relay"))
        return relay_open(cfg, workdir, train_nodes, world, as, out_p);
    if (strcmp(cfg->transport, "objstore"))
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "--transport %s across processes: expected objstore or relay",
                             cfg->transport);
    char dir[4200];
    dcr_rundir_objstore_dir(workdir, dir, sizeof(dir));
    /* The same store (and payload key) as every other process of the run. */
    dcr_transport_config_t tc = {.train_nodes = train_nodes,
                                 .world = world,
                                 .rollout_nodes = rollout_nodes,
                                 .link = cfg->link,
                                 .dir = cfg->store ? cfg->store : dir,
                                 .fanout = cfg->fanout,
                                 .queue_payloads = 8,
                                 .s3_endpoint = cfg->store ? cfg->s3_endpoint : NULL,
                                 .join = as->join,
                                 .owner_first = as->owner_first,
                                 .owner_count = as->owner_count,
                                 .send_only = as->send_only};
    DCR_CHECK(dcr_transport_create(as->backend ? as->backend : "objstore", &tc, out_p));
    dcr_transport_set_payload_key(*out_p, &cfg->payload_key);
    return DCR_OK;
}

typedef struct node_proc {
    const dcr_role_node_config_t *cfg;
    dcr_role_world_t *world;
    dcr_control_t *control;
    dcr_transport_t *transport;
    dcr_rollout_node_t *rt;
    dcr_receiver_t **recv;
    uint8_t *member; /* per receiver of the node: required by the current attempt */
    int first, per;
    uint64_t version; /* what the receivers hold, committed */
    uint64_t seen;    /* the latest attempt looked at */
    uint64_t done;    /* the attempt applied and acknowledged, awaiting its commit; 0: none */
    /* Apply markers (roles.h): on when kill-points/ existed at setup; the
     * attempt being delivered and the last one marked (node thread only). */
    bool mark_applies;
    uint64_t delivering, marked;
    dcr_restorer_t *restorer; /* restores by kind, resident files (restore.h) */
    bool unready;             /* a restarted process not READY yet: its repair pends */
    dcr_role_relay_t relay;   /* --transport relay: where the tree's nodes are */
    bool retaining;           /* the relay root keeps the window (--retain) */
    /* The refusal counts last written (write_refusals), valid once written. */
    bool refusals_written;
    dcr_refusals_t refusals;
} node_proc_t;

static dcr_receiver_t *env_receiver(void *ctx, int id)
{
    node_proc_t *p = ctx;
    return p->recv[id - p->first];
}

static bool env_member(void *ctx, int id)
{
    node_proc_t *p = ctx;
    return p->member[id - p->first] != 0;
}

/* The first apply of the attempt being delivered begins: the marker a
 * harness aims an apply kill by (roles.h). */
static void env_dirty(void *ctx, int id)
{
    node_proc_t *p = ctx;
    /* Live resident files: the durable dirty mark before the first write. */
    dcr_restorer_begin(p->restorer, id - p->first, p->delivering);
    if (!p->mark_applies || p->marked == p->delivering) return;
    p->marked = p->delivering;
    char path[4300];
    dcr_rundir_apply_marker_path(p->cfg->workdir, p->cfg->node, p->delivering, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

/* This process's refusals so far (its receivers' and its transport
 * handle's) to the work folder, where the launcher sums them
 * (workloads/harness/refusals.h): written by this process's first report
 * and whenever they changed since, not before every report (three a refit,
 * one of them, DONE, on the refit's finalization path: a file created and
 * renamed each time). force: at the end, whatever was written before. */
static dcr_status_t write_refusals(node_proc_t *p, bool force)
{
    dcr_refusals_t r = {0, 0};
    for (int k = 0; p->recv && k < p->per; k++) {
        if (!p->recv[k]) continue;
        dcr_receiver_stats_t rs;
        dcr_receiver_stats(p->recv[k], &rs);
        r.rejected += rs.rejected;
        r.unauthenticated += rs.unauthenticated;
    }
    if (p->transport) {
        dcr_transport_counters_t tc;
        dcr_transport_counters(p->transport, &tc);
        r.rejected += (uint64_t)tc.rejected;
        r.unauthenticated += (uint64_t)tc.unauthenticated;
    }
    if (!force && p->refusals_written && r.rejected == p->refusals.rejected &&
        r.unauthenticated == p->refusals.unauthenticated)
        return DCR_OK;
    DCR_CHECK(dcr_refusals_write(p->cfg->workdir, p->cfg->node, &r));
    p->refusals = r;
    p->refusals_written = true;
    return DCR_OK;
}

/* The node's report of phase for tau (why: FAILED's line, or NULL). */
static void fill_report(node_proc_t *p, dcr_node_phase_t phase, uint64_t tau, const char *why,
                        dcr_node_report_t *out_p)
{
    /* Before the report: the launcher reads the totals once every node
     * reported the last commit. */
    /* Statistics only: a failed write (a full disk) must not fail the node. */
    if (write_refusals(p, false) != DCR_OK)
        DCR_LOG_WARN("rollout node %d: refusal counts not written: %s", p->cfg->node,
                     dcr_error_detail());
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.node = (uint32_t)p->cfg->node;
    r.phase = phase;
    r.tau = tau;
    r.version = p->version;
    r.pid = (int32_t)getpid();
    r.apply_end = dcr_rollout_node_last_apply_end(p->rt);
    dcr_transport_counters_t tc;
    dcr_transport_counters(p->transport, &tc);
    r.cross_bytes = tc.cross_bytes;
    r.cpu_s = dcr_clock_process_cpu_s();
    snprintf(r.why, sizeof(r.why), "%s", why ? why : "");
    *out_p = r;
}

static dcr_status_t report(node_proc_t *p, dcr_node_phase_t phase, uint64_t tau, const char *why)
{
    dcr_node_report_t r;
    fill_report(p, phase, tau, why, &r);
    return dcr_node_report_put(p->control, &r);
}

/* READY lets the node serve: never while a receiver is dirty (the readers'
 * check, restore.h: payloads since its clean point or a live dirty mark). */
static dcr_status_t report_ready(node_proc_t *p, uint64_t tau)
{
    for (int k = 0; k < p->per; k++)
        if (!dcr_restorer_serves(p->restorer, p->recv, k))
            return dcr_error_set(DCR_EINVAL,
                                 "rollout node %d: receiver %d is not at a clean committed "
                                 "version; refusing READY",
                                 p->cfg->node, p->first + k);
    return report(p, DCR_NODE_READY, tau, NULL);
}

/* The committed version into the receivers before a new or lagging node
 * joins: at once when they hold it clean, by replay of the retained versions
 * when they hold an older one clean, else by a dense refit (restore.h). */
static dcr_status_t restore(node_proc_t *p, uint64_t version)
{
    if (!p->restorer) {
        /* Resident: live (restore.h), the weights in their files, and a
         * receiver dirty at the committed version repaired in the retry. */
        dcr_restorer_config_t rc = {p->cfg->run,      p->world,         p->cfg->workdir,
                                    p->cfg->node,     p->first,         p->per,
                                    p->cfg->resident, p->cfg->resident, p->cfg->resident};
        DCR_CHECK(dcr_restorer_create(&rc, &p->restorer));
    }
    DCR_CHECK(dcr_restorer_restore(p->restorer, p->recv, p->version, version));
    p->version = version;
    return DCR_OK;
}

static dcr_status_t write_file(const char *path, const uint8_t *buf, size_t len)
{
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return dcr_error_set(DCR_EIO, "cannot create %s: %s", tmp, strerror(errno));
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return dcr_error_set(DCR_EIO, "cannot write %s", path);
    }
    return DCR_OK;
}

static dcr_status_t make_dir(const char *workdir, const char *name)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/%s", workdir, name);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
    return DCR_OK;
}

dcr_status_t dcr_role_trace_write(const char *workdir, int who, uint64_t tau)
{
    DCR_CHECK(make_dir(workdir, "trace"));
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_trace_snapshot(&iv, &n));
    char path[4300];
    dcr_rundir_trace_path(workdir, who, tau, path, sizeof(path));
    dcr_status_t st = write_file(path, (const uint8_t *)iv, n * sizeof(*iv));
    free(iv);
    return st;
}

/* The node's peak memory beside what it must hold (role_memory.h): its
 * receivers' replicas and one tensor's scratch. A failure costs a warning:
 * the figures are a report, not part of the refit. */
static void write_memory(node_proc_t *p)
{
    dcr_role_memory_t m = {.role = "rollout-node", .id = p->cfg->node};
    int64_t replicas = 0;
    for (int k = 0; k < p->per; k++)
        replicas += (int64_t)dcr_params_bytes(dcr_receiver_params(p->recv[k]));
    int64_t scratch = dcr_role_world_largest_tensor(p->world);
    dcr_role_memory_part(&m, "replicas", replicas);
    dcr_role_memory_part(&m, "scratch", scratch);
    m.required_bytes = replicas + scratch;
    m.harness_bytes = dcr_role_world_bytes(p->world);
    dcr_role_memory_part(&m, "seeded_world", m.harness_bytes);
    if (dcr_role_memory_write(p->cfg->workdir, &m) != DCR_OK)
        DCR_LOG_WARN("rollout node %d: %s", p->cfg->node, dcr_error_detail());
}

/* After a commit: every receiver's digests, for the verifier. */
static dcr_status_t write_digests(node_proc_t *p)
{
    DCR_CHECK(make_dir(p->cfg->workdir, "digests"));
    for (int k = 0; k < p->per; k++) {
        dcr_param_digests_t d;
        DCR_CHECK(dcr_receiver_digests(p->recv[k], &d));
        uint8_t *buf = NULL;
        size_t len = 0;
        dcr_status_t st = dcr_param_digests_encode(&d, &buf, &len);
        dcr_param_digests_free(&d);
        char path[4300];
        dcr_rundir_digest_path(p->cfg->workdir, p->version, p->first + k, path, sizeof(path));
        if (st == DCR_OK) st = write_file(path, buf, len);
        free(buf);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

/* Whether the owners' report ends their part in the commit of attempt
 * tau: their baselines updated (or a later attempt), or the job failed or
 * restarted. */
static bool owners_past_commit(const dcr_owners_report_t *r, uint64_t tau)
{
    if (r->tau > tau || r->phase == DCR_OWNERS_FAILED || r->phase == DCR_OWNERS_READY) return true;
    return r->tau == tau && r->phase == DCR_OWNERS_COMMITTED;
}

/* The verifier's digests hash every receiver's storage: harness work, not
 * the refit's. Hashed at once after the commit, they took the shared cores
 * from the owner ranks' baseline updates, whose end closes the refit's
 * window (t1); so they wait until the owners report the commit done, at
 * most OWNERS_DONE_WAIT_MS. The owners' next candidate takes far longer
 * than the hashing, so the next attempt does not wait for it. */
static void await_owners_commit(node_proc_t *p, uint64_t tau)
{
    double t0 = dcr_clock_s();
    for (;;) {
        uint64_t pos = dcr_control_position(p->control);
        dcr_owners_report_t r;
        if (dcr_owners_report_get(p->control, &r) == DCR_OK && owners_past_commit(&r, tau)) return;
        int left_ms = OWNERS_DONE_WAIT_MS - (int)((dcr_clock_s() - t0) * 1000.0);
        if (left_ms <= 0) return;
        (void)dcr_control_wait(p->control, pos, left_ms);
    }
}

/* The relay root keeps the committed version for replays
 * (dcr/recovery.h), first, so that nodes waiting to replay find it
 * soon; a failure leaves a gap (their replays go dense), not a failed node. */
static void retain_commit(node_proc_t *p, uint64_t tau, uint64_t version)
{
    dcr_retain_stats_t rs;
    dcr_status_t st = dcr_relay_retain_commit(p->transport, tau, version, &rs);
    if (st == DCR_OK)
        DCR_LOG_INFO("relay root: retained version %llu: %llu payloads, %llu bytes in %.3f s "
                     "(%llu pruned)",
                     (unsigned long long)version, (unsigned long long)rs.payloads,
                     (unsigned long long)rs.bytes, rs.seconds, (unsigned long long)rs.pruned);
    else
        DCR_LOG_WARN("relay root: version %llu not retained: %s", (unsigned long long)version,
                     dcr_error_line(st));
}

/* A restarted root (node 0): the committed version it staged before it
 * died (killed between its acknowledgment and the commit) is published
 * before its own restore, which may replay it; a failure is a gap. */
static void recover_retained(node_proc_t *p, const dcr_commit_record_t *rec)
{
    char dir[4200], url[4300];
    dcr_rundir_relay_retain_dir(p->cfg->workdir, dir, sizeof(dir));
    snprintf(url, sizeof(url), "dir:%s", dir);
    dcr_retain_stats_t rs;
    dcr_status_t st =
        dcr_relay_retain_recover(url, rec->attempt, rec->version, p->cfg->run->retain, &rs);
    if (st == DCR_OK && rs.payloads > 0)
        DCR_LOG_INFO("relay root: retained version %llu at its restart: %llu payloads staged "
                     "before it, %llu bytes",
                     (unsigned long long)rec->version, (unsigned long long)rs.payloads,
                     (unsigned long long)rs.bytes);
    else if (st != DCR_OK)
        DCR_LOG_WARN("relay root: version %llu not retained at its restart: %s",
                     (unsigned long long)rec->version, dcr_error_line(st));
}

/* The commit record moved: our attempt committed (digests, READY), or the
 * run went on without this node (restore by dense refit). */
static dcr_status_t follow_record(node_proc_t *p)
{
    dcr_commit_record_t rec;
    if (dcr_control_read(p->control, &rec) != DCR_OK || rec.version <= p->version) return DCR_OK;
    if (p->done && rec.attempt == p->done && rec.version == p->version + 1) {
        p->version = rec.version;
        p->done = 0;
        if (p->retaining) retain_commit(p, rec.attempt, rec.version);
        DCR_CHECK(dcr_restorer_committed(p->restorer, p->recv, p->version));
        /* A receiver left dirty for a repair it took no part in (not
         * required by the attempt): repaired from the retained records. */
        if (dcr_restorer_dirty(p->restorer, p->recv)) DCR_CHECK(restore(p, p->version));
        await_owners_commit(p, rec.attempt);
        DCR_CHECK(write_digests(p));
        DCR_LOG_INFO("rollout node %d: version %llu committed", p->cfg->node,
                     (unsigned long long)p->version);
    } else {
        DCR_LOG_WARN("rollout node %d: version %llu committed without it; restoring", p->cfg->node,
                     (unsigned long long)rec.version);
        p->done = 0;
        /* A root restarted after it acknowledged: the commit it missed was
         * staged before the restart (first, for its own restore's replay). */
        if (p->retaining) retain_commit(p, rec.attempt, rec.version);
        /* The verifier expects every receiver's digests of every committed
         * version, also of those this node restored instead of applying: one
         * version at a time (a node that joined mid-run may be several
         * behind once its own restore is done). */
        for (uint64_t v = p->version + 1; v <= rec.version; v++) {
            DCR_CHECK(restore(p, v));
            DCR_CHECK(write_digests(p));
        }
    }
    DCR_CHECK(report_ready(p, rec.attempt));
    if (p->unready) /* the line node_setup writes when it restored at once */
        DCR_LOG_INFO("rollout node %d (pid %d): READY at version %llu after its restore (a "
                     "repair in the overwrite retry)",
                     p->cfg->node, (int)getpid(), (unsigned long long)p->version);
    p->unready = false;
    return DCR_OK;
}

/* Whether a newer attempt than tau has been prepared. */
static bool superseded(node_proc_t *p, uint64_t tau)
{
    dcr_control_attempt_t a;
    return dcr_control_attempt(p->control, 0, &a) == DCR_OK && a.tau > tau;
}

/* The node's member receivers acknowledge tau and the node reports DONE,
 * in one control-plane write (each write is a round trip on the refit's
 * path, and wakes every process that waits on the control plane).
 * Acknowledgments are finalization intervals of the receivers, as the
 * in-process coordinator records them: one each, all over the one write. */
static dcr_status_t acknowledge_done(node_proc_t *p, uint64_t tau)
{
    uint32_t who[DCR_CONTROL_ACK_MANY_MAX];
    dcr_trace_span_t span[DCR_CONTROL_ACK_MANY_MAX];
    size_t n = 0;
    for (int k = 0; k < p->per; k++) {
        if (!p->member[k]) continue;
        if (n == DCR_CONTROL_ACK_MANY_MAX)
            return dcr_error_set(DCR_EINVAL, "rollout node %d: more than %d receivers",
                                 p->cfg->node, DCR_CONTROL_ACK_MANY_MAX);
        who[n] = (uint32_t)(p->first + k);
        span[n] = dcr_trace_begin(DCR_STAGE_ACK, DCR_ACTOR_RECEIVER, p->first + k);
        n++;
    }
    if (n == 0) return report(p, DCR_NODE_DONE, tau, NULL);
    dcr_node_report_t r;
    fill_report(p, DCR_NODE_DONE, tau, NULL, &r);
    dcr_status_t st = dcr_node_report_put_acked(p->control, &r, who, n);
    for (size_t i = 0; i < n; i++) dcr_trace_end(&span[i]);
    return st;
}

/* Every handle of a role process joins the attempt (dcr/transport.h): it
 * opens tau once the coordinator's clearing handle has. */
static dcr_status_t wait_turn(node_proc_t *p, uint64_t tau)
{
    double t0 = dcr_clock_s();
    for (;;) {
        uint64_t pos = dcr_control_position(p->control);
        uint64_t opened = 0;
        if (dcr_coord_opened(p->control, &opened) == DCR_OK && opened >= tau) return DCR_OK;
        if ((dcr_clock_s() - t0) * 1000.0 > TURN_TIMEOUT_MS)
            return dcr_error_set(DCR_ETIMEOUT,
                                 "rollout node %d: the coordinator did not open attempt %llu "
                                 "within %d ms",
                                 p->cfg->node, (unsigned long long)tau, TURN_TIMEOUT_MS);
        if (superseded(p, tau))
            return dcr_error_set(DCR_EATTEMPT, "attempt %llu was replaced",
                                 (unsigned long long)tau);
        (void)dcr_control_wait(p->control, pos, IDLE_WAIT_MS);
    }
}

/* An attempt this node takes no part in. Over a transport whose peers
 * connect per attempt (the relay tree: its children and, at the root, the
 * owners) those that wait for this node to open it are turned away at once
 * (opened and stopped: a later hello for it is refused too), so that they
 * fail the attempt now rather than when the coordinator gives up on it. */
static dcr_status_t refuse(node_proc_t *p, uint64_t tau)
{
    if (!dcr_transport_props(p->transport)->connections) return DCR_OK;
    DCR_CHECK(dcr_transport_open_attempt(p->transport, tau));
    dcr_transport_stop_and_wait(p->transport);
    return DCR_OK;
}

/* Receivers that took part in attempt a dirty (left pending by their
 * restore: the overwrite retry from the version they are dirty at repairs
 * them in place) must hold a dense refit of the version it builds before
 * they acknowledge (the oracle; restore.h). Bytes: what this node's handle
 * downloaded for the attempt (one download serves all its receivers). */
static dcr_status_t check_repairs(node_proc_t *p, const dcr_control_attempt_t *a,
                                  const dcr_transport_counters_t *tc0)
{
    dcr_transport_counters_t tc;
    dcr_transport_counters(p->transport, &tc);
    uint64_t bytes = (uint64_t)(tc.cross_bytes - tc0->cross_bytes);
    for (int k = 0; k < p->per; k++) {
        if (!p->member[k] || !dcr_restorer_pending(p->restorer, k)) continue;
        dcr_status_t st =
            dcr_restorer_check_repair(p->restorer, p->recv, k, a->from_version + 1, bytes);
        if (st != DCR_OK) return st;
        DCR_LOG_INFO("rollout node %d: receiver %d repaired in place by attempt %llu: its "
                     "digests equal a dense refit of version %llu",
                     p->cfg->node, p->first + k, (unsigned long long)a->tau,
                     (unsigned long long)(a->from_version + 1));
    }
    return DCR_OK;
}

/* Takes part in attempt a: join, deliver and apply, acknowledge. */
static dcr_status_t take_part(node_proc_t *p, const dcr_control_attempt_t *a,
                              volatile sig_atomic_t *stop)
{
    uint32_t *req = malloc((a->n_required ? a->n_required : 1) * sizeof(uint32_t));
    if (!req)
        return dcr_error_set(DCR_ENOMEM, "required receivers of attempt %llu",
                             (unsigned long long)a->tau);
    size_t n = 0;
    dcr_status_t st = dcr_control_required(p->control, a->tau, req, a->n_required, &n);
    int members = 0;
    memset(p->member, 0, (size_t)p->per);
    for (size_t i = 0; st == DCR_OK && i < n && i < a->n_required; i++)
        if ((int)req[i] >= p->first && (int)req[i] < p->first + p->per) {
            p->member[req[i] - (uint32_t)p->first] = 1;
            members++;
        }
    free(req);
    if (st != DCR_OK) return st;
    if (members == 0) return refuse(p, a->tau);
    p->done = 0;
    dcr_transport_counters_t tc0;
    dcr_transport_counters(p->transport, &tc0);
    /* This attempt's intervals only, tagged with the version it builds. */
    dcr_trace_reset();
    dcr_trace_set_refit((uint32_t)(a->from_version + 1));
    for (int k = 0; k < p->per; k++)
        if (p->member[k]) DCR_CHECK(dcr_receiver_begin_attempt(p->recv[k], a->tau));
    st = wait_turn(p, a->tau);
    if (st != DCR_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", dcr_error_line(st));
        if (st == DCR_EATTEMPT) return DCR_OK; /* replaced: the loop takes the next one */
        return st == DCR_ETIMEOUT ? report(p, DCR_NODE_FAILED, a->tau, why) : st;
    }
    DCR_CHECK(dcr_transport_open_attempt(p->transport, a->tau));
    DCR_CHECK(report(p, DCR_NODE_JOINED, a->tau, NULL));
    p->delivering = a->tau; /* before the node thread starts: it reads it */
    DCR_CHECK(dcr_rollout_node_start_deliver(p->rt, a->tau));
    bool cancelled = false;
    while (!dcr_rollout_node_wait(p->rt, DELIVER_POLL_MS)) {
        if (*stop || superseded(p, a->tau)) {
            /* The attempt was replaced: its writes must stop here too. */
            cancelled = true;
            dcr_transport_stop_and_wait(p->transport);
            break;
        }
    }
    st = dcr_rollout_node_join(p->rt);
    if (cancelled) return DCR_OK;
    if (st == DCR_OK) st = check_repairs(p, a, &tc0);
    if (st == DCR_OK) st = acknowledge_done(p, a->tau);
    if (st != DCR_OK) {
        char why[256];
        snprintf(why, sizeof(why), "%s", dcr_error_line(st));
        DCR_LOG_WARN("rollout node %d: attempt %llu failed: %s", p->cfg->node,
                     (unsigned long long)a->tau, why);
        return report(p, DCR_NODE_FAILED, a->tau, why);
    }
    p->done = a->tau;
    /* After DONE, as the memory figures: the coordinator waits on that
     * report (the commit follows it), not on these. It waits for this file
     * before it answers the launcher, which imports it then (coord_role.c). */
    st = dcr_role_trace_write(p->cfg->workdir, p->cfg->node, a->tau);
    write_memory(p);
    return st;
}

/* Before taking part in attempt tau: receivers that hold writes of an
 * attempt that did not commit (it failed, was replaced, or the coordinator
 * gave up) are restored to the committed version first (restore.h, cause
 * dirty). The engine drops such writes through gate dirty marks that node
 * processes never set; without this an XOR attempt from the same version
 * would apply its deltas over them. */
static dcr_status_t clean_before(node_proc_t *p, uint64_t tau)
{
    if (!dcr_restorer_dirty(p->restorer, p->recv)) return DCR_OK;
    DCR_LOG_WARN("rollout node %d: receivers hold writes of an attempt that did not commit; "
                 "restoring version %llu before attempt %llu (live: those dirty at it take "
                 "part in it as they are, to be repaired by it)",
                 p->cfg->node, (unsigned long long)p->version, (unsigned long long)tau);
    return restore(p, p->version);
}

/* Whether a receiver waits for its repair in the overwrite retry. */
static bool any_pending(const node_proc_t *p)
{
    for (int k = 0; k < p->per; k++)
        if (dcr_restorer_pending(p->restorer, k)) return true;
    return false;
}

static dcr_status_t node_loop(node_proc_t *p, volatile sig_atomic_t *stop)
{
    while (!*stop) {
        /* Before the reads: a change after them ends the wait below. */
        uint64_t pos = dcr_control_position(p->control);
        DCR_CHECK(follow_record(p));
        dcr_control_attempt_t a;
        dcr_status_t st = dcr_control_attempt(p->control, 0, &a);
        if (st == DCR_OK && a.tau > p->seen) {
            p->seen = a.tau;
            if (a.from_version == p->version) {
                DCR_CHECK(clean_before(p, a.tau));
                DCR_CHECK(take_part(p, &a, stop));
            } else {
                DCR_CHECK(refuse(p, a.tau));
            }
            continue;
        }
        if (st != DCR_OK && st != DCR_ENOTFOUND && st != DCR_ECONTROL) return st;
        (void)dcr_control_wait(p->control, pos, IDLE_WAIT_MS);
    }
    return DCR_OK;
}

dcr_status_t dcr_role_control_open_patiently(const dcr_run_config_t *run, const char *workdir,
                                             int timeout_ms, dcr_control_t **control_p,
                                             dcr_commit_record_t *rec)
{
    double t0 = dcr_clock_s();
    dcr_status_t st;
    for (;;) {
        st = *control_p ? DCR_OK : dcr_role_control_open(run, workdir, control_p);
        if (st == DCR_OK) st = dcr_control_read(*control_p, rec);
        if (st == DCR_OK || (dcr_clock_s() - t0) * 1000.0 > timeout_ms) return st;
        dcr_clock_nap_ns(50000000L);
    }
}

static dcr_status_t open_patiently(node_proc_t *p, dcr_commit_record_t *rec)
{
    dcr_status_t st = dcr_role_control_open_patiently(p->cfg->run, p->cfg->workdir,
                                                      p->cfg->ready_timeout_ms, &p->control, rec);
    if (st != DCR_OK)
        dcr_error_prefix("rollout node %d: the control plane in %s stayed unreachable for %d ms: ",
                         p->cfg->node, p->cfg->workdir, p->cfg->ready_timeout_ms);
    return st;
}

static dcr_status_t node_setup(node_proc_t *p)
{
    dcr_trace_enable(true);
    DCR_CHECK(dcr_role_world_create(p->cfg->run, &p->world));
    const dcr_serve_config_t *sv = &p->world->serve;
    if (p->cfg->node < 0 || p->cfg->node >= sv->nodes)
        return dcr_error_set(DCR_EINVAL, "--node %d: the run has rollout nodes 0..%d", p->cfg->node,
                             sv->nodes - 1);
    p->per = sv->gpus_per_node;
    p->first = p->cfg->node * p->per;
    p->recv = calloc((size_t)p->per, sizeof(*p->recv));
    p->member = calloc((size_t)p->per, 1);
    if (!p->recv || !p->member) return dcr_error_set(DCR_ENOMEM, "rollout node receivers");
    dcr_commit_record_t rec;
    DCR_CHECK(open_patiently(p, &rec));
    bool relay = !strcmp(p->cfg->run->transport, "relay");
    bool root_retains = relay && p->cfg->node == 0 && p->cfg->run->retain > 0;
    if (root_retains && rec.version > 0) recover_retained(p, &rec);
    DCR_CHECK(restore(p, rec.version));
    dcr_control_attempt_t a;
    if (dcr_control_attempt(p->control, 0, &a) == DCR_OK) p->seen = a.tau; /* joins later ones */
    const dcr_scenario_t *sc = p->world->sc;
    /* Object store: a handle of one endpoint (index 0); relay: tree node
     * `node` of the run's tree. */
    dcr_role_handle_t as = {.join = true, .relay = &p->relay, .node = p->cfg->node};
    DCR_CHECK(dcr_role_transport_open_as(p->cfg->run, p->cfg->workdir, sc->train.nodes,
                                         sc->layout->world, 1, &as, &p->transport));
    if (root_retains) {
        /* Before any attempt opens (refuse below may open one). A fresh
         * run clears an earlier run's window; a restarted root keeps its. */
        char dir[4200], url[4300];
        dcr_rundir_relay_retain_dir(p->cfg->workdir, dir, sizeof(dir));
        snprintf(url, sizeof(url), "dir:%s", dir);
        DCR_CHECK(dcr_relay_retain_start(p->transport, url, p->cfg->run->retain, rec.version == 0));
        p->retaining = true;
    }
    dcr_rollout_node_config_t nc = {
        p->cfg->node, p->first, p->per, false, 120000, 0, relay ? 0 : p->cfg->node};
    /* The attempt under way when this process started is not ours. */
    if (p->seen > 0) DCR_CHECK(refuse(p, p->seen));
    char marks[4200];
    dcr_rundir_kill_points_dir(p->cfg->workdir, marks, sizeof(marks));
    p->mark_applies = access(marks, F_OK) == 0;
    dcr_rollout_node_env_t env = {
        .receiver = env_receiver, .member = env_member, .dirty = env_dirty, .ctx = p};
    DCR_CHECK(dcr_rollout_node_create(&nc, &env, p->transport, &p->rt));
    /* A restarted node may have died between a commit and its digests:
     * what it restored is what it holds at that version. */
    if (any_pending(p)) {
        /* Killed mid-apply: its bytes are of no version until the overwrite
         * retry repairs them. Not READY (it must not serve); a report other
         * than RESTARTING lets the coordinator prepare that retry. */
        char why[200];
        snprintf(why, sizeof(why),
                 "dirty at version %llu: awaiting its repair in the overwrite retry",
                 (unsigned long long)p->version);
        DCR_LOG_WARN("rollout node %d (pid %d): %s", p->cfg->node, (int)getpid(), why);
        p->unready = true;
        return report(p, DCR_NODE_FAILED, p->seen, why);
    }
    /* Killed inside write_digests, some receivers' files exist and others
     * do not (each file appears whole): all of them, then. */
    bool missing = false;
    for (int k = 0; k < p->per && p->version > 0 && !missing; k++) {
        char path[4300];
        dcr_rundir_digest_path(p->cfg->workdir, p->version, p->first + k, path, sizeof(path));
        missing = access(path, F_OK) != 0;
    }
    if (missing) DCR_CHECK(write_digests(p));
    /* The request gate across processes (restore.h): a process reports
     * READY only here, after every receiver was restored and checked. */
    DCR_LOG_INFO("rollout node %d (pid %d): READY at version %llu after its restore", p->cfg->node,
                 (int)getpid(), (unsigned long long)p->version);
    return report_ready(p, p->seen);
}

dcr_status_t dcr_role_rollout_node_run(const dcr_role_node_config_t *cfg,
                                       volatile sig_atomic_t *stop)
{
    node_proc_t p;
    memset(&p, 0, sizeof(p));
    p.cfg = cfg;
    dcr_role_memory_mark_base(); /* before the world: what any process holds */
    dcr_status_t st = node_setup(&p);
    if (st == DCR_OK) {
        DCR_LOG_INFO("rollout node %d: receivers %d..%d hold version %llu", cfg->node, p.first,
                     p.first + p.per - 1, (unsigned long long)p.version);
        st = node_loop(&p, stop);
    }
    dcr_role_log_requests("rollout-node", cfg->node, p.version);
    /* The last totals, refusals since the last report included. */
    dcr_status_t wst = write_refusals(&p, true);
    if (st == DCR_OK) st = wst;
    dcr_rollout_node_destroy(p.rt);
    dcr_transport_destroy(p.transport);
    dcr_role_relay_close(&p.relay);
    /* Receivers before the restorer: live, their bytes are its mappings. */
    for (int k = 0; p.recv && k < p.per; k++) dcr_receiver_destroy(p.recv[k]);
    dcr_restorer_destroy(p.restorer);
    free(p.recv);
    free(p.member);
    dcr_control_destroy(p.control);
    dcr_role_world_destroy(p.world);
    return st;
}
