/* A scripted HTTP server on loopback for the S3 backend's error paths: each
 * accepted connection takes the next scripted answer (raw bytes, sent after
 * an optional delay, then the connection is closed), so a test can return
 * what a real service only does when it fails: a 500 before a 200, a
 * truncated body, a wrong ETag, a late answer, a 403. Header-only. */
#ifndef DCR_TEST_FAKE_HTTP_H
#define DCR_TEST_FAKE_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FAKE_HTTP_MAX 16

typedef struct fake_answer {
    const char *raw; /* the whole answer: status line, headers, body */
    size_t len;      /* 0: strlen(raw) */
    int delay_ms;    /* before answering */
} fake_answer_t;

typedef struct fake_http {
    int fd, port;
    pthread_t th;
    fake_answer_t answers[FAKE_HTTP_MAX];
    int nanswers;
    atomic_int requests; /* requests received */
    atomic_bool quit;
    char endpoint[64];
    char last_request[2048]; /* first line of the latest request */
    char last_head[8192];    /* request line and headers of the latest request */
} fake_http_t;

/* Reads one request (headers and a Content-Length body) from c. */
static inline void fake__read_request(fake_http_t *f, int c)
{
    char buf[1 << 16];
    size_t n = 0;
    char *end = NULL;
    while (n < sizeof buf - 1 && end == NULL) {
        ssize_t r = recv(c, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0) return;
        n += (size_t)r;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    if (end != NULL) snprintf(f->last_head, sizeof f->last_head, "%.*s", (int)(end + 2 - buf), buf);
    char *nl = strstr(buf, "\r\n");
    if (nl != NULL) snprintf(f->last_request, sizeof f->last_request, "%.*s", (int)(nl - buf), buf);
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    long body = cl != NULL ? strtol(cl + 17, NULL, 10) : 0;
    long have = end != NULL ? (long)(n - (size_t)(end + 4 - buf)) : 0;
    while (have < body) {
        ssize_t r = recv(c, buf, sizeof buf, 0);
        if (r <= 0) return;
        have += r;
    }
}

static inline void *fake__serve(void *arg)
{
    fake_http_t *f = arg;
    for (int i = 0; !atomic_load(&f->quit);) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) continue;
        fake__read_request(f, c);
        atomic_fetch_add(&f->requests, 1);
        const fake_answer_t *a = &f->answers[i < f->nanswers ? i : f->nanswers - 1];
        i++;
        for (int ms = 0; ms < a->delay_ms && !atomic_load(&f->quit); ms += 10) usleep(10000);
        size_t len = a->len ? a->len : strlen(a->raw);
        for (size_t off = 0; off < len;) {
            ssize_t w = send(c, a->raw + off, len - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        shutdown(c, SHUT_WR);
        close(c);
    }
    return NULL;
}

/* Starts the server with n scripted answers (the last repeats). */
static inline void fake_http_start(fake_http_t *f, const fake_answer_t *answers, int n)
{
    memset(f, 0, sizeof *f);
    assert_true(n >= 1 && n <= FAKE_HTTP_MAX);
    memcpy(f->answers, answers, (size_t)n * sizeof *answers);
    f->nanswers = n;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->fd, 16), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    snprintf(f->endpoint, sizeof f->endpoint, "http://127.0.0.1:%d", f->port);
    assert_int_equal(pthread_create(&f->th, NULL, fake__serve, f), 0);
}

static inline void fake_http_stop(fake_http_t *f)
{
    atomic_store(&f->quit, true);
    pthread_join(f->th, NULL);
    close(f->fd);
}

#endif
