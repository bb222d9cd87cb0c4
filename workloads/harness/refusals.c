/* Payload refusals of rollout-node processes (workloads/harness/refusals.h). */
#define _POSIX_C_SOURCE 200809L
#include "workloads/harness/refusals.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

dcr_status_t dcr_refusals_write(const char *workdir, int node, const dcr_refusals_t *r)
{
    char dir[4200], path[4300], tmp[4350];
    snprintf(dir, sizeof dir, "%s/refusals", workdir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/n%d-%d.txt", dir, node, (int)getpid());
    /* Dot-named while written: the reader skips it, and rename replaces the
     * totals whole. */
    snprintf(tmp, sizeof tmp, "%s/.n%d-%d.tmp", dir, node, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return dcr_error_set(DCR_EIO, "cannot open %s: %s", tmp, strerror(errno));
    fprintf(f, "rejected %" PRIu64 " unauthenticated %" PRIu64 "\n", r->rejected,
            r->unauthenticated);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return dcr_error_set(DCR_EIO, "cannot write %s: %s", path, strerror(errno));
    return DCR_OK;
}

/* Adds the totals in path to *sum. */
static dcr_status_t add_file(const char *path, dcr_refusals_t *sum)
{
    FILE *f = fopen(path, "r");
    if (!f) return DCR_OK; /* replaced meanwhile: its successor is read instead */
    dcr_refusals_t r;
    int n =
        fscanf(f, "rejected %" SCNu64 " unauthenticated %" SCNu64, &r.rejected, &r.unauthenticated);
    fclose(f);
    if (n != 2)
        return dcr_error_set(DCR_EPARSE, "%s: expected 'rejected <count> unauthenticated <count>'",
                             path);
    sum->rejected += r.rejected;
    sum->unauthenticated += r.unauthenticated;
    return DCR_OK;
}

dcr_status_t dcr_refusals_totals(const char *workdir, dcr_refusals_t *out_p)
{
    dcr_refusals_t sum = {0, 0};
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/refusals", workdir);
    DIR *d = opendir(dir);
    dcr_status_t st = DCR_OK;
    for (struct dirent *e; st == DCR_OK && d && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        st = add_file(path, &sum);
    }
    if (d) closedir(d);
    if (st == DCR_OK) *out_p = sum;
    return st;
}
