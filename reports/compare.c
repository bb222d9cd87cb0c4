/* dcr compare: match, judge, print. */
#include "reports/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    case DCR_COMPARE_NOISE:
        return "noise";
    case DCR_COMPARE_IMPROVED:
        return "improved";
    case DCR_COMPARE_REGRESSED:
        return "REGRESSED";
    case DCR_COMPARE_MINOR:
        return "minor";
    default:
        return "n/a";
    }
}

dcr_compare_verdict_t dcr_compare_judge(const dcr_results_stats_t *base,
                                        const dcr_results_stats_t *cur, double threshold_pct)
{
    if (!base->n || !cur->n || !(base->median > 0)) return DCR_COMPARE_NA;
    double t = threshold_pct / 100.0, diff = cur->median - base->median;
    double spread_b = base->max - base->min, spread_n = cur->max - cur->min;
    double spread = spread_b > spread_n ? spread_b : spread_n;
    if (cur->median > base->median * (1 + t))
        return cur->min > base->max || diff > spread ? DCR_COMPARE_REGRESSED : DCR_COMPARE_NOISE;
    if (cur->median < base->median * (1 - t))
        return cur->max < base->min || -diff > spread ? DCR_COMPARE_IMPROVED : DCR_COMPARE_NOISE;
    return DCR_COMPARE_SAME;
}

static double ratio_of(double num, double den)
{
    return den > 0 ? num / den : NAN;
}

static dcr_status_t group_stats(const dcr_results_set_t *set, const dcr_results_group_t *g,
                                const char *column, dcr_results_stats_t *out)
{
    double *v = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_results_group_pool(set, g, column, &v, &n));
    *out = dcr_results_stats(v, n);
    free(v);
    return DCR_OK;
}

static dcr_status_t judge_metric(const dcr_compare_t *c, dcr_compare_pair_t *p, int m)
{
    dcr_compare_metric_t *x = &p->metrics[m];
    x->name = metric_defs[m].name;
    x->kind = metric_defs[m].kind;
    DCR_CHECK(group_stats(c->base, &c->base_groups[p->base_group], x->name, &x->base));
    DCR_CHECK(group_stats(c->cur, &c->new_groups[p->new_group], x->name, &x->cur));
    x->ratio = ratio_of(x->cur.median, x->base.median);
    x->ratio_min = ratio_of(x->cur.min, x->base.min);
    x->ratio_max = ratio_of(x->cur.max, x->base.max);
    if (x->kind == DCR_COMPARE_INFO)
        x->verdict = DCR_COMPARE_NA;
    else if (x->kind == DCR_COMPARE_MUST_BE_ONE)
        /* Every value is 0 or 1 (the reader checks), so min < 1 means some refit was not exact. */
        x->verdict = !x->cur.n        ? DCR_COMPARE_NA
                     : x->cur.min < 1 ? DCR_COMPARE_REGRESSED
                                      : DCR_COMPARE_SAME;
    else
        x->verdict = dcr_compare_judge(&x->base, &x->cur, c->threshold_pct);
    /* A part of the refit matters only through the whole: a 1 ms swing of a 3 ms
     * finalization inside a 100 ms refit is run-to-run drift, not a regression.
     * metrics[0] is latency_s, judged first. */
    bool moved = x->verdict == DCR_COMPARE_REGRESSED || x->verdict == DCR_COMPARE_IMPROVED;
    if (x->kind == DCR_COMPARE_COMPONENT && moved &&
        fabs(x->cur.median - x->base.median) <=
            c->threshold_pct / 100.0 * p->metrics[0].base.median)
        x->verdict = DCR_COMPARE_MINOR;
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
            dcr_compare_pair_t *p = &c->pairs[c->npairs++];
            p->base_group = b;
            p->new_group = n;
            c->base_matched[b] = c->new_matched[n] = true;
            for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
                DCR_CHECK(judge_metric(c, p, m));
                if (p->metrics[m].verdict == DCR_COMPARE_REGRESSED) {
                    p->regressed = true;
                    c->regressions++;
                }
            }
            break;
        }
    }
    return DCR_OK;
}

dcr_status_t dcr_compare_files(const char *base_path, const char *new_path, double threshold_pct,
                               dcr_compare_t **out_p)
{
    dcr_compare_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "comparing results");
    c->threshold_pct = threshold_pct;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr_results_read(base_path, &c->base), st, fail);
    DCR_CHECK_GOTO(dcr_results_read(new_path, &c->cur), st, fail);
    DCR_CHECK_GOTO(dcr_results_group_runs(c->base, &c->base_groups, &c->nbase_groups), st, fail);
    DCR_CHECK_GOTO(dcr_results_group_runs(c->cur, &c->new_groups, &c->nnew_groups), st, fail);
    DCR_CHECK_GOTO(match_groups(c), st, fail);
    *out_p = c;
    return DCR_OK;
fail:
    dcr_compare_destroy(c);
    return st;
}

void dcr_compare_destroy(dcr_compare_t *c)
{
    if (!c) return;
    free(c->pairs);
    free(c->base_matched);
    free(c->new_matched);
    dcr_results_groups_free(c->new_groups, c->nnew_groups);
    dcr_results_groups_free(c->base_groups, c->nbase_groups);
    dcr_results_set_destroy(c->cur);
    dcr_results_set_destroy(c->base);
    free(c);
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

static void print_pair(const dcr_compare_t *c, const dcr_compare_pair_t *p, FILE *out)
{
    const dcr_results_group_t *bg = &c->base_groups[p->base_group],
                              *ng = &c->new_groups[p->new_group];
    char label[256];
    dcr_results_config_label(group_config(c->base, bg), label, sizeof(label));
    fprintf(out, "%s\n  BASE ", label);
    print_runs(out, c->base, bg);
    fprintf(out, " (%zu refits)  NEW ", p->metrics[0].base.n);
    print_runs(out, c->cur, ng);
    fprintf(out, " (%zu refits)\n", p->metrics[0].cur.n);
    fprintf(out, "  %-24s %12s %12s %12s   %12s %12s %12s %10s %10s %10s  %s\n", "metric",
            "base min", "base median", "base max", "new min", "new median", "new max", "new/base",
            "min/min", "max/max", "verdict");
    for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
        const dcr_compare_metric_t *x = &p->metrics[m];
        fprintf(out, "  %-24s %12.6g %12.6g %12.6g   %12.6g %12.6g %12.6g", x->name, x->base.min,
                x->base.median, x->base.max, x->cur.min, x->cur.median, x->cur.max);
        print_ratio(out, x->ratio);
        print_ratio(out, x->ratio_min);
        print_ratio(out, x->ratio_max);
        fprintf(out, "  %s\n",
                x->kind == DCR_COMPARE_INFO ? "(workload)" : dcr_compare_verdict_name(x->verdict));
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

void dcr_compare_print(const dcr_compare_t *c, FILE *out)
{
    fprintf(out, "BASE %s (%zu runs), NEW %s (%zu runs), threshold %g%%\n\n", c->base->path,
            c->base->nruns, c->cur->path, c->cur->nruns, c->threshold_pct);
    for (size_t i = 0; i < c->npairs; i++) print_pair(c, &c->pairs[i], out);
    print_unmatched(out, "BASE", c->base, c->base_groups, c->nbase_groups, c->base_matched);
    print_unmatched(out, "NEW", c->cur, c->new_groups, c->nnew_groups, c->new_matched);
    if (!c->npairs) fprintf(out, "no configuration appears in both files\n");
    if (c->regressions)
        fprintf(out, "verdict: REGRESSION (%zu metric%s regressed)\n", c->regressions,
                c->regressions == 1 ? "" : "s");
    else
        fprintf(out, "verdict: ok (%zu configuration%s compared)\n", c->npairs,
                c->npairs == 1 ? "" : "s");
}

static json_t *json_ratio(double r)
{
    return isnan(r) ? json_null() : json_real(r);
}

static json_t *json_stats(const dcr_results_stats_t *s)
{
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

static json_t *json_metric(const dcr_compare_metric_t *x)
{
    return json_pack(
        "{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:s}", "name", x->name, "kind", kind_name(x->kind), "base",
        json_stats(&x->base), "new", json_stats(&x->cur), "ratio", json_ratio(x->ratio),
        "ratio_min", json_ratio(x->ratio_min), "ratio_max", json_ratio(x->ratio_max), "verdict",
        x->verdict == DCR_COMPARE_REGRESSED ? "regressed" : dcr_compare_verdict_name(x->verdict));
}

static json_t *json_pair(const dcr_compare_t *c, const dcr_compare_pair_t *p)
{
    const dcr_results_group_t *bg = &c->base_groups[p->base_group],
                              *ng = &c->new_groups[p->new_group];
    char label[256];
    dcr_results_config_label(group_config(c->base, bg), label, sizeof(label));
    json_t *metrics = json_array();
    for (int m = 0; metrics && m < DCR_COMPARE_NMETRICS; m++)
        json_array_append_new(metrics, json_metric(&p->metrics[m]));
    return json_pack("{s:s,s:O,s:o,s:o,s:b,s:o}", "label", label, "config",
                     group_config(c->base, bg), "base_runs", json_runs(c->base, bg), "new_runs",
                     json_runs(c->cur, ng), "regressed", p->regressed, "metrics", metrics);
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

char *dcr_compare_json(const dcr_compare_t *c)
{
    json_t *matched = json_array();
    for (size_t i = 0; matched && i < c->npairs; i++)
        json_array_append_new(matched, json_pair(c, &c->pairs[i]));
    json_t *j = json_pack(
        "{s:s,s:s,s:f,s:s,s:I,s:o,s:o,s:o}", "base", c->base->path, "new", c->cur->path,
        "threshold_pct", c->threshold_pct, "verdict", c->regressions ? "regression" : "ok",
        "regressions", (json_int_t)c->regressions, "matched", matched, "unmatched_base",
        json_unmatched(c->base, c->base_groups, c->nbase_groups, c->base_matched), "unmatched_new",
        json_unmatched(c->cur, c->new_groups, c->nnew_groups, c->new_matched));
    if (!j) return NULL;
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
    json_decref(j);
    return text;
}
