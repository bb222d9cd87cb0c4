/* The worker of dcr bench --ab-binary (dcr bench ... --ab-worker FD): the
 * bench set up in this process, one timed refit per request of the parent
 * (bench_ab.h, the messages in bench_ab_wire.h). Between requests it blocks
 * reading its socket, so that it takes nothing from the parent's refits. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "workloads/harness/bench_ab.h"
#include "workloads/harness/bench_ab_wire.h"
#include "workloads/harness/interrupt.h"
#include "workloads/harness/results_json.h"

typedef struct worker {
    const dcr_bench_config_t *cfg;
    int fd;
    dcr__ab_reader_t *in;
    dcr_bench_session_t *session;
    dcr_bench_result_t res;
} worker_t;

/* The parent's next message: {"refit": k} for the refit expected next
 * (*finish false), or {"finish": true} once every refit ran. */
static dcr_status_t next_request(worker_t *w, int expected, bool *finish_p)
{
    json_t *msg = NULL;
    dcr_status_t st = dcr__ab_read_msg(w->in, -1, dcr_interrupt_fd(), &msg);
    if (st == DCR_EIO) return dcr_error_set(DCR_EIO, "--ab-worker: the A/B run went away");
    DCR_CHECK(st);
    const json_t *k = json_object_get(msg, "refit");
    bool finish = json_is_true(json_object_get(msg, "finish"));
    bool ok = json_object_size(msg) == 1 &&
              (finish ? expected == w->cfg->refits
                      : json_is_integer(k) && json_integer_value(k) == expected &&
                            expected < w->cfg->refits);
    json_decref(msg);
    if (!ok)
        return dcr_error_set(DCR_EPARSE, "--ab-worker: unexpected request (expected %s %d)",
                             expected < w->cfg->refits ? "refit" : "finish", expected);
    *finish_p = finish;
    return DCR_OK;
}

/* The configuration announced with where this side's run directory is,
 * now that the session has made it. */
static dcr_status_t say_ready(worker_t *w, const json_t *config)
{
    json_t *mine = json_deep_copy(config);
    if (!mine) return dcr_error_set(DCR_ENOMEM, "--ab-worker: configuration");
    dcr_bench_config_set_run_directory(mine, dcr_bench_session_workdir_in_memory(w->session));
    json_t *hello = json_pack("{s:i,s:i,s:i,s:o}", "dcr_ab_worker", DCR__AB_PROTOCOL, "warmup",
                              w->cfg->warmup, "refits", w->cfg->refits, "config", mine);
    return dcr__ab_send(w->fd, hello);
}

static dcr_status_t serve(worker_t *w, const json_t *config)
{
    for (int k = 0; k < w->cfg->warmup; k++) {
        dcr_bench_refit_t warm;
        DCR_CHECK(dcr_bench_session_refit(w->session, k, false, &warm));
    }
    DCR_CHECK(say_ready(w, config));
    for (int k = 0;; k++) {
        bool finish = false;
        DCR_CHECK(next_request(w, k, &finish));
        if (finish) break;
        dcr_bench_refit_t *row = &w->res.refits[k];
        DCR_CHECK(dcr_bench_session_refit(w->session, w->cfg->warmup + k, true, row));
        w->res.nrefits++;
        json_t *reply = json_pack("{s:i,s:o}", "refit", k, "row", dcr__ab_row_json(row));
        DCR_CHECK(dcr__ab_send(w->fd, reply));
    }
    DCR_CHECK(dcr_bench_session_finish(w->session, &w->res));
    return dcr__ab_send(w->fd, json_pack("{s:o}", "summary", dcr__ab_summary_json(&w->res)));
}

dcr_status_t dcr_bench_ab_worker_run(const dcr_bench_config_t *cfg, int fd, const json_t *config)
{
    DCR_CHECK(dcr__ab_config_check(config));
    worker_t w = {.cfg = cfg, .fd = fd};
    w.in = calloc(1, sizeof(*w.in));
    w.res.refits = calloc((size_t)(cfg->refits > 0 ? cfg->refits : 1), sizeof(dcr_bench_refit_t));
    dcr_status_t st = DCR_OK;
    if (!w.in || !w.res.refits) st = dcr_error_set(DCR_ENOMEM, "--ab-worker");
    if (st == DCR_OK) {
        dcr__ab_reader_init(w.in, fd);
        DCR_LOG_INFO("bench --ab-worker: setting up side B");
        st = dcr_bench_session_create(cfg, &w.session);
    }
    if (st == DCR_OK) st = serve(&w, config);
    dcr_bench_session_destroy(w.session);
    dcr_bench_result_free(&w.res);
    free(w.in);
    return st;
}
