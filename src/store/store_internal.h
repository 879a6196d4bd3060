/*
 * store_internal.h - what the generic layer (store.c) shares with the
 * backends: reading the leading "../" of a relative key (store.h,
 * "Relative keys"), so that the rule lives in one place and a backend with
 * a key prefix only has to map keys the generic layer has checked.
 */
#ifndef GPUBOX_STORE_STORE_INTERNAL_H
#define GPUBOX_STORE_STORE_INTERNAL_H

#include <stddef.h>

/* One leading segment of a relative key: it climbs one segment of the key
 * prefix. */
#define STORE_KEY_UP "../"
#define STORE_KEY_UP_LEN 3

/* Split key (or a range prefix) into its leading "../" segments, *up of
 * them, and the rest, *rest (a pointer into key). -1 when ".." appears as a
 * segment anywhere else ("a/../b", "../..", "a/.."): such keys are refused
 * everywhere, so that "../" only ever means one thing. */
int store_key_split(const char *key, size_t *up, const char **rest);

/* *base_len gets the length of prefix (prefix_len bytes, a path ending in
 * '/') once its last up segments are dropped: "/gpubox/nodes/a/" less 2 is
 * "/gpubox/" (8). -1 when it has fewer than up segments. */
int store_prefix_up(const char *prefix, size_t prefix_len, size_t up, size_t *base_len);

/* How many segments prefix has: how many "../" a key may begin with. 0
 * for NULL, "" and "/". */
size_t store_prefix_depth(const char *prefix);

#endif
