/* A real etcd for tests: started from Debian's etcd-server (/usr/bin/etcd,
 * or $DCR_ETCD) on loopback ports picked here, with a fresh data directory,
 * and killed and removed at the end. Restartable on the same data directory
 * and ports, to test durability. A test that needs it and cannot start it
 * fails: etcd_server_start says why on stderr and returns false. */
#ifndef DCR_TEST_ETCD_SERVER_H
#define DCR_TEST_ETCD_SERVER_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testfiles.h"

typedef struct etcd_server {
    pid_t pid; /* 0 when not running */
    int client_port, peer_port;
    char dir[PATH_MAX]; /* temp dir: data/ and etcd.log inside */
    char hostport[64];  /* 127.0.0.1:PORT */
} etcd_server_t;

/* A loopback port that was free a moment ago (the kernel's pick). */
static int etcd_server_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        port = ntohs(a.sin_port);
    }
    close(fd);
    return port;
}

/* True once GET /health answers {"health":"true"}. */
static bool etcd_server_healthy(const etcd_server_t *s)
{
    char url[128], body[256] = "";
    snprintf(url, sizeof url, "http://%s/health", s->hostport);
    CURL *c = curl_easy_init();
    if (c == NULL) return false;
    FILE *f = fmemopen(body, sizeof body - 1, "w");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    fclose(f);
    return rc == CURLE_OK && code == 200 && strstr(body, "\"true\"") != NULL;
}

static void etcd_server_log_tail(const etcd_server_t *s)
{
    char path[PATH_MAX + 16], line[512];
    snprintf(path, sizeof path, "%s/etcd.log", s->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    char last[4][512] = {{0}};
    int n = 0;
    while (fgets(line, sizeof line, f)) snprintf(last[n++ % 4], sizeof line, "%s", line);
    fclose(f);
    for (int i = 0; i < 4; i++) fprintf(stderr, "  etcd log: %s", last[(n + i) % 4]);
}

/* Starts etcd (on s's directory and ports when `again`, else on fresh ones)
 * and waits up to 30 s for it to be healthy. */
static bool etcd_server_launch(etcd_server_t *s, bool again)
{
    const char *bin = getenv("DCR_ETCD") ? getenv("DCR_ETCD") : "/usr/bin/etcd";
    if (!again) {
        if (!testfiles_tmpdir(s->dir, sizeof s->dir, "etcd")) {
            fprintf(stderr, "etcd fixture: no temporary folder %s: %s\n", s->dir, strerror(errno));
            return false;
        }
        s->client_port = etcd_server_free_port();
        s->peer_port = etcd_server_free_port();
        while (s->peer_port == s->client_port) s->peer_port = etcd_server_free_port();
        if (s->client_port < 0 || s->peer_port < 0) {
            fprintf(stderr, "etcd fixture: no free loopback port\n");
            return false;
        }
    }
    snprintf(s->hostport, sizeof s->hostport, "127.0.0.1:%d", s->client_port);
    char data[PATH_MAX + 8], log[PATH_MAX + 16], client[64], peer[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(log, sizeof log, "%s/etcd.log", s->dir);
    snprintf(client, sizeof client, "http://127.0.0.1:%d", s->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", s->peer_port);
    snprintf(cluster, sizeof cluster, "default=%s", peer);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        /* A test that crashes must not leave its etcd behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "--name", "default", "--data-dir", data, "--listen-client-urls", client,
              "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
              "warn", (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 300; i++) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            fprintf(stderr, "etcd fixture: %s exited during startup (status %d)\n", bin, status);
            etcd_server_log_tail(s);
            return false;
        }
        if (etcd_server_healthy(s)) return true;
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "etcd fixture: %s not healthy on %s after 30 s\n", bin, s->hostport);
    etcd_server_log_tail(s);
    return false;
}

/* Kills the server at once (SIGKILL: no clean shutdown), keeping its data. */
static void etcd_server_kill(etcd_server_t *s)
{
    if (s->pid <= 0) return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static int etcd_server_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Kills the server and removes its directory. */
static void etcd_server_stop(etcd_server_t *s)
{
    etcd_server_kill(s);
    if (s->dir[0] != '\0') nftw(s->dir, etcd_server_rm, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

/* Starts a fresh server, retrying twice on new ports (another process may
 * have taken a port picked here between the pick and etcd's bind). */
static bool etcd_server_start(etcd_server_t *s)
{
    memset(s, 0, sizeof *s);
    for (int attempt = 0; attempt < 3; attempt++) {
        if (etcd_server_launch(s, false)) return true;
        etcd_server_stop(s);
    }
    return false;
}

#endif
