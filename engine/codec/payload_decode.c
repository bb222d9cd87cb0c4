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
    uint8_t gap_bytes; /* of the words at gaps: the narrowest that holds a RICE item's gaps */
    uint8_t rice_k;
    uint8_t val_coding;
    uint64_t loc_len, val_len; /* segment bytes in the body */
    /* Where a version 2 item's decoded values and gaps start in the payload's
     * expansion buffer, DCR__NO_EXP for segments read in place; values and
     * gaps point there once every item is read (the buffer grows as items
     * decode, so it may move until then). */
    size_t val_exp, gap_exp;
} dcr__dec_item_t;

#define DCR__NO_EXP SIZE_MAX

struct dcr_payload {
    bool valid;
    dcr_payload_header_t hdr;
    dcr__buf_t body; /* the decompressed, unshuffled body */
    dcr__buf_t tmp;  /* scratch for undoing the shuffle of one segment */
    dcr__dec_item_t *items;
    size_t items_cap;
    size_t nitems;
    ZSTD_DCtx *dctx;
    /* Version 2: the decoded words of entropy-coded segments, and the table. */
    dcr__buf_t exp;
    size_t exp_at;
    dcr__huff_dec_t *huff;
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
    free(p->huff);
    dcr__buf_free(&p->exp);
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

static dcr_status_t dcr__item_kind(const dcr__dec_ctx_t *c, const uint8_t *e, bool v2,
                                   dcr__dec_item_t *it)
{
    it->ndim = e[DCR__I_NDIM];
    it->dtype = e[DCR__I_DTYPE];
    it->encoding = e[DCR__I_ENCODING];
    it->loc_type = e[DCR__I_LOCTYPE];
    it->gap_bytes = e[DCR__I_GAP_BYTES];
    it->val_coding = v2 ? e[DCR__I_VALCODING] : DCR_VALUES_RAW;
    it->rice_k = 0;
    if (it->ndim > DCR_MAX_DIMS)
        return dcr__fail(c, DCR_EPAYLOAD, "ndim %u above %d", it->ndim, DCR_MAX_DIMS);
    if (it->dtype >= DCR_DTYPE_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "dtype %u is not a dcr_dtype_t", it->dtype);
    if (it->encoding >= DCR_ENCODING_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "encoding %u is neither xor (0) nor overwrite (1)",
                         it->encoding);
    if (it->loc_type > (v2 ? DCR_LOCATION_RICE : DCR_LOCATION_GAPS))
        return dcr__fail(c, DCR_EPAYLOAD, "location type %u is not run (0), gaps (1)%s",
                         it->loc_type, v2 ? " or rice (2)" : " (version 1)");
    if (it->loc_type == DCR_LOCATION_RICE) {
        if (it->gap_bytes > DCR__RICE_K_MAX)
            return dcr__fail(c, DCR_EPAYLOAD, "Rice parameter %u above %d", it->gap_bytes,
                             DCR__RICE_K_MAX);
        it->rice_k = it->gap_bytes;
        it->gap_bytes = 8;
    }
    if (it->val_coding >= DCR_VALUE_CODING_COUNT)
        return dcr__fail(c, DCR_EPAYLOAD, "value coding %u is neither raw (0) nor huffman (1)",
                         it->val_coding);
    if (it->val_coding == DCR_VALUES_HUFFMAN && dcr_dtype_size((dcr_dtype_t)it->dtype) != 2)
        return dcr__fail(c, DCR_EPAYLOAD, "huffman values need a 16-bit dtype, not dtype %u",
                         it->dtype);
    for (int k = v2 ? 1 : 0; k < DCR__I_RESERVED_SIZE; k++)
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
/* A Huffman-coded value segment (version 2): decoded into the payload's
 * expansion buffer, grown here within the total the item table pass
 * checked against the budget. */
static dcr_status_t dcr__values_huffman(dcr_payload_t *p, const dcr__dec_ctx_t *c, dcr__layout_t *l,
                                        uint64_t val_off, dcr__dec_item_t *it)
{
    if (val_off != l->next_val)
        return dcr__fail(c, DCR_EPAYLOAD, "value offset %" PRIu64 ", expected %" PRIu64, val_off,
                         l->next_val);
    DCR_CHECK(dcr__buf_reserve(&p->exp, p->exp_at + it->count * 2));
    uint8_t *dst = p->exp.data + p->exp_at;
    size_t used =
        dcr__huff_read(p->huff, l->vals + val_off, (size_t)(l->vals_len - val_off), it->count, dst);
    if (used == SIZE_MAX)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "huffman values: a code no symbol has, a stream past the values "
                         "section, or nonzero padding bits");
    it->val_exp = p->exp_at;
    it->val_len = used;
    p->exp_at += it->count * 2;
    l->next_val += used;
    return DCR_OK;
}

static dcr_status_t dcr__locations_rice(dcr_payload_t *p, const dcr__dec_ctx_t *c, dcr__layout_t *l,
                                        uint64_t loc_off, dcr__dec_item_t *it)
{
    if (loc_off != l->next_loc)
        return dcr__fail(c, DCR_EPAYLOAD, "location offset %" PRIu64 ", expected %" PRIu64, loc_off,
                         l->next_loc);
    /* Room for 8-byte words; the decoder keeps the narrowest that fits. */
    DCR_CHECK(dcr__buf_reserve(&p->exp, p->exp_at + (it->count - 1) * 8));
    uint8_t *dst = p->exp.data + p->exp_at;
    it->last = it->first; /* a single record has no gaps; the index check sets it otherwise */
    unsigned width = 8;
    size_t used = dcr__rice_read(l->locs + loc_off, (size_t)(l->locs_len - loc_off), it->count - 1,
                                 it->rice_k, dst, &width);
    if (used == SIZE_MAX)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "rice gaps: a stream past the locations section, a gap of 2^62 or "
                         "more, or nonzero padding bits");
    it->gap_exp = p->exp_at;
    it->gap_bytes = (uint8_t)width;
    it->loc_len = used;
    p->exp_at += (it->count - 1) * width;
    l->next_loc += used;
    return DCR_OK;
}

static dcr_status_t dcr__item_segments(dcr_payload_t *p, const dcr__dec_ctx_t *c, const uint8_t *e,
                                       dcr__layout_t *l, dcr__dec_item_t *it)
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
    it->count = (size_t)count;
    it->first = (int64_t)first;
    it->val_exp = it->gap_exp = DCR__NO_EXP;
    if (it->val_coding == DCR_VALUES_HUFFMAN) {
        DCR_CHECK(dcr__values_huffman(p, c, l, val_off, it));
    } else if (val_off != l->next_val) {
        return dcr__fail(c, DCR_EPAYLOAD, "value offset %" PRIu64 ", expected %" PRIu64, val_off,
                         l->next_val);
    } else if (count > (l->vals_len - val_off) / size) {
        return dcr__fail(c, DCR_EPAYLOAD,
                         "%" PRIu64 " values of %" PRIu64 " bytes at offset %" PRIu64
                         " pass the end of the values section (%" PRIu64 " bytes)",
                         count, size, val_off, l->vals_len);
    } else {
        it->values = l->vals + val_off;
        it->val_len = count * size;
        l->next_val += count * size;
    }
    it->loc_len = 0;
    if (it->loc_type == DCR_LOCATION_RICE) return dcr__locations_rice(p, c, l, loc_off, it);
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
    it->loc_len = (count - 1) * w;
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

/* Version 2, before any item is read: the bytes the entropy-coded segments
 * decode to (16-bit words for Huffman values, u64 words for Rice gaps),
 * checked with the body against the reader's budget before allocating
 * them (FORMAT.md 8.5), and the Huffman table at the start of the values
 * section when an item uses it. */
static dcr_status_t dcr__v2_prepare(dcr_payload_t *p, const dcr__dec_ctx_t *c, uint32_t nitems,
                                    uint64_t budget, dcr__layout_t *l)
{
    uint64_t expand = 0, likely = 0, room = budget - p->body.len; /* body.len <= budget: rule 3 */
    /* Every Rice code and Huffman code takes at least one bit of the body,
     * and one bit expands to at most 8 bytes (a u64 gap): a body can never
     * decode to more than 64 times its size, whatever the budget allows. */
    if (p->body.len <= room / 64) room = 64 * (uint64_t)p->body.len;
    bool huffman = false;
    for (uint32_t i = 0; i < nitems; i++) {
        const uint8_t *e = p->body.data + DCR__BODY_HEADER_SIZE + (size_t)DCR__ITEM_SIZE * i;
        uint64_t count = dcr__ld64(e + DCR__I_COUNT), add = 0;
        if (count > DCR__RAW_MAX) count = DCR__RAW_MAX; /* fails the budget below */
        if (e[DCR__I_VALCODING] == DCR_VALUES_HUFFMAN) add += count * 2, huffman = true;
        likely += add;
        if (e[DCR__I_LOCTYPE] == DCR_LOCATION_RICE && count > 0) {
            add += (count - 1) * 8;
            likely += (count - 1) * 2;
        }
        if (add > room - expand)
            return dcr__fail(c, DCR_EPAYLOAD,
                             "entropy-coded segments decode to more than this reader's limit of "
                             "%" PRIu64 " bytes with the body (item %" PRIu32 ")",
                             budget, i);
        expand += add;
    }
    /* Room for 2-byte gaps, in one allocation; it grows as items decode
     * where gaps need more (the bound above allows 8). */
    DCR_CHECK(dcr__buf_reserve(&p->exp, (size_t)likely));
    p->exp_at = 0;
    if (!huffman) return DCR_OK;
    if (p->huff == NULL && (p->huff = malloc(sizeof *p->huff)) == NULL)
        return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate a Huffman decoder");
    size_t table = dcr__huff_table_read(p->huff, l->vals, (size_t)l->vals_len);
    if (table == 0)
        return dcr__fail(c, DCR_EPAYLOAD,
                         "huffman table at the start of the values section is invalid (lengths "
                         "1..%d, at most 65536 ascending distinct symbols per length, a complete "
                         "code or one symbol)",
                         DCR__HUFF_MAX_LEN);
    l->next_val = table;
    return DCR_OK;
}

static dcr_status_t dcr__items_read(dcr_payload_t *p, dcr__dec_ctx_t *c,
                                    const dcr_payload_header_t *h, uint64_t budget)
{
    uint32_t nitems = h->item_count;
    bool v2 = h->version == DCR_CODEC_VERSION_2;
    dcr__layout_t l;
    DCR_CHECK(dcr__layout_read(p, c, nitems, &l));
    DCR_CHECK(dcr__items_reserve(p, nitems));
    if (v2) DCR_CHECK(dcr__v2_prepare(p, c, nitems, budget, &l));
    for (uint32_t i = 0; i < nitems; i++) {
        const uint8_t *e = p->body.data + DCR__BODY_HEADER_SIZE + (size_t)DCR__ITEM_SIZE * i;
        dcr__dec_item_t *it = &p->items[i];
        c->item = i;
        c->name = NULL;
        DCR_CHECK(dcr__item_name(c, e, &l, it));
        DCR_CHECK(dcr__item_kind(c, e, v2, it));
        DCR_CHECK(dcr__item_shape(c, e, it));
        DCR_CHECK(dcr__item_segments(p, c, e, &l, it));
    }
    c->item = DCR__NO_ITEM;
    for (uint32_t i = 0; i < nitems; i++) {
        dcr__dec_item_t *it = &p->items[i];
        if (it->val_exp != DCR__NO_EXP) it->values = p->exp.data + it->val_exp;
        if (it->gap_exp != DCR__NO_EXP) it->gaps = p->exp.data + it->gap_exp;
    }
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
        /* Entropy-coded segments were never shuffled. */
        if (it->val_coding == DCR_VALUES_RAW)
            DCR_CHECK(dcr__unshuffle_segment(p, it->values, it->count,
                                             dcr_dtype_size((dcr_dtype_t)it->dtype)));
        if (it->gaps && it->loc_type == DCR_LOCATION_GAPS)
            DCR_CHECK(dcr__unshuffle_segment(p, it->gaps, it->count - 1, it->gap_bytes));
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
    uint64_t budget = policy != NULL && policy->max_raw != 0 ? policy->max_raw : DCR__RAW_MAX;
    DCR_CHECK(dcr__items_read(p, &c, &h, budget));
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
        .gap_bytes = it->loc_type == DCR_LOCATION_GAPS ? it->gap_bytes : 0,
        .rice_k = it->rice_k,
        .value_coding = (dcr_value_coding_t)it->val_coding,
        .location_bytes = (size_t)it->loc_len,
        .value_bytes = (size_t)it->val_len,
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
