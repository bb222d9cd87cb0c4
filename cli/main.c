/* dcr: dispatch to subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "dcr/log.h"
#include "dcr/status.h"
#include "workloads/harness/results.h"

/* The release, kept equal to project(dcr VERSION ...) in CMakeLists.txt
 * (tests/cli/test_cli_exit_codes.c reads both). */
#define DCR_CLI_VERSION "0.1.0"

typedef struct dcr_cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} dcr_cli_command_t;

static const dcr_cli_command_t commands[] = {
    {"bench", dcr_cmd_bench, "end-to-end refits vs the full-checkpoint reference (the main job)"},
    {"faults", dcr_cmd_faults,
     "refits under injected faults: train (receiver kills), campaign (every kind)"},
    {"inventory", dcr_cmd_inventory,
     "canonical tensors, training layout, tasks and owners of a model"},
    {"table2", dcr_cmd_table2, "the seed's Table 2: XOR vs overwrite value streams after zstd"},
    {"construct", dcr_cmd_construct,
     "one delta construction on a synthetic training step (modes X/P/F)"},
    {"verify-paths", dcr_cmd_verify_paths,
     "random deltas through every loader path vs dense refits"},
    {"payload", dcr_cmd_payload, "inspect or verify a payload file"},
    {"bounds", dcr_cmd_bounds,
     "per-refit lower bounds and finalization from a trace (dcr or nsys)"},
    {"report", dcr_cmd_report, "figures (gnuplot) and report.md from a results file and a trace"},
    {"compare", dcr_cmd_compare, "regression check of two results files (exit 1 on a regression)"},
    {"microbench", dcr_cmd_microbench,
     "same-run ratios of inner loops (change detection vs plain read)"},
    {"calibrate", dcr_cmd_calibrate, "measure the simulator's stage costs on this machine (JSON)"},
    {"sim", dcr_cmd_sim, "simulate a refit of a full-size model on a cluster (SimGrid)"},
    {"diff", dcr_cmd_diff, "what changed between two safetensors checkpoints, per tensor class"},
    {"coordinator", dcr_cmd_coordinator,
     "the coordinator of a multi-process run (a role of dcr bench --processes)"},
    {"owner", dcr_cmd_owner,
     "one owner rank of the training cluster (mpirun -np P dcr owner; a role of dcr bench "
     "--processes)"},
    {"rollout-node", dcr_cmd_rollout_node,
     "one rollout node as a process (a role of dcr bench --processes)"},
    {"verify-digests", dcr_cmd_verify_digests,
     "check rollout-node digests against dense refits (a role of dcr bench --processes)"},
};

static void print_usage(FILE *out)
{
    fprintf(out, "usage: dcr <command> [options]   (dcr <command> --help for its options; dcr "
                 "--version)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* DCR_LOG comes from the environment: a value that is not a level is
 * reported here, escaped (a raw ESC or newline in it must not reach the
 * terminal), and replaced by the default, so that the logger, which would
 * echo it as it is, never sees it. The role processes inherit the cleaned
 * value. */
static void sanitize_log_env(void)
{
    const char *env = getenv("DCR_LOG");
    dcr_log_level_t level;
    if (env == NULL || env[0] == '\0' || dcr_log_level_parse(env, &level) == 0) return;
    char safe[128];
    fprintf(stderr, "dcr: warn: DCR_LOG=%s is not one of error, warn, info, debug; using info\n",
            dcr_escape(safe, sizeof(safe), env));
    setenv("DCR_LOG", "info", 1);
}

int main(int argc, char **argv)
{
    sanitize_log_env();
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        if (argc > 2) {
            fprintf(stderr, "dcr: --version takes no arguments\n");
            return 2;
        }
        /* The revision results files record (dcr_results_git_revision). */
        printf("dcr %s (git %s)\n", DCR_CLI_VERSION, dcr_results_git_revision());
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "dcr: unknown command '%s' (try dcr --help)\n", argv[1]);
    return 2;
}
