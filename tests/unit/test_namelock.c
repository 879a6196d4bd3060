/*
 * test_namelock.c - one name at a time, different names in parallel, and
 * no entry left behind.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/namelock.h"

static namelock_table *table;
static int counter;

static void *bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        namelock *l = namelock_acquire(table, "rs", "foo");
        int seen = counter; /* read-modify-write that races without the lock */
        if (i % 50 == 0)
            usleep(100);
        counter = seen + 1;
        namelock_release(l);
    }
    return NULL;
}

static void test_one_name_serializes(void **state)
{
    (void)state;
    table = namelock_table_new();
    counter = 0;
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, bump, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(counter, 8 * 200);
    namelock_table_free(table);
}

static void *take_other(void *arg)
{
    namelock *l = namelock_acquire(table, "rs", (const char *)arg);
    namelock_release(l);
    return NULL;
}

static void test_other_names_run(void **state)
{
    (void)state;
    table = namelock_table_new();
    namelock *held = namelock_acquire(table, "rs", "foo");
    /* another name, and the same name of another kind, do not wait */
    pthread_t t1, t2;
    pthread_create(&t1, NULL, take_other, "bar");
    pthread_join(t1, NULL);
    namelock *vol = namelock_acquire(table, "vol", "foo");
    namelock_release(vol);
    /* the same name waits until released */
    pthread_create(&t2, NULL, take_other, "foo");
    usleep(50 * 1000);
    assert_int_equal(pthread_tryjoin_np(t2, NULL), EBUSY);
    namelock_release(held);
    pthread_join(t2, NULL);
    namelock_table_free(table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_name_serializes),
        cmocka_unit_test(test_other_names_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
