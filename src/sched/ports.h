/*
 * ports.h - the host-port allocator: which host port a replica set gets.
 *
 * The pool covers a range (default 40000-65535). Which ports are held is
 * derived from the store's replica-set records at start-up (ports_pool_take)
 * and changes only through ports_pool_alloc / ports_pool_release, so the
 * pool never disagrees with the store. Allocation picks the lowest free
 * ports, is all-or-nothing for several ports, and skips any port that
 * something else on the host already listens on (TCP or UDP bind test).
 *
 * Thread-safe: one mutex guards the pool.
 */
#ifndef GPUBOX_SCHED_PORTS_H
#define GPUBOX_SCHED_PORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct ports_pool ports_pool;

/* "40000-65535" -> start, end; -1 with ERR_INVALID_PARAMS if malformed. */
int ports_range_parse(const char *s, uint16_t *start, uint16_t *end, gb_err *err);

ports_pool *ports_pool_new(uint16_t start, uint16_t end);
void ports_pool_free(ports_pool *p);

/* Take n free ports (lowest first) into out[]; all or nothing.
 * ERR_PORT_NOT_ENOUGH says how many are free when n cannot be met. */
int ports_pool_alloc(ports_pool *p, size_t n, uint16_t *out, gb_err *err);
/* Take exactly these ports (explicit hostPort requests, or re-marking held
 * ports at start-up); all or nothing. Ports outside the range are allowed
 * and tracked too. With check_host, a port that something on the host
 * already listens on is refused (ERR_PORT_NOT_ENOUGH naming it). */
int ports_pool_take(ports_pool *p, const uint16_t *ports, size_t n, bool check_host, gb_err *err);
void ports_pool_release(ports_pool *p, const uint16_t *ports, size_t n);

uint16_t ports_pool_start(const ports_pool *p);
uint16_t ports_pool_end(const ports_pool *p);
size_t ports_pool_available(const ports_pool *p);
/* Used ports, ascending; caller frees *out. */
void ports_pool_used(const ports_pool *p, uint16_t **out, size_t *n);

/* True if something on the host listens on (binds) this port, TCP or UDP. */
bool ports_host_in_use(uint16_t port);

#endif
