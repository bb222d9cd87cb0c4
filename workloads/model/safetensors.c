/* safetensors reader (memory-mapped, validating) and writer. */
#include "workloads/model/safetensors.h"

#include "dcr/hash.h"
#include "dcr/map.h"
#include "dcr/outpath.h"
#include "workloads/model/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DCR__ST_INDEX     "model.safetensors.index.json"
#define DCR__ST_SINGLE    "model.safetensors"
#define DCR__ST_INDEX_MAX (64L << 20)
#define DCR__ST_PATH_MAX  4096
#define DCR__ST_FILES_MAX 100000

/* Every dtype of the format with its element size; the first four are the
 * ones dcr holds (DCR_DTYPE_COUNT marks the others, which a checkpoint may
 * carry in tensors the model does not use). */
static const struct {
    const char *name;
    dcr_dtype_t dtype;
    unsigned size;
} dcr__st_dtypes[] = {
    {"BF16", DCR_DTYPE_BF16, 2},     {"F16", DCR_DTYPE_FP16, 2},
    {"F32", DCR_DTYPE_FP32, 4},      {"F8_E4M3", DCR_DTYPE_FP8_E4M3, 1},
    {"F64", DCR_DTYPE_COUNT, 8},     {"I64", DCR_DTYPE_COUNT, 8},
    {"U64", DCR_DTYPE_COUNT, 8},     {"I32", DCR_DTYPE_COUNT, 4},
    {"U32", DCR_DTYPE_COUNT, 4},     {"I16", DCR_DTYPE_COUNT, 2},
    {"U16", DCR_DTYPE_COUNT, 2},     {"I8", DCR_DTYPE_COUNT, 1},
    {"U8", DCR_DTYPE_COUNT, 1},      {"BOOL", DCR_DTYPE_COUNT, 1},
    {"F8_E5M2", DCR_DTYPE_COUNT, 1},
};

#define DCR__ST_DTYPE_COUNT (sizeof(dcr__st_dtypes) / sizeof(dcr__st_dtypes[0]))

const char *dcr_st_dtype_name(dcr_dtype_t dtype)
{
    for (size_t i = 0; i < DCR__ST_DTYPE_COUNT; i++)
        if (dcr__st_dtypes[i].dtype == dtype) return dcr__st_dtypes[i].name;
    return "?";
}

static uint64_t dcr__le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

void dcr_st_tensors_free(dcr_st_tensor_t *tensors, size_t n)
{
    for (size_t i = 0; tensors && i < n; i++) free(tensors[i].name);
    free(tensors);
}

/* ---- header parsing ---- */

/* A non-negative JSON integer (what shapes and offsets must be). */
static bool dcr__st_uint(json_t *v, uint64_t *out_p)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out_p = (uint64_t)json_integer_value(v);
    return true;
}

static dcr_status_t dcr__st_dtype(const char *origin, const char *name, json_t *v,
                                  dcr_st_tensor_t *t)
{
    const char *s = json_string_value(v);
    if (s == NULL) {
        return dcr_error_set(
            DCR_EPARSE, "safetensors %s: tensor \"%s\": \"dtype\" must be a string", origin, name);
    }
    for (size_t i = 0; i < DCR__ST_DTYPE_COUNT; i++) {
        if (strcmp(s, dcr__st_dtypes[i].name) == 0) {
            t->dtype = dcr__st_dtypes[i].dtype;
            t->dtype_name = dcr__st_dtypes[i].name;
            t->elem_size = dcr__st_dtypes[i].size;
            return DCR_OK;
        }
    }
    return dcr_error_set(DCR_EPARSE,
                         "safetensors %s: tensor \"%s\": unknown dtype \"%.32s\" (expected BF16, "
                         "F16, F32, F8_E4M3 or another safetensors dtype)",
                         origin, name, s);
}

/* Shape and its byte size, overflow-checked. */
static dcr_status_t dcr__st_shape(const char *origin, dcr_st_tensor_t *t, json_t *v,
                                  uint64_t *bytes_p)
{
    size_t ndim = json_array_size(v);
    if (!json_is_array(v) || ndim > DCR_MAX_DIMS) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: tensor \"%s\": \"shape\" must be an array of at "
                             "most %d non-negative integers",
                             origin, t->name, DCR_MAX_DIMS);
    }
    uint64_t bytes = t->elem_size;
    t->ndim = (int)ndim;
    for (size_t d = 0; d < ndim; d++) {
        uint64_t dim = 0;
        if (!dcr__st_uint(json_array_get(v, d), &dim) || dim > INT64_MAX ||
            __builtin_mul_overflow(bytes, dim, &bytes) || bytes > INT64_MAX) {
            return dcr_error_set(DCR_EPARSE,
                                 "safetensors %s: tensor \"%s\": shape dimension %zu is not a "
                                 "non-negative integer or the size overflows",
                                 origin, t->name, d);
        }
        t->shape[d] = (int64_t)dim;
    }
    *bytes_p = bytes;
    return DCR_OK;
}

static dcr_status_t dcr__st_tensor(const char *origin, const char *name, json_t *v,
                                   uint64_t data_len, dcr_st_tensor_t *t)
{
    if (!json_is_object(v)) {
        return dcr_error_set(DCR_EPARSE, "safetensors %s: tensor \"%s\": entry must be an object",
                             origin, name);
    }
    t->name = strdup(name);
    if (t->name == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", origin);
    DCR_CHECK(dcr__st_dtype(origin, name, json_object_get(v, "dtype"), t));
    uint64_t bytes = 0;
    DCR_CHECK(dcr__st_shape(origin, t, json_object_get(v, "shape"), &bytes));
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        !dcr__st_uint(json_array_get(off, 0), &t->begin) ||
        !dcr__st_uint(json_array_get(off, 1), &t->end) || t->begin > t->end) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: tensor \"%s\": \"data_offsets\" must be [begin, "
                             "end] with 0 <= begin <= end",
                             origin, name);
    }
    if (t->end > data_len) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                             "] end past the data section of %" PRIu64 " bytes",
                             origin, name, t->begin, t->end, data_len);
    }
    if (t->end - t->begin != bytes) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: tensor \"%s\": data_offsets span %" PRIu64
                             " bytes but shape x %s needs %" PRIu64,
                             origin, name, t->end - t->begin, t->dtype_name, bytes);
    }
    return DCR_OK;
}

static dcr_status_t dcr__st_metadata(const char *origin, json_t *v)
{
    const char *key;
    json_t *value;
    if (!json_is_object(v)) {
        return dcr_error_set(DCR_EPARSE, "safetensors %s: \"__metadata__\" must be an object",
                             origin);
    }
    json_object_foreach(v, key, value)
    {
        if (!json_is_string(value)) {
            return dcr_error_set(
                DCR_EPARSE, "safetensors %s: \"__metadata__\" value of \"%s\" must be a string",
                origin, key);
        }
    }
    return DCR_OK;
}

static int dcr__st_by_offset(const void *a, const void *b)
{
    const dcr_st_tensor_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The data section must be exactly the tensors back to back: no overlap
 * (two names for the same bytes would let one change alias another) and no
 * gap or tail (bytes no tensor owns). */
static dcr_status_t dcr__st_check_layout(const char *origin, const dcr_st_tensor_t *t, size_t n,
                                         uint64_t data_len)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].begin < at) {
            return dcr_error_set(DCR_EPARSE,
                                 "safetensors %s: tensor \"%s\" (bytes %" PRIu64 "..%" PRIu64
                                 ") overlaps tensor \"%s\" (ending at %" PRIu64 ")",
                                 origin, t[i].name, t[i].begin, t[i].end, t[i - 1].name, at);
        }
        if (t[i].begin > at) {
            return dcr_error_set(DCR_EPARSE,
                                 "safetensors %s: tensor \"%s\" starts at %" PRIu64
                                 " but the previous data ends at %" PRIu64
                                 " (tensors must be contiguous)",
                                 origin, t[i].name, t[i].begin, at);
        }
        at = t[i].end;
    }
    if (at != data_len) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: %" PRIu64 " bytes after the last tensor (the data "
                             "section holds %" PRIu64 ", the tensors %" PRIu64 ")",
                             origin, data_len - at, data_len, at);
    }
    return DCR_OK;
}

static dcr_status_t dcr__st_header(const uint8_t *buf, size_t size, const char *origin,
                                   uint64_t *hlen_p)
{
    if (size < 8) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: file of %zu bytes is shorter than the 8-byte header "
                             "length",
                             origin, size);
    }
    uint64_t hlen = dcr__le64(buf);
    if (hlen > DCR_ST_HEADER_MAX || hlen > size - 8) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: header length %" PRIu64
                             " exceeds the %zu bytes after it or the limit of %u",
                             origin, hlen, size - 8, DCR_ST_HEADER_MAX);
    }
    *hlen_p = hlen;
    return DCR_OK;
}

static dcr_status_t dcr__st_collect(json_t *root, const uint8_t *data, uint64_t data_len,
                                    const char *origin, dcr_st_tensor_t *t, size_t *n_p)
{
    const char *key;
    json_t *value;
    size_t n = 0;
    json_object_foreach(root, key, value)
    {
        if (strcmp(key, "__metadata__") == 0) {
            DCR_CHECK(dcr__st_metadata(origin, value));
            continue;
        }
        dcr_st_tensor_t *cur = &t[n++];
        *n_p = n; /* so the caller frees a partly filled entry */
        DCR_CHECK(dcr__st_tensor(origin, key, value, data_len, cur));
        cur->data = data + cur->begin;
    }
    *n_p = n;
    return DCR_OK;
}

/* Counts JSON objects (tensors and the root) and values (objects, arrays
 * and commas bound them) of a text outside its strings: what parsing it
 * would cost, in one pass with no allocation. */
static void dcr__json_census(const char *text, size_t len, uint64_t *objects_p, uint64_t *values_p)
{
    uint64_t objects = 0, values = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        objects += c == '{';
        values += c == '{' || c == '[' || c == ',';
    }
    *objects_p = objects;
    *values_p = values;
}

/* The tensor and value bounds (safetensors.h), before the parse. */
static dcr_status_t dcr__st_census(const uint8_t *json, uint64_t hlen, const char *origin)
{
    uint64_t objects = 0, values = 0;
    dcr__json_census((const char *)json, (size_t)hlen, &objects, &values);
    if (objects > DCR_ST_TENSORS_MAX + 1 || values > DCR_ST_VALUES_MAX) {
        return dcr_error_set(DCR_EPARSE,
                             "safetensors %s: header declares up to %" PRIu64
                             " tensors and %" PRIu64 " JSON values (at most %u and %u)",
                             origin, objects > 0 ? objects - 1 : 0, values, DCR_ST_TENSORS_MAX,
                             DCR_ST_VALUES_MAX);
    }
    return DCR_OK;
}

dcr_status_t dcr_st_parse(const uint8_t *buf, size_t size, const char *origin,
                          dcr_st_tensor_t **tensors_p, size_t *n_p, json_t **metadata_p)
{
    if (origin == NULL) origin = "<buffer>";
    if ((buf == NULL && size > 0) || tensors_p == NULL || n_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "safetensors %s: NULL argument", origin);
    }
    uint64_t hlen = 0;
    DCR_CHECK(dcr__st_header(buf, size, origin, &hlen));
    DCR_CHECK(dcr__st_census(buf + 8, hlen, origin));
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        return dcr_error_set(DCR_EPARSE, "safetensors %s: header JSON invalid at byte %d: %s",
                             origin, jerr.position, jerr.text);
    }
    dcr_status_t st = DCR_OK;
    dcr_st_tensor_t *t = NULL;
    size_t n = 0;
    uint64_t data_len = size - 8 - hlen;
    if (!json_is_object(root)) {
        st = dcr_error_set(DCR_EPARSE, "safetensors %s: header must be a JSON object", origin);
        goto done;
    }
    t = calloc(json_object_size(root) + 1, sizeof(*t));
    if (t == NULL) {
        st = dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", origin);
        goto done;
    }
    DCR_CHECK_GOTO(dcr__st_collect(root, buf + 8 + hlen, data_len, origin, t, &n), st, done);
    qsort(t, n, sizeof(*t), dcr__st_by_offset);
    DCR_CHECK_GOTO(dcr__st_check_layout(origin, t, n, data_len), st, done);
    if (metadata_p != NULL) *metadata_p = json_incref(json_object_get(root, "__metadata__"));
    *tensors_p = t;
    *n_p = n;
    t = NULL;
done:
    dcr_st_tensors_free(t, n);
    json_decref(root);
    return st;
}

/* ---- writing ---- */

static dcr_status_t dcr__st_header_json(const char *path, const dcr_st_entry_t *e, size_t n,
                                        json_t *metadata, char **text_p)
{
    json_t *root = json_object();
    if (root == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", path);
    if (metadata != NULL) json_object_set(root, "__metadata__", metadata);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const dcr_tensor_desc_t *d = e[i].desc;
        if (json_object_get(root, d->name) != NULL || strcmp(d->name, "__metadata__") == 0) {
            json_decref(root);
            return dcr_error_set(DCR_EINVAL, "safetensors %s: tensor \"%s\" given twice", path,
                                 d->name);
        }
        json_t *shape = json_array();
        for (int k = 0; k < d->ndim; k++) json_array_append_new(shape, json_integer(d->shape[k]));
        uint64_t bytes = dcr_desc_bytes(d);
        json_t *t = json_pack("{s:s, s:o, s:[I, I]}", "dtype", dcr_st_dtype_name(d->dtype), "shape",
                              shape, "data_offsets", (json_int_t)at, (json_int_t)(at + bytes));
        if (t == NULL || json_object_set_new(root, d->name, t) != 0) {
            json_decref(root);
            return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", path);
        }
        at += bytes;
    }
    *text_p = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (*text_p == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", path);
    return DCR_OK;
}

static dcr_status_t dcr__st_write_body(FILE *f, const char *header, const dcr_st_entry_t *e,
                                       size_t n)
{
    size_t len = strlen(header), padded = (len + 7) / 8 * 8;
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    bool ok = fwrite(prefix, 1, 8, f) == 8 && fwrite(header, 1, len, f) == len;
    for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    for (size_t i = 0; ok && i < n; i++) {
        size_t bytes = dcr_desc_bytes(e[i].desc);
        ok = bytes == 0 || fwrite(e[i].data, 1, bytes, f) == bytes;
    }
    return ok ? DCR_OK : DCR_EIO;
}

dcr_status_t dcr_st_write_file(const char *path, const dcr_st_entry_t *entries, size_t n,
                               json_t *metadata)
{
    if (path == NULL || (entries == NULL && n > 0)) {
        return dcr_error_set(DCR_EINVAL, "safetensors write: NULL argument");
    }
    char *header = NULL;
    DCR_CHECK(dcr__st_header_json(path, entries, n, metadata, &header));
    /* The output-path rule (dcr/outpath.h): a temporary file renamed over a
     * regular file or a new name only. */
    dcr_outfile_t *out = NULL;
    dcr_status_t st = dcr_outfile_open("safetensors", path, 0, &out);
    int fd = st == DCR_OK ? dup(dcr_outfile_fd(out)) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (st == DCR_OK && f == NULL) {
        if (fd >= 0) close(fd);
        st = dcr_error_set(DCR_EIO, "safetensors %s: cannot write: %s", path, strerror(errno));
    }
    if (st == DCR_OK) {
        st = dcr__st_write_body(f, header, entries, n);
        if (fclose(f) != 0 && st == DCR_OK)
            st = dcr_error_set(DCR_EIO, "safetensors %s: write failed: %s", path, strerror(errno));
        else if (st != DCR_OK)
            st = dcr_error_set(DCR_EIO, "safetensors %s: write failed", path);
    }
    free(header);
    if (st != DCR_OK) {
        dcr_outfile_abort(out);
        return st;
    }
    return dcr_outfile_commit(out);
}

static dcr_status_t dcr__st_join(char *buf, size_t len, const char *dir, const char *leaf)
{
    int n = snprintf(buf, len, "%s/%s", dir, leaf);
    if (n < 0 || (size_t)n >= len) {
        return dcr_error_set(DCR_EINVAL, "safetensors: path %s/%s too long", dir, leaf);
    }
    return DCR_OK;
}

/* Shard k of the greedy split: entries [start, end) fill up to shard_bytes. */
static size_t dcr__st_shard_end(const dcr_st_entry_t *e, size_t n, size_t start, size_t shard_bytes)
{
    size_t end = start, bytes = 0;
    while (end < n && (end == start || bytes + dcr_desc_bytes(e[end].desc) <= shard_bytes))
        bytes += dcr_desc_bytes(e[end++].desc);
    return end;
}

static dcr_status_t dcr__st_write_index(const char *dir, json_t *weight_map, uint64_t total)
{
    char path[DCR__ST_PATH_MAX];
    DCR_CHECK(dcr__st_join(path, sizeof(path), dir, DCR__ST_INDEX));
    json_t *index = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total,
                              "weight_map", weight_map);
    if (index == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", path);
    int rc = json_dump_file(index, path, JSON_INDENT(2));
    json_decref(index);
    if (rc != 0) return dcr_error_set(DCR_EIO, "safetensors %s: write failed", path);
    return DCR_OK;
}

dcr_status_t dcr_checkpoint_write(const char *dir, const dcr_st_entry_t *entries, size_t n,
                                  size_t shard_bytes)
{
    char path[DCR__ST_PATH_MAX], leaf[64];
    if (shard_bytes == 0) {
        DCR_CHECK(dcr__st_join(path, sizeof(path), dir, DCR__ST_SINGLE));
        return dcr_st_write_file(path, entries, n, NULL);
    }
    size_t shards = 0;
    for (size_t s = 0; s < n; s = dcr__st_shard_end(entries, n, s, shard_bytes)) shards++;
    json_t *weight_map = json_object();
    if (weight_map == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", dir);
    dcr_status_t st = DCR_OK;
    uint64_t total = 0;
    size_t k = 0;
    for (size_t s = 0, e; s < n && st == DCR_OK; s = e, k++) {
        e = dcr__st_shard_end(entries, n, s, shard_bytes);
        snprintf(leaf, sizeof(leaf), "model-%05zu-of-%05zu.safetensors", k + 1, shards);
        st = dcr__st_join(path, sizeof(path), dir, leaf);
        if (st == DCR_OK) st = dcr_st_write_file(path, entries + s, e - s, NULL);
        for (size_t i = s; i < e && st == DCR_OK; i++) {
            json_object_set_new(weight_map, entries[i].desc->name, json_string(leaf));
            total += dcr_desc_bytes(entries[i].desc);
        }
    }
    if (st == DCR_OK) st = dcr__st_write_index(dir, weight_map, total);
    json_decref(weight_map);
    return st;
}

/* ---- reading a checkpoint ---- */

typedef struct dcr__st_file {
    char *path;
    void *map;
    size_t size;
    dcr_st_tensor_t *tensors;
    size_t n;
} dcr__st_file_t;

struct dcr_checkpoint {
    char *path;
    dcr__st_file_t *files;
    int nfiles;
    const dcr_st_tensor_t **by_name; /* all tensors, sorted by name */
    size_t n;
};

static dcr_status_t dcr__st_map_file(const char *path, int index, dcr__st_file_t *f)
{
    f->path = strdup(path);
    if (f->path == NULL) return dcr_error_set(DCR_ENOMEM, "safetensors %s: out of memory", path);
    int fd = -1;
    uint64_t size = 0;
    /* Mapped, not read: the bound is the address space, not memory. */
    DCR_CHECK(dcr_input_open(path, "safetensors", (uint64_t)SIZE_MAX / 2, &fd, &size));
    f->size = (size_t)size;
    if (f->size > 0) {
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            int err = errno;
            f->map = NULL;
            close(fd);
            return dcr_error_set(DCR_EIO, "safetensors %s: mmap failed: %s", path, strerror(err));
        }
    }
    close(fd);
    DCR_CHECK(dcr_st_parse(f->map, f->size, path, &f->tensors, &f->n, NULL));
    for (size_t i = 0; i < f->n; i++) f->tensors[i].file = index;
    return DCR_OK;
}

void dcr_checkpoint_close(dcr_checkpoint_t *ck)
{
    if (ck == NULL) return;
    for (int i = 0; i < ck->nfiles; i++) {
        dcr__st_file_t *f = &ck->files[i];
        dcr_st_tensors_free(f->tensors, f->n);
        if (f->map != NULL) munmap(f->map, f->size);
        free(f->path);
    }
    free(ck->files);
    free(ck->by_name);
    free(ck->path);
    free(ck);
}

static int dcr__st_by_name(const void *a, const void *b)
{
    return strcmp((*(const dcr_st_tensor_t *const *)a)->name,
                  (*(const dcr_st_tensor_t *const *)b)->name);
}

/* The name index over every file; a name in two files is refused. */
static dcr_status_t dcr__st_index_names(dcr_checkpoint_t *ck)
{
    size_t n = 0;
    for (int i = 0; i < ck->nfiles; i++) n += ck->files[i].n;
    ck->by_name = calloc(n + 1, sizeof(*ck->by_name));
    if (ck->by_name == NULL) return dcr_error_set(DCR_ENOMEM, "checkpoint: out of memory");
    for (int i = 0; i < ck->nfiles; i++)
        for (size_t k = 0; k < ck->files[i].n; k++) ck->by_name[ck->n++] = &ck->files[i].tensors[k];
    qsort(ck->by_name, ck->n, sizeof(*ck->by_name), dcr__st_by_name);
    for (size_t i = 1; i < ck->n; i++) {
        if (strcmp(ck->by_name[i]->name, ck->by_name[i - 1]->name) == 0) {
            return dcr_error_set(DCR_EPARSE, "checkpoint %s: tensor \"%s\" is in both %s and %s",
                                 ck->path, ck->by_name[i]->name,
                                 ck->files[ck->by_name[i - 1]->file].path,
                                 ck->files[ck->by_name[i]->file].path);
        }
    }
    return DCR_OK;
}

/* Most entries of a shard index's weight_map: one per tensor of the
 * largest inventory, plus room for metadata. */
#define DCR__ST_INDEX_VALUES_MAX (4u * DCR_INVENTORY_TENSORS_MAX)

static dcr_status_t dcr__st_read_text(const char *path, char **text_p)
{
    char *text = NULL;
    size_t len = 0;
    DCR_CHECK(dcr_input_read(path, "checkpoint index", DCR__ST_INDEX_MAX, &text, &len));
    uint64_t objects = 0, values = 0;
    dcr__json_census(text, len, &objects, &values);
    if (values > DCR__ST_INDEX_VALUES_MAX) {
        free(text);
        return dcr_error_set(DCR_EPARSE,
                             "checkpoint %s: up to %" PRIu64 " JSON values (at most %u: %d "
                             "tensors)",
                             path, values, DCR__ST_INDEX_VALUES_MAX, DCR_INVENTORY_TENSORS_MAX);
    }
    *text_p = text;
    return DCR_OK;
}

/* A weight_map file name must stay inside the checkpoint's directory. */
static bool dcr__st_plain_leaf(const char *leaf)
{
    return leaf[0] != '\0' && leaf[0] != '.' && strchr(leaf, '/') == NULL;
}

/* Tells entries of one name hash apart: whether files[val] is the leaf. */
typedef struct dcr__st_leaf_key {
    const char *const *files;
    const char *leaf;
} dcr__st_leaf_key_t;

static int dcr__st_same_leaf(uint64_t val, const void *arg)
{
    const dcr__st_leaf_key_t *k = arg;
    return strcmp(k->files[val], k->leaf) == 0;
}

/* The distinct files of a weight_map in first-seen order (file names valid
 * while index lives). One hash lookup per entry: O(n) for n entries, where
 * a scan of the files seen so far made 100,001 distinct names cost 42 s.
 * More than DCR__ST_FILES_MAX files is refused as soon as it is seen. */
static dcr_status_t dcr__st_index_files(const char *ipath, json_t *map, const char ***files_p,
                                        int *n_p)
{
    const char **files = calloc(json_object_size(map) + 1, sizeof(*files));
    if (files == NULL) return dcr_error_set(DCR_ENOMEM, "checkpoint %s: out of memory", ipath);
    dcr_map_t seen = {0};
    dcr_status_t st = DCR_OK;
    int n = 0;
    const char *key;
    json_t *value;
    json_object_foreach(map, key, value)
    {
        const char *leaf = json_string_value(value);
        if (leaf == NULL || !dcr__st_plain_leaf(leaf)) {
            st = dcr_error_set(DCR_EPARSE,
                               "checkpoint %s: weight_map entry \"%s\" must name a file in the "
                               "same directory",
                               ipath, key);
            break;
        }
        uint64_t hash = dcr_hash64_str(leaf);
        dcr__st_leaf_key_t k = {files, leaf};
        if (dcr_map_get(&seen, hash, dcr__st_same_leaf, &k, NULL)) continue;
        if (n == DCR__ST_FILES_MAX) {
            st = dcr_error_set(DCR_EPARSE, "checkpoint %s: more than %d files", ipath,
                               DCR__ST_FILES_MAX);
            break;
        }
        if ((st = dcr_map_add(&seen, hash, (uint64_t)n)) != DCR_OK) break;
        files[n++] = leaf;
    }
    dcr_map_free(&seen);
    if (st != DCR_OK) {
        free(files);
        return st;
    }
    *files_p = files;
    *n_p = n;
    return DCR_OK;
}

/* Every tensor sits in the file the weight_map names, and every tensor of
 * every file is in the weight_map. */
static dcr_status_t dcr__st_check_map(const dcr_checkpoint_t *ck, const char *ipath, json_t *map,
                                      const char *const *files)
{
    const char *key;
    json_t *value;
    json_object_foreach(map, key, value)
    {
        const dcr_st_tensor_t *t = dcr_checkpoint_find(ck, key);
        if (t == NULL || strcmp(files[t->file], json_string_value(value)) != 0) {
            return dcr_error_set(DCR_EPARSE, "checkpoint %s: tensor \"%s\" is not in %s", ipath,
                                 key, json_string_value(value));
        }
    }
    for (size_t i = 0; i < ck->n; i++) {
        if (json_object_get(map, ck->by_name[i]->name) == NULL) {
            return dcr_error_set(DCR_EPARSE,
                                 "checkpoint %s: tensor \"%s\" of %s is not in the "
                                 "weight_map",
                                 ipath, ck->by_name[i]->name, ck->files[ck->by_name[i]->file].path);
        }
    }
    return DCR_OK;
}

static dcr_status_t dcr__st_open_files(dcr_checkpoint_t *ck, const char *dir,
                                       const char *const *leaves, int n)
{
    ck->files = calloc((size_t)n + 1, sizeof(*ck->files));
    if (ck->files == NULL) return dcr_error_set(DCR_ENOMEM, "checkpoint: out of memory");
    char path[DCR__ST_PATH_MAX];
    for (int i = 0; i < n; i++) {
        ck->nfiles = i + 1;
        if (dir != NULL) DCR_CHECK(dcr__st_join(path, sizeof(path), dir, leaves[i]));
        DCR_CHECK(dcr__st_map_file(dir != NULL ? path : leaves[i], i, &ck->files[i]));
    }
    return dcr__st_index_names(ck);
}

static dcr_status_t dcr__st_open_sharded(dcr_checkpoint_t *ck, const char *dir, const char *ipath)
{
    char *text = NULL;
    DCR_CHECK(dcr__st_read_text(ipath, &text));
    json_error_t jerr;
    json_t *index = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (index == NULL) {
        return dcr_error_set(DCR_EPARSE, "checkpoint %s: invalid JSON at line %d: %s", ipath,
                             jerr.line, jerr.text);
    }
    json_t *map = json_object_get(index, "weight_map");
    const char **files = NULL;
    int nfiles = 0;
    dcr_status_t st = DCR_OK;
    if (!json_is_object(map) || json_object_size(map) == 0) {
        st = dcr_error_set(DCR_EPARSE, "checkpoint %s: needs a non-empty object \"weight_map\"",
                           ipath);
        goto done;
    }
    DCR_CHECK_GOTO(dcr__st_index_files(ipath, map, &files, &nfiles), st, done);
    DCR_CHECK_GOTO(dcr__st_open_files(ck, dir, files, nfiles), st, done);
    st = dcr__st_check_map(ck, ipath, map, files);
done:
    free(files);
    json_decref(index);
    return st;
}

/* A directory: sharded when it has the index, else its model.safetensors. */
static dcr_status_t dcr__st_open_dir(dcr_checkpoint_t *ck, const char *dir)
{
    char ipath[DCR__ST_PATH_MAX];
    DCR_CHECK(dcr__st_join(ipath, sizeof(ipath), dir, DCR__ST_INDEX));
    if (access(ipath, F_OK) == 0) return dcr__st_open_sharded(ck, dir, ipath);
    DCR_CHECK(dcr__st_join(ipath, sizeof(ipath), dir, DCR__ST_SINGLE));
    if (access(ipath, F_OK) != 0) {
        return dcr_error_set(
            DCR_ENOTFOUND,
            "checkpoint %s: directory has neither " DCR__ST_INDEX " nor " DCR__ST_SINGLE, dir);
    }
    const char *leaves[] = {DCR__ST_SINGLE};
    return dcr__st_open_files(ck, dir, leaves, 1);
}

dcr_status_t dcr_checkpoint_open(const char *path, dcr_checkpoint_t **out_p)
{
    if (path == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "checkpoint: NULL argument");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int err = errno;
        return dcr_error_set(err == ENOENT ? DCR_ENOTFOUND : DCR_EIO, "checkpoint %s: %s", path,
                             strerror(err));
    }
    dcr_checkpoint_t *ck = calloc(1, sizeof(*ck));
    if (ck == NULL || (ck->path = strdup(path)) == NULL) {
        free(ck);
        return dcr_error_set(DCR_ENOMEM, "checkpoint %s: out of memory", path);
    }
    dcr_status_t st;
    if (S_ISDIR(sb.st_mode)) {
        st = dcr__st_open_dir(ck, path);
    } else {
        const char *leaves[] = {path};
        st = dcr__st_open_files(ck, NULL, leaves, 1);
    }
    if (st != DCR_OK) {
        dcr_checkpoint_close(ck);
        return st;
    }
    *out_p = ck;
    return DCR_OK;
}

size_t dcr_checkpoint_count(const dcr_checkpoint_t *ck)
{
    return ck->n;
}

const dcr_st_tensor_t *dcr_checkpoint_find(const dcr_checkpoint_t *ck, const char *name)
{
    size_t lo = 0, hi = ck->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->by_name[mid]->name, name);
        if (c == 0) return ck->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *dcr_checkpoint_file(const dcr_checkpoint_t *ck, int i)
{
    return i >= 0 && i < ck->nfiles ? ck->files[i].path : NULL;
}

const char *dcr_checkpoint_path(const dcr_checkpoint_t *ck)
{
    return ck->path;
}

dcr_status_t dcr_checkpoint_check_inventory(const dcr_checkpoint_t *ck, const dcr_inventory_t *inv,
                                            size_t *extra_p)
{
    size_t n = dcr_inventory_count(inv);
    char want[96], have[96];
    for (size_t i = 0; i < n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, i);
        const dcr_st_tensor_t *t = dcr_checkpoint_find(ck, d->name);
        if (t == NULL) {
            return dcr_error_set(DCR_ENOTFOUND,
                                 "checkpoint %s: tensor \"%s\" of the model is missing", ck->path,
                                 d->name);
        }
        bool same = t->dtype == d->dtype && t->ndim == d->ndim;
        for (int k = 0; same && k < d->ndim; k++) same = t->shape[k] == d->shape[k];
        if (!same) {
            dcr_shape_format(d->ndim, d->shape, want, sizeof(want));
            dcr_shape_format(t->ndim, t->shape, have, sizeof(have));
            return dcr_error_set(DCR_EPARSE,
                                 "checkpoint %s: tensor \"%s\" in %s is %s %s (the model expects "
                                 "%s %s)",
                                 ck->path, d->name, ck->files[t->file].path, t->dtype_name, have,
                                 dcr_st_dtype_name(d->dtype), want);
        }
    }
    /* Inventory names are unique and all found, so the rest are extras. */
    if (extra_p != NULL) *extra_p = ck->n - n;
    return DCR_OK;
}
