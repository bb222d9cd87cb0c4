#include "scenario_args.h"

#include "workloads/budget.h"

void dcr_cli_scenario_init(dcr_cli_scenario_t *o, const char *model, int64_t scale, int64_t layers)
{
    *o = (dcr_cli_scenario_t){model, "paper", NULL, scale, layers, 1, 1, 1, 1, 1, 1, 0, 0};
}

void dcr_cli_scenario_args(dcr_cli_scenario_t *o, dcr_arg_t *args)
{
    const dcr_arg_t table[DCR_CLI_SCENARIO_NARGS] = {
        {"--model", DCR_ARG_STRING, &o->model, 0, 0, "built-in model name or path of a config JSON",
         false},
        {"--scale", DCR_ARG_INT, &o->scale, 1, 4096,
         "divide hidden, intermediate, head_dim and vocab by S", false},
        {"--layers", DCR_ARG_INT, &o->layers, 1, 100000, "keep the first N layers", false},
        {"--train-nodes", DCR_ARG_INT, &o->nodes, 1, 100000, "training nodes (default 1)", false},
        {"--gpus-per-node", DCR_ARG_INT, &o->gpus, 1, 1024, "training GPUs per node (default 1)",
         false},
        {"--tp", DCR_ARG_INT, &o->tp, 1, 1024, "training tensor parallel degree", false},
        {"--etp", DCR_ARG_INT, &o->etp, 1, 1024, "training expert tensor parallel degree", false},
        {"--ep", DCR_ARG_INT, &o->ep, 1, 1024, "training expert parallel degree", false},
        {"--pp", DCR_ARG_INT, &o->pp, 1, 1024, "training pipeline parallel degree", false},
        {"--dp", DCR_ARG_INT, &o->dp, 1, 1000000, "data parallel degree (default: ranks / (tp*pp))",
         false},
        {"--mapping", DCR_ARG_STRING, &o->mapping, 0, 0,
         "paper | extended mapping classes (default paper)", false},
        {"--fp8-layers", DCR_ARG_INT, &o->fp8_layers, 0, 100000,
         "export o_proj of the first N layers FP8 block-quantized", false},
        {"--max-memory", DCR_ARG_STRING, &o->max_memory, 0, 0,
         "memory budget, e.g. 8G (default: 50% of physical memory); larger runs are refused",
         false},
    };
    for (int i = 0; i < DCR_CLI_SCENARIO_NARGS; i++) args[i] = table[i];
}

dcr_status_t dcr_cli_scenario_spec(const dcr_cli_scenario_t *o, dcr_scenario_spec_t *out_p)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    DCR_CHECK(dcr_mapping_parse(o->mapping, &spec.mapping));
    spec.model = o->model;
    spec.scale = (int)o->scale;
    spec.layers = (int)o->layers;
    spec.fp8_layers = (int)o->fp8_layers;
    if (o->max_memory) DCR_CHECK(dcr_size_parse("--max-memory", o->max_memory, &spec.max_memory));
    spec.train = (dcr_train_config_t){(int)o->nodes, (int)o->gpus, (int)o->tp, (int)o->etp,
                                      (int)o->ep,    (int)o->pp,   (int)o->dp};
    *out_p = spec;
    return DCR_OK;
}
