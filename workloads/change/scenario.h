/* A scenario: a model, its canonical inventory, a training layout and the
 * source layout built from them; what every command that runs the engine
 * starts from. Also the synthetic weights and the change injection that
 * stand in for training. */
#ifndef DCR_WORKLOADS_SCENARIO_H
#define DCR_WORKLOADS_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/source.h"
#include "dcr/tensor.h"
#include "workloads/model/model.h"
#include "workloads/train/megatron.h"

typedef struct dcr_scenario_spec {
    const char *model;        /* built-in name or config path */
    int scale;                /* >= 1 */
    int layers;               /* 0: all */
    dcr_train_config_t train; /* etp 0: tp for models with experts, else 1 */
    dcr_mapping_t mapping;
    int align_extra; /* another degree scaled sizes must stay divisible by (serving TP), 1 if none
                      */
    int fp8_layers;  /* FP8 block-quantized o_proj export of the first N layers (dcr_model_config_t)
                      */
    bool layers_is_default; /* layers is a command's default, not the user's: a cap */
    int64_t
        max_memory; /* memory budget in bytes (workloads/change/budget.h); 0: the default share */
} dcr_scenario_spec_t;

/* Default model, scale 1, all layers, one rank, extended mapping: bit-exact
 * like the seed's (paper) mapping, and on real AdamW steps its payload is
 * 0.70x the paper mapping's (BENCHMARKS.md, "Payload bytes vs the entropy
 * bound"), because the embedding and output head ship XOR masks instead of
 * overwrite values. Runs that reproduce the seed's figures set
 * DCR_MAPPING_PAPER explicitly. */
dcr_scenario_spec_t dcr_scenario_spec_default(void);

typedef struct dcr_scenario {
    dcr_model_config_t model;
    dcr_train_config_t train; /* etp 0: tp for models with experts, else 1 */ /* dp filled in */
    dcr_mapping_t mapping;
    dcr_inventory_t *inventory;
    dcr_source_layout_t *layout;
    int64_t max_memory; /* the budget runs over this scenario check against (resolved) */
} dcr_scenario_t;

/* Training ranks a scenario may have: the transports' limit. */
#define DCR_SCENARIO_WORLD_MAX 65536

/* Loads, truncates and scales the model (sizes rounded to multiples of 8 and
 * of every parallel degree given), validates the layout, builds inventory and
 * source layout. One clear error on any failure. Before building the source
 * layout it refuses more than DCR_SCENARIO_WORLD_MAX ranks, and a layout
 * whose metadata alone (holder lists: about 4 bytes per tensor and rank)
 * would exceed the memory budget. */
dcr_status_t dcr_scenario_create(const dcr_scenario_spec_t *spec, dcr_scenario_t **out_p);
/* Accepts NULL. */
void dcr_scenario_destroy(dcr_scenario_t *s);

/* Allocates zeroed storage for every canonical tensor / every shard. The
 * arrays are freed with dcr_scenario_free_tensors. */
dcr_status_t dcr_scenario_alloc_canonical(const dcr_scenario_t *s, dcr_storage_t ***out_p);
dcr_status_t dcr_scenario_alloc_shards(const dcr_scenario_t *s, dcr_storage_t ***out_p);
void dcr_scenario_free_tensors(dcr_storage_t **tensors, size_t n);

/* Synthetic policy weights, reproducible from the seed: linear weights
 * N(0, 0.02), norm weights around 1, biases N(0, 0.02), Mamba A_log around
 * log(1..16), rounded to each tensor's dtype. Such values compress like real
 * weights, unlike random bits. */
void dcr_scenario_init_weights(const dcr_scenario_t *s, uint64_t seed,
                               dcr_storage_t *const *canonical);

/* The seed's stress changes: for every task, exactly round(rate * n) of its
 * n owned elements, chosen uniformly, get a relative change of about 1e-2
 * (bits guaranteed to change; a zero becomes a small value). Applied to the
 * shards in place; the canonical tensors are then rebuilt from the tasks and
 * re-imported, so replicas and padding stay consistent (identical on every
 * replica). `canonical` receives the new canonical tensors. Returns the
 * number of source elements changed in *changed_p. */
dcr_status_t dcr_scenario_inject_uniform(const dcr_scenario_t *s, double rate, uint64_t seed,
                                         dcr_storage_t *const *shards,
                                         dcr_storage_t *const *canonical, int64_t *changed_p);

/* Edge values for bit-exactness checks: per_task random owned elements of
 * every task without a cast get signed zeros, NaNs with payloads and either
 * sign, infinities or the smallest subnormal; replicas follow. *changed_p
 * counts elements whose bits changed. */
dcr_status_t dcr_scenario_inject_edges(const dcr_scenario_t *s, int per_task, uint64_t seed,
                                       dcr_storage_t *const *shards,
                                       dcr_storage_t *const *canonical, int64_t *changed_p);

/* AdamW trajectories: FP32 master weights per unique source element, AdamW
 * (betas 0.9 / 0.999, no weight decay) on synthetic standard-normal
 * gradients, stored in the shards' dtype after every step. At lr 1e-6 on
 * weights of about 0.02 this changes about 1% of BF16 values per step, the
 * natural rates of the seed's Figure 2. The shards must be the ones the
 * state was created from and stay in step with it. */
typedef struct dcr_adamw dcr_adamw_t;

dcr_status_t dcr_adamw_create(const dcr_scenario_t *s, dcr_storage_t *const *shards, double lr,
                              uint64_t seed, dcr_adamw_t **out_p);
/* Accepts NULL. */
void dcr_adamw_destroy(dcr_adamw_t *a);
/* One step applied to the shards in place (replicas kept identical);
 * canonical receives the new canonical tensors; *changed_p the number of
 * source elements whose stored bits changed. */
dcr_status_t dcr_adamw_step(dcr_adamw_t *a, dcr_storage_t *const *shards,
                            dcr_storage_t *const *canonical, int64_t *changed_p);

struct dcr_change_profile;

/* One training step's changes, chosen alike by every runner (dcr bench, the
 * role world, dcr diff --init): an AdamW step when adamw is set, else the
 * profile's replay (dcr_change_profile_inject) when profile is set, else
 * uniform stress changes at rate. seed draws the profile's or the uniform
 * changes (AdamW draws from its own state). Shards change in place;
 * canonical receives the new canonical tensors, *changed_p the count. */
dcr_status_t dcr_scenario_step(const dcr_scenario_t *s, dcr_adamw_t *adamw,
                               const struct dcr_change_profile *profile, double rate, uint64_t seed,
                               dcr_storage_t *const *shards, dcr_storage_t *const *canonical,
                               int64_t *changed_p);

/* The change seed of step `step` of a run seeded with seed (the weights
 * take seed, AdamW seed + 7): a process replaying the run draws the same
 * changes as dcr bench did. */
uint64_t dcr_scenario_step_seed(uint64_t seed, uint64_t step);

#endif
