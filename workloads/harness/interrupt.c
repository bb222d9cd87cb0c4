/* Stop signals (workloads/harness/interrupt.h): a flag, a self-pipe and a fixed
 * table of paths a second signal removes. The table is static and each slot
 * is published with an atomic state, so the handler never reads a path that
 * is being written. */
#include "workloads/harness/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dcr/cancel.h"
#include "dcr/log.h"
#include "dcr/outpath.h"

#define DCR__CLEANUP_SLOTS 32

enum { SLOT_FREE, SLOT_BUSY, SLOT_READY };

static struct {
    atomic_int state;
    char path[PATH_MAX];
} dcr__cleanup[DCR__CLEANUP_SLOTS];

static volatile sig_atomic_t dcr__signal;
static atomic_int dcr__installed;
static int dcr__pipe[2] = {-1, -1};

static void dcr__handler(int sig)
{
    int saved = errno;
    if (dcr__signal) {
        /* The second signal: the user does not want to wait. */
        for (int i = 0; i < DCR__CLEANUP_SLOTS; i++)
            if (atomic_load(&dcr__cleanup[i].state) == SLOT_READY)
                dcr_outpath_remove_tree(dcr__cleanup[i].path);
        _exit(128 + sig);
    }
    dcr__signal = sig;
    dcr_cancel_request(); /* engine waits on peers (S3, etcd) end too */
    if (dcr__pipe[1] >= 0) {
        char c = 1;
        ssize_t n = write(dcr__pipe[1], &c, 1);
        (void)n;
    }
    errno = saved;
}

void dcr_interrupt_install(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&dcr__installed, &expected, 1)) return;
    if (pipe2(dcr__pipe, O_CLOEXEC | O_NONBLOCK) != 0) dcr__pipe[0] = dcr__pipe[1] = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dcr__handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    /* One handler at a time: a second signal must see the first's flag. */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

bool dcr_interrupted(void)
{
    return dcr__signal != 0;
}

int dcr_interrupt_signal(void)
{
    return dcr__signal;
}

dcr_status_t dcr_interrupt_check(const char *where)
{
    int sig = dcr__signal;
    if (!sig) return DCR_OK;
    /* The run stops here: its own cleanup (removing store objects) may make
     * requests again. A second signal still exits at once. */
    dcr_cancel_reset();
    return dcr_error_set(DCR_EINTR, "%s stopped by %s; temporary files removed", where,
                         sig == SIGINT    ? "SIGINT"
                         : sig == SIGTERM ? "SIGTERM"
                         : sig == SIGHUP  ? "SIGHUP"
                                          : "a signal");
}

int dcr_interrupt_fd(void)
{
    return dcr__pipe[0];
}

void dcr_interrupt_cleanup_add(const char *path)
{
    if (!path || strlen(path) >= PATH_MAX) return;
    for (int i = 0; i < DCR__CLEANUP_SLOTS; i++) {
        int expected = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&dcr__cleanup[i].state, &expected, SLOT_BUSY)) continue;
        snprintf(dcr__cleanup[i].path, sizeof(dcr__cleanup[i].path), "%s", path);
        atomic_store(&dcr__cleanup[i].state, SLOT_READY);
        return;
    }
    DCR_LOG_WARN("interrupt: more than %d temporary paths; %s is not removed by a second signal",
                 DCR__CLEANUP_SLOTS, path);
}

void dcr_interrupt_cleanup_remove(const char *path)
{
    if (!path) return;
    for (int i = 0; i < DCR__CLEANUP_SLOTS; i++) {
        int expected = SLOT_READY;
        if (!atomic_compare_exchange_strong(&dcr__cleanup[i].state, &expected, SLOT_BUSY)) continue;
        bool match = !strcmp(dcr__cleanup[i].path, path);
        atomic_store(&dcr__cleanup[i].state, match ? SLOT_FREE : SLOT_READY);
        if (match) return;
    }
}

int dcr_interrupt_exit_status(int sig)
{
    return 128 + sig;
}
