/*
 * caller.h - who the current request is, as the services see it: the
 * credentials of the request this thread is serving, as the kernel's
 * current_cred() is a task's.
 *
 * The API layer enters the caller before it calls a service and leaves it
 * after (api/fleet_dispatch.c, for every route); start-up, reconciliation
 * and the background threads run with no caller: the daemon itself, which
 * sees everything. The rule every service applies through users_caller_sees:
 * a `user` sees only what they own, and something they may not see is
 * answered exactly as something that does not exist (docs/users.md).
 */
#ifndef GPUBOX_SERVICE_USERS_CALLER_H
#define GPUBOX_SERVICE_USERS_CALLER_H

#include <stdbool.h>

#include "util/names.h"

/* Ordered as http/auth.h's roles. */
enum users_role { USER_ROLE_NONE = 0, USER_ROLE_VIEWER, USER_ROLE_USER, USER_ROLE_ADMIN };

#define USER_NAME_MAX 63
/* The owner of what a caller without a token file makes. */
#define USER_ANONYMOUS "anonymous"

typedef struct caller {
    char name[USER_NAME_MAX + 1];
    enum users_role role;
} caller;

/* c (copied) is this thread's caller until users_caller_leave. */
void users_caller_enter(const caller *c);
void users_caller_leave(void);
/* This thread's caller; NULL for the daemon itself. */
const caller *users_caller_current(void);

/* May the caller see (and so change) what owner owns? Yes for the daemon,
 * admins and viewers; a user only their own. */
bool users_caller_sees(const char *owner);
/* Is the caller a `user` (limited to their own)? */
bool users_caller_is_user(void);
/* The name to record as the owner of what the caller makes. */
const char *users_caller_owner(void);

const char *users_role_name(enum users_role r);
/* "admin" | "user" | "viewer" -> the role; USER_ROLE_NONE otherwise. */
enum users_role users_role_parse(const char *s);

#endif
