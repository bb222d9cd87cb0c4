/* The tensor-op API that native loaders are written against.
 *
 * A native loader is the serving runtime's own load_weights: it receives one
 * canonical tensor at a time (name + view of its data), decides where its
 * values go on this rank, and writes them into the rank's resident parameters.
 * dcr never decides placement (G3); it only observes the loader. To make that
 * possible a loader touches data exclusively through a load context:
 *
 *  - storage-sharing views (narrow, select, transpose, reshape, unsqueeze),
 *    which never copy;
 *  - operations that make new storage (cast, cat, elementwise map, blockwise
 *    map), whose temporaries the context owns and frees after the call;
 *  - the final writes into resident storage, copy_ and fill_, which always
 *    pass through the context's hook table (plain writes for a dense load,
 *    recording for the prewarm probe, XOR/overwrite for a delta apply);
 *  - an explicit skip for tensors this rank does not hold.
 *
 * A loader never dereferences view data itself: in the prewarm probe the
 * views point at storage without data (dcr_storage_t.data == NULL).
 *
 * Loaders are tables of function pointers found by name in a registry and
 * called only through the wrappers below (DESIGN.md section 4). Nothing in
 * this module is model-specific. */
#ifndef DCR_LOADER_H
#define DCR_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/device.h"
#include "dcr/ops.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Resident parameters                                                      */
/* ------------------------------------------------------------------------ */

/* The named tensors one receiver keeps resident (vLLM-like names such as
 * "model.layers.0.self_attn.qkv_proj.weight"). A loader declares them at
 * create time; the set owns their storage. */
typedef struct dcr_params dcr_params_t;

typedef struct dcr_param {
    const char *name; /* owned by the set */
    dcr_dtype_t dtype;
    int ndim;
    int64_t shape[DCR_MAX_DIMS];
    dcr_storage_t *storage; /* owned by the set; data is NULL in a shape-only set */
} dcr_param_t;

/* Creates an empty set. With shape_only, declared parameters get storage
 * without data (data NULL, bytes set), enough for the prewarm probe of
 * full-size models on a small machine. */
dcr_status_t dcr_params_create(bool shape_only, dcr_params_t **out_p);
/* Frees every parameter and its storage; accepts NULL. */
void dcr_params_destroy(dcr_params_t *p);

/* Declares a parameter with zeroed contiguous storage. DCR_EINVAL on an empty
 * or duplicate name or a bad shape; DCR_ENOMEM. *index_p (may be NULL) is the
 * parameter's index. */
dcr_status_t dcr_params_declare(dcr_params_t *p, const char *name, dcr_dtype_t dtype, int ndim,
                                const int64_t *shape, size_t *index_p);

size_t dcr_params_count(const dcr_params_t *p);
/* The i-th parameter; valid while the set lives. NULL when out of range. */
const dcr_param_t *dcr_params_at(const dcr_params_t *p, size_t i);
/* Index of a parameter by name, or -1. O(1) expected. */
int64_t dcr_params_find(const dcr_params_t *p, const char *name);
/* Index of the parameter that owns a storage, or -1. O(1) expected. */
int64_t dcr_params_find_storage(const dcr_params_t *p, const dcr_storage_t *storage);
/* Whole-parameter contiguous view. DCR_EINVAL when i is out of range. */
dcr_status_t dcr_params_view(const dcr_params_t *p, size_t i, dcr_view_t *out_p);
/* Sum of parameter bytes. */
size_t dcr_params_bytes(const dcr_params_t *p);

/* Alignment of each parameter's bytes in a placement arena. */
#define DCR_PARAMS_ALIGN ((size_t)64)
/* n rounded up to a multiple of DCR_PARAMS_ALIGN: the placement offsets'
 * rule, for anyone (a resident file) that lays out the same arena. */
static inline size_t dcr_params_align_up(size_t n)
{
    return (n + DCR_PARAMS_ALIGN - 1) / DCR_PARAMS_ALIGN * DCR_PARAMS_ALIGN;
}
/* Bytes an arena needs to hold every declared parameter, each starting at a
 * multiple of DCR_PARAMS_ALIGN, in declaration order (the offsets
 * dcr_params_place uses). */
size_t dcr_params_arena_bytes(const dcr_params_t *p);
/* Copies every parameter's bytes into arena at the placement offsets
 * (copy_out), or back from it (copy_in); arena holds at least
 * dcr_params_arena_bytes. The parameters stay where they are: a snapshot
 * (an anchor, a resident file) in the arena's layout. */
void dcr_params_arena_copy_out(const dcr_params_t *p, void *arena);
void dcr_params_arena_copy_in(const dcr_params_t *p, const void *arena);
/* The allocation hook (issue 19): moves every parameter's backing memory
 * into arena[0, len), which the caller provides and keeps alive and mapped
 * for as long as the set lives (e.g. a shared file mapping that outlives
 * the process). With copy, each parameter's current bytes are copied in
 * first; without, the parameters take over what the arena already holds.
 * Storage handles (and views and indexes on them) stay valid: only their
 * data moves. The set frees nothing of the arena. Call while nothing reads
 * or writes the parameters. DCR_EINVAL for a shape-only set, an arena not
 * aligned to DCR_PARAMS_ALIGN, or len below dcr_params_arena_bytes. A set
 * never placed keeps its own allocations (no cost on that path). */
dcr_status_t dcr_params_place(dcr_params_t *p, void *arena, size_t len, bool copy);
/* Whether the parameters live in a caller's arena (dcr_params_place). */
bool dcr_params_placed(const dcr_params_t *p);

/* ------------------------------------------------------------------------ */
/* The load context                                                         */
/* ------------------------------------------------------------------------ */

typedef struct dcr_load_ctx dcr_load_ctx_t;

/* Where the source of a final copy comes from. */
typedef enum dcr_load_source {
    DCR_LOAD_SRC_INPUT = 0,    /* a storage-sharing view of the loaded tensor */
    DCR_LOAD_SRC_TEMP = 1,     /* a context temporary (cast, cat, map, ...) */
    DCR_LOAD_SRC_RESIDENT = 2, /* resident parameter storage (read-modify-write) */
    DCR_LOAD_SRC_FOREIGN = 3,  /* storage the context does not know */
} dcr_load_source_t;

/* Operations that made new storage on the way from the input to a source. */
enum {
    DCR_LOAD_OP_CAST = 1u << 0,
    DCR_LOAD_OP_CAT = 1u << 1,
    DCR_LOAD_OP_MAP = 1u << 2,       /* elementwise */
    DCR_LOAD_OP_BLOCKWISE = 1u << 3, /* output elements depend on several inputs */
};

typedef struct dcr_load_origin {
    dcr_load_source_t source;
    unsigned ops;       /* DCR_LOAD_OP_* bits (TEMP only) */
    bool from_input;    /* TEMP: computed (partly) from the loaded tensor */
    bool from_resident; /* TEMP: computed (partly) from resident storage */
    bool nan_safe;      /* every op maps NaN inputs to NaN outputs */
    const char *op;     /* first new-storage op, e.g. "cast bf16->fp32"; "" for none */
} dcr_load_origin_t;

typedef enum dcr_load_write_kind {
    DCR_LOAD_COPY = 0, /* copy_: dst = src (converting dtype like torch's copy_) */
    DCR_LOAD_FILL = 1, /* fill_: dst = constant */
} dcr_load_write_kind_t;

/* One final write, as the hooks see it. Views are valid during the hook only. */
typedef struct dcr_load_write {
    dcr_load_write_kind_t kind;
    size_t param;             /* index of the resident parameter written */
    dcr_view_t dst;           /* a view of that parameter's storage */
    dcr_view_t src;           /* COPY: same shape as dst */
    dcr_load_origin_t origin; /* COPY: where src comes from */
    /* COPY in tracked mode: one byte per src element (1 = derived from an
     * active input element), same shape and layout as src; else NULL. */
    const dcr_view_t *src_active;
    uint64_t fill_bits; /* FILL: the constant as a little-endian word of dst's dtype */
} dcr_load_write_t;

/* The hook table: every copy_ and fill_ of a loader ends here. A hook's
 * error becomes the load call's error. Hooks run on the loading thread. */
typedef struct dcr_load_hooks {
    dcr_status_t (*copy)(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w);
    dcr_status_t (*fill)(void *arg, dcr_load_ctx_t *ctx, const dcr_load_write_t *w);
} dcr_load_hooks_t;

/* Plain writes: copy_ copies (with dtype conversion), fill_ fills. */
extern const dcr_load_hooks_t dcr_load_hooks_plain;

/* How a context runs. */
typedef struct dcr_load_mode {
    /* Probe: new-storage ops make temporaries without data and compute
     * nothing; only shapes, dtypes and provenance flow. */
    bool probe;
    /* Track activity: every storage carries a byte per element marking the
     * values derived from active input elements (the caller marks the input);
     * views share it, cast/map carry it elementwise, cat concatenates it. */
    bool track;
    /* Watch NaN transitions in cast/map (non-NaN -> NaN and NaN -> non-NaN),
     * which break a NaN placeholder; counted in dcr_load_ctx_nan_events. */
    bool watch_nan;
    /* The input and the resident parameters are buffers of a device the
     * host cannot address (engine/device, props.host_addressable false):
     * views work as always, and every copy_ and fill_ reaches the hooks,
     * which do the device's work. cast and cat run on the context's device
     * (dcr_load_ctx_set_device): temporaries and their activity maps are
     * device buffers, a cast is the device's convert (bit for bit
     * dcr_convert, the NaN watch counted by it), cat and the activity maps
     * are ASSIGN combines, dcr_load_map_op the device's convert with its
     * transform; their sources must be device buffers (the input,
     * temporaries, resident parameters). dcr_load_map and blockwise take
     * host functions and refuse with DCR_EUNSUPPORTED naming the tensor and
     * the op instead of reading device memory, as do the others with no
     * device set or from foreign storage. */
    bool device;
} dcr_load_mode_t;

/* Creates a context writing into `params` (borrowed; must outlive it). */
dcr_status_t dcr_load_ctx_create(dcr_params_t *params, dcr_load_ctx_t **out_p);
/* Frees the context and any temporaries; accepts NULL. */
void dcr_load_ctx_destroy(dcr_load_ctx_t *ctx);
/* Installs hooks (NULL: plain) and their argument for subsequent calls. */
void dcr_load_ctx_set_hooks(dcr_load_ctx_t *ctx, const dcr_load_hooks_t *hooks, void *arg);
void dcr_load_ctx_set_mode(dcr_load_ctx_t *ctx, dcr_load_mode_t mode);
/* The device new-storage ops run on in device mode (both borrowed; they
 * must outlive the context; NULL: none, cast and cat are refused there).
 * Work is queued on stream; the load call waits for it before it returns. */
void dcr_load_ctx_set_device(dcr_load_ctx_t *ctx, dcr_device_t *dev, dcr_device_stream_t *stream);
/* Tracked mode: the activity bytes of the input (one per input element, in
 * the input view's layout). Borrowed for the next load call. */
void dcr_load_ctx_set_input_active(dcr_load_ctx_t *ctx, const dcr_view_t *active);

/* The name of the tensor being loaded; "" outside a load call. */
const char *dcr_load_ctx_name(const dcr_load_ctx_t *ctx);
/* Copies and fills intercepted during the current / last load call. */
size_t dcr_load_ctx_copies(const dcr_load_ctx_t *ctx);
size_t dcr_load_ctx_fills(const dcr_load_ctx_t *ctx);
/* Whether the current / last load call skipped explicitly, and why. */
bool dcr_load_ctx_skipped(const dcr_load_ctx_t *ctx);
const char *dcr_load_ctx_skip_reason(const dcr_load_ctx_t *ctx);
/* watch_nan counters of the current / last call. */
void dcr_load_ctx_nan_events(const dcr_load_ctx_t *ctx, int64_t *created_p, int64_t *lost_p);
/* Origin of the storage a view reads, during a load call. */
dcr_load_origin_t dcr_load_ctx_origin(const dcr_load_ctx_t *ctx, const dcr_view_t *v);

/* --- What loaders call --- */

/* View of resident parameter `name`. DCR_ENOTFOUND names the parameter. */
dcr_status_t dcr_load_param(dcr_load_ctx_t *ctx, const char *name, dcr_view_t *out_p);

/* Storage-sharing views (the core view functions, checked). */
dcr_status_t dcr_load_narrow(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim, int64_t start,
                             int64_t length, dcr_view_t *out_p);
dcr_status_t dcr_load_select(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim, int64_t index,
                             dcr_view_t *out_p);
dcr_status_t dcr_load_transpose(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim0, int dim1,
                                dcr_view_t *out_p);
dcr_status_t dcr_load_unsqueeze(dcr_load_ctx_t *ctx, const dcr_view_t *v, int dim,
                                dcr_view_t *out_p);

/* New storage. Like torch's .to(), a cast to the view's own dtype returns the
 * view itself (no copy). The result is contiguous and lives until the load
 * call returns. */
dcr_status_t dcr_load_cast(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                           dcr_view_t *out_p);
/* Concatenation along dim of n views of one dtype, equal in the other dims. */
dcr_status_t dcr_load_cat(dcr_load_ctx_t *ctx, size_t n, const dcr_view_t *vs, int dim,
                          dcr_view_t *out_p);
/* Elementwise y = fn(x, arg) computed in FP32, result in dtype `to`. `what`
 * names the transform in messages ("neg_exp"). fn must be deterministic. */
typedef float (*dcr_load_map_fn)(float x, void *arg);
dcr_status_t dcr_load_map(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                          dcr_load_map_fn fn, void *arg, const char *what, dcr_view_t *out_p);
/* The closed set of elementwise transforms that also run on a device
 * (engine/device/kernels-internal.h computes each the same way on the host and on a
 * GPU, so both give the same bits; a host dcr_load_map_fn cannot run on a
 * GPU). */
typedef enum dcr_load_transform {
    DCR_LOAD_NEG = 1,     /* y = -x */
    DCR_LOAD_NEG_EXP = 2, /* y = -exp(x), exp within 2 ulp of the exact value */
} dcr_load_transform_t;
/* dcr_load_map with a transform of the closed set (named "neg", "neg_exp"
 * in origins): on the host a map, in device mode a kernel on the
 * context's device. */
dcr_status_t dcr_load_map_op(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                             dcr_load_transform_t op, dcr_view_t *out_p);
/* Blockwise transform over consecutive blocks of `block` elements of the
 * row-major view (the last block may be shorter): fn(in, out, n, arg) in
 * FP32, e.g. quantization with a shared per-block scale. One input value can
 * change several outputs, so delta application rejects such paths. */
typedef void (*dcr_load_block_fn)(const float *in, float *out, size_t n, void *arg);
dcr_status_t dcr_load_blockwise(dcr_load_ctx_t *ctx, const dcr_view_t *v, dcr_dtype_t to,
                                size_t block, dcr_load_block_fn fn, void *arg, const char *what,
                                dcr_view_t *out_p);

/* Final writes. dst must be a view of a resident parameter; src of copy_ has
 * dst's shape (any dtype: copy_ converts). fill_ stores `value` converted to
 * dst's dtype. Both go through the hook table. */
dcr_status_t dcr_load_copy(dcr_load_ctx_t *ctx, const dcr_view_t *dst, const dcr_view_t *src);
dcr_status_t dcr_load_fill(dcr_load_ctx_t *ctx, const dcr_view_t *dst, double value);
/* This rank holds nothing of the tensor (non-local expert, rotary buffer, tied
 * head). `reason` is static text. */
dcr_status_t dcr_load_skip(dcr_load_ctx_t *ctx, const char *reason);

/* ------------------------------------------------------------------------ */
/* Loader backends and the registry                                         */
/* ------------------------------------------------------------------------ */

/* The ops table layout this header describes; a backend sets version to it
 * and dcr_loader_register refuses any other, so a loader built against
 * another layout fails at registration, not at its first call. (No
 * properties after the header yet: nothing reads a loader property; when
 * the tensor ops gain device versions, "writes device memory" is the
 * first.) */
#define DCR_LOADER_OPS_VERSION 2

/* A created loader. Every backend's handle starts with this header (the
 * ops first, as every kind's handle does): create allocates the handle, and
 * the wrapper fills the header afterwards. */
typedef struct dcr_loader dcr_loader_t;
struct dcr_loader {
    const struct dcr_loader_ops *ops;
    dcr_params_t *params; /* the resident parameters (the wrapper's) */
};

typedef struct dcr_loader_ops {
    /* version DCR_LOADER_OPS_VERSION; name: the registry key, e.g.
     * "vllm.qwen3_moe"; parent: the loader a wrapping loader wraps */
    dcr_ops_header_t hdr;
    /* Builds the handle of one receiver's loader (a struct that starts with
     * dcr_loader_t) from `config` (backend specific, borrowed during the
     * call) and declares every resident parameter in `params`. Must not
     * write parameter data. Blocks only on allocation. self is the table the
     * loader was found in (a wrapper's names its parent). */
    dcr_status_t (*create)(const struct dcr_loader_ops *self, const void *config,
                           dcr_params_t *params, dcr_loader_t **out_p);
    /* Frees the handle create made (not the parameters); called once,
     * after the last load (not after a failed create). Never fails. */
    void (*destroy)(dcr_loader_t *l);
    /* Loads one canonical tensor: `name` and a view of its data (canonical
     * shape and dtype). Writes only through ctx. Returns DCR_OK when the
     * tensor was handled (copied or explicitly skipped), an error otherwise;
     * an unknown name is DCR_ENOTFOUND. Must not keep views past the call.
     * A wrapping loader reaches the one it wraps through l->ops->hdr.parent. */
    dcr_status_t (*load)(dcr_loader_t *l, dcr_load_ctx_t *ctx, const char *name,
                         const dcr_view_t *tensor);
} dcr_loader_ops_t;

/* Adds a backend (the table is borrowed and must stay valid for the process).
 * It needs a name and every slot. Registering the same table again is a no-op; a different table
 * under a taken name is DCR_EINVAL. Thread-safe. */
dcr_status_t dcr_loader_register(const dcr_loader_ops_t *ops);
/* The backend registered under `name`, or NULL. */
const dcr_loader_ops_t *dcr_loader_find(const char *name);

/* Creates a loader by name. DCR_ENOTFOUND lists nothing but names the loader. */
dcr_status_t dcr_loader_create(const char *name, const void *config, bool shape_only,
                               dcr_loader_t **out_p);
/* Destroys the backend state and the parameters; accepts NULL. */
void dcr_loader_destroy(dcr_loader_t *loader);
const char *dcr_loader_name(const dcr_loader_t *loader);
dcr_params_t *dcr_loader_params(dcr_loader_t *loader);

/* Runs the backend's load for one tensor inside ctx (which must write into
 * this loader's params): resets the per-call state, calls the backend, frees
 * the temporaries. The only way the engine calls a loader. */
dcr_status_t dcr_loader_load(dcr_loader_t *loader, dcr_load_ctx_t *ctx, const char *name,
                             const dcr_view_t *tensor);

#ifdef __cplusplus
}
#endif
#endif
