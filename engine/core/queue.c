/* Bounded MPMC pointer queue: one mutex, a circular buffer, and one condition
 * variable per direction so a push wakes consumers only and a pop wakes
 * producers only. Waits use CLOCK_MONOTONIC deadlines, so a wall-clock jump
 * neither cuts a timeout short nor stretches it. */
#include "dcr/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct dcr_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_full;
    pthread_cond_t not_empty;
    void **items;
    size_t capacity;
    size_t head;  /* index of the oldest item */
    size_t count; /* items held */
    bool closed;
};

static dcr_status_t dcr__queue_init_sync(dcr_queue_t *q)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return DCR_ENOMEM;
    /* Deadlines are computed on CLOCK_MONOTONIC, so the condvars must use it too. */
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0) goto undo_attr;
    if (pthread_mutex_init(&q->mu, NULL) != 0) goto undo_attr;
    if (pthread_cond_init(&q->not_full, &attr) != 0) goto undo_mutex;
    if (pthread_cond_init(&q->not_empty, &attr) != 0) goto undo_not_full;
    pthread_condattr_destroy(&attr);
    return DCR_OK;
undo_not_full:
    pthread_cond_destroy(&q->not_full);
undo_mutex:
    pthread_mutex_destroy(&q->mu);
undo_attr:
    pthread_condattr_destroy(&attr);
    return DCR_ENOMEM;
}

dcr_status_t dcr_queue_create(size_t capacity, dcr_queue_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "queue_create: out_p is NULL");
    if (capacity == 0 || capacity > SIZE_MAX / sizeof(void *)) {
        return dcr_error_set(DCR_EINVAL, "queue capacity %zu is not usable", capacity);
    }
    dcr_queue_t *q = calloc(1, sizeof *q);
    if (q == NULL) return dcr_error_set(DCR_ENOMEM, "queue allocation failed");
    q->items = calloc(capacity, sizeof *q->items);
    if (q->items == NULL) goto undo_queue;
    if (dcr__queue_init_sync(q) != DCR_OK) goto undo_items;
    q->capacity = capacity;
    *out_p = q;
    return DCR_OK;
undo_items:
    free(q->items);
undo_queue:
    free(q);
    return dcr_error_set(DCR_ENOMEM, "queue of capacity %zu: allocation failed", capacity);
}

void dcr_queue_destroy(dcr_queue_t *q)
{
    if (q == NULL) return;
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    pthread_mutex_destroy(&q->mu);
    free(q->items);
    free(q);
}

/* Absolute CLOCK_MONOTONIC deadline timeout_ms from now. */
static struct timespec dcr__deadline(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits on cond (mutex held) until woken or the deadline passes; returns
 * false once the deadline has passed. Callers recheck their condition either
 * way, since wakeups may be spurious and a timeout may race a signal. */
static bool dcr__wait(pthread_cond_t *cond, pthread_mutex_t *mu, int timeout_ms,
                      const struct timespec *deadline)
{
    if (timeout_ms < 0) {
        pthread_cond_wait(cond, mu);
        return true;
    }
    return pthread_cond_timedwait(cond, mu, deadline) != ETIMEDOUT;
}

dcr_status_t dcr_queue_push(dcr_queue_t *q, void *item, int timeout_ms)
{
    struct timespec deadline = dcr__deadline(timeout_ms < 0 ? 0 : timeout_ms);
    bool in_time = true;
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->count == q->capacity && in_time && timeout_ms != 0) {
        in_time = dcr__wait(&q->not_full, &q->mu, timeout_ms, &deadline);
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return dcr_error_set(DCR_ECLOSED, "push to a closed queue");
    }
    if (q->count == q->capacity) {
        pthread_mutex_unlock(&q->mu);
        return dcr_error_set(DCR_ETIMEOUT, "queue full (capacity %zu) for %d ms", q->capacity,
                             timeout_ms);
    }
    q->items[(q->head + q->count) % q->capacity] = item;
    q->count++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return DCR_OK;
}

dcr_status_t dcr_queue_pop(dcr_queue_t *q, int timeout_ms, void **out_p)
{
    struct timespec deadline = dcr__deadline(timeout_ms < 0 ? 0 : timeout_ms);
    bool in_time = true;
    pthread_mutex_lock(&q->mu);
    while (!q->closed && q->count == 0 && in_time && timeout_ms != 0) {
        in_time = dcr__wait(&q->not_empty, &q->mu, timeout_ms, &deadline);
    }
    if (q->count == 0) {
        bool closed = q->closed;
        pthread_mutex_unlock(&q->mu);
        if (closed) return dcr_error_set(DCR_ECLOSED, "queue closed and drained");
        return dcr_error_set(DCR_ETIMEOUT, "queue empty for %d ms", timeout_ms);
    }
    void *item = q->items[q->head];
    q->items[q->head] = NULL;
    q->head = (q->head + 1) % q->capacity;
    q->count--;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->mu);
    if (out_p != NULL) *out_p = item;
    return DCR_OK;
}

void dcr_queue_close(dcr_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->not_full);
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
}

size_t dcr_queue_size(dcr_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}
