/*
 * docker_networks.c - the network calls: create, inspect, remove, list,
 * connect, disconnect.
 *
 * gpubox puts each user's containers on a bridge network of that user's
 * own (service/networks.c, docs/security.md "Networks between users"):
 * Docker gives each bridge network its own Linux bridge and, with its
 * iptables rules on (the default), drops traffic between two of them.
 * The networks carry gpubox's labels (DOCKER_LABEL_NETWORK) so the
 * start-up reconciliation can list them.
 */
#include "util/xalloc.h"
#include "docker/docker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* "/networks/<escaped name><rest>"; NULL when the name is empty (err says so). */
static char *docker_network_path(const char *name, const char *rest, gb_err *err)
{
    if (!name || !*name) {
        err_set(err, ERR_INVALID_PARAMS, "network name is empty");
        return NULL;
    }
    _cleanup_free_ char *esc = docker_escape(name, NULL);
    return xasprintf("/networks/%s%s", esc, rest);
}

/* Docker's words when every range of its default-address-pools is taken. */
static bool docker_network_pools_full(json_t *resp)
{
    const char *m = docker_message(resp);
    return strstr(m, "non-overlapping") || strstr(m, "address pool") ||
           strstr(m, "no available network");
}

int docker_network_create(docker_client *c, const char *name, json_t *labels, char **id,
                          gb_err *err)
{
    if (id)
        *id = NULL;
    if (!name || !*name)
        return err_set(err, ERR_INVALID_PARAMS, "network name is empty");
    if (labels && !json_is_object(labels))
        return err_set(err, ERR_INVALID_PARAMS, "network labels must be an object of strings");
    /* enable_icc: the containers of one network reach each other whatever
     * the daemon's --icc says; networks apart stay apart (iptables). */
    _cleanup_json_ json_t *body = json_pack(
        "{s:s, s:s, s:b, s:b, s:{s:s}}", "Name", name, "Driver", "bridge", "CheckDuplicate", true,
        "Attachable", false, "Options", "com.docker.network.bridge.enable_icc", "true");
    if (!body)
        return err_set(err, ERR_INTERNAL, "creating network: the name is not UTF-8");
    json_object_set_new(body, "Labels", labels ? json_deep_copy(labels) : json_object());
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", "/networks/create", body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "creating network '%s'", name);
    if (status != 201 && docker_network_pools_full(resp))
        return err_set(err, ERR_INTERNAL,
                       "creating network '%s': Docker has no free address range for another "
                       "network (%s); each user with sets needs one: widen default-address-pools "
                       "in Docker's daemon.json (docs/security.md, \"Networks between users\")",
                       name, docker_message(resp));
    if (status != 201)
        return docker_status_err(status, resp, err, "creating network '%s'", name);
    const char *made = json_string_value(json_object_get(resp, "Id"));
    if (!made)
        return err_set(err, ERR_INTERNAL, "creating network '%s': Docker's answer has no Id", name);
    if (id)
        *id = xstrdup(made);
    return 0;
}

int docker_network_inspect(docker_client *c, const char *name, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = docker_network_path(name, "", err);
    if (!path)
        return -1;
    return docker_get(c, path, out, err, "inspecting network '%s'", name);
}

int docker_network_remove(docker_client *c, const char *name, gb_err *err)
{
    _cleanup_free_ char *path = docker_network_path(name, "", err);
    if (!path)
        return -1;
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "DELETE", path, NULL, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "removing network '%s'", name);
    if (status == 204 || status == 200 || status == 404)
        return 0;
    if (status == 403) /* "has active endpoints": a running container is on it */
        return err_set(err, ERR_CONFLICT, "removing network '%s': %s", name, docker_message(resp));
    return docker_status_err(status, resp, err, "removing network '%s'", name);
}

int docker_network_list(docker_client *c, const char *label, json_t **out, gb_err *err)
{
    *out = NULL;
    _cleanup_free_ char *path = NULL;
    if (label && *label) {
        /* json_pack refuses a label that is not UTF-8 */
        _cleanup_json_ json_t *filters = json_pack("{s:[s]}", "label", label);
        if (!filters)
            return err_set(err, ERR_INTERNAL, "listing networks: the label is not UTF-8");
        _cleanup_free_ char *text = json_dumps(filters, JSON_COMPACT);
        _cleanup_free_ char *esc = docker_escape(text, NULL);
        path = xasprintf("/networks?filters=%s", esc);
    } else {
        path = xstrdup("/networks");
    }
    _cleanup_json_ json_t *resp = NULL;
    if (docker_get(c, path, &resp, err, "listing networks labelled '%s'", label ? label : "") < 0)
        return -1;
    if (json_is_null(resp))
        *out = json_array();
    else if (json_is_array(resp))
        *out = steal_ptr(&resp);
    else
        return err_set(err, ERR_INTERNAL, "listing networks: Docker's answer has no list");
    return 0;
}

int docker_network_connect(docker_client *c, const char *network, const char *container,
                           const char *const *aliases, size_t naliases, gb_err *err)
{
    _cleanup_free_ char *path = docker_network_path(network, "/connect", err);
    if (!path)
        return -1;
    if (!container || !*container)
        return err_set(err, ERR_INVALID_PARAMS, "container name or id is empty");
    json_t *alias_list = json_array();
    for (size_t i = 0; i < naliases; i++)
        json_array_append_new(alias_list, json_string(aliases[i]));
    _cleanup_json_ json_t *body = json_pack("{s:s, s:{s:o}}", "Container", container,
                                            "EndpointConfig", "Aliases", alias_list);
    if (!body)
        return err_set(err, ERR_INTERNAL, "connecting '%s' to network '%s': not UTF-8", container,
                       network);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "connecting '%s' to network '%s'", container, network);
    if (status == 200 || status == 204)
        return 0;
    return docker_status_err(status, resp, err, "connecting '%s' to network '%s'", container,
                             network);
}

int docker_network_disconnect(docker_client *c, const char *network, const char *container,
                              bool force, gb_err *err)
{
    _cleanup_free_ char *path = docker_network_path(network, "/disconnect", err);
    if (!path)
        return -1;
    if (!container || !*container)
        return err_set(err, ERR_INVALID_PARAMS, "container name or id is empty");
    _cleanup_json_ json_t *body = json_pack("{s:s, s:b}", "Container", container, "Force", force);
    if (!body)
        return err_set(err, ERR_INTERNAL, "disconnecting '%s' from network '%s': not UTF-8",
                       container, network);
    long status = 0;
    _cleanup_json_ json_t *resp = NULL;
    if (docker_call(c, "POST", path, body, DOCKER_TIMEOUT_S, &status, &resp, err) < 0)
        return err_prefix(err, "disconnecting '%s' from network '%s'", container, network);
    if (status == 200 || status == 204)
        return 0;
    return docker_status_err(status, resp, err, "disconnecting '%s' from network '%s'", container,
                             network);
}
