/* Which testbed ids a testbed test uses. Engineers and CI jobs that share a
 * machine give each run its own ids through DCR_TESTBED_TEST_IDS="A,B" (the
 * first for the main testbed, the second for a test's extra one); without
 * it each test picks from its own default range by pid. */
#ifndef DCR_TESTS_TESTBED_IDS_H
#define DCR_TESTS_TESTBED_IDS_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
