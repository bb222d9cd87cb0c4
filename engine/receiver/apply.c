/* Applying one item's records through the native loader.
 *
 * Every pass runs the loader; the hooks installed here receive its final
 * writes, hold each one to the prewarm probe's plan (same kind, parameter,
 * geometry and source: a loader whose path changes since prewarm fails the
 * attempt) and apply the records:
 *
 *  - sparse: the path is views of the tensor only, so each copy_'s source
 *    positions map back to canonical indices; only the records inside the
 *    copied view are touched, straight from the record list (scratch is not
 *    used, and NaN values need no special care);
 *  - full XOR: masks scattered into zeroed scratch; dst ^= src over the copy;
 *  - full placeholder: values scattered into NaN-filled scratch; the mask of
 *    positions that are not NaN is fixed at the first copy into each
 *    destination view;
 *  - full tracked: values scattered into scratch with an activity map that
 *    the load context carries through every op; the mask comes from it.
 *    Used for records whose value is NaN (they would read as placeholders),
 *    for paths whose transforms do not keep NaN as NaN, and when a transform
 *    turned a value into NaN during the placeholder pass.
 *
 * Fills are constants: identical in every version, so a delta leaves them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/device_views.h"
#include "receiver-internal.h"

typedef enum dcr__apply_mode {
    DCR__SPARSE = 0,
    DCR__FULL_XOR = 1,
    DCR__FULL_PLACEHOLDER = 2,
    DCR__FULL_TRACKED = 3,
} dcr__apply_mode_t;

uint64_t dcr__nan_word(dcr_dtype_t dtype)
{
    switch (dtype) {
    case DCR_DTYPE_BF16:
        return 0x7FC0u;
    case DCR_DTYPE_FP16:
        return 0x7E00u;
    case DCR_DTYPE_FP32:
        return 0x7FC00000u;
    case DCR_DTYPE_FP8_E4M3:
        return 0x7Fu;
    default:
        return 0;
    }
}

void dcr__apply_free(dcr_receiver_t *r)
{
    for (size_t i = 0; i < r->nmasks; i++) free(r->masks[i].bits);
    free(r->masks);
    dcr_map_free(&r->wmap);
    free(r->idx_buf);
    free(r->val_buf);
    free(r->dec_idx);
    free(r->item_c);
    free(r->map_idx);
    free(r->map_val);
    /* Nothing may still read staging when it goes. */
    if (r->stage_host) (void)dcr_device_sync(r->dev, r->stream);
    dcr_device_host_free(r->dev, r->stage_host);
    dcr_device_free(r->dev, r->stage_dev);
}

/* ---- staging and the settle ---- */

/* Offsets in staging keep every record array aligned for any word. */
#define DCR__STAGE_ALIGN 64
/* The first staging area unless configured (dcr__stage_room grows it). */
#define DCR__STAGE_MIN      ((size_t)1 << 20)
#define DCR__STAGE_GROW_MAX ((size_t)64 << 20)

static size_t dcr__stage_round(size_t bytes)
{
    return (bytes + DCR__STAGE_ALIGN - 1) / DCR__STAGE_ALIGN * DCR__STAGE_ALIGN;
}

/* Bytes up at the next free offset of staging, which has room for them. */
static dcr_status_t dcr__stage_put(dcr_receiver_t *r, const void *src, size_t bytes,
                                   const void **dev_p)
{
    char *host = (char *)r->stage_host + r->stage_used;
    char *dev = (char *)r->stage_dev + r->stage_used;
    memcpy(host, src, bytes);
    r->stage_used += dcr__stage_round(bytes);
    *dev_p = dev;
    return dcr_device_copy(r->dev, r->stream, dev, host, bytes, DCR_DEVICE_H2D);
}

/* Staging bytes of the current record list (indices, then words). */
static size_t dcr__records_bytes(const dcr_receiver_t *r)
{
    return dcr__stage_round(r->cur_count * sizeof(int64_t)) +
           dcr__stage_round(r->cur_count * dcr_dtype_size(r->cur_dtype));
}

static dcr_status_t dcr__stage_records(dcr_receiver_t *r)
{
    const void *didx, *dval;
    DCR_CHECK(dcr__stage_put(r, r->cur_idx, r->cur_count * sizeof(int64_t), &didx));
    DCR_CHECK(dcr__stage_put(r, r->cur_val, r->cur_count * dcr_dtype_size(r->cur_dtype), &dval));
    r->cur_didx = didx;
    r->cur_dval = dval;
    r->cur_staged = true;
    return DCR_OK;
}

/* Room for bytes more. When the area is full the stream drains first (the
 * only point where staging is reused), and the area grows when one request
 * needs more, or, up to the configured size (else DCR__STAGE_GROW_MAX), when
 * the interval since the last drain did (so a steady load drains only at
 * its settles). Records of the running pass that later kernels still read
 * go up again from the caller's buffers, unchanged while the item runs. */
static dcr_status_t dcr__stage_room(dcr_receiver_t *r, size_t bytes)
{
    if (r->stage_used + bytes <= r->stage_cap) return DCR_OK;
    size_t live = r->cur_staged ? dcr__records_bytes(r) : 0;
    size_t need = r->stage_used + bytes, least = live + bytes;
    DCR_CHECK(dcr__settle(r));
    size_t most = r->cfg.staging_bytes ? r->cfg.staging_bytes : DCR__STAGE_GROW_MAX;
    if (least > r->stage_cap || r->stage_cap < most) {
        size_t cap = r->stage_cap           ? r->stage_cap
                     : r->cfg.staging_bytes ? r->cfg.staging_bytes
                                            : DCR__STAGE_MIN;
        while (cap < least || (cap < need && cap < most)) cap *= 2;
        dcr_device_host_free(r->dev, r->stage_host);
        dcr_device_free(r->dev, r->stage_dev);
        r->stage_host = r->stage_dev = NULL;
        r->stage_cap = 0;
        DCR_CHECK(dcr_device_host_alloc(r->dev, cap, &r->stage_host));
        DCR_CHECK(dcr_device_alloc(r->dev, cap, &r->stage_dev));
        r->stage_cap = cap;
    }
    return live ? dcr__stage_records(r) : DCR_OK;
}

dcr_status_t dcr__settle(dcr_receiver_t *r)
{
    if (r->pend_items == 0 && r->pend_payloads == 0 && r->stage_used == 0) return DCR_OK;
    double t0 = dcr_clock_s();
    dcr_status_t st = dcr_device_sync(r->dev, r->stream);
    r->stats.apply_s += dcr_clock_s() - t0;
    r->stats.apply_syncs++;
    r->stage_used = 0;
    if (st == DCR_OK) {
        r->stats.items_applied += r->pend_items;
        r->stats.records_applied += r->pend_records;
        r->stats.payloads_applied += r->pend_payloads;
    } else {
        r->attempt_failed = true;
    }
    r->pend_items = r->pend_records = r->pend_payloads = 0;
    return st;
}

/* ---- violations and the plan ---- */

static dcr_status_t dcr__violation(dcr_receiver_t *r, const char *fmt, const char *a, const char *b)
{
    char what[256];
    snprintf(what, sizeof(what), fmt, a, b);
    return dcr_error_set(DCR_ERECEIVER, "apply %s (%s): %s", r->cur_name,
                         dcr_loader_name(r->loader), what);
}

static bool dcr__same_geometry(const dcr_view_t *a, const dcr_view_t *b)
{
    if (a->ndim != b->ndim || a->offset != b->offset || a->dtype != b->dtype) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
            return false;
    return true;
}

/* Holds the n-th write of this call to the n-th write the probe saw. */
static dcr_status_t dcr__conform(dcr_receiver_t *r, const dcr_load_write_t *w)
{
    const dcr__plan_t *pl = r->cur_plan;
    const char *pname = dcr_params_at(r->params, w->param)->name;
    if (r->cur_write >= pl->nwrites)
        return dcr__violation(r, "a write into %s beyond the %s the prewarm probe saw", pname,
                              "writes");
    const dcr__pwrite_t *pw = &pl->writes[r->cur_write++];
    bool ok = pw->kind == w->kind && pw->param == w->param && dcr__same_geometry(&pw->dst, &w->dst);
    if (ok && w->kind == DCR_LOAD_COPY) {
        ok = pw->source == w->origin.source && pw->src.dtype == w->src.dtype;
        if (ok && pw->source == DCR_LOAD_SRC_INPUT) ok = dcr__same_geometry(&pw->src, &w->src);
    }
    if (!ok)
        return dcr__violation(r,
                              "%s into %s differs from the prewarm probe (the loader path "
                              "changed)",
                              w->kind == DCR_LOAD_COPY ? "copy_" : "fill_", pname);
    return DCR_OK;
}

void dcr__note_written(dcr_receiver_t *r, size_t param, const dcr_view_t *dst)
{
    if (!r->cfg.track_written) return;
    int64_t lo = dst->offset, hi = dst->offset;
    for (int i = 0; i < dst->ndim; i++) {
        if (dst->shape[i] == 0) return;
        int64_t span = (dst->shape[i] - 1) * dst->strides[i];
        if (span < 0)
            lo += span;
        else
            hi += span;
    }
    if (r->whi[param] <= r->wlo[param]) {
        r->wlo[param] = lo;
        r->whi[param] = hi + 1;
        return;
    }
    if (lo < r->wlo[param]) r->wlo[param] = lo;
    if (hi + 1 > r->whi[param]) r->whi[param] = hi + 1;
}

/* ---- overlapping overwrites must agree ---- */

/* Stores bits at p; with overlapping writes, a second write of the same
 * element in this call must carry the same bits. */
static dcr_status_t dcr__store(dcr_receiver_t *r, void *p, dcr_dtype_t dtype, uint64_t bits)
{
    if (r->cur_plan->overlap) {
        uint64_t *seen;
        bool added;
        DCR_CHECK(dcr_map_upsert(&r->wmap, (uint64_t)(uintptr_t)p, bits, &seen, &added));
        if (!added && *seen != bits)
            return dcr__violation(r, "overlapping overwrites disagree%s%s", "", "");
    }
    dcr_dtype_store_bits(dtype, p, bits);
    return DCR_OK;
}

/* Converts one word between dtypes like copy_ does. */
static uint64_t dcr__convert_word(dcr_dtype_t to, dcr_dtype_t from, uint64_t bits)
{
    if (to == from) return bits;
    uint64_t out = 0;
    dcr_convert(&out, to, &bits, from, 1);
    return out;
}

/* ---- sparse ---- */

/* A copy's geometry for mapping source positions back to destinations:
 * dimensions of extent > 1 sorted by decreasing source stride, neighbours
 * merged where both sides continue each other (so a whole-tensor copy or a
 * row slice becomes one run). */
typedef struct dcr__inv {
    int nd;
    int64_t shape[DCR_MAX_DIMS], sstride[DCR_MAX_DIMS], dstride[DCR_MAX_DIMS];
    int64_t lo, hi; /* source storage positions the view can reach */
} dcr__inv_t;

static void dcr__inv_build(const dcr_load_write_t *w, dcr__inv_t *v)
{
    v->nd = 0;
    v->lo = v->hi = w->src.offset;
    for (int i = 0; i < w->src.ndim; i++) {
        if (w->src.shape[i] == 1) continue;
        int k = v->nd++;
        /* Insertion by decreasing source stride keeps the greedy division exact. */
        while (k > 0 && v->sstride[k - 1] < w->src.strides[i]) {
            v->shape[k] = v->shape[k - 1];
            v->sstride[k] = v->sstride[k - 1];
            v->dstride[k] = v->dstride[k - 1];
            k--;
        }
        v->shape[k] = w->src.shape[i];
        v->sstride[k] = w->src.strides[i];
        v->dstride[k] = w->dst.strides[i];
        v->hi += (w->src.shape[i] - 1) * w->src.strides[i];
    }
    int m = 0;
    for (int k = 1; k < v->nd; k++) {
        bool joins = v->sstride[m] == v->shape[k] * v->sstride[k] &&
                     v->dstride[m] == v->shape[k] * v->dstride[k];
        if (joins) {
            v->shape[m] *= v->shape[k];
            v->sstride[m] = v->sstride[k];
            v->dstride[m] = v->dstride[k];
        } else {
            m++;
            v->shape[m] = v->shape[k];
            v->sstride[m] = v->sstride[k];
            v->dstride[m] = v->dstride[k];
        }
    }
    if (v->nd > 0) v->nd = m + 1;
}

/* First record index >= key. */
static size_t dcr__lower_bound(const int64_t *idx, size_t n, int64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Destination element of source position idx, or -1 outside the view. */
static inline int64_t dcr__inv_map(const dcr__inv_t *v, int64_t rem, int64_t doff)
{
    for (int d = 0; d < v->nd; d++) {
        int64_t q = rem / v->sstride[d];
        if (q >= v->shape[d]) return -1;
        rem -= q * v->sstride[d];
        doff += q * v->dstride[d];
    }
    return rem == 0 ? doff : -1;
}

static dcr_status_t dcr__map_reserve(dcr_receiver_t *r, size_t n)
{
    if (n <= r->map_cap) return DCR_OK;
    int64_t *idx = realloc(r->map_idx, n * sizeof(*idx));
    if (idx) r->map_idx = idx;
    uint8_t *val = realloc(r->map_val, n * sizeof(uint32_t));
    if (val) r->map_val = val;
    if (idx == NULL || val == NULL) return dcr_error_set(DCR_ENOMEM, "apply: destination buffers");
    r->map_cap = n;
    return DCR_OK;
}

/* Records [k, end) (inside the source span of the view) into resident
 * storage through the device's scatter. When the copy is one contiguous run
 * on both sides the record indices, shifted, are the destinations, so they
 * go as they are; otherwise the destinations of the records the view reaches
 * are computed here (O(records)) and scattered with their words. */
static dcr_status_t dcr__sparse_scatter(dcr_receiver_t *r, const dcr_load_write_t *w,
                                        const dcr__inv_t *v, size_t k, size_t end,
                                        dcr_device_op_t op)
{
    dcr_dtype_t cd = r->cur_dtype, dd = w->dst.dtype;
    size_t es = dcr_dtype_size(cd), ds = dcr_dtype_size(dd);
    char *base = w->dst.storage->data;
    if (cd == dd && v->nd == 1 && v->sstride[0] == 1 && v->dstride[0] == 1) {
        /* Record index i lands at element i + shift of the destination. */
        int64_t shift = w->dst.offset - w->src.offset;
        return dcr_device_scatter(r->dev, r->stream, base + shift * (int64_t)es, es,
                                  r->cur_didx + k, r->cur_dval + k * es, end - k, op);
    }
    DCR_CHECK(dcr__map_reserve(r, end - k));
    size_t m = 0;
    for (; k < end; k++) {
        int64_t at = dcr__inv_map(v, r->cur_idx[k] - w->src.offset, w->dst.offset);
        if (at < 0) continue;
        r->map_idx[m] = at;
        /* A converting copy_ (overwrite only): the record's value as copy_
         * converts it, on the host where the records are. */
        dcr_convert(r->map_val + m * ds, dd, r->cur_val + k * es, cd, 1);
        m++;
    }
    if (r->host)
        return dcr_device_scatter(r->dev, r->stream, base, ds, r->map_idx, r->map_val, m, op);
    if (m == 0) return DCR_OK;
    /* Both arrays in one reservation: a drain between them would reuse
     * the first one's staging. */
    const void *didx, *dval;
    size_t ib = m * sizeof(*r->map_idx), vb = m * ds;
    DCR_CHECK(dcr__stage_room(r, dcr__stage_round(ib) + dcr__stage_round(vb)));
    DCR_CHECK(dcr__stage_put(r, r->map_idx, ib, &didx));
    DCR_CHECK(dcr__stage_put(r, r->map_val, vb, &dval));
    return dcr_device_scatter(r->dev, r->stream, base, ds, didx, dval, m, op);
}

static dcr_status_t dcr__sparse_copy(dcr_receiver_t *r, const dcr_load_write_t *w)
{
    if (w->origin.source != DCR_LOAD_SRC_INPUT)
        return dcr__violation(r, "copy_ from %s on a views-only path%s", w->origin.op, "");
    dcr__inv_t inv;
    dcr__inv_build(w, &inv);
    dcr_dtype_t cd = r->cur_dtype, dd = w->dst.dtype;
    size_t cs = dcr_dtype_size(cd), ds = dcr_dtype_size(dd);
    size_t k = dcr__lower_bound(r->cur_idx, r->cur_count, inv.lo);
    size_t end = k + dcr__lower_bound(r->cur_idx + k, r->cur_count - k, inv.hi + 1);
    bool xor = r->cur_enc == DCR_ENCODING_XOR;
    if (cd == dd && !r->cur_plan->overlap)
        return dcr__sparse_scatter(r, w, &inv, k, end, xor? DCR_DEVICE_XOR : DCR_DEVICE_OVERWRITE);
    /* On a device, converting overwrites scatter converted words. */
    if (!r->host && !xor&&!r->cur_plan->overlap)
        return dcr__sparse_scatter(r, w, &inv, k, end, DCR_DEVICE_OVERWRITE);
    /* On the host, converting copies and overlapping writes take the
     * checked general path. */
    if (!r->host)
        return dcr__device_unsupported(
            r, r->cur_name, r->cur_plan->overlap ? "overlapping copies" : "a converting XOR copy_");
    char *dbase = w->dst.storage->data;
    for (; k < end; k++) {
        int64_t at = dcr__inv_map(&inv, r->cur_idx[k] - w->src.offset, w->dst.offset);
        if (at < 0) continue;
        char *p = dbase + at * (int64_t)ds;
        uint64_t v = dcr_dtype_load_bits(cd, r->cur_val + k * cs);
        if (xor)
            dcr_dtype_store_bits(dd, p, dcr_dtype_load_bits(dd, p) ^ v);
        else
            DCR_CHECK(dcr__store(r, p, dd, dcr__convert_word(dd, cd, v)));
    }
    return DCR_OK;
}

/* ---- full pass ---- */

/* One row of the innermost dimension of n same-shape views: element j of
 * view k is at p[k] + j * step[k] (bytes); i0 is the row's first element in
 * row-major order over the shape. */
typedef dcr_status_t (*dcr__row_fn)(char *const *p, const int64_t *step, int64_t len, int64_t i0,
                                    void *arg);

/* Visits n same-shape views row by row in row-major order. */
static dcr_status_t dcr__walk_rows(int n, const dcr_view_t *const *v, dcr__row_fn fn, void *arg)
{
    const dcr_view_t *a = v[0];
    int nd = a->ndim;
    int64_t row = nd > 0 ? a->shape[nd - 1] : 1;
    int64_t idx[DCR_MAX_DIMS] = {0}, off[3], step[3], es[3];
    const int64_t *strides[3];
    char *base[3], *p[3];
    if (dcr_view_numel(a) == 0) return DCR_OK;
    for (int j = 0; j < n; j++) {
        base[j] = v[j]->storage->data;
        es[j] = (int64_t)dcr_dtype_size(v[j]->dtype);
        off[j] = v[j]->offset;
        step[j] = (nd > 0 ? v[j]->strides[nd - 1] : 1) * es[j];
        strides[j] = v[j]->strides;
    }
    for (int64_t i0 = 0;; i0 += row) {
        for (int j = 0; j < n; j++) p[j] = base[j] + off[j] * es[j];
        DCR_CHECK(fn(p, step, row, i0, arg));
        if (!dcr_device_odometer_step(nd - 1, a->shape, idx, n, off, strides)) return DCR_OK;
    }
}

typedef struct dcr__full {
    dcr_receiver_t *r;
    const dcr_load_write_t *w;
    uint8_t *mask;
} dcr__full_t;

static dcr_status_t dcr__overwrite_row(char *const *p, const int64_t *step, int64_t len, int64_t i0,
                                       void *arg)
{
    const dcr__full_t *f = arg;
    dcr_dtype_t dt = f->w->dst.dtype, st = f->w->src.dtype;
    const uint8_t *mask = f->mask + i0;
    for (int64_t j = 0; j < len; j++) {
        if (!mask[j]) continue;
        uint64_t v = dcr__convert_word(dt, st, dcr_dtype_load_bits(st, p[1] + j * step[1]));
        DCR_CHECK(dcr__store(f->r, p[0] + j * step[0], dt, v));
    }
    return DCR_OK;
}

static dcr_status_t dcr__mask_placeholder_row(char *const *p, const int64_t *step, int64_t len,
                                              int64_t i0, void *arg)
{
    const dcr__full_t *f = arg;
    dcr_dtype_t st = f->w->src.dtype;
    for (int64_t j = 0; j < len; j++)
        f->mask[i0 + j] = !dcr_dtype_bits_isnan(st, dcr_dtype_load_bits(st, p[0] + j * step[0]));
    return DCR_OK;
}

static dcr_status_t dcr__mask_tracked_row(char *const *p, const int64_t *step, int64_t len,
                                          int64_t i0, void *arg)
{
    const dcr__full_t *f = arg;
    for (int64_t j = 0; j < len; j++) f->mask[i0 + j] = p[0][j * step[0]] != 0;
    return DCR_OK;
}

/* The active mask of a destination view: computed at the first copy into
 * it during this pass and reused by later copies into the same view. */
static dcr_status_t dcr__mask_for(dcr_receiver_t *r, const dcr_load_write_t *w, uint8_t **mask_p)
{
    for (size_t i = 0; i < r->nmasks; i++) {
        if (r->masks[i].param == w->param && dcr__same_geometry(&r->masks[i].dst, &w->dst)) {
            *mask_p = r->masks[i].bits;
            return DCR_OK;
        }
    }
    if (r->nmasks == r->capmasks) {
        size_t cap = r->capmasks ? 2 * r->capmasks : 8;
        dcr__mask_t *m = realloc(r->masks, cap * sizeof(*m));
        if (m == NULL) return dcr_error_set(DCR_ENOMEM, "apply: masks");
        r->masks = m;
        r->capmasks = cap;
    }
    int64_t n = dcr_view_numel(&w->dst);
    uint8_t *bits = calloc((size_t)(n ? n : 1), 1);
    if (bits == NULL) return dcr_error_set(DCR_ENOMEM, "apply: mask of %lld", (long long)n);
    dcr__full_t f = {r, w, bits};
    if (r->cur_mode == DCR__FULL_TRACKED) {
        if (w->src_active) {
            const dcr_view_t *v[1] = {w->src_active};
            dcr__walk_rows(1, v, dcr__mask_tracked_row, &f);
        }
    } else {
        const dcr_view_t *v[1] = {&w->src};
        dcr__walk_rows(1, v, dcr__mask_placeholder_row, &f);
    }
    r->masks[r->nmasks++] = (dcr__mask_t){w->param, w->dst, bits};
    *mask_p = bits;
    return DCR_OK;
}

static void dcr__masks_clear(dcr_receiver_t *r)
{
    for (size_t i = 0; i < r->nmasks; i++) free(r->masks[i].bits);
    r->nmasks = 0;
}

/* Whether a copy into dst already ran in this pass (noting it if not): the
 * host path fixes a destination's mask at its first copy, which the device
 * path does not reproduce. */
static dcr_status_t dcr__first_copy(dcr_receiver_t *r, const dcr_load_write_t *w, bool *first_p)
{
    for (size_t i = 0; i < r->nmasks; i++)
        if (r->masks[i].param == w->param && dcr__same_geometry(&r->masks[i].dst, &w->dst)) {
            *first_p = false;
            return DCR_OK;
        }
    if (r->nmasks == r->capmasks) {
        size_t cap = r->capmasks ? 2 * r->capmasks : 8;
        dcr__mask_t *m = realloc(r->masks, cap * sizeof(*m));
        if (m == NULL) return dcr_error_set(DCR_ENOMEM, "apply: masks");
        r->masks = m;
        r->capmasks = cap;
    }
    r->masks[r->nmasks++] = (dcr__mask_t){w->param, w->dst, NULL};
    *first_p = true;
    return DCR_OK;
}

/* The overwrite passes on a device the host cannot address, without a mask
 * on the host: the placeholder pass is combine's (or, for a converting
 * copy_, convert's) own NaN rule on the source word, the tracked pass reads
 * the activity map the load context carried (laid out like the source; none
 * means nothing of this copy is active). Copies of one destination each,
 * without overlap: others stay on the host path. */
static dcr_status_t dcr__overwrite_device(dcr_receiver_t *r, const dcr_load_write_t *w)
{
    bool first;
    if (r->cur_plan->overlap) return dcr__device_unsupported(r, r->cur_name, "overlapping copies");
    DCR_CHECK(dcr__first_copy(r, w, &first));
    if (!first) return dcr__device_unsupported(r, r->cur_name, "a second copy_ into one view");
    if (r->cur_mode == DCR__FULL_TRACKED && w->src_active == NULL) return DCR_OK;
    const dcr_view_t *act = r->cur_mode == DCR__FULL_TRACKED ? w->src_active : NULL;
    if (w->src.dtype != w->dst.dtype)
        return dcr_device_convert_views(r->dev, r->stream, &w->dst, &w->src, act,
                                        DCR_DEVICE_OVERWRITE, DCR_DEVICE_T_NONE, NULL);
    return dcr_device_combine_views(r->dev, r->stream, &w->dst, &w->src, NULL, act,
                                    DCR_DEVICE_OVERWRITE);
}

static dcr_status_t dcr__full_copy(dcr_receiver_t *r, const dcr_load_write_t *w)
{
    dcr__full_t f = {r, w, NULL};
    const dcr_view_t *v[2] = {&w->dst, &w->src};
    if (r->cur_mode == DCR__FULL_XOR) {
        if (w->origin.source != DCR_LOAD_SRC_INPUT || w->src.dtype != w->dst.dtype)
            return dcr__violation(r, "XOR copy_ whose source is %s%s",
                                  w->origin.op[0] ? w->origin.op : "converted", "");
        return dcr_device_combine_views(r->dev, r->stream, &w->dst, &w->src, NULL, NULL,
                                        DCR_DEVICE_XOR);
    }
    if (!r->host) return dcr__overwrite_device(r, w);
    DCR_CHECK(dcr__mask_for(r, w, &f.mask));
    /* Converting copies and overlapping writes (whose bits must agree) keep
     * the checked host path. */
    if (w->src.dtype == w->dst.dtype && !r->cur_plan->overlap)
        return dcr_device_combine_views(r->dev, r->stream, &w->dst, &w->src, f.mask, NULL,
                                        DCR_DEVICE_OVERWRITE);
    return dcr__walk_rows(2, v, dcr__overwrite_row, &f);
}

/* ---- hooks ---- */

static dcr_status_t dcr__apply_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    dcr_receiver_t *r = arg;
    DCR_CHECK(dcr__conform(r, w));
    dcr__note_written(r, w->param, &w->dst);
    if (r->cur_mode == DCR__SPARSE) return dcr__sparse_copy(r, w);
    return dcr__full_copy(r, w);
}

static dcr_status_t dcr__apply_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    return dcr__conform(arg, w);
}

static const dcr_load_hooks_t dcr__apply_hooks = {dcr__apply_copy, dcr__apply_fill};

/* ---- scratch ---- */

/* Makes scratch [0, bytes) hold the base pattern (0, or the NaN
 * placeholder of dtype repeated), refilling on the device only when the
 * pattern or extent it holds does not cover the request. */
static dcr_status_t dcr__scratch_base(dcr_receiver_t *r, dcr__base_t base, dcr_dtype_t dtype,
                                      size_t bytes)
{
    DCR_CHECK(dcr__scratch_ready(r));
    if (r->base == base && (base == DCR__BASE_ZERO || r->base_dtype == dtype) &&
        r->base_bytes >= bytes)
        return DCR_OK;
    /* Unknown contents until the fill succeeds. */
    r->base = DCR__BASE_NONE;
    size_t es = base == DCR__BASE_ZERO ? 1 : dcr_dtype_size(dtype);
    uint32_t word = base == DCR__BASE_ZERO ? 0 : (uint32_t)dcr__nan_word(dtype);
    DCR_CHECK(dcr_device_fill(r->dev, r->stream, r->scratch->data, es, word, bytes / es));
    r->base = base;
    r->base_dtype = dtype;
    r->base_bytes = bytes;
    return DCR_OK;
}

/* The current records' values into scratch. */
static dcr_status_t dcr__scatter(dcr_receiver_t *r)
{
    return dcr_device_scatter(r->dev, r->stream, r->scratch->data, dcr_dtype_size(r->cur_dtype),
                              r->cur_didx, r->cur_dval, r->cur_count, DCR_DEVICE_OVERWRITE);
}

/* Puts the positions the current records touched back to the base pattern
 * (those inside the extent it covers; records are in increasing index
 * order). A NaN pattern of another word size than the records' cannot be
 * restored one word per record: scratch is then marked unknown and the next
 * pass that needs a base refills it. */
static dcr_status_t dcr__unscatter(dcr_receiver_t *r)
{
    size_t es = dcr_dtype_size(r->cur_dtype);
    if (r->base == DCR__BASE_NONE) return DCR_OK;
    if (r->base == DCR__BASE_NAN && dcr_dtype_size(r->base_dtype) != es) {
        r->base = DCR__BASE_NONE;
        return DCR_OK;
    }
    size_t n = dcr__lower_bound(r->cur_idx, r->cur_count, (int64_t)((r->base_bytes + es - 1) / es));
    uint32_t word = r->base == DCR__BASE_ZERO ? 0 : (uint32_t)dcr__nan_word(r->base_dtype);
    dcr_status_t st =
        dcr_device_reset(r->dev, r->stream, r->scratch->data, es, r->cur_didx, n, word);
    if (st != DCR_OK) r->base = DCR__BASE_NONE;
    return st;
}

static dcr_status_t dcr__active_ready(dcr_receiver_t *r)
{
    if (r->scratch_active) return DCR_OK;
    size_t most = 1;
    for (size_t i = 0; i < dcr_inventory_count(r->inv); i++) {
        size_t n = (size_t)dcr_desc_numel(dcr_inventory_at(r->inv, i));
        if (n > most) most = n;
    }
    return dcr__device_storage(r, most, &r->scratch_active);
}

/* Sets (1) or clears (0) the activity map at the current records. */
static dcr_status_t dcr__mark_active(dcr_receiver_t *r, uint8_t on)
{
    return dcr_device_reset(r->dev, r->stream, r->scratch_active->data, 1, r->cur_didx,
                            r->cur_count, on);
}

/* ---- passes ---- */

/* Runs the loader once in the given mode over the current records and holds
 * the call to the plan. */
static dcr_status_t dcr__pass(dcr_receiver_t *r, const dcr_tensor_desc_t *d, dcr__apply_mode_t m)
{
    dcr_view_t in, act;
    DCR_CHECK(dcr__scratch_ready(r));
    DCR_CHECK(dcr_view_contiguous(r->scratch, d->dtype, d->ndim, d->shape, &in));
    dcr_load_mode_t mode = {.device = !r->host};
    if (m == DCR__FULL_PLACEHOLDER) mode.watch_nan = true;
    if (m == DCR__FULL_TRACKED) {
        DCR_CHECK(dcr__active_ready(r));
        DCR_CHECK(
            dcr_view_contiguous(r->scratch_active, DCR_DTYPE_FP8_E4M3, d->ndim, d->shape, &act));
        mode.track = true;
        DCR_CHECK(dcr__mark_active(r, 1));
    }
    if (m != DCR__SPARSE) DCR_CHECK(dcr__scatter(r));
    r->cur_mode = (int)m;
    r->cur_write = 0;
    dcr_load_ctx_set_mode(r->ctx, mode);
    if (m == DCR__FULL_TRACKED) dcr_load_ctx_set_input_active(r->ctx, &act);
    dcr_load_ctx_set_hooks(r->ctx, &dcr__apply_hooks, r);
    dcr_status_t st = dcr_loader_load(r->loader, r->ctx, d->name, &in);
    bool skipped = dcr_load_ctx_skipped(r->ctx);
    dcr_load_ctx_set_hooks(r->ctx, NULL, NULL);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){0});
    /* Scratch and the activity map go back to their base even when the
     * pass failed; the first error is the one reported. */
    dcr_status_t cst = m != DCR__SPARSE ? dcr__unscatter(r) : DCR_OK;
    if (m == DCR__FULL_TRACKED && cst == DCR_OK) cst = dcr__mark_active(r, 0);
    dcr__masks_clear(r);
    dcr_map_clear(&r->wmap);
    if (st != DCR_OK) return st;
    if (cst != DCR_OK) return cst;
    if (skipped || r->cur_write != r->cur_plan->nwrites) {
        char got[32], want[32];
        snprintf(got, sizeof(got), "%zu", r->cur_write);
        snprintf(want, sizeof(want), "%zu", r->cur_plan->nwrites);
        return dcr__violation(r,
                              "the loader reported the tensor loaded after %s intercepted "
                              "writes, the prewarm probe saw %s",
                              got, want);
    }
    return DCR_OK;
}

/* ---- the sparse replay ---- */

/* Plan c's copies as runs from *at on (room counted by the caller). */
static void dcr__plan_compile(dcr_receiver_t *r, size_t c, dcr__run_t *at)
{
    dcr__plan_t *pl = &r->plans[c];
    dcr_dtype_t cd = dcr_inventory_at(r->inv, c)->dtype;
    pl->runs = at;
    pl->nruns = 0;
    for (size_t i = 0; i < pl->nwrites; i++) {
        const dcr__pwrite_t *pw = &pl->writes[i];
        if (pw->kind != DCR_LOAD_COPY) continue;
        dcr_load_write_t w = {.kind = DCR_LOAD_COPY, .dst = pw->dst, .src = pw->src};
        dcr__inv_t inv;
        dcr__inv_build(&w, &inv);
        /* What dcr__sparse_copy would send straight to the scatter. */
        bool simple = pw->source == DCR_LOAD_SRC_INPUT && !pl->overlap && pw->dst.dtype == cd &&
                      pw->src.dtype == cd && inv.nd == 1 && inv.sstride[0] == 1 &&
                      inv.dstride[0] == 1;
        at[pl->nruns++] = (dcr__run_t){dcr_params_at(r->params, pw->param)->storage,
                                       inv.lo,
                                       inv.hi,
                                       pw->dst.offset - pw->src.offset,
                                       (uint32_t)i,
                                       simple};
    }
}

dcr_status_t dcr__replay_compile(dcr_receiver_t *r)
{
    size_t n = dcr_inventory_count(r->inv), copies = 0;
    for (size_t c = 0; c < n; c++) {
        const dcr__plan_t *pl = &r->plans[c];
        if (!pl->info.views_only) continue;
        for (size_t i = 0; i < pl->nwrites; i++) copies += pl->writes[i].kind == DCR_LOAD_COPY;
    }
    free(r->runs);
    r->runs = calloc(copies ? copies : 1, sizeof(*r->runs));
    if (r->runs == NULL) return dcr_error_set(DCR_ENOMEM, "prewarm: replay of %zu copies", copies);
    size_t used = 0;
    for (size_t c = 0; c < n; c++) {
        if (!r->plans[c].info.views_only) continue;
        dcr__plan_compile(r, c, r->runs + used);
        used += r->plans[c].nruns;
    }
    return DCR_OK;
}

/* A simple copy: the records inside its source span, shifted, are its
 * destinations. A host-addressable receiver writes them on this thread with
 * the host backend's loop (no stream, no argument checks per run); others
 * queue the device's scatter. */
static dcr_status_t dcr__replay_run(dcr_receiver_t *r, const dcr__run_t *run)
{
    size_t k = dcr__lower_bound(r->cur_idx, r->cur_count, run->lo);
    size_t end = k + dcr__lower_bound(r->cur_idx + k, r->cur_count - k, run->hi + 1);
    if (k == end) return DCR_OK;
    size_t es = dcr_dtype_size(r->cur_dtype);
    bool xor = r->cur_enc == DCR_ENCODING_XOR;
    char *base = (char *)run->dst->data + run->shift * (int64_t)es;
    if (r->host) {
        dcr_device_host_scatter(base, es, r->cur_idx + k, r->cur_val + k * es, end - k, xor);
        return DCR_OK;
    }
    return dcr_device_scatter(r->dev, r->stream, base, es, r->cur_didx + k, r->cur_dval + k * es,
                              end - k, xor? DCR_DEVICE_XOR : DCR_DEVICE_OVERWRITE);
}

/* Any other copy of the plan through dcr__sparse_copy, on the parameter's
 * storage as it is now. */
static dcr_status_t dcr__replay_write(dcr_receiver_t *r, const dcr__pwrite_t *pw)
{
    dcr_load_write_t w = {.kind = DCR_LOAD_COPY, .param = pw->param};
    w.dst = pw->dst;
    w.dst.storage = dcr_params_at(r->params, pw->param)->storage;
    w.src = pw->src;
    w.origin.source = pw->source;
    w.origin.op = "";
    return dcr__sparse_copy(r, &w);
}

/* Sparse apply from the prewarm plan: the copies the probe intercepted from
 * the native loader, replayed in its order without running it again. On a
 * views-only path a copy's placement depends only on the shapes the loader
 * saw, which the inventory fixes, so the probe's copies are the ones a run
 * would make; replaying them skips what a run costs per item (the loader
 * building and matching parameter names, the context's views), which is
 * most of an item's cost at 1% change. Fills are constants a delta leaves.
 * Destinations are the parameters' storages as they are now. */
static dcr_status_t dcr__replay(dcr_receiver_t *r)
{
    const dcr__plan_t *pl = r->cur_plan;
    r->cur_mode = DCR__SPARSE;
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < pl->nruns && st == DCR_OK; i++) {
        const dcr__run_t *run = &pl->runs[i];
        const dcr__pwrite_t *pw = &pl->writes[run->write];
        if (r->cfg.track_written) dcr__note_written(r, pw->param, &pw->dst);
        st = run->simple ? dcr__replay_run(r, run) : dcr__replay_write(r, pw);
    }
    /* Overlapping copies agree within one item only. */
    dcr_map_clear(&r->wmap);
    return st;
}

/* Sets the current record list, and sends it up to a device the host
 * cannot address through staging (so the caller's buffers are free again at
 * once, and the copy overlaps the kernels queued before it). */
static dcr_status_t dcr__records(dcr_receiver_t *r, const int64_t *idx, const void *val, size_t n)
{
    r->cur_idx = r->cur_didx = idx;
    r->cur_val = r->cur_dval = val;
    r->cur_count = n;
    r->cur_staged = false;
    if (r->host || n == 0) return DCR_OK;
    DCR_CHECK(dcr__stage_room(r, dcr__records_bytes(r)));
    return dcr__stage_records(r);
}

static dcr_status_t dcr__bufs(dcr_receiver_t *r, size_t count, size_t es)
{
    if (count <= r->buf_cap) return DCR_OK;
    int64_t *idx = realloc(r->idx_buf, count * sizeof(*idx));
    if (idx) r->idx_buf = idx;
    uint8_t *val = realloc(r->val_buf, count * 8);
    if (val) r->val_buf = val;
    if (idx == NULL || val == NULL) return dcr_error_set(DCR_ENOMEM, "apply: record buffers");
    r->buf_cap = count;
    (void)es;
    return DCR_OK;
}

/* Copies the records into the split buffers, ordinary values first and
 * NaN values (which would read as placeholders) after them, both in
 * increasing index order. Returns the number of ordinary values. */
static dcr_status_t dcr__split_nan(dcr_receiver_t *r, dcr_dtype_t dtype, const int64_t *idx,
                                   const uint8_t *val, size_t n, size_t *ordinary_p)
{
    size_t es = dcr_dtype_size(dtype), a = 0, nans = 0;
    DCR_CHECK(dcr__bufs(r, n, es));
    for (size_t k = 0; k < n; k++)
        nans += dcr_dtype_bits_isnan(dtype, dcr_dtype_load_bits(dtype, val + k * es));
    size_t b = n - nans;
    for (size_t k = 0; k < n; k++) {
        bool nan = dcr_dtype_bits_isnan(dtype, dcr_dtype_load_bits(dtype, val + k * es));
        size_t at = nan ? b++ : a++;
        r->idx_buf[at] = idx[k];
        memcpy(r->val_buf + at * es, val + k * es, es);
    }
    *ordinary_p = n - nans;
    return DCR_OK;
}

/* Overwrite through scratch: the placeholder pass for ordinary values, the
 * tracked pass for NaN values (or for everything when the placeholder cannot
 * be trusted on this path, or a transform turned a value into NaN). */
static dcr_status_t dcr__overwrite_full(dcr_receiver_t *r, const dcr_tensor_desc_t *d,
                                        const int64_t *idx, const uint8_t *val, size_t n)
{
    size_t es = dcr_dtype_size(d->dtype), a = 0;
    /* A dtype without NaN has no placeholder to spare: track everything. */
    bool tracked_all = r->cfg.mask == DCR_MASK_TRACKED || !r->cur_plan->info.placeholder_safe ||
                       !dcr_dtype_has_nan(d->dtype);
    if (!tracked_all) {
        DCR_CHECK(dcr__split_nan(r, d->dtype, idx, val, n, &a));
        if (a > 0) {
            DCR_CHECK(dcr__scratch_base(r, DCR__BASE_NAN, d->dtype, dcr_desc_bytes(d)));
            DCR_CHECK(dcr__records(r, r->idx_buf, r->val_buf, a));
            DCR_CHECK(dcr__pass(r, d, DCR__FULL_PLACEHOLDER));
            int64_t created, lost;
            dcr_load_ctx_nan_events(r->ctx, &created, &lost);
            if (lost > 0)
                return dcr__violation(r,
                                      "a transform turned the NaN placeholder into a "
                                      "number%s%s",
                                      "", "");
            /* Values that became NaN read as placeholders and were not applied. */
            tracked_all = created > 0;
        }
    }
    if (!tracked_all && a == n) return DCR_OK;
    r->stats.items_tracked++;
    if (tracked_all)
        DCR_CHECK(dcr__records(r, idx, val, n));
    else
        DCR_CHECK(dcr__records(r, r->idx_buf + a, r->val_buf + a * es, n - a));
    return dcr__pass(r, d, DCR__FULL_TRACKED);
}

static dcr_status_t dcr__apply_plan(dcr_receiver_t *r, size_t c, dcr_encoding_t enc,
                                    const int64_t *idx, const uint8_t *val, size_t n)
{
    const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, c);
    r->cur_enc = enc;
    r->cur_dtype = d->dtype;
    if (r->cur_plan->info.views_only && !r->cfg.full_pass) {
        r->stats.items_sparse++;
        DCR_CHECK(dcr__records(r, idx, val, n));
        if (r->cfg.loader_per_item) return dcr__pass(r, d, DCR__SPARSE);
        return dcr__replay(r);
    }
    r->stats.items_full++;
    if (enc == DCR_ENCODING_XOR) {
        DCR_CHECK(dcr__scratch_base(r, DCR__BASE_ZERO, d->dtype, dcr_desc_bytes(d)));
        DCR_CHECK(dcr__records(r, idx, val, n));
        return dcr__pass(r, d, DCR__FULL_XOR);
    }
    return dcr__overwrite_full(r, d, idx, val, n);
}

dcr_status_t dcr__apply_records(dcr_receiver_t *r, size_t c, dcr_encoding_t enc, const int64_t *idx,
                                const void *values, size_t count)
{
    const dcr__plan_t *pl = &r->plans[c];
    const char *name = dcr_inventory_at(r->inv, c)->name;
    if (pl->info.cls == DCR_PATH_SKIPPED) {
        r->stats.items_skipped++;
        return DCR_OK;
    }
    if (pl->info.cls == DCR_PATH_UNSUPPORTED)
        return dcr_error_set(DCR_EPAYLOAD, "item %s: the loader path is unsupported (%s)", name,
                             pl->info.reason);
    if (enc == DCR_ENCODING_XOR && pl->info.cls != DCR_PATH_XOR)
        return dcr_error_set(DCR_EPAYLOAD,
                             "item %s is XOR but this rank's path is "
                             "overwrite-only (%s: %s)",
                             name, pl->info.op, pl->info.reason);
    double t0 = dcr_clock_s();
    r->cur_plan = pl;
    r->cur_name = name;
    dcr_status_t st = dcr__apply_plan(r, c, enc, idx, values, count);
    r->cur_plan = NULL;
    r->cur_staged = false;
    r->stats.apply_s += dcr_clock_s() - t0;
    if (st != DCR_OK) return st;
    /* Queued, not done: the item counts as applied at the settle that sees
     * its device work complete (before anything acknowledges it). */
    r->pend_items++;
    r->pend_records += count;
    return DCR_OK;
}
