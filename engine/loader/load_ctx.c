/* The load context: the only way a loader touches data. It checks every
 * operation, keeps the provenance of every storage a loader can reach (the
 * input, its own temporaries, resident parameters), optionally carries an
 * activity map alongside the values, and routes every final write through
 * the hook table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernels-internal.h"
#include "dcr/device_views.h"
#include "loader-internal.h"

typedef struct dcr__temp {
    dcr_storage_t *storage; /* values; data NULL in probe mode */
    dcr_storage_t *active;  /* tracked mode: one byte per element; else NULL */
    dcr_load_origin_t origin;
    bool on_device; /* storage and active hold buffers of the context's device */
    char op[64];
} dcr__temp_t;

struct dcr_load_ctx {
    dcr_params_t *params;
    const dcr_load_hooks_t *hooks;
    void *hook_arg;
    dcr_load_mode_t mode;
    /* Device mode: where cast, cat and map_op run, and the NaN watch's two
     * counters there (created, lost; allocated at the first watched op). */
    dcr_device_t *dev;
    dcr_device_stream_t *stream;
    uint32_t *nan_dev;
    bool nan_pending;        /* a watched op ran on the device in this call */
    dcr_view_t input_active; /* tracked mode, set by the caller for the next call */
    bool has_input_active;
    /* Per call. */
    bool in_call;
    const char *name;
    dcr_view_t input;
    dcr__temp_t **temps; /* individually allocated: origins point into them */
    size_t ntemps, captemps;
    size_t copies, fills;
    bool skipped;
    const char *skip_reason;
    int64_t nan_created, nan_lost;
};

/* ---- element helpers ---- */

static float dcr__load_f32(dcr_dtype_t dtype, const void *elem)
{
    float f;
    dcr_convert(&f, DCR_DTYPE_FP32, elem, dtype, 1);
    return f;
}

/* ---- lifecycle ---- */

dcr_status_t dcr_load_ctx_create(dcr_params_t *params, dcr_load_ctx_t **out_p)
{
    if (params == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "load_ctx_create: NULL argument");
    dcr_load_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) return dcr_error_set(DCR_ENOMEM, "load context: allocation failed");
    ctx->params = params;
    ctx->hooks = &dcr_load_hooks_plain;
    ctx->name = "";
    *out_p = ctx;
    return DCR_OK;
}

/* A storage handle (data NULL for none). */
static void dcr__handle_free(dcr_load_ctx_t *ctx, dcr_storage_t *s, bool on_device)
{
    if (s == NULL) return;
    if (!on_device) {
        dcr_storage_destroy(s);
        return;
    }
    dcr_device_free(ctx->dev, s->data);
    free(s);
}

static void dcr__temps_free(dcr_load_ctx_t *ctx)
{
    for (size_t i = 0; i < ctx->ntemps; i++) {
        dcr__temp_t *t = ctx->temps[i];
        if (t->on_device) {
            dcr__handle_free(ctx, t->storage, true);
            dcr__handle_free(ctx, t->active, true);
        } else {
            /* A probe's temporary is a bare handle without data. */
            if (t->storage && t->storage->data == NULL)
                free(t->storage);
            else
                dcr_storage_destroy(t->storage);
            dcr_storage_destroy(t->active);
        }
        free(t);
    }
    ctx->ntemps = 0;
}

void dcr_load_ctx_destroy(dcr_load_ctx_t *ctx)
{
    if (ctx == NULL) return;
    dcr__temps_free(ctx);
    free(ctx->temps);
    dcr_device_free(ctx->dev, ctx->nan_dev);
    free(ctx);
}

void dcr_load_ctx_set_hooks(dcr_load_ctx_t *ctx, const dcr_load_hooks_t *hooks, void *arg)
{
    ctx->hooks = hooks ? hooks : &dcr_load_hooks_plain;
    ctx->hook_arg = arg;
}

void dcr_load_ctx_set_mode(dcr_load_ctx_t *ctx, dcr_load_mode_t mode)
{
    ctx->mode = mode;
}

void dcr_load_ctx_set_device(dcr_load_ctx_t *ctx, dcr_device_t *dev, dcr_device_stream_t *stream)
{
    if (ctx->dev != dev) {
        dcr_device_free(ctx->dev, ctx->nan_dev);
        ctx->nan_dev = NULL;
    }
    ctx->dev = dev;
    ctx->stream = stream;
}

void dcr_load_ctx_set_input_active(dcr_load_ctx_t *ctx, const dcr_view_t *active)
{
    ctx->has_input_active = active != NULL;
    if (active) ctx->input_active = *active;
}

dcr_status_t dcr__load_ctx_begin(dcr_load_ctx_t *ctx, const dcr_params_t *params, const char *name,
                                 const dcr_view_t *tensor)
{
    if (ctx->params != params)
        return dcr_error_set(DCR_EINVAL, "load %s: context writes into another loader's params",
                             name);
    if (ctx->in_call) return dcr_error_set(DCR_EINVAL, "load %s: context already in a call", name);
    if (ctx->mode.track && ctx->has_input_active &&
        (ctx->input_active.ndim != tensor->ndim || !dcr_view_is_contiguous(&ctx->input_active) ||
         !dcr_view_is_contiguous(tensor)))
        return dcr_error_set(DCR_EINVAL,
                             "load %s: tracked input and activity map must be "
                             "contiguous views of one shape",
                             name);
    ctx->in_call = true;
    ctx->name = name;
    ctx->input = *tensor;
    ctx->copies = ctx->fills = 0;
    ctx->skipped = false;
    ctx->skip_reason = "";
    ctx->nan_created = ctx->nan_lost = 0;
    return DCR_OK;
}

/* The device's work of the call done, and its NaN events counted: the
 * counters come down and go back to zero for the next call. */
static dcr_status_t dcr__device_settle(dcr_load_ctx_t *ctx)
{
    if (ctx->dev == NULL || ctx->ntemps == 0) return DCR_OK;
    uint32_t events[2] = {0, 0};
    if (ctx->nan_pending)
        DCR_CHECK(dcr_device_copy(ctx->dev, ctx->stream, events, ctx->nan_dev, sizeof events,
                                  DCR_DEVICE_D2H));
    DCR_CHECK(dcr_device_sync(ctx->dev, ctx->stream));
    if (!ctx->nan_pending) return DCR_OK;
    ctx->nan_created += events[0];
    ctx->nan_lost += events[1];
    ctx->nan_pending = false;
    return dcr_device_fill(ctx->dev, ctx->stream, ctx->nan_dev, 4, 0, 2);
}

dcr_status_t dcr__load_ctx_end(dcr_load_ctx_t *ctx)
{
    dcr_status_t st = dcr__device_settle(ctx);
    dcr__temps_free(ctx);
    ctx->nan_pending = false;
    ctx->in_call = false;
    ctx->has_input_active = false;
    return st;
}

const char *dcr_load_ctx_name(const dcr_load_ctx_t *ctx)
{
    return ctx->in_call ? ctx->name : "";
}

size_t dcr_load_ctx_copies(const dcr_load_ctx_t *ctx)
{
    return ctx->copies;
}

size_t dcr_load_ctx_fills(const dcr_load_ctx_t *ctx)
{
    return ctx->fills;
}

bool dcr_load_ctx_skipped(const dcr_load_ctx_t *ctx)
{
    return ctx->skipped;
}

const char *dcr_load_ctx_skip_reason(const dcr_load_ctx_t *ctx)
{
    return ctx->skip_reason;
}

void dcr_load_ctx_nan_events(const dcr_load_ctx_t *ctx, int64_t *created_p, int64_t *lost_p)
{
    if (created_p) *created_p = ctx->nan_created;
    if (lost_p) *lost_p = ctx->nan_lost;
}

/* ---- provenance ---- */

static dcr__temp_t *dcr__temp_of(const dcr_load_ctx_t *ctx, const dcr_storage_t *s)
{
    for (size_t i = 0; i < ctx->ntemps; i++)
        if (ctx->temps[i]->storage == s) return ctx->temps[i];
    return NULL;
}

dcr_load_origin_t dcr_load_ctx_origin(const dcr_load_ctx_t *ctx, const dcr_view_t *v)
{
    dcr_load_origin_t o = {.source = DCR_LOAD_SRC_FOREIGN, .nan_safe = true, .op = ""};
    if (v->storage == ctx->input.storage) {
        o.source = DCR_LOAD_SRC_INPUT;
        o.from_input = true;
        return o;
    }
    const dcr__temp_t *t = dcr__temp_of(ctx, v->storage);
    if (t) return t->origin;
    if (dcr_params_find_storage(ctx->params, v->storage) >= 0) {
        o.source = DCR_LOAD_SRC_RESIDENT;
        o.from_resident = true;
    }
    return o;
}

/* The activity map of a view in tracked mode, in the view's own layout, or
 * false when the storage has none (resident, foreign, or no map given). */
static bool dcr__active_of(const dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_view_t *out)
{
    if (!ctx->mode.track) return false;
    dcr_view_t a = *v;
    a.dtype = DCR__BYTE_DTYPE;
    if (v->storage == ctx->input.storage) {
        if (!ctx->has_input_active) return false;
        /* Input and map are contiguous with one shape, so an element's
         * position in one is its position in the other, shifted. */
        a.storage = ctx->input_active.storage;
        a.offset = v->offset - ctx->input.offset + ctx->input_active.offset;
        *out = a;
        return true;
    }
    const dcr__temp_t *t = dcr__temp_of(ctx, v->storage);
    if (t == NULL || t->active == NULL) return false;
    a.storage = t->active;
    *out = a;
    return true;
}

/* ---- parameters and views ---- */

static dcr_status_t dcr__need_call(const dcr_load_ctx_t *ctx, const char *op)
{
    if (ctx == NULL) return dcr_error_set(DCR_EINVAL, "%s: NULL context", op);
    if (!ctx->in_call) return dcr_error_set(DCR_EINVAL, "%s: called outside a load call", op);
    return DCR_OK;
}

dcr_status_t dcr_load_param(dcr_load_ctx_t *ctx, const char *name, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "param"));
    int64_t i = dcr_params_find(ctx->params, name);
    if (i < 0)
        return dcr_error_set(DCR_ENOTFOUND, "load %s: no resident parameter %s", ctx->name, name);
    return dcr_params_view(ctx->params, (size_t)i, out_p);
}

/* View errors name the tensor being loaded. */
static dcr_status_t dcr__view_result(dcr_load_ctx_t *ctx, dcr_status_t st)
{
    if (st != DCR_OK) dcr_error_prefix("load %s: ", ctx->name);
    return st;
}

dcr_status_t dcr_load_narrow(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim, int64_t start,
                             int64_t length, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "narrow"));
    return dcr__view_result(ctx, dcr_view_narrow(v, dim, start, length, out_p));
}

dcr_status_t dcr_load_select(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim, int64_t index,
                             dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "select"));
    return dcr__view_result(ctx, dcr_view_select(v, dim, index, out_p));
}

dcr_status_t dcr_load_transpose(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim0, int dim1,
                                dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "transpose"));
    return dcr__view_result(ctx, dcr_view_transpose(v, dim0, dim1, out_p));
}

dcr_status_t dcr_load_unsqueeze(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim,
                                dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "unsqueeze"));
    return dcr__view_result(ctx, dcr_view_unsqueeze(v, dim, out_p));
}

/* ---- new storage ---- */

/* Whether every element of a view lies inside its storage. */
static dcr_status_t dcr__bounds(const dcr_load_ctx_t *ctx, const char *op, const dcr_view_t *v)
{
    dcr_status_t st = dcr_view_check(v);
    if (st != DCR_OK) dcr_error_prefix("load %s: %s: ", ctx->name, op);
    return st;
}

/* Whether new storage is computed on the context's device: device mode
 * outside the probe (which computes nothing). */
static bool dcr__on_device(const dcr_load_ctx_t *ctx)
{
    return ctx->mode.device && !ctx->mode.probe;
}

/* map and blockwise run host functions: refused while the views are device
 * memory the host cannot read. */
static dcr_status_t dcr__host_compute(const dcr_load_ctx_t *ctx, const char *op)
{
    if (!dcr__on_device(ctx)) return DCR_OK;
    return dcr_error_set(DCR_EUNSUPPORTED,
                         "load %s: %s on a device the host cannot address: it runs a host "
                         "function (engine/device/WIRING.md)",
                         ctx->name, op);
}

/* cast and cat on a device: it must be set, and the source a buffer of it
 * (the input, a temporary, a resident parameter), not storage the context
 * does not know. */
static dcr_status_t dcr__device_compute(const dcr_load_ctx_t *ctx, const char *op,
                                        const dcr_view_t *src)
{
    if (!dcr__on_device(ctx)) return DCR_OK;
    if (ctx->dev == NULL)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "load %s: %s on a device the host cannot address, with no device "
                             "set on the load context",
                             ctx->name, op);
    if (dcr_load_ctx_origin(ctx, src).source == DCR_LOAD_SRC_FOREIGN)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "load %s: %s on a device from storage the load context does not "
                             "know (it may be host memory)",
                             ctx->name, op);
    return DCR_OK;
}

/* A zeroed device buffer of bytes behind a storage handle. */
static dcr_status_t dcr__device_handle(dcr_load_ctx_t *ctx, size_t bytes, dcr_storage_t **out_p)
{
    dcr_storage_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "load %s: temporary", ctx->name);
    dcr_status_t st = dcr_device_alloc(ctx->dev, bytes ? bytes : 1, &s->data);
    if (st != DCR_OK) {
        free(s);
        return st;
    }
    s->bytes = bytes;
    *out_p = s;
    return DCR_OK;
}

/* Makes a contiguous temporary of the given shape and dtype (without data in
 * probe mode, with an activity map in tracked mode) and its view. */
static dcr_status_t dcr__temp_new(dcr_load_ctx_t *ctx, dcr_dtype_t dtype, int ndim,
                                  const int64_t *shape, dcr__temp_t **temp_p, dcr_view_t *view_p)
{
    if (ctx->ntemps == ctx->captemps) {
        size_t cap = ctx->captemps ? 2 * ctx->captemps : 8;
        dcr__temp_t **ts = realloc(ctx->temps, cap * sizeof(*ts));
        if (ts == NULL) return dcr_error_set(DCR_ENOMEM, "load %s: temporaries", ctx->name);
        ctx->temps = ts;
        ctx->captemps = cap;
    }
    int64_t numel = dcr_shape_numel(ndim, shape);
    size_t bytes = (size_t)numel * dcr_dtype_size(dtype);
    dcr__temp_t *t = calloc(1, sizeof(*t));
    if (t == NULL) return dcr_error_set(DCR_ENOMEM, "load %s: temporary", ctx->name);
    dcr_status_t st = DCR_OK;
    if (dcr__on_device(ctx)) {
        t->on_device = true;
        st = dcr__device_handle(ctx, bytes, &t->storage);
        if (st == DCR_OK && ctx->mode.track)
            st = dcr__device_handle(ctx, (size_t)numel, &t->active);
    } else if (ctx->mode.probe) {
        t->storage = calloc(1, sizeof(*t->storage));
        if (t->storage == NULL)
            st = dcr_error_set(DCR_ENOMEM, "load %s: temporary", ctx->name);
        else
            t->storage->bytes = bytes;
    } else {
        st = dcr_storage_create(bytes, &t->storage);
        if (st == DCR_OK && ctx->mode.track) st = dcr_storage_create((size_t)numel, &t->active);
    }
    if (st != DCR_OK) {
        if (t->on_device) {
            dcr__handle_free(ctx, t->storage, true);
        } else if (t->storage && t->storage->data == NULL) {
            free(t->storage);
        } else {
            dcr_storage_destroy(t->storage);
        }
        free(t);
        return st;
    }
    ctx->temps[ctx->ntemps++] = t;
    *temp_p = t;
    return dcr_view_contiguous(t->storage, dtype, ndim, shape, view_p);
}

/* Provenance of a temporary computed from source view v by op. */
static void dcr__origin_derive(const dcr_load_ctx_t *ctx, const dcr_view_t *v, unsigned op,
                               dcr_load_origin_t *o)
{
    dcr_load_origin_t src = dcr_load_ctx_origin(ctx, v);
    o->source = DCR_LOAD_SRC_TEMP;
    o->ops |= src.ops | op;
    o->from_input |= src.from_input;
    o->from_resident |= src.from_resident;
    o->nan_safe = o->nan_safe && src.nan_safe;
    if (o->op[0] == '\0' && src.op[0] != '\0') o->op = src.op;
}

static void dcr__origin_start(dcr__temp_t *t, const char *fmt_a, const char *a, const char *b)
{
    snprintf(t->op, sizeof(t->op), fmt_a, a, b);
    t->origin = (dcr_load_origin_t){.source = DCR_LOAD_SRC_TEMP, .nan_safe = true, .op = t->op};
}

/* Copies the activity map of src (or zeros when it has none) into dst's. */
static dcr_status_t dcr__active_copy(const dcr_load_ctx_t *ctx, const dcr_view_t *dst_values,
                                     const dcr_view_t *src)
{
    dcr_view_t da, sa;
    if (!dcr__active_of(ctx, dst_values, &da)) return DCR_OK;
    if (dcr__active_of(ctx, src, &sa)) {
        if (dcr__on_device(ctx))
            return dcr_device_combine_views(ctx->dev, ctx->stream, &da, &sa, NULL, NULL,
                                            DCR_DEVICE_ASSIGN);
        return dcr_view_copy(&da, &sa);
    }
    /* No map means nothing active: the temporary's map starts zeroed. */
    return DCR_OK;
}

typedef struct dcr__walk {
    const dcr_view_t *out; /* contiguous */
    char *out_base;
    size_t out_size;
    dcr_dtype_t in_dtype;
    dcr_load_map_fn fn;
    void *arg;
    dcr_load_ctx_t *ctx;
} dcr__walk_t;

/* Counts NaN transitions of one element: a placeholder that stops being NaN,
 * or a value that becomes NaN, defeats the NaN placeholder. */
static void dcr__nan_event(dcr_load_ctx_t *ctx, dcr_dtype_t in_dtype, const void *in,
                           dcr_dtype_t out_dtype, const void *out)
{
    int a = dcr_dtype_bits_isnan(in_dtype, dcr_dtype_load_bits(in_dtype, in));
    int b = dcr_dtype_bits_isnan(out_dtype, dcr_dtype_load_bits(out_dtype, out));
    if (!a && b) ctx->nan_created++;
    if (a && !b) ctx->nan_lost++;
}

static void dcr__map_elem(int64_t i, void *elem, void *arg)
{
    dcr__walk_t *w = arg;
    float y = w->fn(dcr__load_f32(w->in_dtype, elem), w->arg);
    char *dst = w->out_base + (size_t)i * w->out_size;
    dcr_convert(dst, w->out->dtype, &y, DCR_DTYPE_FP32, 1);
    if (w->ctx->mode.watch_nan) dcr__nan_event(w->ctx, w->in_dtype, elem, w->out->dtype, dst);
}

static void dcr__cast_watch(int64_t i, void *elem, void *arg)
{
    dcr__walk_t *w = arg;
    dcr__nan_event(w->ctx, w->in_dtype, elem, w->out->dtype, w->out_base + (size_t)i * w->out_size);
}

/* A cast or map on the device: one convert per region (transform
 * dcr_device_transform_t), counting the NaN events when watched, and the activity map
 * carried. */
static dcr_status_t dcr__device_convert(dcr_load_ctx_t *ctx, const dcr_view_t *out,
                                        const dcr_view_t *v, int transform)
{
    uint32_t *events = NULL;
    if (ctx->mode.watch_nan) {
        if (ctx->nan_dev == NULL)
            DCR_CHECK(dcr_device_alloc(ctx->dev, 2 * sizeof(uint32_t), (void **)&ctx->nan_dev));
        events = ctx->nan_dev;
        ctx->nan_pending = true;
    }
    DCR_CHECK(dcr_device_convert_views(ctx->dev, ctx->stream, out, v, NULL, DCR_DEVICE_ASSIGN,
                                       transform, events));
    return dcr__active_copy(ctx, out, v);
}

dcr_status_t dcr_load_cast(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                           dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "cast"));
    DCR_CHECK(dcr__bounds(ctx, "cast", v));
    if ((unsigned)to >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "load %s: cast to invalid dtype %d", ctx->name, (int)to);
    if (v->dtype == to) {
        *out_p = *v;
        return DCR_OK;
    }
    DCR_CHECK(dcr__device_compute(ctx, "cast", v));
    dcr__temp_t *t;
    dcr_view_t out;
    DCR_CHECK(dcr__temp_new(ctx, to, v->ndim, v->shape, &t, &out));
    dcr__origin_start(t, "cast %s->%s", dcr_dtype_name(v->dtype), dcr_dtype_name(to));
    dcr__origin_derive(ctx, v, DCR_LOAD_OP_CAST, &t->origin);
    if (dcr__on_device(ctx)) {
        DCR_CHECK(dcr__device_convert(ctx, &out, v, DCR_DEVICE_T_NONE));
    } else if (!ctx->mode.probe) {
        DCR_CHECK(dcr_view_copy(&out, v));
        DCR_CHECK(dcr__active_copy(ctx, &out, v));
        if (ctx->mode.watch_nan) {
            dcr__walk_t w = {&out, out.storage->data, dcr_dtype_size(to), v->dtype, NULL, NULL,
                             ctx};
            dcr_view_foreach(v, dcr__cast_watch, &w);
        }
    }
    *out_p = out;
    return DCR_OK;
}

dcr_status_t dcr_load_map(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                          dcr_load_map_fn fn, void *arg, const char *what, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "map"));
    DCR_CHECK(dcr__bounds(ctx, "map", v));
    DCR_CHECK(dcr__host_compute(ctx, "map"));
    if (fn == NULL || (unsigned)to >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "load %s: map needs a function and a dtype", ctx->name);
    dcr__temp_t *t;
    dcr_view_t out;
    DCR_CHECK(dcr__temp_new(ctx, to, v->ndim, v->shape, &t, &out));
    dcr__origin_start(t, "map %s%s", what ? what : "fn", "");
    dcr__origin_derive(ctx, v, DCR_LOAD_OP_MAP, &t->origin);
    /* The transform is elementwise and deterministic, so one evaluation tells
     * whether a NaN placeholder survives it. */
    if (!isnan(fn(NAN, arg)) || !isnan(fn(-NAN, arg))) t->origin.nan_safe = false;
    if (!ctx->mode.probe) {
        dcr__walk_t w = {&out, out.storage->data, dcr_dtype_size(to), v->dtype, fn, arg, ctx};
        dcr_view_foreach(v, dcr__map_elem, &w);
        DCR_CHECK(dcr__active_copy(ctx, &out, v));
    }
    *out_p = out;
    return DCR_OK;
}

_Static_assert((int)DCR_LOAD_NEG == (int)DCR_DEVICE_T_NEG &&
                   (int)DCR_LOAD_NEG_EXP == (int)DCR_DEVICE_T_NEG_EXP,
               "dcr_load_transform_t mirrors the kernels' transform codes");

static const char *const dcr__transform_names[DCR_DEVICE_TRANSFORMS] = {"identity", "neg",
                                                                        "neg_exp"};

/* A transform of the closed set as a host map function. */
static float dcr__transform_fn(float x, void *arg)
{
    return dcr_dk_f32(dcr_dk_transform(*(const int *)arg, dcr_dk_bits(x)));
}

dcr_status_t dcr_load_map_op(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                             dcr_load_transform_t op, dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "map"));
    if (op != DCR_LOAD_NEG && op != DCR_LOAD_NEG_EXP)
        return dcr_error_set(DCR_EINVAL, "load %s: map of unknown transform %d", ctx->name,
                             (int)op);
    int code = (int)op;
    const char *what = dcr__transform_names[code];
    /* On the host (and in the probe) it is a map whose function is the
     * kernels' own transform, so both places give the same bits. */
    if (!dcr__on_device(ctx))
        return dcr_load_map(ctx, v, to, dcr__transform_fn, &code, what, out_p);
    DCR_CHECK(dcr__bounds(ctx, "map", v));
    if ((unsigned)to >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "load %s: map to invalid dtype %d", ctx->name, (int)to);
    DCR_CHECK(dcr__device_compute(ctx, "map", v));
    dcr__temp_t *t;
    dcr_view_t out;
    DCR_CHECK(dcr__temp_new(ctx, to, v->ndim, v->shape, &t, &out));
    dcr__origin_start(t, "map %s%s", what, "");
    dcr__origin_derive(ctx, v, DCR_LOAD_OP_MAP, &t->origin);
    if (!isnan(dcr__transform_fn(NAN, &code)) || !isnan(dcr__transform_fn(-NAN, &code)))
        t->origin.nan_safe = false;
    DCR_CHECK(dcr__device_convert(ctx, &out, v, code));
    *out_p = out;
    return DCR_OK;
}

static dcr_status_t dcr__cat_shape(dcr_load_ctx_t *ctx, size_t n, const dcr_view_t *vs, int dim,
                                   int64_t *shape)
{
    const dcr_view_t *a = &vs[0];
    if (dim < 0 || dim >= a->ndim)
        return dcr_error_set(DCR_EINVAL, "load %s: cat dim %d outside rank %d", ctx->name, dim,
                             a->ndim);
    for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[d];
    shape[dim] = 0;
    for (size_t i = 0; i < n; i++) {
        const dcr_view_t *b = &vs[i];
        DCR_CHECK(dcr__bounds(ctx, "cat", b));
        bool ok = b->ndim == a->ndim && b->dtype == a->dtype;
        for (int d = 0; ok && d < a->ndim; d++) ok = d == dim || b->shape[d] == a->shape[d];
        if (!ok)
            return dcr_error_set(DCR_EINVAL,
                                 "load %s: cat part %zu differs in dtype or shape outside dim %d",
                                 ctx->name, i, dim);
        shape[dim] += b->shape[dim];
    }
    return DCR_OK;
}

dcr_status_t dcr_load_cat(dcr_load_ctx_t *ctx, size_t n, const dcr_view_t *vs, int dim,
                          dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "cat"));
    if (n == 0 || vs == NULL)
        return dcr_error_set(DCR_EINVAL, "load %s: cat of nothing", ctx->name);
    int64_t shape[DCR_MAX_DIMS];
    DCR_CHECK(dcr__cat_shape(ctx, n, vs, dim, shape));
    for (size_t i = 0; i < n; i++) DCR_CHECK(dcr__device_compute(ctx, "cat", &vs[i]));
    dcr__temp_t *t;
    dcr_view_t out;
    DCR_CHECK(dcr__temp_new(ctx, vs[0].dtype, vs[0].ndim, shape, &t, &out));
    dcr__origin_start(t, "cat of %s%s", n == 1 ? "1 part" : "parts", "");
    int64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        dcr__origin_derive(ctx, &vs[i], DCR_LOAD_OP_CAT, &t->origin);
        dcr_view_t part;
        DCR_CHECK(dcr_view_narrow(&out, dim, at, vs[i].shape[dim], &part));
        if (dcr__on_device(ctx)) {
            DCR_CHECK(dcr_device_combine_views(ctx->dev, ctx->stream, &part, &vs[i], NULL, NULL,
                                               DCR_DEVICE_ASSIGN));
            DCR_CHECK(dcr__active_copy(ctx, &part, &vs[i]));
        } else if (!ctx->mode.probe) {
            DCR_CHECK(dcr_view_copy(&part, &vs[i]));
            DCR_CHECK(dcr__active_copy(ctx, &part, &vs[i]));
        }
        at += vs[i].shape[dim];
    }
    *out_p = out;
    return DCR_OK;
}

static void dcr__gather_f32(int64_t i, void *elem, void *arg)
{
    const dcr__walk_t *w = arg;
    ((float *)w->out_base)[i] = dcr__load_f32(w->in_dtype, elem);
}

dcr_status_t dcr_load_blockwise(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                                size_t block, dcr_load_block_fn fn, void *arg, const char *what,
                                dcr_view_t *out_p)
{
    DCR_CHECK(dcr__need_call(ctx, "blockwise"));
    DCR_CHECK(dcr__bounds(ctx, "blockwise", v));
    DCR_CHECK(dcr__host_compute(ctx, "blockwise"));
    if (fn == NULL || block == 0 || (unsigned)to >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL,
                             "load %s: blockwise needs a function, a block size "
                             "and a dtype",
                             ctx->name);
    dcr__temp_t *t;
    dcr_view_t out;
    DCR_CHECK(dcr__temp_new(ctx, to, v->ndim, v->shape, &t, &out));
    dcr__origin_start(t, "blockwise %s%s", what ? what : "fn", "");
    dcr__origin_derive(ctx, v, DCR_LOAD_OP_BLOCKWISE, &t->origin);
    if (ctx->mode.probe) {
        *out_p = out;
        return DCR_OK;
    }
    size_t n = (size_t)dcr_view_numel(v);
    float *in = malloc((n ? n : 1) * sizeof(float)), *res = malloc((n ? n : 1) * sizeof(float));
    if (in == NULL || res == NULL) {
        free(in);
        free(res);
        return dcr_error_set(DCR_ENOMEM, "load %s: blockwise buffers", ctx->name);
    }
    dcr__walk_t w = {&out, (char *)in, sizeof(float), v->dtype, NULL, NULL, ctx};
    dcr_view_foreach(v, dcr__gather_f32, &w);
    for (size_t at = 0; at < n; at += block)
        fn(in + at, res + at, n - at < block ? n - at : block, arg);
    dcr_convert(out.storage->data, to, res, DCR_DTYPE_FP32, n);
    free(in);
    free(res);
    *out_p = out;
    return DCR_OK;
}

/* ---- final writes ---- */

static dcr_status_t dcr__dst_param(dcr_load_ctx_t *ctx, const char *op, const dcr_view_t *dst,
                                   size_t *param_p)
{
    DCR_CHECK(dcr__bounds(ctx, op, dst));
    int64_t p = dcr_params_find_storage(ctx->params, dst->storage);
    if (p < 0)
        return dcr_error_set(DCR_EINVAL, "load %s: %s destination is not a resident parameter",
                             ctx->name, op);
    const dcr_param_t *info = dcr_params_at(ctx->params, (size_t)p);
    if (dst->dtype != info->dtype)
        return dcr_error_set(DCR_EINVAL, "load %s: %s into %s reinterprets %s as %s", ctx->name, op,
                             info->name, dcr_dtype_name(info->dtype), dcr_dtype_name(dst->dtype));
    *param_p = (size_t)p;
    return DCR_OK;
}

static dcr_status_t dcr__hook_result(dcr_load_ctx_t *ctx, dcr_status_t st)
{
    if (st != DCR_OK && ctx->name[0] != '\0' && strstr(dcr_error_detail(), ctx->name) == NULL)
        dcr_error_prefix("load %s: ", ctx->name);
    return st;
}

dcr_status_t dcr_load_copy(dcr_load_ctx_t *ctx, const dcr_view_t *dst, const dcr_view_t *src)
{
    DCR_CHECK(dcr__need_call(ctx, "copy_"));
    dcr_load_write_t w = {.kind = DCR_LOAD_COPY};
    DCR_CHECK(dcr__dst_param(ctx, "copy_", dst, &w.param));
    DCR_CHECK(dcr__bounds(ctx, "copy_ source", src));
    bool same = dst->ndim == src->ndim;
    for (int i = 0; same && i < dst->ndim; i++) same = dst->shape[i] == src->shape[i];
    if (!same) {
        char a[96], b[96];
        dcr_shape_format(dst->ndim, dst->shape, a, sizeof(a));
        dcr_shape_format(src->ndim, src->shape, b, sizeof(b));
        return dcr_error_set(DCR_EINVAL, "load %s: copy_ into %s from %s: shapes differ", ctx->name,
                             a, b);
    }
    w.dst = *dst;
    w.src = *src;
    w.origin = dcr_load_ctx_origin(ctx, src);
    dcr_view_t active;
    if (dcr__active_of(ctx, src, &active)) w.src_active = &active;
    ctx->copies++;
    return dcr__hook_result(ctx, ctx->hooks->copy(ctx->hook_arg, ctx, &w));
}

dcr_status_t dcr_load_fill(dcr_load_ctx_t *ctx, const dcr_view_t *dst, double value)
{
    DCR_CHECK(dcr__need_call(ctx, "fill_"));
    dcr_load_write_t w = {.kind = DCR_LOAD_FILL};
    DCR_CHECK(dcr__dst_param(ctx, "fill_", dst, &w.param));
    w.dst = *dst;
    float f = (float)value;
    dcr_convert(&w.fill_bits, dst->dtype, &f, DCR_DTYPE_FP32, 1);
    ctx->fills++;
    return dcr__hook_result(ctx, ctx->hooks->fill(ctx->hook_arg, ctx, &w));
}

dcr_status_t dcr_load_skip(dcr_load_ctx_t *ctx, const char *reason)
{
    DCR_CHECK(dcr__need_call(ctx, "skip"));
    ctx->skipped = true;
    ctx->skip_reason = reason ? reason : "";
    return DCR_OK;
}

/* ---- plain hooks ---- */

static void dcr__fill_elem(int64_t i, void *elem, void *arg)
{
    const dcr_load_write_t *w = arg;
    dcr_dtype_store_bits(w->dst.dtype, elem, w->fill_bits);
}

static dcr_status_t dcr__plain_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    if (w->dst.storage->data == NULL || w->src.storage->data == NULL)
        return dcr_error_set(DCR_EINVAL, "plain copy_ into parameter storage without data");
    return dcr_view_copy(&w->dst, &w->src);
}

static dcr_status_t dcr__plain_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    if (w->dst.storage->data == NULL)
        return dcr_error_set(DCR_EINVAL, "plain fill_ into parameter storage without data");
    dcr_view_foreach(&w->dst, dcr__fill_elem, (void *)w);
    return DCR_OK;
}

const dcr_load_hooks_t dcr_load_hooks_plain = {dcr__plain_copy, dcr__plain_fill};
