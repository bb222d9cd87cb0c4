/* The canonical inventory: every tensor of a checkpoint as named, shaped and
 * typed in its Hugging Face form, in a fixed order (the order the builder
 * emitted). Both sides agree on it: owners project into it, receivers prewarm
 * from it, payload items name tensors in it. Model-agnostic: workloads/ builds
 * one from a model config. */
#ifndef DCR_INVENTORY_H
#define DCR_INVENTORY_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"
#include "dcr/tensor.h"

typedef struct dcr_inventory dcr_inventory_t;

dcr_status_t dcr_inventory_create(dcr_inventory_t **out_p);
/* Frees the inventory and every name it holds; accepts NULL. */
void dcr_inventory_destroy(dcr_inventory_t *inv);

/* Most tensors an inventory holds: 1 << 19 (524,288), about seven times the
 * largest public checkpoint (Kimi K2: 61 layers x 384 experts x 3 projections,
 * about 70,000 tensors). A builder estimates its count from the model config
 * and refuses a larger model before it adds the first tensor; the inventory
 * refuses the tensor past the bound in any case, so no builder can make it
 * grow without limit (each tensor costs a descriptor and its name). */
#define DCR_INVENTORY_TENSORS_MAX (1 << 19)

/* Appends a tensor (the name is copied). Fails with DCR_EINVAL on a duplicate
 * name, an empty name, a non-positive dimension, more than DCR_MAX_DIMS dims
 * or a tensor past DCR_INVENTORY_TENSORS_MAX. */
dcr_status_t dcr_inventory_add(dcr_inventory_t *inv, const char *name, dcr_dtype_t dtype, int ndim,
                               const int64_t *shape);

size_t dcr_inventory_count(const dcr_inventory_t *inv);
/* The i-th tensor; valid while the inventory lives and is not appended to. */
const dcr_tensor_desc_t *dcr_inventory_at(const dcr_inventory_t *inv, size_t i);
/* Index of the tensor with this name, or -1. O(1) expected. */
int64_t dcr_inventory_find(const dcr_inventory_t *inv, const char *name);

/* Sum of element counts / bytes over all tensors. */
int64_t dcr_inventory_params(const dcr_inventory_t *inv);
int64_t dcr_inventory_bytes(const dcr_inventory_t *inv);
/* Largest single tensor in bytes (receivers size their scratch by it). */
size_t dcr_inventory_max_tensor_bytes(const dcr_inventory_t *inv);

#endif
