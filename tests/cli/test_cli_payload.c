/* ctest-labels: integration
 *
 * dcr payload inspect|verify as a careless or hostile user meets it: devices,
 * sparse and truncated files and a payload declaring an 8 GiB body are each
 * refused with one line, fast and in bounded memory (the child's peak RSS,
 * from wait4); keyed payloads built here with libzstd and libb2 directly
 * are verified only with their key; and dcr bench with a payload key runs
 * bit-exact. Runs the binary named by DCR_CLI. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"
#include <jansson.h>

#include "cli_run.h"
#include "engine/codec/codec_test_util.h"

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(g_dir, sizeof g_dir, "cli-payload") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void t_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void t_write(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

typedef struct t_run {
    int rc;
    long maxrss_kb;
    double seconds;
    char err[4096], out[4096];
} t_run_t;

/* Runs `dcr payload VERB FILE [extra...]` as a direct child, so that wait4
 * reports this child's own peak RSS. */
static void t_payload(t_run_t *r, const char *verb, const char *file, const char *a1,
                      const char *a2)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    char out[256], err[256];
    t_path(out, sizeof out, "stdout");
    t_path(err, sizeof err, "stderr");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0) _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        execl(cli, cli, "payload", verb, file, a1, a2, (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r->maxrss_kb = ru.ru_maxrss;
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
}

/* Exit rc, exactly one stderr line holding `needle`, under 5 s and 256 MiB
 * (a sanitizer build's own overhead included). */
static void t_refused_rc(int rc, const char *verb, const char *file, const char *a1, const char *a2,
                         const char *needle)
{
    t_run_t r;
    t_payload(&r, verb, file, a1, a2);
    if (r.rc != rc || !strstr(r.err, needle))
        fail_msg("payload %s %s: exit %d, stderr '%s', expected %d and '%s'", verb, file, r.rc,
                 r.err, rc, needle);
    size_t len = strlen(r.err);
    assert_true(len > 0 && r.err[len - 1] == '\n');
    assert_null(memchr(r.err, '\n', len - 1));
    if (r.seconds > 5.0 || r.maxrss_kb > 256 * 1024)
        fail_msg("payload %s %s: %.2f s, %ld KiB peak", verb, file, r.seconds, r.maxrss_kb);
}

/* A payload refused: exit 1 (a bad key file or FILE itself is usage, 2). */
static void t_refused(const char *verb, const char *file, const char *a1, const char *a2,
                      const char *needle)
{
    t_refused_rc(1, verb, file, a1, a2, needle);
}

static void test_unbounded_inputs(void **state)
{
    (void)state;
    char path[256];
    /* A device that never ends: one header read. */
    t_refused("verify", "/dev/zero", NULL, NULL, "bad magic");
    t_refused("inspect", "/dev/zero", NULL, NULL, "bad magic");
    /* A FIFO with no writer: refused at once, not a blocked open. */
    t_path(path, sizeof path, "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    t_refused_rc(2, "verify", path, NULL, NULL, "a FIFO");
    unlink(path);
    /* A 3 GiB sparse file: one header read, not 3 GiB. */
    t_path(path, sizeof path, "sparse");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)3 << 30), 0);
    close(fd);
    t_refused("verify", path, NULL, NULL, "bad magic");
    unlink(path);
    /* A short file. */
    t_path(path, sizeof path, "short");
    t_write(path, "DCRP\1\0", 6, 0600);
    t_refused("verify", path, NULL, NULL, "truncated header: 6 bytes");
}

static void test_declared_8gib_body(void **state)
{
    (void)state;
    size_t clen, len;
    uint8_t *frame = t_rle_frame((uint64_t)8 << 30, &clen);
    t_hdr_t h = {.version = 1, .tau = 3, .id = 1, .owner = 0, .items = 0};
    uint8_t *buf = t_wrap_compressed(&h, (uint64_t)8 << 30, frame, clen, &len);
    char path[256];
    t_path(path, sizeof path, "huge");
    t_write(path, buf, len, 0600);
    t_refused("verify", path, NULL, NULL, "exceeds this reader's limit of 1073741824");
    t_refused("inspect", path, NULL, NULL, "refused before allocating");
    t_refused("verify", path, "--max-raw", "4294967296", "limit of 4294967296");
    /* The same header with the body cut short: read only what is there. */
    t_write(path, buf, len / 2, 0600);
    t_refused("verify", path, "--max-raw", "17179869184", "file ends after");
    /* And with bytes after the declared body. */
    free(buf);
    free(frame);
    uint8_t raw[24] = {0};
    buf = t_wrap(&h, raw, sizeof raw, &len);
    uint8_t *longer = calloc(1, len + 1);
    memcpy(longer, buf, len);
    t_write(path, longer, len + 1, 0600);
    t_refused("verify", path, NULL, NULL, "bytes follow");
    t_write(path, buf, len, 0600);
    t_run_t r;
    t_payload(&r, "verify", path, NULL, NULL);
    if (r.rc != 0) fail_msg("empty payload: %s", r.err);
    free(longer);
    free(buf);
}

/* FORMAT.md section 7's payload built with libzstd and libb2 directly,
 * keyed with key when it is not NULL. */
static uint8_t *t_example(const uint8_t *key, size_t *len_p)
{
    uint8_t raw[127];
    t_example_body(raw, false);
    t_hdr_t h = {.version = 1, .flags = key ? 2 : 0, .tau = 7, .id = 5, .owner = 2, .items = 1};
    uint8_t *buf = t_wrap(&h, raw, sizeof raw, len_p);
    if (key) t_digest(buf, buf + T_HDR_SIZE, *len_p - T_HDR_SIZE, key, buf + T_H_DIGEST);
    return buf;
}

static void test_keyed_payloads(void **state)
{
    (void)state;
    uint8_t key[32], other[32];
    for (int i = 0; i < 32; i++) {
        key[i] = (uint8_t)(0xA0 + i);
        other[i] = (uint8_t)(0xA1 + i);
    }
    char kpath[256], opath[256], spath[256], ppath[256], upath[256];
    t_path(kpath, sizeof kpath, "key");
    t_path(opath, sizeof opath, "other.key");
    t_path(spath, sizeof spath, "short.key");
    t_path(ppath, sizeof ppath, "keyed.payload");
    t_path(upath, sizeof upath, "unkeyed.payload");
    t_write(kpath, key, 32, 0600);
    t_write(opath, other, 32, 0600);
    t_write(spath, key, 31, 0600);
    size_t len;
    uint8_t *buf = t_example(key, &len);
    t_write(ppath, buf, len, 0600);
    free(buf);
    buf = t_example(NULL, &len);
    t_write(upath, buf, len, 0600);
    free(buf);

    t_run_t r;
    t_payload(&r, "verify", ppath, "--payload-key", kpath);
    if (r.rc != 0) fail_msg("keyed payload with its key: %s", r.err);
    assert_non_null(strstr(r.out, "valid payload, 1 items, signed with the payload key"));
    t_payload(&r, "inspect", ppath, "--payload-key", kpath);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "flags 0x0002 (keyed)"));
    t_refused("verify", ppath, NULL, NULL, "no payload key is configured");
    t_refused("verify", ppath, "--payload-key", opath, "keyed BLAKE2b-128 digest does not match");
    t_refused("verify", upath, "--payload-key", kpath, "unkeyed");
    t_payload(&r, "verify", upath, NULL, NULL);
    assert_int_equal(r.rc, 0);
    /* Key files: the wrong size names the file and its size; a key others
     * can read works but is warned about in one line. */
    t_refused_rc(2, "verify", ppath, "--payload-key", spath, "31 bytes, expected exactly 32");
    t_payload(&r, "verify", ppath, "--payload-key", spath);
    assert_non_null(strstr(r.err, spath));
    chmod(kpath, 0644);
    t_payload(&r, "verify", ppath, "--payload-key", kpath);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.err, "warning: payload key"));
    assert_non_null(strstr(r.err, "readable by group or others"));
    assert_null(memchr(r.err, '\n', strlen(r.err) - 1));
}

static void test_bench_with_key(void **state)
{
    (void)state;
    char kpath[256], args[512];
    t_path(kpath, sizeof kpath, "bench.key");
    uint8_t key[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 5 + 3);
    t_write(kpath, key, 32, 0600);
    const char *transports[2] = {"objstore", "relay"};
    for (int t = 0; t < 2; t++) {
        snprintf(args, sizeof args,
                 "bench --json --scale 64 --layers 1 --warmup 1 --refits 2 --transport %s "
                 "--payload-key %s",
                 transports[t], kpath);
        json_t *j = run_json(args);
        assert_true(json_is_true(json_object_get(j, "bit_exact")));
        assert_true(json_is_true(json_object_get(json_object_get(j, "config"), "payload_keyed")));
        assert_int_equal(json_integer_value(json_object_get(j, "payloads_rejected")), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "payloads_unauthenticated")), 0);
        assert_true(json_real_value(json_object_get(j, "payload_bytes_mean")) > 0);
        json_decref(j);
    }
    snprintf(args, sizeof args, "bench --scale 64 --layers 1 --payload-key %s/missing.key", g_dir);
    expect_error(args, 2, "missing.key");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbounded_inputs),
        cmocka_unit_test(test_declared_8gib_body),
        cmocka_unit_test(test_keyed_payloads),
        cmocka_unit_test(test_bench_with_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
