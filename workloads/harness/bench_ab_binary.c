/* Another dcr binary as side B of an interleaved run (dcr bench
 * --ab-binary, bench_ab.h): the one checked way to execute a binary the
 * user names, its --version, and the side that drives its worker. Nothing
 * it sends is trusted: see dcr_bench_side_binary. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/spawn.h"
#include "workloads/harness/bench_ab.h"
#include "workloads/harness/bench_ab_wire.h"
#include "workloads/harness/interrupt.h"

#define VERSION_TIMEOUT_MS 10000
#define VERSION_MAX        200
#define EXIT_WAIT_MS       5000
#define READY_DEFAULT_MS   3600000 /* setup and warm-up of a large model, on a loaded host */
#define REPLY_DEFAULT_MS   900000
#define WORKER_FD          3 /* where the worker finds its socket (--ab-worker 3) */

/* ---- the one checked exec ------------------------------------------------ */

dcr_status_t dcr_bench_exec_check(const char *flag, const char *path, char *resolved, size_t cap)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= PATH_MAX)
        return dcr_error_set(DCR_EINVAL, "%s: expected the path of a dcr binary", flag);
    /* The flag names a file, never a program on PATH. */
    char rel[PATH_MAX + 2];
    if (!strchr(path, '/')) snprintf(rel, sizeof(rel), "./%s", path);
    return dcr_spawn_resolve(flag, strchr(path, '/') ? path : rel, resolved, cap);
}

/* Starts exe with argv (dcr/spawn.h: no shell), its stdin /dev/null, its
 * stdout and stderr into p->out_fd, and sock (when >= 0) as its descriptor
 * WORKER_FD. It dies with this process. */
static dcr_status_t spawn(const char *exe, char *const *argv, int sock, dcr_process_t *p)
{
    dcr_spawn_keep_t keep = {sock, WORKER_FD};
    dcr_spawn_options_t o = {.exe = exe,
                             .in = {DCR_SPAWN_DEVNULL},
                             .out = {DCR_SPAWN_PIPE},
                             .err = {DCR_SPAWN_STDOUT},
                             .keep = &keep,
                             .nkeep = sock >= 0,
                             .deathsig = SIGKILL,
                             .pidfd = true};
    return dcr_spawn(&o, argv, p);
}

/* Waits up to ms for p, then kills it; its exit described in how. */
static void reap(dcr_process_t *p, int ms, char *how, size_t cap)
{
    if (dcr_process_stop(p, 0, ms))
        dcr_process_describe(p->status, how, cap);
    else
        snprintf(how, cap, "did not exit, killed");
}

/* ---- --version ----------------------------------------------------------- */

/* Everything fd says within the deadline, at most cap - 1 bytes (more is
 * an error: *over). */
static void read_all(int fd, char *buf, size_t cap, uint64_t deadline_ns, bool *over_p)
{
    dcr__ab_reader_t *r = calloc(1, sizeof(*r));
    size_t used = 0;
    *over_p = false;
    if (r) dcr__ab_reader_init(r, fd);
    for (char *line = NULL; r;) {
        int ms = (int)((deadline_ns - dcr_clock_ns()) / 1000000);
        if (dcr_clock_ns() >= deadline_ns || dcr__ab_read_line(r, ms, -1, &line) != DCR_OK) break;
        size_t n = strlen(line);
        if (used + n + 1 >= cap) {
            *over_p = true;
            break;
        }
        memcpy(buf + used, line, n);
        used += n;
        buf[used++] = '\n';
    }
    /* An unterminated last line counts too. */
    if (r && !*over_p && r->used > r->taken && used + (r->used - r->taken) < cap) {
        memcpy(buf + used, r->buf + r->taken, r->used - r->taken);
        used += r->used - r->taken;
    }
    buf[used] = '\0';
    free(r);
}

static bool version_line_ok(const char *text)
{
    size_t n = strlen(text);
    if (n < 5 || n > VERSION_MAX + 1 || text[n - 1] != '\n' || strncmp(text, "dcr ", 4))
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (text[i] < 0x20 || text[i] > 0x7e) return false;
    return true;
}

dcr_status_t dcr_bench_binary_version(const char *exe, char *out, size_t cap)
{
    char *argv[] = {(char *)exe, "--version", NULL};
    dcr_process_t p;
    DCR_CHECK(spawn(exe, argv, -1, &p));
    char text[4 * VERSION_MAX];
    bool over = false;
    read_all(p.out_fd, text, sizeof(text), dcr_clock_ns() + VERSION_TIMEOUT_MS * 1000000ull, &over);
    char how[64];
    reap(&p, EXIT_WAIT_MS, how, sizeof(how));
    dcr_process_close(&p);
    if (strcmp(how, "exited with status 0"))
        return dcr_error_set(DCR_EINVAL, "%s is not a dcr binary: --version %s", exe, how);
    if (over || !version_line_ok(text))
        return dcr_error_set(DCR_EINVAL,
                             "%s is not a dcr binary: its --version printed '%.80s', expected "
                             "one line 'dcr VERSION ...'",
                             exe, text);
    text[strlen(text) - 1] = '\0';
    if (strlen(text) >= cap) return dcr_error_set(DCR_EINVAL, "%s: version too long", exe);
    memcpy(out, text, strlen(text) + 1);
    return DCR_OK;
}

/* ---- the side ------------------------------------------------------------ */

typedef struct binary_side {
    dcr_bench_side_t base;
    dcr_bench_binary_config_t cfg;
    char name[256]; /* cfg.name, escaped, for error lines */
    /* Its stdout and stderr come on proc.out_fd; proc.pidfd is readable
     * once it has ended (-1 where the kernel has no pidfd). */
    dcr_process_t proc;
    bool running;
    int sock;
    dcr__ab_reader_t *in;
    json_t *config; /* the worker's, once ready */
    /* Its output, read by a thread: forwarded at log level info and above,
     * the last line kept for the error of a failed side. */
    pthread_t reader;
    bool reading;
    int stop[2];         /* written to end the reader (a process the worker left may hold
                            its output open) */
    atomic_bool drained; /* the reader saw the end of the output */
    pthread_mutex_t lock;
    char last[256];
} binary_side_t;

static void *output_main(void *arg)
{
    binary_side_t *s = arg;
    dcr__ab_reader_t *r = calloc(1, sizeof(*r));
    char *line = NULL;
    if (!r) return NULL;
    dcr__ab_reader_init(r, s->proc.out_fd);
    for (;;) {
        dcr_status_t st = dcr__ab_read_line(r, -1, s->stop[0], &line);
        if (st == DCR_EPARSE) { /* a NUL (that line is dropped) or over-long: drop it all */
            if (!r->taken) r->taken = r->used;
            continue;
        }
        if (st != DCR_OK) break;
        if (!line[0]) continue;
        char safe[256];
        dcr_escape(safe, sizeof(safe), line);
        pthread_mutex_lock(&s->lock);
        snprintf(s->last, sizeof(s->last), "%s", safe);
        pthread_mutex_unlock(&s->lock);
        if (dcr_log_get_level() >= DCR_LOG_INFO) fprintf(stderr, "[side B] %s\n", safe);
    }
    atomic_store(&s->drained, true);
    free(r);
    return NULL;
}

/* Gives the reader up to a second to read what an ended worker wrote last. */
static void await_output(binary_side_t *s)
{
    for (int waited = 0; s->reading && !atomic_load(&s->drained) && waited < 1000; waited += 10) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
}

/* The worker is gone or misbehaved: stop it (it may still run) and name
 * what it did and, if it said anything, its last line. */
static dcr_status_t fail(binary_side_t *s, dcr_status_t st, const char *what)
{
    char how[64] = "";
    if (s->running) {
        dcr_process_kill(&s->proc, SIGKILL);
        reap(&s->proc, EXIT_WAIT_MS, how, sizeof(how));
        s->running = false;
    }
    await_output(s);
    char detail[512];
    dcr_escape(detail, sizeof(detail), dcr_error_detail());
    pthread_mutex_lock(&s->lock);
    dcr_status_t ret = dcr_error_set(
        st == DCR_EINTR ? DCR_EINTR : DCR_EIO, "--ab-binary %s: side B %s: %s%s%s%s", s->name, what,
        detail, s->last[0] ? " (its last line: " : "", s->last, s->last[0] ? ")" : "");
    pthread_mutex_unlock(&s->lock);
    return ret;
}

/* The worker's next message (`what`: "hello", "reply to refit 3"), or
 * the error that ended it, said as what the worker did. */
static dcr_status_t receive(binary_side_t *s, int timeout_ms, const char *what, json_t **msg_p)
{
    dcr_status_t st = dcr__ab_read_msg(s->in, timeout_ms, dcr_interrupt_fd(), msg_p);
    if (st == DCR_OK) return DCR_OK;
    char doing[96];
    snprintf(doing, sizeof(doing), "sent a malformed %s", what);
    if (st == DCR_ETIMEOUT) {
        snprintf(doing, sizeof(doing), "sent no %s", what);
        dcr_error_set(st, "nothing within %.1f s", timeout_ms / 1000.0);
    } else if (st == DCR_EINTR) {
        snprintf(doing, sizeof(doing), "was stopped before its %s", what);
    } else if (st == DCR_EIO) {
        snprintf(doing, sizeof(doing), "ended before its %s", what);
        if (!strcmp(dcr_error_detail(), "ended") && s->running) {
            char how[64];
            reap(&s->proc, EXIT_WAIT_MS, how, sizeof(how));
            s->running = false;
            dcr_error_set(st, "it %s", how);
        }
    }
    return fail(s, st, doing);
}

static dcr_status_t check_hello(binary_side_t *s, const json_t *m)
{
    const json_t *v = json_object_get(m, "dcr_ab_worker");
    if (!json_is_integer(v) || json_integer_value(v) != DCR__AB_PROTOCOL)
        return dcr_error_set(DCR_EPARSE, "not an --ab-worker hello of protocol %d",
                             DCR__AB_PROTOCOL);
    const json_t *w = json_object_get(m, "warmup"), *n = json_object_get(m, "refits");
    if (json_object_size(m) != 4 || !json_is_integer(w) || !json_is_integer(n) ||
        json_integer_value(w) != s->cfg.warmup || json_integer_value(n) != s->cfg.refits)
        return dcr_error_set(DCR_EPARSE, "its hello does not announce --warmup %d --refits %d",
                             s->cfg.warmup, s->cfg.refits);
    return dcr__ab_config_check(json_object_get(m, "config"));
}

static dcr_status_t binary_ready(dcr_bench_side_t *base)
{
    binary_side_t *s = (binary_side_t *)base;
    if (s->config) return DCR_OK;
    json_t *m = NULL;
    DCR_CHECK(receive(s, s->cfg.ready_timeout_ms, "hello", &m));
    dcr_status_t st = check_hello(s, m);
    if (st == DCR_OK) s->config = json_incref(json_object_get(m, "config"));
    json_decref(m);
    return st == DCR_OK ? DCR_OK : fail(s, st, "sent a malformed hello");
}

static dcr_status_t binary_refit(dcr_bench_side_t *base, int step, bool timed,
                                 dcr_bench_refit_t *out)
{
    binary_side_t *s = (binary_side_t *)base;
    if (!timed) return DCR_OK; /* the worker made its warm-ups before its hello */
    int k = step - s->cfg.warmup;
    char what[64];
    snprintf(what, sizeof(what), "reply to refit %d", k);
    dcr_status_t st = dcr__ab_send(s->sock, json_pack("{s:i}", "refit", k));
    if (st != DCR_OK) return fail(s, st, "could not be asked for a refit");
    json_t *m = NULL;
    DCR_CHECK(receive(s, s->cfg.reply_timeout_ms, what, &m));
    const json_t *got = json_object_get(m, "refit");
    if (json_object_size(m) != 2 || !json_is_integer(got) || json_integer_value(got) != k)
        st = dcr_error_set(DCR_EPARSE, "its reply is not the one of refit %d", k);
    else
        st = dcr__ab_row_parse(json_object_get(m, "row"), out);
    if (st == DCR_OK && out->verified != s->cfg.verify)
        st = dcr_error_set(DCR_EPARSE, "its row says verified %s, the run %s",
                           out->verified ? "true" : "false",
                           s->cfg.verify ? "verifies every refit" : "has --no-verify");
    json_decref(m);
    if (st != DCR_OK) {
        char doing[96];
        snprintf(doing, sizeof(doing), "sent a malformed %s", what);
        return fail(s, st, doing);
    }
    return DCR_OK;
}

static dcr_status_t binary_finish(dcr_bench_side_t *base, dcr_bench_result_t *res)
{
    binary_side_t *s = (binary_side_t *)base;
    dcr_status_t st = dcr__ab_send(s->sock, json_pack("{s:b}", "finish", true));
    if (st != DCR_OK) return fail(s, st, "could not be asked for its summary");
    json_t *m = NULL;
    DCR_CHECK(receive(s, s->cfg.reply_timeout_ms, "summary", &m));
    if (json_object_size(m) != 1)
        st = dcr_error_set(DCR_EPARSE, "its last message is not a summary");
    else
        st = dcr__ab_summary_parse(json_object_get(m, "summary"), res);
    json_decref(m);
    if (st != DCR_OK) return fail(s, st, "sent a malformed summary");
    dcr_bench_result_means(res);
    /* It ends on its own once it sent the summary; anything else is a fault. */
    char how[64];
    reap(&s->proc, EXIT_WAIT_MS, how, sizeof(how));
    s->running = false;
    if (strcmp(how, "exited with status 0")) {
        dcr_error_set(DCR_EIO, "it %s", how);
        return fail(s, DCR_EIO, "failed after its summary");
    }
    return DCR_OK;
}

static void binary_destroy(dcr_bench_side_t *base)
{
    binary_side_t *s = (binary_side_t *)base;
    if (s->running) {
        char how[64];
        dcr_process_kill(&s->proc, SIGKILL);
        reap(&s->proc, EXIT_WAIT_MS, how, sizeof(how));
    }
    if (s->sock >= 0) close(s->sock);
    if (s->reading) {
        char c = 1;
        ssize_t ignored = write(s->stop[1], &c, 1);
        (void)ignored;
        pthread_join(s->reader, NULL);
    }
    dcr_process_close(&s->proc);
    for (int i = 0; i < 2; i++)
        if (s->stop[i] >= 0) close(s->stop[i]);
    pthread_mutex_destroy(&s->lock);
    json_decref(s->config);
    free(s->in);
    free(s);
}

static const dcr_bench_side_ops_t binary_ops = {{DCR_BENCH_SIDE_OPS_VERSION, "binary", NULL},
                                                binary_refit,
                                                binary_ready,
                                                binary_finish,
                                                binary_destroy};

const json_t *dcr_bench_side_binary_config(const dcr_bench_side_t *base)
{
    if (!base || base->ops != &binary_ops) return NULL;
    return ((const binary_side_t *)base)->config;
}

/* exe bench ARGS... --ab-worker 3 */
static char **worker_argv(const dcr_bench_binary_config_t *cfg)
{
    char **argv = calloc((size_t)cfg->nargs + 5, sizeof(char *));
    if (!argv) return NULL;
    int n = 0;
    argv[n++] = (char *)cfg->exe;
    argv[n++] = "bench";
    for (int i = 0; i < cfg->nargs; i++) argv[n++] = cfg->args[i];
    argv[n++] = "--ab-worker";
    argv[n++] = "3";
    return argv;
}

static dcr_status_t start(binary_side_t *s)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return dcr_error_set(DCR_EIO, "socketpair: %s", strerror(errno));
    char **argv = worker_argv(&s->cfg);
    dcr_status_t st = argv ? spawn(s->cfg.exe, argv, sv[1], &s->proc)
                           : dcr_error_set(DCR_ENOMEM, "worker arguments");
    free(argv);
    close(sv[1]);
    s->sock = sv[0];
    dcr__ab_reader_init(s->in, sv[0]);
    if (st != DCR_OK) return st;
    s->running = true;
    /* Its end is seen even when a process it left holds the socket open. */
    s->in->ended_fd = s->proc.pidfd;
    s->reading = pthread_create(&s->reader, NULL, output_main, s) == 0;
    return DCR_OK;
}

dcr_status_t dcr_bench_side_binary(const dcr_bench_binary_config_t *cfg, dcr_bench_side_t **out_p)
{
    if (!cfg->exe || cfg->warmup < 0 || cfg->refits < 1 || cfg->nargs < 0)
        return dcr_error_set(DCR_EINVAL, "--ab-binary: a binary and >= 1 timed refit");
    binary_side_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->in = calloc(1, sizeof(*s->in)))) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "--ab-binary side");
    }
    s->base.ops = &binary_ops;
    s->cfg = *cfg;
    if (!s->cfg.ready_timeout_ms) s->cfg.ready_timeout_ms = READY_DEFAULT_MS;
    if (!s->cfg.reply_timeout_ms) s->cfg.reply_timeout_ms = REPLY_DEFAULT_MS;
    dcr_escape(s->name, sizeof(s->name), cfg->name ? cfg->name : cfg->exe);
    s->sock = s->stop[0] = s->stop[1] = -1;
    s->proc = (dcr_process_t){.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1};
    dcr__ab_reader_init(s->in, -1);
    pthread_mutex_init(&s->lock, NULL);
    dcr_status_t st = pipe2(s->stop, O_CLOEXEC) == 0
                          ? start(s)
                          : dcr_error_set(DCR_EIO, "pipe: %s", strerror(errno));
    if (st != DCR_OK) {
        binary_destroy(&s->base);
        return st;
    }
    *out_p = &s->base;
    return DCR_OK;
}
