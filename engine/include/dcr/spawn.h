/* The one checked way dcr starts another program.
 *
 * Every child process that execs a program (another dcr build as a bench
 * worker, the roles of a process deployment, mpirun, gnuplot, the testbed
 * script and the `ip` tool) starts here, so that the rule "data is never
 * code" holds in one place:
 *   - a program runs from an argument vector, never through a shell: an
 *     argument such as `$(touch x)` or `a; b` reaches the program as those
 *     bytes;
 *   - the program is resolved before the fork by dcr_spawn_resolve (a path
 *     must name a regular executable file; a bare name is looked up on PATH),
 *     so a missing or wrong program is one error line in the parent;
 *   - an exec that still fails in the child (a bad interpreter line, a
 *     binary for another machine) is reported back through a close-on-exec
 *     pipe as the parent's error line ("cannot run X: Exec format error"),
 *     not as something the child wrote on a stderr nobody may read;
 *   - the child inherits no descriptor of ours but its three standard ones
 *     and those named in dcr_spawn_options_t.keep.
 *
 * The child runs only async-signal-safe calls between fork and exec, so a
 * multi-threaded parent may spawn. Processes that fork to run dcr's own code
 * in isolation (a parse in a child, a simulator worker) do not exec and do
 * not use this module.
 *
 * A dcr_process_t is the caller's: it is filled by dcr_spawn, reaped by
 * dcr_process_wait or dcr_process_stop, and its descriptors are closed by
 * dcr_process_close. One thread at a time may wait on a process. */
#ifndef DCR_SPAWN_H
#define DCR_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "dcr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where one of the child's standard streams goes. */
typedef enum dcr_spawn_io_kind {
    DCR_SPAWN_INHERIT = 0, /* the parent's own stream (the default) */
    DCR_SPAWN_DEVNULL,     /* /dev/null */
    DCR_SPAWN_PIPE,        /* a new pipe; the parent's end in dcr_process_t */
    DCR_SPAWN_FD,          /* the parent's descriptor `fd` (left open in the parent) */
    DCR_SPAWN_FILE,        /* `path`: read for stdin, created or appended to (0644) for output */
    DCR_SPAWN_STDOUT,      /* stderr only: the child's stdout (2>&1) */
    DCR_SPAWN_STDERR,      /* stdout only: the child's stderr (1>&2) */
} dcr_spawn_io_kind_t;

typedef struct dcr_spawn_io {
    dcr_spawn_io_kind_t kind;
    int fd;           /* DCR_SPAWN_FD */
    const char *path; /* DCR_SPAWN_FILE; relative to cwd when that is set */
} dcr_spawn_io_t;

/* A descriptor of the parent that the child finds as child_fd (a worker's
 * socket as descriptor 3). child_fd must be above 2. */
typedef struct dcr_spawn_keep {
    int fd;
    int child_fd;
} dcr_spawn_keep_t;

typedef struct dcr_spawn_options {
    /* The program, checked by dcr_spawn_resolve; NULL: argv[0]. */
    const char *exe;
    /* Names the program in error lines ("gnuplot", "the coordinator");
     * NULL: the program as given. */
    const char *what;
    /* "NAME=VALUE" entries, NULL-terminated, set in the child's environment
     * on top of ours (an entry replaces ours of the same name); NULL: ours
     * unchanged. Nothing else about the environment changes. */
    const char *const *env_add;
    dcr_spawn_io_t in, out, err;
    const dcr_spawn_keep_t *keep;
    int nkeep;
    /* The child's working directory; NULL: ours. */
    const char *cwd;
    /* Signal the child gets when the parent thread that spawned it ends
     * (PR_SET_PDEATHSIG; it survives exec); 0: none. A child whose parent
     * is already gone when the setting takes effect exits at once. */
    int deathsig;
    /* A new process group led by the child, so that dcr_process_kill ends
     * whatever it starts too. */
    bool new_group;
    /* A new session (setsid) that also ignores SIGINT, SIGTERM, SIGHUP and
     * SIGQUIT (ignored stays ignored across exec): a guardian that must
     * outlive whatever signal ends the parent's process group. */
    bool detach;
    /* A pidfd for the child in dcr_process_t.pidfd (-1 where the kernel has
     * none): readable once the child has ended, even while a process it
     * left behind holds its pipes open. */
    bool pidfd;
    /* Runs in the child after every redirection, just before exec. Only
     * async-signal-safe calls; a non-zero return is an errno value that
     * fails the spawn as an exec failure would. NULL: none. */
    int (*before_exec)(void *arg);
    void *before_exec_arg;
} dcr_spawn_options_t;

/* A started child. The descriptors are the parent's ends of the pipes asked
 * for (-1 otherwise); the caller may close or take any of them (set it to
 * -1 then). */
typedef struct dcr_process {
    pid_t pid;
    bool group;  /* leads its own process group: kills reach the group */
    bool reaped; /* waited for: pid may belong to another process now */
    int status;  /* waitpid's status, once reaped */
    int in_fd;   /* write end of its stdin pipe */
    int out_fd;  /* read end of its stdout pipe */
    int err_fd;  /* read end of its stderr pipe */
    int pidfd;   /* see dcr_spawn_options_t.pidfd */
} dcr_process_t;

/* Resolves the program `name` into its absolute path in out (cap bytes):
 * a name with a slash is a path (made absolute with realpath), a bare name
 * is looked up in the directories of PATH. It must be a regular file we
 * may execute. `what` starts the error line ("--ab-binary"). DCR_EINVAL for
 * an empty name, a control character in it, a directory, a file we may not
 * execute; DCR_ENOTFOUND for a path that does not exist or a name on no
 * PATH directory. */
dcr_status_t dcr_spawn_resolve(const char *what, const char *name, char *out, size_t cap);

/* Starts the program of o (or argv[0]) with argv (NULL-terminated; argv[0]
 * is what the program sees as its name) and fills *out_p. DCR_ENOTFOUND or
 * DCR_EINVAL when the program does not resolve, DCR_EIO ("cannot run X:
 * REASON") when fork, a redirection or the exec fails; no child is left
 * running and no descriptor open then. o may be NULL (all defaults). */
dcr_status_t dcr_spawn(const dcr_spawn_options_t *o, char *const *argv, dcr_process_t *out_p);

/* Runs argv to its end: dcr_spawn with o (its stdout made a pipe when buf
 * is not NULL), its stdout read into buf (at most cap - 1 bytes and a NUL;
 * what comes beyond is read and dropped, so the program never blocks on a
 * full pipe), then waited for; *status_p gets its waitpid status. Fails
 * only as dcr_spawn does. */
dcr_status_t dcr_spawn_run(const dcr_spawn_options_t *o, char *const *argv, char *buf, size_t cap,
                           int *status_p);

/* Waits up to timeout_ms (< 0: without limit; 0: only looks) for p to end.
 * DCR_OK once reaped (p->status set; again DCR_OK when it already was, or
 * when p never started: pid <= 0), DCR_ETIMEOUT while it runs. Interrupted
 * waits are resumed. A child that someone else reaped (waitpid says
 * ECHILD) counts as ended with status 0. */
dcr_status_t dcr_process_wait(dcr_process_t *p, int timeout_ms);

/* Sends sig to p, or to its process group when it leads one. Does nothing
 * once p is reaped (its pid may be another process's by then). Returns
 * whether the signal was sent. */
bool dcr_process_kill(dcr_process_t *p, int sig);

/* Ends p: sends sig (0: none, the caller already asked it to end), waits
 * up to grace_ms, then sends SIGKILL and waits for it. Returns whether it
 * ended within the grace period. p is reaped afterwards. */
bool dcr_process_stop(dcr_process_t *p, int sig, int grace_ms);

/* Describes a waitpid status: "exited with status N" or "killed by signal N". */
void dcr_process_describe(int status, char *out, size_t cap);

/* Closes the parent's descriptors of p that are still open (pipes, pidfd).
 * Neither waits for nor signals the child. */
void dcr_process_close(dcr_process_t *p);

#ifdef __cplusplus
}
#endif
#endif
