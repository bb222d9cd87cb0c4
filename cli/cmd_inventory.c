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
#include "workloads/serve/vllm_layout.h"

typedef struct inventory_opts {
    dcr_cli_scenario_t sc;
    int64_t serve_tp;
    bool json, list, check, serve_ep;
} inventory_opts_t;

static void print_tensors(const dcr_inventory_t *inv)
{
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        char shape[128], name[1024];
        dcr_shape_format(d->ndim, d->shape, shape, sizeof(shape));
        /* Names come from a user's config: printed escaped. */
        printf("%-72s %-20s %s\n", dcr_escape(name, sizeof(name), d->name), shape,
               dcr_dtype_name(d->dtype));
    }
}

static void print_json(const inventory_opts_t *o, const dcr_model_config_t *m,
                       const dcr_inventory_t *inv, const dcr_train_config_t *tc,
                       const dcr_source_layout_t *layout, const dcr_source_stats_t *st,
                       const dcr_serve_split_t *split)
{
    json_t *j = json_object();
    if (split) {
        json_object_set_new(j, "serve_tp", json_integer(o->serve_tp));
        json_object_set_new(j, "serve_ep", json_boolean(o->serve_ep));
        json_object_set_new(j, "xor_items", json_integer(split->xor_items));
        json_object_set_new(j, "overwrite_items", json_integer(split->overwrite_items));
        json_object_set_new(j, "xor_byte_share", json_real(split->xor_byte_share));
    }
    json_object_set_new(j, "model", json_string(m->name));
    json_object_set_new(j, "family", json_string(dcr_model_family_name(m->family)));
    json_object_set_new(j, "scale", json_integer(o->sc.scale));
    json_object_set_new(j, "layers", json_integer(m->layers));
    json_object_set_new(j, "tensors", json_integer((json_int_t)dcr_inventory_count(inv)));
    json_object_set_new(j, "params", json_integer(dcr_inventory_params(inv)));
    json_object_set_new(j, "bytes", json_integer(dcr_inventory_bytes(inv)));
    json_object_set_new(j, "mapping", json_string(o->sc.mapping));
    json_object_set_new(j, "train_nodes", json_integer(tc->nodes));
    json_object_set_new(j, "gpus_per_node", json_integer(tc->gpus_per_node));
    json_object_set_new(j, "tp", json_integer(tc->tp));
    json_object_set_new(j, "etp", json_integer(tc->etp));
    json_object_set_new(j, "ep", json_integer(tc->ep));
    json_object_set_new(j, "pp", json_integer(tc->pp));
    json_object_set_new(j, "dp", json_integer(tc->dp));
    json_object_set_new(j, "shards", json_integer(layout->nshards));
    json_object_set_new(j, "tasks", json_integer(layout->ntasks));
    json_object_set_new(j, "affine_tensors", json_integer(st->affine_tensors));
    json_object_set_new(j, "residual_tensors", json_integer(st->residual_tensors));
    json_object_set_new(j, "affine_items", json_integer(st->affine_items));
    json_object_set_new(j, "residual_items", json_integer(st->residual_items));
    json_object_set_new(j, "affine_byte_share", json_real(st->affine_byte_share));
    json_object_set_new(j, "owned_elements_min", json_integer(st->owned_elements_min));
    json_object_set_new(j, "owned_elements_max", json_integer(st->owned_elements_max));
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

static void print_text(const inventory_opts_t *o, const dcr_model_config_t *m,
                       const dcr_inventory_t *inv, const dcr_train_config_t *tc,
                       const dcr_source_layout_t *layout, const dcr_source_stats_t *st,
                       const dcr_serve_split_t *split)
{
    char name[4 * sizeof(m->name)];
    printf("model            %s (%s), scale %lld, %d layers\n",
           dcr_escape(name, sizeof(name), m->name), dcr_model_family_name(m->family),
           (long long)o->sc.scale, m->layers);
    printf("canonical        %zu tensors, %lld params, %lld bytes\n", dcr_inventory_count(inv),
           (long long)dcr_inventory_params(inv), (long long)dcr_inventory_bytes(inv));
    printf("training layout  %d nodes x %d GPUs: tp %d, etp %d, ep %d, pp %d, dp %d; mapping %s\n",
           tc->nodes, tc->gpus_per_node, tc->tp, tc->etp, tc->ep, tc->pp, tc->dp, o->sc.mapping);
    printf("source           %d shards, %d tasks\n", layout->nshards, layout->ntasks);
    printf("affine           %lld tensors, %lld items, %lld bytes\n", (long long)st->affine_tensors,
           (long long)st->affine_items, (long long)st->affine_bytes);
    printf("residual         %lld tensors, %lld items, %lld bytes\n",
           (long long)st->residual_tensors, (long long)st->residual_items,
           (long long)st->residual_bytes);
    printf("affine share     %.2f%% of weight bytes\n", 100.0 * st->affine_byte_share);
    printf("owned elements   per rank min %lld, max %lld\n", (long long)st->owned_elements_min,
           (long long)st->owned_elements_max);
    if (split)
        printf("serving TP %lld%s: %lld XOR items, %lld overwrite items, XOR share %.2f%% of "
               "weight bytes\n",
               (long long)o->serve_tp, o->serve_ep ? " with EP" : "", (long long)split->xor_items,
               (long long)split->overwrite_items, 100.0 * split->xor_byte_share);
}

static int run(inventory_opts_t *o)
{
    dcr_scenario_spec_t spec;
    dcr_scenario_t *sc = NULL;
    dcr_status_t s;
    bool usage = true; /* until the flags and the layout are found valid */
    DCR_CHECK_GOTO(dcr_cli_scenario_spec(&o->sc, &spec), s, fail);
    DCR_CHECK_GOTO(dcr_scenario_create(&spec, &sc), s, fail);
    if (o->list) {
        print_tensors(sc->inventory);
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
    if (o->serve_tp > 0) {
        /* The receivers' prewarm decides the XOR/overwrite split (shape-only probes, any model
         * size). */
        dcr_serve_config_t serve = dcr_serve_config_default();
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
    if (o->json)
        print_json(o, &sc->model, sc->inventory, &sc->train, sc->layout, &st, with_split);
    else
        print_text(o, &sc->model, sc->inventory, &sc->train, sc->layout, &st, with_split);
    if (o->check && !o->json)
        printf("coverage         every canonical element produced by exactly one task\n");
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
        {"--serve-tp", DCR_ARG_INT, &o.serve_tp, 1, 1024,
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
