/* ctest-labels: unit */
/* Payload format version 2 (FORMAT.md section 8): the known-answer body of
 * section 8.6 built byte by byte here and decoded; round trips of the
 * encoder's choice; the coded sizes against an independent model (the
 * Rice cost of every parameter summed from the gaps, and the cost of an
 * optimal prefix code computed here by a plain Huffman merge of the
 * frequencies); and the version 2 rejections. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "codec_test_util.h"
#include "dcr/codec.h"

#define T_I_VALCODING 91

/* ---- the known answer of FORMAT.md 8.6 ---- */

/* One bf16 XOR item "w" of shape [64]: indices 3, 5, 9, 10, 20 (gaps 2, 4,
 * 1, 10: Rice k = 1), values 0x0001 0x0001 0x0003 0x0001 0x0007 (Huffman:
 * 0x0001 "0", 0x0003 "10", 0x0007 "11"). */
static const uint8_t kat_body[140] = {
    /* body header: N = 2, L = 2, V = 16 */
    0x02, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0,
    /* item: count 5, first 3, loc off 0, val off 15 */
    0x05, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0, 0, 0, 0,
    0, 0, 0,
    /* dims [64, 0, 0, 0, 0, 0] */
    0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    /* name off 0, name len 1, ndim 1, dtype bf16, xor, RICE, k = 1, HUFFMAN, reserved */
    0, 0, 0, 0, 0x01, 0, 0x01, 0x00, 0x00, 0x02, 0x01, 0x01, 0, 0, 0, 0,
    /* names */
    0x77, 0x00,
    /* locations: Rice bits 0 1 | 1 0 1 | 0 0 | 1 1 1 1 0 1, LSB first */
    0x96, 0x17,
    /* values: table (max length 2; 1 code of length 1, 2 of length 2; symbols) */
    0x02, 0x01, 0, 0, 0, 0x02, 0, 0, 0, 0x01, 0x00, 0x03, 0x00, 0x07, 0x00,
    /* then the codes 0 0 10 0 11, LSB first */
    0x64};

static void test_known_answer(void **state)
{
    (void)state;
    t_hdr_t h = {.version = 2, .tau = 7, .id = 5, .owner = 2, .items = 1};
    size_t len = 0;
    uint8_t *buf = t_wrap(&h, kat_body, sizeof kat_body, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    assert_int_equal(dcr_payload_get_header(p)->version, 2);
    dcr_payload_item_t it;
    assert_int_equal(dcr_payload_item(p, 0, &it), DCR_OK);
    assert_string_equal(it.name, "w");
    assert_int_equal(it.location, DCR_LOCATION_RICE);
    assert_int_equal(it.rice_k, 1);
    assert_int_equal(it.value_coding, DCR_VALUES_HUFFMAN);
    assert_int_equal(it.location_bytes, 2);
    assert_int_equal(it.value_bytes, 1);
    int64_t idx[5], want_idx[5] = {3, 5, 9, 10, 20};
    uint16_t vals[5], want_vals[5] = {1, 1, 3, 1, 7};
    assert_int_equal(dcr_payload_item_indices(p, 0, idx), DCR_OK);
    assert_int_equal(dcr_payload_item_values(p, 0, vals), DCR_OK);
    assert_memory_equal(idx, want_idx, sizeof idx);
    assert_memory_equal(vals, want_vals, sizeof vals);
    /* The same body as version 1 is refused: RICE is not a version 1 type. */
    free(buf);
    h.version = 1;
    buf = t_wrap(&h, kat_body, sizeof kat_body, &len);
    assert_int_equal(dcr_payload_decode(p, buf, len), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_line(DCR_EPAYLOAD), "location type 2"));
    free(buf);
    dcr_payload_destroy(p);
}

#ifndef DCR_SOURCE_DIR
#define DCR_SOURCE_DIR "."
#endif

/* FORMAT.md 8.6 prints the same 140 bytes: the second code block after its
 * heading, as hex pairs. */
static void test_format_md_hex(void **state)
{
    (void)state;
    FILE *f = fopen(DCR_SOURCE_DIR "/engine/codec/FORMAT.md", "r");
    assert_non_null(f);
    static char text[1 << 17];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *at = strstr(text, "### 8.6 Known answer");
    assert_non_null(at);
    for (int fence = 0; fence < 3; fence++) {
        at = strstr(at, "```");
        assert_non_null(at);
        at += 3;
    }
    char *end = strstr(at, "```");
    assert_non_null(end);
    uint8_t got[sizeof kat_body];
    size_t k = 0;
    unsigned byte;
    int used;
    while (at < end && sscanf(at, " %2x%n", &byte, &used) == 1 && at + used <= end) {
        assert_true(k < sizeof got);
        got[k++] = (uint8_t)byte;
        at += used;
    }
    assert_int_equal(k, sizeof kat_body);
    assert_memory_equal(got, kat_body, sizeof kat_body);
}

/* One byte of the known answer changed; the decoder must refuse with needle. */
static void kat_patched(size_t at, uint8_t value, const char *needle)
{
    uint8_t body[sizeof kat_body];
    memcpy(body, kat_body, sizeof body);
    body[at] = value;
    t_hdr_t h = {.version = 2, .tau = 7, .id = 5, .owner = 2, .items = 1};
    size_t len = 0;
    uint8_t *buf = t_wrap(&h, body, sizeof body, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st != DCR_EPAYLOAD || !strstr(dcr_error_line(st), needle))
        fail_msg("byte %zu = 0x%02x: want a refusal with \"%s\", got %d: %s", at, value, needle,
                 (int)st, dcr_error_line(st));
    assert_int_equal(dcr_payload_item_count(p), 0);
    free(buf);
    dcr_payload_destroy(p);
}

static void test_rejects(void **state)
{
    (void)state;
    const size_t item = 24, names = 24 + 96, locs = names + 2, vals = locs + 2;
    kat_patched(locs + 1, 0x97, "padding");               /* a padding bit set */
    kat_patched(vals + 15, 0xE4, "padding");              /* a padding bit in the codes */
    kat_patched(vals + 11, 0x07, "huffman table");        /* a repeated symbol (7, 7) */
    kat_patched(vals + 0, 0x00, "huffman table");         /* max length 0 */
    kat_patched(vals + 5, 0x03, "huffman table");         /* Kraft sum above 1 */
    kat_patched(vals + 5, 0x01, "huffman table");         /* incomplete code of 2 symbols */
    kat_patched(item + 90, 63, "Rice parameter");         /* k above 62 */
    kat_patched(item + T_I_VALCODING, 2, "value coding"); /* unknown coding */
    kat_patched(item + 87, 2, "16-bit");                  /* huffman fp32 values */
    kat_patched(item + 92, 1, "reserved");                /* reserved byte */
    kat_patched(item + 0, 7, "huffman values");           /* 7 codes: the stream is too short */
    kat_patched(item + 24, 14, "value offset");           /* values do not follow the table */
    kat_patched(locs + 1, 0xFF, "rice gaps");             /* unary run past the section */
    kat_patched(item + 32, 20, "numel");                  /* index 20 outside [0, 20) */
}

/* A reader budget also bounds what coded segments decode to. */
static void test_budget(void **state)
{
    (void)state;
    t_hdr_t h = {.version = 2, .tau = 7, .id = 5, .owner = 2, .items = 1};
    size_t len = 0;
    uint8_t *buf = t_wrap(&h, kat_body, sizeof kat_body, &len);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    /* 140 body bytes + 5 x 2 value bytes + 4 x 8 gap bytes = 182. */
    dcr_payload_policy_t pol = {.max_raw = 181};
    assert_int_equal(dcr_payload_decode_with(p, buf, len, &pol), DCR_EPAYLOAD);
    assert_non_null(strstr(dcr_error_line(DCR_EPAYLOAD), "limit"));
    pol.max_raw = 182;
    assert_int_equal(dcr_payload_decode_with(p, buf, len, &pol), DCR_OK);
    free(buf);
    dcr_payload_destroy(p);
}

/* ---- round trips and the size model ---- */

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Skewed masks as small real updates make them: 0x1 most often, then 0x3,
 * 0x7, ... (a geometric choice of the run of low bits), sometimes a sign
 * or exponent bit. */
static uint16_t skewed_mask(void)
{
    unsigned k = 1;
    while (k < 12 && (rng() & 1)) k++;
    uint16_t m = (uint16_t)((1u << k) - 1);
    if (rng() % 64 == 0) m ^= 0x8000;
    return m;
}

/* Sorted distinct indices with random gaps of mean about 1.5 x `mean`. */
static size_t spread_indices(int64_t *idx, size_t n, int64_t numel, unsigned mean)
{
    size_t c = 0;
    int64_t at = (int64_t)(rng() % mean);
    while (c < n && at < numel) {
        idx[c++] = at;
        at += 1 + (int64_t)(rng() % (2 * mean)) * (int64_t)(rng() % 2 ? 1 : 0) +
              (int64_t)(rng() % mean);
    }
    return c;
}

/* The fewest Rice bits over every parameter, from the gaps alone. */
static uint64_t rice_model_bits(const int64_t *idx, size_t n)
{
    uint64_t best = UINT64_MAX;
    for (unsigned k = 0; k <= 40; k++) {
        uint64_t bits = 0;
        for (size_t i = 1; i < n; i++) bits += ((uint64_t)(idx[i] - idx[i - 1] - 1) >> k) + 1 + k;
        if (bits < best) best = bits;
    }
    return best;
}

/* The cost in bits of an optimal prefix code of the frequencies: merging
 * the two smallest weights until one is left adds each merged weight once. */
static uint64_t huffman_model_bits(const uint64_t *freq_in, size_t n)
{
    uint64_t *w = malloc(n * sizeof *w);
    memcpy(w, freq_in, n * sizeof *w);
    uint64_t cost = n == 1 ? w[0] : 0;
    while (n > 1) {
        size_t a = 0, b = 1;
        if (w[b] < w[a]) a = 1, b = 0;
        for (size_t i = 2; i < n; i++) {
            if (w[i] < w[a])
                b = a, a = i;
            else if (w[i] < w[b])
                b = i;
        }
        uint64_t m = w[a] + w[b];
        cost += m;
        w[a] = m;
        w[b] = w[--n];
    }
    free(w);
    return cost;
}

static void test_round_trip_and_sizes(void **state)
{
    (void)state;
    rng_state = t_seed("test_round_trip_and_sizes") | 1;
    enum { N = 4000, NUMEL = 1 << 20 };
    int64_t *idx = malloc(N * sizeof *idx);
    uint16_t *vals = malloc(N * sizeof *vals);
    int64_t shape[2] = {1024, 1024};
    size_t n = spread_indices(idx, N, NUMEL, 140);
    for (size_t i = 0; i < n; i++) vals[i] = skewed_mask();
    /* An overwrite item and an fp32 XOR item stay raw. */
    int64_t ow_idx[3] = {1, 2, 500};
    uint16_t ow_vals[3] = {0x3f80, 0x4000, 0xc123};
    uint32_t f_vals[3] = {1, 3, 7};
    dcr_codec_item_t items[3] = {
        {"layer.w", 2, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, n, idx, 0, vals},
        {"embed", 2, shape, DCR_DTYPE_BF16, DCR_ENCODING_OVERWRITE, 3, ow_idx, 0, ow_vals},
        {"bias", 2, shape, DCR_DTYPE_FP32, DCR_ENCODING_XOR, 3, ow_idx, 0, f_vals},
    };
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        dcr_encoder_t *enc;
        assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
        for (int i = 0; i < 3; i++) assert_int_equal(dcr_encoder_add(enc, &items[i]), DCR_OK);
        size_t v1_raw = dcr_encoder_raw_len(enc);
        dcr_encode_params_t par = {
            .tau = 1, .owner = 0, .payload_id = 9, .level = 1, .shuffle = shuffle};
        const uint8_t *buf;
        size_t len;
        assert_int_equal(dcr_encoder_finish(enc, &par, &buf, &len), DCR_OK);
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
        const dcr_payload_header_t *h = dcr_payload_get_header(p);
        assert_int_equal(h->version, 2);
        assert_true(h->raw_len < v1_raw);
        for (int i = 0; i < 3; i++) {
            dcr_payload_item_t it;
            assert_int_equal(dcr_payload_item(p, (size_t)i, &it), DCR_OK);
            assert_int_equal(it.count, items[i].count);
            int64_t *got_idx = malloc(it.count * sizeof *got_idx);
            uint8_t *got_vals = malloc(it.count * 4);
            assert_int_equal(dcr_payload_item_indices(p, (size_t)i, got_idx), DCR_OK);
            assert_int_equal(dcr_payload_item_values(p, (size_t)i, got_vals), DCR_OK);
            assert_memory_equal(got_idx, items[i].indices, it.count * sizeof *got_idx);
            assert_memory_equal(got_vals, items[i].values, it.count * dcr_dtype_size(it.dtype));
            free(got_idx);
            free(got_vals);
            if (i > 0) assert_int_equal(it.value_coding, DCR_VALUES_RAW);
        }
        /* The size model: Rice bytes = ceil(min over k of the Rice bits /
         * 8); the one Huffman item's bytes = ceil(optimal code bits / 8),
         * since an optimal prefix code's cost does not depend on the tree. */
        dcr_payload_item_t it;
        assert_int_equal(dcr_payload_item(p, 0, &it), DCR_OK);
        assert_int_equal(it.location, DCR_LOCATION_RICE);
        assert_int_equal(it.value_coding, DCR_VALUES_HUFFMAN);
        uint64_t rice = rice_model_bits(idx, n);
        assert_int_equal(it.location_bytes, (rice + 7) / 8);
        uint64_t *freq = calloc(65536, sizeof *freq), *f = calloc(65536, sizeof *f);
        for (size_t i = 0; i < n; i++) freq[vals[i]]++;
        size_t nsym = 0;
        for (size_t s = 0; s < 65536; s++)
            if (freq[s]) f[nsym++] = freq[s];
        uint64_t huff = huffman_model_bits(f, nsym);
        assert_int_equal(it.value_bytes, (huff + 7) / 8);
        print_message("  %zu records: rice %zu B (model %llu bits), huffman %zu B (model %llu "
                      "bits, %zu symbols), body %llu B (v1 %zu B)\n",
                      n, it.location_bytes, (unsigned long long)rice, it.value_bytes,
                      (unsigned long long)huff, nsym, (unsigned long long)h->raw_len, v1_raw);
        free(freq);
        free(f);
        /* Version 1 on request: the same records, version 1 bytes. */
        assert_int_equal(dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1), DCR_OK);
        for (int i = 0; i < 3; i++) assert_int_equal(dcr_encoder_add(enc, &items[i]), DCR_OK);
        assert_int_equal(dcr_encoder_finish(enc, &par, &buf, &len), DCR_OK);
        assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
        assert_int_equal(dcr_payload_get_header(p)->version, 1);
        assert_int_equal(dcr_payload_get_header(p)->raw_len, v1_raw);
        assert_int_equal(dcr_encoder_set_max_version(enc, 3), DCR_EINVAL);
        dcr_payload_destroy(p);
        dcr_encoder_destroy(enc);
    }
    free(idx);
    free(vals);
}

/* One item encoded into a payload and decoded back (item 0 in it). */
typedef struct round_trip {
    dcr_encoder_t *enc; /* owns the encoded bytes the payload was decoded from */
    dcr_payload_t *p;
    dcr_payload_item_t it;
} round_trip_t;

static void round_trip_one(const dcr_codec_item_t *item, uint64_t payload_id, round_trip_t *rt)
{
    assert_int_equal(dcr_encoder_create(&rt->enc), DCR_OK);
    assert_int_equal(dcr_encoder_add(rt->enc, item), DCR_OK);
    dcr_encode_params_t par = {.tau = 1, .payload_id = payload_id, .level = 1};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(rt->enc, &par, &buf, &len), DCR_OK);
    assert_int_equal(dcr_payload_create(&rt->p), DCR_OK);
    assert_int_equal(dcr_payload_decode(rt->p, buf, len), DCR_OK);
    assert_int_equal(dcr_payload_item(rt->p, 0, &rt->it), DCR_OK);
}

static void round_trip_done(round_trip_t *rt)
{
    dcr_payload_destroy(rt->p);
    dcr_encoder_destroy(rt->enc);
}

/* The decoder keeps Rice gaps in the narrowest word that holds them and
 * widens what it has stored when a wider gap comes: gaps of 1 byte for
 * several of its 256-gap chunks, then 2-, 4- and 8-byte gaps late in a
 * chunk, must all come back exactly, in every chunk position. */
static void test_rice_gaps_widen(void **state)
{
    (void)state;
    enum { N = 3000 };
    int64_t *idx = malloc(N * sizeof *idx);
    uint16_t *vals = malloc(N * sizeof *vals);
    int64_t shape[2] = {(int64_t)1 << 24, (int64_t)1 << 24}; /* numel 2^48 */
    const struct {
        size_t at;
        int64_t gap;
    } wide[] = {{700, 300}, {1100, 70000}, {1101, 200}, {2047, (int64_t)1 << 33}, {2900, 5}};
    rng_state = 0x243f6a8885a308d3ull;
    int64_t at = 0;
    for (size_t i = 0, w = 0; i < N; i++) {
        int64_t gap = 1 + (int64_t)(rng() % 60);
        if (w < sizeof wide / sizeof wide[0] && wide[w].at == i) gap = wide[w++].gap;
        at += gap;
        idx[i] = at;
        vals[i] = (uint16_t)(1u << (rng() % 3)) - 1u;
    }
    dcr_codec_item_t item = {"w", 2, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, N, idx, 0, vals};
    round_trip_t rt;
    round_trip_one(&item, 3, &rt);
    assert_int_equal(rt.it.location, DCR_LOCATION_RICE);
    assert_int_equal(rt.it.last, idx[N - 1]);
    int64_t *got = malloc(N * sizeof *got);
    assert_int_equal(dcr_payload_item_indices(rt.p, 0, got), DCR_OK);
    assert_memory_equal(got, idx, N * sizeof *got);
    round_trip_done(&rt);
    free(got);
    free(idx);
    free(vals);
}

/* Codes longer than the decoder's 11-bit lookup (up to the 20-bit limit):
 * symbol i of 30 occurs 2^(17 - i) times (at least once); an optimal code
 * gives symbol i < 17 length i + 1 and the 13 singletons lengths 21-22, so
 * the length limit applies and codes of 12-20 bits occur; every value comes
 * back exactly. */
static void test_huffman_long_codes(void **state)
{
    (void)state;
    enum { NSYM = 30 };
    size_t n = 0;
    for (int i = 0; i < NSYM; i++) n += i < 17 ? (size_t)1 << (17 - i) : 1;
    int64_t *idx = malloc(n * sizeof *idx);
    uint16_t *vals = malloc(n * sizeof *vals);
    size_t at = 0;
    for (int i = 0; i < NSYM; i++)
        for (size_t j = 0; j < (i < 17 ? (size_t)1 << (17 - i) : 1); j++)
            vals[at++] = (uint16_t)(0x100 + 7 * i);
    rng_state = 0x13198a2e03707344ull;
    for (size_t i = n; i-- > 1;) { /* shuffled, so long codes fall everywhere */
        size_t j = (size_t)(rng() % (i + 1));
        uint16_t t = vals[i];
        vals[i] = vals[j];
        vals[j] = t;
    }
    for (size_t i = 0; i < n; i++) idx[i] = 3 * (int64_t)i + (int64_t)(rng() % 2);
    int64_t shape[1] = {3 * (int64_t)n + 2};
    dcr_codec_item_t item = {"w", 1, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, n, idx, 0, vals};
    round_trip_t rt;
    round_trip_one(&item, 4, &rt);
    assert_int_equal(rt.it.value_coding, DCR_VALUES_HUFFMAN);
    uint16_t *got = malloc(n * sizeof *got);
    assert_int_equal(dcr_payload_item_values(rt.p, 0, got), DCR_OK);
    assert_memory_equal(got, vals, n * sizeof *got);
    round_trip_done(&rt);
    free(got);
    free(idx);
    free(vals);
}

/* Nothing worth coding (a run, uniform random masks): version 1 bytes. */
static void test_stays_v1(void **state)
{
    (void)state;
    rng_state = 0x9e3779b97f4a7c15ull;
    enum { N = 600 };
    int64_t shape[1] = {N};
    uint16_t vals[N];
    for (size_t i = 0; i < N; i++) vals[i] = (uint16_t)rng();
    dcr_codec_item_t run = {"r", 1, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, N, NULL, 0, vals};
    dcr_encoder_t *enc;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_add(enc, &run), DCR_OK);
    dcr_encode_params_t par = {.tau = 1, .payload_id = 1, .level = 1};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(enc, &par, &buf, &len), DCR_OK);
    assert_int_equal(t_get(buf + T_H_VERSION, 2), 1);
    dcr_encoder_destroy(enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answer),
        cmocka_unit_test(test_format_md_hex),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_round_trip_and_sizes),
        cmocka_unit_test(test_rice_gaps_widen),
        cmocka_unit_test(test_huffman_long_codes),
        cmocka_unit_test(test_stays_v1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
