/* ctest-labels: unit */
/* Large-page storage: zeroed, sized as asked, aligned to the large page from
 * that size on and plain below it, writable end to end, and freed by the
 * ordinary dcr_storage_destroy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "dcr/storage_large.h"

static void check_storage(size_t bytes)
{
    dcr_storage_t *s = NULL;
    assert_int_equal(dcr_storage_create_large(bytes, &s), DCR_OK);
    assert_non_null(s);
    assert_non_null(s->data);
    assert_int_equal(s->bytes, bytes);
    const unsigned char *p = s->data;
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != 0) fail_msg("byte %zu of %zu is %u, not zero", i, bytes, p[i]);
    uintptr_t at = (uintptr_t)s->data;
    if (bytes >= DCR_LARGE_PAGE)
        assert_int_equal(at % DCR_LARGE_PAGE, 0);
    else
        assert_int_equal(at % 64, 0);
    /* Every byte is ours to write, up to the last one. */
    memset(s->data, 0xA5, bytes ? bytes : 0);
    if (bytes) assert_int_equal(p[bytes - 1], 0xA5);
    dcr_storage_destroy(s);
}

static void test_sizes(void **state)
{
    (void)state;
    const size_t sizes[] = {0,
                            1,
                            4096,
                            DCR_LARGE_PAGE - 1,
                            DCR_LARGE_PAGE,
                            DCR_LARGE_PAGE + 1,
                            3 * DCR_LARGE_PAGE + 12345};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) check_storage(sizes[i]);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    assert_int_equal(dcr_storage_create_large(16, NULL), DCR_EINVAL);
    dcr_storage_t *s = (dcr_storage_t *)0x1;
    assert_int_equal(dcr_storage_create_large(SIZE_MAX - 1, &s), DCR_ENOMEM);
    assert_ptr_equal(s, (dcr_storage_t *)0x1); /* untouched on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
