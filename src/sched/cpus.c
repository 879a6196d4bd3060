/*
 * cpus.c - the CPU-core allocator (see cpus.h).
 *
 * The pool keeps, per logical CPU of the topology, who holds it (an owner
 * name, NULL when free) and whether it is reserved for the host. Cores and
 * nodes are small numbers, so choosing scans the CPU list; a host has at
 * most a few hundred logical CPUs.
 */
#include "util/xalloc.h"
#include "sched/cpus.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

struct cpus_pool {
    pthread_mutex_t lock;
    cpus_topology t;
    char **owner;   /* per index into t.cpus: NULL free */
    bool *reserved; /* per index */
    int nnodes;     /* max node + 1 */
    int ncores;     /* max core + 1 */
};

static int cpus_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

cpus_pool *cpus_pool_new(const cpus_topology *t, const int *reserved, size_t nreserved)
{
    cpus_pool *p = xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->t.n = t->n;
    p->t.simulated = t->simulated;
    p->t.cpus = xcalloc(t->n + 1, sizeof(*p->t.cpus));
    if (t->n)
        memcpy(p->t.cpus, t->cpus, t->n * sizeof(*t->cpus));
    p->owner = xcalloc(t->n + 1, sizeof(*p->owner));
    p->reserved = xcalloc(t->n + 1, sizeof(*p->reserved));
    for (size_t i = 0; i < t->n; i++) {
        if (t->cpus[i].node + 1 > p->nnodes)
            p->nnodes = t->cpus[i].node + 1;
        if (t->cpus[i].core + 1 > p->ncores)
            p->ncores = t->cpus[i].core + 1;
        for (size_t r = 0; r < nreserved; r++)
            if (reserved[r] == t->cpus[i].id)
                p->reserved[i] = true;
    }
    return p;
}

void cpus_pool_free(cpus_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->t.n; i++)
        free(p->owner[i]);
    free(p->owner);
    free(p->reserved);
    free(p->t.cpus);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static pthread_mutex_t *cpus_lock_of(const cpus_pool *p)
{
    return (pthread_mutex_t *)&p->lock;
}

static bool cpus_is_free(const cpus_pool *p, size_t i)
{
    return !p->owner[i] && !p->reserved[i];
}

static long cpus_index_of(const cpus_pool *p, int id)
{
    for (size_t i = 0; i < p->t.n; i++)
        if (p->t.cpus[i].id == id)
            return (long)i;
    return -1;
}

/* Free CPUs on node, and on a core: how many of its threads are free and
 * how many it has. */
static size_t cpus_node_free(const cpus_pool *p, int node, const bool *picked)
{
    size_t n = 0;
    for (size_t i = 0; i < p->t.n; i++)
        if (p->t.cpus[i].node == node && cpus_is_free(p, i) && !picked[i])
            n++;
    return n;
}

static void cpus_core_count(const cpus_pool *p, int core, const bool *picked, size_t *free_n,
                            size_t *all)
{
    *free_n = *all = 0;
    for (size_t i = 0; i < p->t.n; i++)
        if (p->t.cpus[i].core == core) {
            (*all)++;
            if (cpus_is_free(p, i) && !picked[i])
                (*free_n)++;
        }
}

/* Pick up to *left CPUs on node into picked[], in three passes: whole free
 * cores that fit entirely, threads of cores already partly held, then any
 * free thread (splitting a whole core). */
static void cpus_pick_on_node(const cpus_pool *p, int node, bool *picked, size_t *left)
{
    for (int pass = 0; pass < 3 && *left; pass++) {
        for (int core = 0; core < p->ncores && *left; core++) {
            size_t free_n, all;
            cpus_core_count(p, core, picked, &free_n, &all);
            if (free_n == 0)
                continue;
            bool whole = free_n == all;
            if (pass == 0 && (!whole || free_n > *left))
                continue;
            if (pass == 1 && whole)
                continue;
            for (size_t i = 0; i < p->t.n && *left; i++)
                if (p->t.cpus[i].core == core && p->t.cpus[i].node == node && cpus_is_free(p, i) &&
                    !picked[i]) {
                    picked[i] = true;
                    (*left)--;
                }
        }
    }
}

int cpus_pool_alloc(cpus_pool *p, size_t n, const int *prefer, size_t nprefer, const char *owner,
                    int *out, gb_err *err)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    _cleanup_free_ bool *picked = xcalloc(p->t.n + 1, sizeof(bool));
    _cleanup_free_ bool *done = xcalloc((size_t)p->nnodes + 1, sizeof(bool));
    size_t left = n;
    for (size_t k = 0; k < nprefer && left; k++)
        if (prefer[k] >= 0 && prefer[k] < p->nnodes && !done[prefer[k]]) {
            done[prefer[k]] = true;
            cpus_pick_on_node(p, prefer[k], picked, &left);
        }
    /* The other nodes, most free first, so a set stays on one if it can. */
    while (left) {
        int best = -1;
        size_t best_free = 0;
        for (int node = 0; node < p->nnodes; node++) {
            size_t f = done[node] ? 0 : cpus_node_free(p, node, picked);
            if (!done[node] && (best < 0 || f > best_free)) {
                best = node;
                best_free = f;
            }
        }
        if (best < 0)
            break;
        done[best] = true;
        cpus_pick_on_node(p, best, picked, &left);
    }
    if (left) {
        char per_node[512] = "";
        size_t len = 0, total = 0;
        for (int node = 0; node < p->nnodes; node++) {
            size_t f = 0;
            for (size_t i = 0; i < p->t.n; i++)
                if (p->t.cpus[i].node == node && cpus_is_free(p, i))
                    f++;
            total += f;
            if (len < sizeof(per_node) - 64)
                len += (size_t)snprintf(per_node + len, sizeof(per_node) - len, "%s%zu on node %d",
                                        node ? ", " : "", f, node);
        }
        pthread_mutex_unlock(&p->lock);
        return err_set(err, ERR_CPU_NOT_ENOUGH,
                       "not enough CPU cores: asked %zu, %zu free (%s); stop or shrink a replica "
                       "set that holds cores, or ask for fewer",
                       n, total, per_node);
    }
    size_t k = 0;
    for (size_t i = 0; i < p->t.n; i++)
        if (picked[i]) {
            p->owner[i] = xstrdup(owner);
            out[k++] = p->t.cpus[i].id;
        }
    pthread_mutex_unlock(&p->lock);
    qsort(out, n, sizeof(*out), cpus_cmp_int);
    return 0;
}

int cpus_pool_take(cpus_pool *p, const int *ids, size_t n, const char *owner, bool recover,
                   gb_err *err)
{
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        long i = cpus_index_of(p, ids[k]);
        for (size_t j = 0; j < k && rc == 0; j++)
            if (ids[j] == ids[k])
                rc = err_set(err, ERR_INVALID_PARAMS, "CPU %d is asked for twice", ids[k]);
        if (rc)
            break;
        if (i < 0)
            rc = err_set(err, ERR_CPU_NOT_ENOUGH, "CPU %d is not a CPU of this host", ids[k]);
        else if (p->owner[i])
            rc = err_set(err, ERR_CPU_NOT_ENOUGH, "CPU %d is held by replica set %s", ids[k],
                         p->owner[i]);
        else if (p->reserved[i] && !recover)
            rc = err_set(err, ERR_CPU_NOT_ENOUGH, "CPU %d is reserved for the host", ids[k]);
    }
    for (size_t k = 0; k < n && rc == 0; k++)
        p->owner[cpus_index_of(p, ids[k])] = xstrdup(owner);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Where id sits: node, then core, then id; unknown ids last. Called locked. */
static int cpus_cmp_place(const cpus_pool *p, int x, int y)
{
    long i = cpus_index_of(p, x), j = cpus_index_of(p, y);
    int ni = i < 0 ? 1 << 20 : p->t.cpus[i].node, nj = j < 0 ? 1 << 20 : p->t.cpus[j].node;
    int ci = i < 0 ? 0 : p->t.cpus[i].core, cj = j < 0 ? 0 : p->t.cpus[j].core;
    if (ni != nj)
        return ni < nj ? -1 : 1;
    if (ci != cj)
        return ci < cj ? -1 : 1;
    return (x > y) - (x < y);
}

void cpus_pool_order(const cpus_pool *p, int *ids, size_t n)
{
    pthread_mutex_lock(cpus_lock_of(p));
    for (size_t i = 1; i < n; i++) /* a few dozen ids: insertion sort */
        for (size_t j = i; j > 0 && cpus_cmp_place(p, ids[j - 1], ids[j]) > 0; j--) {
            int t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    pthread_mutex_unlock(cpus_lock_of(p));
}

void cpus_pool_release(cpus_pool *p, const int *ids, size_t n, const char *owner)
{
    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < n; k++) {
        long i = cpus_index_of(p, ids[k]);
        if (i >= 0 && p->owner[i] && strcmp(p->owner[i], owner) == 0) {
            free(p->owner[i]);
            p->owner[i] = NULL;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

size_t cpus_pool_size(const cpus_pool *p)
{
    return p->t.n;
}

size_t cpus_pool_free_count(const cpus_pool *p)
{
    pthread_mutex_lock(cpus_lock_of(p));
    size_t n = 0;
    for (size_t i = 0; i < p->t.n; i++)
        n += cpus_is_free(p, i);
    pthread_mutex_unlock(cpus_lock_of(p));
    return n;
}

size_t cpus_pool_usable(const cpus_pool *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->t.n; i++)
        n += !p->reserved[i];
    return n;
}

bool cpus_pool_simulated(const cpus_pool *p)
{
    return p->t.simulated;
}

int cpus_pool_nodes(const cpus_pool *p)
{
    return p->nnodes;
}

json_t *cpus_pool_status(const cpus_pool *p)
{
    pthread_mutex_lock(cpus_lock_of(p));
    json_t *cpus = json_array(), *nodes = json_array();
    size_t nfree = 0, nheld = 0, nres = 0, threads = 0;
    _cleanup_free_ bool *core_seen = xcalloc((size_t)p->ncores + 1, sizeof(bool));
    size_t ncores = 0;
    for (size_t i = 0; i < p->t.n; i++) {
        const cpus_cpu *c = &p->t.cpus[i];
        const char *state = p->owner[i] ? "held" : p->reserved[i] ? "reserved" : "free";
        json_t *o = json_pack("{s:i, s:i, s:i, s:s}", "id", c->id, "core", c->core, "node", c->node,
                              "state", state);
        if (p->owner[i])
            json_object_set_new(o, "owner", json_string(p->owner[i]));
        json_array_append_new(cpus, o);
        nheld += p->owner[i] != NULL;
        nres += !p->owner[i] && p->reserved[i];
        nfree += cpus_is_free(p, i);
        if (!core_seen[c->core]) {
            core_seen[c->core] = true;
            ncores++;
        }
    }
    if (ncores)
        threads = p->t.n / ncores;
    for (int node = 0; node < p->nnodes; node++) {
        _cleanup_free_ int *ids = xcalloc(p->t.n + 1, sizeof(int));
        size_t k = 0, f = 0;
        for (size_t i = 0; i < p->t.n; i++)
            if (p->t.cpus[i].node == node) {
                ids[k++] = p->t.cpus[i].id;
                f += cpus_is_free(p, i);
            }
        if (!k)
            continue;
        _cleanup_free_ char *list = cpus_list_format(ids, k);
        json_array_append_new(nodes, json_pack("{s:i, s:s, s:I, s:I}", "node", node, "cpus", list,
                                               "total", (json_int_t)k, "free", (json_int_t)f));
    }
    pthread_mutex_unlock(cpus_lock_of(p));
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "simulated", p->t.simulated,
                     "total", (json_int_t)p->t.n, "cores", (json_int_t)ncores, "threadsPerCore",
                     (json_int_t)threads, "free", (json_int_t)nfree, "held", (json_int_t)nheld,
                     "reserved", (json_int_t)nres, "numaNodes", nodes, "cpus", cpus);
}
