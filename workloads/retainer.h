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

#include "dcr/construct.h"
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

/* As dcr_retainer_start, and then, in the same background thread, stores
 * `repair` (the committed run's records, taken: the retainer frees it; NULL
 * for none) as version's repair set, every owner's part (owners of them),
 * encoded as cfg says (dcr/retain.h "repair sets"): for a process that
 * holds every owner's constructor (dcr bench in one process, or with owner
 * threads). A failure to store it is logged, not returned: the version
 * only loses its repairs. */
dcr_status_t dcr_retainer_start_repair(dcr_retainer_t *t, uint64_t tau, uint64_t version,
                                       dcr_repair_records_t *repair,
                                       const dcr_construct_config_t *cfg, int owners);

/* Waits for the running copy, if any (*ran_p false, nothing else written,
 * when none ran): its stats and the seconds this call blocked. Its failure
 * comes back naming the version. stats_p, wait_s_p and ran_p may be NULL. */
dcr_status_t dcr_retainer_join(dcr_retainer_t *t, dcr_retain_stats_t *stats_p, double *wait_s_p,
                               bool *ran_p);

#endif
