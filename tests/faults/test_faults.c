/* ctest-labels: integration
 *
 * Faults and recovery: every fault kind injected through backends that wrap
 * the real ones (faulty:<name>: transports, object stores, control planes,
 * group backends), and recovered from
 * with every live receiver equal to a dense refit of the committed version
 * (or stopped cleanly with version v still committed); a replaced
 * coordinator refused; a restarted receiver restored; commit deadlines;
 * retries exhausted; no live receiver; a seeded campaign over every kind,
 * both transports and both RL modes with zero mismatches and zero lost
 * versions. Oracles are independent: dense refits through the native
 * loader and the commit record. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"

#include "dcr/clock.h"
#include "dcr/group.h"
#include "dcr/log.h"
#include "faults/faults_run.h"
#include "testkit.h"

static dcr_faults_run_config_t small_run(const char *transport, int steps)
{
    dcr_faults_run_config_t c = dcr_faults_run_config_default();
    c.bench.run.transport = transport;
    c.steps = steps;
    c.kill_every = 0;
    return c;
}

/* What must hold over any run or campaign: no committed version lost (bits,
 * record, baselines), no request that saw a mix, no commit before every
 * required receiver held P^{v+1}, no membership lost in a failover. */
static void assert_properties(const dcr_faults_summary_t *s)
{
    assert_int_equal(s->mismatches, 0);
    assert_int_equal(s->baseline_mismatches, 0);
    assert_int_equal(s->lost, 0);
    assert_true(s->checks > 0);
    assert_true(s->gate_reads > 0);
    assert_int_equal(s->gate_violations, 0);
    assert_true(s->commit_checks > 0);
    assert_int_equal(s->commit_violations, 0);
    assert_int_equal(s->membership_mismatches, 0);
    /* Every step either committed or stopped cleanly with v kept. */
    assert_int_equal(s->commits + s->stops, s->steps);
}

/* One run: its properties, and each commit one version further. */
static void assert_clean(const dcr_faults_summary_t *s)
{
    assert_properties(s);
    assert_int_equal((int)s->version, s->commits);
}

/* One fault of `kind` armed before step 1 of a 3-step run. */
static void run_one(dcr_fault_kind_t kind, const char *transport, dcr_faults_summary_t *s)
{
    dcr_faults_run_config_t c = small_run(transport, 3);
    dcr_faults_planned_t plan = {1, {kind, -1, 0, 60, 2, DCR_COORD_STEP_PREPARE}};
    if (kind >= DCR_FAULT_KILL_DELIVERY && kind <= DCR_FAULT_KILL_ACKED) plan.fault.target = 1;
    if (kind == DCR_FAULT_TRUNCATE_OBJECT || kind == DCR_FAULT_REMOVE_OBJECT)
        plan.fault.target = 0; /* an owner that stores a payload in every attempt */
    c.plan = &plan;
    c.nplan = 1;
    memset(s, 0, sizeof(*s));
    assert_int_equal(dcr_faults_run(&c, s), DCR_OK);
    print_message(
        "  %-16s %-8s fired %lld, attempts %d, retries %d, commits %d, stops %d, failovers %d\n",
        dcr_fault_kind_name(kind), transport, (long long)s->faults_by_kind[kind], s->attempts,
        s->retries, s->commits, s->stops, s->failovers);
    assert_clean(s);
}

static void test_each_kind(void **state)
{
    (void)state;
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++) {
        bool objstore = dcr_fault_kind_applies((dcr_fault_kind_t)k, "objstore");
        if (!objstore && !dcr_fault_kind_applies((dcr_fault_kind_t)k, "relay"))
            continue; /* group faults: test_group_faults */
        const char *transport = objstore ? "objstore" : "relay";
        dcr_faults_summary_t s;
        run_one((dcr_fault_kind_t)k, transport, &s);
        assert_int_equal(s.faults_by_kind[k], 1);
        /* Faults that lose or break something cost a retry (or a failover);
         * slow ones and reorders do not. */
        bool benign = k == DCR_FAULT_DUPLICATE || k == DCR_FAULT_REORDER || k == DCR_FAULT_DELAY ||
                      k == DCR_FAULT_CONTROL_BUSY || k == DCR_FAULT_COMMIT_REPLY ||
                      k == DCR_FAULT_COORD_CRASH;
        /* A payload object is damaged as it is stored (the faulty store
         * wraps the real one), before any node can fetch it: never benign. */
        if (!benign) assert_true(s.retries >= 1);
        if (k == DCR_FAULT_COMMIT_REPLY)
            assert_int_equal(s.retries, 0); /* the record said it committed */
        if (k == DCR_FAULT_DUPLICATE)
            assert_int_equal(s.retries, 0); /* the receivers drop the copy */
        if (k >= DCR_FAULT_KILL_DELIVERY && k <= DCR_FAULT_KILL_ACKED) assert_int_equal(s.kills, 1);
    }
}

static void test_payload_faults_on_relay(void **state)
{
    (void)state;
    const dcr_fault_kind_t kinds[] = {DCR_FAULT_DROP, DCR_FAULT_DUPLICATE, DCR_FAULT_CORRUPT,
                                      DCR_FAULT_OWNER_CRASH};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        dcr_faults_summary_t s;
        run_one(kinds[i], "relay", &s);
        assert_int_equal(s.faults_by_kind[kinds[i]], 1);
    }
}

/* A coordinator crash at every protocol step: a new coordinator reads the
 * commit record and either finishes the owners' update or retries. */
static void test_coordinator_crash_every_step(void **state)
{
    (void)state;
    for (int step = 0; step < DCR_COORD_STEP_COUNT; step++) {
        dcr_faults_run_config_t c = small_run("objstore", 2);
        dcr_faults_planned_t plan = {1,
                                     {DCR_FAULT_COORD_CRASH, -1, 0, 0, 0, (dcr_coord_step_t)step}};
        c.plan = &plan;
        c.nplan = 1;
        dcr_faults_summary_t s;
        assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
        print_message("  crash at %-9s failovers %d, attempts %d, commits %d\n",
                      dcr_coord_step_name((dcr_coord_step_t)step), s.failovers, s.attempts,
                      s.commits);
        assert_int_equal(s.failovers, 1);
        assert_int_equal(s.commits, 2);
        assert_clean(&s);
    }
}

/* A coordinator crashes while the control plane is down: its successor
 * starts once the control plane answers again and finishes the transition. */
static void test_failover_while_control_plane_down(void **state)
{
    (void)state;
    dcr_faults_run_config_t c = small_run("objstore", 2);
    dcr_faults_planned_t plan[] = {
        {1, {DCR_FAULT_COORD_CRASH, -1, 0, 0, 0, DCR_COORD_STEP_PREPARE}},
        {1, {DCR_FAULT_CONTROL_DOWN, -1, 0, 0, 2, DCR_COORD_STEP_PREPARE}},
    };
    c.plan = plan;
    c.nplan = 2;
    dcr_faults_summary_t s;
    assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
    assert_int_equal(s.faults_by_kind[DCR_FAULT_CONTROL_DOWN], 1);
    assert_int_equal(s.failovers, 1);
    assert_int_equal(s.commits, 2);
    assert_clean(&s);
}

/* ---- group faults: the owners' messages through faulty:<name> ------------------ */

/* Receives the next tag-7 message on g and checks it holds the int `want`. */
static void expect_message(dcr_group_t *g, int src, int want)
{
    dcr_group_msg_t m;
    assert_int_equal(dcr_group_recv(g, 7, 5000, &m), DCR_OK);
    assert_int_equal(m.src, src);
    assert_int_equal(m.len, sizeof(int));
    int got = 0;
    memcpy(&got, m.data, sizeof(got));
    assert_int_equal(got, want);
    dcr_group_release(g, &m);
}

/* Every in-process group backend has a faulty twin that states the same
 * guarantees; through it, a lost message fails its sender's send and never
 * arrives, a delayed one arrives intact and late, and the others arrive in
 * order. Created with no injector bound, the twin passes everything on. */
static void test_group_faults(void **state)
{
    (void)state;
    assert_int_equal(dcr_faults_register(), DCR_OK);
    int tested = 0;
    for (size_t i = 0; dcr_group_backend_name(i) != NULL; i++) {
        const char *name = dcr_group_backend_name(i);
        if (!strncmp(name, "faulty:", 7)) continue;
        char faulty[80];
        snprintf(faulty, sizeof(faulty), "faulty:%s", name);
        const dcr_group_ops_t *ops = dcr_group_find(faulty);
        assert_non_null(ops);
        assert_int_equal(ops->hdr.version, DCR_GROUP_OPS_VERSION);
        const dcr_group_ops_t *real = dcr_group_find(name);
        assert_ptr_equal(ops->hdr.parent, real); /* the twin finds what it wraps there */
        assert_int_equal(ops->props.cross_process, real->props.cross_process);
        assert_int_equal(ops->props.ordered_per_pair, real->props.ordered_per_pair);
        assert_int_equal(ops->props.max_tag, real->props.max_tag);
        assert_true(ops->props.max_message == real->props.max_message);
        /* A cross-process backend needs its job (MPI_Init): its twin is
         * only registered here. */
        if (real->props.cross_process) continue;
        dcr_faults_t *f = NULL;
        assert_int_equal(dcr_faults_create(11, &f), DCR_OK);
        dcr_group_t *g[2], *plain[2];
        int n = 0;
        assert_int_equal(dcr_group_create(faulty, 2, plain, &n), DCR_OK); /* nothing bound */
        assert_int_equal(dcr_faults_bind(f), DCR_OK);
        assert_int_equal(dcr_group_create(faulty, 2, g, &n), DCR_OK);
        dcr_faults_unbind(f);
        assert_int_equal(n, 2);
        assert_int_equal(dcr_group_rank(g[1]), 1);
        assert_int_equal(dcr_group_size(g[0]), 2);
        assert_ptr_equal(dcr_group_backend(g[0]), ops);
        /* Owner 0's second message is lost; owner 1's first is held 150 ms. */
        dcr_fault_t drop = {DCR_FAULT_GROUP_DROP, 0, 1, 0, 0, DCR_COORD_STEP_PREPARE};
        dcr_fault_t delay = {DCR_FAULT_GROUP_DELAY, 1, 0, 150, 0, DCR_COORD_STEP_PREPARE};
        assert_int_equal(dcr_faults_arm(f, &drop), DCR_OK);
        assert_int_equal(dcr_faults_arm(f, &delay), DCR_OK);
        for (int v = 1; v <= 3; v++)
            assert_int_equal(dcr_group_send(g[0], 1, 7, &v, sizeof(v)),
                             v == 2 ? DCR_ETRANSPORT : DCR_OK);
        assert_non_null(strstr(dcr_error_detail(), "lost"));
        expect_message(g[1], 0, 1);
        expect_message(g[1], 0, 3);
        dcr_group_msg_t m;
        assert_int_equal(dcr_group_recv(g[1], 7, 0, &m), DCR_ETIMEOUT); /* 2 never arrives */
        int v = 4;
        double t0 = dcr_clock_s();
        assert_int_equal(dcr_group_send(g[1], 0, 7, &v, sizeof(v)), DCR_OK);
        assert_true(dcr_clock_s() - t0 >= 0.150);
        expect_message(g[0], 1, 4);
        int64_t counts[DCR_FAULT_KIND_COUNT];
        dcr_faults_counts(f, counts);
        assert_int_equal(counts[DCR_FAULT_GROUP_DROP], 1);
        assert_int_equal(counts[DCR_FAULT_GROUP_DELAY], 1);
        /* The twin created unbound injects nothing, armed faults or not. */
        assert_int_equal(dcr_faults_arm(f, &drop), DCR_OK);
        for (int k = 1; k <= 3; k++)
            assert_int_equal(dcr_group_send(plain[0], 1, 7, &k, sizeof(k)), DCR_OK);
        for (int k = 1; k <= 3; k++) expect_message(plain[1], 0, k);
        for (int k = 0; k < 2; k++) {
            dcr_group_destroy(g[k]);
            dcr_group_destroy(plain[k]);
        }
        dcr_faults_destroy(f);
        tested++;
    }
    assert_true(tested >= 1); /* inproc, in every build */
}

/* ---- a pipeline driven directly, for the coordinator's own contracts ---------- */

typedef struct pipe {
    dcr_bench_config_t cfg;
    dcr_serve_config_t serve;
    dcr_scenario_t *sc;
    size_t nc, ns;
    dcr_storage_t **canonical, **committed, **candidate;
    dcr_receiver_t **recv;
    int nrecv;
    uint8_t *xor_allowed;
    dcr_constructor_t *con;
    dcr_transport_t *transport;
    dcr_control_t *control;
    char dir[256];
    int incarnation;
} pipe_t;

static void pipe_dense(pipe_t *p, int i, dcr_receiver_t **out)
{
    assert_int_equal(
        dcr_serve_receiver_create(&p->sc->model, p->sc->inventory, &p->serve, i, NULL, out),
        DCR_OK);
    assert_int_equal(dcr_receiver_load_dense_all(*out, p->canonical), DCR_OK);
    assert_int_equal(dcr_receiver_prewarm(*out), DCR_OK);
}

/* f: the injector of the pipeline's faulty transport and control plane
 * ("faulty:<transport>", "faulty:sqlite"); NULL: the real ones. */
static void pipe_open_faulty(pipe_t *p, const char *transport, dcr_faults_t *f)
{
    memset(p, 0, sizeof(*p));
    p->cfg = dcr_faults_run_config_default().bench;
    p->cfg.run.transport = transport;
    p->serve = p->cfg.run.serve;
    dcr_scenario_spec_t spec = p->cfg.run.scenario;
    spec.align_extra = p->serve.tp;
    assert_int_equal(dcr_scenario_create(&spec, &p->sc), DCR_OK);
    assert_int_equal(dcr_serve_config_validate(&p->sc->model, &p->serve), DCR_OK);
    assert_int_equal(dcr_serve_register_loaders(), DCR_OK);
    p->nc = dcr_inventory_count(p->sc->inventory);
    p->ns = (size_t)p->sc->layout->nshards;
    assert_int_equal(dcr_scenario_alloc_canonical(p->sc, &p->canonical), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(p->sc, &p->committed), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(p->sc, &p->candidate), DCR_OK);
    dcr_scenario_init_weights(p->sc, 42, p->canonical);
    assert_int_equal(dcr_megatron_import(&p->sc->model, &p->sc->train, p->sc->layout, p->canonical,
                                         p->committed),
                     DCR_OK);
    p->nrecv = dcr_serve_receivers(&p->serve);
    p->recv = calloc((size_t)p->nrecv, sizeof(*p->recv));
    for (int i = 0; i < p->nrecv; i++) pipe_dense(p, i, &p->recv[i]);
    p->xor_allowed = calloc(p->nc + 1, 1);
    for (size_t c = 0; c < p->nc; c++)
        p->xor_allowed[c] = dcr_serve_xor_allowed(p->recv, p->nrecv, c);
    dcr_construct_config_t cc = dcr_construct_config_default();
    dcr_run_targets(&p->cfg.run, dcr_inventory_bytes(p->sc->inventory), p->sc->layout->world,
                    &cc.chunk_bytes, &cc.bucket_bytes);
    assert_int_equal(dcr_constructor_create(p->sc->layout, &cc, p->committed, &p->con), DCR_OK);
    assert_true(testfiles_tmpdir(p->dir, sizeof(p->dir), "faults"));
    char path[512];
    snprintf(path, sizeof(path), "%s/objstore", p->dir);
    dcr_transport_config_t tc = {.train_nodes = p->sc->train.nodes,
                                 .world = p->sc->layout->world,
                                 .rollout_nodes = p->serve.nodes,
                                 .link = p->cfg.run.link,
                                 .dir = path,
                                 .fanout = 2,
                                 .queue_payloads = 8};
    char name[64];
    snprintf(name, sizeof(name), "%s%s", f ? "faulty:" : "", transport);
    if (f) assert_int_equal(dcr_faults_bind(f), DCR_OK);
    assert_int_equal(dcr_transport_create(name, &tc, &p->transport), DCR_OK);
    snprintf(path, sizeof(path), "%s/control.db", p->dir);
    dcr_control_config_t ctl = {path, 0};
    assert_int_equal(dcr_control_create(f ? "faulty:sqlite" : "sqlite", &ctl, &p->control), DCR_OK);
    dcr_faults_unbind(f);
}

static void pipe_open(pipe_t *p, const char *transport)
{
    pipe_open_faulty(p, transport, NULL);
}

/* A coordinator with a new id over the pipeline's receivers and gates
 * (NULL: its own). */
static dcr_coord_t *pipe_coord_gated(pipe_t *p, int max_attempts, uint32_t deadline_ms,
                                     dcr_rl_mode_t rl, dcr_gate_t *gate)
{
    char id[64];
    snprintf(id, sizeof(id), "test-%d-%d", (int)getpid(), ++p->incarnation);
    dcr_coord_config_t cc = dcr_coord_config_default(id, p->serve.gpus_per_node);
    cc.max_attempts = max_attempts;
    cc.deadline_ms = deadline_ms;
    cc.rl = rl;
    dcr_coord_parties_t parties = {
        p->con,   p->sc->layout->world, p->transport, p->control, p->recv,
        p->nrecv, p->xor_allowed,       gate};
    dcr_coord_t *c = NULL;
    assert_int_equal(dcr_coord_create(&cc, &parties, &c), DCR_OK);
    return c;
}

static dcr_coord_t *pipe_coord(pipe_t *p, int max_attempts, uint32_t deadline_ms)
{
    return pipe_coord_gated(p, max_attempts, deadline_ms, DCR_RL_SYNC, NULL);
}

/* The next training step's weights in p->candidate (uniform 3% changes). */
static void pipe_step(pipe_t *p, uint64_t seed)
{
    for (size_t s = 0; s < p->ns; s++)
        memcpy(p->candidate[s]->data, p->committed[s]->data, p->committed[s]->bytes);
    int64_t changed = 0;
    assert_int_equal(
        dcr_scenario_inject_uniform(p->sc, 0.03, seed, p->candidate, p->canonical, &changed),
        DCR_OK);
    assert_true(changed > 0);
}

static void pipe_commit(pipe_t *p)
{
    dcr_storage_t **swap = p->committed;
    p->committed = p->candidate;
    p->candidate = swap;
}

/* Whether receiver x (slot i) equals a dense refit of the training shards `weights`. */
static bool pipe_equal_dense(pipe_t *p, dcr_storage_t **weights, int i, const dcr_receiver_t *x)
{
    assert_int_equal(
        dcr_megatron_export(&p->sc->model, &p->sc->train, p->sc->layout, weights, p->canonical),
        DCR_OK);
    dcr_receiver_t *dense = NULL;
    pipe_dense(p, i, &dense);
    const char *param = NULL;
    int64_t elem = -1;
    bool eq = dcr_receiver_equal(x, dense, &param, &elem);
    if (!eq) print_message("receiver %d differs at %s[%lld]\n", i, param, (long long)elem);
    dcr_receiver_destroy(dense);
    return eq;
}

/* Every live receiver of c against a dense refit of p->committed. */
static void pipe_verify(pipe_t *p, dcr_coord_t *c)
{
    for (int i = 0; i < p->nrecv; i++)
        if (dcr_coord_receiver_alive(c, i))
            assert_true(pipe_equal_dense(p, p->committed, i, dcr_coord_receiver(c, i)));
}

static uint64_t pipe_version(pipe_t *p)
{
    dcr_commit_record_t rec;
    assert_int_equal(dcr_control_read(p->control, &rec), DCR_OK);
    return rec.version;
}

static dcr_status_t pipe_restore(void *ctx, int i, uint64_t version, dcr_receiver_t **out_p)
{
    (void)version;
    pipe_t *p = ctx;
    assert_int_equal(dcr_megatron_export(&p->sc->model, &p->sc->train, p->sc->layout, p->committed,
                                         p->canonical),
                     DCR_OK);
    pipe_dense(p, i, out_p);
    return DCR_OK;
}

static void pipe_close(pipe_t *p, dcr_receiver_t **extra, int nextra)
{
    dcr_control_destroy(p->control);
    dcr_transport_destroy(p->transport);
    dcr_constructor_destroy(p->con);
    for (int i = 0; i < p->nrecv; i++) dcr_receiver_destroy(p->recv[i]);
    for (int i = 0; i < nextra; i++) dcr_receiver_destroy(extra[i]);
    free(p->recv);
    free(p->xor_allowed);
    dcr_scenario_free_tensors(p->canonical, p->nc);
    dcr_scenario_free_tensors(p->committed, p->ns);
    dcr_scenario_free_tensors(p->candidate, p->ns);
    dcr_scenario_destroy(p->sc);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p->dir);
    assert_int_equal(system(cmd), 0);
}

static void test_replaced_coordinator_refused(void **state)
{
    (void)state;
    pipe_t p;
    pipe_open(&p, "objstore");
    dcr_coord_t *a = pipe_coord(&p, 3, 600000);
    dcr_coord_t *b = pipe_coord(&p, 3, 600000); /* the failover: a new id */
    pipe_step(&p, 1);
    dcr_refit_result_t r;
    assert_int_equal(dcr_coord_refit(b, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 1);
    /* The replaced coordinator's prepare is refused; nothing is retried. */
    pipe_step(&p, 2);
    assert_int_equal(dcr_coord_refit(a, p.candidate, &r), DCR_ECONFLICT);
    assert_non_null(strstr(dcr_error_detail(), "replaced"));
    assert_int_equal(pipe_version(&p), 1);
    pipe_verify(&p, b);
    /* The active coordinator goes on. */
    assert_int_equal(dcr_coord_refit(b, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 2);
    pipe_verify(&p, b);
    dcr_coord_destroy(a);
    dcr_coord_destroy(b);
    pipe_close(&p, NULL, 0);
}

static void test_restart_restores_and_no_live_stops(void **state)
{
    (void)state;
    pipe_t p;
    pipe_open(&p, "relay");
    dcr_coord_t *c = pipe_coord(&p, 3, 600000);
    dcr_refit_result_t r;
    /* A dead receiver is left out of the transition... */
    assert_int_equal(dcr_coord_receiver_kill(c, 1), DCR_OK);
    pipe_step(&p, 11);
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(dcr_coord_live_receivers(c), p.nrecv - 1);
    /* ...and restores the committed version by a dense refit before it joins. */
    dcr_receiver_t *old = p.recv[1];
    assert_int_equal(dcr_coord_receiver_restart(c, 1, pipe_restore, &p), DCR_OK);
    p.recv[1] = dcr_coord_receiver(c, 1);
    assert_true(dcr_coord_receiver_alive(c, 1));
    pipe_verify(&p, c);
    pipe_step(&p, 12);
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 2);
    pipe_verify(&p, c);
    /* No live receiver: one clear stop, version 2 stays committed. */
    for (int i = 0; i < p.nrecv; i++) assert_int_equal(dcr_coord_receiver_kill(c, i), DCR_OK);
    pipe_step(&p, 13);
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_EFATAL);
    assert_non_null(strstr(dcr_error_detail(), "no live receiver"));
    assert_non_null(strstr(dcr_error_detail(), "version 2 stays committed"));
    assert_int_equal(pipe_version(&p), 2);
    dcr_coord_destroy(c);
    pipe_close(&p, &old, 1);
}

/* A death the rollout side reports on a receiver's gate between
 * transitions (no attempt meets it) leaves the receiver out of the next
 * transition and of the recorded membership; a restore brings it back. */
static void test_gate_death_between_transitions(void **state)
{
    (void)state;
    pipe_t p;
    pipe_open(&p, "objstore");
    dcr_gate_t *gate = NULL;
    assert_int_equal(dcr_gate_create(p.nrecv, &gate), DCR_OK);
    dcr_coord_t *a = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    dcr_gate_kill(gate, 1);
    /* A coordinator created after the death (binding the same receivers)
     * meets it too. */
    dcr_coord_destroy(a);
    a = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    pipe_step(&p, 14);
    dcr_refit_result_t r;
    assert_int_equal(dcr_coord_refit(a, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(r.attempts, 1);
    assert_false(dcr_coord_receiver_alive(a, 1));
    assert_int_equal(dcr_coord_live_receivers(a), p.nrecv - 1);
    assert_false(dcr_gate_is_open(gate, 1)); /* the commit vouches for nothing dead */
    pipe_verify(&p, a);
    /* Recorded: a new coordinator starts without it. */
    dcr_coord_t *b = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    assert_false(dcr_coord_receiver_alive(b, 1));
    dcr_receiver_t *old = p.recv[1];
    assert_int_equal(dcr_coord_receiver_restart(b, 1, pipe_restore, &p), DCR_OK);
    p.recv[1] = dcr_coord_receiver(b, 1);
    assert_false(dcr_gate_dead(gate, 1));
    assert_true(dcr_gate_is_open(gate, 1));
    pipe_step(&p, 15);
    assert_int_equal(dcr_coord_refit(b, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(dcr_coord_live_receivers(b), p.nrecv);
    pipe_verify(&p, b);
    dcr_coord_destroy(a);
    dcr_coord_destroy(b);
    dcr_gate_destroy(gate);
    pipe_close(&p, &old, 1);
}

/* A commit after its deadline is refused; the retry commits in time. */
static void test_commit_deadline(void **state)
{
    (void)state;
    dcr_faults_t *f = NULL;
    assert_int_equal(dcr_faults_create(5, &f), DCR_OK);
    pipe_t p;
    pipe_open_faulty(&p, "objstore", f);
    /* Wide margins: the retry must commit within the deadline even under
     * sanitizers on a loaded 2-core CI machine. */
    dcr_coord_t *c = pipe_coord(&p, 3, 2000);
    /* A busy control plane answers the commit 2600 ms late, past the 2000 ms deadline. */
    dcr_fault_t busy_commit = {DCR_FAULT_CONTROL_BUSY, -1, 0, 2600, 1, DCR_COORD_STEP_PREPARE};
    /* Calls of attempt 1: prepare, the acks of 4 receivers, then commit. */
    busy_commit.nth = 1 + p.nrecv;
    assert_int_equal(dcr_faults_arm(f, &busy_commit), DCR_OK);
    pipe_step(&p, 21);
    dcr_refit_result_t r;
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    int64_t counts[DCR_FAULT_KIND_COUNT];
    dcr_faults_counts(f, counts);
    assert_int_equal(counts[DCR_FAULT_CONTROL_BUSY], 1);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(pipe_version(&p), 1);
    pipe_verify(&p, c);
    dcr_coord_destroy(c);
    pipe_close(&p, NULL, 0);
    dcr_faults_destroy(f);
}

/* Retries that cannot repair: a clean stop, v kept, receivers with partial
 * writes out until restored; then the pipeline goes on bit-exactly. */
static void test_retries_exhausted(void **state)
{
    (void)state;
    dcr_faults_t *f = NULL;
    assert_int_equal(dcr_faults_create(6, &f), DCR_OK);
    pipe_t p;
    pipe_open_faulty(&p, "relay", f);
    dcr_coord_t *c = pipe_coord(&p, 2, 600000);
    /* Owner 0's second payload is lost in both attempts. */
    dcr_fault_t drop = {DCR_FAULT_DROP, 0, 1, 0, 0, DCR_COORD_STEP_PREPARE};
    assert_int_equal(dcr_faults_arm(f, &drop), DCR_OK);
    drop.nth = 0;
    assert_int_equal(dcr_faults_arm(f, &drop), DCR_OK);
    pipe_step(&p, 31);
    dcr_refit_result_t r;
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_EFATAL);
    assert_non_null(strstr(dcr_error_detail(), "version 0 stays committed"));
    assert_int_equal(pipe_version(&p), 0);
    dcr_faults_disarm(f);
    /* Untouched receivers still hold P^0; touched ones are restored. */
    pipe_verify(&p, c);
    dcr_receiver_t *old[16];
    int nold = 0;
    for (int i = 0; i < p.nrecv; i++) {
        if (dcr_coord_receiver_alive(c, i)) continue;
        old[nold++] = p.recv[i];
        assert_int_equal(dcr_coord_receiver_restart(c, i, pipe_restore, &p), DCR_OK);
        p.recv[i] = dcr_coord_receiver(c, i);
    }
    pipe_step(&p, 32);
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 1);
    pipe_verify(&p, c);
    dcr_coord_destroy(c);
    pipe_close(&p, old, nold);
    dcr_faults_destroy(f);
}

/* A payload handed twice to a node's receivers: dropped by rule, no retry. */
static void test_duplicate_dropped_by_receivers(void **state)
{
    (void)state;
    const char *transports[] = {"objstore", "relay"};
    for (int t = 0; t < 2; t++) {
        dcr_faults_t *f = NULL;
        assert_int_equal(dcr_faults_create(7, &f), DCR_OK);
        pipe_t p;
        pipe_open_faulty(&p, transports[t], f);
        dcr_coord_t *c = pipe_coord(&p, 3, 600000);
        dcr_fault_t dup = {DCR_FAULT_DUPLICATE, 0, 1, 0, 0, DCR_COORD_STEP_PREPARE};
        assert_int_equal(dcr_faults_arm(f, &dup), DCR_OK);
        pipe_step(&p, 41);
        dcr_refit_result_t r;
        assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
        pipe_commit(&p);
        assert_int_equal(r.attempts, 1);
        /* Every receiver of node 0 dropped the copy. */
        assert_int_equal(r.duplicates, (uint64_t)p.serve.gpus_per_node);
        /* Counted once, as it happened. */
        int64_t counts[DCR_FAULT_KIND_COUNT];
        dcr_faults_counts(f, counts);
        assert_int_equal(counts[DCR_FAULT_DUPLICATE], 1);
        pipe_verify(&p, c);
        dcr_coord_destroy(c);
        pipe_close(&p, NULL, 0);
        dcr_faults_destroy(f);
    }
}

/* A coordinator crash at every protocol step, in both RL modes: a receiver
 * that may hold a mix (it took payloads) keeps its gate closed after the
 * crash; a gate left open shows P^v; the new coordinator reopens every gate
 * only once its retry, or the crashed one's commit, vouches for P^{v+1}. */
static void test_crash_keeps_mixed_receivers_gated(void **state)
{
    (void)state;
    for (int rl = DCR_RL_SYNC; rl <= DCR_RL_ASYNC; rl++) {
        for (int step = 0; step < DCR_COORD_STEP_COUNT; step++) {
            dcr_faults_t *f = NULL;
            assert_int_equal(dcr_faults_create(8, &f), DCR_OK);
            pipe_t p;
            pipe_open_faulty(&p, "objstore", f);
            dcr_gate_t *gate = NULL;
            assert_int_equal(dcr_gate_create(p.nrecv, &gate), DCR_OK);
            dcr_coord_t *a = pipe_coord_gated(&p, 3, 600000, (dcr_rl_mode_t)rl, gate);
            dcr_fault_t crash = {DCR_FAULT_COORD_CRASH, -1, 0, 0, 0, (dcr_coord_step_t)step};
            assert_int_equal(dcr_faults_arm(f, &crash), DCR_OK);
            pipe_step(&p, 51 + (uint64_t)step);
            dcr_refit_result_t r;
            assert_int_not_equal(dcr_coord_refit(a, p.candidate, &r), DCR_OK);
            assert_true(dcr_faults_take_crash(f));
            assert_int_equal(pipe_version(&p), step == DCR_COORD_STEP_COMMITTED ? 1 : 0);
            int closed = 0;
            for (int i = 0; i < p.nrecv; i++) {
                if (!dcr_gate_is_open(gate, i)) {
                    closed++;
                    continue;
                }
                assert_false(dcr_gate_dirty(gate, i));
                assert_true(pipe_equal_dense(&p, p.committed, i, p.recv[i]));
            }
            print_message("  %s RL, crash at %-9s: %d of %d gates closed\n",
                          dcr_rl_mode_name((dcr_rl_mode_t)rl),
                          dcr_coord_step_name((dcr_coord_step_t)step), closed, p.nrecv);
            /* From the acknowledgments on, every receiver has applied the delta. */
            if (step >= DCR_COORD_STEP_ACK) assert_int_equal(closed, p.nrecv);
            dcr_coord_destroy(a);
            dcr_coord_t *b = pipe_coord_gated(&p, 3, 600000, (dcr_rl_mode_t)rl, gate);
            assert_int_equal(dcr_coord_resume(b, p.candidate, 0, &r), DCR_OK);
            pipe_commit(&p);
            assert_int_equal(pipe_version(&p), 1);
            for (int i = 0; i < p.nrecv; i++) {
                assert_true(dcr_gate_is_open(gate, i));
                assert_false(dcr_gate_dirty(gate, i));
            }
            pipe_verify(&p, b);
            dcr_coord_destroy(b);
            dcr_gate_destroy(gate);
            pipe_close(&p, NULL, 0);
            dcr_faults_destroy(f); /* after the backends that inject its faults */
        }
    }
}

/* Membership is durable in the (SQLite) control plane: a receiver killed
 * between transitions and one that dies mid-attempt are out for the new
 * coordinator after a crash, a restart is in for the next one, and the
 * crashed coordinator can no longer change it. */
static void test_membership_survives_failover(void **state)
{
    (void)state;
    dcr_faults_t *f = NULL;
    assert_int_equal(dcr_faults_create(9, &f), DCR_OK);
    pipe_t p;
    pipe_open_faulty(&p, "objstore", f);
    dcr_gate_t *gate = NULL;
    assert_int_equal(dcr_gate_create(p.nrecv, &gate), DCR_OK);
    dcr_faults_set_rollout(f, gate, p.serve.gpus_per_node); /* kills mark these gates */
    dcr_coord_t *a = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    assert_int_equal(dcr_coord_receiver_kill(a, 1), DCR_OK);
    /* Receiver 2 dies in its first apply; the retry crashes before its commit. */
    dcr_fault_t kill = {DCR_FAULT_KILL_APPLY, 2, 0, 0, 0, DCR_COORD_STEP_PREPARE};
    dcr_fault_t crash = {DCR_FAULT_COORD_CRASH, -1, 0, 0, 0, DCR_COORD_STEP_COMMIT};
    assert_int_equal(dcr_faults_arm(f, &kill), DCR_OK);
    assert_int_equal(dcr_faults_arm(f, &crash), DCR_OK);
    pipe_step(&p, 61);
    dcr_refit_result_t r;
    assert_int_not_equal(dcr_coord_refit(a, p.candidate, &r), DCR_OK);
    assert_true(dcr_faults_take_crash(f));
    assert_int_equal(dcr_coord_last_attempts(a), 2);
    dcr_coord_t *b = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    for (int i = 0; i < p.nrecv; i++) {
        assert_int_equal(dcr_coord_receiver_alive(b, i), dcr_coord_receiver_alive(a, i));
        assert_int_equal(dcr_coord_receiver_alive(b, i), i != 1 && i != 2);
        if (i == 1 || i == 2) assert_false(dcr_gate_is_open(gate, i));
    }
    assert_int_equal(dcr_coord_resume(b, p.candidate, 0, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 1);
    pipe_verify(&p, b);
    /* The replaced coordinator is refused; the active one restarts receiver 1. */
    assert_int_equal(dcr_coord_receiver_kill(a, 0), DCR_ECONFLICT);
    assert_true(dcr_gate_is_open(gate, 0));
    dcr_receiver_t *old = p.recv[1];
    assert_int_equal(dcr_coord_receiver_restart(b, 1, pipe_restore, &p), DCR_OK);
    p.recv[1] = dcr_coord_receiver(b, 1);
    assert_true(dcr_gate_is_open(gate, 1));
    dcr_coord_t *c = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    for (int i = 0; i < p.nrecv; i++) assert_int_equal(dcr_coord_receiver_alive(c, i), i != 2);
    pipe_verify(&p, c);
    dcr_coord_destroy(a);
    dcr_coord_destroy(b);
    dcr_coord_destroy(c);
    dcr_gate_destroy(gate);
    pipe_close(&p, &old, 1);
    dcr_faults_destroy(f);
}

/* A coordinator crashes after its receivers applied the delta; its
 * successor's retry fails for good. The receivers hold the crashed one's
 * partial writes, not P^v: they leave the membership with their gates
 * closed (also for the next coordinator), and rejoin by a dense refit. */
static void test_stop_after_failover_keeps_mixed_receivers_out(void **state)
{
    (void)state;
    dcr_faults_t *f = NULL;
    assert_int_equal(dcr_faults_create(10, &f), DCR_OK);
    pipe_t p;
    pipe_open_faulty(&p, "relay", f);
    dcr_gate_t *gate = NULL;
    assert_int_equal(dcr_gate_create(p.nrecv, &gate), DCR_OK);
    dcr_coord_t *a = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    dcr_fault_t crash = {DCR_FAULT_COORD_CRASH, -1, 0, 0, 0, DCR_COORD_STEP_ACK};
    assert_int_equal(dcr_faults_arm(f, &crash), DCR_OK);
    pipe_step(&p, 71);
    dcr_refit_result_t r;
    assert_int_not_equal(dcr_coord_refit(a, p.candidate, &r), DCR_OK);
    assert_true(dcr_faults_take_crash(f));
    dcr_coord_destroy(a);
    /* The successor has one attempt, and owner 0's first payload is lost. */
    dcr_fault_t drop = {DCR_FAULT_DROP, 0, 0, 0, 0, DCR_COORD_STEP_PREPARE};
    assert_int_equal(dcr_faults_arm(f, &drop), DCR_OK);
    dcr_coord_t *b = pipe_coord_gated(&p, 1, 600000, DCR_RL_SYNC, gate);
    assert_int_equal(dcr_coord_resume(b, p.candidate, 0, &r), DCR_EFATAL);
    dcr_faults_disarm(f);
    assert_int_equal(pipe_version(&p), 0);
    dcr_coord_t *c = pipe_coord_gated(&p, 3, 600000, DCR_RL_SYNC, gate);
    dcr_receiver_t *old[16];
    int nold = 0;
    for (int i = 0; i < p.nrecv; i++) {
        assert_true(dcr_gate_dirty(gate, i));
        assert_false(dcr_gate_is_open(gate, i));
        assert_false(dcr_coord_receiver_alive(b, i));
        assert_false(dcr_coord_receiver_alive(c, i));
        old[nold++] = p.recv[i];
        assert_int_equal(dcr_coord_receiver_restart(c, i, pipe_restore, &p), DCR_OK);
        p.recv[i] = dcr_coord_receiver(c, i);
        assert_true(dcr_gate_is_open(gate, i));
    }
    pipe_verify(&p, c);
    pipe_step(&p, 72);
    assert_int_equal(dcr_coord_refit(c, p.candidate, &r), DCR_OK);
    pipe_commit(&p);
    assert_int_equal(pipe_version(&p), 1);
    pipe_verify(&p, c);
    dcr_coord_destroy(b);
    dcr_coord_destroy(c);
    dcr_gate_destroy(gate);
    pipe_close(&p, old, nold);
    dcr_faults_destroy(f);
}

/* The gate check can fail: a watcher that opens a receiver's gate in the
 * middle of its apply (vouching falsely) is caught by the readers; the same
 * run without it sees no violation, in either RL mode. Sync RL only for the
 * broken run: in async RL the receivers apply after the delivery, where no
 * call of a wrapped backend lies, so no watcher can act mid-apply. */
static void test_broken_gate_is_caught(void **state)
{
    (void)state;
    for (int rl = DCR_RL_SYNC; rl <= DCR_RL_ASYNC; rl++) {
        dcr_faults_run_config_t c = small_run("objstore", 2);
        c.bench.run.rl = (dcr_rl_mode_t)rl;
        dcr_faults_summary_t s;
        if (rl == DCR_RL_SYNC) {
            c.break_gate = true;
            assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
            print_message("  %s RL, gate broken: %lld reads, %lld violations\n",
                          dcr_rl_mode_name((dcr_rl_mode_t)rl), (long long)s.gate_reads,
                          (long long)s.gate_violations);
            assert_true(s.gate_violations > 0);
            c.break_gate = false;
        }
        assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
        assert_clean(&s);
    }
}

/* The Figure 9 emulation, short: kills and restarts, every step checked. */
static void test_train_with_kills(void **state)
{
    (void)state;
    dcr_faults_run_config_t c = dcr_faults_run_config_default();
    c.steps = 8;
    c.kill_every = 2;
    c.restart_after = 2;
    dcr_faults_summary_t s;
    assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
    print_message("  train: kills %d, restores %d, retries %d, commits %d\n", s.kills, s.restores,
                  s.retries, s.commits);
    assert_clean(&s);
    assert_int_equal(s.kills, 4);
    assert_true(s.restores >= 3);
    assert_true(s.retries >= 4);
    assert_int_equal(s.commits, 8);
}

/* The property test: random interleavings of every kind over both
 * transports and RL modes, from a logged seed. */
static void test_campaign(void **state)
{
    (void)state;
    dcr_faults_campaign_config_t cc = dcr_faults_campaign_config_default();
    cc.seeds = 4;
    cc.base_seed = testkit_seed(1);
    print_message("  campaign seeds from %llu (DCR_TEST_SEED replays)\n",
                  (unsigned long long)cc.base_seed);
    dcr_faults_summary_t s;
    assert_int_equal(dcr_faults_campaign(&cc, &s), DCR_OK);
    print_message(
        "  campaign: faults %lld, attempts %d, retries %d, commits %d, stops %d, failovers %d\n",
        (long long)s.faults, s.attempts, s.retries, s.commits, s.stops, s.failovers);
    print_message("  campaign: %lld reads through the gate, %lld mixed; %d receivers checked "
                  "before a commit, %d without P^{v+1}; %d membership mismatches\n",
                  (long long)s.gate_reads, (long long)s.gate_violations, s.commit_checks,
                  s.commit_violations, s.membership_mismatches);
    assert_properties(&s);
    assert_true(s.faults > 0);
}

int main(void)
{
    if (!getenv("DCR_LOG")) dcr_log_set_level(DCR_LOG_ERROR);
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_payload_faults_on_relay),
        cmocka_unit_test(test_group_faults),
        cmocka_unit_test(test_coordinator_crash_every_step),
        cmocka_unit_test(test_failover_while_control_plane_down),
        cmocka_unit_test(test_crash_keeps_mixed_receivers_gated),
        cmocka_unit_test(test_broken_gate_is_caught),
        cmocka_unit_test(test_membership_survives_failover),
        cmocka_unit_test(test_stop_after_failover_keeps_mixed_receivers_out),
        cmocka_unit_test(test_replaced_coordinator_refused),
        cmocka_unit_test(test_restart_restores_and_no_live_stops),
        cmocka_unit_test(test_gate_death_between_transitions),
        cmocka_unit_test(test_commit_deadline),
        cmocka_unit_test(test_retries_exhausted),
        cmocka_unit_test(test_duplicate_dropped_by_receivers),
        cmocka_unit_test(test_train_with_kills),
        cmocka_unit_test(test_campaign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
