/*
 * placement_record.c - reading a node's capacity record (the format is in
 * placement.h) into a placement_node.
 *
 * A record comes from another process, possibly of another version, so it
 * is checked field by field and nothing in it is trusted to be in range:
 * numbers are bounded (PLACEMENT_MIB_MAX keeps the sums placement_rank
 * makes over a node's cards far from overflowing), strings must fit their
 * arrays, and the record must name the node whose key it was read from. A
 * bad record gives a node marked unreadable, never a crash or a guess: the
 * refusal then names it.
 */
#include "util/xalloc.h"
#include "sched/placement.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/json.h"

/* 2^32 MiB (4 PiB) a card: 1024 cards of it sum to 2^42, far below 2^64. */
#define PLACEMENT_MIB_MAX (UINT64_C(1) << 32)

/* obj[field] as an integer in [0, max]; where names obj in messages. */
static int record_uint(const json_t *obj, const char *where, const char *field, uint64_t max,
                       uint64_t *out, gb_err *err)
{
    long long v = 0;
    if (json_field_int(obj, where, field, &v, true, err) < 0)
        return -1;
    if (v < 0 || (unsigned long long)v > max)
        return err_set(err, ERR_INVALID_PARAMS,
                       "field '%s%s%s' must be between 0 and %llu, got %lld", where ? where : "",
                       where ? "." : "", field, (unsigned long long)max, v);
    *out = (uint64_t)v;
    return 0;
}

static int record_unsigned(const json_t *obj, const char *where, const char *field, unsigned *out,
                           gb_err *err)
{
    uint64_t v = 0;
    if (record_uint(obj, where, field, UINT_MAX, &v, err) < 0)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* obj[field] as a string copied into buf (size bytes, NUL included). */
static int record_string(const json_t *obj, const char *where, const char *field, char *buf,
                         size_t size, gb_err *err)
{
    const char *s = NULL;
    if (json_field_string(obj, where, field, &s, true, err) < 0)
        return -1;
    if (strlen(s) >= size)
        return err_set(err, ERR_INVALID_PARAMS, "field '%s.%s' is longer than %zu bytes", where,
                       field, size - 1);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

/* replicas.total: at most what a node's settings allow, which also keeps
 * memoryMiB x total far from overflowing. */
static int record_replicas(const json_t *replicas, const char *where, unsigned *out, gb_err *err)
{
    uint64_t v = 0;
    if (record_uint(replicas, where, "total", GPUS_TIMESLICE_REPLICAS_MAX, &v, err) < 0)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int record_mode(const json_t *dev, const char *where, enum gpus_mode *out, gb_err *err)
{
    static const enum gpus_mode modes[] = {GPUS_MODE_FREE, GPUS_MODE_WHOLE, GPUS_MODE_MEMORY,
                                           GPUS_MODE_TIMESLICE};
    const char *s = NULL;
    if (json_field_string(dev, where, "mode", &s, true, err) < 0)
        return -1;
    for (size_t i = 0; i < ARRAY_SIZE(modes); i++)
        if (strcmp(s, gpus_mode_name(modes[i])) == 0) {
            *out = modes[i];
            return 0;
        }
    return err_set(err, ERR_INVALID_PARAMS,
                   "field '%s.mode' must be free, whole, memory or timeslice, got '%.32s'", where,
                   s);
}

/* devices[i] into *c. */
static int record_card(const json_t *dev, size_t i, placement_card *c, gb_err *err)
{
    char where[32];
    snprintf(where, sizeof(where), "devices[%zu]", i);
    if (!json_is_object(dev))
        return err_set(err, ERR_INVALID_PARAMS, "%s must be an object, got %s", where,
                       json_type_name(dev));
    long long index = (long long)i;
    json_t *replicas = NULL;
    char rwhere[48];
    snprintf(rwhere, sizeof(rwhere), "%s.replicas", where);
    if (record_string(dev, where, "uuid", c->uuid, sizeof(c->uuid), err) < 0 ||
        json_field_int(dev, where, "index", &index, false, err) < 0 ||
        record_string(dev, where, "model", c->model, sizeof(c->model), err) < 0 ||
        record_uint(dev, where, "memoryMiB", PLACEMENT_MIB_MAX, &c->memory_mib, err) < 0 ||
        record_mode(dev, where, &c->mode, err) < 0 ||
        record_uint(dev, where, "freeMemoryMiB", PLACEMENT_MIB_MAX, &c->free_memory_mib, err) < 0 ||
        record_unsigned(dev, where, "tenants", &c->tenants, err) < 0 ||
        record_unsigned(dev, where, "maxTenants", &c->max_tenants, err) < 0 ||
        json_field_object(dev, where, "replicas", &replicas, true, err) < 0 ||
        record_replicas(replicas, rwhere, &c->replicas_total, err) < 0 ||
        record_unsigned(replicas, rwhere, "used", &c->replicas_used, err) < 0 ||
        json_field_bool(dev, where, "excluded", &c->excluded, true, err) < 0 ||
        json_field_bool(dev, where, "shareable", &c->shareable, true, err) < 0 ||
        json_field_bool(dev, where, "healthy", &c->healthy, true, err) < 0)
        return -1;
    if (index < INT_MIN || index > INT_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "field '%s.index' is out of range", where);
    c->index = (int)index;
    c->schedulable = c->healthy && !c->excluded;
    if (json_field_bool(dev, where, "schedulable", &c->schedulable, false, err) < 0)
        return -1;
    if (c->replicas_used > c->replicas_total)
        return err_set(err, ERR_INVALID_PARAMS, "field '%s.used' (%u) exceeds total (%u)", rwhere,
                       c->replicas_used, c->replicas_total);
    return 0;
}

/* The record's fields into n (name already set); -1 with err unprefixed. */
static int record_read(const char *text, placement_node *n, gb_err *err)
{
    json_error_t jerr;
    _cleanup_json_ json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return err_set(err, ERR_INVALID_PARAMS, "not JSON: %.160s (line %d, column %d)", jerr.text,
                       jerr.line, jerr.column);
    if (!json_is_object(root))
        return err_set(err, ERR_INVALID_PARAMS, "must be an object, got %s", json_type_name(root));
    const char *node = NULL;
    long long updated = 0;
    json_t *devices = NULL, *ports = NULL, *volumes = NULL;
    if (json_field_string(root, NULL, "node", &node, true, err) < 0 ||
        json_field_int(root, NULL, "updated", &updated, true, err) < 0 ||
        json_field_object(root, NULL, "ports", &ports, true, err) < 0 ||
        record_uint(ports, "ports", "availableCount", UINT64_MAX >> 1, &n->free_ports, err) < 0 ||
        json_field_object(root, NULL, "volumes", &volumes, true, err) < 0 ||
        record_uint(volumes, "volumes", "freeBytes", UINT64_MAX >> 1, &n->volume_free_bytes, err) <
            0)
        return -1;
    if (strcmp(node, n->name) != 0)
        return err_set(err, ERR_INVALID_PARAMS, "it names node '%.64s'", node);
    n->updated_ms = updated;
    devices = json_object_get(root, "devices");
    if (!json_is_array(devices))
        return err_set(err, ERR_INVALID_PARAMS, "field 'devices' must be an array, got %s",
                       json_type_name(devices));
    size_t count = json_array_size(devices);
    if (count > PLACEMENT_CARDS_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%zu devices, more than %d", count,
                       PLACEMENT_CARDS_MAX);
    n->cards = xcalloc(count ? count : 1, sizeof(*n->cards));
    for (size_t i = 0; i < count; i++)
        if (record_card(json_array_get(devices, i), i, &n->cards[i], err) < 0)
            return -1;
    n->ncards = count;
    return 0;
}

int placement_node_parse(const char *name, const char *capacity_json, placement_node *out,
                         gb_err *err)
{
    memset(out, 0, sizeof(*out));
    out->name = xstrdup(name ? name : "");
    if (!capacity_json)
        return err_set(err, ERR_INVALID_PARAMS, "node '%.64s' has no capacity record", out->name);
    if (record_read(capacity_json, out, err) == 0) {
        out->readable = true;
        return 0;
    }
    free(out->cards);
    out->cards = NULL;
    out->ncards = 0;
    out->free_ports = out->volume_free_bytes = 0;
    out->updated_ms = 0;
    return err_prefix(err, "capacity record of node '%.64s'", out->name);
}

void placement_node_free(placement_node *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->cards);
    memset(n, 0, sizeof(*n));
}
