/* Regression tracking between two results files (`dcr compare`), designed
 * for shared, noisy machines: a CI job must fail on a real slowdown and not
 * on a neighbour's burst.
 *
 * Matching. Runs are grouped by dcr_results_group_runs (configuration,
 * command, machine, and the output choices that change what is measured:
 * verification and the recorder's alternation), less the keys named in
 * opts.ignore (--match-ignore); runs of one group in one file are pooled,
 * and a BASE group is paired with the NEW group of the same key.
 *
 * Verdict of a lower-is-better metric. B and N are the per-refit values of
 * BASE and NEW (NaN left out), t = threshold / 100, and [lo, hi] the
 * percentile-bootstrap interval of median(N) / median(B) at the confidence
 * level (reports/bootstrap.h; fixed seed, so reproducible; two-stage,
 * runs then refits, where a side pools several runs):
 *   too few      a side has fewer than opts.min_samples values;
 *   n/a          no values on either side, or median(B) = 0 (no ratio);
 *   REGRESSED    lo > 1 + t: the whole interval lies beyond the threshold;
 *   inconclusive lo <= 1 + t < hi: the interval straddles the threshold,
 *                the runs cannot tell a regression from noise;
 *   improved     hi < 1 - t;
 *   same         otherwise (hi <= 1 + t);
 *   minor        a part of the refit (construction_lb_s, transport_lb_s,
 *                finalization_s) REGRESSED or inconclusive, but its median
 *                moved by no more than t * median(BASE latency_s), or
 *                latency_s itself did not regress: a part matters only
 *                through the whole (under a changing load, time moves
 *                between stages while the refit takes as long).
 * Paired (opts.paired, `dcr compare --paired`): the runs of a matched group
 * are blocks of an interleaved job (scripts/ab-bench.sh), paired by order:
 * BASE block i with NEW block i. Both groups must hold the same number of
 * blocks, and both blocks of pair i must have been written no later than
 * either of pair i + 1 (the runs' time attributes), or the comparison is
 * refused (DCR_EINVAL). [lo, hi] is then the Wilcoxon signed-rank interval
 * (reports/paired.h) of the ratio median(NEW block i) / median(BASE block
 * i), and the ratio its Hodges-Lehmann estimate; the verdicts above apply
 * to it unchanged, and fewer than dcr_paired_min_blocks(confidence) blocks
 * with a ratio is too few. A block pair where a side measured nothing, or
 * BASE's median is 0, is left out.
 * bit_exact must stay 1: any 0 among NEW's values is a regression whatever
 * the threshold. raw_changed_value_bytes and changed_elements describe the
 * workload, not dcr's performance: shown, never judged. Nothing is dropped
 * as an outlier: the median tolerates a few, and warm-up refits never reach
 * a results file (dcr bench --warmup). */
#ifndef DCR_REPORTS_COMPARE_H
#define DCR_REPORTS_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include "reports/bootstrap.h"
#include "reports/results_read.h"

typedef enum dcr_compare_verdict {
    DCR_COMPARE_SAME = 0,
    DCR_COMPARE_IMPROVED,
    DCR_COMPARE_REGRESSED,
    DCR_COMPARE_INCONCLUSIVE,
    DCR_COMPARE_TOO_FEW,
    DCR_COMPARE_NA,
    DCR_COMPARE_MINOR,
} dcr_compare_verdict_t;

/* "same", "improved", "REGRESSED", "inconclusive", "too few", "n/a", "minor". */
const char *dcr_compare_verdict_name(dcr_compare_verdict_t v);
/* The same for JSON: lower case, no spaces ("regressed", "too_few"). */
const char *dcr_compare_verdict_id(dcr_compare_verdict_t v);

/* The default confidence level and minimum sample count per side. */
#define DCR_COMPARE_DEFAULT_CONFIDENCE  0.95
#define DCR_COMPARE_DEFAULT_MIN_SAMPLES 10

typedef struct dcr_compare_opts {
    double threshold_pct;      /* allowed slowdown or growth, percent */
    double confidence;         /* two-sided level of the interval, in (0, 1) */
    size_t min_samples;        /* per side, for a judged verdict (>= 2) */
    const char *const *ignore; /* configuration keys left out of matching */
    size_t nignore;
    bool paired; /* judge block by block (see above) */
} dcr_compare_opts_t;

/* threshold 10%, confidence 0.95, 10 samples, nothing ignored, unpaired. */
dcr_compare_opts_t dcr_compare_opts_default(void);

/* A lower-is-better verdict from the samples (NaN values are left out),
 * as defined above; the interval is written to *lo_p / *hi_p (NAN when not
 * computed) and a one-line reason to reason (cut to len). Errors only on
 * allocation failure. */
dcr_status_t dcr_compare_judge(const double *base, size_t nb, const double *cur, size_t nn,
                               const dcr_compare_opts_t *opts, double *lo_p, double *hi_p,
                               dcr_compare_verdict_t *verdict_p, char *reason, size_t len);

/* The same for samples made of runs (reports/bootstrap.h): the interval
 * comes from the two-stage bootstrap, so the spread between runs of a side
 * (several dcr bench processes, as scripts/ab-bench.sh writes) counts. */
dcr_status_t dcr_compare_judge_runs(const dcr_bootstrap_sample_t *base,
                                    const dcr_bootstrap_sample_t *cur,
                                    const dcr_compare_opts_t *opts, double *lo_p, double *hi_p,
                                    dcr_compare_verdict_t *verdict_p, char *reason, size_t len);

typedef enum dcr_compare_kind {
    DCR_COMPARE_LOWER_BETTER, /* latency and bytes */
    DCR_COMPARE_COMPONENT,    /* lower is better, and material only against the latency */
    DCR_COMPARE_MUST_BE_ONE,  /* bit_exact */
    DCR_COMPARE_INFO,         /* workload descriptors: shown, not judged */
} dcr_compare_kind_t;

#define DCR_COMPARE_NMETRICS 9

typedef struct dcr_compare_metric {
    const char *name; /* a results column */
    dcr_compare_kind_t kind;
    dcr_results_stats_t base, cur;
    double ratio;         /* median(NEW) / median(BASE); paired: the estimate from the blocks;
                             NAN when BASE's median is 0 */
    double pooled_ratio;  /* median(NEW) / median(BASE) over all refits of the group */
    double lo, hi;        /* the interval of the ratio; NAN when not computed */
    double prob_greater;  /* P(a NEW value > a BASE value), ties half; NAN when a side is empty */
    size_t nblocks;       /* paired: block pairs with a ratio (0 unpaired) */
    double *block_ratios; /* paired: their ratios, in block order (owned; NULL unpaired) */
    double coverage;      /* paired: the interval's exact coverage; NAN otherwise */
    dcr_compare_verdict_t verdict;
    char reason[192];
} dcr_compare_metric_t;

/* One configuration present in both files. */
typedef struct dcr_compare_pair {
    size_t base_group, new_group; /* indices into the result's group arrays */
    dcr_compare_metric_t metrics[DCR_COMPARE_NMETRICS];
    bool regressed;
} dcr_compare_pair_t;

typedef struct dcr_compare {
    dcr_results_set_t *base, *cur; /* owned */
    dcr_results_group_t *base_groups, *new_groups;
    size_t nbase_groups, nnew_groups;
    dcr_compare_pair_t *pairs;
    size_t npairs;
    bool *base_matched, *new_matched; /* per group */
    dcr_compare_opts_t opts;          /* ignore borrowed from the caller */
    size_t regressions;               /* REGRESSED metrics over all pairs */
    size_t inconclusive;              /* inconclusive or too-few judged metrics */
    /* One A/B file (dcr_compare_ab_file): base and cur hold the blocks of
     * side A and side B; ab_keys the configuration keys the sides differ
     * in (owned; what opts.ignore points to). */
    bool ab;
    char **ab_keys;
    size_t nab_keys;
} dcr_compare_t;

/* Reads both files and compares them. *out_p is set only on success; free
 * it with dcr_compare_destroy. Errors: the reader's (one line naming the
 * file; DCR_EIO or DCR_EPARSE), DCR_EINVAL when an ignored key appears in
 * no run of either file (a typo would otherwise match nothing silently). */
dcr_status_t dcr_compare_files(const char *base_path, const char *new_path,
                               const dcr_compare_opts_t *opts, dcr_compare_t **out_p);
void dcr_compare_destroy(dcr_compare_t *c);

/* The two sides of one interleaved A/B run (dcr bench --ab --out FILE):
 * side A is BASE and side B is NEW, each side's blocks (pairs of dcr bench --ab) are its runs
 * (dcr_results_split_blocks), the configuration keys the sides differ in
 * are left out of matching (they differ on purpose), and the comparison is
 * paired, block j of A with block j of B, whatever opts.paired says;
 * opts.ignore must be empty. The last A/B run of the file is compared
 * (dcr_results_ab_pair). Errors: the reader's (DCR_EIO, DCR_EPARSE);
 * DCR_EINVAL for a file without an A/B run, or with opts.ignore set. */
dcr_status_t dcr_compare_ab_file(const char *path, const dcr_compare_opts_t *opts,
                                 dcr_compare_t **out_p);

/* A table per matched configuration, the unmatched runs, and the verdict line. */
void dcr_compare_print(const dcr_compare_t *c, FILE *out);

/* One JSON object: base, new, threshold_pct, confidence, min_samples,
 * match_ignore, verdict ("ok", "inconclusive" or "regression"), counts
 * {regressed, inconclusive, pairs}, regressions (per REGRESSED metric:
 * label, metric, ratio, interval, reason), matched (per pair: label,
 * config, machine, base_runs, new_runs, regressed, metrics: per metric
 * name, kind, base and new {n, min, median, max, mean}, ratio, interval
 * [lo, hi] (null when not computed), confidence, test, prob_greater,
 * verdict, reason; paired also pooled_ratio, blocks, block_ratios and
 * coverage), paired (true or false), unmatched_base and unmatched_new (label, config,
 * runs); for one A/B file also ab {file, order "ABBA", differs: per key
 * {key, a, b}}. Undefined numbers are null. malloc'd text; NULL on allocation
 * failure. */
char *dcr_compare_json(const dcr_compare_t *c);

#endif
