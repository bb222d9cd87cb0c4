/* The restorer of a rollout node's receivers: classification, resident
 * files, the oracle check, anchors (deploy/restorer.h); replay and repair
 * are engine/recovery's. */
#define _XOPEN_SOURCE 700
#include "deploy/restorer.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dcr/recovery.h"
#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/loader.h"
#include "dcr/log.h"
#include "dcr/resident.h"
#include "deploy/roles.h"

#define HELD_NONE DCR_RESTORE_NONE
/* How long a restore waits for the newest committed version to be retained:
 * the committing process copies it right after the commit record is
 * durable, so a node that read the record may arrive first. */
#define RETAIN_WAIT_MS 3000

/* ---- the node's restorer ------------------------------------------------------ */

/* A receiver left dirty at the committed version u for its repair in the
 * overwrite retry from u (cfg.repair_in_retry). */
typedef struct pending {
    bool on;
    bool refused; /* its check failed once: the next restore is dense */
    dcr_restore_cause_t cause;
    uint64_t tau;         /* the attempt it was dirty from when first deferred */
    uint64_t t0;          /* when first deferred (dcr_clock_ns) */
    uint64_t checked;     /* the version its digests last equalled the oracle's; HELD_NONE */
    uint64_t checked_in;  /* payloads_in at that check */
    uint64_t checked_tau; /* its file's attempt at that check (the one it applied) */
    uint64_t bytes;       /* the checked attempt's payload bytes */
} pending_t;

/* An anchor's bytes, copied at the commit, uploaded by a background thread. */
typedef struct anchor_upload {
    bool started; /* thread not joined yet */
    pthread_t thread;
    dcr_objstore_t *store;
    uint64_t version;
    int n;
    char (*names)[16];
    uint8_t **bufs;
    size_t *lens;
    dcr_status_t st;
    char why[200];
} anchor_upload_t;

struct dcr_restorer {
    dcr_restorer_config_t cfg;
    dcr_objstore_t *store;     /* retained versions; NULL: none reachable */
    dcr_resident_t **resident; /* per receiver; NULL entries until first used */
    uint64_t *clean_in;        /* payloads_in at the receiver's last clean point */
    bool *clean_known;
    uint64_t counts[DCR_RESTORE_KINDS], bytes[DCR_RESTORE_KINDS];
    uint64_t dense_bytes; /* the checkpoint */
    pending_t *pend;      /* per receiver: left dirty for the overwrite retry */
    /* The checks of repairs in the retry, in a world of their own: they
     * look one version ahead of the committed one, and cfg.world, which
     * only moves forward, must still refit that one densely if a check
     * fails. Created at the first such check. */
    dcr_role_world_t *ahead;
    anchor_upload_t up; /* node 0's anchor in flight */
};

dcr_status_t dcr_restorer_create(const dcr_restorer_config_t *cfg, dcr_restorer_t **out_p)
{
    if (cfg == NULL || cfg->world == NULL || cfg->workdir == NULL || cfg->per < 1 || !out_p)
        return dcr_error_set(DCR_EINVAL, "restorer: bad configuration");
    dcr_restorer_t *R = calloc(1, sizeof(*R));
    if (R == NULL) return dcr_error_set(DCR_ENOMEM, "restorer");
    R->cfg = *cfg;
    R->resident = calloc((size_t)cfg->per, sizeof(*R->resident));
    R->clean_in = calloc((size_t)cfg->per, sizeof(*R->clean_in));
    R->clean_known = calloc((size_t)cfg->per, sizeof(*R->clean_known));
    R->pend = calloc((size_t)cfg->per, sizeof(*R->pend));
    R->dense_bytes = (uint64_t)dcr_inventory_bytes(cfg->world->sc->inventory);
    if (!R->resident || !R->clean_in || !R->clean_known || !R->pend) {
        dcr_restorer_destroy(R);
        return dcr_error_set(DCR_ENOMEM, "restorer");
    }
    for (int k = 0; k < cfg->per; k++) R->pend[k].checked = HELD_NONE;
    /* The store the run's transport uses; without it every restore is dense. */
    char dir[4200];
    dcr_rundir_objstore_dir(cfg->workdir, dir, sizeof dir);
    const dcr_run_config_t *run = cfg->run;
    dcr_objstore_config_t oc = {.url = run && run->store ? run->store : dir,
                                .s3_endpoint = run && run->store ? run->s3_endpoint : NULL};
    if (run && !strcmp(run->transport, "objstore") && dcr_objstore_create(&oc, &R->store) != DCR_OK)
        DCR_LOG_WARN("rollout node %d: no replay (store %s: %s)", cfg->node, oc.url,
                     dcr_error_detail());
    *out_p = R;
    return DCR_OK;
}

void dcr_restorer_destroy(dcr_restorer_t *R)
{
    if (R == NULL) return;
    (void)dcr_restorer_anchor_flush(R);
    for (int k = 0; R->resident && k < R->cfg.per; k++) dcr_resident_close(R->resident[k]);
    free(R->resident);
    free(R->clean_in);
    free(R->clean_known);
    free(R->pend);
    dcr_role_world_destroy(R->ahead);
    dcr_objstore_destroy(R->store);
    free(R);
}

static uint64_t payloads_in(const dcr_receiver_t *r)
{
    dcr_receiver_stats_t s;
    dcr_receiver_stats(r, &s);
    return s.payloads_in;
}

/* Receiver k holds its last clean point: no payload reached it since, and
 * (live) its file carries no dirty mark (an attempt began writing). */
static bool serves(const dcr_restorer_t *R, dcr_receiver_t *const *recv, int k)
{
    if (!R->clean_known[k] || payloads_in(recv[k]) != R->clean_in[k]) return false;
    return !R->cfg.live || dcr_resident_state(R->resident[k], NULL) == DCR_RESIDENT_CLEAN;
}

static void resident_path(const dcr_restorer_t *R, int k, char *out, size_t cap)
{
    snprintf(out, cap, "%s/resident/r%d.dcrs", R->cfg.workdir, R->cfg.first + k);
}

static dcr_status_t resident_file(dcr_restorer_t *R, int k, const dcr_receiver_t *r,
                                  dcr_resident_t **out_p)
{
    if (!R->resident[k]) {
        char dir[4200], path[4300];
        snprintf(dir, sizeof dir, "%s/resident", R->cfg.workdir);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return dcr_error_set(DCR_EIO, "cannot create %s: %s", dir, strerror(errno));
        resident_path(R, k, path, sizeof path);
        DCR_CHECK(dcr_resident_open(path, r, (uint64_t)(R->cfg.first + k), &R->resident[k]));
    }
    *out_p = R->resident[k];
    return DCR_OK;
}

/* A receiver of slot id with the run's loader, key and prewarm, but no
 * weights: what a resident file fills. */
static dcr_status_t bare_receiver(dcr_role_world_t *w, int id, dcr_receiver_t **out_p)
{
    dcr_receiver_t *r = NULL;
    DCR_CHECK(dcr_serve_receiver_create(&w->sc->model, w->sc->inventory, &w->serve, id, NULL, &r));
    dcr_receiver_set_payload_key(r, &w->cfg.payload_key);
    dcr_status_t st = dcr_receiver_prewarm(r);
    if (st != DCR_OK) {
        dcr_receiver_destroy(r);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

/* Live (cfg.live): what receiver k holds. *held_p a clean version; or
 * *from_p the version an interrupted attempt (*tau_p) started from, its
 * bytes a mixture (repairable once a later version is committed); or
 * neither, with *why (dense). A fresh process's receiver adopts its file's
 * bytes as they are. */
static void probe_live(dcr_restorer_t *R, dcr_receiver_t **recv, int k, uint64_t held,
                       uint64_t *held_p, uint64_t *from_p, uint64_t *tau_p, char *why, size_t cap)
{
    uint64_t u = 0;
    *held_p = *from_p = HELD_NONE;
    if (recv[k]) {
        if (serves(R, recv, k)) {
            *held_p = held;
            return;
        }
        dcr_resident_t *f = R->resident[k];
        if (dcr_resident_attached(f, recv[k]) && dcr_resident_state(f, &u) == DCR_RESIDENT_DIRTY &&
            dcr_resident_tau(f) != 0) {
            *from_p = u;
            *tau_p = dcr_resident_tau(f);
            snprintf(why, cap, "dirty in memory: attempt %" PRIu64 " from version %" PRIu64, *tau_p,
                     u);
        } else {
            snprintf(why, cap, "dirty: payloads reached it without a dirty mark");
        }
        return;
    }
    dcr_receiver_t *r = NULL;
    dcr_resident_t *f = NULL;
    dcr_resident_state_t rs = DCR_RESIDENT_ABSENT;
    dcr_status_t st = bare_receiver(R->cfg.world, R->cfg.first + k, &r);
    if (st == DCR_OK) st = resident_file(R, k, r, &f);
    if (st == DCR_OK) st = dcr_resident_attach(f, r, true, &rs);
    if (st == DCR_OK) rs = dcr_resident_state(f, &u);
    if (st != DCR_OK) {
        snprintf(why, cap, "resident file unreadable: %s", dcr_error_detail());
    } else if (rs == DCR_RESIDENT_CLEAN) {
        *held_p = u;
    } else if (rs == DCR_RESIDENT_DIRTY && dcr_resident_tau(f) != 0) {
        *from_p = u;
        *tau_p = dcr_resident_tau(f);
        snprintf(why, cap,
                 "resident file dirty: killed mid-apply of attempt %" PRIu64
                 " from version %" PRIu64,
                 *tau_p, u);
    } else {
        snprintf(why, cap, "resident file %s%s", dcr_resident_state_name(rs),
                 rs == DCR_RESIDENT_DIRTY ? " (an interrupted copy)" : "");
    }
    if (st == DCR_OK && (*held_p != HELD_NONE || *from_p != HELD_NONE)) {
        recv[k] = r;
        return;
    }
    dcr_resident_detach(f, r);
    dcr_receiver_destroy(r);
}

/* What receiver k holds: *held_p a clean version, or HELD_NONE with *why. */
static void probe(dcr_restorer_t *R, dcr_receiver_t **recv, int k, uint64_t held, uint64_t *held_p,
                  char *why, size_t cap)
{
    *held_p = HELD_NONE;
    if (recv[k]) {
        if (R->clean_known[k] && payloads_in(recv[k]) == R->clean_in[k]) {
            *held_p = held;
            return;
        }
        snprintf(why, cap, "dirty: payloads reached it after its last clean point");
        if (!R->cfg.resident) return;
        /* Its copy saved at the last commit stands in for it. */
        dcr_receiver_destroy(recv[k]);
        recv[k] = NULL;
    } else if (!R->cfg.resident) {
        snprintf(why, cap, "a fresh process without resident state");
        return;
    }
    /* A fresh process's (or a dirty receiver's) resident file. */
    dcr_receiver_t *r = NULL;
    dcr_resident_t *f = NULL;
    dcr_status_t st = bare_receiver(R->cfg.world, R->cfg.first + k, &r);
    if (st == DCR_OK) st = resident_file(R, k, r, &f);
    uint64_t u = 0;
    dcr_resident_state_t rs = st == DCR_OK ? dcr_resident_state(f, &u) : DCR_RESIDENT_ABSENT;
    if (st == DCR_OK && rs == DCR_RESIDENT_CLEAN) st = dcr_resident_load(f, r);
    if (st != DCR_OK)
        snprintf(why, cap, "resident file unreadable: %s", dcr_error_detail());
    else if (rs != DCR_RESIDENT_CLEAN)
        snprintf(why, cap, "resident file %s%s", dcr_resident_state_name(rs),
                 rs == DCR_RESIDENT_DIRTY ? " (a copy cut short: its bytes are of no version)"
                                          : "");
    else if (why[0])
        snprintf(why, cap, "dirty in memory: its resident copy of version %" PRIu64 " instead", u);
    if (st == DCR_OK && rs == DCR_RESIDENT_CLEAN) {
        recv[k] = r;
        *held_p = u;
    } else {
        dcr_receiver_destroy(r);
    }
}

/* Receiver k's digests against a dense refit of version in world w. */
static dcr_status_t check_in(dcr_restorer_t *R, dcr_role_world_t *w, const dcr_receiver_t *r, int k,
                             uint64_t version)
{
    dcr_param_digests_t want = {0}, got = {0};
    char who[64];
    snprintf(who, sizeof who, "receiver %d at version %" PRIu64, R->cfg.first + k, version);
    dcr_status_t st = dcr_role_world_expected_digests(w, version, R->cfg.first + k, &want);
    if (st == DCR_OK) st = dcr_receiver_digests(r, &got);
    if (st == DCR_OK) st = dcr_param_digests_compare(&want, &got, who);
    dcr_param_digests_free(&want);
    dcr_param_digests_free(&got);
    return st;
}

/* Receiver k's digests against a dense refit of version in the world. */
static dcr_status_t check(dcr_restorer_t *R, const dcr_receiver_t *r, int k, uint64_t version)
{
    return check_in(R, R->cfg.world, r, k, version);
}

static dcr_status_t record(dcr_restorer_t *R, const dcr_restore_record_t *rec)
{
    R->counts[rec->kind]++;
    R->bytes[rec->kind] += rec->bytes;
    char held[32];
    if (rec->held == HELD_NONE)
        snprintf(held, sizeof held, "-");
    else
        snprintf(held, sizeof held, "%" PRIu64, rec->held);
    DCR_LOG_INFO("rollout node %d: receiver %d restore %s: held %s, now %" PRIu64 ", %" PRIu64
                 " bytes moved (dense %" PRIu64 "), %.3f s (%s)%s%s",
                 R->cfg.node, rec->receiver, dcr_restore_kind_name(rec->kind), held, rec->version,
                 rec->bytes, rec->dense_bytes, rec->seconds, dcr_restore_cause_name(rec->cause),
                 rec->why[0] ? ": " : "", rec->why);
    return dcr_restore_log_append(R->cfg.workdir, R->cfg.node, rec);
}

/* Under --transport relay with --retain: the root's window, opened anew at
 * every restore (the root may have restarted at another address). Without
 * it every restore is dense. */
static void open_relay_store(dcr_restorer_t *R)
{
    const dcr_run_config_t *run = R->cfg.run;
    if (!run || strcmp(run->transport, "relay") || run->retain < 1) return;
    dcr_objstore_destroy(R->store);
    R->store = NULL;
    char url[4300];
    dcr_status_t st = dcr_role_relay_retain_url(run, R->cfg.workdir, R->cfg.node, url, sizeof url);
    dcr_objstore_config_t oc = {.url = url, .timeout_ms = 10000};
    if (st == DCR_OK) st = dcr_objstore_create(&oc, &R->store);
    if (st != DCR_OK)
        DCR_LOG_WARN("rollout node %d: no replay from the relay root: %s", R->cfg.node,
                     dcr_error_detail());
}

/* Waits until version's VERSION manifest is readable or RETAIN_WAIT_MS
 * passed (then the replay finds the gap and says so). */
static void await_retained(dcr_objstore_t *s, uint64_t version)
{
    uint64_t t0 = dcr_clock_ns();
    for (;;) {
        dcr_retain_manifest_t m;
        dcr_status_t st = dcr_retain_manifest_read(s, version, &m);
        dcr_retain_manifest_free(&m);
        if (st != DCR_ENOTFOUND || dcr_clock_ns() - t0 > (uint64_t)RETAIN_WAIT_MS * 1000000u)
            return;
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
}

/* Waits until version's repair set is complete (its owners store it just
 * after the commit, in the background) or RETAIN_WAIT_MS passed (then the
 * repair says why it has none). Only the object store holds repair sets:
 * the owners of a relay run store none. */
static void await_repair_set(dcr_restorer_t *R, uint64_t version)
{
    if (!R->cfg.run || strcmp(R->cfg.run->transport, "objstore")) return;
    uint64_t t0 = dcr_clock_ns();
    for (;;) {
        dcr_retain_manifest_t m;
        dcr_status_t st = dcr_retain_repair_read(R->store, version, &m);
        dcr_retain_manifest_free(&m);
        if (st != DCR_ENOTFOUND || dcr_clock_ns() - t0 > (uint64_t)RETAIN_WAIT_MS * 1000000u)
            return;
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
}

/* Receivers ks[0, n), dirty from u, where version u+1's records are XOR
 * (the repair was refused, nothing written): one whose interrupted attempt
 * (rec->tau) is the one that committed u+1 may have died after its last
 * write (after its acknowledgment, before the commit reached it): its
 * digests equal a dense refit of u+1 exactly then (the oracle), and it
 * replays u+2..version from there. ok[i] says which passed; the others
 * are untouched, their reason in their record. All are checked at u+1
 * before any replay (the oracle's world only moves forward). */
static void verified_repair(dcr_restorer_t *R, dcr_receiver_t **recv, const int *ks, int n,
                            uint64_t u, uint64_t version, dcr_restore_record_t *recs, bool *ok)
{
    dcr_retain_manifest_t m;
    uint64_t tau = 0;
    dcr_status_t ms = dcr_retain_manifest_read(R->store, u + 1, &m);
    if (ms == DCR_OK) tau = m.tau;
    dcr_retain_manifest_free(&m);
    dcr_receiver_t *group[64];
    int ng = 0;
    for (int i = 0; i < n; i++) {
        dcr_restore_record_t *rec = &recs[ks[i]];
        dcr_status_t cs = ms;
        if (cs == DCR_OK && tau != rec->tau)
            cs = dcr_error_set(DCR_EUNSUPPORTED,
                               "version %" PRIu64 " came from attempt %" PRIu64
                               ", not the interrupted attempt %" PRIu64,
                               u + 1, tau, rec->tau);
        if (cs == DCR_OK) cs = check(R, recv[ks[i]], ks[i], u + 1);
        ok[i] = cs == DCR_OK;
        if (ok[i])
            group[ng++] = recv[ks[i]];
        else
            snprintf(rec->why, sizeof rec->why,
                     "repair %" PRIu64 "..%" PRIu64 " failed: XOR "
                     "records, and not verified: %s",
                     u + 1, version, dcr_error_detail());
    }
    if (ng == 0) return;
    dcr_replay_stats_t st = {0};
    dcr_status_t rs = dcr_restore_replay(R->store, group, ng, u + 1, version, &st);
    if (rs != DCR_OK) {
        char why[120];
        snprintf(why, sizeof why, "%s", dcr_error_detail());
        for (int i = 0; i < n; i++)
            if (ok[i]) {
                ok[i] = false;
                snprintf(recs[ks[i]].why, sizeof recs[ks[i]].why,
                         "verified at %" PRIu64 ", then the replay failed: %s", u + 1, why);
            }
        return;
    }
    for (int i = 0; i < n; i++)
        if (ok[i]) recs[ks[i]].bytes = st.bytes;
}

/* Replays (or repairs: kind) receivers ks[0, n) of recv, which hold u
 * (or an interrupted attempt from u), to version. */
static void replay_group(dcr_restorer_t *R, dcr_receiver_t **recv, const int *ks, int n, uint64_t u,
                         uint64_t version, dcr_restore_record_t *recs)
{
    dcr_receiver_t *group[64];
    for (int i = 0; i < n; i++) group[i] = recv[ks[i]];
    dcr_replay_stats_t st = {0};
    uint64_t t0 = dcr_clock_ns();
    bool repair = recs[ks[0]].kind == DCR_RESTORE_REPAIR;
    if (R->store) await_retained(R->store, version);
    if (R->store && repair && u + 1 == version) await_repair_set(R, version);
    dcr_status_t rs = !R->store ? dcr_error_set(DCR_EUNSUPPORTED, "no object store to replay from")
                      : repair ? dcr_restore_repair(R->store, &R->cfg.world->cfg.payload_key, group,
                                                    n, u, version, recs[ks[0]].tau, &st)
                               : dcr_restore_replay(R->store, group, n, u, version, &st);
    /* XOR records (refused before any write): repairable by verification. */
    bool verified = repair && rs == DCR_EUNSUPPORTED && R->store;
    bool ok[64] = {false};
    if (verified) verified_repair(R, recv, ks, n, u, version, recs, ok);
    for (int i = 0; i < n; i++) {
        dcr_restore_record_t *rec = &recs[ks[i]];
        if (!verified) rec->bytes = st.bytes; /* one download serves every receiver of the node */
        if (repair && rs == DCR_OK) {
            size_t l = strlen(rec->why);
            snprintf(rec->why + l, sizeof rec->why - l, "; with %s of version %" PRIu64,
                     st.repair_set ? "the repair set" : "the overwrite retry's payloads", u + 1);
        }
        dcr_status_t cs = rs == DCR_OK || ok[i] ? check(R, recv[ks[i]], ks[i], version) : rs;
        rec->seconds = (double)(dcr_clock_ns() - t0) * 1e-9; /* the shared download, its check */
        if (verified && !ok[i]) {
            rec->kind = DCR_RESTORE_DENSE; /* its why says so already */
        } else if (cs != DCR_OK) {
            rec->kind = DCR_RESTORE_DENSE;
            snprintf(rec->why, sizeof rec->why, "%s %" PRIu64 "..%" PRIu64 " failed: %s",
                     repair ? "repair" : "replay", u + 1, version, dcr_error_detail());
        }
    }
}

/* ---- anchors (elastic join) ------------------------------------------------------ */

/* A receiver's parameter bytes in arena order (what a resident file holds
 * after its header): an anchor object. dst holds arena_bytes(r), zeroed. */
static size_t arena_bytes(const dcr_receiver_t *r)
{
    return dcr_params_arena_bytes(dcr_receiver_params(r));
}

static dcr_status_t arena_in(dcr_receiver_t *r, const uint8_t *src, size_t len)
{
    if (len != arena_bytes(r))
        return dcr_error_set(DCR_EPAYLOAD, "anchor object of %zu bytes for a receiver of %zu", len,
                             arena_bytes(r));
    dcr_params_arena_copy_in(dcr_receiver_params(r), src);
    return DCR_OK;
}

/* The run's --anchor-every (0: none). */
static int anchor_every(const dcr_restorer_t *R)
{
    return R->cfg.run ? R->cfg.run->anchor_every : 0;
}

static int tp_of(const dcr_restorer_t *R)
{
    return R->cfg.world->serve.tp > 0 ? R->cfg.world->serve.tp : 1;
}

static void anchor_upload_free(anchor_upload_t *u)
{
    for (int i = 0; u->bufs && i < u->n; i++) free(u->bufs[i]);
    free(u->bufs);
    free(u->names);
    free(u->lens);
    u->bufs = NULL;
    u->names = NULL;
    u->lens = NULL;
    u->n = 0;
}

static void *anchor_upload_main(void *arg)
{
    anchor_upload_t *u = arg;
    const char *names[64];
    for (int i = 0; i < u->n; i++) names[i] = u->names[i];
    uint64_t t0 = dcr_clock_ns();
    u->st = dcr_anchor_put(u->store, u->version, (size_t)u->n, names,
                           (const uint8_t *const *)u->bufs, u->lens);
    uint64_t bytes = 0;
    for (int i = 0; i < u->n; i++) bytes += u->lens[i];
    if (u->st == DCR_OK)
        DCR_LOG_INFO("anchor of version %" PRIu64 ": %d objects, %" PRIu64 " bytes in %.3f s",
                     u->version, u->n, bytes, (double)(dcr_clock_ns() - t0) * 1e-9);
    else
        snprintf(u->why, sizeof u->why, "%s", dcr_error_detail());
    anchor_upload_free(u);
    return NULL;
}

dcr_status_t dcr_restorer_anchor_flush(dcr_restorer_t *R)
{
    if (R == NULL || !R->up.started) return DCR_OK;
    pthread_join(R->up.thread, NULL);
    R->up.started = false;
    if (R->up.st == DCR_OK) return DCR_OK;
    DCR_LOG_WARN("rollout node %d: anchor of version %" PRIu64 " not written: %s", R->cfg.node,
                 R->up.version, R->up.why);
    return dcr_error_set(R->up.st, "anchor of version %" PRIu64 ": %s", R->up.version, R->up.why);
}

/* Whether this node writes the anchor of `version`: node 0 (it holds every
 * tensor-parallel rank: a node's receivers are ranks 0..tp-1 in turn) at a
 * version due, with a store to write to. */
static bool anchor_due(const dcr_restorer_t *R, uint64_t version)
{
    /* Anchors live in the object store only (the relay root serves versions/,
     * and the restorer's relay:// handle is replaced at every restore). */
    return anchor_every(R) > 0 && R->store && !strcmp(R->cfg.run->transport, "objstore") &&
           R->cfg.node == 0 && version > 0 && version % (uint64_t)anchor_every(R) == 0 &&
           R->cfg.per >= tp_of(R) && tp_of(R) <= 64;
}

/* Node 0 after the commit of `version`: copies receivers 0..tp-1 and hands
 * them to a background upload; skipped (said) while one is in flight. */
static void anchor_write(dcr_restorer_t *R, dcr_receiver_t *const *recv, uint64_t version)
{
    anchor_upload_t *u = &R->up;
    if (u->started) {
        /* Joining a finished upload costs nothing; a running one is left. */
        if (pthread_tryjoin_np(u->thread, NULL) != 0) {
            DCR_LOG_WARN("rollout node %d: anchor of version %" PRIu64 " skipped: version %" PRIu64
                         "'s is still uploading",
                         R->cfg.node, version, u->version);
            return;
        }
        u->started = false;
        if (u->st != DCR_OK)
            DCR_LOG_WARN("rollout node %d: anchor of version %" PRIu64 " not written: %s",
                         R->cfg.node, u->version, u->why);
    }
    int tp = tp_of(R);
    for (int k = 0; k < tp; k++)
        if (!serves(R, recv, k)) return; /* not clean at version: no anchor */
    u->n = tp;
    u->version = version;
    u->store = R->store;
    u->st = DCR_OK;
    u->why[0] = '\0';
    u->names = calloc((size_t)tp, sizeof(*u->names));
    u->bufs = calloc((size_t)tp, sizeof(*u->bufs));
    u->lens = calloc((size_t)tp, sizeof(*u->lens));
    bool ok = u->names && u->bufs && u->lens;
    for (int k = 0; ok && k < tp; k++) {
        snprintf(u->names[k], sizeof u->names[k], "t%d", k);
        u->lens[k] = arena_bytes(recv[k]);
        u->bufs[k] = calloc(u->lens[k] ? u->lens[k] : 1, 1);
        ok = u->bufs[k] != NULL;
        if (ok) dcr_params_arena_copy_out(dcr_receiver_params(recv[k]), u->bufs[k]);
    }
    if (ok) ok = pthread_create(&u->thread, NULL, anchor_upload_main, u) == 0;
    if (!ok) {
        anchor_upload_free(u);
        DCR_LOG_WARN("rollout node %d: anchor of version %" PRIu64 " skipped: out of memory",
                     R->cfg.node, version);
        return;
    }
    u->started = true;
}

/* Receiver k's start from anchor m: its tensor-parallel rank's object,
 * checked against its digest before a byte of it is copied, in a fresh
 * receiver (*out_p) of *bytes_p bytes. */
static dcr_status_t from_anchor(dcr_restorer_t *R, const dcr_anchor_manifest_t *m, int k,
                                dcr_receiver_t **out_p, uint64_t *bytes_p)
{
    char name[16];
    snprintf(name, sizeof name, "t%d", (R->cfg.first + k) % tp_of(R));
    uint8_t *buf = NULL;
    size_t len = 0;
    DCR_CHECK(dcr_anchor_get(R->store, m, name, &buf, &len));
    *bytes_p = len;
    dcr_receiver_t *r = NULL;
    dcr_status_t st = bare_receiver(R->cfg.world, R->cfg.first + k, &r);
    if (st == DCR_OK) st = arena_in(r, buf, len);
    free(buf);
    if (st != DCR_OK) {
        dcr_receiver_destroy(r);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

/* Receivers ks[0, n) of recv, of kind anchor: each from the newest anchor
 * of version <= `version` (from_anchor), replayed to `version` (one
 * download for all) and checked against the oracle; one that fails any
 * step turns dense (its why says so), its old receiver untouched. */
static void anchor_group(dcr_restorer_t *R, dcr_receiver_t **recv, const int *ks, int n,
                         uint64_t version, dcr_restore_record_t *recs)
{
    uint64_t t0 = dcr_clock_ns();
    dcr_anchor_manifest_t m;
    dcr_receiver_t *fresh[64] = {NULL}, *group[64];
    uint64_t obj_bytes[64] = {0};
    int idx[64], ng = 0;
    dcr_status_t ms = dcr_anchor_newest(R->store, version, &m);
    for (int i = 0; i < n; i++) {
        dcr_status_t st = ms == DCR_OK ? from_anchor(R, &m, ks[i], &fresh[i], &obj_bytes[i]) : ms;
        if (st == DCR_OK) {
            group[ng] = fresh[i];
            idx[ng++] = i;
        } else {
            snprintf(recs[ks[i]].why, sizeof recs[ks[i]].why, "no anchor join, dense: %s",
                     dcr_error_detail());
        }
    }
    dcr_replay_stats_t rs = {0};
    dcr_status_t st = DCR_OK;
    if (ng > 0 && m.version < version) {
        await_retained(R->store, version);
        st = dcr_restore_replay(R->store, group, ng, m.version, version, &rs);
    }
    char why[120] = "";
    if (st != DCR_OK) snprintf(why, sizeof why, "%s", dcr_error_detail());
    for (int j = 0; j < ng; j++) {
        int i = idx[j], k = ks[i];
        dcr_restore_record_t *rec = &recs[k];
        dcr_status_t cs = st == DCR_OK ? check(R, fresh[i], k, version) : st;
        if (cs != DCR_OK) {
            snprintf(rec->why, sizeof rec->why,
                     "anchor of version %" PRIu64 " then replay failed, dense: %s", m.version,
                     st == DCR_OK ? dcr_error_detail() : why);
            dcr_receiver_destroy(fresh[i]);
            fresh[i] = NULL;
            continue;
        }
        rec->bytes = obj_bytes[i] + rs.bytes; /* the replay's one download serves the node */
        rec->seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
        if (m.version < version)
            snprintf(rec->why, sizeof rec->why,
                     "joined from the anchor of version %" PRIu64 ", replayed %" PRIu64
                     "..%" PRIu64,
                     m.version, m.version + 1, version);
        else
            snprintf(rec->why, sizeof rec->why, "joined from the anchor of version %" PRIu64,
                     m.version);
        dcr_resident_detach(R->resident[k], recv[k]);
        dcr_receiver_destroy(recv[k]);
        recv[k] = fresh[i];
    }
    for (int i = 0; i < n; i++)
        if (recv[ks[i]] != fresh[i] || !fresh[i]) recs[ks[i]].kind = DCR_RESTORE_DENSE;
    dcr_anchor_manifest_free(&m);
}

/* recv hold `version` cleanly from now on; the receivers with save[k] (all
 * when save is NULL) are written to their resident files. */
static dcr_status_t clean_point(dcr_restorer_t *R, dcr_receiver_t *const *recv, uint64_t version,
                                const bool *save)
{
    for (int k = 0; k < R->cfg.per; k++) {
        pending_t *pd = &R->pend[k];
        if (pd->on) {
            /* Repaired in place only once its bytes equalled the oracle's
             * at this very version and nothing reached it since. */
            if (pd->checked != version || payloads_in(recv[k]) != pd->checked_in ||
                dcr_resident_tau(R->resident[k]) != pd->checked_tau) {
                R->clean_known[k] = false;
                continue;
            }
            dcr_restore_record_t rec = {.receiver = R->cfg.first + k,
                                        .kind = DCR_RESTORE_REPAIR,
                                        .held = HELD_NONE,
                                        .version = version,
                                        .bytes = pd->bytes,
                                        .dense_bytes = R->dense_bytes,
                                        .seconds = (double)(dcr_clock_ns() - pd->t0) * 1e-9,
                                        .cause = pd->cause,
                                        .tau = pd->tau};
            snprintf(rec.why, sizeof rec.why,
                     "dirty from attempt %" PRIu64 ": repaired in place by the overwrite retry",
                     pd->tau);
            pd->on = false;
            pd->checked = HELD_NONE;
            DCR_CHECK(record(R, &rec));
        }
        pd->refused = false;
        R->clean_in[k] = payloads_in(recv[k]);
        R->clean_known[k] = true;
        if (!R->cfg.resident || (save && !save[k] && !R->cfg.live)) continue;
        dcr_resident_t *f = NULL;
        DCR_CHECK(resident_file(R, k, recv[k], &f));
        /* Live: a receiver not yet in its file (a dense refit, a first
         * load) moves in, its bytes copied once; then only the header. */
        if (R->cfg.live && !dcr_resident_attached(f, recv[k]))
            DCR_CHECK(dcr_resident_attach(f, recv[k], false, NULL));
        DCR_CHECK(dcr_resident_save(f, recv[k], version));
    }
    return DCR_OK;
}

/* Receiver k's state as found (probe), and the decision on it (dcr/recovery.h),
 * into rec and the flags; a pending receiver's record is started. */
static void classify(dcr_restorer_t *R, dcr_receiver_t **recv, int k, uint64_t held,
                     uint64_t version, dcr_restore_record_t *rec, uint64_t *from_p,
                     dcr_restore_action_t *action_p)
{
    uint64_t t0 = dcr_clock_ns();
    rec->receiver = R->cfg.first + k;
    rec->version = version;
    rec->dense_bytes = R->dense_bytes;
    rec->cause = !recv[k]         ? DCR_RESTORE_START
                 : version > held ? DCR_RESTORE_BEHIND
                                  : DCR_RESTORE_DIRTY;
    uint64_t from = HELD_NONE;
    bool in_memory = recv[k] != NULL; /* before the probe, which may load one */
    if (R->cfg.live)
        probe_live(R, recv, k, held, &rec->held, &from, &rec->tau, rec->why, sizeof rec->why);
    else
        probe(R, recv, k, held, &rec->held, rec->why, sizeof rec->why);
    pending_t *pd = &R->pend[k];
    bool was_pending = pd->on;
    pd->on = false;
    dcr_restore_state_t state = {rec->held, from, in_memory && !rec->why[0], R->cfg.repair_in_retry,
                                 pd->refused};
    dcr_restore_choice_t c = dcr_restore_decide(&state, version, rec->why, sizeof rec->why);
    rec->kind = c.kind;
    *from_p = from;
    *action_p = c.action;
    if (c.action == DCR_RESTORE_DEFER) {
        /* Dirty at the version asked, none committed after it: the
         * overwrite retry from it repairs it in place (the caller checks
         * it before acknowledging); until then it stays dirty. */
        if (!was_pending) {
            pd->checked = HELD_NONE;
            pd->t0 = t0;
            pd->cause = rec->cause;
            pd->tau = rec->tau;
        }
        pd->on = true;
        DCR_LOG_INFO("rollout node %d: receiver %d left dirty at version %" PRIu64
                     " for its repair in the overwrite retry (%s)",
                     R->cfg.node, rec->receiver, version, rec->why);
    } else if (c.action == DCR_RESTORE_CHECK) {
        dcr_status_t st = check(R, recv[k], k, version);
        rec->seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
        if (st != DCR_OK) {
            rec->kind = DCR_RESTORE_DENSE;
            snprintf(rec->why, sizeof rec->why, "clean copy failed its check: %s",
                     dcr_error_detail());
        }
    }
}

/* Replays and repairs, one download per kind and starting version. */
static void replay_groups(dcr_restorer_t *R, dcr_receiver_t **recv, uint64_t version,
                          dcr_restore_record_t *recs, const uint64_t *from)
{
    bool replayed[64] = {false};
    for (int k = 0; k < R->cfg.per; k++) {
        dcr_restore_kind_t kind = recs[k].kind;
        if ((kind != DCR_RESTORE_REPLAY && kind != DCR_RESTORE_REPAIR) || replayed[k]) continue;
        uint64_t u = kind == DCR_RESTORE_REPAIR ? from[k] : recs[k].held;
        int ks[64], n = 0;
        /* A repair group shares its interrupted attempt too (the repair
         * set must cover it). */
        for (int j = k; j < R->cfg.per; j++)
            if (recs[j].kind == kind &&
                (kind == DCR_RESTORE_REPAIR ? from[j] : recs[j].held) == u &&
                (kind != DCR_RESTORE_REPAIR || recs[j].tau == recs[k].tau)) {
                ks[n++] = j;
                replayed[j] = true;
            }
        replay_group(R, recv, ks, n, u, version, recs);
    }
}

/* What would be dense joins from an anchor where there is one. */
static void anchor_groups(dcr_restorer_t *R, dcr_receiver_t **recv, uint64_t version,
                          dcr_restore_record_t *recs)
{
    int ks[64], n = 0;
    for (int k = 0; k < R->cfg.per; k++)
        if (dcr_restore_prefers_anchor(recs[k].kind, anchor_every(R), R->store != NULL, version)) {
            recs[k].kind = DCR_RESTORE_ANCHOR;
            ks[n++] = k;
        }
    if (n > 0) anchor_group(R, recv, ks, n, version, recs);
}

/* Receiver k refitted densely from the run's world at version. */
static dcr_status_t dense(dcr_restorer_t *R, dcr_receiver_t **recv, int k, uint64_t version,
                          dcr_restore_record_t *rec)
{
    uint64_t t0 = dcr_clock_ns();
    DCR_CHECK(dcr_role_world_advance(R->cfg.world, version));
    dcr_receiver_t *r = NULL;
    DCR_CHECK(dcr_role_world_receiver(R->cfg.world, rec->receiver, &r));
    dcr_resident_detach(R->resident[k], recv[k]);
    dcr_receiver_destroy(recv[k]);
    recv[k] = r;
    rec->bytes = rec->dense_bytes;
    rec->seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
    return DCR_OK;
}

dcr_status_t dcr_restorer_restore(dcr_restorer_t *R, dcr_receiver_t **recv, uint64_t held,
                                  uint64_t version)
{
    int per = R->cfg.per;
    if (per > 64) return dcr_error_set(DCR_EINVAL, "restorer: %d receivers per node", per);
    open_relay_store(R);
    dcr_restore_record_t recs[64];
    memset(recs, 0, sizeof recs);
    dcr_restore_action_t action[64];
    uint64_t from[64]; /* live: the version an interrupted attempt started from */
    for (int k = 0; k < per; k++)
        classify(R, recv, k, held, version, &recs[k], &from[k], &action[k]);
    replay_groups(R, recv, version, recs, from);
    anchor_groups(R, recv, version, recs);
    for (int k = 0; k < per; k++) {
        dcr_restore_record_t *rec = &recs[k];
        if (rec->kind == DCR_RESTORE_DENSE) DCR_CHECK(dense(R, recv, k, version, rec));
        /* Version 0 from nothing is the run's initial dense load (setup),
         * not a restore; untouched and deferred receivers are not restored. */
        bool initial = version == 0 && rec->held == HELD_NONE;
        if (initial || action[k] == DCR_RESTORE_NOTHING || action[k] == DCR_RESTORE_DEFER) continue;
        DCR_CHECK(record(R, rec));
    }
    /* A receiver still clean after its check holds what its resident file
     * holds (it was loaded from it, or saved at the last commit): only the
     * replayed and the densely refitted ones are saved again. */
    bool save[64];
    for (int k = 0; k < per; k++) save[k] = recs[k].kind != DCR_RESTORE_CLEAN;
    return clean_point(R, recv, version, save);
}

dcr_status_t dcr_restorer_committed(dcr_restorer_t *R, dcr_receiver_t *const *recv,
                                    uint64_t version)
{
    DCR_CHECK(clean_point(R, recv, version, NULL));
    if (anchor_due(R, version)) anchor_write(R, recv, version);
    return DCR_OK;
}

bool dcr_restorer_pending(const dcr_restorer_t *R, int k)
{
    return R != NULL && k >= 0 && k < R->cfg.per && R->pend[k].on;
}

dcr_status_t dcr_restorer_check_repair(dcr_restorer_t *R, dcr_receiver_t *const *recv, int k,
                                       uint64_t version, uint64_t bytes)
{
    if (!dcr_restorer_pending(R, k))
        return dcr_error_set(DCR_EINVAL, "restorer: receiver %d is not awaiting a repair",
                             R ? R->cfg.first + k : k);
    pending_t *pd = &R->pend[k];
    dcr_status_t st = DCR_OK;
    if (R->ahead && R->ahead->version > version) { /* a check of an older retry: start over */
        dcr_role_world_destroy(R->ahead);
        R->ahead = NULL;
    }
    if (!R->ahead) st = dcr_role_world_create(&R->cfg.world->cfg, &R->ahead);
    if (st == DCR_OK) st = check_in(R, R->ahead, recv[k], k, version);
    if (st != DCR_OK) {
        pd->refused = true;
        pd->checked = HELD_NONE;
        return st;
    }
    pd->checked = version;
    pd->checked_in = payloads_in(recv[k]);
    pd->checked_tau = dcr_resident_tau(R->resident[k]);
    pd->bytes = bytes;
    return DCR_OK;
}

bool dcr_restorer_dirty(const dcr_restorer_t *R, dcr_receiver_t *const *recv)
{
    for (int k = 0; k < R->cfg.per; k++)
        if (!serves(R, recv, k)) return true;
    return false;
}

void dcr_restorer_begin(dcr_restorer_t *R, int k, uint64_t tau)
{
    if (R == NULL || !R->cfg.live || k < 0 || k >= R->cfg.per) return;
    dcr_resident_t *f = R->resident[k];
    if (f == NULL) return;
    if (dcr_resident_tau(f) == tau && dcr_resident_state(f, NULL) == DCR_RESIDENT_DIRTY) return;
    (void)dcr_resident_begin(f, tau); /* only fails with nothing attached: nothing to mark */
}

bool dcr_restorer_serves(const dcr_restorer_t *R, dcr_receiver_t *const *recv, int k)
{
    if (R == NULL || recv == NULL || k < 0 || k >= R->cfg.per || recv[k] == NULL) return false;
    return serves(R, recv, k);
}

void dcr_restorer_counts(const dcr_restorer_t *R, uint64_t counts[DCR_RESTORE_KINDS],
                         uint64_t bytes[DCR_RESTORE_KINDS])
{
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        counts[k] = R ? R->counts[k] : 0;
        bytes[k] = R ? R->bytes[k] : 0;
    }
}
