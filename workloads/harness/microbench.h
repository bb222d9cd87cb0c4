/* Micro-benchmarks measured as ratios within one run (DESIGN.md section 10):
 * our machines are shared and noisy, so only same-run ratios are reported. */
#ifndef DCR_WORKLOADS_MICROBENCH_H
#define DCR_WORKLOADS_MICROBENCH_H

#include <stddef.h>

#include "dcr/device.h"
#include "dcr/status.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

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

/* The device module's stages on one device (engine/device), each against
 * the plain transfer of the same bytes on that device. */
typedef struct dcr_device_detect_bench {
    size_t bytes;       /* per buffer (BF16 words) */
    double change_rate; /* fraction of words that differ */
    int repeats;        /* best of */
    double copy_s;      /* device-to-device copy of one buffer (reads and writes `bytes`) */
    double detect_s;    /* dcr_device_detect over candidate and tracker */
    double ratio;       /* detect_s / copy_s; the target is <= 1.5 */
    double copy_gbps;   /* bytes moved by the copy (read + write) per second */
    size_t changed;     /* positions found (== round(rate * words)) */
} dcr_device_detect_bench_t;

/* Change detection vs a device-to-device copy of the same bytes. */
dcr_status_t dcr_microbench_device_detect(dcr_device_t *dev, size_t bytes, double change_rate,
                                          int repeats, dcr_device_detect_bench_t *out_p);

typedef struct dcr_device_apply_bench {
    size_t bytes;    /* the resident tensor (BF16 words) */
    double rate;     /* fraction of words with a record */
    size_t records;  /* distinct positions, increasing */
    int repeats;     /* best of */
    double dense_s;  /* host-to-device reload of the whole tensor from staging */
    double sparse_s; /* records up from staging (indices, words), then scatter XOR */
    double full_s;   /* records scattered into zeroed scratch, combine XOR, reset */
    double ratio;    /* sparse_s / dense_s; the target at 1% is <= 0.1 */
    double full_ratio;
} dcr_device_apply_bench_t;

/* Record application at `rate` vs a dense reload of the same tensor; the
 * result is checked against the XOR of the records on the host. */
dcr_status_t dcr_microbench_device_apply(dcr_device_t *dev, size_t bytes, double rate, int repeats,
                                         dcr_device_apply_bench_t *out_p);

/* The scenario of dcr microbench apply: spec built and checked against the
 * serving layout serve (completed in place) and the memory budget (the bench holds the old and
 * new canonical tensors and the floor's flat copy, receiver 0 and the dense
 * reload's receiver) into *out_p (dcr_scenario_destroy it); *bytes_p: its
 * canonical bytes. Errors as dcr_scenario_create, dcr_serve_config_validate
 * and dcr_scenario_check_memory. */
dcr_status_t dcr_microbench_apply_scenario(const dcr_scenario_spec_t *spec,
                                           dcr_serve_config_t *serve, dcr_scenario_t **out_p,
                                           size_t *bytes_p);

#endif
