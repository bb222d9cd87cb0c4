/* The simulated workload: owners' steps and payloads from the real inventory
 * and training layout, packed by the engine's chunk and bucket rules. */
#include "sim/workload.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/codec.h"
#include "dcr/hash.h"
#include "dcr/receiver.h"
#include "sim/sim-internal.h"

/* ---- containers ------------------------------------------------------------ */

dcr_status_t dcr_sim_owner_push(dcr_sim_owner_t *o, const dcr_sim_step_t *s)
{
    if (o->nsteps == o->cap) {
        int cap = o->cap ? o->cap * 2 : 64;
        dcr_sim_step_t *p = realloc(o->steps, (size_t)cap * sizeof(*p));
        if (!p) return dcr_error_set(DCR_ENOMEM, "sim workload: steps of owner %d", o->rank);
        o->steps = p;
        o->cap = cap;
    }
    o->steps[o->nsteps++] = *s;
    return DCR_OK;
}

/* Room for payload index w->npayloads (the one under construction). */
static dcr_status_t dcr__wl_reserve(dcr_sim_workload_t *w)
{
    if (w->npayloads < w->cap) return DCR_OK;
    int cap = w->cap ? w->cap * 2 : 256;
    dcr_sim_payload_t *p = realloc(w->payloads, (size_t)cap * sizeof(*p));
    if (p) w->payloads = p;
    double *a = realloc(w->apply_s, (size_t)cap * (size_t)w->serve_tp * sizeof(double));
    if (a) w->apply_s = a;
    if (!p || !a) return dcr_error_set(DCR_ENOMEM, "sim workload: %d payloads", cap);
    for (size_t i = (size_t)w->cap * (size_t)w->serve_tp; i < (size_t)cap * (size_t)w->serve_tp;
         i++)
        w->apply_s[i] = 0;
    w->cap = cap;
    return DCR_OK;
}

dcr_status_t dcr_sim_workload_create(int world, int train_nodes, int serve_tp,
                                     dcr_sim_workload_t **out_p)
{
    if (world < 1 || train_nodes < 1 || world % train_nodes || serve_tp < 1)
        return dcr_error_set(DCR_EINVAL, "sim workload: %d owners on %d nodes, serving TP %d",
                             world, train_nodes, serve_tp);
    dcr_sim_workload_t *w = calloc(1, sizeof(*w));
    if (!w) return dcr_error_set(DCR_ENOMEM, "sim workload");
    w->world = world;
    w->train_nodes = train_nodes;
    w->serve_tp = serve_tp;
    w->owners = calloc((size_t)world, sizeof(*w->owners));
    if (!w->owners) {
        free(w);
        return dcr_error_set(DCR_ENOMEM, "sim workload: %d owners", world);
    }
    for (int r = 0; r < world; r++) {
        w->owners[r].rank = r;
        w->owners[r].node = r / (world / train_nodes);
    }
    *out_p = w;
    return DCR_OK;
}

void dcr_sim_workload_destroy(dcr_sim_workload_t *w)
{
    if (!w) return;
    for (int r = 0; w->owners && r < w->world; r++) free(w->owners[r].steps);
    free(w->owners);
    free(w->payloads);
    free(w->apply_s);
    free(w);
}

dcr_status_t dcr_sim_workload_scale(dcr_sim_workload_t *w, double owner, double rollout)
{
    if (!(isfinite(owner) && owner > 0 && isfinite(rollout) && rollout > 0))
        return dcr_error_set(DCR_EINVAL, "sim workload: scale factors %g, %g, expected > 0", owner,
                             rollout);
    for (int r = 0; r < w->world; r++)
        for (int i = 0; i < w->owners[r].nsteps; i++) {
            dcr_sim_step_t *s = &w->owners[r].steps[i];
            if (s->kind == DCR_SIM_STEP_COMPUTE || s->kind == DCR_SIM_STEP_RECV_PARTS)
                s->seconds *= owner;
        }
    for (size_t i = 0; i < (size_t)w->npayloads * (size_t)w->serve_tp; i++)
        w->apply_s[i] *= rollout;
    w->relay_hop_s *= rollout;
    w->relay_hop_s_per_byte *= rollout;
    return DCR_OK;
}

/* ---- packing ------------------------------------------------------------------ */

dcr_sim_costs_t dcr_sim_costs_at(const dcr_sim_calibration_t *cal, double rate)
{
    dcr_sim_cal_point_t p = dcr_sim_cal_at(cal, rate);
    dcr_sim_costs_t c;
    memset(&c, 0, sizeof(c));
    c.detect_s_per_byte = p.detect_s_per_byte;
    c.project_s_per_record = cal->project_s_per_record;
    c.encode_s_per_record = p.encode_s_per_record;
    c.construct_s_per_item = cal->construct_s_per_item;
    c.xor_value_bytes = p.xor_value_bytes;
    c.overwrite_value_bytes = p.overwrite_value_bytes;
    c.gap8_bytes = p.gap8_bytes;
    c.gap16_bytes = p.gap16_bytes;
    c.bytes_per_item = cal->bytes_per_item;
    c.cal = cal;
    return c;
}

double dcr_sim_item_bytes(const dcr_sim_costs_t *c, const dcr_sim_unit_t *u)
{
    double value =
        (u->xor_enc ? c->xor_value_bytes : c->overwrite_value_bytes) + (double)(u->value_size - 2);
    double bytes = c->bytes_per_item + (double)u->records * (value > 0.125 ? value : 0.125);
    if (u->records < 2 || u->records >= u->numel) return bytes; /* a run: no gap words */
    double span = (double)u->numel * (u->spread > 1 ? u->spread : 1);
    double density = (double)u->records / span, gaps = (double)(u->records - 1);
    double g8 = c->gap8_bytes, g16 = c->gap16_bytes;
    if (c->cal) {
        dcr_sim_cal_point_t p = dcr_sim_cal_at(c->cal, density);
        g8 = p.gap8_bytes;
        g16 = p.gap16_bytes;
    }
    /* P(one gap > 255) = (1 - density)^255; all gaps small with (1 - that)^gaps. */
    double p_long = exp(255.0 * log1p(-(density < 1 ? density : 0.999999)));
    double p_small = exp(gaps * log1p(-p_long));
    return bytes + gaps * (p_small * g8 + (1 - p_small) * g16);
}

int64_t dcr_sim_first_bucket_bytes(const dcr_construct_config_t *cfg)
{
    return (int64_t)dcr_construct_first_bucket_bytes(cfg);
}

void dcr_sim_packer_init(dcr_sim_packer_t *p, int64_t chunk_target, int64_t bucket_target,
                         const dcr_sim_costs_t *costs)
{
    memset(p, 0, sizeof(*p));
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.bucket_bytes = (size_t)bucket_target;
    p->chunk_target = chunk_target;
    p->bucket_target = bucket_target;
    p->first_bucket_target = dcr_sim_first_bucket_bytes(&cfg);
    p->costs = *costs;
}

/* The engine's bucket_target(): the run's first payload is smaller. */
static int64_t dcr__bucket_target(const dcr_sim_packer_t *p, const dcr_sim_owner_t *o)
{
    return o->npayloads == 0 ? p->first_bucket_target : p->bucket_target;
}

/* The item of unit u enters the payload under construction. */
static dcr_status_t dcr__pack_item(dcr_sim_packer_t *p, dcr_sim_workload_t *w,
                                   const dcr_sim_unit_t *u)
{
    p->cur.items++;
    p->cur.records += u->records;
    p->cur.raw_value_bytes += u->records * u->value_size;
    p->cur_bytes += dcr_sim_item_bytes(&p->costs, u);
    DCR_CHECK(dcr__wl_reserve(w));
    if (p->on_item) p->on_item(p->ctx, u, w->npayloads);
    return DCR_OK;
}

static dcr_status_t dcr__pack_compute(dcr_sim_owner_t *o, dcr_sim_work_t work, int64_t bytes,
                                      int64_t records, double seconds)
{
    dcr_sim_step_t s = {DCR_SIM_STEP_COMPUTE, work, -1, -1, 0, bytes, records, seconds};
    return dcr_sim_owner_push(o, &s);
}

dcr_status_t dcr_sim_pack_flush(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o)
{
    p->bucket_input = 0;
    if (p->cur.items == 0) return DCR_OK;
    DCR_CHECK(dcr__wl_reserve(w));
    DCR_CHECK(dcr__pack_compute(o, DCR_SIM_WORK_ENCODE, p->cur.input_bytes, p->cur.records,
                                p->costs.encode_s_per_record * (double)p->cur.records));
    dcr_sim_payload_t *pl = &w->payloads[w->npayloads];
    *pl = p->cur;
    pl->owner = o->rank;
    pl->id = o->npayloads++;
    double f = p->costs.cal ? dcr_sim_cal_size_factor(p->costs.cal, p->cur_bytes) : 1.0;
    pl->bytes = DCR_CODEC_HEADER_SIZE + (int64_t)llround(p->cur_bytes * f);
    w->records += pl->records;
    w->items += pl->items;
    w->payload_bytes += pl->bytes;
    w->raw_value_bytes += pl->raw_value_bytes;
    dcr_sim_step_t s = {DCR_SIM_STEP_FLUSH, DCR_SIM_WORK_ENCODE, -1, w->npayloads, 0,
                        pl->bytes,          pl->records,         0};
    w->npayloads++;
    memset(&p->cur, 0, sizeof(p->cur));
    p->cur_bytes = 0;
    return dcr_sim_owner_push(o, &s);
}

dcr_status_t dcr_sim_pack_task(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o,
                               const dcr_sim_unit_t *u, bool last)
{
    if (u->bytes < 0 || u->records < 0 || u->value_size < 1)
        return dcr_error_set(DCR_EINVAL, "sim workload: task of %lld bytes and %lld records",
                             (long long)u->bytes, (long long)u->records);
    if (u->records > 0) DCR_CHECK(dcr__pack_item(p, w, u));
    p->chunk_bytes += u->bytes;
    p->chunk_records += u->records;
    p->chunk_tasks++;
    p->chunk_emitted |= u->records > 0;
    int64_t bucket = dcr__bucket_target(p, o);
    int64_t chunk_target = p->chunk_target < bucket ? p->chunk_target : bucket;
    if (p->chunk_bytes < chunk_target && !last) return DCR_OK;
    double s = p->costs.detect_s_per_byte * (double)p->chunk_bytes +
               p->costs.project_s_per_record * (double)p->chunk_records +
               p->costs.construct_s_per_item * (double)p->chunk_tasks;
    DCR_CHECK(dcr__pack_compute(o, DCR_SIM_WORK_CHUNK, p->chunk_bytes, p->chunk_records, s));
    if (p->chunk_emitted) {
        p->bucket_input += p->chunk_bytes;
        p->cur.input_bytes += p->chunk_bytes;
    }
    p->chunk_bytes = p->chunk_records = p->chunk_tasks = 0;
    p->chunk_emitted = false;
    return p->bucket_input >= bucket ? dcr_sim_pack_flush(p, w, o) : DCR_OK;
}

dcr_status_t dcr_sim_pack_residual(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o,
                                   const dcr_sim_unit_t *u)
{
    double s = p->costs.detect_s_per_byte * (double)u->bytes +
               p->costs.project_s_per_record * (double)u->records + p->costs.construct_s_per_item;
    DCR_CHECK(dcr__pack_compute(o, DCR_SIM_WORK_RESIDUAL, u->bytes, u->records, s));
    if (u->records > 0) {
        DCR_CHECK(dcr__pack_item(p, w, u));
        p->bucket_input += u->bytes;
        p->cur.input_bytes += u->bytes;
    }
    return p->bucket_input >= dcr__bucket_target(p, o) ? dcr_sim_pack_flush(p, w, o) : DCR_OK;
}

double dcr_sim_task_spread(const dcr_task_t *t)
{
    int64_t lo = INT64_MAX, hi = -1, n = dcr_task_numel(t);
    for (int m = 0; m < t->nmaps; m++) {
        const dcr_box_map_t *b = &t->maps[m];
        int64_t last = b->dst_offset;
        for (int d = 0; d < b->ndim; d++) last += (b->shape[d] - 1) * b->dst_strides[d];
        if (b->dst_offset < lo) lo = b->dst_offset;
        if (last > hi) hi = last;
    }
    return hi >= lo && n > 0 ? (double)(hi - lo + 1) / (double)n : 1.0;
}

/* ---- the builder ------------------------------------------------------------------ */

/* What the serving side decides per canonical tensor and TP rank. */
typedef struct dcr__serve_facts {
    int tp;
    size_t nc;
    uint8_t *xor_ok; /* [nc] */
    uint8_t *held;   /* [tp * nc]: not skipped on that rank */
    uint8_t *full;   /* [tp * nc]: held, and the path is not views only (full scratch pass) */
} dcr__serve_facts_t;

static void dcr__facts_free(dcr__serve_facts_t *f)
{
    free(f->xor_ok);
    free(f->held);
    free(f->full);
    f->xor_ok = f->held = f->full = NULL;
}

/* What one TP rank's receiver decides for a canonical tensor, one byte
 * per tensor (so a worker process can hand it back). */
enum {
    DCR__FACT_HELD = 1, /* not skipped on that rank */
    DCR__FACT_FULL = 2, /* held, and the path is not views only */
    DCR__FACT_XOR = 4   /* held, on the XOR path */
};

/* Facts of ranks k0 .. k1-1 into code[(k - k0) * nc + c]: one shape-only
 * receiver per TP rank of the first instance (instances are identical)
 * runs the serving loader's prewarm. */
static dcr_status_t dcr__facts_ranks(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                     int k0, int k1, uint8_t *code)
{
    size_t nc = dcr_inventory_count(sc->inventory);
    dcr_receiver_config_t base = {.shape_only = true};
    for (int k = k0; k < k1; k++) {
        dcr_receiver_t *r = NULL;
        dcr_status_t st = dcr_serve_receiver_create(&sc->model, sc->inventory, serve, k, &base, &r);
        if (st == DCR_OK) st = dcr_receiver_prewarm(r);
        for (size_t c = 0; st == DCR_OK && c < nc; c++) {
            dcr_path_info_t info;
            st = dcr_receiver_path(r, c, &info);
            bool held = info.cls != DCR_PATH_SKIPPED;
            code[(size_t)(k - k0) * nc + c] =
                (uint8_t)((held ? DCR__FACT_HELD : 0) |
                          (held && !info.views_only ? DCR__FACT_FULL : 0) |
                          (held && info.cls == DCR_PATH_XOR ? DCR__FACT_XOR : 0));
        }
        dcr_receiver_destroy(r);
        DCR_CHECK(st);
    }
    return DCR_OK;
}

/* What a worker hands back before its facts. */
typedef struct dcr__facts_msg {
    int status;
    char detail[512];
} dcr__facts_msg_t;

/* The worker: ranks k0 .. k1-1 written to fd, then exit. */
static void dcr__facts_worker(int fd, const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                              int k0, int k1, uint8_t *code)
{
    dcr__facts_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    msg.status = dcr__facts_ranks(sc, serve, k0, k1, code);
    if (msg.status != DCR_OK) snprintf(msg.detail, sizeof(msg.detail), "%s", dcr_error_detail());
    dcr__sim_write_all(fd, &msg, sizeof(msg));
    if (msg.status == DCR_OK)
        dcr__sim_write_all(fd, code, (size_t)(k1 - k0) * dcr_inventory_count(sc->inventory));
    close(fd);
    _exit(0);
}

/* Reads a worker's facts (len bytes) into code and reaps it; kills it
 * first when this process failed (st) or was stopped. */
static dcr_status_t dcr__facts_collect(pid_t pid, int fd, dcr_status_t st, uint8_t *code,
                                       size_t len)
{
    dcr__facts_msg_t msg;
    size_t got = 0;
    if (st == DCR_OK) st = dcr__sim_read_all(fd, &msg, sizeof(msg), &got);
    if (st == DCR_OK && got == sizeof(msg) && msg.status != DCR_OK)
        st = dcr_error_set((dcr_status_t)msg.status, "%s", msg.detail);
    else if (st == DCR_OK && got == sizeof(msg))
        st = dcr__sim_read_all(fd, code, len, &got);
    if (st == DCR_OK && got != len)
        st = dcr_error_set(DCR_EIO, "sim: the serving-facts worker ended without its facts");
    if (st != DCR_OK) kill(pid, SIGKILL);
    close(fd);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return st;
}

/* Every rank's codes: the upper half of the ranks in a forked worker while
 * this process does the lower half (the prewarms are most of a build's
 * time, and this machine has two cores). Without a worker, all here. */
static dcr_status_t dcr__facts_codes(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                     uint8_t *code)
{
    int tp = serve->tp, half = tp / 2;
    size_t nc = dcr_inventory_count(sc->inventory);
    int fds[2];
    if (half == 0 || pipe(fds) != 0) return dcr__facts_ranks(sc, serve, 0, tp, code);
    pid_t pid = dcr__fork_tied(fds);
    if (pid < 0) return dcr__facts_ranks(sc, serve, 0, tp, code);
    if (pid == 0) dcr__facts_worker(fds[1], sc, serve, half, tp, code + (size_t)half * nc);
    dcr_status_t st = dcr__facts_ranks(sc, serve, 0, half, code);
    return dcr__facts_collect(pid, fds[0], st, code + (size_t)half * nc, (size_t)(tp - half) * nc);
}

/* The serving facts, per rank from the codes; XOR allowed on a tensor
 * when every rank that holds it takes it on the XOR path and one does
 * (dcr_serve_xor_allowed's rule). */
static dcr_status_t dcr__facts_compute(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                       dcr__serve_facts_t *f)
{
    f->tp = serve->tp;
    f->nc = dcr_inventory_count(sc->inventory);
    size_t n = (size_t)f->tp * f->nc + 1;
    f->xor_ok = calloc(f->nc + 1, 1);
    f->held = calloc(n, 1);
    f->full = calloc(n, 1);
    uint8_t *code = calloc(n, 1);
    dcr_status_t st = f->xor_ok && f->held && f->full && code
                          ? dcr__facts_codes(sc, serve, code)
                          : dcr_error_set(DCR_ENOMEM, "sim: serving facts");
    for (size_t c = 0; st == DCR_OK && c < f->nc; c++) {
        bool any = false, all_xor = true;
        for (int k = 0; k < f->tp; k++) {
            size_t at = (size_t)k * f->nc + c;
            f->held[at] = (code[at] & DCR__FACT_HELD) != 0;
            f->full[at] = (code[at] & DCR__FACT_FULL) != 0;
            any = any || f->held[at];
            all_xor = all_xor && (!f->held[at] || (code[at] & DCR__FACT_XOR));
        }
        f->xor_ok[c] = any && all_xor;
    }
    free(code);
    return st;
}

/* What the facts depend on: the model (its name and every canonical
 * tensor's name, type and shape) and the serving layout. */
static uint64_t dcr__facts_key(const dcr_scenario_t *sc, const dcr_serve_config_t *serve)
{
    uint64_t h = dcr_hash64_str(sc->model.name);
    const int64_t layout[] = {serve->tp, serve->ep, serve->fp32_norms, serve->w2_transposed,
                              serve->gpus_per_node};
    h = dcr_hash64_mix(h ^ dcr_hash64(layout, sizeof(layout)));
    size_t nc = dcr_inventory_count(sc->inventory);
    for (size_t c = 0; c < nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        int64_t shape[DCR_MAX_DIMS + 2] = {d->dtype, d->ndim};
        for (int i = 0; i < d->ndim && i < DCR_MAX_DIMS; i++) shape[2 + i] = d->shape[i];
        h = dcr_hash64_mix(h ^ dcr_hash64_str(d->name));
        h = dcr_hash64_mix(h ^ dcr_hash64(shape, sizeof(shape)));
    }
    return h;
}

static dcr_status_t dcr__facts_copy(const dcr__serve_facts_t *from, dcr__serve_facts_t *to)
{
    size_t n = (size_t)from->tp * from->nc + 1;
    *to = (dcr__serve_facts_t){from->tp, from->nc, malloc(from->nc + 1), malloc(n), malloc(n)};
    if (!to->xor_ok || !to->held || !to->full) {
        dcr__facts_free(to);
        return dcr_error_set(DCR_ENOMEM, "sim: serving facts");
    }
    memcpy(to->xor_ok, from->xor_ok, from->nc + 1);
    memcpy(to->held, from->held, n);
    memcpy(to->full, from->full, n);
    return DCR_OK;
}

/* The facts of the last model and serving layout built, kept for the next
 * build: a sweep builds one workload per transport and change rate (and
 * the break-even search nine more), each with the same receivers, whose
 * prewarm is most of a build's time. */
static struct {
    bool valid;
    uint64_t key;
    dcr__serve_facts_t facts;
} dcr__facts_memo;

static dcr_status_t dcr__facts_make(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                    dcr__serve_facts_t *f)
{
    uint64_t key = dcr__facts_key(sc, serve);
    if (dcr__facts_memo.valid && dcr__facts_memo.key == key)
        return dcr__facts_copy(&dcr__facts_memo.facts, f);
    DCR_CHECK(dcr__facts_compute(sc, serve, f));
    dcr__facts_free(&dcr__facts_memo.facts);
    dcr__facts_memo.valid = dcr__facts_copy(f, &dcr__facts_memo.facts) == DCR_OK;
    dcr__facts_memo.key = key;
    return DCR_OK;
}

typedef struct dcr__builder {
    const dcr_sim_spec_t *spec;
    const dcr_sim_calibration_t *cal;
    const dcr_scenario_t *sc;
    dcr__serve_facts_t facts;
    dcr_sim_workload_t *w;
    int *assembler;   /* per canonical: assembling rank, or -1 (direct projection) */
    int64_t *records; /* per task */
    int64_t *canon_records;
    uint8_t *required; /* per canonical: rebuilt this run */
    int *nparts;       /* per canonical: tasks that contribute parts */
} dcr__builder_t;

/* Per-rank apply cost of one item entering payload `payload`. */
static void dcr__on_item(void *ctx, const dcr_sim_unit_t *u, int payload)
{
    dcr__builder_t *b = ctx;
    const dcr_sim_calibration_t *cal = b->cal;
    double full_bytes =
        (double)dcr_desc_bytes(dcr_inventory_at(b->sc->inventory, (size_t)u->canonical));
    for (int k = 0; k < b->facts.tp; k++) {
        size_t at = (size_t)k * b->facts.nc + (size_t)u->canonical;
        if (!b->facts.held[at]) continue;
        double s = cal->apply_s_per_item + cal->apply_s_per_record * (double)u->records;
        if (b->facts.full[at]) s += cal->apply_s_per_full_byte * full_bytes;
        b->w->apply_s[(size_t)payload * (size_t)b->w->serve_tp + (size_t)k] += s;
    }
}

static int64_t dcr__task_bytes(const dcr_scenario_t *sc, const dcr_task_t *t)
{
    return dcr_task_numel(t) * (int64_t)dcr_dtype_size(sc->layout->shards[t->shard].desc.dtype);
}

static dcr_status_t dcr__plan(dcr__builder_t *b)
{
    const dcr_source_layout_t *L = b->sc->layout;
    size_t nc = b->facts.nc;
    int world = L->world;
    b->assembler = malloc((nc + 1) * sizeof(int));
    b->records = calloc((size_t)L->ntasks + 1, sizeof(int64_t));
    b->canon_records = calloc(nc + 1, sizeof(int64_t));
    b->required = calloc(nc + 1, 1);
    b->nparts = calloc(nc + 1, sizeof(int));
    if (!b->assembler || !b->records || !b->canon_records || !b->required || !b->nparts)
        return dcr_error_set(DCR_ENOMEM, "sim: plan of %d tasks", L->ntasks);
    for (size_t k = 0; k < nc; k++) {
        int r = L->residual_owner[k];
        if (b->spec->mode == DCR_MODE_F && r < 0)
            r = (int)(dcr_hash64_str(dcr_inventory_at(L->inventory, k)->name) % (uint64_t)world);
        b->assembler[k] = r;
        b->required[k] = b->spec->mode == DCR_MODE_F && r >= 0;
    }
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        b->records[i] = llround(b->spec->change_rate * (double)dcr_task_numel(t));
        b->canon_records[t->canonical] += b->records[i];
        if (b->assembler[t->canonical] < 0) continue;
        b->nparts[t->canonical]++;
        if (b->records[i] > 0) b->required[t->canonical] = 1;
    }
    return DCR_OK;
}

/* Scan of the owner's residual parts, the flag exchange, and the parts of
 * required tensors packed and sent to their assemblers. */
static dcr_status_t dcr__owner_parts(dcr__builder_t *b, dcr_sim_owner_t *o,
                                     const dcr_sim_costs_t *costs)
{
    const dcr_source_layout_t *L = b->sc->layout;
    bool flags = b->spec->mode != DCR_MODE_F;
    int64_t scan = 0;
    for (int i = 0; flags && i < L->ntasks; i++)
        if (L->tasks[i].owner == o->rank && b->assembler[L->tasks[i].canonical] >= 0)
            scan += dcr__task_bytes(b->sc, &L->tasks[i]);
    if (flags) {
        dcr_sim_step_t s = {DCR_SIM_STEP_COMPUTE,
                            DCR_SIM_WORK_FLAGS,
                            -1,
                            -1,
                            0,
                            scan,
                            0,
                            costs->detect_s_per_byte * (double)scan};
        DCR_CHECK(dcr_sim_owner_push(o, &s));
        dcr_sim_step_t barrier = {DCR_SIM_STEP_BARRIER, DCR_SIM_WORK_FLAGS, -1, -1, 0, 0, 0, 0};
        DCR_CHECK(dcr_sim_owner_push(o, &barrier));
    }
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        if (t->owner != o->rank || b->assembler[t->canonical] < 0 || !b->required[t->canonical])
            continue;
        int64_t bytes = dcr__task_bytes(b->sc, t);
        dcr_sim_step_t pack = {DCR_SIM_STEP_COMPUTE,
                               DCR_SIM_WORK_PACK,
                               -1,
                               -1,
                               0,
                               bytes,
                               0,
                               b->cal->copy_s_per_byte * (double)bytes};
        dcr_sim_step_t send = {DCR_SIM_STEP_SEND_PART,
                               DCR_SIM_WORK_PACK,
                               b->assembler[t->canonical],
                               -1,
                               0,
                               bytes,
                               0,
                               0};
        DCR_CHECK(dcr_sim_owner_push(o, &pack));
        DCR_CHECK(dcr_sim_owner_push(o, &send));
    }
    return DCR_OK;
}

static dcr_sim_unit_t dcr__unit(const dcr__builder_t *b, int canonical, int64_t bytes,
                                int64_t numel, int64_t records, bool xor_enc, double spread)
{
    const dcr_tensor_desc_t *d = dcr_inventory_at(b->sc->inventory, (size_t)canonical);
    return (dcr_sim_unit_t){bytes,   numel,  records,  (int)dcr_dtype_size(d->dtype),
                            xor_enc, spread, canonical};
}

static dcr_status_t dcr__owner_direct(dcr__builder_t *b, dcr_sim_owner_t *o, dcr_sim_packer_t *p)
{
    const dcr_source_layout_t *L = b->sc->layout;
    int last = -1;
    for (int i = 0; i < L->ntasks; i++)
        if (L->tasks[i].owner == o->rank && b->assembler[L->tasks[i].canonical] < 0) last = i;
    for (int i = 0; i <= last; i++) {
        const dcr_task_t *t = &L->tasks[i];
        if (t->owner != o->rank || b->assembler[t->canonical] >= 0) continue;
        bool xor_enc = b->spec->mode == DCR_MODE_X && b->facts.xor_ok[t->canonical];
        dcr_sim_unit_t u = dcr__unit(b, t->canonical, dcr__task_bytes(b->sc, t), dcr_task_numel(t),
                                     b->records[i], xor_enc, dcr_sim_task_spread(t));
        DCR_CHECK(dcr_sim_pack_task(p, b->w, o, &u, i == last));
    }
    return DCR_OK;
}

/* Receives every part of the required tensors this owner assembles, then
 * compares each with its residual baseline, in canonical order. */
static dcr_status_t dcr__owner_residual(dcr__builder_t *b, dcr_sim_owner_t *o, dcr_sim_packer_t *p)
{
    int64_t parts = 0;
    for (size_t k = 0; k < b->facts.nc; k++)
        if (b->assembler[k] == o->rank && b->required[k]) parts += b->nparts[k];
    if (parts > 0) {
        dcr_sim_step_t s = {DCR_SIM_STEP_RECV_PARTS,    DCR_SIM_WORK_RESIDUAL, -1, -1, parts, 0, 0,
                            b->cal->residual_s_per_byte};
        DCR_CHECK(dcr_sim_owner_push(o, &s));
    }
    for (size_t k = 0; k < b->facts.nc; k++) {
        if (b->assembler[k] != o->rank || !b->required[k]) continue;
        const dcr_tensor_desc_t *d = dcr_inventory_at(b->sc->inventory, k);
        dcr_sim_unit_t u = dcr__unit(b, (int)k, (int64_t)dcr_desc_bytes(d), dcr_desc_numel(d),
                                     b->canon_records[k], false, 1.0);
        DCR_CHECK(dcr_sim_pack_residual(p, b->w, o, &u));
    }
    return DCR_OK;
}

static void dcr__owner_trackers(dcr__builder_t *b, dcr_sim_owner_t *o)
{
    const dcr_source_layout_t *L = b->sc->layout;
    if (b->spec->mode == DCR_MODE_F) return; /* mode F keeps no trackers */
    for (int i = 0; i < L->ntasks; i++)
        if (L->tasks[i].owner == o->rank) o->tracker_bytes += dcr__task_bytes(b->sc, &L->tasks[i]);
}

/* The targets as the engine's construct config holds them. */
static dcr_construct_config_t dcr__targets(const dcr_sim_spec_t *spec)
{
    dcr_construct_config_t cfg = dcr_construct_config_default();
    size_t chunk =
        strcmp(spec->transport, "relay") ? DCR_CHUNK_BYTES_OBJSTORE : DCR_CHUNK_BYTES_RELAY;
    cfg.chunk_bytes = spec->chunk_bytes ? spec->chunk_bytes : chunk;
    cfg.bucket_bytes = spec->bucket_bytes ? spec->bucket_bytes : DCR_BUCKET_BYTES;
    cfg.first_bucket_bytes = spec->first_bucket_bytes;
    return cfg;
}

static dcr_status_t dcr__owners(dcr__builder_t *b)
{
    dcr_sim_costs_t costs = dcr_sim_costs_at(b->cal, b->spec->change_rate);
    dcr_construct_config_t cfg = dcr__targets(b->spec);
    for (int r = 0; r < b->w->world; r++) {
        dcr_sim_owner_t *o = &b->w->owners[r];
        dcr_sim_packer_t p;
        dcr_sim_packer_init(&p, (int64_t)cfg.chunk_bytes, (int64_t)cfg.bucket_bytes, &costs);
        p.first_bucket_target = dcr_sim_first_bucket_bytes(&cfg);
        p.on_item = dcr__on_item;
        p.ctx = b;
        DCR_CHECK(dcr__owner_parts(b, o, &costs));
        DCR_CHECK(dcr__owner_direct(b, o, &p));
        DCR_CHECK(dcr__owner_residual(b, o, &p));
        DCR_CHECK(dcr_sim_pack_flush(&p, b->w, o));
        dcr__owner_trackers(b, o);
    }
    return DCR_OK;
}

/* Every receiver verifies and decodes every payload it gets, held items or not. */
static void dcr__decode_costs(dcr_sim_workload_t *w, const dcr_sim_calibration_t *cal)
{
    for (int p = 0; p < w->npayloads; p++)
        for (int k = 0; k < w->serve_tp; k++)
            w->apply_s[(size_t)p * (size_t)w->serve_tp + (size_t)k] +=
                cal->decode_s_per_byte * (double)w->payloads[p].bytes + cal->decode_s_per_payload;
}

/* The coordinator's work after the last application. In-process it
 * acknowledges for every receiver and updates every owner's baseline on
 * one thread; on a cluster receivers acknowledge and owners update in
 * parallel, so the largest owner decides. */
static void dcr__finalize(dcr_sim_workload_t *w, const dcr_sim_cluster_t *c,
                          const dcr_sim_calibration_t *cal)
{
    bool in_process = c->shared_cores > 0;
    double update = 0;
    for (int o = 0; o < w->world; o++) {
        double s = cal->copy_s_per_byte * (double)w->owners[o].tracker_bytes;
        update = in_process ? update + s : (s > update ? s : update);
    }
    double acks = in_process ? cal->ack_s * c->rollout_nodes * c->rollout_gpus : cal->ack_s;
    w->finalize_s = acks + cal->commit_s + update;
}

static dcr_status_t dcr__scenario(const dcr_sim_spec_t *spec, dcr_serve_config_t *serve,
                                  dcr_scenario_t **sc_p)
{
    const dcr_sim_cluster_t *c = &spec->cluster;
    dcr_scenario_spec_t s = spec->scenario;
    s.train.nodes = c->train_nodes;
    s.train.gpus_per_node = c->train_gpus;
    *serve = dcr_serve_config_default();
    serve->nodes = c->rollout_nodes;
    serve->gpus_per_node = c->rollout_gpus;
    serve->tp = spec->serve_tp > 0 ? spec->serve_tp : c->rollout_gpus;
    serve->ep = spec->serve_ep;
    s.align_extra = serve->tp;
    DCR_CHECK(dcr_scenario_create(&s, sc_p));
    return dcr_serve_config_validate(&(*sc_p)->model, serve);
}

static dcr_status_t dcr__spec_check(const dcr_sim_spec_t *spec)
{
    DCR_CHECK(dcr_sim_cluster_validate(&spec->cluster));
    if (!spec->transport ||
        (strcmp(spec->transport, "objstore") && strcmp(spec->transport, "relay")))
        return dcr_error_set(DCR_EINVAL, "sim: transport '%s' is not objstore or relay",
                             spec->transport ? spec->transport : "(null)");
    if (!(spec->change_rate >= 0 && spec->change_rate <= 1))
        return dcr_error_set(DCR_EINVAL, "sim: change rate %g is outside [0, 1]",
                             spec->change_rate);
    if (spec->serve_tp < 0)
        return dcr_error_set(DCR_EINVAL, "sim: serving TP %d is negative", spec->serve_tp);
    return DCR_OK;
}

static void dcr__builder_free(dcr__builder_t *b)
{
    dcr__facts_free(&b->facts);
    free(b->assembler);
    free(b->records);
    free(b->canon_records);
    free(b->required);
    free(b->nparts);
}

dcr_status_t dcr_sim_workload_build(const dcr_sim_spec_t *spec, const dcr_sim_calibration_t *cal,
                                    dcr_sim_workload_t **out_p)
{
    DCR_CHECK(dcr__spec_check(spec));
    DCR_CHECK(dcr_sim_cal_validate(cal));
    dcr_scenario_t *sc = NULL;
    dcr_serve_config_t serve;
    dcr__builder_t b;
    memset(&b, 0, sizeof(b));
    b.spec = spec;
    b.cal = cal;
    dcr_status_t st = dcr__scenario(spec, &serve, &sc);
    b.sc = sc;
    if (st == DCR_OK) st = dcr__facts_make(sc, &serve, &b.facts);
    if (st == DCR_OK)
        st = dcr_sim_workload_create(sc->layout->world, sc->train.nodes, serve.tp, &b.w);
    if (st == DCR_OK) st = dcr__plan(&b);
    if (st == DCR_OK) {
        b.w->checkpoint_bytes = dcr_inventory_bytes(sc->inventory);
        st = dcr__owners(&b);
    }
    if (st == DCR_OK) {
        dcr__decode_costs(b.w, cal);
        dcr__finalize(b.w, &spec->cluster, cal);
        b.w->relay_hop_s = cal->relay_hop_s;
        b.w->relay_hop_s_per_byte = cal->relay_hop_s_per_byte;
    }
    dcr__builder_free(&b);
    dcr_scenario_destroy(sc);
    if (st != DCR_OK) {
        dcr_sim_workload_destroy(b.w);
        return st;
    }
    *out_p = b.w;
    return DCR_OK;
}
