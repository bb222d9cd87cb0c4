/* The payload decoder. A payload comes from a peer, so nothing in it is used
 * before all of it has been checked: header and digest first, then the zstd
 * frame, then the item table against the section sizes, then (after undoing
 * the shuffle) every index. Only when the last check passes does the handle
 * expose the result; a failure leaves it empty. FORMAT.md lists the rules in
 * the order they are checked here. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <zstd.h>

#include "codec-internal.h"

typedef struct dcr__dec_item {
    const char *name;
    const uint8_t *gaps;   /* NULL for a run */
    const uint8_t *values; /* count words of dtype */
    size_t count;
    int64_t first;
    int64_t last;
    int64_t numel;
    int64_t shape[DCR_MAX_DIMS];
    uint8_t ndim;
    uint8_t dtype;
    uint8_t encoding;
    uint8_t loc_type;
    uint8_t gap_bytes;
} dcr__dec_item_t;

struct dcr_payload {
    bool valid;
    dcr_payload_header_t hdr;
    dcr__buf_t body; /* the decompressed, unshuffled body */
    dcr__buf_t tmp;  /* scratch for undoing the shuffle of one segment */
    dcr__dec_item_t *items;
    size_t items_cap;
    size_t nitems;
    ZSTD_DCtx *dctx;
};

/* What a failing check needs to name: the payload and, once known, the item. */
typedef struct dcr__dec_ctx {
    char who[96];
    size_t item;
    const char *name; /* NULL until the item's name has been checked */
} dcr__dec_ctx_t;

#define DCR__NO_ITEM SIZE_MAX

static dcr_status_t dcr__fail(const dcr__dec_ctx_t *c, dcr_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static dcr_status_t dcr__fail(const dcr__dec_ctx_t *c, dcr_status_t st, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->item == DCR__NO_ITEM) return dcr_error_set(st, "%s: %s", c->who, msg);
    if (c->name == NULL) return dcr_error_set(st, "%s: item %zu: %s", c->who, c->item, msg);
    return dcr_error_set(st, "%s: item %zu (%.128s): %s", c->who, c->item, c->name, msg);
}

dcr_status_t dcr_payload_create(dcr_payload_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_create: out_p is NULL");
    dcr_payload_t *p = calloc(1, sizeof *p);
    if (p == NULL) return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate a payload");
    p->dctx = ZSTD_createDCtx();
    if (p->dctx == NULL) {
        free(p);
        return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate a zstd decompression context");
    }
    *out_p = p;
    return DCR_OK;
}

void dcr_payload_destroy(dcr_payload_t *p)
{
    if (p == NULL) return;
    ZSTD_freeDCtx(p->dctx);
    free(p->items);
    dcr__buf_free(&p->tmp);
    dcr__buf_free(&p->body);
    free(p);
}

static dcr_status_t dcr__decompress(dcr_payload_t *p, const dcr__dec_ctx_t *c,
                                    const dcr_payload_header_t *h, const uint8_t *src)
{
    size_t clen = (size_t)h->compressed_len;
    /* A skippable frame (magic 0x184D2A50..5F) carries no content; the body
     * must be exactly one ordinary frame (FORMAT.md section 1, rule 7). */
    if (clen >= 4 && (dcr__ld32(src) & 0xFFFFFFF0u) == 0x184D2A50u)
        return dcr__fail(c, DCR_EPAYLOAD, "body is a zstd skippable frame, not a data frame");
    unsigned long long fcs = ZSTD_getFrameContentSize(src, clen);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
        return dcr__fail(c, DCR_EPAYLOAD, "body is not a zstd frame");
    if (ZSTD_getDictID_fromFrame(src, clen) != 0)
        return dcr__fail(c, DCR_EPAYLOAD, "zstd frame names dictionary %u; payloads use none",
                         ZSTD_getDictID_fromFrame(src, clen));
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN)
        return dcr__fail(c, DCR_EPAYLOAD, "zstd frame does not declare its content size");
    if (fcs != h->raw_len)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "zstd frame declares %llu content bytes, header raw length is %" PRIu64,
                         fcs, h->raw_len);
    size_t frame = ZSTD_findFrameCompressedSize(src, clen);
    if (ZSTD_isError(frame) || frame != clen)
        return dcr__fail(c, DCR_EPAYLOAD, "body is not exactly one zstd frame of %zu bytes", clen);
    /* The header check bounded raw_len by the caller's budget and by the
     * compressed length's largest expansion, so this allocation is what the
     * caller agreed to; one-shot decompression into exactly raw_len bytes
     * cannot write past it and needs no window buffer of its own. */
    size_t raw_len = (size_t)h->raw_len;
    DCR_CHECK(dcr__buf_reserve(&p->body, raw_len));
    size_t n = ZSTD_decompressDCtx(p->dctx, p->body.data, raw_len, src, clen);
    if (ZSTD_isError(n))
        return dcr__fail(c, DCR_EPAYLOAD, "zstd frame is corrupt: %s", ZSTD_getErrorName(n));
    if (n != raw_len)
        return dcr__fail(c, DCR_EPAYLOAD, "body decompressed to %zu bytes, header raw length %zu",
                         n, raw_len);
    p->body.len = raw_len;
    return DCR_OK;
}

/* Section sizes and where each section starts; `next_*` is where the next
 * item's segment must start for the sections to tile (FORMAT.md section 3). */
typedef struct dcr__layout {
    uint64_t names_len, locs_len, vals_len;
    const uint8_t *names, *locs, *vals;
    uint64_t next_name, next_loc, next_val;
} dcr__layout_t;

static dcr_status_t dcr__layout_read(dcr_payload_t *p, const dcr__dec_ctx_t *c, uint32_t nitems,
                                     dcr__layout_t *l)
{
    const uint8_t *b = p->body.data;
    uint64_t table_end = DCR__BODY_HEADER_SIZE + (uint64_t)DCR__ITEM_SIZE * nitems;
    uint64_t rest = p->body.len - table_end; /* header check guaranteed raw_len >= table_end */
    memset(l, 0, sizeof *l);
    l->names_len = dcr__ld64(b + 0);
    l->locs_len = dcr__ld64(b + 8);
    l->vals_len = dcr__ld64(b + 16);
    /* Name offsets are u32: a names section any longer could not be tiled. */
    if (l->names_len > UINT32_MAX)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "names section of %" PRIu64 " bytes exceeds 2^32 - 1, the most a u32 "
                         "name offset can tile",
                         l->names_len);
    if (l->names_len > rest || l->locs_len > rest - l->names_len ||
        l->vals_len != rest - l->names_len - l->locs_len)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "body header sections (names %" PRIu64 ", locations %" PRIu64
                         ", values %" PRIu64 ") do not add up to the %" PRIu64
                         " bytes after the item table",
                         l->names_len, l->locs_len, l->vals_len, rest);
    l->names = b + table_end;
    l->locs = l->names + l->names_len;
    l->vals = l->locs + l->locs_len;
    return DCR_OK;
}

static dcr_status_t dcr__item_name(dcr__dec_ctx_t *c, const uint8_t *e, dcr__layout_t *l,
                                   dcr__dec_item_t *it)
{
    uint32_t off = dcr__ld32(e + DCR__I_NAME_OFF);
    uint16_t len = dcr__ld16(e + DCR__I_NAME_LEN);
    if (off != l->next_name)
        return dcr__fail(c, DCR_EPAYLOAD, "name offset %" PRIu32 ", expected %" PRIu64, off,
                         l->next_name);
    if (len == 0 || len > DCR_CODEC_NAME_MAX || (uint64_t)len + 1 > l->names_len - off)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "name length %u outside 1..%d or past the names section (%" PRIu64
                         " bytes)",
                         (unsigned)len, DCR_CODEC_NAME_MAX, l->names_len);
    const uint8_t *name = l->names + off;
    for (uint16_t k = 0; k < len; k++)
        if (name[k] < 0x21 || name[k] > 0x7e)
            return dcr__fail(c, DCR_EPAYLOAD, "name byte %u is 0x%02x, not printable ASCII",
                             (unsigned)k, name[k]);
    if (name[len] != 0) return dcr__fail(c, DCR_EPAYLOAD, "name is not NUL-terminated");
    it->name = (const char *)name;
    c->name = it->name;
    l->next_name += (uint64_t)len + 1;
    return DCR_OK;
}

static dcr_status_t dcr__item_kind(const dcr__dec_ctx_t *c, const uint8_t *e, dcr__dec_item_t *it)
{
    it->ndim = e[DCR__I_NDIM];
    it->dtype = e[DCR__I_DTYPE];
    it->encoding = e[DCR__I_ENCODING];
    it->loc_type = e[DCR__I_LOCTYPE];
    it->gap_bytes = e[DCR__I_GAP_BYTES];
    if (it->ndim > DCR_MAX_DIMS)
        return dcr__fail(c, DCR_EPAYLOAD, "ndim %u above %d", it->ndim, DCR_MAX_DIMS);
    if (it->dtype >= DCR_DTYPE_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "dtype %u is not a dcr_dtype_t", it->dtype);
    if (it->encoding >= DCR_ENCODING_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "encoding %u is neither xor (0) nor overwrite (1)",
                         it->encoding);
    if (it->loc_type >= DCR_LOCATION_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "location type %u is neither run (0) nor gaps (1)",
                         it->loc_type);
    for (int k = 0; k < DCR__I_RESERVED_SIZE; k++)
        if (e[DCR__I_RESERVED + k] != 0)
            return dcr__fail(c, DCR_EPAYLOAD, "reserved byte %d is 0x%02x, must be 0",
                             DCR__I_RESERVED + k, e[DCR__I_RESERVED + k]);
    return DCR_OK;
}

static dcr_status_t dcr__item_shape(const dcr__dec_ctx_t *c, const uint8_t *e, dcr__dec_item_t *it)
{
    for (int d = 0; d < DCR_MAX_DIMS; d++) {
        uint64_t dim = dcr__ld64(e + DCR__I_DIMS + 8 * d);
        if (d >= it->ndim && dim != 0)
            return dcr__fail(c, DCR_EPAYLOAD, "dim %d is %" PRIu64 " beyond ndim %u, must be 0", d,
                             dim, it->ndim);
        if (dim > (uint64_t)DCR__NUMEL_MAX)
            return dcr__fail(c, DCR_EPAYLOAD, "dim %d is %" PRIu64 ", above 2^62", d, dim);
        it->shape[d] = (int64_t)dim;
    }
    it->numel = dcr__numel_checked(it->ndim, it->shape);
    if (it->numel < 0) return dcr__fail(c, DCR_EPAYLOAD, "shape's element count exceeds 2^62");
    return DCR_OK;
}

/* Bounds of the value segment and of the locations; the gap words
 * themselves are checked after the shuffle is undone. */
static dcr_status_t dcr__item_segments(const dcr__dec_ctx_t *c, const uint8_t *e, dcr__layout_t *l,
                                       dcr__dec_item_t *it)
{
    uint64_t count = dcr__ld64(e + DCR__I_COUNT);
    uint64_t first = dcr__ld64(e + DCR__I_FIRST);
    uint64_t loc_off = dcr__ld64(e + DCR__I_LOC_OFF);
    uint64_t val_off = dcr__ld64(e + DCR__I_VAL_OFF);
    uint64_t numel = (uint64_t)it->numel;
    uint64_t size = dcr_dtype_size((dcr_dtype_t)it->dtype);
    if (count == 0) return dcr__fail(c, DCR_EPAYLOAD, "value count is 0 (empty items are invalid)");
    if (first >= numel)
        return dcr__fail(c, DCR_EPAYLOAD, "first index %" PRIu64 " >= numel %" PRIu64, first,
                         numel);
    if (count > numel - first)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "value count %" PRIu64 " from first index %" PRIu64
                         " runs past numel %" PRIu64,
                         count, first, numel);
    if (val_off != l->next_val)
        return dcr__fail(c, DCR_EPAYLOAD, "value offset %" PRIu64 ", expected %" PRIu64, val_off,
                         l->next_val);
    if (count > (l->vals_len - val_off) / size)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "%" PRIu64 " values of %" PRIu64 " bytes at offset %" PRIu64
                         " pass the end of the values section (%" PRIu64 " bytes)",
                         count, size, val_off, l->vals_len);
    it->count = (size_t)count;
    it->first = (int64_t)first;
    it->values = l->vals + val_off;
    l->next_val += count * size;
    if (it->loc_type == DCR_LOCATION_RUN) {
        if (it->gap_bytes != 0 || loc_off != 0)
            return dcr__fail(c, DCR_EPAYLOAD,
                             "run item has gap bytes %u and location offset %" PRIu64
                             ", both must be 0",
                             it->gap_bytes, loc_off);
        it->gaps = NULL;
        it->last = it->first + (int64_t)count - 1;
        return DCR_OK;
    }
    unsigned w = it->gap_bytes;
    if (w != 1 && w != 2 && w != 4 && w != 8)
        return dcr__fail(c, DCR_EPAYLOAD, "gap bytes %u, expected 1, 2, 4 or 8", w);
    if (loc_off != l->next_loc)
        return dcr__fail(c, DCR_EPAYLOAD, "location offset %" PRIu64 ", expected %" PRIu64, loc_off,
                         l->next_loc);
    if (count - 1 > (l->locs_len - loc_off) / w)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "%" PRIu64 " gaps of %u bytes at offset %" PRIu64
                         " pass the end of the locations section (%" PRIu64 " bytes)",
                         count - 1, w, loc_off, l->locs_len);
    it->gaps = l->locs + loc_off;
    l->next_loc += (count - 1) * w;
    return DCR_OK;
}

static dcr_status_t dcr__items_reserve(dcr_payload_t *p, size_t n)
{
    if (n <= p->items_cap) return DCR_OK;
    dcr__dec_item_t *items = realloc(p->items, n * sizeof *items);
    if (items == NULL && n > 0)
        return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate %zu decoded items", n);
    p->items = items;
    p->items_cap = n;
    return DCR_OK;
}

static dcr_status_t dcr__items_read(dcr_payload_t *p, dcr__dec_ctx_t *c, uint32_t nitems)
{
    dcr__layout_t l;
    DCR_CHECK(dcr__layout_read(p, c, nitems, &l));
    DCR_CHECK(dcr__items_reserve(p, nitems));
    for (uint32_t i = 0; i < nitems; i++) {
        const uint8_t *e = p->body.data + DCR__BODY_HEADER_SIZE + (size_t)DCR__ITEM_SIZE * i;
        dcr__dec_item_t *it = &p->items[i];
        c->item = i;
        c->name = NULL;
        DCR_CHECK(dcr__item_name(c, e, &l, it));
        DCR_CHECK(dcr__item_kind(c, e, it));
        DCR_CHECK(dcr__item_shape(c, e, it));
        DCR_CHECK(dcr__item_segments(c, e, &l, it));
    }
    c->item = DCR__NO_ITEM;
    if (l.next_name != l.names_len || l.next_loc != l.locs_len || l.next_val != l.vals_len)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "items use %" PRIu64 "/%" PRIu64 "/%" PRIu64
                         " bytes of the names/locations/values sections, which hold %" PRIu64
                         "/%" PRIu64 "/%" PRIu64,
                         l.next_name, l.next_loc, l.next_val, l.names_len, l.locs_len, l.vals_len);
    return DCR_OK;
}

static dcr_status_t dcr__unshuffle_segment(dcr_payload_t *p, const uint8_t *seg, size_t nwords,
                                           size_t width)
{
    if (width <= 1 || nwords == 0) return DCR_OK;
    DCR_CHECK(dcr__buf_reserve(&p->tmp, nwords * width));
    /* Segments live inside p->body, so casting away const is writing our own buffer. */
    memcpy(p->tmp.data, seg, nwords * width);
    dcr_codec_unshuffle((uint8_t *)seg, p->tmp.data, nwords, width);
    return DCR_OK;
}

static dcr_status_t dcr__unshuffle(dcr_payload_t *p, uint32_t nitems)
{
    for (uint32_t i = 0; i < nitems; i++) {
        const dcr__dec_item_t *it = &p->items[i];
        DCR_CHECK(dcr__unshuffle_segment(p, it->values, it->count,
                                         dcr_dtype_size((dcr_dtype_t)it->dtype)));
        if (it->gaps) DCR_CHECK(dcr__unshuffle_segment(p, it->gaps, it->count - 1, it->gap_bytes));
    }
    return DCR_OK;
}

static dcr_status_t dcr__indices_check(dcr_payload_t *p, dcr__dec_ctx_t *c, uint32_t nitems)
{
    for (uint32_t i = 0; i < nitems; i++) {
        dcr__dec_item_t *it = &p->items[i];
        size_t bad;
        if (it->gaps == NULL) continue;
        if (!dcr__gaps_check(it->gaps, it->count - 1, it->gap_bytes, it->first, it->numel,
                             &it->last, &bad)) {
            c->item = i;
            c->name = it->name;
            return dcr__fail(c, DCR_EPAYLOAD,
                             "gap %zu is 0 or carries the index to or past numel %" PRId64
                             " (indices must increase strictly and stay below numel)",
                             bad, it->numel);
        }
    }
    return DCR_OK;
}

dcr_status_t dcr_payload_decode(dcr_payload_t *p, const void *buf, size_t len)
{
    return dcr_payload_decode_with(p, buf, len, NULL);
}

/* The decode behind both entries; verify_digest false only where the caller
 * has verified the digest of these same bytes under the same policy. */
static dcr_status_t dcr__decode(dcr_payload_t *p, const void *buf, size_t len,
                                const dcr_payload_policy_t *policy, bool verify_digest)
{
    if (p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_decode: payload handle is NULL");
    p->valid = false;
    p->nitems = 0;
    dcr_payload_header_t h;
    DCR_CHECK(dcr__header_check(buf, len, verify_digest, policy, &h));
    dcr__dec_ctx_t c = {.item = DCR__NO_ITEM, .name = NULL};
    snprintf(c.who, sizeof c.who, "payload (tau %" PRIu64 ", owner %" PRIu32 ", id %" PRIu64 ")",
             h.tau, h.owner, h.payload_id);
    DCR_CHECK(dcr__decompress(p, &c, &h, (const uint8_t *)buf + DCR_CODEC_HEADER_SIZE));
    DCR_CHECK(dcr__items_read(p, &c, h.item_count));
    if (h.flags & DCR_CODEC_FLAG_SHUFFLE) DCR_CHECK(dcr__unshuffle(p, h.item_count));
    DCR_CHECK(dcr__indices_check(p, &c, h.item_count));
    p->hdr = h;
    p->nitems = h.item_count;
    p->valid = true;
    return DCR_OK;
}

dcr_status_t dcr_payload_decode_with(dcr_payload_t *p, const void *buf, size_t len,
                                     const dcr_payload_policy_t *policy)
{
    return dcr__decode(p, buf, len, policy, true);
}

dcr_status_t dcr_payload_decode_admitted(dcr_payload_t *p, const void *buf, size_t len,
                                         const dcr_payload_policy_t *policy)
{
    return dcr__decode(p, buf, len, policy, false);
}

const dcr_payload_header_t *dcr_payload_get_header(const dcr_payload_t *p)
{
    return (p != NULL && p->valid) ? &p->hdr : NULL;
}

size_t dcr_payload_item_count(const dcr_payload_t *p)
{
    return (p != NULL && p->valid) ? p->nitems : 0;
}

static const dcr__dec_item_t *dcr__item_at(const dcr_payload_t *p, size_t i)
{
    if (p == NULL || !p->valid || i >= p->nitems) {
        dcr_error_set(DCR_EINVAL, "codec: item %zu out of range (payload holds %zu)", i,
                      dcr_payload_item_count(p));
        return NULL;
    }
    return &p->items[i];
}

dcr_status_t dcr_payload_item(const dcr_payload_t *p, size_t i, dcr_payload_item_t *out_p)
{
    const dcr__dec_item_t *it = dcr__item_at(p, i);
    if (it == NULL) return DCR_EINVAL;
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_item: out_p is NULL");
    dcr_payload_item_t o = {
        .name = it->name,
        .ndim = it->ndim,
        .numel = it->numel,
        .dtype = (dcr_dtype_t)it->dtype,
        .encoding = (dcr_encoding_t)it->encoding,
        .location = (dcr_location_type_t)it->loc_type,
        .gap_bytes = it->gap_bytes,
        .count = it->count,
        .first = it->first,
        .last = it->last,
        .values = it->values,
    };
    memcpy(o.shape, it->shape, sizeof o.shape);
    *out_p = o;
    return DCR_OK;
}

dcr_status_t dcr_payload_item_indices(const dcr_payload_t *p, size_t i, int64_t *dst)
{
    const dcr__dec_item_t *it = dcr__item_at(p, i);
    if (it == NULL) return DCR_EINVAL;
    if (dst == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_item_indices: dst is NULL");
    if (it->gaps == NULL) {
        for (size_t k = 0; k < it->count; k++) dst[k] = it->first + (int64_t)k;
    } else {
        dcr__gaps_expand(it->gaps, it->count - 1, it->gap_bytes, it->first, dst);
    }
    return DCR_OK;
}

dcr_status_t dcr_payload_item_values(const dcr_payload_t *p, size_t i, void *dst)
{
    const dcr__dec_item_t *it = dcr__item_at(p, i);
    if (it == NULL) return DCR_EINVAL;
    if (dst == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_item_values: dst is NULL");
    memcpy(dst, it->values, it->count * dcr_dtype_size((dcr_dtype_t)it->dtype));
    return DCR_OK;
}
