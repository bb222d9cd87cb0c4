/* dcr bounds: the seed's lower bounds, finalization and latency of every
 * refit of a recorded trace (dcr/trace.h), and their means, as a table or
 * one JSON object on stdout. */
#ifndef DCR_REPORTS_BOUNDS_REPORT_H
#define DCR_REPORTS_BOUNDS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/trace.h"

typedef struct dcr_bounds_run {
    uint32_t *refits; /* the refits with a window, n of them */
    dcr_bounds_t *b;  /* their bounds */
    size_t n;
    dcr_bounds_t mean;
} dcr_bounds_run_t;

/* Bounds of every refit that has a window in the trace iv[0..n) read from
 * path (sorts iv by start). A trace that cannot be a recording (a stage
 * outside every refit window, a window stretched to the end of time) is
 * refused, not bounded; no window at all is DCR_ENOTFOUND. Free *r with
 * dcr_bounds_run_free (also after an error). */
dcr_status_t dcr_bounds_run_compute(const char *path, dcr_trace_interval_t *iv, size_t n,
                                    dcr_bounds_run_t *r);

/* The table or JSON object of dcr bounds; source: "chrome" or "nsys". */
void dcr_bounds_run_print(const char *path, const char *source, const dcr_bounds_run_t *r,
                          bool json);

void dcr_bounds_run_free(dcr_bounds_run_t *r);

/* One kind of segment on the refits' critical paths (dcr_critical_path),
 * summed per refit and averaged over the refits: "apply receiver" (work) or
 * "wait commit coord -> baseline owner" (a hand-off). */
typedef struct dcr_path_row {
    char label[96];
    bool wait;
    double mean_s;   /* mean over the refits of the segments' summed length */
    double share;    /* mean_s over the mean window */
    double segments; /* mean number of segments per refit */
} dcr_path_row_t;

typedef struct dcr_path_report {
    dcr_path_row_t *rows; /* largest mean_s first */
    size_t n;
    double window_s; /* mean t1 - t0 over the refits (what the rows sum to) */
    double wait_s;   /* the rows that are waits, summed */
} dcr_path_report_t;

/* The critical-path rows of every refit of r, from the trace iv[0..n) that
 * r was computed from. Free with dcr_path_report_free (also after an
 * error). */
dcr_status_t dcr_path_report_compute(const dcr_trace_interval_t *iv, size_t n,
                                     const dcr_bounds_run_t *r, dcr_path_report_t *out);

/* The table (after dcr bounds' own) or, with json, adds "critical_path" to
 * the object dcr_bounds_run_print would print: prints the whole object. */
void dcr_bounds_run_print_path(const char *path, const char *source, const dcr_bounds_run_t *r,
                               const dcr_path_report_t *p, bool json);

void dcr_path_report_free(dcr_path_report_t *p);

#endif
