/*
 * gpus_grant.c - a grant as the store keeps it (JSON in the replica-set
 * record) and as the container sees it (environment variables and the
 * /etc/gpubox/gpu.env file). Pure functions: no pool, no lock.
 *
 * Record form, cards in container order:
 *   whole cards  {"gpus": ["GPU-a", "GPU-b"]}
 *   shares       {"gpus": ["GPU-a"], "gpuShares": [{"uuid": "GPU-a",
 *                 "memoryMiB": 8192, "mode": "memory"}]}
 *                 time-slice entries add "replica": <slot>.
 * "gpus" keeps the form records have always had, so whatever reads it
 * (the API's info.gpus, the attach modes) sees every card either way.
 */
#include "util/xalloc.h"
#include "sched/gpus.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/json.h"

/* The grant's one mode; FREE for an empty grant, -1 when the cards mix modes. */
static int gpus_grant_mode(const gpus_grant *g, gb_err *err)
{
    if (!g || g->n == 0)
        return GPUS_MODE_FREE;
    enum gpus_mode mode = g->cards[0].mode;
    for (size_t i = 0; i < g->n; i++) {
        enum gpus_mode m = g->cards[i].mode;
        if (m != mode ||
            (m != GPUS_MODE_WHOLE && m != GPUS_MODE_MEMORY && m != GPUS_MODE_TIMESLICE))
            return err_set(err, ERR_INVALID_PARAMS,
                           "a GPU grant holds cards of one mode (whole, memory or timeslice); "
                           "card %zu (%s) is %s, card 0 is %s",
                           i, g->cards[i].uuid, gpus_mode_name(m), gpus_mode_name(mode));
    }
    return (int)mode;
}

static json_t *gpus_share_json(const gpus_grant_card *c)
{
    json_t *o = json_pack("{s:s, s:I, s:s}", "uuid", c->uuid, "memoryMiB",
                          (json_int_t)c->memory_mib, "mode", gpus_mode_name(c->mode));
    if (o && c->mode == GPUS_MODE_TIMESLICE)
        json_object_set_new(o, "replica", json_integer(c->replica));
    return o;
}

int gpus_grant_to_json(const gpus_grant *g, json_t *record, gb_err *err)
{
    int mode = gpus_grant_mode(g, err);
    if (mode < 0)
        return -1;
    if (!json_is_object(record))
        return err_set(err, ERR_INTERNAL, "a GPU grant is written into a JSON object");
    _cleanup_json_ json_t *uuids = json_array();
    _cleanup_json_ json_t *shares = json_array();
    for (size_t i = 0; g && i < g->n; i++) {
        /* json_string and gpus_share_json refuse a UUID that is not UTF-8 */
        if (json_array_append_new(uuids, json_string(g->cards[i].uuid)) < 0 ||
            (mode != GPUS_MODE_WHOLE &&
             json_array_append_new(shares, gpus_share_json(&g->cards[i])) < 0))
            return err_set(err, ERR_INTERNAL, "GPU grant card %zu: the UUID is not UTF-8", i);
    }
    json_object_set(record, "gpus", uuids);
    if (mode == GPUS_MODE_WHOLE || mode == GPUS_MODE_FREE)
        json_object_del(record, "gpuShares");
    else
        json_object_set(record, "gpuShares", shares);
    return 0;
}

static int gpus_uuid_ok(const char *uuid, const char *where, const gpus_grant *g, size_t upto,
                        gb_err *err)
{
    if (!*uuid || strlen(uuid) >= GPU_UUID_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%s is not a GPU UUID", where);
    for (size_t j = 0; j < upto; j++)
        if (strcmp(g->cards[j].uuid, uuid) == 0)
            return err_set(err, ERR_INVALID_PARAMS, "%s: GPU %s is listed twice", where, uuid);
    return 0;
}

/* gpuShares[i] into card i. */
static int gpus_share_from_json(const json_t *entry, size_t i, gpus_grant *g, gb_err *err)
{
    char where[32];
    snprintf(where, sizeof(where), "gpuShares[%zu]", i);
    if (!json_is_object(entry))
        return err_set(err, ERR_INVALID_PARAMS, "%s must be an object, got %s", where,
                       json_type_name(entry));
    const char *uuid = NULL, *mode = NULL;
    long long memory = 0, replica = -1;
    if (json_field_string(entry, where, "uuid", &uuid, true, err) < 0 ||
        json_field_int(entry, where, "memoryMiB", &memory, true, err) < 0 ||
        json_field_string(entry, where, "mode", &mode, true, err) < 0)
        return -1;
    if (gpus_uuid_ok(uuid, where, g, i, err) < 0)
        return -1;
    gpus_grant_card *c = &g->cards[i];
    snprintf(c->uuid, sizeof(c->uuid), "%s", uuid);
    if (memory <= 0)
        return err_set(err, ERR_INVALID_PARAMS, "%s.memoryMiB must be positive, got %lld", where,
                       memory);
    c->memory_mib = (uint64_t)memory;
    if (strcmp(mode, "memory") == 0) {
        c->mode = GPUS_MODE_MEMORY;
        c->replica = -1;
        return 0;
    }
    if (strcmp(mode, "timeslice") != 0)
        return err_set(err, ERR_INVALID_PARAMS, "%s.mode must be memory or timeslice, got '%.32s'",
                       where, mode);
    c->mode = GPUS_MODE_TIMESLICE;
    if (json_field_int(entry, where, "replica", &replica, true, err) < 0)
        return -1;
    if (replica < 0 || replica >= GPUS_TIMESLICE_REPLICAS_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%s.replica must be 0..%d, got %lld", where,
                       GPUS_TIMESLICE_REPLICAS_MAX - 1, replica);
    c->replica = (int)replica;
    return 0;
}

/* Shares: each entry, then "gpus" (if any) must name the same cards in the same order. */
static int gpus_shares_from_json(const json_t *shares, const char **uuids, size_t nuuids,
                                 bool have_uuids, gpus_grant *g, gb_err *err)
{
    size_t n = json_array_size(shares);
    for (size_t i = 0; i < n; i++)
        if (gpus_share_from_json(json_array_get(shares, i), i, g, err) < 0)
            return -1;
    g->n = n;
    if (gpus_grant_mode(g, err) < 0)
        return -1;
    if (!have_uuids)
        return 0;
    bool same = nuuids == n;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(uuids[i], g->cards[i].uuid) == 0;
    if (!same)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpus and gpuShares must list the same GPUs in the same order");
    return 0;
}

int gpus_grant_from_json(const json_t *record, gpus_grant *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(record))
        return err_set(err, ERR_INVALID_PARAMS, "a GPU grant is read from a JSON object, got %s",
                       json_type_name(record));
    _cleanup_free_ const char **uuids = NULL;
    size_t nuuids = 0;
    int have_uuids = json_field_string_array(record, NULL, "gpus", &uuids, &nuuids, false, err);
    if (have_uuids < 0)
        return -1;
    json_t *shares = json_object_get(record, "gpuShares");
    if (shares && !json_is_null(shares) && !json_is_array(shares))
        return err_set(err, ERR_WRONG_TYPE, "field 'gpuShares' must be an array, got %s",
                       json_type_name(shares));
    size_t nshares = json_array_size(shares);
    size_t n = nshares ? nshares : nuuids;
    _cleanup_(gpus_grant_free) gpus_grant g = {.cards = xcalloc(n ? n : 1, sizeof(*g.cards))};
    if (nshares) {
        if (gpus_shares_from_json(shares, uuids, nuuids, have_uuids > 0, &g, err) < 0)
            return -1;
    } else {
        for (size_t i = 0; i < nuuids; i++) {
            char where[32];
            snprintf(where, sizeof(where), "gpus[%zu]", i);
            if (gpus_uuid_ok(uuids[i], where, &g, i, err) < 0)
                return -1;
            snprintf(g.cards[i].uuid, sizeof(g.cards[i].uuid), "%s", uuids[i]);
            g.cards[i].mode = GPUS_MODE_WHOLE;
            g.cards[i].replica = -1;
            g.n = i + 1;
        }
    }
    *out = g;
    g = (gpus_grant){0};
    return 0;
}

void gpus_grant_env_free(char **env, size_t n)
{
    for (size_t i = 0; env && i < n; i++)
        free(env[i]);
    free(env);
}

/* "8192" when every card has the same, else "4096,20480" in container order. */
static char *gpus_memory_value(const gpus_grant *g, bool *differ)
{
    *differ = false;
    for (size_t i = 1; i < g->n; i++)
        *differ = *differ || g->cards[i].memory_mib != g->cards[0].memory_mib;
    size_t count = *differ ? g->n : 1;
    /* each entry: a comma and at most 20 digits */
    char *text = xmalloc(count * 21 + 1), *at = text;
    *at = '\0';
    for (size_t i = 0; i < count; i++)
        at += sprintf(at, "%s%llu", i ? "," : "", (unsigned long long)g->cards[i].memory_mib);
    return text;
}

/* Append one "KEY=VALUE" line. */
static void gpus_env_add(char **lines, size_t *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void gpus_env_add(char **lines, size_t *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lines[(*k)++] = xvasprintf(fmt, ap);
    va_end(ap);
}

int gpus_grant_env(const gpus_grant *g, char ***env, size_t *n, gb_err *err)
{
    *env = NULL;
    *n = 0;
    int mode = gpus_grant_mode(g, err);
    if (mode < 0)
        return -1;
    size_t cards = mode == GPUS_MODE_FREE ? 0 : g->n;
    /* a limit per card, then order, memory, share, and a NULL at the end */
    char **lines = xcalloc(cards + 4, sizeof(*lines));
    size_t k = 0;
    if (mode == GPUS_MODE_WHOLE)
        gpus_env_add(lines, &k, "GPUBOX_GPU_SHARE=whole");
    if (mode == GPUS_MODE_MEMORY || mode == GPUS_MODE_TIMESLICE) {
        for (size_t i = 0; i < cards; i++)
            gpus_env_add(lines, &k, "CUDA_DEVICE_MEMORY_LIMIT_%zu=%llum", i,
                         (unsigned long long)g->cards[i].memory_mib);
        bool differ = false;
        _cleanup_free_ char *memory = gpus_memory_value(g, &differ);
        if (differ)
            gpus_env_add(lines, &k, "CUDA_DEVICE_ORDER=PCI_BUS_ID");
        gpus_env_add(lines, &k, "GPUBOX_GPU_MEMORY_MIB=%s", memory);
        gpus_env_add(lines, &k, "GPUBOX_GPU_SHARE=%s", gpus_mode_name(mode));
    }
    *env = lines;
    *n = k;
    return 0;
}

int gpus_grant_env_file(const gpus_grant *g, char **text, gb_err *err)
{
    *text = NULL;
    char **env = NULL;
    size_t n = 0;
    if (gpus_grant_env(g, &env, &n, err) < 0)
        return -1;
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(env[i]) + 1;
    char *out = xmalloc(len), *at = out;
    for (size_t i = 0; i < n; i++)
        at += sprintf(at, "%s\n", env[i]);
    *at = '\0';
    gpus_grant_env_free(env, n);
    *text = out;
    return 0;
}
