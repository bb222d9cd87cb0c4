/* Megatron-like training layouts: shards in Megatron-Core naming and layout,
 * and the conversion tasks that map them to canonical tensors. */
#include "workloads/train/megatron.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dcr_train_config_t dcr_train_config_default(void)
{
    dcr_train_config_t tc = {1, 1, 1, 1, 1, 1, 0};
    return tc;
}

dcr_status_t dcr_mapping_parse(const char *text, dcr_mapping_t *out_p)
{
    if (!strcmp(text, "paper"))
        *out_p = DCR_MAPPING_PAPER;
    else if (!strcmp(text, "extended"))
        *out_p = DCR_MAPPING_EXTENDED;
    else
        return dcr_error_set(DCR_EINVAL, "mapping '%s' is not paper or extended", text);
    return DCR_OK;
}

const char *dcr_mapping_name(dcr_mapping_t mapping)
{
    return mapping == DCR_MAPPING_PAPER ? "paper" : "extended";
}

int64_t dcr_megatron_padded_vocab(int64_t vocab, int tp)
{
    int64_t multiple = 128 * (int64_t)tp;
    return (vocab + multiple - 1) / multiple * multiple;
}

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) return dcr_error_set(DCR_ELAYOUT, __VA_ARGS__);                               \
    } while (0)

static dcr_status_t validate_degrees(const dcr_train_config_t *tc)
{
    REQUIRE(tc->nodes >= 1 && tc->gpus_per_node >= 1,
            "training nodes and GPUs per node must be >= 1");
    REQUIRE(tc->tp >= 1 && tc->etp >= 1 && tc->ep >= 1 && tc->pp >= 1 && tc->dp >= 0,
            "parallel degrees must be >= 1");
    int world = tc->nodes * tc->gpus_per_node;
    REQUIRE(world % (tc->tp * tc->pp) == 0,
            "tp*pp = %d does not divide the %d training ranks (nodes x GPUs)", tc->tp * tc->pp,
            world);
    int dp = world / (tc->tp * tc->pp);
    REQUIRE(tc->dp == 0 || tc->dp == dp, "dp %d: nodes x GPUs = %d = tp*pp*dp needs dp = %d",
            tc->dp, world, dp);
    REQUIRE((tc->tp * dp) % (tc->etp * tc->ep) == 0,
            "etp*ep = %d must divide tp*dp = %d (the ranks of one pipeline stage)",
            tc->etp * tc->ep, tc->tp * dp);
    return DCR_OK;
}

dcr_status_t dcr_train_config_validate(const dcr_model_config_t *m, dcr_train_config_t *tc)
{
    DCR_CHECK(validate_degrees(tc));
    int tp = tc->tp;
    REQUIRE(m->layers % tc->pp == 0, "pp %d does not divide %d layers", tc->pp, m->layers);
    if (m->heads > 0) {
        REQUIRE(m->heads % tp == 0, "tp %d does not divide %d attention heads", tp, m->heads);
        REQUIRE(m->kv_heads % tp == 0 || tp % m->kv_heads == 0,
                "tp %d and %d query groups: one must divide the other", tp, m->kv_heads);
    }
    REQUIRE(m->intermediate % tp == 0, "tp %d does not divide intermediate size %lld", tp,
            (long long)m->intermediate);
    REQUIRE(m->shared_intermediate % tp == 0, "tp %d does not divide shared expert size %lld", tp,
            (long long)m->shared_intermediate);
    if (m->experts > 0) {
        REQUIRE(m->experts % tc->ep == 0, "ep %d does not divide %d experts", tc->ep, m->experts);
        REQUIRE(m->moe_intermediate % tc->etp == 0, "etp %d does not divide expert size %lld",
                tc->etp, (long long)m->moe_intermediate);
    } else {
        REQUIRE(tc->ep == 1 && tc->etp == 1, "ep and etp need a model with experts");
    }
    if (m->family == DCR_FAMILY_NEMOTRON_H) {
        REQUIRE(m->mamba_heads % tp == 0, "tp %d does not divide %d Mamba heads", tp,
                m->mamba_heads);
        REQUIRE(m->mamba_groups % tp == 0, "tp %d does not divide %d Mamba groups", tp,
                m->mamba_groups);
    }
    tc->dp = tc->nodes * tc->gpus_per_node / (tp * tc->pp);
    return DCR_OK;
}

#define NAME 400

/* ---- builder context ---------------------------------------------------- */

typedef struct builder {
    const dcr_model_config_t *m;
    const dcr_inventory_t *inv;
    const dcr_train_config_t *tc;
    dcr_mapping_t mapping;
    dcr_source_layout_t *layout;
    const char *prefix; /* canonical name prefix: "model.", "backbone.", ... */
    int *holders;       /* scratch of world entries */
    int nholders;
} builder_t;

static int stage_of_layer(const builder_t *b, int layer)
{
    return layer / (b->m->layers / b->tc->pp);
}

static int rank_of(const builder_t *b, int stage, int dp_rank, int tp_rank)
{
    return (stage * b->tc->dp + dp_rank) * b->tc->tp + tp_rank;
}

/* Data-parallel replicas of one TP coordinate, appended to the holder list. */
static void holders_tp_append(builder_t *b, int stage, int tp_rank)
{
    for (int d = 0; d < b->tc->dp; d++) b->holders[b->nholders++] = rank_of(b, stage, d, tp_rank);
}

static void holders_tp(builder_t *b, int stage, int tp_rank)
{
    b->nholders = 0;
    holders_tp_append(b, stage, tp_rank);
}

/* Every rank of a stage: TP-replicated tensors (norms, routers). */
static void holders_stage(builder_t *b, int stage)
{
    int per_stage = b->tc->tp * b->tc->dp;
    b->nholders = 0;
    for (int i = 0; i < per_stage; i++) b->holders[b->nholders++] = stage * per_stage + i;
}

/* Expert-data-parallel replicas of one (ep, etp) coordinate. */
static void holders_expert(builder_t *b, int stage, int ep_rank, int etp_rank)
{
    int per_stage = b->tc->tp * b->tc->dp;
    b->nholders = 0;
    for (int i = 0; i < per_stage; i++)
        if (i % b->tc->etp == etp_rank && (i / b->tc->etp) % b->tc->ep == ep_rank)
            b->holders[b->nholders++] = stage * per_stage + i;
}

static dcr_status_t find_canonical(const builder_t *b, const char *name, int *out_p)
{
    int64_t c = dcr_inventory_find(b->inv, name);
    if (c < 0)
        return dcr_error_set(DCR_ENOTFOUND, "training layout maps to %s, which the inventory lacks",
                             name);
    *out_p = (int)c;
    return DCR_OK;
}

static const dcr_tensor_desc_t *canonical_desc(const builder_t *b, int c)
{
    return dcr_inventory_at(b->inv, (size_t)c);
}

static int64_t row_elems(const dcr_tensor_desc_t *d)
{
    return dcr_desc_numel(d) / d->shape[0];
}

/* Rows [src_row0, +nrows) of a shard to rows [dst_row0, +nrows) of a tensor. */
static dcr_box_map_t rows_map(int64_t src_row0, int64_t dst_row0, int64_t nrows, int64_t elems)
{
    dcr_box_map_t m = {0};
    m.ndim = 1;
    m.shape[0] = nrows * elems;
    m.src_offset = src_row0 * elems;
    m.src_strides[0] = 1;
    m.dst_offset = dst_row0 * elems;
    m.dst_strides[0] = 1;
    return m;
}

/* ngroups blocks of `rows` rows each, spaced src_stride / dst_stride rows apart. */
static dcr_box_map_t grouped_rows_map(int64_t ngroups, int64_t src_row0, int64_t src_stride,
                                      int64_t dst_row0, int64_t dst_stride, int64_t rows,
                                      int64_t elems)
{
    dcr_box_map_t m = {0};
    m.ndim = 2;
    m.shape[0] = ngroups;
    m.shape[1] = rows * elems;
    m.src_offset = src_row0 * elems;
    m.src_strides[0] = src_stride * elems;
    m.src_strides[1] = 1;
    m.dst_offset = dst_row0 * elems;
    m.dst_strides[0] = dst_stride * elems;
    m.dst_strides[1] = 1;
    return m;
}

/* A [rows, cols] shard into columns [col0, +cols) of a [rows, total_cols] tensor. */
static dcr_box_map_t cols_map(int64_t rows, int64_t cols, int64_t total_cols, int64_t col0)
{
    dcr_box_map_t m = {0};
    m.ndim = 2;
    m.shape[0] = rows;
    m.shape[1] = cols;
    m.src_strides[0] = cols;
    m.src_strides[1] = 1;
    m.dst_offset = col0;
    m.dst_strides[0] = total_cols;
    m.dst_strides[1] = 1;
    return m;
}

static dcr_status_t add_shard(builder_t *b, const char *name, dcr_dtype_t dtype, int ndim,
                              const int64_t *shape, int *out_p)
{
    /* Training keeps BF16 weights; FP8 exists only in the exported checkpoint. */
    if (dtype == DCR_DTYPE_FP8_E4M3) dtype = DCR_DTYPE_BF16;
    return dcr_source_layout_add_shard(b->layout, name, dtype, ndim, shape, b->nholders, b->holders,
                                       out_p);
}

/* Task names join canonical name, shard name and a piece tag, so that every
 * task is unique and its owner hash is stable for a given layout. */
static dcr_status_t add_task(builder_t *b, dcr_task_kind_t kind, const char *mapping, int shard,
                             int canonical, const char *piece, int nmaps, const dcr_box_map_t *maps)
{
    char name[512];
    if (canonical_desc(b, canonical)->dtype == DCR_DTYPE_FP8_E4M3 &&
        b->layout->shards[shard].desc.dtype != DCR_DTYPE_FP8_E4M3) {
        kind = DCR_TASK_RESIDUAL; /* block quantization is not elementwise */
        mapping = "fp8_block";
    }
    snprintf(name, sizeof(name), "%s<-%s%s%s", canonical_desc(b, canonical)->name,
             b->layout->shards[shard].desc.name, piece ? "#" : "", piece ? piece : "");
    return dcr_source_layout_add_task(b->layout, name, kind, mapping, shard, canonical, nmaps,
                                      maps);
}

static dcr_task_kind_t kind_for(const builder_t *b, int affine_in_paper)
{
    return (affine_in_paper || b->mapping == DCR_MAPPING_EXTENDED) ? DCR_TASK_AFFINE
                                                                   : DCR_TASK_RESIDUAL;
}

/* ---- mapping classes ---------------------------------------------------- */

/* A tensor every rank of the stage holds whole (norms, routers). */
static dcr_status_t map_replicated(builder_t *b, const char *src, const char *canon, int stage,
                                   dcr_dtype_t src_dtype)
{
    int c = -1, s = -1;
    DCR_CHECK(find_canonical(b, canon, &c));
    const dcr_tensor_desc_t *d = canonical_desc(b, c);
    holders_stage(b, stage);
    DCR_CHECK(add_shard(b, src, src_dtype, d->ndim, d->shape, &s));
    dcr_box_map_t m = rows_map(0, 0, d->shape[0], row_elems(d));
    return add_task(b, DCR_TASK_AFFINE, src_dtype == d->dtype ? "replicated" : "replicated_cast", s,
                    c, NULL, 1, &m);
}

/* Split on dim 0 over `parts` ranks; `holders_of(part)` fills b->holders. */
typedef void (*holders_fn)(builder_t *b, int stage, int part, const int *coord);

static void holders_tp_part(builder_t *b, int stage, int part, const int *coord)
{
    holders_tp(b, stage, part);
}

static void holders_expert_part(builder_t *b, int stage, int part, const int *coord)
{
    holders_expert(b, stage, coord[0], part);
}

static dcr_status_t map_column(builder_t *b, const char *src_fmt, const char *canon, int stage,
                               int parts, holders_fn holders, const int *coord, const char *mapping)
{
    int c = -1;
    DCR_CHECK(find_canonical(b, canon, &c));
    const dcr_tensor_desc_t *d = canonical_desc(b, c);
    int64_t rows = d->shape[0] / parts, shape[DCR_MAX_DIMS];
    memcpy(shape, d->shape, sizeof(shape));
    shape[0] = rows;
    for (int p = 0; p < parts; p++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, p);
        holders(b, stage, p, coord);
        DCR_CHECK(add_shard(b, name, d->dtype, d->ndim, shape, &s));
        dcr_box_map_t m = rows_map(0, (int64_t)p * rows, rows, row_elems(d));
        DCR_CHECK(add_task(b, DCR_TASK_AFFINE, mapping, s, c, NULL, 1, &m));
    }
    return DCR_OK;
}

/* Split on dim 1 (row-parallel linear [out, in/parts]). */
static dcr_status_t map_row(builder_t *b, const char *src_fmt, const char *canon, int stage,
                            int parts, holders_fn holders, const int *coord, const char *mapping)
{
    int c = -1;
    DCR_CHECK(find_canonical(b, canon, &c));
    const dcr_tensor_desc_t *d = canonical_desc(b, c);
    int64_t cols = d->shape[1] / parts, shape[2] = {d->shape[0], cols};
    for (int p = 0; p < parts; p++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, p);
        holders(b, stage, p, coord);
        DCR_CHECK(add_shard(b, name, d->dtype, 2, shape, &s));
        dcr_box_map_t m = cols_map(d->shape[0], cols, d->shape[1], (int64_t)p * cols);
        DCR_CHECK(add_task(b, DCR_TASK_AFFINE, mapping, s, c, NULL, 1, &m));
    }
    return DCR_OK;
}

/* Fused [gate_r; up_r] shards: two affine tasks per shard. */
static dcr_status_t map_gated(builder_t *b, const char *src_fmt, const char *gate, const char *up,
                              int stage, int parts, holders_fn holders, const int *coord,
                              const char *mapping)
{
    int cg = -1, cu = -1;
    DCR_CHECK(find_canonical(b, gate, &cg));
    DCR_CHECK(find_canonical(b, up, &cu));
    const dcr_tensor_desc_t *d = canonical_desc(b, cg);
    int64_t rows = d->shape[0] / parts, shape[2] = {2 * rows, d->shape[1]};
    for (int p = 0; p < parts; p++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, p);
        holders(b, stage, p, coord);
        DCR_CHECK(add_shard(b, name, d->dtype, 2, shape, &s));
        dcr_box_map_t mg = rows_map(0, (int64_t)p * rows, rows, d->shape[1]);
        dcr_box_map_t mu = rows_map(rows, (int64_t)p * rows, rows, d->shape[1]);
        DCR_CHECK(add_task(b, DCR_TASK_AFFINE, mapping, s, cg, "gate", 1, &mg));
        DCR_CHECK(add_task(b, DCR_TASK_AFFINE, mapping, s, cu, "up", 1, &mu));
    }
    return DCR_OK;
}

/* Fused linear_qkv (weight or bias): per TP rank, per local query group,
 * [q heads of the group; k; v]. With tp above the group count, each rank
 * holds one replicated group; only the first rank of its replicas owns k/v,
 * so that every canonical element keeps exactly one task. */
static dcr_status_t map_qkv(builder_t *b, const char *src_fmt, const char *q, const char *k,
                            const char *v, int stage)
{
    const dcr_model_config_t *m = b->m;
    int tp = b->tc->tp, cq = -1, ck = -1, cv = -1;
    DCR_CHECK(find_canonical(b, q, &cq));
    DCR_CHECK(find_canonical(b, k, &ck));
    DCR_CHECK(find_canonical(b, v, &cv));
    const dcr_tensor_desc_t *dq = canonical_desc(b, cq);
    int64_t hn = m->head_dim, elems = row_elems(dq);
    int local_groups = m->kv_heads >= tp ? m->kv_heads / tp : 1;
    int heads_local = m->heads / tp, qh = heads_local / local_groups;
    int replicas = m->kv_heads >= tp ? 1 : tp / m->kv_heads;
    int64_t block = (int64_t)(qh + 2) * hn;
    int64_t shape[2] = {local_groups * block, elems};
    dcr_task_kind_t kind = kind_for(b, 0);
    for (int r = 0; r < tp; r++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, r);
        holders_tp(b, stage, r);
        DCR_CHECK(add_shard(b, name, dq->dtype, dq->ndim, shape, &s));
        int64_t group0 = m->kv_heads >= tp ? (int64_t)r * local_groups : r / replicas;
        dcr_box_map_t mq = grouped_rows_map(local_groups, 0, block, (int64_t)r * heads_local * hn,
                                            qh * hn, qh * hn, elems);
        DCR_CHECK(add_task(b, kind, "qkv", s, cq, "q", 1, &mq));
        if (r % replicas != 0) continue;
        dcr_box_map_t mk =
            grouped_rows_map(local_groups, qh * hn, block, group0 * hn, hn, hn, elems);
        dcr_box_map_t mv =
            grouped_rows_map(local_groups, (qh + 1) * hn, block, group0 * hn, hn, hn, elems);
        DCR_CHECK(add_task(b, kind, "qkv", s, ck, "k", 1, &mk));
        DCR_CHECK(add_task(b, kind, "qkv", s, cv, "v", 1, &mv));
    }
    return DCR_OK;
}

/* VocabParallelEmbedding / output layer: [V_pad/tp, H] per rank; padding rows
 * belong to no task. `last_stage_too` adds the last stage's replicas (a tied
 * output layer under pipeline parallelism). */
static dcr_status_t map_vocab(builder_t *b, const char *src_fmt, const char *canon, int stage,
                              int last_stage_too)
{
    int c = -1, tp = b->tc->tp;
    DCR_CHECK(find_canonical(b, canon, &c));
    const dcr_tensor_desc_t *d = canonical_desc(b, c);
    int64_t vocab = d->shape[0], rows = dcr_megatron_padded_vocab(vocab, tp) / tp;
    int64_t shape[2] = {rows, d->shape[1]};
    for (int r = 0; r < tp; r++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, r);
        holders_tp(b, stage, r);
        if (last_stage_too) holders_tp_append(b, b->tc->pp - 1, r);
        DCR_CHECK(add_shard(b, name, d->dtype, 2, shape, &s));
        int64_t first = (int64_t)r * rows, valid = vocab - first < rows ? vocab - first : rows;
        if (valid <= 0) continue;
        dcr_box_map_t m = rows_map(0, first, valid, d->shape[1]);
        DCR_CHECK(add_task(b, kind_for(b, 0), "vocab", s, c, NULL, 1, &m));
    }
    return DCR_OK;
}

/* Mamba in_proj / conv1d: each rank holds its TP slice of every component,
 * concatenated; canonical tensors concatenate whole components. */
static dcr_status_t map_components(builder_t *b, const char *src_fmt, const char *canon, int stage,
                                   int ncomp, const int64_t *comp_rows)
{
    int c = -1, tp = b->tc->tp;
    DCR_CHECK(find_canonical(b, canon, &c));
    const dcr_tensor_desc_t *d = canonical_desc(b, c);
    int64_t elems = row_elems(d), shape[DCR_MAX_DIMS];
    memcpy(shape, d->shape, sizeof(shape));
    shape[0] = d->shape[0] / tp;
    for (int r = 0; r < tp; r++) {
        char name[400];
        int s;
        snprintf(name, sizeof(name), src_fmt, r);
        holders_tp(b, stage, r);
        DCR_CHECK(add_shard(b, name, d->dtype, d->ndim, shape, &s));
        dcr_box_map_t maps[8];
        int64_t src0 = 0, dst0 = 0;
        for (int k = 0; k < ncomp; k++) {
            int64_t part = comp_rows[k] / tp;
            maps[k] = rows_map(src0, dst0 + r * part, part, elems);
            src0 += part;
            dst0 += comp_rows[k];
        }
        DCR_CHECK(add_task(b, kind_for(b, 0), "mamba_split", s, c, NULL, ncomp, maps));
    }
    return DCR_OK;
}

/* An FP8-exported tensor (see dcr_model_config_t.fp8_layers) is rebuilt
 * whole and block-quantized, writing its "_scale_inv" tensor too. */
static dcr_status_t declare_fp8_export(builder_t *b, const char *canon)
{
    int c = -1, scale = -1;
    DCR_CHECK(find_canonical(b, canon, &c));
    if (canonical_desc(b, c)->dtype != DCR_DTYPE_FP8_E4M3) return DCR_OK;
    char name[NAME];
    snprintf(name, sizeof(name), "%s_scale_inv", canon);
    DCR_CHECK(find_canonical(b, name, &scale));
    dcr_conversion_t conv = {DCR_CONVERSION_FP8_BLOCK, DCR_FP8_BLOCK, scale, DCR_DTYPE_BF16};
    return dcr_source_layout_set_conversion(b->layout, c, &conv);
}

/* ---- per-layer emitters ------------------------------------------------- */

/* Formats "<prefix>layers.<i>.<rest>" (canonical) into buf. */
static const char *cname(const builder_t *b, char *buf, size_t len, int layer, const char *rest)
{
    if (layer < 0)
        snprintf(buf, len, "%s%s", b->prefix, rest);
    else
        snprintf(buf, len, "%slayers.%d.%s", b->prefix, layer, rest);
    return buf;
}

/* Formats "decoder.layers.<i>.<rest>" (Megatron) into buf. */
static const char *mname(char *buf, size_t len, int layer, const char *rest)
{
    snprintf(buf, len, "decoder.layers.%d.%s", layer, rest);
    return buf;
}

static dcr_status_t emit_attention(builder_t *b, int i, const char *attn)
{
    char src[NAME], q[NAME], k[NAME], v[NAME], rest[NAME];
    int st = stage_of_layer(b, i), tp = b->tc->tp;
    snprintf(rest, sizeof(rest), "%s.q_proj.weight", attn);
    cname(b, q, NAME, i, rest);
    snprintf(rest, sizeof(rest), "%s.k_proj.weight", attn);
    cname(b, k, NAME, i, rest);
    snprintf(rest, sizeof(rest), "%s.v_proj.weight", attn);
    cname(b, v, NAME, i, rest);
    DCR_CHECK(
        map_qkv(b, mname(src, NAME, i, "self_attention.linear_qkv.weight@tp%d"), q, k, v, st));
    if (b->m->qkv_bias) {
        snprintf(rest, sizeof(rest), "%s.q_proj.bias", attn);
        cname(b, q, NAME, i, rest);
        snprintf(rest, sizeof(rest), "%s.k_proj.bias", attn);
        cname(b, k, NAME, i, rest);
        snprintf(rest, sizeof(rest), "%s.v_proj.bias", attn);
        cname(b, v, NAME, i, rest);
        DCR_CHECK(
            map_qkv(b, mname(src, NAME, i, "self_attention.linear_qkv.bias@tp%d"), q, k, v, st));
    }
    if (b->m->qk_norm) {
        snprintf(rest, sizeof(rest), "%s.q_norm.weight", attn);
        DCR_CHECK(map_replicated(b, mname(src, NAME, i, "self_attention.q_layernorm.weight"),
                                 cname(b, q, NAME, i, rest), st, DCR_DTYPE_BF16));
        snprintf(rest, sizeof(rest), "%s.k_norm.weight", attn);
        DCR_CHECK(map_replicated(b, mname(src, NAME, i, "self_attention.k_layernorm.weight"),
                                 cname(b, k, NAME, i, rest), st, DCR_DTYPE_BF16));
    }
    snprintf(rest, sizeof(rest), "%s.o_proj.weight", attn);
    DCR_CHECK(map_row(b, mname(src, NAME, i, "self_attention.linear_proj.weight@tp%d"),
                      cname(b, q, NAME, i, rest), st, tp, holders_tp_part, NULL, "row"));
    return declare_fp8_export(b, q);
}

/* Dense SwiGLU MLP: fc1 [gate_r; up_r] column-parallel, fc2 row-parallel. */
static dcr_status_t emit_dense_mlp(builder_t *b, int i)
{
    char src[NAME], g[NAME], u[NAME], d[NAME];
    int st = stage_of_layer(b, i), tp = b->tc->tp;
    DCR_CHECK(map_gated(b, mname(src, NAME, i, "mlp.linear_fc1.weight@tp%d"),
                        cname(b, g, NAME, i, "mlp.gate_proj.weight"),
                        cname(b, u, NAME, i, "mlp.up_proj.weight"), st, tp, holders_tp_part, NULL,
                        "gated"));
    return map_row(b, mname(src, NAME, i, "mlp.linear_fc2.weight@tp%d"),
                   cname(b, d, NAME, i, "mlp.down_proj.weight"), st, tp, holders_tp_part, NULL,
                   "row");
}

/* Routed experts: local expert j on EP rank e is global expert e*E_local+j;
 * each is split over ETP. Gated (SwiGLU) or plain (relu2) fc1. */
static dcr_status_t emit_experts(builder_t *b, int i, const char *mixer, int gated)
{
    const dcr_model_config_t *m = b->m;
    int st = stage_of_layer(b, i), local = m->experts / b->tc->ep;
    for (int e = 0; e < b->tc->ep; e++) {
        for (int j = 0; j < local; j++) {
            int global = e * local + j, coord[1] = {e};
            char src[NAME], fmt[NAME], g[NAME], u[NAME], d[NAME], rest[NAME];
            snprintf(fmt, sizeof(fmt), "mlp.experts.linear_fc1.weight%d@ep%d.etp%%d", j, e);
            mname(src, NAME, i, fmt);
            snprintf(rest, sizeof(rest), "%s.experts.%d.up_proj.weight", mixer, global);
            cname(b, u, NAME, i, rest);
            if (gated) {
                snprintf(rest, sizeof(rest), "%s.experts.%d.gate_proj.weight", mixer, global);
                cname(b, g, NAME, i, rest);
                DCR_CHECK(map_gated(b, src, g, u, st, b->tc->etp, holders_expert_part, coord,
                                    "expert_gated"));
            } else {
                DCR_CHECK(map_column(b, src, u, st, b->tc->etp, holders_expert_part, coord,
                                     "expert_column"));
            }
            snprintf(fmt, sizeof(fmt), "mlp.experts.linear_fc2.weight%d@ep%d.etp%%d", j, e);
            mname(src, NAME, i, fmt);
            snprintf(rest, sizeof(rest), "%s.experts.%d.down_proj.weight", mixer, global);
            DCR_CHECK(map_row(b, src, cname(b, d, NAME, i, rest), st, b->tc->etp,
                              holders_expert_part, coord, "expert_row"));
        }
    }
    return DCR_OK;
}

static dcr_status_t emit_qwen3_moe_layer(builder_t *b, int i)
{
    char src[NAME], c[NAME];
    int st = stage_of_layer(b, i);
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "self_attention.linear_qkv.layer_norm_weight"),
                             cname(b, c, NAME, i, "input_layernorm.weight"), st, DCR_DTYPE_BF16));
    DCR_CHECK(emit_attention(b, i, "self_attn"));
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "pre_mlp_layernorm.weight"),
                             cname(b, c, NAME, i, "post_attention_layernorm.weight"), st,
                             DCR_DTYPE_BF16));
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.router.weight"),
                             cname(b, c, NAME, i, "mlp.gate.weight"), st, DCR_DTYPE_FP32));
    return emit_experts(b, i, "mlp", 1);
}

static dcr_status_t emit_dense_layer(builder_t *b, int i)
{
    char src[NAME], c[NAME];
    int st = stage_of_layer(b, i);
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "self_attention.linear_qkv.layer_norm_weight"),
                             cname(b, c, NAME, i, "input_layernorm.weight"), st, DCR_DTYPE_BF16));
    DCR_CHECK(emit_attention(b, i, "self_attn"));
    if (b->m->family == DCR_FAMILY_GEMMA3) {
        DCR_CHECK(map_replicated(
            b, mname(src, NAME, i, "self_attention.linear_proj.post_layernorm.weight"),
            cname(b, c, NAME, i, "post_attention_layernorm.weight"), st, DCR_DTYPE_BF16));
        DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.linear_fc1.layer_norm_weight"),
                                 cname(b, c, NAME, i, "pre_feedforward_layernorm.weight"), st,
                                 DCR_DTYPE_BF16));
        DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.linear_fc2.post_layernorm.weight"),
                                 cname(b, c, NAME, i, "post_feedforward_layernorm.weight"), st,
                                 DCR_DTYPE_BF16));
    } else {
        DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.linear_fc1.layer_norm_weight"),
                                 cname(b, c, NAME, i, "post_attention_layernorm.weight"), st,
                                 DCR_DTYPE_BF16));
    }
    return emit_dense_mlp(b, i);
}

static dcr_status_t emit_mamba(builder_t *b, int i)
{
    const dcr_model_config_t *m = b->m;
    char src[NAME], c[NAME];
    int st = stage_of_layer(b, i), tp = b->tc->tp;
    int64_t di = (int64_t)m->mamba_heads * m->mamba_head_dim, gn = m->mamba_groups * m->mamba_state;
    int64_t in_rows[5] = {di, di, gn, gn, m->mamba_heads}, conv_rows[3] = {di, gn, gn};
    DCR_CHECK(map_components(b, mname(src, NAME, i, "mixer.in_proj.weight@tp%d"),
                             cname(b, c, NAME, i, "mixer.in_proj.weight"), st, 5, in_rows));
    DCR_CHECK(map_components(b, mname(src, NAME, i, "mixer.conv1d.weight@tp%d"),
                             cname(b, c, NAME, i, "mixer.conv1d.weight"), st, 3, conv_rows));
    DCR_CHECK(map_components(b, mname(src, NAME, i, "mixer.conv1d.bias@tp%d"),
                             cname(b, c, NAME, i, "mixer.conv1d.bias"), st, 3, conv_rows));
    static const char *const split[][2] = {{"mixer.A_log@tp%d", "mixer.A_log"},
                                           {"mixer.D@tp%d", "mixer.D"},
                                           {"mixer.dt_bias@tp%d", "mixer.dt_bias"},
                                           {"mixer.norm.weight@tp%d", "mixer.norm.weight"}};
    for (size_t k = 0; k < sizeof(split) / sizeof(split[0]); k++)
        DCR_CHECK(map_column(b, mname(src, NAME, i, split[k][0]), cname(b, c, NAME, i, split[k][1]),
                             st, tp, holders_tp_part, NULL, "column"));
    return map_row(b, mname(src, NAME, i, "mixer.out_proj.weight@tp%d"),
                   cname(b, c, NAME, i, "mixer.out_proj.weight"), st, tp, holders_tp_part, NULL,
                   "row");
}

static dcr_status_t emit_nemotron_moe(builder_t *b, int i)
{
    char src[NAME], c[NAME];
    int st = stage_of_layer(b, i), tp = b->tc->tp;
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.router.weight"),
                             cname(b, c, NAME, i, "mixer.gate.weight"), st, DCR_DTYPE_FP32));
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, "mlp.router.expert_bias"),
                             cname(b, c, NAME, i, "mixer.gate.e_score_correction_bias"), st,
                             DCR_DTYPE_FP32));
    DCR_CHECK(emit_experts(b, i, "mixer", 0));
    DCR_CHECK(map_column(b, mname(src, NAME, i, "mlp.shared_experts.linear_fc1.weight@tp%d"),
                         cname(b, c, NAME, i, "mixer.shared_experts.up_proj.weight"), st, tp,
                         holders_tp_part, NULL, "column"));
    return map_row(b, mname(src, NAME, i, "mlp.shared_experts.linear_fc2.weight@tp%d"),
                   cname(b, c, NAME, i, "mixer.shared_experts.down_proj.weight"), st, tp,
                   holders_tp_part, NULL, "row");
}

/* Nemotron-H fuses each layer's one norm into the mixer's first linear. */
static dcr_status_t emit_nemotron_layer(builder_t *b, int i)
{
    char src[NAME], c[NAME];
    int st = stage_of_layer(b, i);
    char kind = b->m->pattern[i];
    const char *norm_src = kind == 'M'   ? "mixer.in_proj.layer_norm_weight"
                           : kind == 'E' ? "pre_mlp_layernorm.weight"
                                         : "self_attention.linear_qkv.layer_norm_weight";
    DCR_CHECK(map_replicated(b, mname(src, NAME, i, norm_src), cname(b, c, NAME, i, "norm.weight"),
                             st, DCR_DTYPE_BF16));
    if (kind == 'M') return emit_mamba(b, i);
    if (kind == 'E') return emit_nemotron_moe(b, i);
    return emit_attention(b, i, "mixer");
}

static const char *family_prefix(dcr_model_family_t f)
{
    return f == DCR_FAMILY_GEMMA3       ? "language_model.model."
           : f == DCR_FAMILY_NEMOTRON_H ? "backbone."
                                        : "model.";
}

static dcr_status_t emit_model(builder_t *b)
{
    const dcr_model_config_t *m = b->m;
    int last = b->tc->pp - 1, nemo = m->family == DCR_FAMILY_NEMOTRON_H;
    char c[NAME];
    DCR_CHECK(map_vocab(b, "embedding.word_embeddings.weight@tp%d",
                        cname(b, c, NAME, -1, nemo ? "embeddings.weight" : "embed_tokens.weight"),
                        0, m->tied_embeddings && last > 0));
    for (int i = 0; i < m->layers; i++) {
        dcr_status_t st = nemo                                ? emit_nemotron_layer(b, i)
                          : m->family == DCR_FAMILY_QWEN3_MOE ? emit_qwen3_moe_layer(b, i)
                                                              : emit_dense_layer(b, i);
        DCR_CHECK(st);
    }
    DCR_CHECK(map_replicated(
        b, nemo ? "decoder.final_norm.weight" : "decoder.final_layernorm.weight",
        cname(b, c, NAME, -1, nemo ? "norm_f.weight" : "norm.weight"), last, DCR_DTYPE_BF16));
    if (!m->tied_embeddings)
        DCR_CHECK(map_vocab(b, "output_layer.weight@tp%d", "lm_head.weight", last, 0));
    return DCR_OK;
}

dcr_status_t dcr_megatron_build(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                const dcr_train_config_t *tc_in, dcr_mapping_t mapping,
                                dcr_source_layout_t **out_p)
{
    dcr_train_config_t tc = *tc_in;
    DCR_CHECK(dcr_train_config_validate(model, &tc));
    int world = tc.nodes * tc.gpus_per_node;
    builder_t b = {model, inv, &tc, mapping, NULL, family_prefix(model->family), NULL, 0};
    b.holders = malloc((size_t)world * 2 * sizeof(int));
    if (!b.holders) return dcr_error_set(DCR_ENOMEM, "holder list for %d ranks", world);
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr_source_layout_create(inv, world, &b.layout), st, fail);
    DCR_CHECK_GOTO(emit_model(&b), st, fail);
    DCR_CHECK_GOTO(dcr_source_layout_finish(b.layout), st, fail);
    free(b.holders);
    *out_p = b.layout;
    return DCR_OK;
fail:
    free(b.holders);
    dcr_source_layout_destroy(b.layout);
    return st;
}
