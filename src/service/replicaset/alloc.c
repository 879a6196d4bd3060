/*
 * alloc.c - a replica set's GPUs and host ports: asking sched/ for them
 * all at once, and giving them back.
 *
 * The GPUs come as a grant (sched/gpus.h): whole cards, or a memory share
 * or a time-slice replica on each card, as the spec asks. The record keeps
 * the grant, so giving back frees exactly the tenancies it holds.
 *
 * A new version (patch, rollback, restart) takes only the difference
 * (replicaset_alloc_next): what the old version holds and the new one still asks
 * for is kept, so it is never free in between. Whole cards are kept and
 * added to, the new ones held alongside the old until the old container is
 * gone. A share cannot be held twice by one owner on one card, so a change
 * of shares (or between shares and whole cards) is one exchange in the
 * pool (gpus_pool_realloc): "swapped", undone by replicaset_alloc_swap_back.
 */
#include "util/xalloc.h"
#include "service/replicaset/internal.h"

#include <stdlib.h>
#include <string.h>

#include "sched/cpus.h"
#include "sched/gpus.h"
#include "sched/ports.h"
#include "service/cores.h"
#include "util/cleanup.h"
#include "util/log.h"

static int replicaset_alloc_ports(app *a, replicaset_record *r, gb_err *err)
{
    const replicaset_spec *spec = &r->spec;
    size_t nexplicit = 0, nauto = replicaset_spec_ports_to_allocate(spec);
    _cleanup_free_ uint16_t *explicit_ports = xcalloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ uint16_t *auto_ports = xcalloc(nauto + 1, sizeof(uint16_t));
    for (size_t i = 0; i < spec->nports; i++)
        if (spec->ports[i].host_port)
            explicit_ports[nexplicit++] = spec->ports[i].host_port;
    if (nexplicit && ports_pool_take(a->ports, explicit_ports, nexplicit, true, err) < 0)
        return -1;
    if (nauto && ports_pool_alloc(a->ports, nauto, auto_ports, err) < 0) {
        ports_pool_release(a->ports, explicit_ports, nexplicit);
        return -1;
    }
    r->ports = xcalloc(spec->nports + 1, sizeof(*r->ports));
    size_t next_auto = 0;
    for (size_t i = 0; i < spec->nports; i++) {
        const replicaset_port *p = &spec->ports[i];
        r->ports[i].container_port = p->container_port;
        r->ports[i].host_port = p->host_port ? p->host_port : auto_ports[next_auto++];
        memcpy(r->ports[i].protocol, p->protocol, sizeof(r->ports[i].protocol));
    }
    r->nports = spec->nports;
    return 0;
}

/* cpuCount beyond what the host can ever give is the request's fault (400),
 * not a lack of free cores (409). */
static int replicaset_alloc_cpus_check(const app *a, const replicaset_spec *s, gb_err *err)
{
    size_t usable = cpus_pool_usable(a->cpus);
    if ((size_t)s->cpu_count > usable)
        return err_set(err, ERR_INVALID_PARAMS,
                       "cpuCount is %d; this host has %zu logical CPUs to give (%zu reserved for "
                       "the host)",
                       s->cpu_count, usable, cpus_pool_size(a->cpus) - usable);
    return 0;
}

static bool replicaset_has_cpu(const replicaset_record *r, int id)
{
    for (size_t i = 0; i < r->ncpuset; i++)
        if (r->cpuset[i] == id)
            return true;
    return false;
}

static int replicaset_cmp_int(const void *x, const void *y)
{
    int p = *(const int *)x, q = *(const int *)y;
    return (p > q) - (p < q);
}

/* Cores for to->spec.cpu_count: those held (may be NULL) holds are kept
 * (whole cores first when shrinking), the rest taken from the pool on the
 * NUMA nodes of to's cards first. to must hold its cards already. All or
 * nothing: on failure to holds none of the new ones. */
static int replicaset_alloc_next_cpus(app *a, const replicaset_record *held, replicaset_record *to,
                                      gb_err *err)
{
    size_t want = (size_t)to->spec.cpu_count, nheld = held ? held->ncpuset : 0;
    _cleanup_free_ int *ids = xcalloc(want + nheld + 1, sizeof(int));
    if (nheld)
        memcpy(ids, held->cpuset, nheld * sizeof(int));
    cpus_pool_order(a->cpus, ids, nheld);
    size_t keep = nheld < want ? nheld : want;
    _cleanup_free_ int *nodes = xcalloc(to->ngpus + 1, sizeof(int));
    size_t nnodes = cores_nodes_of_cards(a, to->gpus, to->ngpus, nodes);
    free(to->cpuset);
    to->cpuset = NULL;
    to->ncpuset = 0;
    if (want > keep &&
        cpus_pool_alloc(a->cpus, want - keep, nodes, nnodes, to->name, ids + keep, err) < 0) {
        to->cpuset = xcalloc(1, sizeof(int));
        return -1;
    }
    qsort(ids, want, sizeof(int), replicaset_cmp_int);
    to->cpuset = steal_ptr(&ids);
    to->ncpuset = want;
    return 0;
}

int replicaset_alloc_take(app *a, replicaset_record *r, gb_err *err)
{
    if (replicaset_alloc_cpus_check(a, &r->spec, err) < 0)
        return -1;
    free(r->ports);
    r->ports = NULL;
    r->nports = 0;
    gpus_request req;
    replicaset_spec_gpu_request(&r->spec, &req);
    _cleanup_(gpus_grant_free) gpus_grant grant = {0};
    if (gpus_pool_alloc(a->gpu_pool, &req, r->name, &grant, err) < 0)
        return -1;
    if (replicaset_record_set_grant(r, &grant, err) < 0) {
        gpus_pool_release_grant(a->gpu_pool, &grant, r->name);
        return -1;
    }
    if (replicaset_alloc_ports(a, r, err) < 0 || replicaset_alloc_next_cpus(a, NULL, r, err) < 0) {
        replicaset_alloc_give_back(a, r);
        replicaset_record_clear_holdings(r);
        return -1;
    }
    return 0;
}

void replicaset_alloc_give_back(app *a, const replicaset_record *r)
{
    if (r->ngpus && r->grant.n == r->ngpus) {
        gpus_pool_release_grant(a->gpu_pool, &r->grant, r->name);
    } else if (r->ngpus) {
        /* gpus set without a grant: whole cards, released by UUID */
        _cleanup_free_ const char **uuids = xcalloc(r->ngpus, sizeof(*uuids));
        if (uuids) {
            for (size_t i = 0; i < r->ngpus; i++)
                uuids[i] = r->gpus[i];
            gpus_pool_release(a->gpu_pool, uuids, r->ngpus, r->name);
        }
    }
    if (r->nports) {
        _cleanup_free_ uint16_t *ports = xcalloc(r->nports, sizeof(*ports));
        if (ports) {
            for (size_t i = 0; i < r->nports; i++)
                ports[i] = r->ports[i].host_port;
            ports_pool_release(a->ports, ports, r->nports);
        }
    }
    if (r->ncpuset)
        cpus_pool_release(a->cpus, r->cpuset, r->ncpuset, r->name);
    if ((r->ngpus || r->nports || r->ncpuset) && a->hooks.capacity_freed)
        a->hooks.capacity_freed(a); /* a queued set may fit now (queue/queue.h) */
}

/* Ports for to->spec: a port `held` already holds is kept when to->spec
 * still asks for it (the same explicit host port, or an allocated port for
 * the same container port and protocol, so a user's ssh port survives a
 * patch); the rest are taken from the pool. All or nothing. */
static int replicaset_alloc_next_ports(app *a, const replicaset_record *held, replicaset_record *to,
                                       gb_err *err)
{
    const replicaset_spec *spec = &to->spec;
    _cleanup_free_ bool *used = xcalloc(held->nports + 1, sizeof(bool));
    _cleanup_free_ uint16_t *take = xcalloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ uint16_t *got = xcalloc(spec->nports + 1, sizeof(uint16_t));
    _cleanup_free_ size_t *auto_at = xcalloc(spec->nports + 1, sizeof(size_t));
    free(to->ports);
    to->ports = xcalloc(spec->nports + 1, sizeof(*to->ports));
    to->nports = 0;
    size_t ntake = 0, nauto = 0;
    for (size_t i = 0; i < spec->nports; i++) {
        const replicaset_port *p = &spec->ports[i];
        to->ports[i] =
            (replicaset_held_port){.container_port = p->container_port, .host_port = p->host_port};
        memcpy(to->ports[i].protocol, p->protocol, sizeof(p->protocol));
        if (!p->host_port)
            continue;
        bool kept = false;
        for (size_t j = 0; j < held->nports && !kept; j++)
            if (!used[j] && held->ports[j].host_port == p->host_port)
                used[j] = kept = true;
        if (!kept)
            take[ntake++] = p->host_port;
    }
    for (size_t i = 0; i < spec->nports; i++) {
        const replicaset_port *p = &spec->ports[i];
        if (p->host_port)
            continue;
        for (size_t j = 0; j < held->nports && !to->ports[i].host_port; j++) {
            const replicaset_held_port *h = &held->ports[j];
            if (!used[j] && h->container_port == p->container_port &&
                strcmp(h->protocol, p->protocol) == 0) {
                used[j] = true;
                to->ports[i].host_port = h->host_port;
            }
        }
        if (!to->ports[i].host_port)
            auto_at[nauto++] = i;
    }
    if (ntake && ports_pool_take(a->ports, take, ntake, true, err) < 0)
        return -1;
    if (nauto && ports_pool_alloc(a->ports, nauto, got, err) < 0) {
        ports_pool_release(a->ports, take, ntake);
        return -1;
    }
    for (size_t k = 0; k < nauto; k++)
        to->ports[auto_at[k]].host_port = got[k];
    to->nports = spec->nports;
    return 0;
}

static bool replicaset_grant_has(const gpus_grant *g, const char *uuid)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->cards[i].uuid, uuid) == 0)
            return true;
    return false;
}

static bool replicaset_same_gpu_request(const replicaset_spec *x, const replicaset_spec *y)
{
    _cleanup_json_ json_t *a = json_object(), *b = json_object();
    return x->gpu_count == y->gpu_count && a && b && replicaset_spec_gpu_to_json(x, a) == 0 &&
           replicaset_spec_gpu_to_json(y, b) == 0 && json_equal(a, b);
}

/* May a whole card the set holds stay under spec's pins and model? */
static bool replicaset_card_allowed(const app *a, const replicaset_spec *s, const char *uuid)
{
    if (s->ngpu_uuids) {
        for (size_t i = 0; i < s->ngpu_uuids; i++)
            if (strcmp(s->gpu_uuids[i], uuid) == 0)
                return true;
        return false;
    }
    if (!s->gpu_model || !*s->gpu_model)
        return true;
    for (size_t i = 0; i < a->gpus.n; i++)
        if (strcmp(a->gpus.devices[i].uuid, uuid) == 0)
            return strcasestr(a->gpus.devices[i].model, s->gpu_model) != NULL;
    return false;
}

/* Whole cards for to->spec: held's that still fit the spec (growing keeps
 * them all, shrinking the first ones), plus new ones from the pool. */
static int replicaset_alloc_whole_next(app *a, const replicaset_record *held, replicaset_record *to,
                                       gb_err *err)
{
    const replicaset_spec *s = &to->spec;
    size_t want = s->ngpu_uuids ? s->ngpu_uuids : (size_t)s->gpu_count;
    _cleanup_(gpus_grant_free) gpus_grant g = {.cards = xcalloc(want + 1, sizeof(gpus_grant_card))};
    _cleanup_free_ const char **pins = xcalloc(s->ngpu_uuids + 1, sizeof(*pins));
    for (size_t i = 0; i < held->grant.n && g.n < want; i++)
        if (replicaset_card_allowed(a, s, held->grant.cards[i].uuid))
            g.cards[g.n++] = held->grant.cards[i];
    if (g.n < want) {
        gpus_request req;
        replicaset_spec_gpu_request(s, &req);
        req.count = want - g.n;
        size_t npins = 0;
        for (size_t i = 0; i < s->ngpu_uuids; i++)
            if (!replicaset_grant_has(&g, s->gpu_uuids[i]))
                pins[npins++] = s->gpu_uuids[i];
        req.pin_uuids = npins ? pins : NULL;
        req.npin = npins;
        _cleanup_(gpus_grant_free) gpus_grant extra = {0};
        if (gpus_pool_alloc(a->gpu_pool, &req, to->name, &extra, err) < 0)
            return -1;
        for (size_t i = 0; i < extra.n; i++)
            g.cards[g.n++] = extra.cards[i];
    }
    return replicaset_record_set_grant(to, &g, err);
}

/* GPUs for to->spec from held's (replicaset/internal.h). */
static int replicaset_alloc_next_gpus(app *a, const replicaset_record *held, replicaset_record *to,
                                      bool *swapped, gb_err *err)
{
    *swapped = false;
    gpus_request req;
    replicaset_spec_gpu_request(&to->spec, &req);
    bool to_none = req.count == 0 && req.npin == 0;
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    if (replicaset_same_gpu_request(&held->spec, &to->spec) || to_none) {
        /* The same cards held the same way, or none: nothing to take. */
        g.cards = xcalloc(held->grant.n + 1, sizeof(*g.cards));
        if (!to_none && held->grant.n)
            memcpy(g.cards, held->grant.cards, held->grant.n * sizeof(*g.cards));
        g.n = to_none ? 0 : held->grant.n;
        return replicaset_record_set_grant(to, &g, err);
    }
    bool held_whole = held->grant.n == 0 || held->grant.cards[0].mode == GPUS_MODE_WHOLE;
    if (held_whole && !replicaset_spec_gpu_is_share(&to->spec))
        return replicaset_alloc_whole_next(a, held, to, err);
    if (held->grant.n == 0) {
        if (gpus_pool_alloc(a->gpu_pool, &req, to->name, &g, err) < 0)
            return -1;
        return replicaset_record_set_grant(to, &g, err);
    }
    if (gpus_pool_realloc(a->gpu_pool, &held->grant, &req, to->name, &g, err) < 0)
        return -1;
    *swapped = true;
    return replicaset_record_set_grant(to, &g, err);
}

int replicaset_alloc_next(app *a, const replicaset_record *held, replicaset_record *to,
                          bool *swapped, gb_err *err)
{
    if (replicaset_alloc_cpus_check(a, &to->spec, err) < 0)
        return -1;
    if (replicaset_alloc_next_gpus(a, held, to, swapped, err) < 0)
        return -1;
    if (replicaset_alloc_next_ports(a, held, to, err) < 0 ||
        replicaset_alloc_next_cpus(a, held, to, err) < 0) {
        if (*swapped)
            replicaset_alloc_swap_back(a, to, held);
        else
            replicaset_alloc_give_back_except(a, to, held);
        replicaset_record_clear_holdings(to);
        return -1;
    }
    return 0;
}

static bool replicaset_has_port(const replicaset_record *r, uint16_t port)
{
    for (size_t i = 0; i < r->nports; i++)
        if (r->ports[i].host_port == port)
            return true;
    return false;
}

int replicaset_alloc_union(const replicaset_record *x, const replicaset_record *y, bool swapped,
                           replicaset_record *out, gb_err *err)
{
    /* Swapped: the pool holds only y's; otherwise both are whole cards (or
     * one side holds none), each card once. */
    _cleanup_(gpus_grant_free)
        gpus_grant g = {.cards = xcalloc(x->grant.n + y->grant.n + 1, sizeof(gpus_grant_card))};
    free(out->ports);
    out->ports = xcalloc(x->nports + y->nports + 1, sizeof(*out->ports));
    out->nports = 0;
    const gpus_grant *both[] = {swapped ? &y->grant : &x->grant, &y->grant};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < both[k]->n; i++)
            if (!replicaset_grant_has(&g, both[k]->cards[i].uuid))
                g.cards[g.n++] = both[k]->cards[i];
    const replicaset_record *recs[] = {x, y};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < recs[k]->nports; i++)
            if (!replicaset_has_port(out, recs[k]->ports[i].host_port))
                out->ports[out->nports++] = recs[k]->ports[i];
    free(out->cpuset);
    out->cpuset = xcalloc(x->ncpuset + y->ncpuset + 1, sizeof(int));
    out->ncpuset = 0;
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < recs[k]->ncpuset; i++)
            if (!replicaset_has_cpu(out, recs[k]->cpuset[i]))
                out->cpuset[out->ncpuset++] = recs[k]->cpuset[i];
    qsort(out->cpuset, out->ncpuset, sizeof(int), replicaset_cmp_int);
    return replicaset_record_set_grant(out, &g, err);
}

void replicaset_alloc_give_back_except(app *a, const replicaset_record *held,
                                       const replicaset_record *keep)
{
    _cleanup_free_ gpus_grant_card *cards = xcalloc(held->grant.n + 1, sizeof(*cards));
    _cleanup_free_ uint16_t *ports = xcalloc(held->nports + 1, sizeof(*ports));
    if (!cards || !ports)
        return;
    gpus_grant g = {.cards = cards};
    for (size_t i = 0; i < held->grant.n; i++)
        if (!replicaset_grant_has(&keep->grant, held->grant.cards[i].uuid))
            g.cards[g.n++] = held->grant.cards[i];
    size_t np = 0;
    for (size_t i = 0; i < held->nports; i++)
        if (!replicaset_has_port(keep, held->ports[i].host_port))
            ports[np++] = held->ports[i].host_port;
    if (g.n)
        gpus_pool_release_grant(a->gpu_pool, &g, held->name);
    if (np)
        ports_pool_release(a->ports, ports, np);
    for (size_t i = 0; i < held->ncpuset; i++)
        if (!replicaset_has_cpu(keep, held->cpuset[i]))
            cpus_pool_release(a->cpus, &held->cpuset[i], 1, held->name);
}

void replicaset_alloc_swap_back(app *a, const replicaset_record *to, const replicaset_record *from)
{
    /* The old container ran on from's grant all along: the store's word is
     * taken back as it was, not decided again. */
    gpus_pool_release_grant(a->gpu_pool, &to->grant, to->name);
    gb_err e = GB_ERR_INIT;
    if (from->grant.n && gpus_pool_take_grant(a->gpu_pool, &from->grant, from->name, &e) < 0)
        log_error("replica set %s: could not take its GPUs back after an undone change: %s",
                  from->name, e.msg);
    _cleanup_free_ uint16_t *ports = xcalloc(to->nports + 1, sizeof(*ports));
    size_t np = 0;
    for (size_t i = 0; ports && i < to->nports; i++)
        if (!replicaset_has_port(from, to->ports[i].host_port))
            ports[np++] = to->ports[i].host_port;
    if (np)
        ports_pool_release(a->ports, ports, np);
    for (size_t i = 0; i < to->ncpuset; i++)
        if (!replicaset_has_cpu(from, to->cpuset[i]))
            cpus_pool_release(a->cpus, &to->cpuset[i], 1, to->name);
}

int replicaset_alloc_retake_last(app *a, replicaset_record *r, gb_err *err)
{
    /* The same container runs again only with what it was made with: a
     * record that does not say (stopped by a gpuboxd before lastGpus) goes
     * the way of other cards. */
    size_t want = r->spec.ngpu_uuids ? r->spec.ngpu_uuids : (size_t)r->spec.gpu_count;
    if (r->nlast_gpus != want || r->nlast_ports != r->spec.nports ||
        r->nlast_cpuset != (size_t)r->spec.cpu_count)
        return err_set(err, ERR_CONFLICT,
                       "the cards and ports %s held before it stopped are not "
                       "all recorded",
                       r->name);
    _cleanup_free_ const char **pins = xcalloc(r->nlast_gpus + 1, sizeof(*pins));
    _cleanup_free_ uint16_t *ports = xcalloc(r->nlast_ports + 1, sizeof(*ports));
    _cleanup_free_ replicaset_held_port *held = xcalloc(r->nlast_ports + 1, sizeof(*held));
    for (size_t i = 0; i < r->nlast_gpus; i++)
        pins[i] = r->last_gpus[i];
    for (size_t i = 0; i < r->nlast_ports; i++)
        ports[i] = r->last_ports[i].host_port;
    /* The spec's request, on exactly the cards it had: a share is judged
     * again (the card may have filled up), not taken on the record's word. */
    gpus_request req;
    replicaset_spec_gpu_request(&r->spec, &req);
    req.pin_uuids = pins;
    req.npin = req.count = r->nlast_gpus;
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    if (r->nlast_gpus && gpus_pool_alloc(a->gpu_pool, &req, r->name, &g, err) < 0)
        return -1;
    if (r->nlast_ports && ports_pool_take(a->ports, ports, r->nlast_ports, true, err) < 0) {
        gpus_pool_release_grant(a->gpu_pool, &g, r->name);
        return -1;
    }
    /* The container was made with this cpuset: the same cores or none. */
    if (r->nlast_cpuset &&
        cpus_pool_take(a->cpus, r->last_cpuset, r->nlast_cpuset, r->name, false, err) < 0) {
        ports_pool_release(a->ports, ports, r->nlast_ports);
        gpus_pool_release_grant(a->gpu_pool, &g, r->name);
        return -1;
    }
    if (replicaset_record_set_grant(r, &g, err) < 0) {
        ports_pool_release(a->ports, ports, r->nlast_ports);
        cpus_pool_release(a->cpus, r->last_cpuset, r->nlast_cpuset, r->name);
        return -1;
    }
    free(r->cpuset);
    r->cpuset = xcalloc(r->nlast_cpuset + 1, sizeof(int));
    if (r->nlast_cpuset)
        memcpy(r->cpuset, r->last_cpuset, r->nlast_cpuset * sizeof(int));
    r->ncpuset = r->nlast_cpuset;
    if (r->nlast_ports)
        memcpy(held, r->last_ports, r->nlast_ports * sizeof(*held));
    free(r->ports);
    r->ports = steal_ptr(&held);
    r->nports = r->nlast_ports;
    return 0;
}

int replicaset_alloc_take_preferring_last(app *a, replicaset_record *r, gb_err *err)
{
    /* The last host ports that are still free are taken first and then
     * kept by replicaset_alloc_next_ports like a patch keeps its ports. */
    replicaset_record pref = {0};
    memcpy(pref.name, r->name, sizeof(pref.name));
    _cleanup_free_ replicaset_held_port *ports = xcalloc(r->nlast_ports + 1, sizeof(*ports));
    for (size_t i = 0; i < r->nlast_ports; i++) {
        gb_err ignored = GB_ERR_INIT;
        if (ports_pool_take(a->ports, &r->last_ports[i].host_port, 1, true, &ignored) == 0)
            ports[pref.nports++] = r->last_ports[i];
    }
    pref.ports = ports;
    gpus_request req;
    replicaset_spec_gpu_request(&r->spec, &req);
    _cleanup_(gpus_grant_free) gpus_grant g = {0};
    int rc = replicaset_alloc_cpus_check(a, &r->spec, err);
    if (rc == 0)
        rc = gpus_pool_alloc(a->gpu_pool, &req, r->name, &g, err);
    if (rc == 0 && (rc = replicaset_record_set_grant(r, &g, err)) == 0 &&
        ((rc = replicaset_alloc_next_ports(a, &pref, r, err)) < 0 ||
         (rc = replicaset_alloc_next_cpus(a, NULL, r, err)) < 0)) {
        replicaset_alloc_give_back(a, r);
        replicaset_record_clear_holdings(r);
    }
    /* What was taken for preference and not kept goes back (all of it on failure). */
    replicaset_record none = {0};
    replicaset_alloc_give_back_except(a, &pref, rc == 0 ? r : &none);
    return rc;
}
