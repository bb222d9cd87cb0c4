/* Trace files: the recorder's intervals (dcr/trace.h) as Chrome trace JSON,
 * which Perfetto and chrome://tracing open, and back; and the import of an
 * Nsight Systems SQLite export of the same NVTX ranges, so that `dcr bounds`
 * works on traces taken with nsys on a GPU cluster.
 *
 * Every reader validates all it reads and fails with one clear error line
 * (DCR_EIO when the file cannot be read, DCR_EPARSE naming the file, the
 * event or row, and what was wrong); output parameters are set only on
 * success, and the interval array they return is malloc'd for the caller to
 * free (NULL when there are no intervals). */
#ifndef DCR_REPORTS_TRACE_IO_H
#define DCR_REPORTS_TRACE_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "dcr/status.h"
#include "dcr/trace.h"

/* What a reader takes: a regular file (a device, pipe or socket is refused,
 * without waiting for a writer) of at most DCR_TRACE_FILE_MAX bytes, and in
 * a Chrome trace no single JSON value (an event, or a value of the root
 * object other than traceEvents) over DCR_TRACE_VALUE_MAX bytes; each
 * refusal is one error line naming the file (DCR_EIO for the file's type,
 * DCR_EINVAL for its size, DCR_EPARSE for a value). */
#define DCR_TRACE_FILE_MAX  (16ull << 30)
#define DCR_TRACE_VALUE_MAX (1u << 20)

/* Writes n intervals as Chrome trace JSON: one complete event ("ph":"X",
 * "cat":"dcr", named for its stage) per interval, ts and dur in microseconds
 * from the earliest start (exact to the nanosecond in decimal), one process
 * per actor kind and one thread per actor id, with name metadata. Each
 * event's args carry refit, stage, actor, id, start_ns and end_ns as exact
 * integers, which is what the reader uses. Writes a temporary file beside
 * path and renames it, so a failure never leaves a partial trace. */
dcr_status_t dcr_trace_write_chrome(const char *path, const dcr_trace_interval_t *iv, size_t n);

/* Reads what dcr_trace_write_chrome wrote, exactly, in file order. Accepts
 * the object form ({"traceEvents": [...]}) and the bare array form; events
 * other than complete events of category "dcr" (metadata, or events merged
 * in from other tools) are skipped, while a "dcr" event with missing or
 * malformed args is an error. */
dcr_status_t dcr_trace_read_chrome(const char *path, dcr_trace_interval_t **iv_p, size_t *n_p);

/* Reads the NVTX ranges of domain "dcr" from an Nsight Systems SQLite export
 * (`nsys export --type sqlite`). Assumed schema, from the Nsight Systems
 * export documentation: table NVTX_EVENTS(start, end, eventType, text,
 * globalTid, textId, domainId, ...) with times in ns on one session clock,
 * and StringIds(id, value) for registered strings. A domain is declared by a
 * row with eventType 75 (NvtxDomainCreate) whose text names it; its domainId
 * is per process (the process bits of globalTid). Ranges are the rows with
 * eventType 59 or 70 (push/pop) and 60 or 71 (start/end); their message
 * (text, else StringIds.value of textId) must parse with
 * dcr_trace_parse_message. Ranges still open at the end of the capture (end
 * NULL) are skipped. Since NVTX cannot time-stamp the past, the refit window
 * is not a range; for every refit without a DCR_STAGE_REFIT interval one is
 * inferred: t0 = the first owner's first compute interval, t1 = the end of
 * the last baseline update (the seed's definition; without compute or
 * baseline intervals, the first start or last end of that refit's
 * intervals). DCR_ENOTFOUND when the export has no range in domain "dcr".
 * Several exports (one per node) would need their clocks aligned first;
 * this reads one. */
dcr_status_t dcr_trace_read_nsys(const char *path, dcr_trace_interval_t **iv_p, size_t *n_p);

/* True when the file starts with the SQLite magic ("SQLite format 3\0"). */
bool dcr_trace_file_is_sqlite(const char *path);

/* Appends an inferred window interval (stage DCR_STAGE_REFIT, actor
 * DCR_ACTOR_COORD, id 0) for every refit number that has intervals but no
 * window, as described for dcr_trace_read_nsys. *iv_p is realloc'd. */
dcr_status_t dcr_trace_infer_windows(dcr_trace_interval_t **iv_p, size_t *n_p);

#endif
