/* ctest-labels: unit
 * Change detection (engine/device/detect.c): every kernel this CPU runs
 * against a naive byte comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/device.h"
#include "dcr/rng.h"
#include "device/device-internal.h"
#include "testkit.h"

/* Every detection kernel this CPU runs, and the dispatching entry point,
 * against a naive byte comparison: every element size, lengths around the
 * 32- and 64-byte blocks and the segment size, sparse and dense changes,
 * changes in any byte of a word. */
static void test_detect_changes_matches_naive(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, testkit_seed(0xde7ec7));
    const size_t sizes[] = {1, 2, 4, 8};
    const size_t lengths[] = {0,  1,   15,  16,  17,  31,   32,   33,   63,   64,
                              65, 100, 127, 128, 129, 2047, 2048, 2049, 70001};
    const double rates[] = {0.0, 0.001, 0.03, 0.3, 1.0};
    int kernels_run = 0;
    for (int kernel = -1; kernel < DCR__DETECT_KERNEL_COUNT; kernel++) {
        if (kernel >= 0 && !dcr__detect_kernel_supported((dcr__detect_kernel_t)kernel)) continue;
        kernels_run++;
        for (size_t si = 0; si < 4; si++)
            for (size_t li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++)
                for (size_t ri = 0; ri < 5; ri++) {
                    size_t es = sizes[si], n = lengths[li];
                    unsigned char *a = malloc(n * es + 1), *b = malloc(n * es + 1);
                    /* Exactly n entries (plus a byte for n = 0), so that a
                     * sanitizer build catches a kernel storing past them. */
                    uint32_t *got = malloc(n * sizeof(uint32_t) + 1),
                             *want = malloc((n + 1) * sizeof(uint32_t));
                    size_t nwant = 0;
                    for (size_t k = 0; k < n * es; k++)
                        a[k] = b[k] = (unsigned char)dcr_rng_u64(&rng);
                    for (size_t e = 0; e < n; e++) {
                        if (dcr_rng_uniform(&rng) >= rates[ri]) continue;
                        b[e * es + dcr_rng_below(&rng, es)] ^=
                            (unsigned char)(1u << dcr_rng_below(&rng, 8));
                        want[nwant++] = (uint32_t)e;
                    }
                    size_t ngot = kernel < 0 ? dcr_detect_changes(a, b, n, es, got)
                                             : dcr__detect_changes_with(
                                                   (dcr__detect_kernel_t)kernel, a, b, n, es, got);
                    if (ngot != nwant)
                        fail_msg("kernel %s, element size %zu, n %zu: %zu changes, want %zu",
                                 kernel < 0 ? dcr_detect_kernel()
                                            : dcr__detect_kernel_name((dcr__detect_kernel_t)kernel),
                                 es, n, ngot, nwant);
                    if (nwant) assert_memory_equal(got, want, nwant * sizeof(uint32_t));
                    free(a);
                    free(b);
                    free(got);
                    free(want);
                }
    }
    assert_true(kernels_run >= 2); /* the entry point and at least the scalar kernel */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_changes_matches_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
