/* The capacity-planning sweep and its figure's data and gnuplot body. */
#include "sim/plan.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim/workload.h"
#include "workloads/harness/gnuplot_text.h"

int dcr_sim_plan_count(const dcr_sim_plan_t *plan)
{
    return plan->nnodes * plan->ngbps * plan->nrates * plan->ntransports;
}

static dcr_status_t dcr__plan_check(const dcr_sim_plan_t *plan)
{
    const int n[] = {plan->nnodes, plan->ngbps, plan->nrates, plan->ntransports};
    const int max[] = {DCR_SIM_PLAN_MAX, DCR_SIM_PLAN_MAX, DCR_SIM_PLAN_MAX, 2};
    for (int i = 0; i < 4; i++)
        if (n[i] < 1 || n[i] > max[i])
            return dcr_error_set(DCR_EINVAL, "sim plan: an axis has %d values, expected 1..%d",
                                 n[i], max[i]);
    return DCR_OK;
}

static int dcr__row_at(const dcr_sim_plan_t *plan, int t, int r, int g, int k)
{
    return ((t * plan->nrates + r) * plan->ngbps + g) * plan->nnodes + k;
}

/* spec at one grid point: node count and link rate. */
static dcr_sim_spec_t dcr__point(const dcr_sim_spec_t *spec, int nodes, double gbps)
{
    dcr_sim_spec_t s = *spec;
    s.cluster.rollout_nodes = nodes;
    dcr_sim_cluster_set_link_rate(&s.cluster, gbps);
    return s;
}

/* Every node count and link rate of one workload (transport, change rate;
 * and node count where the workload depends on it: shared cores). */
static dcr_status_t dcr__plan_points(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                     const dcr_sim_plan_t *plan, int t, int r, int k0, int k1,
                                     dcr_sim_plan_row_t *rows, int *done_p)
{
    for (int k = k0; k < k1; k++)
        for (int g = 0; g < plan->ngbps; g++) {
            dcr_sim_spec_t s = dcr__point(spec, plan->rollout_nodes[k], plan->gbps[g]);
            dcr_sim_plan_row_t *row = &rows[dcr__row_at(plan, t, r, g, k)];
            memset(row, 0, sizeof(*row));
            row->rollout_nodes = plan->rollout_nodes[k];
            row->gbps = plan->gbps[g];
            row->rate = plan->rates[r];
            row->transport = plan->transports[t];
            /* The reference (a full checkpoint through the object store)
             * depends on the cluster and the model, not on the transport
             * or the change rate: the first transport and rate's row has it. */
            const dcr_sim_plan_row_t *first = &rows[dcr__row_at(plan, 0, 0, g, k)];
            bool reuse = (t > 0 || r > 0) && !spec->no_reference;
            s.no_reference = s.no_reference || reuse;
            DCR_CHECK(dcr_sim_run_workload(&s, w, &row->r));
            if (reuse) {
                row->r.reference_s = first->r.reference_s;
                row->r.speedup = row->r.latency_s > 0 ? first->r.reference_s / row->r.latency_s : 0;
            }
            ++*done_p;
            if (plan->on_row) plan->on_row(plan->ctx, row, *done_p, dcr_sim_plan_count(plan));
        }
    return DCR_OK;
}

dcr_status_t dcr_sim_plan_run(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_t *plan, dcr_sim_plan_row_t *rows)
{
    DCR_CHECK(dcr__plan_check(plan));
    /* A cluster's workload does not depend on the rollout node count (only
     * the in-process engine's acknowledgments do). */
    int step = base->cluster.shared_cores > 0 ? 1 : plan->nnodes;
    int done = 0;
    for (int t = 0; t < plan->ntransports; t++)
        for (int r = 0; r < plan->nrates; r++)
            for (int k = 0; k < plan->nnodes; k += step) {
                dcr_sim_spec_t spec = *base;
                spec.transport = plan->transports[t];
                spec.change_rate = plan->rates[r];
                spec.cluster.rollout_nodes = plan->rollout_nodes[k];
                dcr_sim_workload_t *w = NULL;
                DCR_CHECK(dcr_sim_workload_build(&spec, cal, &w));
                dcr_status_t st = dcr__plan_points(&spec, w, plan, t, r, k, k + step, rows, &done);
                dcr_sim_workload_destroy(w);
                DCR_CHECK(st);
            }
    return DCR_OK;
}

/* ---- direct answers ----------------------------------------------------------- */

int dcr_sim_plan_answer_row(const dcr_sim_plan_t *plan, int t)
{
    return dcr__row_at(plan, t, 0, 0, plan->nnodes - 1);
}

/* Latency of spec at change rate `rate` (a workload of its own). */
static dcr_status_t dcr__latency_at(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                                    double rate, double *lat_p)
{
    dcr_sim_spec_t s = *spec;
    s.change_rate = rate;
    s.no_reference = true;
    dcr_sim_result_t r;
    DCR_CHECK(dcr_sim_run(&s, cal, &r));
    *lat_p = r.latency_s;
    return DCR_OK;
}

/* Change rates the break-even search simulates: 1e-4 to 1, about a factor
 * 3 apart. Latency grows smoothly with the rate between them (payload
 * bytes and records are linear in it), so the crossing is interpolated
 * linearly in log(rate) between the two rates that bracket it. */
static const double dcr__cross_rates[] = {1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1};
#define DCR__NCROSS (sizeof(dcr__cross_rates) / sizeof(dcr__cross_rates[0]))

/* The rate at which latency lat[] (at dcr__cross_rates) reaches target_s:
 * 1 when it stays below up to 100%, 0 when it is above from 1e-4 on. */
static double dcr__crossing(const double *lat, double target_s)
{
    if (lat[DCR__NCROSS - 1] <= target_s) return 1;
    if (lat[0] >= target_s) return 0;
    size_t i = 1;
    while (lat[i] < target_s) i++;
    double f = (target_s - lat[i - 1]) / (lat[i] - lat[i - 1]);
    return exp(log(dcr__cross_rates[i - 1]) +
               f * (log(dcr__cross_rates[i]) - log(dcr__cross_rates[i - 1])));
}

/* Latency with description field i (or a calibration speed) scaled by f. */
static dcr_status_t dcr__scaled_field(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                      const char *field, double f, double *lat_p)
{
    dcr_sim_spec_t s = *spec;
    s.no_reference = true;
    double owner = 1, rollout = 1;
    /* Twice the speed is half the cost. */
    if (!strcmp(field, "owner_speed"))
        owner = 1 / f;
    else if (!strcmp(field, "rollout_speed"))
        rollout = 1 / f;
    else {
        for (size_t i = 0; i < dcr_sim_cluster_nfields(); i++) {
            if (strcmp(dcr_sim_cluster_field_name(i), field)) continue;
            double v = dcr_sim_cluster_get(&s.cluster, i) * f;
            if (dcr_sim_cluster_field_is_int(i)) v = v < 1 ? 1 : floor(v);
            DCR_CHECK(dcr_sim_cluster_set(&s.cluster, field, v));
        }
    }
    dcr_sim_result_t r;
    DCR_CHECK(dcr_sim_workload_scale(w, owner, rollout));
    dcr_status_t st = dcr_sim_run_workload(&s, w, &r);
    DCR_CHECK(dcr_sim_workload_scale(w, 1 / owner, 1 / rollout));
    DCR_CHECK(st);
    *lat_p = r.latency_s;
    return DCR_OK;
}

/* Fields a sensitivity tries: every description field that is set (0
 * means none or unlimited: halving or doubling it changes nothing) and that
 * the refit on this transport reads; not those the workload is built for
 * (training layout, GPUs per node), the shared-core switch, or the
 * reference's object size (the sensitivities time the refit only). */
static bool dcr__sens_field(const dcr_sim_spec_t *spec, size_t i)
{
    static const char *const never[] = {"train_nodes", "train_gpus", "rollout_gpus", "shared_cores",
                                        "ref_object_mib"};
    static const char *const relay_only[] = {"relay_gbps", "fanout", "local_gbps",
                                             "local_latency_ms", "staging_payloads"};
    static const char *const store_only[] = {"store_gbps",    "store_flows",   "store_latency_ms",
                                             "store_list_ms", "store_put_ms",  "store_get_rps",
                                             "store_put_rps", "store_prefixes"};
    const char *name = dcr_sim_cluster_field_name(i);
    bool relay = !strcmp(spec->transport, "relay");
    for (size_t k = 0; k < sizeof(never) / sizeof(never[0]); k++)
        if (!strcmp(name, never[k])) return false;
    for (size_t k = 0; !relay && k < sizeof(relay_only) / sizeof(relay_only[0]); k++)
        if (!strcmp(name, relay_only[k])) return false;
    for (size_t k = 0; relay && k < sizeof(store_only) / sizeof(store_only[0]); k++)
        if (!strcmp(name, store_only[k])) return false;
    return dcr_sim_cluster_get(&spec->cluster, i) > 0;
}

static dcr_status_t dcr__sensitivities(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                       double base_s, dcr_sim_plan_answer_t *a)
{
    const char *fields[DCR_SIM_SENS_MAX];
    int n = 0;
    for (size_t i = 0; i < dcr_sim_cluster_nfields() && n < DCR_SIM_SENS_MAX - 2; i++)
        if (dcr__sens_field(spec, i)) fields[n++] = dcr_sim_cluster_field_name(i);
    fields[n++] = "owner_speed";
    fields[n++] = "rollout_speed";
    for (int i = 0; i < n; i++) {
        double half = base_s, twice;
        /* Half of a binary tree's fanout is a chain through every node: a
         * different design, and the one what-if the fast path cannot
         * shorten; it is not tried (its latency is reported as the base). */
        if (strcmp(fields[i], "fanout") || spec->cluster.fanout >= 4)
            DCR_CHECK(dcr__scaled_field(spec, w, fields[i], 0.5, &half));
        DCR_CHECK(dcr__scaled_field(spec, w, fields[i], 2, &twice));
        if (fabs(half - base_s) <= 0.05 * base_s && fabs(twice - base_s) <= 0.05 * base_s) continue;
        a->sens[a->nsens++] = (dcr_sim_sensitivity_t){fields[i], half, twice};
    }
    return DCR_OK;
}

dcr_status_t dcr_sim_plan_answer(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                                 const dcr_sim_plan_t *plan, int t, const dcr_sim_plan_row_t *row,
                                 bool sensitivity, dcr_sim_plan_answer_t *out_p)
{
    dcr_sim_plan_answer_t a;
    memset(&a, 0, sizeof(a));
    a.transport = row->transport;
    a.rollout_nodes = row->rollout_nodes;
    a.gbps = row->gbps;
    a.rate = row->rate;
    a.latency_s = row->r.latency_s;
    a.reference_s = row->r.reference_s;
    /* Every rollout node takes the whole checkpoint through its own link. */
    a.line_rate_s = (double)row->r.checkpoint_bytes * 8 / (row->gbps * 1e9);
    dcr_sim_spec_t spec = dcr__point(base, row->rollout_nodes, row->gbps);
    spec.transport = plan->transports[t];
    double lat[DCR__NCROSS];
    for (size_t i = 0; i < DCR__NCROSS; i++)
        DCR_CHECK(dcr__latency_at(&spec, cal, dcr__cross_rates[i], &lat[i]));
    a.crossover_reference = dcr__crossing(lat, a.reference_s);
    a.crossover_line_rate = dcr__crossing(lat, a.line_rate_s);
    if (sensitivity) {
        spec.change_rate = row->rate;
        dcr_sim_workload_t *w = NULL;
        DCR_CHECK(dcr_sim_workload_build(&spec, cal, &w));
        dcr_status_t st = dcr__sensitivities(&spec, w, a.latency_s, &a);
        dcr_sim_workload_destroy(w);
        DCR_CHECK(st);
    }
    *out_p = a;
    return DCR_OK;
}

/* ---- the figure ------------------------------------------------------------ */

const char *dcr_sim_plan_x_axis(const dcr_sim_plan_t *plan)
{
    if (plan->nnodes > 1) return "rollout_nodes";
    if (plan->ngbps > 1) return "gbps";
    if (plan->nrates > 1) return "change_rate";
    return "rollout_nodes";
}

/* The figure's series: every combination of the axes that are not x, one
 * block of plan.dat each, in row order of the non-x axes. */
typedef struct dcr__series {
    int n, len; /* series, points per series */
    int x;      /* 0 nodes, 1 gbps, 2 rate */
} dcr__series_t;

static dcr__series_t dcr__series_of(const dcr_sim_plan_t *plan)
{
    const char *x = dcr_sim_plan_x_axis(plan);
    dcr__series_t s = {0, 0, !strcmp(x, "gbps") ? 1 : !strcmp(x, "change_rate") ? 2 : 0};
    int len[3] = {plan->nnodes, plan->ngbps, plan->nrates};
    s.len = len[s.x];
    s.n = dcr_sim_plan_count(plan) / s.len;
    return s;
}

/* Row of point j of series b: b counts transport, rate, gbps, nodes with the
 * x axis left out, j walks x. */
static const dcr_sim_plan_row_t *dcr__series_row(const dcr_sim_plan_t *plan,
                                                 const dcr_sim_plan_row_t *rows,
                                                 const dcr__series_t *s, int b, int j)
{
    int idx[3]; /* nodes, gbps, rate */
    int len[3] = {plan->nnodes, plan->ngbps, plan->nrates};
    idx[s->x] = j;
    for (int axis = 0; axis < 3; axis++) { /* nodes fastest, as rows are ordered */
        if (axis == s->x) continue;
        idx[axis] = b % len[axis];
        b /= len[axis];
    }
    int t = b;
    return &rows[dcr__row_at(plan, t, idx[2], idx[1], idx[0])];
}

static double dcr__x_of(const dcr__series_t *s, const dcr_sim_plan_row_t *row)
{
    return s->x == 0 ? row->rollout_nodes : s->x == 1 ? row->gbps : row->rate;
}

static dcr_status_t dcr__plan_data(const char *dir, const dcr_sim_plan_t *plan,
                                   const dcr_sim_plan_row_t *rows)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/plan.dat", dir);
    FILE *f = fopen(path, "w");
    if (!f) return dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    dcr__series_t s = dcr__series_of(plan);
    for (int b = 0; b < s.n; b++) {
        const dcr_sim_plan_row_t *first = dcr__series_row(plan, rows, &s, b, 0);
        fprintf(f,
                "# %s, %g%% changed, %g Gbps per node, %d rollout nodes\n# %s latency_s "
                "speedup\n",
                first->transport, 100 * first->rate, first->gbps, first->rollout_nodes,
                dcr_sim_plan_x_axis(plan));
        for (int j = 0; j < s.len; j++) {
            const dcr_sim_plan_row_t *row = dcr__series_row(plan, rows, &s, b, j);
            fprintf(f, "%.6g %.6g %.6g\n", dcr__x_of(&s, row), row->r.latency_s, row->r.speedup);
        }
        fprintf(f, "\n\n"); /* a gnuplot index per block */
    }
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? dcr_error_set(DCR_EIO, "writing %s failed: %s", path, strerror(errno)) : DCR_OK;
}

/* One panel: `column` of every series against the swept axis. Titles are
 * numbers and the transport names of sim.h only. */
static void dcr__plan_panel(FILE *f, const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows,
                            int column)
{
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    dcr__series_t s = dcr__series_of(plan);
    fprintf(f, "plot ");
    for (int b = 0; b < s.n; b++) {
        const dcr_sim_plan_row_t *first = dcr__series_row(plan, rows, &s, b, 0);
        bool relay = !strcmp(first->transport, "relay");
        char what[96];
        int n = snprintf(what, sizeof(what), "%s", relay ? "relay" : "objstore");
        if (s.x != 2)
            n += snprintf(what + n, sizeof(what) - (size_t)n, ", %g%%", 100 * first->rate);
        if (s.x != 1) n += snprintf(what + n, sizeof(what) - (size_t)n, ", %g Gbps", first->gbps);
        if (s.x != 0)
            snprintf(what + n, sizeof(what) - (size_t)n, ", %d nodes", first->rollout_nodes);
        fprintf(f,
                "%s'plan.dat' index %d using 1:%d with linespoints lw 2 pt %d dt %d lc rgb '%s' "
                "title '%s'",
                b ? ", \\\n     " : "", b, column, relay ? 5 : 7, relay ? 2 : 1,
                colors[(b % (s.n / plan->ntransports > 0 ? s.n / plan->ntransports : 1)) % 8],
                what);
    }
    fprintf(f, "\n");
}

static const char *dcr__x_label(const dcr__series_t *s)
{
    return s->x == 0   ? "rollout nodes"
           : s->x == 1 ? "cross-cluster Gbps per node"
                       : "change rate (fraction of elements)";
}

/* Break-even marks: on a change-rate axis each transport's break-even rate
 * against the reference (a vertical line, where it falls inside (0, 1));
 * on the latency panel the reference's and the line-rate reload's latency
 * at the answer point, and on the speedup panel 1x. */
static void dcr__break_even(FILE *f, const dcr__series_t *s, const dcr_sim_plan_t *plan,
                            const dcr_sim_plan_answer_t *answers, bool latency_panel)
{
    fprintf(f, "unset arrow\nunset label\n");
    if (!answers) return;
    for (int t = 0; t < plan->ntransports && s->x == 2; t++) {
        const dcr_sim_plan_answer_t *a = &answers[t];
        const char *name = !strcmp(a->transport, "relay") ? "relay" : "objstore";
        const double at[2] = {a->crossover_reference, a->crossover_line_rate};
        const char *vs[2] = {"reference", "line rate"};
        for (int k = 0; k < 2; k++) {
            if (!(at[k] > 0 && at[k] < 1)) continue;
            fprintf(f, "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt %d lw 2\n", at[k],
                    at[k], 3 + k);
            fprintf(f,
                    "set label 'break-even %s vs %s %.3g%%' at %.6g, graph %.2f rotate left "
                    "font ',8'\n",
                    name, vs[k], 100 * at[k], at[k], 0.05 + 0.45 * t);
        }
    }
    if (!latency_panel) {
        fprintf(f, "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lw 2\n"
                   "set label 'break-even (1x)' at graph 0.02, first 1 offset 0,0.5 font ',8'\n");
        return;
    }
    fprintf(f, "set arrow from graph 0, first %.6g to graph 1, first %.6g nohead dt 3 lw 2\n",
            answers[0].reference_s, answers[0].reference_s);
    fprintf(f,
            "set label 'full-checkpoint reference (%d nodes)' at graph 0.02, first %.6g offset "
            "0,0.5 font ',8'\n",
            answers[0].rollout_nodes, answers[0].reference_s);
    fprintf(f, "set arrow from graph 0, first %.6g to graph 1, first %.6g nohead dt 4 lw 2\n",
            answers[0].line_rate_s, answers[0].line_rate_s);
    fprintf(f,
            "set label 'line-rate full reload' at graph 0.02, first %.6g offset 0,0.5 font "
            "',8'\n",
            answers[0].line_rate_s);
}

dcr_status_t dcr_sim_plan_write_figure(const char *dir, const char *model,
                                       const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows,
                                       const dcr_sim_plan_answer_t *answers)
{
    DCR_CHECK(dcr__plan_check(plan));
    DCR_CHECK(dcr__plan_data(dir, plan, rows));
    char path[4096];
    snprintf(path, sizeof(path), "%s/plan.body.gp", dir);
    FILE *f = fopen(path, "w");
    if (!f) return dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    /* The model's name comes from a user's file or folder: whitelisted text only. */
    char title[512];
    snprintf(title, sizeof(title), "dcr sim plan: %s (simulated refits)", model);
    fprintf(f, "set multiplot layout 1,2 title ");
    dcr_gnuplot_text_write(f, title);
    fprintf(f, "\n");
    dcr__series_t series = dcr__series_of(plan);
    fprintf(f,
            "set grid\nset key below box font ',9' height 1 spacing 1.2\n%s\n"
            "set xlabel '%s' offset 0,1\nset offsets graph 0.05, graph 0.05, 0, 0\n",
            series.x == 2 ? "unset logscale x" : "set logscale x 2", dcr__x_label(&series));
    fprintf(f, "set ylabel 'refit latency (s)'\nset yrange [0:*]\n");
    dcr__break_even(f, &series, plan, answers, true);
    dcr__plan_panel(f, plan, rows, 2);
    fprintf(f, "set ylabel 'speedup over the full-checkpoint reference (x)'\n");
    dcr__break_even(f, &series, plan, answers, false);
    dcr__plan_panel(f, plan, rows, 3);
    fprintf(f, "unset multiplot\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? dcr_error_set(DCR_EIO, "writing %s failed: %s", path, strerror(errno)) : DCR_OK;
}
