/* Starting weights from a real checkpoint (dcr bench / construct --init).
 *
 * Synthetic N(0, 0.02) weights compress and change unlike trained ones;
 * --init CKPT takes the values of a safetensors checkpoint instead. The
 * scenario's model may be a slice of the checkpoint's: --layers keeps the
 * first layers (the other tensors are not read) and --scale shrinks every
 * tensor, which then takes the leading block of the checkpoint tensor (the
 * first rows and columns), so that values keep their real distribution. */
#ifndef DCR_WORKLOADS_CKPT_INIT_H
#define DCR_WORKLOADS_CKPT_INIT_H

#include "dcr/tensor.h"
#include "workloads/change/scenario.h"

/* Fills canonical[c] (one storage per inventory tensor) from the checkpoint
 * at path (file or directory, see dcr_checkpoint_open): every tensor of the
 * inventory must be in it with the same dtype and rank and no dimension
 * smaller than the inventory's; the leading block is copied. One error line
 * naming the checkpoint and the tensor otherwise. */
dcr_status_t dcr_ckpt_init_canonical(const dcr_scenario_t *sc, const char *path,
                                     dcr_storage_t *const *canonical);

#endif
