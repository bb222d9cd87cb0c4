/* The simulator against the engine: bench runs and their simulated twins. */
#include "sim/validate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/log.h"
#include "dcr/spawn.h"
#include "sim/calibrate.h"

/* The engine's object store polls its prefix every 1 ms after something new
 * appeared, doubling to 8 ms while nothing changes; a payload waits about
 * half an interval before a node sees it. */
#define DCR__DIR_STORE_LIST_MS 2.0

dcr_status_t dcr_sim_spec_from_bench(const dcr_bench_config_t *b, const dcr_sim_calibration_t *cal,
                                     dcr_sim_spec_t *out_p)
{
    dcr_sim_spec_t s = dcr_sim_spec_default();
    s.scenario = b->run.scenario;
    s.serve_tp = b->run.serve.tp;
    s.serve_ep = b->run.serve.ep;
    s.transport = b->run.transport;
    s.change_rate = b->run.change_rate;
    s.mode = b->run.mode;
    dcr_sim_cluster_t *c = &s.cluster;
    c->train_nodes = b->run.scenario.train.nodes;
    c->train_gpus = b->run.scenario.train.gpus_per_node;
    c->rollout_nodes = b->run.serve.nodes;
    c->rollout_gpus = b->run.serve.gpus_per_node ? b->run.serve.gpus_per_node : b->run.serve.tp;
    c->cross_gbps = b->run.link.cross_gbps;
    c->flow_gbps = b->run.link.flow_gbps;
    c->local_gbps = b->run.link.local_gbps;
    c->latency_ms = b->run.link.latency_ms;
    c->local_latency_ms = 0;
    c->fabric_gbps = 0;
    c->store_gbps = 0;
    c->store_latency_ms = 0;
    c->store_list_ms = DCR__DIR_STORE_LIST_MS;
    c->store_put_ms = cal->store_put_s * 1e3;
    c->fanout = b->run.fanout > 0 ? b->run.fanout : 2;
    c->shared_cores = cal->cores;
    c->ack_rtt = false; /* the emulation paces data, not the acknowledgments */
    c->ref_object_mib = 8;
    /* The bench's own construct config: its targets scaled to its
     * checkpoint, and its first payload's (the constructor resolves 0). */
    dcr_scenario_spec_t spec = b->run.scenario;
    spec.align_extra = b->run.serve.tp;
    dcr_scenario_t *sc = NULL;
    DCR_CHECK(dcr_scenario_create(&spec, &sc));
    dcr_construct_config_t cc = dcr_run_construct_config(&b->run, sc);
    s.chunk_bytes = cc.chunk_bytes;
    s.bucket_bytes = cc.bucket_bytes;
    s.first_bucket_bytes = cc.first_bucket_bytes;
    dcr_scenario_destroy(sc);
    *out_p = s;
    return DCR_OK;
}

static dcr_bench_config_t dcr__short(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.warmup = 1;
    c.refits = 5;
    c.verify = false;
    return c;
}

void dcr_sim_validation_case(int i, dcr_bench_config_t *cfg_p, const char **name_p)
{
    dcr_bench_config_t c = dcr__short();
    const char *name = "";
    switch (i) {
    case 0:
        name = "qwen3-30b objstore 3%";
        break;
    case 1:
        name = "qwen3-30b relay 5%";
        c.run.transport = "relay";
        c.run.change_rate = 0.05;
        break;
    case 2:
        name = "qwen3-30b objstore 5%, 4 nodes, 0.1 Gbps";
        c.run.serve.nodes = 4;
        c.run.serve.gpus_per_node = 1;
        c.run.serve.tp = 1;
        c.run.link.cross_gbps = 0.1;
        c.run.link.flow_gbps = 0.08;
        c.run.change_rate = 0.05;
        break;
    case 3:
        name = "qwen2.5-0.5b objstore 1%, 1x2 train, 3 nodes";
        c.run.scenario.model = "qwen2.5-0.5b";
        c.run.scenario.scale = 4;
        c.run.scenario.layers = 24;
        c.run.scenario.train = (dcr_train_config_t){1, 2, 2, 0, 1, 1, 0}; /* ETP: 1 (dense) */
        c.run.serve.nodes = 3;
        c.run.serve.gpus_per_node = 1;
        c.run.serve.tp = 1;
        c.run.change_rate = 0.01;
        break;
    case 4:
        name = "nemotron-3-nano relay 3%, 3 nodes";
        c.run.scenario.model = "nemotron-3-nano-30b-a3b";
        c.run.transport = "relay";
        c.run.serve.nodes = 3;
        break;
    default:
        name = "qwen3-30b relay 1%, 4 nodes x 2, 0.1 Gbps";
        c.run.transport = "relay";
        c.run.serve.nodes = 4;
        c.run.link.cross_gbps = 0.1;
        c.run.link.flow_gbps = 0.08;
        c.run.change_rate = 0.01;
        break;
    }
    *cfg_p = c;
    *name_p = name;
}

/* The median refit latency: on a shared machine an occasional refit stalls
 * (a slow fsync of the commit, a late timer) and would pull a mean of a few
 * refits far from the typical one. */
static dcr_status_t dcr__median_latency(const dcr_bench_result_t *r, double *out_p)
{
    double *v = malloc((size_t)(r->nrefits > 0 ? r->nrefits : 1) * sizeof(*v));
    if (v == NULL) return dcr_error_set(DCR_ENOMEM, "validation: %d refit latencies", r->nrefits);
    for (int i = 0; i < r->nrefits; i++) v[i] = r->refits[i].latency_s;
    *out_p = dcr_sim_median(v, r->nrefits);
    free(v);
    return DCR_OK;
}

static double dcr__mean_construct(const dcr_bench_result_t *r)
{
    double s = 0;
    for (int i = 0; i < r->nrefits; i++) s += r->refits[i].construction_s;
    return r->nrefits ? s / r->nrefits : 0;
}

/* The simulated figures of a row, and its latency error. */
static void dcr__predicted(dcr_sim_validation_row_t *row, const dcr_sim_result_t *sim)
{
    row->predicted_s = sim->latency_s;
    row->predicted_ref_s = sim->reference_s;
    row->predicted_payload = (double)sim->payload_bytes;
    row->predicted_construct_end_s = sim->construction_end_s;
    row->predicted_construction_lb_s = sim->construction_lb_s;
    row->predicted_transport_lb_s = sim->transport_lb_s;
    row->predicted_finalization_s = sim->finalization_s;
    row->error = row->measured_s > 0 ? sim->latency_s / row->measured_s - 1 : 0;
}

dcr_status_t dcr_sim_validate_one(const dcr_bench_config_t *bench, const dcr_sim_calibration_t *cal,
                                  dcr_sim_validation_row_t *out_p)
{
    dcr_sim_spec_t spec;
    DCR_CHECK(dcr_sim_spec_from_bench(bench, cal, &spec));
    dcr_sim_result_t sim;
    DCR_CHECK(dcr_sim_run(&spec, cal, &sim));
    dcr_bench_result_t r;
    DCR_CHECK(dcr_bench_run(bench, &r));
    dcr_sim_validation_row_t row;
    memset(&row, 0, sizeof(row));
    dcr_status_t st = dcr__median_latency(&r, &row.measured_s);
    if (st != DCR_OK) {
        dcr_bench_result_free(&r);
        return st;
    }
    row.measured_ref_s = r.reference_s;
    row.measured_payload = r.payload_bytes_mean;
    row.measured_construct_s = dcr__mean_construct(&r);
    row.measured_construction_lb_s = r.construction_lb_mean_s;
    row.measured_transport_lb_s = r.transport_lb_mean_s;
    row.measured_finalization_s = r.finalization_mean_s;
    dcr__predicted(&row, &sim);
    dcr_bench_result_free(&r);
    *out_p = row;
    return DCR_OK;
}

/* ---- testbed cases ---------------------------------------------------------------- */

/* The shortest of %.15g and %.17g that reads back as v: a flag that runs
 * exactly v and reads as the value a person would type (0.03, not
 * 0.029999999999999999). */
static const char *dcr__exact(double v, char buf[32])
{
    snprintf(buf, 32, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, 32, "%.17g", v);
    return buf;
}

/* Appends one argument (copied into a's buffer). */
static dcr_status_t dcr__arg(dcr_sim_bench_argv_t *a, size_t *used, const char *text)
{
    size_t n = strlen(text) + 1;
    if (*used + n > sizeof(a->buf) || a->argc + 1 >= DCR_SIM_BENCH_ARGV_MAX)
        return dcr_error_set(DCR_EINVAL, "validation: the bench flags need more than %zu bytes",
                             sizeof(a->buf));
    memcpy(a->buf + *used, text, n);
    a->argv[a->argc++] = a->buf + *used;
    a->argv[a->argc] = NULL;
    *used += n;
    return DCR_OK;
}

static dcr_status_t dcr__flag_int(dcr_sim_bench_argv_t *a, size_t *used, const char *flag, int v)
{
    char text[32];
    snprintf(text, sizeof(text), "%d", v);
    DCR_CHECK(dcr__arg(a, used, flag));
    return dcr__arg(a, used, text);
}

static dcr_status_t dcr__flag_str(dcr_sim_bench_argv_t *a, size_t *used, const char *flag,
                                  const char *v)
{
    DCR_CHECK(dcr__arg(a, used, flag));
    return dcr__arg(a, used, v);
}

dcr_status_t dcr_sim_bench_argv(const dcr_bench_config_t *c, dcr_sim_bench_argv_t *out_p)
{
    const dcr_scenario_spec_t *sc = &c->run.scenario;
    char num[32];
    size_t used = 0;
    out_p->argc = 0;
    out_p->argv[0] = NULL;
    dcr_sim_bench_argv_t *a = out_p;
    DCR_CHECK(dcr__flag_str(a, &used, "--model", sc->model));
    DCR_CHECK(dcr__flag_int(a, &used, "--scale", sc->scale));
    DCR_CHECK(dcr__flag_int(a, &used, "--layers", sc->layers));
    DCR_CHECK(dcr__flag_int(a, &used, "--train-nodes", sc->train.nodes));
    DCR_CHECK(dcr__flag_int(a, &used, "--gpus-per-node", sc->train.gpus_per_node));
    DCR_CHECK(dcr__flag_int(a, &used, "--tp", sc->train.tp));
    DCR_CHECK(dcr__flag_int(a, &used, "--rollout-nodes", c->run.serve.nodes));
    DCR_CHECK(
        dcr__flag_int(a, &used, "--receivers-per-node",
                      c->run.serve.gpus_per_node ? c->run.serve.gpus_per_node : c->run.serve.tp));
    DCR_CHECK(dcr__flag_int(a, &used, "--serve-tp", c->run.serve.tp));
    DCR_CHECK(dcr__flag_str(a, &used, "--transport", c->run.transport));
    DCR_CHECK(dcr__flag_str(a, &used, "--change-rate", dcr__exact(c->run.change_rate, num)));
    DCR_CHECK(dcr__flag_str(a, &used, "--link-gbps", dcr__exact(c->run.link.cross_gbps, num)));
    DCR_CHECK(dcr__flag_str(a, &used, "--flow-gbps", dcr__exact(c->run.link.flow_gbps, num)));
    DCR_CHECK(dcr__flag_str(a, &used, "--latency-ms", dcr__exact(c->run.link.latency_ms, num)));
    DCR_CHECK(dcr__flag_int(a, &used, "--warmup", c->warmup));
    DCR_CHECK(dcr__flag_int(a, &used, "--refits", c->refits));
    if (!c->verify) DCR_CHECK(dcr__arg(a, &used, "--no-verify"));
    return DCR_OK;
}

dcr_status_t dcr_sim_bench_args(const dcr_bench_config_t *c, char *buf, size_t cap)
{
    dcr_sim_bench_argv_t *a = malloc(sizeof(*a));
    if (!a) return dcr_error_set(DCR_ENOMEM, "validation: bench flags");
    dcr_status_t st = dcr_sim_bench_argv(c, a);
    size_t used = 0;
    for (int i = 0; st == DCR_OK && i < a->argc; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s", i ? " " : "", a->argv[i]);
        if (n < 0 || (size_t)n >= cap - used)
            st = dcr_error_set(DCR_EINVAL, "validation: the bench flags need more than %zu bytes",
                               cap);
        else
            used += (size_t)n;
    }
    if (st == DCR_OK && a->argc == 0 && cap > 0) buf[0] = '\0';
    free(a);
    return st;
}

void dcr_sim_testbed_case(int i, dcr_bench_config_t *cfg_p, const char **name_p)
{
    (void)i; /* one case so far */
    dcr_bench_config_t c = dcr__short();
    c.run.link.flow_gbps = 0;
    c.run.link.latency_ms = 0;
    *cfg_p = c;
    *name_p = "testbed: qwen3-30b objstore 3%, 2+2 hosts";
}

/* Runs argv (no shell) with no input and its output discarded; its exit
 * status (-1: it could not run or was killed). */
static int dcr__run_quiet(char *const *argv)
{
    dcr_spawn_options_t o = {
        .in = {DCR_SPAWN_DEVNULL}, .out = {DCR_SPAWN_DEVNULL}, .err = {DCR_SPAWN_DEVNULL}};
    int status = 0;
    if (dcr_spawn_run(&o, argv, NULL, 0, &status) != DCR_OK) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool dcr_sim_testbed_usable(int id, char *why, size_t cap)
{
    if (geteuid() != 0) {
        snprintf(why, cap, "not root (network namespaces and tc need CAP_NET_ADMIN)");
        return false;
    }
    char ns[64];
    snprintf(ns, sizeof(ns), "dcrtb-%d-probe", id);
    char *add[] = {"ip", "netns", "add", ns, NULL};
    char *enter[] = {"ip", "netns", "exec", ns, "true", NULL};
    char *del[] = {"ip", "netns", "del", ns, NULL};
    int rc = dcr__run_quiet(add);
    if (rc == 0) rc = dcr__run_quiet(enter);
    dcr__run_quiet(del);
    if (rc != 0) {
        snprintf(why, cap, "cannot create and enter a network namespace (ip netns add/exec)");
        return false;
    }
    return true;
}

/* A number in the bench's JSON at a path of object keys; NAN when absent. */
static double dcr__num(const json_t *j, const char *a, const char *b)
{
    const json_t *v = json_object_get(j, a);
    if (b) v = json_object_get(v, b);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The measured side of a row from `dcr bench --json` of a testbed run, and
 * the store's probed costs into c. */
static dcr_status_t dcr__measured_from_json(const json_t *j, dcr_sim_validation_row_t *row,
                                            dcr_sim_cluster_t *c)
{
    const json_t *refits = json_object_get(j, "refits");
    size_t n = json_array_size(refits);
    const json_t *store = json_object_get(json_object_get(j, "testbed"), "store");
    double put = dcr__num(store, "put_ms", NULL), get = dcr__num(store, "get_ms", NULL),
           list = dcr__num(store, "list_ms", NULL);
    if (n == 0 || isnan(put) || isnan(get) || isnan(list))
        return dcr_error_set(DCR_EIO, "dcr bench --testbed --json: expected refits and "
                                      "testbed.store {put_ms, get_ms, list_ms}");
    double *v = malloc(n * sizeof(*v));
    if (!v) return dcr_error_set(DCR_ENOMEM, "validation: %zu refit latencies", n);
    double construct = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = dcr__num(json_array_get(refits, i), "latency_s", NULL);
        construct += dcr__num(json_array_get(refits, i), "construction_s", NULL) / (double)n;
    }
    row->measured_s = dcr_sim_median(v, (int)n);
    free(v);
    row->measured_ref_s = dcr__num(j, "reference_s", NULL);
    row->measured_payload = dcr__num(j, "payload_bytes_mean", NULL);
    row->measured_construct_s = construct;
    row->measured_construction_lb_s = dcr__num(j, "construction_lb_s_mean", NULL);
    row->measured_transport_lb_s = dcr__num(j, "transport_lb_s_mean", NULL);
    row->measured_finalization_s = dcr__num(j, "finalization_s_mean", NULL);
    row->store_put_ms = put;
    row->store_get_ms = get;
    row->store_list_ms = list;
    c->store_put_ms = put;
    c->store_latency_ms = get;
    c->store_list_ms = list + DCR__DIR_STORE_LIST_MS;
    return DCR_OK;
}

/* ---- the store's CPU in a testbed run ----------------------------------------------- */

dcr_status_t dcr_sim_proc_sched(int pid, double *run_s_p, double *wait_s_p, double *life_s_p)
{
    char path[64], buf[1024];
    unsigned long long run_ns = 0, wait_ns = 0;
    snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
    FILE *f = fopen(path, "r");
    bool ok = f && fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2;
    if (f) fclose(f);
    /* The start time is field 22 of stat, after the command in parentheses. */
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = ok ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long start = 0;
    for (int field = 2; ok && p && field < 22; field++) p = strchr(p + 1, ' ');
    ok = ok && p && sscanf(p + 1, "%llu", &start) == 1;
    double uptime = 0;
    f = ok ? fopen("/proc/uptime", "r") : NULL;
    ok = ok && f && fscanf(f, "%lf", &uptime) == 1;
    if (f) fclose(f);
    if (!ok) return dcr_error_set(DCR_EIO, "process %d: no scheduler statistics", pid);
    *run_s_p = (double)run_ns / 1e9;
    *wait_s_p = (double)wait_ns / 1e9;
    *life_s_p = uptime - (double)start / (double)sysconf(_SC_CLK_TCK);
    return DCR_OK;
}

/* Whether pid is the testbed's s3rver: its command names s3rver and it
 * runs in the testbed's service namespace (ns_ino). */
static bool dcr__is_store(int pid, ino_t ns_ino)
{
    char path[64], cmd[4096];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
    if (stat(path, &st) != 0 || st.st_ino != ns_ino) return false;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0') cmd[i] = ' ';
    cmd[n] = '\0';
    return strstr(cmd, "s3rver") != NULL;
}

/* Samples the store's scheduler statistics while the bench runs (the
 * store ends with the run, so the last sample is kept). */
typedef struct dcr__store_watch {
    int id;
    volatile bool stop;
    double run_s, wait_s, life_s;
} dcr__store_watch_t;

static void *dcr__store_watch(void *arg)
{
    dcr__store_watch_t *w = arg;
    char ns[64];
    snprintf(ns, sizeof(ns), "/run/netns/dcrtb-%d-svc", w->id);
    while (!w->stop) {
        struct stat st;
        DIR *d = stat(ns, &st) == 0 ? opendir("/proc") : NULL;
        for (struct dirent *e; d && (e = readdir(d));) {
            int pid = atoi(e->d_name);
            double run, wait, life;
            if (pid > 0 && dcr__is_store(pid, st.st_ino) &&
                dcr_sim_proc_sched(pid, &run, &wait, &life) == DCR_OK) {
                w->run_s = run;
                w->wait_s = wait;
                w->life_s = life;
            }
        }
        if (d) closedir(d);
        usleep(200000);
    }
    return NULL;
}

/* The last line of what fd holds (read from its start), without its newline. */
static void dcr__last_line(int fd, char *tail, size_t cap)
{
    tail[0] = '\0';
    FILE *f = lseek(fd, 0, SEEK_SET) == 0 ? fdopen(dup(fd), "r") : NULL;
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) snprintf(tail, cap, "%s", line);
    fclose(f);
    tail[strcspn(tail, "\n")] = '\0';
}

/* `cli bench --testbed netns --testbed-id ID --json FLAGS...` as an argument
 * vector (no shell: the flags arrive as the bytes dcr_sim_bench_argv made). */
static char **dcr__testbed_argv(const char *cli, const char *id, const dcr_sim_bench_argv_t *a)
{
    char *head[] = {(char *)cli,    "bench",    "--testbed", "netns",
                    "--testbed-id", (char *)id, "--json"};
    int nhead = (int)(sizeof(head) / sizeof(head[0]));
    char **argv = calloc((size_t)(nhead + a->argc + 1), sizeof(char *));
    if (!argv) return NULL;
    memcpy(argv, head, sizeof(head));
    for (int i = 0; i < a->argc; i++) argv[nhead + i] = a->argv[i];
    return argv;
}

/* Runs the testbed bench while w samples the store: its JSON in *j_p (NULL
 * when it printed none), its exit status (-1: killed), its last stderr line
 * in tail. */
static dcr_status_t dcr__run_testbed_bench(const char *cli, const dcr_bench_config_t *bench,
                                           dcr__store_watch_t *w, json_t **j_p, int *rc_p,
                                           char *tail, size_t cap)
{
    char idtext[16], errpath[] = "/tmp/dcr-sim-testbed-XXXXXX";
    snprintf(idtext, sizeof(idtext), "%d", w->id);
    dcr_sim_bench_argv_t *a = malloc(sizeof(*a));
    char **argv = NULL;
    int errfd = -1;
    dcr_status_t st = a ? dcr_sim_bench_argv(bench, a) : dcr_error_set(DCR_ENOMEM, "bench flags");
    if (st == DCR_OK && !(argv = dcr__testbed_argv(cli, idtext, a)))
        st = dcr_error_set(DCR_ENOMEM, "bench arguments");
    /* Its stderr goes to an unnamed file: read back for the error line. */
    if (st == DCR_OK && (errfd = mkostemp(errpath, O_CLOEXEC)) < 0)
        st = dcr_error_set(DCR_EIO, "validation: %s: %s", errpath, strerror(errno));
    if (errfd >= 0) unlink(errpath);
    dcr_process_t p;
    dcr_spawn_options_t o = {.what = cli, .out = {DCR_SPAWN_PIPE}, .err = {DCR_SPAWN_FD, errfd}};
    if (st == DCR_OK) {
        char flags[DCR_SIM_BENCH_ARGS_MAX];
        if (dcr_sim_bench_args(bench, flags, sizeof(flags)) == DCR_OK)
            DCR_LOG_INFO("validation: %s bench --testbed netns --testbed-id %d --json %s", cli,
                         w->id, flags);
        st = dcr_spawn(&o, argv, &p);
    }
    free(argv);
    free(a);
    if (st != DCR_OK) {
        if (errfd >= 0) close(errfd);
        return st;
    }
    pthread_t watcher;
    bool watching = pthread_create(&watcher, NULL, dcr__store_watch, w) == 0;
    FILE *out = fdopen(p.out_fd, "r");
    json_error_t je;
    *j_p = out ? json_loadf(out, 0, &je) : NULL;
    if (out) {
        fclose(out);
        p.out_fd = -1;
    }
    dcr_process_wait(&p, -1);
    dcr_process_close(&p);
    w->stop = true;
    if (watching) pthread_join(watcher, NULL);
    *rc_p = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
    dcr__last_line(errfd, tail, cap);
    close(errfd);
    return DCR_OK;
}

dcr_status_t dcr_sim_validate_testbed(const char *cli, int id, const dcr_bench_config_t *bench,
                                      const dcr_sim_calibration_t *cal,
                                      dcr_sim_validation_row_t *out_p)
{
    json_t *j = NULL;
    int rc = -1;
    char tail[512] = "";
    dcr__store_watch_t watch = {.id = id};
    DCR_CHECK(dcr__run_testbed_bench(cli, bench, &watch, &j, &rc, tail, sizeof(tail)));
    if (rc != 0 || !j) {
        json_decref(j);
        return dcr_error_set(DCR_EIO, "validation: dcr bench --testbed netns exited %d: %s", rc,
                             tail);
    }
    dcr_sim_validation_row_t row;
    memset(&row, 0, sizeof(row));
    dcr_sim_spec_t spec;
    dcr_status_t s = dcr_sim_spec_from_bench(bench, cal, &spec);
    if (s == DCR_OK) s = dcr__measured_from_json(j, &row, &spec.cluster);
    json_decref(j);
    if (s != DCR_OK) return s;
    dcr_sim_result_t sim;
    DCR_CHECK(dcr_sim_run(&spec, cal, &sim));
    dcr__predicted(&row, &sim);
    if (watch.life_s > 0) {
        row.store_cpu_share = watch.run_s / watch.life_s;
        row.store_wait_share = watch.wait_s / watch.life_s;
        row.store_life_s = watch.life_s;
    }
    *out_p = row;
    return DCR_OK;
}
