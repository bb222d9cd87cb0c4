/* The "cpu" device: resident storage in host memory, every operation run
 * to completion on the calling thread. Detection is the constructor's SIMD
 * kernel (dcr_detect_changes); the other operations loop over the same
 * per-element functions the CUDA kernels run (dcr/device_kernels.h). */
#include <stdlib.h>
#include <string.h>

#include "dcr/construct.h"
#include "dcr/device_kernels.h"
#include "device-internal.h"

static int dcr__cpu_count(void)
{
    return 1;
}

static dcr_status_t dcr__cpu_open(int ordinal, dcr_device_t **out_p)
{
    if (ordinal != 0) return dcr_error_set(DCR_ENOTFOUND, "device cpu: no device %d", ordinal);
    dcr_device_t *d = calloc(1, sizeof(*d));
    if (d == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: open");
    d->ops = &dcr__device_cpu_ops;
    *out_p = d;
    return DCR_OK;
}

static void dcr__cpu_close(dcr_device_t *d)
{
    free(d);
}

static dcr_status_t dcr__cpu_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    void *p = calloc(1, bytes);
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: alloc of %zu bytes", bytes);
    *out_p = p;
    return DCR_OK;
}

static void dcr__cpu_free(dcr_device_t *d, void *p)
{
    free(p);
}

/* A stream orders nothing here (every operation completes before it
 * returns): it is only the header, so callers hold one handle shape for both
 * places. */
static dcr_status_t dcr__cpu_stream_create(dcr_device_t *d, dcr_device_stream_t **out_p)
{
    dcr_device_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: stream");
    *out_p = s;
    return DCR_OK;
}

static void dcr__cpu_stream_destroy(dcr_device_t *d, dcr_device_stream_t *s)
{
    free(s);
}

static dcr_status_t dcr__cpu_sync(dcr_device_t *d, dcr_device_stream_t *s)
{
    return DCR_OK;
}

static dcr_status_t dcr__cpu_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                  const void *src, size_t bytes, dcr_device_copy_kind_t kind)
{
    memmove(dst, src, bytes);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                  uint32_t word, size_t n)
{
    for (size_t i = 0; i < n; i++) dcr_dk_fill(dst, (unsigned)es, word, n, i);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                                    const void *tracker, size_t n, size_t es, uint32_t *idx,
                                    void *work, size_t *count_p)
{
    *count_p = dcr_detect_changes(cand, tracker, n, es, idx);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                                   const void *cand, size_t es, const uint32_t *idx, size_t count)
{
    for (size_t k = 0; k < count; k++) dcr_dk_track(tracker, cand, (unsigned)es, idx, count, k);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals,
                                    const void *src, size_t es, const uint32_t *idx, size_t count)
{
    for (size_t k = 0; k < count; k++) dcr_dk_gather(vals, src, (unsigned)es, idx, count, k);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                     const int64_t *idx, const void *val, size_t count,
                                     dcr_device_op_t op)
{
    for (size_t k = 0; k < count; k++)
        dcr_dk_scatter(dst, (unsigned)es, idx, val, count, op == DCR_DEVICE_XOR, k);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                     const void *src, const dcr_device_region_t *region,
                                     const uint8_t *active, dcr_dtype_t dtype, dcr_device_op_t op)
{
    unsigned es = dcr_dk_dtype_size((int)dtype);
    size_t n = (size_t)(region->rows * region->cols);
    for (size_t i = 0; i < n; i++)
        dcr_dk_combine(dst, src, es, (int)dtype, *region, active, op == DCR_DEVICE_XOR, i);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch,
                                   size_t es, const int64_t *idx, size_t count, uint32_t base_word)
{
    for (size_t k = 0; k < count; k++)
        dcr_dk_reset(scratch, (unsigned)es, idx, count, base_word, k);
    return DCR_OK;
}

const dcr_device_ops_t dcr__device_cpu_ops = {
    .version = DCR_DEVICE_OPS_VERSION,
    .name = "cpu",
    .props = {.host_addressable = true, .asynchronous = false, .pinned_staging = false},
    .count = dcr__cpu_count,
    .open = dcr__cpu_open,
    .close = dcr__cpu_close,
    .alloc = dcr__cpu_alloc,
    .free = dcr__cpu_free,
    /* Staging and resident memory are the same kind of memory here. */
    .host_alloc = dcr__cpu_alloc,
    .host_free = dcr__cpu_free,
    .stream_create = dcr__cpu_stream_create,
    .stream_destroy = dcr__cpu_stream_destroy,
    .sync = dcr__cpu_sync,
    .copy = dcr__cpu_copy,
    .fill = dcr__cpu_fill,
    .detect = dcr__cpu_detect,
    .track = dcr__cpu_track,
    .gather = dcr__cpu_gather,
    .scatter = dcr__cpu_scatter,
    .combine = dcr__cpu_combine,
    .reset = dcr__cpu_reset,
};
