/* Link emulation: the rates and latency that put one machine in the seed's
 * transport-bound regime. Bytes really move (files, loopback TCP); what is
 * emulated is how long they take, by sleeping as they move. A transfer is
 * paced by every link it crosses (the sender's or receiver's node link, and
 * its own per-flow cap), so the slowest decides, and flows that share a node
 * share its rate. */
#include "transport-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"

/* Defaults, scaled from the seed's testbed (section 8, "Testbed"): each node's
 * cross-cluster flow was measured at up to 5 Gbps while checkpoints were
 * 63.2-2,242 GB, so one rollout node needed 101-3,590 s to download a full
 * checkpoint, against construction that took seconds: about 30x or more
 * between the two at the smallest size, and the transport-bound regime.
 * Our embedded default checkpoints are 1/S^2 of those (scaled Qwen3-30B-A3B:
 * 44 MB at --scale 16, 176 MB at --scale 8), and this 2-core machine builds
 * their deltas in 0.04-0.23 s (dcr construct, 3% changes). At 0.25 Gbps per
 * node a full download takes 1.4-5.6 s: the same ~25-35x ratio, so the
 * reference stays a few seconds instead of minutes while the refit is still
 * dominated by moving payloads. A single flow gets 0.2 Gbps, a bit below the
 * node, as one cross-region TCP stream or object GET does, so a node fills its
 * link only with parallel flows. Rollout-local links run 10x faster than the
 * cross-cluster link (the seed's rollout nodes sit on one fabric), and 5 ms of
 * one-way latency per cross-cluster transfer stands for the inter-region hop
 * and the per-request cost of object storage: a few payloads per owner add
 * tens of milliseconds, as the seed's hundreds of payloads add a small share
 * of its seconds. */
dcr_link_config_t dcr_link_config_default(void)
{
    return (dcr_link_config_t){
        .cross_gbps = 0.25, .flow_gbps = 0.2, .local_gbps = 2.5, .latency_ms = 5.0};
}

/* Pacing may lag the virtual clock by this much (timer overshoot, scheduling)
 * and catch up, so overshoots do not add up over a long transfer. */
#define DCR__LINK_SLACK_NS 2000000ull
/* Waits shorter than this are not worth a sleep; the debt stays on the
 * virtual clock and the next chunk pays it. */
#define DCR__LINK_MIN_SLEEP_NS 100000ull
/* Longest single sleep, so a cancelled flow notices within this time. */
#define DCR__LINK_SLEEP_SLICE_NS 5000000ull

static double dcr__ns_per_byte(double gbps)
{
    return gbps > 0 ? 8.0 / gbps : 0.0;
}

static dcr_status_t dcr__buckets_init(dcr__bucket_t **out_p, int n, double gbps)
{
    dcr__bucket_t *b = calloc((size_t)n, sizeof *b);
    if (b == NULL) return dcr_error_set(DCR_ENOMEM, "link emulation: %d links", n);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&b[i].mu, NULL);
        b[i].ns_per_byte = dcr__ns_per_byte(gbps);
    }
    *out_p = b;
    return DCR_OK;
}

static void dcr__buckets_free(dcr__bucket_t *b, int n)
{
    for (int i = 0; b != NULL && i < n; i++) pthread_mutex_destroy(&b[i].mu);
    free(b);
}

dcr_status_t dcr__links_create(const dcr_link_config_t *cfg, int train_nodes, int rollout_nodes,
                               dcr__links_t **out_p)
{
    dcr__links_t *l = calloc(1, sizeof *l);
    if (l == NULL) return dcr_error_set(DCR_ENOMEM, "link emulation: allocation failed");
    l->cfg = *cfg;
    l->train_nodes = train_nodes;
    l->rollout_nodes = rollout_nodes;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr__buckets_init(&l->train_cross, train_nodes, cfg->cross_gbps), st, fail);
    DCR_CHECK_GOTO(dcr__buckets_init(&l->roll_cross, rollout_nodes, cfg->cross_gbps), st, fail);
    DCR_CHECK_GOTO(dcr__buckets_init(&l->local_out, rollout_nodes, cfg->local_gbps), st, fail);
    DCR_CHECK_GOTO(dcr__buckets_init(&l->local_in, rollout_nodes, cfg->local_gbps), st, fail);
    *out_p = l;
    return DCR_OK;
fail:
    dcr__links_destroy(l);
    return st;
}

void dcr__links_destroy(dcr__links_t *l)
{
    if (l == NULL) return;
    dcr__buckets_free(l->train_cross, l->train_nodes);
    dcr__buckets_free(l->roll_cross, l->rollout_nodes);
    dcr__buckets_free(l->local_out, l->rollout_nodes);
    dcr__buckets_free(l->local_in, l->rollout_nodes);
    free(l);
}

static void dcr__flow_init(dcr__flow_t *f, const atomic_uint_fast64_t *gen, uint64_t gen0)
{
    *f = (dcr__flow_t){.gen = gen, .gen0 = gen0};
}

static void dcr__flow_add(dcr__flow_t *f, dcr__bucket_t *b)
{
    if (b->ns_per_byte > 0) f->via[f->nvia++] = b;
}

void dcr__flow_cross(dcr__flow_t *f, dcr__links_t *l, int train_node, int rollout_node,
                     const atomic_uint_fast64_t *gen, uint64_t gen0)
{
    dcr__flow_init(f, gen, gen0);
    if (train_node >= 0) dcr__flow_add(f, &l->train_cross[train_node]);
    if (rollout_node >= 0) dcr__flow_add(f, &l->roll_cross[rollout_node]);
    f->ns_per_byte = dcr__ns_per_byte(l->cfg.flow_gbps);
    f->latency_ns = (uint64_t)llround(l->cfg.latency_ms * 1e6);
}

void dcr__flow_local(dcr__flow_t *f, dcr__links_t *l, int from, int to,
                     const atomic_uint_fast64_t *gen, uint64_t gen0)
{
    dcr__flow_init(f, gen, gen0);
    dcr__flow_add(f, &l->local_out[from]);
    dcr__flow_add(f, &l->local_in[to]);
}

bool dcr__flow_cancelled(const dcr__flow_t *f)
{
    return f->gen != NULL && atomic_load(f->gen) != f->gen0;
}

/* Drops bookings that ended before `before`: no flow books that far back. */
static void dcr__bucket_forget(dcr__bucket_t *b, uint64_t before)
{
    int k = 0;
    while (k < b->nbooked && b->hi[k] < before) k++;
    if (k == 0) return;
    b->nbooked -= k;
    memmove(b->lo, b->lo + k, (size_t)b->nbooked * sizeof(b->lo[0]));
    memmove(b->hi, b->hi + k, (size_t)b->nbooked * sizeof(b->hi[0]));
}

/* Books [t, t + d) at slot i (the calendar stays sorted and disjoint);
 * touching neighbours merge. A full calendar books after its last interval
 * instead: later, never overlapping. Returns the end of the booking. */
static uint64_t dcr__bucket_book(dcr__bucket_t *b, int i, uint64_t t, uint64_t d)
{
    int n = b->nbooked;
    bool joins_prev = i > 0 && b->hi[i - 1] == t, joins_next = i < n && b->lo[i] == t + d;
    if (joins_prev && joins_next) { /* fills a gap exactly: two intervals become one */
        b->hi[i - 1] = b->hi[i];
        b->nbooked--;
        memmove(b->lo + i, b->lo + i + 1, (size_t)(n - i - 1) * sizeof(b->lo[0]));
        memmove(b->hi + i, b->hi + i + 1, (size_t)(n - i - 1) * sizeof(b->hi[0]));
        return t + d;
    }
    if (joins_prev) {
        b->hi[i - 1] = t + d;
        return t + d;
    }
    if (joins_next) {
        b->lo[i] = t;
        return t + d;
    }
    if (n == DCR__BUCKET_SLOTS) {
        if (t < b->hi[n - 1]) t = b->hi[n - 1];
        b->hi[n - 1] = t + d;
        return t + d;
    }
    memmove(b->lo + i + 1, b->lo + i, (size_t)(n - i) * sizeof(b->lo[0]));
    memmove(b->hi + i + 1, b->hi + i, (size_t)(n - i) * sizeof(b->hi[0]));
    b->lo[i] = t;
    b->hi[i] = t + d;
    b->nbooked++;
    return t + d;
}

/* Books n bytes on b in the earliest free interval at or after not_before;
 * returns its end. */
static uint64_t dcr__bucket_reserve(dcr__bucket_t *b, size_t n, uint64_t not_before, uint64_t now)
{
    uint64_t d = (uint64_t)((double)n * b->ns_per_byte);
    pthread_mutex_lock(&b->mu);
    dcr__bucket_forget(b, now > DCR__LINK_SLACK_NS ? now - DCR__LINK_SLACK_NS : 0);
    uint64_t t = not_before;
    int i = 0;
    for (; i < b->nbooked; i++) {
        if (b->hi[i] <= t) continue;
        if (b->lo[i] >= t + d) break;
        t = b->hi[i];
    }
    uint64_t end = dcr__bucket_book(b, i, t, d);
    pthread_mutex_unlock(&b->mu);
    return end;
}

bool dcr__sleep_until(uint64_t deadline_ns, const atomic_uint_fast64_t *gen, uint64_t gen0)
{
    for (;;) {
        if (gen != NULL && atomic_load(gen) != gen0) return false;
        uint64_t now = dcr_clock_ns();
        if (now + DCR__LINK_MIN_SLEEP_NS >= deadline_ns) return true;
        uint64_t until = deadline_ns - now > DCR__LINK_SLEEP_SLICE_NS
                             ? now + DCR__LINK_SLEEP_SLICE_NS
                             : deadline_ns;
        struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
}

dcr_status_t dcr__flow_pace(dcr__flow_t *f, size_t n)
{
    if (dcr__flow_cancelled(f)) return DCR_ECLOSED;
    uint64_t now = dcr_clock_ns();
    /* A flow that kept moving continues from its virtual clock even when the
     * real clock ran a little ahead; one that idled starts from now. */
    uint64_t start = now;
    if (f->next_ns > now || now - f->next_ns < DCR__LINK_SLACK_NS) start = f->next_ns;
    if (f->next_ns == 0) start = now;
    start += f->latency_ns;
    f->latency_ns = 0;
    uint64_t end = start + (uint64_t)((double)n * f->ns_per_byte);
    for (int i = 0; i < f->nvia; i++) {
        uint64_t e = dcr__bucket_reserve(f->via[i], n, start, now);
        if (e > end) end = e;
    }
    f->next_ns = end;
    return dcr__sleep_until(end, f->gen, f->gen0) ? DCR_OK : DCR_ECLOSED;
}
