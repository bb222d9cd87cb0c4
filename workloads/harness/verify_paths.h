/* `dcr verify-paths`: random deltas through every loader path of a serving
 * layout, each checked bit for bit against a dense refit. Owners construct
 * the deltas (random change rates and positions, plus signed zeros, NaN
 * payloads, infinities and subnormals), payloads are handed over in memory,
 * every receiver applies them, and every receiver is compared with a fresh
 * dense load of the new canonical tensors. */
#ifndef DCR_WORKLOADS_VERIFY_PATHS_H
#define DCR_WORKLOADS_VERIFY_PATHS_H

#include <stdbool.h>
#include <stdint.h>

#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

/* Path classes reported: how the receivers' prewarm classified the canonical
 * tensor of an applied item. Overwrite paths are split by what made them
 * overwrite-only: a cast, an elementwise transform, or anything else (cats,
 * overlapping copies). */
typedef enum dcr_verify_path {
    DCR_VERIFY_XOR = 0,
    DCR_VERIFY_OVERWRITE,
    DCR_VERIFY_CAST,
    DCR_VERIFY_TRANSFORM,
    DCR_VERIFY_SKIPPED,
    DCR_VERIFY_PATH_COUNT
} dcr_verify_path_t;

const char *dcr_verify_path_name(dcr_verify_path_t p);

typedef struct dcr_verify_result {
    int64_t cases;      /* trials x receivers checked */
    int64_t items;      /* items applied (per receiver) */
    int64_t mismatches; /* receivers that differed from their dense refit */
    int64_t items_by_path[DCR_VERIFY_PATH_COUNT];
    /* A mismatching receiver counts against every path class applied to it
     * in that trial (a deliberate over-count: it never hides a class); the
     * log names the differing parameter and element. */
    int64_t mismatches_by_path[DCR_VERIFY_PATH_COUNT];
} dcr_verify_result_t;

dcr_status_t dcr_verify_paths(const dcr_scenario_spec_t *spec, const dcr_serve_config_t *serve,
                              int trials, uint64_t seed, dcr_verify_result_t *out_p);

/* What dcr verify-paths prints: the checks, items and mismatches, in total
 * and by path class, as one JSON object (json) or a table on stdout. */
void dcr_verify_result_print(const dcr_verify_result_t *r, bool json);

#endif
