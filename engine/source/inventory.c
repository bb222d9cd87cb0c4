/* The canonical inventory: an append-only array of tensor descriptors plus an
 * open-addressing index from name to position, so that lookups by name (every
 * payload item, every loader call) stay O(1) however large the model is. */
#include "dcr/inventory.h"

#include <stdlib.h>
#include <string.h>

#include "dcr/hash.h"

#define DCR_INVENTORY_MIN_SLOTS 64

struct dcr_inventory {
    dcr_tensor_desc_t *descs;
    size_t count;
    size_t capacity;
    /* Index + 1 of the tensor whose name hashes here, 0 when empty. The table
     * is a power of two and kept at most half full, so probes stay short. */
    size_t *slots;
    size_t slot_count;
    int64_t params;
    int64_t bytes;
    size_t max_tensor_bytes;
};

dcr_status_t dcr_inventory_create(dcr_inventory_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "inventory: out pointer is NULL");
    dcr_inventory_t *inv = calloc(1, sizeof(*inv));
    if (inv == NULL) return dcr_error_set(DCR_ENOMEM, "inventory: out of memory");
    inv->slots = calloc(DCR_INVENTORY_MIN_SLOTS, sizeof(*inv->slots));
    if (inv->slots == NULL) {
        free(inv);
        return dcr_error_set(DCR_ENOMEM, "inventory: out of memory");
    }
    inv->slot_count = DCR_INVENTORY_MIN_SLOTS;
    *out_p = inv;
    return DCR_OK;
}

void dcr_inventory_destroy(dcr_inventory_t *inv)
{
    if (inv == NULL) return;
    for (size_t i = 0; i < inv->count; i++) free(inv->descs[i].name);
    free(inv->descs);
    free(inv->slots);
    free(inv);
}

/* Slot holding `name`, or the empty slot where it would go. */
static size_t dcr__inventory_probe(const dcr_inventory_t *inv, const char *name, uint64_t hash)
{
    size_t mask = inv->slot_count - 1;
    size_t pos = (size_t)hash & mask;
    while (inv->slots[pos] != 0) {
        if (strcmp(inv->descs[inv->slots[pos] - 1].name, name) == 0) return pos;
        pos = (pos + 1) & mask;
    }
    return pos;
}

static dcr_status_t dcr__inventory_rehash(dcr_inventory_t *inv, size_t slot_count)
{
    size_t *slots = calloc(slot_count, sizeof(*slots));
    if (slots == NULL) return dcr_error_set(DCR_ENOMEM, "inventory: out of memory");
    free(inv->slots);
    inv->slots = slots;
    inv->slot_count = slot_count;
    for (size_t i = 0; i < inv->count; i++) {
        const char *name = inv->descs[i].name;
        inv->slots[dcr__inventory_probe(inv, name, dcr_hash64_str(name))] = i + 1;
    }
    return DCR_OK;
}

/* Makes room for one more tensor in both the array and the index. */
static dcr_status_t dcr__inventory_reserve(dcr_inventory_t *inv)
{
    if (inv->count == inv->capacity) {
        size_t capacity = inv->capacity ? inv->capacity * 2 : 64;
        dcr_tensor_desc_t *descs = realloc(inv->descs, capacity * sizeof(*descs));
        if (descs == NULL) return dcr_error_set(DCR_ENOMEM, "inventory: out of memory");
        inv->descs = descs;
        inv->capacity = capacity;
    }
    if ((inv->count + 1) * 2 > inv->slot_count) {
        DCR_CHECK(dcr__inventory_rehash(inv, inv->slot_count * 2));
    }
    return DCR_OK;
}

/* Validates the shape and computes its element count without overflowing. */
static dcr_status_t dcr__inventory_check_shape(const char *name, dcr_dtype_t dtype, int ndim,
                                               const int64_t *shape, int64_t *numel_p)
{
    if ((int)dtype < 0 || dtype >= DCR_DTYPE_COUNT) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: unknown dtype %d", name,
                             (int)dtype);
    }
    if (ndim < 0 || ndim > DCR_MAX_DIMS || (ndim > 0 && shape == NULL)) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: %d dims (expected 0..%d)", name,
                             ndim, DCR_MAX_DIMS);
    }
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0) {
            return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: dim %d is %lld (expected > 0)",
                                 name, d, (long long)shape[d]);
        }
        if (numel > INT64_MAX / shape[d]) {
            return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: element count overflows", name);
        }
        numel *= shape[d];
    }
    if (numel > INT64_MAX / (int64_t)dcr_dtype_size(dtype)) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: byte size overflows", name);
    }
    *numel_p = numel;
    return DCR_OK;
}

dcr_status_t dcr_inventory_add(dcr_inventory_t *inv, const char *name, dcr_dtype_t dtype, int ndim,
                               const int64_t *shape)
{
    if (inv == NULL) return dcr_error_set(DCR_EINVAL, "inventory: NULL inventory");
    if (name == NULL || name[0] == '\0') {
        return dcr_error_set(DCR_EINVAL, "inventory: empty tensor name");
    }
    if (inv->count >= DCR_INVENTORY_TENSORS_MAX) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: more than %d tensors", name,
                             DCR_INVENTORY_TENSORS_MAX);
    }
    int64_t numel = 0;
    DCR_CHECK(dcr__inventory_check_shape(name, dtype, ndim, shape, &numel));
    int64_t bytes = numel * (int64_t)dcr_dtype_size(dtype);
    if (inv->params > INT64_MAX - numel || inv->bytes > INT64_MAX - bytes) {
        return dcr_error_set(DCR_EINVAL, "inventory: tensor %s: total size overflows", name);
    }
    uint64_t hash = dcr_hash64_str(name);
    if (inv->slots[dcr__inventory_probe(inv, name, hash)] != 0) {
        return dcr_error_set(DCR_EINVAL, "inventory: duplicate tensor name %s", name);
    }
    DCR_CHECK(dcr__inventory_reserve(inv));
    char *copy = strdup(name);
    if (copy == NULL) return dcr_error_set(DCR_ENOMEM, "inventory: out of memory");

    dcr_tensor_desc_t *desc = &inv->descs[inv->count];
    memset(desc, 0, sizeof(*desc));
    desc->name = copy;
    desc->dtype = dtype;
    desc->ndim = ndim;
    for (int d = 0; d < ndim; d++) desc->shape[d] = shape[d];
    /* Probe again: a rehash in reserve may have moved the empty slot. */
    inv->slots[dcr__inventory_probe(inv, name, hash)] = inv->count + 1;
    inv->count++;
    inv->params += numel;
    inv->bytes += bytes;
    if ((uint64_t)bytes > inv->max_tensor_bytes) inv->max_tensor_bytes = (size_t)bytes;
    return DCR_OK;
}

size_t dcr_inventory_count(const dcr_inventory_t *inv)
{
    return inv ? inv->count : 0;
}

const dcr_tensor_desc_t *dcr_inventory_at(const dcr_inventory_t *inv, size_t i)
{
    if (inv == NULL || i >= inv->count) return NULL;
    return &inv->descs[i];
}

int64_t dcr_inventory_find(const dcr_inventory_t *inv, const char *name)
{
    if (inv == NULL || name == NULL) return -1;
    size_t slot = inv->slots[dcr__inventory_probe(inv, name, dcr_hash64_str(name))];
    return slot == 0 ? -1 : (int64_t)(slot - 1);
}

int64_t dcr_inventory_params(const dcr_inventory_t *inv)
{
    return inv ? inv->params : 0;
}

int64_t dcr_inventory_bytes(const dcr_inventory_t *inv)
{
    return inv ? inv->bytes : 0;
}

size_t dcr_inventory_max_tensor_bytes(const dcr_inventory_t *inv)
{
    return inv ? inv->max_tensor_bytes : 0;
}
