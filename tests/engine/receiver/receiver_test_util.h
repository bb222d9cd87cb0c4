/* Helpers for tests that refit receivers against the dense oracle: random
 * canonical bits, random changes, records computed directly from the bitwise
 * canonical diff (never from the code under test), and payloads encoded with
 * the codec. Header-only: each test is one translation unit. */
#ifndef DCR_TEST_RECEIVER_UTIL_H
#define DCR_TEST_RECEIVER_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/codec.h"
#include "dcr/inventory.h"
#include "dcr/rng.h"
#include "dcr/tensor.h"

/* One random word of dtype: mostly raw random bits (NaN payloads included),
 * with extra weight on the edge values a refit must carry bit for bit:
 * -0.0/+0.0, subnormals, infinities and NaNs with random payloads. */
static inline uint64_t rt_word(dcr_rng_t *rng, dcr_dtype_t dtype)
{
    size_t es = dcr_dtype_size(dtype);
    uint64_t mask = es == 8 ? ~0ull : ((1ull << (8 * es)) - 1);
    uint64_t sign = 1ull << (8 * es - 1), r = dcr_rng_u64(rng);
    uint64_t exp_all = dtype == DCR_DTYPE_BF16   ? 0x7F80u
                       : dtype == DCR_DTYPE_FP16 ? 0x7C00u
                       : dtype == DCR_DTYPE_FP32 ? 0x7F800000u
                                                 : 0x78u;
    uint64_t mant = (exp_all ^ (mask & ~sign)) & mask;
    switch (dcr_rng_below(rng, 16)) {
    case 0:
        return (r & 1) ? sign : 0; /* -0.0 / +0.0 */
    case 1:
        return ((r & sign) | ((r >> 8) & mant)) & mask; /* subnormal */
    case 2:
        return ((r & sign) | exp_all | (((r >> 8) & mant) | 1)) & mask; /* NaN, payload */
    case 3:
        return dtype == DCR_DTYPE_FP8_E4M3 ? (r & sign) : ((r & sign) | exp_all); /* inf */
    default:
        return r & mask;
    }
}

static inline void rt_fill(dcr_rng_t *rng, dcr_dtype_t dtype, void *buf, int64_t n)
{
    size_t es = dcr_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++) {
        uint64_t w = rt_word(rng, dtype);
        memcpy((char *)buf + (size_t)i * es, &w, es);
    }
}

/* Copies old into new and changes about rate * n random positions to new
 * random bits (always different bits). Returns the positions changed. */
static inline int64_t rt_mutate(dcr_rng_t *rng, dcr_dtype_t dtype, const void *old, void *new_,
                                int64_t n, double rate)
{
    size_t es = dcr_dtype_size(dtype);
    memcpy(new_, old, (size_t)n * es);
    int64_t k = (int64_t)(rate * (double)n + dcr_rng_uniform(rng));
    for (int64_t j = 0; j < k; j++) {
        int64_t i = (int64_t)dcr_rng_below(rng, (uint64_t)n);
        uint64_t a = 0, b;
        memcpy(&a, (char *)old + (size_t)i * es, es);
        do b = rt_word(rng, dtype);
        while (b == a);
        memcpy((char *)new_ + (size_t)i * es, &b, es);
    }
    return k;
}

/* The records of one tensor from the bitwise diff: flat indices where the
 * stored words differ, with XOR masks or new values. Caller frees both. */
static inline size_t rt_diff(dcr_dtype_t dtype, const void *old, const void *new_, int64_t n,
                             dcr_encoding_t enc, int64_t **idx_p, void **val_p)
{
    size_t es = dcr_dtype_size(dtype), count = 0;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    char *val = malloc(es * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = 0, b = 0;
        memcpy(&a, (const char *)old + (size_t)i * es, es);
        memcpy(&b, (const char *)new_ + (size_t)i * es, es);
        if (a == b) continue;
        uint64_t v = enc == DCR_ENCODING_XOR ? (a ^ b) : b;
        idx[count] = i;
        memcpy(val + count * es, &v, es);
        count++;
    }
    *idx_p = idx;
    *val_p = val;
    return count;
}

/* A set of encoded payloads (each buffer owned by the set). */
typedef struct rt_payloads {
    uint8_t **buf;
    size_t *len;
    size_t n, cap;
} rt_payloads_t;

static inline void rt_payloads_push(rt_payloads_t *s, const uint8_t *buf, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->buf = realloc(s->buf, s->cap * sizeof(*s->buf));
        s->len = realloc(s->len, s->cap * sizeof(*s->len));
    }
    s->buf[s->n] = malloc(len);
    memcpy(s->buf[s->n], buf, len);
    s->len[s->n++] = len;
}

static inline void rt_payloads_free(rt_payloads_t *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->buf[i]);
    free(s->buf);
    free(s->len);
    memset(s, 0, sizeof(*s));
}

/* Encodes the diff of every tensor between old[i] and new_[i] as items of
 * `owners` owners (a tensor's records are split between two owners when it
 * has several, as tensor-parallel training layouts do), at most
 * `items_per_payload` items per payload, with encoding enc[i] (skip tensors
 * whose enc is -1). Returns the records encoded. */
static inline size_t rt_encode_refit(const dcr_inventory_t *inv, dcr_storage_t *const *old,
                                     dcr_storage_t *const *new_, const int *enc, uint64_t tau,
                                     uint32_t owners, size_t items_per_payload, dcr_rng_t *rng,
                                     rt_payloads_t *out)
{
    dcr_encoder_t **encs = calloc(owners, sizeof(*encs));
    uint64_t *ids = calloc(owners, sizeof(*ids));
    /* Payload ids continue after the ones already in `out`, so that sets
     * built by several calls for one attempt never collide. */
    for (uint32_t o = 0; o < owners; o++) ids[o] = out->n;
    for (uint32_t o = 0; o < owners; o++) dcr_encoder_create(&encs[o]);
    size_t total = 0;
    for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
        if (enc[t] < 0) continue;
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, t);
        int64_t *idx;
        void *val;
        size_t n = rt_diff(d->dtype, old[t]->data, new_[t]->data, dcr_desc_numel(d),
                           (dcr_encoding_t)enc[t], &idx, &val);
        total += n;
        size_t split = n > 1 && owners > 1 ? (size_t)dcr_rng_below(rng, n) : n;
        size_t parts[2][2] = {{0, split}, {split, n}};
        uint32_t o0 = (uint32_t)dcr_rng_below(rng, owners);
        for (int k = 0; k < 2; k++) {
            size_t a = parts[k][0], b = parts[k][1];
            if (a == b) continue;
            uint32_t o = (o0 + (uint32_t)k) % owners;
            dcr_codec_item_t it = {d->name,
                                   d->ndim,
                                   d->shape,
                                   d->dtype,
                                   (dcr_encoding_t)enc[t],
                                   b - a,
                                   idx + a,
                                   0,
                                   (const char *)val + a * dcr_dtype_size(d->dtype)};
            dcr_encoder_add(encs[o], &it);
            if (dcr_encoder_item_count(encs[o]) >= items_per_payload) {
                dcr_encode_params_t prm = {tau, o, ids[o]++, 1, (ids[o] & 1) != 0};
                const uint8_t *buf;
                size_t len;
                dcr_encoder_finish(encs[o], &prm, &buf, &len);
                rt_payloads_push(out, buf, len);
            }
        }
        free(idx);
        free(val);
    }
    for (uint32_t o = 0; o < owners; o++) {
        if (dcr_encoder_item_count(encs[o]) > 0) {
            dcr_encode_params_t prm = {tau, o, ids[o]++, 1, false};
            const uint8_t *buf;
            size_t len;
            dcr_encoder_finish(encs[o], &prm, &buf, &len);
            rt_payloads_push(out, buf, len);
        }
        dcr_encoder_destroy(encs[o]);
    }
    free(encs);
    free(ids);
    return total;
}

/* Storages for every inventory tensor, random or zero. */
static inline dcr_storage_t **rt_tensors(const dcr_inventory_t *inv, dcr_rng_t *rng)
{
    size_t n = dcr_inventory_count(inv);
    dcr_storage_t **t = calloc(n + 1, sizeof(*t));
    for (size_t i = 0; i < n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        dcr_storage_create(dcr_desc_bytes(d), &t[i]);
        if (rng) rt_fill(rng, d->dtype, t[i]->data, dcr_desc_numel(d));
    }
    return t;
}

static inline void rt_tensors_free(dcr_storage_t **t, const dcr_inventory_t *inv)
{
    for (size_t i = 0; t && i < dcr_inventory_count(inv); i++) dcr_storage_destroy(t[i]);
    free(t);
}

#endif
