/* ctest-labels: integration
 *
 * dcr bench --processes: rollout nodes and the verifier as processes of this
 * host. Every timed refit is bit-exact by the verifier process; the object
 * store's cross bytes follow its rule (one upload plus one download per
 * rollout-node process, each counted by the process that moved them); a
 * swapped digests file is named by version, receiver and parameter; a
 * SIGTERM to the launcher or a SIGKILL to a rollout-node process leaves no
 * process and no run directory behind, and a node's death fails the run at
 * once with one line naming the node. By default the run directory is in
 * memory and the control plane's file in TMPDIR, named to every role. An
 * elastic join (--join-at) starts
 * the last node's process mid-run; it joins from an anchor plus replay or
 * densely, and every version stays bit-exact. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli_run.h"
#include "dcr/codec.h"
#include "dcr/control.h"
#include "dcr/parties.h"
#include "deploy/roles.h"
#include "testfiles.h"

#define SMALL "--scale 64 --layers 2 --seed 7"

static char g_tmp[256]; /* this test's TMPDIR: the launcher's run directories go there */

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* Processes whose command line mentions `needle` (our TMPDIR: every role of
 * a run gets the run directory in its arguments); the pid of one that also
 * mentions `also` (may be NULL) in *pid_p. */
static char g_seen[8192]; /* the command line of the last process found */

/* Process pid's command line, arguments separated by spaces ("" when gone). */
static void read_cmdline(const char *pid, char *buf, size_t cap)
{
    char path[300];
    snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
    FILE *f = fopen(path, "rb");
    size_t len = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i + 1 < len; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    buf[len] = '\0';
}

static int processes_with(const char *needle, const char *also, pid_t *pid_p)
{
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char buf[8192];
        read_cmdline(e->d_name, buf, sizeof(buf));
        if (!strstr(buf, needle)) continue;
        n++;
        snprintf(g_seen, sizeof(g_seen), "%s: %s", e->d_name, buf);
        if (also && strstr(buf, also) && pid_p) *pid_p = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

static int setup(void **state)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/dcr-procs-test-%d", (int)getpid());
    mkdir(g_tmp, 0755);
    setenv("TMPDIR", g_tmp, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf -- %s", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* The run's n refits, each checked by the verifier process and bit-exact. */
static json_t *verified_refits(json_t *j, size_t n)
{
    json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), n);
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(refits, i);
        assert_true(json_is_true(json_object_get(f, "verified")));
        assert_true(json_is_true(json_object_get(f, "bit_exact")));
    }
    return refits;
}

static void test_bench_processes_bit_exact(void **state)
{
    json_t *j = run_json("bench --processes " SMALL " --warmup 1 --refits 3 --json");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    const char *where =
        json_string_value(json_object_get(json_object_get(j, "config"), "run_directory"));
    assert_non_null(where);
    assert_string_equal(where, testfiles_shm_is_memory() ? "memory" : "disk");
    json_t *p = json_object_get(j, "processes");
    assert_int_equal(json_integer_value(json_object_get(p, "rollout_nodes")), 2);
    assert_int_equal(json_integer_value(json_object_get(p, "verifier")), 1);
    /* The embedded default's training layout: 2 nodes x 2 GPUs, one owner
     * process (an MPI rank) each; the coordinator a process of its own. */
    assert_int_equal(json_integer_value(json_object_get(p, "owners")), 4);
    assert_int_equal(json_integer_value(json_object_get(p, "coordinator")), 1);
    assert_true(json_is_true(json_object_get(p, "coordinator_process")));
    json_t *refits = verified_refits(j, 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *f = json_array_get(refits, i);
        json_int_t pay = json_integer_value(json_object_get(f, "payload_bytes"));
        assert_true(pay > 0);
        /* Object store: one upload, one download by each of 2 node processes. */
        assert_int_equal(json_integer_value(json_object_get(f, "cross_bytes")), 3 * pay);
    }
    assert_true(json_real_value(json_object_get(j, "speedup")) > 0);
    /* Memory per role: both node processes and the 4 owner ranks, each
     * peak at least what the role must hold. */
    json_t *mem = json_object_get(j, "memory_per_role");
    assert_int_equal(json_array_size(mem), 2 + 4);
    for (size_t i = 0; i < json_array_size(mem); i++) {
        json_t *m = json_array_get(mem, i);
        json_int_t need = json_integer_value(json_object_get(m, "required_bytes"));
        assert_true(need > 0);
        assert_true(json_integer_value(json_object_get(m, "peak_rss_bytes")) >= need);
    }
    json_decref(j);
    /* Nothing left: no role process, no run directory. */
    assert_int_equal(processes_with(g_tmp, NULL, NULL), 0);
    assert_int_equal(entries(g_tmp), 0);
}

/* The (actor, stage) pairs of a Chrome trace's intervals, as "actor/stage"
 * lines in buf (sorted, distinct); a node's carry its id ("node/recv/1"). */
static void trace_kinds(const char *path, char *buf, size_t cap)
{
    json_error_t e;
    json_t *t = json_load_file(path, 0, &e);
    if (!t) fail_msg("%s: not JSON: %s", path, e.text);
    json_t *ev = json_object_get(t, "traceEvents");
    assert_true(json_array_size(ev) > 0);
    char kinds[64][48];
    int n = 0;
    size_t i;
    json_t *x;
    json_array_foreach(ev, i, x)
    {
        json_t *args = json_object_get(x, "args");
        const char *actor = json_string_value(json_object_get(args, "actor"));
        const char *stage = json_string_value(json_object_get(args, "stage"));
        if (!actor || !stage) continue;
        char k[48];
        snprintf(k, sizeof(k), "%s/%s", actor, stage);
        if (!strcmp(actor, "node"))
            snprintf(k, sizeof(k), "%s/%s/%lld", actor, stage,
                     (long long)json_integer_value(json_object_get(args, "id")));
        int j = 0;
        while (j < n && strcmp(kinds[j], k)) j++;
        if (j == n && n < 64) snprintf(kinds[n++], sizeof(kinds[0]), "%s", k);
    }
    json_decref(t);
    qsort(kinds, (size_t)n, sizeof(kinds[0]), (int (*)(const void *, const void *))strcmp);
    buf[0] = '\0';
    for (int j = 0; j < n; j++) {
        strncat(buf, kinds[j], cap - strlen(buf) - 1);
        strncat(buf, "\n", cap - strlen(buf) - 1);
    }
}

/* --trace merges every process's intervals on one clock: the coordinator
 * process's commit, the owner ranks' construction and sends, the node
 * processes' downloads, applies and acknowledgments. The kinds of interval
 * are those of the same run in one process (the oracle), and `dcr bounds`
 * on the written file gives the bounds the run reported. */
static void test_processes_trace_merged(void **state)
{
    char args[1024], path[300], ref[300], kinds[2048], want[2048];
    snprintf(path, sizeof(path), "%s-merged.json", g_tmp);
    snprintf(ref, sizeof(ref), "%s-inproc.json", g_tmp);
    snprintf(args, sizeof(args),
             "bench --processes " SMALL " --warmup 1 --refits 2 --trace %s --json", path);
    json_t *j = run_json(args);
    json_t *refits = verified_refits(j, 2);
    trace_kinds(path, kinds, sizeof(kinds));
    static const char *const must[] = {"coord/commit\n",   "coord/refit\n",    "owner/compare\n",
                                       "owner/baseline\n", "endpoint/send\n",  "endpoint/fetch\n",
                                       "node/recv/0\n",    "receiver/apply\n", "receiver/ack\n"};
    for (size_t k = 0; k < sizeof(must) / sizeof(must[0]); k++)
        if (!strstr(kinds, must[k])) fail_msg("merged trace lacks %s(has:\n%s)", must[k], kinds);
    snprintf(args, sizeof(args), "bench " SMALL " --warmup 1 --refits 2 --trace %s --json", ref);
    json_decref(run_json(args));
    trace_kinds(ref, want, sizeof(want));
    assert_string_equal(kinds, want);
    snprintf(args, sizeof(args), "bounds %s --json", path);
    json_t *b = run_json(args);
    json_t *br = json_object_get(b, "refits");
    assert_int_equal(json_array_size(br), 3); /* the warm-up's window too */
    for (size_t i = 0; i < 2; i++) {
        json_t *f = json_array_get(refits, i), *g = json_array_get(br, i + 1);
        assert_int_equal(json_integer_value(json_object_get(g, "refit")), (json_int_t)i + 2);
        static const char *const keys[] = {"construction_lb_s", "transport_lb_s", "finalization_s"};
        for (size_t k = 0; k < 3; k++) {
            double have = json_real_value(json_object_get(g, keys[k]));
            double said = json_real_value(json_object_get(f, keys[k]));
            assert_true(have > 0);
            if (fabs(have - said) > 1e-6)
                fail_msg("refit %zu %s: %.9f from the trace, %.9f reported", i + 2, keys[k], have,
                         said);
        }
        assert_true(json_is_integer(json_object_get(g, "busiest_owner")));
        assert_true(json_is_integer(json_object_get(g, "busiest_endpoint")));
    }
    json_decref(b);
    json_decref(j);
    unlink(path);
    unlink(ref);
}

/* The relay tree across processes over real TCP: three rollout-node
 * processes in a chain (fan-out 1: the root, node 1 forwarding to node 2)
 * fed by the owner ranks. Each node published its own listening address
 * through the control plane; every node received every payload through
 * the tree and nothing went through the object store; each payload crossed
 * the boundary once; the verifier process finds every version bit-exact. */
static void test_relay_across_processes(void **state)
{
    char args[1024], run_dir[300], path[300], kinds[2048];
    snprintf(run_dir, sizeof(run_dir), "%s-relay", g_tmp);
    snprintf(path, sizeof(path), "%s-relay.json", g_tmp);
    snprintf(args, sizeof(args),
             "bench --processes --transport relay " SMALL " --rollout-nodes 3 --fanout 1 "
             "--warmup 1 --refits 2 --workdir %s --trace %s --json",
             run_dir, path);
    json_t *j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "processes"), "rollout_nodes")), 3);
    json_t *refits = verified_refits(j, 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *f = json_array_get(refits, i);
        json_int_t pay = json_integer_value(json_object_get(f, "payload_bytes"));
        assert_true(pay > 0);
        assert_int_equal(json_integer_value(json_object_get(f, "cross_bytes")), pay);
    }
    json_decref(j);
    trace_kinds(path, kinds, sizeof(kinds));
    for (int n = 0; n < 3; n++) {
        char want[32];
        snprintf(want, sizeof(want), "node/recv/%d\n", n);
        if (!strstr(kinds, want)) fail_msg("relay trace lacks %s(has:\n%s)", want, kinds);
    }
    assert_non_null(strstr(kinds, "endpoint/send\n"));
    assert_null(strstr(kinds, "endpoint/fetch\n")); /* no object store download */
    char store[400];
    snprintf(store, sizeof(store), "%s/objstore-objstore", run_dir);
    assert_int_equal(entries(store), 0);
    /* The endpoints, as the control plane holds them: three listeners. */
    dcr_run_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    dcr_control_t *control = NULL;
    assert_int_equal(dcr_role_control_open(&cfg, run_dir, &control), DCR_OK);
    unsigned ports[3];
    for (int n = 0; n < 3; n++) {
        char addr[64]; /* the get refuses an empty address or one that does not fit */
        assert_int_equal(dcr_node_endpoint_get(control, n, addr, sizeof(addr)), DCR_OK);
        assert_int_equal(sscanf(addr, "127.0.0.1:%u", &ports[n]), 1);
        assert_true(ports[n] > 0 && ports[n] < 65536);
        for (int m = 0; m < n; m++) assert_int_not_equal(ports[m], ports[n]);
    }
    dcr_control_destroy(control);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf -- %s %s", run_dir, path);
    assert_int_equal(system(cmd), 0);
}

static int64_t part_bytes(const json_t *m, const char *name)
{
    json_t *v = json_object_get(json_object_get(m, "parts"), name);
    assert_true(json_is_integer(v));
    return (int64_t)json_integer_value(v);
}

/* Memory per role (deploy/role_memory.h): every rollout-node and owner
 * process of the kept run wrote its peak resident memory beside what it
 * must hold. Plausible means: the peak covers what the role holds written
 * (a node's replicas, an owner's shards and trackers: all resident, since
 * every byte of them was written), and it stays below what it holds plus
 * the harness's copies plus a process's libraries and heap (256 MiB). The
 * replicas are checked against the checkpoint: the default serving layout
 * is 2 nodes x 2 receivers at tensor parallelism 2, so the 4 receivers
 * hold 2 checkpoints between them, plus the tensors every rank of a
 * tensor-parallel group holds whole (norms), at most a few percent here. */
/* One role's figures (memory/ROLE-ID.json): returned with its peak, checked
 * to stay below what it must hold plus the harness's copies plus 256 MiB. */
static json_t *role_memory(const char *dir, const char *role, int id, int64_t *peak_p)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/memory/%s-%d.json", dir, role, id);
    json_error_t err;
    json_t *m = json_load_file(path, 0, &err);
    if (!m) fail_msg("%s: %s", path, err.text);
    int64_t peak = json_integer_value(json_object_get(m, "peak_rss_bytes")),
            need = json_integer_value(json_object_get(m, "required_bytes")),
            harness = json_integer_value(json_object_get(m, "harness_bytes"));
    assert_true(peak <= need + harness + ((int64_t)256 << 20));
    *peak_p = peak;
    return m;
}

static void check_memory_per_role(const char *dir, int64_t checkpoint)
{
    int64_t replicas = 0, peak;
    for (int node = 0; node < 2; node++) {
        json_t *m = role_memory(dir, "rollout-node", node, &peak);
        replicas += part_bytes(m, "replicas");
        assert_int_equal(json_integer_value(json_object_get(m, "required_bytes")),
                         part_bytes(m, "replicas") + part_bytes(m, "scratch"));
        assert_true(part_bytes(m, "scratch") > 0);
        assert_true(peak >= part_bytes(m, "replicas"));
        json_decref(m);
    }
    assert_true(replicas >= 2 * checkpoint);
    assert_true((double)replicas <= 2.1 * (double)checkpoint);
    for (int rank = 0; rank < 4; rank++) {
        json_t *m = role_memory(dir, "owner", rank, &peak);
        assert_true(part_bytes(m, "shards") > 0 && part_bytes(m, "trackers") > 0);
        assert_true(peak >= part_bytes(m, "shards") + part_bytes(m, "trackers"));
        json_decref(m);
    }
}

/* The verifier compares every receiver with its own dense refit: a node's
 * digests of another version are named. */
static void test_verifier_names_a_difference(void **state)
{
    char dir[300], args[1024], from[400], to[400];
    snprintf(dir, sizeof(dir), "%s/kept", g_tmp);
    snprintf(args, sizeof(args),
             "bench --processes " SMALL " --warmup 1 --refits 2 --workdir %s --json", dir);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s: %s", args, r.err);
    json_error_t err;
    json_t *j = json_loads(r.out, 0, &err);
    if (!j) fail_msg("dcr %s: not JSON: %s", args, err.text);
    check_memory_per_role(dir, json_integer_value(json_object_get(j, "checkpoint_bytes")));
    json_decref(j);
    snprintf(args, sizeof(args), "verify-digests " SMALL " --workdir %s --first 2 --last 3", dir);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "version 2 bit-exact yes\nversion 3 bit-exact yes\n"));
    snprintf(from, sizeof(from), "%s/digests/v2-r3.dcrd", dir);
    snprintf(to, sizeof(to), "%s/digests/v3-r3.dcrd", dir);
    char cp[1024];
    snprintf(cp, sizeof(cp), "cp -- %s %s", from, to);
    assert_int_equal(system(cp), 0);
    run(&r, args);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.out, "version 3 bit-exact no"));
    assert_non_null(strstr(r.err, "version 3, receiver 3: parameter "));
    assert_non_null(strstr(r.err, "differs from the dense refit"));
    /* Another seed is another run: every version differs. */
    snprintf(args, sizeof(args),
             "verify-digests --scale 64 --layers 2 --seed 8 --workdir %s --first 2 --last 2 "
             "--wait-ms 0",
             dir);
    run(&r, args);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.out, "version 2 bit-exact no"));
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf -- %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Starts `dcr <args>` in the background with stdout and stderr to files. */
static pid_t start(const char *args, const char *err_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[2048];
        const char *cli = getenv("DCR_CLI");
        snprintf(cmd, sizeof(cmd), "exec %s %s %s 2>%s", cli ? cli : DCR_CLI_PATH, args,
                 strchr(args, '>') ? "" : ">/dev/null", err_path);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The value after `flag ` in process pid's command line ("" when it has
 * none); the whole line in cmdline. */
static void role_flag(pid_t pid, const char *flag, char *out, size_t cap, char *cmdline,
                      size_t cmdline_cap)
{
    char id[32], key[64];
    snprintf(id, sizeof id, "%d", (int)pid);
    read_cmdline(id, cmdline, cmdline_cap);
    snprintf(key, sizeof key, " %s ", flag);
    const char *p = strstr(cmdline, key);
    size_t n = p ? strcspn(p + strlen(key), " ") : 0;
    snprintf(out, cap, "%.*s", (int)n, p ? p + strlen(key) : "");
}

/* The run directory of the running run, from a rollout-node process's
 * arguments (every role gets it as --workdir, and the control plane's file
 * in our TMPDIR as --control); "" until one has started. */
static char g_rundir[300];

static bool find_rundir(void)
{
    pid_t node = 0;
    processes_with(g_tmp, "rollout-node", &node);
    if (node <= 0) return false;
    char cmdline[8192];
    role_flag(node, "--workdir", g_rundir, sizeof g_rundir, cmdline, sizeof cmdline);
    return g_rundir[0] != '\0';
}

/* Waits until the run has committed a version (a digests file exists). */
static void wait_for_commit(void)
{
    g_rundir[0] = '\0';
    char digests[400] = "";
    for (int i = 0; i < 600; i++) {
        if (!g_rundir[0] && find_rundir())
            snprintf(digests, sizeof digests, "%s/digests/v1-r0.dcrd", g_rundir);
        if (digests[0] && access(digests, F_OK) == 0) return;
        nap_ms(50);
    }
    fail_msg("no commit within 30 s (run directory '%s')", g_rundir);
}

static int wait_exit(pid_t pid, int limit_ms)
{
    int status = 0;
    for (int t = 0; t < limit_ms / 20; t++) {
        if (waitpid(pid, &status, WNOHANG) == pid) return status;
        nap_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("dcr did not end within %d ms", limit_ms);
    return status;
}

/* Waits up to 5 s for every role of the run and its directory to be gone;
 * `kept` files of the test's own stay in g_tmp. */
static void assert_nothing_left_but(int kept)
{
    /* Node processes die with the launcher; the janitor removes the run
     * directory half a second after it. */
    int procs = 1, files = 1;
    for (int t = 0; t < 100 && (procs || files); t++) {
        nap_ms(50);
        procs = processes_with(g_tmp, "dcr-bench-", NULL);
        files = entries(g_tmp) - kept;
    }
    if (procs) fail_msg("a role outlived the run: %s", g_seen);
    if (files) fail_msg("%d files left in %s", files, g_tmp);
    /* The run directory (in memory, outside our TMPDIR) went too. */
    for (int t = 0; t < 100 && g_rundir[0] && access(g_rundir, F_OK) == 0; t++) nap_ms(50);
    if (g_rundir[0] && access(g_rundir, F_OK) == 0) fail_msg("%s outlived the run", g_rundir);
}

static void assert_nothing_left(void)
{
    assert_nothing_left_but(1); /* the stderr file of the run */
}

/* The default layout of a running run (dcr bench, "Where the files go"):
 * the run directory in memory without a control plane, which is a file of
 * a folder of its own in our TMPDIR, named to every role as --control. */
static void assert_default_layout(void)
{
    if (!testfiles_shm_is_memory()) {
        print_message("/dev/shm is not memory here: the layout is not checked\n");
        return;
    }
    assert_int_equal(strncmp(g_rundir, "/dev/shm/dcr-bench-", 19), 0);
    char path[400], control[300], prefix[300];
    snprintf(path, sizeof path, "%s/control.db", g_rundir);
    assert_int_equal(access(path, F_OK), -1);
    pid_t node = 0, coord = 0;
    processes_with(g_tmp, "rollout-node", &node);
    processes_with(g_tmp, "coordinator", &coord);
    assert_true(node > 0 && coord > 0);
    pid_t roles[] = {node, coord};
    snprintf(prefix, sizeof prefix, "%s/dcr-bench-control-", g_tmp);
    for (int i = 0; i < 2; i++) {
        char cmdline[8192];
        role_flag(roles[i], "--control", control, sizeof control, cmdline, sizeof cmdline);
        if (strncmp(control, prefix, strlen(prefix)) != 0)
            fail_msg("--control '%s' is not in %s: %s", control, g_tmp, cmdline);
        assert_int_equal(access(control, F_OK), 0);
    }
}

/* OpenMPI's files of the owner job are in the run directory: its session
 * folder always, its ranks' shared-memory segments when that is memory. */
static void assert_mpi_files_in_run_directory(void)
{
    assert_int_equal(testfiles_count(g_rundir, "ompi."), 1);
    if (testfiles_shm_is_memory()) assert_true(testfiles_count(g_rundir, "vader_segment.") >= 1);
}

/* SIGTERM: the launcher cleans up itself; SIGKILL: its children die with
 * it and the janitor removes the run directory and the control plane's
 * folder, and with the run directory OpenMPI's session folder and its
 * ranks' shared-memory segments (a killed mpirun leaves them behind). */
static void test_sigterm_leaves_nothing(void **state)
{
    const int sigs[] = {SIGTERM, SIGKILL};
    for (int i = 0; i < 2; i++) {
        char err[400];
        snprintf(err, sizeof(err), "%s/stderr", g_tmp);
        pid_t pid = start("bench --processes " SMALL " --warmup 0 --refits 1000", err);
        wait_for_commit();
        assert_true(processes_with(g_tmp, "rollout-node", NULL) >= 2);
        assert_default_layout();
        assert_mpi_files_in_run_directory();
        kill(pid, sigs[i]);
        wait_exit(pid, 10000);
        assert_nothing_left();
        unlink(err);
    }
}

/* Starts a run and SIGKILLs its rollout-node 1 once a version committed. */
static pid_t start_and_kill_node_1(const char *args, const char *err_path)
{
    pid_t pid = start(args, err_path);
    wait_for_commit();
    pid_t node = 0;
    processes_with(g_tmp, "--node 1", &node);
    assert_true(node > 0);
    kill(node, SIGKILL);
    return pid;
}

static void test_node_death_fails_the_run(void **state)
{
    char err[400], text[8192];
    snprintf(err, sizeof(err), "%s/stderr", g_tmp);
    pid_t pid = start_and_kill_node_1("bench --processes " SMALL " --warmup 0 --refits 1000", err);
    int status = wait_exit(pid, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    slurp(err, text, sizeof(text));
    if (!strstr(text, "rollout-node 1 (pid") || !strstr(text, "killed by signal 9"))
        fail_msg("stderr does not name the dead node: %s", text);
    const char *last = strstr(text, "dcr bench: ");
    if (!last || !strstr(last, "rollout node 1 is gone")) fail_msg("final line: %s", text);
    assert_nothing_left();
    unlink(err);
}

/* With --restart-nodes a killed node comes back as a new process that
 * restores the committed version by a dense refit; the run goes on and every
 * timed refit stays bit-exact by the verifier. */
static void test_node_restart_keeps_the_run(void **state)
{
    char err[400], out[400], args[600], text[1 << 16];
    snprintf(err, sizeof(err), "%s/stderr", g_tmp);
    snprintf(out, sizeof(out), "%s/stdout", g_tmp);
    snprintf(args, sizeof(args),
             "bench --processes --restart-nodes " SMALL " --warmup 0 --refits 10 --json >%s", out);
    pid_t pid = start_and_kill_node_1(args, err);
    int status = wait_exit(pid, 90000);
    slurp(err, text, sizeof(text));
    size_t len = strlen(text); /* the end of stderr says why */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("run failed: ...%s", text + (len > 1500 ? len - 1500 : 0));
    assert_non_null(strstr(text, "rollout-node 1 restarted as pid"));
    json_error_t e;
    json_t *j = json_load_file(out, 0, &e);
    if (!j) fail_msg("not JSON: %s", e.text);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *p = json_object_get(j, "processes");
    assert_int_equal(json_integer_value(json_object_get(p, "node_restarts")), 1);
    json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), 10);
    for (size_t i = 0; i < 10; i++)
        assert_true(json_is_true(json_object_get(json_array_get(refits, i), "verified")));
    json_decref(j);
    unlink(out);
    assert_nothing_left();
    unlink(err);
}

/* Real SIGKILLs at the nodes' "joined" and "done" points, in turn, with
 * restarts: every version is committed (one per refit), and every timed
 * refit is bit-exact by the verifier process. */
static void test_sigkills_with_restarts(void **state)
{
    json_t *j = run_json("bench --processes --sigkill-every 2 " SMALL " --warmup 0 --refits 8 "
                         "--json");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *p = json_object_get(j, "processes");
    json_int_t kills = json_integer_value(json_object_get(p, "sigkills"));
    assert_true(kills >= 2);
    assert_int_equal(json_integer_value(json_object_get(p, "node_restarts")), kills);
    json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), 8);
    int retried = 0;
    for (size_t i = 0; i < 8; i++) {
        json_t *f = json_array_get(refits, i);
        assert_true(json_is_true(json_object_get(f, "verified")));
        assert_true(json_is_true(json_object_get(f, "bit_exact")));
        retried += json_integer_value(json_object_get(f, "attempts")) > 1;
    }
    /* A kill at "joined" always fails its attempt (its node never finishes). */
    assert_true(retried >= 1);
    json_decref(j);
    assert_int_equal(processes_with(g_tmp, "dcr-bench-", NULL), 0);
}

/* Relay tree nodes SIGKILLed and restarted: the root at "joined" (the
 * owners connected to it lose their connection), then the leaf (its parent
 * waits for it; the new process turns the attempt away). Each such attempt
 * fails within seconds and its retry commits: the run, far below the
 * coordinator's 120 s stall timeout, stays bit-exact. */
static void test_relay_sigkills(void **state)
{
    double t0 = (double)time(NULL);
    json_t *j = run_json("bench --processes --transport relay --sigkill-every 2 " SMALL
                         " --warmup 1 --refits 4 --json");
    assert_true((double)time(NULL) - t0 < 60.0);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *p = json_object_get(j, "processes");
    json_int_t kills = json_integer_value(json_object_get(p, "sigkills"));
    assert_true(kills >= 2);
    assert_int_equal(json_integer_value(json_object_get(p, "node_restarts")), kills);
    json_t *refits = verified_refits(j, 4);
    int retried = 0;
    for (size_t i = 0; i < 4; i++)
        retried += json_integer_value(json_object_get(json_array_get(refits, i), "attempts")) > 1;
    assert_true(retried >= 1);
    json_decref(j);
    assert_int_equal(processes_with(g_tmp, "dcr-bench-", NULL), 0);
}

/* The coordinator process SIGKILLed in every second transition, at
 * "opened" and "sent" in turn: a new coordinator process resumes each
 * transition, every version is committed (the verifier finds the digests of
 * every timed refit's version: none lost) and bit-exact. */
static void test_coordinator_kills_fail_over(void **state)
{
    json_t *j = run_json("bench --processes --kill-coordinator-every 2 " SMALL
                         " --warmup 0 --refits 4 --json");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *p = json_object_get(j, "processes");
    json_int_t kills = json_integer_value(json_object_get(p, "coordinator_kills"));
    assert_int_equal(kills, 2);
    assert_int_equal(json_integer_value(json_object_get(p, "coordinator_restarts")), kills);
    verified_refits(j, 4);
    json_decref(j);
    assert_nothing_left_but(0);
}

/* The pid of an owner rank of the run (a `dcr owner` process, not mpirun). */
static pid_t owner_rank(void)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    for (struct dirent *e; d && (e = readdir(d)) && !found;) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char buf[8192];
        read_cmdline(e->d_name, buf, sizeof(buf));
        if (!strncmp(buf, "mpirun ", 7)) continue; /* the job's launcher, not a rank */
        if (strstr(buf, g_tmp) && strstr(buf, " owner --workdir")) found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

/* An owner rank's death ends the MPI job; the run fails at once with one
 * line naming the owner job, and nothing is left behind. */
static void test_owner_death_fails_the_run(void **state)
{
    char err[400], text[1 << 15];
    snprintf(err, sizeof(err), "%s/stderr", g_tmp);
    pid_t pid = start("bench --processes " SMALL " --warmup 0 --refits 1000", err);
    wait_for_commit();
    pid_t owner = owner_rank();
    assert_true(owner > 0);
    kill(owner, SIGKILL);
    int status = wait_exit(pid, 60000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    slurp(err, text, sizeof(text));
    const char *last = strstr(text, "dcr bench: ");
    if (!last || !strstr(last, "owner")) fail_msg("final line: %s", text);
    assert_nothing_left();
    unlink(err);
}

/* The owners as threads of the launcher (--owner-threads) still refit
 * bit-exactly with the coordinator in the launcher. */
static void test_owner_threads(void **state)
{
    json_t *j =
        run_json("bench --processes --owner-threads " SMALL " --warmup 0 --refits 2 --json");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *p = json_object_get(j, "processes");
    assert_int_equal(json_integer_value(json_object_get(p, "owners")), 1);
    assert_int_equal(json_integer_value(json_object_get(p, "owner_threads")), 4);
    assert_true(json_is_false(json_object_get(p, "coordinator_process")));
    json_decref(j);
}

/* ---- a forger in the shared store ---- */

/* Watches an object-store directory: into every attempt prefix that
 * appears it writes one forged payload (unkeyed, with a valid plain digest,
 * stamped with that attempt, from owner 0 with an id no owner uses), as
 * anyone who can write to a shared bucket could. */
typedef struct forger {
    char store[300];
    volatile int stop;
    int planted; /* attempt prefixes forged into */
} forger_t;

enum { FORGED_ID = 999999 };

static void forge_into(forger_t *f, uint64_t tau)
{
    dcr_encoder_t *enc = NULL;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    dcr_encode_params_t prm = {.tau = tau, .owner = 0, .payload_id = FORGED_ID, .level = 1};
    const uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(dcr_encoder_finish(enc, &prm, &buf, &len), DCR_OK);
    char tmp[400], path[400];
    /* Dot-named while written, then renamed: as the directory store writes. */
    snprintf(tmp, sizeof tmp, "%s/attempt-%llu/.tmp-forged", f->store, (unsigned long long)tau);
    snprintf(path, sizeof path, "%s/attempt-%llu/payload-0-%d.dcrp", f->store,
             (unsigned long long)tau, FORGED_ID);
    FILE *out = fopen(tmp, "wb");
    if (out) {
        fwrite(buf, 1, len, out);
        fclose(out);
        if (rename(tmp, path) == 0) f->planted++;
    }
    dcr_encoder_destroy(enc);
}

static void *forger_main(void *arg)
{
    forger_t *f = arg;
    uint64_t done = 0; /* the newest attempt forged into */
    while (!f->stop) {
        DIR *d = opendir(f->store);
        for (struct dirent *e; d && (e = readdir(d));) {
            unsigned long long tau;
            if (sscanf(e->d_name, "attempt-%llu", &tau) != 1 || tau <= done) continue;
            done = tau;
            forge_into(f, tau);
        }
        if (d) closedir(d);
        nap_ms(1);
    }
    return NULL;
}

/* A rollout-node process configured with a payload key refuses a forged
 * payload in its attempt's prefix, and the launcher's results count it
 * (payloads_rejected, payloads_unauthenticated): the owners and the
 * launcher never download payloads, so every refusal counted is a node
 * process's. The refit still commits bit-exact: an unlisted payload is
 * never applied. Slow emulated links keep each attempt open long enough
 * for the nodes to list the forged object before the manifest. */
static void test_node_refusals_gathered(void **state)
{
    char key[300], args[1200];
    snprintf(key, sizeof key, "%s/payload.key", g_tmp);
    uint8_t k[32];
    for (int i = 0; i < 32; i++) k[i] = (uint8_t)(0x5A ^ (i * 7));
    int fd = open(key, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, k, sizeof k), (ssize_t)sizeof k);
    close(fd);
    forger_t f = {.stop = 0, .planted = 0};
    snprintf(f.store, sizeof f.store, "%s/store", g_tmp);
    mkdir(f.store, 0755);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, forger_main, &f), 0);
    snprintf(args, sizeof args,
             "bench --processes " SMALL " --warmup 0 --refits 3 --latency-ms 100 "
             "--payload-key %s --store dir:%s --json",
             key, f.store);
    json_t *j = run_json(args);
    f.stop = 1;
    pthread_join(t, NULL);
    assert_true(f.planted >= 3);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    verified_refits(j, 3);
    json_int_t rej = json_integer_value(json_object_get(j, "payloads_rejected"));
    json_int_t unauth = json_integer_value(json_object_get(j, "payloads_unauthenticated"));
    /* At most one refusal per node process and forged payload (each node
     * downloads a listed name once); at least one seen. */
    assert_true(unauth >= 1);
    assert_true(rej >= unauth);
    assert_true(rej <= 2 * f.planted);
    json_decref(j);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf -- %s %s", f.store, key);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(processes_with(g_tmp, NULL, NULL), 0);
    assert_int_equal(entries(g_tmp), 0);
}

static void test_role_usage_errors(void **state)
{
    expect_error("owner --seed 7", 2, "--workdir");
    expect_error("coordinator --seed 7", 2, "--workdir");
    expect_error("rollout-node --workdir /nonexistent", 2, "--node");
    expect_error("rollout-node --node 1", 2, "--workdir");
    expect_error("verify-digests --workdir /nonexistent --first 3 --last 2", 2, "--last");
    expect_error("bench --processes --owner-threads --transport relay " SMALL, 2, "MPI job");
    expect_error("bench --processes --rl async " SMALL, 2, "--rl sync");
    expect_error("bench --join-at 2 " SMALL, 2, "--processes");
    expect_error("bench --processes --transport relay --join-at 2 " SMALL, 2, "objstore");
    expect_error("bench --processes --rollout-nodes 1 --join-at 2 " SMALL, 2, "2 rollout nodes");
    expect_error("bench --processes --warmup 0 --refits 3 --join-at 3 " SMALL, 2,
                 "below the last one, 3");
    expect_error("bench --processes --sigkill-every 2 --join-at 2 " SMALL, 2, "--sigkill-every");
    expect_error("bench --processes --join-at 0 " SMALL, 2, "--join-at");
    /* --anchor-every: one rule (dcr_bench_config_check) against the window
     * the run keeps, --retain K or the default, worded alike in bench, faults
     * and the role processes. */
    expect_error("bench --processes --retain 4 --anchor-every 6 " SMALL, 2,
                 "--anchor-every 6 is above the retention window (4 versions)");
    expect_error("rollout-node --node 0 --workdir /nonexistent --retain 4 --anchor-every 6 " SMALL,
                 2, "--anchor-every 6 is above the retention window (4 versions)");
    expect_error("faults train --processes --anchor-every 9 " SMALL, 2,
                 "--anchor-every 9 is above the retention window (8 versions)");
    expect_error("bench --anchor-every 2 " SMALL, 2, "--anchor-every needs --processes");
    static result_t r;
    run(&r, "bench --help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--join-at"));
}

/* A run with an elastic join (--join-at 3, no warm-up, 6 refits): the
 * last rollout node's process starts once version 3 is committed while
 * the refits go on, and joins at version 3 or later. Every version is
 * bit-exact on every receiver by the verifier process (a dense refit of
 * each version in a process that shares nothing with the run), the joined
 * node's from the version it joined at. Its 2 receivers restore by `kind`;
 * returns the "join" object (a new reference). */
static json_t *run_join(const char *extra, const char *kind)
{
    char args[400];
    snprintf(args, sizeof args,
             "bench --processes " SMALL " --warmup 0 --refits 6 --join-at 3 %s --json", extra);
    json_t *j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    verified_refits(j, 6);
    json_t *join = json_incref(json_object_get(j, "join"));
    if (!json_is_object(join)) fail_msg("%s: no join object in the results", args);
    assert_int_equal(json_integer_value(json_object_get(join, "node")), 1);
    assert_int_equal(json_integer_value(json_object_get(join, "at_step")), 3);
    json_int_t v = json_integer_value(json_object_get(join, "version"));
    if (v < 3 || v > 6) fail_msg("%s: joined at version %lld, expected 3..6", args, (long long)v);
    assert_true(json_real_value(json_object_get(join, "seconds")) > 0);
    json_t *kinds = json_object_get(join, "restores_by_kind");
    assert_int_equal(json_object_size(kinds), 1);
    assert_int_equal(json_integer_value(json_object_get(kinds, kind)), 2);
    json_decref(j);
    assert_int_equal(processes_with(g_tmp, NULL, NULL), 0);
    assert_int_equal(entries(g_tmp), 0);
    return join;
}

static json_int_t join_bytes(const json_t *join, const char *key)
{
    return json_integer_value(json_object_get(join, key));
}

/* With anchors (node 0 writes one every 2 commits) the node joins from the
 * newest anchor plus replay, moving fewer bytes than dense refits of its
 * receivers; so it does with the owners as threads of the launcher, whose
 * own coordinator runs the refits. Without anchors it has nothing to
 * replay from: a dense refit, moving exactly the dense bytes. */
static void test_elastic_join(void **state)
{
    json_t *join = run_join("--anchor-every 2", "anchor");
    assert_true(join_bytes(join, "bytes") > 0);
    assert_true(join_bytes(join, "bytes") < join_bytes(join, "dense_bytes"));
    json_decref(join);
    join = run_join("--anchor-every 2 --owner-threads", "anchor");
    assert_true(join_bytes(join, "bytes") < join_bytes(join, "dense_bytes"));
    json_decref(join);
    join = run_join("", "dense");
    assert_true(join_bytes(join, "bytes") > 0);
    assert_int_equal(join_bytes(join, "bytes"), join_bytes(join, "dense_bytes"));
    json_decref(join);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_role_usage_errors),
        cmocka_unit_test(test_bench_processes_bit_exact),
        cmocka_unit_test(test_processes_trace_merged),
        cmocka_unit_test(test_relay_across_processes),
        cmocka_unit_test(test_relay_sigkills),
        cmocka_unit_test(test_verifier_names_a_difference),
        cmocka_unit_test(test_sigterm_leaves_nothing),
        cmocka_unit_test(test_node_death_fails_the_run),
        cmocka_unit_test(test_node_restart_keeps_the_run),
        cmocka_unit_test(test_sigkills_with_restarts),
        cmocka_unit_test(test_coordinator_kills_fail_over),
        cmocka_unit_test(test_owner_death_fails_the_run),
        cmocka_unit_test(test_owner_threads),
        cmocka_unit_test(test_node_refusals_gathered),
        cmocka_unit_test(test_elastic_join),
    };
    /* One test by name (a glob), as in test_faults: DCR_TEST_FILTER. */
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
