/* Comparing a receiver with a dense refit without building one.
 *
 * The native loader runs over every canonical tensor as a dense load would,
 * and the hooks compare each final write with the resident bytes instead of
 * writing it. A copy_ compares every element as copy_ would write it
 * (converted to the destination's dtype). A fill_ is held back until its
 * tensor's run ends, since a later write of the same tensor may cover it
 * (a dense load keeps the last write); its elements that no later write of
 * the tensor covers are compared with the constant. Writes of different
 * tensors never share an element (prewarm refuses that), and after a
 * successful prewarm every resident element is written by some intercepted
 * write, so every resident byte is compared with what a dense load of the
 * same tensors would leave there. */
#include <stdlib.h>
#include <string.h>

#include "dcr/device_views.h"
#include "receiver-internal.h"

/* One write of the running tensor, kept for the fills' check at its end. */
typedef struct dcr__kept {
    dcr_load_write_kind_t kind;
    size_t param;
    dcr_view_t dst;
    uint64_t fill_bits;
} dcr__kept_t;

typedef struct dcr__compare {
    dcr_receiver_t *r;
    dcr__kept_t *kept;
    size_t nkept, cap;
    bool any_fill;
    /* The first difference. */
    bool differs;
    size_t param;
    int64_t elem;
    uint8_t *row; /* a converted source row */
    size_t row_cap;
} dcr__compare_t;

static void dcr__differs(dcr__compare_t *c, size_t param, int64_t elem)
{
    if (c->differs) return;
    c->differs = true;
    c->param = param;
    c->elem = elem;
}

static dcr_status_t dcr__keep(dcr__compare_t *c, const dcr_load_write_t *w)
{
    if (c->nkept == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        dcr__kept_t *k = realloc(c->kept, cap * sizeof(*k));
        if (k == NULL) return dcr_error_set(DCR_ENOMEM, "compare: write list");
        c->kept = k;
        c->cap = cap;
    }
    c->kept[c->nkept++] = (dcr__kept_t){w->kind, w->param, w->dst, w->fill_bits};
    if (w->kind == DCR_LOAD_FILL) c->any_fill = true;
    return DCR_OK;
}

static dcr_status_t dcr__row_room(dcr__compare_t *c, size_t bytes)
{
    if (bytes <= c->row_cap) return DCR_OK;
    uint8_t *p = realloc(c->row, bytes);
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "compare: row of %zu bytes", bytes);
    c->row = p;
    c->row_cap = bytes;
    return DCR_OK;
}

/* One row of a copy: len elements, dst at d (step ds elements), src at s
 * (step ss). i is the destination's element offset of the row's start. */
static dcr_status_t dcr__compare_row(dcr__compare_t *c, const dcr_load_write_t *w, const char *d,
                                     int64_t ds, const char *s, int64_t ss, int64_t len,
                                     int64_t off)
{
    dcr_dtype_t dt = w->dst.dtype, st = w->src.dtype;
    size_t de = dcr_dtype_size(dt), se = dcr_dtype_size(st);
    if (dt == st && ds == 1 && ss == 1 && memcmp(d, s, (size_t)len * de) == 0) return DCR_OK;
    if (dt != st && ss == 1) {
        DCR_CHECK(dcr__row_room(c, (size_t)len * de));
        dcr_convert(c->row, dt, s, st, (size_t)len);
        s = (const char *)c->row;
        ss = 1;
        st = dt;
        se = de;
    }
    for (int64_t j = 0; j < len; j++) {
        const char *sp = s + j * ss * (int64_t)se;
        uint64_t want, word = 0;
        if (st == dt) {
            want = dcr_dtype_load_bits(dt, sp);
        } else {
            dcr_convert(&word, dt, sp, st, 1);
            want = dcr_dtype_load_bits(dt, &word);
        }
        if (dcr_dtype_load_bits(dt, d + j * ds * (int64_t)de) != want) {
            dcr__differs(c, w->param, off + j * ds);
            return DCR_OK;
        }
    }
    return DCR_OK;
}

static dcr_status_t dcr__compare_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    (void)ctx;
    dcr__compare_t *c = arg;
    DCR_CHECK(dcr__keep(c, w));
    if (c->differs || dcr_view_numel(&w->dst) == 0) return DCR_OK;
    int nd = w->dst.ndim;
    int64_t idx[DCR_MAX_DIMS] = {0}, off[2] = {w->dst.offset, w->src.offset};
    const int64_t *strides[2] = {w->dst.strides, w->src.strides};
    int64_t len = nd > 0 ? w->dst.shape[nd - 1] : 1;
    int64_t ds = nd > 0 ? w->dst.strides[nd - 1] : 1, ss = nd > 0 ? w->src.strides[nd - 1] : 1;
    const char *dbase = w->dst.storage->data, *sbase = w->src.storage->data;
    size_t de = dcr_dtype_size(w->dst.dtype), se = dcr_dtype_size(w->src.dtype);
    do {
        DCR_CHECK(dcr__compare_row(c, w, dbase + off[0] * (int64_t)de, ds,
                                   sbase + off[1] * (int64_t)se, ss, len, off[0]));
        if (c->differs) return DCR_OK;
    } while (dcr_device_odometer_step(nd - 1, w->dst.shape, idx, 2, off, strides));
    return DCR_OK;
}

static dcr_status_t dcr__compare_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    (void)ctx;
    return dcr__keep(arg, w);
}

static const dcr_load_hooks_t dcr__compare_hooks = {dcr__compare_copy, dcr__compare_fill};

/* ---- fills, at the end of their tensor ---- */

typedef struct dcr__cover {
    uint8_t *covered; /* one byte per element of the parameter */
    const dcr__kept_t *fill;
    dcr__compare_t *c;
} dcr__cover_t;

static dcr_status_t dcr__mark(int64_t lo, int64_t hi, void *arg)
{
    dcr__cover_t *v = arg;
    memset(v->covered + lo, 1, (size_t)(hi - lo));
    return DCR_OK;
}

static dcr_status_t dcr__check_fill_run(int64_t lo, int64_t hi, void *arg)
{
    dcr__cover_t *v = arg;
    dcr_dtype_t dt = v->fill->dst.dtype;
    size_t de = dcr_dtype_size(dt);
    const char *base = v->fill->dst.storage->data;
    for (int64_t e = lo; e < hi && !v->c->differs; e++)
        if (!v->covered[e] && dcr_dtype_load_bits(dt, base + e * (int64_t)de) != v->fill->fill_bits)
            dcr__differs(v->c, v->fill->param, e);
    return DCR_OK;
}

/* Fill i against the resident bytes where no later write of the tensor
 * lands. */
static dcr_status_t dcr__check_fill(dcr__compare_t *c, size_t i)
{
    const dcr__kept_t *f = &c->kept[i];
    const dcr_param_t *p = dcr_params_at(c->r->params, f->param);
    size_t numel = (size_t)dcr_shape_numel(p->ndim, p->shape);
    dcr__cover_t v = {calloc(numel ? numel : 1, 1), f, c};
    if (v.covered == NULL) return dcr_error_set(DCR_ENOMEM, "compare: map of %s", p->name);
    dcr_status_t st = DCR_OK;
    for (size_t j = i + 1; st == DCR_OK && j < c->nkept; j++)
        if (c->kept[j].param == f->param) st = dcr__footprint(&c->kept[j].dst, dcr__mark, &v);
    if (st == DCR_OK) st = dcr__footprint(&f->dst, dcr__check_fill_run, &v);
    free(v.covered);
    return st;
}

static dcr_status_t dcr__compare_tensor(dcr__compare_t *c, size_t t, dcr_storage_t *canonical)
{
    dcr_receiver_t *r = c->r;
    const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, t);
    dcr_view_t v;
    DCR_CHECK(dcr_view_contiguous(canonical, d->dtype, d->ndim, d->shape, &v));
    c->nkept = 0;
    c->any_fill = false;
    dcr_load_ctx_set_hooks(r->ctx, &dcr__compare_hooks, c);
    dcr_status_t st = dcr_loader_load(r->loader, r->ctx, d->name, &v);
    dcr_load_ctx_set_hooks(r->ctx, NULL, NULL);
    for (size_t i = 0; st == DCR_OK && c->any_fill && i < c->nkept && !c->differs; i++)
        if (c->kept[i].kind == DCR_LOAD_FILL) st = dcr__check_fill(c, i);
    return st;
}

dcr_status_t dcr_receiver_compare_dense(dcr_receiver_t *r, dcr_storage_t *const *canonical,
                                        bool *equal_p, const char **param_p, int64_t *elem_p)
{
    if (r == NULL || canonical == NULL || equal_p == NULL)
        return dcr_error_set(DCR_EINVAL, "compare_dense: NULL argument");
    if (!r->prewarmed || r->cfg.shape_only)
        return dcr_error_set(DCR_EINVAL,
                             "compare_dense: the receiver needs data and a successful prewarm");
    if (!r->host)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "compare_dense: resident storage the host cannot address");
    dcr__compare_t c = {.r = r};
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){0});
    dcr_status_t st = DCR_OK;
    for (size_t t = 0; st == DCR_OK && !c.differs && t < dcr_inventory_count(r->inv); t++)
        st = dcr__compare_tensor(&c, t, canonical[t]);
    free(c.kept);
    free(c.row);
    if (st != DCR_OK) return st;
    *equal_p = !c.differs;
    if (c.differs && param_p) *param_p = dcr_params_at(r->params, c.param)->name;
    if (c.differs && elem_p) *elem_p = c.elem;
    return DCR_OK;
}
