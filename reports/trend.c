/* Trend over runs and BASE against NEW (trend.h). */
#include "reports/trend.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/bootstrap.h"
#include "reports/gnuplot.h"

#define MB 1e6

static FILE *open_in(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    return f;
}

static dcr_status_t close_in(FILE *f, const char *name)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? dcr_error_set(DCR_EIO, "report: writing %s failed", name) : DCR_OK;
}

/* ---- trend ---- */

static const dcr_results_set_t *sort_set; /* qsort has no context argument */

static int cmp_time(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(sort_set->runs[x].time, sort_set->runs[y].time);
    return c ? c : (x > y) - (x < y);
}

/* Appends ", key=value" for every configuration key whose value differs
 * between the series, so that legends tell them apart without listing what
 * every run shares. */
static void append_varying(dcr_trend_t *t, const dcr_results_group_t *groups, size_t i)
{
    const json_t *config = t->set->runs[groups[i].run_index[0]].config;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)config, k, v)
    {
        if (!strcmp(k, "refits")) continue; /* a sample size, not a configuration */
        bool varies = false;
        for (size_t j = 0; j < t->nseries && !varies; j++) {
            /* A key an older file did not record is not a difference to show. */
            json_t *other = json_object_get(t->set->runs[groups[j].run_index[0]].config, k);
            varies = other && !json_equal(v, other);
        }
        if (!varies) continue;
        char text[96], raw[160], *label = t->series[i].label;
        if (json_is_string(v))
            snprintf(text, sizeof(text), "%s", json_string_value(v));
        else if (json_is_number(v))
            snprintf(text, sizeof(text), "%g", json_number_value(v));
        else
            snprintf(text, sizeof(text), "%s", json_is_true(v) ? "true" : "false");
        size_t used = strlen(label);
        snprintf(raw, sizeof(raw), "%s%s=%s", used ? ", " : "", k, text);
        dcr_escape(label + used, sizeof(t->series[i].label) - used, raw);
    }
}

/* Series labels must differ when the series do: add the machine, then the
 * command, then a number, to every label that another series shares. */
static void disambiguate(dcr_trend_t *t, const dcr_results_group_t *groups)
{
    bool *shared = calloc(t->nseries ? t->nseries : 1, sizeof(bool));
    for (int pass = 0; shared && pass < 3; pass++) {
        /* Decided before any label changes, so that both of a pair get the addition. */
        for (size_t i = 0; i < t->nseries; i++) {
            shared[i] = false;
            for (size_t j = 0; j < t->nseries && !shared[i]; j++)
                shared[i] = j != i && !strcmp(t->series[i].label, t->series[j].label);
        }
        for (size_t i = 0; i < t->nseries; i++) {
            if (!shared[i]) continue;
            const dcr_results_stored_run_t *run = &t->set->runs[groups[i].run_index[0]];
            char raw[320], *label = t->series[i].label;
            size_t used = strlen(label);
            if (pass == 0) snprintf(raw, sizeof(raw), " on %s", run->machine);
            if (pass == 1) snprintf(raw, sizeof(raw), " [%s]", run->command);
            if (pass == 2) snprintf(raw, sizeof(raw), " #%zu", i + 1);
            dcr_escape(label + used, sizeof(t->series[i].label) - used, raw);
        }
    }
    free(shared);
}

static dcr_status_t fill_series(dcr_trend_t *t, const dcr_results_group_t *groups, size_t n)
{
    t->series = calloc(n ? n : 1, sizeof(*t->series));
    if (!t->series) return dcr_error_set(DCR_ENOMEM, "trend");
    for (size_t g = 0; g < n; g++) {
        dcr_trend_series_t *s = &t->series[t->nseries++];
        s->order = calloc(groups[g].nruns, sizeof(size_t));
        if (!s->order) return dcr_error_set(DCR_ENOMEM, "trend");
        /* The group's runs in the trend's time order. */
        for (size_t k = 0; k < t->nruns; k++)
            for (size_t i = 0; i < groups[g].nruns; i++)
                if (groups[g].run_index[i] == t->by_time[k]) s->order[s->nruns++] = k;
    }
    /* A legend shows what tells the series apart; a lone series gets its full label. */
    for (size_t g = 0; g < n; g++) append_varying(t, groups, g);
    for (size_t g = 0; g < n; g++)
        if (!t->series[g].label[0])
            dcr_results_config_label(t->set->runs[groups[g].run_index[0]].config,
                                     t->series[g].label, sizeof(t->series[g].label));
    disambiguate(t, groups);
    return DCR_OK;
}

dcr_status_t dcr_trend_build(const dcr_results_set_t *set, dcr_trend_t **out_p)
{
    dcr_trend_t *t = calloc(1, sizeof(*t));
    if (!t) return dcr_error_set(DCR_ENOMEM, "trend");
    t->set = set;
    t->nruns = set->nruns;
    t->by_time = calloc(set->nruns ? set->nruns : 1, sizeof(size_t));
    dcr_status_t st = t->by_time ? DCR_OK : dcr_error_set(DCR_ENOMEM, "trend");
    for (size_t i = 0; st == DCR_OK && i < set->nruns; i++) t->by_time[i] = i;
    if (st == DCR_OK) {
        sort_set = set;
        qsort(t->by_time, set->nruns, sizeof(size_t), cmp_time);
    }
    dcr_results_group_t *groups = NULL;
    size_t n = 0;
    if (st == DCR_OK) st = dcr_results_group_runs(set, &groups, &n);
    if (st == DCR_OK) st = fill_series(t, groups, n);
    dcr_results_groups_free(groups, n);
    if (st != DCR_OK) {
        dcr_trend_destroy(t);
        return st;
    }
    *out_p = t;
    return DCR_OK;
}

void dcr_trend_destroy(dcr_trend_t *t)
{
    if (!t) return;
    for (size_t i = 0; t->series && i < t->nseries; i++) free(t->series[i].order);
    free(t->series);
    free(t->by_time);
    free(t);
}

typedef struct trend_metric {
    const char *column, *title;
    double unit;
} trend_metric_t;

static const trend_metric_t trend_metrics[] = {
    {"latency_s", "(a) refit latency (s)", 1},
    {"transport_lb_s", "(b) transport bound (s)", 1},
    {"construction_lb_s", "(c) construction bound (s)", 1},
    {"payload_bytes", "(d) payload (MB)", MB},
};
#define NTREND (sizeof(trend_metrics) / sizeof(trend_metrics[0]))

/* median, lo, hi of a run's column (NaN left out; all NaN when none is measured). */
static dcr_status_t run_point(const dcr_results_stored_run_t *run, const char *column,
                              double out[3])
{
    out[0] = out[1] = out[2] = NAN;
    const double *v = dcr_results_column(run, column);
    if (!v || !run->nrefits) return DCR_OK;
    double *kept = malloc(run->nrefits * sizeof(double));
    if (!kept) return dcr_error_set(DCR_ENOMEM, "trend");
    size_t n = 0;
    for (size_t i = 0; i < run->nrefits; i++)
        if (!isnan(v[i])) kept[n++] = v[i];
    dcr_status_t st = DCR_OK;
    if (n) {
        st = dcr_bootstrap_median_ci(kept, n, 0.95, 1000, DCR_BOOTSTRAP_SEED, &out[1], &out[2]);
        out[0] = dcr_bootstrap_median(kept, n);
    }
    free(kept);
    return st;
}

static dcr_status_t write_trend_data(const dcr_trend_t *t, const char *dir)
{
    FILE *f = open_in(dir, "data/trend.dat");
    if (!f) return DCR_EIO;
    dcr_status_t st = DCR_OK;
    for (size_t s = 0; st == DCR_OK && s < t->nseries; s++) {
        fprintf(f, "# series %zu (label in trend.body.gp)\n# order", s);
        for (size_t m = 0; m < NTREND; m++)
            fprintf(f, " %s_median %s_lo %s_hi", trend_metrics[m].column, trend_metrics[m].column,
                    trend_metrics[m].column);
        fprintf(f, "\n");
        for (size_t i = 0; st == DCR_OK && i < t->series[s].nruns; i++) {
            size_t k = t->series[s].order[i];
            fprintf(f, "%zu", k);
            for (size_t m = 0; st == DCR_OK && m < NTREND; m++) {
                double p[3];
                st = run_point(&t->set->runs[t->by_time[k]], trend_metrics[m].column, p);
                for (int j = 0; j < 3; j++) fprintf(f, " %.9g", p[j] / trend_metrics[m].unit);
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n\n");
    }
    dcr_status_t cst = close_in(f, "data/trend.dat");
    return st != DCR_OK ? st : cst;
}

/* x tics: the short git revision of every run (every k-th when crowded). */
static void trend_xtics(const dcr_trend_t *t, FILE *f)
{
    size_t step = t->nruns > 30 ? (t->nruns + 29) / 30 : 1;
    fprintf(f, "set xtics rotate by 45 right (");
    for (size_t k = 0; k < t->nruns; k += step) {
        char rev[32];
        snprintf(rev, sizeof(rev), "%zu %.7s", k, t->set->runs[t->by_time[k]].git_revision);
        fprintf(f, "%s", k ? ", " : "");
        dcr_gnuplot_quote(f, rev);
        fprintf(f, " %zu", k);
    }
    fprintf(f, ")\n");
}

static const char *const trend_palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                            "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
#define NTPAL (sizeof(trend_palette) / sizeof(trend_palette[0]))

static void trend_panel(const dcr_trend_t *t, FILE *f, size_t m)
{
    int col = 2 + 3 * (int)m;
    /* One legend, in the first panel, for all four. */
    fprintf(f, "set title '%s'\n%s\nplot ", trend_metrics[m].title,
            m == 0 ? "set key top left box opaque font ',9'" : "unset key");
    for (size_t s = 0; s < t->nseries; s++) {
        const char *c = trend_palette[s % NTPAL];
        /* Series beyond the palette get a dash pattern, so none looks like another. */
        int dash = 1 + (int)(s / NTPAL);
        fprintf(f,
                "%s'data/trend.dat' index %zu using 1:%d:%d with filledcurves fs transparent "
                "solid 0.18 noborder lc rgb '%s' notitle, \\\n  '' index %zu using 1:%d:%d:%d "
                "with yerrorbars pt 7 ps 0.8 lw 1 lc rgb '%s' notitle, \\\n  '' index %zu using "
                "1:%d with lines lw 2 dt %d lc rgb '%s' title ",
                s ? ", \\\n  " : "", s, col + 1, col + 2, c, s, col, col + 1, col + 2, c, s, col,
                dash, c);
        dcr_gnuplot_quote(f, t->series[s].label);
    }
    fprintf(f, "\n");
}

dcr_status_t dcr_trend_write(const dcr_trend_t *t, const char *dir)
{
    DCR_CHECK(write_trend_data(t, dir));
    FILE *f = open_in(dir, "trend.body.gp");
    if (!f) return DCR_EIO;
    fprintf(f,
            "reset\nset multiplot layout 2,2 title 'Per-run medians over time (x: runs in "
            "time order, labelled by git revision; bands: 95%% bootstrap interval of each "
            "run median)'\n"
            "set grid\nset yrange [0:*]\nset xlabel 'run (index, git revision)'\n"
            "set xrange [-0.5:%zu - 0.5]\n",
            t->nruns);
    trend_xtics(t, f);
    for (size_t m = 0; m < NTREND; m++) trend_panel(t, f, m);
    fprintf(f, "unset multiplot\n");
    return close_in(f, "trend.body.gp");
}

void dcr_trend_md(const dcr_trend_t *t, FILE *f)
{
    fprintf(f,
            "## Trend over runs\n\n![trend](trend.png)\n\n"
            "Each point is one run's median over its timed refits, with the 95%% bootstrap "
            "interval of that median as a band; runs are in time order, one line per "
            "configuration (and machine).\n\n"
            "| # | time | git revision | series | latency median (s) |\n|---|---|---|---|---|\n");
    for (size_t s = 0; s < t->nseries; s++) {
        for (size_t i = 0; i < t->series[s].nruns; i++) {
            size_t k = t->series[s].order[i];
            const dcr_results_stored_run_t *run = &t->set->runs[t->by_time[k]];
            double p[3];
            if (run_point(run, "latency_s", p) != DCR_OK) p[0] = NAN;
            char when[64], rev[64];
            dcr_escape(when, sizeof(when), run->time);
            dcr_escape(rev, sizeof(rev), run->git_revision);
            fprintf(f, "| %zu | %s | %.12s | %s | %.4g [%.4g, %.4g] |\n", k, when, rev,
                    t->series[s].label, p[0], p[1], p[2]);
        }
    }
    fprintf(f, "\n");
}

/* ---- BASE against NEW ---- */

static bool judged(const dcr_compare_metric_t *x)
{
    return x->kind == DCR_COMPARE_LOWER_BETTER || x->kind == DCR_COMPARE_COMPONENT;
}

/* The data blocks, one per verdict class, so each gets its colour and legend entry. */
static const struct {
    const char *title, *color;
    dcr_compare_verdict_t v;
} verdict_styles[] = {
    {"REGRESSED", "#d62728", DCR_COMPARE_REGRESSED},
    {"inconclusive", "#ff7f0e", DCR_COMPARE_INCONCLUSIVE},
    {"same", "#1f77b4", DCR_COMPARE_SAME},
    {"improved", "#2ca02c", DCR_COMPARE_IMPROVED},
    {"minor (a part of the refit)", "#9467bd", DCR_COMPARE_MINOR},
};
#define NVSTYLE (sizeof(verdict_styles) / sizeof(verdict_styles[0]))

static dcr_status_t write_ab_data(const dcr_compare_t *c, const char *dir, size_t *rows_p)
{
    FILE *f = open_in(dir, "data/base_vs_new.dat");
    if (!f) return DCR_EIO;
    size_t rows = 0;
    for (size_t v = 0; v < NVSTYLE; v++) {
        fprintf(f, "# %s: row ratio lo hi\n", verdict_styles[v].title);
        size_t row = 0;
        for (size_t p = 0; p < c->npairs; p++) {
            for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
                const dcr_compare_metric_t *x = &c->pairs[p].metrics[m];
                if (!judged(x)) continue;
                if (x->verdict == verdict_styles[v].v && !isnan(x->lo))
                    fprintf(f, "%zu %.9g %.9g %.9g\n", row, x->ratio, x->lo, x->hi);
                row++;
            }
        }
        rows = row;
        /* gnuplot refuses an empty block: a point outside the range keeps the index valid. */
        fprintf(f, "-10 NaN NaN NaN\n\n\n");
    }
    *rows_p = rows;
    return close_in(f, "data/base_vs_new.dat");
}

static void ab_ytics(const dcr_compare_t *c, FILE *f)
{
    fprintf(f, "set ytics (");
    size_t row = 0;
    for (size_t p = 0; p < c->npairs; p++) {
        for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
            const dcr_compare_metric_t *x = &c->pairs[p].metrics[m];
            if (!judged(x)) continue;
            char label[128];
            snprintf(label, sizeof(label), "#%zu %s (n %zu/%zu)%s", p + 1, x->name, x->base.n,
                     x->cur.n, isnan(x->lo) ? " not judged" : "");
            fprintf(f, "%s", row ? ", " : "");
            dcr_gnuplot_quote(f, label);
            fprintf(f, " %zu", row++);
        }
    }
    fprintf(f, ")\n");
}

dcr_status_t dcr_base_vs_new_write(const dcr_compare_t *c, const char *dir, size_t *rows_p)
{
    *rows_p = 0;
    if (!c->npairs) return DCR_OK;
    size_t rows = 0;
    DCR_CHECK(write_ab_data(c, dir, &rows));
    FILE *f = open_in(dir, "base_vs_new.body.gp");
    if (!f) return DCR_EIO;
    double t = c->opts.threshold_pct / 100;
    fprintf(f,
            "reset\nset title 'NEW / BASE of the medians with the %g%% bootstrap interval "
            "(regressed only when the whole interval lies right of 1 + threshold)'\n"
            "set xlabel 'median(NEW) / median(BASE)'\nset grid x\nset yrange [%zu - 0.5:-0.5]\n"
            "set key outside right top vertical box\nset offsets graph 0.05, graph 0.05, 0, 0\n",
            100 * c->opts.confidence, rows);
    ab_ytics(c, f);
    fprintf(f,
            "set arrow from 1, graph 0 to 1, graph 1 nohead lw 1.5 lc rgb 'black'\n"
            "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead lw 1.5 dt 2 lc rgb '#d62728'\n"
            "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead lw 1 dt 3 lc rgb '#2ca02c'\n"
            "plot ",
            1 + t, 1 + t, 1 - t, 1 - t);
    for (size_t v = 0; v < NVSTYLE; v++)
        fprintf(f,
                "%s'data/base_vs_new.dat' index %zu using 2:1:3:4 with xerrorbars pt 7 ps 1.2 "
                "lw 2 lc rgb '%s' title '%s'",
                v ? ", \\\n  " : "", v, verdict_styles[v].color, verdict_styles[v].title);
    fprintf(f, ", \\\n  NaN with lines dt 2 lw 1.5 lc rgb '#d62728' title '1 + threshold', "
               "\\\n  NaN with lines dt 3 lw 1 lc rgb '#2ca02c' title '1 - threshold'\n");
    *rows_p = rows;
    return close_in(f, "base_vs_new.body.gp");
}

void dcr_base_vs_new_md(const dcr_compare_t *c, FILE *f)
{
    fprintf(f, "## BASE against NEW\n\nBASE %s, NEW %s, threshold %g%%.\n\n", c->base->path,
            c->cur->path, c->opts.threshold_pct);
    if (!c->npairs) {
        fprintf(f, "No configuration appears in both files.\n\n");
        return;
    }
    fprintf(f, "![base against new](base_vs_new.png)\n\n"
               "| # | configuration | metric | ratio | interval | verdict | reason |\n"
               "|---|---|---|---|---|---|---|\n");
    for (size_t p = 0; p < c->npairs; p++) {
        char label[256];
        dcr_results_config_label(
            c->base->runs[c->base_groups[c->pairs[p].base_group].run_index[0]].config, label,
            sizeof(label));
        for (int m = 0; m < DCR_COMPARE_NMETRICS; m++) {
            const dcr_compare_metric_t *x = &c->pairs[p].metrics[m];
            if (!judged(x)) continue;
            fprintf(f, "| %zu | %s | %s | %.4g | [%.4g, %.4g] | %s | %s |\n", p + 1, label, x->name,
                    x->ratio, x->lo, x->hi, dcr_compare_verdict_name(x->verdict), x->reason);
        }
    }
    fprintf(f, "\n");
}
