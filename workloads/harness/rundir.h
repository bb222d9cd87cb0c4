/* The run directory (--workdir) of a multi-process run: where each process
 * of the run writes what, on one host or a shared file system (the layout
 * is described in deploy/roles.h). The launcher and dcr bench read what the
 * role processes (deploy/) write here; nothing in this file starts or talks
 * to a process. */
#ifndef DCR_WORKLOADS_RUNDIR_H
#define DCR_WORKLOADS_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* Paths in the run directory (see above); snprintf-style into out. */
void dcr_rundir_control_path(const char *workdir, char *out, size_t cap);
void dcr_rundir_objstore_dir(const char *workdir, char *out, size_t cap);
/* --transport relay with --retain: the root's window of committed versions
 * (dcr/recovery.h), a directory on the root's host. */
void dcr_rundir_relay_retain_dir(const char *workdir, char *out, size_t cap);

/* Receiver R's parameter digests at version V. */
void dcr_rundir_digest_path(const char *workdir, uint64_t version, int receiver, char *out,
                            size_t cap);

/* Apply markers for a harness that aims kills (dcr faults --processes):
 * when the run directory holds kill-points/ as a node process starts, the
 * node creates kill-points/apply-n<I>-t<TAU> (empty) when its first apply
 * of attempt TAU begins, so that a SIGKILL can be aimed into the apply. A
 * file, not a node phase: it changes nothing the coordinator or the other
 * nodes read, and costs nothing in runs without the folder. */
void dcr_rundir_kill_points_dir(const char *workdir, char *out, size_t cap);
/* Creates it (an existing one is fine): node processes started after this
 * write their apply markers there. */
dcr_status_t dcr_rundir_kill_points_create(const char *workdir);
void dcr_rundir_apply_marker_path(const char *workdir, int node, uint64_t tau, char *out,
                                  size_t cap);

/* Node `node`'s stage intervals of attempt tau (a raw dcr_trace_interval_t
 * array in this host's layout, written before the node reports DONE);
 * node -1 - r: owner rank r's (written before the owners report SENT, and
 * again with the baseline update before COMMITTED); DCR_RUNDIR_TRACE_COORD:
 * the coordinator process's, of the transition whose committed attempt is
 * tau (written before it answers the launcher). */
#define DCR_RUNDIR_OWNERS_MAX  4096
#define DCR_RUNDIR_TRACE_COORD (-1 - DCR_RUNDIR_OWNERS_MAX)
void dcr_rundir_trace_path(const char *workdir, int node, uint64_t tau, char *out, size_t cap);

/* The largest interval file imported (64 MiB, 2.8 million intervals): a
 * larger one, or one that is not a regular file of whole intervals, is
 * skipped with a warning. */
#define DCR_RUNDIR_TRACE_MAX ((long long)64 << 20)

/* Records the intervals every node process, owner rank and the
 * coordinator process wrote for attempt tau into this process's recorder
 * (one clock: CLOCK_MONOTONIC of one host), so that one trace and the
 * bounds cover every process. A missing node or coordinator file is
 * skipped; owner files are read from rank 0 up to the first missing one (at
 * most DCR_RUNDIR_OWNERS_MAX). The coordinator's window (DCR_STAGE_REFIT) is
 * not imported: the launcher records it from the coordinator's answer, and
 * a refit has exactly one window. Files are opened without following a
 * link and without blocking (a FIFO is skipped); see DCR_RUNDIR_TRACE_MAX
 * for the size bound, and intervals with an unknown stage or actor, or
 * ending before they start, are dropped. */
dcr_status_t dcr_rundir_trace_import(const char *workdir, int nodes, uint64_t tau);

/* The etcd namespace of a --processes run (etcd://HOST:PORT/PREFIX/<run>),
 * which the launcher writes into the run directory for the role processes. */
dcr_status_t dcr_rundir_control_url_write(const char *workdir, const char *url);

#endif
