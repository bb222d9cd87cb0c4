/* The transport registry and wrappers. Every call from the engine passes one
 * wrapper here, which validates arguments once for all backends and only
 * then calls the backend's slot (fault injection is a backend of its own,
 * registered from outside the engine, that wraps another). Also the
 * pieces both built-in backends share: the common handle part, the send-side
 * payload check and the training side's ledger of an attempt. */
#include "transport-internal.h"

#include "core/core-internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adding a transport is one line here (object stores, S3 among them, are
 * registered in objstore.c and reached through the "objstore" transport). */
static const void *const dcr__transport_builtin[] = {
    &dcr__transport_objstore_ops,
    &dcr__transport_relay_ops,
};
/* The built-in backends, then those registered at run time
 * (dcr_transport_register). */
static dcr__registry_t dcr__registry =
    DCR__REGISTRY_INIT("transport", dcr__transport_builtin,
                       sizeof dcr__transport_builtin / sizeof dcr__transport_builtin[0]);

size_t dcr_transport_backend_count(void)
{
    return dcr__registry_count(&dcr__registry);
}

const char *dcr_transport_backend_name(size_t i)
{
    const dcr_transport_ops_t *ops = dcr__registry_at(&dcr__registry, i);
    return ops != NULL ? ops->hdr.name : NULL;
}

const dcr_transport_ops_t *dcr_transport_find(const char *name)
{
    return dcr__registry_find(&dcr__registry, name);
}

dcr_status_t dcr_transport_register(const dcr_transport_ops_t *o)
{
    if (o == NULL || o->hdr.version != DCR_TRANSPORT_OPS_VERSION || o->hdr.name == NULL ||
        o->hdr.name[0] == '\0' || o->create == NULL || o->open_attempt == NULL || o->send == NULL ||
        o->finish == NULL || o->recv == NULL || o->release == NULL || o->stop_and_wait == NULL ||
        o->reference == NULL || o->counters == NULL || o->destroy == NULL) {
        return dcr_error_set(DCR_EINVAL,
                             "transport_register: a backend needs version %d, a name and every "
                             "slot but payload_key_changed",
                             DCR_TRANSPORT_OPS_VERSION);
    }
    return dcr__registry_add(&dcr__registry, o);
}

/* ---- configuration ------------------------------------------------------ */

static dcr_status_t dcr__check_rate(const char *what, double v, double max)
{
    if (!isfinite(v) || v < 0 || v > max) {
        return dcr_error_set(DCR_EINVAL, "link %s %g: expected a number in [0, %g] (0: unlimited)",
                             what, v, max);
    }
    return DCR_OK;
}

static dcr_status_t dcr__check_link(const dcr_link_config_t *l)
{
    DCR_CHECK(dcr__check_rate("cross_gbps", l->cross_gbps, 1e6));
    DCR_CHECK(dcr__check_rate("flow_gbps", l->flow_gbps, 1e6));
    DCR_CHECK(dcr__check_rate("local_gbps", l->local_gbps, 1e6));
    if (!isfinite(l->latency_ms) || l->latency_ms < 0 || l->latency_ms > 60000) {
        return dcr_error_set(DCR_EINVAL, "link latency_ms %g: expected a number in [0, 60000]",
                             l->latency_ms);
    }
    return DCR_OK;
}

/* Validates cfg for backend `name` into *out_p, filling defaults. */
static dcr_status_t dcr__check_config(const dcr_transport_ops_t *ops,
                                      const dcr_transport_config_t *cfg,
                                      dcr_transport_config_t *out_p)
{
    if (cfg->train_nodes < 1 || cfg->train_nodes > DCR__TRANSPORT_NODES_MAX) {
        return dcr_error_set(DCR_EINVAL, "transport train_nodes %d: expected 1..%d",
                             cfg->train_nodes, DCR__TRANSPORT_NODES_MAX);
    }
    if (cfg->world < cfg->train_nodes || cfg->world > DCR__TRANSPORT_WORLD_MAX ||
        cfg->world % cfg->train_nodes != 0) {
        return dcr_error_set(
            DCR_EINVAL, "transport world %d: expected a multiple of train_nodes %d, at most %d",
            cfg->world, cfg->train_nodes, DCR__TRANSPORT_WORLD_MAX);
    }
    if (cfg->rollout_nodes < 1 || cfg->rollout_nodes > DCR__TRANSPORT_NODES_MAX) {
        return dcr_error_set(DCR_EINVAL, "transport rollout_nodes %d: expected 1..%d",
                             cfg->rollout_nodes, DCR__TRANSPORT_NODES_MAX);
    }
    DCR_CHECK(dcr__check_link(&cfg->link));
    if (cfg->fanout < 0 || cfg->fanout > DCR__TRANSPORT_NODES_MAX) {
        return dcr_error_set(DCR_EINVAL, "transport fanout %d: expected 1..%d (0: default %d)",
                             cfg->fanout, DCR__TRANSPORT_NODES_MAX, DCR__TRANSPORT_FANOUT_DEFAULT);
    }
    if (cfg->queue_payloads > ((size_t)1 << 20)) {
        return dcr_error_set(DCR_EINVAL,
                             "transport queue_payloads %zu: expected 1..%zu (0: default %d)",
                             cfg->queue_payloads, (size_t)1 << 20, DCR__TRANSPORT_QUEUE_DEFAULT);
    }
    if (ops->props.durable_store && (cfg->dir == NULL || cfg->dir[0] == '\0')) {
        return dcr_error_set(DCR_EINVAL,
                             "transport %s: dir (the store: a directory or "
                             "s3://BUCKET/PREFIX) is required",
                             ops->hdr.name);
    }
    if (cfg->owner_count < 0 || cfg->owner_first < 0 || cfg->owner_first > cfg->world ||
        cfg->owner_count > cfg->world - cfg->owner_first) {
        return dcr_error_set(DCR_EINVAL,
                             "transport owners [%d, +%d): expected a range of [0, world %d)",
                             cfg->owner_first, cfg->owner_count, cfg->world);
    }
    bool split = cfg->join || cfg->send_only || cfg->owner_count > 0;
    if (split && !ops->props.split_handles) {
        return dcr_error_set(DCR_EINVAL,
                             "transport %s: join, owner subsets and send_only need a backend "
                             "with split handles (objstore; the relay tree lives in one handle)",
                             ops->hdr.name);
    }
    *out_p = *cfg;
    if (out_p->fanout == 0) out_p->fanout = DCR__TRANSPORT_FANOUT_DEFAULT;
    if (out_p->queue_payloads == 0) out_p->queue_payloads = DCR__TRANSPORT_QUEUE_DEFAULT;
    return DCR_OK;
}

/* ---- common handle part ------------------------------------------------- */

dcr_status_t dcr__tbase_init(dcr__tbase_t *b, const dcr_transport_config_t *cfg)
{
    b->cfg = *cfg;
    b->cfg.dir = NULL;
    b->cfg.s3_endpoint = NULL;
    if (cfg->dir != NULL) {
        b->dir = strdup(cfg->dir);
        if (b->dir == NULL) return dcr_error_set(DCR_ENOMEM, "transport: copying dir");
        b->cfg.dir = b->dir;
    }
    if (cfg->s3_endpoint != NULL) {
        b->s3_endpoint = strdup(cfg->s3_endpoint);
        if (b->s3_endpoint == NULL) return dcr_error_set(DCR_ENOMEM, "transport: copying endpoint");
        b->cfg.s3_endpoint = b->s3_endpoint;
    }
    return dcr__links_create(&cfg->link, cfg->train_nodes, cfg->rollout_nodes, &b->links);
}

void dcr__tbase_fini(dcr__tbase_t *b)
{
    dcr__links_destroy(b->links);
    b->links = NULL;
    free(b->dir);
    b->dir = NULL;
    free(b->s3_endpoint);
    b->s3_endpoint = NULL;
}

void dcr__tbase_counters(dcr__tbase_t *b, dcr_transport_counters_t *out_p)
{
    out_p->payload_bytes = atomic_load(&b->count.payload_bytes);
    out_p->cross_bytes = atomic_load(&b->count.cross_bytes);
    out_p->local_bytes = atomic_load(&b->count.local_bytes);
    out_p->dropped_stale = atomic_load(&b->count.dropped_stale);
    out_p->rejected = atomic_load(&b->count.rejected);
    out_p->unauthenticated = atomic_load(&b->count.unauthenticated);
}

void dcr__tbase_refused(dcr__tbase_t *b, bool unauthenticated)
{
    atomic_fetch_add(&b->count.rejected, 1);
    if (unauthenticated) atomic_fetch_add(&b->count.unauthenticated, 1);
}

int dcr__tbase_train_node(const dcr__tbase_t *b, int owner)
{
    return owner / (b->cfg.world / b->cfg.train_nodes);
}

dcr_status_t dcr__payload_check_send(dcr__tbase_t *b, uint64_t tau, int owner, uint64_t payload_id,
                                     const uint8_t *buf, size_t len, dcr_payload_header_t *hdr_p)
{
    dcr_payload_header_t h;
    dcr_status_t st = dcr_payload_peek(buf, len, false, &h);
    if (st != DCR_OK) {
        dcr__tbase_refused(b, false); /* a header read without the digest */
        dcr_error_prefix("owner %d payload %" PRIu64 " not sent: ", owner, payload_id);
        return st;
    }
    if (h.tau != tau) {
        atomic_fetch_add(&b->count.dropped_stale, 1);
        return dcr_error_set(DCR_ECLOSED,
                             "owner %d payload %" PRIu64 " of attempt %" PRIu64
                             " dropped: attempt %" PRIu64 " is open",
                             owner, payload_id, h.tau, tau);
    }
    if (h.owner != (uint32_t)owner || h.payload_id != payload_id) {
        return dcr_error_set(DCR_EINVAL,
                             "owner %d payload %" PRIu64 ": header names owner %" PRIu32
                             " payload %" PRIu64 "; expected the sender's",
                             owner, payload_id, h.owner, h.payload_id);
    }
    if (len > DCR__TRANSPORT_PAYLOAD_MAX) {
        return dcr_error_set(DCR_EINVAL, "owner %d payload %" PRIu64 ": %zu bytes exceed %" PRIu64,
                             owner, payload_id, len, DCR__TRANSPORT_PAYLOAD_MAX);
    }
    *hdr_p = h;
    return DCR_OK;
}

/* ---- ledger ------------------------------------------------------------- */

dcr_status_t dcr__ledger_init(dcr__ledger_t *l, int world)
{
    *l = (dcr__ledger_t){.world = world};
    l->sent = calloc((size_t)world, sizeof *l->sent);
    l->finished = calloc((size_t)world, sizeof *l->finished);
    if (l->sent == NULL || l->finished == NULL) {
        dcr__ledger_fini(l);
        return dcr_error_set(DCR_ENOMEM, "transport ledger for %d owners", world);
    }
    return DCR_OK;
}

void dcr__ledger_fini(dcr__ledger_t *l)
{
    free(l->e);
    free(l->sent);
    free(l->finished);
    *l = (dcr__ledger_t){0};
}

void dcr__ledger_reset(dcr__ledger_t *l)
{
    l->n = 0;
    l->nfinished = 0;
    memset(l->sent, 0, (size_t)l->world * sizeof *l->sent);
    memset(l->finished, 0, (size_t)l->world * sizeof *l->finished);
}

dcr_status_t dcr__ledger_check(const dcr__ledger_t *l, uint64_t tau, int owner, uint64_t id)
{
    if (l->finished[owner]) {
        return dcr_error_set(
            DCR_EINVAL, "owner %d payload %" PRIu64 ": the owner already finished attempt %" PRIu64,
            owner, id, tau);
    }
    /* Linear: an attempt holds hundreds of payloads (the seed's 120B refit:
     * 482), and the scan runs once per payload. */
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].owner == (uint32_t)owner && l->e[i].id == id) {
            return dcr_error_set(DCR_EINVAL,
                                 "owner %d payload %" PRIu64 " was already sent in attempt %" PRIu64
                                 "; payload ids are unique per attempt and owner",
                                 owner, id, tau);
        }
    }
    return DCR_OK;
}

dcr_status_t dcr__ledger_add(dcr__ledger_t *l, int owner, const dcr_payload_header_t *h,
                             uint64_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        dcr__ledger_entry_t *e = realloc(l->e, cap * sizeof *e);
        if (e == NULL) return dcr_error_set(DCR_ENOMEM, "transport ledger: %zu entries", cap);
        l->e = e;
        l->cap = cap;
    }
    dcr__ledger_entry_t *e = &l->e[l->n++];
    e->owner = (uint32_t)owner;
    e->id = h->payload_id;
    e->len = len;
    memcpy(e->digest, h->digest, sizeof e->digest);
    l->sent[owner]++;
    return DCR_OK;
}

dcr_status_t dcr__ledger_finish(dcr__ledger_t *l, uint64_t tau, int owner, uint64_t npayloads,
                                bool *all_p)
{
    if (l->finished[owner]) {
        return dcr_error_set(DCR_EINVAL, "owner %d already finished attempt %" PRIu64, owner, tau);
    }
    if (l->sent[owner] != npayloads) {
        return dcr_error_set(DCR_EINVAL,
                             "owner %d finished attempt %" PRIu64 " with %" PRIu64
                             " payloads, but the transport queued %" PRIu64 " from it",
                             owner, tau, npayloads, l->sent[owner]);
    }
    l->finished[owner] = true;
    l->nfinished++;
    *all_p = l->nfinished == l->world;
    return DCR_OK;
}

/* ---- wrappers ----------------------------------------------------------- */

static dcr_status_t dcr__check_owner(const dcr_transport_t *t, const char *op, int owner)
{
    if (t == NULL) return dcr_error_set(DCR_EINVAL, "transport %s: t is NULL", op);
    int world = t->world;
    if (owner < 0 || owner >= world) {
        return dcr_error_set(DCR_EINVAL, "transport %s: owner %d out of range 0..%d", op, owner,
                             world - 1);
    }
    if (t->owner_count > 0 && (owner < t->owner_first || owner >= t->owner_first + t->owner_count))
        return dcr_error_set(DCR_EINVAL,
                             "transport %s: owner %d is not served by this handle (owners %d..%d)",
                             op, owner, t->owner_first, t->owner_first + t->owner_count - 1);
    return DCR_OK;
}

static dcr_status_t dcr__check_node(const dcr_transport_t *t, const char *op, int node)
{
    if (t == NULL) return dcr_error_set(DCR_EINVAL, "transport %s: t is NULL", op);
    int nodes = t->rollout_nodes;
    if (t->send_only)
        return dcr_error_set(DCR_EINVAL, "transport %s: this handle serves no rollout node", op);
    if (node < 0 || node >= nodes) {
        return dcr_error_set(DCR_EINVAL, "transport %s: rollout node %d out of range 0..%d", op,
                             node, nodes - 1);
    }
    return DCR_OK;
}

dcr_status_t dcr_transport_create(const char *name, const dcr_transport_config_t *cfg,
                                  dcr_transport_t **out_p)
{
    if (name == NULL || cfg == NULL || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "transport_create: name, cfg and out_p are required");
    }
    const dcr_transport_ops_t *ops = dcr_transport_find(name);
    if (ops == NULL) return dcr__registry_not_found(&dcr__registry, name);
    dcr_transport_config_t c;
    DCR_CHECK(dcr__check_config(ops, cfg, &c));
    dcr_transport_t *t = NULL;
    DCR_CHECK(ops->create(ops, &c, &t));
    t->ops = ops;
    t->train_nodes = c.train_nodes;
    t->world = c.world;
    t->rollout_nodes = c.rollout_nodes;
    t->owner_first = c.owner_first;
    t->owner_count = c.owner_count;
    t->send_only = c.send_only;
    dcr_transport_set_payload_key(t, NULL);
    *out_p = t;
    return DCR_OK;
}

dcr_status_t dcr_transport_open_attempt(dcr_transport_t *t, uint64_t tau)
{
    if (t == NULL) return dcr_error_set(DCR_EINVAL, "transport open_attempt: t is NULL");
    if (tau == 0)
        return dcr_error_set(DCR_EINVAL, "transport open_attempt: tau 0 is not an attempt id");
    return t->ops->open_attempt(t, tau);
}

dcr_status_t dcr_transport_send(dcr_transport_t *t, int owner, uint64_t payload_id,
                                const uint8_t *buf, size_t len)
{
    DCR_CHECK(dcr__check_owner(t, "send", owner));
    if (buf == NULL)
        return dcr_error_set(DCR_EINVAL, "transport send: owner %d: buf is NULL", owner);
    return t->ops->send(t, owner, payload_id, buf, len);
}

dcr_status_t dcr_transport_finish(dcr_transport_t *t, int owner, uint64_t npayloads)
{
    DCR_CHECK(dcr__check_owner(t, "finish", owner));
    return t->ops->finish(t, owner, npayloads);
}

dcr_status_t dcr_transport_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p)
{
    DCR_CHECK(dcr__check_node(t, "recv", node));
    if (out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "transport recv: node %d: out_p is NULL", node);
    return t->ops->recv(t, node, timeout_ms, out_p);
}

void dcr_transport_release(dcr_transport_t *t, int node, dcr_delivery_t *d)
{
    if (t == NULL || d == NULL || d->handle == NULL) return;
    t->ops->release(t, node, d);
    *d = (dcr_delivery_t){0};
}

void dcr_transport_stop_and_wait(dcr_transport_t *t)
{
    if (t != NULL) t->ops->stop_and_wait(t);
}

dcr_status_t dcr_transport_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                     double *seconds_p)
{
    if (t == NULL || per_node_bytes == NULL || seconds_p == NULL) {
        return dcr_error_set(DCR_EINVAL,
                             "transport reference: t, per_node_bytes and seconds_p are required");
    }
    for (int i = 0; i < t->train_nodes; i++) {
        if (per_node_bytes[i] < 0) {
            return dcr_error_set(DCR_EINVAL,
                                 "transport reference: training node %d has %" PRId64
                                 " bytes; expected >= 0",
                                 i, per_node_bytes[i]);
        }
    }
    return t->ops->reference(t, per_node_bytes, seconds_p);
}

void dcr_transport_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p)
{
    if (t == NULL || out_p == NULL) return;
    t->ops->counters(t, out_p);
}

void dcr_transport_destroy(dcr_transport_t *t)
{
    if (t == NULL) return;
    t->ops->destroy(t);
}

const char *dcr_transport_name(const dcr_transport_t *t)
{
    return t == NULL ? NULL : t->ops->hdr.name;
}

const dcr_transport_props_t *dcr_transport_props(const dcr_transport_t *t)
{
    return t == NULL ? NULL : &t->ops->props;
}

void dcr_transport_set_payload_key(dcr_transport_t *t, const dcr_payload_key_t *key)
{
    if (t == NULL) return;
    memset(&t->payload_policy, 0, sizeof t->payload_policy);
    if (key != NULL && key->set) {
        t->payload_key = *key;
        t->payload_policy.key = &t->payload_key;
    } else {
        memset(&t->payload_key, 0, sizeof t->payload_key);
    }
    if (t->ops->payload_key_changed != NULL) t->ops->payload_key_changed(t, key);
}
