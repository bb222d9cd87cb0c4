/* ctest-labels: unit
 *
 * Every file reader of workloads/model and workloads/change against hostile
 * inputs (issue 32, items 8, 11, 12, 13): a FIFO with no writer, a
 * directory, a device, a file past the reader's cap, a config that asks for
 * millions of tensors, a safetensors header of hundreds of thousands of
 * tensors and a shard index of 100,001 distinct files. A reader that would
 * block or run for minutes runs in a child with an alarm, so that such a
 * reader fails the test instead of hanging it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dcr/inventory.h"
#include "workloads/change/change_profile.h"
#include "workloads/model/input_file.h"
#include "workloads/model/model.h"
#include "workloads/model/safetensors.h"
#include "workloads/tmp_dir.h"

static char path[512];

static const char *in_tmp(const char *name)
{
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
    return path;
}

/* Runs fn in a child that is killed after `seconds`; returns fn's status
 * (a dcr_status_t) or 1000 + the signal that ended the child. */
static int in_child(int (*fn)(const char *), const char *arg, unsigned seconds)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(seconds);
        _exit(-fn(arg));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
    return -WEXITSTATUS(status);
}

static int load_model(const char *p)
{
    dcr_model_config_t cfg;
    return dcr_model_load(p, &cfg);
}

static int load_profile(const char *p)
{
    dcr_change_profile_t prof;
    return dcr_change_profile_load(p, &prof);
}

static int open_checkpoint(const char *p)
{
    dcr_checkpoint_t *ck = NULL;
    dcr_status_t st = dcr_checkpoint_open(p, &ck);
    dcr_checkpoint_close(ck);
    return st;
}

static int read_input(const char *p)
{
    char *text = NULL;
    dcr_status_t st = dcr_input_read(p, "input", 1 << 20, &text, NULL);
    free(text);
    return st;
}

/* A FIFO with no writer is refused at once, as not a regular file, by every
 * reader: none blocks in open. */
static void test_fifo_refused_without_blocking(void **state)
{
    (void)state;
    char fifo[512], dir[512], leaf[600];
    snprintf(fifo, sizeof(fifo), "%s", in_tmp("pipe.json"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* A model folder whose config.json, index or single file is a FIFO. */
    snprintf(dir, sizeof(dir), "%s", in_tmp("fifo-model"));
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(leaf, sizeof(leaf), "%s/config.json", dir);
    assert_int_equal(mkfifo(leaf, 0600), 0);
    snprintf(leaf, sizeof(leaf), "%s/model.safetensors.index.json", dir);
    assert_int_equal(mkfifo(leaf, 0600), 0);
    char single_dir[512], single[600];
    snprintf(single_dir, sizeof(single_dir), "%s", in_tmp("fifo-single"));
    assert_int_equal(mkdir(single_dir, 0700), 0);
    snprintf(single, sizeof(single), "%s/model.safetensors", single_dir);
    assert_int_equal(mkfifo(single, 0600), 0);

    assert_int_equal(in_child(load_model, fifo, 10), DCR_EINVAL);
    assert_int_equal(in_child(load_model, dir, 10), DCR_EINVAL);
    assert_int_equal(in_child(load_profile, fifo, 10), DCR_EINVAL);
    assert_int_equal(in_child(open_checkpoint, fifo, 10), DCR_EINVAL);
    assert_int_equal(in_child(open_checkpoint, dir, 10), DCR_EINVAL);
    assert_int_equal(in_child(open_checkpoint, single_dir, 10), DCR_EINVAL);
    assert_int_equal(in_child(read_input, fifo, 10), DCR_EINVAL);
    /* The line says what the file is. */
    char *text = NULL;
    assert_int_equal(dcr_input_read(fifo, "model config", 100, &text, NULL), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "a FIFO, expected a regular file"));
    assert_non_null(strstr(dcr_error_detail(), fifo));
}

/* A directory and a character device are refused the same way; a missing
 * file is DCR_ENOTFOUND and its line says "cannot open", never a line
 * number of a parse that did not happen. */
static void test_not_files_and_missing(void **state)
{
    (void)state;
    char *text = NULL;
    assert_int_equal(dcr_input_read(tmp_dir, "input", 100, &text, NULL), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "a directory"));
    assert_int_equal(dcr_input_read("/dev/null", "input", 100, &text, NULL), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "a character device"));
    dcr_change_profile_t prof;
    assert_int_equal(dcr_change_profile_load(in_tmp("absent.json"), &prof), DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_detail(), "cannot open"));
    assert_null(strstr(dcr_error_detail(), "line -1"));
    assert_int_equal(dcr_change_profile_load(tmp_dir, &prof), DCR_EINVAL);
}

/* A file over the cap is refused from its size, before a buffer that size
 * exists; one exactly at the cap is read whole, NUL-terminated. */
static void test_size_caps(void **state)
{
    (void)state;
    const char *p = in_tmp("sized.txt");
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (int i = 0; i < 1000; i++) fputc('a' + i % 26, f);
    fclose(f);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(dcr_input_read(p, "input", 999, &text, &len), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "1000 bytes"));
    assert_int_equal(dcr_input_read(p, "input", 1000, &text, &len), DCR_OK);
    assert_int_equal(len, 1000);
    assert_int_equal(strlen(text), 1000);
    assert_int_equal(text[27], 'b');
    free(text);

    /* A change profile of valid JSON padded past 1 MiB of whitespace: the
     * cap refuses it (today's reader parsed the whole file). */
    p = in_tmp("big-profile.json");
    f = fopen(p, "wb");
    assert_non_null(f);
    fputs("{\"format\": \"dcr-change-profile\", \"version\": 1, \"classes\": {}", f);
    for (unsigned i = 0; i < DCR_CHANGE_PROFILE_FILE_MAX; i++) fputc(' ', f);
    fputs("}", f);
    fclose(f);
    dcr_change_profile_t prof;
    assert_int_equal(dcr_change_profile_load(p, &prof), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "more than"));
}

/* The estimate bounds every built-in model's inventory from above, by at
 * most a few times (an estimate that is far off would refuse real models),
 * computed from the config alone. */
static void test_estimate_bounds_real_models(void **state)
{
    (void)state;
    static const char *const names[] = {"qwen3-30b-a3b", "qwen3-235b-a22b",
                                        "qwen2.5-0.5b",  "llama-3.2-3b",
                                        "gemma-3-4b",    "nemotron-3-nano-30b-a3b"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        dcr_model_config_t cfg;
        assert_int_equal(dcr_model_load(names[i], &cfg), DCR_OK);
        dcr_model_estimate_t e = dcr_model_estimate(&cfg);
        dcr_inventory_t *inv = NULL;
        assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
        int64_t tensors = (int64_t)dcr_inventory_count(inv);
        double params = (double)dcr_inventory_params(inv);
        if (e.tensors < tensors || e.tensors > 4 * tensors)
            fail_msg("%s: estimate %lld tensors, inventory %lld", names[i], (long long)e.tensors,
                     (long long)tensors);
        if (e.elements < params || e.elements > 4 * params)
            fail_msg("%s: estimate %.4g elements, inventory %.4g", names[i], e.elements, params);
        dcr_inventory_destroy(inv);
    }
}

/* The 600-byte config of the issue: 4,096 layers of 4,096 experts, each
 * within its own limit, asks for about 50 million tensors. It is refused
 * from the config in well under the alarm (today: 300 s and 5.8 GB). */
static const char huge_moe[] =
    "{\"name\": \"huge\", \"family\": \"qwen3_moe\", \"hidden_size\": 64,"
    " \"moe_intermediate_size\": 64, \"num_hidden_layers\": 4096,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"head_dim\": 16,"
    " \"vocab_size\": 256, \"num_experts\": 4096, \"num_experts_per_tok\": 8,"
    " \"tie_word_embeddings\": false, \"qk_norm\": true, \"attention_bias\": false}";

static int build_huge(const char *p)
{
    dcr_model_config_t cfg;
    dcr_status_t st = dcr_model_load(p, &cfg);
    if (st != DCR_OK) return st == DCR_EINVAL ? -100 : st;
    dcr_inventory_t *inv = NULL;
    st = dcr_model_build_inventory(&cfg, &inv);
    dcr_inventory_destroy(inv);
    return st;
}

static void test_huge_config_refused_before_building(void **state)
{
    (void)state;
    const char *p = in_tmp("huge.json");
    testfiles_put(p, huge_moe);
    assert_int_equal(in_child(build_huge, p, 20), DCR_EINVAL);
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_load(p, &cfg), DCR_OK);
    dcr_model_estimate_t e = dcr_model_estimate(&cfg);
    /* 4096 layers x 3 x 4096 expert projections alone. */
    assert_true(e.tensors >= INT64_C(4096) * 3 * 4096);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_EINVAL);
    assert_null(inv);
    assert_non_null(strstr(dcr_error_detail(), "tensors"));
}

/* The inventory itself stops at its bound, whatever builds it. */
static void test_inventory_bound(void **state)
{
    (void)state;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    int64_t shape[1] = {1};
    char name[32];
    for (int i = 0; i < DCR_INVENTORY_TENSORS_MAX; i++) {
        snprintf(name, sizeof(name), "t%d", i);
        if (dcr_inventory_add(inv, name, DCR_DTYPE_BF16, 1, shape) != DCR_OK)
            fail_msg("tensor %d refused: %s", i, dcr_error_detail());
    }
    assert_int_equal(dcr_inventory_add(inv, "one-more", DCR_DTYPE_BF16, 1, shape), DCR_EINVAL);
    assert_int_equal(dcr_inventory_count(inv), DCR_INVENTORY_TENSORS_MAX);
    dcr_inventory_destroy(inv);
}

/* A safetensors header of more tensors than the bound (all of zero size,
 * so the data section is empty and the layout valid) is refused by the
 * count before it is parsed; today's reader parsed it and accepted it. */
static void test_header_tensor_bound(void **state)
{
    (void)state;
    size_t n = DCR_ST_TENSORS_MAX + 1;
    size_t cap = n * 64 + 64;
    char *hdr = malloc(cap);
    assert_non_null(hdr);
    size_t len = 0;
    hdr[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(
            hdr + len, cap - len,
            "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    hdr[len++] = '}';
    uint8_t *buf = malloc(8 + len);
    assert_non_null(buf);
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)len >> (8 * b));
    memcpy(buf + 8, hdr, len);
    free(hdr);
    dcr_st_tensor_t *t = NULL;
    size_t count = 0;
    assert_int_equal(dcr_st_parse(buf, 8 + len, "many", &t, &count, NULL), DCR_EPARSE);
    assert_null(t);
    assert_non_null(strstr(dcr_error_detail(), "tensors"));
    free(buf);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A sharded checkpoint's index of n weight_map entries naming `distinct`
 * files (none exists: opening stops at the first, or the file bound stops
 * the index first). */
static void write_index(const char *dir, int n, int distinct)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("{\"weight_map\": {", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"model.t%d.weight\": \"shard-%d.safetensors\"", i ? ", " : "", i,
                i % distinct);
    fputs("}}", f);
    fclose(f);
}

static double time_open(const char *dir)
{
    double t0 = now_s();
    dcr_checkpoint_t *ck = NULL;
    assert_int_not_equal(dcr_checkpoint_open(dir, &ck), DCR_OK);
    return now_s() - t0;
}

static int index_ratio_ok(const char *dir_unused)
{
    (void)dir_unused;
    char same[512], distinct[512];
    snprintf(same, sizeof(same), "%s/idx-same", tmp_dir);
    snprintf(distinct, sizeof(distinct), "%s/idx-distinct", tmp_dir);
    double t_same = time_open(same);
    double t_distinct = time_open(distinct);
    /* Both parse the same amount of JSON; distinct names must not cost
     * more than a constant factor more (quadratic: hundreds of times). */
    if (t_distinct > 10 * t_same + 0.5) {
        fprintf(stderr, "index of 100,001 distinct files: %.3f s, of one file: %.3f s\n",
                t_distinct, t_same);
        return DCR_ETIMEOUT;
    }
    return DCR_OK;
}

/* The shard index of the issue: 100,001 entries naming 100,001 files. The
 * distinct-file pass is linear (a hash), so the index is refused for its
 * file count in about the time an index of one file takes to be read. */
static void test_index_linear(void **state)
{
    (void)state;
    char same[512], distinct[512];
    snprintf(same, sizeof(same), "%s/idx-same", tmp_dir);
    snprintf(distinct, sizeof(distinct), "%s/idx-distinct", tmp_dir);
    assert_int_equal(mkdir(same, 0700), 0);
    assert_int_equal(mkdir(distinct, 0700), 0);
    write_index(same, 100001, 1);
    write_index(distinct, 100001, 100001);
    assert_int_equal(in_child(index_ratio_ok, NULL, 60), DCR_OK);
    dcr_checkpoint_t *ck = NULL;
    assert_int_equal(dcr_checkpoint_open(distinct, &ck), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "more than 100000 files"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_refused_without_blocking),
        cmocka_unit_test(test_not_files_and_missing),
        cmocka_unit_test(test_size_caps),
        cmocka_unit_test(test_estimate_bounds_real_models),
        cmocka_unit_test(test_huge_config_refused_before_building),
        cmocka_unit_test(test_inventory_bound),
        cmocka_unit_test(test_header_tensor_bound),
        cmocka_unit_test(test_index_linear),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
