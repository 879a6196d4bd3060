/*
 * fleet_internal.h - what fleet.c, fleet_names.c and fleet_http.c share.
 */
#ifndef GPUBOX_FLEET_FLEET_INTERNAL_H
#define GPUBOX_FLEET_FLEET_INTERNAL_H

#include <pthread.h>

#include "fleet/fleet.h"
#include "util/curl_pool.h"

/* Directories of the fleet handle (its prefix is <root>/fleet/). */
#define FLEET_KEY_REGISTRY "registry"
#define FLEET_KEY_MEMBERS "members"
#define FLEET_KEY_CAPACITY "capacity"
#define FLEET_KEY_NAMES "names"
#define FLEET_KEY_SECRET "secret"

struct fleet_peer_store {
    char *node;
    store *store;
};

struct fleet {
    char *node, *advertise, *version, *root_url;
    json_t *labels;
    store *store;      /* <root>/fleet/, unclaimed */
    store *node_store; /* this node's, claimed (borrowed) */
    json_t *(*capacity)(void *ctx);
    void *capacity_ctx;
    int64_t started; /* Unix s */
    bool cordoned_at_join;
    unsigned char *secret; /* signs requests between nodes (fleet_auth.h) */
    size_t secret_len;

    pthread_mutex_t lock; /* the fields below */
    pthread_cond_t wake;  /* on CLOCK_MONOTONIC */
    bool poked, stopping;
    pthread_t thread;
    bool thread_started;
    struct fleet_peer_store *peer_stores;
    size_t n_peer_stores;
    curl_pool *curls; /* fleet_http.c, made on first use under lock */
    /* Idle multi handles of fleet_send_many: each keeps its connections to
     * the other nodes open between lists (a multi handle's connection
     * cache is its own, and goes with curl_multi_cleanup). */
    void *idle_multis[4];
    size_t n_idle_multis;
};

/* Read the fleet's secret into f: from cfg->secret_file, else from the
 * store, made there first when absent (fleet_secret.c). */
int fleet_secret_load(fleet *f, const char *secret_file, gb_err *err);
/* Wipe and free it. */
void fleet_secret_free(fleet *f);

/* Close the idle connections to other nodes (fleet_close). */
void fleet_http_free(fleet *f);

/* "<dir>/<name>"; free it. */
char *fleet_key(const char *dir, const char *name);

#endif
