/* ctest-labels: unit
 *
 * The parties' status records in their one format (dcr/parties.h): every
 * kind survives a round trip bit for bit (doubles as their bits: -0.0 and a
 * NaN payload included); every truncation of a record, one byte too many, a
 * wrong magic, version, kind or phase, an overlong text, a NUL inside the
 * text, a coordinator's record with a text and an endpoint without an
 * address are refused with DCR_ECONTROL and leave the output untouched.
 * The format's lengths are counted here from its description (header 8,
 * fields, reason length 2, reason), not taken from the encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dcr/parties.h"

static dcr_party_report_t node_record(void)
{
    dcr_party_report_t r;
    memset(&r, 0, sizeof(r));
    r.kind = DCR_PARTY_NODE;
    r.u.node.node = 0xA1B2C3D4u;
    r.u.node.phase = DCR_NODE_RESTARTING;
    r.u.node.tau = 0x0102030405060708ull;
    r.u.node.version = UINT64_MAX;
    r.u.node.pid = -5;
    r.u.node.apply_end = -0.0;
    r.u.node.cross_bytes = INT64_MIN;
    uint64_t nan_bits = 0x7ff8000000001234ull;
    memcpy(&r.u.node.cpu_s, &nan_bits, 8);
    snprintf(r.u.node.why, sizeof(r.u.node.why), "receiver 3: digest mismatch");
    return r;
}

static dcr_party_report_t owners_record(void)
{
    dcr_party_report_t r;
    memset(&r, 0, sizeof(r));
    r.kind = DCR_PARTY_OWNERS;
    r.u.owners.phase = DCR_OWNERS_COMMITTED;
    r.u.owners.tau = 9;
    r.u.owners.t0 = 10.25;
    r.u.owners.construction_end = 10.5 + 1e-7;
    r.u.owners.t1 = 11.0;
    r.u.owners.cpu_s = 3.75 + 1e-9;
    dcr_construct_stats_t *k = &r.u.owners.construct;
    k->construction_s = 0.125;
    int64_t *f[] = {&k->compared_elements, &k->changed_elements,
                    &k->records,           &k->raw_changed_value_bytes,
                    &k->payload_bytes,     &k->body_raw_bytes,
                    &k->value_bytes,       &k->payloads,
                    &k->xor_items,         &k->overwrite_items,
                    &k->residual_tensors};
    for (int i = 0; i < 11; i++) *f[i] = (int64_t)(i + 1) * 123456789012345 * (i % 2 ? -1 : 1);
    memset(r.u.owners.why, 'w', sizeof(r.u.owners.why) - 1); /* the longest reason */
    return r;
}

static dcr_party_report_t coord_record(void)
{
    dcr_party_report_t r;
    memset(&r, 0, sizeof(r));
    r.kind = DCR_PARTY_COORD;
    r.u.coord.opened = 0xFEDCBA9876543210ull;
    return r;
}

static dcr_party_report_t endpoint_record(void)
{
    dcr_party_report_t r;
    memset(&r, 0, sizeof(r));
    r.kind = DCR_PARTY_ENDPOINT;
    r.u.endpoint.node = 7;
    snprintf(r.u.endpoint.addr, sizeof(r.u.endpoint.addr), "127.0.0.1:45678");
    return r;
}

/* Bytes of a record from the format's description. */
static size_t expected_len(const dcr_party_report_t *r)
{
    size_t fields = r->kind == DCR_PARTY_NODE       ? 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8
                    : r->kind == DCR_PARTY_OWNERS   ? 4 + 8 + 5 * 8 + 11 * 8
                    : r->kind == DCR_PARTY_ENDPOINT ? 4
                                                    : 8;
    const char *why = r->kind == DCR_PARTY_NODE       ? r->u.node.why
                      : r->kind == DCR_PARTY_OWNERS   ? r->u.owners.why
                      : r->kind == DCR_PARTY_ENDPOINT ? r->u.endpoint.addr
                                                      : "";
    return 8 + fields + 2 + strlen(why);
}

static void round_trip(const dcr_party_report_t *r)
{
    uint8_t buf[DCR_PARTY_REPORT_MAX];
    size_t len = 0;
    assert_int_equal(dcr_party_report_encode(r, buf, sizeof(buf), &len), DCR_OK);
    assert_int_equal(len, expected_len(r));
    dcr_party_report_t got;
    memset(&got, 0xEE, sizeof(got));
    assert_int_equal(dcr_party_report_decode(buf, len, &got), DCR_OK);
    /* The encoder's inputs were zeroed first, so the whole struct compares. */
    assert_memory_equal(&got, r, sizeof(got));
    /* A buffer one byte short is refused, not overrun. */
    assert_int_equal(dcr_party_report_encode(r, buf, len - 1, &len), DCR_EINVAL);
}

static void test_every_kind_round_trips(void **state)
{
    (void)state;
    dcr_party_report_t n = node_record(), o = owners_record(), c = coord_record(),
                       e = endpoint_record();
    round_trip(&n);
    round_trip(&o);
    round_trip(&c);
    round_trip(&e);
    memset(n.u.node.why, 0, sizeof(n.u.node.why)); /* an empty reason */
    round_trip(&n);
    assert_true(signbit(n.u.node.apply_end));
}

/* Decoding buf[0..len) fails with DCR_ECONTROL and leaves *out alone. */
static void refused(const uint8_t *buf, size_t len)
{
    dcr_party_report_t out, before;
    memset(&out, 0x5A, sizeof(out));
    before = out;
    assert_int_equal(dcr_party_report_decode(buf, len, &out), DCR_ECONTROL);
    assert_memory_equal(&out, &before, sizeof(out));
}

static void test_truncated_and_long_records_refused(void **state)
{
    (void)state;
    dcr_party_report_t recs[] = {node_record(), owners_record(), coord_record(), endpoint_record()};
    for (size_t k = 0; k < 4; k++) {
        uint8_t buf[DCR_PARTY_REPORT_MAX + 1];
        size_t len = 0;
        assert_int_equal(dcr_party_report_encode(&recs[k], buf, sizeof(buf), &len), DCR_OK);
        for (size_t cut = 0; cut < len; cut++) refused(buf, cut);
        buf[len] = 0;
        refused(buf, len + 1);
    }
}

static void test_wrong_header_and_fields_refused(void **state)
{
    (void)state;
    dcr_party_report_t r = node_record();
    uint8_t buf[DCR_PARTY_REPORT_MAX], bad[DCR_PARTY_REPORT_MAX];
    size_t len = 0;
    assert_int_equal(dcr_party_report_encode(&r, buf, sizeof(buf), &len), DCR_OK);
    /* Byte offsets from the format: magic 0..3, version 4..5, kind 6..7,
     * node phase 12..15, reason length right after the fields (8 + 52). */
    struct {
        size_t at;
        uint8_t value;
    } edits[] = {{0, 'X'}, {4, 2},  {4, 0},  {5, 1},  {6, 0},
                 {6, 4},   {12, 6}, {15, 1}, {60, 0}, {61, 1}};
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        memcpy(bad, buf, len);
        bad[edits[i].at] = edits[i].value;
        refused(bad, len);
    }
    memcpy(bad, buf, len);
    bad[len - 3] = '\0'; /* a NUL inside the reason */
    refused(bad, len);
    /* A coordinator's record with a text, an endpoint without one. */
    dcr_party_report_t c = coord_record(), e = endpoint_record();
    assert_int_equal(dcr_party_report_encode(&c, buf, sizeof(buf), &len), DCR_OK);
    memcpy(bad, buf, len);
    bad[len - 2] = 1; /* the text's length: 1, and one byte more */
    bad[len] = 'x';
    refused(bad, len + 1);
    assert_int_equal(dcr_party_report_encode(&e, buf, sizeof(buf), &len), DCR_OK);
    memcpy(bad, buf, 8 + 4);
    bad[12] = bad[13] = 0; /* the text's length: 0 */
    refused(bad, 8 + 4 + 2);
    e.u.endpoint.addr[0] = '\0';
    assert_int_equal(dcr_party_report_encode(&e, buf, sizeof(buf), &len), DCR_EINVAL);
    /* A kind the encoder does not know is refused there too. */
    r.kind = (dcr_party_kind_t)9;
    assert_int_equal(dcr_party_report_encode(&r, buf, sizeof(buf), &len), DCR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_round_trips),
        cmocka_unit_test(test_truncated_and_long_records_refused),
        cmocka_unit_test(test_wrong_header_and_fields_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
