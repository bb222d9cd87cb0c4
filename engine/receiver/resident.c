/* Resident files (dcr/resident.h): a page of header, then every resident
 * parameter's bytes in declaration order at the parameter set's arena
 * offsets (dcr_params_arena_bytes), mapped MAP_SHARED so that what a process
 * wrote stays in the page cache after it dies. An attached receiver's
 * parameters are those bytes (dcr_params_place). */
#define _XOPEN_SOURCE 700
#include "dcr/resident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/hash.h"
#include "dcr/loader.h"
#include "receiver-internal.h"

#define RES_MAGIC  "DCRRES02"
#define RES_HEADER ((size_t)4096) /* data starts page-aligned */

/* The header's words; `state` is written last by a save (release order). */
typedef struct res_header {
    char magic[8];
    uint64_t layout;  /* hash of the parameters' names and sizes */
    uint64_t bytes;   /* data bytes after the header */
    uint64_t version; /* the committed version (while dirty: the one the attempt started from) */
    uint64_t state;   /* 0 never committed, DCR_RESIDENT_DIRTY or DCR_RESIDENT_CLEAN */
    uint64_t tau;     /* the attempt whose writes the dirty mark covers (0: a copy) */
} res_header_t;

struct dcr_resident {
    char *path;
    int fd;
    uint8_t *map;
    size_t map_len;
    uint64_t identity;
    uint64_t layout, bytes;       /* of the receiver it was opened for */
    const dcr_params_t *attached; /* parameters living in the mapping, or NULL */
};

const char *dcr_resident_state_name(dcr_resident_state_t s)
{
    switch (s) {
    case DCR_RESIDENT_ABSENT:
        return "absent";
    case DCR_RESIDENT_DIRTY:
        return "dirty";
    case DCR_RESIDENT_CLEAN:
        return "clean";
    case DCR_RESIDENT_FOREIGN:
        return "foreign";
    }
    return "?";
}

static uint64_t layout_of(const dcr_params_t *p, uint64_t identity, uint64_t *bytes_p)
{
    uint64_t h = dcr_hash64_mix(dcr_hash64_str("dcr-resident-layout") ^ identity);
    for (size_t i = 0; i < dcr_params_count(p); i++) {
        const dcr_param_t *x = dcr_params_at(p, i);
        h = dcr_hash64_mix(h ^ dcr_hash64_str(x->name));
        h = dcr_hash64_mix(h ^ (uint64_t)x->storage->bytes);
    }
    *bytes_p = dcr_params_arena_bytes(p);
    return h;
}

static bool has_data(const dcr_params_t *p)
{
    for (size_t i = 0; i < dcr_params_count(p); i++) {
        const dcr_param_t *x = dcr_params_at(p, i);
        if (x->storage->bytes > 0 && x->storage->data == NULL) return false;
    }
    return true;
}

/* Maps the file at its current size (0: nothing mapped). */
static dcr_status_t res_map(dcr_resident_t *f)
{
    if (f->map) munmap(f->map, f->map_len);
    f->map = NULL;
    f->map_len = 0;
    struct stat sb;
    if (fstat(f->fd, &sb) != 0)
        return dcr_error_set(DCR_EIO, "resident file %s: %s", f->path, strerror(errno));
    if ((size_t)sb.st_size < RES_HEADER) return DCR_OK;
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED)
        return dcr_error_set(DCR_EIO, "resident file %s: cannot map %lld bytes: %s", f->path,
                             (long long)sb.st_size, strerror(errno));
    f->map = m;
    f->map_len = (size_t)sb.st_size;
    return DCR_OK;
}

dcr_status_t dcr_resident_open(const char *path, const dcr_receiver_t *r, uint64_t identity,
                               dcr_resident_t **out_p)
{
    if (path == NULL || r == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "resident file: NULL argument");
    const dcr_params_t *p = dcr_receiver_params(r);
    if (!r->host)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "resident file %s: the receiver's storage is on device %s, which "
                             "the host cannot map (engine/device/WIRING.md)",
                             path, dcr_device_backend(r->dev)->hdr.name);
    if (!has_data(p))
        return dcr_error_set(DCR_EINVAL, "resident file %s: the receiver has no data (shape-only)",
                             path);
    dcr_resident_t *f = calloc(1, sizeof(*f));
    if (f == NULL) return dcr_error_set(DCR_ENOMEM, "resident file %s", path);
    f->fd = -1;
    f->path = strdup(path);
    f->identity = identity;
    f->layout = layout_of(p, identity, &f->bytes);
    dcr_status_t st = f->path ? DCR_OK : dcr_error_set(DCR_ENOMEM, "resident file %s", path);
    if (st == DCR_OK) {
        f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (f->fd < 0)
            st = dcr_error_set(DCR_EIO, "resident file %s: cannot open: %s", path, strerror(errno));
    }
    if (st == DCR_OK) st = res_map(f);
    if (st != DCR_OK) {
        dcr_resident_close(f);
        return st;
    }
    *out_p = f;
    return DCR_OK;
}

void dcr_resident_close(dcr_resident_t *f)
{
    if (f == NULL) return;
    if (f->map) munmap(f->map, f->map_len);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

dcr_resident_state_t dcr_resident_state(const dcr_resident_t *f, uint64_t *version_p)
{
    if (f == NULL || f->map == NULL) return DCR_RESIDENT_ABSENT;
    const res_header_t *h = (const res_header_t *)f->map;
    uint64_t state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
    if (memcmp(h->magic, RES_MAGIC, sizeof h->magic) != 0)
        return state == 0 && h->magic[0] == 0 ? DCR_RESIDENT_ABSENT : DCR_RESIDENT_FOREIGN;
    if (h->layout != f->layout || h->bytes != f->bytes || f->map_len < RES_HEADER + f->bytes)
        return DCR_RESIDENT_FOREIGN;
    if (state == 0) return DCR_RESIDENT_ABSENT; /* sized and attached, never committed */
    if (state != DCR_RESIDENT_DIRTY && state != DCR_RESIDENT_CLEAN) return DCR_RESIDENT_FOREIGN;
    if (version_p) *version_p = h->version;
    return state == DCR_RESIDENT_DIRTY ? DCR_RESIDENT_DIRTY : DCR_RESIDENT_CLEAN;
}

/* The receiver's parameters, checked against the layout f was opened for. */
static dcr_status_t same_layout(const dcr_resident_t *f, const dcr_params_t *p)
{
    uint64_t bytes = 0;
    if (layout_of(p, f->identity, &bytes) != f->layout || bytes != f->bytes)
        return dcr_error_set(DCR_EINVAL,
                             "resident file %s: the receiver's parameters differ from those it "
                             "was opened for",
                             f->path);
    return DCR_OK;
}

/* Sizes the file for the layout (a first use, or a file of another layout:
 * its state is cleared before its size changes, so no reader trusts what
 * the resize leaves) and stamps the header's identity. */
static dcr_status_t res_size(dcr_resident_t *f)
{
    size_t need = RES_HEADER + (size_t)f->bytes;
    if (f->map_len != need) {
        if (f->attached)
            return dcr_error_set(DCR_EINVAL, "resident file %s: resized while attached", f->path);
        if (f->map) __atomic_store_n(&((res_header_t *)f->map)->state, 0, __ATOMIC_RELEASE);
        if (ftruncate(f->fd, (off_t)need) != 0)
            return dcr_error_set(DCR_EIO, "resident file %s: cannot size to %zu bytes: %s", f->path,
                                 need, strerror(errno));
        DCR_CHECK(res_map(f));
    }
    res_header_t *h = (res_header_t *)f->map;
    if (memcmp(h->magic, RES_MAGIC, sizeof h->magic) != 0 || h->layout != f->layout ||
        h->bytes != f->bytes) {
        __atomic_store_n(&h->state, 0, __ATOMIC_RELEASE);
        memcpy(h->magic, RES_MAGIC, sizeof h->magic);
        h->layout = f->layout;
        h->bytes = f->bytes;
    }
    return DCR_OK;
}

dcr_status_t dcr_resident_save(dcr_resident_t *f, const dcr_receiver_t *r, uint64_t version)
{
    if (f == NULL || r == NULL) return dcr_error_set(DCR_EINVAL, "resident save: NULL argument");
    const dcr_params_t *p = dcr_receiver_params(r);
    DCR_CHECK(same_layout(f, p));
    if (f->attached != NULL && f->attached != p)
        return dcr_error_set(DCR_EINVAL, "resident file %s: attached to another receiver", f->path);
    res_header_t *h = NULL;
    if (f->attached == NULL) {
        DCR_CHECK(res_size(f));
        h = (res_header_t *)f->map;
        /* The mark covers the copy: a process killed mid-copy leaves dirty. */
        h->tau = 0;
        __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_DIRTY, __ATOMIC_RELEASE);
        dcr_params_arena_copy_out(p, f->map + RES_HEADER);
    }
    /* Attached: the bytes are the receiver's own, already in place. */
    h = (res_header_t *)f->map;
    h->version = version;
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_CLEAN, __ATOMIC_RELEASE);
    return DCR_OK;
}

void dcr_resident_mark_dirty(dcr_resident_t *f)
{
    if (f == NULL || f->map == NULL) return;
    res_header_t *h = (res_header_t *)f->map;
    if (memcmp(h->magic, RES_MAGIC, sizeof h->magic) != 0) return;
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == 0) return; /* never committed */
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_DIRTY, __ATOMIC_RELEASE);
}

dcr_status_t dcr_resident_load(const dcr_resident_t *f, dcr_receiver_t *r)
{
    if (f == NULL || r == NULL) return dcr_error_set(DCR_EINVAL, "resident load: NULL argument");
    if (dcr_resident_state(f, NULL) != DCR_RESIDENT_CLEAN)
        return dcr_error_set(DCR_EINVAL, "resident file %s is %s, not clean", f->path,
                             dcr_resident_state_name(dcr_resident_state(f, NULL)));
    const dcr_params_t *p = dcr_receiver_params(r);
    DCR_CHECK(same_layout(f, p));
    if (f->attached == p) return DCR_OK; /* its bytes are the file's */
    dcr_params_arena_copy_in(p, f->map + RES_HEADER);
    return DCR_OK;
}

dcr_status_t dcr_resident_attach(dcr_resident_t *f, dcr_receiver_t *r, bool adopt,
                                 dcr_resident_state_t *found_p)
{
    if (f == NULL || r == NULL) return dcr_error_set(DCR_EINVAL, "resident attach: NULL argument");
    if (f->attached)
        return dcr_error_set(DCR_EINVAL, "resident file %s: a receiver is attached already",
                             f->path);
    if (dcr_params_placed(r->params))
        return dcr_error_set(DCR_EINVAL,
                             "resident file %s: the receiver's parameters live elsewhere already",
                             f->path);
    DCR_CHECK(same_layout(f, r->params));
    dcr_resident_state_t found = dcr_resident_state(f, NULL);
    adopt = adopt && (found == DCR_RESIDENT_CLEAN || found == DCR_RESIDENT_DIRTY);
    if (!adopt) {
        /* r's bytes replace the file's: of no committed version until the
         * next save says which. */
        DCR_CHECK(res_size(f));
        __atomic_store_n(&((res_header_t *)f->map)->state, 0, __ATOMIC_SEQ_CST);
    }
    DCR_CHECK(dcr_params_place(r->params, f->map + RES_HEADER, (size_t)f->bytes, !adopt));
    f->attached = r->params;
    if (found_p) *found_p = found;
    return DCR_OK;
}

void dcr_resident_detach(dcr_resident_t *f, const dcr_receiver_t *r)
{
    if (f && r && f->attached == dcr_receiver_params(r)) f->attached = NULL;
}

bool dcr_resident_attached(const dcr_resident_t *f, const dcr_receiver_t *r)
{
    return f && r && f->attached == dcr_receiver_params(r);
}

dcr_status_t dcr_resident_begin(dcr_resident_t *f, uint64_t tau)
{
    if (f == NULL || f->attached == NULL)
        return dcr_error_set(DCR_EINVAL, "resident begin of attempt %llu: no attached receiver",
                             (unsigned long long)tau);
    res_header_t *h = (res_header_t *)f->map;
    /* Which attempt, then dirty, both before the attempt's first write: a
     * process killed between the two left a clean file with no writes. */
    __atomic_store_n(&h->tau, tau, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_DIRTY, __ATOMIC_SEQ_CST);
    return DCR_OK;
}

uint64_t dcr_resident_tau(const dcr_resident_t *f)
{
    if (f == NULL || f->map == NULL) return 0;
    return __atomic_load_n(&((const res_header_t *)f->map)->tau, __ATOMIC_ACQUIRE);
}

uint64_t dcr_resident_bytes(const dcr_resident_t *f)
{
    return f ? f->bytes : 0;
}
