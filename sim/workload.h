/* The simulated workload: what each owner computes, sends and waits for
 * during one refit, and what every payload costs to move and to apply,
 * derived from the real canonical inventory and training layout at full size
 * without allocating a tensor.
 *
 * Owners follow the engine's constructor step by step (engine/construct):
 * scan residual parts for changes, exchange flags (a barrier), pack and send
 * the parts of required residual tensors to their assemblers, compare and
 * project owned affine tasks chunk by chunk, packing records into buckets,
 * then assemble, compare and emit the residual tensors they own. Chunks and
 * buckets follow the engine's rules: a chunk gathers whole tasks until it
 * reaches its target (tensors are never split), a chunk that emits records
 * counts its whole input toward the bucket, and a bucket that reaches its
 * target becomes one payload. Changes are the seed's stress changes: every
 * task changes round(rate x n) of its n elements. */
#ifndef DCR_SIM_WORKLOAD_H
#define DCR_SIM_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"

typedef enum dcr_sim_step_kind {
    DCR_SIM_STEP_COMPUTE = 0,    /* seconds of one core's work */
    DCR_SIM_STEP_BARRIER = 1,    /* residual flags exchanged among all owners */
    DCR_SIM_STEP_SEND_PART = 2,  /* a residual part of `bytes` to owner `peer` */
    DCR_SIM_STEP_RECV_PARTS = 3, /* `count` parts; each costs `seconds` per byte to place */
    DCR_SIM_STEP_FLUSH = 4,      /* payload `payload` is finished and goes to the sender */
} dcr_sim_step_kind_t;

/* What a compute step does, for the lower bounds and for tests. */
typedef enum dcr_sim_work {
    DCR_SIM_WORK_FLAGS = 0,    /* residual parts scanned for changes */
    DCR_SIM_WORK_PACK = 1,     /* a residual part packed for its assembler */
    DCR_SIM_WORK_CHUNK = 2,    /* one chunk compared and projected */
    DCR_SIM_WORK_RESIDUAL = 3, /* one assembled residual tensor compared */
    DCR_SIM_WORK_ENCODE = 4,   /* one bucket encoded, compressed, digested */
} dcr_sim_work_t;

typedef struct dcr_sim_step {
    dcr_sim_step_kind_t kind;
    dcr_sim_work_t work;
    int peer;
    int payload;
    int64_t count;
    int64_t bytes;   /* input bytes (compute), part bytes (send) */
    int64_t records; /* records emitted by this compute step */
    double seconds;
} dcr_sim_step_t;

typedef struct dcr_sim_payload {
    int owner;
    int64_t id;    /* per owner, from 0 */
    int64_t bytes; /* compressed, header included */
    int64_t records, items;
    int64_t input_bytes; /* chunk input counted toward its bucket */
    int64_t raw_value_bytes;
} dcr_sim_payload_t;

typedef struct dcr_sim_owner {
    int rank, node;
    dcr_sim_step_t *steps;
    int nsteps, cap;
    int npayloads;
    int64_t tracker_bytes; /* copied by the in-place baseline update after the commit */
} dcr_sim_owner_t;

struct dcr_sim_workload {
    int world, train_nodes;
    int serve_tp; /* receivers' TP ranks 0..serve_tp-1 */
    int64_t checkpoint_bytes;
    dcr_sim_owner_t *owners;
    dcr_sim_payload_t *payloads;
    int npayloads, cap;
    /* [payload * serve_tp + tp_rank]: seconds one receiver of that TP rank
     * spends on the payload (decode, then apply of the items it holds). */
    double *apply_s;
    int64_t records, items, payload_bytes, raw_value_bytes;
    /* After the last application: acknowledgments, the joint commit and the
     * owners' in-place baseline updates (one after another in-process, in
     * parallel on a cluster). */
    double finalize_s;
    /* CPU time of one relay hop of one payload (frame, digest check,
     * queueing, acknowledgment): fixed and per byte. */
    double relay_hop_s, relay_hop_s_per_byte;
};
typedef struct dcr_sim_workload dcr_sim_workload_t;

/* Builds the workload of a spec with a calibration. Uses one shape-only
 * receiver per serving TP rank (the serving loaders' prewarm) to learn which
 * tensors may take XOR and which each rank skips. */
dcr_status_t dcr_sim_workload_build(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                                    dcr_sim_workload_t **out_p);
/* Accepts NULL. */
void dcr_sim_workload_destroy(dcr_sim_workload_t *w);

/* ---- the packing rules, exposed for tests and for the builder ------------ */

/* One unit an owner compares in order: an affine task (direct projection) or
 * an assembled residual tensor. */
typedef struct dcr_sim_unit {
    int64_t bytes;   /* source bytes of the task, or canonical bytes of the residual tensor */
    int64_t numel;   /* its elements */
    int64_t records; /* records it emits */
    int value_size;  /* bytes of one canonical value word */
    bool xor_enc;    /* its records are XOR masks */
    double
        spread; /* canonical span of its positions / numel (1: contiguous; 2: every other column) */
    int canonical; /* inventory index (for per-rank apply costs); -1 when unknown */
} dcr_sim_unit_t;

/* Per-unit cost figures the packer turns into compute steps and payload
 * bytes. When cal is set, gap bytes are looked up at each item's own gap
 * density (changes per canonical position spanned); otherwise the figures
 * here hold for every item. */
typedef struct dcr_sim_costs {
    double detect_s_per_byte, project_s_per_record, encode_s_per_record, construct_s_per_item;
    double xor_value_bytes, overwrite_value_bytes, gap8_bytes, gap16_bytes, bytes_per_item;
    const dcr_sim_calibration_t *cal;
} dcr_sim_costs_t;

/* Compressed payload bytes of one item: its metadata, one value word per
 * record, and one gap word per record after the first, 1 byte wide with the
 * probability that all of the item's gaps are below 256 (uniform changes:
 * geometric gaps), else 2. */
double dcr_sim_item_bytes(const dcr_sim_costs_t *c, const dcr_sim_unit_t *u);

/* The costs at one change rate. */
dcr_sim_costs_t dcr_sim_costs_at(const dcr_sim_calibration_t *cal, double rate);

/* A payload under construction. */
typedef struct dcr_sim_packer {
    int64_t chunk_target, bucket_target;
    /* The bucket target of each owner's first payload (the engine's
     * dcr_construct_config_t.first_bucket_bytes, resolved): while the owner
     * has flushed nothing, chunks and the bucket are cut at it. */
    int64_t first_bucket_target;
    dcr_sim_costs_t costs;
    int64_t chunk_bytes, chunk_records, chunk_tasks;
    bool chunk_emitted;
    int64_t bucket_input;
    dcr_sim_payload_t cur;
    double cur_bytes; /* compressed bytes of the items so far */
    /* called for every item that enters the payload under construction */
    void (*on_item)(void *ctx, const dcr_sim_unit_t *u, int payload);
    void *ctx;
} dcr_sim_packer_t;

/* Sets the first payload's target by the engine's rule (a quarter bucket);
 * set p->first_bucket_target after it for another one. */
void dcr_sim_packer_init(dcr_sim_packer_t *p, int64_t chunk_target, int64_t bucket_target,
                         const dcr_sim_costs_t *costs);

/* The target of an owner's first payload of a run for a construct config:
 * the engine's own resolution (dcr_construct_first_bucket_bytes). */
int64_t dcr_sim_first_bucket_bytes(const dcr_construct_config_t *cfg);

/* Adds affine task u to owner o's current chunk (last: the owner's last
 * affine task), closing the chunk and flushing the bucket by the engine's
 * rules: the chunk closes at min(chunk target, bucket target), and the
 * bucket target is first_bucket_target until o has a payload. Appends compute and flush steps to o
 * and payloads to w. */
dcr_status_t dcr_sim_pack_task(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o,
                               const dcr_sim_unit_t *u, bool last);
/* Compares an assembled residual tensor u and emits its records; a bucket
 * counts the canonical bytes of every residual tensor that emits. */
dcr_status_t dcr_sim_pack_residual(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o,
                                   const dcr_sim_unit_t *u);
/* Flushes the payload under construction if it holds an item (the engine's
 * final flush, and every full bucket). */
dcr_status_t dcr_sim_pack_flush(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o);

/* Canonical span of a task's positions (first to last) over its element
 * count: 1 when contiguous, larger when it skips other ranks' elements. */
double dcr_sim_task_spread(const dcr_task_t *t);

/* Multiplies every owner's compute (steps and the per-byte placement of
 * residual parts) by `owner`, and every receiver's decode and apply and
 * every relay hop's work by `rollout` (what-if studies: 0.5 is twice as
 * fast). Factors must be finite and > 0; a power of two and its inverse
 * restore the workload exactly. */
dcr_status_t dcr_sim_workload_scale(dcr_sim_workload_t *w, double owner, double rollout);

/* Appends a step to an owner. */
dcr_status_t dcr_sim_owner_push(dcr_sim_owner_t *o, const dcr_sim_step_t *s);

/* An empty workload for `world` owners on `train_nodes` nodes (tests build
 * owners by hand with the packer). */
dcr_status_t dcr_sim_workload_create(int world, int train_nodes, int serve_tp,
                                     dcr_sim_workload_t **out_p);

#endif
