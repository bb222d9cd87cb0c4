/* What dcr microbench prints for each bench (microbench.h, serve_bench.h):
 * a table on stdout, or one JSON object with its rows. The command measures
 * every rate and calls these; the names of the figures are written here. */
#ifndef DCR_WORKLOADS_MICROBENCH_REPORT_H
#define DCR_WORKLOADS_MICROBENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "workloads/harness/microbench.h"
#include "workloads/serve/serve_bench.h"

/* Change detection against a plain read, one row per rate, of two buffers
 * of `bytes` each (and the vector kernel that ran). */
void dcr_microbench_detect_report(const dcr_detect_bench_t *rows, int n, size_t bytes, bool json);
/* The same on a device (`place`: its backend's name) against a
 * device-to-device copy. */
void dcr_microbench_device_detect_report(const char *place, const dcr_device_detect_bench_t *rows,
                                         int n, size_t bytes, bool json);
/* Record application on a device against a dense host-to-device reload of
 * `bytes` resident, best of `repeats`. */
void dcr_microbench_device_apply_report(const char *place, const dcr_device_apply_bench_t *rows,
                                        int n, size_t bytes, int repeats, bool json);
/* A receiver's apply against a dense reload through its loader, with the
 * seed's full pass and the memory floor, best of `repeats`. */
void dcr_microbench_apply_report(const dcr_serve_bench_result_t *rows, int n, int repeats,
                                 bool json);

#endif
