/* dcr report: group runs, write data and gnuplot scripts, run gnuplot,
 * write report.md. The scripts stay in the output folder because a figure
 * for a paper always needs one more tweak, and redrawing it should not need
 * dcr. */
#include "reports/report.h"

#include "reports/gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "dcr/spawn.h"
#include "dcr/trace.h"
#include "reports/results_read.h"
#include "reports/trace_io.h"
#include "reports/trend.h"

#define MB 1e6

/* One configuration of the results file with its refits pooled. */
typedef struct rgroup {
    const json_t *config;
    const char *first_run;
    const char *machine, *command; /* of the first run: groups differ in them too */
    size_t nruns;
    char label[256], change[64], fig10_series[256], payload_series[256], mode_series[256];
    char *fig10_key, *payload_key; /* config keys less what the figure's axis varies */
    double checkpoint_bytes, reference_s, rate;
    bool rate_measured; /* adamw: the rate is raw changed bytes / checkpoint bytes */
    dcr_results_stats_t lat, payload, raw, cross, changed, exact, cons, trans, fin;
} rgroup_t;

typedef struct report {
    const dcr_report_opts_t *o;
    const char *dir; /* the staging folder every file is written to (dcr/outpath.h) */
    char gnuplot[4096];
    dcr_results_set_t *set;
    rgroup_t *g;
    size_t ng;
    bool have_timeline, have_fig10, have_payload_fig;
    bool gnuplot_failed;    /* the failure is gnuplot's: its log is kept for the user */
    dcr_trend_t *trend;     /* two or more runs: the trend figure */
    dcr_compare_t *compare; /* with a BASE file: the base-against-new figure */
    size_t compare_rows;
    uint32_t timeline_refit;
    dcr_bounds_t timeline_bounds;
} report_t;

/* ---- gnuplot ---- */

dcr_status_t dcr_report_find_gnuplot(const char *explicit_path, char *buf, size_t len)
{
    const char *name = explicit_path ? explicit_path : getenv("DCR_GNUPLOT");
    if (!name || !*name) name = "gnuplot";
    /* The one checked program lookup (dcr/spawn.h); our own lines keep
     * telling the user what to install. */
    if (dcr_spawn_resolve("gnuplot", name, buf, len) == DCR_OK) return DCR_OK;
    if (strchr(name, '/'))
        return dcr_error_set(DCR_EUNSUPPORTED, "gnuplot not found at %s (install gnuplot-nox)",
                             name);
    return dcr_error_set(DCR_EUNSUPPORTED,
                         "%s not found on PATH: dcr report needs gnuplot (apt-get install "
                         "gnuplot-nox, or scripts/install-deps.sh)",
                         name);
}

/* Runs gnuplot on a script inside the output folder, its output appended to gnuplot.log. */
static dcr_status_t run_gnuplot(report_t *r, const char *script)
{
    dcr_status_t st = dcr_gnuplot_run(r->gnuplot, r->dir, script);
    r->gnuplot_failed = st != DCR_OK;
    return st;
}

static FILE *open_out(const report_t *r, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", r->dir, name);
    FILE *f = fopen(path, "w");
    if (!f) dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    return f;
}

static dcr_status_t close_out(const report_t *r, FILE *f, const char *name)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad)
        return dcr_error_set(DCR_EIO, "report %s/%s: write failed: %s", r->o->out_dir, name,
                             strerror(errno));
    return DCR_OK;
}

/* A label as a gnuplot single-quoted string body (quote doubled). */
static void gp_quote(FILE *f, const char *s)
{
    dcr_gnuplot_quote(f, s);
}

/* The driver script: PNG and SVG of NAME.body.gp (reports/gnuplot.h). */
static dcr_status_t write_driver(const report_t *r, const char *name, int width, int height)
{
    return dcr_gnuplot_write_driver(r->dir, name, width, height);
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                      "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

/* One colour per stage of the timeline: the series palette has fewer
 * colours than there are stages, and compare and fetch (stages 0 and 15)
 * came out alike when it wrapped. */
static const char *const stage_colors[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#ff9896"};
_Static_assert(sizeof(stage_colors) / sizeof(stage_colors[0]) >= DCR_STAGE_COUNT,
               "a colour for every stage");

/* ---- grouping ---- */

static const char *const size_keys[] = {"model", "scale", "layers"};
static const char *const change_keys[] = {"changes", "change_rate", "lr"};
/* Keys that cannot change payload bytes: how the bytes travel and when. */
static const char *const travel_keys[] = {"transport",  "fanout",     "cross_gbps", "flow_gbps",
                                          "local_gbps", "latency_ms", "rl",         "warmup"};

#define NKEYS(a) (sizeof(a) / sizeof(a[0]))

/* A figure's series key: the group's configuration less the keys the
 * figure's axis varies, with its command and machine, so that runs of two
 * machines never share a line. */
static char *key_without(const rgroup_t *g, const char *const *drop1, size_t n1,
                         const char *const *drop2, size_t n2)
{
    json_t *copy = json_deep_copy(g->config);
    if (!copy) return NULL;
    for (size_t i = 0; i < n1; i++) json_object_del(copy, drop1[i]);
    for (size_t i = 0; i < n2; i++) json_object_del(copy, drop2[i]);
    size_t len = strlen(g->command) + strlen(g->machine) + 2;
    char *prefix = malloc(len);
    char *key = NULL;
    if (prefix) {
        snprintf(prefix, len, "%s\t%s", g->command, g->machine);
        key = dcr_results_config_key(prefix, copy);
    }
    free(prefix);
    json_decref(copy);
    return key;
}

static bool in_list(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

/* Appends ", key=value" for every configuration key outside skip whose value
 * differs between groups, so that legends tell series apart without listing
 * the keys every run shares. */
static void append_varying(const report_t *r, const rgroup_t *g, char *buf, size_t len,
                           const char *const *skip1, size_t n1, const char *const *skip2, size_t n2)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)g->config, k, v)
    {
        if (in_list(k, skip1, n1) || in_list(k, skip2, n2) || !strcmp(k, "refits")) continue;
        bool varies = false;
        for (size_t i = 0; i < r->ng && !varies; i++)
            varies = !json_equal(v, json_object_get(r->g[i].config, k));
        if (!varies) continue;
        /* Strings bare (mode=F), everything else as JSON (fanout=4, serve_ep=true). */
        char *text = json_is_string(v) ? strdup(json_string_value(v))
                                       : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        size_t used = strlen(buf);
        if (text) snprintf(buf + used, len - used, ", %s=%s", k, text);
        free(text);
    }
}

static void series_labels(const report_t *r, rgroup_t *g)
{
    static const char *const fig10_named[] = {"transport", "changes", "change_rate", "lr"};
    snprintf(g->fig10_series, sizeof(g->fig10_series), "%s, %s",
             json_string_value(json_object_get(g->config, "transport"))
                 ? json_string_value(json_object_get(g->config, "transport"))
                 : "?",
             g->change);
    append_varying(r, g, g->fig10_series, sizeof(g->fig10_series), size_keys, NKEYS(size_keys),
                   fig10_named, NKEYS(fig10_named));
    json_t *model = json_object_get(g->config, "model");
    snprintf(g->payload_series, sizeof(g->payload_series), "%s, %.3g MB",
             json_string_value(model) ? json_string_value(model) : "?", g->checkpoint_bytes / MB);
    /* Model and size are in the label already; scale and layers would repeat them. */
    static const char *const payload_named[] = {
        "model",  "scale",      "layers",    "changes",    "change_rate", "lr", "transport",
        "fanout", "cross_gbps", "flow_gbps", "local_gbps", "latency_ms",  "rl", "warmup"};
    append_varying(r, g, g->payload_series, sizeof(g->payload_series), payload_named,
                   NKEYS(payload_named), NULL, 0);
    /* The mode table's rows: the same without the mode, which is its columns. */
    static const char *const mode_named[] = {"mode"};
    snprintf(g->mode_series, sizeof(g->mode_series), "%s, %.3g MB",
             json_string_value(model) ? json_string_value(model) : "?", g->checkpoint_bytes / MB);
    append_varying(r, g, g->mode_series, sizeof(g->mode_series), payload_named,
                   NKEYS(payload_named), mode_named, 1);
}

/* Whether the groups come from more than one machine (or command). */
static bool origin_varies(const report_t *r, bool machine)
{
    for (size_t i = 1; i < r->ng; i++) {
        const char *a = machine ? r->g[i].machine : r->g[i].command;
        const char *b = machine ? r->g[0].machine : r->g[0].command;
        if (strcmp(a, b)) return true;
    }
    return false;
}

static void append_escaped(char *buf, size_t len, const char *fmt, const char *value)
{
    char raw[256];
    snprintf(raw, sizeof(raw), fmt, value);
    size_t used = strlen(buf);
    if (used + 1 < len) dcr_escape(buf + used, len - used, raw);
}

/* Runs that differ only in machine or command are groups of their own
 * (dcr_results_match_key); their labels must say so, or two lines of a
 * figure would carry one name. */
static void label_origin(const report_t *r, rgroup_t *g)
{
    bool machines = origin_varies(r, true), commands = origin_varies(r, false);
    char *labels[] = {g->label, g->fig10_series, g->payload_series, g->mode_series};
    size_t lens[] = {sizeof(g->label), sizeof(g->fig10_series), sizeof(g->payload_series),
                     sizeof(g->mode_series)};
    for (int k = 0; k < 4; k++) {
        if (machines) append_escaped(labels[k], lens[k], " on %s", g->machine);
        if (commands) append_escaped(labels[k], lens[k], " [%s]", g->command);
    }
}

static dcr_status_t pooled_stats(const report_t *r, const dcr_results_group_t *rg,
                                 const char *column, dcr_results_stats_t *out)
{
    double *v = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_results_group_pool(r->set, rg, column, &v, &n));
    *out = dcr_results_stats(v, n);
    free(v);
    return DCR_OK;
}

/* Mean of a summary number over the group's runs (NAN when none has it). */
static double summary_mean(const report_t *r, const dcr_results_group_t *rg, const char *key)
{
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < rg->nruns; i++) {
        double v = dcr_results_summary_number(&r->set->runs[rg->run_index[i]], key);
        if (isnan(v)) continue;
        sum += v;
        n++;
    }
    return n ? sum / n : NAN;
}

static dcr_status_t fill_group(report_t *r, const dcr_results_group_t *rg, rgroup_t *g)
{
    const dcr_results_stored_run_t *first = &r->set->runs[rg->run_index[0]];
    g->config = first->config;
    g->first_run = first->name;
    g->machine = first->machine;
    g->command = first->command;
    g->nruns = rg->nruns;
    dcr_results_config_label(g->config, g->label, sizeof(g->label));
    dcr_results_change_label(g->config, g->change, sizeof(g->change));
    struct {
        const char *col;
        dcr_results_stats_t *dst;
    } cols[] = {{"latency_s", &g->lat},
                {"payload_bytes", &g->payload},
                {"raw_changed_value_bytes", &g->raw},
                {"cross_bytes", &g->cross},
                {"changed_elements", &g->changed},
                {"bit_exact", &g->exact},
                {"construction_lb_s", &g->cons},
                {"transport_lb_s", &g->trans},
                {"finalization_s", &g->fin}};
    for (size_t i = 0; i < NKEYS(cols); i++)
        DCR_CHECK(pooled_stats(r, rg, cols[i].col, cols[i].dst));
    g->checkpoint_bytes = summary_mean(r, rg, "checkpoint_bytes");
    g->reference_s = summary_mean(r, rg, "reference_s");
    const char *changes = json_string_value(json_object_get(g->config, "changes"));
    g->rate_measured = changes && !strcmp(changes, "adamw");
    json_t *rate = json_object_get(g->config, "change_rate");
    g->rate = g->rate_measured ? g->raw.mean / g->checkpoint_bytes
                               : (json_is_number(rate) ? json_number_value(rate) : NAN);
    g->fig10_key = key_without(g, size_keys, NKEYS(size_keys), NULL, 0);
    g->payload_key =
        key_without(g, change_keys, NKEYS(change_keys), travel_keys, NKEYS(travel_keys));
    if (!g->fig10_key || !g->payload_key) return dcr_error_set(DCR_ENOMEM, "grouping runs");
    return DCR_OK;
}

static dcr_status_t build_groups(report_t *r)
{
    dcr_results_group_t *groups = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_results_group_runs(r->set, &groups, &n));
    r->g = calloc(n ? n : 1, sizeof(*r->g));
    dcr_status_t st = r->g ? DCR_OK : dcr_error_set(DCR_ENOMEM, "grouping runs");
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        st = fill_group(r, &groups[i], &r->g[i]);
        r->ng++;
    }
    dcr_results_groups_free(groups, n);
    DCR_CHECK(st);
    for (size_t i = 0; i < r->ng; i++) series_labels(r, &r->g[i]);
    for (size_t i = 0; i < r->ng; i++) label_origin(r, &r->g[i]);
    return DCR_OK;
}

/* ---- series: groups sharing a key, sorted along the figure's x axis ---- */

typedef struct series {
    const char *key, *label;
    size_t n;
    size_t *idx; /* its groups, in the set's pool */
} series_t;

/* Every group in exactly one series (so at most r->ng series, and a series
 * holds at most r->ng groups: nothing is left out, however many runs). */
typedef struct series_set {
    series_t *s;
    size_t ns;
    size_t *pool, *of; /* pool: the series' group indices; of: each group's series */
} series_set_t;

static void series_free(series_set_t *set)
{
    free(set->s);
    free(set->pool);
    free(set->of);
}

static dcr_status_t build_series(const report_t *r, bool payload, series_set_t *set)
{
    size_t ng = r->ng ? r->ng : 1;
    *set = (series_set_t){calloc(ng, sizeof(series_t)), 0, calloc(ng, sizeof(size_t)),
                          calloc(ng, sizeof(size_t))};
    if (!set->s || !set->pool || !set->of) {
        series_free(set);
        return dcr_error_set(DCR_ENOMEM, "figure data for %zu groups", r->ng);
    }
    series_t *s = set->s;
    size_t ns = 0;
    for (size_t i = 0; i < r->ng; i++) {
        const rgroup_t *g = &r->g[i];
        const char *key = payload ? g->payload_key : g->fig10_key;
        size_t k = 0;
        while (k < ns && strcmp(s[k].key, key)) k++;
        if (k == ns) {
            s[ns].key = key;
            s[ns++].label = payload ? g->payload_series : g->fig10_series;
        }
        s[k].n++;
        set->of[i] = k;
    }
    size_t at = 0;
    for (size_t k = 0; k < ns; k++) {
        s[k].idx = set->pool + at;
        at += s[k].n;
        s[k].n = 0;
    }
    for (size_t i = 0; i < r->ng; i++) s[set->of[i]].idx[s[set->of[i]].n++] = i;
    /* Insertion sort along x: checkpoint size, or change rate. */
    for (size_t k = 0; k < ns; k++)
        for (size_t a = 1; a < s[k].n; a++)
            for (size_t b = a; b > 0; b--) {
                const rgroup_t *x = &r->g[s[k].idx[b - 1]], *y = &r->g[s[k].idx[b]];
                double xa = payload ? x->rate : x->checkpoint_bytes;
                double ya = payload ? y->rate : y->checkpoint_bytes;
                if (!(xa > ya)) break;
                size_t t = s[k].idx[b];
                s[k].idx[b] = s[k].idx[b - 1];
                s[k].idx[b - 1] = t;
            }
    set->ns = ns;
    return DCR_OK;
}

/* ---- Figure 10 layout ---- */

static dcr_status_t write_fig10_data(const report_t *r, const series_t *s, size_t ns)
{
    FILE *f = open_out(r, "data/fig10_latency.dat");
    if (!f) return DCR_EIO;
    for (size_t k = 0; k < ns; k++) {
        fprintf(f,
                "# series %zu: %s\n# checkpoint_MB latency_median_s latency_min_s "
                "latency_max_s reference_s speedup\n",
                k, s[k].label);
        for (size_t i = 0; i < s[k].n; i++) {
            const rgroup_t *g = &r->g[s[k].idx[i]];
            fprintf(f, "%.9g %.9g %.9g %.9g %.9g %.9g\n", g->checkpoint_bytes / MB, g->lat.median,
                    g->lat.min, g->lat.max, g->reference_s,
                    g->lat.median > 0 ? g->reference_s / g->lat.median : NAN);
        }
        fprintf(f, "\n\n");
    }
    return close_out(r, f, "data/fig10_latency.dat");
}

static dcr_status_t write_fig10(report_t *r)
{
    series_set_t set;
    DCR_CHECK(build_series(r, false, &set));
    const series_t *s = set.s;
    size_t ns = set.ns;
    dcr_status_t st = write_fig10_data(r, s, ns);
    FILE *f = st == DCR_OK ? open_out(r, "fig10_latency.body.gp") : NULL;
    if (st == DCR_OK && !f) st = DCR_EIO;
    if (st == DCR_OK) {
        fprintf(f,
                "reset\nset multiplot layout 1,2 title 'Refit latency and speedup vs checkpoint "
                "size (median over refits, bars min to max)'\n"
                "set logscale x\nset grid\nset xlabel 'checkpoint size (MB)'\n"
                "set key top left box opaque\nset offsets graph 0.05, graph 0.05, 0, 0\n"
                "set logscale y\nset ylabel 'refit latency (s)'\nset title '(a) latency'\nplot ");
        for (size_t k = 0; k < ns; k++) {
            const char *c = palette[k % NPALETTE];
            fprintf(f,
                    "'data/fig10_latency.dat' index %zu using 1:2:3:4 with yerrorlines lw 2 pt 7 "
                    "lc rgb '%s' title ",
                    k, c);
            gp_quote(f, s[k].label);
            fprintf(f,
                    ", '' index %zu using 1:5 with linespoints dt 2 lw 1.5 pt 6 lc rgb '%s' "
                    "notitle, \\\n  ",
                    k, c);
        }
        fprintf(f, "NaN with linespoints dt 2 lw 1.5 pt 6 lc rgb 'black' title 'full-checkpoint "
                   "reference (dashed, open circles)'\n"
                   "unset logscale y\nset yrange [0:*]\nset ylabel 'speedup vs full-checkpoint "
                   "reference (x)'\nset title '(b) speedup'\nplot ");
        for (size_t k = 0; k < ns; k++) {
            fprintf(f,
                    "%s'data/fig10_latency.dat' index %zu using 1:6 with linespoints lw 2 pt 7 "
                    "lc rgb '%s' title ",
                    k ? ", \\\n  " : "", k, palette[k % NPALETTE]);
            gp_quote(f, s[k].label);
        }
        fprintf(f, "\nunset multiplot\n");
        st = close_out(r, f, "fig10_latency.body.gp");
    }
    series_free(&set);
    DCR_CHECK(st);
    DCR_CHECK(write_driver(r, "fig10_latency", 1400, 600));
    return run_gnuplot(r, "fig10_latency.gp");
}

/* ---- payload bytes vs change rate ---- */

static dcr_status_t write_payload_data(const report_t *r, const series_t *s, size_t ns)
{
    FILE *f = open_out(r, "data/payload_vs_rate.dat");
    if (!f) return DCR_EIO;
    for (size_t k = 0; k < ns; k++) {
        fprintf(f,
                "# series %zu: %s\n# change_rate_pct payload_median_MB payload_min_MB "
                "payload_max_MB raw_changed_values_MB\n",
                k, s[k].label);
        for (size_t i = 0; i < s[k].n; i++) {
            const rgroup_t *g = &r->g[s[k].idx[i]];
            fprintf(f, "%.9g %.9g %.9g %.9g %.9g\n", 100 * g->rate, g->payload.median / MB,
                    g->payload.min / MB, g->payload.max / MB, g->raw.median / MB);
        }
        fprintf(f, "\n\n");
    }
    return close_out(r, f, "data/payload_vs_rate.dat");
}

static dcr_status_t write_payload_fig(report_t *r)
{
    series_set_t set;
    DCR_CHECK(build_series(r, true, &set));
    const series_t *s = set.s;
    size_t ns = set.ns;
    dcr_status_t st = write_payload_data(r, s, ns);
    FILE *f = st == DCR_OK ? open_out(r, "payload_vs_rate.body.gp") : NULL;
    if (st == DCR_OK && !f) st = DCR_EIO;
    if (st == DCR_OK) {
        fprintf(f, "reset\nset title 'Payload bytes per refit vs change rate (median over "
                   "refits, bars min to max)'\n"
                   "set logscale xy\nset grid\nset xlabel 'change rate (%% of elements; adamw: "
                   "measured, %% of bytes)'\n"
                   "set ylabel 'bytes per refit (MB)'\nset key top left box opaque\n"
                   "set offsets graph 0.1, graph 0.1, 0, 0\nplot ");
        for (size_t k = 0; k < ns; k++) {
            const char *c = palette[k % NPALETTE];
            fprintf(f,
                    "%s'data/payload_vs_rate.dat' index %zu using 1:2:3:4 with yerrorlines "
                    "lw 2 pt 7 lc rgb '%s' title ",
                    k ? ", \\\n  " : "", k, c);
            gp_quote(f, s[k].label);
            fprintf(f,
                    ", '' index %zu using 1:5 with linespoints dt 2 lw 1.5 pt 6 lc rgb '%s' "
                    "notitle",
                    k, c);
        }
        fprintf(f, ", \\\n  NaN with lines dt 2 lw 1.5 lc rgb 'black' title 'raw changed values "
                   "(dashed)'\n");
        st = close_out(r, f, "payload_vs_rate.body.gp");
    }
    series_free(&set);
    DCR_CHECK(st);
    DCR_CHECK(write_driver(r, "payload_vs_rate", 1000, 650));
    return run_gnuplot(r, "payload_vs_rate.gp");
}

/* ---- Figure 11 layout: a timeline of one refit ---- */

typedef struct row {
    uint16_t actor;
    int32_t id;
} row_t;

static int cmp_row(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    if (x->actor != y->actor) return x->actor < y->actor ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool in_window(const dcr_trace_interval_t *v, uint64_t t0, uint64_t t1)
{
    return v->stage != DCR_STAGE_REFIT && v->end_ns > t0 && v->start_ns < t1;
}

/* The refit to draw: the one asked for, else the one of median latency.
 * Sorts iv by start (dcr_bounds_compute_all: one sort, not refits x n). */
static dcr_status_t pick_refit(report_t *r, dcr_trace_interval_t *iv, size_t n)
{
    uint32_t *refits = NULL;
    size_t nr = 0;
    DCR_CHECK(dcr_bounds_refits(iv, n, &refits, &nr));
    if (!nr)
        return dcr_error_set(DCR_ENOTFOUND, "%s: no refit window in the trace", r->o->trace_path);
    dcr_bounds_t *b = calloc(nr, sizeof(*b));
    dcr_status_t st =
        b ? dcr_bounds_compute_all(iv, n, refits, nr, b) : dcr_error_set(DCR_ENOMEM, "bounds");
    size_t pick = nr;
    if (st == DCR_OK && r->o->refit >= 0) {
        for (size_t i = 0; i < nr; i++)
            if (refits[i] == (uint32_t)r->o->refit) pick = i;
        if (pick == nr)
            st = dcr_error_set(DCR_ENOTFOUND,
                               "%s: no refit %ld in the trace (it has refits %u to %u)",
                               r->o->trace_path, r->o->refit, refits[0], refits[nr - 1]);
    } else if (st == DCR_OK) {
        /* The (lower) median: the refit with (nr - 1) / 2 refits before it in
         * latency order, ties broken by position so that exactly one qualifies. */
        for (size_t i = 0; i < nr && pick == nr; i++) {
            size_t below = 0;
            for (size_t j = 0; j < nr; j++)
                below +=
                    b[j].latency_s < b[i].latency_s || (b[j].latency_s == b[i].latency_s && j < i);
            if (below == (nr - 1) / 2) pick = i;
        }
    }
    if (st == DCR_OK) {
        r->timeline_refit = refits[pick];
        r->timeline_bounds = b[pick];
    }
    free(b);
    free(refits);
    return st;
}

static void window_of(const dcr_trace_interval_t *iv, size_t n, uint32_t refit, uint64_t *t0,
                      uint64_t *t1)
{
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == DCR_STAGE_REFIT && iv[i].refit == refit) {
            *t0 = iv[i].start_ns;
            *t1 = iv[i].end_ns;
        }
}

typedef struct timeline {
    uint64_t t0, t1;
    double scale; /* seconds to the axis unit */
    const char *unit;
    row_t *rows;
    size_t nrows;
    bool stage_present[DCR_STAGE_COUNT];
    double last_apply_end;
} timeline_t;

static int row_of(const timeline_t *t, const dcr_trace_interval_t *v)
{
    row_t key = {v->actor, v->id};
    row_t *hit = bsearch(&key, t->rows, t->nrows, sizeof(row_t), cmp_row);
    return hit ? (int)(hit - t->rows) : -1;
}

static dcr_status_t timeline_rows(timeline_t *t, const dcr_trace_interval_t *iv, size_t n)
{
    t->rows = calloc(n ? n : 1, sizeof(row_t));
    if (!t->rows) return dcr_error_set(DCR_ENOMEM, "timeline rows");
    for (size_t i = 0; i < n; i++) {
        if (!in_window(&iv[i], t->t0, t->t1)) continue;
        row_t key = {iv[i].actor, iv[i].id};
        size_t j = 0;
        while (j < t->nrows && cmp_row(&t->rows[j], &key)) j++;
        if (j == t->nrows) t->rows[t->nrows++] = key;
        t->stage_present[iv[i].stage] = true;
        if (iv[i].stage == DCR_STAGE_APPLY) {
            double end = (double)((iv[i].end_ns < t->t1 ? iv[i].end_ns : t->t1) - t->t0) / 1e9;
            if (end > t->last_apply_end) t->last_apply_end = end;
        }
    }
    qsort(t->rows, t->nrows, sizeof(row_t), cmp_row);
    return DCR_OK;
}

static dcr_status_t write_timeline_data(const report_t *r, const timeline_t *t,
                                        const dcr_trace_interval_t *iv, size_t n)
{
    FILE *f = open_out(r, "data/timeline.dat");
    if (!f) return DCR_EIO;
    for (int s = 0; s < DCR_STAGE_COUNT; s++) {
        if (!t->stage_present[s]) continue;
        fprintf(f, "# stage %s: row start_%s end_%s (clipped to the window)\n",
                dcr_stage_name((dcr_stage_t)s), t->unit, t->unit);
        for (size_t i = 0; i < n; i++) {
            if (iv[i].stage != s || !in_window(&iv[i], t->t0, t->t1)) continue;
            uint64_t a = iv[i].start_ns > t->t0 ? iv[i].start_ns : t->t0;
            uint64_t b = iv[i].end_ns < t->t1 ? iv[i].end_ns : t->t1;
            fprintf(f, "%d %.9g %.9g\n", row_of(t, &iv[i]), (double)(a - t->t0) / 1e9 * t->scale,
                    (double)(b - t->t0) / 1e9 * t->scale);
        }
        fprintf(f, "\n\n");
    }
    return close_out(r, f, "data/timeline.dat");
}

static void timeline_ytics(const report_t *r, const timeline_t *t, FILE *f)
{
    fprintf(f, "set ytics (");
    for (size_t i = 0; i < t->nrows; i++) {
        char label[96];
        const char *mark = "";
        if (t->rows[i].actor == DCR_ACTOR_OWNER &&
            t->rows[i].id == r->timeline_bounds.busiest_owner)
            mark = " (construction bound)";
        if (t->rows[i].actor == DCR_ACTOR_ENDPOINT &&
            t->rows[i].id == r->timeline_bounds.busiest_endpoint)
            mark = " (transport bound)";
        snprintf(label, sizeof(label), "%s %d%s", dcr_actor_name((dcr_actor_t)t->rows[i].actor),
                 (int)t->rows[i].id, mark);
        fprintf(f, "%s", i ? ", " : "");
        gp_quote(f, label);
        fprintf(f, " %zu", i);
    }
    fprintf(f, ")\n");
}

/* A vertical marker drawn as a two-point line, so that it gets a legend entry with its value. */
static void timeline_marker(FILE *f, const timeline_t *t, double x_s, const char *what,
                            const char *color, const char *dash)
{
    char title[160];
    snprintf(title, sizeof(title), "%s %.4g %s", what, x_s * t->scale, t->unit);
    fprintf(f,
            ", \\\n  '+' using (%.9g):($0 == 0 ? -0.5 : %zu - 0.5) every ::0::1 with lines "
            "lw 2.5 dt %s lc rgb '%s' title ",
            x_s * t->scale, t->nrows, dash, color);
    gp_quote(f, title);
}

static dcr_status_t write_timeline_script(const report_t *r, const timeline_t *t)
{
    FILE *f = open_out(r, "timeline.body.gp");
    if (!f) return DCR_EIO;
    const dcr_bounds_t *b = &r->timeline_bounds;
    fprintf(f,
            "reset\nset title 'Refit %u: stage intervals per owner, endpoint, node and "
            "receiver (latency %.4g s)'\n",
            r->timeline_refit, b->latency_s);
    fprintf(f,
            "set xlabel 'time since t0, the first owner starting construction (%s)'\n"
            "set xrange [0:%.9g]\nset yrange [%zu - 0.5:-0.5]\nset grid x\n"
            "set key outside right top box\nset samples 2\nset style fill solid 1.0 noborder\n",
            t->unit, (double)(t->t1 - t->t0) / 1e9 * t->scale, t->nrows);
    if (t->nrows)
        timeline_ytics(r, t, f);
    else
        fprintf(f, "set yrange [0.5:-0.5]\nset ytics ('no stage intervals in this window' 0)\n");
    fprintf(f, "plot ");
    int k = 0;
    for (int s = 0; s < DCR_STAGE_COUNT; s++) {
        if (!t->stage_present[s]) continue;
        fprintf(f,
                "%s'data/timeline.dat' index %d using (($2+$3)/2):1:(($3-$2)/2):(0.38) with "
                "boxxyerror lc rgb '%s' title '%s'",
                k ? ", \\\n  " : "", k, stage_colors[s], dcr_stage_name((dcr_stage_t)s));
        k++;
    }
    if (!k) fprintf(f, "NaN notitle");
    timeline_marker(f, t, b->construction_lb_s, "construction bound (from t0)", "#000000", "2");
    timeline_marker(f, t, b->transport_lb_s, "transport bound (from t0)", "#555555", "4");
    if (t->last_apply_end > 0)
        timeline_marker(f, t, t->last_apply_end, "finalization starts, last apply ends at",
                        "#b00000", "3");
    fprintf(f, "\n");
    return close_out(r, f, "timeline.body.gp");
}

static dcr_status_t write_timeline(report_t *r)
{
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    /* The same timeline from an Nsight Systems export, for traces taken on a GPU cluster. */
    if (dcr_trace_file_is_sqlite(r->o->trace_path))
        DCR_CHECK(dcr_trace_read_nsys(r->o->trace_path, &iv, &n));
    else
        DCR_CHECK(dcr_trace_read_chrome(r->o->trace_path, &iv, &n));
    timeline_t t = {0};
    dcr_status_t st = pick_refit(r, iv, n);
    if (st == DCR_OK) {
        window_of(iv, n, r->timeline_refit, &t.t0, &t.t1);
        bool seconds = (double)(t.t1 - t.t0) / 1e9 >= 2;
        t.scale = seconds ? 1 : 1e3;
        t.unit = seconds ? "s" : "ms";
        st = timeline_rows(&t, iv, n);
    }
    if (st == DCR_OK) st = write_timeline_data(r, &t, iv, n);
    if (st == DCR_OK) st = write_timeline_script(r, &t);
    int height = 160 + 22 * (int)t.nrows;
    free(t.rows);
    free(iv);
    DCR_CHECK(st);
    DCR_CHECK(write_driver(r, "timeline", 1500, height < 450 ? 450 : height));
    DCR_CHECK(run_gnuplot(r, "timeline.gp"));
    r->have_timeline = true;
    return DCR_OK;
}

/* ---- report.md ---- */

static void md_range(FILE *f, const dcr_results_stats_t *s, double unit, const char *fmt)
{
    char a[32], b[32], c[32];
    snprintf(a, sizeof(a), fmt, s->median / unit);
    snprintf(b, sizeof(b), fmt, s->min / unit);
    snprintf(c, sizeof(c), fmt, s->max / unit);
    fprintf(f, " %s [%s, %s] |", a, b, c);
}

static void md_header(const report_t *r, FILE *f)
{
    const dcr_results_set_t *set = r->set;
    fprintf(f,
            "# dcr report\n\nResults: `%s`, %zu run%s in %zu configuration%s. Sizes in MB "
            "(1 MB = 10^6 bytes); figures are medians over the timed refits of all runs "
            "with the same configuration, with [min, max].\n\n",
            set->path, set->nruns, set->nruns == 1 ? "" : "s", r->ng, r->ng == 1 ? "" : "s");
    fprintf(f, "| run | time (UTC) | git revision | machine | refits | configuration |\n"
               "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < set->nruns; i++) {
        const dcr_results_stored_run_t *run = &set->runs[i];
        char label[256];
        dcr_results_config_label(run->config, label, sizeof(label));
        fprintf(f, "| %s | %s | %s | %s | %zu | %s |\n", run->name, run->time, run->git_revision,
                run->machine, run->nrefits, label);
    }
    fprintf(f, "\n");
}

static void md_latency(const report_t *r, FILE *f)
{
    fprintf(f,
            "## Refit latency and speedup vs checkpoint size (Figure 10 layout)\n\n"
            "%s"
            "Speedup = full-checkpoint reference / median "
            "latency; the reference is the transport-only full-checkpoint transfer over the "
            "same emulated links.\n\n"
            "| configuration | checkpoint (MB) | runs | refits | latency (s) | reference (s) | "
            "speedup | bit-exact refits |\n|---|---|---|---|---|---|---|---|\n",
            r->have_fig10 ? "![refit latency and speedup vs checkpoint size](fig10_latency.png)\n\n"
                            "([SVG](fig10_latency.svg)) "
                          : "(No figure: no run has a checkpoint size and a latency above 0.) ");
    for (size_t i = 0; i < r->ng; i++) {
        const rgroup_t *g = &r->g[i];
        fprintf(f, "| %s | %.4g | %zu | %zu |", g->label, g->checkpoint_bytes / MB, g->nruns,
                g->lat.n);
        md_range(f, &g->lat, 1, "%.4g");
        fprintf(f, " %.4g | %.3gx | %.0f of %zu |\n", g->reference_s,
                g->lat.median > 0 ? g->reference_s / g->lat.median : NAN,
                g->exact.mean * g->exact.n, g->exact.n);
    }
    fprintf(f, "\n");
}

static void md_payload(const report_t *r, FILE *f)
{
    fprintf(f,
            "## Payload bytes vs change rate\n\n"
            "%s"
            "Change rate: the configured fraction of elements for uniform changes; for AdamW "
            "changes (marked *) the measured raw changed value bytes / checkpoint bytes.\n\n"
            "### Payload bytes per refit (Table 3 analog)\n\n"
            "| configuration | checkpoint (MB) | change rate | changed elements | raw changed "
            "values (MB) | payload (MB) | cross-cluster (MB) | payload / raw | payload / "
            "checkpoint |\n|---|---|---|---|---|---|---|---|---|\n",
            r->have_payload_fig ? "![payload bytes vs change "
                                  "rate](payload_vs_rate.png)\n\n([SVG](payload_vs_rate.svg)) "
                                : "(No figure: no run has a change rate and a payload above 0.) ");
    for (size_t i = 0; i < r->ng; i++) {
        const rgroup_t *g = &r->g[i];
        fprintf(f, "| %s | %.4g | %.3g%%%s | %.0f |", g->label, g->checkpoint_bytes / MB,
                100 * g->rate, g->rate_measured ? "*" : "", g->changed.median);
        md_range(f, &g->raw, MB, "%.4g");
        md_range(f, &g->payload, MB, "%.4g");
        md_range(f, &g->cross, MB, "%.4g");
        fprintf(f, " %.3f | %.4f |\n", g->raw.median > 0 ? g->payload.median / g->raw.median : NAN,
                g->checkpoint_bytes > 0 ? g->payload.median / g->checkpoint_bytes : NAN);
    }
    fprintf(f, "\n");
}

/* Table 2 analog: payload bytes of the same workload under each mode, side by side. */
static void md_modes(const report_t *r, FILE *f)
{
    static const char *const mode_key[] = {"mode"};
    const char *modes[8];
    size_t nm = 0;
    for (size_t i = 0; i < r->ng; i++) {
        const char *m = json_string_value(json_object_get(r->g[i].config, "mode"));
        if (!m || in_list(m, modes, nm) || nm == NKEYS(modes)) continue;
        modes[nm++] = m;
    }
    fprintf(f, "### Payload bytes by mode (Table 2 analog)\n\nPayload MB per refit (median) and "
               "payload / raw changed values, for each mode measured on the same workload.\n\n"
               "| workload | change |");
    for (size_t m = 0; m < nm; m++) fprintf(f, " mode %s |", modes[m]);
    fprintf(f, "\n|---|---|");
    for (size_t m = 0; m < nm; m++) fprintf(f, "---|");
    fprintf(f, "\n");
    char **keys = calloc(r->ng + 1, sizeof(char *));
    for (size_t i = 0; keys && i < r->ng; i++)
        keys[i] = key_without(&r->g[i], mode_key, 1, travel_keys, NKEYS(travel_keys));
    for (size_t i = 0; keys && i < r->ng; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = keys[i] && keys[j] && !strcmp(keys[i], keys[j]);
        if (seen || !keys[i]) continue;
        fprintf(f, "| %s | %s |", r->g[i].mode_series, r->g[i].change);
        for (size_t m = 0; m < nm; m++) {
            const rgroup_t *cell = NULL;
            for (size_t j = i; j < r->ng && !cell; j++) {
                const char *mj = json_string_value(json_object_get(r->g[j].config, "mode"));
                if (keys[j] && !strcmp(keys[i], keys[j]) && mj && !strcmp(mj, modes[m]))
                    cell = &r->g[j];
            }
            if (cell)
                fprintf(f, " %.4g (%.3f) |", cell->payload.median / MB,
                        cell->raw.median > 0 ? cell->payload.median / cell->raw.median : NAN);
            else
                fprintf(f, " - |");
        }
        fprintf(f, "\n");
    }
    for (size_t i = 0; keys && i < r->ng; i++) free(keys[i]);
    free(keys);
    fprintf(f, "\n");
}

static void md_bounds(const report_t *r, FILE *f)
{
    fprintf(f,
            "## Lower bounds and finalization\n\nPer refit from the recorder: the construction "
            "bound (longest union of one owner's compute intervals), the transport bound "
            "(longest union of one endpoint's transport intervals: its sends and, on the object "
            "store, the rollout nodes' downloads of its payloads), finalization (last apply to "
            "t1). The last column is mean latency / (max(mean bounds) + mean finalization).\n\n"
            "| configuration | latency (s) | construction bound (s) | transport bound (s) | "
            "finalization (s) | latency / (bound + finalization) |\n|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < r->ng; i++) {
        const rgroup_t *g = &r->g[i];
        double bound = g->cons.mean > g->trans.mean ? g->cons.mean : g->trans.mean;
        fprintf(f, "| %s |", g->label);
        md_range(f, &g->lat, 1, "%.4g");
        md_range(f, &g->cons, 1, "%.4g");
        md_range(f, &g->trans, 1, "%.4g");
        md_range(f, &g->fin, 1, "%.4g");
        fprintf(f, " %.3f |\n",
                bound + g->fin.mean > 0 ? g->lat.mean / (bound + g->fin.mean) : NAN);
    }
    fprintf(f, "\n");
}

static void md_timeline(const report_t *r, FILE *f)
{
    const dcr_bounds_t *b = &r->timeline_bounds;
    fprintf(f,
            "## Timeline of refit %u (Figure 11 layout)\n\nFrom `%s`%s. "
            "![timeline of one refit](timeline.png)\n\n([SVG](timeline.svg))\n\n"
            "| latency (s) | construction bound (s) | busiest owner | transport bound (s) | "
            "busiest endpoint | finalization (s) | remainder (s) |\n|---|---|---|---|---|---|---|\n"
            "| %.4g | %.4g | %d | %.4g | %d | %.4g | %.4g |\n\n",
            r->timeline_refit, r->o->trace_path,
            r->o->refit >= 0 ? "" : " (the refit of median latency in the trace)", b->latency_s,
            b->construction_lb_s, b->busiest_owner, b->transport_lb_s, b->busiest_endpoint,
            b->finalization_s, b->remainder_s);
}

/* Figure 9 needs a training loop and torch, which dcr report does not run:
 * the report says where it is drawn instead of showing a stand-in. */
static void md_fig9(FILE *f)
{
    fprintf(f, "## Reward and KL under receiver failures (Figure 9)\n\n"
               "Drawn beside this report by `examples/fig9_rl.py --out DIR`: a policy-gradient "
               "loop on a vLLM-style torch model refit by dcr with a receiver killed mid-apply "
               "every 5 steps, and by dense reloads; `DIR/fig9.csv` and `DIR/fig9.svg` "
               "(`examples/fig9.gp`) show reward and KL side by side with the killed steps "
               "circled, and the script exits 1 if the curves differ "
               "(docs/guides/python.md, section Figure 9).\n\n");
}

static dcr_status_t write_markdown(const report_t *r)
{
    FILE *f = open_out(r, "report.md");
    if (!f) return DCR_EIO;
    md_header(r, f);
    if (r->ng) {
        md_latency(r, f);
        md_payload(r, f);
        md_modes(r, f);
        md_bounds(r, f);
    } else {
        fprintf(f, "The file holds no runs: no figures.\n\n");
    }
    if (r->trend) dcr_trend_md(r->trend, f);
    if (r->compare) dcr_base_vs_new_md(r->compare, f);
    if (r->have_timeline) md_timeline(r, f);
    md_fig9(f);
    return close_out(r, f, "report.md");
}

/* ---- entry ---- */

static dcr_status_t make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return DCR_OK;
        return dcr_error_set(DCR_EIO, "%s exists and is not a directory", path);
    }
    return dcr_error_set(DCR_EIO, "cannot create directory %s: %s", path, strerror(errno));
}

static void report_free(report_t *r)
{
    for (size_t i = 0; r->g && i < r->ng; i++) {
        free(r->g[i].fig10_key);
        free(r->g[i].payload_key);
    }
    free(r->g);
    dcr_trend_destroy(r->trend);
    dcr_compare_destroy(r->compare);
    dcr_results_set_destroy(r->set);
}

/* Every results file in one set: the first, then the others in order. */
static dcr_status_t read_all(report_t *r)
{
    DCR_CHECK(dcr_results_read(r->o->results_path, &r->set));
    for (size_t i = 0; i < r->o->nmore; i++) {
        dcr_results_set_t *more = NULL;
        DCR_CHECK(dcr_results_read(r->o->more_paths[i], &more));
        dcr_status_t st = dcr_results_set_merge(r->set, more);
        if (st != DCR_OK) {
            dcr_results_set_destroy(more);
            return st;
        }
    }
    return DCR_OK;
}

/* The trend (two or more runs) and, with a BASE file, the base-against-new figure. */
static dcr_status_t write_tracking(report_t *r)
{
    if (r->set->nruns >= 2) {
        DCR_CHECK(dcr_trend_build(r->set, &r->trend));
        DCR_CHECK(dcr_trend_write(r->trend, r->dir));
        DCR_CHECK(write_driver(r, "trend", 1500, 900));
        DCR_CHECK(run_gnuplot(r, "trend.gp"));
    }
    if (!r->o->base_path) return DCR_OK;
    dcr_compare_opts_t co = dcr_compare_opts_default();
    if (r->o->threshold_pct > 0) co.threshold_pct = r->o->threshold_pct;
    co.ignore = r->o->ignore;
    co.nignore = r->o->nignore;
    DCR_CHECK(dcr_compare_files(r->o->base_path, r->o->results_path, &co, &r->compare));
    DCR_CHECK(dcr_base_vs_new_write(r->compare, r->dir, &r->compare_rows));
    if (!r->compare_rows) return DCR_OK;
    int height = 200 + 34 * (int)r->compare_rows;
    DCR_CHECK(write_driver(r, "base_vs_new", 1500, height < 450 ? 450 : height));
    return run_gnuplot(r, "base_vs_new.gp");
}

dcr_status_t dcr_report_write(const dcr_report_opts_t *o)
{
    report_t r = {.o = o};
    DCR_CHECK(dcr_report_find_gnuplot(o->gnuplot, r.gnuplot, sizeof(r.gnuplot)));
    dcr_status_t st;
    char data[4096];
    dcr_outdir_t *out = NULL;
    DCR_CHECK_GOTO(read_all(&r), st, done);
    /* Every file goes to a staging folder first and moves into the output
     * folder only when all are written: a failed report leaves none. */
    DCR_CHECK_GOTO(dcr_outdir_open("report", o->out_dir, &out), st, done);
    r.dir = dcr_outdir_stage(out);
    snprintf(data, sizeof(data), "%s/data", r.dir);
    DCR_CHECK_GOTO(make_dir(data), st, done);
    DCR_CHECK_GOTO(build_groups(&r), st, done);
    /* Log axes drop points <= 0, and gnuplot fails on a plot with no point at all. */
    for (size_t i = 0; i < r.ng; i++) {
        r.have_fig10 |= r.g[i].checkpoint_bytes > 0 && r.g[i].lat.median > 0;
        r.have_payload_fig |= r.g[i].rate > 0 && r.g[i].payload.median > 0;
    }
    if (r.have_fig10) DCR_CHECK_GOTO(write_fig10(&r), st, done);
    if (r.have_payload_fig) DCR_CHECK_GOTO(write_payload_fig(&r), st, done);
    DCR_CHECK_GOTO(write_tracking(&r), st, done);
    if (o->trace_path) DCR_CHECK_GOTO(write_timeline(&r), st, done);
    DCR_CHECK_GOTO(write_markdown(&r), st, done);
    dcr_gnuplot_drop_log(r.dir); /* gnuplot's warnings are no product of a report */
    st = dcr_outdir_commit(out);
    out = NULL;
done:
    if (out && r.gnuplot_failed) st = dcr_gnuplot_keep_log(st, r.dir, o->out_dir);
    dcr_outdir_abort(out);
    report_free(&r);
    return st;
}
