/* ctest-labels: unit
 *
 * Receivers against the dense oracle with a small hand-written loader whose
 * paths cover every class (views, transposed views, vocabulary fill, cast,
 * elementwise map, cat, skip) and every way a loader can break the rules.
 * Records come from the bitwise canonical diff, payloads from the codec, and
 * every resident byte is compared with a fresh dense load. */
#include <blake2.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/receiver.h"
#include "engine/receiver/receiver_test_util.h"
#include "testkit.h"

/* ---- the toy loader ---- */

enum {
    V_FP32_B = 1 << 0,         /* b kept in FP32: a cast */
    V_BLOCKWISE = 1 << 1,      /* c through a blockwise op: unsupported */
    V_RESIDENT = 1 << 2,       /* b copied from resident storage: unsupported */
    V_NOCOPY = 1 << 3,         /* a "loaded" without a copy: unsupported */
    V_GAP = 1 << 4,            /* a leaves a row of its parameter unwritten */
    V_CROSS = 1 << 5,          /* g written into b's parameter: unsupported */
    V_FILL_AFTER = 1 << 6,     /* e filled after its copy: unsupported */
    V_NAN_MAKER = 1 << 7,      /* c's map turns large finite values into NaN */
    V_NAN_UNSAFE = 1 << 8,     /* c's map turns NaN into 0: the placeholder dies */
    V_OVERLAP = 1 << 9,        /* f copied twice into overlapping rows, agreeing */
    V_OVERLAP_BAD = 1 << 10,   /* f copied twice into overlapping rows, disagreeing */
    V_TRANSPOSE_SRC = 1 << 11, /* d read through a transposed input view */
};

typedef struct toy_cfg {
    int rank; /* of 2 */
    unsigned v;
} toy_cfg_t;

static int g_sneaky; /* after prewarm: a writes around the hook */

/* The handle: the configuration it was created with. */
typedef struct toy_loader {
    dcr_loader_t pub; /* first: the wrappers' header */
    toy_cfg_t c;
} toy_loader_t;

static dcr_status_t toy_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                               dcr_loader_t **out_p)
{
    (void)self;
    const toy_cfg_t *c = config;
    toy_loader_t *t = calloc(1, sizeof(*t));
    t->c = *c;
    const toy_cfg_t *s = &t->c;
    int64_t sa[2] = {4, 6}, sb[1] = {6}, sc[1] = {4}, sd[2] = {4, 3}, se[2] = {8, 4},
            sf[2] = {8, 2};
    DCR_CHECK(dcr_params_declare(p, "a", DCR_DTYPE_BF16, 2, sa, NULL));
    DCR_CHECK(
        dcr_params_declare(p, "b", s->v & V_FP32_B ? DCR_DTYPE_FP32 : DCR_DTYPE_BF16, 1, sb, NULL));
    DCR_CHECK(dcr_params_declare(p, "A", DCR_DTYPE_FP32, 1, sc, NULL));
    DCR_CHECK(dcr_params_declare(p, "d", DCR_DTYPE_BF16, 2, sd, NULL));
    DCR_CHECK(dcr_params_declare(p, "e", DCR_DTYPE_BF16, 2, se, NULL));
    DCR_CHECK(dcr_params_declare(p, "f", DCR_DTYPE_BF16, 2, sf, NULL));
    *out_p = &t->pub;
    return DCR_OK;
}

static void toy_destroy(dcr_loader_t *l)
{
    free(l);
}

static float neg_exp(float x, void *arg)
{
    return -expf(x);
}

static float nan_maker(float x, void *arg)
{
    return x > 100.0f ? NAN : -expf(x);
}

static float nan_unsafe(float x, void *arg)
{
    return isnan(x) ? 0.0f : -expf(x);
}

static void block_sum(const float *in, float *out, size_t n, void *arg)
{
    float s = 0;
    for (size_t i = 0; i < n; i++) s += in[i];
    for (size_t i = 0; i < n; i++) out[i] = in[i] - s;
}

static dcr_status_t toy_a(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, src, dst;
    DCR_CHECK(dcr_load_param(ctx, "a", &p));
    if ((s->v & V_NOCOPY) || g_sneaky) {
        /* Writes around the hook: straight into resident bytes. */
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, s->rank * 4, 4, &src));
        if (p.storage->data && src.storage->data)
            memcpy(p.storage->data, dcr_view_data(&src), 4 * 6 * 2);
        return DCR_OK;
    }
    int64_t rows = s->v & V_GAP ? 3 : 4;
    DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 0, rows, &dst));
    DCR_CHECK(dcr_load_narrow(ctx, w, 0, s->rank * 4, rows, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

static dcr_status_t toy_b(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, src;
    DCR_CHECK(dcr_load_param(ctx, "b", &p));
    if (s->v & V_RESIDENT) {
        DCR_CHECK(dcr_load_cast(ctx, &p, DCR_DTYPE_FP32, &src));
        DCR_CHECK(dcr_load_cast(ctx, &src, p.dtype, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    DCR_CHECK(dcr_load_cast(ctx, w, p.dtype, &src));
    return dcr_load_copy(ctx, &p, &src);
}

static dcr_status_t toy_c(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, a;
    DCR_CHECK(dcr_load_param(ctx, "A", &p));
    if (s->v & V_BLOCKWISE)
        DCR_CHECK(dcr_load_blockwise(ctx, w, DCR_DTYPE_FP32, 2, block_sum, NULL, "block_sum", &a));
    else
        DCR_CHECK(dcr_load_map(ctx, w, DCR_DTYPE_FP32,
                               s->v & V_NAN_MAKER    ? nan_maker
                               : s->v & V_NAN_UNSAFE ? nan_unsafe
                                                     : neg_exp,
                               NULL, "neg_exp", &a));
    return dcr_load_copy(ctx, &p, &a);
}

static dcr_status_t toy_d(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, dst;
    DCR_CHECK(dcr_load_param(ctx, "d", &p));
    if (s->v & V_TRANSPOSE_SRC) {
        /* The same placement seen from the other side: param = w^T. */
        dcr_view_t src;
        DCR_CHECK(dcr_load_transpose(ctx, w, 0, 1, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 1, &dst));
    return dcr_load_copy(ctx, &dst, w);
}

static dcr_status_t toy_e(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, dst;
    DCR_CHECK(dcr_load_param(ctx, "e", &p));
    DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 0, 5, &dst));
    DCR_CHECK(dcr_load_copy(ctx, &dst, w));
    if (s->v & V_FILL_AFTER) return dcr_load_fill(ctx, &p, 0.0);
    DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 5, 3, &dst));
    return dcr_load_fill(ctx, &dst, 0.0);
}

static dcr_status_t toy_f(const toy_cfg_t *s, dcr_load_ctx_t *ctx, const dcr_view_t *w)
{
    dcr_view_t p, dst, src, two[2] = {*w, *w}, cat;
    DCR_CHECK(dcr_load_param(ctx, "f", &p));
    if (s->v & (V_OVERLAP | V_OVERLAP_BAD)) {
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 0, 4, &dst));
        DCR_CHECK(dcr_load_copy(ctx, &dst, w));
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 4, 4, &dst));
        DCR_CHECK(dcr_load_copy(ctx, &dst, w));
        DCR_CHECK(dcr_load_narrow(ctx, &p, 0, 2, 2, &dst));
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, s->v & V_OVERLAP ? 2 : 0, 2, &src));
        return dcr_load_copy(ctx, &dst, &src);
    }
    DCR_CHECK(dcr_load_cat(ctx, 2, two, 0, &cat));
    return dcr_load_copy(ctx, &p, &cat);
}

static dcr_status_t toy_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                             const dcr_view_t *w)
{
    const toy_cfg_t *s = &((toy_loader_t *)l)->c;
    if (strcmp(name, "a") == 0) return toy_a(s, ctx, w);
    if (strcmp(name, "b") == 0) return toy_b(s, ctx, w);
    if (strcmp(name, "c") == 0) return toy_c(s, ctx, w);
    if (strcmp(name, "d") == 0) return toy_d(s, ctx, w);
    if (strcmp(name, "e") == 0) return toy_e(s, ctx, w);
    if (strcmp(name, "f") == 0) return toy_f(s, ctx, w);
    if (strcmp(name, "g") == 0) {
        if (s->v & V_CROSS) {
            dcr_view_t p;
            DCR_CHECK(dcr_load_param(ctx, "b", &p));
            dcr_view_t src;
            DCR_CHECK(dcr_load_cast(ctx, w, p.dtype, &src));
            return dcr_load_copy(ctx, &p, &src);
        }
        return dcr_load_skip(ctx, "not on this rank");
    }
    return dcr_error_set(DCR_ENOTFOUND, "toy: no parameter for %s", name);
}

static const dcr_loader_ops_t toy_ops = {
    {DCR_LOADER_OPS_VERSION, "toy", NULL}, toy_create, toy_destroy, toy_load};

/* ---- fixture ---- */

static dcr_inventory_t *toy_inventory(void)
{
    dcr_inventory_t *inv;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    int64_t a[2] = {8, 6}, b[1] = {6}, c[1] = {4}, d[2] = {3, 4}, e[2] = {5, 4}, f[2] = {4, 2},
            g[1] = {6};
    assert_int_equal(dcr_inventory_add(inv, "a", DCR_DTYPE_BF16, 2, a), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "b", DCR_DTYPE_BF16, 1, b), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "c", DCR_DTYPE_FP32, 1, c), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "d", DCR_DTYPE_BF16, 2, d), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "e", DCR_DTYPE_BF16, 2, e), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "f", DCR_DTYPE_BF16, 2, f), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "g", DCR_DTYPE_BF16, 1, g), DCR_OK);
    return inv;
}

typedef struct world {
    dcr_inventory_t *inv;
    unsigned v;
    dcr_receiver_config_t base;
    dcr_receiver_t *r[2];
    dcr_storage_t **w; /* current canonical tensors */
    int enc[16];       /* per tensor: XOR when every rank allows it */
    dcr_rng_t rng;
    uint64_t tau;
} world_t;

static dcr_receiver_t *toy_receiver(world_t *wd, int rank)
{
    toy_cfg_t c = {rank, wd->v};
    dcr_receiver_config_t rc = wd->base;
    rc.loader = "toy";
    rc.loader_config = &c;
    rc.inventory = wd->inv;
    dcr_receiver_t *r;
    assert_int_equal(dcr_receiver_create(&rc, &r), DCR_OK);
    return r;
}

/* Two ranks, dense-loaded with random W and prewarmed (prewarm status returned). */
static dcr_status_t world_init(world_t *wd, unsigned v, const dcr_receiver_config_t *base,
                               uint64_t seed)
{
    memset(wd, 0, sizeof(*wd));
    g_sneaky = 0;
    assert_int_equal(dcr_loader_register(&toy_ops), DCR_OK);
    wd->inv = toy_inventory();
    wd->v = v;
    if (base) wd->base = *base;
    dcr_rng_seed(&wd->rng, seed);
    wd->w = rt_tensors(wd->inv, &wd->rng);
    dcr_status_t st = DCR_OK;
    for (int k = 0; k < 2; k++) {
        wd->r[k] = toy_receiver(wd, k);
        assert_int_equal(dcr_receiver_load_dense_all(wd->r[k], wd->w), DCR_OK);
        dcr_status_t s = dcr_receiver_prewarm(wd->r[k]);
        if (s != DCR_OK) st = s;
    }
    for (size_t t = 0; st == DCR_OK && t < dcr_inventory_count(wd->inv); t++) {
        bool x = true, held = false;
        for (int k = 0; k < 2; k++) {
            dcr_path_info_t pi;
            assert_int_equal(dcr_receiver_path(wd->r[k], t, &pi), DCR_OK);
            if (pi.cls == DCR_PATH_SKIPPED) continue;
            held = true;
            x = x && pi.cls == DCR_PATH_XOR;
        }
        wd->enc[t] = held && x ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE;
    }
    return st;
}

static void world_free(world_t *wd)
{
    for (int k = 0; k < 2; k++) dcr_receiver_destroy(wd->r[k]);
    rt_tensors_free(wd->w, wd->inv);
    dcr_inventory_destroy(wd->inv);
    g_sneaky = 0;
}

/* Random next version of every tensor. */
static dcr_storage_t **world_next(world_t *wd, double rate)
{
    dcr_storage_t **n = rt_tensors(wd->inv, NULL);
    for (size_t t = 0; t < dcr_inventory_count(wd->inv); t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(wd->inv, t);
        rt_mutate(&wd->rng, d->dtype, wd->w[t]->data, n[t]->data, dcr_desc_numel(d), rate);
    }
    return n;
}

/* Every rank equals a fresh dense load of w, and the in-place comparison
 * with w (dcr_receiver_compare_dense) says so too. */
static void world_assert_dense(world_t *wd, dcr_storage_t **w)
{
    for (int k = 0; k < 2; k++) {
        dcr_receiver_t *fresh = toy_receiver(wd, k);
        assert_int_equal(dcr_receiver_load_dense_all(fresh, w), DCR_OK);
        const char *param = NULL;
        int64_t elem = -1;
        bool eq = dcr_receiver_equal(wd->r[k], fresh, &param, &elem);
        if (!eq)
            fail_msg("rank %d differs from the dense refit at %s[%lld]", k, param, (long long)elem);
        dcr_receiver_destroy(fresh);
        bool same = false;
        assert_int_equal(dcr_receiver_compare_dense(wd->r[k], w, &same, &param, &elem), DCR_OK);
        if (!same) fail_msg("rank %d: compare_dense reports %s[%lld]", k, param, (long long)elem);
    }
}

static void apply_all(world_t *wd, rt_payloads_t *ps, int k)
{
    for (size_t i = 0; i < ps->n; i++) {
        dcr_ingest_t disp;
        dcr_status_t st = dcr_receiver_apply_payload(wd->r[k], ps->buf[i], ps->len[i], &disp);
        if (st != DCR_OK) fail_msg("payload %zu: %s", i, dcr_error_line(st));
        assert_int_equal(disp, DCR_INGEST_ACCEPTED);
    }
}

/* One refit of every rank: encode, apply, compare, commit. */
static void world_refit(world_t *wd, double rate, bool all_overwrite)
{
    dcr_storage_t **n = world_next(wd, rate);
    int enc[16];
    for (size_t t = 0; t < dcr_inventory_count(wd->inv); t++)
        enc[t] = all_overwrite ? DCR_ENCODING_OVERWRITE : wd->enc[t];
    rt_payloads_t ps = {0};
    wd->tau++;
    rt_encode_refit(wd->inv, wd->w, n, enc, wd->tau, 3, 2, &wd->rng, &ps);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(wd->r[k], wd->tau), DCR_OK);
        apply_all(wd, &ps, k);
    }
    world_assert_dense(wd, n);
    rt_payloads_free(&ps);
    rt_tensors_free(wd->w, wd->inv);
    wd->w = n;
}

/* ---- classification ---- */

static dcr_path_info_t path_of(world_t *wd, int rank, const char *name)
{
    dcr_path_info_t pi;
    assert_int_equal(dcr_receiver_path(wd->r[rank], (size_t)dcr_inventory_find(wd->inv, name), &pi),
                     DCR_OK);
    return pi;
}

static void test_classify(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 1), DCR_OK);
    assert_int_equal(path_of(&wd, 0, "a").cls, DCR_PATH_XOR);
    assert_true(path_of(&wd, 0, "a").views_only);
    assert_int_equal(path_of(&wd, 0, "b").cls, DCR_PATH_XOR);
    dcr_path_info_t c = path_of(&wd, 1, "c");
    assert_int_equal(c.cls, DCR_PATH_OVERWRITE);
    assert_non_null(strstr(c.op, "neg_exp"));
    assert_true(c.placeholder_safe);
    assert_false(c.views_only);
    assert_int_equal(path_of(&wd, 0, "d").cls, DCR_PATH_XOR);
    dcr_path_info_t e = path_of(&wd, 0, "e");
    assert_int_equal(e.cls, DCR_PATH_XOR);
    assert_int_equal(e.fills, 1);
    assert_int_equal(path_of(&wd, 0, "f").cls, DCR_PATH_OVERWRITE);
    assert_non_null(strstr(path_of(&wd, 0, "f").op, "cat"));
    assert_int_equal(path_of(&wd, 0, "g").cls, DCR_PATH_SKIPPED);
    size_t counts[DCR_PATH_COUNT];
    dcr_receiver_path_counts(wd.r[0], counts);
    assert_int_equal(counts[DCR_PATH_XOR], 4);
    assert_int_equal(counts[DCR_PATH_OVERWRITE], 2);
    assert_int_equal(counts[DCR_PATH_SKIPPED], 1);
    world_free(&wd);

    assert_int_equal(world_init(&wd, V_FP32_B | V_OVERLAP, NULL, 1), DCR_OK);
    dcr_path_info_t b = path_of(&wd, 0, "b");
    assert_int_equal(b.cls, DCR_PATH_OVERWRITE);
    assert_string_equal(b.op, "cast bf16->fp32");
    dcr_path_info_t f = path_of(&wd, 0, "f");
    assert_int_equal(f.cls, DCR_PATH_OVERWRITE);
    assert_true(f.views_only);
    world_free(&wd);

    assert_int_equal(world_init(&wd, V_NAN_UNSAFE, NULL, 1), DCR_OK);
    assert_false(path_of(&wd, 0, "c").placeholder_safe);
    world_free(&wd);
}

/* ---- bit-exact refits ---- */

static void refits(unsigned v, const dcr_receiver_config_t *base, uint64_t seed, int n)
{
    world_t wd;
    assert_int_equal(world_init(&wd, v, base, seed), DCR_OK);
    for (int i = 0; i < n; i++) {
        double rates[] = {0.05, 0.3, 1.0};
        world_refit(&wd, rates[i % 3], i % 4 == 3);
    }
    /* The apply took the path the configuration asks for. */
    dcr_receiver_stats_t st;
    dcr_receiver_stats(wd.r[0], &st);
    assert_true(st.items_applied > 0);
    if (base->full_pass)
        assert_int_equal(st.items_sparse, 0);
    else
        assert_true(st.items_sparse > 0);
    assert_true(st.items_full > 0); /* c and f never have a views-only path */
    if (base->mask == DCR_MASK_TRACKED || (v & V_NAN_UNSAFE)) assert_true(st.items_tracked > 0);
    world_free(&wd);
}

static void test_refit_variants(void **state)
{
    const unsigned variants[] = {0,
                                 V_FP32_B,
                                 V_OVERLAP,
                                 V_NAN_MAKER,
                                 V_NAN_UNSAFE,
                                 V_TRANSPOSE_SRC,
                                 V_FP32_B | V_OVERLAP | V_TRANSPOSE_SRC};
    dcr_receiver_config_t modes[5] = {{0}, {0}, {0}, {0}, {0}};
    modes[1].full_pass = true;
    modes[2].mask = DCR_MASK_TRACKED;
    modes[3].full_pass = true;
    modes[3].mask = DCR_MASK_TRACKED;
    modes[4].loader_per_item = true;
    uint64_t seed = 100;
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
        for (int m = 0; m < 5; m++) refits(variants[i], &modes[m], seed++, 8);
}

/* Overwrites whose value is NaN on the cast and transform paths (the
 * placeholder itself) must be applied, through the tracked pass. */
static void test_nan_valued_overwrite(void **state)
{
    world_t wd;
    dcr_receiver_config_t full = {.full_pass = true};
    assert_int_equal(world_init(&wd, V_FP32_B, &full, 7), DCR_OK);
    dcr_storage_t **n = world_next(&wd, 0.0);
    /* Set b and c entirely to NaNs with varied payloads and signs. */
    uint16_t *b = n[1]->data;
    uint32_t *c = n[2]->data;
    for (int i = 0; i < 6; i++) b[i] = (uint16_t)((i & 1 ? 0xFF80u : 0x7F80u) | (uint16_t)(i + 1));
    for (int i = 0; i < 4; i++) c[i] = 0x7F800001u + (uint32_t)i * 0x10000u;
    int enc[16];
    for (int t = 0; t < 7; t++) enc[t] = DCR_ENCODING_OVERWRITE;
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, enc, 1, 1, 100, &wd.rng, &ps);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 1), DCR_OK);
        apply_all(&wd, &ps, k);
        dcr_receiver_stats_t st;
        dcr_receiver_stats(wd.r[k], &st);
        assert_true(st.items_tracked >= 2);
    }
    world_assert_dense(&wd, n);
    /* b's FP32 words must be the exact widening of the NaN payloads. */
    const dcr_param_t *pb = dcr_params_at(dcr_receiver_params(wd.r[0]), 1);
    assert_int_equal(((uint32_t *)pb->storage->data)[3], (uint32_t)b[3] << 16);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

/* ---- rejected in advance ---- */

static void expect_unsupported(unsigned v, const char *needle)
{
    world_t wd;
    dcr_status_t st = world_init(&wd, v, NULL, 3);
    assert_int_equal(st, DCR_EUNSUPPORTED);
    const char *msg = dcr_error_detail();
    if (strstr(msg, needle) == NULL) fail_msg("'%s' lacks '%s'", msg, needle);
    /* Apply stays closed. */
    rt_payloads_t ps = {0};
    int enc[16];
    for (int t = 0; t < 7; t++) enc[t] = DCR_ENCODING_OVERWRITE;
    dcr_storage_t **n = world_next(&wd, 0.5);
    rt_encode_refit(wd.inv, wd.w, n, enc, 1, 1, 100, &wd.rng, &ps);
    assert_int_equal(dcr_receiver_begin_attempt(wd.r[0], 1), DCR_OK);
    assert_int_not_equal(dcr_receiver_apply_payload(wd.r[0], ps.buf[0], ps.len[0], NULL), DCR_OK);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

static void test_unsupported_rejected(void **state)
{
    expect_unsupported(V_BLOCKWISE, "tensor c: blockwise block_sum: not elementwise");
    expect_unsupported(V_RESIDENT, "tensor b: copy_: its source reads resident storage");
    expect_unsupported(V_NOCOPY, "tensor a: load: reported loaded without an intercepted copy_");
    expect_unsupported(V_GAP, "parameter a: elements [18, 24) are written by no intercepted");
    expect_unsupported(V_CROSS, "writes elements of b that tensor");
    expect_unsupported(V_FILL_AFTER, "fill_ of e overwrites elements an earlier copy_ wrote");
    expect_unsupported(V_OVERLAP_BAD, "overlapping copies into f carry different tensor elements");
}

/* ---- run-time violations ---- */

/* A loader whose path changed since prewarm (here: it writes around the
 * hook) is caught when the loader runs for every item. Without
 * loader_per_item the views-only items replay the probe's copies and never
 * run it (test_replay_runs_no_loader). */
static void test_write_around_hook_caught(void **state)
{
    world_t wd;
    dcr_receiver_config_t per_item = {.loader_per_item = true};
    assert_int_equal(world_init(&wd, 0, &per_item, 11), DCR_OK);
    dcr_storage_t **n = world_next(&wd, 0.5);
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, wd.enc, 1, 1, 100, &wd.rng, &ps);
    g_sneaky = 1;
    assert_int_equal(dcr_receiver_begin_attempt(wd.r[0], 1), DCR_OK);
    dcr_status_t st = dcr_receiver_apply_payload(wd.r[0], ps.buf[0], ps.len[0], NULL);
    assert_int_equal(st, DCR_ERECEIVER);
    if (strstr(dcr_error_detail(), "apply a") == NULL) fail_msg("%s", dcr_error_detail());
    /* The attempt is failed: the rest is refused. */
    if (ps.n > 1)
        assert_int_equal(dcr_receiver_apply_payload(wd.r[0], ps.buf[1], ps.len[1], NULL),
                         DCR_EATTEMPT);
    rt_payloads_free(&ps);
    /* Bytes written around the hook are beyond what any delta can repair:
     * the receiver restores the committed version by a dense refit, then the
     * overwrite retry of the same transition brings every rank to v+1. */
    g_sneaky = 0;
    assert_int_equal(dcr_receiver_load_dense_all(wd.r[0], wd.w), DCR_OK);
    int enc[16];
    for (int t = 0; t < 7; t++) enc[t] = DCR_ENCODING_OVERWRITE;
    rt_encode_refit(wd.inv, wd.w, n, enc, 2, 2, 3, &wd.rng, &ps);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 2), DCR_OK);
        apply_all(&wd, &ps, k);
    }
    world_assert_dense(&wd, n);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

/* Views-only items replay the probe's copies: a loader that would now write
 * around the hook is never run for them, and the refit is still the dense
 * one. */
static void test_replay_runs_no_loader(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 12), DCR_OK);
    assert_true(path_of(&wd, 0, "a").views_only);
    dcr_storage_t **n = world_next(&wd, 0.5);
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, wd.enc, 1, 1, 100, &wd.rng, &ps);
    g_sneaky = 1;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 1), DCR_OK);
        apply_all(&wd, &ps, k);
    }
    g_sneaky = 0;
    world_assert_dense(&wd, n);
    rt_payloads_free(&ps);
    rt_tensors_free(wd.w, wd.inv);
    wd.w = n;
    world_free(&wd);
}

/* compare_dense finds one flipped bit in every parameter of every rank, at
 * the element dcr_receiver_equal against a fresh dense load names, on every
 * loader variant (casts, cats, fills, overlapping copies, transposes). */
static void test_compare_dense_finds_flips(void **state)
{
    const unsigned variants[] = {0, V_FP32_B | V_OVERLAP | V_TRANSPOSE_SRC, V_NAN_MAKER};
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        world_t wd;
        assert_int_equal(world_init(&wd, variants[v], NULL, 40 + v), DCR_OK);
        for (int k = 0; k < 2; k++) {
            dcr_receiver_t *fresh = toy_receiver(&wd, k);
            assert_int_equal(dcr_receiver_load_dense_all(fresh, wd.w), DCR_OK);
            const dcr_params_t *ps = dcr_receiver_params(wd.r[k]);
            for (size_t i = 0; i < dcr_params_count(ps); i++) {
                const dcr_param_t *p = dcr_params_at(ps, i);
                int64_t numel = dcr_shape_numel(p->ndim, p->shape);
                int64_t at = (int64_t)(dcr_rng_u64(&wd.rng) % (uint64_t)(numel > 0 ? numel : 1));
                uint8_t *byte =
                    (uint8_t *)p->storage->data + at * (int64_t)dcr_dtype_size(p->dtype);
                *byte ^= 1;
                const char *want_p = NULL, *got_p = NULL;
                int64_t want_e = -1, got_e = -1;
                bool same = true;
                if (dcr_receiver_equal(wd.r[k], fresh, &want_p, &want_e))
                    fail_msg("variant %zu rank %d: flip of %s[%lld] unseen", v, k, p->name,
                             (long long)at);
                assert_int_equal(dcr_receiver_compare_dense(wd.r[k], wd.w, &same, &got_p, &got_e),
                                 DCR_OK);
                assert_false(same);
                assert_string_equal(got_p, p->name);
                assert_string_equal(got_p, want_p);
                assert_int_equal(got_e, at);
                assert_int_equal(got_e, want_e);
                *byte ^= 1;
                assert_int_equal(dcr_receiver_compare_dense(wd.r[k], wd.w, &same, NULL, NULL),
                                 DCR_OK);
                assert_true(same);
            }
            dcr_receiver_destroy(fresh);
        }
        world_free(&wd);
    }
    /* Before prewarm nothing says every element is written: refused. */
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 50), DCR_OK);
    dcr_receiver_t *raw = toy_receiver(&wd, 0);
    bool same;
    assert_int_equal(dcr_receiver_compare_dense(raw, wd.w, &same, NULL, NULL), DCR_EINVAL);
    dcr_receiver_destroy(raw);
    world_free(&wd);
}

static void test_bad_items_rejected_whole(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 13), DCR_OK);
    assert_int_equal(dcr_receiver_begin_attempt(wd.r[0], 1), DCR_OK);
    dcr_encoder_t *e;
    assert_int_equal(dcr_encoder_create(&e), DCR_OK);
    /* A good XOR item on a, then an XOR item on c (overwrite-only path). */
    const dcr_tensor_desc_t *a = dcr_inventory_at(wd.inv, 0), *c = dcr_inventory_at(wd.inv, 2);
    int64_t idx[1] = {0};
    uint32_t val = 0x3F80;
    dcr_codec_item_t ia = {a->name, a->ndim, a->shape, a->dtype, DCR_ENCODING_XOR, 1, idx, 0, &val};
    dcr_codec_item_t ic = {c->name, c->ndim, c->shape, c->dtype, DCR_ENCODING_XOR, 1, idx, 0, &val};
    assert_int_equal(dcr_encoder_add(e, &ia), DCR_OK);
    assert_int_equal(dcr_encoder_add(e, &ic), DCR_OK);
    dcr_encode_params_t prm = {1, 0, 0, 1, false};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(e, &prm, &buf, &len), DCR_OK);
    assert_int_equal(dcr_receiver_apply_payload(wd.r[0], buf, len, NULL), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "overwrite-only"));
    world_assert_dense(&wd, wd.w); /* nothing of it was applied */
    /* A shape that contradicts the inventory. */
    int64_t bad_shape[2] = {4, 12};
    dcr_codec_item_t ib = {a->name, 2, bad_shape, a->dtype, DCR_ENCODING_XOR, 1, idx, 0, &val};
    assert_int_equal(dcr_encoder_add(e, &ib), DCR_OK);
    prm.payload_id = 1;
    assert_int_equal(dcr_encoder_finish(e, &prm, &buf, &len), DCR_OK);
    assert_int_equal(dcr_receiver_apply_payload(wd.r[0], buf, len, NULL), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "shape"));
    /* A corrupted payload is refused by the codec. */
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    copy[len - 1] ^= 1;
    assert_int_equal(dcr_receiver_apply_payload(wd.r[0], copy, len, NULL), DCR_EDIGEST);
    free(copy);
    dcr_encoder_destroy(e);
    world_free(&wd);
}

/* ---- payload keys ---- */

/* Re-signs an unkeyed payload as FORMAT.md section 1.1 says, with libb2
 * called directly: keyed flag set, keyed BLAKE2b-128 over header [0, 48)
 * and the compressed body. The codec is not involved. */
static uint8_t *resign(const uint8_t *buf, size_t len, const uint8_t *key)
{
    uint8_t *out = malloc(len);
    memcpy(out, buf, len);
    out[6] |= 0x02;
    t_digest(out, out + 64, len - 64, key, out + 48);
    return out;
}

static void test_payload_key(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 31), DCR_OK);
    dcr_storage_t **n = world_next(&wd, 0.3);
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, wd.enc, 1, 2, 3, &wd.rng, &ps);
    dcr_payload_key_t key = {.set = true}, other = {.set = true};
    for (int i = 0; i < 32; i++) {
        key.bytes[i] = (uint8_t)(0x80 + i);
        other.bytes[i] = (uint8_t)(0x80 + i + (i == 31));
    }
    dcr_receiver_set_payload_key(wd.r[0], &key);
    for (int k = 0; k < 2; k++) assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 1), DCR_OK);
    /* Rank 0 has the key: unkeyed, keyed differently and forged payloads
     * are refused and counted, and nothing of them lands. */
    uint64_t refused = 0;
    for (size_t i = 0; i < ps.n; i++) {
        uint8_t *wrong = resign(ps.buf[i], ps.len[i], other.bytes);
        uint8_t *forged = resign(ps.buf[i], ps.len[i], NULL); /* keyed flag, plain digest */
        const uint8_t *bad[3] = {ps.buf[i], wrong, forged};
        for (int b = 0; b < 3; b++) {
            dcr_status_t st = b == 0 && i == 0
                                  ? dcr_receiver_ingest(wd.r[0], bad[b], ps.len[i], 0, NULL)
                                  : dcr_receiver_apply_payload(wd.r[0], bad[b], ps.len[i], NULL);
            assert_int_equal(st, DCR_EDIGEST);
            refused++;
        }
        free(wrong);
        free(forged);
    }
    dcr_receiver_stats_t st;
    dcr_receiver_stats(wd.r[0], &st);
    assert_int_equal(st.unauthenticated, refused);
    assert_int_equal(st.rejected, refused);
    assert_int_equal(st.payloads_applied, 0);
    assert_int_equal(dcr_receiver_staged(wd.r[0]), 0);
    /* Properly signed payloads apply. */
    for (size_t i = 0; i < ps.n; i++) {
        uint8_t *good = resign(ps.buf[i], ps.len[i], key.bytes);
        dcr_ingest_t disp;
        assert_int_equal(dcr_receiver_apply_payload(wd.r[0], good, ps.len[i], &disp), DCR_OK);
        assert_int_equal(disp, DCR_INGEST_ACCEPTED);
        /* Rank 1 has no key: it cannot verify a keyed payload and says so. */
        assert_int_equal(dcr_receiver_apply_payload(wd.r[1], good, ps.len[i], NULL), DCR_EDIGEST);
        assert_non_null(strstr(dcr_error_detail(), "no payload key"));
        free(good);
    }
    dcr_receiver_stats(wd.r[1], &st);
    assert_int_equal(st.unauthenticated, ps.n);
    /* Rank 1 takes the unkeyed ones; a corrupt one is rejected, not unauthenticated. */
    uint8_t *corrupt = malloc(ps.len[0]);
    memcpy(corrupt, ps.buf[0], ps.len[0]);
    corrupt[ps.len[0] - 1] ^= 1;
    assert_int_equal(dcr_receiver_apply_payload(wd.r[1], corrupt, ps.len[0], NULL), DCR_EDIGEST);
    free(corrupt);
    dcr_receiver_stats(wd.r[1], &st);
    assert_int_equal(st.unauthenticated, ps.n);
    assert_int_equal(st.rejected, ps.n + 1);
    apply_all(&wd, &ps, 1);
    world_assert_dense(&wd, n);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

/* ---- deduplication and attempts ---- */

static void test_duplicate_and_stale(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 21), DCR_OK);
    dcr_storage_t **n = world_next(&wd, 0.5);
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, wd.enc, 5, 2, 3, &wd.rng, &ps);
    for (int k = 0; k < 2; k++) {
        dcr_ingest_t disp;
        /* Payloads of an attempt that has not begun are foreign. */
        assert_int_equal(dcr_receiver_apply_payload(wd.r[k], ps.buf[0], ps.len[0], &disp), DCR_OK);
        assert_int_equal(disp, DCR_INGEST_FOREIGN);
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 5), DCR_OK);
        apply_all(&wd, &ps, k);
        /* Every payload again: XOR twice would undo it, so each must be dropped. */
        for (size_t i = 0; i < ps.n; i++) {
            assert_int_equal(dcr_receiver_apply_payload(wd.r[k], ps.buf[i], ps.len[i], &disp),
                             DCR_OK);
            assert_int_equal(disp, DCR_INGEST_DUPLICATE);
        }
        dcr_receiver_stats_t st;
        dcr_receiver_stats(wd.r[k], &st);
        assert_int_equal(st.duplicates, ps.n);
        assert_int_equal(st.payloads_applied, ps.n);
    }
    world_assert_dense(&wd, n);
    /* A later attempt: the old payloads are stale and change nothing. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 6), DCR_OK);
        dcr_ingest_t disp;
        assert_int_equal(dcr_receiver_apply_payload(wd.r[k], ps.buf[0], ps.len[0], &disp), DCR_OK);
        assert_int_equal(disp, DCR_INGEST_STALE);
        assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], 4), DCR_EINVAL);
    }
    world_assert_dense(&wd, n);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

/* A first attempt lands partly (some payloads, in random order), then the
 * overwrite retry of the same transition reaches the dense bits; late
 * payloads of the first attempt are ignored. */
static void test_partial_then_overwrite_retry(void **state)
{
    for (uint64_t seed = 30; seed < 36; seed++) {
        world_t wd;
        assert_int_equal(world_init(&wd, seed & 1 ? V_FP32_B : 0, NULL, seed), DCR_OK);
        for (int step = 0; step < 3; step++) {
            dcr_storage_t **n = world_next(&wd, 0.4);
            rt_payloads_t first = {0}, retry = {0};
            uint64_t tau = 10 * (uint64_t)step + 1;
            rt_encode_refit(wd.inv, wd.w, n, wd.enc, tau, 3, 1, &wd.rng, &first);
            int enc[16];
            for (int t = 0; t < 7; t++) enc[t] = DCR_ENCODING_OVERWRITE;
            rt_encode_refit(wd.inv, wd.w, n, enc, tau + 1, 3, 2, &wd.rng, &retry);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], tau), DCR_OK);
                for (size_t i = 0; i < first.n; i++)
                    if (dcr_rng_below(&wd.rng, 2))
                        assert_int_equal(
                            dcr_receiver_apply_payload(wd.r[k], first.buf[i], first.len[i], NULL),
                            DCR_OK);
                assert_int_equal(dcr_receiver_begin_attempt(wd.r[k], tau + 1), DCR_OK);
                for (size_t i = 0; i < retry.n; i++) {
                    assert_int_equal(
                        dcr_receiver_apply_payload(wd.r[k], retry.buf[i], retry.len[i], NULL),
                        DCR_OK);
                    dcr_ingest_t disp;
                    size_t j = dcr_rng_below(&wd.rng, first.n);
                    assert_int_equal(
                        dcr_receiver_apply_payload(wd.r[k], first.buf[j], first.len[j], &disp),
                        DCR_OK);
                    assert_int_equal(disp, DCR_INGEST_STALE);
                }
            }
            world_assert_dense(&wd, n);
            rt_payloads_free(&first);
            rt_payloads_free(&retry);
            rt_tensors_free(wd.w, wd.inv);
            wd.w = n;
        }
        world_free(&wd);
    }
}

/* ---- staging ---- */

/* Many one-item payloads: one per changed tensor and owner. */
static void many_payloads(world_t *wd, dcr_storage_t ***n_p, rt_payloads_t *ps, uint64_t tau,
                          size_t want)
{
    while (ps->n < want) {
        dcr_storage_t **n = world_next(wd, 0.2);
        /* Tensors that are not sent keep their bits. */
        for (size_t t = 0; t < dcr_inventory_count(wd->inv); t++)
            if (wd->enc[t] < 0) memcpy(n[t]->data, wd->w[t]->data, wd->w[t]->bytes);
        rt_encode_refit(wd->inv, wd->w, n, wd->enc, tau, 1, 1, &wd->rng, ps);
        /* Chain versions so that every payload applies on top of the last. */
        rt_tensors_free(wd->w, wd->inv);
        wd->w = n;
    }
    *n_p = wd->w;
}

static void test_staging_backpressure(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, V_FP32_B, NULL, 41), DCR_OK);
    /* Payloads are encoded as XOR diffs of a chain, so they must all land. */
    dcr_storage_t **w0 = rt_tensors(wd.inv, NULL);
    for (size_t t = 0; t < 7; t++) memcpy(w0[t]->data, wd.w[t]->data, wd.w[t]->bytes);
    for (size_t t = 0; t < 7; t++) wd.enc[t] = DCR_ENCODING_XOR;
    wd.enc[1] = wd.enc[2] = wd.enc[5] = -1; /* only tensors XOR on every path; skip others */
    rt_payloads_t ps = {0};
    dcr_storage_t **last;
    size_t cap = (DCR_STAGE_GROUPS + 1) * DCR_STAGE_GROUP_SIZE;
    many_payloads(&wd, &last, &ps, 1, cap + 40);
    dcr_receiver_t *r = wd.r[0];
    assert_int_equal(dcr_receiver_begin_attempt(r, 1), DCR_OK);
    size_t i = 0;
    for (; i < cap; i++)
        assert_int_equal(dcr_receiver_ingest(r, ps.buf[i], ps.len[i], 0, NULL), DCR_OK);
    assert_int_equal(dcr_receiver_staged(r), cap);
    /* Every slot is taken: the producer is held back. */
    assert_int_equal(dcr_receiver_ingest(r, ps.buf[i], ps.len[i], 20, NULL), DCR_ETIMEOUT);
    size_t applied = 0;
    assert_int_equal(dcr_receiver_apply_staged(r, 0, &applied), DCR_OK);
    assert_int_equal(
        applied,
        cap - DCR_STAGE_GROUP_SIZE); /* the group under assembly is full but not handed over */
    assert_int_equal(dcr_receiver_ingest_flush(r, 0), DCR_OK);
    assert_int_equal(dcr_receiver_apply_staged(r, 0, &applied), DCR_OK);
    assert_int_equal(applied, DCR_STAGE_GROUP_SIZE);
    for (; i < ps.n; i++)
        assert_int_equal(dcr_receiver_ingest(r, ps.buf[i], ps.len[i], 0, NULL), DCR_OK);
    assert_int_equal(dcr_receiver_ingest_flush(r, 0), DCR_OK);
    assert_int_equal(dcr_receiver_apply_staged(r, 0, &applied), DCR_OK);
    assert_int_equal(applied, ps.n - cap);
    assert_int_equal(dcr_receiver_staged(r), 0);
    dcr_receiver_t *fresh = toy_receiver(&wd, 0);
    assert_int_equal(dcr_receiver_load_dense_all(fresh, last), DCR_OK);
    assert_true(dcr_receiver_equal(r, fresh, NULL, NULL));
    dcr_receiver_destroy(fresh);
    rt_payloads_free(&ps);
    rt_tensors_free(w0, wd.inv);
    world_free(&wd);
}

typedef struct producer {
    dcr_receiver_t *r;
    rt_payloads_t *ps;
    int failed;
    _Atomic int done;
} producer_t;

static void *produce(void *arg)
{
    producer_t *p = arg;
    for (size_t i = 0; i < p->ps->n; i++) {
        dcr_status_t st;
        while ((st = dcr_receiver_ingest(p->r, p->ps->buf[i], p->ps->len[i], 5, NULL)) ==
               DCR_ETIMEOUT) {
        }
        if (st != DCR_OK) p->failed = 1;
    }
    if (dcr_receiver_ingest_flush(p->r, -1) != DCR_OK) p->failed = 1;
    p->done = 1;
    return NULL;
}

static void test_staging_threads(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, 0, NULL, 42), DCR_OK);
    wd.enc[1] = wd.enc[2] = wd.enc[5] = -1;
    rt_payloads_t ps = {0};
    dcr_storage_t **last;
    many_payloads(&wd, &last, &ps, 1, 700);
    dcr_receiver_t *r = wd.r[1];
    assert_int_equal(dcr_receiver_begin_attempt(r, 1), DCR_OK);
    producer_t p = {r, &ps, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, produce, &p), 0);
    size_t total = 0, applied = 1;
    while (!p.done || applied > 0) {
        assert_int_equal(dcr_receiver_apply_staged(r, 5, &applied), DCR_OK);
        total += applied;
    }
    pthread_join(th, NULL);
    assert_int_equal(p.failed, 0);
    assert_int_equal(total, ps.n);
    dcr_receiver_t *fresh = toy_receiver(&wd, 1);
    assert_int_equal(dcr_receiver_load_dense_all(fresh, last), DCR_OK);
    assert_true(dcr_receiver_equal(r, fresh, NULL, NULL));
    dcr_receiver_destroy(fresh);
    rt_payloads_free(&ps);
    world_free(&wd);
}

/* ---- post-apply check ---- */

static void test_post_apply_check(void **state)
{
    world_t wd;
    dcr_receiver_config_t base = {.track_written = true};
    assert_int_equal(world_init(&wd, V_FP32_B, &base, 51), DCR_OK);
    dcr_storage_t **n = world_next(&wd, 0.3);
    rt_payloads_t ps = {0};
    rt_encode_refit(wd.inv, wd.w, n, wd.enc, 1, 2, 2, &wd.rng, &ps);
    assert_int_equal(dcr_receiver_begin_attempt(wd.r[0], 1), DCR_OK);
    apply_all(&wd, &ps, 0);
    dcr_receiver_t *expected = toy_receiver(&wd, 0);
    assert_int_equal(dcr_receiver_load_dense_all(expected, n), DCR_OK);
    dcr_check_result_t res = {0};
    assert_int_equal(dcr_receiver_check(wd.r[0], expected, &res), DCR_OK);
    assert_true(res.regions >= 4 && res.bytes > 0);
    /* A flipped bit inside a written region is found. */
    const dcr_param_t *pa = dcr_params_at(dcr_receiver_params(wd.r[0]), 0);
    ((uint8_t *)pa->storage->data)[3] ^= 0x10;
    assert_int_equal(dcr_receiver_check(wd.r[0], expected, &res), DCR_EMISMATCH);
    assert_non_null(strstr(dcr_error_detail(), "parameter a"));
    dcr_receiver_stats_t st;
    dcr_receiver_stats(wd.r[0], &st);
    assert_true(st.check_s > 0);
    dcr_receiver_destroy(expected);
    rt_payloads_free(&ps);
    rt_tensors_free(n, wd.inv);
    world_free(&wd);
}

/* ---- the in-process oracle itself ---- */

/* Flips one bit of parameter i at byte `at` and expects dcr_receiver_equal
 * to name the parameter and the element that byte belongs to. */
static void expect_bit_caught(dcr_receiver_t *r, dcr_receiver_t *fresh, size_t i, size_t at,
                              int bit)
{
    const dcr_param_t *p = dcr_params_at(dcr_receiver_params(r), i);
    uint8_t *bytes = p->storage->data;
    bytes[at] ^= (uint8_t)(1u << bit);
    const char *param = NULL;
    int64_t elem = -2;
    assert_false(dcr_receiver_equal(r, fresh, &param, &elem));
    assert_string_equal(param, p->name);
    assert_int_equal(elem, (int64_t)(at / dcr_dtype_size(p->dtype)));
    /* Symmetric: the other side is compared byte for byte too. */
    assert_false(dcr_receiver_equal(fresh, r, NULL, NULL));
    bytes[at] ^= (uint8_t)(1u << bit);
    assert_true(dcr_receiver_equal(r, fresh, NULL, NULL));
}

static void test_equal_strict(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, V_FP32_B, NULL, 61), DCR_OK);
    dcr_receiver_t *r = wd.r[0];
    dcr_receiver_t *fresh = toy_receiver(&wd, 0);
    assert_int_equal(dcr_receiver_load_dense_all(fresh, wd.w), DCR_OK);
    assert_true(dcr_receiver_equal(r, fresh, NULL, NULL));
    /* Every parameter, its first and last byte, every bit of them, and a
     * random interior byte. */
    const dcr_params_t *ps = dcr_receiver_params(r);
    assert_true(dcr_params_count(ps) >= 6);
    for (size_t i = 0; i < dcr_params_count(ps); i++) {
        size_t bytes = dcr_params_at(ps, i)->storage->bytes;
        assert_true(bytes > 2);
        for (int bit = 0; bit < 8; bit++) {
            expect_bit_caught(r, fresh, i, 0, bit);
            expect_bit_caught(r, fresh, i, bytes - 1, bit);
        }
        expect_bit_caught(r, fresh, i, 1 + dcr_rng_below(&wd.rng, bytes - 2), 3);
    }
    /* A side without data is a difference, not a pass. */
    toy_cfg_t c = {0, wd.v};
    dcr_receiver_config_t rc = {
        .loader = "toy", .loader_config = &c, .inventory = wd.inv, .shape_only = true};
    dcr_receiver_t *hollow = NULL;
    assert_int_equal(dcr_receiver_create(&rc, &hollow), DCR_OK);
    const char *param = NULL;
    int64_t elem = 0;
    assert_false(dcr_receiver_equal(r, hollow, &param, &elem));
    assert_string_equal(param, dcr_params_at(ps, 0)->name);
    assert_int_equal(elem, -1);
    assert_false(dcr_receiver_equal(hollow, r, NULL, NULL));
    assert_false(dcr_receiver_equal(hollow, hollow, NULL, NULL));
    /* Receivers of other ranks hold other parameters or bytes. */
    assert_false(dcr_receiver_equal(wd.r[0], wd.r[1], NULL, NULL));
    dcr_receiver_destroy(hollow);
    dcr_receiver_destroy(fresh);
    world_free(&wd);
}

/* ---- digests across processes ---- */

static void test_param_digests(void **state)
{
    world_t wd;
    assert_int_equal(world_init(&wd, V_FP32_B, NULL, 71), DCR_OK);
    world_refit(&wd, 0.2, false);
    dcr_receiver_t *r = wd.r[0];
    dcr_receiver_t *fresh = toy_receiver(&wd, 0);
    assert_int_equal(dcr_receiver_load_dense_all(fresh, wd.w), DCR_OK);
    dcr_param_digests_t want, got, wire;
    assert_int_equal(dcr_receiver_digests(fresh, &want), DCR_OK);
    assert_int_equal(dcr_receiver_digests(r, &got), DCR_OK);
    const dcr_params_t *ps = dcr_receiver_params(r);
    assert_int_equal(want.count, dcr_params_count(ps));
    /* Each digest is BLAKE2b-256 of the parameter's bytes, computed here
     * independently. */
    for (size_t i = 0; i < want.count; i++) {
        const dcr_param_t *p = dcr_params_at(dcr_receiver_params(fresh), i);
        uint8_t d[32];
        blake2b(d, p->storage->data, NULL, 32, p->storage->bytes, 0);
        assert_string_equal(want.names[i], p->name);
        assert_memory_equal(want.digests[i], d, 32);
    }
    assert_int_equal(dcr_param_digests_compare(&want, &got, "receiver 0"), DCR_OK);
    /* Through the wire form and back. */
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(dcr_param_digests_encode(&got, &buf, &len), DCR_OK);
    assert_int_equal(dcr_param_digests_decode(buf, len, &wire), DCR_OK);
    assert_int_equal(dcr_param_digests_compare(&want, &wire, "receiver 0"), DCR_OK);
    dcr_param_digests_free(&wire);
    /* Damage and truncation are refused, never read as digests. */
    buf[len / 2] ^= 1;
    assert_int_equal(dcr_param_digests_decode(buf, len, &wire), DCR_EDIGEST);
    buf[len / 2] ^= 1;
    assert_int_not_equal(dcr_param_digests_decode(buf, len - 1, &wire), DCR_OK);
    assert_int_not_equal(dcr_param_digests_decode(buf, 10, &wire), DCR_OK);
    free(buf);
    dcr_param_digests_free(&got);
    /* One flipped bit in any parameter is named. */
    for (size_t i = 0; i < dcr_params_count(ps); i++) {
        const dcr_param_t *p = dcr_params_at(ps, i);
        size_t at = dcr_rng_below(&wd.rng, p->storage->bytes);
        ((uint8_t *)p->storage->data)[at] ^= 0x40;
        assert_int_equal(dcr_receiver_digests(r, &got), DCR_OK);
        assert_int_equal(dcr_param_digests_compare(&want, &got, "receiver 0"), DCR_EMISMATCH);
        char expect[128];
        snprintf(expect, sizeof(expect), "receiver 0: parameter %s differs", p->name);
        assert_non_null(strstr(dcr_error_detail(), expect));
        dcr_param_digests_free(&got);
        ((uint8_t *)p->storage->data)[at] ^= 0x40;
    }
    /* Another rank's parameters are another set; a receiver without data has none. */
    dcr_param_digests_t other;
    assert_int_equal(dcr_receiver_digests(wd.r[1], &other), DCR_OK);
    assert_int_equal(dcr_param_digests_compare(&want, &other, "receiver 1"), DCR_EMISMATCH);
    dcr_param_digests_free(&other);
    toy_cfg_t c = {0, wd.v};
    dcr_receiver_config_t rc = {
        .loader = "toy", .loader_config = &c, .inventory = wd.inv, .shape_only = true};
    dcr_receiver_t *hollow = NULL;
    assert_int_equal(dcr_receiver_create(&rc, &hollow), DCR_OK);
    assert_int_equal(dcr_receiver_digests(hollow, &other), DCR_EINVAL);
    dcr_receiver_destroy(hollow);
    dcr_param_digests_free(&want);
    dcr_receiver_destroy(fresh);
    world_free(&wd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_refit_variants),
        cmocka_unit_test(test_nan_valued_overwrite),
        cmocka_unit_test(test_unsupported_rejected),
        cmocka_unit_test(test_write_around_hook_caught),
        cmocka_unit_test(test_replay_runs_no_loader),
        cmocka_unit_test(test_compare_dense_finds_flips),
        cmocka_unit_test(test_bad_items_rejected_whole),
        cmocka_unit_test(test_duplicate_and_stale),
        cmocka_unit_test(test_partial_then_overwrite_retry),
        cmocka_unit_test(test_staging_backpressure),
        cmocka_unit_test(test_staging_threads),
        cmocka_unit_test(test_post_apply_check),
        cmocka_unit_test(test_payload_key),
        cmocka_unit_test(test_equal_strict),
        cmocka_unit_test(test_param_digests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
