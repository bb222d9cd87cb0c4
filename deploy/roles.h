/* The roles of a multi-process refit on one host (DESIGN.md section 11) and
 * what they share: nothing but the transport, the control plane and the run
 * configuration (dcr_run_config_t, workloads/harness/run_config.h: every
 * role parses the run's dcr bench flags into it, without the bench's own
 * fields).
 *
 * Roles and who starts them:
 *   - `dcr rollout-node --node i [run flags]`: one process per rollout
 *     node, holding that node's receivers (one process per node, not per
 *     receiver: receivers of a node share the node's downloads, its staging
 *     and its link, as a vLLM node shares its host; a node's death is one
 *     failure domain). Never part of an MPI job: one node's death takes no
 *     other process with it.
 *   - the owners: `mpirun -np P dcr owner`, one rank per owner over the
 *     "mpi" group backend (see "Owners as processes" below); with
 *     `dcr bench --processes --owner-threads` they stay threads of the
 *     launcher instead, with the coordinator.
 *   - the coordinator: `dcr coordinator`, its own process, one transition
 *     per request on its stdin (the launcher's); a new process resumes
 *     after a crash.
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
 *   trace/o<R>-t<TAU>.bin   owner rank R's; trace/c-t<TAU>.bin the
 *                           coordinator's (its transition committed TAU)
 *
 * Protocol between coordinator and rollout-node processes, all through the
 * control plane (the status records of dcr/parties.h):
 *   1. a node process restores the committed version (dense refit from its
 *      own world) and reports READY with that version; it takes part only
 *      in attempts prepared after that (a late joiner must not join a
 *      stream half sent), so the launcher starts refits once every node is
 *      READY;
 *   2. the coordinator prepares tau (control plane), opens tau on its own
 *      transport handle (the run's clearing handle), says so
 *      (dcr_coord_report_opened) and waits until every node with a required
 *      receiver reports JOINED for tau (join timeout: one line naming the
 *      node); owner processes stream once the coordinator opened (every
 *      other handle joins the attempt without clearing it, so a node that
 *      joins late still finds every payload); owners in the launcher
 *      stream after the nodes joined;
 *   3. a node learns of tau by polling the latest attempt (every 2 ms),
 *      takes part when its from_version is the version it holds and it has
 *      a required receiver, begins tau on its receivers, waits until the
 *      coordinator opened tau, joins tau on its own handle, reports
 *      JOINED, delivers and applies;
 *   4. the node acknowledges each required receiver (dcr_control_ack),
 *      writes its stage intervals and reports DONE (with its last apply's
 *      end on CLOCK_MONOTONIC, its download bytes and its CPU), or FAILED
 *      with the error line; a node process that dies is reported GONE by
 *      whoever started it (the launcher), which fails the attempt at once;
 *   5. the coordinator commits; a node learns of the commit by polling the
 *      commit record (version from+1 with attempt tau), writes its digests
 *      and reports READY at the new version. A newer attempt instead means
 *      tau failed: the node stops its delivery and joins the retry (whose
 *      records are all overwrites) with its receivers as they are: dirty
 *      ones (--resident) are repaired in place by it and checked against
 *      the oracle before they acknowledge (restore.h). A commit made without
 *      the node (it was not required) makes it restore the new version.
 *
 * Owners as processes (owner_role.c). Each rank of `mpirun -np P dcr owner
 * [run flags]` builds its own world (every shard of the seeded world: the
 * constructor runs only its rank's owner), joins the group over
 * MPI_COMM_WORLD, and follows the control plane through rank 0, which
 * orders every rank over the group so that all run the same attempt: it
 * learns of attempt tau from the latest attempt; an attempt for a
 * from_version it has already seen an attempt for is a retry, sent as all
 * overwrites (the first attempt the job sees for a version may use XOR: a
 * coordinator that crashed before any owner saw its attempt sent nothing);
 * each rank joins tau on its handle after the coordinator opened it,
 * constructs, sends, finishes (its manifest part), and rank 0 reports for
 * the job (dcr_owners_report_put, after every rank answered) the summed
 * construction figures and t0 (SENT); when the commit record names from+1
 * with the attempt it sent, each rank updates its tracker and baseline,
 * and rank 0 reports t1 (the last rank's end; COMMITTED); on a control
 * plane in a file each rank reads that commit record itself rather than
 * wait for rank 0's word, whose order then arrives as a duplicate
 * (owner_orders.h). `dcr coordinator`
 * holds no constructor: it prepares, waits for the nodes and the owners,
 * commits, and reads t0/t1 from the owners' report; a new coordinator
 * process after a crash resumes from the commit record and the latest
 * attempt (dcr_coord_resume).
 *
 * Clocks: t0 and t1 are taken where the owners run (rank 0 takes the
 * earliest start and the latest end its ranks report);
 * a node's apply end and its trace intervals are on CLOCK_MONOTONIC, shared
 * by every process of one host, so the launcher merges them into its own
 * trace as they are. Across hosts the offset of each host's clock to the
 * coordinator's must be measured (e.g. an NTP-style exchange through the
 * control plane) and subtracted; not done yet.
 *
 * Endpoints: the object store needs none beyond its directory or bucket.
 * The relay tree (--transport relay) runs across processes over real TCP:
 * each rollout-node process is its tree node (node 0 the root), listens
 * on a port of its own (on $DCR_RELAY_HOST, default 127.0.0.1; the kernel
 * chooses the port) and publishes "HOST:PORT" through the control plane
 * (dcr_node_endpoint_put, dcr/parties.h); in each attempt a
 * node connects to its parent and each owner rank to the root, reading
 * the address there at that moment (a restarted node publishes anew). The
 * coordinator's handle holds no part of the tree. A node process that
 * takes no part in an attempt (none of its receivers required, another
 * committed version, or prepared before the process started) does not
 * forward it either: it opens and stops it at once, which turns away the
 * owners (at the root) and its children that wait for it, and its parent
 * sees the connection close, so the attempt fails in seconds and the
 * retry (all overwrites) runs with the restarted process (--restart-nodes).
 * A parent whose child does not connect within 30 s fails the attempt too
 * (its process died before it greeted the parent).
 *
 * Transport across processes (objstore): every process opens its own
 * handle over the same store (dcr/transport.h: join, owner subsets,
 * send_only): the coordinator's clears, every other joins; a node process
 * serves rollout endpoint 0 only (rollout_nodes 1), an owner process its
 * rank's owner and no rollout endpoint. */
#ifndef DCR_DEPLOY_ROLES_H
#define DCR_DEPLOY_ROLES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dcr/control.h"
#include "dcr/transport.h"
#include "workloads/harness/run_config.h"
#include "workloads/harness/rundir.h"

/* The store node `node` replays from under --transport relay: the root's
 * own directory at node 0 ("dir:..."), else "relay://ADDR" with ADDR what
 * node 0 published last through the control plane (a restarted root
 * publishes anew). DCR_ENOTFOUND while nothing is published. */
dcr_status_t dcr_role_relay_retain_url(const dcr_run_config_t *run, const char *workdir, int node,
                                       char *url, size_t cap);

/* Writes this process's recorded intervals as `who`'s file of attempt tau
 * (who as in dcr_rundir_trace_path). */
dcr_status_t dcr_role_trace_write(const char *workdir, int who, uint64_t tau);
/* The control plane of the run (SQLite in the run directory, or
 * cfg->control_path; for an etcd address, the launcher's namespace read from
 * the run directory), opened by this process. */
dcr_status_t dcr_role_control_open(const dcr_run_config_t *cfg, const char *workdir,
                                   dcr_control_t **out_p);
/* The same at the control plane address `control` (a SQLite file or an etcd
 * URL; NULL: the run directory's control.db), for a launcher that was told
 * where the bench put the control plane (dcr_bench_processes_t.start). */
dcr_status_t dcr_role_control_open_at(const char *control, const char *workdir,
                                      dcr_control_t **out_p);
/* Opens the run's control plane (into *control_p unless already open) and
 * reads the commit record, retrying every 50 ms for up to timeout_ms while
 * either fails (a role process may start before the launcher made them). */
dcr_status_t dcr_role_control_open_patiently(const dcr_run_config_t *run, const char *workdir,
                                             int timeout_ms, dcr_control_t **control_p,
                                             dcr_commit_record_t *rec);
/* Where the relay tree's nodes are (roles.h, "Endpoints"): a directory over
 * one handle of the run's control plane, opened with the transport (a
 * handle may be shared by the relay's threads) and closed by
 * dcr_role_relay_close. Storage of the caller of dcr_role_transport_open_as,
 * zeroed before; it must outlive the handle. */
typedef struct dcr_role_relay {
    dcr_relay_directory_t dir;
    dcr_control_t *control;
} dcr_role_relay_t;
/* Closes the directory's control-plane handle: after the transport that
 * used it is destroyed. Accepts one never opened (zeroed). */
void dcr_role_relay_close(dcr_role_relay_t *d);

/* This process's transport handle of the run. Object store: a handle over
 * the run's directory with `rollout_nodes` endpoints (1 for a node
 * process), its part of the run spelled out by `as` (dcr/transport.h): the
 * coordinator's clears, every other joins; an owner process serves its
 * owners and no rollout endpoint. With
 * --transport relay the handle is one part of the tree instead (relay set:
 * required; node: the tree node a handle that is not send_only serves). */
typedef struct dcr_role_handle {
    bool join;
    int owner_first, owner_count; /* owner_count 0: every owner */
    bool send_only;
    /* An objstore transport backend ("faulty:objstore" for a faults run);
     * NULL: "objstore". */
    const char *backend;
    dcr_role_relay_t *relay;
    int node;
} dcr_role_handle_t;
dcr_status_t dcr_role_transport_open_as(const dcr_run_config_t *cfg, const char *workdir,
                                        int train_nodes, int world, int rollout_nodes,
                                        const dcr_role_handle_t *as, dcr_transport_t **out_p);

/* A rollout-node process's main loop (steps 1 and 3-5 above) until *stop
 * becomes non-zero (a signal) or the control plane stays unreachable for
 * ready_timeout_ms. */
typedef struct dcr_role_node_config {
    const dcr_run_config_t *run;
    const char *workdir;
    int node;
    int ready_timeout_ms;
    /* The receivers' weights live in resident files (restore.h, live, with
     * repair in the overwrite retry), so that a restarted process rejoins
     * clean, by replay or by repair, and a receiver dirty at the committed
     * version is repaired in place by the retry; off: a restart is a dense
     * refit, and so is a survivor's restore after a failed attempt. */
    bool resident;
} dcr_role_node_config_t;

dcr_status_t dcr_role_rollout_node_run(const dcr_role_node_config_t *cfg,
                                       volatile sig_atomic_t *stop);

/* Reads a digests file (dcr_rundir_digest_path), waiting up to wait_ms for it
 * to appear (DCR_ENOTFOUND after that). */
dcr_status_t dcr_role_read_digests(const char *path, int wait_ms, dcr_param_digests_t *out_p);

/* An owner rank of `mpirun -np P dcr owner` ("Owners as processes" above;
 * deploy/owner_role.c): group is this process's endpoint of a
 * group with one rank per owner of the run's training layout (the "mpi"
 * backend over MPI_COMM_WORLD; the caller initialised MPI). Runs until
 * *stop becomes non-zero, or the control plane stays unreachable for
 * ready_timeout_ms at start. */
typedef struct dcr_group dcr_group_t;
typedef struct dcr_role_owner_config {
    const dcr_run_config_t *run;
    const char *workdir;
    dcr_group_t *group;
    int ready_timeout_ms;
} dcr_role_owner_config_t;

dcr_status_t dcr_role_owner_run(const dcr_role_owner_config_t *cfg, volatile sig_atomic_t *stop);

/* The coordinator as its own process (`dcr coordinator`; coord_role.c):
 * holds no constructor and no receiver, only the control plane and the
 * run's clearing transport handle (every other handle joins), and runs in
 * remote-nodes and remote-owners mode (dcr/coord.h). It serves requests,
 * one line each on `in`: "refit" runs the next transition, "resume FROM"
 * finishes the transition FROM -> FROM+1 a crashed coordinator left
 * (dcr_coord_resume); each is answered with one line on `out`, a result
 * (dcr_role_refit_result_format) or "error <status> <line>". Returns at
 * the end of `in`. */
typedef struct dcr_role_coord_config {
    const dcr_run_config_t *run;
    const char *workdir;
} dcr_role_coord_config_t;

dcr_status_t dcr_role_coordinator_run(const dcr_role_coord_config_t *cfg, FILE *in, FILE *out);
/* A transition's figures as the coordinator process's answer line ("ok
 * ...\n", doubles exact); snprintf's return. */
int dcr_role_refit_result_format(const dcr_refit_result_t *r, char *out, size_t cap);
/* Parses an answer line: DCR_OK with *out_p, or the error it names (one
 * line), or DCR_EIO for a malformed line. */
dcr_status_t dcr_role_refit_result_parse(const char *line, dcr_refit_result_t *out_p);

/* The verifier: for each version first..last and every receiver, waits up
 * to wait_ms for the digests file, and compares it with a dense refit of
 * that version in a world of its own. ok[v - first] is set per version;
 * the first mismatch's line goes to the log. DCR_OK unless the verifier
 * itself failed (a missing file is a failed version, not an error). */
dcr_status_t dcr_role_verify_digests(const dcr_run_config_t *run, const char *workdir,
                                     uint64_t first, uint64_t last, int wait_ms, bool *ok);

#endif
