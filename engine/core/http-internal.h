/* One small HTTP client over libcurl, shared by the backends that speak HTTP
 * (the S3 object store, the etcd control plane); not part of the public
 * interface. It does one request and says what came back: the status code,
 * the headers of the final answer and a bounded body. What an answer means
 * (retries, integrity checks, error documents) stays with the caller.
 *
 * Connections: each thread has one libcurl handle (created at its first
 * request, freed at thread exit), reset between requests, so connections to
 * a server stay open between the requests of that thread. */
#ifndef DCR_CORE_HTTP_INTERNAL_H
#define DCR_CORE_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

#define DCR__HTTP_ERROR_MAX 256  /* libcurl's words on a failure, NUL included */
#define DCR__HTTP_HEAD_MAX  8192 /* header lines of an answer kept; later ones are dropped */
/* The low-speed floor of a request with a stall window: less than this
 * many bytes per second, averaged over the window, is a stall. */
#define DCR__HTTP_LOW_SPEED_BPS 1024
/* The most a request with a stall window and no total may take (see
 * timeout_ms below): 6 hours, past any transfer at the floor rate that
 * this client's callers ask for (at most 16 MiB of answer, 5 GiB parts). */
#define DCR__HTTP_TOTAL_MAX_MS (6L * 3600 * 1000)

/* Called after each piece of a 2xx body arrived, with its size (to pace or
 * watch the transfer); anything but DCR_OK stops the transfer, and
 * dcr__http_request returns it (the callback sets the detail). */
typedef dcr_status_t (*dcr__http_progress_fn)(void *ctx, size_t n);

typedef struct dcr__http_req {
    const char *method; /* "GET", "PUT", "POST" or "DELETE" */
    const char *url;
    const char *const *headers; /* "Name: value" lines, NULL-terminated; NULL: none */
    const void *body;           /* of a PUT or POST: the caller's, read during the call */
    size_t body_len;
    const char *userpwd; /* "ID:SECRET" for aws_sigv4; NULL: none */
    /* libcurl's AWS Signature V4 provider ("aws:amz:REGION:s3"); NULL: unsigned. */
    const char *aws_sigv4;
    bool http_only;         /* refuse any scheme but http:// */
    bool tcp_nodelay;       /* small requests that wait for their answer */
    int connect_timeout_ms; /* 0: libcurl's default */
    /* The whole request; 0: with a stall window, connect + two windows +
     * every byte it may move (body_len, dst_cap or body_max) at
     * DCR__HTTP_LOW_SPEED_BPS, at most DCR__HTTP_TOTAL_MAX_MS; without
     * one, no limit (long polls). */
    int timeout_ms;
    /* Fails when less than DCR__HTTP_LOW_SPEED_BPS moved, on average, for
     * this long (whole seconds); 0: never. */
    int stall_timeout_ms;
    /* The body of a 2xx answer goes into dst[0, dst_cap) when dst is set
     * (more is DCR_EINVAL), else into a malloc'd buffer of at most body_max
     * bytes (more is DCR_ETRANSPORT with resp->too_large). */
    uint8_t *dst;
    size_t dst_cap;
    size_t body_max;
    /* The body of any other answer: 0 treats it as a 2xx body collected
     * without dst; else its first error_body_max bytes are kept and the rest
     * is read and dropped. */
    size_t error_body_max;
    dcr__http_progress_fn progress; /* NULL: none */
    void *progress_ctx;
} dcr__http_req_t;

typedef struct dcr__http_resp {
    long code; /* the final answer's status code; 0 before one came */
    /* The collected body, NUL-terminated (not counted); NULL when nothing was
     * collected or it went into dst. Freed by dcr__http_resp_free. */
    uint8_t *body;
    size_t body_len;               /* bytes of the body, in body or in dst */
    char head[DCR__HTTP_HEAD_MAX]; /* the final answer's header lines, "\r\n" each */
    size_t head_len;
    bool retryable;                  /* a failure another try may not have (connect, reset, ...) */
    bool too_large;                  /* the body exceeded body_max */
    char error[DCR__HTTP_ERROR_MAX]; /* why the request failed, in libcurl's words */
} dcr__http_resp_t;

/* Runs req and fills *resp (which the caller frees with dcr__http_resp_free,
 * whatever the result). DCR_OK: an answer came, whatever its status code.
 * DCR_ETIMEOUT: none within the timeouts (retryable only when no connection
 * was made: a server that took the request and stalled would stall again).
 * DCR_EINTR: a stop was requested (dcr/cancel.h) before or during the
 * request, which ends within about a second. DCR_ETRANSPORT: the request
 * failed (resp->retryable, resp->too_large, resp->error say how).
 * DCR_EINVAL: the body exceeded dst_cap. DCR_ENOMEM. A progress
 * callback's status. Sets no error detail except through the callback:
 * callers write their own line from resp->error. Thread-safe. */
dcr_status_t dcr__http_request(const dcr__http_req_t *req, dcr__http_resp_t *resp);

/* Frees what a request left in resp (resp itself is the caller's). */
void dcr__http_resp_free(dcr__http_resp_t *resp);

/* The value of header `name` (case-insensitive, blanks trimmed) in the
 * final answer's headers, into out (cap bytes, cut to fit); false when the
 * answer had no such header. */
bool dcr__http_header(const dcr__http_resp_t *resp, const char *name, char *out, size_t cap);

#endif
