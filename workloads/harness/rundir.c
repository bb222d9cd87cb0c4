/* The run directory's paths and files (rundir.h). */
#include "workloads/harness/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/log.h"
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
    /* An existing one must be a folder, never a link: node processes
     * create files in it. */
    struct stat st;
    if (lstat(marks, &st) != 0 || !S_ISDIR(st.st_mode))
        return dcr_error_set(DCR_EINVAL, "%s: not a directory (a link is never followed)", marks);
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

/* Whether an interval read from a role's file can be recorded as it is:
 * a known stage and actor, and an end not before its start. */
static bool trace_interval_ok(const dcr_trace_interval_t *iv)
{
    return iv->stage < DCR_STAGE_COUNT && iv->actor < DCR_ACTOR_COUNT && iv->end_ns >= iv->start_ns;
}

/* Records the intervals of one role's file into this process's recorder;
 * false when there is no such file. The file is read only when it is a
 * regular file (never through a link, never a FIFO that would block) of
 * whole intervals and at most DCR_RUNDIR_TRACE_MAX bytes; an interval with
 * an unknown stage or actor is dropped. */
static bool trace_import_one(const char *workdir, int who, uint64_t tau)
{
    char path[4300];
    dcr_rundir_trace_path(workdir, who, tau, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno != ENOENT;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > DCR_RUNDIR_TRACE_MAX ||
        st.st_size % (off_t)sizeof(dcr_trace_interval_t) != 0) {
        DCR_LOG_WARN("%s: not a regular file of whole intervals within %lld bytes; not imported",
                     path, (long long)DCR_RUNDIR_TRACE_MAX);
        close(fd);
        return true;
    }
    dcr_trace_interval_t buf[256];
    size_t dropped = 0;
    for (off_t left = st.st_size; left > 0;) {
        size_t want = (size_t)left < sizeof buf ? (size_t)left : sizeof buf;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        left -= n;
        for (size_t i = 0; i < (size_t)n / sizeof buf[0]; i++) {
            const dcr_trace_interval_t *iv = &buf[i];
            if (!trace_interval_ok(iv)) {
                dropped++;
                continue;
            }
            if (who != DCR_RUNDIR_TRACE_COORD || iv->stage != DCR_STAGE_REFIT)
                dcr_trace_record_refit((dcr_stage_t)iv->stage, (dcr_actor_t)iv->actor, iv->id,
                                       iv->refit, iv->start_ns, iv->end_ns);
        }
    }
    close(fd);
    if (dropped) DCR_LOG_WARN("%s: %zu malformed intervals dropped", path, dropped);
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
