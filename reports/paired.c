/* Signed-rank interval of paired block ratios (see reports/paired.h). */
#include "reports/paired.h"

#include <math.h>
#include <stdlib.h>

size_t dcr_paired_min_blocks(double level)
{
    double tail = (1 - level) / 2;
    size_t n = 1;
    while (ldexp(1.0, -(int)n) > tail && n < DCR_PAIRED_MAX_BLOCKS) n++;
    return n;
}

/* The null distribution of W+ for n ranks: p[t] = P(W+ = t), t = 0..n(n+1)/2.
 * Adding rank i, W+ either keeps its value or gains i, each with
 * probability 1/2. malloc'd; NULL on allocation failure. */
static double *signed_rank_pmf(size_t n)
{
    size_t m = n * (n + 1) / 2;
    double *p = calloc(m + 1, sizeof(double));
    if (!p) return NULL;
    p[0] = 1;
    size_t top = 0;
    for (size_t i = 1; i <= n; i++) {
        top += i;
        for (size_t t = top; t >= i; t--) p[t] = (p[t] + p[t - i]) / 2;
        for (size_t t = i; t-- > 0;) p[t] /= 2;
    }
    return p;
}

double dcr_paired_signed_rank_cdf(size_t n, long w)
{
    if (w < 0) return 0;
    if (n > DCR_PAIRED_MAX_BLOCKS) return NAN;
    double *p = signed_rank_pmf(n);
    if (!p) return NAN;
    size_t m = n * (n + 1) / 2;
    double c = 0;
    for (size_t t = 0; t <= m && t <= (size_t)w; t++) c += p[t];
    free(p);
    return c > 1 ? 1 : c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The largest k >= 1 with P(W+ <= k - 1) <= tail, and that probability;
 * 0 when even P(W+ = 0) = 2^-n exceeds the tail. */
static size_t critical_rank(const double *pmf, size_t m, double tail, double *below_p)
{
    size_t k = 0;
    double c = 0;
    *below_p = 0;
    for (size_t t = 0; t <= m; t++) {
        if (c + pmf[t] > tail * (1 + 1e-12)) break;
        c += pmf[t];
        k = t + 1;
        *below_p = c;
    }
    return k;
}

dcr_status_t dcr_paired_signed_rank_ci(const double *d, size_t n, double level,
                                       dcr_paired_interval_t *out)
{
    if (n < dcr_paired_min_blocks(level) || n > DCR_PAIRED_MAX_BLOCKS)
        return dcr_error_set(DCR_EINVAL,
                             "paired comparison: %zu blocks; the signed-rank interval at %g%% "
                             "needs %zu to %d",
                             n, 100 * level, dcr_paired_min_blocks(level), DCR_PAIRED_MAX_BLOCKS);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(d[i]))
            return dcr_error_set(DCR_EINVAL, "paired comparison: block %zu has no finite ratio", i);
    size_t m = n * (n + 1) / 2;
    double *walsh = malloc(m * sizeof(double));
    double *pmf = signed_rank_pmf(n);
    if (!walsh || !pmf) {
        free(walsh);
        free(pmf);
        return dcr_error_set(DCR_ENOMEM, "paired comparison");
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) walsh[w++] = (d[i] + d[j]) / 2;
    qsort(walsh, m, sizeof(double), cmp_double);
    double below;
    size_t k = critical_rank(pmf, m, (1 - level) / 2, &below);
    /* k >= 1 here: n >= dcr_paired_min_blocks(level). */
    *out = (dcr_paired_interval_t){
        .n = n,
        .estimate = m % 2 ? walsh[m / 2] : (walsh[m / 2 - 1] + walsh[m / 2]) / 2,
        .lo = walsh[k - 1],
        .hi = walsh[m - k],
        .coverage = 1 - 2 * below,
    };
    free(walsh);
    free(pmf);
    return DCR_OK;
}
