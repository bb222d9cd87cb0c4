/* ctest-labels: integration
 *
 * vLLM-like rollout layouts and loaders against the dense-refit oracle: for
 * every model family (scaled), serving TP in {1, 2, 4, 8} where the model
 * allows it, expert parallelism on and off and both variants, receivers are
 * dense-loaded with random canonical bits, refit several times from records
 * computed directly from the bitwise canonical diff (XOR where every rank's
 * prewarm allows it, all-overwrite retries, partial first attempts), and every
 * resident byte is compared with a fresh dense load. The XOR item counts of
 * the seed for Qwen3-30B-A3B are checked at full size (shape-only probe).
 *
 * DCR_TEST_SEED replays a run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/receiver.h"
#include "engine/receiver/receiver_test_util.h"
#include "testkit.h"
#include "workloads/model/model.h"
#include "workloads/serve/serve_bench.h"
#include "workloads/serve/vllm_layout.h"
#include "workloads/train/megatron.h"

/* VAR_FP8: o_proj of every layer exported FP8 block-quantized, at scale 4 so
 * that the attention width splits on 128-column quantization blocks. */
enum { VAR_FP32_NORMS = 1, VAR_W2_T = 2, VAR_FP8 = 4 };

typedef struct sworld {
    dcr_model_config_t m;
    dcr_inventory_t *inv;
    dcr_serve_config_t sc;
    dcr_receiver_config_t base;
    int n;
    dcr_receiver_t **r;
    dcr_storage_t **w;
    int *enc;
    dcr_rng_t rng;
    uint64_t tau;
} sworld_t;

static void sworld_init(sworld_t *s, const char *model, int layers, int experts, int tp, bool ep,
                        unsigned var, int nodes, bool full_pass, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    testkit_load_model(model, (var & VAR_FP8) ? 4 : 32, layers, &s->m);
    if (experts) s->m.experts = experts;
    if (var & VAR_FP8) s->m.fp8_layers = s->m.layers;
    assert_int_equal(dcr_model_build_inventory(&s->m, &s->inv), DCR_OK);
    s->sc = dcr_serve_config_default();
    s->sc.nodes = nodes;
    s->sc.gpus_per_node = tp;
    s->sc.tp = tp;
    s->sc.ep = ep;
    s->sc.fp32_norms = var & VAR_FP32_NORMS;
    s->sc.w2_transposed = var & VAR_W2_T;
    s->base.full_pass = full_pass;
    s->base.track_written = true;
    dcr_rng_seed(&s->rng, seed);
    s->w = rt_tensors(s->inv, &s->rng);
    s->n = dcr_serve_receivers(&s->sc);
    s->r = calloc((size_t)s->n, sizeof(*s->r));
    for (int k = 0; k < s->n; k++) {
        dcr_status_t st = dcr_serve_receiver_create(&s->m, s->inv, &s->sc, k, &s->base, &s->r[k]);
        if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
        assert_int_equal(dcr_receiver_load_dense_all(s->r[k], s->w), DCR_OK);
        st = dcr_receiver_prewarm(s->r[k]);
        if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    }
    size_t nt = dcr_inventory_count(s->inv);
    s->enc = calloc(nt, sizeof(*s->enc));
    for (size_t t = 0; t < nt; t++)
        s->enc[t] =
            dcr_serve_xor_allowed(s->r, s->n, t) ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE;
}

static void sworld_free(sworld_t *s)
{
    for (int k = 0; k < s->n; k++) dcr_receiver_destroy(s->r[k]);
    free(s->r);
    free(s->enc);
    rt_tensors_free(s->w, s->inv);
    dcr_inventory_destroy(s->inv);
}

static dcr_receiver_t *sworld_dense(sworld_t *s, int receiver, dcr_storage_t **w)
{
    dcr_receiver_t *d;
    assert_int_equal(dcr_serve_receiver_create(&s->m, s->inv, &s->sc, receiver, NULL, &d), DCR_OK);
    assert_int_equal(dcr_receiver_load_dense_all(d, w), DCR_OK);
    return d;
}

/* Every receiver equals a fresh dense load of w on its TP rank; the
 * post-apply check agrees. */
static void sworld_assert_dense(sworld_t *s, dcr_storage_t **w, const char *what)
{
    for (int rank = 0; rank < s->sc.tp; rank++) {
        dcr_receiver_t *d = sworld_dense(s, rank, w);
        for (int k = rank; k < s->n; k += s->sc.tp) {
            const char *param = NULL;
            int64_t elem = -1;
            if (!dcr_receiver_equal(s->r[k], d, &param, &elem))
                fail_msg(
                    "%s, tp %d ep %d: %s: receiver %d differs from the dense refit at %s[%lld]",
                    s->m.name, s->sc.tp, s->sc.ep, what, k, param, (long long)elem);
            dcr_check_result_t res;
            dcr_status_t st = dcr_receiver_check(s->r[k], d, &res);
            if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
        }
        dcr_receiver_destroy(d);
    }
}

static dcr_storage_t **sworld_next(sworld_t *s, double rate)
{
    dcr_storage_t **n = rt_tensors(s->inv, NULL);
    for (size_t t = 0; t < dcr_inventory_count(s->inv); t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(s->inv, t);
        rt_mutate(&s->rng, d->dtype, s->w[t]->data, n[t]->data, dcr_desc_numel(d), rate);
    }
    return n;
}

/* Applies ps on receiver k in a random order; keep_p (0..1) drops payloads
 * to emulate a partial first attempt. */
static void sworld_apply(sworld_t *s, int k, rt_payloads_t *ps, double keep)
{
    size_t *order = malloc(ps->n * sizeof(*order));
    for (size_t i = 0; i < ps->n; i++) order[i] = i;
    for (size_t i = ps->n; i > 1; i--) {
        size_t j = dcr_rng_below(&s->rng, i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < ps->n; i++) {
        if (keep < 1.0 && dcr_rng_uniform(&s->rng) >= keep) continue;
        dcr_ingest_t disp;
        dcr_status_t st =
            dcr_receiver_apply_payload(s->r[k], ps->buf[order[i]], ps->len[order[i]], &disp);
        if (st != DCR_OK) fail_msg("%s receiver %d: %s", s->m.name, k, dcr_error_line(st));
        assert_int_equal(disp, DCR_INGEST_ACCEPTED);
    }
    free(order);
}

/* One transition. With partial, a first attempt lands partly and the
 * all-overwrite retry completes it. */
static void sworld_refit(sworld_t *s, double rate, bool all_overwrite, bool partial)
{
    dcr_storage_t **n = sworld_next(s, rate);
    size_t nt = dcr_inventory_count(s->inv);
    int *over = malloc(nt * sizeof(*over));
    for (size_t t = 0; t < nt; t++) over[t] = DCR_ENCODING_OVERWRITE;
    rt_payloads_t ps = {0};
    s->tau++;
    rt_encode_refit(s->inv, s->w, n, all_overwrite ? over : s->enc, s->tau, 4, 24, &s->rng, &ps);
    for (int k = 0; k < s->n; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(s->r[k], s->tau), DCR_OK);
        sworld_apply(s, k, &ps, partial ? 0.5 : 1.0);
    }
    if (partial) {
        rt_payloads_t retry = {0};
        s->tau++;
        rt_encode_refit(s->inv, s->w, n, over, s->tau, 4, 24, &s->rng, &retry);
        for (int k = 0; k < s->n; k++) {
            assert_int_equal(dcr_receiver_begin_attempt(s->r[k], s->tau), DCR_OK);
            sworld_apply(s, k, &retry, 1.0);
        }
        rt_payloads_free(&retry);
    }
    sworld_assert_dense(s, n, partial ? "partial + retry" : all_overwrite ? "overwrite" : "delta");
    rt_payloads_free(&ps);
    free(over);
    rt_tensors_free(s->w, s->inv);
    s->w = n;
}

typedef struct scase {
    const char *model;
    int layers, experts;
    int tp;
    bool ep;
    unsigned var;
    int nodes;
} scase_t;

static void run_case(const scase_t *c, uint64_t seed)
{
    sworld_t s;
    bool full_pass = (seed & 3) == 3;
    sworld_init(&s, c->model, c->layers, c->experts, c->tp, c->ep, c->var, c->nodes ? c->nodes : 1,
                full_pass, seed);
    sworld_refit(&s, 0.02, false, false);
    sworld_refit(&s, 0.3, false, false);
    sworld_refit(&s, 0.1, false, true);
    sworld_refit(&s, 0.05, true, false);
    sworld_free(&s);
}

static void run_cases(const scase_t *cases, size_t n)
{
    uint64_t seed = testkit_seed(20240601);
    for (size_t i = 0; i < n; i++) run_case(&cases[i], seed + i);
}

static void test_qwen3_moe(void **state)
{
    const scase_t cases[] = {
        {"qwen3-30b-a3b", 1, 16, 1, false, 0, 0},
        {"qwen3-30b-a3b", 1, 16, 2, false, VAR_FP32_NORMS | VAR_W2_T, 0},
        {"qwen3-30b-a3b", 1, 16, 4, true, 0, 0},
        {"qwen3-30b-a3b", 2, 16, 8, false, VAR_W2_T, 0},
        {"qwen3-30b-a3b", 1, 16, 8, true, VAR_FP32_NORMS | VAR_W2_T, 0},
        {"qwen3-30b-a3b", 1, 6, 4, true, VAR_W2_T, 0}, /* remainder experts on the last rank */
        {"qwen3-30b-a3b", 1, 16, 2, true, 0, 2},       /* two instances */
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_dense_families(void **state)
{
    const scase_t cases[] = {
        {"qwen2.5-0.5b", 2, 0, 1, false, 0, 0},
        {"qwen2.5-0.5b", 2, 0, 2, false, VAR_FP32_NORMS, 0},
        {"qwen2.5-1.5b", 2, 0, 4, false, 0, 0}, /* 2 KV heads over 4 ranks */
        {"qwen2.5-7b", 2, 0, 2, false, 0, 0},   /* untied head, biases */
        {"qwen2.5-7b", 1, 0, 4, false, VAR_FP32_NORMS, 0},
        {"llama-3.2-3b", 2, 0, 1, false, VAR_FP32_NORMS, 0},
        {"llama-3.2-3b", 1, 0, 2, false, 0, 0},
        {"llama-3.2-3b", 1, 0, 4, false, 0, 0},
        {"llama-3.2-3b", 2, 0, 8, false, 0, 0},
        {"gemma-3-4b", 1, 0, 1, false, 0, 0},
        {"gemma-3-4b", 1, 0, 4, false, 0, 0},
        {"gemma-3-4b", 2, 0, 2, false, 0, 0},
        {"gemma-3-4b", 2, 0, 8, false, VAR_FP32_NORMS, 0},
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_nemotron_h(void **state)
{
    /* Six layers: M, E, M, E, M, * (every mixer kind). */
    const scase_t cases[] = {
        {"nemotron-3-nano-30b-a3b", 6, 16, 1, false, 0, 0},
        {"nemotron-3-nano-30b-a3b", 6, 16, 2, true, VAR_FP32_NORMS, 0},
        {"nemotron-3-nano-30b-a3b", 6, 16, 4, false, VAR_W2_T, 0},
        {"nemotron-3-nano-30b-a3b", 6, 16, 8, true, VAR_FP32_NORMS | VAR_W2_T, 0},
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* ---- classification from first principles ---- */

static size_t count_class(dcr_receiver_t *r, const dcr_inventory_t *inv, dcr_path_class_t cls,
                          const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        dcr_path_info_t pi;
        assert_int_equal(dcr_receiver_path(r, i, &pi), DCR_OK);
        if (pi.cls == cls && (needle == NULL || strstr(dcr_inventory_at(inv, i)->name, needle)))
            n++;
    }
    return n;
}

static void test_classes(void **state)
{
    sworld_t s;
    /* Qwen3 MoE, 2 layers, 16 experts, EP over 4 ranks: rank 0 holds experts
     * 0..3, so 12 x 3 expert tensors per layer are skipped; with FP32 norms the
     * 4 norms per layer and the final norm are casts. */
    sworld_init(&s, "qwen3-30b-a3b", 2, 16, 4, true, VAR_FP32_NORMS, 1, false, 1);
    assert_int_equal(count_class(s.r[0], s.inv, DCR_PATH_SKIPPED, NULL), 2 * 12 * 3);
    assert_int_equal(count_class(s.r[0], s.inv, DCR_PATH_OVERWRITE, NULL), 2 * 4 + 1);
    assert_int_equal(count_class(s.r[0], s.inv, DCR_PATH_OVERWRITE, "norm"), 2 * 4 + 1);
    assert_int_equal(count_class(s.r[3], s.inv, DCR_PATH_XOR, "experts"), 2 * 4 * 3);
    size_t nt = dcr_inventory_count(s.inv);
    size_t xor = 0;
    for (size_t t = 0; t < nt; t++) xor += s.enc[t] == DCR_ENCODING_XOR;
    assert_int_equal(xor, nt - (2 * 4 + 1));
    sworld_free(&s);

    /* Nemotron: the FP32 router (cast) and A (map) are overwrites; the FP32
     * correction bias is cast to its own dtype, a no-op, so XOR. */
    sworld_init(&s, "nemotron-3-nano-30b-a3b", 6, 16, 2, false, 0, 1, false, 2);
    assert_int_equal(count_class(s.r[1], s.inv, DCR_PATH_OVERWRITE, NULL), 2 + 3);
    assert_int_equal(count_class(s.r[1], s.inv, DCR_PATH_OVERWRITE, "gate.weight"), 2);
    assert_int_equal(count_class(s.r[1], s.inv, DCR_PATH_OVERWRITE, "A_log"), 3);
    assert_int_equal(count_class(s.r[1], s.inv, DCR_PATH_XOR, "e_score_correction_bias"), 2);
    dcr_path_info_t pi;
    assert_int_equal(
        dcr_receiver_path(s.r[1],
                          (size_t)dcr_inventory_find(s.inv, "backbone.layers.0.mixer.A_log"), &pi),
        DCR_OK);
    assert_string_equal(pi.op, "map neg_exp");
    assert_false(pi.views_only);
    sworld_free(&s);
}

/* ---- layouts ---- */

static void test_layout_rules(void **state)
{
    assert_int_equal(dcr_serve_padded_vocab(151936), 151936);
    assert_int_equal(dcr_serve_padded_vocab(151937), 152000);
    int first, count;
    dcr_serve_expert_block(128, 8, 7, &first, &count);
    assert_int_equal(first, 112);
    assert_int_equal(count, 16);
    dcr_serve_expert_block(6, 4, 3, &first, &count);
    assert_int_equal(first, 3);
    assert_int_equal(count, 3);
    dcr_model_config_t m;
    testkit_load_model("qwen2.5-0.5b", 1, 0, &m);
    dcr_serve_config_t sc = dcr_serve_config_default();
    sc.tp = 4; /* 14 heads */
    assert_int_equal(dcr_serve_config_validate(&m, &sc), DCR_ELAYOUT);
    if (strstr(dcr_error_detail(), "attention heads") == NULL) fail_msg("%s", dcr_error_detail());
    sc.tp = 2;
    sc.gpus_per_node = 3;
    assert_int_equal(dcr_serve_config_validate(&m, &sc), DCR_ELAYOUT);
    sc.gpus_per_node = 0;
    sc.nodes = 3;
    assert_int_equal(dcr_serve_config_validate(&m, &sc), DCR_OK);
    assert_int_equal(dcr_serve_receivers(&sc), 6);
    assert_int_equal(dcr_serve_tp_rank(&sc, 5), 1);
    /* Loader names come from the registry. */
    assert_int_equal(dcr_serve_register_loaders(), DCR_OK);
    assert_non_null(dcr_loader_find(dcr_serve_loader_name(DCR_FAMILY_NEMOTRON_H)));
}

/* The rotary buffer and a tied head are skipped explicitly by the loader. */
static void test_skipped_names(void **state)
{
    sworld_t s;
    sworld_init(&s, "llama-3.2-3b", 1, 0, 2, false, 0, 1, false, 3);
    dcr_loader_t *l;
    dcr_serve_loader_config_t lc = {&s.m, s.sc, 1};
    assert_int_equal(dcr_loader_create("vllm.llama", &lc, false, &l), DCR_OK);
    dcr_load_ctx_t *ctx;
    assert_int_equal(dcr_load_ctx_create(dcr_loader_params(l), &ctx), DCR_OK);
    dcr_view_t v;
    int64_t shape[1] = {64};
    dcr_storage_t *st;
    assert_int_equal(dcr_storage_create(128, &st), DCR_OK);
    assert_int_equal(dcr_view_contiguous(st, DCR_DTYPE_BF16, 1, shape, &v), DCR_OK);
    assert_int_equal(dcr_loader_load(l, ctx, "model.layers.0.self_attn.rotary_emb.inv_freq", &v),
                     DCR_OK);
    assert_true(dcr_load_ctx_skipped(ctx));
    assert_string_equal(dcr_load_ctx_skip_reason(ctx), "rotary buffer");
    assert_int_equal(dcr_loader_load(l, ctx, "lm_head.weight", &v), DCR_OK);
    assert_string_equal(dcr_load_ctx_skip_reason(ctx), "lm_head tied to the embedding");
    assert_int_equal(dcr_loader_load(l, ctx, "model.layers.0.mlp.nonsense.weight", &v),
                     DCR_ENOTFOUND);
    dcr_storage_destroy(st);
    dcr_load_ctx_destroy(ctx);
    dcr_loader_destroy(l);
    sworld_free(&s);
}

/* ---- the seed's XOR item counts ---- */

static void test_qwen3_30b_xor_items(void **state)
{
    dcr_model_config_t m;
    dcr_inventory_t *inv;
    testkit_load_model("qwen3-30b-a3b", 1, 0, &m);
    assert_int_equal(dcr_model_build_inventory(&m, &inv), DCR_OK);
    const int degrees[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        int t = degrees[i];
        dcr_train_config_t tc = {1, t, t, t, 1, 1, 0};
        dcr_source_layout_t *layout;
        assert_int_equal(dcr_train_config_validate(&m, &tc), DCR_OK);
        assert_int_equal(dcr_megatron_build(&m, inv, &tc, DCR_MAPPING_PAPER, &layout), DCR_OK);
        dcr_serve_config_t sc = dcr_serve_config_default();
        sc.tp = t;
        sc.gpus_per_node = t;
        dcr_serve_split_t split;
        dcr_status_t st = dcr_serve_xor_split(&m, inv, layout, &sc, &split);
        if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
        /* Seed, Table D.2 text: 18,480t + 241 XOR items of 18,480t + 387. */
        assert_int_equal(split.xor_items, 18480 * t + 241);
        assert_int_equal(split.xor_items + split.overwrite_items, 18480 * t + 241 + 146);
        assert_true(split.xor_byte_share > 0.962 && split.xor_byte_share < 0.964);
        dcr_source_layout_destroy(layout);
    }
    dcr_inventory_destroy(inv);
}

/* FP8 block-quantized exports through the loaders (vLLM's block FP8 linear:
 * weight and inverse scales copied as they are, split along the input on
 * block boundaries), refit against dense refits; a TP degree that would cut
 * a quantization block is refused at layout validation. */
static void test_fp8_export(void **state)
{
    const scase_t cases[] = {
        {"qwen3-30b-a3b", 1, 4, 1, false, VAR_FP8, 0},
        {"qwen3-30b-a3b", 1, 4, 4, false, VAR_FP8, 0},
        {"qwen3-30b-a3b", 1, 8, 8, true, VAR_FP8 | VAR_FP32_NORMS, 0},
        {"llama-3.2-3b", 2, 0, 2, false, VAR_FP8, 0},
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
    dcr_model_config_t m;
    testkit_load_model("qwen3-30b-a3b", 32, 1, &m);
    m.fp8_layers = 1;
    dcr_serve_config_t sc = dcr_serve_config_default();
    /* 32 heads of 8 at this scale: 64 columns per rank at TP 4, 128 at TP 2. */
    assert_int_equal(m.heads * m.head_dim, 256);
    sc.tp = 4;
    assert_int_equal(dcr_serve_config_validate(&m, &sc), DCR_ELAYOUT);
    assert_non_null(strstr(dcr_error_detail(), "quantization block"));
    sc.tp = 2;
    sc.gpus_per_node = 0;
    dcr_status_t st = dcr_serve_config_validate(&m, &sc);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
}

/* The apply benchmark (dcr microbench apply): its refits are checked against
 * dense refits inside; here its record counts follow from the rate and the
 * tensors the receiver holds (round(rate * n) changed elements each), and
 * its figures are consistent with each other. */
static void test_apply_bench(void **state)
{
    dcr_model_config_t m;
    testkit_load_model("qwen3-30b-a3b", 32, 2, &m);
    m.experts = 8;
    dcr_inventory_t *inv;
    assert_int_equal(dcr_model_build_inventory(&m, &inv), DCR_OK);
    dcr_serve_config_t sc = dcr_serve_config_default();
    sc.tp = sc.gpus_per_node = 2;
    dcr_receiver_t *probe;
    assert_int_equal(dcr_serve_receiver_create(&m, inv, &sc, 1, NULL, &probe), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(probe), DCR_OK);
    const double rates[] = {0.01, 0.2};
    int64_t expect[2] = {0, 0};
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
        dcr_path_info_t pi;
        assert_int_equal(dcr_receiver_path(probe, t, &pi), DCR_OK);
        if (pi.cls == DCR_PATH_SKIPPED) continue;
        double n = (double)dcr_desc_numel(dcr_inventory_at(inv, t));
        for (int i = 0; i < 2; i++) expect[i] += (int64_t)(rates[i] * n + 0.5);
    }
    dcr_serve_bench_options_t opt = {1, false, true, 2, testkit_seed(7), true};
    dcr_serve_bench_result_t res[2];
    dcr_status_t st = dcr_serve_bench_run(&m, &sc, &opt, rates, 2, res);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    for (int i = 0; i < 2; i++) {
        assert_true(res[i].rate == rates[i]);
        assert_int_equal(res[i].records, expect[i]);
        assert_int_equal(res[i].resident_bytes, dcr_params_bytes(dcr_receiver_params(probe)));
        assert_true(res[i].dense_s > 0 && res[i].apply_s > 0 && res[i].full_apply_s > 0);
        assert_true(res[i].ingest_s >= res[i].apply_s);
        assert_true(res[i].ratio == res[i].apply_s / res[i].dense_s);
        assert_true(res[i].full_ratio == res[i].full_apply_s / res[i].dense_s);
        assert_true(res[i].items_sparse > 0 && res[i].payload_bytes > 0);
        /* The floor loop ran (and rebuilt the new version, or the run failed). */
        assert_true(res[i].floor_s > 0 && res[i].floor_ratio == res[i].floor_s / res[i].dense_s);
        assert_true(res[i].floor_cold_s > 0);
        /* The loader-per-item receiver ran on the same payloads (and was
         * checked against the dense refit, or the run failed). */
        assert_true(res[i].loader_apply_s > 0);
    }
    const double bad = 1.5;
    assert_int_equal(dcr_serve_bench_run(&m, &sc, &opt, &bad, 1, res), DCR_EINVAL);
    opt.repeats = 0;
    assert_int_equal(dcr_serve_bench_run(&m, &sc, &opt, rates, 1, res), DCR_EINVAL);
    dcr_receiver_destroy(probe);
    dcr_inventory_destroy(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_rules),
        cmocka_unit_test(test_skipped_names),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_qwen3_moe),
        cmocka_unit_test(test_dense_families),
        cmocka_unit_test(test_nemotron_h),
        cmocka_unit_test(test_qwen3_30b_xor_items),
        cmocka_unit_test(test_fp8_export),
        cmocka_unit_test(test_apply_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
