/* The restore log (dcr/recovery.h): one line per restore under
 * <workdir>/restores/, appended by the node that restored, summed by
 * whoever reports the run. */
#define _XOPEN_SOURCE 700
#include "dcr/recovery.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dcr/clock.h"
#include "dcr/log.h"

const char *dcr_restore_kind_name(dcr_restore_kind_t k)
{
    static const char *const names[DCR_RESTORE_KINDS] = {"clean", "replay", "repair", "dense",
                                                         "anchor"};
    return (unsigned)k < DCR_RESTORE_KINDS ? names[k] : "?";
}

const char *dcr_restore_cause_name(dcr_restore_cause_t c)
{
    static const char *const names[DCR_RESTORE_CAUSES] = {"start", "behind", "dirty"};
    return (unsigned)c < DCR_RESTORE_CAUSES ? names[c] : "?";
}

dcr_status_t dcr_restore_log_append(const char *workdir, int node, const dcr_restore_record_t *rec)
{
    char held[32];
    if (rec->held == UINT64_MAX)
        snprintf(held, sizeof held, "-");
    else
        snprintf(held, sizeof held, "%" PRIu64, rec->held);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/restores", workdir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/n%d.txt", dir, node);
    /* One short line per append: whole lines even across restarts. */
    FILE *f = fopen(path, "a");
    if (!f) return dcr_error_set(DCR_EIO, "cannot open %s: %s", path, strerror(errno));
    fprintf(f, "%s %d %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %.6f %s\n",
            dcr_restore_kind_name(rec->kind), rec->receiver, held, rec->version, rec->bytes,
            rec->dense_bytes, rec->seconds, dcr_restore_cause_name(rec->cause));
    if (fclose(f) != 0) return dcr_error_set(DCR_EIO, "cannot write %s", path);
    return DCR_OK;
}

/* One restore record line: its kind, cause, bytes, dense bytes and
 * seconds; false when malformed. */
static bool parse_record(const char *line, int *kind_p, int *cause_p, uint64_t *bytes_p,
                         uint64_t *dense_p, double *seconds_p)
{
    char kind[16], held[32], cause[16] = "";
    int recv;
    uint64_t version;
    if (sscanf(line, "%15s %d %31s %" SCNu64 " %" SCNu64 " %" SCNu64 " %lf %15s", kind, &recv, held,
               &version, bytes_p, dense_p, seconds_p, cause) != 8)
        return false;
    int k = 0, c = 0;
    while (c < DCR_RESTORE_CAUSES && strcmp(cause, dcr_restore_cause_name((dcr_restore_cause_t)c)))
        c++;
    while (k < DCR_RESTORE_KINDS && strcmp(kind, dcr_restore_kind_name((dcr_restore_kind_t)k))) k++;
    *kind_p = k;
    *cause_p = c;
    return k < DCR_RESTORE_KINDS && c < DCR_RESTORE_CAUSES;
}

static dcr_status_t bad_line(const char *path, int ln)
{
    return dcr_error_set(DCR_EPARSE,
                         "%s: line %d: expected '<kind> <receiver> <held> <version> <bytes> "
                         "<dense bytes> <seconds> <cause>'",
                         path, ln);
}

/* The restore records of workdir summed by kind (counts, bytes,
 * dense_bytes, seconds: each may be NULL) and by cause (causes may be
 * NULL). */
static dcr_status_t sum_records(const char *workdir, uint64_t counts[DCR_RESTORE_KINDS],
                                uint64_t bytes[DCR_RESTORE_KINDS],
                                uint64_t dense_bytes[DCR_RESTORE_KINDS],
                                double seconds[DCR_RESTORE_KINDS],
                                uint64_t causes[DCR_RESTORE_CAUSES])
{
    uint64_t c0[DCR_RESTORE_KINDS], b0[DCR_RESTORE_KINDS], d0[DCR_RESTORE_KINDS];
    if (!counts) counts = c0;
    if (!bytes) bytes = b0;
    if (!dense_bytes) dense_bytes = d0;
    for (int c = 0; causes && c < DCR_RESTORE_CAUSES; c++) causes[c] = 0;
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        counts[k] = bytes[k] = dense_bytes[k] = 0;
        if (seconds) seconds[k] = 0;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/restores", workdir);
    DIR *d = opendir(dir);
    if (!d) return DCR_OK;
    dcr_status_t st = DCR_OK;
    struct dirent *e;
    while (st == DCR_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char line[512];
        for (int ln = 1; st == DCR_OK && fgets(line, sizeof line, f); ln++) {
            int k, c;
            uint64_t b, dense;
            double s;
            if (!parse_record(line, &k, &c, &b, &dense, &s)) {
                st = bad_line(path, ln);
                break;
            }
            counts[k]++;
            bytes[k] += b;
            dense_bytes[k] += dense;
            if (seconds) seconds[k] += s;
            if (causes) causes[c]++;
        }
        fclose(f);
    }
    closedir(d);
    return st;
}

dcr_status_t dcr_restore_first(const char *workdir, int node, int n,
                               uint64_t counts[DCR_RESTORE_KINDS], uint64_t *bytes_p,
                               uint64_t *dense_bytes_p)
{
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) counts[k] = 0;
    *bytes_p = *dense_bytes_p = 0;
    char path[4300];
    snprintf(path, sizeof path, "%s/restores/n%d.txt", workdir, node);
    FILE *f = fopen(path, "r");
    if (!f) return dcr_error_set(DCR_ENOTFOUND, "no restore records in %s", path);
    char line[512];
    dcr_status_t st = DCR_OK;
    int ln = 0;
    while (st == DCR_OK && ln < n && fgets(line, sizeof line, f)) {
        int k, c;
        uint64_t b, dense;
        double s;
        ln++;
        if (!parse_record(line, &k, &c, &b, &dense, &s)) {
            st = bad_line(path, ln);
            break;
        }
        counts[k]++;
        *bytes_p += b;
        *dense_bytes_p += dense;
    }
    fclose(f);
    if (st == DCR_OK && ln < n)
        st = dcr_error_set(DCR_ENOTFOUND, "%s holds %d restore records, not %d", path, ln, n);
    return st;
}

dcr_status_t dcr_restore_totals(const char *workdir, uint64_t counts[DCR_RESTORE_KINDS],
                                uint64_t bytes[DCR_RESTORE_KINDS],
                                uint64_t dense_bytes[DCR_RESTORE_KINDS],
                                double seconds[DCR_RESTORE_KINDS])
{
    return sum_records(workdir, counts, bytes, dense_bytes, seconds, NULL);
}

dcr_status_t dcr_restore_causes(const char *workdir, uint64_t counts[DCR_RESTORE_CAUSES])
{
    return sum_records(workdir, NULL, NULL, NULL, NULL, counts);
}
