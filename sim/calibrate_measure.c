/* `dcr calibrate`: the simulator's stage costs measured with the real engine
 * on this machine. Every figure comes from a public engine or workload entry
 * point (change detection, the codec, the constructor, a receiver, the
 * control plane, the directory object store); where one engine call covers
 * several stages, the stages measured on their own are subtracted and the
 * rest is what the remaining stage costs. Each figure is the best of a few
 * repetitions: the machine is shared, and noise only ever adds time. */
#define _XOPEN_SOURCE 700
#include "dcr/device.h"
#include "sim/calibrate.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/control.h"
#include "dcr/dtype.h"
#include "dcr/log.h"
#include "dcr/rng.h"
#include "dcr/transport.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/serve_bench.h"
#include "workloads/change/budget.h"
#include "workloads/harness/workdir.h"

/* Change rates of the per-rate figures: around the seed's 3% and 5% stress
 * cases and the 0.6-1.2% of real training steps. */
static const double dcr__cal_rates[] = {0.005, 0.01, 0.03, 0.05, 0.1};
static const double dcr__cal_rates_quick[] = {0.01, 0.05};
/* Detection runs in sub-runs of this many elements, as the constructor does. */
#define DCR__CAL_SUBRUN ((size_t)1 << 20)
/* Items of the codec measurement: the size of a Qwen3-30B expert projection. */
#define DCR__CAL_ITEM_ROWS 768
#define DCR__CAL_ITEM_COLS 2048

dcr_sim_cal_options_t dcr_sim_cal_options_default(void)
{
    return (dcr_sim_cal_options_t){DCR_MODEL_DEFAULT, 16, 8, false, 42};
}

static int dcr__cal_reps(const dcr_sim_cal_options_t *opt)
{
    return opt->quick ? 1 : 5;
}

static double dcr__min(double a, double b)
{
    return a < b ? a : b;
}

static int dcr__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dcr_sim_median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(double), dcr__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- synthetic BF16 weights and their changes ------------------------------ */

/* Linear-layer weights N(0, 0.02), as the scenarios draw them. */
static void dcr__cal_weights(dcr_rng_t *rng, uint16_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++) w[i] = dcr_f32_to_bf16((float)(0.02 * dcr_rng_normal(rng)));
}

/* The stress change of one element: relative amplitude about 1e-2, bits
 * guaranteed to change (the scenarios' rule). */
static uint16_t dcr__cal_changed(dcr_rng_t *rng, uint16_t w)
{
    float x = dcr_bf16_to_f32(w);
    uint16_t v = dcr_f32_to_bf16((float)(x * (1.0 + 0.01 * dcr_rng_normal(rng))));
    return v != w ? v : (uint16_t)(w ^ 1u);
}

/* ---- change detection ------------------------------------------------------ */

static dcr_status_t dcr__cal_detect(const dcr_sim_cal_options_t *opt, double rate, dcr_rng_t *rng,
                                    double *s_per_byte_p)
{
    size_t n = opt->quick ? ((size_t)2 << 20) : ((size_t)16 << 20);
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    uint32_t *out = malloc(DCR__CAL_SUBRUN * sizeof(uint32_t));
    if (!a || !b || !out) {
        free(a);
        free(b);
        free(out);
        return dcr_error_set(DCR_ENOMEM, "calibrate: detection buffers of %zu elements", n);
    }
    dcr__cal_weights(rng, a, n);
    for (size_t i = 0; i < n; i++)
        b[i] = dcr_rng_uniform(rng) < rate ? dcr__cal_changed(rng, a[i]) : a[i];
    double best = INFINITY;
    for (int r = 0; r < dcr__cal_reps(opt) + 1;
         r++) { /* the first pass warms the caches and pages */
        double t0 = dcr_clock_s();
        for (size_t off = 0; off < n; off += DCR__CAL_SUBRUN) {
            size_t len = n - off < DCR__CAL_SUBRUN ? n - off : DCR__CAL_SUBRUN;
            dcr_detect_changes(b + off, a + off, len, 2, out);
        }
        if (r > 0) best = dcr__min(best, dcr_clock_s() - t0);
    }
    free(a);
    free(b);
    free(out);
    *s_per_byte_p = best / (double)(n * 2);
    return DCR_OK;
}

/* ---- codec ------------------------------------------------------------------ */

/* One item's records at `rate`: sorted indices and the XOR masks and new
 * values of the changed elements of a fresh weight tensor. */
typedef struct dcr__cal_item {
    int64_t *idx;
    uint16_t *xor_v, *new_v;
    size_t count;
} dcr__cal_item_t;

static void dcr__cal_item_free(dcr__cal_item_t *it)
{
    free(it->idx);
    free(it->xor_v);
    free(it->new_v);
}

/* How an item's records are located, which decides the location words. */
typedef enum dcr__cal_loc {
    DCR__CAL_RUN = 0,    /* one contiguous run: no location words, values only */
    DCR__CAL_GAPS8 = 1,  /* uniform changes with every gap below 256: 1-byte gaps */
    DCR__CAL_GAPS16 = 2, /* uniform changes and one long gap: 2-byte gaps */
} dcr__cal_loc_t;

/* The gap to the next uniformly changed element (geometric with mean 1/rate). */
static int64_t dcr__cal_gap(dcr_rng_t *rng, double rate)
{
    double u = dcr_rng_uniform(rng);
    if (u <= 0) u = 1e-300;
    return 1 + (int64_t)floor(log(u) / log1p(-rate));
}

/* One item of a tensor of DCR__CAL_ITEM_ROWS x DCR__CAL_ITEM_COLS whose
 * elements change at `rate`, located as `loc` asks. */
static dcr_status_t dcr__cal_item_make(dcr_rng_t *rng, double rate, dcr__cal_loc_t loc, uint16_t *w,
                                       dcr__cal_item_t *it)
{
    int64_t n = (int64_t)DCR__CAL_ITEM_ROWS * DCR__CAL_ITEM_COLS;
    size_t cap = (size_t)(rate * (double)n * 1.5) + 64;
    it->idx = malloc(cap * sizeof(int64_t));
    it->xor_v = malloc(cap * 2);
    it->new_v = malloc(cap * 2);
    it->count = 0;
    if (!it->idx || !it->xor_v || !it->new_v)
        return dcr_error_set(DCR_ENOMEM, "calibrate: codec records");
    dcr__cal_weights(rng, w, (size_t)n);
    int64_t i = loc == DCR__CAL_RUN ? 0 : dcr__cal_gap(rng, rate) - 1;
    size_t want = (size_t)llround(rate * (double)n);
    while (i < n && it->count < cap && (loc != DCR__CAL_RUN || it->count < want)) {
        uint16_t v = dcr__cal_changed(rng, w[i]);
        it->idx[it->count] = i;
        it->xor_v[it->count] = (uint16_t)(w[i] ^ v);
        it->new_v[it->count] = v;
        it->count++;
        int64_t g = 1;
        if (loc != DCR__CAL_RUN) do
                g = dcr__cal_gap(rng, rate);
            while (loc == DCR__CAL_GAPS8 && g > 255);
        i += g;
    }
    if (loc == DCR__CAL_GAPS16 && it->count > 1 &&
        it->idx[it->count - 1] - it->idx[it->count - 2] <= 255) {
        if (it->idx[it->count - 2] + 300 < n)
            it->idx[it->count - 1] = it->idx[it->count - 2] + 300;
        else
            it->count--;
    }
    if (loc == DCR__CAL_RUN) it->count = it->count ? it->count : 1;
    return DCR_OK;
}

/* Encodes every item into one payload (a bucket), as an owner's flush does. */
static dcr_status_t dcr__cal_encode(dcr_encoder_t *enc, const dcr__cal_item_t *items, int n,
                                    bool xor, bool run, double *seconds_p, size_t *len_p)
{
    static const int64_t shape[2] = {DCR__CAL_ITEM_ROWS, DCR__CAL_ITEM_COLS};
    char name[96];
    double t0 = dcr_clock_s();
    for (int i = 0; i < n; i++) {
        if (items[i].count == 0) continue;
        snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%d.up_proj.weight", i / 128,
                 i % 128);
        dcr_codec_item_t it = {name,
                               2,
                               shape,
                               DCR_DTYPE_BF16,
                               xor? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE,
                               items[i].count,
                               run ? NULL : items[i].idx,
                               0,
                               xor? (const void *)items[i].xor_v : (const void *)items[i].new_v};
        DCR_CHECK(dcr_encoder_add(enc, &it));
    }
    const uint8_t *buf;
    dcr_encode_params_t params = {1, 0, 0, DCR_CODEC_LEVEL_DEFAULT, false};
    DCR_CHECK(dcr_encoder_finish(enc, &params, &buf, len_p));
    *seconds_p = dcr_clock_s() - t0;
    return DCR_OK;
}

/* Metadata of one item after compression: many one-record items with the
 * long, similar names of a real checkpoint. */
static dcr_status_t dcr__cal_item_bytes(dcr_encoder_t *enc, dcr_rng_t *rng, double *bytes_p)
{
    enum { N = 2048 };
    static const int64_t shape[2] = {DCR__CAL_ITEM_ROWS, DCR__CAL_ITEM_COLS};
    char name[96];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%d.%s_proj.weight", i / 256,
                 (i / 2) % 128, i % 2 ? "down" : "up");
        int64_t idx = (int64_t)dcr_rng_below(rng, DCR__CAL_ITEM_ROWS * DCR__CAL_ITEM_COLS);
        uint16_t v = (uint16_t)dcr_rng_u64(rng);
        dcr_codec_item_t it = {name, 2, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, 1, &idx, 0, &v};
        DCR_CHECK(dcr_encoder_add(enc, &it));
    }
    const uint8_t *buf;
    size_t len;
    dcr_encode_params_t params = {1, 0, 0, DCR_CODEC_LEVEL_DEFAULT, false};
    DCR_CHECK(dcr_encoder_finish(enc, &params, &buf, &len));
    double per = ((double)len - DCR_CODEC_HEADER_SIZE) / N - 2.0; /* minus the value word */
    *bytes_p = per > 0 ? per : 0;
    return DCR_OK;
}

typedef struct dcr__cal_codec {
    double encode_s_per_record;
    double xor_value, overwrite_value, gap8, gap16;
} dcr__cal_codec_t;

/* Compressed bytes per record of one item set (metadata removed), and the
 * best encode time of reps runs per record. */
static dcr_status_t dcr__cal_codec_set(dcr_encoder_t *enc, const dcr__cal_item_t *items, int nitems,
                                       bool xor, bool run, int reps, double item_bytes,
                                       double *bpr_p, double *best_p)
{
    size_t records = 0, len = 0;
    for (int i = 0; i < nitems; i++) records += items[i].count;
    if (records == 0)
        return dcr_error_set(DCR_EINVAL, "calibrate: the codec items drew no records");
    double best = INFINITY, s = 0;
    for (int r = 0; r < reps; r++) {
        DCR_CHECK(dcr__cal_encode(enc, items, nitems, xor, run, &s, &len));
        best = dcr__min(best, s);
    }
    *bpr_p = ((double)len - DCR_CODEC_HEADER_SIZE - item_bytes * nitems) / (double)records;
    *best_p = best / (double)records;
    return DCR_OK;
}

static dcr_status_t dcr__cal_items(dcr_rng_t *rng, double rate, dcr__cal_loc_t loc, uint16_t *w,
                                   dcr__cal_item_t *items, int n)
{
    for (int i = 0; i < n; i++) {
        dcr__cal_item_free(&items[i]);
        DCR_CHECK(dcr__cal_item_make(rng, rate, loc, w, &items[i]));
    }
    return DCR_OK;
}

/* Value bytes from runs (no location words), gap bytes from uniform
 * changes with 1-byte and with 2-byte gaps, minus the value bytes. */
static dcr_status_t dcr__cal_codec_rate(const dcr_sim_cal_options_t *opt, dcr_encoder_t *enc,
                                        dcr_rng_t *rng, double rate, double item_bytes,
                                        dcr__cal_codec_t *out)
{
    int n = opt->quick ? 4 : 16;
    dcr__cal_item_t *items = calloc((size_t)n, sizeof(*items));
    uint16_t *w = malloc((size_t)DCR__CAL_ITEM_ROWS * DCR__CAL_ITEM_COLS * 2);
    dcr_status_t st = items && w ? DCR_OK : dcr_error_set(DCR_ENOMEM, "calibrate: codec items");
    double t = 0, bpr8 = 0, bpr16 = 0;
    if (st == DCR_OK) st = dcr__cal_items(rng, rate, DCR__CAL_RUN, w, items, n);
    if (st == DCR_OK)
        st = dcr__cal_codec_set(enc, items, n, true, true, 1, item_bytes, &out->xor_value, &t);
    if (st == DCR_OK)
        st = dcr__cal_codec_set(enc, items, n, false, true, 1, item_bytes, &out->overwrite_value,
                                &t);
    if (st == DCR_OK) st = dcr__cal_items(rng, rate, DCR__CAL_GAPS8, w, items, n);
    if (st == DCR_OK) st = dcr__cal_codec_set(enc, items, n, true, false, 1, item_bytes, &bpr8, &t);
    if (st == DCR_OK) st = dcr__cal_items(rng, rate, DCR__CAL_GAPS16, w, items, n);
    if (st == DCR_OK)
        st = dcr__cal_codec_set(enc, items, n, true, false, dcr__cal_reps(opt), item_bytes, &bpr16,
                                &out->encode_s_per_record);
    out->gap8 = bpr8 > out->xor_value ? bpr8 - out->xor_value : 0;
    out->gap16 = bpr16 > out->xor_value ? bpr16 - out->xor_value : 0;
    for (int i = 0; items && i < n; i++) dcr__cal_item_free(&items[i]);
    free(items);
    free(w);
    return st;
}

/* The same records cut into payloads of about `per` records each (items
 * split where a payload fills): total compressed bytes without headers and
 * item metadata, and the payload count. */
static dcr_status_t dcr__cal_cut(dcr_encoder_t *enc, const dcr__cal_item_t *items, int nitems,
                                 size_t per, double item_bytes, double *bytes_p, int *npayloads_p)
{
    static const int64_t shape[2] = {DCR__CAL_ITEM_ROWS, DCR__CAL_ITEM_COLS};
    double total = 0;
    int payloads = 0;
    size_t in_payload = 0;
    for (int i = 0; i < nitems; i++) {
        for (size_t at = 0; at < items[i].count;) {
            size_t take =
                items[i].count - at < per - in_payload ? items[i].count - at : per - in_payload;
            dcr_codec_item_t it = {"model.layers.0.mlp.experts.0.up_proj.weight",
                                   2,
                                   shape,
                                   DCR_DTYPE_BF16,
                                   DCR_ENCODING_XOR,
                                   take,
                                   items[i].idx + at,
                                   0,
                                   items[i].xor_v + at};
            DCR_CHECK(dcr_encoder_add(enc, &it));
            total -= item_bytes;
            at += take;
            in_payload += take;
            bool last = i == nitems - 1 && at == items[i].count;
            if (in_payload < per && !last) continue;
            const uint8_t *buf;
            size_t len;
            dcr_encode_params_t params = {1, 0, (uint64_t)payloads, DCR_CODEC_LEVEL_DEFAULT, false};
            DCR_CHECK(dcr_encoder_finish(enc, &params, &buf, &len));
            total += (double)len - DCR_CODEC_HEADER_SIZE;
            payloads++;
            in_payload = 0;
        }
    }
    *bytes_p = total;
    *npayloads_p = payloads;
    return DCR_OK;
}

/* Payload size factors at 3%: the records of large items cut into payloads
 * of 512 to 32768 records, against all of them in one payload. */
static dcr_status_t dcr__cal_sizes(const dcr_sim_cal_options_t *opt, dcr_encoder_t *enc,
                                   dcr_rng_t *rng, dcr_sim_calibration_t *cal)
{
    static const size_t per[] = {512, 2048, 8192, 32768};
    int n = opt->quick ? 4 : 8;
    dcr__cal_item_t *items = calloc((size_t)n, sizeof(*items));
    uint16_t *w = malloc((size_t)DCR__CAL_ITEM_ROWS * DCR__CAL_ITEM_COLS * 2);
    dcr_status_t st = items && w ? DCR_OK : dcr_error_set(DCR_ENOMEM, "calibrate: size items");
    if (st == DCR_OK) st = dcr__cal_items(rng, 0.03, DCR__CAL_GAPS16, w, items, n);
    double whole = 0;
    int one = 0;
    if (st == DCR_OK) st = dcr__cal_cut(enc, items, n, SIZE_MAX, cal->bytes_per_item, &whole, &one);
    cal->nsizes = 0;
    for (size_t k = 0; k < sizeof(per) / sizeof(per[0]) && st == DCR_OK; k++) {
        double bytes = 0;
        int payloads = 0;
        st = dcr__cal_cut(enc, items, n, per[k], cal->bytes_per_item, &bytes, &payloads);
        if (st == DCR_OK && whole > 0 && payloads > 0)
            cal->sizes[cal->nsizes++] = (dcr_sim_cal_size_t){bytes / payloads, bytes / whole};
    }
    if (st == DCR_OK && whole > 0) cal->sizes[cal->nsizes++] = (dcr_sim_cal_size_t){whole, 1.0};
    for (int i = 0; items && i < n; i++) dcr__cal_item_free(&items[i]);
    free(items);
    free(w);
    return st;
}

/* ---- whole constructions ------------------------------------------------------ */

typedef struct dcr__cal_scene {
    dcr_scenario_t *sc;
    dcr_storage_t **canonical, **committed, **candidate;
    uint8_t *xor_all;
    size_t nc, ns;
} dcr__cal_scene_t;

static void dcr__cal_scene_free(dcr__cal_scene_t *s)
{
    if (!s->sc) return;
    dcr_scenario_free_tensors(s->canonical, s->nc);
    dcr_scenario_free_tensors(s->committed, s->ns);
    dcr_scenario_free_tensors(s->candidate, s->ns);
    free(s->xor_all);
    dcr_scenario_destroy(s->sc);
    memset(s, 0, sizeof(*s));
}

/* A least-squares fit of y = c1 x1 + c2 x2 without intercept, both
 * coefficients kept >= 0 (a stage never takes negative time). */
typedef struct dcr__cal_obs {
    double y, x1, x2;
} dcr__cal_obs_t;

static void dcr__cal_fit(const dcr__cal_obs_t *o, int n, double *c1_p, double *c2_p)
{
    double a = 0, b = 0, d = 0, e = 0, f = 0;
    for (int i = 0; i < n; i++) {
        a += o[i].x1 * o[i].x1;
        b += o[i].x1 * o[i].x2;
        d += o[i].x2 * o[i].x2;
        e += o[i].x1 * o[i].y;
        f += o[i].x2 * o[i].y;
    }
    double det = a * d - b * b, c1 = 0, c2 = 0;
    if (det > 1e-12 * a * d) {
        c1 = (e * d - b * f) / det;
        c2 = (a * f - b * e) / det;
    }
    if (!(det > 1e-12 * a * d) || c1 < 0 || c2 < 0) { /* fall back to the better single term */
        double only1 = a > 0 ? e / a : 0, only2 = d > 0 ? f / d : 0;
        double r1 = 0, r2 = 0;
        for (int i = 0; i < n; i++) {
            r1 += (o[i].y - only1 * o[i].x1) * (o[i].y - only1 * o[i].x1);
            r2 += (o[i].y - only2 * o[i].x2) * (o[i].y - only2 * o[i].x2);
        }
        c1 = r1 <= r2 && only1 > 0 ? only1 : 0;
        c2 = r1 > r2 && only2 > 0 ? only2 : 0;
    }
    *c1_p = c1;
    *c2_p = c2;
}

/* One training rank, so a construction runs on one owner thread and its
 * time is one core's; the extended mapping makes nearly every byte take
 * direct projection, which isolates that path from residual conversion. */
static dcr_status_t dcr__cal_scene_make(const dcr_sim_cal_options_t *opt, int ranks,
                                        dcr__cal_scene_t *s)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = opt->model;
    spec.scale = opt->scale;
    spec.layers = opt->layers;
    spec.mapping = DCR_MAPPING_EXTENDED;
    /* TP over the ranks (and ETP for experts, chosen automatically) splits
     * every tensor into strided and contiguous shards, as real layouts do. */
    spec.train = (dcr_train_config_t){1, ranks, ranks, 0, 1, 1, 0};
    DCR_CHECK(dcr_scenario_create(&spec, &s->sc));
    s->nc = dcr_inventory_count(s->sc->inventory);
    s->ns = (size_t)s->sc->layout->nshards;
    DCR_CHECK(dcr_scenario_check_memory(
        s->sc, "calibrate",
        &(dcr_run_shape_t){
            .canonical_copies = 1, .shard_copies = 2, .trackers = true, .transient = true}));
    DCR_CHECK(dcr_scenario_alloc_canonical(s->sc, &s->canonical));
    DCR_CHECK(dcr_scenario_alloc_shards(s->sc, &s->committed));
    DCR_CHECK(dcr_scenario_alloc_shards(s->sc, &s->candidate));
    s->xor_all = malloc(s->nc + 1);
    if (!s->xor_all) return dcr_error_set(DCR_ENOMEM, "calibrate: XOR policy");
    memset(s->xor_all, 1, s->nc + 1);
    dcr_scenario_init_weights(s->sc, opt->seed, s->canonical);
    return dcr_megatron_import(&s->sc->model, &s->sc->train, s->sc->layout, s->canonical,
                               s->committed);
}

static dcr_status_t dcr__cal_candidate(dcr__cal_scene_t *s, double rate, uint64_t seed)
{
    for (size_t i = 0; i < s->ns; i++)
        memcpy(s->candidate[i]->data, s->committed[i]->data, s->committed[i]->bytes);
    int64_t changed;
    return dcr_scenario_inject_uniform(s->sc, rate, seed, s->candidate, s->canonical, &changed);
}

/* Best of reps runs of one construction over the same candidate. */
static dcr_status_t dcr__cal_run(const dcr_sim_cal_options_t *opt, dcr__cal_scene_t *s,
                                 dcr_constructor_t *c, dcr_construct_stats_t *best_p)
{
    dcr_construct_stats_t st_best = {0};
    st_best.construction_s = INFINITY;
    for (int r = 0; r < dcr__cal_reps(opt); r++) {
        dcr_construct_stats_t st;
        DCR_CHECK(
            dcr_constructor_run(c, s->candidate, (uint64_t)r + 1, s->xor_all, false, NULL, &st));
        if (st.construction_s < st_best.construction_s) st_best = st;
    }
    *best_p = st_best;
    return DCR_OK;
}

/* Mode X constructions of one scene at the given rates. Owners run on
 * their own threads; with as many owners as cores and balanced ownership
 * the cores' total time is owners x wall time (two threads on this
 * machine's two cores were measured at full efficiency). Each observation
 * is that time minus detection and encoding, against records and items. */
static dcr_status_t dcr__cal_observe(const dcr_sim_cal_options_t *opt, dcr__cal_scene_t *s,
                                     const dcr_sim_calibration_t *cal, const double *rates,
                                     int nrates, dcr__cal_obs_t *obs)
{
    dcr_construct_config_t cfg = dcr_construct_config_default();
    dcr_constructor_t *c = NULL;
    DCR_CHECK(dcr_constructor_create(s->sc->layout, &cfg, s->committed, &c));
    int owners = s->sc->layout->world;
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < nrates && st == DCR_OK; i++) {
        dcr_construct_stats_t best;
        st = dcr__cal_candidate(s, rates[i], opt->seed + 100 + (uint64_t)i);
        if (st == DCR_OK) st = dcr__cal_run(opt, s, c, &best);
        if (st != DCR_OK) break;
        dcr_sim_cal_point_t p = dcr_sim_cal_at(cal, rates[i]);
        double known = p.detect_s_per_byte * (double)best.compared_elements * 2 +
                       p.encode_s_per_record * (double)best.records;
        obs[i] = (dcr__cal_obs_t){owners * best.construction_s - known, (double)best.records,
                                  (double)(best.xor_items + best.overwrite_items)};
        DCR_LOG_INFO(
            "calibrate: construction by %d owners at %g: %.4f s, %lld records, %.0f items, "
            "detection+encoding %.4f s",
            owners, rates[i], best.construction_s, (long long)best.records, obs[i].x2, known);
    }
    dcr_constructor_destroy(c);
    return st;
}

typedef struct dcr__cal_construct {
    double project_s_per_record, item_s, residual_s_per_byte;
    double copy_s_per_byte;        /* multi-rank layout: strided shards, what clusters have */
    double copy_single_s_per_byte; /* one rank: whole tensors, for the full-conversion run */
} dcr__cal_construct_t;

/* The in-place baseline update after a commit: one copy of every tracker,
 * on one thread (the constructor updates every owner in turn). */
static dcr_status_t dcr__cal_copy(const dcr_sim_cal_options_t *opt, dcr__cal_scene_t *s,
                                  double *out)
{
    dcr_construct_config_t cfg = dcr_construct_config_default();
    dcr_constructor_t *c = NULL;
    dcr_construct_stats_t best;
    DCR_CHECK(dcr_constructor_create(s->sc->layout, &cfg, s->committed, &c));
    dcr_status_t st = dcr__cal_run(opt, s, c, &best);
    double t0 = dcr_clock_s();
    if (st == DCR_OK) st = dcr_constructor_commit(c);
    double bytes = (double)dcr_constructor_baseline_bytes(c);
    if (st == DCR_OK) *out = bytes > 0 ? (dcr_clock_s() - t0) / bytes : 0;
    dcr_constructor_destroy(c);
    return st;
}

/* One owner, then one owner per core with each tensor split among them:
 * the same records in twice the items (and strided shards) separate the
 * per-record cost of projection from the fixed cost of each item. */
static dcr_status_t dcr__cal_project(const dcr_sim_cal_options_t *opt,
                                     const dcr_sim_calibration_t *cal, dcr__cal_construct_t *out)
{
    dcr__cal_obs_t obs[2 * DCR_SIM_CAL_POINTS_MAX];
    double rates[DCR_SIM_CAL_POINTS_MAX];
    for (int i = 0; i < cal->npoints; i++) rates[i] = cal->points[i].rate;
    int n = cal->npoints, ranks = cal->cores >= 2 ? 2 : 1;
    dcr__cal_scene_t s;
    memset(&s, 0, sizeof(s));
    dcr_status_t st = dcr__cal_scene_make(opt, 1, &s);
    if (st == DCR_OK) st = dcr__cal_observe(opt, &s, cal, rates, n, obs);
    if (st == DCR_OK) st = dcr__cal_copy(opt, &s, &out->copy_single_s_per_byte);
    out->copy_s_per_byte = out->copy_single_s_per_byte;
    dcr__cal_scene_free(&s);
    if (st == DCR_OK && ranks > 1) st = dcr__cal_scene_make(opt, ranks, &s);
    if (st == DCR_OK && ranks > 1) st = dcr__cal_observe(opt, &s, cal, rates, n, obs + n);
    if (st == DCR_OK && ranks > 1) st = dcr__cal_copy(opt, &s, &out->copy_s_per_byte);
    dcr__cal_scene_free(&s);
    if (st == DCR_OK)
        dcr__cal_fit(obs, ranks > 1 ? 2 * n : n, &out->project_s_per_record, &out->item_s);
    return st;
}

/* Mode F rebuilds every tensor through residual conversion: packing, one
 * placement, the comparison and overwrite records. What is left after the
 * measured stages is residual placement and conversion, per canonical byte. */
static dcr_status_t dcr__cal_residual(const dcr_sim_cal_options_t *opt,
                                      const dcr_sim_calibration_t *cal, dcr__cal_construct_t *out)
{
    const double rate = 0.03;
    dcr__cal_scene_t s;
    memset(&s, 0, sizeof(s));
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.mode = DCR_MODE_F;
    dcr_constructor_t *c = NULL;
    dcr_construct_stats_t best;
    dcr_status_t st = dcr__cal_scene_make(opt, 1, &s);
    if (st == DCR_OK) st = dcr_constructor_create(s.sc->layout, &cfg, s.committed, &c);
    if (st == DCR_OK) st = dcr__cal_candidate(&s, rate, opt->seed + 200);
    if (st == DCR_OK) st = dcr__cal_run(opt, &s, c, &best);
    if (st == DCR_OK) {
        dcr_sim_cal_point_t p = dcr_sim_cal_at(cal, rate);
        double bytes = (double)dcr_inventory_bytes(s.sc->inventory);
        /* No per-item term: a whole assembled tensor skips the per-task
         * walk of box maps that the per-item cost of projection measures. */
        double known = (out->copy_single_s_per_byte + p.detect_s_per_byte) * bytes +
                       (out->project_s_per_record + p.encode_s_per_record) * (double)best.records;
        double r = (best.construction_s - known) / bytes;
        out->residual_s_per_byte = r > 0 ? r : 0;
        DCR_LOG_INFO("calibrate: full conversion at %g: %.4f s, measured stages %.4f s", rate,
                     best.construction_s, known);
    }
    dcr_constructor_destroy(c);
    dcr__cal_scene_free(&s);
    return st;
}

static dcr_status_t dcr__cal_construct(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *cal)
{
    dcr__cal_construct_t out = {0, 0, 0, 0, 0};
    DCR_CHECK(dcr__cal_project(opt, cal, &out));
    DCR_CHECK(dcr__cal_residual(opt, cal, &out));
    cal->project_s_per_record = out.project_s_per_record;
    cal->construct_s_per_item = out.item_s;
    cal->residual_s_per_byte = out.residual_s_per_byte;
    cal->copy_s_per_byte = out.copy_s_per_byte;
    return DCR_OK;
}

/* ---- receiver ------------------------------------------------------------------ */

/* One receiver of TP 1 (it holds every tensor): apply per record and per
 * item fitted over the rates of the sparse path, decode per payload byte
 * from validate + decode + apply minus apply, and the full scratch pass per
 * resident byte from a full-pass run. */
static dcr_status_t dcr__cal_receiver(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *cal)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = opt->model;
    spec.scale = opt->scale;
    spec.layers = opt->layers;
    spec.align_extra = 2;
    dcr_scenario_t *sc = NULL;
    DCR_CHECK(dcr_scenario_create(&spec, &sc));
    dcr_serve_config_t serve = dcr_serve_config_default(), serve2 = serve;
    serve2.tp = 2; /* a receiver that holds half of every tensor: narrowed views */
    int n = cal->npoints;
    double rates[DCR_SIM_CAL_POINTS_MAX], decode[DCR_SIM_CAL_POINTS_MAX];
    dcr__cal_obs_t obs[DCR_SIM_CAL_POINTS_MAX + 1];
    dcr_serve_bench_result_t res[DCR_SIM_CAL_POINTS_MAX + 1], full;
    for (int i = 0; i < n; i++) rates[i] = cal->points[i].rate;
    dcr_status_t st = dcr_serve_bench_apply(&sc->model, &serve, 0, false, rates, n, opt->seed, res);
    if (st == DCR_OK)
        st = dcr_serve_bench_apply(&sc->model, &serve2, 0, false, rates + n / 2, 1, opt->seed,
                                   res + n);
    if (st == DCR_OK)
        st = dcr_serve_bench_apply(&sc->model, &serve, 0, true, rates + n / 2, 1, opt->seed, &full);
    dcr_scenario_destroy(sc);
    DCR_CHECK(st);
    for (int i = 0; i <= n; i++) {
        obs[i] = (dcr__cal_obs_t){res[i].apply_s, (double)res[i].records,
                                  (double)(res[i].items_sparse + res[i].items_full)};
        double d = (res[i].ingest_s - res[i].apply_s) /
                   (double)(res[i].payload_bytes ? res[i].payload_bytes : 1);
        if (i < n) decode[i] = d > 0 ? d : 0;
    }
    dcr__cal_fit(obs, n + 1, &cal->apply_s_per_record, &cal->apply_s_per_item);
    cal->decode_s_per_byte = dcr_sim_median(decode, n);
    double rest = full.apply_s - cal->apply_s_per_record * (double)full.records -
                  cal->apply_s_per_item * (double)(full.items_sparse + full.items_full);
    cal->apply_s_per_full_byte =
        full.resident_bytes && rest > 0 ? rest / (double)full.resident_bytes : 0;
    return DCR_OK;
}

/* ---- control plane and object store ------------------------------------------------ */

/* Prepare, one acknowledgment per receiver and the joint commit, as the
 * coordinator does them, on a fresh SQLite control plane. */
static dcr_status_t dcr__cal_control_rounds(dcr_control_t *ctl, int rounds, double *ack_s,
                                            double *commit_s)
{
    enum { NRECV = 4, ROUNDS_MAX = 16 };
    const uint32_t recv[NRECV] = {0, 1, 2, 3};
    double acks[ROUNDS_MAX * NRECV], commits[ROUNDS_MAX];
    if (rounds > ROUNDS_MAX) rounds = ROUNDS_MAX;
    dcr_commit_record_t rec, v0;
    DCR_CHECK(dcr_control_read(ctl, &rec));
    v0 = rec;
    v0.baseline[0] = 1;
    DCR_CHECK(dcr_control_cas(ctl, &rec, &v0));
    rec = v0;
    for (int i = 0; i < rounds; i++) {
        dcr_control_prepare_t req = {"calibrate", rec.version, recv, NRECV, 600000};
        uint64_t tau;
        DCR_CHECK(dcr_control_prepare(ctl, &req, &tau));
        for (int r = 0; r < NRECV; r++) {
            double t0 = dcr_clock_s();
            DCR_CHECK(dcr_control_ack(ctl, tau, recv[r]));
            acks[i * NRECV + r] = dcr_clock_s() - t0;
        }
        uint8_t next[DCR_CONTROL_BASELINE_BYTES] = {(uint8_t)(i + 2)};
        double t1 = dcr_clock_s();
        DCR_CHECK(dcr_control_commit(ctl, "calibrate", tau, &rec, next, &rec));
        commits[i] = dcr_clock_s() - t1;
    }
    /* Medians: a synchronous write's time varies with the disk, both ways. */
    *ack_s = dcr_sim_median(acks, rounds * NRECV);
    *commit_s = dcr_sim_median(commits, rounds);
    return DCR_OK;
}

static dcr_status_t dcr__cal_control(const dcr_sim_cal_options_t *opt, const char *dir,
                                     dcr_sim_calibration_t *cal)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/control.db", dir);
    dcr_control_config_t cfg = {path, 0};
    dcr_control_t *ctl = NULL;
    DCR_CHECK(dcr_control_create("sqlite", &cfg, &ctl));
    dcr_status_t st =
        dcr__cal_control_rounds(ctl, opt->quick ? 3 : 10, &cal->ack_s, &cal->commit_s);
    dcr_control_destroy(ctl);
    return st;
}

/* A valid payload of about `bytes` bytes for owner 0, id `id`, attempt 1:
 * incompressible values, so its size is what was asked. */
static dcr_status_t dcr__cal_payload(dcr_encoder_t *enc, dcr_rng_t *rng, size_t bytes, uint64_t id,
                                     const uint8_t **buf_p, size_t *len_p)
{
    size_t n = bytes / 2 > 1 ? bytes / 2 : 1;
    uint16_t *v = malloc(n * 2);
    if (!v) return dcr_error_set(DCR_ENOMEM, "calibrate: payload of %zu bytes", bytes);
    for (size_t i = 0; i < n; i++) v[i] = (uint16_t)dcr_rng_u64(rng);
    int64_t shape[1] = {(int64_t)n};
    dcr_codec_item_t it = {
        "model.norm.weight", 1, shape, DCR_DTYPE_BF16, DCR_ENCODING_OVERWRITE, n, NULL, 0, v};
    dcr_encode_params_t params = {1, 0, id, DCR_CODEC_LEVEL_DEFAULT, false};
    dcr_status_t st = dcr_encoder_add(enc, &it);
    if (st == DCR_OK) st = dcr_encoder_finish(enc, &params, buf_p, len_p);
    free(v);
    return st;
}

/* Median time of each send of n payloads of `bytes` from owner 0, ids from
 * *next_id on; a thread per rollout node drains what arrives, as the
 * coordinator's node threads do. */
typedef struct dcr__cal_drain {
    dcr_transport_t *t;
    int node;
} dcr__cal_drain_t;

static void *dcr__cal_drain_main(void *arg)
{
    dcr__cal_drain_t *d = arg;
    for (;;) {
        dcr_delivery_t got;
        dcr_status_t st = dcr_transport_recv(d->t, d->node, 100, &got);
        if (st == DCR_ETIMEOUT) continue;
        if (st != DCR_OK) return NULL;
        dcr_transport_release(d->t, d->node, &got);
    }
}

static dcr_status_t dcr__cal_sends(dcr_transport_t *t, dcr_encoder_t *enc, dcr_rng_t *rng,
                                   size_t bytes, int n, uint64_t *next_id, double *median_p)
{
    double s[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++) {
        const uint8_t *buf;
        size_t len;
        uint64_t id = (*next_id)++;
        DCR_CHECK(dcr__cal_payload(enc, rng, bytes, id, &buf, &len));
        double t0 = dcr_clock_s();
        DCR_CHECK(dcr_transport_send(t, 0, id, buf, len));
        s[i] = dcr_clock_s() - t0;
    }
    *median_p = dcr_sim_median(s, n);
    return DCR_OK;
}

/* One transport with unlimited links: the directory object store's PUT
 * (temporary file, fsync, rename), or the relay's hop from the owner to the
 * root at two payload sizes (fixed and per-byte cost). */
static dcr_status_t dcr__cal_transport(const dcr_sim_cal_options_t *opt, const char *name,
                                       const char *dir, dcr_sim_calibration_t *cal)
{
    dcr_link_config_t unlimited = {0, 0, 0, 0};
    dcr_transport_config_t tc = {
        .train_nodes = 1, .world = 1, .rollout_nodes = 2, .link = unlimited, .dir = dir};
    dcr_transport_t *t = NULL;
    DCR_CHECK(dcr_transport_create(name, &tc, &t));
    dcr_encoder_t *enc = NULL;
    dcr_rng_t rng;
    dcr_rng_seed(&rng, opt->seed);
    dcr__cal_drain_t drain[2] = {{t, 0}, {t, 1}};
    pthread_t th[2];
    int started = 0;
    dcr_status_t st = dcr_encoder_create(&enc);
    if (st == DCR_OK) st = dcr_transport_open_attempt(t, 1);
    for (int i = 0; i < 2 && st == DCR_OK; i++, started++)
        if (pthread_create(&th[i], NULL, dcr__cal_drain_main, &drain[i]))
            st = dcr_error_set(DCR_ENOMEM, "calibrate: thread");
    uint64_t id = 0;
    int n = opt->quick ? 8 : 32;
    double small = 0, large = 0;
    const size_t small_b = 4096, large_b = (size_t)256 << 10;
    if (st == DCR_OK) st = dcr__cal_sends(t, enc, &rng, small_b, n, &id, &small);
    if (st == DCR_OK && strcmp(name, "objstore"))
        st = dcr__cal_sends(t, enc, &rng, large_b, n, &id, &large);
    if (st == DCR_OK) st = dcr_transport_finish(t, 0, id);
    dcr_transport_stop_and_wait(t); /* wakes the drains */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    dcr_transport_destroy(t);
    dcr_encoder_destroy(enc);
    DCR_CHECK(st);
    if (!strcmp(name, "objstore")) {
        cal->store_put_s = small;
    } else {
        double per = (large - small) / (double)(large_b - small_b);
        cal->relay_hop_s_per_byte = per > 0 ? per : 0;
        double fixed = small - cal->relay_hop_s_per_byte * (double)small_b;
        cal->relay_hop_s = fixed > 0 ? fixed : 0;
    }
    return DCR_OK;
}

/* The fixed part of decoding one payload (header, digest setup, zstd
 * context, item table) from many decodes of a one-record payload. */
static dcr_status_t dcr__cal_decode_fixed(const dcr_sim_cal_options_t *opt,
                                          dcr_sim_calibration_t *cal)
{
    enum { N = 256 };
    dcr_encoder_t *enc = NULL;
    dcr_payload_t *p = NULL;
    dcr_rng_t rng;
    dcr_rng_seed(&rng, opt->seed);
    const uint8_t *buf;
    size_t len;
    double s[N];
    dcr_status_t st = dcr_encoder_create(&enc);
    if (st == DCR_OK) st = dcr_payload_create(&p);
    if (st == DCR_OK) st = dcr__cal_payload(enc, &rng, 2, 0, &buf, &len);
    for (int i = 0; i < N && st == DCR_OK; i++) {
        double t0 = dcr_clock_s();
        st = dcr_payload_decode(p, buf, len);
        s[i] = dcr_clock_s() - t0;
    }
    if (st == DCR_OK) cal->decode_s_per_payload = dcr_sim_median(s, N);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
    return st;
}

static dcr_status_t dcr__cal_services(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *cal)
{
    char store[4200];
    /* A marked temporary folder (workloads/harness/workdir.h): removed on a stop
     * signal, and by the next run when this one is killed. */
    dcr_workdir_t wd;
    DCR_CHECK(dcr_workdir_open("calibrate", NULL, "dcr-calibrate", &wd));
    snprintf(store, sizeof(store), "%s/objstore", wd.path);
    dcr_status_t st = dcr__cal_control(opt, wd.path, cal);
    if (st == DCR_OK) st = dcr__cal_transport(opt, "objstore", store, cal);
    if (st == DCR_OK) st = dcr__cal_transport(opt, "relay", NULL, cal);
    dcr_workdir_close(&wd);
    return st;
}

/* ---- all of it ----------------------------------------------------------------------- */

static dcr_status_t dcr__cal_points(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *cal)
{
    const double *rates = opt->quick ? dcr__cal_rates_quick : dcr__cal_rates;
    int n = opt->quick ? 2 : (int)(sizeof(dcr__cal_rates) / sizeof(dcr__cal_rates[0]));
    dcr_rng_t rng;
    dcr_rng_seed(&rng, opt->seed);
    dcr_encoder_t *enc = NULL;
    DCR_CHECK(dcr_encoder_create(&enc));
    dcr_status_t st = dcr__cal_item_bytes(enc, &rng, &cal->bytes_per_item);
    cal->npoints = n;
    for (int i = 0; i < n && st == DCR_OK; i++) {
        dcr_sim_cal_point_t *p = &cal->points[i];
        dcr__cal_codec_t codec;
        memset(&codec, 0, sizeof(codec));
        p->rate = rates[i];
        st = dcr__cal_detect(opt, rates[i], &rng, &p->detect_s_per_byte);
        if (st == DCR_OK)
            st = dcr__cal_codec_rate(opt, enc, &rng, rates[i], cal->bytes_per_item, &codec);
        if (st != DCR_OK) break;
        p->encode_s_per_record = codec.encode_s_per_record;
        p->xor_value_bytes = codec.xor_value;
        p->overwrite_value_bytes = codec.overwrite_value;
        p->gap8_bytes = codec.gap8;
        p->gap16_bytes = codec.gap16;
        DCR_LOG_INFO(
            "calibrate: rate %g: detect %.3g s/B, encode %.3g s/record, values %.3f (XOR) %.3f "
            "(overwrite), gaps %.3f (1 byte) %.3f (2 bytes) B/record",
            p->rate, p->detect_s_per_byte, p->encode_s_per_record, p->xor_value_bytes,
            p->overwrite_value_bytes, p->gap8_bytes, p->gap16_bytes);
    }
    if (st == DCR_OK) st = dcr__cal_sizes(opt, enc, &rng, cal);
    dcr_encoder_destroy(enc);
    return st;
}

static void dcr__cal_machine(dcr_sim_calibration_t *cal)
{
    char host[64] = "unknown";
    gethostname(host, sizeof(host) - 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cal->cores = cores > 0 ? (int)cores : 1;
    snprintf(cal->machine, sizeof(cal->machine), "%s, %d cores", host, cal->cores);
}

dcr_status_t dcr_sim_calibrate(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *out_p)
{
    if (!opt->model || opt->scale < 1 || opt->layers < 0)
        return dcr_error_set(DCR_EINVAL, "calibrate: needs a model, scale >= 1 and layers >= 0");
    dcr_sim_calibration_t cal;
    memset(&cal, 0, sizeof(cal));
    dcr__cal_machine(&cal);
    DCR_LOG_INFO("calibrate: detection and codec at each rate");
    DCR_CHECK(dcr__cal_points(opt, &cal));
    DCR_LOG_INFO("calibrate: constructions of %s (scale %d)", opt->model, opt->scale);
    DCR_CHECK(dcr__cal_construct(opt, &cal));
    DCR_LOG_INFO("calibrate: receiver decode and apply");
    DCR_CHECK(dcr__cal_receiver(opt, &cal));
    DCR_CHECK(dcr__cal_decode_fixed(opt, &cal));
    DCR_LOG_INFO("calibrate: control plane and object store");
    DCR_CHECK(dcr__cal_services(opt, &cal));
    DCR_CHECK(dcr_sim_cal_validate(&cal));
    *out_p = cal;
    return DCR_OK;
}
