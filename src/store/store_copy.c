/*
 * store_copy.c - copying a whole store into another, whatever the two
 * backends are, using only the store_* functions (gpubox-store-migrate
 * moves an installation between SQLite and etcd with it).
 *
 * The source is read with one store_range, which both backends serve as a
 * single snapshot. The target is then written with transactions of at most
 * STORE_COPY_BATCH_OPS ops and about STORE_COPY_BATCH_BYTES of keys and
 * values (one key and a value of the largest size also fit), inside the
 * limits store_txn sets (STORE_TXN_OPS_MAX, STORE_TXN_BYTES_MAX). With
 * overwrite, the target's keys that the source lacks are deleted first, so
 * the result is the source exactly.
 *
 * STORE_OWNER_KEY is left out on both sides: it says which process holds
 * a store (the migration tool itself, while it copies), and copied it would
 * claim the target for a process that never claimed it, for good.
 */
#include "util/xalloc.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define STORE_COPY_BATCH_OPS 100 /* below STORE_TXN_OPS_MAX */
#define STORE_COPY_BATCH_BYTES (768 * 1024)

/* Apply ops[0..n) in batches; *written counts the ops applied. */
static int store_copy_apply(store *to, const store_op *ops, size_t n, size_t *written, gb_err *err)
{
    size_t start = 0;
    while (start < n) {
        size_t end = start, bytes = 0;
        /* At least one op per batch, however large its value. */
        while (end < n && end - start < STORE_COPY_BATCH_OPS &&
               (end == start ||
                bytes + strlen(ops[end].key) + (ops[end].value ? strlen(ops[end].value) : 0) <=
                    STORE_COPY_BATCH_BYTES)) {
            bytes += strlen(ops[end].key) + (ops[end].value ? strlen(ops[end].value) : 0);
            end++;
        }
        bool ok = false;
        if (store_txn(to, NULL, 0, ops + start, end - start, &ok, NULL, err) < 0)
            return err_prefix(err, "writing keys %zu to %zu of %zu into the target", start + 1, end,
                              n);
        *written += end - start;
        start = end;
    }
    return 0;
}

/* Take STORE_OWNER_KEY out of kvs (sorted: it is found by one pass). */
static void store_copy_drop_owner(store_kvs *kvs)
{
    for (size_t i = 0; i < kvs->n; i++) {
        if (strcmp(kvs->items[i].key, STORE_OWNER_KEY) != 0)
            continue;
        store_kv_free(&kvs->items[i]);
        memmove(&kvs->items[i], &kvs->items[i + 1], (kvs->n - i - 1) * sizeof(kvs->items[0]));
        kvs->n--;
        return;
    }
}

/* Delete ops for the keys of dst that src lacks; both are sorted. */
static size_t store_copy_plan_deletes(const store_kvs *src, const store_kvs *dst, store_op *ops)
{
    size_t n = 0, i = 0;
    for (size_t j = 0; j < dst->n; j++) {
        while (i < src->n && strcmp(src->items[i].key, dst->items[j].key) < 0)
            i++;
        if (i == src->n || strcmp(src->items[i].key, dst->items[j].key) != 0)
            ops[n++] = (store_op){.kind = STORE_OP_DELETE, .key = dst->items[j].key};
    }
    return n;
}

int store_copy(store *from, store *to, bool overwrite, size_t *copied, gb_err *err)
{
    store_kvs src = {0}, dst = {0};
    size_t written = 0, deleted = 0;
    store_op *ops = NULL;
    int r = -1;
    if (copied)
        *copied = 0;
    if (store_range(from, "", &src, err) < 0) {
        err_prefix(err, "reading the source store");
        goto out;
    }
    if (store_range(to, "", &dst, err) < 0) {
        err_prefix(err, "reading the target store");
        goto out;
    }
    store_copy_drop_owner(&src);
    store_copy_drop_owner(&dst);
    if (dst.n > 0 && !overwrite) {
        err_set(err, ERR_EXISTS,
                "the target store already holds %zu keys (the first is '%s'); copy into an "
                "empty store, or overwrite to make the target an exact copy of the source",
                dst.n, dst.items[0].key);
        goto out;
    }
    ops = xcalloc(src.n > dst.n ? src.n : dst.n, sizeof(*ops));
    size_t ndel = store_copy_plan_deletes(&src, &dst, ops);
    if (store_copy_apply(to, ops, ndel, &deleted, err) < 0)
        goto out;
    for (size_t i = 0; i < src.n; i++)
        ops[i] =
            (store_op){.kind = STORE_OP_PUT, .key = src.items[i].key, .value = src.items[i].value};
    if (store_copy_apply(to, ops, src.n, &written, err) < 0)
        goto out;
    r = 0;
out:
    if (copied)
        *copied = written;
    free(ops);
    store_kvs_free(&src);
    store_kvs_free(&dst);
    return r;
}
