/*
 * docker_state.c - what Docker says of a container's state, typed, so
 * that callers never read the inspect or list JSON themselves.
 *
 * docker_container_state comes from an inspect (State.*, Id);
 * docker_container_brief from one entry of a list (its name, State and
 * gpubox's replica-set label), optionally only the containers that mount a
 * given Docker volume; docker_container_commands the command lines of the
 * processes a running container has (its top); docker_container_bind_source
 * the host path a container binds at a target.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

void docker_container_state_of(const json_t *inspect, docker_container_state *out)
{
    *out = (docker_container_state){.exists = true};
    json_t *state = json_object_get(inspect, "State");
    const char *status = json_string_value(json_object_get(state, "Status"));
    const char *id = json_string_value(json_object_get(inspect, "Id"));
    json_int_t pid = json_integer_value(json_object_get(state, "Pid"));
    out->running = json_is_true(json_object_get(state, "Running"));
    out->paused = json_is_true(json_object_get(state, "Paused"));
    out->pid = pid > 0 && pid <= INT32_MAX ? (int)pid : 0;
    snprintf(out->status, sizeof(out->status), "%s", status ? status : "");
    snprintf(out->id, sizeof(out->id), "%s", id ? id : "");
}

int docker_container_state_get(docker_client *c, const char *id_or_name,
                               docker_container_state *out, gb_err *err)
{
    *out = (docker_container_state){0};
    _cleanup_json_ json_t *info = NULL;
    if (docker_container_inspect(c, id_or_name, &info, err) < 0)
        return -1;
    docker_container_state_of(info, out);
    return 0;
}

int docker_container_bind_source(docker_client *c, const char *id_or_name, const char *target,
                                 char **source, gb_err *err)
{
    _cleanup_json_ json_t *info = NULL;
    if (docker_container_inspect(c, id_or_name, &info, err) < 0)
        return -1;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(json_object_get(info, "HostConfig"), "Mounts"), i, m)
    {
        const char *type = json_string_value(json_object_get(m, "Type"));
        const char *src = json_string_value(json_object_get(m, "Source"));
        const char *dst = json_string_value(json_object_get(m, "Target"));
        if (type && src && dst && strcmp(type, "bind") == 0 && strcmp(dst, target) == 0) {
            *source = xstrdup(src);
            return 1;
        }
    }
    return 0;
}

/* Does Docker's list entry e mount Docker volume `volume`? */
static bool docker_entry_mounts(const json_t *e, const char *volume)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(e, "Mounts"), i, m)
    {
        const char *type = json_string_value(json_object_get(m, "Type"));
        const char *name = json_string_value(json_object_get(m, "Name"));
        if (type && name && strcmp(type, "volume") == 0 && strcmp(name, volume) == 0)
            return true;
    }
    return false;
}

/* The container's own name: the first of its Names with no '/' but the
 * leading one (the others are legacy link aliases, "/web/db"), else the
 * first; without the leading '/'. NULL when it has none. */
static const char *docker_entry_name(const json_t *e)
{
    json_t *names = json_object_get(e, "Names");
    const char *first = json_string_value(json_array_get(names, 0));
    for (size_t k = 0; k < json_array_size(names); k++) {
        const char *n = json_string_value(json_array_get(names, k));
        if (n && !strchr(n + (n[0] == '/'), '/')) {
            first = n;
            break;
        }
    }
    return first && first[0] == '/' ? first + 1 : first;
}

static void docker_brief_set(docker_container_brief *b, const json_t *e)
{
    const char *name = docker_entry_name(e);
    const char *status = json_string_value(json_object_get(e, "State"));
    const char *set =
        json_string_value(json_object_get(json_object_get(e, "Labels"), DOCKER_LABEL_REPLICASET));
    b->name = name ? xstrdup(name) : NULL;
    b->status = status ? xstrdup(status) : NULL;
    b->replicaset = set ? xstrdup(set) : NULL;
}

int docker_container_list_briefs(docker_client *c, const char *label, const char *volume,
                                 docker_container_briefs *out, gb_err *err)
{
    *out = (docker_container_briefs){0};
    _cleanup_json_ json_t *list = NULL;
    if (docker_container_list(c, label, &list, err) < 0)
        return -1;
    out->items = xcalloc(json_array_size(list) + 1, sizeof(*out->items));
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (volume && !docker_entry_mounts(e, volume))
            continue;
        docker_brief_set(&out->items[out->n++], e);
    }
    return 0;
}

void docker_container_briefs_free(docker_container_briefs *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].name);
        free(l->items[i].status);
        free(l->items[i].replicaset);
    }
    free(l->items);
    *l = (docker_container_briefs){0};
}

int docker_container_commands(docker_client *c, const char *id, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = docker_container_path(id, "/top", err);
    if (!path)
        return -1;
    _cleanup_json_ json_t *top = NULL;
    if (docker_get(c, path, &top, err, "listing the processes of container '%s'", id) < 0)
        return -1;
    /* {"Titles": ["UID", "PID", ..., "CMD"], "Processes": [[...], ...]} */
    size_t column = SIZE_MAX, i;
    json_t *v;
    json_array_foreach(json_object_get(top, "Titles"), i, v)
    {
        const char *title = json_string_value(v);
        if (title && (strcmp(title, "CMD") == 0 || strcmp(title, "COMMAND") == 0))
            column = i;
    }
    if (column == SIZE_MAX)
        return err_set(err, ERR_INTERNAL,
                       "listing the processes of container '%s': Docker's answer has no CMD column",
                       id);
    json_t *list = json_array();
    json_array_foreach(json_object_get(top, "Processes"), i, v)
    {
        const char *cmd = json_string_value(json_array_get(v, column));
        if (cmd)
            json_array_append_new(list, json_string(cmd));
    }
    *out = list;
    return 0;
}
