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
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Lines in s (newlines counted): a one-line error is 1. */
static inline int testbed_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Whether any namespace or state of testbed `id` is left. */
static inline bool testbed_test_leftovers(int id)
{
    char out[1 << 16], pfx[32];
    snprintf(pfx, sizeof(pfx), "dcrtb-%d-", id);
    testbed_sh(out, sizeof(out), true,
               "ip netns list; ls -d /run/dcrtb-%d /etc/netns/dcrtb-%d-* 2>/dev/null; true", id,
               id);
    return strstr(out, pfx) != NULL || strstr(out, "/run/dcrtb-") != NULL;
}

/* Takes testbed `id` down (and what a crashed run under it left). */
static inline void testbed_test_down(int id)
{
    char out[4096];
    testbed_sh(out, sizeof(out), true, "bash %s/scripts/testbed.sh down --id %d", DCR_SOURCE_DIR,
               id);
}

/* Exit code CTest reads as "skipped" (SKIP_RETURN_CODE). */
#define TESTBED_SKIP_CODE 77

/* Whether this process can build a testbed with id `id`: root, and a
 * network namespace it can create AND enter (ip netns exec remounts / and
 * /sys, which a chroot whose / is no mount point refuses). On false it has
 * printed the "SKIPPED: ..." line naming what (`what` says what needs it);
 * the caller returns TESTBED_SKIP_CODE. */
static inline bool testbed_test_can_run(int id, const char *what)
{
    if (geteuid() != 0) {
        printf("SKIPPED: %s needs root (network namespaces, tc)\n", what);
        return false;
    }
    char why[4096];
    int probe =
        testbed_sh(why, sizeof(why), true,
                   "ip netns add dcrtb-%d-probe && ip netns exec dcrtb-%d-probe true", id, id);
    char ignored[256];
    testbed_sh(ignored, sizeof(ignored), true, "ip netns del dcrtb-%d-probe 2>/dev/null; true", id);
    if (probe != 0) {
        printf("SKIPPED: cannot create and enter a network namespace here: %s", why);
        return false;
    }
    return true;
}

#endif
