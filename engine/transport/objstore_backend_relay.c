/* The "relay" object store: "relay://HOST:PORT", the retained versions a
 * relay tree's root keeps (dcr/recovery.h), read over the network.
 * Read-only: get and list of keys under "versions/"; put and delete are
 * refused. One connection per handle, opened at the first request (and
 * while the root refuses it as busy, tried again until the timeout) and
 * opened again once when a request finds it broken (requests are reads,
 * so a repeat is harmless). Every answer is checked against what was
 * asked before a byte of it is used: its type, its length against the
 * caller's buffer, every listed key.
 *
 * Properties: listings are the root's dir store's (consistent), ranged
 * reads are served, and there is no change notification (wait_change
 * sleeps). */
#include "transport/relay-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/endian-internal.h"
#include "dcr/clock.h"
#include "transport/objstore-internal.h"

#define RS_SCHEME     "relay://"
#define RS_TIMEOUT_MS 60000

/* ---- retained keys (relay-internal.h) ------------------------------------- */

/* "versions/v<decimal>/" at the start of c. */
static bool cur_version_dir(dcr__cursor_t *c)
{
    uint64_t v;
    return dcr__cursor_lit(c, DCR__RELAY_RETAINED_ROOT "v") && dcr__cursor_u64(c, &v) &&
           dcr__cursor_lit(c, "/");
}

/* The retained payload name rule (dcr/recovery.h), or the VERSION manifest. */
static bool retained_name_ok(const char *name, size_t n)
{
    if (n == 0 || n > DCR__RELAY_RETAINED_NAME_MAX || name[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok) return false;
    }
    return true;
}

bool dcr__relay_retained_key_ok(const char *key)
{
    if (!dcr_objstore_key_ok(key)) return false;
    dcr__cursor_t c = {key, key + strlen(key)};
    return cur_version_dir(&c) && retained_name_ok(c.p, (size_t)(c.end - c.p));
}

bool dcr__relay_retained_prefix_ok(const char *prefix)
{
    if (strcmp(prefix, DCR__RELAY_RETAINED_ROOT) == 0) return true;
    dcr__cursor_t c = {prefix, prefix + strlen(prefix)};
    return cur_version_dir(&c) && c.p == c.end;
}

typedef struct relaystore {
    dcr_objstore_t pub;
    char addr[272]; /* HOST:PORT */
    int timeout_ms;
    pthread_mutex_t mu; /* one request at a time on fd */
    int fd;             /* -1: not connected */
} relaystore_t;

static bool rs_claims(const dcr_objstore_ops_t *self, const char *url)
{
    (void)self;
    return strncmp(url, RS_SCHEME, strlen(RS_SCHEME)) == 0;
}

/* HOST:PORT, HOST of [A-Za-z0-9.-], PORT 1..65535, nothing after. */
static bool rs_addr_ok(const char *a)
{
    const char *colon = strrchr(a, ':');
    if (colon == NULL || colon == a || colon - a > 255) return false;
    for (const char *p = a; p < colon; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-'))
            return false;
    }
    dcr__cursor_t c = {colon + 1, colon + 1 + strlen(colon + 1)};
    uint64_t port = 0;
    return dcr__cursor_u64(&c, &port) && c.p == c.end && port >= 1 && port <= 65535;
}

static dcr_status_t rs_create(const dcr_objstore_ops_t *self, const dcr_objstore_config_t *cfg,
                              dcr_objstore_t **out_p)
{
    (void)self;
    const char *addr = cfg->url + strlen(RS_SCHEME);
    if (!rs_addr_ok(addr))
        return dcr_error_set(DCR_EINVAL,
                             "object store '%s': expected relay://HOST:PORT (the relay root's "
                             "address)",
                             cfg->url);
    relaystore_t *s = calloc(1, sizeof *s);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "object store relay: allocation failed");
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : RS_TIMEOUT_MS;
    s->fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    *out_p = &s->pub;
    return DCR_OK;
}

static void rs_disconnect(relaystore_t *s)
{
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

static void rs_destroy(dcr_objstore_t *o)
{
    relaystore_t *s = (relaystore_t *)o;
    rs_disconnect(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* A NACK's message into the error detail, with its status (a code outside
 * the engine's range is a transport error). The connection stays usable. */
static dcr_status_t rs_nack(relaystore_t *s, const dcr__relay_frame_t *ans)
{
    char msg[DCR__RELAY_NACK_MAX] = "";
    if (ans->len >= sizeof msg || dcr__relay_read_all(s->fd, (uint8_t *)msg, ans->len) != 0) {
        rs_disconnect(s);
        return dcr_error_set(DCR_ETRANSPORT, "relay store %s: malformed refusal", s->addr);
    }
    dcr_status_t code =
        ans->code < 0 && ans->code > -200 ? (dcr_status_t)ans->code : DCR_ETRANSPORT;
    return dcr_error_set(code, "relay store %s: %s", s->addr, msg);
}

/* Connects and says hello (mu held). */
static dcr_status_t rs_connect_once(relaystore_t *s)
{
    int e = 0;
    s->fd = dcr__relay_connect_addr(s->addr, s->timeout_ms, &e);
    if (s->fd < 0)
        return dcr_error_set(DCR_ETRANSPORT, "relay store %s: cannot connect: %s", s->addr,
                             strerror(e));
    dcr__relay_set_timeouts(s->fd, s->timeout_ms);
    dcr__relay_frame_t hello = {.type = DCR__F_HELLO, .a = DCR__RELAY_HELLO_STORE}, ans;
    e = dcr__relay_frame_write(s->fd, &hello, NULL, NULL);
    if (e == 0) e = dcr__relay_frame_read(s->fd, &ans);
    if (e == 0 && ans.type == DCR__F_ACK) return DCR_OK;
    if (e == 0 && ans.type == DCR__F_NACK) {
        dcr_status_t st = rs_nack(s, &ans);
        rs_disconnect(s);
        return st;
    }
    rs_disconnect(s);
    return dcr_error_set(DCR_ETRANSPORT, "relay store %s: no answer to hello (%s)", s->addr,
                         e ? dcr__relay_err_str(e) : "unexpected frame");
}

/* Connects, trying again while the root serves its most readers already
 * (DCR_EAGAIN: a restore of many nodes at once) until the handle's timeout;
 * the pause doubles from 5 ms to 200 ms. */
static dcr_status_t rs_connect(relaystore_t *s)
{
    uint64_t deadline = dcr_clock_ns() + (uint64_t)s->timeout_ms * 1000000u;
    long nap_ns = 5000000L;
    for (;;) {
        dcr_status_t st = rs_connect_once(s);
        if (st != DCR_EAGAIN || dcr_clock_ns() + (uint64_t)nap_ns > deadline) return st;
        dcr_clock_nap_ns(nap_ns);
        if (nap_ns < 200000000L) nap_ns *= 2;
    }
}

/* Sends one request and reads its answer's header (mu held): a NACK is
 * returned as its status; *ans_p is an SDATA header whose body waits on
 * s->fd. A broken connection is opened again once. */
static dcr_status_t rs_request(relaystore_t *s, const dcr__relay_frame_t *req, const uint8_t *body,
                               dcr__relay_frame_t *ans_p)
{
    int e = 0;
    for (int tries = 0; tries < 2; tries++) {
        bool fresh = s->fd < 0;
        if (fresh) DCR_CHECK(rs_connect(s));
        e = dcr__relay_frame_write(s->fd, req, body, NULL);
        if (e == 0) e = dcr__relay_frame_read(s->fd, ans_p);
        if (e == 0 && ans_p->type == DCR__F_NACK) return rs_nack(s, ans_p);
        if (e == 0 && ans_p->type == DCR__F_SDATA) return DCR_OK;
        if (e == 0) e = DCR__RELAY_PROTO;
        rs_disconnect(s);
        if (fresh) break; /* a new connection that fails will fail again */
    }
    return dcr_error_set(DCR_ETRANSPORT, "relay store %s: request failed: %s", s->addr,
                         dcr__relay_err_str(e));
}

static dcr_status_t rs_put(dcr_objstore_t *o, const char *key, const uint8_t *buf, size_t len,
                           const dcr_objstore_pace_t *pace)
{
    (void)buf;
    (void)len;
    (void)pace;
    return dcr_error_set(DCR_EUNSUPPORTED, "relay store %s: read-only (put %s)",
                         ((relaystore_t *)o)->addr, key);
}

static dcr_status_t rs_del(dcr_objstore_t *o, const char *key)
{
    return dcr_error_set(DCR_EUNSUPPORTED, "relay store %s: read-only (delete %s)",
                         ((relaystore_t *)o)->addr, key);
}

/* The answer's n bytes into dst, paced per DCR_OBJSTORE_PACE_CHUNK. */
static dcr_status_t rs_read_body(relaystore_t *s, const char *key, uint8_t *dst, uint64_t n,
                                 const dcr_objstore_pace_t *pace)
{
    for (uint64_t done = 0; done < n;) {
        size_t k =
            n - done < DCR_OBJSTORE_PACE_CHUNK ? (size_t)(n - done) : DCR_OBJSTORE_PACE_CHUNK;
        int e = dcr__relay_read_all(s->fd, dst + done, k);
        if (e != 0) {
            rs_disconnect(s);
            return dcr_error_set(DCR_ETRANSPORT,
                                 "relay store %s: %s: %s after %" PRIu64 " of %" PRIu64 " bytes",
                                 s->addr, key, dcr__relay_err_str(e), done, n);
        }
        done += k;
        if (pace != NULL) {
            dcr_status_t st = pace->fn(pace->ctx, k);
            if (st != DCR_OK) {
                rs_disconnect(s); /* the rest of the answer is still on its way */
                return st;
            }
        }
    }
    return DCR_OK;
}

static dcr_status_t rs_get_locked(relaystore_t *s, const char *key, uint64_t off, uint64_t len,
                                  uint8_t *dst, size_t cap, size_t *got_p,
                                  const dcr_objstore_pace_t *pace)
{
    size_t klen = strlen(key);
    uint8_t body[DCR__RELAY_SGET_FIXED + DCR_OBJSTORE_KEY_MAX];
    dcr__put_le(body, off, 8);
    dcr__put_le(body + 8, len, 8);
    dcr__put_le(body + 16, cap, 8);
    memcpy(body + DCR__RELAY_SGET_FIXED, key, klen);
    dcr__relay_frame_t req = {.type = DCR__F_SGET, .len = DCR__RELAY_SGET_FIXED + klen}, ans;
    DCR_CHECK(rs_request(s, &req, body, &ans));
    if (ans.a != ans.len || ans.len > cap || (len != UINT64_MAX && ans.len != len)) {
        rs_disconnect(s);
        return dcr_error_set(DCR_ETRANSPORT,
                             "relay store %s: %s: an answer of %" PRIu64 " bytes to a request for "
                             "%" PRIu64 " (at most %zu)",
                             s->addr, key, ans.len, len, cap);
    }
    DCR_CHECK(rs_read_body(s, key, dst, ans.len, pace));
    *got_p = (size_t)ans.len;
    return DCR_OK;
}

static dcr_status_t rs_get(dcr_objstore_t *o, const char *key, uint64_t off, uint64_t len,
                           uint8_t *dst, size_t cap, size_t *got_p, const dcr_objstore_pace_t *pace)
{
    relaystore_t *s = (relaystore_t *)o;
    if (!dcr__relay_retained_key_ok(key))
        return dcr_error_set(DCR_EINVAL,
                             "relay store %s: %s is not a retained object (versions/v<V>/<name>)",
                             s->addr, key);
    pthread_mutex_lock(&s->mu);
    dcr_status_t st = rs_get_locked(s, key, off, len, dst, cap, got_p, pace);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- list ------------------------------------------------------------------ */

/* One entry of a listing answer at *at; false when malformed. */
static bool rs_entry(const uint8_t *b, size_t len, size_t *at, const char *prefix,
                     dcr_objstore_entry_t *e)
{
    if (len - *at < 2) return false;
    size_t kl = (size_t)dcr__le(b + *at, 2);
    if (kl == 0 || kl > DCR_OBJSTORE_KEY_MAX || len - *at - 2 < kl + 9) return false;
    memcpy(e->key, b + *at + 2, kl);
    e->key[kl] = '\0';
    e->size = dcr__le(b + *at + 2 + kl, 8);
    size_t vl = b[*at + 10 + kl];
    if (vl >= sizeof e->version || len - *at - 11 - kl < vl) return false;
    memcpy(e->version, b + *at + 11 + kl, vl);
    e->version[vl] = '\0';
    *at += 11 + kl + vl;
    return strlen(e->key) == kl && dcr_objstore_key_ok(e->key) &&
           strncmp(e->key, prefix, strlen(prefix)) == 0;
}

static dcr_status_t rs_parse_page(const char *addr, const uint8_t *b, size_t len, uint64_t count,
                                  size_t max_keys, const char *prefix, dcr_objstore_page_t *page)
{
    size_t nl = len >= 2 ? (size_t)dcr__le(b, 2) : SIZE_MAX;
    if (nl >= sizeof page->next || len - 2 < nl || count > max_keys) goto bad;
    memcpy(page->next, b + 2, nl);
    page->next[nl] = '\0';
    if (strlen(page->next) != nl) goto bad;
    page->entries = calloc(count ? count : 1, sizeof *page->entries);
    if (page->entries == NULL) return dcr_error_set(DCR_ENOMEM, "relay store list");
    size_t at = 2 + nl;
    for (uint64_t i = 0; i < count; i++)
        if (!rs_entry(b, len, &at, prefix, &page->entries[i])) goto bad;
    if (at != len) goto bad;
    page->n = (size_t)count;
    return DCR_OK;
bad:
    return dcr_error_set(DCR_ETRANSPORT, "relay store %s: malformed listing of %s", addr, prefix);
}

static dcr_status_t rs_list_locked(relaystore_t *s, const char *prefix, const char *start,
                                   size_t max_keys, dcr_objstore_page_t *page)
{
    size_t pl = strlen(prefix), sl = strlen(start);
    uint8_t body[DCR__RELAY_SREQ_MAX];
    if (pl + 1 + sl > sizeof body)
        return dcr_error_set(DCR_EINVAL, "relay store %s: list start too long", s->addr);
    memcpy(body, prefix, pl + 1);
    memcpy(body + pl + 1, start, sl);
    dcr__relay_frame_t req = {.type = DCR__F_SLIST, .a = max_keys, .len = pl + 1 + sl}, ans;
    DCR_CHECK(rs_request(s, &req, body, &ans));
    size_t most = 2 + sizeof page->next + max_keys * (11 + DCR_OBJSTORE_KEY_MAX + 255);
    uint8_t *b = ans.len <= most ? malloc(ans.len ? (size_t)ans.len : 1) : NULL;
    int e = b == NULL ? ENOMEM : dcr__relay_read_all(s->fd, b, (size_t)ans.len);
    if (e != 0) {
        free(b);
        rs_disconnect(s);
        return dcr_error_set(DCR_ETRANSPORT,
                             "relay store %s: listing of %s (%" PRIu64 " bytes): %s", s->addr,
                             prefix, ans.len, b == NULL ? "too long" : dcr__relay_err_str(e));
    }
    dcr_status_t st = rs_parse_page(s->addr, b, (size_t)ans.len, ans.a, max_keys, prefix, page);
    free(b);
    return st;
}

static dcr_status_t rs_list(dcr_objstore_t *o, const char *prefix, const char *start,
                            size_t max_keys, dcr_objstore_page_t *page)
{
    relaystore_t *s = (relaystore_t *)o;
    if (!dcr__relay_retained_prefix_ok(prefix))
        return dcr_error_set(DCR_EINVAL,
                             "relay store %s: lists versions/ or versions/v<V>/ only, not '%s'",
                             s->addr, prefix);
    pthread_mutex_lock(&s->mu);
    dcr_status_t st = rs_list_locked(s, prefix, start, max_keys, page);
    pthread_mutex_unlock(&s->mu);
    return st;
}

static dcr_status_t rs_wait_change(dcr_objstore_t *o, const char *prefix, int timeout_ms)
{
    (void)o;
    (void)prefix;
    dcr_clock_nap_ns((long)timeout_ms * 1000000L);
    return DCR_ETIMEOUT;
}

const dcr_objstore_ops_t dcr__objstore_relay_ops = {
    .hdr = {.version = DCR_OBJSTORE_OPS_VERSION, .name = "relay"},
    .props = {.consistent_list = true, .ranged_get = true, .read_only = true},
    .claims = rs_claims,
    .create = rs_create,
    .put = rs_put,
    .get = rs_get,
    .list = rs_list,
    .del = rs_del,
    .wait_change = rs_wait_change,
    .destroy = rs_destroy,
};
