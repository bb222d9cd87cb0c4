/* Work folders (workloads/harness/workdir.h). The marker holds "dcr work folder pid
 * N"; reading it never follows a link. */
#include "workloads/harness/workdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/log.h"
#include "dcr/outpath.h"
#include "workloads/harness/interrupt.h"

/* The pid recorded in dir's marker: > 0, 0 when there is no marker, -1 when
 * the marker is not one dcr wrote. */
static long marker_pid(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/" DCR_WORKDIR_MARKER, dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    char buf[64] = {0};
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof(buf) - 1) : -1;
    close(fd);
    long pid = -1;
    if (n <= 0 || sscanf(buf, "dcr work folder pid %ld", &pid) != 1 || pid <= 0) return -1;
    return pid;
}

static dcr_status_t write_marker(const char *dir)
{
    char path[4200], text[64];
    snprintf(path, sizeof(path), "%s/" DCR_WORKDIR_MARKER, dir);
    int len = snprintf(text, sizeof(text), "dcr work folder pid %ld\n", (long)getpid());
    return dcr_outpath_write("work folder marker", path, text, (size_t)len);
}

/* Whether dir has entries other than . and .. (and the marker). */
static int foreign_entries(const char *dir, bool *any_p)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    bool any = false;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        any = true;
        if (strcmp(e->d_name, DCR_WORKDIR_MARKER)) n++;
    }
    closedir(d);
    *any_p = any;
    return n;
}

dcr_status_t dcr_workdir_check(const char *flag, const char *dir)
{
    if (!dir || !*dir) return dcr_error_set(DCR_EINVAL, "%s: empty path", flag);
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno != ENOENT) return dcr_error_set(DCR_EIO, "%s %s: %s", flag, dir, strerror(errno));
        return dcr_outdir_check(flag, dir);
    }
    if (S_ISLNK(st.st_mode))
        return dcr_error_set(DCR_EINVAL, "%s %s: is a symbolic link; give the folder itself", flag,
                             dir);
    if (!S_ISDIR(st.st_mode))
        return dcr_error_set(DCR_EINVAL, "%s %s: is not a directory", flag, dir);
    bool any = false;
    int foreign = foreign_entries(dir, &any);
    if (foreign < 0) return dcr_error_set(DCR_EIO, "%s %s: %s", flag, dir, strerror(errno));
    long pid = marker_pid(dir);
    if (pid < 0)
        return dcr_error_set(DCR_EINVAL, "%s %s: %s is not a marker dcr wrote; refusing the folder",
                             flag, dir, DCR_WORKDIR_MARKER);
    if (pid == 0 && foreign > 0)
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: holds files and no %s marker; dcr uses only an empty folder "
                             "or one it made",
                             flag, dir, DCR_WORKDIR_MARKER);
    if (pid > 0 && pid != (long)getpid() && dcr_outpath_pid_alive(pid))
        return dcr_error_set(DCR_EINVAL, "%s %s: in use by the dcr run with pid %ld", flag, dir,
                             pid);
    return dcr_outdir_check(flag, dir);
}

/* Empties a folder of a dead run, keeping the folder. */
static dcr_status_t empty_folder(const char *flag, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return dcr_error_set(DCR_EIO, "%s %s: %s", flag, dir, strerror(errno));
    dcr_status_t st = DCR_OK;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4600];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (dcr_outpath_remove_tree(path) != 0 && st == DCR_OK)
            st = dcr_error_set(DCR_EIO, "%s: cannot remove %s left by a dead run: %s", flag, path,
                               strerror(errno));
    }
    closedir(d);
    return st;
}

int dcr_workdir_sweep(const char *parent, const char *prefix)
{
    DIR *d = opendir(parent);
    if (!d) return 0;
    size_t plen = strlen(prefix);
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0 || e->d_name[plen] != '-') continue;
        char path[4600];
        snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        long pid = marker_pid(path);
        if (pid <= 0 || dcr_outpath_pid_alive(pid)) continue;
        if (dcr_outpath_remove_tree(path) == 0) {
            removed++;
            DCR_LOG_INFO("removed %s, left by dcr pid %ld", path, pid);
        }
    }
    closedir(d);
    return removed;
}

dcr_status_t dcr_workdir_open(const char *flag, const char *dir, const char *prefix,
                              dcr_workdir_t *w)
{
    dcr_workdir_t out = {{0}, false};
    if (!dir) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = "/tmp";
        dcr_workdir_sweep(tmp, prefix);
        snprintf(out.path, sizeof(out.path), "%s/%s-XXXXXX", tmp, prefix);
        if (!mkdtemp(out.path))
            return dcr_error_set(DCR_EIO, "cannot create a temporary folder %s: %s", out.path,
                                 strerror(errno));
        out.temp = true;
        dcr_interrupt_cleanup_add(out.path);
        dcr_status_t st = write_marker(out.path);
        if (st != DCR_OK) {
            dcr_workdir_close(&out);
            return st;
        }
        *w = out;
        return DCR_OK;
    }
    DCR_CHECK(dcr_workdir_check(flag, dir));
    if (snprintf(out.path, sizeof(out.path), "%s", dir) >= (int)sizeof(out.path))
        return dcr_error_set(DCR_EINVAL, "%s: path too long", flag);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "%s %s: cannot create: %s", flag, dir, strerror(errno));
    if (marker_pid(dir) > 0) DCR_CHECK(empty_folder(flag, dir));
    DCR_CHECK(write_marker(dir));
    *w = out;
    return DCR_OK;
}

void dcr_workdir_close(dcr_workdir_t *w)
{
    if (!w || !w->temp || !w->path[0]) return;
    dcr_interrupt_cleanup_remove(w->path);
    dcr_outpath_remove_tree(w->path);
    w->temp = false;
}
