/* Micro-benchmarks measured as ratios within one run (DESIGN.md section 10):
 * our machines are shared and noisy, so only same-run ratios are reported. */
#ifndef DCR_WORKLOADS_MICROBENCH_H
#define DCR_WORKLOADS_MICROBENCH_H

#include <stddef.h>

#include "dcr/status.h"

typedef struct dcr_detect_bench {
    size_t bytes;       /* per buffer */
    double change_rate; /* fraction of BF16 words that differ */
    int repeats;        /* best of */
    double read_s;      /* plain two-stream read (sum of XORed words) */
    double detect_s;    /* dcr_detect_changes over the same two buffers */
    double ratio;       /* detect_s / read_s; DESIGN.md wants <= 1.5 */
    double read_gbps;   /* bytes of both buffers per second */
    size_t changed;     /* positions found (== round(rate * words)) */
    const char *kernel; /* dcr_detect_kernel(): which vector kernel ran */
} dcr_detect_bench_t;

/* Change detection vs a plain read of the same two BF16 buffers. */
dcr_status_t dcr_microbench_detect(size_t bytes, double change_rate, int repeats,
                                   dcr_detect_bench_t *out_p);

#endif
