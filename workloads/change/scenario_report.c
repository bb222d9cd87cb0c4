/* What dcr inventory prints (scenario_report.h). */
#include "workloads/change/scenario_report.h"

#include <jansson.h>
#include <stdio.h>

#include "workloads/train/megatron.h"

void dcr_scenario_print_tensors(const dcr_inventory_t *inv)
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

static void print_json(const dcr_serve_config_t *serve, int64_t scale, const dcr_model_config_t *m,
                       const dcr_inventory_t *inv, const dcr_train_config_t *tc,
                       const dcr_source_layout_t *layout, const dcr_source_stats_t *st,
                       const dcr_serve_split_t *split, const char *mapping)
{
    json_t *j = json_object();
    if (split) {
        json_object_set_new(j, "serve_tp", json_integer(serve->tp));
        json_object_set_new(j, "serve_ep", json_boolean(serve->ep));
        json_object_set_new(j, "xor_items", json_integer(split->xor_items));
        json_object_set_new(j, "overwrite_items", json_integer(split->overwrite_items));
        json_object_set_new(j, "xor_byte_share", json_real(split->xor_byte_share));
    }
    json_object_set_new(j, "model", json_string(m->name));
    json_object_set_new(j, "family", json_string(dcr_model_family_name(m->family)));
    json_object_set_new(j, "scale", json_integer(scale));
    json_object_set_new(j, "layers", json_integer(m->layers));
    json_object_set_new(j, "tensors", json_integer((json_int_t)dcr_inventory_count(inv)));
    json_object_set_new(j, "params", json_integer(dcr_inventory_params(inv)));
    json_object_set_new(j, "bytes", json_integer(dcr_inventory_bytes(inv)));
    json_object_set_new(j, "mapping", json_string(mapping));
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

static void print_text(const dcr_serve_config_t *serve, int64_t scale, const dcr_model_config_t *m,
                       const dcr_inventory_t *inv, const dcr_train_config_t *tc,
                       const dcr_source_layout_t *layout, const dcr_source_stats_t *st,
                       const dcr_serve_split_t *split, const char *mapping)
{
    char name[4 * sizeof(m->name)];
    printf("model            %s (%s), scale %lld, %d layers\n",
           dcr_escape(name, sizeof(name), m->name), dcr_model_family_name(m->family),
           (long long)scale, m->layers);
    printf("canonical        %zu tensors, %lld params, %lld bytes\n", dcr_inventory_count(inv),
           (long long)dcr_inventory_params(inv), (long long)dcr_inventory_bytes(inv));
    printf("training layout  %d nodes x %d GPUs: tp %d, etp %d, ep %d, pp %d, dp %d; mapping %s\n",
           tc->nodes, tc->gpus_per_node, tc->tp, tc->etp, tc->ep, tc->pp, tc->dp, mapping);
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
               (long long)serve->tp, serve->ep ? " with EP" : "", (long long)split->xor_items,
               (long long)split->overwrite_items, 100.0 * split->xor_byte_share);
}

void dcr_scenario_report(const dcr_scenario_t *sc, int64_t scale, const dcr_source_stats_t *st,
                         const dcr_serve_split_t *split, const dcr_serve_config_t *serve,
                         bool coverage, bool json)
{
    const char *mapping = dcr_mapping_name(sc->mapping);
    if (json) {
        print_json(serve, scale, &sc->model, sc->inventory, &sc->train, sc->layout, st, split,
                   mapping);
        return;
    }
    print_text(serve, scale, &sc->model, sc->inventory, &sc->train, sc->layout, st, split, mapping);
    if (coverage) printf("coverage         every canonical element produced by exactly one task\n");
}
