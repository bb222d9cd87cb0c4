/* Group communication: the wrappers every caller uses, and the in-process
 * backend, in which each rank's endpoint owns a mailbox that other ranks'
 * sends append to. */
#include "dcr/group.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int dcr_group_rank(const dcr_group_t *g)
{
    return g->ops->rank(g);
}

int dcr_group_size(const dcr_group_t *g)
{
    return g->ops->size(g);
}

dcr_status_t dcr_group_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len)
{
    if (dst < 0 || dst >= g->ops->size(g))
        return dcr_error_set(DCR_EINVAL, "group send to rank %d of %d", dst, g->ops->size(g));
    return g->ops->send(g, dst, tag, buf, len);
}

dcr_status_t dcr_group_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    return g->ops->recv(g, tag, timeout_ms, out_p);
}

void dcr_group_release(dcr_group_t *g, dcr_group_msg_t *msg)
{
    if (msg && msg->data) g->ops->release(g, msg);
}

void dcr_group_destroy(dcr_group_t *g)
{
    if (g) g->ops->destroy(g);
}

/* ---- in-process backend -------------------------------------------------- */

typedef struct inproc_msg {
    struct inproc_msg *next;
    dcr_group_msg_t msg;
} inproc_msg_t;

typedef struct inproc_mailbox {
    pthread_mutex_t lock;
    pthread_cond_t arrived;
    inproc_msg_t *head, *tail;
} inproc_mailbox_t;

typedef struct inproc_shared {
    int size;
    int alive; /* endpoints not yet destroyed, under lock */
    pthread_mutex_t lock;
    inproc_mailbox_t *boxes;
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
    inproc_msg_t *m = malloc(sizeof(*m));
    void *copy = malloc(len ? len : 1);
    if (!m || !copy) {
        free(m);
        free(copy);
        return dcr_error_set(DCR_ENOMEM, "group message of %zu bytes", len);
    }
    if (len) memcpy(copy, buf, len);
    *m = (inproc_msg_t){NULL, {ep->rank, tag, copy, len}};
    inproc_mailbox_t *box = &ep->shared->boxes[dst];
    pthread_mutex_lock(&box->lock);
    if (box->tail)
        box->tail->next = m;
    else
        box->head = m;
    box->tail = m;
    pthread_cond_broadcast(&box->arrived);
    pthread_mutex_unlock(&box->lock);
    return DCR_OK;
}

/* Unlinks and returns the first message with this tag, or NULL. */
static inproc_msg_t *take_tagged(inproc_mailbox_t *box, int tag)
{
    inproc_msg_t *prev = NULL;
    for (inproc_msg_t *m = box->head; m; prev = m, m = m->next) {
        if (m->msg.tag != tag) continue;
        if (prev)
            prev->next = m->next;
        else
            box->head = m->next;
        if (box->tail == m) box->tail = prev;
        return m;
    }
    return NULL;
}

static dcr_status_t inproc_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    inproc_endpoint_t *ep = (inproc_endpoint_t *)g;
    inproc_mailbox_t *box = &ep->shared->boxes[ep->rank];
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&box->lock);
    inproc_msg_t *m;
    while (!(m = take_tagged(box, tag))) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&box->arrived, &box->lock);
        } else if (pthread_cond_timedwait(&box->arrived, &box->lock, &deadline)) {
            pthread_mutex_unlock(&box->lock);
            return dcr_error_set(DCR_ETIMEOUT, "rank %d waited %d ms for a tag-%d message",
                                 ep->rank, timeout_ms, tag);
        }
    }
    pthread_mutex_unlock(&box->lock);
    *out_p = m->msg;
    free(m);
    return DCR_OK;
}

static void inproc_release(dcr_group_t *g, dcr_group_msg_t *msg)
{
    free(msg->data);
    msg->data = NULL;
}

static void free_shared(inproc_shared_t *sh)
{
    for (int r = 0; r < sh->size; r++) {
        inproc_msg_t *m = sh->boxes[r].head;
        while (m) {
            inproc_msg_t *next = m->next;
            free(m->msg.data);
            free(m);
            m = next;
        }
        pthread_mutex_destroy(&sh->boxes[r].lock);
        pthread_cond_destroy(&sh->boxes[r].arrived);
    }
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

static const dcr_group_ops_t inproc_ops = {
    "inproc", inproc_rank, inproc_size, inproc_send, inproc_recv, inproc_release, inproc_destroy,
};

dcr_status_t dcr_group_create_inproc(int size, dcr_group_t **endpoints)
{
    if (size < 1) return dcr_error_set(DCR_EINVAL, "group size %d", size);
    inproc_shared_t *sh = calloc(1, sizeof(*sh));
    if (!sh || !(sh->boxes = calloc((size_t)size, sizeof(inproc_mailbox_t)))) {
        free(sh);
        return dcr_error_set(DCR_ENOMEM, "in-process group of %d ranks", size);
    }
    sh->size = size;
    pthread_mutex_init(&sh->lock, NULL);
    for (int r = 0; r < size; r++) {
        pthread_mutex_init(&sh->boxes[r].lock, NULL);
        pthread_cond_init(&sh->boxes[r].arrived, NULL);
    }
    for (int r = 0; r < size; r++) {
        inproc_endpoint_t *ep = calloc(1, sizeof(*ep));
        if (!ep) {
            for (int k = 0; k < r; k++) free(endpoints[k]);
            free_shared(sh);
            return dcr_error_set(DCR_ENOMEM, "in-process group endpoint");
        }
        *ep = (inproc_endpoint_t){{&inproc_ops}, sh, r};
        endpoints[r] = &ep->base;
    }
    sh->alive = size;
    return DCR_OK;
}
