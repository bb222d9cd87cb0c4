/* The statistics behind `dcr compare`'s verdicts: a bootstrap confidence
 * interval of the ratio of two medians, and a rank effect size.
 *
 * Why the median and a bootstrap: refit latencies on a shared machine are
 * skewed and carry outliers (a neighbour's burst lengthens one refit by
 * 2x); the median ignores a few of them without a rule for dropping
 * samples, and the percentile bootstrap makes no assumption about the
 * distribution. The generator is seeded with a fixed value, so the same two
 * files always give the same interval. */
#ifndef DCR_REPORTS_BOOTSTRAP_H
#define DCR_REPORTS_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* The seed dcr compare uses; any fixed value gives reproducible intervals. */
#define DCR_BOOTSTRAP_SEED 0x5eedc0de2026ULL
/* Resamples per interval: enough for stable 2.5% / 97.5% quantiles (the
 * quantile estimates move by well under 1% of the ratio between seeds). */
#define DCR_BOOTSTRAP_ITERS 4000

/* Median of v[0..n) (mean of the middle two for even n), reordering v.
 * n > 0. */
double dcr_bootstrap_median(double *v, size_t n);

/* Percentile bootstrap interval of median(cur) / median(base) at the given
 * two-sided level (0.95: the 2.5% and 97.5% quantiles of iters resampled
 * ratios): both samples are resampled with replacement independently.
 * Values must be finite (callers drop NaN); nb, nn > 0, median(base) > 0
 * on the full sample. A resample whose base median is 0 gives an infinite
 * ratio, which sorts above all others. *lo_p and *hi_p are set on success;
 * DCR_ENOMEM otherwise. */
dcr_status_t dcr_bootstrap_ratio_ci(const double *base, size_t nb, const double *cur, size_t nn,
                                    double level, int iters, uint64_t seed, double *lo_p,
                                    double *hi_p);

/* Percentile bootstrap interval of median(v) at the level (the bands of
 * dcr report's trend figure). Same contract as dcr_bootstrap_ratio_ci. */
dcr_status_t dcr_bootstrap_median_ci(const double *v, size_t n, double level, int iters,
                                     uint64_t seed, double *lo_p, double *hi_p);

/* A sample made of runs: v holds the values of run 0, then run 1, ...
 * (run_len[r] values each, summing to n). nruns 0 means one run of n. */
typedef struct dcr_bootstrap_sample {
    const double *v;
    size_t n;
    const size_t *run_len;
    size_t nruns;
} dcr_bootstrap_sample_t;

/* dcr_bootstrap_ratio_ci for samples made of runs, by a two-stage
 * (hierarchical) bootstrap: each resample draws the side's runs with
 * replacement, then each drawn run's values with replacement. Runs of one
 * configuration differ by more than their refits do (the machine's load
 * drifts between processes), and only resampling runs puts that spread
 * into the interval; with one run per side it is the plain bootstrap.
 * Every run must hold at least one value. */
dcr_status_t dcr_bootstrap_ratio_ci_runs(const dcr_bootstrap_sample_t *base,
                                         const dcr_bootstrap_sample_t *cur, double level, int iters,
                                         uint64_t seed, double *lo_p, double *hi_p);

/* The probability that a value drawn from cur exceeds one drawn from base,
 * ties counting half (the Mann-Whitney U statistic over nb * nn, also
 * called A12 or the common-language effect size): 0.5 when the two are
 * alike, 1 when every cur value is larger. NaN values are left out; NAN
 * when a side has none. */
double dcr_bootstrap_prob_greater(const double *base, size_t nb, const double *cur, size_t nn);

#endif
