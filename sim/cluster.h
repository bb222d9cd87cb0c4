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
    /* Request-rate limits an object store enforces per key prefix (S3:
     * 3,500 PUT and 5,500 GET per second per partitioned prefix), over
     * store_prefixes prefixes; 0: unlimited. A token bucket one second
     * deep: requests beyond the rate wait their turn (a fluid model of
     * throttling, without SlowDown retries). */
    double store_get_rps, store_put_rps;
    int store_prefixes;
    /* Effective ingress of the relay root over all owners' streams together,
     * on top of its node link (0: only the node link). A fitted figure where
     * the relay's TCP streams reach less than the object store's GETs.
     * The generated platform's `relay-in` link; a --platform XML sets its own. */
    double relay_gbps;
    /* Time from t0 until senders can submit (connections, gates): owners
     * construct meanwhile, and no transport interval counts it. */
    double startup_ms;
    /* > 0: each owner writes a full export of its shard (NeMo-RL's owners
     * save a Hugging Face checkpoint on every refit) at this rate before it
     * constructs; 0: no export (dcr's owners compare in place). */
    double owner_export_gbps;
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
    /* Set by the fast path (sim.c), never by a user: this cluster's rollout
     * nodes stand for agg_nodes identical ones (0: themselves). Object
     * store: the store's egress and request rates are scaled to the share
     * of the simulated nodes. Relay (agg_chain): the nodes are the relay
     * tree's leftmost root-to-leaf path, each parent's local link divided
     * among the children it has in the full tree. */
    int agg_nodes;
    bool agg_chain;
} dcr_sim_cluster_t;

/* 1 x 1 training, 1 x 1 rollout, 10 Gbps cross and per flow, 100 Gbps
 * local, 400 Gbps fabric, 1 ms latency, unlimited store with 10 ms per
 * request, engine defaults for queues and flows (2 downloads, fanout 2,
 * queue 8, owner queue 2), 8 MiB reference objects. */
dcr_sim_cluster_t dcr_sim_cluster_default(void);

/* The seed's testbed and NeMo-RL's cluster are descriptions, not code:
 * sim/clusters/paper-testbed.json and nemo-rl.json (sim/description.h). */

/* Checks every field (counts >= 1, rates >= 0, finite). One clear
 * DCR_EINVAL line naming the field. */
dcr_status_t dcr_sim_cluster_validate(const dcr_sim_cluster_t *c);

/* Sets the numeric field `key` (its name in dcr_sim_cluster_t, e.g.
 * "cross_gbps", "store_flows") to v. DCR_EINVAL with one line for an
 * unknown key or a count that is not a whole number; ranges are checked by
 * dcr_sim_cluster_validate. */
dcr_status_t dcr_sim_cluster_set(dcr_sim_cluster_t *c, const char *key, double v);

/* The fields dcr_sim_cluster_set knows, by index: name, value, and whether
 * it is a count (descriptions, sensitivities and reports walk them). */
size_t dcr_sim_cluster_nfields(void);
const char *dcr_sim_cluster_field_name(size_t i);
double dcr_sim_cluster_get(const dcr_sim_cluster_t *c, size_t i);
bool dcr_sim_cluster_field_is_int(size_t i);

/* Children of node `node` on the path the relay fast path simulates (the
 * leftmost root-to-leaf path of the balanced tree of agg_nodes nodes). */
int dcr_sim_cluster_chain_kids(const dcr_sim_cluster_t *c, int node);

/* Sets each node's cross-cluster rate to gbps. A per-flow cap and a relay-
 * root ingress are fractions of the node rate they were stated with, so
 * they keep that fraction (the one rule for --cross-gbps and a plan's
 * --gbps axis). */
void dcr_sim_cluster_set_link_rate(dcr_sim_cluster_t *c, double gbps);

/* Applies a calibration's fitted cluster figures ("cluster" in its JSON)
 * over c, then validates c. */
dcr_status_t dcr_sim_cluster_apply_calibration(dcr_sim_cluster_t *c,
                                               const dcr_sim_calibration_t *cal);

#endif
