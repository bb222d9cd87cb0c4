/* ctest-labels: integration */
/* How close one rollout node's downloads come to the wire when every
 * payload is already stored, measured twice in one run over the same
 * emulated link (issue 30's configuration: 0.1 Gbps per node, 0.2 Gbps per
 * flow, 5 ms one-way latency; 46 payloads of about 75 KB, as a refit of
 * `dcr bench --scale 8 --layers 8 --link-gbps 0.1` moves):
 *
 * - the emulator's floor: the same bytes through dcr__flow_pace by as many
 *   threads as the transport has download flows, with no protocol at all;
 * - the object-store protocol: a rollout node of the objstore transport
 *   (directory store) listing, fetching, verifying and queueing them, and
 *   reading the manifest, until recv says the attempt is complete.
 *
 * The oracle is the wire: bytes x 8 / rate, which neither may beat (that
 * would mean the link does not limit). The two ratios to it are printed, so
 * the protocol's overhead can be told from the emulator's; the upper bounds
 * are loose enough for a loaded 2-core machine and a sanitizer build. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "transport/transport-internal.h"
#include "transport_test_util.h"

#define NPAYLOADS 46
#define RECORDS   37500 /* random bf16 values: about 75 KB a payload */
#define FLOWS     8     /* objstore_transport.c's OBJ_FLOWS */

static const dcr_link_config_t g_link = {
    .cross_gbps = 0.1, .flow_gbps = 0.2, .local_gbps = 1.0, .latency_ms = 5.0};

typedef struct raw_ctx {
    dcr__links_t *links;
    const tp_payload_t *p;
    atomic_int next;
} raw_ctx_t;

/* One download flow of the floor: whole objects, one after another, each
 * a flow of its own (its latency first), as a GET is. */
static void *raw_flow(void *arg)
{
    raw_ctx_t *c = arg;
    for (int i; (i = atomic_fetch_add(&c->next, 1)) < NPAYLOADS;) {
        dcr__flow_t f;
        dcr__flow_cross(&f, c->links, -1, 0, NULL, 0);
        for (size_t done = 0; done < c->p[i].len;) {
            size_t k = c->p[i].len - done < DCR_OBJSTORE_PACE_CHUNK ? c->p[i].len - done
                                                                    : DCR_OBJSTORE_PACE_CHUNK;
            assert_int_equal(dcr__flow_pace(&f, k), DCR_OK);
            done += k;
        }
    }
    return NULL;
}

static double raw_floor_s(const tp_payload_t *p)
{
    raw_ctx_t c = {.p = p};
    assert_int_equal(dcr__links_create(&g_link, 1, 1, &c.links), DCR_OK);
    pthread_t th[FLOWS];
    double t0 = dcr_clock_s();
    for (int i = 0; i < FLOWS; i++) assert_int_equal(pthread_create(&th[i], NULL, raw_flow, &c), 0);
    for (int i = 0; i < FLOWS; i++) pthread_join(th[i], NULL);
    double s = dcr_clock_s() - t0;
    dcr__links_destroy(c.links);
    return s;
}

/* Stores the attempt through an unpaced owners' handle, then times a
 * joining rollout node over the paced link from its open to the end. */
static double protocol_s(const tp_payload_t *p, const char *url)
{
    dcr_transport_config_t oc = tp_config(url, 1, 1, 1);
    oc.send_only = true;
    dcr_transport_t *owners = tp_create("objstore", &oc);
    assert_int_equal(dcr_transport_open_attempt(owners, 1), DCR_OK);
    for (int i = 0; i < NPAYLOADS; i++)
        assert_int_equal(dcr_transport_send(owners, 0, p[i].id, p[i].buf, p[i].len), DCR_OK);
    assert_int_equal(dcr_transport_finish(owners, 0, NPAYLOADS), DCR_OK);

    dcr_transport_config_t rc = tp_config(url, 1, 1, 1);
    rc.join = true;
    rc.link = g_link;
    rc.queue_payloads = 8; /* dcr bench's */
    dcr_transport_t *reader = tp_create("objstore", &rc);
    tp_node_t nd = {.t = reader, .node = 0, .budget_ms = 30000};
    double t0 = dcr_clock_s();
    assert_int_equal(dcr_transport_open_attempt(reader, 1), DCR_OK);
    tp_node_main(&nd);
    double s = dcr_clock_s() - t0;
    if (nd.end != DCR_ECLOSED) fail_msg("node: %s", nd.err);
    tp_check_exactly_once(&nd, p, NPAYLOADS);
    tp_node_free(&nd);
    dcr_transport_destroy(reader);
    dcr_transport_destroy(owners);
    return s;
}

static void test_downloads_against_the_wire(void **state)
{
    (void)state;
    tp_payload_t p[NPAYLOADS];
    uint64_t bytes = 0;
    for (int i = 0; i < NPAYLOADS; i++) {
        p[i] = tp_payload_make(1, 0, (uint64_t)i, RECORDS, 100 + (uint64_t)i);
        bytes += p[i].len;
    }
    double wire = (double)bytes * 8.0 / (g_link.cross_gbps * 1e9);
    char tmp[PATH_MAX], url[PATH_MAX + 16];
    assert_true(testfiles_tmpdir(tmp, sizeof tmp, "floor"));
    snprintf(url, sizeof url, "dir:%s/store", tmp);

    double raw = raw_floor_s(p), proto = protocol_s(p, url);
    print_message("%d payloads, %llu bytes: wire %.3f s; emulator floor %.3f s (%.3fx the "
                  "wire); objstore protocol %.3f s (%.3fx the wire, %.3fx the floor)\n",
                  NPAYLOADS, (unsigned long long)bytes, wire, raw, raw / wire, proto, proto / wire,
                  proto / raw);
    /* Nothing crosses a 0.1 Gbps link faster than the wire allows. */
    if (raw < 0.97 * wire || proto < 0.97 * wire)
        fail_msg("faster than the wire: floor %.3f s, protocol %.3f s, wire %.3f s", raw, proto,
                 wire);
    /* Loose: a loaded 2-core machine, sanitizers. */
    if (raw > 3.0 * wire || proto > 4.0 * wire)
        fail_msg("far from the wire: floor %.3f s, protocol %.3f s, wire %.3f s", raw, proto, wire);
    tp_rmtree(tmp);
    for (int i = 0; i < NPAYLOADS; i++) free(p[i].buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_downloads_against_the_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
