/* Model configs (JSON, close to Hugging Face config.json) and the canonical
 * inventory builder. Every fact about tensor names, shapes and dtypes of the
 * supported families lives here, so that engine/ stays model-agnostic (G3). */
#include "workloads/model/model.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workloads/model/hf_config.h"
#include "workloads/model/input_file.h"
#include "dcr/inventory.h"

#ifndef DCR_MODELS_DIR
#define DCR_MODELS_DIR "workloads/models"
#endif
/* Where `cmake --install` puts dcr's data, relative to the installed
 * binary's folder (CMake passes the real relative path). */
#ifndef DCR_DATA_INSTALL_REL
#define DCR_DATA_INSTALL_REL "../share/dcr"
#endif

/* Bounds that keep every derived size and count far from overflow and keep a
 * hostile config from asking for billions of tensors. */
#define DCR_MODEL_SIZE_MAX        (INT64_C(1) << 24)
#define DCR_MODEL_COUNT_MAX       65536
#define DCR_MODEL_LAYERS_MAX      4096
#define DCR_MODEL_EXPERTS_MAX     4096
#define DCR_MODEL_FILE_MAX        (16L << 20)
#define DCR_MODEL_TENSOR_NAME_MAX 256

static const char *const dcr__builtin_names[] = {
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-7b",
    "llama-3.2-3b",
    "gemma-3-4b",
    "nemotron-3-nano-30b-a3b",
    NULL,
};

/* Per-family defaults for the keys that Hugging Face leaves implicit. */
typedef struct dcr__family_info {
    const char *name;
    dcr_model_family_t family;
    bool tied;          /* default of tie_word_embeddings in the HF config class */
    bool qk_norm;       /* the family's attention normalizes q and k per head */
    bool head_dim_auto; /* HF derives head_dim = hidden / heads when absent */
} dcr__family_info_t;

static const dcr__family_info_t dcr__families[] = {
    {"qwen3_moe", DCR_FAMILY_QWEN3_MOE, false, true, false},
    {"qwen2", DCR_FAMILY_QWEN2, false, false, true},
    {"llama", DCR_FAMILY_LLAMA, false, false, true},
    {"gemma3_text", DCR_FAMILY_GEMMA3, true, true, false},
    {"nemotron_h", DCR_FAMILY_NEMOTRON_H, false, false, false},
};

#define DCR__FAMILY_COUNT (sizeof(dcr__families) / sizeof(dcr__families[0]))

const char *const *dcr_model_builtin_names(void)
{
    return dcr__builtin_names;
}

const char *dcr_model_family_name(dcr_model_family_t family)
{
    for (size_t i = 0; i < DCR__FAMILY_COUNT; i++) {
        if (dcr__families[i].family == family) return dcr__families[i].name;
    }
    return "unknown";
}

/* ---- JSON access: one helper per value type, each naming key and origin ---- */

typedef struct dcr__json_src {
    json_t *root;
    const char *origin;
} dcr__json_src_t;

/* The value of `key`, else of `alias` (a Hugging Face spelling), else NULL. */
static json_t *dcr__json_lookup(const dcr__json_src_t *src, const char *key, const char *alias)
{
    json_t *value = json_object_get(src->root, key);
    if (value == NULL && alias != NULL) value = json_object_get(src->root, alias);
    return value;
}

static dcr_status_t dcr__json_missing(const dcr__json_src_t *src, const char *key,
                                      const char *expected)
{
    return dcr_error_set(DCR_EPARSE, "model config %s: missing key \"%s\" (expected %s)",
                         src->origin, key, expected);
}

/* Reads an integer in [min, max]. A missing key is an error when `required`,
 * else leaves *out_p unchanged. */
static dcr_status_t dcr__json_int(const dcr__json_src_t *src, const char *key, const char *alias,
                                  bool required, int64_t min, int64_t max, int64_t *out_p)
{
    json_t *value = dcr__json_lookup(src, key, alias);
    if (value == NULL) {
        return required ? dcr__json_missing(src, key, "an integer") : DCR_OK;
    }
    if (!json_is_integer(value)) {
        return dcr_error_set(DCR_EPARSE, "model config %s: key \"%s\" must be an integer",
                             src->origin, key);
    }
    json_int_t v = json_integer_value(value);
    if (v < min || v > max) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: key \"%s\" is %" JSON_INTEGER_FORMAT
                             " (expected %" PRId64 "..%" PRId64 ")",
                             src->origin, key, v, min, max);
    }
    *out_p = (int64_t)v;
    return DCR_OK;
}

/* A positive size (hidden, intermediate, head_dim, vocab, ...). */
static dcr_status_t dcr__json_size(const dcr__json_src_t *src, const char *key, const char *alias,
                                   bool required, int64_t *out_p)
{
    return dcr__json_int(src, key, alias, required, 1, DCR_MODEL_SIZE_MAX, out_p);
}

/* A positive count stored as int (layers, heads, experts, ...). */
static dcr_status_t dcr__json_count(const dcr__json_src_t *src, const char *key, const char *alias,
                                    int64_t max, int *out_p)
{
    int64_t v = 0;
    DCR_CHECK(dcr__json_int(src, key, alias, true, 1, max, &v));
    *out_p = (int)v;
    return DCR_OK;
}

/* An optional boolean; *out_p keeps its default when the key is absent. */
static dcr_status_t dcr__json_bool(const dcr__json_src_t *src, const char *key, bool *out_p)
{
    json_t *value = json_object_get(src->root, key);
    if (value == NULL) return DCR_OK;
    if (!json_is_boolean(value)) {
        return dcr_error_set(DCR_EPARSE, "model config %s: key \"%s\" must be true or false",
                             src->origin, key);
    }
    *out_p = json_is_true(value);
    return DCR_OK;
}

/* A string (valid while the JSON lives); NULL when absent and optional. */
static dcr_status_t dcr__json_string(const dcr__json_src_t *src, const char *key, const char *alias,
                                     bool required, const char **out_p)
{
    json_t *value = dcr__json_lookup(src, key, alias);
    if (value == NULL) {
        if (required) return dcr__json_missing(src, key, "a string");
        *out_p = NULL;
        return DCR_OK;
    }
    if (!json_is_string(value)) {
        return dcr_error_set(DCR_EPARSE, "model config %s: key \"%s\" must be a string",
                             src->origin, key);
    }
    *out_p = json_string_value(value);
    return DCR_OK;
}

/* ---- parsing ---- */

static dcr_status_t dcr__parse_family(const dcr__json_src_t *src, const dcr__family_info_t **out_p)
{
    const char *name = NULL;
    DCR_CHECK(dcr__json_string(src, "family", "model_type", true, &name));
    for (size_t i = 0; i < DCR__FAMILY_COUNT; i++) {
        if (strcmp(name, dcr__families[i].name) == 0) {
            *out_p = &dcr__families[i];
            return DCR_OK;
        }
    }
    return dcr_error_set(DCR_EPARSE,
                         "model config %s: unknown family \"%s\" (expected qwen3_moe, qwen2, "
                         "llama, gemma3_text or nemotron_h)",
                         src->origin, name);
}

/* The config's name: its "name" key, else the origin's file name without
 * directory and ".json". */
static dcr_status_t dcr__parse_name(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    const char *name = NULL;
    DCR_CHECK(dcr__json_string(src, "name", NULL, false, &name));
    if (name != NULL) {
        if (name[0] == '\0' || strlen(name) >= sizeof(cfg->name)) {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"name\" must be 1..%zu characters",
                                 src->origin, sizeof(cfg->name) - 1);
        }
        snprintf(cfg->name, sizeof(cfg->name), "%s", name);
        return DCR_OK;
    }
    const char *base = strrchr(src->origin, '/');
    base = base ? base + 1 : src->origin;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".json") == 0) len -= 5;
    if (len >= sizeof(cfg->name)) len = sizeof(cfg->name) - 1;
    memcpy(cfg->name, base, len);
    cfg->name[len] = '\0';
    return DCR_OK;
}

/* Keys every family has: embedding, depth and attention geometry. */
static dcr_status_t dcr__parse_common(const dcr__json_src_t *src, const dcr__family_info_t *fam,
                                      dcr_model_config_t *cfg)
{
    int64_t layers_max =
        fam->family == DCR_FAMILY_NEMOTRON_H ? DCR_MODEL_PATTERN_MAX - 1 : DCR_MODEL_LAYERS_MAX;
    DCR_CHECK(dcr__json_size(src, "hidden_size", NULL, true, &cfg->hidden));
    DCR_CHECK(dcr__json_count(src, "num_hidden_layers", NULL, layers_max, &cfg->layers));
    DCR_CHECK(dcr__json_count(src, "num_attention_heads", NULL, DCR_MODEL_COUNT_MAX, &cfg->heads));
    DCR_CHECK(
        dcr__json_count(src, "num_key_value_heads", NULL, DCR_MODEL_COUNT_MAX, &cfg->kv_heads));
    DCR_CHECK(dcr__json_size(src, "vocab_size", NULL, true, &cfg->vocab));
    DCR_CHECK(
        dcr__json_size(src, "head_dim", "attention_head_dim", !fam->head_dim_auto, &cfg->head_dim));
    if (cfg->head_dim == 0) {
        if (cfg->hidden % cfg->heads != 0) {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"head_dim\" is missing and hidden_size "
                                 "%" PRId64 " is not divisible by num_attention_heads %d",
                                 src->origin, cfg->hidden, cfg->heads);
        }
        cfg->head_dim = cfg->hidden / cfg->heads;
    }
    if (cfg->heads % cfg->kv_heads != 0) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: num_attention_heads %d is not divisible by "
                             "num_key_value_heads %d",
                             src->origin, cfg->heads, cfg->kv_heads);
    }
    cfg->tied_embeddings = fam->tied;
    cfg->qk_norm = fam->qk_norm;
    /* Qwen2 attention always has q/k/v biases; the others follow attention_bias. */
    cfg->qkv_bias = fam->family == DCR_FAMILY_QWEN2;
    DCR_CHECK(dcr__json_bool(src, "tie_word_embeddings", &cfg->tied_embeddings));
    DCR_CHECK(dcr__json_bool(src, "qk_norm", &cfg->qk_norm));
    if (fam->family != DCR_FAMILY_QWEN2) {
        DCR_CHECK(dcr__json_bool(src, "attention_bias", &cfg->qkv_bias));
    }
    return DCR_OK;
}

/* Routed experts: size, count and top-k (qwen3_moe, and nemotron_h with E layers). */
static dcr_status_t dcr__parse_experts(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    DCR_CHECK(dcr__json_size(src, "moe_intermediate_size", NULL, true, &cfg->moe_intermediate));
    DCR_CHECK(dcr__json_count(src, "num_experts", "n_routed_experts", DCR_MODEL_EXPERTS_MAX,
                              &cfg->experts));
    DCR_CHECK(
        dcr__json_count(src, "num_experts_per_tok", NULL, DCR_MODEL_EXPERTS_MAX, &cfg->top_k));
    if (cfg->top_k > cfg->experts) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: num_experts_per_tok %d exceeds num_experts %d",
                             src->origin, cfg->top_k, cfg->experts);
    }
    return DCR_OK;
}

static dcr_status_t dcr__parse_pattern(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    const char *pattern = NULL;
    DCR_CHECK(dcr__json_string(src, "hybrid_override_pattern", NULL, true, &pattern));
    size_t len = strlen(pattern);
    if (len != (size_t)cfg->layers) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: key \"hybrid_override_pattern\" has %zu letters "
                             "but num_hidden_layers is %d",
                             src->origin, len, cfg->layers);
    }
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] != 'M' && pattern[i] != 'E' && pattern[i] != '*') {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"hybrid_override_pattern\" has byte "
                                 "0x%02x ('%c') at layer %zu (expected M, E or *)",
                                 src->origin, (unsigned char)pattern[i],
                                 isprint((unsigned char)pattern[i]) ? pattern[i] : '?', i);
        }
    }
    memcpy(cfg->pattern, pattern, len + 1);
    return DCR_OK;
}

static dcr_status_t dcr__parse_mamba(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    DCR_CHECK(
        dcr__json_count(src, "mamba_num_heads", NULL, DCR_MODEL_COUNT_MAX, &cfg->mamba_heads));
    DCR_CHECK(dcr__json_size(src, "mamba_head_dim", NULL, true, &cfg->mamba_head_dim));
    DCR_CHECK(dcr__json_count(src, "n_groups", NULL, DCR_MODEL_COUNT_MAX, &cfg->mamba_groups));
    DCR_CHECK(dcr__json_size(src, "ssm_state_size", NULL, true, &cfg->mamba_state));
    DCR_CHECK(dcr__json_count(src, "conv_kernel", NULL, DCR_MODEL_COUNT_MAX, &cfg->conv_kernel));
    /* Mamba-2 shares B and C across the heads of a group. */
    if (cfg->mamba_heads % cfg->mamba_groups != 0) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: mamba_num_heads %d is not divisible by n_groups %d",
                             src->origin, cfg->mamba_heads, cfg->mamba_groups);
    }
    return DCR_OK;
}

/* Hybrid layers: the pattern decides which Mamba and MoE keys are required. */
static dcr_status_t dcr__parse_nemotron(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    DCR_CHECK(dcr__parse_pattern(src, cfg));
    if (cfg->qk_norm) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: key \"qk_norm\" must be false for nemotron_h",
                             src->origin);
    }
    if (strchr(cfg->pattern, 'M') != NULL) DCR_CHECK(dcr__parse_mamba(src, cfg));
    if (strchr(cfg->pattern, 'E') != NULL) {
        DCR_CHECK(dcr__parse_experts(src, cfg));
        DCR_CHECK(dcr__json_size(src, "shared_expert_intermediate_size",
                                 "moe_shared_expert_intermediate_size", true,
                                 &cfg->shared_intermediate));
    }
    return DCR_OK;
}

static dcr_status_t dcr__parse_root(const dcr__json_src_t *src, dcr_model_config_t *cfg)
{
    const dcr__family_info_t *fam = NULL;
    DCR_CHECK(dcr__parse_family(src, &fam));
    cfg->family = fam->family;
    DCR_CHECK(dcr__parse_name(src, cfg));
    DCR_CHECK(dcr__parse_common(src, fam, cfg));
    switch (fam->family) {
    case DCR_FAMILY_QWEN3_MOE:
        return dcr__parse_experts(src, cfg);
    case DCR_FAMILY_NEMOTRON_H:
        return dcr__parse_nemotron(src, cfg);
    default:
        return dcr__json_size(src, "intermediate_size", NULL, true, &cfg->intermediate);
    }
}

dcr_status_t dcr_model_parse(const char *json_text, const char *origin, dcr_model_config_t *out_p)
{
    if (origin == NULL) origin = "<text>";
    if (json_text == NULL || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "model config %s: NULL argument", origin);
    }
    json_error_t jerr;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        return dcr_error_set(DCR_EPARSE, "model config %s: invalid JSON at line %d, column %d: %s",
                             origin, jerr.line, jerr.column, jerr.text);
    }
    dcr_status_t st = DCR_OK;
    if (!json_is_object(root)) {
        st = dcr_error_set(DCR_EPARSE, "model config %s: top level must be a JSON object", origin);
    } else {
        /* A Hugging Face config.json may nest its text tower or rely on class defaults. */
        json_t *flat = NULL;
        st = dcr_hf_config_normalize(root, origin, &flat);
        dcr__json_src_t src = {flat, origin};
        dcr_model_config_t cfg;
        memset(&cfg, 0, sizeof(cfg));
        if (st == DCR_OK) st = dcr__parse_root(&src, &cfg);
        if (st == DCR_OK) *out_p = cfg;
        json_decref(flat);
    }
    json_decref(root);
    return st;
}

/* ---- loading ---- */

/* Through the one checked reader: a FIFO, a device or a directory named as
 * a config is refused at once, and nothing larger than the cap is read. */
static dcr_status_t dcr__read_file(const char *path, char **text_p)
{
    return dcr_input_read(path, "model config", DCR_MODEL_FILE_MAX, text_p, NULL);
}

static dcr_status_t dcr__load_path(const char *given, dcr_model_config_t *out_p)
{
    char path[4096]; /* a directory names its config.json */
    DCR_CHECK(dcr_hf_config_path(given, path, sizeof(path)));
    char *text = NULL;
    DCR_CHECK(dcr__read_file(path, &text));
    dcr_status_t st = dcr_model_parse(text, path, out_p);
    free(text);
    return st;
}

static dcr_status_t dcr__unknown_builtin(const char *name)
{
    char list[512] = "";
    size_t used = 0;
    for (const char *const *n = dcr__builtin_names; *n != NULL && used < sizeof(list); n++) {
        int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", *n);
        if (w < 0) break;
        used += (size_t)w;
    }
    return dcr_error_set(DCR_ENOTFOUND,
                         "unknown model \"%s\" (built-in: %s; or give the path of a JSON config)",
                         name, list);
}

static bool dcr__is_path(const char *name)
{
    size_t len = strlen(name);
    return strchr(name, '/') != NULL || (len >= 5 && strcmp(name + len - 5, ".json") == 0);
}

const char *dcr_data_dir(const char *installed_rel, const char *source_rel, char *buf, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        int w = snprintf(buf, cap, "%s/%s/%s", dirname(exe), DCR_DATA_INSTALL_REL, installed_rel);
        struct stat st;
        if (w > 0 && (size_t)w < cap && stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) return buf;
    }
    /* The build names the models folder of its source tree; the tree's
     * other data folders are found from there. */
    int w = snprintf(buf, cap, "%s/../../%s", DCR_MODELS_DIR, source_rel);
    return w > 0 && (size_t)w < cap ? buf : NULL;
}

/* The folder whose <name>.json files are the built-in models: the one
 * $DCR_MODELS_DIR names (another copy of the configs, or extra models); else
 * dcr's data folder (dcr_data_dir). */
static const char *dcr__models_dir(char *buf, size_t cap)
{
    const char *env = getenv("DCR_MODELS_DIR");
    if (env != NULL && env[0] != '\0') return env;
    const char *dir = dcr_data_dir("models", "workloads/models", buf, cap);
    return dir ? dir : DCR_MODELS_DIR;
}

dcr_status_t dcr_model_load(const char *name_or_path, dcr_model_config_t *out_p)
{
    if (name_or_path == NULL || name_or_path[0] == '\0' || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "model: empty model name");
    }
    if (dcr__is_path(name_or_path)) return dcr__load_path(name_or_path, out_p);

    char install_dir[PATH_MAX];
    const char *dir = dcr__models_dir(install_dir, sizeof(install_dir));
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s.json", dir, name_or_path);
    if (n < 0 || (size_t)n >= sizeof(path)) return dcr__unknown_builtin(name_or_path);
    /* lstat, not open: a probe must not block on a FIFO planted there. */
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) return dcr__unknown_builtin(name_or_path);
    return dcr__load_path(path, out_p);
}

/* ---- scaling and truncation ---- */

/* ceil(v / scale) rounded up to a multiple of align; 0 (absent) stays 0. */
static int64_t dcr__scale_size(int64_t v, int scale, int align)
{
    if (v <= 0) return v;
    int64_t q = (v + scale - 1) / scale;
    return (q + align - 1) / align * align;
}

dcr_status_t dcr_model_scale(dcr_model_config_t *cfg, int scale, int align)
{
    if (cfg == NULL) return dcr_error_set(DCR_EINVAL, "model scale: NULL config");
    if (scale < 1 || align < 1 || align > DCR_MODEL_SIZE_MAX) {
        return dcr_error_set(
            DCR_EINVAL,
            "model scale: scale %d and align %d must both be >= 1 (align <= %" PRId64 ")", scale,
            align, DCR_MODEL_SIZE_MAX);
    }
    int64_t *sizes[] = {
        &cfg->hidden,   &cfg->intermediate,   &cfg->moe_intermediate, &cfg->shared_intermediate,
        &cfg->head_dim, &cfg->mamba_head_dim, &cfg->mamba_state,      &cfg->vocab};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        *sizes[i] = dcr__scale_size(*sizes[i], scale, align);
    }
    return DCR_OK;
}

dcr_status_t dcr_model_truncate_layers(dcr_model_config_t *cfg, int n)
{
    if (cfg == NULL) return dcr_error_set(DCR_EINVAL, "model layers: NULL config");
    if (n < 1 || n > cfg->layers) {
        return dcr_error_set(DCR_EINVAL, "model %s: layers %d out of range (it has 1..%d)",
                             cfg->name, n, cfg->layers);
    }
    cfg->layers = n;
    if (cfg->family == DCR_FAMILY_NEMOTRON_H) cfg->pattern[n] = '\0';
    return DCR_OK;
}

/* ---- inventory ---- */

/* snprintf that reports truncation as an error instead of a wrong name. */
static dcr_status_t dcr__format(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static dcr_status_t dcr__format(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor name longer than %zu bytes", len - 1);
    }
    return DCR_OK;
}

/* Appends prefix + suffix with the first ndim of (d0, d1, d2) as its shape. */
static dcr_status_t dcr__emit(dcr_inventory_t *inv, const char *prefix, const char *suffix,
                              dcr_dtype_t dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    char name[DCR_MODEL_TENSOR_NAME_MAX];
    DCR_CHECK(dcr__format(name, sizeof(name), "%s%s", prefix, suffix));
    int64_t shape[3] = {d0, d1, d2};
    return dcr_inventory_add(inv, name, dtype, ndim, shape);
}

#define DCR__BF16 DCR_DTYPE_BF16

/* q/k/v/o projections (prefix ends in "self_attn." or "mixer."), optional
 * biases and per-head q/k norms. */
static dcr_status_t dcr__emit_attention(dcr_inventory_t *inv, const dcr_model_config_t *cfg,
                                        const char *p, int layer)
{
    int64_t h = cfg->hidden, q = cfg->heads * cfg->head_dim, kv = cfg->kv_heads * cfg->head_dim;
    /* HF Qwen2 biases only q/k/v; the other families' attention_bias also covers o_proj. */
    bool o_bias = cfg->qkv_bias && cfg->family != DCR_FAMILY_QWEN2;
    DCR_CHECK(dcr__emit(inv, p, "q_proj.weight", DCR__BF16, 2, q, h, 0));
    if (cfg->qkv_bias) DCR_CHECK(dcr__emit(inv, p, "q_proj.bias", DCR__BF16, 1, q, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "k_proj.weight", DCR__BF16, 2, kv, h, 0));
    if (cfg->qkv_bias) DCR_CHECK(dcr__emit(inv, p, "k_proj.bias", DCR__BF16, 1, kv, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "v_proj.weight", DCR__BF16, 2, kv, h, 0));
    if (cfg->qkv_bias) DCR_CHECK(dcr__emit(inv, p, "v_proj.bias", DCR__BF16, 1, kv, 0, 0));
    if (layer < cfg->fp8_layers) {
        /* FP8 block-quantized export: e4m3 weight and FP32 inverse scales per 128 x 128 block. */
        DCR_CHECK(dcr__emit(inv, p, "o_proj.weight", DCR_DTYPE_FP8_E4M3, 2, h, q, 0));
        DCR_CHECK(dcr__emit(inv, p, "o_proj.weight_scale_inv", DCR_DTYPE_FP32, 2,
                            (h + DCR_FP8_BLOCK - 1) / DCR_FP8_BLOCK,
                            (q + DCR_FP8_BLOCK - 1) / DCR_FP8_BLOCK, 0));
    } else {
        DCR_CHECK(dcr__emit(inv, p, "o_proj.weight", DCR__BF16, 2, h, q, 0));
    }
    if (o_bias) DCR_CHECK(dcr__emit(inv, p, "o_proj.bias", DCR__BF16, 1, h, 0, 0));
    if (cfg->qk_norm) {
        DCR_CHECK(dcr__emit(inv, p, "q_norm.weight", DCR__BF16, 1, cfg->head_dim, 0, 0));
        DCR_CHECK(dcr__emit(inv, p, "k_norm.weight", DCR__BF16, 1, cfg->head_dim, 0, 0));
    }
    return DCR_OK;
}

/* SwiGLU MLP: gate and up [I, H], down [H, I]. */
static dcr_status_t dcr__emit_gated_mlp(dcr_inventory_t *inv, const char *p, int64_t h, int64_t i)
{
    DCR_CHECK(dcr__emit(inv, p, "gate_proj.weight", DCR__BF16, 2, i, h, 0));
    DCR_CHECK(dcr__emit(inv, p, "up_proj.weight", DCR__BF16, 2, i, h, 0));
    return dcr__emit(inv, p, "down_proj.weight", DCR__BF16, 2, h, i, 0);
}

/* Decoder layer of the dense families and Qwen3 MoE. */
static dcr_status_t dcr__emit_decoder_layer(dcr_inventory_t *inv, const dcr_model_config_t *cfg,
                                            const char *lp, int layer)
{
    char p[DCR_MODEL_TENSOR_NAME_MAX];
    int64_t h = cfg->hidden;
    bool gemma = cfg->family == DCR_FAMILY_GEMMA3;
    DCR_CHECK(dcr__emit(inv, lp, "input_layernorm.weight", DCR__BF16, 1, h, 0, 0));
    DCR_CHECK(dcr__format(p, sizeof(p), "%sself_attn.", lp));
    DCR_CHECK(dcr__emit_attention(inv, cfg, p, layer));
    DCR_CHECK(dcr__emit(inv, lp, "post_attention_layernorm.weight", DCR__BF16, 1, h, 0, 0));
    if (gemma)
        DCR_CHECK(dcr__emit(inv, lp, "pre_feedforward_layernorm.weight", DCR__BF16, 1, h, 0, 0));
    if (cfg->family == DCR_FAMILY_QWEN3_MOE) {
        DCR_CHECK(dcr__emit(inv, lp, "mlp.gate.weight", DCR__BF16, 2, cfg->experts, h, 0));
        for (int e = 0; e < cfg->experts; e++) {
            DCR_CHECK(dcr__format(p, sizeof(p), "%smlp.experts.%d.", lp, e));
            DCR_CHECK(dcr__emit_gated_mlp(inv, p, h, cfg->moe_intermediate));
        }
    } else {
        DCR_CHECK(dcr__format(p, sizeof(p), "%smlp.", lp));
        DCR_CHECK(dcr__emit_gated_mlp(inv, p, h, cfg->intermediate));
    }
    if (gemma) {
        DCR_CHECK(dcr__emit(inv, lp, "post_feedforward_layernorm.weight", DCR__BF16, 1, h, 0, 0));
    }
    return DCR_OK;
}

/* Mamba-2 mixer: in_proj rows are z, x, B, C, dt; conv1d covers x, B, C. */
static dcr_status_t dcr__emit_mamba(dcr_inventory_t *inv, const dcr_model_config_t *cfg,
                                    const char *p)
{
    int64_t h = cfg->hidden, nh = cfg->mamba_heads;
    int64_t d_inner = nh * cfg->mamba_head_dim;
    int64_t bc = 2 * (int64_t)cfg->mamba_groups * cfg->mamba_state;
    int64_t conv = d_inner + bc;
    DCR_CHECK(dcr__emit(inv, p, "in_proj.weight", DCR__BF16, 2, 2 * d_inner + bc + nh, h, 0));
    DCR_CHECK(dcr__emit(inv, p, "conv1d.weight", DCR__BF16, 3, conv, 1, cfg->conv_kernel));
    DCR_CHECK(dcr__emit(inv, p, "conv1d.bias", DCR__BF16, 1, conv, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "A_log", DCR_DTYPE_FP32, 1, nh, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "D", DCR_DTYPE_FP32, 1, nh, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "dt_bias", DCR__BF16, 1, nh, 0, 0));
    DCR_CHECK(dcr__emit(inv, p, "norm.weight", DCR__BF16, 1, d_inner, 0, 0));
    return dcr__emit(inv, p, "out_proj.weight", DCR__BF16, 2, h, d_inner, 0);
}

/* Nemotron-H MoE mixer: relu2 experts (up and down, no gate) plus one shared expert. */
static dcr_status_t dcr__emit_nemotron_moe(dcr_inventory_t *inv, const dcr_model_config_t *cfg,
                                           const char *p)
{
    char sub[DCR_MODEL_TENSOR_NAME_MAX];
    int64_t h = cfg->hidden, i = cfg->moe_intermediate, s = cfg->shared_intermediate;
    DCR_CHECK(dcr__emit(inv, p, "gate.weight", DCR__BF16, 2, cfg->experts, h, 0));
    DCR_CHECK(
        dcr__emit(inv, p, "gate.e_score_correction_bias", DCR_DTYPE_FP32, 1, cfg->experts, 0, 0));
    for (int e = 0; e < cfg->experts; e++) {
        DCR_CHECK(dcr__format(sub, sizeof(sub), "%sexperts.%d.", p, e));
        DCR_CHECK(dcr__emit(inv, sub, "up_proj.weight", DCR__BF16, 2, i, h, 0));
        DCR_CHECK(dcr__emit(inv, sub, "down_proj.weight", DCR__BF16, 2, h, i, 0));
    }
    DCR_CHECK(dcr__emit(inv, p, "shared_experts.up_proj.weight", DCR__BF16, 2, s, h, 0));
    return dcr__emit(inv, p, "shared_experts.down_proj.weight", DCR__BF16, 2, h, s, 0);
}

static dcr_status_t dcr__emit_hybrid_layer(dcr_inventory_t *inv, const dcr_model_config_t *cfg,
                                           const char *lp, char kind, int layer)
{
    char p[DCR_MODEL_TENSOR_NAME_MAX];
    DCR_CHECK(dcr__emit(inv, lp, "norm.weight", DCR__BF16, 1, cfg->hidden, 0, 0));
    DCR_CHECK(dcr__format(p, sizeof(p), "%smixer.", lp));
    if (kind == 'M') return dcr__emit_mamba(inv, cfg, p);
    if (kind == 'E') return dcr__emit_nemotron_moe(inv, cfg, p);
    if (kind == '*') return dcr__emit_attention(inv, cfg, p, layer);
    return dcr_error_set(DCR_EINVAL, "layer %s: pattern letter '%c' (expected M, E or *)", lp,
                         kind);
}

/* Top-level names and the per-layer prefix of a family. */
typedef struct dcr__family_names {
    const char *embed;
    const char *layers; /* prefix of "<layers><i>." */
    const char *final_norm;
    const char *lm_head;
} dcr__family_names_t;

static dcr__family_names_t dcr__names_for(dcr_model_family_t family)
{
    if (family == DCR_FAMILY_GEMMA3) {
        return (dcr__family_names_t){
            "language_model.model.embed_tokens.weight", "language_model.model.layers.",
            "language_model.model.norm.weight", "language_model.lm_head.weight"};
    }
    if (family == DCR_FAMILY_NEMOTRON_H) {
        return (dcr__family_names_t){"backbone.embeddings.weight", "backbone.layers.",
                                     "backbone.norm_f.weight", "lm_head.weight"};
    }
    return (dcr__family_names_t){"model.embed_tokens.weight", "model.layers.", "model.norm.weight",
                                 "lm_head.weight"};
}

static dcr_status_t dcr__emit_model(dcr_inventory_t *inv, const dcr_model_config_t *cfg)
{
    dcr__family_names_t names = dcr__names_for(cfg->family);
    int64_t h = cfg->hidden;
    DCR_CHECK(dcr__emit(inv, names.embed, "", DCR__BF16, 2, cfg->vocab, h, 0));
    for (int l = 0; l < cfg->layers; l++) {
        char lp[DCR_MODEL_TENSOR_NAME_MAX];
        DCR_CHECK(dcr__format(lp, sizeof(lp), "%s%d.", names.layers, l));
        if (cfg->family == DCR_FAMILY_NEMOTRON_H) {
            DCR_CHECK(dcr__emit_hybrid_layer(inv, cfg, lp, cfg->pattern[l], l));
        } else {
            DCR_CHECK(dcr__emit_decoder_layer(inv, cfg, lp, l));
        }
    }
    DCR_CHECK(dcr__emit(inv, names.final_norm, "", DCR__BF16, 1, h, 0, 0));
    if (!cfg->tied_embeddings) {
        DCR_CHECK(dcr__emit(inv, names.lm_head, "", DCR__BF16, 2, cfg->vocab, h, 0));
    }
    return DCR_OK;
}

/* Elements of one layer, every kind it could be summed (an upper bound). */
static double dcr__layer_elements(const dcr_model_config_t *c)
{
    double h = (double)c->hidden, q = (double)c->heads * (double)c->head_dim;
    double kv = (double)c->kv_heads * (double)c->head_dim;
    double attn = h * (2 * q + 2 * kv) + q + 2 * kv + h + 2 * (double)c->head_dim;
    double e = c->experts;
    double moe = e * h + e + e * 3 * h * (double)c->moe_intermediate +
                 2 * h * (double)c->shared_intermediate;
    double nh = c->mamba_heads, d_inner = nh * (double)c->mamba_head_dim;
    double bc = 2.0 * c->mamba_groups * (double)c->mamba_state;
    double mamba = (2 * d_inner + bc + nh) * h + (d_inner + bc) * (c->conv_kernel + 1) + 3 * nh +
                   d_inner + h * d_inner;
    return 4 * h + attn + 3 * h * (double)c->intermediate + moe + mamba;
}

dcr_model_estimate_t dcr_model_estimate(const dcr_model_config_t *cfg)
{
    /* Per layer at most 3 norms, 10 attention tensors (q/k/v/o, their
     * biases, an FP8 scale, q/k norms) and an MLP of 3, or a router of 2,
     * 3 per expert and 2 shared; a Mamba mixer has 8. */
    int64_t per_layer = 16 + 3 * (int64_t)(cfg->experts > 0 ? cfg->experts : 0);
    int64_t layers = cfg->layers > 0 ? cfg->layers : 0;
    dcr_model_estimate_t e;
    e.tensors = 3 + layers * per_layer;
    e.elements = (double)layers * dcr__layer_elements(cfg) +
                 2.0 * (double)cfg->vocab * (double)cfg->hidden + (double)cfg->hidden;
    return e;
}

/* A config built in code (not parsed) is checked too: the builder must never
 * read past the pattern. Zero or negative sizes are caught by
 * dcr_inventory_add, which names the tensor. */
static dcr_status_t dcr__check_buildable(const dcr_model_config_t *cfg)
{
    if (cfg->layers < 1 || cfg->layers > DCR_MODEL_LAYERS_MAX) {
        return dcr_error_set(DCR_EINVAL, "model %s: %d layers (expected 1..%d)", cfg->name,
                             cfg->layers, DCR_MODEL_LAYERS_MAX);
    }
    if (cfg->family == DCR_FAMILY_NEMOTRON_H &&
        strnlen(cfg->pattern, sizeof(cfg->pattern)) != (size_t)cfg->layers) {
        return dcr_error_set(DCR_EINVAL, "model %s: pattern length differs from %d layers",
                             cfg->name, cfg->layers);
    }
    /* From the config, before the first tensor: a 600-byte config can ask
     * for tens of millions of tensors (4,096 layers of 4,096 experts). */
    dcr_model_estimate_t e = dcr_model_estimate(cfg);
    if (e.tensors > DCR_INVENTORY_TENSORS_MAX || !(e.elements <= DCR_MODEL_ELEMENTS_MAX)) {
        return dcr_error_set(DCR_EINVAL,
                             "model %s: %d layers x %d experts make up to %lld tensors and %.3g "
                             "elements (at most %d tensors and %.3g elements)",
                             cfg->name, cfg->layers, cfg->experts, (long long)e.tensors, e.elements,
                             DCR_INVENTORY_TENSORS_MAX, DCR_MODEL_ELEMENTS_MAX);
    }
    return DCR_OK;
}

dcr_status_t dcr_model_build_inventory(const dcr_model_config_t *cfg, dcr_inventory_t **out_p)
{
    if (cfg == NULL || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "model inventory: NULL argument");
    }
    DCR_CHECK(dcr__check_buildable(cfg));
    dcr_inventory_t *inv = NULL;
    DCR_CHECK(dcr_inventory_create(&inv));
    dcr_status_t st = dcr__emit_model(inv, cfg);
    if (st != DCR_OK) {
        dcr_error_prefix("model %s: ", cfg->name);
        dcr_inventory_destroy(inv);
        return st;
    }
    *out_p = inv;
    return DCR_OK;
}
