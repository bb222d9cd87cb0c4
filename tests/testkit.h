/* Helpers shared by tests that build a model, a training layout and tensor
 * data (header-only: each test is one translation unit). */
#ifndef DCR_TESTKIT_H
#define DCR_TESTKIT_H

#include <blake2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/rng.h"
#include "dcr/source.h"
#include "workloads/model/model.h"
#include "workloads/train/megatron.h"

/* A payload's digest as FORMAT.md section 1.1 defines it, by libb2's
 * one-shot call on a concatenated copy (a different path from the codec's
 * streaming one): BLAKE2b-128 over header[0, 48) then the body_len bytes
 * of body, keyed with the 32-byte key when key is not NULL. out may point
 * into header (the digest field): header is copied first. */
static inline void t_digest(const uint8_t *header, const uint8_t *body, size_t body_len,
                            const uint8_t *key, uint8_t out[16])
{
    uint8_t *cat = malloc(48 + body_len + 1);
    if (cat == NULL) abort();
    memcpy(cat, header, 48);
    if (body_len) memcpy(cat + 48, body, body_len);
    blake2b(out, cat, key, 16, 48 + body_len, key ? 32 : 0);
    free(cat);
}

/* The seed of a property test: DCR_TEST_SEED when set (to replay), else the default. */
static inline uint64_t testkit_seed(uint64_t fallback)
{
    const char *env = getenv("DCR_TEST_SEED");
    return env ? strtoull(env, NULL, 0) : fallback;
}

static inline void testkit_load_model(const char *name, int scale, int layers,
                                      dcr_model_config_t *m)
{
    assert_int_equal(dcr_model_load(name, m), DCR_OK);
    if (layers) assert_int_equal(dcr_model_truncate_layers(m, layers), DCR_OK);
    assert_int_equal(dcr_model_scale(m, scale, 8), DCR_OK);
}

/* One zeroed storage per canonical tensor. */
static inline dcr_storage_t **testkit_alloc_canonical(const dcr_inventory_t *inv)
{
    size_t n = dcr_inventory_count(inv);
    dcr_storage_t **t = calloc(n + 1, sizeof(*t));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(dcr_storage_create(dcr_desc_bytes(dcr_inventory_at(inv, i)), &t[i]),
                         DCR_OK);
    return t;
}

/* One zeroed storage per source shard. */
static inline dcr_storage_t **testkit_alloc_shards(const dcr_source_layout_t *layout)
{
    dcr_storage_t **t = calloc((size_t)layout->nshards + 1, sizeof(*t));
    for (int i = 0; i < layout->nshards; i++)
        assert_int_equal(dcr_storage_create(dcr_desc_bytes(&layout->shards[i].desc), &t[i]),
                         DCR_OK);
    return t;
}

static inline void testkit_free(dcr_storage_t **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) dcr_storage_destroy(t[i]);
    free(t);
}

/* Marks canonical tensors that some shard stores in another dtype: a cast
 * path, which cannot carry NaN payloads bit for bit. */
static inline char *testkit_cast_tensors(const dcr_source_layout_t *layout)
{
    size_t n = dcr_inventory_count(layout->inventory);
    char *cast = calloc(n + 1, 1);
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        if (layout->shards[t->shard].desc.dtype !=
            dcr_inventory_at(layout->inventory, (size_t)t->canonical)->dtype)
            cast[t->canonical] = 1;
    }
    for (size_t c = 0; c < n; c++)
        if (layout->derived_from[c] >= 0) cast[c] = 1; /* FP8 scales: computed, finite */
    return cast;
}

/* Replaces a NaN element by a finite one (clears the top exponent bits). */
static inline void testkit_make_finite(dcr_dtype_t dtype, unsigned char *e)
{
    size_t es = dcr_dtype_size(dtype);
    if (dcr_dtype_load_f64(dtype, e) != dcr_dtype_load_f64(dtype, e)) e[es - 1] &= 0x3f;
}

/* Random bit patterns in every canonical tensor: NaN payloads, -0.0 and
 * subnormals included, except NaNs on cast paths. */
static inline void testkit_fill_random(dcr_rng_t *rng, const dcr_source_layout_t *layout,
                                       dcr_storage_t **canonical)
{
    char *cast = testkit_cast_tensors(layout);
    size_t n = dcr_inventory_count(layout->inventory);
    for (size_t c = 0; c < n; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(layout->inventory, c);
        unsigned char *p = canonical[c]->data;
        for (size_t k = 0; k < canonical[c]->bytes; k++) p[k] = (unsigned char)dcr_rng_u64(rng);
        if (!cast[c]) continue;
        for (int64_t k = 0; k < dcr_desc_numel(d); k++)
            testkit_make_finite(d->dtype, p + (size_t)k * dcr_dtype_size(d->dtype));
    }
    free(cast);
}

#endif
