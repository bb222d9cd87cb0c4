/* Regression tracking between two results files (`dcr compare`): runs are
 * matched by configuration (dcr_results_config_key; runs with equal keys in
 * one file are pooled), and every metric of a matched pair is judged from
 * the spread of its per-refit values, so that a CI job can fail on a real
 * regression and not on noise.
 *
 * Verdict of a lower-is-better metric, with B and N the BASE and NEW
 * values over their refits and t = threshold / 100:
 *   regressed  median(N) > median(B) * (1 + t), and beyond the noise:
 *              min(N) > max(B) (every NEW refit is worse than every BASE
 *              refit), or median(N) - median(B) exceeds both spreads
 *              (max - min of B and of N);
 *   improved   the mirror image: median(N) < median(B) * (1 - t) and
 *              max(N) < min(B) or median(B) - median(N) exceeds both spreads;
 *   noise      beyond the threshold, but not beyond the noise;
 *   same       within the threshold;
 *   minor      (construction_lb_s, transport_lb_s, finalization_s) regressed
 *              or improved as above, but the medians moved by no more than
 *              t * median(BASE latency_s): a part of the refit too small to
 *              matter, which must not fail a CI job on its own;
 *   n/a        the BASE median is 0 (no ratio), or a side has no refits.
 * bit_exact must stay 1: any 0 among NEW's refits is a regression whatever
 * the threshold. raw_changed_value_bytes and changed_elements describe the
 * workload, not dcr's performance: they are shown, never judged. */
#ifndef DCR_REPORTS_COMPARE_H
#define DCR_REPORTS_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include "reports/results_read.h"

typedef enum dcr_compare_verdict {
    DCR_COMPARE_SAME = 0,
    DCR_COMPARE_NOISE,
    DCR_COMPARE_IMPROVED,
    DCR_COMPARE_REGRESSED,
    DCR_COMPARE_NA,
    DCR_COMPARE_MINOR,
} dcr_compare_verdict_t;

/* "same", "noise", "improved", "REGRESSED", "n/a", "minor". */
const char *dcr_compare_verdict_name(dcr_compare_verdict_t v);

/* The verdict of a lower-is-better metric, as defined above. */
dcr_compare_verdict_t dcr_compare_judge(const dcr_results_stats_t *base,
                                        const dcr_results_stats_t *cur, double threshold_pct);

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
    double ratio;                /* median(NEW) / median(BASE); NAN when BASE's median is 0 */
    double ratio_min, ratio_max; /* min/min and max/max; NAN on a 0 denominator */
    dcr_compare_verdict_t verdict;
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
    double threshold_pct;
    size_t regressions; /* regressed metrics over all pairs */
} dcr_compare_t;

/* Reads both files and compares them. *out_p is set only on success; free
 * it with dcr_compare_destroy. Errors are the reader's (one line naming the
 * file). */
dcr_status_t dcr_compare_files(const char *base_path, const char *new_path, double threshold_pct,
                               dcr_compare_t **out_p);
void dcr_compare_destroy(dcr_compare_t *c);

/* A table per matched configuration, the unmatched runs, and the verdict line. */
void dcr_compare_print(const dcr_compare_t *c, FILE *out);

/* One JSON object: threshold_pct, verdict ("ok" or "regression"),
 * regressions, matched (per pair: config, label, base_runs, new_runs,
 * regressed, metrics: per metric name, kind, base and new {n, min, median,
 * max, mean}, ratio, ratio_min, ratio_max (null when undefined), verdict),
 * unmatched_base and unmatched_new (label, config, runs). malloc'd text;
 * NULL on allocation failure. */
char *dcr_compare_json(const dcr_compare_t *c);

#endif
