/* The control-plane registry and wrappers. Every call from the engine passes
 * through one wrapper here, which validates arguments once for all backends
 * and copies results to the caller only when the backend returned DCR_OK, so
 * a failed call (a lost reply that a wrapping fault-injection backend
 * reports, among them) leaves the caller's out-parameters untouched. */
#include "control-internal.h"

#include "core/core-internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"

/* Adding a backend is one line here. */
static const void *const dcr__control_backends[] = {
    &dcr__control_sqlite_ops,
    &dcr__control_etcd_ops,
};
/* The built-in backends, then those registered at run time
 * (dcr_control_register). */
static dcr__registry_t dcr__registry =
    DCR__REGISTRY_INIT("control plane backend", dcr__control_backends,
                       sizeof dcr__control_backends / sizeof dcr__control_backends[0]);

/* The list calls dcr__list serves. */
typedef enum dcr__list_op {
    DCR__LIST_REQUIRED,
    DCR__LIST_ACKS,
    DCR__LIST_MEMBERSHIP,
} dcr__list_op_t;

/* What this process asked of its control planes (dcr_control_counts). */
static atomic_uint_fast64_t dcr__reads, dcr__writes, dcr__waits, dcr__wakeups;

static void dcr__count(atomic_uint_fast64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

void dcr_control_counts(dcr_control_counts_t *out_p)
{
    if (out_p == NULL) return;
    out_p->reads = atomic_load(&dcr__reads);
    out_p->writes = atomic_load(&dcr__writes);
    out_p->waits = atomic_load(&dcr__waits);
    out_p->wakeups = atomic_load(&dcr__wakeups);
}

size_t dcr_control_backend_count(void)
{
    return dcr__registry_count(&dcr__registry);
}

const char *dcr_control_backend_name(size_t i)
{
    const dcr_control_ops_t *ops = dcr__registry_at(&dcr__registry, i);
    return ops != NULL ? ops->hdr.name : NULL;
}

const dcr_control_ops_t *dcr_control_find(const char *name)
{
    return dcr__registry_find(&dcr__registry, name);
}

dcr_status_t dcr_control_register(const dcr_control_ops_t *o)
{
    if (o == NULL || o->hdr.version != DCR_CONTROL_OPS_VERSION || o->hdr.name == NULL ||
        o->hdr.name[0] == '\0' || o->create == NULL || o->destroy == NULL || o->read == NULL ||
        o->cas == NULL || o->prepare == NULL || o->attempt == NULL || o->required == NULL ||
        o->ack == NULL || o->acks == NULL || o->commit == NULL || o->report_put == NULL ||
        o->report_get == NULL || o->membership_put == NULL || o->membership_get == NULL ||
        (o->position == NULL) != (o->wait == NULL)) {
        return dcr_error_set(DCR_EINVAL,
                             "control_register: a backend needs version %d, a name, create, "
                             "destroy, every call slot, and position and wait both or neither",
                             DCR_CONTROL_OPS_VERSION);
    }
    return dcr__registry_add(&dcr__registry, o);
}

bool dcr__control_id_valid(const char *id)
{
    if (id == NULL || id[0] == '\0') return false;
    for (size_t i = 0; i < DCR_CONTROL_ID_MAX; i++) {
        if (id[i] == '\0') return true;
        if (id[i] < 0x21 || id[i] > 0x7e) return false;
    }
    return false;
}

int64_t dcr__control_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool dcr_commit_record_equal(const dcr_commit_record_t *a, const dcr_commit_record_t *b)
{
    return a->version == b->version && a->attempt == b->attempt &&
           a->committed_ns == b->committed_ns &&
           memcmp(a->baseline, b->baseline, DCR_CONTROL_BASELINE_BYTES) == 0;
}

dcr_status_t dcr__control_record_changed(const char *where, const dcr_commit_record_t *now)
{
    return dcr_error_set(DCR_ECONFLICT,
                         "%s: the commit record changed (now version %llu, committed by attempt "
                         "%llu)",
                         where, (unsigned long long)now->version, (unsigned long long)now->attempt);
}

dcr_status_t dcr__control_commit_check(const char *where, const char *coordinator, uint64_t tau,
                                       const dcr_control_attempt_t *a,
                                       const dcr_commit_record_t *expected,
                                       const dcr_commit_record_t *cur, int64_t now)
{
    if (strcmp(a->coordinator, coordinator) != 0)
        return dcr_error_set(DCR_ECONFLICT, "%s: attempt %llu belongs to coordinator %s, not %s",
                             where, (unsigned long long)tau, a->coordinator, coordinator);
    if (!dcr_commit_record_equal(cur, expected)) return dcr__control_record_changed(where, cur);
    if (a->from_version != cur->version)
        return dcr_error_set(DCR_ECONFLICT,
                             "%s: attempt %llu was prepared for version %llu, but version %llu is "
                             "committed",
                             where, (unsigned long long)tau, (unsigned long long)a->from_version,
                             (unsigned long long)cur->version);
    if (now > a->deadline_ns)
        return dcr_error_set(DCR_ETIMEOUT, "%s: attempt %llu missed its commit deadline by %.3f s",
                             where, (unsigned long long)tau, (double)(now - a->deadline_ns) / 1e9);
    return DCR_OK;
}

dcr_status_t dcr_control_create(const char *name, const dcr_control_config_t *cfg,
                                dcr_control_t **out_p)
{
    if (name == NULL || cfg == NULL || out_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "control_create: name, cfg and out_p are required");
    }
    if (cfg->timeout_ms < 0) {
        return dcr_error_set(DCR_EINVAL, "control plane timeout %d ms: expected >= 0",
                             cfg->timeout_ms);
    }
    const dcr_control_ops_t *ops = dcr_control_find(name);
    if (ops == NULL) return dcr__registry_not_found(&dcr__registry, name);
    dcr_control_t *c = NULL;
    DCR_CHECK(ops->create(ops, cfg, &c));
    c->ops = ops;
    *out_p = c;
    return DCR_OK;
}

void dcr_control_destroy(dcr_control_t *c)
{
    if (c == NULL) return;
    c->ops->destroy(c);
}

const char *dcr_control_name(const dcr_control_t *c)
{
    return c->ops->hdr.name;
}

static dcr_status_t dcr__check_handle(const dcr_control_t *c, const char *what)
{
    if (c == NULL) return dcr_error_set(DCR_EINVAL, "control %s: handle is NULL", what);
    return DCR_OK;
}

static dcr_status_t dcr__check_record(const dcr_commit_record_t *r, const char *which)
{
    if (r == NULL) return dcr_error_set(DCR_EINVAL, "control: %s record is NULL", which);
    if (r->version > DCR_CONTROL_VALUE_MAX || r->attempt > DCR_CONTROL_VALUE_MAX ||
        r->committed_ns < 0) {
        return dcr_error_set(DCR_EINVAL,
                             "control: %s record (version %llu, attempt %llu, time %lld) is out of "
                             "range: expected values in [0, 2^63)",
                             which, (unsigned long long)r->version, (unsigned long long)r->attempt,
                             (long long)r->committed_ns);
    }
    return DCR_OK;
}

static dcr_status_t dcr__check_tau(uint64_t tau, const char *what)
{
    if (tau == 0 || tau > DCR_CONTROL_VALUE_MAX) {
        return dcr_error_set(DCR_EINVAL, "control %s: attempt id %llu: expected 1..2^63-1", what,
                             (unsigned long long)tau);
    }
    return DCR_OK;
}

static dcr_status_t dcr__check_id(const char *id, const char *what)
{
    if (!dcr__control_id_valid(id)) {
        return dcr_error_set(DCR_EINVAL,
                             "control %s: coordinator id must be 1..%d printable ASCII characters",
                             what, DCR_CONTROL_ID_MAX - 1);
    }
    return DCR_OK;
}

dcr_status_t dcr_control_read(dcr_control_t *c, dcr_commit_record_t *rec_p)
{
    DCR_CHECK(dcr__check_handle(c, "read"));
    if (rec_p == NULL) return dcr_error_set(DCR_EINVAL, "control read: rec_p is NULL");
    dcr__count(&dcr__reads);
    dcr_commit_record_t rec;
    dcr_status_t st = c->ops->read(c, &rec);
    if (st == DCR_OK) *rec_p = rec;
    return st;
}

dcr_status_t dcr_control_cas(dcr_control_t *c, const dcr_commit_record_t *expected,
                             const dcr_commit_record_t *desired)
{
    DCR_CHECK(dcr__check_handle(c, "cas"));
    DCR_CHECK(dcr__check_record(expected, "expected"));
    DCR_CHECK(dcr__check_record(desired, "desired"));
    dcr__count(&dcr__writes);
    return c->ops->cas(c, expected, desired);
}

static int dcr__cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Required receivers and members must be distinct: a duplicate would make
 * "every required receiver acknowledged" ambiguous between backends. */
static dcr_status_t dcr__check_receivers(const uint32_t *receivers, size_t n, size_t min,
                                         const char *what)
{
    if (n == 0 && min == 0) return DCR_OK;
    if (receivers == NULL || n < min || n > DCR_CONTROL_RECEIVERS_MAX) {
        return dcr_error_set(DCR_EINVAL, "control %s: %zu receivers: expected %zu..%u", what, n,
                             min, DCR_CONTROL_RECEIVERS_MAX);
    }
    uint32_t *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL) return dcr_error_set(DCR_ENOMEM, "control prepare: allocation failed");
    memcpy(sorted, receivers, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, dcr__cmp_u32);
    dcr_status_t st = DCR_OK;
    for (size_t i = 1; i < n && st == DCR_OK; i++) {
        if (sorted[i] == sorted[i - 1]) {
            st = dcr_error_set(DCR_EINVAL, "control %s: receiver %u is listed twice", what,
                               sorted[i]);
        }
    }
    free(sorted);
    return st;
}

dcr_status_t dcr_control_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                 uint64_t *tau_p)
{
    DCR_CHECK(dcr__check_handle(c, "prepare"));
    if (req == NULL || tau_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "control prepare: req and tau_p are required");
    }
    DCR_CHECK(dcr__check_id(req->coordinator, "prepare"));
    if (req->from_version >= DCR_CONTROL_VALUE_MAX || req->deadline_ms == 0) {
        return dcr_error_set(DCR_EINVAL,
                             "control prepare: from_version %llu, deadline %u ms: expected a "
                             "version below 2^63-1 and a deadline > 0",
                             (unsigned long long)req->from_version, req->deadline_ms);
    }
    DCR_CHECK(dcr__check_receivers(req->receivers, req->n_receivers, 1, "prepare"));
    uint64_t tau = 0;
    dcr__count(&dcr__writes);
    dcr_status_t st = c->ops->prepare(c, req, &tau);
    if (st == DCR_OK) *tau_p = tau;
    return st;
}

dcr_status_t dcr_control_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p)
{
    DCR_CHECK(dcr__check_handle(c, "attempt"));
    if (info_p == NULL) return dcr_error_set(DCR_EINVAL, "control attempt: info_p is NULL");
    if (tau != 0) DCR_CHECK(dcr__check_tau(tau, "attempt"));
    dcr_control_attempt_t info;
    dcr__count(&dcr__reads);
    dcr_status_t st = c->ops->attempt(c, tau, &info);
    if (st == DCR_OK) *info_p = info;
    return st;
}

static dcr_status_t dcr__list_call(dcr_control_t *c, dcr__list_op_t op, uint64_t tau, uint32_t *out,
                                   size_t cap, size_t *n_p)
{
    if (op == DCR__LIST_ACKS) return c->ops->acks(c, tau, out, cap, n_p);
    if (op == DCR__LIST_REQUIRED) return c->ops->required(c, tau, out, cap, n_p);
    return c->ops->membership_get(c, out, cap, n_p);
}

/* Shared by required, acks (of attempt tau) and membership_get (tau unused):
 * the backend fills a private buffer so the caller's stays untouched unless
 * the whole call succeeds. */
static dcr_status_t dcr__list(dcr_control_t *c, dcr__list_op_t op, uint64_t tau, uint32_t *out,
                              size_t cap, size_t *n_p)
{
    const char *what = op == DCR__LIST_ACKS       ? "acks"
                       : op == DCR__LIST_REQUIRED ? "required"
                                                  : "membership_get";
    DCR_CHECK(dcr__check_handle(c, what));
    if (op != DCR__LIST_MEMBERSHIP) DCR_CHECK(dcr__check_tau(tau, what));
    if (n_p == NULL || (out == NULL && cap > 0)) {
        return dcr_error_set(DCR_EINVAL, "control %s: n_p is NULL, or out is NULL with cap %zu",
                             what, cap);
    }
    /* No attempt has more receivers than this, so a larger cap buys nothing. */
    size_t tmp_cap = cap < DCR_CONTROL_RECEIVERS_MAX ? cap : DCR_CONTROL_RECEIVERS_MAX;
    uint32_t *tmp = tmp_cap > 0 ? malloc(tmp_cap * sizeof *tmp) : NULL;
    if (tmp_cap > 0 && tmp == NULL) {
        return dcr_error_set(DCR_ENOMEM, "control %s: allocation failed", what);
    }
    size_t n = 0;
    dcr__count(&dcr__reads);
    dcr_status_t st = dcr__list_call(c, op, tau, tmp, tmp_cap, &n);
    if (st == DCR_OK) {
        if (tmp_cap > 0) memcpy(out, tmp, (n < tmp_cap ? n : tmp_cap) * sizeof *tmp);
        *n_p = n;
    }
    free(tmp);
    return st;
}

dcr_status_t dcr_control_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                  size_t *n_p)
{
    return dcr__list(c, DCR__LIST_REQUIRED, tau, out, cap, n_p);
}

dcr_status_t dcr_control_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                              size_t *n_p)
{
    return dcr__list(c, DCR__LIST_ACKS, tau, out, cap, n_p);
}

dcr_status_t dcr_control_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver)
{
    DCR_CHECK(dcr__check_handle(c, "ack"));
    DCR_CHECK(dcr__check_tau(tau, "ack"));
    dcr__count(&dcr__writes);
    return c->ops->ack(c, tau, receiver);
}

/* The arguments of an ack_many (what names the call). */
static dcr_status_t dcr__check_ack_many(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                        size_t n, const char *what)
{
    DCR_CHECK(dcr__check_handle(c, what));
    DCR_CHECK(dcr__check_tau(tau, what));
    if (receivers == NULL || n == 0 || n > DCR_CONTROL_ACK_MANY_MAX) {
        return dcr_error_set(DCR_EINVAL, "control %s: 1 to %d receivers, got %zu", what,
                             DCR_CONTROL_ACK_MANY_MAX, receivers ? n : 0);
    }
    return DCR_OK;
}

/* The arguments of a report_put (what names the call). */
static dcr_status_t dcr__check_report(uint32_t id, const void *data, size_t len, const char *what)
{
    if ((data == NULL && len > 0) || len > DCR_CONTROL_REPORT_MAX) {
        return dcr_error_set(DCR_EINVAL,
                             "control %s: receiver %u report of %zu bytes: expected data "
                             "and at most %u bytes",
                             what, id, len, DCR_CONTROL_REPORT_MAX);
    }
    return DCR_OK;
}

dcr_status_t dcr_control_ack_many(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                  size_t n)
{
    DCR_CHECK(dcr__check_ack_many(c, tau, receivers, n, "ack_many"));
    if (c->ops->ack_many == NULL) {
        for (size_t i = 0; i < n; i++) DCR_CHECK(dcr_control_ack(c, tau, receivers[i]));
        return DCR_OK;
    }
    dcr__count(&dcr__writes);
    return c->ops->ack_many(c, tau, receivers, n);
}

dcr_status_t dcr_control_ack_report(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                    size_t n, uint32_t id, const void *data, size_t len)
{
    DCR_CHECK(dcr__check_ack_many(c, tau, receivers, n, "ack_report"));
    DCR_CHECK(dcr__check_report(id, data, len, "ack_report"));
    if (c->ops->ack_report == NULL) {
        /* In this order: a report only after its acknowledgments. */
        DCR_CHECK(dcr_control_ack_many(c, tau, receivers, n));
        return dcr_control_report_put(c, id, data, len);
    }
    dcr__count(&dcr__writes);
    return c->ops->ack_report(c, tau, receivers, n, id, data, len);
}

dcr_status_t dcr_control_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                const dcr_commit_record_t *expected,
                                const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                dcr_commit_record_t *rec_p)
{
    DCR_CHECK(dcr__check_handle(c, "commit"));
    DCR_CHECK(dcr__check_id(coordinator, "commit"));
    DCR_CHECK(dcr__check_tau(tau, "commit"));
    DCR_CHECK(dcr__check_record(expected, "expected"));
    if (baseline == NULL || rec_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "control commit: baseline and rec_p are required");
    }
    if (expected->version >= DCR_CONTROL_VALUE_MAX) {
        return dcr_error_set(DCR_EINVAL, "control commit: version %llu cannot be incremented",
                             (unsigned long long)expected->version);
    }
    dcr_commit_record_t rec;
    dcr__count(&dcr__writes);
    dcr_status_t st = c->ops->commit(c, coordinator, tau, expected, baseline, &rec);
    if (st == DCR_OK) *rec_p = rec;
    return st;
}

dcr_status_t dcr_control_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                    size_t len)
{
    DCR_CHECK(dcr__check_handle(c, "report_put"));
    DCR_CHECK(dcr__check_report(receiver, data, len, "report_put"));
    dcr__count(&dcr__writes);
    return c->ops->report_put(c, receiver, data, len);
}

dcr_status_t dcr_control_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                    size_t *len_p)
{
    DCR_CHECK(dcr__check_handle(c, "report_get"));
    if (data_p == NULL || len_p == NULL) {
        return dcr_error_set(DCR_EINVAL, "control report_get: data_p and len_p are required");
    }
    void *data = NULL;
    size_t len = 0;
    dcr__count(&dcr__reads);
    dcr_status_t st = c->ops->report_get(c, receiver, &data, &len);
    if (st != DCR_OK) {
        free(data);
        return st;
    }
    *data_p = data;
    *len_p = len;
    return DCR_OK;
}

dcr_status_t dcr_control_membership_put(dcr_control_t *c, const char *coordinator,
                                        const uint32_t *members, size_t n)
{
    DCR_CHECK(dcr__check_handle(c, "membership_put"));
    DCR_CHECK(dcr__check_id(coordinator, "membership_put"));
    DCR_CHECK(dcr__check_receivers(members, n, 0, "membership_put"));
    dcr__count(&dcr__writes);
    return c->ops->membership_put(c, coordinator, members, n);
}

dcr_status_t dcr_control_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p)
{
    return dcr__list(c, DCR__LIST_MEMBERSHIP, 0, out, cap, n_p);
}

uint64_t dcr_control_position(dcr_control_t *c)
{
    if (c == NULL || c->ops->position == NULL) return 0;
    return c->ops->position(c);
}

dcr_status_t dcr_control_wait(dcr_control_t *c, uint64_t since, int timeout_ms)
{
    DCR_CHECK(dcr__check_handle(c, "wait"));
    if (timeout_ms < 1 || timeout_ms > 600000)
        return dcr_error_set(DCR_EINVAL, "control wait: timeout %d ms: expected 1..600000",
                             timeout_ms);
    dcr__count(&dcr__waits);
    dcr_status_t st;
    if (c->ops->wait == NULL || since == 0) {
        /* Nothing to wait on: one nap, after which the caller reads again. */
        int ms = timeout_ms < DCR_CONTROL_POLL_MS ? timeout_ms : DCR_CONTROL_POLL_MS;
        dcr_clock_nap_ns((long)ms * 1000000L);
        st = ms < timeout_ms ? DCR_OK : DCR_ETIMEOUT;
    } else {
        st = c->ops->wait(c, since, timeout_ms);
    }
    if (st == DCR_OK) dcr__count(&dcr__wakeups);
    return st;
}
