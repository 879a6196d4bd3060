/*
 * gpu_smi_csv.c - the spans, fields and lines of nvidia-smi's CSV, shared
 * by gpu_smi.c and gpu_usage_smi.c (see gpu_smi_csv.h).
 */
#include "gpu/gpu_smi_csv.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "gpu/gpu.h"

struct gpu_csv_span gpu_csv_trim(struct gpu_csv_span s)
{
    while (s.len > 0 && (s.p[0] == ' ' || s.p[0] == '\t'))
        s.p++, s.len--;
    while (s.len > 0 && (s.p[s.len - 1] == ' ' || s.p[s.len - 1] == '\t' || s.p[s.len - 1] == '\r'))
        s.len--;
    return s;
}

bool gpu_csv_eq(struct gpu_csv_span s, const char *word)
{
    return s.len == strlen(word) && strncasecmp(s.p, word, s.len) == 0;
}

bool gpu_csv_unavailable(struct gpu_csv_span s)
{
    return s.len >= 2 && s.p[0] == '[' && s.p[s.len - 1] == ']';
}

const char *gpu_csv_quote(struct gpu_csv_span s, char *buf, size_t len)
{
    size_t n = s.len < 60 ? s.len : 60;
    if (n + 4 > len)
        n = len - 4;
    for (size_t i = 0; i < n; i++)
        buf[i] = isprint((unsigned char)s.p[i]) ? s.p[i] : '?';
    strcpy(buf + n, s.len > n ? "..." : "");
    return buf;
}

bool gpu_csv_number(struct gpu_csv_span s, size_t max_digits, const char *unit, uint64_t *v)
{
    size_t digits = 0;
    *v = 0;
    while (digits < s.len && isdigit((unsigned char)s.p[digits]))
        *v = *v * 10 + (uint64_t)(s.p[digits++] - '0');
    if (digits == 0 || digits > max_digits)
        return false;
    struct gpu_csv_span rest = gpu_csv_trim((struct gpu_csv_span){s.p + digits, s.len - digits});
    return rest.len == 0 || gpu_csv_eq(rest, unit);
}

bool gpu_csv_valid_uuid(struct gpu_csv_span s)
{
    if (s.len < 5 || s.len >= GPU_UUID_MAX)
        return false;
    if (strncmp(s.p, "GPU-", 4) != 0 && strncmp(s.p, "MIG-", 4) != 0)
        return false;
    for (size_t i = 0; i < s.len; i++)
        if (!isalnum((unsigned char)s.p[i]) && s.p[i] != '-' && s.p[i] != '/')
            return false;
    return true;
}

size_t gpu_csv_split(struct gpu_csv_span line, struct gpu_csv_span *fields, size_t max)
{
    size_t n = 0;
    const char *p = line.p, *end = line.p + line.len;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (n < max)
            fields[n] = gpu_csv_trim((struct gpu_csv_span){p, (size_t)(stop - p)});
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

bool gpu_csv_next_line(struct gpu_csv_lines *it, struct gpu_csv_span *line)
{
    while (it->next && *it->next) {
        const char *p = it->next, *nl = strchr(p, '\n');
        *line = gpu_csv_trim((struct gpu_csv_span){p, nl ? (size_t)(nl - p) : strlen(p)});
        it->next = nl ? nl + 1 : p + strlen(p);
        it->line_no++;
        if (line->len == 0)
            continue;
        struct gpu_csv_span f0;
        gpu_csv_split(*line, &f0, 1);
        bool header = it->first && it->header_word && gpu_csv_eq(f0, it->header_word);
        it->first = false;
        if (!header)
            return true;
    }
    return false;
}
