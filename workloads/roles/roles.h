/* The roles of a multi-process refit on one host (DESIGN.md section 11) and
 * what they share: nothing but the transport, the control plane and the run
 * configuration.
 *
 * Roles and who starts them:
 *   - `dcr rollout-node --node i [run flags]`: one process per rollout
 *     node, holding that node's receivers (one process per node, not per
 *     receiver: receivers of a node share the node's downloads, its staging
 *     and its link, as a vLLM node shares its host; a node's death is one
 *     failure domain). Never part of an MPI job: one node's death takes no
 *     other process with it.
 *   - the coordinator with the owners: today one process (`dcr bench
 *     --processes` itself), the owners as threads with the in-process group
 *     backend. Next: `mpirun -np P dcr owner` ranks over the "mpi" group
 *     backend and `dcr coordinator` as its own process (see "owners as
 *     processes" below).
 *   - the verifier: `dcr verify-digests [run flags]`, a process that shares
 *     no state with the refit: it rebuilds the seeded world, replays it to
 *     each committed version, digests a dense refit and compares it with the
 *     digests every rollout-node process wrote.
 *
 * The run configuration is the set of `dcr bench` flags: every role parses
 * the same flags and rebuilds the seeded model, layouts and weights itself
 * (dcr_role_world_t), so nothing but the flags and a run directory is
 * handed over. The run directory (--workdir) holds, on one host or a shared
 * file system:
 *   control.db            the SQLite control plane (etcd across hosts)
 *   objstore-objstore/    the object store (S3 across hosts)
 *   digests/v<V>-r<R>.dcrd  receiver R's parameter digests at version V
 *   trace/n<I>-t<TAU>.bin   node I's stage intervals of attempt TAU
 *
 * Protocol between coordinator and rollout-node processes, all through the
 * control plane (no new slot: the reserved report ids of dcr/rollout_node.h):
 *   1. a node process restores the committed version (dense refit from its
 *      own world), reports READY with that version;
 *   2. the coordinator prepares tau (control plane), opens tau on its own
 *      transport handle and waits until every node with a required receiver
 *      reports JOINED for tau (join timeout: one line naming the node);
 *   3. a node learns of tau by polling the latest attempt (0.5 ms), takes
 *      part when its from_version is the version it holds and it has a
 *      required receiver, begins tau on its receivers, opens tau on its own
 *      transport handle, reports JOINED, delivers and applies;
 *   4. the node acknowledges each required receiver (dcr_control_ack) and
 *      reports DONE (with its last apply's end on CLOCK_MONOTONIC, its
 *      download bytes and its CPU), or FAILED with the error line;
 *   5. the coordinator commits; a node learns of the commit by polling the
 *      commit record (version from+1 with attempt tau), writes its digests
 *      and reports READY at the new version. A newer attempt instead means
 *      tau failed: the node stops its delivery and joins the retry (whose
 *      records are all overwrites).
 *   Owners learn of attempts from the latest attempt and its from_version
 *   in the same way: an attempt for a from_version they have already seen
 *   an attempt for is a retry (all overwrite); owners update trackers when
 *   the commit record names from+1.
 *
 * Clocks: t0 and t1 are taken where the owners run (today the coordinator's
 * process); a node's apply end and its trace intervals are on
 * CLOCK_MONOTONIC, shared by every process of one host, so the launcher
 * merges them into its own trace as they are. Across hosts the offset of each host's clock to the
 * coordinator's must be measured (e.g. NTP-style ping through the control
 * plane) and subtracted; not done yet.
 *
 * Endpoints: the object store needs none beyond its directory or bucket;
 * the relay root's address would go into the root node's report (a field
 * of dcr_node_report_t) for owners to read; the relay is not supported
 * across processes yet (its tree lives in one transport handle).
 *
 * Transport across processes (objstore): every process opens its own
 * handle over the same directory with rollout_nodes 1; a node process uses
 * its endpoint 0. What the transport itself still lacks is listed in the
 * README (per-process endpoint subsets, per-owner completion markers, an
 * open_attempt that joins instead of clearing the attempt's prefix). */
#ifndef DCR_WORKLOADS_ROLES_H
#define DCR_WORKLOADS_ROLES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/control.h"
#include "dcr/transport.h"
#include "workloads/bench.h"

/* Paths in the run directory (see above); snprintf-style into out. */
void dcr_role_control_path(const char *workdir, char *out, size_t cap);
void dcr_role_objstore_dir(const char *workdir, char *out, size_t cap);
void dcr_role_digest_path(const char *workdir, uint64_t version, int receiver, char *out,
                          size_t cap);

/* Node `node`'s stage intervals of attempt tau (a raw dcr_trace_interval_t
 * array in this host's layout, written before the node reports DONE). */
void dcr_role_trace_path(const char *workdir, int node, uint64_t tau, char *out, size_t cap);
/* Records the intervals every node process wrote for attempt tau into this
 * process's recorder (one clock: CLOCK_MONOTONIC of one host), so that one
 * trace and the bounds cover every process. A missing file is skipped. */
dcr_status_t dcr_role_trace_import(const char *workdir, int nodes, uint64_t tau);

/* The control plane of the run (SQLite in the run directory, or
 * cfg->control_path), opened by this process. */
dcr_status_t dcr_role_control_open(const dcr_bench_config_t *cfg, const char *workdir,
                                   dcr_control_t **out_p);
/* This process's object-store handle over the run's directory, with
 * `rollout_nodes` endpoints (1 for a node process). */
dcr_status_t dcr_role_transport_open(const dcr_bench_config_t *cfg, const char *workdir,
                                     int train_nodes, int world, int rollout_nodes,
                                     dcr_transport_t **out_p);

/* A rollout-node process's main loop (steps 1 and 3-5 above) until *stop
 * becomes non-zero (a signal) or the control plane stays unreachable for
 * ready_timeout_ms. */
typedef struct dcr_role_node_config {
    const dcr_bench_config_t *run;
    const char *workdir;
    int node;
    int ready_timeout_ms;
} dcr_role_node_config_t;

dcr_status_t dcr_role_rollout_node_run(const dcr_role_node_config_t *cfg,
                                       volatile sig_atomic_t *stop);

/* The verifier: for each version first..last and every receiver, waits up
 * to wait_ms for the digests file, and compares it with a dense refit of
 * that version in a world of its own. ok[v - first] is set per version;
 * the first mismatch's line goes to the log. DCR_OK unless the verifier
 * itself failed (a missing file is a failed version, not an error). */
dcr_status_t dcr_role_verify_digests(const dcr_bench_config_t *run, const char *workdir,
                                     uint64_t first, uint64_t last, int wait_ms, bool *ok);

#endif
