/* Running the dcr binary from a cmocka test: `dcr <args>` with stdout and
 * stderr captured, the one-line error contract, and JSON output. The binary
 * is the one named by $DCR_CLI, else the one this build made (DCR_CLI_PATH).
 * Include after <cmocka.h> and <jansson.h>. */
#ifndef DCR_TESTS_CLI_RUN_H
#define DCR_TESTS_CLI_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct result {
    int rc;
    char out[1 << 17], err[1 << 14];
} result_t;

/* Reads a file into buf (NUL-terminated, truncated to cap - 1 bytes). */
static inline char *slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

static inline void run(result_t *r, const char *args)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    char cmd[4096], out[64], err[64];
    snprintf(out, sizeof(out), "/tmp/dcr-cli-%d.out", (int)getpid());
    snprintf(err, sizeof(err), "/tmp/dcr-cli-%d.err", (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s %s >%s 2>%s", cli, args, out, err);
    int status = system(cmd);
    r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    slurp(out, r->out, sizeof(r->out));
    slurp(err, r->err, sizeof(r->err));
    unlink(out);
    unlink(err);
}

/* A failure is exactly one line on stderr, mentioning `needle`, and exit rc. */
static inline void expect_error(const char *args, int rc, const char *needle)
{
    static result_t r;
    run(&r, args);
    if (r.rc != rc) fail_msg("dcr %s: exit %d, expected %d (stderr: %s)", args, r.rc, rc, r.err);
    size_t len = strlen(r.err);
    assert_true(len > 0 && r.err[len - 1] == '\n');
    assert_null(memchr(r.err, '\n', len - 1));
    if (!strstr(r.err, needle)) fail_msg("dcr %s: '%s' lacks '%s'", args, r.err, needle);
}

/* Runs a command that must succeed and print one JSON document. */
static inline json_t *run_json(const char *args)
{
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s failed: %s", args, r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    if (!j) fail_msg("dcr %s: output is not JSON: %s", args, e.text);
    return j;
}

#endif
