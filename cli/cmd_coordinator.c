/* dcr coordinator: the coordinator of a multi-process run as a process of
 * its own (deploy/roles.h): requests on stdin ("refit", "resume
 * FROM"), one answer line each on stdout. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "deploy/roles.h"

int dcr_cmd_coordinator(int argc, char **argv)
{
    dcr_run_config_t cfg;
    int rc = dcr_cli_run_config("coordinator",
                                "--workdir DIR [the run's dcr bench flags] (requests on stdin: "
                                "'refit' or 'resume FROM', one answer line each on stdout)",
                                NULL, 0, argc, argv, &cfg);
    if (rc) return rc == 1 ? 0 : 2;
    if (!cfg.workdir) {
        fprintf(stderr, "dcr coordinator: --workdir (the run directory) is required\n");
        return 2;
    }
    dcr_role_coord_config_t cc = {&cfg, cfg.workdir};
    dcr_status_t st = dcr_role_coordinator_run(&cc, stdin, stdout);
    if (st != DCR_OK) {
        dcr_cli_report("coordinator", st);
        return 1;
    }
    return 0;
}
