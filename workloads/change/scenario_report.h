/* What dcr inventory prints for a scenario (scenario.h): the model's
 * canonical tensors, the training layout and its source (shards, tasks,
 * affine and residual parts, owned elements), and with a serving layout its
 * XOR/overwrite split; as a table or one JSON object on stdout. */
#ifndef DCR_WORKLOADS_SCENARIO_REPORT_H
#define DCR_WORKLOADS_SCENARIO_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/source.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

/* One line per canonical tensor: name (escaped), shape, dtype. */
void dcr_scenario_print_tensors(const dcr_inventory_t *inv);

/* The scenario sc (built at --scale `scale`) with its source statistics st;
 * split: the XOR/overwrite split under the serving layout serve (both NULL:
 * none); coverage: the text says the coverage check passed. */
void dcr_scenario_report(const dcr_scenario_t *sc, int64_t scale, const dcr_source_stats_t *st,
                         const dcr_serve_split_t *split, const dcr_serve_config_t *serve,
                         bool coverage, bool json);

#endif
