/* "faulty:<name>" control planes: each wraps the control plane <name>
 * (opened by name at the same address) and injects the control faults of
 * the injector bound when it was opened: every call may find the control
 * plane down (refused) or busy (answered late), and a joint commit that
 * took effect may lose its reply (commit_reply). The coordinator's protocol
 * steps are its calls here, so its crashes fire here too (prepare, the
 * acknowledgments or their read-back, the commit; dcr_coord_step_t), after
 * which every call is
 * refused until the crash is taken; and a receiver acknowledged through the
 * control plane may die right after (kill_acked). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "faults/faulty_internal.h"

typedef struct faulty_control {
    dcr_control_t pub; /* first: the handle header */
    dcr_control_t *inner;
    dcr_faults_t *f; /* NULL: every call passes through */
} faulty_control_t;

static faulty_control_t *fc(dcr_control_t *c)
{
    return (faulty_control_t *)c;
}

/* Every call but destroy first meets the injector's control faults. */
#define ENTER(c)                                                                                   \
    faulty_control_t *x = fc(c);                                                                   \
    DCR_CHECK(dcr__faults_control_call(x->f))

/* Opens the control plane the header's parent names, at the same address. */
static dcr_status_t faulty_create(const dcr_control_ops_t *self, const dcr_control_config_t *cfg,
                                  dcr_control_t **out_p)
{
    const dcr_control_ops_t *parent = self->hdr.parent;
    faulty_control_t *x = calloc(1, sizeof(*x));
    if (!x) return dcr_error_set(DCR_ENOMEM, "control plane %s", self->hdr.name);
    x->f = dcr__faults_bound();
    dcr_status_t st = dcr_control_create(parent->hdr.name, cfg, &x->inner);
    if (st != DCR_OK) {
        free(x);
        dcr_error_prefix("%s: ", self->hdr.name);
        return st;
    }
    *out_p = &x->pub;
    return DCR_OK;
}

static void faulty_destroy(dcr_control_t *c)
{
    faulty_control_t *x = fc(c);
    if (!x) return;
    dcr_control_destroy(x->inner);
    free(x);
}

static dcr_status_t faulty_read(dcr_control_t *c, dcr_commit_record_t *rec_p)
{
    ENTER(c);
    return dcr_control_read(x->inner, rec_p);
}

static dcr_status_t faulty_cas(dcr_control_t *c, const dcr_commit_record_t *expected,
                               const dcr_commit_record_t *desired)
{
    ENTER(c);
    return dcr_control_cas(x->inner, expected, desired);
}

static dcr_status_t faulty_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                   uint64_t *tau_p)
{
    faulty_control_t *y = fc(c);
    DCR_CHECK(dcr__faults_dead(y->f));
    DCR_CHECK(dcr__faults_crash(y->f, DCR_COORD_STEP_PREPARE));
    ENTER(c);
    DCR_CHECK(dcr_control_prepare(x->inner, req, tau_p));
    /* Prepared: a crash now leaves attempt tau with nothing sent. */
    return dcr__faults_crash(x->f, DCR_COORD_STEP_STREAM);
}

static dcr_status_t faulty_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p)
{
    ENTER(c);
    return dcr_control_attempt(x->inner, tau, info_p);
}

static dcr_status_t faulty_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                    size_t *n_p)
{
    ENTER(c);
    return dcr_control_required(x->inner, tau, out, cap, n_p);
}

/* An acknowledgment comes after every payload was applied: the step at
 * which a coordinator crash "ack" fires; the receiver may die right after
 * its acknowledgment took effect. */
static dcr_status_t faulty_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver)
{
    faulty_control_t *y = fc(c);
    DCR_CHECK(dcr__faults_dead(y->f));
    DCR_CHECK(dcr__faults_crash(y->f, DCR_COORD_STEP_ACK));
    ENTER(c);
    DCR_CHECK(dcr_control_ack(x->inner, tau, receiver));
    dcr__faults_kill(x->f, DCR_FAULT_KILL_ACKED, (int)receiver);
    return DCR_OK;
}

/* Acknowledgments with a report in one write: as faulty_ack, for each
 * receiver after the write took effect. */
static dcr_status_t faulty_ack_report(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                      size_t n, uint32_t id, const void *data, size_t len)
{
    faulty_control_t *y = fc(c);
    DCR_CHECK(dcr__faults_dead(y->f));
    DCR_CHECK(dcr__faults_crash(y->f, DCR_COORD_STEP_ACK));
    ENTER(c);
    DCR_CHECK(dcr_control_ack_report(x->inner, tau, receivers, n, id, data, len));
    for (size_t i = 0; i < n; i++) dcr__faults_kill(x->f, DCR_FAULT_KILL_ACKED, (int)receivers[i]);
    return DCR_OK;
}

/* A coordinator whose rollout nodes are processes reads their
 * acknowledgments back once every node reported DONE: its step "ack" in
 * that setting, and what the watcher sees of it. */
static dcr_status_t faulty_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                size_t *n_p)
{
    faulty_control_t *y = fc(c);
    DCR_CHECK(dcr__faults_dead(y->f));
    DCR_CHECK(dcr__faults_crash(y->f, DCR_COORD_STEP_ACK));
    ENTER(c);
    return dcr_control_acks(x->inner, tau, out, cap, n_p);
}

/* A commit that took effect may lose its reply: the caller sees an error
 * (and, through the wrapper, its out-parameter untouched) and must read the
 * record to learn that it committed. A coordinator may crash before its
 * commit or after it took effect. */
static dcr_status_t faulty_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                  const dcr_commit_record_t *expected,
                                  const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                  dcr_commit_record_t *rec_p)
{
    faulty_control_t *y = fc(c);
    DCR_CHECK(dcr__faults_dead(y->f));
    dcr__faults_event(y->f, DCR_FAULTS_EVENT_COMMIT, -1, tau);
    DCR_CHECK(dcr__faults_crash(y->f, DCR_COORD_STEP_COMMIT));
    ENTER(c);
    DCR_CHECK(dcr_control_commit(x->inner, coordinator, tau, expected, baseline, rec_p));
    DCR_CHECK(dcr__faults_crash(x->f, DCR_COORD_STEP_COMMITTED));
    dcr_fault_t hit;
    if (dcr__faults_fire(x->f, DCR_FAULT_COMMIT_REPLY, -1, &hit)) {
        DCR_LOG_WARN("fault commit_reply: the joint commit took effect, its reply is lost");
        return dcr_error_set(DCR_ECONTROL, "commit reply lost (fault)");
    }
    return DCR_OK;
}

static dcr_status_t faulty_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                      size_t len)
{
    ENTER(c);
    return dcr_control_report_put(x->inner, receiver, data, len);
}

static dcr_status_t faulty_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                      size_t *len_p)
{
    ENTER(c);
    return dcr_control_report_get(x->inner, receiver, data_p, len_p);
}

static dcr_status_t faulty_membership_put(dcr_control_t *c, const char *coordinator,
                                          const uint32_t *members, size_t n)
{
    ENTER(c);
    return dcr_control_membership_put(x->inner, coordinator, members, n);
}

static dcr_status_t faulty_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p)
{
    ENTER(c);
    return dcr_control_membership_get(x->inner, out, cap, n_p);
}

/* Waits pass through unfaulted: a wait only says when to read again, and
 * the read that follows meets the faults. */
static uint64_t faulty_position(dcr_control_t *c)
{
    return dcr_control_position(fc(c)->inner);
}

static dcr_status_t faulty_wait(dcr_control_t *c, uint64_t since, int timeout_ms)
{
    return dcr_control_wait(fc(c)->inner, since, timeout_ms);
}

/* One table per wrapped backend; the registry borrows them for the process. */
static dcr_control_ops_t tables[DCR__FAULTY_MAX];

static dcr_status_t add_table(int k, const char *name, const char *parent)
{
    const dcr_control_ops_t *p = dcr_control_find(parent);
    tables[k] = (dcr_control_ops_t){
        .hdr = {.version = DCR_CONTROL_OPS_VERSION, .name = name, .parent = p},
        .props = p->props, /* what the wrapped backend guarantees */
        .create = faulty_create,
        .destroy = faulty_destroy,
        .read = faulty_read,
        .cas = faulty_cas,
        .prepare = faulty_prepare,
        .attempt = faulty_attempt,
        .required = faulty_required,
        .ack = faulty_ack,
        .ack_report = faulty_ack_report,
        .acks = faulty_acks,
        .commit = faulty_commit,
        .report_put = faulty_report_put,
        .report_get = faulty_report_get,
        .membership_put = faulty_membership_put,
        .membership_get = faulty_membership_get,
        .position = faulty_position,
        .wait = faulty_wait,
    };
    return dcr_control_register(&tables[k]);
}

static bool registered(const char *name)
{
    return dcr_control_find(name) != NULL;
}

static dcr__faulty_family_t family = {"control planes",
                                      dcr_control_backend_name,
                                      registered,
                                      add_table,
                                      PTHREAD_MUTEX_INITIALIZER,
                                      {{0}},
                                      0};

dcr_status_t dcr__faulty_control_register(void)
{
    return dcr__faulty_register_family(&family);
}
