/* Helpers shared by the codec tests. The layout constants here are copied
 * from engine/codec/FORMAT.md, not from the codec's internal header, so that
 * the tests check the implementation against the document. */
#ifndef DCR_TEST_CODEC_UTIL_H
#define DCR_TEST_CODEC_UTIL_H

#include <blake2.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "dcr/codec.h"
#include "dcr/rng.h"
#include "testkit.h"

/* FORMAT.md section 1. */
#define T_HDR_SIZE  64
#define T_H_VERSION 4
#define T_H_FLAGS   6
#define T_H_TAU     8
#define T_H_ID      16
#define T_H_OWNER   24
#define T_H_ITEMS   28
#define T_H_RAW     32
#define T_H_COMP    40
#define T_H_DIGEST  48
/* FORMAT.md sections 2 and 3. */
#define T_BODY_HDR   24
#define T_ITEM_SIZE  96
#define T_I_COUNT    0
#define T_I_FIRST    8
#define T_I_LOC_OFF  16
#define T_I_VAL_OFF  24
#define T_I_DIMS     32
#define T_I_NAME_OFF 80
#define T_I_NAME_LEN 84
#define T_I_NDIM     86
#define T_I_DTYPE    87
#define T_I_ENC      88
#define T_I_LOCTYPE  89
#define T_I_GAPB     90
#define T_I_RESERVED 91

static inline void t_put(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t t_get(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct t_hdr {
    uint16_t version, flags;
    uint64_t tau, id;
    uint32_t owner, items;
} t_hdr_t;

/* Builds a whole payload from a raw body exactly as FORMAT.md says: zstd
 * level 1 via the library's simple API, header by hand, digest via libb2.
 * Returns a malloc'd buffer; *len_p gets its size. */
static inline uint8_t *t_wrap_compressed(const t_hdr_t *h, uint64_t raw_len, const uint8_t *comp,
                                         size_t clen, size_t *len_p)
{
    uint8_t *out = calloc(1, T_HDR_SIZE + clen + 1);
    memcpy(out, "DCRP", 4);
    t_put(out + T_H_VERSION, h->version, 2);
    t_put(out + T_H_FLAGS, h->flags, 2);
    t_put(out + T_H_TAU, h->tau, 8);
    t_put(out + T_H_ID, h->id, 8);
    t_put(out + T_H_OWNER, h->owner, 4);
    t_put(out + T_H_ITEMS, h->items, 4);
    t_put(out + T_H_RAW, raw_len, 8);
    t_put(out + T_H_COMP, clen, 8);
    if (clen) memcpy(out + T_HDR_SIZE, comp, clen);
    t_digest(out, out + T_HDR_SIZE, clen, NULL, out + T_H_DIGEST);
    *len_p = T_HDR_SIZE + clen;
    return out;
}

static inline uint8_t *t_wrap(const t_hdr_t *h, const uint8_t *raw, size_t raw_len, size_t *len_p)
{
    size_t cap = ZSTD_compressBound(raw_len);
    uint8_t *comp = malloc(cap);
    size_t clen = ZSTD_compress(comp, cap, raw, raw_len, 1);
    if (ZSTD_isError(clen)) {
        free(comp);
        return NULL;
    }
    uint8_t *out = t_wrap_compressed(h, raw_len, comp, clen, len_p);
    free(comp);
    return out;
}

/* The decompressed body of a payload (no validation beyond zstd's own). */
static inline uint8_t *t_unwrap(const uint8_t *buf, size_t len, size_t *raw_len_p, t_hdr_t *h)
{
    uint64_t raw_len = t_get(buf + T_H_RAW, 8);
    uint8_t *raw = malloc(raw_len + 1);
    size_t n = ZSTD_decompress(raw, raw_len, buf + T_HDR_SIZE, len - T_HDR_SIZE);
    if (ZSTD_isError(n) || n != raw_len) {
        free(raw);
        return NULL;
    }
    if (h) {
        h->version = (uint16_t)t_get(buf + T_H_VERSION, 2);
        h->flags = (uint16_t)t_get(buf + T_H_FLAGS, 2);
        h->tau = t_get(buf + T_H_TAU, 8);
        h->id = t_get(buf + T_H_ID, 8);
        h->owner = (uint32_t)t_get(buf + T_H_OWNER, 4);
        h->items = (uint32_t)t_get(buf + T_H_ITEMS, 4);
    }
    *raw_len_p = raw_len;
    return raw;
}

/* The example body, byte by byte from FORMAT.md; values shuffled or not. */
static inline size_t t_example_body(uint8_t *raw, bool shuffled)
{
    memset(raw, 0, 127);
    t_put(raw + 0, 2, 8);  /* N */
    t_put(raw + 8, 1, 8);  /* L */
    t_put(raw + 16, 4, 8); /* V */
    uint8_t *e = raw + T_BODY_HDR;
    t_put(e + T_I_COUNT, 2, 8);
    t_put(e + T_I_FIRST, 1, 8);
    t_put(e + T_I_LOC_OFF, 0, 8);
    t_put(e + T_I_VAL_OFF, 0, 8);
    t_put(e + T_I_DIMS, 4, 8);
    t_put(e + T_I_NAME_OFF, 0, 4);
    t_put(e + T_I_NAME_LEN, 1, 2);
    e[T_I_NDIM] = 1;
    e[T_I_DTYPE] = 0;
    e[T_I_ENC] = 1;
    e[T_I_LOCTYPE] = 1;
    e[T_I_GAPB] = 1;
    uint8_t *s = raw + T_BODY_HDR + T_ITEM_SIZE;
    s[0] = 'w';
    s[1] = 0;
    s[2] = 2; /* gap 3 - 1 */
    const uint8_t plain[4] = {0x80, 0x3F, 0x00, 0xC0};
    const uint8_t planes[4] = {0x80, 0x00, 0x3F, 0xC0}; /* low bytes, then high bytes */
    memcpy(s + 3, shuffled ? planes : plain, 4);
    return 127;
}

/* Section 7's records through dcr's encoder (tau 7, owner 2, payload id 5,
 * level 1), keyed with key when it is set, shuffled or not. Returns a
 * malloc'd copy, NULL on failure. */
static inline uint8_t *t_encode_example(const dcr_payload_key_t *key, bool shuffle, size_t *len_p)
{
    dcr_encoder_t *enc;
    if (dcr_encoder_create(&enc) != DCR_OK) return NULL;
    if (dcr_encoder_set_max_version(enc, DCR_CODEC_VERSION_1) != DCR_OK) return NULL;
    dcr_encoder_set_key(enc, key);
    int64_t shape[1] = {4};
    const int64_t idx[2] = {1, 3};
    const uint16_t vals[2] = {0x3F80, 0xC000};
    dcr_codec_item_t c = {.name = "w",
                          .ndim = 1,
                          .shape = shape,
                          .dtype = DCR_DTYPE_BF16,
                          .encoding = DCR_ENCODING_OVERWRITE,
                          .count = 2,
                          .indices = idx,
                          .values = vals};
    dcr_encode_params_t params = {
        .tau = 7, .owner = 2, .payload_id = 5, .level = 1, .shuffle = shuffle};
    const uint8_t *buf;
    size_t len;
    uint8_t *copy = NULL;
    if (dcr_encoder_add(enc, &c) == DCR_OK &&
        dcr_encoder_finish(enc, &params, &buf, &len) == DCR_OK && (copy = malloc(len))) {
        memcpy(copy, buf, len);
        *len_p = len;
    }
    dcr_encoder_destroy(enc);
    return copy;
}

/* A zstd frame made by hand (RFC 8878) of raw_len zero bytes in RLE blocks
 * of 128 KiB, 4 bytes each, with an 8-byte content size: 8 GiB fits in
 * 256 KiB. Returns a malloc'd frame; *len_p its size. */
static inline uint8_t *t_rle_frame(uint64_t raw_len, size_t *len_p)
{
    const uint64_t block = 128 << 10;
    uint64_t nblocks = (raw_len + block - 1) / block;
    uint8_t *f = malloc(13 + 4 * (size_t)nblocks);
    t_put(f, 0xFD2FB528u, 4);
    f[4] = 0xE0; /* 8-byte content size, single segment */
    t_put(f + 5, raw_len, 8);
    size_t n = 13;
    for (uint64_t b = 0; b < nblocks; b++) {
        uint64_t size = b + 1 < nblocks ? block : raw_len - b * block;
        t_put(f + n, (b + 1 == nblocks) | (1u << 1) | (size << 3), 3);
        f[n + 3] = 0;
        n += 4;
    }
    *len_p = n;
    return f;
}

/* Seed for property tests: DCR_TEST_SEED when set, else the clock; always
 * printed so that a failure can be replayed. */
static inline uint64_t t_seed(const char *test)
{
    const char *env = getenv("DCR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    printf("%s: seed %" PRIu64 " (replay with DCR_TEST_SEED=%" PRIu64 ")\n", test, seed, seed);
    fflush(stdout);
    return seed;
}

#endif
