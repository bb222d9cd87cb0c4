/* Tensor views on a device (engine/device): a copy between two same-shape
 * views of device buffers as the regions of at most two dimensions the
 * device kernels take (engine/device/kernels-internal.h). Extent-1 dimensions are
 * dropped and neighbours merged where both views continue each other, in
 * the views' own order, so the regions visit elements in row-major order
 * over the shape; dimensions beyond two loop on the host, one operation per
 * region. Views' storages hold buffers of the device (data is the device
 * pointer); nothing here dereferences them. Used by the receiver's passes
 * and dense loads and by the load context's new-storage ops on a device. */
#ifndef DCR_DEVICE_VIEWS_H
#define DCR_DEVICE_VIEWS_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/device.h"
#include "dcr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Steps the row-major index idx over shape[0..nd) to the next element, an
 * odometer: the last dimension turns fastest, and each of the n offsets
 * off[j] moves by its own strides[j][d] (elements) as dimension d turns.
 * False once the index wraps past the last element (every offset back at
 * its start); with nd == 0 there is one element and it returns false. */
bool dcr_device_odometer_step(int nd, const int64_t *shape, int64_t *idx, int n, int64_t *off,
                              const int64_t *const *strides);

/* dcr_device_combine over every region of the copy dst <- src (one dtype):
 * dst ^= src (XOR), dst = src (ASSIGN), or dst = src where the element is
 * active (OVERWRITE): mask is a map row-major over dst's shape (a buffer the
 * device reads), act an activity map laid out like src (a view with src's
 * strides), neither: the NaN-placeholder rule. */
dcr_status_t dcr_device_combine_views(dcr_device_t *d, dcr_device_stream_t *s,
                                      const dcr_view_t *dst, const dcr_view_t *src,
                                      const uint8_t *mask, const dcr_view_t *act,
                                      dcr_device_op_t op);

/* dcr_device_convert over every region of the copy dst <- src: transform
 * (DCR_DK_T_*) of src, in dst's dtype from src's, bit for bit like
 * dcr_convert, everywhere (ASSIGN) or where act (laid out like src) is set,
 * or without act where the source is not NaN (OVERWRITE); NaN events added
 * to nan_events (NULL, or a device buffer of two counters). */
dcr_status_t dcr_device_convert_views(dcr_device_t *d, dcr_device_stream_t *s,
                                      const dcr_view_t *dst, const dcr_view_t *src,
                                      const dcr_view_t *act, dcr_device_op_t op, int transform,
                                      uint32_t *nan_events);

#ifdef __cplusplus
}
#endif
#endif
