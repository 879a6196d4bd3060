/*
 * curl_pool.h - a pool of idle curl easy handles, so that calls to the same
 * server reuse warm connections. The Docker client (docker/docker_transport.c)
 * and the etcd store client (store/store_etcd_client.c) each keep one.
 *
 * Why a pool of handles rather than one CURLSH sharing a connection cache: a
 * curl easy handle may be used by one thread at a time, and it keeps its
 * open connection across curl_easy_reset. So a call borrows a handle (taking
 * the most recently used, whose connection is warm), runs with no lock held,
 * and gives it back; the next call on that handle reuses the connection. A
 * share object would get the same reuse only through lock callbacks around
 * curl's internals. In a burst more handles are made than the pool keeps;
 * the extras are closed when given back, so at most max_idle idle
 * connections stay open.
 *
 * The idle handles are a stack guarded by a mutex: the top is the warmest.
 * The pool does not call curl_global_init; its owner does, once, before the
 * first borrow.
 */
#ifndef GPUBOX_UTIL_CURL_POOL_H
#define GPUBOX_UTIL_CURL_POOL_H

#include <stddef.h>

#include <curl/curl.h>

typedef struct curl_pool curl_pool;

/* An empty pool that keeps at most max_idle handles when they are given
 * back. Never NULL (allocation aborts on out of memory). */
curl_pool *curl_pool_new(size_t max_idle);

/* Close every idle handle and free the pool. Handles still borrowed are the
 * borrowers' to clean up. NULL is a no-op. */
void curl_pool_free(curl_pool *p);

/* The most recently given back idle handle, or a new one from
 * curl_easy_init when none is idle: NULL only if curl_easy_init fails. The
 * caller has it alone until curl_pool_give_back. Thread-safe. */
CURL *curl_pool_borrow(curl_pool *p);

/* Give back a borrowed handle: curl_easy_reset forgets the call's options
 * but keeps its connection open, and the handle goes on top of the idle
 * stack, or is closed with curl_easy_cleanup when max_idle are idle already.
 * Thread-safe. */
void curl_pool_give_back(curl_pool *p, CURL *h);

/* How many handles are idle now (for tests and diagnostics). */
size_t curl_pool_idle(curl_pool *p);

#endif
