/* The "far" device of the tests: the "cpu" backend's slots over host memory
 * whose addresses are moved out of the canonical address range, so that any
 * host read or write of a device buffer (resident storage, scratch, an
 * activity map, uploaded records, a loader temporary, a tracker) faults
 * instead of passing unnoticed; only the table's own slots move them back.
 * It stands in for a device the host cannot address (cuda) on machines
 * without a GPU: props.host_addressable is false, everything else is the
 * cpu backend's. Register it by name with far_device_register() to run
 * code configured by device name (dcr bench, the constructor) on it.
 * Header-only: each test is one translation unit. */
#ifndef DCR_TEST_FAR_DEVICE_H
#define DCR_TEST_FAR_DEVICE_H

#include <stdint.h>

#include "dcr/device.h"
#include "device/device-internal.h"

/* Buffers of the far table are host memory seen at address + FAR_SHIFT. */
#define FAR_SHIFT ((uintptr_t)1 << 62)
#define FAR_NAME  "cpu-far"

static inline void *near_of(const void *p)
{
    return p ? (void *)((uintptr_t)p - FAR_SHIFT) : NULL;
}

static inline void *far_of(void *p)
{
    return (void *)((uintptr_t)p + FAR_SHIFT);
}

static dcr_device_ops_t g_far;

static dcr_status_t far_open(int ordinal, dcr_device_t **out_p)
{
    DCR_CHECK(dcr__device_cpu_ops.open(ordinal, out_p));
    (*out_p)->ops = &g_far;
    return DCR_OK;
}

static dcr_status_t far_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    DCR_CHECK(dcr__device_cpu_ops.alloc(d, bytes, out_p));
    *out_p = far_of(*out_p);
    return DCR_OK;
}

static void far_free(dcr_device_t *d, void *p)
{
    dcr__device_cpu_ops.free(d, near_of(p));
}

static dcr_status_t far_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                             size_t bytes, dcr_device_copy_kind_t kind)
{
    void *to = kind == DCR_DEVICE_D2H ? dst : near_of(dst);
    const void *from = kind == DCR_DEVICE_H2D ? src : near_of(src);
    return dcr__device_cpu_ops.copy(d, s, to, from, bytes, kind);
}

static dcr_status_t far_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                             uint32_t word, size_t n)
{
    return dcr__device_cpu_ops.fill(d, s, near_of(dst), es, word, n);
}

static dcr_status_t far_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                               const void *tracker, size_t n, size_t es, uint32_t *idx, void *work,
                               size_t *count_p)
{
    return dcr__device_cpu_ops.detect(d, s, near_of(cand), near_of(tracker), n, es, near_of(idx),
                                      near_of(work), count_p);
}

static dcr_status_t far_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                              const void *cand, size_t es, const uint32_t *idx, size_t count)
{
    return dcr__device_cpu_ops.track(d, s, near_of(tracker), near_of(cand), es, near_of(idx),
                                     count);
}

static dcr_status_t far_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals, const void *src,
                               size_t es, const uint32_t *idx, size_t count)
{
    return dcr__device_cpu_ops.gather(d, s, near_of(vals), near_of(src), es, near_of(idx), count);
}

static dcr_status_t far_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                const int64_t *idx, const void *val, size_t count,
                                dcr_device_op_t op)
{
    return dcr__device_cpu_ops.scatter(d, s, near_of(dst), es, near_of(idx), near_of(val), count,
                                       op);
}

static dcr_status_t far_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_dtype_t dtype, dcr_device_op_t op)
{
    return dcr__device_cpu_ops.combine(d, s, near_of(dst), near_of(src), region, near_of(active),
                                       dtype, op);
}

static dcr_status_t far_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch, size_t es,
                              const int64_t *idx, size_t count, uint32_t base_word)
{
    return dcr__device_cpu_ops.reset(d, s, near_of(scratch), es, near_of(idx), count, base_word);
}

static dcr_status_t far_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst, dcr_dtype_t to,
                                const void *src, dcr_dtype_t from,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_device_op_t op, int transform, uint32_t *nan_events)
{
    return dcr__device_cpu_ops.convert(d, s, near_of(dst), to, near_of(src), from, region,
                                       near_of(active), op, transform, near_of(nan_events));
}

/* The table (every slot). */
static inline const dcr_device_ops_t *far_table(void)
{
    g_far = dcr__device_cpu_ops;
    g_far.name = FAR_NAME;
    g_far.props.host_addressable = false;
    g_far.open = far_open;
    g_far.alloc = far_alloc;
    g_far.free = far_free;
    g_far.copy = far_copy;
    g_far.fill = far_fill;
    g_far.detect = far_detect;
    g_far.track = far_track;
    g_far.gather = far_gather;
    g_far.scatter = far_scatter;
    g_far.combine = far_combine;
    g_far.reset = far_reset;
    g_far.convert = far_convert;
    return &g_far;
}

/* Makes the far table openable by the name FAR_NAME. */
static inline void far_device_register(void)
{
    dcr__device_register_extra(far_table());
}

#endif
