/* ctest-labels: unit */
/* The canonical inventory: order, lookup by name, totals, and rejection of
 * bad entries. Expected totals are computed here from the shapes by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/inventory.h"

static void test_add_find_and_totals(void **state)
{
    (void)state;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    const int64_t emb[2] = {1000, 64};
    const int64_t norm[1] = {64};
    const int64_t conv[3] = {48, 1, 4};
    assert_int_equal(dcr_inventory_add(inv, "embed.weight", DCR_DTYPE_BF16, 2, emb), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "norm.weight", DCR_DTYPE_FP32, 1, norm), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "conv.weight", DCR_DTYPE_FP16, 3, conv), DCR_OK);

    assert_int_equal(dcr_inventory_count(inv), 3);
    assert_int_equal(dcr_inventory_find(inv, "embed.weight"), 0);
    assert_int_equal(dcr_inventory_find(inv, "norm.weight"), 1);
    assert_int_equal(dcr_inventory_find(inv, "conv.weight"), 2);
    assert_int_equal(dcr_inventory_find(inv, "missing.weight"), -1);
    assert_int_equal(dcr_inventory_find(inv, "embed"), -1);

    const dcr_tensor_desc_t *d = dcr_inventory_at(inv, 2);
    assert_non_null(d);
    assert_string_equal(d->name, "conv.weight");
    assert_int_equal(d->dtype, DCR_DTYPE_FP16);
    assert_int_equal(d->ndim, 3);
    assert_int_equal(d->shape[0], 48);
    assert_int_equal(d->shape[1], 1);
    assert_int_equal(d->shape[2], 4);
    assert_null(dcr_inventory_at(inv, 3));

    /* 64000 + 64 + 192 elements; 2 x 64000 + 4 x 64 + 2 x 192 bytes. */
    assert_int_equal(dcr_inventory_params(inv), 64256);
    assert_int_equal(dcr_inventory_bytes(inv), 128000 + 256 + 384);
    assert_int_equal(dcr_inventory_max_tensor_bytes(inv), 128000);
    dcr_inventory_destroy(inv);
}

static void test_name_is_copied(void **state)
{
    (void)state;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    char name[32] = "layer.0.weight";
    const int64_t shape[1] = {8};
    assert_int_equal(dcr_inventory_add(inv, name, DCR_DTYPE_BF16, 1, shape), DCR_OK);
    name[6] = '9';
    assert_string_equal(dcr_inventory_at(inv, 0)->name, "layer.0.weight");
    assert_int_equal(dcr_inventory_find(inv, "layer.0.weight"), 0);
    assert_int_equal(dcr_inventory_find(inv, name), -1);
    dcr_inventory_destroy(inv);
}

static void test_duplicate_rejected(void **state)
{
    (void)state;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    const int64_t shape[2] = {4, 4};
    assert_int_equal(dcr_inventory_add(inv, "a.weight", DCR_DTYPE_BF16, 2, shape), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "a.weight", DCR_DTYPE_FP32, 2, shape), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "duplicate"));
    assert_non_null(strstr(dcr_error_detail(), "a.weight"));
    assert_int_equal(dcr_inventory_count(inv), 1);
    assert_int_equal(dcr_inventory_params(inv), 16);
    assert_int_equal(dcr_inventory_at(inv, 0)->dtype, DCR_DTYPE_BF16);
    dcr_inventory_destroy(inv);
}

static void test_bad_entries_rejected(void **state)
{
    (void)state;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    const int64_t ok[7] = {2, 2, 2, 2, 2, 2, 2};
    const int64_t zero[2] = {4, 0};
    const int64_t negative[1] = {-3};
    const int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 30, 4};

    assert_int_equal(dcr_inventory_add(inv, "", DCR_DTYPE_BF16, 1, ok), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, NULL, DCR_DTYPE_BF16, 1, ok), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, "z", DCR_DTYPE_BF16, 2, zero), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "z"));
    assert_int_equal(dcr_inventory_add(inv, "n", DCR_DTYPE_BF16, 1, negative), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, "d", DCR_DTYPE_BF16, DCR_MAX_DIMS + 1, ok), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, "d", DCR_DTYPE_BF16, -1, ok), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, "t", DCR_DTYPE_COUNT, 1, ok), DCR_EINVAL);
    assert_int_equal(dcr_inventory_add(inv, "h", DCR_DTYPE_BF16, 3, huge), DCR_EINVAL);
    assert_int_equal(dcr_inventory_count(inv), 0);

    /* DCR_MAX_DIMS dims is still fine; the rejected names stay free. */
    assert_int_equal(dcr_inventory_add(inv, "d", DCR_DTYPE_BF16, DCR_MAX_DIMS, ok), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "z", DCR_DTYPE_BF16, 1, ok), DCR_OK);
    assert_int_equal(dcr_inventory_count(inv), 2);
    assert_int_equal(dcr_inventory_params(inv), 64 + 2);
    dcr_inventory_destroy(inv);
}

/* Enough tensors to force many index resizes; every one must stay findable
 * at its insertion position. */
static void test_many_tensors_keep_order(void **state)
{
    (void)state;
    enum { N = 50000 };
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    char name[64];
    for (int i = 0; i < N; i++) {
        const int64_t shape[2] = {1 + i % 7, 3};
        snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%d.up_proj.weight", i / 128,
                 i % 128);
        assert_int_equal(dcr_inventory_add(inv, name, DCR_DTYPE_BF16, 2, shape), DCR_OK);
    }
    assert_int_equal(dcr_inventory_count(inv), N);
    int64_t params = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%d.up_proj.weight", i / 128,
                 i % 128);
        assert_int_equal(dcr_inventory_find(inv, name), i);
        assert_string_equal(dcr_inventory_at(inv, (size_t)i)->name, name);
        params += (1 + i % 7) * 3;
    }
    assert_int_equal(dcr_inventory_find(inv, "model.layers.0.mlp.experts.128.up_proj.weight"), -1);
    assert_int_equal(dcr_inventory_params(inv), params);
    assert_int_equal(dcr_inventory_bytes(inv), 2 * params);
    assert_int_equal(dcr_inventory_max_tensor_bytes(inv), 7 * 3 * 2);
    dcr_inventory_destroy(inv);
}

static void test_null_and_empty(void **state)
{
    (void)state;
    dcr_inventory_destroy(NULL);
    assert_int_equal(dcr_inventory_count(NULL), 0);
    assert_int_equal(dcr_inventory_find(NULL, "x"), -1);
    assert_int_equal(dcr_inventory_create(NULL), DCR_EINVAL);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    assert_int_equal(dcr_inventory_count(inv), 0);
    assert_int_equal(dcr_inventory_params(inv), 0);
    assert_int_equal(dcr_inventory_bytes(inv), 0);
    assert_int_equal(dcr_inventory_max_tensor_bytes(inv), 0);
    assert_int_equal(dcr_inventory_find(inv, "x"), -1);
    assert_null(dcr_inventory_at(inv, 0));
    dcr_inventory_destroy(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find_and_totals),     cmocka_unit_test(test_name_is_copied),
        cmocka_unit_test(test_duplicate_rejected),      cmocka_unit_test(test_bad_entries_rejected),
        cmocka_unit_test(test_many_tensors_keep_order), cmocka_unit_test(test_null_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
