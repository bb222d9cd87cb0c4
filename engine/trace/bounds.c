/* Lower bounds of one refit (DESIGN.md section 8, the seed's section 8.7 and
 * appendix C): every interval is clipped to the refit's window [t0, t1],
 * empty intersections are dropped, and each bound is the longest union of one
 * actor's intervals, so concurrent work on one owner or endpoint counts once.
 *
 * A transport interval runs from payload submission until the rollout node
 * has queued the payload (the seed: until the sending endpoint receives the
 * rollout node's queueing acknowledgment). On the relay tree the owner
 * streams ahead of the root's answers; the relay records each payload's
 * DCR_STAGE_SEND interval itself, from the send call until the root's
 * queueing acknowledgment reaches the owner, so that interval is the whole
 * transport interval. On the object store there is no acknowledgment to wait
 * for: send returns once the upload is stored, and each rollout node then
 * downloads the payload on its own. The upload (DCR_STAGE_SEND) and each
 * node's download of that payload, from the GET's start until the node
 * queued it (DCR_STAGE_FETCH, tagged with the sending endpoint), together
 * cover submission to queueing except the time the object waited to be
 * listed or for a free download slot, which is left out so that no wait on
 * the receiving side is counted. Neither part includes staging or
 * application: a node queues a payload before recv hands it on. */
#include <stdio.h>
#include <stdlib.h>

#include "dcr/trace.h"

/* One clipped interval of one actor. */
typedef struct dcr__seg {
    int32_t id;
    uint64_t s, e;
} dcr__seg_t;

/* Which intervals a collection takes: stages as a bit mask, one actor kind or
 * any (-1), and whether they group by actor id (else all form one group). */
typedef struct dcr__filter {
    uint32_t stages;
    int actor;
    bool by_id;
} dcr__filter_t;

#define DCR__BIT(stage)       (1u << (stage))
#define DCR__TRANSPORT_STAGES (DCR__BIT(DCR_STAGE_SEND) | DCR__BIT(DCR_STAGE_FETCH))
#define DCR__COMPUTE_STAGES                                                                        \
    (DCR__BIT(DCR_STAGE_COMPARE) | DCR__BIT(DCR_STAGE_PROJECT) | DCR__BIT(DCR_STAGE_RESIDUAL) |    \
     DCR__BIT(DCR_STAGE_ENCODE) | DCR__BIT(DCR_STAGE_ZSTD))

static double dcr__seconds(uint64_t ns)
{
    return (double)ns * 1e-9;
}

/* Clips the intervals the filter takes to [t0, t1] into out (room for n),
 * dropping empty intersections; returns how many were kept. */
static size_t dcr__collect(const dcr_trace_interval_t *iv, size_t n, dcr__filter_t f, uint64_t t0,
                           uint64_t t1, dcr__seg_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage >= DCR_STAGE_COUNT || !(f.stages & DCR__BIT(iv[i].stage))) continue;
        if (f.actor >= 0 && iv[i].actor != f.actor) continue;
        uint64_t s = iv[i].start_ns > t0 ? iv[i].start_ns : t0;
        uint64_t e = iv[i].end_ns < t1 ? iv[i].end_ns : t1;
        if (e <= s) continue;
        out[k++] = (dcr__seg_t){f.by_id ? iv[i].id : 0, s, e};
    }
    return k;
}

static int dcr__seg_cmp(const void *pa, const void *pb)
{
    const dcr__seg_t *a = pa, *b = pb;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->s != b->s) return a->s < b->s ? -1 : 1;
    return 0;
}

/* The longest per-id union length among segs (sorted here) and its id; the
 * smaller id wins a tie because ids are visited in ascending order. *id_p is
 * -1 and the length 0 when there are no segments. */
static uint64_t dcr__longest_union(dcr__seg_t *segs, size_t n, int *id_p)
{
    qsort(segs, n, sizeof(*segs), dcr__seg_cmp);
    uint64_t best = 0;
    bool found = false; /* ids may be negative, so -1 cannot mark "none yet" */
    *id_p = -1;
    for (size_t i = 0; i < n;) {
        int32_t id = segs[i].id;
        uint64_t total = 0, cs = segs[i].s, ce = segs[i].e;
        for (i++; i < n && segs[i].id == id; i++) {
            if (segs[i].s > ce) { /* a gap: close the current run */
                total += ce - cs;
                cs = segs[i].s;
                ce = segs[i].e;
            } else if (segs[i].e > ce) {
                ce = segs[i].e;
            }
        }
        total += ce - cs;
        if (!found || total > best) {
            best = total;
            *id_p = id;
            found = true;
        }
    }
    return best;
}

/* Union length of the filter's intervals clipped to [t0, t1], all in one group. */
static uint64_t dcr__union_in(const dcr_trace_interval_t *iv, size_t n, uint32_t stages,
                              uint64_t t0, uint64_t t1, dcr__seg_t *scratch)
{
    int id;
    size_t k = dcr__collect(iv, n, (dcr__filter_t){stages, -1, false}, t0, t1, scratch);
    return dcr__longest_union(scratch, k, &id);
}

/* The refit's window interval; DCR_ENOTFOUND without one, DCR_EINVAL with two. */
static dcr_status_t dcr__find_window(const dcr_trace_interval_t *iv, size_t n, uint32_t refit,
                                     uint64_t *t0_p, uint64_t *t1_p)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage != DCR_STAGE_REFIT || iv[i].refit != refit) continue;
        if (found++) continue;
        *t0_p = iv[i].start_ns;
        *t1_p = iv[i].end_ns;
    }
    if (!found) return dcr_error_set(DCR_ENOTFOUND, "refit %u has no window interval", refit);
    if (found > 1)
        return dcr_error_set(DCR_EINVAL, "refit %u has %zu window intervals, expected one", refit,
                             found);
    if (*t1_p < *t0_p)
        return dcr_error_set(DCR_EINVAL, "refit %u window ends before it starts", refit);
    return DCR_OK;
}

/* End of the last apply interval inside [t0, t1]; false when there is none. */
static bool dcr__last_apply(const dcr_trace_interval_t *iv, size_t n, uint64_t t0, uint64_t t1,
                            uint64_t *end_p)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage != DCR_STAGE_APPLY) continue;
        uint64_t s = iv[i].start_ns > t0 ? iv[i].start_ns : t0;
        uint64_t e = iv[i].end_ns < t1 ? iv[i].end_ns : t1;
        if (e <= s) continue;
        if (!any || e > *end_p) *end_p = e;
        any = true;
    }
    return any;
}

dcr_status_t dcr_bounds_compute(const dcr_trace_interval_t *iv, size_t n, uint32_t refit,
                                dcr_bounds_t *out_p)
{
    if ((!iv && n) || !out_p) return dcr_error_set(DCR_EINVAL, "bounds: NULL argument");
    uint64_t t0 = 0, t1 = 0;
    DCR_CHECK(dcr__find_window(iv, n, refit, &t0, &t1));
    dcr__seg_t *segs = malloc((n ? n : 1) * sizeof(*segs));
    if (!segs) return dcr_error_set(DCR_ENOMEM, "bounds of refit %u", refit);

    dcr_bounds_t b = {0};
    size_t k = dcr__collect(iv, n, (dcr__filter_t){DCR__COMPUTE_STAGES, DCR_ACTOR_OWNER, true}, t0,
                            t1, segs);
    uint64_t construction = dcr__longest_union(segs, k, &b.busiest_owner);
    k = dcr__collect(iv, n, (dcr__filter_t){DCR__TRANSPORT_STAGES, DCR_ACTOR_ENDPOINT, true}, t0,
                     t1, segs);
    uint64_t transport = dcr__longest_union(segs, k, &b.busiest_endpoint);

    /* Post-apply checks inside the window are not latency (the seed subtracts
     * them); wherever they overlap, they count once. */
    uint64_t checks = dcr__union_in(iv, n, DCR__BIT(DCR_STAGE_CHECK), t0, t1, segs);
    uint64_t latency = (t1 - t0) - checks;
    uint64_t finalization = 0, last_apply = 0;
    if (dcr__last_apply(iv, n, t0, t1, &last_apply))
        finalization = (t1 - last_apply) -
                       dcr__union_in(iv, n, DCR__BIT(DCR_STAGE_CHECK), last_apply, t1, segs);
    free(segs);

    b.construction_lb_s = dcr__seconds(construction);
    b.transport_lb_s = dcr__seconds(transport);
    b.finalization_s = dcr__seconds(finalization);
    b.latency_s = dcr__seconds(latency);
    /* Signed on purpose: see dcr_bounds_t for why a negative value is kept. */
    uint64_t larger = construction > transport ? construction : transport;
    b.remainder_s = (double)((int64_t)latency - (int64_t)(larger + finalization)) * 1e-9;
    *out_p = b;
    return DCR_OK;
}

static int dcr__u32_cmp(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return a < b ? -1 : a > b;
}

dcr_status_t dcr_bounds_refits(const dcr_trace_interval_t *iv, size_t n, uint32_t **refits_p,
                               size_t *n_p)
{
    if ((!iv && n) || !refits_p || !n_p) return dcr_error_set(DCR_EINVAL, "bounds: NULL argument");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += iv[i].stage == DCR_STAGE_REFIT;
    uint32_t *r = k ? malloc(k * sizeof(*r)) : NULL;
    if (k && !r) return dcr_error_set(DCR_ENOMEM, "refit list of %zu", k);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == DCR_STAGE_REFIT) r[k++] = iv[i].refit;
    if (k) qsort(r, k, sizeof(*r), dcr__u32_cmp);
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (!m || r[m - 1] != r[i]) r[m++] = r[i];
    *refits_p = r;
    *n_p = m;
    return DCR_OK;
}

void dcr_bounds_mean(const dcr_bounds_t *b, size_t n, dcr_bounds_t *out_p)
{
    dcr_bounds_t m = {0};
    for (size_t i = 0; i < n; i++) {
        m.construction_lb_s += b[i].construction_lb_s;
        m.transport_lb_s += b[i].transport_lb_s;
        m.finalization_s += b[i].finalization_s;
        m.latency_s += b[i].latency_s;
        m.remainder_s += b[i].remainder_s;
    }
    if (n) {
        double inv = 1.0 / (double)n;
        m.construction_lb_s *= inv;
        m.transport_lb_s *= inv;
        m.finalization_s *= inv;
        m.latency_s *= inv;
        m.remainder_s *= inv;
    }
    m.busiest_owner = m.busiest_endpoint = -1;
    *out_p = m;
}

/* ---- whole traces ---- */

static int dcr__start_cmp(const void *pa, const void *pb)
{
    const dcr_trace_interval_t *a = pa, *b = pb;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
    return 0;
}

/* First index in iv (sorted by start) whose start is >= t, or > t with after. */
static size_t dcr__first_start(const dcr_trace_interval_t *iv, size_t n, uint64_t t, bool after)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (iv[mid].start_ns < t || (after && iv[mid].start_ns == t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct dcr__window {
    uint32_t refit;
    uint64_t t0, t1;
} dcr__window_t;

static int dcr__window_cmp(const void *pa, const void *pb)
{
    const dcr__window_t *a = pa, *b = pb;
    if (a->refit != b->refit) return a->refit < b->refit ? -1 : 1;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    return 0;
}

/* Every window interval, sorted by refit then start; *n_p of them. */
static dcr_status_t dcr__windows(const dcr_trace_interval_t *iv, size_t n, dcr__window_t **out_p,
                                 size_t *n_p)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += iv[i].stage == DCR_STAGE_REFIT;
    dcr__window_t *w = malloc((k ? k : 1) * sizeof(*w));
    if (!w) return dcr_error_set(DCR_ENOMEM, "bounds: %zu refit windows", k);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (iv[i].stage == DCR_STAGE_REFIT)
            w[k++] = (dcr__window_t){iv[i].refit, iv[i].start_ns, iv[i].end_ns};
    if (k > 1) qsort(w, k, sizeof(*w), dcr__window_cmp);
    *out_p = w;
    *n_p = k;
    return DCR_OK;
}

dcr_status_t dcr_bounds_compute_all(dcr_trace_interval_t *iv, size_t n, const uint32_t *refits,
                                    size_t n_refits, dcr_bounds_t *out_p)
{
    if ((!iv && n) || (!refits && n_refits) || (!out_p && n_refits))
        return dcr_error_set(DCR_EINVAL, "bounds: NULL argument");
    if (n > 1) qsort(iv, n, sizeof(*iv), dcr__start_cmp);
    /* An interval that reaches a window starts at most this long before it. */
    uint64_t longest = 0;
    for (size_t i = 0; i < n; i++)
        if (iv[i].end_ns - iv[i].start_ns > longest) longest = iv[i].end_ns - iv[i].start_ns;
    dcr__window_t *w = NULL;
    size_t nw = 0;
    DCR_CHECK(dcr__windows(iv, n, &w, &nw));
    dcr_status_t st = DCR_OK;
    for (size_t r = 0; st == DCR_OK && r < n_refits; r++) {
        size_t at = 0, lo = nw;
        while (at < lo) { /* first window of this refit */
            size_t mid = at + (lo - at) / 2;
            if (w[mid].refit < refits[r])
                at = mid + 1;
            else
                lo = mid;
        }
        size_t count = 0;
        while (at + count < nw && w[at + count].refit == refits[r]) count++;
        if (count != 1) { /* dcr_bounds_compute gives the error */
            st = dcr_bounds_compute(iv, n, refits[r], &out_p[r]);
            if (st == DCR_OK) st = dcr_error_set(DCR_EINVAL, "refit %u: window lookup", refits[r]);
            break;
        }
        uint64_t t0 = w[at].t0, t1 = w[at].t1;
        size_t first = dcr__first_start(iv, n, t0 > longest ? t0 - longest : 0, false);
        size_t end = dcr__first_start(iv, n, t1, true);
        st = dcr_bounds_compute(iv + first, end - first, refits[r], &out_p[r]);
    }
    free(w);
    return st;
}

/* "compare owner=3 refit=7 [s, e] ns": an interval as an error line names it. */
static void dcr__describe(const dcr_trace_interval_t *iv, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s=%d refit=%u [%llu, %llu] ns", dcr_stage_name(iv->stage),
             dcr_actor_name(iv->actor), (int)iv->id, (unsigned)iv->refit,
             (unsigned long long)iv->start_ns, (unsigned long long)iv->end_ns);
}

static int dcr__span_cmp(const void *pa, const void *pb)
{
    const dcr__window_t *a = pa, *b = pb;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    return 0;
}

/* Windows widened by the tolerance and merged, sorted by start. */
static size_t dcr__hull(const dcr__window_t *w, size_t nw, uint64_t tol, dcr__window_t *hull)
{
    size_t nh = 0;
    for (size_t k = 0; k < nw; k++) {
        uint64_t a = w[k].t0 > tol ? w[k].t0 - tol : 0;
        uint64_t b = w[k].t1 < UINT64_MAX - tol ? w[k].t1 + tol : UINT64_MAX;
        if (nh && a <= hull[nh - 1].t1) {
            if (b > hull[nh - 1].t1) hull[nh - 1].t1 = b;
        } else {
            hull[nh++] = (dcr__window_t){0, a, b};
        }
    }
    return nh;
}

/* The first interval that no widened window holds, or n. */
static size_t dcr__outside(const dcr_trace_interval_t *iv, size_t n, const dcr__window_t *hull,
                           size_t nh, uint64_t *gap_p)
{
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage == DCR_STAGE_REFIT) continue;
        size_t lo = 0, hi = nh; /* the last widened window starting at or before it */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (hull[mid].t0 <= iv[i].start_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0) {
            *gap_p = hull[0].t0 - iv[i].start_ns;
            return i;
        }
        if (iv[i].end_ns > hull[lo - 1].t1) {
            *gap_p = iv[i].end_ns - hull[lo - 1].t1;
            return i;
        }
    }
    return n;
}

dcr_status_t dcr_bounds_check_windows(const dcr_trace_interval_t *iv, size_t n,
                                      uint64_t tolerance_ns)
{
    if (!iv && n) return dcr_error_set(DCR_EINVAL, "bounds: NULL argument");
    for (size_t i = 1; i < n; i++)
        if (iv[i].start_ns < iv[i - 1].start_ns)
            return dcr_error_set(DCR_EINVAL, "bounds: intervals not sorted by start");
    dcr__window_t *w = NULL;
    size_t nw = 0;
    DCR_CHECK(dcr__windows(iv, n, &w, &nw));
    if (!nw) {
        free(w);
        return DCR_OK; /* nothing to check against; the caller reports no window */
    }
    qsort(w, nw, sizeof(*w), dcr__span_cmp);
    /* prefix[i]: the latest end among the stage intervals iv[0..i). */
    uint64_t *prefix = malloc((n + 1) * sizeof(*prefix));
    dcr__window_t *hull = malloc(nw * sizeof(*hull));
    dcr_status_t st = DCR_OK;
    char what[160];
    if (!prefix || !hull) {
        st = dcr_error_set(DCR_ENOMEM, "bounds: checking %zu intervals", n);
        goto done;
    }
    prefix[0] = 0;
    for (size_t i = 0; i < n; i++)
        prefix[i + 1] =
            iv[i].stage != DCR_STAGE_REFIT && iv[i].end_ns > prefix[i] ? iv[i].end_ns : prefix[i];
    uint64_t gap = 0;
    size_t nh = dcr__hull(w, nw, tolerance_ns, hull);
    size_t bad = dcr__outside(iv, n, hull, nh, &gap);
    if (bad < n) {
        dcr__describe(&iv[bad], what, sizeof(what));
        st = dcr_error_set(DCR_EINVAL,
                           "interval %s lies %.3g s outside every refit window (tolerance %.3g s)",
                           what, (double)(gap + tolerance_ns) * 1e-9, (double)tolerance_ns * 1e-9);
        goto done;
    }
    /* A window's work: the stage intervals starting before its end; the
     * latest of their ends must reach into it, and reach its end. */
    for (size_t k = 0; k < nw; k++) {
        uint64_t last = prefix[dcr__first_start(iv, n, w[k].t1, false)];
        dcr_trace_interval_t win = {w[k].t0,         w[k].t1,         w[k].refit,
                                    DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0};
        dcr__describe(&win, what, sizeof(what));
        if (last <= w[k].t0 && w[k].t1 > w[k].t0) {
            st = dcr_error_set(DCR_EINVAL, "window %s holds no stage interval", what);
            break;
        }
        if (w[k].t1 > last && w[k].t1 - last > tolerance_ns) {
            st = dcr_error_set(DCR_EINVAL,
                               "window %s ends %.3g s after the last interval inside it "
                               "(tolerance %.3g s)",
                               what, (double)(w[k].t1 - last) * 1e-9, (double)tolerance_ns * 1e-9);
            break;
        }
    }
done:
    free(w);
    free(prefix);
    free(hull);
    return st;
}
