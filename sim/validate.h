/* Validation of the simulator against the engine: run `dcr bench`
 * configurations on this machine, simulate the same configurations with
 * this machine's calibration and the bench's emulated links, and compare. */
#ifndef DCR_SIM_VALIDATE_H
#define DCR_SIM_VALIDATE_H

#include "sim/sim.h"
#include "workloads/harness/bench.h"

/* The simulated twin of a bench configuration: the same scenario, serving
 * layout, transport, change rate, chunk and bucket targets, the emulated
 * links as the cluster's links, the object store as the engine's directory
 * store (no bandwidth or latency of its own, the measured PUT cost), and the
 * in-process engine on this machine's cores. */
dcr_status_t dcr_sim_spec_from_bench(const dcr_bench_config_t *bench,
                                     const dcr_sim_calibration_t *cal, dcr_sim_spec_t *out_p);

#define DCR_SIM_VALIDATION_CASES 6

/* The built-in validation cases: different models, change rates,
 * transports, node counts and link rates, each a short bench run. The
 * configuration is the one description of a case (its `dcr bench` flags
 * are rendered from it, dcr_sim_bench_args); name_p gets a short label. */
void dcr_sim_validation_case(int i, dcr_bench_config_t *cfg_p, const char **name_p);

typedef struct dcr_sim_validation_row {
    const char *name, *args;
    double measured_s, predicted_s; /* refit latency: median of the timed refits, simulated */
    double measured_ref_s, predicted_ref_s;
    double measured_payload, predicted_payload;
    double measured_construct_s; /* the engine's construction time (to the last payload sent) */
    double predicted_construct_end_s; /* the simulated construction end */
    /* The latency's parts, means over the timed refits vs the simulation:
     * construction and transport lower bounds, finalization (last apply to
     * the end of the joint commit). A miss in the latency shows here where
     * it comes from. */
    double measured_construction_lb_s, predicted_construction_lb_s;
    double measured_transport_lb_s, predicted_transport_lb_s;
    double measured_finalization_s, predicted_finalization_s;
    /* Testbed cases: the store's probed per-request costs the simulation
     * took (0 for the engine cases, whose store is a directory). */
    double store_put_ms, store_get_ms, store_list_ms;
    /* Testbed cases: the store process (s3rver) over its life in the run,
     * from its scheduler statistics: the share of that time it ran on a
     * CPU and the share it was runnable but waiting for one (0 when it
     * was not found). The model gives the store its probed per-request
     * costs and no CPU of its own, so a store that waits for the shared
     * cores is outside the model's scope (the case is reported so). */
    double store_cpu_share, store_wait_share, store_life_s;
    double error; /* predicted / measured - 1 */
} dcr_sim_validation_row_t;

/* Runs one bench configuration and its simulation. */
dcr_status_t dcr_sim_validate_one(const dcr_bench_config_t *bench, const dcr_sim_calibration_t *cal,
                                  dcr_sim_validation_row_t *out_p);

/* Testbed cases (issue 16): `dcr bench --testbed netns` across a 2 + 2 host
 * network-namespace testbed with kernel-shaped links, against its simulated
 * twin. The kernel shapes rate only (no per-flow cap, no latency: netem and
 * fq are often missing), so the cases set both to 0. */
#define DCR_SIM_TESTBED_CASES 1

/* The i-th testbed case: its configuration, the one description of the
 * case (its `dcr bench` flags are rendered from it, dcr_sim_bench_args),
 * and a short label in name_p. */
void dcr_sim_testbed_case(int i, dcr_bench_config_t *cfg_p, const char **name_p);

/* Room for dcr_sim_bench_args's flags, terminator included. */
#define DCR_SIM_BENCH_ARGS_MAX 512

/* The `dcr bench` flags of a configuration as an argument vector: the
 * strings live in buf, argv is NULL-terminated after argc entries. */
#define DCR_SIM_BENCH_ARGV_MAX 48
typedef struct dcr_sim_bench_argv {
    char buf[DCR_SIM_BENCH_ARGS_MAX];
    char *argv[DCR_SIM_BENCH_ARGV_MAX];
    int argc;
} dcr_sim_bench_argv_t;

/* The `dcr bench` flags that run configuration c, one argument each (the
 * form a child process is started with: no shell ever reads them). The
 * same flags as dcr_sim_bench_args. DCR_EINVAL when they do not fit. */
dcr_status_t dcr_sim_bench_argv(const dcr_bench_config_t *c, dcr_sim_bench_argv_t *out_p);

/* The `dcr bench` flags that run configuration c, for people to read (the
 * arguments of dcr_sim_bench_argv joined by spaces): every field a validation
 * case sets, written out explicitly (model, scale, layers, training nodes,
 * GPUs per node and TP, rollout nodes, receivers per node, serving TP,
 * transport, change rate, cross-cluster and per-flow Gbps, latency, warm-up
 * and timed refits, --no-verify), so that the command's own defaults never
 * matter; every other field must be dcr_bench_config_default()'s. DCR_EINVAL
 * when they do not fit in cap bytes. */
dcr_status_t dcr_sim_bench_args(const dcr_bench_config_t *c, char *buf, size_t cap);

/* Whether this process can build a testbed: root, and a network namespace
 * that can be made and entered (probed as dcrtb-<id>-probe). False with the
 * reason, one line, in why. */
bool dcr_sim_testbed_usable(int id, char *why, size_t cap);

/* A process's time on a CPU and runnable but waiting for one
 * (/proc/PID/schedstat) and its age, in seconds. */
dcr_status_t dcr_sim_proc_sched(int pid, double *run_s_p, double *wait_s_p, double *life_s_p);

/* One testbed case: runs `cli bench --testbed netns --testbed-id id --json
 * <dcr_sim_bench_argv(bench)>` as an argument vector (dcr/spawn.h: no
 * shell; its roles are processes, so the measurement is a child process),
 * then simulates bench with the testbed's links and, as the store, the
 * per-request costs that run measured on the testbed before its refits
 * (testbed.store: put_ms after a PUT's bytes, get_ms as the store's latency
 * per request, list_ms plus the engine's poll as the delay before a
 * listing sees a payload). */
dcr_status_t dcr_sim_validate_testbed(const char *cli, int id, const dcr_bench_config_t *bench,
                                      const dcr_sim_calibration_t *cal,
                                      dcr_sim_validation_row_t *out_p);

#endif
