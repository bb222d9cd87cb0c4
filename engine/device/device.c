/* The device registry and wrappers. Every device operation of the engine
 * passes one wrapper here: it validates arguments once for all backends (so
 * a slot can trust them) and pushes an NVTX range (domain "dcr") around the
 * operation, so an Nsight Systems trace of a GPU run shows each device stage
 * next to the engine's own stage ranges. */
#include <stdio.h>
#include <string.h>

#include "device/kernels-internal.h"
#include "dcr/trace.h"
#include "device-internal.h"

_Static_assert(DCR_DEVICE_T_NONE == DCR_DK_T_NONE && DCR_DEVICE_T_NEG == DCR_DK_T_NEG &&
                   DCR_DEVICE_T_NEG_EXP == DCR_DK_T_NEG_EXP &&
                   DCR_DEVICE_TRANSFORMS == DCR_DK_TRANSFORMS,
               "the public transform codes are the kernels'");

/* Adding a backend is one line here (and one in device-internal.h). */
static const dcr_device_ops_t *const dcr__device_backends[] = {
    &dcr__device_cpu_ops,
#ifdef DCR_HAVE_CUDA
    &dcr__device_cuda_ops,
#endif
};
#define DCR__N_DEVICE_BACKENDS (sizeof dcr__device_backends / sizeof dcr__device_backends[0])

size_t dcr_device_backend_count(void)
{
    return DCR__N_DEVICE_BACKENDS;
}

const char *dcr_device_backend_name(size_t i)
{
    return i < DCR__N_DEVICE_BACKENDS ? dcr__device_backends[i]->hdr.name : NULL;
}

/* A test's extra backend (dcr__device_register_extra), or NULL. */
static const dcr_device_ops_t *dcr__device_extra;

void dcr__device_register_extra(const dcr_device_ops_t *ops)
{
    dcr__device_extra = ops;
}

const dcr_device_ops_t *dcr_device_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < DCR__N_DEVICE_BACKENDS; i++)
        if (strcmp(dcr__device_backends[i]->hdr.name, name) == 0) return dcr__device_backends[i];
    if (name && dcr__device_extra && strcmp(dcr__device_extra->hdr.name, name) == 0)
        return dcr__device_extra;
    return NULL;
}

/* Device 0 of ops, its header's ops set to the table it was created
 * through. */
static dcr_status_t dcr__device_create_with(const dcr_device_ops_t *ops, dcr_device_t **out_p)
{
    dcr_device_t *d = NULL;
    DCR_CHECK(ops->create(ops, 0, &d));
    d->ops = ops;
    *out_p = d;
    return DCR_OK;
}

bool dcr_device_name_valid(const char *name)
{
    return name != NULL &&
           (strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0 || strcmp(name, "auto") == 0);
}

dcr_status_t dcr_device_create(const char *name, dcr_device_t **out_p)
{
    if (name == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "device_create: name and out_p are required");
    const dcr_device_ops_t *ops = NULL;
    if (dcr__device_extra && strcmp(dcr__device_extra->hdr.name, name) == 0)
        return dcr__device_create_with(dcr__device_extra, out_p);
    if (!dcr_device_name_valid(name))
        return dcr_error_set(DCR_ENOTFOUND,
                             "--device %s: unknown device, expected cpu, cuda or auto", name);
    if (strcmp(name, "auto") == 0) {
        const dcr_device_ops_t *cuda = dcr_device_find("cuda");
        ops = cuda && cuda->count(cuda) > 0 ? cuda : dcr_device_find("cpu");
    } else {
        ops = dcr_device_find(name);
        if (ops == NULL)
            return dcr_error_set(DCR_EUNSUPPORTED,
                                 "--device %s: this build has no CUDA support (CMake found no "
                                 "nvcc, or DCR_WITH_CUDA=OFF)",
                                 name);
        if (ops->count(ops) <= 0)
            return dcr_error_set(DCR_ENOTFOUND,
                                 "--device %s: no usable GPU on this machine (cudaGetDeviceCount "
                                 "found none)",
                                 name);
    }
    if (ops->hdr.version != DCR_DEVICE_OPS_VERSION)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "device backend '%s' has ops version %u, expected %d", ops->hdr.name,
                             ops->hdr.version, DCR_DEVICE_OPS_VERSION);
    return dcr__device_create_with(ops, out_p);
}

void dcr_device_destroy(dcr_device_t *d)
{
    if (d) d->ops->destroy(d);
}

const dcr_device_ops_t *dcr_device_backend(const dcr_device_t *d)
{
    return d->ops;
}

size_t dcr_device_detect_workspace(size_t n)
{
    /* Kept warp votes, block counts, block offsets, the total (see
     * dcr__cuda_detect). */
    return (dcr_dk_vote_words(n) + 2 * dcr_dk_detect_blocks(n) + 1) * sizeof(uint32_t);
}

/* ---- NVTX ---- */

/* Runs one backend call inside the stage's NVTX range (domain "dcr", pushed
 * by engine/trace only while tracing is on). The span is cancelled, not
 * ended: the device operation's caller records the stage's interval, so the
 * range adds none of its own. */
#define DCR__DEVICE_RANGE(s, stage, call)                                                          \
    do {                                                                                           \
        dcr_trace_span_t dcr__span = dcr_trace_begin((stage), (s)->actor, (s)->id);                \
        dcr_status_t dcr__rst = (call);                                                            \
        dcr_trace_cancel(&dcr__span);                                                              \
        return dcr__rst;                                                                           \
    } while (0)

/* ---- validation ---- */

static dcr_status_t dcr__need(const dcr_device_t *d, const char *op, bool ok, const char *what)
{
    if (d == NULL) return dcr_error_set(DCR_EINVAL, "device %s: no device", op);
    if (!ok) return dcr_error_set(DCR_EINVAL, "device %s (%s): %s", op, d->ops->hdr.name, what);
    return DCR_OK;
}

static bool dcr__es_ok(size_t es)
{
    return es == 1 || es == 2 || es == 4;
}

/* ---- wrappers ---- */

dcr_status_t dcr_device_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    DCR_CHECK(dcr__need(d, "alloc", out_p != NULL && bytes > 0, "bytes > 0 and out_p required"));
    return d->ops->alloc(d, bytes, out_p);
}

void dcr_device_free(dcr_device_t *d, void *p)
{
    if (d && p) d->ops->free(d, p);
}

dcr_status_t dcr_device_host_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    DCR_CHECK(
        dcr__need(d, "host_alloc", out_p != NULL && bytes > 0, "bytes > 0 and out_p required"));
    return d->ops->host_alloc(d, bytes, out_p);
}

void dcr_device_host_free(dcr_device_t *d, void *p)
{
    if (d && p) d->ops->host_free(d, p);
}

dcr_status_t dcr_device_stream_create(dcr_device_t *d, dcr_actor_t actor, int id,
                                      dcr_device_stream_t **out_p)
{
    DCR_CHECK(dcr__need(d, "stream_create", out_p != NULL && (unsigned)actor < DCR_ACTOR_COUNT,
                        "out_p and a known actor required"));
    dcr_device_stream_t *s = NULL;
    DCR_CHECK(d->ops->stream_create(d, &s));
    s->actor = actor;
    s->id = id;
    *out_p = s;
    return DCR_OK;
}

void dcr_device_stream_destroy(dcr_device_t *d, dcr_device_stream_t *s)
{
    if (d && s) d->ops->stream_destroy(d, s);
}

dcr_status_t dcr_device_sync(dcr_device_t *d, dcr_device_stream_t *s)
{
    DCR_CHECK(dcr__need(d, "sync", s != NULL, "a stream is required"));
    DCR__DEVICE_RANGE(s, DCR_STAGE_SYNC, d->ops->sync(d, s));
}

dcr_status_t dcr_device_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                             size_t bytes, dcr_device_copy_kind_t kind)
{
    DCR_CHECK(dcr__need(d, "copy", s != NULL && (bytes == 0 || (dst && src)),
                        "a stream, and buffers for a non-empty copy"));
    DCR_CHECK(dcr__need(d, "copy", kind >= DCR_DEVICE_H2D && kind <= DCR_DEVICE_D2D,
                        "kind H2D, D2H or D2D"));
    if (bytes == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, s->actor == DCR_ACTOR_OWNER ? DCR_STAGE_COMPARE : DCR_STAGE_APPLY,
                      d->ops->copy(d, s, dst, src, bytes, kind));
}

dcr_status_t dcr_device_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                             uint32_t word, size_t n)
{
    DCR_CHECK(dcr__need(d, "fill", s != NULL && (n == 0 || dst) && dcr__es_ok(es),
                        "a stream, a buffer and element size 1, 2 or 4"));
    if (n == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, DCR_STAGE_APPLY, d->ops->fill(d, s, dst, es, word, n));
}

dcr_status_t dcr_device_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                               const void *tracker, size_t n, size_t es, uint32_t *idx, void *work,
                               size_t *count_p)
{
    DCR_CHECK(dcr__need(d, "detect",
                        s != NULL && count_p != NULL && dcr__es_ok(es) &&
                            (n == 0 || (cand && tracker && idx && work)),
                        "a stream, count_p, element size 1, 2 or 4, and buffers"));
    DCR_CHECK(dcr__need(d, "detect", n <= UINT32_MAX, "at most 2^32-1 elements per chunk"));
    if (n == 0) {
        *count_p = 0;
        return DCR_OK;
    }
    DCR__DEVICE_RANGE(s, DCR_STAGE_COMPARE,
                      d->ops->detect(d, s, cand, tracker, n, es, idx, work, count_p));
}

dcr_status_t dcr_device_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                              const void *cand, size_t es, const uint32_t *idx, size_t count)
{
    DCR_CHECK(dcr__need(d, "track",
                        s != NULL && dcr__es_ok(es) && (count == 0 || (tracker && cand && idx)),
                        "a stream, element size 1, 2 or 4, and buffers"));
    if (count == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, DCR_STAGE_BASELINE, d->ops->track(d, s, tracker, cand, es, idx, count));
}

dcr_status_t dcr_device_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals, const void *src,
                               size_t es, const uint32_t *idx, size_t count)
{
    DCR_CHECK(dcr__need(d, "gather",
                        s != NULL && dcr__es_ok(es) && (count == 0 || (vals && src && idx)),
                        "a stream, element size 1, 2 or 4, and buffers"));
    if (count == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, DCR_STAGE_PROJECT, d->ops->gather(d, s, vals, src, es, idx, count));
}

dcr_status_t dcr_device_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                const int64_t *idx, const void *val, size_t count,
                                dcr_device_op_t op)
{
    DCR_CHECK(dcr__need(d, "scatter",
                        s != NULL && dcr__es_ok(es) && (count == 0 || (dst && idx && val)) &&
                            (op == DCR_DEVICE_XOR || op == DCR_DEVICE_OVERWRITE),
                        "a stream, element size 1, 2 or 4, buffers and op XOR or OVERWRITE"));
    if (count == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, DCR_STAGE_APPLY, d->ops->scatter(d, s, dst, es, idx, val, count, op));
}

dcr_status_t dcr_device_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_dtype_t dtype, dcr_device_op_t op)
{
    DCR_CHECK(dcr__need(
        d, "combine",
        s != NULL && region != NULL && (unsigned)dtype < DCR_DTYPE_COUNT &&
            (op == DCR_DEVICE_XOR || op == DCR_DEVICE_OVERWRITE || op == DCR_DEVICE_ASSIGN),
        "a stream, a region, a known dtype and op XOR, OVERWRITE or ASSIGN"));
    DCR_CHECK(dcr__need(d, "combine", region->rows >= 0 && region->cols >= 0,
                        "a region of non-negative extents"));
    DCR_CHECK(dcr__need(d, "combine", op == DCR_DEVICE_OVERWRITE || active == NULL,
                        "no activity map with XOR or ASSIGN"));
    if (region->rows == 0 || region->cols == 0) return DCR_OK;
    DCR_CHECK(dcr__need(d, "combine", dst && src, "buffers for a non-empty region"));
    DCR__DEVICE_RANGE(s, DCR_STAGE_APPLY,
                      d->ops->combine(d, s, dst, src, region, active, dtype, op));
}

dcr_status_t dcr_device_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch, size_t es,
                              const int64_t *idx, size_t count, uint32_t base_word)
{
    DCR_CHECK(dcr__need(d, "reset", s != NULL && dcr__es_ok(es) && (count == 0 || (scratch && idx)),
                        "a stream, element size 1, 2 or 4, and buffers"));
    if (count == 0) return DCR_OK;
    DCR__DEVICE_RANGE(s, DCR_STAGE_APPLY, d->ops->reset(d, s, scratch, es, idx, count, base_word));
}

dcr_status_t dcr_device_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst, dcr_dtype_t to,
                                const void *src, dcr_dtype_t from,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_device_op_t op, int transform, uint32_t *nan_events)
{
    DCR_CHECK(dcr__need(d, "convert",
                        s != NULL && region != NULL && (unsigned)to < DCR_DTYPE_COUNT &&
                            (unsigned)from < DCR_DTYPE_COUNT &&
                            (unsigned)transform < DCR_DK_TRANSFORMS,
                        "a stream, a region, known dtypes and a known transform"));
    DCR_CHECK(dcr__need(d, "convert", op == DCR_DEVICE_ASSIGN || op == DCR_DEVICE_OVERWRITE,
                        "op ASSIGN or OVERWRITE"));
    DCR_CHECK(dcr__need(d, "convert", op == DCR_DEVICE_OVERWRITE || active == NULL,
                        "no activity map with ASSIGN"));
    DCR_CHECK(dcr__need(d, "convert", region->rows >= 0 && region->cols >= 0,
                        "a region of non-negative extents"));
    if (region->rows == 0 || region->cols == 0) return DCR_OK;
    DCR_CHECK(dcr__need(d, "convert", dst && src, "buffers for a non-empty region"));
    DCR__DEVICE_RANGE(
        s, DCR_STAGE_APPLY,
        d->ops->convert(d, s, dst, to, src, from, region, active, op, transform, nan_events));
}
