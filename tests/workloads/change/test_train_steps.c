/* ctest-labels: unit */
/* Real training steps: scripts/train-steps.py trains a tiny model of each
 * family with PyTorch's AdamW (FP32 masters cast to BF16, lr 1e-6 after
 * warm-up) and writes the last step's BF16 checkpoints; dcr diff must find
 * exactly the changes the script counted with torch, and report the
 * entropy bound the script computed independently with numpy, in both
 * mappings; and the step's change profile must replay its pattern. The
 * interpreter is $DCR_PYTHON, else the first of /usr/bin/python3 (Debian's
 * python3-torch, scripts/install-deps.sh) and python3 that imports torch
 * and numpy; skipped when none does. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli_run.h"
#include "workloads/tmp_dir.h"

#ifndef DCR_SOURCE_DIR
#define DCR_SOURCE_DIR "."
#endif

static const char *python;

/* The first interpreter that imports torch and numpy, or NULL. */
static const char *find_python(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    const char *env = getenv("DCR_PYTHON");
    char cmd[600];
    for (int i = env ? -1 : 0; i < 2; i++) {
        const char *py = i < 0 ? env : candidates[i];
        if (strchr(py, '\'') != NULL) continue; /* quoted below */
        snprintf(cmd, sizeof(cmd), "'%s' -c 'import torch, numpy' >/dev/null 2>&1", py);
        if (system(cmd) == 0) return py;
    }
    return NULL;
}

/* Runs the generator; returns its last stdout line parsed as JSON. */
static json_t *train(const char *family, const char *out)
{
    char cmd[2048], line[4096], last[4096] = "";
    snprintf(cmd, sizeof(cmd),
             "'%s' '%s/scripts/train-steps.py' --family %s --out '%s' --hidden 64 "
             "--layers 2 --vocab 256 --warmup 2 --seq 32 --batch 2",
             python, DCR_SOURCE_DIR, family, out);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) snprintf(last, sizeof(last), "%s", line);
    assert_int_equal(pclose(p), 0);
    json_error_t err;
    json_t *j = json_loads(last, 0, &err);
    if (j == NULL) fail_msg("generator's last line is not JSON: %s", last);
    return j;
}

static void check_family(const char *family)
{
    char out[600], args[2048];
    snprintf(out, sizeof(out), "%s/%s", tmp_dir, family);
    json_t *t = train(family, out);
    json_int_t changed = json_integer_value(json_object_get(t, "changed_elements"));
    double bound = json_real_value(json_object_get(t, "entropy_bound_bytes"));
    assert_true(changed > 0 && bound > 0);
    static const char *const mappings[] = {"paper", "extended"};
    for (int m = 0; m < 2; m++) {
        snprintf(args, sizeof(args), "diff %s/old %s/new --json --no-class-payloads --mapping %s",
                 out, out, mappings[m]);
        json_t *j = run_json(args);
        json_int_t got = json_integer_value(json_object_get(j, "changed_elements"));
        double dcr_bound = json_real_value(json_object_get(j, "entropy_bound_bytes"));
        double ratio = json_real_value(json_object_get(j, "payload_to_bound_ratio"));
        print_message("  %s, %s mapping: %lld changed, bound %.1f B (numpy %.1f B), payload / "
                      "bound %.3f\n",
                      family, mappings[m], (long long)got, dcr_bound, bound, ratio);
        assert_int_equal(got, changed);
        assert_int_equal(json_integer_value(json_object_get(j, "records")), changed);
        assert_true(fabs(dcr_bound - bound) <= 1e-6 * bound);
        assert_true(ratio > 0);
        json_decref(j);
    }
    json_decref(t);
}

static double class_real(json_t *j, const char *cls, const char *key)
{
    return json_real_value(
        json_object_get(json_object_get(json_object_get(j, "classes"), cls), key));
}

/* A real step's change profile (`dcr diff --profile`) replayed on the same
 * checkpoint (`dcr diff --init OLD --changes profile:P`) gives each class
 * the real step's change rate and changed-row share, within 5 standard
 * deviations of the replay's sampling (binomial over elements and rows).
 * The embeddings are the class where the real pattern is not uniform: only
 * the rows of tokens the batch saw change. */
static void check_profile_replay(const char *family)
{
    char out[600], prof[700], args[2048];
    snprintf(out, sizeof(out), "%s/%s", tmp_dir, family);
    snprintf(prof, sizeof(prof), "%s/%s-profile.json", tmp_dir, family);
    snprintf(args, sizeof(args), "diff %s/old %s/new --json --no-class-payloads --profile %s", out,
             out, prof);
    json_t *real = run_json(args);
    snprintf(args, sizeof(args),
             "diff --init %s/old --changes profile:%s --json --no-class-payloads", out, prof);
    json_t *replay = run_json(args);
    static const char *const classes[] = {"attention", "dense_mlp", "experts", "embeddings"};
    int checked = 0;
    for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++) {
        json_t *c = json_object_get(json_object_get(real, "classes"), classes[k]);
        if (c == NULL || json_integer_value(json_object_get(c, "elements")) == 0) continue;
        double n = (double)json_integer_value(json_object_get(c, "elements"));
        double rows = (double)json_integer_value(json_object_get(c, "rows"));
        double rate = class_real(real, classes[k], "change_rate");
        double share = class_real(real, classes[k], "changed_row_share");
        double got_rate = class_real(replay, classes[k], "change_rate");
        double got_share = class_real(replay, classes[k], "changed_row_share");
        print_message("  %s %s: real rate %.5f, row share %.3f; replayed %.5f, %.3f\n", family,
                      classes[k], rate, share, got_rate, got_share);
        assert_true(fabs(got_rate - rate) <= 5 * sqrt(rate * (1 - rate) / n) + 1e-9);
        assert_true(fabs(got_share - share) <= 5 * sqrt(share * (1 - share) / rows) + 1.0 / rows);
        checked++;
    }
    assert_true(checked >= 2);
    json_decref(real);
    json_decref(replay);
}

static void test_real_steps(void **state)
{
    (void)state;
    if ((python = find_python()) == NULL) {
        print_message("  no python3 here imports torch and numpy: skipped\n");
        skip();
    }
    check_family("qwen2");
    check_family("qwen3_moe");
    check_profile_replay("qwen2");
    check_profile_replay("qwen3_moe");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_real_steps)};
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
