/* Bootstrap interval of a ratio of medians and the rank effect size. */
#include "reports/bootstrap.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "dcr/rng.h"

static void swap(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* The k-th smallest of v[0..n) (Hoare's selection), reordering v: linear on
 * average, so that thousands of resamples of large pooled samples stay fast. */
static double select_kth(double *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) swap(&v[i++], &v[j--]);
        }
        /* Now v[lo..j] <= pivot <= v[i..hi], and anything between equals the pivot. */
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            return v[kk];
    }
    return v[kk];
}

double dcr_bootstrap_median(double *v, size_t n)
{
    double upper = select_kth(v, n, n / 2);
    if (n % 2) return upper;
    /* After selection every value left of n/2 is <= upper: the lower middle is their maximum. */
    double lower = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lower) lower = v[i];
    return 0.5 * (lower + upper);
}

static double resample_median(dcr_rng_t *rng, const double *v, size_t n, double *scratch)
{
    for (size_t i = 0; i < n; i++) scratch[i] = v[dcr_rng_below(rng, n)];
    return dcr_bootstrap_median(scratch, n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted v[0..n) by linear interpolation between order statistics. */
static double quantile(const double *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n) return v[n - 1];
    double frac = pos - (double)i;
    if (isinf(v[i]) || isinf(v[i + 1])) return frac > 0 ? v[i + 1] : v[i];
    return v[i] + frac * (v[i + 1] - v[i]);
}

/* One run of a sample: its values. */
static const double *run_values(const dcr_bootstrap_sample_t *s, size_t r, size_t *len_p)
{
    if (s->nruns <= 1) {
        *len_p = s->n;
        return s->v;
    }
    size_t off = 0;
    for (size_t i = 0; i < r; i++) off += s->run_len[i];
    *len_p = s->run_len[r];
    return s->v + off;
}

/* The most values a resample can hold: every drawn run the longest. */
static size_t resample_cap(const dcr_bootstrap_sample_t *s)
{
    if (s->nruns <= 1) return s->n;
    size_t longest = 0;
    for (size_t r = 0; r < s->nruns; r++)
        if (s->run_len[r] > longest) longest = s->run_len[r];
    return longest * s->nruns;
}

static double resample_runs_median(dcr_rng_t *rng, const dcr_bootstrap_sample_t *s, double *scratch)
{
    if (s->nruns <= 1) return resample_median(rng, s->v, s->n, scratch);
    size_t k = 0;
    for (size_t i = 0; i < s->nruns; i++) {
        size_t len = 0;
        const double *v = run_values(s, dcr_rng_below(rng, s->nruns), &len);
        for (size_t j = 0; j < len; j++) scratch[k++] = v[dcr_rng_below(rng, len)];
    }
    return dcr_bootstrap_median(scratch, k);
}

static bool sample_ok(const dcr_bootstrap_sample_t *s)
{
    if (!s->n) return false;
    if (s->nruns <= 1) return true;
    size_t total = 0;
    for (size_t r = 0; r < s->nruns; r++) {
        if (!s->run_len[r]) return false;
        total += s->run_len[r];
    }
    return total == s->n;
}

dcr_status_t dcr_bootstrap_ratio_ci_runs(const dcr_bootstrap_sample_t *base,
                                         const dcr_bootstrap_sample_t *cur, double level, int iters,
                                         uint64_t seed, double *lo_p, double *hi_p)
{
    if (!sample_ok(base) || !sample_ok(cur) || iters < 2 || !(level > 0 && level < 1))
        return dcr_error_set(DCR_EINVAL, "bootstrap: empty sample, empty run or bad level");
    size_t cap_b = resample_cap(base), cap_n = resample_cap(cur);
    double *scratch = malloc((cap_b > cap_n ? cap_b : cap_n) * sizeof(double));
    double *ratios = malloc((size_t)iters * sizeof(double));
    if (!scratch || !ratios) {
        free(scratch);
        free(ratios);
        return dcr_error_set(DCR_ENOMEM, "bootstrap of %zu and %zu values", base->n, cur->n);
    }
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int i = 0; i < iters; i++) {
        double mb = resample_runs_median(&rng, base, scratch);
        double mn = resample_runs_median(&rng, cur, scratch);
        ratios[i] = mb > 0 ? mn / mb : INFINITY;
    }
    qsort(ratios, (size_t)iters, sizeof(double), cmp_double);
    double tail = (1 - level) / 2;
    *lo_p = quantile(ratios, (size_t)iters, tail);
    *hi_p = quantile(ratios, (size_t)iters, 1 - tail);
    free(scratch);
    free(ratios);
    return DCR_OK;
}

dcr_status_t dcr_bootstrap_ratio_ci(const double *base, size_t nb, const double *cur, size_t nn,
                                    double level, int iters, uint64_t seed, double *lo_p,
                                    double *hi_p)
{
    dcr_bootstrap_sample_t b = {base, nb, NULL, 0}, n = {cur, nn, NULL, 0};
    return dcr_bootstrap_ratio_ci_runs(&b, &n, level, iters, seed, lo_p, hi_p);
}

dcr_status_t dcr_bootstrap_median_ci(const double *v, size_t n, double level, int iters,
                                     uint64_t seed, double *lo_p, double *hi_p)
{
    if (!n || iters < 2 || !(level > 0 && level < 1))
        return dcr_error_set(DCR_EINVAL, "bootstrap: empty sample or bad level");
    double *scratch = malloc(n * sizeof(double));
    double *medians = malloc((size_t)iters * sizeof(double));
    if (!scratch || !medians) {
        free(scratch);
        free(medians);
        return dcr_error_set(DCR_ENOMEM, "bootstrap of %zu values", n);
    }
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int i = 0; i < iters; i++) medians[i] = resample_median(&rng, v, n, scratch);
    qsort(medians, (size_t)iters, sizeof(double), cmp_double);
    double tail = (1 - level) / 2;
    *lo_p = quantile(medians, (size_t)iters, tail);
    *hi_p = quantile(medians, (size_t)iters, 1 - tail);
    free(scratch);
    free(medians);
    return DCR_OK;
}

double dcr_bootstrap_prob_greater(const double *base, size_t nb, const double *cur, size_t nn)
{
    /* Direct count: the samples are refits of a run (tens to thousands), so
     * nb * nn comparisons are cheap and obviously right. NaN (not measured)
     * takes part in no pair. */
    double wins = 0, pairs = 0;
    for (size_t i = 0; i < nn; i++) {
        if (isnan(cur[i])) continue;
        for (size_t j = 0; j < nb; j++) {
            if (isnan(base[j])) continue;
            wins += cur[i] > base[j] ? 1.0 : cur[i] == base[j] ? 0.5 : 0;
            pairs++;
        }
    }
    return pairs > 0 ? wins / pairs : NAN;
}
