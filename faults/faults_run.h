/* `dcr faults`: multi-step refit runs under injected faults, checked after
 * every step (the seed's Figure 9 setting, emulated, and random campaigns).
 *
 * A run builds the bench's pipeline (dcr_bench_config_t: model, training
 * and serving layouts, transport, links, RL mode, change injection), then
 * per step: restarts receivers whose restart is due (each restores the
 * committed version by a dense refit before it joins), arms the step's
 * faults, moves the training weights one step, and refits. A crashed
 * coordinator is replaced by a new one (new id) that resumes the
 * transition; a transition that retries cannot repair stops with one line
 * and the next step goes on from the committed version. After every step
 * every live receiver is compared bit for bit with a dense refit of the
 * committed version, the commit record with the version the owners'
 * baselines hold, and the baselines with the committed weights.
 *
 * Throughout, reader threads emulate requests: they read every receiver
 * through its request gate, and each read must equal a dense refit of the
 * committed version P^v or of the candidate P^{v+1} (by digest), never a
 * mix. Right before every joint commit, every live (required) receiver must
 * hold P^{v+1}. After a failover the new coordinator must read the same
 * membership from the control plane as the crashed one held. */
#ifndef DCR_FAULTS_RUN_H
#define DCR_FAULTS_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "faults/faults.h"
#include "workloads/harness/bench.h"
#include "deploy/launch.h"

/* A fault armed before a given step (0-based). */
typedef struct dcr_faults_planned {
    int step;
    dcr_fault_t fault;
} dcr_faults_planned_t;

typedef struct dcr_faults_run_config {
    dcr_bench_config_t bench; /* pipeline; warmup, refits, verify and readers are not used */
    int steps;
    int kill_every;    /* every kill_every steps a random live receiver dies mid-refit; 0: never */
    int restart_after; /* steps until a dead receiver restarts (>= 1) */
    int faults_per_step; /* random faults of every applicable kind armed before each step */
    const dcr_faults_planned_t *plan; /* fixed faults (tests), nplan entries */
    int nplan;
    int max_attempts; /* per coordinator: first attempt plus overwrite retries */
    uint32_t deadline_ms;
    int readers; /* request emulation threads reading every receiver through its gate; 0: none */
    /* A test of the gate check itself, never of the engine: a watcher of
     * the faulty transport opens a receiver's gate, vouching falsely, once
     * it holds a mix in the middle of an apply, and waits (up to 10 s) for a
     * reader to see it. Sync RL only: async RL applies where no call of a
     * wrapped backend lies. */
    bool break_gate;
} dcr_faults_run_config_t;

/* The Figure 9 emulation's defaults on a small pipeline: 50 steps, AdamW
 * changes, a kill every 5 steps, restart 5 steps later, unlimited links,
 * one reader. */
dcr_faults_run_config_t dcr_faults_run_config_default(void);

typedef struct dcr_faults_summary {
    int steps;
    int64_t faults_by_kind[DCR_FAULT_KIND_COUNT];
    int64_t faults; /* all kinds */
    int attempts;   /* attempts over all transitions (failovers included) */
    int retries;    /* overwrite retries */
    int commits;
    int stops;      /* transitions stopped cleanly, version v kept */
    int failovers;  /* coordinators replaced after a crash */
    int kills;      /* receivers that died */
    int restores;   /* receivers restored before joining (threads: dense; processes: by kind) */
    int mismatches; /* live receivers that differed from the dense refit, over all checks */
    int baseline_mismatches;   /* checks where owners' baselines differed from the committed weights
                                */
    int lost;                  /* checks where the commit record did not name the owners' version */
    int checks;                /* receivers compared */
    int64_t gate_reads;        /* requests that read a receiver through its gate */
    int64_t gate_violations;   /* reads that saw neither P^v nor P^{v+1} */
    int commit_checks;         /* required receivers checked right before a joint commit */
    int commit_violations;     /* of those, receivers not holding P^{v+1} */
    int membership_mismatches; /* failovers after which the new coordinator's membership differed */
    uint64_t version;          /* committed at the end */
} dcr_faults_summary_t;

/* Runs the steps; a bit mismatch or a lost version is reported in the
 * summary, not as an error. Errors are setup failures and failures of the
 * harness itself. */
dcr_status_t dcr_faults_run(const dcr_faults_run_config_t *cfg, dcr_faults_summary_t *out_p);

/* Campaign: `seeds` runs of `steps` steps, run i with seed base_seed + i,
 * alternating objstore/relay and sync/async RL, each step arming
 * faults_per_step random faults plus a kill every kill_every steps. The
 * summary adds up the runs. */
typedef struct dcr_faults_campaign_config {
    dcr_faults_run_config_t run; /* bench.transport and bench.rl are overridden per run */
    int seeds;
    uint64_t base_seed;
} dcr_faults_campaign_config_t;

dcr_faults_campaign_config_t dcr_faults_campaign_config_default(void);
dcr_status_t dcr_faults_campaign(const dcr_faults_campaign_config_t *cfg,
                                 dcr_faults_summary_t *out_p);

/* Adds b's figures to a (version: b's). */
void dcr_faults_summary_add(dcr_faults_summary_t *a, const dcr_faults_summary_t *b);

/* ---- processes: real kills (dcr faults train|campaign --processes) ----------------
 *
 * faults/faults_processes.c. The whole process deployment of dcr bench
 * --processes on this host: the owners as an MPI job (mpirun -np P dcr
 * owner), the coordinator as a `dcr coordinator` process, one `dcr
 * rollout-node` process per rollout node, and a `dcr verify-digests`
 * verifier process, started by the role launcher (deploy/launch.h)
 * and driven by dcr_bench_run with run.steps refits and no warm-up. This
 * process holds no owner, coordinator or receiver: it aims kills and faults
 * at the others from what they share (the control plane, the object store's
 * files, the process table).
 *
 * Rollout-node kills: every run.kill_every steps one falls due, its point
 * and rollout node drawn from the seed up front (the schedule does not
 * depend on timing), armed once the one before has fired (it stays armed
 * across attempts until it fires) and aimed by a watcher thread at the
 * node's reports in the control plane, for attempts prepared after arming:
 *   delivery: the node reported JOINED and has not marked its first apply;
 *   apply:    it marked its first apply of the attempt (roles.h apply
 *             markers) and still reports JOINED: partial writes;
 *   acked:    it reported DONE (applied, acknowledged); the coordinator
 *             process may commit before or after the signal lands (a race
 *             this process cannot close; the log names the commit record's
 *             attempt read just before each signal).
 * A kill the watcher first sees past its point (a window shorter than a
 * poll) fires at the next point it sees in the same attempt and is counted
 * where it landed. A killed node process is restarted (--resident) and
 * restores the committed version before it joins: from its resident files,
 * by replay of the retained versions, else by a dense refit
 * (deploy/restorer.h).
 *
 * Coordinator kills: in every coordinator_every-th transition the
 * coordinator process is SIGKILLed at "opened" or "sent" in turn and a new
 * coordinator process resumes the transition from the control plane
 * (dcr_role_launcher_set_coordinator_kills); 0: none.
 *
 * Faults (run.faults_per_step drawn per step from the seed, and run.plan):
 * child processes do not share this process's injector, so the faults that
 * reach a processes run are those this process executes itself on what the
 * roles share (dcr_fault_kind_reaches_processes), armed for the step's
 * attempts and dropped at its end if they have not fired:
 *   corrupt:      one byte in the middle of a stored payload object of the
 *                 attempt (target: its owner, -1 any) is flipped, the
 *                 object replaced whole (rename) as the store writes;
 *   delay:        rollout-node `target`'s process is stopped (SIGSTOP) for
 *                 `ms` once it joined an attempt, then continued: its
 *                 reception and reports stall;
 *   control_busy: an exclusive transaction on the SQLite control plane is
 *                 held for `ms` once an attempt is open: every role's
 *                 control-plane write waits (SQLite only; ms below the
 *                 roles' busy timeout).
 * A corrupt object may be fetched intact before the flip: that attempt is
 * then unaffected (the retained copy of its version is damaged, which a
 * replay detects and restores densely instead). Faults whose place is
 * inside a role process (drop, duplicate, reorder on the owners' sends;
 * commit_reply, control_down on the coordinator's handle), that end the
 * owner job (owner_crash), whose damage fails the bench's retention of a
 * version committed intact (truncate_object, remove_object), or on the
 * relay are refused; simulated receiver deaths and coord_crash are replaced
 * by the real kills. After the last step the verifier process compares
 * every receiver's digests of every committed version with a dense refit. */
typedef enum dcr_faults_kill_point {
    DCR_FAULTS_KILL_DELIVERY = 0,
    DCR_FAULTS_KILL_APPLY,
    DCR_FAULTS_KILL_ACKED,
    DCR_FAULTS_KILL_COORDINATOR,
    DCR_FAULTS_KILL_POINTS
} dcr_faults_kill_point_t;

/* "delivery", "apply", "acked", "coordinator". */
const char *dcr_faults_kill_point_name(dcr_faults_kill_point_t point);

/* Whether this process can execute a fault of this kind on a processes
 * run (see above; control_busy needs the SQLite control plane). */
bool dcr_fault_kind_reaches_processes(dcr_fault_kind_t kind);

/* Default coordinator_every of dcr faults --processes: 10, five coordinator
 * kills in the default 50 steps. */
#define DCR_FAULTS_COORDINATOR_EVERY 10
/* A campaign's: 2, two coordinator kills in each run of its default 4 steps. */
#define DCR_FAULTS_CAMPAIGN_COORDINATOR_EVERY 2

typedef struct dcr_faults_processes_config {
    /* run.bench: the run configuration as the role processes parse it from
     * run_args (objstore, or relay without join_at and testbed and with no
     * corrupt fault; sync RL; bench.seed is replaced per campaign run,
     * with the --seed value in the role arguments); run.kill_every: a node
     * kill every N steps (0: none); run.faults_per_step and run.plan as
     * above; run.steps as in a thread run; run.max_attempts, deadline_ms,
     * readers, restart_after and break_gate are not used (the coordinator
     * process keeps its defaults). */
    dcr_faults_run_config_t run;
    char *const *run_args; /* the run flags every role process gets, with --seed N among them */
    int nargs;
    int coordinator_every; /* a coordinator-process kill every N transitions; 0: none */
    /* A test of the verifier, never of the engine: receiver 0's digests
     * file of version 1 is rewritten, well-formed, with one bit of one
     * parameter's digest flipped before the verifier runs, which must then
     * report that version (and name the parameter). */
    bool corrupt_digest;
    /* An elastic join (--join-at STEP): the last rollout node's process is
     * not started with the others but before step join_at (>= 1, below
     * run.steps), while the attempts go on without it; it restores from an
     * anchor plus replay where run.bench.anchor_every allows (else
     * densely), then takes part from the first attempt prepared after it
     * is READY. The run fails when it did not join by its last step. The
     * verifier reads no digests of its receivers for versions before it
     * joined. 0: none. */
    int join_at;
    /* --testbed netns: a testbed that is up (deploy/testbed.h),
     * this process in its services host, run.bench's store, S3 endpoint and
     * control plane (and run_args') the testbed's; NULL: this host only.
     * The roles are placed on its hosts (dcr_testbed_place_roles), the
     * drawn faults are delay and the network kinds (link_down, net_loss,
     * net_reorder, partition; corrupt and control_busy need the run
     * directory's store and SQLite file), each acted out through
     * dcr_testbed_fault once an attempt is open and undone after its `ms`
     * (50..449): link_down on a training or rollout host, net_loss of
     * 5..29% and net_reorder of 10..49% of what such a host receives (drawn
     * only where the kernel has netem), a partition between a rollout host
     * and the services host. A campaign
     * gives each run its own store prefix (s3://dcr/faults-<seed>). Without
     * a testbed these kinds are never drawn (a seed draws what it drew). */
    struct dcr_testbed *testbed;
} dcr_faults_processes_config_t;

typedef struct dcr_faults_processes_summary {
    /* s: the faults train figures. kills and restores count receivers (of
     * the killed node processes); failovers: coordinator processes that
     * resumed a transition; retries: attempts beyond the first of each
     * transition (a killed coordinator's included); mismatches: committed
     * versions the verifier found not bit-exact on some receiver; checks:
     * versions x receivers compared; lost: steps whose transition did not
     * commit the next version (a transition the coordinator processes
     * cannot commit fails the run, so stops are 0); faults_by_kind: the
     * faults this process executed; the gate and commit checks are 0 (no
     * readers across processes). */
    dcr_faults_summary_t s;
    int sigkills; /* SIGKILLs sent to rollout-node processes */
    /* Where they landed; [DCR_FAULTS_KILL_COORDINATOR]: coordinator_kills. */
    int sigkills_by_point[DCR_FAULTS_KILL_POINTS];
    int kills_drawn; /* node kills that fell due (drawn from the seed up front);
                        those that never fired were still armed or queued at the end */
    int restarts;    /* node processes started in a dead one's place */
    int node_processes;
    int coordinator_kills;    /* SIGKILLs to coordinator processes */
    int coordinator_restarts; /* coordinator processes that resumed a transition */
    int owner_processes;      /* ranks of the owner job (mpirun) */
    /* Receiver restores by kind in the order clean, replay, repair, dense, anchor
     * (deploy/restorer.h), summed from the run's restore records:
     * how many, the bytes each kind moved, what dense refits of the same
     * receivers move, and the seconds they took. */
    uint64_t restores_by_kind[5], restore_bytes[5], restore_dense_bytes[5];
    double restore_s[5];
    /* The same restores by cause, in the order start (a restarted process),
     * behind (a live node the run committed without), dirty (a live node
     * holding writes of an attempt that did not commit). */
    uint64_t restores_by_cause[3];
    /* Faults drawn from the seed (and planned), by kind; faults_by_kind in
     * s says how many of them fired (a drawn one not fired: its step ended
     * before it could act). */
    int64_t faults_drawn[DCR_FAULT_KIND_COUNT];
    /* The elastic join (join_at > 0; a campaign: the last run's); its
     * receivers' restores are usually all anchor or all dense. */
    dcr_role_join_t join;
} dcr_faults_processes_summary_t;

/* One run. Errors: setup failures, a transition the coordinator processes
 * could not commit, the harness's own failures; without OpenMPI
 * DCR_EUNSUPPORTED (the owners are an MPI job). */
dcr_status_t dcr_faults_processes_run(const dcr_faults_processes_config_t *cfg,
                                      dcr_faults_processes_summary_t *out_p);

/* `seeds` runs, run i with seed base_seed + i (its kill schedule and
 * faults drawn from that seed); the summary adds up the runs. */
dcr_status_t dcr_faults_processes_campaign(const dcr_faults_processes_config_t *cfg, int seeds,
                                           uint64_t base_seed,
                                           dcr_faults_processes_summary_t *out_p);

#endif
