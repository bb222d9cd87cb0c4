/* Shared by the injector (faults.c) and the faulty backends that carry its
 * faults into the engine (faulty_transport.c, faulty_objstore.c,
 * faulty_control.c, faulty_group.c); not part of faults/'s public
 * interface. */
#ifndef DCR_FAULTY_INTERNAL_H
#define DCR_FAULTY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "dcr/status.h"
#include "faults/faults.h"

/* Name prefix of every faulty backend ("faulty:objstore", "faulty:s3://B/P"). */
#define DCR__FAULTY_PREFIX     "faulty:"
#define DCR__FAULTY_PREFIX_LEN 7

/* The injector bound now (dcr_faults_bind), or NULL: a faulty backend takes
 * it once, at create. */
dcr_faults_t *dcr__faults_bound(void);

/* Consumes one matching event of `kind` at `target`; true (and the fault in
 * *out) when an armed fault fires on it. f may be NULL (never fires). */
bool dcr__faults_fire(dcr_faults_t *f, dcr_fault_kind_t kind, int target, dcr_fault_t *out);
/* The two halves of dcr__faults_fire, for a fault that can fail to happen
 * (a duplicate whose copy cannot be allocated): take consumes the armed
 * fault without counting it; happened counts it (dcr_faults_counts) once it
 * did its damage. f may be NULL. */
bool dcr__faults_take(dcr_faults_t *f, dcr_fault_kind_t kind, int target, dcr_fault_t *out);
void dcr__faults_happened(dcr_faults_t *f, dcr_fault_kind_t kind);

/* One call reaching the control plane: fires control_down and
 * control_busy, and answers DCR_ECONTROL while the control plane is down,
 * or sleeps while it is busy. */
dcr_status_t dcr__faults_control_call(dcr_faults_t *f);

void dcr__faults_sleep_ms(int ms);

/* DCR_OK, or the refusal every control-plane call of a crashed coordinator
 * meets until the crash is taken (dcr_faults_take_crash). */
dcr_status_t dcr__faults_dead(dcr_faults_t *f);
/* Fires a coordinator crash armed for `step`: from then on f is dead (the
 * refusal is returned); DCR_OK when none fires. */
dcr_status_t dcr__faults_crash(dcr_faults_t *f, dcr_coord_step_t step);

/* Fires a receiver kill of `kind` (kill_delivery, kill_apply, kill_acked)
 * armed for `receiver`, or for any receiver on rollout node `node`: the
 * receiver's gate slot is marked dead (dcr_gate_kill). Nothing happens
 * without a rollout side (dcr_faults_set_rollout) or for a receiver already
 * dead. */
void dcr__faults_kill(dcr_faults_t *f, dcr_fault_kind_t kind, int receiver);
void dcr__faults_kill_on_node(dcr_faults_t *f, dcr_fault_kind_t kind, int node);

/* Passes an event to the harness's watcher, if any (f may be NULL). */
void dcr__faults_event(dcr_faults_t *f, dcr_faults_event_t ev, int who, uint64_t tau);

/* One family of faulty backends (a faulty_*.c): the tables it registers,
 * one per backend of the engine's registry that is not faulty itself, each
 * named "faulty:<name>"; the names are kept here for the process (the
 * registries borrow them). */
#define DCR__FAULTY_MAX 16
typedef struct dcr__faulty_family {
    const char *what;                      /* "transports", for the error line */
    const char *(*backend_name)(size_t i); /* the registry's i-th name; NULL past the end */
    bool (*registered)(const char *name);  /* whether the registry knows name already */
    /* Fills the family's table k, named `name`, wrapping `parent`, and
     * registers it. */
    dcr_status_t (*add)(int k, const char *name, const char *parent);
    pthread_mutex_t lock;
    char names[DCR__FAULTY_MAX][64];
    int count;
} dcr__faulty_family_t;

/* Adds a table for every backend without a faulty twin yet (idempotent,
 * thread-safe); DCR_EINVAL past DCR__FAULTY_MAX. */
dcr_status_t dcr__faulty_register_family(dcr__faulty_family_t *fam);

/* Registration of each family of faulty backends. */
dcr_status_t dcr__faulty_transport_register(void);
dcr_status_t dcr__faulty_objstore_register(void);
dcr_status_t dcr__faulty_control_register(void);
dcr_status_t dcr__faulty_group_register(void);

#endif
