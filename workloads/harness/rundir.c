/* The run directory's paths and files (rundir.h). */
#include "workloads/harness/rundir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dcr/outpath.h"
#include "dcr/trace.h"

void dcr_rundir_control_path(const char *workdir, char *out, size_t cap)
{
    snprintf(out, cap, "%s/control.db", workdir);
}

void dcr_rundir_objstore_dir(const char *workdir, char *out, size_t cap)
{
    snprintf(out, cap, "%s/objstore-objstore", workdir);
}

void dcr_rundir_relay_retain_dir(const char *workdir, char *out, size_t cap)
{
    snprintf(out, cap, "%s/relay-retained", workdir);
}

void dcr_rundir_kill_points_dir(const char *workdir, char *out, size_t cap)
{
    snprintf(out, cap, "%s/kill-points", workdir);
}

dcr_status_t dcr_rundir_kill_points_create(const char *workdir)
{
    char marks[4200];
    dcr_rundir_kill_points_dir(workdir, marks, sizeof(marks));
    if (mkdir(marks, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", marks, strerror(errno));
    return DCR_OK;
}

void dcr_rundir_apply_marker_path(const char *workdir, int node, uint64_t tau, char *out,
                                  size_t cap)
{
    snprintf(out, cap, "%s/kill-points/apply-n%d-t%llu", workdir, node, (unsigned long long)tau);
}

void dcr_rundir_trace_path(const char *workdir, int node, uint64_t tau, char *out, size_t cap)
{
    if (node >= 0)
        snprintf(out, cap, "%s/trace/n%d-t%llu.bin", workdir, node, (unsigned long long)tau);
    else if (node == DCR_RUNDIR_TRACE_COORD)
        snprintf(out, cap, "%s/trace/c-t%llu.bin", workdir, (unsigned long long)tau);
    else
        snprintf(out, cap, "%s/trace/o%d-t%llu.bin", workdir, -1 - node, (unsigned long long)tau);
}

/* Records the intervals of one role's file into this process's recorder;
 * false when there is no such file. */
static bool trace_import_one(const char *workdir, int who, uint64_t tau)
{
    char path[4300];
    dcr_rundir_trace_path(workdir, who, tau, path, sizeof(path));
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    dcr_trace_interval_t iv;
    while (fread(&iv, sizeof(iv), 1, f) == 1)
        if (who != DCR_RUNDIR_TRACE_COORD || iv.stage != DCR_STAGE_REFIT)
            dcr_trace_record_refit((dcr_stage_t)iv.stage, (dcr_actor_t)iv.actor, iv.id, iv.refit,
                                   iv.start_ns, iv.end_ns);
    fclose(f);
    return true;
}

dcr_status_t dcr_rundir_trace_import(const char *workdir, int nodes, uint64_t tau)
{
    /* Nodes 0..nodes-1, the coordinator, then owner ranks 0, 1, ... until
     * one left none. */
    for (int n = 0; n < nodes; n++) trace_import_one(workdir, n, tau);
    trace_import_one(workdir, DCR_RUNDIR_TRACE_COORD, tau);
    for (int r = 0; r < DCR_RUNDIR_OWNERS_MAX && trace_import_one(workdir, -1 - r, tau); r++) {
    }
    return DCR_OK;
}

void dcr_rundir_digest_path(const char *workdir, uint64_t version, int receiver, char *out,
                            size_t cap)
{
    snprintf(out, cap, "%s/digests/v%llu-r%d.dcrd", workdir, (unsigned long long)version, receiver);
}

dcr_status_t dcr_rundir_control_url_write(const char *workdir, const char *url)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/control.url", workdir);
    /* Whole or not at all: a role process reads it while it may be written. */
    return dcr_outpath_write("control.url", path, url, strlen(url));
}
