/* ctest-labels: integration */
/* Payload keys where payloads enter the rollout cluster (FORMAT.md section
 * 1.1): a transport given a key delivers only payloads signed with it. The
 * relay root refuses the others at send; the object store's readers refuse
 * foreign objects unlisted and fail the attempt on a listed one; every
 * refusal is counted as rejected, and those for keying or keyed digest
 * (forged, unkeyed, keyed differently) as unauthenticated too, while a
 * corrupt header is not. Payloads are signed here with libb2 called
 * directly, not with the codec's encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <blake2.h>

#include "testkit.h"
#include "transport_test_util.h"

static char g_dir[PATH_MAX];
static const uint8_t *const NO_KEY = NULL;

static uint8_t g_key[32], g_other[32];

/* Signs p in place: keyed flag, keyed BLAKE2b-128 over header [0, 48) and
 * the body; with key NULL, the keyed flag over a plain digest (a forger's
 * best try without the key). */
static void sign(tp_payload_t *p, const uint8_t *key)
{
    p->buf[6] |= 0x02;
    t_digest(p->buf, p->buf + 64, p->len - 64, key, p->buf + 48);
}

static dcr_transport_t *keyed_transport(const char *backend, int nodes)
{
    assert_true(testfiles_tmpdir(g_dir, sizeof g_dir, "transport"));
    for (int i = 0; i < 32; i++) {
        g_key[i] = (uint8_t)(0x30 + 3 * i);
        g_other[i] = (uint8_t)(0x31 + 3 * i);
    }
    dcr_transport_config_t c = tp_config(g_dir, 1, 2, nodes);
    dcr_transport_t *t = tp_create(backend, &c);
    dcr_payload_key_t k = {.set = true};
    memcpy(k.bytes, g_key, 32);
    dcr_transport_set_payload_key(t, &k);
    return t;
}

static int64_t rejected(dcr_transport_t *t)
{
    dcr_transport_counters_t c;
    dcr_transport_counters(t, &c);
    return c.rejected;
}

static int64_t unauthenticated(dcr_transport_t *t)
{
    dcr_transport_counters_t c;
    dcr_transport_counters(t, &c);
    return c.unauthenticated;
}

/* A payload whose header is corrupt (its magic's first byte flipped):
 * refused before any digest is read, so not an authentication failure. */
static tp_payload_t corrupt_payload(uint64_t tau, int owner, uint64_t id)
{
    tp_payload_t p = tp_payload_make(tau, owner, id, 30, 0);
    sign(&p, g_key);
    p.buf[0] ^= 0xFF;
    return p;
}

/* Signed payloads of attempt tau from both owners arrive exactly once. */
static void signed_attempt_delivers(dcr_transport_t *t, uint64_t tau, int nodes)
{
    tp_payload_t *flat;
    tp_payload_t **per = tp_make_set(tau, 2, 2, 20, 0, &flat);
    for (int i = 0; i < 4; i++) sign(&flat[i], g_key);
    for (int o = 0; o < 2; o++)
        for (int j = 0; j < 2; j++) per[o][j] = flat[o * 2 + j];
    tp_owner_t owners[2] = {{.p = per[0], .n = 2, .finish = true},
                            {.p = per[1], .n = 2, .finish = true}};
    tp_node_t nd[3] = {{0}};
    tp_run(t, owners, 2, nd, nodes);
    /* By bytes: the helper's nodes read headers with no key, which a keyed
     * payload does not pass. */
    for (int i = 0; i < nodes; i++) {
        assert_int_equal(nd[i].n, 4);
        for (int k = 0; k < 4; k++) {
            int hits = 0;
            for (size_t j = 0; j < nd[i].n; j++)
                hits += nd[i].got[j].len == flat[k].len &&
                        memcmp(nd[i].got[j].buf, flat[k].buf, flat[k].len) == 0;
            if (hits != 1) fail_msg("node %d got signed payload %d %d times", i, k, hits);
        }
        tp_node_free(&nd[i]);
    }
    tp_free_set(per, flat, 2, 2);
}

/* One refused payload in attempt tau: the owner streams ahead of the
 * root's answers, so the refusal fails its send or, at the latest, its
 * finish (and that owner's stream of the attempt). */
static dcr_status_t refused_in_attempt(dcr_transport_t *t, uint64_t tau, const tp_payload_t *p)
{
    assert_int_equal(dcr_transport_open_attempt(t, tau), DCR_OK);
    dcr_status_t st = dcr_transport_send(t, 0, p->id, p->buf, p->len);
    if (st == DCR_OK) st = dcr_transport_finish(t, 0, 1);
    return st;
}

static void test_relay_root(void **state)
{
    (void)state;
    int nodes = 3;
    dcr_transport_t *t = keyed_transport("relay", nodes);
    const uint8_t *keys[3] = {NO_KEY, g_other, NO_KEY};
    const char *why[3] = {"unkeyed", "keyed BLAKE2b-128 digest does not match",
                          "keyed BLAKE2b-128 digest does not match"};
    for (int k = 0; k < 3; k++) {
        uint64_t tau = (uint64_t)k + 1;
        tp_payload_t p = tp_payload_make(tau, 0, (uint64_t)(60 + k), 30, 0);
        if (k > 0) sign(&p, keys[k]);
        assert_int_equal(refused_in_attempt(t, tau, &p), DCR_EDIGEST);
        if (!strstr(dcr_error_detail(), why[k]))
            fail_msg("payload %d: '%s' lacks '%s'", k, dcr_error_detail(), why[k]);
        assert_int_equal(rejected(t), k + 1);
        assert_int_equal(unauthenticated(t), k + 1);
        free(p.buf);
    }
    tp_payload_t bad = corrupt_payload(4, 0, 63);
    assert_int_equal(refused_in_attempt(t, 4, &bad), DCR_EPAYLOAD);
    free(bad.buf);
    assert_int_equal(rejected(t), 4);
    assert_int_equal(unauthenticated(t), 3);
    assert_int_equal(dcr_transport_open_attempt(t, 5), DCR_OK);
    signed_attempt_delivers(t, 5, nodes);
    assert_int_equal(rejected(t), 4);
    assert_int_equal(unauthenticated(t), 3);
    dcr_transport_destroy(t);
    tp_rmtree(g_dir);
}

static void put_object(uint64_t tau, const char *name, const tp_payload_t *p)
{
    tp_put_object(g_dir, tau, name, p->buf, p->len);
}

static void test_objstore_readers(void **state)
{
    (void)state;
    int nodes = 3;
    dcr_transport_t *t = keyed_transport("objstore", nodes);
    assert_int_equal(dcr_transport_open_attempt(t, 1), DCR_OK);
    /* Objects a foreign writer put in the bucket, unlisted: refused by every
     * node and counted, never delivered; the unkeyed and the wrongly keyed
     * ones as unauthenticated, the corrupt one not. */
    tp_payload_t unkeyed = tp_payload_make(1, 1, 70, 30, 0);
    tp_payload_t other = tp_payload_make(1, 1, 71, 30, 0);
    tp_payload_t bad = corrupt_payload(1, 1, 72);
    sign(&other, g_other);
    put_object(1, "payload-1-70.dcrp", &unkeyed);
    put_object(1, "payload-1-71.dcrp", &other);
    put_object(1, "payload-1-72.dcrp", &bad);
    for (int i = 0; i < 300 && rejected(t) < 3 * nodes; i++) usleep(10000);
    assert_int_equal(rejected(t), 3 * nodes);
    assert_int_equal(unauthenticated(t), 2 * nodes);
    signed_attempt_delivers(t, 1, nodes);
    assert_int_equal(rejected(t), 3 * nodes);
    assert_int_equal(unauthenticated(t), 2 * nodes);

    /* An owner without the key uploads and lists an unkeyed payload: the
     * readers refuse it, naming why, and the attempt fails on every node. */
    assert_int_equal(dcr_transport_open_attempt(t, 2), DCR_OK);
    tp_payload_t listed = tp_payload_make(2, 0, 1, 30, 0);
    assert_int_equal(dcr_transport_send(t, 0, 1, listed.buf, listed.len), DCR_OK);
    assert_int_equal(dcr_transport_finish(t, 0, 1), DCR_OK);
    assert_int_equal(dcr_transport_finish(t, 1, 0), DCR_OK);
    for (int node = 0; node < nodes; node++) {
        dcr_status_t st = DCR_ETIMEOUT;
        for (int i = 0; i < 100 && st == DCR_ETIMEOUT; i++) {
            dcr_delivery_t d;
            st = dcr_transport_recv(t, node, 100, &d);
            if (st == DCR_OK) fail_msg("node %d was delivered an unkeyed payload", node);
        }
        assert_int_equal(st, DCR_ETRANSPORT);
        if (!strstr(dcr_error_detail(), "unkeyed"))
            fail_msg("node %d: unclear error: %s", node, dcr_error_detail());
    }
    /* Each node refused the listed unkeyed payload for its keying. */
    assert_int_equal(unauthenticated(t), 3 * nodes);
    free(unkeyed.buf);
    free(other.buf);
    free(bad.buf);
    free(listed.buf);
    dcr_transport_destroy(t);
    tp_rmtree(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_root),
        cmocka_unit_test(test_objstore_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
