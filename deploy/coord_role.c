/* The coordinator as a process of its own (roles.h): it holds no
 * constructor and no receiver, only the control plane and the run's
 * clearing transport handle, and runs one transition per request on its
 * standard input, answering each with one line of figures. A new process
 * after a crash resumes the transition its predecessor left (the commit
 * record and the latest attempt tell where, dcr_coord_resume). */
#define _XOPEN_SOURCE 700
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/coord.h"
#include "dcr/log.h"
#include "dcr/parties.h"
#include "dcr/trace.h"
#include "deploy/role_memory.h"
#include "deploy/roles.h"

/* Doubles as hex floats (exact), integers in decimal, in this order. */
#define RESULT_PUT                                                                                 \
    "ok %" PRIu64 " %" PRIu64 " %d %a %a %a %a %a %a %a %a %" PRId64 " %" PRId64 " %" PRIu64       \
    " %" PRIu64 " %d %a %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64      \
    " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n"
#define RESULT_GET                                                                                 \
    "ok %" SCNu64 " %" SCNu64 " %d %la %la %la %la %la %la %la %la %" SCNd64 " %" SCNd64           \
    " %" SCNu64 " %" SCNu64 " %d %la %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64     \
    " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64

int dcr_role_refit_result_format(const dcr_refit_result_t *r, char *out, size_t cap)
{
    const dcr_construct_stats_t *k = &r->construct;
    return snprintf(out, cap, RESULT_PUT, r->version, r->tau, r->attempts, r->t0, r->t1,
                    r->latency_s, r->construction_end, r->delivery_end, r->apply_end, r->commit_end,
                    r->finalization_s, r->payload_bytes, r->cross_bytes, r->duplicates, r->stale,
                    r->receivers_died, k->construction_s, k->compared_elements, k->changed_elements,
                    k->records, k->raw_changed_value_bytes, k->payload_bytes, k->body_raw_bytes,
                    k->value_bytes, k->payloads, k->xor_items, k->overwrite_items,
                    k->residual_tensors);
}

dcr_status_t dcr_role_refit_result_parse(const char *line, dcr_refit_result_t *out_p)
{
    if (!strncmp(line, "error ", 6)) {
        int code = 0, used = 0;
        if (sscanf(line + 6, "%d %n", &code, &used) < 1) code = DCR_EIO;
        char why[512];
        snprintf(why, sizeof(why), "%s", line + 6 + used);
        why[strcspn(why, "\n")] = '\0';
        return dcr_error_set(code ? (dcr_status_t)code : DCR_EIO, "the coordinator process: %s",
                             why);
    }
    dcr_refit_result_t r;
    memset(&r, 0, sizeof(r));
    dcr_construct_stats_t *k = &r.construct;
    int n =
        sscanf(line, RESULT_GET, &r.version, &r.tau, &r.attempts, &r.t0, &r.t1, &r.latency_s,
               &r.construction_end, &r.delivery_end, &r.apply_end, &r.commit_end, &r.finalization_s,
               &r.payload_bytes, &r.cross_bytes, &r.duplicates, &r.stale, &r.receivers_died,
               &k->construction_s, &k->compared_elements, &k->changed_elements, &k->records,
               &k->raw_changed_value_bytes, &k->payload_bytes, &k->body_raw_bytes, &k->value_bytes,
               &k->payloads, &k->xor_items, &k->overwrite_items, &k->residual_tensors);
    if (n != 28)
        return dcr_error_set(DCR_EIO,
                             "the coordinator process answered '%.80s'; expected 28 "
                             "fields after 'ok'",
                             line);
    *out_p = r;
    return DCR_OK;
}

/* Rollout nodes write their intervals of an attempt after they report it
 * DONE (node_role.c), off the window that ends with the commit, so a file
 * may still be on its way when the transition is through. The launcher
 * imports the files once answered: first every node the attempt required
 * gets up to NODE_TRACE_WAIT_MS for its file, which is there at the first
 * look unless the host is loaded. A node that failed, died or restarted
 * writes none: its report tells, and the wait skips it. */
#define NODE_TRACE_WAIT_MS 1000

static bool node_trace_due(dcr_control_t *control, const char *workdir, int node, uint64_t tau)
{
    char path[4300];
    dcr_rundir_trace_path(workdir, node, tau, path, sizeof(path));
    if (access(path, F_OK) == 0) return false;
    dcr_node_report_t r;
    if (dcr_node_report_get(control, node, &r) != DCR_OK) return false;
    /* DONE with tau, or READY after its commit. */
    return (r.phase == DCR_NODE_DONE && r.tau == tau) || r.phase == DCR_NODE_READY;
}

static void await_node_traces(dcr_control_t *control, const char *workdir, uint64_t tau,
                              int per_node, int receivers)
{
    uint32_t *required = calloc((size_t)receivers, sizeof(*required));
    size_t n = 0;
    if (required && dcr_control_required(control, tau, required, (size_t)receivers, &n) == DCR_OK) {
        double t0 = dcr_clock_s();
        for (size_t i = 0; i < n && i < (size_t)receivers; i++) {
            int node = (int)required[i] / per_node;
            if (i > 0 && (int)required[i - 1] / per_node == node) continue;
            while (node_trace_due(control, workdir, node, tau) &&
                   (dcr_clock_s() - t0) * 1000.0 < NODE_TRACE_WAIT_MS)
                dcr_clock_nap_ns(500000L);
        }
    }
    free(required);
}

/* Answers one request on out: a result line, or "error <status> <line>". */
static void answer(FILE *out, dcr_status_t st, const dcr_refit_result_t *r)
{
    char line[2048];
    if (st == DCR_OK)
        dcr_role_refit_result_format(r, line, sizeof(line));
    else {
        snprintf(line, sizeof(line), "error %d %s\n", (int)st, dcr_error_line(st));
        for (char *q = line + 6; *q && q[1]; q++)
            if (*q == '\n') *q = ' ';
    }
    fputs(line, out);
    fflush(out);
}

dcr_status_t dcr_role_coordinator_run(const dcr_role_coord_config_t *cfg, FILE *in, FILE *out)
{
    dcr_scenario_t *sc = NULL;
    dcr_control_t *control = NULL;
    dcr_transport_t *transport = NULL;
    dcr_coord_t *coord = NULL;
    dcr_scenario_spec_t spec = cfg->run->scenario;
    spec.align_extra = cfg->run->serve.tp;
    dcr_serve_config_t serve = cfg->run->serve; /* validated (defaults filled) */
    /* Its intervals (commit, window) join the launcher's trace: always
     * recorded, as node and owner processes do; a few per transition. */
    dcr_trace_enable(true);
    dcr_status_t st = dcr_scenario_create(&spec, &sc);
    if (st == DCR_OK) st = dcr_serve_config_validate(&sc->model, &serve);
    if (st == DCR_OK) st = dcr_role_control_open(cfg->run, cfg->workdir, &control);
    /* The run's clearing handle: every other process's handle joins. */
    dcr_role_relay_t relay = {0}; /* --transport relay: a handle that holds no part of the tree */
    dcr_role_handle_t as = {.send_only = true, .relay = &relay};
    if (st == DCR_OK)
        st = dcr_role_transport_open_as(cfg->run, cfg->workdir, sc->train.nodes, sc->layout->world,
                                        serve.nodes, &as, &transport);
    char id[64];
    snprintf(id, sizeof(id), "coord-%d-%llu", (int)getpid(), (unsigned long long)dcr_clock_ns());
    dcr_coord_config_t cc = dcr_coord_config_default(id, serve.gpus_per_node);
    cc.nodes = cc.owners = "remote";
    int nrecv = dcr_serve_receivers(&serve);
    dcr_coord_parties_t parties = {
        NULL, sc ? sc->layout->world : 0, transport, control, NULL, nrecv, NULL, NULL};
    if (st == DCR_OK) st = dcr_coord_create(&cc, &parties, &coord);
    if (st == DCR_OK)
        DCR_LOG_INFO("coordinator %s: version %llu committed", id,
                     (unsigned long long)dcr_coord_version(coord));
    char line[256];
    while (st == DCR_OK && fgets(line, sizeof(line), in)) {
        dcr_refit_result_t r;
        memset(&r, 0, sizeof(r));
        unsigned long long from = 0;
        dcr_status_t rst;
        /* This transition's intervals only (the recorder is per process). */
        dcr_trace_reset();
        if (!strcmp(line, "refit\n"))
            rst = dcr_coord_refit(coord, NULL, &r);
        else if (sscanf(line, "resume %llu", &from) == 1)
            rst = dcr_coord_resume(coord, NULL, from, &r);
        else
            rst = dcr_error_set(DCR_EINVAL, "unknown request '%.40s'", line);
        /* Written before the answer: the launcher imports it once answered,
         * under the attempt that committed (roles.h). */
        if (rst == DCR_OK) {
            await_node_traces(control, cfg->workdir, r.tau, serve.gpus_per_node, nrecv);
            rst = dcr_role_trace_write(cfg->workdir, DCR_RUNDIR_TRACE_COORD, r.tau);
        }
        answer(out, rst, &r);
    }
    dcr_role_log_requests("coordinator", 0, coord ? dcr_coord_version(coord) : 0);
    dcr_coord_destroy(coord);
    dcr_transport_destroy(transport);
    dcr_role_relay_close(&relay);
    dcr_control_destroy(control);
    dcr_scenario_destroy(sc);
    return st;
}
