/* The "cuda" device: resident storage in the memory of one GPU, staging in
 * page-locked host memory, each stream a CUDA stream, every operation a
 * kernel (or a runtime copy) queued on it.
 *
 * The kernels add only what a CPU cannot run: the launch, the barriers and
 * the warp vote. The per-thread work is in engine/device/kernels-internal.h, which the
 * CPU harness of the tests runs over every (block, thread) of the same
 * launch configuration; keep it that way, so the tests that run without a
 * GPU keep covering these kernels' logic.
 *
 * A runtime error names the call and the operation in one line
 * (DCR_EIO); the caller fails its attempt. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernels-internal.h"
#include "device-internal.h"

/* The public header first (dcr/device.h), then the CUDA stream. */
typedef struct dcr__cuda_stream {
    dcr_device_stream_t base;
    cudaStream_t stream;
} dcr__cuda_stream_t;

static cudaStream_t dcr__stream(dcr_device_stream_t *s)
{
    return ((dcr__cuda_stream_t *)s)->stream;
}

#define DCR__FULL_MASK 0xFFFFFFFFu

/* Turns a runtime error into the one error line, naming the runtime call
 * (the stringified call up to its argument list) and the operation. */
static dcr_status_t dcr__cuda_fail(cudaError_t e, const char *call, const char *op)
{
    return dcr_error_set(DCR_EIO, "device cuda: %.*s in %s failed: %s (%s)",
                         (int)strcspn(call, "("), call, op, cudaGetErrorString(e),
                         cudaGetErrorName(e));
}

#define DCR__CUDA(call, op)                                                                        \
    do {                                                                                           \
        cudaError_t dcr__e = (call);                                                               \
        if (dcr__e != cudaSuccess) return dcr__cuda_fail(dcr__e, #call, (op));                     \
    } while (0)

/* A launch reports configuration errors only through cudaGetLastError. */
#define DCR__LAUNCHED(op) DCR__CUDA(cudaGetLastError(), (op))

/* ---- kernels ---- */

/* Changed elements per block; every warp's vote of every round is kept,
 * so the write kernel never reads the data again. */
__global__ void dcr__k_detect_count(const void *cand, const void *tracker, size_t n, unsigned es,
                                    uint32_t *counts, uint32_t *votes)
{
    __shared__ uint32_t warp_total[DCR_DK_WARPS];
    unsigned t = threadIdx.x, w = t / DCR_DK_WARP, lane = t % DCR_DK_WARP;
    size_t b = blockIdx.x;
    uint32_t mine = 0;
#pragma unroll
    for (unsigned j = 0; j < DCR_DK_ITEMS; j++) {
        uint32_t ballot =
            __ballot_sync(DCR__FULL_MASK, dcr_dk_detect_pred(cand, tracker, n, es, b, j, t));
        if (lane == 0) votes[dcr_dk_vote_slot(b, j, w)] = ballot;
        mine += dcr_dk_warp_count(ballot);
    }
    if (lane == 0) warp_total[w] = mine;
    __syncthreads();
    if (t == 0) {
        unsigned total = 0;
        dcr_dk_warp_offset(warp_total, DCR_DK_WARPS, &total);
        counts[b] = total;
    }
}

/* Exclusive prefix of the block counts and the total, one block. */
__global__ void dcr__k_detect_scan(const uint32_t *counts, uint32_t *offsets, size_t nb,
                                   uint32_t *total)
{
    __shared__ uint32_t partial[DCR_DK_SCAN_THREADS];
    unsigned t = threadIdx.x;
    partial[t] = dcr_dk_scan_partial(counts, nb, t);
    __syncthreads();
    if (t == 0) *total = dcr_dk_scan_partials(partial);
    __syncthreads();
    dcr_dk_scan_write(counts, offsets, nb, t, partial[t]);
}

/* The compacted indices, in increasing order, from the kept votes. */
__global__ void dcr__k_detect_write(const uint32_t *votes, const uint32_t *offsets, uint32_t *idx)
{
    __shared__ uint32_t warp_counts[DCR_DK_WARPS];
    unsigned t = threadIdx.x, w = t / DCR_DK_WARP, lane = t % DCR_DK_WARP;
    size_t b = blockIdx.x, before = 0;
    for (unsigned j = 0; j < DCR_DK_ITEMS; j++) {
        uint32_t ballot = votes[dcr_dk_vote_slot(b, j, w)];
        if (lane == 0) warp_counts[w] = dcr_dk_warp_count(ballot);
        __syncthreads();
        unsigned round_total = 0;
        unsigned woff = dcr_dk_warp_offset(warp_counts, w, &round_total);
        if (dcr_dk_vote_bit(ballot, lane))
            idx[dcr_dk_out_pos(offsets[b], before, woff, ballot, t)] =
                (uint32_t)dcr_dk_detect_elem(b, j, t);
        before += round_total;
        __syncthreads(); /* warp_counts is rewritten next round */
    }
}

__global__ void dcr__k_track(void *tracker, const void *cand, unsigned es, const uint32_t *idx,
                             size_t count)
{
    dcr_dk_track(tracker, cand, es, idx, count, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void dcr__k_gather(void *vals, const void *src, unsigned es, const uint32_t *idx,
                              size_t count)
{
    dcr_dk_gather(vals, src, es, idx, count, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void dcr__k_scatter(void *dst, unsigned es, const int64_t *idx, const void *val,
                               size_t count, int xor_op)
{
    dcr_dk_scatter(dst, es, idx, val, count, xor_op, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void dcr__k_combine(void *dst, const void *src, unsigned es, int dtype,
                               dcr_device_region_t region, const uint8_t *active, int op)
{
    dcr_dk_combine(dst, src, es, dtype, region, active, op,
                   (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void dcr__k_reset(void *scratch, unsigned es, const int64_t *idx, size_t count,
                             uint32_t base_word)
{
    dcr_dk_reset(scratch, es, idx, count, base_word, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

/* Events are rare (a cast that makes or loses a NaN): one atomic each. */
__global__ void dcr__k_convert(void *dst, int to, const void *src, int from,
                               dcr_device_region_t region, const uint8_t *active, int mode,
                               int transform, uint32_t *nan_events)
{
    int ev = dcr_dk_convert(dst, to, src, from, region, active, mode, transform,
                            (size_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (nan_events && ev == DCR_DK_NAN_CREATED) atomicAdd(&nan_events[0], 1u);
    if (nan_events && ev == DCR_DK_NAN_LOST) atomicAdd(&nan_events[1], 1u);
}

__global__ void dcr__k_fill(void *dst, unsigned es, uint32_t word, size_t n)
{
    dcr_dk_fill(dst, es, word, n, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

/* ---- backend ---- */

static int dcr__cuda_count(const dcr_device_ops_t *self)
{
    (void)self;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* "no device" is an answer, not a sticky error */
        return 0;
    }
    return n;
}

/* Every call of a device runs on its GPU; the runtime's current device is
 * per thread, so each entry point sets it. */
#define DCR__ON(d, op) DCR__CUDA(cudaSetDevice((d)->ordinal), (op))

static dcr_status_t dcr__cuda_create(const dcr_device_ops_t *self, int ordinal,
                                     dcr_device_t **out_p)
{
    if (ordinal < 0 || ordinal >= dcr__cuda_count(self))
        return dcr_error_set(DCR_ENOTFOUND, "device cuda: no GPU %d", ordinal);
    DCR__CUDA(cudaSetDevice(ordinal), "open");
    DCR__CUDA(cudaFree(0), "open"); /* creates the context now, not in a timed window */
    dcr_device_t *d = (dcr_device_t *)calloc(1, sizeof(*d));
    if (d == NULL) return dcr_error_set(DCR_ENOMEM, "device cuda: open");
    d->ops = &dcr__device_cuda_ops;
    d->ordinal = ordinal;
    *out_p = d;
    return DCR_OK;
}

static void dcr__cuda_destroy(dcr_device_t *d)
{
    if (cudaSetDevice(d->ordinal) == cudaSuccess) (void)cudaDeviceSynchronize();
    free(d);
}

static dcr_status_t dcr__cuda_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    void *p = NULL;
    DCR__ON(d, "alloc");
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        return dcr_error_set(DCR_ENOMEM, "device cuda: cudaMalloc of %zu bytes: %s", bytes,
                             cudaGetErrorString(e));
    }
    /* Zeroed like the cpu place, so a fresh buffer reads the same on both. */
    e = cudaMemset(p, 0, bytes);
    if (e != cudaSuccess) {
        cudaFree(p);
        return dcr__cuda_fail(e, "cudaMemset", "alloc");
    }
    *out_p = p;
    return DCR_OK;
}

static void dcr__cuda_free(dcr_device_t *d, void *p)
{
    if (cudaSetDevice(d->ordinal) == cudaSuccess) (void)cudaFree(p);
}

static dcr_status_t dcr__cuda_host_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    void *p = NULL;
    DCR__ON(d, "host_alloc");
    cudaError_t e = cudaMallocHost(&p, bytes);
    if (e != cudaSuccess) {
        return dcr_error_set(DCR_ENOMEM, "device cuda: cudaMallocHost of %zu bytes: %s", bytes,
                             cudaGetErrorString(e));
    }
    *out_p = p;
    return DCR_OK;
}

static void dcr__cuda_host_free(dcr_device_t *d, void *p)
{
    (void)d;
    (void)cudaFreeHost(p);
}

static dcr_status_t dcr__cuda_stream_create(dcr_device_t *d, dcr_device_stream_t **out_p)
{
    DCR__ON(d, "stream_create");
    dcr__cuda_stream_t *s = (dcr__cuda_stream_t *)calloc(1, sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "device cuda: stream");
    /* Non-blocking: a receiver's stream must not wait for the legacy default
     * stream that other code (or a library) may use. */
    cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(s);
        return dcr__cuda_fail(e, "cudaStreamCreateWithFlags", "stream_create");
    }
    *out_p = &s->base;
    return DCR_OK;
}

static void dcr__cuda_stream_destroy(dcr_device_t *d, dcr_device_stream_t *s)
{
    if (cudaSetDevice(d->ordinal) == cudaSuccess) {
        (void)cudaStreamSynchronize(dcr__stream(s));
        (void)cudaStreamDestroy(dcr__stream(s));
    }
    free(s);
}

static dcr_status_t dcr__cuda_sync(dcr_device_t *d, dcr_device_stream_t *s)
{
    DCR__ON(d, "sync");
    DCR__CUDA(cudaStreamSynchronize(dcr__stream(s)), "sync");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                   const void *src, size_t bytes, dcr_device_copy_kind_t kind)
{
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    DCR__ON(d, "copy");
    DCR__CUDA(cudaMemcpyAsync(dst, src, bytes, kinds[kind], dcr__stream(s)), "copy");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                   uint32_t word, size_t n)
{
    DCR__ON(d, "fill");
    dcr__k_fill<<<(unsigned)dcr_dk_blocks(n), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(dst, (unsigned)es,
                                                                                 word, n);
    DCR__LAUNCHED("fill");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                                     const void *tracker, size_t n, size_t es, uint32_t *idx,
                                     void *work, size_t *count_p)
{
    size_t nb = dcr_dk_detect_blocks(n);
    /* Workspace layout (dcr_device_detect_workspace): votes, block counts,
     * block offsets, the total. */
    uint32_t *votes = (uint32_t *)work, *counts = votes + dcr_dk_vote_words(n);
    uint32_t *offsets = counts + nb, *total = offsets + nb;
    uint32_t host_total = 0;
    DCR__ON(d, "detect");
    dcr__k_detect_count<<<(unsigned)nb, DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        cand, tracker, n, (unsigned)es, counts, votes);
    DCR__LAUNCHED("detect (count kernel)");
    dcr__k_detect_scan<<<1, DCR_DK_SCAN_THREADS, 0, dcr__stream(s)>>>(counts, offsets, nb, total);
    DCR__LAUNCHED("detect (scan kernel)");
    dcr__k_detect_write<<<(unsigned)nb, DCR_DK_BLOCK, 0, dcr__stream(s)>>>(votes, offsets, idx);
    DCR__LAUNCHED("detect (write kernel)");
    DCR__CUDA(cudaMemcpyAsync(&host_total, total, sizeof host_total, cudaMemcpyDeviceToHost,
                              dcr__stream(s)),
              "detect");
    DCR__CUDA(cudaStreamSynchronize(dcr__stream(s)), "detect");
    *count_p = host_total;
    return DCR_OK;
}

static dcr_status_t dcr__cuda_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                                    const void *cand, size_t es, const uint32_t *idx, size_t count)
{
    DCR__ON(d, "track");
    dcr__k_track<<<(unsigned)dcr_dk_blocks(count), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        tracker, cand, (unsigned)es, idx, count);
    DCR__LAUNCHED("track");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals,
                                     const void *src, size_t es, const uint32_t *idx, size_t count)
{
    DCR__ON(d, "gather");
    dcr__k_gather<<<(unsigned)dcr_dk_blocks(count), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        vals, src, (unsigned)es, idx, count);
    DCR__LAUNCHED("gather");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                      const int64_t *idx, const void *val, size_t count,
                                      dcr_device_op_t op)
{
    DCR__ON(d, "scatter");
    dcr__k_scatter<<<(unsigned)dcr_dk_blocks(count), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        dst, (unsigned)es, idx, val, count, op == DCR_DEVICE_XOR);
    DCR__LAUNCHED("scatter");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                      const void *src, const dcr_device_region_t *region,
                                      const uint8_t *active, dcr_dtype_t dtype, dcr_device_op_t op)
{
    size_t n = (size_t)(region->rows * region->cols);
    DCR__ON(d, "combine");
    dcr__k_combine<<<(unsigned)dcr_dk_blocks(n), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        dst, src, dcr_dk_dtype_size((int)dtype), (int)dtype, *region, active, (int)op);
    DCR__LAUNCHED("combine");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch,
                                    size_t es, const int64_t *idx, size_t count, uint32_t base_word)
{
    DCR__ON(d, "reset");
    dcr__k_reset<<<(unsigned)dcr_dk_blocks(count), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        scratch, (unsigned)es, idx, count, base_word);
    DCR__LAUNCHED("reset");
    return DCR_OK;
}

static dcr_status_t dcr__cuda_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst,
                                      dcr_dtype_t to, const void *src, dcr_dtype_t from,
                                      const dcr_device_region_t *region, const uint8_t *active,
                                      dcr_device_op_t op, int transform, uint32_t *nan_events)
{
    size_t n = (size_t)(region->rows * region->cols);
    DCR__ON(d, "convert");
    dcr__k_convert<<<(unsigned)dcr_dk_blocks(n), DCR_DK_BLOCK, 0, dcr__stream(s)>>>(
        dst, (int)to, src, (int)from, *region, active, (int)op, transform, nan_events);
    DCR__LAUNCHED("convert");
    return DCR_OK;
}

/* Positional, so the table is constant-initialized (no static constructor
 * runs before main): the order is the slots' order in dcr/device.h. */
extern "C" const dcr_device_ops_t dcr__device_cuda_ops = {
    {DCR_DEVICE_OPS_VERSION, "cuda", NULL},
    {/* host_addressable */ false, /* asynchronous */ true, /* pinned_staging */ true},
    dcr__cuda_count,
    dcr__cuda_create,
    dcr__cuda_destroy,
    dcr__cuda_alloc,
    dcr__cuda_free,
    dcr__cuda_host_alloc,
    dcr__cuda_host_free,
    dcr__cuda_stream_create,
    dcr__cuda_stream_destroy,
    dcr__cuda_sync,
    dcr__cuda_copy,
    dcr__cuda_fill,
    dcr__cuda_detect,
    dcr__cuda_track,
    dcr__cuda_gather,
    dcr__cuda_scatter,
    dcr__cuda_combine,
    dcr__cuda_reset,
    dcr__cuda_convert,
};
