/* Trace plausibility (reports/trace_check.h): windows sorted by start with a
 * running maximum of their ends, so each interval is placed by one binary
 * search; each window's last inner end is found the same way. */
#include "reports/trace_check.h"

#include <stdlib.h>

typedef struct dcr__window {
    uint64_t start, end, max_end; /* max_end: the largest end among windows up to this one */
    uint64_t last_inner_end;      /* the latest end of an interval inside it */
    size_t index;                 /* the window's interval */
} dcr__window_t;

static int dcr__window_cmp(const void *pa, const void *pb)
{
    const dcr__window_t *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The number of windows whose start is <= t. */
static size_t dcr__upto(const dcr__window_t *w, size_t nw, uint64_t t)
{
    size_t lo = 0, hi = nw;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w[mid].start <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static dcr_status_t dcr__bad(const dcr_trace_interval_t *x, const char *why)
{
    return dcr_error_set(DCR_EPARSE,
                         "trace interval of refit %u, stage %u, actor %u, id %d, [%llu, %llu] ns: "
                         "%s",
                         (unsigned)x->refit, (unsigned)x->stage, (unsigned)x->actor, (int)x->id,
                         (unsigned long long)x->start_ns, (unsigned long long)x->end_ns, why);
}

dcr_status_t dcr_trace_check_windows(const dcr_trace_interval_t *iv, size_t n,
                                     uint64_t tolerance_ns)
{
    if (!iv && n) return dcr_error_set(DCR_EINVAL, "trace check: NULL intervals");
    size_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].end_ns < iv[i].start_ns) return dcr__bad(&iv[i], "it ends before it starts");
        nw += iv[i].stage == DCR_STAGE_REFIT;
    }
    if (!nw) return DCR_OK;
    dcr__window_t *w = malloc(nw * sizeof(*w));
    if (!w) return dcr_error_set(DCR_ENOMEM, "trace check: %zu windows", nw);
    nw = 0;
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == DCR_STAGE_REFIT)
            w[nw++] = (dcr__window_t){iv[i].start_ns, iv[i].end_ns, 0, 0, i};
    qsort(w, nw, sizeof(*w), dcr__window_cmp);
    for (size_t k = 0; k < nw; k++) {
        w[k].max_end = k && w[k - 1].max_end > w[k].end ? w[k - 1].max_end : w[k].end;
        w[k].last_inner_end = w[k].start;
    }
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < n && st == DCR_OK; i++) {
        if (iv[i].stage == DCR_STAGE_REFIT) continue;
        uint64_t s = iv[i].start_ns, e = iv[i].end_ns;
        uint64_t s_wide = s > UINT64_MAX - tolerance_ns ? UINT64_MAX : s + tolerance_ns;
        size_t k = dcr__upto(w, nw, s_wide);
        uint64_t e_narrow = e > tolerance_ns ? e - tolerance_ns : 0;
        if (k == 0 || w[k - 1].max_end < e_narrow) {
            st = dcr__bad(&iv[i], "it lies outside every refit window by more than the "
                                  "tolerance (1 s)");
            break;
        }
        /* The window it starts in (the latest one starting before it) has
         * something inside that ends this late. */
        size_t in = dcr__upto(w, nw, s);
        if (in > 0 && e > w[in - 1].last_inner_end && e <= w[in - 1].end)
            w[in - 1].last_inner_end = e;
    }
    /* An empty window counts from its start: one longer than the tolerance
     * with nothing in it is no refit either. */
    for (size_t k = 0; k < nw && st == DCR_OK; k++)
        if (w[k].end - w[k].last_inner_end > tolerance_ns)
            st = dcr__bad(&iv[w[k].index], "the refit window ends more than the tolerance (1 s) "
                                           "after the last interval inside it");
    free(w);
    return st;
}
