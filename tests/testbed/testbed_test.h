/* What the testbed tests share: which testbed ids a test uses, and running
 * a shell command into a buffer.
 *
 * Ids: engineers and CI jobs that share a machine give each run its own
 * through DCR_TESTBED_TEST_IDS="A,B" (the first for the main testbed, the
 * second for a test's extra one); without it each test picks from its own
 * default range by pid. */
#ifndef DCR_TESTS_TESTBED_TEST_H
#define DCR_TESTS_TESTBED_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* The which-th (0 or 1) id of DCR_TESTBED_TEST_IDS, else fallback. Exits 1
 * with one line when the variable is not "A,B" of ids 0..55. */
static inline int testbed_test_id(int which, int fallback)
{
    const char *env = getenv("DCR_TESTBED_TEST_IDS");
    if (!env || !*env) return fallback;
    int a, b;
    char end;
    if (sscanf(env, "%d,%d%c", &a, &b, &end) != 2 || a < 0 || a > 55 || b < 0 || b > 55 || a == b) {
        fprintf(stderr,
                "DCR_TESTBED_TEST_IDS='%s': expected two different ids 0..55, as \"37,38\"\n", env);
        exit(1);
    }
    return which ? b : a;
}

/* Runs a shell command, its stdout (and stderr when merge) into out
 * (NUL-terminated, cut at cap - 1 bytes); its exit status, -1 when it did
 * not run or was killed. */
static inline int testbed_sh(char *out, size_t cap, bool merge, const char *fmt, ...)
{
    char cmd[2048], full[2100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), merge ? "(%s) 2>&1" : "%s", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
