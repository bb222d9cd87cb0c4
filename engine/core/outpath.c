/* The output-path rule (dcr/outpath.h): every check and every write goes
 * through the parent folder's descriptor with *at calls and O_NOFOLLOW, so a
 * name that is or becomes a symbolic link is never followed. */
#include "dcr/outpath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"

#define DCR__TMP_TAG   ".dcr-tmp-"
#define DCR__STAGE_TAG ".dcr-stage-"
#define DCR__PROBE_TAG ".dcr-probe-"
/* Room for the tag, a pid and the random suffix inside NAME_MAX. */
#define DCR__BASE_MAX 200

struct dcr_outfile {
    int dirfd, fd;
    char *path; /* the target as the user gave it */
    char base[NAME_MAX + 1], tmp[NAME_MAX + 1];
    char *tmp_path; /* folder + "/" + tmp */
};

struct dcr_outdir {
    int dirfd;
    char *dir, *stage_path;
    char stage[NAME_MAX + 1];
};

static const char *dcr__kind(mode_t m)
{
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISREG(m)) return "a regular file";
    return "not a regular file";
}

/* Splits path into its folder (copied into dir, "." when there is none) and
 * final component (a pointer into path). */
static dcr_status_t dcr__split(const char *what, const char *path, char *dir, size_t cap,
                               const char **base_p)
{
    size_t len = path ? strlen(path) : 0;
    if (len == 0) return dcr_error_set(DCR_EINVAL, "%s: empty path", what);
    if (path[len - 1] == '/')
        return dcr_error_set(DCR_EINVAL, "%s %s: names a directory, expected a file", what, path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!strcmp(base, ".") || !strcmp(base, ".."))
        return dcr_error_set(DCR_EINVAL, "%s %s: names a directory, expected a file", what, path);
    size_t dlen = slash ? (size_t)(slash - path) : 1;
    if (dlen + 1 > cap) return dcr_error_set(DCR_EINVAL, "%s %s: path too long", what, path);
    if (!slash)
        memcpy(dir, ".", 2);
    else if (slash == path)
        memcpy(dir, "/", 2);
    else {
        memcpy(dir, path, dlen);
        dir[dlen] = '\0';
    }
    *base_p = base;
    return DCR_OK;
}

/* "dir/name" in a new allocation. */
static dcr_status_t dcr__join(const char *what, const char *dir, const char *name, char **out_p)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) return dcr_error_set(DCR_ENOMEM, "%s %s", what, dir);
    snprintf(p, n, "%s/%s", dir, name);
    *out_p = p;
    return DCR_OK;
}

static int dcr__open_dir(const char *dir)
{
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* An output folder itself: never through a link, even one planted after
 * the check. */
static int dcr__open_dir_nofollow(const char *dir)
{
    /* "link/" would resolve the link before O_NOFOLLOW looks: drop the
     * trailing slashes first. */
    char buf[PATH_MAX];
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    if (len >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, dir, len);
    buf[len] = '\0';
    return open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The final component's kind: DCR_OK when absent or a regular file
 * (*exists_p says which), DCR_EINVAL naming the kind otherwise. */
static dcr_status_t dcr__target_ok(const char *what, const char *path, int dirfd, const char *base,
                                   bool *exists_p)
{
    struct stat st;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) {
            if (exists_p) *exists_p = false;
            return DCR_OK;
        }
        return dcr_error_set(DCR_EIO, "%s %s: %s", what, path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: is %s; dcr writes only to a regular file or a new name", what,
                             path, dcr__kind(st.st_mode));
    if (exists_p) *exists_p = true;
    return DCR_OK;
}

/* Creates a new file or folder named PREFIX + TAG + "PID-XXXXXX" in dirfd,
 * never replacing anything (O_EXCL / mkdirat), and returns its name in name. */
static int dcr__create_temp(int dirfd, const char *prefix, const char *tag, bool folder, char *name,
                            size_t cap)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = (uint64_t)dcr_clock_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)name;
    for (int attempt = 0; attempt < 64; attempt++) {
        char suffix[7];
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            suffix[i] = alphabet[(x >> 33) % (sizeof(alphabet) - 1)];
        }
        suffix[6] = '\0';
        snprintf(name, cap, "%.*s%s%ld-%s", DCR__BASE_MAX, prefix, tag, (long)getpid(), suffix);
        int fd = folder ? mkdirat(dirfd, name, 0700)
                        : openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                 0644);
        if (fd >= 0) return folder ? 0 : fd;
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

/* The folder accepts a new file: create and remove a probe. */
static dcr_status_t dcr__probe(const char *what, const char *dir, int dirfd)
{
    char name[NAME_MAX + 1];
    dcr_outpath_sweep(dir, DCR__PROBE_TAG); /* a probe of a writer killed mid-check */
    int fd = dcr__create_temp(dirfd, "", DCR__PROBE_TAG, false, name, sizeof(name));
    if (fd < 0)
        return dcr_error_set(DCR_EIO, "%s: cannot create files in %s: %s", what, dir,
                             strerror(errno));
    close(fd);
    unlinkat(dirfd, name, 0);
    return DCR_OK;
}

dcr_status_t dcr_outpath_check(const char *what, const char *path)
{
    char dir[PATH_MAX];
    const char *base = NULL; /* set by dcr__split; -O3 cannot see that */
    DCR_CHECK(dcr__split(what, path, dir, sizeof(dir), &base));
    int dirfd = dcr__open_dir(dir);
    if (dirfd < 0)
        return dcr_error_set(DCR_EIO, "%s %s: folder %s: %s", what, path, dir, strerror(errno));
    dcr_status_t st = dcr__target_ok(what, path, dirfd, base, NULL);
    if (st == DCR_OK) st = dcr__probe(what, dir, dirfd);
    close(dirfd);
    return st;
}

dcr_status_t dcr_outdir_check(const char *what, const char *dir)
{
    if (!dir || !*dir) return dcr_error_set(DCR_EINVAL, "%s: empty path", what);
    struct stat st;
    /* lstat: a link to a folder is refused like a link to a file, since
     * the files written inside would replace the link target's ("link/"
     * would be resolved: the trailing slashes go first). */
    char name[PATH_MAX];
    size_t nlen = strlen(dir);
    while (nlen > 1 && dir[nlen - 1] == '/') nlen--;
    if (nlen >= sizeof name) return dcr_error_set(DCR_EINVAL, "%s: path too long", what);
    memcpy(name, dir, nlen);
    name[nlen] = '\0';
    if (lstat(name, &st) != 0) {
        if (errno != ENOENT) return dcr_error_set(DCR_EIO, "%s %s: %s", what, dir, strerror(errno));
        /* A new folder: its parent must take it. */
        char parent[PATH_MAX];
        size_t len = strlen(dir);
        while (len > 1 && dir[len - 1] == '/') len--;
        if (len >= sizeof(parent)) return dcr_error_set(DCR_EINVAL, "%s: path too long", what);
        memcpy(parent, dir, len);
        parent[len] = '\0';
        const char *base;
        char pdir[PATH_MAX];
        DCR_CHECK(dcr__split(what, parent, pdir, sizeof(pdir), &base));
        int pfd = dcr__open_dir(pdir);
        if (pfd < 0)
            return dcr_error_set(DCR_EIO, "%s %s: folder %s: %s", what, dir, pdir, strerror(errno));
        dcr_status_t s = dcr__probe(what, pdir, pfd);
        close(pfd);
        return s;
    }
    if (S_ISLNK(st.st_mode))
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: is a symbolic link; dcr never follows one (give the folder "
                             "itself)",
                             what, dir);
    if (!S_ISDIR(st.st_mode))
        return dcr_error_set(DCR_EINVAL, "%s %s: is %s, expected a directory", what, dir,
                             dcr__kind(st.st_mode));
    int fd = dcr__open_dir_nofollow(dir);
    if (fd < 0) return dcr_error_set(DCR_EIO, "%s %s: %s", what, dir, strerror(errno));
    dcr_status_t s = dcr__probe(what, dir, fd);
    close(fd);
    return s;
}

/* ---- removal (signal-safe) ------------------------------------------------ */

struct dcr__dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Empties the folder open as fd, depth-first, following no link. Entries
 * are read again after a pass that removed any, since removal can move the
 * directory stream's position. */
static int dcr__empty(int fd, int depth)
{
    int rc = 0;
    if (depth > 64) {
        errno = ELOOP;
        return -1;
    }
    for (;;) {
        char buf[2048] __attribute__((aligned(8)));
        int removed = 0;
        lseek(fd, 0, SEEK_SET);
        for (;;) {
            long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
            if (n <= 0) {
                if (n < 0) rc = -1;
                break;
            }
            for (long off = 0; off < n;) {
                struct dcr__dirent64 *e = (struct dcr__dirent64 *)(buf + off);
                off += e->d_reclen;
                const char *nm = e->d_name;
                if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
                bool is_dir = e->d_type == DT_DIR;
                if (e->d_type == DT_UNKNOWN) {
                    struct stat st;
                    is_dir = fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
                }
                if (is_dir) {
                    int sub = openat(fd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                    if (sub >= 0) {
                        if (dcr__empty(sub, depth + 1) != 0) rc = -1;
                        close(sub);
                    }
                    if (unlinkat(fd, nm, AT_REMOVEDIR) == 0)
                        removed++;
                    else
                        rc = -1;
                } else if (unlinkat(fd, nm, 0) == 0) {
                    removed++;
                } else {
                    rc = -1;
                }
            }
        }
        if (!removed || rc != 0) break;
    }
    return rc;
}

int dcr_outpath_remove_tree(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        /* Not a folder (or a link to one): remove the name itself. */
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    }
    int rc = dcr__empty(fd, 0);
    close(fd);
    if (rmdir(path) != 0 && errno != ENOENT) rc = -1;
    return rc;
}

bool dcr_outpath_pid_alive(long pid)
{
    if (pid <= 0) return false;
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

int dcr_outpath_sweep(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t plen = strlen(prefix);
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0) continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (errno || end == e->d_name + plen || *end != '-' || dcr_outpath_pid_alive(pid)) continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path)) continue;
        if (dcr_outpath_remove_tree(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

/* ---- output files --------------------------------------------------------- */

static void dcr__outfile_free(dcr_outfile_t *f)
{
    if (f->fd >= 0) close(f->fd);
    if (f->dirfd >= 0) close(f->dirfd);
    free(f->path);
    free(f->tmp_path);
    free(f);
}

static dcr_status_t dcr__copy_target(dcr_outfile_t *f, const char *what)
{
    int src = openat(f->dirfd, f->base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (src < 0) return dcr_error_set(DCR_EIO, "%s %s: %s", what, f->path, strerror(errno));
    struct stat st;
    dcr_status_t s = DCR_OK;
    if (fstat(src, &st) != 0 || !S_ISREG(st.st_mode))
        s = dcr_error_set(DCR_EINVAL, "%s %s: not a regular file", what, f->path);
    char buf[1 << 16];
    while (s == DCR_OK) {
        ssize_t n = read(src, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) s = dcr_error_set(DCR_EIO, "%s %s: reading: %s", what, f->path, strerror(errno));
        if (n <= 0) break;
        for (ssize_t done = 0; s == DCR_OK && done < n;) {
            ssize_t w = write(f->fd, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0)
                s = dcr_error_set(DCR_EIO, "%s %s: writing: %s", what, f->tmp_path,
                                  strerror(errno));
            else
                done += w;
        }
    }
    close(src);
    return s;
}

dcr_status_t dcr_outfile_open(const char *what, const char *path, unsigned flags,
                              dcr_outfile_t **out_p)
{
    char dir[PATH_MAX];
    const char *base = NULL; /* set by dcr__split; -O3 cannot see that */
    DCR_CHECK(dcr__split(what, path, dir, sizeof(dir), &base));
    dcr_outfile_t *f = calloc(1, sizeof(*f));
    if (!f) return dcr_error_set(DCR_ENOMEM, "%s %s", what, path);
    f->fd = -1;
    f->dirfd = dcr__open_dir(dir);
    dcr_status_t s = DCR_OK;
    if (f->dirfd < 0)
        s = dcr_error_set(DCR_EIO, "%s %s: folder %s: %s", what, path, dir, strerror(errno));
    f->path = strdup(path);
    snprintf(f->base, sizeof(f->base), "%s", base);
    if (s == DCR_OK && !f->path) s = dcr_error_set(DCR_ENOMEM, "%s %s", what, path);
    bool exists = false;
    if (s == DCR_OK) s = dcr__target_ok(what, path, f->dirfd, base, &exists);
    if (s == DCR_OK) {
        char prefix[NAME_MAX + 1];
        snprintf(prefix, sizeof(prefix), ".%.*s" DCR__TMP_TAG, DCR__BASE_MAX, base);
        dcr_outpath_sweep(dir, prefix);
        snprintf(prefix, sizeof(prefix), ".%.*s", DCR__BASE_MAX, base);
        f->fd = dcr__create_temp(f->dirfd, prefix, DCR__TMP_TAG, false, f->tmp, sizeof(f->tmp));
        if (f->fd < 0)
            s = dcr_error_set(DCR_EIO, "%s: cannot create a file in %s: %s", what, dir,
                              strerror(errno));
    }
    if (s == DCR_OK) s = dcr__join(what, dir, f->tmp, &f->tmp_path);
    if (s == DCR_OK && exists && (flags & DCR_OUTFILE_KEEP)) s = dcr__copy_target(f, what);
    if (s != DCR_OK) {
        dcr_outfile_abort(f);
        return s;
    }
    *out_p = f;
    return DCR_OK;
}

int dcr_outfile_fd(const dcr_outfile_t *f)
{
    return f->fd;
}

const char *dcr_outfile_tmp_path(const dcr_outfile_t *f)
{
    return f->tmp_path;
}

/* Renames tmp to the new name base, failing with EEXIST when base exists.
 * File systems without RENAME_NOREPLACE get a hard link, which never
 * replaces either, and the temporary name is then removed. */
static int dcr__rename_new(int dirfd, const char *tmp, const char *base)
{
    if (renameat2(dirfd, tmp, dirfd, base, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (linkat(dirfd, tmp, dirfd, base, 0) != 0) return -1;
    unlinkat(dirfd, tmp, 0);
    return 0;
}

dcr_status_t dcr_outfile_commit(dcr_outfile_t *f)
{
    dcr_status_t s = DCR_OK;
    if (fsync(f->fd) != 0 && errno != EINVAL)
        s = dcr_error_set(DCR_EIO, "writing %s: %s", f->path, strerror(errno));
    if (close(f->fd) != 0 && s == DCR_OK)
        s = dcr_error_set(DCR_EIO, "writing %s: %s", f->path, strerror(errno));
    f->fd = -1;
    for (int attempt = 0; s == DCR_OK && attempt < 4; attempt++) {
        bool exists = false;
        s = dcr__target_ok("output", f->path, f->dirfd, f->base, &exists);
        if (s != DCR_OK) break;
        /* A new name is taken only while it is still new, so a link or FIFO
         * planted after the check is never replaced. */
        int rc = exists ? renameat(f->dirfd, f->tmp, f->dirfd, f->base)
                        : dcr__rename_new(f->dirfd, f->tmp, f->base);
        if (rc == 0) {
            f->tmp[0] = '\0';
            break;
        }
        if (errno != EEXIST || exists)
            s = dcr_error_set(DCR_EIO, "cannot rename %s to %s: %s", f->tmp_path, f->path,
                              strerror(errno));
    }
    if (s != DCR_OK || f->tmp[0]) {
        if (s == DCR_OK) s = dcr_error_set(DCR_EIO, "%s: target keeps changing", f->path);
        dcr_outfile_abort(f);
        return s;
    }
    dcr__outfile_free(f);
    return DCR_OK;
}

void dcr_outfile_abort(dcr_outfile_t *f)
{
    if (!f) return;
    if (f->dirfd >= 0 && f->tmp[0]) unlinkat(f->dirfd, f->tmp, 0);
    dcr__outfile_free(f);
}

dcr_status_t dcr_outpath_write(const char *what, const char *path, const void *buf, size_t len)
{
    dcr_outfile_t *f = NULL;
    DCR_CHECK(dcr_outfile_open(what, path, 0, &f));
    const char *p = buf;
    for (size_t done = 0; done < len;) {
        ssize_t n = write(f->fd, p + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            dcr_status_t s = dcr_error_set(DCR_EIO, "writing %s: %s", path, strerror(errno));
            dcr_outfile_abort(f);
            return s;
        }
        done += (size_t)n;
    }
    return dcr_outfile_commit(f);
}

/* ---- output folders ------------------------------------------------------- */

dcr_status_t dcr_outdir_open(const char *what, const char *dir, dcr_outdir_t **out_p)
{
    DCR_CHECK(dcr_outdir_check(what, dir));
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "%s %s: cannot create: %s", what, dir, strerror(errno));
    dcr_outdir_t *d = calloc(1, sizeof(*d));
    if (!d) return dcr_error_set(DCR_ENOMEM, "%s %s", what, dir);
    d->dirfd = dcr__open_dir_nofollow(dir);
    d->dir = strdup(dir);
    dcr_status_t s = DCR_OK;
    if (d->dirfd < 0)
        s = dcr_error_set(
            errno == ELOOP || errno == ENOTDIR ? DCR_EINVAL : DCR_EIO, "%s %s: %s", what, dir,
            errno == ELOOP ? "is a symbolic link; dcr never follows one" : strerror(errno));
    if (s == DCR_OK && !d->dir) s = dcr_error_set(DCR_ENOMEM, "%s %s", what, dir);
    if (s == DCR_OK) {
        dcr_outpath_sweep(dir, DCR__STAGE_TAG);
        if (dcr__create_temp(d->dirfd, "", DCR__STAGE_TAG, true, d->stage, sizeof(d->stage)) != 0)
            s = dcr_error_set(DCR_EIO, "%s %s: cannot create a staging folder: %s", what, dir,
                              strerror(errno));
    }
    if (s == DCR_OK) s = dcr__join(what, dir, d->stage, &d->stage_path);
    if (s != DCR_OK) {
        dcr_outdir_abort(d);
        return s;
    }
    *out_p = d;
    return DCR_OK;
}

const char *dcr_outdir_stage(const dcr_outdir_t *d)
{
    return d->stage_path;
}

/* One pass over the staged tree `src` against the output tree `dst` (dst -1:
 * a folder that does not exist yet). With move false, checks every target;
 * with move true, creates folders and renames files. rel is the relative
 * name for messages. */
static dcr_status_t dcr__merge(int src, int dst, const char *dir, const char *rel, bool move,
                               int depth)
{
    if (depth > 16) return dcr_error_set(DCR_EINVAL, "output %s/%s: nested too deep", dir, rel);
    int walk = dup(src);
    DIR *d = walk >= 0 ? fdopendir(walk) : NULL;
    if (!d) {
        if (walk >= 0) close(walk);
        return dcr_error_set(DCR_EIO, "output %s/%s: %s", dir, rel, strerror(errno));
    }
    rewinddir(d);
    dcr_status_t s = DCR_OK;
    for (struct dirent *e; s == DCR_OK && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char name[PATH_MAX];
        snprintf(name, sizeof(name), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        struct stat st, tt;
        if (fstatat(src, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        bool exists = dst >= 0 && fstatat(dst, e->d_name, &tt, AT_SYMLINK_NOFOLLOW) == 0;
        if (S_ISDIR(st.st_mode)) {
            if (exists && !S_ISDIR(tt.st_mode)) {
                s = dcr_error_set(DCR_EINVAL,
                                  "output %s/%s: is %s, expected a directory; nothing written", dir,
                                  name, dcr__kind(tt.st_mode));
                break;
            }
            if (move && !exists && mkdirat(dst, e->d_name, 0755) != 0) {
                s = dcr_error_set(DCR_EIO, "output %s/%s: %s", dir, name, strerror(errno));
                break;
            }
            int sub = openat(src, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int dsub = (exists || move)
                           ? openat(dst, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                           : -1;
            if (sub >= 0) s = dcr__merge(sub, dsub, dir, name, move, depth + 1);
            if (sub >= 0) close(sub);
            if (dsub >= 0) close(dsub);
        } else if (S_ISREG(st.st_mode)) {
            if (exists && !S_ISREG(tt.st_mode)) {
                s = dcr_error_set(DCR_EINVAL,
                                  "output %s/%s: is %s; dcr writes only to a regular file or a "
                                  "new name; nothing written",
                                  dir, name, dcr__kind(tt.st_mode));
                break;
            }
            if (move && renameat(src, e->d_name, dst, e->d_name) != 0)
                s = dcr_error_set(DCR_EIO, "output %s/%s: %s", dir, name, strerror(errno));
        }
        /* Anything else in the staging folder (a link a tool made) stays
         * there and goes with it. */
    }
    closedir(d);
    return s;
}

dcr_status_t dcr_outdir_commit(dcr_outdir_t *d)
{
    int src = openat(d->dirfd, d->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    dcr_status_t s = DCR_OK;
    if (src < 0) s = dcr_error_set(DCR_EIO, "output %s: %s", d->stage_path, strerror(errno));
    if (s == DCR_OK) s = dcr__merge(src, d->dirfd, d->dir, "", false, 0);
    if (s == DCR_OK) s = dcr__merge(src, d->dirfd, d->dir, "", true, 0);
    if (src >= 0) close(src);
    dcr_outdir_abort(d);
    return s;
}

void dcr_outdir_abort(dcr_outdir_t *d)
{
    if (!d) return;
    if (d->stage_path) dcr_outpath_remove_tree(d->stage_path);
    if (d->dirfd >= 0) close(d->dirfd);
    free(d->dir);
    free(d->stage_path);
    free(d);
}
