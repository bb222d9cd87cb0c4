/* A payload sink for constructor tests that keeps every payload it is
 * handed (a copy, with its owner and id), thread-safe across owners. */
#ifndef DCR_TESTS_KEEP_SINK_H
#define DCR_TESTS_KEEP_SINK_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/status.h"

typedef struct kept {
    int owner;
    uint64_t id;
    uint8_t *data;
    size_t len;
} kept_t;

typedef struct keep_sink {
    pthread_mutex_t lock;
    kept_t *items;
    size_t n;
} keep_sink_t;

static inline dcr_status_t keep_submit(void *ctx, int owner, uint64_t id, const uint8_t *buf,
                                       size_t len)
{
    keep_sink_t *k = ctx;
    pthread_mutex_lock(&k->lock);
    k->items = realloc(k->items, (k->n + 1) * sizeof(kept_t));
    kept_t *e = &k->items[k->n++];
    e->owner = owner;
    e->id = id;
    e->data = malloc(len);
    memcpy(e->data, buf, len);
    e->len = len;
    pthread_mutex_unlock(&k->lock);
    return DCR_OK;
}

static inline void keep_clear(keep_sink_t *k)
{
    for (size_t i = 0; i < k->n; i++) free(k->items[i].data);
    free(k->items);
    k->items = NULL;
    k->n = 0;
}

/* The payload (owner, id) kept, or NULL. */
static inline const kept_t *keep_find(const keep_sink_t *k, int owner, uint64_t id)
{
    for (size_t i = 0; i < k->n; i++)
        if (k->items[i].owner == owner && k->items[i].id == id) return &k->items[i];
    return NULL;
}

#endif
