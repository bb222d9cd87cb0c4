/* One delta construction on a synthetic training step: the engine of
 * `dcr construct`. Builds the scenario's weights (seeded), the committed
 * baseline, a candidate with uniform stress changes, and runs the
 * constructor in each requested mode on the same candidate. */
#ifndef DCR_WORKLOADS_CONSTRUCT_BENCH_H
#define DCR_WORKLOADS_CONSTRUCT_BENCH_H

#include <pthread.h>
#include <stdbool.h>

#include "dcr/construct.h"
#include "workloads/change/change_profile.h"
#include "workloads/change/scenario.h"

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

/* A sink for payloads kept as files DIR/tau<T>-owner<O>-<ID>.dcrp (the
 * directory must exist). submit only copies the payload into memory: it runs
 * inside the timed sender threads, where a file create, folder sweep and
 * fsync per payload would be timed as construction. The files are written by
 * dcr_dir_sink_flush once the timing is over, so the kept payloads are held
 * in memory until then (their compressed size, not the checkpoint's). */
typedef struct dcr_dir_sink {
    const char *dir;
    uint64_t tau;
    dcr_payload_sink_t sink;
    pthread_mutex_t lock; /* submit runs concurrently across owners */
    struct dcr_dir_sink_kept *kept;
    size_t nkept, cap;
    dcr_status_t held_status; /* a copy that failed (DCR_ENOMEM); reported by flush */
} dcr_dir_sink_t;

/* Makes d an empty sink writing to dir (borrowed) with attempt tau. */
void dcr_dir_sink_init(dcr_dir_sink_t *d, const char *dir, uint64_t tau);

/* Writes every payload held, in submit order, and forgets them; *written_p
 * (may be NULL) gets how many files it wrote. Errors: a failed copy in
 * submit (DCR_ENOMEM), or the first file that cannot be written (DCR_EIO,
 * the path named); the held payloads are forgotten either way. */
dcr_status_t dcr_dir_sink_flush(dcr_dir_sink_t *d, size_t *written_p);

/* Forgets the held payloads without writing them and releases d's
 * resources (a failed run keeps no partial set of files); accepts NULL. */
void dcr_dir_sink_fini(dcr_dir_sink_t *d);

#endif
