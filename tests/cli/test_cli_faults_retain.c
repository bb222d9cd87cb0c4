/* ctest-labels: integration slow
 *
 * dcr faults train --processes retains committed versions as dcr bench
 * --processes does (issue 19). A rollout-node process SIGKILLed after its
 * acknowledgment, before it saw the commit, restarts dirty at a version the
 * run committed: its restore checks (repair) or replays that version from
 * the retained payloads. Without retention (the faults launcher once parsed
 * the run's flags without the --processes default window) every such
 * restore fell back to a dense refit. Here every SIGKILL of 12 steps
 * restarts a node (delivery, apply and acked in turn) and no restore may be
 * dense, while the verifier process finds every receiver of every version
 * bit-exact against a dense refit (the oracle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli_run.h"

static json_int_t kind_count(json_t *j, const char *kind)
{
    json_t *k = json_object_get(json_object_get(j, "restores_by_kind"), kind);
    if (!k) fail_msg("no restores_by_kind.%s", kind);
    return json_integer_value(json_object_get(k, "count"));
}

static void test_acked_kills_restore_without_dense(void **state)
{
    (void)state;
    json_t *j = run_json("faults train --processes --scale 64 --layers 2 --seed 3 --steps 12 "
                         "--kill-every 1 --kill-coordinator-every 0 --json");
    assert_int_equal(json_integer_value(json_object_get(j, "commits")), 12);
    assert_int_equal(json_integer_value(json_object_get(j, "mismatches")), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "lost")), 0);
    json_int_t restores = kind_count(j, "clean") + kind_count(j, "replay") +
                          kind_count(j, "repair") + kind_count(j, "dense");
    assert_true(restores > 0);
    if (kind_count(j, "dense") != 0)
        fail_msg("%lld of %lld restores were dense refits", (long long)kind_count(j, "dense"),
                 (long long)restores);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_acked_kills_restore_without_dense)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
