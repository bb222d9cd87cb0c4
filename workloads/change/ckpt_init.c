/* Canonical tensors from a checkpoint's leading blocks. */
#include "workloads/change/ckpt_init.h"

#include <stdbool.h>
#include <string.h>

#include "workloads/model/safetensors.h"

/* The tensor of the checkpoint for d, checked to hold d as a leading block. */
static dcr_status_t dcr__init_source(const dcr_checkpoint_t *ck, const dcr_tensor_desc_t *d,
                                     const dcr_st_tensor_t **out_p)
{
    const dcr_st_tensor_t *t = dcr_checkpoint_find(ck, d->name);
    if (t == NULL) {
        return dcr_error_set(DCR_ENOTFOUND, "--init %s: tensor \"%s\" of the model is missing",
                             dcr_checkpoint_path(ck), d->name);
    }
    bool fits = t->dtype == d->dtype && t->ndim == d->ndim;
    for (int k = 0; fits && k < d->ndim; k++) fits = t->shape[k] >= d->shape[k];
    if (!fits) {
        char want[96], have[96];
        dcr_shape_format(d->ndim, d->shape, want, sizeof(want));
        dcr_shape_format(t->ndim, t->shape, have, sizeof(have));
        return dcr_error_set(DCR_EPARSE,
                             "--init %s: tensor \"%s\" is %s %s, which does not hold the model's "
                             "%s %s (same dtype and rank, no smaller dimension)",
                             dcr_checkpoint_path(ck), d->name, t->dtype_name, have,
                             dcr_st_dtype_name(d->dtype), want);
    }
    *out_p = t;
    return DCR_OK;
}

/* Copies the leading block: every run of the last dimension separately,
 * walking the other dimensions as an odometer. */
static void dcr__copy_block(const dcr_tensor_desc_t *d, const dcr_st_tensor_t *t, uint8_t *dst)
{
    size_t es = dcr_dtype_size(d->dtype);
    if (d->ndim == 0) {
        memcpy(dst, t->data, es);
        return;
    }
    int last = d->ndim - 1;
    size_t run = (size_t)d->shape[last] * es;
    int64_t idx[DCR_MAX_DIMS] = {0};
    int64_t rows = dcr_desc_numel(d) / d->shape[last];
    for (int64_t r = 0; r < rows; r++) {
        int64_t src = 0; /* element offset of (idx..., 0) in the checkpoint tensor */
        for (int k = 0; k < last; k++) src = src * t->shape[k] + idx[k];
        src *= t->shape[last];
        memcpy(dst + (size_t)r * run, t->data + (size_t)src * es, run);
        for (int k = last - 1; k >= 0 && ++idx[k] == d->shape[k]; k--) idx[k] = 0;
    }
}

dcr_status_t dcr_ckpt_init_canonical(const dcr_scenario_t *sc, const char *path,
                                     dcr_storage_t *const *canonical)
{
    dcr_checkpoint_t *ck = NULL;
    DCR_CHECK(dcr_checkpoint_open(path, &ck));
    dcr_status_t st = DCR_OK;
    for (size_t c = 0; c < dcr_inventory_count(sc->inventory) && st == DCR_OK; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        const dcr_st_tensor_t *t = NULL;
        st = dcr__init_source(ck, d, &t);
        if (st == DCR_OK) dcr__copy_block(d, t, canonical[c]->data);
    }
    dcr_checkpoint_close(ck);
    return st;
}
