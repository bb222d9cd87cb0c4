/* ctest-labels: unit
 *
 * The process starter: programs run from an argument vector (shell
 * metacharacters arrive as bytes), an exec failure is the parent's one
 * error line, exit statuses and signal deaths are told apart, a wait times
 * out and a group kill reaches the grandchildren, descriptors, environment
 * additions and redirections arrive where asked. The oracles are the
 * programs themselves (sh, cat, printf) and the kernel's /proc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/spawn.h"
#include "testfiles.h"

static char root[256];

static int setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(root, sizeof(root), "spawn") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(root);
}

/* Everything fd gives until EOF, NUL-terminated, in buf. */
static size_t read_to_end(int fd, char *buf, size_t cap)
{
    size_t used = 0;
    ssize_t n;
    while (used + 1 < cap &&
           ((n = read(fd, buf + used, cap - 1 - used)) > 0 || (n < 0 && errno == EINTR)))
        if (n > 0) used += (size_t)n;
    buf[used] = '\0';
    return used;
}

/* No child of this test process is left, running or unreaped. */
static void assert_no_children(void)
{
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_exec_failure_is_the_parents_line(void **state)
{
    (void)state;
    char path[512];
    /* Executable, but no binary and no #! line: execve says ENOEXEC. */
    snprintf(path, sizeof(path), "%s/garbage", root);
    write_file(path,
               "\x7f"
               "not an ELF file\n",
               0755);
    char *argv[] = {path, NULL};
    dcr_process_t p;
    dcr_spawn_options_t o = {.what = "the garbage", .err = {DCR_SPAWN_PIPE}};
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "cannot run the garbage: "));
    assert_non_null(strstr(dcr_error_detail(), strerror(ENOEXEC)));
    assert_no_children();

    char *missing[] = {"/nonexistent/dcr-spawn-test", NULL};
    assert_int_equal(dcr_spawn(NULL, missing, &p), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_detail(), "cannot run /nonexistent/dcr-spawn-test: "));
    assert_non_null(strstr(dcr_error_detail(), strerror(ENOENT)));
    char *unknown[] = {"dcr-spawn-test-no-such-program", NULL};
    assert_int_equal(dcr_spawn(NULL, unknown, &p), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_detail(), "not found on PATH"));
    assert_no_children();
}

static void test_resolve_checks(void **state)
{
    (void)state;
    char out[4096], plain[512];
    assert_int_equal(dcr_spawn_resolve("--x", "", out, sizeof(out)), DCR_EINVAL);
    assert_int_equal(dcr_spawn_resolve("--x", root, out, sizeof(out)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not a regular file"));
    snprintf(plain, sizeof(plain), "%s/plain", root);
    write_file(plain, "#!/bin/sh\n", 0644);
    assert_int_equal(dcr_spawn_resolve("--x", plain, out, sizeof(out)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not executable"));
    assert_int_equal(dcr_spawn_resolve("--x", "/bin/sh\x1b[2J", out, sizeof(out)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "control character"));
    /* A bare name is found on PATH; the answer is an absolute regular
     * executable file. */
    assert_int_equal(dcr_spawn_resolve("--x", "sh", out, sizeof(out)), DCR_OK);
    struct stat st;
    assert_int_equal(out[0], '/');
    assert_int_equal(stat(out, &st), 0);
    assert_true(S_ISREG(st.st_mode) && access(out, X_OK) == 0);
    /* A relative path is made absolute. */
    assert_int_equal(chdir(root), 0);
    write_file("tool", "#!/bin/sh\n", 0755);
    assert_int_equal(dcr_spawn_resolve("--x", "./tool", out, sizeof(out)), DCR_OK);
    char want[600];
    snprintf(want, sizeof(want), "%s/tool", root);
    char real[4096];
    assert_non_null(realpath(want, real));
    assert_string_equal(out, real);
    assert_int_equal(chdir("/"), 0);
}

static void test_exit_status_and_signal_death(void **state)
{
    (void)state;
    char *exit7[] = {"sh", "-c", "exit 7", NULL};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(NULL, exit7, &p), DCR_OK);
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    assert_true(p.reaped && WIFEXITED(p.status));
    assert_int_equal(WEXITSTATUS(p.status), 7);
    char how[64];
    dcr_process_describe(p.status, how, sizeof(how));
    assert_string_equal(how, "exited with status 7");
    /* Waiting again on a reaped process answers at once. */
    assert_int_equal(dcr_process_wait(&p, 0), DCR_OK);
    assert_false(dcr_process_kill(&p, SIGTERM));
    dcr_process_close(&p);

    char *term[] = {"sh", "-c", "kill -TERM $$; sleep 5", NULL};
    assert_int_equal(dcr_spawn(NULL, term, &p), DCR_OK);
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    assert_true(WIFSIGNALED(p.status));
    assert_int_equal(WTERMSIG(p.status), SIGTERM);
    dcr_process_describe(p.status, how, sizeof(how));
    char want[64];
    snprintf(want, sizeof(want), "killed by signal %d", SIGTERM);
    assert_string_equal(how, want);
    dcr_process_close(&p);
    assert_no_children();
}

/* Whether pid is gone or a zombie (its parent, init, reaps it later). */
static int gone(int pid)
{
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *close_paren = strrchr(text, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

static void test_timeout_and_group_kill(void **state)
{
    (void)state;
    /* The child starts a grandchild and waits for it: only a kill of the
     * group reaches both. */
    char *argv[] = {"sh", "-c", "sleep 60 & echo $!; wait", NULL};
    dcr_spawn_options_t o = {.out = {DCR_SPAWN_PIPE}, .new_group = true, .pidfd = true};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
    assert_true(p.group);
    char line[64] = "";
    FILE *f = fdopen(p.out_fd, "r");
    assert_non_null(f);
    p.out_fd = -1;
    assert_non_null(fgets(line, sizeof(line), f));
    int grandchild = atoi(line);
    assert_true(grandchild > 0);
    assert_false(gone(grandchild));
    uint64_t t0 = dcr_clock_ns();
    assert_int_equal(dcr_process_wait(&p, 200), DCR_ETIMEOUT);
    assert_true(dcr_clock_ns() - t0 >= 190000000ull);
    assert_false(p.reaped);
    /* sh waits for its job, so SIGTERM to the group ends both well within
     * the grace period. */
    assert_true(dcr_process_stop(&p, SIGTERM, 10000));
    assert_true(p.reaped && WIFSIGNALED(p.status));
    for (int i = 0; i < 500 && !gone(grandchild); i++) usleep(10000);
    assert_true(gone(grandchild));
    fclose(f);
    dcr_process_close(&p);

    /* A child that ignores the polite signal is killed after the grace. */
    char *stubborn[] = {"sh", "-c", "trap '' TERM; echo ready; sleep 60", NULL};
    dcr_spawn_options_t o2 = {.out = {DCR_SPAWN_PIPE}, .new_group = true};
    assert_int_equal(dcr_spawn(&o2, stubborn, &p), DCR_OK);
    char ready[16];
    assert_true(read(p.out_fd, ready, sizeof(ready)) > 0);
    assert_false(dcr_process_stop(&p, SIGTERM, 200));
    assert_true(p.reaped && WIFSIGNALED(p.status));
    assert_int_equal(WTERMSIG(p.status), SIGKILL);
    dcr_process_close(&p);
    assert_no_children();
}

static void test_fd_passing_and_nothing_else(void **state)
{
    (void)state;
    int sv[2], leak[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    /* Opened without close-on-exec: still not the child's. */
    assert_int_equal(pipe(leak), 0);
    char script[128];
    snprintf(script, sizeof(script), "echo hello >&3; if : >&%d; then echo leaked >&3; fi",
             leak[1]);
    char *argv[] = {"sh", "-c", script, NULL};
    dcr_spawn_keep_t keep = {sv[1], 3};
    dcr_spawn_options_t o = {.keep = &keep, .nkeep = 1, .err = {DCR_SPAWN_DEVNULL}};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
    close(sv[1]);
    close(leak[1]);
    close(leak[0]);
    char got[64];
    read_to_end(sv[0], got, sizeof(got));
    assert_string_equal(got, "hello\n");
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    close(sv[0]);
    dcr_process_close(&p);

    /* A kept descriptor whose number is already a target's: placed without
     * clobbering the other (the socket lands on 3, its source was 4's). */
    int a[2], b[2];
    assert_int_equal(pipe2(a, O_CLOEXEC), 0);
    assert_int_equal(pipe2(b, O_CLOEXEC), 0);
    char *both[] = {"sh", "-c", "echo A >&5; echo B >&6", NULL};
    dcr_spawn_keep_t swap[] = {{b[1], 5}, {a[1], 6}};
    dcr_spawn_options_t o2 = {.keep = swap, .nkeep = 2};
    assert_int_equal(dcr_spawn(&o2, both, &p), DCR_OK);
    close(a[1]);
    close(b[1]);
    read_to_end(b[0], got, sizeof(got));
    assert_string_equal(got, "A\n");
    read_to_end(a[0], got, sizeof(got));
    assert_string_equal(got, "B\n");
    close(a[0]);
    close(b[0]);
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    assert_int_equal(WEXITSTATUS(p.status), 0);
    dcr_process_close(&p);
    assert_no_children();
}

static void test_env_additions(void **state)
{
    (void)state;
    setenv("DCR_SPAWN_KEPT", "ours", 1);
    setenv("DCR_SPAWN_REPLACED", "old", 1);
    const char *add[] = {"DCR_SPAWN_REPLACED=new", "DCR_SPAWN_ADDED=a b$(x)", NULL};
    char *argv[] = {"sh", "-c",
                    "printf '%s|%s|%s' \"$DCR_SPAWN_KEPT\" \"$DCR_SPAWN_REPLACED\" "
                    "\"$DCR_SPAWN_ADDED\"",
                    NULL};
    dcr_spawn_options_t o = {.env_add = add, .out = {DCR_SPAWN_PIPE}};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
    char got[128];
    read_to_end(p.out_fd, got, sizeof(got));
    assert_string_equal(got, "ours|new|a b$(x)");
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    dcr_process_close(&p);
    /* Ours is unchanged. */
    assert_string_equal(getenv("DCR_SPAWN_REPLACED"), "old");
    assert_null(getenv("DCR_SPAWN_ADDED"));
    const char *bad[] = {"NOEQUALS", NULL};
    dcr_spawn_options_t o2 = {.env_add = bad};
    assert_int_equal(dcr_spawn(&o2, argv, &p), DCR_EINVAL);
    assert_no_children();
}

static void test_stdin_stdout_pipes(void **state)
{
    (void)state;
    char *argv[] = {"cat", NULL};
    dcr_spawn_options_t o = {.in = {DCR_SPAWN_PIPE}, .out = {DCR_SPAWN_PIPE}};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
    assert_true(p.in_fd >= 0 && p.out_fd >= 0 && p.err_fd == -1);
    assert_int_equal(write(p.in_fd, "line one\nline two\n", 18), 18);
    close(p.in_fd);
    p.in_fd = -1;
    char got[64];
    read_to_end(p.out_fd, got, sizeof(got));
    assert_string_equal(got, "line one\nline two\n");
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    assert_int_equal(WEXITSTATUS(p.status), 0);
    dcr_process_close(&p);
    assert_no_children();
}

static void test_files_cwd_and_merged_streams(void **state)
{
    (void)state;
    /* stdout into a file named relative to the child's folder, stderr
     * with it; a second run appends. */
    char *argv[] = {"sh", "-c", "echo out; echo err >&2; pwd >&2", NULL};
    dcr_spawn_options_t o = {
        .cwd = root, .out = {DCR_SPAWN_FILE, -1, "log"}, .err = {DCR_SPAWN_STDOUT}};
    dcr_process_t p;
    for (int run = 0; run < 2; run++) {
        assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
        assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
        dcr_process_close(&p);
    }
    char path[600], got[2048], real[4096], want[8300];
    snprintf(path, sizeof(path), "%s/log", root);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    read_to_end(fd, got, sizeof(got));
    close(fd);
    assert_non_null(realpath(root, real));
    snprintf(want, sizeof(want), "out\nerr\n%s\nout\nerr\n%s\n", real, real);
    assert_string_equal(got, want);

    /* A redirection that cannot be made is the parent's error. */
    dcr_spawn_options_t bad = {.in = {DCR_SPAWN_FILE, -1, "/nonexistent/in"}};
    assert_int_equal(dcr_spawn(&bad, argv, &p), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "redirection"));
    dcr_spawn_options_t nodir = {.cwd = "/nonexistent/dir"};
    assert_int_equal(dcr_spawn(&nodir, argv, &p), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "chdir"));
    assert_no_children();
}

static void test_no_shell_interpretation(void **state)
{
    (void)state;
    char marker[600];
    snprintf(marker, sizeof(marker), "%s/x", root);
    char subst[700], tick[700], semi[700];
    snprintf(subst, sizeof(subst), "$(touch %s)", marker);
    snprintf(tick, sizeof(tick), "`touch %s`", marker);
    snprintf(semi, sizeof(semi), "; touch %s", marker);
    char *argv[] = {"printf", "[%s]\n", subst, tick, semi, "a|b > c", "*", "$HOME", NULL};
    dcr_spawn_options_t o = {.cwd = root, .out = {DCR_SPAWN_PIPE}};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_OK);
    char got[4096], want[4096];
    read_to_end(p.out_fd, got, sizeof(got));
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    dcr_process_close(&p);
    snprintf(want, sizeof(want), "[%s]\n[%s]\n[%s]\n[a|b > c]\n[*]\n[$HOME]\n", subst, tick, semi);
    assert_string_equal(got, want);
    assert_int_equal(access(marker, F_OK), -1);
    char c[700];
    snprintf(c, sizeof(c), "%s/c", root);
    assert_int_equal(access(c, F_OK), -1);
}

static int refuse(void *arg)
{
    return *(int *)arg;
}

static void test_before_exec_and_pidfd(void **state)
{
    (void)state;
    int e = EPERM;
    char *argv[] = {"true", NULL};
    dcr_spawn_options_t o = {.what = "the tool", .before_exec = refuse, .before_exec_arg = &e};
    dcr_process_t p;
    assert_int_equal(dcr_spawn(&o, argv, &p), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "cannot run the tool: preparation failed: "));
    assert_non_null(strstr(dcr_error_detail(), strerror(EPERM)));
    e = 0;
    dcr_spawn_options_t o2 = {.before_exec = refuse, .before_exec_arg = &e, .pidfd = true};
    assert_int_equal(dcr_spawn(&o2, argv, &p), DCR_OK);
    if (p.pidfd >= 0) {
        /* Readable once the child ended, before anyone reaped it. */
        struct pollfd pf = {p.pidfd, POLLIN, 0};
        assert_int_equal(poll(&pf, 1, 10000), 1);
        assert_false(p.reaped);
    }
    assert_int_equal(dcr_process_wait(&p, 10000), DCR_OK);
    assert_int_equal(WEXITSTATUS(p.status), 0);
    dcr_process_close(&p);
    assert_int_equal(p.pidfd, -1);
    assert_no_children();
}

/* dcr_spawn_run: the output that fits, the rest read and dropped (a
 * program writing more than a pipe holds still ends), and the status. */
static void test_run_captures_and_drains(void **state)
{
    (void)state;
    char *argv[] = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a; exit 3", NULL};
    char buf[16];
    int status = -1;
    assert_int_equal(dcr_spawn_run(NULL, argv, buf, sizeof(buf), &status), DCR_OK);
    assert_string_equal(buf, "aaaaaaaaaaaaaaa");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    char *missing[] = {"/nonexistent/tool", NULL};
    assert_int_equal(dcr_spawn_run(NULL, missing, buf, sizeof(buf), &status), DCR_ENOTFOUND);
    assert_no_children();
}

/* A stream another thread holds locked (a thread blocked in fgets on a
 * child's pipe, as the process launcher's coordinator reader is). */
static FILE *held;
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static int held_state;

static void *hold_stream(void *arg)
{
    (void)arg;
    flockfile(held);
    pthread_mutex_lock(&held_mu);
    held_state = 1;
    pthread_cond_broadcast(&held_cv);
    pthread_mutex_unlock(&held_mu);
    sleep(5);
    funlockfile(held);
    return NULL;
}

/* Regression: dcr_spawn once flushed every stream first, which waits for
 * each stream's lock, so a launcher whose reader thread sat in fgets hung
 * when it restarted a node. */
static void test_spawn_ignores_locked_streams(void **state)
{
    (void)state;
    held = tmpfile();
    assert_non_null(held);
    fputs("unflushed", held);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_stream, NULL), 0);
    pthread_mutex_lock(&held_mu);
    while (!held_state) pthread_cond_wait(&held_cv, &held_mu);
    pthread_mutex_unlock(&held_mu);
    char *argv[] = {"true", NULL};
    dcr_process_t p;
    uint64_t t0 = dcr_clock_ns();
    assert_int_equal(dcr_spawn(NULL, argv, &p), DCR_OK);
    uint64_t took = dcr_clock_ns() - t0;
    assert_int_equal(dcr_process_wait(&p, -1), DCR_OK);
    pthread_join(t, NULL);
    fclose(held);
    /* The holder keeps the lock 5 s; a spawn that waited for it took that. */
    assert_true(took < 2500000000ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_failure_is_the_parents_line),
        cmocka_unit_test(test_resolve_checks),
        cmocka_unit_test(test_exit_status_and_signal_death),
        cmocka_unit_test(test_timeout_and_group_kill),
        cmocka_unit_test(test_fd_passing_and_nothing_else),
        cmocka_unit_test(test_env_additions),
        cmocka_unit_test(test_stdin_stdout_pipes),
        cmocka_unit_test(test_files_cwd_and_merged_streams),
        cmocka_unit_test(test_no_shell_interpretation),
        cmocka_unit_test(test_before_exec_and_pidfd),
        cmocka_unit_test(test_spawn_ignores_locked_streams),
        cmocka_unit_test(test_run_captures_and_drains),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
