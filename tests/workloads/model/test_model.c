/* ctest-labels: unit */
/* Model configs and the canonical inventory builder. Expected counts, sizes
 * and shapes come from reference/models.md (sections 2 and 3: published
 * configs and checkpoint index sizes), never from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"

#include "workloads/model/model.h"

/* ---- helpers ---- */

static dcr_inventory_t *build(const char *name)
{
    dcr_model_config_t cfg;
    dcr_status_t st = dcr_model_load(name, &cfg);
    if (st != DCR_OK) print_error("%s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_OK);
    dcr_inventory_t *inv = NULL;
    st = dcr_model_build_inventory(&cfg, &inv);
    if (st != DCR_OK) print_error("%s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_OK);
    return inv;
}

static const dcr_tensor_desc_t *find(const dcr_inventory_t *inv, const char *name)
{
    int64_t i = dcr_inventory_find(inv, name);
    if (i < 0) print_error("missing tensor %s\n", name);
    assert_true(i >= 0);
    return dcr_inventory_at(inv, (size_t)i);
}

/* Asserts name exists with this dtype and shape (ndim given by the count). */
static void expect_shape(const dcr_inventory_t *inv, const char *name, dcr_dtype_t dtype, int ndim,
                         int64_t d0, int64_t d1, int64_t d2)
{
    const dcr_tensor_desc_t *d = find(inv, name);
    const int64_t want[3] = {d0, d1, d2};
    assert_int_equal(d->dtype, dtype);
    assert_int_equal(d->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(d->shape[i], want[i]);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char tmp_dir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Loads `text` written to <tmp>/<file> and expects failure `want` whose detail
 * names the file and, when given, `needle`. */
static void expect_bad_config(const char *file, const char *text, dcr_status_t want,
                              const char *needle)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, file);
    write_file(path, text);
    dcr_model_config_t cfg;
    memset(&cfg, 0x5a, sizeof(cfg));
    dcr_status_t st = dcr_model_load(path, &cfg);
    print_message("  %s -> %s\n", file, dcr_error_line(st));
    assert_int_equal(st, want);
    assert_non_null(strstr(dcr_error_detail(), path));
    if (needle != NULL) assert_non_null(strstr(dcr_error_detail(), needle));
    /* Out-parameters are set only on success. */
    assert_int_equal(cfg.layers, 0x5a5a5a5a);
    unlink(path);
}

static int setup_tmp(void **state)
{
    (void)state;
    return testfiles_tmpdir(tmp_dir, sizeof(tmp_dir), "model") ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    return rmdir(tmp_dir);
}

/* ---- totals: reference/models.md section 3 ---- */

typedef struct expected_totals {
    const char *name;
    size_t tensors;
    int64_t params;
    int64_t bytes;
    bool lm_head;
} expected_totals_t;

static const expected_totals_t k_expected[] = {
    {"qwen3-30b-a3b", 18867, INT64_C(30532122624), INT64_C(61064245248), true},
    {"qwen3-235b-a22b", 36945, INT64_C(235093634560), INT64_C(470187269120), true},
    {"qwen2.5-0.5b", 290, INT64_C(494032768), INT64_C(988065536), false},
    {"qwen2.5-1.5b", 338, INT64_C(1543714304), INT64_C(3087428608), false},
    {"qwen2.5-7b", 339, INT64_C(7615616512), INT64_C(15231233024), true},
    {"llama-3.2-3b", 254, INT64_C(3212749824), INT64_C(6425499648), false},
    {"gemma-3-4b", 444, INT64_C(3880263168), INT64_C(7760526336), false},
    {"nemotron-3-nano-30b-a3b", 6243, INT64_C(31577940288), INT64_C(63155892352), true},
};

#define N_EXPECTED (sizeof(k_expected) / sizeof(k_expected[0]))

static void test_builtin_totals(void **state)
{
    (void)state;
    for (size_t m = 0; m < N_EXPECTED; m++) {
        const expected_totals_t *e = &k_expected[m];
        dcr_inventory_t *inv = build(e->name);
        print_message("  %-24s tensors %zu params %lld bytes %lld\n", e->name,
                      dcr_inventory_count(inv), (long long)dcr_inventory_params(inv),
                      (long long)dcr_inventory_bytes(inv));
        assert_int_equal(dcr_inventory_count(inv), e->tensors);
        assert_int_equal(dcr_inventory_params(inv), e->params);
        assert_int_equal(dcr_inventory_bytes(inv), e->bytes);
        bool has_head = dcr_inventory_find(inv, "lm_head.weight") >= 0 ||
                        dcr_inventory_find(inv, "language_model.lm_head.weight") >= 0;
        assert_int_equal(has_head, e->lm_head);
        dcr_inventory_destroy(inv);
    }
}

/* Every built-in has an expected row and vice versa. */
static void test_builtin_names(void **state)
{
    (void)state;
    const char *const *names = dcr_model_builtin_names();
    size_t n = 0;
    for (; names[n] != NULL; n++) {
        bool known = false;
        for (size_t m = 0; m < N_EXPECTED; m++) known |= strcmp(names[n], k_expected[m].name) == 0;
        assert_true(known);
    }
    assert_int_equal(n, N_EXPECTED);
    assert_string_equal(names[0], DCR_MODEL_DEFAULT);
}

/* ---- per-family names and shapes: reference/models.md section 2 ---- */

static void test_qwen3_30b_breakdown(void **state)
{
    (void)state;
    dcr_inventory_t *inv = build("qwen3-30b-a3b");
    size_t experts = 0, o_proj = 0, routers = 0, norms = 0, qkv = 0, embed = 0, head = 0;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const char *n = dcr_inventory_at(inv, i)->name;
        assert_int_equal(dcr_inventory_at(inv, i)->dtype, DCR_DTYPE_BF16);
        if (strstr(n, ".mlp.experts.") != NULL)
            experts++;
        else if (ends_with(n, "o_proj.weight"))
            o_proj++;
        else if (ends_with(n, ".mlp.gate.weight"))
            routers++;
        else if (ends_with(n, "norm.weight"))
            norms++;
        else if (ends_with(n, "q_proj.weight") || ends_with(n, "k_proj.weight") ||
                 ends_with(n, "v_proj.weight"))
            qkv++;
        else if (strcmp(n, "model.embed_tokens.weight") == 0)
            embed++;
        else if (strcmp(n, "lm_head.weight") == 0)
            head++;
        else
            fail_msg("unexpected tensor %s", n);
    }
    assert_int_equal(experts, 18432);
    assert_int_equal(o_proj, 48);
    assert_int_equal(routers, 48);
    assert_int_equal(norms, 193);
    assert_int_equal(qkv, 144);
    assert_int_equal(embed, 1);
    assert_int_equal(head, 1);

    expect_shape(inv, "model.embed_tokens.weight", DCR_DTYPE_BF16, 2, 151936, 2048, 0);
    expect_shape(inv, "lm_head.weight", DCR_DTYPE_BF16, 2, 151936, 2048, 0);
    expect_shape(inv, "model.norm.weight", DCR_DTYPE_BF16, 1, 2048, 0, 0);
    expect_shape(inv, "model.layers.47.self_attn.q_proj.weight", DCR_DTYPE_BF16, 2, 4096, 2048, 0);
    expect_shape(inv, "model.layers.47.self_attn.k_proj.weight", DCR_DTYPE_BF16, 2, 512, 2048, 0);
    expect_shape(inv, "model.layers.47.self_attn.v_proj.weight", DCR_DTYPE_BF16, 2, 512, 2048, 0);
    expect_shape(inv, "model.layers.47.self_attn.o_proj.weight", DCR_DTYPE_BF16, 2, 2048, 4096, 0);
    expect_shape(inv, "model.layers.0.self_attn.q_norm.weight", DCR_DTYPE_BF16, 1, 128, 0, 0);
    expect_shape(inv, "model.layers.0.self_attn.k_norm.weight", DCR_DTYPE_BF16, 1, 128, 0, 0);
    expect_shape(inv, "model.layers.0.input_layernorm.weight", DCR_DTYPE_BF16, 1, 2048, 0, 0);
    expect_shape(inv, "model.layers.0.post_attention_layernorm.weight", DCR_DTYPE_BF16, 1, 2048, 0,
                 0);
    expect_shape(inv, "model.layers.3.mlp.gate.weight", DCR_DTYPE_BF16, 2, 128, 2048, 0);
    expect_shape(inv, "model.layers.3.mlp.experts.17.gate_proj.weight", DCR_DTYPE_BF16, 2, 768,
                 2048, 0);
    expect_shape(inv, "model.layers.3.mlp.experts.17.up_proj.weight", DCR_DTYPE_BF16, 2, 768, 2048,
                 0);
    expect_shape(inv, "model.layers.3.mlp.experts.127.down_proj.weight", DCR_DTYPE_BF16, 2, 2048,
                 768, 0);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.3.mlp.experts.128.up_proj.weight"), -1);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.48.input_layernorm.weight"), -1);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.0.self_attn.q_proj.bias"), -1);
    /* Largest tensor: the embedding (151936 x 2048 BF16). */
    assert_int_equal(dcr_inventory_max_tensor_bytes(inv), (size_t)151936 * 2048 * 2);
    dcr_inventory_destroy(inv);
}

/* Layer index in "...layers.<i>..." or -1 for a top-level tensor. */
static int layer_of(const char *name)
{
    const char *p = strstr(name, "layers.");
    return p ? atoi(p + 7) : -1;
}

/* Embedding first, layers in order, final norm, then lm_head when untied. */
static void test_order(void **state)
{
    (void)state;
    static const char *const embeds[] = {"model.embed_tokens.weight",
                                         "language_model.model.embed_tokens.weight",
                                         "backbone.embeddings.weight"};
    static const char *const norms[] = {"model.norm.weight", "language_model.model.norm.weight",
                                        "backbone.norm_f.weight"};
    for (size_t m = 0; m < N_EXPECTED; m++) {
        dcr_inventory_t *inv = build(k_expected[m].name);
        size_t n = dcr_inventory_count(inv);
        const char *first = dcr_inventory_at(inv, 0)->name;
        bool ok = false;
        for (size_t k = 0; k < 3; k++) ok |= strcmp(first, embeds[k]) == 0;
        assert_true(ok);
        size_t norm_at = k_expected[m].lm_head ? n - 2 : n - 1;
        ok = false;
        for (size_t k = 0; k < 3; k++)
            ok |= strcmp(dcr_inventory_at(inv, norm_at)->name, norms[k]) == 0;
        assert_true(ok);
        if (k_expected[m].lm_head)
            assert_string_equal(dcr_inventory_at(inv, n - 1)->name, "lm_head.weight");
        int prev = 0;
        for (size_t i = 1; i < norm_at; i++) {
            int l = layer_of(dcr_inventory_at(inv, i)->name);
            assert_true(l >= prev);
            prev = l;
        }
        dcr_inventory_destroy(inv);
    }
}

static void test_dense_families(void **state)
{
    (void)state;
    dcr_inventory_t *inv = build("qwen2.5-0.5b");
    expect_shape(inv, "model.embed_tokens.weight", DCR_DTYPE_BF16, 2, 151936, 896, 0);
    expect_shape(inv, "model.layers.0.self_attn.q_proj.weight", DCR_DTYPE_BF16, 2, 896, 896, 0);
    expect_shape(inv, "model.layers.0.self_attn.q_proj.bias", DCR_DTYPE_BF16, 1, 896, 0, 0);
    expect_shape(inv, "model.layers.0.self_attn.k_proj.weight", DCR_DTYPE_BF16, 2, 128, 896, 0);
    expect_shape(inv, "model.layers.0.self_attn.k_proj.bias", DCR_DTYPE_BF16, 1, 128, 0, 0);
    expect_shape(inv, "model.layers.23.self_attn.v_proj.bias", DCR_DTYPE_BF16, 1, 128, 0, 0);
    expect_shape(inv, "model.layers.23.mlp.gate_proj.weight", DCR_DTYPE_BF16, 2, 4864, 896, 0);
    expect_shape(inv, "model.layers.23.mlp.up_proj.weight", DCR_DTYPE_BF16, 2, 4864, 896, 0);
    expect_shape(inv, "model.layers.23.mlp.down_proj.weight", DCR_DTYPE_BF16, 2, 896, 4864, 0);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.0.self_attn.o_proj.bias"), -1);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.0.self_attn.q_norm.weight"), -1);
    assert_int_equal(dcr_inventory_find(inv, "lm_head.weight"), -1);
    dcr_inventory_destroy(inv);

    inv = build("qwen2.5-7b");
    expect_shape(inv, "lm_head.weight", DCR_DTYPE_BF16, 2, 152064, 3584, 0);
    expect_shape(inv, "model.layers.27.self_attn.o_proj.weight", DCR_DTYPE_BF16, 2, 3584, 3584, 0);
    dcr_inventory_destroy(inv);

    inv = build("llama-3.2-3b");
    expect_shape(inv, "model.layers.0.self_attn.q_proj.weight", DCR_DTYPE_BF16, 2, 3072, 3072, 0);
    expect_shape(inv, "model.layers.0.self_attn.k_proj.weight", DCR_DTYPE_BF16, 2, 1024, 3072, 0);
    expect_shape(inv, "model.layers.27.mlp.down_proj.weight", DCR_DTYPE_BF16, 2, 3072, 8192, 0);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.0.self_attn.q_proj.bias"), -1);
    assert_int_equal(dcr_inventory_find(inv, "lm_head.weight"), -1);
    dcr_inventory_destroy(inv);
}

static void test_gemma3(void **state)
{
    (void)state;
    dcr_inventory_t *inv = build("gemma-3-4b");
    const char *p = "language_model.model.layers.33.";
    char name[128];
    static const char *const norms[] = {"input_layernorm", "post_attention_layernorm",
                                        "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    expect_shape(inv, "language_model.model.embed_tokens.weight", DCR_DTYPE_BF16, 2, 262208, 2560,
                 0);
    expect_shape(inv, "language_model.model.norm.weight", DCR_DTYPE_BF16, 1, 2560, 0, 0);
    for (size_t i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "%s%s.weight", p, norms[i]);
        expect_shape(inv, name, DCR_DTYPE_BF16, 1, 2560, 0, 0);
    }
    snprintf(name, sizeof(name), "%sself_attn.q_proj.weight", p);
    expect_shape(inv, name, DCR_DTYPE_BF16, 2, 2048, 2560, 0);
    snprintf(name, sizeof(name), "%sself_attn.v_proj.weight", p);
    expect_shape(inv, name, DCR_DTYPE_BF16, 2, 1024, 2560, 0);
    snprintf(name, sizeof(name), "%sself_attn.o_proj.weight", p);
    expect_shape(inv, name, DCR_DTYPE_BF16, 2, 2560, 2048, 0);
    snprintf(name, sizeof(name), "%sself_attn.k_norm.weight", p);
    expect_shape(inv, name, DCR_DTYPE_BF16, 1, 256, 0, 0);
    snprintf(name, sizeof(name), "%smlp.down_proj.weight", p);
    expect_shape(inv, name, DCR_DTYPE_BF16, 2, 2560, 10240, 0);
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const char *n = dcr_inventory_at(inv, i)->name;
        assert_int_equal(strncmp(n, "language_model.model.", 21), 0);
        assert_null(strstr(n, "lm_head"));
    }
    dcr_inventory_destroy(inv);
}

static void test_nemotron(void **state)
{
    (void)state;
    dcr_inventory_t *inv = build("nemotron-3-nano-30b-a3b");
    expect_shape(inv, "backbone.embeddings.weight", DCR_DTYPE_BF16, 2, 131072, 2688, 0);
    expect_shape(inv, "lm_head.weight", DCR_DTYPE_BF16, 2, 131072, 2688, 0);
    expect_shape(inv, "backbone.norm_f.weight", DCR_DTYPE_BF16, 1, 2688, 0, 0);
    /* Layer 0 is M, layer 1 is E, layer 5 is * in the published pattern. */
    expect_shape(inv, "backbone.layers.0.norm.weight", DCR_DTYPE_BF16, 1, 2688, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.in_proj.weight", DCR_DTYPE_BF16, 2, 10304, 2688, 0);
    expect_shape(inv, "backbone.layers.0.mixer.conv1d.weight", DCR_DTYPE_BF16, 3, 6144, 1, 4);
    expect_shape(inv, "backbone.layers.0.mixer.conv1d.bias", DCR_DTYPE_BF16, 1, 6144, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.A_log", DCR_DTYPE_FP32, 1, 64, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.D", DCR_DTYPE_FP32, 1, 64, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.dt_bias", DCR_DTYPE_BF16, 1, 64, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.norm.weight", DCR_DTYPE_BF16, 1, 4096, 0, 0);
    expect_shape(inv, "backbone.layers.0.mixer.out_proj.weight", DCR_DTYPE_BF16, 2, 2688, 4096, 0);
    expect_shape(inv, "backbone.layers.1.mixer.gate.weight", DCR_DTYPE_BF16, 2, 128, 2688, 0);
    expect_shape(inv, "backbone.layers.1.mixer.gate.e_score_correction_bias", DCR_DTYPE_FP32, 1,
                 128, 0, 0);
    expect_shape(inv, "backbone.layers.1.mixer.experts.0.up_proj.weight", DCR_DTYPE_BF16, 2, 1856,
                 2688, 0);
    expect_shape(inv, "backbone.layers.1.mixer.experts.127.down_proj.weight", DCR_DTYPE_BF16, 2,
                 2688, 1856, 0);
    expect_shape(inv, "backbone.layers.1.mixer.shared_experts.up_proj.weight", DCR_DTYPE_BF16, 2,
                 3712, 2688, 0);
    expect_shape(inv, "backbone.layers.1.mixer.shared_experts.down_proj.weight", DCR_DTYPE_BF16, 2,
                 2688, 3712, 0);
    expect_shape(inv, "backbone.layers.5.mixer.q_proj.weight", DCR_DTYPE_BF16, 2, 4096, 2688, 0);
    expect_shape(inv, "backbone.layers.5.mixer.k_proj.weight", DCR_DTYPE_BF16, 2, 256, 2688, 0);
    expect_shape(inv, "backbone.layers.5.mixer.v_proj.weight", DCR_DTYPE_BF16, 2, 256, 2688, 0);
    expect_shape(inv, "backbone.layers.5.mixer.o_proj.weight", DCR_DTYPE_BF16, 2, 2688, 4096, 0);
    assert_int_equal(dcr_inventory_find(inv, "backbone.layers.5.mixer.in_proj.weight"), -1);
    assert_int_equal(dcr_inventory_find(inv, "backbone.layers.0.mixer.q_proj.weight"), -1);

    /* 23 M, 23 E, 6 * layers; FP32 only for A_log, D (per M) and the bias (per E). */
    size_t fp32 = 0, in_proj = 0, routers = 0, q_proj = 0;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        assert_null(strstr(d->name, "gate_proj"));
        if (d->dtype == DCR_DTYPE_FP32) {
            fp32++;
            assert_true(ends_with(d->name, ".A_log") || ends_with(d->name, ".D") ||
                        ends_with(d->name, ".e_score_correction_bias"));
        } else {
            assert_int_equal(d->dtype, DCR_DTYPE_BF16);
        }
        in_proj += ends_with(d->name, "in_proj.weight");
        routers += ends_with(d->name, "mixer.gate.weight");
        q_proj += ends_with(d->name, "q_proj.weight");
    }
    assert_int_equal(fp32, 23 * 2 + 23);
    assert_int_equal(in_proj, 23);
    assert_int_equal(routers, 23);
    assert_int_equal(q_proj, 6);
    dcr_inventory_destroy(inv);
}

/* ---- scale and layers ---- */

static void expect_same_config(const dcr_model_config_t *a, const dcr_model_config_t *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->family, b->family);
    assert_int_equal(a->hidden, b->hidden);
    assert_int_equal(a->intermediate, b->intermediate);
    assert_int_equal(a->moe_intermediate, b->moe_intermediate);
    assert_int_equal(a->shared_intermediate, b->shared_intermediate);
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->heads, b->heads);
    assert_int_equal(a->kv_heads, b->kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->experts, b->experts);
    assert_int_equal(a->top_k, b->top_k);
    assert_int_equal(a->tied_embeddings, b->tied_embeddings);
    assert_int_equal(a->qk_norm, b->qk_norm);
    assert_int_equal(a->qkv_bias, b->qkv_bias);
    assert_string_equal(a->pattern, b->pattern);
    assert_int_equal(a->mamba_heads, b->mamba_heads);
    assert_int_equal(a->mamba_head_dim, b->mamba_head_dim);
    assert_int_equal(a->mamba_groups, b->mamba_groups);
    assert_int_equal(a->mamba_state, b->mamba_state);
    assert_int_equal(a->conv_kernel, b->conv_kernel);
}

/* Same names, order, dtypes and ndim; `same_shapes` also compares shapes. */
static void expect_same_structure(const dcr_inventory_t *a, const dcr_inventory_t *b,
                                  bool same_shapes)
{
    assert_int_equal(dcr_inventory_count(a), dcr_inventory_count(b));
    for (size_t i = 0; i < dcr_inventory_count(a); i++) {
        const dcr_tensor_desc_t *x = dcr_inventory_at(a, i), *y = dcr_inventory_at(b, i);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->ndim, y->ndim);
        for (int d = 0; d < x->ndim && same_shapes; d++) assert_int_equal(x->shape[d], y->shape[d]);
        for (int d = 0; d < x->ndim; d++) assert_true(y->shape[d] <= x->shape[d]);
    }
}

static void test_scale_one_is_identity(void **state)
{
    (void)state;
    for (size_t m = 0; m < N_EXPECTED; m++) {
        dcr_model_config_t cfg, scaled;
        assert_int_equal(dcr_model_load(k_expected[m].name, &cfg), DCR_OK);
        scaled = cfg;
        assert_int_equal(dcr_model_scale(&scaled, 1, 1), DCR_OK);
        expect_same_config(&cfg, &scaled);
        dcr_inventory_t *a = NULL, *b = NULL;
        assert_int_equal(dcr_model_build_inventory(&cfg, &a), DCR_OK);
        assert_int_equal(dcr_model_build_inventory(&scaled, &b), DCR_OK);
        expect_same_structure(a, b, true);
        assert_int_equal(dcr_inventory_bytes(b), k_expected[m].bytes);
        dcr_inventory_destroy(a);
        dcr_inventory_destroy(b);
    }
}

static void test_scale_keeps_structure(void **state)
{
    (void)state;
    for (size_t m = 0; m < N_EXPECTED; m++) {
        dcr_model_config_t cfg, scaled;
        assert_int_equal(dcr_model_load(k_expected[m].name, &cfg), DCR_OK);
        scaled = cfg;
        assert_int_equal(dcr_model_scale(&scaled, 8, 16), DCR_OK);
        /* Counts stay; sizes are ceil(x / 8) rounded up to a multiple of 16. */
        assert_int_equal(scaled.layers, cfg.layers);
        assert_int_equal(scaled.heads, cfg.heads);
        assert_int_equal(scaled.kv_heads, cfg.kv_heads);
        assert_int_equal(scaled.experts, cfg.experts);
        assert_int_equal(scaled.mamba_heads, cfg.mamba_heads);
        assert_int_equal(scaled.mamba_groups, cfg.mamba_groups);
        assert_int_equal(scaled.conv_kernel, cfg.conv_kernel);
        assert_int_equal(scaled.hidden % 16, 0);
        assert_int_equal(scaled.vocab % 16, 0);
        assert_int_equal(scaled.head_dim % 16, 0);
        assert_true(scaled.hidden * 8 >= cfg.hidden && scaled.hidden * 8 < cfg.hidden + 8 * 16);
        dcr_inventory_t *a = NULL, *b = NULL;
        assert_int_equal(dcr_model_build_inventory(&cfg, &a), DCR_OK);
        assert_int_equal(dcr_model_build_inventory(&scaled, &b), DCR_OK);
        expect_same_structure(a, b, false);
        assert_true(dcr_inventory_bytes(b) < dcr_inventory_bytes(a) / 16);
        dcr_inventory_destroy(a);
        dcr_inventory_destroy(b);
    }
}

static void test_scale_values(void **state)
{
    (void)state;
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_load("qwen2.5-0.5b", &cfg), DCR_OK);
    assert_int_equal(dcr_model_scale(&cfg, 8, 64), DCR_OK);
    /* 896/8 = 112 -> 128; 4864/8 = 608 -> 640; 64/8 = 8 -> 64; 151936/8 = 18992 -> 19008. */
    assert_int_equal(cfg.hidden, 128);
    assert_int_equal(cfg.intermediate, 640);
    assert_int_equal(cfg.head_dim, 64);
    assert_int_equal(cfg.vocab, 19008);
    assert_int_equal(cfg.moe_intermediate, 0);

    assert_int_equal(dcr_model_load("nemotron-3-nano-30b-a3b", &cfg), DCR_OK);
    assert_int_equal(dcr_model_scale(&cfg, 3, 8), DCR_OK);
    /* ceil(2688/3) = 896; ceil(1856/3) = 619 -> 624; ceil(3712/3) = 1238 -> 1240;
     * ceil(128/3) = 43 -> 48; ceil(64/3) = 22 -> 24; ceil(131072/3) = 43691 -> 43696. */
    assert_int_equal(cfg.hidden, 896);
    assert_int_equal(cfg.moe_intermediate, 624);
    assert_int_equal(cfg.shared_intermediate, 1240);
    assert_int_equal(cfg.head_dim, 48);
    assert_int_equal(cfg.mamba_head_dim, 24);
    assert_int_equal(cfg.mamba_state, 48);
    assert_int_equal(cfg.vocab, 43696);

    assert_int_equal(dcr_model_scale(&cfg, 0, 8), DCR_EINVAL);
    assert_int_equal(dcr_model_scale(&cfg, 2, 0), DCR_EINVAL);
    assert_int_equal(dcr_model_scale(&cfg, -4, 8), DCR_EINVAL);
    assert_int_equal(cfg.hidden, 896);
}

static void test_truncate_layers(void **state)
{
    (void)state;
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_load("qwen3-30b-a3b", &cfg), DCR_OK);
    assert_int_equal(dcr_model_truncate_layers(&cfg, 0), DCR_EINVAL);
    assert_int_equal(dcr_model_truncate_layers(&cfg, 49), DCR_EINVAL);
    assert_int_equal(dcr_model_truncate_layers(&cfg, 2), DCR_OK);
    assert_int_equal(cfg.layers, 2);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
    /* 393 tensors per layer plus embedding, final norm and lm_head (models.md). */
    assert_int_equal(dcr_inventory_count(inv), 2 * 393 + 3);
    assert_true(dcr_inventory_find(inv, "model.layers.1.mlp.experts.127.down_proj.weight") >= 0);
    assert_int_equal(dcr_inventory_find(inv, "model.layers.2.input_layernorm.weight"), -1);
    dcr_inventory_destroy(inv);

    /* The truncated inventory is the full one's prefix, then the top-level tail. */
    dcr_model_config_t full;
    assert_int_equal(dcr_model_load("nemotron-3-nano-30b-a3b", &full), DCR_OK);
    cfg = full;
    assert_int_equal(dcr_model_truncate_layers(&cfg, 6), DCR_OK);
    assert_string_equal(cfg.pattern, "MEMEM*");
    dcr_inventory_t *a = NULL, *b = NULL;
    assert_int_equal(dcr_model_build_inventory(&full, &a), DCR_OK);
    assert_int_equal(dcr_model_build_inventory(&cfg, &b), DCR_OK);
    /* 3 M (9 each: norm + 8 mixer), 2 E (norm + 2 router + 256 experts + 2 shared),
     * 1 * (norm + 4), plus embedding, norm_f and lm_head. */
    size_t n = dcr_inventory_count(b);
    assert_int_equal(n, 3 * 9 + 2 * 261 + 5 + 3);
    for (size_t i = 0; i + 2 < n; i++) {
        assert_string_equal(dcr_inventory_at(a, i)->name, dcr_inventory_at(b, i)->name);
    }
    assert_string_equal(dcr_inventory_at(b, n - 2)->name, "backbone.norm_f.weight");
    assert_string_equal(dcr_inventory_at(b, n - 1)->name, "lm_head.weight");
    assert_true(dcr_inventory_find(b, "backbone.layers.5.mixer.q_proj.weight") >= 0);
    assert_int_equal(dcr_inventory_find(b, "backbone.layers.6.norm.weight"), -1);
    dcr_inventory_destroy(a);
    dcr_inventory_destroy(b);
}

/* ---- loading: user configs, bad configs, names ---- */

/* Qwen2.5-3B (an HF config.json example). Expected from its published shapes by hand:
 * embed 151936 x 2048 = 311,164,928; per layer q 2048x2048 + 2048, k and v
 * 256x2048 + 256 each, o 2048x2048, 2 norms 4096, MLP 3 x 11008 x 2048 =
 * 77,076,992; x 36 = 2,774,771,712; + final norm 2048 = 3,085,938,688. */
static const char k_user_config[] = "{\n"
                                    "  \"family\": \"qwen2\",\n"
                                    "  \"hidden_size\": 2048,\n"
                                    "  \"intermediate_size\": 11008,\n"
                                    "  \"num_hidden_layers\": 36,\n"
                                    "  \"num_attention_heads\": 16,\n"
                                    "  \"num_key_value_heads\": 2,\n"
                                    "  \"vocab_size\": 151936,\n"
                                    "  \"tie_word_embeddings\": true,\n"
                                    "  \"rope_theta\": 1000000.0,\n"
                                    "  \"architectures\": [\"Qwen2ForCausalLM\"]\n"
                                    "}\n";

static void test_user_config_path(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/qwen2.5-3b.json", tmp_dir);
    write_file(path, k_user_config);
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_load(path, &cfg), DCR_OK);
    assert_string_equal(cfg.name, "qwen2.5-3b");
    assert_int_equal(cfg.family, DCR_FAMILY_QWEN2);
    assert_int_equal(cfg.head_dim, 128);
    assert_true(cfg.qkv_bias);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
    assert_int_equal(dcr_inventory_count(inv), 36 * 12 + 2);
    assert_int_equal(dcr_inventory_params(inv), INT64_C(3085938688));
    dcr_inventory_destroy(inv);
    unlink(path);
}

/* A config pasted from Hugging Face spells some keys differently. */
static void test_hf_aliases(void **state)
{
    (void)state;
    const char *text = "{\"model_type\": \"nemotron_h\", \"name\": \"tiny-h\", \"hidden_size\": 64,"
                       " \"num_hidden_layers\": 3, \"hybrid_override_pattern\": \"ME*\","
                       " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16,"
                       " \"mamba_num_heads\": 4, \"mamba_head_dim\": 8, \"n_groups\": 2,"
                       " \"ssm_state_size\": 16, \"conv_kernel\": 4, \"n_routed_experts\": 4,"
                       " \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32,"
                       " \"moe_shared_expert_intermediate_size\": 48, \"vocab_size\": 100}";
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_parse(text, "inline", &cfg), DCR_OK);
    assert_string_equal(cfg.name, "tiny-h");
    assert_int_equal(cfg.family, DCR_FAMILY_NEMOTRON_H);
    assert_int_equal(cfg.experts, 4);
    assert_int_equal(cfg.shared_intermediate, 48);
    assert_false(cfg.tied_embeddings);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
    /* in_proj rows 2 x 32 + 2 x 2 x 16 + 4 = 132; conv rows 32 + 64 = 96. */
    expect_shape(inv, "backbone.layers.0.mixer.in_proj.weight", DCR_DTYPE_BF16, 2, 132, 64, 0);
    expect_shape(inv, "backbone.layers.0.mixer.conv1d.weight", DCR_DTYPE_BF16, 3, 96, 1, 4);
    /* 3 + M 9 + E (1 + 2 + 8 + 2) + * 5. */
    assert_int_equal(dcr_inventory_count(inv), 3 + 9 + 13 + 5);
    dcr_inventory_destroy(inv);
}

static const char k_good_dense[] = "{\"family\": \"llama\", \"hidden_size\": 64,"
                                   " \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
                                   " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                                   " \"vocab_size\": 100}";

static void test_bad_configs(void **state)
{
    (void)state;
    char text[1024];
    /* The good base loads; each case below breaks one thing. */
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_parse(k_good_dense, "base", &cfg), DCR_OK);

    expect_bad_config("garbage.json", "this is { not json", DCR_EPARSE, "invalid JSON");
    expect_bad_config("empty.json", "", DCR_EPARSE, NULL);
    expect_bad_config("array.json", "[1, 2, 3]", DCR_EPARSE, "object");
    expect_bad_config("missing.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2}",
                      DCR_EPARSE, "\"vocab_size\"");
    expect_bad_config("nofamily.json", "{\"hidden_size\": 64}", DCR_EPARSE, "\"family\"");
    expect_bad_config("type.json",
                      "{\"family\": \"llama\", \"hidden_size\": \"64\", \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100}",
                      DCR_EPARSE, "\"hidden_size\"");
    expect_bad_config("float.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64.5, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100}",
                      DCR_EPARSE, "\"hidden_size\"");
    expect_bad_config("bool.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100,"
                      " \"tie_word_embeddings\": 1}",
                      DCR_EPARSE, "\"tie_word_embeddings\"");
    expect_bad_config("zero.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 0,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100}",
                      DCR_EPARSE, "\"intermediate_size\"");
    expect_bad_config("negative.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": -2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100}",
                      DCR_EPARSE, "\"num_hidden_layers\"");
    expect_bad_config("kvheads.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 3, \"vocab_size\": 100}",
                      DCR_EPARSE, "num_key_value_heads");
    expect_bad_config("family.json",
                      "{\"family\": \"gpt2\", \"hidden_size\": 64, \"intermediate_size\": 128,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100}",
                      DCR_EPARSE, "gpt2");
    expect_bad_config("dup.json",
                      "{\"family\": \"llama\", \"hidden_size\": 64, \"hidden_size\": 32}",
                      DCR_EPARSE, "hidden_size");
    /* qwen3_moe needs its expert keys. */
    expect_bad_config("moe.json",
                      "{\"family\": \"qwen3_moe\", \"hidden_size\": 64, \"head_dim\": 16,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 100,"
                      " \"moe_intermediate_size\": 32, \"num_experts_per_tok\": 2}",
                      DCR_EPARSE, "\"num_experts\"");

    /* Hybrid: the pattern must match the layers and use only M, E, *. */
    static const char hybrid[] =
        "{\"family\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": %d,"
        " \"hybrid_override_pattern\": \"%s\", \"num_attention_heads\": 4,"
        " \"num_key_value_heads\": 2, \"head_dim\": 16, \"mamba_num_heads\": 4,"
        " \"mamba_head_dim\": 8, \"n_groups\": %d, \"ssm_state_size\": 16, \"conv_kernel\": 4,"
        " \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32,"
        " \"shared_expert_intermediate_size\": 48, \"vocab_size\": 100}";
    snprintf(text, sizeof(text), hybrid, 3, "ME*", 2);
    assert_int_equal(dcr_model_parse(text, "hybrid", &cfg), DCR_OK);
    snprintf(text, sizeof(text), hybrid, 3, "MXE", 2);
    expect_bad_config("letter.json", text, DCR_EPARSE, "hybrid_override_pattern");
    snprintf(text, sizeof(text), hybrid, 4, "ME*", 2);
    expect_bad_config("length.json", text, DCR_EPARSE, "hybrid_override_pattern");
    snprintf(text, sizeof(text), hybrid, 3, "ME*", 3);
    expect_bad_config("groups.json", text, DCR_EPARSE, "n_groups");
    expect_bad_config("nopattern.json",
                      "{\"family\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 1,"
                      " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16,"
                      " \"vocab_size\": 100}",
                      DCR_EPARSE, "\"hybrid_override_pattern\"");
}

static void test_missing_file(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/absent.json", tmp_dir);
    dcr_model_config_t cfg;
    dcr_status_t st = dcr_model_load(path, &cfg);
    assert_true(st != DCR_OK);
    assert_non_null(strstr(dcr_error_detail(), path));
}

static void test_unknown_builtin(void **state)
{
    (void)state;
    dcr_model_config_t cfg;
    dcr_status_t st = dcr_model_load("qwen9-1t", &cfg);
    assert_int_equal(st, DCR_ENOTFOUND);
    const char *detail = dcr_error_detail();
    assert_non_null(strstr(detail, "qwen9-1t"));
    for (const char *const *n = dcr_model_builtin_names(); *n != NULL; n++) {
        assert_non_null(strstr(detail, *n));
    }
    assert_int_equal(dcr_model_load("", &cfg), DCR_EINVAL);
    assert_int_equal(dcr_model_load(NULL, &cfg), DCR_EINVAL);
}

/* DCR_MODELS_DIR in the environment redirects name lookups. */
static void test_models_dir_env(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/mini.json", tmp_dir);
    write_file(path, k_good_dense);
    assert_int_equal(setenv("DCR_MODELS_DIR", tmp_dir, 1), 0);
    dcr_model_config_t cfg;
    dcr_status_t st = dcr_model_load("mini", &cfg);
    dcr_status_t st_builtin = dcr_model_load("qwen3-30b-a3b", &cfg);
    assert_int_equal(unsetenv("DCR_MODELS_DIR"), 0);
    assert_int_equal(st, DCR_OK);
    assert_int_equal(st_builtin, DCR_ENOTFOUND);
    assert_int_equal(dcr_model_load("mini", &cfg), DCR_ENOTFOUND);
    assert_int_equal(dcr_model_load("qwen3-30b-a3b", &cfg), DCR_OK);
    unlink(path);
}

static void test_family_names(void **state)
{
    (void)state;
    assert_string_equal(dcr_model_family_name(DCR_FAMILY_QWEN3_MOE), "qwen3_moe");
    assert_string_equal(dcr_model_family_name(DCR_FAMILY_QWEN2), "qwen2");
    assert_string_equal(dcr_model_family_name(DCR_FAMILY_LLAMA), "llama");
    assert_string_equal(dcr_model_family_name(DCR_FAMILY_GEMMA3), "gemma3_text");
    assert_string_equal(dcr_model_family_name(DCR_FAMILY_NEMOTRON_H), "nemotron_h");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_totals),
        cmocka_unit_test(test_builtin_names),
        cmocka_unit_test(test_qwen3_30b_breakdown),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_dense_families),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_nemotron),
        cmocka_unit_test(test_scale_one_is_identity),
        cmocka_unit_test(test_scale_keeps_structure),
        cmocka_unit_test(test_scale_values),
        cmocka_unit_test(test_truncate_layers),
        cmocka_unit_test(test_user_config_path),
        cmocka_unit_test(test_hf_aliases),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_unknown_builtin),
        cmocka_unit_test(test_models_dir_env),
        cmocka_unit_test(test_family_names),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
