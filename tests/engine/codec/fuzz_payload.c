/* ctest-labels: fuzz */
/* libFuzzer target for the payload decoder.
 *
 * Random bytes almost never carry a valid BLAKE2b digest, so feeding them to
 * the decoder as-is would only exercise the header checks. The first input
 * byte therefore picks a mode:
 *   bit 0 clear: the rest is a whole payload, decoded as-is (header, digest);
 *   bit 0 set:   the rest (after one item-count byte) is a raw body, which
 *                this target compresses and wraps in a valid header and
 *                digest, with the shuffle flag from bit 1 and format version
 *                2 when bit 2 is set (else 1), so that the fuzzer reaches
 *                the item-table, tiling, shuffle and index checks and
 *                version 2's Huffman table, Huffman and Rice streams.
 * On success every accessor is called, so sanitizers see every read.
 * Seed inputs of both kinds: tests/engine/codec/fuzz_corpus/. */
#include <blake2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "dcr/codec.h"

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Header and digest per FORMAT.md section 1. */
static uint8_t *wrap(const uint8_t *raw, size_t raw_len, uint32_t items, uint16_t flags,
                     uint16_t version, size_t *len_p)
{
    size_t cap = ZSTD_compressBound(raw_len);
    uint8_t *out = malloc(64 + cap);
    if (out == NULL) return NULL;
    size_t clen = ZSTD_compress(out + 64, cap, raw, raw_len, 1);
    if (ZSTD_isError(clen)) {
        free(out);
        return NULL;
    }
    memcpy(out, "DCRP", 4);
    put_le(out + 4, version, 2);
    put_le(out + 6, flags, 2);
    put_le(out + 8, 11, 8);  /* tau */
    put_le(out + 16, 13, 8); /* payload id */
    put_le(out + 24, 3, 4);  /* owner */
    put_le(out + 28, items, 4);
    put_le(out + 32, raw_len, 8);
    put_le(out + 40, clen, 8);
    blake2b_state s;
    blake2b_init(&s, 16);
    blake2b_update(&s, out, 48);
    blake2b_update(&s, out + 64, clen);
    blake2b_final(&s, out + 48, 16);
    *len_p = 64 + clen;
    return out;
}

static void use_all(const dcr_payload_t *p)
{
    size_t n = dcr_payload_item_count(p);
    for (size_t i = 0; i < n; i++) {
        dcr_payload_item_t it;
        if (dcr_payload_item(p, i, &it) != DCR_OK) abort();
        int64_t *idx = malloc(it.count * sizeof *idx);
        uint8_t *vals = malloc(it.count * dcr_dtype_size(it.dtype));
        if (idx == NULL || vals == NULL) abort();
        if (dcr_payload_item_indices(p, i, idx) != DCR_OK) abort();
        if (dcr_payload_item_values(p, i, vals) != DCR_OK) abort();
        /* The decoder promised these; a violation is a bug worth a crash. */
        if (idx[0] != it.first || idx[it.count - 1] != it.last || it.last >= it.numel) abort();
        for (size_t k = 1; k < it.count; k++)
            if (idx[k] <= idx[k - 1]) abort();
        if (strlen(it.name) == 0 || strlen(it.name) > DCR_CODEC_NAME_MAX) abort();
        free(vals);
        free(idx);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static dcr_payload_t *p; /* reused, as a receiver's staging slot is */
    if (p == NULL && dcr_payload_create(&p) != DCR_OK) abort();
    uint8_t mode = data[0];
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    uint8_t *wrapped = NULL;
    if (mode & 1) {
        if (len < 1) return 0;
        wrapped = wrap(buf + 1, len - 1, buf[0], (mode >> 1) & 1, (mode >> 2) & 1 ? 2 : 1, &len);
        if (wrapped == NULL) return 0;
        buf = wrapped;
    }
    dcr_payload_header_t h;
    dcr_status_t peek = dcr_payload_peek(buf, len, true, &h);
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st == DCR_OK) {
        if (peek != DCR_OK) abort(); /* decode accepted what peek refused */
        use_all(p);
    } else if (st != DCR_EPAYLOAD && st != DCR_EDIGEST && st != DCR_ENOMEM) {
        abort();
    }
    free(wrapped);
    return 0;
}
