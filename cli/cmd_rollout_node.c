/* dcr rollout-node: one rollout node's receivers as a process of their own
 * (deploy/roles.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "deploy/roles.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

int dcr_cmd_rollout_node(int argc, char **argv)
{
    int64_t node = -1, ready_ms = 60000;
    bool resident = false;
    dcr_arg_t extra[] = {
        {"--node", DCR_ARG_INT, &node, 0, 1023, "this process's rollout node (required)", false},
        {"--ready-timeout-ms", DCR_ARG_INT, &ready_ms, 1, 3600000,
         "how long to wait for the control plane (default 60000)", false},
        {"--resident", DCR_ARG_FLAG, &resident, 0, 0,
         "keep the receivers' weights in resident files under the run directory (live), so "
         "that a restarted process rejoins clean, by replay or by repair (the launcher sets it "
         "with restarts)",
         false},
    };
    dcr_run_config_t cfg;
    int rc =
        dcr_cli_run_config("rollout-node", "--node I --workdir DIR [the run's dcr bench flags]",
                           extra, 3, argc, argv, &cfg);
    if (rc) return rc == 1 ? 0 : 2;
    if (node < 0 || !cfg.workdir) {
        fprintf(stderr,
                "dcr rollout-node: --node and --workdir (the run directory) are required\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    dcr_role_node_config_t nc = {&cfg, cfg.workdir, (int)node, (int)ready_ms, resident};
    dcr_status_t st = dcr_role_rollout_node_run(&nc, &g_stop);
    if (st != DCR_OK) {
        dcr_cli_report("rollout-node", st);
        return 1;
    }
    return 0;
}
