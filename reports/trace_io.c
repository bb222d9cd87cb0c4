/* Chrome trace JSON export/import and the Nsight Systems SQLite import. */
#include "reports/trace_io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/outpath.h"

/* ---- Chrome trace: writer ---- */

/* Chrome's pid 0 is shown as a nameless process in some viewers; start at 1. */
static int dcr__chrome_pid(unsigned actor)
{
    return (int)actor + 1;
}

/* Microseconds with three decimals from integer ns: exact, unlike a double. */
static void dcr__write_us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

typedef struct dcr__thread_key {
    uint16_t actor;
    int32_t id;
} dcr__thread_key_t;

static int dcr__thread_cmp(const void *pa, const void *pb)
{
    const dcr__thread_key_t *a = pa, *b = pb;
    if (a->actor != b->actor) return a->actor < b->actor ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Process and thread names, so Perfetto labels rows "owner" / "owner 3". */
static dcr_status_t dcr__write_metadata(FILE *f, const dcr_trace_interval_t *iv, size_t n)
{
    for (unsigned a = 0; a < DCR_ACTOR_COUNT; a++)
        fprintf(f,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
                "\"%s\"}},\n"
                "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"sort_index\":%u}},\n",
                dcr__chrome_pid(a), dcr_actor_name((dcr_actor_t)a), dcr__chrome_pid(a), a);
    dcr__thread_key_t *keys = n ? malloc(n * sizeof(*keys)) : NULL;
    if (n && !keys) return dcr_error_set(DCR_ENOMEM, "trace thread names for %zu intervals", n);
    for (size_t i = 0; i < n; i++) keys[i] = (dcr__thread_key_t){iv[i].actor, iv[i].id};
    if (n) qsort(keys, n, sizeof(*keys), dcr__thread_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i && !dcr__thread_cmp(&keys[i - 1], &keys[i])) continue;
        fprintf(f,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"%s %d\"}},\n",
                dcr__chrome_pid(keys[i].actor), (int)keys[i].id,
                dcr_actor_name((dcr_actor_t)keys[i].actor), (int)keys[i].id);
    }
    free(keys);
    return DCR_OK;
}

static void dcr__write_event(FILE *f, const dcr_trace_interval_t *v, uint64_t base, bool last)
{
    const char *stage = dcr_stage_name((dcr_stage_t)v->stage);
    fprintf(f, "{\"ph\":\"X\",\"cat\":\"dcr\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", stage,
            dcr__chrome_pid(v->actor), (int)v->id);
    dcr__write_us(f, v->start_ns - base);
    fputs(",\"dur\":", f);
    dcr__write_us(f, v->end_ns - v->start_ns);
    fprintf(f,
            ",\"args\":{\"refit\":%" PRIu32 ",\"stage\":\"%s\",\"actor\":\"%s\",\"id\":%d,"
            "\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 "}}%s\n",
            v->refit, stage, dcr_actor_name((dcr_actor_t)v->actor), (int)v->id, v->start_ns,
            v->end_ns, last ? "" : ",");
}

/* Intervals a reader could not take back are refused up front, so every file
 * we write reads back exactly. */
static dcr_status_t dcr__check_writable(const dcr_trace_interval_t *iv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (iv[i].stage >= DCR_STAGE_COUNT || iv[i].actor >= DCR_ACTOR_COUNT)
            return dcr_error_set(DCR_EINVAL, "interval %zu: stage %u / actor %u out of range", i,
                                 iv[i].stage, iv[i].actor);
        if (iv[i].end_ns < iv[i].start_ns || iv[i].end_ns > (uint64_t)INT64_MAX)
            return dcr_error_set(DCR_EINVAL,
                                 "interval %zu: end %" PRIu64 " before start %" PRIu64
                                 " or beyond int64",
                                 i, iv[i].end_ns, iv[i].start_ns);
    }
    return DCR_OK;
}

static dcr_status_t dcr__write_chrome_file(FILE *f, const dcr_trace_interval_t *iv, size_t n)
{
    uint64_t base = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (iv[i].start_ns < base) base = iv[i].start_ns;
    if (!n) base = 0;
    fputs("{\"displayTimeUnit\":\"ns\",\n", f);
    fprintf(f, "\"otherData\":{\"format\":\"dcr-trace\",\"version\":1,\"base_ns\":%" PRIu64 "},\n",
            base);
    fputs("\"traceEvents\":[\n", f);
    DCR_CHECK(dcr__write_metadata(f, iv, n));
    /* The metadata lines end in commas; a final empty metadata-free event
     * would be invalid JSON, so the list closes on the last interval or on a
     * harmless marker when there is none. */
    for (size_t i = 0; i < n; i++) dcr__write_event(f, &iv[i], base, i + 1 == n);
    if (!n) fputs("{\"ph\":\"M\",\"name\":\"trace_empty\",\"pid\":0,\"tid\":0,\"args\":{}}\n", f);
    fputs("]}\n", f);
    return DCR_OK;
}

dcr_status_t dcr_trace_write_chrome(const char *path, const dcr_trace_interval_t *iv, size_t n)
{
    if (!path || (!iv && n)) return dcr_error_set(DCR_EINVAL, "trace write: NULL argument");
    DCR_CHECK(dcr__check_writable(iv, n));
    /* The output-path rule (dcr/outpath.h): a temporary file beside the
     * target, renamed only over a regular file or a new name. */
    dcr_outfile_t *of = NULL;
    DCR_CHECK(dcr_outfile_open("trace", path, 0, &of));
    int fd = dup(dcr_outfile_fd(of));
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        dcr_status_t s = dcr_error_set(DCR_EIO, "trace %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        dcr_outfile_abort(of);
        return s;
    }
    dcr_status_t s = dcr__write_chrome_file(f, iv, n);
    int werr = ferror(f);
    if (fclose(f) != 0) werr = 1;
    if (s == DCR_OK && werr)
        s = dcr_error_set(DCR_EIO, "trace %s: write failed: %s", path, strerror(errno));
    if (s != DCR_OK) {
        dcr_outfile_abort(of);
        return s;
    }
    return dcr_outfile_commit(of);
}

/* ---- Chrome trace: reader ---- */

/* An integer member of obj within [min, max]; false when absent or not one. */
static bool dcr__json_int(json_t *obj, const char *key, json_int_t min, json_int_t max,
                          json_int_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < min || x > max) return false;
    *out = x;
    return true;
}

/* One "dcr" complete event's args into an interval. */
static dcr_status_t dcr__chrome_event(const char *path, size_t idx, json_t *ev,
                                      dcr_trace_interval_t *out)
{
    json_t *args = json_object_get(ev, "args");
    if (!json_is_object(args))
        return dcr_error_set(DCR_EPARSE, "%s: event %zu: dcr event without an args object", path,
                             idx);
    json_int_t refit, id, start, end;
    dcr_stage_t stage;
    dcr_actor_t actor;
    if (!dcr__json_int(args, "refit", 0, UINT32_MAX, &refit))
        return dcr_error_set(
            DCR_EPARSE, "%s: event %zu: args.refit must be an integer in [0, 2^32)", path, idx);
    if (dcr_stage_from_name(json_string_value(json_object_get(args, "stage")), &stage) != DCR_OK)
        return dcr_error_set(DCR_EPARSE, "%s: event %zu: args.stage must be a stage name", path,
                             idx);
    if (dcr_actor_from_name(json_string_value(json_object_get(args, "actor")), &actor) != DCR_OK)
        return dcr_error_set(DCR_EPARSE, "%s: event %zu: args.actor must be an actor name", path,
                             idx);
    if (!dcr__json_int(args, "id", INT32_MIN, INT32_MAX, &id))
        return dcr_error_set(DCR_EPARSE, "%s: event %zu: args.id must be an int32", path, idx);
    if (!dcr__json_int(args, "start_ns", 0, INT64_MAX, &start) ||
        !dcr__json_int(args, "end_ns", 0, INT64_MAX, &end))
        return dcr_error_set(DCR_EPARSE,
                             "%s: event %zu: args.start_ns and end_ns must be "
                             "non-negative integers",
                             path, idx);
    if (end < start)
        return dcr_error_set(DCR_EPARSE, "%s: event %zu: end_ns %lld before start_ns %lld", path,
                             idx, (long long)end, (long long)start);
    *out = (dcr_trace_interval_t){(uint64_t)start, (uint64_t)end,   (uint32_t)refit,
                                  (uint16_t)stage, (uint16_t)actor, (int32_t)id};
    return DCR_OK;
}

/* True for the events this reader takes: complete events of category "dcr". */
static bool dcr__is_dcr_event(json_t *ev)
{
    const char *ph = json_string_value(json_object_get(ev, "ph"));
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    return ph && cat && !strcmp(ph, "X") && !strcmp(cat, "dcr");
}

/* The reader walks the file's skeleton itself (the root object or array and
 * the traceEvents array) and hands each event, and every other root value,
 * to jansson on its own: every byte is still checked as JSON, but memory
 * holds one event's tree at a time instead of the whole file's, which for a
 * million events was 2.25 GB and 42 s of allocator work. */
typedef struct dcr__scan {
    const char *path;
    const char *p, *end;
    dcr_trace_interval_t *iv;
    size_t n, cap;
    bool events_seen;
} dcr__scan_t;

static void dcr__skip_ws(dcr__scan_t *sc)
{
    while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
        sc->p++;
}

static dcr_status_t dcr__malformed(const dcr__scan_t *sc, const char *what)
{
    return dcr_error_set(DCR_EPARSE, "%s: not a JSON trace: %s", sc->path, what);
}

/* Advances past one JSON value's text (strings, nesting and escapes taken
 * into account, not validated: jansson does that) and returns its start. */
static dcr_status_t dcr__value_span(dcr__scan_t *sc, const char **start_p, size_t *len_p)
{
    const char *p = sc->p, *start = p;
    if (p >= sc->end) return dcr__malformed(sc, "unexpected end of file");
    if (*p == '{' || *p == '[' || *p == '"') {
        size_t depth = 0;
        bool in_string = false;
        for (; p < sc->end; p++) {
            char c = *p;
            if (in_string) {
                if (c == '\\')
                    p++;
                else if (c == '"')
                    in_string = false;
                if (!in_string && depth == 0) break; /* a lone string ends here */
                continue;
            }
            if (c == '"')
                in_string = true;
            else if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                break;
        }
        if (p >= sc->end) return dcr__malformed(sc, "unexpected end of file");
        p++;
    } else {
        while (p < sc->end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
               *p != '\t' && *p != '\r')
            p++;
        if (p == start) return dcr__malformed(sc, "expected a value");
    }
    sc->p = p;
    *start_p = start;
    *len_p = (size_t)(p - start);
    return DCR_OK;
}

/* Parses the next value with jansson; event >= 0 names it in errors. */
static dcr_status_t dcr__value(dcr__scan_t *sc, long long event, json_t **out_p)
{
    const char *start = NULL;
    size_t len = 0;
    DCR_CHECK(dcr__value_span(sc, &start, &len));
    /* jansson's tree of a value costs about three times its text: one
     * outsized value must not cost gigabytes. A dcr event is a few hundred
     * bytes. */
    if (len > DCR_TRACE_VALUE_MAX) {
        if (event >= 0)
            return dcr_error_set(DCR_EPARSE,
                                 "%s: event %lld: %zu bytes, more than one event may hold (%u)",
                                 sc->path, event, len, (unsigned)DCR_TRACE_VALUE_MAX);
        return dcr_error_set(DCR_EPARSE,
                             "%s: a value of %zu bytes outside traceEvents, more than one "
                             "value may hold (%u)",
                             sc->path, len, (unsigned)DCR_TRACE_VALUE_MAX);
    }
    json_error_t jerr;
    json_t *v = json_loadb(start, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        if (event >= 0)
            return dcr_error_set(DCR_EPARSE, "%s: event %lld: not a JSON trace: %s", sc->path,
                                 event, jerr.text);
        return dcr__malformed(sc, jerr.text);
    }
    *out_p = v;
    return DCR_OK;
}

static dcr_status_t dcr__take_event(dcr__scan_t *sc, size_t idx, json_t *ev)
{
    if (!json_is_object(ev))
        return dcr_error_set(DCR_EPARSE, "%s: event %zu is not an object", sc->path, idx);
    if (!dcr__is_dcr_event(ev)) return DCR_OK;
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? 2 * sc->cap : 4096;
        dcr_trace_interval_t *p = realloc(sc->iv, cap * sizeof(*p));
        if (!p) return dcr_error_set(DCR_ENOMEM, "%s: %zu events", sc->path, cap);
        sc->iv = p;
        sc->cap = cap;
    }
    DCR_CHECK(dcr__chrome_event(sc->path, idx, ev, &sc->iv[sc->n]));
    sc->n++;
    return DCR_OK;
}

/* Consumes `c` (after blanks) if it is next; the caller's loop then goes on. */
static bool dcr__eat(dcr__scan_t *sc, char c)
{
    dcr__skip_ws(sc);
    if (sc->p >= sc->end || *sc->p != c) return false;
    sc->p++;
    dcr__skip_ws(sc);
    return true;
}

/* After a member of a container closed by `close`: *more_p true past a ',',
 * false past `close`; anything else is malformed (`expected` says what). */
static dcr_status_t dcr__after_member(dcr__scan_t *sc, char close, const char *expected,
                                      bool *more_p)
{
    if (dcr__eat(sc, ',')) {
        *more_p = true;
        return DCR_OK;
    }
    if (dcr__eat(sc, close)) {
        *more_p = false;
        return DCR_OK;
    }
    return dcr__malformed(sc, sc->p < sc->end ? expected : "unexpected end of file");
}

/* The events array, from its '['. */
static dcr_status_t dcr__events(dcr__scan_t *sc)
{
    sc->p++;
    bool more = !dcr__eat(sc, ']');
    for (size_t idx = 0; more; idx++) {
        json_t *ev = NULL;
        DCR_CHECK(dcr__value(sc, (long long)idx, &ev));
        dcr_status_t s = dcr__take_event(sc, idx, ev);
        json_decref(ev);
        DCR_CHECK(s);
        DCR_CHECK(dcr__after_member(sc, ']', "expected ',' or ']' after an event", &more));
    }
    return DCR_OK;
}

/* The root object, from its '{': traceEvents is streamed, every other value
 * is checked and dropped. */
static dcr_status_t dcr__root_object(dcr__scan_t *sc)
{
    sc->p++;
    bool more = !dcr__eat(sc, '}');
    while (more) {
        json_t *key = NULL;
        DCR_CHECK(dcr__value(sc, -1, &key));
        bool is_string = json_is_string(key);
        bool events = is_string && !strcmp(json_string_value(key), "traceEvents");
        json_decref(key);
        if (!is_string) return dcr__malformed(sc, "expected a string key");
        if (!dcr__eat(sc, ':')) return dcr__malformed(sc, "expected ':'");
        if (events && sc->events_seen) return dcr__malformed(sc, "duplicate key traceEvents");
        if (events && (sc->p >= sc->end || *sc->p != '['))
            return dcr_error_set(
                DCR_EPARSE, "%s: expected a traceEvents array (Chrome trace format)", sc->path);
        if (events) {
            sc->events_seen = true;
            DCR_CHECK(dcr__events(sc));
        } else {
            json_t *v = NULL;
            DCR_CHECK(dcr__value(sc, -1, &v));
            json_decref(v);
        }
        DCR_CHECK(dcr__after_member(sc, '}', "expected ',' or '}' in the root object", &more));
    }
    return DCR_OK;
}

static dcr_status_t dcr__chrome_scan(dcr__scan_t *sc)
{
    dcr__skip_ws(sc);
    if (sc->p >= sc->end) return dcr__malformed(sc, "empty file");
    if (*sc->p == '[') {
        sc->events_seen = true;
        DCR_CHECK(dcr__events(sc));
    } else if (*sc->p == '{') {
        DCR_CHECK(dcr__root_object(sc));
    } else {
        return dcr__malformed(sc, "expected an object or an array");
    }
    dcr__skip_ws(sc);
    if (sc->p != sc->end) return dcr__malformed(sc, "text after the root value");
    if (!sc->events_seen)
        return dcr_error_set(DCR_EPARSE, "%s: expected a traceEvents array (Chrome trace format)",
                             sc->path);
    return DCR_OK;
}

/* Opens a trace file for reading: only a regular file of at most
 * DCR_TRACE_FILE_MAX bytes. The open does not block (O_NONBLOCK: a FIFO
 * would otherwise wait for a writer) and the type is taken from the opened
 * descriptor (fstat), so a path swapped between a check and the open cannot
 * slip a device or a pipe in: /dev/zero, a pipe or a socket would be read
 * whole, without end. *size_p gets the file's size. */
static dcr_status_t dcr__open_trace_file(const char *path, int *fd_p, size_t *size_p)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return dcr_error_set(DCR_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dcr_error_set(DCR_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dcr_error_set(DCR_EIO,
                             "%s is not a regular file (a trace is read from a file, "
                             "never from a device, pipe or socket)",
                             path);
    }
    if ((uint64_t)st.st_size > DCR_TRACE_FILE_MAX) {
        close(fd);
        return dcr_error_set(DCR_EINVAL, "%s: %lld bytes, more than a trace may hold (%llu)", path,
                             (long long)st.st_size, (unsigned long long)DCR_TRACE_FILE_MAX);
    }
    *fd_p = fd;
    *size_p = (size_t)st.st_size;
    return DCR_OK;
}

/* The whole file, mapped (an empty file is an empty text). */
static dcr_status_t dcr__file_text(const char *path, char **text_p, size_t *len_p, bool *mapped_p)
{
    int fd = -1;
    size_t size = 0;
    DCR_CHECK(dcr__open_trace_file(path, &fd, &size));
    if (size == 0) {
        close(fd);
        *text_p = NULL;
        *len_p = 0;
        *mapped_p = false;
        return DCR_OK;
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return dcr_error_set(DCR_EIO, "cannot map %s: %s", path, strerror(errno));
    (void)madvise(m, size, MADV_SEQUENTIAL);
    *text_p = m;
    *len_p = size;
    *mapped_p = true;
    return DCR_OK;
}

dcr_status_t dcr_trace_read_chrome(const char *path, dcr_trace_interval_t **iv_p, size_t *n_p)
{
    if (!path || !iv_p || !n_p) return dcr_error_set(DCR_EINVAL, "trace read: NULL argument");
    char *text = NULL;
    size_t len = 0;
    bool mapped = false;
    DCR_CHECK(dcr__file_text(path, &text, &len, &mapped));
    dcr__scan_t sc = {path, text, text + len, NULL, 0, 0, false};
    dcr_status_t s = dcr__chrome_scan(&sc);
    if (mapped)
        munmap(text, len);
    else
        free(text);
    if (s != DCR_OK) { /* the outputs stay untouched */
        free(sc.iv);
        return s;
    }
    if (!sc.n) {
        free(sc.iv);
        sc.iv = NULL;
    }
    *iv_p = sc.iv;
    *n_p = sc.n;
    return s;
}

/* ---- Nsight Systems SQLite export ---- */

bool dcr_trace_file_is_sqlite(const char *path)
{
    static const char magic[16] = "SQLite format 3";
    char head[16];
    int fd = -1;
    size_t size = 0;
    if (dcr__open_trace_file(path, &fd, &size) != DCR_OK) return false;
    ssize_t got = size >= sizeof(head) ? pread(fd, head, sizeof(head), 0) : 0;
    close(fd);
    return got == (ssize_t)sizeof(head) && !memcmp(head, magic, sizeof(head));
}

/* Event types of the export's NVTX_EVENTS table (ENUM_NSYS_EVENT_TYPE). */
#define DCR__NSYS_PUSHPOP       59
#define DCR__NSYS_STARTEND      60
#define DCR__NSYS_PUSHPOP_V2    70
#define DCR__NSYS_STARTEND_V2   71
#define DCR__NSYS_DOMAIN_CREATE 75
/* globalTid = (... | pid << 24 | tid): these bits are the process. */
#define DCR__NSYS_PID_MASK "0x0000FFFFFF000000"

/* Whether the database has the table; DCR_EPARSE when it cannot even be
 * queried (a corrupt file behind a valid magic). */
static dcr_status_t dcr__sqlite_has_table(const char *path, sqlite3 *db, const char *table,
                                          bool *found_p)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return dcr_error_set(DCR_EPARSE, "%s: unreadable SQLite database: %s", path,
                             sqlite3_errstr(rc));
    *found_p = rc == SQLITE_ROW;
    return DCR_OK;
}

/* The ranges of domain "dcr": start, end, message. Domains are matched per
 * process, as nsys's own reports do, since domain ids are per process. */
static void dcr__nsys_query(char *sql, size_t cap, bool have_strings)
{
    const char *msg = have_strings
                          ? "COALESCE(e.text, (SELECT value FROM StringIds WHERE id = e.textId))"
                          : "e.text";
    snprintf(sql, cap,
             "WITH dom AS (SELECT DISTINCT domainId AS id, IFNULL(globalTid, 0) & %s AS pid "
             "FROM NVTX_EVENTS WHERE eventType = %d AND %s = 'dcr') "
             "SELECT e.start, e.\"end\", %s FROM NVTX_EVENTS AS e JOIN dom "
             "ON e.domainId = dom.id AND (IFNULL(e.globalTid, 0) & %s) = dom.pid "
             "WHERE e.eventType IN (%d, %d, %d, %d) ORDER BY e.start",
             DCR__NSYS_PID_MASK, DCR__NSYS_DOMAIN_CREATE,
             have_strings ? "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId))"
                          : "text",
             msg, DCR__NSYS_PID_MASK, DCR__NSYS_PUSHPOP, DCR__NSYS_STARTEND, DCR__NSYS_PUSHPOP_V2,
             DCR__NSYS_STARTEND_V2);
}

/* One result row into an interval; *skip_p for ranges left open. */
static dcr_status_t dcr__nsys_row(const char *path, sqlite3_stmt *st, dcr_trace_interval_t *out,
                                  bool *skip_p)
{
    *skip_p = false;
    if (sqlite3_column_type(st, 1) == SQLITE_NULL) {
        *skip_p = true; /* still open when the capture stopped: no interval to count */
        return DCR_OK;
    }
    if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
        sqlite3_column_type(st, 1) != SQLITE_INTEGER)
        return dcr_error_set(DCR_EPARSE, "%s: NVTX_EVENTS row with non-integer start or end", path);
    sqlite3_int64 start = sqlite3_column_int64(st, 0), end = sqlite3_column_int64(st, 1);
    const char *msg = (const char *)sqlite3_column_text(st, 2);
    if (start < 0 || end < start)
        return dcr_error_set(DCR_EPARSE,
                             "%s: NVTX range at %lld ends at %lld (before it starts or "
                             "negative)",
                             path, (long long)start, (long long)end);
    if (!msg)
        return dcr_error_set(DCR_EPARSE, "%s: NVTX range at %lld in domain dcr has no message",
                             path, (long long)start);
    if (dcr_trace_parse_message(msg, out) != DCR_OK) {
        dcr_error_prefix("%s: NVTX range at %lld: ", path, (long long)start);
        return DCR_EPARSE;
    }
    out->start_ns = (uint64_t)start;
    out->end_ns = (uint64_t)end;
    return DCR_OK;
}

/* Grows *iv_p to hold at least need intervals. */
static dcr_status_t dcr__reserve(dcr_trace_interval_t **iv_p, size_t *cap_p, size_t need)
{
    if (need <= *cap_p) return DCR_OK;
    size_t cap = *cap_p ? *cap_p * 2 : 256;
    while (cap < need) cap *= 2;
    dcr_trace_interval_t *p = realloc(*iv_p, cap * sizeof(*p));
    if (!p) return dcr_error_set(DCR_ENOMEM, "%zu trace intervals", cap);
    *iv_p = p;
    *cap_p = cap;
    return DCR_OK;
}

static dcr_status_t dcr__nsys_ranges(const char *path, sqlite3 *db, dcr_trace_interval_t **iv_p,
                                     size_t *n_p)
{
    char sql[1024];
    bool strings = false;
    DCR_CHECK(dcr__sqlite_has_table(path, db, "StringIds", &strings));
    dcr__nsys_query(sql, sizeof(sql), strings);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return dcr_error_set(DCR_EPARSE, "%s: NVTX_EVENTS lacks the columns of an nsys export: %s",
                             path, sqlite3_errmsg(db));
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0, cap = 0;
    dcr_status_t s = DCR_OK;
    int rc;
    while (s == DCR_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        bool skip;
        DCR_CHECK_GOTO(dcr__reserve(&iv, &cap, n + 1), s, done);
        DCR_CHECK_GOTO(dcr__nsys_row(path, st, &iv[n], &skip), s, done);
        if (!skip) n++;
    }
    if (rc != SQLITE_DONE)
        s = dcr_error_set(DCR_EPARSE, "%s: reading NVTX_EVENTS failed: %s", path,
                          sqlite3_errmsg(db));
done:
    sqlite3_finalize(st);
    if (s == DCR_OK && !n)
        s = dcr_error_set(DCR_ENOTFOUND,
                          "%s: no closed NVTX range in domain \"dcr\" (was the run "
                          "traced with nsys --trace=nvtx and dcr tracing on?)",
                          path);
    if (s != DCR_OK) {
        free(iv);
        return s;
    }
    *iv_p = iv;
    *n_p = n;
    return DCR_OK;
}

dcr_status_t dcr_trace_read_nsys(const char *path, dcr_trace_interval_t **iv_p, size_t *n_p)
{
    if (!path || !iv_p || !n_p) return dcr_error_set(DCR_EINVAL, "nsys read: NULL argument");
    int fd = -1;
    size_t size = 0;
    DCR_CHECK(dcr__open_trace_file(path, &fd, &size)); /* a regular file, not too large */
    close(fd);
    if (!dcr_trace_file_is_sqlite(path))
        return dcr_error_set(DCR_EPARSE,
                             "%s: not an SQLite database (expected `nsys export --type "
                             "sqlite` output)",
                             path);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        dcr_status_t s = dcr_error_set(DCR_EIO, "cannot open %s: %s", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return s;
    }
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    bool events = false;
    dcr_status_t s = dcr__sqlite_has_table(path, db, "NVTX_EVENTS", &events);
    if (s == DCR_OK && !events)
        s = dcr_error_set(DCR_EPARSE,
                          "%s: no NVTX_EVENTS table (not an nsys export, or no NVTX "
                          "ranges were captured)",
                          path);
    else if (s == DCR_OK)
        s = dcr__nsys_ranges(path, db, &iv, &n);
    sqlite3_close(db);
    if (s == DCR_OK) s = dcr_trace_infer_windows(&iv, &n);
    if (s != DCR_OK) {
        free(iv);
        return s;
    }
    *iv_p = iv;
    *n_p = n;
    return DCR_OK;
}

/* ---- window inference ---- */

typedef struct dcr__window {
    uint32_t refit;
    bool has_window, has_compute, has_baseline;
    uint64_t first_any, last_any, first_compute, last_baseline;
} dcr__window_t;

static int dcr__window_cmp(const void *pa, const void *pb)
{
    uint32_t a = ((const dcr__window_t *)pa)->refit, b = ((const dcr__window_t *)pb)->refit;
    return a < b ? -1 : a > b;
}

static bool dcr__is_compute(const dcr_trace_interval_t *v)
{
    return v->actor == DCR_ACTOR_OWNER && v->stage <= DCR_STAGE_ZSTD;
}

/* Folds one interval into its refit's entry (w sorted by refit, distinct). */
static void dcr__window_add(dcr__window_t *w, size_t nw, const dcr_trace_interval_t *v)
{
    dcr__window_t key = {.refit = v->refit};
    dcr__window_t *e = bsearch(&key, w, nw, sizeof(*w), dcr__window_cmp);
    if (v->stage == DCR_STAGE_REFIT) e->has_window = true;
    if (v->start_ns < e->first_any) e->first_any = v->start_ns;
    if (v->end_ns > e->last_any) e->last_any = v->end_ns;
    if (dcr__is_compute(v) && (!e->has_compute || v->start_ns < e->first_compute)) {
        e->first_compute = v->start_ns;
        e->has_compute = true;
    }
    if (v->stage == DCR_STAGE_BASELINE && (!e->has_baseline || v->end_ns > e->last_baseline)) {
        e->last_baseline = v->end_ns;
        e->has_baseline = true;
    }
}

/* One entry per distinct refit number among the intervals, sorted. */
static dcr_status_t dcr__windows(const dcr_trace_interval_t *iv, size_t n, dcr__window_t **w_p,
                                 size_t *nw_p)
{
    dcr__window_t *w = malloc(n * sizeof(*w));
    if (!w) return dcr_error_set(DCR_ENOMEM, "refit windows of %zu intervals", n);
    for (size_t i = 0; i < n; i++)
        w[i] = (dcr__window_t){.refit = iv[i].refit, .first_any = UINT64_MAX};
    qsort(w, n, sizeof(*w), dcr__window_cmp);
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        if (!nw || w[nw - 1].refit != w[i].refit) w[nw++] = w[i];
    for (size_t i = 0; i < n; i++) dcr__window_add(w, nw, &iv[i]);
    *w_p = w;
    *nw_p = nw;
    return DCR_OK;
}

dcr_status_t dcr_trace_infer_windows(dcr_trace_interval_t **iv_p, size_t *n_p)
{
    if (!iv_p || !n_p) return dcr_error_set(DCR_EINVAL, "infer windows: NULL argument");
    size_t n = *n_p, cap = n;
    if (!n) return DCR_OK;
    dcr__window_t *w = NULL;
    size_t nw = 0;
    DCR_CHECK(dcr__windows(*iv_p, n, &w, &nw));
    dcr_status_t s = DCR_OK;
    for (size_t i = 0; i < nw && s == DCR_OK; i++) {
        if (w[i].has_window) continue;
        s = dcr__reserve(iv_p, &cap, n + 1);
        if (s != DCR_OK) break;
        uint64_t t0 = w[i].has_compute ? w[i].first_compute : w[i].first_any;
        uint64_t t1 = w[i].has_baseline ? w[i].last_baseline : w[i].last_any;
        if (t1 < t0) t1 = t0; /* a baseline ending before any compute began: an empty window */
        (*iv_p)[n++] =
            (dcr_trace_interval_t){t0, t1, w[i].refit, DCR_STAGE_REFIT, DCR_ACTOR_COORD, 0};
    }
    free(w);
    if (s == DCR_OK) *n_p = n;
    return s;
}
