/* Resident files (dcr/resident.h): a page of header, then every resident
 * parameter's bytes in declaration order, mapped MAP_SHARED so that what a
 * process wrote stays in the page cache after it dies. */
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

#define RES_MAGIC  "DCRRES01"
#define RES_HEADER ((size_t)4096) /* data starts page-aligned */

/* The header's words; `state` is written last by a save (release order). */
typedef struct res_header {
    char magic[8];
    uint64_t layout; /* hash of the parameters' names and sizes */
    uint64_t bytes;  /* data bytes after the header */
    uint64_t version;
    uint64_t state; /* DCR_RESIDENT_DIRTY or DCR_RESIDENT_CLEAN once saved */
} res_header_t;

struct dcr_resident {
    char *path;
    int fd;
    uint8_t *map;
    size_t map_len;
    uint64_t identity;
    uint64_t layout, bytes; /* of the receiver it was opened for */
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
    uint64_t bytes = 0;
    for (size_t i = 0; i < dcr_params_count(p); i++) {
        const dcr_param_t *x = dcr_params_at(p, i);
        h = dcr_hash64_mix(h ^ dcr_hash64_str(x->name));
        h = dcr_hash64_mix(h ^ (uint64_t)x->storage->bytes);
        bytes += x->storage->bytes;
    }
    *bytes_p = bytes;
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
    if (state == DCR_RESIDENT_DIRTY) return DCR_RESIDENT_DIRTY;
    if (state != DCR_RESIDENT_CLEAN) return DCR_RESIDENT_FOREIGN;
    if (version_p) *version_p = h->version;
    return DCR_RESIDENT_CLEAN;
}

dcr_status_t dcr_resident_save(dcr_resident_t *f, const dcr_receiver_t *r, uint64_t version)
{
    if (f == NULL || r == NULL) return dcr_error_set(DCR_EINVAL, "resident save: NULL argument");
    const dcr_params_t *p = dcr_receiver_params(r);
    uint64_t bytes = 0;
    if (layout_of(p, f->identity, &bytes) != f->layout || bytes != f->bytes)
        return dcr_error_set(DCR_EINVAL,
                             "resident file %s: the receiver's parameters differ from those it "
                             "was opened for",
                             f->path);
    size_t need = RES_HEADER + (size_t)f->bytes;
    if (f->map_len != need) {
        /* First save, or a file of another layout: mark it dirty before
         * its size changes, so no reader trusts what the resize leaves. */
        if (f->map) __atomic_store_n(&((res_header_t *)f->map)->state, 0, __ATOMIC_RELEASE);
        if (ftruncate(f->fd, (off_t)need) != 0)
            return dcr_error_set(DCR_EIO, "resident file %s: cannot size to %zu bytes: %s", f->path,
                                 need, strerror(errno));
        DCR_CHECK(res_map(f));
    }
    res_header_t *h = (res_header_t *)f->map;
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_DIRTY, __ATOMIC_RELEASE);
    memcpy(h->magic, RES_MAGIC, sizeof h->magic);
    h->layout = f->layout;
    h->bytes = f->bytes;
    uint8_t *dst = f->map + RES_HEADER;
    for (size_t i = 0; i < dcr_params_count(p); i++) {
        const dcr_param_t *x = dcr_params_at(p, i);
        if (x->storage->bytes) memcpy(dst, x->storage->data, x->storage->bytes);
        dst += x->storage->bytes;
    }
    h->version = version;
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_CLEAN, __ATOMIC_RELEASE);
    return DCR_OK;
}

void dcr_resident_mark_dirty(dcr_resident_t *f)
{
    if (f == NULL || f->map == NULL) return;
    res_header_t *h = (res_header_t *)f->map;
    if (memcmp(h->magic, RES_MAGIC, sizeof h->magic) != 0) return;
    __atomic_store_n(&h->state, (uint64_t)DCR_RESIDENT_DIRTY, __ATOMIC_RELEASE);
}

dcr_status_t dcr_resident_load(const dcr_resident_t *f, dcr_receiver_t *r)
{
    if (f == NULL || r == NULL) return dcr_error_set(DCR_EINVAL, "resident load: NULL argument");
    if (dcr_resident_state(f, NULL) != DCR_RESIDENT_CLEAN)
        return dcr_error_set(DCR_EINVAL, "resident file %s is %s, not clean", f->path,
                             dcr_resident_state_name(dcr_resident_state(f, NULL)));
    const dcr_params_t *p = dcr_receiver_params(r);
    uint64_t bytes = 0;
    if (layout_of(p, f->identity, &bytes) != f->layout || bytes != f->bytes)
        return dcr_error_set(DCR_EINVAL, "resident file %s: another receiver layout", f->path);
    const uint8_t *src = f->map + RES_HEADER;
    for (size_t i = 0; i < dcr_params_count(p); i++) {
        const dcr_param_t *x = dcr_params_at(p, i);
        if (x->storage->bytes) memcpy(x->storage->data, src, x->storage->bytes);
        src += x->storage->bytes;
    }
    return DCR_OK;
}

uint64_t dcr_resident_bytes(const dcr_resident_t *f)
{
    return f ? f->bytes : 0;
}
