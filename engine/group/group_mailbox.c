/* The mailbox both built-in backends queue received messages in. */
#include "group-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void dcr__group_mbox_init(dcr__group_mbox_t *box)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    /* Timeouts measure elapsed time, immune to wall-clock steps. */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&box->lock, NULL);
    pthread_cond_init(&box->arrived, &attr);
    pthread_condattr_destroy(&attr);
    box->head = box->tail = NULL;
    box->failed = DCR_OK;
    box->failed_detail[0] = '\0';
}

void dcr__group_mbox_fini(dcr__group_mbox_t *box)
{
    dcr__group_mbox_item_t *m = box->head;
    while (m) {
        dcr__group_mbox_item_t *next = m->next;
        free(m->msg.data);
        free(m);
        m = next;
    }
    box->head = box->tail = NULL;
    pthread_mutex_destroy(&box->lock);
    pthread_cond_destroy(&box->arrived);
}

dcr_status_t dcr__group_mbox_put(dcr__group_mbox_t *box, int src, int tag, void *data, size_t len)
{
    dcr__group_mbox_item_t *m = malloc(sizeof(*m));
    if (!m) return dcr_error_set(DCR_ENOMEM, "group message of %zu bytes from rank %d", len, src);
    *m = (dcr__group_mbox_item_t){NULL, {src, tag, data, len}};
    pthread_mutex_lock(&box->lock);
    if (box->tail)
        box->tail->next = m;
    else
        box->head = m;
    box->tail = m;
    /* Receivers may wait for different tags: wake them all to look. */
    pthread_cond_broadcast(&box->arrived);
    pthread_mutex_unlock(&box->lock);
    return DCR_OK;
}

void dcr__group_mbox_release(dcr_group_t *g, dcr_group_msg_t *msg)
{
    free(msg->data);
    msg->data = NULL;
}

void dcr__group_mbox_fail(dcr__group_mbox_t *box, dcr_status_t status, const char *detail)
{
    pthread_mutex_lock(&box->lock);
    if (box->failed == DCR_OK) {
        box->failed = status;
        snprintf(box->failed_detail, sizeof box->failed_detail, "%s", detail);
    }
    pthread_cond_broadcast(&box->arrived);
    pthread_mutex_unlock(&box->lock);
}

/* Unlinks and returns the first message with this tag, or NULL. */
static dcr__group_mbox_item_t *take_tagged(dcr__group_mbox_t *box, int tag)
{
    dcr__group_mbox_item_t *prev = NULL;
    for (dcr__group_mbox_item_t *m = box->head; m; prev = m, m = m->next) {
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

dcr_status_t dcr__group_mbox_take(dcr__group_mbox_t *box, int rank, int tag, int timeout_ms,
                                  dcr_group_msg_t *out_p)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&box->lock);
    dcr__group_mbox_item_t *m = NULL;
    /* A failed box may have lost any message, so it answers every take
     * with the failure, also when a message of the tag is queued. */
    while (box->failed == DCR_OK && !(m = take_tagged(box, tag))) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&box->arrived, &box->lock);
        } else if (pthread_cond_timedwait(&box->arrived, &box->lock, &deadline)) {
            pthread_mutex_unlock(&box->lock);
            return dcr_error_set(DCR_ETIMEOUT, "group rank %d waited %d ms for a tag-%d message",
                                 rank, timeout_ms, tag);
        }
    }
    if (box->failed != DCR_OK) {
        dcr_status_t st = dcr_error_set(box->failed, "%s", box->failed_detail);
        pthread_mutex_unlock(&box->lock);
        return st;
    }
    pthread_mutex_unlock(&box->lock);
    *out_p = m->msg;
    free(m);
    return DCR_OK;
}
