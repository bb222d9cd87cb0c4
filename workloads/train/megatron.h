/* Megatron-like training layouts: which rank holds which source tensor, in
 * Megatron-Core naming and layout, and the conversion tasks (with their
 * mapping classes) that carry them to the canonical Hugging Face tensors.
 *
 * Rank order follows Megatron's default (TP fastest, then DP, then PP):
 * rank = (stage * dp + dp_rank) * tp + tp_rank. Within a stage, expert
 * coordinates are etp fastest, then ep, then expert-data-parallel.
 * Shard names carry global layer numbers and a coordinate suffix:
 * "decoder.layers.3.self_attention.linear_qkv.weight@tp1",
 * "decoder.layers.3.mlp.experts.linear_fc1.weight5@ep2.etp0" (local expert 5),
 * replicated tensors have no suffix. */
#ifndef DCR_WORKLOADS_MEGATRON_H
#define DCR_WORKLOADS_MEGATRON_H

#include "dcr/source.h"
#include "dcr/tensor.h"
#include "workloads/model/model.h"

typedef struct dcr_train_config {
    int nodes;         /* training nodes */
    int gpus_per_node; /* ranks per node */
    int tp, etp, ep, pp;
    int dp; /* 0: derived as nodes*gpus / (tp*pp) */
} dcr_train_config_t;

/* One node of one GPU, every degree 1. */
dcr_train_config_t dcr_train_config_default(void);

typedef enum dcr_mapping {
    /* The seed's classes: q/k/v (fused per query group), embedding and output
     * head (vocabulary padding), Mamba in_proj/conv1d are residual. */
    DCR_MAPPING_PAPER = 0,
    /* Ours: q/k/v per-group pieces, padded-vocab rows (padding dropped) and
     * Mamba per-component pieces become affine too. */
    DCR_MAPPING_EXTENDED = 1,
} dcr_mapping_t;

dcr_status_t dcr_mapping_parse(const char *text, dcr_mapping_t *out_p);
const char *dcr_mapping_name(dcr_mapping_t mapping);

/* Checks the degrees against the model: world = nodes*gpus = tp*pp*dp, heads
 * and query groups divisible by tp (or tp a multiple of the groups), layers
 * by pp, experts by ep, expert sizes by etp, tp*dp by etp*ep. One clear
 * DCR_ELAYOUT line naming the constraint on failure. Fills dp when 0. */
dcr_status_t dcr_train_config_validate(const dcr_model_config_t *model, dcr_train_config_t *tc);

/* Megatron's padded vocabulary: the next multiple of 128 * tp. */
int64_t dcr_megatron_padded_vocab(int64_t vocab, int tp);

/* Builds shards, tasks and owners for a model under a layout; `inv` must be
 * the model's canonical inventory and outlive the layout. Calls
 * dcr_source_layout_finish. */
dcr_status_t dcr_megatron_build(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                const dcr_train_config_t *tc, dcr_mapping_t mapping,
                                dcr_source_layout_t **out_p);

/* The full conversion (Megatron export), written from the Megatron layout
 * rules directly and independently of the task box maps, so that it can serve
 * as the oracle: reads every shard (shards[i] holds layout->shards[i],
 * contiguous, shard dtype) and writes every canonical tensor (canonical[c],
 * contiguous, canonical dtype). Padding rows are dropped, the FP32 router is
 * cast, q/k/v are split per query group. */
dcr_status_t dcr_megatron_export(const dcr_model_config_t *model, const dcr_train_config_t *tc,
                                 const dcr_source_layout_t *layout, dcr_storage_t *const *shards,
                                 dcr_storage_t *const *canonical);

/* The reverse (Megatron import, as a bridge loads a Hugging Face checkpoint):
 * writes every shard from the canonical tensors, padding rows zero, every
 * replica of a replicated query group filled. Export and import walk the same
 * layout rules in opposite directions. */
dcr_status_t dcr_megatron_import(const dcr_model_config_t *model, const dcr_train_config_t *tc,
                                 const dcr_source_layout_t *layout, dcr_storage_t *const *canonical,
                                 dcr_storage_t *const *shards);

#endif
