/* Capacity planning: one model's refit simulated over a grid of rollout
 * node counts, cross-cluster rates, change rates and transports, printed as
 * a table and drawn with gnuplot (`dcr sim plan`). */
#ifndef DCR_SIM_PLAN_H
#define DCR_SIM_PLAN_H

#include <stdio.h>

#include "sim/sim.h"

#define DCR_SIM_PLAN_MAX 16 /* values per axis */

/* The grid. Every list holds 1..DCR_SIM_PLAN_MAX values. */
typedef struct dcr_sim_plan {
    int rollout_nodes[DCR_SIM_PLAN_MAX];
    int nnodes;
    double gbps[DCR_SIM_PLAN_MAX]; /* each node's cross-cluster rate, also the per-flow cap */
    int ngbps;
    double rates[DCR_SIM_PLAN_MAX];
    int nrates;
    const char *transports[2];
    int ntransports;
} dcr_sim_plan_t;

typedef struct dcr_sim_plan_row {
    int rollout_nodes;
    double gbps, rate;
    const char *transport;
    dcr_sim_result_t r;
} dcr_sim_plan_row_t;

/* Rows a plan has: the product of its list lengths. */
int dcr_sim_plan_count(const dcr_sim_plan_t *plan);

/* Simulates every grid point over base's model, layout and cluster (whose
 * rollout node count and rates the grid replaces). rows must hold
 * dcr_sim_plan_count(plan) rows; they come in the order transport, rate,
 * gbps, nodes (nodes fastest). One workload is built per transport, rate
 * and node count and reused across rates of the links. */
dcr_status_t dcr_sim_plan_run(const dcr_sim_spec_t *base, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_t *plan, dcr_sim_plan_row_t *rows);

/* Writes dir/plan.dat (one block per transport, change rate and link rate)
 * and dir/plan.body.gp: refit latency and speedup against rollout nodes,
 * one line per block, titled with the model. A driver script
 * (reports/gnuplot.h) turns the body into PNG and SVG. */
dcr_status_t dcr_sim_plan_write_figure(const char *dir, const char *model,
                                       const dcr_sim_plan_t *plan, const dcr_sim_plan_row_t *rows);

#endif
