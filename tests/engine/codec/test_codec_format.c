/* ctest-labels: unit */
/* The answers FORMAT.md gives to an independent decoder's questions, each
 * enforced: the frame must declare its content size, no skippable frames or
 * dictionaries, any valid frame otherwise (raw blocks, checksums); GAPS
 * with one record or contiguous indices is valid; the names section fits
 * u32 offsets; raw and compressed lengths bound each other and a reader's
 * budget, before anything is allocated. And the known answer of section 7:
 * its exact bytes, built here with libzstd and libb2 called directly and
 * compared with the hex in FORMAT.md and with dcr's encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "blake2b_ref.h"
#include "codec_test_util.h"

/* FORMAT.md section 7.1, unkeyed and keyed with key 00 01 .. 1f (zstd 1.5.4, level 1). */
static const char *const T_KAT_HEX[2] = {
    "44 43 52 50 01 00 00 00 07 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00 02 00 00 00 01 00 00 "
    "00 7f 00 00 00 00 00 00 00 32 00 00 00 00 00 00 00 a0 d9 15 07 a6 be d9 3b 2f 23 15 c1 22 7c "
    "68 47 28 b5 2f fd 20 7f 4d 01 00 d8 02 00 01 00 04 00 02 00 01 00 04 00 01 00 01 00 01 01 01 "
    "00 77 00 02 80 3f 00 c0 07 10 00 01 3f c2 0a 0f 3c f0 c0 03 16",
    "44 43 52 50 01 00 02 00 07 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00 02 00 00 00 01 00 00 "
    "00 7f 00 00 00 00 00 00 00 32 00 00 00 00 00 00 00 d1 87 14 a6 d9 e2 a3 2f 9f a2 eb e6 fd 5c "
    "2f e3 28 b5 2f fd 20 7f 4d 01 00 d8 02 00 01 00 04 00 02 00 01 00 04 00 01 00 01 00 01 01 01 "
    "00 77 00 02 80 3f 00 c0 07 10 00 01 3f c2 0a 0f 3c f0 c0 03 16",
};

static size_t t_unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    unsigned v;
    int used;
    while (n < cap && sscanf(hex, " %2x%n", &v, &used) == 1) {
        out[n++] = (uint8_t)v;
        hex += used;
    }
    return n;
}

static void test_known_answer_bytes(void **state)
{
    (void)state;
    uint8_t key[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)i;
    uint8_t raw[127];
    t_example_body(raw, false);
    for (int keyed = 0; keyed < 2; keyed++) {
        /* Independent: libzstd's simple API at level 1, header by hand,
         * digest by libb2's one-shot call. */
        uint8_t want[512] = {0}, comp[256], cat[512];
        size_t clen = ZSTD_compress(comp, sizeof comp, raw, sizeof raw, 1);
        assert_false(ZSTD_isError(clen));
        memcpy(want, "DCRP", 4);
        t_put(want + T_H_VERSION, 1, 2);
        t_put(want + T_H_FLAGS, keyed ? 2 : 0, 2);
        t_put(want + T_H_TAU, 7, 8);
        t_put(want + T_H_ID, 5, 8);
        t_put(want + T_H_OWNER, 2, 4);
        t_put(want + T_H_ITEMS, 1, 4);
        t_put(want + T_H_RAW, sizeof raw, 8);
        t_put(want + T_H_COMP, clen, 8);
        memcpy(want + T_HDR_SIZE, comp, clen);
        t_digest(want, comp, clen, keyed ? key : NULL, want + T_H_DIGEST);
        memcpy(cat, want, 48); /* the covered bytes, for the RFC 7693 reference below */
        memcpy(cat + 48, comp, clen);
        size_t want_len = T_HDR_SIZE + clen;

        /* FORMAT.md's hex is these bytes. A zstd other than 1.5.4 could
         * compress differently; then the document's example and this test
         * need the new bytes (the decoder checks below hold regardless). */
        uint8_t doc[512];
        size_t doc_len = t_unhex(T_KAT_HEX[keyed], doc, sizeof doc);
        assert_int_equal(doc_len, 114);
        if (doc_len != want_len || memcmp(doc, want, want_len) != 0)
            fail_msg("FORMAT.md's known answer differs from libzstd %s + libb2's bytes",
                     ZSTD_versionString());
        /* The document's digest by the RFC 7693 oracle too. */
        uint8_t rfc[16];
        t_b2(rfc, 16, keyed ? key : NULL, keyed ? 32 : 0, cat, 48 + clen);
        assert_memory_equal(rfc, doc + T_H_DIGEST, 16);
        /* Its frame decompresses to the hand-built body. */
        uint8_t back[127];
        assert_int_equal(ZSTD_decompress(back, sizeof back, doc + T_HDR_SIZE, doc_len - T_HDR_SIZE),
                         sizeof raw);
        assert_memory_equal(back, raw, sizeof raw);

        /* dcr decodes the document's bytes and encodes the same bytes. */
        dcr_payload_key_t k = {.set = keyed != 0};
        memcpy(k.bytes, key, 32);
        dcr_payload_policy_t pol = {.key = &k};
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        assert_int_equal(dcr_payload_decode_with(p, doc, doc_len, &pol), DCR_OK);
        int64_t idx[2];
        assert_int_equal(dcr_payload_item_indices(p, 0, idx), DCR_OK);
        assert_int_equal(idx[0], 1);
        assert_int_equal(idx[1], 3);
        dcr_payload_destroy(p);
        size_t len = 0;
        uint8_t *buf = t_encode_example(&k, false, &len);
        assert_non_null(buf);
        assert_int_equal(len, want_len);
        assert_memory_equal(buf, want, len);
        free(buf);
    }
}

/* ---- frames ------------------------------------------------------------- */

/* A zstd frame made by hand (RFC 8878): single segment, a 1-byte content
 * size (raw_len < 256), an optional 1-byte dictionary id, an optional
 * checksum flag without the checksum word (so only for header tests), and
 * one raw block holding the body. */
static size_t t_raw_frame(uint8_t *out, const uint8_t *raw, size_t raw_len, int dict_id)
{
    size_t n = 0;
    t_put(out, 0xFD2FB528u, 4);
    n += 4;
    out[n++] = (uint8_t)(0x20 | (dict_id ? 1 : 0)); /* single segment, FCS 1 byte, dict flag */
    if (dict_id) out[n++] = (uint8_t)dict_id;
    out[n++] = (uint8_t)raw_len;
    t_put(out + n, 1u | (0u << 1) | ((uint32_t)raw_len << 3), 3); /* last, raw block */
    n += 3;
    memcpy(out + n, raw, raw_len);
    return n + raw_len;
}

static void t_expect(const uint8_t *comp, size_t clen, size_t raw_len, dcr_status_t want,
                     const char *sub)
{
    t_hdr_t h = {.version = 1, .tau = 7, .id = 5, .owner = 2, .items = 1};
    size_t len;
    uint8_t *buf = t_wrap_compressed(&h, raw_len, comp, clen, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st != want || (sub && !strstr(dcr_error_detail(), sub)))
        fail_msg("want %d with \"%s\", got %d: %s", want, sub ? sub : "", st, dcr_error_detail());
    dcr_payload_destroy(p);
    free(buf);
}

static void test_frames(void **state)
{
    (void)state;
    uint8_t raw[127], comp[512];
    t_example_body(raw, false);
    /* Any valid frame is accepted: a hand-made raw-block frame... */
    size_t n = t_raw_frame(comp, raw, sizeof raw, 0);
    t_expect(comp, n, sizeof raw, DCR_OK, NULL);
    /* ...and one with a content checksum. */
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    n = ZSTD_compress2(cctx, comp, sizeof comp, raw, sizeof raw);
    assert_false(ZSTD_isError(n));
    t_expect(comp, n, sizeof raw, DCR_OK, NULL);
    /* A wrong checksum is zstd's corruption. */
    comp[n - 1] ^= 1;
    t_expect(comp, n, sizeof raw, DCR_EPAYLOAD, "corrupt");
    /* Content size must be declared (section 1, rule 7). */
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    n = ZSTD_compress2(cctx, comp, sizeof comp, raw, sizeof raw);
    t_expect(comp, n, sizeof raw, DCR_EPAYLOAD, "does not declare its content size");
    ZSTD_freeCCtx(cctx);
    /* No dictionary id. */
    n = t_raw_frame(comp, raw, sizeof raw, 9);
    assert_int_equal(ZSTD_getDictID_fromFrame(comp, n), 9);
    t_expect(comp, n, sizeof raw, DCR_EPAYLOAD, "dictionary 9");
    /* No skippable frame, before or after the data frame. */
    uint8_t skip[12];
    t_put(skip, 0x184D2A53u, 4);
    t_put(skip + 4, 4, 4);
    t_put(skip + 8, 0xDEADBEEF, 4);
    memcpy(comp, skip, 12);
    n = 12 + t_raw_frame(comp + 12, raw, sizeof raw, 0);
    t_expect(comp, n, sizeof raw, DCR_EPAYLOAD, "skippable");
    n = t_raw_frame(comp, raw, sizeof raw, 0);
    memcpy(comp + n, skip, 12);
    t_expect(comp, n + 12, sizeof raw, DCR_EPAYLOAD, "exactly one zstd frame");
    /* Two data frames are not one. */
    size_t half = t_raw_frame(comp, raw, 60, 0);
    n = half + t_raw_frame(comp + half, raw + 60, sizeof raw - 60, 0);
    t_expect(comp, n, sizeof raw, DCR_EPAYLOAD, "declares 60");
}

/* ---- locations ---------------------------------------------------------- */

/* A body with one bf16 item "g" of shape [10], overwrite, GAPS with gap
 * bytes w and the given indices (no shuffle). */
static size_t t_gaps_body(uint8_t *raw, const int64_t *idx, size_t count, unsigned w)
{
    size_t names = 2, locs = (count - 1) * w, vals = 2 * count;
    size_t len = T_BODY_HDR + T_ITEM_SIZE + names + locs + vals;
    memset(raw, 0, len);
    t_put(raw + 0, names, 8);
    t_put(raw + 8, locs, 8);
    t_put(raw + 16, vals, 8);
    uint8_t *e = raw + T_BODY_HDR;
    t_put(e + T_I_COUNT, count, 8);
    t_put(e + T_I_FIRST, (uint64_t)idx[0], 8);
    t_put(e + T_I_DIMS, 10, 8);
    t_put(e + T_I_NAME_LEN, 1, 2);
    e[T_I_NDIM] = 1;
    e[T_I_ENC] = 1;
    e[T_I_LOCTYPE] = 1;
    e[T_I_GAPB] = (uint8_t)w;
    uint8_t *s = raw + T_BODY_HDR + T_ITEM_SIZE;
    s[0] = 'g';
    for (size_t k = 1; k < count; k++)
        t_put(s + names + (k - 1) * w, (uint64_t)(idx[k] - idx[k - 1]), (int)w);
    for (size_t k = 0; k < count; k++) t_put(s + names + locs + 2 * k, 0x3F80 + k, 2);
    return len;
}

static void test_gaps_forms(void **state)
{
    (void)state;
    const int64_t one[1] = {7}, contiguous[4] = {2, 3, 4, 5};
    const unsigned widths[4] = {1, 2, 4, 8};
    for (int wi = 0; wi < 4; wi++) {
        for (int form = 0; form < 2; form++) {
            const int64_t *idx = form ? contiguous : one;
            size_t count = form ? 4 : 1;
            uint8_t raw[256];
            size_t raw_len = t_gaps_body(raw, idx, count, widths[wi]);
            t_hdr_t h = {.version = 1, .tau = 1, .items = 1};
            size_t len;
            uint8_t *buf = t_wrap(&h, raw, raw_len, &len);
            dcr_payload_t *p;
            assert_int_equal(dcr_payload_create(&p), DCR_OK);
            dcr_status_t st = dcr_payload_decode(p, buf, len);
            if (st != DCR_OK)
                fail_msg("GAPS form %d width %u: %s", form, widths[wi], dcr_error_line(st));
            dcr_payload_item_t it;
            assert_int_equal(dcr_payload_item(p, 0, &it), DCR_OK);
            assert_int_equal(it.location, DCR_LOCATION_GAPS);
            assert_int_equal(it.gap_bytes, widths[wi]);
            assert_int_equal(it.first, idx[0]);
            assert_int_equal(it.last, idx[count - 1]);
            int64_t got[4];
            assert_int_equal(dcr_payload_item_indices(p, 0, got), DCR_OK);
            assert_memory_equal(got, idx, count * sizeof *idx);
            dcr_payload_destroy(p);
            free(buf);
        }
    }
}

/* ---- names section against u32 offsets ---------------------------------- */

static void test_names_section_bound(void **state)
{
    (void)state;
    uint8_t raw[256];
    const int64_t idx[2] = {1, 3};
    size_t raw_len = t_gaps_body(raw, idx, 2, 1);
    /* N = 2^32 with L and V moved so that the sum would be consistent if
     * the body were that long: the bound is what fails, named. */
    t_put(raw + 0, (uint64_t)1 << 32, 8);
    t_hdr_t h = {.version = 1, .tau = 1, .items = 1};
    size_t len;
    uint8_t *buf = t_wrap(&h, raw, raw_len, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "2^32 - 1"));
    dcr_payload_destroy(p);
    free(buf);
}

/* ---- lengths and budgets ------------------------------------------------ */

static long t_maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void test_declared_lengths(void **state)
{
    (void)state;
    /* A valid frame of 8 GiB of zeros, 256 KiB compressed, correct digest:
     * refused by the budget from the header, fast and without allocating. */
    const uint64_t big = (uint64_t)8 << 30;
    size_t clen;
    uint8_t *frame = t_rle_frame(big, &clen);
    assert_true(clen < (300u << 10));
    assert_int_equal(ZSTD_getFrameContentSize(frame, clen), big);
    assert_int_equal(ZSTD_findFrameCompressedSize(frame, clen), clen);
    t_hdr_t h = {.version = 1, .tau = 1, .items = 0};
    size_t len;
    uint8_t *buf = t_wrap_compressed(&h, big, frame, clen, &len);
    dcr_payload_header_t hd;
    assert_int_equal(dcr_payload_verify(buf, len, NULL, &hd), DCR_OK); /* well formed */
    long rss0 = t_maxrss_kb();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dcr_payload_policy_t pol = {.max_raw = (uint64_t)1 << 30};
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    assert_int_equal(dcr_payload_decode_with(p, buf, len, &pol), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "exceeds this reader's limit of 1073741824"));
    assert_int_equal(dcr_payload_header_parse(buf, 64, &pol, &hd), DCR_EPAYLOAD);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    assert_true(s < 1.0);
    assert_true(t_maxrss_kb() - rss0 < 16 * 1024);
    /* Within budget, it decodes (into exactly the declared bytes) and then
     * fails the body rules: 8 MiB of zeros is no body header of 0 items. */
    free(buf);
    free(frame);
    frame = t_rle_frame((uint64_t)8 << 20, &clen);
    buf = t_wrap_compressed(&h, (uint64_t)8 << 20, frame, clen, &len);
    pol.max_raw = (uint64_t)8 << 20;
    assert_int_equal(dcr_payload_decode_with(p, buf, len, &pol), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "do not add up"));
    free(buf);
    free(frame);

    /* Raw length above 32768 x compressed length: no frame expands so far. */
    uint8_t raw[127], comp[256];
    t_example_body(raw, false);
    size_t n = ZSTD_compress(comp, sizeof comp, raw, sizeof raw, 1);
    h.items = 1;
    buf = t_wrap_compressed(&h, (uint64_t)DCR_CODEC_MAX_RATIO * n + 1, comp, n, &len);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "more than 32768 times"));
    free(buf);
    /* Exactly at the ratio the header passes (the frame then disagrees). */
    buf = t_wrap_compressed(&h, (uint64_t)DCR_CODEC_MAX_RATIO * n, comp, n, &len);
    assert_int_equal(dcr_payload_verify(buf, len, NULL, &hd), DCR_OK);
    free(buf);
    /* Compressed length above ZSTD_COMPRESSBOUND(raw length). */
    uint8_t pad[256] = {0};
    size_t bound = ZSTD_COMPRESSBOUND(127);
    buf = t_wrap_compressed(&h, 127, pad, bound + 1, &len);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_detail(), "ZSTD_COMPRESSBOUND"));
    free(buf);
    dcr_payload_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answer_bytes), cmocka_unit_test(test_frames),
        cmocka_unit_test(test_gaps_forms),         cmocka_unit_test(test_names_section_bound),
        cmocka_unit_test(test_declared_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
