/* The messages of dcr bench --ab-binary and its worker (bench_ab_wire.h):
 * bounded line reads and one field table per message, shared by encoder and
 * decoder so that the two cannot drift apart. */
#include "workloads/harness/bench_ab_wire.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dcr/clock.h"

/* ---- lines --------------------------------------------------------------- */

void dcr__ab_reader_init(dcr__ab_reader_t *r, int fd)
{
    r->fd = fd;
    r->used = r->taken = 0;
    r->ended_fd = -1;
}

/* The complete line at the buffer's front, if there is one. */
static bool take_line(dcr__ab_reader_t *r, char **line_p, size_t *consumed_p)
{
    char *nl = memchr(r->buf, '\n', r->used);
    if (!nl) return false;
    *nl = '\0';
    *line_p = r->buf;
    *consumed_p = (size_t)(nl - r->buf) + 1;
    return true;
}

/* Milliseconds left until deadline_ns (-1: no deadline). */
static int left_ms(uint64_t deadline_ns)
{
    if (deadline_ns == 0) return -1;
    uint64_t now = dcr_clock_ns();
    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

/* Waits until r->fd is readable: DCR_OK, DCR_ETIMEOUT or DCR_EINTR. */
static dcr_status_t wait_readable(const dcr__ab_reader_t *r, uint64_t deadline_ns, int stop_fd)
{
    for (;;) {
        /* Unused slots hold -1, which poll skips. */
        struct pollfd p[3] = {{r->fd, POLLIN, 0}, {stop_fd, POLLIN, 0}, {r->ended_fd, POLLIN, 0}};
        int ms = left_ms(deadline_ns);
        if (ms == 0) return dcr_error_set(DCR_ETIMEOUT, "no message in time");
        int n = poll(p, 3, ms);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return dcr_error_set(DCR_EIO, "poll: %s", strerror(errno));
        if (p[1].revents & POLLIN) return dcr_error_set(DCR_EINTR, "stopped by a signal");
        /* What the writer sent before it ended is read first. */
        if (p[0].revents) return DCR_OK;
        if (p[2].revents) return dcr_error_set(DCR_EIO, "ended");
    }
}

dcr_status_t dcr__ab_read_line(dcr__ab_reader_t *r, int timeout_ms, int stop_fd, char **line_p)
{
    /* The line returned last time is still at the front: drop it now. */
    memmove(r->buf, r->buf + r->taken, r->used - r->taken);
    r->used -= r->taken;
    r->taken = 0;
    uint64_t deadline = timeout_ms < 0 ? 0 : dcr_clock_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        size_t consumed = 0;
        if (take_line(r, line_p, &consumed)) {
            r->taken = consumed;
            if (strlen(*line_p) + 1 != consumed)
                return dcr_error_set(DCR_EPARSE, "a line holds a NUL byte");
            return DCR_OK;
        }
        if (r->used == sizeof(r->buf))
            return dcr_error_set(DCR_EPARSE, "a line longer than %d bytes", DCR__AB_LINE_MAX);
        DCR_CHECK(wait_readable(r, deadline, stop_fd));
        ssize_t n = read(r->fd, r->buf + r->used, sizeof(r->buf) - r->used);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return dcr_error_set(DCR_EIO, "read: %s", strerror(errno));
        if (n == 0) return dcr_error_set(DCR_EIO, "ended");
        r->used += (size_t)n;
    }
}

dcr_status_t dcr__ab_read_msg(dcr__ab_reader_t *r, int timeout_ms, int stop_fd, json_t **msg_p)
{
    char *line = NULL;
    DCR_CHECK(dcr__ab_read_line(r, timeout_ms, stop_fd, &line));
    json_error_t e;
    json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &e);
    if (!json_is_object(j)) {
        json_decref(j);
        return dcr_error_set(DCR_EPARSE, "a line that is not a JSON object (%.80s)", line);
    }
    *msg_p = j;
    return DCR_OK;
}

dcr_status_t dcr__ab_send(int fd, json_t *msg)
{
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (!text) return dcr_error_set(DCR_ENOMEM, "an A/B message");
    size_t len = strlen(text), done = 0;
    text[len] = '\n'; /* replaces the terminator: sent as one line */
    dcr_status_t st = DCR_OK;
    while (done < len + 1) {
        ssize_t n = send(fd, text + done, len + 1 - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            st = dcr_error_set(DCR_EIO, "the other side is gone (%s)", strerror(errno));
            break;
        }
        done += (size_t)n;
    }
    free(text);
    return st;
}

/* ---- field tables -------------------------------------------------------- */

typedef enum { F_REAL, F_I64, F_INT, F_BOOL, F_SIZE } field_kind_t;

typedef struct field {
    const char *name;
    field_kind_t kind;
    size_t offset;
    double min, max; /* inclusive; booleans ignore them */
} field_t;

#define MAX_S     1e6  /* seconds: 11 days */
#define MAX_BYTES 9e15 /* within a double's exact integers */
#define ROW(name, kind, member, lo, hi)                                                            \
    {                                                                                              \
        name, kind, offsetof(dcr_bench_refit_t, member), lo, hi                                    \
    }

static const field_t row_fields[] = {
    ROW("latency_s", F_REAL, latency_s, 0, MAX_S),
    ROW("construction_s", F_REAL, construction_s, 0, MAX_S),
    ROW("finalization_s", F_REAL, finalization_s, 0, MAX_S),
    ROW("payload_bytes", F_I64, payload_bytes, 0, MAX_BYTES),
    ROW("cross_bytes", F_I64, cross_bytes, 0, MAX_BYTES),
    ROW("raw_changed_value_bytes", F_I64, raw_changed_value_bytes, 0, MAX_BYTES),
    ROW("changed_elements", F_I64, changed_elements, 0, MAX_BYTES),
    ROW("records", F_I64, records, 0, MAX_BYTES),
    ROW("payloads", F_I64, payloads, 0, MAX_BYTES),
    ROW("attempts", F_INT, attempts, 0, 1e6),
    ROW("construction_lb_s", F_REAL, construction_lb_s, 0, MAX_S),
    ROW("transport_lb_s", F_REAL, transport_lb_s, 0, MAX_S),
    ROW("bound_finalization_s", F_REAL, bound_finalization_s, 0, MAX_S),
    ROW("remainder_s", F_REAL, remainder_s, -MAX_S, MAX_S),
    ROW("traced", F_BOOL, traced, 0, 0),
    ROW("intervals", F_I64, intervals, 0, MAX_BYTES),
    ROW("bit_exact", F_BOOL, bit_exact, 0, 0),
    ROW("verified", F_BOOL, verified, 0, 0),
    ROW("cpu_owners_s", F_REAL, cpu_s[DCR_THREAD_OWNER], 0, MAX_S),
    ROW("cpu_nodes_s", F_REAL, cpu_s[DCR_THREAD_NODE], 0, MAX_S),
    ROW("cpu_transport_s", F_REAL, cpu_s[DCR_THREAD_TRANSPORT], 0, MAX_S),
    ROW("wall_s", F_REAL, wall_s, 0, MAX_S),
    ROW("rss_bytes", F_I64, rss_bytes, 0, MAX_BYTES),
    ROW("retain_bytes", F_I64, retain_bytes, 0, MAX_BYTES),
    ROW("retain_s", F_REAL, retain_s, 0, MAX_S),
    ROW("retain_wait_s", F_REAL, retain_wait_s, 0, MAX_S),
};
_Static_assert(DCR_THREAD_ROLES == 3, "the row carries three CPU roles");

#define SUM(name, kind, member, hi)                                                                \
    {                                                                                              \
        name, kind, offsetof(dcr_bench_result_t, member), 0, hi                                    \
    }

static const field_t summary_fields[] = {
    SUM("checkpoint_bytes", F_I64, checkpoint_bytes, MAX_BYTES),
    SUM("receivers", F_INT, receivers, 1e6),
    SUM("owners", F_INT, owners, 1e6),
    SUM("xor_tensors", F_SIZE, xor_tensors, 1e12),
    SUM("overwrite_tensors", F_SIZE, overwrite_tensors, 1e12),
    SUM("payloads_rejected", F_I64, payloads_rejected, MAX_BYTES),
    SUM("payloads_unauthenticated", F_I64, payloads_unauthenticated, MAX_BYTES),
    SUM("memory_estimate_bytes", F_I64, memory_estimate_bytes, MAX_BYTES),
    SUM("peak_rss_bytes", F_I64, peak_rss_bytes, MAX_BYTES),
};

static json_t *field_json(const field_t *f, const void *base)
{
    const char *p = (const char *)base + f->offset;
    switch (f->kind) {
    case F_REAL:
        return json_real(*(const double *)p); /* NULL for a non-finite value */
    case F_I64:
        return json_integer(*(const int64_t *)p);
    case F_INT:
        return json_integer(*(const int *)p);
    case F_SIZE:
        return json_integer((json_int_t) * (const size_t *)p);
    case F_BOOL:
        return json_boolean(*(const bool *)p);
    }
    return NULL;
}

static json_t *table_json(const field_t *t, size_t n, const void *base)
{
    json_t *j = json_object();
    for (size_t i = 0; j && i < n; i++) {
        json_t *v = field_json(&t[i], base);
        if (!v || json_object_set_new(j, t[i].name, v) != 0) {
            json_decref(j);
            return NULL;
        }
    }
    return j;
}

/* One field of j into base, checked. */
static dcr_status_t field_parse(const field_t *f, const json_t *v, void *base)
{
    char *p = (char *)base + f->offset;
    if (f->kind == F_BOOL) {
        if (!json_is_boolean(v)) return dcr_error_set(DCR_EPARSE, "%s is not a boolean", f->name);
        *(bool *)p = json_is_true(v);
        return DCR_OK;
    }
    if (f->kind == F_REAL ? !json_is_number(v) : !json_is_integer(v))
        return dcr_error_set(DCR_EPARSE, "%s is not %s", f->name,
                             f->kind == F_REAL ? "a number" : "an integer");
    double x = json_number_value(v);
    if (!isfinite(x) || x < f->min || x > f->max)
        return dcr_error_set(DCR_EPARSE, "%s is %g, expected within [%g, %g]", f->name, x, f->min,
                             f->max);
    switch (f->kind) {
    case F_REAL:
        *(double *)p = x;
        break;
    case F_I64:
        *(int64_t *)p = (int64_t)json_integer_value(v);
        break;
    case F_INT:
        *(int *)p = (int)json_integer_value(v);
        break;
    case F_SIZE:
        *(size_t *)p = (size_t)json_integer_value(v);
        break;
    case F_BOOL:
        break;
    }
    return DCR_OK;
}

/* Exactly the table's fields, each checked, into base. */
static dcr_status_t table_parse(const char *what, const field_t *t, size_t n, const json_t *j,
                                void *base)
{
    if (!json_is_object(j)) return dcr_error_set(DCR_EPARSE, "its %s is not an object", what);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(j, t[i].name);
        if (!v) return dcr_error_set(DCR_EPARSE, "its %s lacks %s", what, t[i].name);
        DCR_CHECK(field_parse(&t[i], v, base));
    }
    if (json_object_size(j) != n) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)j, key, v)
        {
            bool known = false;
            for (size_t i = 0; i < n && !known; i++) known = !strcmp(key, t[i].name);
            if (!known)
                return dcr_error_set(DCR_EPARSE, "its %s has an unknown field %.64s", what, key);
        }
    }
    return DCR_OK;
}

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

json_t *dcr__ab_row_json(const dcr_bench_refit_t *f)
{
    return table_json(row_fields, NFIELDS(row_fields), f);
}

dcr_status_t dcr__ab_row_parse(const json_t *j, dcr_bench_refit_t *out)
{
    dcr_bench_refit_t f;
    memset(&f, 0, sizeof(f));
    DCR_CHECK(table_parse("row", row_fields, NFIELDS(row_fields), j, &f));
    /* A row must say it was verified before it may say it was checked
     * bit-exact; an unverified row counts as exact (dcr_bench_refit_t). */
    if (!f.verified && !f.bit_exact)
        return dcr_error_set(DCR_EPARSE, "its row is not verified yet not bit-exact");
    if (f.attempts < 1) return dcr_error_set(DCR_EPARSE, "its row has attempts %d", f.attempts);
    *out = f;
    return DCR_OK;
}

json_t *dcr__ab_summary_json(const dcr_bench_result_t *r)
{
    return table_json(summary_fields, NFIELDS(summary_fields), r);
}

dcr_status_t dcr__ab_summary_parse(const json_t *j, dcr_bench_result_t *res)
{
    dcr_bench_result_t r = *res;
    DCR_CHECK(table_parse("summary", summary_fields, NFIELDS(summary_fields), j, &r));
    *res = r;
    return DCR_OK;
}

static bool key_ok(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9') ||
              key[i] == '_'))
            return false;
    return true;
}

dcr_status_t dcr__ab_config_check(const json_t *j)
{
    if (!json_is_object(j)) return dcr_error_set(DCR_EPARSE, "its config is not an object");
    if (json_object_size(j) > 256)
        return dcr_error_set(DCR_EPARSE, "its config has %zu keys (at most 256)",
                             json_object_size(j));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)j, key, v)
    {
        if (!key_ok(key)) return dcr_error_set(DCR_EPARSE, "its config has a key %.64s", key);
        bool ok = json_is_boolean(v) || json_is_null(v) ||
                  (json_is_number(v) && isfinite(json_number_value(v))) ||
                  (json_is_string(v) && json_string_length(v) <= 4096 &&
                   strlen(json_string_value(v)) == json_string_length(v));
        if (!ok) return dcr_error_set(DCR_EPARSE, "its config's %s is not a short scalar", key);
    }
    return DCR_OK;
}
