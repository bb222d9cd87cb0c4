/* The "s3" object store: an S3-compatible service over HTTP through
 * libcurl (the engine's one HTTP client, core/http-internal.h). Store URL
 * s3://BUCKET[/PREFIX] with an endpoint; requests are path-style
 * (ENDPOINT/BUCKET/PREFIX/KEY) and signed with AWS Signature Version 4 by
 * libcurl (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3", the payload
 * declared UNSIGNED-PAYLOAD, as S3 allows over any transport). Credentials
 * and region come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
 *
 * Integrity: a body is data only when its length equals the response's
 * Content-Length (and the requested range), and, for a whole object stored
 * in one part, its MD5 equals the ETag; a put is done only when the ETag the
 * service answers equals the MD5 of what was sent (for a multipart put, the
 * MD5 of the parts' MD5s). Anything else is an error, never data.
 *
 * Failures: 5xx, 429, timeouts, refused or reset connections and bodies
 * that fail those checks are retried with exponential backoff (retries,
 * from 50 ms doubling up to 2 s); 4xx are not (404 is DCR_ENOTFOUND). The
 * last failure is one line: the request, the endpoint, the cause, the tries.
 *
 * Connections: the HTTP client's handle per thread keeps its connections
 * open between requests. Properties: listings are strongly consistent
 * (S3 since 2020, s3rver), byte ranges are served, and there is no change
 * notification (callers poll by listing). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/http-internal.h"
#include "dcr/log.h"
#include "transport/objstore-internal.h"

#define S3_TIMEOUT_DEFAULT_MS 60000
#define S3_RETRIES_DEFAULT    4
#define S3_BACKOFF_FIRST_MS   50
#define S3_BACKOFF_MAX_MS     2000
#define S3_MULTIPART_DEFAULT  ((uint64_t)16 << 20)
#define S3_PART_DEFAULT       ((uint64_t)8 << 20)
#define S3_PART_MIN           ((uint64_t)5 << 20)
#define S3_PARTS_MAX          10000
#define S3_XML_MAX            ((size_t)16 << 20) /* a response body that is not an object */
#define S3_ERRBODY_MAX        2048
#define S3_URL_MAX            (4096 + 3 * DCR_OBJSTORE_KEY_MAX)

typedef struct s3store {
    dcr_objstore_t pub;
    char *url;      /* s3://BUCKET[/PREFIX], for error lines */
    char *endpoint; /* without a trailing '/' */
    char *bucket;
    char *prefix; /* "" or ending in '/' */
    char *userpwd;
    char sigv4[160];
    int timeout_ms, retries;
    uint64_t multipart_threshold, part_bytes;
} s3store_t;

/* ---- one request ---------------------------------------------------------- */

typedef struct s3_req {
    /* request */
    const char *method;
    char url[S3_URL_MAX];
    const char *what; /* for error lines: "GET key" */
    const uint8_t *body;
    size_t body_len;
    bool range;
    uint64_t off, len;
    const dcr_objstore_pace_t *pace;
    /* response body: into dst[0, cap) when dst is set (an object), else into
     * mem, malloc'd, of at most S3_XML_MAX bytes (XML); an error document's
     * beginning goes into mem either way */
    uint8_t *dst;
    size_t cap;
    uint8_t *mem;
    /* response state of the latest try */
    size_t got;
    long code;
    char etag[DCR_OBJSTORE_VERSION_MAX];
    int64_t content_length;
    char content_range[128];
} s3_req_t;

static bool s3_ok_code(long code)
{
    return code >= 200 && code < 300;
}

/* Paces a GET body as its bytes arrive, in pieces of at most the pacing chunk. */
static dcr_status_t s3_pace_arrived(void *ctx, size_t n)
{
    const dcr_objstore_pace_t *pace = ctx;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < DCR_OBJSTORE_PACE_CHUNK ? n - done : DCR_OBJSTORE_PACE_CHUNK;
        DCR_CHECK(pace->fn(pace->ctx, k));
        done += k;
    }
    return DCR_OK;
}

/* The headers of the answer that the checks below read. */
static void s3_read_headers(s3_req_t *r, const dcr__http_resp_t *resp)
{
    char v[128];
    if (dcr__http_header(resp, "ETag", v, sizeof v)) {
        /* Quoted in S3's answers: keep what is inside the quotes. */
        size_t len = strlen(v);
        if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
            v[len - 1] = '\0';
            memmove(v, v + 1, len - 1);
        }
        snprintf(r->etag, sizeof r->etag, "%s", v);
    }
    if (dcr__http_header(resp, "Content-Length", v, sizeof v)) {
        char *e;
        long long x = strtoll(v, &e, 10);
        r->content_length = (*e == '\0' && x >= 0) ? x : -2; /* -2: malformed */
    }
    if (dcr__http_header(resp, "Content-Range", v, sizeof v))
        snprintf(r->content_range, sizeof r->content_range, "%s", v);
}

typedef enum { S3_DONE, S3_RETRY, S3_FAIL } s3_verdict_t;

/* Runs one try of r; fills *why on failure. */
static s3_verdict_t s3_try(s3store_t *s, s3_req_t *r, dcr_status_t *st_p, char *why, size_t cap)
{
    free(r->mem);
    r->mem = NULL;
    r->got = 0;
    r->code = 0;
    r->etag[0] = r->content_range[0] = '\0';
    r->content_length = -1;
    /* Every header set here is signed (libcurl 7.88 signs the user's
     * headers): so only headers that are sent, never a removal like
     * "Expect:", which it would sign though it sends none. */
    const char *hd[4] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD"};
    size_t nh = 1;
    char range[96];
    if (r->range && r->len == UINT64_MAX) {
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-", r->off);
        hd[nh++] = range;
    } else if (r->range) {
        snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, r->off,
                 r->off + r->len - 1);
        hd[nh++] = range;
    }
    if (r->body != NULL && strcmp(r->method, "POST") == 0)
        hd[nh++] = "Content-Type: application/xml";
    /* A request times out when it cannot connect, or when no byte moves
     * for timeout_ms: not on a total, which a large object on a slow
     * emulated link would exceed while it progresses. A put's bytes were
     * paced before the request (s3_pace_upfront); a get's are paced as they
     * arrive. */
    dcr__http_req_t q = {
        .method = r->method,
        .url = r->url,
        .headers = hd,
        .body = r->body,
        .body_len = r->body_len,
        .userpwd = s->userpwd,
        .aws_sigv4 = s->sigv4,
        .connect_timeout_ms = s->timeout_ms < 10000 ? s->timeout_ms : 10000,
        .stall_timeout_ms = s->timeout_ms,
        .dst = r->dst,
        .dst_cap = r->cap,
        .body_max = S3_XML_MAX,
        .error_body_max = S3_ERRBODY_MAX,
        .progress = r->pace != NULL ? s3_pace_arrived : NULL,
        .progress_ctx = (void *)r->pace,
    };
    dcr__http_resp_t *resp = malloc(sizeof *resp);
    if (resp == NULL) {
        *st_p = DCR_ENOMEM;
        snprintf(why, cap, "out of memory");
        return S3_FAIL;
    }
    dcr_status_t st = dcr__http_request(&q, resp);
    r->code = resp->code;
    r->got = resp->body_len;
    r->mem = resp->body;
    resp->body = NULL;
    s3_read_headers(r, resp);
    if (st != DCR_OK) {
        *st_p = st;
        snprintf(why, cap, "%s%s", resp->error, st == DCR_ETIMEOUT ? " (no answer in time)" : "");
        bool retry = resp->retryable;
        free(resp);
        return retry ? S3_RETRY : S3_FAIL;
    }
    free(resp);
    if (!s3_ok_code(r->code)) {
        char code[64] = "", msg[160] = "";
        if (r->mem != NULL) {
            dcr__s3_xml_text((const char *)r->mem, r->got, "Code", code, sizeof code);
            dcr__s3_xml_text((const char *)r->mem, r->got, "Message", msg, sizeof msg);
        }
        snprintf(why, cap, "HTTP %ld%s%s%s%s", r->code, code[0] ? " " : "", code,
                 msg[0] ? ": " : "", msg);
        *st_p = r->code == 404                     ? DCR_ENOTFOUND
                : r->code == 408 || r->code == 504 ? DCR_ETIMEOUT
                                                   : DCR_ETRANSPORT;
        return r->code >= 500 || r->code == 429 || r->code == 408 ? S3_RETRY : S3_FAIL;
    }
    /* A body is data only when every byte the answer announced arrived. */
    if (r->content_length == -2 ||
        (r->content_length >= 0 && (uint64_t)r->content_length != r->got)) {
        *st_p = DCR_ETRANSPORT;
        snprintf(why, cap, "body of %zu bytes, Content-Length says %" PRId64, r->got,
                 r->content_length);
        return S3_RETRY;
    }
    return S3_DONE;
}

/* Runs r with retries; DCR_OK once a try passed s3_try's checks and
 * `check` (NULL: none), which returns S3_DONE, S3_RETRY or S3_FAIL with
 * the reason in why. */
typedef s3_verdict_t (*s3_check_fn)(s3_req_t *r, void *ctx, char *why, size_t cap);

static dcr_status_t s3_run(s3store_t *s, s3_req_t *r, s3_check_fn check, void *ctx)
{
    char why[512] = "";
    dcr_status_t st = DCR_ETRANSPORT;
    int tries = 0, max = s->retries + 1;
    for (;;) {
        tries++;
        s3_verdict_t v = s3_try(s, r, &st, why, sizeof why);
        if (v == S3_DONE && check != NULL) {
            v = check(r, ctx, why, sizeof why);
            st = DCR_ETRANSPORT;
        }
        if (v == S3_DONE) return DCR_OK;
        if (v == S3_FAIL || tries >= max) break;
        int ms = S3_BACKOFF_FIRST_MS << (tries - 1 < 6 ? tries - 1 : 6);
        usleep((useconds_t)(ms < S3_BACKOFF_MAX_MS ? ms : S3_BACKOFF_MAX_MS) * 1000);
    }
    if (st == DCR_ECLOSED || st == DCR_ENOMEM) return dcr_error_set(st, "%s", why);
    return dcr_error_set(st, "object store %s: %s at %s: %s (%d %s)", s->url, r->what, s->endpoint,
                         why, tries, tries == 1 ? "try" : "tries");
}

/* ---- URLs ------------------------------------------------------------------ */

/* Percent-encodes s (RFC 3986 unreserved stay; '/' stays when keep_slash). */
static bool s3_enc(const char *s, bool keep_slash, char *out, size_t cap)
{
    static const char x[] = "0123456789ABCDEF";
    size_t k = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
        if (k + 4 >= cap) return false;
        if (plain)
            out[k++] = (char)c;
        else {
            out[k++] = '%';
            out[k++] = x[c >> 4];
            out[k++] = x[c & 15];
        }
    }
    out[k] = '\0';
    return true;
}

/* ENDPOINT/BUCKET/PREFIXKEY[?query] into r->url (key NULL: the bucket). */
static dcr_status_t s3_url(s3store_t *s, s3_req_t *r, const char *key, const char *query)
{
    char full[2 * DCR_OBJSTORE_KEY_MAX + 8], enc[3 * sizeof full];
    snprintf(full, sizeof full, "%s%s", s->prefix, key ? key : "");
    if (!s3_enc(full, true, enc, sizeof enc))
        return dcr_error_set(DCR_EINVAL, "object store %s: key %s too long", s->url, key);
    int n = snprintf(r->url, sizeof r->url, "%s/%s%s%s%s%s", s->endpoint, s->bucket, key ? "/" : "",
                     key ? enc : "", query ? "?" : "", query ? query : "");
    if (n < 0 || (size_t)n >= sizeof r->url)
        return dcr_error_set(DCR_EINVAL, "object store %s: URL too long", s->url);
    return DCR_OK;
}

/* ---- checks on answers ------------------------------------------------------ */

typedef struct s3_put_ctx {
    const char *want; /* the ETag the body must have */
} s3_put_ctx_t;

static s3_verdict_t s3_check_etag(s3_req_t *r, void *ctx, char *why, size_t cap)
{
    const s3_put_ctx_t *c = ctx;
    if (strcmp(r->etag, c->want) == 0) return S3_DONE;
    snprintf(why, cap, "ETag '%s' in the answer disagrees with '%s' of the bytes sent", r->etag,
             c->want);
    return S3_RETRY;
}

static bool s3_is_md5(const char *etag)
{
    if (strlen(etag) != 32) return false;
    for (int i = 0; i < 32; i++)
        if (!((etag[i] >= '0' && etag[i] <= '9') || (etag[i] >= 'a' && etag[i] <= 'f')))
            return false;
    return true;
}

typedef struct s3_get_ctx {
    uint64_t off, len; /* len UINT64_MAX: whole from off */
} s3_get_ctx_t;

static s3_verdict_t s3_check_get(s3_req_t *r, void *ctx, char *why, size_t cap)
{
    const s3_get_ctx_t *c = ctx;
    if (r->content_length < 0) {
        snprintf(why, cap, "answer without a Content-Length (%zu bytes came)", r->got);
        return S3_RETRY;
    }
    if (r->range) {
        uint64_t a, b, total;
        if (r->code != 206 ||
            sscanf(r->content_range, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &a, &b, &total) !=
                3 ||
            a != c->off || b != c->off + r->got - 1 || b >= total) {
            snprintf(why, cap, "HTTP %ld with Content-Range '%s' for %zu bytes from %" PRIu64,
                     r->code, r->content_range, r->got, c->off);
            return S3_RETRY;
        }
        if (c->len == UINT64_MAX) return b + 1 == total ? S3_DONE : S3_RETRY;
        if (r->got != c->len) {
            snprintf(why, cap, "%zu bytes of the %" PRIu64 " requested", r->got, c->len);
            return S3_FAIL; /* the object is shorter: asking again will not help */
        }
        return S3_DONE;
    }
    /* A whole object stored in one part: its ETag is the MD5 of its bytes. */
    if (s3_is_md5(r->etag)) {
        char md5[33];
        if (!dcr__md5_hex(r->dst != NULL ? r->dst : r->mem, r->got, md5)) {
            snprintf(why, cap, "libcrypto cannot compute MD5");
            return S3_FAIL;
        }
        if (strcmp(md5, r->etag) != 0) {
            snprintf(why, cap, "body of %zu bytes has MD5 %s, ETag says %s", r->got, md5, r->etag);
            return S3_RETRY;
        }
    }
    return S3_DONE;
}

/* ---- slots ------------------------------------------------------------------ */

static dcr_status_t s3_no_md5(const s3store_t *s, const char *what)
{
    return dcr_error_set(DCR_EUNSUPPORTED, "object store %s: %s: libcrypto cannot compute MD5",
                         s->url, what);
}

/* Paces a PUT body's bytes before the request starts, then sends them at
 * once: an S3 object becomes visible only when its upload completes, and
 * pacing up front keeps that true of test servers that show a key while its
 * body still streams in (s3rver lists it and can then keep the MD5 of the
 * partial file as its ETag for good). The emulated link time is the same; a
 * stop during pacing aborts before anything was sent. */
static dcr_status_t s3_pace_upfront(const dcr_objstore_pace_t *pace, size_t len)
{
    for (size_t done = 0; pace != NULL && done < len;) {
        size_t k = len - done < DCR_OBJSTORE_PACE_CHUNK ? len - done : DCR_OBJSTORE_PACE_CHUNK;
        DCR_CHECK(pace->fn(pace->ctx, k));
        done += k;
    }
    return DCR_OK;
}

static dcr_status_t s3_put_single(s3store_t *s, const char *key, const uint8_t *buf, size_t len,
                                  const dcr_objstore_pace_t *pace)
{
    s3_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "object store %s: put %s", s->url, key);
    char what[DCR_OBJSTORE_KEY_MAX + 16], md5[33];
    snprintf(what, sizeof what, "PUT %s", key);
    if (!dcr__md5_hex(buf, len, md5)) {
        free(r);
        return s3_no_md5(s, what);
    }
    *r = (s3_req_t){.method = "PUT", .what = what, .body = buf, .body_len = len};
    s3_put_ctx_t c = {md5};
    dcr_status_t st = s3_pace_upfront(pace, len);
    if (st == DCR_OK) st = s3_url(s, r, key, NULL);
    if (st == DCR_OK) st = s3_run(s, r, s3_check_etag, &c);
    free(r->mem);
    free(r);
    return st;
}

/* The bucket request `method` ?query with an XML body, the answer's text
 * into r->mem. */
static dcr_status_t s3_xml_request(s3store_t *s, s3_req_t *r, const char *method, const char *key,
                                   const char *query, const char *what, const char *body)
{
    *r = (s3_req_t){.method = method, .what = what};
    if (body != NULL) {
        r->body = (const uint8_t *)body;
        r->body_len = strlen(body);
    }
    DCR_CHECK(s3_url(s, r, key, query));
    return s3_run(s, r, NULL, NULL);
}

/* Completes a multipart upload whose parts are listed in done (the
 * CompleteMultipartUpload document) and checks the ETag S3 answers against
 * the parts' MD5s (md5s) and the whole body's. */
static dcr_status_t s3_multipart_complete(s3store_t *s, s3_req_t *r, const char *key,
                                          const char *id_enc, const char *done,
                                          const uint8_t (*md5s)[16], size_t nparts,
                                          const uint8_t *buf, size_t len)
{
    char what[DCR_OBJSTORE_KEY_MAX + 64], query[1200];
    dcr_status_t st;
    snprintf(what, sizeof what, "POST %s?uploadId (complete)", key);
    snprintf(query, sizeof query, "uploadId=%s", id_enc);
    st = s3_xml_request(s, r, "POST", key, query, what, done);
    /* S3 may answer 200 and still fail the completion in the body. Its
     * ETag is the MD5 of the parts' MD5s with "-<parts>"; some
     * S3-compatible services (s3rver) give the MD5 of the whole body
     * instead, an equally strong check, so either is accepted. */
    char etag[DCR_OBJSTORE_VERSION_MAX] = "", want[DCR_OBJSTORE_VERSION_MAX], whole[33];
    if (st == DCR_OK && (!dcr__md5_multipart_etag(md5s, nparts, want, sizeof want) ||
                         !dcr__md5_hex(buf, len, whole)))
        st = s3_no_md5(s, what);
    if (st == DCR_OK && (r->mem == NULL || !dcr__s3_xml_text((const char *)r->mem, r->got, "ETag",
                                                             etag, sizeof etag))) {
        char code[64] = "";
        if (r->mem != NULL)
            dcr__s3_xml_text((const char *)r->mem, r->got, "Code", code, sizeof code);
        st = dcr_error_set(DCR_ETRANSPORT, "object store %s: %s: %s", s->url, what,
                           code[0] ? code : "no <ETag> in the answer");
    }
    size_t el = strlen(etag);
    if (st == DCR_OK && el >= 2 && etag[0] == '"' && etag[el - 1] == '"') {
        memmove(etag, etag + 1, el - 2);
        etag[el - 2] = '\0';
    }
    if (st == DCR_OK && strcmp(etag, want) != 0 && strcmp(etag, whole) != 0)
        st = dcr_error_set(DCR_ETRANSPORT,
                           "object store %s: %s: ETag '%s' disagrees with '%s' of the parts "
                           "sent (or '%s' of the whole body)",
                           s->url, what, etag, want, whole);
    free(r->mem);
    r->mem = NULL;
    return st;
}

static dcr_status_t s3_put_multipart(s3store_t *s, const char *key, const uint8_t *buf, size_t len,
                                     const dcr_objstore_pace_t *pace)
{
    size_t nparts = (size_t)((len + s->part_bytes - 1) / s->part_bytes);
    if (nparts > S3_PARTS_MAX)
        return dcr_error_set(DCR_EINVAL, "object store %s: put %s: %zu parts, at most %d", s->url,
                             key, nparts, S3_PARTS_MAX);
    s3_req_t *r = calloc(1, sizeof *r);
    uint8_t(*md5s)[16] = calloc(nparts, sizeof *md5s);
    char *done = malloc(nparts * 96 + 128);
    char what[DCR_OBJSTORE_KEY_MAX + 64], upload_id[1024] = "", query[1200];
    dcr_status_t st = DCR_OK;
    if (r == NULL || md5s == NULL || done == NULL) {
        st = dcr_error_set(DCR_ENOMEM, "object store %s: put %s", s->url, key);
        goto out;
    }
    snprintf(what, sizeof what, "POST %s?uploads", key);
    st = s3_xml_request(s, r, "POST", key, "uploads=", what, NULL);
    if (st == DCR_OK &&
        (r->mem == NULL || !dcr__s3_xml_text((const char *)r->mem, r->got, "UploadId", upload_id,
                                             sizeof upload_id))) {
        st = dcr_error_set(DCR_ETRANSPORT, "object store %s: %s: no <UploadId> in the answer",
                           s->url, what);
    }
    free(r->mem);
    r->mem = NULL;
    if (st != DCR_OK) goto out;
    char id_enc[3 * sizeof upload_id];
    s3_enc(upload_id, false, id_enc, sizeof id_enc);
    size_t k = (size_t)snprintf(done, 128, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < nparts && st == DCR_OK; i++) {
        size_t off = i * s->part_bytes;
        size_t n = len - off < s->part_bytes ? len - off : (size_t)s->part_bytes;
        char md5[33];
        snprintf(what, sizeof what, "PUT %s part %zu of %zu", key, i + 1, nparts);
        if (!dcr__md5(buf + off, n, md5s[i]) || !dcr__md5_hex(buf + off, n, md5)) {
            st = s3_no_md5(s, what);
            break;
        }
        snprintf(query, sizeof query, "partNumber=%zu&uploadId=%s", i + 1, id_enc);
        *r = (s3_req_t){.method = "PUT", .what = what, .body = buf + off, .body_len = n};
        s3_put_ctx_t c = {md5};
        st = s3_pace_upfront(pace, n);
        if (st == DCR_OK) st = s3_url(s, r, key, query);
        if (st == DCR_OK) st = s3_run(s, r, s3_check_etag, &c);
        free(r->mem);
        r->mem = NULL;
        k += (size_t)snprintf(done + k, 96,
                              "<Part><PartNumber>%zu</PartNumber><ETag>\"%s\"</ETag></Part>", i + 1,
                              md5);
    }
    snprintf(done + k, 64, "</CompleteMultipartUpload>");
    if (st == DCR_OK)
        st = s3_multipart_complete(s, r, key, id_enc, done, (const uint8_t(*)[16])md5s, nparts, buf,
                                   len);
    if (st != DCR_OK) {
        /* Frees the parts stored so far; the failure above is what counts. */
        char saved[512];
        snprintf(saved, sizeof saved, "%s", dcr_error_detail());
        snprintf(what, sizeof what, "DELETE %s?uploadId (abort)", key);
        snprintf(query, sizeof query, "uploadId=%s", id_enc);
        if (s3_xml_request(s, r, "DELETE", key, query, what, NULL) != DCR_OK)
            DCR_LOG_DEBUG("object store %s: %s", s->url, dcr_error_detail());
        free(r->mem);
        dcr_error_set(st, "%s", saved);
    }
out:
    free(r);
    free(md5s);
    free(done);
    return st;
}

static dcr_status_t s3_put(dcr_objstore_t *o, const char *key, const uint8_t *buf, size_t len,
                           const dcr_objstore_pace_t *pace)
{
    s3store_t *s = (s3store_t *)o;
    if ((uint64_t)len > s->multipart_threshold) return s3_put_multipart(s, key, buf, len, pace);
    return s3_put_single(s, key, buf, len, pace);
}

static dcr_status_t s3_get(dcr_objstore_t *o, const char *key, uint64_t off, uint64_t len,
                           uint8_t *dst, size_t cap, size_t *got_p, const dcr_objstore_pace_t *pace)
{
    s3store_t *s = (s3store_t *)o;
    s3_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "object store %s: get %s", s->url, key);
    char what[DCR_OBJSTORE_KEY_MAX + 64];
    bool range = off > 0 || len != UINT64_MAX;
    if (len != UINT64_MAX)
        snprintf(what, sizeof what, "GET %s bytes %" PRIu64 "-%" PRIu64, key, off, off + len - 1);
    else
        snprintf(what, sizeof what, "GET %s", key);
    *r = (s3_req_t){.method = "GET", .what = what, .dst = dst, .cap = cap, .pace = pace};
    s3_get_ctx_t c = {off, len};
    if (range) {
        r->range = true;
        r->off = off;
        r->len = len;
    }
    dcr_status_t st = s3_url(s, r, key, NULL);
    if (st == DCR_OK) st = s3_run(s, r, s3_check_get, &c);
    if (st == DCR_OK) *got_p = r->got;
    free(r->mem);
    free(r);
    return st;
}

static dcr_status_t s3_list(dcr_objstore_t *o, const char *prefix, const char *start,
                            size_t max_keys, dcr_objstore_page_t *page)
{
    s3store_t *s = (s3store_t *)o;
    char full[2 * DCR_OBJSTORE_KEY_MAX + 8], penc[3 * sizeof full], tenc[3 * sizeof page->next];
    char query[sizeof penc + sizeof tenc + 96], what[sizeof full + 16];
    snprintf(full, sizeof full, "%s%s", s->prefix, prefix);
    if (!s3_enc(full, false, penc, sizeof penc) || !s3_enc(start, false, tenc, sizeof tenc))
        return dcr_error_set(DCR_EINVAL, "object store %s: list %s: too long", s->url, prefix);
    /* Parameters in byte order, as SigV4's canonical query string has them. */
    snprintf(query, sizeof query, "%s%s%slist-type=2&max-keys=%zu&prefix=%s",
             start[0] ? "continuation-token=" : "", start[0] ? tenc : "", start[0] ? "&" : "",
             max_keys, penc);
    snprintf(what, sizeof what, "LIST %s", full);
    s3_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "object store %s: list", s->url);
    dcr_status_t st = s3_xml_request(s, r, "GET", NULL, query, what, NULL);
    if (st == DCR_OK) {
        st = r->mem != NULL ? dcr__s3_parse_list((const char *)r->mem, r->got, page)
                            : dcr_error_set(DCR_ETRANSPORT, "empty answer");
        if (st != DCR_OK) dcr_error_prefix("object store %s: %s: ", s->url, what);
    }
    free(r->mem);
    free(r);
    if (st != DCR_OK) return st;
    /* Keys relative to the store's prefix; others (not ours) are left out. */
    size_t plen = strlen(s->prefix), k = 0;
    for (size_t i = 0; i < page->n; i++) {
        dcr_objstore_entry_t *e = &page->entries[i];
        if (strncmp(e->key, s->prefix, plen) != 0 || !dcr_objstore_key_ok(e->key + plen)) continue;
        memmove(e->key, e->key + plen, strlen(e->key + plen) + 1);
        /* The version is the ETag and the size: a service that lists an
         * object while its bytes still arrive (s3rver) changes one of them. */
        char v[DCR_OBJSTORE_VERSION_MAX];
        snprintf(v, sizeof v, "%.50s/%" PRIu64, e->version, e->size);
        memcpy(e->version, v, sizeof v);
        if (k != i) page->entries[k] = *e;
        k++;
    }
    page->n = k;
    return DCR_OK;
}

static dcr_status_t s3_del(dcr_objstore_t *o, const char *key)
{
    s3store_t *s = (s3store_t *)o;
    s3_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "object store %s: delete", s->url);
    char what[DCR_OBJSTORE_KEY_MAX + 16];
    snprintf(what, sizeof what, "DELETE %s", key);
    dcr_status_t st = s3_xml_request(s, r, "DELETE", key, NULL, what, NULL);
    free(r->mem);
    free(r);
    return st == DCR_ENOTFOUND ? DCR_OK : st;
}

static dcr_status_t s3_wait_change(dcr_objstore_t *o, const char *prefix, int timeout_ms)
{
    usleep((useconds_t)timeout_ms * 1000);
    return DCR_ETIMEOUT;
}

/* ---- lifetime ------------------------------------------------------------------ */

static bool s3_claims(const dcr_objstore_ops_t *self, const char *url)
{
    (void)self;
    return strncmp(url, "s3://", 5) == 0;
}

static void s3_destroy(dcr_objstore_t *o)
{
    s3store_t *s = (s3store_t *)o;
    if (s == NULL) return;
    free(s->url);
    free(s->endpoint);
    free(s->bucket);
    free(s->prefix);
    if (s->userpwd != NULL) memset(s->userpwd, 0, strlen(s->userpwd));
    free(s->userpwd);
    free(s);
}

/* Bucket names as S3 allows them: 3..63 of [a-z0-9.-]. */
static bool s3_bucket_ok(const char *b, size_t n)
{
    if (n < 3 || n > 63) return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' ||
              b[i] == '-'))
            return false;
    return true;
}

static dcr_status_t s3_parse_url(s3store_t *s, const char *url)
{
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (!s3_bucket_ok(b, bn))
        return dcr_error_set(DCR_EINVAL,
                             "object store %s: bucket '%.*s': expected 3..63 of [a-z0-9.-] "
                             "(s3://BUCKET/PREFIX)",
                             url, (int)bn, b);
    s->bucket = strndup(b, bn);
    const char *p = slash ? slash + 1 : "";
    size_t pn = strlen(p);
    while (pn > 0 && p[pn - 1] == '/') pn--;
    s->prefix = malloc(pn + 2);
    if (s->bucket == NULL || s->prefix == NULL)
        return dcr_error_set(DCR_ENOMEM, "object store %s", url);
    memcpy(s->prefix, p, pn);
    s->prefix[pn] = '\0';
    if (pn > 0 && (pn > DCR_OBJSTORE_KEY_MAX / 2 || !dcr_objstore_key_ok(s->prefix)))
        return dcr_error_set(DCR_EINVAL,
                             "object store %s: prefix '%s': expected at most %d bytes of "
                             "[A-Za-z0-9._-/] without empty or dot-leading components",
                             url, s->prefix, DCR_OBJSTORE_KEY_MAX / 2);
    if (pn > 0) strcat(s->prefix, "/");
    return DCR_OK;
}

static dcr_status_t s3_credentials(s3store_t *s)
{
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *key = getenv("AWS_SECRET_ACCESS_KEY"),
               *region = getenv("AWS_REGION");
    const char *missing = !id || !*id           ? "AWS_ACCESS_KEY_ID"
                          : !key || !*key       ? "AWS_SECRET_ACCESS_KEY"
                          : !region || !*region ? "AWS_REGION"
                                                : NULL;
    if (missing != NULL)
        return dcr_error_set(DCR_EINVAL,
                             "object store %s: %s is not set; S3 stores read credentials and "
                             "region from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION",
                             s->url, missing);
    if (strchr(id, ':') != NULL)
        return dcr_error_set(DCR_EINVAL, "object store %s: AWS_ACCESS_KEY_ID contains ':'", s->url);
    for (const char *c = region; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-') || c - region > 40)
            return dcr_error_set(DCR_EINVAL,
                                 "object store %s: AWS_REGION '%s': expected a region name like "
                                 "us-east-1",
                                 s->url, region);
    size_t n = strlen(id) + strlen(key) + 2;
    s->userpwd = malloc(n);
    if (s->userpwd == NULL) return dcr_error_set(DCR_ENOMEM, "object store %s", s->url);
    snprintf(s->userpwd, n, "%s:%s", id, key);
    snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", region);
    return DCR_OK;
}

static dcr_status_t s3_create(const dcr_objstore_ops_t *self, const dcr_objstore_config_t *cfg,
                              dcr_objstore_t **out_p)
{
    (void)self;
    s3store_t *s = calloc(1, sizeof *s);
    if (s == NULL || (s->url = strdup(cfg->url)) == NULL) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "object store %s", cfg->url);
    }
    dcr_status_t st = s3_parse_url(s, cfg->url);
    const char *ep = cfg->s3_endpoint;
    if (st == DCR_OK && (ep == NULL || (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) ||
                         strlen(ep) > 1024)) {
        st = dcr_error_set(DCR_EINVAL,
                           "object store %s: endpoint %s: expected http[s]://HOST[:PORT] (the "
                           "S3 service, addressed path-style)",
                           cfg->url, ep ? ep : "(none given)");
    }
    if (st == DCR_OK) {
        size_t n = strlen(ep);
        while (n > 0 && ep[n - 1] == '/') n--;
        if ((s->endpoint = strndup(ep, n)) == NULL) st = dcr_error_set(DCR_ENOMEM, "endpoint");
    }
    if (st == DCR_OK) st = s3_credentials(s);
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : S3_TIMEOUT_DEFAULT_MS;
    s->retries = cfg->retries == 0 ? S3_RETRIES_DEFAULT : cfg->retries < 0 ? 0 : cfg->retries;
    s->multipart_threshold =
        cfg->multipart_threshold ? cfg->multipart_threshold : S3_MULTIPART_DEFAULT;
    s->part_bytes = cfg->part_bytes ? cfg->part_bytes : S3_PART_DEFAULT;
    if (st == DCR_OK && s->part_bytes < S3_PART_MIN)
        st = dcr_error_set(DCR_EINVAL,
                           "object store %s: part_bytes %" PRIu64 ": S3 needs at least %" PRIu64,
                           cfg->url, s->part_bytes, S3_PART_MIN);
    if (st == DCR_OK) {
        /* The bucket must exist and answer: one short listing says so now,
         * in one line, instead of at the first payload. */
        dcr_objstore_page_t page = {0};
        s->pub.ops = &dcr__objstore_s3_ops;
        st = s3_list(&s->pub, "", "", 1, &page);
        free(page.entries);
        if (st == DCR_ENOTFOUND)
            st = dcr_error_set(DCR_ENOTFOUND,
                               "object store %s: bucket %s does not exist at %s; create it first",
                               cfg->url, s->bucket, s->endpoint);
    }
    if (st != DCR_OK) {
        s3_destroy(&s->pub);
        return st;
    }
    *out_p = &s->pub;
    return DCR_OK;
}

const dcr_objstore_ops_t dcr__objstore_s3_ops = {
    .hdr = {.version = DCR_OBJSTORE_OPS_VERSION, .name = "s3"},
    .props = {.change_notify = false, .consistent_list = true, .ranged_get = true},
    .claims = s3_claims,
    .create = s3_create,
    .put = s3_put,
    .get = s3_get,
    .list = s3_list,
    .del = s3_del,
    .wait_change = s3_wait_change,
    .destroy = s3_destroy,
};
