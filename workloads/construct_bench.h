/* One delta construction on a synthetic training step: the engine of
 * `dcr construct`. Builds the scenario's weights (seeded), the committed
 * baseline, a candidate with uniform stress changes, and runs the
 * constructor in each requested mode on the same candidate. */
#ifndef DCR_WORKLOADS_CONSTRUCT_BENCH_H
#define DCR_WORKLOADS_CONSTRUCT_BENCH_H

#include <stdbool.h>

#include "dcr/construct.h"
#include "workloads/change_profile.h"
#include "workloads/scenario.h"

typedef struct dcr_construct_bench {
    double change_rate;             /* element change rate per task, [0, 1] */
    uint64_t seed;                  /* weights and changes */
    dcr_construct_config_t cfg;     /* mode is overridden per run */
    const dcr_payload_sink_t *sink; /* may be NULL: payloads are only counted */
    /* Runs per configuration (>= 1), round-robin over all configurations so
     * that they share the machine's state alike; the fastest run counts, so
     * with 2 or more the first round's page faults drop out. */
    int rounds;
    /* Also runs every mode with the opposite of cfg.shuffle, alternating
     * with the requested setting in every round. */
    bool compare_shuffle;
    /* When not NULL, changes replay this measured profile instead of the
     * uniform change_rate (injected_elements then counts canonical elements). */
    const dcr_change_profile_t *profile;
    /* Safetensors checkpoint whose values start the weights (see
     * dcr_ckpt_init_canonical); NULL: synthetic weights from the seed. */
    const char *init;
} dcr_construct_bench_t;

typedef struct dcr_construct_bench_result {
    int64_t checkpoint_bytes;
    int64_t injected_elements;         /* source elements changed by the injection */
    size_t baseline_bytes;             /* trackers + residual baseline of the first mode */
    dcr_construct_stats_t stats;       /* cfg.shuffle as requested */
    dcr_construct_stats_t stats_other; /* the opposite shuffle, with compare_shuffle */
} dcr_construct_bench_result_t;

/* Runs the modes in modes[0..nmodes) on one scenario and one candidate;
 * results[i] belongs to modes[i]. Constructors are built once per
 * configuration and kept for all rounds (runs without a commit leave them
 * unchanged), so several rounds hold several baselines at once. Progress
 * goes to the log at info level. */
dcr_status_t dcr_construct_bench_run(const dcr_scenario_t *sc, const dcr_construct_bench_t *bench,
                                     const dcr_construct_mode_t *modes, int nmodes,
                                     dcr_construct_bench_result_t *results);

/* A sink that writes each payload to DIR/tau<T>-owner<O>-<ID>.dcrp (the
 * directory must exist). Keeps the count of files written. */
typedef struct dcr_dir_sink {
    const char *dir;
    uint64_t tau;
    dcr_payload_sink_t sink;
} dcr_dir_sink_t;

void dcr_dir_sink_init(dcr_dir_sink_t *d, const char *dir, uint64_t tau);

#endif
