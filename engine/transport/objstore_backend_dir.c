/* The "dir" object store: a local directory standing in for S3. Key "a/b"
 * is the file ROOT/a/b. Every object is published by temporary file and
 * rename, so a visible name always holds complete bytes; temporary files
 * are dot-named (".tmp-*"), which no key can be, so listings skip them.
 * Objects are not fsynced: the transport's objects live only for one
 * attempt, and after a crash of this machine the attempt fails anyway and
 * its retry resends every record; what must survive is the control plane's
 * commit record. A real store's durable PUT costs its round trip, which the
 * transport's link emulation adds (link.c).
 *
 * The work-folder rule holds for the store's root: it is never a symbolic
 * link, and it is taken only when it is new, empty or holds the marker
 * ".dcr-store" that dcr wrote there, so a store's deletes never remove a
 * user's files. Inside, every access walks down from the root's descriptor
 * one component at a time with O_NOFOLLOW and acts with *at calls: a link
 * planted anywhere in the store (an "attempt-3" pointing elsewhere) makes
 * that key unreachable instead of reaching the link's target.
 *
 * Properties: listings are consistent (readdir after rename), ranged reads
 * are pread, and change notification is inotify on the prefix's directory
 * where the kernel offers it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/objstore-internal.h"

/* One waiting thread's inotify watch, kept armed from one wait_change to
 * the next while the thread waits on the same prefix, so that a change that
 * lands between two calls stays queued. The thread's inotify instance lives
 * as long as the store: closing one waits for the kernel's grace period on
 * its marks (fsnotify's SRCU), which held a rollout node's watcher 14-16 ms
 * when it moved to a new attempt's prefix; removing a watch does not wait. */
typedef struct dir_watch {
    pthread_t owner;
    char prefix[DCR_OBJSTORE_KEY_MAX + 1];
    int fd;         /* the thread's inotify instance; -1 before its first wait */
    int wd;         /* the watch on the prefix's directory or an ancestor; -1: none */
    bool on_target; /* watching the prefix's own directory, not an ancestor */
    bool stale;     /* the watched directory went away (IN_IGNORED) */
} dir_watch_t;

typedef struct dirstore {
    dcr_objstore_t pub;
    char *root;
    int rootfd;               /* the root folder, opened without following a link */
    atomic_uint seq;          /* temporary names */
    pthread_mutex_t watch_mu; /* guards the table, not the watches */
    dir_watch_t **watches;    /* one per thread that waited; freed at destroy */
    size_t nwatches, capwatches;
} dirstore_t;

/* The marker that makes a folder a store: written by dcr into an empty
 * folder, checked in any other. Dot-named, so no key can be it. */
#define DIR_MARKER      ".dcr-store"
#define DIR_MARKER_TEXT "dcr object store\n"

/* A scheme is letters, digits, '+', '-' or '.' after a letter, then ':'
 * (RFC 3986). A string without one is a folder path; with one, only "dir:"
 * is this backend's. "/a:b" and "./x:y" are paths: '/' or '.' first. */
static bool dir_claims(const dcr_objstore_ops_t *self, const char *url)
{
    (void)self;
    if (strncmp(url, "dir:", 4) == 0) return true;
    const char *p = url;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return true;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '+' || *p == '-' || *p == '.')
        p++;
    return *p != ':';
}

static const char *dir_path_of(const char *url)
{
    return strncmp(url, "dir:", 4) == 0 ? url + 4 : url;
}

/* Tries of the folder chain: a delete in another process drops folders it
 * leaves empty (dir_del), so a parent made a moment ago may be gone again
 * (ENOENT) before its child is made or opened. */
#define DIR_MKDIRS_TRIES 5

/* The root's parents as the user named them (links in them are the user's
 * choice, as for a work folder); the root itself is made by dir_create. */
static dcr_status_t dir_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return dcr_error_set(DCR_EINVAL, "object store dir: path too long: %s", path);
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return dcr_error_set(DCR_EIO, "object store dir: cannot create directory %s: %s", buf,
                                 strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return dcr_error_set(DCR_EIO, "object store dir: cannot create directory %s: %s", buf,
                             strerror(errno));
    return DCR_OK;
}

/* Whether the marker in fd is dcr's: a regular file (not a link) holding
 * exactly DIR_MARKER_TEXT. */
static bool dir_marker_ok(int fd)
{
    int m = openat(fd, DIR_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (m < 0) return false;
    char buf[64];
    struct stat sb;
    ssize_t n = fstat(m, &sb) == 0 && S_ISREG(sb.st_mode) ? read(m, buf, sizeof buf) : -1;
    close(m);
    return n == (ssize_t)strlen(DIR_MARKER_TEXT) && memcmp(buf, DIR_MARKER_TEXT, (size_t)n) == 0;
}

/* 1 when the folder holds the marker, 0 when it holds nothing but dcr's
 * own temporary names (".tmp-*"), -1 when it holds anything else. */
static int dir_root_state(int fd)
{
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (d == NULL) {
        if (dup_fd >= 0) close(dup_fd);
        return -1;
    }
    rewinddir(d);
    int state = 0;
    for (struct dirent *e; state == 0 && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, DIR_MARKER))
            state = 1;
        else if (strncmp(e->d_name, ".tmp-", 5) != 0)
            state = -1;
    }
    closedir(d);
    if (state == -1 && dir_marker_ok(fd)) state = 1;
    if (state == 1 && !dir_marker_ok(fd)) state = -1;
    return state;
}

/* Marks an empty folder: the text goes to a temporary name first and is
 * linked in, so a process opening the store at the same moment sees either
 * no marker or a whole one. */
static dcr_status_t dir_mark(dirstore_t *s)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".tmp-dcr-store-%d-%u", (int)getpid(), atomic_fetch_add(&s->seq, 1));
    int fd = openat(s->rootfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return dcr_error_set(DCR_EIO, "object store dir: cannot mark %s: %s", s->root,
                             strerror(errno));
    size_t len = strlen(DIR_MARKER_TEXT);
    bool ok = write(fd, DIR_MARKER_TEXT, len) == (ssize_t)len;
    ok = close(fd) == 0 && ok;
    int rc = ok ? linkat(s->rootfd, tmp, s->rootfd, DIR_MARKER, 0) : -1;
    int e = errno;
    unlinkat(s->rootfd, tmp, 0);
    if (rc == 0 || (ok && e == EEXIST && dir_marker_ok(s->rootfd))) return DCR_OK;
    return dcr_error_set(DCR_EIO, "object store dir: cannot mark %s: %s", s->root,
                         ok ? strerror(e) : "write failed");
}

/* The work-folder rule for stores, on the root's own entry: absent (the
 * store creates it) or a folder that is not a link. */
static dcr_status_t dir_root_entry(const char *root, bool *exists_p)
{
    struct stat sb;
    *exists_p = false;
    if (lstat(root, &sb) != 0) {
        if (errno == ENOENT) return DCR_OK;
        return dcr_error_set(DCR_EIO, "object store dir %s: %s", root, strerror(errno));
    }
    if (S_ISLNK(sb.st_mode))
        return dcr_error_set(DCR_EINVAL,
                             "object store dir %s: is a symbolic link; dcr never follows one "
                             "(give the folder itself)",
                             root);
    if (!S_ISDIR(sb.st_mode))
        return dcr_error_set(DCR_EINVAL, "object store dir %s: is not a directory", root);
    *exists_p = true;
    return DCR_OK;
}

static int dir_open_fd(const char *root)
{
    return open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static dcr_status_t dir_open_fd_error(const char *root)
{
    return dcr_error_set(errno == ELOOP ? DCR_EINVAL : DCR_EIO, "object store dir %s: %s", root,
                         strerror(errno));
}

static dcr_status_t dir_foreign_error(const char *root)
{
    return dcr_error_set(DCR_EINVAL,
                         "object store dir %s: holds files and no %s marker; dcr uses only an "
                         "empty folder or one it made as a store",
                         root, DIR_MARKER);
}

/* The rule in full: the root is not a link, and it is new, empty or marked
 * as a store by dcr; anything else is a user's folder, whose files a store's
 * deletes would remove. */
static dcr_status_t dir_open_root(dirstore_t *s)
{
    bool exists;
    DCR_CHECK(dir_root_entry(s->root, &exists));
    if (!exists) DCR_CHECK(dir_mkdirs(s->root));
    s->rootfd = dir_open_fd(s->root);
    if (s->rootfd < 0) return dir_open_fd_error(s->root);
    int state = dir_root_state(s->rootfd);
    if (state == 1) return DCR_OK;
    if (state == 0) return dir_mark(s);
    return dir_foreign_error(s->root);
}

dcr_status_t dcr_objstore_dir_check(const char *url)
{
    if (dcr_objstore_for_url(url) != &dcr__objstore_dir_ops) return DCR_OK;
    char root[PATH_MAX];
    const char *path = dir_path_of(url);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    if (n == 0 || n >= sizeof root)
        return dcr_error_set(DCR_EINVAL, "object store '%s': expected dir:PATH with a path", url);
    memcpy(root, path, n);
    root[n] = '\0';
    bool exists;
    DCR_CHECK(dir_root_entry(root, &exists));
    if (!exists) return DCR_OK;
    int fd = dir_open_fd(root);
    if (fd < 0) return dir_open_fd_error(root);
    int state = dir_root_state(fd);
    close(fd);
    return state >= 0 ? DCR_OK : dir_foreign_error(root);
}

static dcr_status_t dir_create(const dcr_objstore_ops_t *self, const dcr_objstore_config_t *cfg,
                               dcr_objstore_t **out_p)
{
    (void)self;
    const char *path = dir_path_of(cfg->url);
    if (path[0] == '\0')
        return dcr_error_set(DCR_EINVAL, "object store '%s': expected dir:PATH with a path",
                             cfg->url);
    dirstore_t *s = calloc(1, sizeof *s);
    if (s == NULL || (s->root = strdup(path)) == NULL) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "object store dir: allocation failed");
    }
    /* "link/" would resolve the link: the root is named without trailing slashes. */
    for (size_t n = strlen(s->root); n > 1 && s->root[n - 1] == '/'; n--) s->root[n - 1] = '\0';
    s->rootfd = -1;
    dcr_status_t st = dir_open_root(s);
    if (st != DCR_OK) {
        if (s->rootfd >= 0) close(s->rootfd);
        free(s->root);
        free(s);
        return st;
    }
    pthread_mutex_init(&s->watch_mu, NULL);
    *out_p = &s->pub;
    return DCR_OK;
}

static void dir_destroy(dcr_objstore_t *o)
{
    dirstore_t *s = (dirstore_t *)o;
    for (size_t i = 0; i < s->nwatches; i++) {
        if (s->watches[i]->fd >= 0) close(s->watches[i]->fd);
        free(s->watches[i]);
    }
    free(s->watches);
    pthread_mutex_destroy(&s->watch_mu);
    close(s->rootfd);
    free(s->root);
    free(s);
}

/* ROOT/key into out, for messages and inotify; the parent directory's
 * length into *dirlen_p. */
static void dir_path(const dirstore_t *s, const char *key, char *out, size_t cap, size_t *dirlen_p)
{
    snprintf(out, cap, "%s/%s", s->root, key);
    if (dirlen_p != NULL) {
        const char *slash = strrchr(out, '/');
        *dirlen_p = (size_t)(slash - out);
    }
}

/* Opens the folder holding `rel`'s last component (rel: a key, or a prefix
 * ending in '/', whose folder is then rel itself), walking down from the
 * root one component at a time with O_NOFOLLOW: a link anywhere inside the
 * store fails with ELOOP (or ENOTDIR), so nothing outside the store's own
 * tree is ever read, written or removed. With create, missing folders are
 * made. Returns the descriptor (the caller closes it) and the last
 * component in *leaf_p ("" for a prefix ending in '/'), or -1 with errno. */
static int dir_open_parent(const dirstore_t *s, const char *rel, bool create, const char **leaf_p)
{
    /* A new open file description, not dup: threads listing the root at
     * once must not share a directory offset. */
    int fd = openat(s->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *p = rel;
    for (const char *slash; fd >= 0 && (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        char comp[DCR_OBJSTORE_KEY_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n == 0 || n > DCR_OBJSTORE_KEY_MAX) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
            sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        close(fd);
        errno = e;
        fd = sub;
    }
    if (fd >= 0 && leaf_p != NULL) *leaf_p = p;
    return fd;
}

/* Why a walk failed, in words: a link inside the store is named as one. */
static const char *dir_walk_error(int e)
{
    return e == ELOOP || e == ENOTDIR ? "a symbolic link or a file where a folder belongs; dcr "
                                        "never follows a link inside a store"
                                      : strerror(e);
}

static dcr_status_t dir_put(dcr_objstore_t *o, const char *key, const uint8_t *buf, size_t len,
                            const dcr_objstore_pace_t *pace)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX], tmp[DCR_OBJSTORE_KEY_MAX + 64];
    dir_path(s, key, path, sizeof path, NULL);
    const char *leaf = NULL;
    int dfd = -1, fd = -1;
    /* A delete of the folder's last key removes the folder (dir_del): one
     * that runs between the walk and the create makes the create fail with
     * ENOENT; again. */
    for (int i = 0; i < DIR_MKDIRS_TRIES && fd < 0; i++) {
        if (dfd >= 0) close(dfd);
        dfd = dir_open_parent(s, key, true, &leaf);
        if (dfd < 0) {
            if (errno == ENOENT) continue;
            break;
        }
        snprintf(tmp, sizeof tmp, ".tmp-%s-%d-%u", leaf, (int)getpid(),
                 atomic_fetch_add(&s->seq, 1));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != ENOENT) break;
    }
    if (fd < 0) {
        int e = errno;
        if (dfd >= 0) close(dfd);
        return dcr_error_set(e == ELOOP || e == ENOTDIR ? DCR_EINVAL : DCR_EIO,
                             "object store dir: cannot create %s: %s", path, dir_walk_error(e));
    }
    dcr_status_t st = DCR_OK;
    for (size_t off = 0; off < len && st == DCR_OK;) {
        size_t n = len - off < DCR_OBJSTORE_PACE_CHUNK ? len - off : DCR_OBJSTORE_PACE_CHUNK;
        if (pace != NULL && (st = pace->fn(pace->ctx, n)) != DCR_OK) break;
        ssize_t w = write(fd, buf + off, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            st = dcr_error_set(DCR_EIO, "object store dir: writing %s: %s", path, strerror(errno));
        else
            off += (size_t)w;
    }
    if (close(fd) != 0 && st == DCR_OK) {
        st = dcr_error_set(DCR_EIO, "object store dir: closing %s: %s", path, strerror(errno));
    }
    /* rename replaces a link named like the key, never its target. */
    if (st == DCR_OK && renameat(dfd, tmp, dfd, leaf) != 0) {
        st = dcr_error_set(DCR_EIO, "object store dir: publishing %s: %s", path, strerror(errno));
    }
    if (st != DCR_OK) unlinkat(dfd, tmp, 0);
    close(dfd);
    return st;
}

static dcr_status_t dir_get(dcr_objstore_t *o, const char *key, uint64_t off, uint64_t len,
                            uint8_t *dst, size_t cap, size_t *got_p,
                            const dcr_objstore_pace_t *pace)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    dir_path(s, key, path, sizeof path, NULL);
    const char *leaf = NULL;
    int dfd = dir_open_parent(s, key, false, &leaf);
    /* never a planted link, neither the object nor a folder above it */
    int fd = dfd < 0 ? -1 : openat(dfd, leaf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    int e = errno;
    if (dfd >= 0) close(dfd);
    if (fd < 0) {
        return dcr_error_set(e == ENOENT ? DCR_ENOTFOUND : DCR_EIO, "object store dir: %s: %s",
                             path, dir_walk_error(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return dcr_error_set(DCR_EIO, "object store dir: %s is not a readable file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (off > size || (len != UINT64_MAX && len > size - off)) {
        close(fd);
        return dcr_error_set(DCR_ETRANSPORT,
                             "object store dir: %s holds %" PRIu64 " bytes; bytes [%" PRIu64
                             ", +%" PRIu64 ") requested",
                             path, size, off, len);
    }
    uint64_t want = len == UINT64_MAX ? size - off : len;
    if (want > cap) {
        close(fd);
        return dcr_error_set(DCR_EINVAL,
                             "object store dir: %s holds %" PRIu64 " bytes from %" PRIu64
                             ", above the %zu expected",
                             path, want, off, cap);
    }
    dcr_status_t st = DCR_OK;
    for (size_t done = 0; done < want && st == DCR_OK;) {
        size_t n = want - done < DCR_OBJSTORE_PACE_CHUNK ? want - done : DCR_OBJSTORE_PACE_CHUNK;
        ssize_t r = pread(fd, dst + done, n, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = dcr_error_set(DCR_ETRANSPORT,
                               "object store dir: reading %s at byte %" PRIu64 ": %s", path,
                               off + done, r == 0 ? "file shrank" : strerror(errno));
            break;
        }
        if (pace != NULL) st = pace->fn(pace->ctx, (size_t)r);
        done += (size_t)r;
    }
    close(fd);
    if (st == DCR_OK) *got_p = (size_t)want;
    return st;
}

/* ---- listing ------------------------------------------------------------- */

typedef struct dir_walk {
    dcr_objstore_entry_t *v;
    size_t n, cap;
    const char *prefix;
    const char *start;
    dcr_status_t st;
} dir_walk_t;

/* Adds the names under ROOT/rel (rel "" or ending in '/', open as fd, which
 * the walk closes) whose keys begin with the prefix and sort after start,
 * without their sizes: a page stats only the entries it returns
 * (dir_list). Recurses into directories that can hold such keys, never
 * through a link; the file type comes from readdir where the file system
 * gives it. */
static void dir_walk(dirstore_t *s, dir_walk_t *w, int fd, const char *rel)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    size_t plen = strlen(w->prefix);
    struct dirent *de;
    while (w->st == DCR_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue; /* ., .., uploads in progress, the marker */
        char key[DCR_OBJSTORE_KEY_MAX + 2];
        if (snprintf(key, sizeof key, "%s%s", rel, de->d_name) > DCR_OBJSTORE_KEY_MAX) continue;
        size_t klen = strlen(key);
        /* A key can still match once it is at least as long as the prefix. */
        if (strncmp(key, w->prefix, klen < plen ? klen : plen) != 0) continue;
        unsigned char type = de->d_type;
        if (type == DT_UNKNOWN) {
            struct stat sb;
            if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
            type = S_ISDIR(sb.st_mode) ? DT_DIR : S_ISREG(sb.st_mode) ? DT_REG : DT_UNKNOWN;
        }
        if (type == DT_DIR) {
            key[klen] = '/';
            key[klen + 1] = '\0';
            /* Every key in it starts with key: none sorts after a start
             * whose first klen + 1 bytes already sort after key. */
            bool after = w->start[0] == '\0' || strncmp(w->start, key, klen + 1) <= 0;
            int sub =
                after && klen + 1 <= DCR_OBJSTORE_KEY_MAX
                    ? openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    : -1;
            if (sub >= 0) dir_walk(s, w, sub, key);
            continue;
        }
        if (type != DT_REG || klen < plen || !dcr_objstore_key_ok(key)) continue;
        if (w->start[0] != '\0' && strcmp(key, w->start) <= 0) continue;
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 64;
            dcr_objstore_entry_t *v = realloc(w->v, cap * sizeof *v);
            if (v == NULL) {
                w->st = dcr_error_set(DCR_ENOMEM, "object store dir: listing %s/%s", s->root, rel);
                break;
            }
            w->v = v;
            w->cap = cap;
        }
        memcpy(w->v[w->n++].key, key, klen + 1);
    }
    closedir(d);
}

static int dir_entry_cmp(const void *a, const void *b)
{
    return strcmp(((const dcr_objstore_entry_t *)a)->key, ((const dcr_objstore_entry_t *)b)->key);
}

/* Size and version of ROOT/e->key; false when it is no longer a regular
 * file (removed or replaced since the readdir). */
static bool dir_stat_entry(const dirstore_t *s, dcr_objstore_entry_t *e)
{
    const char *leaf = NULL;
    int dfd = dir_open_parent(s, e->key, false, &leaf);
    if (dfd < 0) return false;
    struct stat sb;
    int rc = fstatat(dfd, leaf, &sb, AT_SYMLINK_NOFOLLOW);
    close(dfd);
    if (rc != 0 || !S_ISREG(sb.st_mode)) return false;
    e->size = (uint64_t)sb.st_size;
    snprintf(e->version, sizeof e->version, "%ju-%jd-%ld", (uintmax_t)sb.st_ino,
             (intmax_t)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    return true;
}

static dcr_status_t dir_list(dcr_objstore_t *o, const char *prefix, const char *start,
                             size_t max_keys, dcr_objstore_page_t *page)
{
    dirstore_t *s = (dirstore_t *)o;
    dir_walk_t w = {.prefix = prefix, .start = start, .st = DCR_OK};
    /* Start at the deepest directory the prefix names whole. */
    char rel[DCR_OBJSTORE_KEY_MAX + 1];
    snprintf(rel, sizeof rel, "%s", prefix);
    char *slash = strrchr(rel, '/');
    if (slash != NULL)
        slash[1] = '\0';
    else
        rel[0] = '\0';
    /* A prefix whose folder is missing, or is a link, lists nothing. */
    int fd = dir_open_parent(s, rel, false, NULL);
    if (fd >= 0) dir_walk(s, &w, fd, rel);
    if (w.st != DCR_OK) {
        free(w.v);
        return w.st;
    }
    if (w.n > 1) qsort(w.v, w.n, sizeof *w.v, dir_entry_cmp);
    /* Stat in key order until the page is full; a key removed since the
     * readdir is dropped, as a listing a moment later would not show it. */
    size_t kept = 0, i = 0;
    for (; i < w.n && kept < max_keys; i++)
        if (dir_stat_entry(s, &w.v[i]) && kept++ != i) w.v[kept - 1] = w.v[i];
    page->next[0] = '\0';
    if (i < w.n && kept > 0) snprintf(page->next, sizeof page->next, "%s", w.v[kept - 1].key);
    page->entries = w.v;
    page->n = kept;
    return DCR_OK;
}

static dcr_status_t dir_del(dcr_objstore_t *o, const char *key)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    dir_path(s, key, path, sizeof path, NULL);
    /* unlinkat in the key's own folder, reached without following a link:
     * a link named like a key is removed itself, a link where a folder
     * belongs stops the delete, and nothing outside the store is touched. */
    const char *leaf = NULL;
    int dfd = dir_open_parent(s, key, false, &leaf);
    int rc = dfd < 0 ? -1 : unlinkat(dfd, leaf, 0);
    int e = errno;
    if (dfd >= 0) close(dfd);
    if (rc != 0 && e != ENOENT) {
        return dcr_error_set(DCR_EIO, "object store dir: removing %s: %s", path, dir_walk_error(e));
    }
    /* Directories exist only to hold keys: drop the ones left empty (a
     * failing rmdir means another key, or an upload, is still there). */
    char rel[DCR_OBJSTORE_KEY_MAX + 1];
    snprintf(rel, sizeof rel, "%s", key);
    for (char *slash; (slash = strrchr(rel, '/')) != NULL;) {
        *slash = '\0';
        dfd = dir_open_parent(s, rel, false, &leaf);
        rc = dfd < 0 ? -1 : unlinkat(dfd, leaf, AT_REMOVEDIR);
        if (dfd >= 0) close(dfd);
        if (rc != 0) break;
    }
    return DCR_OK;
}

/* The calling thread's watch (created unarmed at its first wait); NULL when
 * out of memory. Each is used by its owner thread only, so only the table
 * is locked. */
static dir_watch_t *dir_watch_of_thread(dirstore_t *s)
{
    pthread_t self = pthread_self();
    dir_watch_t *w = NULL;
    pthread_mutex_lock(&s->watch_mu);
    for (size_t i = 0; i < s->nwatches && w == NULL; i++)
        if (pthread_equal(s->watches[i]->owner, self)) w = s->watches[i];
    if (w == NULL && s->nwatches == s->capwatches) {
        size_t cap = s->capwatches ? 2 * s->capwatches : 8;
        dir_watch_t **v = realloc(s->watches, cap * sizeof *v);
        if (v != NULL) {
            s->watches = v;
            s->capwatches = cap;
        }
    }
    if (w == NULL && s->nwatches < s->capwatches && (w = calloc(1, sizeof *w)) != NULL) {
        w->owner = self;
        w->fd = w->wd = -1;
        s->watches[s->nwatches++] = w;
    }
    pthread_mutex_unlock(&s->watch_mu);
    return w;
}

/* Arms w on the directory holding the prefix's keys for publications
 * (rename) and removals; while it does not exist yet, on its nearest
 * existing ancestor for the creation (on_target false: the next wait arms
 * again, to move down once the directory exists). The new watch is added
 * before the old one is removed, and the old one's queued events are told
 * apart by their watch descriptor (dir_watch_drain). */
static void dir_watch_arm(const dirstore_t *s, dir_watch_t *w, const char *prefix)
{
    if (w->fd < 0) w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    int old_wd = w->wd;
    snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
    w->wd = -1;
    w->on_target = false;
    w->stale = false;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    snprintf(path, sizeof path, "%s/%s", s->root, prefix);
    size_t rootlen = strlen(s->root);
    uint32_t mask = IN_MOVED_TO | IN_DELETE; /* not IN_CREATE: uploads in progress */
    const uint32_t never_a_link = IN_DONT_FOLLOW | IN_ONLYDIR;
    for (char *slash = strrchr(path, '/'); w->fd >= 0 && slash != NULL; mask = IN_CREATE) {
        *slash = '\0';
        w->wd = inotify_add_watch(w->fd, path, mask | never_a_link);
        if (w->wd >= 0 || (size_t)(slash - path) <= rootlen) break;
        slash = strrchr(path, '/');
    }
    w->on_target = w->wd >= 0 && mask != IN_CREATE;
    /* The same directory watched again keeps its descriptor (new mask). */
    if (old_wd >= 0 && old_wd != w->wd) inotify_rm_watch(w->fd, old_wd);
}

/* Empties w's event queue. Events of an earlier watch (queued before it
 * was removed, and its own IN_IGNORED) are skipped; an IN_IGNORED of the
 * current one (the watched directory was removed, as dir_del does to an
 * emptied one) makes the next wait arm again. */
static void dir_watch_drain(dir_watch_t *w)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(w->fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->wd == w->wd && (ev->mask & (IN_IGNORED | IN_DELETE_SELF))) w->stale = true;
            p += sizeof *ev + ev->len;
        }
    }
}

/* The calling thread's watch stays armed between calls on the same prefix,
 * so a change made between two calls wakes the second at once. A watch that
 * moves down from an ancestor to the prefix's directory (created since the
 * last call) reports a change at once: what was published there before the
 * watch moved raised no event on it (the first payload of an attempt creates
 * the attempt's folder and lands in it a moment later; its publication was
 * otherwise found only by the caller's next backup listing, up to 20 ms
 * later in `dcr bench`). */
static dcr_status_t dir_wait_change(dcr_objstore_t *o, const char *prefix, int timeout_ms)
{
    dirstore_t *s = (dirstore_t *)o;
    dir_watch_t *w = dir_watch_of_thread(s);
    if (w != NULL && (w->wd < 0 || !w->on_target || w->stale || strcmp(w->prefix, prefix) != 0)) {
        bool below = w->wd >= 0 && !w->on_target && strcmp(w->prefix, prefix) == 0;
        dir_watch_arm(s, w, prefix);
        if (below && w->on_target) return DCR_OK;
    }
    if (w == NULL || w->wd < 0) {
        usleep((useconds_t)timeout_ms * 1000);
        return DCR_ETIMEOUT;
    }
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    if (r > 0) dir_watch_drain(w);
    return r > 0 ? DCR_OK : DCR_ETIMEOUT;
}

const dcr_objstore_ops_t dcr__objstore_dir_ops = {
    .hdr = {.version = DCR_OBJSTORE_OPS_VERSION, .name = "dir"},
    .props = {.change_notify = true, .consistent_list = true, .ranged_get = true},
    .claims = dir_claims,
    .create = dir_create,
    .put = dir_put,
    .get = dir_get,
    .list = dir_list,
    .del = dir_del,
    .wait_change = dir_wait_change,
    .destroy = dir_destroy,
};
