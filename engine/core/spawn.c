/* The one checked way dcr starts another program (see dcr/spawn.h). */
#include "dcr/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"

extern char **environ;

#define WAIT_POLL_NS 10000000L /* where no pidfd can be polled */

/* ---- resolving the program ---- */

static dcr_status_t check_file(const char *what, const char *name, const char *path, char *out,
                               size_t cap)
{
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(path, real) || stat(real, &st) != 0)
        return dcr_error_set(DCR_ENOTFOUND, "%s %s: %s", what, name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return dcr_error_set(DCR_EINVAL, "%s %s: not a regular file", what, name);
    if (access(real, X_OK) != 0)
        return dcr_error_set(DCR_EINVAL, "%s %s: not executable (%s)", what, name, strerror(errno));
    if (strlen(real) >= cap) return dcr_error_set(DCR_EINVAL, "%s %s: path too long", what, name);
    memcpy(out, real, strlen(real) + 1);
    return DCR_OK;
}

/* The first PATH directory holding an executable regular file `name`. */
static dcr_status_t search_path(const char *what, const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *dir = path; dir;) {
        const char *end = strchr(dir, ':');
        size_t len = end ? (size_t)(end - dir) : strlen(dir);
        char cand[PATH_MAX];
        struct stat st;
        /* An empty entry is the current directory, as for execvp. */
        int n = snprintf(cand, sizeof(cand), "%.*s%s%s", (int)len, dir, len ? "/" : "./", name);
        if (n > 0 && (size_t)n < sizeof(cand) && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
            access(cand, X_OK) == 0)
            return check_file(what, name, cand, out, cap);
        dir = end ? end + 1 : NULL;
    }
    return dcr_error_set(DCR_ENOTFOUND, "%s %s: not found on PATH", what, name);
}

dcr_status_t dcr_spawn_resolve(const char *what, const char *name, char *out, size_t cap)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= PATH_MAX) return dcr_error_set(DCR_EINVAL, "%s: expected a program", what);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return dcr_error_set(DCR_EINVAL, "%s: the path holds a control character", what);
    return strchr(name, '/') ? check_file(what, name, name, out, cap)
                             : search_path(what, name, out, cap);
}

/* ---- the environment ---- */

static bool same_name(const char *a, const char *b)
{
    size_t n = strcspn(b, "=");
    return !strncmp(a, b, n) && a[n] == '=';
}

/* environ with adds on top (malloc'd array of borrowed strings); NULL when
 * there is nothing to add (the child keeps environ). */
static char **build_env(const char *const *adds, dcr_status_t *st_p)
{
    *st_p = DCR_OK;
    if (!adds || !adds[0]) return NULL;
    size_t n = 0, nadd = 0;
    while (environ[n]) n++;
    while (adds[nadd]) nadd++;
    for (size_t i = 0; i < nadd; i++)
        if (!strchr(adds[i], '=') || adds[i][0] == '=') {
            *st_p =
                dcr_error_set(DCR_EINVAL, "environment entry '%s': expected NAME=VALUE", adds[i]);
            return NULL;
        }
    char **env = calloc(n + nadd + 1, sizeof(char *));
    if (!env) {
        *st_p = dcr_error_set(DCR_ENOMEM, "environment of a child process");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < nadd && !replaced; j++) replaced = same_name(environ[i], adds[j]);
        if (!replaced) env[k++] = environ[i];
    }
    for (size_t j = 0; j < nadd; j++) env[k++] = (char *)adds[j];
    return env;
}

/* ---- the child ---- */

/* What the parent prepared for the child: only plain data, so that the
 * child needs no allocation. */
typedef struct plan {
    const dcr_spawn_options_t *o;
    const char *exe;
    char *const *argv;
    char **envp;
    int src[3]; /* parent descriptors for 0, 1, 2 (-1: see kind) */
    int report; /* write end of the exec report pipe */
} plan_t;

/* The exec report: which step failed and its errno. */
typedef struct report {
    int step;
    int err;
} report_t;

enum { STEP_SETUP = 1, STEP_CWD, STEP_FILE, STEP_FDS, STEP_HOOK, STEP_EXEC };

static const char *const step_names[] = {
    "", "setup", "chdir", "redirection", "descriptors", "preparation", "exec"};

static _Noreturn void child_fail(const plan_t *p, int step)
{
    report_t r = {step, errno ? errno : EIO};
    ssize_t ignored = write(p->report, &r, sizeof(r));
    (void)ignored;
    _exit(127);
}

static int highest_target(const dcr_spawn_options_t *o)
{
    int hi = 2;
    for (int i = 0; i < o->nkeep; i++)
        if (o->keep[i].child_fd > hi) hi = o->keep[i].child_fd;
    return hi;
}

/* Marks every descriptor from `lo` up close-on-exec, so that the program
 * inherits none that the parent left inheritable by mistake (or that
 * another thread opened without O_CLOEXEC). */
static void mark_cloexec_from(int lo)
{
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
    if (syscall(SYS_close_range, (unsigned)lo, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    struct rlimit rl;
    long hi = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
    for (long fd = lo; fd < hi; fd++) fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

/* Moves every source descriptor above every target first, so that placing
 * one never overwrites another's source; dup2 onto a target then clears
 * close-on-exec there. */
static void child_fds(const plan_t *p)
{
    const dcr_spawn_options_t *o = p->o;
    int above = highest_target(o) + 1, src[3], keep[64];
    for (int s = 0; s < 3; s++) {
        const dcr_spawn_io_t *io = s == 0 ? &o->in : s == 1 ? &o->out : &o->err;
        src[s] = p->src[s];
        if (io->kind == DCR_SPAWN_FILE) {
            int flags = s == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_APPEND;
            src[s] = open(io->path, flags | O_CLOEXEC | O_NOCTTY, 0644);
            if (src[s] < 0) child_fail(p, STEP_FILE);
        } else if (io->kind == DCR_SPAWN_DEVNULL) {
            src[s] = open("/dev/null", (s == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
            if (src[s] < 0) child_fail(p, STEP_FILE);
        }
        if (src[s] >= 0 && (src[s] = fcntl(src[s], F_DUPFD_CLOEXEC, above)) < 0)
            child_fail(p, STEP_FDS);
    }
    for (int i = 0; i < o->nkeep; i++)
        if ((keep[i] = fcntl(o->keep[i].fd, F_DUPFD_CLOEXEC, above)) < 0) child_fail(p, STEP_FDS);
    mark_cloexec_from(3);
    for (int s = 0; s < 3; s++)
        if (src[s] >= 0 && dup2(src[s], s) < 0) child_fail(p, STEP_FDS);
    if (o->out.kind == DCR_SPAWN_STDERR && dup2(2, 1) < 0) child_fail(p, STEP_FDS);
    if (o->err.kind == DCR_SPAWN_STDOUT && dup2(1, 2) < 0) child_fail(p, STEP_FDS);
    for (int i = 0; i < o->nkeep; i++)
        if (dup2(keep[i], o->keep[i].child_fd) < 0) child_fail(p, STEP_FDS);
}

static _Noreturn void child_main(const plan_t *p, pid_t parent)
{
    const dcr_spawn_options_t *o = p->o;
    errno = 0;
    /* Signals the spawning thread blocks stay blocked across exec: the
     * program starts with none blocked. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (o->deathsig && (prctl(PR_SET_PDEATHSIG, o->deathsig) != 0 || getppid() != parent))
        child_fail(p, STEP_SETUP);
    if (o->detach) {
        if (setsid() < 0) child_fail(p, STEP_SETUP);
        static const int quiet[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) signal(quiet[i], SIG_IGN);
    } else if (o->new_group && setpgid(0, 0) != 0) {
        child_fail(p, STEP_SETUP);
    }
    if (o->cwd && chdir(o->cwd) != 0) child_fail(p, STEP_CWD);
    child_fds(p);
    if (o->before_exec) {
        int e = o->before_exec(o->before_exec_arg);
        if (e) {
            errno = e;
            child_fail(p, STEP_HOOK);
        }
    }
    execve(p->exe, p->argv, p->envp ? p->envp : environ);
    child_fail(p, STEP_EXEC);
}

/* ---- the parent ---- */

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Pipes for the streams that ask for one: child ends into plan->src, our
 * ends into the process. */
static dcr_status_t make_pipes(const dcr_spawn_options_t *o, plan_t *plan, dcr_process_t *pr,
                               int child_end[3])
{
    const dcr_spawn_io_t *io[3] = {&o->in, &o->out, &o->err};
    int *ours[3] = {&pr->in_fd, &pr->out_fd, &pr->err_fd};
    for (int s = 0; s < 3; s++) {
        child_end[s] = -1;
        plan->src[s] = io[s]->kind == DCR_SPAWN_FD ? io[s]->fd : -1;
        if (io[s]->kind != DCR_SPAWN_PIPE) continue;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) return dcr_error_set(DCR_EIO, "pipe: %s", strerror(errno));
        child_end[s] = plan->src[s] = s == 0 ? fds[0] : fds[1];
        *ours[s] = s == 0 ? fds[1] : fds[0];
    }
    return DCR_OK;
}

static dcr_status_t check_options(const dcr_spawn_options_t *o)
{
    if (o->out.kind == DCR_SPAWN_STDOUT || o->err.kind == DCR_SPAWN_STDERR ||
        o->in.kind == DCR_SPAWN_STDOUT || o->in.kind == DCR_SPAWN_STDERR ||
        (o->out.kind == DCR_SPAWN_STDERR && o->err.kind == DCR_SPAWN_STDOUT))
        return dcr_error_set(DCR_EINVAL, "spawn: a stream redirected to itself");
    if (o->nkeep < 0 || o->nkeep > 64) return dcr_error_set(DCR_EINVAL, "spawn: 0..64 kept fds");
    for (int i = 0; i < o->nkeep; i++)
        if (o->keep[i].child_fd <= 2 || o->keep[i].fd < 0)
            return dcr_error_set(DCR_EINVAL, "spawn: a kept descriptor must land above 2");
    const dcr_spawn_io_t *io[3] = {&o->in, &o->out, &o->err};
    for (int s = 0; s < 3; s++)
        if ((io[s]->kind == DCR_SPAWN_FILE && !io[s]->path) ||
            (io[s]->kind == DCR_SPAWN_FD && io[s]->fd < 0))
            return dcr_error_set(DCR_EINVAL, "spawn: stream %d has no file", s);
    return DCR_OK;
}

/* Reads the child's exec report: DCR_OK once the pipe closed empty (the
 * exec succeeded), else the child's failure (the child is reaped). */
static dcr_status_t read_report(int fd, const char *what, dcr_process_t *pr)
{
    report_t r = {0, 0};
    ssize_t n;
    while ((n = read(fd, &r, sizeof(r))) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t)sizeof(r)) return DCR_OK;
    while (waitpid(pr->pid, &pr->status, 0) < 0 && errno == EINTR) {
    }
    pr->reaped = true;
    const char *step = r.step > 0 && r.step <= STEP_EXEC ? step_names[r.step] : "?";
    if (r.step == STEP_EXEC)
        return dcr_error_set(DCR_EIO, "cannot run %s: %s", what, strerror(r.err));
    return dcr_error_set(DCR_EIO, "cannot run %s: %s failed: %s", what, step, strerror(r.err));
}

static dcr_status_t fork_child(plan_t *plan, const char *what, dcr_process_t *pr)
{
    int rep[2];
    if (pipe2(rep, O_CLOEXEC) != 0) return dcr_error_set(DCR_EIO, "pipe: %s", strerror(errno));
    plan->report = rep[1];
    pid_t parent = getpid();
    pr->pid = fork();
    if (pr->pid == 0) child_main(plan, parent);
    int e = errno;
    close(rep[1]);
    if (pr->pid < 0) {
        close(rep[0]);
        return dcr_error_set(DCR_EIO, "cannot run %s: fork: %s", what, strerror(e));
    }
    dcr_status_t st = read_report(rep[0], what, pr);
    close(rep[0]);
    return st;
}

dcr_status_t dcr_spawn(const dcr_spawn_options_t *o, char *const *argv, dcr_process_t *out_p)
{
    static const dcr_spawn_options_t defaults;
    if (!o) o = &defaults;
    if (!argv || !argv[0]) return dcr_error_set(DCR_EINVAL, "spawn: an empty argument vector");
    const char *name = o->exe ? o->exe : argv[0];
    const char *what = o->what ? o->what : name;
    char exe[PATH_MAX];
    DCR_CHECK(check_options(o));
    DCR_CHECK(dcr_spawn_resolve("cannot run", name, exe, sizeof(exe)));
    dcr_process_t pr = {.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
    pr.group = o->new_group || o->detach;
    plan_t plan = {.o = o, .exe = exe, .argv = argv};
    int child_end[3] = {-1, -1, -1};
    dcr_status_t st = DCR_OK;
    plan.envp = build_env(o->env_add, &st);
    if (st == DCR_OK) st = make_pipes(o, &plan, &pr, child_end);
    /* No fflush(NULL) here: the child never flushes stdio (it execs or
     * _exits), and another thread may hold a stream's lock while it blocks
     * reading it. */
    if (st == DCR_OK) st = fork_child(&plan, what, &pr);
    for (int s = 0; s < 3; s++) close_fd(&child_end[s]);
    free(plan.envp);
    if (st != DCR_OK) {
        dcr_process_close(&pr);
        return st;
    }
#ifdef SYS_pidfd_open
    if (o->pidfd) pr.pidfd = (int)syscall(SYS_pidfd_open, pr.pid, 0);
#endif
    *out_p = pr;
    return DCR_OK;
}

/* Reads fd to its end into buf (cap - 1 bytes at most, then a NUL),
 * dropping what does not fit. */
static void read_to_end(int fd, char *buf, size_t cap)
{
    char drop[4096];
    size_t used = 0;
    for (;;) {
        bool room = used + 1 < cap;
        ssize_t n = room ? read(fd, buf + used, cap - 1 - used) : read(fd, drop, sizeof(drop));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (room) used += (size_t)n;
    }
    if (cap > 0) buf[used] = '\0';
}

dcr_status_t dcr_spawn_run(const dcr_spawn_options_t *o, char *const *argv, char *buf, size_t cap,
                           int *status_p)
{
    static const dcr_spawn_options_t defaults;
    dcr_spawn_options_t with = o ? *o : defaults;
    if (buf) with.out = (dcr_spawn_io_t){DCR_SPAWN_PIPE, -1, NULL};
    dcr_process_t p;
    DCR_CHECK(dcr_spawn(&with, argv, &p));
    if (buf) read_to_end(p.out_fd, buf, cap);
    dcr_process_close(&p);
    dcr_process_wait(&p, -1);
    *status_p = p.status;
    return DCR_OK;
}

/* ---- waiting and ending ---- */

static void nap_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static bool try_reap(dcr_process_t *p, int flags)
{
    pid_t got;
    while ((got = waitpid(p->pid, &p->status, flags)) < 0 && errno == EINTR) {
    }
    if (got == p->pid || (got < 0 && errno == ECHILD)) {
        /* ECHILD: reaped elsewhere (a SIGCHLD set to SIG_IGN); nothing to wait for. */
        if (got < 0) p->status = 0;
        p->reaped = true;
    }
    return p->reaped;
}

dcr_status_t dcr_process_wait(dcr_process_t *p, int timeout_ms)
{
    /* Never started: waitpid(-1) or waitpid(0) would reap someone else. */
    if (p->pid <= 0) return DCR_OK;
    if (p->reaped || try_reap(p, WNOHANG)) return DCR_OK;
    if (timeout_ms == 0) return DCR_ETIMEOUT;
    if (timeout_ms < 0) return try_reap(p, 0) ? DCR_OK : DCR_ETIMEOUT;
    uint64_t deadline = dcr_clock_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (uint64_t now = dcr_clock_ns(); now < deadline; now = dcr_clock_ns()) {
        if (p->pidfd >= 0) {
            struct pollfd pf = {p->pidfd, POLLIN, 0};
            int ms = (int)((deadline - now + 999999) / 1000000);
            if (poll(&pf, 1, ms) < 0 && errno != EINTR) nap_ns(WAIT_POLL_NS);
        } else {
            nap_ns(WAIT_POLL_NS);
        }
        if (try_reap(p, WNOHANG)) return DCR_OK;
    }
    return DCR_ETIMEOUT;
}

bool dcr_process_kill(dcr_process_t *p, int sig)
{
    if (p->reaped || p->pid <= 0) return false;
    if (p->group && kill(-p->pid, sig) == 0) return true;
    return kill(p->pid, sig) == 0;
}

bool dcr_process_stop(dcr_process_t *p, int sig, int grace_ms)
{
    if (sig) dcr_process_kill(p, sig);
    if (dcr_process_wait(p, grace_ms) == DCR_OK) return true;
    dcr_process_kill(p, SIGKILL);
    dcr_process_wait(p, -1);
    return false;
}

void dcr_process_describe(int status, char *out, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(out, cap, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

void dcr_process_close(dcr_process_t *p)
{
    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    close_fd(&p->err_fd);
    close_fd(&p->pidfd);
}
