/*
 * caller.c - this thread's caller (caller.h).
 */
#include "service/users/caller.h"

#include <stdio.h>
#include <string.h>

static _Thread_local caller current;
static _Thread_local bool current_set;

void users_caller_enter(const caller *c)
{
    current = *c;
    current_set = true;
}

void users_caller_leave(void)
{
    current_set = false;
}

const caller *users_caller_current(void)
{
    return current_set ? &current : NULL;
}

bool users_caller_sees(const char *owner)
{
    const caller *c = users_caller_current();
    if (!c || c->role != USER_ROLE_USER)
        return true;
    return owner && strcmp(owner, c->name) == 0;
}

bool users_caller_is_user(void)
{
    const caller *c = users_caller_current();
    return c && c->role == USER_ROLE_USER;
}

const char *users_caller_owner(void)
{
    const caller *c = users_caller_current();
    return c ? c->name : USER_ANONYMOUS;
}

const char *users_role_name(enum users_role r)
{
    switch (r) {
    case USER_ROLE_ADMIN:
        return "admin";
    case USER_ROLE_USER:
        return "user";
    case USER_ROLE_VIEWER:
        return "viewer";
    case USER_ROLE_NONE:
        break;
    }
    return "none";
}

enum users_role users_role_parse(const char *s)
{
    if (!s)
        return USER_ROLE_NONE;
    if (strcmp(s, "admin") == 0)
        return USER_ROLE_ADMIN;
    if (strcmp(s, "user") == 0)
        return USER_ROLE_USER;
    if (strcmp(s, "viewer") == 0)
        return USER_ROLE_VIEWER;
    return USER_ROLE_NONE;
}
