/* One HTTP request over libcurl (core/http-internal.h): the per-thread
 * handle, the options both HTTP backends need, and a response body that
 * never grows past its bound. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/http-internal.h"
#include "dcr/cancel.h"

/* ---- the calling thread's handle ------------------------------------------ */

/* A thread's handle and the process that made it. A child process forked
 * from a thread inherits that thread's handle with its open connections,
 * whose sockets the parent still uses: the child never sends on them (two
 * processes on one connection interleave requests) and never closes them
 * (closing a TLS connection writes to it), but keeps the handle reachable
 * and makes its own. */
typedef struct http_slot {
    CURL *h;
    pid_t pid;
    struct http_slot *inherited; /* a parent process's: neither used nor freed here */
} http_slot_t;

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static pthread_key_t http_key;
static CURLcode http_global_rc = CURLE_FAILED_INIT;

static void http_slot_free(void *p)
{
    http_slot_t *slot = p;
    if (slot->pid != getpid()) return; /* inherited: the parent's to close */
    curl_easy_cleanup(slot->h);
    free(slot);
}

static void http_global_init(void)
{
    http_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (http_global_rc == CURLE_OK && pthread_key_create(&http_key, http_slot_free) != 0)
        http_global_rc = CURLE_FAILED_INIT;
}

/* The calling thread's handle, reset to defaults (its connections kept);
 * NULL when libcurl cannot be set up. */
static CURL *http_handle(void)
{
    pthread_once(&http_once, http_global_init);
    if (http_global_rc != CURLE_OK) return NULL;
    http_slot_t *slot = pthread_getspecific(http_key);
    pid_t pid = getpid();
    if (slot != NULL && slot->pid == pid) {
        curl_easy_reset(slot->h);
        return slot->h;
    }
    http_slot_t *mine = calloc(1, sizeof *mine);
    if (mine == NULL) return NULL;
    *mine = (http_slot_t){.h = curl_easy_init(), .pid = pid, .inherited = slot};
    if (mine->h == NULL || pthread_setspecific(http_key, mine) != 0) {
        curl_easy_cleanup(mine->h);
        free(mine);
        return NULL;
    }
    return mine->h;
}

/* ---- callbacks ------------------------------------------------------------- */

typedef struct http_call {
    const dcr__http_req_t *req;
    dcr__http_resp_t *resp;
    size_t sent;
    size_t cap;        /* of resp->body */
    dcr_status_t stop; /* why a callback stopped the transfer (DCR_OK: none did) */
} http_call_t;

static size_t http_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
    http_call_t *c = arg;
    size_t n = size * nitems, left = c->req->body_len - c->sent;
    if (n > left) n = left;
    memcpy(buf, (const uint8_t *)c->req->body + c->sent, n);
    c->sent += n;
    return n;
}

static bool http_ok_code(long code)
{
    return code >= 200 && code < 300;
}

/* Appends data[0, n) to resp->body, growing it up to max bytes (and a NUL). */
static bool http_collect(http_call_t *c, const char *data, size_t n, size_t max)
{
    dcr__http_resp_t *r = c->resp;
    if (n > max - r->body_len) {
        r->too_large = true;
        snprintf(r->error, sizeof r->error, "response larger than %zu bytes", max);
        c->stop = DCR_ETRANSPORT;
        return false;
    }
    if (r->body_len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < r->body_len + n + 1) cap *= 2;
        uint8_t *grown = realloc(r->body, cap);
        if (grown == NULL) {
            snprintf(r->error, sizeof r->error, "out of memory for a %zu-byte response",
                     r->body_len + n);
            c->stop = DCR_ENOMEM;
            return false;
        }
        r->body = grown;
        c->cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return true;
}

static size_t http_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    http_call_t *c = arg;
    const dcr__http_req_t *q = c->req;
    dcr__http_resp_t *r = c->resp;
    size_t n = size * nmemb;
    if (!http_ok_code(r->code) && q->error_body_max > 0) {
        /* An error document: its beginning says enough. */
        size_t k = q->error_body_max - r->body_len;
        if (k > n) k = n;
        return k == 0 || http_collect(c, data, k, q->error_body_max) ? n : 0;
    }
    if (http_ok_code(r->code) && q->dst != NULL) {
        if (n > q->dst_cap - r->body_len) {
            snprintf(r->error, sizeof r->error, "the body holds more than the %zu bytes expected",
                     q->dst_cap);
            c->stop = DCR_EINVAL;
            return 0;
        }
        memcpy(q->dst + r->body_len, data, n);
        r->body_len += n;
    } else if (!http_collect(c, data, n, q->body_max)) {
        return 0;
    }
    if (http_ok_code(r->code) && q->progress != NULL) {
        dcr_status_t st = q->progress(q->progress_ctx, n);
        if (st != DCR_OK) {
            c->stop = st;
            snprintf(r->error, sizeof r->error, "%s", dcr_error_detail());
            return 0;
        }
    }
    return n;
}

static size_t http_header_cb(char *line, size_t size, size_t nitems, void *arg)
{
    http_call_t *c = arg;
    dcr__http_resp_t *r = c->resp;
    size_t n = size * nitems;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new answer (after a 100 Continue): its headers replace the last's. */
        const char *sp = memchr(line, ' ', n);
        r->code = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
        r->head_len = 0;
        r->head[0] = '\0';
    } else if (r->head_len + n < sizeof r->head) {
        memcpy(r->head + r->head_len, line, n);
        r->head_len += n;
        r->head[r->head_len] = '\0';
    }
    return n;
}

/* ---- one request ------------------------------------------------------------ */

static void http_set_method(CURL *h, const dcr__http_req_t *q, http_call_t *c)
{
    if (strcmp(q->method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, http_read_cb);
        curl_easy_setopt(h, CURLOPT_READDATA, c);
    } else if (strcmp(q->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body != NULL ? (const char *)q->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
    } else if (strcmp(q->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
    }
}

/* The total a request with a stall window but no total of its own may
 * take: its connect, one window, and every byte it may move at the floor
 * rate, so that no request runs forever, however its server drips. */
static long http_total_ms(const dcr__http_req_t *q)
{
    size_t down = q->dst != NULL ? q->dst_cap : q->body_max;
    double bytes = (double)q->body_len + (double)down;
    double ms = (double)q->connect_timeout_ms + 2.0 * q->stall_timeout_ms +
                bytes / DCR__HTTP_LOW_SPEED_BPS * 1000.0;
    return ms > (double)DCR__HTTP_TOTAL_MAX_MS ? DCR__HTTP_TOTAL_MAX_MS : (long)ms;
}

static void http_set_timeouts(CURL *h, const dcr__http_req_t *q)
{
    if (q->connect_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)q->connect_timeout_ms);
    if (q->timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)q->timeout_ms);
    else if (q->stall_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, http_total_ms(q));
    /* A stall is "under DCR__HTTP_LOW_SPEED_BPS for the window" (libcurl
     * counts the window in whole seconds): a server dripping a few bytes a
     * second makes no progress that counts. */
    if (q->stall_timeout_ms > 0) {
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)DCR__HTTP_LOW_SPEED_BPS);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                         (long)(q->stall_timeout_ms < 1000 ? 1 : q->stall_timeout_ms / 1000));
    }
}

/* libcurl calls this about once a second even while nothing moves: where a
 * stop request (dcr/cancel.h) ends the transfer. */
static int http_xferinfo_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                            curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    http_call_t *c = arg;
    if (!dcr_cancel_requested()) return 0;
    c->stop = DCR_EINTR;
    snprintf(c->resp->error, sizeof c->resp->error, "stopped by a stop request (signal)");
    return 1;
}

/* A timeout is worth another try only when no connection was made (a
 * server starting up, a lost SYN): a server that accepted the request and
 * then said nothing, or too little, meets the next try the same way. */
static bool http_timeout_retryable(CURL *h)
{
    curl_off_t pretransfer = 0;
    if (curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer) != CURLE_OK) return true;
    return pretransfer == 0;
}

static bool http_retryable(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT ||
           rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_PARTIAL_FILE || rc == CURLE_COULDNT_RESOLVE_HOST ||
           rc == CURLE_SSL_CONNECT_ERROR;
}

dcr_status_t dcr__http_request(const dcr__http_req_t *req, dcr__http_resp_t *resp)
{
    memset(resp, 0, sizeof *resp);
    if (dcr_cancel_requested()) {
        snprintf(resp->error, sizeof resp->error, "stopped by a stop request (signal)");
        return DCR_EINTR;
    }
    CURL *h = http_handle();
    if (h == NULL) {
        snprintf(resp->error, sizeof resp->error, "cannot set up libcurl");
        return DCR_ENOMEM;
    }
    struct curl_slist *hd = NULL;
    for (const char *const *p = req->headers; p != NULL && *p != NULL; p++) {
        struct curl_slist *more = curl_slist_append(hd, *p);
        if (more == NULL) {
            curl_slist_free_all(hd);
            snprintf(resp->error, sizeof resp->error, "out of memory for the request headers");
            return DCR_ENOMEM;
        }
        hd = more;
    }
    http_call_t c = {.req = req, .resp = resp};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    /* Signals are not thread-safe; timeouts then rely on the threaded resolver. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (hd != NULL) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    if (req->http_only) curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    if (req->tcp_nodelay) curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (req->aws_sigv4 != NULL) curl_easy_setopt(h, CURLOPT_AWS_SIGV4, req->aws_sigv4);
    if (req->userpwd != NULL) curl_easy_setopt(h, CURLOPT_USERPWD, req->userpwd);
    http_set_timeouts(h, req);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, http_write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, http_header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, http_xferinfo_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &c);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    http_set_method(h, req, &c);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    /* The handle outlives the call: nothing of this call may stay set. */
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    if (c.stop != DCR_OK) return c.stop;
    if (rc == CURLE_OK) return DCR_OK;
    snprintf(resp->error, sizeof resp->error, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    resp->retryable =
        rc == CURLE_OPERATION_TIMEDOUT ? http_timeout_retryable(h) : http_retryable(rc);
    return rc == CURLE_OPERATION_TIMEDOUT ? DCR_ETIMEOUT : DCR_ETRANSPORT;
}

void dcr__http_resp_free(dcr__http_resp_t *resp)
{
    if (resp == NULL) return;
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
}

bool dcr__http_header(const dcr__http_resp_t *resp, const char *name, char *out, size_t cap)
{
    size_t k = strlen(name);
    for (const char *line = resp->head; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t n = eol != NULL ? (size_t)(eol + 1 - line) : strlen(line);
        if (n > k && strncasecmp(line, name, k) == 0 && line[k] == ':') {
            const char *v = line + k + 1, *end = line + n;
            while (v < end && (*v == ' ' || *v == '\t')) v++;
            while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
            size_t len = (size_t)(end - v);
            if (len >= cap) len = cap - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
        line += n;
    }
    return false;
}
