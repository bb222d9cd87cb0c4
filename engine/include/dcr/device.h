/* Where resident storage lives: host memory or CUDA device memory, behind
 * one interface. Resident parameters, scratch, trackers and residual
 * baselines are buffers of a dcr_device_t; change detection, tracker update
 * and record application run as device operations on a stream, so that the
 * receiver and the constructor can keep one code path for both places.
 *
 * Backends fill a versioned dcr_device_ops_t and are found by name:
 *   "cpu":  buffers are ordinary host memory, operations run synchronously
 *           on the calling thread (detection uses the CPU's SIMD kernel);
 *   "cuda": (only when libdcr was built with CUDA, DCR_HAVE_CUDA) buffers
 *           are device memory of one GPU, staging buffers are page-locked
 *           host memory, each stream is a CUDA stream and operations are
 *           kernels queued on it.
 * "auto" (dcr_device_create only) picks "cuda" when this build has it and
 * cudaGetDeviceCount finds a GPU, else "cpu".
 *
 * Streams: one per receiver (and per owner), so one receiver's host-to-
 * device copies overlap another's kernels. Operations on one stream run in
 * order; a stream is used by one thread at a time. Results an operation
 * writes are readable only after dcr_device_sync on its stream (on "cpu"
 * they already are; callers must not rely on it: props.asynchronous).
 *
 * Callers use only the dcr_device_* wrappers (engine/device/device.c): they
 * validate arguments once for every backend and, while tracing is on and a
 * tool is attached, push an NVTX range in domain "dcr" around each
 * operation, in the engine's message format ("apply receiver=3 refit=7",
 * dcr_trace_format_message) with the stream's actor and id. Detect is
 * compare, gather is project, track is baseline, sync is sync, copies are
 * compare on an owner's stream and apply elsewhere, the rest is apply. So
 * `dcr bounds --nsys` parses a GPU run, Nsight attributes each kernel to
 * the stage that queued it, and the ranges nest inside the engine's own
 * ranges of the same stage (bounds take unions, so they count once). They
 * are NVTX only, never recorded intervals.
 *
 * A failed operation leaves its destination buffer in an unspecified state:
 * the caller fails its attempt and never commits it (DESIGN.md section 5).
 *
 * Not wired yet: engine/device/WIRING.md lists the edits that put the
 * receiver, the constructor and the CLI on this interface. */
#ifndef DCR_DEVICE_H
#define DCR_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "dcr/dtype.h"
#include "dcr/ops.h"
#include "dcr/status.h"
#include "dcr/trace.h"

/* A 2-D strided region of elements, visited row-major over rows x cols;
 * strides count elements (negative ones allowed) from the pointers the
 * operation receives. A contiguous range of n is 1 x n with column strides
 * 1 (dcr_device_region_flat); a loader's copy between views of up to two
 * non-mergeable dimensions is one region. act_row and act_col place an
 * activity map's bytes like the other strides; both 0 (what an initializer
 * that leaves them out gives) means row-major over the region, byte
 * row * cols + col (a mask the host computed). A source stride of 0 reads
 * one word for every element (a constant: fill_ on a device). */
typedef struct dcr_device_region {
    int64_t rows, cols;
    int64_t dst_row, dst_col;
    int64_t src_row, src_col;
    int64_t act_row, act_col;
} dcr_device_region_t;

/* The closed set of elementwise transforms a device's convert runs, in
 * FP32 and bit for bit the same on the host and on a GPU
 * (engine/device/kernels-internal.h); the values of dcr_load_transform_t
 * (dcr/loader.h) are the same. */
typedef enum dcr_device_transform {
    DCR_DEVICE_T_NONE = 0,    /* y = x */
    DCR_DEVICE_T_NEG = 1,     /* y = -x */
    DCR_DEVICE_T_NEG_EXP = 2, /* y = -exp(x) (Mamba's A = -exp(A_log)) */
    DCR_DEVICE_TRANSFORMS = 3
} dcr_device_transform_t;

typedef struct dcr_device dcr_device_t;
typedef struct dcr_device_stream dcr_device_stream_t;

/* Direction of a copy: H = host memory (staging or ordinary), D = a buffer
 * from dcr_device_alloc. */
typedef enum dcr_device_copy_kind {
    DCR_DEVICE_H2D = 0,
    DCR_DEVICE_D2H = 1,
    DCR_DEVICE_D2D = 2,
} dcr_device_copy_kind_t;

/* How records combine with what a position holds. */
typedef enum dcr_device_op {
    DCR_DEVICE_XOR = 0,       /* dst ^= mask */
    DCR_DEVICE_OVERWRITE = 1, /* dst = value */
    DCR_DEVICE_ASSIGN = 2,    /* combine only: dst = src, unconditionally (dense loads) */
} dcr_device_op_t;

/* What a backend guarantees; callers and conformance tests branch on these,
 * never on a backend's name. */
typedef struct dcr_device_props {
    /* Buffers from alloc are ordinary host memory the caller may read and
     * write directly (the "cpu" place). When false, only copies reach them. */
    bool host_addressable;
    /* Operations may return before they complete; results are readable
     * only after dcr_device_sync on the stream. */
    bool asynchronous;
    /* Staging buffers are page-locked, so copies from them run by DMA
     * concurrently with kernels of other streams. */
    bool pinned_staging;
} dcr_device_props_t;

/* The ops table layout this header describes; the registry refuses tables
 * written for another layout. */
#define DCR_DEVICE_OPS_VERSION 3

/* A backend. Slots receive arguments the wrappers validated (non-NULL
 * handles and buffers where a count is > 0, element sizes 1, 2 or 4, counts
 * that fit), write out-parameters only on DCR_OK and report failures with
 * dcr_error_set naming the backend call and the operation. Buffers passed to
 * operations are the backend's (alloc) unless a slot says host memory.
 * create, destroy, alloc, free, host_alloc, host_free, stream_create and
 * stream_destroy may be called from any thread; a stream's operations from
 * one thread at a time. count and create receive the table they were found
 * in as self (a wrapping table finds the one it wraps in self->hdr.parent,
 * dcr/ops.h). */
typedef struct dcr_device_ops {
    dcr_ops_header_t hdr; /* version DCR_DEVICE_OPS_VERSION; a wrapper's parent */
    dcr_device_props_t props;
    /* Devices this backend can open now (0 when none). Never fails, never
     * blocks beyond the driver's first initialization. */
    int (*count)(const struct dcr_device_ops *self);
    /* Opens device `ordinal` (0..count-1). DCR_ENOTFOUND when there is no
     * such device, DCR_EIO when the runtime refuses it, DCR_ENOMEM. The
     * wrapper sets the handle's ops to self afterwards. */
    dcr_status_t (*create)(const struct dcr_device_ops *self, int ordinal, dcr_device_t **out_p);
    /* Waits for all work of the device, frees it. Buffers and streams must
     * have been freed before. Never fails. */
    void (*destroy)(dcr_device_t *d);
    /* A zeroed buffer of bytes (> 0) in the device's memory. DCR_ENOMEM. */
    dcr_status_t (*alloc)(dcr_device_t *d, size_t bytes, void **out_p);
    /* Frees a buffer (NULL: nothing), waiting for the device to finish with
     * it. Never fails. */
    void (*free)(dcr_device_t *d, void *p);
    /* Host memory for staging payload bytes (page-locked when
     * props.pinned_staging). DCR_ENOMEM. */
    dcr_status_t (*host_alloc)(dcr_device_t *d, size_t bytes, void **out_p);
    void (*host_free)(dcr_device_t *d, void *p);
    /* A new stream. DCR_EIO, DCR_ENOMEM. */
    dcr_status_t (*stream_create)(dcr_device_t *d, dcr_device_stream_t **out_p);
    /* Waits for the stream's work and frees it (NULL: nothing). Never fails. */
    void (*stream_destroy)(dcr_device_t *d, dcr_device_stream_t *s);
    /* Blocks until every operation queued on s completed. DCR_EIO names the
     * first failed operation's runtime error. */
    dcr_status_t (*sync)(dcr_device_t *d, dcr_device_stream_t *s);
    /* Copies bytes; host pointers must stay valid (and, for asynchronous
     * backends, unchanged) until the stream is synchronized. */
    dcr_status_t (*copy)(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                         size_t bytes, dcr_device_copy_kind_t kind);
    /* dst[0..n) = word (es-byte elements): scratch base patterns. */
    dcr_status_t (*fill)(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                         uint32_t word, size_t n);
    /* Change detection: writes to idx (a device buffer of n entries) the
     * increasing indices i < n where the stored bits of cand and tracker
     * differ, and their number to *count_p (host memory). work is a device
     * buffer of dcr_device_detect_workspace(n) bytes. Blocks until the count
     * is known; idx is then complete too. */
    dcr_status_t (*detect)(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                           const void *tracker, size_t n, size_t es, uint32_t *idx, void *work,
                           size_t *count_p);
    /* Tracker update at commit: tracker[idx[k]] = cand[idx[k]], k < count. */
    dcr_status_t (*track)(dcr_device_t *d, dcr_device_stream_t *s, void *tracker, const void *cand,
                          size_t es, const uint32_t *idx, size_t count);
    /* The changed elements' words for projection: vals[k] = src[idx[k]],
     * k < count (vals a device buffer; copy it down with copy). */
    dcr_status_t (*gather)(dcr_device_t *d, dcr_device_stream_t *s, void *vals, const void *src,
                           size_t es, const uint32_t *idx, size_t count);
    /* Records into storage or scratch: for k < count, dst[idx[k]] ^= val[k]
     * (XOR) or = val[k] (OVERWRITE). idx entries distinct. */
    dcr_status_t (*scatter)(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                            const int64_t *idx, const void *val, size_t count, dcr_device_op_t op);
    /* Full pass over a region (engine/device/kernels-internal.h): dst ^= src (XOR;
     * active must be NULL), or dst = src where src is not a NaN of dtype
     * (OVERWRITE with the NaN placeholder, active NULL) or where the
     * element's activity byte is set (OVERWRITE in the tracked pass; active
     * is a device buffer placed by the region's act strides, row-major over
     * the region when both are 0), or dst = src everywhere (ASSIGN, active
     * NULL: dense loads and, with source strides 0, fills). region is host
     * memory, read before the call returns. */
    dcr_status_t (*combine)(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                            const dcr_device_region_t *region, const uint8_t *active,
                            dcr_dtype_t dtype, dcr_device_op_t op);
    /* scratch[idx[k]] = base_word for k < count: the touched positions go
     * back to the scratch base pattern. */
    dcr_status_t (*reset)(dcr_device_t *d, dcr_device_stream_t *s, void *scratch, size_t es,
                          const int64_t *idx, size_t count, uint32_t base_word);
    /* A cast or elementwise map over a region (the loader's cast and map,
     * converting copies): dst (dtype to) = transform (dcr_device_transform_t: none, or one of the
     * closed set computed in FP32) of src (dtype from), converted bit for bit like dcr_convert
     * (same dtypes without a transform copy bits). nan_events is NULL or a
     * device buffer of two 32-bit counters the operation adds to: elements
     * that became NaN from a number, and NaNs that became numbers (the
     * NaN-placeholder watch of dcr/loader.h). op ASSIGN writes every
     * element; OVERWRITE (converting copies of the overwrite passes) only
     * where the element's byte of active is set (placed like combine's) or,
     * with active NULL, where the source word is not a NaN of from. region
     * is host memory, read before the call returns. */
    dcr_status_t (*convert)(dcr_device_t *d, dcr_device_stream_t *s, void *dst, dcr_dtype_t to,
                            const void *src, dcr_dtype_t from, const dcr_device_region_t *region,
                            const uint8_t *active, dcr_device_op_t op, int transform,
                            uint32_t *nan_events);
} dcr_device_ops_t;

/* An ordered queue of operations on one device, tagged with the actor it
 * works for (the trace ranges' tag). Every backend's stream starts with this
 * header; the wrapper sets it after the backend's stream_create. */
struct dcr_device_stream {
    dcr_actor_t actor;
    int id;
};

/* Every device starts with this header; create sets it (and the wrapper
 * sets ops to the table it created the device through). */
struct dcr_device {
    const dcr_device_ops_t *ops;
    int ordinal;
};

/* Registry: the backends compiled into libdcr, "cpu" first, then "cuda"
 * when built with CUDA. Conformance tests loop over them. */
size_t dcr_device_backend_count(void);
/* Name of backend i (< count), or NULL. */
const char *dcr_device_backend_name(size_t i);
/* The backend named name ("cpu", "cuda"; not "auto"), or NULL. */
const dcr_device_ops_t *dcr_device_find(const char *name);

/* Whether name is a valid --device value: "cpu", "cuda" or "auto" (even if
 * this build or machine cannot open it: that is dcr_device_create's error). */
bool dcr_device_name_valid(const char *name);

/* Opens device 0 of backend name, or for "auto" the first GPU when this
 * build has CUDA and cudaGetDeviceCount finds one, else "cpu". Errors are
 * one line: DCR_EUNSUPPORTED for "cuda" in a build without CUDA,
 * DCR_ENOTFOUND for "cuda" on a machine without a usable GPU or an unknown
 * name, DCR_EIO when the runtime refuses the device. Close with
 * dcr_device_destroy. */
dcr_status_t dcr_device_create(const char *name, dcr_device_t **out_p);
/* Closes a device (NULL: nothing). */
void dcr_device_destroy(dcr_device_t *d);
/* The backend of an open device (name, properties). */
const dcr_device_ops_t *dcr_device_backend(const dcr_device_t *d);

/* Bytes of workspace dcr_device_detect needs for n elements. */
size_t dcr_device_detect_workspace(size_t n);

/* The contiguous region of n elements. */
static inline dcr_device_region_t dcr_device_region_flat(size_t n)
{
    dcr_device_region_t r = {1, (int64_t)n, (int64_t)n, 1, (int64_t)n, 1, 0, 0};
    return r;
}

/* Wrappers: see the slots above. They return DCR_EINVAL for NULL handles,
 * NULL buffers with a non-zero count, element sizes other than 1, 2, 4, and
 * n above UINT32_MAX for detect (indices are 32-bit, as in chunks), a
 * region with negative extents or an unknown dtype or transform (combine,
 * convert), active with XOR or ASSIGN, XOR passed to convert,
 * or ASSIGN passed to scatter. A zero count returns DCR_OK without calling the backend. free,
 * host_free and stream_destroy accept NULL. */
dcr_status_t dcr_device_alloc(dcr_device_t *d, size_t bytes, void **out_p);
void dcr_device_free(dcr_device_t *d, void *p);
dcr_status_t dcr_device_host_alloc(dcr_device_t *d, size_t bytes, void **out_p);
void dcr_device_host_free(dcr_device_t *d, void *p);
/* A stream for one actor (DCR_ACTOR_RECEIVER / DCR_ACTOR_OWNER and its id):
 * one per receiver and per owner, so their copies and kernels overlap. */
dcr_status_t dcr_device_stream_create(dcr_device_t *d, dcr_actor_t actor, int id,
                                      dcr_device_stream_t **out_p);
void dcr_device_stream_destroy(dcr_device_t *d, dcr_device_stream_t *s);
dcr_status_t dcr_device_sync(dcr_device_t *d, dcr_device_stream_t *s);
dcr_status_t dcr_device_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                             size_t bytes, dcr_device_copy_kind_t kind);
dcr_status_t dcr_device_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                             uint32_t word, size_t n);
dcr_status_t dcr_device_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                               const void *tracker, size_t n, size_t es, uint32_t *idx, void *work,
                               size_t *count_p);
dcr_status_t dcr_device_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                              const void *cand, size_t es, const uint32_t *idx, size_t count);
dcr_status_t dcr_device_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals, const void *src,
                               size_t es, const uint32_t *idx, size_t count);
dcr_status_t dcr_device_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                const int64_t *idx, const void *val, size_t count,
                                dcr_device_op_t op);
/* The host backend's scatter itself, on the calling thread: records [0, n)
 * into host memory dst (record k at element idx[k], its word of es bytes at
 * val + k * es), XORed in (xor_in) or overwriting. A receiver whose memory the host
 * addresses calls it directly for runs of records (no stream, no checks per
 * run: es must be 1, 2 or 4 and every idx inside dst). */
void dcr_device_host_scatter(void *dst, size_t es, const int64_t *idx, const void *val, size_t n,
                             bool xor_in);
dcr_status_t dcr_device_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_dtype_t dtype, dcr_device_op_t op);
dcr_status_t dcr_device_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch, size_t es,
                              const int64_t *idx, size_t count, uint32_t base_word);
dcr_status_t dcr_device_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst, dcr_dtype_t to,
                                const void *src, dcr_dtype_t from,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_device_op_t op, int transform, uint32_t *nan_events);

#ifdef __cplusplus
}
#endif
/* ---- change detection on the host (detect.c) -------------------------------- */

/* Positions k in [0, n) where the elem_size-byte words of a and b differ in
 * any bit, written ascending to out (room for n entries; n < 2^32); returns
 * how many. Compares bit patterns, never values (-0.0 vs +0.0 and NaN
 * payloads count), 32 or 64 bytes per step with no per-element branch, in
 * the widest vector kernel the CPU runs. The inner loop of every construction. */
size_t dcr_detect_changes(const void *a, const void *b, size_t n, size_t elem_size, uint32_t *out);

/* Name of the kernel dcr_detect_changes runs on this CPU ("avx512", "avx2",
 * "sse2" or "scalar"), chosen once at first use; a static string. */
const char *dcr_detect_kernel(void);

#endif
