#include "workloads/harness/verify_paths.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/log.h"
#include "dcr/rng.h"
#include "workloads/change/budget.h"

const char *dcr_verify_path_name(dcr_verify_path_t p)
{
    static const char *const names[] = {"xor", "overwrite", "cast", "transform", "skipped"};
    return p < DCR_VERIFY_PATH_COUNT ? names[p] : "?";
}

/* Payloads handed over in memory. Owners' sender threads submit concurrently. */
typedef struct kept_payloads {
    pthread_mutex_t lock;
    uint8_t **data;
    size_t *len;
    size_t n, cap;
} kept_payloads_t;

static dcr_status_t keep(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    kept_payloads_t *k = ctx;
    pthread_mutex_lock(&k->lock);
    dcr_status_t st = DCR_OK;
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 64;
        uint8_t **d = realloc(k->data, cap * sizeof(*d));
        if (d) k->data = d;
        size_t *l = realloc(k->len, cap * sizeof(*l));
        if (l) k->len = l;
        if (d && l)
            k->cap = cap;
        else
            st = dcr_error_set(DCR_ENOMEM, "payload list");
    }
    if (st == DCR_OK && !(k->data[k->n] = malloc(len ? len : 1)))
        st = dcr_error_set(DCR_ENOMEM, "payload copy");
    if (st == DCR_OK) {
        memcpy(k->data[k->n], buf, len);
        k->len[k->n++] = len;
    }
    pthread_mutex_unlock(&k->lock);
    return st;
}

static void keep_clear(kept_payloads_t *k)
{
    for (size_t i = 0; i < k->n; i++) free(k->data[i]);
    k->n = 0;
}

/* The path an item takes on a receiver: the receiver's class of its tensor,
 * and for an overwrite item on an XOR-eligible path (residual tensors,
 * retries) the overwrite path. */
static dcr_verify_path_t classify(const dcr_receiver_t *r, size_t c, dcr_encoding_t encoding)
{
    dcr_path_info_t info;
    if (dcr_receiver_path(r, c, &info) != DCR_OK) return DCR_VERIFY_SKIPPED;
    if (info.cls == DCR_PATH_SKIPPED) return DCR_VERIFY_SKIPPED;
    if (info.cls == DCR_PATH_XOR)
        return encoding == DCR_ENCODING_XOR ? DCR_VERIFY_XOR : DCR_VERIFY_OVERWRITE;
    if (info.op && strstr(info.op, "cast")) return DCR_VERIFY_CAST;
    if (info.op && strstr(info.op, "map")) return DCR_VERIFY_TRANSFORM;
    return DCR_VERIFY_OVERWRITE;
}

typedef struct verify_state {
    const dcr_scenario_t *sc;
    dcr_serve_config_t serve;
    dcr_receiver_t **recv;
    int nrecv;
    dcr_storage_t **canonical, **committed, **candidate;
    uint8_t *xor_allowed;
    dcr_constructor_t *con;
    kept_payloads_t kept;
} verify_state_t;

/* Counts the items of the kept payloads by each receiver's path class;
 * classes_seen[r] collects the classes applied to receiver r. */
static dcr_status_t count_items(verify_state_t *v, dcr_verify_result_t *res, unsigned *classes_seen)
{
    dcr_payload_t *p;
    DCR_CHECK(dcr_payload_create(&p));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < v->kept.n && st == DCR_OK; i++) {
        st = dcr_payload_decode(p, v->kept.data[i], v->kept.len[i]);
        for (size_t j = 0; st == DCR_OK && j < dcr_payload_item_count(p); j++) {
            dcr_payload_item_t it;
            st = dcr_payload_item(p, j, &it);
            int64_t c = st == DCR_OK ? dcr_inventory_find(v->sc->inventory, it.name) : -1;
            for (int r = 0; c >= 0 && r < v->nrecv; r++) {
                dcr_verify_path_t cls = classify(v->recv[r], (size_t)c, it.encoding);
                res->items_by_path[cls]++;
                res->items += cls != DCR_VERIFY_SKIPPED;
                classes_seen[r] |= 1u << cls;
            }
        }
    }
    dcr_payload_destroy(p);
    return st;
}

static dcr_status_t apply_all(verify_state_t *v, uint64_t tau)
{
    for (int r = 0; r < v->nrecv; r++) {
        DCR_CHECK(dcr_receiver_begin_attempt(v->recv[r], tau));
        for (size_t i = 0; i < v->kept.n; i++) {
            dcr_ingest_t disposition;
            DCR_CHECK(dcr_receiver_apply_payload(v->recv[r], v->kept.data[i], v->kept.len[i],
                                                 &disposition));
        }
    }
    return DCR_OK;
}

/* Every receiver against a fresh dense load of the candidate's canonical tensors. */
static dcr_status_t compare_dense(verify_state_t *v, const unsigned *classes_seen,
                                  dcr_verify_result_t *res)
{
    DCR_CHECK(dcr_megatron_export(&v->sc->model, &v->sc->train, v->sc->layout, v->candidate,
                                  v->canonical));
    for (int r = 0; r < v->nrecv; r++) {
        dcr_receiver_t *dense;
        DCR_CHECK(
            dcr_serve_receiver_create(&v->sc->model, v->sc->inventory, &v->serve, r, NULL, &dense));
        dcr_status_t st = dcr_receiver_load_dense_all(dense, v->canonical);
        const char *param = NULL;
        int64_t elem = -1;
        res->cases++;
        if (st == DCR_OK && !dcr_receiver_equal(v->recv[r], dense, &param, &elem)) {
            res->mismatches++;
            DCR_LOG_ERROR("verify-paths: receiver %d differs from its dense refit at %s[%lld]", r,
                          param ? param : "?", (long long)elem);
            for (int k = 0; k < DCR_VERIFY_PATH_COUNT; k++)
                if (classes_seen[r] & (1u << k)) res->mismatches_by_path[k]++;
        }
        dcr_receiver_destroy(dense);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

static dcr_status_t one_trial(verify_state_t *v, dcr_rng_t *rng, int trial,
                              dcr_verify_result_t *res)
{
    size_t ns = (size_t)v->sc->layout->nshards;
    for (size_t s = 0; s < ns; s++)
        memcpy(v->candidate[s]->data, v->committed[s]->data, v->committed[s]->bytes);
    double rate = 0.001 + 0.2 * dcr_rng_uniform(rng);
    int64_t changed = 0;
    uint64_t seed = dcr_rng_u64(rng);
    DCR_CHECK(dcr_scenario_inject_uniform(v->sc, rate, seed, v->candidate, v->canonical, &changed));
    DCR_CHECK(dcr_scenario_inject_edges(v->sc, 2, seed + 1, v->candidate, v->canonical, &changed));
    /* Odd trials are overwrite retries: every record absolute. */
    bool overwrite = trial % 2 == 1;
    dcr_payload_sink_t sink = {keep, &v->kept};
    keep_clear(&v->kept);
    DCR_CHECK(dcr_constructor_run(v->con, v->candidate, (uint64_t)trial + 1, v->xor_allowed,
                                  overwrite, &sink, NULL));
    unsigned *seen = calloc((size_t)v->nrecv, sizeof(unsigned));
    if (!seen) return dcr_error_set(DCR_ENOMEM, "verify-paths");
    dcr_status_t st = count_items(v, res, seen);
    if (st == DCR_OK) st = apply_all(v, (uint64_t)trial + 1);
    if (st == DCR_OK) st = compare_dense(v, seen, res);
    free(seen);
    DCR_CHECK(st);
    DCR_CHECK(dcr_constructor_commit(v->con));
    dcr_storage_t **swap = v->committed;
    v->committed = v->candidate;
    v->candidate = swap;
    DCR_LOG_INFO("verify-paths: trial %d at rate %.3f: %lld mismatches so far", trial + 1, rate,
                 (long long)res->mismatches);
    return DCR_OK;
}

static dcr_status_t setup(verify_state_t *v, uint64_t seed)
{
    DCR_CHECK(dcr_serve_register_loaders());
    DCR_CHECK(
        dcr_scenario_check_memory(v->sc, "verify-paths",
                                  &(dcr_run_shape_t){.canonical_copies = 1,
                                                     .shard_copies = 2,
                                                     .trackers = true,
                                                     .receivers = dcr_serve_receivers(&v->serve),
                                                     .serve_tp = v->serve.tp,
                                                     .verifiers = 1,
                                                     .transient = true}));
    DCR_CHECK(dcr_scenario_alloc_canonical(v->sc, &v->canonical));
    DCR_CHECK(dcr_scenario_alloc_shards(v->sc, &v->committed));
    DCR_CHECK(dcr_scenario_alloc_shards(v->sc, &v->candidate));
    dcr_scenario_init_weights(v->sc, seed, v->canonical);
    DCR_CHECK(dcr_megatron_import(&v->sc->model, &v->sc->train, v->sc->layout, v->canonical,
                                  v->committed));
    /* Receivers start from what the committed shards export to: the
     * constructor's residual baseline. For most tensors that is the initial
     * canonical value, but an FP8 export re-quantizes the BF16 masters that
     * import made from it, which need not give back the same bits. */
    DCR_CHECK(dcr_megatron_export(&v->sc->model, &v->sc->train, v->sc->layout, v->committed,
                                  v->canonical));
    v->nrecv = dcr_serve_receivers(&v->serve);
    v->recv = calloc((size_t)v->nrecv, sizeof(*v->recv));
    size_t nc = dcr_inventory_count(v->sc->inventory);
    v->xor_allowed = calloc(nc + 1, 1);
    if (!v->recv || !v->xor_allowed) return dcr_error_set(DCR_ENOMEM, "verify-paths");
    for (int r = 0; r < v->nrecv; r++) {
        DCR_CHECK(dcr_serve_receiver_create(&v->sc->model, v->sc->inventory, &v->serve, r, NULL,
                                            &v->recv[r]));
        DCR_CHECK(dcr_receiver_load_dense_all(v->recv[r], v->canonical));
        DCR_CHECK(dcr_receiver_prewarm(v->recv[r]));
    }
    for (size_t c = 0; c < nc; c++) v->xor_allowed[c] = dcr_serve_xor_allowed(v->recv, v->nrecv, c);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.bucket_bytes = 1 << 16; /* several payloads per owner */
    cfg.chunk_bytes = 1 << 13;
    return dcr_constructor_create(v->sc->layout, &cfg, v->committed, &v->con);
}

dcr_status_t dcr_verify_paths(const dcr_scenario_spec_t *spec, const dcr_serve_config_t *serve,
                              int trials, uint64_t seed, dcr_verify_result_t *out_p)
{
    if (trials < 1) return dcr_error_set(DCR_EINVAL, "verify-paths needs >= 1 trial");
    dcr_scenario_spec_t sp = *spec;
    sp.align_extra = serve->tp;
    dcr_scenario_t *sc = NULL;
    verify_state_t v;
    memset(&v, 0, sizeof(v));
    pthread_mutex_init(&v.kept.lock, NULL);
    v.serve = *serve;
    dcr_verify_result_t res;
    memset(&res, 0, sizeof(res));
    dcr_status_t st = dcr_scenario_create(&sp, &sc);
    v.sc = sc;
    if (st == DCR_OK) st = dcr_serve_config_validate(&sc->model, &v.serve);
    if (st == DCR_OK) st = setup(&v, seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int t = 0; st == DCR_OK && t < trials; t++) st = one_trial(&v, &rng, t, &res);
    dcr_constructor_destroy(v.con);
    for (int r = 0; v.recv && r < v.nrecv; r++) dcr_receiver_destroy(v.recv[r]);
    free(v.recv);
    free(v.xor_allowed);
    keep_clear(&v.kept);
    free(v.kept.data);
    free(v.kept.len);
    pthread_mutex_destroy(&v.kept.lock);
    if (sc) {
        dcr_scenario_free_tensors(v.canonical, dcr_inventory_count(sc->inventory));
        dcr_scenario_free_tensors(v.committed, (size_t)sc->layout->nshards);
        dcr_scenario_free_tensors(v.candidate, (size_t)sc->layout->nshards);
    }
    dcr_scenario_destroy(sc);
    DCR_CHECK(st);
    *out_p = res;
    return DCR_OK;
}

void dcr_verify_result_print(const dcr_verify_result_t *r, bool json)
{
    if (json) {
        json_t *by = json_object();
        for (int k = 0; k < DCR_VERIFY_PATH_COUNT; k++)
            json_object_set_new(by, dcr_verify_path_name((dcr_verify_path_t)k),
                                json_pack("{s:I,s:I}", "items", (json_int_t)r->items_by_path[k],
                                          "mismatches", (json_int_t)r->mismatches_by_path[k]));
        json_t *j =
            json_pack("{s:I,s:I,s:I,s:o}", "cases", (json_int_t)r->cases, "items",
                      (json_int_t)r->items, "mismatches", (json_int_t)r->mismatches, "by_path", by);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
        return;
    }
    printf("%lld receiver checks, %lld items applied, %lld mismatches\n\n%-10s %10s %12s\n",
           (long long)r->cases, (long long)r->items, (long long)r->mismatches, "path", "items",
           "mismatches");
    for (int k = 0; k < DCR_VERIFY_PATH_COUNT; k++)
        printf("%-10s %10lld %12lld\n", dcr_verify_path_name((dcr_verify_path_t)k),
               (long long)r->items_by_path[k], (long long)r->mismatches_by_path[k]);
}
