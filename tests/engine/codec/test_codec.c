/* ctest-labels: unit */
/* Payload codec: round trips, location coding, the known-answer vector of
 * FORMAT.md section 7, encoder input checks and buffer reuse. Rejection of
 * corrupt payloads is in test_codec_reject.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "codec_test_util.h"
#include "dcr/codec.h"
#include "dcr/rng.h"

/* ---- random items ------------------------------------------------------ */

typedef struct t_item {
    char name[64];
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
    int64_t numel;
    dcr_dtype_t dtype;
    dcr_encoding_t enc;
    size_t count;
    int64_t *idx;
    uint8_t *vals;
    bool as_run; /* hand the encoder run_start instead of indices */
} t_item_t;

static void t_item_free(t_item_t *it)
{
    free(it->idx);
    free(it->vals);
    it->idx = NULL;
    it->vals = NULL;
}

static void t_random_shape(dcr_rng_t *r, t_item_t *it)
{
    it->ndim = (int)dcr_rng_below(r, 5); /* 0..4; 0 is a scalar */
    it->numel = 1;
    for (int d = 0; d < it->ndim; d++) {
        /* Mostly small dims, sometimes a huge one, so gaps of every width occur. */
        int64_t dim = dcr_rng_below(r, 8) == 0 ? (int64_t)(1 + dcr_rng_below(r, (uint64_t)1 << 34))
                                               : (int64_t)(1 + dcr_rng_below(r, 96));
        if (it->numel > ((int64_t)1 << 50) / dim) dim = 1;
        it->shape[d] = dim;
        it->numel *= dim;
    }
}

/* Fills it->idx with a strictly increasing set in [0, numel): a dense random
 * subset, a contiguous run, or scattered indices with gaps of mixed magnitude. */
static void t_random_indices(dcr_rng_t *r, t_item_t *it, size_t max_count)
{
    int64_t numel = it->numel;
    it->idx = malloc(max_count * sizeof *it->idx);
    size_t n = 0;
    int mode = (int)dcr_rng_below(r, 3);
    if (mode == 1) {
        int64_t len =
            1 + (int64_t)dcr_rng_below(
                    r, (uint64_t)(numel < (int64_t)max_count ? numel : (int64_t)max_count));
        int64_t start = (int64_t)dcr_rng_below(r, (uint64_t)(numel - len + 1));
        for (int64_t k = 0; k < len; k++) it->idx[n++] = start + k;
    } else if (mode == 0 && numel <= (int64_t)max_count) {
        double p = dcr_rng_uniform(r);
        for (int64_t k = 0; k < numel; k++)
            if (dcr_rng_uniform(r) < p) it->idx[n++] = k;
    } else {
        int64_t i = (int64_t)dcr_rng_below(r, (uint64_t)numel);
        while (n < max_count && i < numel) {
            it->idx[n++] = i;
            int bits = (int)dcr_rng_below(r, 36);
            i += 1 + (int64_t)dcr_rng_below(r, (uint64_t)1 << bits);
        }
    }
    if (n == 0) it->idx[n++] = (int64_t)dcr_rng_below(r, (uint64_t)numel);
    it->count = n;
    it->as_run = it->idx[n - 1] - it->idx[0] == (int64_t)n - 1 && dcr_rng_below(r, 2) == 0;
}

static void t_random_item(dcr_rng_t *r, t_item_t *it, int k, dcr_dtype_t dtype, dcr_encoding_t enc)
{
    memset(it, 0, sizeof *it);
    snprintf(it->name, sizeof it->name, "model.layers.%d.mlp.w%" PRIu64 ".weight", k,
             dcr_rng_below(r, 1000));
    it->dtype = dtype;
    it->enc = enc;
    t_random_shape(r, it);
    t_random_indices(r, it, 3000);
    size_t bytes = it->count * dcr_dtype_size(dtype);
    it->vals = malloc(bytes);
    /* Mostly small words, as XOR masks of small updates are, plus random ones. */
    for (size_t b = 0; b < bytes; b++)
        it->vals[b] = (uint8_t)(dcr_rng_below(r, 2) ? dcr_rng_u64(r) : dcr_rng_below(r, 4));
}

static dcr_codec_item_t t_codec_item(const t_item_t *it)
{
    dcr_codec_item_t c = {
        .name = it->name,
        .ndim = it->ndim,
        .shape = it->shape,
        .dtype = it->dtype,
        .encoding = it->enc,
        .count = it->count,
        .indices = it->as_run ? NULL : it->idx,
        .run_start = it->as_run ? it->idx[0] : 0,
        .values = it->vals,
    };
    return c;
}

/* Decoded item i equals t, indices and value words included. */
static void t_check_item(const dcr_payload_t *p, size_t i, const t_item_t *t)
{
    dcr_payload_item_t d;
    assert_int_equal(dcr_payload_item(p, i, &d), DCR_OK);
    assert_string_equal(d.name, t->name);
    assert_int_equal(d.ndim, t->ndim);
    for (int k = 0; k < DCR_MAX_DIMS; k++)
        assert_int_equal(d.shape[k], k < t->ndim ? t->shape[k] : 0);
    assert_int_equal(d.numel, t->numel);
    assert_int_equal(d.dtype, t->dtype);
    assert_int_equal(d.encoding, t->enc);
    assert_int_equal(d.count, t->count);
    assert_int_equal(d.first, t->idx[0]);
    assert_int_equal(d.last, t->idx[t->count - 1]);
    bool contiguous = t->idx[t->count - 1] - t->idx[0] == (int64_t)t->count - 1;
    assert_int_equal(d.location, contiguous ? DCR_LOCATION_RUN : DCR_LOCATION_GAPS);
    int64_t *idx = malloc(t->count * sizeof *idx);
    assert_int_equal(dcr_payload_item_indices(p, i, idx), DCR_OK);
    assert_memory_equal(idx, t->idx, t->count * sizeof *idx);
    free(idx);
    size_t bytes = t->count * dcr_dtype_size(t->dtype);
    assert_memory_equal(d.values, t->vals, bytes);
    uint8_t *vals = malloc(bytes);
    assert_int_equal(dcr_payload_item_values(p, i, vals), DCR_OK);
    assert_memory_equal(vals, t->vals, bytes);
    free(vals);
}

/* Encodes items with enc, decodes into p and checks everything. */
static void t_round_trip(dcr_encoder_t *enc, dcr_payload_t *p, t_item_t *items, size_t n,
                         const dcr_encode_params_t *params)
{
    for (size_t i = 0; i < n; i++) {
        dcr_codec_item_t c = t_codec_item(&items[i]);
        assert_int_equal(dcr_encoder_add(enc, &c), DCR_OK);
    }
    assert_int_equal(dcr_encoder_item_count(enc), n);
    size_t expect_raw = dcr_encoder_raw_len(enc);
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(enc, params, &buf, &len), DCR_OK);
    assert_int_equal(dcr_encoder_item_count(enc), 0);
    assert_int_equal(t_get(buf + T_H_RAW, 8), expect_raw);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
    const dcr_payload_header_t *h = dcr_payload_get_header(p);
    assert_non_null(h);
    assert_int_equal(h->version, DCR_CODEC_VERSION_1);
    assert_int_equal(h->flags, params->shuffle ? DCR_CODEC_FLAG_SHUFFLE : 0);
    assert_int_equal(h->tau, params->tau);
    assert_int_equal(h->owner, params->owner);
    assert_int_equal(h->payload_id, params->payload_id);
    assert_int_equal(h->item_count, n);
    assert_int_equal(h->compressed_len + T_HDR_SIZE, len);
    assert_int_equal(dcr_payload_item_count(p), n);
    for (size_t i = 0; i < n; i++) t_check_item(p, i, &items[i]);
}

/* ---- round trips ------------------------------------------------------- */

static void test_round_trip_every_dtype(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, t_seed("test_round_trip_every_dtype"));
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    uint64_t id = 0;
    for (int dt = 0; dt < DCR_DTYPE_COUNT; dt++) {
        for (int e = 0; e < DCR_ENCODING_COUNT; e++) {
            for (int sh = 0; sh < 2; sh++) {
                t_item_t items[5];
                for (int k = 0; k < 5; k++)
                    t_random_item(&r, &items[k], k, (dcr_dtype_t)dt, (dcr_encoding_t)e);
                dcr_encode_params_t params = {.tau = 3 + (uint64_t)dt,
                                              .owner = (uint32_t)e,
                                              .payload_id = id++,
                                              .level = 1,
                                              .shuffle = sh};
                t_round_trip(enc, p, items, 5, &params);
                for (int k = 0; k < 5; k++) t_item_free(&items[k]);
            }
        }
    }
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
}

/* Mixed dtypes and encodings in one payload put FP32 words at odd offsets and
 * make each item's shuffle segment a different width. */
static void test_round_trip_mixed_payloads(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, t_seed("test_round_trip_mixed_payloads"));
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    const int levels[] = {1, 3, -1, 19};
    for (int iter = 0; iter < 60; iter++) {
        size_t n = 1 + dcr_rng_below(&r, 12);
        t_item_t items[12];
        for (size_t k = 0; k < n; k++)
            t_random_item(&r, &items[k], (int)k, (dcr_dtype_t)dcr_rng_below(&r, DCR_DTYPE_COUNT),
                          (dcr_encoding_t)dcr_rng_below(&r, DCR_ENCODING_COUNT));
        dcr_encode_params_t params = {.tau = dcr_rng_u64(&r),
                                      .owner = (uint32_t)dcr_rng_u64(&r),
                                      .payload_id = dcr_rng_u64(&r),
                                      .level = levels[dcr_rng_below(&r, 4)],
                                      .shuffle = dcr_rng_below(&r, 2)};
        t_round_trip(enc, p, items, n, &params);
        for (size_t k = 0; k < n; k++) t_item_free(&items[k]);
    }
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
}

static void test_empty_payload(void **state)
{
    (void)state;
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_encode_params_t params = {.tau = 1, .owner = 2, .payload_id = 3, .level = 1};
    t_round_trip(enc, p, NULL, 0, &params);
    assert_int_equal(dcr_payload_get_header(p)->raw_len, T_BODY_HDR);
    dcr_payload_item_t d;
    assert_int_equal(dcr_payload_item(p, 0, &d), DCR_EINVAL);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
}

/* ---- location coding --------------------------------------------------- */

/* Encodes one bf16 item with the given indices; returns the decoded view and
 * checks that the raw body's item entry says the same. */
static void t_one_item(const int64_t *idx, size_t count, int64_t numel, dcr_payload_item_t *out,
                       bool shuffle)
{
    t_item_t t = {.ndim = 1,
                  .numel = numel,
                  .dtype = DCR_DTYPE_BF16,
                  .enc = DCR_ENCODING_XOR,
                  .count = count};
    strcpy(t.name, "t.weight");
    t.shape[0] = numel;
    t.idx = malloc(count * sizeof *t.idx);
    memcpy(t.idx, idx, count * sizeof *idx);
    t.vals = malloc(2 * count);
    for (size_t k = 0; k < 2 * count; k++) t.vals[k] = (uint8_t)(k * 7 + 1);
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_encode_params_t params = {.tau = 1, .level = 1, .shuffle = shuffle};
    dcr_codec_item_t c = t_codec_item(&t);
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_OK);
    const uint8_t *buf;
    size_t len, raw_len;
    assert_int_equal(dcr_encoder_finish(enc, &params, &buf, &len), DCR_OK);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
    t_check_item(p, 0, &t);
    assert_int_equal(dcr_payload_item(p, 0, out), DCR_OK);
    uint8_t *raw = t_unwrap(buf, len, &raw_len, NULL);
    assert_non_null(raw);
    const uint8_t *e = raw + T_BODY_HDR;
    assert_int_equal(e[T_I_LOCTYPE], out->location);
    assert_int_equal(e[T_I_GAPB], out->gap_bytes);
    assert_int_equal(t_get(e + T_I_FIRST, 8), (uint64_t)idx[0]);
    /* Locations section length: nothing for a run, (count-1) words otherwise. */
    assert_int_equal(t_get(raw + 8, 8),
                     out->location == DCR_LOCATION_RUN ? 0 : (count - 1) * out->gap_bytes);
    free(raw);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
    t_item_free(&t);
}

static void test_gap_widths(void **state)
{
    (void)state;
    const struct {
        int64_t gap;
        unsigned bytes;
    } cases[] = {{2, 1},
                 {255, 1},
                 {256, 2},
                 {65535, 2},
                 {65536, 4},
                 {(int64_t)UINT32_MAX, 4},
                 {(int64_t)UINT32_MAX + 1, 8}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int sh = 0; sh < 2; sh++) {
            /* Small gaps around the big one: the largest gap decides the width. */
            int64_t idx[4] = {5, 6, 6 + cases[c].gap, 8 + cases[c].gap};
            dcr_payload_item_t d;
            t_one_item(idx, 4, idx[3] + 1, &d, sh);
            assert_int_equal(d.location, DCR_LOCATION_GAPS);
            assert_int_equal(d.gap_bytes, cases[c].bytes);
        }
    }
}

static void test_single_element(void **state)
{
    (void)state;
    const int64_t where[] = {0, 17, 99};
    for (size_t k = 0; k < 3; k++) {
        dcr_payload_item_t d;
        t_one_item(&where[k], 1, 100, &d, false);
        assert_int_equal(d.location, DCR_LOCATION_RUN);
        assert_int_equal(d.gap_bytes, 0);
        assert_int_equal(d.count, 1);
        assert_int_equal(d.first, where[k]);
    }
}

static void test_whole_tensor_and_end_run(void **state)
{
    (void)state;
    enum { N = 1000 };
    int64_t idx[N];
    for (int k = 0; k < N; k++) idx[k] = k;
    dcr_payload_item_t d;
    t_one_item(idx, N, N, &d, true); /* whole tensor */
    assert_int_equal(d.location, DCR_LOCATION_RUN);
    assert_int_equal(d.first, 0);
    assert_int_equal(d.last, N - 1);
    t_one_item(idx + N - 7, 7, N, &d, false); /* run ending at the last element */
    assert_int_equal(d.location, DCR_LOCATION_RUN);
    assert_int_equal(d.first, N - 7);
    assert_int_equal(d.last, N - 1);
    int64_t tail[2] = {0, N - 1}; /* first and last element: one gap of N-1 */
    t_one_item(tail, 2, N, &d, false);
    assert_int_equal(d.location, DCR_LOCATION_GAPS);
    assert_int_equal(d.gap_bytes, 2);
}

/* A run handed as run_start must stay inside the tensor. */
static void test_run_start_bounds(void **state)
{
    (void)state;
    dcr_encoder_t *enc;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    int64_t shape[2] = {4, 8};
    uint16_t vals[32] = {0};
    dcr_codec_item_t c = {.name = "x",
                          .ndim = 2,
                          .shape = shape,
                          .dtype = DCR_DTYPE_BF16,
                          .encoding = DCR_ENCODING_OVERWRITE,
                          .count = 32,
                          .run_start = 0,
                          .values = vals};
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_OK);
    c.run_start = 1;
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_EINVAL);
    c.run_start = 31;
    c.count = 1;
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_OK);
    c.run_start = 32;
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_EINVAL);
    c.run_start = -1;
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_EINVAL);
    assert_int_equal(dcr_encoder_item_count(enc), 2);
    dcr_encoder_destroy(enc);
}

/* ---- known-answer vector (FORMAT.md section 7) -------------------------- */

static void test_known_answer(void **state)
{
    (void)state;
    for (int sh = 0; sh < 2; sh++) {
        uint8_t raw[127];
        size_t raw_len = t_example_body(raw, sh);
        t_hdr_t h = {
            .version = 1, .flags = (uint16_t)sh, .tau = 7, .id = 5, .owner = 2, .items = 1};
        size_t kat_len = 0;
        uint8_t *kat = t_wrap(&h, raw, raw_len, &kat_len);
        assert_non_null(kat);

        /* The decoder reads the hand-made bytes. */
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        assert_int_equal(dcr_payload_decode(p, kat, kat_len), DCR_OK);
        dcr_payload_item_t d;
        assert_int_equal(dcr_payload_item(p, 0, &d), DCR_OK);
        assert_string_equal(d.name, "w");
        assert_int_equal(d.count, 2);
        int64_t idx[2];
        uint16_t vals[2];
        assert_int_equal(dcr_payload_item_indices(p, 0, idx), DCR_OK);
        assert_int_equal(dcr_payload_item_values(p, 0, vals), DCR_OK);
        assert_int_equal(idx[0], 1);
        assert_int_equal(idx[1], 3);
        assert_int_equal(vals[0], 0x3F80);
        assert_int_equal(vals[1], 0xC000);

        /* The encoder writes the same bytes for the same records. */
        size_t len = 0;
        uint8_t *buf = t_encode_example(NULL, sh, &len);
        assert_non_null(buf);
        const uint8_t magic[4] = {0x44, 0x43, 0x52, 0x50};
        assert_memory_equal(buf, magic, 4);
        assert_int_equal(t_get(buf + T_H_VERSION, 2), 1);
        assert_int_equal(t_get(buf + T_H_FLAGS, 2), (uint64_t)sh);
        assert_int_equal(t_get(buf + T_H_TAU, 8), 7);
        assert_int_equal(t_get(buf + T_H_ID, 8), 5);
        assert_int_equal(t_get(buf + T_H_OWNER, 4), 2);
        assert_int_equal(t_get(buf + T_H_ITEMS, 4), 1);
        assert_int_equal(t_get(buf + T_H_RAW, 8), 127);
        assert_int_equal(t_get(buf + T_H_COMP, 8), len - T_HDR_SIZE);
        uint8_t digest[16];
        t_digest(buf, buf + T_HDR_SIZE, len - T_HDR_SIZE, NULL, digest);
        assert_memory_equal(buf + T_H_DIGEST, digest, 16);
        size_t enc_raw_len;
        uint8_t *enc_raw = t_unwrap(buf, len, &enc_raw_len, NULL);
        assert_non_null(enc_raw);
        assert_int_equal(enc_raw_len, raw_len);
        assert_memory_equal(enc_raw, raw, raw_len);
        /* Same zstd level on the same bytes: the whole payload should agree too. */
        assert_int_equal(len, kat_len);
        assert_memory_equal(buf, kat, len);
        free(enc_raw);
        free(buf);
        dcr_payload_destroy(p);
        free(kat);
    }
}

/* ---- encoder input checks ----------------------------------------------- */

static void test_encoder_rejects_bad_items(void **state)
{
    (void)state;
    dcr_encoder_t *enc;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    int64_t shape[2] = {10, 10};
    int64_t idx[3] = {1, 5, 9};
    uint32_t vals[3] = {1, 2, 3};
    const dcr_codec_item_t good = {.name = "a.b",
                                   .ndim = 2,
                                   .shape = shape,
                                   .dtype = DCR_DTYPE_FP32,
                                   .encoding = DCR_ENCODING_XOR,
                                   .count = 3,
                                   .indices = idx,
                                   .values = vals};
    char long_name[DCR_CODEC_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    int64_t neg_shape[2] = {10, -1};
    int64_t big_shape[3] = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    int64_t dup[3] = {1, 5, 5}, down[3] = {1, 5, 4}, neg[3] = {-1, 5, 9}, high[3] = {1, 5, 100};

    for (int k = 0;; k++) {
        dcr_codec_item_t c = good;
        switch (k) {
        case 0:
            c.name = NULL;
            break;
        case 1:
            c.name = "";
            break;
        case 2:
            c.name = "has space";
            break;
        case 3:
            c.name = "tab\there";
            break;
        case 4:
            c.name = long_name;
            break;
        case 5:
            c.ndim = DCR_MAX_DIMS + 1;
            break;
        case 6:
            c.ndim = -1;
            break;
        case 7:
            c.shape = neg_shape;
            break;
        case 8:
            c.shape = big_shape;
            c.ndim = 3;
            break;
        case 9:
            c.dtype = DCR_DTYPE_COUNT;
            break;
        case 10:
            c.encoding = DCR_ENCODING_COUNT;
            break;
        case 11:
            c.count = 0;
            break; /* empty items are not allowed */
        case 12:
            c.indices = dup;
            break;
        case 13:
            c.indices = down;
            break;
        case 14:
            c.indices = neg;
            break;
        case 15:
            c.indices = high;
            break; /* index >= numel */
        case 16:
            c.values = NULL;
            break;
        case 17:
            c.shape = NULL;
            break;
        default:
            goto done;
        }
        dcr_error_clear();
        assert_int_equal(dcr_encoder_add(enc, &c), DCR_EINVAL);
        assert_true(strlen(dcr_error_detail()) > 0);
        assert_int_equal(dcr_encoder_item_count(enc), 0);
        assert_int_equal(dcr_encoder_raw_len(enc), T_BODY_HDR);
    }
done:
    assert_int_equal(dcr_encoder_add(enc, &good), DCR_OK);
    const uint8_t *buf;
    size_t len;
    dcr_encode_params_t params = {.level = 1000};
    assert_int_equal(dcr_encoder_finish(enc, &params, &buf, &len), DCR_EINVAL);
    assert_int_equal(dcr_encoder_item_count(enc), 1); /* a failed finish keeps the items */
    params.level = DCR_CODEC_LEVEL_DEFAULT;
    assert_int_equal(dcr_encoder_finish(enc, &params, &buf, &len), DCR_OK);
    dcr_encoder_destroy(enc);
    dcr_encoder_destroy(NULL);
    dcr_payload_destroy(NULL);
}

/* ---- reuse ------------------------------------------------------------- */

static void test_reuse_and_reset(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, t_seed("test_reuse_and_reset"));
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    assert_null(dcr_payload_get_header(p));
    assert_int_equal(dcr_payload_item_count(p), 0);

    /* reset drops what was added. */
    t_item_t junk;
    t_random_item(&r, &junk, 0, DCR_DTYPE_BF16, DCR_ENCODING_XOR);
    dcr_codec_item_t c = t_codec_item(&junk);
    assert_int_equal(dcr_encoder_add(enc, &c), DCR_OK);
    dcr_encoder_reset(enc);
    assert_int_equal(dcr_encoder_item_count(enc), 0);
    t_item_free(&junk);

    /* Payloads of growing and shrinking size through the same handles. */
    for (int iter = 0; iter < 20; iter++) {
        size_t n = 1 + dcr_rng_below(&r, 6);
        t_item_t items[6];
        for (size_t k = 0; k < n; k++)
            t_random_item(&r, &items[k], (int)k, (dcr_dtype_t)dcr_rng_below(&r, DCR_DTYPE_COUNT),
                          DCR_ENCODING_XOR);
        dcr_encode_params_t params = {
            .tau = 9, .owner = 1, .payload_id = (uint64_t)iter, .level = 1, .shuffle = iter % 2};
        t_round_trip(enc, p, items, n, &params);
        for (size_t k = 0; k < n; k++) t_item_free(&items[k]);
    }
    /* A failed decode empties the handle. */
    uint8_t junk_bytes[10] = {0};
    assert_int_equal(dcr_payload_decode(p, junk_bytes, sizeof junk_bytes), DCR_EPAYLOAD);
    assert_null(dcr_payload_get_header(p));
    assert_int_equal(dcr_payload_item_count(p), 0);
    dcr_payload_item_t d;
    assert_int_equal(dcr_payload_item(p, 0, &d), DCR_EINVAL);
    int64_t idx[1];
    assert_int_equal(dcr_payload_item_indices(p, 0, idx), DCR_EINVAL);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
}

/* ---- shuffle ------------------------------------------------------------ */

static void test_shuffle(void **state)
{
    (void)state;
    dcr_rng_t r;
    dcr_rng_seed(&r, t_seed("test_shuffle"));
    const size_t widths[] = {1, 2, 3, 4, 8};
    for (size_t w = 0; w < 5; w++) {
        size_t width = widths[w];
        size_t n = dcr_rng_below(&r, 1000);
        uint8_t *src = malloc(n * width + 1), *mid = malloc(n * width + 1),
                *back = malloc(n * width + 1);
        for (size_t k = 0; k < n * width; k++) src[k] = (uint8_t)dcr_rng_u64(&r);
        dcr_codec_shuffle(mid, src, n, width);
        for (size_t i = 0; i < n; i++)
            for (size_t b = 0; b < width; b++) assert_int_equal(mid[b * n + i], src[i * width + b]);
        dcr_codec_unshuffle(back, mid, n, width);
        assert_memory_equal(back, src, n * width);
        free(src);
        free(mid);
        free(back);
    }
}

static void test_encoding_names(void **state)
{
    (void)state;
    assert_string_equal(dcr_encoding_name(DCR_ENCODING_XOR), "xor");
    assert_string_equal(dcr_encoding_name(DCR_ENCODING_OVERWRITE), "overwrite");
    assert_string_equal(dcr_encoding_name(DCR_ENCODING_COUNT), "invalid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype),
        cmocka_unit_test(test_round_trip_mixed_payloads),
        cmocka_unit_test(test_empty_payload),
        cmocka_unit_test(test_gap_widths),
        cmocka_unit_test(test_single_element),
        cmocka_unit_test(test_whole_tensor_and_end_run),
        cmocka_unit_test(test_run_start_bounds),
        cmocka_unit_test(test_known_answer),
        cmocka_unit_test(test_encoder_rejects_bad_items),
        cmocka_unit_test(test_reuse_and_reset),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_encoding_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
