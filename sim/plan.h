/* Capacity planning: one model's refit simulated over a grid of rollout
 * node counts, cross-cluster rates, change rates and transports, printed as
 * a table and drawn with gnuplot (`dcr sim plan`). */
#ifndef DCR_SIM_PLAN_H
#define DCR_SIM_PLAN_H

#include <stdio.h>

#include "sim/sim.h"
#include "sim/workload.h"

#define DCR_SIM_PLAN_MAX 16 /* values per axis */

/* The grid. Every list holds 1..DCR_SIM_PLAN_MAX values. */
typedef struct dcr_sim_plan {
    int rollout_nodes[DCR_SIM_PLAN_MAX];
    int nnodes;
    /* each node's cross-cluster rate, also the per-flow cap; a relay-root
     * ingress (relay_gbps) keeps its ratio to the base cluster's rate */
    double gbps[DCR_SIM_PLAN_MAX];
    int ngbps;
    double rates[DCR_SIM_PLAN_MAX];
    int nrates;
    const char *transports[2];
    int ntransports;
    /* Also simulate each row with twice the cross-cluster bandwidth, twice
     * the rollout-side speed and twice the owner-side speed (three more
     * refits per row, no reference). */
    bool sensitivity;
} dcr_sim_plan_t;

/* Latency change (seconds, negative is faster) when one thing doubles:
 * every cross-cluster rate (node links, the per-flow cap, the relay root's
 * ingress), the speed of every receiver's decode and apply and of every
 * relay hop, or the speed of every owner's compute. */
typedef struct dcr_sim_sensitivity {
    double bandwidth_s, rollout_s, owner_s;
} dcr_sim_sensitivity_t;

typedef struct dcr_sim_plan_row {
    int rollout_nodes;
    double gbps, rate;
    const char *transport;
    dcr_sim_result_t r;
    bool has_sensitivity;
    dcr_sim_sensitivity_t d;
} dcr_sim_plan_row_t;

/* The three what-ifs of one configuration: spec on workload w (which is
 * scaled and restored in place) against its base latency. */
dcr_status_t dcr_sim_sensitivity(const dcr_sim_spec_t *spec, dcr_sim_workload_t *w,
                                 double base_latency_s, dcr_sim_sensitivity_t *out_p);

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
