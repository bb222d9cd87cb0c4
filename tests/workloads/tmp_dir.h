/* One fresh temporary directory per test program, made by the cmocka group
 * setup and removed with its contents by the group teardown (header-only:
 * each test is one translation unit). Include after <cmocka.h>. */
#ifndef DCR_TESTS_WORKLOADS_TMP_DIR_H
#define DCR_TESTS_WORKLOADS_TMP_DIR_H

#include <stdio.h>
#include <stdlib.h>

static char tmp_dir[256];

static inline int tmp_dir_setup(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/dcr_test_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static inline int tmp_dir_teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
