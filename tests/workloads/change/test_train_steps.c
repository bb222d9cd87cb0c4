/* ctest-labels: unit */
/* Real training steps: scripts/train-steps.py trains a tiny model of each
 * family with PyTorch's AdamW (FP32 masters cast to BF16, lr 1e-6 after
 * warm-up) and writes the last step's BF16 checkpoints; dcr diff must find
 * exactly the changes the script counted with torch, and report the
 * entropy bound the script computed independently with numpy, in both
 * mappings. The interpreter is $DCR_PYTHON, else the first of
 * /usr/bin/python3 (Debian's python3-torch, scripts/install-deps.sh) and
 * python3 that imports torch and numpy; skipped when none does. */
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

static void test_real_steps(void **state)
{
    (void)state;
    if ((python = find_python()) == NULL) {
        print_message("  no python3 here imports torch and numpy: skipped\n");
        skip();
    }
    check_family("qwen2");
    check_family("qwen3_moe");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_real_steps)};
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
