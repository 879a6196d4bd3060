/*
 * test_tickets.c - a ticket is good once, for its purpose and object only,
 * within its lifetime, and one user cannot fill the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/tickets/tickets.h"

static const caller alice = {.name = "alice", .role = USER_ROLE_USER};

static int reset(void **state)
{
    (void)state;
    tickets_reset();
    return 0;
}

static void test_once_and_for_its_object_only(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char t[TICKET_SIZE];
    assert_int_equal(tickets_issue(&alice, "terminal", "box1", 0, t, &e), 0);
    assert_int_equal(strlen(t), TICKET_LEN);
    caller who = {0};
    assert_true(tickets_redeem(t, "terminal", "box1", &who));
    assert_string_equal(who.name, "alice");
    assert_int_equal(who.role, USER_ROLE_USER);
    assert_false(tickets_redeem(t, "terminal", "box1", &who)); /* spent */

    char u[TICKET_SIZE];
    assert_int_equal(tickets_issue(&alice, "terminal", "box1", 0, u, &e), 0);
    assert_string_not_equal(t, u);
    assert_false(tickets_redeem(u, "terminal", "box2", &who)); /* other object */
    assert_false(tickets_redeem(u, "terminal", "box1", &who)); /* spent by the miss */
    assert_int_equal(tickets_issue(&alice, "terminal", "box1", 0, u, &e), 0);
    assert_false(tickets_redeem(u, "service", "box1", &who)); /* other purpose */
}

static void test_expires(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char t[TICKET_SIZE];
    assert_int_equal(tickets_issue(&alice, "terminal", "box1", 1, t, &e), 0);
    sleep(2);
    assert_false(tickets_redeem(t, "terminal", "box1", NULL));
}

static void test_bad_input(void **state)
{
    (void)state;
    assert_false(tickets_redeem("", "terminal", "box1", NULL));
    assert_false(tickets_redeem("abc", "terminal", "box1", NULL));
    gb_err e = GB_ERR_INIT;
    char t[TICKET_SIZE];
    char long_object[300];
    memset(long_object, 'x', sizeof(long_object) - 1);
    long_object[sizeof(long_object) - 1] = '\0';
    assert_int_equal(tickets_issue(&alice, "terminal", long_object, 0, t, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
}

static void test_per_user_limit(void **state)
{
    (void)state;
    gb_err e = GB_ERR_INIT;
    char t[TICKET_SIZE];
    for (int i = 0; i < TICKET_MAX_PER_USER; i++)
        assert_int_equal(tickets_issue(&alice, "terminal", "box1", 0, t, &e), 0);
    assert_int_equal(tickets_issue(&alice, "terminal", "box1", 0, t, &e), -1);
    assert_int_equal(e.code, ERR_QUOTA_EXCEEDED);
    const caller bob = {.name = "bob", .role = USER_ROLE_USER};
    e = (gb_err)GB_ERR_INIT;
    assert_int_equal(tickets_issue(&bob, "terminal", "box9", 0, t, &e), 0);
    assert_true(tickets_redeem(t, "terminal", "box9", NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_once_and_for_its_object_only, reset),
        cmocka_unit_test_setup(test_expires, reset),
        cmocka_unit_test_setup(test_bad_input, reset),
        cmocka_unit_test_setup(test_per_user_limit, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
