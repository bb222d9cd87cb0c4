/* Internals of the vLLM-like loaders shared by their files. Every helper
 * here is a piece of a vLLM weight_loader, expressed in loader API calls. */
#ifndef DCR_WORKLOADS_SERVE_INTERNAL_H
#define DCR_WORKLOADS_SERVE_INTERNAL_H

#include "dcr/loader.h"
#include "workloads/serve/vllm_layout.h"

#define DCR__SERVE_NAME_MAX 256

/* One rank's view of the model under its layout. */
typedef struct dcr__vllm {
    dcr_model_config_t m;
    dcr_serve_config_t sc;
    int tp, rank;
    char prefix[32];        /* "model.", "language_model.model.", "backbone." */
    char layers[48];        /* prefix + "layers." */
    dcr_dtype_t norm_dtype; /* BF16, or FP32 with the fp32_norms variant */
    int64_t vrows;          /* padded vocabulary rows per rank */
    int64_t nh_l, kv_l;     /* query and KV heads per rank */
    int kv_rep;             /* ranks sharing one KV head (1 when tp <= kv heads) */
    int e_first, e_count;   /* local expert block */
    int e_tp, e_rank;       /* experts' TP degree and rank (1 / 0 under EP) */
} dcr__vllm_t;

/* Declares a parameter "<a><b>" with up to three dims. */
dcr_status_t dcr__decl(dcr_params_t *p, const char *a, const char *b, dcr_dtype_t dtype, int ndim,
                       int64_t d0, int64_t d1, int64_t d2);
/* Formats into a name buffer; DCR_EINVAL when it does not fit. */
dcr_status_t dcr__name(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "<layers><L>.<rest>": the layer number and the rest, or false. */
bool dcr__split_layer(const char *name, const char *layers, int *layer_p, const char **rest_p);
/* "<head>.<E>.<tail>" inside rest: the expert number and tail, or false. */
bool dcr__split_expert(const char *rest, const char *head, int *expert_p, const char **tail_p);

/* Whole tensor into a replicated parameter, casting to its dtype first. */
dcr_status_t dcr__load_whole(dcr_load_ctx_t *ctx, const char *param, const dcr_view_t *w);
/* dim-0 slice `rank` of `parts` into the parameter rows [at, at + rows). */
dcr_status_t dcr__load_rows(dcr_load_ctx_t *ctx, const char *param, int64_t at, const dcr_view_t *w,
                            int64_t src_start, int64_t rows);
/* Row-parallel: dim-1 slice of this rank into the whole parameter. */
dcr_status_t dcr__load_cols(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param,
                            const dcr_view_t *w);
/* q/k/v (weight or bias) into the fused qkv_proj parameter. */
dcr_status_t dcr__load_qkv(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param, char which,
                           const dcr_view_t *w);
/* Embedding or LM head: this rank's vocabulary rows, zero fill for the rest. */
dcr_status_t dcr__load_vocab(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *param,
                             const dcr_view_t *w);
/* Routed expert e: w13 rows [part * rows, +rows) or w2, skipped when not local. */
dcr_status_t dcr__load_expert(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *prefix,
                              int expert, int part, const char *tail, const dcr_view_t *w);

/* Parameters common to attention mixers / experts / vocab. Layer `layer`'s
 * o_proj is FP8 with block scales when the model exports it so. */
dcr_status_t dcr__decl_attention(const dcr__vllm_t *s, dcr_params_t *p, const char *lp, int layer,
                                 bool bias, bool o_bias, bool qk_norm);
dcr_status_t dcr__decl_experts(const dcr__vllm_t *s, dcr_params_t *p, const char *ep, int parts);

/* Fills the rank's geometry from a loader config of a `family` model whose
 * checkpoint names start with prefix ("model.", "backbone.", ...). */
dcr_status_t dcr__vllm_init(const dcr_serve_loader_config_t *lc, dcr_model_family_t family,
                            const char *prefix, dcr__vllm_t *s);

/* A family's two halves of a loader: declare the rank's parameters, and
 * load one checkpoint tensor into them. families.c lists which family
 * uses which. */
typedef dcr_status_t (*dcr__family_declare_fn)(const dcr__vllm_t *s, dcr_params_t *p);
typedef dcr_status_t (*dcr__family_load_fn)(const dcr__vllm_t *s, dcr_load_ctx_t *ctx,
                                            const char *name, const dcr_view_t *w);

/* Decoder-only transformers (loaders.c). */
dcr_status_t dcr__decoder_declare(const dcr__vllm_t *s, dcr_params_t *p);
dcr_status_t dcr__decoder_load(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *name,
                               const dcr_view_t *w);

/* Nemotron-H (loaders_nemotron.c). */
dcr_status_t dcr__nemotron_declare(const dcr__vllm_t *s, dcr_params_t *p);
dcr_status_t dcr__nemotron_load(const dcr__vllm_t *s, dcr_load_ctx_t *ctx, const char *name,
                                const dcr_view_t *w);

#endif
