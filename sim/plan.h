/* Capacity planning: one model's refit simulated over a grid of rollout
 * node counts, cross-cluster rates, change rates and transports, printed as
 * a table and drawn with gnuplot (`dcr sim plan`). */
#ifndef DCR_SIM_PLAN_H
#define DCR_SIM_PLAN_H

#include <stdio.h>

#include "sim/sim.h"
#include "sim/workload.h"

#define DCR_SIM_PLAN_MAX 16 /* values per axis */
#define DCR_SIM_SENS_MAX 40 /* fields a sensitivity may name */

/* Latency when one figure is halved and when it is doubled: a field of the
 * cluster description (by its name), or "owner_speed" / "rollout_speed"
 * (every owner-side or rollout-side stage cost of the calibration). */
typedef struct dcr_sim_sensitivity {
    const char *field;
    double half_s, double_s;
} dcr_sim_sensitivity_t;

typedef struct dcr_sim_plan_row {
    int rollout_nodes;
    double gbps, rate;
    const char *transport;
    dcr_sim_result_t r;
} dcr_sim_plan_row_t;

/* The grid. Every list holds 1..DCR_SIM_PLAN_MAX values. */
typedef struct dcr_sim_plan {
    int rollout_nodes[DCR_SIM_PLAN_MAX];
    int nnodes;
    /* each node's cross-cluster rate; the per-flow cap and a relay-root
     * ingress keep their ratio to it (dcr_sim_cluster_set_link_rate) */
    double gbps[DCR_SIM_PLAN_MAX];
    int ngbps;
    double rates[DCR_SIM_PLAN_MAX];
    int nrates;
    const char *transports[2];
    int ntransports;
    /* Called after each row is simulated (progress, streamed rows); NULL: none. */
    void (*on_row)(void *ctx, const dcr_sim_plan_row_t *row, int done, int total);
    void *ctx;
} dcr_sim_plan_t;

/* The direct answers for one transport at one grid point (the largest node
 * count, the first link rate and change rate). */
typedef struct dcr_sim_plan_answer {
    const char *transport;
    int rollout_nodes;
    double gbps, rate;
    double latency_s;
    /* Full reloads of the same bytes: the simulated full-checkpoint
     * reference (through the object store) and a line-rate reload (every
     * rollout node takes the checkpoint at its node rate, nothing else). */
    double reference_s, line_rate_s;
    /* Change rates at which the refit takes as long as each reload: below
     * them the delta refit wins. 1 when it wins even at 100% changes, 0 when
     * it loses even at the smallest rate tried (1e-4). Simulated at rates
     * 1e-4 .. 1 about a factor 3 apart, interpolated in log(rate) between. */
    double crossover_reference, crossover_line_rate;
    /* Figures whose halving or doubling moves latency by more than 5%. */
    int nsens;
    dcr_sim_sensitivity_t sens[DCR_SIM_SENS_MAX];
} dcr_sim_plan_answer_t;

/* Rows a plan has: the product of its list lengths. */
int dcr_sim_plan_count(const dcr_sim_plan_t *plan);

/* Simulates every grid point over base's model, layout and cluster (whose
 * rollout node count and rates the grid replaces). rows must hold
 * dcr_sim_plan_count(plan) rows; they come in the order transport, rate,
 * gbps, nodes (nodes fastest). One workload is built per transport and
 * rate and reused across node counts and link rates. */
dcr_status_t dcr_sim_plan_run(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_t *plan, dcr_sim_plan_row_t *rows);

/* The answers for transport t of the plan (see dcr_sim_plan_answer_t):
 * break-even change rates (nine refits at rates 1e-4 .. 1), sensitivities
 * with `sensitivity` (two refits per field; fanout is not halved below 2). `row` is that point's
 * row. */
dcr_status_t dcr_sim_plan_answer(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                                 const dcr_sim_plan_t *plan, int t, const dcr_sim_plan_row_t *row,
                                 bool sensitivity, dcr_sim_plan_answer_t *out_p);

/* Index of the row the answers of transport t are for. */
int dcr_sim_plan_answer_row(const dcr_sim_plan_t *plan, int t);

/* What the plan swept: "rollout_nodes", "gbps" or "change_rate" (the
 * first axis with more than one value in that order; rollout_nodes when
 * none has). The figure's x axis. */
const char *dcr_sim_plan_x_axis(const dcr_sim_plan_t *plan);

/* Writes dir/plan.dat (one block per series) and dir/plan.body.gp: refit
 * latency and speedup against the swept axis, one line per series, with
 * each transport's break-even change rate drawn (a vertical line on a
 * change-rate axis; the reference and line-rate reloads as horizontal
 * lines otherwise). answers: one per transport. A driver script
 * (reports/gnuplot.h) turns the body into PNG and SVG. */
dcr_status_t dcr_sim_plan_write_figure(const char *dir, const char *model,
                                       const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows,
                                       const dcr_sim_plan_answer_t *answers);

#endif
