/* dcr testbed link probe: a timed TCP transfer between two testbed hosts.
 *
 *   testbed-xfer recv PORT              accept one transfer, print "BYTES SECONDS MBITS"
 *   testbed-xfer send ADDR PORT BYTES   connect (retrying up to 5 s) and send BYTES
 *
 * scripts/testbed.sh builds it with cc and runs each end inside a namespace
 * with `ip netns exec`. The sender first sends the total as 8 bytes; the
 * receiver times only the last 80% of the payload, so TCP slow start and the
 * first round trips do not bias the figure against the configured rate (the
 * shaper's steady rate is what the check compares). No dependency beyond libc:
 * iperf3 is not installed here. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what)
{
    fprintf(stderr, "testbed-xfer: %s: %s\n", what, strerror(errno));
    return 1;
}

static int parse_port(const char *s, int *port)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 65535) {
        fprintf(stderr, "testbed-xfer: port '%s': expected 1..65535\n", s);
        return 1;
    }
    *port = (int)v;
    return 0;
}

static int do_recv(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) return fail("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0) return fail("bind");
    if (listen(ls, 1) < 0) return fail("listen");
    int s = accept(ls, NULL, NULL);
    if (s < 0) return fail("accept");
    close(ls);
    uint64_t total = 0, got = 0, mark_bytes = 0;
    unsigned char hdr[8];
    size_t h = 0;
    while (h < sizeof(hdr)) {
        ssize_t r = read(s, hdr + h, sizeof(hdr) - h);
        if (r <= 0) return fail("read header");
        h += (size_t)r;
    }
    for (int i = 0; i < 8; i++) total = total << 8 | hdr[i];
    static unsigned char buf[1 << 16];
    double mark = 0;
    for (;;) {
        ssize_t r = read(s, buf, sizeof(buf));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return fail("read");
        if (r == 0) break;
        got += (uint64_t)r;
        if (mark == 0 && got >= total / 5) {
            mark = now_s();
            mark_bytes = got;
        }
    }
    double end = now_s();
    close(s);
    if (got != total || mark == 0 || end <= mark) {
        fprintf(stderr, "testbed-xfer: received %llu of %llu bytes\n", (unsigned long long)got,
                (unsigned long long)total);
        return 1;
    }
    double secs = end - mark;
    printf("%llu %.6f %.3f\n", (unsigned long long)(got - mark_bytes), secs,
           (double)(got - mark_bytes) * 8 / secs / 1e6);
    return 0;
}

static int do_send(const char *addr, int port, uint64_t total)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
        fprintf(stderr, "testbed-xfer: address '%s': expected dotted IPv4\n", addr);
        return 1;
    }
    int s = -1;
    for (int tries = 0; tries < 100; tries++) { /* the receiver may still be starting */
        s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) return fail("socket");
        if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) break;
        close(s);
        s = -1;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    if (s < 0) return fail("connect");
    unsigned char hdr[8];
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)(total >> (56 - 8 * i));
    if (write(s, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr)) return fail("write header");
    static unsigned char buf[1 << 16];
    memset(buf, 0xa5, sizeof(buf));
    uint64_t left = total;
    while (left) {
        size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf);
        ssize_t w = write(s, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return fail("write");
        left -= (uint64_t)w;
    }
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    alarm(120); /* a stuck probe must never hold a testbed up */
    int port;
    if (argc == 3 && strcmp(argv[1], "recv") == 0) {
        if (parse_port(argv[2], &port)) return 2;
        return do_recv(port);
    }
    if (argc == 5 && strcmp(argv[1], "send") == 0) {
        char *end;
        unsigned long long n = strtoull(argv[4], &end, 10);
        if (parse_port(argv[3], &port)) return 2;
        if (*argv[4] == '\0' || *end != '\0' || n < 1024) {
            fprintf(stderr, "testbed-xfer: bytes '%s': expected an integer >= 1024\n", argv[4]);
            return 2;
        }
        return do_send(argv[2], port, (uint64_t)n);
    }
    fprintf(stderr, "usage: testbed-xfer recv PORT | send ADDR PORT BYTES\n");
    return 2;
}
