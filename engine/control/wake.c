/* A wake file: the change notification of a control plane kept in a file
 * (control-internal.h). Writers poke the file after each committed change
 * (they touch its times: an IN_ATTRIB event); waiters sleep on an inotify
 * watch of it. The poke comes after the commit, so a waiter that wakes and
 * reads again sees the change. Why not the writes themselves: SQLite
 * writes a commit's frames to its WAL before it syncs them and publishes
 * them in the WAL index, so a waiter woken by the writes (IN_MODIFY) would
 * often read before the change is visible and then sleep through it. A
 * poke that no waiter sees (another thread of the handle drained it, the
 * file was replaced) only costs that waiter its own timeout, which the
 * backend keeps short (its fallback period). */
#include "control-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* inotify events of a poke (new times) and of the file going away (after
 * which the watch is dead and is set up again at the next sleep). */
#define WAKE_EVENTS (IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW)

/* Tests: pokes of this process are dropped (lost notifications). */
static atomic_bool wake_suppressed;

void dcr__wake_suppress_pokes(bool suppressed)
{
    atomic_store(&wake_suppressed, suppressed);
}

dcr_status_t dcr__wake_init(dcr__wake_t *w, const char *store_path)
{
    memset(w, 0, sizeof *w);
    w->ino_fd = w->wd = -1;
    size_t n = strlen(store_path);
    w->path = malloc(n + sizeof DCR__WAKE_SUFFIX);
    if (w->path == NULL) return dcr_error_set(DCR_ENOMEM, "%s: wake file name", store_path);
    memcpy(w->path, store_path, n);
    memcpy(w->path + n, DCR__WAKE_SUFFIX, sizeof DCR__WAKE_SUFFIX);
    return pthread_mutex_init(&w->mu, NULL) == 0
               ? DCR_OK
               : dcr_error_set(DCR_ENOMEM, "%s: wake file lock", store_path);
}

void dcr__wake_fini(dcr__wake_t *w)
{
    if (w->path == NULL) return;
    if (w->ino_fd >= 0) close(w->ino_fd);
    pthread_mutex_destroy(&w->mu);
    free(w->path);
    w->path = NULL;
}

void dcr__wake_poke(dcr__wake_t *w)
{
    if (atomic_load(&wake_suppressed)) return;
    /* The file's times to now: an IN_ATTRIB for every watcher, its bytes
     * untouched. A failed poke is a lost notification. */
    (void)utimensat(AT_FDCWD, w->path, NULL, AT_SYMLINK_NOFOLLOW);
}

/* Sets up the watch if it is not (lock held); false when it cannot be. */
static bool wake_watch_locked(dcr__wake_t *w)
{
    if (w->ino_fd < 0) w->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ino_fd < 0) return false;
    if (w->wd >= 0) return true;
    w->wd = inotify_add_watch(w->ino_fd, w->path, WAKE_EVENTS);
    return w->wd >= 0;
}

/* Reads every queued event; a dead watch is noted for the next sleep. */
static void wake_drain(dcr__wake_t *w)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ino_fd, buf, sizeof buf);
        if (n <= 0) return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) {
                pthread_mutex_lock(&w->mu);
                if (ev->wd == w->wd && w->wd >= 0) {
                    inotify_rm_watch(w->ino_fd, w->wd);
                    w->wd = -1;
                }
                pthread_mutex_unlock(&w->mu);
            }
            p += sizeof *ev + ev->len;
        }
    }
}

int dcr__wake_sleep(dcr__wake_t *w, int timeout_ms)
{
    pthread_mutex_lock(&w->mu);
    bool watching = wake_watch_locked(w);
    int fd = w->ino_fd;
    pthread_mutex_unlock(&w->mu);
    if (!watching) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, timeout_ms);
    if (rc > 0) wake_drain(w);
    if (rc < 0 && errno == EINTR) return 2;
    return rc > 0 ? 1 : 0;
}
