/* Work folders (workloads/harness/workdir.h). The marker holds "dcr work folder
 * pid N start T boot B dev D ino I"; reading it never follows a link. */
#include "workloads/harness/workdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "dcr/log.h"
#include "dcr/outpath.h"
#include "workloads/harness/interrupt.h"

/* What a marker records. A marker is dcr's only when it is a regular file
 * (not a link) owned by this user, in a folder (not a link) owned by this
 * user, and names that folder's device and inode: a marker copied from
 * another folder, written by hand, or in another user's folder is refused.
 * The pid, its start time and the boot say whether the run is alive: a pid
 * reused by another process, or one of an earlier boot, is not. */
typedef struct marker {
    long pid;
    unsigned long long start, dev, ino;
    char boot[40];
} marker_t;

#define MARKER_FORMAT "dcr work folder pid %ld start %llu boot %39s dev %llu ino %llu\n"

/* This machine's boot id, or "unknown". */
static void boot_id(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    size_t len = n > 0 ? strcspn(buf, "\n") : 0;
    if (len > 0 && len < cap) snprintf(out, cap, "%.*s", (int)len, buf);
}

/* Process pid's start time in clock ticks since boot (/proc/PID/stat field
 * 22), 0 when unknown. */
static unsigned long long start_time(long pid)
{
    char path[64], buf[1024] = {0};
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    const char *p = n > 0 ? strrchr(buf, ')') : NULL; /* the name may hold spaces */
    /* The blank before field k, for k = 3 (state) up to 22 (start time). */
    for (int field = 3; p != NULL && field <= 22; field++) p = strchr(p + 1, ' ');
    if (p == NULL) return 0;
    unsigned long long t = strtoull(p + 1, NULL, 10);
    return t;
}

/* Reads dir's marker: 1 when it is dcr's (see marker_t), 0 when there is
 * none, -1 when there is one that dcr did not write for this folder. */
static int marker_read(const char *dir, marker_t *m)
{
    struct stat ds, ms;
    if (lstat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) || ds.st_uid != geteuid()) return -1;
    char path[4200];
    snprintf(path, sizeof(path), "%s/" DCR_WORKDIR_MARKER, dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    char buf[256] = {0};
    ssize_t n = fstat(fd, &ms) == 0 && S_ISREG(ms.st_mode) && ms.st_uid == geteuid()
                    ? read(fd, buf, sizeof(buf) - 1)
                    : -1;
    close(fd);
    memset(m, 0, sizeof *m);
    if (n <= 0 || sscanf(buf, MARKER_FORMAT, &m->pid, &m->start, m->boot, &m->dev, &m->ino) != 5 ||
        m->pid <= 0)
        return -1;
    if (m->dev != (unsigned long long)ds.st_dev || m->ino != (unsigned long long)ds.st_ino)
        return -1; /* written for another folder: a copy */
    return 1;
}

/* Whether the run that wrote m is alive: same boot, pid alive, and the
 * process with that pid started when the marker says. */
static bool marker_alive(const marker_t *m)
{
    char boot[40];
    boot_id(boot, sizeof boot);
    if (strcmp(boot, m->boot) != 0) return false;
    if (!dcr_outpath_pid_alive(m->pid)) return false;
    unsigned long long t = start_time(m->pid);
    return t == 0 || t == m->start; /* unknown: assume alive, the safe side */
}

static dcr_status_t write_marker(const char *dir)
{
    char path[4200], text[256], boot[40];
    struct stat ds;
    if (lstat(dir, &ds) != 0)
        return dcr_error_set(DCR_EIO, "work folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(ds.st_mode))
        return dcr_error_set(DCR_EINVAL, "work folder %s: is not a directory", dir);
    boot_id(boot, sizeof boot);
    snprintf(path, sizeof(path), "%s/" DCR_WORKDIR_MARKER, dir);
    int len = snprintf(text, sizeof(text), MARKER_FORMAT, (long)getpid(), start_time(getpid()),
                       boot, (unsigned long long)ds.st_dev, (unsigned long long)ds.st_ino);
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
    marker_t m;
    int state = marker_read(dir, &m);
    if (state < 0)
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: %s is not a marker dcr wrote for this folder (a copy, an "
                             "older dcr's, or another user's); refusing the folder",
                             flag, dir, DCR_WORKDIR_MARKER);
    if (state == 0 && foreign > 0)
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: holds files and no %s marker; dcr uses only an empty folder "
                             "or one it made",
                             flag, dir, DCR_WORKDIR_MARKER);
    if (state > 0 && m.pid != (long)getpid() && marker_alive(&m))
        return dcr_error_set(DCR_EINVAL, "%s %s: in use by the dcr run with pid %ld", flag, dir,
                             m.pid);
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
        /* Never through a link, never a folder or marker dcr did not make
         * (marker_read checks both kinds and both owners). */
        marker_t m;
        if (marker_read(path, &m) != 1 || marker_alive(&m)) continue;
        if (dcr_outpath_remove_tree(path) == 0) {
            removed++;
            DCR_LOG_INFO("removed %s, left by dcr pid %ld", path, m.pid);
        }
    }
    closedir(d);
    return removed;
}

dcr_status_t dcr_workdir_open_temp(const char *parent, const char *prefix, dcr_workdir_t *w)
{
    dcr_workdir_t out = {{0}, false};
    if (!parent) parent = dcr_workdir_tmpdir();
    dcr_workdir_sweep(parent, prefix);
    snprintf(out.path, sizeof(out.path), "%s/%s-XXXXXX", parent, prefix);
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

const char *dcr_workdir_tmpdir(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

/* Whether dir is a tmpfs; its figures in *fs. */
static bool memory_fs(const char *dir, struct statfs *fs)
{
    return statfs(dir, fs) == 0 && fs->f_type == TMPFS_MAGIC;
}

bool dcr_workdir_is_memory(const char *dir)
{
    struct statfs fs;
    return memory_fs(dir, &fs);
}

const char *dcr_workdir_memory_parent(uint64_t need_bytes)
{
    static const char shm[] = "/dev/shm";
    struct statfs fs;
    struct stat st;
    if (!memory_fs(shm, &fs)) return NULL;
    /* A real directory we may create in: not a link planted there. */
    if (lstat(shm, &st) != 0 || !S_ISDIR(st.st_mode) || access(shm, W_OK | X_OK) != 0) return NULL;
    uint64_t free_bytes = (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize;
    return free_bytes >= need_bytes ? shm : NULL;
}

dcr_status_t dcr_workdir_open(const char *flag, const char *dir, const char *prefix,
                              dcr_workdir_t *w)
{
    if (!dir) return dcr_workdir_open_temp(NULL, prefix, w);
    dcr_workdir_t out = {{0}, false};
    DCR_CHECK(dcr_workdir_check(flag, dir));
    if (snprintf(out.path, sizeof(out.path), "%s", dir) >= (int)sizeof(out.path))
        return dcr_error_set(DCR_EINVAL, "%s: path too long", flag);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "%s %s: cannot create: %s", flag, dir, strerror(errno));
    marker_t m;
    if (marker_read(dir, &m) > 0) DCR_CHECK(empty_folder(flag, dir));
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
