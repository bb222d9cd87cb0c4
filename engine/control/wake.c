/* Wake files: the change notification of a control plane kept in a file
 * (control-internal.h). Writers poke the file of each kind of change they
 * committed (they touch its times: an IN_ATTRIB event); waiters sleep on
 * inotify watches of the files of what they wait for. The poke comes
 * after the commit, so a waiter that wakes and reads again sees the
 * change. Why not the writes themselves: SQLite
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

/* The files of the kinds of change, in bit order (control-internal.h). */
static const char *const wake_suffix[DCR__WAKE_KINDS] = {"-wal", "-shm"};

dcr_status_t dcr__wake_init(dcr__wake_t *w, const char *store_path)
{
    memset(w, 0, sizeof *w);
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        return dcr_error_set(DCR_ENOMEM, "%s: wake file lock", store_path);
    size_t n = strlen(store_path);
    for (int k = 0; k < DCR__WAKE_KINDS; k++) {
        w->ino_fd[k] = w->wd[k] = -1;
        size_t m = strlen(wake_suffix[k]) + 1;
        w->path[k] = malloc(n + m);
        if (w->path[k] == NULL) {
            for (int j = 0; j < k; j++) free(w->path[j]);
            memset(w->path, 0, sizeof w->path);
            pthread_mutex_destroy(&w->mu);
            return dcr_error_set(DCR_ENOMEM, "%s: wake file name", store_path);
        }
        memcpy(w->path[k], store_path, n);
        memcpy(w->path[k] + n, wake_suffix[k], m);
    }
    return DCR_OK;
}

void dcr__wake_fini(dcr__wake_t *w)
{
    if (w->path[0] == NULL) return;
    for (int k = 0; k < DCR__WAKE_KINDS; k++) {
        if (w->ino_fd[k] >= 0) close(w->ino_fd[k]);
        free(w->path[k]);
        w->path[k] = NULL;
    }
    pthread_mutex_destroy(&w->mu);
}

void dcr__wake_poke(dcr__wake_t *w, unsigned changed)
{
    if (atomic_load(&wake_suppressed)) return;
    /* The file's times to now: an IN_ATTRIB for every watcher, its bytes
     * untouched. A failed poke is a lost notification. */
    for (int k = 0; k < DCR__WAKE_KINDS; k++)
        if (changed & (1u << k)) (void)utimensat(AT_FDCWD, w->path[k], NULL, AT_SYMLINK_NOFOLLOW);
}

/* Sets up the watch of kind k if it is not (lock held); false when it
 * cannot be. */
static bool wake_watch_locked(dcr__wake_t *w, int k)
{
    if (w->ino_fd[k] < 0) w->ino_fd[k] = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ino_fd[k] < 0) return false;
    if (w->wd[k] >= 0) return true;
    w->wd[k] = inotify_add_watch(w->ino_fd[k], w->path[k], WAKE_EVENTS);
    return w->wd[k] >= 0;
}

/* Reads every queued event of kind k; a dead watch is noted for the next
 * sleep. */
static void wake_drain(dcr__wake_t *w, int k)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ino_fd[k], buf, sizeof buf);
        if (n <= 0) return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) {
                pthread_mutex_lock(&w->mu);
                if (ev->wd == w->wd[k] && w->wd[k] >= 0) {
                    inotify_rm_watch(w->ino_fd[k], w->wd[k]);
                    w->wd[k] = -1;
                }
                pthread_mutex_unlock(&w->mu);
            }
            p += sizeof *ev + ev->len;
        }
    }
}

int dcr__wake_sleep(dcr__wake_t *w, unsigned what, int timeout_ms)
{
    struct pollfd p[DCR__WAKE_KINDS];
    int kind[DCR__WAKE_KINDS], n = 0;
    pthread_mutex_lock(&w->mu);
    bool watching = true;
    for (int k = 0; k < DCR__WAKE_KINDS && watching; k++) {
        if (!(what & (1u << k))) continue;
        watching = wake_watch_locked(w, k);
        p[n] = (struct pollfd){.fd = w->ino_fd[k], .events = POLLIN};
        kind[n++] = k;
    }
    pthread_mutex_unlock(&w->mu);
    if (!watching || n == 0) return -1;
    int rc = poll(p, (nfds_t)n, timeout_ms);
    for (int i = 0; rc > 0 && i < n; i++)
        if (p[i].revents) wake_drain(w, kind[i]);
    if (rc < 0 && errno == EINTR) return 2;
    return rc > 0 ? 1 : 0;
}
