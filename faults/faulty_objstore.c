/* "faulty:<URL>" object stores: each wraps the store URL names (its
 * backend's table is "faulty:<backend>", e.g. "faulty:s3") and damages the
 * payload objects the objstore transport stores in it, by the faults of the
 * injector bound when it was created: a payload stored cut in half
 * (truncate_object), or acknowledged and absent (remove_object). Both act
 * through the wrapped store's own put and delete, so they hit a directory
 * and an S3 bucket alike. Other keys (manifests, the reference's objects)
 * and every other call pass through. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "dcr/objstore.h"
#include "faults/faulty_internal.h"

typedef struct faulty_store {
    dcr_objstore_t pub; /* first: the wrappers' header */
    dcr_objstore_t *inner;
    dcr_faults_t *f; /* NULL: every call passes through */
} faulty_store_t;

static faulty_store_t *fs(dcr_objstore_t *s)
{
    return (faulty_store_t *)s;
}

/* "faulty:<URL>" where the wrapped backend (the header's parent) claims
 * URL. */
static bool faulty_claims(const dcr_objstore_ops_t *self, const char *url)
{
    if (strncmp(url, DCR__FAULTY_PREFIX, DCR__FAULTY_PREFIX_LEN)) return false;
    const dcr_objstore_ops_t *p = self->hdr.parent;
    return p->claims(p, url + DCR__FAULTY_PREFIX_LEN);
}

static dcr_status_t faulty_create(const dcr_objstore_ops_t *self, const dcr_objstore_config_t *cfg,
                                  dcr_objstore_t **out_p)
{
    faulty_store_t *x = calloc(1, sizeof(*x));
    if (!x) return dcr_error_set(DCR_ENOMEM, "object store %s", cfg->url);
    x->f = dcr__faults_bound();
    dcr_objstore_config_t c = *cfg;
    c.url = cfg->url + DCR__FAULTY_PREFIX_LEN;
    dcr_status_t st = dcr_objstore_create(&c, &x->inner);
    if (st != DCR_OK) {
        free(x);
        dcr_error_prefix("%s: ", self->hdr.name);
        return st;
    }
    *out_p = &x->pub;
    return DCR_OK;
}

/* The owner of a payload key as the objstore transport names them
 * ("attempt-<tau>/payload-<owner>-<id>.dcrp"); -1 for any other key. */
static int payload_owner(const char *key)
{
    uint64_t tau = 0, id = 0;
    unsigned owner = 0;
    int end = 0;
    if (sscanf(key, "attempt-%" SCNu64 "/payload-%u-%" SCNu64 ".dcrp%n", &tau, &owner, &id, &end) !=
            3 ||
        end == 0 || key[end] != '\0')
        return -1;
    return (int)owner;
}

static dcr_status_t faulty_put(dcr_objstore_t *s, const char *key, const uint8_t *buf, size_t len,
                               const dcr_objstore_pace_t *pace)
{
    faulty_store_t *x = fs(s);
    int owner = x->f ? payload_owner(key) : -1;
    dcr_fault_t hit;
    if (owner >= 0 && dcr__faults_fire(x->f, DCR_FAULT_TRUNCATE_OBJECT, owner, &hit)) {
        dcr_status_t st = dcr_objstore_put(x->inner, key, buf, len / 2, pace);
        DCR_LOG_WARN("fault truncate_object: %s stored with %zu of its %zu bytes (%s)", key,
                     len / 2, len, st == DCR_OK ? "done" : "failed");
        return st;
    }
    if (owner >= 0 && dcr__faults_fire(x->f, DCR_FAULT_REMOVE_OBJECT, owner, &hit)) {
        /* Gone before any reader could list it (a delete after the put
         * would race with the nodes' downloads): the put is acknowledged,
         * and the key is absent, whatever the store held under it. */
        dcr_status_t st = dcr_objstore_delete(x->inner, key);
        DCR_LOG_WARN("fault remove_object: %s acknowledged but not stored (%s)", key,
                     st == DCR_OK ? "done" : "failed");
        return st;
    }
    return dcr_objstore_put(x->inner, key, buf, len, pace);
}

/* Through the wrapper that keeps the slot's range and capacity semantics. */
static dcr_status_t faulty_get(dcr_objstore_t *s, const char *key, uint64_t off, uint64_t len,
                               uint8_t *dst, size_t cap, size_t *got_p,
                               const dcr_objstore_pace_t *pace)
{
    return dcr_objstore_get_into(fs(s)->inner, key, off, len, dst, cap, got_p, pace);
}

static dcr_status_t faulty_list(dcr_objstore_t *s, const char *prefix, const char *start,
                                size_t max_keys, dcr_objstore_page_t *page)
{
    return dcr_objstore_list(fs(s)->inner, prefix, start, max_keys, page);
}

static dcr_status_t faulty_del(dcr_objstore_t *s, const char *key)
{
    return dcr_objstore_delete(fs(s)->inner, key);
}

static dcr_status_t faulty_wait_change(dcr_objstore_t *s, const char *prefix, int timeout_ms)
{
    return dcr_objstore_wait_change(fs(s)->inner, prefix, timeout_ms);
}

static void faulty_destroy(dcr_objstore_t *s)
{
    dcr_objstore_destroy(fs(s)->inner);
    free(s);
}

/* One table per wrapped backend, with its properties; the registry borrows
 * them for the process. */
static dcr_objstore_ops_t tables[DCR__FAULTY_MAX];

static dcr_status_t add_table(int k, const char *name, const char *parent)
{
    const dcr_objstore_ops_t *p = dcr_objstore_find(parent);
    tables[k] = (dcr_objstore_ops_t){
        .hdr = {.version = DCR_OBJSTORE_OPS_VERSION, .name = name, .parent = p},
        .props = p->props, /* what the wrapped store guarantees */
        .claims = faulty_claims,
        .create = faulty_create,
        .put = faulty_put,
        .get = faulty_get,
        .list = faulty_list,
        .del = faulty_del,
        .wait_change = faulty_wait_change,
        .destroy = faulty_destroy,
    };
    return dcr_objstore_register(&tables[k]);
}

static const char *name_at(size_t i)
{
    const dcr_objstore_ops_t *p = dcr_objstore_backend(i);
    return p ? p->hdr.name : NULL;
}

static bool registered(const char *name)
{
    return dcr_objstore_find(name) != NULL;
}

static dcr__faulty_family_t family = {"object stores",           name_at, registered, add_table,
                                      PTHREAD_MUTEX_INITIALIZER, {{0}},   0};

dcr_status_t dcr__faulty_objstore_register(void)
{
    return dcr__faulty_register_family(&family);
}
