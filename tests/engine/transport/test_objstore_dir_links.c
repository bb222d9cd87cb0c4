/* The "dir" object store never acts outside its own tree (issue 32, items
 * 2 and 15): its root must be new, empty or marked by dcr and is never a
 * link; a link planted inside makes keys under it unreachable, never its
 * target's files deleted, read or replaced; an unknown scheme is refused
 * instead of becoming a folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/objstore.h"
#include "testfiles.h"

static char g_tmp[256];

static int setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(g_tmp, sizeof g_tmp, "dirlinks") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(g_tmp);
}

static dcr_status_t open_store(const char *path, dcr_objstore_t **out)
{
    char url[600];
    snprintf(url, sizeof url, "dir:%s", path);
    dcr_objstore_config_t cfg = {.url = url};
    return dcr_objstore_create(&cfg, out);
}

static void in_tmp(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", g_tmp, name);
}

static void test_root_must_be_dcrs(void **state)
{
    (void)state;
    char user[300], link[300], file[400];
    in_tmp(user, sizeof user, "user-folder");
    assert_int_equal(mkdir(user, 0755), 0);
    snprintf(file, sizeof file, "%s/thesis.tex", user);
    testfiles_put(file, "years of work\n");
    dcr_objstore_t *s = NULL;
    /* A folder holding a user's files is not a store. */
    assert_int_equal(open_store(user, &s), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), ".dcr-store"));
    /* A link to a folder is refused, even to an empty one. */
    char empty[300];
    in_tmp(empty, sizeof empty, "empty");
    assert_int_equal(mkdir(empty, 0755), 0);
    in_tmp(link, sizeof link, "store-link");
    assert_int_equal(symlink(empty, link), 0);
    assert_int_equal(open_store(link, &s), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "symbolic link"));
    char slashed[310];
    snprintf(slashed, sizeof slashed, "%s/", link);
    assert_int_equal(open_store(slashed, &s), DCR_EINVAL);
    assert_int_equal(testfiles_count(empty, ""), 0);
    /* An empty folder becomes a store, and a marked one reopens. */
    assert_int_equal(open_store(empty, &s), DCR_OK);
    assert_int_equal(dcr_objstore_put(s, "attempt-1/a", (const uint8_t *)"x", 1, NULL), DCR_OK);
    dcr_objstore_destroy(s);
    assert_int_equal(open_store(empty, &s), DCR_OK);
    dcr_objstore_destroy(s);
    /* A forged marker (not dcr's text, or a link) is not a marker. */
    char forged[300], marker[400];
    in_tmp(forged, sizeof forged, "forged");
    assert_int_equal(mkdir(forged, 0755), 0);
    snprintf(marker, sizeof marker, "%s/.dcr-store", forged);
    testfiles_put(marker, "anything\n");
    snprintf(file, sizeof file, "%s/notes", forged);
    testfiles_put(file, "mine\n");
    assert_int_equal(open_store(forged, &s), DCR_EINVAL);
    testfiles_assert_text(file, "mine\n");
}

/* The repro: attempt-3 is a link to a user's folder, attempt-1
 * holds a user's file. Deletes, lists, reads and writes under attempt-3
 * never reach the link's target. */
static void test_links_inside_never_followed(void **state)
{
    (void)state;
    char root[300], victim[300], vfile[400], link[400];
    in_tmp(root, sizeof root, "store");
    in_tmp(victim, sizeof victim, "victim");
    assert_int_equal(mkdir(victim, 0755), 0);
    snprintf(vfile, sizeof vfile, "%s/payload-0", victim);
    testfiles_put(vfile, "precious\n");
    dcr_objstore_t *s = NULL;
    assert_int_equal(open_store(root, &s), DCR_OK);
    snprintf(link, sizeof link, "%s/attempt-3", root);
    assert_int_equal(symlink(victim, link), 0);

    dcr_objstore_entry_t *v = NULL;
    size_t n = 99;
    assert_int_equal(dcr_objstore_list_all(s, "attempt-3/", &v, &n), DCR_OK);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(dcr_objstore_list_all(s, "", &v, &n), DCR_OK);
    assert_int_equal(n, 0);
    free(v);
    assert_int_not_equal(dcr_objstore_delete(s, "attempt-3/payload-0"), DCR_OK);
    assert_int_equal(dcr_objstore_delete_prefix(s, "attempt-3/"), DCR_OK);
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_not_equal(dcr_objstore_get(s, "attempt-3/payload-0", 1 << 20, NULL, &data, &len),
                         DCR_OK);
    assert_int_not_equal(
        dcr_objstore_put(s, "attempt-3/payload-0", (const uint8_t *)"evil", 4, NULL), DCR_OK);
    assert_int_not_equal(dcr_objstore_put(s, "attempt-3/new", (const uint8_t *)"evil", 4, NULL),
                         DCR_OK);
    testfiles_assert_text(vfile, "precious\n");
    assert_int_equal(testfiles_count(victim, ""), 1);

    /* A link named like a key: deleting the key removes the link, never
     * the file it points at. */
    char keylink[400];
    assert_int_equal(dcr_objstore_put(s, "attempt-1/real", (const uint8_t *)"r", 1, NULL), DCR_OK);
    snprintf(keylink, sizeof keylink, "%s/attempt-1/MANIFEST", root);
    assert_int_equal(symlink(vfile, keylink), 0);
    assert_int_not_equal(dcr_objstore_get(s, "attempt-1/MANIFEST", 1 << 20, NULL, &data, &len),
                         DCR_OK);
    assert_int_equal(dcr_objstore_delete_prefix(s, "attempt-1/"), DCR_OK);
    dcr_objstore_delete(s, "attempt-1/MANIFEST");
    testfiles_assert_text(vfile, "precious\n");
    dcr_objstore_destroy(s);
}

static void test_unknown_scheme_refused(void **state)
{
    (void)state;
    const dcr_objstore_ops_t *o = dcr_objstore_for_url("bogus:x");
    assert_null(o);
    assert_non_null(strstr(dcr_error_detail(), "unknown scheme"));
    assert_null(dcr_objstore_for_url("s3x+y.z:thing"));
    /* Paths stay folders, ':' inside them too, and dir: names one. */
    const char *dirs[] = {"plain", "/abs/a:b", "./rel:x", "dir:x", "9lives:x", "a/b:c"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        o = dcr_objstore_for_url(dirs[i]);
        if (o == NULL || strcmp(o->hdr.name, "dir") != 0) fail_msg("%s is not a folder", dirs[i]);
    }
    o = dcr_objstore_for_url("s3://bucket/p");
    assert_non_null(o);
    assert_string_equal(o->hdr.name, "s3");
    /* Nothing was made in the current folder for the refused one. */
    dcr_objstore_config_t cfg = {.url = "bogus:x"};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&cfg, &s), DCR_EINVAL);
    assert_int_equal(access("bogus:x", F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_must_be_dcrs),
        cmocka_unit_test(test_links_inside_never_followed),
        cmocka_unit_test(test_unknown_scheme_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
