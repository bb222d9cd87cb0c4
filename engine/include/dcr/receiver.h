/* A receiver: one rollout rank whose resident storage P_r = L_r(W) is
 * written only by its native loader L_r, and which applies delta payloads
 * through that loader bit-exactly.
 *
 * Life cycle: create (the loader declares the resident parameters), a dense
 * load of every canonical tensor, prewarm (a probe run of the loader that
 * classifies every canonical tensor on this rank), then per attempt:
 * begin_attempt(tau), payloads in (directly or through the staging queue),
 * optional post-apply check.
 *
 * Apply of one item: XOR items reconstruct new bits from the resident ones,
 * overwrite items supply them. Where the loader's path from the tensor to
 * storage is storage-sharing views only, the receiver replays the copies
 * its prewarm probe intercepted from the loader (or, with loader_per_item,
 * runs the loader again and holds it to them) and at each copy touches only
 * the item's positions (sparse apply: cost follows the changed set). Otherwise it scatters the item
 * into a scratch tensor (XOR: masks, 0 elsewhere; overwrite: values, NaN placeholder elsewhere),
 * runs the loader over it, and at each intercepted copy applies the active positions, the active
 * mask fixed at the first copy into each destination view. Overwrite records whose value is itself
 * NaN (it would read as the placeholder) are applied in a second, tracked pass, in which the load
 * context carries an exact activity map beside the values; the tracked pass also takes over when a
 * transform turns a value into NaN or does not keep NaN as NaN.
 *
 * Threading: one thread may ingest (dcr_receiver_ingest*) while another
 * applies staged payloads (dcr_receiver_apply_staged); every other call is
 * made from one thread while neither runs. */
#ifndef DCR_RECEIVER_H
#define DCR_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/inventory.h"
#include "dcr/loader.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Staging queue geometry (the seed's receivers). */
#define DCR_STAGE_GROUPS     32 /* resident groups of decoded payloads */
#define DCR_STAGE_GROUP_SIZE 8  /* payloads per group; one more group is under assembly */

/* How the native loader treats one canonical tensor on this rank. */
typedef enum dcr_path_class {
    DCR_PATH_SKIPPED = 0,     /* explicit skip: nothing of it is resident here */
    DCR_PATH_XOR = 1,         /* every copy_ reads a view of the tensor in its own dtype, and
                                 its bytes are disjoint from every other write */
    DCR_PATH_OVERWRITE = 2,   /* casts, cats, elementwise maps or overlapping copies */
    DCR_PATH_UNSUPPORTED = 3, /* rejected in advance */
    DCR_PATH_COUNT
} dcr_path_class_t;

typedef struct dcr_path_info {
    dcr_path_class_t cls;
    bool views_only;       /* every copy_ reads a view of the tensor: sparse apply possible */
    bool placeholder_safe; /* every op on the path keeps a NaN placeholder NaN */
    size_t copies, fills;  /* intercepted in the probe */
    const char *op;        /* the operation that decided the class, or "" */
    const char *reason;    /* why (overwrite, unsupported, skipped), or "" */
} dcr_path_info_t;

typedef enum dcr_mask_mode {
    /* The seed's: the active mask comes from the NaN placeholder; records
     * whose value is NaN go through a tracked second pass. */
    DCR_MASK_PLACEHOLDER = 0,
    /* Every full-pass overwrite uses the tracked activity map. */
    DCR_MASK_TRACKED = 1,
} dcr_mask_mode_t;

typedef struct dcr_receiver_config {
    const char *loader;               /* registered loader name */
    const void *loader_config;        /* backend config, borrowed during create */
    const dcr_inventory_t *inventory; /* canonical inventory; must outlive the receiver */
    /* Parameters and scratch without data: only prewarm classification is
     * possible (full-size models on a small machine). */
    bool shape_only;
    /* Disable sparse apply: every item takes the scratch + full loader pass,
     * as in the seed (for comparison and benchmarks). */
    bool full_pass;
    /* Run the native loader for every item on views-only paths too, holding
     * each run's writes to the prewarm probe's (a loader whose path changed
     * since prewarm fails the attempt). Off: such items replay the copies the
     * probe intercepted from the loader (placement is still the loader's),
     * which saves the loader's per-item cost (about 1.7 us an item on the
     * vLLM-like loaders: names built and matched). Other paths always run
     * the loader. */
    bool loader_per_item;
    dcr_mask_mode_t mask;
    /* Keep the written regions of the current attempt for dcr_receiver_check. */
    bool track_written;
    /* Where resident storage, scratch, the activity map and the record
     * application live (engine/device): NULL or "cpu", "cuda" or "auto".
     * On a device the host cannot address (cuda) the parameters live in
     * one device arena, dense loads go up through scratch and equal,
     * digests and check read back through copies; the loader's cast, cat
     * and maps of the closed set run on the device (dcr/loader.h), and
     * converting copies too. dcr_load_map with a host function and
     * blockwise, overlapping copies and converting XOR copies in a delta
     * pass and repeated copies into one view of an overwrite pass run on
     * host memory only, so a tensor whose path needs them fails its dense
     * load or item with DCR_EUNSUPPORTED naming it. Resident files need a
     * host device. */
    const char *device;
    /* The pinned staging area records go up through on a device the host
     * cannot address: a full area drains the stream (one more sync) and is
     * reused, growing only for a request larger than it. 0: it starts at
     * 1 MiB and doubles with the load up to 64 MiB. Small values are for
     * tests of the drain. */
    size_t staging_bytes;
    /* This receiver's number in its cluster: the tag of its device stream
     * in the NVTX ranges ("apply receiver=3 ..."); 0 by default. */
    int id;
} dcr_receiver_config_t;

typedef struct dcr_receiver dcr_receiver_t;

/* Creates the receiver and its loader (which declares the resident
 * parameters, zeroed) and reserves scratch for the largest canonical tensor. */
dcr_status_t dcr_receiver_create(const dcr_receiver_config_t *cfg, dcr_receiver_t **out_p);
/* Frees the loader, parameters, scratch and staging; accepts NULL. */
void dcr_receiver_destroy(dcr_receiver_t *r);

/* The resident parameters (valid while the receiver lives). */
const dcr_params_t *dcr_receiver_params(const dcr_receiver_t *r);

/* Dense load: runs the loader over one canonical tensor with plain writes.
 * `tensor` must have the inventory's shape and dtype. */
dcr_status_t dcr_receiver_load_dense(dcr_receiver_t *r, const char *name, const dcr_view_t *tensor);
/* Dense load of every canonical tensor; canonical[i] holds inventory tensor i
 * (contiguous, canonical dtype). A fresh receiver after this holds L_r(W). */
dcr_status_t dcr_receiver_load_dense_all(dcr_receiver_t *r, dcr_storage_t *const *canonical);

/* Probe run of the loader over every canonical tensor (no data is read or
 * written), classifying each, then the checks that need all of them: writes
 * of different tensors must not overlap, and every resident element must be
 * written by some intercepted copy_ or fill_. Fails with DCR_EUNSUPPORTED
 * naming the first unsupported tensor, the operation and the reason (the
 * classification stays readable); apply needs a successful prewarm. */
dcr_status_t dcr_receiver_prewarm(dcr_receiver_t *r);
/* Classification of inventory tensor i after prewarm. DCR_EINVAL before
 * prewarm or out of range. Strings live as long as the receiver. */
dcr_status_t dcr_receiver_path(const dcr_receiver_t *r, size_t i, dcr_path_info_t *out_p);
/* Tensors per class after prewarm (counts[DCR_PATH_COUNT]). */
void dcr_receiver_path_counts(const dcr_receiver_t *r, size_t *counts);

/* Starts attempt tau: staged payloads of older attempts are dropped, the
 * duplicate set and written regions are cleared, a failed state is lifted.
 * Later payloads carrying an older tau are ignored (stale); a newer tau than
 * the current attempt is ignored too (foreign). tau must not decrease. */
dcr_status_t dcr_receiver_begin_attempt(dcr_receiver_t *r, uint64_t tau);

/* What happened to an incoming payload. */
typedef enum dcr_ingest {
    DCR_INGEST_ACCEPTED = 0,  /* applied (or staged) */
    DCR_INGEST_DUPLICATE = 1, /* same (tau, owner, payload id) seen in this attempt */
    DCR_INGEST_STALE = 2,     /* tau of an older attempt */
    DCR_INGEST_FOREIGN = 3,   /* tau of no attempt this receiver has begun */
} dcr_ingest_t;

/* Validates, deduplicates, decodes and applies one payload (no staging).
 * Items of tensors skipped on this rank are ignored. Errors: DCR_EPAYLOAD /
 * DCR_EDIGEST for bad bytes or items that contradict the inventory or the
 * rank's path (nothing applied); DCR_ERECEIVER when the loader breaks a
 * condition during apply (the attempt is failed: every later payload of it
 * is refused with DCR_EATTEMPT, and an overwrite retry repairs the storage).
 * Its items' device work completes in one sync before it returns, and an
 * error there (DCR_EIO naming the device call) fails the attempt the same
 * way: an accepted payload is applied. */
dcr_status_t dcr_receiver_apply_payload(dcr_receiver_t *r, const void *buf, size_t len,
                                        dcr_ingest_t *disposition_p);
/* Applies item i of a decoded payload (for harnesses that decode themselves).
 * Its device work is only queued (on cuda it runs behind the call): it counts
 * as applied, and a device error surfaces, at the next dcr_receiver_sync
 * (apply_payload and apply_staged end with one; every read of resident
 * bytes waits for it too, and begin_attempt drains what an attempt left,
 * dropping its error with that attempt). p may be reused at once: the records
 * went into the receiver's staging. */
dcr_status_t dcr_receiver_apply_item(dcr_receiver_t *r, const dcr_payload_t *p, size_t i);
/* Waits for the device work queued by applies since the last sync (one sync
 * of the receiver's stream, so items' copies overlap earlier items'
 * kernels). An error names the device call and fails the attempt like any
 * apply failure: the storage may be half-applied, later payloads of the
 * attempt are refused with DCR_EATTEMPT. */
dcr_status_t dcr_receiver_sync(dcr_receiver_t *r);

/* Staging, producer side: validates and deduplicates like apply_payload, then
 * decodes into the group under assembly; a full group joins the resident
 * groups. Blocks while all resident groups are taken (back-pressure), up to
 * timeout_ms (< 0: forever), then DCR_ETIMEOUT with nothing consumed. */
dcr_status_t dcr_receiver_ingest(dcr_receiver_t *r, const void *buf, size_t len, int timeout_ms,
                                 dcr_ingest_t *disposition_p);
/* Hands the partly filled group under assembly to the applier. */
dcr_status_t dcr_receiver_ingest_flush(dcr_receiver_t *r, int timeout_ms);
/* Staging, consumer side: applies resident groups in arrival order until
 * none arrives within timeout_ms; *applied_p counts payloads applied. */
dcr_status_t dcr_receiver_apply_staged(dcr_receiver_t *r, int timeout_ms, size_t *applied_p);
/* Payloads currently staged (resident groups plus the one under assembly). */
size_t dcr_receiver_staged(dcr_receiver_t *r);

/* Post-apply check: the regions written in this attempt (needs
 * track_written) compared by BLAKE2b digest with the same regions of
 * `expected`, a receiver with the same loader configuration holding the
 * expected storage (a dense refit). DCR_EMISMATCH names the first differing
 * parameter. Timed separately (stats.check_s). */
typedef struct dcr_check_result {
    size_t regions; /* parameters with written regions */
    size_t bytes;   /* bytes digested on this receiver */
    double seconds;
} dcr_check_result_t;
dcr_status_t dcr_receiver_check(dcr_receiver_t *r, const dcr_receiver_t *expected,
                                dcr_check_result_t *out_p);

typedef struct dcr_receiver_stats {
    /* ingest side */
    uint64_t payloads_in, duplicates, stale, foreign, rejected;
    /* Of rejected: payloads refused for their keying or keyed digest
     * (forged, unkeyed under a key, keyed differently, keyed with no key). */
    uint64_t unauthenticated;
    /* apply side */
    uint64_t payloads_applied, stale_dropped;
    uint64_t items_applied, items_skipped;
    uint64_t items_sparse, items_full, items_tracked; /* how applied items ran */
    uint64_t records_applied;
    /* Syncs of the receiver's stream that completed applied items: one per
     * apply_payload / apply_staged / dcr_receiver_sync call with work queued,
     * plus one whenever staging fills up within a call. */
    uint64_t apply_syncs;
    double apply_s, check_s;
} dcr_receiver_stats_t;

void dcr_receiver_stats(const dcr_receiver_t *r, dcr_receiver_stats_t *out_p);

/* The largest raw payload body r accepts (dcr_payload_policy_t.max_raw):
 * every tensor of its inventory fully changed, at the widest gap words. A
 * caller that decodes payloads meant for r (a restore's checks) bounds its
 * decode by it too. */
uint64_t dcr_receiver_payload_bound(const dcr_receiver_t *r);

/* Sets the payload key this receiver verifies with (copied): from then on it
 * accepts only payloads keyed with it, and counts the others in
 * stats.unauthenticated (and stats.rejected). NULL or an unset key: only
 * unkeyed payloads are accepted, and keyed ones are refused as unverifiable.
 * Call before the first payload arrives (not concurrently with ingest). */
void dcr_receiver_set_payload_key(dcr_receiver_t *r, const dcr_payload_key_t *key);

/* Compares the resident bytes of two receivers with the same parameters,
 * every byte of every parameter. Returns true when equal; otherwise, when not
 * NULL, *param_p names the first differing parameter and *elem_p the first
 * differing element. A parameter without data on either side (a shape-only
 * receiver) is a difference (*elem_p -1), never skipped; so are different
 * parameter sets (*param_p "(different parameter sets)"). */
bool dcr_receiver_equal(const dcr_receiver_t *a, const dcr_receiver_t *b, const char **param_p,
                        int64_t *elem_p);

/* Compares the resident bytes with what a dense load of `canonical` (as in
 * dcr_receiver_load_dense_all) would leave, without a second receiver: the
 * loader runs over every canonical tensor and each final write is compared
 * with the resident bytes instead of written (a copy_ converted as copy_
 * converts; a fill_ where no later write of its tensor lands). After a
 * successful prewarm every resident element is written by some intercepted
 * write and writes of different tensors never share one, so every resident
 * byte is compared: the answer is dcr_receiver_equal against a fresh receiver
 * dense-loaded from `canonical`, at the memory of the loader's temporaries.
 * *equal_p false: *param_p (when not NULL) names the first differing
 * parameter and *elem_p its element. DCR_EINVAL for a shape-only receiver or
 * before a successful prewarm; DCR_EUNSUPPORTED for resident storage the host
 * cannot address (compare with dcr_receiver_equal there); a loader error is
 * returned as it is. Call while nothing applies. */
dcr_status_t dcr_receiver_compare_dense(dcr_receiver_t *r, dcr_storage_t *const *canonical,
                                        bool *equal_p, const char **param_p, int64_t *elem_p);

/* ---- digests: bit-exactness across processes (DESIGN.md section 11) ---- */

/* Bytes of one parameter's digest (BLAKE2b-256). */
#define DCR_PARAM_DIGEST_BYTES 32

/* One digest per resident parameter, in the loader's declaration order
 * (which is the same for every receiver of one loader configuration). */
typedef struct dcr_param_digests {
    size_t count;
    char **names;                               /* owned copies */
    uint8_t (*digests)[DCR_PARAM_DIGEST_BYTES]; /* BLAKE2b-256 of every byte */
} dcr_param_digests_t;

/* The digest of every byte of every resident parameter into *out_p (free with
 * dcr_param_digests_free). DCR_EINVAL for a receiver without data
 * (shape-only): nothing is skipped. Call while nothing applies. */
dcr_status_t dcr_receiver_digests(const dcr_receiver_t *r, dcr_param_digests_t *out_p);
/* Frees what digests, decode or a caller filled in and zeroes *d; accepts
 * NULL and a zeroed struct. */
void dcr_param_digests_free(dcr_param_digests_t *d);
/* Wire form (magic, names, digests, a BLAKE2b checksum of the whole) for a
 * file or a control-plane report; *buf_p is malloc'd, the caller frees it. */
dcr_status_t dcr_param_digests_encode(const dcr_param_digests_t *d, uint8_t **buf_p, size_t *len_p);
/* Parses the wire form; DCR_EPAYLOAD for a malformed one, DCR_EDIGEST for a
 * damaged one. Never reads past len. */
dcr_status_t dcr_param_digests_decode(const uint8_t *buf, size_t len, dcr_param_digests_t *out_p);
/* DCR_OK when actual has the same parameters (names, order) and digests as
 * expected; otherwise DCR_EMISMATCH naming `who` (e.g. "receiver 3") and the
 * first differing parameter. */
dcr_status_t dcr_param_digests_compare(const dcr_param_digests_t *expected,
                                       const dcr_param_digests_t *actual, const char *who);

#ifdef __cplusplus
}
#endif
#endif
