/* dcr bench --testbed netns (issue 16): the multi-process refit across the
 * hosts of a network-namespace testbed on this machine, which
 * scripts/testbed.sh builds (docs/guides/testbed.md).
 *
 * This file only drives the script and places the roles: the owners as an
 * MPI job launched from the first training host through the testbed's
 * launch agent into every training host, each rollout node inside its
 * rollout host (`ip netns exec`), the launching process itself (with the
 * coordinator and the verifier, its children) on the services host, where
 * etcd and s3rver run. Every role reaches the object store and the control
 * plane over the testbed's subnet only; the links are shaped by the kernel
 * (htb), so the role processes pace nothing themselves.
 *
 * The testbed goes down on every exit path: dcr_testbed_destroy brings it
 * down; a watcher process (started by dcr_testbed_up, outside our process
 * group, ignoring stop signals) brings it down when this process ends
 * without that (a second SIGINT, SIGKILL, a crash).
 *
 * The script: $DCR_TESTBED_SCRIPT, else ../scripts or scripts beside the
 * executable, else ../share/dcr/scripts (the install tree), else the
 * scripts/ of the source tree the executable was built from. */
#ifndef DCR_DEPLOY_TESTBED_H
#define DCR_DEPLOY_TESTBED_H

#include <jansson.h>
#include <stddef.h>

#include "dcr/status.h"
#include "deploy/launch.h"

typedef struct dcr_testbed dcr_testbed_t;

/* What `scripts/testbed.sh up` gets. Rates in Gbps (0: unlimited), as the
 * bench's link flags; flow and latency need kernel qdiscs (fq, netem) and
 * the script refuses them with one line where the kernel lacks those. */
typedef struct dcr_testbed_config {
    int id; /* 0..55: namespaces dcrtb-<id>-*, subnet 10.(200+id).0.0/16 */
    int train_hosts, rollout_hosts;
    double link_gbps, local_gbps, flow_gbps, latency_ms;
    /* dcr_testbed_reference: uploads in flight per training host (the
     * bench: its owners per training node); 0: 1. */
    int upload_flows;
} dcr_testbed_config_t;

/* Brings the testbed up (root only; the script's own line on failure,
 * returned as the error detail), reads its endpoints (`status --json`) and
 * starts the watcher that brings it down if this process dies. Sets
 * AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_REGION to what the testbed's
 * s3rver accepts (this process's environment, inherited by every role). */
dcr_status_t dcr_testbed_up(const dcr_testbed_config_t *cfg, dcr_testbed_t **out_p);
/* Brings the testbed down (`scripts/testbed.sh down --id N`) and stops the
 * watcher; accepts NULL. */
void dcr_testbed_destroy(dcr_testbed_t *t);

/* `etcd://<services>:2379/dcrtb`, for --control. */
const char *dcr_testbed_control(const dcr_testbed_t *t);
/* `http://<services>:4568`, for --s3-endpoint (bucket "dcr", key id S3RVER). */
const char *dcr_testbed_s3_endpoint(const dcr_testbed_t *t);
/* `s3://dcr/bench`, for --store. */
const char *dcr_testbed_store(const dcr_testbed_t *t);

/* CPU seconds the services host's s3rver has used since it started (from
 * /proc/<pid>/stat, clock-tick resolution); negative when unknown. t is a
 * const dcr_testbed_t *, passed as void * to serve as dcr bench's
 * store_cpu_s hook. */
double dcr_testbed_store_cpu_s(void *t);

/* Moves the calling thread into the services host's network namespace
 * (setns): threads and processes it starts afterwards are there too. Call
 * before the run starts any thread. */
dcr_status_t dcr_testbed_enter_services(dcr_testbed_t *t);

/* Timed TCP transfers over every shaped link (`measure --json`): a JSON
 * array of {from, to, measured_mbit, configured_mbit, ok}, owned by the
 * caller. A link off its setting by more than 15% is a warning, not an
 * error (the array says ok: false). */
dcr_status_t dcr_testbed_measure(dcr_testbed_t *t, json_t **out_p);

/* Places the launcher's roles on the testbed: rollout node i in host r<i>,
 * the owner job's mpirun in t0 with the testbed's hostfile (`slots` ranks
 * per training host), its launch agent and TCP between the ranks on the
 * testbed subnet only. */
dcr_status_t dcr_testbed_place_roles(dcr_testbed_t *t, dcr_role_launcher_t *l, int slots);

/* The full-checkpoint reference over the testbed's shaped links, the hook
 * dcr_bench_config_t.reference (ctx: the testbed, set up): every training
 * host t<i> uploads per_node_bytes[i] to the services host's S3 store in
 * objects of 8 MiB (upload_flows puts in flight), then every rollout host
 * r<j> downloads all of it in ranged GETs of 1 MiB (8 in flight, as the
 * objstore transport's nodes), each byte checked against what was put. The
 * transfers run in threads of this process that enter the host's network
 * namespace (setns) before they open a connection, so every byte crosses
 * that host's shaped link and nothing is paced in the process. *seconds_p:
 * from the first put to the last verified range. Each host's measured rate
 * (its bytes over its own phase) goes to dcr_testbed_json's "reference";
 * one more than 15% off its setting is a warning there (ok: false), not
 * an error. Needs train_nodes and rollout_nodes equal to the testbed's
 * hosts. */
dcr_status_t dcr_testbed_reference(void *ctx, const int64_t *per_node_bytes, int train_nodes,
                                   int rollout_nodes, double *seconds_p);

/* The services host's S3 store as a training host sees it: 16 rounds of a
 * PUT, a LIST of the prefix and a GET of a 1 KiB object from t0 (a thread
 * in its namespace), each request's median milliseconds, kept for
 * dcr_testbed_json's "store" {put_ms, list_ms, get_ms, object_bytes,
 * rounds}. What a simulation of the testbed takes as the store's
 * per-request costs (dcr sim --validate); the bytes are too few for the
 * links to matter. Call from the services host (dcr_testbed_enter_services),
 * where the store's handle is made. */
dcr_status_t dcr_testbed_probe_store(dcr_testbed_t *t);

/* `scripts/testbed.sh fault --id N ARGS...` (ARGS: link-down HOST SECONDS |
 * netem HOST [--loss PCT] [--reorder PCT] | partition HOST HOST | heal HOST
 * HOST | clear HOST, NULL-terminated, at most 10; hosts t<i>, r<i>, svc):
 * a network fault on the testbed's links, or its undoing; its lines go to
 * stderr. Blocks while the script runs (link-down: until the link is back
 * up). The script's exit status other than 0 is an error. For dcr faults
 * --testbed (faults/faults_processes.c). */
dcr_status_t dcr_testbed_fault(dcr_testbed_t *t, const char *const *args);

/* {id, subnet, netns: [...], control, s3, store (after
 * dcr_testbed_probe_store), reference (after dcr_testbed_reference),
 * traffic_after_reference: [{host, rx_bytes, tx_bytes}] (each host's eth0
 * counters since the reference ended, read now: the refits' traffic, the
 * control plane's and the verifier's), services_after_reference
 * {s3rver_process, s3rver_cpu_s, etcd_cpu_s, wall_s, s3rver_cores} (the
 * services' CPU time over the same span, from /proc/<pid>/stat; s3rver_cores
 * near 1 is the one-threaded store saturated)}: what the JSON output names. */
json_t *dcr_testbed_json(const dcr_testbed_t *t);

#endif
