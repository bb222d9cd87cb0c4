/* Sweeps of simulated refits and the figures across their rows (sim/sweep.h). */
#include "sim/sweep.h"

#include <math.h>
#include <string.h>

int dcr_sim_sweep_rows(const dcr_sim_sweep_t *sw)
{
    return sw->nmodels * sw->ntransports * (sw->model_rates ? 1 : sw->nrates);
}

dcr_status_t dcr_sim_sweep_run(const dcr_sim_sweep_t *sw, dcr_sim_spec_t *spec,
                               const dcr_sim_calibration_t *cal, dcr_sim_row_t *rows, int cap,
                               int *n_p)
{
    int n = 0;
    *n_p = 0;
    if (dcr_sim_sweep_rows(sw) > cap)
        return dcr_error_set(DCR_EINVAL, "sim: %d rows, at most %d", dcr_sim_sweep_rows(sw), cap);
    for (int m = 0; m < sw->nmodels; m++) {
        spec->scenario.model = sw->models[m];
        const double *rates = sw->model_rates ? &sw->model_rates[m] : sw->rates;
        int nrates = sw->model_rates ? 1 : sw->nrates;
        for (int t = 0; t < sw->ntransports; t++)
            for (int i = 0; i < nrates; i++) {
                spec->transport = sw->transports[t];
                spec->change_rate = rates[i];
                dcr_sim_row_t *w = &rows[n];
                memset(w, 0, sizeof(*w));
                w->model = sw->models[m];
                w->size = sw->seed_figures ? dcr_sim_paper_size_of(sw->models[m]) : NULL;
                w->transport = sw->transports[t];
                w->rate = rates[i];
                DCR_CHECK(dcr_sim_run(spec, cal, &w->r));
                *n_p = ++n;
                if (sw->on_row) sw->on_row(sw->ctx, w, n, dcr_sim_sweep_rows(sw));
            }
    }
    return DCR_OK;
}

double dcr_sim_rows_latency(const dcr_sim_row_t *rows, int n, const char *model,
                            const char *transport, double rate)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].model, model) && !strcmp(rows[i].transport, transport) &&
            fabs(rows[i].rate - rate) < 1e-12)
            return rows[i].r.latency_s;
    return 0;
}

int dcr_sim_relay_gains(const dcr_sim_row_t *rows, int n, double rate, dcr_sim_relay_gain_t *out,
                        int cap)
{
    int k = 0;
    for (int i = 0; i < n && k < cap; i++) {
        if (strcmp(rows[i].transport, "relay") || fabs(rows[i].rate - rate) > 1e-12) continue;
        double obj = dcr_sim_rows_latency(rows, n, rows[i].model, "objstore", rate);
        if (!(obj > 0 && rows[i].r.latency_s > 0)) continue;
        const dcr_sim_paper_size_t *z = rows[i].size;
        out[k++] = (dcr_sim_relay_gain_t){
            rows[i].model, obj / rows[i].r.latency_s,
            z && z->relay_gain_5pct > 0 && fabs(rate - 0.05) < 1e-12 ? z->relay_gain_5pct : 0};
    }
    return k;
}
