/* Resident parameters of one receiver, found by name (hash) or by storage
 * (address) through the core map. */
#include <stdlib.h>
#include <string.h>

#include "dcr/hash.h"
#include "dcr/map.h"
#include "dcr/storage_large.h"
#include "loader-internal.h"

struct dcr_params {
    bool shape_only;
    dcr_param_t *items;
    size_t len, cap;
    dcr_map_t by_name;    /* hash of name -> index (hashes may collide) */
    dcr_map_t by_storage; /* storage address -> index */
    size_t bytes;
    bool placed; /* data lives in a caller's arena (dcr_params_place) */
};

dcr_status_t dcr_params_create(bool shape_only, dcr_params_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "params_create: out_p is NULL");
    dcr_params_t *p = calloc(1, sizeof(*p));
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "params: allocation failed");
    p->shape_only = shape_only;
    *out_p = p;
    return DCR_OK;
}

void dcr_params_destroy(dcr_params_t *p)
{
    if (p == NULL) return;
    for (size_t i = 0; i < p->len; i++) {
        free((char *)p->items[i].name);
        if (p->shape_only || p->placed)
            free(p->items[i].storage); /* the arena is the caller's */
        else
            dcr_storage_destroy(p->items[i].storage);
    }
    free(p->items);
    dcr_map_free(&p->by_name);
    dcr_map_free(&p->by_storage);
    free(p);
}

/* Storage with a size but no data, for shape-only sets. */
static dcr_status_t dcr__phantom_storage(size_t bytes, dcr_storage_t **out_p)
{
    dcr_storage_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "phantom storage: allocation failed");
    s->bytes = bytes;
    *out_p = s;
    return DCR_OK;
}

typedef struct dcr__name_key {
    const dcr_params_t *p;
    const char *name;
} dcr__name_key_t;

static int dcr__name_match(uint64_t idx, const void *arg)
{
    const dcr__name_key_t *a = arg;
    return strcmp(a->p->items[idx].name, a->name) == 0;
}

int64_t dcr_params_find(const dcr_params_t *p, const char *name)
{
    if (p == NULL || name == NULL) return -1;
    dcr__name_key_t a = {p, name};
    uint64_t idx;
    if (!dcr_map_get(&p->by_name, dcr_hash64_str(name), dcr__name_match, &a, &idx)) return -1;
    return (int64_t)idx;
}

int64_t dcr_params_find_storage(const dcr_params_t *p, const dcr_storage_t *storage)
{
    if (p == NULL || storage == NULL) return -1;
    /* Storage addresses are unique, so the key alone decides. */
    uint64_t idx;
    if (!dcr_map_get(&p->by_storage, (uint64_t)(uintptr_t)storage, NULL, NULL, &idx)) return -1;
    return (int64_t)idx;
}

static dcr_status_t dcr__params_check(const dcr_params_t *p, const char *name, dcr_dtype_t dtype,
                                      int ndim, const int64_t *shape)
{
    if (name == NULL || name[0] == '\0') return dcr_error_set(DCR_EINVAL, "parameter: empty name");
    if ((unsigned)dtype >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "parameter %s: invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > DCR_MAX_DIMS || (ndim > 0 && shape == NULL))
        return dcr_error_set(DCR_EINVAL, "parameter %s: rank %d outside [0, %d]", name, ndim,
                             DCR_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return dcr_error_set(DCR_EINVAL, "parameter %s: dim %d is %lld (expected > 0)", name, i,
                                 (long long)shape[i]);
    }
    if (dcr_params_find(p, name) >= 0)
        return dcr_error_set(DCR_EINVAL, "parameter %s declared twice", name);
    return DCR_OK;
}

dcr_status_t dcr_params_declare(dcr_params_t *p, const char *name, dcr_dtype_t dtype, int ndim,
                                const int64_t *shape, size_t *index_p)
{
    if (p == NULL) return dcr_error_set(DCR_EINVAL, "params_declare: NULL set");
    if (p->placed)
        return dcr_error_set(DCR_EINVAL, "parameter %s: declared after the set was placed",
                             name ? name : "?");
    DCR_CHECK(dcr__params_check(p, name, dtype, ndim, shape));
    if (p->len == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        dcr_param_t *items = realloc(p->items, cap * sizeof(*items));
        if (items == NULL) return dcr_error_set(DCR_ENOMEM, "params: allocation failed");
        p->items = items;
        p->cap = cap;
    }
    dcr_param_t *it = &p->items[p->len];
    memset(it, 0, sizeof(*it));
    size_t bytes = (size_t)dcr_shape_numel(ndim, shape) * dcr_dtype_size(dtype);
    char *copy = strdup(name);
    if (copy == NULL) return dcr_error_set(DCR_ENOMEM, "parameter %s: allocation failed", name);
    dcr_status_t st = p->shape_only ? dcr__phantom_storage(bytes, &it->storage)
                                    : dcr_storage_create_large(bytes, &it->storage);
    if (st != DCR_OK) {
        free(copy);
        dcr_error_prefix("parameter %s: ", name);
        return st;
    }
    it->name = copy;
    it->dtype = dtype;
    it->ndim = ndim;
    for (int i = 0; i < ndim; i++) it->shape[i] = shape[i];
    st = dcr_map_add(&p->by_name, dcr_hash64_str(name), p->len);
    if (st == DCR_OK) st = dcr_map_add(&p->by_storage, (uint64_t)(uintptr_t)it->storage, p->len);
    if (st != DCR_OK) {
        /* A half-indexed entry must not stay findable by name. */
        free(copy);
        if (p->shape_only)
            free(it->storage);
        else
            dcr_storage_destroy(it->storage);
        dcr_map_free(&p->by_name);
        for (size_t i = 0; i < p->len; i++)
            (void)dcr_map_add(&p->by_name, dcr_hash64_str(p->items[i].name), i);
        return st;
    }
    if (index_p) *index_p = p->len;
    p->len++;
    p->bytes += bytes;
    return DCR_OK;
}

size_t dcr_params_count(const dcr_params_t *p)
{
    return p ? p->len : 0;
}

const dcr_param_t *dcr_params_at(const dcr_params_t *p, size_t i)
{
    return (p && i < p->len) ? &p->items[i] : NULL;
}

dcr_status_t dcr_params_view(const dcr_params_t *p, size_t i, dcr_view_t *out_p)
{
    if (p == NULL || i >= p->len || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "params_view: parameter %zu out of range", i);
    const dcr_param_t *it = &p->items[i];
    return dcr_view_contiguous(it->storage, it->dtype, it->ndim, it->shape, out_p);
}

size_t dcr_params_bytes(const dcr_params_t *p)
{
    return p ? p->bytes : 0;
}

size_t dcr_params_arena_bytes(const dcr_params_t *p)
{
    size_t off = 0;
    for (size_t i = 0; p && i < p->len; i++)
        off = dcr_params_align_up(off) + p->items[i].storage->bytes;
    return dcr_params_align_up(off);
}

/* Walks the placement offsets, copying each parameter out to the arena
 * (out) or in from it. */
static void arena_copy(const dcr_params_t *p, uint8_t *arena, bool out)
{
    size_t off = 0;
    for (size_t i = 0; p && i < p->len; i++) {
        dcr_storage_t *st = p->items[i].storage;
        off = dcr_params_align_up(off);
        if (st->bytes && out) memcpy(arena + off, st->data, st->bytes);
        if (st->bytes && !out) memcpy(st->data, arena + off, st->bytes);
        off += st->bytes;
    }
}

void dcr_params_arena_copy_out(const dcr_params_t *p, void *arena)
{
    arena_copy(p, arena, true);
}

void dcr_params_arena_copy_in(const dcr_params_t *p, const void *arena)
{
    arena_copy(p, (uint8_t *)arena, false);
}

dcr_status_t dcr_params_place(dcr_params_t *p, void *arena, size_t len, bool copy)
{
    if (p == NULL || (arena == NULL && p->len > 0))
        return dcr_error_set(DCR_EINVAL, "params_place: NULL argument");
    if (p->shape_only)
        return dcr_error_set(DCR_EINVAL, "params_place: a shape-only set has no data to place");
    if ((uintptr_t)arena % DCR_PARAMS_ALIGN != 0)
        return dcr_error_set(DCR_EINVAL, "params_place: arena not aligned to %zu bytes",
                             DCR_PARAMS_ALIGN);
    size_t need = dcr_params_arena_bytes(p);
    if (len < need)
        return dcr_error_set(DCR_EINVAL, "params_place: arena of %zu bytes, expected at least %zu",
                             len, need);
    uint8_t *base = arena;
    size_t off = 0;
    for (size_t i = 0; i < p->len; i++) {
        dcr_storage_t *s = p->items[i].storage;
        off = dcr_params_align_up(off);
        if (copy && s->bytes) memmove(base + off, s->data, s->bytes);
        /* The set's own buffer goes; one already in an arena is not ours. */
        if (!p->placed) free(s->data);
        s->data = base + off;
        off += s->bytes;
    }
    p->placed = true;
    return DCR_OK;
}

bool dcr_params_placed(const dcr_params_t *p)
{
    return p && p->placed;
}
