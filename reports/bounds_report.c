/* A trace's per-refit bounds and what dcr bounds prints (bounds_report.h). */
#include "reports/bounds_report.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* Adds the figures of b to the JSON object j and returns j. */
static json_t *bounds_json(json_t *j, const dcr_bounds_t *b, bool with_ids)
{
    json_object_set_new(j, "construction_lb_s", json_real(b->construction_lb_s));
    json_object_set_new(j, "transport_lb_s", json_real(b->transport_lb_s));
    json_object_set_new(j, "finalization_s", json_real(b->finalization_s));
    json_object_set_new(j, "latency_s", json_real(b->latency_s));
    json_object_set_new(j, "remainder_s", json_real(b->remainder_s));
    if (with_ids) {
        json_object_set_new(j, "busiest_owner", json_integer(b->busiest_owner));
        json_object_set_new(j, "busiest_endpoint", json_integer(b->busiest_endpoint));
    }
    return j;
}

static void print_json(const char *path, const char *source, const dcr_bounds_run_t *r)
{
    json_t *root = json_object(), *list = json_array();
    json_object_set_new(root, "trace", json_string(path));
    json_object_set_new(root, "source", json_string(source));
    for (size_t i = 0; i < r->n; i++) {
        json_t *j = json_object();
        json_object_set_new(j, "refit", json_integer(r->refits[i]));
        json_array_append_new(list, bounds_json(j, &r->b[i], true));
    }
    json_object_set_new(root, "refits", list);
    json_object_set_new(root, "means", bounds_json(json_object(), &r->mean, false));
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    printf("\n");
    json_decref(root);
}

static void print_row(const char *label, const dcr_bounds_t *b, bool with_ids)
{
    printf("%-8s %10.6f %17.6f %14.6f %14.6f %11.6f", label, b->latency_s, b->construction_lb_s,
           b->transport_lb_s, b->finalization_s, b->remainder_s);
    if (with_ids) printf(" %13d %16d", b->busiest_owner, b->busiest_endpoint);
    printf("\n");
}

static void print_text(const char *path, const char *source, const dcr_bounds_run_t *r)
{
    printf("%s (%s): %zu refit%s\n\n", path, source, r->n, r->n == 1 ? "" : "s");
    printf("%-8s %10s %17s %14s %14s %11s %13s %16s\n", "refit", "latency_s", "construction_lb_s",
           "transport_lb_s", "finalization_s", "remainder_s", "busiest_owner", "busiest_endpoint");
    for (size_t i = 0; i < r->n; i++) {
        char label[16];
        snprintf(label, sizeof(label), "%u", (unsigned)r->refits[i]);
        print_row(label, &r->b[i], true);
    }
    print_row("mean", &r->mean, false);
}

dcr_status_t dcr_bounds_run_compute(const char *path, dcr_trace_interval_t *iv, size_t n,
                                    dcr_bounds_run_t *r)
{
    DCR_CHECK(dcr_bounds_refits(iv, n, &r->refits, &r->n));
    if (!r->n) return dcr_error_set(DCR_ENOTFOUND, "%s: no refit window in the trace", path);
    r->b = calloc(r->n, sizeof(*r->b));
    if (!r->b) return dcr_error_set(DCR_ENOMEM, "bounds of %zu refits", r->n);
    dcr_status_t s = dcr_bounds_compute_all(iv, n, r->refits, r->n, r->b);
    if (s == DCR_OK) s = dcr_bounds_check_windows(iv, n, DCR_BOUNDS_TOLERANCE_NS);
    if (s != DCR_OK) {
        dcr_error_prefix("%s: ", path);
        return s;
    }
    dcr_bounds_mean(r->b, r->n, &r->mean);
    return DCR_OK;
}

void dcr_bounds_run_print(const char *path, const char *source, const dcr_bounds_run_t *r,
                          bool json)
{
    if (json)
        print_json(path, source, r);
    else
        print_text(path, source, r);
}

void dcr_bounds_run_free(dcr_bounds_run_t *r)
{
    free(r->refits);
    free(r->b);
    *r = (dcr_bounds_run_t){0};
}
