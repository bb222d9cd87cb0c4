/* Memory accounting of the workloads: the process's resident set, the
 * machine's physical memory, and the memory budget (--max-memory) that every
 * command building a model or a run checks its estimated peak against before
 * it allocates anything large.
 *
 * The estimate counts checkpoint-sized copies by role (docs/guides/memory.md, "Memory
 * budget"; BENCHMARKS.md for the measured copies of the bench):
 *   process     what is resident when the estimate is made (libraries, the
 *               inventory and the source layout);
 *   canonical   full canonical copies (the bench's scratch / oracle tensor);
 *   shards      training shards (committed and candidate versions);
 *   trackers    owners' trackers (committed values of the tasks they own) and
 *               residual baselines;
 *   receivers   every receiver's resident parameters, its scratch for the
 *               largest tensor and its staging;
 *   verifier    the dense-refit receiver built for each check;
 *   changes     the change injection's state (AdamW FP32 masters and
 *               moments, 14 bytes per BF16 source element);
 *   transient   payloads in flight, export buffers: a fraction of the
 *               checkpoint measured on the bench;
 *   maps        per-element maps over the shards (inventory --check). */
#ifndef DCR_WORKLOADS_BUDGET_H
#define DCR_WORKLOADS_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/status.h"
#include "workloads/change/scenario.h"

/* Bytes resident in this process now (/proc/self/statm); 0 when unknown. */
int64_t dcr_rss_bytes(void);

/* Peak resident bytes of this process so far (getrusage ru_maxrss); 0 when
 * unknown. */
int64_t dcr_peak_rss_bytes(void);

/* Physical memory of the machine (MemTotal), 0 when unknown. */
int64_t dcr_memory_total_bytes(void);

/* The default budget is this share of physical memory. */
#define DCR_MEMORY_BUDGET_SHARE 0.5

/* DCR_MEMORY_BUDGET_SHARE of physical memory; 8 GiB when it is unknown. */
int64_t dcr_memory_budget_default(void);

/* Parses a --max-memory SIZE: decimal digits with an optional unit K, M, G
 * or T (powers of 1024, optionally followed by "iB" or "B"), e.g. 8G,
 * 512MiB, 1073741824. No signs, spaces, fractions or hex. One error line
 * naming `flag` and the text otherwise. */
dcr_status_t dcr_size_parse(const char *flag, const char *text, int64_t *out_p);

typedef struct dcr_memory_estimate {
    int64_t checkpoint; /* canonical bytes: the unit the roles are reported in */
    int64_t process, canonical, shards, trackers, receivers, verifier, changes, transient, maps;
} dcr_memory_estimate_t;

/* The sum of the roles (saturating, never overflows). */
int64_t dcr_memory_estimate_total(const dcr_memory_estimate_t *e);

/* DCR_OK when the estimate fits `budget` (<= 0: the default). Otherwise
 * DCR_ENOMEM with one line naming `what`, the estimate, its largest roles
 * and the budget, before anything was allocated. */
dcr_status_t dcr_memory_check(const char *what, const dcr_memory_estimate_t *e, int64_t budget);

/* What a run allocates on top of its scenario, by role. */
typedef struct dcr_run_shape {
    int canonical_copies; /* full canonical tensor sets */
    int shard_copies;     /* versions of the training shards */
    bool trackers;        /* owners keep trackers (construction modes X and P) */
    int receivers;        /* receivers with data */
    int serve_tp;         /* each holds about 1/serve_tp of the checkpoint */
    int verifiers;        /* dense-refit receivers alive at once */
    bool adamw;           /* AdamW masters and moments */
    bool transient;       /* payloads in flight (a run that refits) */
    int map_bytes;        /* bytes per shard element of per-element maps */
} dcr_run_shape_t;

/* Measured on the bench (BENCHMARKS.md, "Memory per checkpoint byte"): a
 * receiver holds about 1.4x its share of the checkpoint (parameters, prewarm
 * plans, scratch, staging), the constructor 1.25x the owned bytes (trackers,
 * per-owner buffers; measured before the undo log, which may add up to
 * 1/DCR_CONSTRUCT_UNDO_SHARE of them and is counted on top), and refits hold
 * up to 0.6x the checkpoint in flight. */
#define DCR_ESTIMATE_RECEIVER_FACTOR 1.4
#define DCR_ESTIMATE_TRACKER_FACTOR  1.25
#define DCR_ESTIMATE_TRANSIENT       0.6
/* AdamW state per owned source element: FP32 master, m, v and the step's box. */
#define DCR_ESTIMATE_ADAMW_BYTES 14

/* The peak a run of `shape` over the scenario will reach, from its inventory
 * and layout, before anything is allocated; adds the resident set of now. */
void dcr_scenario_estimate(const dcr_scenario_t *s, const dcr_run_shape_t *shape,
                           dcr_memory_estimate_t *out_p);

/* dcr_scenario_estimate, then dcr_memory_check against the scenario's
 * budget (s->max_memory). */
dcr_status_t dcr_scenario_check_memory(const dcr_scenario_t *s, const char *what,
                                       const dcr_run_shape_t *shape);

#endif
