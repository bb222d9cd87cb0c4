/* dcr compare: match, judge, print. */
#include "reports/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/bootstrap.h"
#include "reports/paired.h"

typedef struct metric_def {
    const char *name;
    dcr_compare_kind_t kind;
} metric_def_t;

/* Judged metrics first, in the order a reader scans for trouble. */
/* clang-format off */
static const metric_def_t metric_defs[DCR_COMPARE_NMETRICS] = {
    {"latency_s", DCR_COMPARE_LOWER_BETTER},
    {"bit_exact", DCR_COMPARE_MUST_BE_ONE},
    {"payload_bytes", DCR_COMPARE_LOWER_BETTER},
    {"cross_bytes", DCR_COMPARE_LOWER_BETTER},
    {"construction_lb_s", DCR_COMPARE_COMPONENT},
    {"transport_lb_s", DCR_COMPARE_COMPONENT},
    {"finalization_s", DCR_COMPARE_COMPONENT},
    {"raw_changed_value_bytes", DCR_COMPARE_INFO},
    {"changed_elements", DCR_COMPARE_INFO},
};
/* clang-format on */

const char *dcr_compare_verdict_name(dcr_compare_verdict_t v)
{
    switch (v) {
    case DCR_COMPARE_SAME:
        return "same";
    case DCR_COMPARE_IMPROVED:
        return "improved";
    case DCR_COMPARE_REGRESSED:
        return "REGRESSED";
    case DCR_COMPARE_INCONCLUSIVE:
        return "inconclusive";
    case DCR_COMPARE_TOO_FEW:
        return "too few";
    case DCR_COMPARE_MINOR:
        return "minor";
    default:
        return "n/a";
    }
}

const char *dcr_compare_verdict_id(dcr_compare_verdict_t v)
{
    return v == DCR_COMPARE_REGRESSED ? "regressed"
           : v == DCR_COMPARE_TOO_FEW ? "too_few"
           : v == DCR_COMPARE_NA      ? "na"
                                      : dcr_compare_verdict_name(v);
}

dcr_compare_opts_t dcr_compare_opts_default(void)
{
    return (dcr_compare_opts_t){.threshold_pct = 10,
                                .confidence = DCR_COMPARE_DEFAULT_CONFIDENCE,
                                .min_samples = DCR_COMPARE_DEFAULT_MIN_SAMPLES};
}

/* A sample's measured values (NaN marks a figure that was not measured),
 * run by run; runs left with none are dropped. */
typedef struct kept {
    double *v;
    size_t n, *run_len, nruns;
} kept_t;

static void kept_free(kept_t *k)
{
    free(k->v);
    free(k->run_len);
}

static dcr_status_t keep_measured(const dcr_bootstrap_sample_t *s, kept_t *out)
{
    size_t nruns = s->nruns ? s->nruns : 1;
    *out =
        (kept_t){malloc((s->n ? s->n : 1) * sizeof(double)), 0, calloc(nruns, sizeof(size_t)), 0};
    if (!out->v || !out->run_len) {
        kept_free(out);
        return dcr_error_set(DCR_ENOMEM, "comparing results");
    }
    size_t off = 0;
    for (size_t r = 0; r < nruns; r++) {
        size_t len = s->nruns ? s->run_len[r] : s->n, kept = 0;
        for (size_t i = 0; i < len; i++)
            if (!isnan(s->v[off + i])) out->v[out->n + kept++] = s->v[off + i];
        off += len;
        out->n += kept;
        if (kept) out->run_len[out->nruns++] = kept;
    }
    return DCR_OK;
}

/* The verdict from an interval [lo, hi] of NEW/BASE, with its reason. */
static dcr_compare_verdict_t verdict_of(double lo, double hi, double t, double level,
                                        const char *remedy, char *reason, size_t len)
{
    double pct = 100 * level;
    if (lo > 1 + t) {
        snprintf(reason, len,
                 "the whole %g%% interval [%.3f, %.3f] lies above 1 + threshold = %.3f", pct, lo,
                 hi, 1 + t);
        return DCR_COMPARE_REGRESSED;
    }
    if (hi > 1 + t) {
        snprintf(reason, len,
                 "the %g%% interval [%.3f, %.3f] straddles 1 + threshold = %.3f: cannot tell a "
                 "regression from noise; %s narrow it",
                 pct, lo, hi, 1 + t, remedy);
        return DCR_COMPARE_INCONCLUSIVE;
    }
    if (hi < 1 - t) {
        snprintf(reason, len,
                 "the whole %g%% interval [%.3f, %.3f] lies below 1 - threshold = %.3f", pct, lo,
                 hi, 1 - t);
        return DCR_COMPARE_IMPROVED;
    }
    snprintf(reason, len, "the %g%% interval [%.3f, %.3f] stays at or below 1 + threshold = %.3f",
             pct, lo, hi, 1 + t);
    return DCR_COMPARE_SAME;
}

/* The verdict of two measured samples (no NaN left). */
static dcr_status_t judge_kept(const kept_t *b, const kept_t *n, const dcr_compare_opts_t *opts,
                               double *lo, double *hi, dcr_compare_verdict_t *v, char *reason,
                               size_t len)
{
    *lo = *hi = NAN;
    *v = DCR_COMPARE_NA;
    if (!b->n && !n->n) {
        snprintf(reason, len, "not measured on either side");
        return DCR_OK;
    }
    if (b->n < opts->min_samples || n->n < opts->min_samples) {
        snprintf(reason, len,
                 "too few refits to decide: BASE %zu, NEW %zu, at least %zu per side needed "
                 "(dcr bench --refits)",
                 b->n, n->n, opts->min_samples);
        *v = DCR_COMPARE_TOO_FEW;
        return DCR_OK;
    }
    dcr_results_stats_t sb = dcr_results_stats(b->v, b->n);
    if (!(sb.median > 0)) {
        snprintf(reason, len, "BASE median is 0: no ratio");
        return DCR_OK;
    }
    dcr_bootstrap_sample_t bs = {b->v, b->n, b->run_len, b->nruns},
                           ns = {n->v, n->n, n->run_len, n->nruns};
    DCR_CHECK(dcr_bootstrap_ratio_ci_runs(&bs, &ns, opts->confidence, DCR_BOOTSTRAP_ITERS,
                                          DCR_BOOTSTRAP_SEED, lo, hi));
    *v = verdict_of(*lo, *hi, opts->threshold_pct / 100, opts->confidence, "more refits", reason,
                    len);
    return DCR_OK;
}

dcr_status_t dcr_compare_judge_runs(const dcr_bootstrap_sample_t *base,
                                    const dcr_bootstrap_sample_t *cur,
                                    const dcr_compare_opts_t *opts, double *lo_p, double *hi_p,
                                    dcr_compare_verdict_t *verdict_p, char *reason, size_t len)
{
    kept_t b, n;
    DCR_CHECK(keep_measured(base, &b));
    dcr_status_t st = keep_measured(cur, &n);
    if (st != DCR_OK) {
        kept_free(&b);
        return st;
    }
    double lo, hi;
    dcr_compare_verdict_t v;
    st = judge_kept(&b, &n, opts, &lo, &hi, &v, reason, len);
    kept_free(&b);
    kept_free(&n);
    if (st != DCR_OK) return st;
    *lo_p = lo;
    *hi_p = hi;
    *verdict_p = v;
    return DCR_OK;
}

dcr_status_t dcr_compare_judge(const double *base, size_t nb, const double *cur, size_t nn,
                               const dcr_compare_opts_t *opts, double *lo_p, double *hi_p,
                               dcr_compare_verdict_t *verdict_p, char *reason, size_t len)
{
    dcr_bootstrap_sample_t b = {base, nb, NULL, 0}, n = {cur, nn, NULL, 0};
    return dcr_compare_judge_runs(&b, &n, opts, lo_p, hi_p, verdict_p, reason, len);
}

static double ratio_of(double num, double den)
{
    return den > 0 ? num / den : NAN;
}

/* The values of a column pooled over a group's runs, with each run's length. */
typedef struct pooled {
    double *v;
    size_t n, *run_len, nruns;
} pooled_t;

static dcr_status_t pool_runs(const dcr_results_set_t *set, const dcr_results_group_t *g,
                              const char *column, pooled_t *out)
{
    *out = (pooled_t){0};
    DCR_CHECK(dcr_results_group_pool(set, g, column, &out->v, &out->n));
    out->run_len = calloc(g->nruns ? g->nruns : 1, sizeof(size_t));
    if (!out->run_len) return dcr_error_set(DCR_ENOMEM, "comparing results");
    for (size_t i = 0; i < g->nruns; i++) {
        const dcr_results_stored_run_t *r = &set->runs[g->run_index[i]];
        if (dcr_results_column(r, column) && r->nrefits) out->run_len[out->nruns++] = r->nrefits;
    }
    return DCR_OK;
}

static void pooled_free(pooled_t *p)
{
    free(p->v);
    free(p->run_len);
}

static void judge_bit_exact(dcr_compare_metric_t *x)
{
    /* Every value is 0 or 1 (the reader checks), so min < 1 means some refit was not exact. */
    if (!x->cur.n) {
        x->verdict = DCR_COMPARE_NA;
        snprintf(x->reason, sizeof(x->reason), "NEW has no refits");
    } else if (x->cur.min < 1) {
        x->verdict = DCR_COMPARE_REGRESSED;
        snprintf(x->reason, sizeof(x->reason), "a NEW refit differs from its dense refit");
    } else {
        x->verdict = DCR_COMPARE_SAME;
        snprintf(x->reason, sizeof(x->reason), "every NEW refit is bit-exact");
    }
}

/* A part of the refit matters only through the whole: a 1 ms swing of a 3 ms
 * finalization inside a 100 ms refit is run-to-run drift, not a regression.
 * metrics[0] is latency_s, judged first. */
static void judge_component(const dcr_compare_t *c, const dcr_compare_pair_t *p,
                            dcr_compare_metric_t *x)
{
    bool flagged = x->verdict == DCR_COMPARE_REGRESSED || x->verdict == DCR_COMPARE_INCONCLUSIVE;
    double allowed = c->opts.threshold_pct / 100.0 * p->metrics[0].base.median;
    double moved = fabs(x->cur.median - x->base.median);
    if (!flagged) return;
    if (moved <= allowed) {
        x->verdict = DCR_COMPARE_MINOR;
        snprintf(x->reason, sizeof(x->reason),
                 "the median moved by %.3g, within threshold x BASE median latency_s = %.3g", moved,
                 allowed);
    } else if (p->metrics[0].verdict != DCR_COMPARE_REGRESSED) {
        /* A part that grew while the whole did not is time moving between
         * stages under a changing load, not a slower refit. */
        x->verdict = DCR_COMPARE_MINOR;
        snprintf(x->reason, sizeof(x->reason),
                 "moved by %.3g (ratio %.3f), but latency_s did not regress: shown, not failed",
                 moved, x->ratio);
    }
}

/* The median of one block's measured values of a column; NAN when none. */
static double block_median(const dcr_results_stored_run_t *r, const char *column)
{
    const double *col = dcr_results_column(r, column);
    dcr_results_stats_t st = col ? dcr_results_stats(col, r->nrefits) : (dcr_results_stats_t){0};
    return st.n ? st.median : NAN;
}

/* The log ratios of the block pairs where both sides measured something
 * and BASE's median is positive, into x->block_ratios and d. */
static dcr_status_t block_log_ratios(const dcr_compare_t *c, const dcr_compare_pair_t *p,
                                     dcr_compare_metric_t *x, double **d_p)
{
    const dcr_results_group_t *bg = &c->base_groups[p->base_group],
                              *ng = &c->new_groups[p->new_group];
    size_t nb = bg->nruns; /* = ng->nruns: check_pairable */
    x->block_ratios = malloc((nb ? nb : 1) * sizeof(double));
    double *d = malloc((nb ? nb : 1) * sizeof(double));
    if (!x->block_ratios || !d) {
        free(d);
        return dcr_error_set(DCR_ENOMEM, "comparing results");
    }
    for (size_t i = 0; i < nb; i++) {
        double mb = block_median(&c->base->runs[bg->run_index[i]], x->name),
               mn = block_median(&c->cur->runs[ng->run_index[i]], x->name);
        if (!(mb > 0) || !(mn > 0)) continue;
        x->block_ratios[x->nblocks] = mn / mb;
        d[x->nblocks++] = log(mn / mb);
    }
    *d_p = d;
    return DCR_OK;
}

/* What gives a paired comparison more blocks. */
static const char *more_blocks(const dcr_compare_t *c)
{
    return c->ab ? "more --refits with dcr bench --ab" : "scripts/ab-bench.sh --rounds";
}

static dcr_status_t judge_paired(const dcr_compare_t *c, const dcr_compare_pair_t *p,
                                 dcr_compare_metric_t *x)
{
    double *d = NULL;
    DCR_CHECK(block_log_ratios(c, p, x, &d));
    size_t need = dcr_paired_min_blocks(c->opts.confidence);
    x->verdict = DCR_COMPARE_TOO_FEW;
    if (!x->nblocks) {
        x->verdict = DCR_COMPARE_NA;
        snprintf(x->reason, sizeof(x->reason),
                 "no block pair with a positive median on both sides");
    } else if (x->base.n < c->opts.min_samples || x->cur.n < c->opts.min_samples) {
        snprintf(x->reason, sizeof(x->reason),
                 "too few refits to decide: BASE %zu, NEW %zu, at least %zu per side needed",
                 x->base.n, x->cur.n, c->opts.min_samples);
    } else if (x->nblocks < need) {
        snprintf(x->reason, sizeof(x->reason),
                 "too few blocks to decide: %zu pairs, at least %zu needed at %g%% (%s)",
                 x->nblocks, need, 100 * c->opts.confidence, more_blocks(c));
    } else {
        dcr_paired_interval_t ci;
        dcr_status_t st = dcr_paired_signed_rank_ci(d, x->nblocks, c->opts.confidence, &ci);
        free(d);
        DCR_CHECK(st);
        x->ratio = exp(ci.estimate);
        x->lo = exp(ci.lo);
        x->hi = exp(ci.hi);
        x->coverage = ci.coverage;
        char why[192];
        x->verdict = verdict_of(x->lo, x->hi, c->opts.threshold_pct / 100, c->opts.confidence,
                                more_blocks(c), why, sizeof(why));
        snprintf(x->reason, sizeof(x->reason), "%s (%zu paired blocks)", why, x->nblocks);
        return DCR_OK;
    }
    free(d);
    return DCR_OK;
}

static dcr_status_t judge_metric(const dcr_compare_t *c, dcr_compare_pair_t *p, int m)
{
    dcr_compare_metric_t *x = &p->metrics[m];
    x->name = metric_defs[m].name;
    x->kind = metric_defs[m].kind;
    x->lo = x->hi = x->coverage = NAN;
    pooled_t b = {0}, n = {0};
    dcr_status_t st = pool_runs(c->base, &c->base_groups[p->base_group], x->name, &b);
    if (st == DCR_OK) st = pool_runs(c->cur, &c->new_groups[p->new_group], x->name, &n);
    if (st == DCR_OK) {
        x->base = dcr_results_stats(b.v, b.n);
        x->cur = dcr_results_stats(n.v, n.n);
        x->ratio = x->pooled_ratio = ratio_of(x->cur.median, x->base.median);
        x->prob_greater = dcr_bootstrap_prob_greater(b.v, b.n, n.v, n.n);
    }
    if (st != DCR_OK) {
    } else if (x->kind == DCR_COMPARE_INFO) {
        x->verdict = DCR_COMPARE_NA;
        snprintf(x->reason, sizeof(x->reason), "describes the workload: shown, not judged");
    } else if (x->kind == DCR_COMPARE_MUST_BE_ONE) {
        judge_bit_exact(x);
    } else if (c->opts.paired) {
        st = judge_paired(c, p, x);
        if (st == DCR_OK && x->kind == DCR_COMPARE_COMPONENT) judge_component(c, p, x);
    } else {
        dcr_bootstrap_sample_t bs = {b.v, b.n, b.run_len, b.nruns},
                               ns = {n.v, n.n, n.run_len, n.nruns};
        st = dcr_compare_judge_runs(&bs, &ns, &c->opts, &x->lo, &x->hi, &x->verdict, x->reason,
                                    sizeof(x->reason));
        if (st == DCR_OK && x->kind == DCR_COMPARE_COMPONENT) judge_component(c, p, x);
    }
    pooled_free(&b);
    pooled_free(&n);
    return st;
}

static void count_verdicts(dcr_compare_t *c, dcr_compare_pair_t *p)
{
    for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
        dcr_compare_verdict_t v = p->metrics[m].verdict;
        if (v == DCR_COMPARE_REGRESSED) {
            p->regressed = true;
            c->regressions++;
        } else if (v == DCR_COMPARE_INCONCLUSIVE || v == DCR_COMPARE_TOO_FEW) {
            c->inconclusive++;
        }
    }
}

/* --paired: block i of each side must have been written (the time a run
 * is appended) no later than block i + 1 of either side: rounds in order, as
 * scripts/ab-bench.sh writes them (ISO 8601 UTC times of one writer sort as
 * text). */
static dcr_status_t check_pairable(const dcr_compare_t *c, const dcr_results_group_t *bg,
                                   const dcr_results_group_t *ng)
{
    if (bg->nruns != ng->nruns)
        return dcr_error_set(DCR_EINVAL,
                             "--paired: BASE has %zu blocks of a configuration and NEW %zu; "
                             "pairing needs one NEW block per BASE block (scripts/ab-bench.sh)",
                             bg->nruns, ng->nruns);
    /* One A/B file: the blocks are pairs of one process, named by their
     * ids; every block of a side bears the time its side was appended. */
    for (size_t i = 0; !c->ab && i + 1 < bg->nruns; i++) {
        const char *b0 = c->base->runs[bg->run_index[i]].time,
                   *n0 = c->cur->runs[ng->run_index[i]].time,
                   *b1 = c->base->runs[bg->run_index[i + 1]].time,
                   *n1 = c->cur->runs[ng->run_index[i + 1]].time;
        const char *late = strcmp(b0, n0) > 0 ? b0 : n0, *early = strcmp(b1, n1) < 0 ? b1 : n1;
        if (strcmp(late, early) > 0) {
            char a[64], b[64];
            return dcr_error_set(DCR_EINVAL,
                                 "--paired: block %zu (written %s) is later than block %zu (%s): "
                                 "the files are not interleaved blocks (scripts/ab-bench.sh)",
                                 i + 1, dcr_escape(a, sizeof(a), late), i + 2,
                                 dcr_escape(b, sizeof(b), early));
        }
    }
    return DCR_OK;
}

static dcr_status_t match_groups(dcr_compare_t *c)
{
    c->pairs = calloc(c->nbase_groups ? c->nbase_groups : 1, sizeof(*c->pairs));
    c->base_matched = calloc(c->nbase_groups + 1, sizeof(bool));
    c->new_matched = calloc(c->nnew_groups + 1, sizeof(bool));
    if (!c->pairs || !c->base_matched || !c->new_matched)
        return dcr_error_set(DCR_ENOMEM, "comparing results");
    for (size_t b = 0; b < c->nbase_groups; b++) {
        for (size_t n = 0; n < c->nnew_groups; n++) {
            if (c->new_matched[n] || strcmp(c->base_groups[b].key, c->new_groups[n].key)) continue;
            if (c->opts.paired) DCR_CHECK(check_pairable(c, &c->base_groups[b], &c->new_groups[n]));
            dcr_compare_pair_t *p = &c->pairs[c->npairs++];
            p->base_group = b;
            p->new_group = n;
            c->base_matched[b] = c->new_matched[n] = true;
            for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) DCR_CHECK(judge_metric(c, p, m));
            count_verdicts(c, p);
            break;
        }
    }
    return DCR_OK;
}

static dcr_status_t check_ignored(const dcr_compare_t *c)
{
    for (size_t i = 0; i < c->opts.nignore; i++) {
        const char *k = c->opts.ignore[i];
        if (!dcr_results_has_key(c->base, k) && !dcr_results_has_key(c->cur, k)) {
            return dcr_error_set(DCR_EINVAL,
                                 "--match-ignore: no run of either file has a configuration key "
                                 "'%s' (nor is it command or machine)",
                                 k);
        }
    }
    return DCR_OK;
}

static dcr_status_t group_both(dcr_compare_t *c)
{
    DCR_CHECK(check_ignored(c));
    DCR_CHECK(dcr_results_group_runs_ignoring(c->base, c->opts.ignore, c->opts.nignore,
                                              &c->base_groups, &c->nbase_groups));
    return dcr_results_group_runs_ignoring(c->cur, c->opts.ignore, c->opts.nignore, &c->new_groups,
                                           &c->nnew_groups);
}

/* Groups both sides' runs and matches them: the comparison handed out, or
 * destroyed on failure. */
static dcr_status_t compare_finish(dcr_compare_t *c, dcr_compare_t **out_p)
{
    dcr_status_t st = group_both(c);
    if (st == DCR_OK) st = match_groups(c);
    if (st != DCR_OK) {
        dcr_compare_destroy(c);
        return st;
    }
    *out_p = c;
    return DCR_OK;
}

dcr_status_t dcr_compare_files(const char *base_path, const char *new_path,
                               const dcr_compare_opts_t *opts, dcr_compare_t **out_p)
{
    dcr_compare_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "comparing results");
    c->opts = *opts;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr_results_read(base_path, &c->base), st, fail);
    DCR_CHECK_GOTO(dcr_results_read(new_path, &c->cur), st, fail);
    return compare_finish(c, out_p);
fail:
    dcr_compare_destroy(c);
    return st;
}

void dcr_compare_destroy(dcr_compare_t *c)
{
    if (!c) return;
    for (size_t i = 0; c->pairs && i < c->npairs; i++)
        for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) free(c->pairs[i].metrics[m].block_ratios);
    free(c->pairs);
    free(c->base_matched);
    free(c->new_matched);
    dcr_results_groups_free(c->new_groups, c->nnew_groups);
    dcr_results_groups_free(c->base_groups, c->nbase_groups);
    dcr_results_set_destroy(c->cur);
    dcr_results_set_destroy(c->base);
    for (size_t i = 0; i < c->nab_keys; i++) free(c->ab_keys[i]);
    free(c->ab_keys);
    free(c);
}

/* ---- one A/B file ------------------------------------------------------------- */

/* The configuration keys whose values differ between a and b (either
 * side's), into c->ab_keys. */
static dcr_status_t ab_differing_keys(dcr_compare_t *c, const json_t *a, const json_t *b)
{
    size_t cap = json_object_size(a) + json_object_size(b) + 1;
    c->ab_keys = calloc(cap, sizeof(char *));
    if (!c->ab_keys) return dcr_error_set(DCR_ENOMEM, "comparing results");
    const json_t *side[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)side[s], key, v)
        {
            if (json_equal(v, json_object_get(side[1 - s], key))) continue;
            bool have = false;
            for (size_t i = 0; i < c->nab_keys; i++) have |= !strcmp(c->ab_keys[i], key);
            if (have) continue;
            if (!(c->ab_keys[c->nab_keys] = strdup(key)))
                return dcr_error_set(DCR_ENOMEM, "comparing results");
            c->nab_keys++;
        }
    }
    return DCR_OK;
}

/* c->base and c->cur from the last A/B run of the file at path. */
static dcr_status_t ab_split(dcr_compare_t *c, const char *path)
{
    dcr_results_set_t *set = NULL;
    DCR_CHECK(dcr_results_read(path, &set));
    size_t a = 0, b = 0;
    dcr_status_t st = dcr_results_ab_pair(set, &a, &b);
    if (st == DCR_OK) st = dcr_results_split_blocks(set, a, &c->base);
    if (st == DCR_OK) st = dcr_results_split_blocks(set, b, &c->cur);
    if (st == DCR_OK) st = ab_differing_keys(c, set->runs[a].config, set->runs[b].config);
    dcr_results_set_destroy(set);
    return st;
}

dcr_status_t dcr_compare_ab_file(const char *path, const dcr_compare_opts_t *opts,
                                 dcr_compare_t **out_p)
{
    if (opts->nignore)
        return dcr_error_set(DCR_EINVAL, "--match-ignore does not apply to one A/B file: the keys "
                                         "its sides differ in are left out of matching");
    dcr_compare_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "comparing results");
    c->opts = *opts;
    c->opts.paired = true;
    c->ab = true;
    dcr_status_t st;
    DCR_CHECK_GOTO(ab_split(c, path), st, fail);
    c->opts.ignore = (const char *const *)c->ab_keys;
    c->opts.nignore = c->nab_keys;
    return compare_finish(c, out_p);
fail:
    dcr_compare_destroy(c);
    return st;
}

static const json_t *group_config(const dcr_results_set_t *set, const dcr_results_group_t *g)
{
    return set->runs[g->run_index[0]].config;
}

static void print_runs(FILE *out, const dcr_results_set_t *set, const dcr_results_group_t *g)
{
    for (size_t i = 0; i < g->nruns; i++) {
        char name[256]; /* run names come from the file */
        fprintf(out, "%s%s", i ? "," : "",
                dcr_escape(name, sizeof(name), set->runs[g->run_index[i]].name));
    }
}

static void print_ratio(FILE *out, double r)
{
    if (isnan(r))
        fprintf(out, " %9s", "n/a");
    else
        fprintf(out, " %8.3fx", r);
}

static void print_interval(FILE *out, double lo, double hi)
{
    if (isnan(lo))
        fprintf(out, " %17s", "-");
    else
        fprintf(out, " [%7.3f, %7.3f]", lo, hi);
}

static void print_machine(FILE *out, const dcr_results_set_t *set, const dcr_results_group_t *g)
{
    char machine[160]; /* from the file */
    dcr_escape(machine, sizeof(machine), set->runs[g->run_index[0]].machine);
    fprintf(out, "  on %s\n", machine);
}

static void print_metric(FILE *out, const dcr_compare_metric_t *x)
{
    fprintf(out, "  %-24s %5zu %5zu %12.6g %12.6g", x->name, x->base.n, x->cur.n, x->base.median,
            x->cur.median);
    print_ratio(out, x->ratio);
    print_interval(out, x->lo, x->hi);
    if (isnan(x->prob_greater))
        fprintf(out, " %8s", "-");
    else
        fprintf(out, " %8.2f", x->prob_greater);
    fprintf(out, "  %s\n",
            x->kind == DCR_COMPARE_INFO ? "(workload)" : dcr_compare_verdict_name(x->verdict));
}

static void print_pair(const dcr_compare_t *c, const dcr_compare_pair_t *p, FILE *out)
{
    const dcr_results_group_t *bg = &c->base_groups[p->base_group],
                              *ng = &c->new_groups[p->new_group];
    char label[256];
    dcr_results_config_label(group_config(c->base, bg), label, sizeof(label));
    fprintf(out, "%s\n  BASE ", label);
    print_runs(out, c->base, bg);
    print_machine(out, c->base, bg);
    fprintf(out, "  NEW  ");
    print_runs(out, c->cur, ng);
    print_machine(out, c->cur, ng);
    fprintf(out, "  %-24s %5s %5s %12s %12s %10s %17s %8s  %s\n", "metric", "n(B)", "n(N)",
            "base median", "new median", "new/base", "interval", "P(N>B)", "verdict");
    for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) print_metric(out, &p->metrics[m]);
    for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
        const dcr_compare_metric_t *x = &p->metrics[m];
        if (x->verdict == DCR_COMPARE_REGRESSED || x->verdict == DCR_COMPARE_INCONCLUSIVE ||
            x->verdict == DCR_COMPARE_TOO_FEW)
            fprintf(out, "  %s %s: %s\n", x->name, dcr_compare_verdict_name(x->verdict), x->reason);
    }
    fprintf(out, "\n");
}

static void print_unmatched(FILE *out, const char *side, const dcr_results_set_t *set,
                            const dcr_results_group_t *groups, size_t n, const bool *matched)
{
    for (size_t g = 0; g < n; g++) {
        if (matched[g]) continue;
        char label[256];
        dcr_results_config_label(group_config(set, &groups[g]), label, sizeof(label));
        fprintf(out, "only in %s: ", side);
        print_runs(out, set, &groups[g]);
        fprintf(out, " (%s)\n", label);
    }
}

static const char *overall(const dcr_compare_t *c)
{
    return c->regressions ? "regression" : c->inconclusive ? "inconclusive" : "ok";
}

/* One A/B file: which side is which and what differs. */
static void print_ab(const dcr_compare_t *c, FILE *out)
{
    fprintf(out, "A/B file %s (ABBA order, block = pair): BASE = side A, NEW = side B",
            c->base->path);
    const json_t *a = c->base->nruns ? c->base->runs[0].config : NULL,
                 *b = c->cur->nruns ? c->cur->runs[0].config : NULL;
    if (!c->nab_keys) fprintf(out, ", the same configuration (A/A)");
    for (size_t i = 0; i < c->nab_keys; i++) {
        char *va = json_dumps(json_object_get(a, c->ab_keys[i]),
                              JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10)),
             *vb = json_dumps(json_object_get(b, c->ab_keys[i]),
                              JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10));
        fprintf(out, "%s %s %s -> %s", i ? "," : "; B changes", c->ab_keys[i], va ? va : "-",
                vb ? vb : "-");
        free(va);
        free(vb);
    }
    fprintf(out, "\n");
}

void dcr_compare_print(const dcr_compare_t *c, FILE *out)
{
    if (c->ab) print_ab(c, out);
    fprintf(out,
            "BASE %s (%zu runs), NEW %s (%zu runs), threshold %g%%, %g%% %s, at least %zu refits "
            "per side\n\n",
            c->base->path, c->base->nruns, c->cur->path, c->cur->nruns, c->opts.threshold_pct,
            100 * c->opts.confidence,
            c->opts.paired
                ? "signed-rank interval of the per-block ratios of medians (paired blocks)"
                : "bootstrap interval of median(NEW)/median(BASE)",
            c->opts.min_samples);
    for (size_t i = 0; i < c->npairs; i++) print_pair(c, &c->pairs[i], out);
    print_unmatched(out, "BASE", c->base, c->base_groups, c->nbase_groups, c->base_matched);
    print_unmatched(out, "NEW", c->cur, c->new_groups, c->nnew_groups, c->new_matched);
    if (!c->npairs) fprintf(out, "no configuration appears in both files\n");
    fprintf(out,
            "verdict: %s (%zu configuration%s compared, %zu metric%s regressed, %zu "
            "inconclusive)\n",
            c->regressions ? "REGRESSION" : overall(c), c->npairs, c->npairs == 1 ? "" : "s",
            c->regressions, c->regressions == 1 ? "" : "s", c->inconclusive);
}

static json_t *json_number_or_null(double r)
{
    return isnan(r) || isinf(r) ? json_null() : json_real(r);
}

static json_t *json_stats(const dcr_results_stats_t *s)
{
    if (!s->n)
        return json_pack("{s:I,s:n,s:n,s:n,s:n}", "n", (json_int_t)0, "min", "median", "max",
                         "mean");
    return json_pack("{s:I,s:f,s:f,s:f,s:f}", "n", (json_int_t)s->n, "min", s->min, "median",
                     s->median, "max", s->max, "mean", s->mean);
}

static json_t *json_runs(const dcr_results_set_t *set, const dcr_results_group_t *g)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < g->nruns; i++)
        json_array_append_new(a, json_string(set->runs[g->run_index[i]].name));
    return a;
}

static const char *kind_name(dcr_compare_kind_t k)
{
    return k == DCR_COMPARE_LOWER_BETTER  ? "lower_better"
           : k == DCR_COMPARE_COMPONENT   ? "component"
           : k == DCR_COMPARE_MUST_BE_ONE ? "must_be_one"
                                          : "workload";
}

static json_t *json_interval(const dcr_compare_metric_t *x)
{
    if (isnan(x->lo)) return json_null();
    return json_pack("[o,o]", json_number_or_null(x->lo), json_number_or_null(x->hi));
}

static const char *test_name(const dcr_compare_t *c, const dcr_compare_metric_t *x)
{
    if (x->kind == DCR_COMPARE_MUST_BE_ONE) return "every NEW value is 1";
    if (x->kind == DCR_COMPARE_INFO) return "none";
    if (c->opts.paired)
        return "Wilcoxon signed-rank interval of the per-block ratios of medians (paired "
               "interleaved blocks; Hodges-Lehmann estimate)";
    return "percentile bootstrap of the ratio of medians (resampling runs, then refits)";
}

static json_t *json_metric(const dcr_compare_t *c, const dcr_compare_metric_t *x)
{
    json_t *j =
        json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:f,s:s,s:I,s:I,s:o,s:s,s:s}", "name", x->name, "kind",
                  kind_name(x->kind), "base", json_stats(&x->base), "new", json_stats(&x->cur),
                  "ratio", json_number_or_null(x->ratio), "interval", json_interval(x),
                  "confidence", c->opts.confidence, "test", test_name(c, x), "bootstrap_resamples",
                  (json_int_t)DCR_BOOTSTRAP_ITERS, "bootstrap_seed", (json_int_t)DCR_BOOTSTRAP_SEED,
                  "prob_greater", json_number_or_null(x->prob_greater), "verdict",
                  dcr_compare_verdict_id(x->verdict), "reason", x->reason);
    if (j && c->opts.paired && x->block_ratios) {
        json_t *r = json_array();
        for (size_t i = 0; r && i < x->nblocks; i++)
            json_array_append_new(r, json_real(x->block_ratios[i]));
        json_object_set_new(j, "pooled_ratio", json_number_or_null(x->pooled_ratio));
        json_object_set_new(j, "blocks", json_integer((json_int_t)x->nblocks));
        json_object_set_new(j, "block_ratios", r ? r : json_null());
        json_object_set_new(j, "coverage", json_number_or_null(x->coverage));
    }
    return j;
}

static json_t *json_pair(const dcr_compare_t *c, const dcr_compare_pair_t *p)
{
    const dcr_results_group_t *bg = &c->base_groups[p->base_group],
                              *ng = &c->new_groups[p->new_group];
    char label[256];
    dcr_results_config_label(group_config(c->base, bg), label, sizeof(label));
    json_t *metrics = json_array();
    for (int m = 0; metrics && m < DCR_COMPARE_NMETRICS; m++)
        json_array_append_new(metrics, json_metric(c, &p->metrics[m]));
    return json_pack(
        "{s:s,s:O,s:s,s:s,s:o,s:o,s:b,s:o}", "label", label, "config", group_config(c->base, bg),
        "base_machine", c->base->runs[bg->run_index[0]].machine, "new_machine",
        c->cur->runs[ng->run_index[0]].machine, "base_runs", json_runs(c->base, bg), "new_runs",
        json_runs(c->cur, ng), "regressed", p->regressed, "metrics", metrics);
}

static json_t *json_regressions(const dcr_compare_t *c)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < c->npairs; i++) {
        const dcr_compare_pair_t *p = &c->pairs[i];
        char label[256];
        dcr_results_config_label(group_config(c->base, &c->base_groups[p->base_group]), label,
                                 sizeof(label));
        for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
            const dcr_compare_metric_t *x = &p->metrics[m];
            if (x->verdict != DCR_COMPARE_REGRESSED) continue;
            json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:o,s:s}", "label", label, "metric",
                                               x->name, "ratio", json_number_or_null(x->ratio),
                                               "interval", json_interval(x), "reason", x->reason));
        }
    }
    return a;
}

static json_t *json_unmatched(const dcr_results_set_t *set, const dcr_results_group_t *groups,
                              size_t n, const bool *matched)
{
    json_t *a = json_array();
    for (size_t g = 0; a && g < n; g++) {
        if (matched[g]) continue;
        char label[256];
        dcr_results_config_label(group_config(set, &groups[g]), label, sizeof(label));
        json_array_append_new(a, json_pack("{s:s,s:O,s:o}", "label", label, "config",
                                           group_config(set, &groups[g]), "runs",
                                           json_runs(set, &groups[g])));
    }
    return a;
}

static json_t *json_ignored(const dcr_compare_t *c)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < c->opts.nignore; i++)
        json_array_append_new(a, json_string(c->opts.ignore[i]));
    return a;
}

/* One A/B file: {file, order, differs: [{key, a, b}]}. */
static json_t *json_ab(const dcr_compare_t *c)
{
    const json_t *a = c->base->nruns ? c->base->runs[0].config : NULL,
                 *b = c->cur->nruns ? c->cur->runs[0].config : NULL;
    json_t *differs = json_array();
    for (size_t i = 0; differs && i < c->nab_keys; i++) {
        json_t *va = json_object_get(a, c->ab_keys[i]), *vb = json_object_get(b, c->ab_keys[i]);
        json_array_append_new(differs,
                              json_pack("{s:s,s:O,s:O}", "key", c->ab_keys[i], "a",
                                        va ? va : json_null(), "b", vb ? vb : json_null()));
    }
    return json_pack("{s:s,s:s,s:o}", "file", c->base->path, "order", "ABBA", "differs", differs);
}

char *dcr_compare_json(const dcr_compare_t *c)
{
    json_t *matched = json_array();
    for (size_t i = 0; matched && i < c->npairs; i++)
        json_array_append_new(matched, json_pair(c, &c->pairs[i]));
    json_t *j = json_pack(
        "{s:s,s:s,s:f,s:f,s:I,s:o,s:b,s:s,s:{s:I,s:I,s:I},s:o,s:o,s:o,s:o}", "base", c->base->path,
        "new", c->cur->path, "threshold_pct", c->opts.threshold_pct, "confidence",
        c->opts.confidence, "min_samples", (json_int_t)c->opts.min_samples, "match_ignore",
        json_ignored(c), "paired", c->opts.paired, "verdict", overall(c), "counts", "regressed",
        (json_int_t)c->regressions, "inconclusive", (json_int_t)c->inconclusive, "pairs",
        (json_int_t)c->npairs, "regressions", json_regressions(c), "matched", matched,
        "unmatched_base", json_unmatched(c->base, c->base_groups, c->nbase_groups, c->base_matched),
        "unmatched_new", json_unmatched(c->cur, c->new_groups, c->nnew_groups, c->new_matched));
    if (!j) return NULL;
    if (c->ab) json_object_set_new(j, "ab", json_ab(c));
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
    json_decref(j);
    return text;
}
