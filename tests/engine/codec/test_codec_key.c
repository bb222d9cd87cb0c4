/* ctest-labels: unit */
/* Payload keys (FORMAT.md section 1.1): the keyed BLAKE2b-128 digest checked
 * against two independent oracles (libb2's one-shot keyed call over the
 * bytes FORMAT.md says are covered, and a BLAKE2b written from RFC 7693 in
 * blake2b_ref.h, itself checked on RFC 7693 appendix A and the BLAKE2
 * reference KAT's keyed entries), the acceptance rules of every key
 * configuration, and the key file loader. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "testfiles.h"

#include "blake2b_ref.h"
#include "codec_test_util.h"

static void t_hex(const char *hex, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

/* The oracle first: RFC 7693 appendix A, and the first two keyed entries of
 * blake2b-kat.txt (key 00..3f, input "" and 00, 64-byte output). */
static void test_reference_blake2b(void **state)
{
    (void)state;
    uint8_t want[64], got[64], key[64];
    t_hex("ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
          "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
          want, 64);
    t_b2(got, 64, NULL, 0, "abc", 3);
    assert_memory_equal(got, want, 64);
    for (int i = 0; i < 64; i++) key[i] = (uint8_t)i;
    t_hex("10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786"
          "b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568",
          want, 64);
    t_b2(got, 64, key, 64, "", 0);
    assert_memory_equal(got, want, 64);
    const uint8_t zero = 0;
    t_hex("961f6dd1e4dd30f63901690c512e78e4b45e4742ed197c3c5e45c549fd25f2e4"
          "187b0bc9fe30492b16b0d0bc4ef9b0f34c7003fac09a5ef1532e69430234cebd",
          want, 64);
    t_b2(got, 64, key, 64, &zero, 1);
    assert_memory_equal(got, want, 64);
    /* Multi-block input, 16-byte output, 32-byte key: the payload's case;
     * libb2 must agree with the RFC code. */
    uint8_t msg[300];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 7 + 1);
    for (size_t len = 0; len <= sizeof msg; len += 37) {
        t_b2(got, 16, key, 32, msg, len);
        blake2b(want, msg, key, 16, len, 32);
        assert_memory_equal(got, want, 16);
    }
}

static dcr_payload_key_t t_key(uint8_t base)
{
    dcr_payload_key_t k = {.set = true};
    for (int i = 0; i < DCR_CODEC_KEY_SIZE; i++) k.bytes[i] = (uint8_t)(base + i);
    return k;
}

static void test_keyed_digest_known_answer(void **state)
{
    (void)state;
    dcr_payload_key_t key = t_key(0);
    size_t len = 0;
    uint8_t *buf = t_encode_example(&key, false, &len);
    assert_non_null(buf);
    assert_int_equal(t_get(buf + T_H_FLAGS, 2), 0x0002);
    /* Covered bytes: header [0, 48) then the compressed body (FORMAT.md 1.1). */
    uint8_t *cat = malloc(len);
    memcpy(cat, buf, 48);
    memcpy(cat + 48, buf + T_HDR_SIZE, len - T_HDR_SIZE);
    uint8_t libb2[16], rfc[16], plain[16];
    t_digest(buf, buf + T_HDR_SIZE, len - T_HDR_SIZE, key.bytes, libb2);
    t_b2(rfc, 16, key.bytes, 32, cat, 48 + len - T_HDR_SIZE);
    t_b2(plain, 16, NULL, 0, cat, 48 + len - T_HDR_SIZE);
    assert_memory_equal(buf + T_H_DIGEST, libb2, 16);
    assert_memory_equal(buf + T_H_DIGEST, rfc, 16);
    assert_memory_not_equal(buf + T_H_DIGEST, plain, 16);
    /* The body is the unkeyed example's: keying changes flags and digest only. */
    size_t raw_len;
    uint8_t *raw = t_unwrap(buf, len, &raw_len, NULL);
    assert_non_null(raw);
    assert_int_equal(raw_len, 127);
    dcr_payload_policy_t pol = {.key = &key};
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    assert_int_equal(dcr_payload_decode_with(p, buf, len, &pol), DCR_OK);
    assert_int_equal(dcr_payload_get_header(p)->flags, DCR_CODEC_FLAG_KEYED);
    dcr_payload_destroy(p);
    free(raw);
    free(cat);
    free(buf);
}

/* Expects verify and decode under pol to fail with DCR_EDIGEST, the detail
 * holding sub, and dcr_payload_auth_failure to say `auth`. */
static void t_refused(const uint8_t *buf, size_t len, const dcr_payload_key_t *key, const char *sub,
                      bool auth)
{
    dcr_payload_policy_t pol = {.key = key};
    dcr_payload_header_t h;
    dcr_status_t st = dcr_payload_verify(buf, len, &pol, &h);
    if (st != DCR_EDIGEST || !strstr(dcr_error_detail(), sub))
        fail_msg("verify: want DCR_EDIGEST with \"%s\", got %d: %s", sub, st, dcr_error_detail());
    assert_int_equal(dcr_payload_auth_failure(st, buf, len, key), auth);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    st = dcr_payload_decode_with(p, buf, len, &pol);
    if (st != DCR_EDIGEST || !strstr(dcr_error_detail(), sub))
        fail_msg("decode: want DCR_EDIGEST with \"%s\", got %d: %s", sub, st, dcr_error_detail());
    assert_int_equal(dcr_payload_item_count(p), 0);
    dcr_payload_destroy(p);
}

static void test_key_policies(void **state)
{
    (void)state;
    dcr_payload_key_t key = t_key(0), other = t_key(1), none = {0};
    size_t klen = 0, ulen = 0;
    uint8_t *keyed = t_encode_example(&key, false, &klen);
    uint8_t *unkeyed = t_encode_example(NULL, false, &ulen);
    dcr_payload_header_t h;
    /* Accepted: each kind under its own configuration. */
    dcr_payload_policy_t kp = {.key = &key}, np = {.key = &none};
    assert_int_equal(dcr_payload_verify(keyed, klen, &kp, &h), DCR_OK);
    assert_int_equal(dcr_payload_verify(unkeyed, ulen, NULL, &h), DCR_OK);
    assert_int_equal(dcr_payload_verify(unkeyed, ulen, &np, &h), DCR_OK);
    /* Structure-only peek reads a keyed header; a digest peek cannot verify it. */
    assert_int_equal(dcr_payload_peek(keyed, klen, false, &h), DCR_OK);
    assert_int_equal(dcr_payload_peek(keyed, klen, true, &h), DCR_EDIGEST);

    /* Refused: unkeyed under a key, keyed differently, keyed with no key. */
    t_refused(unkeyed, ulen, &key, "unkeyed", true);
    t_refused(keyed, klen, &other, "keyed BLAKE2b-128", true);
    t_refused(keyed, klen, NULL, "no payload key", true);
    t_refused(keyed, klen, &none, "no payload key", true);

    /* Forged: the body changed and re-digested by someone without the key,
     * once with the keyed flag kept (plain digest) and once stripped. */
    uint8_t *f = malloc(klen);
    memcpy(f, keyed, klen);
    t_digest(f, f + T_HDR_SIZE, klen - T_HDR_SIZE, NULL, f + T_H_DIGEST);
    t_refused(f, klen, &key, "keyed BLAKE2b-128", true);
    t_put(f + T_H_FLAGS, 0, 2);
    t_digest(f, f + T_HDR_SIZE, klen - T_HDR_SIZE, NULL, f + T_H_DIGEST);
    t_refused(f, klen, &key, "unkeyed", true);
    /* Every single bit of a keyed payload matters. */
    memcpy(f, keyed, klen);
    for (size_t off = 0; off < klen; off++) {
        for (int bit = 0; bit < 8; bit++) {
            f[off] ^= (uint8_t)(1u << bit);
            dcr_status_t st = dcr_payload_verify(f, klen, &kp, &h);
            assert_true(st == DCR_EDIGEST || st == DCR_EPAYLOAD);
            f[off] ^= (uint8_t)(1u << bit);
        }
    }
    /* Plain corruption with no key anywhere is not an authentication failure. */
    memcpy(f, unkeyed, ulen);
    f[ulen - 1] ^= 1;
    t_refused(f, ulen, NULL, "digest does not match", false);
    free(f);

    /* Unsetting the encoder's key goes back to the plain digest. */
    dcr_encoder_t *enc;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    dcr_encoder_set_key(enc, &key);
    dcr_encoder_set_key(enc, NULL);
    dcr_encode_params_t params = {.level = 1};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(enc, &params, &buf, &len), DCR_OK);
    assert_int_equal(t_get(buf + T_H_FLAGS, 2), 0);
    assert_int_equal(dcr_payload_verify(buf, len, NULL, &h), DCR_OK);
    dcr_encoder_destroy(enc);
    free(keyed);
    free(unkeyed);
}

static void t_write(const char *path, const void *data, size_t n, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static void test_key_load(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "key"));
    char path[128];
    snprintf(path, sizeof path, "%s/key", dir);
    dcr_payload_key_t want = t_key(0x41), got;
    bool shared = true;

    t_write(path, want.bytes, 32, 0600);
    assert_int_equal(dcr_payload_key_load(path, &got, &shared), DCR_OK);
    assert_true(got.set);
    assert_memory_equal(got.bytes, want.bytes, 32);
    assert_false(shared);
    t_write(path, want.bytes, 32, 0640);
    assert_int_equal(dcr_payload_key_load(path, &got, &shared), DCR_OK);
    assert_true(shared);
    t_write(path, want.bytes, 32, 0604);
    assert_int_equal(dcr_payload_key_load(path, &got, &shared), DCR_OK);
    assert_true(shared);

    /* Wrong sizes name the file and its size; *out_p stays untouched. */
    uint8_t big[64] = {0};
    const size_t sizes[] = {0, 31, 33, 64};
    for (size_t i = 0; i < 4; i++) {
        t_write(path, big, sizes[i], 0600);
        dcr_payload_key_t untouched = {0};
        assert_int_equal(dcr_payload_key_load(path, &untouched, NULL), DCR_EINVAL);
        char sz[32];
        snprintf(sz, sizeof sz, ": %zu bytes, expected exactly 32", sizes[i]);
        assert_non_null(strstr(dcr_error_detail(), path));
        assert_non_null(strstr(dcr_error_detail(), sz));
        assert_false(untouched.set);
    }
    /* A device (or a FIFO, a directory) is refused before any read. */
    assert_int_equal(dcr_payload_key_load("/dev/zero", &got, NULL), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "a character device"));
    unlink(path);
    assert_int_equal(dcr_payload_key_load(path, &got, NULL), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_detail(), path));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_blake2b),
        cmocka_unit_test(test_keyed_digest_known_answer),
        cmocka_unit_test(test_key_policies),
        cmocka_unit_test(test_key_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
