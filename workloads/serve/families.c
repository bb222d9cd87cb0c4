/* The loader families, registered from one table: which model family uses
 * which loader name, checkpoint prefix and declare/load pair. The generic
 * create, destroy and load below dispatch through the table and know no
 * family; adding a family is one row below and DCR__NFAMILIES one higher. */
#include <stddef.h>
#include <stdlib.h>

#include "workloads/serve/serve-internal.h"

typedef struct dcr__family {
    dcr_model_family_t family;
    dcr_loader_ops_t ops; /* create, destroy, load: the generic ones below */
    const char *prefix;   /* of the checkpoint's names */
    dcr__family_declare_fn declare;
    dcr__family_load_fn load;
} dcr__family_t;

/* A loader's handle: the rank's geometry and its family's row. */
typedef struct dcr__loader {
    dcr_loader_t pub; /* first: the wrappers' header */
    dcr__vllm_t s;
    const dcr__family_t *f;
} dcr__loader_t;

/* The row whose ops the registry found (create's self). */
static dcr_status_t dcr__create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                dcr_loader_t **out_p)
{
    const dcr__family_t *f =
        (const dcr__family_t *)(const void *)((const char *)self - offsetof(dcr__family_t, ops));
    dcr__loader_t *l = calloc(1, sizeof(*l));
    if (l == NULL) return dcr_error_set(DCR_ENOMEM, "vllm loader: state");
    l->f = f;
    dcr_status_t st = dcr__vllm_init(config, f->family, f->prefix, &l->s);
    if (st == DCR_OK) st = f->declare(&l->s, p);
    if (st != DCR_OK) {
        free(l);
        return st;
    }
    *out_p = &l->pub;
    return DCR_OK;
}

static void dcr__destroy(dcr_loader_t *l)
{
    free(l);
}

static dcr_status_t dcr__load(dcr_loader_t *h, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *tensor)
{
    const dcr__loader_t *l = (const dcr__loader_t *)h;
    return l->f->load(&l->s, ctx, name, tensor);
}

enum { DCR__NFAMILIES = 5 };
#define DCR__ROW(fam, name, prefix, declare, load)                                                 \
    {                                                                                              \
        fam, {{DCR_LOADER_OPS_VERSION, name, NULL}, dcr__create, dcr__destroy, dcr__load}, prefix, \
            declare, load                                                                          \
    }
static const dcr__family_t dcr__families[DCR__NFAMILIES] = {
    DCR__ROW(DCR_FAMILY_QWEN3_MOE, "vllm.qwen3_moe", "model.", dcr__decoder_declare,
             dcr__decoder_load),
    DCR__ROW(DCR_FAMILY_QWEN2, "vllm.qwen2", "model.", dcr__decoder_declare, dcr__decoder_load),
    DCR__ROW(DCR_FAMILY_LLAMA, "vllm.llama", "model.", dcr__decoder_declare, dcr__decoder_load),
    DCR__ROW(DCR_FAMILY_GEMMA3, "vllm.gemma3_text", "language_model.model.", dcr__decoder_declare,
             dcr__decoder_load),
    DCR__ROW(DCR_FAMILY_NEMOTRON_H, "vllm.nemotron_h", "backbone.", dcr__nemotron_declare,
             dcr__nemotron_load),
};

dcr_status_t dcr_serve_register_loaders(void)
{
    for (size_t i = 0; i < DCR__NFAMILIES; i++)
        DCR_CHECK(dcr_loader_register(&dcr__families[i].ops));
    return DCR_OK;
}

const char *dcr_serve_loader_name(dcr_model_family_t family)
{
    for (size_t i = 0; i < DCR__NFAMILIES; i++)
        if (dcr__families[i].family == family) return dcr__families[i].ops.hdr.name;
    return NULL;
}
