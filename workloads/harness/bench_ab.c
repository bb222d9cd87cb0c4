/* The ABBA schedule over two sides, and the side set up in this process
 * (bench_ab.h). */
#include "workloads/harness/bench_ab.h"

#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"

/* ---- the wrappers -------------------------------------------------------- */

dcr_status_t dcr_bench_side_refit(dcr_bench_side_t *s, int step, bool timed, dcr_bench_refit_t *out)
{
    memset(out, 0, sizeof(*out));
    return s->ops->refit(s, step, timed, out);
}

dcr_status_t dcr_bench_side_ready(dcr_bench_side_t *s)
{
    return s->ops->ready(s);
}

dcr_status_t dcr_bench_side_finish(dcr_bench_side_t *s, dcr_bench_result_t *res)
{
    return s->ops->finish(s, res);
}

void dcr_bench_side_destroy(dcr_bench_side_t *s)
{
    if (s) s->ops->destroy(s);
}

/* ---- a side in this process ---------------------------------------------- */

typedef struct local_side {
    dcr_bench_side_t base;
    dcr_bench_session_t *session;
} local_side_t;

static dcr_status_t local_refit(dcr_bench_side_t *s, int step, bool timed, dcr_bench_refit_t *out)
{
    return dcr_bench_session_refit(((local_side_t *)s)->session, step, timed, out);
}

static dcr_status_t local_ready(dcr_bench_side_t *s)
{
    (void)s; /* set up when it was made */
    return DCR_OK;
}

static dcr_status_t local_finish(dcr_bench_side_t *s, dcr_bench_result_t *res)
{
    return dcr_bench_session_finish(((local_side_t *)s)->session, res);
}

static void local_destroy(dcr_bench_side_t *s)
{
    dcr_bench_session_destroy(((local_side_t *)s)->session);
    free(s);
}

static const dcr_bench_side_ops_t local_ops = {{DCR_BENCH_SIDE_OPS_VERSION, "local", NULL},
                                               local_refit,
                                               local_ready,
                                               local_finish,
                                               local_destroy};

dcr_status_t dcr_bench_side_local(const dcr_bench_config_t *cfg, dcr_bench_side_t **out_p)
{
    local_side_t *s = calloc(1, sizeof(*s));
    if (!s) return dcr_error_set(DCR_ENOMEM, "bench side");
    s->base.ops = &local_ops;
    dcr_status_t st = dcr_bench_session_create(cfg, &s->session);
    if (st != DCR_OK) {
        free(s);
        return st;
    }
    *out_p = &s->base;
    return DCR_OK;
}

/* ---- the schedule -------------------------------------------------------- */

/* In pair k (the k-th refit of each side) A goes first when k is even and B
 * when k is odd, so blocks of two pairs read A B B A: a load that drifts
 * linearly over a block weighs on both sides alike. */
static int ab_first(int k)
{
    return k % 2;
}

static dcr_status_t alternate(dcr_bench_side_t *const side[2], int warmup, int refits,
                              dcr_bench_result_t res[2])
{
    for (int k = 0; k < warmup; k++) {
        for (int t = 0; t < 2; t++) {
            dcr_bench_refit_t warm;
            DCR_CHECK(dcr_bench_side_refit(side[t ^ ab_first(k)], k, false, &warm));
        }
    }
    /* Neither side's first timed refit may overlap the other's setup. */
    for (int s = 0; s < 2; s++) DCR_CHECK(dcr_bench_side_ready(side[s]));
    for (int k = 0; k < refits; k++) {
        for (int t = 0; t < 2; t++) {
            int s = t ^ ab_first(k);
            dcr_bench_refit_t *out = &res[s].refits[k];
            DCR_CHECK(dcr_bench_side_refit(side[s], warmup + k, true, out));
            out->block = k;
            res[s].nrefits++;
        }
    }
    for (int s = 0; s < 2; s++) DCR_CHECK(dcr_bench_side_finish(side[s], &res[s]));
    return DCR_OK;
}

dcr_status_t dcr_bench_ab_alternate(dcr_bench_side_t *const side[2], int warmup, int refits,
                                    dcr_bench_result_t out[2])
{
    if (warmup < 0 || refits < 1)
        return dcr_error_set(DCR_EINVAL, "an A/B run needs >= 1 timed refit");
    dcr_bench_result_t res[2];
    memset(res, 0, sizeof(res));
    dcr_status_t st = DCR_OK;
    for (int s = 0; s < 2; s++) {
        res[s].ab_side = (char)('A' + s);
        res[s].refits = calloc((size_t)refits, sizeof(dcr_bench_refit_t));
        if (!res[s].refits && st == DCR_OK) st = dcr_error_set(DCR_ENOMEM, "refit table");
    }
    if (st == DCR_OK) st = alternate(side, warmup, refits, res);
    if (st != DCR_OK) {
        dcr_bench_result_free(&res[0]);
        dcr_bench_result_free(&res[1]);
        return st;
    }
    out[0] = res[0];
    out[1] = res[1];
    return DCR_OK;
}
