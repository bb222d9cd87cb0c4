/* Delta construction on the training side (DESIGN.md section 5, step 3).
 *
 * A constructor holds the committed source baseline B^v of every owner: task
 * trackers (the committed values of each owned task's shard elements, kept in
 * box-map order) and the residual baseline R^v (the committed canonical
 * tensors of residual tasks, kept by their residual-baseline owners). A run
 * compares a candidate (every shard's current values) with B^v, projects the
 * changed elements of affine tasks to canonical (name, flat index) records,
 * rebuilds the required residual tensors from parts sent through the group
 * interface, and packs the records into buckets, each encoded, compressed and
 * digested into one payload handed to a sink while the owner builds the next
 * one. B^v changes only in dcr_constructor_commit, after a joint commit.
 * (Where trackers are host memory, a run already writes the words it finds
 * changed into them, logging what it overwrote, so that the commit on the
 * refit's path has almost nothing left to copy; the next run puts back
 * what an uncommitted one wrote before it compares. The log holds about
 * 2 + element-size bytes a changed element, at most 1/12 of the owner's
 * tracker bytes; past that the rest is copied at the commit as before.)
 *
 * In this process every training rank is an owner thread; the shards are
 * held once per shard identity because data-parallel replicas are bitwise
 * identical (the owner of a task reads its shard). */
#ifndef DCR_CONSTRUCT_H
#define DCR_CONSTRUCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/source.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

typedef enum dcr_construct_mode {
    DCR_MODE_X = 0, /* direct projection, XOR where the policy allows, else overwrite */
    DCR_MODE_P = 1, /* direct projection, overwrite only */
    DCR_MODE_F = 2, /* full conversion of every tensor, overwrite only */
} dcr_construct_mode_t;

dcr_status_t dcr_construct_mode_parse(const char *text, dcr_construct_mode_t *out_p);
const char *dcr_construct_mode_name(dcr_construct_mode_t mode);

/* The seed's targets (Appendix C): chunks of 64 MiB (object storage) or
 * 256 MiB (relay tree) of source bytes, buckets of 512 MiB of chunk input. */
#define DCR_CHUNK_BYTES_OBJSTORE ((size_t)64 << 20)
#define DCR_CHUNK_BYTES_RELAY    ((size_t)256 << 20)
#define DCR_BUCKET_BYTES         ((size_t)512 << 20)

typedef struct dcr_construct_config {
    dcr_construct_mode_t mode;
    size_t chunk_bytes;  /* tensors are never split, so a chunk can exceed it */
    size_t bucket_bytes; /* counts the full input of every chunk that emits records */
    /* Target of each owner's first payload of a run (chunks within it are
     * cut to it too): smaller than the rest, so the rollout side's links
     * start moving bytes after a fraction of a bucket's construction and
     * upload rather than a whole one. 0: bucket_bytes / 4. */
    size_t first_bucket_bytes;
    int zstd_level;
    bool shuffle;    /* byte-plane shuffle of value and gap words */
    int queue_depth; /* finished payloads an owner may have waiting for its sender (>= 1) */
    dcr_payload_key_t payload_key; /* unset: plain digests; set: every payload is keyed */
    /* Where owners keep trackers and compare (engine/device): NULL or "cpu",
     * "cuda", "auto". Candidates stay in host memory; on a device the host
     * cannot address each compared run goes up and only the changed words
     * come back for projection. */
    const char *device;
} dcr_construct_config_t;

/* Mode X, object-storage chunk target, 512 MiB buckets (the first a quarter
 * of that), zstd 1, shuffle, depth 2. */
dcr_construct_config_t dcr_construct_config_default(void);

/* The target of each owner's first payload of a run as the constructor
 * resolves it: cfg->first_bucket_bytes, or bucket_bytes / 4 (at least 1)
 * when 0; never above bucket_bytes. The simulator packs with it too. */
size_t dcr_construct_first_bucket_bytes(const dcr_construct_config_t *cfg);

/* Owners whose trackers are host memory keep an undo log of the words an
 * attempt wrote into them (the in-place baseline update) of at most
 * 1/DCR_CONSTRUCT_UNDO_SHARE of their tracker bytes; what it cannot hold the
 * commit copies instead. Memory estimates count it. */
#define DCR_CONSTRUCT_UNDO_SHARE 12

/* Where finished payloads go. submit is called from owner sender threads,
 * one call at a time per owner, possibly concurrently across owners; buf is
 * valid only during the call (the sink copies or sends it). It may block for
 * back-pressure; an error fails the run. */
typedef struct dcr_payload_sink {
    dcr_status_t (*submit)(void *ctx, int owner, uint64_t payload_id, const uint8_t *buf,
                           size_t len);
    void *ctx;
} dcr_payload_sink_t;

/* Per-run figures, summed over owners. */
typedef struct dcr_construct_stats {
    double construction_s;           /* first owner start to last payload submitted */
    int64_t compared_elements;       /* owned source elements compared (N_src) */
    int64_t changed_elements;        /* source elements whose bits changed (N_chg) */
    int64_t records;                 /* emitted destinations |D| (all items) */
    int64_t raw_changed_value_bytes; /* one value word per record */
    int64_t payload_bytes;           /* headers + compressed bodies */
    int64_t body_raw_bytes;          /* bodies before compression */
    int64_t value_bytes;             /* value buffer bytes before compression */
    int64_t payloads;
    int64_t xor_items, overwrite_items;
    int64_t residual_tensors; /* |U_req| rebuilt this run */
} dcr_construct_stats_t;

typedef struct dcr_constructor dcr_constructor_t;

/* Builds trackers and residual baselines from the committed shards
 * (baseline[i] holds layout->shards[i]); the constructor copies what it keeps
 * and does not retain baseline. The layout must outlive the constructor. */
dcr_status_t dcr_constructor_create(const dcr_source_layout_t *layout,
                                    const dcr_construct_config_t *cfg,
                                    dcr_storage_t *const *baseline, dcr_constructor_t **out_p);
/* Accepts NULL. */
void dcr_constructor_destroy(dcr_constructor_t *c);

/* Bytes the baseline holds (trackers + residual baseline), for the ~1.03x figure. */
size_t dcr_constructor_baseline_bytes(const dcr_constructor_t *c);

/* One construction run of attempt tau over candidate[i] (layout->shards[i]).
 * xor_allowed[c] (per canonical tensor, may be NULL = none) says which
 * tensors every receiver can take as XOR; all_overwrite forces overwrite
 * records everywhere (retries). Payload ids start at 0 per owner. The
 * candidate must stay unchanged until commit or the next run. */
dcr_status_t dcr_constructor_run(dcr_constructor_t *c, dcr_storage_t *const *candidate,
                                 uint64_t tau, const uint8_t *xor_allowed, bool all_overwrite,
                                 const dcr_payload_sink_t *sink,
                                 dcr_construct_stats_t *out_stats_p);

/* sum += s for every count (construction_s, a time, is left to the caller:
 * the slowest owner's, or the run's wall time). */
void dcr_construct_stats_add(dcr_construct_stats_t *sum, const dcr_construct_stats_t *s);

/* An owner process of a multi-process training job (DESIGN.md section 11):
 * from now on runs and commits of c cover only owner dcr_group_rank(g), its
 * exchanges with the other owners going through g, a borrowed endpoint of a
 * group with one rank per owner (an "mpi" endpoint); every rank calls run
 * with the same tau, candidate version and flags. Statistics are this
 * owner's. NULL returns to every owner in this process (an "inproc" group
 * per run). DCR_EINVAL when g's size is not the layout's world. Call
 * between runs. */
typedef struct dcr_group dcr_group_t;
dcr_status_t dcr_constructor_set_group(dcr_constructor_t *c, dcr_group_t *g);

/* After a joint commit: updates trackers and residual baseline in place from
 * the candidate of the last successful run (copying only what that run did
 * not write already). Fails if no run preceded it. */
dcr_status_t dcr_constructor_commit(dcr_constructor_t *c);

/* ---- repair records (issue 19) -------------------------------------------
 * A receiver that died mid-apply holds a mixture of B^v and its attempt's
 * writes; XOR records cannot repair it (they flip whatever it holds), the
 * complete overwrite records of the committed version can (the seed's retry
 * sends exactly those). With keeping on, every run keeps, per owner, its
 * records in overwrite form: canonical index and new value (for an XOR
 * record the candidate's word, which projection computes anyway), a copy
 * of each item as it goes to the encoder, so nothing is encoded twice in
 * the window. dcr_constructor_commit turns the committed run's records into
 * a repair set; the caller encodes and stores it after the commit, off the
 * refit's critical path (dcr_repair_records_encode). */
typedef struct dcr_repair_records dcr_repair_records_t;

/* Turns record keeping on or off (off by default; off frees what was kept).
 * Call between runs. Memory: each run since the last commit keeps its
 * records (index and value, about 8 + 2 x value bytes a record). */
void dcr_constructor_keep_records(dcr_constructor_t *c, bool on);

/* After dcr_constructor_commit with keeping on: the committed run's records,
 * with those of the earlier runs from the same baseline for the coverage
 * (ownership passes to the caller; *out_p NULL when none were kept). Until
 * taken the set stays in the constructor; the next commit replaces it. */
void dcr_constructor_take_repair(dcr_constructor_t *c, dcr_repair_records_t **out_p);

/* The attempt whose run committed (the payloads' tau). */
uint64_t dcr_repair_records_tau(const dcr_repair_records_t *r);

/* The coverage of the set: every run from the same baseline with tau in
 * [covers_from, tau] emitted, per owner, only records whose positions the
 * committed run's records hold (checked item by item, not assumed: a run
 * over another candidate, or one whose items differ, is not covered). A
 * receiver dirty from such an attempt is brought to the committed version
 * by the set, whatever part of its attempt landed. Runs this constructor
 * did not see (before it was created) are never covered. Computed at the
 * first call (a walk over the runs' records: call it where the set is
 * stored, not in the commit's critical path). */
uint64_t dcr_repair_records_covers_from(dcr_repair_records_t *r);

/* Records and value bytes the set holds (the raw changed values). */
void dcr_repair_records_size(const dcr_repair_records_t *r, int64_t *records_p,
                             int64_t *value_bytes_p);

/* Encodes the set as overwrite payloads stamped with its tau, one owner at
 * a time, payload ids from 0 per owner, cut at cfg->bucket_bytes of raw
 * body, compressed and keyed as cfg says, each handed to sink from the
 * calling thread (any thread: the set is independent of the constructor,
 * but the layout's inventory must outlive it). stats_p (may be NULL) gets
 * records, value, payload and body bytes and the time taken. */
dcr_status_t dcr_repair_records_encode(const dcr_repair_records_t *r,
                                       const dcr_construct_config_t *cfg,
                                       const dcr_payload_sink_t *sink,
                                       dcr_construct_stats_t *stats_p);

/* Accepts NULL. */
void dcr_repair_records_destroy(dcr_repair_records_t *r);

/* ---- change detection of one tensor (issue 31) ---------------------------
 * For owners that hold their tensors outside a constructor (the Python
 * package's owners over a trainer's tensors): the constructor's own
 * detection (dcr_detect_changes, dcr/device.h: stored bits, never values,
 * so -0.0 against +0.0 and NaN payloads count; the widest SIMD kernel the
 * CPU runs), in the same sub-runs, over two versions of one canonical
 * tensor, with the records it emits for them: ascending flat indices and,
 * per record, the new word (overwrite) or old ^ new (XOR). */

/* Compares before and now, numel words of dtype each, from element
 * *from_p on, and writes the records of the changed elements to
 * indices[0, *count_p) and values[0, *count_p) (words of dtype's size).
 * Stops at numel, or before a sub-run (up to 2^20 elements) whose records
 * might not fit in the cap - *count_p entries left, so that nothing is
 * compared twice; *from_p is then the first element not compared: call
 * again from there (with room) until it equals numel. A first sub-run
 * larger than cap is shortened to cap, so every call with cap >= 1
 * progresses; cap >= 2^20 keeps sub-runs whole. DCR_EINVAL (nothing
 * written) for an unknown dtype or encoding, numel < 0, *from_p outside
 * [0, numel], or cap == 0 while elements remain; DCR_ENOMEM. */
dcr_status_t dcr_construct_diff(const void *before, const void *now, int64_t numel,
                                dcr_dtype_t dtype, dcr_encoding_t encoding, int64_t *from_p,
                                int64_t *indices, void *values, size_t cap, size_t *count_p);

#endif
