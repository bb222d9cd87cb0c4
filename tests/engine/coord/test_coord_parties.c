/* ctest-labels: unit
 *
 * The choice of the coordinator's parties (engine/coord/coord-parties.h):
 * the combinations no implementation serves are refused by
 * dcr_coord_create with DCR_EINVAL and one line saying why, before it
 * touches the transport or the control plane (both NULL here), and no
 * coordinator is returned: owners as processes without rollout nodes as
 * processes (only the remote rollout side publishes the coordinator's
 * "opened" record the owners wait for), owners in this process without a
 * constructor, rollout nodes as processes in async RL, and a side named
 * neither "local" nor "remote". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "dcr/coord.h"

static void refused(const dcr_coord_config_t *cc, const char *why)
{
    dcr_coord_parties_t parties = {NULL, 1, NULL, NULL, NULL, 2, NULL, NULL};
    dcr_coord_t *c = (dcr_coord_t *)&parties; /* a sentinel: must stay */
    assert_int_equal(dcr_coord_create(cc, &parties, &c), DCR_EINVAL);
    assert_ptr_equal(c, (dcr_coord_t *)&parties);
    assert_non_null(strstr(dcr_error_detail(), why));
}

static void test_unserved_combinations_refused(void **state)
{
    (void)state;
    dcr_coord_config_t cc = dcr_coord_config_default("parties", 1);
    cc.owners = "remote";
    refused(&cc, "owners as processes need rollout nodes as processes");
    cc.owners = "local";
    refused(&cc, "no constructor for owners in this process");
    cc.nodes = cc.owners = "remote";
    cc.rl = DCR_RL_ASYNC;
    refused(&cc, "sync RL only");
    cc.rl = DCR_RL_SYNC;
    cc.nodes = "mpi";
    refused(&cc, "expected \"local\" or \"remote\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unserved_combinations_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
