/* ctest-labels: integration
 *
 * Recovery without a full reload (deploy/restorer.h): an in-process
 * bench over the object store retains its committed versions; receivers
 * dense-loaded with an older version by the role world (the oracle, which
 * shares nothing with the refit) replay the retained versions and must then
 * equal, byte for byte, receivers dense-loaded with the newest version. A
 * gap in the chain or a tampered payload leaves the receivers untouched.
 * The node's restorer classifies receivers from resident files and from
 * memory (clean, replay, dense) and its counts and byte figures are checked
 * against what the store lists. Bytes moved for 1, 3 and 8 versions behind
 * are printed against a dense refit's (DCR_RESTORE_SCALE and
 * DCR_RESTORE_LAYERS change the model shape for a measurement).
 *
 * Repair (the rule of restore.h): the constructor builds, from B^U and the
 * candidate U+1, the XOR attempt and the overwrite retry, then U+2's XOR
 * attempt. Receivers that took the XOR attempt up to a kill point (no item,
 * the first, a third, half, all but the last, all) and are repaired with
 * the retry's records (plus U+2) equal a dense refit, at every point; the
 * same receivers re-applying the XOR records (a replay from U) do not,
 * once anything landed; a repair offered XOR records is refused before any
 * write. Then the node's restorer with live resident files: a child
 * process killed by SIGKILL mid-apply leaves dirty files, and its
 * successor repairs (kind repair), checks against the oracle, and serves
 * only after (dcr_restorer_serves). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli_run.h"

#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/objstore.h"
#include "dcr/resident.h"
#include "dcr/recovery.h"
#include "../engine/construct/keep_sink.h"
#include "workloads/tmp_dir.h"
#include "restore_bench.h"
#include "workloads/harness/bench.h"
#include "deploy/restorer.h"
#include "deploy/roles.h"
#include "deploy/world.h"

#define LAST 9 /* versions committed by the bench */

static dcr_bench_config_t g_cfg;
static char g_workdir[300];
static dcr_objstore_t *g_store;
static int g_per;

static int group_setup(void **state)
{
    if (tmp_dir_setup(state)) return -1;
    g_cfg = dcr_bench_config_default();
    g_cfg.run.scenario.scale = restore_env_int("DCR_RESTORE_SCALE", 64);
    g_cfg.run.scenario.layers = restore_env_int("DCR_RESTORE_LAYERS", 2);
    dcr_bench_result_t r;
    if (restore_bench_run(&g_cfg, LAST, 8, g_workdir, sizeof g_workdir, &r, &g_store)) return -1;
    for (int i = 0; i < r.nrefits; i++)
        if (r.refits[i].retain_bytes != r.refits[i].payload_bytes) {
            fprintf(stderr, "refit %d retained %lld bytes of %lld\n", i,
                    (long long)r.refits[i].retain_bytes, (long long)r.refits[i].payload_bytes);
            return -1;
        }
    dcr_bench_result_free(&r);
    g_per = g_cfg.run.serve.gpus_per_node;
    return 0;
}

static int group_teardown(void **state)
{
    dcr_objstore_destroy(g_store);
    return tmp_dir_teardown(state);
}

/* Node 0's receivers, dense-loaded by world w at version v. */
static void dense_receivers(dcr_role_world_t *w, uint64_t v, dcr_receiver_t **r)
{
    assert_int_equal(dcr_role_world_advance(w, v), DCR_OK);
    for (int k = 0; k < g_per; k++) assert_int_equal(dcr_role_world_receiver(w, k, &r[k]), DCR_OK);
}

static void assert_equal_to(dcr_receiver_t *const *got, dcr_receiver_t *const *want,
                            const char *what)
{
    for (int k = 0; k < g_per; k++) {
        const char *param = NULL;
        int64_t elem = 0;
        if (!dcr_receiver_equal(got[k], want[k], &param, &elem))
            fail_msg("%s: receiver %d differs at %s[%lld]", what, k, param, (long long)elem);
    }
}

static void destroy_all(dcr_receiver_t **r)
{
    for (int k = 0; k < g_per; k++) {
        dcr_receiver_destroy(r[k]);
        r[k] = NULL;
    }
}

/* Payload bytes the store lists for versions from+1..to (the VERSION
 * manifests and any repair set aside), summed from the listing, not the
 * manifests. */
static uint64_t listed_bytes(uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (uint64_t v = from + 1; v <= to; v++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "versions/v%llu/", (unsigned long long)v);
        dcr_objstore_entry_t *e = NULL;
        size_t n = 0;
        assert_int_equal(dcr_objstore_list_all(g_store, prefix, &e, &n), DCR_OK);
        assert_true(n > 1);
        for (size_t i = 0; i < n; i++)
            if (strstr(e[i].key, "/payload-")) sum += e[i].size; /* not VERSION, repair sets */
        free(e);
    }
    return sum;
}

static void test_replay_equals_dense_refit(void **state)
{
    (void)state;
    /* The oracle's world outlives its receivers (they borrow its inventory). */
    dcr_role_world_t *ow = NULL, *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dcr_receiver_t *want[8] = {0};
    dense_receivers(ow, LAST, want);
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    static const int behind[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof behind / sizeof behind[0]; i++) {
        uint64_t from = LAST - (uint64_t)behind[i];
        assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
        dcr_receiver_t *r[8] = {0};
        dense_receivers(w, from, r);
        dcr_replay_stats_t st;
        if (dcr_restore_replay(g_store, r, g_per, from, LAST, &st) != DCR_OK)
            fail_msg("replay %llu..%d: %s", (unsigned long long)from + 1, LAST, dcr_error_detail());
        assert_equal_to(r, want, "after replay");
        assert_int_equal(st.versions, (uint64_t)behind[i]);
        assert_int_equal(st.bytes, listed_bytes(from, LAST));
        print_message("replay %d behind: %llu payloads, %llu bytes vs dense %lld (%.1f%%)\n",
                      behind[i], (unsigned long long)st.payloads, (unsigned long long)st.bytes,
                      (long long)dense, 100.0 * (double)st.bytes / (double)dense);
        destroy_all(r);
        dcr_role_world_destroy(w);
    }
    destroy_all(want);
    dcr_role_world_destroy(ow);
}

/* Removes key or flips a bit of it, expects the replay 3..LAST to fail with
 * `expect` without writing, then puts the key back. */
static void with_damage(const char *key, bool remove, dcr_status_t expect)
{
    uint8_t *keep = NULL;
    size_t len = 0;
    assert_int_equal(dcr_objstore_get(g_store, key, 1 << 26, NULL, &keep, &len), DCR_OK);
    if (remove) {
        assert_int_equal(dcr_objstore_delete(g_store, key), DCR_OK);
    } else {
        uint8_t *bad = malloc(len);
        memcpy(bad, keep, len);
        bad[len - 1] ^= 0x40;
        assert_int_equal(dcr_objstore_put(g_store, key, bad, len, NULL), DCR_OK);
        free(bad);
    }
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_receiver_t *r[8] = {0}, *before[8] = {0};
    dense_receivers(w, 3, r);
    dense_receivers(w, 3, before);
    assert_int_equal(dcr_restore_replay(g_store, r, g_per, 3, LAST, NULL), expect);
    /* Nothing was written: the receivers still hold version 3. */
    assert_equal_to(r, before, "after a refused replay");
    destroy_all(r);
    destroy_all(before);
    dcr_role_world_destroy(w);
    assert_int_equal(dcr_objstore_put(g_store, key, keep, len, NULL), DCR_OK);
    free(keep);
}

static void test_gap_or_bad_payload_writes_nothing(void **state)
{
    (void)state;
    /* A version missing from the chain. */
    with_damage("versions/v6/VERSION", true, DCR_ENOTFOUND);
    /* A payload of the last version tampered with. */
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, LAST, &m), DCR_OK);
    assert_true(m.n > 0);
    char key[256];
    snprintf(key, sizeof key, "versions/v%d/%s", LAST, m.entries[m.n - 1].name);
    dcr_retain_manifest_free(&m);
    with_damage(key, false, DCR_EDIGEST);
    /* Beyond the window: version 1 was pruned when version 9 committed. */
    assert_int_equal(dcr_retain_manifest_read(g_store, 1, &m), DCR_ENOTFOUND);
}

/* Node 0's restorer over workdir's resident files (live: weights in them). */
static dcr_restorer_t *restorer_at(dcr_role_world_t *w, const char *workdir, bool live)
{
    dcr_restorer_config_t rc = {&g_cfg.run, w, workdir, 0, 0, g_per, true, live, false};
    dcr_restorer_t *R = NULL;
    assert_int_equal(dcr_restorer_create(&rc, &R), DCR_OK);
    return R;
}

static dcr_restorer_t *restorer(dcr_role_world_t *w)
{
    return restorer_at(w, g_workdir, false);
}

static void expect_counts(dcr_restorer_t *R, uint64_t clean, uint64_t replay, uint64_t dense)
{
    uint64_t c[DCR_RESTORE_KINDS], b[DCR_RESTORE_KINDS];
    dcr_restorer_counts(R, c, b);
    assert_int_equal(c[DCR_RESTORE_CLEAN], clean);
    assert_int_equal(c[DCR_RESTORE_REPLAY], replay);
    assert_int_equal(c[DCR_RESTORE_REPAIR], 0);
    assert_int_equal(c[DCR_RESTORE_DENSE], dense);
    assert_int_equal(c[DCR_RESTORE_ANCHOR], 0);
}

static void test_restorer_classifies(void **state)
{
    (void)state;
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_role_world_t *ow = NULL; /* the oracle's own world for the final comparisons */
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dcr_receiver_t *want[8] = {0};
    dense_receivers(ow, LAST, want);
    int64_t ckpt = dcr_inventory_bytes(w->sc->inventory);

    /* A fresh process, no resident files: dense; files saved at version 6. */
    dcr_receiver_t *r[8] = {0};
    dcr_restorer_t *R = restorer(w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, 6), DCR_OK);
    expect_counts(R, 0, 0, (uint64_t)g_per);
    dcr_restorer_destroy(R);
    destroy_all(r); /* the process dies */

    /* Its successor holds version 6 clean from the files: replay 7..9. */
    R = restorer(w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, LAST), DCR_OK);
    expect_counts(R, 0, (uint64_t)g_per, 0);
    uint64_t c[DCR_RESTORE_KINDS], b[DCR_RESTORE_KINDS];
    dcr_restorer_counts(R, c, b);
    assert_int_equal(b[DCR_RESTORE_REPLAY], (uint64_t)g_per * listed_bytes(6, LAST));
    assert_equal_to(r, want, "restored by replay");
    dcr_restorer_destroy(R);
    destroy_all(r);

    /* The next one holds version 9 clean: rejoins at once. */
    R = restorer(w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, LAST), DCR_OK);
    expect_counts(R, (uint64_t)g_per, 0, 0);
    assert_equal_to(r, want, "clean");
    /* In memory: a payload reached receiver 0 after its clean point
     * (version 9's own, applied again to version 9: bytes of no version):
     * dirty, hence restored from its resident copy of version 9 (a clean
     * restore moving nothing); the others, clean in memory, are left. */
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(g_store, LAST, &m), DCR_OK);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(dcr_retain_payload_get(g_store, &m, 0, &buf, &len), DCR_OK);
    assert_int_equal(dcr_receiver_begin_attempt(r[0], m.tau), DCR_OK);
    dcr_ingest_t d;
    assert_int_equal(dcr_receiver_apply_payload(r[0], buf, len, &d), DCR_OK);
    /* Receiver 0 now holds neither 9 nor anything else known. */
    assert_true(dcr_restorer_dirty(R, r));
    assert_int_equal(dcr_restorer_restore(R, r, LAST, LAST), DCR_OK);
    assert_false(dcr_restorer_dirty(R, r));
    expect_counts(R, (uint64_t)g_per + 1, 0, 0);
    assert_equal_to(r, want, "after the dirty one's resident copy");
    dcr_restorer_destroy(R);
    /* Without resident files the dirty one is refitted densely. */
    dcr_restorer_config_t nrc = {&g_cfg.run, w, g_workdir, 0, 0, g_per, false, false, false};
    assert_int_equal(dcr_restorer_create(&nrc, &R), DCR_OK);
    assert_int_equal(dcr_restorer_committed(R, r, LAST), DCR_OK);
    assert_int_equal(dcr_receiver_begin_attempt(r[0], m.tau + 1), DCR_OK);
    assert_int_equal(dcr_receiver_apply_payload(r[0], buf, len, &d), DCR_OK);
    assert_true(dcr_restorer_dirty(R, r));
    assert_int_equal(dcr_restorer_restore(R, r, LAST, LAST), DCR_OK);
    expect_counts(R, 0, 0, 1);
    assert_equal_to(r, want, "after a dense refit of the dirty one");
    free(buf);
    dcr_retain_manifest_free(&m);
    dcr_restorer_destroy(R);
    destroy_all(r);

    /* A save interrupted mid-copy: receiver 1's file says dirty. */
    char path[400];
    snprintf(path, sizeof path, "%s/resident/r1.dcrs", g_workdir);
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, want[1], 1, &f), DCR_OK);
    dcr_resident_mark_dirty(f);
    dcr_resident_close(f);
    R = restorer(w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, LAST), DCR_OK);
    expect_counts(R, (uint64_t)g_per - 1, 0, 1);
    assert_equal_to(r, want, "after a dense refit of the interrupted one");
    dcr_restorer_destroy(R);
    destroy_all(r);

    /* The run's totals, from every restorer's lines. */
    uint64_t tc[DCR_RESTORE_KINDS], tb[DCR_RESTORE_KINDS], td[DCR_RESTORE_KINDS];
    double ts[DCR_RESTORE_KINDS];
    assert_int_equal(dcr_restore_totals(g_workdir, tc, tb, td, ts), DCR_OK);
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) assert_true(ts[k] >= 0);
    assert_true(ts[DCR_RESTORE_REPLAY] > 0);
    assert_int_equal(tc[DCR_RESTORE_CLEAN], 2 * (uint64_t)g_per);
    assert_int_equal(tc[DCR_RESTORE_REPLAY], (uint64_t)g_per);
    assert_int_equal(tc[DCR_RESTORE_DENSE], (uint64_t)g_per + 2);
    assert_int_equal(tb[DCR_RESTORE_DENSE], ((uint64_t)g_per + 2) * (uint64_t)ckpt);
    /* By cause: four fresh restorers' receivers (the first, the replay,
     * the clean rejoin, the interrupted save), two dirty ones in memory. */
    uint64_t cause[DCR_RESTORE_CAUSES];
    assert_int_equal(dcr_restore_causes(g_workdir, cause), DCR_OK);
    assert_int_equal(cause[DCR_RESTORE_START], 4 * (uint64_t)g_per);
    assert_int_equal(cause[DCR_RESTORE_BEHIND], 0);
    assert_int_equal(cause[DCR_RESTORE_DIRTY], 2);
    assert_int_equal(tb[DCR_RESTORE_CLEAN], 0);
    assert_int_equal(td[DCR_RESTORE_REPLAY], (uint64_t)g_per * (uint64_t)ckpt);
    destroy_all(want);
    dcr_role_world_destroy(ow);
    dcr_role_world_destroy(w);
}

static json_int_t kind_field(json_t *kinds, const char *kind, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(kinds, kind), field));
}

/* The whole path across processes: rollout-node processes killed by SIGKILL
 * and restarted restore from their resident files by clean rejoin or by
 * replay (a kill mid-save would be dense), the verifier process finds every
 * timed refit bit-exact, and the results count the restores by kind. */
static void test_processes_restore_without_reload(void **state)
{
    (void)state;
    result_t *r = malloc(sizeof *r);
    assert_non_null(r);
    run(r, "bench --processes --sigkill-every 2 --scale 64 --layers 2 --seed 7 --warmup 0 "
           "--refits 8 --json");
    if (r->rc != 0) fail_msg("dcr bench: rc %d: %s", r->rc, r->err);
    json_error_t err;
    json_t *j = json_loads(r->out, 0, &err);
    if (!j) fail_msg("not JSON: %s", err.text);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_int_t kills =
        json_integer_value(json_object_get(json_object_get(j, "processes"), "sigkills"));
    assert_true(kills >= 2);
    json_t *k = json_object_get(j, "restores_by_kind");
    assert_non_null(k);
    json_int_t clean = kind_field(k, "clean", "count"), replay = kind_field(k, "replay", "count");
    json_int_t dense = kind_field(k, "dense", "count");
    json_int_t repair = kind_field(k, "repair", "count");
    /* Each restart restores the node's two receivers (one restarted after
     * the last commit may not have written its lines when the run ends);
     * a survivor of a killed attempt restores its own before the retry.
     * Live resident weights: a node killed after its first write, and the
     * survivors of its attempt, are repaired (in the overwrite retry, or
     * verified when their attempt committed), never refitted densely for
     * it; every other kill (at "done") leaves one. */
    json_int_t all = clean + replay + dense + repair;
    assert_true(all >= 2 * (kills - 1));
    assert_true(clean + replay + repair >= 2);
    assert_true(repair >= 1);
    assert_true(kind_field(k, "repair", "bytes") * 5 < kind_field(k, "repair", "dense_bytes"));
    assert_int_equal(kind_field(k, "clean", "bytes"), 0);
    /* One version behind at 3% changes: far below a dense refit. */
    if (replay > 0)
        assert_true(kind_field(k, "replay", "bytes") * 5 < kind_field(k, "replay", "dense_bytes"));
    print_message("restores: %lld clean, %lld replay, %lld repair, %lld dense after %lld kills\n",
                  (long long)clean, (long long)replay, (long long)repair, (long long)dense,
                  (long long)kills);
    json_decref(j);
    free(r);
}

/* ---- repair ----------------------------------------------------------------- */

#define U 3 /* the version the interrupted attempt starts from */

typedef struct attempts {
    keep_sink_t xor1, over1, xor2; /* U -> U+1 XOR and overwrite retry; U+1 -> U+2 XOR */
} attempts_t;

static void construct_attempts(attempts_t *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->xor1.lock, NULL);
    pthread_mutex_init(&a->over1.lock, NULL);
    pthread_mutex_init(&a->xor2.lock, NULL);
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    assert_int_equal(dcr_role_world_advance(w, U), DCR_OK);
    dcr_construct_config_t cc = dcr_run_construct_config(&w->cfg, w->sc);
    dcr_constructor_t *con = NULL;
    assert_int_equal(dcr_constructor_create(w->sc->layout, &cc, w->shards, &con), DCR_OK);
    uint8_t *xa = NULL;
    assert_int_equal(dcr_run_xor_policy(w->sc, &w->serve, w->cfg.mode, &xa), DCR_OK);
    assert_int_equal(dcr_role_world_advance(w, U + 1), DCR_OK);
    dcr_payload_sink_t s1 = {keep_submit, &a->xor1}, s2 = {keep_submit, &a->over1};
    dcr_payload_sink_t s3 = {keep_submit, &a->xor2};
    dcr_construct_stats_t st;
    assert_int_equal(dcr_constructor_run(con, w->shards, 100, xa, false, &s1, &st), DCR_OK);
    assert_true(st.xor_items > 0);
    /* The retry: the same candidate, the unchanged B^U, all overwrites. */
    assert_int_equal(dcr_constructor_run(con, w->shards, 101, xa, true, &s2, &st), DCR_OK);
    assert_int_equal(st.xor_items, 0);
    assert_true(st.overwrite_items > 0);
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    assert_int_equal(dcr_role_world_advance(w, U + 2), DCR_OK);
    assert_int_equal(dcr_constructor_run(con, w->shards, 102, xa, false, &s3, &st), DCR_OK);
    free(xa);
    dcr_constructor_destroy(con);
    dcr_role_world_destroy(w);
}

static void free_attempts(attempts_t *a)
{
    keep_clear(&a->xor1);
    keep_clear(&a->over1);
    keep_clear(&a->xor2);
}

/* Retains what k holds as version v of store s. */
static void put_version(dcr_objstore_t *s, uint64_t v, uint64_t tau, const keep_sink_t *k)
{
    char(*names)[64] = calloc(k->n + 1, 64);
    const char **np = calloc(k->n + 1, sizeof *np);
    const uint8_t **bp = calloc(k->n + 1, sizeof *bp);
    size_t *lp = calloc(k->n + 1, sizeof *lp);
    for (size_t i = 0; i < k->n; i++) {
        snprintf(names[i], 64, "payload-%d-%llu.dcrp", k->items[i].owner,
                 (unsigned long long)k->items[i].id);
        np[i] = names[i];
        bp[i] = k->items[i].data;
        lp[i] = k->items[i].len;
    }
    assert_int_equal(dcr_retain_put(s, v, tau, k->n, np, bp, lp), DCR_OK);
    free(names);
    free(np);
    free(bp);
    free(lp);
}

static dcr_objstore_t *store_at(const char *dir)
{
    dcr_objstore_config_t oc = {.url = dir};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&oc, &s), DCR_OK);
    return s;
}

/* Items of the attempt k holds, in apply order. */
static size_t count_items(const keep_sink_t *k)
{
    dcr_payload_t *p = NULL;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    size_t n = 0;
    for (size_t i = 0; i < k->n; i++) {
        assert_int_equal(dcr_payload_decode(p, k->items[i].data, k->items[i].len), DCR_OK);
        n += dcr_payload_item_count(p);
    }
    dcr_payload_destroy(p);
    return n;
}

/* Applies the first `upto` items of attempt k (tau) to r: a kill there. */
static int apply_prefix(dcr_receiver_t *r, const keep_sink_t *k, uint64_t tau, size_t upto)
{
    if (dcr_receiver_begin_attempt(r, tau) != DCR_OK) return -1;
    dcr_payload_t *p = NULL;
    if (dcr_payload_create(&p) != DCR_OK) return -1;
    size_t done = 0;
    for (size_t i = 0; i < k->n && done < upto; i++) {
        if (dcr_payload_decode(p, k->items[i].data, k->items[i].len) != DCR_OK) return -1;
        for (size_t j = 0; j < dcr_payload_item_count(p) && done < upto; j++, done++)
            if (dcr_receiver_apply_item(r, p, j) != DCR_OK) return -1;
    }
    dcr_payload_destroy(p);
    return 0;
}

static bool all_equal(dcr_receiver_t *const *got, dcr_receiver_t *const *want)
{
    for (int k = 0; k < g_per; k++)
        if (!dcr_receiver_equal(got[k], want[k], NULL, NULL)) return false;
    return true;
}

static void test_repair_rule_at_kill_points(void **state)
{
    (void)state;
    attempts_t a;
    construct_attempts(&a);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/repair-over", tmp_dir);
    dcr_objstore_t *over = store_at(dir); /* U+1 committed by the overwrite retry */
    put_version(over, U + 1, 101, &a.over1);
    put_version(over, U + 2, 102, &a.xor2);
    snprintf(dir, sizeof dir, "%s/repair-xor", tmp_dir);
    dcr_objstore_t * xor = store_at(dir); /* U+1 committed by the XOR attempt */
    put_version(xor, U + 1, 100, &a.xor1);
    put_version(xor, U + 2, 102, &a.xor2);

    dcr_role_world_t *ow = NULL, *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_receiver_t *want1[8] = {0}, *want2[8] = {0};
    dense_receivers(ow, U + 1, want1);
    dense_receivers(ow, U + 2, want2);
    size_t n = count_items(&a.xor1);
    assert_true(n >= 4);
    const size_t points[] = {0, 1, n / 3, n / 2, n - 1, n};
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        dcr_receiver_t *r[8] = {0}, *naive[8] = {0}, *before[8] = {0};
        dense_receivers(w, U, r);
        dense_receivers(w, U, naive);
        dense_receivers(w, U, before);
        for (int k = 0; k < g_per; k++) {
            assert_int_equal(apply_prefix(r[k], &a.xor1, 100, points[i]), 0);
            assert_int_equal(apply_prefix(naive[k], &a.xor1, 100, points[i]), 0);
            assert_int_equal(apply_prefix(before[k], &a.xor1, 100, points[i]), 0);
        }
        /* XOR records offered for a repair: refused, nothing written. */
        assert_int_equal(
            dcr_restore_repair(xor, &g_cfg.run.payload_key, r, g_per, U, U + 2, 100, NULL),
            DCR_EUNSUPPORTED);
        assert_true(all_equal(r, before));
        /* The rule: the retry's overwrite records, then U+2. */
        dcr_replay_stats_t st;
        if (dcr_restore_repair(over, &g_cfg.run.payload_key, r, g_per, U, U + 2, 100, &st) !=
            DCR_OK)
            fail_msg("repair at kill point %zu/%zu: %s", points[i], n, dcr_error_detail());
        if (!all_equal(r, want2))
            fail_msg("repair at kill point %zu of %zu items differs from a dense refit", points[i],
                     n);
        assert_int_equal(st.versions, 2);
        assert_false(st.repair_set); /* the store holds no repair set */
        /* Re-applying the XOR attempt (a replay from U) is exact only when
         * nothing of it had landed. */
        assert_int_equal(dcr_restore_replay(xor, naive, g_per, U, U + 1, NULL), DCR_OK);
        if (points[i] == 0)
            assert_true(all_equal(naive, want1));
        else
            assert_false(all_equal(naive, want1));
        if (i == 0) {
            uint64_t ob = 0, xb = 0;
            for (size_t j = 0; j < a.over1.n; j++) ob += a.over1.items[j].len;
            for (size_t j = 0; j < a.xor1.n; j++) xb += a.xor1.items[j].len;
            print_message("repair records of U+1 (overwrite retry) %llu bytes, its XOR attempt "
                          "%llu (%.2fx); repair U..U+2 moved %llu bytes vs dense %lld (%.1f%%)\n",
                          (unsigned long long)ob, (unsigned long long)xb, (double)ob / (double)xb,
                          (unsigned long long)st.bytes, (long long)dense,
                          100.0 * (double)st.bytes / (double)dense);
        }
        destroy_all(r);
        destroy_all(naive);
        destroy_all(before);
    }
    /* No version after U yet: nothing to repair with. */
    dcr_receiver_t *r[8] = {0};
    dense_receivers(w, U, r);
    assert_int_equal(dcr_restore_repair(over, NULL, r, g_per, U + 2, U + 2, 100, NULL),
                     DCR_ENOTFOUND);
    destroy_all(r);
    destroy_all(want1);
    destroy_all(want2);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(ow);
    dcr_objstore_destroy(over);
    dcr_objstore_destroy(xor);
    free_attempts(&a);
}

static dcr_restorer_t *live_restorer(dcr_role_world_t *w, const char *workdir)
{
    return restorer_at(w, workdir, true);
}

/* A process that rejoins clean at U from the files under wd, applies `items` of attempt
 * tau to every receiver and dies by SIGKILL. */
static void killed_mid_apply_in(const char *wd, const keep_sink_t *x, uint64_t tau, size_t items)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dcr_role_world_t *w = NULL; /* the process's own, at its start */
        if (dcr_role_world_create(&g_cfg.run, &w) != DCR_OK) _exit(2);
        dcr_restorer_t *C = live_restorer(w, wd);
        dcr_receiver_t *c[8] = {0};
        if (dcr_restorer_restore(C, c, 0, U) != DCR_OK) _exit(3);
        uint64_t counts[DCR_RESTORE_KINDS], bytes[DCR_RESTORE_KINDS];
        dcr_restorer_counts(C, counts, bytes);
        if (counts[DCR_RESTORE_CLEAN] != (uint64_t)g_per) _exit(4);
        for (int k = 0; k < g_per; k++) {
            dcr_restorer_begin(C, k, tau);
            if (apply_prefix(c[k], x, tau, items) != 0) _exit(5);
            if (dcr_restorer_serves(C, c, k)) _exit(6); /* the readers' check */
        }
        raise(SIGKILL);
        _exit(7);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        fail_msg("child exited %d before its kill", WEXITSTATUS(status));
}

static void killed_mid_apply(const char *wd, const keep_sink_t *x, size_t items)
{
    killed_mid_apply_in(wd, x, 100, items);
}

/* A first process under wd: dense at U, its weights moved into the files. */
static void first_process(const char *wd)
{
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_receiver_t *r[8] = {0};
    dcr_restorer_t *R = live_restorer(w, wd);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U), DCR_OK);
    for (int k = 0; k < g_per; k++) assert_true(dcr_restorer_serves(R, r, k));
    destroy_all(r); /* receivers first: their bytes are the restorer's mappings */
    dcr_restorer_destroy(R);
    dcr_role_world_destroy(w);
}

/* A fresh process's restorer under wd, with its own world (*w_p). */
static dcr_restorer_t *next_process(const char *wd, dcr_role_world_t **w_p)
{
    dcr_role_world_destroy(*w_p);
    *w_p = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, w_p), DCR_OK);
    return live_restorer(*w_p, wd);
}

static uint64_t retained_bytes(dcr_objstore_t *s, uint64_t from, uint64_t to)
{
    uint64_t moved = 0;
    for (uint64_t v = from; v <= to; v++) {
        dcr_retain_manifest_t m;
        assert_int_equal(dcr_retain_manifest_read(s, v, &m), DCR_OK);
        for (size_t i = 0; i < m.n; i++) moved += m.entries[i].bytes;
        dcr_retain_manifest_free(&m);
    }
    return moved;
}

static void expect_kind(dcr_restorer_t *R, dcr_restore_kind_t kind, uint64_t count, uint64_t bytes)
{
    uint64_t c[DCR_RESTORE_KINDS], b[DCR_RESTORE_KINDS];
    dcr_restorer_counts(R, c, b);
    assert_int_equal(c[kind], count);
    assert_int_equal(b[kind], bytes);
}

/* What the live tests share: the attempts, a run directory with its store,
 * the oracle's receivers at U+2 (in the oracle's own world). */
typedef struct live {
    attempts_t a;
    char wd[400];
    dcr_objstore_t *s;
    dcr_role_world_t *ow;
    dcr_receiver_t *want[8];
    size_t n; /* items of the XOR attempt U -> U+1 */
} live_t;

static void live_setup(live_t *L, const char *name)
{
    memset(L, 0, sizeof *L);
    construct_attempts(&L->a);
    char dir[500];
    snprintf(L->wd, sizeof L->wd, "%s/%s", tmp_dir, name);
    assert_int_equal(mkdir(L->wd, 0700), 0);
    dcr_rundir_objstore_dir(L->wd, dir, sizeof dir);
    L->s = store_at(dir);
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &L->ow), DCR_OK);
    dense_receivers(L->ow, U + 2, L->want);
    L->n = count_items(&L->a.xor1);
}

static void live_teardown(live_t *L)
{
    destroy_all(L->want);
    dcr_role_world_destroy(L->ow);
    dcr_objstore_destroy(L->s);
    free_attempts(&L->a);
}

static void test_restorer_repairs_a_killed_receiver(void **state)
{
    (void)state;
    live_t L;
    live_setup(&L, "live");
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    first_process(L.wd);
    /* Its successor rejoins clean, takes half of attempt 100 and is killed. */
    killed_mid_apply(L.wd, &L.a.xor1, L.n / 2);
    /* The run went on: the retry committed U+1, then U+2. */
    put_version(L.s, U + 1, 101, &L.a.over1);
    put_version(L.s, U + 2, 102, &L.a.xor2);

    dcr_receiver_t *r[8] = {0};
    dcr_restorer_t *R = live_restorer(w, L.wd);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U + 2), DCR_OK);
    uint64_t moved = retained_bytes(L.s, U + 1, U + 2);
    expect_kind(R, DCR_RESTORE_REPAIR, (uint64_t)g_per, (uint64_t)g_per * moved);
    expect_kind(R, DCR_RESTORE_DENSE, 0, 0);
    assert_equal_to(r, L.want, "after the repair");
    for (int k = 0; k < g_per; k++) assert_true(dcr_restorer_serves(R, r, k));
    destroy_all(r);
    dcr_restorer_destroy(R);
    /* The files say clean at U+2 now: the next process rejoins at once. */
    R = live_restorer(w, L.wd);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U + 2), DCR_OK);
    expect_kind(R, DCR_RESTORE_CLEAN, (uint64_t)g_per, 0);
    assert_equal_to(r, L.want, "clean after the repair");
    /* Live in memory: a failed attempt from U+2 with nothing after it
     * leaves no overwrite records: dense (cause dirty). */
    dcr_restorer_begin(R, 0, 103);
    assert_int_equal(apply_prefix(r[0], &L.a.xor2, 103, 1), 0);
    assert_true(dcr_restorer_dirty(R, r));
    assert_false(dcr_restorer_serves(R, r, 0));
    assert_int_equal(dcr_restorer_restore(R, r, U + 2, U + 2), DCR_OK);
    int64_t ckpt = dcr_inventory_bytes(w->sc->inventory);
    expect_kind(R, DCR_RESTORE_DENSE, 1, (uint64_t)ckpt);
    assert_equal_to(r, L.want, "dense after a failed attempt");
    assert_true(dcr_restorer_serves(R, r, 0));
    uint64_t tc[DCR_RESTORE_KINDS], tb[DCR_RESTORE_KINDS], td[DCR_RESTORE_KINDS];
    assert_int_equal(dcr_restore_totals(L.wd, tc, tb, td, NULL), DCR_OK);
    assert_int_equal(tc[DCR_RESTORE_REPAIR], (uint64_t)g_per);
    assert_int_equal(tb[DCR_RESTORE_REPAIR], (uint64_t)g_per * moved);
    assert_int_equal(td[DCR_RESTORE_REPAIR], (uint64_t)g_per * (uint64_t)ckpt);
    print_message("repair of a receiver killed mid-apply, 2 versions behind: %llu bytes vs dense "
                  "%lld (%.1f%%)\n",
                  (unsigned long long)moved, (long long)ckpt, 100.0 * (double)moved / (double)ckpt);
    destroy_all(r);
    dcr_restorer_destroy(R);
    dcr_role_world_destroy(w);
    live_teardown(&L);
}

/* Killed after the last write of attempt 100, which committed U+1 with XOR
 * records: a verified repair (digests of U+1), then U+2; and a live node
 * whose attempt from U failed and which the run then left behind (U+1 by
 * the overwrite retry, U+2) repairs in memory (cause behind). */
static void test_verified_repair_and_in_memory_repair(void **state)
{
    (void)state;
    live_t L;
    live_setup(&L, "live2");
    dcr_role_world_t *w = NULL;
    size_t n = L.n;
    dcr_objstore_t *s = L.s;
    const char *wd = L.wd;
    attempts_t *a = &L.a;
    dcr_receiver_t **want = L.want;

    first_process(wd);
    killed_mid_apply(wd, &a->xor1, n); /* every item landed */
    put_version(s, U + 1, 100, &a->xor1);
    put_version(s, U + 2, 102, &a->xor2);
    dcr_receiver_t *r[8] = {0};
    dcr_restorer_t *R = next_process(wd, &w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U + 2), DCR_OK);
    expect_kind(R, DCR_RESTORE_REPAIR, (uint64_t)g_per,
                (uint64_t)g_per * retained_bytes(s, U + 2, U + 2));
    expect_kind(R, DCR_RESTORE_DENSE, 0, 0);
    assert_equal_to(r, want, "after a verified repair");
    destroy_all(r);
    dcr_restorer_destroy(R);

    /* Killed half-way through the attempt that committed U+1 with XOR: no
     * overwrite records, and the check of U+1 fails: dense. */
    first_process(wd);
    killed_mid_apply(wd, &a->xor1, n / 2);
    R = next_process(wd, &w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U + 2), DCR_OK);
    expect_kind(R, DCR_RESTORE_REPAIR, 0, 0);
    uint64_t c[DCR_RESTORE_KINDS], b[DCR_RESTORE_KINDS];
    dcr_restorer_counts(R, c, b);
    assert_int_equal(c[DCR_RESTORE_DENSE], (uint64_t)g_per);
    assert_equal_to(r, want, "dense after a refused repair");
    destroy_all(r);
    dcr_restorer_destroy(R);

    /* In memory: half of attempt 100 from U, then the run goes on. */
    put_version(s, U + 1, 101, &a->over1);
    first_process(wd);
    R = next_process(wd, &w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U), DCR_OK); /* clean from the files */
    for (int k = 0; k < g_per; k++) {
        dcr_restorer_begin(R, k, 100);
        assert_int_equal(apply_prefix(r[k], &a->xor1, 100, n / 2), 0);
    }
    assert_true(dcr_restorer_dirty(R, r));
    assert_int_equal(dcr_restorer_restore(R, r, U, U + 2), DCR_OK);
    expect_kind(R, DCR_RESTORE_REPAIR, (uint64_t)g_per,
                (uint64_t)g_per * retained_bytes(s, U + 1, U + 2));
    assert_equal_to(r, want, "after an in-memory repair");
    assert_false(dcr_restorer_dirty(R, r));
    uint64_t cause[DCR_RESTORE_CAUSES];
    assert_int_equal(dcr_restore_causes(wd, cause), DCR_OK);
    assert_int_equal(cause[DCR_RESTORE_BEHIND], (uint64_t)g_per);
    destroy_all(r);
    dcr_restorer_destroy(R);
    dcr_role_world_destroy(w);
    live_teardown(&L);
}

/* The rollout-node processes' path: a receiver dirty at the committed
 * version U (killed mid-apply of attempt 100, nothing committed after it)
 * is left as it is by its restore, never serves, takes part in the
 * overwrite retry from U, and is a repair once its digests equal a dense
 * refit of U+1 (an independent world's) and U+1 is committed. A survivor
 * whose "retry" was XOR over its partial writes fails the check and is
 * refitted densely at its next restore. */
static void test_repair_in_the_overwrite_retry(void **state)
{
    (void)state;
    live_t L;
    live_setup(&L, "live3");
    first_process(L.wd);
    killed_mid_apply(L.wd, &L.a.xor1, L.n / 2);
    dcr_role_world_t *w = NULL, *ow = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_restorer_config_t rc = {&g_cfg.run, w, L.wd, 0, 0, g_per, true, true, true};
    dcr_restorer_t *R = NULL;
    assert_int_equal(dcr_restorer_create(&rc, &R), DCR_OK);
    dcr_receiver_t *r[8] = {0};
    assert_int_equal(dcr_restorer_restore(R, r, 0, U), DCR_OK);
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) expect_kind(R, (dcr_restore_kind_t)k, 0, 0);
    for (int k = 0; k < g_per; k++) {
        assert_non_null(r[k]);
        assert_true(dcr_restorer_pending(R, k));
        assert_false(dcr_restorer_serves(R, r, k));
    }
    assert_int_equal(dcr_restorer_check_repair(R, r, g_per, U + 1, 0), DCR_EINVAL);
    /* The retry, all overwrites, over the partial writes. */
    size_t over = count_items(&L.a.over1);
    for (int k = 0; k < g_per; k++) {
        dcr_restorer_begin(R, k, 101);
        assert_int_equal(apply_prefix(r[k], &L.a.over1, 101, over), 0);
        assert_int_equal(dcr_restorer_check_repair(R, r, k, U + 1, 1000), DCR_OK);
        assert_false(dcr_restorer_serves(R, r, k)); /* not before the commit */
    }
    assert_int_equal(dcr_restorer_committed(R, r, U + 1), DCR_OK);
    expect_kind(R, DCR_RESTORE_REPAIR, (uint64_t)g_per, (uint64_t)g_per * 1000);
    expect_kind(R, DCR_RESTORE_DENSE, 0, 0);
    dcr_receiver_t *want[8] = {0};
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dense_receivers(ow, U + 1, want);
    assert_equal_to(r, want, "after the repair in the retry");
    for (int k = 0; k < g_per; k++) {
        assert_false(dcr_restorer_pending(R, k));
        assert_true(dcr_restorer_serves(R, r, k));
    }
    uint64_t tc[DCR_RESTORE_KINDS], tb[DCR_RESTORE_KINDS], td[DCR_RESTORE_KINDS];
    assert_int_equal(dcr_restore_totals(L.wd, tc, tb, td, NULL), DCR_OK);
    assert_int_equal(tc[DCR_RESTORE_REPAIR], (uint64_t)g_per);
    assert_int_equal(tb[DCR_RESTORE_REPAIR], (uint64_t)g_per * 1000);

    /* A survivor: every write of attempt 102 from U+1 (the attempt failed
     * elsewhere), then the same XOR records again as if a retry, which
     * undoes them: its check fails, it stays dirty, the next restore is
     * dense. (A prefix of one item flaked: the constructor's item order
     * varies, and the first item need not touch receiver 0.) */
    dcr_restorer_begin(R, 0, 102);
    assert_int_equal(apply_prefix(r[0], &L.a.xor2, 102, count_items(&L.a.xor2)), 0);
    assert_int_equal(dcr_restorer_restore(R, r, U + 1, U + 1), DCR_OK);
    assert_true(dcr_restorer_pending(R, 0));
    assert_false(dcr_restorer_serves(R, r, 0));
    dcr_restorer_begin(R, 0, 103);
    assert_int_equal(apply_prefix(r[0], &L.a.xor2, 103, count_items(&L.a.xor2)), 0);
    assert_int_equal(dcr_restorer_check_repair(R, r, 0, U + 2, 1000), DCR_EMISMATCH);
    assert_false(dcr_restorer_serves(R, r, 0));
    assert_int_equal(dcr_restorer_restore(R, r, U + 1, U + 1), DCR_OK);
    assert_false(dcr_restorer_pending(R, 0));
    expect_kind(R, DCR_RESTORE_DENSE, 1, (uint64_t)dcr_inventory_bytes(w->sc->inventory));
    assert_equal_to(r, want, "dense after a failed check");
    assert_true(dcr_restorer_serves(R, r, 0));
    destroy_all(want);
    destroy_all(r);
    dcr_restorer_destroy(R);
    dcr_role_world_destroy(ow);
    dcr_role_world_destroy(w);
    live_teardown(&L);
}

/* ---- repair sets: an XOR-committed version ------------------------------------ */

/* The owners' side of an XOR-committed U+1 (records kept, as owner
 * processes keep them): an aborted XOR attempt 99 over another candidate
 * (W^(U+1) with extra bit flips), an aborted XOR attempt 100 over the true
 * candidate, attempt 101 (XOR, the same candidate) that commits U+1, then
 * 102 from U+1 that commits U+2. The repair sets of U+1 and U+2 come from
 * the constructor (dcr_constructor_take_repair), never from the test. */
typedef struct xor_run {
    keep_sink_t x99, x100, x101, x102;
    dcr_repair_records_t *set1, *set2; /* of U+1 and U+2 */
    int owners;
    dcr_role_world_t *w; /* the owners' world: its inventory outlives the sets */
} xor_run_t;

/* Flips the lowest bit of every 101st element of every shard of w. */
static void flip_candidate(dcr_role_world_t *w)
{
    const dcr_source_layout_t *l = w->sc->layout;
    for (int i = 0; i < l->nshards; i++) {
        size_t es = dcr_dtype_size(l->shards[i].desc.dtype);
        unsigned char *d = w->shards[i]->data;
        for (size_t j = 0; j * es < dcr_desc_bytes(&l->shards[i].desc); j += 101) d[j * es] ^= 1;
    }
}

static void xor_run_build(xor_run_t *x)
{
    memset(x, 0, sizeof *x);
    keep_sink_t *ks[] = {&x->x99, &x->x100, &x->x101, &x->x102};
    for (int i = 0; i < 4; i++) pthread_mutex_init(&ks[i]->lock, NULL);
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    assert_int_equal(dcr_role_world_advance(w, U), DCR_OK);
    x->owners = w->sc->layout->world;
    dcr_construct_config_t cc = dcr_run_construct_config(&w->cfg, w->sc);
    dcr_constructor_t *con = NULL;
    assert_int_equal(dcr_constructor_create(w->sc->layout, &cc, w->shards, &con), DCR_OK);
    dcr_constructor_keep_records(con, true);
    uint8_t *xa = NULL;
    assert_int_equal(dcr_run_xor_policy(w->sc, &w->serve, w->cfg.mode, &xa), DCR_OK);
    assert_int_equal(dcr_role_world_advance(w, U + 1), DCR_OK);
    dcr_construct_stats_t st;
    flip_candidate(w);
    dcr_payload_sink_t s99 = {keep_submit, &x->x99};
    assert_int_equal(dcr_constructor_run(con, w->shards, 99, xa, false, &s99, &st), DCR_OK);
    flip_candidate(w); /* the true candidate again */
    dcr_payload_sink_t s100 = {keep_submit, &x->x100}, s101 = {keep_submit, &x->x101};
    assert_int_equal(dcr_constructor_run(con, w->shards, 100, xa, false, &s100, &st), DCR_OK);
    assert_int_equal(dcr_constructor_run(con, w->shards, 101, xa, false, &s101, &st), DCR_OK);
    assert_true(st.xor_items > 0);
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    dcr_constructor_take_repair(con, &x->set1);
    assert_non_null(x->set1);
    assert_int_equal(dcr_repair_records_tau(x->set1), 101);
    /* 100 emitted what 101 did; 99 (another candidate) did not. */
    assert_int_equal(dcr_repair_records_covers_from(x->set1), 100);
    assert_int_equal(dcr_role_world_advance(w, U + 2), DCR_OK);
    dcr_payload_sink_t s102 = {keep_submit, &x->x102};
    assert_int_equal(dcr_constructor_run(con, w->shards, 102, xa, false, &s102, &st), DCR_OK);
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    dcr_constructor_take_repair(con, &x->set2);
    assert_int_equal(dcr_repair_records_covers_from(x->set2), 102);
    free(xa);
    dcr_constructor_destroy(con);
    x->w = w;
}

static void xor_run_free(xor_run_t *x)
{
    keep_clear(&x->x99);
    keep_clear(&x->x100);
    keep_clear(&x->x101);
    keep_clear(&x->x102);
    dcr_repair_records_destroy(x->set1);
    dcr_repair_records_destroy(x->set2);
    dcr_role_world_destroy(x->w);
}

/* Stores set as version v's repair set, one part per owner, as owner
 * processes do (dcr_retain_repair_put); returns the bytes stored. */
static uint64_t put_repair(dcr_objstore_t *s, uint64_t v, dcr_repair_records_t *set, int owners)
{
    keep_sink_t k = {0};
    pthread_mutex_init(&k.lock, NULL);
    dcr_payload_sink_t sink = {keep_submit, &k};
    dcr_construct_config_t cc = dcr_construct_config_default();
    cc.payload_key = g_cfg.run.payload_key;
    assert_int_equal(dcr_repair_records_encode(set, &cc, &sink, NULL), DCR_OK);
    uint64_t bytes = 0;
    for (int o = 0; o < owners; o++) {
        const uint8_t *bp[64];
        size_t lp[64], n = 0;
        for (size_t i = 0; i < k.n; i++)
            if (k.items[i].owner == o) {
                assert_true(n < 64);
                bp[n] = k.items[i].data;
                lp[n++] = k.items[i].len;
                bytes += k.items[i].len;
            }
        assert_int_equal(dcr_retain_repair_put(s, v, dcr_repair_records_tau(set),
                                               dcr_repair_records_covers_from(set), o, owners, n,
                                               bp, lp, NULL),
                         DCR_OK);
    }
    keep_clear(&k);
    return bytes;
}

static uint64_t kept_bytes(const keep_sink_t *k)
{
    uint64_t b = 0;
    for (size_t i = 0; i < k->n; i++) b += k->items[i].len;
    return b;
}

/* The repair set of an XOR-committed U+1 repairs receivers killed at every
 * point of the committing attempt (101) and of an earlier aborted attempt
 * over the same candidate (100), bit-exact with a dense refit of U+2; a
 * receiver interrupted in attempt 99 (another candidate) is refused before
 * any write, and forcing the set on it (claiming 101) leaves it wrong,
 * which is why the coverage is checked. Before repair sets this case was
 * dense (test_verified_repair_and_in_memory_repair). */
static void test_repair_set_of_an_xor_commit(void **state)
{
    (void)state;
    xor_run_t x;
    xor_run_build(&x);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/repair-set", tmp_dir);
    dcr_objstore_t *s = store_at(dir);
    put_version(s, U + 1, 101, &x.x101);
    put_version(s, U + 2, 102, &x.x102);
    dcr_role_world_t *ow = NULL, *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_receiver_t *r[8] = {0}, *want[8] = {0}, *before[8] = {0};
    dense_receivers(ow, U + 2, want);
    size_t n = count_items(&x.x101);
    assert_true(n >= 4);
    /* No repair set stored yet: XOR records, refused, nothing written. */
    dense_receivers(w, U, r);
    dense_receivers(w, U, before);
    for (int k = 0; k < g_per; k++) {
        assert_int_equal(apply_prefix(r[k], &x.x101, 101, n / 2), 0);
        assert_int_equal(apply_prefix(before[k], &x.x101, 101, n / 2), 0);
    }
    assert_int_equal(dcr_restore_repair(s, &g_cfg.run.payload_key, r, g_per, U, U + 2, 101, NULL),
                     DCR_EUNSUPPORTED);
    assert_true(all_equal(r, before));
    destroy_all(r);
    destroy_all(before);
    uint64_t set_bytes = put_repair(s, U + 1, x.set1, x.owners);
    (void)put_repair(s, U + 2, x.set2, x.owners);
    uint64_t moved = set_bytes + kept_bytes(&x.x102);
    const size_t points[] = {0, 1, n / 3, n / 2, n - 1, n};
    for (uint64_t tau = 100; tau <= 101; tau++) {
        const keep_sink_t *att = tau == 100 ? &x.x100 : &x.x101;
        for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
            dense_receivers(w, U, r);
            for (int k = 0; k < g_per; k++)
                assert_int_equal(apply_prefix(r[k], att, tau, points[i]), 0);
            dcr_replay_stats_t st;
            if (dcr_restore_repair(s, &g_cfg.run.payload_key, r, g_per, U, U + 2, tau, &st) !=
                DCR_OK)
                fail_msg("repair of attempt %llu at kill point %zu/%zu: %s",
                         (unsigned long long)tau, points[i], n, dcr_error_detail());
            if (!all_equal(r, want))
                fail_msg("repair of attempt %llu at kill point %zu of %zu items differs from a "
                         "dense refit",
                         (unsigned long long)tau, points[i], n);
            assert_int_equal(st.bytes, moved);
            assert_true(st.repair_set);
            destroy_all(r);
        }
    }
    /* Attempt 99 (another candidate): not covered, refused, untouched. */
    size_t n99 = count_items(&x.x99);
    dense_receivers(w, U, r);
    dense_receivers(w, U, before);
    for (int k = 0; k < g_per; k++) {
        assert_int_equal(apply_prefix(r[k], &x.x99, 99, n99), 0);
        assert_int_equal(apply_prefix(before[k], &x.x99, 99, n99), 0);
    }
    assert_int_equal(dcr_restore_repair(s, &g_cfg.run.payload_key, r, g_per, U, U + 2, 99, NULL),
                     DCR_EUNSUPPORTED);
    assert_true(all_equal(r, before));
    /* Forced (claiming the committing attempt): its stray writes stay. */
    assert_int_equal(dcr_restore_repair(s, &g_cfg.run.payload_key, r, g_per, U, U + 2, 101, NULL),
                     DCR_OK);
    assert_false(all_equal(r, want));
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    uint64_t xb = kept_bytes(&x.x101);
    print_message("repair set of U+1 (XOR-committed) %llu bytes, its XOR payloads %llu (%.2fx); "
                  "repair U..U+2 moved %llu bytes vs dense %lld (%.1f%%)\n",
                  (unsigned long long)set_bytes, (unsigned long long)xb,
                  (double)set_bytes / (double)xb, (unsigned long long)moved, (long long)dense,
                  100.0 * (double)moved / (double)dense);
    assert_true(moved * 5 < (uint64_t)dense);
    destroy_all(r);
    destroy_all(before);
    destroy_all(want);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(ow);
    dcr_objstore_destroy(s);
    xor_run_free(&x);
}

/* The node's restorer: a process killed half-way through the XOR attempt
 * that committed U+1 is repaired from U+1's repair set (kind repair, the
 * set's and U+2's bytes), equals a dense refit of U+2, and serves only
 * after. */
static void test_restorer_repairs_an_xor_commit(void **state)
{
    (void)state;
    xor_run_t x;
    xor_run_build(&x);
    char wd[400], dir[500];
    snprintf(wd, sizeof wd, "%s/live-xor", tmp_dir);
    assert_int_equal(mkdir(wd, 0700), 0);
    dcr_rundir_objstore_dir(wd, dir, sizeof dir);
    dcr_objstore_t *s = store_at(dir);
    dcr_role_world_t *ow = NULL, *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dcr_receiver_t *want[8] = {0}, *r[8] = {0};
    dense_receivers(ow, U + 2, want);
    first_process(wd);
    killed_mid_apply_in(wd, &x.x101, 101, count_items(&x.x101) / 2);
    put_version(s, U + 1, 101, &x.x101);
    put_version(s, U + 2, 102, &x.x102);
    uint64_t moved = put_repair(s, U + 1, x.set1, x.owners) + retained_bytes(s, U + 2, U + 2);
    dcr_restorer_t *R = next_process(wd, &w);
    assert_int_equal(dcr_restorer_restore(R, r, 0, U + 2), DCR_OK);
    expect_kind(R, DCR_RESTORE_REPAIR, (uint64_t)g_per, (uint64_t)g_per * moved);
    expect_kind(R, DCR_RESTORE_DENSE, 0, 0);
    assert_equal_to(r, want, "after a repair from the repair set");
    for (int k = 0; k < g_per; k++) assert_true(dcr_restorer_serves(R, r, k));
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    assert_true(moved * 5 < (uint64_t)dense);
    print_message("restorer: receiver killed mid-apply of an XOR commit repaired with %llu bytes "
                  "vs dense %lld (%.1f%%)\n",
                  (unsigned long long)moved, (long long)dense,
                  100.0 * (double)moved / (double)dense);
    destroy_all(r);
    dcr_restorer_destroy(R);
    destroy_all(want);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(ow);
    dcr_objstore_destroy(s);
    xor_run_free(&x);
}

/* ---- elastic join from an anchor ---------------------------------------------- */

/* A node-`node` restorer of run configuration cfg over workdir (copy mode). */
static dcr_restorer_t *join_restorer(const dcr_bench_config_t *cfg, dcr_role_world_t *w,
                                     const char *workdir, int node)
{
    dcr_restorer_config_t rc = {&cfg->run, w,    workdir, node, node * g_per,
                                g_per,     true, false,   false};
    dcr_restorer_t *R = NULL;
    assert_int_equal(dcr_restorer_create(&rc, &R), DCR_OK);
    return R;
}

/* Bytes the store lists under prefix. */
static uint64_t listed_under(const char *prefix, const char *skip)
{
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    uint64_t sum = 0;
    assert_int_equal(dcr_objstore_list_all(g_store, prefix, &e, &n), DCR_OK);
    for (size_t i = 0; i < n; i++)
        if (!strstr(e[i].key, skip)) sum += e[i].size;
    free(e);
    return sum;
}

/* A fresh node-1 process in its own (empty) run directory joins at
 * `version`; its counts of kind anchor and dense are returned, and its
 * receivers must equal want (dense refits of `version` by the oracle's
 * own world). */
static void join(const dcr_bench_config_t *cfg, const char *name, uint64_t version,
                 dcr_receiver_t *const *want, uint64_t *anchor_p, uint64_t *dense_p,
                 uint64_t *bytes_p, double *seconds_p)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmp_dir, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&cfg->run, &w), DCR_OK);
    dcr_restorer_t *R = join_restorer(cfg, w, dir, 1);
    dcr_receiver_t *r[8] = {0};
    if (dcr_restorer_restore(R, r, 0, version) != DCR_OK)
        fail_msg("join %s: %s", name, dcr_error_detail());
    assert_equal_to(r, want, name);
    uint64_t c[DCR_RESTORE_KINDS], b[DCR_RESTORE_KINDS];
    dcr_restorer_counts(R, c, b);
    assert_int_equal(c[DCR_RESTORE_CLEAN] + c[DCR_RESTORE_REPLAY] + c[DCR_RESTORE_REPAIR], 0);
    *anchor_p = c[DCR_RESTORE_ANCHOR];
    *dense_p = c[DCR_RESTORE_DENSE];
    if (bytes_p) *bytes_p = b[DCR_RESTORE_ANCHOR];
    double s[DCR_RESTORE_KINDS];
    uint64_t tc[DCR_RESTORE_KINDS], tb[DCR_RESTORE_KINDS], td[DCR_RESTORE_KINDS];
    assert_int_equal(dcr_restore_totals(dir, tc, tb, td, s), DCR_OK);
    assert_int_equal(tc[DCR_RESTORE_ANCHOR], c[DCR_RESTORE_ANCHOR]);
    if (seconds_p) *seconds_p = s[DCR_RESTORE_ANCHOR] + s[DCR_RESTORE_DENSE];
    dcr_restorer_destroy(R);
    destroy_all(r);
    /* Its successor (a restart) finds what it joined with in its resident
     * files: clean, checked against the oracle. */
    R = join_restorer(cfg, w, dir, 1);
    assert_int_equal(dcr_restorer_restore(R, r, 0, version), DCR_OK);
    dcr_restorer_counts(R, c, b);
    assert_int_equal(c[DCR_RESTORE_CLEAN], (uint64_t)g_per);
    assert_equal_to(r, want, "restarted after the join");
    dcr_restorer_destroy(R);
    destroy_all(r);
    dcr_role_world_destroy(w);
}

/* Node 0's restorer commits version `v` with receivers dense-loaded by w
 * (the anchor writer's view: clean at v); waits for its upload. */
static void commit_anchor(const dcr_bench_config_t *cfg, dcr_role_world_t *w, uint64_t v)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/writer", tmp_dir);
    (void)mkdir(dir, 0700);
    dcr_restorer_t *R = join_restorer(cfg, w, dir, 0);
    dcr_receiver_t *r[8] = {0};
    dense_receivers(w, v, r);
    assert_int_equal(dcr_restorer_committed(R, r, v), DCR_OK);
    if (dcr_restorer_anchor_flush(R) != DCR_OK) fail_msg("anchor: %s", dcr_error_detail());
    dcr_restorer_destroy(R);
    destroy_all(r);
}

/* A node added mid-run (no resident files) joins from the newest anchor
 * plus replay and equals a dense refit of the committed version by the
 * oracle's world; with no anchor, one newer than the version, or a
 * truncated or flipped anchor object, it is refitted densely (and still
 * equal). Bytes: the anchor object and the replay, below a dense refit's
 * plus the replay's. */
static void test_elastic_join_from_anchor(void **state)
{
    (void)state;
    char storedir[400];
    dcr_rundir_objstore_dir(g_workdir, storedir, sizeof storedir);
    dcr_bench_config_t cfg = g_cfg;
    cfg.run.store = storedir; /* the run's store, seen from other run directories */
    cfg.run.anchor_every = 3;
    dcr_role_world_t *ow = NULL, *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    /* The oracle: node 1's receivers dense-loaded at LAST. */
    assert_int_equal(dcr_role_world_advance(ow, LAST), DCR_OK);
    dcr_receiver_t *want[8] = {0};
    for (int k = 0; k < g_per; k++)
        assert_int_equal(dcr_role_world_receiver(ow, g_per + k, &want[k]), DCR_OK);
    int64_t ckpt = dcr_inventory_bytes(ow->sc->inventory);

    uint64_t anchors = 0, dense = 0, bytes = 0;
    double secs = 0;
    join(&cfg, "none", LAST, want, &anchors, &dense, NULL, NULL);
    assert_int_equal(anchors, 0);
    assert_int_equal(dense, (uint64_t)g_per);

    /* Version 5 is not due (every 3); 6 is: node 0 writes it. */
    commit_anchor(&cfg, w, 5);
    assert_int_equal(listed_under("anchors/", "/ANCHOR"), 0);
    commit_anchor(&cfg, w, 6);
    uint64_t anchor_obj = listed_under("anchors/v6/", "/ANCHOR");
    assert_true(anchor_obj > 0);
    join(&cfg, "anchor", LAST, want, &anchors, &dense, &bytes, &secs);
    assert_int_equal(anchors, (uint64_t)g_per);
    assert_int_equal(dense, 0);
    /* Each receiver: its rank's object (one of the tp) and the replay 7..9. */
    int tp = g_cfg.run.serve.tp;
    uint64_t replay = listed_bytes(6, LAST);
    assert_int_equal(bytes, (uint64_t)g_per * (anchor_obj / (uint64_t)tp + replay));
    assert_true(bytes < (uint64_t)g_per * ((uint64_t)ckpt + replay));
    print_message("join from anchor 6 + replay 7..%d: %llu bytes per receiver vs dense %lld "
                  "(%.1f%%), %.3f s for %d receivers\n",
                  LAST, (unsigned long long)(bytes / (uint64_t)g_per), (long long)ckpt,
                  100.0 * (double)bytes / (double)g_per / (double)ckpt, secs, g_per);

    /* A join at a version older than every anchor: dense. */
    dcr_role_world_t *ow5 = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow5), DCR_OK);
    assert_int_equal(dcr_role_world_advance(ow5, 5), DCR_OK);
    dcr_receiver_t *want5[8] = {0};
    for (int k = 0; k < g_per; k++)
        assert_int_equal(dcr_role_world_receiver(ow5, g_per + k, &want5[k]), DCR_OK);
    join(&cfg, "older", 5, want5, &anchors, &dense, NULL, NULL);
    assert_int_equal(anchors, 0);
    assert_int_equal(dense, (uint64_t)g_per);
    destroy_all(want5);
    dcr_role_world_destroy(ow5);

    /* A truncated, then a flipped, object: refused before any byte of it is
     * copied; its receivers are refitted densely (and equal the oracle). */
    uint8_t *keep = NULL;
    size_t len = 0;
    assert_int_equal(dcr_objstore_get(g_store, "anchors/v6/t1", 1 << 30, NULL, &keep, &len),
                     DCR_OK);
    assert_int_equal(dcr_objstore_put(g_store, "anchors/v6/t1", keep, len - 1, NULL), DCR_OK);
    /* Only the receivers of rank 1 read t1; the others still join. */
    uint64_t of_rank1 = (uint64_t)(g_per / tp);
    join(&cfg, "truncated", LAST, want, &anchors, &dense, NULL, NULL);
    assert_int_equal(anchors, (uint64_t)g_per - of_rank1);
    assert_int_equal(dense, of_rank1);
    keep[len / 2] ^= 0x01;
    assert_int_equal(dcr_objstore_put(g_store, "anchors/v6/t1", keep, len, NULL), DCR_OK);
    join(&cfg, "flipped", LAST, want, &anchors, &dense, NULL, NULL);
    assert_int_equal(anchors, (uint64_t)g_per - of_rank1);
    assert_int_equal(dense, of_rank1);
    free(keep);

    /* Version 9 is due: a join then takes it and replays nothing; 6's stays
     * (the newest older one), 3's (never written) and older are gone. */
    commit_anchor(&cfg, w, LAST);
    assert_true(listed_under("anchors/v6/", "-") > 0);
    join(&cfg, "newest", LAST, want, &anchors, &dense, &bytes, NULL);
    assert_int_equal(anchors, (uint64_t)g_per);
    assert_int_equal(bytes,
                     (uint64_t)g_per * (listed_under("anchors/v9/", "/ANCHOR") / (uint64_t)tp));
    assert_int_equal(dcr_objstore_delete_prefix(g_store, "anchors/"), DCR_OK);
    destroy_all(want);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(ow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_equals_dense_refit),
        cmocka_unit_test(test_gap_or_bad_payload_writes_nothing),
        cmocka_unit_test(test_restorer_classifies),
        cmocka_unit_test(test_elastic_join_from_anchor),
        cmocka_unit_test(test_repair_rule_at_kill_points),
        cmocka_unit_test(test_restorer_repairs_a_killed_receiver),
        cmocka_unit_test(test_verified_repair_and_in_memory_repair),
        cmocka_unit_test(test_repair_in_the_overwrite_retry),
        cmocka_unit_test(test_repair_set_of_an_xor_commit),
        cmocka_unit_test(test_restorer_repairs_an_xor_commit),
        cmocka_unit_test(test_processes_restore_without_reload),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
