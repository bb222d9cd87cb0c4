/* dcr bounds TRACE: per-refit lower bounds, finalization and latency from a
 * saved Chrome trace or an Nsight Systems SQLite export. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "dcr/trace.h"
#include "reports/trace_io.h"

typedef struct bounds_run {
    uint32_t *refits;
    dcr_bounds_t *b;
    size_t n;
    dcr_bounds_t mean;
} bounds_run_t;

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

static void print_json(const char *path, const char *source, const bounds_run_t *r)
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

static void print_text(const char *path, const char *source, const bounds_run_t *r)
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

/* Bounds of every refit that has a window in the trace (sorts iv by
 * start). A trace that cannot be a recording (a stage outside every refit
 * window, a window stretched to the end of time) is refused, not bounded. */
static dcr_status_t compute_all(const char *path, dcr_trace_interval_t *iv, size_t n,
                                bounds_run_t *r)
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

int dcr_cmd_bounds(int argc, char **argv)
{
    bool json = false, nsys = false;
    dcr_arg_t args[] = {
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object: refits[] and means", false},
        {"--nsys", DCR_ARG_FLAG, &nsys, 0, 0,
         "TRACE is an `nsys export --type sqlite` file (detected by its magic otherwise)", false},
    };
    const char *pos[1];
    int npos = 0;
    int rc =
        dcr_args_parse("bounds", "TRACE [--json] [--nsys]", args, 2, argc, argv, pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1) {
        fprintf(stderr, "dcr bounds: expected one TRACE file (a dcr Chrome trace or an nsys SQLite "
                        "export)\n");
        return 2;
    }
    const char *path = pos[0];
    bool sqlite = nsys || dcr_trace_file_is_sqlite(path);
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    bounds_run_t r = {0};
    dcr_status_t s;
    if (sqlite)
        DCR_CHECK_GOTO(dcr_trace_read_nsys(path, &iv, &n), s, fail);
    else
        DCR_CHECK_GOTO(dcr_trace_read_chrome(path, &iv, &n), s, fail);
    DCR_CHECK_GOTO(compute_all(path, iv, n, &r), s, fail);
    if (json)
        print_json(path, sqlite ? "nsys" : "chrome", &r);
    else
        print_text(path, sqlite ? "nsys" : "chrome", &r);
    rc = 0;
    goto done;
fail:
    dcr_cli_report("bounds", s);
    rc = 1;
done:
    free(iv);
    free(r.refits);
    free(r.b);
    return rc;
}
