/* ctest-labels: integration slow */
/* Slower transport checks, against every backend:
 *  - the reference of a default-sized checkpoint (44 MB, scaled Qwen3-30B-A3B
 *    at --scale 16) over the default emulated links takes a few seconds, as
 *    first principles predict from dcr_link_config_default();
 *  - a property test: random topologies, queue sizes, payload counts and
 *    sizes, several attempts each, from a logged seed (DCR_TEST_SEED replays
 *    it); every node must get every payload of each attempt exactly once, and
 *    the V_payload / V_cross accounting must hold per attempt. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <time.h>

#include "transport_test_util.h"

static const char *g_backend;
static char g_dir[PATH_MAX];

static int fx_setup(void **state)
{
    (void)state;
    assert_true(testfiles_tmpdir(g_dir, sizeof g_dir, "transport"));
    return 0;
}

static int fx_teardown(void **state)
{
    (void)state;
    tp_rmtree(g_dir);
    return 0;
}

/* The suite branches on what the backend guarantees, never on its name:
 * with per-hop links a payload crosses the boundary once, into the tree's
 * root; without, every rollout node fetches it across the boundary. */
static bool per_hop_links(void)
{
    return dcr_transport_find(g_backend)->props.per_hop_links;
}

/* Time from first principles for the default links: the busiest link of
 * each phase at its rate (node links cap parallel flows; a single flow is
 * capped lower). */
static double expected_reference(const dcr_link_config_t *l, double per_node, int owners_per_node,
                                 int train_nodes)
{
    double node = l->cross_gbps * 1e9 / 8, flow = l->flow_gbps * 1e9 / 8;
    double up_rate = owners_per_node * flow < node ? owners_per_node * flow : node;
    double total = per_node * train_nodes;
    if (!per_hop_links()) {
        double down_rate = 2 * flow < node ? 2 * flow : node; /* two GETs per node */
        return per_node / up_rate + total / down_rate;
    }
    /* Per-hop links: everything enters the root; owners of all training nodes feed it. */
    double in_rate = train_nodes * up_rate < node ? train_nodes * up_rate : node;
    return total / in_rate;
}

static void test_reference_default_links(void **state)
{
    (void)state;
    dcr_transport_config_t c = tp_config(g_dir, 2, 4, 2);
    c.link = dcr_link_config_default();
    dcr_transport_t *t = tp_create(g_backend, &c);
    int64_t per_node[2] = {22028544, 22028544}; /* 44,057,088 bytes: qwen3-30b-a3b --scale 16 */
    double s = 0;
    assert_int_equal(dcr_transport_reference(t, per_node, &s), DCR_OK);
    double e = expected_reference(&c.link, (double)per_node[0], 2, 2);
    print_message("%s: reference of a 44 MB checkpoint over the default links: %.2f s (expected "
                  "%.2f s, ratio %.2f)\n",
                  g_backend, s, e, s / e);
    assert_true(s / e > 0.7 && s / e < 2.0);
    assert_true(s > 1.0 && s < 10.0); /* a few seconds, not minutes */
    dcr_transport_destroy(t);
}

/* One random attempt on t: k_o payloads per owner, random sizes. */
static void random_attempt(dcr_transport_t *t, dcr_rng_t *rng, uint64_t tau, int world, int nodes)
{
    dcr_transport_counters_t before;
    dcr_transport_counters(t, &before);
    assert_int_equal(dcr_transport_open_attempt(t, tau), DCR_OK);
    tp_owner_t *owners = calloc((size_t)world, sizeof *owners);
    tp_node_t *nd = calloc((size_t)nodes, sizeof *nd);
    size_t total = 0, at = 0;
    int *k = calloc((size_t)world, sizeof *k);
    for (int o = 0; o < world; o++) total += (size_t)(k[o] = (int)dcr_rng_below(rng, 5));
    tp_payload_t *flat = calloc(total + 1, sizeof *flat);
    for (int o = 0; o < world; o++) {
        owners[o].p = &flat[at];
        owners[o].n = (size_t)k[o];
        owners[o].finish = true;
        uint64_t id = dcr_rng_u64(rng) >> 8; /* sparse, increasing ids */
        for (int j = 0; j < k[o]; j++) {
            size_t count = 1 + (size_t)dcr_rng_below(rng, 20000);
            flat[at++] = tp_payload_make(tau, o, id, count, dcr_rng_u64(rng) | 1);
            id += 1 + dcr_rng_below(rng, 3);
        }
    }
    tp_run(t, owners, world, nd, nodes);
    for (int i = 0; i < nodes; i++) {
        tp_check_exactly_once(&nd[i], flat, total);
        tp_node_free(&nd[i]);
    }
    dcr_transport_counters_t after;
    dcr_transport_counters(t, &after);
    int64_t v = tp_sum_len(flat, total);
    assert_int_equal(after.payload_bytes - before.payload_bytes, v);
    assert_int_equal(after.cross_bytes - before.cross_bytes, per_hop_links() ? v : v * (1 + nodes));
    for (size_t i = 0; i < total; i++) free(flat[i].buf);
    free(flat);
    free(k);
    free(owners);
    free(nd);
}

static void test_random_topologies(void **state)
{
    (void)state;
    uint64_t seed = 0;
    const char *env = getenv("DCR_TEST_SEED");
    seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    print_message("%s: DCR_TEST_SEED=%" PRIu64 "\n", g_backend, seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (int round = 0; round < 6; round++) {
        int train = 1 + (int)dcr_rng_below(&rng, 3);
        int world = train * (1 + (int)dcr_rng_below(&rng, 3));
        int nodes = 1 + (int)dcr_rng_below(&rng, 8);
        dcr_transport_config_t c = tp_config(g_dir, train, world, nodes);
        c.fanout = 1 + (int)dcr_rng_below(&rng, 3);
        c.queue_payloads = 1 + dcr_rng_below(&rng, 4);
        print_message("  round %d: train %d world %d nodes %d fanout %d queue %zu\n", round, train,
                      world, nodes, c.fanout, c.queue_payloads);
        dcr_transport_t *t = tp_create(g_backend, &c);
        for (uint64_t tau = 1; tau <= 3; tau++)
            random_attempt(t, &rng, tau * 10 + round, world, nodes);
        dcr_transport_destroy(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reference_default_links, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_random_topologies, fx_setup, fx_teardown),
    };
    int failed = 0;
    for (size_t i = 0; i < dcr_transport_backend_count(); i++) {
        g_backend = dcr_transport_backend_name(i);
        failed +=
            _cmocka_run_group_tests(g_backend, tests, sizeof tests / sizeof tests[0], NULL, NULL);
    }
    return failed;
}
