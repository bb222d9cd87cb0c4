/* Interleaved A/B runs (dcr bench --ab, dcr bench --ab-binary): two sides
 * stepped refit by refit in ABBA order, so that the two refits of a pair
 * run seconds apart and see the same neighbours on a shared machine.
 *
 * A side is one interface with two implementations: a bench set up in this
 * process (dcr_bench_side_local, both sides of --ab and side A of
 * --ab-binary), or another dcr binary that runs the same bench as a worker
 * process and answers one timed refit per request over a socket
 * (dcr_bench_side_binary, side B of --ab-binary). Only one side runs at a
 * time: the other is blocked (a local side simply is not called; a worker
 * blocks reading its socket). */
#ifndef DCR_WORKLOADS_BENCH_AB_H
#define DCR_WORKLOADS_BENCH_AB_H

#include <stdbool.h>
#include <stddef.h>

#include "dcr/ops.h"
#include "workloads/harness/bench.h"

struct json_t;

typedef struct dcr_bench_side dcr_bench_side_t;

#define DCR_BENCH_SIDE_OPS_VERSION 1

typedef struct dcr_bench_side_ops {
    dcr_ops_header_t hdr; /* name: "local" or "binary" */
    /* Refit `step` of the run (steps below the warm-up count are warm-ups;
     * a worker made its own before it said it was ready, so they cost it
     * nothing). Blocks until the refit is done; *out is its row. */
    dcr_status_t (*refit)(dcr_bench_side_t *s, int step, bool timed, dcr_bench_refit_t *out);
    /* Blocks until the side is set up and warm, before the first timed
     * refit of either side (a worker sets up while this process does). */
    dcr_status_t (*ready)(dcr_bench_side_t *s);
    /* After the last timed refit: the run-wide figures around the refits
     * the caller put in res (dcr_bench_session_finish's). */
    dcr_status_t (*finish)(dcr_bench_side_t *s, dcr_bench_result_t *res);
    void (*destroy)(dcr_bench_side_t *s);
} dcr_bench_side_ops_t;

/* Every side starts with this (its ops). */
struct dcr_bench_side {
    const dcr_bench_side_ops_t *ops;
};

/* A side set up in this process (dcr_bench_session_create: its rules and
 * errors); cfg is borrowed and must outlive the side. */
dcr_status_t dcr_bench_side_local(const dcr_bench_config_t *cfg, dcr_bench_side_t **out_p);

/* The wrappers every caller uses. destroy accepts NULL. */
dcr_status_t dcr_bench_side_refit(dcr_bench_side_t *s, int step, bool timed,
                                  dcr_bench_refit_t *out);
dcr_status_t dcr_bench_side_ready(dcr_bench_side_t *s);
dcr_status_t dcr_bench_side_finish(dcr_bench_side_t *s, dcr_bench_result_t *res);
void dcr_bench_side_destroy(dcr_bench_side_t *s);

/* The ABBA schedule over two sides: warm-up refits k = 0..warmup-1 of both,
 * then both sides ready, then timed refits: pair k (the k-th timed refit of
 * each side, refit.block = k, step warmup + k) runs A then B when k is even
 * and B then A when k is odd. out[0] is A's result, out[1] B's (ab_side 'A'
 * and 'B', refits allocated here: free each with dcr_bench_result_free); on
 * an error nothing is left in out. */
dcr_status_t dcr_bench_ab_alternate(dcr_bench_side_t *const side[2], int warmup, int refits,
                                    dcr_bench_result_t out[2]);

/* ---- another dcr binary as side B (dcr bench --ab-binary) ---------------- */

/* The one check of a binary this process will execute, given by the user
 * (`flag` names it in the error): a path of at most 4095 bytes without
 * control characters, naming (through links) an existing regular file this
 * user may execute. Its absolute, resolved path goes to resolved[0..cap),
 * so that a later change of the working folder or of the link cannot
 * change what runs. DCR_EINVAL or DCR_ENOTFOUND with one line. */
dcr_status_t dcr_bench_exec_check(const char *flag, const char *path, char *resolved, size_t cap);

/* Runs `exe --version` (exe checked by dcr_bench_exec_check; no shell: an
 * argument vector) and returns its one line, without the newline, in
 * out[0..cap): it must exit 0 within 10 s and print exactly one line of
 * printable ASCII, at most 200 bytes, that begins with "dcr ". Anything
 * else is DCR_EINVAL with one line ("is not a dcr binary: ..."). */
dcr_status_t dcr_bench_binary_version(const char *exe, char *out, size_t cap);

/* Side B of --ab-binary: `exe bench ARGS... --ab-worker 3`, its socket on
 * descriptor 3, its stdin /dev/null, its stdout and stderr read by this
 * process (forwarded prefixed "[side B] " when the log level is info or
 * more, and the last line kept for the error of a side that fails). It
 * dies with this process (PR_SET_PDEATHSIG). Everything it sends is
 * checked: every message a bounded line of JSON, every field present,
 * typed and within its range, no field unknown, the refit numbers the ones
 * asked for; a side that sends anything else, says nothing within the
 * timeouts, or ends early, fails the run with one line naming `exe`. */
typedef struct dcr_bench_binary_config {
    const char *exe;   /* resolved by dcr_bench_exec_check */
    const char *name;  /* what the error lines call it (the path as given) */
    char *const *args; /* the bench flags of the worker (read at creation only) */
    int nargs;
    int warmup, refits;   /* what the worker must announce */
    bool verify;          /* every row must say it was verified (or, false, that it was not) */
    int ready_timeout_ms; /* setup and warm-up; 0: one hour */
    int reply_timeout_ms; /* one refit, and the summary; 0: 15 minutes */
} dcr_bench_binary_config_t;

dcr_status_t dcr_bench_side_binary(const dcr_bench_binary_config_t *cfg, dcr_bench_side_t **out_p);

/* The configuration the worker announced (a JSON object of scalars, checked
 * as everything it sends), once ready; NULL before. Borrowed. */
const struct json_t *dcr_bench_side_binary_config(const dcr_bench_side_t *s);

/* The worker (dcr bench ... --ab-worker FD): sets cfg up with its warm-up
 * refits, says it is ready on fd (with `config`, its configuration's JSON,
 * as dcr_bench_config_json writes it), then runs one timed refit per
 * request and answers with its row, and at the end its run-wide figures.
 * Blocks reading fd between requests. Returns when the run is done
 * (DCR_OK), or with the error that ended it; a parent that went away is
 * DCR_EIO. */
dcr_status_t dcr_bench_ab_worker_run(const dcr_bench_config_t *cfg, int fd,
                                     const struct json_t *config);

#endif
