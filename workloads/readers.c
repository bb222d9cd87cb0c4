/* Reader threads for request emulation. */
#define _XOPEN_SOURCE 700
#include "workloads/readers.h"

#include <blake2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a reader waits for one closed gate before it tries the next
 * slot: long enough not to spin, short enough to notice a stop at once. */
#define READER_WAIT_MS 20

void dcr_receiver_digest(const dcr_receiver_t *r, uint8_t out[DCR_READ_DIGEST_BYTES])
{
    const dcr_params_t *ps = dcr_receiver_params(r);
    blake2b_state st;
    blake2b_init(&st, DCR_READ_DIGEST_BYTES);
    for (size_t i = 0; i < dcr_params_count(ps); i++) {
        const dcr_param_t *p = dcr_params_at(ps, i);
        blake2b_update(&st, p->storage->data, p->storage->bytes);
    }
    blake2b_final(&st, out, DCR_READ_DIGEST_BYTES);
}

struct dcr_readers {
    dcr_readers_config_t cfg; /* cfg.slots points at slots below */
    int *slots;
    pthread_t *threads;
    int started;
    atomic_int stop;
};

static void read_one(dcr_readers_t *p, int slot)
{
    const dcr_readers_config_t *c = &p->cfg;
    uint64_t token = c->begin ? c->begin(c->ctx, slot) : 0;
    dcr_receiver_t *r = dcr_gate_enter(c->gate, slot, READER_WAIT_MS);
    if (!r) return;
    uint8_t d[DCR_READ_DIGEST_BYTES];
    dcr_receiver_digest(r, d);
    dcr_gate_leave(c->gate, slot);
    if (c->seen) c->seen(c->ctx, slot, token, d);
}

static void *reader_main(void *arg)
{
    dcr_readers_t *p = arg;
    int k = 0;
    while (!atomic_load(&p->stop)) {
        read_one(p, p->slots[k]);
        k = (k + 1) % p->cfg.nslots;
        if (p->cfg.pause_us > 0) usleep((useconds_t)p->cfg.pause_us);
    }
    return NULL;
}

dcr_status_t dcr_readers_start(const dcr_readers_config_t *cfg, dcr_readers_t **out_p)
{
    if (!cfg->gate || cfg->threads < 1 || (cfg->slots && cfg->nslots < 1))
        return dcr_error_set(DCR_EINVAL, "readers: %d threads over %d slots of gate %p",
                             cfg->threads, cfg->nslots, (void *)cfg->gate);
    dcr_readers_t *p = calloc(1, sizeof(*p));
    if (!p) return dcr_error_set(DCR_ENOMEM, "readers");
    atomic_init(&p->stop, 0);
    p->cfg = *cfg;
    p->cfg.nslots = cfg->slots ? cfg->nslots : dcr_gate_slots(cfg->gate);
    p->slots = malloc((size_t)p->cfg.nslots * sizeof(int));
    p->threads = calloc((size_t)cfg->threads, sizeof(pthread_t));
    if (!p->slots || !p->threads) {
        dcr_readers_stop(p);
        return dcr_error_set(DCR_ENOMEM, "%d readers", cfg->threads);
    }
    for (int i = 0; i < p->cfg.nslots; i++) p->slots[i] = cfg->slots ? cfg->slots[i] : i;
    p->cfg.slots = p->slots;
    for (; p->started < cfg->threads; p->started++)
        if (pthread_create(&p->threads[p->started], NULL, reader_main, p)) {
            int failed = p->started;
            dcr_readers_stop(p); /* joins the ones already running */
            return dcr_error_set(DCR_ENOMEM, "reader thread %d of %d", failed, cfg->threads);
        }
    *out_p = p;
    return DCR_OK;
}

void dcr_readers_stop(dcr_readers_t *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->slots);
    free(p);
}
