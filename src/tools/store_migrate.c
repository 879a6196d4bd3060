/*
 * store_migrate.c - gpubox-store-migrate: copy all of gpubox's state from
 * one store to another, such as from the embedded SQLite file to etcd when
 * an operator moves several GPU servers onto one etcd, or back.
 *
 *   gpubox-store-migrate --from URL --to URL [--overwrite]
 *
 * Stop gpuboxd first: the copy reads the source once, as one snapshot, and
 * a daemon writing meanwhile would lose those writes in the target. The
 * tool makes sure of it: it claims both stores as a daemon does
 * (store_claim), so it refuses to run while a gpuboxd holds either, and no
 * gpuboxd can start on them until it is done. The work is store_copy
 * (src/store/store_copy.c); this file parses arguments and reports. Exit
 * status: 0 copied, 1 failed (or a store in use), 2 usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"
#include "store/store.h"
#include "util/cleanup.h"

static void store_migrate_usage(FILE *out)
{
    fprintf(out, "usage: gpubox-store-migrate --from URL --to URL [--overwrite]\n"
                 "\n"
                 "Copy every key of one gpubox store into another. Stop gpuboxd first: a store\n"
                 "a running gpuboxd holds is refused.\n"
                 "\n"
                 "  --from URL     the store to read, e.g. sqlite:///var/lib/gpubox/state.db\n"
                 "  --to URL       the store to write, e.g. etcd://10.0.0.5:2379/gpubox\n"
                 "  --overwrite    write into a store that holds keys, making it an exact copy\n"
                 "                 (its keys that the source lacks are deleted)\n"
                 "  --help         show this text\n");
}

int main(int argc, char **argv)
{
    xalloc_init("gpubox-store-migrate");
    static const struct option options[] = {
        {"from", required_argument, NULL, 'f'},
        {"to", required_argument, NULL, 't'},
        {"overwrite", no_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *from_url = NULL, *to_url = NULL;
    bool overwrite = false;
    int c;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case 'f':
            from_url = optarg;
            break;
        case 't':
            to_url = optarg;
            break;
        case 'o':
            overwrite = true;
            break;
        case 'h':
            store_migrate_usage(stdout);
            return 0;
        default:
            store_migrate_usage(stderr);
            return 2;
        }
    }
    if (!from_url || !to_url || optind < argc) {
        fprintf(stderr, "gpubox-store-migrate: give --from URL and --to URL, and nothing else\n");
        store_migrate_usage(stderr);
        return 2;
    }

    /* URLs may carry an etcd password: show them without it. */
    _cleanup_free_ char *from_shown = store_url_redact(from_url);
    _cleanup_free_ char *to_shown = store_url_redact(to_url);
    store *from = NULL, *to = NULL;
    gb_err err = GB_ERR_INIT;
    store_owner me;
    size_t copied = 0;
    int status = 1;
    if (store_owner_self("gpubox-store-migrate", &me, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: %s\n", err.msg);
    else if (store_open(from_url, &from, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: opening the source %s: %s\n", from_shown, err.msg);
    else if (store_open(to_url, &to, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: opening the target %s: %s\n", to_shown, err.msg);
    else if (store_claim(from, &me, STORE_CLAIM_TTL_S, NULL, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: claiming the source %s: %s\n", from_shown, err.msg);
    else if (store_claim(to, &me, STORE_CLAIM_TTL_S, NULL, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: claiming the target %s: %s\n", to_shown, err.msg);
    else if (store_copy(from, to, overwrite, &copied, &err) < 0)
        fprintf(stderr, "gpubox-store-migrate: %s%s\n", err.msg,
                copied ? " (the target is partly written; run again with --overwrite)" : "");
    else
        status = 0;
    if (status == 0)
        printf("copied %zu keys from %s (%s) to %s (%s)\n", copied, from_shown,
               store_backend_name(from), to_shown, store_backend_name(to));
    store_close(from);
    store_close(to);
    return status;
}
