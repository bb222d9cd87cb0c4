/* dcr table2: the seed's Table 2, XOR vs overwrite value streams after zstd. */
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "workloads/harness/table2.h"

int dcr_cmd_table2(int argc, char **argv)
{
    dcr_table2_params_t params;
    dcr_table2_params_default(&params);
    int64_t n = (int64_t)params.n, level = params.level;
    bool json = false;
    dcr_arg_t args[] = {
        {"--n", DCR_ARG_INT, &n, 1, (double)DCR_TABLE2_N_MAX, "values to draw (default 20000000)",
         false},
        {"--level", DCR_ARG_INT, &level, -7, 22, "zstd level (default 1)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object instead of the table", false},
    };
    int rc = dcr_args_parse("table2", "[--n N] [--level L] [--json]", args,
                            (int)(sizeof args / sizeof args[0]), argc, argv, NULL, 0, NULL);
    if (rc == 1) return 0;
    if (rc != 0) return 2;
    params.n = (uint64_t)n;
    params.level = (int)level;
    params.progress = true;
    dcr_table2_result_t res;
    dcr_status_t st = dcr_table2_run(&params, &res);
    if (st != DCR_OK) return dcr_cli_fail("table2", st);
    st = dcr_table2_print(&res, json);
    return st == DCR_OK ? 0 : dcr_cli_fail("table2", st);
}
