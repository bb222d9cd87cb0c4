/* Receiver apply benchmark: apply time of a delta against a dense load of the
 * same tensors on one receiver of a vLLM-like layout (DESIGN.md section 10). */
#ifndef DCR_WORKLOADS_SERVE_BENCH_H
#define DCR_WORKLOADS_SERVE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workloads/model/model.h"
#include "workloads/serve/vllm_layout.h"

typedef struct dcr_serve_bench_result {
    double rate;           /* fraction of every tensor's elements changed */
    int64_t records;       /* records this receiver's items carried (last repeat) */
    size_t payload_bytes;  /* encoded payload bytes (last repeat) */
    size_t resident_bytes; /* the receiver's resident parameters */
    /* Dense reload of every canonical tensor through the loader into the
     * warm receiver (every resident byte written, as a full reload would). */
    double dense_s;
    double apply_s;  /* apply of the decoded items (receiver stats.apply_s) */
    double ingest_s; /* validate + decode + apply, wall time */
    double ratio;    /* apply_s / dense_s */
    int64_t items_sparse, items_full;
    /* compare_full only: the seed's full pass (scratch + loader over whole
     * tensors) on a second receiver, same payloads; else 0. */
    double full_apply_s;
    double full_ratio; /* full_apply_s / dense_s */
    /* The memory floor of any apply on this machine: the same records
     * written by a bare prefetching loop (XOR or store, no decode, loader or
     * checks) into one huge-page buffer of the canonical tensors' bytes,
     * each tensor's records at their canonical positions. */
    double floor_s;
    double floor_ratio; /* floor_s / dense_s */
    /* The same loop and records, its buffer given the held version where
     * the measured receiver got it (right after the dense reload) instead
     * of just before the loop: it starts as cold (caches, translations) as
     * the apply does. */
    double floor_cold_s;
    /* compare_loader only: a receiver that runs the native loader for every
     * item (loader_per_item), same payloads; else 0. */
    double loader_apply_s;
} dcr_serve_bench_result_t;

typedef struct dcr_serve_bench_options {
    int receiver;      /* which receiver of the layout */
    bool full_pass;    /* the measured receiver runs the seed's full pass */
    bool compare_full; /* also time a full-pass receiver on the same payloads */
    int repeats;       /* >= 1; every time figure is the best of this many */
    uint64_t seed;
    /* Also time a receiver that runs the loader for every item
     * (dcr_receiver_config_t.loader_per_item) on the same payloads. */
    bool compare_loader;
} dcr_serve_bench_options_t;

/* Dense-loads the receiver with random weights and prewarms it, then per
 * repeat and per rate (rates inner): times a dense reload of the current
 * version into it, refits it to a new version with that rate of changes,
 * times the apply (and the full-pass and loader-per-item receivers', when
 * asked) and the floor
 * loop over the same records (checked to rebuild the new version), and checks
 * every refit bit-exact against a fresh dense load (outside the timings).
 * The timed parts alternate in one process, so their ratios share the
 * machine's state. out[i] gets rate i's figures, each the best over the
 * repeats. Memory: about six copies of the receiver's bytes (one is the
 * floor loop's buffer). */
dcr_status_t dcr_serve_bench_run(const dcr_model_config_t *model, const dcr_serve_config_t *sc,
                                 const dcr_serve_bench_options_t *opt, const double *rates,
                                 int nrates, dcr_serve_bench_result_t *out);

/* One repeat without comparison (dcr_serve_bench_run with those options). */
dcr_status_t dcr_serve_bench_apply(const dcr_model_config_t *model, const dcr_serve_config_t *sc,
                                   int receiver, bool full_pass, const double *rates, int nrates,
                                   uint64_t seed, dcr_serve_bench_result_t *out);

#endif
