/* Internals of the receiver module shared by its files. */
#ifndef DCR_RECEIVER_INTERNAL_H
#define DCR_RECEIVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "core/endian-internal.h"
#include "dcr/device.h"
#include "dcr/map.h"
#include "dcr/queue.h"
#include "dcr/receiver.h"

/* One write the probe saw. Views keep the probe's storages; apply compares
 * only kind, parameter, source kind and geometry. */
typedef struct dcr__pwrite {
    dcr_load_write_kind_t kind;
    dcr_load_source_t source;
    size_t param;
    dcr_view_t dst;
    dcr_view_t src;
} dcr__pwrite_t;

/* One copy_ of a views-only plan as the sparse replay needs it, compiled
 * once after prewarm so that an item touches a few words per copy rather
 * than the probe's views: the source positions the copy can reach and, for
 * a simple copy (one contiguous run of the canonical dtype on both sides,
 * from the input, in a plan without overlapping writes: nearly every copy),
 * the shift from a record's index to its destination element. Other copies
 * replay from their write through the general route. The runs of all plans
 * are one array in inventory order, so consecutive items read neighbouring
 * words. */
typedef struct dcr__run {
    /* The parameter's storage handle (its data may move when the
     * parameters are placed in an arena; the handle does not). */
    dcr_storage_t *dst;
    int64_t lo, hi; /* source storage positions the copy can reach, [lo, hi] */
    int64_t shift;  /* simple: destination element = record index + shift */
    uint32_t write; /* its entry in the plan's writes */
    bool simple;
} dcr__run_t;

/* Per canonical tensor: what the probe learned. */
typedef struct dcr__plan {
    dcr_path_info_t info;
    bool xor_ok;     /* before the cross-write checks */
    bool overlap;    /* its own copies overlap: overwrites must agree */
    bool invertible; /* every copy source maps back to tensor positions (sparse) */
    /* Heap copies, NULL while empty (most tensors): info.op and info.reason
     * point at them, or at "". */
    char *op;
    char *reason;
    dcr__pwrite_t *writes;
    size_t nwrites;
    /* Views-only plans: its copies for the replay, inside the receiver's
     * runs (dcr__replay_compile); NULL otherwise. */
    const dcr__run_t *runs;
    size_t nruns;
} dcr__plan_t;

typedef enum dcr__base {
    DCR__BASE_NONE = 0, /* unknown contents */
    DCR__BASE_ZERO = 1,
    DCR__BASE_NAN = 2, /* the placeholder of base_dtype */
} dcr__base_t;

typedef struct dcr__group {
    dcr_payload_t *slots[DCR_STAGE_GROUP_SIZE];
    size_t n;
} dcr__group_t;

/* Mask fixed at the first copy into a destination view during one call. */
typedef struct dcr__mask {
    size_t param;
    dcr_view_t dst;
    uint8_t *bits; /* one byte per dst element, row-major over dst's shape */
} dcr__mask_t;

struct dcr_receiver {
    dcr_receiver_config_t cfg;
    const dcr_inventory_t *inv;
    dcr_loader_t *loader;
    dcr_params_t *params;
    dcr_load_ctx_t *ctx;

    /* The place of scratch, the activity map and record application, and
     * this receiver's stream on it (engine/device). */
    dcr_device_t *dev;
    dcr_device_stream_t *stream;
    /* Whether the host may read and write dev's buffers. When not (cuda),
     * resident storage is one device arena the parameters are placed in,
     * dense loads go up through scratch, records go up before each pass and
     * every read of resident bytes (equal, digests, check) comes down
     * through copies. */
    bool host;
    void *arena;
    void *fill_word; /* a device word for fill_ (not host) */

    /* Scratch for the largest canonical tensor and its activity map: handles
     * over buffers of dev (dcr__device_storage), data NULL when shape-only. */
    dcr_storage_t *scratch;
    dcr_storage_t *scratch_active; /* allocated on first tracked pass */
    dcr__base_t base;
    dcr_dtype_t base_dtype;
    size_t base_bytes;

    /* Prewarm. */
    bool prewarmed;
    dcr__plan_t *plans; /* one per inventory tensor */
    dcr__run_t *runs;   /* every views-only plan's copies for the replay */
    size_t probe_writes;

    /* Current item being applied. */
    const dcr__plan_t *cur_plan;
    const char *cur_name;
    dcr_encoding_t cur_enc;
    const int64_t *cur_idx;
    const uint8_t *cur_val; /* canonical words */
    size_t cur_count;
    /* The same records as device buffers: cur_idx and cur_val themselves
     * when host, else copies that went up through staging. */
    const int64_t *cur_didx;
    const uint8_t *cur_dval;
    /* Staging (not host): records are packed into pinned host memory and
     * copied up into the device buffer at the same offset, both filled from
     * stage_used on; nothing is overwritten until the stream is drained
     * (dcr__settle, or a full staging area), so items' copies and kernels
     * queue back to back with one sync per settle. */
    void *stage_host, *stage_dev;
    size_t stage_cap, stage_used;
    bool cur_staged; /* cur_didx / cur_dval are in staging */
    /* Items (their records, and payloads) queued since the last settle:
     * they count as applied only once their device work completed. */
    uint64_t pend_items, pend_records, pend_payloads;
    dcr_dtype_t cur_dtype;
    size_t cur_write; /* writes seen in this call, checked against the plan */
    int cur_mode;     /* dcr__apply_mode_t of the running pass */
    dcr__mask_t *masks;
    size_t nmasks, capmasks;
    dcr_map_t wmap;   /* overlapping overwrites: element address -> bits written */
    int64_t *idx_buf; /* NaN / non-NaN split of overwrite records */
    uint8_t *val_buf;
    size_t buf_cap;
    int64_t *dec_idx; /* an item's records as decoded */
    size_t dec_cap;
    size_t *item_c; /* per item of the payload being applied: its canonical tensor */
    size_t item_cap;
    int64_t *map_idx; /* sparse: destinations of the records a copy_ reaches */
    uint8_t *map_val; /* and their words */
    size_t map_cap;

    /* Attempt state. */
    uint64_t tau;
    bool attempt_begun;
    bool attempt_failed;
    dcr_map_t dedup;       /* payloads seen in this attempt: payload id -> owner */
    dcr_payload_t *direct; /* decode target of apply_payload */

    /* Staging. */
    dcr__group_t groups[DCR_STAGE_GROUPS + 1];
    dcr_queue_t *free_q, *ready_q;
    dcr__group_t *assembling;
    _Atomic size_t staged;

    /* Written regions per parameter, [lo, hi) in elements (track_written). */
    int64_t *wlo, *whi;

    dcr_receiver_stats_t stats;
    /* Payload acceptance (dcr_receiver_set_payload_key): policy.key points at
     * key once a key is set, else NULL (unkeyed payloads only). */
    dcr_payload_key_t key;
    dcr_payload_policy_t policy;
};

/* receiver.c: create on a backend table instead of cfg->device (NULL:
 * by name), for tests that run a backend whose props differ from the
 * registered ones (a host-memory table that says host_addressable false). */
dcr_status_t dcr__receiver_create_on(const dcr_device_ops_t *ops, const dcr_receiver_config_t *cfg,
                                     dcr_receiver_t **out_p);

/* prewarm.c */
void dcr__plans_free(dcr_receiver_t *r);

/* receiver.c: a storage handle over a buffer of the receiver's device
 * (zeroed), and its release (NULL: nothing). */
dcr_status_t dcr__device_storage(dcr_receiver_t *r, size_t bytes, dcr_storage_t **out_p);
void dcr__device_storage_free(dcr_receiver_t *r, dcr_storage_t *s);
/* Gives scratch its bytes (zeroed) on first need; nothing for a shape-only
 * receiver, whose scratch never has data. */
dcr_status_t dcr__scratch_ready(dcr_receiver_t *r);
/* Bytes [off, off + bytes) of a parameter as host memory: the storage
 * itself when the host can address it (*owned_p NULL), else a copy brought
 * down (*owned_p is it; free it). */
dcr_status_t dcr__param_read(const dcr_receiver_t *r, const dcr_param_t *p, size_t off,
                             size_t bytes, const void **out_p, void **owned_p);
/* The device's refusal of a loader path it cannot run (host only). */
dcr_status_t dcr__device_unsupported(const dcr_receiver_t *r, const char *name, const char *what);

/* apply.c */
void dcr__apply_free(dcr_receiver_t *r);
/* Waits for the device work of the items queued since the last settle: on
 * success they count as applied; an error fails the attempt (some writes
 * may have landed: only a retry or restore repairs the storage). Staging is
 * free again either way. */
dcr_status_t dcr__settle(dcr_receiver_t *r);
dcr_status_t dcr__apply_records(dcr_receiver_t *r, size_t canonical, dcr_encoding_t enc,
                                const int64_t *idx, const void *values, size_t count);
/* The runs of every views-only plan for the sparse replay (prewarm, once
 * classes and overlaps are final); freed with the plans. */
dcr_status_t dcr__replay_compile(dcr_receiver_t *r);
/* ingest.c */
void dcr__staging_drop(dcr_receiver_t *r);

/* Footprint of a view as ascending element intervals [lo, hi) of its
 * storage; calls emit for each maximal contiguous run it can see without
 * sorting. Views with a non-positive stride on a dimension of extent > 1
 * are refused. */
dcr_status_t dcr__footprint(const dcr_view_t *v,
                            dcr_status_t (*emit)(int64_t lo, int64_t hi, void *arg), void *arg);

/* Records a written region for the post-apply check. */
void dcr__note_written(dcr_receiver_t *r, size_t param, const dcr_view_t *dst);

/* Element words. */
uint64_t dcr__nan_word(dcr_dtype_t dtype);

#endif
