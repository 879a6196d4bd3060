/*
 * table.c - aligned tables for people: a header row in capitals and the
 * cells of each column padded to the widest one, two spaces apart, as
 * `docker ps` prints them. The last column is not padded, so no line
 * ends in spaces. A cell without a value prints as "-".
 *
 * An optional column (cli_table_optional) is printed only when some row has
 * a value in it: the NODE column of a fleet, which a single gpuboxd's lists
 * never fill, so their tables stay byte for byte what they were.
 *
 * Layout: every cell (header included) is one malloc'd string, or NULL for
 * no value, in a flat array, row after row; widths are measured when
 * printing.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

struct cli_table {
    size_t ncols, nrows; /* nrows counts the header */
    char **cells;        /* nrows * ncols; NULL: no value */
    size_t cap_rows;
    bool *optional; /* ncols: left out when no row has a value */
};

static void table_row(cli_table *t, const char *const *cells)
{
    if (t->nrows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
        char **grown = xrealloc(t->cells, cap * t->ncols * sizeof(*grown));
        t->cells = grown;
        t->cap_rows = cap;
    }
    for (size_t c = 0; c < t->ncols; c++) {
        t->cells[t->nrows * t->ncols + c] = cells[c] ? xstrdup(cells[c]) : NULL;
    }
    t->nrows++;
}

cli_table *cli_table_new(const char *const *headers)
{
    cli_table *t = xcalloc(1, sizeof(*t));
    while (headers[t->ncols])
        t->ncols++;
    t->optional = xcalloc(t->ncols, sizeof(*t->optional));
    table_row(t, headers);
    return t;
}

void cli_table_optional(cli_table *t, const char *header)
{
    for (size_t c = 0; c < t->ncols; c++)
        if (strcmp(t->cells[c], header) == 0)
            t->optional[c] = true;
}

void cli_table_add(cli_table *t, const char *const *cells)
{
    table_row(t, cells);
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t table_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

static const char *table_cell(const cli_table *t, size_t r, size_t c)
{
    const char *cell = t->cells[r * t->ncols + c];
    return cell ? cell : "-";
}

/* Is column c printed: not optional, or some row below the header has a
 * value in it? */
static bool table_shown(const cli_table *t, size_t c)
{
    if (!t->optional[c])
        return true;
    for (size_t r = 1; r < t->nrows; r++)
        if (t->cells[r * t->ncols + c])
            return true;
    return false;
}

void cli_table_print(cli_table *t, FILE *out)
{
    size_t *width = xcalloc(t->ncols, sizeof(*width));
    bool *shown = xcalloc(t->ncols, sizeof(*shown));
    size_t last = 0; /* the last column printed: no padding after it */
    for (size_t c = 0; c < t->ncols; c++) {
        shown[c] = table_shown(t, c);
        if (shown[c])
            last = c;
        for (size_t r = 0; r < t->nrows; r++) {
            size_t w = table_width(table_cell(t, r, c));
            if (w > width[c])
                width[c] = w;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            if (!shown[c])
                continue;
            const char *cell = table_cell(t, r, c);
            fputs(cell, out);
            if (c != last)
                fprintf(out, "%*s", (int)(width[c] - table_width(cell) + 2), "");
        }
        fputc('\n', out);
    }
    free(shown);
    free(width);
}

void cli_table_free(cli_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->optional);
    free(t);
}
