/* ctest-labels: unit */
/* Hugging Face config.json as --model input. The configs under
 * tests/workloads/hf_configs/ are written from the public config.json values
 * (reference/models.md section 1), with the keys real files carry and the
 * builder ignores. Expected tensor counts and parameter totals come from
 * reference/models.md section 3, computed there from the published shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "workloads/model/model.h"
#include "workloads/tmp_dir.h"

#define HF_DIR DCR_SOURCE_DIR "/tests/workloads/hf_configs/"

typedef struct hf_case {
    const char *dir;     /* under hf_configs/ */
    const char *builtin; /* the built-in config of the same model */
    size_t tensors;
    int64_t params;
} hf_case_t;

static const hf_case_t cases[] = {
    {"Qwen3-30B-A3B", "qwen3-30b-a3b", 18867, INT64_C(30532122624)},
    {"Qwen2.5-0.5B", "qwen2.5-0.5b", 290, INT64_C(494032768)},
    {"Qwen2.5-7B", "qwen2.5-7b", 339, INT64_C(7615616512)},
    {"Llama-3.2-3B", "llama-3.2-3b", 254, INT64_C(3212749824)},
    {"gemma-3-4b-it", "gemma-3-4b", 444, INT64_C(3880263168)},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B", "nemotron-3-nano-30b-a3b", 6243, INT64_C(31577940288)},
};

static dcr_inventory_t *build(const char *model, dcr_model_config_t *cfg)
{
    dcr_status_t st = dcr_model_load(model, cfg);
    if (st != DCR_OK) print_error("%s: %s\n", model, dcr_error_line(st));
    assert_int_equal(st, DCR_OK);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(cfg, &inv), DCR_OK);
    return inv;
}

/* Each family's real config.json, given as its directory, as "dir/" and as
 * the file: the published totals, and tensor for tensor the built-in config's
 * inventory (names, order, dtypes, shapes). */
static void test_real_configs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const hf_case_t *c = &cases[i];
        char paths[3][512];
        snprintf(paths[0], sizeof(paths[0]), "%s%s", HF_DIR, c->dir);
        snprintf(paths[1], sizeof(paths[1]), "%s%s/", HF_DIR, c->dir);
        snprintf(paths[2], sizeof(paths[2]), "%s%s/config.json", HF_DIR, c->dir);
        dcr_model_config_t bcfg;
        dcr_inventory_t *want = build(c->builtin, &bcfg);
        for (int p = 0; p < 3; p++) {
            dcr_model_config_t cfg;
            dcr_inventory_t *inv = build(paths[p], &cfg);
            print_message("  %s: %zu tensors, %lld params\n", paths[p], dcr_inventory_count(inv),
                          (long long)dcr_inventory_params(inv));
            assert_string_equal(cfg.name, c->dir);
            assert_int_equal(dcr_inventory_count(inv), c->tensors);
            assert_int_equal(dcr_inventory_params(inv), c->params);
            assert_int_equal(dcr_inventory_bytes(inv), dcr_inventory_bytes(want));
            assert_int_equal(dcr_inventory_count(inv), dcr_inventory_count(want));
            for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
                const dcr_tensor_desc_t *a = dcr_inventory_at(inv, t),
                                        *b = dcr_inventory_at(want, t);
                assert_string_equal(a->name, b->name);
                assert_int_equal(a->dtype, b->dtype);
                assert_int_equal(a->ndim, b->ndim);
                for (int d = 0; d < a->ndim; d++) assert_int_equal(a->shape[d], b->shape[d]);
            }
            dcr_inventory_destroy(inv);
        }
        dcr_inventory_destroy(want);
    }
}

/* Writes text to <tmp>/<dir>/config.json and loads the directory. */
static dcr_status_t load_text(const char *dir, const char *text, dcr_model_config_t *cfg)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, dir);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
    char file[600];
    snprintf(file, sizeof(file), "%s/config.json", path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    return dcr_model_load(path, cfg);
}

/* A failure is one line naming the file and what is wrong. */
static void expect_refused(const char *dir, const char *text, const char *needle)
{
    dcr_model_config_t cfg;
    dcr_status_t st = load_text(dir, text, &cfg);
    const char *line = dcr_error_line(st);
    print_message("  %s -> %s\n", dir, line);
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(line, needle));
    assert_non_null(strstr(line, "config.json"));
    assert_null(strchr(line, '\n'));
}

#define QWEN2_KEYS                                                                                 \
    "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, "                  \
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2"

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("qwen3-dense",
                   "{\"model_type\": \"qwen3\", " QWEN2_KEYS ", \"vocab_size\": 256}",
                   "model_type \"qwen3\" is not supported");
    expect_refused("no-vocab", "{\"model_type\": \"qwen2\", " QWEN2_KEYS "}",
                   "missing key \"vocab_size\"");
    expect_refused("gemma-no-text", "{\"model_type\": \"gemma3\", \"vision_config\": {}}",
                   "\"text_config\"");
    expect_refused("gemma-no-hidden",
                   "{\"model_type\": \"gemma3\", \"text_config\": {\"intermediate_size\": 128, "
                   "\"num_hidden_layers\": 2}}",
                   "missing key \"hidden_size\"");
    expect_refused("moe-dense-layers",
                   "{\"model_type\": \"qwen3_moe\", " QWEN2_KEYS
                   ", \"vocab_size\": 256, \"head_dim\": 16, \"moe_intermediate_size\": 32, "
                   "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"mlp_only_layers\": [1]}",
                   "\"mlp_only_layers\"");
    expect_refused("moe-step",
                   "{\"model_type\": \"qwen3_moe\", " QWEN2_KEYS
                   ", \"vocab_size\": 256, \"head_dim\": 16, \"moe_intermediate_size\": 32, "
                   "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"decoder_sparse_step\": 2}",
                   "\"decoder_sparse_step\"");
    expect_refused("llama-mlp-bias",
                   "{\"model_type\": \"llama\", " QWEN2_KEYS
                   ", \"vocab_size\": 256, \"mlp_bias\": true}",
                   "\"mlp_bias\"");
    expect_refused("nemotron-dense",
                   "{\"model_type\": \"nemotron_h\", " QWEN2_KEYS
                   ", \"vocab_size\": 256, \"head_dim\": 16, \"hybrid_override_pattern\": \"*-\"}",
                   "hybrid_override_pattern");
}

/* A gemma3_text config at top level (Gemma-3-1B style) takes the class
 * defaults only where keys are absent; given keys win. */
static void test_gemma_defaults(void **state)
{
    (void)state;
    dcr_model_config_t cfg;
    assert_int_equal(load_text("gemma-text",
                               "{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, "
                               "\"intermediate_size\": 128, \"num_hidden_layers\": 2, "
                               "\"num_key_value_heads\": 1, \"name\": \"tiny\"}",
                               &cfg),
                     DCR_OK);
    assert_string_equal(cfg.name, "tiny");
    assert_int_equal(cfg.family, DCR_FAMILY_GEMMA3);
    assert_int_equal(cfg.vocab, 262208);
    assert_int_equal(cfg.heads, 8);
    assert_int_equal(cfg.kv_heads, 1);
    assert_int_equal(cfg.head_dim, 256);
    assert_true(cfg.tied_embeddings);
    assert_true(cfg.qk_norm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_configs),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_gemma_defaults),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
