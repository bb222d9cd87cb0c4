/* `dcr report`: figures (gnuplot, PNG and SVG) and a Markdown report from a
 * results file, and optionally a timeline of one refit from a trace.
 *
 * Written into the output folder (created when missing; existing regular
 * files of the same names are replaced, anything else under those names is
 * refused). Every file is made in a staging folder inside it first and moved
 * in only when all are complete (dcr/outpath.h): a failed report leaves
 * nothing but, when gnuplot failed, gnuplot.log.
 *   report.md                  tables and the figures embedded
 *   fig10_latency.{png,svg}    refit latency and speedup vs checkpoint size,
 *                              one line per transport and change (the seed's
 *                              Figure 10 layout)
 *   payload_vs_rate.{png,svg}  payload bytes vs change rate per checkpoint
 *   trend.{png,svg}            with two or more runs: per metric, each run's
 *                              median and its 95% interval over time,
 *                              labelled by git revision (reports/trend.h)
 *   base_vs_new.{png,svg}      with a BASE file: NEW/BASE per matched
 *                              configuration and metric with its interval
 *                              and verdict (reports/compare.h)
 *   timeline.{png,svg}         with a trace: per-owner / per-endpoint /
 *                              per-receiver stage intervals of one refit with
 *                              both lower bounds and finalization marked (the
 *                              seed's Figure 11 layout)
 *   NAME.gp, data/NAME.dat     the gnuplot scripts and their data, so a
 *                              figure can be restyled and redrawn with
 *                              `cd DIR && gnuplot NAME.gp`
 *   gnuplot.log                what gnuplot printed
 * Runs are grouped by configuration, command and machine
 * (dcr_results_match_key) and their refits pooled. Sizes are decimal (1 MB = 1e6 bytes). */
#ifndef DCR_REPORTS_REPORT_H
#define DCR_REPORTS_REPORT_H

#include <stddef.h>

#include "dcr/status.h"

typedef struct dcr_report_opts {
    const char *results_path;
    /* More results files, read after results_path: their runs join the set
     * (the figures and the trend cover all of them). */
    const char *const *more_paths;
    size_t nmore;
    /* A BASE file: the base-against-new figure compares it with results_path
     * (reports/compare.h) at threshold_pct (<= 0: the default 10), matching
     * less the keys in ignore. NULL: no such figure. */
    const char *base_path;
    double threshold_pct;
    const char *const *ignore;
    size_t nignore;
    const char *out_dir;
    const char *trace_path; /* Chrome trace, or an nsys SQLite export; NULL: no timeline */
    long refit;             /* timeline refit; < 0: the refit of median latency in the trace */
    const char *gnuplot;    /* NULL: $DCR_GNUPLOT, else "gnuplot" on PATH */
} dcr_report_opts_t;

/* Writes the report. Fails with one line when gnuplot cannot be found
 * (DCR_EUNSUPPORTED, before anything is written), when a file cannot be
 * read or is malformed (the readers' errors), when the refit asked for is
 * not in the trace (DCR_ENOTFOUND), or when gnuplot fails (DCR_EIO naming
 * the script and the log). */
dcr_status_t dcr_report_write(const dcr_report_opts_t *o);

/* The gnuplot executable that dcr_report_write would run (explicit, else
 * $DCR_GNUPLOT, else found on PATH), copied into buf; DCR_EUNSUPPORTED with
 * one clear line when there is none. */
dcr_status_t dcr_report_find_gnuplot(const char *explicit_path, char *buf, size_t len);

#endif
