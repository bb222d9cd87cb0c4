/* The parties' status records in their one binary format (dcr/parties.h):
 *
 *   magic "DCRP" (u32) | version (u16) | kind (u16) | the kind's fields | text length (u16) |
 *   text bytes
 *
 * Every field is little-endian; doubles travel as their IEEE-754 bits, so
 * a time survives exactly. The text is a node's or the owners' reason, or
 * an endpoint's address. A record's length follows from its kind and its
 * text's length, so a reader can refuse a short or a long one before it
 * reads a field. */
#include "dcr/parties.h"

#include <stdio.h>
#include <string.h>

#include "core/endian-internal.h"

#define REPORT_MAGIC   0x50524344u /* "DCRP" */
#define HEADER_BYTES   8
#define WHY_MAX        255
#define NODE_BYTES     (4 + 4 + 8 + 8 + 4 + 8 + 8 + 8)
#define OWNERS_BYTES   (4 + 8 + 4 * 8 + 8 + 11 * 8)
#define COORD_BYTES    8
#define ENDPOINT_BYTES 4

_Static_assert(HEADER_BYTES + OWNERS_BYTES + 2 + WHY_MAX <= DCR_PARTY_REPORT_MAX,
               "DCR_PARTY_REPORT_MAX holds the longest record");

const char *dcr_party_kind_name(dcr_party_kind_t kind)
{
    switch (kind) {
    case DCR_PARTY_NODE:
        return "node";
    case DCR_PARTY_OWNERS:
        return "owners";
    case DCR_PARTY_COORD:
        return "coordinator";
    case DCR_PARTY_ENDPOINT:
        return "endpoint";
    }
    return "?";
}

/* Bytes of a kind's fixed fields; 0 for an unknown kind. */
static size_t fixed_bytes(uint32_t kind)
{
    switch (kind) {
    case DCR_PARTY_NODE:
        return NODE_BYTES;
    case DCR_PARTY_OWNERS:
        return OWNERS_BYTES;
    case DCR_PARTY_COORD:
        return COORD_BYTES;
    case DCR_PARTY_ENDPOINT:
        return ENDPOINT_BYTES;
    }
    return 0;
}

static bool phase_known(const dcr_party_report_t *r)
{
    switch (r->kind) {
    case DCR_PARTY_NODE:
        return (unsigned)r->u.node.phase <= DCR_NODE_RESTARTING;
    case DCR_PARTY_OWNERS:
        return r->u.owners.phase >= DCR_OWNERS_SENT && r->u.owners.phase <= DCR_OWNERS_READY;
    case DCR_PARTY_COORD:
    case DCR_PARTY_ENDPOINT:
        return true;
    }
    return false;
}

static uint64_t bits_of(double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    return v;
}

static double double_of(uint64_t v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* The construction figures in declaration order (construction_s first, as
 * bits), so that writer and reader walk one list. */
static int64_t *stats_field(dcr_construct_stats_t *k, int i)
{
    int64_t *const f[] = {&k->compared_elements, &k->changed_elements,
                          &k->records,           &k->raw_changed_value_bytes,
                          &k->payload_bytes,     &k->body_raw_bytes,
                          &k->value_bytes,       &k->payloads,
                          &k->xor_items,         &k->overwrite_items,
                          &k->residual_tensors};
    return f[i];
}

static uint8_t *put_node(uint8_t *p, const dcr_node_report_t *n)
{
    p = dcr__put_le(p, n->node, 4);
    p = dcr__put_le(p, (uint32_t)n->phase, 4);
    p = dcr__put_le(p, n->tau, 8);
    p = dcr__put_le(p, n->version, 8);
    p = dcr__put_le(p, (uint32_t)n->pid, 4);
    p = dcr__put_le(p, bits_of(n->apply_end), 8);
    p = dcr__put_le(p, (uint64_t)n->cross_bytes, 8);
    return dcr__put_le(p, bits_of(n->cpu_s), 8);
}

static const uint8_t *get_node(const uint8_t *p, dcr_node_report_t *n)
{
    uint64_t v;
    p = dcr__get_le(p, &v, 4);
    n->node = (uint32_t)v;
    p = dcr__get_le(p, &v, 4);
    n->phase = (dcr_node_phase_t)v;
    p = dcr__get_le(p, &n->tau, 8);
    p = dcr__get_le(p, &n->version, 8);
    p = dcr__get_le(p, &v, 4);
    n->pid = (int32_t)(uint32_t)v;
    p = dcr__get_le(p, &v, 8);
    n->apply_end = double_of(v);
    p = dcr__get_le(p, &v, 8);
    n->cross_bytes = (int64_t)v;
    p = dcr__get_le(p, &v, 8);
    n->cpu_s = double_of(v);
    return p;
}

static uint8_t *put_owners(uint8_t *p, const dcr_owners_report_t *o)
{
    dcr_construct_stats_t k = o->construct;
    p = dcr__put_le(p, (uint32_t)o->phase, 4);
    p = dcr__put_le(p, o->tau, 8);
    p = dcr__put_le(p, bits_of(o->t0), 8);
    p = dcr__put_le(p, bits_of(o->construction_end), 8);
    p = dcr__put_le(p, bits_of(o->t1), 8);
    p = dcr__put_le(p, bits_of(o->cpu_s), 8);
    p = dcr__put_le(p, bits_of(k.construction_s), 8);
    for (int i = 0; i < 11; i++) p = dcr__put_le(p, (uint64_t)*stats_field(&k, i), 8);
    return p;
}

static const uint8_t *get_owners(const uint8_t *p, dcr_owners_report_t *o)
{
    uint64_t v;
    p = dcr__get_le(p, &v, 4);
    o->phase = (dcr_owners_phase_t)v;
    p = dcr__get_le(p, &o->tau, 8);
    double *const times[] = {&o->t0, &o->construction_end, &o->t1, &o->cpu_s,
                             &o->construct.construction_s};
    for (int i = 0; i < 5; i++) {
        p = dcr__get_le(p, &v, 8);
        *times[i] = double_of(v);
    }
    for (int i = 0; i < 11; i++) {
        p = dcr__get_le(p, &v, 8);
        *stats_field(&o->construct, i) = (int64_t)v;
    }
    return p;
}

/* The record's text field (WHY_MAX + 1 bytes), NULL for a kind with none. */
static char *text_of(dcr_party_report_t *r)
{
    switch (r->kind) {
    case DCR_PARTY_NODE:
        return r->u.node.why;
    case DCR_PARTY_OWNERS:
        return r->u.owners.why;
    case DCR_PARTY_ENDPOINT:
        return r->u.endpoint.addr;
    default:
        return NULL;
    }
}

/* Whether a text of len bytes suits the kind: an address is never empty,
 * a coordinator's record has none. */
static bool text_fits(dcr_party_kind_t kind, size_t len)
{
    if (kind == DCR_PARTY_ENDPOINT) return len > 0;
    if (kind == DCR_PARTY_COORD) return len == 0;
    return true;
}

dcr_status_t dcr_party_report_encode(const dcr_party_report_t *r, uint8_t *buf, size_t cap,
                                     size_t *len_p)
{
    size_t fixed = fixed_bytes((uint32_t)r->kind);
    if (fixed == 0 || !phase_known(r))
        return dcr_error_set(DCR_EINVAL, "party report: kind %d or its phase is unknown",
                             (int)r->kind);
    const char *why = text_of((dcr_party_report_t *)r);
    size_t why_len = why ? strnlen(why, WHY_MAX) : 0;
    if (!text_fits(r->kind, why_len))
        return dcr_error_set(DCR_EINVAL, "party report: an endpoint without an address");
    size_t len = HEADER_BYTES + fixed + 2 + why_len;
    if (cap < len)
        return dcr_error_set(DCR_EINVAL, "party report: %zu bytes do not hold a %zu-byte record",
                             cap, len);
    uint8_t *p = dcr__put_le(buf, REPORT_MAGIC, 4);
    p = dcr__put_le(p, DCR_PARTY_REPORT_VERSION, 2);
    p = dcr__put_le(p, (uint32_t)r->kind, 2);
    if (r->kind == DCR_PARTY_NODE)
        p = put_node(p, &r->u.node);
    else if (r->kind == DCR_PARTY_OWNERS)
        p = put_owners(p, &r->u.owners);
    else if (r->kind == DCR_PARTY_ENDPOINT)
        p = dcr__put_le(p, r->u.endpoint.node, 4);
    else
        p = dcr__put_le(p, r->u.coord.opened, 8);
    p = dcr__put_le(p, why_len, 2);
    if (why_len > 0) memcpy(p, why, why_len);
    *len_p = len;
    return DCR_OK;
}

/* The one error of a record that does not decode. */
#define REFUSE(...) dcr_error_set(DCR_ECONTROL, "party report refused: " __VA_ARGS__)

dcr_status_t dcr_party_report_decode(const void *buf, size_t len, dcr_party_report_t *out_p)
{
    const uint8_t *p = buf;
    if (len < HEADER_BYTES)
        return REFUSE("%zu bytes, shorter than its %d-byte header", len, HEADER_BYTES);
    uint64_t magic, version, kind, why_len;
    p = dcr__get_le(p, &magic, 4);
    p = dcr__get_le(p, &version, 2);
    p = dcr__get_le(p, &kind, 2);
    if (magic != REPORT_MAGIC)
        return REFUSE("magic %#llx, expected \"DCRP\"", (unsigned long long)magic);
    if (version != DCR_PARTY_REPORT_VERSION)
        return REFUSE("format version %llu, this reader knows %d", (unsigned long long)version,
                      DCR_PARTY_REPORT_VERSION);
    size_t fixed = fixed_bytes((uint32_t)kind);
    if (fixed == 0) return REFUSE("kind %llu is unknown", (unsigned long long)kind);
    if (len < HEADER_BYTES + fixed + 2)
        return REFUSE("a %s record of %zu bytes, short of its %zu fixed bytes",
                      dcr_party_kind_name((dcr_party_kind_t)kind), len, HEADER_BYTES + fixed + 2);
    dcr__get_le(p + fixed, &why_len, 2);
    if (why_len > WHY_MAX)
        return REFUSE("a text of %llu bytes (at most %d)", (unsigned long long)why_len, WHY_MAX);
    size_t want = HEADER_BYTES + fixed + 2 + (size_t)why_len;
    if (len != want)
        return REFUSE("a %s record of %zu bytes, %s than the %zu its text's length gives",
                      dcr_party_kind_name((dcr_party_kind_t)kind), len,
                      len < want ? "shorter" : "longer", want);
    const char *why = (const char *)p + fixed + 2;
    if (memchr(why, '\0', (size_t)why_len)) return REFUSE("a NUL byte inside the text");
    if (!text_fits((dcr_party_kind_t)kind, (size_t)why_len))
        return REFUSE("a %s record with a text of %llu bytes",
                      dcr_party_kind_name((dcr_party_kind_t)kind), (unsigned long long)why_len);
    dcr_party_report_t r;
    memset(&r, 0, sizeof(r));
    r.kind = (dcr_party_kind_t)kind;
    uint64_t v;
    if (r.kind == DCR_PARTY_NODE) {
        get_node(p, &r.u.node);
    } else if (r.kind == DCR_PARTY_OWNERS) {
        get_owners(p, &r.u.owners);
    } else if (r.kind == DCR_PARTY_ENDPOINT) {
        dcr__get_le(p, &v, 4);
        r.u.endpoint.node = (uint32_t)v;
    } else {
        dcr__get_le(p, &r.u.coord.opened, 8);
    }
    if (!phase_known(&r))
        return REFUSE("a %s record with an unknown phase", dcr_party_kind_name(r.kind));
    char *dst = text_of(&r);
    if (dst && why_len > 0) memcpy(dst, why, (size_t)why_len); /* zeroed above: terminated */
    *out_p = r;
    return DCR_OK;
}
