/* Status codes and the one clear error line.
 *
 * Every fallible dcr function returns dcr_status_t: DCR_OK (0) or a negative
 * code grouped by scope. The function that detects a failure also records a
 * thread-local detail message (what, where, what was expected) with
 * dcr_error_set(); dcr_error_line() joins code and detail into the single line
 * a command prints before exiting non-zero. */
#ifndef DCR_STATUS_H
#define DCR_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dcr_status {
    DCR_OK = 0,
    /* input: flags, configs, files a user hands us */
    DCR_EINVAL = -1,       /* invalid argument or value */
    DCR_ENOTFOUND = -2,    /* named thing does not exist */
    DCR_EPARSE = -3,       /* malformed config or JSON */
    DCR_ELAYOUT = -4,      /* parallel degrees violate a divisibility constraint */
    DCR_EIO = -5,          /* file system or OS call failed */
    DCR_ENOMEM = -6,       /* allocation failed */
    DCR_EUNSUPPORTED = -7, /* valid request this build or path cannot do */
    DCR_EINTR = -8,        /* stopped by a signal (SIGINT, SIGTERM, SIGHUP) */
    /* payload: bytes received from a peer */
    DCR_EPAYLOAD = -20, /* payload failed validation */
    DCR_EDIGEST = -21,  /* payload digest mismatch */
    DCR_ECODEC = -22,   /* compression library failure */
    /* transport */
    DCR_ETRANSPORT = -40, /* connection lost, transfer failed */
    DCR_ETIMEOUT = -41,   /* deadline passed */
    DCR_EAGAIN = -42,     /* nothing available yet; try again */
    DCR_ECLOSED = -43,    /* queue or channel closed */
    /* receiver */
    DCR_ERECEIVER = -60, /* loader condition violated during apply */
    DCR_EMISMATCH = -61, /* bits differ from the oracle */
    /* control plane */
    DCR_ECONFLICT = -80, /* compare-and-set lost, or coordinator replaced */
    DCR_ECONTROL = -81,  /* control plane unavailable or its data malformed */
    /* attempt */
    DCR_EATTEMPT = -100, /* attempt failed and must be retried */
    DCR_EFATAL = -101,   /* retries cannot repair: operator intervention */
} dcr_status_t;

/* Short constant text for a code ("invalid argument"). Never NULL. */
const char *dcr_status_str(dcr_status_t status);

/* Records the detail message of the calling thread's most recent failure and
 * returns status, so call sites read `return dcr_error_set(DCR_EINVAL, ...)`. */
dcr_status_t dcr_error_set(dcr_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
dcr_status_t dcr_error_vset(dcr_status_t status, const char *fmt, va_list ap);

/* Prefixes the current detail with more context ("payload 7: " + detail). */
void dcr_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The calling thread's detail message; "" when none. Valid until the next set. */
const char *dcr_error_detail(void);

/* Clears the calling thread's detail message. */
void dcr_error_clear(void);

/* "<status text>: <detail>" in a thread-local buffer, valid until the next
 * call; the detail is escaped with dcr_escape, since it may quote names read
 * from files or peers. */
const char *dcr_error_line(dcr_status_t status);

/* Copies src into dst (capacity cap > 0; always terminated, cut to fit on a
 * whole escape) writing every control character, DEL and byte >= 0x80 as
 * \xNN, so that an untrusted name (a tensor name from a config, an HDF5
 * string, a payload item) cannot move the terminal's cursor or forge a
 * second line when printed. Returns dst. */
char *dcr_escape(char *dst, size_t cap, const char *src);

/* Most bytes of a detail message kept, terminator included; longer details
 * are cut, which is better than failing while reporting a failure. */
#define DCR_ERROR_DETAIL_MAX 512

/* A failure as a value: its code and its detail, so that it can cross from
 * the thread that saw it to the one that reports it (details are
 * thread-local). A thread's function saves its result into one the joiner
 * owns; after pthread_join (which orders the two), the joiner restores it.
 * Zero-initialized it holds DCR_OK and no detail. */
typedef struct dcr_error {
    dcr_status_t status;
    char detail[DCR_ERROR_DETAIL_MAX];
} dcr_error_t;

/* Stores status and, when it is a failure, the calling thread's current
 * detail in *e (DCR_OK stores an empty detail). Returns status. */
dcr_status_t dcr_error_save(dcr_error_t *e, dcr_status_t status);

/* Makes *e the calling thread's failure: its detail becomes the current one
 * (when e holds a failure) and its status is returned, so a joiner reads
 * `return dcr_error_restore(&worker->err);`. A saved DCR_OK returns DCR_OK
 * and leaves the current detail alone. */
dcr_status_t dcr_error_restore(const dcr_error_t *e);

/* Notes at debug level (DCR_LOG=debug) that the failure `status` of expr
 * was forwarded at file:line, with the current detail: zstd's
 * FORWARD_IF_ERROR trail, one line per frame a failure climbs through.
 * Costs nothing on success, a level check per frame on failure. */
void dcr_error_trace(dcr_status_t status, const char *file, int line, const char *expr);

/* Evaluates expr once; returns its status from the enclosing function on
 * failure, leaving a debug-level trace line of where (dcr_error_trace). */
#define DCR_CHECK(expr)                                                                            \
    do {                                                                                           \
        dcr_status_t dcr__st = (expr);                                                             \
        if (dcr__st != DCR_OK) {                                                                   \
            dcr_error_trace(dcr__st, __FILE__, __LINE__, #expr);                                   \
            return dcr__st;                                                                        \
        }                                                                                          \
    } while (0)

/* Evaluates expr once; on failure stores the status in `st`, leaves the same
 * trace line as DCR_CHECK and jumps to label. */
#define DCR_CHECK_GOTO(expr, st, label)                                                            \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != DCR_OK) {                                                                      \
            dcr_error_trace((st), __FILE__, __LINE__, #expr);                                      \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
