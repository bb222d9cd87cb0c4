/* A process-wide request to stop blocking engine calls.
 *
 * The engine installs no signal handler (the harness does, in
 * workloads/harness/interrupt.h); a handler that wants the engine's own
 * waits to end calls dcr_cancel_request, which is async-signal-safe. Calls
 * that can block on a peer for long (every HTTP request of the S3 object
 * store and the etcd control plane) check the request about once a second
 * and return DCR_EINTR, and refuse to start while it stands. */
#ifndef DCR_CANCEL_H
#define DCR_CANCEL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Asks every blocking engine call that watches the request to stop.
 * Async-signal-safe (one atomic store); safe from any thread. */
void dcr_cancel_request(void);

/* Whether a stop was requested and not reset since. */
bool dcr_cancel_requested(void);

/* Withdraws the request (a process that goes on after handling a stop). */
void dcr_cancel_reset(void);

#ifdef __cplusplus
}
#endif
#endif
