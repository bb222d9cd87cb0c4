/* dcr diff: canonical comparison per tensor class plus real construction
 * runs on a training layout. */
#include "dcr/device.h"
#include "workloads/change/ckpt_diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "workloads/change/change_profile.h"
#include "workloads/change/ckpt_init.h"
#include "workloads/model/safetensors.h"

static const char *const dcr__class_names[DCR_CLASS_COUNT] = {
    "attention", "dense_mlp", "experts", "router", "norms", "embeddings", "mamba", "other"};

const char *dcr_tensor_class_name(dcr_tensor_class_t cls)
{
    return cls >= 0 && cls < DCR_CLASS_COUNT ? dcr__class_names[cls] : "?";
}

static bool dcr__has(const char *name, const char *part)
{
    return strstr(name, part) != NULL;
}

/* A parameter of a Mamba-2 mixer: what follows "mixer." names it. */
static bool dcr__is_mamba(const char *name)
{
    static const char *const params[] = {"in_proj.", "conv1d.", "A_log",    "D",
                                         "dt_bias",  "norm.",   "out_proj."};
    const char *m = strstr(name, "mixer.");
    if (m == NULL) return false;
    m += strlen("mixer.");
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        size_t n = strlen(params[i]);
        bool whole = params[i][n - 1] != '.'; /* A_log, D, dt_bias end the name */
        if (strncmp(m, params[i], n) == 0 && (!whole || m[n] == '\0')) return true;
    }
    return false;
}

dcr_tensor_class_t dcr_tensor_class_of(const char *name)
{
    /* Order matters: expert and Mamba names also contain norm or proj words. */
    if (dcr__has(name, ".experts.")) return DCR_CLASS_EXPERTS;
    if (dcr__has(name, "shared_experts.")) return DCR_CLASS_DENSE_MLP;
    if (dcr__is_mamba(name)) return DCR_CLASS_MAMBA;
    if (dcr__has(name, ".gate.")) return DCR_CLASS_ROUTER;
    if (dcr__has(name, "embed_tokens.") || dcr__has(name, "embeddings.") ||
        dcr__has(name, "lm_head."))
        return DCR_CLASS_EMBEDDINGS;
    if (dcr__has(name, "norm")) return DCR_CLASS_NORMS;
    if (dcr__has(name, "q_proj.") || dcr__has(name, "k_proj.") || dcr__has(name, "v_proj.") ||
        dcr__has(name, "o_proj."))
        return DCR_CLASS_ATTENTION;
    if (dcr__has(name, "gate_proj.") || dcr__has(name, "up_proj.") || dcr__has(name, "down_proj."))
        return DCR_CLASS_DENSE_MLP;
    return DCR_CLASS_OTHER;
}

dcr_diff_options_t dcr_diff_options_default(void)
{
    return (dcr_diff_options_t){dcr_construct_config_default(), NULL, true};
}

double dcr_diff_change_rate(const dcr_diff_figures_t *f)
{
    return f->elements ? (double)f->changed_elements / (double)f->elements : 0.0;
}

double dcr_diff_entropy_bound_bytes(const dcr_diff_result_t *r)
{
    return (r->entropy_position_bits + r->entropy_value_bits) / 8.0;
}

double dcr_diff_payload_to_bound(const dcr_diff_result_t *r)
{
    double bound = dcr_diff_entropy_bound_bytes(r);
    return bound > 0.0 ? (double)r->total.payload_bytes_x / bound : 0.0;
}

double dcr_diff_payload_ratio(const dcr_diff_figures_t *f)
{
    return f->raw_changed_value_bytes
               ? (double)f->payload_bytes_x / (double)f->raw_changed_value_bytes
               : 0.0;
}

/* ---- canonical comparison ---- */

/* Elements compared per call of dcr_detect_changes (its positions fit 32 bits). */
#define DCR__DIFF_CHUNK ((size_t)1 << 20)

typedef struct dcr__cmp {
    uint32_t *pos;
    uint8_t *a, *b; /* aligned copies when the mapped data is not */
    /* The entropy bound's inputs: every changed element's XOR mask, keyed
     * (stored width << 32 | mask) so that masks of different widths are
     * different symbols, and the positions' information in bits. */
    uint64_t *masks;
    size_t nmasks, masks_cap;
    double position_bits;
    bool oom;
} dcr__cmp_t;

/* Binary entropy of p in bits (0 at p = 0 or 1). */
static double dcr__h2(double p)
{
    if (p <= 0.0 || p >= 1.0) return 0.0;
    return -p * log2(p) - (1.0 - p) * log2(1.0 - p);
}

static uint64_t dcr__word(const uint8_t *p, size_t es)
{
    uint32_t w32;
    uint16_t w16;
    switch (es) {
    case 1:
        return p[0];
    case 2:
        memcpy(&w16, p, 2);
        return w16;
    default:
        memcpy(&w32, p, 4);
        return w32;
    }
}

/* Appends the masks of the k changed elements at pos of one chunk. */
static void dcr__masks_add(dcr__cmp_t *cmp, const uint8_t *a, const uint8_t *b, size_t es,
                           const uint32_t *pos, size_t k)
{
    if (cmp->nmasks + k > cmp->masks_cap) {
        size_t cap = cmp->masks_cap ? cmp->masks_cap : 4096;
        while (cap < cmp->nmasks + k) cap *= 2;
        uint64_t *m = realloc(cmp->masks, cap * sizeof(*m));
        if (m == NULL) {
            cmp->oom = true;
            return;
        }
        cmp->masks = m;
        cmp->masks_cap = cap;
    }
    for (size_t i = 0; i < k; i++) {
        uint64_t x =
            dcr__word(a + (size_t)pos[i] * es, es) ^ dcr__word(b + (size_t)pos[i] * es, es);
        cmp->masks[cmp->nmasks++] = ((uint64_t)es << 32) | x;
    }
}

static int dcr__u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Sum over masks of -log2(empirical frequency of the mask): sorting groups
 * equal masks, and a mask seen c times of n costs c * log2(n / c). */
static double dcr__mask_bits(uint64_t *masks, size_t n)
{
    if (n == 0) return 0.0;
    qsort(masks, n, sizeof(*masks), dcr__u64_cmp);
    double bits = 0.0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && masks[j] == masks[i];) j++;
        double c = (double)(j - i);
        bits += c * log2((double)n / c);
    }
    return bits;
}

/* Compares one tensor; adds elements, changes, rows and runs to f.
 * Returns whether any bit changed. */
static bool dcr__compare_tensor(dcr__cmp_t *cmp, const dcr_tensor_desc_t *d, const uint8_t *base,
                                const uint8_t *cand, dcr_diff_figures_t *f)
{
    size_t es = dcr_dtype_size(d->dtype), n = (size_t)dcr_desc_numel(d);
    size_t row = d->ndim >= 2 ? (size_t)d->shape[d->ndim - 1] : n;
    bool aligned = (uintptr_t)base % es == 0 && (uintptr_t)cand % es == 0;
    int64_t changed = 0, last = -2, last_row = -1;
    for (size_t start = 0; start < n; start += DCR__DIFF_CHUNK) {
        size_t len = n - start < DCR__DIFF_CHUNK ? n - start : DCR__DIFF_CHUNK;
        const void *a = base + start * es, *b = cand + start * es;
        if (!aligned) {
            memcpy(cmp->a, a, len * es);
            memcpy(cmp->b, b, len * es);
            a = cmp->a;
            b = cmp->b;
        }
        size_t k = dcr_detect_changes(a, b, len, es, cmp->pos);
        dcr__masks_add(cmp, a, b, es, cmp->pos, k);
        for (size_t i = 0; i < k; i++) {
            int64_t flat = (int64_t)(start + cmp->pos[i]);
            if (flat != last + 1) f->runs++;
            if (row > 0 && flat / (int64_t)row != last_row) {
                last_row = flat / (int64_t)row;
                f->changed_rows++;
            }
            last = flat;
        }
        changed += (int64_t)k;
    }
    cmp->position_bits += (double)n * dcr__h2((double)changed / (double)n);
    f->tensors++;
    f->elements += (int64_t)n;
    f->rows += row > 0 ? (int64_t)(n / row) : 0;
    f->changed_elements += changed;
    f->changed_bytes += changed * (int64_t)es;
    if (changed) f->changed_tensors++;
    return changed > 0;
}

size_t dcr_tensor_expert_key(const char *name)
{
    const char *e = strstr(name, ".experts.");
    if (e == NULL) return 0;
    e += strlen(".experts.");
    while (*e >= '0' && *e <= '9') e++;
    return *e == '.' ? (size_t)(e - name) : 0;
}

/* One (layer, expert) after another: the inventory emits an expert's
 * tensors together, so a change of prefix closes the previous expert. */
typedef struct dcr__expert_walk {
    const char *key;
    size_t len;
    bool touched;
} dcr__expert_walk_t;

static void dcr__expert_close(dcr__expert_walk_t *w, dcr_diff_figures_t *f)
{
    if (w->key == NULL) return;
    f->experts++;
    if (w->touched) f->experts_touched++;
    w->key = NULL;
}

static void dcr__expert_step(dcr__expert_walk_t *w, const char *name, bool changed,
                             dcr_diff_figures_t *f)
{
    size_t len = dcr_tensor_expert_key(name);
    if (len == 0) return;
    if (w->key == NULL || w->len != len || strncmp(w->key, name, len) != 0) {
        dcr__expert_close(w, f);
        *w = (dcr__expert_walk_t){name, len, false};
    }
    w->touched = w->touched || changed;
}

static void dcr__add(dcr_diff_figures_t *to, const dcr_diff_figures_t *from)
{
    int64_t *t = (int64_t *)to;
    const int64_t *s = (const int64_t *)from;
    for (size_t i = 0; i < sizeof(*to) / sizeof(int64_t); i++) t[i] += s[i];
}

static dcr_status_t dcr__compare(const dcr_scenario_t *sc, dcr_storage_t *const *base,
                                 dcr_storage_t *const *cand, const uint8_t *cls,
                                 dcr_diff_result_t *r)
{
    dcr__cmp_t cmp = {malloc(DCR__DIFF_CHUNK * sizeof(uint32_t)),
                      malloc(DCR__DIFF_CHUNK * 4),
                      malloc(DCR__DIFF_CHUNK * 4),
                      NULL,
                      0,
                      0,
                      0.0,
                      false};
    if (!cmp.pos || !cmp.a || !cmp.b) {
        free(cmp.pos);
        free(cmp.a);
        free(cmp.b);
        return dcr_error_set(DCR_ENOMEM, "diff: comparison buffers");
    }
    dcr__expert_walk_t walk = {0};
    size_t nc = dcr_inventory_count(sc->inventory);
    for (size_t c = 0; c < nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        dcr_diff_figures_t *f = &r->classes[cls[c]];
        bool changed = dcr__compare_tensor(&cmp, d, base[c]->data, cand[c]->data, f);
        if (cls[c] == DCR_CLASS_EXPERTS) dcr__expert_step(&walk, d->name, changed, f);
    }
    dcr__expert_close(&walk, &r->classes[DCR_CLASS_EXPERTS]);
    r->entropy_position_bits = cmp.position_bits;
    r->entropy_value_bits = dcr__mask_bits(cmp.masks, cmp.nmasks);
    free(cmp.masks);
    free(cmp.pos);
    free(cmp.a);
    free(cmp.b);
    if (cmp.oom) return dcr_error_set(DCR_ENOMEM, "diff: XOR masks of the changed elements");
    return DCR_OK;
}

/* ---- canonical tensors from a checkpoint ---- */

/* Storage handles over a checkpoint's mapping; a tensor whose mapped bytes
 * are not aligned to its element size is copied (the layout code reads
 * whole elements). */
typedef struct dcr__side {
    dcr_checkpoint_t *ck;
    dcr_storage_t *handles; /* one per canonical tensor, over the mapping */
    dcr_storage_t **tensors;
    bool *copied;
    size_t n;
} dcr__side_t;

static void dcr__side_close(dcr__side_t *s)
{
    for (size_t i = 0; s->copied && i < s->n; i++)
        if (s->copied[i]) dcr_storage_destroy(s->tensors[i]);
    free(s->handles);
    free(s->tensors);
    free(s->copied);
    dcr_checkpoint_close(s->ck);
}

static dcr_status_t dcr__side_open(const dcr_scenario_t *sc, const char *path, dcr__side_t *s,
                                   size_t *extra_p)
{
    s->n = dcr_inventory_count(sc->inventory);
    DCR_CHECK(dcr_checkpoint_open(path, &s->ck));
    DCR_CHECK(dcr_checkpoint_check_inventory(s->ck, sc->inventory, extra_p));
    s->handles = calloc(s->n + 1, sizeof(*s->handles));
    s->tensors = calloc(s->n + 1, sizeof(*s->tensors));
    s->copied = calloc(s->n + 1, sizeof(*s->copied));
    if (!s->handles || !s->tensors || !s->copied)
        return dcr_error_set(DCR_ENOMEM, "diff: tensor table of %zu entries", s->n);
    for (size_t c = 0; c < s->n; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        const dcr_st_tensor_t *t = dcr_checkpoint_find(s->ck, d->name);
        size_t bytes = dcr_desc_bytes(d);
        if ((uintptr_t)t->data % dcr_dtype_size(d->dtype) == 0) {
            /* Read only: the import and the comparison never write canonical tensors. */
            s->handles[c] = (dcr_storage_t){(void *)(uintptr_t)t->data, bytes};
            s->tensors[c] = &s->handles[c];
        } else {
            DCR_CHECK(dcr_storage_create(bytes, &s->tensors[c]));
            s->copied[c] = true;
            memcpy(s->tensors[c]->data, t->data, bytes);
        }
    }
    return DCR_OK;
}

/* ---- construction runs ---- */

typedef struct dcr__runs {
    const dcr_scenario_t *sc;
    const dcr_diff_options_t *opt;
    dcr_storage_t **baseline, **candidate, **mixed;
    dcr_storage_t *const *base, *const *cand; /* canonical tensors of both sides */
    size_t n;
    const uint8_t *cls;
    uint8_t *xor_allowed;
} dcr__runs_t;

/* The candidate from NEW for tensors of class only (DCR_CLASS_COUNT: all),
 * OLD elsewhere. */
static dcr_status_t dcr__candidate(dcr__runs_t *w, int only)
{
    for (size_t c = 0; c < w->n; c++)
        w->mixed[c] = only == DCR_CLASS_COUNT || w->cls[c] == only ? w->cand[c] : w->base[c];
    return dcr_megatron_import(&w->sc->model, &w->sc->train, w->sc->layout, w->mixed, w->candidate);
}

static void dcr__take(dcr_diff_figures_t *f, const dcr_construct_stats_t *st,
                      dcr_construct_mode_t mode)
{
    if (mode == DCR_MODE_X) {
        f->records = st->records;
        f->raw_changed_value_bytes = st->raw_changed_value_bytes;
        f->payload_bytes_x = st->payload_bytes;
        f->payloads_x = st->payloads;
    } else {
        f->payload_bytes_p = st->payload_bytes;
        f->payloads_p = st->payloads;
    }
}

/* Every run of one mode on one constructor: the whole checkpoint first, then
 * each changed class alone. Runs without a commit leave the baseline as is. */
static dcr_status_t dcr__runs_mode(dcr__runs_t *w, dcr_construct_mode_t mode, dcr_diff_result_t *r)
{
    dcr_construct_config_t cfg = w->opt->cfg;
    cfg.mode = mode;
    dcr_constructor_t *con = NULL;
    DCR_CHECK(dcr_constructor_create(w->sc->layout, &cfg, w->baseline, &con));
    dcr_status_t st = dcr__candidate(w, DCR_CLASS_COUNT);
    dcr_construct_stats_t stats;
    const dcr_payload_sink_t *sink = mode == DCR_MODE_X ? w->opt->sink : NULL;
    if (st == DCR_OK)
        st = dcr_constructor_run(con, w->candidate, 1, w->xor_allowed, false, sink, &stats);
    if (st == DCR_OK) {
        *(mode == DCR_MODE_X ? &r->run_x : &r->run_p) = stats;
        dcr__take(&r->total, &stats, mode);
        DCR_LOG_INFO("diff: mode %s, %lld records, %lld payload bytes",
                     dcr_construct_mode_name(mode), (long long)stats.records,
                     (long long)stats.payload_bytes);
    }
    for (int k = 0; k < DCR_CLASS_COUNT && st == DCR_OK && w->opt->class_payloads; k++) {
        if (r->classes[k].changed_elements == 0) continue;
        st = dcr__candidate(w, k);
        if (st == DCR_OK)
            st = dcr_constructor_run(con, w->candidate, 1, w->xor_allowed, false, NULL, &stats);
        if (st == DCR_OK) dcr__take(&r->classes[k], &stats, mode);
    }
    dcr_constructor_destroy(con);
    return st;
}

static dcr_status_t dcr__construct(dcr__runs_t *w, dcr_diff_result_t *r)
{
    size_t nc = w->n, ns = (size_t)w->sc->layout->nshards;
    dcr_status_t st;
    w->mixed = calloc(nc + 1, sizeof(*w->mixed));
    w->xor_allowed = malloc(nc + 1);
    if (!w->mixed || !w->xor_allowed) {
        st = dcr_error_set(DCR_ENOMEM, "diff: run tables");
        goto done;
    }
    /* Without receivers every tensor counts as XOR-eligible (as in dcr
     * construct); residual ones still overwrite. */
    memset(w->xor_allowed, 1, nc + 1);
    DCR_CHECK_GOTO(dcr_scenario_alloc_shards(w->sc, &w->baseline), st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_shards(w->sc, &w->candidate), st, done);
    DCR_CHECK_GOTO(
        dcr_megatron_import(&w->sc->model, &w->sc->train, w->sc->layout, w->base, w->baseline), st,
        done);
    DCR_CHECK_GOTO(dcr__runs_mode(w, DCR_MODE_X, r), st, done);
    st = dcr__runs_mode(w, DCR_MODE_P, r);
done:
    dcr_scenario_free_tensors(w->baseline, w->baseline ? ns : 0);
    dcr_scenario_free_tensors(w->candidate, w->candidate ? ns : 0);
    free(w->mixed);
    free(w->xor_allowed);
    return st;
}

/* Comparison and construction of two sets of canonical tensors. */
static dcr_status_t dcr__diff_tensors(const dcr_scenario_t *sc, dcr_storage_t *const *base,
                                      dcr_storage_t *const *cand, const dcr_diff_options_t *opt,
                                      dcr_diff_result_t *r)
{
    size_t nc = dcr_inventory_count(sc->inventory);
    uint8_t *cls = malloc(nc + 1);
    if (!cls) return dcr_error_set(DCR_ENOMEM, "diff: class table");
    for (size_t c = 0; c < nc; c++)
        cls[c] = (uint8_t)dcr_tensor_class_of(dcr_inventory_at(sc->inventory, c)->name);
    dcr_status_t st = dcr__compare(sc, base, cand, cls, r);
    for (int k = 0; k < DCR_CLASS_COUNT; k++) dcr__add(&r->total, &r->classes[k]);
    DCR_LOG_INFO("diff: %lld of %lld elements changed; constructing",
                 (long long)r->total.changed_elements, (long long)r->total.elements);
    dcr__runs_t w = {.sc = sc, .opt = opt, .base = base, .cand = cand, .n = nc, .cls = cls};
    if (st == DCR_OK) st = dcr__construct(&w, r);
    free(cls);
    return st;
}

dcr_status_t dcr_ckpt_diff(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                           const dcr_diff_options_t *opt, dcr_diff_result_t *out_p)
{
    if (!sc || !old_path || !new_path || !opt || !out_p)
        return dcr_error_set(DCR_EINVAL, "diff: NULL argument");
    dcr_diff_result_t r;
    memset(&r, 0, sizeof(r));
    dcr__side_t base = {0}, cand = {0};
    size_t extra_old = 0;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr__side_open(sc, old_path, &base, &extra_old), st, done);
    DCR_CHECK_GOTO(dcr__side_open(sc, new_path, &cand, &r.extra_tensors), st, done);
    DCR_CHECK_GOTO(dcr__diff_tensors(sc, base.tensors, cand.tensors, opt, &r), st, done);
    *out_p = r;
done:
    dcr__side_close(&base);
    dcr__side_close(&cand);
    return st;
}

/* NEW = one synthetic step on the shards imported from OLD. */
static dcr_status_t dcr__step(const dcr_scenario_t *sc, const dcr_diff_step_t *step,
                              dcr_storage_t *const *shards, dcr_storage_t *const *cand,
                              int64_t *changed_p)
{
    dcr_adamw_t *a = NULL;
    if (step->kind == DCR_DIFF_STEP_ADAMW)
        DCR_CHECK(dcr_adamw_create(sc, shards, step->lr, step->seed, &a));
    const struct dcr_change_profile *p = step->kind == DCR_DIFF_STEP_PROFILE ? step->profile : NULL;
    dcr_status_t st = dcr_scenario_step(sc, a, p, step->rate, step->seed, shards, cand, changed_p);
    dcr_adamw_destroy(a);
    return st;
}

dcr_status_t dcr_ckpt_diff_step(const dcr_scenario_t *sc, const char *init_path,
                                const dcr_diff_step_t *step, const dcr_diff_options_t *opt,
                                dcr_diff_result_t *out_p)
{
    if (!sc || !init_path || !step || !opt || !out_p)
        return dcr_error_set(DCR_EINVAL, "diff: NULL argument");
    dcr_diff_result_t r;
    memset(&r, 0, sizeof(r));
    size_t nc = dcr_inventory_count(sc->inventory), ns = (size_t)sc->layout->nshards;
    dcr_storage_t **base = NULL, **cand = NULL, **shards = NULL;
    int64_t injected = 0;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr_scenario_alloc_canonical(sc, &base), st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_canonical(sc, &cand), st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_shards(sc, &shards), st, done);
    DCR_CHECK_GOTO(dcr_ckpt_init_canonical(sc, init_path, base), st, done);
    DCR_CHECK_GOTO(dcr_megatron_import(&sc->model, &sc->train, sc->layout, base, shards), st, done);
    /* OLD is what the training shards export to (an FP8 export
     * re-quantizes), so that only the step's changes show. */
    DCR_CHECK_GOTO(dcr_megatron_export(&sc->model, &sc->train, sc->layout, shards, base), st, done);
    DCR_CHECK_GOTO(dcr__step(sc, step, shards, cand, &injected), st, done);
    DCR_LOG_INFO("diff: synthetic step changed %lld elements", (long long)injected);
    DCR_CHECK_GOTO(dcr__diff_tensors(sc, base, cand, opt, &r), st, done);
    *out_p = r;
done:
    dcr_scenario_free_tensors(base, base ? nc : 0);
    dcr_scenario_free_tensors(cand, cand ? nc : 0);
    dcr_scenario_free_tensors(shards, shards ? ns : 0);
    return st;
}
