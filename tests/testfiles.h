/* Files and folders for tests that write into a private temporary folder
 * (header-only: each test is one translation unit). Include after
 * <cmocka.h>. */
#ifndef DCR_TESTFILES_H
#define DCR_TESTFILES_H

#include <dirent.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "dcr/outpath.h"

/* A fresh folder TMPDIR/dcr-test-TAG-XXXXXX into buf; false on failure.
 * The one way tests make a temporary folder (testfiles_rmtree removes it). */
static inline int testfiles_tmpdir(char *buf, size_t cap, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/dcr-test-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    return mkdtemp(buf) != NULL;
}

/* Whether /dev/shm is memory (a tmpfs), where dcr bench puts its temporary
 * run directory when it can: the tests' own look, not dcr's code. */
static inline bool testfiles_shm_is_memory(void)
{
    struct statfs fs;
    return statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/* Removes dir and everything under it (links, never their targets); 0 or
 * -1. An empty name is nothing to remove, so a teardown may run before its
 * setup made the folder. */
static inline int testfiles_rmtree(const char *dir)
{
    return dir[0] == '\0' ? 0 : dcr_outpath_remove_tree(dir);
}

/* Runs fn with stderr (fd 2) in a temporary file; returns what fn wrote
 * there (malloc'd, the caller frees). */
static inline char *testfiles_capture_stderr(void (*fn)(void))
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(tmp, 0, SEEK_END);
    long len = ftell(tmp);
    rewind(tmp);
    char *text = calloc((size_t)len + 1, 1);
    assert_int_equal(fread(text, 1, (size_t)len, tmp), (size_t)len);
    fclose(tmp);
    return text;
}

/* Writes text to path (created or truncated). */
static inline void testfiles_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The whole of path is text. */
static inline void testfiles_assert_text(const char *path, const char *text)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, text);
}

/* Entries of dir whose names start with prefix ("" for all), . and ..
 * excluded; -1 when dir cannot be read. */
static inline int testfiles_count(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            !strncmp(e->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

#endif
