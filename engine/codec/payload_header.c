/* The fixed payload header: writing it, checking it, and the digest that
 * binds it to the compressed body (FORMAT.md section 1). */
#include <blake2.h>
#include <inttypes.h>
#include <stdio.h>

#include "codec-internal.h"

void dcr__digest(const uint8_t *header, const uint8_t *body, size_t body_len,
                 uint8_t out[DCR__DIGEST_SIZE])
{
    blake2b_state s;
    blake2b_init(&s, DCR__DIGEST_SIZE);
    blake2b_update(&s, header, DCR__H_DIGEST);
    blake2b_update(&s, body, body_len);
    blake2b_final(&s, out, DCR__DIGEST_SIZE);
}

void dcr__header_write(uint8_t *out, const dcr_payload_header_t *h, const uint8_t *body)
{
    memcpy(out + DCR__H_MAGIC, DCR__MAGIC, 4);
    dcr__st16(out + DCR__H_VERSION, h->version);
    dcr__st16(out + DCR__H_FLAGS, h->flags);
    dcr__st64(out + DCR__H_TAU, h->tau);
    dcr__st64(out + DCR__H_PAYLOAD_ID, h->payload_id);
    dcr__st32(out + DCR__H_OWNER, h->owner);
    dcr__st32(out + DCR__H_ITEMS, h->item_count);
    dcr__st64(out + DCR__H_RAW_LEN, h->raw_len);
    dcr__st64(out + DCR__H_COMP_LEN, h->compressed_len);
    dcr__digest(out, body, (size_t)h->compressed_len, out + DCR__H_DIGEST);
}

/* Fields are read only after the length check, and names in messages come
 * from them only once magic and version show that this is our header. */
dcr_status_t dcr__header_check(const uint8_t *buf, size_t len, bool verify_digest,
                               dcr_payload_header_t *out_p)
{
    if (buf == NULL && len > 0) return dcr_error_set(DCR_EINVAL, "payload: buffer is NULL");
    if (len < DCR_CODEC_HEADER_SIZE)
        return dcr_error_set(DCR_EPAYLOAD, "payload: truncated header: %zu bytes, need %d", len,
                             DCR_CODEC_HEADER_SIZE);
    if (memcmp(buf + DCR__H_MAGIC, DCR__MAGIC, 4) != 0)
        return dcr_error_set(DCR_EPAYLOAD,
                             "payload: bad magic %02x %02x %02x %02x, expected 44 43 52 50 (DCRP)",
                             buf[0], buf[1], buf[2], buf[3]);
    dcr_payload_header_t h;
    h.version = dcr__ld16(buf + DCR__H_VERSION);
    if (h.version != DCR_CODEC_VERSION)
        return dcr_error_set(DCR_EPAYLOAD, "payload: format version %u, this build reads %d",
                             (unsigned)h.version, DCR_CODEC_VERSION);
    h.flags = dcr__ld16(buf + DCR__H_FLAGS);
    h.tau = dcr__ld64(buf + DCR__H_TAU);
    h.payload_id = dcr__ld64(buf + DCR__H_PAYLOAD_ID);
    h.owner = dcr__ld32(buf + DCR__H_OWNER);
    h.item_count = dcr__ld32(buf + DCR__H_ITEMS);
    h.raw_len = dcr__ld64(buf + DCR__H_RAW_LEN);
    h.compressed_len = dcr__ld64(buf + DCR__H_COMP_LEN);
    memcpy(h.digest, buf + DCR__H_DIGEST, DCR__DIGEST_SIZE);

    char who[96];
    snprintf(who, sizeof who, "payload (tau %" PRIu64 ", owner %" PRIu32 ", id %" PRIu64 ")", h.tau,
             h.owner, h.payload_id);
    if (h.flags & ~DCR_CODEC_FLAG_SHUFFLE)
        return dcr_error_set(DCR_EPAYLOAD, "%s: unknown flags 0x%04x in header", who,
                             (unsigned)h.flags);
    size_t body_len = len - DCR_CODEC_HEADER_SIZE;
    if (h.compressed_len != body_len)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: header says compressed length %" PRIu64
                             " but %zu bytes follow the header",
                             who, h.compressed_len, body_len);
    uint64_t min_raw = DCR__BODY_HEADER_SIZE + (uint64_t)DCR__ITEM_SIZE * h.item_count;
    if (h.raw_len < min_raw || h.raw_len > DCR__RAW_MAX)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: raw length %" PRIu64 " outside [%" PRIu64 ", %" PRIu64
                             "] for %" PRIu32 " items",
                             who, h.raw_len, min_raw, DCR__RAW_MAX, h.item_count);
    if (verify_digest) {
        uint8_t digest[DCR__DIGEST_SIZE];
        dcr__digest(buf, buf + DCR_CODEC_HEADER_SIZE, body_len, digest);
        if (memcmp(digest, h.digest, DCR__DIGEST_SIZE) != 0)
            return dcr_error_set(DCR_EDIGEST,
                                 "%s: BLAKE2b-128 digest does not match the header and body", who);
    }
    *out_p = h;
    return DCR_OK;
}

dcr_status_t dcr_payload_peek(const void *buf, size_t len, bool verify_digest,
                              dcr_payload_header_t *out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_peek: out_p is NULL");
    return dcr__header_check(buf, len, verify_digest, out_p);
}
