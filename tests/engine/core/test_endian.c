/* ctest-labels: unit
 *
 * The engine's one little-endian field helper (core/endian-internal.h):
 * byte order, widths 1..8, unaligned positions and the cursor forms,
 * against bytes written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/endian-internal.h"

static void test_known_bytes(void **state)
{
    (void)state;
    uint8_t buf[17];
    memset(buf, 0xEE, sizeof buf);
    /* Position 1: unaligned for every width. */
    uint8_t *end = dcr__put_le(buf + 1, 0x0102030405060708ull, 8);
    const uint8_t want8[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    assert_ptr_equal(end, buf + 9);
    assert_memory_equal(buf + 1, want8, 8);
    assert_int_equal(buf[0], 0xEE);
    assert_int_equal(buf[9], 0xEE);
    assert_true(dcr__le(buf + 1, 8) == 0x0102030405060708ull);
    /* Narrower widths take the low bytes and leave the rest alone. */
    end = dcr__put_le(end, 0xAABBCCDDu, 4);
    const uint8_t want4[4] = {0xDD, 0xCC, 0xBB, 0xAA};
    assert_memory_equal(buf + 9, want4, 4);
    end = dcr__put_le(end, 0x12345, 2); /* only 0x2345 fits */
    assert_int_equal(buf[13], 0x45);
    assert_int_equal(buf[14], 0x23);
    assert_int_equal(buf[15], 0xEE);
    assert_int_equal(dcr__le(buf + 13, 2), 0x2345);
    assert_int_equal(dcr__le(buf + 9, 3), 0xBBCCDD);
    assert_int_equal(dcr__le(buf + 9, 1), 0xDD);
    /* The cursor form reads the fields back in order. */
    const uint8_t *p = buf + 1;
    uint64_t a = 0, b = 0, c = 0;
    p = dcr__get_le(p, &a, 8);
    p = dcr__get_le(p, &b, 4);
    p = dcr__get_le(p, &c, 2);
    assert_ptr_equal(p, buf + 15);
    assert_true(a == 0x0102030405060708ull);
    assert_int_equal(b, 0xAABBCCDDu);
    assert_int_equal(c, 0x2345);
    /* The top bit survives (no sign extension). */
    dcr__put_le(buf, UINT64_MAX, 8);
    assert_true(dcr__le(buf, 8) == UINT64_MAX);
    assert_int_equal(dcr__le(buf, 4), 0xFFFFFFFFu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
