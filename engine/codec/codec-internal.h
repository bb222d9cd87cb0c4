/* Layout constants and helpers shared by the engine/codec files; not part of
 * the public interface. The byte layout itself is specified in FORMAT.md. */
#ifndef DCR_CODEC_INTERNAL_H
#define DCR_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/codec.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dcr's payload codec hands value words through unchanged and needs a little-endian host"
#endif

#define DCR__MAGIC "DCRP"

/* Header field offsets (FORMAT.md section 1). */
#define DCR__H_MAGIC      0
#define DCR__H_VERSION    4
#define DCR__H_FLAGS      6
#define DCR__H_TAU        8
#define DCR__H_PAYLOAD_ID 16
#define DCR__H_OWNER      24
#define DCR__H_ITEMS      28
#define DCR__H_RAW_LEN    32
#define DCR__H_COMP_LEN   40
#define DCR__H_DIGEST     48
#define DCR__DIGEST_SIZE  16

/* Body header and item entry (FORMAT.md sections 2 and 3). */
#define DCR__BODY_HEADER_SIZE 24
#define DCR__ITEM_SIZE        96
#define DCR__I_COUNT          0
#define DCR__I_FIRST          8
#define DCR__I_LOC_OFF        16
#define DCR__I_VAL_OFF        24
#define DCR__I_DIMS           32
#define DCR__I_NAME_OFF       80
#define DCR__I_NAME_LEN       84
#define DCR__I_NDIM           86
#define DCR__I_DTYPE          87
#define DCR__I_ENCODING       88
#define DCR__I_LOCTYPE        89
#define DCR__I_GAP_BYTES      90 /* version 2: the Rice parameter of a RICE item */
#define DCR__I_VALCODING      91 /* version 2 only; reserved (0) in version 1 */
#define DCR__I_RESERVED       91
#define DCR__I_RESERVED_SIZE  5

/* Bounds that keep every size computation far from overflow. */
#define DCR__RAW_MAX   DCR_CODEC_RAW_MAX
#define DCR__NUMEL_MAX ((int64_t)1 << 62)

static inline void dcr__st16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}
static inline void dcr__st32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}
static inline void dcr__st64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}
static inline uint16_t dcr__ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t dcr__ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint64_t dcr__ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A growable byte buffer; the codec keeps these across payloads. */
typedef struct dcr__buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} dcr__buf_t;

/* Makes room for `need` bytes in total (len is unchanged). Grows
 * geometrically so that a stream of adds costs amortized O(1) per byte. */
dcr_status_t dcr__buf_reserve(dcr__buf_t *b, size_t need);
void dcr__buf_free(dcr__buf_t *b);

/* Product of ndim dims, or -1 when a dim is negative or above
 * DCR__NUMEL_MAX or the product exceeds it. 1 for ndim == 0. */
int64_t dcr__numel_checked(int ndim, const int64_t *shape);

/* Locations (locations.c). */

/* Smallest of 1, 2, 4, 8 bytes that holds max_gap. */
unsigned dcr__gap_bytes_for(uint64_t max_gap);

/* How dcr_encoder_add stores an item's indices. */
typedef struct dcr__loc_plan {
    dcr_location_type_t type;
    unsigned gap_bytes; /* 0 for a run */
    int64_t first;
    size_t bad_pos; /* position of the offending index when planning fails */
} dcr__loc_plan_t;

/* Checks count >= 1 indices (strictly increasing, each in [0, numel)) and
 * picks the location coding. Returns DCR_EINVAL without a detail message
 * (the caller names the tensor); plan->bad_pos says where it went wrong. */
dcr_status_t dcr__loc_plan(const int64_t *indices, size_t count, int64_t numel,
                           dcr__loc_plan_t *plan);

/* Gap k of a version 1 gap segment of gap_bytes-wide words (1, 2, 4, 8). */
static inline uint64_t dcr__gap_load(const uint8_t *gaps, size_t k, unsigned gap_bytes)
{
    switch (gap_bytes) {
    case 1:
        return gaps[k];
    case 2:
        return dcr__ld16(gaps + 2 * k);
    case 4:
        return dcr__ld32(gaps + 4 * k);
    default:
        return dcr__ld64(gaps + 8 * k);
    }
}

/* Writes the count - 1 gaps of indices as little-endian words of gap_bytes. */
void dcr__gaps_store(uint8_t *dst, const int64_t *indices, size_t count, unsigned gap_bytes);

/* Walks ngaps gap words from first and checks every gap >= 1 and every index
 * < numel. On success stores the last index in *last_p; on failure returns
 * false and stores the 0-based position of the bad gap in *bad_pos_p. */
bool dcr__gaps_check(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, int64_t first,
                     int64_t numel, int64_t *last_p, size_t *bad_pos_p);

/* Expands checked gap words into ngaps + 1 indices starting at first. */
void dcr__gaps_expand(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, int64_t first,
                      int64_t *dst);

/* Entropy coders of version 2 (entropy.c, FORMAT.md section 8). */

#define DCR__RICE_K_MAX    62
#define DCR__HUFF_MAX_LEN  20
#define DCR__HUFF_LUT_BITS 11

/* Bits of the Rice codes of ngaps gap words (each >= 1) with parameter k. */
uint64_t dcr__rice_bits(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, unsigned k);
/* The parameter with the fewest bits (stored in *bits_p). */
unsigned dcr__rice_best_k(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, uint64_t *bits_p);
/* Writes the Rice stream of the gaps; returns its bytes (ceil(bits / 8)). */
size_t dcr__rice_write(uint8_t *dst, const uint8_t *gaps, size_t ngaps, unsigned gap_bytes,
                       unsigned k);
/* Reads ngaps gaps from src[0, avail) into out as little-endian words of
 * the narrowest width (1, 2, 4 or 8 bytes, stored in *width_p) that holds
 * every gap; out needs room for ngaps u64 words. Returns the stream's bytes,
 * SIZE_MAX when it runs past avail, a gap reaches 2^62 or the padding is
 * not 0. */
size_t dcr__rice_read(const uint8_t *src, size_t avail, size_t ngaps, unsigned k, uint8_t *out,
                      unsigned *width_p);

/* The encoder's Huffman state: the caller fills freq, dcr__huff_build makes
 * a length-limited canonical code of the symbols with nonzero frequency. */
typedef struct dcr__huff {
    uint32_t freq[65536];
    uint8_t len[65536];    /* code length per symbol, 0 for none */
    uint32_t rcode[65536]; /* the code, bit-reversed for the LSB-first writer */
    uint32_t count[DCR__HUFF_MAX_LEN + 2];
    unsigned max_len;
    size_t nsym;
    /* scratch of the construction */
    uint64_t key[65536];
    uint64_t work[3 * 65536];
    uint32_t parent[2 * 65536];
    uint32_t node_depth[2 * 65536];
    uint8_t depth[65536];
} dcr__huff_t;

dcr_status_t dcr__huff_build(dcr__huff_t *h);
size_t dcr__huff_table_size(const dcr__huff_t *h);
void dcr__huff_table_write(const dcr__huff_t *h, uint8_t *dst);
uint64_t dcr__huff_bits(const dcr__huff_t *h, const uint8_t *vals, size_t n);
size_t dcr__huff_write(const dcr__huff_t *h, uint8_t *dst, const uint8_t *vals, size_t n);

/* The decoder's view of one table. */
typedef struct dcr__huff_dec {
    uint32_t count[DCR__HUFF_MAX_LEN + 1];
    uint32_t first[DCR__HUFF_MAX_LEN + 1];
    uint32_t index[DCR__HUFF_MAX_LEN + 1];
    uint32_t limit[DCR__HUFF_MAX_LEN + 1];
    unsigned max_len, lut_bits;
    uint16_t sym[65536];
    uint64_t seen[1024];
    uint32_t lut[1u << DCR__HUFF_LUT_BITS];
} dcr__huff_dec_t;

/* Parses and checks a table at src[0, avail); returns its bytes, 0 if invalid. */
size_t dcr__huff_table_read(dcr__huff_dec_t *d, const uint8_t *src, size_t avail);
/* Decodes n 16-bit words into out; returns the stream's bytes, SIZE_MAX if
 * invalid (a code no symbol has, past avail, or nonzero padding). */
size_t dcr__huff_read(const dcr__huff_dec_t *d, const uint8_t *src, size_t avail, size_t n,
                      uint8_t *out);

/* Digest (payload_header.c): BLAKE2b-128 of header[0, 48) then body, keyed
 * with key when it is set (NULL or unset: plain). */
void dcr__digest(const uint8_t *header, const uint8_t *body, size_t body_len,
                 const dcr_payload_key_t *key, uint8_t out[DCR__DIGEST_SIZE]);

/* Parses and checks the fixed header (FORMAT.md header rules 1-4, and 5-6
 * when verify_digest) under policy (NULL: the zeroed one). Sets the error
 * detail on failure. */
dcr_status_t dcr__header_check(const uint8_t *buf, size_t len, bool verify_digest,
                               const dcr_payload_policy_t *policy, dcr_payload_header_t *out_p);

/* Writes the header for h into out[0, 64), digest included (keyed with key
 * when set), given the compressed body that follows it. */
void dcr__header_write(uint8_t *out, const dcr_payload_header_t *h, const uint8_t *body,
                       const dcr_payload_key_t *key);

#endif
