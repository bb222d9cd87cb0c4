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
 * Properties: listings are consistent (readdir after rename), ranged reads
 * are pread, and change notification is inotify on the prefix's directory
 * where the kernel offers it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/objstore-internal.h"

typedef struct dirstore {
    dcr_objstore_t pub;
    char *root;
    atomic_uint seq; /* temporary names */
} dirstore_t;

static bool dir_claims(const char *url)
{
    return strncmp(url, "dir:", 4) == 0 || strstr(url, "://") == NULL;
}

static const char *dir_path_of(const char *url)
{
    return strncmp(url, "dir:", 4) == 0 ? url + 4 : url;
}

static dcr_status_t dir_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return dcr_error_set(DCR_EINVAL, "object store dir: path too long: %s", path);
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            return dcr_error_set(DCR_EIO, "object store dir: cannot create directory %s: %s", buf,
                                 strerror(errno));
        }
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return dcr_error_set(DCR_EIO, "object store dir: %s is not a directory", path);
    }
    return DCR_OK;
}

static dcr_status_t dir_create(const dcr_objstore_config_t *cfg, dcr_objstore_t **out_p)
{
    const char *path = dir_path_of(cfg->url);
    if (path[0] == '\0')
        return dcr_error_set(DCR_EINVAL, "object store '%s': expected dir:PATH with a path",
                             cfg->url);
    dirstore_t *s = calloc(1, sizeof *s);
    if (s == NULL || (s->root = strdup(path)) == NULL) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "object store dir: allocation failed");
    }
    dcr_status_t st = dir_mkdirs(s->root);
    if (st != DCR_OK) {
        free(s->root);
        free(s);
        return st;
    }
    *out_p = &s->pub;
    return DCR_OK;
}

static void dir_destroy(dcr_objstore_t *o)
{
    dirstore_t *s = (dirstore_t *)o;
    free(s->root);
    free(s);
}

/* ROOT/key into out; the parent directory's length into *dirlen_p. */
static void dir_path(const dirstore_t *s, const char *key, char *out, size_t cap, size_t *dirlen_p)
{
    int n = snprintf(out, cap, "%s/%s", s->root, key);
    if (dirlen_p != NULL) {
        const char *slash = strrchr(out, '/');
        *dirlen_p = (size_t)(slash - out);
    }
    (void)n;
}

static dcr_status_t dir_put(dcr_objstore_t *o, const char *key, const uint8_t *buf, size_t len,
                            const dcr_objstore_pace_t *pace)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX], tmp[sizeof path + 64];
    size_t dl;
    dir_path(s, key, path, sizeof path, &dl);
    path[dl] = '\0';
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%d-%u", path, path + dl + 1, (int)getpid(),
             atomic_fetch_add(&s->seq, 1));
    int fd = -1;
    /* A delete of the directory's last key removes the directory (dir_del):
     * one that runs between mkdirs and open makes open fail; again. */
    for (int i = 0; i < 3 && fd < 0; i++) {
        DCR_CHECK(dir_mkdirs(path));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != ENOENT) break;
    }
    path[dl] = '/';
    if (fd < 0) {
        return dcr_error_set(DCR_EIO, "object store dir: cannot create %s: %s", tmp,
                             strerror(errno));
    }
    dcr_status_t st = DCR_OK;
    for (size_t off = 0; off < len && st == DCR_OK;) {
        size_t n = len - off < DCR_OBJSTORE_PACE_CHUNK ? len - off : DCR_OBJSTORE_PACE_CHUNK;
        if (pace != NULL && (st = pace->fn(pace->ctx, n)) != DCR_OK) break;
        ssize_t w = write(fd, buf + off, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            st = dcr_error_set(DCR_EIO, "object store dir: writing %s: %s", tmp, strerror(errno));
        else
            off += (size_t)w;
    }
    if (close(fd) != 0 && st == DCR_OK) {
        st = dcr_error_set(DCR_EIO, "object store dir: closing %s: %s", tmp, strerror(errno));
    }
    if (st == DCR_OK && rename(tmp, path) != 0) {
        st = dcr_error_set(DCR_EIO, "object store dir: publishing %s: %s", path, strerror(errno));
    }
    if (st != DCR_OK) unlink(tmp);
    return st;
}

static dcr_status_t dir_get(dcr_objstore_t *o, const char *key, uint64_t off, uint64_t len,
                            uint8_t *dst, size_t cap, size_t *got_p,
                            const dcr_objstore_pace_t *pace)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    dir_path(s, key, path, sizeof path, NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* never a planted link */
    if (fd < 0) {
        return dcr_error_set(errno == ENOENT ? DCR_ENOTFOUND : DCR_EIO, "object store dir: %s: %s",
                             path, strerror(errno));
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

/* Adds the files under ROOT/rel (rel "" or ending in '/') whose keys begin
 * with the prefix and sort after start; recurses into directories that can
 * hold such keys. */
static void dir_walk(dirstore_t *s, dir_walk_t *w, const char *rel)
{
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    snprintf(path, sizeof path, "%s/%s", s->root, rel);
    DIR *d = opendir(path);
    if (d == NULL) return;
    size_t plen = strlen(w->prefix);
    struct dirent *de;
    while (w->st == DCR_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue; /* ., .., uploads in progress */
        char key[DCR_OBJSTORE_KEY_MAX + 2];
        if (snprintf(key, sizeof key, "%s%s", rel, de->d_name) > DCR_OBJSTORE_KEY_MAX) continue;
        size_t klen = strlen(key);
        /* A key can still match once it is at least as long as the prefix. */
        if (strncmp(key, w->prefix, klen < plen ? klen : plen) != 0) continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            key[klen] = '/';
            key[klen + 1] = '\0';
            if (klen + 1 <= DCR_OBJSTORE_KEY_MAX) dir_walk(s, w, key);
            continue;
        }
        if (!S_ISREG(sb.st_mode) || klen < plen || !dcr_objstore_key_ok(key)) continue;
        if (w->start[0] != '\0' && strcmp(key, w->start) <= 0) continue;
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 64;
            dcr_objstore_entry_t *v = realloc(w->v, cap * sizeof *v);
            if (v == NULL) {
                w->st = dcr_error_set(DCR_ENOMEM, "object store dir: listing %s", path);
                break;
            }
            w->v = v;
            w->cap = cap;
        }
        dcr_objstore_entry_t *e = &w->v[w->n++];
        memcpy(e->key, key, klen + 1);
        e->size = (uint64_t)sb.st_size;
        snprintf(e->version, sizeof e->version, "%ju-%jd-%ld", (uintmax_t)sb.st_ino,
                 (intmax_t)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    }
    closedir(d);
}

static int dir_entry_cmp(const void *a, const void *b)
{
    return strcmp(((const dcr_objstore_entry_t *)a)->key, ((const dcr_objstore_entry_t *)b)->key);
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
    dir_walk(s, &w, rel);
    if (w.st != DCR_OK) {
        free(w.v);
        return w.st;
    }
    if (w.n > 1) qsort(w.v, w.n, sizeof *w.v, dir_entry_cmp);
    page->next[0] = '\0';
    if (w.n > max_keys) {
        w.n = max_keys;
        snprintf(page->next, sizeof page->next, "%s", w.v[max_keys - 1].key);
    }
    page->entries = w.v;
    page->n = w.n;
    return DCR_OK;
}

static dcr_status_t dir_del(dcr_objstore_t *o, const char *key)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    size_t dl;
    dir_path(s, key, path, sizeof path, &dl);
    if (unlink(path) != 0 && errno != ENOENT) {
        return dcr_error_set(DCR_EIO, "object store dir: removing %s: %s", path, strerror(errno));
    }
    /* Directories exist only to hold keys: drop the ones left empty (a
     * failing rmdir means another key, or an upload, is still there). */
    size_t rootlen = strlen(s->root);
    while (dl > rootlen) {
        path[dl] = '\0';
        if (rmdir(path) != 0) break;
        char *slash = strrchr(path, '/');
        dl = (size_t)(slash - path);
    }
    return DCR_OK;
}

/* Watches the directory holding the prefix's keys for publications
 * (rename) and removals; while it does not exist yet, its nearest existing
 * ancestor for the creation. A change between two calls is not seen:
 * callers back notification up with a bounded listing interval. */
static dcr_status_t dir_wait_change(dcr_objstore_t *o, const char *prefix, int timeout_ms)
{
    dirstore_t *s = (dirstore_t *)o;
    char path[PATH_MAX + DCR_OBJSTORE_KEY_MAX];
    snprintf(path, sizeof path, "%s/%s", s->root, prefix);
    size_t rootlen = strlen(s->root);
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    bool watching = false;
    uint32_t mask = IN_MOVED_TO | IN_DELETE; /* not IN_CREATE: uploads in progress */
    for (char *slash = strrchr(path, '/'); fd >= 0 && slash != NULL; mask = IN_CREATE) {
        *slash = '\0';
        if (inotify_add_watch(fd, path, mask) >= 0) {
            watching = true;
            break;
        }
        if ((size_t)(slash - path) <= rootlen) break;
        slash = strrchr(path, '/');
    }
    if (!watching) {
        if (fd >= 0) close(fd);
        usleep((useconds_t)timeout_ms * 1000);
        return DCR_EAGAIN;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    close(fd);
    return r > 0 ? DCR_OK : DCR_EAGAIN;
}

const dcr_objstore_ops_t dcr__objstore_dir_ops = {
    .version = DCR_OBJSTORE_OPS_VERSION,
    .name = "dir",
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
