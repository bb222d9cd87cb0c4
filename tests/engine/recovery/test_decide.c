/* ctest-labels: unit
 * The restore decision (engine/recovery/decide.c) against the table of
 * dcr/recovery.h, written out case by case from the rules, not from the
 * code: every combination of what a receiver holds, whether an attempt was
 * interrupted and from where, and the retry flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/recovery.h"

#define NONE DCR_RESTORE_NONE

typedef struct row {
    dcr_restore_state_t s;
    uint64_t version;
    dcr_restore_kind_t kind;
    dcr_restore_action_t action;
    const char *why_has; /* a phrase the reason must hold; NULL: unchanged */
} row_t;

static void test_table(void **state)
{
    const row_t rows[] = {
        /* clean at the version asked: nothing when untouched, else a check */
        {{5, NONE, true, false, false}, 5, DCR_RESTORE_CLEAN, DCR_RESTORE_NOTHING, NULL},
        {{5, NONE, false, false, false}, 5, DCR_RESTORE_CLEAN, DCR_RESTORE_CHECK, NULL},
        /* clean behind: replay, however far (the window is the replay's
         * business) */
        {{3, NONE, true, false, false}, 5, DCR_RESTORE_REPLAY, DCR_RESTORE_APPLY, NULL},
        {{0, NONE, false, true, true}, 9, DCR_RESTORE_REPLAY, DCR_RESTORE_APPLY, NULL},
        /* unknown or ahead: dense, ahead says so */
        {{NONE, NONE, false, false, false}, 5, DCR_RESTORE_DENSE, DCR_RESTORE_APPLY, NULL},
        {{7, NONE, false, false, false}, 5, DCR_RESTORE_DENSE, DCR_RESTORE_APPLY, "ahead of 5"},
        /* interrupted mid-apply of an attempt from u < v: repair */
        {{NONE, 4, false, false, false}, 5, DCR_RESTORE_REPAIR, DCR_RESTORE_APPLY, NULL},
        {{NONE, 4, false, true, true}, 5, DCR_RESTORE_REPAIR, DCR_RESTORE_APPLY, NULL},
        /* from u == v: the retry repairs it when the caller does so and no
         * such repair failed; otherwise dense, nothing to repair with */
        {{NONE, 5, false, true, false}, 5, DCR_RESTORE_CLEAN, DCR_RESTORE_DEFER, NULL},
        {{NONE, 5, false, false, false},
         5,
         DCR_RESTORE_DENSE,
         DCR_RESTORE_APPLY,
         "no overwrite records"},
        {{NONE, 5, false, true, true}, 5, DCR_RESTORE_DENSE, DCR_RESTORE_APPLY, "failed its check"},
        /* from an attempt ahead of the version asked: dense */
        {{NONE, 6, false, true, false},
         5,
         DCR_RESTORE_DENSE,
         DCR_RESTORE_APPLY,
         "no overwrite records"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *r = &rows[i];
        char why[200] = "found";
        dcr_restore_choice_t c = dcr_restore_decide(&r->s, r->version, why, sizeof why);
        dcr_restore_choice_t plain = dcr_restore_decide(&r->s, r->version, NULL, 0);
        if (c.kind != r->kind || c.action != r->action)
            fail_msg("row %zu: %s/%d, want %s/%d", i, dcr_restore_kind_name(c.kind), c.action,
                     dcr_restore_kind_name(r->kind), r->action);
        assert_int_equal(plain.kind, c.kind);
        assert_int_equal(plain.action, c.action);
        if (r->why_has == NULL)
            assert_string_equal(why, "found");
        else if (strstr(why, r->why_has) == NULL)
            fail_msg("row %zu: reason \"%s\" lacks \"%s\"", i, why, r->why_has);
    }
}

/* Only a dense choice turns into an anchor, and only with anchors, a store
 * and a version after the initial load. */
static void test_anchor_preference(void **state)
{
    assert_true(dcr_restore_prefers_anchor(DCR_RESTORE_DENSE, 2, true, 3));
    assert_false(dcr_restore_prefers_anchor(DCR_RESTORE_DENSE, 0, true, 3));
    assert_false(dcr_restore_prefers_anchor(DCR_RESTORE_DENSE, 2, false, 3));
    assert_false(dcr_restore_prefers_anchor(DCR_RESTORE_DENSE, 2, true, 0));
    for (int k = 0; k < DCR_RESTORE_KINDS; k++)
        if (k != DCR_RESTORE_DENSE)
            assert_false(dcr_restore_prefers_anchor((dcr_restore_kind_t)k, 2, true, 3));
}

/* A reason never overflows its buffer, however long what was found. */
static void test_reason_bounded(void **state)
{
    char why[16];
    memset(why, 'x', sizeof why - 1);
    why[sizeof why - 1] = '\0';
    dcr_restore_state_t s = {NONE, 5, false, true, true};
    dcr_restore_choice_t c = dcr_restore_decide(&s, 5, why, sizeof why);
    assert_int_equal(c.kind, DCR_RESTORE_DENSE);
    assert_int_equal(strlen(why), sizeof why - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_anchor_preference),
        cmocka_unit_test(test_reason_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
