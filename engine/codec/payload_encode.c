/* The payload encoder: items accumulate in three growable section buffers
 * (names, locations, values) plus a table of fixed-size entries; finish lays
 * the body out as FORMAT.md section 2 prescribes, shuffles if asked,
 * compresses it and writes the header. Every buffer and the zstd context are
 * kept between payloads, because an owner encodes bucket after bucket on its
 * hot path. */
#include <inttypes.h>
#include <zstd.h>

#include "codec-internal.h"

/* One item table entry before serialization. */
typedef struct dcr__enc_item {
    uint64_t count;
    uint64_t first;
    uint64_t loc_off;
    uint64_t val_off;
    uint64_t dims[DCR_MAX_DIMS];
    uint32_t name_off;
    uint16_t name_len;
    uint8_t ndim;
    uint8_t dtype;
    uint8_t encoding;
    uint8_t loc_type;
    uint8_t gap_bytes;
    /* The version 2 plan (dcr__plan_v2): codings, and segment offsets and
     * sizes in the version 2 sections. */
    uint8_t loc_coding; /* DCR_LOCATION_RICE or loc_type */
    uint8_t val_coding; /* dcr_value_coding_t */
    uint8_t rice_k;
    uint64_t loc_off2, loc_len2, val_off2, val_len2;
} dcr__enc_item_t;

struct dcr_encoder {
    dcr__enc_item_t *items;
    size_t nitems;
    size_t items_cap;
    dcr__buf_t names;
    dcr__buf_t locs;
    dcr__buf_t vals;
    dcr__buf_t raw; /* the assembled body */
    dcr__buf_t out; /* header + compressed body, handed to the caller */
    ZSTD_CCtx *cctx;
    dcr__huff_t *huff; /* allocated on the first payload with 16-bit XOR values */
    unsigned max_version;
    dcr_payload_key_t key; /* unset: plain digest */
};

dcr_status_t dcr_encoder_create(dcr_encoder_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_encoder_create: out_p is NULL");
    dcr_encoder_t *enc = calloc(1, sizeof *enc);
    if (enc == NULL) return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate an encoder");
    enc->max_version = DCR_CODEC_VERSION;
    enc->cctx = ZSTD_createCCtx();
    if (enc->cctx == NULL) {
        free(enc);
        return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate a zstd compression context");
    }
    *out_p = enc;
    return DCR_OK;
}

void dcr_encoder_destroy(dcr_encoder_t *enc)
{
    if (enc == NULL) return;
    ZSTD_freeCCtx(enc->cctx);
    free(enc->huff);
    dcr__buf_free(&enc->out);
    dcr__buf_free(&enc->raw);
    dcr__buf_free(&enc->vals);
    dcr__buf_free(&enc->locs);
    dcr__buf_free(&enc->names);
    free(enc->items);
    /* The key is a secret: do not leave it in freed memory. */
    memset(&enc->key, 0, sizeof enc->key);
    __asm__ __volatile__("" : : "r"(&enc->key) : "memory");
    free(enc);
}

size_t dcr_encoder_item_count(const dcr_encoder_t *enc)
{
    return enc ? enc->nitems : 0;
}

size_t dcr_encoder_raw_len(const dcr_encoder_t *enc)
{
    if (enc == NULL) return 0;
    return DCR__BODY_HEADER_SIZE + DCR__ITEM_SIZE * enc->nitems + enc->names.len + enc->locs.len +
           enc->vals.len;
}

void dcr_encoder_set_key(dcr_encoder_t *enc, const dcr_payload_key_t *key)
{
    if (enc == NULL) return;
    if (key != NULL && key->set)
        enc->key = *key;
    else
        memset(&enc->key, 0, sizeof enc->key);
}

dcr_status_t dcr_encoder_set_max_version(dcr_encoder_t *enc, unsigned version)
{
    if (enc == NULL || (version != DCR_CODEC_VERSION_1 && version != DCR_CODEC_VERSION_2))
        return dcr_error_set(DCR_EINVAL, "codec: no encoder, or format version %u is not 1 or 2",
                             version);
    enc->max_version = version;
    return DCR_OK;
}

void dcr_encoder_reset(dcr_encoder_t *enc)
{
    if (enc == NULL) return;
    enc->nitems = 0;
    enc->names.len = enc->locs.len = enc->vals.len = 0;
}

/* Checks everything about an item except its indices; the detail names the
 * tensor so the owner's error line says which one was malformed. */
static dcr_status_t dcr__item_check_meta(const dcr_codec_item_t *it, size_t *name_len_p,
                                         int64_t *numel_p)
{
    if (it->name == NULL) return dcr_error_set(DCR_EINVAL, "codec: item without a name");
    size_t name_len = strnlen(it->name, DCR_CODEC_NAME_MAX + 1);
    if (name_len == 0 || name_len > DCR_CODEC_NAME_MAX)
        return dcr_error_set(DCR_EINVAL, "codec: item name length must be 1..%d bytes",
                             DCR_CODEC_NAME_MAX);
    for (size_t k = 0; k < name_len; k++) {
        unsigned char ch = (unsigned char)it->name[k];
        if (ch < 0x21 || ch > 0x7e)
            return dcr_error_set(DCR_EINVAL,
                                 "codec: item name \"%.64s\" has byte 0x%02x at %zu; names are "
                                 "printable ASCII without spaces",
                                 it->name, ch, k);
    }
    if (it->ndim < 0 || it->ndim > DCR_MAX_DIMS || (it->ndim > 0 && it->shape == NULL))
        return dcr_error_set(DCR_EINVAL, "codec: item %s: ndim %d outside 0..%d or shape missing",
                             it->name, it->ndim, DCR_MAX_DIMS);
    int64_t numel = dcr__numel_checked(it->ndim, it->shape);
    if (numel < 0)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: shape has a negative dim or overflows",
                             it->name);
    if ((unsigned)it->dtype >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: invalid dtype %d", it->name,
                             (int)it->dtype);
    if ((unsigned)it->encoding >= DCR_ENCODING_COUNT)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: invalid encoding %d", it->name,
                             (int)it->encoding);
    if (it->count == 0)
        return dcr_error_set(
            DCR_EINVAL, "codec: item %s: no records (an unchanged tensor gets no item)", it->name);
    if (it->values == NULL)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: values missing", it->name);
    /* Keeps every later size product far below overflow. */
    if (it->count > DCR__RAW_MAX / 8)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: %zu records exceed one payload's limit",
                             it->name, it->count);
    *name_len_p = name_len;
    *numel_p = numel;
    return DCR_OK;
}

static dcr_status_t dcr__item_plan(const dcr_codec_item_t *it, int64_t numel, dcr__loc_plan_t *plan)
{
    if (it->indices != NULL) {
        if (dcr__loc_plan(it->indices, it->count, numel, plan) == DCR_OK) return DCR_OK;
        size_t k = plan->bad_pos;
        return dcr_error_set(
            DCR_EINVAL,
            "codec: item %s: index %" PRId64 " at position %zu is %s (numel %" PRId64 ")", it->name,
            it->indices[k], k,
            (k > 0 && it->indices[k] <= it->indices[k - 1]) ? "not above its predecessor"
                                                            : "outside [0, numel)",
            numel);
    }
    if (it->run_start < 0 || it->run_start >= numel ||
        it->count > (uint64_t)(numel - it->run_start))
        return dcr_error_set(DCR_EINVAL,
                             "codec: item %s: run [%" PRId64 ", +%zu) outside [0, %" PRId64 ")",
                             it->name, it->run_start, it->count, numel);
    plan->type = DCR_LOCATION_RUN;
    plan->gap_bytes = 0;
    plan->first = it->run_start;
    return DCR_OK;
}

static dcr_status_t dcr__items_reserve(dcr_encoder_t *enc)
{
    if (enc->nitems < enc->items_cap) return DCR_OK;
    size_t cap = enc->items_cap ? enc->items_cap * 2 : 64;
    dcr__enc_item_t *items = realloc(enc->items, cap * sizeof *items);
    if (items == NULL) return dcr_error_set(DCR_ENOMEM, "codec: cannot grow the item table");
    enc->items = items;
    enc->items_cap = cap;
    return DCR_OK;
}

dcr_status_t dcr_encoder_add(dcr_encoder_t *enc, const dcr_codec_item_t *it)
{
    if (enc == NULL || it == NULL)
        return dcr_error_set(DCR_EINVAL, "dcr_encoder_add: NULL argument");
    size_t name_len = 0;
    int64_t numel = 0;
    dcr__loc_plan_t plan;
    DCR_CHECK(dcr__item_check_meta(it, &name_len, &numel));
    DCR_CHECK(dcr__item_plan(it, numel, &plan));
    /* numel <= 2^62 bounds count, so these products cannot overflow. */
    size_t val_bytes = it->count * dcr_dtype_size(it->dtype);
    size_t loc_bytes = plan.type == DCR_LOCATION_GAPS ? (it->count - 1) * plan.gap_bytes : 0;
    if (enc->names.len + name_len + 1 > UINT32_MAX)
        return dcr_error_set(DCR_EINVAL, "codec: item %s: names section would exceed 4 GiB",
                             it->name);
    /* Reserve everything first so that a failed allocation leaves the
     * encoder exactly as it was. */
    DCR_CHECK(dcr__items_reserve(enc));
    DCR_CHECK(dcr__buf_reserve(&enc->names, enc->names.len + name_len + 1));
    DCR_CHECK(dcr__buf_reserve(&enc->locs, enc->locs.len + loc_bytes));
    DCR_CHECK(dcr__buf_reserve(&enc->vals, enc->vals.len + val_bytes));

    dcr__enc_item_t *e = &enc->items[enc->nitems++];
    memset(e, 0, sizeof *e);
    e->count = it->count;
    e->first = (uint64_t)plan.first;
    e->loc_off = plan.type == DCR_LOCATION_GAPS ? enc->locs.len : 0;
    e->val_off = enc->vals.len;
    for (int d = 0; d < it->ndim; d++) e->dims[d] = (uint64_t)it->shape[d];
    e->name_off = (uint32_t)enc->names.len;
    e->name_len = (uint16_t)name_len;
    e->ndim = (uint8_t)it->ndim;
    e->dtype = (uint8_t)it->dtype;
    e->encoding = (uint8_t)it->encoding;
    e->loc_type = (uint8_t)plan.type;
    e->gap_bytes = (uint8_t)plan.gap_bytes;

    memcpy(enc->names.data + enc->names.len, it->name, name_len + 1);
    enc->names.len += name_len + 1;
    if (loc_bytes > 0)
        dcr__gaps_store(enc->locs.data + enc->locs.len, it->indices, it->count, plan.gap_bytes);
    enc->locs.len += loc_bytes;
    memcpy(enc->vals.data + enc->vals.len, it->values, val_bytes);
    enc->vals.len += val_bytes;
    return DCR_OK;
}

static void dcr__item_write(uint8_t *p, const dcr__enc_item_t *e)
{
    memset(p, 0, DCR__ITEM_SIZE);
    dcr__st64(p + DCR__I_COUNT, e->count);
    dcr__st64(p + DCR__I_FIRST, e->first);
    dcr__st64(p + DCR__I_LOC_OFF, e->loc_off);
    dcr__st64(p + DCR__I_VAL_OFF, e->val_off);
    for (int d = 0; d < DCR_MAX_DIMS; d++) dcr__st64(p + DCR__I_DIMS + 8 * d, e->dims[d]);
    dcr__st32(p + DCR__I_NAME_OFF, e->name_off);
    dcr__st16(p + DCR__I_NAME_LEN, e->name_len);
    p[DCR__I_NDIM] = e->ndim;
    p[DCR__I_DTYPE] = e->dtype;
    p[DCR__I_ENCODING] = e->encoding;
    p[DCR__I_LOCTYPE] = e->loc_type;
    p[DCR__I_GAP_BYTES] = e->gap_bytes;
}

/* Copies one section into the body, shuffling each item's segment with its
 * own word size when asked (FORMAT.md section 5). */
static void dcr__section_write(const dcr_encoder_t *enc, uint8_t *dst, const dcr__buf_t *src,
                               bool values, bool shuffle)
{
    if (!shuffle) {
        if (src->len) memcpy(dst, src->data, src->len);
        return;
    }
    for (size_t i = 0; i < enc->nitems; i++) {
        const dcr__enc_item_t *e = &enc->items[i];
        if (values) {
            dcr_codec_shuffle(dst + e->val_off, src->data + e->val_off, e->count,
                              dcr_dtype_size((dcr_dtype_t)e->dtype));
        } else if (e->loc_type == DCR_LOCATION_GAPS) {
            dcr_codec_shuffle(dst + e->loc_off, src->data + e->loc_off, e->count - 1, e->gap_bytes);
        }
    }
}

/* ---- version 2 (FORMAT.md section 8) ---- */

/* Rice codes for a GAPS item when they take fewer bytes than its words. */
static void dcr__plan_locations(dcr_encoder_t *enc, dcr__enc_item_t *e)
{
    e->loc_coding = e->loc_type;
    e->loc_len2 = e->loc_type == DCR_LOCATION_GAPS ? (e->count - 1) * e->gap_bytes : 0;
    if (e->loc_type != DCR_LOCATION_GAPS) return;
    uint64_t bits = 0;
    const uint8_t *gaps = enc->locs.data + e->loc_off;
    unsigned k = dcr__rice_best_k(gaps, e->count - 1, e->gap_bytes, &bits);
    if ((bits + 7) / 8 >= e->loc_len2) return;
    e->loc_coding = DCR_LOCATION_RICE;
    e->rice_k = (uint8_t)k;
    e->loc_len2 = (bits + 7) / 8;
}

static bool dcr__huff_candidate(const dcr__enc_item_t *e)
{
    return e->encoding == DCR_ENCODING_XOR && dcr_dtype_size((dcr_dtype_t)e->dtype) == 2;
}

/* One Huffman table over the payload's 16-bit XOR masks; an item uses it
 * when its codes take fewer bytes than its words, and the payload uses it
 * only when those savings exceed the table's bytes. Returns the table's
 * bytes, 0 for none. */
static dcr_status_t dcr__plan_values(dcr_encoder_t *enc, size_t *table_p)
{
    *table_p = 0;
    bool any = false;
    for (size_t i = 0; i < enc->nitems; i++) {
        enc->items[i].val_coding = DCR_VALUES_RAW;
        enc->items[i].val_len2 =
            enc->items[i].count * dcr_dtype_size((dcr_dtype_t)enc->items[i].dtype);
        any = any || dcr__huff_candidate(&enc->items[i]);
    }
    if (!any) return DCR_OK;
    if (enc->huff == NULL && (enc->huff = malloc(sizeof *enc->huff)) == NULL)
        return dcr_error_set(DCR_ENOMEM, "codec: cannot allocate the Huffman coder");
    dcr__huff_t *h = enc->huff;
    memset(h->freq, 0, sizeof h->freq);
    for (size_t i = 0; i < enc->nitems; i++) {
        const dcr__enc_item_t *e = &enc->items[i];
        if (!dcr__huff_candidate(e)) continue;
        const uint8_t *v = enc->vals.data + e->val_off;
        for (size_t k = 0; k < e->count; k++) h->freq[dcr__ld16(v + 2 * k)]++;
    }
    DCR_CHECK(dcr__huff_build(h));
    uint64_t saved = 0;
    for (size_t i = 0; i < enc->nitems; i++) {
        dcr__enc_item_t *e = &enc->items[i];
        if (!dcr__huff_candidate(e)) continue;
        uint64_t bytes = (dcr__huff_bits(h, enc->vals.data + e->val_off, e->count) + 7) / 8;
        if (bytes >= e->val_len2) continue;
        saved += e->val_len2 - bytes;
        e->val_coding = DCR_VALUES_HUFFMAN;
        e->val_len2 = bytes;
    }
    size_t table = dcr__huff_table_size(h);
    if (saved <= table) {
        for (size_t i = 0; i < enc->nitems; i++) {
            dcr__enc_item_t *e = &enc->items[i];
            e->val_coding = DCR_VALUES_RAW;
            e->val_len2 = e->count * dcr_dtype_size((dcr_dtype_t)e->dtype);
        }
        return DCR_OK;
    }
    *table_p = table;
    return DCR_OK;
}

/* Decides every item's codings and the version 2 section sizes; *v2_p is
 * false when nothing would be coded (the payload is then version 1). */
static dcr_status_t dcr__plan_v2(dcr_encoder_t *enc, bool *v2_p, size_t *table_p, uint64_t *locs_p,
                                 uint64_t *vals_p)
{
    bool coded = false;
    for (size_t i = 0; i < enc->nitems; i++) {
        dcr__plan_locations(enc, &enc->items[i]);
        coded = coded || enc->items[i].loc_coding == DCR_LOCATION_RICE;
    }
    DCR_CHECK(dcr__plan_values(enc, table_p));
    uint64_t locs = 0, vals = *table_p;
    for (size_t i = 0; i < enc->nitems; i++) {
        dcr__enc_item_t *e = &enc->items[i];
        e->loc_off2 = e->loc_coding == DCR_LOCATION_RUN ? 0 : locs;
        locs += e->loc_len2;
        e->val_off2 = vals;
        vals += e->val_len2;
    }
    *v2_p = coded || *table_p > 0;
    *locs_p = locs;
    *vals_p = vals;
    return DCR_OK;
}

static void dcr__item_write_v2(uint8_t *p, const dcr__enc_item_t *e)
{
    dcr__item_write(p, e);
    dcr__st64(p + DCR__I_LOC_OFF, e->loc_off2);
    dcr__st64(p + DCR__I_VAL_OFF, e->val_off2);
    p[DCR__I_LOCTYPE] = e->loc_coding;
    if (e->loc_coding == DCR_LOCATION_RICE) p[DCR__I_GAP_BYTES] = e->rice_k;
    p[DCR__I_VALCODING] = e->val_coding;
}

/* Item i's segments in the version 2 sections at locs and vals. */
static void dcr__segments_write_v2(const dcr_encoder_t *enc, const dcr__enc_item_t *e,
                                   uint8_t *locs, uint8_t *vals, bool shuffle)
{
    const uint8_t *gaps = enc->locs.data + e->loc_off;
    if (e->loc_coding == DCR_LOCATION_RICE)
        dcr__rice_write(locs + e->loc_off2, gaps, e->count - 1, e->gap_bytes, e->rice_k);
    else if (e->loc_coding == DCR_LOCATION_GAPS && shuffle)
        dcr_codec_shuffle(locs + e->loc_off2, gaps, e->count - 1, e->gap_bytes);
    else if (e->loc_coding == DCR_LOCATION_GAPS)
        memcpy(locs + e->loc_off2, gaps, e->loc_len2);
    const uint8_t *v = enc->vals.data + e->val_off;
    size_t es = dcr_dtype_size((dcr_dtype_t)e->dtype);
    if (e->val_coding == DCR_VALUES_HUFFMAN)
        dcr__huff_write(enc->huff, vals + e->val_off2, v, e->count);
    else if (shuffle)
        dcr_codec_shuffle(vals + e->val_off2, v, e->count, es);
    else
        memcpy(vals + e->val_off2, v, e->val_len2);
}

static dcr_status_t dcr__body_assemble_v2(dcr_encoder_t *enc, bool shuffle, size_t table,
                                          uint64_t locs, uint64_t vals, size_t *raw_len_p)
{
    uint64_t raw_len = DCR__BODY_HEADER_SIZE + (uint64_t)DCR__ITEM_SIZE * enc->nitems +
                       enc->names.len + locs + vals;
    /* The Rice and Huffman writers flush whole bytes: 8 spare bytes. */
    DCR_CHECK(dcr__buf_reserve(&enc->raw, (size_t)raw_len + 8));
    uint8_t *p = enc->raw.data;
    dcr__st64(p + 0, enc->names.len);
    dcr__st64(p + 8, locs);
    dcr__st64(p + 16, vals);
    p += DCR__BODY_HEADER_SIZE;
    for (size_t i = 0; i < enc->nitems; i++, p += DCR__ITEM_SIZE)
        dcr__item_write_v2(p, &enc->items[i]);
    if (enc->names.len) memcpy(p, enc->names.data, enc->names.len);
    p += enc->names.len;
    uint8_t *lp = p, *vp = p + locs;
    if (table) dcr__huff_table_write(enc->huff, vp);
    for (size_t i = 0; i < enc->nitems; i++)
        dcr__segments_write_v2(enc, &enc->items[i], lp, vp, shuffle);
    enc->raw.len = (size_t)raw_len;
    *raw_len_p = (size_t)raw_len;
    return DCR_OK;
}

static dcr_status_t dcr__body_assemble(dcr_encoder_t *enc, bool shuffle, size_t raw_len)
{
    DCR_CHECK(dcr__buf_reserve(&enc->raw, raw_len));
    uint8_t *p = enc->raw.data;
    dcr__st64(p + 0, enc->names.len);
    dcr__st64(p + 8, enc->locs.len);
    dcr__st64(p + 16, enc->vals.len);
    p += DCR__BODY_HEADER_SIZE;
    for (size_t i = 0; i < enc->nitems; i++, p += DCR__ITEM_SIZE)
        dcr__item_write(p, &enc->items[i]);
    if (enc->names.len) memcpy(p, enc->names.data, enc->names.len);
    p += enc->names.len;
    dcr__section_write(enc, p, &enc->locs, false, shuffle);
    p += enc->locs.len;
    dcr__section_write(enc, p, &enc->vals, true, shuffle);
    enc->raw.len = raw_len;
    return DCR_OK;
}

dcr_status_t dcr_encoder_finish(dcr_encoder_t *enc, const dcr_encode_params_t *params,
                                const uint8_t **buf_p, size_t *len_p)
{
    if (enc == NULL || params == NULL || buf_p == NULL || len_p == NULL)
        return dcr_error_set(DCR_EINVAL, "dcr_encoder_finish: NULL argument");
    if (params->level < ZSTD_minCLevel() || params->level > ZSTD_maxCLevel())
        return dcr_error_set(DCR_EINVAL, "codec: zstd level %d outside [%d, %d]", params->level,
                             ZSTD_minCLevel(), ZSTD_maxCLevel());
    if (enc->nitems > UINT32_MAX)
        return dcr_error_set(DCR_EINVAL, "codec: %zu items exceed the format's limit of %" PRIu32,
                             enc->nitems, UINT32_MAX);
    size_t raw_len = dcr_encoder_raw_len(enc);
    if ((uint64_t)raw_len > DCR__RAW_MAX)
        return dcr_error_set(DCR_EINVAL,
                             "codec: body of %zu bytes exceeds the format's 1 TiB limit", raw_len);
    bool v2 = false;
    size_t table = 0;
    uint64_t locs2 = 0, vals2 = 0;
    if (enc->max_version >= DCR_CODEC_VERSION_2)
        DCR_CHECK(dcr__plan_v2(enc, &v2, &table, &locs2, &vals2));
    if (v2)
        DCR_CHECK(dcr__body_assemble_v2(enc, params->shuffle, table, locs2, vals2, &raw_len));
    else
        DCR_CHECK(dcr__body_assemble(enc, params->shuffle, raw_len));

    size_t bound = ZSTD_compressBound(raw_len);
    DCR_CHECK(dcr__buf_reserve(&enc->out, DCR_CODEC_HEADER_SIZE + bound));
    uint8_t *body = enc->out.data + DCR_CODEC_HEADER_SIZE;
    /* One-shot compression records the content size in the frame, which the
     * decoder checks against the header before it allocates anything. */
    size_t clen = ZSTD_compressCCtx(enc->cctx, body, bound, enc->raw.data, raw_len, params->level);
    if (ZSTD_isError(clen))
        return dcr_error_set(DCR_ECODEC, "codec: zstd compression failed: %s",
                             ZSTD_getErrorName(clen));

    dcr_payload_header_t h = {
        .version = v2 ? DCR_CODEC_VERSION_2 : DCR_CODEC_VERSION_1,
        .flags = (uint16_t)((params->shuffle ? DCR_CODEC_FLAG_SHUFFLE : 0) |
                            (enc->key.set ? DCR_CODEC_FLAG_KEYED : 0)),
        .tau = params->tau,
        .payload_id = params->payload_id,
        .owner = params->owner,
        .item_count = (uint32_t)enc->nitems,
        .raw_len = raw_len,
        .compressed_len = clen,
    };
    dcr__header_write(enc->out.data, &h, body, &enc->key);
    enc->out.len = DCR_CODEC_HEADER_SIZE + clen;
    dcr_encoder_reset(enc);
    *buf_p = enc->out.data;
    *len_p = enc->out.len;
    return DCR_OK;
}
