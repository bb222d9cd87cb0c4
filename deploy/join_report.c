/* An elastic join as JSON and as text (join_report.h). */
#include "deploy/join_report.h"

#include <jansson.h>
#include <stdio.h>

#include "dcr/recovery.h"
#include "workloads/harness/results_json.h"

json_t *dcr_role_join_json(const dcr_role_join_t *j)
{
    if (j->at_step == 0) return json_null();
    json_t *kinds = json_object();
    for (int k = 0; k < DCR_RESTORE_KINDS; k++)
        if (j->by_kind[k])
            json_object_set_new(kinds, dcr_restore_kind_name((dcr_restore_kind_t)k),
                                json_integer((json_int_t)j->by_kind[k]));
    return json_pack("{s:i,s:i,s:I,s:f,s:o,s:I,s:I}", "node", j->node, "at_step", j->at_step,
                     "version", (json_int_t)j->version, "seconds", j->seconds, "restores_by_kind",
                     kinds, "bytes", (json_int_t)j->bytes, "dense_bytes",
                     (json_int_t)j->dense_bytes);
}

void dcr_role_join_print(const dcr_role_join_t *j, const char *when)
{
    if (j->at_step == 0) return;
    printf("elastic join: rollout node %d started %s, ready at version %llu, %.3f s after its "
           "start; its receivers' restores: ",
           j->node, when, (unsigned long long)j->version, j->seconds);
    /* The bench report's restore line (results_json.h), so that the join
     * reads like the run's restore totals printed beside it; no bench config. */
    dcr_bench_restores_print(j->by_kind, j->bytes, j->dense_bytes);
}
