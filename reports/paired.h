/* Paired analysis of interleaved blocks, for `dcr compare --paired`.
 *
 * Why paired: on a shared machine the load drifts by more than a 20%
 * slowdown between minutes (identical runs here differ by 0.69-1.46x), so
 * two runs measured apart cannot be compared however many refits they
 * carry. scripts/ab-bench.sh alternates the two sides block by block (ABBA);
 * block i of BASE and block i of NEW ran next to each other, under nearly
 * the same load. The ratio of their medians cancels the drift the two
 * blocks share, and the spread of these ratios over blocks is what is left
 * of the noise.
 *
 * The test: d_i = log(median(NEW block i) / median(BASE block i)), and the
 * Wilcoxon signed-rank confidence interval of the centre of the d_i (the
 * Walsh averages (d_i + d_j) / 2, i <= j, between the k-th smallest and the
 * k-th largest, k from the exact null distribution of the signed-rank
 * statistic); the estimate is their median (Hodges-Lehmann). It assumes
 * only that the d_i are independent and symmetric about their centre (an
 * ABBA drift makes them alternate, which is symmetric), is exact for any
 * number of blocks, and one outlying block moves it by one rank. The ratio
 * and its interval are exp() of these. */
#ifndef DCR_REPORTS_PAIRED_H
#define DCR_REPORTS_PAIRED_H

#include <stddef.h>

#include "dcr/status.h"

/* The fewest blocks for which the signed-rank interval exists at the
 * level: 2^-n must be at most (1 - level) / 2 (6 blocks at 95%). */
size_t dcr_paired_min_blocks(double level);

/* P(W+ <= w) under the null hypothesis for n untied differences, where W+ is
 * the sum of the ranks of the positive ones (exact, by counting the subsets
 * of {1..n} with each rank sum). n <= DCR_PAIRED_MAX_BLOCKS. */
double dcr_paired_signed_rank_cdf(size_t n, long w);

/* The most blocks one comparison takes (the exact null distribution has
 * n(n+1)/2 + 1 terms, and the Walsh averages n(n+1)/2). */
#define DCR_PAIRED_MAX_BLOCKS 200

typedef struct dcr_paired_interval {
    size_t n;        /* blocks */
    double estimate; /* Hodges-Lehmann: the median of the Walsh averages */
    double lo, hi;   /* the interval of the centre of d */
    double coverage; /* its exact coverage, at least the level asked */
} dcr_paired_interval_t;

/* The signed-rank interval of the centre of d[0..n) at the two-sided level
 * (0.95 and so on). DCR_EINVAL when n is below dcr_paired_min_blocks(level)
 * or above DCR_PAIRED_MAX_BLOCKS, or a value is not finite; DCR_ENOMEM. */
dcr_status_t dcr_paired_signed_rank_ci(const double *d, size_t n, double level,
                                       dcr_paired_interval_t *out);

#endif
