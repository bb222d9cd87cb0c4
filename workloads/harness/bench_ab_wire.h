/* The messages between dcr bench --ab-binary and its worker (dcr bench
 * --ab-worker FD), private to workloads/harness/bench_ab*.c. One message is
 * one line of JSON (an object) of at most DCR__AB_LINE_MAX bytes:
 *
 *   worker -> parent, once set up and warm:
 *       {"dcr_ab_worker": 1, "warmup": W, "refits": N, "config": {...}}
 *   parent -> worker:  {"refit": k}       run timed refit k (0, 1, ...)
 *   worker -> parent:  {"refit": k, "row": {...}}   its row
 *   parent -> worker:  {"finish": true}
 *   worker -> parent:  {"summary": {...}}  the run-wide figures; it exits 0
 *
 * A row and a summary carry exactly the fields of the tables in
 * bench_ab_wire.c, each typed and bounded; the decoder refuses a missing,
 * extra, mistyped or out-of-range field with one line naming it, so that
 * nothing a worker sends reaches a results file unchecked. */
#ifndef DCR_WORKLOADS_BENCH_AB_WIRE_H
#define DCR_WORKLOADS_BENCH_AB_WIRE_H

#include <stddef.h>

#include "workloads/harness/bench.h"

struct json_t;

#define DCR__AB_PROTOCOL 1
#define DCR__AB_LINE_MAX 65536

/* Reads lines from one descriptor (dcr__ab_reader_init). */
typedef struct dcr__ab_reader {
    int fd;
    char buf[DCR__AB_LINE_MAX];
    size_t used;
    size_t taken; /* bytes of the line returned last, dropped at the next read */
    /* -1, or a descriptor that turns readable when the writer has ended
     * (a pidfd): then, once nothing more is buffered, the input has ended
     * even if another process (one the writer left behind) holds it open. */
    int ended_fd;
} dcr__ab_reader_t;

/* An empty reader of fd, without an ended_fd. */
void dcr__ab_reader_init(dcr__ab_reader_t *r, int fd);

/* The next line (without its newline, NUL-terminated, valid until the next
 * call) into *line_p. timeout_ms < 0: wait for ever; stop_fd (>= 0, e.g.
 * dcr_interrupt_fd) ends the wait with DCR_EINTR when it turns readable.
 * DCR_ETIMEOUT when nothing came in time, DCR_EIO at end of input (the
 * peer closed: detail "ended") or on a read error, DCR_EPARSE for a line
 * over DCR__AB_LINE_MAX bytes (still in the buffer) or one holding a NUL
 * byte (dropped at the next call). */
dcr_status_t dcr__ab_read_line(dcr__ab_reader_t *r, int timeout_ms, int stop_fd, char **line_p);

/* The next line as a JSON object (DCR_EPARSE for anything else). A new
 * reference. */
dcr_status_t dcr__ab_read_msg(dcr__ab_reader_t *r, int timeout_ms, int stop_fd,
                              struct json_t **msg_p);

/* Writes msg as one line (steals the reference). DCR_EIO when the peer is
 * gone (no SIGPIPE). */
dcr_status_t dcr__ab_send(int fd, struct json_t *msg);

/* A refit's row, and back (DCR_EPARSE, one line naming the field). */
struct json_t *dcr__ab_row_json(const dcr_bench_refit_t *f);
dcr_status_t dcr__ab_row_parse(const struct json_t *j, dcr_bench_refit_t *out);

/* The run-wide figures a worker's setup knows (checkpoint, roles, tensors,
 * refusals, memory), and back into res. */
struct json_t *dcr__ab_summary_json(const dcr_bench_result_t *r);
dcr_status_t dcr__ab_summary_parse(const struct json_t *j, dcr_bench_result_t *res);

/* Whether j is a configuration a results file may hold: an object of at
 * most 256 keys of [a-z0-9_] (1..64 bytes), each a string of at most 4096
 * bytes, a finite number, a boolean or null. DCR_EPARSE naming what is
 * wrong. */
dcr_status_t dcr__ab_config_check(const struct json_t *j);

#endif
