/* The request gates of the receiver slots: a closed flag, a reader count,
 * a dirty mark and a dead mark per slot under one lock, fenced by the latest announced
 * attempt. One lock is enough: gates change a few times per transition and
 * readers only hold it to count themselves in and out. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "dcr/coord.h"

typedef struct gate_slot {
    bool closed;
    bool dirty;
    bool dead; /* the bound receiver died: closed until another is bound */
    int readers;
    dcr_receiver_t *receiver;
} gate_slot_t;

struct dcr_gate {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a gate opened or the last reader of a slot left */
    uint64_t latest;        /* the latest announced attempt */
    int nslots;
    gate_slot_t *slot;
};

dcr_status_t dcr_gate_create(int slots, dcr_gate_t **out_p)
{
    if (slots < 1) return dcr_error_set(DCR_EINVAL, "request gate: %d slots, expected >= 1", slots);
    dcr_gate_t *g = calloc(1, sizeof(*g));
    if (g) g->slot = calloc((size_t)slots, sizeof(*g->slot));
    if (!g || !g->slot) {
        free(g);
        return dcr_error_set(DCR_ENOMEM, "request gate of %d slots", slots);
    }
    g->nslots = slots;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->changed, NULL);
    *out_p = g;
    return DCR_OK;
}

void dcr_gate_destroy(dcr_gate_t *g)
{
    if (!g) return;
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->lock);
    free(g->slot);
    free(g);
}

int dcr_gate_slots(const dcr_gate_t *g)
{
    return g->nslots;
}

static bool in_range(const dcr_gate_t *g, int slot)
{
    return slot >= 0 && slot < g->nslots;
}

/* The absolute time timeout_ms from now on the condition variable's clock. */
static struct timespec deadline_in(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

dcr_receiver_t *dcr_gate_enter(dcr_gate_t *g, int slot, int timeout_ms)
{
    if (!in_range(g, slot)) return NULL;
    struct timespec until = deadline_in(timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&g->lock);
    gate_slot_t *s = &g->slot[slot];
    int rc = 0;
    while (s->closed && timeout_ms != 0 && rc != ETIMEDOUT)
        rc = timeout_ms < 0 ? pthread_cond_wait(&g->changed, &g->lock)
                            : pthread_cond_timedwait(&g->changed, &g->lock, &until);
    dcr_receiver_t *r = s->closed ? NULL : s->receiver;
    if (r) s->readers++;
    pthread_mutex_unlock(&g->lock);
    return r;
}

void dcr_gate_leave(dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return;
    pthread_mutex_lock(&g->lock);
    if (g->slot[slot].readers > 0 && --g->slot[slot].readers == 0)
        pthread_cond_broadcast(&g->changed);
    pthread_mutex_unlock(&g->lock);
}

void dcr_gate_announce(dcr_gate_t *g, uint64_t tau)
{
    pthread_mutex_lock(&g->lock);
    if (tau > g->latest) g->latest = tau;
    pthread_mutex_unlock(&g->lock);
}

/* Operations of a replaced attempt are ignored; tau 0 is a membership
 * change between attempts. Called with the lock held. */
static bool current(const dcr_gate_t *g, uint64_t tau)
{
    return tau == 0 || tau >= g->latest;
}

bool dcr_gate_close(dcr_gate_t *g, int slot, uint64_t tau)
{
    if (!in_range(g, slot)) return false;
    pthread_mutex_lock(&g->lock);
    bool ok = current(g, tau);
    if (ok) {
        g->slot[slot].closed = true;
        /* In-flight requests finish before anything is written. */
        while (g->slot[slot].readers > 0) pthread_cond_wait(&g->changed, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

bool dcr_gate_open(dcr_gate_t *g, int slot, uint64_t tau, bool verified)
{
    if (!in_range(g, slot)) return false;
    pthread_mutex_lock(&g->lock);
    gate_slot_t *s = &g->slot[slot];
    if (current(g, tau)) {
        if (verified) s->dirty = false;
        if (!s->dirty && !s->dead && s->closed) {
            s->closed = false;
            pthread_cond_broadcast(&g->changed);
        }
    }
    bool open = !s->closed;
    pthread_mutex_unlock(&g->lock);
    return open;
}

void dcr_gate_mark_dirty(dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return;
    pthread_mutex_lock(&g->lock);
    g->slot[slot].dirty = true;
    pthread_mutex_unlock(&g->lock);
}

bool dcr_gate_dirty(const dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return false;
    pthread_mutex_lock((pthread_mutex_t *)&g->lock);
    bool dirty = g->slot[slot].dirty;
    pthread_mutex_unlock((pthread_mutex_t *)&g->lock);
    return dirty;
}

bool dcr_gate_is_open(const dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return false;
    pthread_mutex_lock((pthread_mutex_t *)&g->lock);
    bool open = !g->slot[slot].closed;
    pthread_mutex_unlock((pthread_mutex_t *)&g->lock);
    return open;
}

void dcr_gate_bind(dcr_gate_t *g, int slot, dcr_receiver_t *r)
{
    if (!in_range(g, slot)) return;
    pthread_mutex_lock(&g->lock);
    /* Another receiver (a restored one) is alive; the dead one rebound (a
     * new coordinator binding its parties) stays dead. */
    if (g->slot[slot].receiver != r) g->slot[slot].dead = false;
    g->slot[slot].receiver = r;
    pthread_mutex_unlock(&g->lock);
}

void dcr_gate_kill(dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return;
    pthread_mutex_lock(&g->lock);
    g->slot[slot].dead = true;
    g->slot[slot].closed = true;
    /* A dead receiver serves nothing: the requests inside finish first. */
    while (g->slot[slot].readers > 0) pthread_cond_wait(&g->changed, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

bool dcr_gate_dead(const dcr_gate_t *g, int slot)
{
    if (!in_range(g, slot)) return false;
    pthread_mutex_lock((pthread_mutex_t *)&g->lock);
    bool dead = g->slot[slot].dead;
    pthread_mutex_unlock((pthread_mutex_t *)&g->lock);
    return dead;
}
