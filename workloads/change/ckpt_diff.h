/* dcr diff: what one training step changed between two checkpoints, as
 * construction sees it.
 *
 * Two safetensors checkpoints of one model are compared element by element
 * (bit patterns) in canonical Hugging Face form, per tensor class, and then
 * constructed for real: OLD is imported into the scenario's training layout
 * as the committed baseline, NEW as the candidate, and the engine's
 * constructor runs on them in mode X (XOR where allowed) and mode P
 * (overwrite only), once for the whole checkpoint and once per class with
 * only that class's changes in the candidate. The records and payloads are
 * therefore exactly those the constructor produces for that layout and
 * mapping; the per-class payload bytes are measured with each class alone
 * (their sum can differ from the whole run by the bucket boundaries). */
#ifndef DCR_WORKLOADS_CKPT_DIFF_H
#define DCR_WORKLOADS_CKPT_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/construct.h"
#include "workloads/change/scenario.h"

/* Tensor classes, decided by the Hugging Face name (the builder's naming in
 * workloads/model/model.c). A Nemotron-H shared expert counts as dense MLP (it sees
 * every token); q/k norms count as norms; every parameter of a Mamba mixer,
 * its inner norm included, counts as Mamba. */
typedef enum dcr_tensor_class {
    DCR_CLASS_ATTENTION = 0, /* q/k/v/o projections and their biases, FP8 scales */
    DCR_CLASS_DENSE_MLP,     /* gate/up/down of dense MLPs and shared experts */
    DCR_CLASS_EXPERTS,       /* routed experts */
    DCR_CLASS_ROUTER,        /* MoE gate and its score correction bias */
    DCR_CLASS_NORMS,         /* layer norms, final norm, q/k norms */
    DCR_CLASS_EMBEDDINGS,    /* token embedding and output head */
    DCR_CLASS_MAMBA,         /* Mamba-2 mixer parameters */
    DCR_CLASS_OTHER,         /* anything else the inventory holds */
    DCR_CLASS_COUNT
} dcr_tensor_class_t;

/* "attention", "dense_mlp", "experts", "router", "norms", "embeddings",
 * "mamba", "other" (the JSON keys). */
const char *dcr_tensor_class_name(dcr_tensor_class_t cls);
/* The class of a canonical tensor name. */
dcr_tensor_class_t dcr_tensor_class_of(const char *name);
/* Length of the "...experts.<e>." prefix that names one (layer, routed
 * expert) in a tensor name, or 0 when the name is not a routed expert's. */
size_t dcr_tensor_expert_key(const char *name);

/* Figures of one class (or of the whole checkpoint). Element figures come
 * from the canonical comparison; records, raw value bytes and payloads from
 * the constructor. Rows are all dimensions but the last (a 1-D tensor is
 * one row); a run is a maximal stretch of consecutive changed elements in
 * flat order; an expert is one (layer, routed expert). */
typedef struct dcr_diff_figures {
    int64_t tensors, changed_tensors;
    int64_t elements, changed_elements, changed_bytes;
    int64_t rows, changed_rows, runs;
    int64_t experts, experts_touched;
    int64_t records;                 /* constructor destinations, mode X run */
    int64_t raw_changed_value_bytes; /* one value word per record */
    int64_t payload_bytes_x, payload_bytes_p;
    int64_t payloads_x, payloads_p;
} dcr_diff_figures_t;

typedef struct dcr_diff_result {
    dcr_diff_figures_t total;
    dcr_diff_figures_t classes[DCR_CLASS_COUNT];
    size_t extra_tensors;               /* in NEW but not in the model (vision tower, MTP) */
    dcr_construct_stats_t run_x, run_p; /* the whole-checkpoint runs */
    /* The entropy bound of the canonical changes (docs/commands/diff.md):
     * positions, summed over tensors of n elements with c changed, cost
     * n * H(c / n) bits (H the binary entropy); values cost, over every
     * changed element of the checkpoint, -log2 of the empirical frequency
     * of its XOR mask (OLD ^ NEW as an unsigned integer of the stored
     * width; masks of different widths are different symbols). */
    double entropy_position_bits, entropy_value_bits;
} dcr_diff_result_t;

typedef struct dcr_diff_options {
    dcr_construct_config_t cfg;     /* mode is set per run (X, then P) */
    const dcr_payload_sink_t *sink; /* payloads of the whole-checkpoint X run; may be NULL */
    bool class_payloads;            /* also construct every changed class alone */
} dcr_diff_options_t;

/* X and P runs, object-storage chunks, default buckets and zstd level, per
 * class payloads on. */
dcr_diff_options_t dcr_diff_options_default(void);

/* Compares checkpoints old_path and new_path (a .safetensors file or a
 * directory, see dcr_checkpoint_open) of the scenario's model, whose every
 * tensor both must hold with the inventory's shape and dtype. Holds both
 * checkpoints mapped, two copies of the training shards and the
 * constructor's state (trackers, residual baselines, rebuilt residual
 * tensors): 5 to 8 times the checkpoint bytes in a measured case. */
dcr_status_t dcr_ckpt_diff(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                           const dcr_diff_options_t *opt, dcr_diff_result_t *out_p);

/* A synthetic step for `dcr diff --init CKPT --changes ...`: what one
 * stress, AdamW or profile step does to real weights. */
typedef enum dcr_diff_step_kind {
    DCR_DIFF_STEP_UNIFORM = 0, /* dcr_scenario_inject_uniform at rate */
    DCR_DIFF_STEP_ADAMW,       /* one dcr_adamw_step at lr */
    DCR_DIFF_STEP_PROFILE,     /* dcr_change_profile_inject of profile */
} dcr_diff_step_kind_t;

struct dcr_change_profile;

typedef struct dcr_diff_step {
    dcr_diff_step_kind_t kind;
    double rate, lr;
    const struct dcr_change_profile *profile;
    uint64_t seed;
} dcr_diff_step_t;

/* Like dcr_ckpt_diff, with OLD the export of the training shards imported
 * from the checkpoint at init_path (leading blocks of a scaled model, see
 * dcr_ckpt_init_canonical) and NEW the same after one synthetic step. */
dcr_status_t dcr_ckpt_diff_step(const dcr_scenario_t *sc, const char *init_path,
                                const dcr_diff_step_t *step, const dcr_diff_options_t *opt,
                                dcr_diff_result_t *out_p);

/* Derived figures of one class, 0 where the denominator is 0. */
double dcr_diff_change_rate(const dcr_diff_figures_t *f);
double dcr_diff_payload_ratio(const dcr_diff_figures_t *f); /* payload X / raw changed values */
/* (position bits + value bits) / 8 of the whole checkpoint. */
double dcr_diff_entropy_bound_bytes(const dcr_diff_result_t *r);
/* Whole-checkpoint mode X payload bytes / the entropy bound; 0 when the bound is 0. */
double dcr_diff_payload_to_bound(const dcr_diff_result_t *r);

#endif
