/* vLLM-like rollout layouts: degrees, ranks, vocabulary padding and expert
 * blocks (receivers and the XOR/overwrite split are in serve_receivers.c). */
#include <stdlib.h>
#include <string.h>

#include "workloads/serve/serve-internal.h"

dcr_serve_config_t dcr_serve_config_default(void)
{
    return (dcr_serve_config_t){.nodes = 1, .gpus_per_node = 0, .tp = 1};
}

int64_t dcr_serve_padded_vocab(int64_t vocab)
{
    return (vocab + 63) / 64 * 64;
}

void dcr_serve_expert_block(int experts, int size, int rank, int *first_p, int *count_p)
{
    int base = experts / size;
    *first_p = rank * base;
    *count_p = rank == size - 1 ? experts - rank * base : base;
}

int dcr_serve_receivers(const dcr_serve_config_t *sc)
{
    return sc->nodes * (sc->gpus_per_node ? sc->gpus_per_node : sc->tp);
}

int dcr_serve_tp_rank(const dcr_serve_config_t *sc, int receiver)
{
    return receiver % sc->tp;
}

/* One divisibility rule: `what` (value a) must be a multiple of tp. */
static dcr_status_t dcr__divides(const char *model, const char *what, int64_t a, int tp)
{
    if (a % tp == 0) return DCR_OK;
    return dcr_error_set(DCR_ELAYOUT, "model %s: serving tp %d does not divide %s (%lld)", model,
                         tp, what, (long long)a);
}

static dcr_status_t dcr__validate_attention(const dcr_model_config_t *m, int tp)
{
    DCR_CHECK(dcr__divides(m->name, "attention heads", m->heads, tp));
    if (m->kv_heads % tp != 0 && tp % m->kv_heads != 0)
        return dcr_error_set(DCR_ELAYOUT,
                             "model %s: serving tp %d and %d KV heads: one must "
                             "divide the other",
                             m->name, tp, m->kv_heads);
    return DCR_OK;
}

/* An FP8 block-quantized o_proj splits along its input on block boundaries
 * (vLLM refuses partitions that cut a quantization block). */
static dcr_status_t dcr__validate_fp8(const dcr_model_config_t *m, int tp)
{
    int64_t part = (int64_t)m->heads * m->head_dim / tp;
    if (m->fp8_layers == 0 || tp == 1 || part % DCR_FP8_BLOCK == 0) return DCR_OK;
    return dcr_error_set(DCR_ELAYOUT,
                         "model %s: serving tp %d splits the FP8 o_proj input into %lld "
                         "columns, not a multiple of the %d-column quantization block",
                         m->name, tp, (long long)part, DCR_FP8_BLOCK);
}

static bool dcr__has_attention(const dcr_model_config_t *m)
{
    return m->family != DCR_FAMILY_NEMOTRON_H || strchr(m->pattern, '*') != NULL;
}

static dcr_status_t dcr__validate_model(const dcr_model_config_t *m, const dcr_serve_config_t *sc)
{
    int tp = sc->tp;
    if (dcr__has_attention(m)) DCR_CHECK(dcr__validate_attention(m, tp));
    if (dcr__has_attention(m)) DCR_CHECK(dcr__validate_fp8(m, tp));
    if (m->intermediate)
        DCR_CHECK(dcr__divides(m->name, "the intermediate size", m->intermediate, tp));
    if (m->shared_intermediate)
        DCR_CHECK(dcr__divides(m->name, "the shared expert size", m->shared_intermediate, tp));
    if (m->experts && !sc->ep)
        DCR_CHECK(dcr__divides(m->name, "the expert intermediate size", m->moe_intermediate, tp));
    if (m->experts && sc->ep && m->experts < tp)
        return dcr_error_set(DCR_ELAYOUT, "model %s: %d experts cannot spread over %d ranks",
                             m->name, m->experts, tp);
    DCR_CHECK(dcr__divides(m->name, "the padded vocabulary", dcr_serve_padded_vocab(m->vocab), tp));
    if (m->family == DCR_FAMILY_NEMOTRON_H && strchr(m->pattern, 'M')) {
        DCR_CHECK(dcr__divides(m->name, "the Mamba heads", m->mamba_heads, tp));
        DCR_CHECK(dcr__divides(m->name, "the Mamba groups", m->mamba_groups, tp));
    }
    return DCR_OK;
}

dcr_status_t dcr_serve_config_validate(const dcr_model_config_t *model, dcr_serve_config_t *sc)
{
    if (model == NULL || sc == NULL) return dcr_error_set(DCR_EINVAL, "serve config: NULL");
    if (sc->nodes < 1 || sc->tp < 1 || sc->gpus_per_node < 0)
        return dcr_error_set(DCR_ELAYOUT,
                             "serve config: nodes %d, gpus per node %d, tp %d "
                             "(expected >= 1)",
                             sc->nodes, sc->gpus_per_node, sc->tp);
    int gpus = sc->gpus_per_node ? sc->gpus_per_node : sc->tp;
    if ((sc->nodes * gpus) % sc->tp != 0)
        return dcr_error_set(DCR_ELAYOUT, "serve config: %d ranks are not a multiple of tp %d",
                             sc->nodes * gpus, sc->tp);
    DCR_CHECK(dcr__validate_model(model, sc));
    sc->gpus_per_node = gpus;
    return DCR_OK;
}
