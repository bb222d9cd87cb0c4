/* Engine threads: named, so that ps -L, top -H, perf (--sort comm) and gdb
 * say what each one does, and accounted, so that a run can tell how much
 * CPU each role of a refit spent (dcr bench reports it per refit). */
#ifndef DCR_THREAD_H
#define DCR_THREAD_H

#include <pthread.h>

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

/* CPU seconds spent by every engine thread of each role that has ended,
 * since the process started. Threads still running are not counted yet:
 * read it when the threads of what you measure have been joined. */
void dcr_thread_cpu(double out[DCR_THREAD_ROLES]);

#endif
