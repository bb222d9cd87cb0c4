#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/status.h"

static void print_help(const char *command, const char *usage, const dcr_arg_t *args, int nargs)
{
    printf("usage: dcr %s %s\n\noptions:\n", command, usage);
    for (int i = 0; i < nargs; i++) {
        const char *value = args[i].kind == DCR_ARG_FLAG     ? ""
                            : args[i].kind == DCR_ARG_STRING ? " TEXT"
                                                             : " N";
        printf("  %s%-*s %s\n", args[i].name, (int)(22 - strlen(args[i].name)), value,
               args[i].help);
    }
    printf("  %-22s %s\n", "--help", "show this help");
}

static int parse_value(const char *command, dcr_arg_t *arg, const char *text)
{
    char *end = NULL;
    errno = 0;
    if (arg->kind == DCR_ARG_STRING) {
        *(const char **)arg->target = text;
        return 0;
    }
    double v = (arg->kind == DCR_ARG_INT) ? (double)strtoll(text, &end, 10) : strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || isnan(v)) {
        fprintf(stderr, "dcr %s: %s expects %s, got '%s'\n", command, arg->name,
                arg->kind == DCR_ARG_INT ? "an integer" : "a number", text);
        return 2;
    }
    if (v < arg->min || v > arg->max) {
        fprintf(stderr, "dcr %s: %s must be in [%g, %g], got %s\n", command, arg->name, arg->min,
                arg->max, text);
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

/* A comma-separated list of numbers in [min, max] (whole numbers when
 * `whole`), at most cap of them: --change-rate, and the axes of `plan`. */
int dcr_args_parse_list(const char *flag, const char *text, double min, double max, bool whole,
                        double *out, int cap, int *n_p)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
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
