/* ctest-labels: unit
 *
 * Resident files (dcr/resident.h): a receiver's bytes saved by a child
 * process that then dies by SIGKILL are found clean, at the saved version,
 * by the parent, and load into a receiver that held zeros so that it equals
 * the one saved, byte for byte (dcr_receiver_equal, every byte); a file of
 * another identity or layout reads foreign, an interrupted save dirty, and
 * neither loads. Live: a receiver attached to its file writes the mapped
 * bytes themselves (read back with pread, no save); a child that marks an
 * attempt, writes part of it and dies by SIGKILL leaves a file that says
 * dirty, from the committed version, attempt tau, whose bytes a successor
 * adopts as they are (the writes it made, nothing else); the allocation
 * hook itself (dcr_params_place) keeps handles and moves bytes, and the
 * sparse replay writes where the parameters are after they moved. Receivers
 * come from the serving layout of a small scaled
 * model (workloads/serve), dense-loaded with seeded weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dcr/loader.h"
#include "dcr/resident.h"
#include "deploy/world.h"
#include "receiver_test_util.h"

static char g_dir[64];
static dcr_role_world_t *g_world;

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dcr_resident_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    dcr_run_config_t c = dcr_run_config_default();
    c.scenario.scale = 64;
    c.scenario.layers = 2;
    return dcr_role_world_create(&c, &g_world) == DCR_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dcr_role_world_destroy(g_world);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Slot `slot` dense-loaded with the world's version (seeded, non-zero). */
static dcr_receiver_t *loaded(int slot)
{
    dcr_receiver_t *r = NULL;
    assert_int_equal(dcr_role_world_receiver(g_world, slot, &r), DCR_OK);
    return r;
}

/* Slot `slot` with its parameters as declared: all zeros. */
static dcr_receiver_t *zeroed(int slot)
{
    dcr_receiver_t *r = NULL;
    assert_int_equal(dcr_serve_receiver_create(&g_world->sc->model, g_world->sc->inventory,
                                               &g_world->serve, slot, NULL, &r),
                     DCR_OK);
    return r;
}

static void path_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void test_survives_a_killed_process(void **state)
{
    (void)state;
    char path[128];
    path_of("r0.dcrs", path, sizeof path);
    dcr_receiver_t *src = loaded(0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dcr_resident_t *f = NULL;
        if (dcr_resident_open(path, src, 0, &f) != DCR_OK) _exit(3);
        if (dcr_resident_save(f, src, 5) != DCR_OK) _exit(4);
        /* Dies without closing, unmapping or syncing anything. */
        raise(SIGKILL);
        _exit(5);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    dcr_receiver_t *dst = zeroed(0);
    assert_false(dcr_receiver_equal(src, dst, NULL, NULL));
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, dst, 0, &f), DCR_OK);
    uint64_t v = 0;
    assert_int_equal(dcr_resident_state(f, &v), DCR_RESIDENT_CLEAN);
    assert_int_equal(v, 5);
    assert_int_equal(dcr_resident_load(f, dst), DCR_OK);
    const char *param = NULL;
    int64_t elem = 0;
    if (!dcr_receiver_equal(src, dst, &param, &elem))
        fail_msg("loaded bytes differ at %s[%lld]", param, (long long)elem);
    /* Every parameter at its 64-byte-aligned offset, from first principles. */
    size_t bytes = 0;
    const dcr_params_t *ps = dcr_receiver_params(src);
    for (size_t i = 0; i < dcr_params_count(ps); i++)
        bytes = (bytes + 63) / 64 * 64 + dcr_params_at(ps, i)->storage->bytes;
    bytes = (bytes + 63) / 64 * 64;
    assert_int_equal(dcr_resident_bytes(f), bytes);
    dcr_resident_close(f);
    dcr_receiver_destroy(dst);
    dcr_receiver_destroy(src);
}

static void test_absent_foreign_and_dirty_do_not_load(void **state)
{
    (void)state;
    char path[128];
    path_of("r1.dcrs", path, sizeof path);
    dcr_receiver_t *src = loaded(1), *dst = zeroed(1);
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, src, 1, &f), DCR_OK);
    assert_int_equal(dcr_resident_state(f, NULL), DCR_RESIDENT_ABSENT);
    dcr_resident_mark_dirty(f);
    assert_int_equal(dcr_resident_state(f, NULL), DCR_RESIDENT_ABSENT);
    assert_int_equal(dcr_resident_load(f, dst), DCR_EINVAL);
    assert_int_equal(dcr_resident_save(f, src, 2), DCR_OK);
    dcr_resident_close(f);
    /* Another identity (slot 0 has the same names and sizes as slot 1). */
    assert_int_equal(dcr_resident_open(path, dst, 0, &f), DCR_OK);
    assert_int_equal(dcr_resident_state(f, NULL), DCR_RESIDENT_FOREIGN);
    assert_int_equal(dcr_resident_load(f, dst), DCR_EINVAL);
    dcr_resident_close(f);
    /* A save cut short leaves the mark a save sets first. */
    assert_int_equal(dcr_resident_open(path, dst, 1, &f), DCR_OK);
    dcr_resident_mark_dirty(f);
    dcr_resident_close(f);
    assert_int_equal(dcr_resident_open(path, dst, 1, &f), DCR_OK);
    assert_int_equal(dcr_resident_state(f, NULL), DCR_RESIDENT_DIRTY);
    assert_int_equal(dcr_resident_load(f, dst), DCR_EINVAL);
    /* The next save makes it clean again. */
    assert_int_equal(dcr_resident_save(f, src, 3), DCR_OK);
    uint64_t v = 0;
    assert_int_equal(dcr_resident_state(f, &v), DCR_RESIDENT_CLEAN);
    assert_int_equal(v, 3);
    dcr_resident_close(f);
    /* Truncated by someone: foreign, never a short read. */
    assert_int_equal(truncate(path, 5000), 0);
    assert_int_equal(dcr_resident_open(path, dst, 1, &f), DCR_OK);
    assert_int_equal(dcr_resident_state(f, NULL), DCR_RESIDENT_FOREIGN);
    dcr_resident_close(f);
    /* A path that cannot be a file. */
    assert_int_equal(dcr_resident_open("/nonexistent-dir/x.dcrs", dst, 1, &f), DCR_EIO);
    dcr_receiver_destroy(dst);
    dcr_receiver_destroy(src);
}

/* Byte `off` of parameter i in the file, read with pread (not the mapping). */
static uint8_t file_byte(const char *path, const dcr_params_t *p, size_t i, size_t off)
{
    size_t at = 4096;
    for (size_t j = 0; j < i; j++) at = (at + 63) / 64 * 64 + dcr_params_at(p, j)->storage->bytes;
    at = (at + 63) / 64 * 64 + off;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)at, SEEK_SET), 0);
    int c = fgetc(f);
    fclose(f);
    assert_true(c >= 0);
    return (uint8_t)c;
}

static void test_params_place_moves_bytes_keeps_handles(void **state)
{
    (void)state;
    dcr_params_t *p = NULL;
    assert_int_equal(dcr_params_create(false, &p), DCR_OK);
    int64_t s3[1] = {3}, s5[1] = {5};
    assert_int_equal(dcr_params_declare(p, "a", DCR_DTYPE_BF16, 1, s3, NULL), DCR_OK);
    assert_int_equal(dcr_params_declare(p, "b", DCR_DTYPE_FP32, 1, s5, NULL), DCR_OK);
    /* 6 bytes at 0, 20 bytes at 64, rounded up: 128. */
    assert_int_equal(dcr_params_arena_bytes(p), 128);
    const dcr_param_t *a = dcr_params_at(p, 0), *b = dcr_params_at(p, 1);
    dcr_storage_t *sa = a->storage;
    memset(a->storage->data, 0x11, 6);
    memset(b->storage->data, 0x22, 20);
    uint8_t *arena = aligned_alloc(64, 128);
    memset(arena, 0, 128);
    assert_false(dcr_params_placed(p));
    assert_int_equal(dcr_params_place(p, arena + 1, 127, true), DCR_EINVAL); /* misaligned */
    assert_int_equal(dcr_params_place(p, arena, 64, true), DCR_EINVAL);      /* short */
    assert_int_equal(dcr_params_place(p, arena, 128, true), DCR_OK);
    assert_true(dcr_params_placed(p));
    assert_ptr_equal(a->storage, sa);
    assert_ptr_equal(a->storage->data, arena);
    assert_ptr_equal(b->storage->data, arena + 64);
    assert_int_equal(arena[5], 0x11);
    assert_int_equal(arena[64 + 19], 0x22);
    assert_int_equal(dcr_params_find_storage(p, sa), 0);
    /* Declaring after placement would need arena room nobody gave. */
    assert_int_equal(dcr_params_declare(p, "c", DCR_DTYPE_BF16, 1, s3, NULL), DCR_EINVAL);
    dcr_params_destroy(p);
    /* The arena is still the caller's (ASan would report a double free). */
    arena[0] = 1;
    free(arena);
    dcr_params_t *shape = NULL;
    assert_int_equal(dcr_params_create(true, &shape), DCR_OK);
    uint8_t big[64] __attribute__((aligned(64)));
    assert_int_equal(dcr_params_place(shape, big, sizeof big, true), DCR_EINVAL);
    dcr_params_destroy(shape);
}

static void test_live_weights_killed_mid_apply(void **state)
{
    (void)state;
    char path[128];
    path_of("r2.dcrs", path, sizeof path);
    dcr_receiver_t *src = loaded(2);
    const dcr_params_t *ps = dcr_receiver_params(src);
    size_t np = dcr_params_count(ps);
    assert_true(np >= 2);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dcr_receiver_t *r = loaded(2);
        dcr_resident_t *f = NULL;
        dcr_resident_state_t found;
        if (dcr_resident_open(path, r, 2, &f) != DCR_OK) _exit(3);
        if (dcr_resident_attach(f, r, true, &found) != DCR_OK || found != DCR_RESIDENT_ABSENT)
            _exit(4);
        if (dcr_resident_state(f, NULL) != DCR_RESIDENT_ABSENT) _exit(5);
        if (dcr_resident_save(f, r, 4) != DCR_OK) _exit(6); /* committed 4: header only */
        if (dcr_resident_begin(f, 9) != DCR_OK) _exit(7);
        /* Attempt 9 writes the first parameter's first bytes, then dies. */
        const dcr_param_t *x = dcr_params_at(dcr_receiver_params(r), 0);
        ((uint8_t *)x->storage->data)[0] ^= 0xff;
        ((uint8_t *)x->storage->data)[1] ^= 0x0f;
        raise(SIGKILL);
        _exit(8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        fail_msg("child exited %d before its kill", WEXITSTATUS(status));
    /* The file's bytes: the writes made, the rest as committed. */
    const dcr_param_t *x0 = dcr_params_at(ps, 0);
    const uint8_t *orig = x0->storage->data;
    assert_int_equal(file_byte(path, ps, 0, 0), (uint8_t)(orig[0] ^ 0xff));
    assert_int_equal(file_byte(path, ps, 0, 1), (uint8_t)(orig[1] ^ 0x0f));
    assert_int_equal(file_byte(path, ps, 1, 0),
                     ((const uint8_t *)dcr_params_at(ps, 1)->storage->data)[0]);

    dcr_receiver_t *dst = zeroed(2);
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, dst, 2, &f), DCR_OK);
    uint64_t v = 0;
    assert_int_equal(dcr_resident_state(f, &v), DCR_RESIDENT_DIRTY);
    assert_int_equal(v, 4);
    assert_int_equal(dcr_resident_tau(f), 9);
    assert_int_equal(dcr_resident_load(f, dst), DCR_EINVAL); /* dirty never loads */
    dcr_resident_state_t found;
    assert_int_equal(dcr_resident_attach(f, dst, true, &found), DCR_OK);
    assert_int_equal(found, DCR_RESIDENT_DIRTY);
    assert_true(dcr_resident_attached(f, dst));
    /* Adopted without a copy: dst's parameters are the mapping's bytes. */
    const dcr_param_t *d0 = dcr_params_at(dcr_receiver_params(dst), 0);
    assert_int_equal(((uint8_t *)d0->storage->data)[0], (uint8_t)(orig[0] ^ 0xff));
    assert_false(dcr_receiver_equal(src, dst, NULL, NULL));
    /* The repair (here: the two bytes put back) writes the file itself. */
    ((uint8_t *)d0->storage->data)[0] = orig[0];
    ((uint8_t *)d0->storage->data)[1] = orig[1];
    assert_int_equal(file_byte(path, ps, 0, 0), orig[0]);
    assert_true(dcr_receiver_equal(src, dst, NULL, NULL));
    assert_int_equal(dcr_resident_save(f, dst, 4), DCR_OK);
    assert_int_equal(dcr_resident_state(f, &v), DCR_RESIDENT_CLEAN);
    assert_int_equal(v, 4);
    /* One receiver per file; another receiver's save is refused. */
    assert_int_equal(dcr_resident_attach(f, src, true, NULL), DCR_EINVAL);
    assert_int_equal(dcr_resident_save(f, src, 5), DCR_EINVAL);
    /* Destroy first, then close: the mapping outlives the parameters. */
    dcr_resident_detach(f, dst);
    dcr_receiver_destroy(dst);
    dcr_resident_close(f);
    dcr_receiver_destroy(src);
}

/* Per tensor: the encoding its path takes, -1 when skipped. */
static int *encodings(const dcr_receiver_t *r, const dcr_inventory_t *inv)
{
    size_t n = dcr_inventory_count(inv);
    int *enc = calloc(n + 1, sizeof(*enc));
    for (size_t t = 0; t < n; t++) {
        dcr_path_info_t pi;
        assert_int_equal(dcr_receiver_path(r, t, &pi), DCR_OK);
        enc[t] = pi.cls == DCR_PATH_SKIPPED ? -1
                 : pi.cls == DCR_PATH_XOR   ? DCR_ENCODING_XOR
                                            : DCR_ENCODING_OVERWRITE;
    }
    return enc;
}

/* The sparse replay compiles each views-only plan's copies at prewarm; the
 * destinations must still be the parameters' bytes as they are when an item
 * is applied. A receiver prewarmed first and then attached to a resident
 * file (its parameters move into the mapping) applies a refit at 1% and 10%
 * that must equal a fresh dense load of the new version byte for byte (the
 * oracle), with every item replayed (none through the loader); the bytes
 * it left behind at the old addresses are gone, so a replay that wrote
 * there would leave the receiver at the old version. */
static void test_replay_after_params_move(void **state)
{
    (void)state;
    const dcr_inventory_t *inv = g_world->sc->inventory;
    dcr_receiver_t *r = NULL;
    assert_int_equal(dcr_role_world_receiver(g_world, 0, &r), DCR_OK); /* prewarmed */
    char path[128];
    snprintf(path, sizeof path, "%s/replay.dcrs", g_dir);
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, r, 0, &f), DCR_OK);
    const void *before = dcr_params_at(dcr_receiver_params(r), 0)->storage->data;
    assert_int_equal(dcr_resident_attach(f, r, false, NULL), DCR_OK);
    assert_ptr_not_equal(dcr_params_at(dcr_receiver_params(r), 0)->storage->data, before);

    int *enc = encodings(r, inv);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 31);
    dcr_storage_t **old = g_world->canonical, **held = NULL;
    const double rates[2] = {0.01, 0.10};
    for (int i = 0; i < 2; i++) {
        dcr_storage_t **next = rt_tensors(inv, NULL);
        for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
            const dcr_tensor_desc_t *d = dcr_inventory_at(inv, t);
            /* Skipped tensors stay as they are (nothing carries them). */
            double rate = enc[t] < 0 ? 0 : rates[i];
            rt_mutate(&rng, d->dtype, old[t]->data, next[t]->data, dcr_desc_numel(d), rate);
        }
        rt_payloads_t ps = {0};
        uint64_t tau = (uint64_t)i + 1;
        assert_true(rt_encode_refit(inv, old, next, enc, tau, 2, 64, &rng, &ps) > 0);
        dcr_receiver_stats_t s0, s1;
        dcr_receiver_stats(r, &s0);
        assert_int_equal(dcr_receiver_begin_attempt(r, tau), DCR_OK);
        for (size_t k = 0; k < ps.n; k++)
            assert_int_equal(dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], NULL), DCR_OK);
        dcr_receiver_stats(r, &s1);
        assert_true(s1.items_sparse > s0.items_sparse);
        assert_int_equal(s1.items_full, s0.items_full);
        rt_payloads_free(&ps);

        dcr_receiver_t *fresh = NULL;
        assert_int_equal(
            dcr_serve_receiver_create(&g_world->sc->model, inv, &g_world->serve, 0, NULL, &fresh),
            DCR_OK);
        assert_int_equal(dcr_receiver_load_dense_all(fresh, next), DCR_OK);
        const char *param = NULL;
        int64_t elem = -1;
        if (!dcr_receiver_equal(r, fresh, &param, &elem))
            fail_msg("rate %g: %s[%lld] differs from the dense refit", rates[i],
                     param ? param : "?", (long long)elem);
        dcr_receiver_destroy(fresh);
        rt_tensors_free(held, inv);
        held = next;
        old = next;
    }
    rt_tensors_free(held, inv);
    free(enc);
    dcr_resident_detach(f, r);
    dcr_receiver_destroy(r);
    dcr_resident_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_survives_a_killed_process),
        cmocka_unit_test(test_absent_foreign_and_dirty_do_not_load),
        cmocka_unit_test(test_params_place_moves_bytes_keeps_handles),
        cmocka_unit_test(test_live_weights_killed_mid_apply),
        cmocka_unit_test(test_replay_after_params_move),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
