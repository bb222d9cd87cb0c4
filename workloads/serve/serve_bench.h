/* Receiver apply benchmark: apply time of a delta against a dense load of the
 * same tensors on one receiver of a vLLM-like layout (DESIGN.md section 10). */
#ifndef DCR_WORKLOADS_SERVE_BENCH_H
#define DCR_WORKLOADS_SERVE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workloads/model.h"
#include "workloads/serve/vllm_layout.h"

typedef struct dcr_serve_bench_result {
    double rate;           /* fraction of every tensor's elements changed */
    int64_t records;       /* records this receiver's items carried */
    size_t payload_bytes;  /* encoded payload bytes */
    size_t resident_bytes; /* the receiver's resident parameters */
    double dense_s;        /* dense load of every canonical tensor through the loader (best of 3) */
    double apply_s;        /* apply of the decoded items (receiver stats.apply_s) */
    double ingest_s;       /* validate + decode + apply, wall time */
    double ratio;          /* apply_s / dense_s */
    int64_t items_sparse, items_full;
} dcr_serve_bench_result_t;

/* Dense-loads receiver `receiver` of the layout with random weights, prewarms
 * it, then refits it once per rate (consecutively), checking each refit
 * bit-exact against a fresh dense load (outside the timings). full_pass turns
 * sparse apply off (the seed's receivers). out[i] gets rate i's figures.
 * Memory: about four copies of the model's canonical bytes. */
dcr_status_t dcr_serve_bench_apply(const dcr_model_config_t *model, const dcr_serve_config_t *sc,
                                   int receiver, bool full_pass, const double *rates, int nrates,
                                   uint64_t seed, dcr_serve_bench_result_t *out);

#endif
