/* The training-side description the engine works from: source shards, the
 * conversion tasks that map them to canonical tensors, and their owners.
 *
 * This is data, not code (G3): workloads/ fills it from a model and a
 * parallel layout; engine/ never knows which model it holds. A source shard is
 * one distinct piece of training state (a Megatron parameter on one TP/EP
 * coordinate); data-parallel and TP replicas of it are bitwise identical and
 * are represented once, with their holder ranks. A task maps (part of) one
 * shard onto one canonical tensor:
 *
 *  - affine: a list of box maps; each copies a strided box of the shard to a
 *    strided box of the canonical tensor, elementwise, with the value map
 *    (identity when shard and canonical dtypes agree, a cast otherwise);
 *  - residual: the same box maps describe which canonical elements this shard
 *    contributes, but the canonical tensor is rebuilt whole by its
 *    residual-baseline owner and compared there (the mapping class is not
 *    supported for direct projection, or a conversion spreads one change).
 *
 * Every canonical element comes from exactly one task; padding elements of a
 * shard (vocabulary padding) belong to no task. */
#ifndef DCR_SOURCE_H
#define DCR_SOURCE_H

#include <stdint.h>

#include "dcr/inventory.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

/* One elementwise copy of a box: element e (multi-index over shape) goes from
 * shard flat index src_offset + sum(e_i * src_strides_i) to canonical flat
 * index dst_offset + sum(e_i * dst_strides_i). Axis order and transposes are
 * expressed by the strides. */
typedef struct dcr_box_map {
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
    int64_t src_offset;
    int64_t src_strides[DCR_MAX_DIMS];
    int64_t dst_offset;
    int64_t dst_strides[DCR_MAX_DIMS];
} dcr_box_map_t;

typedef enum dcr_task_kind {
    DCR_TASK_AFFINE = 0,
    DCR_TASK_RESIDUAL = 1,
} dcr_task_kind_t;

typedef struct dcr_source_shard {
    dcr_tensor_desc_t desc; /* training-side name (global layer numbers), local shape, dtype */
    int nholders;           /* ranks holding an identical copy (>= 1) */
    int *holders;           /* ascending rank numbers */
} dcr_source_shard_t;

typedef struct dcr_task {
    char *name; /* stable identity; its hash picks the owner */
    dcr_task_kind_t kind;
    const char *mapping; /* mapping class, static text: "column", "row", "qkv", ... */
    int shard;           /* index into the layout's shards */
    int canonical;       /* index into the inventory */
    int owner;           /* the one holder that compares this task's elements */
    int nmaps;
    dcr_box_map_t *maps;
} dcr_task_t;

/* A residual conversion that is not elementwise. The tasks of its input
 * tensor assemble it in assembled_dtype (the shards' dtype); the conversion
 * then computes the canonical tensor and its derived outputs from the whole
 * assembled tensor, so one source change can move many outputs. */
typedef enum dcr_conversion_kind {
    DCR_CONVERSION_NONE = 0,
    /* FP8 (e4m3) block quantization of a 2-D tensor: per block x block tile,
     * s = max|x| / 448 (1 for an all-zero tile), q = e4m3(x / s) in FP32
     * arithmetic, the FP32 inverse scales s in the derived tensor. */
    DCR_CONVERSION_FP8_BLOCK = 1,
} dcr_conversion_kind_t;

typedef struct dcr_conversion {
    dcr_conversion_kind_t kind;
    int block;                   /* FP8_BLOCK: tile edge (128) */
    int scale;                   /* FP8_BLOCK: canonical index of the FP32 inverse-scale tensor */
    dcr_dtype_t assembled_dtype; /* dtype the parts are assembled in */
} dcr_conversion_t;

typedef struct dcr_source_layout {
    const dcr_inventory_t *inventory; /* not owned; must outlive the layout */
    int world;                        /* training ranks */
    int nshards;
    dcr_source_shard_t *shards;
    int ntasks;
    dcr_task_t *tasks;
    /* Per canonical tensor: the rank that keeps its residual baseline and
     * assembles it, or -1 when all its tasks are affine. */
    int *residual_owner;
    /* Per canonical tensor: its conversion (kind NONE for elementwise ones).
     * A derived output (an FP8 scale tensor) has no tasks; derived_from names
     * the tensor whose conversion writes it, -1 otherwise. */
    dcr_conversion_t *conversions;
    int *derived_from;
} dcr_source_layout_t;

/* Empty layout over an inventory; shards and tasks are appended by builders. */
dcr_status_t dcr_source_layout_create(const dcr_inventory_t *inv, int world,
                                      dcr_source_layout_t **out_p);
/* Frees everything the layout holds; accepts NULL. */
void dcr_source_layout_destroy(dcr_source_layout_t *layout);

/* Appends a shard (desc name copied, holders copied and sorted); returns its index. */
dcr_status_t dcr_source_layout_add_shard(dcr_source_layout_t *layout, const char *name,
                                         dcr_dtype_t dtype, int ndim, const int64_t *shape,
                                         int nholders, const int *holders, int *out_index_p);
/* Appends a task (name and maps copied). The owner is chosen by
 * dcr_source_pick_owner over the shard's holders. */
dcr_status_t dcr_source_layout_add_task(dcr_source_layout_t *layout, const char *name,
                                        dcr_task_kind_t kind, const char *mapping, int shard,
                                        int canonical, int nmaps, const dcr_box_map_t *maps);

/* Declares that canonical tensor `canonical` (whose tasks must be residual)
 * is converted as a whole, and for FP8_BLOCK that conv->scale is its derived
 * scale tensor. Call before dcr_source_layout_finish. */
dcr_status_t dcr_source_layout_set_conversion(dcr_source_layout_t *layout, int canonical,
                                              const dcr_conversion_t *conv);

/* Runs the conversion of canonical tensor `canonical` over its assembled
 * input (contiguous, assembled dtype): writes the canonical tensor (its own
 * dtype) and, for FP8_BLOCK, the scale tensor. */
void dcr_conversion_apply(const dcr_source_layout_t *layout, int canonical, const void *assembled,
                          void *out, void *out_scale);

/* Fixes residual owners (canonical-name hash over all ranks; a derived
 * tensor goes with the tensor it derives from) and checks what is cheap at
 * any model size: every box inside its shard and canonical
 * tensor, non-negative strides, the task element counts of each canonical
 * tensor summing to its size, and a canonical tensor's tasks either all
 * affine or all residual. Builders call it last; a violation is DCR_ELAYOUT
 * naming the tensor. */
dcr_status_t dcr_source_layout_finish(dcr_source_layout_t *layout);

/* The exact check, one counter per element: every canonical element produced
 * by exactly one task and no shard element claimed by two tasks. Memory is
 * one byte per canonical and shard element, so it is meant for scaled models
 * and tests; DCR_ELAYOUT names the first tensor and flat index at fault. */
dcr_status_t dcr_source_layout_check_coverage(const dcr_source_layout_t *layout);

/* The owner among holders for a task name: holders[hash64(name) % n]. Stable
 * across runs and attempts for a given layout. */
int dcr_source_pick_owner(const char *task_name, int nholders, const int *holders);

/* Number of elements a task covers (sum over its box maps). */
int64_t dcr_task_numel(const dcr_task_t *task);

/* Applies a task's box maps: reads the shard's elements from `shard_data`
 * (contiguous, shard dtype) and writes the canonical elements into
 * `canonical_data` (contiguous, canonical dtype), converting as needed. */
void dcr_task_scatter(const dcr_source_layout_t *layout, const dcr_task_t *task,
                      const void *shard_data, void *canonical_data);
/* The reverse: canonical -> shard elements (cast back where dtypes differ). */
void dcr_task_gather(const dcr_source_layout_t *layout, const dcr_task_t *task,
                     const void *canonical_data, void *shard_data);

/* Summary figures of a layout (what `dcr inventory` prints). An item is one
 * owner's task on one canonical tensor: each affine task is one item, each
 * residual canonical tensor one item (emitted by its residual-baseline owner). */
typedef struct dcr_source_stats {
    int64_t affine_tensors, residual_tensors;
    int64_t affine_items, residual_items;
    int64_t affine_bytes, residual_bytes;
    double affine_byte_share; /* affine_bytes / (affine_bytes + residual_bytes) */
    int64_t owned_elements_min, owned_elements_max; /* per training rank, affine + residual parts */
} dcr_source_stats_t;

void dcr_source_layout_stats(const dcr_source_layout_t *layout, dcr_source_stats_t *out_p);

/* Copies a task's shard elements into a dense buffer in box order (the
 * order of its maps and runs), and back. Trackers and residual parts use
 * this order. */
void dcr_task_pack(const dcr_source_layout_t *layout, const dcr_task_t *task,
                   const void *shard_data, void *box);
void dcr_task_unpack(const dcr_source_layout_t *layout, const dcr_task_t *task, const void *box,
                     void *shard_data);

/* Calls fn(src, dst, len, ctx) for each run of a box map: len consecutive
 * elements starting at shard index src and canonical index dst (both with
 * unit stride), in box order. Maps whose innermost strides are not 1 yield
 * runs of length 1. The fast way to walk a task's elements. */
void dcr_box_map_foreach_run(const dcr_box_map_t *map,
                             void (*fn)(int64_t src, int64_t dst, int64_t len, void *ctx),
                             void *ctx);

/* Calls fn(src_flat, dst_flat, ctx) for every element of a box map, row-major over its shape. */
void dcr_box_map_foreach(const dcr_box_map_t *map, void (*fn)(int64_t src, int64_t dst, void *ctx),
                         void *ctx);

#endif
