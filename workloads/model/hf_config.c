/* Hugging Face config.json in front of the model config parser. */
#include "workloads/model/hf_config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Every model_type --model accepts; the first five are also dcr family names. */
static const char *const dcr__hf_types[] = {"qwen3_moe",   "qwen2",      "llama",
                                            "gemma3_text", "nemotron_h", "gemma3"};

#define DCR__HF_TYPE_COUNT (sizeof(dcr__hf_types) / sizeof(dcr__hf_types[0]))

/* A model name is at most this long (DCR_MODEL_NAME_MAX - 1 in model.h). */
#define DCR__HF_NAME_MAX 63

dcr_status_t dcr_hf_config_path(const char *path, char *buf, size_t len)
{
    struct stat st;
    bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    size_t plen = strlen(path);
    /* "dir/" and "dir" both name dir/config.json. */
    const char *sep = plen > 0 && path[plen - 1] == '/' ? "" : "/";
    int n = dir ? snprintf(buf, len, "%s%sconfig.json", path, sep) : snprintf(buf, len, "%s", path);
    if (n < 0 || (size_t)n >= len) {
        return dcr_error_set(DCR_EINVAL, "model config %s: path longer than %zu bytes", path,
                             len - 1);
    }
    return DCR_OK;
}

/* Sets key to an integer unless the object already has it. */
static void dcr__default_int(json_t *obj, const char *key, json_int_t value)
{
    if (json_object_get(obj, key) == NULL) json_object_set_new(obj, key, json_integer(value));
}

/* Gemma3TextConfig's defaults (transformers, configuration_gemma3.py) for
 * the keys google/gemma-3-4b's config.json leaves out: the released 4B text
 * tower relies on them. Sizes that differ between released models (hidden,
 * intermediate, layers) have no default here and stay required. */
static void dcr__gemma3_defaults(json_t *obj)
{
    dcr__default_int(obj, "vocab_size", 262208);
    dcr__default_int(obj, "num_attention_heads", 8);
    dcr__default_int(obj, "num_key_value_heads", 4);
    dcr__default_int(obj, "head_dim", 256);
}

/* The text tower of a multimodal Gemma 3 config, as a gemma3_text config.
 * Top-level keys that HF reads from the outer config fill gaps. */
static dcr_status_t dcr__gemma3_text(json_t *root, const char *origin, json_t **out_p)
{
    json_t *text = json_object_get(root, "text_config");
    if (!json_is_object(text)) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: model_type \"gemma3\" needs an object key "
                             "\"text_config\" (the text tower's config)",
                             origin);
    }
    json_t *out = json_deep_copy(text);
    if (out == NULL) return dcr_error_set(DCR_ENOMEM, "model config %s: out of memory", origin);
    json_object_set_new(out, "model_type", json_string("gemma3_text"));
    static const char *const inherited[] = {"name", "tie_word_embeddings"};
    for (size_t i = 0; i < sizeof(inherited) / sizeof(inherited[0]); i++) {
        json_t *v = json_object_get(root, inherited[i]);
        if (v != NULL && json_object_get(out, inherited[i]) == NULL)
            json_object_set(out, inherited[i], v);
    }
    *out_p = out;
    return DCR_OK;
}

/* Layer options of real configs that would change the tensors the builder
 * emits; refused so that a config never yields a silently wrong inventory. */
static dcr_status_t dcr__check_unmodelled(json_t *cfg, const char *type, const char *origin)
{
    if (strcmp(type, "qwen3_moe") == 0) {
        json_t *only = json_object_get(cfg, "mlp_only_layers");
        if (only != NULL && (!json_is_array(only) || json_array_size(only) != 0)) {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"mlp_only_layers\" must be empty (dense "
                                 "layers in qwen3_moe are not modelled)",
                                 origin);
        }
        json_t *step = json_object_get(cfg, "decoder_sparse_step");
        if (step != NULL && (!json_is_integer(step) || json_integer_value(step) != 1)) {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"decoder_sparse_step\" must be 1 (every "
                                 "layer MoE; other steps are not modelled)",
                                 origin);
        }
    }
    if (strcmp(type, "llama") == 0 || strcmp(type, "qwen2") == 0) {
        if (json_is_true(json_object_get(cfg, "mlp_bias"))) {
            return dcr_error_set(DCR_EPARSE,
                                 "model config %s: key \"mlp_bias\" true is not modelled "
                                 "(expected false or absent)",
                                 origin);
        }
    }
    return DCR_OK;
}

/* "DIR" for an origin ".../DIR/config.json", else NULL (length in *len_p). */
static const char *dcr__dir_name(const char *origin, size_t *len_p)
{
    size_t n = strlen(origin);
    static const char leaf[] = "/config.json";
    size_t leaf_len = sizeof(leaf) - 1;
    if (n <= leaf_len || strcmp(origin + n - leaf_len, leaf) != 0) return NULL;
    size_t end = n - leaf_len, start = end;
    while (start > 0 && origin[start - 1] != '/') start--;
    if (end == start || (end - start == 1 && origin[start] == '.') ||
        (end - start == 2 && strncmp(origin + start, "..", 2) == 0))
        return NULL;
    *len_p = end - start;
    return origin + start;
}

static void dcr__name_from_dir(json_t *cfg, const char *origin)
{
    size_t len = 0;
    const char *dir = dcr__dir_name(origin, &len);
    if (dir == NULL || json_object_get(cfg, "name") != NULL) return;
    char name[DCR__HF_NAME_MAX + 1];
    if (len > DCR__HF_NAME_MAX) len = DCR__HF_NAME_MAX;
    memcpy(name, dir, len);
    name[len] = '\0';
    json_object_set_new(cfg, "name", json_string(name));
}

dcr_status_t dcr_hf_config_normalize(json_t *root, const char *origin, json_t **out_p)
{
    json_t *type_value = json_object_get(root, "model_type");
    /* dcr's own format, or no type at all: the parser reports what is missing. */
    if (json_object_get(root, "family") != NULL || !json_is_string(type_value)) {
        *out_p = json_incref(root);
        return DCR_OK;
    }
    const char *type = json_string_value(type_value);
    bool known = false;
    for (size_t i = 0; i < DCR__HF_TYPE_COUNT; i++)
        known = known || !strcmp(type, dcr__hf_types[i]);
    if (!known) {
        return dcr_error_set(DCR_EPARSE,
                             "model config %s: model_type \"%s\" is not supported (expected "
                             "qwen3_moe, qwen2, llama, gemma3, gemma3_text or nemotron_h)",
                             origin, type);
    }
    json_t *cfg = NULL;
    if (strcmp(type, "gemma3") == 0) {
        DCR_CHECK(dcr__gemma3_text(root, origin, &cfg));
        type = "gemma3_text";
    } else {
        cfg = json_copy(root);
        if (cfg == NULL) return dcr_error_set(DCR_ENOMEM, "model config %s: out of memory", origin);
    }
    dcr_status_t st = dcr__check_unmodelled(cfg, type, origin);
    if (st != DCR_OK) {
        json_decref(cfg);
        return st;
    }
    if (strcmp(type, "gemma3_text") == 0) dcr__gemma3_defaults(cfg);
    dcr__name_from_dir(cfg, origin);
    *out_p = cfg;
    return DCR_OK;
}
