/*
 * namelock.h - per-name serialization: operations on one replica set (or
 * volume) run one at a time, on different names in parallel.
 *
 * A table of named mutexes, each created on first use and freed when its
 * last user leaves, so the table holds only names in use right now.
 */
#ifndef GPUBOX_SERVICE_NAMELOCK_H
#define GPUBOX_SERVICE_NAMELOCK_H

typedef struct namelock_table namelock_table;
typedef struct namelock namelock;

namelock_table *namelock_table_new(void);
void namelock_table_free(namelock_table *t);

/* Block until this thread holds `name` (kind separates namespaces such as
 * "rs" and "vol"). Returns the held lock, never NULL: out of memory aborts
 * (util/xalloc.h), so callers need no check. */
namelock *namelock_acquire(namelock_table *t, const char *kind, const char *name);
void namelock_release(namelock *l);

/* For _cleanup_: `_cleanup_(namelock_releasep) namelock *l = namelock_acquire(...)`. */
static inline void namelock_releasep(namelock **l)
{
    if (*l)
        namelock_release(*l);
}

#endif
