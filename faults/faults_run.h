/* `dcr faults`: multi-step refit runs under injected faults, checked after
 * every step (the seed's Figure 9 setting, emulated, and random campaigns).
 *
 * A run builds the bench's pipeline (dcr_bench_config_t: model, training
 * and serving layouts, transport, links, RL mode, change injection), then
 * per step: restarts receivers whose restart is due (each restores the
 * committed version by a dense refit before it joins), arms the step's
 * faults, moves the training weights one step, and refits. A crashed
 * coordinator is replaced by a new one (new id) that resumes the
 * transition; a transition that retries cannot repair stops with one line
 * and the next step goes on from the committed version. After every step
 * every live receiver is compared bit for bit with a dense refit of the
 * committed version, the commit record with the version the owners'
 * baselines hold, and the baselines with the committed weights.
 *
 * Throughout, reader threads emulate requests: they read every receiver
 * through its request gate, and each read must equal a dense refit of the
 * committed version P^v or of the candidate P^{v+1} (by digest), never a
 * mix. Right before every joint commit, every live (required) receiver must
 * hold P^{v+1}. After a failover the new coordinator must read the same
 * membership from the control plane as the crashed one held. */
#ifndef DCR_FAULTS_RUN_H
#define DCR_FAULTS_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "faults/faults.h"
#include "workloads/bench.h"

/* A fault armed before a given step (0-based). */
typedef struct dcr_faults_planned {
    int step;
    dcr_fault_t fault;
} dcr_faults_planned_t;

typedef struct dcr_faults_run_config {
    dcr_bench_config_t bench; /* pipeline; warmup, refits, verify and readers are not used */
    int steps;
    int kill_every;    /* every kill_every steps a random live receiver dies mid-refit; 0: never */
    int restart_after; /* steps until a dead receiver restarts (>= 1) */
    int faults_per_step; /* random faults of every applicable kind armed before each step */
    const dcr_faults_planned_t *plan; /* fixed faults (tests), nplan entries */
    int nplan;
    int max_attempts; /* per coordinator: first attempt plus overwrite retries */
    uint32_t deadline_ms;
    int readers; /* request emulation threads reading every receiver through its gate; 0: none */
    /* A test of the gate check itself, never of the engine: a hook opens a
     * receiver's gate, vouching falsely, once it holds a mix in the middle
     * of an apply, and waits (up to 10 s) for a reader to see it. */
    bool break_gate;
} dcr_faults_run_config_t;

/* The Figure 9 emulation's defaults on a small pipeline: 50 steps, AdamW
 * changes, a kill every 5 steps, restart 5 steps later, unlimited links,
 * one reader. */
dcr_faults_run_config_t dcr_faults_run_config_default(void);

typedef struct dcr_faults_summary {
    int steps;
    int64_t faults_by_kind[DCR_FAULT_KIND_COUNT];
    int64_t faults; /* all kinds */
    int attempts;   /* attempts over all transitions (failovers included) */
    int retries;    /* overwrite retries */
    int commits;
    int stops;      /* transitions stopped cleanly, version v kept */
    int failovers;  /* coordinators replaced after a crash */
    int kills;      /* receivers that died */
    int restores;   /* receivers restored by a dense refit before joining */
    int mismatches; /* live receivers that differed from the dense refit, over all checks */
    int baseline_mismatches;   /* checks where owners' baselines differed from the committed weights
                                */
    int lost;                  /* checks where the commit record did not name the owners' version */
    int checks;                /* receivers compared */
    int64_t gate_reads;        /* requests that read a receiver through its gate */
    int64_t gate_violations;   /* reads that saw neither P^v nor P^{v+1} */
    int commit_checks;         /* required receivers checked right before a joint commit */
    int commit_violations;     /* of those, receivers not holding P^{v+1} */
    int membership_mismatches; /* failovers after which the new coordinator's membership differed */
    uint64_t version;          /* committed at the end */
} dcr_faults_summary_t;

/* Runs the steps; a bit mismatch or a lost version is reported in the
 * summary, not as an error. Errors are setup failures and failures of the
 * harness itself. */
dcr_status_t dcr_faults_run(const dcr_faults_run_config_t *cfg, dcr_faults_summary_t *out_p);

/* Campaign: `seeds` runs of `steps` steps, run i with seed base_seed + i,
 * alternating objstore/relay and sync/async RL, each step arming
 * faults_per_step random faults plus a kill every kill_every steps. The
 * summary adds up the runs. */
typedef struct dcr_faults_campaign_config {
    dcr_faults_run_config_t run; /* bench.transport and bench.rl are overridden per run */
    int seeds;
    uint64_t base_seed;
} dcr_faults_campaign_config_t;

dcr_faults_campaign_config_t dcr_faults_campaign_config_default(void);
dcr_status_t dcr_faults_campaign(const dcr_faults_campaign_config_t *cfg,
                                 dcr_faults_summary_t *out_p);

/* Adds b's figures to a (version: b's). */
void dcr_faults_summary_add(dcr_faults_summary_t *a, const dcr_faults_summary_t *b);

#endif
