/* Stopping a run on SIGINT, SIGTERM or SIGHUP without leaving anything
 * behind.
 *
 * The handler does only what is safe in a signal handler: on the first
 * signal it sets a flag and writes a byte to a pipe; the run checks the flag
 * at safe points (between refits, between campaign cases, while waiting for
 * a forked simulation), unwinds through its ordinary cleanup and the command
 * exits 128 + the signal's number. A second signal does not wait: it removes
 * every folder or file registered with dcr_interrupt_cleanup_add (system
 * calls only, no allocation) and exits at once.
 *
 * This is the harness's policy (workloads/, faults/, sim/, reports/ and the
 * CLI); the engine never installs a handler. */
#ifndef DCR_WORKLOADS_INTERRUPT_H
#define DCR_WORKLOADS_INTERRUPT_H

#include <stdbool.h>

#include "dcr/status.h"

/* Installs the handlers (idempotent). Blocking calls are restarted
 * (SA_RESTART), so code that never checks the flag behaves as before. */
void dcr_interrupt_install(void);

/* Whether a stop signal has arrived. Cheap; safe from any thread. */
bool dcr_interrupted(void);

/* The first stop signal's number, 0 when none arrived. */
int dcr_interrupt_signal(void);

/* DCR_EINTR with one line naming the signal when one arrived (`where` says
 * what was stopped), else DCR_OK: `DCR_CHECK(dcr_interrupt_check("bench"))`. */
dcr_status_t dcr_interrupt_check(const char *where);

/* A descriptor that becomes readable when a stop signal arrives, for poll(). */
int dcr_interrupt_fd(void);

/* Registers a path (copied) for removal by a second signal; at most 32 at a
 * time (more are ignored, with a warning). */
void dcr_interrupt_cleanup_add(const char *path);

/* Unregisters a path added before (the run removed it or keeps it). */
void dcr_interrupt_cleanup_remove(const char *path);

/* The exit status for a run stopped by signal sig: 128 + sig. */
int dcr_interrupt_exit_status(int sig);

#endif
