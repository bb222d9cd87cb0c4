/* SimGrid platforms for the simulator: generated from a cluster description,
 * or a user's own XML that follows the same naming.
 *
 * Hosts (a user's XML must declare them with these names):
 *   train-<node>-<gpu>  one per training rank (an owner and its sender)
 *   rollout-<node>      one per rollout node (its receivers), rollout_gpus cores
 *   store               the object-storage service
 *   cpu                 only when the cluster has shared_cores > 0: the one
 *                       machine every owner and receiver computes on
 * and routes between every pair that talks: train -> store, store ->
 * rollout, train -> rollout-0 (the relay root), relay tree edges parent ->
 * child, and train -> train for residual parts.
 *
 * The generated platform has one link per direction of each node's cross-
 * cluster NIC (tx-<node> out of training node <node>, rx-<node> into rollout
 * node <node>); FATPIPE links that cap each flow at flow_gbps and carry the
 * one-way latency, one per node and route kind (xflow-tx-<n> on training
 * node n's routes to the relay root; xstore-tx-<n> and xstore-rx-<i> on
 * store routes, which add the store's request latency); the store's
 * ingress and egress (store-in on uploads, store-out on downloads) only
 * when store_gbps is set; per-node local links for relay hops (lo-out-<i>,
 * lo-in-<i>), the training fabric (fab-out-<n>, fab-in-<n>; nvlink-<n>
 * inside node n); and `relay-in` (relay_gbps) on the owners' routes to the
 * relay root only. Caps and latencies sit on per-node links rather than on
 * one link of the cluster: the same figures, and flows of different nodes
 * stay apart in SimGrid's max-min solver (a shared link, even one that
 * never binds, makes every flow's start or end re-solve all of them). */
#ifndef DCR_SIM_PLATFORM_H
#define DCR_SIM_PLATFORM_H

#include <stdint.h>
#include <stdio.h>

#include "sim/cluster.h"

/* The bandwidth that stands for "unlimited" (bytes per second). */
#define DCR_SIM_UNLIMITED_BPS 1e15
/* Host speed: one flop per nanosecond, so an execution of s seconds on one
 * core is s * 1e9 flops. */
#define DCR_SIM_HOST_FLOPS 1e9

/* Host names, as above, into buf. */
void dcr_sim_host_train(char *buf, size_t cap, int node, int gpu);
void dcr_sim_host_rollout(char *buf, size_t cap, int node);

/* Parent of rollout node i in the balanced relay tree (-1 for the root). */
int dcr_sim_relay_parent(int node, int fanout);

/* Writes the generated platform of cluster c. part_pairs (world x world,
 * row = sender, may be NULL) marks which owner pairs exchange residual parts
 * and need a route. */
dcr_status_t dcr_sim_platform_write(const dcr_sim_cluster_t *c, const uint8_t *part_pairs,
                                    FILE *out);

/* Writes it to a fresh temporary file; *path_p (malloc'd) names it. The
 * caller unlinks and frees it. */
dcr_status_t dcr_sim_platform_tmpfile(const dcr_sim_cluster_t *c, const uint8_t *part_pairs,
                                      char **path_p);

#endif
