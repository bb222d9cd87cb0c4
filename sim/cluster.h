/* The cluster a simulated refit runs on: presets, checks, and fields set by
 * name (a calibration's fitted figures, a user's flags). Apart from the
 * driver (sim.c) so that the platform and workload builders, and the
 * calibration, depend on it without depending on the driver that calls them. */
#ifndef DCR_SIM_CLUSTER_H
#define DCR_SIM_CLUSTER_H

#include <stdbool.h>

#include "dcr/status.h"
#include "sim/calibrate.h"

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
 * definition (sim/cluster.c) and printed by `dcr sim`. */
dcr_sim_cluster_t dcr_sim_cluster_testbed(void);

/* NeMo-RL's remote sparse refit cluster, as far as its design document
 * (docs/design-docs/sparse-delta-refit.md in NVIDIA-NeMo/RL) states it: 32
 * producers, S3 with 64 MiB parts and a 10 Gbps throughput target, a
 * balanced binary relay tree, 32 x 8 + 8 staged payloads per receiver.
 * Guesses, stated in the definition (sim/cluster.c) and printed by `dcr sim
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

#endif
