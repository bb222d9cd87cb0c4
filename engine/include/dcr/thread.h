/* Engine threads: named, so that ps -L, top -H, perf (--sort comm) and gdb
 * say what each one does, and accounted, so that a run can tell how much
 * CPU each role of a refit spent (dcr bench reports it per refit). */
#ifndef DCR_THREAD_H
#define DCR_THREAD_H

#include <pthread.h>
#include <stdbool.h>

#include "dcr/status.h"

typedef enum dcr_thread_role {
    DCR_THREAD_OWNER,     /* detection, projection, encoding, compression */
    DCR_THREAD_NODE,      /* a rollout node's receivers: verify, decode, apply */
    DCR_THREAD_TRANSPORT, /* senders, relay hops, object-store downloads */
    DCR_THREAD_ROLES
} dcr_thread_role_t;

/* Starts fn(arg) on a new thread named from a printf format (Linux keeps
 * 15 characters). When fn returns, the thread's CPU time is added to its
 * role's total. Returns 0 or the errno value of pthread_create. */
int dcr_thread_start(pthread_t *t, dcr_thread_role_t role, void *(*fn)(void *), void *arg,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A thread whose function returns a status: the status and its detail reach
 * the joiner, where a plain pthread would lose the detail with the thread's
 * thread-local storage. Zero-initialize it; the fields are private. */
typedef struct dcr_thread {
    pthread_t id;
    dcr_status_t (*fn)(void *arg);
    void *arg;
    dcr_error_t err; /* fn's result, written by the thread, read after the join */
    bool started;
} dcr_thread_t;

/* Starts fn(arg) as dcr_thread_start does, on *t (which must stay put until
 * dcr_thread_join). Returns 0 or the errno value of pthread_create; on
 * failure *t is not started and dcr_thread_join returns DCR_OK. */
int dcr_thread_run(dcr_thread_t *t, dcr_thread_role_t role, dcr_status_t (*fn)(void *arg),
                   void *arg, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Waits for *t to end and returns fn's status, whose detail becomes the
 * calling thread's (dcr_error_restore). DCR_OK for a thread never started
 * or already joined, so teardown may call it unconditionally. */
dcr_status_t dcr_thread_join(dcr_thread_t *t);

/* CPU seconds spent by every engine thread of each role that has ended,
 * since the process started. Threads still running are not counted yet:
 * read it when the threads of what you measure have been joined. */
void dcr_thread_cpu(double out[DCR_THREAD_ROLES]);

#endif
