/* What dcr diff prints for a checkpoint diff (ckpt_diff.h): the figures of
 * every tensor class and of the whole checkpoint (changes, rows, runs,
 * experts, records, payload bytes under modes X and P), as one JSON object
 * or a table on stdout. */
#ifndef DCR_WORKLOADS_CKPT_DIFF_REPORT_H
#define DCR_WORKLOADS_CKPT_DIFF_REPORT_H

#include <stdbool.h>

#include "workloads/change/ckpt_diff.h"

/* r of OLD old_path against NEW new_path on the layout of sc; class_payloads:
 * whether each class's records and payloads were measured. */
void dcr_diff_result_print(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                           bool class_payloads, const dcr_diff_result_t *r, bool json);

#endif
