/* An owner rank of `mpirun -np P dcr owner` (roles.h, "Owners as
 * processes"): the training cluster as an MPI job, one owner per rank.
 *
 * Rank 0 alone reads the control plane and tells every rank what to do next
 * over the group (an order: take part in attempt tau, commit, restore, stop),
 * so that every rank runs the same construction with the same tau, the same
 * candidate version and the same XOR-or-overwrite choice: the constructor's
 * exchanges pair up across ranks only when all of them run the same attempt.
 * Each rank reports back to rank 0 (its figures, or its error line), and
 * rank 0 writes the job's report (dcr/parties.h, dcr_owners_report_put).
 * Orders and reports are raw structs: every rank runs the same dcr binary.
 *
 * One exception: each rank takes the commit of the attempt it sent from
 * the control plane itself (owner_orders.h says why and how). */
#define _XOPEN_SOURCE 700
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/construct.h"
#include "dcr/coord.h"
#include "dcr/group.h"
#include "dcr/log.h"
#include "dcr/parties.h"
#include "dcr/rollout_node.h"
#include "dcr/trace.h"
#include "dcr/recovery.h"
#include "deploy/owner_orders.h"
#include "deploy/role_memory.h"
#include "deploy/roles.h"
#include "deploy/world.h"

/* Rank 0 between reads of the control plane: the longest one wait for a
 * change sleeps (a lost notification, the stop flag). A commit, an attempt
 * or the coordinator's open wakes it at once: the baseline update, the end
 * of the refit's window, starts when it sees the record. */
#define IDLE_WAIT_MS 100
#define STOP_LOOK_MS 200    /* other ranks: one wait for rank 0's word (then a look at stop) */
#define OPEN_WAIT_MS 30000  /* the coordinator's open of an attempt it prepared */
#define GATHER_MS    600000 /* rank 0: every rank's outcome of one order */
/* Tags above the constructor's (construct.c uses 1 and 2); the orders'
 * tag (40) is owner_orders.h's. */
#define TAG_ORDER  DCR_OWNER_TAG_ORDER
#define TAG_DONE   41
#define TAG_READY  42 /* a rank holds the next version's candidate */
#define TAG_TRACE  43 /* rank 0 to every rank: every baseline update ended, write the trace */
#define TAG_TRACED 44 /* and back: written */

/* Rank 0's orders (owner_orders.h). */
typedef dcr_owner_order_t order_t;
enum {
    ORDER_ATTEMPT = DCR_OWNER_ATTEMPT,
    ORDER_COMMIT = DCR_OWNER_COMMIT,
    ORDER_RESTORE = DCR_OWNER_RESTORE,
    ORDER_STOP = DCR_OWNER_STOP,
};

typedef struct outcome {
    int32_t status;
    int32_t pad;
    double start, end;
    double cpu_s; /* this rank's process since it started */
    dcr_construct_stats_t stats;
    char why[256];
} outcome_t;

typedef struct owner_proc {
    const dcr_role_owner_config_t *cfg;
    dcr_group_t *g;
    int rank, size;
    dcr_role_world_t *world;
    /* Rank 0 follows the control plane; the others watch only for the
     * commit of the attempt they sent (orders). */
    dcr_control_t *control;
    dcr_owner_orders_t orders; /* ranks other than 0: rank 0's orders */
    dcr_transport_t *transport;
    dcr_constructor_t *con;
    uint8_t *xor_allowed;
    uint64_t version;   /* the committed version the baselines hold */
    uint64_t seen;      /* rank 0: the latest attempt looked at */
    uint64_t last_from; /* rank 0: from_version of the last attempt taken part in */
    uint64_t part;      /* the attempt sent last (awaiting its commit); 0: none */
    uint64_t sent;
    /* The transport's error line of the attempt's failed send: the
     * constructor returns a sender thread's status to this thread without
     * its detail (set on that thread). Written by the sender thread, read
     * after dcr_constructor_run joined it. */
    char send_why[256];
    dcr_role_relay_t relay; /* --transport relay: where the root is */
    /* With retention over the object store: the repair set of every
     * committed version (dcr/recovery.h), stored after the commit. */
    dcr_objstore_t *store;
    dcr_repair_upload_t *repair;
    dcr_repair_records_t *committed; /* taken at the commit, stored once reported */
} owner_proc_t;

/* ---- rank 0: what next --------------------------------------------------- */

/* The coordinator's clearing handle opened tau (every other handle joins). */
static bool wait_opened(owner_proc_t *p, uint64_t tau, volatile sig_atomic_t *stop)
{
    double t0 = dcr_clock_s();
    while (!*stop && (dcr_clock_s() - t0) * 1000.0 < OPEN_WAIT_MS) {
        uint64_t pos = dcr_control_position(p->control);
        uint64_t opened = 0;
        if (dcr_coord_opened(p->control, &opened) == DCR_OK && opened >= tau) return true;
        dcr_control_attempt_t a;
        if (dcr_control_attempt(p->control, 0, &a) == DCR_OK && a.tau > tau) return false;
        (void)dcr_control_wait(p->control, pos, IDLE_WAIT_MS);
    }
    DCR_LOG_WARN("owners: the coordinator did not open attempt %llu within %d ms; skipped",
                 (unsigned long long)tau, OPEN_WAIT_MS);
    return false;
}

static order_t leader_next(owner_proc_t *p, volatile sig_atomic_t *stop)
{
    while (!*stop) {
        uint64_t pos = dcr_control_position(p->control); /* before the reads */
        dcr_commit_record_t rec;
        if (dcr_control_read(p->control, &rec) == DCR_OK && rec.version > p->version) {
            /* The other ranks take a commit of ours on their own
             * (owner_orders.h): the same test. */
            bool ours = dcr_owner_commit_is_ours(&rec, p->version, p->part);
            return (order_t){ours ? ORDER_COMMIT : ORDER_RESTORE, 0, rec.attempt, 0, rec.version};
        }
        dcr_control_attempt_t a;
        if (dcr_control_attempt(p->control, 0, &a) == DCR_OK && a.tau > p->seen) {
            p->seen = a.tau;
            if (a.from_version == p->version && wait_opened(p, a.tau, stop)) {
                /* A second attempt for one version is a retry: receivers may
                 * hold any mixture of the two versions, so all overwrites. */
                bool retry = p->last_from == a.from_version;
                p->last_from = a.from_version;
                return (order_t){ORDER_ATTEMPT, retry, a.tau, a.from_version, 0};
            }
            continue;
        }
        (void)dcr_control_wait(p->control, pos, IDLE_WAIT_MS);
    }
    return (order_t){ORDER_STOP, 0, 0, 0, 0};
}

/* Rank 0 decides and tells every rank; the others wait for its word, or
 * see the commit of their attempt themselves. */
static dcr_status_t next_order(owner_proc_t *p, volatile sig_atomic_t *stop, order_t *o)
{
    if (p->rank == 0) {
        *o = leader_next(p, stop);
        for (int r = 1; r < p->size; r++)
            DCR_CHECK(dcr_group_send(p->g, r, TAG_ORDER, o, sizeof(*o)));
        return DCR_OK;
    }
    return dcr_owner_next_order(&p->orders, p->version, p->part, stop, o);
}

/* ---- every rank ---------------------------------------------------------- */

static dcr_status_t sink_submit(void *ctx, int owner, uint64_t payload_id, const uint8_t *buf,
                                size_t len)
{
    owner_proc_t *p = ctx;
    /* The transport bound: submission until the queueing acknowledgment. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, owner);
    dcr_status_t st = dcr_transport_send(p->transport, owner, payload_id, buf, len);
    dcr_trace_end(&span);
    if (st != DCR_OK && !p->send_why[0])
        snprintf(p->send_why, sizeof(p->send_why), "%s", dcr_error_line(st));
    DCR_CHECK(st);
    p->sent++; /* one sender thread: this rank's owner */
    return DCR_OK;
}

static dcr_status_t make_constructor(owner_proc_t *p)
{
    dcr_constructor_destroy(p->con);
    p->con = NULL;
    dcr_construct_config_t cc = dcr_run_construct_config(&p->world->cfg, p->world->sc);
    DCR_CHECK(dcr_constructor_create(p->world->sc->layout, &cc, p->world->shards, &p->con));
    dcr_constructor_keep_records(p->con, p->repair != NULL);
    return dcr_constructor_set_group(p->con, p->g);
}

/* Retention over the object store: this owner stores a repair set for
 * every committed version. Without it (relay, no --retain) none. */
static dcr_status_t open_repair(owner_proc_t *p)
{
    const dcr_run_config_t *run = p->cfg->run;
    if (strcmp(run->transport, "objstore") || run->retain < 1) return DCR_OK;
    char dir[4200];
    dcr_rundir_objstore_dir(p->cfg->workdir, dir, sizeof dir);
    dcr_objstore_config_t oc = {.url = run->store ? run->store : dir,
                                .s3_endpoint = run->store ? run->s3_endpoint : NULL};
    DCR_CHECK(dcr_objstore_create(&oc, &p->store));
    dcr_construct_config_t cc = dcr_run_construct_config(&p->world->cfg, p->world->sc);
    return dcr_repair_upload_create(p->store, &cc, p->rank, p->size, &p->repair);
}

/* After the commit is reported (t1 is behind us): the committed run's
 * records go to the store in the background. */
static void store_repair(owner_proc_t *p, uint64_t version)
{
    dcr_repair_records_t *r = p->committed;
    p->committed = NULL;
    if (r && dcr_repair_upload_start(p->repair, r, version) != DCR_OK)
        DCR_LOG_WARN("owner %d: no repair set for version %llu: %s", p->rank,
                     (unsigned long long)version, dcr_error_detail());
}

static dcr_status_t take_part(owner_proc_t *p, const order_t *o, outcome_t *out)
{
    p->part = 0;
    /* The last repair set's upload ends before this attempt's window. */
    dcr_repair_upload_join(p->repair, NULL);
    /* The candidate: version from+1 (a retry finds the world there already). */
    DCR_CHECK(dcr_role_world_advance(p->world, o->from_version + 1));
    DCR_CHECK(dcr_transport_open_attempt(p->transport, o->tau));
    /* This attempt's intervals only, tagged with the version it builds. */
    dcr_trace_reset();
    dcr_trace_set_refit((uint32_t)(o->from_version + 1));
    p->sent = 0;
    p->send_why[0] = '\0';
    out->start = dcr_clock_s();
    dcr_payload_sink_t sink = {sink_submit, p};
    DCR_CHECK(dcr_constructor_run(p->con, p->world->shards, o->tau, p->xor_allowed, o->overwrite,
                                  &sink, &out->stats));
    out->end = dcr_clock_s();
    DCR_CHECK(dcr_transport_finish(p->transport, p->rank, p->sent));
    p->part = o->tau;
    /* No trace file yet: the launcher imports an attempt's traces once it
     * committed, and traces_after_commit writes this rank's then, this
     * attempt's intervals included, off the window (before, a write here
     * delayed the owners' report that the coordinator waits on). */
    return DCR_OK;
}

/* This rank's peak memory beside what it must hold (role_memory.h): the
 * shards it holds, its tasks' trackers and one payload bucket. The rest of
 * its constructor (other ranks' trackers, residual baselines) and the
 * seeded world are the harness's. A failure costs a warning. */
static void write_memory(owner_proc_t *p)
{
    const dcr_source_layout_t *L = p->world->sc->layout;
    dcr_role_memory_t m = {.role = "owner", .id = p->rank};
    int64_t shards = 0, trackers = 0;
    for (int i = 0; i < L->nshards; i++)
        for (int h = 0; h < L->shards[i].nholders; h++)
            if (L->shards[i].holders[h] == p->rank) shards += (int64_t)p->world->shards[i]->bytes;
    dcr_construct_config_t cc = dcr_run_construct_config(&p->world->cfg, p->world->sc);
    for (int i = 0; cc.mode != DCR_MODE_F && i < L->ntasks; i++)
        if (L->tasks[i].owner == p->rank)
            trackers += dcr_task_numel(&L->tasks[i]) *
                        (int64_t)dcr_dtype_size(L->shards[L->tasks[i].shard].desc.dtype);
    int64_t rest = (int64_t)dcr_constructor_baseline_bytes(p->con) - trackers;
    dcr_role_memory_part(&m, "shards", shards);
    dcr_role_memory_part(&m, "trackers", trackers);
    dcr_role_memory_part(&m, "bucket", (int64_t)cc.bucket_bytes);
    m.required_bytes = shards + trackers + (int64_t)cc.bucket_bytes;
    dcr_role_memory_part(&m, "constructor_rest", rest > 0 ? rest : 0);
    int64_t world = dcr_role_world_bytes(p->world) - shards;
    dcr_role_memory_part(&m, "seeded_world_rest", world);
    m.harness_bytes = (rest > 0 ? rest : 0) + world;
    if (dcr_role_memory_write(p->cfg->workdir, &m) != DCR_OK)
        DCR_LOG_WARN("owner %d: %s", p->rank, dcr_error_detail());
}

static dcr_status_t commit(owner_proc_t *p, const order_t *o, outcome_t *out)
{
    out->start = dcr_clock_s();
    DCR_CHECK(dcr_constructor_commit(p->con));
    out->end = dcr_clock_s();
    dcr_repair_records_destroy(p->committed);
    dcr_constructor_take_repair(p->con, &p->committed);
    p->version = o->version;
    p->part = 0;
    return DCR_OK;
}

/* This rank's intervals of attempt tau (its construction and its baseline
 * update) to the work folder, where the launcher imports them once the
 * owners reported the commit. A measurement, not the refit: a failure costs
 * a warning. */
static void write_trace(owner_proc_t *p, uint64_t tau)
{
    if (dcr_role_trace_write(p->cfg->workdir, -1 - p->rank, tau) != DCR_OK)
        DCR_LOG_WARN("owner %d: the intervals of attempt %llu are not written: %s", p->rank,
                     (unsigned long long)tau, dcr_error_detail());
}

/* After a commit order, on every rank whatever its outcome: the traces are
 * written once every rank's baseline update ended (t1, rank 0 knows it from
 * the outcomes), not each right after its own: a write (a sort of a few
 * thousand intervals and a file) beside another rank's update sat inside
 * the window on a shared host. Rank 0 reports the commit only once every
 * rank wrote, so the launcher finds every file. */
static dcr_status_t traces_after_commit(owner_proc_t *p, uint64_t tau, volatile sig_atomic_t *stop)
{
    int32_t mine = p->rank;
    dcr_group_msg_t m;
    if (p->rank != 0) {
        /* A rank that took the commit early waits here for rank 0 to take
         * it too; rank 0 may stop first instead (owner_orders.h). */
        dcr_status_t st = DCR_ETIMEOUT;
        for (int waited = 0; st == DCR_ETIMEOUT && waited < GATHER_MS; waited += STOP_LOOK_MS) {
            if (stop && *stop) return DCR_OK;
            st = dcr_group_recv(p->g, TAG_TRACE, STOP_LOOK_MS, &m);
        }
        DCR_CHECK(st);
        dcr_group_release(p->g, &m);
        write_trace(p, tau);
        return dcr_group_send(p->g, 0, TAG_TRACED, &mine, sizeof(mine));
    }
    for (int r = 1; r < p->size; r++)
        DCR_CHECK(dcr_group_send(p->g, r, TAG_TRACE, &mine, sizeof(mine)));
    write_trace(p, tau);
    for (int k = 1; k < p->size; k++) {
        DCR_CHECK(dcr_group_recv(p->g, TAG_TRACED, GATHER_MS, &m));
        dcr_group_release(p->g, &m);
    }
    return DCR_OK;
}

/* A version committed without these owners (a coordinator that moved on):
 * trackers and baselines are rebuilt from it, as at start. */
static dcr_status_t restore(owner_proc_t *p, const order_t *o)
{
    dcr_repair_upload_join(p->repair, NULL);
    DCR_CHECK(dcr_role_world_advance(p->world, o->version));
    DCR_CHECK(make_constructor(p));
    p->version = o->version;
    p->part = 0;
    return DCR_OK;
}

/* Rank 0: every rank's outcome, then the job's report. */
static dcr_status_t gather(owner_proc_t *p, const order_t *o, const outcome_t *mine)
{
    dcr_owners_report_t r;
    memset(&r, 0, sizeof(r));
    r.tau = o->tau;
    r.t0 = mine->start;
    r.construction_end = r.t1 = mine->end;
    r.construct = mine->stats;
    r.cpu_s = mine->cpu_s;
    int failed = mine->status != DCR_OK ? 0 : -1;
    snprintf(r.why, sizeof(r.why), "owner 0: %s", mine->why);
    for (int k = 1; k < p->size; k++) {
        dcr_group_msg_t m;
        DCR_CHECK(dcr_group_recv(p->g, TAG_DONE, GATHER_MS, &m));
        outcome_t u;
        bool ok = m.len == sizeof(u);
        if (ok) memcpy(&u, m.data, sizeof(u));
        int src = m.src;
        dcr_group_release(p->g, &m);
        if (!ok) return dcr_error_set(DCR_EIO, "owners: an outcome of %zu bytes", m.len);
        if (u.status != DCR_OK && failed < 0) {
            failed = src;
            snprintf(r.why, sizeof(r.why), "owner %d: %s", src, u.why);
        }
        r.cpu_s += u.cpu_s;
        if (u.start < r.t0) r.t0 = u.start;
        if (u.end > r.construction_end) r.construction_end = r.t1 = u.end;
        dcr_construct_stats_t *s = &r.construct;
        const dcr_construct_stats_t *x = &u.stats;
        /* Counts summed over owners (as in one process); time: the slowest. */
        if (x->construction_s > s->construction_s) s->construction_s = x->construction_s;
        dcr_construct_stats_add(s, x);
    }
    static const dcr_owners_phase_t done[] = {[ORDER_ATTEMPT] = DCR_OWNERS_SENT,
                                              [ORDER_COMMIT] = DCR_OWNERS_COMMITTED,
                                              [ORDER_RESTORE] = DCR_OWNERS_READY};
    r.phase = failed >= 0 ? DCR_OWNERS_FAILED : done[o->kind];
    if (failed < 0) r.why[0] = '\0';
    if (failed >= 0)
        DCR_LOG_WARN("owners: attempt %llu failed: %s", (unsigned long long)o->tau, r.why);
    if (o->kind == ORDER_COMMIT) DCR_CHECK(traces_after_commit(p, o->tau, NULL));
    return dcr_owners_report_put(p->control, &r);
}

/* After the candidate of the next version is built on every rank: rank 0
 * takes no attempt before then. Each rank replays the seeded training step
 * on its own, and on a loaded host they finish far apart; an attempt rank 0
 * took at once would open the window (t0, its start) while other ranks
 * still compute the step, and every exchange of the construction would wait
 * for them inside the window. In one process, and in training, the step has
 * ended on every rank before a refit starts. */
static dcr_status_t candidates_ready(owner_proc_t *p)
{
    int32_t mine = p->rank;
    if (p->rank != 0) return dcr_group_send(p->g, 0, TAG_READY, &mine, sizeof(mine));
    for (int k = 1; k < p->size; k++) {
        dcr_group_msg_t m;
        DCR_CHECK(dcr_group_recv(p->g, TAG_READY, GATHER_MS, &m));
        dcr_group_release(p->g, &m);
    }
    return DCR_OK;
}

static dcr_status_t owner_loop(owner_proc_t *p, volatile sig_atomic_t *stop)
{
    for (;;) {
        order_t o;
        DCR_CHECK(next_order(p, stop, &o));
        if (o.kind == ORDER_STOP) return DCR_OK;
        if (o.kind == ORDER_RESTORE) {
            DCR_LOG_WARN("owner %d: version %llu committed without the owners; rebuilding", p->rank,
                         (unsigned long long)o.version);
            DCR_CHECK(restore(p, &o));
            continue;
        }
        outcome_t u;
        memset(&u, 0, sizeof(u));
        dcr_status_t st = o.kind == ORDER_ATTEMPT ? take_part(p, &o, &u) : commit(p, &o, &u);
        u.status = (int32_t)st;
        u.cpu_s = dcr_clock_process_cpu_s();
        if (st != DCR_OK) {
            snprintf(u.why, sizeof(u.why), "%s",
                     o.kind == ORDER_ATTEMPT && p->send_why[0] ? p->send_why : dcr_error_line(st));
            /* A stopped attempt's sends must end here too. */
            dcr_transport_stop_and_wait(p->transport);
        }
        if (p->rank == 0) {
            DCR_CHECK(gather(p, &o, &u));
        } else {
            DCR_CHECK(dcr_group_send(p->g, 0, TAG_DONE, &u, sizeof(u)));
            if (o.kind == ORDER_COMMIT) DCR_CHECK(traces_after_commit(p, o.tau, stop));
        }
        /* A failed baseline update leaves this rank unusable. */
        if (st != DCR_OK && o.kind == ORDER_COMMIT) return st;
        if (o.kind == ORDER_COMMIT) store_repair(p, o.version);
        if (o.kind == ORDER_COMMIT) write_memory(p); /* after the report: off the path */
        /* The next version's candidate now, between attempts, as the
         * training step has it ready before an in-process refit starts:
         * replaying the seeded step at the next attempt's start would put
         * every rank's step (the harness's work, not refit work) inside
         * that attempt's window, skewed across ranks. */
        if (o.kind == ORDER_COMMIT) {
            DCR_CHECK(dcr_role_world_advance(p->world, o.version + 1));
            DCR_CHECK(candidates_ready(p));
        }
    }
}

static dcr_status_t open_control(owner_proc_t *p, dcr_commit_record_t *rec)
{
    dcr_status_t st = dcr_role_control_open_patiently(p->cfg->run, p->cfg->workdir,
                                                      p->cfg->ready_timeout_ms, &p->control, rec);
    if (st != DCR_OK)
        dcr_error_prefix("owners: the control plane of %s stayed unreachable for %d ms: ",
                         p->cfg->workdir, p->cfg->ready_timeout_ms);
    return st;
}

/* Every rank starts from the committed version rank 0 read. */
static dcr_status_t owner_setup(owner_proc_t *p)
{
    dcr_trace_enable(true);
    p->rank = dcr_group_rank(p->g);
    p->size = dcr_group_size(p->g);
    p->last_from = UINT64_MAX;
    DCR_CHECK(dcr_role_world_create(p->cfg->run, &p->world));
    const dcr_scenario_t *sc = p->world->sc;
    if (p->size != sc->layout->world)
        return dcr_error_set(DCR_EINVAL,
                             "owners: the job has %d ranks, the run's training layout %d owners; "
                             "start it with mpirun -np %d",
                             p->size, sc->layout->world, sc->layout->world);
    order_t o = {ORDER_RESTORE, 0, 0, 0, 0};
    dcr_commit_record_t rec;
    if (p->rank == 0) {
        DCR_CHECK(open_control(p, &rec));
        dcr_control_attempt_t a;
        /* Attempts prepared before this job started are not ours to join. */
        if (dcr_control_attempt(p->control, 0, &a) == DCR_OK) p->seen = a.tau;
        o.version = rec.version;
        for (int r = 1; r < p->size; r++)
            DCR_CHECK(dcr_group_send(p->g, r, TAG_ORDER, &o, sizeof(o)));
    } else {
        dcr_group_msg_t m;
        DCR_CHECK(dcr_group_recv(p->g, TAG_ORDER, p->cfg->ready_timeout_ms + 10000, &m));
        bool ok = m.len == sizeof(o);
        if (ok) memcpy(&o, m.data, sizeof(o));
        dcr_group_release(p->g, &m);
        if (!ok)
            return dcr_error_set(DCR_EIO, "owner %d: a start order of %zu bytes", p->rank, m.len);
        /* Reachable: rank 0 read it before its start order. Only a control
         * plane whose reads are local (a file) is watched by every rank: on
         * a networked one each rank's waits and reads are requests to the
         * server, which every change in the window multiplied (etcd on
         * loopback: finalization 29.6 ms against 23.7 with rank 0's order
         * alone); there the ranks wait for rank 0's order. */
        DCR_CHECK(open_control(p, &rec));
        if (p->control->ops->props.networked) {
            dcr_control_destroy(p->control);
            p->control = NULL;
        }
        p->orders = (dcr_owner_orders_t){.g = p->g, .control = p->control};
    }
    DCR_CHECK(dcr_role_world_advance(p->world, o.version));
    p->version = o.version;
    DCR_CHECK(open_repair(p));
    DCR_CHECK(make_constructor(p));
    DCR_CHECK(dcr_run_xor_policy(sc, &p->world->serve, p->world->cfg.mode, &p->xor_allowed));
    dcr_role_handle_t as = {.join = true,
                            .owner_first = p->rank,
                            .owner_count = 1,
                            .send_only = true,
                            .relay = &p->relay};
    DCR_CHECK(dcr_role_transport_open_as(p->cfg->run, p->cfg->workdir, sc->train.nodes,
                                         sc->layout->world, p->world->serve.nodes, &as,
                                         &p->transport));
    /* The first attempt's candidate now, as owner_loop builds every later
     * one after the commit before it: not inside that attempt's window,
     * where ranks that finish the step at different times would keep the
     * others waiting in the construction's exchanges (candidates_ready). */
    DCR_CHECK(dcr_role_world_advance(p->world, p->version + 1));
    /* Ready once every rank is: rank 0 says so for the job. */
    outcome_t u;
    memset(&u, 0, sizeof(u));
    if (p->rank != 0) return dcr_group_send(p->g, 0, TAG_DONE, &u, sizeof(u));
    order_t ready = {ORDER_RESTORE, 0, 0, 0, p->version};
    return gather(p, &ready, &u);
}

dcr_status_t dcr_role_owner_run(const dcr_role_owner_config_t *cfg, volatile sig_atomic_t *stop)
{
    owner_proc_t p;
    memset(&p, 0, sizeof(p));
    p.cfg = cfg;
    p.g = cfg->group;
    dcr_role_memory_mark_base(); /* before the world: what any process holds */
    dcr_status_t st = owner_setup(&p);
    if (st == DCR_OK) {
        DCR_LOG_INFO("owner %d of %d: holds version %llu", p.rank, p.size,
                     (unsigned long long)p.version);
        st = owner_loop(&p, stop);
    }
    dcr_role_log_requests("owner", p.rank, p.version);
    dcr_repair_upload_destroy(p.repair);
    dcr_repair_records_destroy(p.committed);
    dcr_objstore_destroy(p.store);
    dcr_transport_destroy(p.transport);
    dcr_role_relay_close(&p.relay);
    dcr_constructor_destroy(p.con);
    free(p.xor_allowed);
    dcr_control_destroy(p.control);
    dcr_role_world_destroy(p.world);
    return st;
}
