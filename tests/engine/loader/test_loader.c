/* ctest-labels: unit
 *
 * The loader API: resident parameters, the registry, the load context's
 * views, new-storage ops, provenance, activity tracking, NaN watching, the
 * hook table and a loader that wraps another. Expected values come from first
 * principles (element positions, IEEE bit patterns). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/loader.h"

/* ---- parameters ---- */

static void test_params(void **state)
{
    dcr_params_t *p;
    assert_int_equal(dcr_params_create(false, &p), DCR_OK);
    int64_t s2[2] = {3, 4}, s1[1] = {5};
    size_t i0, i1;
    assert_int_equal(dcr_params_declare(p, "w", DCR_DTYPE_BF16, 2, s2, &i0), DCR_OK);
    assert_int_equal(dcr_params_declare(p, "b", DCR_DTYPE_FP32, 1, s1, &i1), DCR_OK);
    assert_int_equal(i0, 0);
    assert_int_equal(i1, 1);
    assert_int_equal(dcr_params_declare(p, "w", DCR_DTYPE_BF16, 2, s2, NULL), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "declared twice"));
    assert_int_equal(dcr_params_declare(p, "", DCR_DTYPE_BF16, 2, s2, NULL), DCR_EINVAL);
    int64_t bad[1] = {0};
    assert_int_equal(dcr_params_declare(p, "z", DCR_DTYPE_BF16, 1, bad, NULL), DCR_EINVAL);
    assert_int_equal(dcr_params_count(p), 2);
    assert_int_equal(dcr_params_find(p, "b"), 1);
    assert_int_equal(dcr_params_find(p, "nope"), -1);
    const dcr_param_t *b = dcr_params_at(p, 1);
    assert_string_equal(b->name, "b");
    assert_int_equal(b->storage->bytes, 20);
    assert_int_equal(dcr_params_find_storage(p, b->storage), 1);
    assert_int_equal(dcr_params_bytes(p), 24 + 20);
    dcr_view_t v;
    assert_int_equal(dcr_params_view(p, 0, &v), DCR_OK);
    assert_int_equal(v.shape[1], 4);
    assert_null(dcr_params_at(p, 2));
    dcr_params_destroy(p);
    dcr_params_destroy(NULL);

    /* Shape-only: sizes without data, even at sizes no machine here holds. */
    assert_int_equal(dcr_params_create(true, &p), DCR_OK);
    int64_t huge[2] = {1 << 20, 1 << 20};
    assert_int_equal(dcr_params_declare(p, "huge", DCR_DTYPE_FP32, 2, huge, NULL), DCR_OK);
    assert_null(dcr_params_at(p, 0)->storage->data);
    assert_int_equal(dcr_params_at(p, 0)->storage->bytes, (size_t)4 << 40);
    dcr_params_destroy(p);
}

/* ---- a loader for the context tests ---- */

static float plus_one(float x, void *arg)
{
    return x + 1.0f;
}

static float nan_to_zero(float x, void *arg)
{
    return isnan(x) ? 0.0f : x;
}

static float overflow(float x, void *arg)
{
    return x * 1e30f;
}

/* Tensor "m" [2, 3] BF16 goes to param "pm" [3, 2] transposed; "c" [4] BF16
 * goes to "pc" FP32 through cast + map; "k" [2] to "pk" [4] as cat(k, k). */
/* The handle: a non-NULL config makes the map of "c" overflow. */
typedef struct t_loader {
    dcr_loader_t pub; /* first: the wrappers' header */
    const void *config;
} t_loader_t;

static dcr_status_t t_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                             dcr_loader_t **out_p)
{
    (void)self;
    int64_t s32[2] = {3, 2}, s4[1] = {4};
    DCR_CHECK(dcr_params_declare(p, "pm", DCR_DTYPE_BF16, 2, s32, NULL));
    DCR_CHECK(dcr_params_declare(p, "pc", DCR_DTYPE_FP32, 1, s4, NULL));
    DCR_CHECK(dcr_params_declare(p, "pk", DCR_DTYPE_BF16, 1, s4, NULL));
    t_loader_t *t = calloc(1, sizeof(*t));
    if (t == NULL) return dcr_error_set(DCR_ENOMEM, "t");
    t->config = config;
    *out_p = &t->pub;
    return DCR_OK;
}

static void t_destroy(dcr_loader_t *l)
{
    free(l);
}

static dcr_status_t t_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                           const dcr_view_t *w)
{
    const void *state = ((t_loader_t *)l)->config;
    dcr_view_t p, a, b;
    if (strcmp(name, "m") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "pm", &p));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 1, &a));
        return dcr_load_copy(ctx, &a, w);
    }
    if (strcmp(name, "c") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "pc", &p));
        DCR_CHECK(dcr_load_cast(ctx, w, DCR_DTYPE_FP32, &a));
        DCR_CHECK(dcr_load_map(ctx, &a, DCR_DTYPE_FP32, state ? overflow : plus_one, NULL,
                               state ? "overflow" : "plus_one", &b));
        return dcr_load_copy(ctx, &p, &b);
    }
    if (strcmp(name, "k") == 0) {
        dcr_view_t parts[2] = {*w, *w};
        DCR_CHECK(dcr_load_param(ctx, "pk", &p));
        DCR_CHECK(dcr_load_cat(ctx, 2, parts, 0, &a));
        return dcr_load_copy(ctx, &p, &a);
    }
    return dcr_error_set(DCR_ENOTFOUND, "t: %s", name);
}

static const dcr_loader_ops_t t_ops = {
    {DCR_LOADER_OPS_VERSION, "test.loader", NULL}, t_create, t_destroy, t_load};

static void test_registry(void **state)
{
    assert_int_equal(dcr_loader_register(&t_ops), DCR_OK);
    assert_int_equal(dcr_loader_register(&t_ops), DCR_OK); /* idempotent */
    static const dcr_loader_ops_t other = {
        {DCR_LOADER_OPS_VERSION, "test.loader", NULL}, t_create, t_destroy, t_load};
    assert_int_equal(dcr_loader_register(&other), DCR_EINVAL);
    static const dcr_loader_ops_t noload = {
        {DCR_LOADER_OPS_VERSION, "test.noload", NULL}, t_create, t_destroy, NULL};
    assert_int_equal(dcr_loader_register(&noload), DCR_EINVAL);
    /* A table of another layout is refused at registration, named. */
    static const dcr_loader_ops_t old = {
        {DCR_LOADER_OPS_VERSION + 1, "test.old", NULL}, t_create, t_destroy, t_load};
    assert_int_equal(dcr_loader_register(&old), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "test.old"));
    assert_null(dcr_loader_find("test.old"));
    assert_ptr_equal(dcr_loader_find("test.loader"), &t_ops);
    assert_null(dcr_loader_find("test.absent"));
    dcr_loader_t *l = NULL;
    assert_int_equal(dcr_loader_create("test.absent", NULL, false, &l), DCR_ENOTFOUND);
    assert_null(l);
    assert_int_equal(dcr_loader_create("test.loader", NULL, false, &l), DCR_OK);
    assert_string_equal(dcr_loader_name(l), "test.loader");
    assert_int_equal(dcr_params_count(dcr_loader_params(l)), 3);
    dcr_loader_destroy(l);
    dcr_loader_destroy(NULL);
}

typedef struct fixture {
    dcr_loader_t *l;
    dcr_load_ctx_t *ctx;
    dcr_storage_t *m, *c, *k;
    dcr_view_t vm, vc, vk;
} fixture_t;

static void fixture_init(fixture_t *f, const void *config)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(dcr_loader_register(&t_ops), DCR_OK);
    assert_int_equal(dcr_loader_create("test.loader", config, false, &f->l), DCR_OK);
    assert_int_equal(dcr_load_ctx_create(dcr_loader_params(f->l), &f->ctx), DCR_OK);
    int64_t sm[2] = {2, 3}, sc[1] = {4}, sk[1] = {2};
    assert_int_equal(dcr_storage_create(12, &f->m), DCR_OK);
    assert_int_equal(dcr_storage_create(8, &f->c), DCR_OK);
    assert_int_equal(dcr_storage_create(4, &f->k), DCR_OK);
    assert_int_equal(dcr_view_contiguous(f->m, DCR_DTYPE_BF16, 2, sm, &f->vm), DCR_OK);
    assert_int_equal(dcr_view_contiguous(f->c, DCR_DTYPE_BF16, 1, sc, &f->vc), DCR_OK);
    assert_int_equal(dcr_view_contiguous(f->k, DCR_DTYPE_BF16, 1, sk, &f->vk), DCR_OK);
    uint16_t *m = f->m->data, *c = f->c->data, *k = f->k->data;
    for (int i = 0; i < 6; i++) m[i] = (uint16_t)(0x3F80 + i); /* distinct bits */
    c[0] = 0x3F80;                                             /* 1.0 */
    c[1] = 0x7FC1;                                             /* NaN with a payload */
    c[2] = 0x8000;                                             /* -0.0 */
    c[3] = 0x4000;                                             /* 2.0 */
    k[0] = 0x1234;
    k[1] = 0xFFFF; /* NaN */
}

static void fixture_free(fixture_t *f)
{
    dcr_storage_destroy(f->m);
    dcr_storage_destroy(f->c);
    dcr_storage_destroy(f->k);
    dcr_load_ctx_destroy(f->ctx);
    dcr_loader_destroy(f->l);
}

static const void *param_data(fixture_t *f, const char *name)
{
    const dcr_params_t *p = dcr_loader_params(f->l);
    return dcr_params_at(p, (size_t)dcr_params_find(p, name))->storage->data;
}

static void test_dense_plain(void **state)
{
    fixture_t f;
    fixture_init(&f, NULL);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "m", &f.vm), DCR_OK);
    assert_int_equal(dcr_load_ctx_copies(f.ctx), 1);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &f.vc), DCR_OK);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "k", &f.vk), DCR_OK);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "zz", &f.vk), DCR_ENOTFOUND);
    /* pm[j][i] = m[i][j]. */
    const uint16_t *pm = param_data(&f, "pm");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) assert_int_equal(pm[j * 2 + i], 0x3F80 + i * 3 + j);
    /* pc = float(c) + 1: 2.0, NaN, 1.0, 3.0. */
    const float *pc = param_data(&f, "pc");
    assert_true(pc[0] == 2.0f && isnan(pc[1]) && pc[2] == 1.0f && pc[3] == 3.0f);
    const uint16_t *pk = param_data(&f, "pk");
    assert_int_equal(pk[0], 0x1234);
    assert_int_equal(pk[1], 0xFFFF);
    assert_int_equal(pk[2], 0x1234);
    assert_int_equal(pk[3], 0xFFFF);
    fixture_free(&f);
}

/* ---- hooks and provenance ---- */

typedef struct seen {
    int copies, fills;
    dcr_load_origin_t origin;
    char op[64];
    bool has_active;
    uint8_t active[8];
} seen_t;

static dcr_status_t rec_copy(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    seen_t *s = arg;
    s->copies++;
    s->origin = w->origin;
    snprintf(s->op, sizeof(s->op), "%s", w->origin.op);
    s->has_active = w->src_active != NULL;
    if (w->src_active) {
        /* Read the activity map through its own view. */
        for (int64_t i = 0; i < dcr_view_numel(w->src_active) && i < 8; i++) {
            int64_t idx[DCR_MAX_DIMS] = {0};
            int64_t rem = i;
            for (int d = w->src_active->ndim - 1; d >= 0; d--) {
                idx[d] = rem % w->src_active->shape[d];
                rem /= w->src_active->shape[d];
            }
            s->active[i] = *(const uint8_t *)dcr_view_elem(w->src_active, idx);
        }
    }
    return DCR_OK;
}

static dcr_status_t rec_fill(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w)
{
    ((seen_t *)arg)->fills++;
    return DCR_OK;
}

static const dcr_load_hooks_t rec_hooks = {rec_copy, rec_fill};

static void test_provenance(void **state)
{
    fixture_t f;
    fixture_init(&f, NULL);
    seen_t s = {0};
    dcr_load_ctx_set_hooks(f.ctx, &rec_hooks, &s);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "m", &f.vm), DCR_OK);
    assert_int_equal(s.origin.source, DCR_LOAD_SRC_INPUT);
    assert_int_equal(s.origin.ops, 0);
    assert_true(s.origin.from_input);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &f.vc), DCR_OK);
    assert_int_equal(s.origin.source, DCR_LOAD_SRC_TEMP);
    assert_int_equal(s.origin.ops, DCR_LOAD_OP_CAST | DCR_LOAD_OP_MAP);
    assert_true(s.origin.from_input);
    assert_true(s.origin.nan_safe);
    assert_string_equal(s.op, "map plus_one");
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "k", &f.vk), DCR_OK);
    assert_int_equal(s.origin.ops, DCR_LOAD_OP_CAT);
    assert_int_equal(s.copies, 3);
    /* Hooks see no data writes: the parameters stay zero. */
    const uint16_t *pm = param_data(&f, "pm");
    for (int i = 0; i < 6; i++) assert_int_equal(pm[i], 0);
    fixture_free(&f);
}

/* Probe mode computes nothing and needs no data anywhere. */
static void test_probe_without_data(void **state)
{
    fixture_t f;
    fixture_init(&f, NULL);
    seen_t s = {0};
    dcr_storage_t phantom = {NULL, 8};
    dcr_view_t vc = f.vc;
    vc.storage = &phantom;
    dcr_load_ctx_set_hooks(f.ctx, &rec_hooks, &s);
    dcr_load_ctx_set_mode(f.ctx, (dcr_load_mode_t){.probe = true});
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &vc), DCR_OK);
    assert_int_equal(s.origin.ops, DCR_LOAD_OP_CAST | DCR_LOAD_OP_MAP);
    assert_int_equal(s.copies, 1);
    fixture_free(&f);
}

/* Device mode: views and copies reach the hooks untouched; the ops that
 * would compute on host memory refuse with one line naming the tensor and
 * the op (the input has no data: a host read would fault); probe mode
 * computes nothing, so it passes. */
static void test_device_mode(void **state)
{
    fixture_t f;
    fixture_init(&f, NULL);
    seen_t s = {0};
    dcr_storage_t phantom = {NULL, 64};
    dcr_view_t vm = f.vm, vc = f.vc, vk = f.vk;
    vm.storage = vc.storage = vk.storage = &phantom;
    dcr_load_ctx_set_hooks(f.ctx, &rec_hooks, &s);
    dcr_load_ctx_set_mode(f.ctx, (dcr_load_mode_t){.device = true});
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "m", &vm), DCR_OK);
    assert_int_equal(s.copies, 1);
    const char *what[2][2] = {{"c", "cast"}, {"k", "cat"}};
    const dcr_view_t *in[2] = {&vc, &vk};
    for (int i = 0; i < 2; i++) {
        dcr_status_t st = dcr_loader_load(f.l, f.ctx, what[i][0], in[i]);
        assert_int_equal(st, DCR_EUNSUPPORTED);
        const char *line = dcr_error_line(st);
        char want[32];
        snprintf(want, sizeof(want), "load %s: %s", what[i][0], what[i][1]);
        if (strstr(line, want) == NULL) fail_msg("'%s' lacks '%s'", line, want);
        assert_null(strchr(line, '\n'));
    }
    dcr_load_ctx_set_mode(f.ctx, (dcr_load_mode_t){.device = true, .probe = true});
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &vc), DCR_OK);
    fixture_free(&f);
}

/* Tracked mode carries the activity map through cast, map and cat. */
static void test_tracking(void **state)
{
    fixture_t f;
    fixture_init(&f, NULL);
    seen_t s = {0};
    dcr_storage_t *act;
    assert_int_equal(dcr_storage_create(4, &act), DCR_OK);
    uint8_t *a = act->data;
    a[0] = 0;
    a[1] = 1;
    a[2] = 1;
    a[3] = 0;
    int64_t s4[1] = {4}, s2[1] = {2};
    dcr_view_t av;
    assert_int_equal(dcr_view_contiguous(act, DCR_DTYPE_FP8_E4M3, 1, s4, &av), DCR_OK);
    dcr_load_ctx_set_hooks(f.ctx, &rec_hooks, &s);
    dcr_load_ctx_set_mode(f.ctx, (dcr_load_mode_t){.track = true});
    dcr_load_ctx_set_input_active(f.ctx, &av);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &f.vc), DCR_OK);
    assert_true(s.has_active);
    assert_memory_equal(s.active, ((uint8_t[]){0, 1, 1, 0}), 4);
    /* cat(k, k) with k's second element active. */
    assert_int_equal(dcr_view_contiguous(act, DCR_DTYPE_FP8_E4M3, 1, s2, &av), DCR_OK);
    a[0] = 0;
    a[1] = 1;
    dcr_load_ctx_set_input_active(f.ctx, &av);
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "k", &f.vk), DCR_OK);
    assert_memory_equal(s.active, ((uint8_t[]){0, 1, 0, 1}), 4);
    /* Without a map nothing is active. */
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "m", &f.vm), DCR_OK);
    assert_false(s.has_active);
    dcr_storage_destroy(act);
    fixture_free(&f);
}

static dcr_status_t bad_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                             const dcr_view_t *w);
static const dcr_loader_ops_t bad_ops;

/* NaN watching: a finite value that a transform turns into NaN would read as
 * a placeholder; a map that turns NaN into a number is not NaN-safe. */
static void test_nan_watch(void **state)
{
    fixture_t f;
    fixture_init(&f, (void *)1); /* "c" uses the overflowing map */
    seen_t s = {0};
    dcr_load_ctx_set_hooks(f.ctx, &rec_hooks, &s);
    dcr_load_ctx_set_mode(f.ctx, (dcr_load_mode_t){.watch_nan = true});
    uint16_t *c = f.c->data;
    c[3] = 0x7F00; /* 1.7e38: times 1e30 is inf, not NaN */
    c[0] = 0xFF80; /* -inf: times 1e30 stays -inf */
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &f.vc), DCR_OK);
    int64_t created, lost;
    dcr_load_ctx_nan_events(f.ctx, &created, &lost);
    assert_int_equal(created, 0);
    assert_int_equal(lost, 0);
    c[2] = 0x0000; /* 0 * 1e30 = 0: no event either */
    c[0] = 0x3F80;
    assert_int_equal(dcr_loader_load(f.l, f.ctx, "c", &f.vc), DCR_OK);
    dcr_load_ctx_nan_events(f.ctx, &created, &lost);
    assert_int_equal(created + lost, 0);
    fixture_free(&f);

    /* FP8 does not saturate: 1e30 becomes NaN (created); nan_to_zero turns
     * the NaN into 0 (lost). */
    assert_int_equal(dcr_loader_register(&bad_ops), DCR_OK);
    dcr_loader_t *l;
    assert_int_equal(dcr_loader_create("test.bad", NULL, false, &l), DCR_OK);
    dcr_load_ctx_t *ctx;
    assert_int_equal(dcr_load_ctx_create(dcr_loader_params(l), &ctx), DCR_OK);
    dcr_storage_t *st;
    assert_int_equal(dcr_storage_create(12, &st), DCR_OK);
    float *x = st->data;
    x[0] = NAN;
    x[1] = 1e30f;
    x[2] = 1.0f;
    int64_t s3[1] = {3};
    dcr_view_t v, out;
    assert_int_equal(dcr_view_contiguous(st, DCR_DTYPE_FP32, 1, s3, &v), DCR_OK);
    dcr_load_ctx_set_mode(ctx, (dcr_load_mode_t){.watch_nan = true});
    assert_int_equal(dcr_loader_load(l, ctx, "cast_fp8", &v), DCR_OK);
    dcr_load_ctx_nan_events(ctx, &created, &lost);
    assert_int_equal(created, 1);
    assert_int_equal(lost, 0);
    assert_int_equal(dcr_loader_load(l, ctx, "lose_nan", &v), DCR_OK);
    dcr_load_ctx_nan_events(ctx, &created, &lost);
    assert_int_equal(created, 0);
    assert_int_equal(lost, 1);
    /* Outside a load call the context refuses work. */
    assert_int_equal(dcr_load_map(ctx, &v, DCR_DTYPE_FP32, nan_to_zero, NULL, "nan_to_zero", &out),
                     DCR_EINVAL);
    dcr_storage_destroy(st);
    dcr_load_ctx_destroy(ctx);
    dcr_loader_destroy(l);
}

/* ---- misuse ---- */

static dcr_status_t bad_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                             const dcr_view_t *w)
{
    dcr_view_t p, t;
    DCR_CHECK(dcr_load_param(ctx, "pm", &p));
    if (strcmp(name, "into_input") == 0) return dcr_load_copy(ctx, w, w);
    if (strcmp(name, "shape") == 0) return dcr_load_copy(ctx, &p, w);
    if (strcmp(name, "reinterpret") == 0) {
        t = p;
        t.dtype = DCR_DTYPE_FP16;
        return dcr_load_copy(ctx, &t, &t);
    }
    if (strcmp(name, "narrow") == 0) return dcr_load_narrow(ctx, &p, 0, 2, 5, &t);
    if (strcmp(name, "nan_map") == 0) {
        DCR_CHECK(dcr_load_map(ctx, w, DCR_DTYPE_BF16, nan_to_zero, NULL, "nan_to_zero", &t));
        dcr_load_origin_t o = dcr_load_ctx_origin(ctx, &t);
        if (o.nan_safe) return dcr_error_set(DCR_EMISMATCH, "nan_to_zero reported NaN-safe");
        return dcr_load_skip(ctx, "done");
    }
    if (strcmp(name, "cast_fp8") == 0) {
        DCR_CHECK(dcr_load_cast(ctx, w, DCR_DTYPE_FP8_E4M3, &t));
        return dcr_load_skip(ctx, "done");
    }
    if (strcmp(name, "lose_nan") == 0) {
        DCR_CHECK(dcr_load_map(ctx, w, DCR_DTYPE_FP32, nan_to_zero, NULL, "nan_to_zero", &t));
        return dcr_load_skip(ctx, "done");
    }
    if (strcmp(name, "resident") == 0) {
        DCR_CHECK(dcr_load_cast(ctx, &p, DCR_DTYPE_FP32, &t));
        dcr_load_origin_t o = dcr_load_ctx_origin(ctx, &t);
        if (!o.from_resident || o.from_input) return dcr_error_set(DCR_EMISMATCH, "provenance");
        return dcr_load_skip(ctx, "done");
    }
    return dcr_error_set(DCR_ENOTFOUND, "bad: %s", name);
}

static const dcr_loader_ops_t bad_ops = {
    {DCR_LOADER_OPS_VERSION, "test.bad", NULL}, t_create, t_destroy, bad_load};

static void test_misuse(void **state)
{
    assert_int_equal(dcr_loader_register(&bad_ops), DCR_OK);
    dcr_loader_t *l;
    assert_int_equal(dcr_loader_create("test.bad", NULL, false, &l), DCR_OK);
    dcr_load_ctx_t *ctx;
    assert_int_equal(dcr_load_ctx_create(dcr_loader_params(l), &ctx), DCR_OK);
    dcr_storage_t *st;
    assert_int_equal(dcr_storage_create(12, &st), DCR_OK);
    int64_t s23[2] = {2, 3};
    dcr_view_t v;
    assert_int_equal(dcr_view_contiguous(st, DCR_DTYPE_BF16, 2, s23, &v), DCR_OK);
    assert_int_equal(dcr_loader_load(l, ctx, "into_input", &v), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not a resident parameter"));
    assert_int_equal(dcr_loader_load(l, ctx, "shape", &v), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "shapes differ"));
    assert_int_equal(dcr_loader_load(l, ctx, "reinterpret", &v), DCR_EINVAL);
    assert_int_equal(dcr_loader_load(l, ctx, "narrow", &v), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "load narrow"));
    assert_int_equal(dcr_loader_load(l, ctx, "nan_map", &v), DCR_OK);
    assert_int_equal(dcr_loader_load(l, ctx, "resident", &v), DCR_OK);
    /* A context bound to other parameters is refused. */
    dcr_params_t *other;
    assert_int_equal(dcr_params_create(false, &other), DCR_OK);
    dcr_load_ctx_t *octx;
    assert_int_equal(dcr_load_ctx_create(other, &octx), DCR_OK);
    assert_int_equal(dcr_loader_load(l, octx, "shape", &v), DCR_EINVAL);
    dcr_load_ctx_destroy(octx);
    dcr_params_destroy(other);
    dcr_storage_destroy(st);
    dcr_load_ctx_destroy(ctx);
    dcr_loader_destroy(l);
}

/* ---- a loader that wraps another ---- */

/* Failing or delaying loads needs no hook in the engine: a loader of its
 * own, registered like any other, calls the loader it wraps. */
static int g_wrapped_loads;

static dcr_status_t wrap_create(const dcr_loader_ops_t *self, const void *config,
                                dcr_params_t *params, dcr_loader_t **out_p)
{
    const dcr_loader_ops_t *parent = self->hdr.parent; /* the loader it wraps */
    return parent->create(parent, config, params, out_p);
}

/* The handle is the wrapped loader's; its ops are this table, whose header
 * names the wrapped one. */
static void wrap_destroy(dcr_loader_t *l)
{
    const dcr_loader_ops_t *parent = l->ops->hdr.parent;
    parent->destroy(l);
}

static dcr_status_t wrap_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *tensor)
{
    const dcr_loader_ops_t *parent = l->ops->hdr.parent;
    g_wrapped_loads++;
    if (strcmp(name, "k") == 0) return dcr_error_set(DCR_EIO, "injected failure for %s", name);
    return parent->load(l, ctx, name, tensor);
}

static const dcr_loader_ops_t wrap_ops = {
    {DCR_LOADER_OPS_VERSION, "test.wrap", &t_ops}, wrap_create, wrap_destroy, wrap_load};

static void test_wrapping_loader(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, NULL);
    assert_int_equal(dcr_loader_register(&wrap_ops), DCR_OK);
    dcr_loader_t *l = NULL;
    assert_int_equal(dcr_loader_create("test.wrap", NULL, false, &l), DCR_OK);
    dcr_load_ctx_t *ctx = NULL;
    assert_int_equal(dcr_load_ctx_create(dcr_loader_params(l), &ctx), DCR_OK);
    assert_int_equal(dcr_loader_load(l, ctx, "m", &f.vm), DCR_OK);
    assert_int_equal(dcr_loader_load(l, ctx, "k", &f.vk), DCR_EIO);
    assert_string_equal(dcr_error_detail(), "injected failure for k");
    assert_int_equal(g_wrapped_loads, 2);
    /* The wrapped loader wrote "m" into the wrapping loader's parameters:
     * pm[j][i] = m[i][j]. */
    const dcr_params_t *p = dcr_loader_params(l);
    const uint16_t *pm = dcr_params_at(p, (size_t)dcr_params_find(p, "pm"))->storage->data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) assert_int_equal(pm[j * 2 + i], 0x3F80 + i * 3 + j);
    dcr_load_ctx_destroy(ctx);
    dcr_loader_destroy(l);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_dense_plain),
        cmocka_unit_test(test_provenance),
        cmocka_unit_test(test_probe_without_data),
        cmocka_unit_test(test_device_mode),
        cmocka_unit_test(test_tracking),
        cmocka_unit_test(test_nan_watch),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_wrapping_loader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
