/* Receivers of a served model (each with its family's loader, for its tensor
 * parallel rank) and the XOR/overwrite item split they imply. */
#include <stdlib.h>

#include "workloads/serve/serve-internal.h"

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
    rc.id = receiver;
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
