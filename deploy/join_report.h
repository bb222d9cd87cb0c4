/* An elastic join (deploy/launch.h's dcr_role_join_t) as the results say
 * it: dcr bench --processes --join-at and dcr faults --processes --join-at
 * print the same JSON object and the same line of text. */
#ifndef DCR_DEPLOY_JOIN_REPORT_H
#define DCR_DEPLOY_JOIN_REPORT_H

#include "deploy/launch.h"

struct json_t;

/* {"node", "at_step", "version", "seconds", "restores_by_kind": {"<kind>":
 * count} for the kinds that occurred, "bytes", "dense_bytes"}; JSON null
 * when j->at_step is 0 (no join). A new reference. */
struct json_t *dcr_role_join_json(const dcr_role_join_t *j);

/* The same as one line of text on stdout ("elastic join: ..."); `when`
 * says when the node started ("before step 3"). Nothing without a join. */
void dcr_role_join_print(const dcr_role_join_t *j, const char *when);

#endif
