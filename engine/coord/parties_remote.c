/* The coordinator's parties as processes of their own (coord-parties.h,
 * "remote"): the rollout-node processes and the owner job (deploy/roles.h)
 * reach the coordinator through the control plane only. The coordinator
 * publishes the attempt it opened on its transport handle (its own record)
 * and waits on the nodes' and the owners' status records (dcr/parties.h):
 * it reads a record again when the control plane tells of a change
 * (dcr_control_wait), not at a fixed rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord-parties.h"
#include "dcr/clock.h"
#include "dcr/log.h"

/* A node's report read to decide its membership: tries, and try t waits
 * t times the retry step first (60 ms in all, past a brief control-plane
 * outage; the transition's own retries, with their backoff, come after). */
#define REPORT_TRIES    4
#define REPORT_RETRY_NS 10000000L

typedef struct remote_nodes {
    dcr__nodes_env_t env;
    dcr_node_totals_t *totals; /* each node process's counters over the run */
    /* The last wait for DONE (attempt done_tau): its required entries from
     * done_fresh on were read DONE after its last wait for a change, with
     * nothing in between (nodes_still_done). */
    uint64_t done_tau;
    size_t done_fresh;
} remote_nodes_t;

/* The longest one wait for a change sleeps before the waiter reads again:
 * what a lost notification costs at most, and how often a waiter looks at
 * its own deadline when nothing changes. */
#define WAIT_SLICE_MS 100
/* While the owners send, the nodes' reports are read on a change, but not
 * more often than this (a dead relay node would stall the owners). */
#define NODE_CHECK_NS 10000000ull

/* Sleeps until the control plane changed after pos (taken before the read
 * that did not satisfy the caller) or WAIT_SLICE_MS passed. */
static void await_change(dcr_control_t *control, uint64_t pos)
{
    (void)dcr_control_wait(control, pos, WAIT_SLICE_MS);
}

static const char *phase_name(dcr_node_phase_t p)
{
    static const char *const names[] = {"ready", "joined", "done", "failed", "gone", "restarting"};
    return (unsigned)p <= DCR_NODE_RESTARTING ? names[p] : "?";
}

/* A node whose report (read with status st) says its process died or is
 * being replaced fails the attempt at once, naming it: nothing it held for
 * this attempt survives the process. */
static dcr_status_t node_present(int node, dcr_status_t st, const dcr_node_report_t *r)
{
    if (st == DCR_OK && (r->phase == DCR_NODE_GONE || r->phase == DCR_NODE_RESTARTING))
        return dcr_error_set(DCR_EATTEMPT, "rollout node %d is gone: %s", node, r->why);
    return DCR_OK;
}

/* Whether a node process was never started (its report: GONE with pid 0,
 * as a launcher writes for a node added later): not a member of attempts
 * prepared before it reports for itself. A node with no report at all is a
 * member (its process is expected; the attempt waits for it to join). A
 * read that fails (a busy or briefly unreachable control plane) is tried
 * again; when every try fails, no attempt is prepared: a node whose state
 * is unknown must neither become a member (a joiner not started would fail
 * the attempt) nor be left out (a started node would miss it). */
static dcr_status_t node_not_started(remote_nodes_t *c, int node, bool *not_started_p)
{
    dcr_status_t st = DCR_OK;
    for (int t = 0; t < REPORT_TRIES; t++) {
        if (t > 0) dcr_clock_nap_ns((long)t * REPORT_RETRY_NS);
        dcr_node_report_t r;
        st = dcr_node_report_get(c->env.control, node, &r);
        if (st == DCR_OK || st == DCR_ENOTFOUND) {
            *not_started_p = st == DCR_OK && r.phase == DCR_NODE_GONE && r.pid == 0;
            return DCR_OK;
        }
    }
    dcr_error_prefix("cannot read rollout node %d's report to decide whether the next attempt "
                     "includes it (%d tries): ",
                     node, REPORT_TRIES);
    return st;
}

/* node_present for every node of a required receiver (read errors are left
 * to the caller's own wait: a busy control plane is not a death). */
static dcr_status_t required_nodes_present(remote_nodes_t *c, const dcr__attempt_t *a)
{
    int per = c->env.cfg->receivers_per_node;
    for (size_t i = 0; i < a->nrequired; i++) {
        int node = (int)a->required[i] / per;
        if (i > 0 && (int)a->required[i - 1] / per == node) continue; /* required ascends */
        dcr_node_report_t r;
        DCR_CHECK(node_present(node, dcr_node_report_get(c->env.control, node, &r), &r));
    }
    return DCR_OK;
}

/* Waits until every node of a required receiver reports `phase` (or, for
 * JOINED, a later one) for tau (DONE: *apply_end_p gets the last apply's end across them). A node
 * that reports FAILED fails the attempt with its line; one that stays behind longer than the join
 * (or stall) timeout fails it naming the node. */
static dcr_status_t wait_nodes(remote_nodes_t *c, const dcr__attempt_t *a, dcr_node_phase_t phase,
                               double *apply_end_p)
{
    uint64_t tau = a->tau;
    int per = c->env.cfg->receivers_per_node;
    int limit_ms =
        phase == DCR_NODE_JOINED ? c->env.cfg->join_timeout_ms : c->env.cfg->stall_timeout_ms;
    double t0 = dcr_clock_s();
    size_t waited = 0; /* the last entry that waited for a change */
    c->done_tau = 0;
    for (size_t i = 0; i < a->nrequired; i++) {
        int node = (int)a->required[i] / per;
        if (i > 0 && (int)a->required[i - 1] / per == node) continue; /* one report per node */
        for (;;) {
            uint64_t pos = dcr_control_position(c->env.control);
            dcr_node_report_t r;
            dcr_status_t st = dcr_node_report_get(c->env.control, node, &r);
            DCR_CHECK(node_present(node, st, &r));
            /* READY for tau or later after it joined: a new process (a
             * restart) that holds the committed version, not tau's writes. */
            if (st == DCR_OK && phase == DCR_NODE_DONE && r.phase == DCR_NODE_READY && r.tau >= tau)
                return dcr_error_set(DCR_EATTEMPT, "rollout node %d restarted during attempt %llu",
                                     node, (unsigned long long)tau);
            if (st == DCR_OK && r.tau == tau && r.phase == DCR_NODE_FAILED)
                return dcr_error_set(DCR_EATTEMPT, "rollout node %d failed attempt %llu: %s", node,
                                     (unsigned long long)tau, r.why);
            /* DONE for tau answers a wait for JOINED too: a node that joined
             * and finished while an earlier node was read has moved on. */
            if (st == DCR_OK && r.tau == tau &&
                (r.phase == phase || (phase == DCR_NODE_JOINED && r.phase == DCR_NODE_DONE))) {
                if (apply_end_p && r.apply_end > *apply_end_p) *apply_end_p = r.apply_end;
                break;
            }
            if (st != DCR_OK && st != DCR_ENOTFOUND && st != DCR_ECONTROL) return st;
            if ((dcr_clock_s() - t0) * 1000.0 > limit_ms)
                return dcr_error_set(
                    DCR_ETIMEOUT,
                    "rollout node %d did not report %s for attempt %llu within %d ms (last "
                    "report: %s)",
                    node, phase_name(phase), (unsigned long long)tau, limit_ms,
                    st == DCR_OK ? phase_name(r.phase) : "none");
            await_change(c->env.control, pos);
            waited = i;
        }
    }
    if (phase == DCR_NODE_DONE) {
        c->done_tau = tau;
        c->done_fresh = waited;
    }
    return DCR_OK;
}

/* The node processes' downloads over the run, as their reports count them. */
static int64_t remote_cross_bytes(remote_nodes_t *c)
{
    int64_t sum = 0;
    for (int n = 0; c->totals && n < c->env.nodes; n++) {
        dcr_node_report_t r;
        if (dcr_node_report_get(c->env.control, n, &r) == DCR_OK)
            dcr_node_totals_update(&c->totals[n], &r);
        sum += c->totals[n].cross_base + c->totals[n].cross_last;
    }
    return sum;
}

/* Before an attempt: a node of a live receiver that is restarting is back
 * (its new process restored the committed version), so that membership
 * stays fixed during the attempt. A node gone for good fails the attempt
 * in wait_nodes at once. */
static dcr_status_t wait_present(remote_nodes_t *c)
{
    int per = c->env.cfg->receivers_per_node;
    double t0 = dcr_clock_s();
    for (int node = 0; node < c->env.nodes; node++) {
        bool needed = false;
        for (int k = 0; k < per; k++)
            needed |= c->env.receivers.member(c->env.receivers.ctx, node * per + k);
        for (;;) {
            uint64_t pos = dcr_control_position(c->env.control);
            dcr_node_report_t r;
            dcr_status_t st = dcr_node_report_get(c->env.control, node, &r);
            if (!needed || (st == DCR_OK && r.phase != DCR_NODE_RESTARTING)) break;
            if ((dcr_clock_s() - t0) * 1000.0 > c->env.cfg->join_timeout_ms)
                return dcr_error_set(
                    DCR_EATTEMPT, "rollout node %d has no process (%s) after %d ms", node,
                    st == DCR_OK ? r.why : "it never reported", c->env.cfg->join_timeout_ms);
            await_change(c->env.control, pos);
        }
    }
    return DCR_OK;
}

/* After the nodes' acknowledgments: each of them must still hold P^{v+1}
 * when v+1 is published; a node that died or restarted since fails the
 * attempt, as a receiver death after its acknowledgment does in one process.
 * Only the nodes wait_nodes read DONE before its last wait are read again:
 * the others were read after it, just now (the coordinator does nothing
 * between the two), and a read of each again put one more control-plane
 * round trip per node between the last DONE and the commit. */
static dcr_status_t nodes_still_done(remote_nodes_t *c, const dcr__attempt_t *a)
{
    uint64_t tau = a->tau;
    int per = c->env.cfg->receivers_per_node;
    size_t stale = c->done_tau == tau ? c->done_fresh : a->nrequired;
    for (size_t i = 0; i < stale; i++) {
        int node = (int)a->required[i] / per;
        /* required is ascending: each node's report is read once. */
        if (i > 0 && (int)a->required[i - 1] / per == node) continue;
        dcr_node_report_t r;
        if (dcr_node_report_get(c->env.control, node, &r) != DCR_OK || r.tau != tau ||
            r.phase != DCR_NODE_DONE)
            return dcr_error_set(DCR_EATTEMPT,
                                 "rollout node %d is no longer done with attempt "
                                 "%llu before the commit",
                                 node, (unsigned long long)tau);
    }
    return DCR_OK;
}

static void nodes_destroy(void *impl)
{
    remote_nodes_t *c = impl;
    if (!c) return;
    free(c->totals);
    free(c);
}

static dcr_status_t nodes_create(const dcr__nodes_env_t *env, void **impl_p)
{
    if (env->cfg->rl != DCR_RL_SYNC)
        return dcr_error_set(DCR_EINVAL,
                             "coordinator: rollout nodes as processes run sync RL only");
    remote_nodes_t *c = calloc(1, sizeof(*c));
    if (c) c->totals = calloc((size_t)env->nodes, sizeof(*c->totals));
    if (!c || !c->totals) {
        free(c);
        return dcr_error_set(DCR_ENOMEM, "node totals");
    }
    c->env = *env;
    *impl_p = c;
    return DCR_OK;
}

static dcr_status_t nodes_absent(void *impl, int node, bool *absent_p)
{
    return node_not_started(impl, node, absent_p);
}

static dcr_status_t nodes_present(void *impl)
{
    return wait_present(impl);
}

/* Node processes begin the attempt themselves; nothing may be sent before
 * each has opened it on its transport handle, and none may open it before
 * the coordinator's handle did (its record says so). */
static dcr_status_t nodes_begin(void *impl, const dcr__attempt_t *a)
{
    remote_nodes_t *c = impl;
    DCR_CHECK(dcr_coord_report_opened(c->env.control, a->tau));
    return wait_nodes(c, a, DCR_NODE_JOINED, NULL);
}

/* The node processes receive on their own. */
static dcr_status_t nodes_deliver(void *impl, const dcr__attempt_t *a)
{
    (void)impl;
    (void)a;
    return DCR_OK;
}

static dcr_status_t nodes_check(void *impl, const dcr__attempt_t *a)
{
    return required_nodes_present(impl, a);
}

/* After a failed send there is nothing to wait for: the nodes fail or time
 * out on their own, and the next attempt starts from the control plane. */
static dcr_status_t nodes_delivered(void *impl, const dcr__attempt_t *a, bool sent,
                                    double *apply_end_p)
{
    return sent ? wait_nodes(impl, a, DCR_NODE_DONE, apply_end_p) : DCR_OK;
}

static void nodes_discard(void *impl)
{
    (void)impl;
}

/* Each node process acknowledged its receivers before it reported DONE,
 * and the joint commit itself refuses an attempt that lacks a required
 * acknowledgment (DCR_EATTEMPT, atomically with the compare-and-set): no
 * read of the acknowledgments here, which would put one more control-plane
 * round trip between the last DONE and the commit. What only this side can
 * know is whether each node still holds P^{v+1}. */
static dcr_status_t nodes_acknowledge(void *impl, const dcr__attempt_t *a)
{
    return nodes_still_done(impl, a);
}

/* The owners' uploads plus the nodes' downloads as their reports count
 * them; the coordinator's own handle carries nothing that crosses. */
static int64_t nodes_cross_bytes(void *impl, int64_t owner_uploads)
{
    return owner_uploads + remote_cross_bytes(impl);
}

/* Counted in the node processes. */
static void nodes_drops(void *impl, uint64_t *duplicates_p, uint64_t *stale_p)
{
    (void)impl;
    (void)duplicates_p;
    (void)stale_p;
}

const dcr__nodes_ops_t dcr__nodes_remote = {
    .hdr = {.version = DCR__NODES_OPS_VERSION, .name = "remote"},
    .create = nodes_create,
    .destroy = nodes_destroy,
    .absent = nodes_absent,
    .present = nodes_present,
    .begin = nodes_begin,
    .deliver = nodes_deliver,
    .check = nodes_check,
    .delivered = nodes_delivered,
    .apply_staged = NULL,
    .discard = nodes_discard,
    .acknowledge = nodes_acknowledge,
    .cross_bytes = nodes_cross_bytes,
    .drops = nodes_drops,
};

/* ---- owners as processes ---------------------------------------------------------- */

typedef struct remote_owners {
    dcr__owners_env_t env;
    int64_t uploads; /* payload bytes their reports counted (V_payload sent) */
} remote_owners_t;

/* Waits for the owners' report of `phase` for tau; FAILED for tau fails the
 * attempt with their line, silence beyond the stall timeout names what was
 * awaited. While they send (a given), the rollout side's check runs after
 * a change, at most every NODE_CHECK_NS: a required node that is gone or restarting fails
 * the attempt at once (a dead relay node would stall the owners until the
 * stall timeout); after the commit (COMMITTED) the nodes no longer matter. */
static dcr_status_t wait_owners(remote_owners_t *c, uint64_t tau, dcr_owners_phase_t phase,
                                const dcr__attempt_t *a, dcr_owners_report_t *out_p)
{
    double t0 = dcr_clock_s();
    uint64_t next_check = 0;
    for (;;) {
        uint64_t pos = dcr_control_position(c->env.control);
        dcr_owners_report_t r;
        dcr_status_t st = dcr_owners_report_get(c->env.control, &r);
        /* A tau above this one: the owner job is gone (its launcher said so). */
        if (st == DCR_OK && r.tau >= tau && r.phase == DCR_OWNERS_FAILED)
            return dcr_error_set(DCR_EATTEMPT, "the owners failed attempt %llu: %s",
                                 (unsigned long long)tau, r.why);
        if (st == DCR_OK && r.tau == tau && r.phase == phase) {
            *out_p = r;
            return DCR_OK;
        }
        if (st != DCR_OK && st != DCR_ENOTFOUND && st != DCR_ECONTROL) return st;
        /* One read per node, not a flood: at most every NODE_CHECK_NS. */
        if (a && dcr_clock_ns() >= next_check) {
            DCR_CHECK(c->env.watch(c->env.ctx, a));
            next_check = dcr_clock_ns() + NODE_CHECK_NS;
        }
        if ((dcr_clock_s() - t0) * 1000.0 > c->env.cfg->stall_timeout_ms)
            return dcr_error_set(DCR_ETIMEOUT,
                                 "the owners did not report %s for attempt %llu within %d ms",
                                 phase == DCR_OWNERS_SENT ? "sent" : "committed",
                                 (unsigned long long)tau, c->env.cfg->stall_timeout_ms);
        await_change(c->env.control, pos);
    }
}

static void owners_destroy(void *impl)
{
    free(impl);
}

static dcr_status_t owners_create(const dcr__owners_env_t *env, void **impl_p)
{
    remote_owners_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "owners");
    c->env = *env;
    *impl_p = c;
    return DCR_OK;
}

/* t0 is the owners' own, from their report. */
static void owners_begin(void *impl, dcr_refit_result_t *res)
{
    (void)impl;
    (void)res;
}

/* The owner processes construct and send on their own: their report
 * replaces the construction run. */
static dcr_status_t owners_construct(void *impl, const dcr__attempt_t *a,
                                     dcr_storage_t *const *candidate, bool overwrite,
                                     dcr_refit_result_t *res)
{
    remote_owners_t *c = impl;
    (void)candidate;
    (void)overwrite; /* the owners tell a retry by its from_version */
    /* Zeroed: set only when wait_owners succeeds, which -O3 cannot see. */
    dcr_owners_report_t r = {0};
    DCR_CHECK(wait_owners(c, a->tau, DCR_OWNERS_SENT, a, &r));
    c->uploads += r.construct.payload_bytes; /* each payload is uploaded once */
    res->construct = r.construct;
    if (res->t0 == 0.0) res->t0 = r.t0;
    res->construction_end = r.construction_end;
    return DCR_OK;
}

/* Owner processes update their baselines when they see the commit record;
 * t1 is theirs. The commit stands whatever happens here: owners that never
 * report leave t1 at the coordinator's time, with a warning. */
static dcr_status_t owners_commit(void *impl, const dcr_commit_record_t *committed,
                                  dcr_refit_result_t *res)
{
    dcr_owners_report_t r = {0}; /* set only on success (see owners_construct) */
    if (wait_owners(impl, committed->attempt, DCR_OWNERS_COMMITTED, NULL, &r) == DCR_OK) {
        res->t1 = r.t1;
        return DCR_OK;
    }
    DCR_LOG_WARN("version %llu committed, but %s", (unsigned long long)committed->version,
                 dcr_error_detail());
    res->t1 = dcr_clock_s();
    return DCR_OK;
}

static int64_t owners_uploads(void *impl)
{
    return ((remote_owners_t *)impl)->uploads;
}

const dcr__owners_ops_t dcr__owners_remote = {
    .hdr = {.version = DCR__OWNERS_OPS_VERSION, .name = "remote"},
    .create = owners_create,
    .destroy = owners_destroy,
    .begin = owners_begin,
    .construct = owners_construct,
    .commit = owners_commit,
    .uploads = owners_uploads,
};
