/* Helpers shared by the control-plane tests: status assertions that print
 * the error line, the baselines K^k, and the bootstrap and prepare steps of
 * the protocol. Include after <cmocka.h>. */
#ifndef DCR_TEST_CONTROL_TEST_UTIL_H
#define DCR_TEST_CONTROL_TEST_UTIL_H

#include <stdint.h>
#include <string.h>

#include "dcr/control.h"

static inline void baseline_of(uint8_t out[DCR_CONTROL_BASELINE_BYTES], unsigned k)
{
    for (unsigned i = 0; i < DCR_CONTROL_BASELINE_BYTES; i++) out[i] = (uint8_t)(k * 31 + i + 1);
}

#define assert_status(expr, want)                                                                  \
    do {                                                                                           \
        dcr_status_t st__ = (expr);                                                                \
        if (st__ != (want)) {                                                                      \
            fail_msg("%s: got %s (%s), want %s", #expr, dcr_status_str(st__), dcr_error_detail(),  \
                     dcr_status_str(want));                                                        \
        }                                                                                          \
    } while (0)

/* Binds version 0 to baseline K^0, as the harness does after the dense load. */
static inline dcr_commit_record_t bootstrap(dcr_control_t *c)
{
    dcr_commit_record_t empty, rec = {0};
    assert_status(dcr_control_read(c, &empty), DCR_OK);
    baseline_of(rec.baseline, 0);
    rec.committed_ns = 1;
    assert_status(dcr_control_cas(c, &empty, &rec), DCR_OK);
    return rec;
}

static inline dcr_status_t prepare(dcr_control_t *c, const char *coordinator, uint64_t from,
                                   const uint32_t *receivers, size_t n, uint32_t deadline_ms,
                                   uint64_t *tau_p)
{
    dcr_control_prepare_t req = {coordinator, from, receivers, n, deadline_ms};
    return dcr_control_prepare(c, &req, tau_p);
}

#endif
