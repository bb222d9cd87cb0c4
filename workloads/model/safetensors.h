/* safetensors checkpoints: reader (memory-mapped) and writer.
 *
 * The format (huggingface/safetensors): an 8-byte little-endian header
 * length n, n bytes of a JSON object mapping each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * data section that follows the header) plus an optional "__metadata__"
 * object of strings, then the data section. A sharded checkpoint is a
 * directory with model.safetensors.index.json, whose "weight_map" names the
 * file of every tensor.
 *
 * The reader refuses anything a loader could misread, each problem as one
 * error line naming the file and the tensor: a header length past the file
 * or over 100 MB (the reference limit), malformed JSON, a duplicate name, an
 * unknown dtype name, offsets outside the data
 * section, tensors that overlap or leave gaps (the data section must be
 * exactly the tensors, back to back), a byte size other than shape x dtype.
 * dcr_checkpoint_check_inventory() then requires every tensor of a canonical
 * inventory with its shape and dtype; dcr holds BF16, F16, F32 and F8_E4M3,
 * and tensors of the format's other dtypes (I64, F64, ...) are parsed and
 * checked like the rest but can only be tensors the model does not use. */
#ifndef DCR_WORKLOADS_SAFETENSORS_H
#define DCR_WORKLOADS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "dcr/inventory.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

/* The reference implementation's bound on the JSON header. */
#define DCR_ST_HEADER_MAX 100000000u

/* Most tensors one file's header may declare: 131,072, about twice the
 * tensors of the largest public checkpoint were it one file. A header is
 * counted (objects, arrays and commas, one pass, no allocation) before it is
 * parsed, and one with more tensors, or more than DCR_ST_VALUES_MAX JSON
 * values (16 per tensor: a shape of 8 dims, offsets, keys and metadata), is
 * refused: parsing costs about a kilobyte per value. */
#define DCR_ST_TENSORS_MAX (1u << 17)
#define DCR_ST_VALUES_MAX  (16u * DCR_ST_TENSORS_MAX)

/* One tensor of a parsed file. data points into the buffer that was parsed
 * (for an open checkpoint: its read-only mapping) and is not aligned beyond
 * what the file gives: read it with memcpy or byte-wise. */
typedef struct dcr_st_tensor {
    char *name;
    dcr_dtype_t dtype;      /* DCR_DTYPE_COUNT for a dtype dcr does not hold (I64, F64, ...) */
    const char *dtype_name; /* as in the file ("BF16", "I64", ...), static */
    unsigned elem_size;     /* bytes per element */
    int ndim;               /* 0 for a scalar */
    int64_t shape[DCR_MAX_DIMS];
    uint64_t begin, end; /* data_offsets, relative to the data section */
    const uint8_t *data; /* end - begin bytes */
    int file;            /* index of the file in its checkpoint (0 for one file) */
} dcr_st_tensor_t;

/* The safetensors name of a dcr dtype ("BF16", "F16", "F32", "F8_E4M3"). */
const char *dcr_st_dtype_name(dcr_dtype_t dtype);

/* Parses and validates a whole file image buf[0..size). On success
 * *tensors_p (sorted by begin offset, freed with dcr_st_tensors_free) and
 * *n_p are set, and *metadata_p, when not NULL, receives a new reference to
 * the "__metadata__" object or NULL. origin names the file in errors
 * (DCR_EPARSE). Never reads outside buf. */
dcr_status_t dcr_st_parse(const uint8_t *buf, size_t size, const char *origin,
                          dcr_st_tensor_t **tensors_p, size_t *n_p, json_t **metadata_p);

/* Frees the names and the array; accepts NULL. */
void dcr_st_tensors_free(dcr_st_tensor_t *tensors, size_t n);

/* One tensor to write: desc gives name, dtype and shape; data holds
 * dcr_desc_bytes(desc) bytes. */
typedef struct dcr_st_entry {
    const dcr_tensor_desc_t *desc;
    const void *data;
} dcr_st_entry_t;

/* Writes one safetensors file of entries[0..n) in that order, back to back,
 * with metadata (an object of strings, may be NULL) as "__metadata__". The
 * header is padded with spaces to a multiple of 8 bytes, as the reference
 * writer does, so that the data section starts 8-byte aligned. */
dcr_status_t dcr_st_write_file(const char *path, const dcr_st_entry_t *entries, size_t n,
                               json_t *metadata);

/* Writes a checkpoint into the existing directory dir: with shard_bytes 0
 * one model.safetensors, else files model-0000K-of-0000N.safetensors of at
 * most shard_bytes of data each (a larger tensor gets a file of its own) and
 * model.safetensors.index.json with "metadata": {"total_size"} and
 * "weight_map". */
dcr_status_t dcr_checkpoint_write(const char *dir, const dcr_st_entry_t *entries, size_t n,
                                  size_t shard_bytes);

/* An open checkpoint: one file or a sharded directory, mapped read-only. */
typedef struct dcr_checkpoint dcr_checkpoint_t;

/* Opens path: a .safetensors file, or a directory holding
 * model.safetensors.index.json (sharded) or model.safetensors. Every file is
 * validated (see above); for a sharded one every tensor must sit in the file
 * its weight_map names, and no name may appear twice across files. */
dcr_status_t dcr_checkpoint_open(const char *path, dcr_checkpoint_t **out_p);
/* Unmaps and frees; accepts NULL. */
void dcr_checkpoint_close(dcr_checkpoint_t *ck);

/* How many tensors the checkpoint holds. */
size_t dcr_checkpoint_count(const dcr_checkpoint_t *ck);
/* The tensor of that name, or NULL. O(log n). */
const dcr_st_tensor_t *dcr_checkpoint_find(const dcr_checkpoint_t *ck, const char *name);
/* Path of file i (the one given to open for a single file). */
const char *dcr_checkpoint_file(const dcr_checkpoint_t *ck, int i);
/* The path given to open. */
const char *dcr_checkpoint_path(const dcr_checkpoint_t *ck);

/* Requires every tensor of inv with its dtype and shape: DCR_ENOTFOUND or
 * DCR_EPARSE naming the checkpoint and the first tensor that is missing or
 * differs. Tensors the inventory does not list (a vision tower, MTP heads)
 * are allowed; *extra_p (may be NULL) receives how many there are. */
dcr_status_t dcr_checkpoint_check_inventory(const dcr_checkpoint_t *ck, const dcr_inventory_t *inv,
                                            size_t *extra_p);

#endif
