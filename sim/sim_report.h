/* What dcr sim and dcr sim plan print (sim_report.c): a sweep's rows beside
 * the seed's figures, as text or one JSON object on stdout, and a capacity
 * plan's grid. */
#ifndef DCR_SIM_REPORT_H
#define DCR_SIM_REPORT_H

#include <jansson.h>
#include <stdbool.h>

#include "sim/calibrate.h"
#include "sim/description.h"
#include "sim/plan.h"
#include "sim/sim.h"
#include "sim/sweep.h"

/* The rows, the cluster, the calibration and its provenance, the mode, and
 * the relay's gain over the object store at 5% per model; nemo: each row of
 * NeMo-RL's model gets its published latency ("nemo_rl_published_s");
 * "description": the resolved cluster description d. */
void dcr_sim_report_json(const dcr_sim_spec_t *s, const dcr_sim_row_t *rows, int n,
                         const dcr_sim_calibration_t *cal, bool nemo,
                         const dcr_sim_description_t *d);
/* The same as text: the description and calibration and a table of the
 * rows with the seed's ranges; with paper (the seed's testbed) the seed's
 * summary and the sizes that are stand-ins. */
void dcr_sim_report_text(const dcr_sim_spec_t *s, const dcr_sim_row_t *rows, int n,
                         const dcr_sim_calibration_t *cal, bool paper,
                         const dcr_sim_description_t *d);
/* NeMo-RL's published refits beside the simulated ones (--testbed nemo-rl). */
void dcr_sim_report_nemo_rl(const dcr_sim_row_t *rows, int n);

/* One row of a plan as JSON (the keys of a `dcr sim` row, with
 * rollout_nodes and gbps): the rows of --json and the lines of --jsonl. */
json_t *dcr_sim_plan_row_json(const char *model, const dcr_sim_plan_row_t *row);
/* One row of a sweep as JSON. */
json_t *dcr_sim_report_row_json(const dcr_sim_row_t *row);

/* A plan's grid (dcr sim plan) as a table with the stage shares, then per
 * transport the direct answers (break-even change rates, sensitivities). */
void dcr_sim_plan_report_text(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_row_t *rows, int n,
                              const dcr_sim_plan_answer_t *answers, int nanswers,
                              const dcr_sim_description_t *d);
/* The same as one JSON object: "rows", "description", "crossover" (one
 * entry per transport); figure: the folder the figure went to, or NULL
 * (no "figure" key). */
void dcr_sim_plan_report_json(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                              const dcr_sim_plan_row_t *rows, int n, const char *figure,
                              const dcr_sim_plan_answer_t *answers, int nanswers,
                              const dcr_sim_description_t *d);

/* A calibration (dcr calibrate): the machine, the per-rate stage costs,
 * the payload size factors, construction, receiver, control-plane and relay
 * costs, as text on stdout. */
void dcr_sim_calibration_print(const dcr_sim_calibration_t *c);

#endif
