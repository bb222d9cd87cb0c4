/* dcr bench --testbed netns: scripts/testbed.sh driven from the bench, and
 * the roles placed on its hosts (see testbed.h). */
#include "deploy/testbed.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/objstore.h"
#include "dcr/spawn.h"

#define MAX_OUT (1 << 20) /* what a script command prints: a JSON array at most */

struct dcr_testbed {
    dcr_testbed_config_t cfg;
    char script[PATH_MAX];
    char id[16];
    char control[128], s3[128], store[64], subnet[64], state[PATH_MAX];
    bool up;
    dcr_process_t watcher; /* pid -1 before it started */
    int watcher_fd;        /* write end: "d" then EOF (down done), or EOF alone */
    int home_fd;           /* the network namespace we came from (dcr_testbed_enter_services) */
    json_t *reference;     /* dcr_testbed_reference's figures; NULL before it ran */
    json_t *store_costs;   /* dcr_testbed_probe_store's figures; NULL before it ran */
    /* Each host's eth0 byte counters (rx, tx) when the reference ended, in
     * the order of host_name; NULL before it ran (dcr_testbed_json). */
    int64_t *mark;
    /* The services' processes (status --json "pids"; 0: unknown) and, when
     * the reference ended, their CPU seconds and the clock, so that
     * dcr_testbed_json can say what the store spent on the refits. */
    pid_t s3_pid, etcd_pid;
    bool cpu_marked;
    double s3_cpu_mark, etcd_cpu_mark, wall_mark;
};

#ifndef DCR_SCRIPTS_INSTALL_REL
#define DCR_SCRIPTS_INSTALL_REL "../share/dcr/scripts"
#endif

/* Whether DIR/testbed.sh is readable; its path into out when it is. */
static bool script_in(const char *dir, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/testbed.sh", dir);
    return n > 0 && (size_t)n < cap && access(out, R_OK) == 0;
}

/* The script: $DCR_TESTBED_SCRIPT; else beside the executable (a binary
 * kept in the source tree's build folder); else where `cmake --install` put
 * it relative to the installed binary; else in the source tree this binary
 * was built from (a build folder anywhere, `cmake -S . -B /elsewhere`). No
 * environment variable is needed in any of these layouts (see testbed.h). */
static dcr_status_t find_script(char *out, size_t cap)
{
    const char *env = getenv("DCR_TESTBED_SCRIPT");
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return dcr_error_set(DCR_EIO, "DCR_TESTBED_SCRIPT=%s: %s", env, strerror(errno));
        snprintf(out, cap, "%s", env);
        return DCR_OK;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return dcr_error_set(DCR_EIO, "cannot find this executable (/proc/self/exe)");
    exe[n] = '\0';
    const char *dir = dirname(exe);
    static const char *const rel[] = {"../scripts", "scripts", DCR_SCRIPTS_INSTALL_REL};
    char cand[PATH_MAX];
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
        if (script_in(cand, out, cap)) return DCR_OK;
    }
#ifdef DCR_SCRIPTS_SOURCE_DIR
    if (script_in(DCR_SCRIPTS_SOURCE_DIR, out, cap)) return DCR_OK;
#endif
    return dcr_error_set(DCR_EIO,
                         "scripts/testbed.sh not found beside %s (looked in ../scripts, scripts, "
                         "%s and the source tree); set DCR_TESTBED_SCRIPT to its path",
                         dir, DCR_SCRIPTS_INSTALL_REL);
}

/* `bash SCRIPT args...` (dcr/spawn.h: an argument vector): its exit status
 * (-1: it could not run, the error line set), its stdout into *out_p
 * (malloc'd, NUL-terminated, at most MAX_OUT - 1 bytes) when out_p is not
 * NULL, else to our stderr; its stderr is ours (the script's one-line
 * errors reach the user as they are). */
static int run_script(const dcr_testbed_t *t, const char *const *args, char **out_p)
{
    char *argv[16] = {"bash", (char *)t->script};
    int n = 2;
    for (; args[n - 2] && n < 15; n++) argv[n] = (char *)args[n - 2];
    argv[n] = NULL;
    /* Our stdout carries the results (--json): its own lines go to stderr. */
    dcr_spawn_options_t o = {
        .exe = "/bin/bash", .what = "scripts/testbed.sh", .out = {DCR_SPAWN_STDERR}};
    char *buf = out_p ? malloc(MAX_OUT) : NULL;
    int status = 0;
    if (out_p && !buf) return -1;
    if (dcr_spawn_run(&o, argv, buf, MAX_OUT, &status) != DCR_OK) {
        free(buf);
        return -1;
    }
    if (out_p) *out_p = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The watcher: reads its stdin until EOF; unless it read "d" first (the
 * launcher brought the testbed down itself) it runs `down`. It leaves our
 * process group and ignores stop signals, so a ^C or a timeout that ends us
 * does not end it first. */
static dcr_status_t start_watcher(dcr_testbed_t *t)
{
    char *argv[] = {
        "sh",      "-c",  "d=$(cat); [ \"$d\" = d ] || exec bash \"$0\" down --id \"$1\"",
        t->script, t->id, NULL};
    return dcr_role_spawn_guardian("testbed watcher", argv, &t->watcher, &t->watcher_fd);
}

static void fmt_gbps(char *out, size_t cap, double g)
{
    snprintf(out, cap, "%.6g", g);
}

/* Endpoints from `status --json`, the script's own account of what it built. */
static dcr_status_t read_status(dcr_testbed_t *t)
{
    char *text = NULL;
    const char *args[] = {"status", "--id", t->id, "--json", NULL};
    int rc = run_script(t, args, &text);
    json_error_t e;
    json_t *j = rc == 0 && text ? json_loads(text, 0, &e) : NULL;
    free(text);
    const char *control = NULL, *s3 = NULL, *subnet = NULL;
    if (json_unpack(j, "{s:s,s:s,s:s}", "control", &control, "s3", &s3, "subnet", &subnet) != 0) {
        json_decref(j);
        return dcr_error_set(DCR_EIO,
                             "%s status --id %s --json: expected {control, s3, subnet} (exit %d)",
                             t->script, t->id, rc);
    }
    snprintf(t->control, sizeof(t->control), "%s/dcrtb", control);
    snprintf(t->s3, sizeof(t->s3), "%s", s3);
    snprintf(t->subnet, sizeof(t->subnet), "%s", subnet);
    snprintf(t->store, sizeof(t->store), "s3://dcr/bench");
    json_t *pids = json_object_get(j, "pids");
    t->s3_pid = (pid_t)json_integer_value(json_object_get(pids, "s3rver"));
    t->etcd_pid = (pid_t)json_integer_value(json_object_get(pids, "etcd"));
    json_decref(j);
    return DCR_OK;
}

/* CPU seconds (user + system, all threads) of process pid from
 * /proc/<pid>/stat, and its command name into comm; -1 when unreadable. */
static double process_cpu_s(pid_t pid, char *comm, size_t cap)
{
    char path[64], text[1024];
    if (pid <= 0) return -1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    /* "pid (comm) state ...": comm may hold spaces, so fields count from
     * its closing parenthesis; utime and stime are fields 14 and 15. */
    char *open = strchr(text, '('), *close = strrchr(text, ')');
    if (!open || !close || close < open) return -1;
    snprintf(comm, cap, "%.*s", (int)(close - open - 1), open + 1);
    unsigned long long utime = 0, stime = 0;
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(utime + stime) / (double)(hz > 0 ? hz : 100);
}

double dcr_testbed_store_cpu_s(void *t)
{
    char comm[64];
    const dcr_testbed_t *tb = t;
    return tb && tb->s3_pid > 0 ? process_cpu_s(tb->s3_pid, comm, sizeof(comm)) : -1.0;
}

/* When the reference ended: the services' CPU. */
static void mark_services(dcr_testbed_t *t)
{
    char comm[64];
    t->s3_cpu_mark = process_cpu_s(t->s3_pid, comm, sizeof(comm));
    t->etcd_cpu_mark = process_cpu_s(t->etcd_pid, comm, sizeof(comm));
    t->wall_mark = dcr_clock_s();
    t->cpu_marked = true;
}

/* What the services spent since the reference ended (the refits, warm-up
 * included, the control plane's reads and the verifier's): CPU seconds of
 * s3rver and etcd, the wall time, and s3rver's share of one core, which
 * near 1 says the store (one Node thread) is saturated. NULL before the
 * reference or without the services' pids. */
static json_t *services_cpu_json(const dcr_testbed_t *t)
{
    char s3_comm[64] = "", etcd_comm[64] = "";
    double s3 = process_cpu_s(t->s3_pid, s3_comm, sizeof(s3_comm)),
           etcd = process_cpu_s(t->etcd_pid, etcd_comm, sizeof(etcd_comm));
    if (!t->cpu_marked || s3 < 0 || t->s3_cpu_mark < 0) return NULL;
    double wall = dcr_clock_s() - t->wall_mark;
    json_t *j = json_pack("{s:s,s:f,s:f,s:f}", "s3rver_process", s3_comm, "s3rver_cpu_s",
                          s3 - t->s3_cpu_mark, "wall_s", wall, "s3rver_cores",
                          wall > 0 ? (s3 - t->s3_cpu_mark) / wall : 0.0);
    if (j && etcd >= 0 && t->etcd_cpu_mark >= 0)
        json_object_set_new(j, "etcd_cpu_s", json_real(etcd - t->etcd_cpu_mark));
    return j;
}

dcr_status_t dcr_testbed_up(const dcr_testbed_config_t *cfg, dcr_testbed_t **out_p)
{
    *out_p = NULL;
    if (geteuid() != 0)
        return dcr_error_set(DCR_EINVAL, "--testbed needs root (network namespaces and tc need "
                                         "CAP_NET_ADMIN)");
    dcr_testbed_t *t = calloc(1, sizeof(*t));
    if (!t) return dcr_error_set(DCR_ENOMEM, "testbed");
    t->cfg = *cfg;
    t->watcher_fd = -1;
    t->watcher.pid = -1;
    t->home_fd = -1;
    snprintf(t->id, sizeof(t->id), "%d", cfg->id);
    dcr_status_t st = find_script(t->script, sizeof(t->script));
    if (st != DCR_OK) {
        free(t);
        return st;
    }
    /* The watcher first: from the first namespace on, nothing outlives us. */
    if ((st = start_watcher(t)) != DCR_OK) {
        free(t);
        return st;
    }
    char train[16], rollout[16], link[32], local[32], flow[32], lat[32], owner[16];
    /* This process owns the testbed: if it is killed with its watcher (a
     * whole process tree, as ctest's timeout does), the next up reaps it. */
    snprintf(owner, sizeof(owner), "%d", (int)getpid());
    snprintf(train, sizeof(train), "%d", cfg->train_hosts);
    snprintf(rollout, sizeof(rollout), "%d", cfg->rollout_hosts);
    fmt_gbps(link, sizeof(link), cfg->link_gbps);
    fmt_gbps(local, sizeof(local), cfg->local_gbps);
    fmt_gbps(flow, sizeof(flow), cfg->flow_gbps);
    fmt_gbps(lat, sizeof(lat), cfg->latency_ms);
    const char *args[] = {"up",    "--id",         t->id, "--train",      train, "--rollout",
                          rollout, "--link-gbps",  link,  "--local-gbps", local, "--flow-gbps",
                          flow,    "--latency-ms", lat,   "--owner",      owner, NULL};
    DCR_LOG_INFO("testbed: %s up --id %s (%s + %s hosts, link %s Gbps, local %s Gbps)", t->script,
                 t->id, train, rollout, link, local);
    int rc = run_script(t, args, NULL);
    /* A failed up removes what it built itself; a down now could remove a
     * testbed another run holds under this id (up refuses other settings). */
    t->up = rc == 0;
    if (rc != 0) {
        if (t->watcher_fd >= 0 && write(t->watcher_fd, "d", 1) != 1)
            DCR_LOG_WARN("testbed: watcher pipe: %s", strerror(errno));
        dcr_testbed_destroy(t);
        return dcr_error_set(DCR_EIO, "%s up --id %d failed (exit %d; its line above)",
                             "scripts/testbed.sh", cfg->id, rc);
    }
    if ((st = read_status(t)) != DCR_OK) {
        dcr_testbed_destroy(t);
        return st;
    }
    snprintf(t->state, sizeof(t->state), "/run/dcrtb-%d", cfg->id);
    /* The testbed's s3rver knows one access key id; every role inherits it. */
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    *out_p = t;
    return DCR_OK;
}

void dcr_testbed_destroy(dcr_testbed_t *t)
{
    if (!t) return;
    /* Back home first: down kills every process inside the testbed's
     * namespaces, which would include this one and the script itself. */
    if (t->home_fd >= 0 && setns(t->home_fd, CLONE_NEWNET) != 0)
        DCR_LOG_WARN("testbed: cannot leave the services host (setns): %s", strerror(errno));
    if (t->home_fd >= 0) close(t->home_fd);
    if (t->up) {
        const char *args[] = {"down", "--id", t->id, NULL};
        int rc = run_script(t, args, NULL);
        if (rc != 0) DCR_LOG_WARN("testbed: down --id %s exited %d", t->id, rc);
        /* Down done: the watcher need not run it again (a later testbed
         * with this id may be up by the time it would). */
        if (rc == 0 && t->watcher_fd >= 0 && write(t->watcher_fd, "d", 1) != 1)
            DCR_LOG_WARN("testbed: watcher pipe: %s", strerror(errno));
    }
    if (t->watcher_fd >= 0) close(t->watcher_fd);
    if (t->watcher.pid > 0) dcr_process_wait(&t->watcher, -1);
    json_decref(t->reference);
    json_decref(t->store_costs);
    free(t->mark);
    free(t);
}

const char *dcr_testbed_control(const dcr_testbed_t *t)
{
    return t->control;
}

const char *dcr_testbed_s3_endpoint(const dcr_testbed_t *t)
{
    return t->s3;
}

const char *dcr_testbed_store(const dcr_testbed_t *t)
{
    return t->store;
}

static void host_netns(const dcr_testbed_t *t, const char *host, char *out, size_t cap)
{
    snprintf(out, cap, "dcrtb-%d-%s", t->cfg.id, host);
}

dcr_status_t dcr_testbed_enter_services(dcr_testbed_t *t)
{
    char ns[64], path[128];
    host_netns(t, "svc", ns, sizeof(ns));
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    if (t->home_fd < 0 && (t->home_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        return dcr_error_set(DCR_EIO, "testbed: cannot open this thread's network namespace: %s",
                             strerror(errno));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dcr_error_set(DCR_EIO, "testbed: cannot open %s: %s", path, strerror(errno));
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc != 0)
        return dcr_error_set(DCR_EIO, "testbed: cannot enter %s (setns): %s", ns, strerror(err));
    return DCR_OK;
}

dcr_status_t dcr_testbed_measure(dcr_testbed_t *t, json_t **out_p)
{
    *out_p = NULL;
    char *text = NULL;
    const char *args[] = {"measure", "--id", t->id, "--json", NULL};
    int rc = run_script(t, args, &text);
    json_error_t e;
    json_t *j = text ? json_loads(text, 0, &e) : NULL;
    free(text);
    if (!json_is_array(j)) {
        json_decref(j);
        return dcr_error_set(DCR_EIO, "%s measure --id %s --json: no JSON array (exit %d)",
                             t->script, t->id, rc);
    }
    if (rc != 0)
        DCR_LOG_WARN("testbed: a link is more than 15%% off its setting (see \"testbed\")");
    *out_p = j;
    return DCR_OK;
}

dcr_status_t dcr_testbed_place_roles(dcr_testbed_t *t, dcr_role_launcher_t *l, int slots)
{
    char ns[64];
    /* The subnet is "A.B.0.0/16"; rollout host r<i> is A.B.2.<i+1>
     * (host_ip in scripts/testbed.sh). */
    unsigned a, b;
    if (sscanf(t->subnet, "%u.%u.", &a, &b) != 2 || a > 255 || b > 255)
        return dcr_error_set(DCR_EIO, "testbed: subnet '%s': expected A.B.0.0/16", t->subnet);
    for (int i = 0; i < t->cfg.rollout_hosts; i++) {
        char host[16], role[48], relay_host[48];
        snprintf(host, sizeof(host), "r%d", i);
        snprintf(role, sizeof(role), "rollout-node %d", i);
        host_netns(t, host, ns, sizeof(ns));
        /* --transport relay: the node listens on its own host's address
         * (node_role.c reads DCR_RELAY_HOST), so owners and children reach
         * it over the shaped links; env execs in place as a prefix must. */
        snprintf(relay_host, sizeof(relay_host), "DCR_RELAY_HOST=%u.%u.2.%d", a, b, i + 1);
        char *pre[] = {"ip", "netns", "exec", ns, "env", relay_host};
        DCR_CHECK(dcr_role_launcher_set_prefix(l, role, pre, 6));
    }
    /* mpirun in t0: its out-of-band channel must reach the daemons, which
     * only the testbed's subnet does. */
    host_netns(t, "t0", ns, sizeof(ns));
    char *pre[] = {"ip", "netns", "exec", ns};
    DCR_CHECK(dcr_role_launcher_set_prefix(l, "owners", pre, 4));
    char slots_s[16], *hosts = NULL;
    snprintf(slots_s, sizeof(slots_s), "%d", slots);
    const char *args[] = {"hostfile", "--id", t->id, "--slots", slots_s, NULL};
    int rc = run_script(t, args, &hosts);
    char hostfile[PATH_MAX + 32], agent[PATH_MAX + 32];
    snprintf(hostfile, sizeof(hostfile), "%s/bench-hostfile", t->state);
    FILE *f = rc == 0 && hosts ? fopen(hostfile, "w") : NULL;
    bool written = f && fputs(hosts, f) >= 0;
    if (f && fclose(f) != 0) written = false;
    free(hosts);
    if (!written)
        return dcr_error_set(DCR_EIO, "testbed: cannot write the hostfile %s (hostfile exit %d)",
                             hostfile, rc);
    snprintf(agent, sizeof(agent), "%s", t->script);
    char *slash = strrchr(agent, '/');
    snprintf(slash ? slash + 1 : agent, sizeof(agent) - (size_t)(slash ? slash + 1 - agent : 0),
             "testbed-agent.sh");
    char *mpi[] = {"--hostfile",
                   hostfile,
                   "--mca",
                   "plm_rsh_agent",
                   agent,
                   "--mca",
                   "oob_tcp_if_include",
                   t->subnet,
                   "--mca",
                   "btl_tcp_if_include",
                   t->subnet,
                   "--mca",
                   "btl",
                   "self,tcp"};
    return dcr_role_launcher_set_mpirun_args(l, mpi, (int)(sizeof(mpi) / sizeof(mpi[0])));
}

dcr_status_t dcr_testbed_fault(dcr_testbed_t *t, const char *const *args)
{
    const char *full[14] = {"fault", "--id", t->id};
    int n = 3;
    for (; n < 13 && args[n - 3]; n++) full[n] = args[n - 3];
    if (args[n - 3])
        return dcr_error_set(DCR_EINVAL, "testbed fault: more than %d arguments", n - 3);
    full[n] = NULL;
    int rc = run_script(t, full, NULL);
    if (rc != 0)
        return dcr_error_set(DCR_EIO, "testbed: %s fault --id %s %s %s failed (exit %d)", t->script,
                             t->id, args[0], args[1] ? args[1] : "", rc);
    return DCR_OK;
}

/* Host i of the counters: svc, then t0.., then r0.. */
static int host_count(const dcr_testbed_t *t)
{
    return 1 + t->cfg.train_hosts + t->cfg.rollout_hosts;
}

static void host_name(const dcr_testbed_t *t, int i, char *out, size_t cap)
{
    if (i == 0)
        snprintf(out, cap, "svc");
    else if (i <= t->cfg.train_hosts)
        snprintf(out, cap, "t%d", i - 1);
    else
        snprintf(out, cap, "r%d", i - 1 - t->cfg.train_hosts);
}

/* One host's eth0 counters, from the kernel's (`ip -s -j link`). */
static dcr_status_t link_counters(const dcr_testbed_t *t, const char *host, int64_t *rx_p,
                                  int64_t *tx_p)
{
    char ns[64], cmd[160], text[8192];
    host_netns(t, host, ns, sizeof(ns));
    char *argv[] = {"ip", "-n", ns, "-s", "-j", "link", "show", "dev", "eth0", NULL};
    snprintf(cmd, sizeof(cmd), "ip -n %s -s -j link show dev eth0", ns);
    int status = 0;
    dcr_status_t st = dcr_spawn_run(NULL, argv, text, sizeof(text), &status);
    if (st != DCR_OK) {
        dcr_error_prefix("testbed: ");
        return st;
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    json_error_t e;
    json_t *j = rc == 0 ? json_loads(text, 0, &e) : NULL;
    json_int_t rx = -1, tx = -1;
    int bad = !j || json_unpack(j, "[{s:{s:{s:I},s:{s:I}}}]", "stats64", "rx", "bytes", &rx, "tx",
                                "bytes", &tx) != 0;
    json_decref(j);
    if (bad)
        return dcr_error_set(DCR_EIO, "testbed: '%s' (exit %d): expected stats64 rx/tx bytes", cmd,
                             rc);
    *rx_p = rx;
    *tx_p = tx;
    return DCR_OK;
}

/* Every host's counters into out[2 * host_count]. */
static dcr_status_t all_counters(const dcr_testbed_t *t, int64_t *out)
{
    for (int i = 0; i < host_count(t); i++) {
        char host[16];
        host_name(t, i, host, sizeof(host));
        DCR_CHECK(link_counters(t, host, &out[2 * i], &out[2 * i + 1]));
    }
    return DCR_OK;
}

/* What each host's link carried since the reference ended: the refits,
 * the control plane and the verifier; NULL when that cannot be read. */
static json_t *traffic_json(const dcr_testbed_t *t)
{
    int n = host_count(t);
    int64_t *now = t->mark ? calloc((size_t)n * 2, sizeof(int64_t)) : NULL;
    json_t *list = now && all_counters(t, now) == DCR_OK ? json_array() : NULL;
    if (now && !list) DCR_LOG_WARN("%s", dcr_error_detail());
    for (int i = 0; list && i < n; i++) {
        char host[16];
        host_name(t, i, host, sizeof(host));
        json_array_append_new(list, json_pack("{s:s,s:I,s:I}", "host", host, "rx_bytes",
                                              (json_int_t)(now[2 * i] - t->mark[2 * i]), "tx_bytes",
                                              (json_int_t)(now[2 * i + 1] - t->mark[2 * i + 1])));
    }
    free(now);
    return list;
}

json_t *dcr_testbed_json(const dcr_testbed_t *t)
{
    json_t *j = json_pack("{s:i,s:s,s:i,s:i,s:s,s:s,s:s,s:s}", "id", t->cfg.id, "subnet", t->subnet,
                          "train_hosts", t->cfg.train_hosts, "rollout_hosts", t->cfg.rollout_hosts,
                          "control", t->control, "s3", t->s3, "owners_from",
                          "mpirun in t0, ranks in t0..t<N-1> (launch agent)", "coordinator",
                          "services host (with the launcher and the verifier)");
    if (j && t->reference) json_object_set(j, "reference", t->reference);
    if (j && t->store_costs) json_object_set(j, "store", t->store_costs);
    json_t *traffic = j ? traffic_json(t) : NULL;
    if (traffic) json_object_set_new(j, "traffic_after_reference", traffic);
    json_t *cpu = j ? services_cpu_json(t) : NULL;
    if (cpu) json_object_set_new(j, "services_after_reference", cpu);
    return j;
}

/* ---- the full-checkpoint reference over the shaped links ---------------------- */

#define REF_OBJECT ((size_t)8 << 20) /* one put (below the S3 client's multipart threshold) */
#define REF_PART   ((size_t)1 << 20) /* one ranged GET */
#define REF_FLOWS  8                 /* GETs in flight per rollout host, as the transport's */

typedef struct ref_obj {
    int host, k;
    size_t len;
} ref_obj_t;

typedef struct ref_part {
    size_t obj;
    uint64_t off;
    size_t len;
} ref_part_t;

typedef struct ref_run {
    dcr_objstore_t *store;
    char prefix[64];
    ref_obj_t *objs; /* by training host, in order */
    size_t nobjs;
    ref_part_t *parts;
    size_t nparts;
    uint8_t *pattern;    /* REF_OBJECT bytes every object starts with */
    atomic_size_t *next; /* [host]: next object (uploads) or part (downloads) */
    double *end_s;       /* [host]: when its last transfer finished */
    pthread_mutex_t mu;
    dcr_status_t st;
    char msg[512];
} ref_run_t;

typedef struct ref_arg {
    ref_run_t *r;
    int host, netns_fd;
} ref_arg_t;

static void ref_fail(ref_run_t *r, dcr_status_t st, const char *host)
{
    pthread_mutex_lock(&r->mu);
    if (r->st == DCR_OK) {
        r->st = st;
        snprintf(r->msg, sizeof(r->msg), "testbed reference (host %s): %s", host,
                 dcr_error_detail());
    }
    pthread_mutex_unlock(&r->mu);
}

static void ref_done(ref_run_t *r, int host)
{
    double now = dcr_clock_s();
    pthread_mutex_lock(&r->mu);
    if (now > r->end_s[host]) r->end_s[host] = now;
    pthread_mutex_unlock(&r->mu);
}

static void ref_key(const ref_run_t *r, const ref_obj_t *o, char *out, size_t cap)
{
    snprintf(out, cap, "%sref-%d-%d.bin", r->prefix, o->host, o->k);
}

/* Names the thread's host (kind 't' or 'r') into host and enters its
 * namespace: every connection this thread opens from now on (the S3 client
 * keeps one handle per thread) leaves through its link. */
static bool ref_enter(ref_run_t *r, const ref_arg_t *a, char kind, char *host, size_t cap)
{
    snprintf(host, cap, "%c%d", kind, a->host);
    if (setns(a->netns_fd, CLONE_NEWNET) == 0) return true;
    ref_fail(r, dcr_error_set(DCR_EIO, "setns: %s", strerror(errno)), host);
    return false;
}

static void *ref_upload(void *arg)
{
    ref_arg_t *a = arg;
    ref_run_t *r = a->r;
    char host[16], key[128];
    if (!ref_enter(r, a, 't', host, sizeof(host))) return NULL;
    for (;;) {
        size_t i = atomic_fetch_add(&r->next[a->host], 1);
        if (i >= r->nobjs || r->objs[i].host != a->host) break;
        ref_key(r, &r->objs[i], key, sizeof(key));
        dcr_status_t st = dcr_objstore_put(r->store, key, r->pattern, r->objs[i].len, NULL);
        if (st != DCR_OK) {
            ref_fail(r, st, host);
            return NULL;
        }
    }
    ref_done(r, a->host);
    return NULL;
}

static void *ref_download(void *arg)
{
    ref_arg_t *a = arg;
    ref_run_t *r = a->r;
    char host[16], key[128];
    bool ok = ref_enter(r, a, 'r', host, sizeof(host));
    uint8_t *buf = ok ? malloc(REF_PART) : NULL;
    if (ok && !buf) {
        ref_fail(r, dcr_error_set(DCR_ENOMEM, "%zu bytes of download buffer", REF_PART), host);
        return NULL;
    }
    while (ok) {
        size_t i = atomic_fetch_add(&r->next[a->host], 1);
        if (i >= r->nparts) break;
        const ref_part_t *p = &r->parts[i];
        ref_key(r, &r->objs[p->obj], key, sizeof(key));
        dcr_status_t st = dcr_objstore_get_range(r->store, key, p->off, p->len, buf, NULL);
        if (st == DCR_OK && memcmp(buf, r->pattern + p->off, p->len) != 0)
            st = dcr_error_set(DCR_ETRANSPORT, "%s bytes [%llu, +%zu) differ from the upload", key,
                               (unsigned long long)p->off, p->len);
        if (st != DCR_OK) {
            ref_fail(r, st, host);
            ok = false;
        }
    }
    if (ok) ref_done(r, a->host);
    free(buf);
    return NULL;
}

/* Objects of at most REF_OBJECT bytes per training host, and their parts. */
static dcr_status_t ref_plan(ref_run_t *r, const int64_t *per_node_bytes, int train_nodes)
{
    size_t cap = 0, nparts = 0;
    for (int i = 0; i < train_nodes; i++) cap += (size_t)per_node_bytes[i] / REF_OBJECT + 1;
    r->objs = calloc(cap, sizeof(*r->objs));
    if (!r->objs) return dcr_error_set(DCR_ENOMEM, "testbed reference: %zu objects", cap);
    for (int i = 0; i < train_nodes; i++) {
        uint64_t left = (uint64_t)per_node_bytes[i];
        for (int k = 0; left > 0; k++) {
            size_t n = left < REF_OBJECT ? (size_t)left : REF_OBJECT;
            r->objs[r->nobjs++] = (ref_obj_t){i, k, n};
            nparts += (n + REF_PART - 1) / REF_PART;
            left -= n;
        }
    }
    r->parts = calloc(nparts ? nparts : 1, sizeof(*r->parts));
    if (!r->parts) return dcr_error_set(DCR_ENOMEM, "testbed reference: %zu parts", nparts);
    for (size_t i = 0; i < r->nobjs; i++)
        for (size_t off = 0; off < r->objs[i].len; off += REF_PART)
            r->parts[r->nparts++] = (ref_part_t){
                i, off, r->objs[i].len - off < REF_PART ? r->objs[i].len - off : REF_PART};
    return DCR_OK;
}

/* Runs fn on n threads and joins them. */
static dcr_status_t ref_threads(ref_run_t *r, void *(*fn)(void *), ref_arg_t *args, int n)
{
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    if (!th) return dcr_error_set(DCR_ENOMEM, "testbed reference: %d threads", n);
    int started = 0;
    while (started < n && pthread_create(&th[started], NULL, fn, &args[started]) == 0) started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    if (started < n)
        return dcr_error_set(DCR_ENOMEM, "testbed reference: cannot start %d threads", n);
    if (r->st != DCR_OK) return dcr_error_set(r->st, "%s", r->msg);
    return DCR_OK;
}

/* One host's figures: {host, direction, bytes, seconds, measured_mbit,
 * configured_mbit (null: unlimited), ok}. */
static json_t *ref_host_json(const char *host, const char *dir, int64_t bytes, double secs,
                             double conf_gbps)
{
    double mbit = secs > 0 ? (double)bytes * 8 / secs / 1e6 : 0, conf = conf_gbps * 1000;
    bool ok = conf_gbps <= 0 || (mbit >= 0.85 * conf && mbit <= 1.15 * conf);
    if (!ok)
        DCR_LOG_WARN("testbed reference: %s %s at %.1f Mbit/s, more than 15%% off its %.1f", host,
                     dir, mbit, conf);
    return json_pack("{s:s,s:s,s:I,s:f,s:f,s:o,s:b}", "host", host, "direction", dir, "bytes",
                     (json_int_t)bytes, "seconds", secs, "measured_mbit", mbit, "configured_mbit",
                     conf_gbps > 0 ? json_real(conf) : json_null(), "ok", ok);
}

static int open_netns(const dcr_testbed_t *t, const char *host)
{
    char ns[64], path[128];
    host_netns(t, host, ns, sizeof(ns));
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Each phase: its threads, every host's namespace opened first. */
static dcr_status_t ref_phase(dcr_testbed_t *t, ref_run_t *r, bool upload, int hosts, int flows)
{
    ref_arg_t *args = calloc((size_t)(hosts * flows), sizeof(*args));
    int *fds = calloc((size_t)hosts, sizeof(int));
    dcr_status_t st = args && fds ? DCR_OK : dcr_error_set(DCR_ENOMEM, "testbed reference");
    for (int h = 0; fds && h < hosts; h++) fds[h] = -1;
    for (int h = 0; st == DCR_OK && h < hosts; h++) {
        char host[16];
        snprintf(host, sizeof(host), "%c%d", upload ? 't' : 'r', h);
        if ((fds[h] = open_netns(t, host)) < 0)
            st = dcr_error_set(DCR_EIO, "testbed reference: cannot open the namespace of %s: %s",
                               host, strerror(errno));
        for (int f = 0; f < flows; f++) args[h * flows + f] = (ref_arg_t){r, h, fds[h]};
        r->end_s[h] = 0;
    }
    /* Uploads: host h's counter starts at its first object. */
    for (int h = 0; st == DCR_OK && h < hosts; h++) {
        size_t first = 0;
        while (upload && first < r->nobjs && r->objs[first].host != h) first++;
        atomic_store(&r->next[h], upload ? first : 0);
    }
    if (st == DCR_OK) st = ref_threads(r, upload ? ref_upload : ref_download, args, hosts * flows);
    for (int h = 0; fds && h < hosts; h++)
        if (fds[h] >= 0) close(fds[h]);
    free(fds);
    free(args);
    return st;
}

dcr_status_t dcr_testbed_reference(void *ctx, const int64_t *per_node_bytes, int train_nodes,
                                   int rollout_nodes, double *seconds_p)
{
    dcr_testbed_t *t = ctx;
    if (train_nodes != t->cfg.train_hosts || rollout_nodes != t->cfg.rollout_hosts)
        return dcr_error_set(DCR_EINVAL,
                             "testbed reference: %d training and %d rollout nodes, but the "
                             "testbed has %d and %d hosts",
                             train_nodes, rollout_nodes, t->cfg.train_hosts, t->cfg.rollout_hosts);
    static atomic_uint seq;
    ref_run_t r = {.st = DCR_OK};
    pthread_mutex_init(&r.mu, NULL);
    snprintf(r.prefix, sizeof(r.prefix), "reference-%d-%u/", (int)getpid(),
             atomic_fetch_add(&seq, 1));
    int hosts = train_nodes > rollout_nodes ? train_nodes : rollout_nodes;
    int up_flows = t->cfg.upload_flows > 0 ? t->cfg.upload_flows : 1;
    r.pattern = malloc(REF_OBJECT);
    r.next = calloc((size_t)hosts, sizeof(*r.next));
    r.end_s = calloc((size_t)hosts, sizeof(*r.end_s));
    dcr_status_t st =
        r.pattern && r.next && r.end_s ? DCR_OK : dcr_error_set(DCR_ENOMEM, "testbed reference");
    if (st == DCR_OK) {
        for (size_t i = 0; i < REF_OBJECT; i++) r.pattern[i] = (uint8_t)(i * 131u + 7u);
        st = ref_plan(&r, per_node_bytes, train_nodes);
    }
    dcr_objstore_config_t sc = {.url = "s3://dcr/reference", .s3_endpoint = t->s3};
    if (st == DCR_OK) st = dcr_objstore_create(&sc, &r.store);
    json_t *list = json_array();
    double t0 = dcr_clock_s(), t_down = t0, t1 = t0;
    if (st == DCR_OK) st = ref_phase(t, &r, true, train_nodes, up_flows);
    /* Uploads first, downloads once the checkpoint is stored (the seed's reference). */
    for (int h = 0; st == DCR_OK && h < train_nodes; h++) {
        char host[16];
        snprintf(host, sizeof(host), "t%d", h);
        double cap = t->cfg.link_gbps;
        if (t->cfg.flow_gbps > 0 && (cap <= 0 || t->cfg.flow_gbps * up_flows < cap))
            cap = t->cfg.flow_gbps * up_flows;
        json_array_append_new(
            list, ref_host_json(host, "upload", per_node_bytes[h], r.end_s[h] - t0, cap));
    }
    t_down = dcr_clock_s();
    if (st == DCR_OK) st = ref_phase(t, &r, false, rollout_nodes, REF_FLOWS);
    t1 = dcr_clock_s();
    int64_t total = 0;
    for (int h = 0; h < train_nodes; h++) total += per_node_bytes[h];
    for (int h = 0; st == DCR_OK && h < rollout_nodes; h++) {
        char host[16];
        snprintf(host, sizeof(host), "r%d", h);
        json_array_append_new(
            list, ref_host_json(host, "download", total, r.end_s[h] - t_down, t->cfg.link_gbps));
    }
    if (r.store && dcr_objstore_delete_prefix(r.store, r.prefix) != DCR_OK)
        DCR_LOG_WARN("testbed reference: removing %s: %s", r.prefix, dcr_error_detail());
    dcr_objstore_destroy(r.store);
    if (st == DCR_OK) {
        *seconds_p = t1 - t0;
        json_decref(t->reference);
        t->reference = json_pack("{s:s,s:f,s:f,s:f,s:I,s:o}", "over",
                                 "the testbed's shaped links (S3 on the services host)", "seconds",
                                 t1 - t0, "upload_s", t_down - t0, "download_s", t1 - t_down,
                                 "checkpoint_bytes", (json_int_t)total, "hosts", list);
        DCR_LOG_INFO("testbed reference: %lld bytes up in %.3f s, down to %d hosts in %.3f s",
                     (long long)total, t_down - t0, rollout_nodes, t1 - t_down);
        /* The links' counters and the services' CPU from here on count
         * the refits'. */
        mark_services(t);
        free(t->mark);
        t->mark = calloc((size_t)host_count(t) * 2, sizeof(int64_t));
        if (t->mark && all_counters(t, t->mark) != DCR_OK) {
            DCR_LOG_WARN("%s", dcr_error_detail());
            free(t->mark);
            t->mark = NULL;
        }
    } else {
        json_decref(list);
    }
    free(r.objs);
    free(r.parts);
    free(r.next);
    free(r.end_s);
    free(r.pattern);
    pthread_mutex_destroy(&r.mu);
    return st;
}

/* ---- the store's per-request costs ----------------------------------------------- */

#define PROBE_ROUNDS 16
#define PROBE_BYTES  1024

typedef struct probe_run {
    dcr_objstore_t *store;
    int netns_fd;
    char prefix[64];
    double ms[3][PROBE_ROUNDS]; /* put, list, get */
    dcr_status_t st;
    char msg[512];
} probe_run_t;

static void *probe_thread(void *arg)
{
    probe_run_t *p = arg;
    uint8_t out[PROBE_BYTES], in[PROBE_BYTES];
    memset(out, 0x5a, sizeof(out));
    if (setns(p->netns_fd, CLONE_NEWNET) != 0) {
        p->st = dcr_error_set(DCR_EIO, "setns: %s", strerror(errno));
        snprintf(p->msg, sizeof(p->msg), "testbed store probe: %s", dcr_error_detail());
        return NULL;
    }
    for (int i = 0; p->st == DCR_OK && i < PROBE_ROUNDS; i++) {
        char key[96];
        snprintf(key, sizeof(key), "%sobj-%d", p->prefix, i);
        double t0 = dcr_clock_s();
        p->st = dcr_objstore_put(p->store, key, out, sizeof(out), NULL);
        double t1 = dcr_clock_s();
        dcr_objstore_entry_t *e = NULL;
        size_t n = 0;
        if (p->st == DCR_OK) p->st = dcr_objstore_list_all(p->store, p->prefix, &e, &n);
        free(e);
        double t2 = dcr_clock_s();
        if (p->st == DCR_OK) p->st = dcr_objstore_get_range(p->store, key, 0, sizeof(in), in, NULL);
        double t3 = dcr_clock_s();
        if (p->st == DCR_OK && (n != (size_t)i + 1 || memcmp(in, out, sizeof(in))))
            p->st = dcr_error_set(DCR_ETRANSPORT, "%s: listed %zu of %d keys or read other bytes",
                                  key, n, i + 1);
        p->ms[0][i] = (t1 - t0) * 1e3;
        p->ms[1][i] = (t2 - t1) * 1e3;
        p->ms[2][i] = (t3 - t2) * 1e3;
    }
    if (p->st != DCR_OK)
        snprintf(p->msg, sizeof(p->msg), "testbed store probe: %s", dcr_error_detail());
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

dcr_status_t dcr_testbed_probe_store(dcr_testbed_t *t)
{
    probe_run_t p = {.st = DCR_OK, .netns_fd = open_netns(t, "t0")};
    if (p.netns_fd < 0)
        return dcr_error_set(DCR_EIO, "testbed store probe: cannot open the namespace of t0: %s",
                             strerror(errno));
    snprintf(p.prefix, sizeof(p.prefix), "probe-%d/", (int)getpid());
    dcr_objstore_config_t sc = {.url = "s3://dcr/probe", .s3_endpoint = t->s3};
    dcr_status_t st = dcr_objstore_create(&sc, &p.store);
    pthread_t th;
    if (st == DCR_OK && pthread_create(&th, NULL, probe_thread, &p) != 0)
        st = dcr_error_set(DCR_ENOMEM, "testbed store probe: cannot start a thread");
    else if (st == DCR_OK) {
        pthread_join(th, NULL);
        if (p.st != DCR_OK) st = dcr_error_set(p.st, "%s", p.msg);
    }
    if (p.store && dcr_objstore_delete_prefix(p.store, p.prefix) != DCR_OK)
        DCR_LOG_WARN("testbed store probe: removing %s: %s", p.prefix, dcr_error_detail());
    dcr_objstore_destroy(p.store);
    close(p.netns_fd);
    if (st != DCR_OK) return st;
    json_decref(t->store_costs);
    t->store_costs = json_pack(
        "{s:f,s:f,s:f,s:i,s:i,s:s}", "put_ms", median_of(p.ms[0], PROBE_ROUNDS), "list_ms",
        median_of(p.ms[1], PROBE_ROUNDS), "get_ms", median_of(p.ms[2], PROBE_ROUNDS),
        "object_bytes", PROBE_BYTES, "rounds", PROBE_ROUNDS, "from", "t0");
    return DCR_OK;
}
