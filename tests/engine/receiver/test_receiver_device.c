/* ctest-labels: unit
 *
 * The receiver on engine/device: scratch, the activity map and every record
 * application (sparse scatter, full XOR and overwrite passes through
 * combine regions) go through the device module. The oracle is the CPU
 * path's own contract: after applying the bitwise canonical diff W -> W', a
 * receiver's resident bytes equal a fresh dense load of W' (L_r(W')), for
 * randomized records with -0.0, NaN payloads and subnormals, on loader paths
 * chosen to make the regions of every shape: copies of three non-mergeable
 * dimensions (an outer loop of regions), strided two-dimensional ones,
 * merged contiguous ones, 1-, 2- and 4-byte words, and dtype-preserving
 * transforms (the placeholder and tracked passes). Devices "cpu", "auto"
 * (cpu on a machine without a GPU) and the default (NULL) must all match it.
 *
 * A device the host cannot address (cuda) runs here as the "far" table: the
 * "cpu" slots over host memory whose addresses are moved out of the
 * canonical address range, so any host read or write of resident storage,
 * scratch, the activity map or uploaded records faults instead of passing
 * unnoticed; only the table's own slots move them back. A receiver on it,
 * over a loader whose paths are views (with a fill_), applies XOR and
 * overwrite refits (sparse, full XOR, placeholder and tracked passes, NaN
 * values) and must equal a dense load on the CPU path after each one, in
 * dcr_receiver_equal, the digests and the post-apply check. A loader path
 * with a host-computed op is refused with one line. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/device.h"
#include "dcr/receiver.h"
#include "device/device-internal.h"
#include "engine/device/far_device.h"
#include "engine/receiver/receiver_test_util.h"
#include "receiver/receiver-internal.h"

/* ---- the cube loader ---- */

/* The handle of a loader that keeps nothing but the header. */
static dcr_status_t cube_handle(dcr_loader_t **out_p)
{
    *out_p = calloc(1, sizeof(**out_p));
    return *out_p ? DCR_OK : dcr_error_set(DCR_ENOMEM, "cube loader");
}

static dcr_status_t cube_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                dcr_loader_t **out_p)
{
    (void)self;
    int64_t t3[3] = {6, 5, 4}, u[2] = {3, 4}, m[3] = {4, 3, 2}, f8[2] = {6, 4}, big[2] = {64, 96};
    DCR_CHECK(dcr_params_declare(p, "t3", DCR_DTYPE_BF16, 3, t3, NULL));
    DCR_CHECK(dcr_params_declare(p, "u", DCR_DTYPE_FP32, 2, u, NULL));
    DCR_CHECK(dcr_params_declare(p, "m", DCR_DTYPE_BF16, 3, m, NULL));
    DCR_CHECK(dcr_params_declare(p, "f8", DCR_DTYPE_FP8_E4M3, 2, f8, NULL));
    DCR_CHECK(dcr_params_declare(p, "big", DCR_DTYPE_BF16, 2, big, NULL));
    return cube_handle(out_p);
}

static void cube_destroy(dcr_loader_t *l)
{
    free(l);
}

/* Keeps NaN NaN and never makes one from a number of these magnitudes
 * (x -> -x): a dtype-preserving transform, so the overwrite path is
 * placeholder-safe and its copies stay same-dtype. */
static float negate(float x, void *arg)
{
    (void)arg;
    return -x;
}

static dcr_status_t cube_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *w)
{
    dcr_view_t p, dst, src;
    if (strcmp(name, "t3") == 0) {
        /* param[k][j][i] = w[i][j][k]: strides (1, 4, 20) against (30, 6, 1),
         * three dimensions no merge joins. */
        DCR_CHECK(dcr_load_param(ctx, "t3", &p));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 2, &dst));
        return dcr_load_copy(ctx, &dst, w);
    }
    if (strcmp(name, "u") == 0) {
        /* Columns 2..5 of an FP32 [3, 8]: rows of a strided region. */
        DCR_CHECK(dcr_load_param(ctx, "u", &p));
        DCR_CHECK(dcr_load_narrow(ctx, w, 1, 2, 4, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    if (strcmp(name, "m") == 0) {
        /* An elementwise transform in the tensor's own dtype, into a
         * transposed parameter: overwrite through the full passes. */
        DCR_CHECK(dcr_load_param(ctx, "m", &p));
        DCR_CHECK(dcr_load_map(ctx, w, DCR_DTYPE_BF16, negate, NULL, "negate", &src));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 2, &dst));
        return dcr_load_copy(ctx, &dst, &src);
    }
    if (strcmp(name, "f8") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "f8", &p));
        return dcr_load_copy(ctx, &p, w);
    }
    if (strcmp(name, "big") == 0) {
        /* A whole-tensor copy: one merged run (the sparse scatter's direct
         * case), large enough that records land across many cache lines. */
        DCR_CHECK(dcr_load_param(ctx, "big", &p));
        return dcr_load_copy(ctx, &p, w);
    }
    return dcr_error_set(DCR_ENOTFOUND, "cube: no parameter for %s", name);
}

static const dcr_loader_ops_t cube_ops = {
    {DCR_LOADER_OPS_VERSION, "cube", NULL}, cube_create, cube_destroy, cube_load};

/* ---- the views loader: the cube's parameters, views and a fill_ only ---- */

static dcr_status_t views_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                 dcr_loader_t **out_p)
{
    int64_t ones[1] = {7};
    DCR_CHECK(cube_create(self, config, p, out_p));
    dcr_status_t st = dcr_params_declare(p, "ones", DCR_DTYPE_FP32, 1, ones, NULL);
    if (st != DCR_OK) cube_destroy(*out_p); /* a failed create leaves nothing */
    return st;
}

static dcr_status_t views_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                               const dcr_view_t *w)
{
    dcr_view_t p, dst, src;
    if (strcmp(name, "m") == 0) {
        /* m reversed in its last dimension is no view: transposed instead,
         * with its first plane narrowed off and copied on its own. */
        DCR_CHECK(dcr_load_param(ctx, "m", &p));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 2, &dst));
        return dcr_load_copy(ctx, &dst, w);
    }
    if (strcmp(name, "u") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "ones", &p));
        DCR_CHECK(dcr_load_fill(ctx, &p, 1.0));
        DCR_CHECK(dcr_load_param(ctx, "u", &p));
        DCR_CHECK(dcr_load_narrow(ctx, w, 1, 2, 4, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    return cube_load(l, ctx, name, w);
}

static const dcr_loader_ops_t views_ops = {
    {DCR_LOADER_OPS_VERSION, "cube.views", NULL}, views_create, cube_destroy, views_load};

/* ---- the split loader: the views loader, big in three copies ---- */

/* Rows [r0, r0 + nr) and columns [c0, c0 + nc) of a two-dimensional view. */
static dcr_status_t block(dcr_load_ctx_t *ctx, const dcr_view_t *v, int64_t r0, int64_t nr,
                          int64_t c0, int64_t nc, dcr_view_t *out)
{
    dcr_view_t rows;
    DCR_CHECK(dcr_load_narrow(ctx, v, 0, r0, nr, &rows));
    return dcr_load_narrow(ctx, &rows, 1, c0, nc, out);
}

/* big's lower rows as two column halves (strided: the sparse path computes
 * their destinations and sends them up), then its upper rows as one run
 * (the record list itself, sent up before the first copy, is read after
 * the others). */
static dcr_status_t split_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                               const dcr_view_t *w)
{
    if (strcmp(name, "big") != 0) return views_load(l, ctx, name, w);
    dcr_view_t p, dst, src;
    DCR_CHECK(dcr_load_param(ctx, "big", &p));
    for (int64_t c0 = 0; c0 < 96; c0 += 48) {
        DCR_CHECK(block(ctx, &p, 32, 32, c0, 48, &dst));
        DCR_CHECK(block(ctx, w, 32, 32, c0, 48, &src));
        DCR_CHECK(dcr_load_copy(ctx, &dst, &src));
    }
    DCR_CHECK(block(ctx, &p, 0, 32, 0, 96, &dst));
    DCR_CHECK(block(ctx, w, 0, 32, 0, 96, &src));
    return dcr_load_copy(ctx, &dst, &src);
}

static const dcr_loader_ops_t split_ops = {
    {DCR_LOADER_OPS_VERSION, "cube.split", NULL}, views_create, cube_destroy, split_load};

/* ---- the cast loader: the cube's tensors through cast, cat and map_op ---- */

/* The cast and conv loaders' parameters: u is [3, u_cols] of u_dtype, m
 * of m_dtype; t3, f8 (bf16) and big (fp8 e4m3) are the same in both. */
static dcr_status_t declare_converted(dcr_params_t *p, int64_t u_cols, dcr_dtype_t u_dtype,
                                      dcr_dtype_t m_dtype, dcr_loader_t **out_p)
{
    int64_t t3[3] = {6, 5, 4}, u[2] = {3, u_cols}, m[3] = {4, 3, 2}, f8[2] = {6, 4},
            big[2] = {64, 96};
    DCR_CHECK(dcr_params_declare(p, "t3", DCR_DTYPE_BF16, 3, t3, NULL));
    DCR_CHECK(dcr_params_declare(p, "u", u_dtype, 2, u, NULL));
    DCR_CHECK(dcr_params_declare(p, "m", m_dtype, 3, m, NULL));
    DCR_CHECK(dcr_params_declare(p, "f8", DCR_DTYPE_BF16, 2, f8, NULL));
    DCR_CHECK(dcr_params_declare(p, "big", DCR_DTYPE_FP8_E4M3, 2, big, NULL));
    return cube_handle(out_p);
}

static dcr_status_t cast_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                dcr_loader_t **out_p)
{
    (void)self;
    (void)config;
    return declare_converted(p, 8, DCR_DTYPE_FP32, DCR_DTYPE_FP32, out_p);
}

/* cat(w[:, lo_at:lo_at+n], w[:, 0:lo_at]) along dim: a rotation. */
static dcr_status_t rotate(dcr_load_ctx_t *ctx, const dcr_view_t *w, int dim, int64_t at,
                           dcr_view_t *out)
{
    dcr_view_t parts[2];
    DCR_CHECK(dcr_load_narrow(ctx, w, dim, at, w->shape[dim] - at, &parts[0]));
    DCR_CHECK(dcr_load_narrow(ctx, w, dim, 0, at, &parts[1]));
    return dcr_load_cat(ctx, 2, parts, dim, out);
}

static dcr_status_t cast_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *w)
{
    dcr_view_t p, dst, src, a, b;
    if (strcmp(name, "u") == 0) {
        /* cat of strided column blocks (FP32 [3, 8] rotated by 5 columns),
         * then -exp of the closed set of maps (Mamba's A = -exp(A_log)):
         * overflow to -inf, underflow to -0, NaN kept. */
        DCR_CHECK(dcr_load_param(ctx, "u", &p));
        DCR_CHECK(rotate(ctx, w, 1, 5, &a));
        DCR_CHECK(dcr_load_map_op(ctx, &a, DCR_DTYPE_FP32, DCR_LOAD_NEG_EXP, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    if (strcmp(name, "m") == 0) {
        /* The FP32 norms' cast (bf16 -> fp32), into a transposed parameter. */
        DCR_CHECK(dcr_load_param(ctx, "m", &p));
        DCR_CHECK(dcr_load_cast(ctx, w, DCR_DTYPE_FP32, &src));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 2, &dst));
        return dcr_load_copy(ctx, &dst, &src);
    }
    if (strcmp(name, "f8") == 0) {
        /* Casts of two row blocks (fp8 -> bf16), concatenated swapped. */
        DCR_CHECK(dcr_load_param(ctx, "f8", &p));
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, 2, 4, &a));
        DCR_CHECK(dcr_load_narrow(ctx, w, 0, 0, 2, &b));
        dcr_view_t parts[2];
        DCR_CHECK(dcr_load_cast(ctx, &a, DCR_DTYPE_BF16, &parts[0]));
        DCR_CHECK(dcr_load_cast(ctx, &b, DCR_DTYPE_BF16, &parts[1]));
        DCR_CHECK(dcr_load_cat(ctx, 2, parts, 0, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    if (strcmp(name, "big") == 0) {
        /* bf16 -> fp8 e4m3fn: every number above 448 becomes NaN, which
         * the placeholder pass must see (NaN events) and hand to the
         * tracked pass. */
        DCR_CHECK(dcr_load_param(ctx, "big", &p));
        DCR_CHECK(dcr_load_cast(ctx, w, DCR_DTYPE_FP8_E4M3, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    return cube_load(l, ctx, name, w);
}

static const dcr_loader_ops_t cast_ops = {
    {DCR_LOADER_OPS_VERSION, "cube.cast", NULL}, cast_create, cube_destroy, cast_load};

/* ---- the conv loader: converting copy_ of views (copy_ converts) ---- */

static dcr_status_t conv_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                dcr_loader_t **out_p)
{
    (void)self;
    (void)config;
    return declare_converted(p, 4, DCR_DTYPE_FP16, DCR_DTYPE_BF16, out_p);
}

/* The views loader's paths, into parameters of other dtypes where the
 * canonical dtype differs: fp32 -> fp16 (strided columns), fp8 -> bf16,
 * bf16 -> fp8 (numbers above 448 become NaN, which the placeholder pass
 * must still write: its rule reads the source word). */
static dcr_status_t conv_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *w)
{
    dcr_view_t p, dst, src;
    if (strcmp(name, "u") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "u", &p));
        DCR_CHECK(dcr_load_narrow(ctx, w, 1, 2, 4, &src));
        return dcr_load_copy(ctx, &p, &src);
    }
    if (strcmp(name, "m") == 0) {
        DCR_CHECK(dcr_load_param(ctx, "m", &p));
        DCR_CHECK(dcr_load_transpose(ctx, &p, 0, 2, &dst));
        return dcr_load_copy(ctx, &dst, w);
    }
    return cube_load(l, ctx, name, w);
}

static const dcr_loader_ops_t conv_ops = {
    {DCR_LOADER_OPS_VERSION, "cube.conv", NULL}, conv_create, cube_destroy, conv_load};

/* ---- the far device (tests/engine/device/far_device.h) ---- */

/* The receiver needs no detect, track or gather: left NULL, a call faults. */
static const dcr_device_ops_t *receiver_far_table(void)
{
    far_table();
    g_far.detect = NULL;
    g_far.track = NULL;
    g_far.gather = NULL;
    return &g_far;
}

static dcr_inventory_t *cube_inventory(void)
{
    dcr_inventory_t *inv;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    int64_t t3[3] = {4, 5, 6}, u[2] = {3, 8}, m[3] = {2, 3, 4}, f8[2] = {6, 4}, big[2] = {64, 96};
    assert_int_equal(dcr_inventory_add(inv, "t3", DCR_DTYPE_BF16, 3, t3), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "u", DCR_DTYPE_FP32, 2, u), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "m", DCR_DTYPE_BF16, 3, m), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "f8", DCR_DTYPE_FP8_E4M3, 2, f8), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "big", DCR_DTYPE_BF16, 2, big), DCR_OK);
    return inv;
}

/* Staging of the receivers made here (0: the default). */
static size_t g_staging_bytes;

/* A receiver of base's configuration (its loader "cube" unless base names
 * one) on the far table when far, else on base's device. */
static dcr_receiver_t *receiver_on(const dcr_inventory_t *inv, const dcr_receiver_config_t *base,
                                   bool far)
{
    dcr_receiver_config_t rc = *base;
    rc.loader = base->loader ? base->loader : "cube";
    if (rc.staging_bytes == 0) rc.staging_bytes = g_staging_bytes;
    rc.inventory = inv;
    dcr_receiver_t *r = NULL;
    dcr_status_t st = dcr__receiver_create_on(far ? receiver_far_table() : NULL, &rc, &r);
    if (st != DCR_OK) fail_msg("receiver create: %s", dcr_error_line(st));
    return r;
}

static dcr_receiver_t *cube_receiver(const dcr_inventory_t *inv, const dcr_receiver_config_t *base)
{
    return receiver_on(inv, base, false);
}

/* The oracle of a receiver: its configuration on the CPU path. */
static dcr_receiver_config_t cpu_config(const dcr_receiver_config_t *base)
{
    dcr_receiver_config_t c = *base;
    c.device = "cpu";
    return c;
}

/* Resident bytes of r equal a fresh dense load of w. */
static void assert_dense(dcr_receiver_t *r, const dcr_inventory_t *inv,
                         const dcr_receiver_config_t *base, dcr_storage_t **w, const char *what)
{
    dcr_receiver_config_t oc = cpu_config(base);
    dcr_receiver_t *fresh = cube_receiver(inv, &oc);
    assert_int_equal(dcr_receiver_load_dense_all(fresh, w), DCR_OK);
    const char *param = NULL;
    int64_t elem = -1;
    if (!dcr_receiver_equal(r, fresh, &param, &elem))
        fail_msg("%s: differs from the dense load of the new version at %s[%lld]", what, param,
                 (long long)elem);
    dcr_param_digests_t a = {0}, b = {0};
    assert_int_equal(dcr_receiver_digests(r, &a), DCR_OK);
    assert_int_equal(dcr_receiver_digests(fresh, &b), DCR_OK);
    assert_int_equal(a.count, b.count);
    assert_memory_equal(a.digests, b.digests, a.count * sizeof(*a.digests));
    dcr_param_digests_free(&a);
    dcr_param_digests_free(&b);
    if (base->track_written) {
        dcr_check_result_t res;
        assert_int_equal(dcr_receiver_check(r, fresh, &res), DCR_OK);
        assert_true(res.regions > 0);
    }
    dcr_receiver_destroy(fresh);
}

/* Items per payload of the refits (the async tests pack more). */
static size_t g_per_payload = 2;

/* Syncs the far device saw while one attempt's payloads were applied, and
 * the items applied: the receiver's own count must agree with the device's,
 * and there is one sync per payload at most (none per item). */
typedef struct sync_tally {
    size_t syncs, items, payloads;
} sync_tally_t;

static sync_tally_t g_tally;

static void tally_attempt(dcr_receiver_t *r, size_t syncs0, const dcr_receiver_stats_t *s0,
                          size_t payloads)
{
    dcr_receiver_stats_t s1;
    dcr_receiver_stats(r, &s1);
    size_t syncs = g_far_syncs - syncs0;
    assert_int_equal(syncs, s1.apply_syncs - s0->apply_syncs);
    assert_true(syncs <= payloads);
    g_tally.syncs += syncs;
    g_tally.items += s1.items_applied - s0->items_applied;
    g_tally.payloads += payloads;
}

/* Refits of one receiver configuration (on the far table when far), each
 * against the dense oracle on the CPU path. */
static void refits_on(const dcr_receiver_config_t *base, bool far, uint64_t seed, const char *what)
{
    assert_int_equal(dcr_loader_register(&cube_ops), DCR_OK);
    assert_int_equal(dcr_loader_register(&views_ops), DCR_OK);
    assert_int_equal(dcr_loader_register(&cast_ops), DCR_OK);
    assert_int_equal(dcr_loader_register(&conv_ops), DCR_OK);
    assert_int_equal(dcr_loader_register(&split_ops), DCR_OK);
    /* Loaders whose paths are views of the tensor (m a plain transpose). */
    bool views = base->loader && (strcmp(base->loader, "cube.views") == 0 ||
                                  strcmp(base->loader, "cube.conv") == 0 ||
                                  strcmp(base->loader, "cube.split") == 0);
    bool casts = base->loader && strcmp(base->loader, "cube.cast") == 0;
    dcr_inventory_t *inv = cube_inventory();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    dcr_storage_t **w = rt_tensors(inv, &rng);
    dcr_receiver_t *r = receiver_on(inv, base, far);
    assert_int_equal(dcr_receiver_load_dense_all(r, w), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(r), DCR_OK);
    int enc[8];
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
        dcr_path_info_t pi;
        assert_int_equal(dcr_receiver_path(r, t, &pi), DCR_OK);
        enc[t] = pi.cls == DCR_PATH_XOR ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE;
    }
    /* The paths this test means to cover (the views loader's are all XOR:
     * its overwrites are the all-overwrite retries). */
    assert_int_equal(enc[dcr_inventory_find(inv, "t3")], DCR_ENCODING_XOR);
    assert_int_equal(enc[dcr_inventory_find(inv, "m")],
                     views ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE);
    const double rates[] = {0.01, 0.2, 0.6, 1.0};
    for (int i = 0; i < 8; i++) {
        dcr_storage_t **n = rt_tensors(inv, NULL);
        for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
            const dcr_tensor_desc_t *d = dcr_inventory_at(inv, t);
            rt_mutate(&rng, d->dtype, w[t]->data, n[t]->data, dcr_desc_numel(d), rates[i % 4]);
        }
        int e[8];
        /* Every fourth refit is an all-overwrite retry. */
        for (size_t t = 0; t < dcr_inventory_count(inv); t++)
            e[t] = i % 4 == 3 ? DCR_ENCODING_OVERWRITE : enc[t];
        rt_payloads_t ps = {0};
        rt_encode_refit(inv, w, n, e, (uint64_t)i + 1, 2, g_per_payload, &rng, &ps);
        assert_int_equal(dcr_receiver_begin_attempt(r, (uint64_t)i + 1), DCR_OK);
        /* The right bits only after the refit: the old ones must differ. */
        if (i == 0) {
            dcr_receiver_config_t oc = cpu_config(base);
            dcr_receiver_t *next = cube_receiver(inv, &oc);
            assert_int_equal(dcr_receiver_load_dense_all(next, n), DCR_OK);
            assert_false(dcr_receiver_equal(r, next, NULL, NULL));
            dcr_receiver_destroy(next);
        }
        size_t syncs0 = g_far_syncs;
        dcr_receiver_stats_t s0;
        dcr_receiver_stats(r, &s0);
        for (size_t k = 0; k < ps.n; k++) {
            dcr_ingest_t disp;
            dcr_status_t st = dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], &disp);
            if (st != DCR_OK) fail_msg("%s refit %d: %s", what, i, dcr_error_line(st));
            assert_int_equal(disp, DCR_INGEST_ACCEPTED);
        }
        /* Loaders without temporaries: nothing but the payload's own sync
         * waits on the device while it applies. */
        if (far && g_far_async && !casts && g_staging_bytes == 0)
            tally_attempt(r, syncs0, &s0, ps.n);
        assert_dense(r, inv, base, n, what);
        rt_payloads_free(&ps);
        rt_tensors_free(w, inv);
        w = n;
    }
    dcr_receiver_stats_t st;
    dcr_receiver_stats(r, &st);
    /* cube's m is a map, cube.cast's are casts and cats: never views-only */
    bool scratch = base->full_pass || !views;
    if (scratch) assert_true(st.items_full > 0);
    /* bf16 -> fp8 makes NaNs of large numbers: the tracked pass follows. */
    if (casts) assert_true(st.items_tracked > 0);
    if (base->full_pass)
        assert_int_equal(st.items_sparse, 0);
    else
        assert_true(st.items_sparse > 0);
    if (base->mask == DCR_MASK_TRACKED && scratch) assert_true(st.items_tracked > 0);
    dcr_receiver_destroy(r);
    rt_tensors_free(w, inv);
    dcr_inventory_destroy(inv);
}

static void refits(const dcr_receiver_config_t *base, uint64_t seed, const char *what)
{
    refits_on(base, false, seed, what);
}

static void test_refits_on_devices(void **state)
{
    (void)state;
    const char *devices[] = {NULL, "cpu", "auto"};
    uint64_t seed = 0xD5C;
    for (size_t dv = 0; dv < 3; dv++) {
        /* "auto" resolves to cuda only where a GPU is, and the receiver
         * refuses cuda; here it must be cpu. */
        if (devices[dv] && !strcmp(devices[dv], "auto")) {
            const dcr_device_ops_t *cuda = dcr_device_find("cuda");
            if (cuda && cuda->count(cuda) > 0) continue;
        }
        for (int m = 0; m < 4; m++) {
            dcr_receiver_config_t base = {0};
            base.device = devices[dv];
            base.full_pass = m & 1;
            base.mask = m & 2 ? DCR_MASK_TRACKED : DCR_MASK_PLACEHOLDER;
            char what[96];
            snprintf(what, sizeof(what), "device %s full_pass %d mask %s",
                     devices[dv] ? devices[dv] : "(default)", m & 1,
                     m & 2 ? "tracked" : "placeholder");
            refits(&base, seed++, what);
        }
    }
}

/* NaN-valued overwrite records on the placeholder path go through the
 * tracked pass (the activity map on the device). */
static void test_nan_values_tracked(void **state)
{
    (void)state;
    assert_int_equal(dcr_loader_register(&cube_ops), DCR_OK);
    dcr_inventory_t *inv = cube_inventory();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 77);
    dcr_storage_t **w = rt_tensors(inv, &rng), **n = rt_tensors(inv, NULL);
    dcr_receiver_config_t base = {.device = "cpu"};
    dcr_receiver_t *r = cube_receiver(inv, &base);
    assert_int_equal(dcr_receiver_load_dense_all(r, w), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(r), DCR_OK);
    for (size_t t = 0; t < dcr_inventory_count(inv); t++)
        memcpy(n[t]->data, w[t]->data, n[t]->bytes);
    /* m: every third element becomes a NaN with a payload, the others a
     * number (and never the value it held). */
    size_t mi = (size_t)dcr_inventory_find(inv, "m");
    uint16_t *mv = n[mi]->data;
    for (int64_t i = 0; i < dcr_desc_numel(dcr_inventory_at(inv, mi)); i++)
        mv[i] = i % 3 == 0 ? (uint16_t)(0x7F81u + (unsigned)i) : (uint16_t)(0x3F00u + (unsigned)i);
    int enc[8];
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) enc[t] = DCR_ENCODING_OVERWRITE;
    rt_payloads_t ps = {0};
    rt_encode_refit(inv, w, n, enc, 1, 1, 4, &rng, &ps);
    assert_int_equal(dcr_receiver_begin_attempt(r, 1), DCR_OK);
    for (size_t k = 0; k < ps.n; k++) {
        dcr_ingest_t disp;
        assert_int_equal(dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], &disp), DCR_OK);
    }
    dcr_receiver_stats_t st;
    dcr_receiver_stats(r, &st);
    assert_true(st.items_tracked > 0);
    assert_dense(r, inv, &base, n, "NaN-valued overwrites");
    rt_payloads_free(&ps);
    dcr_receiver_destroy(r);
    rt_tensors_free(w, inv);
    rt_tensors_free(n, inv);
    dcr_inventory_destroy(inv);
}

/* The far device, every pass: sparse and full, placeholder and tracked
 * masks, with the post-apply check, against the CPU path's dense load;
 * inputs drawn from seed. */
static void loader_refits(const char *loader, uint64_t seed, const char *device, bool far)
{
    for (int m = 0; m < 4; m++) {
        dcr_receiver_config_t base = {.loader = loader, .track_written = true};
        base.device = device;
        base.full_pass = m & 1;
        base.mask = m & 2 ? DCR_MASK_TRACKED : DCR_MASK_PLACEHOLDER;
        char what[96];
        snprintf(what, sizeof(what), "%s on %s device, staging %zu, full_pass %d mask %s", loader,
                 far ? "far" : device, g_staging_bytes, m & 1, m & 2 ? "tracked" : "placeholder");
        refits_on(&base, far, seed++, what);
    }
}

static void views_refits(const char *device, bool far)
{
    loader_refits("cube.views", 0xFA5, device, far);
}

static void test_far_refits(void **state)
{
    (void)state;
    views_refits(NULL, true);
}

/* cast, cat and map_op on the device (the far table: any host access of a
 * temporary faults), every pass, against the CPU path's dense load: the
 * convert kernel bit for bit dcr_convert (-0.0, NaN payloads, subnormals,
 * bf16 numbers fp8 cannot hold), cat's ASSIGN combines, -exp, the activity
 * maps carried through all three, and the NaN events of the placeholder
 * pass counted on the device. */
static void cast_refits(const char *device, bool far)
{
    loader_refits("cube.cast", 0xCA5, device, far);
}

/* Converting copy_ on the device: in the sparse path converted record
 * words scattered, in the overwrite passes convert's placeholder rule (on
 * the source word) or activity map, against the CPU path. */
static void conv_refits(const char *device, bool far)
{
    loader_refits("cube.conv", 0xC0F, device, far);
}

static void test_far_converting_copies(void **state)
{
    (void)state;
    conv_refits(NULL, true);
}

static void test_far_casts(void **state)
{
    (void)state;
    cast_refits(NULL, true);
}

static void test_cpu_casts(void **state)
{
    (void)state;
    cast_refits("cpu", false);
}

/* NaN-valued overwrite records on the far device: the placeholder pass
 * leaves them, the tracked pass applies them through the activity map the
 * load context carried, laid out like the copy's source. */
static void nan_values_on(const char *device, bool far)
{
    assert_int_equal(dcr_loader_register(&views_ops), DCR_OK);
    dcr_inventory_t *inv = cube_inventory();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 78);
    dcr_storage_t **w = rt_tensors(inv, &rng), **n = rt_tensors(inv, NULL);
    dcr_receiver_config_t base = {.loader = "cube.views", .full_pass = true, .device = device};
    dcr_receiver_t *r = receiver_on(inv, &base, far);
    assert_int_equal(dcr_receiver_load_dense_all(r, w), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(r), DCR_OK);
    for (size_t t = 0; t < dcr_inventory_count(inv); t++)
        memcpy(n[t]->data, w[t]->data, n[t]->bytes);
    size_t ti = (size_t)dcr_inventory_find(inv, "t3");
    uint16_t *tv = n[ti]->data;
    for (int64_t i = 0; i < dcr_desc_numel(dcr_inventory_at(inv, ti)); i++)
        tv[i] =
            i % 3 == 0 ? (uint16_t)(0xFF81u + (unsigned)i % 64) : (uint16_t)(0x3F00u + (unsigned)i);
    int enc[8];
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) enc[t] = DCR_ENCODING_OVERWRITE;
    rt_payloads_t ps = {0};
    rt_encode_refit(inv, w, n, enc, 1, 1, 4, &rng, &ps);
    assert_int_equal(dcr_receiver_begin_attempt(r, 1), DCR_OK);
    for (size_t k = 0; k < ps.n; k++) {
        dcr_ingest_t disp;
        dcr_status_t st = dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], &disp);
        if (st != DCR_OK) fail_msg("far NaN values: %s", dcr_error_line(st));
    }
    dcr_receiver_stats_t st;
    dcr_receiver_stats(r, &st);
    assert_true(st.items_tracked > 0);
    assert_dense(r, inv, &base, n, "far NaN-valued overwrites");
    rt_payloads_free(&ps);
    dcr_receiver_destroy(r);
    rt_tensors_free(w, inv);
    rt_tensors_free(n, inv);
    dcr_inventory_destroy(inv);
}

static void test_far_nan_values(void **state)
{
    (void)state;
    nan_values_on(NULL, true);
}

/* The same on a GPU (`test_receiver_device --gpu`, CTest's
 * test_receiver_device_gpu): the cuda backend itself. */
static void test_cuda_views(void **state)
{
    (void)state;
    views_refits("cuda", false);
    nan_values_on("cuda", false);
    cast_refits("cuda", false);
    conv_refits("cuda", false);
}

/* A path with a host-computed op (the cube's map) is refused on the far
 * device with one line naming the tensor and the op, before any read. */
static void test_far_refuses_host_ops(void **state)
{
    (void)state;
    assert_int_equal(dcr_loader_register(&cube_ops), DCR_OK);
    dcr_inventory_t *inv = cube_inventory();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 79);
    dcr_storage_t **w = rt_tensors(inv, &rng);
    dcr_receiver_config_t base = {0};
    dcr_receiver_t *r = receiver_on(inv, &base, true);
    dcr_status_t st = dcr_receiver_load_dense_all(r, w);
    assert_int_equal(st, DCR_EUNSUPPORTED);
    const char *line = dcr_error_line(st);
    assert_non_null(strstr(line, "load m"));
    assert_non_null(strstr(line, "map"));
    assert_null(strchr(line, '\n'));
    dcr_receiver_destroy(r);
    rt_tensors_free(w, inv);
    dcr_inventory_destroy(inv);
}

/* cuda: refused at create with one line where this build has no CUDA
 * backend or the machine no GPU (with a GPU it is accepted); an unknown
 * name likewise. */
static void test_refusals(void **state)
{
    (void)state;
    assert_int_equal(dcr_loader_register(&cube_ops), DCR_OK);
    dcr_inventory_t *inv = cube_inventory();
    dcr_receiver_config_t rc = {.loader = "cube", .inventory = inv, .device = "cuda"};
    dcr_receiver_t *r = NULL;
    dcr_status_t st = dcr_receiver_create(&rc, &r);
    const dcr_device_ops_t *cuda = dcr_device_find("cuda");
    if (cuda && cuda->count(cuda) > 0) {
        assert_int_equal(st, DCR_OK);
        dcr_receiver_destroy(r);
        r = NULL;
    } else {
        assert_true(st == DCR_EUNSUPPORTED || st == DCR_ENOTFOUND);
        assert_null(r);
        const char *line = dcr_error_line(st);
        assert_non_null(strstr(line, "cuda"));
        assert_null(strchr(line, '\n'));
    }
    rc.device = "tpu";
    assert_int_equal(dcr_receiver_create(&rc, &r), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_line(DCR_ENOTFOUND), "tpu"));
    assert_null(r);
    dcr_inventory_destroy(inv);
}

/* --gpu: the cuda receiver only; exit 77 (CTest: skipped) without a CUDA
 * build or a GPU. */
/* The far device's asynchronous mode itself: a host-to-device copy reads
 * its source at the sync, and results are there only after it; so a caller
 * that reused staging early or read too soon would see other bytes. */
static void test_far_async_defers(void **state)
{
    (void)state;
    dcr_device_t *d;
    dcr_device_stream_t *s;
    void *buf;
    uint32_t src[4] = {1, 2, 3, 4}, got[4] = {9, 9, 9, 9}, zero[4] = {0};
    assert_int_equal(far_table()->create(far_table(), 0, &d), DCR_OK);
    far_set_async(true);
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &s), DCR_OK);
    assert_int_equal(dcr_device_alloc(d, sizeof src, &buf), DCR_OK);
    assert_int_equal(dcr_device_copy(d, s, buf, src, sizeof src, DCR_DEVICE_H2D), DCR_OK);
    src[2] = 33; /* rewritten before the sync: the copy sees it */
    assert_int_equal(dcr_device_copy(d, s, got, buf, sizeof got, DCR_DEVICE_D2H), DCR_OK);
    assert_int_equal(got[0], 9); /* nothing ran yet */
    assert_int_equal(dcr_device_sync(d, s), DCR_OK);
    assert_memory_equal(got, src, sizeof got);
    /* An injected error: half the queue runs, the sync fails. */
    far_fail_sync(1);
    assert_int_equal(dcr_device_copy(d, s, buf, zero, sizeof zero, DCR_DEVICE_H2D), DCR_OK);
    assert_int_equal(dcr_device_copy(d, s, got, buf, sizeof got, DCR_DEVICE_D2H), DCR_OK);
    assert_int_equal(dcr_device_sync(d, s), DCR_EIO);
    assert_memory_equal(got, src, sizeof got); /* the read-back was dropped */
    assert_int_equal(g_far_syncs, 2);
    dcr_device_free(d, buf);
    dcr_device_stream_destroy(d, s);
    dcr_device_destroy(d);
    far_set_async(false);
}

/* Staging and overlap on the far device in asynchronous mode: several items
 * per payload, every pass (sparse, full XOR, placeholder and tracked, the
 * all-overwrite retries, converting copies and the casts' temporaries), each
 * refit bit-exact against the CPU path's dense load; the syncs of each
 * attempt, counted by the device, are at most one per payload and fewer than
 * the items they complete. Then again through a tiny staging area. */
static void test_far_async_overlap(void **state)
{
    (void)state;
    far_set_async(true);
    g_per_payload = 8;
    g_tally = (sync_tally_t){0};
    views_refits(NULL, true);
    loader_refits("cube.split", 0xFA5, NULL, true);
    conv_refits(NULL, true);
    cast_refits(NULL, true);
    assert_true(g_tally.payloads > 0);
    assert_true(g_tally.syncs <= g_tally.payloads);
    if (g_tally.syncs >= g_tally.items)
        fail_msg("%zu syncs for %zu items in %zu payloads", g_tally.syncs, g_tally.items,
                 g_tally.payloads);
    print_message("far async: %zu syncs for %zu items in %zu payloads\n", g_tally.syncs,
                  g_tally.items, g_tally.payloads);
    /* Staging areas of 64 and 2048 bytes: they fill within items and within
     * passes, so the stream drains there, and the running pass's records go
     * up again into the reused (or grown) area. */
    size_t sizes[2] = {64, 2048};
    for (int k = 0; k < 2; k++) {
        g_staging_bytes = sizes[k];
        views_refits(NULL, true);
        loader_refits("cube.split", 0xFA5, NULL, true);
        cast_refits(NULL, true);
    }
    g_staging_bytes = 0;
    g_per_payload = 2;
    far_set_async(false);
}

/* A device error surfacing at the payload's sync fails the attempt like
 * any apply failure: DCR_EIO, nothing counted as applied, later payloads of
 * the attempt refused; the storage is half-applied (neither version), and
 * after a dense restore the same refit, retried, is bit-exact. */
static void test_far_sync_error(void **state)
{
    (void)state;
    assert_int_equal(dcr_loader_register(&views_ops), DCR_OK);
    far_set_async(true);
    dcr_inventory_t *inv = cube_inventory();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 0xE10);
    dcr_storage_t **w = rt_tensors(inv, &rng), **n = rt_tensors(inv, NULL);
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, t);
        rt_mutate(&rng, d->dtype, w[t]->data, n[t]->data, dcr_desc_numel(d), 0.3);
    }
    dcr_receiver_config_t base = {.loader = "cube.views", .track_written = true};
    dcr_receiver_t *r = receiver_on(inv, &base, true);
    assert_int_equal(dcr_receiver_load_dense_all(r, w), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(r), DCR_OK);
    int enc[8];
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) enc[t] = DCR_ENCODING_XOR;
    uint64_t failed_items = 0;
    for (uint64_t tau = 1; tau <= 2; tau++) {
        rt_payloads_t ps = {0};
        rt_encode_refit(inv, w, n, enc, tau, 2, 8, &rng, &ps);
        assert_true(ps.n >= 2);
        assert_int_equal(dcr_receiver_begin_attempt(r, tau), DCR_OK);
        dcr_receiver_stats_t s0, s1;
        dcr_receiver_stats(r, &s0);
        /* The failed attempt's items count at no later drain either. */
        if (tau == 2) assert_int_equal(s0.items_applied, failed_items);
        if (tau == 1) far_fail_sync(1);
        for (size_t k = 0; k < ps.n; k++) {
            dcr_status_t st = dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], NULL);
            dcr_status_t want = tau == 2 ? DCR_OK : k == 0 ? DCR_EIO : DCR_EATTEMPT;
            if (st != want)
                fail_msg("attempt %llu payload %zu: %s", (unsigned long long)tau, k,
                         dcr_error_line(st));
        }
        dcr_receiver_stats(r, &s1);
        rt_payloads_free(&ps);
        if (tau == 2) break;
        assert_int_equal(s1.items_applied, s0.items_applied);
        assert_int_equal(s1.payloads_applied, s0.payloads_applied);
        failed_items = s1.items_applied;
        /* Half-applied: the new version's bytes are not there (the old
         * ones may be partly overwritten). */
        dcr_receiver_config_t oc = cpu_config(&base);
        dcr_receiver_t *next = cube_receiver(inv, &oc);
        assert_int_equal(dcr_receiver_load_dense_all(next, n), DCR_OK);
        assert_false(dcr_receiver_equal(r, next, NULL, NULL));
        dcr_receiver_destroy(next);
        /* The node's restore: the version before, dense. */
        assert_int_equal(dcr_receiver_load_dense_all(r, w), DCR_OK);
    }
    assert_dense(r, inv, &base, n, "retry after a device error at sync");
    dcr_receiver_destroy(r);
    rt_tensors_free(w, inv);
    rt_tensors_free(n, inv);
    dcr_inventory_destroy(inv);
    far_set_async(false);
}

static int gpu_main(void)
{
    const dcr_device_ops_t *cuda = dcr_device_find("cuda");
    if (cuda == NULL || cuda->count(cuda) <= 0) {
        printf("test_receiver_device --gpu: skipped: %s\n",
               cuda ? "no GPU found" : "this build has no CUDA backend");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cuda_views)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0) return gpu_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refits_on_devices),
        cmocka_unit_test(test_nan_values_tracked),
        cmocka_unit_test(test_far_refits),
        cmocka_unit_test(test_far_nan_values),
        cmocka_unit_test(test_far_casts),
        cmocka_unit_test(test_cpu_casts),
        cmocka_unit_test(test_far_converting_copies),
        cmocka_unit_test(test_far_refuses_host_ops),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_far_async_defers),
        cmocka_unit_test(test_far_async_overlap),
        cmocka_unit_test(test_far_sync_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
