/* The etcd backend's change notification: an etcd v3 watch through the
 * JSON gateway. POST /v3/watch with a create_request streams one JSON
 * message per watch response: first {"result":{"header":..,"created":true}},
 * then one per batch of events. A watch that starts at revision since+1
 * replays every change after since that the store still holds, so a change
 * made between the caller's read and its watch is never lost: the watch
 * answers (etcd replays from a loop that runs every 100 ms, so a wait
 * does not watch from the past at all when it can tell that the store
 * moved on: a response of the handle, or the watch's created message,
 * naming a later revision, ends it at once). A compacted start revision
 * ends the watch with compact_revision, which counts as a change.
 *
 * The stream is read through the HTTP client's progress callback into a
 * small buffer; the first sign of an event ends the request. */
#include "etcd-internal.h"
#include "core/http-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"

/* Enough for the created message and the start of an event batch; a watch
 * answer that overflows it holds events (the created message is short). */
#define WATCH_BUF 8192
/* After a watch request that failed (no server, a refused watch): naps
 * doubling from the first to the last before the next try. */
#define WATCH_RETRY_MIN_MS 1
#define WATCH_RETRY_MAX_MS 50

typedef struct watch_stream {
    uint8_t buf[WATCH_BUF];
    size_t got;
    uint64_t since; /* the caller's position */
} watch_stream_t;

/* Whether the stream so far holds more than the created message: events,
 * a compaction, or the watch cancelled by the server. Values travel in
 * base64, so these quoted names never come from a key or a value. */
static bool watch_changed(const watch_stream_t *w)
{
    static const char *const marks[] = {"\"events\"", "\"compact_revision\"", "\"canceled\""};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (memmem(w->buf, w->got, marks[i], strlen(marks[i])) != NULL) return true;
    return false;
}

/* Whether the created message's header names a store revision above the
 * caller's position: then something changed after it, and the watch need
 * not wait for etcd to replay it. etcd replays the changes of a watch that
 * starts in the past from a loop that runs every 100 ms; only a watch that
 * starts at the next revision is told of a change at once. */
static bool watch_behind(const watch_stream_t *w)
{
    static const char mark[] = "\"revision\":\"";
    const uint8_t *p = memmem(w->buf, w->got, mark, sizeof mark - 1);
    if (p == NULL) return false;
    p += sizeof mark - 1;
    uint64_t rev = 0;
    size_t digits = 0;
    while (p < w->buf + w->got && *p >= '0' && *p <= '9' && digits < 19) {
        rev = rev * 10 + (uint64_t)(*p++ - '0');
        digits++;
    }
    /* Only a complete number counts: its closing quote has arrived. */
    return digits > 0 && p < w->buf + w->got && *p == '"' && rev > w->since;
}

static dcr_status_t watch_progress(void *ctx, size_t n)
{
    watch_stream_t *w = ctx;
    w->got += n;
    if (watch_changed(w) || watch_behind(w))
        return dcr_error_set(DCR_EAGAIN, "etcd watch: a change");
    return DCR_OK;
}

/* The watch request of every key under the prefix from revision `from`. */
static char *watch_request(const dcr__et_t *e, int64_t from)
{
    char end[DCR__ET_KEY_MAX];
    dcr__et_prefix_end(e->prefix, end);
    json_t *req = json_pack("{s:{s:o,s:o,s:o}}", "create_request", "key", dcr__et_jkey(e->prefix),
                            "range_end", dcr__et_jkey(end), "start_revision", dcr__et_jint(from));
    char *text = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return text;
}

/* One watch for at most ms: 1 when a change after since came, 0 when none
 * came in time, -1 when the watch could not be made. */
static int watch_once(dcr__et_t *e, uint64_t since, int ms)
{
    char *text = watch_request(e, (int64_t)since + 1);
    if (text == NULL) return -1;
    char url[sizeof e->base_url + 16];
    snprintf(url, sizeof url, "%s/v3/watch", e->base_url);
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    watch_stream_t *w = calloc(1, sizeof *w);
    if (w == NULL) {
        free(text);
        return -1;
    }
    w->since = since;
    dcr__http_req_t q = {
        .method = "POST",
        .url = url,
        .headers = headers,
        .body = text,
        .body_len = strlen(text),
        .http_only = true,
        .tcp_nodelay = true,
        .connect_timeout_ms = ms < e->timeout_ms ? ms : e->timeout_ms,
        .timeout_ms = ms,
        .dst = w->buf,
        .dst_cap = sizeof w->buf,
        .error_body_max = 512,
        .progress = watch_progress,
        .progress_ctx = w,
    };
    dcr__http_resp_t hr;
    dcr_status_t st = dcr__http_request(&q, &hr);
    int got;
    if (st == DCR_EAGAIN || (st == DCR_EINVAL && hr.code == 200))
        got = 1; /* an event, or more than a created message */
    else if (hr.code != 200)
        got = -1; /* no server, or it refused the watch */
    else if (st == DCR_OK)
        got = watch_changed(w) ? 1 : -1; /* the server ended the stream */
    else
        got = st == DCR_ETIMEOUT ? 0 : -1;
    dcr__http_resp_free(&hr);
    free(w);
    free(text);
    return got;
}

uint64_t dcr__et_position(dcr_control_t *c)
{
    int64_t rev = atomic_load(&((dcr__et_t *)c)->seen_rev);
    return rev > 0 ? (uint64_t)rev : 0;
}

/* Watches until a change after since or the timeout; a watch that fails is
 * tried again after a short nap (a restarted server, a refused request),
 * and since the next watch replays from since+1 nothing is lost meanwhile. */
dcr_status_t dcr__et_wait(dcr_control_t *c, uint64_t since, int timeout_ms)
{
    dcr__et_t *e = (dcr__et_t *)c;
    /* A response since the position named a later revision: a change the
     * caller may not have read (one more read is cheaper than a replay). */
    if ((uint64_t)atomic_load(&e->seen_rev) > since) return DCR_OK;
    int64_t deadline = dcr__et_mono_ms() + timeout_ms;
    int nap_ms = WATCH_RETRY_MIN_MS;
    for (;;) {
        int64_t left = deadline - dcr__et_mono_ms();
        if (left <= 0) return DCR_ETIMEOUT;
        int got = watch_once(e, since, (int)left);
        if (got > 0) return DCR_OK;
        if (got == 0) continue;
        left = deadline - dcr__et_mono_ms();
        if (left <= 0) return DCR_ETIMEOUT;
        dcr_clock_nap_ns((long)(nap_ms < left ? nap_ms : left) * 1000000L);
        if (nap_ms < WATCH_RETRY_MAX_MS) nap_ms *= 2;
    }
}
