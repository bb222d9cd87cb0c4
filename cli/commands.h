/* The dcr subcommands. Each takes the arguments after its name (argv[0] is the
 * subcommand name), prints its own --help, validates every flag, and returns
 * the process exit status: 0 on success, 1 on a failure already reported as
 * one line on stderr, 2 on a usage error. cli/ holds parsing and printing
 * only; the work is done by engine/ and workloads/. */
#ifndef DCR_CLI_COMMANDS_H
#define DCR_CLI_COMMANDS_H

int dcr_cmd_inventory(int argc, char **argv);
int dcr_cmd_table2(int argc, char **argv);
int dcr_cmd_construct(int argc, char **argv);
int dcr_cmd_payload(int argc, char **argv);
int dcr_cmd_microbench(int argc, char **argv);
int dcr_cmd_bench(int argc, char **argv);
int dcr_cmd_faults(int argc, char **argv);
int dcr_cmd_verify_paths(int argc, char **argv);
int dcr_cmd_calibrate(int argc, char **argv);
int dcr_cmd_sim(int argc, char **argv);
int dcr_cmd_bounds(int argc, char **argv);
int dcr_cmd_report(int argc, char **argv);
int dcr_cmd_compare(int argc, char **argv);
int dcr_cmd_diff(int argc, char **argv);
int dcr_cmd_rollout_node(int argc, char **argv);
int dcr_cmd_owner(int argc, char **argv);
int dcr_cmd_coordinator(int argc, char **argv);
int dcr_cmd_verify_digests(int argc, char **argv);

/* The run configuration of a multi-process refit: the flags of dcr bench
 * (every role parses the same ones) plus a role's own `extra`, into *cfg,
 * checked as dcr bench --processes checks them. Returns like dcr_args_parse
 * (0 ok, 1 help printed, 2 usage error printed). Once per process: the
 * flags point into static storage. */
struct dcr_arg;
struct dcr_run_config;
int dcr_cli_run_config(const char *command, const char *usage, struct dcr_arg *extra, int nextra,
                       int argc, char **argv, struct dcr_run_config *cfg);
/* The same into the whole bench configuration (the bench's own fields as
 * dcr bench parsed them), for a harness that runs the bench over the role
 * processes (dcr faults --processes). */
struct dcr_bench_config;
int dcr_cli_bench_run_config(const char *command, const char *usage, struct dcr_arg *extra,
                             int nextra, int argc, char **argv, struct dcr_bench_config *cfg);

#endif
