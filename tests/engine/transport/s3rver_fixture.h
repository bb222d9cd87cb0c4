/* A real S3 server for tests: s3rver (the npm package that
 * scripts/install-deps.sh installs into .deps/s3rver of the source tree),
 * started on a loopback port the kernel picks, with a temporary data
 * directory and one bucket, and stopped with the directory removed at the
 * end. A test that cannot start it fails (cmocka fail_msg), it never skips.
 *
 * It runs with NODE_OPTIONS=--openssl-legacy-provider (see s3rver_start).
 * s3rver knows one access key id ("S3RVER", refused otherwise with 403
 * InvalidAccessKeyId) and does not verify signatures: a wrong secret passes.
 * So tests over it exercise the requests and answers, not the signing.
 * Header-only: each test is one translation unit. */
#ifndef DCR_TEST_S3RVER_FIXTURE_H
#define DCR_TEST_S3RVER_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testfiles.h"

typedef struct s3rver_fixture {
    pid_t pid;
    int port;
    char dir[PATH_MAX]; /* data directory and log */
    char endpoint[64];  /* http://127.0.0.1:PORT */
    char bucket[64];
} s3rver_fixture_t;

static int s3rver__rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Sets the credentials s3rver accepts (its built-in key id; any secret). */
static inline void s3rver_env(void)
{
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("AWS_REGION", "us-east-1", 1);
}

/* Starts s3rver with `bucket` configured; fails the test when it cannot. */
static inline void s3rver_start(s3rver_fixture_t *f, const char *bucket)
{
    memset(f, 0, sizeof *f);
    f->pid = -1;
    char bin[PATH_MAX];
    snprintf(bin, sizeof bin, "%s/.deps/s3rver/node_modules/.bin/s3rver", DCR_SOURCE_DIR);
    if (access(bin, X_OK) != 0)
        fail_msg("s3rver not found at %s: run `bash scripts/install-deps.sh`", bin);
    if (!testfiles_tmpdir(f->dir, sizeof f->dir, "s3rver"))
        fail_msg("s3rver: no temporary folder %s: %s", f->dir, strerror(errno));
    char data[PATH_MAX + 8], log[PATH_MAX + 8];
    snprintf(data, sizeof data, "%s/data", f->dir);
    snprintf(log, sizeof log, "%s/log", f->dir);
    mkdir(data, 0755);
    snprintf(f->bucket, sizeof f->bucket, "%s", bucket);
    pid_t pid = fork();
    if (pid < 0) fail_msg("s3rver: fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive a crashed test */
        /* s3rver 3.7 makes continuation tokens with DES, which Node 17+
         * (OpenSSL 3) offers only through the legacy provider: without it
         * every listing that needs a second page answers 500. */
        setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "-d", data, "-a", "127.0.0.1", "-p", "0", "--configure-bucket", bucket,
              (char *)NULL);
        _exit(127);
    }
    f->pid = pid;
    /* The port it bound is in its first line: "S3rver listening on 127.0.0.1:PORT". */
    for (int i = 0; i < 600 && f->port == 0; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            f->pid = -1;
            fail_msg("s3rver exited before listening (status %d); see %s", status, log);
        }
        FILE *lf = fopen(log, "r");
        char line[256];
        while (lf != NULL && fgets(line, sizeof line, lf) != NULL) {
            const char *p = strstr(line, "listening on 127.0.0.1:");
            if (p != NULL) f->port = atoi(p + strlen("listening on 127.0.0.1:"));
        }
        if (lf != NULL) fclose(lf);
        if (f->port == 0) usleep(50000);
    }
    if (f->port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        f->pid = -1;
        fail_msg("s3rver did not listen within 30 s; see %s", log);
    }
    snprintf(f->endpoint, sizeof f->endpoint, "http://127.0.0.1:%d", f->port);
    /* It answers once a TCP connection is accepted. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 100; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        int rc = connect(s, (struct sockaddr *)&a, sizeof a);
        close(s);
        if (rc == 0) return;
        usleep(50000);
    }
    fail_msg("s3rver on port %d accepts no connection", f->port);
}

/* Stops s3rver and removes its directory. Safe after a failed start. */
static inline void s3rver_stop(s3rver_fixture_t *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        int status;
        for (int i = 0; i < 100; i++) {
            if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
                f->pid = -1;
                break;
            }
            usleep(20000);
        }
        if (f->pid > 0) {
            kill(f->pid, SIGKILL);
            waitpid(f->pid, NULL, 0);
        }
        f->pid = -1;
    }
    if (f->dir[0] != '\0') nftw(f->dir, s3rver__rm, 16, FTW_DEPTH | FTW_PHYS);
    f->dir[0] = '\0';
}

#endif
