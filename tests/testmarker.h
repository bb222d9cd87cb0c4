/* Writes a work-folder marker in dcr's current format
 * (workloads/harness/workdir.c) for process pid into dir, as that process
 * would have: for tests of the check and the sweep that need a marker of a
 * dead or a live run in a folder they made themselves. */
#ifndef DCR_TESTMARKER_H
#define DCR_TESTMARKER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testfiles.h"

/* Field `field` (1-based, as proc(5) counts) of /proc/PID/stat; 0 if none. */
static inline unsigned long long testmarker_stat_field(long pid, int field)
{
    char path[64], buf[1024] = {0};
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    for (int k = 3; p && k <= field; k++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static inline void testmarker_put(const char *dir, long pid)
{
    char boot[64] = "unknown", path[512], text[256];
    FILE *b = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (b) {
        if (fgets(boot, sizeof boot, b)) boot[strcspn(boot, "\n")] = '\0';
        fclose(b);
    }
    struct stat st;
    if (lstat(dir, &st) != 0) return;
    snprintf(text, sizeof text, "dcr work folder pid %ld start %llu boot %s dev %llu ino %llu\n",
             pid, testmarker_stat_field(pid, 22), boot, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    snprintf(path, sizeof path, "%s/.dcr-workdir", dir);
    testfiles_put(path, text);
}

/* How many folders parent/PREFIX-* hold a marker naming process pid (the
 * temporary folders of that run there). */
static inline int testmarker_count_of(const char *parent, const char *prefix, long pid)
{
    char cmd[600], line[512];
    snprintf(cmd, sizeof cmd, "cat -- %s/%s-*/.dcr-workdir 2>/dev/null", parent, prefix);
    FILE *p = popen(cmd, "r");
    int n = 0;
    while (p && fgets(line, sizeof line, p)) {
        long at = 0;
        n += sscanf(line, "dcr work folder pid %ld ", &at) == 1 && at == pid;
    }
    if (p) pclose(p);
    return n;
}

#endif
