/* Copies between views as device regions (dcr/device_views.h). */
#include "dcr/device_views.h"

bool dcr_device_odometer_step(int nd, const int64_t *shape, int64_t *idx, int n, int64_t *off,
                              const int64_t *const *strides)
{
    for (int d = nd - 1; d >= 0; d--) {
        for (int j = 0; j < n; j++) off[j] += strides[j][d];
        if (++idx[d] < shape[d]) return true;
        for (int j = 0; j < n; j++) off[j] -= shape[d] * strides[j][d];
        idx[d] = 0;
    }
    return false;
}

/* The copy's dimensions: extent-1 ones dropped, mergeable neighbours
 * merged. */
typedef struct dcr__dims {
    int nd;
    int64_t shape[DCR_MAX_DIMS], dst[DCR_MAX_DIMS], src[DCR_MAX_DIMS];
} dcr__dims_t;

static void dcr__dims_build(const dcr_view_t *dv, const dcr_view_t *sv, dcr__dims_t *m)
{
    m->nd = 0;
    for (int i = 0; i < dv->ndim; i++) {
        if (dv->shape[i] == 1) continue;
        int k = m->nd - 1;
        if (k >= 0 && m->dst[k] == dv->shape[i] * dv->strides[i] &&
            m->src[k] == dv->shape[i] * sv->strides[i]) {
            m->shape[k] *= dv->shape[i];
            m->dst[k] = dv->strides[i];
            m->src[k] = sv->strides[i];
            continue;
        }
        m->shape[++k] = dv->shape[i];
        m->dst[k] = dv->strides[i];
        m->src[k] = sv->strides[i];
        m->nd = k + 1;
    }
}

/* One region's operation: its destination, source and activity pointers
 * (the region's origin) and its index among the copy's regions. */
typedef dcr_status_t (*dcr__region_fn)(const dcr_device_region_t *reg, char *dst, const char *src,
                                       const uint8_t *act, int64_t j, void *arg);

/* Calls fn for every region of the copy dst <- src (act: an activity map
 * placed like src, or NULL). */
static dcr_status_t dcr__regions(const dcr_view_t *dst, const dcr_view_t *src,
                                 const dcr_view_t *act, dcr__region_fn fn, void *arg)
{
    dcr__dims_t m;
    dcr__dims_build(dst, src, &m);
    int64_t des = (int64_t)dcr_dtype_size(dst->dtype), ses = (int64_t)dcr_dtype_size(src->dtype);
    int outer = m.nd > 2 ? m.nd - 2 : 0;
    dcr_device_region_t reg = {1, 1, 0, 1, 0, 1, 0, 0};
    if (m.nd >= 1) {
        reg.cols = m.shape[m.nd - 1];
        reg.dst_col = m.dst[m.nd - 1];
        reg.src_col = m.src[m.nd - 1];
    }
    if (m.nd >= 2) {
        reg.rows = m.shape[m.nd - 2];
        reg.dst_row = m.dst[m.nd - 2];
        reg.src_row = m.src[m.nd - 2];
    }
    if (act) { /* the activity bytes sit where the source words sit */
        reg.act_row = reg.src_row;
        reg.act_col = reg.src_col;
    }
    if (dcr_view_numel(dst) == 0) return DCR_OK;
    char *dbase = (char *)dst->storage->data, *sbase = (char *)src->storage->data;
    const uint8_t *abase = act ? (const uint8_t *)act->storage->data : NULL;
    /* off[2] is the activity map's element: it moves with the source. */
    int64_t idx[DCR_MAX_DIMS] = {0}, off[3] = {dst->offset, src->offset, act ? act->offset : 0};
    const int64_t *strides[3] = {m.dst, m.src, m.src};
    for (int64_t j = 0;; j++) {
        DCR_CHECK(fn(&reg, dbase + off[0] * des, sbase + off[1] * ses,
                     abase ? abase + off[2] : NULL, j, arg));
        if (!dcr_device_odometer_step(outer, m.shape, idx, 3, off, strides)) return DCR_OK;
    }
}

typedef struct dcr__combine_arg {
    dcr_device_t *d;
    dcr_device_stream_t *s;
    const uint8_t *mask;
    dcr_dtype_t dtype;
    dcr_device_op_t op;
} dcr__combine_arg_t;

static dcr_status_t dcr__combine_region(const dcr_device_region_t *reg, char *dst, const char *src,
                                        const uint8_t *act, int64_t j, void *arg)
{
    const dcr__combine_arg_t *c = arg;
    const uint8_t *active = c->mask ? c->mask + j * reg->rows * reg->cols : act;
    return dcr_device_combine(c->d, c->s, dst, src, reg, active, c->dtype, c->op);
}

dcr_status_t dcr_device_combine_views(dcr_device_t *d, dcr_device_stream_t *s,
                                      const dcr_view_t *dst, const dcr_view_t *src,
                                      const uint8_t *mask, const dcr_view_t *act,
                                      dcr_device_op_t op)
{
    dcr__combine_arg_t c = {d, s, mask, dst->dtype, op};
    return dcr__regions(dst, src, act, dcr__combine_region, &c);
}

typedef struct dcr__convert_arg {
    dcr_device_t *d;
    dcr_device_stream_t *s;
    dcr_dtype_t to, from;
    dcr_device_op_t op;
    int transform;
    uint32_t *nan_events;
} dcr__convert_arg_t;

static dcr_status_t dcr__convert_region(const dcr_device_region_t *reg, char *dst, const char *src,
                                        const uint8_t *act, int64_t j, void *arg)
{
    (void)j;
    const dcr__convert_arg_t *c = arg;
    return dcr_device_convert(c->d, c->s, dst, c->to, src, c->from, reg, act, c->op, c->transform,
                              c->nan_events);
}

dcr_status_t dcr_device_convert_views(dcr_device_t *d, dcr_device_stream_t *s,
                                      const dcr_view_t *dst, const dcr_view_t *src,
                                      const dcr_view_t *act, dcr_device_op_t op, int transform,
                                      uint32_t *nan_events)
{
    dcr__convert_arg_t c = {d, s, dst->dtype, src->dtype, op, transform, nan_events};
    return dcr__regions(dst, src, act, dcr__convert_region, &c);
}
