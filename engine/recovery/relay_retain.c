/* The relay root's retained versions (dcr/recovery.h): the payloads it
 * verified, held per attempt until every owner finished it, staged on disk
 * then, published in the layout of dcr/recovery.h when a commit names the
 * attempt, pruned to the window, and served read-only to the readers of
 * "relay://" (relay-internal.h has the requests). */
#include "dcr/recovery.h"
#include "recovery/recovery-internal.h"
#include "transport/relay-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/endian-internal.h"
#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/log.h"
#include "dcr/thread.h"
#include "transport/objstore-internal.h"

#define RETAIN_ROOT DCR__RELAY_RETAINED_ROOT
_Static_assert(DCR__RELAY_RETAINED_NAME_MAX == DCR_RETAIN_NAME_MAX,
               "the relay:// store's name bound is the retained layout's");
/* The attempt under way and the last one that ended (staged; its slot
 * keeps it from being held again). */
#define HELD_SLOTS 2
/* Readers served at once; a reader that sends nothing for READER_IDLE_MS
 * is closed. */
#define READERS_MAX    DCR__RELAY_RETAIN_READERS
#define READER_IDLE_MS 60000
/* Bytes of an object read from the store per step of an answer. */
#define ANSWER_CHUNK ((size_t)1 << 20)

typedef struct dcr__relay_retain dcr__relay_retain_t;
static void dcr__relay_retain_destroy(dcr__relay_retain_t *R);

typedef struct held {
    uint64_t tau; /* 0: empty */
    bool ended;   /* every owner finished: staged, the bufs released */
    dcr__relay_buf_t **bufs;
    size_t n, cap;
} held_t;

typedef struct reader {
    struct dcr__relay_retain *R;
    int fd; /* -1: free slot */
    pthread_t th;
    atomic_bool done;
} reader_t;

struct dcr__relay_retain {
    dcr_objstore_t *store;
    int keep;
    pthread_mutex_t mu; /* held, readers, closing */
    held_t held[HELD_SLOTS];
    reader_t readers[READERS_MAX];
    atomic_bool closing; /* written under mu */
};

/* ---- names ---------------------------------------------------------------- */

/* ---- what the root holds ---------------------------------------------------- */

static void held_clear(held_t *h)
{
    for (size_t i = 0; i < h->n; i++) dcr__relay_buf_unref(h->bufs[i]);
    free(h->bufs);
    memset(h, 0, sizeof *h);
}

/* The slot of attempt tau, made when missing (mu held): a free one, else
 * one of an attempt that never ended (it failed), else the oldest. NULL
 * for an attempt older than every held one when none is free. */
static held_t *held_slot(dcr__relay_retain_t *R, uint64_t tau)
{
    held_t *free_slot = NULL, *failed = NULL, *oldest = NULL;
    for (int i = 0; i < HELD_SLOTS; i++) {
        held_t *h = &R->held[i];
        if (h->tau == tau) return h;
        if (h->tau == 0)
            free_slot = free_slot ? free_slot : h;
        else if (!h->ended && h->tau < tau)
            failed = h;
        else if (oldest == NULL || h->tau < oldest->tau)
            oldest = h;
    }
    held_t *h = free_slot ? free_slot : failed ? failed : oldest;
    if (h == NULL || (h->tau != 0 && h->tau > tau)) return NULL;
    held_clear(h);
    h->tau = tau;
    return h;
}

static void dcr__relay_retain_hold(dcr__relay_retain_t *R, uint64_t tau, dcr__relay_buf_t *b)
{
    pthread_mutex_lock(&R->mu);
    held_t *h = held_slot(R, tau);
    if (h != NULL && h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        dcr__relay_buf_t **grown = realloc(h->bufs, cap * sizeof *grown);
        if (grown == NULL) {
            /* Without this payload the attempt cannot be retained whole. */
            DCR_LOG_WARN("relay root: out of memory holding attempt %" PRIu64 " for retention",
                         tau);
            held_clear(h);
            h = NULL;
        } else {
            h->bufs = grown;
            h->cap = cap;
        }
    }
    if (h != NULL) {
        dcr__relay_buf_ref(b);
        h->bufs[h->n++] = b;
    }
    pthread_mutex_unlock(&R->mu);
}

/* ---- staging an attempt ------------------------------------------------------
 * An attempt that ended is written out at once under the object-store
 * transport's layout, attempt-<tau>/payload-<owner>-<id>.dcrp with its
 * MANIFEST written last, outside versions/ (readers see only versions/):
 * its staging survives this process, and the commit publishes it by the
 * object store's own retention (dcr_retain_commit), so that a root killed
 * between its acknowledgment and the commit still retains the version. */

static int cmp_buf(const void *x, const void *y)
{
    const dcr__relay_buf_t *a = *(dcr__relay_buf_t *const *)x, *b = *(dcr__relay_buf_t *const *)y;
    if (a->owner != b->owner) return a->owner < b->owner ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* One staged payload and its manifest entry. */
static dcr_status_t stage_payload(dcr_objstore_t *s, const char *prefix, const dcr__relay_buf_t *b,
                                  dcr__ledger_entry_t *e)
{
    dcr_payload_header_t h;
    /* Verified by the root already: the header's digest is the payload's. */
    DCR_CHECK(dcr_payload_peek(b->data, b->len, false, &h));
    *e = (dcr__ledger_entry_t){.owner = b->owner, .id = b->id, .len = b->len};
    memcpy(e->digest, h.digest, sizeof e->digest);
    char name[DCR_RETAIN_NAME_MAX + 1], key[DCR_OBJSTORE_KEY_MAX + 1];
    dcr__obj_payload_name(b->owner, b->id, name, sizeof name);
    snprintf(key, sizeof key, "%s%s", prefix, name);
    return dcr_objstore_put(s, key, b->data, b->len, NULL);
}

static dcr_status_t stage_manifest(dcr_objstore_t *s, const char *prefix, uint64_t tau,
                                   const dcr__ledger_entry_t *e, size_t n)
{
    size_t len = 0;
    char *text = dcr__manifest_text(tau, e, n, &len);
    if (text == NULL) return dcr_error_set(DCR_ENOMEM, "relay root: staging manifest");
    char key[DCR_OBJSTORE_KEY_MAX + 1];
    snprintf(key, sizeof key, "%sMANIFEST", prefix);
    dcr_status_t st = dcr_objstore_put(s, key, (const uint8_t *)text, len, NULL);
    free(text);
    return st;
}

static dcr_status_t stage_attempt(dcr__relay_retain_t *R, uint64_t tau, dcr__relay_buf_t **bufs,
                                  size_t n)
{
    qsort(bufs, n, sizeof *bufs, cmp_buf);
    char prefix[64];
    dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
    dcr__ledger_entry_t *e = calloc(n ? n : 1, sizeof *e);
    dcr_status_t st = e ? dcr_objstore_delete_prefix(R->store, prefix)
                        : dcr_error_set(DCR_ENOMEM, "relay root: staging %zu payloads", n);
    for (size_t i = 0; st == DCR_OK && i < n; i++)
        st = stage_payload(R->store, prefix, bufs[i], &e[i]);
    if (st == DCR_OK) st = stage_manifest(R->store, prefix, tau, e, n);
    free(e);
    return st;
}

static void dcr__relay_retain_ended(dcr__relay_retain_t *R, uint64_t tau)
{
    held_t mine = {0};
    pthread_mutex_lock(&R->mu);
    held_t *h = held_slot(R, tau);
    if (h != NULL) {
        mine = *h;
        memset(h, 0, sizeof *h);
        /* Payloads of tau that arrive late are not part of it. */
        h->tau = tau;
        h->ended = true;
    }
    pthread_mutex_unlock(&R->mu);
    if (h == NULL) return;
    /* Before the root's tree sees the end, hence before any node acknowledges. */
    uint64_t t0 = dcr_clock_ns(), bytes = 0;
    size_t n = mine.n;
    for (size_t i = 0; i < n; i++) bytes += mine.bufs[i]->len;
    dcr_status_t st = stage_attempt(R, tau, mine.bufs, mine.n);
    held_clear(&mine);
    if (st == DCR_OK)
        DCR_LOG_DEBUG("relay root: attempt %" PRIu64 " staged: %zu payloads, %" PRIu64
                      " bytes in %.3f s",
                      tau, n, bytes, (double)(dcr_clock_ns() - t0) * 1e-9);
    else
        DCR_LOG_WARN("relay root: attempt %" PRIu64 " not staged (its version will not be "
                     "retained): %s",
                     tau, dcr_error_line(st));
}

/* ---- publishing a committed version ------------------------------------ */

/* Version is retained already from attempt tau: published before a restart. */
static bool already_published(dcr_objstore_t *s, uint64_t tau, uint64_t version)
{
    dcr_retain_manifest_t m;
    bool same = dcr_retain_manifest_read(s, version, &m) == DCR_OK && m.tau == tau;
    dcr_retain_manifest_free(&m);
    return same;
}

/* Deletes the staged attempts up to tau: they committed or never will. */
static dcr_status_t drop_staged(dcr_objstore_t *s, uint64_t tau)
{
    dcr_objstore_entry_t *keys = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_objstore_list_all(s, "attempt-", &keys, &n));
    dcr_status_t st = DCR_OK;
    uint64_t last = 0; /* keys are sorted: one delete per attempt */
    for (size_t i = 0; i < n && st == DCR_OK; i++) {
        dcr__cursor_t c = {keys[i].key, keys[i].key + strlen(keys[i].key)};
        uint64_t t;
        if (!dcr__cursor_lit(&c, "attempt-") || !dcr__cursor_u64(&c, &t) || t > tau || t == last)
            continue;
        char prefix[64];
        dcr__obj_attempt_prefix(t, prefix, sizeof prefix);
        st = dcr_objstore_delete_prefix(s, prefix);
        last = t;
    }
    free(keys);
    return st;
}

static dcr_status_t publish(dcr_objstore_t *s, uint64_t tau, uint64_t version, int keep,
                            dcr_retain_stats_t *stats_p)
{
    dcr_status_t st = dcr_retain_commit(s, tau, version, keep, stats_p);
    if (st == DCR_ENOTFOUND && already_published(s, tau, version)) st = DCR_OK;
    if (st == DCR_ENOTFOUND)
        return dcr_error_set(DCR_ENOTFOUND,
                             "relay root: attempt %" PRIu64 " (version %" PRIu64
                             ") was not staged whole at this root; version %" PRIu64
                             " is not retained",
                             tau, version, version);
    if (st == DCR_OK) st = drop_staged(s, tau);
    if (st != DCR_OK) dcr_error_prefix("relay root: retaining version %" PRIu64 ": ", version);
    return st;
}

static dcr_status_t dcr__relay_retain_commit(dcr__relay_retain_t *R, uint64_t tau, uint64_t version,
                                             dcr_retain_stats_t *stats_p)
{
    if (version < 1 || tau < 1)
        return dcr_error_set(DCR_EINVAL,
                             "relay retain: version %" PRIu64 " of attempt %" PRIu64
                             ": expected both >= 1",
                             version, tau);
    pthread_mutex_lock(&R->mu);
    for (int i = 0; i < HELD_SLOTS; i++)
        if (R->held[i].tau != 0 && R->held[i].tau <= tau)
            held_clear(&R->held[i]); /* older attempts can no longer commit */
    pthread_mutex_unlock(&R->mu);
    dcr_retain_stats_t stats = {0};
    DCR_CHECK(publish(R->store, tau, version, R->keep, &stats));
    if (stats_p != NULL) *stats_p = stats;
    return DCR_OK;
}

dcr_status_t dcr_relay_retain_recover(const char *store_url, uint64_t tau, uint64_t version,
                                      int keep, dcr_retain_stats_t *stats_p)
{
    if (store_url == NULL || keep < 1 || version < 1 || tau < 1)
        return dcr_error_set(DCR_EINVAL,
                             "relay retain recover: a store, keep >= 1 (got %d) and version, "
                             "attempt >= 1",
                             keep);
    dcr_objstore_config_t oc = {.url = store_url};
    dcr_objstore_t *s = NULL;
    DCR_CHECK(dcr_objstore_create(&oc, &s));
    dcr_retain_stats_t stats = {0};
    dcr_status_t st = publish(s, tau, version, keep, &stats);
    dcr_objstore_destroy(s);
    if (st == DCR_OK && stats_p != NULL) *stats_p = stats;
    return st;
}

/* ---- answering readers ------------------------------------------------------ */

static int nack(int fd, dcr_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int nack(int fd, dcr_status_t st, const char *fmt, ...)
{
    char msg[DCR__RELAY_NACK_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dcr__relay_reply(fd, 0, st, msg);
}

/* The size of key, by a listing of one entry (the key itself sorts first
 * among the keys it prefixes): the store offers no stat. */
static dcr_status_t object_size(dcr_objstore_t *s, const char *key, uint64_t *size_p)
{
    dcr_objstore_page_t page;
    DCR_CHECK(dcr_objstore_list(s, key, "", 1, &page));
    bool found = page.n == 1 && strcmp(page.entries[0].key, key) == 0;
    if (found) *size_p = page.entries[0].size;
    dcr_objstore_page_free(&page);
    return found ? DCR_OK : dcr_error_set(DCR_ENOTFOUND, "relay store: %s: not found", key);
}

/* Streams bytes [off, off + n) of key after an SDATA header. A store error
 * midway (the object pruned meanwhile) can only close the connection: the
 * reader then sees a short answer. */
static int answer_bytes(dcr_objstore_t *s, int fd, const char *key, uint64_t off, uint64_t n)
{
    dcr__relay_frame_t f = {.type = DCR__F_SDATA, .a = n, .len = n};
    int e = dcr__relay_frame_write(fd, &f, NULL, NULL);
    uint8_t *chunk = n > 0 ? malloc(n < ANSWER_CHUNK ? (size_t)n : ANSWER_CHUNK) : NULL;
    if (e == 0 && n > 0 && chunk == NULL) e = ENOMEM;
    for (uint64_t done = 0; e == 0 && done < n;) {
        size_t k = n - done < ANSWER_CHUNK ? (size_t)(n - done) : ANSWER_CHUNK;
        if (dcr_objstore_get_range(s, key, off + done, k, chunk, NULL) != DCR_OK) e = EIO;
        if (e == 0) e = dcr__relay_write_all(fd, chunk, k);
        done += k;
    }
    free(chunk);
    return e;
}

static int answer_get(dcr_objstore_t *s, int fd, const uint8_t *body, size_t len)
{
    size_t klen = len - DCR__RELAY_SGET_FIXED;
    char key[DCR_OBJSTORE_KEY_MAX + 1];
    if (len <= DCR__RELAY_SGET_FIXED || klen > DCR_OBJSTORE_KEY_MAX)
        return nack(fd, DCR_EINVAL, "relay store get: a key of %zu bytes (expected 1..%d)",
                    len > DCR__RELAY_SGET_FIXED ? klen : 0, DCR_OBJSTORE_KEY_MAX);
    memcpy(key, body + DCR__RELAY_SGET_FIXED, klen);
    key[klen] = '\0';
    if (strlen(key) != klen || !dcr__relay_retained_key_ok(key))
        return nack(fd, DCR_EINVAL,
                    "relay store get: not a retained object's key (expected "
                    "versions/v<V>/<name>, name of [A-Za-z0-9._-] not starting with '.')");
    uint64_t off = dcr__le(body, 8), want = dcr__le(body + 8, 8), cap = dcr__le(body + 16, 8);
    uint64_t size = 0;
    dcr_status_t st = object_size(s, key, &size);
    if (st != DCR_OK) return nack(fd, st, "%s", dcr_error_detail());
    if (off > size || (want != UINT64_MAX && want > size - off))
        return nack(fd, DCR_ETRANSPORT,
                    "relay store: %s holds %" PRIu64 " bytes; bytes [%" PRIu64 ", +%" PRIu64
                    ") requested",
                    key, size, off, want);
    uint64_t n = want == UINT64_MAX ? size - off : want;
    if (n > cap || n > DCR__TRANSPORT_PAYLOAD_MAX)
        return nack(fd, DCR_EINVAL,
                    "relay store: %s holds %" PRIu64 " bytes from %" PRIu64
                    ", more than the %" PRIu64 " asked for",
                    key, n, off, cap);
    return answer_bytes(s, fd, key, off, n);
}

/* Appends one listing record; false when it does not fit. */
static bool put_entry(uint8_t *out, size_t cap, size_t *at, const dcr_objstore_entry_t *e)
{
    size_t kl = strnlen(e->key, DCR_OBJSTORE_KEY_MAX), vl = strnlen(e->version, 255);
    if (*at + 2 + kl + 8 + 1 + vl > cap) return false;
    dcr__put_le(out + *at, kl, 2);
    memcpy(out + *at + 2, e->key, kl);
    dcr__put_le(out + *at + 2 + kl, e->size, 8);
    out[*at + 10 + kl] = (uint8_t)vl;
    memcpy(out + *at + 11 + kl, e->version, vl);
    *at += 11 + kl + vl;
    return true;
}

static int answer_page(int fd, const dcr_objstore_page_t *page)
{
    size_t cap = 2 + sizeof page->next + page->n * (11 + DCR_OBJSTORE_KEY_MAX + 255);
    uint8_t *out = malloc(cap);
    if (out == NULL) return nack(fd, DCR_ENOMEM, "relay store list: out of memory");
    size_t nl = strnlen(page->next, sizeof page->next - 1), at = 2 + nl;
    dcr__put_le(out, nl, 2);
    memcpy(out + 2, page->next, nl);
    for (size_t i = 0; i < page->n; i++) put_entry(out, cap, &at, &page->entries[i]);
    dcr__relay_frame_t f = {.type = DCR__F_SDATA, .a = page->n, .len = at};
    int e = dcr__relay_frame_write(fd, &f, out, NULL);
    free(out);
    return e;
}

static int answer_list(dcr_objstore_t *s, int fd, uint64_t max_keys, const uint8_t *body,
                       size_t len)
{
    const char *prefix = (const char *)body;
    size_t pl = strnlen(prefix, len);
    if (pl >= len || pl > DCR_OBJSTORE_KEY_MAX ||
        len - pl - 1 >= sizeof((dcr_objstore_page_t *)0)->next)
        return nack(fd, DCR_EINVAL, "relay store list: expected a prefix, a NUL and a start key");
    char start[DCR_OBJSTORE_KEY_MAX + 1024];
    memcpy(start, body + pl + 1, len - pl - 1);
    start[len - pl - 1] = '\0';
    if (strlen(start) != len - pl - 1 || !dcr__relay_retained_prefix_ok(prefix) ||
        (start[0] != '\0' && (!dcr_objstore_key_ok(start) || strncmp(start, prefix, pl) != 0)))
        return nack(fd, DCR_EINVAL,
                    "relay store list: the prefix must be versions/ or versions/v<V>/, the start "
                    "empty or a key under it");
    if (max_keys < 1 || max_keys > 1000)
        return nack(fd, DCR_EINVAL, "relay store list: max_keys %" PRIu64 ", expected 1..1000",
                    max_keys);
    dcr_objstore_page_t page;
    dcr_status_t st = dcr_objstore_list(s, prefix, start, (size_t)max_keys, &page);
    if (st != DCR_OK) return nack(fd, st, "%s", dcr_error_detail());
    int e = answer_page(fd, &page);
    dcr_objstore_page_free(&page);
    return e;
}

static int dcr__relay_store_answer(dcr_objstore_t *s, int fd, const dcr__relay_frame_t *f)
{
    if (f->tau != 0 || (f->type != DCR__F_SGET && f->type != DCR__F_SLIST) ||
        f->len > DCR__RELAY_SREQ_MAX)
        return DCR__RELAY_PROTO;
    uint8_t body[DCR__RELAY_SREQ_MAX];
    int e = dcr__relay_read_all(fd, body, (size_t)f->len);
    if (e != 0) return e;
    return f->type == DCR__F_SGET ? answer_get(s, fd, body, (size_t)f->len)
                                  : answer_list(s, fd, f->a, body, (size_t)f->len);
}

static void *reader_main(void *arg)
{
    reader_t *rd = arg;
    dcr__relay_set_timeouts(rd->fd, READER_IDLE_MS);
    int e = dcr__relay_reply(rd->fd, 0, DCR_OK, "");
    while (e == 0) {
        dcr__relay_frame_t f;
        e = dcr__relay_frame_read(rd->fd, &f);
        if (e == 0) e = dcr__relay_store_answer(rd->R->store, rd->fd, &f);
    }
    if (e != DCR__RELAY_EOF && !atomic_load(&rd->R->closing))
        DCR_LOG_INFO("relay root: a reader of retained versions left: %s", dcr__relay_err_str(e));
    /* The peer sees the end now; the descriptor is closed when the thread
     * is joined, so that no other connection can take its number first. */
    shutdown(rd->fd, SHUT_RDWR);
    atomic_store(&rd->done, true);
    return NULL;
}

/* Joins readers that ended (mu held). */
static void reap(dcr__relay_retain_t *R)
{
    for (int i = 0; i < READERS_MAX; i++) {
        reader_t *rd = &R->readers[i];
        if (rd->fd < 0 || !atomic_load(&rd->done)) continue;
        pthread_join(rd->th, NULL);
        close(rd->fd);
        rd->fd = -1;
    }
}

static void dcr__relay_retain_serve(dcr__relay_retain_t *R, int fd)
{
    pthread_mutex_lock(&R->mu);
    reap(R);
    reader_t *rd = NULL;
    for (int i = 0; i < READERS_MAX && rd == NULL && !atomic_load(&R->closing); i++)
        if (R->readers[i].fd < 0) rd = &R->readers[i];
    bool started = false;
    if (rd != NULL) {
        rd->fd = fd;
        atomic_store(&rd->done, false);
        started = dcr_thread_start(&rd->th, DCR_THREAD_TRANSPORT, reader_main, rd, "dcr-retain-%d",
                                   (int)(rd - R->readers)) == 0;
        if (!started) rd->fd = -1;
    }
    pthread_mutex_unlock(&R->mu);
    if (started) return;
    nack(fd, DCR_EAGAIN, "relay root: %d readers of retained versions are served already",
         READERS_MAX);
    close(fd);
}

/* ---- lifetime --------------------------------------------------------------- */

static dcr_status_t dcr__relay_retain_create(const char *url, int keep, bool clear,
                                             dcr__relay_retain_t **out_p)
{
    if (url == NULL || keep < 1)
        return dcr_error_set(DCR_EINVAL, "relay retain: a store and keep >= 1 (got %d)", keep);
    dcr__relay_retain_t *R = calloc(1, sizeof *R);
    if (R == NULL) return dcr_error_set(DCR_ENOMEM, "relay retain");
    pthread_mutex_init(&R->mu, NULL);
    R->keep = keep;
    for (int i = 0; i < READERS_MAX; i++) R->readers[i] = (reader_t){.R = R, .fd = -1};
    dcr_objstore_config_t oc = {.url = url};
    dcr_status_t st = dcr_objstore_create(&oc, &R->store);
    if (st == DCR_OK && clear) st = dcr_retain_clear(R->store);
    if (st == DCR_OK && clear) st = drop_staged(R->store, UINT64_MAX);
    if (st != DCR_OK) {
        dcr__relay_retain_destroy(R);
        return st;
    }
    *out_p = R;
    return DCR_OK;
}

static void dcr__relay_retain_destroy(dcr__relay_retain_t *R)
{
    if (R == NULL) return;
    pthread_mutex_lock(&R->mu);
    atomic_store(&R->closing, true);
    for (int i = 0; i < READERS_MAX; i++)
        if (R->readers[i].fd >= 0) shutdown(R->readers[i].fd, SHUT_RDWR);
    pthread_mutex_unlock(&R->mu);
    for (int i = 0; i < READERS_MAX; i++) {
        reader_t *rd = &R->readers[i];
        if (rd->fd < 0) continue;
        pthread_join(rd->th, NULL);
        close(rd->fd);
    }
    for (int i = 0; i < HELD_SLOTS; i++) held_clear(&R->held[i]);
    dcr_objstore_destroy(R->store);
    pthread_mutex_destroy(&R->mu);
    free(R);
}

/* ---- the public entry points (dcr/recovery.h) -------------------------------- */

static void retention_hold(void *ctx, uint64_t tau, dcr__relay_buf_t *b)
{
    dcr__relay_retain_hold(ctx, tau, b);
}

static void retention_ended(void *ctx, uint64_t tau)
{
    dcr__relay_retain_ended(ctx, tau);
}

static void retention_serve(void *ctx, int fd)
{
    dcr__relay_retain_serve(ctx, fd);
}

static void retention_destroy(void *ctx)
{
    dcr__relay_retain_destroy(ctx);
}

dcr_status_t dcr_relay_retain_start(dcr_transport_t *t, const char *store_url, int keep, bool clear)
{
    /* Checked before the store is opened: clear deletes what it holds. */
    DCR_CHECK(dcr__relay_retention_check(t, "relay retain"));
    dcr__relay_retain_t *R = NULL;
    DCR_CHECK(dcr__relay_retain_create(store_url, keep, clear, &R));
    dcr__relay_retention_t ret = {R, retention_hold, retention_ended, retention_serve,
                                  retention_destroy};
    dcr_status_t st = dcr__relay_retention_install(t, "relay retain", &ret);
    if (st != DCR_OK) dcr__relay_retain_destroy(R);
    return st;
}

dcr_status_t dcr_relay_retain_commit(dcr_transport_t *t, uint64_t tau, uint64_t version,
                                     dcr_retain_stats_t *stats_p)
{
    void *R = NULL;
    DCR_CHECK(dcr__relay_retention_ctx(t, "relay retain commit", &R, NULL, 0));
    if (R == NULL)
        return dcr_error_set(DCR_EINVAL, "relay retain commit: retention was not started");
    return dcr__relay_retain_commit(R, tau, version, stats_p);
}

dcr_status_t dcr_relay_retain_url(dcr_transport_t *t, char *url, size_t cap)
{
    void *R = NULL;
    char addr[128];
    DCR_CHECK(dcr__relay_retention_ctx(t, "relay retain url", &R, addr, sizeof addr));
    if (R == NULL || url == NULL)
        return dcr_error_set(DCR_EINVAL, "relay retain url: retention was not started");
    if ((size_t)snprintf(url, cap, "relay://%s", addr) >= cap)
        return dcr_error_set(DCR_EINVAL, "relay retain url: %zu bytes are too few", cap);
    return DCR_OK;
}
