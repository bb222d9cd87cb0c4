/* vLLM-like native loaders: the shared weight_loader pieces and the decoder
 * families (qwen3_moe, qwen2, llama, gemma3_text); families.c registers
 * them.
 * Written only against dcr/loader.h: names resolve to resident parameters,
 * values move through views, casts and the hooked copy_/fill_. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/serve/serve-internal.h"

/* ---- names ---- */

dcr_status_t dcr__name(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, DCR__SERVE_NAME_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= DCR__SERVE_NAME_MAX)
        return dcr_error_set(DCR_EINVAL, "vllm loader: name longer than %d bytes",
                             DCR__SERVE_NAME_MAX - 1);
    return DCR_OK;
}

dcr_status_t dcr__decl(dcr_params_t *p, const char *a, const char *b, dcr_dtype_t dtype, int ndim,
                       int64_t d0, int64_t d1, int64_t d2)
{
    char name[DCR__SERVE_NAME_MAX];
    DCR_CHECK(dcr__name(name, "%s%s", a, b));
    int64_t shape[3] = {d0, d1, d2};
    return dcr_params_declare(p, name, dtype, ndim, shape, NULL);
}

/* Parses a non-negative decimal number followed by '.'. */
static bool dcr__number_dot(const char *s, int *n_p, const char **after_p)
{
    if (*s < '0' || *s > '9') return false;
    long n = 0;
    while (*s >= '0' && *s <= '9' && n < 100000000) n = n * 10 + (*s++ - '0');
    if (*s != '.') return false;
    *n_p = (int)n;
    *after_p = s + 1;
    return true;
}

bool dcr__split_layer(const char *name, const char *layers, int *layer_p, const char **rest_p)
{
    size_t len = strlen(layers);
    if (strncmp(name, layers, len) != 0) return false;
    return dcr__number_dot(name + len, layer_p, rest_p);
}

bool dcr__split_expert(const char *rest, const char *head, int *expert_p, const char **tail_p)
{
    size_t len = strlen(head);
    if (strncmp(rest, head, len) != 0 || rest[len] != '.') return false;
    return dcr__number_dot(rest + len + 1, expert_p, tail_p);
}

/* ---- weight_loader pieces ---- */

/* Casts to the parameter's dtype when it differs (FP32 norms, FP32 router). */
static dcr_status_t dcr__to_param_dtype(dcr_load_ctx_t *ctx, const dcr_view_t *dst,
                                        const dcr_view_t *src, dcr_view_t *out)
{
    if (src->dtype == dst->dtype) {
        *out = *src;
        return DCR_OK;
    }
    return dcr_load_cast(ctx, src, dst->dtype, out);
}

dcr_status_t dcr__load_whole(dcr_load_ctx_t *ctx, const char *param, const dcr_view_t *w)
{
    dcr_view_t dst, src;
    DCR_CHECK(dcr_load_param(ctx, param, &dst));
    DCR_CHECK(dcr__to_param_dtype(ctx, &dst, w, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

dcr_status_t dcr__load_rows(dcr_load_ctx_t *ctx, const char *param, int64_t at, const dcr_view_t *w,
                            int64_t src_start, int64_t rows)
{
    dcr_view_t p, dst, part, src;
    DCR_CHECK(dcr_load_param(ctx, param, &p));
    DCR_CHECK(dcr_load_narrow(ctx, &p, 0, at, rows, &dst));
    DCR_CHECK(dcr_load_narrow(ctx, w, 0, src_start, rows, &part));
    DCR_CHECK(dcr__to_param_dtype(ctx, &dst, &part, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

dcr_status_t dcr__load_cols(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param,
                            const dcr_view_t *w)
{
    dcr_view_t dst, src;
    DCR_CHECK(dcr_load_param(ctx, param, &dst));
    int64_t n = w->shape[1] / s->tp;
    DCR_CHECK(dcr_load_narrow(ctx, w, 1, (int64_t)s->rank * n, n, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

dcr_status_t dcr__load_qkv(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param, char which,
                           const dcr_view_t *w)
{
    int64_t hd = s->m.head_dim, q = s->nh_l * hd, kv = s->kv_l * hd;
    int64_t off = 0, size = q, shard = s->rank;
    if (which != 'q') {
        /* With more ranks than KV heads, tp / kv ranks share one head. */
        size = kv;
        shard = s->rank / s->kv_rep;
        off = which == 'k' ? q : q + kv;
    }
    dcr_view_t p, dst, src;
    DCR_CHECK(dcr_load_param(ctx, param, &p));
    DCR_CHECK(dcr_load_narrow(ctx, &p, 0, off, size, &dst));
    DCR_CHECK(dcr_load_narrow(ctx, w, 0, shard * size, size, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

dcr_status_t dcr__load_vocab(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param,
                             const dcr_view_t *w)
{
    int64_t start = (int64_t)s->rank * s->vrows, n = w->shape[0] - start;
    if (n < 0) n = 0;
    if (n > s->vrows) n = s->vrows;
    dcr_view_t p, dst, src;
    DCR_CHECK(dcr_load_param(ctx, param, &p));
    if (n > 0) {
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 0, n, &dst));
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, start, n, &src));
        DCR_CHECK(dcr_load_copy(ctx, &dst, &src));
    }
    if (n < s->vrows) {
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, n, s->vrows - n, &dst));
        DCR_CHECK(dcr_load_fill(ctx, &dst, 0.0));
    }
    return DCR_OK;
}

dcr_status_t dcr__load_expert(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *prefix,
                              int expert, int part, const char *tail, const dcr_view_t *w)
{
    if (expert < s->e_first || expert >= s->e_first + s->e_count)
        return dcr_load_skip(ctx, "non-local expert");
    int64_t le = expert - s->e_first, il = s->m.moe_intermediate / s->e_tp;
    char param[DCR__SERVE_NAME_MAX];
    dcr_view_t p, slot, dst, src;
    if (strcmp(tail, "down_proj.weight") == 0) {
        DCR_CHECK(dcr__name(param, "%sw2_weight", prefix));
        DCR_CHECK(dcr_load_param(ctx, param, &p));
        DCR_CHECK(dcr_load_select(ctx, &p, 0, le, &slot));
        if (s->sc.w2_transposed)
            DCR_CHECK(dcr_load_transpose(ctx, &slot, 0, 1, &dst));
        else
            dst = slot;
        DCR_CHECK(dcr_load_narrow(ctx, w, 1, (int64_t)s->e_rank * il, il, &src));
        return dcr_load_copy(ctx, &dst, &src);
    }
    DCR_CHECK(dcr__name(param, "%sw13_weight", prefix));
    DCR_CHECK(dcr_load_param(ctx, param, &p));
    DCR_CHECK(dcr_load_select(ctx, &p, 0, le, &slot));
    DCR_CHECK(dcr_load_narrow(ctx, &slot, 0, part * il, il, &dst));
    DCR_CHECK(dcr_load_narrow(ctx, w, 0, (int64_t)s->e_rank * il, il, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

/* ---- declarations ---- */

/* vLLM's block-quantized FP8 linear (row parallel): the e4m3 weight and its
 * FP32 inverse scales, one per 128 x 128 block, both split along the input
 * dimension on block boundaries (dcr_serve_config_validate holds tp to it). */
static dcr_status_t dcr__decl_fp8_linear(dcr_params_t *p, const char *lp, const char *name,
                                         int64_t rows, int64_t cols)
{
    const int64_t b = DCR_FP8_BLOCK;
    char scale[DCR__SERVE_NAME_MAX];
    DCR_CHECK(dcr__name(scale, "%s_scale_inv", name));
    DCR_CHECK(dcr__decl(p, lp, name, DCR_DTYPE_FP8_E4M3, 2, rows, cols, 0));
    return dcr__decl(p, lp, scale, DCR_DTYPE_FP32, 2, (rows + b - 1) / b, (cols + b - 1) / b, 0);
}

dcr_status_t dcr__decl_attention(const dcr__vllm_t *s, dcr_params_t *p, const char *lp, int layer,
                                 bool bias, bool o_bias, bool qk_norm)
{
    int64_t hd = s->m.head_dim, h = s->m.hidden, rows = (s->nh_l + 2 * s->kv_l) * hd;
    DCR_CHECK(dcr__decl(p, lp, "qkv_proj.weight", DCR_DTYPE_BF16, 2, rows, h, 0));
    if (bias) DCR_CHECK(dcr__decl(p, lp, "qkv_proj.bias", DCR_DTYPE_BF16, 1, rows, 0, 0));
    if (layer < s->m.fp8_layers)
        DCR_CHECK(dcr__decl_fp8_linear(p, lp, "o_proj.weight", h, s->nh_l * hd));
    else
        DCR_CHECK(dcr__decl(p, lp, "o_proj.weight", DCR_DTYPE_BF16, 2, h, s->nh_l * hd, 0));
    if (o_bias) DCR_CHECK(dcr__decl(p, lp, "o_proj.bias", DCR_DTYPE_BF16, 1, h, 0, 0));
    if (qk_norm) {
        DCR_CHECK(dcr__decl(p, lp, "q_norm.weight", s->norm_dtype, 1, hd, 0, 0));
        DCR_CHECK(dcr__decl(p, lp, "k_norm.weight", s->norm_dtype, 1, hd, 0, 0));
    }
    return DCR_OK;
}

dcr_status_t dcr__decl_experts(const dcr__vllm_t *s, dcr_params_t *p, const char *ep, int parts)
{
    int64_t h = s->m.hidden, il = s->m.moe_intermediate / s->e_tp;
    DCR_CHECK(dcr__decl(p, ep, "w13_weight", DCR_DTYPE_BF16, 3, s->e_count, parts * il, h));
    if (s->sc.w2_transposed)
        return dcr__decl(p, ep, "w2_weight", DCR_DTYPE_BF16, 3, s->e_count, il, h);
    return dcr__decl(p, ep, "w2_weight", DCR_DTYPE_BF16, 3, s->e_count, h, il);
}

dcr_status_t dcr__vllm_init(const dcr_serve_loader_config_t *lc, dcr_model_family_t family,
                            const char *prefix, dcr__vllm_t *s)
{
    if (lc == NULL || lc->model == NULL)
        return dcr_error_set(DCR_EINVAL, "vllm loader: no model in the loader config");
    if (lc->model->family != family)
        return dcr_error_set(DCR_EINVAL, "vllm loader for %s given a %s model",
                             dcr_model_family_name(family),
                             dcr_model_family_name(lc->model->family));
    memset(s, 0, sizeof(*s));
    s->m = *lc->model;
    s->sc = lc->serve;
    DCR_CHECK(dcr_serve_config_validate(&s->m, &s->sc));
    s->tp = s->sc.tp;
    s->rank = lc->tp_rank;
    if (s->rank < 0 || s->rank >= s->tp)
        return dcr_error_set(DCR_EINVAL, "vllm loader: tp rank %d outside [0, %d)", s->rank, s->tp);
    snprintf(s->prefix, sizeof(s->prefix), "%s", prefix);
    snprintf(s->layers, sizeof(s->layers), "%slayers.", s->prefix);
    s->norm_dtype = s->sc.fp32_norms ? DCR_DTYPE_FP32 : DCR_DTYPE_BF16;
    s->vrows = dcr_serve_padded_vocab(s->m.vocab) / s->tp;
    s->nh_l = s->m.heads / s->tp;
    s->kv_l = s->m.kv_heads >= s->tp ? s->m.kv_heads / s->tp : 1;
    s->kv_rep = s->m.kv_heads >= s->tp ? 1 : s->tp / s->m.kv_heads;
    if (s->sc.ep) {
        dcr_serve_expert_block(s->m.experts, s->tp, s->rank, &s->e_first, &s->e_count);
        s->e_tp = 1;
    } else {
        s->e_count = s->m.experts;
        s->e_tp = s->tp;
        s->e_rank = s->rank;
    }
    return DCR_OK;
}

/* ---- decoder families ---- */

static const char *const dcr__norms[] = {
    "input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
    "post_feedforward_layernorm.weight"};

static dcr_status_t dcr__decoder_layer_declare(const dcr__vllm_t *s, dcr_params_t *p, int l)
{
    char lp[DCR__SERVE_NAME_MAX], sub[DCR__SERVE_NAME_MAX];
    const dcr_model_config_t *m = &s->m;
    int64_t h = m->hidden;
    int nnorms = m->family == DCR_FAMILY_GEMMA3 ? 4 : 2;
    DCR_CHECK(dcr__name(lp, "%s%d.", s->layers, l));
    for (int i = 0; i < nnorms; i++)
        DCR_CHECK(dcr__decl(p, lp, dcr__norms[i], s->norm_dtype, 1, h, 0, 0));
    DCR_CHECK(dcr__name(sub, "%sself_attn.", lp));
    DCR_CHECK(dcr__decl_attention(s, p, sub, l, m->qkv_bias,
                                  m->qkv_bias && m->family != DCR_FAMILY_QWEN2, m->qk_norm));
    if (m->family == DCR_FAMILY_QWEN3_MOE) {
        DCR_CHECK(dcr__decl(p, lp, "mlp.gate.weight", DCR_DTYPE_BF16, 2, m->experts, h, 0));
        DCR_CHECK(dcr__name(sub, "%smlp.experts.", lp));
        return dcr__decl_experts(s, p, sub, 2);
    }
    int64_t il = m->intermediate / s->tp;
    DCR_CHECK(dcr__decl(p, lp, "mlp.gate_up_proj.weight", DCR_DTYPE_BF16, 2, 2 * il, h, 0));
    return dcr__decl(p, lp, "mlp.down_proj.weight", DCR_DTYPE_BF16, 2, h, il, 0);
}

static const char *dcr__lm_head(const dcr__vllm_t *s)
{
    return s->m.family == DCR_FAMILY_GEMMA3 ? "language_model.lm_head.weight" : "lm_head.weight";
}

dcr_status_t dcr__decoder_declare(const dcr__vllm_t *s, dcr_params_t *p)
{
    int64_t h = s->m.hidden;
    DCR_CHECK(dcr__decl(p, s->prefix, "embed_tokens.weight", DCR_DTYPE_BF16, 2, s->vrows, h, 0));
    for (int l = 0; l < s->m.layers; l++) DCR_CHECK(dcr__decoder_layer_declare(s, p, l));
    DCR_CHECK(dcr__decl(p, s->prefix, "norm.weight", s->norm_dtype, 1, h, 0, 0));
    /* A tied head is the embedding itself (vLLM points lm_head at it). */
    if (!s->m.tied_embeddings)
        DCR_CHECK(dcr__decl(p, dcr__lm_head(s), "", DCR_DTYPE_BF16, 2, s->vrows, h, 0));
    return DCR_OK;
}

static bool dcr__is_norm(const char *rest)
{
    for (size_t i = 0; i < sizeof(dcr__norms) / sizeof(dcr__norms[0]); i++)
        if (strcmp(rest, dcr__norms[i]) == 0) return true;
    return false;
}

static dcr_status_t dcr__decoder_attention(const dcr__vllm_t *s, dcr_load_ctx_t *ctx,
                                           const char *lp, const char *r, const dcr_view_t *w)
{
    char param[DCR__SERVE_NAME_MAX];
    if ((r[0] == 'q' || r[0] == 'k' || r[0] == 'v') && strncmp(r + 1, "_proj.", 6) == 0) {
        DCR_CHECK(dcr__name(param, "%sself_attn.qkv_proj.%s", lp, r + 7));
        return dcr__load_qkv(s, ctx, param, r[0], w);
    }
    DCR_CHECK(dcr__name(param, "%sself_attn.%s", lp, r));
    /* o_proj is row parallel: its weight, and an FP8 export's block scales
     * (copied as they are, like the FP8 weight), split along the input. */
    if (strcmp(r, "o_proj.weight") == 0 || strcmp(r, "o_proj.weight_scale_inv") == 0)
        return dcr__load_cols(s, ctx, param, w);
    /* o_proj.bias (row-parallel bias) and the q/k norms are replicated. */
    return dcr__load_whole(ctx, param, w);
}

static dcr_status_t dcr__decoder_mlp(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *lp,
                                     const char *r, const dcr_view_t *w)
{
    char param[DCR__SERVE_NAME_MAX];
    int e;
    const char *tail;
    if (dcr__split_expert(r, "experts", &e, &tail)) {
        DCR_CHECK(dcr__name(param, "%smlp.experts.", lp));
        return dcr__load_expert(s, ctx, param, e, strcmp(tail, "up_proj.weight") == 0, tail, w);
    }
    if (strcmp(r, "gate.weight") == 0) {
        DCR_CHECK(dcr__name(param, "%smlp.gate.weight", lp));
        return dcr__load_whole(ctx, param, w);
    }
    int64_t il = s->m.intermediate / s->tp;
    if (strcmp(r, "gate_proj.weight") == 0 || strcmp(r, "up_proj.weight") == 0) {
        DCR_CHECK(dcr__name(param, "%smlp.gate_up_proj.weight", lp));
        return dcr__load_rows(ctx, param, r[0] == 'u' ? il : 0, w, (int64_t)s->rank * il, il);
    }
    DCR_CHECK(dcr__name(param, "%smlp.%s", lp, r));
    return dcr__load_cols(s, ctx, param, w);
}

dcr_status_t dcr__decoder_load(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *name,
                               const dcr_view_t *w)
{
    char lp[DCR__SERVE_NAME_MAX];
    int l;
    const char *rest;
    if (strstr(name, "rotary_emb.inv_freq")) return dcr_load_skip(ctx, "rotary buffer");
    if (strcmp(name, dcr__lm_head(s)) == 0) {
        if (s->m.tied_embeddings) return dcr_load_skip(ctx, "lm_head tied to the embedding");
        return dcr__load_vocab(s, ctx, name, w);
    }
    if (strncmp(name, s->prefix, strlen(s->prefix)) == 0) {
        const char *top = name + strlen(s->prefix);
        if (strcmp(top, "embed_tokens.weight") == 0) return dcr__load_vocab(s, ctx, name, w);
        if (strcmp(top, "norm.weight") == 0) return dcr__load_whole(ctx, name, w);
    }
    if (dcr__split_layer(name, s->layers, &l, &rest)) {
        DCR_CHECK(dcr__name(lp, "%s%d.", s->layers, l));
        if (dcr__is_norm(rest)) return dcr__load_whole(ctx, name, w);
        if (strncmp(rest, "self_attn.", 10) == 0)
            return dcr__decoder_attention(s, ctx, lp, rest + 10, w);
        if (strncmp(rest, "mlp.", 4) == 0) return dcr__decoder_mlp(s, ctx, lp, rest + 4, w);
    }
    return dcr_error_set(DCR_ENOTFOUND, "vllm.%s: no parameter for tensor %s",
                         dcr_model_family_name(s->m.family), name);
}
