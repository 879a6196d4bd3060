/*
 * namelock.c - a table of named mutexes (see namelock.h).
 *
 * The table is a linked list under one mutex: the names in use at once are
 * few (one per operation in flight), so a list beats a hash table here.
 * Each entry counts its users (holding or waiting); the last one out unlinks
 * and frees it.
 */
#include "util/xalloc.h"
#include "service/namelock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct namelock {
    namelock_table *table;
    char key[96]; /* "kind/name" */
    pthread_mutex_t mutex;
    unsigned users;
    namelock *next;
};

struct namelock_table {
    pthread_mutex_t mutex;
    namelock *head;
};

namelock_table *namelock_table_new(void)
{
    namelock_table *t = xcalloc(1, sizeof(*t));
    pthread_mutex_init(&t->mutex, NULL);
    return t;
}

void namelock_table_free(namelock_table *t)
{
    if (!t)
        return;
    while (t->head) {
        namelock *next = t->head->next;
        pthread_mutex_destroy(&t->head->mutex);
        free(t->head);
        t->head = next;
    }
    pthread_mutex_destroy(&t->mutex);
    free(t);
}

namelock *namelock_acquire(namelock_table *t, const char *kind, const char *name)
{
    char key[96];
    snprintf(key, sizeof(key), "%s/%s", kind, name);
    pthread_mutex_lock(&t->mutex);
    namelock *l = t->head;
    while (l && strcmp(l->key, key) != 0)
        l = l->next;
    if (!l) {
        l = xcalloc(1, sizeof(*l));
        l->table = t;
        memcpy(l->key, key, sizeof(key));
        pthread_mutex_init(&l->mutex, NULL);
        l->next = t->head;
        t->head = l;
    }
    l->users++;
    pthread_mutex_unlock(&t->mutex);
    pthread_mutex_lock(&l->mutex);
    return l;
}

void namelock_release(namelock *l)
{
    namelock_table *t = l->table;
    pthread_mutex_unlock(&l->mutex);
    pthread_mutex_lock(&t->mutex);
    if (--l->users == 0) {
        namelock **pp = &t->head;
        while (*pp != l)
            pp = &(*pp)->next;
        *pp = l->next;
        pthread_mutex_destroy(&l->mutex);
        free(l);
    }
    pthread_mutex_unlock(&t->mutex);
}
