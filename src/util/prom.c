/*
 * prom.c - labeled counters and histograms, and the text format writer
 * (see prom.h).
 *
 * Layout: a family keeps its series in one growing array; a series holds
 * its label values (copies) and either a count (counter) or the bucket
 * counts, the sum and the count (histogram). Bucket counts are kept per
 * bucket and made cumulative when written, as the format wants.
 */
#include "util/xalloc.h"
#include "util/prom.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct prom_series {
    char *values[PROM_MAX_LABELS];
    double count; /* counter value, or histogram observation count */
    double sum;
    unsigned long long buckets[PROM_MAX_BUCKETS + 1]; /* per bucket, the last is +Inf */
} prom_series;

struct prom_family {
    pthread_mutex_t lock;
    const char *name, *help; /* static strings */
    bool histogram;
    const char *labels[PROM_MAX_LABELS];
    size_t nlabels;
    double bounds[PROM_MAX_BUCKETS];
    size_t nbounds;
    prom_series *series;
    size_t n, cap;
};

static prom_family *prom_family_new(const char *name, const char *help, const char *const *labels)
{
    prom_family *f = xcalloc(1, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    f->name = name;
    f->help = help;
    for (; labels && labels[f->nlabels] && f->nlabels < PROM_MAX_LABELS; f->nlabels++)
        f->labels[f->nlabels] = labels[f->nlabels];
    return f;
}

prom_family *prom_counter_new(const char *name, const char *help, const char *const *labels)
{
    return prom_family_new(name, help, labels);
}

prom_family *prom_histogram_new(const char *name, const char *help, const char *const *labels,
                                const double *buckets, size_t nbuckets)
{
    prom_family *f = prom_family_new(name, help, labels);
    f->histogram = true;
    f->nbounds = nbuckets < PROM_MAX_BUCKETS ? nbuckets : PROM_MAX_BUCKETS;
    memcpy(f->bounds, buckets, f->nbounds * sizeof(*buckets));
    return f;
}

void prom_family_free(prom_family *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        for (size_t k = 0; k < f->nlabels; k++)
            free(f->series[i].values[k]);
    free(f->series);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* The series for values, created when new; NULL when the family is full.
 * Called with the lock held. */
static prom_series *prom_series_get(prom_family *f, const char *const *values)
{
    for (size_t i = 0; i < f->n; i++) {
        size_t k = 0;
        while (k < f->nlabels && strcmp(f->series[i].values[k], values[k] ? values[k] : "") == 0)
            k++;
        if (k == f->nlabels)
            return &f->series[i];
    }
    if (f->n == PROM_MAX_SERIES)
        return NULL;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        f->series = xrealloc(f->series, cap * sizeof(*f->series));
        f->cap = cap;
    }
    prom_series *s = &f->series[f->n];
    *s = (prom_series){0};
    for (size_t k = 0; k < f->nlabels; k++)
        s->values[k] = xstrdup(values[k] ? values[k] : "");
    f->n++;
    return s;
}

void prom_counter_inc(prom_family *f, const char *const *values)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    prom_series *s = prom_series_get(f, values);
    if (s)
        s->count += 1;
    pthread_mutex_unlock(&f->lock);
}

void prom_histogram_observe(prom_family *f, const char *const *values, double v)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    prom_series *s = prom_series_get(f, values);
    if (s) {
        size_t b = 0;
        while (b < f->nbounds && v > f->bounds[b])
            b++;
        s->buckets[b]++;
        s->count += 1;
        s->sum += v;
    }
    pthread_mutex_unlock(&f->lock);
}

static void prom_escape(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', out);
        if (*s == '\n')
            fputs("\\n", out);
        else
            fputc(*s, out);
    }
}

static void prom_value(FILE *out, double v)
{
    if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", out);
    else if (v == floor(v) && fabs(v) < 1e15)
        fprintf(out, "%.0f", v);
    else
        fprintf(out, "%.9g", v);
}

/* name{l1="v1",...,extra="x"} value */
static void prom_line(FILE *out, const char *name, const char *suffix, const char *const *labels,
                      const char *const *values, size_t n, const char *extra_label,
                      const char *extra_value, double v)
{
    fprintf(out, "%s%s", name, suffix);
    if (n || extra_label) {
        fputc('{', out);
        for (size_t k = 0; k < n; k++) {
            fprintf(out, "%s%s=\"", k ? "," : "", labels[k]);
            prom_escape(out, values[k] ? values[k] : "");
            fputc('"', out);
        }
        if (extra_label)
            fprintf(out, "%s%s=\"%s\"", n ? "," : "", extra_label, extra_value);
        fputc('}', out);
    }
    fputc(' ', out);
    prom_value(out, v);
    fputc('\n', out);
}

void prom_write_header(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_write_sample(FILE *out, const char *name, const char *const *labels,
                       const char *const *values, double v)
{
    size_t n = 0;
    while (labels && labels[n])
        n++;
    prom_line(out, name, "", labels, values, n, NULL, NULL, v);
}

void prom_family_write(prom_family *f, FILE *out)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    prom_write_header(out, f->name, f->histogram ? "histogram" : "counter", f->help);
    for (size_t i = 0; i < f->n; i++) {
        const prom_series *s = &f->series[i];
        const char *const *values = (const char *const *)s->values;
        if (!f->histogram) {
            prom_line(out, f->name, "", f->labels, values, f->nlabels, NULL, NULL, s->count);
            continue;
        }
        unsigned long long cumulative = 0;
        for (size_t b = 0; b <= f->nbounds; b++) {
            char le[32];
            cumulative += s->buckets[b];
            if (b < f->nbounds)
                snprintf(le, sizeof(le), "%g", f->bounds[b]);
            else
                snprintf(le, sizeof(le), "+Inf");
            prom_line(out, f->name, "_bucket", f->labels, values, f->nlabels, "le", le,
                      (double)cumulative);
        }
        prom_line(out, f->name, "_sum", f->labels, values, f->nlabels, NULL, NULL, s->sum);
        prom_line(out, f->name, "_count", f->labels, values, f->nlabels, NULL, NULL, s->count);
    }
    pthread_mutex_unlock(&f->lock);
}

char *prom_add_label(const char *text, size_t len, const char *name, const char *value,
                     size_t *out_len)
{
    char *out = NULL;
    size_t out_size = 0;
    FILE *f = open_memstream(&out, &out_size);
    if (!f)
        abort(); /* out of memory: as xmalloc */
    char *esc = NULL;
    size_t esc_size = 0;
    FILE *e = open_memstream(&esc, &esc_size);
    if (!e)
        abort();
    for (const char *v = value; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', e);
        if (*v == '\n')
            fputs("\\n", e);
        else
            fputc(*v, e);
    }
    fclose(e);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t line = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        size_t name_len = strcspn(p, "{ \n");
        if (*p == '#' || *p == '\n' || name_len >= line) {
            fwrite(p, 1, line, f);
        } else if (p[name_len] == '{') {
            fwrite(p, 1, name_len + 1, f);
            fprintf(f, "%s=\"%s\"%s", name, esc, p[name_len + 1] == '}' ? "" : ",");
            fwrite(p + name_len + 1, 1, line - name_len - 1, f);
        } else {
            fwrite(p, 1, name_len, f);
            fprintf(f, "{%s=\"%s\"}", name, esc);
            fwrite(p + name_len, 1, line - name_len, f);
        }
        p += line;
    }
    fclose(f);
    free(esc);
    *out_len = out_size;
    return out;
}
