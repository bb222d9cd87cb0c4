/* Shared by the files of the etcd control-plane backend (control_etcd.c: the
 * operations; control_etcd_wire.c: the v3 JSON gateway; control_etcd_value.c:
 * the binary values); not part of the public interface. */
#ifndef DCR_ETCD_INTERNAL_H
#define DCR_ETCD_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/control.h"

#define DCR__ET_DEFAULT_TIMEOUT 5000
#define DCR__ET_DEFAULT_PREFIX  "dcr"
#define DCR__ET_SCHEMA          "dcr-control-etcd 1"
#define DCR__ET_PREFIX_MAX      200
#define DCR__ET_HOST_MAX        256
#define DCR__ET_KEY_MAX         (DCR__ET_PREFIX_MAX + 128)
/* Reports up to this size are stored inline in their header key; larger ones
 * in parts of this size (base64 grows them to ~700 KB, under etcd's default
 * 1.5 MiB request limit). */
#define DCR__ET_CHUNK       (512u * 1024u)
#define DCR__ET_CHUNKS_MAX  ((DCR_CONTROL_REPORT_MAX + DCR__ET_CHUNK - 1) / DCR__ET_CHUNK)
#define DCR__ET_LEASE_TTL_S 10
/* No response we ask for can be larger than a full acknowledgment listing or
 * a base64 report part; this bounds what a broken server can make us hold. */
#define DCR__ET_RESPONSE_MAX (32u << 20)
#define DCR__ET_TAG_BYTES    8

/* Fixed-size parts of the encodings (after the tag). */
#define DCR__ET_RECORD_BYTES  (DCR__ET_TAG_BYTES + 24 + DCR_CONTROL_BASELINE_BYTES)
#define DCR__ET_ATTEMPT_FIXED (DCR__ET_TAG_BYTES + 36 + DCR_CONTROL_ID_MAX)
#define DCR__ET_MEMBER_FIXED  (DCR__ET_TAG_BYTES + 12 + DCR_CONTROL_ID_MAX)
#define DCR__ET_REPORT_FIXED  (DCR__ET_TAG_BYTES + 20)

typedef struct dcr__et {
    dcr_control_t pub; /* first: the handle header */
    /* The lease and the cached attempt change during a call: threads
     * sharing a handle take turns per call. */
    pthread_mutex_t mu;
    char base_url[DCR__ET_HOST_MAX + 32];                   /* http://HOST:PORT */
    char where[DCR__ET_HOST_MAX + DCR__ET_PREFIX_MAX + 32]; /* "etcd HOST:PORT/PREFIX" */
    char prefix[DCR__ET_PREFIX_MAX + 2];                    /* "PREFIX/" */
    int timeout_ms;
    /* When the running call must have its answer (CLOCK_MONOTONIC ms): every
     * request of one call shares the call's timeout. */
    int64_t deadline_ms;
    /* The latest attempt as this handle last read it (cache_tau 0: none), so
     * that an acknowledgment is one txn: its compare on P/latest's mod
     * revision proves the copy still current. */
    uint64_t cache_tau;
    int64_t cache_mod;
    uint32_t *cache_required;
    uint32_t cache_n;
    /* The coordinator lease (0: none yet). */
    int64_t lease_id;
    int64_t lease_refreshed_ns;
    char lease_owner[DCR_CONTROL_ID_MAX];
    /* The highest store revision any response of this handle named: the
     * handle's change position (control_etcd_watch.c), read without the
     * turn by a waiting thread. */
    atomic_int_fast64_t seen_rev;
} dcr__et_t;

/* One key-value as the range response holds it; value is malloc'd. */
typedef struct dcr__et_kv {
    char key[DCR__ET_KEY_MAX];
    uint8_t *value;
    size_t len;
    int64_t create_rev, mod_rev, lease;
} dcr__et_kv_t;

/* A txn's outcome: whether the compares held, and its responses. */
typedef struct dcr__et_txn {
    json_t *resp;
    json_t *responses;
    bool succeeded;
    int64_t revision;
} dcr__et_txn_t;

/* An attempt with its sorted required receivers (malloc'd). */
typedef struct dcr__et_attempt {
    dcr_control_attempt_t info;
    uint32_t *required;
} dcr__et_attempt_t;

/* ---- the gateway (control_etcd_wire.c) ---------------------------------------- */

/* CLOCK_MONOTONIC milliseconds. */
int64_t dcr__et_mono_ms(void);
/* Takes the handle's turn for one call and starts the call's clock; end
 * gives the turn back. */
void dcr__et_begin(dcr__et_t *e);
void dcr__et_end(dcr__et_t *e);
/* The DCR_ECONTROL line for a response or value that is not what was expected. */
dcr_status_t dcr__et_malformed(dcr__et_t *e, const char *what, const char *expected);

/* Standard padded base64 (libcrypto), as the gateway's bytes fields hold it:
 * encode gives a malloc'd NUL-terminated string (NULL without memory);
 * decode accepts only the alphabet and at most two '=' at the end, at most
 * max bytes decoded, into a malloc'd buffer (NULL for ""). */
char *dcr__et_b64_encode(const void *data, size_t n);
bool dcr__et_b64_decode(const char *s, size_t len, size_t max, uint8_t **out_p, size_t *n_p);

/* prefix + formatted suffix into buf (always fits: suffixes are short). */
const char *dcr__et_key(const dcr__et_t *e, char buf[DCR__ET_KEY_MAX], const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The end of the range of keys starting with prefix (which ends in '/'). */
void dcr__et_prefix_end(const char *prefix, char end[DCR__ET_KEY_MAX]);

/* JSON pieces of requests (NULL without memory, which json_pack and the
 * json_*_new calls they go into pass on as a failed request): a key in
 * base64, an int64 as the gateway's decimal string, the request ops of a
 * txn, and its compares for equality (target "MOD" or "CREATE" revision). */
json_t *dcr__et_jkey(const char *key);
json_t *dcr__et_jint(int64_t v);
json_t *dcr__et_op_range(const char *key, const char *end, bool keys_only);
json_t *dcr__et_op_put(const char *key, const void *value, size_t n, int64_t lease);
json_t *dcr__et_op_delete(const char *key, const char *end);
json_t *dcr__et_cmp_value(const char *key, const void *value, size_t n);
json_t *dcr__et_cmp_rev(const char *key, const char *target, int64_t rev);

/* POSTs req (consumed) to path within the call's deadline and parses the
 * 200 response (at most DCR__ET_RESPONSE_MAX bytes) into *resp_p. Every
 * failure is one DCR_ECONTROL line naming the address and `what`. */
dcr_status_t dcr__et_post(dcr__et_t *e, const char *path, json_t *req, const char *what,
                          json_t **resp_p);

/* An int64 field the gateway writes as a decimal string (or a number);
 * absent means 0. */
bool dcr__et_jget_int(json_t *obj, const char *name, int64_t *out_p);
/* One key-value of a range response, its value at most max bytes. */
dcr_status_t dcr__et_parse_kv(dcr__et_t *e, json_t *j, size_t max, dcr__et_kv_t *kv);
/* The kvs array of a range response (NULL when absent: empty). */
dcr_status_t dcr__et_kvs(dcr__et_t *e, json_t *range, json_t **kvs_p);
/* The single key of a range response: *found_p false when absent. */
dcr_status_t dcr__et_one(dcr__et_t *e, json_t *range, size_t max, dcr__et_kv_t *kv, bool *found_p);
void dcr__et_kvs_free(dcr__et_kv_t *kvs, size_t n);

/* Runs a txn (arrays consumed; any may be NULL); free the outcome with
 * txn_free. txn_response is its response i, which must be of `kind`
 * ("response_range"). */
dcr_status_t dcr__et_txn(dcr__et_t *e, json_t *compare, json_t *success, json_t *failure,
                         const char *what, dcr__et_txn_t *t);
void dcr__et_txn_free(dcr__et_txn_t *t);
dcr_status_t dcr__et_txn_response(dcr__et_t *e, const dcr__et_txn_t *t, size_t i, const char *kind,
                                  json_t **out_p);
/* Reads keys[0..n) in one snapshot into kvs, each value at most max[i]
 * bytes; found[i] tells whether key i exists. */
dcr_status_t dcr__et_snapshot(dcr__et_t *e, const char *const *keys, const size_t *max, size_t n,
                              const char *what, dcr__et_kv_t *kvs, bool *found);
/* The mod revision of key (0 when absent), read keys only. */
dcr_status_t dcr__et_mod_rev(dcr__et_t *e, const char *key, const char *what, int64_t *mod_p);
/* Reads the one key prefix+suffix (a value of at most max bytes), taking
 * the handle's turn. */
dcr_status_t dcr__et_get(dcr__et_t *e, const char *suffix, size_t max, const char *what,
                         dcr__et_kv_t *kv, bool *found_p);

/* ---- change notification (control_etcd_watch.c) ------------------------------------ */

/* The ops slots position and wait (dcr/control.h): the last revision seen,
 * and a watch of the prefix from the revision after `since`. */
uint64_t dcr__et_position(dcr_control_t *c);
dcr_status_t dcr__et_wait(dcr_control_t *c, uint64_t since, int timeout_ms);

/* ---- values (control_etcd_value.c) --------------------------------------------- */

/* The commit record as P/record holds it; decode checks every field (found
 * false: the key is missing, which is malformed too). */
void dcr__et_encode_record(const dcr_commit_record_t *r, uint8_t out[DCR__ET_RECORD_BYTES]);
dcr_status_t dcr__et_decode_record(dcr__et_t *e, const dcr__et_kv_t *kv, bool found,
                                   dcr_commit_record_t *r);
/* An attempt with its sorted required receivers: encode gives a malloc'd
 * value of *len_p bytes (NULL without memory); decode checks every field
 * and mallocs a->required. */
uint8_t *dcr__et_encode_attempt(const dcr_control_attempt_t *a, const uint32_t *sorted,
                                size_t *len_p);
dcr_status_t dcr__et_decode_attempt(dcr__et_t *e, const dcr__et_kv_t *kv, dcr__et_attempt_t *a);
/* Reads n little-endian u32s at p into out; false unless strictly ascending. */
bool dcr__et_sorted_u32(const uint8_t *p, size_t n, uint32_t *out);
/* Whether sorted[0..n) holds x. */
bool dcr__et_contains(const uint32_t *sorted, size_t n, uint32_t x);
/* A malloc'd ascending copy of list[0..n) (NULL when n is 0). */
dcr_status_t dcr__et_sorted_copy(dcr__et_t *e, const uint32_t *list, size_t n, uint32_t **out_p);

#endif
