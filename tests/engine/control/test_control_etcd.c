/* ctest-labels: integration */
/* The etcd control-plane backend against a real etcd this test starts
 * (etcd_server.h): addresses, a server that dies or hangs mid-attempt, a
 * restart on the same data directory, values and responses that are not
 * what the backend wrote, the coordinator lease and large prewarm reports.
 * The protocol itself is test_control.c's conformance suite, which runs on
 * this backend too. Keys are written and inspected here through the gateway
 * directly (with a base64 encoder of this file's own), so what the backend
 * stores is checked from outside it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_run.h"
#include "control/etcd-internal.h"
#include "dcr/control.h"
#include "engine/control/control_test_util.h"
#include "engine/control/etcd_server.h"
#include "workloads/harness/bench.h"

#define assert_detail_has(text)                                                                    \
    do {                                                                                           \
        if (strstr(dcr_error_detail(), (text)) == NULL) {                                          \
            fail_msg("error detail \"%s\" does not mention \"%s\"", dcr_error_detail(), (text));   \
        }                                                                                          \
    } while (0)

static etcd_server_t g_etcd; /* shared by the tests that do not stop it */

/* ---- helpers ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void address_of(const etcd_server_t *s, const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "etcd://%s/%s", s->hostport, prefix);
}

static dcr_control_t *open_at(const etcd_server_t *s, const char *prefix, int timeout_ms)
{
    char address[256];
    address_of(s, prefix, address, sizeof address);
    dcr_control_config_t cfg = {address, timeout_ms};
    dcr_control_t *c = NULL;
    dcr_status_t st = dcr_control_create("etcd", &cfg, &c);
    if (st != DCR_OK) fail_msg("open %s: %s", address, dcr_error_line(st));
    return c;
}

/* Prepares with a deadline no test here reaches. */
static dcr_status_t prepare_long(dcr_control_t *c, const char *coordinator, uint64_t from,
                                 const uint32_t *receivers, size_t n, uint64_t *tau_p)
{
    return prepare(c, coordinator, from, receivers, n, 60000, tau_p);
}

static const uint32_t k_receivers[] = {2, 5, 11};

/* Standard padded base64, written independently of the backend's. */
static char *b64(const void *data, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *p = data;
    char *out = malloc(n / 3 * 4 + 8);
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        out[o++] = abc[p[i] >> 2];
        out[o++] = abc[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        out[o++] = abc[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
        out[o++] = abc[p[i + 2] & 63];
    }
    if (n - i == 1) {
        out[o++] = abc[p[i] >> 2];
        out[o++] = abc[(p[i] & 3) << 4];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        out[o++] = abc[p[i] >> 2];
        out[o++] = abc[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
        out[o++] = abc[(p[i + 1] & 15) << 2];
        out[o++] = '=';
    }
    out[o] = '\0';
    return out;
}

typedef struct buf {
    char data[1 << 16];
    size_t len;
} buf_t;

static size_t buf_write(char *p, size_t size, size_t n, void *arg)
{
    buf_t *b = arg;
    size_t total = size * n;
    size_t room = sizeof b->data - 1 - b->len;
    size_t take = total < room ? total : room;
    memcpy(b->data + b->len, p, take);
    b->len += take;
    b->data[b->len] = '\0';
    return total;
}

/* POSTs body to the gateway path; the parsed JSON answer (caller decrefs). */
/* The body a request to url answers (a POST of body, or a GET when body is
 * NULL); the caller frees it. Fails the test when the server does not answer. */
static buf_t *raw_request(const char *url, const char *body)
{
    buf_t *b = calloc(1, sizeof *b);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) fail_msg("%s %s: %s", body ? "POST" : "GET", url, curl_easy_strerror(rc));
    return b;
}

static json_t *raw_post(const etcd_server_t *s, const char *path, const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://%s%s", s->hostport, path);
    buf_t *b = raw_request(url, body);
    json_t *j = json_loads(b->data, 0, NULL);
    if (j == NULL) fail_msg("POST %s: not JSON: %.200s", url, b->data);
    free(b);
    return j;
}

static void raw_put(const etcd_server_t *s, const char *key, const void *value, size_t n)
{
    char *k = b64(key, strlen(key)), *v = b64(value, n);
    char *body = malloc(strlen(k) + strlen(v) + 64);
    sprintf(body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
    json_decref(raw_post(s, "/v3/kv/put", body));
    free(body);
    free(k);
    free(v);
}

/* How many keys start with prefix, and the lease of the first. */
static long raw_count(const etcd_server_t *s, const char *prefix, long long *lease_p)
{
    char end[256];
    snprintf(end, sizeof end, "%s", prefix);
    end[strlen(end) - 1]++;
    char *k = b64(prefix, strlen(prefix)), *e = b64(end, strlen(end));
    char body[1024];
    snprintf(body, sizeof body, "{\"key\":\"%s\",\"range_end\":\"%s\",\"keys_only\":true}", k, e);
    free(k);
    free(e);
    json_t *j = raw_post(s, "/v3/kv/range", body);
    const char *count = json_string_value(json_object_get(j, "count"));
    long n = count ? strtol(count, NULL, 10) : 0;
    const char *lease =
        json_string_value(json_object_get(json_array_get(json_object_get(j, "kvs"), 0), "lease"));
    if (lease_p) *lease_p = lease ? strtoll(lease, NULL, 10) : 0;
    json_decref(j);
    return n;
}

/* etcd's own count of range reads served so far (its /metrics page): what
 * tells a read from a write among a call's requests. */
static long long raw_ranges(const etcd_server_t *s)
{
    char url[128];
    snprintf(url, sizeof url, "http://%s/metrics", s->hostport);
    buf_t *b = raw_request(url, NULL);
    static const char name[] = "\netcd_debugging_mvcc_range_total ";
    const char *at = strstr(b->data, name);
    if (at == NULL) fail_msg("GET %s: no range counter", url);
    long long n = strtoll(at + strlen(name), NULL, 10);
    free(b);
    return n;
}

/* ---- addresses ------------------------------------------------------------------ */

static void test_addresses(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "/tmp/control.db",
        "http://127.0.0.1:2379",
        "etcd://",
        "etcd://127.0.0.1",
        "etcd://127.0.0.1:",
        "etcd://127.0.0.1:0",
        "etcd://127.0.0.1:65536",
        "etcd://127.0.0.1:12ab",
        "etcd://:2379",
        "etcd://ho st:2379",
        "etcd://127.0.0.1:2379/has space",
        "etcd://127.0.0.1:2379/a//b",
        "etcd://127.0.0.1:2379/a?b",
        "etcd://127.0.0.1:2379//",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dcr_control_config_t cfg = {bad[i], 100};
        dcr_control_t *c = NULL;
        dcr_status_t st = dcr_control_create("etcd", &cfg, &c);
        if (st != DCR_EINVAL || c != NULL ||
            strstr(dcr_error_detail(), "etcd://HOST:PORT") == NULL) {
            fail_msg("address '%s': got %s (%s), want a bad-address error", bad[i],
                     dcr_status_str(st), dcr_error_detail());
        }
        assert_null(strchr(dcr_error_line(st), '\n'));
    }
    /* Good forms: default prefix, a nested one, one trailing slash. */
    char address[256];
    const char *prefixes[] = {"", "/", "/team.a/run-1", "/x/"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(address, sizeof address, "etcd://%s%s", g_etcd.hostport, prefixes[i]);
        dcr_control_config_t cfg = {address, 2000};
        dcr_control_t *c = NULL;
        assert_status(dcr_control_create("etcd", &cfg, &c), DCR_OK);
        assert_string_equal(dcr_control_name(c), "etcd");
        dcr_control_destroy(c);
    }
    assert_int_equal(raw_count(&g_etcd, "dcr/", NULL), 2);          /* schema and record */
    assert_int_equal(raw_count(&g_etcd, "team.a/run-1/", NULL), 2); /* schema and record */

    /* Nobody listens on this port: one line naming the address, quickly. */
    int port = etcd_server_free_port();
    snprintf(address, sizeof address, "etcd://127.0.0.1:%d/x", port);
    dcr_control_config_t cfg = {address, 1000};
    dcr_control_t *c = NULL;
    double t0 = now_s();
    assert_status(dcr_control_create("etcd", &cfg, &c), DCR_ECONTROL);
    assert_true(now_s() - t0 < 3.0);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    assert_detail_has(where);
    assert_null(c);
}

/* ---- a server that dies, hangs or restarts ------------------------------------------- */

/* etcd is killed between the acks: every call fails within the timeout with
 * the address in one line, nothing commits, and after a restart on the same
 * data the attempt carries on where it stood. */
static void test_killed_mid_attempt(void **state)
{
    (void)state;
    etcd_server_t s;
    if (!etcd_server_start(&s)) fail_msg("cannot start etcd");
    dcr_control_t *c = open_at(&s, "kill", 1000);
    dcr_commit_record_t k0 = bootstrap(c), rec;
    uint64_t tau = 0;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    assert_status(prepare_long(c, "coord", 0, k_receivers, 3, &tau), DCR_OK);
    assert_status(dcr_control_ack(c, tau, 2), DCR_OK);
    assert_status(dcr_control_ack(c, tau, 5), DCR_OK);

    etcd_server_kill(&s);
    double t0 = now_s();
    assert_status(dcr_control_ack(c, tau, 11), DCR_ECONTROL);
    assert_detail_has(s.hostport);
    assert_status(dcr_control_commit(c, "coord", tau, &k0, base1, &rec), DCR_ECONTROL);
    assert_detail_has(s.hostport);
    assert_status(dcr_control_read(c, &rec), DCR_ECONTROL);
    assert_null(strchr(dcr_error_line(DCR_ECONTROL), '\n'));
    assert_true(now_s() - t0 < 3 * 1.0 + 2.0);
    print_message("etcd gone: %s\n", dcr_error_line(DCR_ECONTROL));

    assert_true(etcd_server_launch(&s, true));
    dcr_control_t *again = open_at(&s, "kill", 5000);
    assert_status(dcr_control_read(again, &rec), DCR_OK);
    assert_true(dcr_commit_record_equal(&rec, &k0));
    uint32_t acks[4];
    size_t n = 0;
    assert_status(dcr_control_acks(again, tau, acks, 4, &n), DCR_OK);
    assert_true(n == 2 && acks[0] == 2 && acks[1] == 5);
    /* Without the third ack nothing commits; with it, the same attempt does. */
    assert_status(dcr_control_commit(again, "coord", tau, &k0, base1, &rec), DCR_EATTEMPT);
    assert_status(dcr_control_ack(again, tau, 11), DCR_OK);
    /* The old handle reconnects by itself. */
    assert_status(dcr_control_commit(c, "coord", tau, &k0, base1, &rec), DCR_OK);
    assert_true(rec.version == 1 && rec.attempt == tau);
    dcr_control_destroy(again);
    dcr_control_destroy(c);
    etcd_server_stop(&s);
}

/* A rollout node's finalization requests (each a round trip on the refit's
 * path): its acknowledgment after it read the attempt is one txn, with no
 * read before it, and a small report is one txn with no compare. A copy of the
 * attempt that another coordinator replaced meanwhile still refuses the
 * ack (its compare fails and the read that follows decides). */
static void test_node_writes_without_reads(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "noreads", 5000);
    dcr_control_t *node = open_at(&g_etcd, "noreads", 5000);
    (void)bootstrap(c);
    uint64_t tau = 0, later = 0;
    assert_status(prepare_long(c, "coord", 0, k_receivers, 3, &tau), DCR_OK);
    long long before = raw_ranges(&g_etcd);
    dcr_control_attempt_t a;
    assert_status(dcr_control_attempt(node, 0, &a), DCR_OK);
    assert_true(a.tau == tau);
    long long after_read = raw_ranges(&g_etcd);
    assert_true(after_read > before); /* the counter sees this backend's reads */
    uint32_t mine[2] = {2, 5};
    assert_status(dcr_control_ack_many(node, tau, mine, 2), DCR_OK);
    long long after_ack = raw_ranges(&g_etcd);
    assert_status(dcr_control_report_put(node, 2, "done", 4), DCR_OK);
    long long after_report = raw_ranges(&g_etcd);
    /* etcd counts a txn's compare as a range: the ack's one compare of
     * P/latest is all it reads (a snapshot first would add two). */
    assert_int_equal(after_ack - after_read, 1);
    assert_int_equal(after_report - after_ack, 0);
    uint32_t acks[4];
    size_t n = 0;
    assert_status(dcr_control_acks(c, tau, acks, 4, &n), DCR_OK);
    assert_true(n == 2 && acks[0] == 2 && acks[1] == 5);

    /* The node's copy names tau; another coordinator replaces it. */
    assert_status(dcr_control_attempt(node, 0, &a), DCR_OK);
    assert_status(prepare_long(c, "coord-2", 0, k_receivers, 3, &later), DCR_OK);
    assert_status(dcr_control_ack(node, tau, 11), DCR_ECONFLICT);
    assert_status(dcr_control_acks(c, later, acks, 4, &n), DCR_OK);
    assert_int_equal(n, 0);
    assert_status(dcr_control_ack(node, later, 11), DCR_OK);
    dcr_control_destroy(node);
    dcr_control_destroy(c);
}

/* Waits until every thread of pid is stopped: kill(SIGSTOP) only queues the
 * stop, and a thread still running on the other core (a loaded machine) can
 * answer one more request. */
static void wait_stopped(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    for (int i = 0; i < 200; i++) {
        DIR *d = opendir(path);
        assert_non_null(d);
        bool all = true;
        struct dirent *e;
        while (all && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char stat[600];
            snprintf(stat, sizeof stat, "%s/%s/stat", path, e->d_name);
            FILE *f = fopen(stat, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            if (f) fclose(f);
            buf[n] = '\0';
            const char *close_paren = strrchr(buf, ')');
            all = close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'T';
        }
        closedir(d);
        if (all) return;
        usleep(5000);
    }
    fail_msg("etcd (pid %d) did not stop within 1 s", (int)pid);
}

/* A server that accepts but never answers (stopped): calls fail after about
 * the timeout, never hang, and work again once it continues. */
static void test_hung_server(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "hang", 500);
    dcr_commit_record_t rec;
    assert_status(dcr_control_read(c, &rec), DCR_OK);
    kill(g_etcd.pid, SIGSTOP);
    wait_stopped(g_etcd.pid);
    double t0 = now_s();
    dcr_status_t st = dcr_control_read(c, &rec);
    double waited = now_s() - t0;
    kill(g_etcd.pid, SIGCONT);
    assert_status(st, DCR_ECONTROL);
    assert_true(waited >= 0.45 && waited < 3.0);
    assert_detail_has("no answer within 500 ms");
    assert_detail_has(g_etcd.hostport);
    assert_status(dcr_control_read(c, &rec), DCR_OK);
    dcr_control_destroy(c);
}

/* A committed record, reports, the membership and the fencing of replaced
 * coordinators survive etcd's crash and restart on the same data. */
static void test_restart_keeps_state(void **state)
{
    (void)state;
    etcd_server_t s;
    if (!etcd_server_start(&s)) fail_msg("cannot start etcd");
    dcr_control_t *c = open_at(&s, "durable", 2000);
    dcr_commit_record_t k0 = bootstrap(c), k1, rec;
    uint64_t tau = 0, tau2 = 0;
    uint8_t base1[DCR_CONTROL_BASELINE_BYTES];
    baseline_of(base1, 1);
    assert_status(prepare_long(c, "old", 0, k_receivers, 3, &tau), DCR_OK);
    assert_status(prepare_long(c, "new", 0, k_receivers, 3, &tau), DCR_OK);
    for (int i = 0; i < 3; i++) assert_status(dcr_control_ack(c, tau, k_receivers[i]), DCR_OK);
    assert_status(dcr_control_commit(c, "new", tau, &k0, base1, &k1), DCR_OK);
    assert_status(dcr_control_report_put(c, 5, "prewarm", 7), DCR_OK);
    assert_status(dcr_control_membership_put(c, "new", k_receivers, 2), DCR_OK);
    dcr_control_destroy(c);

    etcd_server_kill(&s);
    assert_true(etcd_server_launch(&s, true));
    c = open_at(&s, "durable", 5000);
    assert_status(dcr_control_read(c, &rec), DCR_OK);
    assert_true(dcr_commit_record_equal(&rec, &k1));
    void *got = NULL;
    size_t len = 0;
    assert_status(dcr_control_report_get(c, 5, &got, &len), DCR_OK);
    assert_true(len == 7 && memcmp(got, "prewarm", 7) == 0);
    free(got);
    uint32_t members[4];
    assert_status(dcr_control_membership_get(c, members, 4, &len), DCR_OK);
    assert_true(len == 2 && members[0] == 2 && members[1] == 5);
    assert_status(prepare_long(c, "old", 1, k_receivers, 3, &tau2), DCR_ECONFLICT);
    assert_status(prepare_long(c, "new", 1, k_receivers, 3, &tau2), DCR_OK);
    assert_true(tau2 > tau);
    dcr_control_destroy(c);
    etcd_server_stop(&s);
}

/* ---- what the backend must not trust ------------------------------------------------------ */

static void test_malformed_values(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "bad", 2000);
    dcr_commit_record_t k0 = bootstrap(c), rec;
    uint64_t tau = 0;
    assert_status(prepare_long(c, "coord", 0, k_receivers, 3, &tau), DCR_OK);
    assert_status(dcr_control_ack(c, tau, 5), DCR_OK);
    assert_status(dcr_control_report_put(c, 5, "prewarm", 7), DCR_OK);
    assert_status(dcr_control_membership_put(c, "coord", k_receivers, 3), DCR_OK);

    /* An acknowledgment key of a receiver the attempt does not require. */
    char key[128];
    snprintf(key, sizeof key, "bad/ack/%016llx/%08x", (unsigned long long)tau, 77u);
    raw_put(&g_etcd, key, "", 0);
    uint32_t list[8];
    size_t n = 0;
    assert_status(dcr_control_acks(c, tau, list, 8, &n), DCR_ECONTROL);
    assert_detail_has("bad/ack/");
    raw_put(&g_etcd, "bad/latest", "short", 5);
    dcr_control_attempt_t info;
    assert_status(dcr_control_attempt(c, 0, &info), DCR_ECONTROL);
    assert_detail_has("bad/latest");
    assert_status(dcr_control_ack(c, tau, 2), DCR_ECONTROL);
    raw_put(&g_etcd, "bad/report/00000005", "dcrrep1\0", 8);
    void *got = NULL;
    assert_status(dcr_control_report_get(c, 5, &got, &n), DCR_ECONTROL);
    assert_detail_has("bad/report/00000005");
    raw_put(&g_etcd, "bad/membership", "dcrmem1", 8);
    assert_status(dcr_control_membership_get(c, list, 8, &n), DCR_ECONTROL);
    assert_detail_has("bad/membership");
    /* A record of the right length with a version out of range. */
    uint8_t raw[64] = "dcrrec1";
    memset(raw + 8, 0xff, 8);
    raw_put(&g_etcd, "bad/record", raw, sizeof raw);
    assert_status(dcr_control_read(c, &rec), DCR_ECONTROL);
    assert_detail_has("bad/record");
    /* A CAS cannot match a malformed record, and says what is wrong. */
    assert_status(dcr_control_cas(c, &k0, &k0), DCR_ECONTROL);
    dcr_control_destroy(c);

    /* A prefix that holds something else is not opened. */
    raw_put(&g_etcd, "other/schema", "someone-else 3", 14);
    char address[256];
    address_of(&g_etcd, "other", address, sizeof address);
    dcr_control_config_t cfg = {address, 2000};
    assert_status(dcr_control_create("etcd", &cfg, &c), DCR_ECONTROL);
    assert_detail_has("not a dcr control plane");
}

/* A fake server answering every request with one canned HTTP response. */
typedef struct fake_server {
    int fd, port;
    const char *response;
    pthread_t thread;
} fake_server_t;

static void *fake_serve(void *arg)
{
    fake_server_t *f = arg;
    for (;;) {
        int conn = accept(f->fd, NULL, NULL);
        if (conn < 0) return NULL;
        char req[8192];
        ssize_t got = 0, r;
        /* Read the headers and a body (the requests here are small). */
        while ((r = read(conn, req + got, sizeof req - 1 - (size_t)got)) > 0) {
            got += r;
            req[got] = '\0';
            char *hdr_end = strstr(req, "\r\n\r\n");
            char *cl = strcasestr(req, "Content-Length:");
            if (hdr_end &&
                (!cl || (size_t)(got - (hdr_end + 4 - req)) >= strtoul(cl + 15, NULL, 10)))
                break;
        }
        if (write(conn, f->response, strlen(f->response)) < 0) {
        }
        close(conn);
    }
}

static void fake_start(fake_server_t *f, const char *response)
{
    f->response = response;
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->fd, 8), 0);
    getsockname(f->fd, (struct sockaddr *)&a, &len);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

static void fake_stop(fake_server_t *f)
{
    shutdown(f->fd, SHUT_RDWR);
    close(f->fd);
    pthread_join(f->thread, NULL);
}

static void test_not_an_etcd(void **state)
{
    (void)state;
    struct {
        const char *status, *body, *detail;
    } cases[] = {
        {"200 OK", "not json", "malformed response"},
        {"200 OK", "[]", "malformed response"},
        {"200 OK", "{\"succeeded\":\"yes\"}", "malformed txn response"},
        {"200 OK", "{\"header\":{\"revision\":\"9\"},\"responses\":[{\"response_put\":{}}]}",
         "malformed txn response"},
        {"200 OK",
         "{\"header\":{\"revision\":\"9\"},\"responses\":[{\"response_range\":{\"kvs\":"
         "[{\"key\":\"%%%\"}]}}]}",
         "malformed key-value"},
        {"500 Internal Server Error", "{\"error\":\"boom\",\"message\":\"etcdserver: boom\"}",
         "HTTP 500: etcdserver: boom"},
    };
    for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
        char response[512];
        if (i < sizeof cases / sizeof cases[0]) {
            snprintf(response, sizeof response,
                     "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     cases[i].status, strlen(cases[i].body), cases[i].body);
        } else {
            /* A body cut short of its announced length. */
            snprintf(response, sizeof response,
                     "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"x");
        }
        fake_server_t f;
        fake_start(&f, response);
        char address[64], where[32];
        snprintf(address, sizeof address, "etcd://127.0.0.1:%d/x", f.port);
        snprintf(where, sizeof where, "127.0.0.1:%d", f.port);
        dcr_control_config_t cfg = {address, 1000};
        dcr_control_t *c = NULL;
        dcr_status_t st = dcr_control_create("etcd", &cfg, &c);
        fake_stop(&f);
        const char *want = i < sizeof cases / sizeof cases[0] ? cases[i].detail : where;
        if (st != DCR_ECONTROL || strstr(dcr_error_detail(), want) == NULL ||
            strstr(dcr_error_detail(), where) == NULL) {
            fail_msg("case %zu: got %s (%s), want a control error naming %s with \"%s\"", i,
                     dcr_status_str(st), dcr_error_detail(), where, want);
        }
        assert_null(c);
        print_message("%s\n", dcr_error_line(st));
    }
}

/* ---- lease and large reports -------------------------------------------------------------------
 */

static void test_coordinator_lease(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "lease", 2000);
    bootstrap(c);
    uint64_t tau = 0;
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", NULL), 0);
    assert_status(prepare_long(c, "coord-1", 0, k_receivers, 3, &tau), DCR_OK);
    long long lease = 0;
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", &lease), 1);
    assert_true(lease != 0);
    /* The lease is alive on the server with a TTL of at most 10 s. */
    char body[96];
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", lease);
    json_t *j = raw_post(&g_etcd, "/v3/lease/timetolive", body);
    const char *ttl = json_string_value(json_object_get(j, "TTL"));
    assert_non_null(ttl);
    assert_true(atoi(ttl) > 0 && atoi(ttl) <= 10);
    json_decref(j);
    /* Past a third of its TTL the next change of the coordinator refreshes it. */
    struct timespec pause = {3, 600000000L};
    nanosleep(&pause, NULL);
    assert_status(dcr_control_membership_put(c, "coord-1", k_receivers, 3), DCR_OK);
    long long same = 0;
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", &same), 1);
    assert_true(same == lease);
    j = raw_post(&g_etcd, "/v3/lease/timetolive", body);
    /* Unrefreshed it would have at most 10 - 3.6 s left. */
    assert_true(atoi(json_string_value(json_object_get(j, "TTL"))) >= 7);
    json_decref(j);
    /* A lease that expired (here: revoked behind the handle's back) is
     * replaced by a fresh one at the next refresh, and the key comes back. */
    json_decref(raw_post(&g_etcd, "/v3/lease/revoke", body));
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", NULL), 0);
    nanosleep(&pause, NULL);
    assert_status(dcr_control_membership_put(c, "coord-1", k_receivers, 2), DCR_OK);
    long long fresh = 0;
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", &fresh), 1);
    assert_true(fresh != 0 && fresh != lease);
    /* Closing the handle revokes it, and the liveness key goes with it. */
    dcr_control_destroy(c);
    assert_int_equal(raw_count(&g_etcd, "lease/alive/", NULL), 0);
}

/* Closing a handle after a failure: a revoke the server refuses (the lease
 * already gone) must leave that failure's line, not wipe it. */
static void test_failed_revoke_keeps_earlier_error(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "revoke", 2000);
    bootstrap(c);
    uint64_t tau = 0;
    assert_status(prepare_long(c, "coord-1", 0, k_receivers, 3, &tau), DCR_OK);
    long long lease = 0;
    assert_int_equal(raw_count(&g_etcd, "revoke/alive/", &lease), 1);
    char body[96];
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", lease);
    json_decref(raw_post(&g_etcd, "/v3/lease/revoke", body));
    dcr_error_set(DCR_EIO, "the earlier failure");
    dcr_control_destroy(c);
    assert_string_equal(dcr_error_detail(), "the earlier failure");
}

static void test_large_reports(void **state)
{
    (void)state;
    dcr_control_t *c = open_at(&g_etcd, "reports", 5000);
    size_t len = (5u << 20) + 123;
    uint8_t *blob = malloc(len);
    for (size_t i = 0; i < len; i++) blob[i] = (uint8_t)((i * 2654435761u) >> 11);
    assert_status(dcr_control_report_put(c, 9, blob, len), DCR_OK);
    /* 5 MiB + 123 bytes in 512 KiB parts: 11 of them. */
    assert_int_equal(raw_count(&g_etcd, "reports/report-chunk/00000009/", NULL), 11);
    void *got = NULL;
    size_t got_len = 0;
    dcr_control_t *other = open_at(&g_etcd, "reports", 5000);
    assert_status(dcr_control_report_get(other, 9, &got, &got_len), DCR_OK);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, blob, len);
    free(got);
    /* Replacing it with a small one leaves no parts behind. */
    assert_status(dcr_control_report_put(c, 9, "tiny", 4), DCR_OK);
    assert_int_equal(raw_count(&g_etcd, "reports/report-chunk/", NULL), 0);
    assert_status(dcr_control_report_get(other, 9, &got, &got_len), DCR_OK);
    assert_true(got_len == 4 && memcmp(got, "tiny", 4) == 0);
    free(got);
    /* A missing part is malformed, not a short report. */
    assert_status(dcr_control_report_put(c, 9, blob, 3u << 20), DCR_OK);
    char end[] = "reports/report-chunk/00000009/";
    char *k = b64(end, strlen(end));
    end[strlen(end) - 1]++;
    char *e = b64(end, strlen(end));
    char body[256];
    snprintf(body, sizeof body, "{\"key\":\"%s\",\"range_end\":\"%s\"}", k, e);
    json_decref(raw_post(&g_etcd, "/v3/kv/deleterange", body));
    free(k);
    free(e);
    assert_status(dcr_control_report_get(other, 9, &got, &got_len), DCR_ECONTROL);
    assert_detail_has("reports/report-chunk/00000009/");
    free(blob);
    dcr_control_destroy(other);
    dcr_control_destroy(c);
}

/* ---- the command line -------------------------------------------------------------------------
 */

/* --control etcd://... selects this backend in dcr bench and dcr faults; each
 * run writes under its own namespace of the prefix; bad URLs and a missing
 * server are one line. */
static void test_cli_on_etcd(void **state)
{
    (void)state;
    setenv("DCR_LOG", "error", 1); /* the error contract is about stderr's one line */
    expect_error("bench --control etcd://127.0.0.1:0 --layers 2", 2,
                 "--control etcd://127.0.0.1:0");
    expect_error("bench --control 'etcd://127.0.0.1:2379/a b' --layers 2", 2, "etcd://HOST:PORT");
    expect_error("faults campaign --control /tmp/control.db", 2, "etcd://HOST:PORT");
    char args[512], where[64];
    int port = etcd_server_free_port();
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    snprintf(args, sizeof args, "bench --control etcd://%s --layers 2 --warmup 0 --refits 1",
             where);
    expect_error(args, 1, where);

    snprintf(args, sizeof args,
             "bench --control etcd://%s/cli-bench --layers 2 --warmup 1 --refits 2 --json",
             g_etcd.hostport);
    json_t *j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_decref(j);
    /* One run's namespace: schema, record, latest, an attempt, acks... */
    assert_true(raw_count(&g_etcd, "cli-bench/bench-", NULL) >= 5);

    /* With rollout nodes as processes, they join the launcher's namespace
     * (and the verifier process confirms every node bit for bit). */
    snprintf(args, sizeof args,
             "bench --processes --control etcd://%s/cli-procs --scale 64 --layers 2 --warmup 1 "
             "--refits 2 --json",
             g_etcd.hostport);
    j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "processes"), "rollout_nodes")), 2);
    json_decref(j);
    assert_true(raw_count(&g_etcd, "cli-procs/bench-", NULL) >= 5);

    snprintf(args, sizeof args,
             "faults train --control etcd://%s/cli-faults --layers 2 --steps 3 --json",
             g_etcd.hostport);
    j = run_json(args);
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "lost")), 0);
    assert_true(json_integer_value(json_object_get(j, "commits")) >= 1);
    json_decref(j);
    assert_true(raw_count(&g_etcd, "cli-faults/faults-", NULL) >= 5);
}

/* The harnesses' opener: a run name becomes a namespace under the prefix
 * (under "dcr" when the URL has none); without one the URL is used as given. */
static void test_harness_namespaces(void **state)
{
    (void)state;
    char url[128];
    dcr_control_t *c = NULL;
    snprintf(url, sizeof url, "etcd://%s/ns-a/", g_etcd.hostport);
    assert_status(dcr_run_control_open(url, "/nonexistent/unused.db", "run-1", &c), DCR_OK);
    dcr_control_destroy(c);
    assert_int_equal(raw_count(&g_etcd, "ns-a/run-1/", NULL), 2); /* schema and record */
    assert_status(dcr_run_control_open(url, NULL, NULL, &c), DCR_OK);
    dcr_control_destroy(c);
    assert_int_equal(raw_count(&g_etcd, "ns-a/", NULL), 4);
    snprintf(url, sizeof url, "etcd://%s", g_etcd.hostport);
    long before = raw_count(&g_etcd, "dcr/run-2/", NULL);
    assert_status(dcr_run_control_open(url, NULL, "run-2", &c), DCR_OK);
    dcr_control_destroy(c);
    assert_int_equal(raw_count(&g_etcd, "dcr/run-2/", NULL) - before, 2);
    assert_status(dcr_run_control_check("--control", url), DCR_OK);
    assert_status(dcr_run_control_check("--control", "/tmp/control.db"), DCR_OK);
    assert_status(dcr_run_control_check("--control", "etcd://h:1/a//b"), DCR_EINVAL);
    assert_status(dcr_run_control_check("--control", "etcd://[::1]:2379/x"), DCR_OK);
}

/* The backend's base64 (libcrypto underneath) against RFC 4648, section 10,
 * and the strictness the gateway's fields get: whole groups, '=' only as
 * the last one or two characters, nothing outside the alphabet, a bound. */
static void test_base64_known_answers(void **state)
{
    (void)state;
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *enc = dcr__et_b64_encode(plain[i], strlen(plain[i]));
        assert_non_null(enc);
        assert_string_equal(enc, coded[i]);
        free(enc);
        uint8_t *dec = NULL;
        size_t n = 99;
        assert_true(dcr__et_b64_decode(coded[i], strlen(coded[i]), 16, &dec, &n));
        assert_int_equal(n, strlen(plain[i]));
        if (n > 0) assert_memory_equal(dec, plain[i], n);
        free(dec);
    }
    const uint8_t bytes[] = {0x00, 0xff, 0xfe, 0x3e, 0x3f}; /* '+' and '/' of the alphabet */
    char *enc = dcr__et_b64_encode(bytes, sizeof bytes);
    assert_string_equal(enc, "AP/+Pj8=");
    free(enc);
    const char *bad[] = {"Zg=",  "Zg",          "Z===", "Zg=a", "Z=g=",     "Zm9\n",     " Zm9",
                         "Zm 9", "Zm9v\t\n\r ", "Zm9-", "Zm9_", "Zm9v====", "Zm9vYmFy=", "%%%"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t *dec = (uint8_t *)"untouched";
        size_t n = 0;
        if (dcr__et_b64_decode(bad[i], strlen(bad[i]), 16, &dec, &n))
            fail_msg("'%s' decoded as base64", bad[i]);
        assert_null(dec);
    }
    uint8_t *dec = NULL;
    size_t n = 0;
    assert_false(dcr__et_b64_decode("Zm9vYmFy", 8, 5, &dec, &n)); /* 6 bytes, 5 allowed */
    assert_true(dcr__et_b64_decode("Zm9vYmFy", 8, 6, &dec, &n));
    assert_int_equal(n, 6);
    free(dec);
    /* An embedded NUL is not base64 either. */
    assert_false(dcr__et_b64_decode("Zm\0v", 4, 16, &dec, &n));
}

int main(void)
{
    if (!etcd_server_start(&g_etcd)) {
        fprintf(stderr, "FAILED: cannot start etcd for the etcd backend tests\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_killed_mid_attempt),
        cmocka_unit_test(test_hung_server),
        cmocka_unit_test(test_restart_keeps_state),
        cmocka_unit_test(test_malformed_values),
        cmocka_unit_test(test_not_an_etcd),
        cmocka_unit_test(test_coordinator_lease),
        cmocka_unit_test(test_failed_revoke_keeps_earlier_error),
        cmocka_unit_test(test_large_reports),
        cmocka_unit_test(test_node_writes_without_reads),
        cmocka_unit_test(test_harness_namespaces),
        cmocka_unit_test(test_cli_on_etcd),
        cmocka_unit_test(test_base64_known_answers),
    };
    int failed = cmocka_run_group_tests_name("control etcd", tests, NULL, NULL);
    etcd_server_stop(&g_etcd);
    return failed;
}
