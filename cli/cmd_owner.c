/* dcr owner: one owner rank of the training cluster as an MPI job,
 * `mpirun -np P dcr owner --workdir DIR [run flags]` (deploy/roles.h).
 * This process owns the job: it initialises MPI (the engine never does),
 * makes its endpoint of the "mpi" group and finalises MPI at the end. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#ifdef DCR_HAVE_MPI
#include <mpi.h>
#endif

#include "args.h"
#include "commands.h"
#include "dcr/group.h"
#include "deploy/roles.h"

#ifdef DCR_HAVE_MPI
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}
#endif

int dcr_cmd_owner(int argc, char **argv)
{
    int64_t ready_ms = 60000;
    dcr_arg_t extra[] = {
        {"--ready-timeout-ms", DCR_ARG_INT, &ready_ms, 1, 3600000,
         "how long rank 0 waits for the control plane (default 60000)", false},
    };
    dcr_run_config_t cfg;
    int rc = dcr_cli_run_config("owner",
                                "--workdir DIR [the run's dcr bench flags] (each rank of "
                                "mpirun -np <training ranks>)",
                                extra, 1, argc, argv, &cfg);
    if (rc) return rc == 1 ? 0 : 2;
    if (!cfg.workdir) {
        fprintf(stderr, "dcr owner: --workdir (the run directory) is required\n");
        return 2;
    }
#ifndef DCR_HAVE_MPI
    fprintf(stderr, "dcr owner: this dcr was built without MPI (install libopenmpi-dev and "
                    "rebuild); owners as processes need the \"mpi\" group backend\n");
    return 1;
#else
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dcr owner: MPI_Init_thread failed; start the ranks with mpirun\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    dcr_group_t *g = NULL;
    int n = 0;
    dcr_status_t st = dcr_group_create("mpi", 0, &g, &n);
    if (st == DCR_OK) {
        dcr_role_owner_config_t oc = {&cfg, cfg.workdir, g, (int)ready_ms};
        st = dcr_role_owner_run(&oc, &g_stop);
    }
    dcr_group_destroy(g);
    if (st != DCR_OK) {
        dcr_cli_report("owner", st);
        /* One rank's failure ends the job: the others wait on it in the group. */
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    MPI_Finalize();
    return 0;
#endif
}
