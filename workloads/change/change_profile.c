/* Change profiles: written from a diff, loaded with validation, replayed
 * as clustered per-class changes. */
#include "workloads/change/change_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dcr/outpath.h"
#include "workloads/model/input_file.h"

#include "dcr/rng.h"

#define DCR__PROFILE_FORMAT  "dcr-change-profile"
#define DCR__PROFILE_VERSION 1

void dcr_change_profile_from_diff(const dcr_diff_result_t *r, const char *model,
                                  dcr_change_profile_t *out_p)
{
    memset(out_p, 0, sizeof(*out_p));
    snprintf(out_p->model, sizeof(out_p->model), "%s", model ? model : "");
    for (int k = 0; k < DCR_CLASS_COUNT; k++) {
        const dcr_diff_figures_t *f = &r->classes[k];
        dcr_class_profile_t *c = &out_p->classes[k];
        if (f->tensors == 0) continue;
        c->present = true;
        c->elements = f->elements;
        c->change_rate = dcr_diff_change_rate(f);
        c->row_share = f->rows ? (double)f->changed_rows / (double)f->rows : 0.0;
        c->mean_run = f->runs ? (double)f->changed_elements / (double)f->runs : 1.0;
        c->expert_share = f->experts ? (double)f->experts_touched / (double)f->experts : 1.0;
    }
}

dcr_status_t dcr_change_profile_write(const dcr_change_profile_t *p, const char *path,
                                      const char *old_path, const char *new_path)
{
    json_t *classes = json_object();
    for (int k = 0; k < DCR_CLASS_COUNT; k++) {
        const dcr_class_profile_t *c = &p->classes[k];
        if (!c->present) continue;
        json_t *j = json_pack("{s:I, s:f, s:f, s:f}", "elements", (json_int_t)c->elements,
                              "change_rate", c->change_rate, "changed_row_share", c->row_share,
                              "mean_run_length", c->mean_run);
        if (j && k == DCR_CLASS_EXPERTS)
            json_object_set_new(j, "expert_share", json_real(c->expert_share));
        json_object_set_new(classes, dcr_tensor_class_name(k), j);
    }
    json_t *root = json_pack("{s:s, s:i, s:s, s:o}", "format", DCR__PROFILE_FORMAT, "version",
                             DCR__PROFILE_VERSION, "model", p->model, "classes", classes);
    if (root && old_path) json_object_set_new(root, "old", json_string(old_path));
    if (root && new_path) json_object_set_new(root, "new", json_string(new_path));
    char *text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    if (!text) return dcr_error_set(DCR_ENOMEM, "change profile %s: encoding failed", path);
    /* The output-path rule (dcr/outpath.h): never through a device, FIFO or symlink. */
    dcr_status_t st = dcr_outpath_write("change profile", path, text, strlen(text));
    free(text);
    return st;
}

/* ---- loading ---- */

static dcr_status_t dcr__profile_number(const char *path, const char *cls, json_t *obj,
                                        const char *key, bool required, double min, double max,
                                        double *out_p)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL && !required) return DCR_OK;
    if (!json_is_number(v) || !(json_number_value(v) >= min && json_number_value(v) <= max)) {
        return dcr_error_set(DCR_EPARSE,
                             "change profile %s: classes.%s.%s must be a number in [%g, %g]", path,
                             cls, key, min, max);
    }
    *out_p = json_number_value(v);
    return DCR_OK;
}

static dcr_status_t dcr__profile_class(const char *path, const char *name, json_t *obj,
                                       dcr_class_profile_t *c)
{
    if (!json_is_object(obj)) {
        return dcr_error_set(DCR_EPARSE, "change profile %s: classes.%s must be an object", path,
                             name);
    }
    c->present = true;
    c->expert_share = 1.0;
    c->mean_run = 1.0;
    DCR_CHECK(dcr__profile_number(path, name, obj, "change_rate", true, 0, 1, &c->change_rate));
    DCR_CHECK(dcr__profile_number(path, name, obj, "changed_row_share", true, c->change_rate, 1,
                                  &c->row_share));
    DCR_CHECK(dcr__profile_number(path, name, obj, "mean_run_length", true, 1, 1e12, &c->mean_run));
    DCR_CHECK(
        dcr__profile_number(path, name, obj, "expert_share", false, 1e-12, 1, &c->expert_share));
    json_t *el = json_object_get(obj, "elements");
    if (el != NULL && json_is_integer(el)) c->elements = json_integer_value(el);
    if (c->row_share > c->expert_share && strcmp(name, "experts") == 0) {
        /* Rows of untouched experts cannot change. */
        return dcr_error_set(DCR_EPARSE,
                             "change profile %s: classes.experts.changed_row_share %g exceeds "
                             "expert_share %g",
                             path, c->row_share, c->expert_share);
    }
    return DCR_OK;
}

static dcr_status_t dcr__profile_root(const char *path, json_t *root, dcr_change_profile_t *p)
{
    const char *format = json_string_value(json_object_get(root, "format"));
    if (format == NULL || strcmp(format, DCR__PROFILE_FORMAT) != 0) {
        return dcr_error_set(
            DCR_EPARSE, "change profile %s: key \"format\" must be \"" DCR__PROFILE_FORMAT "\"",
            path);
    }
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version) || json_integer_value(version) != DCR__PROFILE_VERSION) {
        return dcr_error_set(DCR_EPARSE, "change profile %s: key \"version\" must be %d", path,
                             DCR__PROFILE_VERSION);
    }
    snprintf(p->model, sizeof(p->model), "%s",
             json_is_string(json_object_get(root, "model"))
                 ? json_string_value(json_object_get(root, "model"))
                 : "");
    json_t *classes = json_object_get(root, "classes");
    if (!json_is_object(classes)) {
        return dcr_error_set(DCR_EPARSE, "change profile %s: key \"classes\" must be an object",
                             path);
    }
    const char *key;
    json_t *value;
    json_object_foreach(classes, key, value)
    {
        int k = 0;
        while (k < DCR_CLASS_COUNT && strcmp(key, dcr_tensor_class_name(k)) != 0) k++;
        if (k == DCR_CLASS_COUNT) {
            return dcr_error_set(DCR_EPARSE,
                                 "change profile %s: unknown class \"%s\" (expected attention, "
                                 "dense_mlp, experts, router, norms, embeddings, mamba or other)",
                                 path, key);
        }
        DCR_CHECK(dcr__profile_class(path, key, value, &p->classes[k]));
    }
    return DCR_OK;
}

dcr_status_t dcr_change_profile_load(const char *path, dcr_change_profile_t *out_p)
{
    /* The one checked reader: a missing file, a FIFO or a directory is one
     * line about the file, and a profile past the cap is never read. */
    char *text = NULL;
    DCR_CHECK(dcr_input_read(path, "change profile", DCR_CHANGE_PROFILE_FILE_MAX, &text, NULL));
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (root == NULL) {
        return dcr_error_set(DCR_EPARSE, "change profile %s: line %d: %s", path, jerr.line,
                             jerr.text);
    }
    dcr_change_profile_t p;
    memset(&p, 0, sizeof(p));
    dcr_status_t st = json_is_object(root) ? dcr__profile_root(path, root, &p)
                                           : dcr_error_set(DCR_EPARSE,
                                                           "change profile %s: top level must be "
                                                           "a JSON object",
                                                           path);
    json_decref(root);
    if (st == DCR_OK) *out_p = p;
    return st;
}

double dcr_change_profile_rate(const dcr_change_profile_t *p, const dcr_inventory_t *inv)
{
    double changed = 0, total = 0;
    for (size_t c = 0; c < dcr_inventory_count(inv); c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, c);
        const dcr_class_profile_t *cp = &p->classes[dcr_tensor_class_of(d->name)];
        double n = (double)dcr_desc_numel(d);
        total += n;
        if (cp->present) changed += cp->change_rate * n;
    }
    return total > 0 ? changed / total : 0.0;
}

/* ---- replay ---- */

/* A relative step of about 1e-2 (a zero becomes a small value); if rounding
 * keeps the bits, or lands on NaN, a low mantissa bit flips instead. */
static void dcr__change_elem(dcr_dtype_t dt, uint8_t *elem, dcr_rng_t *rng)
{
    uint64_t before = dcr_dtype_load_bits(dt, elem);
    double v = dcr_dtype_load_f64(dt, elem);
    float nv = v == 0.0 || !isfinite(v) ? 1e-3f : (float)(v * (dcr_rng_u64(rng) & 1 ? 1.01 : 0.99));
    dcr_convert(elem, dt, &nv, DCR_DTYPE_FP32, 1);
    uint64_t after = dcr_dtype_load_bits(dt, elem);
    if (after == before || dcr_dtype_bits_isnan(dt, after)) {
        after = dcr_dtype_bits_isnan(dt, before ^ 1) ? before ^ 2 : before ^ 1;
        dcr_dtype_store_bits(dt, elem, after);
    }
}

/* Within a chosen row, changes follow a two-state chain that starts a run
 * with probability q and ends one with probability 1/m: runs of mean length
 * m, a stationary changed fraction qm / (qm + 1). A chosen row must change
 * (the profile's row share counts rows with a change), so its first run
 * starts at a position drawn from the chain's first-start distribution
 * conditioned on a start within the row; q is then set so that the
 * expected changed fraction given at least one start is p. */
typedef struct dcr__draw {
    double row; /* chance of choosing a row */
    double p;   /* changed fraction of a chosen row */
    double m;   /* mean run length */
} dcr__draw_t;

static dcr__draw_t dcr__draw_for(const dcr_class_profile_t *c, bool experts)
{
    dcr__draw_t d = {0, 0, 1};
    if (!c->present || c->change_rate <= 0 || c->row_share <= 0) return d;
    d.row = experts ? fmin(1.0, c->row_share / c->expert_share) : c->row_share;
    d.p = fmin(1.0, c->change_rate / c->row_share);
    d.m = fmax(1.0, c->mean_run);
    return d;
}

/* Expected changed fraction of a row of `cols` given at least one start. */
static double dcr__fraction(double q, double m, double cols)
{
    double stationary = q * m / (q * m + 1.0);
    return stationary / -expm1(cols * log1p(-q));
}

/* The start probability q in (0, 1] whose conditioned fraction is p
 * (bisection; the fraction grows with q). A p below what one run of mean m
 * gives is not reachable: q then tends to 0 and each chosen row gets one
 * run. */
static double dcr__start_prob(double p, double m, double cols)
{
    if (p >= 1.0) return 1.0;
    double lo = 1e-12, hi = 1.0 - 1e-12;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (dcr__fraction(mid, m, cols) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static int64_t dcr__inject_tensor(const dcr_tensor_desc_t *d, uint8_t *data, dcr__draw_t draw,
                                  dcr_rng_t *rng)
{
    int64_t n = dcr_desc_numel(d), cols = d->ndim >= 2 ? d->shape[d->ndim - 1] : n;
    size_t es = dcr_dtype_size(d->dtype);
    double q = dcr__start_prob(draw.p, draw.m, (double)cols);
    double stay = draw.p >= 1.0 ? 1.0 : 1.0 - 1.0 / draw.m;
    /* P(first start < cols) = 1 - (1 - q)^cols, the normalizer of the first start. */
    double reach = -expm1((double)cols * log1p(-fmin(q, 1.0 - 1e-15)));
    int64_t changed = 0;
    for (int64_t r0 = 0; cols > 0 && r0 < n; r0 += cols) {
        if (dcr_rng_uniform(rng) >= draw.row) continue;
        /* Inverse CDF of the first start, truncated to the row. */
        double u = dcr_rng_uniform(rng);
        int64_t first = q >= 1.0 ? 0 : (int64_t)floor(log1p(-u * reach) / log1p(-q));
        if (first >= cols) first = cols - 1;
        bool in_run = true;
        for (int64_t i = r0 + first; i < r0 + cols; i++) {
            if (i > r0 + first) {
                double v = dcr_rng_uniform(rng);
                in_run = in_run ? v < stay : v < q;
            }
            if (!in_run) continue;
            dcr__change_elem(d->dtype, data + (size_t)i * es, rng);
            changed++;
        }
    }
    return changed;
}

dcr_status_t dcr_change_profile_inject(const dcr_scenario_t *sc, const dcr_change_profile_t *p,
                                       uint64_t seed, dcr_storage_t *const *shards,
                                       dcr_storage_t *const *canonical, int64_t *changed_p)
{
    /* Start from the export of the shards, so that the changes are drawn on
     * what training holds even where import and export are not inverse. */
    DCR_CHECK(dcr_megatron_export(&sc->model, &sc->train, sc->layout, shards, canonical));
    dcr_rng_t root;
    dcr_rng_seed(&root, seed);
    int64_t changed = 0;
    const char *group = NULL; /* the current (layer, expert) and whether it is touched */
    size_t group_len = 0;
    bool touched = false;
    for (size_t c = 0; c < dcr_inventory_count(sc->inventory); c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        dcr_tensor_class_t k = dcr_tensor_class_of(d->name);
        const dcr_class_profile_t *cp = &p->classes[k];
        dcr_rng_t rng = dcr_rng_split(&root, c);
        if (k == DCR_CLASS_EXPERTS) {
            size_t len = dcr_tensor_expert_key(d->name);
            if (group == NULL || len != group_len || strncmp(group, d->name, len) != 0) {
                group = d->name;
                group_len = len;
                touched = dcr_rng_uniform(&rng) < cp->expert_share;
            }
            if (!touched) continue;
        }
        dcr__draw_t draw = dcr__draw_for(cp, k == DCR_CLASS_EXPERTS);
        if (draw.row > 0) changed += dcr__inject_tensor(d, canonical[c]->data, draw, &rng);
    }
    DCR_CHECK(dcr_megatron_import(&sc->model, &sc->train, sc->layout, canonical, shards));
    /* The oracle is what a full export of the new shards gives (an FP8
     * export re-quantizes). */
    DCR_CHECK(dcr_megatron_export(&sc->model, &sc->train, sc->layout, shards, canonical));
    *changed_p = changed;
    return DCR_OK;
}
