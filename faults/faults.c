/* The injector: armed faults, matched against the events the faulty
 * backends (faulty_*.c) see; the binding through which a faulty backend
 * finds its injector when it is created; the kills it carries to the
 * rollout side's gates, and the harness's watcher. */
#define _POSIX_C_SOURCE 200809L
#include "faults/faults.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/log.h"
#include "faults/faulty_internal.h"

#define FAULTS_MAX 64

struct dcr_faults {
    pthread_mutex_t lock;
    dcr_rng_t rng;
    dcr_fault_t armed[FAULTS_MAX];
    int seen[FAULTS_MAX]; /* matching events so far */
    int narmed;
    int64_t counts[DCR_FAULT_KIND_COUNT];
    int busy_left, busy_ms, down_left;
    bool crashed;     /* a coordinator crash fired and was not taken yet */
    dcr_gate_t *gate; /* where receiver kills act (dcr_faults_set_rollout) */
    int per_node;     /* receivers per rollout node */
    dcr_faults_watch_fn watch;
    void *watch_ctx;
};

static const char *const kind_names[DCR_FAULT_KIND_COUNT] = {
    "drop",         "duplicate",       "reorder",       "delay",
    "corrupt",      "truncate_object", "remove_object", "relay_link",
    "control_busy", "control_down",    "commit_reply",  "kill_delivery",
    "kill_apply",   "kill_acked",      "coord_crash",   "owner_crash",
    "group_drop",   "group_delay",     "link_down",     "net_loss",
    "net_reorder",  "partition"};

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
    dcr_faults_unbind(f);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---- binding ------------------------------------------------------------------ */

/* The injector faulty backends take at create: a process-wide slot, so that
 * a backend created by name deep inside another (the object store inside
 * the objstore transport) finds it too; guarded, and read only at create. */
static pthread_mutex_t bound_lock = PTHREAD_MUTEX_INITIALIZER;
static dcr_faults_t *bound;

dcr_status_t dcr_faults_register(void)
{
    DCR_CHECK(dcr__faulty_objstore_register());
    DCR_CHECK(dcr__faulty_transport_register());
    DCR_CHECK(dcr__faulty_group_register());
    return dcr__faulty_control_register();
}

dcr_status_t dcr__faulty_register_family(dcr__faulty_family_t *fam)
{
    dcr_status_t st = DCR_OK;
    pthread_mutex_lock(&fam->lock);
    const char *name = NULL;
    for (size_t i = 0; st == DCR_OK && (name = fam->backend_name(i)) != NULL; i++) {
        if (!strncmp(name, DCR__FAULTY_PREFIX, DCR__FAULTY_PREFIX_LEN)) continue;
        char want[64];
        snprintf(want, sizeof(want), "%s%s", DCR__FAULTY_PREFIX, name);
        if (fam->registered(want)) continue;
        if (fam->count == DCR__FAULTY_MAX) {
            st = dcr_error_set(DCR_EINVAL, "faults: more than %d %s to wrap", DCR__FAULTY_MAX,
                               fam->what);
            break;
        }
        char *slot = fam->names[fam->count];
        snprintf(slot, sizeof(fam->names[0]), "%s", want);
        st = fam->add(fam->count, slot, name);
        if (st == DCR_OK) fam->count++;
    }
    pthread_mutex_unlock(&fam->lock);
    return st;
}

dcr_status_t dcr_faults_bind(dcr_faults_t *f)
{
    if (!f) return dcr_error_set(DCR_EINVAL, "faults_bind: no injector");
    DCR_CHECK(dcr_faults_register());
    pthread_mutex_lock(&bound_lock);
    bool taken = bound != NULL && bound != f;
    if (!taken) bound = f;
    pthread_mutex_unlock(&bound_lock);
    if (taken)
        return dcr_error_set(DCR_EINVAL, "faults_bind: another injector is bound; unbind it first");
    return DCR_OK;
}

void dcr_faults_unbind(dcr_faults_t *f)
{
    pthread_mutex_lock(&bound_lock);
    if (bound == f) bound = NULL;
    pthread_mutex_unlock(&bound_lock);
}

dcr_faults_t *dcr__faults_bound(void)
{
    pthread_mutex_lock(&bound_lock);
    dcr_faults_t *f = bound;
    pthread_mutex_unlock(&bound_lock);
    return f;
}

void dcr__faults_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool dcr__faults_take(dcr_faults_t *f, dcr_fault_kind_t kind, int target, dcr_fault_t *out)
{
    if (!f) return false;
    bool hit = false;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < f->narmed && !hit; i++) {
        dcr_fault_t *a = &f->armed[i];
        if (a->kind != kind || (a->target >= 0 && a->target != target)) continue;
        if (f->seen[i]++ != a->nth) continue;
        *out = *a;
        f->armed[i] = f->armed[--f->narmed]; /* spent */
        f->seen[i] = f->seen[f->narmed];
        hit = true;
    }
    pthread_mutex_unlock(&f->lock);
    return hit;
}

void dcr__faults_happened(dcr_faults_t *f, dcr_fault_kind_t kind)
{
    if (!f) return;
    pthread_mutex_lock(&f->lock);
    f->counts[kind]++;
    pthread_mutex_unlock(&f->lock);
}

bool dcr__faults_fire(dcr_faults_t *f, dcr_fault_kind_t kind, int target, dcr_fault_t *out)
{
    if (!dcr__faults_take(f, kind, target, out)) return false;
    dcr__faults_happened(f, kind);
    return true;
}

/* ---- control plane ------------------------------------------------------------ */

dcr_status_t dcr__faults_control_call(dcr_faults_t *f)
{
    if (!f) return DCR_OK;
    DCR_CHECK(dcr__faults_dead(f));
    dcr_fault_t hit;
    if (dcr__faults_fire(f, DCR_FAULT_CONTROL_DOWN, -1, &hit)) {
        DCR_LOG_WARN("fault control_down: the control plane refuses the next %d calls", hit.count);
        pthread_mutex_lock(&f->lock);
        f->down_left = hit.count;
        pthread_mutex_unlock(&f->lock);
    } else if (dcr__faults_fire(f, DCR_FAULT_CONTROL_BUSY, -1, &hit)) {
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
    if (busy) dcr__faults_sleep_ms(busy);
    return DCR_OK;
}

/* ---- coordinator ------------------------------------------------------------- */

const char *dcr_coord_step_name(dcr_coord_step_t step)
{
    static const char *const names[DCR_COORD_STEP_COUNT] = {"prepare", "stream", "ack", "commit",
                                                            "committed"};
    return step >= 0 && step < DCR_COORD_STEP_COUNT ? names[step] : "?";
}

dcr_status_t dcr__faults_dead(dcr_faults_t *f)
{
    if (!f) return DCR_OK;
    pthread_mutex_lock(&f->lock);
    bool dead = f->crashed;
    pthread_mutex_unlock(&f->lock);
    if (!dead) return DCR_OK;
    return dcr_error_set(DCR_ECONFLICT, "the coordinator has crashed (fault): its control-plane "
                                        "connection is gone");
}

dcr_status_t dcr__faults_crash(dcr_faults_t *f, dcr_coord_step_t step)
{
    dcr_fault_t hit;
    if (!dcr__faults_fire(f, DCR_FAULT_COORD_CRASH, (int)step, &hit)) return DCR_OK;
    pthread_mutex_lock(&f->lock);
    f->crashed = true;
    pthread_mutex_unlock(&f->lock);
    DCR_LOG_WARN("fault coord_crash: the coordinator crashes at step %s",
                 dcr_coord_step_name(step));
    return dcr__faults_dead(f);
}

/* ---- the rollout side ------------------------------------------------------------ */

void dcr_faults_set_rollout(dcr_faults_t *f, dcr_gate_t *gate, int receivers_per_node)
{
    pthread_mutex_lock(&f->lock);
    f->gate = receivers_per_node > 0 ? gate : NULL;
    f->per_node = receivers_per_node;
    pthread_mutex_unlock(&f->lock);
}

void dcr__faults_kill(dcr_faults_t *f, dcr_fault_kind_t kind, int receiver)
{
    if (!f) return;
    pthread_mutex_lock(&f->lock);
    dcr_gate_t *gate = f->gate;
    pthread_mutex_unlock(&f->lock);
    dcr_fault_t hit;
    if (!gate || dcr_gate_dead(gate, receiver) || !dcr__faults_fire(f, kind, receiver, &hit))
        return;
    DCR_LOG_WARN("fault %s: receiver %d killed", dcr_fault_kind_name(kind), receiver);
    dcr_gate_kill(gate, receiver);
}

void dcr__faults_kill_on_node(dcr_faults_t *f, dcr_fault_kind_t kind, int node)
{
    if (!f) return;
    pthread_mutex_lock(&f->lock);
    int per = f->gate ? f->per_node : 0;
    pthread_mutex_unlock(&f->lock);
    for (int k = 0; k < per; k++) dcr__faults_kill(f, kind, node * per + k);
}

void dcr_faults_watch(dcr_faults_t *f, dcr_faults_watch_fn fn, void *ctx)
{
    pthread_mutex_lock(&f->lock);
    f->watch = fn;
    f->watch_ctx = ctx;
    pthread_mutex_unlock(&f->lock);
}

void dcr__faults_event(dcr_faults_t *f, dcr_faults_event_t ev, int who, uint64_t tau)
{
    if (!f) return;
    pthread_mutex_lock(&f->lock);
    dcr_faults_watch_fn fn = f->watch;
    void *ctx = f->watch_ctx;
    pthread_mutex_unlock(&f->lock);
    if (fn) fn(ctx, ev, who, tau);
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
    /* Group faults act on the owners' group backend, not on a refit's
     * transport: the in-process constructor does not take one by name. */
    if (kind == DCR_FAULT_GROUP_DROP || kind == DCR_FAULT_GROUP_DELAY) return false;
    /* Network faults act on a testbed's kernel links, never in one process. */
    if (kind >= DCR_FAULT_LINK_DOWN) return false;
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
    /* Drawn among the kinds before the group ones (which never apply to a
     * transport), so that a seed draws the same faults as before they came. */
    do kind = (dcr_fault_kind_t)dcr_rng_below(rng, DCR_FAULT_GROUP_DROP);
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
