/* Plausibility of a trace before bounds are computed from it: a trace that
 * a bug, a clock jump or a hostile file made inconsistent must be refused
 * with one line, not turned into a latency of 9.2e9 s. */
#ifndef DCR_REPORTS_TRACE_CHECK_H
#define DCR_REPORTS_TRACE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"
#include "dcr/trace.h"

/* The tolerance of dcr_trace_check_windows: 1 s. Real traces keep every
 * stage inside its refit window (the recorder opens the window before the
 * first stage and closes it after the last baseline update), so anything
 * further out is not timing noise. */
#define DCR_TRACE_WINDOW_TOLERANCE_NS 1000000000ull

/* Checks that every interval ends no earlier than it starts, that every
 * interval other than a refit window (DCR_STAGE_REFIT) lies within some
 * window widened by tolerance_ns on both sides, and that every window ends
 * within tolerance_ns of the last interval inside it, or of its start when
 * nothing is inside (a window stretched to the end of time has nothing in it
 * to end with). DCR_EPARSE naming the
 * first offending interval (refit, stage, actor, id, times) otherwise. A
 * trace without windows passes (there is nothing to bound). n log n. */
dcr_status_t dcr_trace_check_windows(const dcr_trace_interval_t *iv, size_t n,
                                     uint64_t tolerance_ns);

#endif
