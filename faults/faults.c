/* Injectors: the transport interceptor, the control-plane interceptor and
 * the coordinator hooks, matching armed faults against the events they see. */
#define _POSIX_C_SOURCE 200809L
#include "faults/faults.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dcr/log.h"

#define FAULTS_MAX 64

struct dcr_faults {
    pthread_mutex_t lock;
    dcr_rng_t rng;
    dcr_fault_t armed[FAULTS_MAX];
    int seen[FAULTS_MAX]; /* matching events so far */
    int narmed;
    int64_t counts[DCR_FAULT_KIND_COUNT];
    dcr_transport_t *t;
    dcr_control_t *ctl;
    char dir[4096];
    uint64_t tau; /* the attempt the transport opened last */
    int busy_left, busy_ms, down_left;
    bool crashed;
};

static const char *const kind_names[DCR_FAULT_KIND_COUNT] = {
    "drop",         "duplicate",       "reorder",       "delay",
    "corrupt",      "truncate_object", "remove_object", "relay_link",
    "control_busy", "control_down",    "commit_reply",  "kill_delivery",
    "kill_apply",   "kill_acked",      "coord_crash",   "owner_crash"};

const char *dcr_fault_kind_name(dcr_fault_kind_t kind)
{
    return kind >= 0 && kind < DCR_FAULT_KIND_COUNT ? kind_names[kind] : "?";
}

dcr_status_t dcr_faults_create(uint64_t seed, dcr_faults_t **out_p)
{
    dcr_faults_t *f = calloc(1, sizeof(*f));
    if (!f) return dcr_error_set(DCR_ENOMEM, "fault injector");
    pthread_mutex_init(&f->lock, NULL);
    dcr_rng_seed(&f->rng, seed);
    *out_p = f;
    return DCR_OK;
}

void dcr_faults_destroy(dcr_faults_t *f)
{
    if (!f) return;
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Consumes one matching event of `kind` at `target`; true (and the fault in
 * *out) when an armed fault fires on it. */
static bool fire(dcr_faults_t *f, dcr_fault_kind_t kind, int target, dcr_fault_t *out)
{
    bool hit = false;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < f->narmed && !hit; i++) {
        dcr_fault_t *a = &f->armed[i];
        if (a->kind != kind || (a->target >= 0 && a->target != target)) continue;
        if (f->seen[i]++ != a->nth) continue;
        *out = *a;
        f->counts[kind]++;
        f->armed[i] = f->armed[--f->narmed]; /* spent */
        f->seen[i] = f->seen[f->narmed];
        hit = true;
    }
    pthread_mutex_unlock(&f->lock);
    return hit;
}

/* ---- transport -------------------------------------------------------------- */

/* File faults act on a payload the owner stored earlier in this attempt. */
static dcr_status_t object_fault(dcr_faults_t *f, int owner, uint64_t id)
{
    if (!f->dir[0] || id == 0) return DCR_OK;
    char path[4300];
    snprintf(path, sizeof(path), "%s/attempt-%" PRIu64 "/payload-%d-%" PRIu64 ".dcrp", f->dir,
             f->tau, owner, id - 1);
    if (access(path, F_OK) != 0) return DCR_OK;
    dcr_fault_t hit;
    if (fire(f, DCR_FAULT_TRUNCATE_OBJECT, owner, &hit)) {
        FILE *fp = fopen(path, "rb");
        long len = 0;
        if (fp && fseek(fp, 0, SEEK_END) == 0) len = ftell(fp);
        if (fp) fclose(fp);
        int rc = truncate(path, len / 2);
        DCR_LOG_WARN("fault truncate_object: %s cut to %ld bytes (%s)", path, len / 2,
                     rc ? "failed" : "done");
    } else if (fire(f, DCR_FAULT_REMOVE_OBJECT, owner, &hit)) {
        int rc = remove(path);
        DCR_LOG_WARN("fault remove_object: %s removed (%s)", path, rc ? "failed" : "done");
    }
    return DCR_OK;
}

static dcr_status_t send_fault(dcr_faults_t *f, int owner, uint64_t id, const uint8_t *buf,
                               size_t len)
{
    dcr_fault_t hit;
    if (fire(f, DCR_FAULT_OWNER_CRASH, owner, &hit)) {
        DCR_LOG_WARN("fault owner_crash: owner %d crashed before uploading payload %" PRIu64, owner,
                     id);
        return dcr_error_set(DCR_ETRANSPORT,
                             "owner %d crashed before uploading payload %" PRIu64 " (fault)", owner,
                             id);
    }
    if (fire(f, DCR_FAULT_DROP, owner, &hit)) {
        DCR_LOG_WARN("fault drop: payload %" PRIu64 " of owner %d lost", id, owner);
        return dcr_error_set(DCR_ETRANSPORT,
                             "payload %" PRIu64 " of owner %d lost in transit (fault)", id, owner);
    }
    if (fire(f, DCR_FAULT_RELAY_LINK, owner, &hit)) {
        DCR_LOG_WARN("fault relay_link: owner %d's connection to the relay root dropped", owner);
        return dcr_error_set(DCR_ETRANSPORT, "owner %d: relay connection lost (fault)", owner);
    }
    if (len > 0 && fire(f, DCR_FAULT_CORRUPT, owner, &hit)) {
        /* The bytes are the sink's own buffer, writable behind the const
         * view; the flipped last byte belongs to the compressed body, which
         * the digest covers, as a faulty link would change it. */
        ((uint8_t *)buf)[len - 1] ^= 0x5a;
        DCR_LOG_WARN("fault corrupt: payload %" PRIu64 " of owner %d, last body byte flipped", id,
                     owner);
    }
    if (fire(f, DCR_FAULT_REORDER, owner, &hit)) {
        DCR_LOG_WARN("fault reorder: payload %" PRIu64 " of owner %d held back %d ms", id, owner,
                     hit.ms);
        sleep_ms(hit.ms);
    }
    return object_fault(f, owner, id);
}

static dcr_status_t transport_intercept(void *ctx, const char *op, int endpoint, uint64_t id,
                                        const uint8_t *buf, size_t len)
{
    dcr_faults_t *f = ctx;
    if (!strcmp(op, "open_attempt")) {
        pthread_mutex_lock(&f->lock);
        f->tau = id;
        pthread_mutex_unlock(&f->lock);
        return DCR_OK;
    }
    if (!strcmp(op, "send")) return send_fault(f, endpoint, id, buf, len);
    dcr_fault_t hit;
    if (!strcmp(op, "recv") && fire(f, DCR_FAULT_DELAY, endpoint, &hit)) {
        DCR_LOG_WARN("fault delay: rollout node %d stalls %d ms", endpoint, hit.ms);
        sleep_ms(hit.ms);
    }
    return DCR_OK;
}

/* ---- control plane ------------------------------------------------------------ */

static dcr_status_t control_before(void *arg, dcr_control_t *c, dcr_control_op_t op)
{
    (void)c;
    (void)op;
    dcr_faults_t *f = arg;
    dcr_fault_t hit;
    if (fire(f, DCR_FAULT_CONTROL_DOWN, -1, &hit)) {
        DCR_LOG_WARN("fault control_down: the control plane refuses the next %d calls", hit.count);
        pthread_mutex_lock(&f->lock);
        f->down_left = hit.count;
        pthread_mutex_unlock(&f->lock);
    } else if (fire(f, DCR_FAULT_CONTROL_BUSY, -1, &hit)) {
        DCR_LOG_WARN("fault control_busy: the next %d calls answer %d ms late", hit.count, hit.ms);
        pthread_mutex_lock(&f->lock);
        f->busy_left = hit.count;
        f->busy_ms = hit.ms;
        pthread_mutex_unlock(&f->lock);
    }
    pthread_mutex_lock(&f->lock);
    bool down = f->down_left > 0;
    int busy = f->busy_left > 0 ? f->busy_ms : 0;
    if (down)
        f->down_left--;
    else if (busy)
        f->busy_left--;
    pthread_mutex_unlock(&f->lock);
    if (down) return dcr_error_set(DCR_ECONTROL, "control plane unavailable (fault)");
    if (busy) sleep_ms(busy);
    return DCR_OK;
}

static dcr_status_t control_after(void *arg, dcr_control_t *c, dcr_control_op_t op,
                                  dcr_status_t status)
{
    (void)c;
    dcr_faults_t *f = arg;
    dcr_fault_t hit;
    if (op == DCR_CONTROL_OP_COMMIT && status == DCR_OK &&
        fire(f, DCR_FAULT_COMMIT_REPLY, -1, &hit)) {
        DCR_LOG_WARN("fault commit_reply: the joint commit took effect, its reply is lost");
        return dcr_error_set(DCR_ECONTROL, "commit reply lost (fault)");
    }
    return status;
}

void dcr_faults_attach(dcr_faults_t *f, dcr_transport_t *t, const char *objstore_dir,
                       dcr_control_t *ctl)
{
    f->t = t;
    f->ctl = ctl;
    snprintf(f->dir, sizeof(f->dir), "%s", objstore_dir ? objstore_dir : "");
    if (t) dcr_transport_set_interceptor(t, transport_intercept, f);
    dcr_control_interceptor_t icpt = {control_before, control_after, f};
    if (ctl) dcr_control_set_interceptor(ctl, &icpt);
}

void dcr_faults_detach(dcr_faults_t *f)
{
    if (f->t) dcr_transport_set_interceptor(f->t, NULL, NULL);
    if (f->ctl) dcr_control_set_interceptor(f->ctl, NULL);
    f->t = NULL;
    f->ctl = NULL;
}

/* ---- coordinator ------------------------------------------------------------- */

static bool hook_alive(void *ctx, int receiver, dcr_coord_point_t point, uint64_t tau)
{
    dcr_faults_t *f = ctx;
    dcr_fault_t hit;
    if (!fire(f, (dcr_fault_kind_t)(DCR_FAULT_KILL_DELIVERY + (int)point), receiver, &hit))
        return true;
    DCR_LOG_WARN("fault %s: receiver %d killed in attempt %" PRIu64, dcr_fault_kind_name(hit.kind),
                 receiver, tau);
    return false;
}

static dcr_status_t hook_step(void *ctx, dcr_coord_step_t step, uint64_t tau)
{
    dcr_faults_t *f = ctx;
    dcr_fault_t hit;
    if (!fire(f, DCR_FAULT_COORD_CRASH, (int)step, &hit)) return DCR_OK;
    pthread_mutex_lock(&f->lock);
    f->crashed = true;
    pthread_mutex_unlock(&f->lock);
    DCR_LOG_WARN("fault coord_crash: the coordinator crashes at step %s of attempt %" PRIu64,
                 dcr_coord_step_name(step), tau);
    return dcr_error_set(DCR_EFATAL, "coordinator crashed at step %s (fault)",
                         dcr_coord_step_name(step));
}

static bool hook_redeliver(void *ctx, int node, uint64_t tau)
{
    dcr_faults_t *f = ctx;
    dcr_fault_t hit;
    if (!fire(f, DCR_FAULT_DUPLICATE, node, &hit)) return false;
    DCR_LOG_WARN("fault duplicate: rollout node %d receives a payload of attempt %" PRIu64 " twice",
                 node, tau);
    return true;
}

dcr_coord_hooks_t dcr_faults_coord_hooks(dcr_faults_t *f)
{
    dcr_coord_hooks_t h = {hook_alive, hook_step, hook_redeliver, f};
    return h;
}

/* ---- plans ---------------------------------------------------------------------- */

dcr_status_t dcr_faults_arm(dcr_faults_t *f, const dcr_fault_t *fault)
{
    if (fault->kind < 0 || fault->kind >= DCR_FAULT_KIND_COUNT)
        return dcr_error_set(DCR_EINVAL, "fault kind %d is not one of the %d kinds",
                             (int)fault->kind, DCR_FAULT_KIND_COUNT);
    pthread_mutex_lock(&f->lock);
    bool full = f->narmed == FAULTS_MAX;
    if (!full) {
        f->armed[f->narmed] = *fault;
        if (fault->kind == DCR_FAULT_COORD_CRASH) f->armed[f->narmed].target = (int)fault->step;
        f->seen[f->narmed++] = 0;
    }
    pthread_mutex_unlock(&f->lock);
    if (full) return dcr_error_set(DCR_EINVAL, "more than %d faults armed at once", FAULTS_MAX);
    DCR_LOG_INFO("faults: armed %s (target %d, event %d, %d ms, %d calls, step %s)",
                 dcr_fault_kind_name(fault->kind),
                 fault->kind == DCR_FAULT_COORD_CRASH ? (int)fault->step : fault->target,
                 fault->nth, fault->ms, fault->count, dcr_coord_step_name(fault->step));
    return DCR_OK;
}

void dcr_faults_disarm(dcr_faults_t *f)
{
    pthread_mutex_lock(&f->lock);
    f->narmed = 0;
    f->down_left = f->busy_left = 0;
    pthread_mutex_unlock(&f->lock);
}

bool dcr_fault_kind_applies(dcr_fault_kind_t kind, const char *transport)
{
    bool objstore = !strcmp(transport, "objstore");
    if (kind == DCR_FAULT_TRUNCATE_OBJECT || kind == DCR_FAULT_REMOVE_OBJECT) return objstore;
    if (kind == DCR_FAULT_RELAY_LINK) return !objstore;
    return kind >= 0 && kind < DCR_FAULT_KIND_COUNT;
}

static int pick_alive(dcr_rng_t *rng, int receivers, const bool *alive)
{
    int live = 0;
    for (int i = 0; i < receivers; i++) live += !alive || alive[i];
    if (live == 0) return -1;
    int k = (int)dcr_rng_below(rng, (uint64_t)live);
    for (int i = 0; i < receivers; i++)
        if ((!alive || alive[i]) && k-- == 0) return i;
    return -1;
}

dcr_fault_t dcr_faults_draw(dcr_faults_t *f, const char *transport, int owners, int nodes,
                            int receivers, const bool *alive)
{
    dcr_rng_t *rng = &f->rng;
    dcr_fault_kind_t kind;
    do kind = (dcr_fault_kind_t)dcr_rng_below(rng, DCR_FAULT_KIND_COUNT);
    while (!dcr_fault_kind_applies(kind, transport));
    dcr_fault_t x = {kind, -1, 0, 0, 0, DCR_COORD_STEP_PREPARE};
    switch (kind) {
    case DCR_FAULT_DUPLICATE:
    case DCR_FAULT_DELAY:
        x.target = (int)dcr_rng_below(rng, (uint64_t)nodes);
        x.nth = (int)dcr_rng_below(rng, 3);
        x.ms = 20 + (int)dcr_rng_below(rng, 150);
        break;
    case DCR_FAULT_CONTROL_BUSY:
    case DCR_FAULT_CONTROL_DOWN:
        x.nth = (int)dcr_rng_below(rng, 6);
        x.count = 1 + (int)dcr_rng_below(rng, 3);
        x.ms = 10 + (int)dcr_rng_below(rng, 90);
        break;
    case DCR_FAULT_COMMIT_REPLY:
        break;
    case DCR_FAULT_KILL_DELIVERY:
    case DCR_FAULT_KILL_APPLY:
    case DCR_FAULT_KILL_ACKED:
        x.target = pick_alive(rng, receivers, alive);
        x.nth = kind == DCR_FAULT_KILL_ACKED ? 0 : (int)dcr_rng_below(rng, 3);
        break;
    case DCR_FAULT_COORD_CRASH:
        x.step = (dcr_coord_step_t)dcr_rng_below(rng, DCR_COORD_STEP_COUNT);
        break;
    default: /* payload faults on one owner's sends */
        x.target = (int)dcr_rng_below(rng, (uint64_t)owners);
        x.nth = (int)dcr_rng_below(rng, 3);
        x.ms = 20 + (int)dcr_rng_below(rng, 80);
        break;
    }
    return x;
}

dcr_rng_t *dcr_faults_rng(dcr_faults_t *f)
{
    return &f->rng;
}

void dcr_faults_counts(const dcr_faults_t *f, int64_t *counts)
{
    memcpy(counts, f->counts, sizeof(f->counts));
}

bool dcr_faults_take_crash(dcr_faults_t *f)
{
    pthread_mutex_lock(&f->lock);
    bool crashed = f->crashed;
    f->crashed = false;
    pthread_mutex_unlock(&f->lock);
    return crashed;
}
