/* Stage tracing: every stage of a refit is an NVTX range in domain "dcr"
 * (when built with the CUDA toolkit's nvtx3 headers; compiled out otherwise)
 * and an interval in a low-overhead recorder (per-thread buffers, monotonic
 * clock), tagged with its actor (owner, sending endpoint, rollout node,
 * receiver, coordinator) and the refit number. The recorder feeds the lower
 * bounds (DESIGN.md section 8) and the Chrome trace / HDF5 exports.
 *
 * Recording is off until dcr_trace_enable(true); a disabled span costs one
 * branch, an enabled one two clock reads and a buffer write. Spans are used
 * on one thread: begin and end on the same thread. NVTX ranges are pushed
 * only while recording is on and a tool (Nsight Systems) is attached; their
 * message carries the tags ("compare owner=3 refit=7", see
 * dcr_trace_format_message) so that an nsys export holds everything the
 * bounds need. */
#ifndef DCR_TRACE_H
#define DCR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

typedef enum dcr_stage {
    /* construction (owners): the compute intervals of the construction bound */
    DCR_STAGE_COMPARE = 0, /* change detection against the tracker */
    DCR_STAGE_PROJECT,     /* changed indices and values to canonical records */
    DCR_STAGE_RESIDUAL,    /* residual conversion and assembly */
    DCR_STAGE_ENCODE,      /* location and value buffers, item table */
    DCR_STAGE_ZSTD,        /* compression and digest */
    /* transport */
    DCR_STAGE_SEND, /* payload submission until the queueing acknowledgment (endpoint) */
    DCR_STAGE_RECV, /* download / receive on a rollout node */
    /* receivers */
    DCR_STAGE_STAGING, /* decode into the staging queue */
    DCR_STAGE_APPLY,   /* loader application of a payload */
    DCR_STAGE_SYNC,    /* device synchronization */
    /* finalization */
    DCR_STAGE_ACK,
    DCR_STAGE_COMMIT,
    DCR_STAGE_BASELINE, /* owners' in-place baseline update */
    DCR_STAGE_REFIT,    /* the whole timed window [t0, t1] (coordinator) */
    DCR_STAGE_CHECK,    /* post-apply check inside the window: not part of the latency */
    /* transport, appended so that stage numbers saved before it (HDF5) keep their meaning */
    DCR_STAGE_FETCH, /* object store: a rollout node's download of one endpoint's payload,
                        from the GET's start until the node queued the verified payload */
    DCR_STAGE_COUNT
} dcr_stage_t;

typedef enum dcr_actor {
    DCR_ACTOR_OWNER = 0,
    DCR_ACTOR_ENDPOINT, /* an owner's sending transport endpoint */
    DCR_ACTOR_NODE,     /* a rollout node */
    DCR_ACTOR_RECEIVER,
    DCR_ACTOR_COORD,
    DCR_ACTOR_COUNT
} dcr_actor_t;

/* "compare", "project", ...; "owner", "endpoint", ... ("?" when out of range). */
const char *dcr_stage_name(dcr_stage_t stage);
const char *dcr_actor_name(dcr_actor_t actor);
/* The inverse lookups, exact and case-sensitive; DCR_ENOTFOUND for any other text. */
dcr_status_t dcr_stage_from_name(const char *name, dcr_stage_t *out_p);
dcr_status_t dcr_actor_from_name(const char *name, dcr_actor_t *out_p);

/* One recorded interval, times in ns on dcr_clock_ns's axis. */
typedef struct dcr_trace_interval {
    uint64_t start_ns, end_ns;
    uint32_t refit; /* refit number current when the span began */
    uint16_t stage; /* dcr_stage_t */
    uint16_t actor; /* dcr_actor_t */
    int32_t id;     /* owner rank, node, receiver index, ... */
} dcr_trace_interval_t;

/* An open span, a value on the caller's stack; filled by dcr_trace_begin. */
typedef struct dcr_trace_span {
    uint64_t start_ns; /* 0 when recording was off at begin (end then does nothing) */
    uint16_t stage, actor;
    int32_t id;
    uint32_t refit; /* refit number current at begin */
    bool nvtx;      /* an NVTX range was pushed at begin and must be popped */
} dcr_trace_span_t;

/* Turns recording (and NVTX ranges, when a tool is attached) on or off for
 * spans that begin from now on. Thread-safe. */
void dcr_trace_enable(bool on);
bool dcr_trace_enabled(void);
/* The refit number stamped on spans that begin from now on. Thread-safe. */
void dcr_trace_set_refit(uint32_t refit);

/* Opens a span of stage on actor `id`. Out-of-range stage or actor gives a
 * disabled span. */
dcr_trace_span_t dcr_trace_begin(dcr_stage_t stage, dcr_actor_t actor, int id);
/* Closes the span and records its interval; a second end of the same span,
 * or the end of a disabled one, does nothing. */
void dcr_trace_end(dcr_trace_span_t *span);
/* Abandons the span without recording it (e.g. a receive that timed out),
 * popping its NVTX range; every span begun must be ended or cancelled, or the
 * NVTX range stack of the thread is left unbalanced. */
void dcr_trace_cancel(dcr_trace_span_t *span);
/* Records an interval measured elsewhere (e.g. the refit window), stamped with
 * the current refit number; only while recording is on. end_ns < start_ns,
 * or an out-of-range stage or actor, is dropped. No NVTX range: NVTX cannot
 * time-stamp the past (the nsys import infers the window instead). */
void dcr_trace_record(dcr_stage_t stage, dcr_actor_t actor, int id, uint64_t start_ns,
                      uint64_t end_ns);
/* As dcr_trace_record with an explicit refit number. */
void dcr_trace_record_refit(dcr_stage_t stage, dcr_actor_t actor, int id, uint32_t refit,
                            uint64_t start_ns, uint64_t end_ns);

/* A malloc'd copy of every interval recorded so far, sorted by start (then
 * end, stage, actor, id, refit); the caller frees it. *out_p is NULL when
 * none. Safe while other threads record: an interval being written at that
 * moment is either wholly in the copy or not in it. */
dcr_status_t dcr_trace_snapshot(dcr_trace_interval_t **out_p, size_t *n_p);
/* As dcr_trace_snapshot, limited to the intervals that end at or after
 * since_ns; its cost follows those intervals, not the whole recording (the
 * bench takes one per refit, so a long run stays flat). */
dcr_status_t dcr_trace_snapshot_since(uint64_t since_ns, dcr_trace_interval_t **out_p, size_t *n_p);
/* Frees recorded intervals that ended before before_ns, as far as this can be
 * done while other threads record: those in buffers whose thread filled them
 * or has ended; a live thread's current buffer (at most 1024 intervals) is
 * kept. A caller that needs no full trace calls it after each refit so that
 * a long run holds no more than one refit's intervals. Safe while other
 * threads record; a later snapshot may still hold some older intervals. */
void dcr_trace_discard_before(uint64_t before_ns);
/* Drops every recorded interval and frees the buffers. Must not run while
 * another thread records (call it between runs, when the threads that record
 * are idle or joined); threads record again afterwards as usual. A span open
 * across a reset is recorded when it ends. */
void dcr_trace_reset(void);
/* Intervals lost because a buffer could not be allocated (since the last reset). */
uint64_t dcr_trace_dropped(void);

/* The NVTX message of a span: "<stage> <actor>=<id> refit=<refit>", e.g.
 * "compare owner=3 refit=7". Returns the length snprintf would (cut to cap). */
int dcr_trace_format_message(char *buf, size_t cap, dcr_stage_t stage, dcr_actor_t actor, int id,
                             uint32_t refit);
/* Parses such a message into out_p's stage, actor, id and refit (times
 * untouched). DCR_EPARSE, with the detail naming what was wrong, for any other
 * text (extra spaces, unknown names, numbers out of range, trailing text). */
dcr_status_t dcr_trace_parse_message(const char *msg, dcr_trace_interval_t *out_p);

/* ---- bounds (DESIGN.md section 8, the seed's Figure 11 text) ---- */

/* Every figure is in seconds. Intervals count by time, not by tag: each
 * interval is clipped to the refit's window [t0, t1] (empty intersections
 * dropped), as the seed does with nsys timestamps, so an interval whose refit
 * tag was set a little late still counts; the refit tag only selects the
 * window. Unions count overlapping intervals once. */
typedef struct dcr_bounds {
    double construction_lb_s; /* longest union of one owner's compute intervals (compare,
                                 project, residual, encode, zstd on DCR_ACTOR_OWNER) */
    double transport_lb_s;    /* longest union of one endpoint's transport intervals
                                 (DCR_STAGE_SEND and DCR_STAGE_FETCH on DCR_ACTOR_ENDPOINT):
                                 see bounds.c for why the object store's downloads count */
    double finalization_s;    /* end of the last apply interval to t1, less check time in
                                 between; 0 when nothing was applied in the window */
    double latency_s;         /* t1 - t0 less the union of check intervals (DCR_STAGE_CHECK) */
    double remainder_s;       /* latency - (max(bounds) + finalization): startup, drain,
                                 handoffs. Reported as is, never clamped: by the seed's
                                 definitions it cannot be negative, so a negative value
                                 flags a trace whose intervals are mis-tagged or mis-timed. */
    int busiest_owner,
        busiest_endpoint; /* ids behind the two bounds (the smaller id on a
                             tie); -1 when no such interval (ids are ranks and indices, so >= 0) */
} dcr_bounds_t;

/* Bounds of one refit from intervals (any order), clipped to [t0, t1]; the
 * refit's window is its DCR_STAGE_REFIT interval. DCR_ENOTFOUND when the
 * refit has no window interval, DCR_EINVAL when it has more than one. */
dcr_status_t dcr_bounds_compute(const dcr_trace_interval_t *iv, size_t n, uint32_t refit,
                                dcr_bounds_t *out_p);

/* The refit numbers that have a window interval, ascending and distinct, in
 * a malloc'd array the caller frees (*refits_p NULL when none). */
dcr_status_t dcr_bounds_refits(const dcr_trace_interval_t *iv, size_t n, uint32_t **refits_p,
                               size_t *n_p);

/* As dcr_bounds_compute for every refit that has a window (refits and out_p
 * as dcr_bounds_refits returns them and n_refits entries of bounds): sorts
 * iv by start in place, then takes each window's figures from the intervals
 * that can reach it, so a trace of a million intervals over hundreds of
 * refits costs a sort rather than refits x intervals. Same results and
 * errors as calling dcr_bounds_compute per refit. */
dcr_status_t dcr_bounds_compute_all(dcr_trace_interval_t *iv, size_t n, const uint32_t *refits,
                                    size_t n_refits, dcr_bounds_t *out_p);

/* How far (ns) an interval may reach outside every refit window, and a
 * window's end past the last work inside it, before a trace is refused: the
 * slack of a refit tag set a little late and of clocks read on different
 * threads, far below anything a user would read as a latency. */
#define DCR_BOUNDS_TOLERANCE_NS 1000000000ull

/* Refuses a trace whose figures would be nonsense (DCR_EINVAL, one line
 * naming the interval): an interval that lies outside every refit window by
 * more than tolerance_ns, or a window that ends more than tolerance_ns after
 * the last stage interval that starts before its end (nothing timed it
 * there), or one with no stage interval inside at all. iv must be sorted by
 * start (dcr_bounds_compute_all leaves it so); a trace without windows
 * passes (the caller reports that). */
dcr_status_t dcr_bounds_check_windows(const dcr_trace_interval_t *iv, size_t n,
                                      uint64_t tolerance_ns);

/* Field-wise means of n bounds, as the seed averages per-refit figures;
 * busiest_* are -1 (a mean has no single busiest actor). n == 0 gives zeros. */
void dcr_bounds_mean(const dcr_bounds_t *b, size_t n, dcr_bounds_t *out_p);

/* ---- the critical path (what each refit's wall time went to) ---- */

/* One piece of a refit's window on its critical path. Work: the interval
 * (stage, actor, id) ran over [start_ns, end_ns] and the path went through
 * it. Wait: nothing on the path ran; stage/actor/id name the interval that
 * ended at start_ns (the side handing off; DCR_STAGE_REFIT on
 * DCR_ACTOR_COORD when the window's start is all there was before it).
 * after_stage/after_actor name the work that came next on the path
 * (DCR_STAGE_REFIT on DCR_ACTOR_COORD: the window's end, t1). */
typedef struct dcr_path_segment {
    uint64_t start_ns, end_ns;
    bool wait;
    uint16_t stage, actor;
    int32_t id;
    uint16_t after_stage, after_actor;
} dcr_path_segment_t;

/* The critical path of the window [t0, t1] through intervals iv[0..n) (any
 * order; each is clipped to the window, window intervals and check-free
 * filters left to the caller): a walk back from t1 that at each time takes
 * the covering interval that started first, or else waits back to the
 * interval that ended last (engine/trace/critical.c says why). The segments,
 * in time order, tile [t0, t1] exactly (no gap, no overlap: their lengths sum
 * to t1 - t0); *seg_p is malloc'd for the caller to free (NULL with no
 * segment, when t0 == t1). Cost: one pass over iv, a sort of the window's
 * intervals, and two binary searches per segment. */
dcr_status_t dcr_critical_path(const dcr_trace_interval_t *iv, size_t n, uint64_t t0, uint64_t t1,
                               dcr_path_segment_t **seg_p, size_t *nseg_p);

/* Chrome trace JSON export/import and the Nsight Systems import live in
 * reports/trace_io.h (they need a JSON parser and SQLite; the engine does not). */

#endif
