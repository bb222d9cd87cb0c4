/* ctest-labels: integration
 *
 * Retention at the relay root (dcr/recovery.h) and the read-only
 * "relay://" store that serves it. A whole tree in one handle (2 owners,
 * 2 rollout nodes, real TCP on loopback) carries 6 committed versions with
 * a window of 3: after each commit the root's directory holds exactly the
 * last 3 versions, every payload byte for byte what the test sent (read
 * from the files, not through the code under test), each VERSION digest
 * equal to BLAKE2b-256 computed here; an attempt that never ended is not
 * retained. A root destroyed after every owner finished an attempt and
 * before its commit (a process killed between its acknowledgment and the
 * commit) retains the version when a new root on the same directory is
 * told of the commit, or its store alone at a restart; a staged attempt
 * that did not commit is deleted.
 * Through relay:// the same versions list and read back verified;
 * a corrupt object is a digest failure and a missing one a gap. Hostile
 * requests on a raw socket (traversal, foreign keys, NUL, lengths, bad
 * frames) are refused and leave the root serving; a node that is not the
 * root refuses readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <blake2.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/endian-internal.h"
#include "dcr/clock.h"
#include "dcr/recovery.h"
#include "recovery/recovery-internal.h"
#include "transport/relay-internal.h"
#include "engine/transport/transport_test_util.h"

#define WORLD    2
#define NODES    2
#define PER      3 /* payloads per owner and version */
#define KEEP     3
#define VERSIONS 6

static char g_tmp[PATH_MAX], g_root[PATH_MAX + 16], g_url[128];
static dcr_transport_t *g_t;
/* What was sent for version v (index v), flat: WORLD * PER payloads. */
static tp_payload_t *g_sent[VERSIONS + 1];

static uint64_t tau_of(uint64_t v)
{
    return 10 * v + 1; /* attempts grow, with gaps as retries make them */
}

/* Runs attempt tau to its end: every owner sends and finishes, every node
 * takes everything. */
static void run_attempt(uint64_t tau, tp_payload_t *flat)
{
    assert_int_equal(dcr_transport_open_attempt(g_t, tau), DCR_OK);
    tp_owner_t owners[WORLD] = {0};
    tp_node_t nodes[NODES] = {0};
    for (int o = 0; o < WORLD; o++) {
        owners[o].p = &flat[o * PER];
        owners[o].n = PER;
        owners[o].finish = true;
    }
    tp_run(g_t, owners, WORLD, nodes, NODES);
    for (int i = 0; i < NODES; i++) {
        tp_check_exactly_once(&nodes[i], flat, WORLD * PER);
        tp_node_free(&nodes[i]);
    }
}

static tp_payload_t *make_version(uint64_t v)
{
    tp_payload_t *flat = calloc(WORLD * PER, sizeof *flat);
    for (int o = 0; o < WORLD; o++)
        for (int j = 0; j < PER; j++)
            flat[o * PER + j] = tp_payload_make(tau_of(v), o, (uint64_t)(7 + j),
                                                40 + v * 10 + (uint64_t)j, v * 1000 + o * 10 + j);
    return flat;
}

static int fx_setup(void **state)
{
    (void)state;
    assert_true(testfiles_tmpdir(g_tmp, sizeof g_tmp, "relayret"));
    snprintf(g_root, sizeof g_root, "%s/root", g_tmp);
    dcr_transport_config_t c = tp_config(NULL, 1, WORLD, NODES);
    g_t = tp_create("relay", &c);
    char url[PATH_MAX + 32];
    snprintf(url, sizeof url, "dir:%s", g_root);
    assert_int_equal(dcr_relay_retain_start(g_t, url, KEEP, true), DCR_OK);
    assert_int_equal(dcr_relay_retain_url(g_t, g_url, sizeof g_url), DCR_OK);
    for (uint64_t v = 1; v <= VERSIONS; v++) {
        g_sent[v] = make_version(v);
        run_attempt(tau_of(v), g_sent[v]);
        dcr_retain_stats_t st;
        if (dcr_relay_retain_commit(g_t, tau_of(v), v, &st) != DCR_OK)
            fail_msg("commit of version %" PRIu64 ": %s", v, dcr_error_detail());
        assert_int_equal(st.payloads, WORLD * PER);
        assert_int_equal(st.bytes, (uint64_t)tp_sum_len(g_sent[v], WORLD * PER));
        assert_int_equal(st.pruned, v > KEEP ? 1 : 0);
    }
    return 0;
}

static int fx_teardown(void **state)
{
    (void)state;
    dcr_transport_destroy(g_t);
    g_t = NULL;
    for (int v = 1; v <= VERSIONS; v++) tp_payloads_free(g_sent[v], WORLD * PER);
    tp_rmtree(g_tmp);
    return 0;
}

/* The bytes of a file, or NULL when it does not exist. */
static uint8_t *slurp(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len_p = (size_t)n;
    return b;
}

static void payload_path(uint64_t v, const tp_payload_t *p, char *out, size_t cap)
{
    snprintf(out, cap, "%s/versions/v%" PRIu64 "/payload-%d-%" PRIu64 ".dcrp", g_root, v, p->owner,
             p->id);
}

static void test_root_keeps_the_last_k_byte_identical(void **state)
{
    (void)state;
    for (uint64_t v = 1; v <= VERSIONS; v++) {
        bool kept = v > VERSIONS - KEEP;
        char path[PATH_MAX + 128];
        snprintf(path, sizeof path, "%s/versions/v%" PRIu64 "/VERSION", g_root, v);
        struct stat sb;
        assert_int_equal(stat(path, &sb) == 0, kept);
        for (int i = 0; i < WORLD * PER; i++) {
            const tp_payload_t *p = &g_sent[v][i];
            payload_path(v, p, path, sizeof path);
            size_t len = 0;
            uint8_t *b = slurp(path, &len);
            if (!kept) {
                if (b != NULL) fail_msg("version %" PRIu64 " was not pruned: %s", v, path);
                continue;
            }
            if (b == NULL) fail_msg("version %" PRIu64 ": %s missing", v, path);
            assert_int_equal(len, p->len);
            assert_memory_equal(b, p->buf, len);
            free(b);
        }
    }
}

static dcr_objstore_t *reader(void)
{
    dcr_objstore_config_t oc = {.url = g_url};
    dcr_objstore_t *s = NULL;
    if (dcr_objstore_create(&oc, &s) != DCR_OK) fail_msg("%s: %s", g_url, dcr_error_detail());
    assert_true(dcr_objstore_props(s)->read_only);
    return s;
}

/* The sent payload that `name` names in version v. */
static const tp_payload_t *sent_named(uint64_t v, const char *name)
{
    for (int i = 0; i < WORLD * PER; i++) {
        char want[64];
        snprintf(want, sizeof want, "payload-%d-%" PRIu64 ".dcrp", g_sent[v][i].owner,
                 g_sent[v][i].id);
        if (strcmp(want, name) == 0) return &g_sent[v][i];
    }
    fail_msg("version %" PRIu64 " lists %s, which was never sent", v, name);
    return NULL;
}

static void test_readers_get_the_window_over_the_network(void **state)
{
    (void)state;
    dcr_objstore_t *s = reader();
    uint64_t *vs = NULL;
    size_t n = 0;
    assert_int_equal(dcr_retain_list(s, &vs, &n), DCR_OK);
    assert_int_equal(n, KEEP);
    for (size_t i = 0; i < n; i++) assert_int_equal(vs[i], VERSIONS - KEEP + 1 + i);
    free(vs);
    for (uint64_t v = VERSIONS - KEEP + 1; v <= VERSIONS; v++) {
        dcr_retain_manifest_t m;
        assert_int_equal(dcr_retain_manifest_read(s, v, &m), DCR_OK);
        assert_int_equal(m.tau, tau_of(v));
        assert_int_equal(m.from, v - 1);
        assert_int_equal(m.n, WORLD * PER);
        for (size_t j = 0; j < m.n; j++) {
            const tp_payload_t *p = sent_named(v, m.entries[j].name);
            uint8_t d[DCR_RETAIN_DIGEST_BYTES];
            blake2b(d, p->buf, NULL, sizeof d, p->len, 0);
            assert_memory_equal(d, m.entries[j].digest, sizeof d);
            uint8_t *b = NULL;
            size_t len = 0;
            assert_int_equal(dcr_retain_payload_get(s, &m, j, &b, &len), DCR_OK);
            assert_int_equal(len, p->len);
            assert_memory_equal(b, p->buf, len);
            free(b);
        }
        dcr_retain_manifest_free(&m);
    }
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(s, 1, &m), DCR_ENOTFOUND); /* pruned: a gap */
    /* Read-only, and only the retained area. */
    assert_int_equal(dcr_objstore_put(s, "versions/v9/x", (const uint8_t *)"x", 1, NULL),
                     DCR_EUNSUPPORTED);
    assert_int_equal(dcr_objstore_delete(s, "versions/v6/VERSION"), DCR_EUNSUPPORTED);
    dcr_objstore_entry_t *e = NULL;
    assert_int_equal(dcr_objstore_list_all(s, "attempt-61/", &e, &n), DCR_EINVAL);
    dcr_objstore_destroy(s);
}

static void test_corrupt_or_missing_objects_are_refused(void **state)
{
    (void)state;
    dcr_objstore_t *s = reader();
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(s, VERSIONS, &m), DCR_OK);
    const tp_payload_t *p = sent_named(VERSIONS, m.entries[0].name);
    char path[PATH_MAX + 128];
    payload_path(VERSIONS, p, path, sizeof path);
    /* One flipped bit, served as stored: the reader's digest check fails. */
    uint8_t *bad = malloc(p->len);
    memcpy(bad, p->buf, p->len);
    bad[p->len / 2] ^= 0x10;
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(bad, 1, p->len, f), p->len);
    fclose(f);
    free(bad);
    uint8_t *b = NULL;
    size_t len = 0;
    assert_int_equal(dcr_retain_payload_get(s, &m, 0, &b, &len), DCR_EDIGEST);
    /* Gone: not found, never an empty answer. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dcr_retain_payload_get(s, &m, 0, &b, &len), DCR_ENOTFOUND);
    /* The others still read. */
    assert_int_equal(dcr_retain_payload_get(s, &m, 1, &b, &len), DCR_OK);
    free(b);
    dcr_retain_manifest_free(&m);
    dcr_objstore_destroy(s);
}

static void test_unended_attempt_is_not_retained(void **state)
{
    (void)state;
    uint64_t tau = tau_of(VERSIONS + 1);
    tp_payload_t p = tp_payload_make(tau, 0, 1, 30, 5);
    assert_int_equal(dcr_transport_open_attempt(g_t, tau), DCR_OK);
    assert_int_equal(dcr_transport_send(g_t, 0, 1, p.buf, p.len), DCR_OK);
    dcr_transport_stop_and_wait(g_t); /* owner 1 never finished */
    assert_int_equal(dcr_relay_retain_commit(g_t, tau, VERSIONS + 1, NULL), DCR_ENOTFOUND);
    free(p.buf);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/versions/v%d", g_root, VERSIONS + 1);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    /* Misuse. */
    char url[PATH_MAX + 32];
    snprintf(url, sizeof url, "dir:%s", g_root);
    assert_int_equal(dcr_relay_retain_start(g_t, url, KEEP, false), DCR_EINVAL);
    assert_int_equal(dcr_relay_retain_commit(g_t, 0, 1, NULL), DCR_EINVAL);
}

/* ---- a root restarted between its acknowledgment and the commit ------------ */

static void root_url(char *url, size_t cap)
{
    snprintf(url, cap, "dir:%s", g_root);
}

/* The root's process dies (its handle destroyed, nothing committed) and a
 * new one starts on the same directory, keeping what is there. */
static void restart_root(void)
{
    dcr_transport_destroy(g_t);
    dcr_transport_config_t c = tp_config(NULL, 1, WORLD, NODES);
    g_t = tp_create("relay", &c);
    char url[PATH_MAX + 32];
    root_url(url, sizeof url);
    assert_int_equal(dcr_relay_retain_start(g_t, url, KEEP, false), DCR_OK);
    assert_int_equal(dcr_relay_retain_url(g_t, g_url, sizeof g_url), DCR_OK);
}

static bool exists_under_root(const char *rel)
{
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Version v holds exactly sent[0, WORLD * PER), from attempt tau: the files
 * byte for byte, VERSION's digests BLAKE2b-256 computed here, and the same
 * read back verified through relay://. */
static void check_retained(uint64_t v, uint64_t tau, const tp_payload_t *sent)
{
    char path[PATH_MAX + 128];
    for (int i = 0; i < WORLD * PER; i++) {
        payload_path(v, &sent[i], path, sizeof path);
        size_t len = 0;
        uint8_t *b = slurp(path, &len);
        if (b == NULL) fail_msg("version %" PRIu64 ": %s missing", v, path);
        assert_int_equal(len, sent[i].len);
        assert_memory_equal(b, sent[i].buf, len);
        free(b);
    }
    dcr_objstore_t *s = reader();
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(s, v, &m), DCR_OK);
    assert_int_equal(m.tau, tau);
    assert_int_equal(m.from, v - 1);
    assert_int_equal(m.n, WORLD * PER);
    for (size_t j = 0; j < m.n; j++) {
        const tp_payload_t *p = NULL;
        for (int i = 0; i < WORLD * PER && p == NULL; i++) {
            char want[64];
            snprintf(want, sizeof want, "payload-%d-%" PRIu64 ".dcrp", sent[i].owner, sent[i].id);
            if (strcmp(want, m.entries[j].name) == 0) p = &sent[i];
        }
        if (p == NULL) fail_msg("version %" PRIu64 " lists %s, never sent", v, m.entries[j].name);
        uint8_t d[DCR_RETAIN_DIGEST_BYTES];
        blake2b(d, p->buf, NULL, sizeof d, p->len, 0);
        assert_memory_equal(d, m.entries[j].digest, sizeof d);
        uint8_t *b = NULL;
        size_t len = 0;
        assert_int_equal(dcr_retain_payload_get(s, &m, j, &b, &len), DCR_OK);
        assert_int_equal(len, p->len);
        assert_memory_equal(b, p->buf, len);
        free(b);
    }
    dcr_retain_manifest_free(&m);
    dcr_objstore_destroy(s);
}

/* Every owner finished at the root (so every node acknowledged) and the
 * root died before the commit: the new root, told of the commit, retains
 * the version byte-identical, and the window moves on. */
static void test_root_restarted_before_commit_retains_the_version(void **state)
{
    (void)state;
    uint64_t v = VERSIONS + 1, tau = tau_of(v);
    tp_payload_t *sent = make_version(v);
    run_attempt(tau, sent);
    restart_root();
    assert_false(exists_under_root("versions/v7")); /* nothing published before the commit */
    dcr_retain_stats_t st;
    if (dcr_relay_retain_commit(g_t, tau, v, &st) != DCR_OK)
        fail_msg("commit after the restart: %s", dcr_error_detail());
    assert_int_equal(st.payloads, WORLD * PER);
    assert_int_equal(st.bytes, (uint64_t)tp_sum_len(sent, WORLD * PER));
    assert_int_equal(st.pruned, 1);
    check_retained(v, tau, sent);
    assert_false(exists_under_root("versions/v4/VERSION"));
    assert_false(exists_under_root("attempt-71")); /* published: no longer staged */
    /* Told twice (the commit seen at the restore and again): the same version. */
    assert_int_equal(dcr_relay_retain_commit(g_t, tau, v, NULL), DCR_OK);
    check_retained(v, tau, sent);
    tp_payloads_free(sent, WORLD * PER);
}

/* Two attempts ended (the first was replaced), the second committed while
 * the root was down: the restarted process publishes it before its
 * transport exists, and the staged attempt that did not commit is gone. */
static void test_restarted_root_recovers_from_the_store_alone(void **state)
{
    (void)state;
    uint64_t v = VERSIONS + 1, lost = tau_of(v), won = lost + 1;
    tp_payload_t *first = make_version(v), *second = calloc(WORLD * PER, sizeof *second);
    for (int o = 0; o < WORLD; o++)
        for (int j = 0; j < PER; j++)
            second[o * PER + j] = tp_payload_make(won, o, (uint64_t)(7 + j), 50 + (uint64_t)j,
                                                  99000 + (uint64_t)(o * 10 + j));
    run_attempt(lost, first);
    run_attempt(won, second);
    dcr_transport_destroy(g_t);
    g_t = NULL;
    char url[PATH_MAX + 32];
    root_url(url, sizeof url);
    dcr_retain_stats_t st;
    if (dcr_relay_retain_recover(url, won, v, KEEP, &st) != DCR_OK)
        fail_msg("recover: %s", dcr_error_detail());
    assert_int_equal(st.payloads, WORLD * PER);
    assert_false(exists_under_root("attempt-71"));
    assert_false(exists_under_root("attempt-72"));
    /* Nothing of an attempt that was never staged. */
    assert_int_equal(dcr_relay_retain_recover(url, won + 5, v + 1, KEEP, NULL), DCR_ENOTFOUND);
    assert_false(exists_under_root("versions/v8/VERSION"));
    assert_int_equal(dcr_relay_retain_recover(url, 0, v, KEEP, NULL), DCR_EINVAL);
    restart_root();
    check_retained(v, won, second);
    tp_payloads_free(first, WORLD * PER);
    tp_payloads_free(second, WORLD * PER);
}

/* ---- hostile readers on a raw socket -------------------------------------- */

static int raw_connect(void)
{
    const char *hp = g_url + strlen("relay://");
    const char *colon = strrchr(hp, ':');
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void raw_send(int fd, uint32_t magic, uint32_t type, uint64_t a, uint64_t len,
                     const void *body, size_t body_len)
{
    uint8_t h[48] = {0};
    dcr__put_le(h, magic, 4);
    dcr__put_le(h + 4, type, 4);
    dcr__put_le(h + 24, a, 8);
    dcr__put_le(h + 40, len, 8);
    assert_int_equal(send(fd, h, sizeof h, MSG_NOSIGNAL), (ssize_t)sizeof h);
    if (body_len) assert_int_equal(send(fd, body, body_len, MSG_NOSIGNAL), (ssize_t)body_len);
}

/* The answer's type (its code in *code_p) after reading its body; 0 when
 * the root closed the connection. */
static uint32_t raw_answer(int fd, int32_t *code_p, uint8_t *body, size_t cap, size_t *len_p)
{
    uint8_t h[48];
    size_t got = 0;
    while (got < sizeof h) {
        ssize_t r = recv(fd, h + got, sizeof h - got, 0);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    uint64_t len = dcr__le(h + 40, 8);
    assert_true(len <= cap);
    for (got = 0; got < len;) {
        ssize_t r = recv(fd, body + got, (size_t)len - got, 0);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    *code_p = (int32_t)(uint32_t)dcr__le(h + 8, 4);
    if (len_p) *len_p = (size_t)len;
    return (uint32_t)dcr__le(h + 4, 4);
}

static int store_session(void)
{
    int fd = raw_connect();
    raw_send(fd, 0x46524344u, 7 /* HELLO */, 2 /* store */, 0, NULL, 0);
    int32_t code = 0;
    uint8_t body[600];
    assert_int_equal(raw_answer(fd, &code, body, sizeof body, NULL), 4 /* ACK */);
    return fd;
}

/* A GET of key (klen bytes) for [off, +len) into at most cap: the answer. */
static uint32_t raw_get(int fd, const char *key, size_t klen, uint64_t off, uint64_t len,
                        uint64_t cap, int32_t *code_p, uint8_t *out, size_t out_cap, size_t *got_p)
{
    uint8_t body[24 + 600];
    dcr__put_le(body, off, 8);
    dcr__put_le(body + 8, len, 8);
    dcr__put_le(body + 16, cap, 8);
    memcpy(body + 24, key, klen);
    raw_send(fd, 0x46524344u, 8 /* SGET */, 0, 24 + klen, body, 24 + klen);
    return raw_answer(fd, code_p, out, out_cap, got_p);
}

static void expect_get_refused(int fd, const char *key, size_t klen, uint64_t off, uint64_t cap,
                               int32_t want)
{
    int32_t code = 0;
    uint8_t out[600];
    uint32_t type = raw_get(fd, key, klen, off, UINT64_MAX, cap, &code, out, sizeof out, NULL);
    if (type != 5 /* NACK */ || code != want)
        fail_msg("GET '%.*s': answer type %u code %d, expected a refusal %d", (int)klen, key, type,
                 code, want);
}

static void test_hostile_requests_are_refused(void **state)
{
    (void)state;
    int fd = store_session();
    char manifest[64];
    snprintf(manifest, sizeof manifest, "versions/v%d/VERSION", VERSIONS);
    static const char *const bad[] = {
        "versions/v6/../../../etc/passwd",
        "../secret",
        "/etc/passwd",
        "versions/v6/.hidden",
        "versions/v6/sub/payload",
        "attempt-61/MANIFEST",
        "versions/vx/VERSION",
        "versions/v06/VERSION",
        "versions/v6/",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_get_refused(fd, bad[i], strlen(bad[i]), 0, 1 << 20, DCR_EINVAL);
    /* A NUL inside the key: refused, never cut there. */
    char nul[64];
    int k = snprintf(nul, sizeof nul, "%s", manifest);
    memcpy(nul + k, "\0xx", 3);
    expect_get_refused(fd, nul, (size_t)k + 3, 0, 1 << 20, DCR_EINVAL);
    /* An answer larger than the reader's buffer, a range beyond the object,
     * a pruned version. */
    expect_get_refused(fd, manifest, strlen(manifest), 0, 10, DCR_EINVAL);
    expect_get_refused(fd, manifest, strlen(manifest), UINT64_MAX - 5, 1 << 20, DCR_ETRANSPORT);
    expect_get_refused(fd, "versions/v1/VERSION", 19, 0, 1 << 20, DCR_ENOTFOUND);
    /* Listings: only the retained area, bounded page sizes. */
    static const struct {
        const char *body;
        size_t len;
        uint64_t max;
    } lists[] = {
        {"\0", 1, 10},
        {"attempt-61/\0", 12, 10},
        {"versions/../\0", 13, 10},
        {"versions/\0", 10, 0},
        {"versions/\0", 10, 5000},
        {"versions/", 9, 10},
        {"versions/\0../../etc", 19, 10},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        raw_send(fd, 0x46524344u, 9 /* SLIST */, lists[i].max, lists[i].len, lists[i].body,
                 lists[i].len);
        int32_t code = 0;
        uint8_t out[600];
        assert_int_equal(raw_answer(fd, &code, out, sizeof out, NULL), 5 /* NACK */);
        assert_int_equal(code, DCR_EINVAL);
    }
    /* After every refusal the connection still serves, byte for byte. */
    int32_t code = 0;
    uint8_t out[4096];
    size_t got = 0;
    assert_int_equal(raw_get(fd, manifest, strlen(manifest), 0, UINT64_MAX, sizeof out, &code, out,
                             sizeof out, &got),
                     10 /* SDATA */);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", g_root, manifest);
    size_t flen = 0;
    uint8_t *file = slurp(path, &flen);
    assert_int_equal(got, flen);
    assert_memory_equal(out, file, flen);
    free(file);
    /* A frame claiming a huge body: the connection is closed, nothing read. */
    raw_send(fd, 0x46524344u, 8, 0, (uint64_t)1 << 31, NULL, 0);
    assert_int_equal(raw_answer(fd, &code, out, sizeof out, NULL), 0);
    close(fd);
    /* A bad magic, a tree frame on a reader's connection: closed. */
    fd = store_session();
    raw_send(fd, 0x12345678u, 8, 0, 0, NULL, 0);
    assert_int_equal(raw_answer(fd, &code, out, sizeof out, NULL), 0);
    close(fd);
    fd = store_session();
    raw_send(fd, 0x46524344u, 1 /* DATA */, 0, 4, "abcd", 4);
    assert_int_equal(raw_answer(fd, &code, out, sizeof out, NULL), 0);
    close(fd);
    /* The root still serves a well-behaved reader. */
    dcr_objstore_t *s = reader();
    uint64_t *vs = NULL;
    size_t n = 0;
    assert_int_equal(dcr_retain_list(s, &vs, &n), DCR_OK);
    assert_int_equal(n, KEEP);
    free(vs);
    dcr_objstore_destroy(s);
}

/* A reader that opens its connection (by a first listing). */
static dcr_objstore_t *connected_reader(int timeout_ms)
{
    dcr_objstore_config_t oc = {.url = g_url, .timeout_ms = timeout_ms};
    dcr_objstore_t *s = NULL;
    if (dcr_objstore_create(&oc, &s) != DCR_OK) fail_msg("%s: %s", g_url, dcr_error_detail());
    return s;
}

static dcr_status_t list_versions(dcr_objstore_t *s)
{
    uint64_t *vs = NULL;
    size_t n = 0;
    dcr_status_t st = dcr_retain_list(s, &vs, &n);
    free(vs);
    return st;
}

static void *close_reader_later(void *arg)
{
    dcr_clock_nap_ns(300000000L);
    dcr_objstore_destroy(arg);
    return NULL;
}

/* With the root's most readers connected, one more is refused as busy:
 * a reader whose timeout ends first gets DCR_EAGAIN; one that can wait is
 * served once a reader leaves (a restore of many nodes at once must not
 * fall back to dense refits for want of a reader's slot). */
static void test_busy_root_is_waited_for(void **state)
{
    (void)state;
    dcr_objstore_t *held[DCR__RELAY_RETAIN_READERS];
    for (int i = 0; i < DCR__RELAY_RETAIN_READERS; i++) {
        held[i] = connected_reader(0);
        assert_int_equal(list_versions(held[i]), DCR_OK);
    }
    dcr_objstore_t *impatient = connected_reader(100);
    assert_int_equal(list_versions(impatient), DCR_EAGAIN);
    dcr_objstore_destroy(impatient);

    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, close_reader_later, held[0]), 0);
    dcr_objstore_t *patient = connected_reader(10000);
    uint64_t t0 = dcr_clock_ns();
    assert_int_equal(list_versions(patient), DCR_OK);
    assert_true(dcr_clock_ns() - t0 >= 250000000u); /* served only after the slot freed */
    pthread_join(th, NULL);
    dcr_objstore_destroy(patient);
    for (int i = 1; i < DCR__RELAY_RETAIN_READERS; i++) dcr_objstore_destroy(held[i]);
}

static void test_store_urls_are_checked(void **state)
{
    (void)state;
    static const char *const bad[] = {"relay://",       "relay://host",    "relay://:80",
                                      "relay://h:0",    "relay://h:70000", "relay://h:1/x",
                                      "relay://h_x:80", "relay://h:080",   "relay://h:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dcr_objstore_config_t oc = {.url = bad[i]};
        dcr_objstore_t *s = NULL;
        if (dcr_objstore_create(&oc, &s) != DCR_EINVAL) fail_msg("%s was accepted", bad[i]);
    }
    /* Nobody listening: a clear transport error at the first request. */
    dcr_objstore_config_t oc = {.url = "relay://127.0.0.1:1", .timeout_ms = 500};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&oc, &s), DCR_OK);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(s, 1, &m), DCR_ETRANSPORT);
    dcr_objstore_destroy(s);
    /* Another transport, and a relay handle that is not the root. */
    char dir[PATH_MAX + 16];
    assert_true(testfiles_tmpdir(dir, sizeof dir, "relayret-os"));
    dcr_transport_config_t c = tp_config(dir, 1, 1, 1);
    dcr_transport_t *t = tp_create("objstore", &c);
    assert_int_equal(dcr_relay_retain_start(t, "dir:/nonexistent-never", 2, false),
                     DCR_EUNSUPPORTED);
    dcr_transport_destroy(t);
    tp_rmtree(dir);
}

/* A tree node that is not the root refuses readers with the reason. */
static char g_node1[64];

static dcr_status_t one_publish(void *ctx, int node, const char *addr)
{
    (void)ctx;
    if (node == 1) snprintf(g_node1, sizeof g_node1, "%s", addr);
    return DCR_OK;
}

static dcr_status_t one_lookup(void *ctx, int node, char *addr, size_t cap)
{
    (void)ctx;
    if (node != 1 || !g_node1[0]) return DCR_ENOTFOUND;
    snprintf(addr, cap, "%s", g_node1);
    return DCR_OK;
}

static void test_inner_node_refuses_readers(void **state)
{
    (void)state;
    static const dcr_relay_directory_t dir = {one_publish, one_lookup, NULL};
    dcr_transport_config_t c = tp_config(NULL, 1, 1, 2);
    c.relay_dir = &dir;
    c.relay_node = 1;
    dcr_transport_t *t = tp_create("relay", &c);
    assert_int_equal(dcr_relay_retain_start(t, "dir:/nonexistent-never", 2, false),
                     DCR_EUNSUPPORTED);
    char url[96];
    snprintf(url, sizeof url, "relay://%s", g_node1);
    dcr_objstore_config_t oc = {.url = url};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&oc, &s), DCR_OK);
    dcr_retain_manifest_t m;
    assert_int_equal(dcr_retain_manifest_read(s, 1, &m), DCR_EUNSUPPORTED);
    assert_non_null(strstr(dcr_error_detail(), "keeps no retained versions"));
    dcr_objstore_destroy(s);
    dcr_transport_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_root_keeps_the_last_k_byte_identical, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_readers_get_the_window_over_the_network, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_or_missing_objects_are_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_unended_attempt_is_not_retained, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_root_restarted_before_commit_retains_the_version,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_restarted_root_recovers_from_the_store_alone, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_hostile_requests_are_refused, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_busy_root_is_waited_for, fx_setup, fx_teardown),
        cmocka_unit_test(test_store_urls_are_checked),
        cmocka_unit_test(test_inner_node_refuses_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
