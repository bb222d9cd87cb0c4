/* The etcd backend's side of etcd's v3 JSON gateway: a call's turn and
 * deadline, base64 (libcrypto), keys under the prefix, the JSON of requests,
 * the POST (core/http-internal.h), and the checked reading of responses,
 * transactions and snapshots. Every response is bounded and checked; anything
 * else is one DCR_ECONTROL line naming the address. */
#include "etcd-internal.h"
#include "core/http-internal.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"

int64_t dcr__et_mono_ms(void)
{
    return (int64_t)(dcr_clock_ns() / 1000000);
}

/* Takes the handle's turn for one call and starts the call's clock. */
void dcr__et_begin(dcr__et_t *e)
{
    pthread_mutex_lock(&e->mu);
    e->deadline_ms = dcr__et_mono_ms() + e->timeout_ms;
}

void dcr__et_end(dcr__et_t *e)
{
    pthread_mutex_unlock(&e->mu);
}

/* ---- errors ------------------------------------------------------------------ */

dcr_status_t dcr__et_malformed(dcr__et_t *e, const char *what, const char *expected)
{
    return dcr_error_set(DCR_ECONTROL, "%s: malformed %s: expected %s", e->where, what, expected);
}

/* ---- base64 (standard alphabet, padded: what the gateway's bytes fields use) ---- */

/* A malloc'd NUL-terminated encoding of data[0..n), or NULL without memory. */
char *dcr__et_b64_encode(const void *data, size_t n)
{
    if (n > (size_t)INT_MAX / 4 * 3) return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (out != NULL) EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    return out;
}

/* Decodes padded base64 of at most max bytes into a malloc'd buffer (NULL for
 * an empty string). false if s is not such base64 or memory ran out. */
bool dcr__et_b64_decode(const char *s, size_t len, size_t max, uint8_t **out_p, size_t *n_p)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    *out_p = NULL;
    *n_p = 0;
    if (len == 0) return true;
    if (len % 4 != 0 || len > INT_MAX) return false;
    size_t pad = (s[len - 1] == '=') + (len >= 2 && s[len - 2] == '=');
    /* libcrypto skips blanks and reads a '=' anywhere as data: only the
     * alphabet, then at most two '=' at the end, is base64 here. */
    if (strspn(s, alphabet) != len - pad) return false;
    size_t n = len / 4 * 3 - pad;
    if (n > max) return false;
    uint8_t *out = malloc(len / 4 * 3 + 1);
    if (out == NULL) return false;
    if (EVP_DecodeBlock(out, (const unsigned char *)s, (int)len) != (int)(len / 4 * 3)) {
        free(out);
        return false;
    }
    *out_p = out;
    *n_p = n;
    return true;
}

/* ---- keys --------------------------------------------------------------------- */

/* prefix + formatted suffix into buf (always fits: suffixes are short). */
const char *dcr__et_key(const dcr__et_t *e, char buf[DCR__ET_KEY_MAX], const char *fmt, ...)
{
    int n = snprintf(buf, DCR__ET_KEY_MAX, "%s", e->prefix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, (size_t)(DCR__ET_KEY_MAX - n), fmt, ap);
    va_end(ap);
    return buf;
}

/* ---- JSON request pieces ---------------------------------------------------------- */

/* A JSON string holding the base64 of data[0..n); NULL without memory. */
static json_t *dcr__et_jb64(const void *data, size_t n)
{
    char *s = dcr__et_b64_encode(data, n);
    json_t *j = s != NULL ? json_string(s) : NULL;
    free(s);
    return j;
}

json_t *dcr__et_jkey(const char *key)
{
    return dcr__et_jb64(key, strlen(key));
}

json_t *dcr__et_jint(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

/* {"request_range": {"key": K[, "range_end": E][, "keys_only": true]}} */
json_t *dcr__et_op_range(const char *key, const char *end, bool keys_only)
{
    json_t *r = json_object();
    json_object_set_new(r, "key", dcr__et_jkey(key));
    if (end != NULL) json_object_set_new(r, "range_end", dcr__et_jkey(end));
    if (keys_only) json_object_set_new(r, "keys_only", json_true());
    return json_pack("{s:o}", "request_range", r);
}

json_t *dcr__et_op_put(const char *key, const void *value, size_t n, int64_t lease)
{
    json_t *r = json_object();
    json_object_set_new(r, "key", dcr__et_jkey(key));
    json_object_set_new(r, "value", dcr__et_jb64(value, n));
    if (lease != 0) json_object_set_new(r, "lease", dcr__et_jint(lease));
    return json_pack("{s:o}", "request_put", r);
}

json_t *dcr__et_op_delete(const char *key, const char *end)
{
    return json_pack("{s:{s:o,s:o}}", "request_delete_range", "key", dcr__et_jkey(key), "range_end",
                     dcr__et_jkey(end));
}

/* A compare of key's target ("VALUE", "MOD" or "CREATE") for equality. */
json_t *dcr__et_cmp_value(const char *key, const void *value, size_t n)
{
    return json_pack("{s:s,s:s,s:o,s:o}", "target", "VALUE", "result", "EQUAL", "key",
                     dcr__et_jkey(key), "value", dcr__et_jb64(value, n));
}

json_t *dcr__et_cmp_rev(const char *key, const char *target, int64_t rev)
{
    const char *field = strcmp(target, "MOD") == 0 ? "mod_revision" : "create_revision";
    return json_pack("{s:s,s:s,s:o,s:o}", "target", target, "result", "EQUAL", "key",
                     dcr__et_jkey(key), field, dcr__et_jint(rev));
}

/* The end of the range of keys starting with prefix: its last byte + 1
 * (every prefix here ends in '/', which becomes '0'). */
void dcr__et_prefix_end(const char *prefix, char end[DCR__ET_KEY_MAX])
{
    snprintf(end, DCR__ET_KEY_MAX, "%s", prefix);
    size_t n = strlen(end);
    end[n - 1]++;
}

/* ---- HTTP --------------------------------------------------------------------------- */

/* POSTs req (consumed) to path and parses the 200 response into *resp_p.
 * Every failure is one DCR_ECONTROL line naming the address and `what`. */
dcr_status_t dcr__et_post(dcr__et_t *e, const char *path, json_t *req, const char *what,
                          json_t **resp_p)
{
    char *text = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (text == NULL) {
        return dcr_error_set(DCR_ENOMEM, "%s: %s: building the request failed", e->where, what);
    }
    int64_t left = e->deadline_ms - dcr__et_mono_ms();
    if (left < 1) {
        free(text);
        return dcr_error_set(DCR_ECONTROL, "%s: %s: no answer within %d ms", e->where, what,
                             e->timeout_ms);
    }
    char url[sizeof e->base_url + 64];
    snprintf(url, sizeof url, "%s%s", e->base_url, path);
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    dcr__http_req_t q = {
        .method = "POST",
        .url = url,
        .headers = headers,
        .body = text,
        .body_len = strlen(text),
        .http_only = true,
        .tcp_nodelay = true,
        .connect_timeout_ms = (int)left,
        .timeout_ms = (int)left,
        .body_max = DCR__ET_RESPONSE_MAX,
    };
    dcr__http_resp_t hr;
    dcr_status_t st = dcr__http_request(&q, &hr);
    free(text);
    if (st != DCR_OK) {
        if (st == DCR_ETIMEOUT) {
            st = dcr_error_set(DCR_ECONTROL, "%s: %s: no answer within %d ms", e->where, what,
                               e->timeout_ms);
        } else {
            st = dcr_error_set(DCR_ECONTROL, "%s: %s: %s", e->where, what, hr.error);
        }
        dcr__http_resp_free(&hr);
        return st;
    }
    json_error_t jerr;
    json_t *resp = json_loadb(hr.body ? (const char *)hr.body : "", hr.body_len, 0, &jerr);
    dcr__http_resp_free(&hr);
    if (hr.code != 200) {
        const char *msg = resp != NULL ? json_string_value(json_object_get(resp, "message")) : NULL;
        st = dcr_error_set(DCR_ECONTROL, "%s: %s: HTTP %ld: %.200s", e->where, what, hr.code,
                           msg != NULL ? msg : "(no etcd error message)");
        json_decref(resp);
        return st;
    }
    if (resp == NULL || !json_is_object(resp)) {
        json_decref(resp);
        return dcr_error_set(DCR_ECONTROL,
                             "%s: %s: malformed response: expected a JSON object (%s)", e->where,
                             what, resp == NULL ? jerr.text : "another JSON value");
    }
    /* Every response's header names the store's revision when it was
     * served: the handle's change position grows with it. */
    int64_t rev = 0;
    if (dcr__et_jget_int(json_object_get(resp, "header"), "revision", &rev) &&
        rev > atomic_load(&e->seen_rev))
        atomic_store(&e->seen_rev, rev);
    *resp_p = resp;
    return DCR_OK;
}

/* ---- JSON response pieces ----------------------------------------------------------- */

/* An int64 field the gateway writes as a decimal string (or, leniently, a
 * number); absent means 0, as proto3 JSON omits zero values. */
bool dcr__et_jget_int(json_t *obj, const char *name, int64_t *out_p)
{
    json_t *v = json_object_get(obj, name);
    if (v == NULL) {
        *out_p = 0;
        return true;
    }
    if (json_is_integer(v)) {
        *out_p = json_integer_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == '\0' || strlen(s) > 20) return false;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end != '\0' || errno != 0 || (s[0] != '-' && (s[0] < '0' || s[0] > '9'))) return false;
    *out_p = x;
    return true;
}

dcr_status_t dcr__et_parse_kv(dcr__et_t *e, json_t *j, size_t max, dcr__et_kv_t *kv)
{
    memset(kv, 0, sizeof *kv);
    json_t *jk = json_object_get(j, "key"), *jv = json_object_get(j, "value");
    uint8_t *key = NULL;
    size_t key_len = 0;
    if (!json_is_object(j) || !json_is_string(jk) || (jv != NULL && !json_is_string(jv)) ||
        !dcr__et_b64_decode(json_string_value(jk), json_string_length(jk), DCR__ET_KEY_MAX - 1,
                            &key, &key_len) ||
        !dcr__et_jget_int(j, "create_revision", &kv->create_rev) ||
        !dcr__et_jget_int(j, "mod_revision", &kv->mod_rev) ||
        !dcr__et_jget_int(j, "lease", &kv->lease)) {
        free(key);
        return dcr__et_malformed(e, "key-value in a range response",
                                 "base64 key and value and decimal revisions");
    }
    if (key_len > 0) memcpy(kv->key, key, key_len);
    kv->key[key_len] = '\0';
    free(key);
    if (memchr(kv->key, '\0', key_len) != NULL) {
        return dcr__et_malformed(e, "key in a range response", "a key without NUL bytes");
    }
    if (jv != NULL && !dcr__et_b64_decode(json_string_value(jv), json_string_length(jv), max,
                                          &kv->value, &kv->len)) {
        char expected[64];
        snprintf(expected, sizeof expected, "a base64 value of at most %zu bytes", max);
        return dcr__et_malformed(e, kv->key, expected);
    }
    return DCR_OK;
}

/* The kvs array of a range response; NULL when absent, which jansson's
 * array calls treat as empty. */
dcr_status_t dcr__et_kvs(dcr__et_t *e, json_t *range, json_t **kvs_p)
{
    json_t *kvs = json_object_get(range, "kvs");
    if (!json_is_object(range) || (kvs != NULL && !json_is_array(kvs))) {
        return dcr__et_malformed(e, "range response", "an object with a kvs array");
    }
    *kvs_p = kvs;
    return DCR_OK;
}

/* The single key of a range response: *found_p false when absent. */
dcr_status_t dcr__et_one(dcr__et_t *e, json_t *range, size_t max, dcr__et_kv_t *kv, bool *found_p)
{
    json_t *kvs;
    DCR_CHECK(dcr__et_kvs(e, range, &kvs));
    if (json_array_size(kvs) > 1) {
        return dcr__et_malformed(e, "range response", "at most one key-value");
    }
    *found_p = json_array_size(kvs) == 1;
    if (!*found_p) {
        memset(kv, 0, sizeof *kv);
        return DCR_OK;
    }
    return dcr__et_parse_kv(e, json_array_get(kvs, 0), max, kv);
}

/* ---- transactions ------------------------------------------------------------------- */

void dcr__et_txn_free(dcr__et_txn_t *t)
{
    json_decref(t->resp);
    memset(t, 0, sizeof *t);
}

/* Runs a txn (arrays consumed; any may be NULL). */
dcr_status_t dcr__et_txn(dcr__et_t *e, json_t *compare, json_t *success, json_t *failure,
                         const char *what, dcr__et_txn_t *t)
{
    memset(t, 0, sizeof *t);
    json_t *req = json_object();
    if (compare != NULL) json_object_set_new(req, "compare", compare);
    if (success != NULL) json_object_set_new(req, "success", success);
    if (failure != NULL) json_object_set_new(req, "failure", failure);
    DCR_CHECK(dcr__et_post(e, "/v3/kv/txn", req, what, &t->resp));
    json_t *succ = json_object_get(t->resp, "succeeded");
    json_t *responses = json_object_get(t->resp, "responses");
    if ((succ != NULL && !json_is_boolean(succ)) ||
        (responses != NULL && !json_is_array(responses)) ||
        !dcr__et_jget_int(json_object_get(t->resp, "header"), "revision", &t->revision)) {
        dcr__et_txn_free(t);
        return dcr__et_malformed(e, "txn response", "succeeded, responses and a header revision");
    }
    t->responses = responses;
    t->succeeded = json_is_true(succ);
    return DCR_OK;
}

/* Response i of a txn, which must be of the given kind ("response_range"). */
dcr_status_t dcr__et_txn_response(dcr__et_t *e, const dcr__et_txn_t *t, size_t i, const char *kind,
                                  json_t **out_p)
{
    json_t *r = json_object_get(json_array_get(t->responses, i), kind);
    if (r == NULL) {
        char expected[96];
        snprintf(expected, sizeof expected, "%s as response %zu", kind, i);
        return dcr__et_malformed(e, "txn response", expected);
    }
    *out_p = r;
    return DCR_OK;
}

void dcr__et_kvs_free(dcr__et_kv_t *kvs, size_t n)
{
    for (size_t i = 0; i < n; i++) free(kvs[i].value);
}

/* Reads keys[0..n) in one snapshot (a txn with only ranges) into kvs, each
 * value at most max[i] bytes; found[i] tells whether key i exists. */
dcr_status_t dcr__et_snapshot(dcr__et_t *e, const char *const *keys, const size_t *max, size_t n,
                              const char *what, dcr__et_kv_t *kvs, bool *found)
{
    json_t *ops = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(ops, dcr__et_op_range(keys[i], NULL, false));
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, NULL, ops, NULL, what, &t));
    dcr_status_t st = DCR_OK;
    memset(kvs, 0, n * sizeof *kvs);
    for (size_t i = 0; i < n && st == DCR_OK; i++) {
        json_t *r;
        st = dcr__et_txn_response(e, &t, i, "response_range", &r);
        if (st == DCR_OK) st = dcr__et_one(e, r, max[i], &kvs[i], &found[i]);
    }
    dcr__et_txn_free(&t);
    if (st != DCR_OK) dcr__et_kvs_free(kvs, n);
    return st;
}

/* The mod revision of key (0 when absent), read keys only: a caller that
 * only compares against it later need not download the value. */
dcr_status_t dcr__et_mod_rev(dcr__et_t *e, const char *key, const char *what, int64_t *mod_p)
{
    dcr__et_txn_t t;
    DCR_CHECK(
        dcr__et_txn(e, NULL, json_pack("[o]", dcr__et_op_range(key, NULL, true)), NULL, what, &t));
    json_t *r;
    dcr__et_kv_t kv = {0};
    bool found = false;
    dcr_status_t st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
    if (st == DCR_OK) st = dcr__et_one(e, r, 0, &kv, &found);
    if (st == DCR_OK) *mod_p = found ? kv.mod_rev : 0;
    free(kv.value);
    dcr__et_txn_free(&t);
    return st;
}

/* Reads the one key prefix+suffix (a value of at most max bytes), taking
 * the handle's turn. */
dcr_status_t dcr__et_get(dcr__et_t *e, const char *suffix, size_t max, const char *what,
                         dcr__et_kv_t *kv, bool *found_p)
{
    char key[DCR__ET_KEY_MAX];
    const char *keys[] = {dcr__et_key(e, key, "%s", suffix)};
    dcr__et_begin(e);
    dcr_status_t st = dcr__et_snapshot(e, keys, &max, 1, what, kv, found_p);
    dcr__et_end(e);
    return st;
}
