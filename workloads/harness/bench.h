/* `dcr bench`: end-to-end refits between an emulated training cluster and an
 * emulated rollout cluster in one process, timed in the seed's window, with
 * the transport-only full-checkpoint reference over the same links and a
 * bit-exact comparison of every receiver with a dense refit after every
 * timed refit (outside the window). */
#ifndef DCR_WORKLOADS_BENCH_H
#define DCR_WORKLOADS_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/construct.h"
#include "dcr/control.h"
#include "dcr/coord.h"
#include "dcr/thread.h"
#include "dcr/transport.h"
#include "workloads/harness/run_config.h"

/* Rollout nodes as processes (dcr bench --processes; deploy/roles.h):
 * the bench keeps the owners and the coordinator in this process, the
 * launcher's callbacks start one process per rollout node once the control
 * plane holds version 0, check versions first..last through a verifier
 * process after the timed refits (ok[v - first]), and stop the processes. */
typedef struct dcr_bench_processes {
    /* temporary: the bench made workdir and removes it; whatever kills this
     * process, it must not outlive it either. control: the control plane's
     * file when the bench chose one outside workdir (workdir_in_memory),
     * which every role must then be told; it is alone in a temporary folder
     * of the bench's, which must not outlive this process either. NULL: the
     * run's (run.control_path, or workdir's control.db). */
    dcr_status_t (*start)(void *ctx, const char *workdir, const char *control, bool temporary);
    dcr_status_t (*verify)(void *ctx, const char *workdir, uint64_t first, uint64_t last, bool *ok);
    void (*stop)(void *ctx);
    void *ctx;
    /* The owners are processes too (an MPI job the launcher starts): the
     * coordinator of this process runs in remote-owners mode (dcr/coord.h). */
    bool owners;
    /* One transition by the coordinator process (with the owners as
     * processes); NULL: by the coordinator of this process. */
    dcr_status_t (*refit)(void *ctx, dcr_refit_result_t *out);
} dcr_bench_processes_t;

typedef struct dcr_bench_config {
    /* What every process of the run shares (workloads/harness/run_config.h). */
    dcr_run_config_t run;
    int warmup, refits;
    bool verify; /* dense-refit comparison after every timed refit */
    const char
        *workdir_flag;  /* the flag that named run.workdir, for error lines; NULL: --workdir */
    bool keep_payloads; /* the object store's last attempt stays in workdir (--keep-payloads) */
    /* With no run.workdir, the temporary run directory (the emulated object
     * store, retained versions, traces, digests) goes to a memory-backed
     * folder when one has room (dcr_workdir_memory_parent), and with no
     * run.control_path the control plane's file to a temporary folder of
     * its own on the disk: so that the commit's synchronous write does not
     * wait on the journal of a file system that also takes the store's
     * writes. A deployment's store is remote and its control plane has its
     * own disk; this is the closer model (dcr bench sets it). */
    bool workdir_in_memory;
    int readers; /* request emulation: threads reading receiver 0 through the gate */
    /* Measures the recorder's cost in one run: timed refits alternate with
     * the recorder on and off in the order on, off, off, on (repeated), so
     * that a drift of the machine weighs on both sides alike. Needs at least
     * 4 timed refits; bounds exist only for the recorded ones. */
    bool trace_overhead;
    /* Keep every recorded interval for dcr_trace_snapshot after the run
     * (--trace, --out). Otherwise each refit's intervals are freed once its
     * bounds are computed, so that a long run does not grow. */
    bool keep_trace;
    /* Called after every timed refit, outside the window and after the
     * dense-refit comparison, with the committed version and the receivers
     * (e.g. a digest verifier in tests); NULL: none. A non-OK status stops
     * the run with that error. */
    dcr_status_t (*after_refit)(void *ctx, uint64_t version, dcr_receiver_t *const *receivers,
                                int n);
    void *after_refit_ctx;
    /* NULL: every role in this process (threads). */
    const dcr_bench_processes_t *processes;
    /* The object-store full-checkpoint reference run by the caller instead
     * of in this process over the emulated links (dcr bench --testbed: timed
     * transfers over the testbed's shaped links). per_node_bytes: what each
     * of train_nodes training nodes uploads; every one of rollout_nodes
     * rollout nodes downloads all of it. NULL: in this process. */
    dcr_status_t (*reference)(void *ctx, const int64_t *per_node_bytes, int train_nodes,
                              int rollout_nodes, double *seconds_p);
    void *reference_ctx;
    /* CPU seconds the run's object store has used so far (dcr bench
     * --testbed: the s3rver process), read just before and just after each
     * refit; negative: unknown. NULL: no store of the caller's. On a
     * one-threaded store a refit's share is a floor under its latency. */
    double (*store_cpu_s)(void *ctx);
    void *store_cpu_ctx;
} dcr_bench_config_t;

/* The embedded default: dcr_run_config_default's run, 2 warm-up and 5 timed
 * refits, verification on. */
dcr_bench_config_t dcr_bench_config_default(void);

typedef struct dcr_bench_refit {
    double latency_s, construction_s, finalization_s;
    int64_t payload_bytes, cross_bytes, raw_changed_value_bytes, changed_elements, records,
        payloads;
    int attempts;
    /* From the stage trace (DESIGN.md section 8): the seed's lower bounds;
     * 0 when the refit was not traced. */
    double construction_lb_s, transport_lb_s, bound_finalization_s, remainder_s;
    bool traced;       /* the recorder was on during the refit */
    int64_t intervals; /* intervals recorded for the refit (tagged with its number) */
    bool bit_exact; /* every receiver equals its dense refit (true when verify is off: not checked)
                     */
    bool verified;
    /* CPU seconds the engine's threads of each role spent in the refit
     * (dcr/thread.h): owners, rollout nodes, transport. Counted when a
     * thread ends, so a relay tree's threads land in the refit that tore
     * the tree down; means over many refits are what to read. */
    double cpu_s[DCR_THREAD_ROLES];
    /* Flatness over long runs: the whole step's wall time (change injection,
     * refit, bounds, verification: everything the run spends per refit, not
     * only the timed window), and the process's resident bytes after it. */
    double wall_s;
    int64_t rss_bytes;
    /* With config.store_cpu_s: the store's CPU seconds across this refit
     * (from just before the refit's call to just after); 0 otherwise. */
    double store_cpu_s;
    /* Retention of the committed version (dcr/recovery.h; 0 without
     * --retain): bytes copied to versions/ and the seconds the copy took,
     * in the background while the next step's changes are made, and how
     * long the next refit (or the run's end) waited for it. */
    int64_t retain_bytes;
    double retain_s, retain_wait_s;
    /* --ab (dcr_bench_run_ab): the pair the refit belongs to (k for the
     * k-th timed refit of each side), the same number on both sides for
     * the two refits that ran next to each other; 0 otherwise. */
    int block;
} dcr_bench_refit_t;

typedef struct dcr_bench_result {
    int64_t checkpoint_bytes;
    int receivers, owners;
    double reference_s; /* object-store full-checkpoint reference */
    double
        relay_reference_s; /* full checkpoint through the relay tree; 0 unless transport is relay */
    double mean_latency_s, speedup;
    double construction_lb_mean_s, transport_lb_mean_s, finalization_mean_s;
    double cpu_mean_s[DCR_THREAD_ROLES]; /* CPU per refit by thread role (dcr/thread.h) */
    /* The refits' store_cpu_s, mean, and whether it was measured (the
     * config's store_cpu_s hook; the JSON names both only then). */
    double store_cpu_mean_s;
    bool store_cpu_measured;
    double payload_bytes_mean, cross_bytes_mean, raw_changed_value_bytes_mean;
    bool bit_exact;     /* every verified refit was bit-exact */
    int node_processes; /* rollout nodes run as processes of their own (0: threads) */
    int nrefits;
    dcr_bench_refit_t *refits; /* nrefits entries; freed by dcr_bench_result_free */
    size_t xor_tensors, overwrite_tensors;
    /* Request emulation: reads of receiver 0 made through the request gate
     * while refits ran, and those that saw neither P^v nor P^{v+1}. */
    int64_t requests, request_mismatches;
    /* Payloads refused over the run: by the transport where they entered the
     * rollout cluster plus by the receivers, and of those the authentication
     * failures (transport counters' and receiver stats' unauthenticated). 0
     * in a healthy run. */
    int64_t payloads_rejected, payloads_unauthenticated;
    /* With trace_overhead: mean latency of the recorded and of the other
     * timed refits, how many of each, the measured cost of one span (begin
     * and end) on this machine, and the mean intervals per recorded refit.
     * The bound means above cover the recorded refits only. */
    /* The peak the bench estimated before allocating (workloads/change/budget.h)
     * and the process's peak resident bytes at the end (ru_maxrss). */
    int64_t memory_estimate_bytes, peak_rss_bytes;
    /* The run directory was in memory (dcr_bench_config_t.workdir_in_memory). */
    bool workdir_in_memory;
    /* Rollout-node processes: receiver restores over the run by kind, in
     * the order clean, replay, repair, dense, anchor (deploy/restorer.h),
     * the bytes they moved, what dense refits would have moved, and their
     * seconds (each receiver's, from its classification to its check). */
    /* indexed by dcr_restore_kind_t (deploy/restorer.h; bench.c checks the count) */
    uint64_t restores_by_kind[5], restore_bytes[5], restore_dense_bytes[5];
    double restore_s[5];
    /* --ab: 'A' or 'B', the side of an interleaved run (dcr_bench_run_ab);
     * 0 for a plain run. Its refits carry block ids. */
    char ab_side;
    struct {
        int refits_on, refits_off;
        double latency_on_s, latency_off_s, span_ns, intervals_per_refit;
    } overhead;
} dcr_bench_result_t;

/* The rules a bench configuration meets before anything runs, written once:
 * dcr bench, dcr faults, every role process (dcr_cli_run_config) and
 * dcr_bench_run check the same ones. process_roles: the rollout nodes will
 * be processes of their own (--processes; cfg->processes, the launcher's
 * hooks, may not be set yet). DCR_EINVAL with one line naming the flag:
 * no timed refit, processes with request readers, the run's rules
 * (dcr_run_config_check), --keep-payloads off the object store, and
 * --trace-overhead with fewer than 4 timed refits. */
dcr_status_t dcr_bench_config_check(const dcr_bench_config_t *cfg, bool process_roles);

/* Runs the benchmark with the stage recorder on (dcr/trace.h); with
 * keep_trace the caller can take dcr_trace_snapshot afterwards (for --trace).
 * Progress goes to the log (info). A bit mismatch is reported in the result
 * (bit_exact false), not as an error. */
dcr_status_t dcr_bench_run(const dcr_bench_config_t *cfg, dcr_bench_result_t *out_p);
void dcr_bench_result_free(dcr_bench_result_t *r);

/* The run-wide means of a result from its refits (refits[0..nrefits)):
 * latency, payload, cross and raw bytes, CPU by role, the bounds of the
 * traced refits, the recorder's on/off figures and bit_exact (all refits
 * exact). The other fields are left as they are. */
void dcr_bench_result_means(dcr_bench_result_t *res);

/* A bench set up once and then driven one refit at a time by its caller
 * (the interleaved runs of workloads/harness/bench_ab.h): every role in
 * this process, no reference, no request readers. create does the setup of
 * dcr_bench_run (its rules: dcr_bench_config_check, DCR_EINVAL with one
 * line); cfg is borrowed and must outlive the session. */
typedef struct dcr_bench_session dcr_bench_session_t;
dcr_status_t dcr_bench_session_create(const dcr_bench_config_t *cfg, dcr_bench_session_t **out_p);
/* Refit number `step` of the run (its changes come from the seed and step,
 * so two sessions with one seed make the same changes at the same step),
 * timed or a warm-up, verified after a timed one as dcr_bench_run verifies;
 * DCR_EINTR first when a stop signal arrived. *out is the refit's row. */
dcr_status_t dcr_bench_session_refit(dcr_bench_session_t *s, int step, bool timed,
                                     dcr_bench_refit_t *out);
/* Waits for background retention and fills the result's run-wide figures
 * (dcr_bench_result_means and the setup's: checkpoint, roles, tensors,
 * refusals, memory) around the refits the caller put in res. */
dcr_status_t dcr_bench_session_finish(dcr_bench_session_t *s, dcr_bench_result_t *res);
/* Whether the session's run directory is in memory (workdir_in_memory). */
bool dcr_bench_session_workdir_in_memory(const dcr_bench_session_t *s);
/* Tears the setup down (work folder included). Accepts NULL. */
void dcr_bench_session_destroy(dcr_bench_session_t *s);

/* Interleaved A/B in one process (dcr bench --ab): two configurations set
 * up side by side (each its own scenario, receivers, constructor,
 * transport, control plane and temporary work folder: nothing is shared,
 * so that neither side's refits touch the other's state), then refits
 * alternated in ABBA order: the k-th refit of each side forms pair k
 * (refit.block = k), run A then B when k is even and B then A when k is
 * odd (warm-up refits first, in the same order). A pair's two refits run
 * seconds apart, so the ratio B/A of a pair cancels the load they share;
 * the alternating order cancels any advantage of going first (and, over
 * two pairs, a load that drifts linearly). Both sides take the same
 * seed-derived changes when their seeds agree, and each is verified as
 * dcr_bench_run verifies (bit_exact per refit). The full-checkpoint
 * reference is not run (reference_s 0, speedup 0): only the refits are
 * compared. Rules (DCR_EINVAL, one line): each side's
 * dcr_bench_config_check, and dcr_bench_ab_check. out[0] is A's result,
 * out[1] B's; free each with dcr_bench_result_free. */
dcr_status_t dcr_bench_run_ab(const dcr_bench_config_t *a, const dcr_bench_config_t *b,
                              dcr_bench_result_t out[2]);

/* The rules of an A/B pair: the same warm-up and timed refit counts, both
 * sides in this process (no processes hooks, no caller's reference), no
 * request readers, no --trace-overhead, no kept trace, and no place the two
 * sides would share (work folder, control plane, store): each side makes a
 * temporary one of its own. */
dcr_status_t dcr_bench_ab_check(const dcr_bench_config_t *a, const dcr_bench_config_t *b);
/* The same, the error lines naming `flag` ("--ab-binary") instead of --ab. */
dcr_status_t dcr_bench_ab_check_as(const char *flag, const dcr_bench_config_t *a,
                                   const dcr_bench_config_t *b);

#endif
