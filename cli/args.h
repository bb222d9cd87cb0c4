/* A small table-driven flag parser shared by every subcommand, so that all of
 * them validate the same way: unknown flags, missing values, numbers out of
 * range and junk after a number are each one clear line on stderr. */
#ifndef DCR_CLI_ARGS_H
#define DCR_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dcr_arg_kind {
    DCR_ARG_FLAG,   /* bool, no value */
    DCR_ARG_INT,    /* int64 within [min, max] */
    DCR_ARG_DOUBLE, /* double within [min, max] */
    DCR_ARG_STRING, /* const char * (points into argv) */
} dcr_arg_kind_t;

typedef struct dcr_arg {
    const char *name; /* "--scale" */
    dcr_arg_kind_t kind;
    void *target;     /* bool *, int64_t *, double *, const char ** */
    double min, max;  /* numeric bounds, inclusive */
    const char *help; /* one line for --help */
    bool seen;        /* set by the parser */
} dcr_arg_t;

/* Parses argv[1..argc) (argv[0] is the subcommand). Returns 0 on success,
 * 1 after printing help (the caller exits 0), or 2 after printing one error
 * line (the caller exits 2). Positional arguments are stored in positional[]
 * (up to max_positional) and counted in *npositional_p; NULL rejects them. */
int dcr_args_parse(const char *command, const char *usage, dcr_arg_t *args, int nargs, int argc,
                   char **argv, const char **positional, int max_positional, int *npositional_p);

/* A comma-separated list of numbers in [min, max] (whole numbers when
 * `whole`), at most cap of them, into out[0..*n_p). Returns DCR_OK or
 * DCR_EINVAL with one error line naming `flag` (dcr_cli_report prints it). */
int dcr_args_parse_list(const char *flag, const char *text, double min, double max, bool whole,
                        double *out, int cap, int *n_p);

/* Prints "dcr <command>: <status line>" for the current thread's error. */
void dcr_cli_report(const char *command, int status);

/* Prints the error line of a run that failed and returns its exit status:
 * 128 + the signal for a run stopped by a signal (DCR_EINTR), else 1. */
int dcr_cli_fail(const char *command, int status);

/* Prints the error line of a usage error and returns 2. */
int dcr_cli_usage(const char *command, int status);

/* For errors found while validating flags, before the run: 0 for DCR_OK;
 * 2 (usage) for an invalid value or layout (DCR_EINVAL, DCR_ELAYOUT) and for
 * a named input that is missing, malformed or not a regular file
 * (DCR_ENOTFOUND, DCR_EPARSE); 1 for anything else (a read error, no
 * memory). Prints the line. */
int dcr_cli_check(const char *command, int status);

/* Whether the flag `name` was given (the parser's `seen`). */
bool dcr_args_seen(const dcr_arg_t *args, int nargs, const char *name);

/* The shared bounds of a flag (one outer limit per flag across commands);
 * false when the flag has none and the command's own bounds apply. A
 * command's own bounds narrow the shared ones. */
bool dcr_args_limit(const char *name, double *min_p, double *max_p);

/* Whether s is a plain decimal number (whole: an integer): optional '-',
 * digits, for a real optional fraction and exponent; nothing else. With
 * len_p, s may continue after the number and *len_p gets its length. */
bool dcr_args_decimal(const char *s, bool whole, size_t *len_p);

#endif
