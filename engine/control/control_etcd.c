/* The etcd control-plane backend: the control plane of a cluster, one etcd
 * (v3) reached through its JSON gateway over HTTP (core/http-internal.h),
 * shared by every process on every host of a run.
 *
 * Address: etcd://HOST:PORT[/PREFIX] (HOST a name, an IPv4 address or an
 * [IPv6] address; PREFIX of [A-Za-z0-9._~-] segments joined by '/', default
 * "dcr"). Everything this backend writes lies under "PREFIX/"; two runs must
 * use prefixes that do not nest. Keys (values are binary encodings,
 * little-endian, each starting with an 8-byte tag):
 *
 *   P/schema                      "dcr-control-etcd 1", written once at open
 *   P/record                      the commit record K^v (64 bytes)
 *   P/latest                      the latest attempt, as P/attempt/<tau>; the
 *                                 attempt counter: every prepare compares its
 *                                 mod revision, so tau strictly increases
 *   P/attempt/<tau:016x>          an attempt and its sorted required receivers
 *   P/ack/<tau:016x>/<r:08x>      receiver r acknowledged tau (empty value)
 *   P/coordinator/<id>            id prepared once; replaced ones stay fenced
 *   P/alive/<id>                  bound to the coordinator's lease (below)
 *   P/membership                  the receiver membership, sorted
 *   P/report/<r:08x>              receiver r's prewarm report: its header and,
 *                                 up to 512 KiB, its bytes
 *   P/report-chunk/<r:08x>/<gen:016x>/<i:08x>  the 512 KiB parts of a larger
 *                                 one (etcd refuses requests over ~1.5 MiB)
 *
 * Why every state change is atomic: each one reads what it depends on in one
 * snapshot (a read-only txn), decides, and then writes in one txn whose
 * compares check that what it read is unchanged (the record's value, the mod
 * revision of P/latest, a coordinator key's absence); a lost compare re-reads
 * and decides again, until the timeout. The joint commit is one txn comparing
 * P/record to K^v (value and mod revision) and P/latest's mod revision to the
 * snapshot's: together they prove that tau is still the latest attempt and
 * the record still K^v at the moment the new record is written. The
 * acknowledgments are read after that snapshot, not compared one by one in
 * the txn (etcd caps a txn at 128 operations): acks of the latest attempt are
 * only ever added, and only the prune inside a successful commit (which
 * changes P/record) removes any, so "all present when read" plus "record and
 * latest unchanged since before" means all present at the commit. The deadline is checked against
 * this process's wall clock just before the txn is sent, as the SQLite backend checks it inside its
 * transaction (the seed assumes synchronized clocks).
 *
 * The lease: a coordinator's handle grants one lease (10 s) at its first
 * prepare and binds P/alive/<id> to it in every prepare, commit and
 * membership change, refreshing it when a third of its time has passed and
 * revoking it at destroy. The key is the coordinator's liveness as etcd sees
 * it: it disappears within 10 s of the coordinator's process dying or losing
 * the etcd, so an operator or a supervisor watching P/alive/ knows when to
 * start a replacement coordinator. It fences nothing: fencing is the
 * coordinator keys' job, and a new coordinator may always prepare.
 *
 * Why it never trusts the server: every response is bounded, parsed and
 * checked (JSON shape, base64, value tags and lengths, ranges); anything else
 * is one DCR_ECONTROL line naming the address and the key. Unreachable or
 * slow servers fail each call within the configured timeout (all requests of
 * a call share it; only a report in parts gives each part the whole timeout)
 * with the address in the line; nothing is retried blindly, because a
 * request whose reply was lost may have taken effect (the caller reads the
 * record to find out). TLS and etcd authentication are not supported.
 *
 * This file holds the operations; control_etcd_wire.c the requests and the
 * checked reading of responses, control_etcd_value.c the values. */
#include "control-internal.h"
#include "core/endian-internal.h"
#include "etcd-internal.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"

static const char dcr__et_tag_member[DCR__ET_TAG_BYTES] = "dcrmem1";
static const char dcr__et_tag_report[DCR__ET_TAG_BYTES] = "dcrrep1";

/* ---- address ----------------------------------------------------------------------------- */

static bool dcr__et_prefix_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '~' || c == '-';
}

static dcr_status_t dcr__et_bad_address(const char *address, const char *why)
{
    return dcr_error_set(DCR_EINVAL,
                         "control plane address '%.300s': %s (expected etcd://HOST:PORT[/PREFIX])",
                         address, why);
}

/* Splits etcd://HOST:PORT[/PREFIX] into e's base URL, prefix and name. */
static dcr_status_t dcr__et_parse_address(const char *address, dcr__et_t *e)
{
    static const char scheme[] = "etcd://";
    if (address == NULL) return dcr__et_bad_address("(null)", "no address");
    if (strncmp(address, scheme, sizeof scheme - 1) != 0) {
        return dcr__et_bad_address(address, "not an etcd:// URL");
    }
    const char *host = address + sizeof scheme - 1;
    const char *slash = strchr(host, '/');
    size_t hostport_len = slash != NULL ? (size_t)(slash - host) : strlen(host);
    if (hostport_len == 0 || hostport_len >= DCR__ET_HOST_MAX) {
        return dcr__et_bad_address(address, "no HOST:PORT, or one too long");
    }
    char hp[DCR__ET_HOST_MAX];
    memcpy(hp, host, hostport_len);
    hp[hostport_len] = '\0';
    char *colon = strrchr(hp, ':');
    if (colon == NULL || colon == hp || (hp[0] == '[' && colon[-1] != ']')) {
        return dcr__et_bad_address(address, "no :PORT after the host");
    }
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || port < 1 || port > 65535) {
        return dcr__et_bad_address(address, "the port must be a number in 1..65535");
    }
    for (char *c = hp; c < colon; c++) {
        bool ok =
            dcr__et_prefix_char(*c) || (hp[0] == '[' && (*c == ':' || *c == '[' || *c == ']'));
        if (!ok)
            return dcr__et_bad_address(address, "the host has a character outside [A-Za-z0-9.-]");
    }
    const char *prefix = slash != NULL ? slash + 1 : "";
    size_t plen = strlen(prefix);
    if (plen > 1 && prefix[plen - 1] == '/') plen--; /* one trailing slash is harmless */
    if (plen == 0) {
        prefix = DCR__ET_DEFAULT_PREFIX;
        plen = strlen(prefix);
    }
    if (plen > DCR__ET_PREFIX_MAX) return dcr__et_bad_address(address, "the prefix is too long");
    for (size_t i = 0; i < plen; i++) {
        bool seg_start = i == 0 || prefix[i - 1] == '/';
        if (prefix[i] == '/' ? seg_start : !dcr__et_prefix_char(prefix[i])) {
            return dcr__et_bad_address(address,
                                       "the prefix must be segments of [A-Za-z0-9._~-] joined by "
                                       "single '/'");
        }
    }
    snprintf(e->base_url, sizeof e->base_url, "http://%s", hp);
    snprintf(e->prefix, sizeof e->prefix, "%.*s/", (int)plen, prefix);
    snprintf(e->where, sizeof e->where, "etcd %s/%.*s", hp, (int)plen, prefix);
    return DCR_OK;
}

/* ---- create and destroy ----------------------------------------------------------------- */

static dcr_status_t dcr__et_lease_revoke(dcr__et_t *e);

static dcr__et_t *dcr__et_of(dcr_control_t *c)
{
    return (dcr__et_t *)c;
}

static void dcr__et_free(dcr__et_t *e)
{
    if (e == NULL) return;
    /* Best effort: the liveness key goes at once instead of at the TTL. */
    if (e->lease_id != 0) {
        /* Closing must not wait long for a server that is gone. */
        e->deadline_ms = dcr__et_mono_ms() + (e->timeout_ms < 1000 ? e->timeout_ms : 1000);
        (void)dcr__et_lease_revoke(e);
    }
    pthread_mutex_destroy(&e->mu);
    free(e->cache_required);
    free(e);
}

static void dcr__et_destroy(dcr_control_t *c)
{
    dcr__et_free(dcr__et_of(c));
}

/* Creates the schema marker and the empty record once (racing opens create
 * them once: the txn compares the marker's absence), or checks that the
 * prefix holds a dcr control plane of this version. */
static dcr_status_t dcr__et_init(dcr__et_t *e)
{
    char kschema[DCR__ET_KEY_MAX], krecord[DCR__ET_KEY_MAX];
    dcr__et_key(e, kschema, "schema");
    dcr__et_key(e, krecord, "record");
    uint8_t rec[DCR__ET_RECORD_BYTES];
    dcr_commit_record_t empty;
    memset(&empty, 0, sizeof empty);
    dcr__et_encode_record(&empty, rec);
    json_t *cmp = json_pack("[o]", dcr__et_cmp_rev(kschema, "CREATE", 0));
    json_t *ok =
        json_pack("[o,o]", dcr__et_op_put(kschema, DCR__ET_SCHEMA, strlen(DCR__ET_SCHEMA), 0),
                  dcr__et_op_put(krecord, rec, sizeof rec, 0));
    json_t *fail = json_pack("[o]", dcr__et_op_range(kschema, NULL, false));
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, cmp, ok, fail, "open", &t));
    dcr_status_t st = DCR_OK;
    if (!t.succeeded) {
        json_t *r;
        dcr__et_kv_t kv;
        bool found = false;
        st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
        if (st == DCR_OK) st = dcr__et_one(e, r, 256, &kv, &found);
        if (st == DCR_OK) {
            if (!found || kv.len != strlen(DCR__ET_SCHEMA) ||
                memcmp(kv.value, DCR__ET_SCHEMA, kv.len) != 0) {
                st = dcr_error_set(DCR_ECONTROL,
                                   "%s: %s holds '%.*s', not \"" DCR__ET_SCHEMA
                                   "\": not a dcr control plane this build reads",
                                   e->where, kschema, kv.len <= 64 ? (int)kv.len : 64,
                                   kv.value != NULL ? (const char *)kv.value : "");
            }
            free(kv.value);
        }
    }
    dcr__et_txn_free(&t);
    return st;
}

static dcr_status_t dcr__et_create(const dcr_control_ops_t *self, const dcr_control_config_t *cfg,
                                   dcr_control_t **out_p)
{
    (void)self;
    dcr__et_t *e = calloc(1, sizeof *e);
    if (e == NULL) return dcr_error_set(DCR_ENOMEM, "etcd control plane: allocation failed");
    dcr_status_t st = dcr__et_parse_address(cfg->address, e);
    if (st != DCR_OK) {
        free(e);
        return st;
    }
    if (pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e);
        return dcr_error_set(DCR_ENOMEM, "%s: mutex initialization failed", cfg->address);
    }
    e->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DCR__ET_DEFAULT_TIMEOUT;
    e->deadline_ms = dcr__et_mono_ms() + e->timeout_ms;
    st = dcr__et_init(e);
    if (st != DCR_OK) {
        dcr__et_free(e);
        return st;
    }
    *out_p = &e->pub;
    return DCR_OK;
}

/* ---- the coordinator lease --------------------------------------------------------------------
 */

/* Best effort, and its callers ignore the status: a lease that already
 * expired (etcd answers 404 "requested lease not found" once a coordinator
 * was idle past the TTL) is as good as revoked. Its error line is logged and
 * cleared, so that it is never reported as the cause of a later failure. */
static dcr_status_t dcr__et_lease_revoke(dcr__et_t *e)
{
    /* Best effort, often while closing after a failure: that failure's
     * line must survive this call whatever the revoke does. */
    dcr_error_t earlier;
    dcr_error_save(&earlier, DCR_EIO);
    json_t *resp = NULL;
    dcr_status_t st =
        dcr__et_post(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", dcr__et_jint(e->lease_id)),
                     "revoke the coordinator lease", &resp);
    json_decref(resp);
    e->lease_id = 0;
    if (st != DCR_OK) {
        DCR_LOG_INFO("etcd: %s (the lease ends at its TTL anyway)", dcr_error_detail());
        (void)dcr_error_restore(&earlier);
    }
    return st;
}

static dcr_status_t dcr__et_lease_grant(dcr__et_t *e)
{
    json_t *resp = NULL;
    DCR_CHECK(dcr__et_post(e, "/v3/lease/grant",
                           json_pack("{s:o}", "TTL", dcr__et_jint(DCR__ET_LEASE_TTL_S)),
                           "grant the coordinator lease", &resp));
    int64_t id = 0, ttl = 0;
    bool ok = dcr__et_jget_int(resp, "ID", &id) && dcr__et_jget_int(resp, "TTL", &ttl) && id != 0 &&
              ttl > 0;
    json_decref(resp);
    if (!ok) return dcr__et_malformed(e, "lease grant response", "a lease ID and a positive TTL");
    e->lease_id = id;
    e->lease_refreshed_ns = (int64_t)dcr_clock_ns(); /* a local interval: monotonic */
    return DCR_OK;
}

/* The lease P/alive/<coordinator> is bound to, granted or refreshed as
 * needed; an expired one (the coordinator was cut off for its whole TTL) is
 * replaced by a fresh one. */
static dcr_status_t dcr__et_lease_for(dcr__et_t *e, const char *coordinator, int64_t *lease_p)
{
    int64_t now = (int64_t)dcr_clock_ns();
    if (e->lease_id != 0 && strcmp(e->lease_owner, coordinator) != 0) {
        (void)dcr__et_lease_revoke(e); /* the handle now serves another coordinator */
    }
    if (e->lease_id != 0 && now - e->lease_refreshed_ns > DCR__ET_LEASE_TTL_S * 1000000000LL / 3) {
        json_t *resp = NULL;
        DCR_CHECK(dcr__et_post(e, "/v3/lease/keepalive",
                               json_pack("{s:o}", "ID", dcr__et_jint(e->lease_id)),
                               "refresh the coordinator lease", &resp));
        int64_t ttl = 0;
        bool ok = dcr__et_jget_int(json_object_get(resp, "result"), "TTL", &ttl);
        json_decref(resp);
        if (!ok) return dcr__et_malformed(e, "lease keepalive response", "a result with a TTL");
        if (ttl > 0) {
            e->lease_refreshed_ns = now;
        } else {
            e->lease_id = 0;
        }
    }
    if (e->lease_id == 0) {
        DCR_CHECK(dcr__et_lease_grant(e));
        snprintf(e->lease_owner, sizeof e->lease_owner, "%s", coordinator);
    }
    *lease_p = e->lease_id;
    return DCR_OK;
}

/* The put of P/alive/<coordinator> that state changes of a coordinator carry. */
static dcr_status_t dcr__et_alive_op(dcr__et_t *e, const char *coordinator, json_t **op_p)
{
    int64_t lease = 0;
    DCR_CHECK(dcr__et_lease_for(e, coordinator, &lease));
    char key[DCR__ET_KEY_MAX];
    dcr__et_key(e, key, "alive/%s", coordinator);
    *op_p = dcr__et_op_put(key, coordinator, strlen(coordinator), lease);
    return DCR_OK;
}

/* ---- the retry loop of read-decide-txn operations
 * ------------------------------------------------ */

/* A step reads a snapshot, decides, and runs its txn: DCR_OK with *done false
 * when the txn's compares failed (something changed: read again). */
typedef dcr_status_t (*dcr__et_step_fn)(dcr__et_t *e, void *ctx, bool *done_p);

static dcr_status_t dcr__et_loop(dcr__et_t *e, const char *what, dcr__et_step_fn step, void *ctx)
{
    dcr__et_begin(e);
    unsigned seed = (unsigned)e->deadline_ms ^ (unsigned)getpid();
    dcr_status_t st = DCR_OK;
    for (unsigned round = 0;; round++) {
        bool done = false;
        st = step(e, ctx, &done);
        if (st != DCR_OK || done) break;
        if (dcr__et_mono_ms() >= e->deadline_ms) {
            st = dcr_error_set(DCR_ECONTROL, "%s: %s: still contended after %u tries in %d ms",
                               e->where, what, round + 1, e->timeout_ms);
            break;
        }
        /* Racers that lost to each other spread out before the next try. */
        struct timespec pause = {0, (long)(100000 + (rand_r(&seed) % 1000) * 1000)};
        nanosleep(&pause, NULL);
    }
    dcr__et_end(e);
    return st;
}

/* ---- the commit record ------------------------------------------------------------------------
 */

static dcr_status_t dcr__et_read(dcr_control_t *c, dcr_commit_record_t *rec_p)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_kv_t kv;
    bool found = false;
    DCR_CHECK(dcr__et_get(e, "record", DCR__ET_RECORD_BYTES, "read the record", &kv, &found));
    dcr_commit_record_t rec;
    dcr_status_t st = dcr__et_decode_record(e, &kv, found, &rec);
    free(kv.value);
    if (st == DCR_OK) *rec_p = rec;
    return st;
}

static dcr_status_t dcr__et_cas(dcr_control_t *c, const dcr_commit_record_t *expected,
                                const dcr_commit_record_t *desired)
{
    dcr__et_t *e = dcr__et_of(c);
    char key[DCR__ET_KEY_MAX];
    dcr__et_key(e, key, "record");
    uint8_t want[DCR__ET_RECORD_BYTES], next[DCR__ET_RECORD_BYTES];
    dcr__et_encode_record(expected, want);
    dcr__et_encode_record(desired, next);
    /* The encoding is canonical, so comparing values compares every field. */
    json_t *cmp = json_pack("[o]", dcr__et_cmp_value(key, want, sizeof want));
    json_t *ok = json_pack("[o]", dcr__et_op_put(key, next, sizeof next, 0));
    json_t *fail = json_pack("[o]", dcr__et_op_range(key, NULL, false));
    dcr__et_txn_t t;
    dcr__et_begin(e);
    dcr_status_t st = dcr__et_txn(e, cmp, ok, fail, "compare-and-set the record", &t);
    dcr__et_end(e);
    DCR_CHECK(st);
    if (!t.succeeded) {
        json_t *r;
        dcr__et_kv_t kv = {0};
        bool found = false;
        dcr_commit_record_t cur;
        st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
        if (st == DCR_OK) st = dcr__et_one(e, r, DCR__ET_RECORD_BYTES, &kv, &found);
        if (st == DCR_OK) st = dcr__et_decode_record(e, &kv, found, &cur);
        if (st == DCR_OK) st = dcr__control_record_changed(e->where, &cur);
        free(kv.value);
    }
    dcr__et_txn_free(&t);
    return st;
}

/* ---- attempts -----------------------------------------------------------------------------------
 */

/* What prepare, ack, commit and membership_put read: the record, the latest
 * attempt and whether the coordinator ever prepared. */
typedef struct dcr__et_state {
    dcr__et_kv_t kv[3];
    bool found[3];
    dcr_commit_record_t rec;
    bool have_latest;
    dcr__et_attempt_t latest;
    int64_t latest_mod;
    bool coordinator_known;
} dcr__et_state_t;

static void dcr__et_state_free(dcr__et_state_t *s)
{
    dcr__et_kvs_free(s->kv, 3);
    free(s->latest.required);
    memset(s, 0, sizeof *s);
}

static const size_t dcr__et_attempt_max =
    DCR__ET_ATTEMPT_FIXED + (size_t)DCR_CONTROL_RECEIVERS_MAX * 4;

static dcr_status_t dcr__et_load_state(dcr__et_t *e, const char *coordinator, const char *what,
                                       dcr__et_state_t *s)
{
    memset(s, 0, sizeof *s);
    char krec[DCR__ET_KEY_MAX], klatest[DCR__ET_KEY_MAX], kcoord[DCR__ET_KEY_MAX];
    const char *keys[] = {dcr__et_key(e, krec, "record"), dcr__et_key(e, klatest, "latest"),
                          dcr__et_key(e, kcoord, "coordinator/%s", coordinator ? coordinator : "")};
    size_t max[] = {DCR__ET_RECORD_BYTES, dcr__et_attempt_max, 0};
    DCR_CHECK(dcr__et_snapshot(e, keys, max, coordinator ? 3 : 2, what, s->kv, s->found));
    dcr_status_t st = dcr__et_decode_record(e, &s->kv[0], s->found[0], &s->rec);
    s->have_latest = s->found[1];
    s->latest_mod = s->kv[1].mod_rev;
    if (st == DCR_OK && s->have_latest) st = dcr__et_decode_attempt(e, &s->kv[1], &s->latest);
    s->coordinator_known = coordinator != NULL && s->found[2];
    if (st != DCR_OK) dcr__et_state_free(s);
    return st;
}

/* A coordinator is replaced once another one prepared after it; it stays
 * refused forever, which is why ids must be unique per incarnation. */
static dcr_status_t dcr__et_check_active(dcr__et_t *e, const char *coordinator,
                                         const dcr__et_state_t *s)
{
    if (!s->have_latest || strcmp(s->latest.info.coordinator, coordinator) == 0 ||
        !s->coordinator_known) {
        return DCR_OK;
    }
    return dcr_error_set(DCR_ECONFLICT,
                         "%s: coordinator %s was replaced by coordinator %s "
                         "(attempt %llu)",
                         e->where, coordinator, s->latest.info.coordinator,
                         (unsigned long long)s->latest.info.tau);
}

/* The compares that make a state change conditional on what s saw of the
 * latest attempt and of the coordinator's key. */
static json_t *dcr__et_state_compares(dcr__et_t *e, const char *coordinator,
                                      const dcr__et_state_t *s)
{
    char klatest[DCR__ET_KEY_MAX], kcoord[DCR__ET_KEY_MAX];
    json_t *cmp = json_array();
    json_array_append_new(cmp,
                          dcr__et_cmp_rev(dcr__et_key(e, klatest, "latest"), "MOD", s->latest_mod));
    if (coordinator != NULL && !s->coordinator_known) {
        json_array_append_new(
            cmp,
            dcr__et_cmp_rev(dcr__et_key(e, kcoord, "coordinator/%s", coordinator), "CREATE", 0));
    }
    return cmp;
}

typedef struct dcr__et_prepare_ctx {
    const dcr_control_prepare_t *req;
    uint32_t *sorted;
    uint64_t tau;
} dcr__et_prepare_ctx_t;

static dcr_status_t dcr__et_prepare_txn(dcr__et_t *e, dcr__et_prepare_ctx_t *x,
                                        const dcr__et_state_t *s, bool *done_p)
{
    const dcr_control_prepare_t *req = x->req;
    dcr_control_attempt_t a;
    memset(&a, 0, sizeof a);
    /* Above every tau this store has seen, including one a repair CAS wrote. */
    uint64_t top = s->rec.attempt;
    if (s->have_latest && s->latest.info.tau > top) top = s->latest.info.tau;
    if (top >= DCR_CONTROL_VALUE_MAX) {
        return dcr_error_set(DCR_ECONTROL, "%s: attempt ids are exhausted", e->where);
    }
    a.tau = top + 1;
    snprintf(a.coordinator, sizeof a.coordinator, "%s", req->coordinator);
    a.from_version = req->from_version;
    a.prepared_ns = dcr__control_now_ns();
    a.deadline_ns = a.prepared_ns + (int64_t)req->deadline_ms * 1000000;
    a.n_required = (uint32_t)req->n_receivers;
    size_t len = 0;
    uint8_t *value = dcr__et_encode_attempt(&a, x->sorted, &len);
    if (value == NULL) return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    json_t *alive = NULL;
    dcr_status_t st = dcr__et_alive_op(e, req->coordinator, &alive);
    if (st != DCR_OK) {
        free(value);
        return st;
    }
    char krec[DCR__ET_KEY_MAX], klatest[DCR__ET_KEY_MAX], katt[DCR__ET_KEY_MAX],
        kcoord[DCR__ET_KEY_MAX];
    json_t *cmp = dcr__et_state_compares(e, req->coordinator, s);
    json_array_append_new(cmp,
                          dcr__et_cmp_rev(dcr__et_key(e, krec, "record"), "MOD", s->kv[0].mod_rev));
    json_t *ok = json_pack(
        "[o,o,o,o]", dcr__et_op_put(dcr__et_key(e, klatest, "latest"), value, len, 0),
        dcr__et_op_put(dcr__et_key(e, katt, "attempt/%016llx", (unsigned long long)a.tau), value,
                       len, 0),
        dcr__et_op_put(dcr__et_key(e, kcoord, "coordinator/%s", req->coordinator), "", 0, 0),
        alive);
    free(value);
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, cmp, ok, NULL, "prepare", &t));
    *done_p = t.succeeded;
    dcr__et_txn_free(&t);
    if (*done_p) x->tau = a.tau;
    return DCR_OK;
}

static dcr_status_t dcr__et_prepare_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    dcr__et_prepare_ctx_t *x = ctx;
    dcr__et_state_t s;
    DCR_CHECK(dcr__et_load_state(e, x->req->coordinator, "prepare", &s));
    dcr_status_t st = dcr__et_check_active(e, x->req->coordinator, &s);
    if (st == DCR_OK && s.rec.version != x->req->from_version) {
        st = dcr_error_set(DCR_ECONFLICT,
                           "%s: prepare for version %llu, but version %llu is "
                           "committed",
                           e->where, (unsigned long long)x->req->from_version,
                           (unsigned long long)s.rec.version);
    }
    if (st == DCR_OK) st = dcr__et_prepare_txn(e, x, &s, done_p);
    dcr__et_state_free(&s);
    return st;
}

static dcr_status_t dcr__et_prepare(dcr_control_t *c, const dcr_control_prepare_t *req,
                                    uint64_t *tau_p)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_prepare_ctx_t x = {req, NULL, 0};
    DCR_CHECK(dcr__et_sorted_copy(e, req->receivers, req->n_receivers, &x.sorted));
    dcr_status_t st = dcr__et_loop(e, "prepare", dcr__et_prepare_step, &x);
    free(x.sorted);
    if (st == DCR_OK) *tau_p = x.tau;
    return st;
}

static dcr_status_t dcr__et_not_found(dcr__et_t *e, uint64_t tau)
{
    return dcr_error_set(DCR_ENOTFOUND, "%s: attempt %llu does not exist", e->where,
                         (unsigned long long)tau);
}

/* Exactly 8 lowercase hex digits (how keys name receivers) into *out_p. */
static bool dcr__et_hex8(const char *s, uint32_t *out_p)
{
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + (uint32_t)d;
    }
    if (s[8] != '\0') return false;
    *out_p = v;
    return true;
}

/* The acknowledgments of attempt a from the ack range response r (keys
 * only) whose keys start with kack, checked against a's required receivers,
 * into a malloc'd sorted array. */
static dcr_status_t dcr__et_parse_acks(dcr__et_t *e, const char *kack, json_t *r,
                                       const dcr__et_attempt_t *a, uint32_t **acks_p,
                                       size_t *n_acks_p)
{
    json_t *kvs = NULL;
    DCR_CHECK(dcr__et_kvs(e, r, &kvs));
    size_t n = json_array_size(kvs);
    uint32_t *acks = malloc((n ? n : 1) * sizeof *acks);
    dcr_status_t st = DCR_OK;
    if (acks == NULL) st = dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    size_t plen = strlen(kack);
    for (size_t i = 0; i < n && st == DCR_OK; i++) {
        dcr__et_kv_t ack;
        st = dcr__et_parse_kv(e, json_array_get(kvs, i), 0, &ack);
        free(ack.value);
        uint32_t v = 0;
        bool ok =
            st == DCR_OK && strncmp(ack.key, kack, plen) == 0 && dcr__et_hex8(ack.key + plen, &v) &&
            dcr__et_contains(a->required, a->info.n_required, v) && (i == 0 || v > acks[i - 1]);
        if (st == DCR_OK && !ok) {
            st = dcr__et_malformed(e, kack,
                                   "acknowledgment keys ending in a required receiver "
                                   "as 8 hex digits, ascending");
        }
        if (st == DCR_OK) acks[i] = v;
    }
    if (st == DCR_OK) {
        *acks_p = acks;
        *n_acks_p = n;
    } else {
        free(acks);
    }
    return st;
}

/* The ack key prefix of attempt tau and the end of its range. */
static void dcr__et_ack_range(dcr__et_t *e, uint64_t tau, char kack[DCR__ET_KEY_MAX],
                              char kend[DCR__ET_KEY_MAX])
{
    dcr__et_key(e, kack, "ack/%016llx/", (unsigned long long)tau);
    dcr__et_prefix_end(kack, kend);
}

/* The handle's copy of the latest attempt (see dcr__et_t): from any read of
 * P/latest, so that a rollout node's acknowledgment after it read the
 * attempt it takes part in is one txn, not a read and a txn (each a round
 * trip on the refit's finalization path). A stale copy costs nothing but
 * that read: the ack's compare on the mod revision fails and it reads again.
 * Without memory the copy is simply dropped. */
static void dcr__et_cache_set(dcr__et_t *e, const dcr__et_attempt_t *a, int64_t mod)
{
    size_t n = a->info.n_required;
    uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
    free(e->cache_required);
    e->cache_required = copy;
    e->cache_tau = copy ? a->info.tau : 0;
    e->cache_mod = mod;
    e->cache_n = copy ? (uint32_t)n : 0;
    if (copy && n > 0) memcpy(copy, a->required, n * sizeof *copy);
}

/* Attempt tau (0: the latest) and, if acks_too, its acknowledgments, in one
 * snapshot. */
static dcr_status_t dcr__et_load_attempt(dcr__et_t *e, uint64_t tau, bool acks_too,
                                         dcr__et_attempt_t *a, uint32_t **acks_p, size_t *n_acks_p)
{
    char katt[DCR__ET_KEY_MAX], kack[DCR__ET_KEY_MAX], kend[DCR__ET_KEY_MAX];
    memset(a, 0, sizeof *a);
    if (tau == 0) {
        dcr__et_key(e, katt, "latest");
    } else {
        dcr__et_key(e, katt, "attempt/%016llx", (unsigned long long)tau);
    }
    dcr__et_ack_range(e, tau, kack, kend);
    json_t *ops = json_array();
    json_array_append_new(ops, dcr__et_op_range(katt, NULL, false));
    if (acks_too) json_array_append_new(ops, dcr__et_op_range(kack, kend, true));
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, NULL, ops, NULL, "read an attempt", &t));
    json_t *r;
    dcr__et_kv_t kv = {0};
    bool found = false;
    dcr_status_t st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
    if (st == DCR_OK) st = dcr__et_one(e, r, dcr__et_attempt_max, &kv, &found);
    if (st == DCR_OK && !found) {
        st = tau == 0 ? dcr_error_set(DCR_ENOTFOUND, "%s: no attempt was prepared yet", e->where)
                      : dcr__et_not_found(e, tau);
    }
    if (st == DCR_OK) st = dcr__et_decode_attempt(e, &kv, a);
    if (st == DCR_OK && tau != 0 && a->info.tau != tau) {
        st = dcr__et_malformed(e, kv.key, "the attempt its key names");
    }
    if (st == DCR_OK && tau == 0) dcr__et_cache_set(e, a, kv.mod_rev);
    free(kv.value);
    if (st == DCR_OK && acks_too) {
        st = dcr__et_txn_response(e, &t, 1, "response_range", &r);
        if (st == DCR_OK) st = dcr__et_parse_acks(e, kack, r, a, acks_p, n_acks_p);
    }
    if (st != DCR_OK) {
        free(a->required);
        a->required = NULL;
    }
    dcr__et_txn_free(&t);
    return st;
}

/* Only the acknowledgments of attempt a, whose record the caller has already
 * read (keys only: an ack's value is empty). */
static dcr_status_t dcr__et_load_acks(dcr__et_t *e, const dcr__et_attempt_t *a, uint32_t **acks_p,
                                      size_t *n_acks_p)
{
    char kack[DCR__ET_KEY_MAX], kend[DCR__ET_KEY_MAX];
    dcr__et_ack_range(e, a->info.tau, kack, kend);
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, NULL, json_pack("[o]", dcr__et_op_range(kack, kend, true)), NULL,
                          "read the acknowledgments", &t));
    json_t *r;
    dcr_status_t st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
    if (st == DCR_OK) st = dcr__et_parse_acks(e, kack, r, a, acks_p, n_acks_p);
    dcr__et_txn_free(&t);
    return st;
}

static dcr_status_t dcr__et_attempt(dcr_control_t *c, uint64_t tau, dcr_control_attempt_t *info_p)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_attempt_t a;
    dcr__et_begin(e);
    dcr_status_t st = dcr__et_load_attempt(e, tau, false, &a, NULL, NULL);
    dcr__et_end(e);
    DCR_CHECK(st);
    *info_p = a.info;
    free(a.required);
    return DCR_OK;
}

static dcr_status_t dcr__et_list(dcr__et_t *e, bool acks_list, uint64_t tau, uint32_t *out,
                                 size_t cap, size_t *n_p)
{
    dcr__et_attempt_t a;
    uint32_t *acks = NULL;
    size_t n_acks = 0;
    dcr__et_begin(e);
    dcr_status_t st = dcr__et_load_attempt(e, tau, acks_list, &a, &acks, &n_acks);
    dcr__et_end(e);
    DCR_CHECK(st);
    const uint32_t *list = acks_list ? acks : a.required;
    size_t n = acks_list ? n_acks : a.info.n_required;
    if (cap > 0 && n > 0) memcpy(out, list, (n < cap ? n : cap) * sizeof *out);
    *n_p = n;
    free(acks);
    free(a.required);
    return DCR_OK;
}

static dcr_status_t dcr__et_required(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                     size_t *n_p)
{
    return dcr__et_list(dcr__et_of(c), false, tau, out, cap, n_p);
}

static dcr_status_t dcr__et_acks(dcr_control_t *c, uint64_t tau, uint32_t *out, size_t cap,
                                 size_t *n_p)
{
    return dcr__et_list(dcr__et_of(c), true, tau, out, cap, n_p);
}

/* Only the latest attempt may be acknowledged or committed. */
static dcr_status_t dcr__et_check_latest(dcr__et_t *e, uint64_t tau, const dcr__et_state_t *s)
{
    if (!s->have_latest || tau > s->latest.info.tau) return dcr__et_not_found(e, tau);
    if (tau < s->latest.info.tau) {
        return dcr_error_set(DCR_ECONFLICT,
                             "%s: attempt %llu was replaced by attempt %llu of coordinator %s",
                             e->where, (unsigned long long)tau,
                             (unsigned long long)s->latest.info.tau, s->latest.info.coordinator);
    }
    return DCR_OK;
}

typedef struct dcr__et_ack_ctx {
    uint64_t tau;
    const uint32_t *receivers;
    size_t n;
} dcr__et_ack_ctx_t;

/* Reads the latest attempt into the handle's copy; an error if tau is not it. */
static dcr_status_t dcr__et_cache_latest(dcr__et_t *e, uint64_t tau)
{
    dcr__et_state_t s;
    DCR_CHECK(dcr__et_load_state(e, NULL, "acknowledge", &s));
    dcr_status_t st = dcr__et_check_latest(e, tau, &s);
    if (st == DCR_OK) dcr__et_cache_set(e, &s.latest, s.latest_mod);
    if (st == DCR_OK && e->cache_tau != tau)
        st = dcr_error_set(DCR_ENOMEM, "%s: no memory for attempt %llu's receivers", e->where,
                           (unsigned long long)tau);
    dcr__et_state_free(&s);
    return st;
}

/* An acknowledgment's part of a txn: appends to cmp the latest attempt's
 * mod revision as read (a newer attempt fails the txn) and to ok every
 * receiver's key. */
static dcr_status_t dcr__et_ack_ops(dcr__et_t *e, const dcr__et_ack_ctx_t *x, json_t *cmp,
                                    json_t *ok)
{
    if (e->cache_tau != x->tau) DCR_CHECK(dcr__et_cache_latest(e, x->tau));
    for (size_t i = 0; i < x->n; i++) {
        if (!dcr__et_contains(e->cache_required, e->cache_n, x->receivers[i])) {
            return dcr_error_set(DCR_EINVAL,
                                 "%s: receiver %u is not a required receiver of attempt %llu",
                                 e->where, x->receivers[i], (unsigned long long)x->tau);
        }
    }
    char klatest[DCR__ET_KEY_MAX], kack[DCR__ET_KEY_MAX];
    dcr__et_key(e, klatest, "latest");
    json_array_append_new(cmp, dcr__et_cmp_rev(klatest, "MOD", e->cache_mod));
    for (size_t i = 0; i < x->n; i++) {
        dcr__et_key(e, kack, "ack/%016llx/%08x", (unsigned long long)x->tau, x->receivers[i]);
        json_array_append_new(ok, dcr__et_op_put(kack, "", 0, 0));
    }
    return DCR_OK;
}

/* Runs one txn of cmp (compares nothing when empty) and ok, once their
 * building succeeded (built, or arrays that could not be allocated, fail
 * it). Takes both arrays whatever happens. */
static dcr_status_t dcr__et_txn_ops(dcr__et_t *e, dcr_status_t built, json_t *cmp, json_t *ok,
                                    const char *what, bool *done_p)
{
    if (built == DCR_OK && (cmp == NULL || ok == NULL))
        built = dcr_error_set(DCR_ENOMEM, "control etcd: %s: txn", what);
    if (built != DCR_OK) {
        json_decref(cmp);
        json_decref(ok);
        return built;
    }
    if (json_array_size(cmp) == 0) {
        json_decref(cmp);
        cmp = NULL;
    }
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, cmp, ok, NULL, what, &t));
    *done_p = t.succeeded;
    dcr__et_txn_free(&t);
    return DCR_OK;
}

/* One transaction puts every receiver's key, guarded by the latest attempt
 * being the one read: all or none. */
static dcr_status_t dcr__et_ack_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    json_t *cmp = json_array(), *ok = json_array();
    dcr_status_t st = dcr__et_ack_ops(e, ctx, cmp, ok);
    DCR_CHECK(dcr__et_txn_ops(e, st, cmp, ok, "acknowledge", done_p));
    /* A newer attempt (or a stale copy): read again, which decides. */
    if (!*done_p) e->cache_tau = 0;
    return DCR_OK;
}

static dcr_status_t dcr__et_ack_many(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                     size_t n)
{
    dcr__et_ack_ctx_t x = {tau, receivers, n};
    return dcr__et_loop(dcr__et_of(c), "acknowledge", dcr__et_ack_step, &x);
}

static dcr_status_t dcr__et_ack(dcr_control_t *c, uint64_t tau, uint32_t receiver)
{
    return dcr__et_ack_many(c, tau, &receiver, 1);
}

typedef struct dcr__et_commit_ctx {
    const char *coordinator;
    uint64_t tau;
    const dcr_commit_record_t *expected;
    const uint8_t *baseline;
    dcr_commit_record_t rec;
} dcr__et_commit_ctx_t;

/* tau must be the latest attempt; then the checks every backend makes
 * (control.c), before the acknowledgments. */
static dcr_status_t dcr__et_commit_check(dcr__et_t *e, dcr__et_commit_ctx_t *x,
                                         const dcr__et_state_t *s, int64_t now)
{
    DCR_CHECK(dcr__et_check_latest(e, x->tau, s));
    return dcr__control_commit_check(e->where, x->coordinator, x->tau, &s->latest.info, x->expected,
                                     &s->rec, now);
}

/* Every required receiver acknowledged: acks is a sorted subset of required. */
static dcr_status_t dcr__et_check_acked(dcr__et_t *e, uint64_t tau, const dcr__et_attempt_t *a,
                                        const uint32_t *acks, size_t n_acks)
{
    if (n_acks == a->info.n_required) return DCR_OK;
    size_t j = 0;
    uint32_t first = 0;
    for (size_t i = 0; i < a->info.n_required; i++) {
        if (j < n_acks && acks[j] == a->required[i]) {
            j++;
        } else {
            first = a->required[i];
            break;
        }
    }
    return dcr_error_set(DCR_EATTEMPT,
                         "%s: attempt %llu cannot commit: receiver %u and %zu other(s) have not "
                         "acknowledged it",
                         e->where, (unsigned long long)tau, first,
                         (size_t)a->info.n_required - n_acks - 1);
}

static dcr_status_t dcr__et_commit_txn(dcr__et_t *e, dcr__et_commit_ctx_t *x,
                                       const dcr__et_state_t *s, int64_t now, bool *done_p)
{
    dcr_commit_record_t rec;
    rec.version = s->rec.version + 1;
    memcpy(rec.baseline, x->baseline, DCR_CONTROL_BASELINE_BYTES);
    rec.attempt = x->tau;
    rec.committed_ns = now;
    uint8_t want[DCR__ET_RECORD_BYTES], next[DCR__ET_RECORD_BYTES];
    dcr__et_encode_record(x->expected, want);
    dcr__et_encode_record(&rec, next);
    json_t *alive = NULL;
    DCR_CHECK(dcr__et_alive_op(e, x->coordinator, &alive));
    char krec[DCR__ET_KEY_MAX], katt0[DCR__ET_KEY_MAX], katt[DCR__ET_KEY_MAX],
        kack0[DCR__ET_KEY_MAX], kack[DCR__ET_KEY_MAX];
    json_t *cmp = dcr__et_state_compares(e, NULL, s);
    json_array_append_new(cmp,
                          dcr__et_cmp_value(dcr__et_key(e, krec, "record"), want, sizeof want));
    json_array_append_new(cmp, dcr__et_cmp_rev(krec, "MOD", s->kv[0].mod_rev));
    /* Nothing older than the committed attempt can ever count again. */
    json_t *ok = json_pack(
        "[o,o,o,o]", dcr__et_op_put(krec, next, sizeof next, 0),
        dcr__et_op_delete(dcr__et_key(e, katt0, "attempt/"),
                          dcr__et_key(e, katt, "attempt/%016llx", (unsigned long long)x->tau)),
        dcr__et_op_delete(dcr__et_key(e, kack0, "ack/"),
                          dcr__et_key(e, kack, "ack/%016llx/", (unsigned long long)x->tau)),
        alive);
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, cmp, ok, NULL, "commit", &t));
    *done_p = t.succeeded;
    dcr__et_txn_free(&t);
    if (*done_p) x->rec = rec;
    return DCR_OK;
}

static dcr_status_t dcr__et_commit_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    dcr__et_commit_ctx_t *x = ctx;
    dcr__et_state_t s;
    DCR_CHECK(dcr__et_load_state(e, NULL, "commit", &s));
    int64_t now = dcr__control_now_ns();
    dcr_status_t st = dcr__et_commit_check(e, x, &s, now);
    /* The acknowledgments are read after the snapshot: see the file comment
     * for why acks present then are present at the txn. The attempt itself
     * is the snapshot's P/latest (commit_check made sure it is tau), so only
     * the ack keys are read. */
    uint32_t *acks = NULL;
    size_t n_acks = 0;
    if (st == DCR_OK) st = dcr__et_load_acks(e, &s.latest, &acks, &n_acks);
    if (st == DCR_OK) st = dcr__et_check_acked(e, x->tau, &s.latest, acks, n_acks);
    if (st == DCR_OK) st = dcr__et_commit_txn(e, x, &s, now, done_p);
    free(acks);
    dcr__et_state_free(&s);
    return st;
}

static dcr_status_t dcr__et_commit(dcr_control_t *c, const char *coordinator, uint64_t tau,
                                   const dcr_commit_record_t *expected,
                                   const uint8_t baseline[DCR_CONTROL_BASELINE_BYTES],
                                   dcr_commit_record_t *rec_p)
{
    dcr__et_commit_ctx_t x = {coordinator, tau, expected, baseline, {0}};
    DCR_CHECK(dcr__et_loop(dcr__et_of(c), "commit", dcr__et_commit_step, &x));
    *rec_p = x.rec;
    return DCR_OK;
}

/* ---- prewarm reports ----------------------------------------------------------------------------
 */

typedef struct dcr__et_report_ctx {
    uint32_t receiver;
    const uint8_t *data;
    size_t len;
} dcr__et_report_ctx_t;

static uint64_t dcr__et_new_gen(void)
{
    static _Atomic uint64_t counter;
    uint64_t g = (uint64_t)dcr__control_now_ns() ^ ((uint64_t)getpid() << 40) ^
                 (++counter * 0x9e3779b97f4a7c15ull);
    return g != 0 ? g : 1;
}

static dcr_status_t dcr__et_put_plain(dcr__et_t *e, const char *key, const void *value, size_t n,
                                      const char *what)
{
    dcr__et_txn_t t;
    DCR_CHECK(
        dcr__et_txn(e, NULL, json_pack("[o]", dcr__et_op_put(key, value, n, 0)), NULL, what, &t));
    dcr__et_txn_free(&t);
    return DCR_OK;
}

/* Writes the parts of a large report under generation gen, before the
 * header that names them. */
static dcr_status_t dcr__et_report_chunks(dcr__et_t *e, const dcr__et_report_ctx_t *x, uint64_t gen,
                                          uint32_t n_chunks)
{
    for (uint32_t i = 0; i < n_chunks; i++) {
        char key[DCR__ET_KEY_MAX];
        dcr__et_key(e, key, "report-chunk/%08x/%016llx/%08x", x->receiver, (unsigned long long)gen,
                    i);
        size_t off = (size_t)i * DCR__ET_CHUNK;
        size_t n = x->len - off < DCR__ET_CHUNK ? x->len - off : DCR__ET_CHUNK;
        /* Each part has the whole timeout: a 64 MiB report is 128 requests. */
        e->deadline_ms = dcr__et_mono_ms() + e->timeout_ms;
        DCR_CHECK(dcr__et_put_plain(e, key, x->data + off, n, "write a prewarm report part"));
    }
    return DCR_OK;
}

/* A report's part of a txn: writes the parts of a large report first
 * (under a new generation), then appends to ok the header's put and the
 * deletion of every other generation's parts, and to cmp (a large report
 * only) the header's mod revision as read. */
static dcr_status_t dcr__et_report_ops(dcr__et_t *e, const dcr__et_report_ctx_t *x, json_t *cmp,
                                       json_t *ok)
{
    char khead[DCR__ET_KEY_MAX], kbase[DCR__ET_KEY_MAX], kmine[DCR__ET_KEY_MAX],
        kmine_end[DCR__ET_KEY_MAX], kbase_end[DCR__ET_KEY_MAX];
    bool inline_data = x->len <= DCR__ET_CHUNK;
    dcr__et_key(e, khead, "report/%08x", x->receiver);
    /* Only the header's mod revision is needed (the txn compares it), not
     * its up to 512 KiB of inline report; an inline report compares
     * nothing (see the txn below), so it costs no read. */
    int64_t head_mod = 0;
    if (!inline_data) DCR_CHECK(dcr__et_mod_rev(e, khead, "write a prewarm report", &head_mod));
    uint32_t n_chunks = inline_data ? 0 : (uint32_t)((x->len + DCR__ET_CHUNK - 1) / DCR__ET_CHUNK);
    uint64_t gen = dcr__et_new_gen();
    if (!inline_data) DCR_CHECK(dcr__et_report_chunks(e, x, gen, n_chunks));
    size_t hlen = DCR__ET_REPORT_FIXED + (inline_data ? x->len : 0);
    uint8_t *head = malloc(hlen);
    if (head == NULL) return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    memcpy(head, dcr__et_tag_report, DCR__ET_TAG_BYTES);
    dcr__put_le(head + 8, x->len, 8);
    dcr__put_le(head + 16, gen, 8);
    dcr__put_le(head + 24, n_chunks, 4);
    if (inline_data && x->len > 0) memcpy(head + DCR__ET_REPORT_FIXED, x->data, x->len);
    /* The header switches to the new parts and every other generation's
     * parts go, in one txn that only succeeds if no other writer replaced
     * the header meanwhile (whose parts this would otherwise delete). An
     * inline report has no parts to lose: it replaces the header and
     * deletes every part unconditionally (a node's reports lie on each
     * refit's path, and the read of the mod revision is one more round
     * trip). A writer in parts racing it then fails its own header's
     * compare, which this txn changed, and writes its parts again; a reader
     * sees the old header with its parts or the new one, never a mixture,
     * as the parts go in the same txn. */
    dcr__et_key(e, kbase, "report-chunk/%08x/", x->receiver);
    dcr__et_key(e, kmine, "report-chunk/%08x/%016llx/", x->receiver, (unsigned long long)gen);
    dcr__et_prefix_end(kmine, kmine_end);
    dcr__et_prefix_end(kbase, kbase_end);
    if (!inline_data) json_array_append_new(cmp, dcr__et_cmp_rev(khead, "MOD", head_mod));
    json_array_append_new(ok, dcr__et_op_put(khead, head, hlen, 0));
    json_array_append_new(ok, dcr__et_op_delete(kbase, kmine));
    json_array_append_new(ok, dcr__et_op_delete(kmine_end, kbase_end));
    free(head);
    return DCR_OK;
}

static dcr_status_t dcr__et_report_put_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    json_t *cmp = json_array(), *ok = json_array();
    dcr_status_t st = dcr__et_report_ops(e, ctx, cmp, ok);
    return dcr__et_txn_ops(e, st, cmp, ok, "write a prewarm report", done_p);
}

static dcr_status_t dcr__et_report_put(dcr_control_t *c, uint32_t receiver, const void *data,
                                       size_t len)
{
    dcr__et_report_ctx_t x = {receiver, data, len};
    return dcr__et_loop(dcr__et_of(c), "write a prewarm report", dcr__et_report_put_step, &x);
}

typedef struct dcr__et_ack_report_ctx {
    dcr__et_ack_ctx_t ack;
    dcr__et_report_ctx_t report;
} dcr__et_ack_report_ctx_t;

/* The acknowledgments and the report in one txn, guarded by both
 * compares: all or none. A refused acknowledgment writes nothing (the parts
 * of a large report written first are no one's until a header names them,
 * and the next put of that report deletes them). */
static dcr_status_t dcr__et_ack_report_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    dcr__et_ack_report_ctx_t *x = ctx;
    json_t *cmp = json_array(), *ok = json_array();
    dcr_status_t st = dcr__et_ack_ops(e, &x->ack, cmp, ok);
    if (st == DCR_OK) st = dcr__et_report_ops(e, &x->report, cmp, ok);
    DCR_CHECK(dcr__et_txn_ops(e, st, cmp, ok, "acknowledge and report", done_p));
    /* A newer attempt, a stale copy or a racing report: read again. */
    if (!*done_p) e->cache_tau = 0;
    return DCR_OK;
}

static dcr_status_t dcr__et_ack_report(dcr_control_t *c, uint64_t tau, const uint32_t *receivers,
                                       size_t n, uint32_t id, const void *data, size_t len)
{
    dcr__et_ack_report_ctx_t x = {{tau, receivers, n}, {id, data, len}};
    return dcr__et_loop(dcr__et_of(c), "acknowledge and report", dcr__et_ack_report_step, &x);
}

/* Part i of a report as it was at revision rev: exactly want bytes. */
static dcr_status_t dcr__et_report_part(dcr__et_t *e, uint32_t receiver, uint64_t gen, uint32_t i,
                                        int64_t rev, uint8_t *out, size_t want)
{
    char key[DCR__ET_KEY_MAX];
    dcr__et_key(e, key, "report-chunk/%08x/%016llx/%08x", receiver, (unsigned long long)gen, i);
    json_t *req = json_pack("{s:o,s:o}", "key", dcr__et_jkey(key), "revision", dcr__et_jint(rev));
    json_t *resp = NULL;
    DCR_CHECK(dcr__et_post(e, "/v3/kv/range", req, "read a prewarm report part", &resp));
    dcr__et_kv_t kv;
    bool found = false;
    dcr_status_t st = dcr__et_one(e, resp, DCR__ET_CHUNK, &kv, &found);
    json_decref(resp);
    DCR_CHECK(st);
    if (!found || kv.len != want || strcmp(kv.key, key) != 0) {
        char expected[64];
        snprintf(expected, sizeof expected, "a part of %zu bytes, found %s", want,
                 found ? "another size" : "none");
        st = dcr__et_malformed(e, key, expected);
    } else if (want > 0) {
        memcpy(out, kv.value, want);
    }
    free(kv.value);
    return st;
}

static dcr_status_t dcr__et_report_get_locked(dcr__et_t *e, uint32_t receiver, void **data_p,
                                              size_t *len_p)
{
    char khead[DCR__ET_KEY_MAX];
    dcr__et_key(e, khead, "report/%08x", receiver);
    dcr__et_txn_t t;
    DCR_CHECK(dcr__et_txn(e, NULL, json_pack("[o]", dcr__et_op_range(khead, NULL, false)), NULL,
                          "read a prewarm report", &t));
    json_t *r;
    dcr__et_kv_t kv = {0};
    bool found = false;
    int64_t rev = t.revision;
    dcr_status_t st = dcr__et_txn_response(e, &t, 0, "response_range", &r);
    if (st == DCR_OK) st = dcr__et_one(e, r, DCR__ET_REPORT_FIXED + DCR__ET_CHUNK, &kv, &found);
    dcr__et_txn_free(&t);
    if (st == DCR_OK && !found) {
        st = dcr_error_set(DCR_ENOTFOUND, "%s: receiver %u has no prewarm report", e->where,
                           receiver);
    }
    uint64_t len = 0, gen = 0;
    uint32_t n_chunks = 0;
    if (st == DCR_OK) {
        const uint8_t *p = kv.value;
        bool ok =
            kv.len >= DCR__ET_REPORT_FIXED && memcmp(p, dcr__et_tag_report, DCR__ET_TAG_BYTES) == 0;
        if (ok) {
            len = dcr__le(p + 8, 8);
            gen = dcr__le(p + 16, 8);
            n_chunks = (uint32_t)dcr__le(p + 24, 4);
            ok = len <= DCR_CONTROL_REPORT_MAX &&
                 (n_chunks == 0 ? kv.len == DCR__ET_REPORT_FIXED + len
                                : kv.len == DCR__ET_REPORT_FIXED && len > DCR__ET_CHUNK &&
                                      n_chunks == (len + DCR__ET_CHUNK - 1) / DCR__ET_CHUNK);
        }
        if (!ok) {
            st = dcr__et_malformed(e, kv.key,
                                   "a report header tagged dcrrep1 of at most 64 MiB whose parts "
                                   "add up to its length");
        }
    }
    uint8_t *data = NULL;
    if (st == DCR_OK && len > 0 && (data = malloc(len)) == NULL) {
        st = dcr_error_set(DCR_ENOMEM, "%s: report of %llu bytes: allocation failed", e->where,
                           (unsigned long long)len);
    }
    if (st == DCR_OK && n_chunks == 0 && len > 0)
        memcpy(data, kv.value + DCR__ET_REPORT_FIXED, len);
    for (uint32_t i = 0; i < n_chunks && st == DCR_OK; i++) {
        size_t off = (size_t)i * DCR__ET_CHUNK;
        size_t want = len - off < DCR__ET_CHUNK ? len - off : DCR__ET_CHUNK;
        e->deadline_ms = dcr__et_mono_ms() + e->timeout_ms; /* as for writing */
        st = dcr__et_report_part(e, receiver, gen, i, rev, data + off, want);
    }
    free(kv.value);
    if (st != DCR_OK) {
        free(data);
        return st;
    }
    *data_p = data;
    *len_p = (size_t)len;
    return DCR_OK;
}

static dcr_status_t dcr__et_report_get(dcr_control_t *c, uint32_t receiver, void **data_p,
                                       size_t *len_p)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_begin(e);
    dcr_status_t st = dcr__et_report_get_locked(e, receiver, data_p, len_p);
    dcr__et_end(e);
    return st;
}

/* ---- membership
 * ------------------------------------------------------------------------------------ */

typedef struct dcr__et_membership_ctx {
    const char *coordinator;
    const uint32_t *sorted;
    size_t n;
} dcr__et_membership_ctx_t;

static dcr_status_t dcr__et_membership_put_step(dcr__et_t *e, void *ctx, bool *done_p)
{
    dcr__et_membership_ctx_t *x = ctx;
    dcr__et_state_t s;
    DCR_CHECK(dcr__et_load_state(e, x->coordinator, "record the membership", &s));
    dcr_status_t st = dcr__et_check_active(e, x->coordinator, &s);
    json_t *alive = NULL;
    if (st == DCR_OK) st = dcr__et_alive_op(e, x->coordinator, &alive);
    size_t len = DCR__ET_MEMBER_FIXED + x->n * 4;
    uint8_t *value = st == DCR_OK ? calloc(1, len) : NULL;
    if (st == DCR_OK && value == NULL) {
        json_decref(alive);
        st = dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    }
    if (st == DCR_OK) {
        memcpy(value, dcr__et_tag_member, DCR__ET_TAG_BYTES);
        memcpy(value + 8, x->coordinator, strlen(x->coordinator));
        dcr__put_le(value + 8 + DCR_CONTROL_ID_MAX, (uint64_t)dcr__control_now_ns(), 8);
        dcr__put_le(value + 16 + DCR_CONTROL_ID_MAX, (uint32_t)x->n, 4);
        for (size_t i = 0; i < x->n; i++)
            dcr__put_le(value + DCR__ET_MEMBER_FIXED + 4 * i, x->sorted[i], 4);
        char key[DCR__ET_KEY_MAX];
        json_t *ok = json_pack(
            "[o,o]", dcr__et_op_put(dcr__et_key(e, key, "membership"), value, len, 0), alive);
        free(value);
        dcr__et_txn_t t;
        st = dcr__et_txn(e, dcr__et_state_compares(e, x->coordinator, &s), ok, NULL,
                         "record the membership", &t);
        if (st == DCR_OK) {
            *done_p = t.succeeded;
            dcr__et_txn_free(&t);
        }
    }
    dcr__et_state_free(&s);
    return st;
}

static dcr_status_t dcr__et_membership_put(dcr_control_t *c, const char *coordinator,
                                           const uint32_t *members, size_t n)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_membership_ctx_t x = {coordinator, NULL, n};
    uint32_t *sorted = NULL;
    DCR_CHECK(dcr__et_sorted_copy(e, members, n, &sorted));
    x.sorted = sorted;
    dcr_status_t st = dcr__et_loop(e, "record the membership", dcr__et_membership_put_step, &x);
    free(sorted);
    return st;
}

static dcr_status_t dcr__et_membership_get(dcr_control_t *c, uint32_t *out, size_t cap, size_t *n_p)
{
    dcr__et_t *e = dcr__et_of(c);
    dcr__et_kv_t kv;
    bool found = false;
    DCR_CHECK(dcr__et_get(e, "membership",
                          DCR__ET_MEMBER_FIXED + (size_t)DCR_CONTROL_RECEIVERS_MAX * 4,
                          "read the membership", &kv, &found));
    dcr_status_t st = DCR_OK;
    if (!found) return dcr_error_set(DCR_ENOTFOUND, "%s: no membership was recorded yet", e->where);
    const uint8_t *p = kv.value;
    uint32_t n =
        kv.len >= DCR__ET_MEMBER_FIXED ? (uint32_t)dcr__le(p + 16 + DCR_CONTROL_ID_MAX, 4) : 0;
    uint32_t *members = malloc(((size_t)n + 1) * sizeof *members);
    if (kv.len < DCR__ET_MEMBER_FIXED || memcmp(p, dcr__et_tag_member, DCR__ET_TAG_BYTES) != 0 ||
        n > DCR_CONTROL_RECEIVERS_MAX || kv.len != DCR__ET_MEMBER_FIXED + (size_t)n * 4 ||
        members == NULL || !dcr__et_sorted_u32(p + DCR__ET_MEMBER_FIXED, n, members)) {
        st = members == NULL ? dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where)
                             : dcr__et_malformed(e, kv.key,
                                                 "a membership tagged dcrmem1 of ascending "
                                                 "receivers");
    }
    if (st == DCR_OK) {
        if (cap > 0 && n > 0) memcpy(out, members, (n < cap ? n : cap) * sizeof *out);
        *n_p = n;
    }
    free(members);
    free(kv.value);
    return st;
}

const dcr_control_ops_t dcr__control_etcd_ops = {
    .hdr = {.version = DCR_CONTROL_OPS_VERSION, .name = "etcd"},
    .props = {.networked = true, .durable = true},
    .create = dcr__et_create,
    .destroy = dcr__et_destroy,
    .read = dcr__et_read,
    .cas = dcr__et_cas,
    .prepare = dcr__et_prepare,
    .attempt = dcr__et_attempt,
    .required = dcr__et_required,
    .ack = dcr__et_ack,
    .acks = dcr__et_acks,
    .ack_many = dcr__et_ack_many,
    .ack_report = dcr__et_ack_report,
    .commit = dcr__et_commit,
    .report_put = dcr__et_report_put,
    .report_get = dcr__et_report_get,
    .membership_put = dcr__et_membership_put,
    .membership_get = dcr__et_membership_get,
    .position = dcr__et_position,
    .wait = dcr__et_wait,
};
