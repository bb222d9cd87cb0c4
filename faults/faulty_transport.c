/* "faulty:<name>" transports: each wraps the transport <name> (created by
 * name, with the same configuration) and injects the payload faults of the
 * injector bound when it was created: an owner crashing before an upload, a
 * payload lost in transit, a relay connection dropping, a body byte flipped
 * in flight, a payload held back (reorder), a rollout node's reception
 * stalling (delay), a node receiving a payload twice (duplicate, as a
 * redelivery after a lost acknowledgment would), and the receivers of a
 * node dying as a payload reaches it (kill_delivery) or after the node took
 * one (kill_apply). "faulty:objstore" keeps its payloads in the faulty
 * object store over the configured one ("faulty:<store URL>",
 * faulty_objstore.c), where the stored-object faults act. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "faults/faulty_internal.h"

/* A copy of a delivered payload, handed to its node once more. */
typedef struct dup_copy {
    uint8_t *data;
    size_t len;
    struct dup_copy *next; /* handed out and not released yet */
} dup_copy_t;

typedef struct faulty_transport {
    dcr_transport_t pub; /* first: the wrappers' header */
    dcr_transport_t *inner;
    dcr_faults_t *f; /* NULL: every call passes through */
    int nodes;
    pthread_mutex_t lock; /* the copies below: node threads take and release them */
    dup_copy_t **pending; /* per node: the copy its next recv hands out */
    dup_copy_t *out;      /* copies handed out, to tell them from inner deliveries */
    _Atomic uint64_t tau; /* the attempt opened last, for the watcher */
} faulty_transport_t;

static faulty_transport_t *ft(dcr_transport_t *t)
{
    return (faulty_transport_t *)t;
}

/* Drops the copies no node took (a new attempt, a stop, the end). */
static void drop_pending(faulty_transport_t *x)
{
    pthread_mutex_lock(&x->lock);
    for (int n = 0; n < x->nodes; n++) {
        if (!x->pending[n]) continue;
        free(x->pending[n]->data);
        free(x->pending[n]);
        x->pending[n] = NULL;
    }
    pthread_mutex_unlock(&x->lock);
}

static void faulty_free(faulty_transport_t *x)
{
    drop_pending(x);
    while (x->out) {
        dup_copy_t *d = x->out;
        x->out = d->next;
        free(d->data);
        free(d);
    }
    pthread_mutex_destroy(&x->lock);
    free(x->pending);
    free(x);
}

/* Wraps the backend the header's parent names, created by name. */
static dcr_status_t faulty_create(const dcr_transport_ops_t *self,
                                  const dcr_transport_config_t *cfg, dcr_transport_t **out_p)
{
    const dcr_transport_ops_t *parent = self->hdr.parent;
    faulty_transport_t *x = calloc(1, sizeof(*x));
    if (x)
        x->pending =
            calloc(cfg->rollout_nodes > 0 ? (size_t)cfg->rollout_nodes : 1, sizeof(*x->pending));
    if (!x || !x->pending) {
        free(x);
        return dcr_error_set(DCR_ENOMEM, "transport %s", self->hdr.name);
    }
    x->nodes = cfg->rollout_nodes;
    pthread_mutex_init(&x->lock, NULL);
    x->f = dcr__faults_bound();
    dcr_transport_config_t c = *cfg;
    char *store = NULL;
    if (cfg->dir && cfg->dir[0] && strncmp(cfg->dir, DCR__FAULTY_PREFIX, DCR__FAULTY_PREFIX_LEN)) {
        /* The store under an object-store transport is faulty too (a
         * transport without a store ignores dir). */
        size_t n = strlen(cfg->dir) + DCR__FAULTY_PREFIX_LEN + 1;
        store = malloc(n);
        if (!store) {
            faulty_free(x);
            return dcr_error_set(DCR_ENOMEM, "transport %s: store name", self->hdr.name);
        }
        snprintf(store, n, "%s%s", DCR__FAULTY_PREFIX, cfg->dir);
        c.dir = store;
    }
    dcr_status_t st = dcr_transport_create(parent->hdr.name, &c, &x->inner);
    free(store); /* the transport copied it */
    if (st != DCR_OK) {
        faulty_free(x);
        dcr_error_prefix("%s: ", self->hdr.name);
        return st;
    }
    *out_p = &x->pub;
    return DCR_OK;
}

static dcr_status_t faulty_open_attempt(dcr_transport_t *t, uint64_t tau)
{
    drop_pending(ft(t));
    ft(t)->tau = tau;
    return dcr_transport_open_attempt(ft(t)->inner, tau);
}

/* The faults of one owner's send, matched in the order the engine's
 * transport interceptor matched them before this backend replaced it, so
 * that the same seeds give the same faults. */
static dcr_status_t faulty_send(dcr_transport_t *t, int owner, uint64_t id, const uint8_t *buf,
                                size_t len)
{
    faulty_transport_t *x = ft(t);
    dcr_fault_t hit;
    if (dcr__faults_fire(x->f, DCR_FAULT_OWNER_CRASH, owner, &hit)) {
        DCR_LOG_WARN("fault owner_crash: owner %d crashed before uploading payload %" PRIu64, owner,
                     id);
        return dcr_error_set(DCR_ETRANSPORT,
                             "owner %d crashed before uploading payload %" PRIu64 " (fault)", owner,
                             id);
    }
    if (dcr__faults_fire(x->f, DCR_FAULT_DROP, owner, &hit)) {
        DCR_LOG_WARN("fault drop: payload %" PRIu64 " of owner %d lost", id, owner);
        return dcr_error_set(DCR_ETRANSPORT,
                             "payload %" PRIu64 " of owner %d lost in transit (fault)", id, owner);
    }
    if (dcr__faults_fire(x->f, DCR_FAULT_RELAY_LINK, owner, &hit)) {
        DCR_LOG_WARN("fault relay_link: owner %d's connection to the relay root dropped", owner);
        return dcr_error_set(DCR_ETRANSPORT, "owner %d: relay connection lost (fault)", owner);
    }
    uint8_t *flipped = NULL;
    if (len > 0 && dcr__faults_fire(x->f, DCR_FAULT_CORRUPT, owner, &hit)) {
        /* The last byte belongs to the compressed body, which the digest
         * covers, as a faulty link would change it; the owner's bytes stay
         * as they were. */
        flipped = malloc(len);
        if (!flipped) return dcr_error_set(DCR_ENOMEM, "corrupt fault: %zu bytes", len);
        memcpy(flipped, buf, len);
        flipped[len - 1] ^= 0x5a;
        buf = flipped;
        DCR_LOG_WARN("fault corrupt: payload %" PRIu64 " of owner %d, last body byte flipped", id,
                     owner);
    }
    if (dcr__faults_fire(x->f, DCR_FAULT_REORDER, owner, &hit)) {
        DCR_LOG_WARN("fault reorder: payload %" PRIu64 " of owner %d held back %d ms", id, owner,
                     hit.ms);
        dcr__faults_sleep_ms(hit.ms);
    }
    dcr_status_t st = dcr_transport_send(x->inner, owner, id, buf, len);
    free(flipped);
    return st;
}

static dcr_status_t faulty_finish(dcr_transport_t *t, int owner, uint64_t npayloads)
{
    return dcr_transport_finish(ft(t)->inner, owner, npayloads);
}

/* The copy a duplicate fault keeps for the node's next recv; false (nothing
 * kept, the fault did not happen) when it cannot be allocated. */
static bool keep_copy(faulty_transport_t *x, int node, const dcr_delivery_t *d)
{
    dup_copy_t *c = calloc(1, sizeof(*c));
    if (c) c->data = malloc(d->len ? d->len : 1);
    if (!c || !c->data) {
        free(c);
        DCR_LOG_WARN("fault duplicate: no memory for a copy of %zu bytes; not duplicated", d->len);
        return false;
    }
    memcpy(c->data, d->data, d->len);
    c->len = d->len;
    pthread_mutex_lock(&x->lock);
    if (x->pending[node]) { /* one copy at a time per node */
        free(x->pending[node]->data);
        free(x->pending[node]);
    }
    x->pending[node] = c;
    pthread_mutex_unlock(&x->lock);
    return true;
}

/* The copy waiting for the node, moved to the handed-out list; NULL: none. */
static dup_copy_t *take_copy(faulty_transport_t *x, int node)
{
    pthread_mutex_lock(&x->lock);
    dup_copy_t *c = x->pending[node];
    if (c) {
        x->pending[node] = NULL;
        c->next = x->out;
        x->out = c;
    }
    pthread_mutex_unlock(&x->lock);
    return c;
}

/* Removes d's handle from the handed-out copies; false when it is not one. */
static bool give_back_copy(faulty_transport_t *x, const dcr_delivery_t *d)
{
    pthread_mutex_lock(&x->lock);
    dup_copy_t **p = &x->out;
    while (*p && *p != d->handle) p = &(*p)->next;
    dup_copy_t *c = *p;
    if (c) *p = c->next;
    pthread_mutex_unlock(&x->lock);
    if (!c) return false;
    free(c->data);
    free(c);
    return true;
}

static dcr_status_t faulty_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p)
{
    faulty_transport_t *x = ft(t);
    dcr_fault_t hit;
    dup_copy_t *c = take_copy(x, node);
    if (c) {
        *out_p = (dcr_delivery_t){c->data, c->len, c};
        return DCR_OK;
    }
    if (dcr__faults_fire(x->f, DCR_FAULT_DELAY, node, &hit)) {
        DCR_LOG_WARN("fault delay: rollout node %d stalls %d ms", node, hit.ms);
        dcr__faults_sleep_ms(hit.ms);
    }
    DCR_CHECK(dcr_transport_recv(x->inner, node, timeout_ms, out_p));
    /* A payload reached the node: its receivers may die before taking it,
     * and it may come once more (the receivers drop the copy by rule). */
    dcr__faults_kill_on_node(x->f, DCR_FAULT_KILL_DELIVERY, node);
    /* Counted only once the copy exists: a copy that cannot be allocated is
     * a duplicate that never happened. */
    if (dcr__faults_take(x->f, DCR_FAULT_DUPLICATE, node, &hit) && keep_copy(x, node, out_p)) {
        DCR_LOG_WARN("fault duplicate: rollout node %d receives a payload twice", node);
        dcr__faults_happened(x->f, DCR_FAULT_DUPLICATE);
    }
    return DCR_OK;
}

/* The node took the payload (sync RL: its receivers applied it): the
 * watcher sees it, then a receiver of the node may die with its writes. */
static void faulty_release(dcr_transport_t *t, int node, dcr_delivery_t *d)
{
    faulty_transport_t *x = ft(t);
    dcr__faults_event(x->f, DCR_FAULTS_EVENT_TAKEN, node, x->tau);
    dcr__faults_kill_on_node(x->f, DCR_FAULT_KILL_APPLY, node);
    if (!give_back_copy(x, d)) dcr_transport_release(x->inner, node, d);
}

static void faulty_stop_and_wait(dcr_transport_t *t)
{
    dcr_transport_stop_and_wait(ft(t)->inner);
    drop_pending(ft(t));
}

static dcr_status_t faulty_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                     double *seconds_p)
{
    return dcr_transport_reference(ft(t)->inner, per_node_bytes, seconds_p);
}

static void faulty_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p)
{
    dcr_transport_counters(ft(t)->inner, out_p);
}

static void faulty_destroy(dcr_transport_t *t)
{
    dcr_transport_destroy(ft(t)->inner);
    faulty_free(ft(t));
}

static void faulty_payload_key_changed(dcr_transport_t *t, const dcr_payload_key_t *key)
{
    dcr_transport_set_payload_key(ft(t)->inner, key);
}

/* One table per wrapped backend; the registry borrows them for the process. */
static dcr_transport_ops_t tables[DCR__FAULTY_MAX];

static dcr_status_t add_table(int k, const char *name, const char *parent)
{
    const dcr_transport_ops_t *p = dcr_transport_find(parent);
    tables[k] = (dcr_transport_ops_t){
        .hdr = {.version = DCR_TRANSPORT_OPS_VERSION, .name = name, .parent = p},
        .props = p->props, /* what the wrapped backend guarantees */
        .create = faulty_create,
        .open_attempt = faulty_open_attempt,
        .send = faulty_send,
        .finish = faulty_finish,
        .recv = faulty_recv,
        .release = faulty_release,
        .stop_and_wait = faulty_stop_and_wait,
        .reference = faulty_reference,
        .counters = faulty_counters,
        .destroy = faulty_destroy,
        .payload_key_changed = faulty_payload_key_changed,
    };
    return dcr_transport_register(&tables[k]);
}

static bool registered(const char *name)
{
    return dcr_transport_find(name) != NULL;
}

static dcr__faulty_family_t family = {"transports",
                                      dcr_transport_backend_name,
                                      registered,
                                      add_table,
                                      PTHREAD_MUTEX_INITIALIZER,
                                      {{0}},
                                      0};

dcr_status_t dcr__faulty_transport_register(void)
{
    return dcr__faulty_register_family(&family);
}
