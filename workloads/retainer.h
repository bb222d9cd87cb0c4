/* Retention of committed versions run beside a coordinator (dcr/retain.h):
 * the copy of a committed attempt's payloads under versions/ runs in the
 * background after the commit record is durable, and is joined before the
 * next attempt opens (which clears the committed attempt's prefix). Shared
 * by dcr bench and dcr faults --processes, which commit through their own
 * coordinators. */
#ifndef DCR_WORKLOADS_RETAINER_H
#define DCR_WORKLOADS_RETAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/retain.h"

typedef struct dcr_retainer dcr_retainer_t;

/* Opens its own handle on the object store at url (s3_endpoint NULL: a
 * directory) and deletes every retained version found there (an earlier
 * run's versions are not this run's: nothing may replay them). keep >= 1:
 * the window (--retain K). */
dcr_status_t dcr_retainer_create(const char *url, const char *s3_endpoint, int keep,
                                 dcr_retainer_t **out_p);

/* Joins a running copy (its error is dropped; join first to see it) and
 * closes the store. Accepts NULL. */
void dcr_retainer_destroy(dcr_retainer_t *t);

/* Starts copying attempt tau's payloads as `version` in the background,
 * after joining the one before (whose error it returns, copying nothing).
 * Call only once the commit record of version from attempt tau is durable. */
dcr_status_t dcr_retainer_start(dcr_retainer_t *t, uint64_t tau, uint64_t version);

/* Waits for the running copy, if any (*ran_p false, nothing else written,
 * when none ran): its stats and the seconds this call blocked. Its failure
 * comes back naming the version. stats_p, wait_s_p and ran_p may be NULL. */
dcr_status_t dcr_retainer_join(dcr_retainer_t *t, dcr_retain_stats_t *stats_p, double *wait_s_p,
                               bool *ran_p);

#endif
