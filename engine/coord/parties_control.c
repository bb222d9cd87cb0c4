/* The parties' status records in the control plane (dcr/parties.h): each
 * record, in its one format, under its reserved id of the prewarm-report
 * slot (parties-internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/parties.h"
#include "parties-internal.h"

/* Receivers a record's write acknowledges for attempt tau (n of them). */
typedef struct acks {
    uint64_t tau;
    const uint32_t *receivers;
    size_t n;
} acks_t;

/* Writes r under id; with acks (not NULL), in the write that records them
 * (dcr_control_ack_report). */
static dcr_status_t put_acked(dcr_control_t *control, uint32_t id, const dcr_party_report_t *r,
                              const acks_t *acks)
{
    uint8_t buf[DCR_PARTY_REPORT_MAX];
    size_t len = 0;
    DCR_CHECK(dcr_party_report_encode(r, buf, sizeof(buf), &len));
    if (acks == NULL) return dcr_control_report_put(control, id, buf, len);
    return dcr_control_ack_report(control, acks->tau, acks->receivers, acks->n, id, buf, len);
}

static dcr_status_t put(dcr_control_t *control, uint32_t id, const dcr_party_report_t *r)
{
    return put_acked(control, id, r, NULL);
}

/* Reads the record under id, which must be of `kind`; who names the party
 * in the error. */
static dcr_status_t get(dcr_control_t *control, uint32_t id, dcr_party_kind_t kind, const char *who,
                        dcr_party_report_t *out_p)
{
    void *data = NULL;
    size_t len = 0;
    DCR_CHECK(dcr_control_report_get(control, id, &data, &len));
    dcr_party_report_t r;
    dcr_status_t st = dcr_party_report_decode(data, len, &r);
    free(data);
    if (st == DCR_OK && r.kind != kind)
        st = dcr_error_set(DCR_ECONTROL, "party report refused: a %s record where the %s's belongs",
                           dcr_party_kind_name(r.kind), dcr_party_kind_name(kind));
    if (st != DCR_OK) {
        dcr_error_prefix("%s: ", who);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_node_report_put(dcr_control_t *control, const dcr_node_report_t *r)
{
    dcr_party_report_t rec = {.kind = DCR_PARTY_NODE, .u.node = *r};
    return put(control, DCR_NODE_REPORT_ID(r->node), &rec);
}

dcr_status_t dcr_node_report_put_acked(dcr_control_t *control, const dcr_node_report_t *r,
                                       const uint32_t *receivers, size_t n)
{
    dcr_party_report_t rec = {.kind = DCR_PARTY_NODE, .u.node = *r};
    acks_t acks = {r->tau, receivers, n};
    return put_acked(control, DCR_NODE_REPORT_ID(r->node), &rec, &acks);
}

dcr_status_t dcr_node_report_get(dcr_control_t *control, int node, dcr_node_report_t *out_p)
{
    char who[48];
    snprintf(who, sizeof(who), "rollout node %d", node);
    dcr_party_report_t r;
    DCR_CHECK(get(control, DCR_NODE_REPORT_ID(node), DCR_PARTY_NODE, who, &r));
    if (r.u.node.node != (uint32_t)node)
        return dcr_error_set(DCR_ECONTROL, "%s: its record names node %u", who, r.u.node.node);
    *out_p = r.u.node;
    return DCR_OK;
}

dcr_status_t dcr_owners_report_put(dcr_control_t *control, const dcr_owners_report_t *r)
{
    dcr_party_report_t rec = {.kind = DCR_PARTY_OWNERS, .u.owners = *r};
    return put(control, DCR_OWNERS_REPORT_ID, &rec);
}

dcr_status_t dcr_owners_report_get(dcr_control_t *control, dcr_owners_report_t *out_p)
{
    dcr_party_report_t r;
    DCR_CHECK(get(control, DCR_OWNERS_REPORT_ID, DCR_PARTY_OWNERS, "the owners", &r));
    *out_p = r.u.owners;
    return DCR_OK;
}

dcr_status_t dcr_coord_report_opened(dcr_control_t *control, uint64_t tau)
{
    dcr_party_report_t rec = {.kind = DCR_PARTY_COORD, .u.coord = {tau}};
    return put(control, DCR_COORD_REPORT_ID, &rec);
}

dcr_status_t dcr_coord_opened(dcr_control_t *control, uint64_t *tau_p)
{
    dcr_party_report_t r;
    DCR_CHECK(get(control, DCR_COORD_REPORT_ID, DCR_PARTY_COORD, "the coordinator", &r));
    *tau_p = r.u.coord.opened;
    return DCR_OK;
}

dcr_status_t dcr_node_endpoint_put(dcr_control_t *control, int node, const char *addr)
{
    size_t len = strlen(addr);
    if (len == 0 || len > sizeof(((dcr_node_endpoint_t *)0)->addr) - 1)
        return dcr_error_set(DCR_EINVAL, "rollout node %d: an address of %zu bytes to publish",
                             node, len);
    dcr_party_report_t rec = {.kind = DCR_PARTY_ENDPOINT, .u.endpoint.node = (uint32_t)node};
    memcpy(rec.u.endpoint.addr, addr, len + 1);
    return put(control, DCR_ENDPOINT_REPORT_ID(node), &rec);
}

dcr_status_t dcr_node_endpoint_get(dcr_control_t *control, int node, char *addr, size_t cap)
{
    char who[48];
    snprintf(who, sizeof(who), "rollout node %d's endpoint", node);
    dcr_party_report_t r;
    DCR_CHECK(get(control, DCR_ENDPOINT_REPORT_ID(node), DCR_PARTY_ENDPOINT, who, &r));
    size_t len = strlen(r.u.endpoint.addr);
    if (r.u.endpoint.node != (uint32_t)node || len >= cap)
        return dcr_error_set(DCR_ECONTROL, "%s: an address of %zu bytes for node %u", who, len,
                             r.u.endpoint.node);
    memcpy(addr, r.u.endpoint.addr, len + 1);
    return DCR_OK;
}

void dcr_node_totals_update(dcr_node_totals_t *t, const dcr_node_report_t *r)
{
    /* Written on a dead process's behalf: no counters in it. */
    if (r->phase == DCR_NODE_GONE || r->phase == DCR_NODE_RESTARTING) return;
    if (r->pid != t->pid) {
        t->cross_base += t->cross_last;
        t->cpu_base += t->cpu_last;
        t->pid = r->pid;
    }
    t->cross_last = r->cross_bytes;
    t->cpu_last = r->cpu_s;
}
