/* The capacity-planning sweep and its figure's data and gnuplot body. */
#include "sim/plan.h"

#include <errno.h>
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

/* Latency of spec on w with the workload scaled by (owner, rollout), then restored. */
static dcr_status_t dcr__scaled_latency(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                        double owner, double rollout, double *lat_p)
{
    dcr_sim_result_t r;
    DCR_CHECK(dcr_sim_workload_scale(w, owner, rollout));
    dcr_status_t st = dcr_sim_run_workload(spec, w, &r);
    DCR_CHECK(dcr_sim_workload_scale(w, 1 / owner, 1 / rollout));
    DCR_CHECK(st);
    *lat_p = r.latency_s;
    return DCR_OK;
}

dcr_status_t dcr_sim_sensitivity(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                 double base_latency_s, dcr_sim_sensitivity_t *out_p)
{
    dcr_sim_spec_t s = *spec;
    s.no_reference = true;
    dcr_sim_spec_t fast = s;
    fast.cluster.cross_gbps *= 2;
    fast.cluster.flow_gbps *= 2;
    fast.cluster.relay_gbps *= 2;
    double bw, rollout, owner;
    DCR_CHECK(dcr__scaled_latency(&fast, w, 1, 1, &bw));
    DCR_CHECK(dcr__scaled_latency(&s, w, 1, 0.5, &rollout));
    DCR_CHECK(dcr__scaled_latency(&s, w, 0.5, 1, &owner));
    out_p->bandwidth_s = bw - base_latency_s;
    out_p->rollout_s = rollout - base_latency_s;
    out_p->owner_s = owner - base_latency_s;
    return DCR_OK;
}

/* Every link rate of one workload (transport, change rate, node count). */
static dcr_status_t dcr__plan_links(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                    const dcr_sim_plan_t *plan, int t, int r, int k,
                                    dcr_sim_plan_row_t *rows)
{
    for (int g = 0; g < plan->ngbps; g++) {
        dcr_sim_spec_t s = *spec;
        /* A fitted relay-root ingress is a fraction of the node rate it was
         * fitted with; it keeps that fraction at every rate of the grid. */
        if (s.cluster.relay_gbps > 0 && s.cluster.cross_gbps > 0)
            s.cluster.relay_gbps *= plan->gbps[g] / s.cluster.cross_gbps;
        s.cluster.cross_gbps = s.cluster.flow_gbps = plan->gbps[g];
        int at = ((t * plan->nrates + r) * plan->ngbps + g) * plan->nnodes + k;
        dcr_sim_plan_row_t *row = &rows[at];
        memset(row, 0, sizeof(*row));
        row->rollout_nodes = plan->rollout_nodes[k];
        row->gbps = plan->gbps[g];
        row->rate = plan->rates[r];
        row->transport = plan->transports[t];
        DCR_CHECK(dcr_sim_run_workload(&s, w, &row->r));
        if (!plan->sensitivity) continue;
        DCR_CHECK(dcr_sim_sensitivity(&s, w, row->r.latency_s, &row->d));
        row->has_sensitivity = true;
    }
    return DCR_OK;
}

dcr_status_t dcr_sim_plan_run(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_t *plan, dcr_sim_plan_row_t *rows)
{
    DCR_CHECK(dcr__plan_check(plan));
    for (int t = 0; t < plan->ntransports; t++)
        for (int r = 0; r < plan->nrates; r++)
            for (int k = 0; k < plan->nnodes; k++) {
                dcr_sim_spec_t spec = *base;
                spec.transport = plan->transports[t];
                spec.change_rate = plan->rates[r];
                spec.cluster.rollout_nodes = plan->rollout_nodes[k];
                dcr_sim_workload_t *w = NULL;
                DCR_CHECK(dcr_sim_workload_build(&spec, cal, &w));
                dcr_status_t st = dcr__plan_links(&spec, w, plan, t, r, k, rows);
                dcr_sim_workload_destroy(w);
                DCR_CHECK(st);
            }
    return DCR_OK;
}

/* ---- the figure ------------------------------------------------------------ */

static dcr_status_t dcr__plan_data(const char *dir, const dcr_sim_plan_t *plan,
                                   const dcr_sim_plan_row_t *rows)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/plan.dat", dir);
    FILE *f = fopen(path, "w");
    if (!f) return dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    int blocks = plan->ntransports * plan->nrates * plan->ngbps;
    for (int b = 0; b < blocks; b++) {
        const dcr_sim_plan_row_t *first = &rows[b * plan->nnodes];
        fprintf(f, "# %s, %g%% changed, %g Gbps per node\n# rollout_nodes latency_s speedup\n",
                first->transport, 100 * first->rate, first->gbps);
        for (int k = 0; k < plan->nnodes; k++) {
            const dcr_sim_plan_row_t *row = &first[k];
            fprintf(f, "%d %.6g %.6g\n", row->rollout_nodes, row->r.latency_s, row->r.speedup);
        }
        fprintf(f, "\n\n"); /* a gnuplot index per block */
    }
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? dcr_error_set(DCR_EIO, "writing %s failed: %s", path, strerror(errno)) : DCR_OK;
}

/* One panel: `column` of every block against rollout nodes. */
static void dcr__plan_panel(FILE *f, const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows,
                            int column)
{
    static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    int blocks = plan->ntransports * plan->nrates * plan->ngbps;
    fprintf(f, "plot ");
    for (int b = 0; b < blocks; b++) {
        const dcr_sim_plan_row_t *first = &rows[b * plan->nnodes];
        /* Colour by link rate and change rate; the transport sets the dash. */
        int series = b % (plan->nrates * plan->ngbps);
        fprintf(f,
                "%s'plan.dat' index %d using 1:%d with linespoints lw 2 pt %d dt %d lc rgb '%s' "
                "title '%s, %g%%, %g Gbps'",
                b ? ", \\\n     " : "", b, column, 7 - (first->transport[0] == 'r') * 2,
                first->transport[0] == 'r' ? 2 : 1, colors[series % 8], first->transport,
                100 * first->rate, first->gbps);
    }
    fprintf(f, "\n");
}

dcr_status_t dcr_sim_plan_write_figure(const char *dir, const char *model,
                                       const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows)
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
    fprintf(f, "set grid\nset key below box font ',9' height 1 spacing 1.2\nset logscale x 2\n"
               "set xlabel 'rollout nodes' offset 0,1\nset offsets graph 0.05, graph 0.05, 0, 0\n");
    fprintf(f, "set ylabel 'refit latency (s)'\nset yrange [0:*]\n");
    dcr__plan_panel(f, plan, rows, 2);
    fprintf(f, "set ylabel 'speedup over the full-checkpoint reference (x)'\n");
    dcr__plan_panel(f, plan, rows, 3);
    fprintf(f, "unset multiplot\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    return bad ? dcr_error_set(DCR_EIO, "writing %s failed: %s", path, strerror(errno)) : DCR_OK;
}
