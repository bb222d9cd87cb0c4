/* A bench run as its results say it, in every form beside one another: the
 * JSON object of `dcr bench --json`, its text report, and the run of an HDF5
 * results file (workloads/harness/results.h), whose config and summary
 * attributes are the same JSON. The commands print what these return; the
 * names of the figures are written here only. */
#ifndef DCR_WORKLOADS_RESULTS_JSON_H
#define DCR_WORKLOADS_RESULTS_JSON_H

#include <stdint.h>

#include "dcr/recovery.h"
#include "workloads/harness/bench.h"

struct json_t;

/* The run's configuration ("config"): the scenario, the serving layout, the
 * links, the change model, the run's counts and the output choices that
 * change what is measured (verify, trace_overhead). changes: the --changes text
 * as given (uniform, adamw, profile:FILE); store: the store the user named,
 * recorded as "store" (NULL: none named, no key). A new reference. */
struct json_t *dcr_bench_config_json(const dcr_bench_config_t *cfg, const char *changes,
                                     const char *store);

/* Records where the run directory was (dcr_bench_config_t.workdir_in_memory;
 * dcr_bench_result_t.workdir_in_memory) as the configuration's
 * "run_directory": "memory" or "disk". It moves the finalization figure (the
 * control plane's sync waits on the journal of a disk that also takes the
 * store's writes), so dcr compare pairs runs of one layout only. */
void dcr_bench_config_set_run_directory(struct json_t *config, bool in_memory);

/* The result with its configuration (a reference the object takes): the
 * means, the reference and speedup, CPU, memory, refusals, and "refits",
 * one object per timed refit. A new reference. */
struct json_t *dcr_bench_result_json(const dcr_bench_result_t *r, struct json_t *config);

/* The text report of a run on stdout (the links, one line per timed refit,
 * means, the recorder's cost, the reference and speedup). */
void dcr_bench_result_print(const dcr_bench_config_t *cfg, const dcr_bench_result_t *r);

/* Appends the run to the HDF5 results file at path (dcr_results_append):
 * the per-refit columns, config (sorted keys) and the summary (the result's
 * JSON without "config" and "refits"), and the recorded intervals
 * (dcr_trace_snapshot) when there are any. */
dcr_status_t dcr_bench_results_append(const char *path, const dcr_bench_result_t *r,
                                      struct json_t *config);

/* What the launcher of a --processes run counted: owner processes (0:
 * owner threads of the launching process), rollout-node restarts and
 * SIGKILLs, coordinator SIGKILLs and the coordinator processes that
 * resumed a transition. */
typedef struct dcr_bench_process_counts {
    int owner_processes, node_restarts, sigkills, coordinator_kills, coordinator_restarts;
} dcr_bench_process_counts_t;

/* The "processes" object of a --processes run. A new reference. */
struct json_t *dcr_bench_processes_json(const dcr_bench_result_t *r,
                                        const dcr_bench_process_counts_t *p);
/* The same as the text report's "processes: ..." and "restores: ..." lines. */
void dcr_bench_processes_print(const dcr_bench_result_t *r, const dcr_bench_process_counts_t *p);

/* Restores by kind as JSON (dcr bench --processes' "restores_by_kind" and
 * dcr faults --processes' the same): {"<kind>": {"count", "bytes",
 * "dense_bytes", "seconds"}} per dcr_restore_kind_t (dcr/recovery.h). A new
 * reference; NULL on allocation failure. */
struct json_t *dcr_bench_restores_json(const uint64_t count[DCR_RESTORE_KINDS],
                                       const uint64_t bytes[DCR_RESTORE_KINDS],
                                       const uint64_t dense_bytes[DCR_RESTORE_KINDS],
                                       const double seconds[DCR_RESTORE_KINDS]);
/* "clean 4, replay 0, ...; bytes moved B (dense refits of the same
 * receivers: D)" and a newline, on stdout. */
void dcr_bench_restores_print(const uint64_t counts[DCR_RESTORE_KINDS], uint64_t bytes,
                              uint64_t dense_bytes);

#endif
