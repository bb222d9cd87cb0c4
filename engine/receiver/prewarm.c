/* Prewarm: a probe run of the native loader over every canonical tensor.
 *
 * The probe moves no data (the load context computes nothing and the hooks
 * only record), so it runs on shape-only receivers of full-size models. Each
 * intercepted write is classified as it happens (its provenance text lives
 * only during the call); after all tensors, the writes of every parameter are
 * laid out as element intervals to find overlaps (XOR needs disjoint bytes;
 * different tensors must never write the same element) and gaps (an element
 * no intercepted write produces means the loader writes around the hook). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receiver-internal.h"

/* A plan's texts are heap copies, or this fixed line when there was no
 * memory for one (prewarm's classes never depend on the text). */
static char dcr__no_text[] = "(no memory for the text)";

static char *dcr__text(const char *text)
{
    char *t = strdup(text);
    return t ? t : dcr__no_text;
}

static void dcr__text_free(char *t)
{
    if (t != dcr__no_text) free(t);
}

void dcr__plans_free(dcr_receiver_t *r)
{
    if (r->plans == NULL) return;
    for (size_t i = 0; i < dcr_inventory_count(r->inv); i++) {
        free(r->plans[i].writes);
        dcr__text_free(r->plans[i].op);
        dcr__text_free(r->plans[i].reason);
    }
    free(r->plans);
    r->plans = NULL;
    free(r->runs);
    r->runs = NULL;
    r->prewarmed = false;
}

/* ---- footprints ---- */

typedef struct dcr__dim {
    int64_t shape, stride;
} dcr__dim_t;

static int dcr__dim_cmp(const void *a, const void *b)
{
    const dcr__dim_t *x = a, *y = b;
    return (x->stride > y->stride) - (x->stride < y->stride);
}

dcr_status_t dcr__footprint(const dcr_view_t *v,
                            dcr_status_t (*emit)(int64_t lo, int64_t hi, void *arg), void *arg)
{
    dcr__dim_t d[DCR_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < v->ndim; i++) {
        if (v->shape[i] == 0) return DCR_OK;
        if (v->shape[i] == 1) continue;
        if (v->strides[i] <= 0)
            return dcr_error_set(DCR_EUNSUPPORTED,
                                 "view with stride %lld on a dimension of "
                                 "extent %lld",
                                 (long long)v->strides[i], (long long)v->shape[i]);
        d[nd++] = (dcr__dim_t){v->shape[i], v->strides[i]};
    }
    qsort(d, (size_t)nd, sizeof(d[0]), dcr__dim_cmp);
    /* Inner dimensions that continue a contiguous run merge into it. */
    int64_t run = 1;
    int k = 0;
    while (k < nd && d[k].stride == run) run *= d[k++].shape;
    int64_t idx[DCR_MAX_DIMS] = {0};
    for (;;) {
        int64_t start = v->offset;
        for (int j = k; j < nd; j++) start += idx[j] * d[j].stride;
        DCR_CHECK(emit(start, start + run, arg));
        int j = k;
        for (; j < nd; j++) {
            if (++idx[j] < d[j].shape) break;
            idx[j] = 0;
        }
        if (j == nd) return DCR_OK;
    }
}

/* Whether every element of a view has exactly one position in its storage
 * that a greedy division by the strides (largest first) recovers: true for
 * every view made from a contiguous tensor by narrow, select, transpose,
 * reshape and unsqueeze. Sparse apply relies on it. */
static bool dcr__nested(const dcr_view_t *v)
{
    dcr__dim_t d[DCR_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < v->ndim; i++) {
        if (v->shape[i] == 1) continue;
        if (v->shape[i] == 0 || v->strides[i] <= 0) return false;
        d[nd++] = (dcr__dim_t){v->shape[i], v->strides[i]};
    }
    qsort(d, (size_t)nd, sizeof(d[0]), dcr__dim_cmp);
    int64_t reach = 0; /* largest offset the inner dimensions reach */
    for (int i = 0; i < nd; i++) {
        if (d[i].stride <= reach) return false;
        reach += (d[i].shape - 1) * d[i].stride;
    }
    return true;
}

/* ---- the probe hooks ---- */

typedef struct dcr__probe {
    dcr_receiver_t *r;
    dcr__plan_t *plan;
    size_t cap;
} dcr__probe_t;

/* Sets the operation and reason of a plan (op NULL: keeps the operation). */
static void dcr__plan_say(dcr__plan_t *pl, const char *op, const char *reason)
{
    if (op) {
        dcr__text_free(pl->op);
        pl->op = dcr__text(op);
        pl->info.op = pl->op;
    }
    dcr__text_free(pl->reason);
    pl->reason = dcr__text(reason);
    pl->info.reason = pl->reason;
}

static void dcr__unsupported(dcr__plan_t *pl, const char *op, const char *reason)
{
    if (pl->info.cls == DCR_PATH_UNSUPPORTED) return; /* the first reason wins */
    pl->info.cls = DCR_PATH_UNSUPPORTED;
    dcr__plan_say(pl, op, reason);
}

static void dcr__not_xor(dcr__plan_t *pl, const char *op, const char *reason)
{
    if (pl->xor_ok && pl->info.cls != DCR_PATH_UNSUPPORTED) dcr__plan_say(pl, op, reason);
    pl->xor_ok = false;
}

static dcr_status_t dcr__probe_push(dcr__probe_t *p, const dcr_load_write_t *w)
{
    dcr__plan_t *pl = p->plan;
    if (pl->nwrites == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 1; /* most tensors: one write */
        dcr__pwrite_t *ws = realloc(pl->writes, cap * sizeof(*ws));
        if (ws == NULL) return dcr_error_set(DCR_ENOMEM, "prewarm: write list");
        pl->writes = ws;
        p->cap = cap;
    }
    dcr__pwrite_t *pw = &pl->writes[pl->nwrites++];
    pw->kind = w->kind;
    pw->source = w->kind == DCR_LOAD_COPY ? w->origin.source : DCR_LOAD_SRC_FOREIGN;
    pw->param = w->param;
    pw->dst = w->dst;
    pw->src = w->kind == DCR_LOAD_COPY ? w->src : w->dst;
    p->r->probe_writes++;
    return DCR_OK;
}

static void dcr__probe_classify_copy(dcr__plan_t *pl, const dcr_load_write_t *w)
{
    const dcr_load_origin_t *o = &w->origin;
    if (o->source == DCR_LOAD_SRC_RESIDENT || o->from_resident) {
        dcr__unsupported(pl, "copy_",
                         "its source reads resident storage (read-modify-write), "
                         "so the stored value depends on more than the tensor");
    } else if (o->source == DCR_LOAD_SRC_FOREIGN || !o->from_input) {
        dcr__unsupported(pl, "copy_",
                         "its source is not derived from the loaded tensor "
                         "(constants must be written with fill_)");
    } else if (o->ops & DCR_LOAD_OP_BLOCKWISE) {
        dcr__unsupported(pl, o->op,
                         "not elementwise: one canonical value can change several "
                         "stored values");
    }
    if (o->source != DCR_LOAD_SRC_INPUT) {
        pl->info.views_only = false;
        dcr__not_xor(pl, o->op,
                     "new storage between the tensor and the copy_: XOR masks "
                     "cannot pass through it");
    } else {
        if (w->src.dtype != w->dst.dtype) {
            char op[64];
            snprintf(op, sizeof(op), "copy_ %s->%s", dcr_dtype_name(w->src.dtype),
                     dcr_dtype_name(w->dst.dtype));
            dcr__not_xor(pl, op, "copy_ converts the dtype: XOR masks cannot pass through it");
        }
        if (!dcr__nested(&w->src)) pl->invertible = false;
    }
    if (!o->nan_safe) pl->info.placeholder_safe = false;
}

static dcr_status_t dcr__probe_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    dcr__probe_t *p = arg;
    dcr__probe_classify_copy(p->plan, w);
    return dcr__probe_push(p, w);
}

static dcr_status_t dcr__probe_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    return dcr__probe_push(arg, w);
}

static const dcr_load_hooks_t dcr__probe_hooks = {dcr__probe_copy, dcr__probe_fill};

/* Class of one tensor once its probe call has returned. */
static void dcr__probe_finish(dcr__plan_t *pl, dcr_load_ctx_t *ctx, dcr_status_t st)
{
    pl->info.copies = dcr_load_ctx_copies(ctx);
    pl->info.fills = dcr_load_ctx_fills(ctx);
    if (st != DCR_OK) {
        char reason[224];
        snprintf(reason, sizeof(reason), "the loader failed: %s", dcr_error_line(st));
        dcr__unsupported(pl, "load", reason);
    } else if (dcr_load_ctx_skipped(ctx) && pl->nwrites > 0) {
        dcr__unsupported(pl, "skip", "explicit skip after writes");
    } else if (dcr_load_ctx_skipped(ctx)) {
        pl->info.cls = DCR_PATH_SKIPPED;
        dcr__plan_say(pl, NULL, dcr_load_ctx_skip_reason(ctx));
    } else if (pl->info.copies == 0) {
        dcr__unsupported(pl, "load",
                         "reported loaded without an intercepted copy_ or an "
                         "explicit skip");
    }
}

static dcr_status_t dcr__probe_one(dcr_receiver_t *r, size_t i)
{
    const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, i);
    dcr__plan_t *pl = &r->plans[i];
    memset(pl, 0, sizeof(*pl));
    pl->info.cls = DCR_PATH_OVERWRITE; /* provisional until the end of prewarm */
    pl->info.views_only = pl->info.placeholder_safe = true;
    pl->xor_ok = pl->invertible = true;
    pl->info.op = pl->info.reason = "";
    dcr_view_t view;
    DCR_CHECK(dcr_view_contiguous(r->scratch, d->dtype, d->ndim, d->shape, &view));
    dcr__probe_t probe = {r, pl, 0};
    dcr_load_ctx_set_hooks(r->ctx, &dcr__probe_hooks, &probe);
    dcr_status_t st = dcr_loader_load(r->loader, r->ctx, d->name, &view);
    dcr_load_ctx_set_hooks(r->ctx, NULL, NULL);
    dcr__probe_finish(pl, r->ctx, st);
    /* Plans live as long as the receiver: no spare room. */
    if (probe.cap > pl->nwrites && pl->nwrites > 0) {
        dcr__pwrite_t *ws = realloc(pl->writes, pl->nwrites * sizeof(*ws));
        if (ws) pl->writes = ws;
    }
    return DCR_OK;
}

/* ---- overlaps and gaps ---- */

typedef struct dcr__iv {
    int64_t lo, hi;
    size_t param;
    uint32_t tensor, seq;
    uint8_t kind;
} dcr__iv_t;

typedef struct dcr__ivs {
    dcr__iv_t *v;
    size_t len, cap;
    dcr__iv_t cur; /* template for emitted intervals */
} dcr__ivs_t;

#define DCR__IVS_MAX ((size_t)1 << 26)

static dcr_status_t dcr__ivs_emit(int64_t lo, int64_t hi, void *arg)
{
    dcr__ivs_t *s = arg;
    if (s->len == s->cap) {
        if (s->cap >= DCR__IVS_MAX)
            return dcr_error_set(DCR_ENOMEM, "prewarm: more than %zu write intervals",
                                 DCR__IVS_MAX);
        size_t cap = s->cap ? 2 * s->cap : 1024;
        dcr__iv_t *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL) return dcr_error_set(DCR_ENOMEM, "prewarm: write intervals");
        s->v = v;
        s->cap = cap;
    }
    dcr__iv_t iv = s->cur;
    iv.lo = lo;
    iv.hi = hi;
    s->v[s->len++] = iv;
    return DCR_OK;
}

static int dcr__iv_cmp(const void *a, const void *b)
{
    const dcr__iv_t *x = a, *y = b;
    if (x->param != y->param) return x->param < y->param ? -1 : 1;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static dcr_status_t dcr__collect(dcr_receiver_t *r, dcr__ivs_t *s)
{
    for (size_t t = 0; t < dcr_inventory_count(r->inv); t++) {
        const dcr__plan_t *pl = &r->plans[t];
        for (size_t k = 0; k < pl->nwrites; k++) {
            s->cur = (dcr__iv_t){0,           0,           pl->writes[k].param,
                                 (uint32_t)t, (uint32_t)k, (uint8_t)pl->writes[k].kind};
            dcr_status_t st = dcr__footprint(&pl->writes[k].dst, dcr__ivs_emit, s);
            if (st != DCR_OK) {
                dcr_error_prefix("prewarm: tensor %s: ", dcr_inventory_at(r->inv, t)->name);
                return st;
            }
        }
    }
    qsort(s->v, s->len, sizeof(s->v[0]), dcr__iv_cmp);
    return DCR_OK;
}

/* Multi-index of storage element e inside view v (greedy division by the
 * strides, largest first), or false when v does not reach e. */
static bool dcr__invert(const dcr_view_t *v, int64_t e, int64_t *idx)
{
    int order[DCR_MAX_DIMS], nd = 0;
    for (int i = 0; i < v->ndim; i++) {
        idx[i] = 0;
        if (v->shape[i] == 1) continue;
        int k = nd++;
        while (k > 0 && v->strides[order[k - 1]] < v->strides[i]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    int64_t rem = e - v->offset;
    if (rem < 0) return false;
    for (int k = 0; k < nd; k++) {
        int d = order[k];
        int64_t q = rem / v->strides[d];
        if (q >= v->shape[d]) return false;
        idx[d] = q;
        rem -= q * v->strides[d];
    }
    return rem == 0;
}

static int64_t dcr__position(const dcr_view_t *v, const int64_t *idx)
{
    int64_t off = v->offset;
    for (int i = 0; i < v->ndim; i++) off += idx[i] * v->strides[i];
    return off;
}

/* Whether two copies from views of the tensor put the same tensor element
 * into every destination element they share in [lo, hi). */
static bool dcr__copies_agree(const dcr__pwrite_t *a, const dcr__pwrite_t *b, int64_t lo,
                              int64_t hi)
{
    if (!dcr__nested(&a->dst) || !dcr__nested(&b->dst)) return false;
    int64_t ia[DCR_MAX_DIMS], ib[DCR_MAX_DIMS];
    for (int64_t e = lo; e < hi; e++) {
        if (!dcr__invert(&a->dst, e, ia) || !dcr__invert(&b->dst, e, ib)) continue;
        if (dcr__position(&a->src, ia) != dcr__position(&b->src, ib)) return false;
    }
    return true;
}

/* Two writes x and y (of one tensor or two) touch common elements of a
 * parameter. */
static void dcr__overlap(dcr_receiver_t *r, const dcr__iv_t *x, const dcr__iv_t *y)
{
    const dcr_param_t *prm = dcr_params_at(r->params, x->param);
    dcr__plan_t *a = &r->plans[x->tensor], *b = &r->plans[y->tensor];
    char reason[224];
    if (x->tensor != y->tensor) {
        snprintf(reason, sizeof(reason), "writes elements of %s that tensor %s writes too",
                 prm->name, dcr_inventory_at(r->inv, y->tensor)->name);
        dcr__unsupported(a, "copy_", reason);
        snprintf(reason, sizeof(reason), "writes elements of %s that tensor %s writes too",
                 prm->name, dcr_inventory_at(r->inv, x->tensor)->name);
        dcr__unsupported(b, "copy_", reason);
        return;
    }
    const dcr__iv_t *first = x->seq < y->seq ? x : y, *later = x->seq < y->seq ? y : x;
    if (first->kind == DCR_LOAD_FILL && later->kind == DCR_LOAD_FILL) return;
    if (later->kind == DCR_LOAD_FILL) {
        snprintf(reason, sizeof(reason),
                 "fill_ of %s overwrites elements an earlier copy_ "
                 "wrote, so a delta cannot reproduce the dense result",
                 prm->name);
        dcr__unsupported(a, "fill_", reason);
        return;
    }
    snprintf(reason, sizeof(reason), "copy_ into %s overlaps another write of the same tensor",
             prm->name);
    dcr__not_xor(a, "copy_", reason);
    if (first->kind != DCR_LOAD_COPY) return;
    /* Overlapping copies reproduce the dense result only if they carry the
     * same tensor element, which is provable for views of the tensor alone. */
    const dcr__pwrite_t *wa = &a->writes[first->seq], *wb = &a->writes[later->seq];
    int64_t lo = x->lo > y->lo ? x->lo : y->lo, hi = x->hi < y->hi ? x->hi : y->hi;
    if (wa->source != DCR_LOAD_SRC_INPUT || wb->source != DCR_LOAD_SRC_INPUT ||
        !dcr__copies_agree(wa, wb, lo, hi)) {
        snprintf(reason, sizeof(reason),
                 "overlapping copies into %s carry different tensor "
                 "elements (or elements from new storage), so a delta "
                 "cannot reproduce the dense result",
                 prm->name);
        dcr__unsupported(a, "copy_", reason);
        return;
    }
    a->overlap = true;
}

/* Sweeps one parameter's sorted intervals: pairs that overlap and the first
 * element no write covers. */
static dcr_status_t dcr__sweep(dcr_receiver_t *r, const dcr__iv_t *v, size_t n, size_t param,
                               size_t **active_p, size_t *cap_p)
{
    const dcr_param_t *prm = dcr_params_at(r->params, param);
    int64_t numel = dcr_shape_numel(prm->ndim, prm->shape), covered = 0;
    size_t nact = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].lo > covered) break;
        size_t keep = 0;
        for (size_t j = 0; j < nact; j++) {
            const dcr__iv_t *y = &v[(*active_p)[j]];
            if (y->hi <= v[i].lo) continue;
            dcr__overlap(r, y, &v[i]);
            (*active_p)[keep++] = (*active_p)[j];
        }
        nact = keep;
        if (nact == *cap_p) {
            size_t cap = *cap_p ? 2 * *cap_p : 64;
            size_t *a = realloc(*active_p, cap * sizeof(*a));
            if (a == NULL) return dcr_error_set(DCR_ENOMEM, "prewarm: overlap sweep");
            *active_p = a;
            *cap_p = cap;
        }
        (*active_p)[nact++] = i;
        if (v[i].hi > covered) covered = v[i].hi;
    }
    if (covered < numel) {
        int64_t end = numel;
        for (size_t i = 0; i < n; i++)
            if (v[i].lo > covered) {
                end = v[i].lo;
                break;
            }
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "prewarm: parameter %s: elements [%lld, %lld) are written by no "
                             "intercepted copy_ or fill_ (does the loader write around the hook?)",
                             prm->name, (long long)covered, (long long)end);
    }
    return DCR_OK;
}

static dcr_status_t dcr__cross_checks(dcr_receiver_t *r)
{
    dcr__ivs_t s = {0};
    size_t *active = NULL, cap = 0;
    dcr_status_t st = dcr__collect(r, &s);
    size_t at = 0;
    for (size_t p = 0; st == DCR_OK && p < dcr_params_count(r->params); p++) {
        size_t end = at;
        while (end < s.len && s.v[end].param == p) end++;
        st = dcr__sweep(r, s.v + at, end - at, p, &active, &cap);
        at = end;
    }
    free(active);
    free(s.v);
    return st;
}

/* ---- entry points ---- */

/* Final classes once every write is known; the first unsupported tensor
 * becomes the error. */
static dcr_status_t dcr__prewarm_result(dcr_receiver_t *r)
{
    size_t n = dcr_inventory_count(r->inv), bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        dcr__plan_t *pl = &r->plans[i];
        if (pl->info.cls == DCR_PATH_UNSUPPORTED) {
            if (bad++ == 0) first = i;
        } else if (pl->info.cls != DCR_PATH_SKIPPED) {
            pl->info.cls = pl->xor_ok ? DCR_PATH_XOR : DCR_PATH_OVERWRITE;
        }
        /* Sparse apply needs every source position recoverable. */
        if (!pl->invertible) pl->info.views_only = false;
    }
    if (bad == 0) return DCR_OK;
    const dcr__plan_t *pl = &r->plans[first];
    return dcr_error_set(DCR_EUNSUPPORTED, "prewarm (%s): tensor %s: %s: %s%s",
                         dcr_loader_name(r->loader), dcr_inventory_at(r->inv, first)->name,
                         pl->info.op, pl->info.reason,
                         bad > 1 ? " (and more unsupported tensors)" : "");
}

/* Scratch without bytes yet shrinks to the largest tensor an item's pass of
 * the loader runs over: items of views-only paths replay the probe's copies
 * and never touch it, so at most the other paths' tensors (all of them with
 * full_pass or loader_per_item). */
static void dcr__scratch_fit(dcr_receiver_t *r)
{
    if (r->scratch->data != NULL) return;
    size_t most = 0;
    for (size_t i = 0; i < dcr_inventory_count(r->inv); i++) {
        const dcr__plan_t *pl = &r->plans[i];
        bool pass = pl->info.cls == DCR_PATH_XOR || pl->info.cls == DCR_PATH_OVERWRITE;
        bool replay = pl->info.views_only && !r->cfg.full_pass && !r->cfg.loader_per_item;
        size_t bytes = dcr_desc_bytes(dcr_inventory_at(r->inv, i));
        if (pass && !replay && bytes > most) most = bytes;
    }
    r->scratch->bytes = most;
}

dcr_status_t dcr_receiver_prewarm(dcr_receiver_t *r)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "prewarm: NULL receiver");
    dcr__plans_free(r);
    size_t n = dcr_inventory_count(r->inv);
    r->plans = calloc(n ? n : 1, sizeof(*r->plans));
    if (r->plans == NULL) return dcr_error_set(DCR_ENOMEM, "prewarm: %zu plans", n);
    r->probe_writes = 0;
    /* The probe views every canonical tensor over scratch. */
    if (r->scratch->data == NULL) r->scratch->bytes = dcr_inventory_max_tensor_bytes(r->inv);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){.probe = true});
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < n && st == DCR_OK; i++) st = dcr__probe_one(r, i);
    dcr_load_ctx_set_mode(r->ctx, (dcr_load_mode_t){0});
    if (st != DCR_OK) {
        dcr__plans_free(r);
        return st;
    }
    /* An unsupported tensor names the cause more precisely than the gap it
     * may leave, so it is reported first; the classes are finished either
     * way so callers can read them. */
    dcr_status_t cross = dcr__cross_checks(r);
    if (cross != DCR_OK && cross != DCR_EUNSUPPORTED) {
        dcr__plans_free(r);
        return cross;
    }
    char detail[512] = "";
    if (cross != DCR_OK) snprintf(detail, sizeof(detail), "%s", dcr_error_detail());
    st = dcr__prewarm_result(r);
    if (st == DCR_OK && cross != DCR_OK) st = dcr_error_set(cross, "%s", detail);
    if (st == DCR_OK) st = dcr__replay_compile(r);
    r->prewarmed = st == DCR_OK;
    if (r->prewarmed) dcr__scratch_fit(r);
    return st;
}

dcr_status_t dcr_receiver_path(const dcr_receiver_t *r, size_t i, dcr_path_info_t *out_p)
{
    if (r == NULL || out_p == NULL || r->plans == NULL || i >= dcr_inventory_count(r->inv))
        return dcr_error_set(DCR_EINVAL, "receiver_path: no prewarm result for tensor %zu", i);
    *out_p = r->plans[i].info;
    return DCR_OK;
}

void dcr_receiver_path_counts(const dcr_receiver_t *r, size_t *counts)
{
    for (int c = 0; c < DCR_PATH_COUNT; c++) counts[c] = 0;
    if (r == NULL || r->plans == NULL) return;
    for (size_t i = 0; i < dcr_inventory_count(r->inv); i++) counts[r->plans[i].info.cls]++;
}
