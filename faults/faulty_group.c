/* "faulty:<name>" group backends: each wraps the group backend <name>
 * (created by name with the same size) and injects the group faults of the
 * injector bound when it was created into the messages owners exchange
 * (residual parts, flags): a message lost on its way (group_drop: the
 * sender's send fails, as a lost connection would tell it) or held back
 * (group_delay: the send returns `ms` late). Matching is by the sender's
 * rank. Every endpoint of one create keeps that injector for its life. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/group.h"
#include "dcr/log.h"
#include "faults/faulty_internal.h"

typedef struct faulty_group {
    dcr_group_t pub; /* first: the wrappers' header */
    dcr_group_t *inner;
    dcr_faults_t *f; /* NULL: every call passes through */
} faulty_group_t;

static faulty_group_t *fg(const dcr_group_t *g)
{
    return (faulty_group_t *)g;
}

/* One wrapper per endpoint the wrapped backend (the header's parent) made;
 * on failure every endpoint (wrapped or not yet) is destroyed. */
static dcr_status_t faulty_create(const dcr_group_ops_t *self, int size, dcr_group_t **endpoints,
                                  int *count_p)
{
    const dcr_group_ops_t *parent = self->hdr.parent;
    int count = 0;
    dcr_status_t st = dcr_group_create(parent->hdr.name, size, endpoints, &count);
    if (st != DCR_OK) {
        dcr_error_prefix("%s: ", self->hdr.name);
        return st;
    }
    dcr_faults_t *f = dcr__faults_bound();
    int wrapped = 0;
    for (; wrapped < count; wrapped++) {
        faulty_group_t *x = calloc(1, sizeof(*x));
        if (!x) break;
        *x = (faulty_group_t){{self}, endpoints[wrapped], f};
        endpoints[wrapped] = &x->pub;
    }
    if (wrapped < count) {
        for (int i = 0; i < count; i++) {
            if (i < wrapped) {
                faulty_group_t *x = fg(endpoints[i]);
                endpoints[i] = x->inner;
                free(x);
            }
            dcr_group_destroy(endpoints[i]);
        }
        return dcr_error_set(DCR_ENOMEM, "%s: %d endpoints", self->hdr.name, count);
    }
    *count_p = count;
    return DCR_OK;
}

static int faulty_rank(const dcr_group_t *g)
{
    return dcr_group_rank(fg(g)->inner);
}

static int faulty_size(const dcr_group_t *g)
{
    return dcr_group_size(fg(g)->inner);
}

static dcr_status_t faulty_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len)
{
    faulty_group_t *x = fg(g);
    int src = dcr_group_rank(x->inner);
    dcr_fault_t hit;
    if (dcr__faults_fire(x->f, DCR_FAULT_GROUP_DROP, src, &hit)) {
        DCR_LOG_WARN("fault group_drop: owner %d's tag-%d message to owner %d lost", src, tag, dst);
        return dcr_error_set(DCR_ETRANSPORT,
                             "group message of owner %d to owner %d (tag %d) lost (fault)", src,
                             dst, tag);
    }
    if (dcr__faults_fire(x->f, DCR_FAULT_GROUP_DELAY, src, &hit)) {
        DCR_LOG_WARN("fault group_delay: owner %d's tag-%d message to owner %d held %d ms", src,
                     tag, dst, hit.ms);
        dcr__faults_sleep_ms(hit.ms);
    }
    return dcr_group_send(x->inner, dst, tag, buf, len);
}

static dcr_status_t faulty_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    return dcr_group_recv(fg(g)->inner, tag, timeout_ms, out_p);
}

static void faulty_release(dcr_group_t *g, dcr_group_msg_t *msg)
{
    dcr_group_release(fg(g)->inner, msg);
}

static void faulty_destroy(dcr_group_t *g)
{
    dcr_group_destroy(fg(g)->inner);
    free(g);
}

/* One table per wrapped backend; the registry borrows them for the process. */
static dcr_group_ops_t tables[DCR__FAULTY_MAX];

static dcr_status_t add_table(int k, const char *name, const char *parent)
{
    const dcr_group_ops_t *p = dcr_group_find(parent);
    tables[k] = (dcr_group_ops_t){
        .hdr = {.version = DCR_GROUP_OPS_VERSION, .name = name, .parent = p},
        .props = p->props, /* what the wrapped backend guarantees */
        .create = faulty_create,
        .rank = faulty_rank,
        .size = faulty_size,
        .send = faulty_send,
        .recv = faulty_recv,
        .release = faulty_release,
        .destroy = faulty_destroy,
    };
    return dcr_group_register(&tables[k]);
}

static bool registered(const char *name)
{
    return dcr_group_find(name) != NULL;
}

static dcr__faulty_family_t family = {"group backends",
                                      dcr_group_backend_name,
                                      registered,
                                      add_table,
                                      PTHREAD_MUTEX_INITIALIZER,
                                      {{0}},
                                      0};

dcr_status_t dcr__faulty_group_register(void)
{
    return dcr__faulty_register_family(&family);
}
