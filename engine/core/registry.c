/* The one registry of backend ops tables that transport, control plane,
 * object store, group and loader share (core-internal.h): the lookup, the
 * duplicate check and the bound live here once. */
#include <stdio.h>
#include <string.h>

#include "core-internal.h"

/* The name of a table, read from the header it starts with. */
static const char *dcr__registry_name(const void *ops)
{
    return ((const dcr_ops_header_t *)ops)->name;
}

/* Table i, the lock held. */
static const void *dcr__registry_at_locked(const dcr__registry_t *r, size_t i)
{
    if (i < r->n_builtin) return r->builtin[i];
    return i - r->n_builtin < r->n_registered ? r->registered[i - r->n_builtin] : NULL;
}

static const void *dcr__registry_find_locked(const dcr__registry_t *r, const char *name)
{
    const void *ops = NULL;
    for (size_t i = 0; (ops = dcr__registry_at_locked(r, i)) != NULL; i++)
        if (strcmp(dcr__registry_name(ops), name) == 0) return ops;
    return NULL;
}

const void *dcr__registry_at(dcr__registry_t *r, size_t i)
{
    pthread_mutex_lock(&r->lock);
    const void *ops = dcr__registry_at_locked(r, i);
    pthread_mutex_unlock(&r->lock);
    return ops;
}

size_t dcr__registry_count(dcr__registry_t *r)
{
    pthread_mutex_lock(&r->lock);
    size_t n = r->n_builtin + r->n_registered;
    pthread_mutex_unlock(&r->lock);
    return n;
}

const void *dcr__registry_find(dcr__registry_t *r, const char *name)
{
    if (name == NULL) return NULL;
    pthread_mutex_lock(&r->lock);
    const void *ops = dcr__registry_find_locked(r, name);
    pthread_mutex_unlock(&r->lock);
    return ops;
}

dcr_status_t dcr__registry_add(dcr__registry_t *r, const void *ops)
{
    const char *name = dcr__registry_name(ops);
    dcr_status_t st = DCR_OK;
    pthread_mutex_lock(&r->lock);
    /* Looked up under the lock: two threads registering one name race. */
    const void *have = dcr__registry_find_locked(r, name);
    if (have == ops) {
        /* the same table again: nothing to do */
    } else if (have != NULL) {
        st = dcr_error_set(DCR_EINVAL, "%s %s is already registered", r->kind, name);
    } else if (r->n_registered == DCR__REGISTRY_MAX) {
        st = dcr_error_set(DCR_EINVAL, "%s %s: registry full (%d backends)", r->kind, name,
                           DCR__REGISTRY_MAX);
    } else {
        r->registered[r->n_registered++] = ops;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

dcr_status_t dcr__registry_not_found(dcr__registry_t *r, const char *name)
{
    char known[512] = "";
    size_t at = 0;
    const void *ops = NULL;
    for (size_t i = 0; at < sizeof known && (ops = dcr__registry_at(r, i)) != NULL; i++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "",
                               dcr__registry_name(ops));
    return dcr_error_set(DCR_ENOTFOUND, "%s '%s' does not exist (known: %s)", r->kind,
                         name != NULL ? name : "(null)", known);
}
