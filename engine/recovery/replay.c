/* Replay and repair of retained versions into receivers (dcr/recovery.h):
 * every manifest and payload is read and checked before the first write. */
#define _XOPEN_SOURCE 700
#include "dcr/recovery.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/log.h"

/* ---- replay ----------------------------------------------------------------- */

typedef struct replay_version {
    dcr_retain_manifest_t m;
    uint8_t **buf;
    size_t *len;
} replay_version_t;

static void replay_free(replay_version_t *rv, uint64_t n)
{
    for (uint64_t i = 0; rv && i < n; i++) {
        for (size_t j = 0; rv[i].buf && j < rv[i].m.n; j++) free(rv[i].buf[j]);
        free(rv[i].buf);
        free(rv[i].len);
        dcr_retain_manifest_free(&rv[i].m);
    }
    free(rv);
}

/* Every payload x->m lists, checked against its digest. */
static dcr_status_t fetch_payloads(dcr_objstore_t *s, replay_version_t *x, dcr_replay_stats_t *st)
{
    x->buf = calloc(x->m.n ? x->m.n : 1, sizeof(*x->buf));
    x->len = calloc(x->m.n ? x->m.n : 1, sizeof(*x->len));
    if (!x->buf || !x->len)
        return dcr_error_set(DCR_ENOMEM, "replay of version %" PRIu64, x->m.version);
    for (size_t j = 0; j < x->m.n; j++) {
        DCR_CHECK(dcr_retain_payload_get(s, &x->m, j, &x->buf[j], &x->len[j]));
        st->payloads++;
        st->bytes += x->len[j];
    }
    st->versions++;
    return DCR_OK;
}

/* The repair set of version x (dcr/recovery.h) replaces its retained
 * payloads when it is the committing attempt's and covers the interrupted
 * attempt tau; *why_p says why not otherwise (nothing changed then). */
static bool take_repair_set(dcr_objstore_t *s, replay_version_t *x, uint64_t tau, char *why,
                            size_t cap)
{
    dcr_retain_manifest_t rm;
    dcr_status_t st = dcr_retain_repair_read(s, x->m.version, &rm);
    if (st != DCR_OK) {
        snprintf(why, cap, "%s", dcr_error_detail());
    } else if (rm.tau != x->m.tau) {
        snprintf(why, cap, "its repair set is attempt %" PRIu64 "'s, not the committing %" PRIu64,
                 rm.tau, x->m.tau);
    } else if (tau == 0 || tau < rm.covers_from || tau > rm.tau) {
        snprintf(why, cap,
                 "its repair set covers attempts %" PRIu64 "..%" PRIu64
                 ", not the interrupted %" PRIu64 " (its records may touch other positions)",
                 rm.covers_from, rm.tau, tau);
    } else {
        dcr_retain_manifest_free(&x->m);
        x->m = rm;
        return true;
    }
    dcr_retain_manifest_free(&rm);
    return false;
}

/* Every manifest and payload of from+1..to, checked, before any write. With
 * repair_tau (a repair of a receiver interrupted in that attempt): version
 * from+1 comes from its repair set where that covers the attempt. why
 * (repair only) says why the retained payloads were taken instead. */
static dcr_status_t replay_fetch(dcr_objstore_t *s, uint64_t from, uint64_t to, bool repair,
                                 uint64_t repair_tau, replay_version_t *rv, dcr_replay_stats_t *st,
                                 char *why, size_t cap)
{
    uint64_t tau = 0;
    for (uint64_t v = from + 1; v <= to; v++) {
        replay_version_t *x = &rv[v - from - 1];
        dcr_status_t rs = dcr_retain_manifest_read(s, v, &x->m);
        if (rs == DCR_ENOTFOUND)
            return dcr_error_set(DCR_ENOTFOUND,
                                 "replay %" PRIu64 "..%" PRIu64 ": gap: version %" PRIu64
                                 " is not retained",
                                 from + 1, to, v);
        DCR_CHECK(rs);
        /* The parser ties from to version - 1; attempts only grow. */
        if (x->m.tau <= tau)
            return dcr_error_set(DCR_ETRANSPORT,
                                 "replay: version %" PRIu64 " came from attempt %" PRIu64
                                 ", not after version %" PRIu64 "'s attempt %" PRIu64,
                                 v, x->m.tau, v - 1, tau);
        tau = x->m.tau;
        if (repair && v == from + 1) st->repair_set = take_repair_set(s, x, repair_tau, why, cap);
        DCR_CHECK(fetch_payloads(s, x, st));
    }
    return DCR_OK;
}

static dcr_status_t replay_apply(dcr_receiver_t *const *r, int n, const replay_version_t *x)
{
    for (int k = 0; k < n; k++) {
        DCR_CHECK(dcr_receiver_begin_attempt(r[k], x->m.tau));
        for (size_t j = 0; j < x->m.n; j++) {
            dcr_ingest_t d;
            DCR_CHECK(dcr_receiver_apply_payload(r[k], x->buf[j], x->len[j], &d));
            if (d != DCR_INGEST_ACCEPTED)
                return dcr_error_set(DCR_EPAYLOAD,
                                     "replay: retained payload %s of version %" PRIu64
                                     " was not accepted (disposition %d)",
                                     x->m.entries[j].name, x->m.version, (int)d);
        }
    }
    return DCR_OK;
}

/* The repair rule: what repairs must hold overwrite records only: the
 * version's repair set (the committed run's records in overwrite form), or
 * its retained payloads when the committed attempt was an overwrite retry
 * (both built from B^(x-1) and the candidate over the complete changed
 * set). An XOR record flips whatever the receiver holds, so over a
 * partially applied attempt it would undo the writes that landed. why:
 * why the repair set was not used, for the refusal. */
static dcr_status_t all_overwrite(const replay_version_t *x, const dcr_payload_key_t *key,
                                  uint64_t max_raw, const char *why)
{
    dcr_payload_t *p = NULL;
    DCR_CHECK(dcr_payload_create(&p));
    dcr_payload_policy_t policy = {key && key->set ? key : NULL, max_raw};
    dcr_status_t st = DCR_OK;
    for (size_t j = 0; st == DCR_OK && j < x->m.n; j++) {
        st = dcr_payload_decode_with(p, x->buf[j], x->len[j], &policy);
        for (size_t i = 0; st == DCR_OK && i < dcr_payload_item_count(p); i++) {
            dcr_payload_item_t it;
            st = dcr_payload_item(p, i, &it);
            if (st == DCR_OK && it.encoding != DCR_ENCODING_OVERWRITE)
                st = dcr_error_set(DCR_EUNSUPPORTED,
                                   "repair: version %" PRIu64 " (attempt %" PRIu64
                                   ") carries %s records (payload %s, tensor %s); only complete "
                                   "overwrite records repair a partially applied attempt%s%s",
                                   x->m.version, x->m.tau, dcr_encoding_name(it.encoding),
                                   x->m.entries[j].name, it.name, why[0] ? ", and " : "", why);
        }
    }
    dcr_payload_destroy(p);
    return st;
}

/* Replay (repair false) or repair (true: version from+1 must be all
 * overwrite, from its repair set where that covers attempt tau) of
 * from+1..to into r[0, n). */
static dcr_status_t chain(dcr_objstore_t *s, const dcr_payload_key_t *key, dcr_receiver_t *const *r,
                          int n, uint64_t from, uint64_t to, bool repair, uint64_t tau,
                          dcr_replay_stats_t *stats_p)
{
    const char *what = repair ? "repair" : "replay";
    if (s == NULL || (r == NULL && n > 0) || n < 0 || to < from)
        return dcr_error_set(DCR_EINVAL, "%s: bad arguments (versions %" PRIu64 "..%" PRIu64 ")",
                             what, from, to);
    if (repair && to == from)
        return dcr_error_set(DCR_ENOTFOUND,
                             "repair from version %" PRIu64
                             ": no version committed after it yet (its overwrite records do not "
                             "exist)",
                             from);
    uint64_t t0 = dcr_clock_ns();
    dcr_replay_stats_t st = {0};
    uint64_t nv = to - from;
    replay_version_t *rv = calloc(nv ? nv : 1, sizeof(*rv));
    dcr_status_t rs =
        rv ? DCR_OK : dcr_error_set(DCR_ENOMEM, "%s of %" PRIu64 " versions", what, nv);
    char why[400] = "";
    if (rs == DCR_OK) rs = replay_fetch(s, from, to, repair, tau, rv, &st, why, sizeof why);
    /* The check decodes what the receivers will: bounded as they bound it. */
    uint64_t max_raw = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = dcr_receiver_payload_bound(r[i]);
        if (b > max_raw) max_raw = b;
    }
    if (rs == DCR_OK && repair) rs = all_overwrite(&rv[0], key, max_raw, why);
    for (uint64_t i = 0; rs == DCR_OK && i < nv; i++) rs = replay_apply(r, n, &rv[i]);
    replay_free(rv, nv);
    st.seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
    if (stats_p) *stats_p = st;
    return rs;
}

dcr_status_t dcr_restore_replay(dcr_objstore_t *s, dcr_receiver_t *const *r, int n, uint64_t from,
                                uint64_t to, dcr_replay_stats_t *stats_p)
{
    return chain(s, NULL, r, n, from, to, false, 0, stats_p);
}

dcr_status_t dcr_restore_repair(dcr_objstore_t *s, const dcr_payload_key_t *key,
                                dcr_receiver_t *const *r, int n, uint64_t from, uint64_t to,
                                uint64_t tau, dcr_replay_stats_t *stats_p)
{
    return chain(s, key, r, n, from, to, true, tau, stats_p);
}
