/* The fixed payload header: writing it, checking it, and the digest that
 * binds it to the compressed body, plain or keyed (FORMAT.md section 1). */
#include <blake2.h>
#include <inttypes.h>
#include <stdio.h>

#include "codec-internal.h"

void dcr__digest(const uint8_t *header, const uint8_t *body, size_t body_len,
                 const dcr_payload_key_t *key, uint8_t out[DCR__DIGEST_SIZE])
{
    blake2b_state s;
    if (key != NULL && key->set)
        blake2b_init_key(&s, DCR__DIGEST_SIZE, key->bytes, DCR_CODEC_KEY_SIZE);
    else
        blake2b_init(&s, DCR__DIGEST_SIZE);
    blake2b_update(&s, header, DCR__H_DIGEST);
    blake2b_update(&s, body, body_len);
    blake2b_final(&s, out, DCR__DIGEST_SIZE);
}

void dcr__header_write(uint8_t *out, const dcr_payload_header_t *h, const uint8_t *body,
                       const dcr_payload_key_t *key)
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
    dcr__digest(out, body, (size_t)h->compressed_len, key, out + DCR__H_DIGEST);
}

/* ZSTD_COMPRESSBOUND(raw) computed in 64 bits. */
static uint64_t dcr__compress_bound(uint64_t raw)
{
    /* ZSTD_COMPRESSBOUND's formula, in 64 bits so that it holds for any
     * declared length up to DCR_CODEC_RAW_MAX. */
    const uint64_t block = (uint64_t)128 << 10;
    return raw + (raw >> 8) + (raw < block ? (block - raw) >> 11 : 0);
}

static void dcr__who(const dcr_payload_header_t *h, char *who, size_t cap)
{
    snprintf(who, cap, "payload (tau %" PRIu64 ", owner %" PRIu32 ", id %" PRIu64 ")", h->tau,
             h->owner, h->payload_id);
}

/* Fields are read only after the length check, and names in messages come
 * from them only once magic and version show that this is our header. */
dcr_status_t dcr_payload_header_parse(const void *hdr, size_t len,
                                      const dcr_payload_policy_t *policy,
                                      dcr_payload_header_t *out_p)
{
    const uint8_t *buf = hdr;
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_header_parse: out_p is NULL");
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
    if (h.version != DCR_CODEC_VERSION_1 && h.version != DCR_CODEC_VERSION_2)
        return dcr_error_set(DCR_EPAYLOAD, "payload: format version %u, this build reads 1 and 2",
                             (unsigned)h.version);
    h.flags = dcr__ld16(buf + DCR__H_FLAGS);
    h.tau = dcr__ld64(buf + DCR__H_TAU);
    h.payload_id = dcr__ld64(buf + DCR__H_PAYLOAD_ID);
    h.owner = dcr__ld32(buf + DCR__H_OWNER);
    h.item_count = dcr__ld32(buf + DCR__H_ITEMS);
    h.raw_len = dcr__ld64(buf + DCR__H_RAW_LEN);
    h.compressed_len = dcr__ld64(buf + DCR__H_COMP_LEN);
    memcpy(h.digest, buf + DCR__H_DIGEST, DCR__DIGEST_SIZE);

    char who[96];
    dcr__who(&h, who, sizeof who);
    if (h.flags & ~(DCR_CODEC_FLAG_SHUFFLE | DCR_CODEC_FLAG_KEYED))
        return dcr_error_set(DCR_EPAYLOAD, "%s: unknown flags 0x%04x in header", who,
                             (unsigned)h.flags);
    uint64_t min_raw = DCR__BODY_HEADER_SIZE + (uint64_t)DCR__ITEM_SIZE * h.item_count;
    if (h.raw_len < min_raw || h.raw_len > DCR__RAW_MAX)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: raw length %" PRIu64 " outside [%" PRIu64 ", %" PRIu64
                             "] for %" PRIu32 " items",
                             who, h.raw_len, min_raw, DCR__RAW_MAX, h.item_count);
    uint64_t budget = policy != NULL && policy->max_raw != 0 ? policy->max_raw : DCR__RAW_MAX;
    if (h.raw_len > budget)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: raw length %" PRIu64 " exceeds this reader's limit of %" PRIu64
                             " bytes; refused before allocating",
                             who, h.raw_len, budget);
    /* Both directions bound the other length: a body cannot expand more than
     * zstd's format allows, and no single-pass compressor writes more than
     * the bound, so a reader knows the most it will read from the header. */
    if ((h.raw_len + DCR_CODEC_MAX_RATIO - 1) / DCR_CODEC_MAX_RATIO > h.compressed_len)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: raw length %" PRIu64 " is more than %u times the compressed "
                             "length %" PRIu64 ", beyond what a zstd frame can expand to",
                             who, h.raw_len, DCR_CODEC_MAX_RATIO, h.compressed_len);
    if (h.compressed_len > dcr__compress_bound(h.raw_len))
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: compressed length %" PRIu64 " exceeds ZSTD_COMPRESSBOUND(raw "
                             "length %" PRIu64 ") = %" PRIu64,
                             who, h.compressed_len, h.raw_len, dcr__compress_bound(h.raw_len));
    *out_p = h;
    return DCR_OK;
}

/* Compares digests in time independent of where they differ: a keyed
 * digest is a MAC, and an early exit would tell a forger how many leading
 * bytes of a guess were right. */
static bool dcr__digest_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (int i = 0; i < DCR__DIGEST_SIZE; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

/* The keying rule (FORMAT.md section 1.1) and then the digest. */
static dcr_status_t dcr__digest_check(const uint8_t *buf, const dcr_payload_header_t *h,
                                      const dcr_payload_key_t *key, const char *who)
{
    bool keyed = (h->flags & DCR_CODEC_FLAG_KEYED) != 0;
    bool have_key = key != NULL && key->set;
    if (keyed && !have_key)
        return dcr_error_set(DCR_EDIGEST,
                             "%s: payload is keyed (signed with a payload key) but no payload key "
                             "is configured here to verify it",
                             who);
    if (!keyed && have_key)
        return dcr_error_set(DCR_EDIGEST,
                             "%s: payload is unkeyed but a payload key is configured: refused as "
                             "unauthenticated",
                             who);
    uint8_t digest[DCR__DIGEST_SIZE];
    dcr__digest(buf, buf + DCR_CODEC_HEADER_SIZE, (size_t)h->compressed_len, key, digest);
    if (!dcr__digest_equal(digest, h->digest)) {
        if (keyed)
            return dcr_error_set(DCR_EDIGEST,
                                 "%s: keyed BLAKE2b-128 digest does not match under this payload "
                                 "key (forged, keyed differently, or corrupt)",
                                 who);
        return dcr_error_set(DCR_EDIGEST,
                             "%s: BLAKE2b-128 digest does not match the header and body", who);
    }
    return DCR_OK;
}

dcr_status_t dcr__header_check(const uint8_t *buf, size_t len, bool verify_digest,
                               const dcr_payload_policy_t *policy, dcr_payload_header_t *out_p)
{
    dcr_payload_header_t h;
    DCR_CHECK(dcr_payload_header_parse(buf, len, policy, &h));
    char who[96];
    dcr__who(&h, who, sizeof who);
    size_t body_len = len - DCR_CODEC_HEADER_SIZE;
    if (h.compressed_len != body_len)
        return dcr_error_set(DCR_EPAYLOAD,
                             "%s: header says compressed length %" PRIu64
                             " but %zu bytes follow the header",
                             who, h.compressed_len, body_len);
    if (verify_digest) DCR_CHECK(dcr__digest_check(buf, &h, policy ? policy->key : NULL, who));
    *out_p = h;
    return DCR_OK;
}

dcr_status_t dcr_payload_peek(const void *buf, size_t len, bool verify_digest,
                              dcr_payload_header_t *out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_peek: out_p is NULL");
    return dcr__header_check(buf, len, verify_digest, NULL, out_p);
}

dcr_status_t dcr_payload_verify(const void *buf, size_t len, const dcr_payload_policy_t *policy,
                                dcr_payload_header_t *out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "dcr_payload_verify: out_p is NULL");
    return dcr__header_check(buf, len, true, policy, out_p);
}

bool dcr_payload_auth_failure(dcr_status_t st, const void *buf, size_t len,
                              const dcr_payload_key_t *key)
{
    if (st != DCR_EDIGEST) return false;
    if (key != NULL && key->set) return true;
    /* No key here: only a keyed payload's refusal is about authentication. */
    const uint8_t *b = buf;
    return b != NULL && len >= DCR_CODEC_HEADER_SIZE &&
           (dcr__ld16(b + DCR__H_FLAGS) & DCR_CODEC_FLAG_KEYED) != 0;
}
