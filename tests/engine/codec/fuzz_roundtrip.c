/* ctest-labels: fuzz */
/* libFuzzer round trip of the payload codec: decode(encode(x)) == x.
 *
 * The input describes a payload: flags (shuffle on or off, keyed or not, the
 * zstd level), then up to 12 items, each with a name, dtype, encoding, shape
 * and records. Records come in every form the encoder distinguishes: a run
 * given without indices, indices that happen to be contiguous, one record,
 * and gapped indices whose largest gap needs 1, 2, 4 or 8 bytes (the gap
 * class is drawn per item, and shapes are large enough to hold 8-byte gaps,
 * which costs nothing since only records are stored). Values are input
 * bytes. The target encodes, decodes under the matching key, and checks
 * every header field and every item's name, shape, dtype, encoding,
 * location choice (RUN exactly for contiguous indices, the smallest gap
 * word otherwise, or in version 2 Rice codes), indices and value bytes
 * against what it handed in. Header bit 15 keeps the encoder at version 1
 * (the body is then exactly dcr_encoder_raw_len bytes); otherwise version
 * 2 may code segments, and bit 14 makes 16-bit values few and skewed
 * masks (0x1, 0x3, 0x7, ...) so that the Huffman path is taken. Any
 * difference aborts. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/codec.h"

#define MAX_ITEMS   12
#define MAX_RECORDS 300

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader_t;

/* Input bytes, little-endian; zeros once the input is used up, so every
 * input describes some payload. */
static uint64_t take(reader_t *r, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        uint8_t b = 0;
        if (r->n > 0) {
            b = *r->p++;
            r->n--;
        }
        v |= (uint64_t)b << (8 * i);
    }
    return v;
}

static void check(bool ok)
{
    if (!ok) abort();
}

typedef struct item {
    char name[40];
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
    int64_t numel;
    dcr_dtype_t dtype;
    dcr_encoding_t encoding;
    size_t count;
    bool as_run; /* handed over without indices */
    int64_t idx[MAX_RECORDS];
    uint8_t values[MAX_RECORDS * 4];
} item_t;

/* Gap classes: the largest gap of an item needs 1, 2, 4 or 8 bytes. */
static const uint64_t gap_max[4] = {0xFF, 0xFFFF, 0xFFFFFFFFull, (uint64_t)1 << 40};
static const uint64_t gap_min[4] = {1, 0x100, 0x10000, (uint64_t)1 << 32};

static void make_shape(reader_t *r, item_t *it, int gap_class)
{
    /* Large enough for MAX_RECORDS gaps of the class, split over ndim dims. */
    it->ndim = 1 + (int)(take(r, 1) % 3);
    uint64_t need = (uint64_t)MAX_RECORDS * gap_max[gap_class] + 1000;
    it->shape[0] = (int64_t)need;
    for (int d = 1; d < it->ndim; d++) it->shape[d] = 1 + (int64_t)(take(r, 1) % 4);
    it->numel = 1;
    for (int d = 0; d < it->ndim; d++) it->numel *= it->shape[d];
}

static void make_item(reader_t *r, item_t *it, int k)
{
    memset(it, 0, sizeof *it);
    uint64_t tag = take(r, 2);
    int form = (int)(tag & 3); /* 0 run, 1 contiguous indices, 2 gaps, 3 one record */
    int gap_class = (int)((tag >> 2) & 3);
    it->dtype = (dcr_dtype_t)((tag >> 4) % DCR_DTYPE_COUNT);
    it->encoding = (dcr_encoding_t)((tag >> 6) & 1);
    size_t nlen = 1 + (size_t)((tag >> 7) % 24);
    for (size_t c = 0; c < nlen; c++) it->name[c] = (char)(0x21 + take(r, 1) % 94);
    it->name[0] = (char)('a' + k % 26); /* names may repeat; keep one fixed byte anyway */
    if (form == 0 || form == 1) {
        it->ndim = (int)(take(r, 1) % 4);
        it->numel = 1;
        for (int d = 0; d < it->ndim; d++) {
            it->shape[d] = 1 + (int64_t)(take(r, 1) % 40);
            it->numel *= it->shape[d];
        }
        size_t max = it->numel < MAX_RECORDS ? (size_t)it->numel : MAX_RECORDS;
        it->count = 1 + (size_t)(take(r, 2) % max);
        int64_t start = (int64_t)(take(r, 2) % (uint64_t)(it->numel - (int64_t)it->count + 1));
        for (size_t j = 0; j < it->count; j++) it->idx[j] = start + (int64_t)j;
        it->as_run = form == 0;
    } else {
        make_shape(r, it, gap_class);
        it->count = form == 3 ? 1 : 2 + (size_t)(take(r, 2) % (MAX_RECORDS - 1));
        int64_t i = (int64_t)(take(r, 4) % 1000);
        it->idx[0] = i;
        /* One gap of the class's full range makes it the largest; the rest
         * are anything from 1 up to it. */
        size_t big = it->count > 1 ? 1 + (size_t)(take(r, 2) % (it->count - 1)) : 0;
        for (size_t j = 1; j < it->count; j++) {
            uint64_t g = take(r, 1) % 3 == 0 ? 1 : 1 + take(r, 8) % gap_max[gap_class];
            if (j == big)
                g = gap_min[gap_class] + take(r, 8) % (gap_max[gap_class] - gap_min[gap_class] + 1);
            i += (int64_t)g;
            it->idx[j] = i;
        }
    }
    size_t vb = it->count * dcr_dtype_size(it->dtype);
    for (size_t b = 0; b < vb; b++) it->values[b] = (uint8_t)take(r, 1);
}

/* Skewed 16-bit masks from the input's value bytes, as small real updates make. */
static void skew_values(item_t *it)
{
    if (dcr_dtype_size(it->dtype) != 2) return;
    for (size_t j = 0; j < it->count; j++) {
        uint16_t m = (uint16_t)((1u << (1 + it->values[2 * j] % 7)) - 1);
        memcpy(it->values + 2 * j, &m, 2);
    }
}

static void check_item(const dcr_payload_t *p, size_t k, const item_t *it, int64_t *scratch,
                       bool v1)
{
    dcr_payload_item_t d;
    check(dcr_payload_item(p, k, &d) == DCR_OK);
    check(strcmp(d.name, it->name) == 0);
    check(d.ndim == it->ndim && d.numel == it->numel);
    for (int j = 0; j < DCR_MAX_DIMS; j++) check(d.shape[j] == (j < it->ndim ? it->shape[j] : 0));
    check(d.dtype == it->dtype && d.encoding == it->encoding && d.count == it->count);
    check(d.first == it->idx[0] && d.last == it->idx[it->count - 1]);
    uint64_t maxgap = 0;
    for (size_t j = 1; j < it->count; j++) {
        uint64_t g = (uint64_t)(it->idx[j] - it->idx[j - 1]);
        if (g > maxgap) maxgap = g;
    }
    bool contiguous = (uint64_t)(it->idx[it->count - 1] - it->idx[0]) == it->count - 1;
    if (contiguous) {
        check(d.location == DCR_LOCATION_RUN && d.gap_bytes == 0);
    } else {
        unsigned w = maxgap <= 0xFF ? 1 : maxgap <= 0xFFFF ? 2 : maxgap <= 0xFFFFFFFFull ? 4 : 8;
        check((d.location == DCR_LOCATION_GAPS && d.gap_bytes == w) ||
              (!v1 && d.location == DCR_LOCATION_RICE && d.location_bytes < (it->count - 1) * w));
    }
    check(dcr_payload_item_indices(p, k, scratch) == DCR_OK);
    check(memcmp(scratch, it->idx, it->count * sizeof(int64_t)) == 0);
    uint8_t vals[MAX_RECORDS * 4];
    check(dcr_payload_item_values(p, k, vals) == DCR_OK);
    check(memcmp(vals, it->values, it->count * dcr_dtype_size(it->dtype)) == 0);
    check(memcmp(d.values, it->values, it->count * dcr_dtype_size(it->dtype)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dcr_encoder_t *enc;
    static dcr_payload_t *dec;
    static item_t items[MAX_ITEMS];
    static int64_t scratch[MAX_RECORDS];
    if (enc == NULL && dcr_encoder_create(&enc) != DCR_OK) abort();
    if (dec == NULL && dcr_payload_create(&dec) != DCR_OK) abort();
    reader_t r = {data, size};
    uint64_t head = take(&r, 2);
    bool shuffle = head & 1, keyed = (head >> 1) & 1, v1 = (head >> 15) & 1,
         skew = (head >> 14) & 1;
    check(dcr_encoder_set_max_version(enc, v1 ? DCR_CODEC_VERSION_1 : DCR_CODEC_VERSION_2) ==
          DCR_OK);
    int level = (int)((head >> 2) % 4); /* 0 is zstd's default level */
    size_t nitems = (size_t)((head >> 4) % (MAX_ITEMS + 1));
    dcr_payload_key_t key = {.set = keyed};
    for (int b = 0; keyed && b < DCR_CODEC_KEY_SIZE; b++) key.bytes[b] = (uint8_t)take(&r, 1);
    dcr_encoder_set_key(enc, &key);

    for (size_t k = 0; k < nitems; k++) {
        item_t *it = &items[k];
        make_item(&r, it, (int)k);
        if (skew) skew_values(it);
        dcr_codec_item_t ci = {.name = it->name,
                               .ndim = it->ndim,
                               .shape = it->shape,
                               .dtype = it->dtype,
                               .encoding = it->encoding,
                               .count = it->count,
                               .indices = it->as_run ? NULL : it->idx,
                               .run_start = it->idx[0],
                               .values = it->values};
        check(dcr_encoder_add(enc, &ci) == DCR_OK);
    }
    size_t raw_len = dcr_encoder_raw_len(enc);
    dcr_encode_params_t params = {.tau = take(&r, 8),
                                  .owner = (uint32_t)take(&r, 4),
                                  .payload_id = take(&r, 8),
                                  .level = level,
                                  .shuffle = shuffle};
    const uint8_t *buf;
    size_t len;
    check(dcr_encoder_finish(enc, &params, &buf, &len) == DCR_OK);

    dcr_payload_policy_t pol = {.key = &key};
    if (dcr_payload_decode_with(dec, buf, len, &pol) != DCR_OK) abort();
    const dcr_payload_header_t *h = dcr_payload_get_header(dec);
    check(h->tau == params.tau && h->owner == params.owner && h->payload_id == params.payload_id);
    check(h->flags ==
          ((shuffle ? DCR_CODEC_FLAG_SHUFFLE : 0) | (keyed ? DCR_CODEC_FLAG_KEYED : 0)));
    check(h->version == DCR_CODEC_VERSION_1 || !v1);
    check((h->version == DCR_CODEC_VERSION_1 ? h->raw_len == raw_len : h->raw_len < raw_len) &&
          h->compressed_len + DCR_CODEC_HEADER_SIZE == len);
    check(dcr_payload_item_count(dec) == nitems);
    for (size_t k = 0; k < nitems; k++) check_item(dec, k, &items[k], scratch, v1);
    /* The other key configuration refuses it. */
    dcr_payload_key_t other = {.set = !keyed};
    memset(other.bytes, 0x5A, sizeof other.bytes);
    dcr_payload_policy_t wrong = {.key = &other};
    dcr_payload_header_t hh;
    check(dcr_payload_verify(buf, len, &wrong, &hh) == DCR_EDIGEST);
    return 0;
}
