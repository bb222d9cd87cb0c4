/* The receiver: resident storage behind its native loader, dense loads,
 * attempts, statistics and the post-apply check. */
#include <blake2.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/device_views.h"
#include "receiver-internal.h"

static dcr_status_t dcr__config_check(const dcr_receiver_config_t *cfg)
{
    if (cfg == NULL || cfg->loader == NULL || cfg->inventory == NULL)
        return dcr_error_set(DCR_EINVAL, "receiver: a loader name and an inventory are required");
    if ((unsigned)cfg->mask > DCR_MASK_TRACKED)
        return dcr_error_set(DCR_EINVAL, "receiver: invalid mask mode %d", (int)cfg->mask);
    return DCR_OK;
}

dcr_status_t dcr__device_storage(dcr_receiver_t *r, size_t bytes, dcr_storage_t **out_p)
{
    dcr_storage_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "receiver: storage handle");
    dcr_status_t st = dcr_device_alloc(r->dev, bytes ? bytes : 1, &s->data);
    if (st != DCR_OK) {
        free(s);
        return st;
    }
    s->bytes = bytes;
    *out_p = s;
    return DCR_OK;
}

void dcr__device_storage_free(dcr_receiver_t *r, dcr_storage_t *s)
{
    if (s == NULL) return;
    dcr_device_free(r->dev, s->data);
    free(s);
}

dcr_status_t dcr__param_read(const dcr_receiver_t *r, const dcr_param_t *p, size_t off,
                             size_t bytes, const void **out_p, void **owned_p)
{
    *owned_p = NULL;
    if (r->host) {
        *out_p = (const char *)p->storage->data + off;
        return DCR_OK;
    }
    void *buf = malloc(bytes ? bytes : 1);
    if (buf == NULL) return dcr_error_set(DCR_ENOMEM, "receiver: %zu bytes of %s", bytes, p->name);
    /* Reads share the receiver's stream with its applies, which never run
     * concurrently with a comparison or a digest of the same receiver. */
    dcr_device_stream_t *s = r->stream;
    dcr_status_t st = dcr_device_copy(r->dev, s, buf, (const char *)p->storage->data + off, bytes,
                                      DCR_DEVICE_D2H);
    if (st == DCR_OK) st = dcr_device_sync(r->dev, s);
    if (st != DCR_OK) {
        free(buf);
        return st;
    }
    *out_p = buf;
    *owned_p = buf;
    return DCR_OK;
}

dcr_status_t dcr__device_unsupported(const dcr_receiver_t *r, const char *name, const char *what)
{
    return dcr_error_set(DCR_EUNSUPPORTED,
                         "%s (%s): %s on device %s, which the host cannot address, does not "
                         "run there yet (engine/device/WIRING.md)",
                         name, dcr_loader_name(r->loader), what,
                         dcr_device_backend(r->dev)->hdr.name);
}

/* The receiver's device and stream. On a device the host cannot address
 * (cuda), resident storage moves into one arena of the device: the
 * parameters are placed there (their handles stay; the arena starts zeroed
 * like the parameters it replaces), and a word for fill_ is kept beside it. */
static dcr_status_t dcr__device_create(dcr_receiver_t *r, const dcr_device_ops_t *ops)
{
    const char *name = r->cfg.device ? r->cfg.device : "cpu";
    DCR_CHECK(ops ? ops->create(ops, 0, &r->dev) : dcr_device_create(name, &r->dev));
    r->host = dcr_device_backend(r->dev)->props.host_addressable;
    DCR_CHECK(dcr_device_stream_create(r->dev, DCR_ACTOR_RECEIVER, r->cfg.id, &r->stream));
    if (r->host || r->cfg.shape_only) return DCR_OK;
    size_t bytes = dcr_params_arena_bytes(r->params);
    DCR_CHECK(dcr_device_alloc(r->dev, bytes ? bytes : DCR_PARAMS_ALIGN, &r->arena));
    DCR_CHECK(dcr_device_alloc(r->dev, sizeof(uint64_t), &r->fill_word));
    return dcr_params_place(r->params, r->arena, bytes ? bytes : DCR_PARAMS_ALIGN, false);
}

/* Scratch sized for the largest canonical tensor. The probe only needs its
 * size, and on host memory only a pass of the loader over an item needs its
 * bytes (dcr__scratch_ready), which items of views-only paths never take:
 * until then, and for good on a shape-only receiver, it has no data. Dense
 * loads on a device the host cannot address go up through it: there it is
 * allocated at once. */
static dcr_status_t dcr__scratch_create(dcr_receiver_t *r)
{
    size_t bytes = dcr_inventory_max_tensor_bytes(r->inv);
    if (!r->cfg.shape_only && !r->host) return dcr__device_storage(r, bytes, &r->scratch);
    r->scratch = calloc(1, sizeof(*r->scratch));
    if (r->scratch == NULL) return dcr_error_set(DCR_ENOMEM, "receiver: scratch");
    r->scratch->bytes = bytes;
    return DCR_OK;
}

dcr_status_t dcr__scratch_ready(dcr_receiver_t *r)
{
    if (r->scratch->data != NULL || r->cfg.shape_only) return DCR_OK;
    void *data = NULL;
    DCR_CHECK(dcr_device_alloc(r->dev, r->scratch->bytes ? r->scratch->bytes : 1, &data));
    r->scratch->data = data;
    r->base = DCR__BASE_NONE;
    return DCR_OK;
}

static dcr_status_t dcr__staging_create(dcr_receiver_t *r)
{
    DCR_CHECK(dcr_queue_create(DCR_STAGE_GROUPS + 1, &r->free_q));
    DCR_CHECK(dcr_queue_create(DCR_STAGE_GROUPS, &r->ready_q));
    for (size_t g = 0; g <= DCR_STAGE_GROUPS; g++)
        DCR_CHECK(dcr_queue_push(r->free_q, &r->groups[g], 0));
    return DCR_OK;
}

static dcr_status_t dcr__receiver_init(dcr_receiver_t *r, const dcr_device_ops_t *ops)
{
    DCR_CHECK(
        dcr_loader_create(r->cfg.loader, r->cfg.loader_config, r->cfg.shape_only, &r->loader));
    r->params = dcr_loader_params(r->loader);
    DCR_CHECK(dcr_load_ctx_create(r->params, &r->ctx));
    DCR_CHECK(dcr__device_create(r, ops));
    /* cast and cat of device-mode loads run on the receiver's stream. */
    dcr_load_ctx_set_device(r->ctx, r->dev, r->stream);
    DCR_CHECK(dcr__scratch_create(r));
    DCR_CHECK(dcr_payload_create(&r->direct));
    size_t np = dcr_params_count(r->params);
    r->wlo = calloc(np ? np : 1, sizeof(*r->wlo));
    r->whi = calloc(np ? np : 1, sizeof(*r->whi));
    if (r->wlo == NULL || r->whi == NULL) return dcr_error_set(DCR_ENOMEM, "receiver: regions");
    return dcr__staging_create(r);
}

dcr_status_t dcr_receiver_create(const dcr_receiver_config_t *cfg, dcr_receiver_t **out_p)
{
    return dcr__receiver_create_on(NULL, cfg, out_p);
}

dcr_status_t dcr__receiver_create_on(const dcr_device_ops_t *ops, const dcr_receiver_config_t *cfg,
                                     dcr_receiver_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "receiver_create: out_p is NULL");
    DCR_CHECK(dcr__config_check(cfg));
    dcr_receiver_t *r = calloc(1, sizeof(*r));
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "receiver: allocation failed");
    r->cfg = *cfg;
    r->inv = cfg->inventory;
    atomic_init(&r->staged, 0);
    dcr_status_t st = dcr__receiver_init(r, ops);
    if (st != DCR_OK) {
        dcr_receiver_destroy(r);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

void dcr_receiver_destroy(dcr_receiver_t *r)
{
    if (r == NULL) return;
    for (size_t g = 0; g <= DCR_STAGE_GROUPS; g++)
        for (size_t s = 0; s < DCR_STAGE_GROUP_SIZE; s++)
            dcr_payload_destroy(r->groups[g].slots[s]);
    dcr_queue_destroy(r->ready_q);
    dcr_queue_destroy(r->free_q);
    dcr_map_free(&r->dedup);
    dcr_payload_destroy(r->direct);
    free(r->wlo);
    free(r->whi);
    dcr__apply_free(r);
    dcr__plans_free(r);
    /* A shape-only scratch is a bare handle; the device frees NULL data. */
    dcr__device_storage_free(r, r->scratch);
    dcr__device_storage_free(r, r->scratch_active);
    dcr_device_free(r->dev, r->fill_word);
    dcr_device_stream_destroy(r->dev, r->stream);
    dcr_load_ctx_destroy(r->ctx);
    /* A placed set frees its handles, never the arena (the device's). */
    dcr_loader_destroy(r->loader);
    dcr_device_free(r->dev, r->arena);
    dcr_device_destroy(r->dev);
    free(r);
}

const dcr_params_t *dcr_receiver_params(const dcr_receiver_t *r)
{
    return r->params;
}

/* ---- dense load ---- */

/* Dense writes on a device the host cannot address: copies from device
 * buffers (the input, which went up into scratch, the load context's
 * temporaries, resident storage) are ASSIGN combines, or converts when the
 * dtypes differ (copy_ converts like dcr_convert); fill_ is a combine of a
 * constant word (source strides 0). */
static dcr_status_t dcr__dense_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    dcr_receiver_t *r = arg;
    if (w->origin.source == DCR_LOAD_SRC_FOREIGN)
        return dcr__device_unsupported(r, dcr_load_ctx_name(ctx),
                                       "load_dense: copy_ from foreign storage");
    if (w->src.dtype != w->dst.dtype)
        return dcr_device_convert_views(r->dev, r->stream, &w->dst, &w->src, NULL,
                                        DCR_DEVICE_ASSIGN, DCR_DEVICE_T_NONE, NULL);
    return dcr_device_combine_views(r->dev, r->stream, &w->dst, &w->src, NULL, NULL,
                                    DCR_DEVICE_ASSIGN);
}

static dcr_status_t dcr__dense_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    dcr_receiver_t *r = arg;
    dcr_storage_t word = {.data = r->fill_word, .bytes = sizeof(uint64_t)};
    dcr_view_t src = w->dst;
    src.storage = &word;
    src.offset = 0;
    for (int i = 0; i < src.ndim; i++) src.strides[i] = 0;
    /* The constant lives on this stack frame: up and synchronized here. */
    DCR_CHECK(dcr_device_copy(r->dev, r->stream, r->fill_word, &w->fill_bits, sizeof(uint64_t),
                              DCR_DEVICE_H2D));
    DCR_CHECK(
        dcr_device_combine_views(r->dev, r->stream, &w->dst, &src, NULL, NULL, DCR_DEVICE_ASSIGN));
    return dcr_device_sync(r->dev, r->stream);
}

static const dcr_load_hooks_t dcr__dense_device_hooks = {dcr__dense_copy, dcr__dense_fill};

/* The canonical tensor goes up into scratch (whose base pattern is then
 * unknown) and the loader runs over that view in device mode. */
static dcr_status_t dcr__load_dense_device(dcr_receiver_t *r, const char *name,
                                           const dcr_view_t *tensor)
{
    if (!dcr_view_is_contiguous(tensor) || tensor->storage->data == NULL)
        return dcr_error_set(DCR_EINVAL,
                             "load_dense %s: a device load needs a contiguous view "
                             "with data",
                             name);
    size_t es = dcr_dtype_size(tensor->dtype), bytes = (size_t)dcr_view_numel(tensor) * es;
    r->base = DCR__BASE_NONE;
    DCR_CHECK(dcr_device_copy(r->dev, r->stream, r->scratch->data,
                              (const char *)tensor->storage->data + tensor->offset * (int64_t)es,
                              bytes, DCR_DEVICE_H2D));
    dcr_view_t in;
    DCR_CHECK(dcr_view_contiguous(r->scratch, tensor->dtype, tensor->ndim, tensor->shape, &in));
    dcr_load_ctx_set_hooks(r->ctx, &dcr__dense_device_hooks, r);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){.device = true});
    dcr_status_t st = dcr_loader_load(r->loader, r->ctx, name, &in);
    dcr_load_ctx_set_hooks(r->ctx, NULL, NULL);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){0});
    /* The tensor's bytes were read from host memory the caller keeps only
     * until this returns. */
    dcr_status_t sst = dcr_device_sync(r->dev, r->stream);
    return st != DCR_OK ? st : sst;
}

dcr_status_t dcr_receiver_load_dense(dcr_receiver_t *r, const char *name, const dcr_view_t *tensor)
{
    if (r == NULL || name == NULL || tensor == NULL)
        return dcr_error_set(DCR_EINVAL, "load_dense: NULL argument");
    if (r->cfg.shape_only)
        return dcr_error_set(DCR_EUNSUPPORTED, "load_dense %s: receiver is shape-only", name);
    int64_t c = dcr_inventory_find(r->inv, name);
    if (c < 0) return dcr_error_set(DCR_ENOTFOUND, "load_dense: %s is not in the inventory", name);
    const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, (size_t)c);
    bool same = tensor->dtype == d->dtype && tensor->ndim == d->ndim;
    for (int i = 0; same && i < d->ndim; i++) same = tensor->shape[i] == d->shape[i];
    if (!same)
        return dcr_error_set(DCR_EINVAL,
                             "load_dense %s: view differs from the inventory's "
                             "shape or dtype",
                             name);
    if (!r->host) return dcr__load_dense_device(r, name, tensor);
    dcr_load_ctx_set_hooks(r->ctx, NULL, NULL);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){0});
    return dcr_loader_load(r->loader, r->ctx, name, tensor);
}

dcr_status_t dcr_receiver_load_dense_all(dcr_receiver_t *r, dcr_storage_t *const *canonical)
{
    if (r == NULL || canonical == NULL) return dcr_error_set(DCR_EINVAL, "load_dense_all: NULL");
    for (size_t i = 0; i < dcr_inventory_count(r->inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, i);
        dcr_view_t v;
        DCR_CHECK(dcr_view_contiguous(canonical[i], d->dtype, d->ndim, d->shape, &v));
        DCR_CHECK(dcr_receiver_load_dense(r, d->name, &v));
    }
    return DCR_OK;
}

/* ---- attempts ---- */

dcr_status_t dcr_receiver_begin_attempt(dcr_receiver_t *r, uint64_t tau)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "begin_attempt: NULL receiver");
    if (r->attempt_begun && tau < r->tau)
        return dcr_error_set(DCR_EINVAL, "begin_attempt: tau %llu is older than the current %llu",
                             (unsigned long long)tau, (unsigned long long)r->tau);
    if (!r->attempt_begun || tau != r->tau) dcr_map_clear(&r->dedup);
    /* Work still queued belongs to the attempt before (a failed one, or
     * items applied one by one): it completes before this one starts. Its
     * error was that attempt's, reported there or abandoned with it. */
    (void)dcr__settle(r);
    r->tau = tau;
    r->attempt_begun = true;
    r->attempt_failed = false;
    dcr__staging_drop(r);
    size_t np = dcr_params_count(r->params);
    memset(r->wlo, 0, np * sizeof(*r->wlo));
    memset(r->whi, 0, np * sizeof(*r->whi));
    return DCR_OK;
}

void dcr_receiver_stats(const dcr_receiver_t *r, dcr_receiver_stats_t *out_p)
{
    *out_p = r->stats;
}

/* ---- comparisons ---- */

static bool dcr__same_params(const dcr_params_t *a, const dcr_params_t *b)
{
    if (dcr_params_count(a) != dcr_params_count(b)) return false;
    for (size_t i = 0; i < dcr_params_count(a); i++) {
        const dcr_param_t *x = dcr_params_at(a, i), *y = dcr_params_at(b, i);
        if (strcmp(x->name, y->name) != 0 || x->storage->bytes != y->storage->bytes) return false;
    }
    return true;
}

/* First element where two same-size parameters differ: -1 when none, -2
 * when their bytes could not be read (a device error: a difference, never
 * a pass). */
static int64_t dcr__param_diff(const dcr_receiver_t *a, const dcr_receiver_t *b,
                               const dcr_param_t *x, const dcr_param_t *y)
{
    const void *pv = NULL, *qv = NULL;
    void *po = NULL, *qo = NULL;
    int64_t at = -2;
    if (dcr__param_read(a, x, 0, x->storage->bytes, &pv, &po) == DCR_OK &&
        dcr__param_read(b, y, 0, y->storage->bytes, &qv, &qo) == DCR_OK) {
        at = -1;
        if (memcmp(pv, qv, x->storage->bytes) != 0) {
            const char *p = pv, *q = qv;
            size_t k = 0;
            while (p[k] == q[k]) k++;
            at = (int64_t)(k / dcr_dtype_size(x->dtype));
        }
    }
    free(po);
    free(qo);
    return at;
}

bool dcr_receiver_equal(const dcr_receiver_t *a, const dcr_receiver_t *b, const char **param_p,
                        int64_t *elem_p)
{
    if (!dcr__same_params(a->params, b->params)) {
        if (param_p) *param_p = "(different parameter sets)";
        if (elem_p) *elem_p = -1;
        return false;
    }
    for (size_t i = 0; i < dcr_params_count(a->params); i++) {
        const dcr_param_t *x = dcr_params_at(a->params, i), *y = dcr_params_at(b->params, i);
        if (x->storage->bytes == 0) continue;
        /* A side without data (shape-only) holds no bits to vouch for: it
         * is a difference, never a pass. */
        if (x->storage->data == NULL || y->storage->data == NULL) {
            if (param_p) *param_p = x->name;
            if (elem_p) *elem_p = -1;
            return false;
        }
        int64_t at = dcr__param_diff(a, b, x, y);
        if (at == -1) continue;
        if (param_p) *param_p = x->name;
        if (elem_p) *elem_p = at;
        return false;
    }
    return true;
}

static dcr_status_t dcr__digest(const dcr_receiver_t *r, const dcr_param_t *p, int64_t lo,
                                int64_t hi, uint8_t out[16])
{
    size_t es = dcr_dtype_size(p->dtype), bytes = (size_t)(hi - lo) * es;
    const void *bits;
    void *owned;
    DCR_CHECK(dcr__param_read(r, p, (size_t)lo * es, bytes, &bits, &owned));
    blake2b(out, bits, NULL, 16, bytes, 0);
    free(owned);
    return DCR_OK;
}

dcr_status_t dcr_receiver_check(dcr_receiver_t *r, const dcr_receiver_t *expected,
                                dcr_check_result_t *out_p)
{
    if (r == NULL || expected == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "receiver_check: NULL argument");
    if (!r->cfg.track_written)
        return dcr_error_set(DCR_EINVAL, "receiver_check: the receiver does not track written "
                                         "regions (track_written)");
    if (r->cfg.shape_only || expected->cfg.shape_only ||
        !dcr__same_params(r->params, expected->params))
        return dcr_error_set(DCR_EINVAL, "receiver_check: the expected receiver has other "
                                         "parameters or no data");
    double t0 = dcr_clock_s();
    dcr_check_result_t res = {0};
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < dcr_params_count(r->params) && st == DCR_OK; i++) {
        if (r->whi[i] <= r->wlo[i]) continue;
        const dcr_param_t *x = dcr_params_at(r->params, i), *y = dcr_params_at(expected->params, i);
        uint8_t a[16], b[16];
        st = dcr__digest(r, x, r->wlo[i], r->whi[i], a);
        if (st == DCR_OK) st = dcr__digest(expected, y, r->wlo[i], r->whi[i], b);
        if (st != DCR_OK) break;
        res.regions++;
        res.bytes += (size_t)(r->whi[i] - r->wlo[i]) * dcr_dtype_size(x->dtype);
        if (memcmp(a, b, sizeof(a)) != 0)
            st = dcr_error_set(DCR_EMISMATCH,
                               "post-apply check: parameter %s elements "
                               "[%lld, %lld) differ from the expected bits",
                               x->name, (long long)r->wlo[i], (long long)r->whi[i]);
    }
    res.seconds = dcr_clock_s() - t0;
    r->stats.check_s += res.seconds;
    if (st == DCR_OK) *out_p = res;
    return st;
}
