/* Named, accounted engine threads (dcr/thread.h). */
#include "dcr/thread.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Nanoseconds of CPU per role, over the process. */
static atomic_uint_fast64_t dcr__cpu_ns[DCR_THREAD_ROLES];

typedef struct dcr__start {
    void *(*fn)(void *);
    void *arg;
    dcr_thread_role_t role;
    char name[16];
} dcr__start_t;

static void *dcr__trampoline(void *p)
{
    dcr__start_t s = *(dcr__start_t *)p;
    free(p);
    /* Named by itself before it runs fn: a name the creator set after
     * pthread_create could come late. A name is a diagnostic, never a
     * reason to fail. */
    (void)pthread_setname_np(pthread_self(), s.name);
    void *ret = s.fn(s.arg);
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        atomic_fetch_add(&dcr__cpu_ns[s.role],
                         (uint_fast64_t)ts.tv_sec * 1000000000u + (uint_fast64_t)ts.tv_nsec);
    return ret;
}

static int dcr__vstart(pthread_t *t, dcr_thread_role_t role, void *(*fn)(void *), void *arg,
                       const char *fmt, va_list ap)
{
    dcr__start_t *s = malloc(sizeof(*s));
    if (s == NULL) return ENOMEM;
    *s = (dcr__start_t){fn, arg, role < DCR_THREAD_ROLES ? role : DCR_THREAD_TRANSPORT, ""};
    vsnprintf(s->name, sizeof(s->name), fmt, ap);
    int e = pthread_create(t, NULL, dcr__trampoline, s);
    if (e != 0) free(s);
    return e;
}

int dcr_thread_start(pthread_t *t, dcr_thread_role_t role, void *(*fn)(void *), void *arg,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int e = dcr__vstart(t, role, fn, arg, fmt, ap);
    va_end(ap);
    return e;
}

/* The body of a dcr_thread_t: its result, detail included, saved where the
 * joiner reads it once pthread_join has ordered the two. */
static void *dcr__status_main(void *p)
{
    dcr_thread_t *t = p;
    dcr_error_save(&t->err, t->fn(t->arg));
    return NULL;
}

int dcr_thread_run(dcr_thread_t *t, dcr_thread_role_t role, dcr_status_t (*fn)(void *arg),
                   void *arg, const char *fmt, ...)
{
    t->fn = fn;
    t->arg = arg;
    t->err.status = DCR_OK;
    t->err.detail[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int e = dcr__vstart(&t->id, role, dcr__status_main, t, fmt, ap);
    va_end(ap);
    t->started = e == 0;
    return e;
}

dcr_status_t dcr_thread_join(dcr_thread_t *t)
{
    if (!t->started) return DCR_OK;
    pthread_join(t->id, NULL);
    t->started = false;
    return dcr_error_restore(&t->err);
}

void dcr_thread_cpu(double out[DCR_THREAD_ROLES])
{
    for (int r = 0; r < DCR_THREAD_ROLES; r++) out[r] = (double)atomic_load(&dcr__cpu_ns[r]) * 1e-9;
}
