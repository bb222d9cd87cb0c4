/* Reader threads for request emulation. */
#define _XOPEN_SOURCE 700
#include "workloads/harness/readers.h"

#include <blake2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/log.h"

/* How long a reader waits for one closed gate before it tries the next
 * slot: long enough not to spin, short enough to notice a stop at once. */
#define READER_WAIT_MS 20

void dcr_receiver_digest(const dcr_receiver_t *r, uint8_t out[DCR_READ_DIGEST_BYTES])
{
    /* Through the per-parameter digests, which read resident bytes where
     * they live (down through copies from a device the host cannot
     * address). */
    dcr_param_digests_t d = {0};
    dcr_status_t st = dcr_receiver_digests(r, &d);
    blake2b_state bs;
    blake2b_init(&bs, DCR_READ_DIGEST_BYTES);
    if (st == DCR_OK) {
        blake2b_update(&bs, (const uint8_t *)d.digests, d.count * sizeof(*d.digests));
    } else {
        /* No storage read: a digest no read of a receiver can have, so a
         * check against P^v or P^{v+1} counts it as a mismatch. */
        static const char unread[] = "dcr: resident storage could not be read";
        DCR_LOG_ERROR("request digest: %s", dcr_error_line(st));
        blake2b_update(&bs, (const uint8_t *)unread, sizeof unread);
    }
    blake2b_final(&bs, out, DCR_READ_DIGEST_BYTES);
    dcr_param_digests_free(&d);
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
