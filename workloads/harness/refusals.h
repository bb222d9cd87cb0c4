/* Payload refusals of rollout-node processes, gathered by the launcher.
 *
 * Under --processes the receivers and their transport handles live in the
 * rollout-node processes, so what they refused (a corrupt, forged or wrongly
 * keyed payload) is counted there. Each process writes its running totals to
 *   <workdir>/refusals/n<node>-<pid>.txt   "rejected <R> unauthenticated <U>\n"
 * replacing the file whole (rename) at every report, so a SIGKILL leaves the
 * last totals it wrote, and a restarted process (a new pid) adds a file of
 * its own instead of resetting its predecessor's. The launcher sums them. */
#ifndef DCR_WORKLOADS_REFUSALS_H
#define DCR_WORKLOADS_REFUSALS_H

#include <stdint.h>

#include "dcr/status.h"

/* Payloads refused: rejected (every refusal) and unauthenticated (those
 * refused for their keying or keyed digest; a subset of rejected). */
typedef struct dcr_refusals {
    uint64_t rejected, unauthenticated;
} dcr_refusals_t;

/* Replaces this process's totals file of rollout node `node` in workdir
 * (creating refusals/ if needed). DCR_EIO naming the path on failure. */
dcr_status_t dcr_refusals_write(const char *workdir, int node, const dcr_refusals_t *r);

/* The sum over every totals file in workdir; all zeros when none was
 * written. DCR_EPARSE naming the file for one that is malformed. */
dcr_status_t dcr_refusals_totals(const char *workdir, dcr_refusals_t *out_p);

#endif
