/* The critical path of one refit (dcr/trace.h, dcr_critical_path): a walk
 * backward from t1 through the recorded intervals, which splits the whole
 * window into work and waits.
 *
 * At each step the walk stands at a time t (first t1) and asks what ran up
 * to t. If some interval covers t, the one that started earliest is taken
 * as the work on the path from its start (clipped to t0) to t: it is the
 * longest-running of the things in progress, so the walk moves back fastest
 * and counts concurrent work once. If nothing covers t, the interval that
 * ended last before t is the work the path waited on, and [its end, t] is a
 * wait, labelled by that interval (the side handing off) and by the work
 * after it (the side that waited): "commit coord -> baseline owner" is the
 * owners' discovery of the commit. Before the first interval the wait is
 * labelled as starting at t0. The segments tile [t0, t1] exactly, so their
 * sum is the window's length by construction.
 *
 * Without dependency edges in the trace, "ended last before t" is the
 * heuristic a profiler's critical path uses too; the labels name both sides
 * so that a reader can tell a real hand-off from a coincidence. */
#include <stdlib.h>
#include <string.h>

#include "dcr/trace.h"

static int dcr__cp_start_cmp(const void *pa, const void *pb)
{
    const dcr_trace_interval_t *a = pa, *b = pb;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
    if (a->end_ns != b->end_ns) return a->end_ns > b->end_ns ? -1 : 1; /* longer first */
    return (int)a->stage - (int)b->stage;
}

/* The window's intervals, clipped to [t0, t1] and sorted by start, without
 * the window itself; empty intersections dropped. */
static dcr_status_t dcr__cp_collect(const dcr_trace_interval_t *iv, size_t n, uint64_t t0,
                                    uint64_t t1, dcr_trace_interval_t **out_p, size_t *k_p)
{
    dcr_trace_interval_t *c = malloc((n ? n : 1) * sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "critical path of %zu intervals", n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage >= DCR_STAGE_COUNT || iv[i].stage == DCR_STAGE_REFIT) continue;
        if (iv[i].actor >= DCR_ACTOR_COUNT) continue;
        uint64_t s = iv[i].start_ns > t0 ? iv[i].start_ns : t0;
        uint64_t e = iv[i].end_ns < t1 ? iv[i].end_ns : t1;
        if (e <= s) continue;
        c[k] = iv[i];
        c[k].start_ns = s;
        c[k].end_ns = e;
        k++;
    }
    qsort(c, k, sizeof(*c), dcr__cp_start_cmp);
    *out_p = c;
    *k_p = k;
    return DCR_OK;
}

static dcr_status_t dcr__cp_push(dcr_path_segment_t **seg_p, size_t *n_p, size_t *cap_p,
                                 dcr_path_segment_t seg)
{
    if (*n_p == *cap_p) {
        size_t cap = *cap_p ? 2 * *cap_p : 64;
        dcr_path_segment_t *p = realloc(*seg_p, cap * sizeof(*p));
        if (!p) return dcr_error_set(DCR_ENOMEM, "critical path of %zu segments", cap);
        *seg_p = p;
        *cap_p = cap;
    }
    (*seg_p)[(*n_p)++] = seg;
    return DCR_OK;
}

/* The window's intervals sorted by start, with the running maximum of their
 * ends (top[i]: the largest end among c[0..i], at[i]: the first interval
 * that has it), so that each step back is two binary searches: a trace of a
 * million intervals walks in n log n, not in n per step. */
typedef struct dcr__cp_index {
    const dcr_trace_interval_t *c;
    size_t k;
    uint64_t *top;
    size_t *at;
} dcr__cp_index_t;

static dcr_status_t dcr__cp_index(const dcr_trace_interval_t *c, size_t k, dcr__cp_index_t *x)
{
    x->c = c;
    x->k = k;
    x->top = malloc((k ? k : 1) * sizeof(*x->top));
    x->at = malloc((k ? k : 1) * sizeof(*x->at));
    if (!x->top || !x->at) {
        free(x->top);
        free(x->at);
        return dcr_error_set(DCR_ENOMEM, "critical path of %zu intervals", k);
    }
    for (size_t i = 0; i < k; i++) {
        bool higher = i == 0 || c[i].end_ns > x->top[i - 1];
        x->top[i] = higher ? c[i].end_ns : x->top[i - 1];
        x->at[i] = higher ? i : x->at[i - 1];
    }
    return DCR_OK;
}

/* The next step back from t: among the intervals that start before t, the
 * covering one (end >= t) that started first, else the one that ended last
 * (*covering_p false); NULL when none starts before t. */
static const dcr_trace_interval_t *dcr__cp_step(const dcr__cp_index_t *x, uint64_t t,
                                                bool *covering_p)
{
    size_t lo = 0, hi = x->k; /* j: how many start before t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->c[mid].start_ns < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t j = lo;
    if (j == 0) return NULL;
    *covering_p = x->top[j - 1] >= t;
    if (!*covering_p) return &x->c[x->at[j - 1]];
    lo = 0; /* the first i < j whose running maximum reaches t: c[i] ends at or after t */
    hi = j - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->top[mid] >= t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return &x->c[lo];
}

dcr_status_t dcr_critical_path(const dcr_trace_interval_t *iv, size_t n, uint64_t t0, uint64_t t1,
                               dcr_path_segment_t **seg_p, size_t *nseg_p)
{
    if ((!iv && n) || !seg_p || !nseg_p || t1 < t0)
        return dcr_error_set(DCR_EINVAL, "critical path: bad arguments");
    dcr_trace_interval_t *c = NULL;
    size_t k = 0;
    DCR_CHECK(dcr__cp_collect(iv, n, t0, t1, &c, &k));
    dcr__cp_index_t x;
    dcr_status_t xs = dcr__cp_index(c, k, &x);
    if (xs != DCR_OK) {
        free(c);
        return xs;
    }
    dcr_path_segment_t *seg = NULL;
    size_t ns = 0, cap = 0;
    dcr_status_t s = DCR_OK;
    /* What the path reached last going back: the side that waited. */
    uint16_t after_stage = DCR_STAGE_REFIT, after_actor = DCR_ACTOR_COORD;
    for (uint64_t t = t1; t > t0 && s == DCR_OK;) {
        bool covering = false;
        const dcr_trace_interval_t *v = dcr__cp_step(&x, t, &covering);
        dcr_path_segment_t g = {
            .wait = !covering, .after_stage = after_stage, .after_actor = after_actor};
        if (!v) { /* nothing before t: the start of the window waited */
            g = (dcr_path_segment_t){t0, t,           true,       DCR_STAGE_REFIT, DCR_ACTOR_COORD,
                                     0,  after_stage, after_actor};
            t = t0;
        } else if (covering) {
            g = (dcr_path_segment_t){v->start_ns, t,     false,       v->stage,
                                     v->actor,    v->id, after_stage, after_actor};
            after_stage = v->stage;
            after_actor = v->actor;
            t = v->start_ns;
        } else {
            g = (dcr_path_segment_t){v->end_ns, t,     true,        v->stage,
                                     v->actor,  v->id, after_stage, after_actor};
            t = v->end_ns;
        }
        s = dcr__cp_push(&seg, &ns, &cap, g);
    }
    free(x.top);
    free(x.at);
    free(c);
    if (s != DCR_OK) {
        free(seg);
        return s;
    }
    /* Walked backward: hand the segments out in time order. */
    for (size_t i = 0; i < ns / 2; i++) {
        dcr_path_segment_t tmp = seg[i];
        seg[i] = seg[ns - 1 - i];
        seg[ns - 1 - i] = tmp;
    }
    *seg_p = seg;
    *nseg_p = ns;
    return DCR_OK;
}
