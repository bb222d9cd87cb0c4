/* A faults run's summary as JSON and text (faults_report.h). */
#include "faults/faults_report.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "dcr/recovery.h"
#include "deploy/join_report.h"
#include "deploy/restorer.h"
#include "workloads/harness/results_json.h"

json_t *dcr_faults_summary_json(const char *what, const dcr_faults_summary_t *s)
{
    json_t *kinds = json_object();
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++)
        json_object_set_new(kinds, dcr_fault_kind_name((dcr_fault_kind_t)k),
                            json_integer(s->faults_by_kind[k]));
    json_t *j =
        json_pack("{s:s,s:i,s:o,s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:I}", "command",
                  what, "steps", s->steps, "faults_by_kind", kinds, "faults", (json_int_t)s->faults,
                  "attempts", s->attempts, "retries", s->retries, "commits", s->commits, "stops",
                  s->stops, "failovers", s->failovers, "kills", s->kills, "restores", s->restores,
                  "mismatches", s->mismatches, "baseline_mismatches", s->baseline_mismatches,
                  "lost", s->lost, "checks", s->checks, "version", (json_int_t)s->version);
    json_t *props = json_pack("{s:I,s:I,s:i,s:i,s:i}", "gate_reads", (json_int_t)s->gate_reads,
                              "gate_violations", (json_int_t)s->gate_violations, "commit_checks",
                              s->commit_checks, "commit_violations", s->commit_violations,
                              "membership_mismatches", s->membership_mismatches);
    json_object_update(j, props);
    json_decref(props);
    return j;
}

void dcr_faults_summary_print(const char *what, const dcr_faults_summary_t *s)
{
    printf("dcr faults %s: %d steps, version %llu committed%s\n\nfaults injected by kind:\n", what,
           s->steps, (unsigned long long)s->version, strcmp(what, "campaign") ? "" : " (last run)");
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++)
        printf("  %-16s %lld\n", dcr_fault_kind_name((dcr_fault_kind_t)k),
               (long long)s->faults_by_kind[k]);
    printf("  %-16s %lld\n\n", "total", (long long)s->faults);
    printf(
        "attempts %d, overwrite retries %d, commits %d, clean stops %d, coordinator failovers %d\n",
        s->attempts, s->retries, s->commits, s->stops, s->failovers);
    printf("receivers killed %d, restored %d\n", s->kills, s->restores);
    printf("receiver checks %d, bit mismatches %d, baseline mismatches %d, versions lost %d\n",
           s->checks, s->mismatches, s->baseline_mismatches, s->lost);
    printf("requests through the gate %lld, saw a mixed state %lld\n", (long long)s->gate_reads,
           (long long)s->gate_violations);
    printf("receivers checked before a joint commit %d, not holding P^{v+1} %d\n", s->commit_checks,
           s->commit_violations);
    printf("membership differed after a failover %d\n", s->membership_mismatches);
}

json_t *dcr_faults_processes_json(const dcr_faults_processes_summary_t *p)
{
    json_t *points = json_object();
    for (int k = 0; k < DCR_FAULTS_KILL_POINTS; k++)
        json_object_set_new(points, dcr_faults_kill_point_name((dcr_faults_kill_point_t)k),
                            json_integer(p->sigkills_by_point[k]));
    /* Restores by kind, the shape of dcr bench --processes' "restores_by_kind". */
    json_t *restores = dcr_bench_restores_json(p->restores_by_kind, p->restore_bytes,
                                               p->restore_dense_bytes, p->restore_s);
    /* Why: a restarted process, a live node left behind, or one holding
     * writes of an attempt that did not commit (deploy/restorer.h). */
    json_t *causes = json_pack("{s:I,s:I,s:I}", "start", (json_int_t)p->restores_by_cause[0],
                               "behind", (json_int_t)p->restores_by_cause[1], "dirty",
                               (json_int_t)p->restores_by_cause[2]);
    json_t *drawn = json_object();
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++)
        json_object_set_new(drawn, dcr_fault_kind_name((dcr_fault_kind_t)k),
                            json_integer(p->faults_drawn[k]));
    json_t *join = dcr_role_join_json(&p->join);
    return json_pack("{s:i,s:o,s:i,s:i,s:i,s:i,s:{s:i,s:i,s:i,s:i},s:o,s:o,s:o,s:o}", "sigkills",
                     p->sigkills, "sigkills_by_point", points, "kills_drawn", p->kills_drawn,
                     "restarts", p->restarts, "coordinator_kills", p->coordinator_kills,
                     "coordinator_restarts", p->coordinator_restarts, "processes", "owners",
                     p->owner_processes, "coordinator", 1, "rollout_nodes", p->node_processes,
                     "verifier", 1, "restores_by_kind", restores, "restores_by_cause", causes,
                     "faults_drawn_by_kind", drawn, "join", join);
}

void dcr_faults_processes_print(const dcr_faults_processes_summary_t *p)
{
    printf("SIGKILLs to rollout-node processes %d (delivery %d, apply %d, acked %d; %d drawn), "
           "processes restarted %d\n",
           p->sigkills, p->sigkills_by_point[DCR_FAULTS_KILL_DELIVERY],
           p->sigkills_by_point[DCR_FAULTS_KILL_APPLY], p->sigkills_by_point[DCR_FAULTS_KILL_ACKED],
           p->kills_drawn, p->restarts);
    uint64_t bytes = 0, dense = 0;
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        bytes += p->restore_bytes[k];
        dense += p->restore_dense_bytes[k];
    }
    printf("receiver restores: ");
    dcr_bench_restores_print(p->restores_by_kind, bytes, dense);
    printf("restores by cause: start %llu, behind %llu, dirty %llu\n",
           (unsigned long long)p->restores_by_cause[DCR_RESTORE_START],
           (unsigned long long)p->restores_by_cause[DCR_RESTORE_BEHIND],
           (unsigned long long)p->restores_by_cause[DCR_RESTORE_DIRTY]);
    char when[48];
    snprintf(when, sizeof when, "before step %d", p->join.at_step);
    dcr_role_join_print(&p->join, when);
    printf("SIGKILLs to the coordinator process %d, coordinator processes that resumed %d; owner "
           "processes %d (mpirun)\n",
           p->coordinator_kills, p->coordinator_restarts, p->owner_processes);
}

bool dcr_faults_summary_failed(const char *what, const dcr_faults_summary_t *s)
{
    if (!(s->mismatches || s->baseline_mismatches || s->lost || s->gate_violations ||
          s->commit_violations || s->membership_mismatches))
        return false;
    fprintf(stderr,
            "dcr faults %s: %d bit mismatches, %d baseline mismatches, %d versions lost, %lld "
            "mixed reads through the gate, %d premature commit checks, %d membership "
            "mismatches\n",
            what, s->mismatches, s->baseline_mismatches, s->lost, (long long)s->gate_violations,
            s->commit_violations, s->membership_mismatches);
    return true;
}
