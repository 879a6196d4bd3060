/*
 * gpu_sim.c - a simulated inventory for hosts without GPUs, from a spec such
 * as "8xA100-80GB" or "2xT4-16GB,1xH100-80GB".
 *
 * Grammar: ITEM[,ITEM...], ITEM = [COUNTx]MODEL-MEMGB. COUNT defaults to 1;
 * MODEL is letters, digits, '_', '.', '-' (the memory is what follows the
 * last '-'); MEM is a whole number of GB (1024 MiB each). Cards are numbered
 * in spec order. Each UUID is a hash of the card's index and its item, so a
 * spec gives the same UUIDs on every start (the store refers to cards by
 * UUID) and appending an item keeps the earlier cards' UUIDs.
 */
#include "gpu/gpu_source.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GPU_SIM_MODEL_MAX 48
#define GPU_SIM_MEM_GB_MAX 4096

struct gpu_sim_item {
    unsigned count;
    char model[GPU_SIM_MODEL_MAX];
    unsigned mem_gb;
};

static uint64_t gpu_sim_fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* A version-4-shaped UUID ("GPU-xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx") whose
 * last four hex digits are the index, so two cards never share one. */
static void gpu_sim_uuid(const struct gpu_sim_item *item, int index, char *out, size_t len)
{
    char key[128];
    snprintf(key, sizeof(key), "gpubox-simulated:%d:%s-%uGB", index, item->model, item->mem_gb);
    uint64_t h1 = gpu_sim_fnv1a(0xcbf29ce484222325ULL, key);
    uint64_t h2 = gpu_sim_fnv1a(h1 ^ 0x9e3779b97f4a7c15ULL, key);
    snprintf(out, len, "GPU-%08x-%04x-4%03x-8%03x-%08x%04x", (unsigned)(h1 >> 32),
             (unsigned)(h1 >> 16) & 0xffff, (unsigned)h1 & 0xfff, (unsigned)(h2 >> 52) & 0xfff,
             (unsigned)h2, (unsigned)index & 0xffff);
}

/* Parse a run of decimal digits into *v (at most max); returns the end or NULL. */
static const char *gpu_sim_number(const char *s, unsigned max, unsigned *v)
{
    unsigned long n = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++) {
        n = n * 10 + (unsigned)(*p - '0');
        if (n > max)
            return NULL;
    }
    if (p == s)
        return NULL;
    *v = (unsigned)n;
    return p;
}

/* One item, already trimmed, text[0..len). Errors name the item. */
static int gpu_sim_parse_item(const char *text, size_t len, struct gpu_sim_item *item, gb_err *err)
{
    char buf[128];
    if (len == 0)
        return err_set(err, ERR_INVALID_PARAMS, "an item is empty");
    if (len >= sizeof(buf))
        return err_set(err, ERR_INVALID_PARAMS, "item '%.40s...' is too long", text);
    memcpy(buf, text, len);
    buf[len] = '\0';

    /* A leading run of digits followed by 'x' is the count. */
    const char *p = buf;
    size_t digits = strspn(buf, "0123456789");
    item->count = 1;
    if (digits > 0 && (buf[digits] == 'x' || buf[digits] == 'X')) {
        if (digits > 4 || !gpu_sim_number(buf, 9999, &item->count) || item->count < 1 ||
            item->count > GPU_SIM_MAX_DEVICES)
            return err_set(err, ERR_INVALID_PARAMS, "item '%s': count must be 1-%d", buf,
                           GPU_SIM_MAX_DEVICES);
        p = buf + digits + 1;
    }

    const char *dash = strrchr(p, '-');
    if (!dash)
        return err_set(err, ERR_INVALID_PARAMS,
                       "item '%s' has no memory size; write [COUNTx]MODEL-MEMGB, as in 8xA100-80GB",
                       buf);
    size_t model_len = (size_t)(dash - p);
    if (model_len == 0)
        return err_set(err, ERR_INVALID_PARAMS, "item '%s' has no model name", buf);
    if (model_len >= sizeof(item->model))
        return err_set(err, ERR_INVALID_PARAMS,
                       "item '%s': model name is longer than %zu characters", buf,
                       sizeof(item->model) - 1);
    for (const char *c = p; c < dash; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_.-", *c))
            return err_set(err, ERR_INVALID_PARAMS,
                           "item '%s': model name may hold letters, digits, '_', '.' and '-' only",
                           buf);
    memcpy(item->model, p, model_len);
    item->model[model_len] = '\0';

    const char *unit = gpu_sim_number(dash + 1, GPU_SIM_MEM_GB_MAX, &item->mem_gb);
    if (!unit || item->mem_gb == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "item '%s': memory must be 1-%d GB, as in A100-80GB", buf,
                       GPU_SIM_MEM_GB_MAX);
    if (strcasecmp(unit, "GB") != 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "item '%s': memory needs the unit GB, as in A100-80GB", buf);
    return 0;
}

static void gpu_sim_add_cards(const struct gpu_sim_item *item, gpu_inventory *inv)
{
    for (unsigned i = 0; i < item->count; i++) {
        gpu_device d = {.index = (int)inv->n, .healthy = true};
        d.memory_mib = (uint64_t)item->mem_gb * 1024;
        gpu_sim_uuid(item, d.index, d.uuid, sizeof(d.uuid));
        snprintf(d.model, sizeof(d.model), "NVIDIA %s-%uGB (simulated)", item->model, item->mem_gb);
        gpu_inventory_add(inv, &d);
    }
}

static int gpu_sim_parse(const char *spec, gpu_inventory *inv, gb_err *err)
{
    size_t total = 0;
    for (const char *p = spec;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        struct gpu_sim_item item = {0};
        if (gpu_sim_parse_item(p, len, &item, err) < 0)
            return -1;
        total += item.count;
        if (total > GPU_SIM_MAX_DEVICES)
            return err_set(err, ERR_INVALID_PARAMS, "more than %d cards in all",
                           GPU_SIM_MAX_DEVICES);
        gpu_sim_add_cards(&item, inv);
        if (!end)
            return 0;
        p = end + 1;
    }
}

int gpu_sim_load(const char *spec, gpu_inventory *out, gb_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!spec || !*spec)
        return err_set(err, ERR_INVALID_PARAMS,
                       "simulated GPU spec is empty; write [COUNTx]MODEL-MEMGB[,...], as in "
                       "8xA100-80GB or 2xT4-16GB,1xH100-80GB");
    if (gpu_sim_parse(spec, out, err) < 0) {
        gpu_inventory_free(out);
        return err_prefix(err, "simulated GPU spec '%.100s'", spec);
    }
    strcpy(out->source, "simulated");
    out->simulated = true;
    return 0;
}

static int gpu_sim_source_load(const char *arg, gpu_inventory *out, gb_err *err)
{
    return gpu_sim_load(arg, out, err);
}

const struct gpu_source gpu_source_sim = {.name = "simulated", .load = gpu_sim_source_load};
