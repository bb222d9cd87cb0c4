/* Stage tracing: every stage of a refit is an NVTX range in domain "dcr"
 * (when built with the CUDA toolkit's nvtx3 headers; compiled out otherwise)
 * and an interval in a low-overhead recorder (per-thread buffers, monotonic
 * clock), tagged with its actor (owner, sending endpoint, rollout node,
 * receiver, coordinator) and the refit number. The recorder feeds the lower
 * bounds (DESIGN.md section 8) and the Chrome trace / HDF5 exports.
 *
 * Recording is off until dcr_trace_enable(true); a disabled span costs one
 * branch. Spans are used on one thread: begin and end on the same thread. */
#ifndef DCR_TRACE_H
#define DCR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

typedef enum dcr_stage {
    /* construction (owners): the compute intervals of the construction bound */
    DCR_STAGE_COMPARE = 0,  /* change detection against the tracker */
    DCR_STAGE_PROJECT,      /* changed indices and values to canonical records */
    DCR_STAGE_RESIDUAL,     /* residual conversion and assembly */
    DCR_STAGE_ENCODE,       /* location and value buffers, item table */
    DCR_STAGE_ZSTD,         /* compression and digest */
    /* transport */
    DCR_STAGE_SEND,         /* payload submission until the queueing acknowledgment (endpoint) */
    DCR_STAGE_RECV,         /* download / receive on a rollout node */
    /* receivers */
    DCR_STAGE_STAGING,      /* decode into the staging queue */
    DCR_STAGE_APPLY,        /* loader application of a payload */
    DCR_STAGE_SYNC,         /* device synchronization */
    /* finalization */
    DCR_STAGE_ACK,
    DCR_STAGE_COMMIT,
    DCR_STAGE_BASELINE,     /* owners' in-place baseline update */
    DCR_STAGE_REFIT,        /* the whole timed window [t0, t1] (coordinator) */
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

/* "compare", "project", ...; "owner", "endpoint", ... */
const char *dcr_stage_name(dcr_stage_t stage);
const char *dcr_actor_name(dcr_actor_t actor);

/* One recorded interval, times in ns on dcr_clock_ns's axis. */
typedef struct dcr_trace_interval {
    uint64_t start_ns, end_ns;
    uint32_t refit;   /* refit number current when the span began */
    uint16_t stage;   /* dcr_stage_t */
    uint16_t actor;   /* dcr_actor_t */
    int32_t id;       /* owner rank, node, receiver index, ... */
} dcr_trace_interval_t;

typedef struct dcr_trace_span {
    uint64_t start_ns; /* 0 when recording was off at begin */
    uint16_t stage, actor;
    int32_t id;
} dcr_trace_span_t;

void dcr_trace_enable(bool on);
bool dcr_trace_enabled(void);
/* The refit number stamped on spans that begin from now on. */
void dcr_trace_set_refit(uint32_t refit);

dcr_trace_span_t dcr_trace_begin(dcr_stage_t stage, dcr_actor_t actor, int id);
void dcr_trace_end(dcr_trace_span_t *span);
/* Records an interval measured elsewhere (e.g. the refit window). */
void dcr_trace_record(dcr_stage_t stage, dcr_actor_t actor, int id, uint64_t start_ns, uint64_t end_ns);

/* A malloc'd copy of every interval recorded so far, sorted by start (the
 * caller frees it). Safe while other threads record. */
dcr_status_t dcr_trace_snapshot(dcr_trace_interval_t **out_p, size_t *n_p);
/* Drops every recorded interval. */
void dcr_trace_reset(void);

/* ---- bounds (DESIGN.md section 8, the seed's Figure 11 text) ---- */

typedef struct dcr_bounds {
    double construction_lb_s; /* longest union of one owner's compute intervals in [t0, t1] */
    double transport_lb_s;    /* longest union of one endpoint's send intervals in [t0, t1] */
    double finalization_s;    /* end of the last apply interval to t1 */
    double latency_s;         /* t1 - t0 */
    double remainder_s;       /* latency - (max(bounds) + finalization), startup, drain, handoffs */
    int busiest_owner, busiest_endpoint;
} dcr_bounds_t;

/* Bounds of one refit from intervals (any order), clipped to [t0, t1]; the
 * refit's window is its DCR_STAGE_REFIT interval. DCR_ENOTFOUND when the
 * refit has no window interval. */
dcr_status_t dcr_bounds_compute(const dcr_trace_interval_t *iv, size_t n, uint32_t refit, dcr_bounds_t *out_p);

/* Chrome trace JSON export/import and the Nsight Systems import live in
 * reports/trace_io.h (they need a JSON parser and SQLite; the engine does not). */

#endif
