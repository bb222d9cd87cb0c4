/* The interval recorder and the NVTX ranges.
 *
 * Each thread appends to a chunk it alone writes; a chunk joins the global
 * list (under a mutex) when the thread first records and whenever its chunk
 * fills, so the hot path takes no lock. A chunk's count is published with a
 * release store after the interval is written, which is what lets a snapshot
 * read every chunk while its owner keeps appending. Reset frees the chunks
 * and bumps a generation number; a thread that sees a new generation drops
 * its (freed) chunk pointer without touching it. */
#include "dcr/trace.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"

#ifdef DCR_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* A thread's first chunk holds 64 intervals and each next one twice the
 * last, up to 1024 (32 KiB): the engine starts threads for every refit, each
 * recording a handful of spans, and a fixed 32 KiB per thread made a long run
 * grow by about 0.4 MB per refit; a busy thread still takes the mutex once
 * per 1024 spans. */
#define DCR__TRACE_CHUNK_MIN 64
#define DCR__TRACE_CHUNK_MAX 1024

typedef struct dcr__trace_chunk {
    _Atomic size_t count;     /* intervals published; written only by the owner thread */
    _Atomic uint64_t max_end; /* latest end among them; stored before count */
    /* Set once its owner will never touch it again (it filled up or the
     * thread ended): only then may dcr_trace_discard_before free it. */
    atomic_bool retired;
    size_t cap;
    struct dcr__trace_chunk *next;
    dcr_trace_interval_t iv[];
} dcr__trace_chunk_t;

static atomic_bool dcr__enabled;
static _Atomic uint32_t dcr__refit;
static _Atomic uint64_t dcr__generation = 1;
static _Atomic uint64_t dcr__dropped;
static pthread_mutex_t dcr__lock = PTHREAD_MUTEX_INITIALIZER;
static dcr__trace_chunk_t *dcr__chunks; /* guarded by dcr__lock */
/* Its destructor retires the chunk of a thread that ends. */
static pthread_key_t dcr__exit_key;
static pthread_once_t dcr__exit_once = PTHREAD_ONCE_INIT;

static _Thread_local dcr__trace_chunk_t *dcr__tl_chunk;
static _Thread_local uint64_t dcr__tl_generation;
static _Thread_local size_t dcr__tl_next_cap;

static const char *const dcr__stage_names[DCR_STAGE_COUNT] = {
    "compare", "project", "residual", "encode", "zstd",     "send",  "recv",  "staging",
    "apply",   "sync",    "ack",      "commit", "baseline", "refit", "check", "fetch",
};
static const char *const dcr__actor_names[DCR_ACTOR_COUNT] = {"owner", "endpoint", "node",
                                                              "receiver", "coord"};

const char *dcr_stage_name(dcr_stage_t stage)
{
    return (unsigned)stage < DCR_STAGE_COUNT ? dcr__stage_names[stage] : "?";
}

const char *dcr_actor_name(dcr_actor_t actor)
{
    return (unsigned)actor < DCR_ACTOR_COUNT ? dcr__actor_names[actor] : "?";
}

dcr_status_t dcr_stage_from_name(const char *name, dcr_stage_t *out_p)
{
    for (int i = 0; name && i < DCR_STAGE_COUNT; i++)
        if (!strcmp(name, dcr__stage_names[i])) {
            *out_p = (dcr_stage_t)i;
            return DCR_OK;
        }
    return dcr_error_set(DCR_ENOTFOUND, "unknown trace stage '%s'", name ? name : "(null)");
}

dcr_status_t dcr_actor_from_name(const char *name, dcr_actor_t *out_p)
{
    for (int i = 0; name && i < DCR_ACTOR_COUNT; i++)
        if (!strcmp(name, dcr__actor_names[i])) {
            *out_p = (dcr_actor_t)i;
            return DCR_OK;
        }
    return dcr_error_set(DCR_ENOTFOUND, "unknown trace actor '%s'", name ? name : "(null)");
}

/* ---- NVTX ---- */

#ifdef DCR_HAVE_NVTX
/* NULL until enabled, and NULL for good when no tool is attached: nvtx3 then
 * returns a NULL domain, which is how a span knows that pushing is pointless. */
static _Atomic(nvtxDomainHandle_t) dcr__nvtx_domain;
static pthread_once_t dcr__nvtx_once = PTHREAD_ONCE_INIT;

static void dcr__nvtx_create(void)
{
    atomic_store(&dcr__nvtx_domain, nvtxDomainCreateA("dcr"));
}

static bool dcr__nvtx_push(const dcr_trace_span_t *s)
{
    nvtxDomainHandle_t domain = atomic_load_explicit(&dcr__nvtx_domain, memory_order_relaxed);
    if (!domain) return false;
    char msg[96];
    dcr_trace_format_message(msg, sizeof(msg), (dcr_stage_t)s->stage, (dcr_actor_t)s->actor, s->id,
                             s->refit);
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    nvtxDomainRangePushEx(domain, &a);
    return true;
}

static void dcr__nvtx_pop(void)
{
    nvtxDomainRangePop(atomic_load_explicit(&dcr__nvtx_domain, memory_order_relaxed));
}
#else
static bool dcr__nvtx_push(const dcr_trace_span_t *s)
{
    (void)s;
    return false;
}

static void dcr__nvtx_pop(void) {}
#endif

/* ---- control ---- */

void dcr_trace_enable(bool on)
{
#ifdef DCR_HAVE_NVTX
    if (on) pthread_once(&dcr__nvtx_once, dcr__nvtx_create);
#endif
    atomic_store_explicit(&dcr__enabled, on, memory_order_release);
}

bool dcr_trace_enabled(void)
{
    return atomic_load_explicit(&dcr__enabled, memory_order_relaxed);
}

void dcr_trace_set_refit(uint32_t refit)
{
    atomic_store_explicit(&dcr__refit, refit, memory_order_relaxed);
}

/* ---- recording ---- */

/* A thread that ends retires its chunk, unless a reset freed it already
 * (the generation moved on); the check and the store happen under the lock
 * that reset takes, so the chunk cannot go in between. */
static void dcr__thread_exit(void *chunk)
{
    pthread_mutex_lock(&dcr__lock);
    if (dcr__tl_generation == atomic_load_explicit(&dcr__generation, memory_order_acquire))
        atomic_store_explicit(&((dcr__trace_chunk_t *)chunk)->retired, true, memory_order_release);
    pthread_mutex_unlock(&dcr__lock);
}

static void dcr__exit_key_create(void)
{
    (void)pthread_key_create(&dcr__exit_key, dcr__thread_exit);
}

/* A fresh chunk for the calling thread, linked into the global list. NULL
 * when memory runs out: the interval is then counted as dropped. */
static dcr__trace_chunk_t *dcr__chunk_new(uint64_t generation)
{
    if (dcr__tl_generation != generation) dcr__tl_next_cap = 0; /* a reset: start small */
    size_t cap = dcr__tl_next_cap ? dcr__tl_next_cap : DCR__TRACE_CHUNK_MIN;
    dcr__trace_chunk_t *c = malloc(sizeof(*c) + cap * sizeof(c->iv[0]));
    if (!c) return NULL;
    atomic_init(&c->count, 0);
    atomic_init(&c->max_end, 0);
    atomic_init(&c->retired, false);
    c->cap = cap;
    pthread_once(&dcr__exit_once, dcr__exit_key_create);
    pthread_mutex_lock(&dcr__lock);
    c->next = dcr__chunks;
    dcr__chunks = c;
    pthread_mutex_unlock(&dcr__lock);
    dcr__tl_chunk = c;
    dcr__tl_generation = generation;
    dcr__tl_next_cap = cap * 2 < DCR__TRACE_CHUNK_MAX ? cap * 2 : DCR__TRACE_CHUNK_MAX;
    (void)pthread_setspecific(dcr__exit_key, c);
    return c;
}

static void dcr__append(const dcr_trace_interval_t *iv)
{
    uint64_t generation = atomic_load_explicit(&dcr__generation, memory_order_acquire);
    dcr__trace_chunk_t *c = dcr__tl_generation == generation ? dcr__tl_chunk : NULL;
    if (!c) {
        c = dcr__chunk_new(generation);
        if (!c) {
            atomic_fetch_add_explicit(&dcr__dropped, 1, memory_order_relaxed);
            return;
        }
    }
    /* Only this thread stores the count, so a relaxed load reads its own last store. */
    size_t k = atomic_load_explicit(&c->count, memory_order_relaxed);
    c->iv[k] = *iv;
    if (iv->end_ns > atomic_load_explicit(&c->max_end, memory_order_relaxed))
        atomic_store_explicit(&c->max_end, iv->end_ns, memory_order_relaxed);
    atomic_store_explicit(&c->count, k + 1, memory_order_release);
    if (k + 1 == c->cap) {
        /* Full: this thread never touches it again, so it may be freed. */
        dcr__tl_chunk = NULL;
        (void)pthread_setspecific(dcr__exit_key, NULL);
        atomic_store_explicit(&c->retired, true, memory_order_release);
    }
}

static bool dcr__tags_valid(dcr_stage_t stage, dcr_actor_t actor)
{
    return (unsigned)stage < DCR_STAGE_COUNT && (unsigned)actor < DCR_ACTOR_COUNT;
}

dcr_trace_span_t dcr_trace_begin(dcr_stage_t stage, dcr_actor_t actor, int id)
{
    dcr_trace_span_t s = {0, (uint16_t)stage, (uint16_t)actor, id, 0, false};
    if (!atomic_load_explicit(&dcr__enabled, memory_order_relaxed)) return s;
    if (!dcr__tags_valid(stage, actor)) return s;
    s.refit = atomic_load_explicit(&dcr__refit, memory_order_relaxed);
    s.nvtx = dcr__nvtx_push(&s);
    /* 0 means "disabled"; the monotonic clock never reads 0 after boot, but be sure. */
    uint64_t now = dcr_clock_ns();
    s.start_ns = now ? now : 1;
    return s;
}

void dcr_trace_end(dcr_trace_span_t *span)
{
    if (!span || !span->start_ns) return;
    dcr_trace_interval_t iv = {span->start_ns, dcr_clock_ns(), span->refit,
                               span->stage,    span->actor,    span->id};
    if (span->nvtx) dcr__nvtx_pop();
    span->start_ns = 0;
    span->nvtx = false;
    dcr__append(&iv);
}

void dcr_trace_cancel(dcr_trace_span_t *span)
{
    if (!span || !span->start_ns) return;
    if (span->nvtx) dcr__nvtx_pop();
    span->start_ns = 0;
    span->nvtx = false;
}

void dcr_trace_record_refit(dcr_stage_t stage, dcr_actor_t actor, int id, uint32_t refit,
                            uint64_t start_ns, uint64_t end_ns)
{
    if (!atomic_load_explicit(&dcr__enabled, memory_order_relaxed)) return;
    if (!dcr__tags_valid(stage, actor) || end_ns < start_ns) return;
    dcr_trace_interval_t iv = {start_ns, end_ns, refit, (uint16_t)stage, (uint16_t)actor, id};
    dcr__append(&iv);
}

void dcr_trace_record(dcr_stage_t stage, dcr_actor_t actor, int id, uint64_t start_ns,
                      uint64_t end_ns)
{
    dcr_trace_record_refit(stage, actor, id,
                           atomic_load_explicit(&dcr__refit, memory_order_relaxed), start_ns,
                           end_ns);
}

/* ---- snapshot and reset ---- */

static int dcr__interval_cmp(const void *pa, const void *pb)
{
    const dcr_trace_interval_t *a = pa, *b = pb;
#define DCR__CMP(f)                                                                                \
    if (a->f != b->f) return a->f < b->f ? -1 : 1
    DCR__CMP(start_ns);
    DCR__CMP(end_ns);
    DCR__CMP(stage);
    DCR__CMP(actor);
    DCR__CMP(id);
    DCR__CMP(refit);
#undef DCR__CMP
    return 0;
}

/* Copies what every chunk has published that ended at or after since_ns;
 * called with the lock held, so the list cannot change. Counts still grow, so
 * each is loaded once and exactly that many intervals are looked at: a
 * thread's older chunks are full, so the copy holds a prefix of what each
 * thread recorded. A chunk whose latest end is older is skipped whole, which
 * keeps a snapshot of the last refit as cheap late in a long run as early. */
static dcr_status_t dcr__collect(uint64_t since_ns, dcr_trace_interval_t **out_p, size_t *n_p)
{
    dcr_trace_interval_t *all = NULL;
    size_t n = 0, cap = 0;
    for (dcr__trace_chunk_t *c = dcr__chunks; c; c = c->next) {
        size_t k = atomic_load_explicit(&c->count, memory_order_acquire);
        if (!k || atomic_load_explicit(&c->max_end, memory_order_relaxed) < since_ns) continue;
        if (n + k > cap) {
            size_t grow = cap ? 2 * cap : 4 * DCR__TRACE_CHUNK_MAX;
            while (grow < n + k) grow *= 2;
            dcr_trace_interval_t *p = realloc(all, grow * sizeof(*all));
            if (!p) {
                free(all);
                return dcr_error_set(DCR_ENOMEM, "trace snapshot of %zu intervals", grow);
            }
            all = p;
            cap = grow;
        }
        for (size_t i = 0; i < k; i++)
            if (c->iv[i].end_ns >= since_ns) all[n++] = c->iv[i];
    }
    *out_p = all;
    *n_p = n;
    return DCR_OK;
}

dcr_status_t dcr_trace_snapshot_since(uint64_t since_ns, dcr_trace_interval_t **out_p, size_t *n_p)
{
    if (!out_p || !n_p) return dcr_error_set(DCR_EINVAL, "trace snapshot: NULL output");
    dcr_trace_interval_t *all = NULL;
    size_t n = 0;
    pthread_mutex_lock(&dcr__lock);
    dcr_status_t s = dcr__collect(since_ns, &all, &n);
    pthread_mutex_unlock(&dcr__lock);
    if (s != DCR_OK) return s;
    if (n > 1) qsort(all, n, sizeof(*all), dcr__interval_cmp);
    if (!n) {
        free(all);
        all = NULL;
    }
    *out_p = all;
    *n_p = n;
    return DCR_OK;
}

dcr_status_t dcr_trace_snapshot(dcr_trace_interval_t **out_p, size_t *n_p)
{
    return dcr_trace_snapshot_since(0, out_p, n_p);
}

void dcr_trace_discard_before(uint64_t before_ns)
{
    dcr__trace_chunk_t *gone = NULL;
    pthread_mutex_lock(&dcr__lock);
    for (dcr__trace_chunk_t **pc = &dcr__chunks; *pc;) {
        dcr__trace_chunk_t *c = *pc;
        if (atomic_load_explicit(&c->retired, memory_order_acquire) &&
            atomic_load_explicit(&c->max_end, memory_order_relaxed) < before_ns) {
            *pc = c->next;
            c->next = gone;
            gone = c;
        } else {
            pc = &c->next;
        }
    }
    pthread_mutex_unlock(&dcr__lock);
    while (gone) {
        dcr__trace_chunk_t *next = gone->next;
        free(gone);
        gone = next;
    }
}

void dcr_trace_reset(void)
{
    pthread_mutex_lock(&dcr__lock);
    dcr__trace_chunk_t *c = dcr__chunks;
    dcr__chunks = NULL;
    /* Bumped before the chunks go, so no thread that reads the new value can
     * still hold one of them as current. */
    atomic_fetch_add_explicit(&dcr__generation, 1, memory_order_acq_rel);
    atomic_store_explicit(&dcr__dropped, 0, memory_order_relaxed);
    pthread_mutex_unlock(&dcr__lock);
    while (c) {
        dcr__trace_chunk_t *next = c->next;
        free(c);
        c = next;
    }
}

uint64_t dcr_trace_dropped(void)
{
    return atomic_load_explicit(&dcr__dropped, memory_order_relaxed);
}

/* ---- NVTX messages ---- */

int dcr_trace_format_message(char *buf, size_t cap, dcr_stage_t stage, dcr_actor_t actor, int id,
                             uint32_t refit)
{
    return snprintf(buf, cap, "%s %s=%d refit=%u", dcr_stage_name(stage), dcr_actor_name(actor), id,
                    (unsigned)refit);
}

/* Reads a decimal integer in [min, max] at *pp (an optional '-' only when
 * min < 0) and advances *pp past it. Rejects leading '+', spaces and overflow. */
static bool dcr__parse_int(const char **pp, long long min, long long max, long long *out)
{
    const char *p = *pp;
    if (!(*p == '-' && min < 0) && (*p < '0' || *p > '9')) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno == ERANGE || end == p || v < min || v > max) return false;
    *pp = end;
    *out = v;
    return true;
}

/* Copies the word at *pp up to `stop` into word (capacity cap); advances past it. */
static bool dcr__parse_word(const char **pp, char stop, char *word, size_t cap)
{
    const char *end = strchr(*pp, stop);
    if (!end || end == *pp || (size_t)(end - *pp) >= cap) return false;
    memcpy(word, *pp, (size_t)(end - *pp));
    word[end - *pp] = '\0';
    *pp = end + 1;
    return true;
}

dcr_status_t dcr_trace_parse_message(const char *msg, dcr_trace_interval_t *out_p)
{
    if (!msg || !out_p) return dcr_error_set(DCR_EINVAL, "trace message: NULL argument");
    const char *p = msg;
    char stage_name[32], actor_name[32];
    dcr_stage_t stage = 0;
    dcr_actor_t actor = 0;
    long long id, refit;
    if (!dcr__parse_word(&p, ' ', stage_name, sizeof(stage_name)) ||
        dcr_stage_from_name(stage_name, &stage) != DCR_OK)
        return dcr_error_set(DCR_EPARSE, "trace message '%s': expected a stage name first", msg);
    if (!dcr__parse_word(&p, '=', actor_name, sizeof(actor_name)) ||
        dcr_actor_from_name(actor_name, &actor) != DCR_OK)
        return dcr_error_set(DCR_EPARSE,
                             "trace message '%s': expected <actor>=<id> after the stage", msg);
    if (!dcr__parse_int(&p, INT32_MIN, INT32_MAX, &id) || strncmp(p, " refit=", 7))
        return dcr_error_set(DCR_EPARSE, "trace message '%s': expected an int32 id, then ' refit='",
                             msg);
    p += 7;
    if (!dcr__parse_int(&p, 0, UINT32_MAX, &refit) || *p != '\0')
        return dcr_error_set(DCR_EPARSE,
                             "trace message '%s': expected a uint32 refit number at the end", msg);
    out_p->stage = (uint16_t)stage;
    out_p->actor = (uint16_t)actor;
    out_p->id = (int32_t)id;
    out_p->refit = (uint32_t)refit;
    return DCR_OK;
}
