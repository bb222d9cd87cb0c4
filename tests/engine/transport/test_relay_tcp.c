/* ctest-labels: integration
 *
 * The relay tree split across handles, as the processes of a run hold it
 * (dcr_transport_config_t relay_dir): one handle per tree node and one for
 * the owners, over real TCP on loopback, found through a directory. Each
 * payload reaches every node exactly once whatever order the handles open
 * the attempt in (a connection waits at its listener for the attempt);
 * the boundary bytes are counted once, by the owners' handle; a handle that
 * opened and stopped an attempt turns late peers away at once; misuse is
 * refused. Expected values come from what the test sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "transport_test_util.h"

#define NODES 3
#define WORLD 2

/* The directory: tree node -> "HOST:PORT", in memory. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_addr[NODES][64];
static int g_lookups;

static dcr_status_t dir_publish(void *ctx, int node, const char *addr)
{
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    snprintf(g_addr[node], sizeof g_addr[node], "%s", addr);
    pthread_mutex_unlock(&g_mu);
    return DCR_OK;
}

static dcr_status_t dir_lookup(void *ctx, int node, char *addr, size_t cap)
{
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    g_lookups++;
    bool known = node >= 0 && node < NODES && g_addr[node][0];
    if (known) snprintf(addr, cap, "%s", g_addr[node]);
    pthread_mutex_unlock(&g_mu);
    return known ? DCR_OK : dcr_error_set(DCR_ENOTFOUND, "node %d: nothing published", node);
}

static const dcr_relay_directory_t g_dir = {dir_publish, dir_lookup, NULL};

static int setup(void **state)
{
    (void)state;
    memset(g_addr, 0, sizeof g_addr);
    g_lookups = 0;
    return 0;
}

/* A handle of the split tree: tree node `node` (-1: the owners'). */
static dcr_transport_t *part(int node, int fanout)
{
    dcr_transport_config_t c = tp_config(NULL, 1, WORLD, NODES);
    c.fanout = fanout;
    c.relay_dir = &g_dir;
    c.relay_node = node;
    return tp_create("relay", &c);
}

typedef struct opener {
    dcr_transport_t *t;
    uint64_t tau;
    int delay_ms;
} opener_t;

static void *open_later(void *arg)
{
    opener_t *o = arg;
    usleep((useconds_t)o->delay_ms * 1000);
    assert_int_equal(dcr_transport_open_attempt(o->t, o->tau), DCR_OK);
    return NULL;
}

/* A chain (fan-out 1): the root, node 1 forwarding to node 2. The owners
 * send first, the leaf opens next and the root last: hellos wait at their
 * listeners. Every node gets every payload once, in a second attempt too. */
static void test_split_tree_any_order(void **state)
{
    (void)state;
    dcr_transport_t *n[NODES], *own = NULL;
    for (int i = 0; i < NODES; i++) n[i] = part(i, 1);
    own = part(-1, 1);
    for (int i = 0; i < NODES; i++) assert_non_null(strstr(g_addr[i], "127.0.0.1:"));
    int k = 3;
    for (uint64_t tau = 4; tau <= 5; tau++) {
        tp_payload_t *flat;
        tp_payload_t **per = tp_make_set(tau, WORLD, k, 40, 9, &flat);
        assert_int_equal(dcr_transport_open_attempt(own, tau), DCR_OK);
        tp_owner_t ow[WORLD];
        pthread_t ot[WORLD], nt[NODES], op[NODES];
        tp_node_t nd[NODES];
        memset(ow, 0, sizeof ow);
        memset(nd, 0, sizeof nd);
        for (int o = 0; o < WORLD; o++) {
            ow[o] = (tp_owner_t){.t = own, .owner = o, .p = per[o], .n = (size_t)k, .finish = true};
            assert_int_equal(pthread_create(&ot[o], NULL, tp_owner_main, &ow[o]), 0);
        }
        /* Leaf first, root last, each a little later. */
        opener_t ops[NODES];
        for (int i = 0; i < NODES; i++) {
            ops[i] = (opener_t){n[i], tau, 50 * (NODES - i)};
            assert_int_equal(pthread_create(&op[i], NULL, open_later, &ops[i]), 0);
        }
        for (int i = 0; i < NODES; i++) pthread_join(op[i], NULL);
        for (int i = 0; i < NODES; i++) {
            nd[i] = (tp_node_t){.t = n[i], .node = i, .budget_ms = 20000};
            assert_int_equal(pthread_create(&nt[i], NULL, tp_node_main, &nd[i]), 0);
        }
        for (int o = 0; o < WORLD; o++) pthread_join(ot[o], NULL);
        for (int i = 0; i < NODES; i++) pthread_join(nt[i], NULL);
        for (int o = 0; o < WORLD; o++)
            if (ow[o].st != DCR_OK) fail_msg("owner %d: %s", o, ow[o].err);
        for (int i = 0; i < NODES; i++) {
            if (nd[i].end != DCR_ECLOSED) fail_msg("node %d: %s", i, nd[i].err);
            tp_check_exactly_once(&nd[i], flat, (size_t)(WORLD * k));
            tp_node_free(&nd[i]);
        }
        tp_free_set(per, flat, WORLD, k);
    }
    /* Two attempts of 2 x 3 payloads: the sending handle counts every
     * boundary crossing; the root counts none again; each hop below the
     * root counts what it received over its local link. */
    dcr_transport_counters_t c;
    dcr_transport_counters(own, &c);
    assert_true(c.payload_bytes > 0);
    assert_int_equal(c.cross_bytes, c.payload_bytes);
    int64_t sent = c.payload_bytes;
    dcr_transport_counters(n[0], &c);
    assert_int_equal(c.cross_bytes, 0);
    assert_int_equal(c.local_bytes, 0);
    for (int i = 1; i < NODES; i++) {
        dcr_transport_counters(n[i], &c);
        assert_int_equal(c.local_bytes, sent);
    }
    for (int i = 0; i < NODES; i++) dcr_transport_destroy(n[i]);
    dcr_transport_destroy(own);
}

/* One payload and the owner's finish: an owner streams ahead of the
 * root's answers, so a refused connection fails the send or, at the
 * latest, the finish. */
static dcr_status_t send_then_finish(dcr_transport_t *own, int owner, const tp_payload_t *p)
{
    dcr_status_t st = dcr_transport_send(own, owner, 1, p->buf, p->len);
    if (st == DCR_OK) st = dcr_transport_finish(own, owner, 1);
    return st;
}

/* An attempt the root opened and stopped (a node process that takes no
 * part in it) turns a late owner away at once, and an owner of an older
 * attempt too: the send fails well before any timeout. */
static void test_stopped_attempt_refuses_late_peers(void **state)
{
    (void)state;
    dcr_transport_t *root = part(0, 2), *own = part(-1, 2);
    tp_payload_t p = tp_payload_make(7, 0, 1, 30, 0);
    assert_int_equal(dcr_transport_open_attempt(root, 7), DCR_OK);
    dcr_transport_stop_and_wait(root);
    assert_int_equal(dcr_transport_open_attempt(own, 7), DCR_OK);
    double t0 = dcr_clock_s();
    assert_int_equal(send_then_finish(own, 0, &p), DCR_ETRANSPORT);
    assert_true(dcr_clock_s() - t0 < 5.0);
    free(p.buf);
    /* The root moves on to 9: an owner still at 8 is refused as well. */
    assert_int_equal(dcr_transport_open_attempt(root, 9), DCR_OK);
    assert_int_equal(dcr_transport_open_attempt(own, 8), DCR_OK);
    p = tp_payload_make(8, 1, 1, 30, 0);
    t0 = dcr_clock_s();
    assert_int_equal(send_then_finish(own, 1, &p), DCR_ETRANSPORT);
    assert_true(dcr_clock_s() - t0 < 5.0);
    free(p.buf);
    dcr_transport_destroy(own);
    dcr_transport_destroy(root);
}

/* One line for each misuse. */
static void test_split_misuse(void **state)
{
    (void)state;
    dcr_transport_t *t = NULL, *n1 = part(1, 2);
    dcr_delivery_t d;
    assert_int_equal(dcr_transport_open_attempt(n1, 3), DCR_OK);
    assert_int_equal(dcr_transport_recv(n1, 2, 0, &d), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not served by this handle"));
    int64_t share[1] = {1000};
    double s = 0;
    assert_int_equal(dcr_transport_reference(n1, share, &s), DCR_EUNSUPPORTED);
    dcr_transport_destroy(n1);
    dcr_transport_config_t c = tp_config(NULL, 1, WORLD, NODES);
    c.relay_dir = &g_dir;
    c.relay_node = NODES;
    assert_int_equal(dcr_transport_create("relay", &c, &t), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "tree node"));
    c.relay_node = 0;
    c.relay_host = "not-an-address";
    assert_int_equal(dcr_transport_create("relay", &c, &t), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "IPv4"));
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_split_tree_any_order, setup),
        cmocka_unit_test_setup(test_stopped_attempt_refuses_late_peers, setup),
        cmocka_unit_test_setup(test_split_misuse, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
