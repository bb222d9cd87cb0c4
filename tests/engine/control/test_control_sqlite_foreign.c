/* A database that is not dcr's, given as the SQLite control plane, is
 * refused before anything is written to it (issue 32, item 4): its bytes,
 * its journal mode and its change counter stay as they were, and no -wal,
 * -shm or -journal file appears beside it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/control.h"
#include "testfiles.h"

static char g_tmp[256];

static int setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(g_tmp, sizeof g_tmp, "sqforeign") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(g_tmp);
}

/* The whole file into a malloc'd buffer. */
static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void make_db(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* Opens path as the control plane: refused, and nothing about the file or
 * its folder changed. */
static void expect_untouched(const char *path)
{
    size_t n0 = 0, n1 = 0;
    uint8_t *before = read_all(path, &n0);
    int entries = testfiles_count(g_tmp, "");
    dcr_control_config_t cfg = {.address = path};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create("sqlite", &cfg, &c);
    if (st == DCR_OK) {
        dcr_control_destroy(c);
        fail_msg("%s was accepted as a control plane", path);
    }
    uint8_t *after = read_all(path, &n1);
    assert_int_equal(n0, n1);
    if (memcmp(before, after, n0) != 0) fail_msg("%s was modified before it was refused", path);
    assert_int_equal(testfiles_count(g_tmp, ""), entries); /* no -wal, -shm, -journal */
    free(before);
    free(after);
}

static void test_foreign_database_untouched(void **state)
{
    (void)state;
    char path[400];
    /* No application_id: someone's own database. */
    snprintf(path, sizeof path, "%s/notes.db", g_tmp);
    make_db(path, "CREATE TABLE notes(t TEXT); INSERT INTO notes VALUES('keep me');");
    expect_untouched(path);
    assert_non_null(strstr(dcr_error_detail(), "not a dcr control plane"));
    /* Another application's id. */
    snprintf(path, sizeof path, "%s/other.db", g_tmp);
    make_db(path, "PRAGMA application_id = 1234; CREATE TABLE t(x); INSERT INTO t VALUES(1);");
    expect_untouched(path);
    /* dcr's id on a newer schema than this build reads. */
    snprintf(path, sizeof path, "%s/future.db", g_tmp);
    make_db(path, "PRAGMA application_id = 1684238897; PRAGMA user_version = 99;"
                  "CREATE TABLE dcr_record(id INTEGER PRIMARY KEY);");
    expect_untouched(path);
    /* Not an SQLite file at all. */
    snprintf(path, sizeof path, "%s/text.db", g_tmp);
    testfiles_put(path, "just some text that is long enough to look like a header........"
                        "...............................................................\n");
    expect_untouched(path);
}

/* The refusal does not cost dcr's own files: a new file is created, and a
 * dcr file opens again. */
static void test_own_database_still_opens(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/control.db", g_tmp);
    dcr_control_config_t cfg = {.address = path};
    dcr_control_t *c = NULL;
    assert_int_equal(dcr_control_create("sqlite", &cfg, &c), DCR_OK);
    dcr_commit_record_t rec;
    assert_int_equal(dcr_control_read(c, &rec), DCR_OK);
    dcr_control_destroy(c);
    assert_int_equal(dcr_control_create("sqlite", &cfg, &c), DCR_OK);
    dcr_control_destroy(c);
    /* An empty file (touch) is a new control plane too. */
    snprintf(path, sizeof path, "%s/empty.db", g_tmp);
    testfiles_put(path, "");
    assert_int_equal(dcr_control_create("sqlite", &cfg, &c), DCR_OK);
    dcr_control_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_database_untouched),
        cmocka_unit_test(test_own_database_still_opens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
