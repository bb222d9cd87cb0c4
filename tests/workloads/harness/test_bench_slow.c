/* ctest-labels: slow
 *
 * A long bench run stays flat: 300 timed refits of a tiny model (links
 * unlimited, so that the run takes seconds), where every step's wall time
 * (injection, refit, bounds, verification) and the resident set after it
 * are recorded. Before the recorder freed what a run without --trace no
 * longer needs, each refit snapshotted and sorted every interval recorded so
 * far and every thread kept a 32 KiB buffer: the last 50 steps took about 4x
 * the first 50 and the process grew by about 0.5 MB per refit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "workloads/harness/bench.h"

enum { REFITS = 300, WINDOW = 50 };

/* Limits of the issue that asked for flat runs (issue 15). */
#define MAX_WALL_RATIO       1.3
#define MAX_RSS_GROWTH_BYTES (50.0 * 1024)
/* AddressSanitizer holds freed memory in a quarantine (256 MB by default)
 * that fills over the run: resident-set growth there is not the program's.
 * Its wall-time ratio still holds. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_LIMIT_HOLDS 0
#else
#define RSS_LIMIT_HOLDS 1
#endif

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

/* The lower quartile of the wall times of refits [from, from + WINDOW).
 * Load from other processes only ever lengthens steps, and on a shared
 * 2-core machine it comes and goes over seconds, which moved the median by
 * more than 1.3x between windows; growth of the run's own work (what this
 * test is for) moves every quantile, the lower quartile included. */
static double quartile_wall(const dcr_bench_result_t *r, int from)
{
    double w[WINDOW];
    for (int i = 0; i < WINDOW; i++) w[i] = r->refits[from + i].wall_s;
    qsort(w, WINDOW, sizeof(w[0]), cmp_double);
    return w[WINDOW / 4];
}

static double mean_wall(const dcr_bench_result_t *r, int from)
{
    double sum = 0;
    for (int i = 0; i < WINDOW; i++) sum += r->refits[from + i].wall_s;
    return sum / WINDOW;
}

/* One long run: the lower-quartile step wall time of the last window over
 * the first, and the resident set's growth per refit after the first window. */
static void long_run(double *ratio_p, double *growth_p)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.run.scenario.scale = 128;
    c.run.scenario.layers = 1;
    c.run.link.cross_gbps = c.run.link.flow_gbps = c.run.link.local_gbps = 0; /* unlimited */
    c.run.link.latency_ms = 0;
    c.warmup = 1;
    c.refits = REFITS;
    dcr_bench_result_t r;
    if (dcr_bench_run(&c, &r) != DCR_OK) fail_msg("%s", dcr_error_detail());
    assert_int_equal(r.nrefits, REFITS);
    assert_true(r.bit_exact);
    double first = quartile_wall(&r, 0), last = quartile_wall(&r, REFITS - WINDOW);
    /* Resident bytes from the end of the first window on: the first refits
     * fill the allocator's pools, which is not growth. */
    double growth = (double)(r.refits[REFITS - 1].rss_bytes - r.refits[WINDOW - 1].rss_bytes) /
                    (REFITS - WINDOW);
    printf("step wall time, lower quartile: first %d %.4f s, last %d %.4f s (ratio %.3f; means "
           "%.4f and %.4f s); RSS %lld -> %lld bytes, %.0f bytes per refit\n",
           WINDOW, first, WINDOW, last, last / first, mean_wall(&r, 0),
           mean_wall(&r, REFITS - WINDOW), (long long)r.refits[WINDOW - 1].rss_bytes,
           (long long)r.refits[REFITS - 1].rss_bytes, growth);
    bool measured = first > 0 && r.refits[0].rss_bytes > 0;
    dcr_bench_result_free(&r); /* before any failure, which leaves the function */
    assert_true(measured);
    *ratio_p = last / first;
    *growth_p = growth;
}

static void test_long_run_is_flat(void **state)
{
    (void)state;
    double ratio, growth;
    long_run(&ratio, &growth);
    /* Steps of about 25 ms on 2 shared cores swing by 1.4x between windows
     * of one run when another process wakes: a slower last window is
     * measured again in a second run, and growth must show in both. */
    if (ratio > MAX_WALL_RATIO) {
        printf("ratio %.3f above %.1f: measuring a second run\n", ratio, MAX_WALL_RATIO);
        double growth2;
        long_run(&ratio, &growth2);
    }
    if (ratio > MAX_WALL_RATIO)
        fail_msg("the last %d refits took %.3fx the first %d (limit %.1fx), in two runs", WINDOW,
                 ratio, WINDOW, MAX_WALL_RATIO);
    if (RSS_LIMIT_HOLDS && growth > MAX_RSS_GROWTH_BYTES)
        fail_msg("resident set grew %.0f bytes per refit (limit %.0f)", growth,
                 MAX_RSS_GROWTH_BYTES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_run_is_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
