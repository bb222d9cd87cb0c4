/* The regression-tracking figures of `dcr report` (reports/report.h):
 *   trend         per metric (latency_s, transport_lb_s, construction_lb_s,
 *                 payload_bytes) the median of every run, ordered by the
 *                 run's time and labelled by its git revision, one series
 *                 per configuration (dcr_results_group_runs: configuration,
 *                 command and machine), with a band for the 95% bootstrap
 *                 interval of each run's median;
 *   base_vs_new   per matched configuration and judged metric of a
 *                 comparison (reports/compare.h), NEW/BASE of the medians
 *                 with its interval, against lines at 1 and 1 +- threshold,
 *                 coloured by verdict.
 * Each writes data/NAME.dat and NAME.body.gp into the report's staging
 * folder; the caller writes the driver and runs gnuplot. Every string from
 * a results file reaches a script only through dcr_gnuplot_quote. */
#ifndef DCR_REPORTS_TREND_H
#define DCR_REPORTS_TREND_H

#include <stdio.h>

#include "reports/compare.h"
#include "reports/results_read.h"

/* One series of the trend: a configuration's runs in time order. */
typedef struct dcr_trend_series {
    char label[320]; /* distinct across series: machine or command added where needed */
    size_t nruns;
    size_t *order; /* indices into the trend's run order */
} dcr_trend_series_t;

typedef struct dcr_trend {
    const dcr_results_set_t *set; /* borrowed */
    size_t nruns;
    size_t *by_time; /* set->runs indices, by time (then file order) */
    dcr_trend_series_t *series;
    size_t nseries;
} dcr_trend_t;

/* Orders the runs and groups them into series. *out_p set on success;
 * free with dcr_trend_destroy (accepts NULL). */
dcr_status_t dcr_trend_build(const dcr_results_set_t *set, dcr_trend_t **out_p);
void dcr_trend_destroy(dcr_trend_t *t);

/* Writes dir/data/trend.dat and dir/trend.body.gp. */
dcr_status_t dcr_trend_write(const dcr_trend_t *t, const char *dir);
/* The report.md section: the figure and a table of the runs in order. */
void dcr_trend_md(const dcr_trend_t *t, FILE *f);

/* Writes dir/data/base_vs_new.dat and dir/base_vs_new.body.gp; *rows_p is
 * the number of metric rows drawn (0: nothing matched, nothing written). */
dcr_status_t dcr_base_vs_new_write(const dcr_compare_t *c, const char *dir, size_t *rows_p);
/* The report.md section: the figure and the judged metrics per pair. */
void dcr_base_vs_new_md(const dcr_compare_t *c, FILE *f);

#endif
