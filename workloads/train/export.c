/* Full conversion between Megatron shards and canonical tensors, written
 * from the layout rules with strided views, independently of the task box
 * maps; tests hold the tasks to it. One walker serves both directions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/train/megatron.h"

typedef struct walker {
    const dcr_model_config_t *m;
    const dcr_train_config_t *tc;
    const dcr_source_layout_t *layout;
    dcr_storage_t *const *shards;
    dcr_storage_t *const *canonical;
    dcr_inventory_t *shard_index; /* shard names -> index, for lookups by Megatron name */
    int to_canonical;             /* 1: export, 0: import */
    const char *prefix;
} walker_t;

#define NAME 400

static dcr_status_t shard_view(walker_t *w, const char *name, dcr_view_t *out_p)
{
    int64_t s = dcr_inventory_find(w->shard_index, name);
    if (s < 0)
        return dcr_error_set(DCR_ENOTFOUND, "full conversion: no shard %s in the layout", name);
    const dcr_tensor_desc_t *d = &w->layout->shards[s].desc;
    return dcr_view_contiguous(w->shards[s], d->dtype, d->ndim, d->shape, out_p);
}

static dcr_status_t canon_view_named(walker_t *w, const char *name, dcr_view_t *out_p)
{
    int64_t c = dcr_inventory_find(w->layout->inventory, name);
    if (c < 0) return dcr_error_set(DCR_ENOTFOUND, "full conversion: no canonical tensor %s", name);
    const dcr_tensor_desc_t *d = dcr_inventory_at(w->layout->inventory, (size_t)c);
    return dcr_view_contiguous(w->canonical[c], d->dtype, d->ndim, d->shape, out_p);
}

/* "<prefix>layers.<layer>.<rest>", or "<prefix><rest>" for layer < 0. */
static dcr_status_t canon_view(walker_t *w, int layer, const char *rest, dcr_view_t *out_p)
{
    char name[NAME];
    if (layer < 0)
        snprintf(name, sizeof(name), "%s%s", w->prefix, rest);
    else
        snprintf(name, sizeof(name), "%slayers.%d.%s", w->prefix, layer, rest);
    return canon_view_named(w, name, out_p);
}

/* Copies between a canonical region and a shard region in the walk's direction. */
static dcr_status_t move(walker_t *w, const dcr_view_t *canon, const dcr_view_t *shard)
{
    return w->to_canonical ? dcr_view_copy(canon, shard) : dcr_view_copy(shard, canon);
}

static const char *layer_name(char *buf, int layer, const char *rest)
{
    snprintf(buf, NAME, "decoder.layers.%d.%s", layer, rest);
    return buf;
}

static dcr_status_t walk_whole(walker_t *w, const char *src, int layer, const char *canon)
{
    dcr_view_t c, s;
    DCR_CHECK(canon_view(w, layer, canon, &c));
    DCR_CHECK(shard_view(w, src, &s));
    return move(w, &c, &s);
}

/* Canonical split into `parts` equal slices along dim; shard p holds slice p.
 * src_fmt takes the part number. */
static dcr_status_t walk_split_view(walker_t *w, const char *src_fmt, const dcr_view_t *canonical,
                                    int dim, int parts)
{
    dcr_view_t c = *canonical;
    int64_t len = c.shape[dim] / parts;
    for (int p = 0; p < parts; p++) {
        char name[NAME];
        dcr_view_t s, slice;
        snprintf(name, sizeof(name), src_fmt, p);
        DCR_CHECK(shard_view(w, name, &s));
        DCR_CHECK(dcr_view_narrow(&c, dim, p * len, len, &slice));
        DCR_CHECK(move(w, &slice, &s));
    }
    return DCR_OK;
}

static dcr_status_t walk_split(walker_t *w, const char *src_fmt, int layer, const char *canon,
                               int dim, int parts)
{
    dcr_view_t c;
    DCR_CHECK(canon_view(w, layer, canon, &c));
    return walk_split_view(w, src_fmt, &c, dim, parts);
}

/* ---- FP8 block-quantized export (the oracle's own quantizer) ---- */

#define FP8_MAX 448.0f

/* The largest magnitude of one tile, read from a BF16 row-major matrix. */
static float tile_amax(const uint16_t *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1)
{
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = x + r * cols;
        for (int64_t c = c0; c < c1; c++) {
            float v = fabsf(dcr_bf16_to_f32(row[c]));
            amax = v > amax ? v : amax;
        }
    }
    return amax;
}

/* BF16 [rows, cols] -> e4m3 weight and FP32 inverse scale per tile. */
static void fp8_quantize(const uint16_t *x, int64_t rows, int64_t cols, uint8_t *q, float *scale)
{
    int64_t tiles_c = (cols + DCR_FP8_BLOCK - 1) / DCR_FP8_BLOCK;
    for (int64_t tr = 0; tr * DCR_FP8_BLOCK < rows; tr++)
        for (int64_t tc = 0; tc < tiles_c; tc++) {
            int64_t r0 = tr * DCR_FP8_BLOCK, c0 = tc * DCR_FP8_BLOCK;
            int64_t r1 = r0 + DCR_FP8_BLOCK < rows ? r0 + DCR_FP8_BLOCK : rows,
                    c1 = c0 + DCR_FP8_BLOCK < cols ? c0 + DCR_FP8_BLOCK : cols;
            float amax = tile_amax(x, cols, r0, r1, c0, c1),
                  s = amax == 0.0f ? 1.0f : amax / FP8_MAX;
            scale[tr * tiles_c + tc] = s;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    q[r * cols + c] = dcr_f32_to_fp8e4m3(dcr_bf16_to_f32(x[r * cols + c]) / s);
        }
}

/* The reverse of the import direction: x = q * s, rounded to BF16. */
static void fp8_dequantize(const uint8_t *q, const float *scale, int64_t rows, int64_t cols,
                           uint16_t *x)
{
    int64_t tiles_c = (cols + DCR_FP8_BLOCK - 1) / DCR_FP8_BLOCK;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * cols + c] =
                dcr_f32_to_bf16(dcr_fp8e4m3_to_f32(q[r * cols + c]) *
                                scale[(r / DCR_FP8_BLOCK) * tiles_c + c / DCR_FP8_BLOCK]);
}

/* A row-parallel projection exported FP8: shards hold BF16; the canonical
 * weight and its scale tensor come from quantizing the assembled matrix. */
static dcr_status_t walk_fp8_rows(walker_t *w, int layer, const char *src_rest, const char *canon)
{
    dcr_view_t c, sc, tmp_view;
    char scale_name[NAME], fmt[NAME];
    snprintf(scale_name, NAME, "%s_scale_inv", canon);
    DCR_CHECK(canon_view(w, layer, canon, &c));
    DCR_CHECK(canon_view(w, layer, scale_name, &sc));
    dcr_storage_t *tmp;
    DCR_CHECK(dcr_storage_create((size_t)dcr_view_numel(&c) * 2, &tmp));
    dcr_status_t st = dcr_view_contiguous(tmp, DCR_DTYPE_BF16, 2, c.shape, &tmp_view);
    if (st == DCR_OK && !w->to_canonical)
        fp8_dequantize(dcr_view_data(&c), dcr_view_data(&sc), c.shape[0], c.shape[1], tmp->data);
    if (st == DCR_OK)
        st = walk_split_view(w, layer_name(fmt, layer, src_rest), &tmp_view, 1, w->tc->tp);
    if (st == DCR_OK && w->to_canonical)
        fp8_quantize(tmp->data, c.shape[0], c.shape[1], dcr_view_data(&c), dcr_view_data(&sc));
    dcr_storage_destroy(tmp);
    return st;
}

/* Shard p = [gate slice p; up slice p]. */
static dcr_status_t walk_gated(walker_t *w, const char *src_fmt, int layer, const char *gate,
                               const char *up, int parts)
{
    dcr_view_t g, u;
    DCR_CHECK(canon_view(w, layer, gate, &g));
    DCR_CHECK(canon_view(w, layer, up, &u));
    int64_t rows = g.shape[0] / parts;
    for (int p = 0; p < parts; p++) {
        char name[NAME];
        dcr_view_t s, s_gate, s_up, c_gate, c_up;
        snprintf(name, sizeof(name), src_fmt, p);
        DCR_CHECK(shard_view(w, name, &s));
        DCR_CHECK(dcr_view_narrow(&s, 0, 0, rows, &s_gate));
        DCR_CHECK(dcr_view_narrow(&s, 0, rows, rows, &s_up));
        DCR_CHECK(dcr_view_narrow(&g, 0, p * rows, rows, &c_gate));
        DCR_CHECK(dcr_view_narrow(&u, 0, p * rows, rows, &c_up));
        DCR_CHECK(move(w, &c_gate, &s_gate));
        DCR_CHECK(move(w, &c_up, &s_up));
    }
    return DCR_OK;
}

/* Views a [rows, ...] tensor as [rows / unit, unit, rest] (unit = head_dim). */
static dcr_status_t as_heads(const dcr_view_t *v, int64_t unit, dcr_view_t *out_p)
{
    int64_t rest = dcr_view_numel(v) / v->shape[0];
    int64_t shape[3] = {v->shape[0] / unit, unit, rest};
    return dcr_view_reshape(v, 3, shape, out_p);
}

/* Megatron's fused QKV: per rank, per local group g, [q heads of g, k_g, v_g]. */
static dcr_status_t walk_qkv(walker_t *w, int layer, const char *kind, const char *attn)
{
    const dcr_model_config_t *m = w->m;
    int tp = w->tc->tp;
    int groups_per_rank = m->kv_heads >= tp ? m->kv_heads / tp : 1;
    int heads_per_rank = m->heads / tp, q_per_group = heads_per_rank / groups_per_rank;
    char rest[NAME], src[NAME], fmt[NAME];
    dcr_view_t q, k, v, qh, kh, vh;
    snprintf(rest, NAME, "%s.q_proj.%s", attn, kind);
    DCR_CHECK(canon_view(w, layer, rest, &q));
    snprintf(rest, NAME, "%s.k_proj.%s", attn, kind);
    DCR_CHECK(canon_view(w, layer, rest, &k));
    snprintf(rest, NAME, "%s.v_proj.%s", attn, kind);
    DCR_CHECK(canon_view(w, layer, rest, &v));
    DCR_CHECK(as_heads(&q, m->head_dim, &qh));
    DCR_CHECK(as_heads(&k, m->head_dim, &kh));
    DCR_CHECK(as_heads(&v, m->head_dim, &vh));
    snprintf(fmt, NAME, "self_attention.linear_qkv.%s@tp%%d", kind);
    for (int r = 0; r < tp; r++) {
        dcr_view_t s, sh;
        char with_rank[NAME];
        snprintf(with_rank, NAME, fmt, r);
        DCR_CHECK(shard_view(w, layer_name(src, layer, with_rank), &s));
        DCR_CHECK(
            as_heads(&s, m->head_dim, &sh)); /* [groups_per_rank * (q_per_group + 2), hn, rest] */
        for (int g = 0; g < groups_per_rank; g++) {
            int group = m->kv_heads >= tp ? r * groups_per_rank + g : r / (tp / m->kv_heads);
            int64_t base = (int64_t)g * (q_per_group + 2);
            dcr_view_t sq, cq, sk, ck, sv, cv;
            DCR_CHECK(dcr_view_narrow(&sh, 0, base, q_per_group, &sq));
            DCR_CHECK(dcr_view_narrow(
                &qh, 0, (int64_t)r * heads_per_rank + (int64_t)g * q_per_group, q_per_group, &cq));
            DCR_CHECK(dcr_view_narrow(&sh, 0, base + q_per_group, 1, &sk));
            DCR_CHECK(dcr_view_narrow(&kh, 0, group, 1, &ck));
            DCR_CHECK(dcr_view_narrow(&sh, 0, base + q_per_group + 1, 1, &sv));
            DCR_CHECK(dcr_view_narrow(&vh, 0, group, 1, &cv));
            DCR_CHECK(move(w, &cq, &sq));
            DCR_CHECK(move(w, &ck, &sk));
            DCR_CHECK(move(w, &cv, &sv));
        }
    }
    return DCR_OK;
}

/* Vocabulary-parallel rows with padding: canonical rows beyond the vocab do
 * not exist; on import the padding rows stay zero. */
static dcr_status_t walk_vocab(walker_t *w, const char *src_fmt, const char *canon_name)
{
    dcr_view_t c;
    DCR_CHECK(canon_view_named(w, canon_name, &c));
    int64_t vocab = c.shape[0], rows = dcr_megatron_padded_vocab(vocab, w->tc->tp) / w->tc->tp;
    for (int r = 0; r < w->tc->tp; r++) {
        char name[NAME];
        dcr_view_t s, s_rows, c_rows;
        snprintf(name, sizeof(name), src_fmt, r);
        DCR_CHECK(shard_view(w, name, &s));
        int64_t first = r * rows, valid = vocab - first < rows ? vocab - first : rows;
        if (valid <= 0) continue;
        DCR_CHECK(dcr_view_narrow(&s, 0, 0, valid, &s_rows));
        DCR_CHECK(dcr_view_narrow(&c, 0, first, valid, &c_rows));
        DCR_CHECK(move(w, &c_rows, &s_rows));
    }
    return DCR_OK;
}

/* Mamba per-component sharding: rank r holds slice r of every component. */
static dcr_status_t walk_components(walker_t *w, int layer, const char *src_rest, const char *canon,
                                    int ncomp, const int64_t *comp)
{
    dcr_view_t c;
    DCR_CHECK(canon_view(w, layer, canon, &c));
    for (int r = 0; r < w->tc->tp; r++) {
        char fmt[NAME], name[NAME];
        dcr_view_t s;
        snprintf(fmt, NAME, src_rest, r);
        DCR_CHECK(shard_view(w, layer_name(name, layer, fmt), &s));
        int64_t s0 = 0, c0 = 0;
        for (int k = 0; k < ncomp; k++) {
            int64_t part = comp[k] / w->tc->tp;
            dcr_view_t sp, cp;
            DCR_CHECK(dcr_view_narrow(&s, 0, s0, part, &sp));
            DCR_CHECK(dcr_view_narrow(&c, 0, c0 + r * part, part, &cp));
            DCR_CHECK(move(w, &cp, &sp));
            s0 += part;
            c0 += comp[k];
        }
    }
    return DCR_OK;
}

static dcr_status_t walk_tp_split(walker_t *w, int layer, const char *src_rest, const char *canon,
                                  int dim)
{
    char fmt[NAME];
    return walk_split(w, layer_name(fmt, layer, src_rest), layer, canon, dim, w->tc->tp);
}

static dcr_status_t walk_layer_whole(walker_t *w, int layer, const char *src_rest,
                                     const char *canon)
{
    char src[NAME];
    return walk_whole(w, layer_name(src, layer, src_rest), layer, canon);
}

static dcr_status_t walk_attention(walker_t *w, int i, const char *attn)
{
    char c[NAME];
    DCR_CHECK(walk_qkv(w, i, "weight", attn));
    if (w->m->qkv_bias) DCR_CHECK(walk_qkv(w, i, "bias", attn));
    if (w->m->qk_norm) {
        snprintf(c, NAME, "%s.q_norm.weight", attn);
        DCR_CHECK(walk_layer_whole(w, i, "self_attention.q_layernorm.weight", c));
        snprintf(c, NAME, "%s.k_norm.weight", attn);
        DCR_CHECK(walk_layer_whole(w, i, "self_attention.k_layernorm.weight", c));
    }
    snprintf(c, NAME, "%s.o_proj.weight", attn);
    dcr_view_t o;
    DCR_CHECK(canon_view(w, i, c, &o));
    if (o.dtype == DCR_DTYPE_FP8_E4M3)
        return walk_fp8_rows(w, i, "self_attention.linear_proj.weight@tp%d", c);
    return walk_tp_split(w, i, "self_attention.linear_proj.weight@tp%d", c, 1);
}

static dcr_status_t walk_experts(walker_t *w, int i, const char *mixer, int gated)
{
    int local = w->m->experts / w->tc->ep, etp = w->tc->etp;
    for (int e = 0; e < w->tc->ep; e++) {
        for (int j = 0; j < local; j++) {
            int global = e * local + j;
            char fmt[NAME], src[NAME], gate[NAME], up[NAME], down[NAME];
            snprintf(gate, NAME, "%s.experts.%d.gate_proj.weight", mixer, global);
            snprintf(up, NAME, "%s.experts.%d.up_proj.weight", mixer, global);
            snprintf(down, NAME, "%s.experts.%d.down_proj.weight", mixer, global);
            snprintf(fmt, NAME, "mlp.experts.linear_fc1.weight%d@ep%d.etp%%d", j, e);
            layer_name(src, i, fmt);
            DCR_CHECK(gated ? walk_gated(w, src, i, gate, up, etp)
                            : walk_split(w, src, i, up, 0, etp));
            snprintf(fmt, NAME, "mlp.experts.linear_fc2.weight%d@ep%d.etp%%d", j, e);
            DCR_CHECK(walk_split(w, layer_name(src, i, fmt), i, down, 1, etp));
        }
    }
    return DCR_OK;
}

static dcr_status_t walk_transformer_layer(walker_t *w, int i)
{
    char fmt[NAME];
    int gemma = w->m->family == DCR_FAMILY_GEMMA3;
    DCR_CHECK(walk_layer_whole(w, i, "self_attention.linear_qkv.layer_norm_weight",
                               "input_layernorm.weight"));
    DCR_CHECK(walk_attention(w, i, "self_attn"));
    if (w->m->family == DCR_FAMILY_QWEN3_MOE) {
        DCR_CHECK(
            walk_layer_whole(w, i, "pre_mlp_layernorm.weight", "post_attention_layernorm.weight"));
        DCR_CHECK(walk_layer_whole(w, i, "mlp.router.weight", "mlp.gate.weight"));
        return walk_experts(w, i, "mlp", 1);
    }
    if (gemma) {
        DCR_CHECK(walk_layer_whole(w, i, "self_attention.linear_proj.post_layernorm.weight",
                                   "post_attention_layernorm.weight"));
        DCR_CHECK(walk_layer_whole(w, i, "mlp.linear_fc2.post_layernorm.weight",
                                   "post_feedforward_layernorm.weight"));
    }
    DCR_CHECK(walk_layer_whole(w, i, "mlp.linear_fc1.layer_norm_weight",
                               gemma ? "pre_feedforward_layernorm.weight"
                                     : "post_attention_layernorm.weight"));
    DCR_CHECK(walk_gated(w, layer_name(fmt, i, "mlp.linear_fc1.weight@tp%d"), i,
                         "mlp.gate_proj.weight", "mlp.up_proj.weight", w->tc->tp));
    return walk_tp_split(w, i, "mlp.linear_fc2.weight@tp%d", "mlp.down_proj.weight", 1);
}

static dcr_status_t walk_nemotron_layer(walker_t *w, int i)
{
    const dcr_model_config_t *m = w->m;
    char kind = m->pattern[i];
    if (kind == '*') {
        DCR_CHECK(
            walk_layer_whole(w, i, "self_attention.linear_qkv.layer_norm_weight", "norm.weight"));
        return walk_attention(w, i, "mixer");
    }
    if (kind == 'E') {
        DCR_CHECK(walk_layer_whole(w, i, "pre_mlp_layernorm.weight", "norm.weight"));
        DCR_CHECK(walk_layer_whole(w, i, "mlp.router.weight", "mixer.gate.weight"));
        DCR_CHECK(
            walk_layer_whole(w, i, "mlp.router.expert_bias", "mixer.gate.e_score_correction_bias"));
        DCR_CHECK(walk_experts(w, i, "mixer", 0));
        DCR_CHECK(walk_tp_split(w, i, "mlp.shared_experts.linear_fc1.weight@tp%d",
                                "mixer.shared_experts.up_proj.weight", 0));
        return walk_tp_split(w, i, "mlp.shared_experts.linear_fc2.weight@tp%d",
                             "mixer.shared_experts.down_proj.weight", 1);
    }
    int64_t di = (int64_t)m->mamba_heads * m->mamba_head_dim, gn = m->mamba_groups * m->mamba_state;
    int64_t in_rows[5] = {di, di, gn, gn, m->mamba_heads}, conv_rows[3] = {di, gn, gn};
    DCR_CHECK(walk_layer_whole(w, i, "mixer.in_proj.layer_norm_weight", "norm.weight"));
    DCR_CHECK(
        walk_components(w, i, "mixer.in_proj.weight@tp%d", "mixer.in_proj.weight", 5, in_rows));
    DCR_CHECK(
        walk_components(w, i, "mixer.conv1d.weight@tp%d", "mixer.conv1d.weight", 3, conv_rows));
    DCR_CHECK(walk_components(w, i, "mixer.conv1d.bias@tp%d", "mixer.conv1d.bias", 3, conv_rows));
    DCR_CHECK(walk_tp_split(w, i, "mixer.A_log@tp%d", "mixer.A_log", 0));
    DCR_CHECK(walk_tp_split(w, i, "mixer.D@tp%d", "mixer.D", 0));
    DCR_CHECK(walk_tp_split(w, i, "mixer.dt_bias@tp%d", "mixer.dt_bias", 0));
    DCR_CHECK(walk_tp_split(w, i, "mixer.norm.weight@tp%d", "mixer.norm.weight", 0));
    return walk_tp_split(w, i, "mixer.out_proj.weight@tp%d", "mixer.out_proj.weight", 1);
}

static dcr_status_t walk_model(walker_t *w)
{
    int nemo = w->m->family == DCR_FAMILY_NEMOTRON_H;
    char embed[NAME];
    snprintf(embed, NAME, "%s%s", w->prefix, nemo ? "embeddings.weight" : "embed_tokens.weight");
    DCR_CHECK(walk_vocab(w, "embedding.word_embeddings.weight@tp%d", embed));
    for (int i = 0; i < w->m->layers; i++)
        DCR_CHECK(nemo ? walk_nemotron_layer(w, i) : walk_transformer_layer(w, i));
    DCR_CHECK(walk_whole(w, nemo ? "decoder.final_norm.weight" : "decoder.final_layernorm.weight",
                         -1, nemo ? "norm_f.weight" : "norm.weight"));
    if (!w->m->tied_embeddings)
        DCR_CHECK(walk_vocab(w, "output_layer.weight@tp%d", "lm_head.weight"));
    return DCR_OK;
}

static dcr_status_t walk(const dcr_model_config_t *m, const dcr_train_config_t *tc_in,
                         const dcr_source_layout_t *layout, dcr_storage_t *const *shards,
                         dcr_storage_t *const *canonical, int to_canonical)
{
    dcr_train_config_t tc = *tc_in;
    DCR_CHECK(dcr_train_config_validate(m, &tc));
    walker_t w = {m,
                  &tc,
                  layout,
                  shards,
                  canonical,
                  NULL,
                  to_canonical,
                  m->family == DCR_FAMILY_GEMMA3       ? "language_model.model."
                  : m->family == DCR_FAMILY_NEMOTRON_H ? "backbone."
                                                       : "model."};
    dcr_status_t st;
    DCR_CHECK(dcr_inventory_create(&w.shard_index));
    for (int s = 0; s < layout->nshards; s++) {
        const dcr_tensor_desc_t *d = &layout->shards[s].desc;
        DCR_CHECK_GOTO(dcr_inventory_add(w.shard_index, d->name, d->dtype, d->ndim, d->shape), st,
                       done);
    }
    if (!to_canonical)
        for (int s = 0; s < layout->nshards; s++) memset(shards[s]->data, 0, shards[s]->bytes);
    st = walk_model(&w);
done:
    dcr_inventory_destroy(w.shard_index);
    return st;
}

dcr_status_t dcr_megatron_export(const dcr_model_config_t *model, const dcr_train_config_t *tc,
                                 const dcr_source_layout_t *layout, dcr_storage_t *const *shards,
                                 dcr_storage_t *const *canonical)
{
    return walk(model, tc, layout, shards, canonical, 1);
}

dcr_status_t dcr_megatron_import(const dcr_model_config_t *model, const dcr_train_config_t *tc,
                                 const dcr_source_layout_t *layout, dcr_storage_t *const *canonical,
                                 dcr_storage_t *const *shards)
{
    return walk(model, tc, layout, shards, canonical, 0);
}
