/* What dcr construct prints (construct_report.h). */
#include "workloads/harness/construct_report.h"

#include <jansson.h>
#include <stdio.h>

static json_t *stats_json(const dcr_construct_bench_result_t *r, const dcr_construct_stats_t *s,
                          bool shuffle)
{
    json_t *j = json_object();
    json_object_set_new(j, "shuffle", json_boolean(shuffle));
    json_object_set_new(j, "construction_s", json_real(s->construction_s));
    json_object_set_new(j, "compared_elements", json_integer(s->compared_elements));
    json_object_set_new(j, "changed_elements", json_integer(s->changed_elements));
    json_object_set_new(j, "records", json_integer(s->records));
    json_object_set_new(j, "raw_changed_value_bytes", json_integer(s->raw_changed_value_bytes));
    json_object_set_new(j, "payload_bytes", json_integer(s->payload_bytes));
    json_object_set_new(j, "body_raw_bytes", json_integer(s->body_raw_bytes));
    json_object_set_new(j, "value_bytes", json_integer(s->value_bytes));
    json_object_set_new(j, "payloads", json_integer(s->payloads));
    json_object_set_new(j, "xor_items", json_integer(s->xor_items));
    json_object_set_new(j, "overwrite_items", json_integer(s->overwrite_items));
    json_object_set_new(j, "residual_tensors", json_integer(s->residual_tensors));
    json_object_set_new(j, "baseline_bytes", json_integer((json_int_t)r->baseline_bytes));
    json_object_set_new(
        j, "payload_to_raw_ratio",
        json_real(s->raw_changed_value_bytes
                      ? (double)s->payload_bytes / (double)s->raw_changed_value_bytes
                      : 0.0));
    return j;
}

/* A mode's figures, with those of the opposite shuffle setting nested when
 * they were measured. */
static json_t *mode_json(const dcr_construct_bench_t *b, const dcr_construct_bench_result_t *r)
{
    json_t *j = stats_json(r, &r->stats, b->cfg.shuffle);
    if (b->compare_shuffle)
        json_object_set_new(j, "opposite_shuffle", stats_json(r, &r->stats_other, !b->cfg.shuffle));
    return j;
}

static void print_json(const dcr_construct_bench_t *b, const char *model, const char *changes,
                       const dcr_construct_mode_t *modes, int n,
                       const dcr_construct_bench_result_t *res)
{
    json_t *j = n == 1 ? mode_json(b, &res[0]) : json_object();
    json_object_set_new(j, "model", json_string(model));
    json_object_set_new(j, "checkpoint_bytes", json_integer(res[0].checkpoint_bytes));
    json_object_set_new(j, "change_rate", json_real(b->change_rate));
    json_object_set_new(j, "changes", json_string(changes));
    json_object_set_new(j, "injected_elements", json_integer(res[0].injected_elements));
    json_object_set_new(j, "rounds", json_integer(b->rounds));
    if (n == 1) {
        json_object_set_new(j, "mode", json_string(dcr_construct_mode_name(modes[0])));
    } else {
        json_t *m = json_object();
        for (int i = 0; i < n; i++)
            json_object_set_new(m, dcr_construct_mode_name(modes[i]), mode_json(b, &res[i]));
        json_object_set_new(j, "modes", m);
    }
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

static void print_row(dcr_construct_mode_t mode, const dcr_construct_stats_t *s, bool shuffle)
{
    printf("%-4s %7s %12.3f %12lld %14lld %14lld %12lld %9lld %9lld %10lld %8.3f\n",
           dcr_construct_mode_name(mode), shuffle ? "on" : "off", s->construction_s,
           (long long)s->changed_elements, (long long)s->raw_changed_value_bytes,
           (long long)s->payload_bytes, (long long)s->body_raw_bytes, (long long)s->payloads,
           (long long)s->xor_items, (long long)s->overwrite_items,
           s->raw_changed_value_bytes
               ? (double)s->payload_bytes / (double)s->raw_changed_value_bytes
               : 0.0);
}

static void print_text(const dcr_construct_bench_t *b, const dcr_construct_mode_t *modes, int n,
                       const dcr_construct_bench_result_t *res)
{
    printf(
        "checkpoint %lld bytes, change rate %.4g, %lld source elements changed, best of %lld\n\n",
        (long long)res[0].checkpoint_bytes, b->change_rate, (long long)res[0].injected_elements,
        (long long)b->rounds);
    printf("%-4s %7s %12s %12s %14s %14s %12s %9s %9s %10s %8s\n", "mode", "shuffle", "construct_s",
           "changed", "raw_values_B", "payload_B", "body_raw_B", "payloads", "xor_items",
           "ovw_items", "pay/raw");
    for (int i = 0; i < n; i++) {
        print_row(modes[i], &res[i].stats, b->cfg.shuffle);
        if (b->compare_shuffle) print_row(modes[i], &res[i].stats_other, !b->cfg.shuffle);
    }
}

void dcr_construct_bench_report(const dcr_construct_bench_t *b, const char *model,
                                const char *changes, const dcr_construct_mode_t *modes, int n,
                                const dcr_construct_bench_result_t *res, bool json)
{
    if (json)
        print_json(b, model, changes, modes, n, res);
    else
        print_text(b, modes, n, res);
}
