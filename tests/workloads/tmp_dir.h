/* One fresh temporary directory per test program, made by the cmocka group
 * setup and removed with its contents by the group teardown (header-only:
 * each test is one translation unit), through testfiles.h. Include after
 * <cmocka.h>. */
#ifndef DCR_TESTS_WORKLOADS_TMP_DIR_H
#define DCR_TESTS_WORKLOADS_TMP_DIR_H

#include "testfiles.h"

static char tmp_dir[256];

static inline int tmp_dir_setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(tmp_dir, sizeof(tmp_dir), "workloads") ? 0 : -1;
}

static inline int tmp_dir_teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(tmp_dir);
}

#endif
