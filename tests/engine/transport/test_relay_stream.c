/* ctest-labels: integration
 *
 * An owner's payloads stream to the relay root: the cross-cluster link's
 * one-way latency is paid once per stream, not once per payload. Oracle from
 * first principles: K payloads one after another, each waiting for the
 * root's answer before the next, cannot end before K latencies have passed
 * (the emulation sleeps them); a stream ends after about one latency plus
 * its bytes at the link's rate. The bound asserted, 10 latencies for 40
 * payloads, sits 4x below the first and 10x above the second, so scheduling
 * delays of a loaded machine do not decide it. Every node still gets every
 * payload exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dcr/clock.h"
#include "transport_test_util.h"

#define PAYLOADS   40
#define LATENCY_MS 20.0

static void test_latency_once_per_stream(void **state)
{
    (void)state;
    dcr_transport_config_t c = tp_config(NULL, 1, 1, 2);
    /* 1 Gbps across, 2,000 records a payload (about 4 KB): the bytes take
     * about 1.3 ms in all, the latencies of a stop-and-wait owner 800 ms. */
    c.link = (dcr_link_config_t){
        .cross_gbps = 1.0, .flow_gbps = 0, .local_gbps = 0, .latency_ms = LATENCY_MS};
    dcr_transport_t *t = tp_create("relay", &c);
    assert_int_equal(dcr_transport_open_attempt(t, 1), DCR_OK);
    tp_payload_t *flat;
    tp_payload_t **per = tp_make_set(1, 1, PAYLOADS, 2000, 7, &flat);
    tp_owner_t owners[1] = {{.p = per[0], .n = PAYLOADS, .finish = true}};
    tp_node_t nd[2] = {{0}};
    double t0 = dcr_clock_s();
    tp_run(t, owners, 1, nd, 2);
    double took_ms = (dcr_clock_s() - t0) * 1000.0;
    for (int i = 0; i < 2; i++) {
        tp_check_exactly_once(&nd[i], flat, PAYLOADS);
        tp_node_free(&nd[i]);
    }
    print_message("%d payloads with %.0f ms latency: %.1f ms\n", PAYLOADS, LATENCY_MS, took_ms);
    if (took_ms < LATENCY_MS) fail_msg("%.1f ms: the link's latency was not emulated", took_ms);
    if (took_ms > 10 * LATENCY_MS)
        fail_msg("%.1f ms for %d payloads: the latency is paid per payload (%.0f ms each)", took_ms,
                 PAYLOADS, LATENCY_MS);
    tp_free_set(per, flat, 1, PAYLOADS);
    dcr_transport_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latency_once_per_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
