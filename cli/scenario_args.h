/* The model and training-layout flags shared by every command that builds a
 * scenario (--model --scale --layers --train-nodes --gpus-per-node --tp
 * --etp --ep --pp --dp --mapping --fp8-layers) and the memory budget
 * (--max-memory), so they parse and read the same everywhere. */
#ifndef DCR_CLI_SCENARIO_ARGS_H
#define DCR_CLI_SCENARIO_ARGS_H

#include "args.h"
#include "workloads/scenario.h"

typedef struct dcr_cli_scenario {
    const char *model, *mapping;
    const char *max_memory; /* --max-memory SIZE; NULL: the default share */
    int64_t scale, layers, nodes, gpus, tp, etp, ep, pp, dp, fp8_layers;
} dcr_cli_scenario_t;

#define DCR_CLI_SCENARIO_NARGS 13

/* Defaults: the given model and scale, one rank, paper mapping. */
void dcr_cli_scenario_init(dcr_cli_scenario_t *o, const char *model, int64_t scale, int64_t layers);
/* Writes the DCR_CLI_SCENARIO_NARGS flag entries into args. */
void dcr_cli_scenario_args(dcr_cli_scenario_t *o, dcr_arg_t *args);
/* Turns parsed flags into a spec (fails on an unknown mapping or a malformed
 * --max-memory). */
dcr_status_t dcr_cli_scenario_spec(const dcr_cli_scenario_t *o, dcr_scenario_spec_t *out_p);

#endif
