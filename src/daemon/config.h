/*
 * config.h - gpuboxd's settings: defaults, an optional config file of
 * `key = value` lines, and command-line flags, in that order of precedence
 * (flags override the file, the file overrides defaults).
 *
 * One table in config.c describes every setting (flag name = file key,
 * argument, default, help, how to apply it), so --help, the flag parser and
 * the file parser can never disagree. Values are checked as they are
 * applied; settings that depend on each other are checked last
 * (config_finalize). Every error names the flag or the file and line.
 */
#ifndef GPUBOX_DAEMON_CONFIG_H
#define GPUBOX_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "service/app.h"
#include "util/err.h"
#include "util/log.h"

#define CONFIG_LISTEN_DEFAULT "127.0.0.1:2378"
#define CONFIG_DATA_DIR_DEFAULT "/var/lib/gpubox"
#define CONFIG_DOCKER_HOST_DEFAULT "unix:///var/run/docker.sock"
#define CONFIG_PORT_RANGE_DEFAULT "40000-65535"

typedef struct daemon_config {
    /* owned strings; app's pointers below point at them */
    char *listen;      /* as given, "127.0.0.1:2378" */
    char *listen_host; /* parsed: "127.0.0.1", "::1" */
    uint16_t listen_port;
    char *data_dir, *store_url, *docker_host, *simulate_gpus, *nvml_library, *nvidia_smi;
    char *simulate_cpus, *reserved_cpus; /* docs/cpus.md */
    char *gpu_attach, *volume_backend, *volume_fs, *config_file, *bind_prefixes, *carry_method;
    char *move_compress;                                  /* --move-compress: auto | zstd | none */
    char *token_file, *tls_cert, *tls_key, *cors_origins; /* NULL: not given */
    char *allowed_hosts; /* --allowed-host, every one given, joined by ','; NULL: none */
    char *gpu_exclude_sharing, *gpu_exclude, *hami_core;
    char *cuda_limiter; /* --cuda-limiter as given; NULL: beside gpuboxd */
    char *xid_critical;
    char *share_overrun;                  /* --share-overrun: "report" | "kill" */
    char *registry_auth_file;             /* NULL: not given */
    char *queue_webhook;                  /* --queue-webhook URL; NULL: none */
    char *node, *advertise, *node_labels; /* the fleet (docs/fleet.md); NULL: not given */
    char *fleet_secret_file;              /* --fleet-secret-file; NULL: the one in etcd */
    char *owner_of_unowned;               /* docs/users.md; NULL: not given */
    char *public_host;                    /* the ssh command's host; set by config_finalize */
    /* The service proxy (docs/services.md): --proxy-listen as given (NULL
     * or "off": none) and parsed; --proxy-domain, --proxy-url (NULL: not
     * given; the URL is made by config_finalize_proxy once the port is
     * known). */
    char *proxy_listen, *proxy_listen_host, *proxy_domain, *proxy_url;
    char *proxy_address; /* in a fleet: where the other nodes reach the proxy (daemon/main.c) */
    uint16_t proxy_listen_port;
    unsigned proxy_max_per_ip; /* --proxy-max-per-ip; 0: no per-address cap */
    char *node_store_url;      /* <store>/nodes/<node>, made by config_finalize */

    app_config app; /* filled by config_finalize */
    enum log_level log_level;
    bool compat_http_200;
    unsigned max_connections;
    unsigned max_connections_per_ip; /* 0: no per-address limit */
    bool insecure_no_auth;           /* listen beyond loopback without tokens */
    unsigned connection_timeout_s;
    unsigned shutdown_timeout_s;

    bool show_help, show_version, show_fault_points;

    /* Where settings came from while reading (enum config_origin); only the
     * two GPU settings that interact remember theirs. */
    int origin_now, origin_gpu_source, origin_simulate;
} daemon_config;

enum config_origin { CONFIG_FROM_DEFAULT, CONFIG_FROM_FILE, CONFIG_FROM_FLAG };

/* Defaults (reads $DOCKER_HOST). */
int config_init(daemon_config *cfg, gb_err *err);
void config_free(daemon_config *cfg);

/* The whole sequence gpuboxd runs: defaults, then the --config file if any,
 * then the flags, then config_finalize. With --help or --version it stops
 * early with show_help / show_version / show_fault_points set. */
int config_load(daemon_config *cfg, int argc, char **argv, gb_err *err);

/* The pieces, for tests. */
int config_parse_file(daemon_config *cfg, const char *path, gb_err *err);
int config_parse_text(daemon_config *cfg, const char *text, const char *origin, gb_err *err);
int config_set(daemon_config *cfg, const char *key, const char *value, gb_err *err);
int config_finalize(daemon_config *cfg, gb_err *err);

/* Does host (a --listen address) name only this machine's loopback
 * interface? Names are resolved; an address that does not resolve is not. */
bool config_host_is_loopback(const char *host);

/* "ADDR:PORT" or "[v6]:PORT" -> host (malloc'd) and port. */
int config_parse_listen(const char *s, char **host, uint16_t *port, gb_err *err);

/* Every flag with its argument, default and meaning. */
void config_usage(FILE *out);

#endif
