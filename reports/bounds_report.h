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

#endif
