/* vLLM-like rollout layouts and native loaders.
 *
 * A rollout cluster is nodes x GPUs ranks grouped into serving instances of
 * `tp` ranks; every instance holds the whole model, so receivers with the same
 * TP rank hold identical storage. With expert parallelism the routed experts
 * of an instance are spread over its ranks in contiguous blocks (remainder to
 * the last rank) and the experts' own TP degree is 1; without it every rank
 * holds a 1/tp slice of every expert.
 *
 * The loaders (one per model family, registered as "vllm.<family>") follow
 * vLLM's load_weights paths (reference/models.md section 5) and are written
 * only against the loader API of dcr/loader.h. Variants a user can select:
 * RMSNorm weights kept in FP32 (the loader casts, an overwrite path) and a
 * transposed FusedMoE w2 layout [E_local, I, H] (XOR through a transposed
 * view). */
#ifndef DCR_WORKLOADS_VLLM_LAYOUT_H
#define DCR_WORKLOADS_VLLM_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/receiver.h"
#include "dcr/source.h"
#include "workloads/model/model.h"

typedef struct dcr_serve_config {
    int nodes;          /* rollout nodes */
    int gpus_per_node;  /* ranks per node; 0: tp */
    int tp;             /* tensor-parallel degree of one instance */
    bool ep;            /* expert parallel inside an instance */
    bool fp32_norms;    /* variant: RMSNorm weights stored in FP32 */
    bool w2_transposed; /* variant: FusedMoE w2 stored [E_local, I/tp, H] */
} dcr_serve_config_t;

/* One node holding one instance of TP 1 (gpus_per_node 0: as many as tp), no variants. */
dcr_serve_config_t dcr_serve_config_default(void);

/* Checks the degrees against the model (heads, KV heads, intermediate sizes,
 * Mamba heads and groups, padded vocabulary, experts under EP, ranks a
 * multiple of tp) and fills gpus_per_node when 0. One DCR_ELAYOUT line naming
 * the constraint on failure. */
dcr_status_t dcr_serve_config_validate(const dcr_model_config_t *model, dcr_serve_config_t *sc);

/* Receivers in the rollout cluster (nodes x GPUs) and a receiver's TP rank. */
int dcr_serve_receivers(const dcr_serve_config_t *sc);
int dcr_serve_tp_rank(const dcr_serve_config_t *sc, int receiver);

/* vLLM's padded vocabulary: the next multiple of 64. */
int64_t dcr_serve_padded_vocab(int64_t vocab);

/* The contiguous block of experts rank `rank` of `size` holds: size - 1 ranks
 * hold experts / size each and the last one also the remainder. */
void dcr_serve_expert_block(int experts, int size, int rank, int *first_p, int *count_p);

/* The configuration handed to a "vllm.<family>" loader (borrowed by create). */
typedef struct dcr_serve_loader_config {
    const dcr_model_config_t *model;
    dcr_serve_config_t serve;
    int tp_rank;
} dcr_serve_loader_config_t;

/* Registers the loaders of every family (idempotent, thread-safe). */
dcr_status_t dcr_serve_register_loaders(void);
/* "vllm.qwen3_moe", ...; NULL for an unknown family. */
const char *dcr_serve_loader_name(dcr_model_family_t family);

/* Creates receiver `receiver` of the layout with the model's vLLM loader.
 * `base` (may be NULL) supplies the receiver options (shape_only, full_pass,
 * mask, track_written); loader and inventory are filled in here. */
dcr_status_t dcr_serve_receiver_create(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                       const dcr_serve_config_t *sc, int receiver,
                                       const dcr_receiver_config_t *base, dcr_receiver_t **out_p);

/* Whether canonical tensor i may take XOR: its path is XOR on every receiver
 * that does not skip it (and at least one holds it). Needs prewarmed
 * receivers. */
bool dcr_serve_xor_allowed(dcr_receiver_t *const *receivers, int n, size_t i);

/* The XOR/overwrite split of the items `dcr inventory` counts (one per affine
 * task, one per residual canonical tensor), as the receivers' prewarm decides
 * it: an affine item takes XOR when its canonical tensor may take XOR (see
 * above); residual items are always overwrites. Probes one shape-only
 * receiver per TP rank, so it runs at full model size without tensor data. */
typedef struct dcr_serve_split {
    int64_t xor_items, overwrite_items;
    int64_t xor_bytes, overwrite_bytes; /* canonical bytes the items cover */
    double xor_byte_share;              /* xor_bytes / (xor_bytes + overwrite_bytes) */
} dcr_serve_split_t;

dcr_status_t dcr_serve_xor_split(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                 const dcr_source_layout_t *layout, const dcr_serve_config_t *sc,
                                 dcr_serve_split_t *out_p);

#endif
