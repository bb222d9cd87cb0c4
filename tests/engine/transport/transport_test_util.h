/* Helpers shared by the transport tests (header-only: each test is one
 * translation unit): real payloads from the codec's encoder, a temporary
 * store directory, owner and rollout-node threads, and the exactly-once
 * check. Expected values come from what the test itself sent, never from
 * the transport. */
#ifndef DCR_TEST_TRANSPORT_UTIL_H
#define DCR_TEST_TRANSPORT_UTIL_H

#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/rng.h"
#include "dcr/objstore.h"
#include "dcr/transport.h"

#include "testfiles.h"

/* The S3 endpoint tp_config puts into configurations (tests over an s3://
 * store set it; NULL otherwise). */
static const char *tp_s3_endpoint;

/* ---- payloads ------------------------------------------------------------ */

typedef struct tp_payload {
    uint64_t tau;
    int owner;
    uint64_t id;
    uint8_t *buf;
    size_t len;
} tp_payload_t;

/* A real payload of `count` bf16 overwrite records of tau/owner/id. With
 * random values it hardly compresses, so len tracks count * 2 (pacing tests);
 * with a seed of 0 the values repeat and it stays tiny. */
static inline tp_payload_t tp_payload_make(uint64_t tau, int owner, uint64_t id, size_t count,
                                           uint64_t seed)
{
    dcr_encoder_t *enc = NULL;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    uint16_t *v = malloc(count * sizeof *v);
    assert_non_null(v);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed ? seed : 1);
    for (size_t i = 0; i < count; i++)
        v[i] = seed ? (uint16_t)dcr_rng_u64(&rng) : (uint16_t)(i % 7);
    char name[64];
    snprintf(name, sizeof name, "model.layers.%d.w%" PRIu64 ".weight", owner, id);
    int64_t shape[1] = {(int64_t)count + 5};
    dcr_codec_item_t item = {.name = name,
                             .ndim = 1,
                             .shape = shape,
                             .dtype = DCR_DTYPE_BF16,
                             .encoding = DCR_ENCODING_OVERWRITE,
                             .count = count,
                             .indices = NULL,
                             .run_start = 3,
                             .values = v};
    assert_int_equal(dcr_encoder_add(enc, &item), DCR_OK);
    dcr_encode_params_t p = {
        .tau = tau, .owner = (uint32_t)owner, .payload_id = id, .level = DCR_CODEC_LEVEL_DEFAULT};
    const uint8_t *buf;
    size_t len;
    assert_int_equal(dcr_encoder_finish(enc, &p, &buf, &len), DCR_OK);
    tp_payload_t out = {tau, owner, id, malloc(len), len};
    assert_non_null(out.buf);
    memcpy(out.buf, buf, len);
    dcr_encoder_destroy(enc);
    free(v);
    return out;
}

static inline void tp_payloads_free(tp_payload_t *p, size_t n)
{
    for (size_t i = 0; p != NULL && i < n; i++) free(p[i].buf);
    free(p);
}

/* ---- a temporary store -------------------------------------------------- */

static inline int tp_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void tp_rmtree(const char *dir)
{
    if (dir[0] != '\0') nftw(dir, tp_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A configuration with unlimited links: functional tests measure nothing. */
static inline dcr_transport_config_t tp_config(const char *dir, int train_nodes, int world,
                                               int nodes)
{
    dcr_transport_config_t c = {.train_nodes = train_nodes,
                                .world = world,
                                .rollout_nodes = nodes,
                                .link = {0, 0, 0, 0},
                                .dir = dir,
                                .fanout = 2,
                                .queue_payloads = 4,
                                .s3_endpoint = tp_s3_endpoint};
    return c;
}

/* Writes bytes as object `name` of attempt tau into the store at `url`, as a
 * foreign writer would (a whole put, as every store makes it). */
static inline void tp_put_object(const char *url, uint64_t tau, const char *name, const void *buf,
                                 size_t len)
{
    dcr_objstore_config_t oc = {.url = url, .s3_endpoint = tp_s3_endpoint};
    dcr_objstore_t *s = NULL;
    dcr_status_t st = dcr_objstore_create(&oc, &s);
    if (st != DCR_OK) fail_msg("store %s: %s", url, dcr_error_line(st));
    char key[256];
    snprintf(key, sizeof key, "attempt-%" PRIu64 "/%s", tau, name);
    st = dcr_objstore_put(s, key, buf, len, NULL);
    if (st != DCR_OK) fail_msg("put %s: %s", key, dcr_error_line(st));
    dcr_objstore_destroy(s);
}

static inline dcr_transport_t *tp_create(const char *backend, const dcr_transport_config_t *c)
{
    dcr_transport_t *t = NULL;
    dcr_status_t st = dcr_transport_create(backend, c, &t);
    if (st != DCR_OK) fail_msg("create %s: %s", backend, dcr_error_line(st));
    return t;
}

/* ---- owners ---------------------------------------------------------------- */

typedef struct tp_owner {
    dcr_transport_t *t;
    int owner;
    tp_payload_t *p; /* this owner's payloads */
    size_t n;
    bool finish;
    int delay_ms;    /* between sends */
    atomic_int sent; /* sends that returned DCR_OK */
    dcr_status_t st; /* first failure */
    char err[600];
} tp_owner_t;

static inline void *tp_owner_main(void *arg)
{
    tp_owner_t *o = arg;
    o->st = DCR_OK;
    for (size_t i = 0; i < o->n; i++) {
        dcr_status_t st = dcr_transport_send(o->t, o->owner, o->p[i].id, o->p[i].buf, o->p[i].len);
        if (st != DCR_OK) {
            o->st = st;
            snprintf(o->err, sizeof o->err, "%s", dcr_error_line(st));
            return NULL;
        }
        atomic_fetch_add(&o->sent, 1);
        if (o->delay_ms) usleep((useconds_t)o->delay_ms * 1000);
    }
    if (o->finish) {
        dcr_status_t st = dcr_transport_finish(o->t, o->owner, o->n);
        if (st != DCR_OK) {
            o->st = st;
            snprintf(o->err, sizeof o->err, "%s", dcr_error_line(st));
        }
    }
    return NULL;
}

/* ---- rollout nodes --------------------------------------------------------- */

typedef struct tp_got {
    uint64_t tau;
    uint32_t owner;
    uint64_t id;
    uint8_t *buf;
    size_t len;
} tp_got_t;

typedef struct tp_node {
    dcr_transport_t *t;
    int node;
    int start_delay_ms; /* sleep before the first recv (back-pressure tests) */
    int budget_ms;      /* give up after this long without the end */
    tp_got_t *got;
    size_t n, cap;
    dcr_status_t end; /* DCR_ECLOSED on a clean end */
    char err[600];
} tp_node_t;

static inline void *tp_node_main(void *arg)
{
    tp_node_t *nd = arg;
    if (nd->start_delay_ms) usleep((useconds_t)nd->start_delay_ms * 1000);
    double t0 = dcr_clock_s();
    int budget = nd->budget_ms ? nd->budget_ms : 10000;
    for (;;) {
        dcr_delivery_t d = {0};
        dcr_status_t st = dcr_transport_recv(nd->t, nd->node, 200, &d);
        if (st == DCR_ETIMEOUT) {
            if ((dcr_clock_s() - t0) * 1000 > budget) {
                nd->end = DCR_ETIMEOUT;
                snprintf(nd->err, sizeof nd->err, "node %d: no end within %d ms", nd->node, budget);
                return NULL;
            }
            continue;
        }
        if (st != DCR_OK) {
            nd->end = st;
            snprintf(nd->err, sizeof nd->err, "%s", dcr_error_line(st));
            return NULL;
        }
        dcr_payload_header_t h;
        dcr_status_t pst = dcr_payload_peek(d.data, d.len, true, &h);
        if (nd->n == nd->cap) {
            nd->cap = nd->cap ? 2 * nd->cap : 16;
            nd->got = realloc(nd->got, nd->cap * sizeof *nd->got);
        }
        tp_got_t *g = &nd->got[nd->n++];
        *g = (tp_got_t){pst == DCR_OK ? h.tau : 0, pst == DCR_OK ? h.owner : UINT32_MAX,
                        pst == DCR_OK ? h.payload_id : 0, malloc(d.len), d.len};
        memcpy(g->buf, d.data, d.len);
        dcr_transport_release(nd->t, nd->node, &d);
    }
}

static inline void tp_node_free(tp_node_t *nd)
{
    for (size_t i = 0; i < nd->n; i++) free(nd->got[i].buf);
    free(nd->got);
    nd->got = NULL;
    nd->n = nd->cap = 0;
}

/* Every payload of want[] arrived exactly once with identical bytes, and
 * nothing else arrived. */
static inline void tp_check_exactly_once(const tp_node_t *nd, const tp_payload_t *want, size_t n)
{
    if (nd->n != n) fail_msg("node %d received %zu payloads, expected %zu", nd->node, nd->n, n);
    for (size_t i = 0; i < n; i++) {
        int hits = 0;
        for (size_t j = 0; j < nd->n; j++) {
            const tp_got_t *g = &nd->got[j];
            if (g->tau != want[i].tau || g->owner != (uint32_t)want[i].owner || g->id != want[i].id)
                continue;
            hits++;
            if (g->len != want[i].len || memcmp(g->buf, want[i].buf, g->len) != 0) {
                fail_msg("node %d: payload owner %d id %" PRIu64 " differs from what was sent",
                         nd->node, want[i].owner, want[i].id);
            }
        }
        if (hits != 1) {
            fail_msg("node %d got payload (tau %" PRIu64 ", owner %d, id %" PRIu64 ") %d times",
                     nd->node, want[i].tau, want[i].owner, want[i].id, hits);
        }
    }
}

/* Starts one thread per owner and per node, joins them, checks clean ends. */
static inline void tp_run(dcr_transport_t *t, tp_owner_t *owners, int world, tp_node_t *nodes,
                          int nn)
{
    pthread_t *ot = calloc((size_t)world, sizeof *ot), *nt = calloc((size_t)nn, sizeof *nt);
    for (int i = 0; i < nn; i++) {
        nodes[i].t = t;
        nodes[i].node = i;
        assert_int_equal(pthread_create(&nt[i], NULL, tp_node_main, &nodes[i]), 0);
    }
    for (int i = 0; i < world; i++) {
        owners[i].t = t;
        owners[i].owner = i;
        assert_int_equal(pthread_create(&ot[i], NULL, tp_owner_main, &owners[i]), 0);
    }
    for (int i = 0; i < world; i++) pthread_join(ot[i], NULL);
    for (int i = 0; i < nn; i++) pthread_join(nt[i], NULL);
    free(ot);
    free(nt);
    for (int i = 0; i < world; i++) {
        if (owners[i].st != DCR_OK) fail_msg("owner %d: %s", i, owners[i].err);
    }
    for (int i = 0; i < nn; i++) {
        if (nodes[i].end != DCR_ECLOSED) fail_msg("node %d: %s", i, nodes[i].err);
    }
}

/* Builds per-owner payload arrays: k payloads per owner of `count` records. */
static inline tp_payload_t **tp_make_set(uint64_t tau, int world, int k, size_t count,
                                         uint64_t seed, tp_payload_t **flat_p)
{
    tp_payload_t **per = calloc((size_t)world, sizeof *per);
    tp_payload_t *flat = calloc((size_t)(world * k), sizeof *flat);
    for (int o = 0; o < world; o++) {
        per[o] = calloc((size_t)k, sizeof **per);
        for (int j = 0; j < k; j++) {
            per[o][j] = tp_payload_make(tau, o, (uint64_t)(100 + j), count + (size_t)(o * 3 + j),
                                        seed ? seed + (uint64_t)(o * 1000 + j) : 0);
            flat[o * k + j] = per[o][j];
        }
    }
    *flat_p = flat;
    return per;
}

/* Frees a set made by tp_make_set (buffers are shared by both arrays). */
static inline void tp_free_set(tp_payload_t **per, tp_payload_t *flat, int world, int k)
{
    for (int i = 0; i < world * k; i++) free(flat[i].buf);
    for (int o = 0; o < world; o++) free(per[o]);
    free(per);
    free(flat);
}

static inline int64_t tp_sum_len(const tp_payload_t *p, size_t n)
{
    int64_t s = 0;
    for (size_t i = 0; i < n; i++) s += (int64_t)p[i].len;
    return s;
}

#endif
