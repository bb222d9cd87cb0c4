/* The payload codec: one owner's changed records for one bucket, encoded,
 * compressed and digested into a self-describing byte buffer, and the decoder
 * that validates such a buffer completely before anything in it is used.
 *
 * A payload is a fixed 64-byte little-endian header followed by a zstd frame
 * holding the body: an item table, one location buffer and one value buffer.
 * Each item carries one canonical tensor's records (name, shape, dtype,
 * encoding, sorted flat indices, values). The exact byte layout, every field
 * and every validation rule are in engine/codec/FORMAT.md, which is normative;
 * this header is the programming interface.
 *
 * Threading: encoders and decoded payloads are not thread-safe; use one per
 * thread. Distinct handles may be used concurrently. The free functions
 * (dcr_payload_peek, dcr_codec_shuffle, ...) are reentrant.
 *
 * The format is little-endian and the value words handed in and out are the
 * host's words, so the codec builds only on little-endian hosts (checked at
 * compile time). */
#ifndef DCR_CODEC_H
#define DCR_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/dtype.h"
#include "dcr/status.h"
#include "dcr/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Format versions. Version 1 stores gap and value words as they are;
 * version 2 (FORMAT.md section 8) adds entropy-coded segments: Rice-coded
 * gaps and Huffman-coded 16-bit values. The encoder writes version 2 only
 * for a payload where an entropy-coded segment is smaller than version 1's
 * words (and version 1 only when asked, dcr_encoder_set_max_version); the
 * decoder reads both. */
#define DCR_CODEC_VERSION_1 1
#define DCR_CODEC_VERSION_2 2
/* The newest version this build writes and reads. */
#define DCR_CODEC_VERSION DCR_CODEC_VERSION_2
/* Bytes of the fixed payload header that precedes the compressed body. */
#define DCR_CODEC_HEADER_SIZE 64
/* Header flag: value and gap words were byte-plane shuffled before zstd. */
#define DCR_CODEC_FLAG_SHUFFLE 0x0001u
/* Header flag: the digest is keyed BLAKE2b-128 (a MAC under the shared
 * payload key) instead of the plain one (FORMAT.md section 1.1). */
#define DCR_CODEC_FLAG_KEYED 0x0002u
/* Bytes of a payload key. */
#define DCR_CODEC_KEY_SIZE 32
/* Largest raw body the format allows (FORMAT.md section 6). */
#define DCR_CODEC_RAW_MAX ((uint64_t)1 << 40)
/* Most raw bytes one compressed byte of a zstd frame can produce: a block
 * regenerates at most 128 KiB and takes at least 4 bytes when it
 * regenerates anything (3-byte header, then an RLE byte or a literals
 * header), so raw length <= 32768 x compressed length for any frame. */
#define DCR_CODEC_MAX_RATIO 32768u
/* Longest tensor name in bytes, without the terminating NUL. */
#define DCR_CODEC_NAME_MAX 1023
/* zstd level used when the caller has no measured reason for another. */
#define DCR_CODEC_LEVEL_DEFAULT 1

/* How an item's values combine with the receiver's stored words. */
typedef enum dcr_encoding {
    DCR_ENCODING_XOR = 0,       /* stored ^= value (value is an XOR mask) */
    DCR_ENCODING_OVERWRITE = 1, /* stored = value */
    DCR_ENCODING_COUNT
} dcr_encoding_t;

/* How an item's flat indices are stored. The encoder chooses; callers of the
 * decoder see it only for statistics. */
typedef enum dcr_location_type {
    DCR_LOCATION_RUN = 0,  /* one contiguous run: start index only, length = value count */
    DCR_LOCATION_GAPS = 1, /* first index, then gaps to each next index in 1/2/4/8-byte words */
    DCR_LOCATION_RICE = 2, /* version 2: first index, then Rice codes of the gaps */
    DCR_LOCATION_COUNT
} dcr_location_type_t;

/* How an item's values are stored (version 2; version 1 has RAW only). */
typedef enum dcr_value_coding {
    DCR_VALUES_RAW = 0,     /* value words as they are */
    DCR_VALUES_HUFFMAN = 1, /* 16-bit words coded with the payload's Huffman table */
    DCR_VALUE_CODING_COUNT
} dcr_value_coding_t;

/* The decoded fixed header of a payload. */
typedef struct dcr_payload_header {
    uint16_t version;        /* DCR_CODEC_VERSION_1 or DCR_CODEC_VERSION_2 */
    uint16_t flags;          /* DCR_CODEC_FLAG_* */
    uint64_t tau;            /* attempt id issued by prepare */
    uint64_t payload_id;     /* unique per (tau, owner) */
    uint32_t owner;          /* training rank that encoded the payload */
    uint32_t item_count;     /* items in the body */
    uint64_t raw_len;        /* body bytes after decompression */
    uint64_t compressed_len; /* body bytes as stored after the header */
    uint8_t digest[16];      /* BLAKE2b-128 of header bytes [0, 48) followed by the body,
                                keyed when flags has DCR_CODEC_FLAG_KEYED */
} dcr_payload_header_t;

/* A payload key shared by owners and receivers. A zeroed struct is "no key":
 * payloads are written unkeyed and only unkeyed payloads are accepted. */
typedef struct dcr_payload_key {
    bool set; /* bytes holds a key */
    uint8_t bytes[DCR_CODEC_KEY_SIZE];
} dcr_payload_key_t;

/* Reads a key file of exactly DCR_CODEC_KEY_SIZE bytes into *out_p. The
 * open never blocks (a FIFO with no writer is refused at once) and only a
 * regular file of that size is read. *shared_p (may be NULL) is set true
 * when the file is readable by group or others, for the caller to warn
 * about. Errors: DCR_ENOTFOUND for a missing file, DCR_EINVAL naming the
 * path and what it is (a directory, a FIFO, a device) or its size when it
 * is not 32 bytes, DCR_EIO naming the path and the reason for the rest.
 * *out_p is written only on success. */
dcr_status_t dcr_payload_key_load(const char *path, dcr_payload_key_t *out_p, bool *shared_p);

/* What a reader accepts beyond the format's own rules. A NULL policy is the
 * zeroed one: no key, the format's raw length limit. */
typedef struct dcr_payload_policy {
    /* NULL or unset: only unkeyed payloads are accepted (a keyed one cannot
     * be verified). Set: only payloads keyed with this key are accepted. */
    const dcr_payload_key_t *key;
    /* Largest raw body the caller lets the decoder allocate, checked against
     * the header before any allocation; 0 means DCR_CODEC_RAW_MAX. */
    uint64_t max_raw;
} dcr_payload_policy_t;

/* Short text for an encoding ("xor", "overwrite"); "invalid" when out of range. */
const char *dcr_encoding_name(dcr_encoding_t encoding);

/* ------------------------------------------------------------------------ */
/* Encoding                                                                 */
/* ------------------------------------------------------------------------ */

/* One tensor's records as handed to the encoder. Every pointer is borrowed for
 * the duration of dcr_encoder_add only: the encoder copies what it keeps. */
typedef struct dcr_codec_item {
    const char *name;     /* canonical name: 1..DCR_CODEC_NAME_MAX bytes of '!'..'~' */
    int ndim;             /* 0..DCR_MAX_DIMS */
    const int64_t *shape; /* ndim dims, each >= 0; may be NULL when ndim == 0 */
    dcr_dtype_t dtype;    /* canonical dtype; fixes the value word size */
    dcr_encoding_t encoding;
    size_t count; /* number of records, >= 1 (empty items are not allowed) */
    /* count strictly increasing flat (row-major) indices, each < numel(shape).
     * NULL means the records are the run [run_start, run_start + count), which
     * spares callers that overwrite whole tensors an index array. */
    const int64_t *indices;
    int64_t run_start;  /* used only when indices == NULL */
    const void *values; /* count little-endian words of dtype, any alignment */
} dcr_codec_item_t;

/* What dcr_encoder_finish stamps on a payload. */
typedef struct dcr_encode_params {
    uint64_t tau;        /* attempt id */
    uint32_t owner;      /* encoding owner's rank */
    uint64_t payload_id; /* unique per (tau, owner); receivers deduplicate on the triple */
    int level;           /* zstd level, in [ZSTD_minCLevel(), ZSTD_maxCLevel()];
                            DCR_CODEC_LEVEL_DEFAULT unless measured otherwise */
    bool shuffle;        /* byte-plane shuffle value and gap words before zstd */
} dcr_encode_params_t;

typedef struct dcr_encoder dcr_encoder_t; /* opaque */

/* Creates an empty encoder. Its buffers grow on demand and are kept between
 * payloads, so one encoder per owner thread serves every bucket without
 * reallocating once the largest bucket has been seen. */
dcr_status_t dcr_encoder_create(dcr_encoder_t **out_p);

/* Frees the encoder and every buffer it handed out; accepts NULL. */
void dcr_encoder_destroy(dcr_encoder_t *enc);

/* Sets the key every later payload of enc is signed with (copied): keyed
 * digest and DCR_CODEC_FLAG_KEYED. NULL or an unset key goes back to the
 * plain digest. The key lives on the encoder rather than in the per-payload
 * params because an owner signs every payload with the same key. */
void dcr_encoder_set_key(dcr_encoder_t *enc, const dcr_payload_key_t *key);

/* Appends one item to the payload under construction. Validates the item
 * (name, ndim, shape, dtype, encoding, count >= 1, indices strictly increasing
 * and below numel) and returns DCR_EINVAL naming the tensor and the field
 * without changing the encoder when it is wrong. Picks DCR_LOCATION_RUN when
 * the indices form one contiguous run, else DCR_LOCATION_GAPS with the
 * smallest word that holds the item's largest gap. DCR_ENOMEM when a buffer
 * cannot grow. */
dcr_status_t dcr_encoder_add(dcr_encoder_t *enc, const dcr_codec_item_t *item);

/* Items added since the last finish or reset. */
size_t dcr_encoder_item_count(const dcr_encoder_t *enc);

/* The newest format version enc writes: DCR_CODEC_VERSION (the default)
 * lets it choose version 2 per payload, DCR_CODEC_VERSION_1 keeps every
 * payload version 1 (for readers that predate version 2). DCR_EINVAL for
 * any other value. */
dcr_status_t dcr_encoder_set_max_version(dcr_encoder_t *enc, unsigned version);

/* Body bytes (before compression) that the items added so far occupy in
 * version 1, for callers that cut buckets by encoded size. A version 2 body
 * is never larger: it codes a segment only where that makes it smaller. */
size_t dcr_encoder_raw_len(const dcr_encoder_t *enc);

/* Drops the items added since the last finish, keeping the buffers. */
void dcr_encoder_reset(dcr_encoder_t *enc);

/* Serializes the added items into one payload stamped with params: body,
 * optional shuffle, zstd, header, digest. On success *buf_p / *len_p describe
 * the payload, which the encoder owns and keeps valid until the next
 * dcr_encoder_finish or dcr_encoder_destroy (copy it to keep it longer), and
 * the encoder is empty again, ready for the next payload. A payload with no
 * items is valid (an owner that had nothing to send may still say so).
 * Errors: DCR_EINVAL for a bad level or an item count above UINT32_MAX,
 * DCR_ENOMEM, DCR_ECODEC when zstd fails; on error the items stay added. */
dcr_status_t dcr_encoder_finish(dcr_encoder_t *enc, const dcr_encode_params_t *params,
                                const uint8_t **buf_p, size_t *len_p);

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/* Parses the 64-byte header at hdr alone (FORMAT.md header rules 1-3:
 * magic, version, flags, raw length against the item count, the format's
 * and the policy's limits, and the compressed length against the raw one),
 * without the body. Lets a file or network reader bound what it reads
 * before reading the body: after success, compressed_len bytes follow, at
 * most ZSTD_COMPRESSBOUND(policy's max_raw). Nothing is verified: the
 * fields are untrusted. Errors: DCR_EPAYLOAD (field named in the detail).
 * *out_p is written only on success. */
dcr_status_t dcr_payload_header_parse(const void *hdr, size_t len,
                                      const dcr_payload_policy_t *policy,
                                      dcr_payload_header_t *out_p);

/* Checks the fixed header of buf[0, len) and its digest under policy
 * (FORMAT.md header rules 1-6): a hash of the compressed bytes, no
 * decompression. This is the check every place that admits payloads from
 * across a trust boundary calls. Errors: DCR_EPAYLOAD (field named in the
 * detail); DCR_EDIGEST for a digest that does not match, and for a payload
 * whose keying does not fit the policy (keyed with no key configured, or
 * unkeyed with one), with a detail saying which (see
 * dcr_payload_auth_failure). *out_p is written only on success. */
dcr_status_t dcr_payload_verify(const void *buf, size_t len, const dcr_payload_policy_t *policy,
                                dcr_payload_header_t *out_p);

/* True when st, returned by dcr_payload_verify or a decode of buf[0, len)
 * under a policy with key `key` (NULL: none), is an authentication failure:
 * the payload was refused for its keying or its keyed digest (forged,
 * unkeyed, keyed differently, or keyed with no key here), as opposed to a
 * plain corrupt one. Receivers count the two apart. */
bool dcr_payload_auth_failure(dcr_status_t st, const void *buf, size_t len,
                              const dcr_payload_key_t *key);

/* Reads and checks only the fixed header of buf[0, len): magic, version,
 * flags, the lengths against len, and with verify_digest also the digest
 * under the zeroed policy (dcr_payload_verify with NULL: a keyed payload
 * fails). Lets a receiver drop a duplicate (tau, owner, payload_id)
 * cheaply. Without verify_digest the returned fields are unauthenticated
 * and must not be trusted for anything that cannot be undone. Errors:
 * DCR_EPAYLOAD (field named in the detail), DCR_EDIGEST. *out_p is written
 * only on success. */
dcr_status_t dcr_payload_peek(const void *buf, size_t len, bool verify_digest,
                              dcr_payload_header_t *out_p);

/* A decoded payload: an opaque handle that owns a copy of the decompressed
 * body. Receivers keep one per staging slot and decode into it again and
 * again, so its buffers are reused. */
typedef struct dcr_payload dcr_payload_t;

/* One item of a decoded payload. Pointers point into the payload's buffers
 * and stay valid until the payload is decoded into again or destroyed. */
typedef struct dcr_payload_item {
    const char *name; /* NUL-terminated canonical name */
    int ndim;
    int64_t shape[DCR_MAX_DIMS]; /* dims beyond ndim are 0 */
    int64_t numel;               /* product of the shape */
    dcr_dtype_t dtype;
    dcr_encoding_t encoding;
    dcr_location_type_t location;
    unsigned gap_bytes; /* 1, 2, 4 or 8 for DCR_LOCATION_GAPS; 0 for a run or Rice */
    unsigned rice_k;    /* the Rice parameter of DCR_LOCATION_RICE; 0 otherwise */
    dcr_value_coding_t value_coding;
    size_t location_bytes; /* bytes of the item's segment in the locations section */
    size_t value_bytes;    /* bytes of the item's segment in the values section */
    size_t count;          /* records, >= 1 */
    int64_t first;         /* smallest flat index (a run's start) */
    int64_t last;          /* largest flat index */
    /* count little-endian words of dtype, unshuffled. The pointer may be
     * unaligned for the dtype: read words with memcpy or dcr_payload_item_values. */
    const void *values;
} dcr_payload_item_t;

/* Creates an empty decoded payload (no items until a successful decode). */
dcr_status_t dcr_payload_create(dcr_payload_t **out_p);

/* Frees the payload and its buffers; accepts NULL. */
void dcr_payload_destroy(dcr_payload_t *p);

/* Validates buf[0, len) completely and, only if every rule of FORMAT.md
 * holds, makes p hold its contents: header, digest, decompressed length,
 * item table bounds and tiling, names, shapes, dtypes, encodings, location
 * types, gap words, and every index strictly increasing and below its
 * tensor's numel. buf is not referenced after the call. Checking shapes and
 * dtypes against a receiver's inventory is the receiver's job, not this one.
 * Errors: DCR_EPAYLOAD (a corrupt zstd frame included) or DCR_EDIGEST with a
 * detail naming the payload (tau, owner, payload id once the header is
 * readable), the item and the field; DCR_ENOMEM. After an error p holds no
 * payload (item count 0), never a partly validated one. */
dcr_status_t dcr_payload_decode(dcr_payload_t *p, const void *buf, size_t len);

/* dcr_payload_decode under policy (NULL: as dcr_payload_decode): the key
 * decides which digests are accepted, and max_raw bounds the body the
 * decoder allocates before it allocates it. Errors as dcr_payload_decode;
 * an authentication failure is DCR_EDIGEST (dcr_payload_auth_failure). */
dcr_status_t dcr_payload_decode_with(dcr_payload_t *p, const void *buf, size_t len,
                                     const dcr_payload_policy_t *policy);

/* dcr_payload_decode_with for bytes already admitted: every rule is checked
 * as there except the digest, which the caller has verified with
 * dcr_payload_verify on these same bytes (same buf, unchanged since) under
 * this same policy. Hashing the body is the dominant cost of a small
 * payload's decode, and an admitting receiver would otherwise hash each
 * payload twice. Never call it on bytes whose digest was checked elsewhere
 * (a copy, another transport hop, another policy): a corrupt or forged body
 * would then be decoded and applied. Errors as dcr_payload_decode_with, less
 * DCR_EDIGEST. */
dcr_status_t dcr_payload_decode_admitted(dcr_payload_t *p, const void *buf, size_t len,
                                         const dcr_payload_policy_t *policy);

/* Header of the payload p holds; NULL when it holds none. */
const dcr_payload_header_t *dcr_payload_get_header(const dcr_payload_t *p);

/* Items in the payload p holds; 0 when it holds none. */
size_t dcr_payload_item_count(const dcr_payload_t *p);

/* Describes item i (0-based, file order). DCR_EINVAL when i is out of range. */
dcr_status_t dcr_payload_item(const dcr_payload_t *p, size_t i, dcr_payload_item_t *out_p);

/* Writes item i's count flat indices, increasing, into dst, which must have
 * room for count entries. Decoding again is cheap (the indices were checked
 * during dcr_payload_decode) and keeps the decoded payload at the size of its
 * compact gap words. DCR_EINVAL when i is out of range. */
dcr_status_t dcr_payload_item_indices(const dcr_payload_t *p, size_t i, int64_t *dst);

/* Copies item i's count value words (count * dtype size bytes) into dst, so
 * that callers get them at dst's alignment, e.g. in a uint16_t or uint32_t
 * array. DCR_EINVAL when i is out of range. */
dcr_status_t dcr_payload_item_values(const dcr_payload_t *p, size_t i, void *dst);

/* ------------------------------------------------------------------------ */
/* Byte-plane shuffle                                                       */
/* ------------------------------------------------------------------------ */

/* Byte-plane shuffle (as in blosc): byte b of word i of src goes to
 * dst[b * nwords + i], so the sign/exponent bytes of all words become one
 * plane and the noisy low mantissa bytes another, which zstd compresses
 * better. width is the word size in bytes (1 copies). dst and src must not
 * overlap; each holds nwords * width bytes. */
void dcr_codec_shuffle(void *dst, const void *src, size_t nwords, size_t width);

/* Inverse of dcr_codec_shuffle with the same nwords and width. */
void dcr_codec_unshuffle(void *dst, const void *src, size_t nwords, size_t width);

#ifdef __cplusplus
}
#endif
#endif
