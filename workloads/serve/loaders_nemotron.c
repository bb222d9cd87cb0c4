/* The vLLM-like NemotronH loader: Mamba-2 mixers (per-component in_proj and
 * conv1d shards, conv1d unsqueezed, A = -exp(A_log) in FP32), MoE mixers
 * (FP32 router and correction bias, relu2 experts with one w13 part, shared
 * experts) and attention mixers. */
#include <string.h>

#include "workloads/serve/serve-internal.h"

/* Component sizes of in_proj (z, x, B, C, dt) and conv1d (x, B, C). */
typedef struct dcr__mamba {
    int64_t d_inner, gs, nh;
} dcr__mamba_t;

static dcr__mamba_t dcr__mamba_of(const dcr_model_config_t *m)
{
    return (dcr__mamba_t){m->mamba_heads * m->mamba_head_dim,
                          (int64_t)m->mamba_groups * m->mamba_state, m->mamba_heads};
}

static dcr_status_t dcr__declare_mamba(const dcr__vllm_t *s, dcr_params_t *p, const char *mp)
{
    dcr__mamba_t z = dcr__mamba_of(&s->m);
    int64_t h = s->m.hidden, tp = s->tp, conv = z.d_inner + 2 * z.gs;
    DCR_CHECK(dcr__decl(p, mp, "in_proj.weight", DCR_DTYPE_BF16, 2,
                        (2 * z.d_inner + 2 * z.gs + z.nh) / tp, h, 0));
    DCR_CHECK(dcr__decl(p, mp, "conv1d.weight", DCR_DTYPE_BF16, 3, conv / tp, 1, s->m.conv_kernel));
    DCR_CHECK(dcr__decl(p, mp, "conv1d.bias", DCR_DTYPE_BF16, 1, conv / tp, 0, 0));
    DCR_CHECK(dcr__decl(p, mp, "A", DCR_DTYPE_FP32, 1, z.nh / tp, 0, 0));
    DCR_CHECK(dcr__decl(p, mp, "D", DCR_DTYPE_FP32, 1, z.nh / tp, 0, 0));
    DCR_CHECK(dcr__decl(p, mp, "dt_bias", DCR_DTYPE_BF16, 1, z.nh / tp, 0, 0));
    DCR_CHECK(dcr__decl(p, mp, "norm.weight", s->norm_dtype, 1, z.d_inner / tp, 0, 0));
    return dcr__decl(p, mp, "out_proj.weight", DCR_DTYPE_BF16, 2, h, z.d_inner / tp, 0);
}

static dcr_status_t dcr__declare_moe(const dcr__vllm_t *s, dcr_params_t *p, const char *mp)
{
    char ep[DCR__SERVE_NAME_MAX];
    int64_t h = s->m.hidden, sh = s->m.shared_intermediate / s->tp;
    DCR_CHECK(dcr__decl(p, mp, "gate.weight", DCR_DTYPE_FP32, 2, s->m.experts, h, 0));
    DCR_CHECK(
        dcr__decl(p, mp, "gate.e_score_correction_bias", DCR_DTYPE_FP32, 1, s->m.experts, 0, 0));
    DCR_CHECK(dcr__name(ep, "%sexperts.", mp));
    DCR_CHECK(dcr__decl_experts(s, p, ep, 1));
    DCR_CHECK(dcr__decl(p, mp, "shared_experts.up_proj.weight", DCR_DTYPE_BF16, 2, sh, h, 0));
    return dcr__decl(p, mp, "shared_experts.down_proj.weight", DCR_DTYPE_BF16, 2, h, sh, 0);
}

dcr_status_t dcr__nemotron_declare(const dcr__vllm_t *s, dcr_params_t *p)
{
    int64_t h = s->m.hidden;
    DCR_CHECK(dcr__decl(p, s->prefix, "embeddings.weight", DCR_DTYPE_BF16, 2, s->vrows, h, 0));
    for (int l = 0; l < s->m.layers; l++) {
        char lp[DCR__SERVE_NAME_MAX], mp[DCR__SERVE_NAME_MAX];
        DCR_CHECK(dcr__name(lp, "%s%d.", s->layers, l));
        DCR_CHECK(dcr__decl(p, lp, "norm.weight", s->norm_dtype, 1, h, 0, 0));
        DCR_CHECK(dcr__name(mp, "%smixer.", lp));
        char kind = s->m.pattern[l];
        if (kind == 'M')
            DCR_CHECK(dcr__declare_mamba(s, p, mp));
        else if (kind == 'E')
            DCR_CHECK(dcr__declare_moe(s, p, mp));
        else
            DCR_CHECK(dcr__decl_attention(s, p, mp, l, false, false, false));
    }
    DCR_CHECK(dcr__decl(p, s->prefix, "norm_f.weight", s->norm_dtype, 1, h, 0, 0));
    if (!s->m.tied_embeddings)
        DCR_CHECK(dcr__decl(p, "lm_head.weight", "", DCR_DTYPE_BF16, 2, s->vrows, h, 0));
    return DCR_OK;
}

/* Each component of a per-component sharded tensor: this rank's slice of
 * component c (dim 0) goes to the parameter right after the slices of the
 * components before it. `unsqueeze` first drops the conv1d middle dim of the
 * checkpoint tensor and restores it per slice, as vLLM's conv1d does. */
static dcr_status_t dcr__load_components(const dcr__vllm_t *s, dcr_load_ctx_t *ctx,
                                         const char *param, const dcr_view_t *w,
                                         const int64_t *sizes, int n, bool unsqueeze)
{
    dcr_view_t p, src_all = *w, dst, part, src;
    DCR_CHECK(dcr_load_param(ctx, param, &p));
    if (unsqueeze) DCR_CHECK(dcr_load_select(ctx, w, 1, 0, &src_all));
    int64_t src_at = 0, dst_at = 0;
    for (int c = 0; c < n; c++) {
        int64_t len = sizes[c] / s->tp;
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, dst_at, len, &dst));
        DCR_CHECK(dcr_load_narrow(ctx, &src_all, 0, src_at + (int64_t)s->rank * len, len, &part));
        if (unsqueeze)
            DCR_CHECK(dcr_load_unsqueeze(ctx, &part, 1, &src));
        else
            src = part;
        DCR_CHECK(dcr_load_copy(ctx, &dst, &src));
        src_at += sizes[c];
        dst_at += len;
    }
    return DCR_OK;
}

static dcr_status_t dcr__load_mamba(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *mp,
                                    const char *r, const dcr_view_t *w)
{
    dcr__mamba_t z = dcr__mamba_of(&s->m);
    char param[DCR__SERVE_NAME_MAX];
    DCR_CHECK(dcr__name(param, "%s%s", mp, r));
    if (strcmp(r, "in_proj.weight") == 0) {
        const int64_t sizes[5] = {z.d_inner, z.d_inner, z.gs, z.gs, z.nh};
        return dcr__load_components(s, ctx, param, w, sizes, 5, false);
    }
    const int64_t conv[3] = {z.d_inner, z.gs, z.gs};
    if (strcmp(r, "conv1d.weight") == 0)
        return dcr__load_components(s, ctx, param, w, conv, 3, true);
    if (strcmp(r, "conv1d.bias") == 0)
        return dcr__load_components(s, ctx, param, w, conv, 3, false);
    if (strcmp(r, "out_proj.weight") == 0) return dcr__load_cols(s, ctx, param, w);
    int64_t rows = w->shape[0] / s->tp;
    if (strcmp(r, "A_log") == 0) {
        dcr_view_t p, part, a;
        DCR_CHECK(dcr__name(param, "%sA", mp));
        DCR_CHECK(dcr_load_param(ctx, param, &p));
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, (int64_t)s->rank * rows, rows, &part));
        /* -exp of the closed set: the same bits on the host and a GPU. */
        DCR_CHECK(dcr_load_map_op(ctx, &part, DCR_DTYPE_FP32, DCR_LOAD_NEG_EXP, &a));
        return dcr_load_copy(ctx, &p, &a);
    }
    /* D, dt_bias and the gated norm are split on dim 0. */
    return dcr__load_rows(ctx, param, 0, w, (int64_t)s->rank * rows, rows);
}

static dcr_status_t dcr__load_moe(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *mp,
                                  const char *r, const dcr_view_t *w)
{
    char param[DCR__SERVE_NAME_MAX];
    int e;
    const char *tail;
    if (dcr__split_expert(r, "experts", &e, &tail)) {
        DCR_CHECK(dcr__name(param, "%sexperts.", mp));
        return dcr__load_expert(s, ctx, param, e, 0, tail, w);
    }
    DCR_CHECK(dcr__name(param, "%s%s", mp, r));
    if (strncmp(r, "gate.", 5) == 0) {
        /* The router runs in FP32: vLLM's loader casts on the way in (a no-op
         * for the FP32 correction bias, like torch's .to()). */
        dcr_view_t p, src;
        DCR_CHECK(dcr_load_param(ctx, param, &p));
        DCR_CHECK(dcr_load_cast(ctx, w, DCR_DTYPE_FP32, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    if (strcmp(r, "shared_experts.up_proj.weight") == 0) {
        int64_t rows = w->shape[0] / s->tp;
        return dcr__load_rows(ctx, param, 0, w, (int64_t)s->rank * rows, rows);
    }
    return dcr__load_cols(s, ctx, param, w);
}

dcr_status_t dcr__nemotron_load(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *name,
                                const dcr_view_t *w)
{
    int l;
    const char *rest;
    if (strncmp(name, "mtp.", 4) == 0) return dcr_load_skip(ctx, "multi-token prediction layer");
    if (strstr(name, "rotary_emb.inv_freq")) return dcr_load_skip(ctx, "rotary buffer");
    if (strcmp(name, "lm_head.weight") == 0) {
        if (s->m.tied_embeddings) return dcr_load_skip(ctx, "lm_head tied to the embedding");
        return dcr__load_vocab(s, ctx, name, w);
    }
    if (strcmp(name, "backbone.embeddings.weight") == 0) return dcr__load_vocab(s, ctx, name, w);
    if (strcmp(name, "backbone.norm_f.weight") == 0) return dcr__load_whole(ctx, name, w);
    if (dcr__split_layer(name, s->layers, &l, &rest) && l < s->m.layers) {
        char mp[DCR__SERVE_NAME_MAX];
        if (strcmp(rest, "norm.weight") == 0) return dcr__load_whole(ctx, name, w);
        DCR_CHECK(dcr__name(mp, "%s%d.mixer.", s->layers, l));
        if (strncmp(rest, "mixer.", 6) == 0) {
            const char *r = rest + 6;
            char kind = s->m.pattern[l];
            if (kind == 'M') return dcr__load_mamba(s, ctx, mp, r, w);
            if (kind == 'E') return dcr__load_moe(s, ctx, mp, r, w);
            if (r[0] != 'o' && strncmp(r + 1, "_proj.", 6) == 0) {
                char param[DCR__SERVE_NAME_MAX];
                DCR_CHECK(dcr__name(param, "%sqkv_proj.%s", mp, r + 7));
                return dcr__load_qkv(s, ctx, param, r[0], w);
            }
            char param[DCR__SERVE_NAME_MAX];
            DCR_CHECK(dcr__name(param, "%s%s", mp, r));
            return dcr__load_cols(s, ctx, param, w);
        }
    }
    return dcr_error_set(DCR_ENOTFOUND, "vllm.nemotron_h: no parameter for tensor %s", name);
}
