/* What dcr diff prints (ckpt_diff_report.h). */
#include "workloads/change/ckpt_diff_report.h"

#include <jansson.h>
#include <stdio.h>

#include "workloads/train/megatron.h"

/* The figures of one class (or the whole checkpoint) under the documented keys. */
static json_t *figures_json(const dcr_diff_figures_t *f)
{
    json_t *j = json_object();
    json_object_set_new(j, "tensors", json_integer(f->tensors));
    json_object_set_new(j, "changed_tensors", json_integer(f->changed_tensors));
    json_object_set_new(j, "elements", json_integer(f->elements));
    json_object_set_new(j, "changed_elements", json_integer(f->changed_elements));
    json_object_set_new(j, "change_rate", json_real(dcr_diff_change_rate(f)));
    json_object_set_new(j, "changed_bytes", json_integer(f->changed_bytes));
    json_object_set_new(j, "rows", json_integer(f->rows));
    json_object_set_new(j, "changed_rows", json_integer(f->changed_rows));
    json_object_set_new(j, "changed_row_share",
                        json_real(f->rows ? (double)f->changed_rows / (double)f->rows : 0.0));
    json_object_set_new(j, "runs", json_integer(f->runs));
    json_object_set_new(j, "mean_run_length",
                        json_real(f->runs ? (double)f->changed_elements / (double)f->runs : 0.0));
    json_object_set_new(j, "experts", json_integer(f->experts));
    json_object_set_new(j, "experts_touched", json_integer(f->experts_touched));
    json_object_set_new(
        j, "expert_share",
        json_real(f->experts ? (double)f->experts_touched / (double)f->experts : 0.0));
    json_object_set_new(j, "records", json_integer(f->records));
    json_object_set_new(j, "raw_changed_value_bytes", json_integer(f->raw_changed_value_bytes));
    json_object_set_new(j, "payload_bytes", json_integer(f->payload_bytes_x));
    json_object_set_new(j, "payload_bytes_x", json_integer(f->payload_bytes_x));
    json_object_set_new(j, "payload_bytes_p", json_integer(f->payload_bytes_p));
    json_object_set_new(j, "payloads_x", json_integer(f->payloads_x));
    json_object_set_new(j, "payloads_p", json_integer(f->payloads_p));
    json_object_set_new(j, "payload_to_raw_ratio", json_real(dcr_diff_payload_ratio(f)));
    json_object_set_new(
        j, "payload_to_raw_ratio_p",
        json_real(f->raw_changed_value_bytes
                      ? (double)f->payload_bytes_p / (double)f->raw_changed_value_bytes
                      : 0.0));
    return j;
}

static void print_json(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                       bool class_payloads, const dcr_diff_result_t *r)
{
    json_t *j = figures_json(&r->total);
    json_object_set_new(j, "model", json_string(sc->model.name));
    json_object_set_new(j, "old", json_string(old_path));
    json_object_set_new(j, "new", json_string(new_path));
    json_object_set_new(j, "mapping", json_string(dcr_mapping_name(sc->mapping)));
    json_object_set_new(j, "tp", json_integer(sc->train.tp));
    json_object_set_new(j, "etp", json_integer(sc->train.etp));
    json_object_set_new(j, "ep", json_integer(sc->train.ep));
    json_object_set_new(j, "pp", json_integer(sc->train.pp));
    json_object_set_new(j, "extra_tensors", json_integer((json_int_t)r->extra_tensors));
    json_object_set_new(j, "class_payloads", json_boolean(class_payloads));
    json_object_set_new(j, "entropy_position_bytes", json_real(r->entropy_position_bits / 8.0));
    json_object_set_new(j, "entropy_value_bytes", json_real(r->entropy_value_bits / 8.0));
    json_object_set_new(j, "entropy_bound_bytes", json_real(dcr_diff_entropy_bound_bytes(r)));
    json_object_set_new(j, "payload_to_bound_ratio", json_real(dcr_diff_payload_to_bound(r)));
    json_t *classes = json_object();
    for (int k = 0; k < DCR_CLASS_COUNT; k++) {
        if (r->classes[k].tensors == 0) continue;
        json_object_set_new(classes, dcr_tensor_class_name(k), figures_json(&r->classes[k]));
    }
    json_object_set_new(j, "classes", classes);
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

static void print_row(const char *name, const dcr_diff_figures_t *f)
{
    char experts[32] = "-";
    if (f->experts)
        snprintf(experts, sizeof(experts), "%lld/%lld", (long long)f->experts_touched,
                 (long long)f->experts);
    printf("%-10s %7lld %13lld %12lld %8.4f%% %12lld %11lld/%-9lld %8.2f %11s %12lld %12lld %12lld "
           "%7.3f\n",
           name, (long long)f->tensors, (long long)f->elements, (long long)f->changed_elements,
           100.0 * dcr_diff_change_rate(f), (long long)f->changed_bytes, (long long)f->changed_rows,
           (long long)f->rows, f->runs ? (double)f->changed_elements / (double)f->runs : 0.0,
           experts, (long long)f->records, (long long)f->payload_bytes_x,
           (long long)f->payload_bytes_p, dcr_diff_payload_ratio(f));
}

static void print_text(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                       bool class_payloads, const dcr_diff_result_t *r)
{
    printf("model %s, %s mapping, tp %d etp %d ep %d pp %d; %s -> %s", sc->model.name,
           dcr_mapping_name(sc->mapping), sc->train.tp, sc->train.etp, sc->train.ep, sc->train.pp,
           old_path, new_path);
    if (r->extra_tensors) printf(" (%zu tensors not in the model ignored)", r->extra_tensors);
    printf("\n%s\n\n", !class_payloads ? "per-class records and payloads not measured"
                                       : "per-class payloads: each class constructed alone");
    printf("%-10s %7s %13s %12s %9s %12s %21s %8s %11s %12s %12s %12s %7s\n", "class", "tensors",
           "elements", "changed", "rate", "changed_B", "changed_rows/rows", "mean_run", "experts",
           "records", "payload_X_B", "payload_P_B", "X/raw");
    for (int k = 0; k < DCR_CLASS_COUNT; k++)
        if (r->classes[k].tensors) print_row(dcr_tensor_class_name(k), &r->classes[k]);
    print_row("total", &r->total);
    printf("\nentropy bound %.0f B (positions %.0f B, values %.0f B); payload X / bound %.3f\n",
           dcr_diff_entropy_bound_bytes(r), r->entropy_position_bits / 8.0,
           r->entropy_value_bits / 8.0, dcr_diff_payload_to_bound(r));
}

void dcr_diff_result_print(const dcr_scenario_t *sc, const char *old_path, const char *new_path,
                           bool class_payloads, const dcr_diff_result_t *r, bool json)
{
    if (json)
        print_json(sc, old_path, new_path, class_payloads, r);
    else
        print_text(sc, old_path, new_path, class_payloads, r);
}
