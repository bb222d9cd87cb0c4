#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/status.h"
#include "workloads/harness/interrupt.h"

static void dcr__bounds(const dcr_arg_t *arg, double *lo_p, double *hi_p);

static void print_help(const char *command, const char *usage, const dcr_arg_t *args, int nargs)
{
    printf("usage: dcr %s %s\n\noptions:\n", command, usage);
    for (int i = 0; i < nargs; i++) {
        const char *value = args[i].kind == DCR_ARG_FLAG     ? ""
                            : args[i].kind == DCR_ARG_STRING ? " TEXT"
                                                             : " N";
        printf("  %s%-*s %s", args[i].name, (int)(22 - strlen(args[i].name)), value, args[i].help);
        /* The accepted range: what the parser enforces. */
        double lo, hi;
        dcr__bounds(&args[i], &lo, &hi);
        if (args[i].kind == DCR_ARG_INT || args[i].kind == DCR_ARG_DOUBLE)
            printf(" [%g, %g]", lo, hi);
        printf("\n");
    }
    printf("  %-22s %s\n", "--help", "show this help");
}

/* The outer limit of a flag across commands: no command accepts a value
 * outside these, so `--rollout-nodes 5000` is refused everywhere. A
 * command narrows them only where it cannot take the whole range (bench's
 * and faults' in-process rollout nodes; construct and diff, whose chunk and
 * bucket targets have no 0 default), and --help prints the range each
 * command holds a flag to (dcr__bounds). What a run can afford is the
 * memory budget's business, not the flag's. --lr stops at 0.1: the change
 * model refuses AdamW steps at 1 and beyond, and no fine-tuning rate comes
 * near 0.1. */
static const struct dcr__limit {
    const char *name;
    double min, max;
} dcr__limits[] = {
    {"--scale", 1, 4096},
    {"--layers", 0, 100000}, /* 0: all layers */
    {"--fp8-layers", 0, 100000},
    {"--rollout-nodes", 1, 4096},
    {"--receivers-per-node", 1, 64},
    {"--serve-tp", 1, 64},
    {"--fanout", 1, 64},
    {"--readers", 0, 64},
    {"--change-rate", 0, 1},
    {"--lr", 1e-12, 0.1},
    {"--chunk-mib", 0, 1 << 20}, /* 0: the command's default */
    {"--bucket-mib", 0, 1 << 20},
    {"--level", -7, 22}, /* zstd's range */
    {"--link-gbps", 0, 1e6},
    {"--cross-gbps", 0, 1e6},
    {"--flow-gbps", 0, 1e6},
    {"--local-gbps", 0, 1e6},
    {"--store-gbps", 0, 1e6},
    {"--fabric-gbps", 0, 1e6},
    {"--latency-ms", 0, 1e5},
    {"--local-latency-ms", 0, 1e5},
    {"--store-latency-ms", 0, 1e5},
    {"--seed", 0, 1e15},
    {"--repeats", 1, 1000},
};

bool dcr_args_limit(const char *name, double *min_p, double *max_p)
{
    for (size_t i = 0; i < sizeof(dcr__limits) / sizeof(dcr__limits[0]); i++)
        if (!strcmp(dcr__limits[i].name, name)) {
            *min_p = dcr__limits[i].min;
            *max_p = dcr__limits[i].max;
            return true;
        }
    return false;
}

/* The range a command's numeric flag accepts: its own bounds within the
 * shared limit (a command with no bounds of its own, min == max == 0, gets
 * the shared limit whole). */
static void dcr__bounds(const dcr_arg_t *arg, double *lo_p, double *hi_p)
{
    double lo = arg->min, hi = arg->max, slo, shi;
    bool own = !(lo == 0 && hi == 0);
    if (dcr_args_limit(arg->name, &slo, &shi)) {
        lo = own && lo > slo ? lo : slo;
        hi = own && hi < shi ? hi : shi;
    }
    *lo_p = lo;
    *hi_p = hi;
}

/* Plain decimal only: an optional '-', digits, and for a real number an
 * optional fraction and exponent. No spaces, no '+', no hex, no inf or nan:
 * strtod alone would take "0x10" as 16 and " 5" as 5. */
bool dcr_args_decimal(const char *s, bool whole, size_t *len_p)
{
    const char *p = s;
    if (*p == '-') p++;
    const char *digits = p;
    while (*p >= '0' && *p <= '9') p++;
    bool any = p > digits;
    if (!whole && *p == '.') {
        p++;
        const char *frac = p;
        while (*p >= '0' && *p <= '9') p++;
        any = any || p > frac;
    }
    if (!any) return false;
    if (!whole && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (*q == '-' || *q == '+') q++;
        const char *exp = q;
        while (*q >= '0' && *q <= '9') q++;
        if (q == exp) return false;
        p = q;
    }
    if (len_p)
        *len_p = (size_t)(p - s);
    else if (*p)
        return false;
    return true;
}

static int parse_value(const char *command, dcr_arg_t *arg, const char *text)
{
    char *end = NULL;
    errno = 0;
    if (arg->kind == DCR_ARG_STRING) {
        *(const char **)arg->target = text;
        return 0;
    }
    bool whole = arg->kind == DCR_ARG_INT;
    double v = 0;
    if (dcr_args_decimal(text, whole, NULL))
        v = whole ? (double)strtoll(text, &end, 10) : strtod(text, &end);
    if (!end || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        char safe[128];
        fprintf(stderr, "dcr %s: %s expects %s, got '%s'\n", command, arg->name,
                whole ? "a decimal integer" : "a decimal number",
                dcr_escape(safe, sizeof(safe), text));
        return 2;
    }
    double lo, hi;
    dcr__bounds(arg, &lo, &hi);
    if (v < lo || v > hi) {
        fprintf(stderr, "dcr %s: %s must be in [%g, %g], got %s\n", command, arg->name, lo, hi,
                text);
        return 2;
    }
    if (arg->kind == DCR_ARG_INT)
        *(int64_t *)arg->target = (int64_t)v;
    else
        *(double *)arg->target = v;
    return 0;
}

static dcr_arg_t *find_arg(dcr_arg_t *args, int nargs, const char *name)
{
    for (int i = 0; i < nargs; i++)
        if (!strcmp(args[i].name, name)) return &args[i];
    return NULL;
}

int dcr_args_parse(const char *command, const char *usage, dcr_arg_t *args, int nargs, int argc,
                   char **argv, const char **positional, int max_positional, int *npositional_p)
{
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(command, usage, args, nargs);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (!positional || npos >= max_positional) {
                fprintf(stderr, "dcr %s: unexpected argument '%s'\n", command, a);
                return 2;
            }
            positional[npos++] = a;
            continue;
        }
        char name[64];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, a, len);
        name[len] = '\0';
        dcr_arg_t *arg = find_arg(args, nargs, name);
        if (!arg) {
            fprintf(stderr, "dcr %s: unknown option '%s' (try --help)\n", command, name);
            return 2;
        }
        if (arg->seen) {
            fprintf(stderr, "dcr %s: %s given twice\n", command, name);
            return 2;
        }
        arg->seen = true;
        if (arg->kind == DCR_ARG_FLAG) {
            if (eq) {
                fprintf(stderr, "dcr %s: %s takes no value\n", command, name);
                return 2;
            }
            *(bool *)arg->target = true;
            continue;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) {
            fprintf(stderr, "dcr %s: %s needs a value\n", command, name);
            return 2;
        }
        int rc = parse_value(command, arg, value);
        if (rc) return rc;
    }
    if (npositional_p) *npositional_p = npos;
    return 0;
}

void dcr_cli_report(const char *command, int status)
{
    fprintf(stderr, "dcr %s: %s\n", command, dcr_error_line((dcr_status_t)status));
}

int dcr_cli_fail(const char *command, int status)
{
    dcr_cli_report(command, status);
    if (status == DCR_EINTR && dcr_interrupt_signal())
        return dcr_interrupt_exit_status(dcr_interrupt_signal());
    return 1;
}

int dcr_cli_usage(const char *command, int status)
{
    dcr_cli_report(command, status);
    return 2;
}

int dcr_cli_check(const char *command, int status)
{
    if (status == DCR_OK) return 0;
    /* A file a flag names that is missing, malformed or not a file is the
     * user's input, as wrong as a bad number: usage. */
    bool usage = status == DCR_EINVAL || status == DCR_ELAYOUT || status == DCR_ENOTFOUND ||
                 status == DCR_EPARSE;
    return usage ? dcr_cli_usage(command, status) : dcr_cli_fail(command, status);
}

bool dcr_args_seen(const dcr_arg_t *args, int nargs, const char *name)
{
    for (int i = 0; i < nargs; i++)
        if (!strcmp(args[i].name, name)) return args[i].seen;
    return false;
}

/* A comma-separated list of numbers in [min, max] (whole numbers when
 * `whole`), at most cap of them: --change-rate, and the axes of `plan`. */
int dcr_args_parse_list(const char *flag, const char *text, double min, double max, bool whole,
                        double *out, int cap, int *n_p)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        size_t len = 0;
        char *end = (char *)p;
        double v = NAN;
        if (dcr_args_decimal(p, false, &len)) v = strtod(p, &end);
        if (end != p + len) end = (char *)p;
        if (end == p || !(v >= min && v <= max) || (whole && v != floor(v)) ||
            (*end && *end != ','))
            return dcr_error_set(DCR_EINVAL, "%s '%s': expected %s in [%g, %g], comma separated",
                                 flag, text, whole ? "whole numbers" : "numbers", min, max);
        if (n == cap) return dcr_error_set(DCR_EINVAL, "%s: at most %d values", flag, cap);
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) return dcr_error_set(DCR_EINVAL, "%s: no value given", flag);
    *n_p = n;
    return DCR_OK;
}
