/* ctest-labels: unit */
/* Storage and strided views. Expected elements come from index arithmetic
 * on a storage whose FP32 element k holds the value k. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dcr/tensor.h"

/* Storage of n FP32 elements where element k holds k. */
static dcr_storage_t *iota_storage(int64_t n)
{
    dcr_storage_t *s = NULL;
    assert_int_equal(dcr_storage_create((size_t)n * 4, &s), DCR_OK);
    float *p = s->data;
    for (int64_t k = 0; k < n; k++) p[k] = (float)k;
    return s;
}

static float at(const dcr_view_t *v, int64_t a, int64_t b, int64_t c)
{
    int64_t idx[3] = {a, b, c};
    return *(float *)dcr_view_elem(v, idx);
}

static void test_storage(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 63, 64, 65, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        dcr_storage_t *s = NULL;
        assert_int_equal(dcr_storage_create(sizes[i], &s), DCR_OK);
        assert_non_null(s);
        assert_non_null(s->data);
        assert_int_equal(s->bytes, sizes[i]);
        assert_int_equal((uintptr_t)s->data % 64, 0);
        for (size_t b = 0; b < sizes[i]; b++) assert_int_equal(((unsigned char *)s->data)[b], 0);
        dcr_storage_destroy(s);
    }
    dcr_storage_destroy(NULL);
    dcr_storage_t *keep = (dcr_storage_t *)&keep;
    assert_int_equal(dcr_storage_create(SIZE_MAX - 10, &keep), DCR_ENOMEM);
    assert_ptr_equal(keep, (dcr_storage_t *)&keep);
}

static void test_contiguous(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(120);
    dcr_view_t v;
    int64_t shape[3] = {4, 5, 6};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 3, shape, &v), DCR_OK);
    assert_int_equal(dcr_view_numel(&v), 120);
    assert_true(dcr_view_is_contiguous(&v));
    assert_int_equal(v.strides[0], 30);
    assert_int_equal(v.strides[1], 6);
    assert_int_equal(v.strides[2], 1);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 6; c++) assert_true(at(&v, a, b, c) == (float)(a * 30 + b * 6 + c));
    assert_ptr_equal(dcr_view_data(&v), s->data);

    /* The storage is too small for 121 FP32 elements, but holds 240 BF16. */
    dcr_view_t keep = v;
    int64_t big[1] = {121};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 1, big, &keep), DCR_EINVAL);
    assert_memory_equal(&keep, &v, sizeof v);
    assert_true(strlen(dcr_error_detail()) > 0);
    int64_t bf[1] = {240};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_BF16, 1, bf, &keep), DCR_OK);
    int64_t neg[2] = {2, -1};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 2, neg, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, DCR_MAX_DIMS + 1, shape, &keep),
                     DCR_EINVAL);
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_COUNT, 3, shape, &keep), DCR_EINVAL);

    /* Rank 0 is one element. */
    dcr_view_t scalar;
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 0, NULL, &scalar), DCR_OK);
    assert_int_equal(dcr_view_numel(&scalar), 1);
    dcr_storage_destroy(s);
}

static void test_narrow_select(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(120);
    dcr_view_t v, n, sel;
    int64_t shape[3] = {4, 5, 6};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 3, shape, &v), DCR_OK);

    assert_int_equal(dcr_view_narrow(&v, 1, 1, 3, &n), DCR_OK);
    assert_int_equal(n.shape[1], 3);
    assert_false(dcr_view_is_contiguous(&n));
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 6; c++)
                assert_true(at(&n, a, b, c) == (float)(a * 30 + (b + 1) * 6 + c));

    /* Narrowing the outer dimension keeps contiguity. */
    assert_int_equal(dcr_view_narrow(&v, 0, 2, 2, &n), DCR_OK);
    assert_true(dcr_view_is_contiguous(&n));
    assert_true(*(float *)dcr_view_data(&n) == 60.0f);
    assert_int_equal(dcr_view_narrow(&v, 2, 6, 0, &n), DCR_OK); /* empty at the end is fine */
    assert_int_equal(dcr_view_numel(&n), 0);

    assert_int_equal(dcr_view_select(&v, 2, 4, &sel), DCR_OK);
    assert_int_equal(sel.ndim, 2);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 5; b++) {
            int64_t idx[2] = {a, b};
            assert_true(*(float *)dcr_view_elem(&sel, idx) == (float)(a * 30 + b * 6 + 4));
        }
    assert_int_equal(dcr_view_select(&v, 0, 3, &sel), DCR_OK);
    assert_true(dcr_view_is_contiguous(&sel));
    assert_true(*(float *)dcr_view_data(&sel) == 90.0f);

    /* Invalid arguments leave the output alone and say why. */
    dcr_view_t keep = v;
    struct {
        int dim;
        int64_t start, len;
    } bad[] = {{-1, 0, 1}, {3, 0, 1}, {1, -1, 1}, {1, 0, -1}, {1, 3, 3}, {1, 6, 0}, {2, 0, 7}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dcr_error_clear();
        assert_int_equal(dcr_view_narrow(&v, bad[i].dim, bad[i].start, bad[i].len, &keep),
                         DCR_EINVAL);
        assert_memory_equal(&keep, &v, sizeof v);
        assert_true(strlen(dcr_error_detail()) > 0);
    }
    assert_int_equal(dcr_view_select(&v, 1, 5, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_select(&v, 1, -1, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_select(&v, 3, 0, &keep), DCR_EINVAL);
    assert_memory_equal(&keep, &v, sizeof v);
    dcr_storage_destroy(s);
}

static void test_transpose_unsqueeze_reshape(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(120);
    dcr_view_t v, t, u, r;
    int64_t shape[3] = {4, 5, 6};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 3, shape, &v), DCR_OK);

    assert_int_equal(dcr_view_transpose(&v, 0, 2, &t), DCR_OK);
    assert_int_equal(t.shape[0], 6);
    assert_int_equal(t.shape[2], 4);
    assert_false(dcr_view_is_contiguous(&t));
    for (int c = 0; c < 6; c++)
        for (int b = 0; b < 5; b++)
            for (int a = 0; a < 4; a++) assert_true(at(&t, c, b, a) == (float)(a * 30 + b * 6 + c));
    assert_int_equal(dcr_view_transpose(&v, 1, 1, &u), DCR_OK);
    assert_memory_equal(&u, &v, sizeof v);

    /* Unsqueeze at every position keeps the elements and contiguity. */
    for (int d = 0; d <= 3; d++) {
        assert_int_equal(dcr_view_unsqueeze(&v, d, &u), DCR_OK);
        assert_int_equal(u.ndim, 4);
        assert_int_equal(u.shape[d], 1);
        assert_true(dcr_view_is_contiguous(&u));
        int64_t idx[4];
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 5; b++)
                for (int c = 0; c < 6; c++) {
                    int64_t src[3] = {a, b, c};
                    for (int k = 0, j = 0; k < 4; k++) idx[k] = (k == d) ? 0 : src[j++];
                    assert_true(*(float *)dcr_view_elem(&u, idx) == (float)(a * 30 + b * 6 + c));
                }
    }

    int64_t flat[2] = {20, 6};
    assert_int_equal(dcr_view_reshape(&v, 2, flat, &r), DCR_OK);
    for (int i = 0; i < 20; i++)
        for (int j = 0; j < 6; j++) {
            int64_t idx[2] = {i, j};
            assert_true(*(float *)dcr_view_elem(&r, idx) == (float)(i * 6 + j));
        }
    /* A contiguous narrow (outer rows) reshapes, keeping its offset. */
    dcr_view_t n;
    assert_int_equal(dcr_view_narrow(&v, 0, 1, 2, &n), DCR_OK);
    int64_t sixty[1] = {60};
    assert_int_equal(dcr_view_reshape(&n, 1, sixty, &r), DCR_OK);
    for (int64_t i = 0; i < 60; i++)
        assert_true(*(float *)dcr_view_elem(&r, &i) == (float)(30 + i));

    /* Errors: wrong count, non-contiguous, bad dims, rank overflow. */
    dcr_view_t keep = v;
    int64_t wrong[2] = {7, 17};
    assert_int_equal(dcr_view_reshape(&v, 2, wrong, &keep), DCR_EINVAL);
    int64_t tflat[1] = {120};
    assert_int_equal(dcr_view_reshape(&t, 1, tflat, &keep), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "contiguous"));
    assert_int_equal(dcr_view_transpose(&v, 0, 3, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_transpose(&v, -1, 0, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_unsqueeze(&v, 4, &keep), DCR_EINVAL);
    assert_int_equal(dcr_view_unsqueeze(&v, -1, &keep), DCR_EINVAL);
    assert_memory_equal(&keep, &v, sizeof v);
    dcr_view_t big = v;
    while (big.ndim < DCR_MAX_DIMS) assert_int_equal(dcr_view_unsqueeze(&big, 0, &big), DCR_OK);
    assert_int_equal(dcr_view_unsqueeze(&big, 0, &keep), DCR_EINVAL);
    dcr_storage_destroy(s);
}

typedef struct {
    int64_t calls;
    const float *expect;
    int ok;
} visit_t;

static void visit(int64_t i, void *elem, void *ctx)
{
    visit_t *c = ctx;
    if (i != c->calls || *(float *)elem != c->expect[i]) c->ok = 0;
    c->calls++;
}

static void test_foreach_row_major(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(120);
    dcr_view_t v, t, n;
    int64_t shape[3] = {4, 5, 6};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 3, shape, &v), DCR_OK);
    assert_int_equal(dcr_view_transpose(&v, 0, 2, &t), DCR_OK); /* [6, 5, 4] */
    assert_int_equal(dcr_view_narrow(&t, 1, 1, 3, &n), DCR_OK); /* [6, 3, 4] */
    float expect[72];
    int k = 0;
    for (int c = 0; c < 6; c++)
        for (int b = 0; b < 3; b++)
            for (int a = 0; a < 4; a++) expect[k++] = (float)(a * 30 + (b + 1) * 6 + c);
    visit_t ctx = {0, expect, 1};
    dcr_view_foreach(&n, visit, &ctx);
    assert_int_equal(ctx.calls, 72);
    assert_true(ctx.ok);

    dcr_view_t empty;
    assert_int_equal(dcr_view_narrow(&v, 1, 0, 0, &empty), DCR_OK);
    ctx = (visit_t){0, expect, 1};
    dcr_view_foreach(&empty, visit, &ctx);
    assert_int_equal(ctx.calls, 0);
    dcr_storage_destroy(s);
}

/* Transposed FP32 source into contiguous BF16, FP16 and FP32 (values are
 * small integers, exact in each, so the expected value is the index
 * arithmetic itself), then into a strided FP8 slice. */
static void test_copy_strided_converting(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(24);
    dcr_view_t v, t;
    int64_t shape[2] = {4, 6};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 2, shape, &v), DCR_OK);
    assert_int_equal(dcr_view_transpose(&v, 0, 1, &t), DCR_OK); /* [6, 4]: t[i][j] = j*6 + i */

    const dcr_dtype_t types[] = {DCR_DTYPE_BF16, DCR_DTYPE_FP16, DCR_DTYPE_FP32};
    for (int k = 0; k < 3; k++) {
        dcr_storage_t *d = NULL;
        dcr_view_t dv;
        assert_int_equal(dcr_storage_create(24 * dcr_dtype_size(types[k]), &d), DCR_OK);
        int64_t dshape[2] = {6, 4};
        assert_int_equal(dcr_view_contiguous(d, types[k], 2, dshape, &dv), DCR_OK);
        assert_int_equal(dcr_view_copy(&dv, &t), DCR_OK);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 4; j++) {
                int64_t idx[2] = {i, j};
                assert_true(dcr_dtype_load_f64(types[k], dcr_view_elem(&dv, idx)) == j * 6 + i);
            }
        dcr_storage_destroy(d);
    }

    /* Destination: columns 2..5 of an [8, 10] FP8 tensor, rows 1..6, written
     * through a transpose so both sides are strided. Untouched cells stay 0. */
    dcr_storage_t *d = NULL;
    assert_int_equal(dcr_storage_create(80, &d), DCR_OK);
    dcr_view_t big, rows, cols, dst;
    int64_t bshape[2] = {8, 10};
    assert_int_equal(dcr_view_contiguous(d, DCR_DTYPE_FP8_E4M3, 2, bshape, &big), DCR_OK);
    assert_int_equal(dcr_view_narrow(&big, 0, 1, 6, &rows), DCR_OK);
    assert_int_equal(dcr_view_narrow(&rows, 1, 2, 4, &cols), DCR_OK); /* [6, 4] */
    assert_int_equal(dcr_view_transpose(&cols, 0, 1, &dst), DCR_OK);  /* [4, 6] */
    assert_int_equal(dcr_view_copy(&dst, &v), DCR_OK);                /* dst[a][b] = a*6 + b */
    const uint8_t *raw = d->data;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 10; c++) {
            int inside = r >= 1 && r < 7 && c >= 2 && c < 6;
            /* big[r][c] = dst[c-2][r-1] = (c-2)*6 + (r-1); integers above 16
             * are not exact in e4m3, so compare with the scalar rounding that
             * test_dtype checks from first principles. */
            float want = inside ? (float)((c - 2) * 6 + (r - 1)) : 0.0f;
            assert_int_equal(raw[r * 10 + c], dcr_f32_to_fp8e4m3(want));
        }
    dcr_storage_destroy(d);
    dcr_storage_destroy(s);
}

/* A 6-D copy through a permutation of all dimensions, checked element by
 * element against the permuted index. */
static void test_copy_high_rank(void **state)
{
    (void)state;
    const int64_t shape[6] = {2, 3, 2, 4, 1, 3};
    int64_t n = dcr_shape_numel(6, shape);
    dcr_storage_t *s = iota_storage(n);
    dcr_view_t v, p;
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 6, shape, &v), DCR_OK);
    /* Reverse the dimension order with three transposes. */
    p = v;
    assert_int_equal(dcr_view_transpose(&p, 0, 5, &p), DCR_OK);
    assert_int_equal(dcr_view_transpose(&p, 1, 4, &p), DCR_OK);
    assert_int_equal(dcr_view_transpose(&p, 2, 3, &p), DCR_OK);
    dcr_storage_t *d = NULL;
    dcr_view_t dv;
    assert_int_equal(dcr_storage_create((size_t)n * 2, &d), DCR_OK);
    assert_int_equal(dcr_view_contiguous(d, DCR_DTYPE_BF16, 6, p.shape, &dv), DCR_OK);
    assert_int_equal(dcr_view_copy(&dv, &p), DCR_OK);
    int64_t idx[6], rev[6];
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k;
        for (int i = 5; i >= 0; i--) {
            idx[i] = rem % p.shape[i];
            rem /= p.shape[i];
        }
        for (int i = 0; i < 6; i++) rev[i] = idx[5 - i];
        int64_t flat = 0;
        for (int i = 0; i < 6; i++) flat = flat * shape[i] + rev[i];
        uint16_t w = ((uint16_t *)d->data)[k];
        assert_true(dcr_bf16_to_f32(w) == (float)flat);
    }
    dcr_storage_destroy(d);
    dcr_storage_destroy(s);
}

static void test_copy_rejects(void **state)
{
    (void)state;
    dcr_storage_t *s = iota_storage(24);
    dcr_view_t a, b, bad;
    int64_t s1[2] = {4, 6}, s2[2] = {6, 4};
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 2, s1, &a), DCR_OK);
    assert_int_equal(dcr_view_contiguous(s, DCR_DTYPE_FP32, 2, s2, &b), DCR_OK);
    assert_int_equal(dcr_view_copy(&a, &b), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "[4, 6]"));
    /* A hand-built view reaching past its storage is refused, not written. */
    bad = a;
    bad.offset = 1;
    assert_int_equal(dcr_view_copy(&bad, &a), DCR_EINVAL);
    bad = a;
    bad.strides[0] = -6;
    assert_int_equal(dcr_view_copy(&bad, &a), DCR_EINVAL);
    /* Rank 0 copies one element with conversion. */
    dcr_view_t sc, dsc;
    dcr_storage_t *d = NULL;
    assert_int_equal(dcr_storage_create(2, &d), DCR_OK);
    assert_int_equal(dcr_view_narrow(&a, 0, 1, 1, &sc), DCR_OK);
    assert_int_equal(dcr_view_select(&sc, 0, 0, &sc), DCR_OK);
    assert_int_equal(dcr_view_select(&sc, 0, 5, &sc), DCR_OK); /* element 11 */
    assert_int_equal(dcr_view_contiguous(d, DCR_DTYPE_FP16, 0, NULL, &dsc), DCR_OK);
    assert_int_equal(dcr_view_copy(&dsc, &sc), DCR_OK);
    assert_true(dcr_f16_to_f32(*(uint16_t *)d->data) == 11.0f);
    dcr_storage_destroy(d);
    dcr_storage_destroy(s);
}

static void test_shape_format_and_desc(void **state)
{
    (void)state;
    char buf[64];
    int64_t shape[2] = {151936, 2048};
    dcr_shape_format(2, shape, buf, sizeof buf);
    assert_string_equal(buf, "[151936, 2048]");
    dcr_shape_format(0, NULL, buf, sizeof buf);
    assert_string_equal(buf, "[]");
    char small[6];
    memset(small, 'z', sizeof small);
    dcr_shape_format(2, shape, small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(small, "[1519");

    dcr_tensor_desc_t desc = {.name = "x", .dtype = DCR_DTYPE_BF16, .ndim = 2, .shape = {3, 5}};
    assert_int_equal(dcr_desc_numel(&desc), 15);
    assert_int_equal(dcr_desc_bytes(&desc), 30);
    assert_int_equal(dcr_shape_numel(0, NULL), 1);
}

/* Hand-built views: the check accepts exactly those whose every addressable
 * element lies in the storage (bounds computed here from the strides). */
static void test_view_check(void **state)
{
    dcr_storage_t *st;
    assert_int_equal(dcr_storage_create(12 * 2, &st), DCR_OK); /* 12 BF16 elements */
    dcr_view_t v = {st, DCR_DTYPE_BF16, 0, 2, {3, 4}, {4, 1}};
    assert_int_equal(dcr_view_check(&v), DCR_OK); /* elements 0..11 */
    v.offset = 1;
    assert_int_equal(dcr_view_check(&v), DCR_EINVAL); /* last element 12 */
    v = (dcr_view_t){st, DCR_DTYPE_BF16, 11, 1, {12}, {-1}};
    assert_int_equal(dcr_view_check(&v), DCR_OK); /* 11 down to 0 */
    v.shape[0] = 13;
    assert_int_equal(dcr_view_check(&v), DCR_EINVAL); /* reaches -1 */
    v = (dcr_view_t){st, DCR_DTYPE_BF16, 100, 2, {0, 4}, {4, 1}};
    assert_int_equal(dcr_view_check(&v), DCR_OK); /* empty: addresses nothing */
    v = (dcr_view_t){st, DCR_DTYPE_BF16, 0, 1, {-1}, {1}};
    assert_int_equal(dcr_view_check(&v), DCR_EINVAL);
    v = (dcr_view_t){st, DCR_DTYPE_FP32, 0, 1, {7}, {1}};
    assert_int_equal(dcr_view_check(&v), DCR_EINVAL); /* 7 FP32 need 28 bytes */
    v = (dcr_view_t){NULL, DCR_DTYPE_BF16, 0, 1, {1}, {1}};
    assert_int_equal(dcr_view_check(&v), DCR_EINVAL);
    dcr_storage_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_check),
        cmocka_unit_test(test_storage),
        cmocka_unit_test(test_contiguous),
        cmocka_unit_test(test_narrow_select),
        cmocka_unit_test(test_transpose_unsqueeze_reshape),
        cmocka_unit_test(test_foreach_row_major),
        cmocka_unit_test(test_copy_strided_converting),
        cmocka_unit_test(test_copy_high_rank),
        cmocka_unit_test(test_copy_rejects),
        cmocka_unit_test(test_shape_format_and_desc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
