/* The object-storage transport, written once against the object-store
 * table (dcr/objstore.h) for every store a URL names (a directory, S3):
 * owners upload each payload once, and every rollout node downloads every
 * payload on its own, so each download crosses the cluster boundary again
 * (V_cross = upload + nodes x download, the seed's (1 + N_node) V_payload).
 * Keys and the manifest format are in objstore_manifest.c. The store makes
 * every put atomic (a visible key holds complete bytes); the emulated links
 * (link.c) pace the bytes of every put and get as they move, and add the
 * per-request latency a real store's durable PUT costs.
 *
 * The manifest is written last, by the last owner's finish, after every
 * payload it lists was stored. Across processes (dcr/transport.h: join,
 * owner subsets, send_only) each handle of owners writes its owners'
 * manifest part once all of them finished, and readers complete the
 * attempt once the parts cover every owner: the union of the parts is the
 * manifest, and each part, like the whole one, follows its payloads.
 *
 * Readers (rollout nodes) never share memory with the training side: each
 * node has OBJ_FLOWS download threads (GETs in flight) that list the
 * attempt's prefix (when the store notifies a change, else by polling),
 * fetch visible payloads through the emulated link, verify them (header,
 * digest, tau, owner and id against the name) and queue them for recv, in
 * discovery order, up to queue_payloads ahead of recv (prefetch). Before
 * the manifest exists a node trusts a verified object whose header matches
 * its name and the open attempt, which lets sync RL apply payloads as they
 * arrive (owners publish nothing that the manifest will not list); once the
 * manifest exists only listed objects with the listed length and digest are
 * delivered. An unlisted object is dropped and counted; one already
 * delivered fails the attempt on that node. A listed object that is missing
 * or corrupt OBJ_LISTED_WAIT_MS after the manifest appeared fails the
 * attempt with DCR_ETRANSPORT naming it, so no reader hangs on it. */
#include "transport/objstore-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/thread.h"
#include "dcr/trace.h"

/* Parallel downloads per rollout node, as an S3 client keeps several GETs in
 * flight. Each GET waits out the link's one-way latency (5 ms by default)
 * before its first byte, while one payload of our scaled runs moves in about
 * a millisecond, so a node needs about (latency + transfer) / transfer flows
 * to keep its link busy; with two it sat idle most of the time and its
 * downloads, not the uploads, set the pace. Large objects (the reference's)
 * are bandwidth-bound either way: the node's rate is shared by all flows. */
#define OBJ_FLOWS 8
/* Listing interval: from 1 ms right after something new appeared, doubling
 * to 8 ms while nothing changes (a LIST per node every 8 ms when idle). Where
 * the directory can notify (inotify), a node lists as soon as an object is
 * published, as an S3 client would on the bucket's event notifications, and
 * the interval only backs that up. */
#define OBJ_POLL_MIN_NS 1000000ull
#define OBJ_POLL_MAX_NS 8000000ull
/* With a watcher the listings follow the publications, and the polls only
 * back up a notification that was missed (a change while the watch moved
 * from the parent folder to the attempt's): their interval doubles from
 * the attempt's open to this, whether or not a listing found something. */
#define OBJ_POLL_NOTIFIED_MAX_NS 32000000ull
/* How long a listed payload may stay missing or corrupt after the manifest
 * appeared. Every listed payload was stored before its manifest was written,
 * so this only absorbs a slow listing; then the attempt fails. */
#define OBJ_LISTED_WAIT_MS 1000
/* Reference objects: a checkpoint share is uploaded as objects of this size,
 * as a checkpoint is saved as many files. */
#define OBJ_REF_OBJECT ((size_t)8 << 20)
/* Reference downloads fetch parts of this size in parallel where the store
 * serves byte ranges, as an S3 client splits a large GET. */
#define OBJ_REF_PART ((size_t)1 << 20)
/* How long the change watcher waits per call before it looks at the node's
 * attempt again (and notices a quit). */
#define OBJ_WATCH_MS 50
/* How long listings of a node's attempt may keep failing (each already
 * retried by the store) before the attempt fails on that node. */
#define OBJ_LIST_FAIL_MS 5000
#define OBJ_WHY          192

/* dcr_objstore_transport_counts: this process's requests to its stores. */
static atomic_uint_fast64_t obj_lists, obj_gets, obj_puts;

static void obj_request(atomic_uint_fast64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

void dcr_objstore_transport_counts(dcr_objstore_counts_t *out_p)
{
    out_p->lists = atomic_load(&obj_lists);
    out_p->gets = atomic_load(&obj_gets);
    out_p->puts = atomic_load(&obj_puts);
}

typedef enum obj_state {
    OBJ_PENDING,  /* visible (or listed), not fetched yet */
    OBJ_FETCHING, /* a download thread is on it */
    OBJ_READY,    /* verified, queued for recv */
    OBJ_HANDED,   /* returned by recv */
    OBJ_BAD,      /* failed verification; retried only if a new version appears */
    OBJ_GONE,     /* not visible */
    OBJ_UNLISTED, /* the manifest does not list it: never delivered */
} obj_state_t;

typedef struct obj_entry {
    uint32_t owner;
    uint64_t id;
    obj_state_t state;
    bool listed;
    bool counted; /* already counted in rejected or dropped_stale by this node */
    bool seen;    /* in the latest listing */
    uint64_t want_len;
    uint8_t want_digest[16];
    uint64_t got_len; /* what was delivered (READY, HANDED) */
    uint8_t got_digest[16];
    uint64_t size;                              /* in the latest listing */
    char version[DCR_OBJSTORE_VERSION_MAX];     /* in the latest listing */
    char bad_version[DCR_OBJSTORE_VERSION_MAX]; /* the version that failed: not fetched again */
    uint64_t bad_size;                          /* ... unless listed with another size */
    char why[OBJ_WHY];
} obj_entry_t;

/* A downloaded payload; the delivery handle. */
typedef struct obj_blob {
    uint32_t owner;
    uint64_t id;
    uint8_t digest[16];
    size_t len;
    uint8_t *data; /* malloc'd by the store's get */
} obj_blob_t;

struct objstore;

/* A manifest object of attempt tau as the store lists it: the whole
 * manifest (count 0) or the part of owners [first, first + count). */
typedef struct obj_mpart {
    int first, count;
    uint64_t size; /* at most DCR__MANIFEST_MAX_BYTES */
    bool exact;    /* size is the listed size: read exactly that */
} obj_mpart_t;

/* Where a node's time went in one attempt (DCR_LOG=info prints it when the
 * attempt closes): when its downloads began and ended, and, between those,
 * how long no download was in flight and why (nothing fetchable was known
 * yet, or the queue ahead of recv was full). The gap between the download
 * span and the bytes' wire time is what the protocol and the emulation cost;
 * "nothing known" is upstream (construction, uploads, listing lag). */
typedef struct obj_timeline {
    uint64_t open_ns;
    uint64_t first_get_ns, last_get_ns; /* 0: none yet */
    uint64_t get_bytes, gets, lists, list_ns;
    uint64_t idle_since_ns; /* when the last download in flight ended; 0: busy or before any */
    bool idle_full;         /* the queue was full when the idle began */
    uint64_t idle_empty_ns, idle_full_ns;
    uint64_t manifest_ns; /* when the manifest was read; 0: not yet */
} obj_timeline_t;

typedef struct obj_node {
    struct objstore *s;
    int idx;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* download threads wait here */
    pthread_cond_t recv_cv; /* recv waits here */
    /* Bumped whenever the attempt changes: aborts downloads in progress and
     * makes their results void. */
    atomic_uint_fast64_t gen;
    bool open;
    bool quit;
    uint64_t tau;
    obj_entry_t *e;
    size_t n, cap;
    obj_blob_t **ready; /* FIFO of verified payloads, at most rcap */
    size_t rcount, rcap;
    size_t fetching;
    bool listing;
    /* The manifest parts of a listing: grown to the longest listing, kept
     * across listings, used only by the one thread listing (lock dropped). */
    obj_mpart_t *parts;
    size_t parts_cap;
    bool changed; /* the watcher saw an object published since the last listing began */
    uint64_t next_list_ns, poll_ns;
    bool have_manifest;
    uint64_t manifest_ns;
    uint64_t mbad_ns; /* when the manifest was first found unreadable; 0: not yet */
    uint64_t lbad_ns; /* when listings began to fail; 0: the last one succeeded */
    size_t listed, handed_listed;
    dcr_status_t err;
    char errmsg[512];
    pthread_t th[OBJ_FLOWS];
    int nth;
    /* Change notification, where the store offers it (else polling only). */
    pthread_t watcher;
    bool have_watcher;
    obj_timeline_t tl; /* the open attempt's, logged when it closes */
} obj_node_t;

typedef struct objstore {
    dcr__tbase_t base;
    dcr_objstore_t *store;
    /* training side */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* inflight reached 0 */
    atomic_uint_fast64_t gen;
    bool open;
    bool have_prefix; /* attempt-<tau>/ may hold objects of ours */
    uint64_t tau, last_tau;
    int inflight;
    dcr__ledger_t ledger;
    atomic_uint seq;        /* reference names */
    char manifest_name[48]; /* "MANIFEST", or this handle's part (owner subset) */
    /* rollout side */
    obj_node_t *nodes;
    int nnodes; /* rollout_nodes, or 0 for a send_only handle */
} objstore_t;

/* ---- store access ------------------------------------------------------- */

/* Stores pace in pieces of at most DCR_OBJSTORE_PACE_CHUNK bytes, which
 * dcr__flow_pace takes as one booking when it is at most a link chunk. */
_Static_assert(DCR_OBJSTORE_PACE_CHUNK <= DCR__LINK_CHUNK, "pacing pieces above a link chunk");

/* Pacing hook of the store's transfers: one emulated flow. */
static dcr_status_t obj_pace(void *ctx, size_t n)
{
    if (dcr__flow_pace(ctx, n) != DCR_OK)
        return dcr_error_set(DCR_ECLOSED, "objstore: transfer stopped: the attempt was stopped");
    return DCR_OK;
}

/* Reads the `size` bytes a listing showed for key into a malloc'd buffer.
 * Where the store serves byte ranges this is a ranged GET of exactly those
 * bytes, which leaves the store's whole-object check (S3: the body's MD5
 * against the ETag) to the caller, who verifies every byte itself (a
 * payload's digest against its header and the manifest, a manifest's strict
 * parse). That check misfires on s3rver: a listing or GET that meets an
 * object while its upload still streams in makes s3rver hash the partial
 * file and store that hash as the object's ETag, which can land after the
 * upload's own and then stays; every whole GET of the intact object then
 * fails its MD5 check, and under load that failed 2 of 5 testbed attempts
 * (a dense restore and a retry each, 12-14 s). */
static dcr_status_t obj_get_listed(objstore_t *s, const char *key, uint64_t size,
                                   const dcr_objstore_pace_t *pace, uint8_t **data_p, size_t *len_p)
{
    if (!dcr_objstore_props(s->store)->ranged_get || size == 0)
        return dcr_objstore_get(s->store, key, (size_t)size, pace, data_p, len_p);
    uint8_t *buf = malloc((size_t)size);
    if (buf == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: %s: %" PRIu64 " bytes", key, size);
    dcr_status_t st = dcr_objstore_get_range(s->store, key, 0, (size_t)size, buf, pace);
    if (st != DCR_OK) {
        free(buf);
        return st;
    }
    *data_p = buf;
    *len_p = (size_t)size;
    return DCR_OK;
}

/* "<attempt prefix><name>" into out. */
static void obj_key(uint64_t tau, const char *name, char *out, size_t cap)
{
    char prefix[64];
    dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
    snprintf(out, cap, "%s%s", prefix, name);
}

/* Removes every object of attempt tau's prefix; failures are logged (a
 * later attempt ignores leftovers of another tau anyway). */
static void obj_remove_attempt(objstore_t *s, uint64_t tau)
{
    char prefix[64];
    dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
    if (dcr_objstore_delete_prefix(s->store, prefix) != DCR_OK)
        DCR_LOG_WARN("objstore: removing %s of %s: %s", prefix, s->base.dir, dcr_error_detail());
}

/* ---- rollout side: entries and the ready queue (node lock held) --------- */

static void obj_blob_free(obj_blob_t *b)
{
    if (b == NULL) return;
    free(b->data);
    free(b);
}

static obj_entry_t *obj_find(obj_node_t *nd, uint32_t owner, uint64_t id)
{
    for (size_t i = 0; i < nd->n; i++) {
        if (nd->e[i].owner == owner && nd->e[i].id == id) return &nd->e[i];
    }
    return NULL;
}

static obj_entry_t *obj_add(obj_node_t *nd, uint32_t owner, uint64_t id)
{
    if (nd->n == nd->cap) {
        size_t cap = nd->cap ? 2 * nd->cap : 64;
        obj_entry_t *e = realloc(nd->e, cap * sizeof *e);
        if (e == NULL) return NULL;
        nd->e = e;
        nd->cap = cap;
    }
    obj_entry_t *e = &nd->e[nd->n++];
    *e = (obj_entry_t){.owner = owner, .id = id, .state = OBJ_PENDING};
    return e;
}

static void obj_fail(obj_node_t *nd, dcr_status_t st, const char *msg)
{
    if (nd->err != DCR_OK) return;
    nd->err = st;
    snprintf(nd->errmsg, sizeof nd->errmsg, "%s", msg);
    pthread_cond_broadcast(&nd->recv_cv);
}

/* Counts entry e once per node: as dropped when stale (another attempt's),
 * else as refused (dcr__tbase_refused: rejected, and unauthenticated too
 * when refused for its keying or keyed digest). */
static void obj_count(obj_node_t *nd, obj_entry_t *e, bool stale, bool unauthenticated)
{
    if (e->counted) return;
    e->counted = true;
    if (stale)
        atomic_fetch_add(&nd->s->base.count.dropped_stale, 1);
    else
        dcr__tbase_refused(&nd->s->base, unauthenticated);
}

/* Takes the queued payload (owner, id) out of the ready queue and frees it. */
static void obj_unready(obj_node_t *nd, const obj_entry_t *e)
{
    for (size_t i = 0; i < nd->rcount; i++) {
        if (nd->ready[i]->owner != e->owner || nd->ready[i]->id != e->id) continue;
        obj_blob_free(nd->ready[i]);
        memmove(&nd->ready[i], &nd->ready[i + 1], (nd->rcount - i - 1) * sizeof *nd->ready);
        nd->rcount--;
        return;
    }
}

static bool obj_done(const obj_node_t *nd)
{
    return nd->have_manifest && nd->handed_listed == nd->listed;
}

static double obj_ms_after(uint64_t t, uint64_t since)
{
    return t >= since ? (double)(t - since) * 1e-6 : 0.0;
}

/* Logs the closing attempt's timeline (lock held); see obj_timeline_t. */
static void obj_timeline_log(const obj_node_t *nd)
{
    const obj_timeline_t *tl = &nd->tl;
    if (!nd->open || tl->gets == 0) return;
    const dcr__links_t *l = nd->s->base.links;
    double ns_per_byte =
        l != NULL && nd->idx < l->rollout_nodes ? l->roll_cross[nd->idx].ns_per_byte : 0.0;
    DCR_LOG_INFO(
        "objstore: node %d attempt %" PRIu64 ": %" PRIu64 " GETs, %" PRIu64
        " bytes (wire %.1f ms) from %.1f to %.1f ms after the open; no GET in flight "
        "%.1f ms with nothing to fetch, %.1f ms with the queue full; %" PRIu64
        " lists (%.1f ms); manifest at %.1f ms",
        nd->idx, nd->tau, tl->gets, tl->get_bytes, (double)tl->get_bytes * ns_per_byte * 1e-6,
        obj_ms_after(tl->first_get_ns, tl->open_ns), obj_ms_after(tl->last_get_ns, tl->open_ns),
        (double)tl->idle_empty_ns * 1e-6, (double)tl->idle_full_ns * 1e-6, tl->lists,
        (double)tl->list_ns * 1e-6, obj_ms_after(tl->manifest_ns, tl->open_ns));
}

/* A download begins (lock held): closes the idle interval before it. */
static void obj_timeline_get_begins(obj_node_t *nd, uint64_t now)
{
    obj_timeline_t *tl = &nd->tl;
    if (tl->first_get_ns == 0) tl->first_get_ns = now;
    if (nd->fetching > 0 || tl->idle_since_ns == 0) return;
    uint64_t idle = now - tl->idle_since_ns;
    if (tl->idle_full)
        tl->idle_full_ns += idle;
    else
        tl->idle_empty_ns += idle;
    tl->idle_since_ns = 0;
}

/* A download ended (lock held, after its payload was queued or not). */
static void obj_timeline_get_ends(obj_node_t *nd, uint64_t now, uint64_t bytes)
{
    obj_timeline_t *tl = &nd->tl;
    if (bytes > 0) {
        tl->gets++;
        tl->get_bytes += bytes;
        tl->last_get_ns = now;
    }
    if (nd->fetching > 0) return;
    tl->idle_since_ns = now;
    tl->idle_full = nd->rcount >= nd->rcap;
}

/* Drops everything of the node's current attempt and opens `tau` (open) or
 * nothing. Queued payloads of the old attempt are counted as dropped. */
static void obj_node_reset(obj_node_t *nd, uint64_t tau, bool open)
{
    pthread_mutex_lock(&nd->mu);
    obj_timeline_log(nd);
    nd->tl = (obj_timeline_t){.open_ns = open ? dcr_clock_ns() : 0};
    atomic_fetch_add(&nd->gen, 1);
    for (size_t i = 0; i < nd->rcount; i++) obj_blob_free(nd->ready[i]);
    atomic_fetch_add(&nd->s->base.count.dropped_stale, (int_fast64_t)nd->rcount);
    nd->rcount = 0;
    nd->n = 0;
    nd->have_manifest = false;
    nd->mbad_ns = nd->lbad_ns = 0;
    nd->listed = nd->handed_listed = 0;
    nd->err = DCR_OK;
    nd->errmsg[0] = '\0';
    nd->tau = tau;
    nd->open = open;
    nd->poll_ns = OBJ_POLL_MIN_NS;
    nd->next_list_ns = 0;
    pthread_cond_broadcast(&nd->work_cv);
    pthread_cond_broadcast(&nd->recv_cv);
    pthread_mutex_unlock(&nd->mu);
}

/* ---- rollout side: fetching one payload (no lock held) ------------------ */

typedef enum { FETCH_OK, FETCH_GONE, FETCH_BAD, FETCH_STALE, FETCH_ABORT } obj_fetch_kind_t;

typedef struct obj_fetch {
    /* what to fetch */
    uint64_t tau;
    uint32_t owner;
    uint64_t id;
    bool listed;
    uint64_t want_len;
    uint8_t want_digest[16];
    uint64_t size; /* in the listing that found it */
    char version[DCR_OBJSTORE_VERSION_MAX];
    uint64_t gen0;
    /* outcome */
    obj_fetch_kind_t kind;
    bool unauthenticated; /* FETCH_BAD for its keying or keyed digest */
    obj_blob_t *blob;
    char why[OBJ_WHY];
} obj_fetch_t;

static void obj_fetch_fail(obj_fetch_t *f, obj_fetch_kind_t kind, const char *why)
{
    f->kind = kind;
    snprintf(f->why, sizeof f->why, "%s", why);
    obj_blob_free(f->blob);
    f->blob = NULL;
}

/* Checks a downloaded payload against its name, the attempt and the manifest. */
static void obj_verify(obj_node_t *nd, obj_fetch_t *f)
{
    dcr_payload_header_t h;
    char why[OBJ_WHY];
    const dcr_payload_policy_t *policy = &nd->s->base.pub.payload_policy;
    dcr_status_t st = dcr_payload_verify(f->blob->data, f->blob->len, policy, &h);
    if (st != DCR_OK) {
        f->unauthenticated = dcr_payload_auth_failure(st, f->blob->data, f->blob->len, policy->key);
        snprintf(why, sizeof why, "corrupt (%s)", dcr_error_detail());
        obj_fetch_fail(f, FETCH_BAD, why);
    } else if (h.tau != f->tau) {
        snprintf(why, sizeof why, "of attempt %" PRIu64 ", not %" PRIu64, h.tau, f->tau);
        obj_fetch_fail(f, FETCH_STALE, why);
    } else if (h.owner != f->owner || h.payload_id != f->id) {
        snprintf(why, sizeof why, "foreign (header names owner %" PRIu32 " payload %" PRIu64 ")",
                 h.owner, h.payload_id);
        obj_fetch_fail(f, FETCH_BAD, why);
    } else if (f->listed && memcmp(h.digest, f->want_digest, 16) != 0) {
        obj_fetch_fail(f, FETCH_BAD, "corrupt (digest differs from the manifest's)");
    } else {
        f->blob->owner = f->owner;
        f->blob->id = f->id;
        memcpy(f->blob->digest, h.digest, 16);
        f->kind = FETCH_OK;
    }
}

static void obj_fetch_run(obj_node_t *nd, obj_fetch_t *f)
{
    objstore_t *s = nd->s;
    char name[64], key[128], why[OBJ_WHY];
    if (f->owner >= (uint32_t)s->base.cfg.world) {
        return obj_fetch_fail(f, FETCH_BAD, "foreign (owner out of range)");
    }
    dcr__obj_payload_name(f->owner, f->id, name, sizeof name);
    obj_key(f->tau, name, key, sizeof key);
    /* The listing's size bounds what is fetched; the manifest's must agree. */
    uint64_t size = f->size;
    if (size < DCR_CODEC_HEADER_SIZE || size > DCR__TRANSPORT_PAYLOAD_MAX ||
        (f->listed && size != f->want_len)) {
        snprintf(why, sizeof why,
                 "truncated or oversized (%" PRIu64 " bytes, expected %s%" PRIu64 ")", size,
                 f->listed ? "" : "at least ", f->listed ? f->want_len : DCR_CODEC_HEADER_SIZE);
        return obj_fetch_fail(f, FETCH_BAD, why);
    }
    f->blob = calloc(1, sizeof *f->blob);
    if (f->blob == NULL) return obj_fetch_fail(f, FETCH_BAD, "not downloaded (out of memory)");
    dcr__flow_t flow;
    dcr__flow_cross(&flow, s->base.links, -1, nd->idx, &nd->gen, f->gen0);
    dcr_objstore_pace_t pace = {obj_pace, &flow};
    obj_request(&obj_gets);
    dcr_status_t rst = obj_get_listed(s, key, size, &pace, &f->blob->data, &f->blob->len);
    if (rst == DCR_ECLOSED) return obj_fetch_fail(f, FETCH_ABORT, "aborted");
    if (rst == DCR_ENOTFOUND) {
        snprintf(why, sizeof why, "missing (%s)", dcr_error_detail());
        return obj_fetch_fail(f, FETCH_GONE, why);
    }
    atomic_fetch_add(&s->base.count.cross_bytes, (int_fast64_t)size);
    if (rst != DCR_OK) return obj_fetch_fail(f, FETCH_BAD, dcr_error_detail());
    if (f->blob->len != size) {
        snprintf(why, sizeof why, "truncated (%zu bytes, listed with %" PRIu64 ")", f->blob->len,
                 size);
        return obj_fetch_fail(f, FETCH_BAD, why);
    }
    obj_verify(nd, f);
}

/* Records a finished download (node lock held, attempt unchanged). */
static void obj_fetch_apply(obj_node_t *nd, obj_entry_t *e, obj_fetch_t *f)
{
    if (f->kind == FETCH_OK && nd->have_manifest &&
        (!e->listed || f->blob->len != e->want_len ||
         memcmp(f->blob->digest, e->want_digest, 16))) {
        /* The manifest appeared while this download ran. */
        obj_fetch_fail(f, FETCH_BAD,
                       e->listed ? "corrupt (differs from the manifest)" : "unlisted");
    }
    switch (f->kind) {
    case FETCH_OK:
        e->got_len = f->blob->len;
        memcpy(e->got_digest, f->blob->digest, 16);
        nd->ready[nd->rcount++] = f->blob;
        f->blob = NULL;
        e->state = OBJ_READY;
        pthread_cond_broadcast(&nd->recv_cv);
        return;
    case FETCH_GONE:
        e->state = OBJ_GONE;
        break;
    case FETCH_ABORT:
        e->state = OBJ_PENDING;
        return;
    case FETCH_STALE:
    case FETCH_BAD:
        e->state = nd->have_manifest && !e->listed ? OBJ_UNLISTED : OBJ_BAD;
        memcpy(e->bad_version, f->version, sizeof e->bad_version);
        e->bad_size = f->size;
        obj_count(nd, e, f->kind == FETCH_STALE, f->unauthenticated);
        DCR_LOG_DEBUG("objstore: node %d: payload %" PRIu32 "-%" PRIu64 " not delivered: %s",
                      nd->idx, e->owner, e->id, f->why);
        break;
    }
    snprintf(e->why, sizeof e->why, "%s", f->why);
}

/* Downloads entry e (lock held on entry and exit, dropped meanwhile). */
static void obj_fetch_locked(obj_node_t *nd, obj_entry_t *e)
{
    obj_fetch_t f = {.tau = nd->tau,
                     .owner = e->owner,
                     .id = e->id,
                     .listed = e->listed,
                     .want_len = e->want_len,
                     .size = e->size,
                     .gen0 = atomic_load(&nd->gen)};
    memcpy(f.want_digest, e->want_digest, 16);
    memcpy(f.version, e->version, sizeof f.version);
    e->state = OBJ_FETCHING;
    obj_timeline_get_begins(nd, dcr_clock_ns());
    nd->fetching++;
    pthread_mutex_unlock(&nd->mu);
    /* The second half of the sending endpoint's transport interval (see
     * trace/bounds.c): recorded only when the payload ends up queued. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_FETCH, DCR_ACTOR_ENDPOINT, (int)f.owner);
    obj_fetch_run(nd, &f);
    pthread_mutex_lock(&nd->mu);
    nd->fetching--;
    pthread_cond_broadcast(&nd->work_cv);
    bool queued = false;
    if (atomic_load(&nd->gen) == f.gen0) {
        obj_fetch_apply(nd, obj_find(nd, f.owner, f.id), &f);
        queued = f.kind == FETCH_OK;
        obj_timeline_get_ends(nd, dcr_clock_ns(), queued ? f.size : 0);
    }
    if (queued)
        dcr_trace_end(&span);
    else
        dcr_trace_cancel(&span);
    obj_blob_free(f.blob);
}

/* ---- rollout side: listing ---------------------------------------------- */

typedef struct obj_name {
    uint32_t owner;
    uint64_t id;
    uint64_t size;
    const char *version; /* into the listing's entries */
} obj_name_t;

typedef struct obj_listing {
    bool ok;                   /* the listing succeeded: merge it */
    char err[512];             /* else why not */
    dcr_objstore_entry_t *all; /* the store's listing */
    obj_name_t *v;             /* its payloads */
    size_t n;
    bool manifest; /* parsed below */
    dcr__ledger_entry_t *m;
    size_t mn;
    dcr_status_t merr;
    char merrmsg[512];
} obj_listing_t;

static void obj_manifest_path(objstore_t *s, uint64_t tau, char *out, size_t cap)
{
    char key[128];
    obj_key(tau, "MANIFEST", key, sizeof key);
    snprintf(out, cap, "%s/%s", s->base.dir, key);
}

static void obj_manifest_fail(obj_listing_t *L, dcr_status_t err)
{
    L->manifest = true;
    L->merr = err;
    snprintf(L->merrmsg, sizeof L->merrmsg, "%s", dcr_error_detail());
}

/* Reads one manifest object and appends its entries to L->m; false when it
 * is not readable now (the next listing tries again). A malformed one, or a
 * part listing an owner outside its range, fails the manifest. */
static bool obj_read_part(objstore_t *s, uint64_t tau, const obj_mpart_t *mp, obj_listing_t *L)
{
    char name[48], key[128], path[PATH_MAX + 128];
    if (mp->count == 0)
        snprintf(name, sizeof name, "MANIFEST");
    else
        dcr__obj_manifest_part_name(mp->first, mp->count, name, sizeof name);
    obj_key(tau, name, key, sizeof key);
    snprintf(path, sizeof path, "%s/%s", s->base.dir, key);
    uint8_t *text = NULL;
    size_t len = 0;
    obj_request(&obj_gets);
    dcr_status_t err = mp->exact ? obj_get_listed(s, key, mp->size, NULL, &text, &len)
                                 : dcr_objstore_get(s->store, key, mp->size, NULL, &text, &len);
    if (err == DCR_ENOTFOUND) return false;
    if (err != DCR_OK && err != DCR_EINVAL) {
        /* Unreadable now (a store error): the next listing tries again. */
        DCR_LOG_DEBUG("objstore: manifest %s not read: %s", path, dcr_error_detail());
        return false;
    }
    if (err == DCR_EINVAL)
        err = dcr_error_set(DCR_ETRANSPORT, "objstore: manifest %s: above %" PRIu64 " bytes", path,
                            mp->size);
    else
        err = dcr__manifest_append((const char *)text, len, path, tau, s->base.cfg.world, mp->first,
                                   mp->count, &L->m, &L->mn);
    free(text);
    if (err != DCR_OK) {
        obj_manifest_fail(L, err);
        return true;
    }
    L->manifest = true;
    return true;
}

/* The parts of a listing, when they cover every owner exactly once: read
 * them all as one manifest. Two parts naming one owner fail the manifest. */
static void obj_read_parts(objstore_t *s, uint64_t tau, const obj_mpart_t *parts, size_t n,
                           obj_listing_t *L)
{
    int world = s->base.cfg.world;
    const obj_mpart_t **by = calloc((size_t)world, sizeof *by);
    if (by == NULL) return; /* the next listing tries again */
    int covered = 0;
    for (size_t i = 0; i < n; i++) {
        for (int o = parts[i].first; o < parts[i].first + parts[i].count; o++) {
            if (by[o] != NULL) {
                obj_manifest_fail(
                    L, dcr_error_set(DCR_ETRANSPORT,
                                     "objstore: attempt %" PRIu64
                                     ": manifest parts MANIFEST-%d-%d and MANIFEST-%d-%d both "
                                     "cover owner %d; expected each owner in one part",
                                     tau, by[o]->first, by[o]->count, parts[i].first,
                                     parts[i].count, o));
                free(by);
                return;
            }
            by[o] = &parts[i];
            covered++;
        }
    }
    free(by);
    if (covered < world) return; /* not every owner finished yet */
    for (size_t i = 0; i < n; i++) {
        if (!obj_read_part(s, tau, &parts[i], L)) {
            /* A part not readable now: the whole manifest waits for the next listing. */
            free(L->m);
            L->m = NULL;
            L->mn = 0;
            L->manifest = false;
            return;
        }
        if (L->merr != DCR_OK) return;
    }
}

/* One LIST of the attempt's prefix, plus the manifest when still needed.
 * Called by the node's one listing thread, its lock dropped. */
static void obj_scan(obj_node_t *nd, uint64_t tau, bool need_manifest, obj_listing_t *L)
{
    objstore_t *s = nd->s;
    char prefix[64];
    dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
    size_t plen = strlen(prefix), n = 0;
    obj_request(&obj_lists);
    if (dcr_objstore_list_all(s->store, prefix, &L->all, &n) != DCR_OK) {
        snprintf(L->err, sizeof L->err, "%s", dcr_error_detail());
        DCR_LOG_DEBUG("objstore: listing %s of %s: %s", prefix, s->base.dir, L->err);
        return; /* the next listing tries again */
    }
    L->v = calloc(n ? n : 1, sizeof *L->v);
    if (n > nd->parts_cap) {
        obj_mpart_t *grown = realloc(nd->parts, n * sizeof *grown);
        if (grown != NULL) {
            nd->parts = grown;
            nd->parts_cap = n;
        }
    }
    if (L->v == NULL || n > nd->parts_cap) {
        snprintf(L->err, sizeof L->err, "out of memory for %zu names", n);
        return;
    }
    obj_mpart_t *parts = nd->parts;
    L->ok = true;
    bool listed_manifest = false, mexact = false;
    uint64_t msize = DCR__MANIFEST_MAX_BYTES;
    size_t nparts = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = L->all[i].key + plen;
        /* An empty object is neither a payload nor a manifest: a store that
         * lists a key before its bytes arrive (s3rver; never S3 or the dir
         * store) shows it so for a moment. Not there yet, not rejected. */
        if (L->all[i].size == 0) continue;
        uint32_t owner;
        uint64_t id;
        int first, count;
        bool exact = L->all[i].size < DCR__MANIFEST_MAX_BYTES;
        uint64_t size = exact ? L->all[i].size : DCR__MANIFEST_MAX_BYTES;
        if (dcr__obj_parse_payload_name(name, &owner, &id)) {
            L->v[L->n++] = (obj_name_t){owner, id, L->all[i].size, L->all[i].version};
        } else if (strcmp(name, "MANIFEST") == 0) {
            listed_manifest = true;
            mexact = exact;
            msize = size;
        } else if (dcr__obj_parse_manifest_part_name(name, s->base.cfg.world, &first, &count)) {
            parts[nparts++] = (obj_mpart_t){first, count, size, exact};
        }
    }
    /* Read after the listing: every payload is stored before the manifest
     * (or its part), so a manifest seen now lists only objects that are
     * already visible. A store whose listings lag behind its puts is asked
     * for the whole manifest directly; parts are found by listing. */
    if (need_manifest && (listed_manifest || !dcr_objstore_props(s->store)->consistent_list)) {
        obj_mpart_t whole = {0, 0, msize, listed_manifest && mexact};
        obj_read_part(s, tau, &whole, L);
    } else if (need_manifest && nparts > 0) {
        obj_read_parts(s, tau, parts, nparts, L);
    }
}

static void obj_apply_unlisted(obj_node_t *nd, obj_entry_t *e, const char *mpath)
{
    char msg[512];
    switch (e->state) {
    case OBJ_HANDED:
        snprintf(msg, sizeof msg,
                 "objstore: rollout node %d: payload %" PRIu32 "-%" PRIu64
                 " was delivered before the manifest, but %s does not list it",
                 nd->idx, e->owner, e->id, mpath);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    case OBJ_FETCHING: /* obj_fetch_apply drops it */
        return;
    case OBJ_READY:
        obj_unready(nd, e);
        /* fallthrough */
    default:
        e->state = OBJ_UNLISTED;
        obj_count(nd, e, false, false);
    }
}

/* A payload delivered or queued before the manifest differs from its entry. */
static void obj_mismatch(obj_node_t *nd, obj_entry_t *e, const char *mpath)
{
    char msg[512];
    if (e->state == OBJ_HANDED) {
        snprintf(msg, sizeof msg,
                 "objstore: rollout node %d: payload %" PRIu32 "-%" PRIu64
                 " was delivered before the manifest, but differs from its entry in %s",
                 nd->idx, e->owner, e->id, mpath);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    }
    obj_unready(nd, e);
    e->state = OBJ_BAD;
    snprintf(e->why, sizeof e->why, "corrupt (differs from the manifest)");
    obj_count(nd, e, false, false);
}

/* Binds the node's entries to the manifest's list. */
static void obj_apply_manifest(obj_node_t *nd, const obj_listing_t *L)
{
    char mpath[PATH_MAX + 128];
    obj_manifest_path(nd->s, nd->tau, mpath, sizeof mpath);
    for (size_t i = 0; i < nd->n; i++) nd->e[i].listed = false;
    for (size_t i = 0; i < L->mn; i++) {
        const dcr__ledger_entry_t *m = &L->m[i];
        obj_entry_t *e = obj_find(nd, m->owner, m->id);
        if (e == NULL && (e = obj_add(nd, m->owner, m->id)) == NULL) {
            obj_fail(nd, DCR_ENOMEM, "objstore: out of memory while reading the manifest");
            return;
        }
        e->listed = true;
        e->want_len = m->len;
        memcpy(e->want_digest, m->digest, 16);
        bool got = e->state == OBJ_READY || e->state == OBJ_HANDED;
        if (got && (e->got_len != m->len || memcmp(e->got_digest, m->digest, 16) != 0)) {
            obj_mismatch(nd, e, mpath);
        }
    }
    for (size_t i = 0; i < nd->n; i++) {
        if (!nd->e[i].listed) obj_apply_unlisted(nd, &nd->e[i], mpath);
    }
    nd->have_manifest = true;
    nd->manifest_ns = dcr_clock_ns();
    nd->tl.manifest_ns = nd->manifest_ns;
    nd->listed = L->mn;
    nd->handed_listed = 0;
    for (size_t i = 0; i < nd->n; i++) {
        if (nd->e[i].listed && nd->e[i].state == OBJ_HANDED) nd->handed_listed++;
    }
}

/* Merges a listing into the node's entries; true if anything new appeared. */
static bool obj_merge(obj_node_t *nd, const obj_listing_t *L)
{
    bool progress = false;
    for (size_t i = 0; i < nd->n; i++) nd->e[i].seen = false;
    for (size_t i = 0; i < L->n; i++) {
        obj_entry_t *e = obj_find(nd, L->v[i].owner, L->v[i].id);
        if (e == NULL) {
            if ((e = obj_add(nd, L->v[i].owner, L->v[i].id)) == NULL) continue;
            if (nd->have_manifest) obj_apply_unlisted(nd, e, "the manifest");
            progress = true;
        }
        e->seen = true;
        e->size = L->v[i].size;
        snprintf(e->version, sizeof e->version, "%s", L->v[i].version);
        if (e->state == OBJ_GONE ||
            (e->state == OBJ_BAD &&
             (strcmp(e->bad_version, e->version) != 0 || e->bad_size != e->size))) {
            /* Appeared, or replaced by a new version: a store that lists an
             * object while its upload streams in (s3rver) shows it with a
             * growing size and can keep one version (ETag) throughout. */
            e->state = OBJ_PENDING;
            progress = true;
        }
    }
    if (L->manifest && L->merr != DCR_OK) {
        /* Failed only once it stays unreadable OBJ_LISTED_WAIT_MS: a store
         * that shows an object before its last byte is stored (s3rver does;
         * S3 and the dir store never) gives a cut manifest for a moment, and
         * a cut manifest is always malformed (its "end" line is last). */
        uint64_t now = dcr_clock_ns();
        if (nd->mbad_ns == 0) nd->mbad_ns = now;
        if (now >= nd->mbad_ns + (uint64_t)OBJ_LISTED_WAIT_MS * 1000000ull)
            obj_fail(nd, L->merr, L->merrmsg);
    } else if (L->manifest && !nd->have_manifest) {
        obj_apply_manifest(nd, L);
        progress = true;
    }
    for (size_t i = 0; i < nd->n; i++) {
        if (!nd->e[i].seen && nd->e[i].state == OBJ_PENDING && nd->have_manifest) {
            nd->e[i].state = OBJ_GONE;
            snprintf(nd->e[i].why, sizeof nd->e[i].why, "missing");
        }
    }
    return progress;
}

/* Fails the attempt when a listed payload stayed missing or corrupt too long. */
static void obj_check_deadline(obj_node_t *nd)
{
    if (!nd->have_manifest || nd->err != DCR_OK) return;
    if (dcr_clock_ns() < nd->manifest_ns + (uint64_t)OBJ_LISTED_WAIT_MS * 1000000ull) return;
    for (size_t i = 0; i < nd->n; i++) {
        obj_entry_t *e = &nd->e[i];
        if (!e->listed || (e->state != OBJ_BAD && e->state != OBJ_GONE)) continue;
        char name[64], key[128], msg[PATH_MAX + 512];
        dcr__obj_payload_name(e->owner, e->id, name, sizeof name);
        obj_key(nd->tau, name, key, sizeof key);
        snprintf(
            msg, sizeof msg,
            "objstore: rollout node %d: payload %s/%s listed in the manifest is %s %d ms after "
            "the manifest appeared",
            nd->idx, nd->s->base.dir, key, e->why[0] ? e->why : "missing", OBJ_LISTED_WAIT_MS);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    }
}

/* The interval to the next poll after a listing that took took_ns:
 * without a watcher from OBJ_POLL_MIN_NS after progress, doubling to
 * OBJ_POLL_MAX_NS while nothing changes, and never shorter than twice the
 * listing itself, that counted up to OBJ_POLL_NOTIFIED_MAX_NS (a store slow
 * to list is a busy one: a node spends at most about a third of its time
 * listing, so the store's CPU goes to the uploads and downloads; on the
 * netns testbed under load s3rver took 90-130 ms a listing and each node
 * listed 80% of the time); with a watcher, doubling to
 * OBJ_POLL_NOTIFIED_MAX_NS regardless. */
static uint64_t obj_next_poll(const obj_node_t *nd, bool progress, uint64_t took_ns)
{
    uint64_t max = nd->have_watcher ? OBJ_POLL_NOTIFIED_MAX_NS : OBJ_POLL_MAX_NS;
    uint64_t next = progress && !nd->have_watcher ? OBJ_POLL_MIN_NS : nd->poll_ns * 2;
    if (next > max) next = max;
    /* A listing that hung on one slow answer says little: the pause it
     * buys is capped as a watcher's polls are. */
    if (took_ns > OBJ_POLL_NOTIFIED_MAX_NS) took_ns = OBJ_POLL_NOTIFIED_MAX_NS;
    return nd->have_watcher || next >= 2 * took_ns ? next : 2 * took_ns;
}

/* Lists the attempt's prefix (lock held on entry and exit, dropped meanwhile). */
static void obj_list_locked(obj_node_t *nd)
{
    uint64_t gen0 = atomic_load(&nd->gen), tau = nd->tau;
    bool need_manifest = !nd->have_manifest;
    nd->listing = true;
    nd->changed = false; /* a publication from now on needs another listing */
    pthread_mutex_unlock(&nd->mu);
    obj_listing_t L = {0};
    uint64_t t0 = dcr_clock_ns();
    obj_scan(nd, tau, need_manifest, &L);
    uint64_t took_ns = dcr_clock_ns() - t0;
    pthread_mutex_lock(&nd->mu);
    nd->listing = false;
    if (atomic_load(&nd->gen) == gen0) {
        nd->tl.lists++;
        nd->tl.list_ns += took_ns;
    }
    if (atomic_load(&nd->gen) == gen0 && !L.ok) {
        /* A failed listing says nothing about what exists: nothing is
         * merged. One that keeps failing fails the attempt, with its cause. */
        uint64_t now = dcr_clock_ns();
        if (nd->lbad_ns == 0) nd->lbad_ns = now;
        if (now >= nd->lbad_ns + (uint64_t)OBJ_LIST_FAIL_MS * 1000000ull) {
            char msg[700];
            snprintf(msg, sizeof msg, "objstore: rollout node %d: listing failed for %d ms: %s",
                     nd->idx, OBJ_LIST_FAIL_MS, L.err);
            obj_fail(nd, DCR_ETRANSPORT, msg);
        }
        nd->poll_ns = OBJ_POLL_MAX_NS;
        nd->next_list_ns = now + nd->poll_ns;
    } else if (atomic_load(&nd->gen) == gen0) {
        nd->lbad_ns = 0;
        bool progress = obj_merge(nd, &L);
        nd->poll_ns = obj_next_poll(nd, progress, took_ns);
        nd->next_list_ns = dcr_clock_ns() + nd->poll_ns;
        obj_check_deadline(nd);
        pthread_cond_broadcast(&nd->work_cv);
        pthread_cond_broadcast(&nd->recv_cv);
    }
    free(L.all);
    free(L.v);
    free(L.m);
}

static obj_entry_t *obj_pick(obj_node_t *nd)
{
    if (nd->rcount + nd->fetching >= nd->rcap) return NULL;
    for (size_t i = 0; i < nd->n; i++) {
        obj_entry_t *e = &nd->e[i];
        if (e->state == OBJ_PENDING && (!nd->have_manifest || e->listed)) return e;
    }
    return NULL;
}

static void obj_wait_until(obj_node_t *nd, uint64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                          (long)(deadline_ns % 1000000000ull)};
    pthread_cond_timedwait(&nd->work_cv, &nd->mu, &ts);
}

static void *obj_worker(void *arg)
{
    obj_node_t *nd = arg;
    pthread_mutex_lock(&nd->mu);
    while (!nd->quit) {
        if (!nd->open || nd->err != DCR_OK || obj_done(nd)) {
            pthread_cond_wait(&nd->work_cv, &nd->mu);
            continue;
        }
        obj_entry_t *e = obj_pick(nd);
        if (e != NULL) {
            obj_fetch_locked(nd, e);
            continue;
        }
        /* With the queue full nothing a listing finds could be fetched yet:
         * the listing waits for recv to make room (a store without
         * notification pays for every listing with its CPU). */
        if (nd->rcount + nd->fetching >= nd->rcap) {
            pthread_cond_wait(&nd->work_cv, &nd->mu);
            continue;
        }
        uint64_t now = dcr_clock_ns();
        if (!nd->listing && (nd->changed || now >= nd->next_list_ns)) {
            obj_list_locked(nd);
            continue;
        }
        obj_wait_until(nd, nd->listing ? now + OBJ_POLL_MAX_NS : nd->next_list_ns);
    }
    pthread_mutex_unlock(&nd->mu);
    return NULL;
}

/* Turns the store's change notifications into listings: the download
 * threads wait on a condition variable, which cannot also wait on the
 * store. Between attempts, and once its attempt is done (a done attempt's
 * prefix has nothing more to deliver), the watcher waits on that condition
 * too, so obj_node_reset wakes it and the next attempt's prefix is watched
 * from its open. It used to sleep OBJ_WATCH_MS whenever it found no attempt
 * open (as when the replaced attempt's removal woke it, just before the
 * open), and missed the attempt's first publications: backup polls found
 * them 15-31 ms after the open in `dcr bench`, while the relay delivered
 * its first payload as soon as it was sent. Each wait on the store is
 * bounded, so a quit or an attempt replaced before it was done is seen
 * within OBJ_WATCH_MS. */
static void *obj_watcher(void *arg)
{
    obj_node_t *nd = arg;
    pthread_mutex_lock(&nd->mu);
    while (!nd->quit) {
        if (!nd->open || nd->err != DCR_OK || obj_done(nd)) {
            pthread_cond_wait(&nd->work_cv, &nd->mu);
            continue;
        }
        uint64_t tau = nd->tau, gen0 = atomic_load(&nd->gen);
        pthread_mutex_unlock(&nd->mu);
        char prefix[64];
        dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
        bool changed = dcr_objstore_wait_change(nd->s->store, prefix, OBJ_WATCH_MS) == DCR_OK;
        pthread_mutex_lock(&nd->mu);
        if (changed && atomic_load(&nd->gen) == gen0) {
            nd->changed = true;
            pthread_cond_broadcast(&nd->work_cv);
        }
    }
    pthread_mutex_unlock(&nd->mu);
    return NULL;
}

/* Starts the node's change notification where the store offers it;
 * without it the node only polls. */
static void obj_notify_init(obj_node_t *nd)
{
    if (!dcr_objstore_props(nd->s->store)->change_notify) return;
    if (dcr_thread_start(&nd->watcher, DCR_THREAD_TRANSPORT, obj_watcher, nd, "dcr-list-%d",
                         nd->idx) == 0) {
        nd->have_watcher = true;
        return;
    }
    DCR_LOG_DEBUG("objstore: node %d lists by polling only (no watcher thread)", nd->idx);
}

/* Called after quit was set. */
static void obj_notify_fini(obj_node_t *nd)
{
    if (!nd->have_watcher) return;
    pthread_join(nd->watcher, NULL);
    nd->have_watcher = false;
}

/* ---- rollout side: setup ------------------------------------------------ */

static dcr_status_t obj_node_init(objstore_t *s, obj_node_t *nd, int idx)
{
    nd->s = s;
    nd->idx = idx;
    nd->rcap = s->base.cfg.queue_payloads;
    nd->ready = calloc(nd->rcap, sizeof *nd->ready);
    if (nd->ready == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: node %d queue", idx);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&nd->mu, NULL);
    pthread_cond_init(&nd->work_cv, &attr);
    pthread_cond_init(&nd->recv_cv, &attr);
    pthread_condattr_destroy(&attr);
    obj_notify_init(nd);
    for (int i = 0; i < OBJ_FLOWS; i++) {
        if (dcr_thread_start(&nd->th[i], DCR_THREAD_TRANSPORT, obj_worker, nd, "dcr-get-%d-%d", idx,
                             i) != 0) {
            return dcr_error_set(DCR_ENOMEM, "objstore: cannot start download thread of node %d",
                                 idx);
        }
        nd->nth++;
    }
    return DCR_OK;
}

static void obj_node_fini(obj_node_t *nd)
{
    if (nd->s == NULL) return;
    pthread_mutex_lock(&nd->mu);
    nd->quit = true;
    atomic_fetch_add(&nd->gen, 1);
    pthread_cond_broadcast(&nd->work_cv);
    pthread_mutex_unlock(&nd->mu);
    for (int i = 0; i < nd->nth; i++) pthread_join(nd->th[i], NULL);
    obj_notify_fini(nd);
    for (size_t i = 0; i < nd->rcount; i++) obj_blob_free(nd->ready[i]);
    free(nd->ready);
    free(nd->e);
    free(nd->parts);
    pthread_cond_destroy(&nd->work_cv);
    pthread_cond_destroy(&nd->recv_cv);
    pthread_mutex_destroy(&nd->mu);
}

/* ---- training side ------------------------------------------------------ */

/* Closes the training side's attempt; returns once no upload or manifest
 * write of it can still be published (lock not held). */
static void obj_train_stop(objstore_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->open = false;
    atomic_fetch_add(&s->gen, 1);
    while (s->inflight > 0) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void obj_inflight_done(objstore_t *s)
{
    s->inflight--;
    if (s->inflight == 0) pthread_cond_broadcast(&s->cv);
}

static dcr_status_t obj_send(dcr_transport_t *t, int owner, uint64_t payload_id, const uint8_t *buf,
                             size_t len)
{
    objstore_t *s = (objstore_t *)t;
    dcr_payload_header_t h;
    pthread_mutex_lock(&s->mu);
    if (!s->open) {
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_ECLOSED,
                             "objstore: owner %d payload %" PRIu64 " not sent: no attempt is open",
                             owner, payload_id);
    }
    uint64_t tau = s->tau, gen0 = atomic_load(&s->gen);
    dcr_status_t st = dcr__payload_check_send(&s->base, tau, owner, payload_id, buf, len, &h);
    if (st == DCR_OK) st = dcr__ledger_check(&s->ledger, tau, owner, payload_id);
    if (st != DCR_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    s->inflight++;
    pthread_mutex_unlock(&s->mu);

    char name[64], key[128];
    dcr__obj_payload_name((uint32_t)owner, payload_id, name, sizeof name);
    obj_key(tau, name, key, sizeof key);
    dcr__flow_t flow;
    dcr__flow_cross(&flow, s->base.links, dcr__tbase_train_node(&s->base, owner), -1, &s->gen,
                    gen0);
    dcr_objstore_pace_t pace = {obj_pace, &flow};
    obj_request(&obj_puts);
    st = dcr_objstore_put(s->store, key, buf, len, &pace);

    /* A put is its publication; one that completed after stop_and_wait began
     * is taken back before stop_and_wait returns (it waits for inflight), so
     * after it returns nothing of the attempt stays published. */
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->gen) != gen0) {
        st = dcr_error_set(DCR_ECLOSED,
                           "objstore: owner %d payload %" PRIu64 " not stored: attempt %" PRIu64
                           " was stopped",
                           owner, payload_id, tau);
        dcr_objstore_delete(s->store, key);
    } else if (st == DCR_OK && (st = dcr__ledger_add(&s->ledger, owner, &h, len)) != DCR_OK) {
        dcr_objstore_delete(s->store, key);
    }
    obj_inflight_done(s);
    pthread_mutex_unlock(&s->mu);
    if (st != DCR_OK) return st;
    atomic_fetch_add(&s->base.count.payload_bytes, (int_fast64_t)len);
    atomic_fetch_add(&s->base.count.cross_bytes, (int_fast64_t)len);
    return DCR_OK;
}

/* Writes the attempt's manifest (the last owner's finish). */
static dcr_status_t obj_write_manifest(objstore_t *s, uint64_t tau, uint64_t gen0,
                                       const dcr__ledger_entry_t *e, size_t n)
{
    size_t len;
    char *text = dcr__manifest_text(tau, e, n, &len);
    if (text == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: manifest of %zu payloads", n);
    char key[128];
    obj_key(tau, s->manifest_name, key, sizeof key);
    obj_request(&obj_puts);
    dcr_status_t st = dcr_objstore_put(s->store, key, (const uint8_t *)text, len, NULL);
    free(text);
    pthread_mutex_lock(&s->mu);
    if (st == DCR_OK && atomic_load(&s->gen) != gen0) {
        dcr_objstore_delete(s->store, key);
        st = dcr_error_set(DCR_ECLOSED,
                           "objstore: manifest of attempt %" PRIu64 " not stored: stopped", tau);
    }
    obj_inflight_done(s);
    pthread_mutex_unlock(&s->mu);
    return st;
}

static dcr_status_t obj_finish(dcr_transport_t *t, int owner, uint64_t npayloads)
{
    objstore_t *s = (objstore_t *)t;
    bool all = false;
    pthread_mutex_lock(&s->mu);
    if (!s->open) {
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_ECLOSED, "objstore: owner %d cannot finish: no attempt is open",
                             owner);
    }
    uint64_t tau = s->tau, gen0 = atomic_load(&s->gen);
    dcr_status_t st = dcr__ledger_finish(&s->ledger, tau, owner, npayloads, &all);
    dcr__ledger_entry_t *copy = NULL;
    size_t n = s->ledger.n;
    if (st == DCR_OK && all) {
        copy = malloc((n ? n : 1) * sizeof *copy);
        if (copy == NULL)
            st = dcr_error_set(DCR_ENOMEM, "objstore: manifest of %zu payloads", n);
        else if (n > 0)
            memcpy(copy, s->ledger.e, n * sizeof *copy);
    }
    if (copy != NULL) s->inflight++;
    pthread_mutex_unlock(&s->mu);
    if (copy == NULL) return st;
    st = obj_write_manifest(s, tau, gen0, copy, n);
    free(copy);
    return st;
}

/* ---- attempts ----------------------------------------------------------- */

/* Owners other processes serve count as finished from the start, so that
 * the last of this handle's owners to finish writes its manifest part. */
static void obj_ledger_skip_foreign(objstore_t *s)
{
    const dcr_transport_config_t *c = &s->base.cfg;
    if (c->owner_count == 0) return;
    for (int o = 0; o < c->world; o++) {
        if (o >= c->owner_first && o < c->owner_first + c->owner_count) continue;
        s->ledger.finished[o] = true;
        s->ledger.nfinished++;
    }
}

static dcr_status_t obj_open_attempt(dcr_transport_t *t, uint64_t tau)
{
    objstore_t *s = (objstore_t *)t;
    pthread_mutex_lock(&s->mu);
    if (tau <= s->last_tau) {
        uint64_t last = s->last_tau;
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_EINVAL,
                             "objstore: attempt %" PRIu64 " is not newer than attempt %" PRIu64,
                             tau, last);
    }
    s->last_tau = tau;
    pthread_mutex_unlock(&s->mu);
    obj_train_stop(s);
    for (int i = 0; i < s->nnodes; i++) obj_node_reset(&s->nodes[i], 0, false);

    if (s->base.cfg.join) {
        /* The clearing handle opened tau before us and removes the
         * replaced attempt's objects itself (dcr/transport.h). */
    } else {
        if (s->have_prefix) {
            /* The replaced attempt can no longer publish or deliver anything. */
            obj_remove_attempt(s, s->tau);
            s->have_prefix = false;
        }
        obj_remove_attempt(s, tau); /* leftovers of an earlier run that used the same tau */
    }
    s->have_prefix = true;

    pthread_mutex_lock(&s->mu);
    s->tau = tau;
    dcr__ledger_reset(&s->ledger);
    obj_ledger_skip_foreign(s);
    s->open = true;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->nnodes; i++) obj_node_reset(&s->nodes[i], tau, true);
    return DCR_OK;
}

static void obj_stop_and_wait(dcr_transport_t *t)
{
    objstore_t *s = (objstore_t *)t;
    obj_train_stop(s);
    for (int i = 0; i < s->nnodes; i++) {
        obj_node_t *nd = &s->nodes[i];
        pthread_mutex_lock(&nd->mu);
        uint64_t tau = nd->tau;
        pthread_mutex_unlock(&nd->mu);
        obj_node_reset(nd, tau, false);
    }
}

/* ---- rollout side: the caller's end ------------------------------------- */

static struct timespec obj_deadline(int timeout_ms)
{
    uint64_t ns = dcr_clock_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    return (struct timespec){(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
}

/* Hands the oldest queued payload to the caller (node lock held). */
static void obj_pop(obj_node_t *nd, dcr_delivery_t *out_p)
{
    obj_blob_t *b = nd->ready[0];
    memmove(&nd->ready[0], &nd->ready[1], (nd->rcount - 1) * sizeof *nd->ready);
    nd->rcount--;
    obj_entry_t *e = obj_find(nd, b->owner, b->id);
    e->state = OBJ_HANDED;
    if (e->listed) nd->handed_listed++;
    pthread_cond_broadcast(&nd->work_cv);
    *out_p = (dcr_delivery_t){.data = b->data, .len = b->len, .handle = b};
}

static dcr_status_t obj_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p)
{
    objstore_t *s = (objstore_t *)t;
    obj_node_t *nd = &s->nodes[node];
    struct timespec deadline = obj_deadline(timeout_ms);
    dcr_status_t st;
    pthread_mutex_lock(&nd->mu);
    for (;;) {
        if (nd->err != DCR_OK) {
            char msg[sizeof nd->errmsg];
            memcpy(msg, nd->errmsg, sizeof msg);
            st = nd->err;
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(st, "%s", msg);
        }
        if (!nd->open) {
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(DCR_ECLOSED, "objstore: rollout node %d: no attempt is open",
                                 node);
        }
        if (nd->rcount > 0) {
            obj_pop(nd, out_p);
            pthread_mutex_unlock(&nd->mu);
            return DCR_OK;
        }
        if (obj_done(nd)) {
            uint64_t tau = nd->tau;
            size_t n = nd->listed;
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(DCR_ECLOSED,
                                 "objstore: rollout node %d: attempt %" PRIu64
                                 " complete (%zu payloads)",
                                 node, tau, n);
        }
        if (timeout_ms == 0) break;
        if (timeout_ms < 0)
            pthread_cond_wait(&nd->recv_cv, &nd->mu);
        else if (pthread_cond_timedwait(&nd->recv_cv, &nd->mu, &deadline) == ETIMEDOUT) {
            if (nd->rcount == 0 && nd->err == DCR_OK && nd->open && !obj_done(nd)) break;
        }
    }
    pthread_mutex_unlock(&nd->mu);
    return dcr_error_set(DCR_ETIMEOUT, "objstore: rollout node %d: no payload within %d ms", node,
                         timeout_ms);
}

static void obj_release(dcr_transport_t *t, int node, dcr_delivery_t *d)
{
    obj_blob_free(d->handle);
}

/* ---- reference ---------------------------------------------------------- */

typedef struct obj_ref_obj {
    int owner;
    int k;
    size_t len;
} obj_ref_obj_t;

/* One download work item: part `part` of object `obj`. */
typedef struct obj_ref_part {
    size_t obj;
    uint64_t off;
    size_t len;
} obj_ref_part_t;

typedef struct obj_ref {
    objstore_t *s;
    char prefix[64];
    obj_ref_obj_t *objs;
    size_t nobjs;
    obj_ref_part_t *parts;
    size_t nparts;
    size_t part_max;
    const uint8_t *pattern;
    pthread_mutex_t mu;
    dcr_status_t st;
    char msg[512];
    atomic_size_t *next; /* [rollout_nodes] next part each node downloads */
} obj_ref_t;

typedef struct obj_ref_arg {
    obj_ref_t *r;
    int who; /* owner (upload) or rollout node (download) */
} obj_ref_arg_t;

static void obj_ref_fail(obj_ref_t *r, dcr_status_t st)
{
    pthread_mutex_lock(&r->mu);
    if (r->st == DCR_OK) {
        r->st = st;
        snprintf(r->msg, sizeof r->msg, "objstore reference: %s", dcr_error_detail());
    }
    pthread_mutex_unlock(&r->mu);
}

static void obj_ref_key(const obj_ref_t *r, const obj_ref_obj_t *o, char *out, size_t cap)
{
    snprintf(out, cap, "%sref-%d-%d.bin", r->prefix, o->owner, o->k);
}

static void *obj_ref_upload(void *arg)
{
    obj_ref_arg_t *a = arg;
    obj_ref_t *r = a->r;
    int node = dcr__tbase_train_node(&r->s->base, a->who);
    for (size_t i = 0; i < r->nobjs; i++) {
        if (r->objs[i].owner != a->who) continue;
        char key[128];
        obj_ref_key(r, &r->objs[i], key, sizeof key);
        dcr__flow_t flow;
        dcr__flow_cross(&flow, r->s->base.links, node, -1, NULL, 0);
        dcr_objstore_pace_t pace = {obj_pace, &flow};
        obj_request(&obj_puts);
        dcr_status_t st = dcr_objstore_put(r->s->store, key, r->pattern, r->objs[i].len, &pace);
        if (st != DCR_OK) {
            obj_ref_fail(r, st);
            return NULL;
        }
    }
    return NULL;
}

static void *obj_ref_download(void *arg)
{
    obj_ref_arg_t *a = arg;
    obj_ref_t *r = a->r;
    uint8_t *buf = malloc(r->part_max);
    if (buf == NULL) {
        obj_ref_fail(r, dcr_error_set(DCR_ENOMEM, "%zu bytes of download buffer", r->part_max));
        return NULL;
    }
    for (;;) {
        size_t i = atomic_fetch_add(&r->next[a->who], 1);
        if (i >= r->nparts) break;
        const obj_ref_part_t *p = &r->parts[i];
        char key[128];
        obj_ref_key(r, &r->objs[p->obj], key, sizeof key);
        dcr__flow_t flow;
        dcr__flow_cross(&flow, r->s->base.links, -1, a->who, NULL, 0);
        dcr_objstore_pace_t pace = {obj_pace, &flow};
        obj_request(&obj_gets);
        dcr_status_t st = dcr_objstore_get_range(r->s->store, key, p->off, p->len, buf, &pace);
        if (st == DCR_OK && memcmp(buf, r->pattern + p->off, p->len) != 0)
            st =
                dcr_error_set(DCR_ETRANSPORT, "%s bytes [%" PRIu64 ", +%zu) differ from the upload",
                              key, p->off, p->len);
        if (st != DCR_OK) {
            obj_ref_fail(r, st);
            break;
        }
    }
    free(buf);
    return NULL;
}

/* Runs fn on n threads with args[i] and joins them. */
static dcr_status_t obj_ref_run(obj_ref_t *r, void *(*fn)(void *), obj_ref_arg_t *args, int n)
{
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (th == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: %d threads", n);
    int started = 0;
    while (started < n && dcr_thread_start(&th[started], DCR_THREAD_TRANSPORT, fn, &args[started],
                                           "dcr-ref-%d", started) == 0)
        started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    if (started < n)
        return dcr_error_set(DCR_ENOMEM, "objstore reference: cannot start %d threads", n);
    if (r->st != DCR_OK) return dcr_error_set(r->st, "%s", r->msg);
    return DCR_OK;
}

/* Splits each training node's share among its owners, in objects of at most
 * OBJ_REF_OBJECT bytes; downloads fetch them in parts of OBJ_REF_PART bytes
 * where the store serves ranges, else whole. */
static dcr_status_t obj_ref_plan(obj_ref_t *r, const int64_t *per_node_bytes)
{
    const dcr_transport_config_t *c = &r->s->base.cfg;
    int per = c->world / c->train_nodes;
    size_t cap = 0;
    for (int i = 0; i < c->train_nodes; i++)
        cap += (size_t)per_node_bytes[i] / OBJ_REF_OBJECT + (size_t)per;
    r->objs = calloc(cap ? cap : 1, sizeof *r->objs);
    if (r->objs == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: %zu objects", cap);
    for (int i = 0; i < c->train_nodes; i++) {
        for (int j = 0; j < per; j++) {
            uint64_t share = (uint64_t)per_node_bytes[i] / (uint64_t)per;
            if (j == 0) share += (uint64_t)per_node_bytes[i] % (uint64_t)per;
            for (int k = 0; share > 0; k++) {
                size_t n = share < OBJ_REF_OBJECT ? (size_t)share : OBJ_REF_OBJECT;
                r->objs[r->nobjs++] = (obj_ref_obj_t){i * per + j, k, n};
                share -= n;
            }
        }
    }
    r->part_max = dcr_objstore_props(r->s->store)->ranged_get ? OBJ_REF_PART : OBJ_REF_OBJECT;
    size_t nparts = 0;
    for (size_t i = 0; i < r->nobjs; i++)
        nparts += (r->objs[i].len + r->part_max - 1) / r->part_max;
    r->parts = calloc(nparts ? nparts : 1, sizeof *r->parts);
    if (r->parts == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: %zu parts", nparts);
    for (size_t i = 0; i < r->nobjs; i++) {
        for (size_t off = 0; off < r->objs[i].len; off += r->part_max) {
            size_t n = r->objs[i].len - off < r->part_max ? r->objs[i].len - off : r->part_max;
            r->parts[r->nparts++] = (obj_ref_part_t){i, off, n};
        }
    }
    return DCR_OK;
}

static dcr_status_t obj_ref_transfer(obj_ref_t *r, double *seconds_p)
{
    const dcr_transport_config_t *c = &r->s->base.cfg;
    int nup = c->world, ndown = c->rollout_nodes * OBJ_FLOWS;
    obj_ref_arg_t *args = calloc((size_t)(nup > ndown ? nup : ndown), sizeof *args);
    if (args == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: thread arguments");
    double t0 = dcr_clock_s();
    for (int i = 0; i < nup; i++) args[i] = (obj_ref_arg_t){r, i};
    dcr_status_t st = obj_ref_run(r, obj_ref_upload, args, nup);
    /* Downloads start once the checkpoint is stored, as in the seed's reference. */
    for (int i = 0; i < ndown; i++) args[i] = (obj_ref_arg_t){r, i / OBJ_FLOWS};
    if (st == DCR_OK) st = obj_ref_run(r, obj_ref_download, args, ndown);
    double t1 = dcr_clock_s();
    free(args);
    if (st == DCR_OK) *seconds_p = t1 - t0;
    return st;
}

static dcr_status_t obj_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                  double *seconds_p)
{
    objstore_t *s = (objstore_t *)t;
    obj_ref_t r = {.s = s};
    pthread_mutex_init(&r.mu, NULL);
    snprintf(r.prefix, sizeof r.prefix, "reference-%d-%u/", (int)getpid(),
             atomic_fetch_add(&s->seq, 1));
    uint8_t *pattern = malloc(OBJ_REF_OBJECT);
    r.next = calloc((size_t)s->base.cfg.rollout_nodes, sizeof *r.next);
    dcr_status_t st = pattern && r.next ? DCR_OK : dcr_error_set(DCR_ENOMEM, "objstore reference");
    if (st == DCR_OK) {
        for (size_t i = 0; i < OBJ_REF_OBJECT; i++) pattern[i] = (uint8_t)(i * 131u + 7u);
        r.pattern = pattern;
        st = obj_ref_plan(&r, per_node_bytes);
    }
    if (st == DCR_OK) st = obj_ref_transfer(&r, seconds_p);
    if (dcr_objstore_delete_prefix(s->store, r.prefix) != DCR_OK)
        DCR_LOG_WARN("objstore reference: removing %s of %s: %s", r.prefix, s->base.dir,
                     dcr_error_detail());
    free(r.objs);
    free(r.parts);
    free(r.next);
    free(pattern);
    pthread_mutex_destroy(&r.mu);
    return st;
}

/* ---- lifetime ----------------------------------------------------------- */

static void obj_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p)
{
    dcr__tbase_counters(&((objstore_t *)t)->base, out_p);
}

static void obj_destroy(dcr_transport_t *t)
{
    objstore_t *s = (objstore_t *)t;
    if (s->nodes != NULL) obj_train_stop(s);
    for (int i = 0; s->nodes != NULL && i < s->nnodes; i++) obj_node_fini(&s->nodes[i]);
    free(s->nodes);
    /* A joining handle leaves clearing to the clearing one. */
    if (s->have_prefix && !s->base.cfg.keep_objects && !s->base.cfg.join)
        obj_remove_attempt(s, s->tau);
    dcr_objstore_destroy(s->store);
    dcr__ledger_fini(&s->ledger);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    dcr__tbase_fini(&s->base);
    free(s);
}

static dcr_status_t obj_create(const dcr_transport_ops_t *self, const dcr_transport_config_t *cfg,
                               dcr_transport_t **out_p)
{
    (void)self;
    objstore_t *s = calloc(1, sizeof *s);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: allocation failed");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->base.pub.ops = &dcr__transport_objstore_ops;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr__tbase_init(&s->base, cfg), st, fail);
    DCR_CHECK_GOTO(dcr__ledger_init(&s->ledger, cfg->world), st, fail);
    dcr_objstore_config_t oc = {.url = cfg->dir, .s3_endpoint = cfg->s3_endpoint};
    DCR_CHECK_GOTO(dcr_objstore_create(&oc, &s->store), st, fail);
    if (cfg->owner_count > 0 && cfg->owner_count < cfg->world)
        dcr__obj_manifest_part_name(cfg->owner_first, cfg->owner_count, s->manifest_name,
                                    sizeof s->manifest_name);
    else
        snprintf(s->manifest_name, sizeof s->manifest_name, "MANIFEST");
    s->nnodes = cfg->send_only ? 0 : cfg->rollout_nodes;
    s->nodes = calloc((size_t)(s->nnodes ? s->nnodes : 1), sizeof *s->nodes);
    if (s->nodes == NULL) {
        st = dcr_error_set(DCR_ENOMEM, "objstore: %d rollout nodes", cfg->rollout_nodes);
        goto fail;
    }
    for (int i = 0; i < s->nnodes; i++) DCR_CHECK_GOTO(obj_node_init(s, &s->nodes[i], i), st, fail);
    *out_p = &s->base.pub;
    return DCR_OK;
fail:
    obj_destroy(&s->base.pub);
    return st;
}

const dcr_transport_ops_t dcr__transport_objstore_ops = {
    .hdr = {.version = DCR_TRANSPORT_OPS_VERSION, .name = "objstore"},
    .props = {.durable_store = true, .split_handles = true},
    .create = obj_create,
    .open_attempt = obj_open_attempt,
    .send = obj_send,
    .finish = obj_finish,
    .recv = obj_recv,
    .release = obj_release,
    .stop_and_wait = obj_stop_and_wait,
    .reference = obj_reference,
    .counters = obj_counters,
    .destroy = obj_destroy,
};
