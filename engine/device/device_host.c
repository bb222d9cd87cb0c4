/* The "cpu" device: resident storage in host memory, every operation run
 * to completion on the calling thread. Detection is the constructor's SIMD
 * kernel (dcr_detect_changes); the other operations loop over the same
 * per-element functions the CUDA kernels run (engine/device/kernels-internal.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/device-internal.h"
#include "device/kernels-internal.h"
#include "dcr/storage_large.h"

static int dcr__cpu_count(const dcr_device_ops_t *self)
{
    (void)self;
    return 1;
}

static dcr_status_t dcr__cpu_create(const dcr_device_ops_t *self, int ordinal, dcr_device_t **out_p)
{
    (void)self;
    if (ordinal != 0) return dcr_error_set(DCR_ENOTFOUND, "device cpu: no device %d", ordinal);
    dcr_device_t *d = calloc(1, sizeof(*d));
    if (d == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: open");
    d->ops = &dcr__device_cpu_ops;
    *out_p = d;
    return DCR_OK;
}

static void dcr__cpu_destroy(dcr_device_t *d)
{
    free(d);
}

/* Resident storage, scratch and trackers are large and touched sparsely:
 * a buffer of a large page or more starts on a large page and is advised
 * for huge pages, like the receiver's scratch before the device module (one
 * TLB entry per 2 MiB keeps scattered records from missing the TLB). Its
 * size is not rounded up: the tail stays in ordinary pages rather than
 * costing up to a large page per buffer (thousands of trackers). */
static dcr_status_t dcr__cpu_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    void *p = NULL;
    if (bytes < DCR_LARGE_PAGE) {
        if (posix_memalign(&p, 64, bytes) != 0) p = NULL;
    } else if (posix_memalign(&p, DCR_LARGE_PAGE, bytes) != 0) {
        p = NULL;
    }
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: alloc of %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    /* Before the first touch, so that the zeroing faults in huge pages; a
     * refusal (no THP support) leaves ordinary pages. */
    if (bytes >= DCR_LARGE_PAGE) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);
    *out_p = p;
    return DCR_OK;
}

/* Staging holds payload bytes on their way up: ordinary memory. */
static dcr_status_t dcr__cpu_host_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    void *p = calloc(1, bytes);
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "device cpu: host_alloc of %zu bytes", bytes);
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
    /* Whole-scratch refills: let memset take the byte case. */
    if (es == 1) {
        memset(dst, (int)(uint8_t)word, n);
        return DCR_OK;
    }
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

/* One loop per word size and operation, prefetching the destination AHEAD
 * records ahead (the first AHEAD of them before the loop starts): records
 * land irregularly in large tensors, at low rates on distinct cache lines
 * far apart, and the receiver's sparse apply depends on the prefetch. */
enum { DCR__AHEAD = 32 };

#define DCR__SCATTER(T, XOR)                                                                       \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const uint8_t *v = val;                                                                    \
        size_t k = 0, pre = n < DCR__AHEAD ? n : DCR__AHEAD;                                       \
        for (; k < pre; k++) __builtin_prefetch(d + idx[k], 1);                                    \
        for (k = 0; k < n; k++) {                                                                  \
            if (k + DCR__AHEAD < n) __builtin_prefetch(d + idx[k + DCR__AHEAD], 1);                \
            T w;                                                                                   \
            memcpy(&w, v + k * sizeof(T), sizeof(T));                                              \
            d[idx[k]] = XOR ? (T)(d[idx[k]] ^ w) : w;                                              \
        }                                                                                          \
    } while (0)

void dcr_device_host_scatter(void *dst, size_t es, const int64_t *idx, const void *val, size_t n,
                             bool xor)
{
    if (es == 2 && xor)
        DCR__SCATTER(uint16_t, 1);
    else if (es == 2)
        DCR__SCATTER(uint16_t, 0);
    else if (es == 4 && xor)
        DCR__SCATTER(uint32_t, 1);
    else if (es == 4)
        DCR__SCATTER(uint32_t, 0);
    else if (xor)
        DCR__SCATTER(uint8_t, 1);
    else
        DCR__SCATTER(uint8_t, 0);
}

static dcr_status_t dcr__cpu_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                     const int64_t *idx, const void *val, size_t count,
                                     dcr_device_op_t op)
{
    dcr_device_host_scatter(dst, es, idx, val, count, op == DCR_DEVICE_XOR);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                     const void *src, const dcr_device_region_t *region,
                                     const uint8_t *active, dcr_dtype_t dtype, dcr_device_op_t op)
{
    /* Row by row rather than per element (the kernel's row/column division
     * per element would cost more than the work); the contiguous XOR rows of
     * 16- and 32-bit words get loops the compiler vectorises. */
    unsigned es = dcr_dk_dtype_size((int)dtype);
    dcr_device_region_t r = *region;
    bool xor = op == DCR_DEVICE_XOR, unit = r.dst_col == 1 && r.src_col == 1;
    bool act_rowmajor = r.act_row == 0 && r.act_col == 0;
    for (int64_t row = 0; row < r.rows; row++) {
        size_t i0 = (size_t)(row * r.cols);
        if (xor&&unit && es == 2) {
            uint16_t *dp = (uint16_t *)dst + row * r.dst_row;
            const uint16_t *sp = (const uint16_t *)src + row * r.src_row;
            for (int64_t j = 0; j < r.cols; j++) dp[j] ^= sp[j];
        } else if (xor&&unit && es == 4) {
            uint32_t *dp = (uint32_t *)dst + row * r.dst_row;
            const uint32_t *sp = (const uint32_t *)src + row * r.src_row;
            for (int64_t j = 0; j < r.cols; j++) dp[j] ^= sp[j];
        } else {
            /* dcr_dk_combine's rule, its row and column known. */
            const uint8_t *act = !active        ? NULL
                                 : act_rowmajor ? active + i0
                                                : active + row * r.act_row;
            int64_t act_step = act_rowmajor ? 1 : r.act_col;
            for (int64_t j = 0; j < r.cols; j++)
                dcr_dk_combine_at(dst, row * r.dst_row + j * r.dst_col, src,
                                  row * r.src_row + j * r.src_col, es, (int)dtype,
                                  act ? act + j * act_step : NULL, (int)op);
        }
    }
    return DCR_OK;
}

static dcr_status_t dcr__cpu_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch,
                                   size_t es, const int64_t *idx, size_t count, uint32_t base_word)
{
    for (size_t k = 0; k < count; k++)
        dcr_dk_reset(scratch, (unsigned)es, idx, count, base_word, k);
    return DCR_OK;
}

static dcr_status_t dcr__cpu_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                     dcr_dtype_t to, const void *src, dcr_dtype_t from,
                                     const dcr_device_region_t *region, const uint8_t *active,
                                     dcr_device_op_t op, int transform, uint32_t *nan_events)
{
    /* The kernel's per-element work; casts are loader temporaries, not the
     * refit's hot path, so no row specialisation. */
    size_t n = (size_t)(region->rows * region->cols);
    uint32_t created = 0, lost = 0;
    for (size_t i = 0; i < n; i++) {
        int ev =
            dcr_dk_convert(dst, (int)to, src, (int)from, *region, active, (int)op, transform, i);
        created += ev == DCR_DK_NAN_CREATED;
        lost += ev == DCR_DK_NAN_LOST;
    }
    if (nan_events) {
        nan_events[0] += created;
        nan_events[1] += lost;
    }
    return DCR_OK;
}

const dcr_device_ops_t dcr__device_cpu_ops = {
    .hdr = {.version = DCR_DEVICE_OPS_VERSION, .name = "cpu"},
    .props = {.host_addressable = true, .asynchronous = false, .pinned_staging = false},
    .count = dcr__cpu_count,
    .create = dcr__cpu_create,
    .destroy = dcr__cpu_destroy,
    .alloc = dcr__cpu_alloc,
    .free = dcr__cpu_free,
    .host_alloc = dcr__cpu_host_alloc,
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
    .convert = dcr__cpu_convert,
};
