/* Anchors (dcr/recovery.h): the ANCHOR manifest's text round-trips and every
 * malformed variant is refused naming its line; in a directory store an
 * anchor is listed only with its ANCHOR, the newest at or below a version
 * is found, a newer one prunes all older ones but the newest, and an
 * object truncated, grown
 * or flipped is refused (DCR_EDIGEST) with nothing handed out. The digests
 * are recomputed here with libb2 (the oracle), not taken from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blake2.h>
#include <cmocka.h>

#include "dcr/recovery.h"
#include "dcr/objstore.h"
#include "workloads/tmp_dir.h"

static const char *const GOOD = "dcr-anchor 1\n"
                                "version 12\n"
                                "objects 2\n"
                                "object t0 3 "
                                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
                                "object t1 0 "
                                "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n"
                                "end\n";

static void test_manifest_round_trip(void **state)
{
    (void)state;
    dcr_anchor_manifest_t m;
    assert_int_equal(dcr_anchor_manifest_parse(GOOD, strlen(GOOD), "good", &m), DCR_OK);
    assert_int_equal(m.version, 12);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.entries[0].name, "t0");
    assert_int_equal(m.entries[0].bytes, 3);
    assert_int_equal(m.entries[0].digest[1], 0x11);
    assert_int_equal(m.entries[1].digest[31], 0x00);
    size_t len = 0;
    char *text = dcr_anchor_manifest_text(&m, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(GOOD));
    assert_memory_equal(text, GOOD, len);
    free(text);
    dcr_anchor_manifest_free(&m);
    dcr_anchor_manifest_free(&m); /* empty: safe */
}

/* GOOD with its first occurrence of `from` replaced by `to`. */
static void expect_malformed(const char *from, const char *to, int line)
{
    char text[1024];
    const char *at = strstr(GOOD, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    dcr_anchor_manifest_t m;
    dcr_status_t st = dcr_anchor_manifest_parse(text, strlen(text), "bad", &m);
    if (st != DCR_ETRANSPORT) fail_msg("'%s' -> '%s' parsed (%d)", from, to, (int)st);
    char want[32];
    snprintf(want, sizeof want, "line %d:", line);
    if (!strstr(dcr_error_detail(), want))
        fail_msg("'%s' -> '%s': %s (wanted %s)", from, to, dcr_error_detail(), want);
    assert_int_equal(m.n, 0);
    assert_null(m.entries);
}

static void test_manifest_malformed(void **state)
{
    (void)state;
    expect_malformed("dcr-anchor 1", "dcr-anchor 2", 1);
    expect_malformed("version 12", "version 012", 2);
    expect_malformed("version 12", "version -12", 2);
    expect_malformed("objects 2", "objects 0", 3);
    expect_malformed("objects 2", "objects 3", 6);        /* 'end' where an object should be */
    expect_malformed("objects 2", "objects 99999999", 3); /* more than the text can hold */
    expect_malformed("object t1", "object t0", 5);        /* a name twice */
    expect_malformed("object t1", "object .t1", 5);       /* a hidden name */
    expect_malformed("object t1", "object ANCHOR", 5);    /* the manifest's own name */
    expect_malformed("object t1", "object t/1", 5);       /* a key separator */
    expect_malformed("00\nend", "0A\nend", 5);            /* upper-case hex */
    expect_malformed("00\nend", "0\nend", 5);             /* 63 digits */
    expect_malformed("end\n", "end\nmore\n", 7);          /* trailing text */
    expect_malformed("end\n", "end", 6);                  /* no final newline */
    expect_malformed(" 3 ", "  3 ", 4);                   /* two spaces */
    dcr_anchor_manifest_t m;
    assert_int_equal(dcr_anchor_manifest_parse("", 0, "empty", &m), DCR_ETRANSPORT);
}

static dcr_objstore_t *open_store(const char *name)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmp_dir, name);
    dcr_objstore_config_t oc = {.url = dir};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&oc, &s), DCR_OK);
    return s;
}

/* Anchor v of two objects whose bytes are derived from v. */
static void put_anchor(dcr_objstore_t *s, uint64_t v, uint8_t *a, uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint8_t)(v * 7 + i);
        b[i] = (uint8_t)(v * 13 + 3 * i);
    }
    const char *names[] = {"t0", "t1"};
    const uint8_t *bufs[] = {a, b};
    size_t lens[] = {n, n / 2};
    assert_int_equal(dcr_anchor_put(s, v, 2, names, bufs, lens), DCR_OK);
}

static bool key_exists(dcr_objstore_t *s, const char *key)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    dcr_status_t st = dcr_objstore_get(s, key, 1 << 20, NULL, &buf, &len);
    free(buf);
    return st == DCR_OK;
}

static void test_store_round_trip_and_prune(void **state)
{
    (void)state;
    dcr_objstore_t *s = open_store("prune");
    dcr_anchor_manifest_t m;
    assert_int_equal(dcr_anchor_newest(s, 100, &m), DCR_ENOTFOUND);
    enum { N = 4096 };
    uint8_t a[N], b[N];
    put_anchor(s, 4, a, b, N);
    /* Objects without their ANCHOR (a writer killed mid-upload): not listed. */
    assert_int_equal(dcr_objstore_put(s, "anchors/v8/t0", a, N, NULL), DCR_OK);
    assert_int_equal(dcr_anchor_newest(s, 100, &m), DCR_OK);
    assert_int_equal(m.version, 4);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(dcr_anchor_get(s, &m, "t1", &buf, &len), DCR_OK);
    assert_int_equal(len, N / 2);
    assert_memory_equal(buf, b, N / 2);
    free(buf);
    /* The manifest's digest is BLAKE2b-256 of the object, computed here. */
    uint8_t d[32];
    blake2b(d, b, NULL, 32, N / 2, 0);
    assert_memory_equal(d, m.entries[1].digest, 32);
    assert_int_equal(dcr_anchor_get(s, &m, "t9", &buf, &len), DCR_ENOTFOUND);
    dcr_anchor_manifest_free(&m);
    /* A newer anchor prunes the older ones but the newest of them (a
     * joiner may be reading it); the newest at or below a version. */
    put_anchor(s, 8, a, b, N);
    assert_true(key_exists(s, "anchors/v4/ANCHOR"));
    assert_int_equal(dcr_anchor_newest(s, 7, &m), DCR_OK);
    assert_int_equal(m.version, 4);
    dcr_anchor_manifest_free(&m);
    put_anchor(s, 12, a, b, N);
    assert_false(key_exists(s, "anchors/v4/ANCHOR"));
    assert_false(key_exists(s, "anchors/v4/t0"));
    assert_true(key_exists(s, "anchors/v8/ANCHOR"));
    assert_int_equal(dcr_anchor_newest(s, 7, &m), DCR_ENOTFOUND);
    assert_int_equal(dcr_anchor_newest(s, 11, &m), DCR_OK);
    assert_int_equal(m.version, 8);
    dcr_anchor_manifest_free(&m);
    assert_int_equal(dcr_anchor_newest(s, 100, &m), DCR_OK);
    assert_int_equal(m.version, 12);
    assert_int_equal(dcr_anchor_get(s, &m, "t0", &buf, &len), DCR_OK);
    assert_memory_equal(buf, a, N); /* a holds anchor 12's t0 */
    free(buf);
    dcr_anchor_manifest_free(&m);
    dcr_objstore_destroy(s);
}

/* Replaces anchor 8's t0 by `bad` (len bytes): the get is refused. */
static void expect_refused(dcr_objstore_t *s, const uint8_t *bad, size_t len)
{
    assert_int_equal(dcr_objstore_put(s, "anchors/v8/t0", bad, len, NULL), DCR_OK);
    dcr_anchor_manifest_t m;
    assert_int_equal(dcr_anchor_newest(s, 8, &m), DCR_OK);
    uint8_t *buf = (uint8_t *)0x1;
    size_t got = 7;
    assert_int_equal(dcr_anchor_get(s, &m, "t0", &buf, &got), DCR_EDIGEST);
    assert_ptr_equal(buf, (uint8_t *)0x1); /* nothing handed out */
    assert_int_equal(got, 7);
    dcr_anchor_manifest_free(&m);
}

static void test_damaged_objects_refused(void **state)
{
    (void)state;
    dcr_objstore_t *s = open_store("damage");
    enum { N = 4096 };
    static uint8_t a[N], b[N], bad[N + 1];
    put_anchor(s, 8, a, b, N);
    memcpy(bad, a, N);
    expect_refused(s, bad, N - 1); /* truncated */
    bad[N] = 0;
    expect_refused(s, bad, N + 1); /* grown */
    bad[N / 2] ^= 0x10;
    expect_refused(s, bad, N); /* one bit flipped */
    /* A malformed ANCHOR fails the lookup, naming it. */
    assert_int_equal(
        dcr_objstore_put(s, "anchors/v8/ANCHOR", (const uint8_t *)"dcr-anchor 1\n", 13, NULL),
        DCR_OK);
    dcr_anchor_manifest_t m;
    assert_int_equal(dcr_anchor_newest(s, 8, &m), DCR_ETRANSPORT);
    assert_non_null(strstr(dcr_error_detail(), "anchors/v8/ANCHOR"));
    dcr_objstore_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_round_trip),
        cmocka_unit_test(test_manifest_malformed),
        cmocka_unit_test(test_store_round_trip_and_prune),
        cmocka_unit_test(test_damaged_objects_refused),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
