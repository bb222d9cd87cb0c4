/* Harm to the host from data (issue 32, items 1 and 3): a label or a folder
 * name never becomes a gnuplot command, gnuplot itself cannot start a
 * process, and an output folder given as a symbolic link is refused.
 * ctest-labels: integration */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "reports/gnuplot.h"
#include "testfiles.h"
#include "workloads/harness/gnuplot_text.h"

static char dir[256]; /* private TMPDIR of this test */
static char args[8192];

static int setup(void **state)
{
    (void)state;
    if (!testfiles_tmpdir(dir, sizeof(dir), "host")) return -1;
    return setenv("TMPDIR", dir, 1);
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(dir);
}

/* A small model config that bench and sim plan accept. */
static void write_model(const char *path)
{
    testfiles_put(path,
                  "{\"name\": \"host\", \"family\": \"qwen2\", \"hidden_size\": 896,"
                  " \"intermediate_size\": 4864, \"num_hidden_layers\": 2,"
                  " \"num_attention_heads\": 16, \"num_key_value_heads\": 4,"
                  " \"head_dim\": 64, \"vocab_size\": 151936, \"tie_word_embeddings\": true}");
}

/* A folder whose name carries a gnuplot shell line that would create
 * `victim`: the vector of both commands. */
static void hostile_model(char *model, size_t cap, const char *tag, const char *victim)
{
    char folder[1024];
    snprintf(folder, sizeof folder, "%s/%s\n!touch %s\n#", dir, tag, victim);
    /* The victim's path has slashes: the folder is a chain (mkdir -p). */
    for (char *p = folder + strlen(dir) + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(folder, 0755) != 0 && errno != EEXIST) fail_msg("mkdir %s", folder);
        *p = c;
        if (!c) break;
    }
    snprintf(model, cap, "%s/config.json", folder);
    write_model(model);
}

/* No line of any *.gp script in folder d starts (after blanks) with '!',
 * and none holds the word "touch": the label was kept on its line. */
static void assert_scripts_inert(const char *d)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    int scripts = 0;
    for (struct dirent *e; (e = readdir(dd));) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 3, ".gp") != 0) continue;
        scripts++;
        char path[1024], line[8192];
        snprintf(path, sizeof path, "%s/%s", d, e->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
            const char *p = line + strspn(line, " \t");
            if (*p == '!') fail_msg("%s: a shell line: %s", path, line);
            /* The label's newline became '?': its command stays inside the string. */
            for (const char *t = line; (t = strstr(t, "!touch")); t++)
                if (t == line || t[-1] != '?') fail_msg("%s: a raw label: %s", path, line);
        }
        fclose(f);
    }
    closedir(dd);
    assert_true(scripts > 0);
}

static void test_report_label_runs_nothing(void **state)
{
    (void)state;
    char victim[512], model[1200], results[512], out[512];
    snprintf(victim, sizeof victim, "%s/PWNED-report", dir);
    hostile_model(model, sizeof model, "r", victim);
    snprintf(results, sizeof results, "%s/x.h5", dir);
    snprintf(out, sizeof out, "%s/rep", dir);
    snprintf(args, sizeof args,
             "bench --model '%s' --scale 16 --layers 1 --warmup 0 --refits 1 --out %s", model,
             results);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(args, sizeof args, "report %s -o %s", results, out);
    run(&r, args);
    if (access(victim, F_OK) == 0) fail_msg("dcr report ran the label's shell command");
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    assert_scripts_inert(out);
}

static void test_sim_plan_model_folder_runs_nothing(void **state)
{
    (void)state;
    char victim[512], model[1200], out[512];
    snprintf(victim, sizeof victim, "%s/PWNED-plan", dir);
    hostile_model(model, sizeof model, "p", victim);
    snprintf(out, sizeof out, "%s/plan", dir);
    snprintf(args, sizeof args,
             "sim plan --model '%s' --rollout-nodes 2 --gbps 10 --change-rate 0.03 "
             "--transport objstore -o %s",
             model, out);
    static result_t r;
    run(&r, args);
    if (access(victim, F_OK) == 0) fail_msg("dcr sim plan ran the folder name's shell command");
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    assert_scripts_inert(out);
}

/* The emitter against first principles: what comes out is one quoted
 * string on one line, made only of whitelisted bytes, quotes doubled. */
static void test_gnuplot_text_whitelist(void **state)
{
    (void)state;
    char buf[600];
    dcr_gnuplot_text_format(buf, sizeof buf, "a'b\n!rm -rf /\r\\`x`@m\xc3\xa9;");
    assert_string_equal(buf, "'a''b?!rm -rf /\?\?\?x\?\?m\?\?\?'");
    for (int c = 1; c < 256; c++) {
        char in[2] = {(char)c, 0};
        dcr_gnuplot_text_format(buf, sizeof buf, in);
        bool ok = c == '\'' ? !strcmp(buf, "''''") : strlen(buf) == 3;
        assert_true(ok);
        assert_null(strchr(buf, '\n'));
        if (c != '\'' && buf[1] != '?') assert_true(dcr_gnuplot_text_allowed((unsigned char)c));
    }
    char longer[1000];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    size_t n = dcr_gnuplot_text_format(buf, sizeof buf, longer);
    assert_int_equal(n, 1 + DCR_GNUPLOT_TEXT_MAX + 3 + 1);
    assert_string_equal(buf + n - 4, "...'");
    /* A small buffer still gets a closed string. */
    char tiny[6];
    dcr_gnuplot_text_format(tiny, sizeof tiny, "''''");
    assert_int_equal(tiny[0], '\'');
    assert_int_equal(tiny[strlen(tiny) - 1], '\'');
}

/* Even a script that asks for a shell gets none: gnuplot runs, but every
 * way it has of starting a process fails. */
static void test_gnuplot_cannot_start_processes(void **state)
{
    (void)state;
    const char *gp = getenv("DCR_GNUPLOT");
    if (!gp) gp = "/usr/bin/gnuplot";
    if (access(gp, X_OK) != 0) skip();
    char sub[512], script[600], made[700], text[2048];
    snprintf(sub, sizeof sub, "%s/sandbox", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(script, sizeof script, "%s/s.gp", sub);
    snprintf(text, sizeof text,
             "set print '%s/ok'\nprint 'drawn'\nunset print\n"
             "!touch %s/bang\n"
             "x = system('touch %s/system')\n"
             "set print '| touch %s/pipe'\nprint 1\nunset print\n",
             sub, sub, sub, sub);
    testfiles_put(script, text);
    dcr_gnuplot_run(gp, sub, "s.gp"); /* gnuplot may report the refusals */
    snprintf(made, sizeof made, "%s/ok", sub);
    assert_int_equal(access(made, F_OK), 0); /* it did run */
    const char *names[] = {"bang", "system", "pipe"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(made, sizeof made, "%s/%s", sub, names[i]);
        if (access(made, F_OK) == 0) fail_msg("gnuplot started a process (%s)", names[i]);
    }
}

/* report -o and sim plan -o through a symbolic link: refused, and the
 * link's target keeps its files. */
static void test_output_folder_link_refused(void **state)
{
    (void)state;
    char target[512], link[512], keep[600], results[512];
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    snprintf(link, sizeof link, "%s/out-link", dir);
    assert_int_equal(mkdir(target, 0755), 0);
    assert_int_equal(symlink(target, link), 0);
    snprintf(keep, sizeof keep, "%s/report.md", target);
    testfiles_put(keep, "mine\n");
    snprintf(keep, sizeof keep, "%s/plan.dat", target);
    testfiles_put(keep, "mine\n");
    snprintf(results, sizeof results, "%s/y.h5", dir);
    snprintf(args, sizeof args, "bench --scale 64 --layers 1 --warmup 0 --refits 1 --out %s",
             results);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(args, sizeof args, "report %s -o %s", results, link);
    expect_error(args, 2, "symbolic link");
    snprintf(args, sizeof args, "report %s -o %s/", results, link); /* "link/" resolves */
    expect_error(args, 2, "symbolic link");
    snprintf(args, sizeof args,
             "sim plan --rollout-nodes 2 --gbps 10 --change-rate 0.03 --transport objstore -o %s",
             link);
    expect_error(args, 2, "symbolic link");
    snprintf(keep, sizeof keep, "%s/report.md", target);
    testfiles_assert_text(keep, "mine\n");
    snprintf(keep, sizeof keep, "%s/plan.dat", target);
    testfiles_assert_text(keep, "mine\n");
    assert_int_equal(testfiles_count(target, ""), 2);
}

/* The issue's store repro through the command: a store folder holding a
 * user's files is refused, and in dcr's own store a link named attempt-3
 * leads nowhere: three refits leave the link's target as it was. */
static void test_store_never_deletes_outside(void **state)
{
    (void)state;
    char store[512], victim[512], vfile[600], link[600], user[512], ufile[600];
    snprintf(user, sizeof user, "%s/user-store", dir);
    assert_int_equal(mkdir(user, 0755), 0);
    snprintf(ufile, sizeof ufile, "%s/MANIFEST", user);
    testfiles_put(ufile, "mine\n");
    const char *tiny = "bench --scale 64 --layers 1 --warmup 0";
    snprintf(args, sizeof args, "%s --refits 1 --store dir:%s", tiny, user);
    static result_t r;
    run(&r, args);
    assert_int_not_equal(r.rc, 0);
    assert_non_null(strstr(r.err, ".dcr-store"));
    testfiles_assert_text(ufile, "mine\n");

    snprintf(store, sizeof store, "%s/store", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    assert_int_equal(mkdir(victim, 0755), 0);
    snprintf(vfile, sizeof vfile, "%s/payload-0-0", victim);
    testfiles_put(vfile, "precious\n");
    snprintf(args, sizeof args, "%s --refits 1 --store dir:%s", tiny, store);
    run(&r, args); /* makes and marks the store */
    if (r.rc != 0) fail_msg("%s: %s", args, r.err);
    snprintf(link, sizeof link, "%s/attempt-3", store);
    assert_int_equal(symlink(victim, link), 0);
    snprintf(args, sizeof args, "%s --refits 3 --store dir:%s", tiny, store);
    run(&r, args);
    testfiles_assert_text(vfile, "precious\n");
    assert_int_equal(testfiles_count(victim, ""), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gnuplot_text_whitelist),
        cmocka_unit_test(test_gnuplot_cannot_start_processes),
        cmocka_unit_test(test_report_label_runs_nothing),
        cmocka_unit_test(test_sim_plan_model_folder_runs_nothing),
        cmocka_unit_test(test_output_folder_link_refused),
        cmocka_unit_test(test_store_never_deletes_outside),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
