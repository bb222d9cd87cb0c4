/* ctest-labels: integration
 *
 * Input files a careless or hostile user names (issue 32, items 8, 11, 13,
 * 17), through the dcr command: FIFOs made with mkfifo where a config, a
 * model folder's files, a change profile, a payload key or a checkpoint is
 * expected; a 600-byte config asking for 50 million tensors; a change
 * profile past its cap. Each is one line and exit 2 in seconds (every dcr
 * runs under `timeout`: one that blocks fails the test instead of hanging
 * it), and no line quotes a parse of a file that was never read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "testfiles.h"

static char dir[256];
static char args[4096];
static char cli_under_timeout[2048];
static char fifo[512], fifo_model[512], fifo_ckpt[512], fifo_single[512];

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static int make_fifo_in(const char *folder, const char *leaf)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", folder, leaf);
    return mkfifo(p, 0600);
}

static int setup(void **state)
{
    (void)state;
    if (!testfiles_tmpdir(dir, sizeof(dir), "hostile-inputs")) return -1;
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    /* 60 s: far above what a refusal takes, far below a hang. */
    snprintf(cli_under_timeout, sizeof(cli_under_timeout), "timeout -s KILL 60 %s", cli);
    if (setenv("DCR_CLI", cli_under_timeout, 1) != 0) return -1;
    path_in(fifo, sizeof(fifo), "pipe.json");
    path_in(fifo_model, sizeof(fifo_model), "model-dir");
    path_in(fifo_ckpt, sizeof(fifo_ckpt), "sharded");
    path_in(fifo_single, sizeof(fifo_single), "single");
    if (mkfifo(fifo, 0600) || mkdir(fifo_model, 0700) || mkdir(fifo_ckpt, 0700) ||
        mkdir(fifo_single, 0700))
        return -1;
    if (make_fifo_in(fifo_model, "config.json") ||
        make_fifo_in(fifo_ckpt, "model.safetensors.index.json") ||
        make_fifo_in(fifo_single, "model.safetensors"))
        return -1;
    return setenv("TMPDIR", dir, 1);
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(dir);
}

/* Every surface that blocked forever on a FIFO with no writer: the line
 * says the file is a FIFO. */
static void test_fifos_refused(void **state)
{
    (void)state;
    const char *fmt[] = {
        "inventory --model %s",       "bench --model %s",       "construct --changes profile:%s",
        "bench --changes profile:%s", "bench --payload-key %s",
    };
    for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
        snprintf(args, sizeof(args), fmt[i], fifo);
        expect_error(args, 2, "a FIFO");
    }
    /* A model folder whose config.json is a FIFO. */
    snprintf(args, sizeof(args), "inventory --model %s", fifo_model);
    expect_error(args, 2, "a FIFO");
}

/* Checkpoints: a FIFO as the file, as a sharded checkpoint's index and as
 * a folder's single file. dcr diff's exit code for a bad checkpoint is its
 * own business; what is checked here is that the reader answers at once,
 * in one line naming the FIFO. */
static void test_checkpoint_fifos_answer(void **state)
{
    (void)state;
    char model[512];
    path_in(model, sizeof(model), "ckpt-model.json");
    testfiles_put(model, "{\"name\": \"m\", \"family\": \"qwen2\", \"hidden_size\": 64,"
                         " \"intermediate_size\": 128, \"num_hidden_layers\": 1,"
                         " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                         " \"head_dim\": 16, \"vocab_size\": 128, \"tie_word_embeddings\": true}");
    const char *paths[] = {fifo, fifo_ckpt, fifo_single};
    for (size_t i = 0; i < 3; i++) {
        static result_t r;
        snprintf(args, sizeof(args), "diff %s %s --model %s", paths[i], paths[i], model);
        run(&r, args);
        if (r.rc != 1 && r.rc != 2) fail_msg("dcr %s: exit %d: %s", args, r.rc, r.err);
        if (!strstr(r.err, "a FIFO")) fail_msg("dcr %s: '%s' lacks 'a FIFO'", args, r.err);
        size_t len = strlen(r.err);
        assert_null(memchr(r.err, '\n', len - 1));
    }
}

/* A missing profile is "cannot open", not "line -1: unable to open". */
static void test_missing_profile_message(void **state)
{
    (void)state;
    static result_t r;
    run(&r, "construct --changes profile:/nonexistent/profile.json");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "change profile /nonexistent/profile.json: cannot open"));
    assert_null(strstr(r.err, "line -1"));
}

/* A profile of valid JSON padded past 1 MiB is refused from its size. */
static void test_profile_cap(void **state)
{
    (void)state;
    char p[512];
    path_in(p, sizeof(p), "padded-profile.json");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("{\"format\": \"dcr-change-profile\", \"version\": 1, \"classes\": {}", f);
    for (int i = 0; i < (1 << 20) + 16; i++) fputc(' ', f);
    fputs("}\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "construct --changes profile:%s", p);
    expect_error(args, 2, "more than the 1048576");
}

/* The config: 4,096 layers of 4,096 experts, each count within
 * its own limit. Refused from the config (before: 300 s and 5.8 GB). */
static void test_huge_config_refused(void **state)
{
    (void)state;
    char p[512];
    path_in(p, sizeof(p), "huge.json");
    testfiles_put(p, "{\"name\": \"huge\", \"family\": \"qwen3_moe\", \"hidden_size\": 64,"
                     " \"moe_intermediate_size\": 64, \"num_hidden_layers\": 4096,"
                     " \"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"head_dim\": 16,"
                     " \"vocab_size\": 256, \"num_experts\": 4096, \"num_experts_per_tok\": 8,"
                     " \"tie_word_embeddings\": false, \"qk_norm\": true,"
                     " \"attention_bias\": false}");
    snprintf(args, sizeof(args), "inventory --model %s", p);
    expect_error(args, 2, "tensors");
    snprintf(args, sizeof(args), "bench --model %s --layers 0", p);
    expect_error(args, 2, "tensors");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifos_refused),
        cmocka_unit_test(test_checkpoint_fifos_answer),
        cmocka_unit_test(test_missing_profile_message),
        cmocka_unit_test(test_profile_cap),
        cmocka_unit_test(test_huge_config_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
