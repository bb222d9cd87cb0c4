/* Starting the roles of a multi-process refit on this host (dcr bench
 * --processes): one child process per rollout node and a verifier child,
 * each running this executable with the run's flags (deploy/roles.h).
 *
 * No child outlives the launcher: each dies with it (PR_SET_PDEATHSIG,
 * SIGKILL), also when the launcher is killed; a janitor process removes a
 * temporary run directory after the launcher is gone, however it ended.
 * Each child's stderr reaches ours line by line, prefixed with its role
 * ("[rollout-node 1] ..."). A rollout-node child that dies during the run
 * is reported as FAILED in the control plane on its behalf, so that the
 * coordinator fails the attempt at once instead of waiting for a timeout. */
#ifndef DCR_DEPLOY_LAUNCH_H
#define DCR_DEPLOY_LAUNCH_H

#include <sys/types.h>

#include "dcr/spawn.h"
/* bench.h for dcr_bench_processes_t only: the launcher's hooks are what
 * dcr_bench_run calls (dcr bench --processes and dcr faults --processes run
 * a bench over the processes it starts); the roles themselves take the run
 * configuration (workloads/harness/run_config.h). */
#include "workloads/harness/bench.h"
#include "deploy/restorer.h"

typedef struct dcr_role_launcher dcr_role_launcher_t;

/* run_args[0..nargs): the run flags every role gets (the bench's own flags
 * minus those only the launcher reads); copied. `run` is the parsed
 * configuration (borrowed; it must outlive the launcher). */
dcr_status_t dcr_role_launcher_create(const dcr_run_config_t *run, char *const *run_args, int nargs,
                                      dcr_role_launcher_t **out_p);
/* Stops every child still running (SIGTERM, then SIGKILL after 5 s);
 * accepts NULL. */
void dcr_role_launcher_destroy(dcr_role_launcher_t *l);
/* The owners as an MPI job of this host, `mpirun -np P dcr owner` with P
 * the run's training ranks (deploy/roles.h), instead of threads of
 * the launching process; the launching process's coordinator then runs in
 * remote-owners mode (dcr/coord.h). mpirun must be on PATH; as root the
 * job gets OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
 * The job dying fails the run at once. Off by default. Call before the run. */
void dcr_role_launcher_set_owners(dcr_role_launcher_t *l, bool on);
/* Owner processes of the run (0: owners are threads of the launcher). */
int dcr_role_launcher_owner_processes(const dcr_role_launcher_t *l);

/* With the owner job, the coordinator is a process too (`dcr coordinator`,
 * one transition per request). Coordinator kills: before every `every`-th
 * transition the coordinator process gets SIGKILL at the next point in
 * turn ("opened": it opened the attempt; "sent": the owners sent every
 * payload, it waits for the nodes); a new coordinator process resumes the
 * transition from the control plane (dcr_coord_resume). 0: none; a
 * coordinator that dies on its own then fails the run. Call before the run. */
void dcr_role_launcher_set_coordinator_kills(dcr_role_launcher_t *l, int every);
/* SIGKILLs sent to coordinator processes, and coordinator processes that
 * resumed a transition, so far. */
int dcr_role_launcher_coordinator_kills(const dcr_role_launcher_t *l);
int dcr_role_launcher_coordinator_restarts(const dcr_role_launcher_t *l);

/* Restart a rollout-node process that dies (a new process: it restores the
 * committed version by a dense refit and joins the attempts prepared after
 * it is ready; the coordinator waits for it before the next attempt). Off
 * by default: a death fails the run. Call before the run. */
void dcr_role_launcher_set_restart(dcr_role_launcher_t *l, bool on);
/* Rollout-node processes restarted so far. */
int dcr_role_launcher_restarts(const dcr_role_launcher_t *l);

/* Real kills: after every `every`-th committed version, SIGKILL to the next
 * rollout-node process in turn at the next point in turn ("joined": it
 * began the next attempt, delivery about to start; "done": it applied and
 * acknowledged, before or around the commit), as seen from its reports.
 * Implies restarts. 0: none. Call before the run. */
void dcr_role_launcher_set_kills(dcr_role_launcher_t *l, int every);
/* SIGKILLs sent so far. */
int dcr_role_launcher_sigkills(const dcr_role_launcher_t *l);

/* Kills aimed by a harness (dcr faults --processes), beside the schedule
 * above: the pid of rollout-node `node`'s running process (0: none now, e.g.
 * between a death and its restart). */
int dcr_role_launcher_node_pid(dcr_role_launcher_t *l, int node);
/* SIGKILL to rollout-node `node` if its running process is still `pid` (a
 * kill aimed at a process that has died or been replaced meanwhile is not
 * sent), counted in dcr_role_launcher_sigkills. With wait_ms > 0 it returns
 * once the death is reported in the control plane on the node's behalf
 * (GONE, or RESTARTING when restarts are on), or after wait_ms. True when
 * the signal was sent. Thread-safe against the launcher's monitor. */
bool dcr_role_launcher_kill_node(dcr_role_launcher_t *l, int node, int pid, int wait_ms);
/* SIGSTOP (pause) or SIGCONT (!pause) to rollout-node `node` if its running
 * process is still `pid`, as dcr_role_launcher_kill_node aims: a harness's
 * stall of that process (dcr faults --processes, delay). True when sent. */
bool dcr_role_launcher_pause_node(dcr_role_launcher_t *l, int node, int pid, bool pause);

/* An elastic join: rollout node `node` (e.g. the last) is not started with
 * the others. Until dcr_role_launcher_join starts it, the control plane
 * says it is GONE with pid 0, which the coordinator reads as "not started:
 * no member" (dcr/coord.h), so attempts go on without it, as without a
 * killed node that is not back yet. Its process then restores like any
 * fresh one (deploy/restorer.h: from an anchor plus replay with
 * --anchor-every, else densely) and reports READY; the first attempt
 * prepared after that includes it. Call before the run. */
void dcr_role_launcher_set_join(dcr_role_launcher_t *l, int node);
/* The same join, started by the launcher itself: rollout node `node`'s
 * process starts once `version` (>= 1) is committed, as the launcher's
 * monitor sees the control plane (dcr bench --processes --join-at: the
 * coordinator may be this process's, whose refits no hook wraps). The
 * verification (the hooks' verify) then waits for the node to join and
 * fails when it did not. Call before the run. */
void dcr_role_launcher_set_join_at(dcr_role_launcher_t *l, int node, uint64_t version);
/* Starts the joining node's process now, without waiting for it (refits
 * go on); call between refits. DCR_EINVAL when none waits to join. */
dcr_status_t dcr_role_launcher_join(dcr_role_launcher_t *l);
/* Whether the joining node's process reported READY (waiting up to
 * wait_ms): then *version_p gets the committed version it joined at and
 * *seconds_p the time from its start to READY (each may be NULL), and
 * <workdir>/joined/n<node> holds that version (the verifier reads no
 * digests of its receivers for earlier versions: it did not exist). */
bool dcr_role_launcher_joined(dcr_role_launcher_t *l, int wait_ms, uint64_t *version_p,
                              double *seconds_p);
/* An elastic join as it went. */
typedef struct dcr_role_join {
    int node;
    int at_step;      /* the harness's step or version it started at (0: no join) */
    uint64_t version; /* the committed version the node joined at (READY) */
    double seconds;   /* from its start to READY */
    /* Its receivers' restores at the join (its first restore records), by
     * kind, the bytes they moved and what dense refits of them move. */
    uint64_t by_kind[DCR_RESTORE_KINDS], bytes, dense_bytes;
} dcr_role_join_t;
/* The join once the node processes stopped (the restore records are read
 * then, before the run folder goes), at_step left 0: false when no node
 * joined or its records could not be read (a warning says why). */
bool dcr_role_launcher_join_result(const dcr_role_launcher_t *l, dcr_role_join_t *out_p);

/* A spawn prefix for one role: argv[0..n) goes in front of the role's
 * command line (found on PATH), e.g. `ip netns exec dcrtb-0-r1` to start
 * the role inside another network namespace (dcr bench --testbed). The
 * prefix must exec the rest in place (same pid), so the role still dies
 * with the launcher and is reaped as its child. `role` names the process as
 * its stderr prefix does: "rollout-node <i>", "owners" (in front of
 * mpirun), "coordinator", "verifier". n = 0 removes it. Copied; call
 * before the run. */
dcr_status_t dcr_role_launcher_set_prefix(dcr_role_launcher_t *l, const char *role,
                                          char *const *argv, int n);
/* The owner job's transport arguments to mpirun, args[0..n) (copied),
 * instead of the one-host ones (`--mca btl self,vader --mca
 * btl_vader_single_copy_mechanism none`): e.g. a hostfile, a launch agent
 * and `--mca btl self,tcp` with interface includes across hosts. `-np`,
 * `--oversubscribe --bind-to none --tag-output` stay. Call before the run. */
dcr_status_t dcr_role_launcher_set_mpirun_args(dcr_role_launcher_t *l, char *const *args, int n);

/* Memory per role (deploy/role_memory.h): one object per rollout-node and
 * owner process with its peak resident memory and what it must hold, as
 * gathered when the roles stopped (an empty array before, or when none
 * wrote its figures). A new reference. */
struct json_t;
struct json_t *dcr_role_launcher_memory_json(const dcr_role_launcher_t *l);

/* The hooks dcr_bench_run calls (valid while the launcher lives). */
const dcr_bench_processes_t *dcr_role_launcher_hooks(dcr_role_launcher_t *l);

/* A guardian process: /bin/sh with sh_argv (a fixed script; whatever it
 * is given comes as positional parameters, never as script text), its stdin
 * the read end of a pipe whose write end is *fd_p (close-on-exec), so that
 * it reads EOF once this process has ended, however it ended; it leaves our
 * session and ignores INT, TERM, HUP and QUIT so that it outlives what ended
 * us (dcr_spawn_options_t.detach). `what` names it in errors. *p is the
 * process, for dcr_process_wait. */
dcr_status_t dcr_role_spawn_guardian(const char *what, char *const *sh_argv, dcr_process_t *p,
                                     int *fd_p);

#endif
