/* dcr bench --testbed netns: scripts/testbed.sh driven from the bench, and
 * the roles placed on its hosts (see testbed.h). */
#include "workloads/roles/testbed.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/log.h"

#define MAX_OUT (1 << 20) /* what a script command prints: a JSON array at most */

struct dcr_testbed {
    dcr_testbed_config_t cfg;
    char script[PATH_MAX];
    char id[16];
    char control[128], s3[128], store[64], subnet[64], state[PATH_MAX];
    bool up;
    pid_t watcher;
    int watcher_fd; /* write end: "d" then EOF (down done), or EOF alone */
    int home_fd;    /* the network namespace we came from (dcr_testbed_enter_services) */
};

/* The script: $DCR_TESTBED_SCRIPT, else beside the executable (see testbed.h). */
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
    static const char *const rel[] = {"../scripts/testbed.sh", "scripts/testbed.sh"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(out, cap, "%s/%s", dir, rel[i]);
        if (access(out, R_OK) == 0) return DCR_OK;
    }
    return dcr_error_set(DCR_EIO,
                         "scripts/testbed.sh not found beside %s (looked in ../scripts and "
                         "scripts); set DCR_TESTBED_SCRIPT to its path",
                         dir);
}

/* `bash SCRIPT args...`: its exit status (-1: it could not run), its stdout
 * into *out_p (malloc'd, NUL-terminated) when out_p is not NULL, else to our
 * stderr; its stderr is ours (the script's one-line errors reach the user as they are). */
static int run_script(const dcr_testbed_t *t, const char *const *args, char **out_p)
{
    int fds[2] = {-1, -1};
    if (out_p && pipe2(fds, O_CLOEXEC) != 0) return -1;
    char *argv[16] = {"bash", (char *)t->script};
    int n = 2;
    for (; args[n - 2] && n < 15; n++) argv[n] = (char *)args[n - 2];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        /* Our stdout carries the results (--json): its own lines go to stderr. */
        dup2(out_p ? fds[1] : 2, 1);
        execv("/bin/bash", argv);
        _exit(127);
    }
    if (out_p) close(fds[1]);
    if (pid < 0) {
        if (out_p) close(fds[0]);
        return -1;
    }
    if (out_p) {
        char *buf = malloc(MAX_OUT);
        size_t used = 0;
        ssize_t r;
        while (
            buf && used < MAX_OUT - 1 &&
            ((r = read(fds[0], buf + used, MAX_OUT - 1 - used)) > 0 || (r < 0 && errno == EINTR)))
            if (r > 0) used += (size_t)r;
        if (buf) buf[used] = '\0';
        close(fds[0]);
        *out_p = buf;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
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
    json_decref(j);
    return DCR_OK;
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
    char train[16], rollout[16], link[32], local[32], flow[32], lat[32];
    snprintf(train, sizeof(train), "%d", cfg->train_hosts);
    snprintf(rollout, sizeof(rollout), "%d", cfg->rollout_hosts);
    fmt_gbps(link, sizeof(link), cfg->link_gbps);
    fmt_gbps(local, sizeof(local), cfg->local_gbps);
    fmt_gbps(flow, sizeof(flow), cfg->flow_gbps);
    fmt_gbps(lat, sizeof(lat), cfg->latency_ms);
    const char *args[] = {
        "up", "--id",         t->id, "--train",     train, "--rollout",    rollout, "--link-gbps",
        link, "--local-gbps", local, "--flow-gbps", flow,  "--latency-ms", lat,     NULL};
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
    if (t->watcher > 0) waitpid(t->watcher, NULL, 0);
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
    for (int i = 0; i < t->cfg.rollout_hosts; i++) {
        char host[16], role[48];
        snprintf(host, sizeof(host), "r%d", i);
        snprintf(role, sizeof(role), "rollout-node %d", i);
        host_netns(t, host, ns, sizeof(ns));
        char *pre[] = {"ip", "netns", "exec", ns};
        DCR_CHECK(dcr_role_launcher_set_prefix(l, role, pre, 4));
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

json_t *dcr_testbed_json(const dcr_testbed_t *t)
{
    return json_pack("{s:i,s:s,s:i,s:i,s:s,s:s,s:s,s:s}", "id", t->cfg.id, "subnet", t->subnet,
                     "train_hosts", t->cfg.train_hosts, "rollout_hosts", t->cfg.rollout_hosts,
                     "control", t->control, "s3", t->s3, "owners_from",
                     "mpirun in t0, ranks in t0..t<N-1> (launch agent)", "coordinator",
                     "services host (with the launcher and the verifier)");
}
