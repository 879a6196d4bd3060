/*
 * size.c - parsing and formatting of human sizes (see size.h).
 *
 * Parsing is by hand rather than strtod so that no locale, hex float, "inf"
 * or exponent form can sneak in: digits, at most one '.', digits, optional
 * spaces, a unit.
 */
#include "util/size.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *unit;
    uint64_t factor;
} size_units[] = {
    {"", 1},
    {"B", 1},
    {"KB", 1024ULL},
    {"MB", 1024ULL * 1024},
    {"GB", 1024ULL * 1024 * 1024},
    {"TB", 1024ULL * 1024 * 1024 * 1024},
};

int size_parse(const char *text, uint64_t *bytes, gb_err *err)
{
    if (!text)
        return err_set(err, ERR_INVALID_PARAMS, "size is missing; give it like \"20GB\"");
    const char *p = text;
    while (*p == ' ')
        p++;
    uint64_t whole = 0;
    int whole_digits = 0;
    while (isdigit((unsigned char)*p)) {
        if (whole > SIZE_MAX_BYTES)
            return err_set(err, ERR_INVALID_PARAMS, "size '%.40s' is too large; at most 1PB", text);
        whole = whole * 10 + (uint64_t)(*p++ - '0');
        whole_digits++;
    }
    /* The fraction is kept as an exact decimal: frac / frac_scale. */
    uint64_t frac = 0, frac_scale = 1;
    if (*p == '.') {
        p++;
        int frac_digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (frac_digits < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_scale *= 10;
            }
            frac_digits++;
            p++;
        }
        if (frac_digits == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "size '%.40s' has a '.' with no digits after it", text);
    }
    if (whole_digits == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "size '%.40s' does not start with a number; give it like \"20GB\"", text);
    while (*p == ' ')
        p++;
    const char *unit = p;
    size_t unit_len = strlen(unit);
    while (unit_len > 0 && unit[unit_len - 1] == ' ')
        unit_len--;
    for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
        if (strlen(size_units[i].unit) != unit_len ||
            strncasecmp(unit, size_units[i].unit, unit_len) != 0)
            continue;
        uint64_t factor = size_units[i].factor;
        if (whole > SIZE_MAX_BYTES / factor)
            return err_set(err, ERR_INVALID_PARAMS, "size '%.40s' is too large; at most 1PB", text);
        uint64_t total = whole * factor + (frac * factor) / frac_scale;
        if (total > SIZE_MAX_BYTES)
            return err_set(err, ERR_INVALID_PARAMS, "size '%.40s' is too large; at most 1PB", text);
        *bytes = total;
        return 0;
    }
    return err_set(err, ERR_VOLUME_SIZE_UNIT,
                   "size unit '%.*s' in '%.40s' is not supported; use B, KB, MB, GB or TB",
                   (int)(unit_len > 16 ? 16 : unit_len), unit, text);
}

void size_format(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    uint64_t scale = 1;
    while (u < 4 && bytes >= scale * 1024) {
        scale *= 1024;
        u++;
    }
    if (bytes % scale == 0) {
        snprintf(buf, len, "%llu%s", (unsigned long long)(bytes / scale), units[u]);
        return;
    }
    double v = (double)bytes / (double)scale;
    snprintf(buf, len, "%.2f%s", v, units[u]);
    /* "1.50GB" -> "1.5GB" */
    char *dot = strchr(buf, '.');
    if (dot) {
        char *end = dot + strlen(dot);
        char *unit_start = end;
        while (unit_start > dot && !isdigit((unsigned char)unit_start[-1]))
            unit_start--;
        char *z = unit_start;
        while (z > dot + 1 && z[-1] == '0')
            z--;
        if (z == dot + 1 && z[-1] == '.')
            z = dot;
        memmove(z, unit_start, strlen(unit_start) + 1);
    }
}
