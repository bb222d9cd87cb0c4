/* Storage and strided views. Views are plain values; every operation that
 * makes one validates its arguments and leaves *out_p untouched on failure. */
#include "dcr/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-internal.h"

#define DCR__ALIGN 64

dcr_status_t dcr_storage_create(size_t bytes, dcr_storage_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "storage_create: out_p is NULL");
    if (bytes > SIZE_MAX - DCR__ALIGN) {
        return dcr_error_set(DCR_ENOMEM, "storage of %zu bytes is too large", bytes);
    }
    /* aligned_alloc wants a multiple of the alignment, and at least one block
     * so that an empty tensor still has a valid, freeable pointer. */
    size_t rounded = (bytes + DCR__ALIGN - 1) / DCR__ALIGN * DCR__ALIGN;
    if (rounded == 0) rounded = DCR__ALIGN;
    dcr_storage_t *s = malloc(sizeof *s);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "storage handle allocation failed");
    s->data = aligned_alloc(DCR__ALIGN, rounded);
    if (s->data == NULL) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "storage of %zu bytes: allocation failed", bytes);
    }
    memset(s->data, 0, rounded);
    s->bytes = bytes;
    *out_p = s;
    return DCR_OK;
}

void dcr_storage_destroy(dcr_storage_t *storage)
{
    if (storage == NULL) return;
    free(storage->data);
    free(storage);
}

int64_t dcr_shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

int64_t dcr_desc_numel(const dcr_tensor_desc_t *desc)
{
    return dcr_shape_numel(desc->ndim, desc->shape);
}

size_t dcr_desc_bytes(const dcr_tensor_desc_t *desc)
{
    return (size_t)dcr_desc_numel(desc) * dcr_dtype_size(desc->dtype);
}

void dcr_shape_format(int ndim, const int64_t *shape, char *buf, size_t len)
{
    if (buf == NULL || len == 0) return;
    /* Each snprintf terminates what it wrote; stop once the text is cut. */
    size_t pos = 0;
    for (int i = 0; i <= ndim; i++) {
        int n;
        if (i == ndim)
            n = snprintf(buf + pos, len - pos, "%s]", i == 0 ? "[" : "");
        else
            n = snprintf(buf + pos, len - pos, "%s%lld", i == 0 ? "[" : ", ", (long long)shape[i]);
        if (n < 0 || (size_t)n >= len - pos) return;
        pos += (size_t)n;
    }
}

/* Checks a shape the caller hands us: rank in range, no negative extents,
 * element count representable. Returns the count through numel_p. */
static dcr_status_t dcr__shape_check(int ndim, const int64_t *shape, int64_t *numel_p)
{
    if (ndim < 0 || ndim > DCR_MAX_DIMS) {
        return dcr_error_set(DCR_EINVAL, "tensor rank %d is outside [0, %d]", ndim, DCR_MAX_DIMS);
    }
    if (ndim > 0 && shape == NULL) return dcr_error_set(DCR_EINVAL, "shape is NULL");
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            return dcr_error_set(DCR_EINVAL, "shape dim %d is negative (%lld)", i,
                                 (long long)shape[i]);
        }
        if (shape[i] != 0 && n > INT64_MAX / shape[i]) {
            return dcr_error_set(DCR_EINVAL, "shape element count overflows int64");
        }
        n *= shape[i];
    }
    *numel_p = n;
    return DCR_OK;
}

static void dcr__rowmajor_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

dcr_status_t dcr_view_contiguous(dcr_storage_t *storage, dcr_dtype_t dtype, int ndim,
                                 const int64_t *shape, dcr_view_t *out_p)
{
    if (storage == NULL || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "view_contiguous: storage or out_p is NULL");
    }
    if ((unsigned)dtype >= DCR_DTYPE_COUNT) {
        return dcr_error_set(DCR_EINVAL, "view_contiguous: invalid dtype %d", (int)dtype);
    }
    int64_t numel;
    DCR_CHECK(dcr__shape_check(ndim, shape, &numel));
    size_t esize = dcr_dtype_size(dtype);
    if ((uint64_t)numel > storage->bytes / esize) {
        char sbuf[128];
        dcr_shape_format(ndim, shape, sbuf, sizeof sbuf);
        return dcr_error_set(DCR_EINVAL, "%s %s needs %llu bytes but the storage holds %zu",
                             dcr_dtype_name(dtype), sbuf,
                             (unsigned long long)numel * (unsigned long long)esize, storage->bytes);
    }
    dcr_view_t v = {.storage = storage, .dtype = dtype, .offset = 0, .ndim = ndim};
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    dcr__rowmajor_strides(ndim, v.shape, v.strides);
    *out_p = v;
    return DCR_OK;
}

int64_t dcr_view_numel(const dcr_view_t *v)
{
    return dcr_shape_numel(v->ndim, v->shape);
}

bool dcr_view_is_contiguous(const dcr_view_t *v)
{
    /* Dimensions of extent 1 never step, so their stride is irrelevant; an
     * empty view is trivially contiguous. */
    int64_t expect = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] == 0) return true;
        if (v->shape[i] != 1 && v->strides[i] != expect) return false;
        expect *= v->shape[i];
    }
    return true;
}

void *dcr_view_elem(const dcr_view_t *v, const int64_t *index)
{
    int64_t off = v->offset;
    for (int i = 0; i < v->ndim; i++) off += index[i] * v->strides[i];
    return (char *)v->storage->data + off * (int64_t)dcr_dtype_size(v->dtype);
}

void *dcr_view_data(const dcr_view_t *v)
{
    if (v->storage == NULL) return NULL;
    return (char *)v->storage->data + v->offset * (int64_t)dcr_dtype_size(v->dtype);
}

/* Common checks for view operations: a view and an out-parameter exist, and
 * `dim` names one of the view's dimensions. */
static dcr_status_t dcr__view_dim_check(const char *op, const dcr_view_t *v, int dim,
                                        const dcr_view_t *out_p)
{
    if (v == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "%s: NULL argument", op);
    if (v->ndim < 0 || v->ndim > DCR_MAX_DIMS) {
        return dcr_error_set(DCR_EINVAL, "%s: view rank %d is outside [0, %d]", op, v->ndim,
                             DCR_MAX_DIMS);
    }
    if (dim < 0 || dim >= v->ndim) {
        return dcr_error_set(DCR_EINVAL, "%s: dim %d is outside [0, %d) for a rank-%d view", op,
                             dim, v->ndim, v->ndim);
    }
    return DCR_OK;
}

dcr_status_t dcr_view_narrow(const dcr_view_t *v, int dim, int64_t start, int64_t length,
                             dcr_view_t *out_p)
{
    DCR_CHECK(dcr__view_dim_check("narrow", v, dim, out_p));
    int64_t extent = v->shape[dim];
    if (start < 0 || length < 0 || start > extent || length > extent - start) {
        return dcr_error_set(
            DCR_EINVAL, "narrow: range [%lld, %lld + %lld) exceeds dim %d of extent %lld",
            (long long)start, (long long)start, (long long)length, dim, (long long)extent);
    }
    dcr_view_t r = *v;
    r.offset += start * v->strides[dim];
    r.shape[dim] = length;
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_view_select(const dcr_view_t *v, int dim, int64_t index, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__view_dim_check("select", v, dim, out_p));
    if (index < 0 || index >= v->shape[dim]) {
        return dcr_error_set(DCR_EINVAL, "select: index %lld is outside [0, %lld) of dim %d",
                             (long long)index, (long long)v->shape[dim], dim);
    }
    dcr_view_t r = *v;
    r.offset += index * v->strides[dim];
    for (int i = dim; i < v->ndim - 1; i++) {
        r.shape[i] = v->shape[i + 1];
        r.strides[i] = v->strides[i + 1];
    }
    r.ndim = v->ndim - 1;
    r.shape[r.ndim] = 0;
    r.strides[r.ndim] = 0;
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_view_transpose(const dcr_view_t *v, int dim0, int dim1, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__view_dim_check("transpose", v, dim0, out_p));
    DCR_CHECK(dcr__view_dim_check("transpose", v, dim1, out_p));
    dcr_view_t r = *v;
    r.shape[dim0] = v->shape[dim1];
    r.strides[dim0] = v->strides[dim1];
    r.shape[dim1] = v->shape[dim0];
    r.strides[dim1] = v->strides[dim0];
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_view_reshape(const dcr_view_t *v, int ndim, const int64_t *shape,
                              dcr_view_t *out_p)
{
    if (v == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "reshape: NULL argument");
    int64_t numel;
    DCR_CHECK(dcr__shape_check(ndim, shape, &numel));
    if (numel != dcr_view_numel(v) || !dcr_view_is_contiguous(v)) {
        char from[128], to[128];
        dcr_shape_format(v->ndim, v->shape, from, sizeof from);
        dcr_shape_format(ndim, shape, to, sizeof to);
        if (numel != dcr_view_numel(v)) {
            return dcr_error_set(DCR_EINVAL, "reshape: %s and %s have different element counts",
                                 from, to);
        }
        return dcr_error_set(DCR_EINVAL, "reshape: view %s is not contiguous; copy it first", from);
    }
    dcr_view_t r = *v;
    r.ndim = ndim;
    for (int i = 0; i < DCR_MAX_DIMS; i++) r.shape[i] = i < ndim ? shape[i] : 0;
    for (int i = ndim; i < DCR_MAX_DIMS; i++) r.strides[i] = 0;
    dcr__rowmajor_strides(ndim, r.shape, r.strides);
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_view_unsqueeze(const dcr_view_t *v, int dim, dcr_view_t *out_p)
{
    if (v == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "unsqueeze: NULL argument");
    if (v->ndim < 0 || v->ndim >= DCR_MAX_DIMS) {
        return dcr_error_set(DCR_EINVAL, "unsqueeze: a rank-%d view cannot grow past rank %d",
                             v->ndim, DCR_MAX_DIMS);
    }
    if (dim < 0 || dim > v->ndim) {
        return dcr_error_set(DCR_EINVAL, "unsqueeze: dim %d is outside [0, %d]", dim, v->ndim);
    }
    dcr_view_t r = *v;
    for (int i = v->ndim; i > dim; i--) {
        r.shape[i] = v->shape[i - 1];
        r.strides[i] = v->strides[i - 1];
    }
    /* The stride of an extent-1 dimension is never used to step; choosing the
     * row-major value keeps contiguous views recognisably contiguous. */
    r.shape[dim] = 1;
    r.strides[dim] = dim < v->ndim ? v->shape[dim] * v->strides[dim] : 1;
    r.ndim = v->ndim + 1;
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_view_check(const dcr_view_t *v)
{
    if (v == NULL || v->storage == NULL || (unsigned)v->dtype >= DCR_DTYPE_COUNT || v->ndim < 0 ||
        v->ndim > DCR_MAX_DIMS)
        return dcr_error_set(DCR_EINVAL, "malformed view");
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] < 0) return dcr_error_set(DCR_EINVAL, "view with a negative extent");
    if (dcr_view_numel(v) == 0) return DCR_OK;
    int64_t lo = v->offset, hi = v->offset;
    for (int i = 0; i < v->ndim; i++) {
        int64_t span = (v->shape[i] - 1) * v->strides[i];
        if (span < 0)
            lo += span;
        else
            hi += span;
    }
    int64_t limit = (int64_t)(v->storage->bytes / dcr_dtype_size(v->dtype));
    if (lo < 0 || hi >= limit)
        return dcr_error_set(DCR_EINVAL,
                             "view reaches elements [%lld, %lld] of a storage holding %lld",
                             (long long)lo, (long long)hi, (long long)limit);
    return DCR_OK;
}

static dcr_status_t dcr__view_bounds_check(const char *what, const dcr_view_t *v)
{
    dcr_status_t st = dcr_view_check(v);
    if (st != DCR_OK) dcr_error_prefix("view_copy: %s ", what);
    return st;
}

/* Copies one row of n elements between strided positions, converting dtype. */
static void dcr__copy_row(const dcr_view_t *dst, char *d, int64_t dstride, const dcr_view_t *src,
                          const char *s, int64_t sstride, int64_t n)
{
    size_t dsize = dcr_dtype_size(dst->dtype), ssize = dcr_dtype_size(src->dtype);
    if (dstride == 1 && sstride == 1) {
        dcr_convert(d, dst->dtype, s, src->dtype, (size_t)n);
        return;
    }
    int64_t db = dstride * (int64_t)dsize, sb = sstride * (int64_t)ssize;
    if (dst->dtype == src->dtype) {
        for (int64_t i = 0; i < n; i++) memcpy(d + i * db, s + i * sb, dsize);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        dcr__dtype_store_f32bits(dst->dtype, d + i * db,
                                 dcr__dtype_load_f32bits(src->dtype, s + i * sb));
    }
}

dcr_status_t dcr_view_copy(const dcr_view_t *dst, const dcr_view_t *src)
{
    if (dst == NULL || src == NULL) return dcr_error_set(DCR_EINVAL, "view_copy: NULL view");
    DCR_CHECK(dcr__view_bounds_check("destination", dst));
    DCR_CHECK(dcr__view_bounds_check("source", src));
    bool same = dst->ndim == src->ndim;
    for (int i = 0; same && i < dst->ndim; i++) same = dst->shape[i] == src->shape[i];
    if (!same) {
        char a[128], b[128];
        dcr_shape_format(dst->ndim, dst->shape, a, sizeof a);
        dcr_shape_format(src->ndim, src->shape, b, sizeof b);
        return dcr_error_set(DCR_EINVAL, "view_copy: destination %s and source %s differ", a, b);
    }
    int64_t numel = dcr_view_numel(dst);
    if (numel == 0) return DCR_OK;
    if (dcr_view_is_contiguous(dst) && dcr_view_is_contiguous(src)) {
        dcr_convert(dcr_view_data(dst), dst->dtype, dcr_view_data(src), src->dtype, (size_t)numel);
        return DCR_OK;
    }
    /* Walk every row of the innermost dimension with an odometer over the
     * outer ones; a rank-0 view is a single row of one element. */
    int nd = dst->ndim;
    int64_t row = nd > 0 ? dst->shape[nd - 1] : 1;
    int64_t dstep = nd > 0 ? dst->strides[nd - 1] : 1;
    int64_t sstep = nd > 0 ? src->strides[nd - 1] : 1;
    int64_t idx[DCR_MAX_DIMS] = {0};
    for (int64_t done = 0; done < numel; done += row) {
        dcr__copy_row(dst, dcr_view_elem(dst, idx), dstep, src, dcr_view_elem(src, idx), sstep,
                      row);
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < dst->shape[i]) break;
            idx[i] = 0;
        }
    }
    return DCR_OK;
}

void dcr_view_foreach(const dcr_view_t *v, void (*fn)(int64_t i, void *elem, void *ctx), void *ctx)
{
    int64_t numel = dcr_view_numel(v);
    if (numel <= 0) return;
    int64_t idx[DCR_MAX_DIMS] = {0};
    int64_t bytes = (int64_t)dcr_dtype_size(v->dtype);
    char *base = dcr_view_data(v);
    int64_t off = 0; /* element offset of idx relative to base, kept incrementally */
    for (int64_t n = 0; n < numel; n++) {
        fn(n, base + off * bytes, ctx);
        for (int i = v->ndim - 1; i >= 0; i--) {
            if (++idx[i] < v->shape[i]) {
                off += v->strides[i];
                break;
            }
            off -= (v->shape[i] - 1) * v->strides[i];
            idx[i] = 0;
        }
    }
}
