/*
 * network.c - each user's sets on a Docker network of that user's own
 * (DESIGN.md section 10, docs/security.md "Networks between users").
 *
 * The network of owner is the bridge network "gpubox-u-<owner>" labelled
 * gpubox.network=<owner> and gpubox.owner=<owner>. Docker gives each
 * bridge network its own Linux bridge and, with its iptables rules on (the
 * default), drops what one bridge sends to another: a user's containers
 * reach each other (by address, by container name and by set name, an
 * alias on the network), never another user's. Published host ports are
 * unaffected.
 *
 * Its life:
 *   - made (idempotently) before a version's container is made, and
 *     before an existing container is started again, so a network someone
 *     removed is made again; a container whose network was made again (a
 *     new id), or that sits on another network (Docker's default bridge,
 *     from a gpuboxd before networks), is moved onto it first: only while
 *     it is not running, as Docker's start needs;
 *   - removed when the owner's last set is deleted ("in use" is only
 *     logged: it goes at the next start-up);
 *   - at start-up: made for every owner with sets, removed for the rest.
 * A network of that name that lacks the label is someone else's: gpubox
 * refuses to use it rather than share it.
 *
 * Docker's CheckDuplicate is not atomic: two creates of one name at once
 * can both succeed, and Docker then refuses the name as ambiguous
 * everywhere. One gpuboxd makes its networks one at a time (a mutex);
 * for two on one dockerd (test runs), whoever meets the ambiguity keeps
 * one of them (the one containers use, else the oldest) and removes the
 * others: while both exist no container can join either by name.
 */
#include "util/xalloc.h"
#include "service/replicaset/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/log.h"

#define RS_NETWORK_PREFIX "gpubox-u-"

/* This process's network creates, one at a time. */
static pthread_mutex_t replicaset_network_mutex = PTHREAD_MUTEX_INITIALIZER;

static const char *replicaset_network_owner(const char *owner)
{
    return owner && *owner ? owner : USER_ANONYMOUS;
}

void replicaset_network_name(const char *owner, char *buf, size_t size)
{
    owner = replicaset_network_owner(owner);
    /* User names may hold '@', which Docker's other names refuse: it
     * becomes '_', and the name gets a hash of the owner so that "a@b"
     * and "a_b" stay apart (the label tells them apart anyway). */
    char safe[USER_NAME_MAX + 1];
    size_t n = 0;
    bool changed = false;
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const char *p = owner; *p && n < sizeof(safe) - 1; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-';
        safe[n++] = ok ? *p : '_';
        changed = changed || !ok;
        hash = (hash ^ (unsigned char)*p) * 16777619u;
    }
    safe[n] = '\0';
    if (changed)
        snprintf(buf, size, RS_NETWORK_PREFIX "%s-%08x", safe, hash);
    else
        snprintf(buf, size, RS_NETWORK_PREFIX "%s", safe);
}

/* obj[key] as a string; "" when it is not one. */
static const char *replicaset_network_str(const json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v ? v : "";
}

/* Several networks named name (made at once): keep the one with the most
 * running containers, else the oldest, and remove the rest of owner's. */
static void replicaset_network_dedupe(app *a, const char *owner, const char *name)
{
    char label[sizeof(DOCKER_LABEL_NETWORK) + USER_NAME_MAX + 1];
    snprintf(label, sizeof(label), "%s=%s", DOCKER_LABEL_NETWORK, owner);
    _cleanup_json_ json_t *list = NULL;
    gb_err e = GB_ERR_INIT;
    if (docker_network_list(a->docker, label, &list, &e) < 0) {
        log_warn("networks: %s is ambiguous, and listing it failed: %s", name, e.msg);
        return;
    }
    _cleanup_json_ json_t *same = json_array(); /* inspects of those named name */
    size_t i, keep = 0;
    json_t *n;
    json_array_foreach(list, i, n)
    {
        const char *id = json_string_value(json_object_get(n, "Id"));
        json_t *full = NULL;
        if (id && strcmp(replicaset_network_str(n, "Name"), name) == 0 &&
            docker_network_inspect(a->docker, id, &full, &e) == 0)
            json_array_append_new(same, full);
    }
    json_array_foreach(same, i, n)
    {
        json_t *k = json_array_get(same, keep);
        size_t users = json_object_size(json_object_get(n, "Containers"));
        size_t kept_users = json_object_size(json_object_get(k, "Containers"));
        const char *created = replicaset_network_str(n, "Created");
        const char *kept_created = replicaset_network_str(k, "Created");
        if (users > kept_users || (users == kept_users && strcmp(created, kept_created) < 0))
            keep = i;
    }
    json_array_foreach(same, i, n)
    {
        const char *id = json_string_value(json_object_get(n, "Id"));
        if (i == keep || !id)
            continue;
        if (docker_network_remove(a->docker, id, &e) == 0)
            log_warn("networks: removed a second network named %s (%.12s), made at the same time",
                     name, id);
        else
            log_warn("networks: two networks are named %s; cannot remove %.12s: %s", name, id,
                     e.msg);
    }
}

/* The network's id when it is owner's; ERR_CONFLICT when a network of
 * that name is someone else's; ERR_NOT_FOUND when there is none. */
static int replicaset_network_find(app *a, const char *owner, const char *name, char *id,
                                   size_t id_size, gb_err *err)
{
    _cleanup_json_ json_t *net = NULL;
    if (docker_network_inspect(a->docker, name, &net, err) < 0) {
        if (!strstr(err->msg, "ambiguous"))
            return -1;
        replicaset_network_dedupe(a, owner, name);
        *err = (gb_err)GB_ERR_INIT;
        if (docker_network_inspect(a->docker, name, &net, err) < 0)
            return -1;
    }
    const char *label =
        json_string_value(json_object_get(json_object_get(net, "Labels"), DOCKER_LABEL_NETWORK));
    if (!label || strcmp(label, owner) != 0)
        return err_set(err, ERR_CONFLICT,
                       "Docker network '%s' exists but is not gpubox's network of user '%s' (its "
                       "label %s is '%s'); remove or rename it (docker network rm %s)",
                       name, owner, DOCKER_LABEL_NETWORK, label ? label : "", name);
    const char *got = json_string_value(json_object_get(net, "Id"));
    snprintf(id, id_size, "%s", got ? got : "");
    return 0;
}

/* replicaset_network_ensure, with the network's name and id; the mutex held. */
static int replicaset_network_ensure_locked(app *a, const char *owner, char *name, size_t name_size,
                                            char *id, size_t id_size, gb_err *err)
{
    owner = replicaset_network_owner(owner);
    replicaset_network_name(owner, name, name_size);
    for (int attempt = 0;; attempt++) {
        gb_err e = GB_ERR_INIT;
        if (replicaset_network_find(a, owner, name, id, id_size, &e) == 0)
            return 0;
        if (e.code != ERR_NOT_FOUND || attempt == 2) {
            *err = e;
            return err_prefix(err, "the network of user '%s'", owner);
        }
        _cleanup_json_ json_t *labels =
            json_pack("{s:s, s:s}", DOCKER_LABEL_NETWORK, owner, DOCKER_LABEL_OWNER, owner);
        if (!labels)
            return err_set(err, ERR_INTERNAL, "the network of user '%s': not UTF-8", owner);
        _cleanup_free_ char *made = NULL;
        if (docker_network_create(a->docker, name, labels, &made, &e) == 0) {
            log_info("networks: made network %s for the sets of user %s", name, owner);
            snprintf(id, id_size, "%s", made);
            return 0;
        }
        if (e.code != ERR_CONFLICT) { /* else made meanwhile: look again */
            *err = e;
            return err_prefix(err, "the network of user '%s'", owner);
        }
    }
}

static int replicaset_network_ensure_id(app *a, const char *owner, char *name, size_t name_size,
                                        char *id, size_t id_size, gb_err *err)
{
    pthread_mutex_lock(&replicaset_network_mutex);
    int rc = replicaset_network_ensure_locked(a, owner, name, name_size, id, id_size, err);
    pthread_mutex_unlock(&replicaset_network_mutex);
    return rc;
}

int replicaset_network_ensure(app *a, const char *owner, char *name, size_t name_size, gb_err *err)
{
    char id[96];
    return replicaset_network_ensure_id(a, owner, name, name_size, id, sizeof(id), err);
}

/* Whether the container's networks are exactly {name: id}. */
static bool replicaset_network_only_on(const json_t *networks, const char *name, const char *id)
{
    json_t *ep = json_object_get(networks, name);
    const char *ep_id = json_string_value(json_object_get(ep, "NetworkID"));
    return json_object_size(networks) == 1 && ep_id && strcmp(ep_id, id) == 0;
}

int replicaset_network_attach(app *a, const replicaset_record *r, gb_err *err)
{
    char name[RS_NETWORK_NAME_MAX], id[96];
    if (replicaset_network_ensure_id(a, r->owner, name, sizeof(name), id, sizeof(id), err) < 0)
        return -1;
    _cleanup_json_ json_t *c = NULL;
    gb_err e = GB_ERR_INIT;
    if (docker_container_inspect(a->docker, r->container_name, &c, &e) < 0) {
        if (e.code == ERR_NOT_FOUND) /* the start says so, in its own words */
            return 0;
        *err = e;
        return -1;
    }
    json_t *networks = json_object_get(json_object_get(c, "NetworkSettings"), "Networks");
    if (replicaset_network_only_on(networks, name, id))
        return 0;
    if (json_is_true(json_object_get(json_object_get(c, "State"), "Running")))
        return 0; /* it moves at its next start: Docker moves only stopped ones */
    /* Forget every other network (for a stopped container Docker only
     * edits its config, whether or not the network still exists), then
     * join the owner's. */
    const char *other;
    json_t *ep;
    _cleanup_free_ char *was = NULL;
    json_object_foreach(networks, other, ep)
    {
        char *more = xasprintf("%s%s%s", was ? was : "", was ? ", " : "", other);
        free(was);
        was = more;
        if (docker_network_disconnect(a->docker, other, r->container_name, true, err) < 0)
            return err_prefix(err, "moving %s onto network %s", r->container_name, name);
    }
    const char *alias[] = {r->name};
    if (docker_network_connect(a->docker, name, r->container_name, alias, 1, err) < 0)
        return err_prefix(err, "moving %s onto network %s", r->container_name, name);
    log_info("replica set %s: container %s is on network %s now (it was on %s)", r->name,
             r->container_name, name, was ? was : "none");
    return 0;
}

/* Does owner have a set that is not deleted? (replicaset_record_fn) */
struct replicaset_network_owned {
    const char *owner;
    bool found;
};

static int replicaset_network_owned_each(void *ctx, replicaset_record *r, gb_err *err)
{
    (void)err;
    struct replicaset_network_owned *o = ctx;
    if (r->state != RS_STATE_DELETED && !replicaset_record_is_tombstone(r) &&
        strcmp(replicaset_network_owner(r->owner), o->owner) == 0)
        o->found = true;
    return 0;
}

/* Remove the network name (owner's; id: by its id, as two of one name
 * would be ambiguous), tolerating a running container on it. */
static void replicaset_network_remove(app *a, const char *name, const char *id, const char *owner)
{
    gb_err e = GB_ERR_INIT;
    if (docker_network_remove(a->docker, id && *id ? id : name, &e) == 0)
        log_info("networks: removed network %s: user %s has no set left", name, owner);
    else if (e.code == ERR_CONFLICT)
        log_info("networks: keeping network %s for now, a container still uses it: %s", name,
                 e.msg);
    else
        log_warn("networks: cannot remove network %s: %s", name, e.msg);
}

void replicaset_network_release(app *a, const char *owner)
{
    owner = replicaset_network_owner(owner);
    struct replicaset_network_owned o = {.owner = owner};
    gb_err e = GB_ERR_INIT;
    if (replicaset_records_each(a->store, replicaset_network_owned_each, &o, &e) < 0) {
        log_warn("networks: cannot tell whether user %s has sets left: %s", owner, e.msg);
        return;
    }
    if (o.found)
        return;
    char name[RS_NETWORK_NAME_MAX], id[96];
    replicaset_network_name(owner, name, sizeof(name));
    if (replicaset_network_find(a, owner, name, id, sizeof(id), &e) == 0)
        replicaset_network_remove(a, name, id, owner);
}

void replicaset_network_reconcile(app *a, const json_t *owners)
{
    const char *owner;
    json_t *v;
    json_object_foreach((json_t *)owners, owner, v)
    {
        char name[RS_NETWORK_NAME_MAX];
        gb_err e = GB_ERR_INIT;
        if (replicaset_network_ensure(a, owner, name, sizeof(name), &e) < 0)
            log_error("reconcile: %s; the sets of user %s cannot start until it is fixed", e.msg,
                      owner);
    }
    _cleanup_json_ json_t *nets = NULL;
    gb_err e = GB_ERR_INIT;
    if (docker_network_list(a->docker, DOCKER_LABEL_NETWORK, &nets, &e) < 0) {
        log_warn("reconcile: cannot list gpubox's networks: %s", e.msg);
        return;
    }
    size_t i;
    json_t *net;
    json_array_foreach(nets, i, net)
    {
        const char *name = json_string_value(json_object_get(net, "Name"));
        const char *who = json_string_value(
            json_object_get(json_object_get(net, "Labels"), DOCKER_LABEL_NETWORK));
        if (name && who && !json_object_get(owners, who))
            replicaset_network_remove(a, name, replicaset_network_str(net, "Id"), who);
    }
}
