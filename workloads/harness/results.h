/* Benchmark results in HDF5: one file holds many runs, one group per run,
 * so that `dcr compare` and `dcr report` can match runs by configuration.
 *
 * Schema (version 1), documented for users in README.md:
 *   /                       attribute dcr_results_version = 1
 *   /runs/<NNNNNN>          one group per appended run (zero-padded counter)
 *       attributes: command (string), config (JSON string), machine
 *       (string: uname and cores), git_revision (string), time (ISO 8601
 *       UTC), summary (JSON string of the run's scalar figures)
 *       refits/<column>     1-D float64 datasets, one value per timed refit
 *       intervals           optional int64 [n, 6] dataset of the stage trace:
 *                           start_ns, end_ns, refit, stage, actor, id
 *                           (dcr/trace.h numbering; attribute columns names them)
 *       refits/block        only in the two runs of dcr bench --ab (below)
 * Appending never rewrites earlier runs; a file that is not a dcr results
 * file is refused. */
#ifndef DCR_WORKLOADS_RESULTS_H
#define DCR_WORKLOADS_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* The schema's names, the one definition the writer (workloads/harness/results.c,
 * filled by `dcr bench`) and the reader (reports/results_read.c) share. */
#define DCR_RESULTS_VERSION          1
#define DCR_RESULTS_VERSION_ATTR     "dcr_results_version"
#define DCR_RESULTS_RUNS             "runs"
#define DCR_RESULTS_REFITS           "refits"
#define DCR_RESULTS_INTERVALS        "intervals"
#define DCR_RESULTS_INTERVAL_COLUMNS "start_ns,end_ns,refit,stage,actor,id"
/* An interleaved A/B run (dcr bench --ab) is two runs appended one after
 * the other: side A, then side B. Each carries the summary key ab_side
 * ("A" or "B") and the extra refits column block: the pair of the
 * refit, the same id on both sides for the refits that ran next to each other
 * (workloads/harness/bench.h, dcr_bench_run_ab). */
#define DCR_RESULTS_AB_SIDE "ab_side"
#define DCR_RESULTS_BLOCK   "block"

/* The per-refit columns every version-1 run carries, in this order:
 * dcr_results_column_names[DCR_RESULTS_LATENCY_S] is "latency_s". */
typedef enum dcr_results_col {
    DCR_RESULTS_LATENCY_S,
    DCR_RESULTS_PAYLOAD_BYTES,
    DCR_RESULTS_CROSS_BYTES,
    DCR_RESULTS_RAW_CHANGED_VALUE_BYTES,
    DCR_RESULTS_CHANGED_ELEMENTS,
    DCR_RESULTS_BIT_EXACT,         /* 1 or 0 */
    DCR_RESULTS_CONSTRUCTION_LB_S, /* NaN where not traced */
    DCR_RESULTS_TRANSPORT_LB_S,    /* NaN where not traced */
    DCR_RESULTS_FINALIZATION_S,    /* NaN where not traced */
    DCR_RESULTS_NCOLUMNS
} dcr_results_col_t;
extern const char *const dcr_results_column_names[DCR_RESULTS_NCOLUMNS];

/* The string attributes of every run group, in this order. */
typedef enum dcr_results_attr {
    DCR_RESULTS_ATTR_COMMAND,
    DCR_RESULTS_ATTR_CONFIG,
    DCR_RESULTS_ATTR_SUMMARY,
    DCR_RESULTS_ATTR_MACHINE,
    DCR_RESULTS_ATTR_GIT_REVISION,
    DCR_RESULTS_ATTR_TIME,
    DCR_RESULTS_NATTRS
} dcr_results_attr_t;
extern const char *const dcr_results_attr_names[DCR_RESULTS_NATTRS];

typedef struct dcr_results_column {
    const char *name;     /* e.g. "latency_s" */
    const double *values; /* nrefits values */
} dcr_results_column_t;

typedef struct dcr_results_run {
    const char *command;      /* "bench" */
    const char *config_json;  /* the full configuration */
    const char *summary_json; /* scalar figures (means, reference, speedup) */
    size_t nrefits;
    size_t ncolumns;
    const dcr_results_column_t *columns;
    size_t nintervals;             /* 0: no intervals dataset */
    const int64_t (*intervals)[6]; /* start_ns, end_ns, refit, stage, actor, id */
    const char *git_revision;      /* NULL: this binary's; side B of --ab-binary: its own */
} dcr_results_run_t;

/* Checks, before a run, that dcr_results_append could append to path: the
 * output-path rule (dcr/outpath.h, `flag` names it in the error), and an
 * existing non-empty file must be a dcr results file of this version
 * (DCR_EINVAL otherwise), so a wrong --out fails before the run, not after. */
dcr_status_t dcr_results_check(const char *flag, const char *path);

/* Appends a run to the file at path (created when missing; an empty file
 * counts as missing), under the output-path rule: the run is appended to a
 * copy that replaces the file only when complete. On success the run's
 * group name ("/runs/000003") is written to name_out. */
dcr_status_t dcr_results_append(const char *path, const dcr_results_run_t *run, char *name_out,
                                size_t name_len);

/* The revision this binary was built from ("unknown" outside git). */
const char *dcr_results_git_revision(void);

#endif
