#include "workloads/microbench.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/construct.h"
#include "dcr/rng.h"

/* The baseline a scan cannot beat: stream both buffers once, combine words
 * so the compiler cannot drop the loads. */
static uint64_t plain_read(const uint64_t *a, const uint64_t *b, size_t words)
{
    uint64_t acc = 0;
    for (size_t i = 0; i < words; i++) acc += a[i] ^ b[i];
    return acc;
}

dcr_status_t dcr_microbench_detect(size_t bytes, double rate, int repeats,
                                   dcr_detect_bench_t *out_p)
{
    if (bytes < 64 || rate < 0 || rate > 1 || repeats < 1)
        return dcr_error_set(DCR_EINVAL,
                             "detect bench needs >= 64 bytes, rate in [0, 1], repeats >= 1");
    bytes &= ~(size_t)63;
    size_t n = bytes / 2;
    if (n >= ((size_t)1 << 32))
        return dcr_error_set(DCR_EINVAL, "detect bench buffers must hold < 2^32 words");
    uint16_t *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    uint32_t *out = malloc(n * sizeof(uint32_t));
    if (!a || !b || !out) {
        free(a);
        free(b);
        free(out);
        return dcr_error_set(DCR_ENOMEM, "detect bench of %zu bytes", bytes);
    }
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 1);
    for (size_t i = 0; i < n; i++) a[i] = b[i] = (uint16_t)dcr_rng_u64(&rng);
    size_t want = (size_t)(rate * (double)n + 0.5);
    for (size_t i = 0, left = want; i < n && left; i++)
        if (dcr_rng_below(&rng, n - i) < left) {
            b[i] ^= 1;
            left--;
        }
    dcr_detect_bench_t r = {bytes, rate, repeats, 1e30, 1e30, 0, 0, 0, dcr_detect_kernel()};
    volatile uint64_t sink = 0;
    for (int k = 0; k < repeats; k++) {
        double t = dcr_clock_s();
        sink += plain_read((const uint64_t *)a, (const uint64_t *)b, bytes / 8);
        double read = dcr_clock_s() - t;
        t = dcr_clock_s();
        r.changed = dcr_detect_changes(a, b, n, 2, out);
        double detect = dcr_clock_s() - t;
        if (read < r.read_s) r.read_s = read;
        if (detect < r.detect_s) r.detect_s = detect;
    }
    (void)sink;
    r.ratio = r.detect_s / r.read_s;
    r.read_gbps = 2.0 * (double)bytes / r.read_s / 1e9;
    free(a);
    free(b);
    free(out);
    if (r.changed != want)
        return dcr_error_set(DCR_EMISMATCH, "detect bench found %zu of %zu changes", r.changed,
                             want);
    *out_p = r;
    return DCR_OK;
}
