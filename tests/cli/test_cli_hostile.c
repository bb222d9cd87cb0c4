/* ctest-labels: integration
 *
 * The dcr command against a careless or hostile user (issue 15): output
 * paths that are device nodes (made with mknod in a private folder, never
 * under /dev), FIFOs or symlinks are refused and left untouched; work
 * folders are dcr's only when empty or marked; usage errors exit 2 with one
 * line, numbers are decimal only and share one limit across commands; stop
 * signals leave no temporary folder; dcr sim's child dies with its parent;
 * faults counters count what happened. Runs the binary named by DCR_CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "testfiles.h"
#include "testmarker.h"

static char dir[256]; /* private TMPDIR of this test */
static char args[4096];

static int setup(void **state)
{
    if (!testfiles_tmpdir(dir, sizeof(dir), "hostile")) return -1;
    /* Every dcr this test starts makes its temporary folders here. */
    return setenv("TMPDIR", dir, 1);
}

static int teardown(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static int count_prefix(const char *d, const char *prefix)
{
    int n = testfiles_count(d, prefix);
    assert_true(n >= 0);
    return n;
}

static int count_entries(const char *d)
{
    return testfiles_count(d, "");
}

/* A two-layer Qwen2 config named `name` (JSON string body) at path. */
static void write_model(const char *path, const char *name)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"name\": \"%s\", \"family\": \"qwen2\", \"hidden_size\": 896,"
             " \"intermediate_size\": 4864, \"num_hidden_layers\": 2,"
             " \"num_attention_heads\": 14, \"num_key_value_heads\": 2,"
             " \"head_dim\": 64, \"vocab_size\": 151936, \"tie_word_embeddings\": true}",
             name);
    testfiles_put(path, text);
}

static mode_t kind_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & S_IFMT;
}

/* ---- output paths ------------------------------------------------------------ */

static void test_output_paths_refuse_special_files(void **state)
{
    char dev[300], fifo[300], link[300], outside[300];
    path_in(dev, sizeof(dev), "full");
    assert_int_equal(mknod(dev, S_IFCHR | 0666, makedev(1, 7)), 0);
    path_in(fifo, sizeof(fifo), "fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    path_in(outside, sizeof(outside), "outside.txt");
    testfiles_put(outside, "precious\n");
    path_in(link, sizeof(link), "link.json");
    assert_int_equal(symlink(outside, link), 0);

    const char *tiny = "--scale 64 --layers 1 --warmup 0 --refits 1";
    const char *targets[] = {dev, fifo, link};
    const char *kinds[] = {"character device", "FIFO", "symbolic link"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof(args), "bench %s --trace %s", tiny, targets[i]);
        expect_error(args, 2, kinds[i]);
        snprintf(args, sizeof(args), "bench %s --out %s", tiny, targets[i]);
        expect_error(args, 2, targets[i]);
        snprintf(args, sizeof(args), "calibrate --quick --out %s", targets[i]);
        expect_error(args, 2, kinds[i]);
        snprintf(args, sizeof(args), "sim --write-platform %s", targets[i]);
        expect_error(args, 2, kinds[i]);
        snprintf(args, sizeof(args), "bench %s --control %s", tiny, targets[i]);
        expect_error(args, 2, "--control");
    }
    /* Untouched: same kind, same device, same content, nothing beside them. */
    assert_int_equal(kind_of(dev), S_IFCHR);
    struct stat st;
    assert_int_equal(stat(dev, &st), 0);
    assert_int_equal(major(st.st_rdev), 1);
    assert_int_equal(minor(st.st_rdev), 7);
    assert_int_equal(kind_of(fifo), S_IFIFO);
    assert_int_equal(kind_of(link), S_IFLNK);
    testfiles_assert_text(outside, "precious\n");
    assert_int_equal(count_prefix(dir, "full-"), 0); /* no -journal beside the device */
    assert_int_equal(count_prefix(dir, ".full"), 0);
    assert_int_equal(count_prefix(dir, ".fifo"), 0);
    assert_int_equal(count_prefix(dir, ".link"), 0);
    assert_int_equal(count_prefix(dir, "dcr-bench-"), 0);
}

/* An unwritable place fails before the run: nothing of the run is printed. */
static void test_unwritable_output_fails_first(void **state)
{
    static result_t r;
    run(&r, "bench --scale 64 --layers 1 --warmup 0 --refits 1 --out /nonexistent/x.h5");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "/nonexistent"));
    assert_non_null(strstr(r.err, "No such file or directory"));
    /* A file that is not a results file: refused before the run, kept. */
    char foreign[300];
    path_in(foreign, sizeof(foreign), "foreign.h5");
    testfiles_put(foreign, "my notes\n");
    snprintf(args, sizeof(args), "bench --scale 64 --layers 1 --warmup 0 --refits 1 --out %s",
             foreign);
    run(&r, args);
    assert_int_equal(r.rc, 2);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "not a dcr results file"));
    testfiles_assert_text(foreign, "my notes\n");
    run(&r, "calibrate --out /nonexistent/cal.json");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "/nonexistent"));
}

/* A regular file is replaced whole, a results file appended to; the
 * temporary files are gone after. */
static void test_regular_outputs_written(void **state)
{
    char trace[300], out[300];
    path_in(trace, sizeof(trace), "t.json");
    path_in(out, sizeof(out), "r.h5");
    testfiles_put(trace, "old");
    snprintf(args, sizeof(args),
             "bench --scale 64 --layers 1 --warmup 0 --refits 1 --trace %s --out %s", trace, out);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    struct stat a, b;
    assert_int_equal(stat(out, &a), 0);
    assert_int_equal(stat(trace, &b), 0);
    assert_true(b.st_size > 100);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    assert_int_equal(stat(out, &b), 0);
    assert_true(b.st_size > a.st_size); /* the second run was appended */
    assert_int_equal(count_prefix(dir, ".t.json"), 0);
    assert_int_equal(count_prefix(dir, ".r.h5"), 0);
}

/* A --control FILE reused after a run holds that run's commit record: the
 * next run is refused before any work (exit 2, one line), since its
 * receivers would start at version 0 against a plane at version N. */
static void test_reused_control_refused(void **state)
{
    char db[300], fresh[300];
    path_in(db, sizeof(db), "control-reused.db");
    path_in(fresh, sizeof(fresh), "control-fresh.db");
    const char *tiny = "--scale 64 --layers 1 --warmup 0 --refits 1";
    static result_t r;
    snprintf(args, sizeof(args), "bench %s --control %s", tiny, db);
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    expect_error(args, 2, "already holds an earlier run's commit record (version 1,");
    expect_error(args, 2, db);
    snprintf(args, sizeof(args), "bench %s --control %s", tiny, fresh);
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
}

/* ---- work folders ------------------------------------------------------------- */

static void test_work_folders_are_dcrs_only(void **state)
{
    char user[300], file[400], keep[300], marker[400];
    path_in(user, sizeof(user), "mine");
    assert_int_equal(mkdir(user, 0755), 0);
    snprintf(file, sizeof(file), "%s/notes.txt", user);
    testfiles_put(file, "mine\n");
    const char *tiny = "--scale 64 --layers 1 --warmup 0 --refits 1";
    snprintf(args, sizeof(args), "bench %s --keep-payloads %s", tiny, user);
    expect_error(args, 2, "no .dcr-workdir marker");
    snprintf(args, sizeof(args), "bench %s --workdir %s", tiny, user);
    expect_error(args, 2, "--workdir");
    testfiles_assert_text(file, "mine\n");
    assert_int_equal(count_entries(user), 1);
    snprintf(args, sizeof(args), "bench %s --keep-payloads %s/a --workdir %s/b", tiny, dir, dir);
    expect_error(args, 2, "give one");
    /* A folder dcr made is reused: the run succeeds and leaves its marker. */
    path_in(keep, sizeof(keep), "kept");
    snprintf(args, sizeof(args), "bench %s --keep-payloads %s", tiny, keep);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(marker, sizeof(marker), "%s/.dcr-workdir", keep);
    assert_int_equal(kind_of(marker), S_IFREG);
    /* What a killed run leaves (a temporary payload, a reference copy) is
     * removed by the next run, since the marker's run is not alive. */
    char left[500];
    snprintf(left, sizeof(left), "%s/reference-1-1", keep);
    assert_int_equal(mkdir(left, 0755), 0);
    snprintf(left, sizeof(left), "%s/reference-1-1/ref-0-0.bin", keep);
    testfiles_put(left, "x");
    snprintf(left, sizeof(left), "%s/.tmp-payload-1", keep);
    testfiles_put(left, "x");
    run(&r, args);
    if (r.rc != 0) fail_msg("second %s: %s", args, r.err);
    assert_int_equal(access(left, F_OK), -1);
    snprintf(left, sizeof(left), "%s/reference-1-1", keep);
    assert_int_equal(access(left, F_OK), -1);
    /* A marker dcr did not write is refused. */
    testfiles_put(marker, "forged\n");
    expect_error(args, 2, "not a marker dcr wrote");
}

/* ---- usage errors ------------------------------------------------------------ */

static void test_usage_errors_exit_2(void **state)
{
    const char *cases[][2] = {
        {"bench --mode Z", "mode"},
        {"bench --transport bogus", "bogus"},
        {"bench --rl foo", "foo"},
        {"bench --tp 3", "tp"},
        {"bench --layers 100000", "layers 100000"},
        {"bench --lr 1e-3", "--lr applies to --changes adamw only"},
        {"bench --changes adamw --lr 1", "--lr must be in [1e-12, 0.1]"},
        {"bench --changes adamw --change-rate 0.1", "--change-rate applies"},
        {"bench --changes sgd", "sgd"},
        {"faults train --changes uniform --lr 1e-6", "--lr applies"},
        {"faults train --change-rate 0.1", "--change-rate applies"},
        {"faults train --restart-after 2 --kill-every 0", "--restart-after"},
        {"faults train --transport bogus", "bogus"},
        {"sim --change-rate 2", "--change-rate"},
        {"construct --mode Q", "mode"},
        {"verify-paths --tp 3", "tp"},
        {"microbench apply --layers 100000", "layers 100000"},
        {"inventory --tp 3 --gpus-per-node 3", "tp 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(cases[i][0], 2, cases[i][1]);
}

static void test_numbers_are_decimal_only(void **state)
{
    const char *bad[] = {"0x10", "' 5'", "5junk", "inf", "nan", "+5", "1e3x", "''", "0x1p3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(args, sizeof(args), "bench --latency-ms %s", bad[i]);
        expect_error(args, 2, "decimal");
        snprintf(args, sizeof(args), "sim --latency-ms %s", bad[i]);
        expect_error(args, 2, "decimal");
        snprintf(args, sizeof(args), "inventory --scale %s", bad[i]);
        expect_error(args, 2, "decimal");
    }
    expect_error("sim --change-rate 0x0.1", 2, "--change-rate");
    expect_error("microbench apply --rates ' 0.1'", 2, "--rates");
    /* Plain decimals still parse, exponent included. */
    static result_t r;
    run(&r, "inventory --json --scale 16 --layers 2 --train-nodes 1e0");
    assert_int_equal(r.rc, 2); /* an integer flag takes no exponent */
    run(&r, "inventory --json --scale 16 --layers 2");
    assert_int_equal(r.rc, 0);
}

/* A value past a flag's shared limit is refused by every command that
 * takes it; within that limit each command's own bounds win, and the line
 * names the bounds that refused it (the ones --help shows). */
static void test_one_limit_per_flag(void **state)
{
    static result_t a, b, c;
    run(&a, "bench --rollout-nodes 5000");
    run(&b, "sim --rollout-nodes 5000");
    run(&c, "faults train --rollout-nodes 5000");
    assert_int_equal(a.rc, 2);
    assert_int_equal(b.rc, 2);
    assert_int_equal(c.rc, 2);
    assert_non_null(strstr(a.err, "--rollout-nodes must be in [1, 1024], got 5000"));
    assert_non_null(strstr(b.err, "--rollout-nodes must be in [1, 4096], got 5000"));
    assert_non_null(strstr(c.err, "--rollout-nodes must be in [1, 64], got 5000"));
    run(&a, "inventory --serve-tp 128");
    run(&b, "bench --serve-tp 128");
    assert_int_equal(a.rc, 2);
    assert_string_equal(strchr(a.err, ':'), strchr(b.err, ':'));
    run(&a, "construct --level 30");
    run(&b, "table2 --level 30");
    assert_int_equal(a.rc, 2);
    assert_int_equal(b.rc, 2);
    /* construct narrowed --level to 1..19 for no reason: one range now. */
    assert_non_null(strstr(a.err, "--level must be in [-7, 22]"));
    assert_non_null(strstr(b.err, "--level must be in [-7, 22]"));
    /* Within the shared limit: a command's bound the table would allow. */
    run(&a, "bench --rollout-nodes 2000");
    assert_int_equal(a.rc, 2);
    assert_non_null(strstr(a.err, "[1, 1024]"));
    /* The help shows the bounds the parser holds a flag to. */
    run(&a, "construct --help");
    assert_int_equal(a.rc, 0);
    assert_non_null(strstr(a.out, "zstd level (default 1) [-7, 22]"));
}

/* dcr diff and dcr construct have no 0 ("scaled") chunk or bucket default:
 * their own lower bound refuses 0 in the parser (exit 2, one line), where
 * the shared table alone let it through to fail later. */
static void test_command_bounds_win(void **state)
{
    const char *cmds[] = {"diff --init x.safetensors --chunk-mib 0", "diff a b --bucket-mib 0",
                          "construct --chunk-mib 0", "construct --bucket-mib 0"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        static result_t r;
        run(&r, cmds[i]);
        if (r.rc != 2) fail_msg("%s: exit %d, %s", cmds[i], r.rc, r.err);
        const char *flag = strstr(cmds[i], "--chunk-mib") ? "--chunk-mib" : "--bucket-mib";
        char want[96];
        snprintf(want, sizeof want, "%s must be in [0.000976562, 1.04858e+06], got 0", flag);
        if (!strstr(r.err, want)) fail_msg("%s: '%s' lacks '%s'", cmds[i], r.err, want);
        const char *nl = strchr(r.err, '\n');
        assert_non_null(nl);
        assert_null(strchr(nl + 1, '\n')); /* one line */
    }
    /* bench's 0 means "scaled": still accepted by the parser. */
    static result_t r;
    run(&r, "bench --chunk-mib 0 --help");
    assert_int_equal(r.rc, 0);
}

/* A default --layers is a cap: a model with fewer layers is used whole and
 * no error names a flag the user never gave; a given --layers is checked. */
static void test_default_layers_is_a_cap(void **state)
{
    char model[300];
    path_in(model, sizeof(model), "two-layers.json");
    write_model(model, "two-layers");
    static result_t r;
    snprintf(args, sizeof(args), "construct --json --model %s --scale 16", model);
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(args, sizeof(args), "construct --model %s --scale 16 --layers 3", model);
    expect_error(args, 2, "layers 3");
}

/* Names from a user's file are printed escaped: one line, no raw escape. */
static void test_untrusted_names_escaped(void **state)
{
    char model[300];
    path_in(model, sizeof(model), "evil.json");
    write_model(model, "evil\\u001b[2J\\nsecond line");
    static result_t r;
    snprintf(args, sizeof(args), "inventory --model %s --layers 5", model);
    run(&r, args);
    assert_int_not_equal(r.rc, 0);
    assert_null(strchr(r.err, '\x1b'));
    size_t len = strlen(r.err);
    assert_true(len > 0 && r.err[len - 1] == '\n');
    assert_null(memchr(r.err, '\n', len - 1));
    snprintf(args, sizeof(args), "inventory --model %s", model);
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    assert_null(strchr(r.out, '\x1b'));
    assert_null(strstr(r.out, "\nsecond line"));
}

/* ---- honest counters ---------------------------------------------------------- */

/* One receiver, a kill every step: every step loses it, so every step
 * counts one kill (the run restores it before the next step). */
static void test_faults_count_kills(void **state)
{
    json_t *j = run_json("faults train --json --kill-every 1 --rollout-nodes 1 "
                         "--receivers-per-node 1 --serve-tp 1 --steps 3");
    json_t *kinds = json_object_get(j, "faults_by_kind");
    json_int_t fired = json_integer_value(json_object_get(kinds, "kill_delivery")) +
                       json_integer_value(json_object_get(kinds, "kill_apply")) +
                       json_integer_value(json_object_get(kinds, "kill_acked"));
    assert_int_equal(json_integer_value(json_object_get(j, "kills")), 3);
    assert_int_equal(fired, 3);
    /* Restored before steps 2 and 3. */
    assert_int_equal(json_integer_value(json_object_get(j, "restores")), 2);
    json_decref(j);
}

/* bounds refuses a trace whose refit window was stretched to 2^63-1 ns
 * instead of reporting a latency of 9.2e9 s. */
static void test_bounds_refuses_implausible_trace(void **state)
{
    char trace[300], bad[300];
    path_in(trace, sizeof(trace), "b.json");
    path_in(bad, sizeof(bad), "b-bad.json");
    snprintf(args, sizeof(args), "bench --scale 64 --layers 1 --warmup 0 --refits 1 --trace %s",
             trace);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(args, sizeof(args), "bounds %s", trace);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    json_error_t e;
    json_t *j = json_load_file(trace, 0, &e);
    assert_non_null(j);
    json_t *ev;
    size_t i;
    bool stretched = false;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev)
    {
        json_t *a = json_object_get(ev, "args");
        const char *stage = json_string_value(json_object_get(a, "stage"));
        if (stretched || !stage || strcmp(stage, "refit")) continue;
        json_object_set_new(a, "end_ns", json_integer(INT64_MAX));
        stretched = true;
    }
    assert_true(stretched);
    assert_int_equal(json_dump_file(j, bad, 0), 0);
    json_decref(j);
    snprintf(args, sizeof(args), "bounds %s", bad);
    expect_error(args, 1, "after the last interval inside it");
}

/* ---- signals ------------------------------------------------------------------ */

static pid_t spawn(const char *const *argv)
{
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 60 s) until a folder named prefix* exists in dir. */
static void wait_for(const char *prefix, pid_t pid)
{
    for (int i = 0; i < 6000; i++) {
        if (count_prefix(dir, prefix) > 0) return;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("dcr ended before making %s", prefix);
        sleep_ms(10);
    }
    fail_msg("no %s folder appeared", prefix);
}

static void test_signals_remove_temp_folders(void **state)
{
    const char *bench[] = {"dcr", "bench",    "--scale", "16", "--layers",
                           "4",   "--refits", "100000",  NULL};
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        pid_t pid = spawn(bench);
        wait_for("dcr-bench-", pid);
        sleep_ms(300);
        /* The run directory is in memory (when /dev/shm is), the control
         * plane's folder in TMPDIR: both go. */
        int in_memory = testmarker_count_of("/dev/shm", "dcr-bench", (long)pid);
        kill(pid, sigs[i]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 128 + sigs[i]);
        assert_int_equal(count_prefix(dir, "dcr-bench-"), 0);
        assert_int_equal(in_memory, testfiles_shm_is_memory() ? 1 : 0);
        assert_int_equal(testmarker_count_of("/dev/shm", "dcr-bench", (long)pid), 0);
    }
    const char *campaign[] = {"dcr", "faults", "campaign", "--seeds", "1000", "--steps", "4", NULL};
    pid_t pid = spawn(campaign);
    wait_for("dcr-faults-", pid);
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
    assert_int_equal(count_prefix(dir, "dcr-faults-"), 0);
}

/* A killed run's folder (a marker with a dead pid) is removed by the next
 * run under the same TMPDIR; a live run's folder is not. */
static void test_next_run_sweeps_dead_runs(void **state)
{
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char stale[300], live[300];
    path_in(stale, sizeof(stale), "dcr-bench-stale1");
    path_in(live, sizeof(live), "dcr-bench-live01");
    assert_int_equal(mkdir(stale, 0700), 0);
    assert_int_equal(mkdir(live, 0700), 0);
    testmarker_put(stale, (long)dead);
    testmarker_put(live, (long)getpid());
    static result_t r;
    run(&r, "bench --scale 64 --layers 1 --warmup 0 --refits 1");
    if (r.rc != 0) fail_msg("bench: %s", r.err);
    assert_int_equal(access(stale, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    snprintf(args, sizeof(args), "rm -rf '%s'", live);
    assert_int_equal(system(args), 0);
}

/* The first child of pid (from /proc), 0 when none. */
static pid_t child_of(pid_t pid)
{
    char path[128], buf[256] = {0};
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    slurp(path, buf, sizeof(buf));
    return (pid_t)atoi(buf);
}

/* Dead: gone, or a zombie waiting for whoever adopted it. */
static bool dead_process(pid_t pid)
{
    char path[128], buf[512] = {0};
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    slurp(path, buf, sizeof(buf));
    const char *close_paren = strrchr(buf, ')');
    return !buf[0] || (close_paren && (close_paren[2] == 'Z' || close_paren[2] == 'X'));
}

static void test_sim_child_dies_with_parent(void **state)
{
    const char *sim[] = {"dcr", "sim", "--testbed", "paper", NULL};
    pid_t pid = spawn(sim);
    pid_t child = 0;
    for (int i = 0; i < 6000 && !(child = child_of(pid)); i++) sleep_ms(10);
    if (!child) fail_msg("dcr sim forked no simulation within 60 s");
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    bool dead = false;
    for (int i = 0; i < 500 && !(dead = dead_process(child)); i++) sleep_ms(10);
    if (!dead) {
        kill(child, SIGKILL);
        fail_msg("the simulation %d outlived its killed parent", (int)child);
    }
}

/* ---- no partial outputs --------------------------------------------------------- */

static void test_failed_figures_leave_nothing(void **state)
{
    char results[300], out[300], plan[300];
    path_in(results, sizeof(results), "fig.h5");
    path_in(out, sizeof(out), "report");
    path_in(plan, sizeof(plan), "plan");
    snprintf(args, sizeof(args), "bench --scale 64 --layers 1 --warmup 0 --refits 2 --out %s",
             results);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    /* A gnuplot that fails: report and sim plan leave no figure or data. */
    setenv("DCR_GNUPLOT", "/bin/false", 1);
    snprintf(args, sizeof(args), "report %s -o %s", results, out);
    expect_error(args, 1, "gnuplot.log");
    assert_int_equal(count_entries(out), 1); /* gnuplot's output only, for the user */
    assert_int_equal(count_prefix(out, "gnuplot.log"), 1);
    snprintf(args, sizeof(args),
             "sim plan --rollout-nodes 2 --gbps 10 --change-rate 0.03 --transport objstore -o %s",
             plan);
    /* sim plan prints a progress line per row on stderr first: the failure
     * is its last line. */
    run(&r, args);
    assert_int_equal(r.rc, 1);
    size_t len = strlen(r.err);
    assert_true(len > 1 && r.err[len - 1] == '\n');
    r.err[len - 1] = '\0';
    const char *last = strrchr(r.err, '\n');
    assert_non_null(strstr(last ? last + 1 : r.err, "gnuplot.log"));
    assert_int_equal(count_entries(plan), 1);
    assert_int_equal(count_prefix(plan, "gnuplot.log"), 1);
    unsetenv("DCR_GNUPLOT");
    /* An output folder holding a FIFO under a figure's name: refused, kept. */
    char fifo[400];
    assert_int_equal(mkdir(out, 0755) == 0 || errno == EEXIST, 1);
    snprintf(fifo, sizeof(fifo), "%s/report.md", out);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    setenv("DCR_GNUPLOT", "/bin/true", 1);
    snprintf(args, sizeof(args), "report %s -o %s", results, out);
    expect_error(args, 1, "FIFO");
    unsetenv("DCR_GNUPLOT");
    assert_int_equal(kind_of(fifo), S_IFIFO);
    assert_int_equal(count_entries(out), 2); /* the FIFO and the earlier log */
}

/* A report that succeeds leaves no gnuplot.log; one that fails before or
 * outside gnuplot (a trace without a refit window) does not point at a log,
 * and leaves none. */
static void test_report_log_only_for_gnuplot_failures(void **state)
{
    char results[300], out[300], failed[300], trace[300];
    path_in(results, sizeof(results), "log.h5");
    path_in(out, sizeof(out), "log-report");
    path_in(failed, sizeof(failed), "log-failed");
    path_in(trace, sizeof(trace), "no-window.json");
    snprintf(args, sizeof(args), "bench --scale 64 --layers 1 --warmup 0 --refits 2 --out %s",
             results);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(args, sizeof(args), "report %s -o %s", results, out);
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    assert_int_equal(count_prefix(out, "report.md"), 1);
    assert_int_equal(count_prefix(out, "gnuplot.log"), 0);
    testfiles_put(trace, "{\"traceEvents\":[]}");
    snprintf(args, sizeof(args), "report %s -o %s --trace %s", results, failed, trace);
    run(&r, args);
    assert_int_not_equal(r.rc, 0);
    assert_null(strstr(r.err, "gnuplot"));
    assert_int_equal(count_prefix(failed, "gnuplot.log"), 0);
}

/* A calibration's core count out of range is named as written, not as a
 * sentinel. */
static void test_calibration_cores_named(void **state)
{
    char cal[300];
    path_in(cal, sizeof(cal), "cores.json");
    static char text[65536];
    FILE *f = fopen(DCR_SOURCE_DIR "/sim/calibrations/vm-2core.json", "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    char *at = strstr(text, "\"cores\": 2,");
    assert_non_null(at);
    char edited[65536];
    snprintf(edited, sizeof(edited), "%.*s\"cores\": 1000000000,%s", (int)(at - text), text,
             at + strlen("\"cores\": 2,"));
    testfiles_put(cal, edited);
    snprintf(args, sizeof(args), "sim --calibration %s", cal);
    expect_error(args, 2, "1000000000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_paths_refuse_special_files),
        cmocka_unit_test(test_unwritable_output_fails_first),
        cmocka_unit_test(test_regular_outputs_written),
        cmocka_unit_test(test_work_folders_are_dcrs_only),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_numbers_are_decimal_only),
        cmocka_unit_test(test_one_limit_per_flag),
        cmocka_unit_test(test_command_bounds_win),
        cmocka_unit_test(test_reused_control_refused),
        cmocka_unit_test(test_default_layers_is_a_cap),
        cmocka_unit_test(test_untrusted_names_escaped),
        cmocka_unit_test(test_faults_count_kills),
        cmocka_unit_test(test_bounds_refuses_implausible_trace),
        cmocka_unit_test(test_signals_remove_temp_folders),
        cmocka_unit_test(test_next_run_sweeps_dead_runs),
        cmocka_unit_test(test_sim_child_dies_with_parent),
        cmocka_unit_test(test_failed_figures_leave_nothing),
        cmocka_unit_test(test_report_log_only_for_gnuplot_failures),
        cmocka_unit_test(test_calibration_cores_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
