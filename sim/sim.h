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
#include "workloads/scenario.h"
#include "workloads/serve/vllm_layout.h"

/* The cluster a refit runs on. Bandwidths in Gbps (1e9 bit/s), 0 meaning
 * unlimited; times in milliseconds. */
typedef struct dcr_sim_cluster {
    int train_nodes, train_gpus;     /* one owner per training GPU */
    int rollout_nodes, rollout_gpus; /* one receiver per rollout GPU */
    double cross_gbps;               /* each node's cross-cluster link, each direction */
    double flow_gbps;                /* cap of one cross-cluster flow (a TCP stream, one GET) */
    double local_gbps;       /* each rollout node's local link, each direction (relay hops) */
    double fabric_gbps;      /* each training node's fabric link (residual parts) */
    double latency_ms;       /* one-way cross-cluster latency, paid once per transfer */
    double local_latency_ms; /* one-way latency of a rollout-local hop */
    double store_gbps;       /* object storage service, all flows together */
    double store_latency_ms; /* per request (PUT, GET), on top of latency_ms */
    double store_list_ms;    /* mean delay before a rollout node's listing sees a new object */
    double store_put_ms;     /* per PUT on the owner after its bytes moved (fsync, rename) */
    /* Effective ingress of the relay root over all owners' streams together,
     * on top of its node link (0: only the node link). A fitted figure where
     * the relay's TCP streams reach less than the object store's GETs.
     * The generated platform's `relay-in` link; a --platform XML sets its own. */
    double relay_gbps;
    /* Time from t0 until senders can submit (connections, gates): owners
     * construct meanwhile, and no transport interval counts it. */
    double startup_ms;
    int store_flows;      /* concurrent downloads per rollout node */
    int fanout;           /* relay tree children per node */
    int queue_payloads;   /* relay per-hop queue; object store prefetch per node */
    int staging_payloads; /* relay: payloads a node stages for its receivers (0: queue_payloads) */
    int owner_queue;      /* finished payloads an owner may have waiting for its sender */
    /* > 0: the in-process engine (dcr bench) on one machine with this many
     * cores: every owner and receiver computes there, a node's receivers
     * apply a payload one after another, and acknowledgments and baseline
     * updates run one by one. 0: a cluster: each owner has its own core,
     * each receiver its own process, and owners update their baselines and
     * receivers acknowledge in parallel. */
    int shared_cores;
    bool ack_rtt;             /* a queueing acknowledgment waits one latency back */
    double ref_object_mib;    /* object size of the full-checkpoint reference */
    const char *platform_xml; /* a user's SimGrid platform instead of the generated one */
} dcr_sim_cluster_t;

/* 1 x 1 training, 1 x 1 rollout, 10 Gbps cross and per flow, 100 Gbps
 * local, 400 Gbps fabric, 1 ms latency, unlimited store with 10 ms per
 * request, engine defaults for queues and flows (2 downloads, fanout 2,
 * queue 8, owner queue 2), 8 MiB reference objects. */
dcr_sim_cluster_t dcr_sim_cluster_default(void);

/* The seed's latency testbed (reference/models.md section 6): 8 training
 * nodes x 4 GPUs, 8 rollout nodes x 8 GPUs, 5 Gbps per node and per flow
 * across regions, S3. What the seed does not give is stated in the
 * definition (sim/sim.c) and printed by `dcr sim`. */
dcr_sim_cluster_t dcr_sim_cluster_testbed(void);

/* NeMo-RL's remote sparse refit cluster, as far as its design document
 * (docs/design-docs/sparse-delta-refit.md in NVIDIA-NeMo/RL) states it: 32
 * producers, S3 with 64 MiB parts and a 10 Gbps throughput target, a
 * balanced binary relay tree, 32 x 8 + 8 staged payloads per receiver.
 * Guesses, stated in the definition (sim/sim.c) and printed by `dcr sim
 * --testbed nemo-rl`: the node counts, that 10 Gbps is each node's rate,
 * latencies, downloads per node. */
dcr_sim_cluster_t dcr_sim_cluster_nemo_rl(void);

/* Checks every field (counts >= 1, rates >= 0, finite). One clear
 * DCR_EINVAL line naming the field. */
dcr_status_t dcr_sim_cluster_validate(const dcr_sim_cluster_t *c);

/* Sets the numeric field `key` (its name in dcr_sim_cluster_t, e.g.
 * "cross_gbps", "store_flows") to v. DCR_EINVAL with one line for an
 * unknown key or a count that is not a whole number; ranges are checked by
 * dcr_sim_cluster_validate. */
dcr_status_t dcr_sim_cluster_set(dcr_sim_cluster_t *c, const char *key, double v);

/* Applies a calibration's fitted cluster figures ("cluster" in its JSON)
 * over c, then validates c. */
dcr_status_t dcr_sim_cluster_apply_calibration(dcr_sim_cluster_t *c,
                                               const dcr_sim_calibration_t *cal);

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
    bool no_reference;   /* skip the full-checkpoint reference (reference_s, speedup 0) */
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

/* Simulates a workload built elsewhere (by dcr_sim_workload_build, or by
 * hand in tests and what-if studies; sim/workload.h) on spec's cluster and
 * transport. The workload's world and train nodes must match the cluster. */
struct dcr_sim_workload;
dcr_status_t dcr_sim_run_workload(const dcr_sim_spec_t *spec, const struct dcr_sim_workload *w,
                                  dcr_sim_result_t *out_p);

#endif
