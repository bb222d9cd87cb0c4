/* A trace's per-refit bounds and what dcr bounds prints (bounds_report.h). */
#include "reports/bounds_report.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static json_t *bounds_root(const char *path, const char *source, const dcr_bounds_run_t *r)
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
    return root;
}

static void print_root(json_t *root)
{
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    printf("\n");
    json_decref(root);
}

static void print_json(const char *path, const char *source, const dcr_bounds_run_t *r)
{
    print_root(bounds_root(path, source, r));
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

/* ---- the critical path ---- */

/* The label a segment is summed under. */
static void path_label(const dcr_path_segment_t *g, char *buf, size_t cap)
{
    if (!g->wait) {
        snprintf(buf, cap, "%s %s", dcr_stage_name(g->stage), dcr_actor_name(g->actor));
        return;
    }
    const char *from = g->stage == DCR_STAGE_REFIT ? "t0" : dcr_stage_name(g->stage);
    const char *to = g->after_stage == DCR_STAGE_REFIT ? "t1" : dcr_stage_name(g->after_stage);
    bool from_t0 = g->stage == DCR_STAGE_REFIT, to_t1 = g->after_stage == DCR_STAGE_REFIT;
    snprintf(buf, cap, "wait %s%s%s -> %s%s%s", from, from_t0 ? "" : " ",
             from_t0 ? "" : dcr_actor_name(g->actor), to, to_t1 ? "" : " ",
             to_t1 ? "" : dcr_actor_name(g->after_actor));
}

/* The row of label in p (added when new); NULL when out of memory. */
static dcr_path_row_t *path_row(dcr_path_report_t *p, size_t *cap, const char *label, bool wait)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->rows[i].label, label)) return &p->rows[i];
    if (p->n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        dcr_path_row_t *rows = realloc(p->rows, c * sizeof(*rows));
        if (!rows) return NULL;
        p->rows = rows;
        *cap = c;
    }
    dcr_path_row_t *row = &p->rows[p->n++];
    *row = (dcr_path_row_t){.wait = wait};
    snprintf(row->label, sizeof(row->label), "%s", label);
    return row;
}

/* The window [t0, t1] of refit; false without one. */
static bool refit_window(const dcr_trace_interval_t *iv, size_t n, uint32_t refit, uint64_t *t0,
                         uint64_t *t1)
{
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == DCR_STAGE_REFIT && iv[i].refit == refit) {
            *t0 = iv[i].start_ns;
            *t1 = iv[i].end_ns;
            return true;
        }
    return false;
}

static int row_cmp(const void *pa, const void *pb)
{
    const dcr_path_row_t *a = pa, *b = pb;
    if (a->mean_s != b->mean_s) return a->mean_s > b->mean_s ? -1 : 1;
    return strcmp(a->label, b->label);
}

/* Adds one refit's segments to the rows (sums; averaged by the caller). */
static dcr_status_t path_add(dcr_path_report_t *out, size_t *cap, const dcr_path_segment_t *seg,
                             size_t nseg)
{
    for (size_t k = 0; k < nseg; k++) {
        char label[96];
        path_label(&seg[k], label, sizeof(label));
        dcr_path_row_t *row = path_row(out, cap, label, seg[k].wait);
        if (!row) return dcr_error_set(DCR_ENOMEM, "critical-path rows");
        row->mean_s += (double)(seg[k].end_ns - seg[k].start_ns) * 1e-9;
        row->segments += 1.0;
    }
    return DCR_OK;
}

dcr_status_t dcr_path_report_compute(const dcr_trace_interval_t *iv, size_t n,
                                     const dcr_bounds_run_t *r, dcr_path_report_t *out)
{
    *out = (dcr_path_report_t){0};
    size_t cap = 0;
    for (size_t i = 0; i < r->n; i++) {
        uint64_t t0 = 0, t1 = 0;
        if (!refit_window(iv, n, r->refits[i], &t0, &t1))
            return dcr_error_set(DCR_ENOTFOUND, "refit %u has no window", r->refits[i]);
        dcr_path_segment_t *seg = NULL;
        size_t nseg = 0;
        DCR_CHECK(dcr_critical_path(iv, n, t0, t1, &seg, &nseg));
        dcr_status_t s = path_add(out, &cap, seg, nseg);
        free(seg);
        DCR_CHECK(s);
        out->window_s += (double)(t1 - t0) * 1e-9;
    }
    double refits = r->n ? (double)r->n : 1.0;
    out->window_s /= refits;
    for (size_t i = 0; i < out->n; i++) {
        dcr_path_row_t *row = &out->rows[i];
        row->mean_s /= refits;
        row->segments /= refits;
        row->share = out->window_s > 0 ? row->mean_s / out->window_s : 0.0;
        if (row->wait) out->wait_s += row->mean_s;
    }
    qsort(out->rows, out->n, sizeof(*out->rows), row_cmp);
    return DCR_OK;
}

static json_t *path_json(const dcr_path_report_t *p)
{
    json_t *j = json_object(), *rows = json_array();
    json_object_set_new(j, "window_s", json_real(p->window_s));
    json_object_set_new(j, "wait_s", json_real(p->wait_s));
    for (size_t i = 0; i < p->n; i++) {
        json_t *row = json_object();
        json_object_set_new(row, "segment", json_string(p->rows[i].label));
        json_object_set_new(row, "kind", json_string(p->rows[i].wait ? "wait" : "work"));
        json_object_set_new(row, "mean_s", json_real(p->rows[i].mean_s));
        json_object_set_new(row, "share", json_real(p->rows[i].share));
        json_object_set_new(row, "segments_per_refit", json_real(p->rows[i].segments));
        json_array_append_new(rows, row);
    }
    json_object_set_new(j, "rows", rows);
    return j;
}

void dcr_bounds_run_print_path(const char *path, const char *source, const dcr_bounds_run_t *r,
                               const dcr_path_report_t *p, bool json)
{
    if (json) {
        json_t *root = bounds_root(path, source, r);
        json_object_set_new(root, "critical_path", path_json(p));
        print_root(root);
        return;
    }
    print_text(path, source, r);
    printf("\ncritical path, mean per refit: window %.6f s, of which waits %.6f s (%.1f%%)\n\n",
           p->window_s, p->wait_s, p->window_s > 0 ? 100.0 * p->wait_s / p->window_s : 0.0);
    printf("%-56s %10s %7s %10s\n", "segment", "mean_s", "share", "per_refit");
    for (size_t i = 0; i < p->n; i++)
        printf("%-56s %10.6f %6.1f%% %10.1f\n", p->rows[i].label, p->rows[i].mean_s,
               100.0 * p->rows[i].share, p->rows[i].segments);
}

void dcr_path_report_free(dcr_path_report_t *p)
{
    free(p->rows);
    *p = (dcr_path_report_t){0};
}
