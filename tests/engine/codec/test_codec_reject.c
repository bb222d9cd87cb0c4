/* ctest-labels: unit */
/* Payload codec: every corrupt, truncated or malformed payload is rejected
 * with DCR_EPAYLOAD or DCR_EDIGEST and a detail naming the payload and the
 * field. Deep checks are reached by patching a raw body and rewrapping it
 * with a fresh zstd frame and a digest computed here with libb2, so that the
 * header and digest checks pass and the item-table rules are what fails. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "codec_test_util.h"

#define T_WHO "tau 7, owner 2, id 5"

/* The base payload: a run, a 2-byte-gap item and a 1-byte-gap item.
 *   a.run  bf16 [4, 8]  overwrite  indices 3..10        (RUN)
 *   b.gaps fp32 [1000]  xor        indices 2,10,300,999 (gaps 8, 290, 699: 2 bytes)
 *   c.fp8  fp8  [50]    overwrite  indices 0,1,3        (gaps 1, 2: 1 byte) */
static uint8_t *t_base(bool shuffle, size_t *len_p)
{
    dcr_encoder_t *enc;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    int64_t sa[2] = {4, 8}, sb[1] = {1000}, sc[1] = {50};
    int64_t ib[4] = {2, 10, 300, 999}, ic[3] = {0, 1, 3};
    uint16_t va[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint32_t vb[4] = {0x11, 0x2200, 0x330000, 0x44000000};
    uint8_t vc[3] = {9, 10, 11};
    dcr_codec_item_t items[3] = {
        {.name = "a.run",
         .ndim = 2,
         .shape = sa,
         .dtype = DCR_DTYPE_BF16,
         .encoding = DCR_ENCODING_OVERWRITE,
         .count = 8,
         .run_start = 3,
         .values = va},
        {.name = "b.gaps",
         .ndim = 1,
         .shape = sb,
         .dtype = DCR_DTYPE_FP32,
         .encoding = DCR_ENCODING_XOR,
         .count = 4,
         .indices = ib,
         .values = vb},
        {.name = "c.fp8",
         .ndim = 1,
         .shape = sc,
         .dtype = DCR_DTYPE_FP8_E4M3,
         .encoding = DCR_ENCODING_OVERWRITE,
         .count = 3,
         .indices = ic,
         .values = vc},
    };
    for (int i = 0; i < 3; i++) assert_int_equal(dcr_encoder_add(enc, &items[i]), DCR_OK);
    dcr_encode_params_t params = {
        .tau = 7, .owner = 2, .payload_id = 5, .level = 1, .shuffle = shuffle};
    const uint8_t *buf;
    size_t len = 0;
    assert_int_equal(dcr_encoder_finish(enc, &params, &buf, &len), DCR_OK);
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    dcr_encoder_destroy(enc);
    *len_p = len;
    return copy;
}

/* Decodes buf and expects failure with `want` and a detail holding every
 * given substring; the handle must end up empty. */
static void t_expect_reject(const uint8_t *buf, size_t len, dcr_status_t want, const char *sub1,
                            const char *sub2)
{
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_error_clear();
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st != want || (sub1 && !strstr(dcr_error_detail(), sub1)) ||
        (sub2 && !strstr(dcr_error_detail(), sub2)))
        fail_msg("want %d with \"%s\" and \"%s\", got %d: %s", want, sub1 ? sub1 : "",
                 sub2 ? sub2 : "", st, dcr_error_detail());
    assert_int_equal(dcr_payload_item_count(p), 0);
    assert_null(dcr_payload_get_header(p));
    dcr_payload_destroy(p);
}

/* ---- header ------------------------------------------------------------ */

static void test_every_header_byte_flip(void **state)
{
    (void)state;
    for (int sh = 0; sh < 2; sh++) {
        size_t len = 0;
        uint8_t *base = t_base(sh, &len);
        const uint8_t masks[] = {0x01, 0x10, 0x80, 0xFF};
        for (size_t off = 0; off < T_HDR_SIZE; off++) {
            for (size_t m = 0; m < sizeof masks; m++) {
                base[off] ^= masks[m];
                dcr_payload_t *p;
                assert_int_equal(dcr_payload_create(&p), DCR_OK);
                dcr_error_clear();
                dcr_status_t st = dcr_payload_decode(p, base, len);
                if (st != DCR_EPAYLOAD && st != DCR_EDIGEST)
                    fail_msg("flip 0x%02x at header byte %zu: status %d", masks[m], off, st);
                assert_non_null(strstr(dcr_error_detail(), "payload"));
                assert_int_equal(dcr_payload_item_count(p), 0);
                dcr_payload_destroy(p);
                base[off] ^= masks[m];
            }
        }
        /* Field-specific messages for the fields checked before the digest. */
        base[0] ^= 1;
        t_expect_reject(base, len, DCR_EPAYLOAD, "magic", NULL);
        base[0] ^= 1;
        base[T_H_VERSION] ^= 1;
        t_expect_reject(base, len, DCR_EPAYLOAD, "version", NULL);
        base[T_H_VERSION] ^= 1;
        base[T_H_FLAGS + 1] ^= 1;
        t_expect_reject(base, len, DCR_EPAYLOAD, "flags", T_WHO);
        base[T_H_FLAGS + 1] ^= 1;
        base[T_H_COMP] ^= 1;
        t_expect_reject(base, len, DCR_EPAYLOAD, "compressed length", T_WHO);
        base[T_H_COMP] ^= 1;
        base[T_H_RAW + 6] ^= 1;
        t_expect_reject(base, len, DCR_EPAYLOAD, "raw length", T_WHO);
        base[T_H_RAW + 6] ^= 1;
        base[T_H_TAU] ^= 1;
        t_expect_reject(base, len, DCR_EDIGEST, "digest", "tau 6");
        base[T_H_TAU] ^= 1;
        base[T_H_DIGEST + 15] ^= 1;
        t_expect_reject(base, len, DCR_EDIGEST, "digest", T_WHO);
        base[T_H_DIGEST + 15] ^= 1;
        free(base);
    }
}

static void test_every_body_byte_flip(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *base = t_base(false, &len);
    for (size_t off = T_HDR_SIZE; off < len; off++) {
        base[off] ^= 0x04;
        t_expect_reject(base, len, DCR_EDIGEST, T_WHO, NULL);
        base[off] ^= 0x04;
    }
    free(base);
}

static void test_every_truncation(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *base = t_base(true, &len);
    for (size_t n = 0; n < len; n++) t_expect_reject(base, n, DCR_EPAYLOAD, "payload", NULL);
    t_expect_reject(base, 10, DCR_EPAYLOAD, "truncated header", NULL);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, base, len);
    longer[len] = 0;
    t_expect_reject(longer, len + 1, DCR_EPAYLOAD, "compressed length", T_WHO);
    t_expect_reject(NULL, 0, DCR_EPAYLOAD, "truncated", NULL);
    free(longer);
    free(base);
}

static void test_peek(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *base = t_base(true, &len);
    dcr_payload_header_t h;
    memset(&h, 0xAB, sizeof h);
    assert_int_equal(dcr_payload_peek(base, len, true, &h), DCR_OK);
    assert_int_equal(h.version, 1);
    assert_int_equal(h.flags, DCR_CODEC_FLAG_SHUFFLE);
    assert_int_equal(h.tau, 7);
    assert_int_equal(h.owner, 2);
    assert_int_equal(h.payload_id, 5);
    assert_int_equal(h.item_count, 3);
    assert_int_equal(h.compressed_len, len - T_HDR_SIZE);
    assert_int_equal(h.raw_len, t_get(base + T_H_RAW, 8));
    assert_memory_equal(h.digest, base + T_H_DIGEST, 16);

    /* Without verification a corrupt body passes peek; with it, it does not. */
    base[len - 1] ^= 1;
    dcr_payload_header_t h2;
    assert_int_equal(dcr_payload_peek(base, len, false, &h2), DCR_OK);
    memset(&h2, 0, sizeof h2);
    assert_int_equal(dcr_payload_peek(base, len, true, &h2), DCR_EDIGEST);
    /* out_p untouched on failure */
    uint8_t zero[sizeof h2];
    memset(zero, 0, sizeof zero);
    assert_memory_equal(&h2, zero, sizeof h2);
    assert_int_equal(dcr_payload_peek(base, len - 1, false, &h2), DCR_EPAYLOAD);
    assert_int_equal(dcr_payload_peek(base, 63, false, &h2), DCR_EPAYLOAD);
    free(base);
}

/* The admitted decode skips the digest and nothing else: the caller has
 * verified these bytes with dcr_payload_verify. */
static void test_decode_admitted(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *base = t_base(true, &len);
    dcr_payload_t *full, *adm;
    assert_int_equal(dcr_payload_create(&full), DCR_OK);
    assert_int_equal(dcr_payload_create(&adm), DCR_OK);
    dcr_payload_header_t vh;
    assert_int_equal(dcr_payload_verify(base, len, NULL, &vh), DCR_OK);
    assert_int_equal(dcr_payload_decode_with(full, base, len, NULL), DCR_OK);
    assert_int_equal(dcr_payload_decode_admitted(adm, base, len, NULL), DCR_OK);
    const dcr_payload_header_t *ah = dcr_payload_get_header(adm);
    assert_non_null(ah);
    assert_int_equal(ah->tau, vh.tau);
    assert_int_equal(ah->owner, vh.owner);
    assert_int_equal(ah->payload_id, vh.payload_id);
    assert_int_equal(ah->raw_len, vh.raw_len);
    assert_memory_equal(ah->digest, vh.digest, 16);
    assert_int_equal(dcr_payload_item_count(adm), 3);
    for (size_t i = 0; i < 3; i++) {
        dcr_payload_item_t a, b;
        assert_int_equal(dcr_payload_item(full, i, &a), DCR_OK);
        assert_int_equal(dcr_payload_item(adm, i, &b), DCR_OK);
        assert_string_equal(a.name, b.name);
        assert_int_equal(a.count, b.count);
        assert_int_equal(a.first, b.first);
        assert_int_equal(a.last, b.last);
        assert_memory_equal(a.values, b.values, a.count * dcr_dtype_size(a.dtype));
    }
    /* A wrong digest: the full decode refuses it, the admitted one does not
     * look (which is why only an admitting caller may use it). */
    base[T_H_DIGEST] ^= 1;
    assert_int_equal(dcr_payload_decode_with(full, base, len, NULL), DCR_EDIGEST);
    assert_int_equal(dcr_payload_decode_admitted(adm, base, len, NULL), DCR_OK);
    base[T_H_DIGEST] ^= 1;
    /* Every other header rule still holds. */
    const size_t offs[] = {0, T_H_VERSION, T_H_FLAGS + 1, T_H_COMP, T_H_RAW + 6};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        base[offs[k]] ^= 1;
        assert_int_equal(dcr_payload_decode_admitted(adm, base, len, NULL), DCR_EPAYLOAD);
        assert_int_equal(dcr_payload_item_count(adm), 0);
        base[offs[k]] ^= 1;
    }
    for (size_t n = 0; n < len; n++)
        assert_int_equal(dcr_payload_decode_admitted(adm, base, n, NULL), DCR_EPAYLOAD);
    /* A raw length one short of the body: the body checks run too (the
     * digest would hide this from a full decode). */
    t_put(base + T_H_RAW, t_get(base + T_H_RAW, 8) - 1, 8);
    assert_int_equal(dcr_payload_decode_admitted(adm, base, len, NULL), DCR_EPAYLOAD);
    assert_null(dcr_payload_get_header(adm));
    assert_int_equal(dcr_payload_decode_admitted(NULL, base, len, NULL), DCR_EINVAL);
    dcr_payload_destroy(full);
    dcr_payload_destroy(adm);
    free(base);
}

/* ---- body: patched and rewrapped ---------------------------------------- */

typedef struct t_body {
    uint8_t *raw;
    size_t raw_len;
    size_t names, locs, vals; /* section starts, from FORMAT.md section 2 */
    t_hdr_t h;
} t_body_t;

static void t_body_load(t_body_t *b, bool shuffle)
{
    size_t len = 0;
    uint8_t *base = t_base(shuffle, &len);
    b->raw = t_unwrap(base, len, &b->raw_len, &b->h);
    assert_non_null(b->raw);
    free(base);
    b->names = T_BODY_HDR + T_ITEM_SIZE * (size_t)b->h.items;
    b->locs = b->names + t_get(b->raw + 0, 8);
    b->vals = b->locs + t_get(b->raw + 8, 8);
    assert_int_equal(b->vals + t_get(b->raw + 16, 8), b->raw_len);
}

static size_t t_item_at(int i, size_t field)
{
    return T_BODY_HDR + (size_t)T_ITEM_SIZE * i + field;
}

/* Rewraps the (patched) raw body with a valid frame and digest and expects
 * rejection naming the payload and `sub`. */
static void t_rewrap_reject(const t_body_t *b, const char *sub)
{
    size_t len = 0;
    uint8_t *buf = t_wrap(&b->h, b->raw, b->raw_len, &len);
    assert_non_null(buf);
    t_expect_reject(buf, len, DCR_EPAYLOAD, sub, T_WHO);
    free(buf);
}

/* One patch: `bytes` little-endian bytes of `value` at `off`. */
static void t_patch_reject(t_body_t *b, size_t off, int bytes, uint64_t value, const char *sub)
{
    uint8_t saved[8];
    memcpy(saved, b->raw + off, (size_t)bytes);
    t_put(b->raw + off, value, bytes);
    t_rewrap_reject(b, sub);
    memcpy(b->raw + off, saved, (size_t)bytes);
}

static void test_unpatched_body_is_valid(void **state)
{
    (void)state;
    for (int sh = 0; sh < 2; sh++) {
        t_body_t b;
        t_body_load(&b, sh);
        size_t len = 0;
        uint8_t *buf = t_wrap(&b.h, b.raw, b.raw_len, &len);
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
        assert_int_equal(dcr_payload_item_count(p), 3);
        dcr_payload_item_t d;
        assert_int_equal(dcr_payload_item(p, 1, &d), DCR_OK);
        assert_int_equal(d.gap_bytes, 2);
        assert_int_equal(d.last, 999);
        dcr_payload_destroy(p);
        free(buf);
        free(b.raw);
    }
}

static void test_bad_body_header(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    uint64_t n = t_get(b.raw + 0, 8), l = t_get(b.raw + 8, 8), v = t_get(b.raw + 16, 8);
    t_patch_reject(&b, 0, 8, n + 1, "do not add up");
    t_patch_reject(&b, 0, 8, n - 1, "do not add up");
    t_patch_reject(&b, 8, 8, l + 1, "do not add up");
    t_patch_reject(&b, 8, 8, UINT64_MAX, "do not add up");
    t_patch_reject(&b, 16, 8, v + 1, "do not add up");
    t_patch_reject(&b, 16, 8, UINT64_MAX - n, "do not add up");
    /* Moving bytes between sections keeps the sum but breaks the tiling. */
    t_put(b.raw + 0, n + 1, 8);
    t_patch_reject(&b, 8, 8, l - 1, "locations section");
    t_put(b.raw + 0, n, 8);
    free(b.raw);
}

static void test_bad_item_fields(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    const struct {
        int item;
        size_t field;
        int bytes;
        uint64_t value;
        const char *sub;
    } cases[] = {
        {1, T_I_NAME_OFF, 4, 7, "name offset"},
        {1, T_I_NAME_OFF, 4, 0xFFFFFFFF, "name offset"},
        {0, T_I_NAME_LEN, 2, 0, "name length"},
        {0, T_I_NAME_LEN, 2, DCR_CODEC_NAME_MAX + 1, "name length"},
        {2, T_I_NAME_LEN, 2, 7, "name length"},
        {0, T_I_NAME_LEN, 2, 4, "NUL"},
        {0, T_I_NDIM, 1, DCR_MAX_DIMS + 1, "ndim"},
        {0, T_I_NDIM, 1, 255, "ndim"},
        {0, T_I_DIMS + 16, 8, 1, "beyond ndim"},
        {0, T_I_DIMS + 40, 8, 3, "beyond ndim"},
        {1, T_I_DIMS, 8, ((uint64_t)1 << 62) + 1, "above 2^62"},
        {1, T_I_DIMS, 8, UINT64_MAX, "above 2^62"},
        {0, T_I_DTYPE, 1, DCR_DTYPE_COUNT, "dtype"},
        {0, T_I_DTYPE, 1, 255, "dtype"},
        {0, T_I_ENC, 1, 2, "encoding"},
        {0, T_I_LOCTYPE, 1, 2, "location type"},
        {0, T_I_RESERVED, 1, 1, "reserved"},
        {2, T_I_RESERVED + 4, 1, 0x80, "reserved"},
        {0, T_I_COUNT, 8, 0, "value count is 0"},
        {0, T_I_COUNT, 8, UINT64_MAX, "numel"},
        {0, T_I_COUNT, 8, 9, "value offset"}, /* item 1 then starts 2 bytes late */
        {2, T_I_COUNT, 8, 100, "numel"},
        {1, T_I_COUNT, 8, 5, "values section"},
        {0, T_I_FIRST, 8, 32, "first index"},
        {0, T_I_FIRST, 8, UINT64_MAX, "first index"},
        {0, T_I_FIRST, 8, 30, "numel"}, /* run 30..37 in 32 elements */
        {1, T_I_VAL_OFF, 8, 20, "value offset"},
        {1, T_I_VAL_OFF, 8, 0, "value offset"},
        {2, T_I_VAL_OFF, 8, UINT64_MAX, "value offset"},
        {1, T_I_LOC_OFF, 8, 1, "location offset"},
        {2, T_I_LOC_OFF, 8, 0, "location offset"},
        {0, T_I_LOC_OFF, 8, 5, "run item"},
        {0, T_I_GAPB, 1, 1, "run item"},
        {1, T_I_GAPB, 1, 0, "gap bytes"},
        {1, T_I_GAPB, 1, 3, "gap bytes"},
        {1, T_I_GAPB, 1, 4, "locations section"},
        {1, T_I_GAPB, 1, 1, "location offset"}, /* item 2 then starts 3 bytes early */
        {1, T_I_LOCTYPE, 1, DCR_LOCATION_RUN, "run item"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        print_message("case %zu: item %d field %zu = %" PRIu64 "\n", c, cases[c].item,
                      cases[c].field, cases[c].value);
        t_patch_reject(&b, t_item_at(cases[c].item, cases[c].field), cases[c].bytes, cases[c].value,
                       cases[c].sub);
    }
    /* A shape whose element count overflows: [2^31, 2^31, 2^31]. */
    size_t e1 = t_item_at(1, 0);
    uint8_t saved[T_ITEM_SIZE];
    memcpy(saved, b.raw + e1, T_ITEM_SIZE);
    b.raw[e1 + T_I_NDIM] = 3;
    for (int d = 0; d < 3; d++) t_put(b.raw + e1 + T_I_DIMS + 8 * d, (uint64_t)1 << 31, 8);
    t_rewrap_reject(&b, "2^62");
    memcpy(b.raw + e1, saved, T_ITEM_SIZE);
    free(b.raw);
}

static void test_bad_names(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    /* names: "a.run\0b.gaps\0c.fp8\0" */
    t_patch_reject(&b, b.names + 6, 1, ' ', "printable");
    t_patch_reject(&b, b.names + 7, 1, 0x80, "printable");
    t_patch_reject(&b, b.names + 2, 1, 0x00, "printable");
    t_patch_reject(&b, b.names + 5, 1, 'x', "NUL");
    t_patch_reject(&b, b.names + 18, 1, '!', "NUL");
    free(b.raw);
}

/* Gaps: zero gaps (non-increasing indices) and indices reaching numel. */
static void test_bad_indices(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    /* item 1 gaps (2 bytes each) at locs+0: 8, 290, 699; item 2 gaps at locs+6: 1, 2 */
    t_patch_reject(&b, b.locs + 0, 2, 0, "gap 0 is 0");
    t_patch_reject(&b, b.locs + 2, 2, 0, "gap 1");
    t_patch_reject(&b, b.locs + 4, 2, 700, "gap 2"); /* last index 1000 == numel */
    t_patch_reject(&b, b.locs + 4, 2, 0xFFFF, "gap 2");
    t_patch_reject(&b, b.locs + 6, 1, 0, "gap 0");
    t_patch_reject(&b, b.locs + 7, 1, 49, "gap 1");               /* index 50 == numel */
    t_patch_reject(&b, t_item_at(2, T_I_FIRST), 8, 47, "gap 1");  /* 47, 48, 50 */
    t_patch_reject(&b, t_item_at(1, T_I_FIRST), 8, 995, "gap 0"); /* 995 + 8 >= 1000 */
    free(b.raw);

    /* The same through the shuffle: item 1's gap words are two planes. */
    t_body_load(&b, true);
    t_put(b.raw + b.locs + 0, 0, 1); /* low byte of gap 0 */
    t_put(b.raw + b.locs + 3, 0, 1); /* high byte of gap 0 */
    t_rewrap_reject(&b, "gap 0 is 0");
    free(b.raw);
}

static void test_bad_item_count(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    b.h.items = 2;
    t_rewrap_reject(&b, "do not add up");
    b.h.items = 4; /* table would need 24 + 384 > raw length */
    t_rewrap_reject(&b, "raw length");
    b.h.items = 0;
    t_rewrap_reject(&b, "do not add up");
    b.h.items = 3;
    b.h.version = 3; /* 1 and 2 are read */
    {
        size_t len = 0;
        uint8_t *buf = t_wrap(&b.h, b.raw, b.raw_len, &len);
        t_expect_reject(buf, len, DCR_EPAYLOAD, "version", NULL);
        free(buf);
    }
    b.h.version = 1;
    b.h.flags = 0x8000;
    t_rewrap_reject(&b, "flags");
    b.h.flags = 0;
    free(b.raw);
}

static void test_bad_frames(void **state)
{
    (void)state;
    t_body_t b;
    t_body_load(&b, false);
    size_t cap = ZSTD_compressBound(b.raw_len) + 16;
    uint8_t *comp = malloc(cap);
    size_t clen = ZSTD_compress(comp, cap, b.raw, b.raw_len, 1);
    assert_false(ZSTD_isError(clen));
    size_t len = 0;
    uint8_t *buf;

    /* Header raw length disagrees with the frame's content size. */
    buf = t_wrap_compressed(&b.h, b.raw_len + 1, comp, clen, &len);
    t_expect_reject(buf, len, DCR_EPAYLOAD, "declare", T_WHO);
    free(buf);
    /* Bytes after the frame. */
    comp[clen] = 0x55;
    buf = t_wrap_compressed(&b.h, b.raw_len, comp, clen + 1, &len);
    t_expect_reject(buf, len, DCR_EPAYLOAD, "one zstd frame", T_WHO);
    free(buf);
    /* Not a zstd frame at all. */
    uint8_t junk[64];
    for (size_t k = 0; k < sizeof junk; k++) junk[k] = (uint8_t)(k * 37 + 11);
    buf = t_wrap_compressed(&b.h, b.raw_len, junk, sizeof junk, &len);
    t_expect_reject(buf, len, DCR_EPAYLOAD, "zstd frame", T_WHO);
    free(buf);
    /* Empty body. */
    buf = t_wrap_compressed(&b.h, b.raw_len, comp, 0, &len);
    t_expect_reject(buf, len, DCR_EPAYLOAD, "zstd frame", T_WHO);
    free(buf);
    /* A frame that does not record its content size. */
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    clen = ZSTD_compress2(cctx, comp, cap, b.raw, b.raw_len);
    assert_false(ZSTD_isError(clen));
    buf = t_wrap_compressed(&b.h, b.raw_len, comp, clen, &len);
    t_expect_reject(buf, len, DCR_EPAYLOAD, "declare", T_WHO);
    free(buf);
    ZSTD_freeCCtx(cctx);
    /* Every corrupted byte of a valid frame, digest recomputed: the decoder
     * may only fail with DCR_EPAYLOAD or, when zstd happens to produce a body
     * that passes every rule, succeed; it must never crash. */
    clen = ZSTD_compress(comp, cap, b.raw, b.raw_len, 1);
    for (size_t off = 0; off < clen; off++) {
        comp[off] ^= 0x21;
        buf = t_wrap_compressed(&b.h, b.raw_len, comp, clen, &len);
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        dcr_status_t st = dcr_payload_decode(p, buf, len);
        assert_true(st == DCR_OK || st == DCR_EPAYLOAD);
        dcr_payload_destroy(p);
        free(buf);
        comp[off] ^= 0x21;
    }
    free(comp);
    free(b.raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_header_byte_flip),
        cmocka_unit_test(test_every_body_byte_flip),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_peek),
        cmocka_unit_test(test_decode_admitted),
        cmocka_unit_test(test_unpatched_body_is_valid),
        cmocka_unit_test(test_bad_body_header),
        cmocka_unit_test(test_bad_item_fields),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_bad_indices),
        cmocka_unit_test(test_bad_item_count),
        cmocka_unit_test(test_bad_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
