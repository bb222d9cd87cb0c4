/* What dcr sim and dcr sim plan print (sim_report.c): a sweep's rows beside
 * the seed's figures, as text or one JSON object on stdout, and a capacity
 * plan's grid. */
#ifndef DCR_SIM_REPORT_H
#define DCR_SIM_REPORT_H

#include <stdbool.h>

#include "sim/calibrate.h"
#include "sim/plan.h"
#include "sim/sim.h"
#include "sim/sweep.h"

/* The rows, the cluster, the calibration and its provenance, the mode, and
 * the relay's gain over the object store at 5% per model; nemo: each row of
 * NeMo-RL's model gets its published latency ("nemo_rl_published_s"). */
void dcr_sim_report_json(const dcr_sim_spec_t *s, const dcr_sim_row_t *rows, int n,
                         const dcr_sim_calibration_t *cal, bool nemo);
/* The same as text: the cluster and calibration and a table of the rows
 * with the seed's ranges; with paper (the seed's testbed) the seed's
 * summary and the sizes that are stand-ins. */
void dcr_sim_report_text(const dcr_sim_spec_t *s, const dcr_sim_row_t *rows, int n,
                         const dcr_sim_calibration_t *cal, bool paper);
/* NeMo-RL's published refits beside the simulated ones (--testbed nemo-rl). */
void dcr_sim_report_nemo_rl(const dcr_sim_row_t *rows, int n);

/* A plan's grid (dcr sim plan) as a table with the stage shares and the
 * latency change of each doubling. */
void dcr_sim_plan_report_text(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_row_t *rows, int n);
/* The same as one JSON object; figure: the folder the figure went to, or
 * NULL (no "figure" key). */
void dcr_sim_plan_report_json(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_row_t *rows, int n, const char *figure);

/* A calibration (dcr calibrate): the machine, the per-rate stage costs,
 * the payload size factors, construction, receiver, control-plane and relay
 * costs, as text on stdout. */
void dcr_sim_calibration_print(const dcr_sim_calibration_t *c);

#endif
