/* The capacity planner: one refit of a full-size model simulated on SimGrid.
 *
 * A simulation has three inputs, each with its own module:
 *  - a calibration (sim/calibrate.h): seconds per byte or per record of every
 *    pipeline stage and the codec's bytes per changed value, measured with the
 *    real engine on some machine (`dcr calibrate`), or supplied by a user;
 *  - a workload (sim/workload.h): the real canonical inventory and training
 *    layout at full size, packed into chunks, buckets and payloads by the
 *    engine's rules, with payload sizes from the calibration (no tensor is
 *    allocated);
 *  - a cluster (this header): nodes, GPUs, links and the object store, turned
 *    into a SimGrid platform (sim/platform.h), or a user's SimGrid XML.
 * sim/actors.c runs the owners, senders, the object store or relay tree and
 * the receivers as SimGrid actors over that platform, then the
 * transport-only full-checkpoint reference on the same platform.
 *
 * SimGrid keeps one engine per process, so every run happens in a forked
 * child that hands its figures back through a pipe: callers may run any
 * number of simulations from one process (sweeps, validation, tests).
 * With DCR_SIM_TRACE set in the environment, every simulated payload send
 * is printed on stderr (owner, payload, bytes, start and end), to compare
 * with an engine trace. */
#ifndef DCR_SIM_H
#define DCR_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/construct.h"
#include "dcr/status.h"
#include "sim/calibrate.h"
#include "sim/cluster.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

/* One configuration to simulate. */
typedef struct dcr_sim_spec {
    dcr_scenario_spec_t scenario; /* model at full size by default; training layout */
    int serve_tp;                 /* serving TP degree (0: rollout_gpus) */
    bool serve_ep;                /* expert parallel inside serving instances */
    const char *transport;        /* "objstore" | "relay" */
    double change_rate;           /* uniform stress changes per owned shard */
    dcr_construct_mode_t mode;
    size_t chunk_bytes;  /* 0: the seed's target for the transport */
    size_t bucket_bytes; /* 0: the seed's 512 MiB */
    /* Each owner's first payload's target, as the engine's
     * dcr_construct_config_t.first_bucket_bytes (0: a quarter bucket). */
    size_t first_bucket_bytes;
    bool no_reference; /* skip the full-checkpoint reference (reference_s, speedup 0) */
    /* Simulate every rollout node. Otherwise identical rollout nodes are
     * simulated once with a multiplicity (the fast path, sim.c): the object
     * store's nodes as one node with its share of the store's egress and
     * request rate, the relay tree as its leftmost root-to-leaf path with
     * each parent's local link shared by the children it has in the tree.
     * Under the flow model's fair sharing both are exact for identical
     * nodes; tests/sim/test_sim_fast.c holds them to the full simulation. */
    bool full;
    dcr_sim_cluster_t cluster;
} dcr_sim_spec_t;

/* Qwen3-30B-A3B at full size on the default cluster, object store, 3%, mode X. */
dcr_sim_spec_t dcr_sim_spec_default(void);

/* Figures of one simulated configuration. Times in seconds. */
typedef struct dcr_sim_result {
    double latency_s;         /* t0 (first owner starts) to t1 (last baseline update) */
    double construction_lb_s; /* longest union of one owner's compute intervals */
    double transport_lb_s;    /* longest union of one sender's submit-to-ack intervals */
    double finalization_s;    /* end of the last application to t1 */
    double construction_end_s, apply_end_s;
    double reference_s; /* transport-only full checkpoint through the object store */
    double speedup;     /* reference_s / latency_s */
    int64_t checkpoint_bytes;
    int64_t payload_bytes;   /* V_payload */
    int64_t cross_bytes;     /* V_cross */
    int64_t raw_value_bytes; /* one value word per record, before coding */
    int64_t records, payloads, items;
    int owners, receivers;
    /* Most payloads any rollout node held for its receivers at once, and
     * what it may hold (queue_payloads): equal means the staging queue
     * filled and back-pressure reached the transport. */
    int staging_max, staging_cap;
    /* Longest union, on one rollout node, of the times a payload was
     * arriving (object-store downloads, relay hops in): the delivery side's
     * bound, which the seed's transport bound (sender side) does not see. */
    double receive_lb_s;
} dcr_sim_result_t;

/* Shares of latency the lower bounds cover, finalization's share, and the
 * time latency exceeds the larger bound plus finalization (the seed's
 * "startup, drain, and stage handoffs"); 0 when latency is 0. */
typedef struct dcr_sim_shares {
    double construction, transport, finalization, gap_s;
    double receive; /* receive_lb_s / latency */
} dcr_sim_shares_t;
dcr_sim_shares_t dcr_sim_result_shares(const dcr_sim_result_t *r);

/* Builds the workload of `spec` with `cal` and simulates the refit and the
 * reference (two SimGrid runs, each in a forked child). SimGrid's own
 * messages go to stderr only at warning level and above. */
dcr_status_t dcr_sim_run(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                         dcr_sim_result_t *out_p);

/* Whether spec on w runs on the fast path (see `full`): a generated
 * platform, a cluster (not shared cores), rollout nodes that are all alike
 * (serving instances within a node) and more nodes than the path needs. */
/* Checks a user's platform (c->platform_xml) before anything runs: a
 * regular file (sim/readfile.h), one SimGrid can load (its own messages
 * are silenced; the error is one line), with the hosts of c and links
 * whose bandwidth is > 0. */
dcr_status_t dcr_sim_platform_check(const dcr_sim_cluster_t *c);

struct dcr_sim_workload;
bool dcr_sim_fast_path(const dcr_sim_spec_t *spec, const struct dcr_sim_workload *w);

/* Simulates a workload built elsewhere (by dcr_sim_workload_build, or by
 * hand in tests and what-if studies; sim/workload.h) on spec's cluster and
 * transport. The workload's world and train nodes must match the cluster. */
dcr_status_t dcr_sim_run_workload(const dcr_sim_spec_t *spec, const struct dcr_sim_workload *w,
                                  dcr_sim_result_t *out_p);

#endif
