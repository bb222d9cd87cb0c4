/* What the tests of dcr faults --processes share. A test's own TMPDIR:
 * every run directory, and mpirun's session folders, go there, and every
 * role gets its run directory in its arguments, so what a run left behind
 * is the folder's entries plus the processes whose command line names it.
 * And the JSON checks of a processes run's restores. Include after
 * <cmocka.h> and <jansson.h>. */
#ifndef DCR_TESTS_FAULTS_PROCS_TEST_H
#define DCR_TESTS_FAULTS_PROCS_TEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

/* cmocka group setup: TMPDIR = /tmp/<prefix>-<pid>. */
static inline int run_tmp_setup(const char *prefix)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/%s-%d", prefix, (int)getpid());
    mkdir(g_tmp, 0755);
    setenv("TMPDIR", g_tmp, 1);
    return 0;
}

static inline int run_tmp_teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf -- %s", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* How many things the runs left: entries of TMPDIR and processes naming it;
 * the last one found is described in what. */
static inline int run_tmp_left(char *what, size_t cap)
{
    int n = 0;
    DIR *d = opendir(g_tmp);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') snprintf(what, cap, "entry %s", e->d_name), n++;
    if (d) closedir(d);
    DIR *p = opendir("/proc");
    for (struct dirent *e; p && (e = readdir(p));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], buf[4096];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "rb");
        size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f) fclose(f);
        for (size_t i = 0; i < len; i++) buf[i] = buf[i] ? buf[i] : ' ';
        buf[len] = '\0';
        if (strstr(buf, g_tmp)) snprintf(what, cap, "process %s: %.200s", e->d_name, buf), n++;
    }
    if (p) closedir(p);
    return n;
}

/* Nothing left once the launcher's janitor had its grace (up to 5 s). */
static inline void run_tmp_assert_nothing_left(void)
{
    char what[400] = "";
    int n = 0;
    for (int waited = 0; waited < 5000 && (n = run_tmp_left(what, sizeof(what))) > 0; waited += 100)
        usleep(100000);
    if (n > 0) fail_msg("%d things left behind in or naming %s, e.g. %s", n, g_tmp, what);
}

static inline json_int_t num(const json_t *j, const char *key)
{
    const json_t *v = json_object_get(j, key);
    if (!json_is_integer(v)) fail_msg("JSON lacks integer '%s'", key);
    return json_integer_value(v);
}

/* restores_by_kind, as dcr bench --processes reports it: every kind with
 * count, bytes, dense_bytes and seconds; at least `least` restores in all
 * (every restarted receiver restores once, more when the run went on
 * without it or it held writes of an attempt that did not commit). Each
 * restore's dense_bytes is the whole checkpoint, the same for all; a clean
 * restore moves nothing, a replay less than a dense refit, a dense one all. */
static inline void assert_restores(const json_t *j, json_int_t least)
{
    static const char *const kinds[] = {"clean", "replay", "repair", "dense"};
    const json_t *by = json_object_get(j, "restores_by_kind");
    assert_non_null(by);
    json_int_t n = 0, dense_each = 0;
    for (int k = 0; k < 4; k++) {
        const json_t *x = json_object_get(by, kinds[k]);
        assert_non_null(x);
        json_int_t c = num(x, "count"), b = num(x, "bytes"), d = num(x, "dense_bytes");
        assert_true(json_is_real(json_object_get(x, "seconds")));
        n += c;
        if (c == 0) {
            assert_int_equal(b + d, 0);
            continue;
        }
        assert_int_equal(d % c, 0);
        if (dense_each == 0) dense_each = d / c;
        assert_int_equal(d / c, dense_each);
        if (k == 0) assert_int_equal(b, 0);
        if (k == 1) assert_true(b < d);
        if (k == 3) assert_int_equal(b, d);
    }
    assert_true(n >= least);
    assert_true(dense_each > 0);
}

#endif
