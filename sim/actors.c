/* The SimGrid side of the simulator: one actor per engine thread that does
 * work or waits in a refit, over the platform of sim/platform.h.
 *
 *  owner o        runs its workload steps: compute on its core, the flag
 *                 barrier, residual parts through a mailbox to their
 *                 assembler, finished payloads into a bounded queue
 *                 (owner_queue deep) for its sender;
 *  sender o       moves each payload: object store (upload, then every
 *                 rollout node's listing sees it) or relay (to the root,
 *                 which queues it for its children and its receivers before
 *                 acknowledging);
 *  fetcher n.f    object store: store_flows downloads per rollout node,
 *                 each holding one of queue_payloads prefetch slots;
 *  forwarder p.k  relay: parent p's link to child k, one payload at a time,
 *                 the child queueing it before it acknowledges;
 *  applier n      rollout node n: decode and apply of each payload by the
 *                 node's receivers;
 *  director       the coordinator: construction end, the object store's
 *                 manifest, delivery end, acknowledgments, commit and the
 *                 owners' baseline updates.
 * Actors are cooperative (SimGrid runs one at a time), so the plain C queues
 * below need no locks; SimGrid semaphores do the blocking. */
#include "sim/sim-internal.h"

#include <fcntl.h>
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <simgrid/link.h>

#include "sim/platform.h"

/* Relay frames carry a 48-byte header before the payload (relay_tcp.c). */
#define DCR__RELAY_FRAME_HDR 48

/* ---- bounded queue of payload indices ------------------------------------- */

typedef struct dcr__q {
    int cap, head, count;
    int max; /* the most it ever held */
    int *v;
    sg_sem_t items, slots;
} dcr__q_t;

static int dcr__q_init(dcr__q_t *q, int cap)
{
    q->cap = cap;
    q->head = q->count = q->max = 0;
    q->v = malloc((size_t)cap * sizeof(int));
    q->items = sg_sem_init(0);
    q->slots = sg_sem_init(cap);
    return q->v ? 0 : -1;
}

static void dcr__q_push(dcr__q_t *q, int x)
{
    sg_sem_acquire(q->slots);
    q->v[(q->head + q->count) % q->cap] = x;
    q->count++;
    if (q->count > q->max) q->max = q->count;
    sg_sem_release(q->items);
}

static int dcr__q_pop(dcr__q_t *q)
{
    sg_sem_acquire(q->items);
    int x = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    sg_sem_release(q->slots);
    return x;
}

/* ---- state of one simulation -------------------------------------------------- */

typedef struct dcr__node {
    sg_host_t host;
    dcr__q_t ready; /* payloads waiting for the node's receivers */
    int nkids;
    int *kid;       /* relay children */
    dcr__q_t *kidq; /* relay: payloads waiting for each child's link */
    /* object store: payloads the node's listing has seen, in upload order */
    int *seen;
    double *visible;
    int seen_head, seen_count;
    sg_sem_t seen_items, slots;
    int claimed;
    double last_apply;
    /* Union of the times with a payload arriving (downloads or hops in):
     * active transfers, when the current busy span began, and its total. */
    int arriving;
    double arriving_since, receive_s;
} dcr__node_t;

typedef struct dcr__sim {
    const dcr_sim_spec_t *spec;
    const dcr_sim_cluster_t *c;
    const dcr_sim_workload_t *w;
    bool relay, in_process;
    int world, nodes, total;
    sg_host_t *owner_host, store, cpu;
    /* The store's GET and PUT token buckets (dcr__store_request). */
    double get_next, put_next;
    /* Rollout nodes one simulated node stands for (the fast path, 1 else):
     * its downloads count that many times in cross_bytes. */
    double node_weight;
    dcr__q_t *sendq;
    sg_bar_t flags;
    char (*mbox)[32];
    double *compute_s, *transport_s;
    dcr__node_t *node;
    sg_sem_t senders_done, nodes_done, manifest;
    double manifest_at;
    int64_t cross_bytes;
    dcr__sim_out_t *out;
    bool trace; /* DCR_SIM_TRACE set: each send on stderr, to compare with an engine trace */
} dcr__sim_t;

/* The one simulation of this process; SimGrid allows one engine per process. */
static dcr__sim_t dcr__S;

typedef struct dcr__actor_arg {
    int a, b;
} dcr__actor_arg_t;

static double dcr__now(void)
{
    return simgrid_get_clock();
}

/* Runs `seconds` of one core's work on the calling actor's host. */
static double dcr__compute(double seconds)
{
    if (!(seconds > 0)) return 0;
    double t0 = dcr__now();
    sg_actor_execute(seconds * DCR_SIM_HOST_FLOPS);
    return dcr__now() - t0;
}

/* Runs `seconds` of one core's work on `host`, where the work happens (a
 * relay hop is the receiving node's work, whoever waits for it). With
 * shared cores every actor is on the one machine already. */
static void dcr__compute_on(sg_host_t host, double seconds)
{
    if (!(seconds > 0)) return;
    if (dcr__S.in_process) {
        dcr__compute(seconds);
        return;
    }
    sg_exec_t e = sg_actor_exec_init(seconds * DCR_SIM_HOST_FLOPS);
    sg_exec_set_host(e, host);
    sg_exec_start(e);
    sg_exec_wait(e);
}

static void dcr__sleep(double seconds)
{
    if (seconds > 0) sg_actor_sleep_for(seconds);
}

static void dcr__move(sg_host_t from, sg_host_t to, double bytes)
{
    if (bytes > 0) sg_host_sendto(from, to, bytes);
}

/* One request through an object store's per-prefix rate limit: a token
 * bucket that refills at rps x prefixes tokens per second and holds one
 * second of them (DCR__STORE_BUCKET_S), so a request starts at once while
 * the store keeps up over that second and waits for a token only when the
 * requests outrun it. Kept as its theoretical arrival time (*tat_p: when
 * the bucket would be full again, GCRA's form). `share`: the requests one
 * simulated request stands for (the fast path's multiplicity), booked
 * together, so the aggregate rate is the store's either way. They stand
 * for identical nodes asking at the same instant, which the store grants
 * one after another; the last of them decides when the group is through
 * (a refit waits for its slowest node), so the simulated request starts
 * with the group's last token: at once while the bucket holds them all.
 *
 * The depth is what lets the fast path stand for its nodes. A bucket of
 * depth one (a pacer) spaced each clump of identical nodes' requests
 * 1/rate apart even on an idle store, and those few milliseconds,
 * different for each node, pushed some nodes' concurrent downloads into
 * step, where they pay the request latency together and move fewer bytes:
 * the full simulation's slowest node ended 4.3% after the fast path's one
 * node (tests/sim/test_sim_fast.c). With the depth, a clump within the
 * rate starts together in both. */
#define DCR__STORE_BUCKET_S 1.0

static void dcr__store_request(double *tat_p, double rps, double share)
{
    if (!(rps > 0)) return;
    double rate = rps * dcr__S.c->store_prefixes, now = dcr__now();
    double base = *tat_p > now ? *tat_p : now; /* tat <= now: the bucket is full */
    double start = base + (share - 1) / rate - DCR__STORE_BUCKET_S; /* the group's last token */
    *tat_p = base + share / rate;
    if (start > now) sg_actor_sleep_until(start);
}

static dcr_status_t dcr__spawn(const char *name, sg_host_t host, void (*fn)(int, char **), int a,
                               int b)
{
    dcr__actor_arg_t *arg = malloc(sizeof(*arg));
    if (!arg) return dcr_error_set(DCR_ENOMEM, "sim: actor %s", name);
    *arg = (dcr__actor_arg_t){a, b};
    sg_actor_t actor = sg_actor_init(name, host);
    sg_actor_set_data(actor, arg);
    sg_actor_start(actor, fn, 0, NULL);
    return DCR_OK;
}

static dcr__actor_arg_t dcr__self_arg(void)
{
    dcr__actor_arg_t *p = sg_actor_self_get_data();
    dcr__actor_arg_t a = *p;
    return a;
}

/* Moves `bytes` from `from` into rollout node nd, counting the node's
 * receive span (overlapping transfers once). */
static void dcr__move_in(dcr__node_t *nd, sg_host_t from, double bytes)
{
    if (nd->arriving++ == 0) nd->arriving_since = dcr__now();
    dcr__move(from, nd->host, bytes);
    if (--nd->arriving == 0) nd->receive_s += dcr__now() - nd->arriving_since;
}

/* ---- receivers ------------------------------------------------------------------- */

/* What a node's receivers spend on one payload: in-process they apply it
 * one after another on one thread; on a cluster each receiver has its own
 * process and the slowest decides. */
static double dcr__node_apply_s(const dcr__sim_t *S, int node, int payload)
{
    const dcr_sim_workload_t *w = S->w;
    double sum = 0, max = 0;
    for (int g = 0; g < S->c->rollout_gpus; g++) {
        int rank = (node * S->c->rollout_gpus + g) % w->serve_tp;
        double s = w->apply_s[(size_t)payload * (size_t)w->serve_tp + (size_t)rank];
        sum += s;
        if (s > max) max = s;
    }
    return S->in_process ? sum : max;
}

static void dcr__applier(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    int n = dcr__self_arg().a;
    dcr__node_t *nd = &S->node[n];
    for (int k = 0; k < S->total; k++) {
        int p = dcr__q_pop(&nd->ready);
        if (!S->relay) sg_sem_release(nd->slots); /* the prefetch slot frees when recv takes it */
        dcr__compute(dcr__node_apply_s(S, n, p));
        nd->last_apply = dcr__now();
    }
    /* recv ends only once the node has seen the manifest or the end marker */
    sg_sem_acquire(S->manifest);
    if (S->manifest_at > dcr__now()) sg_actor_sleep_until(S->manifest_at);
    sg_sem_release(S->nodes_done);
}

/* ---- object store ------------------------------------------------------------------ */

static void dcr__store_announce(dcr__sim_t *S, int p)
{
    double visible = dcr__now() + S->c->store_list_ms / 1e3;
    for (int n = 0; n < S->nodes; n++) {
        dcr__node_t *nd = &S->node[n];
        nd->seen[nd->seen_count] = p;
        nd->visible[nd->seen_count] = visible;
        nd->seen_count++;
        sg_sem_release(nd->seen_items);
    }
}

static void dcr__store_send(dcr__sim_t *S, int owner, int p)
{
    double bytes = (double)S->w->payloads[p].bytes;
    dcr__store_request(&S->put_next, S->c->store_put_rps, 1);
    dcr__move(S->owner_host[owner], S->store, bytes);
    dcr__sleep(S->c->store_put_ms / 1e3);
    S->cross_bytes += (int64_t)bytes;
    dcr__store_announce(S, p);
}

static void dcr__fetcher(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    dcr__node_t *nd = &S->node[dcr__self_arg().a];
    while (nd->claimed < S->total) {
        nd->claimed++;
        sg_sem_acquire(nd->slots);
        sg_sem_acquire(nd->seen_items);
        int i = nd->seen_head++;
        int p = nd->seen[i];
        if (nd->visible[i] > dcr__now()) sg_actor_sleep_until(nd->visible[i]);
        double bytes = (double)S->w->payloads[p].bytes;
        dcr__store_request(&S->get_next, S->c->store_get_rps, S->node_weight);
        dcr__move_in(nd, S->store, bytes);
        S->cross_bytes += (int64_t)(bytes * S->node_weight);
        dcr__q_push(&nd->ready, p);
    }
}

/* ---- relay tree ------------------------------------------------------------------------ */

/* A node took a payload: queued for each child and for its receivers, and
 * only then acknowledged (blocking while any of those queues is full). */
static void dcr__relay_take(dcr__sim_t *S, int n, int p)
{
    dcr__node_t *nd = &S->node[n];
    for (int k = 0; k < nd->nkids; k++) dcr__q_push(&nd->kidq[k], p);
    dcr__q_push(&nd->ready, p);
}

/* The hop's own work (frame copies, the digest check, queueing) on the
 * node that takes the payload. */
static void dcr__relay_hop(const dcr__sim_t *S, int node, double bytes)
{
    dcr__compute_on(S->node[node].host, S->w->relay_hop_s + S->w->relay_hop_s_per_byte * bytes);
}

static void dcr__relay_send(dcr__sim_t *S, int owner, int p)
{
    double bytes = (double)S->w->payloads[p].bytes;
    dcr__move_in(&S->node[0], S->owner_host[owner], bytes + DCR__RELAY_FRAME_HDR);
    dcr__relay_hop(S, 0, bytes);
    S->cross_bytes += (int64_t)bytes;
    dcr__relay_take(S, 0, p);
    if (S->c->ack_rtt) dcr__sleep(sg_host_get_route_latency(S->owner_host[owner], S->node[0].host));
}

static void dcr__forwarder(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    dcr__actor_arg_t a = dcr__self_arg();
    dcr__node_t *parent = &S->node[a.a];
    int child = parent->kid[a.b];
    for (int k = 0; k < S->total; k++) {
        int p = dcr__q_pop(&parent->kidq[a.b]);
        dcr__move_in(&S->node[child], parent->host,
                     (double)S->w->payloads[p].bytes + DCR__RELAY_FRAME_HDR);
        dcr__relay_hop(S, child, (double)S->w->payloads[p].bytes);
        dcr__relay_take(S, child, p);
    }
}

/* ---- owners and senders ----------------------------------------------------------------- */

static void dcr__sender(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    int o = dcr__self_arg().a;
    dcr__sleep(S->c->startup_ms / 1e3);
    for (;;) {
        int p = dcr__q_pop(&S->sendq[o]);
        if (p < 0) break;
        double t0 = dcr__now();
        if (S->relay)
            dcr__relay_send(S, o, p);
        else
            dcr__store_send(S, o, p);
        S->transport_s[o] += dcr__now() - t0;
        if (S->trace)
            fprintf(stderr, "sim: owner %d sent payload %d (%lld bytes) %.4f -> %.4f s\n", o, p,
                    (long long)S->w->payloads[p].bytes, t0, dcr__now());
    }
    sg_sem_release(S->senders_done);
}

static void dcr__owner_parts_in(dcr__sim_t *S, int o, const dcr_sim_step_t *s)
{
    sg_mailbox_t mb = sg_mailbox_by_name(S->mbox[o]);
    for (int64_t i = 0; i < s->count; i++) {
        int64_t *bytes = sg_mailbox_get(mb);
        S->compute_s[o] += dcr__compute(s->seconds * (double)*bytes);
        free(bytes);
    }
}

static void dcr__owner_part_out(dcr__sim_t *S, const dcr_sim_step_t *s)
{
    int64_t *bytes = malloc(sizeof(*bytes));
    if (!bytes) abort();
    *bytes = s->bytes;
    sg_comm_t comm =
        sg_mailbox_put_init(sg_mailbox_by_name(S->mbox[s->peer]), bytes, (long)s->bytes);
    sg_comm_detach(comm, NULL);
}

static void dcr__owner(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    int o = dcr__self_arg().a;
    const dcr_sim_owner_t *ow = &S->w->owners[o];
    sg_mailbox_set_receiver(S->mbox[o]); /* parts arrive without a matching receive */
    /* An owner that exports its shard first (NeMo-RL's full checkpoint
     * export per refit): the shard is the checkpoint's even share. */
    if (S->c->owner_export_gbps > 0)
        S->compute_s[o] += dcr__compute((double)S->w->checkpoint_bytes / S->world /
                                        (S->c->owner_export_gbps * 1e9 / 8));
    for (int i = 0; i < ow->nsteps; i++) {
        const dcr_sim_step_t *s = &ow->steps[i];
        switch (s->kind) {
        case DCR_SIM_STEP_COMPUTE:
            S->compute_s[o] += dcr__compute(s->seconds);
            break;
        case DCR_SIM_STEP_BARRIER:
            sg_barrier_wait(S->flags);
            break;
        case DCR_SIM_STEP_SEND_PART:
            dcr__owner_part_out(S, s);
            break;
        case DCR_SIM_STEP_RECV_PARTS:
            dcr__owner_parts_in(S, o, s);
            break;
        case DCR_SIM_STEP_FLUSH:
            dcr__q_push(&S->sendq[o], s->payload);
            break;
        }
    }
    dcr__q_push(&S->sendq[o], -1);
}

/* ---- the coordinator ---------------------------------------------------------------------- */

/* After the last payload: every owner's finish. Relay: a FIN frame on each
 * owner's connection (the in-process coordinator sends them one after
 * another, each paying the cross-cluster latency), then the root's end
 * marker through the tree. Object store: the last finish writes the
 * manifest (a PUT), which each node's listing sees later. */
static double dcr__finish_s(const dcr__sim_t *S)
{
    const dcr_sim_cluster_t *c = S->c;
    double one_way = c->latency_ms / 1e3;
    if (S->relay) return (S->in_process ? S->world : 1) * (one_way + (c->ack_rtt ? one_way : 0));
    double put = c->store_put_ms / 1e3;
    return S->in_process ? put : put + one_way + c->store_latency_ms / 1e3;
}

static void dcr__director(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    for (int o = 0; o < S->world; o++) sg_sem_acquire(S->senders_done);
    S->out->construction_end_s = dcr__now();
    dcr__sleep(dcr__finish_s(S));
    S->manifest_at = dcr__now() + (S->relay ? 0 : S->c->store_list_ms / 1e3);
    for (int n = 0; n < S->nodes; n++) sg_sem_release(S->manifest);
    for (int n = 0; n < S->nodes; n++) sg_sem_acquire(S->nodes_done);
    double apply_end = 0;
    for (int n = 0; n < S->nodes; n++)
        if (S->node[n].last_apply > apply_end) apply_end = S->node[n].last_apply;
    dcr__sleep(S->w->finalize_s);
    double t1 = dcr__now();
    S->out->latency_s = t1;
    S->out->apply_end_s = apply_end;
    S->out->finalization_s = t1 - apply_end;
}

/* ---- setup -------------------------------------------------------------------------------- */

static dcr_status_t dcr__hosts(dcr__sim_t *S)
{
    char name[64];
    S->owner_host = calloc((size_t)S->world, sizeof(sg_host_t));
    if (!S->owner_host) return dcr_error_set(DCR_ENOMEM, "sim: hosts");
    for (int o = 0; o < S->world; o++) {
        dcr_sim_host_train(name, sizeof(name), o / S->c->train_gpus, o % S->c->train_gpus);
        if (!(S->owner_host[o] = sg_host_by_name(name)))
            return dcr_error_set(
                DCR_EINVAL, "sim platform: no host '%s' (see sim/platform.h for the names)", name);
    }
    for (int n = 0; n < S->nodes; n++) {
        dcr_sim_host_rollout(name, sizeof(name), n);
        if (!(S->node[n].host = sg_host_by_name(name)))
            return dcr_error_set(
                DCR_EINVAL, "sim platform: no host '%s' (see sim/platform.h for the names)", name);
    }
    if (!(S->store = sg_host_by_name("store")))
        return dcr_error_set(DCR_EINVAL,
                             "sim platform: no host 'store' (see sim/platform.h for the names)");
    S->cpu = NULL;
    if (S->in_process && !(S->cpu = sg_host_by_name("cpu")))
        return dcr_error_set(DCR_EINVAL, "sim platform: shared cores need a host 'cpu'");
    return DCR_OK;
}

/* Relay: payloads a node stages for its receivers; object store: its
 * prefetch slots. */
static int dcr__staging_cap(const dcr__sim_t *S)
{
    return S->relay && S->c->staging_payloads > 0 ? S->c->staging_payloads : S->c->queue_payloads;
}

static dcr_status_t dcr__node_init(dcr__sim_t *S, int n)
{
    dcr__node_t *nd = &S->node[n];
    int q = S->c->queue_payloads;
    /* Object store: prefetch slots bound what sits in the ready queue, so the
     * queue itself never blocks; relay: the ready queue is the bound. */
    if (dcr__q_init(&nd->ready, S->relay ? dcr__staging_cap(S) : S->total + 1))
        return dcr_error_set(DCR_ENOMEM, "sim: queues");
    nd->slots = sg_sem_init(q);
    nd->seen = malloc(((size_t)S->total + 1) * sizeof(int));
    nd->visible = malloc(((size_t)S->total + 1) * sizeof(double));
    nd->seen_items = sg_sem_init(0);
    nd->kid = calloc((size_t)S->c->fanout, sizeof(int));
    nd->kidq = calloc((size_t)S->c->fanout, sizeof(dcr__q_t));
    if (!nd->seen || !nd->visible || !nd->kid || !nd->kidq)
        return dcr_error_set(DCR_ENOMEM, "sim: node %d", n);
    for (int k = 0; k < S->c->fanout; k++) {
        /* The fast path's chain: one child, the next node of the path. */
        int child = S->c->agg_chain ? (k == 0 ? n + 1 : S->nodes) : n * S->c->fanout + 1 + k;
        if (child >= S->nodes) break;
        nd->kid[nd->nkids] = child;
        if (dcr__q_init(&nd->kidq[nd->nkids++], q)) return dcr_error_set(DCR_ENOMEM, "sim: queues");
    }
    return DCR_OK;
}

static dcr_status_t dcr__state(dcr__sim_t *S)
{
    S->sendq = calloc((size_t)S->world, sizeof(dcr__q_t));
    S->mbox = calloc((size_t)S->world, sizeof(*S->mbox));
    S->compute_s = calloc((size_t)S->world, sizeof(double));
    S->transport_s = calloc((size_t)S->world, sizeof(double));
    S->node = calloc((size_t)S->nodes, sizeof(dcr__node_t));
    if (!S->sendq || !S->mbox || !S->compute_s || !S->transport_s || !S->node)
        return dcr_error_set(DCR_ENOMEM, "sim: state of %d owners", S->world);
    for (int o = 0; o < S->world; o++) {
        if (dcr__q_init(&S->sendq[o], S->c->owner_queue))
            return dcr_error_set(DCR_ENOMEM, "sim: queues");
        snprintf(S->mbox[o], sizeof(S->mbox[o]), "parts-%d", o);
    }
    for (int n = 0; n < S->nodes; n++) DCR_CHECK(dcr__node_init(S, n));
    S->flags = sg_barrier_init((unsigned)S->world);
    S->senders_done = sg_sem_init(0);
    S->nodes_done = sg_sem_init(0);
    S->manifest = sg_sem_init(0);
    return DCR_OK;
}

static dcr_status_t dcr__actors(dcr__sim_t *S)
{
    char name[64];
    for (int o = 0; o < S->world; o++) {
        snprintf(name, sizeof(name), "owner-%d", o);
        DCR_CHECK(dcr__spawn(name, S->in_process ? S->cpu : S->owner_host[o], dcr__owner, o, 0));
        snprintf(name, sizeof(name), "sender-%d", o);
        DCR_CHECK(dcr__spawn(name, S->in_process ? S->cpu : S->owner_host[o], dcr__sender, o, 0));
    }
    for (int n = 0; n < S->nodes; n++) {
        snprintf(name, sizeof(name), "applier-%d", n);
        DCR_CHECK(dcr__spawn(name, S->in_process ? S->cpu : S->node[n].host, dcr__applier, n, 0));
        for (int f = 0; !S->relay && f < S->c->store_flows; f++) {
            snprintf(name, sizeof(name), "fetcher-%d.%d", n, f);
            DCR_CHECK(dcr__spawn(name, S->node[n].host, dcr__fetcher, n, f));
        }
        for (int k = 0; S->relay && k < S->node[n].nkids; k++) {
            snprintf(name, sizeof(name), "forwarder-%d.%d", n, k);
            DCR_CHECK(
                dcr__spawn(name, S->in_process ? S->cpu : S->node[n].host, dcr__forwarder, n, k));
        }
    }
    DCR_CHECK(dcr__spawn("director", S->store, dcr__director, 0, 0));
    return DCR_OK;
}

/* SimGrid's own configuration: the flow model without the empirical TCP
 * factors (every figure of the cluster is already an effective rate), and
 * only its warnings on stderr. In sanitizer builds its actors run as threads:
 * the sanitizers cannot follow SimGrid's own stack switching (ASan warns on
 * stderr at every switch, which breaks the one-line error contract). */
static void dcr__simgrid_init(void)
{
    static char *argv[] = {
        "dcr-sim",
        "--log=root.thres:warning",
        "--cfg=network/model:CM02",
        "--cfg=network/TCP-gamma:0",
        "--cfg=network/crosstraffic:0",
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        "--cfg=contexts/factory:thread",
#endif
        NULL
    };
    int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
    simgrid_init(&argc, argv);
}

static dcr_status_t dcr__begin(dcr__sim_t *S, const dcr_sim_spec_t *spec,
                               const dcr_sim_workload_t *w, const char *platform,
                               dcr__sim_out_t *out)
{
    memset(S, 0, sizeof(*S));
    S->spec = spec;
    S->c = &spec->cluster;
    S->w = w;
    S->relay = !strcmp(spec->transport, "relay");
    S->in_process = spec->cluster.shared_cores > 0;
    S->world = w->world;
    S->nodes = spec->cluster.rollout_nodes;
    S->node_weight = spec->cluster.agg_nodes > 0
                         ? (double)spec->cluster.agg_nodes / spec->cluster.rollout_nodes
                         : 1;
    S->total = w->npayloads;
    S->out = out;
    S->trace = getenv("DCR_SIM_TRACE") != NULL;
    memset(out, 0, sizeof(*out));
    dcr__simgrid_init();
    simgrid_load_platform(platform);
    DCR_CHECK(dcr__state(S));
    return dcr__hosts(S);
}

static void dcr__bounds(dcr__sim_t *S)
{
    for (int o = 0; o < S->world; o++) {
        if (S->compute_s[o] > S->out->construction_lb_s)
            S->out->construction_lb_s = S->compute_s[o];
        if (S->transport_s[o] > S->out->transport_lb_s) S->out->transport_lb_s = S->transport_s[o];
    }
    S->out->cross_bytes = S->cross_bytes;
    /* The staging queue: payloads a node holds for its receivers. On the
     * relay tree its capacity is staging_payloads (else the hop queue);
     * the object store's is its prefetch slots (the ready queue itself
     * never blocks there). */
    for (int n = 0; n < S->nodes; n++) {
        if (S->node[n].ready.max > S->out->staging_max) S->out->staging_max = S->node[n].ready.max;
        if (S->node[n].receive_s > S->out->receive_lb_s)
            S->out->receive_lb_s = S->node[n].receive_s;
    }
    S->out->staging_cap = dcr__staging_cap(S);
}

dcr_status_t dcr__sim_refit(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                            const char *platform, dcr__sim_out_t *out)
{
    dcr__sim_t *S = &dcr__S;
    DCR_CHECK(dcr__begin(S, spec, w, platform, out));
    DCR_CHECK(dcr__actors(S));
    simgrid_run();
    if (!(out->latency_s > 0) && w->npayloads > 0)
        return dcr_error_set(
            DCR_EINVAL, "sim: the refit did not finish (a deadlock in the simulated pipeline)");
    dcr__bounds(S);
    return DCR_OK;
}

/* ---- the full-checkpoint reference ------------------------------------------------------ */

typedef struct dcr__ref {
    int64_t *len; /* objects, grouped by owner */
    int *first;   /* [world + 1]: owner o uploads objects first[o] .. first[o+1]-1 */
    int nobj;
    int *next; /* per rollout node: next object to download */
    sg_sem_t uploaded, go;
    double end;
} dcr__ref_t;

static dcr__ref_t dcr__R;

/* Each training node's share (1/N of the checkpoint, the remainder to the
 * first nodes) split among its owners (the remainder to the first), in
 * objects of ref_object_mib, as the engine's reference does. */
static dcr_status_t dcr__ref_plan(dcr__sim_t *S, dcr__ref_t *R)
{
    int N = S->c->train_nodes, per = S->c->train_gpus;
    int64_t total = S->w->checkpoint_bytes, obj = (int64_t)(S->c->ref_object_mib * 1048576.0);
    if (obj < 1) obj = 1;
    int64_t cap = total / obj + 2 * (int64_t)S->world + 1;
    R->len = malloc((size_t)cap * sizeof(int64_t));
    R->first = calloc((size_t)S->world + 1, sizeof(int));
    R->next = calloc((size_t)S->nodes, sizeof(int));
    if (!R->len || !R->first || !R->next)
        return dcr_error_set(DCR_ENOMEM, "sim reference: %lld objects", (long long)cap);
    for (int o = 0; o < S->world; o++) {
        int n = o / per, j = o % per;
        int64_t node_share = total / N + (n < total % N);
        int64_t share = node_share / per + (j == 0 ? node_share % per : 0);
        R->first[o] = R->nobj;
        for (; share > 0; share -= obj) R->len[R->nobj++] = share < obj ? share : obj;
    }
    R->first[S->world] = R->nobj;
    R->uploaded = sg_sem_init(0);
    R->go = sg_sem_init(0);
    return DCR_OK;
}

static void dcr__ref_upload(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    dcr__ref_t *R = &dcr__R;
    int o = dcr__self_arg().a;
    for (int i = R->first[o]; i < R->first[o + 1]; i++) {
        dcr__store_request(&S->put_next, S->c->store_put_rps, 1);
        dcr__move(S->owner_host[o], S->store, (double)R->len[i]);
        dcr__sleep(S->c->store_put_ms / 1e3);
    }
    sg_sem_release(R->uploaded);
}

/* Downloads start once the whole checkpoint is stored, as in the seed. */
static void dcr__ref_gate(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    dcr__ref_t *R = &dcr__R;
    for (int o = 0; o < S->world; o++) sg_sem_acquire(R->uploaded);
    for (int k = 0; k < S->nodes * S->c->store_flows; k++) sg_sem_release(R->go);
}

static void dcr__ref_download(int argc, char **argv)
{
    dcr__sim_t *S = &dcr__S;
    dcr__ref_t *R = &dcr__R;
    int n = dcr__self_arg().a;
    sg_sem_acquire(R->go);
    while (R->next[n] < R->nobj) {
        int i = R->next[n]++;
        dcr__store_request(&S->get_next, S->c->store_get_rps, S->node_weight);
        dcr__move(S->store, S->node[n].host, (double)R->len[i]);
        if (dcr__now() > R->end) R->end = dcr__now();
    }
}

dcr_status_t dcr__sim_reference(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                const char *platform, dcr__sim_out_t *out)
{
    dcr__sim_t *S = &dcr__S;
    dcr__ref_t *R = &dcr__R;
    memset(R, 0, sizeof(*R));
    DCR_CHECK(dcr__begin(S, spec, w, platform, out));
    DCR_CHECK(dcr__ref_plan(S, R));
    char name[64];
    for (int o = 0; o < S->world; o++) {
        snprintf(name, sizeof(name), "ref-upload-%d", o);
        DCR_CHECK(dcr__spawn(name, S->owner_host[o], dcr__ref_upload, o, 0));
    }
    for (int n = 0; n < S->nodes; n++)
        for (int f = 0; f < S->c->store_flows; f++) {
            snprintf(name, sizeof(name), "ref-download-%d.%d", n, f);
            DCR_CHECK(dcr__spawn(name, S->node[n].host, dcr__ref_download, n, f));
        }
    DCR_CHECK(dcr__spawn("ref-gate", S->store, dcr__ref_gate, 0, 0));
    simgrid_run();
    out->reference_s = R->end;
    return DCR_OK;
}

/* ---- a user's platform, checked before any simulation --------------------------------- */

dcr_status_t dcr__sim_probe_platform(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                     const char *platform, dcr__sim_out_t *out)
{
    (void)w;
    memset(out, 0, sizeof(*out));
    /* SimGrid reports a bad file as a backtrace on stderr and an abort; the
     * parent turns the missing result into one line instead. */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
    dcr__simgrid_init();
    simgrid_load_platform(platform);
    const dcr_sim_cluster_t *c = &spec->cluster;
    char name[64];
    for (int n = 0; n < c->train_nodes; n++)
        for (int g = 0; g < c->train_gpus; g++) {
            dcr_sim_host_train(name, sizeof(name), n, g);
            if (!sg_host_by_name(name))
                return dcr_error_set(DCR_EINVAL, "no host '%s' (sim/platform.h names them)", name);
        }
    for (int i = 0; i < c->rollout_nodes; i++) {
        dcr_sim_host_rollout(name, sizeof(name), i);
        if (!sg_host_by_name(name))
            return dcr_error_set(DCR_EINVAL, "no host '%s' (sim/platform.h names them)", name);
    }
    if (!sg_host_by_name("store"))
        return dcr_error_set(DCR_EINVAL, "no host 'store' (sim/platform.h names them)");
    sg_link_t *links = sg_link_list();
    size_t n = sg_link_count();
    for (size_t i = 0; i < n; i++) {
        double bw = sg_link_get_bandwidth(links[i]), lat = sg_link_get_latency(links[i]);
        if (!(bw > 0) || !isfinite(bw) || !(lat >= 0) || !isfinite(lat)) {
            dcr_status_t st = dcr_error_set(
                DCR_EINVAL,
                "link '%s' has bandwidth %g B/s and latency %g s, expected > 0 and >= 0",
                sg_link_get_name(links[i]), bw, lat);
            free(links);
            return st;
        }
    }
    free(links);
    return DCR_OK;
}
