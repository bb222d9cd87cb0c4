/* The relay's wire format (relay-internal.h): frames over TCP, shared by the
 * tree (relay_tcp.c) and the store of the root's retained versions
 * (relay_retain.c, objstore_backend_relay.c). */
#include "transport/relay-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/endian-internal.h"

int dcr__relay_write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EPIPE;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int dcr__relay_read_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return DCR__RELAY_EOF;
        if (r < 0) return errno;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

const char *dcr__relay_err_str(int e)
{
    if (e == DCR__RELAY_EOF) return "connection closed";
    if (e == DCR__RELAY_PROTO) return "malformed frame";
    if (e == ECANCELED) return "cancelled";
    if (e == EAGAIN) return "timed out";
    return strerror(e);
}

/* The header goes with the first chunk in one pacing step: paced alone, its
 * few bytes would book the links a latency ahead, and every other flow's
 * bytes that arrive meanwhile would queue behind that booking. */
int dcr__relay_frame_write(int fd, const dcr__relay_frame_t *f, const uint8_t *payload,
                           dcr__flow_t *flow)
{
    uint8_t h[DCR__RELAY_HDR] = {0};
    dcr__put_le(h, DCR__RELAY_MAGIC, 4);
    dcr__put_le(h + 4, f->type, 4);
    dcr__put_le(h + 8, (uint32_t)f->code, 4);
    dcr__put_le(h + 16, f->tau, 8);
    dcr__put_le(h + 24, f->a, 8);
    dcr__put_le(h + 32, f->b, 8);
    dcr__put_le(h + 40, f->len, 8);
    if (payload == NULL && f->len > 0) {
        /* The header alone: the caller streams the body itself. */
        if (flow != NULL && dcr__flow_pace(flow, DCR__RELAY_HDR) != DCR_OK) return ECANCELED;
        return dcr__relay_write_all(fd, h, DCR__RELAY_HDR);
    }
    int e = 0;
    size_t off = 0, hdr = DCR__RELAY_HDR;
    do {
        size_t n = f->len - off < DCR__LINK_CHUNK ? (size_t)f->len - off : DCR__LINK_CHUNK;
        if (flow != NULL && dcr__flow_pace(flow, hdr + n) != DCR_OK) return ECANCELED;
        if (hdr > 0) e = dcr__relay_write_all(fd, h, DCR__RELAY_HDR);
        if (e == 0 && n > 0) e = dcr__relay_write_all(fd, payload + off, n);
        off += n;
        hdr = 0;
    } while (e == 0 && off < f->len);
    return e;
}

int dcr__relay_frame_read(int fd, dcr__relay_frame_t *f)
{
    uint8_t h[DCR__RELAY_HDR];
    int e = dcr__relay_read_all(fd, h, DCR__RELAY_HDR);
    if (e != 0) return e;
    if (dcr__le(h, 4) != DCR__RELAY_MAGIC) return DCR__RELAY_PROTO;
    f->type = (uint32_t)dcr__le(h + 4, 4);
    f->code = (int32_t)(uint32_t)dcr__le(h + 8, 4);
    f->tau = dcr__le(h + 16, 8);
    f->a = dcr__le(h + 24, 8);
    f->b = dcr__le(h + 32, 8);
    f->len = dcr__le(h + 40, 8);
    if (f->type < DCR__F_DATA || f->type > DCR__F_SDATA || f->len > DCR__TRANSPORT_PAYLOAD_MAX)
        return DCR__RELAY_PROTO;
    return 0;
}

int dcr__relay_reply(int fd, uint64_t tau, dcr_status_t st, const char *msg)
{
    size_t n = st == DCR_OK ? 0 : strnlen(msg, DCR__RELAY_NACK_MAX - 1);
    dcr__relay_frame_t f = {
        .type = st == DCR_OK ? DCR__F_ACK : DCR__F_NACK, .code = st, .tau = tau, .len = n};
    return dcr__relay_frame_write(fd, &f, (const uint8_t *)msg, NULL);
}

void dcr__relay_nodelay(int fd)
{
    int one = 1;
    /* Frames and acknowledgments are small and strictly alternate: Nagle plus
     * delayed ACK would add tens of milliseconds per hop. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void dcr__relay_set_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A host that does not answer must not hold a caller for the kernel's SYN
 * retries: the connect is non-blocking and polled for connect_ms. */
int dcr__relay_connect_addr(const char *addr, int connect_ms, int *err_p)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof host) {
        *err_p = EINVAL;
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL) {
        *err_p = EHOSTUNREACH;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int e = fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ? errno : 0;
    freeaddrinfo(ai);
    if (e == EINPROGRESS) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int n = poll(&pf, 1, connect_ms);
        socklen_t len = sizeof e;
        if (n <= 0)
            e = n == 0 ? ETIMEDOUT : errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
            e = errno;
    }
    if (e == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) e = errno;
    if (e != 0) {
        if (fd >= 0) close(fd);
        *err_p = e;
        return -1;
    }
    dcr__relay_nodelay(fd);
    return fd;
}

dcr__relay_buf_t *dcr__relay_buf_new(dcr__relay_kind_t kind, size_t len)
{
    dcr__relay_buf_t *b = malloc(sizeof *b + len);
    if (b == NULL) return NULL;
    atomic_init(&b->refs, 1);
    b->kind = kind;
    b->owner = 0;
    b->id = 0;
    b->len = len;
    return b;
}

void dcr__relay_buf_ref(dcr__relay_buf_t *b)
{
    atomic_fetch_add(&b->refs, 1);
}

void dcr__relay_buf_unref(dcr__relay_buf_t *b)
{
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}
