/* vLLM-like rollout layouts: degrees, ranks, vocabulary padding, expert
 * blocks, receivers, and the XOR/overwrite item split. */
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

dcr_status_t dcr_serve_receiver_create(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                       const dcr_serve_config_t *sc, int receiver,
                                       const dcr_receiver_config_t *base, dcr_receiver_t **out_p)
{
    if (model == NULL || inv == NULL || sc == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "serve receiver: NULL argument");
    dcr_serve_config_t s = *sc;
    DCR_CHECK(dcr_serve_config_validate(model, &s));
    if (receiver < 0 || receiver >= dcr_serve_receivers(&s))
        return dcr_error_set(DCR_EINVAL, "serve receiver %d: outside [0, %d)", receiver,
                             dcr_serve_receivers(&s));
    DCR_CHECK(dcr_serve_register_loaders());
    dcr_serve_loader_config_t lc = {model, s, dcr_serve_tp_rank(&s, receiver)};
    dcr_receiver_config_t rc = base ? *base : (dcr_receiver_config_t){0};
    rc.loader = dcr_serve_loader_name(model->family);
    rc.loader_config = &lc;
    rc.inventory = inv;
    return dcr_receiver_create(&rc, out_p);
}

bool dcr_serve_xor_allowed(dcr_receiver_t *const *receivers, int n, size_t i)
{
    bool held = false;
    for (int k = 0; k < n; k++) {
        dcr_path_info_t info;
        if (dcr_receiver_path(receivers[k], i, &info) != DCR_OK) return false;
        if (info.cls == DCR_PATH_SKIPPED) continue;
        if (info.cls != DCR_PATH_XOR) return false;
        held = true;
    }
    return held;
}

/* Per canonical tensor: may it take XOR on this layout? */
static dcr_status_t dcr__xor_tensors(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                     const dcr_serve_config_t *sc, bool *xor_ok)
{
    int tp = sc->tp;
    dcr_receiver_t **rs = calloc((size_t)tp, sizeof(*rs));
    if (rs == NULL) return dcr_error_set(DCR_ENOMEM, "xor split: receivers");
    dcr_receiver_config_t base = {.shape_only = true};
    dcr_status_t st = DCR_OK;
    /* Instances are identical, so the ranks of one instance decide. */
    for (int k = 0; k < tp && st == DCR_OK; k++) {
        st = dcr_serve_receiver_create(model, inv, sc, k, &base, &rs[k]);
        if (st == DCR_OK) st = dcr_receiver_prewarm(rs[k]);
    }
    for (size_t i = 0; st == DCR_OK && i < dcr_inventory_count(inv); i++)
        xor_ok[i] = dcr_serve_xor_allowed(rs, tp, i);
    for (int k = 0; k < tp; k++) dcr_receiver_destroy(rs[k]);
    free(rs);
    return st;
}

dcr_status_t dcr_serve_xor_split(const dcr_model_config_t *model, const dcr_inventory_t *inv,
                                 const dcr_source_layout_t *layout, const dcr_serve_config_t *sc,
                                 dcr_serve_split_t *out_p)
{
    if (model == NULL || inv == NULL || layout == NULL || sc == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "xor split: NULL argument");
    size_t n = dcr_inventory_count(inv);
    bool *xor_ok = calloc(n ? n : 1, sizeof(*xor_ok));
    if (xor_ok == NULL) return dcr_error_set(DCR_ENOMEM, "xor split: %zu flags", n);
    dcr_status_t st = dcr__xor_tensors(model, inv, sc, xor_ok);
    if (st != DCR_OK) {
        free(xor_ok);
        return st;
    }
    dcr_serve_split_t s = {0};
    for (int t = 0; t < layout->ntasks; t++) {
        const dcr_task_t *task = &layout->tasks[t];
        if (task->kind != DCR_TASK_AFFINE) continue;
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, (size_t)task->canonical);
        int64_t bytes = dcr_task_numel(task) * (int64_t)dcr_dtype_size(d->dtype);
        if (xor_ok[task->canonical]) {
            s.xor_items++;
            s.xor_bytes += bytes;
        } else {
            s.overwrite_items++;
            s.overwrite_bytes += bytes;
        }
    }
    for (size_t c = 0; c < n; c++) {
        if (layout->residual_owner[c] < 0) continue;
        s.overwrite_items++;
        s.overwrite_bytes += (int64_t)dcr_desc_bytes(dcr_inventory_at(inv, c));
    }
    int64_t total = s.xor_bytes + s.overwrite_bytes;
    s.xor_byte_share = total ? (double)s.xor_bytes / (double)total : 0.0;
    free(xor_ok);
    *out_p = s;
    return DCR_OK;
}
