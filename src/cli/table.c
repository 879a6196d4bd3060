/*
 * table.c - aligned tables for people: a header row in capitals and the
 * cells of each column padded to the widest one, two spaces apart, as
 * `docker ps` prints them. The last column is not padded, so no line
 * ends in spaces.
 *
 * Layout: every cell (header included) is one malloc'd string in a flat
 * array, row after row; widths are measured when printing.
 */
#include "util/xalloc.h"
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

struct cli_table {
    size_t ncols, nrows; /* nrows counts the header */
    char **cells;        /* nrows * ncols */
    size_t cap_rows;
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
        char *s = xstrdup(cells[c] ? cells[c] : "-");
        t->cells[t->nrows * t->ncols + c] = s;
    }
    t->nrows++;
}

cli_table *cli_table_new(const char *const *headers)
{
    cli_table *t = xcalloc(1, sizeof(*t));
    while (headers[t->ncols])
        t->ncols++;
    table_row(t, headers);
    return t;
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

void cli_table_print(cli_table *t, FILE *out)
{
    size_t *width = xcalloc(t->ncols, sizeof(*width));
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t w = table_width(t->cells[r * t->ncols + c]);
            if (w > width[c])
                width[c] = w;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            bool last = c + 1 == t->ncols;
            fputs(cell, out);
            if (!last)
                fprintf(out, "%*s", (int)(width[c] - table_width(cell) + 2), "");
        }
        fputc('\n', out);
    }
    free(width);
}

void cli_table_free(cli_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}
