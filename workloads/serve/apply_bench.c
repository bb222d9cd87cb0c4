/* Receiver apply time against a dense load of the same tensors (DESIGN.md
 * section 10: at 1% change, apply at most 0.2x of the dense load). One
 * receiver of a serving layout is dense-loaded with random bits, prewarmed,
 * and then refit at each rate from records of the bitwise diff (uniform
 * positions, XOR where its path allows, overwrite elsewhere), encoded into
 * payloads. Timing covers only the receiver: a dense reload of the version it
 * holds, and the apply of decoded items (plus, separately, validate + decode
 * + apply), alternated in one process and kept as the best of the repeats.
 * Every refit is checked bit-exact against a fresh dense load outside the
 * timed parts. */
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/rng.h"
#include "dcr/storage_large.h"
#include "workloads/serve/serve_bench.h"

typedef struct dcr__bench {
    const dcr_model_config_t *m;
    const dcr_inventory_t *inv;
    const dcr_serve_config_t *sc;
    const dcr_serve_bench_options_t *opt;
    dcr_storage_t **w; /* the version the receivers hold */
    dcr_rng_t rng;
    dcr_receiver_t *r;     /* measured */
    dcr_receiver_t *full;  /* compare_full: the seed's full pass */
    dcr_receiver_t *rerun; /* compare_loader: the loader run for every item */
    dcr_storage_t *flat;   /* the floor loop's target: every canonical tensor, back to back */
    size_t *flat_at;       /* per tensor: its byte offset in flat */
} dcr__bench_t;

static void dcr__tensors_free(dcr_storage_t **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) dcr_storage_destroy(t[i]);
    free(t);
}

static dcr_status_t dcr__tensors(const dcr_inventory_t *inv, dcr_storage_t ***out_p)
{
    size_t n = dcr_inventory_count(inv);
    dcr_storage_t **t = calloc(n ? n : 1, sizeof(*t));
    if (t == NULL) return dcr_error_set(DCR_ENOMEM, "bench: tensors");
    for (size_t i = 0; i < n; i++) {
        dcr_status_t st = dcr_storage_create(dcr_desc_bytes(dcr_inventory_at(inv, i)), &t[i]);
        if (st != DCR_OK) {
            dcr__tensors_free(t, n);
            return st;
        }
    }
    *out_p = t;
    return DCR_OK;
}

/* Random finite words (bits of a random value with a bounded exponent), the
 * kind of weights a model holds; edge values are the tests' business. */
static void dcr__random_fill(dcr_rng_t *rng, const dcr_tensor_desc_t *d, void *data)
{
    int64_t n = dcr_desc_numel(d);
    size_t es = dcr_dtype_size(d->dtype);
    for (int64_t i = 0; i < n; i += 4) {
        uint64_t r = dcr_rng_u64(rng);
        for (int64_t k = 0; k < 4 && i + k < n; k++) {
            uint64_t w = (r >> (16 * k)) & 0x3FFF; /* |x| < 2, sign random via bit 15 */
            w |= (r >> (16 * k)) & 0x8000;
            if (es == 4) w = w << 16 | (w & 0xFFFF);
            memcpy((char *)data + (size_t)(i + k) * es, &w, es);
        }
    }
}

/* Changes exactly round(rate * n) distinct positions of every tensor (drawn
 * uniformly, repeats rejected through a bitmap) by flipping low mantissa
 * bits, so every chosen word changes. */
static dcr_status_t dcr__mutate(dcr_rng_t *rng, const dcr_tensor_desc_t *d, const void *old,
                                void *new_, double rate)
{
    int64_t n = dcr_desc_numel(d);
    size_t es = dcr_dtype_size(d->dtype);
    memcpy(new_, old, (size_t)n * es);
    int64_t k = (int64_t)(rate * (double)n + 0.5);
    uint8_t *hit = calloc((size_t)(n ? n : 1), 1);
    if (hit == NULL) return dcr_error_set(DCR_ENOMEM, "bench: change bitmap");
    for (int64_t j = 0; j < k; j++) {
        int64_t i;
        do i = (int64_t)dcr_rng_below(rng, (uint64_t)n);
        while (hit[i]);
        hit[i] = 1;
        uint8_t *p = (uint8_t *)new_ + (size_t)i * es;
        p[0] ^= (uint8_t)(1 + dcr_rng_below(rng, 255));
    }
    free(hit);
    return DCR_OK;
}

/* Records of one tensor into caller buffers; returns the count. */
static size_t dcr__diff(const dcr_tensor_desc_t *d, const void *old, const void *new_,
                        dcr_encoding_t enc, int64_t *idx, uint8_t *val)
{
    int64_t n = dcr_desc_numel(d);
    size_t es = dcr_dtype_size(d->dtype), c = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = 0, b = 0;
        memcpy(&a, (const char *)old + (size_t)i * es, es);
        memcpy(&b, (const char *)new_ + (size_t)i * es, es);
        if (a == b) continue;
        uint64_t v = enc == DCR_ENCODING_XOR ? a ^ b : b;
        idx[c] = i;
        memcpy(val + c * es, &v, es);
        c++;
    }
    return c;
}

/* The records of every tensor, kept for the floor loop. */
typedef struct dcr__records {
    size_t nt;
    size_t *count;
    int64_t **idx;
    uint8_t **val;
    bool *xor_enc;
} dcr__records_t;

static void dcr__records_free(dcr__records_t *r)
{
    for (size_t t = 0; r->idx && t < r->nt; t++) {
        free(r->idx[t]);
        free(r->val[t]);
    }
    free(r->count);
    free(r->idx);
    free(r->val);
    free(r->xor_enc);
    memset(r, 0, sizeof(*r));
}

static dcr_status_t dcr__records_init(dcr__records_t *r, size_t nt)
{
    r->nt = nt;
    r->count = calloc(nt + 1, sizeof(*r->count));
    r->idx = calloc(nt + 1, sizeof(*r->idx));
    r->val = calloc(nt + 1, sizeof(*r->val));
    r->xor_enc = calloc(nt + 1, sizeof(*r->xor_enc));
    if (!r->count || !r->idx || !r->val || !r->xor_enc) {
        dcr__records_free(r);
        return dcr_error_set(DCR_ENOMEM, "bench: records of %zu tensors", nt);
    }
    return DCR_OK;
}

static dcr_status_t dcr__records_keep(dcr__records_t *r, size_t t, const int64_t *idx,
                                      const uint8_t *val, size_t c, size_t es, bool xor_enc)
{
    r->idx[t] = malloc(c * sizeof(*idx));
    r->val[t] = malloc(c * es);
    if (!r->idx[t] || !r->val[t]) return dcr_error_set(DCR_ENOMEM, "bench: records");
    memcpy(r->idx[t], idx, c * sizeof(*idx));
    memcpy(r->val[t], val, c * es);
    r->count[t] = c;
    r->xor_enc[t] = xor_enc;
    return DCR_OK;
}

/* Records ahead of the current one whose destination is prefetched, as the
 * receiver's own sparse loop does. */
#define DCR__FLOOR_AHEAD 64

#define DCR__FLOOR_LOOP(T)                                                                         \
    do {                                                                                           \
        T *d = data;                                                                               \
        for (size_t k = 0; k < c; k++) {                                                           \
            if (k + DCR__FLOOR_AHEAD < c) __builtin_prefetch(d + idx[k + DCR__FLOOR_AHEAD], 1);    \
            T w;                                                                                   \
            memcpy(&w, val + k * sizeof(T), sizeof(T));                                            \
            d[idx[k]] = xor_enc ? (T)(d[idx[k]] ^ w) : w;                                          \
        }                                                                                          \
    } while (0)

/* The bare loop: every record of one tensor into data. */
static void dcr__floor_tensor(void *data, size_t es, const int64_t *idx, const uint8_t *val,
                              size_t c, bool xor_enc)
{
    if (es == 2)
        DCR__FLOOR_LOOP(uint16_t);
    else if (es == 4)
        DCR__FLOOR_LOOP(uint32_t);
    else
        DCR__FLOOR_LOOP(uint8_t);
}

/* The floor's buffer made the held version (every tensor: called before
 * the records exist for the cold floor). */
static void dcr__floor_prepare(const dcr__bench_t *b)
{
    char *flat = b->flat->data;
    for (size_t t = 0; t < dcr_inventory_count(b->inv); t++)
        memcpy(flat + b->flat_at[t], b->w[t]->data, b->w[t]->bytes);
}

/* Times the floor loop over the floor's buffer as it is (the held version),
 * then checks that it made it the new version n (the records are the whole
 * diff). */
static dcr_status_t dcr__floor_run(const dcr__bench_t *b, const dcr__records_t *r,
                                   dcr_storage_t **n, double *floor_s)
{
    char *flat = b->flat->data;
    double t0 = dcr_clock_s();
    for (size_t t = 0; t < r->nt; t++)
        if (r->count[t])
            dcr__floor_tensor(flat + b->flat_at[t],
                              dcr_dtype_size(dcr_inventory_at(b->inv, t)->dtype), r->idx[t],
                              r->val[t], r->count[t], r->xor_enc[t]);
    *floor_s = dcr_clock_s() - t0;
    for (size_t t = 0; t < r->nt; t++)
        if (r->count[t] && memcmp(flat + b->flat_at[t], n[t]->data, n[t]->bytes))
            return dcr_error_set(DCR_EMISMATCH, "bench: the floor loop did not rebuild %s",
                                 dcr_inventory_at(b->inv, t)->name);
    return DCR_OK;
}

/* The floor as first measured: its buffer written with the held version
 * just before the loop, so the loop starts with the buffer's translations
 * (and the tail of its bytes) warm, which the apply's resident bytes are
 * not: they were last written by the dense reload, before the new version
 * and its payloads were made. */
static dcr_status_t dcr__floor_timed(const dcr__bench_t *b, const dcr__records_t *r,
                                     dcr_storage_t **n, double *floor_s)
{
    dcr__floor_prepare(b);
    return dcr__floor_run(b, r, n, floor_s);
}

/* The floor's buffer, touched once so that no page fault lands in the timing. */
static dcr_status_t dcr__flat_create(dcr__bench_t *b)
{
    size_t nt = dcr_inventory_count(b->inv), total = 0;
    b->flat_at = calloc(nt + 1, sizeof(*b->flat_at));
    if (b->flat_at == NULL) return dcr_error_set(DCR_ENOMEM, "bench: floor offsets");
    for (size_t t = 0; t < nt; t++) {
        b->flat_at[t] = total;
        total += dcr_desc_bytes(dcr_inventory_at(b->inv, t));
    }
    DCR_CHECK(dcr_storage_create_large(total ? total : 1, &b->flat));
    memset(b->flat->data, 0x3c, total);
    return DCR_OK;
}

typedef struct dcr__payloads {
    uint8_t **buf;
    size_t *len;
    size_t n, cap, bytes;
} dcr__payloads_t;

static void dcr__payloads_free(dcr__payloads_t *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->buf[i]);
    free(p->buf);
    free(p->len);
    memset(p, 0, sizeof(*p));
}

static dcr_status_t dcr__payloads_take(dcr__payloads_t *p, dcr_encoder_t *e, uint64_t tau)
{
    if (dcr_encoder_item_count(e) == 0) return DCR_OK;
    dcr_encode_params_t prm = {tau, 0, p->n, DCR_CODEC_LEVEL_DEFAULT, false};
    const uint8_t *buf;
    size_t len;
    DCR_CHECK(dcr_encoder_finish(e, &prm, &buf, &len));
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        uint8_t **b = realloc(p->buf, cap * sizeof(*b));
        if (b) p->buf = b;
        size_t *l = realloc(p->len, cap * sizeof(*l));
        if (l) p->len = l;
        if (b == NULL || l == NULL) return dcr_error_set(DCR_ENOMEM, "bench: payload list");
        p->cap = cap;
    }
    p->buf[p->n] = malloc(len);
    if (p->buf[p->n] == NULL) return dcr_error_set(DCR_ENOMEM, "bench: payload");
    memcpy(p->buf[p->n], buf, len);
    p->len[p->n++] = len;
    p->bytes += len;
    return DCR_OK;
}

/* Encodes the diff of every tensor the receiver holds into payloads of
 * about 64 MiB of records each. */
static dcr_status_t dcr__encode(dcr__bench_t *b, dcr_receiver_t *r, dcr_storage_t **n, uint64_t tau,
                                dcr__payloads_t *out, dcr__records_t *kept, int64_t *records_p)
{
    size_t nt = dcr_inventory_count(b->inv);
    size_t most = 1;
    for (size_t t = 0; t < nt; t++) {
        size_t k = (size_t)dcr_desc_numel(dcr_inventory_at(b->inv, t));
        if (k > most) most = k;
    }
    int64_t *idx = malloc(most * sizeof(*idx));
    uint8_t *val = malloc(most * 8);
    dcr_encoder_t *e = NULL;
    dcr_status_t st = idx && val ? dcr_encoder_create(&e) : dcr_error_set(DCR_ENOMEM, "bench");
    int64_t records = 0;
    for (size_t t = 0; st == DCR_OK && t < nt; t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(b->inv, t);
        dcr_path_info_t pi;
        st = dcr_receiver_path(r, t, &pi);
        if (st != DCR_OK || pi.cls == DCR_PATH_SKIPPED) continue;
        dcr_encoding_t enc = pi.cls == DCR_PATH_XOR ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE;
        size_t c = dcr__diff(d, b->w[t]->data, n[t]->data, enc, idx, val);
        if (c == 0) continue;
        records += (int64_t)c;
        st = dcr__records_keep(kept, t, idx, val, c, dcr_dtype_size(d->dtype),
                               enc == DCR_ENCODING_XOR);
        if (st != DCR_OK) break;
        dcr_codec_item_t it = {d->name, d->ndim, d->shape, d->dtype, enc, c, idx, 0, val};
        st = dcr_encoder_add(e, &it);
        if (st == DCR_OK && dcr_encoder_raw_len(e) > ((size_t)64 << 20))
            st = dcr__payloads_take(out, e, tau);
    }
    if (st == DCR_OK) st = dcr__payloads_take(out, e, tau);
    dcr_encoder_destroy(e);
    free(idx);
    free(val);
    if (st == DCR_OK) *records_p = records;
    return st;
}

/* A receiver of the layout holding version w (dense-loaded, not timed). */
static dcr_status_t dcr__fresh(const dcr__bench_t *b, bool full_pass, bool per_item,
                               dcr_storage_t **w, dcr_receiver_t **out_p)
{
    dcr_receiver_config_t base = {.full_pass = full_pass, .loader_per_item = per_item};
    dcr_receiver_t *r;
    DCR_CHECK(dcr_serve_receiver_create(b->m, b->inv, b->sc, b->opt->receiver, &base, &r));
    dcr_status_t st = dcr_receiver_load_dense_all(r, w);
    if (st != DCR_OK) {
        dcr_receiver_destroy(r);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

/* Applies the payloads to r as attempt tau: the apply time from the
 * receiver's statistics, the wall time of the whole ingest, and how the
 * items ran. */
static dcr_status_t dcr__apply_timed(dcr_receiver_t *r, const dcr__payloads_t *ps, uint64_t tau,
                                     double *apply_s, double *ingest_s, dcr_receiver_stats_t *delta)
{
    DCR_CHECK(dcr_receiver_begin_attempt(r, tau));
    dcr_receiver_stats_t s0, s1;
    dcr_receiver_stats(r, &s0);
    double t0 = dcr_clock_s();
    for (size_t i = 0; i < ps->n; i++)
        DCR_CHECK(dcr_receiver_apply_payload(r, ps->buf[i], ps->len[i], NULL));
    *ingest_s = dcr_clock_s() - t0;
    dcr_receiver_stats(r, &s1);
    *apply_s = s1.apply_s - s0.apply_s;
    delta->items_sparse = s1.items_sparse - s0.items_sparse;
    delta->items_full = s1.items_full - s0.items_full;
    return DCR_OK;
}

/* The oracle: r must equal a fresh dense load of version n, bit for bit. */
static dcr_status_t dcr__check(const dcr__bench_t *b, const dcr_receiver_t *r,
                               const dcr_receiver_t *fresh, double rate, const char *which)
{
    const char *param = NULL;
    int64_t elem = -1;
    if (dcr_receiver_equal(r, fresh, &param, &elem)) return DCR_OK;
    return dcr_error_set(DCR_EMISMATCH,
                         "bench: rate %g: %s receiver: %s[%lld] differs from the dense refit", rate,
                         which, param, (long long)elem);
}

static void dcr__keep_best(double *best, double s, bool first)
{
    if (first || s < *best) *best = s;
}

/* One repeat of one rate: dense reload, new version, payloads, timed
 * applies, oracle checks. The receivers then hold the new version. */
static dcr_status_t dcr__bench_rate(dcr__bench_t *b, double rate, uint64_t tau, bool first,
                                    dcr_serve_bench_result_t *res)
{
    size_t nt = dcr_inventory_count(b->inv);
    double t0 = dcr_clock_s();
    DCR_CHECK(dcr_receiver_load_dense_all(b->r, b->w));
    dcr__keep_best(&res->dense_s, dcr_clock_s() - t0, first);
    /* The cold floor's buffer gets the held version at the point where the
     * measured receiver's resident bytes got it, and its loop runs right
     * after the apply: both start after the same work (the new version and
     * its payloads made, about three times the model's bytes). */
    dcr__floor_prepare(b);
    dcr_storage_t **n;
    DCR_CHECK(dcr__tensors(b->inv, &n));
    dcr__payloads_t ps = {0};
    dcr__records_t kept = {0};
    dcr_status_t st = dcr__records_init(&kept, nt);
    for (size_t t = 0; st == DCR_OK && t < nt; t++)
        st = dcr__mutate(&b->rng, dcr_inventory_at(b->inv, t), b->w[t]->data, n[t]->data, rate);
    if (st == DCR_OK) st = dcr__encode(b, b->r, n, tau, &ps, &kept, &res->records);
    double apply_s = 0, ingest_s = 0, full_s = 0, full_ingest_s = 0, floor_cold_s = 0;
    dcr_receiver_stats_t d = {0}, dfull = {0};
    if (st == DCR_OK) st = dcr__apply_timed(b->r, &ps, tau, &apply_s, &ingest_s, &d);
    if (st == DCR_OK) st = dcr__floor_run(b, &kept, n, &floor_cold_s);
    if (st == DCR_OK && b->full)
        st = dcr__apply_timed(b->full, &ps, tau, &full_s, &full_ingest_s, &dfull);
    double rerun_s = 0, rerun_ingest_s = 0;
    dcr_receiver_stats_t drerun = {0};
    if (st == DCR_OK && b->rerun)
        st = dcr__apply_timed(b->rerun, &ps, tau, &rerun_s, &rerun_ingest_s, &drerun);
    double floor_s = 0;
    if (st == DCR_OK) st = dcr__floor_timed(b, &kept, n, &floor_s);
    dcr__records_free(&kept);
    dcr_receiver_t *fresh = NULL;
    if (st == DCR_OK) st = dcr__fresh(b, false, false, n, &fresh);
    if (st == DCR_OK) st = dcr__check(b, b->r, fresh, rate, "measured");
    if (st == DCR_OK && b->full) st = dcr__check(b, b->full, fresh, rate, "full-pass");
    if (st == DCR_OK && b->rerun) st = dcr__check(b, b->rerun, fresh, rate, "loader-per-item");
    dcr_receiver_destroy(fresh);
    res->payload_bytes = ps.bytes;
    dcr__payloads_free(&ps);
    if (st != DCR_OK) {
        dcr__tensors_free(n, nt);
        return st;
    }
    dcr__keep_best(&res->apply_s, apply_s, first);
    dcr__keep_best(&res->ingest_s, ingest_s, first);
    dcr__keep_best(&res->full_apply_s, full_s, first);
    dcr__keep_best(&res->floor_s, floor_s, first);
    dcr__keep_best(&res->floor_cold_s, floor_cold_s, first);
    dcr__keep_best(&res->loader_apply_s, rerun_s, first);
    res->items_sparse = (int64_t)d.items_sparse;
    res->items_full = (int64_t)d.items_full;
    dcr__tensors_free(b->w, nt);
    b->w = n;
    return DCR_OK;
}

/* Random weights, the measured receiver (and the comparison one) dense
 * loaded and prewarmed. */
static dcr_status_t dcr__bench_setup(dcr__bench_t *b)
{
    DCR_CHECK(dcr__tensors(b->inv, &b->w));
    for (size_t t = 0; t < dcr_inventory_count(b->inv); t++)
        dcr__random_fill(&b->rng, dcr_inventory_at(b->inv, t), b->w[t]->data);
    DCR_CHECK(dcr__fresh(b, b->opt->full_pass, false, b->w, &b->r));
    DCR_CHECK(dcr_receiver_prewarm(b->r));
    DCR_CHECK(dcr__flat_create(b));
    if (b->opt->compare_loader) {
        DCR_CHECK(dcr__fresh(b, b->opt->full_pass, true, b->w, &b->rerun));
        DCR_CHECK(dcr_receiver_prewarm(b->rerun));
    }
    if (!b->opt->compare_full) return DCR_OK;
    DCR_CHECK(dcr__fresh(b, true, false, b->w, &b->full));
    return dcr_receiver_prewarm(b->full);
}

static void dcr__ratios(const dcr_receiver_t *r, dcr_serve_bench_result_t *res)
{
    res->ratio = res->dense_s > 0 ? res->apply_s / res->dense_s : 0;
    res->full_ratio = res->dense_s > 0 ? res->full_apply_s / res->dense_s : 0;
    res->floor_ratio = res->dense_s > 0 ? res->floor_s / res->dense_s : 0;
    res->resident_bytes = dcr_params_bytes(dcr_receiver_params(r));
}

dcr_status_t dcr_serve_bench_run(const dcr_model_config_t *model, const dcr_serve_config_t *sc,
                                 const dcr_serve_bench_options_t *opt, const double *rates,
                                 int nrates, dcr_serve_bench_result_t *out)
{
    if (model == NULL || sc == NULL || opt == NULL || rates == NULL || out == NULL || nrates < 1)
        return dcr_error_set(DCR_EINVAL, "bench apply: NULL argument or no rate");
    if (opt->repeats < 1) return dcr_error_set(DCR_EINVAL, "bench apply: repeats must be >= 1");
    for (int i = 0; i < nrates; i++)
        if (!(rates[i] > 0 && rates[i] <= 1))
            return dcr_error_set(DCR_EINVAL, "bench apply: rate %g outside (0, 1]", rates[i]);
    dcr_inventory_t *inv;
    DCR_CHECK(dcr_model_build_inventory(model, &inv));
    dcr__bench_t b = {.m = model, .inv = inv, .sc = sc, .opt = opt};
    dcr_rng_seed(&b.rng, opt->seed);
    dcr_serve_bench_result_t *res = calloc((size_t)nrates, sizeof(*res));
    dcr_status_t st = res ? dcr__bench_setup(&b) : dcr_error_set(DCR_ENOMEM, "bench apply");
    uint64_t tau = 1;
    for (int rep = 0; st == DCR_OK && rep < opt->repeats; rep++)
        for (int i = 0; st == DCR_OK && i < nrates; i++) {
            res[i].rate = rates[i];
            st = dcr__bench_rate(&b, rates[i], tau++, rep == 0, &res[i]);
        }
    for (int i = 0; st == DCR_OK && i < nrates; i++) {
        dcr__ratios(b.r, &res[i]);
        out[i] = res[i];
    }
    free(res);
    dcr_receiver_destroy(b.full);
    dcr_receiver_destroy(b.rerun);
    dcr_receiver_destroy(b.r);
    dcr_storage_destroy(b.flat);
    free(b.flat_at);
    dcr__tensors_free(b.w, dcr_inventory_count(inv));
    dcr_inventory_destroy(inv);
    return st;
}

dcr_status_t dcr_serve_bench_apply(const dcr_model_config_t *model, const dcr_serve_config_t *sc,
                                   int receiver, bool full_pass, const double *rates, int nrates,
                                   uint64_t seed, dcr_serve_bench_result_t *out)
{
    dcr_serve_bench_options_t opt = {receiver, full_pass, false, 1, seed, false};
    return dcr_serve_bench_run(model, sc, &opt, rates, nrates, out);
}
