/* The in-place baseline update (construct-internal.h): while an owner
 * compares a sub-run it has the changed positions and both words at hand,
 * so it writes the candidate's words into the tracker there and then, and
 * logs the words it overwrote. A commit then has nothing left to copy for
 * the tasks so updated; an attempt that is not committed puts the logged
 * words back before the next run compares.
 *
 * The log is a sequence of segments: a header (the tracker address of its
 * first changed word, the count, the word size), then per changed word its
 * 16-bit distance in words from that address and the word it replaced,
 * packed. A task's sub-runs and box runs walk its tracker upwards, so the
 * next changes extend the last segment while they lie within 2^16 words of
 * its start: about 2 + es bytes a changed word. */
#include <stdlib.h>
#include <string.h>

#include "construct-internal.h"

#define SEGMENT_SPAN ((size_t)1 << 16) /* words a segment's offsets reach */

typedef struct segment {
    unsigned char *base; /* tracker address of the segment's first word */
    uint32_t count;
    uint32_t es;
} segment_t;

/* Bytes n changes spanning idx[0]..idx[n-1] may take at most: their
 * entries, and a header for every segment they could open. */
static size_t log_bound(const uint32_t *idx, size_t n, size_t es)
{
    size_t segments = 1 + ((size_t)idx[n - 1] - idx[0]) / SEGMENT_SPAN + 1;
    return n * (2 + es) + segments * sizeof(segment_t);
}

/* Room for need more bytes within the limit; false leaves the log as it is. */
static bool log_reserve(dcr__undo_log_t *log, size_t need)
{
    if (need > log->limit || log->len > log->limit - need) return false;
    if (log->len + need <= log->cap) return true;
    size_t cap = log->cap ? 2 * log->cap : (size_t)64 << 10;
    if (cap < log->len + need) cap = log->len + need;
    if (cap > log->limit) cap = log->limit;
    unsigned char *buf = realloc(log->buf, cap);
    if (!buf) return false;
    log->buf = buf;
    log->cap = cap;
    return true;
}

/* The segment word w extends (the last one, when w lies in its reach, a
 * whole number of words above its start), or a new one opened for it. */
static segment_t segment_for(dcr__undo_log_t *log, unsigned char *w, size_t es)
{
    segment_t seg;
    if (log->len > 0) {
        memcpy(&seg, log->buf + log->last, sizeof(seg));
        size_t d = (size_t)(w - seg.base);
        if (seg.es == es && w > seg.base && d % es == 0 && d / es < SEGMENT_SPAN) return seg;
    }
    log->last = log->len;
    log->len += sizeof(seg);
    return (segment_t){w, 0, (uint32_t)es};
}

bool dcr__undo_update(dcr__undo_log_t *log, unsigned char *tracker, const unsigned char *cand,
                      const uint32_t *idx, size_t n, size_t es)
{
    if (n == 0) return true;
    if (log->full || !log_reserve(log, log_bound(idx, n, es))) {
        log->full = true;
        return false;
    }
    size_t i = 0;
    while (i < n) {
        segment_t seg = segment_for(log, tracker + (size_t)idx[i] * es, es);
        /* Word k of this call is word k + lead of the segment (one division
         * per segment, not per word). */
        size_t lead = (size_t)(tracker + (size_t)idx[i] * es - seg.base) / es - idx[i];
        unsigned char *out = log->buf + log->len;
        for (; i < n; i++) {
            size_t k = idx[i], off = k + lead;
            if (off >= SEGMENT_SPAN) break;
            uint16_t off16 = (uint16_t)off;
            memcpy(out, &off16, 2);
            dcr__word_copy(out + 2, tracker + k * es, es);
            dcr__word_copy(tracker + k * es, cand + k * es, es);
            out += 2 + es;
            seg.count++;
        }
        log->len = (size_t)(out - log->buf);
        memcpy(log->buf + log->last, &seg, sizeof(seg));
    }
    return true;
}

void dcr__undo_apply(dcr__undo_log_t *log)
{
    for (size_t at = 0; at < log->len;) {
        segment_t seg;
        memcpy(&seg, log->buf + at, sizeof(seg));
        const unsigned char *e = log->buf + at + sizeof(seg);
        for (uint32_t i = 0; i < seg.count; i++, e += 2 + seg.es) {
            uint16_t off;
            memcpy(&off, e, 2);
            dcr__word_copy(seg.base + (size_t)off * seg.es, e + 2, seg.es);
        }
        at = (size_t)(e - log->buf);
    }
    dcr__undo_forget(log);
}

void dcr__undo_forget(dcr__undo_log_t *log)
{
    log->len = 0;
    log->last = 0;
    log->full = false;
}

void dcr__undo_free(dcr__undo_log_t *log)
{
    free(log->buf);
    *log = (dcr__undo_log_t){0};
}
