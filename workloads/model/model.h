/* Model configs and the canonical inventory builder.
 *
 * A model config holds the facts of a Hugging Face config.json that decide
 * tensor names, shapes and dtypes. Built-in configs live in
 * workloads/models/<name>.json; a user passes either such a name or the path
 * of their own JSON file. The JSON format is documented in
 * workloads/models/README.md. */
#ifndef DCR_WORKLOADS_MODEL_H
#define DCR_WORKLOADS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/inventory.h"
#include "dcr/status.h"

typedef enum dcr_model_family {
    DCR_FAMILY_QWEN3_MOE = 0, /* "qwen3_moe" */
    DCR_FAMILY_QWEN2 = 1,     /* "qwen2": dense, q/k/v bias */
    DCR_FAMILY_LLAMA = 2,     /* "llama" */
    DCR_FAMILY_GEMMA3 = 3, /* "gemma3_text": four norms per layer, prefix language_model.model. */
    DCR_FAMILY_NEMOTRON_H = 4, /* "nemotron_h": hybrid Mamba / MoE / attention */
} dcr_model_family_t;

#define DCR_MODEL_NAME_MAX    64
#define DCR_MODEL_PATTERN_MAX 512

typedef struct dcr_model_config {
    char name[DCR_MODEL_NAME_MAX];
    dcr_model_family_t family;
    int64_t hidden;
    int64_t intermediate;        /* dense MLP; 0 when none */
    int64_t moe_intermediate;    /* per routed expert; 0 when no MoE */
    int64_t shared_intermediate; /* shared expert; 0 when none */
    int layers;
    int heads;
    int kv_heads;
    int64_t head_dim;
    int64_t vocab;
    int experts; /* routed experts; 0 when dense */
    int top_k;
    bool tied_embeddings;
    bool qk_norm;
    bool qkv_bias;
    /* Hybrid (nemotron_h) only. pattern[i] is 'M' (Mamba), 'E' (MoE) or '*'
     * (attention); strlen(pattern) == layers. */
    char pattern[DCR_MODEL_PATTERN_MAX];
    int mamba_heads;
    int64_t mamba_head_dim;
    int mamba_groups;
    int64_t mamba_state;
    int conv_kernel;
    /* Workload option, not a config.json fact: the attention o_proj of the
     * first fp8_layers layers is exported FP8 (e4m3) block-quantized, with
     * FP32 inverse scales per 128 x 128 block in "<...>.o_proj.weight_scale_inv"
     * (a residual conversion whose scale makes one source change move a whole
     * block). 0 by default. */
    int fp8_layers;
} dcr_model_config_t;

/* The tile edge of the FP8 block-quantized export (128 x 128, as DeepSeek-V3
 * and vLLM's block FP8 checkpoints use). */
#define DCR_FP8_BLOCK 128

/* The folder of dcr's data installed_rel ("models", "sim/clusters",
 * "sim/calibrations"): <this executable's folder>/../share/dcr/<installed_rel>
 * in an installed (copied or moved) prefix, else <source_rel> of the source
 * tree the binary was built from. Written into buf; NULL when it does not
 * fit. */
const char *dcr_data_dir(const char *installed_rel, const char *source_rel, char *buf, size_t cap);

/* Loads a built-in config by name (workloads/models/<name>.json) or, when
 * `name_or_path` contains '/' or ends in ".json", the file at that path.
 * An unknown name lists the built-in ones; a malformed file names the key. */
dcr_status_t dcr_model_load(const char *name_or_path, dcr_model_config_t *out_p);

/* Parses a config from JSON text; `origin` names it in error messages. */
dcr_status_t dcr_model_parse(const char *json_text, const char *origin, dcr_model_config_t *out_p);

/* Names of the built-in configs, NULL-terminated, in a fixed order. */
const char *const *dcr_model_builtin_names(void);

/* The default model of commands that take --model. */
#define DCR_MODEL_DEFAULT "qwen3-30b-a3b"

/* Divides hidden, intermediate sizes, head dims (attention and Mamba), the
 * Mamba state and the vocabulary by `scale`, rounding each up to a multiple of
 * `align` (so every parallel degree that divides align still divides them),
 * and keeps every count (layers, heads, experts, groups). scale 1 is the
 * identity. */
dcr_status_t dcr_model_scale(dcr_model_config_t *cfg, int scale, int align);

/* Keeps the first n layers (and the first n letters of a hybrid pattern). */
dcr_status_t dcr_model_truncate_layers(dcr_model_config_t *cfg, int n);

/* Upper bounds of what a config's inventory holds, computed from the config
 * alone (every optional tensor counted, every layer taken as the largest
 * kind), so a model too large to build is refused before it is built. */
typedef struct dcr_model_estimate {
    int64_t tensors;
    double elements;
} dcr_model_estimate_t;

/* Most elements a model may have: 2^46 (about 70 trillion, thirty times the
 * largest public checkpoint). The tensor bound is DCR_INVENTORY_TENSORS_MAX. */
#define DCR_MODEL_ELEMENTS_MAX 70368744177664.0

/* The bounds of cfg's inventory (cfg as it will be built: scaled and
 * truncated). Never fails and allocates nothing. */
dcr_model_estimate_t dcr_model_estimate(const dcr_model_config_t *cfg);

/* Canonical tensors in Hugging Face naming, shapes and dtypes. Refuses
 * (DCR_EINVAL, one line naming the counts and the bounds) a config whose
 * estimate exceeds DCR_INVENTORY_TENSORS_MAX tensors or
 * DCR_MODEL_ELEMENTS_MAX elements, before building anything. */
dcr_status_t dcr_model_build_inventory(const dcr_model_config_t *cfg, dcr_inventory_t **out_p);

/* Family name as written in JSON ("qwen3_moe", ...). */
const char *dcr_model_family_name(dcr_model_family_t family);

#endif
