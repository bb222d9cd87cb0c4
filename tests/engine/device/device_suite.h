/* Inputs, oracles and the conformance suite of engine/device, shared by
 * test_device.c (the "cpu" backend and the CPU harness, run everywhere) and
 * test_device_gpu.c (the "cuda" backend, run only where a GPU is).
 *
 * Oracles are the CPU path of today: dcr_detect_changes for change
 * detection, and for application the receiver's semantics (engine/receiver/
 * apply.c) written here as plain loops over dcr_dtype_load_bits/store_bits
 * and dcr_dtype_bits_isnan: sparse records XOR into or overwrite their
 * destination; a full XOR pass XORs a zero scratch holding the masks; a full
 * overwrite pass takes scratch words that are not NaN from a NaN-filled
 * scratch, so NaN-valued records never apply there (the receiver sends them
 * through its tracked pass instead); touched scratch returns to its base.
 * Inputs come from a logged seed (DCR_TEST_SEED replays a failure). */
#ifndef DCR_DEVICE_SUITE_H
#define DCR_DEVICE_SUITE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/construct.h"
#include "dcr/device.h"
#include "device/kernels-internal.h"
#include "dcr/dtype.h"
#include "dcr/rng.h"
#include "testkit.h"

static uint64_t g_seed;

/* Sizes around the launch geometry: empty, below a warp, around a block, a
 * tile and several tiles, never all multiples of the block. */
static const size_t suite_sizes[] = {
    0, 1, 31, 32, 33, 255, 256, 257, 2047, 2048, 2049, 3 * 2048 + 17, 65536 + 5};
#define SUITE_NSIZES (sizeof suite_sizes / sizeof suite_sizes[0])
static const double suite_rates[] = {0.0, 0.01, 0.3, 1.0};
#define SUITE_NRATES (sizeof suite_rates / sizeof suite_rates[0])
static const dcr_dtype_t suite_dtypes[] = {DCR_DTYPE_BF16, DCR_DTYPE_FP16, DCR_DTYPE_FP32,
                                           DCR_DTYPE_FP8_E4M3};
#define SUITE_NDTYPES (sizeof suite_dtypes / sizeof suite_dtypes[0])

/* Bit patterns where a float compare and a bit compare disagree: +0/-0,
 * quiet and signalling NaNs with different payloads and signs, infinities. */
static uint64_t suite_special(dcr_rng_t *rng, dcr_dtype_t dt)
{
    static const uint64_t w16[] = {0x0000, 0x8000, 0x7FC0, 0x7FC1, 0xFFC0, 0x7F81,
                                   0x7F80, 0x7E00, 0x7E01, 0xFE00, 0x7C01, 0x7C00};
    static const uint64_t w32[] = {0x00000000, 0x80000000, 0x7FC00000, 0x7FC00001,
                                   0xFFC00000, 0x7F800001, 0x7F800000, 0xFF800000};
    static const uint64_t w8[] = {0x00, 0x80, 0x7F, 0xFF, 0x7E, 0xFE};
    switch (dcr_dtype_size(dt)) {
    case 2:
        return w16[dcr_rng_below(rng, sizeof w16 / sizeof w16[0])];
    case 4:
        return w32[dcr_rng_below(rng, sizeof w32 / sizeof w32[0])];
    default:
        return w8[dcr_rng_below(rng, sizeof w8 / sizeof w8[0])];
    }
}

static uint64_t suite_word(dcr_rng_t *rng, dcr_dtype_t dt)
{
    size_t es = dcr_dtype_size(dt);
    if (dcr_rng_below(rng, 8) == 0) return suite_special(rng, dt);
    uint64_t w = dcr_rng_u64(rng);
    return es == 8 ? w : w & ((UINT64_C(1) << (8 * es)) - 1);
}

/* A tracker of n words and a candidate where about rate of them changed
 * bits (a quarter of the changes between special patterns, so +0 -> -0 and
 * NaN payload changes occur; a special drawn equal to the old word is no
 * change). Unchanged words are copied, special or not. */
static void suite_gen_pair(dcr_rng_t *rng, dcr_dtype_t dt, size_t n, double rate, void *cand,
                           void *tracker)
{
    size_t es = dcr_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t t = suite_word(rng, dt), c = t;
        if (dcr_rng_uniform(rng) < rate) {
            if (dcr_rng_below(rng, 4) == 0)
                c = suite_special(rng, dt);
            else
                c = t ^ (1 + dcr_rng_below(rng, (UINT64_C(1) << (8 * es)) - 1));
        }
        dcr_dtype_store_bits(dt, (char *)tracker + i * es, t);
        dcr_dtype_store_bits(dt, (char *)cand + i * es, c);
    }
}

/* About rate * n records with strictly increasing indices < n and random
 * words (specials included; NaN values only when nan_ok). Returns the count. */
static size_t suite_gen_records(dcr_rng_t *rng, dcr_dtype_t dt, size_t n, double rate, bool nan_ok,
                                int64_t *idx, void *val)
{
    size_t es = dcr_dtype_size(dt), count = 0;
    for (size_t i = 0; i < n; i++) {
        if (dcr_rng_uniform(rng) >= rate) continue;
        uint64_t w;
        do w = suite_word(rng, dt);
        while (!nan_ok && dcr_dtype_bits_isnan(dt, w));
        idx[count] = (int64_t)i;
        dcr_dtype_store_bits(dt, (char *)val + count * es, w);
        count++;
    }
    return count;
}

/* ---- oracles (receiver semantics, plain loops) ---- */

static void oracle_sparse(dcr_dtype_t dt, void *dst, const int64_t *idx, const void *val,
                          size_t count, bool xor_op)
{
    size_t es = dcr_dtype_size(dt);
    for (size_t k = 0; k < count; k++) {
        char *p = (char *)dst + (size_t)idx[k] * es;
        uint64_t v = dcr_dtype_load_bits(dt, (const char *)val + k * es);
        dcr_dtype_store_bits(dt, p, xor_op ? dcr_dtype_load_bits(dt, p) ^ v : v);
    }
}

/* The full overwrite pass through a NaN-filled scratch. */
static void oracle_placeholder(dcr_dtype_t dt, void *dst, size_t n, const int64_t *idx,
                               const void *val, size_t count)
{
    size_t es = dcr_dtype_size(dt);
    for (size_t k = 0; k < count; k++) {
        uint64_t v = dcr_dtype_load_bits(dt, (const char *)val + k * es);
        if (!dcr_dtype_bits_isnan(dt, v))
            dcr_dtype_store_bits(dt, (char *)dst + (size_t)idx[k] * es, v);
    }
    (void)n;
}

/* A full pass over a region, element by element in row-major order; the
 * activity byte of (row, col) is row-major unless the region places it. */
static void oracle_combine(dcr_dtype_t dt, char *dst, const char *src, dcr_device_region_t r,
                           const uint8_t *active, int op)
{
    int64_t es = (int64_t)dcr_dtype_size(dt);
    bool placed = r.act_row != 0 || r.act_col != 0;
    for (int64_t row = 0; row < r.rows; row++)
        for (int64_t col = 0; col < r.cols; col++) {
            char *p = dst + (row * r.dst_row + col * r.dst_col) * es;
            uint64_t v = dcr_dtype_load_bits(dt, src + (row * r.src_row + col * r.src_col) * es);
            int64_t a = placed ? row * r.act_row + col * r.act_col : row * r.cols + col;
            bool take =
                op == DCR_DEVICE_ASSIGN || (active ? active[a] != 0 : !dcr_dtype_bits_isnan(dt, v));
            if (op == DCR_DEVICE_XOR)
                dcr_dtype_store_bits(dt, p, dcr_dtype_load_bits(dt, p) ^ v);
            else if (take)
                dcr_dtype_store_bits(dt, p, v);
        }
}

/* Region cases: a transposed destination (a loader's .t() view) and a
 * destination whose columns run backwards, over shapes around the block. */
typedef struct suite_region_case {
    dcr_device_region_t r;
    int64_t origin; /* element of the destination buffer the region starts at */
    size_t elems;   /* elements of either buffer */
} suite_region_case_t;

static const int64_t suite_shapes[][2] = {{0, 5}, {1, 1}, {3, 1}, {37, 53}, {64, 256}, {5, 300}};
#define SUITE_NSHAPES (sizeof suite_shapes / sizeof suite_shapes[0])

static suite_region_case_t suite_region(size_t shape, int flip)
{
    int64_t rows = suite_shapes[shape][0], cols = suite_shapes[shape][1];
    suite_region_case_t c = {{rows, cols, 1, rows, cols, 1, 0, 0}, 0, (size_t)(rows * cols)};
    if (flip) {
        c.r.dst_row = cols;
        c.r.dst_col = -1;
        c.origin = cols - 1;
    }
    return c;
}

/* ---- convert ---- */

/* Inputs of a conversion from dt: every pattern of a 1- or 2-byte dtype;
 * for FP32 every exponent with mantissas at the narrowing targets' rounding
 * edges (ties, one below and above, the carry into the exponent), both
 * signs, NaN payloads, then random words. malloc'd; *n_p words. */
static void *suite_convert_inputs(dcr_rng_t *rng, dcr_dtype_t dt, size_t *n_p)
{
    size_t es = dcr_dtype_size(dt), n = es == 1 ? 256 : es == 2 ? 65536 : 1 << 18;
    char *buf = malloc(n * es);
    if (es < 4) {
        for (size_t i = 0; i < n; i++) dcr_dtype_store_bits(dt, buf + i * es, i);
        *n_p = n;
        return buf;
    }
    static const uint32_t mants[] = {0,      1,        0x7FFF,   0x8000,   0x8001,   0x18000,
                                     0xFFFF, 0xFFFFF,  0x100000, 0x0FFF,   0x1000,   0x1001,
                                     0x3000, 0x7FFFFF, 0x7FF000, 0x7FE000, 0x400000, 0x400001};
    size_t k = 0;
    for (uint32_t e = 0; e < 256; e++)
        for (size_t m = 0; m < sizeof mants / sizeof mants[0]; m++)
            for (uint32_t sign = 0; sign < 2; sign++)
                dcr_dtype_store_bits(dt, buf + 4 * k++, (sign << 31) | (e << 23) | mants[m]);
    for (; k < n; k++) dcr_dtype_store_bits(dt, buf + 4 * k, (uint32_t)dcr_rng_u64(rng));
    *n_p = n;
    return buf;
}

/* A conversion of a region on the device under test (or the harness):
 * dst (to) from src (from), NaN events added to events[2]. */
typedef void (*suite_convert_fn)(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                                 const char *src, size_t elems, dcr_device_region_t r,
                                 int64_t origin, uint32_t events[2]);

/* Every dtype pair, every input, through a flat region and one whose
 * destination runs backwards along its rows, against dcr_convert word for
 * word and an event count from dcr_dtype_bits_isnan. */
static void suite_convert(uint64_t salt, suite_convert_fn fn, void *arg)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ salt);
    for (size_t a = 0; a < SUITE_NDTYPES; a++) {
        dcr_dtype_t from = suite_dtypes[a];
        size_t n;
        char *src = suite_convert_inputs(&rng, from, &n);
        for (size_t b = 0; b < SUITE_NDTYPES; b++) {
            dcr_dtype_t to = suite_dtypes[b];
            size_t ts = dcr_dtype_size(to), fs = dcr_dtype_size(from);
            char *want = malloc(n * ts), *got = malloc(n * ts);
            uint32_t want_ev[2] = {0, 0};
            for (size_t i = 0; i < n; i++) {
                dcr_convert(want + i * ts, to, src + i * fs, from, 1);
                int x = dcr_dtype_bits_isnan(from, dcr_dtype_load_bits(from, src + i * fs));
                int y = dcr_dtype_bits_isnan(to, dcr_dtype_load_bits(to, want + i * ts));
                want_ev[0] += !x && y;
                want_ev[1] += x && !y;
            }
            for (int flip = 0; flip < 2; flip++) {
                /* n = 256 rows of n / 256 columns. */
                int64_t cols = (int64_t)n / 256;
                dcr_device_region_t r = {256, cols, cols, 1, cols, 1, 0, 0};
                int64_t origin = 0;
                if (flip) {
                    r.dst_col = -1;
                    origin = cols - 1;
                }
                uint32_t ev[2] = {0, 0};
                memset(got, 0xA5, n * ts);
                fn(arg, to, from, got, src, n, r, origin, ev);
                for (int64_t i = 0; i < (int64_t)n; i++) {
                    int64_t row = i / cols, col = i % cols;
                    int64_t at = origin + row * r.dst_row + col * r.dst_col;
                    uint64_t g = dcr_dtype_load_bits(to, got + at * (int64_t)ts);
                    uint64_t w = dcr_dtype_load_bits(to, want + i * (int64_t)ts);
                    if (g != w)
                        fail_msg(
                            "convert %s -> %s flip %d: element %lld (0x%llx) gives 0x%llx, "
                            "dcr_convert 0x%llx",
                            dcr_dtype_name(from), dcr_dtype_name(to), flip, (long long)i,
                            (unsigned long long)dcr_dtype_load_bits(from, src + i * (int64_t)fs),
                            (unsigned long long)g, (unsigned long long)w);
                }
                assert_int_equal(ev[0], want_ev[0]);
                assert_int_equal(ev[1], want_ev[1]);
            }
            /* The conversions that can make NaNs from numbers do here. */
            if (to == DCR_DTYPE_FP8_E4M3 && from != to) assert_true(want_ev[0] > 0);
            free(want);
            free(got);
        }
        free(src);
    }
}

/* Whether every word of buf[0..n) is w. */
static bool suite_all_words(dcr_dtype_t dt, const void *buf, size_t n, uint64_t w)
{
    size_t es = dcr_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (dcr_dtype_load_bits(dt, (const char *)buf + i * es) != w) return false;
    return true;
}

/* ---- the conformance suite, against an open device ---- */

/* A device buffer holding a copy of host bytes (or zeroed when src NULL). */
static void *suite_up(dcr_device_t *d, dcr_device_stream_t *s, const void *src, size_t bytes)
{
    void *p = NULL;
    assert_int_equal(dcr_device_alloc(d, bytes ? bytes : 1, &p), DCR_OK);
    if (src) assert_int_equal(dcr_device_copy(d, s, p, src, bytes, DCR_DEVICE_H2D), DCR_OK);
    return p;
}

static void suite_down(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                       size_t bytes)
{
    assert_int_equal(dcr_device_copy(d, s, dst, src, bytes, DCR_DEVICE_D2H), DCR_OK);
    assert_int_equal(dcr_device_sync(d, s), DCR_OK);
}

/* A converting copy of an overwrite pass (fn: op OVERWRITE, active NULL or
 * a row-major map): elements written where active, or without a map where
 * the source word is not NaN, with dcr_convert's bits; the others keep
 * their old word. Random sources with NaNs, -0.0 and subnormals. */
typedef void (*suite_overwrite_fn)(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                                   const char *src, size_t n, const uint8_t *active);

static void suite_convert_overwrite(uint64_t salt, suite_overwrite_fn fn, void *arg)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ salt);
    static const dcr_dtype_t pairs[][2] = {{DCR_DTYPE_FP8_E4M3, DCR_DTYPE_BF16},
                                           {DCR_DTYPE_BF16, DCR_DTYPE_FP32},
                                           {DCR_DTYPE_FP16, DCR_DTYPE_FP8_E4M3}};
    size_t n = 3 * 2048 + 17;
    for (size_t p = 0; p < 3; p++)
        for (int tracked = 0; tracked < 2; tracked++) {
            dcr_dtype_t to = pairs[p][0], from = pairs[p][1];
            size_t ts = dcr_dtype_size(to), fs = dcr_dtype_size(from);
            char *src = malloc(n * fs), *want = malloc(n * ts), *got = malloc(n * ts);
            uint8_t *act = malloc(n);
            for (size_t i = 0; i < n; i++) {
                dcr_dtype_store_bits(from, src + i * fs, suite_word(&rng, from));
                dcr_dtype_store_bits(to, want + i * ts, suite_word(&rng, to));
                act[i] = (uint8_t)(dcr_rng_below(&rng, 3) == 0);
            }
            memcpy(got, want, n * ts);
            for (size_t i = 0; i < n; i++) {
                bool nan = dcr_dtype_bits_isnan(from, dcr_dtype_load_bits(from, src + i * fs));
                if (tracked ? act[i] != 0 : !nan)
                    dcr_convert(want + i * ts, to, src + i * fs, from, 1);
            }
            fn(arg, to, from, got, src, n, tracked ? act : NULL);
            for (size_t i = 0; i < n; i++)
                if (dcr_dtype_load_bits(to, got + i * ts) != dcr_dtype_load_bits(to, want + i * ts))
                    fail_msg("overwrite %s -> %s tracked %d: element %zu", dcr_dtype_name(from),
                             dcr_dtype_name(to), tracked, i);
            free(src);
            free(want);
            free(got);
            free(act);
        }
}

/* The transforms of the closed set (DCR_DK_T_NEG, DCR_DK_T_NEG_EXP) from
 * FP32 and BF16 inputs into FP32 and BF16, through the function under test
 * (a device, or the harness), against the same per-element work run on the
 * host: the host and device paths of dcr_load_map_op must give the same
 * bits (the arithmetic itself is checked against exp in test_device.c). */
typedef void (*suite_map_fn)(void *arg, dcr_dtype_t to, dcr_dtype_t from, int transform, char *dst,
                             const char *src, size_t elems, uint32_t events[2]);

static void suite_map(uint64_t salt, suite_map_fn fn, void *arg)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ salt);
    static const dcr_dtype_t dts[] = {DCR_DTYPE_FP32, DCR_DTYPE_BF16};
    for (int op = DCR_DK_T_NEG; op <= DCR_DK_T_NEG_EXP; op++)
        for (size_t a = 0; a < 2; a++) {
            size_t n;
            char *src = suite_convert_inputs(&rng, dts[a], &n);
            for (size_t b = 0; b < 2; b++) {
                dcr_dtype_t to = dts[b], from = dts[a];
                size_t ts = dcr_dtype_size(to);
                char *want = malloc(n * ts), *got = malloc(n * ts);
                dcr_device_region_t r = dcr_device_region_flat(n);
                uint32_t want_ev[2] = {0, 0}, ev[2] = {0, 0};
                for (size_t i = 0; i < n; i++) {
                    int e = dcr_dk_convert(want, (int)to, src, (int)from, r, NULL, DCR_DK_ASSIGN,
                                           op, i);
                    want_ev[0] += e == DCR_DK_NAN_CREATED;
                    want_ev[1] += e == DCR_DK_NAN_LOST;
                }
                fn(arg, to, from, op, got, src, n, ev);
                for (size_t i = 0; i < n; i++) {
                    uint64_t g = dcr_dtype_load_bits(to, got + i * ts);
                    uint64_t w = dcr_dtype_load_bits(to, want + i * ts);
                    if (g != w)
                        fail_msg("transform %d %s -> %s: element %zu gives 0x%llx, the host 0x%llx",
                                 op, dcr_dtype_name(from), dcr_dtype_name(to), i,
                                 (unsigned long long)g, (unsigned long long)w);
                }
                assert_int_equal(ev[0], want_ev[0]);
                assert_int_equal(ev[1], want_ev[1]);
                free(want);
                free(got);
            }
            free(src);
        }
}

typedef struct suite_convert_dev {
    dcr_device_t *d;
    dcr_device_stream_t *s;
} suite_convert_dev_t;

static void suite_convert_on_device(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                                    const char *src, size_t elems, dcr_device_region_t r,
                                    int64_t origin, uint32_t events[2])
{
    suite_convert_dev_t *c = arg;
    size_t ts = dcr_dtype_size(to);
    void *dsrc = suite_up(c->d, c->s, src, elems * dcr_dtype_size(from));
    void *ddst = suite_up(c->d, c->s, dst, elems * ts);
    uint32_t *dev = suite_up(c->d, c->s, NULL, 2 * sizeof(uint32_t));
    assert_int_equal(dcr_device_convert(c->d, c->s, (char *)ddst + origin * (int64_t)ts, to, dsrc,
                                        from, &r, NULL, DCR_DEVICE_ASSIGN, DCR_DK_T_NONE, dev),
                     DCR_OK);
    suite_down(c->d, c->s, dst, ddst, elems * ts);
    suite_down(c->d, c->s, events, dev, 2 * sizeof(uint32_t));
    dcr_device_free(c->d, dsrc);
    dcr_device_free(c->d, ddst);
    dcr_device_free(c->d, dev);
}

static void suite_map_on_device(void *arg, dcr_dtype_t to, dcr_dtype_t from, int transform,
                                char *dst, const char *src, size_t elems, uint32_t events[2])
{
    suite_convert_dev_t *c = arg;
    size_t ts = dcr_dtype_size(to);
    void *dsrc = suite_up(c->d, c->s, src, elems * dcr_dtype_size(from));
    void *ddst = suite_up(c->d, c->s, NULL, elems * ts);
    uint32_t *dev = suite_up(c->d, c->s, NULL, 2 * sizeof(uint32_t));
    dcr_device_region_t r = dcr_device_region_flat(elems);
    assert_int_equal(dcr_device_convert(c->d, c->s, ddst, to, dsrc, from, &r, NULL,
                                        DCR_DEVICE_ASSIGN, transform, dev),
                     DCR_OK);
    suite_down(c->d, c->s, dst, ddst, elems * ts);
    suite_down(c->d, c->s, events, dev, 2 * sizeof(uint32_t));
    dcr_device_free(c->d, dsrc);
    dcr_device_free(c->d, ddst);
    dcr_device_free(c->d, dev);
}

static void suite_overwrite_on_device(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                                      const char *src, size_t n, const uint8_t *active)
{
    suite_convert_dev_t *c = arg;
    size_t ts = dcr_dtype_size(to);
    void *dsrc = suite_up(c->d, c->s, src, n * dcr_dtype_size(from));
    void *ddst = suite_up(c->d, c->s, dst, n * ts);
    void *dact = active ? suite_up(c->d, c->s, active, n) : NULL;
    dcr_device_region_t r = dcr_device_region_flat(n);
    assert_int_equal(dcr_device_convert(c->d, c->s, ddst, to, dsrc, from, &r, dact,
                                        DCR_DEVICE_OVERWRITE, DCR_DK_T_NONE, NULL),
                     DCR_OK);
    suite_down(c->d, c->s, dst, ddst, n * ts);
    dcr_device_free(c->d, dsrc);
    dcr_device_free(c->d, ddst);
    dcr_device_free(c->d, dact);
}

static void conf_convert(dcr_device_t *d)
{
    suite_convert_dev_t c = {d, NULL};
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &c.s), DCR_OK);
    suite_convert(0xC0, suite_convert_on_device, &c);
    suite_map(0xC1, suite_map_on_device, &c);
    suite_convert_overwrite(0xC2, suite_overwrite_on_device, &c);
    dcr_device_stream_destroy(d, c.s);
}

/* Memory: buffers start zeroed, copies round-trip in every direction,
 * staging memory is writable, two streams work side by side. */
static void conf_memory(dcr_device_t *d)
{
    dcr_device_stream_t *s1 = NULL, *s2 = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_OWNER, 1, &s1), DCR_OK);
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 2, &s2), DCR_OK);
    size_t bytes = 100003;
    void *stage_p = NULL;
    unsigned char *back = malloc(bytes);
    assert_int_equal(dcr_device_host_alloc(d, bytes, &stage_p), DCR_OK);
    unsigned char *stage = stage_p;
    for (size_t i = 0; i < bytes; i++) stage[i] = (unsigned char)(i * 131 + 7);
    void *a = suite_up(d, s1, NULL, bytes), *b = suite_up(d, s2, NULL, bytes);
    suite_down(d, s1, back, a, bytes);
    for (size_t i = 0; i < bytes; i++) assert_int_equal(back[i], 0);
    assert_int_equal(dcr_device_copy(d, s1, a, stage, bytes, DCR_DEVICE_H2D), DCR_OK);
    assert_int_equal(dcr_device_sync(d, s1), DCR_OK);
    assert_int_equal(dcr_device_copy(d, s2, b, a, bytes, DCR_DEVICE_D2D), DCR_OK);
    suite_down(d, s2, back, b, bytes);
    assert_memory_equal(back, stage, bytes);
    /* fill with each element size */
    for (size_t es = 1; es <= 4; es *= 2) {
        size_t n = bytes / es;
        uint32_t word = es == 1 ? 0x7Fu : es == 2 ? 0x7FC0u : 0x7FC00000u;
        assert_int_equal(dcr_device_fill(d, s1, a, es, word, n), DCR_OK);
        suite_down(d, s1, back, a, n * es);
        dcr_dtype_t dt = es == 1 ? DCR_DTYPE_FP8_E4M3 : es == 2 ? DCR_DTYPE_BF16 : DCR_DTYPE_FP32;
        assert_true(suite_all_words(dt, back, n, word));
    }
    dcr_device_free(d, a);
    dcr_device_free(d, b);
    dcr_device_host_free(d, stage);
    dcr_device_stream_destroy(d, s1);
    dcr_device_stream_destroy(d, s2);
    free(back);
}

/* Detection and tracker update against dcr_detect_changes, every dtype,
 * size and rate. */
static void conf_detect(dcr_device_t *d)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xD1);
    dcr_device_stream_t *s = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &s), DCR_OK);
    for (size_t di = 0; di < SUITE_NDTYPES; di++)
        for (size_t si = 0; si < SUITE_NSIZES; si++)
            for (size_t ri = 0; ri < SUITE_NRATES; ri++) {
                dcr_dtype_t dt = suite_dtypes[di];
                size_t n = suite_sizes[si], es = dcr_dtype_size(dt), bytes = n * es;
                char *cand = malloc(bytes + 1), *tr = malloc(bytes + 1), *back = malloc(bytes + 1);
                /* The CPU kernels store 16 entries of slack past the last change. */
                uint32_t *want = malloc((n + 64) * sizeof(uint32_t));
                uint32_t *got = malloc((n + 1) * sizeof(uint32_t));
                suite_gen_pair(&rng, dt, n, suite_rates[ri], cand, tr);
                size_t nwant = dcr_detect_changes(cand, tr, n, es, want);
                void *dc = suite_up(d, s, cand, bytes), *dtr = suite_up(d, s, tr, bytes);
                void *didx = suite_up(d, s, NULL, (n + 1) * sizeof(uint32_t));
                void *work = suite_up(d, s, NULL, dcr_device_detect_workspace(n));
                size_t ngot = SIZE_MAX;
                assert_int_equal(dcr_device_detect(d, s, dc, dtr, n, es, didx, work, &ngot),
                                 DCR_OK);
                if (ngot != nwant)
                    fail_msg("seed %llu: %s n=%zu rate=%g: %zu changes, expected %zu",
                             (unsigned long long)g_seed, dcr_dtype_name(dt), n, suite_rates[ri],
                             ngot, nwant);
                suite_down(d, s, got, didx, ngot * sizeof(uint32_t));
                if (ngot) assert_memory_equal(got, want, ngot * sizeof(uint32_t));
                /* Projection input: the candidate's words at the changed indices. */
                void *dvals = suite_up(d, s, NULL, ngot * es + 1);
                char *vals = malloc(ngot * es + 1);
                assert_int_equal(dcr_device_gather(d, s, dvals, dc, es, didx, ngot), DCR_OK);
                suite_down(d, s, vals, dvals, ngot * es);
                for (size_t k = 0; k < ngot; k++)
                    assert_memory_equal(vals + k * es, cand + (size_t)want[k] * es, es);
                dcr_device_free(d, dvals);
                free(vals);
                /* Commit: the tracker takes the candidate's bits everywhere. */
                assert_int_equal(dcr_device_track(d, s, dtr, dc, es, didx, ngot), DCR_OK);
                suite_down(d, s, back, dtr, bytes);
                if (bytes) assert_memory_equal(back, cand, bytes);
                dcr_device_free(d, dc);
                dcr_device_free(d, dtr);
                dcr_device_free(d, didx);
                dcr_device_free(d, work);
                free(cand);
                free(tr);
                free(back);
                free(want);
                free(got);
            }
    dcr_device_stream_destroy(d, s);
}

/* Application as the receiver runs it, against the oracles: sparse XOR and
 * overwrite (NaN values included), the full XOR pass and the full
 * placeholder pass through scratch, with scratch back at its base after. */
static void conf_apply(dcr_device_t *d)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xA9);
    dcr_device_stream_t *s = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &s), DCR_OK);
    for (size_t di = 0; di < SUITE_NDTYPES; di++)
        for (size_t si = 0; si < SUITE_NSIZES; si++)
            for (size_t ri = 0; ri < SUITE_NRATES; ri++)
                for (int mode = 0; mode < 4;
                     mode++) { /* sparse xor, sparse ow, full xor, full ow */
                    dcr_dtype_t dt = suite_dtypes[di];
                    size_t n = suite_sizes[si], es = dcr_dtype_size(dt), bytes = n * es;
                    bool xor_op = mode % 2 == 0, full = mode >= 2;
                    char *base = malloc(bytes + 1), *want = malloc(bytes + 1);
                    char *back = malloc(bytes + 1), *val = malloc(bytes + 1);
                    int64_t *idx = malloc((n + 1) * sizeof(int64_t));
                    suite_gen_pair(&rng, dt, n, 0, base, want); /* want = base */
                    /* NaN values: any sparse record, and full overwrite too (to
                     * check the rule that they do not apply there). */
                    size_t count = suite_gen_records(&rng, dt, n, suite_rates[ri], true, idx, val);
                    if (full && !xor_op)
                        oracle_placeholder(dt, want, n, idx, val, count);
                    else
                        oracle_sparse(dt, want, idx, val, count, xor_op);
                    void *dst = suite_up(d, s, base, bytes);
                    void *didx = suite_up(d, s, idx, count * sizeof(int64_t));
                    void *dval = suite_up(d, s, val, count * es);
                    dcr_device_op_t op = xor_op ? DCR_DEVICE_XOR : DCR_DEVICE_OVERWRITE;
                    uint32_t base_word = xor_op ? 0 : dcr_dk_nan_word((int)dt);
                    void *scratch = NULL;
                    if (!full) {
                        assert_int_equal(dcr_device_scatter(d, s, dst, es, didx, dval, count, op),
                                         DCR_OK);
                    } else {
                        scratch = suite_up(d, s, NULL, bytes);
                        assert_int_equal(dcr_device_fill(d, s, scratch, es, base_word, n), DCR_OK);
                        assert_int_equal(dcr_device_scatter(d, s, scratch, es, didx, dval, count,
                                                            DCR_DEVICE_OVERWRITE),
                                         DCR_OK);
                        dcr_device_region_t flat = dcr_device_region_flat(n);
                        assert_int_equal(
                            dcr_device_combine(d, s, dst, scratch, &flat, NULL, dt, op), DCR_OK);
                        assert_int_equal(
                            dcr_device_reset(d, s, scratch, es, didx, count, base_word), DCR_OK);
                        suite_down(d, s, back, scratch, bytes);
                        if (!suite_all_words(dt, back, n, base_word))
                            fail_msg("seed %llu: %s n=%zu: scratch not reset",
                                     (unsigned long long)g_seed, dcr_dtype_name(dt), n);
                    }
                    suite_down(d, s, back, dst, bytes);
                    if (bytes && memcmp(back, want, bytes))
                        fail_msg("seed %llu: %s n=%zu rate=%g mode=%d: storage differs from the "
                                 "CPU oracle",
                                 (unsigned long long)g_seed, dcr_dtype_name(dt), n, suite_rates[ri],
                                 mode);
                    dcr_device_free(d, dst);
                    dcr_device_free(d, didx);
                    dcr_device_free(d, dval);
                    dcr_device_free(d, scratch);
                    free(base);
                    free(want);
                    free(back);
                    free(val);
                    free(idx);
                }
    dcr_device_stream_destroy(d, s);
}

/* Runs one full pass over a region in place on host buffers: dst is the
 * whole destination buffer (the region starts at c->origin), act NULL or
 * the activity map. */
typedef void (*suite_combine_fn)(void *arg, dcr_dtype_t dt, char *dst, const char *src,
                                 const suite_region_case_t *c, const uint8_t *act, int op);

/* Full passes over strided regions, the five rules (XOR, placeholder,
 * activity map row-major and placed like the source, assign), every dtype,
 * each run by fn and compared with oracle_combine. */
static void suite_combine_regions(uint64_t salt, suite_combine_fn fn, void *arg)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ salt);
    for (size_t di = 0; di < SUITE_NDTYPES; di++)
        for (size_t sh = 0; sh < SUITE_NSHAPES; sh++)
            for (int flip = 0; flip < 2; flip++)
                for (int rule = 0; rule < 5; rule++) {
                    dcr_dtype_t dt = suite_dtypes[di];
                    suite_region_case_t c = suite_region(sh, flip);
                    if (rule == 3) { /* a placed map: transposed against the region */
                        c.r.act_row = 1;
                        c.r.act_col = c.r.rows;
                    }
                    int op = rule == 0   ? DCR_DEVICE_XOR
                             : rule == 4 ? DCR_DEVICE_ASSIGN
                                         : DCR_DEVICE_OVERWRITE;
                    size_t es = dcr_dtype_size(dt), bytes = c.elems * es;
                    char *src = malloc(bytes + 1), *want = malloc(bytes + 1);
                    char *got = malloc(bytes + 1);
                    uint8_t *active = malloc(c.elems + 1);
                    suite_gen_pair(&rng, dt, c.elems, 0.5, got, src);
                    for (size_t i = 0; i < c.elems; i++) /* any non-zero byte is active */
                        active[i] = dcr_rng_below(&rng, 2) ? (uint8_t)(1 + i % 255) : 0;
                    memcpy(want, got, bytes);
                    const uint8_t *act = rule == 2 || rule == 3 ? active : NULL;
                    oracle_combine(dt, want + c.origin * (int64_t)es, src, c.r, act, op);
                    fn(arg, dt, got, src, &c, act, op);
                    if (bytes && memcmp(got, want, bytes))
                        fail_msg("seed %llu: combine %s %lldx%lld flip=%d rule=%d differs",
                                 (unsigned long long)g_seed, dcr_dtype_name(dt),
                                 (long long)c.r.rows, (long long)c.r.cols, flip, rule);
                    free(src);
                    free(want);
                    free(got);
                    free(active);
                }
}

/* suite_combine_fn through a device: up, combine, down. */
static void suite_combine_on_device(void *arg, dcr_dtype_t dt, char *dst, const char *src,
                                    const suite_region_case_t *c, const uint8_t *act, int op)
{
    dcr_device_t *d = arg;
    dcr_device_stream_t *s = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &s), DCR_OK);
    size_t es = dcr_dtype_size(dt), bytes = c->elems * es;
    void *ddst = suite_up(d, s, dst, bytes), *dsrc = suite_up(d, s, src, bytes);
    void *dact = act ? suite_up(d, s, act, c->elems) : NULL;
    assert_int_equal(dcr_device_combine(d, s, (char *)ddst + c->origin * (int64_t)es, dsrc, &c->r,
                                        dact, dt, (dcr_device_op_t)op),
                     DCR_OK);
    suite_down(d, s, dst, ddst, bytes);
    dcr_device_free(d, ddst);
    dcr_device_free(d, dsrc);
    dcr_device_free(d, dact);
    dcr_device_stream_destroy(d, s);
}

static void conf_combine_regions(dcr_device_t *d)
{
    suite_combine_regions(0xC0, suite_combine_on_device, d);
}

/* Bad arguments are refused by the wrappers, for every backend alike. */
static void conf_errors(dcr_device_t *d)
{
    dcr_device_stream_t *s = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_RECEIVER, 0, &s), DCR_OK);
    void *buf = NULL, *p = NULL;
    size_t count = 0;
    assert_int_equal(dcr_device_alloc(d, 64, &buf), DCR_OK);
    dcr_device_stream_t *bad = NULL;
    assert_int_equal(dcr_device_stream_create(d, DCR_ACTOR_COUNT, 0, &bad), DCR_EINVAL);
    assert_null(bad);
    assert_int_equal(s->actor, DCR_ACTOR_RECEIVER); /* the trace tag the wrapper set */
    assert_int_equal(dcr_device_alloc(d, 0, &p), DCR_EINVAL);
    assert_null(p);
    assert_int_equal(dcr_device_fill(d, s, buf, 3, 0, 4), DCR_EINVAL);
    assert_int_equal(dcr_device_detect(d, s, buf, buf, 4, 8, buf, buf, &count), DCR_EINVAL);
    assert_int_equal(dcr_device_detect(d, NULL, buf, buf, 4, 2, buf, buf, &count), DCR_EINVAL);
    assert_int_equal(dcr_device_scatter(d, s, NULL, 2, buf, buf, 1, DCR_DEVICE_XOR), DCR_EINVAL);
    dcr_device_region_t r4 = dcr_device_region_flat(4), neg = {-1, 4, 4, 1, 4, 1, 0, 0};
    assert_int_equal(dcr_device_combine(d, s, buf, buf, &r4, NULL, DCR_DTYPE_COUNT, DCR_DEVICE_XOR),
                     DCR_EINVAL);
    assert_int_equal(
        dcr_device_combine(d, s, buf, buf, &r4, NULL, DCR_DTYPE_BF16, (dcr_device_op_t)7),
        DCR_EINVAL);
    assert_int_equal(dcr_device_combine(d, s, buf, buf, &neg, NULL, DCR_DTYPE_BF16, DCR_DEVICE_XOR),
                     DCR_EINVAL);
    assert_int_equal(dcr_device_combine(d, s, buf, buf, &r4, buf, DCR_DTYPE_BF16, DCR_DEVICE_XOR),
                     DCR_EINVAL);
    assert_int_equal(dcr_device_combine(d, s, buf, buf, NULL, NULL, DCR_DTYPE_BF16, DCR_DEVICE_XOR),
                     DCR_EINVAL);
    /* Empty inputs are no-ops that succeed, NULL buffers allowed. */
    count = 99;
    assert_int_equal(dcr_device_detect(d, s, NULL, NULL, 0, 2, NULL, NULL, &count), DCR_OK);
    assert_int_equal(count, 0);
    assert_int_equal(dcr_device_scatter(d, s, NULL, 2, NULL, NULL, 0, DCR_DEVICE_XOR), DCR_OK);
    assert_int_equal(dcr_device_reset(d, s, NULL, 2, NULL, 0, 0), DCR_OK);
    assert_int_equal(dcr_device_track(d, s, NULL, NULL, 2, NULL, 0), DCR_OK);
    assert_int_equal(dcr_device_gather(d, s, NULL, NULL, 2, NULL, 0), DCR_OK);
    assert_int_equal(dcr_device_gather(d, s, NULL, buf, 2, buf, 1), DCR_EINVAL);
    assert_int_equal(dcr_device_copy(d, s, NULL, NULL, 0, DCR_DEVICE_D2D), DCR_OK);
    dcr_device_free(d, buf);
    dcr_device_free(d, NULL);
    dcr_device_stream_destroy(d, s);
    dcr_device_stream_destroy(d, NULL);
}

#endif
