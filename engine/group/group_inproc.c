/* The in-process group backend: every rank is a thread of this process and
 * owns a mailbox that other ranks' sends append a copy to, so a send never
 * waits for its receiver (memory is the only back-pressure). */
#include "group-internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct inproc_shared {
    int size;
    int alive; /* endpoints not yet destroyed, under lock */
    pthread_mutex_t lock;
    dcr__group_mbox_t *boxes; /* one per rank */
} inproc_shared_t;

typedef struct inproc_endpoint {
    dcr_group_t base;
    inproc_shared_t *shared;
    int rank;
} inproc_endpoint_t;

static int inproc_rank(const dcr_group_t *g)
{
    return ((const inproc_endpoint_t *)g)->rank;
}

static int inproc_size(const dcr_group_t *g)
{
    return ((const inproc_endpoint_t *)g)->shared->size;
}

static dcr_status_t inproc_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len)
{
    inproc_endpoint_t *ep = (inproc_endpoint_t *)g;
    void *copy = malloc(len ? len : 1); /* non-NULL data marks an unreleased message */
    if (!copy) return dcr_error_set(DCR_ENOMEM, "group message of %zu bytes", len);
    if (len) memcpy(copy, buf, len);
    dcr_status_t st = dcr__group_mbox_put(&ep->shared->boxes[dst], ep->rank, tag, copy, len);
    if (st != DCR_OK) free(copy);
    return st;
}

static dcr_status_t inproc_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    inproc_endpoint_t *ep = (inproc_endpoint_t *)g;
    return dcr__group_mbox_take(&ep->shared->boxes[ep->rank], ep->rank, tag, timeout_ms, out_p);
}

static void free_shared(inproc_shared_t *sh)
{
    for (int r = 0; r < sh->size; r++) dcr__group_mbox_fini(&sh->boxes[r]);
    pthread_mutex_destroy(&sh->lock);
    free(sh->boxes);
    free(sh);
}

static void inproc_destroy(dcr_group_t *g)
{
    inproc_endpoint_t *ep = (inproc_endpoint_t *)g;
    inproc_shared_t *sh = ep->shared;
    pthread_mutex_lock(&sh->lock);
    int last = --sh->alive == 0;
    pthread_mutex_unlock(&sh->lock);
    free(ep);
    if (last) free_shared(sh);
}

static dcr_status_t inproc_create(const dcr_group_ops_t *self, int size, dcr_group_t **endpoints,
                                  int *count_p)
{
    (void)self;
    inproc_shared_t *sh = calloc(1, sizeof(*sh));
    if (!sh || !(sh->boxes = calloc((size_t)size, sizeof(dcr__group_mbox_t)))) {
        free(sh);
        return dcr_error_set(DCR_ENOMEM, "in-process group of %d ranks", size);
    }
    sh->size = size;
    pthread_mutex_init(&sh->lock, NULL);
    for (int r = 0; r < size; r++) dcr__group_mbox_init(&sh->boxes[r]);
    for (int r = 0; r < size; r++) {
        inproc_endpoint_t *ep = calloc(1, sizeof(*ep));
        if (!ep) {
            for (int k = 0; k < r; k++) free(endpoints[k]);
            free_shared(sh);
            return dcr_error_set(DCR_ENOMEM, "in-process group endpoint");
        }
        *ep = (inproc_endpoint_t){{&dcr__group_inproc_ops}, sh, r};
        endpoints[r] = &ep->base;
    }
    sh->alive = size;
    *count_p = size;
    return DCR_OK;
}

const dcr_group_ops_t dcr__group_inproc_ops = {
    .hdr = {.version = DCR_GROUP_OPS_VERSION, .name = "inproc"},
    .props = {.cross_process = false,
              .ordered_per_pair = true,
              .max_tag = INT_MAX,
              .max_message = SIZE_MAX},
    .create = inproc_create,
    .rank = inproc_rank,
    .size = inproc_size,
    .send = inproc_send,
    .recv = inproc_recv,
    .release = dcr__group_mbox_release,
    .destroy = inproc_destroy,
};
