/* Reading the HDF5 results that workloads/harness/results.c writes (schema version 1,
 * described in workloads/harness/results.h and docs/formats/results.md), for `dcr
 * report` and `dcr compare`.
 *
 * The reader validates everything it returns, so that the commands above can
 * trust the values: the root attribute dcr_results_version (an integer, = 1),
 * the /runs group, every run's six string attributes (config and summary
 * must be JSON objects), and its refits/ columns (1-D floating-point
 * datasets of one common length, every value finite, the nine documented
 * columns present, bit_exact only 0 or 1, the others >= 0). A file that is
 * missing, not HDF5, foreign or malformed fails with one error line naming
 * the file, the object and what was wrong (DCR_EIO when it cannot be opened,
 * DCR_EPARSE otherwise). Extra columns are kept, so that newer writers stay
 * readable.
 *
 * Runs with the same configuration are grouped by a key that ignores the
 * configuration keys that cannot change a measurement (paths, output and
 * logging choices) and pairs runs of one command and machine; see
 * dcr_results_match_key. */
#ifndef DCR_REPORTS_RESULTS_READ_H
#define DCR_REPORTS_RESULTS_READ_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "dcr/status.h"
#include "workloads/harness/results.h"

/* The schema (names, version, the columns every run carries) is defined
 * once, in workloads/harness/results.h, beside its writer. */

typedef struct dcr_results_stored_column {
    char *name;
    double *values; /* nrefits values */
} dcr_results_stored_column_t;

/* One run as stored; every string is NUL-terminated and owned by the set. */
typedef struct dcr_results_stored_run {
    char *name; /* the group path, "/runs/000003" */
    char *command, *config_text, *summary_text, *machine, *git_revision, *time;
    json_t *config, *summary; /* parsed objects, owned by the set */
    char *config_key;         /* dcr_results_match_key with nothing ignored */
    size_t nrefits, ncolumns;
    dcr_results_stored_column_t *columns;
} dcr_results_stored_run_t;

/* Every run of one file, in group-name order. */
typedef struct dcr_results_set {
    char *path;
    size_t nruns;
    dcr_results_stored_run_t *runs;
} dcr_results_set_t;

/* A probe that takes longer than this is a damaged file (see dcr_results_read). */
#define DCR_RESULTS_PROBE_SECONDS 60

/* Reads and validates the whole file. The first parse runs in a child
 * process, so that a damaged file that crashes or hangs the HDF5 library
 * is one error line (DCR_EPARSE) instead of the caller's crash. *out_p is set only on success; the
 * caller frees it with dcr_results_set_destroy. A valid file with no runs is
 * a valid, empty set. */
dcr_status_t dcr_results_read(const char *path, dcr_results_set_t **out_p);
void dcr_results_set_destroy(dcr_results_set_t *set);

/* Moves every run of src to the end of dst (for `dcr report` over several
 * files) and frees src. On failure (DCR_ENOMEM) both are unchanged and the
 * caller still owns src. */
dcr_status_t dcr_results_set_merge(dcr_results_set_t *dst, dcr_results_set_t *src);

/* The values of a column of the run, or NULL when the run has no such
 * column. Valid as long as the set. */
const double *dcr_results_column(const dcr_results_stored_run_t *run, const char *name);

/* A number from the run's summary (NAN when absent or not a number). */
double dcr_results_summary_number(const dcr_results_stored_run_t *run, const char *key);

/* The key of a configuration: the command and the configuration as
 * compact JSON with sorted keys, without the keys that cannot change a
 * per-refit figure: paths and output choices (workdir, keep_payloads,
 * control, trace, out, json, log) and the number of timed refits (a sample
 * size; warm-up counts are kept). The output choices that do change what is
 * measured stay: verify (the dense-refit comparison) and trace_overhead
 * (the recorder on for every other refit pair); a file written before they
 * were recorded counts as verify true, trace_overhead false, as its runs
 * were. malloc'd; NULL on allocation failure. */
char *dcr_results_config_key(const char *command, const json_t *config);

/* The matching key of a stored run: its command, its machine and its
 * configuration as in dcr_results_config_key, less the keys listed in
 * ignore (configuration keys, or "command" / "machine"). Two runs measure
 * the same thing when their keys are equal. malloc'd; NULL on allocation
 * failure. */
char *dcr_results_match_key(const dcr_results_stored_run_t *run, const char *const *ignore,
                            size_t nignore);

/* Whether some run of the set has the configuration key (always true for
 * "command" and "machine"): --match-ignore refuses a key no run has. */
bool dcr_results_has_key(const dcr_results_set_t *set, const char *key);

/* The two runs of the last interleaved A/B run of a set (dcr bench --ab
 * appends side A, then side B; workloads/harness/results.h): the last run
 * whose summary says ab_side "B" and the run just before it, which must say
 * "A"; both must carry the block column. DCR_EINVAL with one line naming
 * the file when the set holds no such pair. */
dcr_status_t dcr_results_ab_pair(const dcr_results_set_t *set, size_t *a_p, size_t *b_p);

/* The blocks of run `run` of set as the runs of a new set (path: set's):
 * the refits with one value of the block column form one run, named
 * "<run name>#block<id>", in increasing block order, each with copies of the
 * run's attributes and of those refits' values of every column. DCR_EINVAL
 * when the run has no block column or an id is not a whole number;
 * DCR_ENOMEM. Free *out_p with dcr_results_set_destroy. */
dcr_status_t dcr_results_split_blocks(const dcr_results_set_t *set, size_t run,
                                      dcr_results_set_t **out_p);

/* Caps on what a file may declare, checked before anything is allocated
 * from the declaration (a hostile 4 KB file must not cost gigabytes): per
 * column, per group's member count, per string attribute. The column
 * values of a whole file are also bounded by the file's size (a genuine
 * column occupies its own bytes). */
#define DCR_RESULTS_MAX_REFITS     1000000ULL
#define DCR_RESULTS_MAX_MEMBERS    100000ULL
#define DCR_RESULTS_MAX_ATTR_BYTES (1ULL << 20)

/* A one-line description of a configuration for tables and legends:
 * "model scale/layers, transport, changes, mode, rl" in that order, e.g.
 * "qwen3-30b-a3b s64 l2, objstore, 3% uniform, X, sync". Cut to len. */
void dcr_results_config_label(const json_t *config, char *buf, size_t len);

/* The change description of a configuration alone ("3% uniform", "adamw lr 1e-06"). */
void dcr_results_change_label(const json_t *config, char *buf, size_t len);

/* min, median (mean of the middle two for an even count), max and mean of
 * the n values, leaving out NaN (a figure that was not measured, such as the
 * bounds of a refit run with the recorder off); n counts the values kept, and
 * everything is zero when none is left. */
typedef struct dcr_results_stats {
    size_t n;
    double min, median, max, mean;
} dcr_results_stats_t;
dcr_results_stats_t dcr_results_stats(const double *v, size_t n);

/* Runs of a set with the same key, in first-appearance order. run_index
 * lists indices into set->runs. */
typedef struct dcr_results_group {
    char *key; /* the runs' matching key (owned) */
    size_t nruns;
    size_t *run_index;
} dcr_results_group_t;

/* Groups the runs of a set by matching key (dcr_results_match_key, nothing
 * ignored). *groups_p is malloc'd (free with dcr_results_groups_free). */
dcr_status_t dcr_results_group_runs(const dcr_results_set_t *set, dcr_results_group_t **groups_p,
                                    size_t *n_p);
/* The same with the keys in ignore left out of the matching key. */
dcr_status_t dcr_results_group_runs_ignoring(const dcr_results_set_t *set,
                                             const char *const *ignore, size_t nignore,
                                             dcr_results_group_t **groups_p, size_t *n_p);
void dcr_results_groups_free(dcr_results_group_t *groups, size_t n);

/* The values of one column pooled over a group's runs, malloc'd into *v_p
 * (NULL when there are none) with their count in *n_p. */
dcr_status_t dcr_results_group_pool(const dcr_results_set_t *set, const dcr_results_group_t *g,
                                    const char *column, double **v_p, size_t *n_p);

#endif
