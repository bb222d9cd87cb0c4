/* ctest-labels: unit */
/* Retention of committed payloads (dcr/recovery.h) over a dir store: the copy
 * of an attempt's listed payloads under its version, the VERSION manifest
 * (its digests recomputed here with libb2 from the bytes this test put),
 * the pruning window (including v9 against v10, which sort the other way as
 * text), a version put from payloads held in memory (dcr_retain_put: read
 * back and digest-checked like a copied one, a bad name refused), and the
 * refusals: a tampered or truncated retained payload, an
 * attempt without a manifest, malformed VERSION text; a version's repair
 * set (dcr_retain_repair_put/_read), complete only with every owner's part. The attempt's
 * transport manifest is written here by hand in the documented format
 * (engine/transport/objstore_manifest.c), not by the code under test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <blake2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/objstore.h"
#include "dcr/recovery.h"
#include "engine/transport/transport_test_util.h"

static char g_tmp[PATH_MAX];
static dcr_objstore_t *g_store;

static int fx_setup(void **state)
{
    (void)state;
    assert_true(testfiles_tmpdir(g_tmp, sizeof g_tmp, "transport"));
    char url[PATH_MAX + 16];
    snprintf(url, sizeof url, "dir:%s/store", g_tmp);
    dcr_objstore_config_t c = {.url = url};
    assert_int_equal(dcr_objstore_create(&c, &g_store), DCR_OK);
    return 0;
}

static int fx_teardown(void **state)
{
    (void)state;
    dcr_objstore_destroy(g_store);
    g_store = NULL;
    tp_rmtree(g_tmp);
    return 0;
}

/* Payload j of attempt tau: len bytes of a pattern unique to (tau, j). */
static uint8_t *payload_bytes(uint64_t tau, int j, size_t len)
{
    uint8_t *b = malloc(len);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++) b[i] = (uint8_t)(tau * 31 + (uint64_t)j * 7 + i * 13);
    return b;
}

static size_t payload_len(int j)
{
    return 100 + (size_t)j * 37;
}

/* Puts n payloads (owner j % 2, id j) and the attempt's manifest, by hand. */
static void put_attempt(uint64_t tau, int n)
{
    char text[8192];
    size_t k = (size_t)snprintf(text, sizeof text, "dcr-manifest 1\ntau %" PRIu64 "\npayloads %d\n",
                                tau, n);
    for (int j = 0; j < n; j++) {
        uint8_t *b = payload_bytes(tau, j, payload_len(j));
        char key[128];
        snprintf(key, sizeof key, "attempt-%" PRIu64 "/payload-%d-%d.dcrp", tau, j % 2, j);
        assert_int_equal(dcr_objstore_put(g_store, key, b, payload_len(j), NULL), DCR_OK);
        free(b);
        /* The transport's digest field is not what retention checks: any hex. */
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "payload %d %d %zu 0123456789abcdef0123456789abcdef\n", j % 2, j,
                              payload_len(j));
    }
    k += (size_t)snprintf(text + k, sizeof text - k, "end\n");
    char key[128];
    snprintf(key, sizeof key, "attempt-%" PRIu64 "/MANIFEST", tau);
    assert_int_equal(dcr_objstore_put(g_store, key, (const uint8_t *)text, k, NULL), DCR_OK);
}

static size_t keys_under(const char *prefix)
{
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    assert_int_equal(dcr_objstore_list_all(g_store, prefix, &e, &n), DCR_OK);
    free(e);
    return n;
}

static void commit_copies_every_listed_payload(void **state)
{
    (void)state;
    put_attempt(7, 5);
    dcr_retain_stats_t st;
    assert_int_equal(dcr_retain_commit(g_store, 7, 3, 8, &st), DCR_OK);
    size_t total = 0;
    for (int j = 0; j < 5; j++) total += payload_len(j);
    assert_int_equal(st.payloads, 5);
    assert_int_equal(st.bytes, total);
    assert_int_equal(st.pruned, 0);

    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, 3, &m), DCR_OK);
    assert_int_equal(m.version, 3);
    assert_int_equal(m.from, 2);
    assert_int_equal(m.tau, 7);
    assert_int_equal(m.n, 5);
    for (int j = 0; j < 5; j++) {
        /* The entry for payload j, wherever the listing put it. */
        char name[64];
        snprintf(name, sizeof name, "payload-%d-%d.dcrp", j % 2, j);
        size_t i = 0;
        while (i < m.n && strcmp(m.entries[i].name, name)) i++;
        assert_true(i < m.n);
        uint8_t *want = payload_bytes(7, j, payload_len(j));
        uint8_t d[32];
        blake2b(d, want, NULL, 32, payload_len(j), 0);
        assert_int_equal(m.entries[i].bytes, payload_len(j));
        assert_memory_equal(m.entries[i].digest, d, 32);
        uint8_t *got = NULL;
        size_t len = 0;
        assert_int_equal(dcr_retain_payload_get(g_store, &m, i, &got, &len), DCR_OK);
        assert_int_equal(len, payload_len(j));
        assert_memory_equal(got, want, len);
        free(got);
        free(want);
    }
    dcr_retain_manifest_free(&m);
    /* The attempt itself is left to the transport. */
    assert_int_equal(keys_under("attempt-7/"), 6);
}

static void window_keeps_the_last_k(void **state)
{
    (void)state;
    /* Versions 1..11 from attempts 2, 4, ..., 22, keeping 3. */
    for (uint64_t v = 1; v <= 11; v++) {
        put_attempt(2 * v, 2);
        dcr_retain_stats_t st;
        assert_int_equal(dcr_retain_commit(g_store, 2 * v, v, 3, &st), DCR_OK);
        assert_int_equal(st.pruned, v > 3 ? 1 : 0);
    }
    uint64_t *v = NULL;
    size_t n = 0;
    assert_int_equal(dcr_retain_list(g_store, &v, &n), DCR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(v[0], 9);
    assert_int_equal(v[1], 10);
    assert_int_equal(v[2], 11);
    free(v);
    for (int old = 1; old <= 8; old++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "versions/v%d/", old);
        assert_int_equal(keys_under(prefix), 0);
        dcr_retain_manifest_t m;
        assert_int_equal(dcr_retain_manifest_read(g_store, (uint64_t)old, &m), DCR_ENOTFOUND);
    }
    /* Three versions of two payloads and a VERSION each. */
    assert_int_equal(keys_under("versions/"), 9);
    /* A new run on this store starts with none; attempts stay. */
    size_t attempts = keys_under("attempt-");
    assert_int_equal(dcr_retain_clear(g_store), DCR_OK);
    assert_int_equal(keys_under("versions/"), 0);
    assert_int_equal(keys_under("attempt-"), attempts);
}

static void tampered_and_truncated_payloads_are_refused(void **state)
{
    (void)state;
    put_attempt(5, 2);
    assert_int_equal(dcr_retain_commit(g_store, 5, 1, 8, NULL), DCR_OK);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, 1, &m), DCR_OK);
    char key[256];
    /* One bit flipped, same length. */
    snprintf(key, sizeof key, "versions/v1/%s", m.entries[0].name);
    uint8_t *b = NULL;
    size_t len = 0;
    assert_int_equal(dcr_objstore_get(g_store, key, 1 << 20, NULL, &b, &len), DCR_OK);
    b[len / 2] ^= 1;
    assert_int_equal(dcr_objstore_put(g_store, key, b, len, NULL), DCR_OK);
    uint8_t *got = NULL;
    size_t glen = 0;
    assert_int_equal(dcr_retain_payload_get(g_store, &m, 0, &got, &glen), DCR_EDIGEST);
    /* One byte short. */
    snprintf(key, sizeof key, "versions/v1/%s", m.entries[1].name);
    free(b);
    assert_int_equal(dcr_objstore_get(g_store, key, 1 << 20, NULL, &b, &len), DCR_OK);
    assert_int_equal(dcr_objstore_put(g_store, key, b, len - 1, NULL), DCR_OK);
    assert_int_equal(dcr_retain_payload_get(g_store, &m, 1, &got, &glen), DCR_EDIGEST);
    /* Gone. */
    assert_int_equal(dcr_objstore_delete(g_store, key), DCR_OK);
    assert_int_equal(dcr_retain_payload_get(g_store, &m, 1, &got, &glen), DCR_ENOTFOUND);
    free(b);
    dcr_retain_manifest_free(&m);
}

static void attempt_without_manifest_is_not_retained(void **state)
{
    (void)state;
    assert_int_equal(dcr_retain_commit(g_store, 9, 4, 8, NULL), DCR_ENOTFOUND);
    assert_int_equal(keys_under("versions/"), 0);
    /* A listed payload that is shorter than listed: nothing is listed for the version. */
    put_attempt(10, 2);
    assert_int_equal(
        dcr_objstore_put(g_store, "attempt-10/payload-1-1.dcrp", (const uint8_t *)"short", 5, NULL),
        DCR_OK);
    assert_int_equal(dcr_retain_commit(g_store, 10, 4, 8, NULL), DCR_ETRANSPORT);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, 4, &m), DCR_ENOTFOUND);
    /* Longer than listed (a read of the listed bytes alone would not see it). */
    put_attempt(11, 2);
    uint8_t longer[512] = {0};
    assert_int_equal(
        dcr_objstore_put(g_store, "attempt-11/payload-1-1.dcrp", longer, payload_len(1) + 1, NULL),
        DCR_OK);
    assert_int_equal(dcr_retain_commit(g_store, 11, 4, 8, NULL), DCR_ETRANSPORT);
    assert_int_equal(dcr_retain_manifest_read(g_store, 4, &m), DCR_ENOTFOUND);
    assert_int_equal(dcr_retain_commit(g_store, 10, 4, 0, NULL), DCR_EINVAL);
    assert_int_equal(dcr_retain_commit(g_store, 10, 0, 8, NULL), DCR_EINVAL);
}

static void parse_refuses_malformed_text(void **state)
{
    (void)state;
    static const char hex[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char good[512];
    snprintf(
        good, sizeof good,
        "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 1\npayload p-0-1.dcrp 100 %s\nend\n",
        hex);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_parse(good, strlen(good), "t", &m), DCR_OK);
    assert_int_equal(m.version, 5);
    assert_int_equal(m.entries[0].bytes, 100);
    assert_int_equal(m.entries[0].digest[1], 0x11);
    assert_string_equal(m.entries[0].name, "p-0-1.dcrp");
    dcr_retain_manifest_free(&m);
    const char *bad[] = {
        "dcr-version 2\n",
        "dcr-version 1\nversion 5\nfrom 3\ntau 12\npayloads 0\nend\n",  /* broken chain */
        "dcr-version 1\nversion 05\nfrom 4\ntau 12\npayloads 0\nend\n", /* leading zero */
        "dcr-version 1\nversion 0\nfrom 0\ntau 12\npayloads 0\nend\n",  /* no version 0 delta */
        "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 0\nend\nx", /* trailing bytes */
        "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 0\nend",    /* no final newline */
        "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 99999999\nend\n", /* count */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(dcr_retain_manifest_parse(bad[i], strlen(bad[i]), "t", &m),
                         DCR_ETRANSPORT);
    char dup[1024];
    snprintf(dup, sizeof dup,
             "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 2\npayload a 100 %s\npayload a "
             "100 %s\nend\n",
             hex, hex);
    assert_int_equal(dcr_retain_manifest_parse(dup, strlen(dup), "t", &m), DCR_ETRANSPORT);
    char dots[1024];
    snprintf(dots, sizeof dots,
             "dcr-version 1\nversion 5\nfrom 4\ntau 12\npayloads 1\npayload ../x 100 %s\nend\n",
             hex);
    assert_int_equal(dcr_retain_manifest_parse(dots, strlen(dots), "t", &m), DCR_ETRANSPORT);
}

static void put_retains_held_payloads(void **state)
{
    (void)state;
    uint8_t *b0 = payload_bytes(7, 0, payload_len(0)), *b1 = payload_bytes(7, 1, payload_len(1));
    const char *names[] = {"payload-0-0.dcrp", "payload-1-0.dcrp"};
    const uint8_t *bufs[] = {b0, b1};
    const size_t lens[] = {payload_len(0), payload_len(1)};
    assert_int_equal(dcr_retain_put(g_store, 4, 7, 2, names, bufs, lens), DCR_OK);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, 4, &m), DCR_OK);
    assert_int_equal(m.version, 4);
    assert_int_equal(m.from, 3);
    assert_int_equal(m.tau, 7);
    assert_int_equal(m.n, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(m.entries[i].name, names[i]);
        assert_int_equal(m.entries[i].bytes, lens[i]);
        uint8_t want[DCR_RETAIN_DIGEST_BYTES];
        blake2b(want, bufs[i], NULL, sizeof want, lens[i], 0);
        assert_memory_equal(m.entries[i].digest, want, sizeof want);
        uint8_t *got = NULL;
        size_t len = 0;
        assert_int_equal(dcr_retain_payload_get(g_store, &m, i, &got, &len), DCR_OK);
        assert_int_equal(len, lens[i]);
        assert_memory_equal(got, bufs[i], len);
        free(got);
    }
    dcr_retain_manifest_free(&m);
    /* Put again with one payload: the version is rewritten whole. */
    assert_int_equal(dcr_retain_put(g_store, 4, 8, 1, names + 1, bufs + 1, lens + 1), DCR_OK);
    assert_int_equal(dcr_retain_manifest_read(g_store, 4, &m), DCR_OK);
    assert_int_equal(m.n, 1);
    assert_int_equal(m.tau, 8);
    dcr_retain_manifest_free(&m);
    /* Names the manifest reader would refuse are refused before anything
     * is written: a space, the manifest's own name, a leading dot, a ':'. */
    const char *bad[] = {"a b", "VERSION", ".x", "a:b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dcr_retain_put(g_store, 5, 9, 1, bad + i, bufs, lens), DCR_EINVAL);
        assert_int_equal(dcr_retain_manifest_read(g_store, 5, &m), DCR_ENOTFOUND);
    }
    /* A duplicate name neither writes the version nor touches the one
     * already retained. */
    const char *twice[] = {names[0], names[0]};
    assert_int_equal(dcr_retain_put(g_store, 4, 10, 2, twice, bufs, lens), DCR_EINVAL);
    assert_int_equal(dcr_retain_manifest_read(g_store, 4, &m), DCR_OK);
    assert_int_equal(m.tau, 8);
    dcr_retain_manifest_free(&m);
    assert_int_equal(dcr_retain_put(g_store, 0, 9, 0, NULL, NULL, NULL), DCR_EINVAL);
    free(b0);
    free(b1);
}

/* Writes text as the object key. */
static void put_text(const char *key, const char *text)
{
    assert_int_equal(dcr_objstore_put(g_store, key, (const uint8_t *)text, strlen(text), NULL),
                     DCR_OK);
}

/* A repair set (dcr_retain_repair_put / _read): complete only with every
 * owner's part; its payloads read back digest-checked through the merged
 * manifest; covers_from the latest owner's; parts that disagree, or a
 * malformed part, refused; pruned with its version. */
static void repair_sets_complete_checked_and_pruned(void **state)
{
    (void)state;
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ENOTFOUND);
    uint8_t *b0 = payload_bytes(40, 0, 300), *b1 = payload_bytes(41, 1, 77);
    const uint8_t *bufs[] = {b0, b1};
    size_t lens[] = {300, 77};
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 9, 7, 0, 2, 2, bufs, lens, NULL), DCR_OK);
    /* Owner 1 of 2 has not stored its part yet. */
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ENOTFOUND);
    assert_int_equal(m.n, 0);
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 9, 8, 1, 2, 1, bufs + 1, lens + 1, NULL),
                     DCR_OK);
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_OK);
    assert_int_equal(m.version, 4);
    assert_int_equal(m.tau, 9);
    assert_int_equal(m.covers_from, 8);
    assert_int_equal(m.n, 3);
    size_t want_len[] = {300, 77, 77};
    const uint8_t *want[] = {b0, b1, b1};
    for (size_t i = 0; i < m.n; i++) {
        uint8_t *got = NULL;
        size_t len = 0;
        assert_int_equal(dcr_retain_payload_get(g_store, &m, i, &got, &len), DCR_OK);
        assert_int_equal(len, want_len[i]);
        assert_memory_equal(got, want[i], len);
        free(got);
    }
    dcr_retain_manifest_free(&m);
    /* A tampered repair payload is caught by its digest. */
    char key[128];
    snprintf(key, sizeof key, "versions/v4/repair-0-1.dcrp");
    uint8_t *bad = payload_bytes(40, 0, 77);
    assert_int_equal(dcr_objstore_put(g_store, key, bad, 77, NULL), DCR_OK);
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_OK);
    uint8_t *got = NULL;
    size_t len = 0;
    assert_int_equal(dcr_retain_payload_get(g_store, &m, 1, &got, &len), DCR_EDIGEST);
    dcr_retain_manifest_free(&m);
    free(bad);
    /* Parts of another attempt, or another owner count: refused. */
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 10, 10, 1, 2, 0, NULL, NULL, NULL), DCR_OK);
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ETRANSPORT);
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 9, 9, 1, 3, 0, NULL, NULL, NULL), DCR_OK);
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ETRANSPORT);
    /* Malformed parts. */
    put_text("versions/v4/REPAIR-1", "dcr-repair 1\nowner 0 of 2\ncovers-from 9\n");
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ETRANSPORT);
    put_text("versions/v4/REPAIR-1", "dcr-repair 1\nowner 1 of 2\ncovers-from 12\ndcr-version 1\n"
                                     "version 4\nfrom 3\ntau 9\npayloads 0\nend\n");
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ETRANSPORT); /* covers > tau */
    put_text("versions/v4/REPAIR-1", "dcr-repair 1\nowner 1 of 2\ncovers-from 9\ndcr-version 1\n"
                                     "version 5\nfrom 4\ntau 9\npayloads 0\nend\n");
    assert_int_equal(dcr_retain_repair_read(g_store, 4, &m), DCR_ETRANSPORT);
    assert_int_equal(m.n, 0);
    /* Bad arguments. */
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 9, 10, 0, 2, 0, NULL, NULL, NULL),
                     DCR_EINVAL);
    assert_int_equal(dcr_retain_repair_put(g_store, 4, 9, 9, 2, 2, 0, NULL, NULL, NULL),
                     DCR_EINVAL);
    /* Pruned with its version. */
    uint64_t pruned = 0;
    assert_int_equal(dcr_retain_prune(g_store, 5, &pruned), DCR_OK);
    assert_int_equal(pruned, 1);
    assert_int_equal(keys_under("versions/v4/"), 0);
    free(b0);
    free(b1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(commit_copies_every_listed_payload, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(window_keeps_the_last_k, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(tampered_and_truncated_payloads_are_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(attempt_without_manifest_is_not_retained, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(parse_refuses_malformed_text, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(put_retains_held_payloads, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(repair_sets_complete_checked_and_pruned, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
