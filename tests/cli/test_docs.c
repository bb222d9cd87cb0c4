/* ctest-labels: unit
 *
 * The command pages against the binary: every command that `dcr --help`
 * lists has its page docs/commands/<command>.md, and every flag (a token
 * starting with `--`) that `dcr <command> --help` prints, or the --help of
 * one of its subcommands (`dcr faults campaign --help`), appears on that
 * page as a whole token. A failure names the command and the flag. Runs the
 * binary named by DCR_CLI and reads the pages under DCR_SOURCE_DIR. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "cli_run.h"

enum { MAX_COMMANDS = 64, MAX_FLAGS = 256, MAX_SUBS = 16, NAME_CAP = 64, PAGE_CAP = 1 << 20 };

typedef char name_t[NAME_CAP];

static bool is_flag_char(char c)
{
    return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-';
}

/* The distinct flags of a help text: `--` and a lowercase letter, then
 * lowercase letters, digits and dashes (`--max-memory`, `--fp8-layers`). */
static int collect_flags(const char *help, name_t *flags, int cap)
{
    int n = 0;
    for (const char *p = strstr(help, "--"); p; p = strstr(p + 2, "--")) {
        if (p > help && is_flag_char(p[-1])) continue; /* inside a longer token */
        if (!islower((unsigned char)p[2])) continue;
        size_t len = 2;
        while (is_flag_char(p[len]) && len < NAME_CAP - 1) len++;
        while (p[len - 1] == '-') len--; /* `--flag-` at a line break is `--flag` */
        name_t f;
        memcpy(f, p, len);
        f[len] = '\0';
        bool seen = false;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(flags[i], f);
        if (!seen && n < cap) strcpy(flags[n++], f);
    }
    return n;
}

/* Whether the page holds the flag as a whole token: `--seed` is not found
 * in `--seeds`, nor in `--seed-file`. */
static bool page_has_flag(const char *page, const char *flag)
{
    size_t len = strlen(flag);
    for (const char *p = strstr(page, flag); p; p = strstr(p + 1, flag)) {
        bool starts = p == page || !is_flag_char(p[-1]);
        bool ends = !is_flag_char(p[len]);
        if (starts && ends) return true;
    }
    return false;
}

/* The subcommands a command's help names: `dcr faults train|campaign ...`
 * gives train and campaign; an argument in capitals (`dcr bounds TRACE`) or
 * a flag is none. */
static int collect_subcommands(const char *command, const char *help, name_t *subs, int cap)
{
    char prefix[NAME_CAP + 8];
    snprintf(prefix, sizeof(prefix), "dcr %s ", command);
    int n = 0;
    for (const char *p = strstr(help, prefix); p; p = strstr(p + 1, prefix)) {
        const char *w = p + strlen(prefix);
        while (islower((unsigned char)*w)) {
            size_t len = 0;
            while (islower((unsigned char)w[len]) || w[len] == '-') len++;
            if (len >= NAME_CAP) break;
            name_t s;
            memcpy(s, w, len);
            s[len] = '\0';
            bool seen = false;
            for (int i = 0; i < n && !seen; i++) seen = !strcmp(subs[i], s);
            if (!seen && n < cap) strcpy(subs[n++], s);
            w += len;
            if (*w != '|') break;
            w++;
        }
    }
    return n;
}

/* The commands of `dcr --help`: the first word of each indented line after
 * "commands:". */
static int list_commands(name_t *commands, int cap)
{
    static result_t r;
    run(&r, "--help");
    if (r.rc != 0) fail_msg("dcr --help: exit %d (stderr: %s)", r.rc, r.err);
    const char *p = strstr(r.out, "commands:");
    if (!p) fail_msg("dcr --help prints no 'commands:' list: %s", r.out);
    int n = 0;
    for (p = strchr(p, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        const char *w = p + 1;
        if (*w != ' ') continue;
        while (*w == ' ') w++;
        size_t len = 0;
        while (is_flag_char(w[len])) len++;
        if (len == 0 || len >= NAME_CAP || n >= cap) continue;
        memcpy(commands[n], w, len);
        commands[n][len] = '\0';
        n++;
    }
    if (n == 0) fail_msg("dcr --help lists no command: %s", r.out);
    return n;
}

/* The page of a command, or NULL when it has none. */
static char *read_page(const char *command, char *path, size_t path_cap)
{
    char full[4096];
    snprintf(path, path_cap, "docs/commands/%s.md", command);
    snprintf(full, sizeof(full), "%s/%s", DCR_SOURCE_DIR, path);
    FILE *f = fopen(full, "rb");
    if (!f) return NULL;
    fclose(f);
    char *page = malloc(PAGE_CAP);
    assert_non_null(page);
    return slurp(full, page, PAGE_CAP);
}

/* Appends to `report` one line per flag of `help` that `page` lacks;
 * returns how many. */
static int missing_flags(const char *what, const char *help, const char *page, const char *path,
                         char *report, size_t report_cap)
{
    static name_t flags[MAX_FLAGS];
    int n = collect_flags(help, flags, MAX_FLAGS), missing = 0;
    for (int i = 0; i < n; i++) {
        if (page_has_flag(page, flags[i])) continue;
        size_t used = strlen(report);
        snprintf(report + used, report_cap - used, "  %s --help lists %s; %s lacks it\n", what,
                 flags[i], path);
        missing++;
    }
    return missing;
}

static void test_every_command_has_a_page(void **state)
{
    (void)state;
    static name_t commands[MAX_COMMANDS];
    int n = list_commands(commands, MAX_COMMANDS);
    char report[8192] = "", path[4096];
    for (int i = 0; i < n; i++) {
        char *page = read_page(commands[i], path, sizeof(path));
        if (page) {
            free(page);
            continue;
        }
        size_t used = strlen(report);
        snprintf(report + used, sizeof(report) - used, "  dcr %s has no page %s\n", commands[i],
                 path);
    }
    if (report[0]) {
        fprintf(stderr, "commands without a page:\n%s", report);
        fail_msg("a command has no page (listed above)");
    }
}

static void test_every_flag_is_on_its_page(void **state)
{
    (void)state;
    static name_t commands[MAX_COMMANDS], subs[MAX_SUBS];
    static result_t r;
    static char report[1 << 16];
    report[0] = '\0';
    int n = list_commands(commands, MAX_COMMANDS), missing = 0, checked = 0;
    for (int i = 0; i < n; i++) {
        char path[4096], args[256], what[256];
        char *page = read_page(commands[i], path, sizeof(path));
        if (!page) continue; /* the case above names it */
        snprintf(args, sizeof(args), "%s --help", commands[i]);
        run(&r, args);
        if (r.rc != 0) fail_msg("dcr %s: exit %d (stderr: %s)", args, r.rc, r.err);
        snprintf(what, sizeof(what), "dcr %s", commands[i]);
        missing += missing_flags(what, r.out, page, path, report, sizeof(report));
        int nsubs = collect_subcommands(commands[i], r.out, subs, MAX_SUBS);
        for (int s = 0; s < nsubs; s++) {
            snprintf(args, sizeof(args), "%s %s --help", commands[i], subs[s]);
            run(&r, args);
            if (r.rc != 0) fail_msg("dcr %s: exit %d (stderr: %s)", args, r.rc, r.err);
            snprintf(what, sizeof(what), "dcr %s %s", commands[i], subs[s]);
            missing += missing_flags(what, r.out, page, path, report, sizeof(report));
        }
        checked++;
        free(page);
    }
    if (missing) {
        fprintf(stderr, "flags missing from their command's page:\n%s", report);
        fail_msg("%d flag(s) missing from their command's page (listed above)", missing);
    }
    assert_true(checked > 0);
}

/* The checker itself: it must see a flag that is absent, never take a
 * longer flag for a shorter one, and find subcommands as the help names
 * them. */
static void test_the_checker_fails_when_a_flag_is_missing(void **state)
{
    (void)state;
    static name_t flags[MAX_FLAGS], subs[MAX_SUBS];
    const char *help = "usage: dcr faults train|campaign [--seeds 20]\n"
                       "       dcr faults --testbed netns\n"
                       "  --seed N        seed\n"
                       "  --max-memory TEXT  budget, e.g. 8G (see --seeds)\n";
    int n = collect_flags(help, flags, MAX_FLAGS);
    assert_int_equal(n, 4);
    assert_string_equal(flags[0], "--seeds");
    assert_string_equal(flags[1], "--testbed");
    assert_string_equal(flags[2], "--seed");
    assert_string_equal(flags[3], "--max-memory");
    assert_true(page_has_flag("`--seed N` and `--seeds K`", "--seed"));
    assert_false(page_has_flag("only `--seeds K`, `--seed-file` and x--seed", "--seed"));
    assert_false(page_has_flag("the memory budget (--max-memory-x)", "--max-memory"));
    char report[1024] = "";
    assert_int_equal(missing_flags("dcr faults", help, "--seeds --testbed --seed", "page.md",
                                   report, sizeof(report)),
                     1);
    assert_non_null(strstr(report, "dcr faults --help lists --max-memory; page.md lacks it"));
    int nsubs = collect_subcommands("faults", help, subs, MAX_SUBS);
    assert_int_equal(nsubs, 2);
    assert_string_equal(subs[0], "train");
    assert_string_equal(subs[1], "campaign");
    assert_int_equal(
        collect_subcommands("bounds", "usage: dcr bounds TRACE [--json]", subs, MAX_SUBS), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_checker_fails_when_a_flag_is_missing),
        cmocka_unit_test(test_every_command_has_a_page),
        cmocka_unit_test(test_every_flag_is_on_its_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
