/* An owner's repair sets (issue 19; dcr/construct.h, dcr/retain.h): after
 * each commit the owner process encodes the committed run's records as
 * overwrite payloads and stores them beside the version's retained
 * payloads, in a background thread started once the commit is reported
 * (after t1), so that neither the refit's window nor its commit waits for
 * it. The next attempt (or a rebuild of the constructor) joins it first:
 * the constructor's next commit would replace nothing it uses, but two
 * uploads must not overlap on one store handle. */
#ifndef DCR_WORKLOADS_ROLES_REPAIR_UPLOAD_H
#define DCR_WORKLOADS_ROLES_REPAIR_UPLOAD_H

#include <stdint.h>

#include "dcr/construct.h"
#include "dcr/objstore.h"
#include "dcr/retain.h"

/* Encodes set r (cfg) and stores it as version's repair set
 * (dcr_retain_repair_put): owner `owner`'s part, or with owner -1 every
 * owner's part 0..owners-1 (a process that holds every owner, as dcr bench
 * in one process does). Blocks. encode_p and store_p (may be NULL): what the
 * encoding and the puts did and took. */
dcr_status_t dcr_repair_store(dcr_objstore_t *s, dcr_repair_records_t *r,
                              const dcr_construct_config_t *cfg, uint64_t version, int owner,
                              int owners, dcr_construct_stats_t *encode_p,
                              dcr_retain_stats_t *store_p);

typedef struct dcr_repair_upload dcr_repair_upload_t;

/* An uploader for owner `owner` of `owners`, storing into s (borrowed; it
 * must outlive the uploader), encoding as cfg says (copied). */
dcr_status_t dcr_repair_upload_create(dcr_objstore_t *s, const dcr_construct_config_t *cfg,
                                      int owner, int owners, dcr_repair_upload_t **out_p);

/* Joins a running upload, then frees. Accepts NULL. */
void dcr_repair_upload_destroy(dcr_repair_upload_t *u);

/* Starts storing `records` (taken: freed when done) as the repair set of
 * `version`, after joining the one before. NULL records: nothing to do. */
dcr_status_t dcr_repair_upload_start(dcr_repair_upload_t *u, dcr_repair_records_t *records,
                                     uint64_t version);

/* Waits for the running upload, if any. Its failure is logged, not
 * returned: a version without a repair set only loses its repairs (its
 * dirty receivers are refitted densely), never correctness. *wait_s_p (may
 * be NULL): the seconds this call blocked. */
void dcr_repair_upload_join(dcr_repair_upload_t *u, double *wait_s_p);

#endif
