/* dcr inventory: canonical tensors of a model and how a training layout maps onto them. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "scenario_args.h"
#include "commands.h"
#include "dcr/source.h"
#include "workloads/change/budget.h"
#include "workloads/change/scenario.h"
#include "workloads/change/scenario_report.h"
#include "workloads/serve/vllm_layout.h"

typedef struct inventory_opts {
    dcr_cli_scenario_t sc;
    int64_t serve_tp;
    bool json, list, check, serve_ep;
} inventory_opts_t;

static int run(inventory_opts_t *o)
{
    dcr_scenario_spec_t spec;
    dcr_scenario_t *sc = NULL;
    dcr_status_t s;
    bool usage = true; /* until the flags and the layout are found valid */
    DCR_CHECK_GOTO(dcr_cli_scenario_spec(&o->sc, &spec), s, fail);
    DCR_CHECK_GOTO(dcr_scenario_create(&spec, &sc), s, fail);
    if (o->list) {
        dcr_scenario_print_tensors(sc->inventory);
        dcr_scenario_destroy(sc);
        return 0;
    }
    usage = false;
    if (o->check) {
        /* The coverage check marks every shard element once (one byte each). */
        DCR_CHECK_GOTO(
            dcr_scenario_check_memory(sc, "inventory --check", &(dcr_run_shape_t){.map_bytes = 1}),
            s, fail);
        DCR_CHECK_GOTO(dcr_source_layout_check_coverage(sc->layout), s, fail);
    }
    dcr_source_stats_t st;
    dcr_source_layout_stats(sc->layout, &st);
    dcr_serve_split_t split, *with_split = NULL;
    dcr_serve_config_t serve = dcr_serve_config_default();
    if (o->serve_tp > 0) {
        /* The receivers' prewarm decides the XOR/overwrite split (shape-only probes, any model
         * size). */
        serve.tp = (int)o->serve_tp;
        serve.ep = o->serve_ep;
        usage = true;
        DCR_CHECK_GOTO(dcr_serve_config_validate(&sc->model, &serve), s, fail);
        usage = false;
        DCR_CHECK_GOTO(dcr_serve_register_loaders(), s, fail);
        DCR_CHECK_GOTO(dcr_serve_xor_split(&sc->model, sc->inventory, sc->layout, &serve, &split),
                       s, fail);
        with_split = &split;
    }
    dcr_scenario_report(sc, o->sc.scale, &st, with_split, with_split ? &serve : NULL, o->check,
                        o->json);
    dcr_scenario_destroy(sc);
    return 0;
fail:
    dcr_scenario_destroy(sc);
    return usage ? dcr_cli_check("inventory", s) : dcr_cli_fail("inventory", s);
}

int dcr_cmd_inventory(int argc, char **argv)
{
    inventory_opts_t o = {.json = false};
    dcr_cli_scenario_init(&o.sc, DCR_MODEL_DEFAULT, 1, 0);
    dcr_arg_t args[DCR_CLI_SCENARIO_NARGS + 5] = {
        {"--serve-tp", DCR_ARG_INT, &o.serve_tp, 0, 0,
         "add the XOR/overwrite split of receivers at this serving TP", false},
        {"--serve-ep", DCR_ARG_FLAG, &o.serve_ep, 0, 0, "serving instances use expert parallelism",
         false},
        {"--list", DCR_ARG_FLAG, &o.list, 0, 0, "list every canonical tensor (name, shape, dtype)",
         false},
        {"--check", DCR_ARG_FLAG, &o.check, 0, 0,
         "exact coverage check, one byte per element (scaled models)", false},
        {"--json", DCR_ARG_FLAG, &o.json, 0, 0, "print one JSON object", false},
    };
    dcr_cli_scenario_args(&o.sc, args + 5);
    int rc = dcr_args_parse("inventory",
                            "[--model NAME] [--scale S] [--layers N] [layout flags] [--mapping "
                            "paper|extended] [--json]",
                            args, (int)(sizeof(args) / sizeof(args[0])), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    return run(&o);
}
