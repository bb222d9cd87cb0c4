/* Tensors: storage plus strided views, the vocabulary of both sides.
 *
 * A dcr_storage_t owns a byte buffer. A dcr_view_t is a plain value (copy it
 * freely) that names a storage, a dtype, an element offset, a shape and
 * element strides; it never owns the storage, so a view is valid only while
 * its storage lives. View operations (narrow, select, transpose, reshape,
 * unsqueeze) share storage and never copy. */
#ifndef DCR_TENSOR_H
#define DCR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/dtype.h"
#include "dcr/status.h"

#define DCR_MAX_DIMS 6

typedef struct dcr_storage {
    void *data;
    size_t bytes;
} dcr_storage_t;

/* Allocates zeroed storage of `bytes` (64-byte aligned). */
dcr_status_t dcr_storage_create(size_t bytes, dcr_storage_t **out_p);
/* Frees the buffer and the handle; accepts NULL. */
void dcr_storage_destroy(dcr_storage_t *storage);

typedef struct dcr_view {
    dcr_storage_t *storage;
    dcr_dtype_t dtype;
    int64_t offset; /* in elements from storage->data */
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
    int64_t strides[DCR_MAX_DIMS]; /* in elements */
} dcr_view_t;

/* Name, shape and dtype of a tensor without its data (inventories, payload items). */
typedef struct dcr_tensor_desc {
    char *name; /* owned by whoever owns the array of descs */
    dcr_dtype_t dtype;
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
} dcr_tensor_desc_t;

/* Product of the shape; 1 for ndim == 0. */
int64_t dcr_shape_numel(int ndim, const int64_t *shape);
int64_t dcr_desc_numel(const dcr_tensor_desc_t *desc);
size_t dcr_desc_bytes(const dcr_tensor_desc_t *desc);
/* "[151936, 2048]" into buf (always terminated). */
void dcr_shape_format(int ndim, const int64_t *shape, char *buf, size_t len);

/* A contiguous row-major view of the whole storage with the given shape;
 * fails if the storage is smaller than the shape needs. */
dcr_status_t dcr_view_contiguous(dcr_storage_t *storage, dcr_dtype_t dtype, int ndim,
                                 const int64_t *shape, dcr_view_t *out_p);
int64_t dcr_view_numel(const dcr_view_t *v);
bool dcr_view_is_contiguous(const dcr_view_t *v);
/* Address of the element at a multi-index (no bounds check; callers iterate
 * within the shape). */
void *dcr_view_elem(const dcr_view_t *v, const int64_t *index);
/* Address of the first element (offset applied). */
void *dcr_view_data(const dcr_view_t *v);

/* Elements [start, start+length) of dimension dim; same storage. */
dcr_status_t dcr_view_narrow(const dcr_view_t *v, int dim, int64_t start, int64_t length,
                             dcr_view_t *out_p);
/* Index `index` of dimension dim, dropping that dimension; same storage. */
dcr_status_t dcr_view_select(const dcr_view_t *v, int dim, int64_t index, dcr_view_t *out_p);
/* Swaps two dimensions; same storage. */
dcr_status_t dcr_view_transpose(const dcr_view_t *v, int dim0, int dim1, dcr_view_t *out_p);
/* New shape with the same element count; only for contiguous views (same storage). */
dcr_status_t dcr_view_reshape(const dcr_view_t *v, int ndim, const int64_t *shape,
                              dcr_view_t *out_p);
/* Inserts a dimension of size 1 at dim; same storage. */
dcr_status_t dcr_view_unsqueeze(const dcr_view_t *v, int dim, dcr_view_t *out_p);

/* Whether a view is well formed (storage, dtype, ndim, non-negative extents)
 * and every element it can address lies inside its storage. Views from this
 * API always pass; a hand-built one might not, and writing through it must
 * not go out of bounds. DCR_EINVAL with the offending range otherwise
 * (callers prefix their context with dcr_error_prefix). */
dcr_status_t dcr_view_check(const dcr_view_t *v);

/* Copies elements of src into dst (same shape; dtypes may differ, converting
 * with dcr_convert rules). Views may be strided. Not for overlapping views. */
dcr_status_t dcr_view_copy(const dcr_view_t *dst, const dcr_view_t *src);

/* Calls fn(elem_index_flat_in_view, elem_ptr, ctx) for every element in
 * row-major order of the view's shape. */
void dcr_view_foreach(const dcr_view_t *v, void (*fn)(int64_t i, void *elem, void *ctx), void *ctx);

#endif
