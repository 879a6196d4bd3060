/*
 * carry_plan.c - the portable way's plan: which paths to stream out of the
 * old container, and how, given Docker's list of changes.
 *
 * Docker's changes API lists every path of the container's layer as added
 * (1), modified (0) or deleted (2) against the image, parents of changed
 * entries included. The archive API can only read a path's whole subtree
 * and write a tar into a directory, and its extraction removes whatever is
 * at a path before it writes an entry there. The plan turns the list into
 * operations on that API (enum carry_op_kind):
 *
 *   added path          DEEP: the whole subtree is new, carry it all;
 *   modified path       SHALLOW: only its own entry (a file with its data, a
 *                       directory's metadata); changed children are listed
 *                       and carried on their own;
 *   deleted path        REPLACE its parent directory: remove it in the new
 *                       container, carry the old container's whole directory
 *                       (which no longer has the deleted entries). There is
 *                       no other way to delete through Docker's API without
 *                       starting the container. A deleted top-level path
 *                       has no parent to replace (docs/carry.md, "Limits").
 *   parent of any op    SHALLOW (when not carried otherwise), because the
 *                       extraction changes the times of the directory it
 *                       writes into.
 *
 * Paths under `skip` (mounts, /proc, /sys, /dev, Docker's per-container
 * files) are never carried. A directory that holds one of the new
 * container's mount points (`guard`) is never replaced: the extraction's
 * removal would go into the mount and delete the volume's data.
 *
 * Paths are kept in carry_path_cmp order, in which a directory's subtree
 * directly follows it, so "what is inside X" is a contiguous run.
 */
#include "util/xalloc.h"
#include "carry/carry_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/log.h"

/* ---- Path sets ---- */

int carry_path_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == cb) {
            if (!ca)
                return 0;
            continue;
        }
        /* '/' before any other byte, the end before '/'. */
        int ra = ca == '/' ? 1 : ca == 0 ? 0 : ca + 1;
        int rb = cb == '/' ? 1 : cb == 0 ? 0 : cb + 1;
        return ra - rb;
    }
}

bool carry_path_within(const char *p, const char *root)
{
    size_t len = strlen(root);
    if (len == 1 && root[0] == '/')
        return true;
    return strncmp(p, root, len) == 0 && (p[len] == '\0' || p[len] == '/');
}

void carry_paths_add(carry_paths *s, const char *path)
{
    if (!path || path[0] != '/' || !path[1])
        return;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, cap * sizeof(*s->v));
        s->cap = cap;
    }
    s->v[s->n] = xstrndup(path, len);
    s->n++;
}

void carry_paths_free(carry_paths *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (carry_paths){0};
}

bool carry_paths_any_within(const carry_paths *s, const char *p)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (carry_path_within(s->v[i], p))
            return true;
    return false;
}

bool carry_paths_covers(const carry_paths *s, const char *p)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (carry_path_within(p, s->v[i]))
            return true;
    return false;
}

/* ---- Plans ---- */

void carry_plan_add(carry_plan *plan, enum carry_op_kind kind, const char *path)
{
    if (plan->nops == plan->cap) {
        size_t cap = plan->cap ? plan->cap * 2 : 16;
        plan->ops = xrealloc(plan->ops, cap * sizeof(*plan->ops));
        plan->cap = cap;
    }
    char *copy = xstrdup(path);
    plan->ops[plan->nops++] = (carry_op){.kind = kind, .path = copy};
}

void carry_plan_free(carry_plan *plan)
{
    for (size_t i = 0; i < plan->nops; i++)
        free(plan->ops[i].path);
    free(plan->ops);
    carry_paths_free(&plan->probe);
    carry_paths_free(&plan->unapplied);
    *plan = (carry_plan){0};
}

static int cmp_ops(const void *a, const void *b)
{
    const carry_op *x = a, *y = b;
    int c = carry_path_cmp(x->path, y->path);
    /* For one path, the widest kind first: it makes the others redundant. */
    return c ? c : (int)y->kind - (int)x->kind;
}

void carry_plan_finish(carry_plan *plan)
{
    if (plan->nops > 1)
        qsort(plan->ops, plan->nops, sizeof(*plan->ops), cmp_ops);
    size_t kept = 0;
    const char *cover = NULL; /* the last DEEP or REPLACE kept: its subtree is carried */
    const char *last = NULL;
    for (size_t i = 0; i < plan->nops; i++) {
        carry_op *op = &plan->ops[i];
        bool redundant =
            (cover && carry_path_within(op->path, cover)) || (last && strcmp(last, op->path) == 0);
        if (redundant) {
            free(op->path);
            continue;
        }
        plan->ops[kept++] = *op;
        last = op->path;
        if (op->kind != CARRY_OP_SHALLOW)
            cover = op->path;
    }
    plan->nops = kept;
}

/* ---- Building ---- */

struct change {
    const char *path;
    int kind;
};

static int cmp_changes(const void *a, const void *b)
{
    return carry_path_cmp(((const struct change *)a)->path, ((const struct change *)b)->path);
}

static void parent_of(const char *path, char *buf, size_t size)
{
    snprintf(buf, size, "%s", path);
    char *slash = strrchr(buf, '/');
    if (slash == buf)
        buf[1] = '\0';
    else if (slash)
        *slash = '\0';
}

/* Whether an added or modified change lies inside changes[i] (they follow it). */
static bool has_listed_inside(const struct change *ch, size_t n, size_t i)
{
    for (size_t j = i + 1; j < n && carry_path_within(ch[j].path, ch[i].path); j++)
        if (ch[j].kind != DOCKER_CHANGE_DELETED && strcmp(ch[j].path, ch[i].path) != 0)
            return true;
    return false;
}

/* Deleted paths: REPLACE the directory that held them. */
static void plan_deletions(const carry_plan_input *in, const struct change *ch, size_t n,
                           carry_plan *plan)
{
    char parent[4096];
    for (size_t i = 0; i < n; i++) {
        if (ch[i].kind != DOCKER_CHANGE_DELETED)
            continue;
        /* A deleted path that still has content is a directory emptied and
         * refilled (older Docker lists an opaque directory so): replace it. */
        if (has_listed_inside(ch, n, i))
            snprintf(parent, sizeof(parent), "%s", ch[i].path);
        else
            parent_of(ch[i].path, parent, sizeof(parent));
        if (strcmp(parent, "/") == 0) {
            carry_paths_add(&plan->probe, ch[i].path);
            continue;
        }
        if (carry_paths_any_within(in->guard, parent)) {
            log_warn("carry: cannot delete '%s' in the new container: '%s' holds a mount point "
                     "and cannot be replaced",
                     ch[i].path, parent);
            carry_paths_add(&plan->unapplied, ch[i].path);
            continue;
        }
        carry_plan_add(plan, CARRY_OP_REPLACE, parent);
    }
}

/* Added and modified paths; an added directory is carried whole unless a
 * skipped path (a mount of the old container) lies inside it, which would
 * stream the volume's data only to drop it: then it is split. */
static void plan_additions(const carry_plan_input *in, const struct change *ch, size_t n,
                           carry_plan *plan)
{
    for (size_t i = 0; i < n; i++) {
        if (ch[i].kind == DOCKER_CHANGE_DELETED)
            continue;
        bool whole =
            ch[i].kind == DOCKER_CHANGE_ADDED && !carry_paths_any_within(in->skip, ch[i].path);
        carry_plan_add(plan, whole ? CARRY_OP_DEEP : CARRY_OP_SHALLOW, ch[i].path);
    }
}

/* The directory each op writes into keeps its times only if it is carried
 * too (its entry is applied after everything written into it). */
static void plan_parents(carry_plan *plan)
{
    size_t nops = plan->nops;
    char parent[4096];
    for (size_t i = 0; i < nops; i++) {
        parent_of(plan->ops[i].path, parent, sizeof(parent));
        if (strcmp(parent, "/") != 0)
            carry_plan_add(plan, CARRY_OP_SHALLOW, parent);
    }
}

int carry_plan_build(const carry_plan_input *in, carry_plan *plan, gb_err *err)
{
    *plan = (carry_plan){0};
    if (!json_is_array(in->changes))
        return err_set(err, ERR_INTERNAL, "Docker's list of changes is not a list");
    size_t total = json_array_size(in->changes);
    _cleanup_free_ struct change *ch = xcalloc(total ? total : 1, sizeof(*ch));
    size_t n = 0;
    size_t i;
    json_t *item;
    json_array_foreach(in->changes, i, item)
    {
        const char *path = json_string_value(json_object_get(item, "Path"));
        json_t *kind = json_object_get(item, "Kind");
        if (!path || path[0] != '/' || !json_is_integer(kind) || json_integer_value(kind) < 0 ||
            json_integer_value(kind) > DOCKER_CHANGE_DELETED)
            return err_set(err, ERR_INTERNAL, "Docker's list of changes has a malformed entry");
        if (!path[1] || carry_paths_covers(in->skip, path))
            continue;
        ch[n++] = (struct change){.path = path, .kind = (int)json_integer_value(kind)};
    }
    if (n > 1)
        qsort(ch, n, sizeof(*ch), cmp_changes);

    plan_deletions(in, ch, n, plan);
    plan_additions(in, ch, n, plan);
    carry_plan_finish(plan);
    plan_parents(plan);
    carry_plan_finish(plan);
    return 0;
}
