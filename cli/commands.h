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

#endif
