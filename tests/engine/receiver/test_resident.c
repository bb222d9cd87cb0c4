/* ctest-labels: unit
 *
 * Resident files (dcr/resident.h): a receiver's bytes saved by a child
 * process that then dies by SIGKILL are found clean, at the saved version,
 * by the parent, and load into a receiver that held zeros so that it equals
 * the one saved, byte for byte (dcr_receiver_equal, every byte); a file of
 * another identity or layout reads foreign, an interrupted save dirty, and
 * neither loads. Receivers come from the serving layout of a small scaled
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

#include "dcr/resident.h"
#include "workloads/roles/world.h"

static char g_dir[64];
static dcr_role_world_t *g_world;

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dcr_resident_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    dcr_bench_config_t c = dcr_bench_config_default();
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
    size_t bytes = 0;
    const dcr_params_t *ps = dcr_receiver_params(src);
    for (size_t i = 0; i < dcr_params_count(ps); i++) bytes += dcr_params_at(ps, i)->storage->bytes;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_survives_a_killed_process),
        cmocka_unit_test(test_absent_foreign_and_dirty_do_not_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
