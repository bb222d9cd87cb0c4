/* dcr verify-paths: random deltas through every loader path, checked against dense refits. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "workloads/harness/verify_paths.h"

int dcr_cmd_verify_paths(int argc, char **argv)
{
    dcr_cli_scenario_t sc;
    int64_t serve_tp = 1, trials = 4, seed = 42;
    bool serve_ep = false, json = false, fp32_norms = false, w2_t = false;
    dcr_cli_scenario_init(&sc, DCR_MODEL_DEFAULT, 32, 2);
    sc.etp = 0; /* auto: TP for models with experts */
    /* The command's own flags; the shared ones follow them in args. */
    const dcr_arg_t own[] = {
        {"--serve-tp", DCR_ARG_INT, &serve_tp, 1, 64, "serving tensor parallel degree (default 1)",
         false},
        {"--serve-ep", DCR_ARG_FLAG, &serve_ep, 0, 0, "expert parallel inside the serving instance",
         false},
        {"--fp32-norms", DCR_ARG_FLAG, &fp32_norms, 0, 0,
         "serving variant: norms kept in FP32 (cast path)", false},
        {"--w2-transposed", DCR_ARG_FLAG, &w2_t, 0, 0, "serving variant: transposed FusedMoE w2",
         false},
        {"--trials", DCR_ARG_INT, &trials, 1, 100000,
         "random deltas to try (default 4; odd ones are overwrite retries)", false},
        {"--seed", DCR_ARG_INT, &seed, 0, 1e15, "seed (default 42)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object", false},
    };
    enum { NOWN = sizeof own / sizeof own[0] };
    dcr_arg_t args[NOWN + DCR_CLI_SCENARIO_NARGS];
    memcpy(args, own, sizeof own);
    dcr_cli_scenario_args(&sc, args + NOWN);
    int rc = dcr_args_parse("verify-paths",
                            "[--model M --scale S --layers N] [layout flags] [--serve-tp T] "
                            "[--serve-ep] [--trials K] [--json]",
                            args, NOWN + DCR_CLI_SCENARIO_NARGS, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    dcr_scenario_spec_t spec;
    dcr_serve_config_t serve = dcr_serve_config_default();
    serve.tp = (int)serve_tp;
    serve.ep = serve_ep;
    serve.fp32_norms = fp32_norms;
    serve.w2_transposed = w2_t;
    dcr_verify_result_t r;
    dcr_status_t st = dcr_cli_scenario_spec(&sc, &spec);
    if (st == DCR_OK) st = dcr_cli_scenario_validate(&spec, &serve);
    if (st != DCR_OK) return dcr_cli_check("verify-paths", st);
    st = dcr_verify_paths(&spec, &serve, (int)trials, (uint64_t)seed, &r);
    if (st != DCR_OK) return dcr_cli_fail("verify-paths", st);
    dcr_verify_result_print(&r, json);
    return r.mismatches ? 1 : 0;
}
