/* Helpers shared between engine/core files; not part of the public interface. */
#ifndef DCR_CORE_INTERNAL_H
#define DCR_CORE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/dtype.h"
#include "dcr/ops.h"
#include "dcr/status.h"

/* One element of `dtype` at p (any alignment, little-endian) as FP32 bits. */
uint32_t dcr__dtype_load_f32bits(dcr_dtype_t dtype, const void *p);
/* Rounds FP32 bits into one element of `dtype` at p (any alignment). */
void dcr__dtype_store_f32bits(dcr_dtype_t dtype, void *p, uint32_t f32bits);

/* A registry of backend ops tables (transport, control plane, object store,
 * group, loader): tables compiled in, in a fixed order, then tables
 * registered at run time, appended and never removed, so a table found once
 * stays valid for the process. Every table starts with a dcr_ops_header_t
 * (dcr/ops.h), where the registry reads its name. Every function is
 * thread-safe. */
#define DCR__REGISTRY_MAX 64
typedef struct dcr__registry {
    pthread_mutex_t lock;
    const char *kind;           /* what a table is, for messages: "transport" */
    const void *const *builtin; /* tables compiled in */
    size_t n_builtin;
    const void *registered[DCR__REGISTRY_MAX];
    size_t n_registered;
} dcr__registry_t;
/* A static registry of tables over `builtin` (an array of n_ `const void
 * *const`, each a table of the kind, which starts with its header; NULL with
 * n_ 0). */
#define DCR__REGISTRY_INIT(kind_, builtin_, n_)                                                    \
    {                                                                                              \
        .lock = PTHREAD_MUTEX_INITIALIZER, .kind = (kind_), .builtin = (builtin_),                 \
        .n_builtin = (n_)                                                                          \
    }

/* Table i: built-in ones first, then registered ones in registration order;
 * NULL past the end. */
const void *dcr__registry_at(dcr__registry_t *r, size_t i);
/* Number of tables (built-in and registered). */
size_t dcr__registry_count(dcr__registry_t *r);
/* The table named `name`; NULL when none (or name is NULL). */
const void *dcr__registry_find(dcr__registry_t *r, const char *name);
/* Appends ops (borrowed; its slots already checked by the caller): the same
 * table again is a no-op; another table under a taken name, or a full
 * registry, is DCR_EINVAL with a message naming r->kind. */
dcr_status_t dcr__registry_add(dcr__registry_t *r, const void *ops);
/* DCR_ENOTFOUND with a message naming `name` and every table's name. */
dcr_status_t dcr__registry_not_found(dcr__registry_t *r, const char *name);

#endif
