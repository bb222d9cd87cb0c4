/* dcr verify-digests: the verifier role (deploy/roles.h). Prints
 * "version <v> bit-exact yes|no" per version; exit 1 when any is no. */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "deploy/roles.h"

int dcr_cmd_verify_digests(int argc, char **argv)
{
    int64_t first = -1, last = -1, wait_ms = 60000;
    dcr_arg_t extra[] = {
        {"--first", DCR_ARG_INT, &first, 0, 1e15, "first committed version to check (required)",
         false},
        {"--last", DCR_ARG_INT, &last, 0, 1e15, "last committed version to check (required)",
         false},
        {"--wait-ms", DCR_ARG_INT, &wait_ms, 0, 3600000,
         "how long to wait for a node's digests file (default 60000)", false},
    };
    dcr_run_config_t cfg;
    int rc = dcr_cli_run_config("verify-digests",
                                "--workdir DIR --first V --last V [the run's dcr bench flags]",
                                extra, 3, argc, argv, &cfg);
    if (rc) return rc == 1 ? 0 : 2;
    if (first < 0 || last < first || last - first > 1000000 || !cfg.workdir) {
        fprintf(stderr, "dcr verify-digests: --workdir, --first and --last (>= --first) are "
                        "required\n");
        return 2;
    }
    size_t n = (size_t)(last - first + 1);
    bool *ok = calloc(n, sizeof(bool));
    if (!ok) {
        fprintf(stderr, "dcr verify-digests: out of memory for %zu versions\n", n);
        return 1;
    }
    dcr_status_t st = dcr_role_verify_digests(&cfg, cfg.workdir, (uint64_t)first, (uint64_t)last,
                                              (int)wait_ms, ok);
    if (st != DCR_OK) {
        free(ok);
        dcr_cli_report("verify-digests", st);
        return 1;
    }
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        printf("version %llu bit-exact %s\n", (unsigned long long)first + i, ok[i] ? "yes" : "no");
        all = all && ok[i];
    }
    fflush(stdout);
    free(ok);
    return all ? 0 : 1;
}
