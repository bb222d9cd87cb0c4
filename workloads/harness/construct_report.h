/* What dcr construct prints for a construction bench (construct_bench.h):
 * per mode, the construction time, the changes found and the payload bytes
 * against the raw changed values, as a table or one JSON object. */
#ifndef DCR_WORKLOADS_CONSTRUCT_REPORT_H
#define DCR_WORKLOADS_CONSTRUCT_REPORT_H

#include <stdbool.h>

#include "workloads/harness/construct_bench.h"

/* The results res[0..n) of modes[0..n) of bench b on stdout: one JSON
 * object (json; one mode's figures at the top level, several under
 * "modes") or a table. model and changes: as given (--model, --changes). */
void dcr_construct_bench_report(const dcr_construct_bench_t *b, const char *model,
                                const char *changes, const dcr_construct_mode_t *modes, int n,
                                const dcr_construct_bench_result_t *res, bool json);

#endif
