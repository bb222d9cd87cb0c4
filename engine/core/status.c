/* Status texts and the thread-local detail message behind the one clear error line. */
#include "dcr/status.h"

#include "dcr/log.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Long enough for a name, a path and an expectation (status.h). */
#define DCR__DETAIL_MAX DCR_ERROR_DETAIL_MAX
#define DCR__LINE_MAX   (DCR__DETAIL_MAX + 64)

static _Thread_local char dcr__detail[DCR__DETAIL_MAX];
static _Thread_local char dcr__line[DCR__LINE_MAX];

/* Appends text at position pos of buf (capacity cap), cutting it to fit and
 * keeping buf terminated; returns the new length. Truncation is deliberate,
 * which is why this is not snprintf (whose truncation warnings we keep on). */
static size_t dcr__append(char *buf, size_t cap, size_t pos, const char *text)
{
    size_t room = cap - 1 - pos;
    size_t len = strlen(text);
    if (len > room) len = room;
    memcpy(buf + pos, text, len);
    buf[pos + len] = '\0';
    return pos + len;
}

const char *dcr_status_str(dcr_status_t status)
{
    switch (status) {
    case DCR_OK:
        return "ok";
    case DCR_EINVAL:
        return "invalid argument";
    case DCR_ENOTFOUND:
        return "not found";
    case DCR_EPARSE:
        return "parse error";
    case DCR_ELAYOUT:
        return "invalid parallel layout";
    case DCR_EIO:
        return "I/O error";
    case DCR_ENOMEM:
        return "out of memory";
    case DCR_EUNSUPPORTED:
        return "unsupported";
    case DCR_EINTR:
        return "interrupted";
    case DCR_EPAYLOAD:
        return "invalid payload";
    case DCR_EDIGEST:
        return "payload digest mismatch";
    case DCR_ECODEC:
        return "compression error";
    case DCR_ETRANSPORT:
        return "transport error";
    case DCR_ETIMEOUT:
        return "timed out";
    case DCR_EAGAIN:
        return "try again";
    case DCR_ECLOSED:
        return "closed";
    case DCR_ERECEIVER:
        return "receiver error";
    case DCR_EMISMATCH:
        return "bit mismatch";
    case DCR_ECONFLICT:
        return "conflict";
    case DCR_ECONTROL:
        return "control plane error";
    case DCR_EATTEMPT:
        return "attempt failed";
    case DCR_EFATAL:
        return "fatal: operator intervention required";
    }
    return "unknown status";
}

dcr_status_t dcr_error_vset(dcr_status_t status, const char *fmt, va_list ap)
{
    /* Format into a scratch buffer first: callers may pass dcr_error_detail()
     * itself as an argument, and vsnprintf must not read what it writes. */
    char tmp[DCR__DETAIL_MAX];
    if (fmt == NULL) {
        tmp[0] = '\0';
    } else {
        vsnprintf(tmp, sizeof tmp, fmt, ap);
    }
    memcpy(dcr__detail, tmp, sizeof tmp);
    return status;
}

dcr_status_t dcr_error_set(dcr_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dcr_error_vset(status, fmt, ap);
    va_end(ap);
    return status;
}

void dcr_error_prefix(const char *fmt, ...)
{
    char prefix[DCR__DETAIL_MAX];
    char old[DCR__DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, dcr__detail, sizeof old);
    size_t n = dcr__append(dcr__detail, sizeof dcr__detail, 0, prefix);
    dcr__append(dcr__detail, sizeof dcr__detail, n, old);
}

const char *dcr_error_detail(void)
{
    return dcr__detail;
}

void dcr_error_clear(void)
{
    dcr__detail[0] = '\0';
}

dcr_status_t dcr_error_save(dcr_error_t *e, dcr_status_t status)
{
    e->status = status;
    e->detail[0] = '\0';
    if (status != DCR_OK) dcr__append(e->detail, sizeof e->detail, 0, dcr__detail);
    return status;
}

dcr_status_t dcr_error_restore(const dcr_error_t *e)
{
    if (e->status == DCR_OK) return DCR_OK;
    return dcr_error_set(e->status, "%s", e->detail);
}

void dcr_error_trace(dcr_status_t status, const char *file, int line, const char *expr)
{
    if (dcr_log_get_level() < DCR_LOG_DEBUG) return;
    char safe[DCR__LINE_MAX];
    dcr_log(DCR_LOG_DEBUG, "%s:%d: %s failed: %s: %s", file, line, expr, dcr_status_str(status),
            dcr_escape(safe, sizeof safe, dcr__detail));
}

char *dcr_escape(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)src; src && *s; s++) {
        bool plain = *s >= 0x20 && *s < 0x7f;
        size_t need = plain ? 1 : 4;
        if (n + need >= cap) break;
        if (plain) {
            dst[n++] = (char)*s;
        } else {
            dst[n++] = '\\';
            dst[n++] = 'x';
            dst[n++] = hex[*s >> 4];
            dst[n++] = hex[*s & 15];
        }
    }
    dst[n] = '\0';
    return dst;
}

const char *dcr_error_line(dcr_status_t status)
{
    size_t n = dcr__append(dcr__line, sizeof dcr__line, 0, dcr_status_str(status));
    if (dcr__detail[0] != '\0') {
        char safe[DCR__LINE_MAX];
        n = dcr__append(dcr__line, sizeof dcr__line, n, ": ");
        dcr__append(dcr__line, sizeof dcr__line, n, dcr_escape(safe, sizeof safe, dcr__detail));
    }
    return dcr__line;
}
