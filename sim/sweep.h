/* A sweep of simulated refits: every model x transport x change rate of a
 * spec, one row each, and the figures drawn across rows (the relay's gain
 * over the object store). `dcr sim` parses flags into a sweep and prints
 * its rows; the simulation and the arithmetic over rows live here. */
#ifndef DCR_SIM_SWEEP_H
#define DCR_SIM_SWEEP_H

#include <stdbool.h>

#include "dcr/status.h"
#include "sim/paper.h"
#include "sim/sim.h"

/* One simulated configuration of a sweep. */
typedef struct dcr_sim_row {
    const char *model;
    const dcr_sim_paper_size_t *size; /* the seed's figures for this model, or NULL */
    const char *transport;
    double rate;
    dcr_sim_result_t r;
} dcr_sim_row_t;

/* What to sweep. Strings are borrowed and must outlive the rows. */
typedef struct dcr_sim_sweep {
    const char *const *models;
    int nmodels;
    const char *const *transports;
    int ntransports;
    const double *rates;
    int nrates;
    /* Per model, one rate that replaces `rates` (a change profile's rate on
     * that model), or NULL. */
    const double *model_rates;
    bool seed_figures; /* attach the seed's figures (dcr_sim_paper_size_of) */
    /* Called after each row is simulated (done of total rows): progress,
     * streamed rows; NULL: none. */
    void (*on_row)(void *ctx, const struct dcr_sim_row *row, int done, int total);
    void *ctx;
} dcr_sim_sweep_t;

/* The rows dcr_sim_sweep_run makes: models x transports x rates (x 1 rate
 * with model_rates). */
int dcr_sim_sweep_rows(const dcr_sim_sweep_t *sw);

/* Simulates every row of sw in order (model, then transport, then rate) on
 * spec, whose model, transport and change rate it sets, with cal. rows has
 * room for cap rows; more is DCR_EINVAL before anything runs. *n_p rows
 * were filled (on failure, those before the failing one). */
dcr_status_t dcr_sim_sweep_run(const dcr_sim_sweep_t *sw, dcr_sim_spec_t *spec,
                               const dcr_sim_calibration_t *cal, dcr_sim_row_t *rows, int cap,
                               int *n_p);

/* Latency of the row with this model, transport and rate, or 0. */
double dcr_sim_rows_latency(const dcr_sim_row_t *rows, int n, const char *model,
                            const char *transport, double rate);

/* The relay's gain at one rate: object-store latency over relay latency. */
typedef struct dcr_sim_relay_gain {
    const char *model;
    double gain;
    double seed_gain; /* the seed's figure, 0 when it gives none */
} dcr_sim_relay_gain_t;

/* One gain per relay row at `rate` whose model also has an object-store row
 * at that rate (both latencies > 0), in row order, at most cap; returns how
 * many were written. */
int dcr_sim_relay_gains(const dcr_sim_row_t *rows, int n, double rate, dcr_sim_relay_gain_t *out,
                        int cap);

#endif
