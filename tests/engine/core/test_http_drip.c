/* The one HTTP client against servers that stall (issue 32, item 10): a
 * server dripping 2 bytes per second, one that accepts and never answers,
 * and a stop request (SIGTERM's dcr_cancel_request) during a stalled
 * request. Each case must end within a bound; alarm() is the test's own
 * time limit, so a regression fails instead of hanging CTest.
 * ctest-labels: unit */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/http-internal.h"
#include "dcr/cancel.h"

typedef struct server {
    int listen_fd, port;
    bool drip; /* answer 2 bytes per second; else accept and say nothing */
    atomic_int stop;
    pthread_t thread;
} server_t;

static void *serve(void *arg)
{
    server_t *s = arg;
    int c = accept(s->listen_fd, NULL, NULL);
    if (c < 0) return NULL;
    char req[4096];
    ssize_t n = read(c, req, sizeof req);
    (void)n;
    if (s->drip) {
        const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
        n = write(c, head, strlen(head));
        for (int i = 0; i < 600 && !atomic_load(&s->stop); i++) {
            if (i % 10 == 0 && write(c, "xx", 2) != 2) break; /* 2 bytes per second */
            usleep(100 * 1000);
        }
    } else {
        for (int i = 0; i < 600 && !atomic_load(&s->stop); i++) usleep(100 * 1000);
    }
    close(c);
    return NULL;
}

static void server_start(server_t *s, bool drip)
{
    memset(s, 0, sizeof *s);
    s->drip = drip;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->listen_fd, 4), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(s->listen_fd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server_t *s)
{
    atomic_store(&s->stop, 1);
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A GET the way the S3 backend makes one: a stall window, no total. */
static dcr_status_t get(const server_t *s, dcr__http_resp_t *resp, double *took)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", s->port);
    dcr__http_req_t q = {.method = "GET",
                         .url = url,
                         .connect_timeout_ms = 2000,
                         .stall_timeout_ms = 2000,
                         .body_max = 1 << 20,
                         .error_body_max = 2048};
    double t0 = now_s();
    dcr_status_t st = dcr__http_request(&q, resp);
    *took = now_s() - t0;
    return st;
}

/* 2 bytes per second is progress for a "1 byte per second" stall rule:
 * the transfer would run 50000 s. The low-speed floor ends it after the
 * stall window, and another try would not do better. */
static void test_drip_ends(void **state)
{
    (void)state;
    alarm(60);
    server_t s;
    server_start(&s, true);
    dcr__http_resp_t resp;
    double took = 0;
    dcr_status_t st = get(&s, &resp, &took);
    server_stop(&s);
    assert_int_equal(st, DCR_ETIMEOUT);
    assert_false(resp.retryable);
    /* The window is 2 s: a bound far below the drip's 50000 s, generous
     * for a loaded machine. */
    print_message("drip (2 B/s), 2 s window: ended after %.2f s\n", took);
    if (took > 30) fail_msg("a dripping server held the request %.1f s", took);
    dcr__http_resp_free(&resp);
    alarm(0);
}

static void test_silent_server_one_window(void **state)
{
    (void)state;
    alarm(60);
    server_t s;
    server_start(&s, false);
    dcr__http_resp_t resp;
    double took = 0;
    dcr_status_t st = get(&s, &resp, &took);
    server_stop(&s);
    assert_int_equal(st, DCR_ETIMEOUT);
    /* It accepted the connection and then said nothing: a retry meets the
     * same server, so the caller is told not to spend another window. */
    assert_false(resp.retryable);
    print_message("silent server, 2 s window: ended after %.2f s, not retryable\n", took);
    if (took > 30) fail_msg("a silent server held the request %.1f s", took);
    dcr__http_resp_free(&resp);
    alarm(0);
}

typedef struct later {
    int ms;
} later_t;

static void *cancel_later(void *arg)
{
    usleep((useconds_t)((later_t *)arg)->ms * 1000);
    dcr_cancel_request();
    return NULL;
}

/* A stop request ends a stalled request at once, not after its window. */
static void test_cancel_interrupts(void **state)
{
    (void)state;
    alarm(60);
    server_t s;
    server_start(&s, false);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", s.port);
    dcr__http_req_t q = {
        .method = "GET", .url = url, .stall_timeout_ms = 50000, .body_max = 1 << 20};
    later_t l = {300};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &l), 0);
    dcr__http_resp_t resp;
    double t0 = now_s();
    dcr_status_t st = dcr__http_request(&q, &resp);
    double took = now_s() - t0;
    pthread_join(t, NULL);
    server_stop(&s);
    assert_int_equal(st, DCR_EINTR);
    assert_false(resp.retryable);
    /* Against the 50 s window: the stop is seen within libcurl's progress
     * interval (about a second). */
    print_message("stop request 0.3 s into a 50 s window: ended after %.2f s\n", took);
    if (took > 20) fail_msg("the stop request took %.1f s to end the request", took);
    dcr__http_resp_free(&resp);
    /* A request after the stop is refused at once, and after a reset it runs. */
    assert_int_equal(dcr__http_request(&q, &resp), DCR_EINTR);
    dcr__http_resp_free(&resp);
    dcr_cancel_reset();
    assert_false(dcr_cancel_requested());
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drip_ends),
        cmocka_unit_test(test_silent_server_one_window),
        cmocka_unit_test(test_cancel_interrupts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
