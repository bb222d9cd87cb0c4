/* Shared between the control-plane wrapper and its built-in backends; not part
 * of the public interface. */
#ifndef DCR_CONTROL_INTERNAL_H
#define DCR_CONTROL_INTERNAL_H

#include <stdbool.h>

#include "dcr/control.h"

/* Built-in backends, listed in the registry of control.c. */
extern const dcr_control_ops_t dcr__control_sqlite_ops;
extern const dcr_control_ops_t dcr__control_etcd_ops;

/* True if id is a usable coordinator id: 1..DCR_CONTROL_ID_MAX-1 printable
 * ASCII characters. Backends also apply it to ids they read back. */
bool dcr__control_id_valid(const char *id);

/* The control plane's clock: wall-clock nanoseconds since the epoch, because
 * deadlines and commit times are compared across processes and machines
 * (the seed assumes coordinators and control plane clock-synchronized). */
int64_t dcr__control_now_ns(void);

/* The "commit record changed" refusal (DCR_ECONFLICT) both backends give
 * when a compare-and-set or commit finds another record than expected;
 * where names the control plane (path or address). */
dcr_status_t dcr__control_record_changed(const char *where, const dcr_commit_record_t *now);

/* The commit checks every backend makes on what it read of attempt tau (a,
 * already known to be the latest) and the record (cur), in this order, so
 * that backends answer a failure alike: the attempt's coordinator is the
 * committing one (fencing first: a replaced coordinator learns that before
 * anything else), the record is still expected (the compare-and-set
 * condition), a was prepared from cur's version, and now (the control
 * plane's clock) is not past a's deadline. The acknowledgments are the
 * backend's to check after these. DCR_ECONFLICT or DCR_ETIMEOUT, one line
 * starting with where. */
dcr_status_t dcr__control_commit_check(const char *where, const char *coordinator, uint64_t tau,
                                       const dcr_control_attempt_t *a,
                                       const dcr_commit_record_t *expected,
                                       const dcr_commit_record_t *cur, int64_t now);

#endif
