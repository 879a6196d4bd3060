/*
 * compat.c - a replica set's version as gpu-docker-api keeps it, so its
 * clients find the fields they read: GET /replicaSet/{name} answers its
 * record under "info" (and "Info", the key its router really sends), and
 * each history entry carries it as "status":
 *
 *   {version, createTime, config, hostConfig, networkingConfig, platform,
 *    containerName}
 *
 * config and hostConfig are the Engine API's create body for the version,
 * built from the record by the same code that makes the container
 * (rs_run_spec_base, docker_run_spec_view), with the user's binds as
 * "src:dest[:ro]" strings as gpu-docker-api shows them. Nothing here asks
 * Docker or writes anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"
#include "service/replicaset/internal.h"
#include "util/cleanup.h"
#include "util/log.h"

json_t *rs_compat_version(app *a, const rs_record *r)
{
    _cleanup_(rs_run_spec_parts_free) rs_run_spec_parts parts = {0};
    docker_run_spec ds;
    gb_err e = GB_ERR_INIT;
    const rs_spec *s = &r->spec;
    _cleanup_free_ char **binds = xcalloc(s->nbinds + 1, sizeof(*binds));
    json_t *view = NULL;
    if (rs_run_spec_base(a, r, &parts, &ds, &e) == 0) {
        for (size_t n = 0; n < s->nbinds; n++) {
            const rs_bind *b = &s->binds[n];
            binds[n] = xasprintf("%s:%s%s", b->src, b->dest, b->read_only ? ":ro" : "");
        }
        docker_run_spec_view(&ds, (const char *const *)binds, s->nbinds, &view, &e);
        for (size_t i = 0; i < s->nbinds; i++)
            free(binds[i]);
    }
    if (!view) {
        log_warn("replica set %s: version %d cannot be shown as gpu-docker-api's record: %s",
                 r->name, r->version, e.msg);
        return NULL;
    }
    json_object_set_new(view, "version", json_integer(r->version));
    json_object_set_new(view, "createTime", json_string(r->update_time));
    json_object_set_new(view, "containerName", json_string(r->container_name));
    return view;
}

json_t *rs_compat_history_status(app *a, const char *name, const json_t *entry)
{
    /* An entry is a record of its version but for the fields below. */
    _cleanup_json_ json_t *j = json_deep_copy(entry);
    if (!j)
        return NULL;
    json_t *time = json_object_get(j, "createTime");
    json_object_set_new(j, "name", json_string(name));
    json_object_set_new(j, "state", json_string("running"));
    json_object_set_new(j, "updateTime", time ? json_incref(time) : json_string(""));
    json_object_del(j, "reason");
    _cleanup_(rs_record_free) rs_record r = {0};
    gb_err e = GB_ERR_INIT;
    if (rs_record_from_json(j, &r, &e) < 0) {
        log_warn("replica set %s: a history entry cannot be shown as gpu-docker-api's record: %s",
                 name, e.msg);
        return NULL;
    }
    return rs_compat_version(a, &r);
}
