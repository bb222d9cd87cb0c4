/* A receiver decodes no payload larger than its inventory allows (issue
 * 32, item 9): a store that serves a valid-digest payload whose body
 * expands far beyond every tensor the receiver holds is refused from its
 * header, before the body is allocated, and a payload of the largest
 * legitimate size still decodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dcr/codec.h"
#include "dcr/inventory.h"
#include "dcr/loader.h"
#include "dcr/receiver.h"
#include "engine/receiver/receiver_test_util.h"

/* ---- a loader that copies each tensor into one parameter of its shape ---- */

static dcr_status_t copy_create(const dcr_loader_ops_t *self, const void *config, dcr_params_t *p,
                                dcr_loader_t **out_p)
{
    (void)self;
    const dcr_inventory_t *inv = config;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        DCR_CHECK(dcr_params_declare(p, d->name, d->dtype, d->ndim, d->shape, NULL));
    }
    *out_p = calloc(1, sizeof(**out_p));
    return *out_p ? DCR_OK : dcr_error_set(DCR_ENOMEM, "copy loader");
}

static void copy_destroy(dcr_loader_t *l)
{
    free(l);
}

static dcr_status_t copy_load(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                              const dcr_view_t *w)
{
    (void)l;
    dcr_view_t p;
    DCR_CHECK(dcr_load_param(ctx, name, &p));
    return dcr_load_copy(ctx, &p, w);
}

static const dcr_loader_ops_t copy_ops = {
    {DCR_LOADER_OPS_VERSION, "bound.copy", NULL}, copy_create, copy_destroy, copy_load};

/* ---- fixture: 64 + 32 elements in two tensors ---- */

typedef struct world {
    dcr_inventory_t *inv;
    dcr_receiver_t *r;
    dcr_storage_t **w;
    dcr_rng_t rng;
} world_t;

static void world_init(world_t *wd)
{
    memset(wd, 0, sizeof *wd);
    assert_int_equal(dcr_loader_register(&copy_ops), DCR_OK);
    assert_int_equal(dcr_inventory_create(&wd->inv), DCR_OK);
    int64_t a[2] = {8, 8}, b[1] = {32};
    assert_int_equal(dcr_inventory_add(wd->inv, "layer.a", DCR_DTYPE_BF16, 2, a), DCR_OK);
    assert_int_equal(dcr_inventory_add(wd->inv, "layer.b", DCR_DTYPE_FP32, 1, b), DCR_OK);
    dcr_rng_seed(&wd->rng, 7);
    wd->w = rt_tensors(wd->inv, &wd->rng);
    dcr_receiver_config_t rc = {
        .loader = "bound.copy", .loader_config = wd->inv, .inventory = wd->inv};
    assert_int_equal(dcr_receiver_create(&rc, &wd->r), DCR_OK);
    assert_int_equal(dcr_receiver_load_dense_all(wd->r, wd->w), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(wd->r), DCR_OK);
    assert_int_equal(dcr_receiver_begin_attempt(wd->r, 1), DCR_OK);
}

static void world_free(world_t *wd)
{
    dcr_receiver_destroy(wd->r);
    rt_tensors_free(wd->w, wd->inv);
    dcr_inventory_destroy(wd->inv);
}

/* One item named `name` declaring `numel` elements of dtype, every one of
 * them changed (zeros: the body compresses to almost nothing). */
static void encode_one(dcr_encoder_t *e, const char *name, dcr_dtype_t dtype, int64_t numel,
                       uint64_t id, const uint8_t **buf, size_t *len)
{
    int64_t *idx = malloc((size_t)numel * sizeof *idx);
    void *val = calloc((size_t)numel, dcr_dtype_size(dtype));
    for (int64_t i = 0; i < numel; i++) idx[i] = i;
    int64_t shape[1] = {numel};
    dcr_codec_item_t it = {name, 1, shape, dtype, DCR_ENCODING_OVERWRITE, numel, idx, 0, val};
    assert_int_equal(dcr_encoder_add(e, &it), DCR_OK);
    dcr_encode_params_t prm = {1, 0, id, 1, false};
    assert_int_equal(dcr_encoder_finish(e, &prm, buf, len), DCR_OK);
    free(idx);
    free(val);
}

static void test_oversized_body_refused_before_decoding(void **state)
{
    (void)state;
    world_t wd;
    world_init(&wd);
    dcr_encoder_t *e;
    assert_int_equal(dcr_encoder_create(&e), DCR_OK);
    /* 4 Mi BF16 values, 8 MiB of body, claimed for a 64-element tensor:
     * digest and codec rules hold, but no tensor here has that size. */
    const uint8_t *buf;
    size_t len;
    encode_one(e, "layer.a", DCR_DTYPE_BF16, (int64_t)4 << 20, 0, &buf, &len);
    assert_true(len < (1u << 20)); /* a small download, a large body */
    assert_int_not_equal(dcr_receiver_apply_payload(wd.r, buf, len, NULL), DCR_OK);
    /* Refused from the header's raw length, not after a decode found the
     * shape wrong: the decode would have allocated the 8 MiB. */
    const char *why = dcr_error_detail();
    if (!strstr(why, "limit")) fail_msg("refused late: %s", why);
    dcr_encoder_destroy(e);
    world_free(&wd);
}

static void test_largest_legitimate_payload_accepted(void **state)
{
    (void)state;
    world_t wd;
    world_init(&wd);
    dcr_encoder_t *e;
    assert_int_equal(dcr_encoder_create(&e), DCR_OK);
    /* Every element of both tensors changed, in one payload. */
    const dcr_tensor_desc_t *d[2] = {dcr_inventory_at(wd.inv, 0), dcr_inventory_at(wd.inv, 1)};
    for (int k = 0; k < 2; k++) {
        int64_t n = dcr_desc_numel(d[k]);
        int64_t *idx = malloc((size_t)n * sizeof *idx);
        void *val = calloc((size_t)n, dcr_dtype_size(d[k]->dtype));
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        dcr_codec_item_t it = {
            d[k]->name, d[k]->ndim, d[k]->shape, d[k]->dtype, DCR_ENCODING_OVERWRITE,
            n,          idx,        0,           val};
        assert_int_equal(dcr_encoder_add(e, &it), DCR_OK);
        free(idx);
        free(val);
    }
    dcr_encode_params_t prm = {1, 0, 5, 1, false};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(e, &prm, &buf, &len), DCR_OK);
    assert_int_equal(dcr_receiver_apply_payload(wd.r, buf, len, NULL), DCR_OK);
    dcr_encoder_destroy(e);
    world_free(&wd);
}

/* The bound a receiver publishes for other decoders of its payloads (a
 * restore's checks): the inventory's fully changed size, computed here by
 * hand (body head 24; per tensor numel * (dtype + 8 gap bytes) and 4 item
 * entries of 96 bytes plus the name), and a decode under it refuses the
 * oversized payload as the receiver does. */
static void test_published_bound_refuses_as_the_receiver(void **state)
{
    (void)state;
    world_t wd;
    world_init(&wd);
    uint64_t by_hand = 24 + (64 * (2 + 8) + 4 * (96 + 8)) + (32 * (4 + 8) + 4 * (96 + 8));
    assert_int_equal(dcr_receiver_payload_bound(wd.r), by_hand);
    dcr_encoder_t *e;
    assert_int_equal(dcr_encoder_create(&e), DCR_OK);
    const uint8_t *buf;
    size_t len;
    encode_one(e, "layer.a", DCR_DTYPE_BF16, (int64_t)4 << 20, 0, &buf, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_payload_policy_t policy = {NULL, dcr_receiver_payload_bound(wd.r)};
    assert_int_not_equal(dcr_payload_decode_with(p, buf, len, &policy), DCR_OK);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(e);
    world_free(&wd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oversized_body_refused_before_decoding),
        cmocka_unit_test(test_largest_legitimate_payload_accepted),
        cmocka_unit_test(test_published_bound_refuses_as_the_receiver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
