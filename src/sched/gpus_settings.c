/*
 * gpus_settings.c - the allocator's host settings: defaults, validation
 * against the inventory, and the parser for the daemon's card lists.
 *
 * An exclusion entry is either a device UUID ("GPU-...", "MIG-...") or a
 * card index ("3"). Indexes and card UUIDs also name the card's MIG
 * instances (they carry the card's index and its UUID as parent), so
 * excluding a card in MIG mode keeps its instances out as well.
 */
#include "util/xalloc.h"
#include "sched/gpus_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

void gpus_settings_defaults(gpus_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->timeslice_replicas = GPUS_TIMESLICE_REPLICAS_DEFAULT;
    s->memory_oversubscription = 1.0;
}

/* An all-digit entry: a card index. */
static bool gpus_entry_is_index(const char *e, int *index)
{
    if (!*e || strlen(e) > 6)
        return false;
    for (const char *c = e; *c; c++)
        if (!isdigit((unsigned char)*c))
            return false;
    *index = atoi(e);
    return true;
}

static bool gpus_entry_names(const char *e, const gpu_device *d)
{
    int index;
    if (gpus_entry_is_index(e, &index))
        return d->index == index;
    return strcmp(e, d->uuid) == 0 || (d->is_mig && strcmp(e, d->parent_uuid) == 0);
}

bool gpus_settings_matches(const char *const *list, size_t n, const gpu_device *d)
{
    for (size_t i = 0; list && i < n; i++)
        if (list[i] && gpus_entry_names(list[i], d))
            return true;
    return false;
}

/* Every entry names a device of inv. */
static int gpus_settings_check_list(const char *const *list, size_t n, const char *what,
                                    const gpu_inventory *inv, gb_err *err)
{
    if (n && !list)
        return err_set(err, ERR_INVALID_PARAMS, "GPUs %s: %zu entries but no list", what, n);
    for (size_t i = 0; i < n; i++) {
        if (!list[i] || !*list[i])
            return err_set(err, ERR_INVALID_PARAMS, "GPUs %s: entry %zu is empty", what, i + 1);
        bool found = false;
        for (size_t d = 0; inv && d < inv->n && !found; d++)
            found = gpus_entry_names(list[i], &inv->devices[d]);
        if (found)
            continue;
        struct gpus_list known = {0};
        for (size_t d = 0; inv && d < inv->n; d++)
            if (!inv->devices[d].is_mig)
                gpus_list_add(&known, "%d %s", inv->devices[d].index, inv->devices[d].uuid);
        return err_set(err, ERR_INVALID_PARAMS,
                       "GPUs %s: '%.96s' is neither the UUID nor the index of a GPU on this "
                       "host (GPUs: %s)",
                       what, list[i], known.used ? known.buf : "none");
    }
    return 0;
}

int gpus_settings_validate(const gpus_settings *s, const gpu_inventory *inv, gb_err *err)
{
    if (s->timeslice_replicas < 1 || s->timeslice_replicas > GPUS_TIMESLICE_REPLICAS_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "time-slice replicas per GPU must be between 1 and %d, got %u",
                       GPUS_TIMESLICE_REPLICAS_MAX, s->timeslice_replicas);
    double f = s->memory_oversubscription;
    if (!isfinite(f) || f < 1.0 || f > GPUS_OVERSUBSCRIPTION_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "GPU memory oversubscription must be between 1.0 (none) and %.1f, got %g",
                       GPUS_OVERSUBSCRIPTION_MAX, f);
    if (gpus_settings_check_list(s->exclude_sharing, s->nexclude_sharing, "excluded from sharing",
                                 inv, err) < 0)
        return -1;
    return gpus_settings_check_list(s->exclude_all, s->nexclude_all, "excluded from scheduling",
                                    inv, err);
}

void gpus_settings_list_free(char **list, size_t n)
{
    for (size_t i = 0; list && i < n; i++)
        free(list[i]);
    free(list);
}

/* UUIDs are letters, digits and '-'; old-style MIG names add '/'. */
static bool gpus_entry_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/' || c == ':';
}

/* Trim entry [b, e) and check it; the copy goes into list[*n]. */
static int gpus_settings_add_entry(const char *b, const char *e, const char *what, char **list,
                                   size_t *n, gb_err *err)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    size_t len = (size_t)(e - b);
    if (len == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s: entry %zu is empty; give GPU UUIDs or indexes separated by commas",
                       what, *n + 1);
    if (len >= GPU_UUID_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%s: entry %zu is longer than a GPU UUID", what,
                       *n + 1);
    for (const char *c = b; c < e; c++)
        if (!gpus_entry_char_ok(*c))
            return err_set(err, ERR_INVALID_PARAMS,
                           "%s: '%.*s' is not a GPU UUID or index (character '%c')", what, (int)len,
                           b, isprint((unsigned char)*c) ? *c : '?');
    for (size_t i = 0; i < *n; i++)
        if (strlen(list[i]) == len && strncmp(list[i], b, len) == 0)
            return err_set(err, ERR_INVALID_PARAMS, "%s: '%.*s' is listed twice", what, (int)len,
                           b);
    list[*n] = xstrndup(b, len);
    (*n)++;
    return 0;
}

int gpus_settings_parse_list(const char *text, const char *what, char ***out, size_t *n,
                             gb_err *err)
{
    *out = NULL;
    *n = 0;
    if (!what)
        what = "GPU list";
    size_t entries = 1;
    for (const char *c = text ? text : ""; *c; c++)
        entries += *c == ',';
    char **list = xcalloc(entries + 1, sizeof(*list));
    size_t count = 0;
    const char *b = text ? text : "";
    bool blank = true;
    for (const char *c = b; *c; c++)
        blank = blank && isspace((unsigned char)*c);
    for (const char *c = b; !blank; c++) {
        if (*c != ',' && *c)
            continue;
        if (gpus_settings_add_entry(b, c, what, list, &count, err) < 0) {
            gpus_settings_list_free(list, count);
            return -1;
        }
        if (!*c)
            break;
        b = c + 1;
    }
    *out = list;
    *n = count;
    return 0;
}
