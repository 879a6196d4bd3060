/*
 * store_etcd_internal.h - what the etcd backend's two files share: the
 * client (store_etcd_client.c: the URL, endpoints and failover, a pool of
 * curl handles, authentication, and turning etcd's answers into gb_err) and
 * the store mapping on top of it (store_etcd.c).
 */
#ifndef GPUBOX_STORE_STORE_ETCD_INTERNAL_H
#define GPUBOX_STORE_STORE_ETCD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "store/store.h"
#include "util/err.h"

/* gRPC status codes etcd puts in the "code" field of an error answer. */
enum etcd_grpc_code {
    ETCD_GRPC_OK = 0,
    ETCD_GRPC_INVALID_ARGUMENT = 3,
    ETCD_GRPC_DEADLINE_EXCEEDED = 4,
    ETCD_GRPC_PERMISSION_DENIED = 7,
    ETCD_GRPC_RESOURCE_EXHAUSTED = 8,
    ETCD_GRPC_OUT_OF_RANGE = 11, /* "required revision has been compacted" */
    ETCD_GRPC_UNAVAILABLE = 14,
    ETCD_GRPC_UNAUTHENTICATED = 16,
};

typedef struct etcd_client etcd_client;

/* Parse an etcd:// URL (see docs/store.md) into a client. Nothing is sent. */
int etcd_client_new(const char *url, etcd_client **out, gb_err *err);
void etcd_client_free(etcd_client *c);

/* The key prefix every gpubox key is stored under ("" when none). */
const char *etcd_client_prefix(const etcd_client *c, size_t *len);
/* "host:port[,host:port...]" for messages. */
const char *etcd_client_endpoints(const etcd_client *c);

/* POST body (JSON) to one of etcd's gateway paths ("/v3/kv/range") and put
 * the JSON answer of a 200 in *reply. Connection failures move on to the
 * next endpoint. writes says the request changes state: such a request is
 * never sent twice, so one that got no answer fails with a message saying
 * it may or may not have been applied. When etcd answered with an error,
 * *grpc_code (may be NULL) gets etcd's code, else 0. */
int etcd_client_call(etcd_client *c, const char *path, json_t *body, bool writes, json_t **reply,
                     int *grpc_code, gb_err *err);

/* ---- the store on top (store_etcd.c) and its claim (store_etcd_claim.c) ---- */

struct etcd_claim;

struct etcd_store {
    store base;
    etcd_client *client;
    const char *prefix; /* owned by client */
    size_t prefix_len;
    struct etcd_claim *claim; /* always there; state NONE until claimed */
};

/* JSON pieces the gateway speaks: bytes as base64 strings, int64 as
 * strings of digits (store_etcd.c). */
json_t *etcd_json_bytes(const char *data, size_t n);
json_t *etcd_json_int64(int64_t v);
int64_t etcd_json_get_int64(json_t *obj, const char *name);
/* gpubox key -> the etcd key under the prefix, as base64 JSON. */
json_t *etcd_store_json_key(const struct etcd_store *es, const char *key);

struct etcd_claim *etcd_claim_new(void);
void etcd_claim_free(struct etcd_claim *c);
int etcd_store_claim(store *s, const store_owner *me, int ttl_s, store_owner *holder, gb_err *err);
void etcd_store_release(store *s);
enum store_claim_state etcd_store_claim_state(store *s);
void etcd_store_claim_describe(store *s, char *buf, size_t size);
int64_t etcd_store_claim_lease(store *s);

/* The fence every write of a claimed store carries: the owner key must
 * still be attached to this handle's lease. *lease gets that lease, 0 when
 * the store is not claimed (no fence). -1 with ERR_STORE_UNAVAILABLE when
 * the claim is lost: the write must not be sent. */
int etcd_claim_fence(struct etcd_store *es, int64_t *lease, gb_err *err);
/* A fenced transaction came back not succeeded: its failure branch read
 * the owner key. 0 when the key still carries lease (the caller's own
 * comparisons failed); -1 with ERR_STORE_UNAVAILABLE when the fence did -
 * the claim is then lost, and nothing was written. */
int etcd_claim_fence_failed(struct etcd_store *es, int64_t lease, json_t *reply, gb_err *err);

#endif
