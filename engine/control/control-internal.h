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

#endif
