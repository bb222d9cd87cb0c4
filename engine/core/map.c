/* Open addressing with linear probing, grown to keep the load at most one
 * half, so probe runs stay short; no deletion, hence no tombstones. Slots
 * hash through the splitmix64 finalizer because keys are often addresses or
 * small integers whose low bits alone would cluster. Equal keys sit on one
 * probe run in insertion order, which dcr_map_get relies on. */
#include "dcr/map.h"

#include <stdlib.h>
#include <string.h>

#include "dcr/hash.h"

void dcr_map_free(dcr_map_t *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof(*m));
}

void dcr_map_clear(dcr_map_t *m)
{
    if (m->len == 0) return;
    memset(m->used, 0, m->cap);
    m->len = 0;
}

static size_t dcr__map_home(uint64_t key, size_t cap)
{
    return (size_t)dcr_hash64_mix(key) & (cap - 1);
}

/* The first free slot on key's probe run. */
static size_t dcr__map_free_slot(const dcr_map_t *m, uint64_t key)
{
    size_t j = dcr__map_home(key, m->cap);
    while (m->used[j]) j = (j + 1) & (m->cap - 1);
    return j;
}

static dcr_status_t dcr__map_grow(dcr_map_t *m)
{
    dcr_map_t n = {0};
    n.cap = m->cap ? 2 * m->cap : 64;
    n.keys = malloc(n.cap * sizeof(*n.keys));
    n.vals = malloc(n.cap * sizeof(*n.vals));
    n.used = calloc(n.cap, 1);
    if (n.keys == NULL || n.vals == NULL || n.used == NULL) {
        dcr_map_free(&n);
        return dcr_error_set(DCR_ENOMEM, "hash map of %zu slots: allocation failed", n.cap);
    }
    /* Reinserting in slot order would reorder equal keys that wrapped
     * around the end; walking each run from its start keeps their order. */
    size_t start = 0;
    while (start < m->cap && m->used[start]) start++;
    for (size_t k = 0; k < m->cap; k++) {
        size_t i = (start + k) & (m->cap - 1);
        if (!m->used[i]) continue;
        size_t j = dcr__map_free_slot(&n, m->keys[i]);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.len++;
    }
    dcr_map_free(m);
    *m = n;
    return DCR_OK;
}

static dcr_status_t dcr__map_room(dcr_map_t *m)
{
    if (2 * (m->len + 1) > m->cap) return dcr__map_grow(m);
    return DCR_OK;
}

dcr_status_t dcr_map_add(dcr_map_t *m, uint64_t key, uint64_t val)
{
    DCR_CHECK(dcr__map_room(m));
    size_t j = dcr__map_free_slot(m, key);
    m->used[j] = 1;
    m->keys[j] = key;
    m->vals[j] = val;
    m->len++;
    return DCR_OK;
}

bool dcr_map_get(const dcr_map_t *m, uint64_t key, int (*match)(uint64_t val, const void *arg),
                 const void *arg, uint64_t *val_p)
{
    if (m->cap == 0) return false;
    for (size_t j = dcr__map_home(key, m->cap); m->used[j]; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] != key || (match && !match(m->vals[j], arg))) continue;
        if (val_p) *val_p = m->vals[j];
        return true;
    }
    return false;
}

dcr_status_t dcr_map_upsert(dcr_map_t *m, uint64_t key, uint64_t init, uint64_t **val_p,
                            bool *added_p)
{
    DCR_CHECK(dcr__map_room(m));
    size_t j = dcr__map_home(key, m->cap);
    for (; m->used[j]; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] != key) continue;
        *val_p = &m->vals[j];
        *added_p = false;
        return DCR_OK;
    }
    m->used[j] = 1;
    m->keys[j] = key;
    m->vals[j] = init;
    m->len++;
    *val_p = &m->vals[j];
    *added_p = true;
    return DCR_OK;
}
