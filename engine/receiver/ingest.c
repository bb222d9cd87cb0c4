/* Payloads in: validation, deduplication by (tau, owner, payload id),
 * attempt filtering, decoding, and the staging queue (32 resident groups of
 * at most 8 decoded payloads plus one group under assembly).
 *
 * Nothing of a payload is applied unless the whole payload validated: the
 * codec checks the bytes, and every item is held to the receiver's inventory
 * and prewarm classes before the first record is written. */
#include <stdlib.h>
#include <string.h>

#include "receiver-internal.h"

/* ---- duplicate set ---- */

/* Payload ids are per owner, so an id may repeat across owners: the set maps
 * id -> owner with repeated keys, and a lookup matches the owner. */
static int dcr__owner_match(uint64_t owner, const void *arg)
{
    return owner == *(const uint32_t *)arg;
}

static bool dcr__dedup_has(const dcr_map_t *d, uint32_t owner, uint64_t id)
{
    return dcr_map_get(d, id, dcr__owner_match, &owner, NULL);
}

static dcr_status_t dcr__dedup_add(dcr_map_t *d, uint32_t owner, uint64_t id)
{
    return dcr_map_add(d, id, owner);
}

/* ---- admission ---- */

void dcr_receiver_set_payload_key(dcr_receiver_t *r, const dcr_payload_key_t *key)
{
    if (r == NULL) return;
    if (key != NULL && key->set) {
        r->key = *key;
        r->policy.key = &r->key;
    } else {
        memset(&r->key, 0, sizeof r->key);
        r->policy.key = NULL;
    }
}

/* Counts a refused payload; an authentication failure also in its own
 * counter, so a forgery shows apart from corruption. */
static dcr_status_t dcr__refuse(dcr_receiver_t *r, dcr_status_t st, const void *buf, size_t len)
{
    r->stats.rejected++;
    if (dcr_payload_auth_failure(st, buf, len, r->policy.key)) r->stats.unauthenticated++;
    return st;
}

/* Items per tensor a legitimate payload may hold: one per conversion task
 * of the owner that maps into the tensor (in practice one or two). */
#define DCR__ITEMS_PER_TENSOR 4
/* What the format costs per item beyond its words (FORMAT.md sections 2
 * and 3): the item table entry and the name's NUL. */
#define DCR__ITEM_ENTRY 96
#define DCR__BODY_HEAD  24

/* The largest raw body a payload for this inventory can need: every tensor
 * with every element changed, at the widest gap words (8 bytes), in up to
 * DCR__ITEMS_PER_TENSOR items. An owner's records for one tensor are
 * disjoint, so no honest payload is larger; a larger one is refused from
 * its header before its body is allocated (dcr_payload_policy_t.max_raw). */
static uint64_t dcr__raw_bound(const dcr_inventory_t *inv)
{
    uint64_t total = DCR__BODY_HEAD;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        uint64_t numel = (uint64_t)dcr_desc_numel(d);
        if (numel > DCR_CODEC_RAW_MAX / 16) return DCR_CODEC_RAW_MAX;
        uint64_t per = numel * ((uint64_t)dcr_dtype_size(d->dtype) + 8) +
                       DCR__ITEMS_PER_TENSOR * (DCR__ITEM_ENTRY + strlen(d->name) + 1);
        if (per > DCR_CODEC_RAW_MAX - total) return DCR_CODEC_RAW_MAX;
        total += per;
    }
    return total;
}

uint64_t dcr_receiver_payload_bound(const dcr_receiver_t *r)
{
    return dcr__raw_bound(r->inv);
}

/* Header check and disposition; *admit_p is true when the payload is new
 * for the current attempt. */
static dcr_status_t dcr__admit(dcr_receiver_t *r, const void *buf, size_t len,
                               dcr_payload_header_t *hdr, dcr_ingest_t *disp, bool *admit_p)
{
    if (r->plans == NULL || !r->prewarmed)
        return dcr_error_set(DCR_EINVAL, "receiver: payload before a successful prewarm");
    /* The inventory is fixed for the receiver's life: bound every decode
     * by it once (the policy is also what dcr_payload_decode_admitted gets). */
    if (r->policy.max_raw == 0) r->policy.max_raw = dcr__raw_bound(r->inv);
    dcr_status_t st = dcr_payload_verify(buf, len, &r->policy, hdr);
    if (st != DCR_OK) return dcr__refuse(r, st, buf, len);
    r->stats.payloads_in++;
    *admit_p = false;
    if (!r->attempt_begun || hdr->tau > r->tau) {
        r->stats.foreign++;
        *disp = DCR_INGEST_FOREIGN;
    } else if (hdr->tau < r->tau) {
        r->stats.stale++;
        *disp = DCR_INGEST_STALE;
    } else if (dcr__dedup_has(&r->dedup, hdr->owner, hdr->payload_id)) {
        r->stats.duplicates++;
        *disp = DCR_INGEST_DUPLICATE;
    } else {
        *disp = DCR_INGEST_ACCEPTED;
        *admit_p = true;
    }
    return DCR_OK;
}

/* Room for the canonical index of every item of a payload. */
static dcr_status_t dcr__item_room(dcr_receiver_t *r, size_t n)
{
    if (n <= r->item_cap) return DCR_OK;
    size_t *c = realloc(r->item_c, n * sizeof(*c));
    if (c == NULL) return dcr_error_set(DCR_ENOMEM, "apply: item table of %zu", n);
    r->item_c = c;
    r->item_cap = n;
    return DCR_OK;
}

/* Every item of a decoded payload against the inventory and this rank's
 * classes, before anything is applied; each item's canonical tensor is kept
 * in r->item_c for the apply (one name lookup per item). */
static dcr_status_t dcr__validate(dcr_receiver_t *r, const dcr_payload_t *p)
{
    const dcr_payload_header_t *h = dcr_payload_get_header(p);
    DCR_CHECK(dcr__item_room(r, dcr_payload_item_count(p)));
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_payload_item_t it;
        DCR_CHECK(dcr_payload_item(p, i, &it));
        int64_t c = dcr_inventory_find(r->inv, it.name);
        const dcr_tensor_desc_t *d = c < 0 ? NULL : dcr_inventory_at(r->inv, (size_t)c);
        const char *why = NULL;
        if (d == NULL)
            why = "is not in the receiver's inventory";
        else if (d->dtype != it.dtype)
            why = "has another dtype than the inventory";
        else if (d->ndim != it.ndim ||
                 memcmp(d->shape, it.shape, sizeof(int64_t) * (size_t)d->ndim))
            why = "has another shape than the inventory";
        else if (it.encoding == DCR_ENCODING_XOR && r->plans[c].info.cls != DCR_PATH_XOR &&
                 r->plans[c].info.cls != DCR_PATH_SKIPPED)
            why = "is XOR but this rank's loader path is overwrite-only";
        if (why)
            return dcr_error_set(DCR_EPAYLOAD,
                                 "payload (tau %llu, owner %u, id %llu): item %zu (%s) %s",
                                 (unsigned long long)h->tau, h->owner,
                                 (unsigned long long)h->payload_id, i, it.name, why);
        r->item_c[i] = (size_t)c;
    }
    return DCR_OK;
}

/* Item i of p, whose canonical tensor is c: its indices decoded, then
 * applied (values read in place: every apply path reads words bytewise,
 * which saves a copy of them per item). */
static dcr_status_t dcr__apply_item_at(dcr_receiver_t *r, const dcr_payload_t *p, size_t i,
                                       size_t c)
{
    if (r->plans[c].info.cls == DCR_PATH_SKIPPED) {
        r->stats.items_skipped++;
        return DCR_OK;
    }
    dcr_payload_item_t it;
    DCR_CHECK(dcr_payload_item(p, i, &it));
    if (it.count > r->dec_cap) {
        int64_t *idx = realloc(r->dec_idx, it.count * sizeof(*idx));
        if (idx == NULL) return dcr_error_set(DCR_ENOMEM, "apply: decode buffers");
        r->dec_idx = idx;
        r->dec_cap = it.count;
    }
    DCR_CHECK(dcr_payload_item_indices(p, i, r->dec_idx));
    return dcr__apply_records(r, c, it.encoding, r->dec_idx, it.values, it.count);
}

dcr_status_t dcr_receiver_apply_item(dcr_receiver_t *r, const dcr_payload_t *p, size_t i)
{
    if (r == NULL || p == NULL) return dcr_error_set(DCR_EINVAL, "apply_item: NULL argument");
    if (!r->prewarmed) return dcr_error_set(DCR_EINVAL, "apply_item: receiver not prewarmed");
    dcr_payload_item_t it;
    DCR_CHECK(dcr_payload_item(p, i, &it));
    int64_t c = dcr_inventory_find(r->inv, it.name);
    if (c < 0) return dcr_error_set(DCR_EPAYLOAD, "item %s is not in the inventory", it.name);
    return dcr__apply_item_at(r, p, i, (size_t)c);
}

/* Applies a validated, decoded payload of the current attempt. */
static dcr_status_t dcr__apply_decoded(dcr_receiver_t *r, const dcr_payload_t *p)
{
    if (r->attempt_failed)
        return dcr_error_set(DCR_EATTEMPT, "receiver: attempt %llu has failed; waiting for a retry",
                             (unsigned long long)r->tau);
    DCR_CHECK(dcr__validate(r, p));
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_status_t st = dcr__apply_item_at(r, p, i, r->item_c[i]);
        if (st != DCR_OK) {
            /* Some writes may have landed: only an overwrite retry repairs
             * that. Work already queued stays queued: the next settle (the
             * retry's begin_attempt) or a read of resident bytes drains it. */
            r->attempt_failed = true;
            /* Queued items of a failed attempt never count as applied. */
            r->pend_items = r->pend_records = r->pend_payloads = 0;
            return st;
        }
    }
    r->pend_payloads++;
    return DCR_OK;
}

dcr_status_t dcr_receiver_sync(dcr_receiver_t *r)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "receiver_sync: NULL receiver");
    return dcr__settle(r);
}

dcr_status_t dcr_receiver_apply_payload(dcr_receiver_t *r, const void *buf, size_t len,
                                        dcr_ingest_t *disposition_p)
{
    if (r == NULL || buf == NULL) return dcr_error_set(DCR_EINVAL, "apply_payload: NULL argument");
    dcr_payload_header_t hdr;
    dcr_ingest_t disp = DCR_INGEST_ACCEPTED;
    bool admit = false;
    DCR_CHECK(dcr__admit(r, buf, len, &hdr, &disp, &admit));
    if (admit) {
        /* dcr__admit verified the digest of buf under r->policy: not again. */
        dcr_status_t st = dcr_payload_decode_admitted(r->direct, buf, len, &r->policy);
        if (st != DCR_OK) return dcr__refuse(r, st, buf, len);
        /* Recorded before applying: a retransmission after a failure must
         * not XOR the same masks in twice. */
        DCR_CHECK(dcr__dedup_add(&r->dedup, hdr.owner, hdr.payload_id));
        DCR_CHECK(dcr__apply_decoded(r, r->direct));
        /* The one sync of this payload's items: it applied when this
         * returns, so the caller may acknowledge it. */
        DCR_CHECK(dcr__settle(r));
    }
    if (disposition_p) *disposition_p = disp;
    return DCR_OK;
}

/* ---- staging ---- */

void dcr__staging_drop(dcr_receiver_t *r)
{
    void *g;
    while (dcr_queue_pop(r->ready_q, 0, &g) == DCR_OK) {
        ((dcr__group_t *)g)->n = 0;
        (void)dcr_queue_push(r->free_q, g, 0);
    }
    if (r->assembling) {
        r->assembling->n = 0;
        (void)dcr_queue_push(r->free_q, r->assembling, 0);
        r->assembling = NULL;
    }
    atomic_store(&r->staged, 0);
}

/* A group for the next payload: the one under assembly while it has room;
 * a full one must first join the resident groups, which blocks while all 32
 * are taken (back-pressure). */
static dcr_status_t dcr__group_for_next(dcr_receiver_t *r, int timeout_ms)
{
    if (r->assembling && r->assembling->n == DCR_STAGE_GROUP_SIZE) {
        dcr_status_t st = dcr_queue_push(r->ready_q, r->assembling, timeout_ms);
        if (st == DCR_ETIMEOUT)
            return dcr_error_set(DCR_ETIMEOUT, "ingest: all %d resident staging groups are taken",
                                 DCR_STAGE_GROUPS);
        DCR_CHECK(st);
        r->assembling = NULL;
    }
    if (r->assembling) return DCR_OK;
    void *g;
    dcr_status_t st = dcr_queue_pop(r->free_q, timeout_ms, &g);
    if (st == DCR_ETIMEOUT) return dcr_error_set(DCR_ETIMEOUT, "ingest: no free staging group");
    DCR_CHECK(st);
    r->assembling = g;
    return DCR_OK;
}

dcr_status_t dcr_receiver_ingest(dcr_receiver_t *r, const void *buf, size_t len, int timeout_ms,
                                 dcr_ingest_t *disposition_p)
{
    if (r == NULL || buf == NULL) return dcr_error_set(DCR_EINVAL, "ingest: NULL argument");
    dcr_payload_header_t hdr;
    dcr_ingest_t disp = DCR_INGEST_ACCEPTED;
    bool admit = false;
    DCR_CHECK(dcr__admit(r, buf, len, &hdr, &disp, &admit));
    if (admit) {
        DCR_CHECK(dcr__group_for_next(r, timeout_ms));
        dcr__group_t *g = r->assembling;
        if (g->slots[g->n] == NULL) DCR_CHECK(dcr_payload_create(&g->slots[g->n]));
        /* Digest verified by dcr__admit on this buf under r->policy. */
        dcr_status_t st = dcr_payload_decode_admitted(g->slots[g->n], buf, len, &r->policy);
        if (st != DCR_OK) return dcr__refuse(r, st, buf, len);
        DCR_CHECK(dcr__dedup_add(&r->dedup, hdr.owner, hdr.payload_id));
        g->n++;
        atomic_fetch_add(&r->staged, 1);
        /* Hand a full group over at once when there is room; otherwise it
         * waits as the group under assembly. */
        if (g->n == DCR_STAGE_GROUP_SIZE && dcr_queue_push(r->ready_q, g, 0) == DCR_OK)
            r->assembling = NULL;
    }
    if (disposition_p) *disposition_p = disp;
    return DCR_OK;
}

dcr_status_t dcr_receiver_ingest_flush(dcr_receiver_t *r, int timeout_ms)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "ingest_flush: NULL receiver");
    if (r->assembling == NULL || r->assembling->n == 0) return DCR_OK;
    dcr_status_t st = dcr_queue_push(r->ready_q, r->assembling, timeout_ms);
    if (st == DCR_ETIMEOUT)
        return dcr_error_set(DCR_ETIMEOUT, "ingest_flush: all %d resident staging groups are taken",
                             DCR_STAGE_GROUPS);
    DCR_CHECK(st);
    r->assembling = NULL;
    return DCR_OK;
}

dcr_status_t dcr_receiver_apply_staged(dcr_receiver_t *r, int timeout_ms, size_t *applied_p)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "apply_staged: NULL receiver");
    size_t applied = 0;
    dcr_status_t st = DCR_OK;
    void *gp;
    while (st == DCR_OK && dcr_queue_pop(r->ready_q, timeout_ms, &gp) == DCR_OK) {
        dcr__group_t *g = gp;
        for (size_t s = 0; s < g->n && st == DCR_OK; s++) {
            const dcr_payload_header_t *h = dcr_payload_get_header(g->slots[s]);
            if (h->tau != r->tau) {
                r->stats.stale_dropped++;
            } else {
                st = dcr__apply_decoded(r, g->slots[s]);
                if (st == DCR_OK) applied++;
            }
        }
        /* After a failure the rest of the group is dropped with it: the
         * attempt is failed and only a retry can continue. */
        atomic_fetch_sub(&r->staged, g->n);
        g->n = 0;
        (void)dcr_queue_push(r->free_q, g, 0);
    }
    /* One sync for everything applied in this call. */
    if (st == DCR_OK) st = dcr__settle(r);
    if (applied_p) *applied_p = applied;
    return st;
}

size_t dcr_receiver_staged(dcr_receiver_t *r)
{
    return atomic_load(&r->staged);
}
