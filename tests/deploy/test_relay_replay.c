/* ctest-labels: integration
 *
 * A node's replay from the relay root (dcr/recovery.h) equals a dense
 * refit. An in-process bench over the object store commits LAST versions
 * (its retained copies are what was committed); each version's payloads
 * then cross a relay tree whose root retains a window of KEEP, in the
 * attempts that committed them, and the root is told of each commit.
 * Receivers dense-loaded at LAST - k by the role world (the oracle, sharing
 * nothing with the refit) replay from "relay://" (dcr_restore_replay over
 * the network) and must equal receivers dense-loaded at LAST, byte for
 * byte, for k = 1..3; every payload the root serves is byte-identical to
 * the committed one. Version LAST - 1 is retained by a root restarted
 * after its attempt ended and before its commit, so every replay crosses a
 * version its root staged before it died. A version outside the window is a gap; a corrupt or
 * missing object at the root fails the replay before any write (the
 * restorer then refits densely). Bytes a replay moves are printed against
 * a dense refit's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dcr/codec.h"
#include "dcr/objstore.h"
#include "dcr/recovery.h"
#include "engine/transport/transport_test_util.h"
#include "workloads/tmp_dir.h"
#include "restore_bench.h"
#include "workloads/harness/bench.h"
#include "deploy/restorer.h"
#include "deploy/roles.h"
#include "deploy/world.h"

#define LAST 6 /* versions committed by the bench */
#define KEEP 4 /* the root's window */

static dcr_bench_config_t g_cfg;
static char g_workdir[300], g_root[400], g_url[128];
static dcr_objstore_t *g_committed; /* the bench's retained versions */
static dcr_transport_t *g_relay;
static int g_per, g_world;

/* The committed payloads of version v, in manifest order. */
typedef struct version_bytes {
    dcr_retain_manifest_t m;
    uint8_t **buf;
    size_t *len;
} version_bytes_t;

static void version_read(dcr_objstore_t *s, uint64_t v, version_bytes_t *x)
{
    if (dcr_retain_manifest_read(s, v, &x->m) != DCR_OK)
        fail_msg("version %llu: %s", (unsigned long long)v, dcr_error_detail());
    x->buf = calloc(x->m.n + 1, sizeof *x->buf);
    x->len = calloc(x->m.n + 1, sizeof *x->len);
    for (size_t j = 0; j < x->m.n; j++)
        if (dcr_retain_payload_get(s, &x->m, j, &x->buf[j], &x->len[j]) != DCR_OK)
            fail_msg("version %llu payload %zu: %s", (unsigned long long)v, j, dcr_error_detail());
}

static void version_free(version_bytes_t *x)
{
    for (size_t j = 0; j < x->m.n; j++) free(x->buf[j]);
    free(x->buf);
    free(x->len);
    dcr_retain_manifest_free(&x->m);
}

/* The root's handle and its retention on g_root (clear: a fresh run). */
static int root_start(bool clear)
{
    dcr_transport_config_t tc = tp_config(NULL, 1, g_world, 1);
    if (dcr_transport_create("relay", &tc, &g_relay) != DCR_OK) return -1;
    dcr_transport_set_payload_key(g_relay, &g_cfg.run.payload_key);
    char url[420];
    snprintf(url, sizeof url, "dir:%s", g_root);
    if (dcr_relay_retain_start(g_relay, url, KEEP, clear) != DCR_OK ||
        dcr_relay_retain_url(g_relay, g_url, sizeof g_url) != DCR_OK)
        return -1;
    return 0;
}

/* Sends version v's committed payloads through the relay in the attempt
 * that committed them, every owner finishing; the one rollout node takes
 * them; then the root learns of the commit. restart: the root's process
 * dies after every node acknowledged and before the commit, and a new root
 * on the same directory learns of it. */
static int relay_version(uint64_t v, bool restart)
{
    version_bytes_t x = {0};
    version_read(g_committed, v, &x);
    if (dcr_transport_open_attempt(g_relay, x.m.tau) != DCR_OK) return -1;
    tp_node_t node = {.t = g_relay, .node = 0};
    pthread_t th;
    pthread_create(&th, NULL, tp_node_main, &node);
    uint64_t *count = calloc((size_t)g_world, sizeof *count);
    dcr_status_t st = DCR_OK;
    for (size_t j = 0; j < x.m.n && st == DCR_OK; j++) {
        dcr_payload_header_t h;
        st = dcr_payload_peek(x.buf[j], x.len[j], true, &h);
        if (st == DCR_OK && h.owner >= (uint32_t)g_world) st = DCR_EINVAL;
        if (st == DCR_OK)
            st = dcr_transport_send(g_relay, (int)h.owner, h.payload_id, x.buf[j], x.len[j]);
        if (st == DCR_OK) count[h.owner]++;
    }
    for (int o = 0; o < g_world && st == DCR_OK; o++)
        st = dcr_transport_finish(g_relay, o, count[o]);
    pthread_join(th, NULL);
    if (st == DCR_OK && (node.end != DCR_ECLOSED || node.n != x.m.n)) st = DCR_ETRANSPORT;
    if (st == DCR_OK && restart) {
        dcr_transport_destroy(g_relay);
        g_relay = NULL;
        if (root_start(false) != 0) st = DCR_ETRANSPORT;
    }
    if (st == DCR_OK) st = dcr_relay_retain_commit(g_relay, x.m.tau, v, NULL);
    if (st != DCR_OK)
        fprintf(stderr, "version %llu: %s\n", (unsigned long long)v, dcr_error_detail());
    tp_node_free(&node);
    free(count);
    version_free(&x);
    return st == DCR_OK ? 0 : -1;
}

static int group_setup(void **state)
{
    if (tmp_dir_setup(state)) return -1;
    g_cfg = dcr_bench_config_default();
    g_cfg.run.scenario.scale = 64;
    g_cfg.run.scenario.layers = 2;
    dcr_bench_result_t r;
    if (restore_bench_run(&g_cfg, LAST, LAST, g_workdir, sizeof g_workdir, &r, &g_committed))
        return -1;
    dcr_bench_result_free(&r);
    g_per = g_cfg.run.serve.gpus_per_node;
    dcr_role_world_t *w = NULL;
    if (dcr_role_world_create(&g_cfg.run, &w) != DCR_OK) return -1;
    g_world = w->sc->layout->world;
    dcr_role_world_destroy(w);
    snprintf(g_root, sizeof g_root, "%s/root", tmp_dir);
    if (root_start(true) != 0) return -1;
    /* Version LAST - 1, which every replay below crosses, is retained by
     * a root restarted between the acknowledgments and the commit. */
    for (uint64_t v = 1; v <= LAST; v++)
        if (relay_version(v, v == LAST - 1) != 0) return -1;
    return 0;
}

static int group_teardown(void **state)
{
    dcr_transport_destroy(g_relay);
    dcr_objstore_destroy(g_committed);
    return tmp_dir_teardown(state);
}

static dcr_objstore_t *relay_store(void)
{
    dcr_objstore_config_t oc = {.url = g_url};
    dcr_objstore_t *s = NULL;
    if (dcr_objstore_create(&oc, &s) != DCR_OK) fail_msg("%s: %s", g_url, dcr_error_detail());
    return s;
}

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

static void test_root_serves_what_was_committed(void **state)
{
    (void)state;
    dcr_objstore_t *s = relay_store();
    uint64_t *vs = NULL;
    size_t n = 0;
    assert_int_equal(dcr_retain_list(s, &vs, &n), DCR_OK);
    assert_int_equal(n, KEEP);
    for (size_t i = 0; i < n; i++) assert_int_equal(vs[i], LAST - KEEP + 1 + i);
    free(vs);
    for (uint64_t v = LAST - KEEP + 1; v <= LAST; v++) {
        version_bytes_t want = {0}, got = {0};
        version_read(g_committed, v, &want);
        version_read(s, v, &got);
        assert_int_equal(got.m.tau, want.m.tau);
        assert_int_equal(got.m.n, want.m.n);
        for (size_t i = 0; i < want.m.n; i++) {
            size_t j = 0;
            while (j < got.m.n && strcmp(got.m.entries[j].name, want.m.entries[i].name)) j++;
            if (j == got.m.n)
                fail_msg("version %llu: %s missing at the root", (unsigned long long)v,
                         want.m.entries[i].name);
            assert_int_equal(got.len[j], want.len[i]);
            assert_memory_equal(got.buf[j], want.buf[i], want.len[i]);
        }
        version_free(&want);
        version_free(&got);
    }
    dcr_objstore_destroy(s);
}

static void test_replay_from_the_root_equals_dense_refit(void **state)
{
    (void)state;
    dcr_objstore_t *s = relay_store();
    dcr_role_world_t *ow = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dcr_receiver_t *want[8] = {0};
    dense_receivers(ow, LAST, want);
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    for (int behind = 1; behind <= 3; behind++) {
        dcr_role_world_t *w = NULL;
        assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
        dcr_receiver_t *r[8] = {0};
        dense_receivers(w, LAST - (uint64_t)behind, r);
        dcr_replay_stats_t st;
        if (dcr_restore_replay(s, r, g_per, LAST - (uint64_t)behind, LAST, &st) != DCR_OK)
            fail_msg("replay %d behind: %s", behind, dcr_error_detail());
        assert_equal_to(r, want, "after a replay from the relay root");
        assert_int_equal(st.versions, (uint64_t)behind);
        print_message("relay replay %d behind: %llu payloads, %llu bytes vs dense %lld (%.1f%%)\n",
                      behind, (unsigned long long)st.payloads, (unsigned long long)st.bytes,
                      (long long)dense, 100.0 * (double)st.bytes / (double)dense);
        destroy_all(r);
        dcr_role_world_destroy(w);
    }
    /* Outside the window: a gap, nothing written. */
    dcr_role_world_t *w = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    dcr_receiver_t *r[8] = {0}, *before[8] = {0};
    uint64_t from = LAST - KEEP - 1;
    dense_receivers(w, from, r);
    dcr_role_world_t *bw = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &bw), DCR_OK);
    dense_receivers(bw, from, before);
    assert_int_equal(dcr_restore_replay(s, r, g_per, from, LAST, NULL), DCR_ENOTFOUND);
    assert_equal_to(r, before, "after a refused replay across a gap");
    destroy_all(r);
    destroy_all(before);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(bw);
    destroy_all(want);
    dcr_role_world_destroy(ow);
    dcr_objstore_destroy(s);
}

/* Damages one payload file at the root (remove: deletes it), expects the
 * replay LAST-2..LAST to fail with `expect` and write nothing, restores it. */
static void with_damage(bool remove, dcr_status_t expect)
{
    version_bytes_t x = {0};
    version_read(g_committed, LAST, &x);
    char path[600];
    snprintf(path, sizeof path, "%s/versions/v%d/%s", g_root, LAST, x.m.entries[0].name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (remove) {
        fclose(f);
        assert_int_equal(unlink(path), 0);
    } else {
        uint8_t *bad = malloc(x.len[0]);
        memcpy(bad, x.buf[0], x.len[0]);
        bad[x.len[0] - 1] ^= 0x40;
        assert_int_equal(fwrite(bad, 1, x.len[0], f), x.len[0]);
        fclose(f);
        free(bad);
    }
    dcr_objstore_t *s = relay_store();
    dcr_role_world_t *w = NULL, *bw = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &bw), DCR_OK);
    dcr_receiver_t *r[8] = {0}, *before[8] = {0};
    dense_receivers(w, LAST - 2, r);
    dense_receivers(bw, LAST - 2, before);
    assert_int_equal(dcr_restore_replay(s, r, g_per, LAST - 2, LAST, NULL), expect);
    assert_equal_to(r, before, "after a refused replay");
    destroy_all(r);
    destroy_all(before);
    dcr_role_world_destroy(w);
    dcr_role_world_destroy(bw);
    dcr_objstore_destroy(s);
    f = fopen(path, "wb");
    assert_int_equal(fwrite(x.buf[0], 1, x.len[0], f), x.len[0]);
    fclose(f);
    version_free(&x);
}

static void test_damaged_root_objects_fail_before_any_write(void **state)
{
    (void)state;
    with_damage(false, DCR_EDIGEST);
    with_damage(true, DCR_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_serves_what_was_committed),
        cmocka_unit_test(test_replay_from_the_root_equals_dense_refit),
        cmocka_unit_test(test_damaged_root_objects_fail_before_any_write),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
