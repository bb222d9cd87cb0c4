/* ctest-labels: integration
 *
 * The memory budget: --max-memory sizes parse as decimal with binary units;
 * runs over the budget are refused at once with one line giving the
 * estimate and the budget (the reproductions of issue 15: a Llama config
 * with hidden 32768, 1024 x 1024 training ranks, 1024 rollout nodes x 64
 * receivers); and the estimate lies within ESTIMATE_FACTOR of the peak
 * resident set (ru_maxrss) of a child process running the bench. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "workloads/harness/bench.h"
#include "workloads/change/budget.h"

/* The documented agreement of estimate and measured peak (docs/guides/memory.md). */
#define ESTIMATE_FACTOR 1.5
/* A refusal comes before any allocation or layout build: well under this. */
#define REFUSAL_S 1.0

static void test_size_parse(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(dcr_size_parse("--max-memory", "8G", &v), DCR_OK);
    assert_int_equal(v, 8LL * 1024 * 1024 * 1024);
    assert_int_equal(dcr_size_parse("--max-memory", "512MiB", &v), DCR_OK);
    assert_int_equal(v, 512LL * 1024 * 1024);
    assert_int_equal(dcr_size_parse("--max-memory", "3K", &v), DCR_OK);
    assert_int_equal(v, 3072);
    assert_int_equal(dcr_size_parse("--max-memory", "2T", &v), DCR_OK);
    assert_int_equal(v, 2LL << 40);
    assert_int_equal(dcr_size_parse("--max-memory", "1000000", &v), DCR_OK);
    assert_int_equal(v, 1000000);
    assert_int_equal(dcr_size_parse("--max-memory", "100B", &v), DCR_OK);
    assert_int_equal(v, 100);
    assert_int_equal(dcr_size_parse("--max-memory", "8GB", &v), DCR_OK);
    assert_int_equal(v, 8LL << 30);
    const char *bad[] = {"",
                         "0",
                         "0x10",
                         " 8G",
                         "8G ",
                         "-1",
                         "+8G",
                         "1.5G",
                         "8g",
                         "8GiBs",
                         "G",
                         "8X",
                         "8iB",
                         "1e9",
                         "99999999999999999999",
                         "9999999999999T"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (dcr_size_parse("--max-memory", bad[i], &v) != DCR_EINVAL)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(dcr_error_detail(), "--max-memory"));
    }
}

static void test_check_names_estimate_and_budget(void **state)
{
    (void)state;
    dcr_memory_estimate_t e = {0};
    e.checkpoint = 1LL << 30;
    e.shards = 2LL << 30;
    e.receivers = 3LL << 30;
    assert_int_equal(dcr_memory_estimate_total(&e), 5LL << 30);
    assert_int_equal(dcr_memory_check("run", &e, 5LL << 30), DCR_OK);
    assert_int_equal(dcr_memory_check("run", &e, (5LL << 30) - 1), DCR_ENOMEM);
    const char *d = dcr_error_detail();
    assert_null(strchr(d, '\n'));
    assert_non_null(strstr(d, "run: estimated peak memory 5.00 GiB"));
    assert_non_null(strstr(d, "receivers 3.0x, shards 2.0x"));
    assert_non_null(strstr(d, "budget of 5.00 GiB"));
    /* Saturates instead of overflowing. */
    e.canonical = INT64_MAX;
    assert_int_equal(dcr_memory_estimate_total(&e), INT64_MAX);
    assert_true(dcr_memory_budget_default() > 0);
    assert_true(dcr_memory_total_bytes() >= dcr_memory_budget_default());
}

static dcr_bench_config_t tiny(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.warmup = 1;
    c.refits = 2;
    return c;
}

/* Runs the bench; it must fail with `want` within REFUSAL_S and a detail
 * naming `needle`. */
static void assert_refused(const dcr_bench_config_t *c, dcr_status_t want, const char *needle)
{
    dcr_bench_result_t r;
    double t0 = dcr_clock_s();
    dcr_status_t st = dcr_bench_run(c, &r);
    double took = dcr_clock_s() - t0;
    if (st == DCR_OK) {
        dcr_bench_result_free(&r);
        fail_msg("the run was not refused");
    }
    assert_int_equal(st, want);
    const char *d = dcr_error_detail();
    if (!strstr(d, needle)) fail_msg("detail '%s' lacks '%s'", d, needle);
    assert_null(strchr(d, '\n'));
    if (took > REFUSAL_S) fail_msg("refused after %.2f s", took);
}

static void test_refusals_are_fast(void **state)
{
    (void)state;
    /* A Llama with hidden 32768: every key within the config limits, a
     * checkpoint of hundreds of GB. */
    char path[] = "/tmp/dcr-test-budget-XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    const char *json = "{\"name\": \"llama-huge\", \"family\": \"llama\", \"hidden_size\": 32768, "
                       "\"intermediate_size\": 131072, \"num_hidden_layers\": 32, "
                       "\"num_attention_heads\": 256, \"num_key_value_heads\": 8, "
                       "\"head_dim\": 128, \"vocab_size\": 128256, \"tie_word_embeddings\": true, "
                       "\"attention_bias\": false}";
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    dcr_bench_config_t c = tiny();
    c.run.scenario.model = path;
    c.run.scenario.scale = 1;
    c.run.scenario.layers = 0;
    c.run.scenario.max_memory = 16LL << 30;
    assert_refused(&c, DCR_ENOMEM, "estimated peak memory");
    assert_non_null(strstr(dcr_error_detail(), "budget of 16.00 GiB"));
    unlink(path);

    c = tiny();
    c.run.scenario.train.nodes = 1024;
    c.run.scenario.train.gpus_per_node = 1024;
    assert_refused(&c, DCR_EINVAL, "at most 65536");

    c = tiny();
    c.run.serve.nodes = 1024;
    c.run.serve.gpus_per_node = 64;
    c.run.scenario.max_memory = 16LL << 30;
    assert_refused(&c, DCR_ENOMEM, "receivers");

    /* The same small run fits a budget of a few GB and not one of 1 MB. */
    c = tiny();
    c.run.scenario.max_memory = 1 << 20;
    assert_refused(&c, DCR_ENOMEM, "budget of 1.0 MiB");
}

/* The bench's estimate, and the child's peak resident bytes. */
static void measure_child(const dcr_bench_config_t *c, int64_t *estimate_p, int64_t *peak_p)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dcr_bench_result_t r;
        int64_t est = -1;
        if (dcr_bench_run(c, &r) == DCR_OK) {
            est = r.memory_estimate_bytes;
            dcr_bench_result_free(&r);
        } else {
            fprintf(stderr, "child: %s\n", dcr_error_detail());
        }
        _exit(write(fds[1], &est, sizeof(est)) == (ssize_t)sizeof(est) && est > 0 ? 0 : 1);
    }
    close(fds[1]);
    int64_t est = -1;
    assert_int_equal(read(fds[0], &est, sizeof(est)), (ssize_t)sizeof(est));
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *estimate_p = est;
    *peak_p = (int64_t)ru.ru_maxrss * 1024;
}

/* A sanitized build carries shadow memory, redzones and a quarantine of
 * freed blocks the estimate rightly leaves out: there the figures are
 * printed, not compared. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PEAK_COMPARABLE 0
#else
#define PEAK_COMPARABLE 1
#endif

static void assert_estimate_near_peak(const char *label, const dcr_bench_config_t *c)
{
    int64_t est = 0, peak = 0;
    measure_child(c, &est, &peak);
    double ratio = (double)est / (double)peak;
    printf("%s: estimate %.1f MiB, measured peak %.1f MiB, ratio %.2f\n", label,
           (double)est / (1 << 20), (double)peak / (1 << 20), ratio);
    if (PEAK_COMPARABLE && (ratio > ESTIMATE_FACTOR || ratio < 1 / ESTIMATE_FACTOR))
        fail_msg("%s: estimate / peak = %.2f, outside 1/%.1f..%.1f", label, ratio, ESTIMATE_FACTOR,
                 ESTIMATE_FACTOR);
}

static void test_estimate_near_measured_peak(void **state)
{
    (void)state;
    dcr_bench_config_t c = tiny(); /* the embedded default model and layout */
    assert_estimate_near_peak("default (scale 16, 8 layers)", &c);
    c = tiny();
    c.run.scenario.scale = 32;
    c.run.scenario.layers = 4;
    c.run.serve.nodes = 3;
    c.run.adamw = true;
    assert_estimate_near_peak("scale 32, 4 layers, 3 rollout nodes, adamw", &c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_parse),
        cmocka_unit_test(test_check_names_estimate_and_budget),
        cmocka_unit_test(test_refusals_are_fast),
        cmocka_unit_test(test_estimate_near_measured_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
