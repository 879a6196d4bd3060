/*
 * config.c - gpuboxd's settings table and its three readers: defaults, the
 * `key = value` file, and the flags.
 *
 * Each entry of config_options is one setting. Its kind says how a value is
 * applied: a string stored at an offset, an unsigned number in a range, a
 * boolean switch, one of a list of words, or a function for values that
 * need parsing (listen address, port range, GPU source, log level). Values
 * from the file are applied first (origin CONFIG_FROM_FILE), then flags
 * (CONFIG_FROM_FLAG); the origin only matters where two settings interact
 * (--simulate-gpus implies --gpu-source simulated).
 */
#include "util/xalloc.h"
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleet/fleet.h"
#include "sched/cpus.h"
#include "sched/gpus.h"
#include "service/monitor/monitor.h"
#include "service/replicaset/replicaset.h"
#include "store/store.h"
#include "util/cleanup.h"
#include "util/size.h"
#include "util/time.h"

enum config_kind { OPT_STRING, OPT_UINT, OPT_SWITCH, OPT_CHOICE, OPT_FUNC, OPT_CLI_ONLY };

typedef struct config_option {
    const char *name; /* flag without "--", and file key */
    enum config_kind kind;
    const char *arg; /* argument name for --help; NULL for switches */
    const char *def; /* default, as --help shows it */
    const char *help;
    size_t offset;       /* OPT_STRING / OPT_UINT / OPT_SWITCH / OPT_CHOICE field */
    unsigned min, max;   /* OPT_UINT */
    const char *choices; /* OPT_CHOICE: "a|b|c" */
    int (*apply)(daemon_config *cfg, const char *value, gb_err *err); /* OPT_FUNC */
} config_option;

static int apply_listen(daemon_config *cfg, const char *value, gb_err *err)
{
    char *host = NULL;
    uint16_t port = 0;
    if (config_parse_listen(value, &host, &port, err) < 0)
        return -1;
    char *copy = xstrdup(value);
    free(cfg->listen);
    free(cfg->listen_host);
    cfg->listen = copy;
    cfg->listen_host = host;
    cfg->listen_port = port;
    return 0;
}

/* --proxy-listen ADDR:PORT, or off. */
static int apply_proxy_listen(daemon_config *cfg, const char *value, gb_err *err)
{
    free(cfg->proxy_listen);
    free(cfg->proxy_listen_host);
    cfg->proxy_listen = cfg->proxy_listen_host = NULL;
    cfg->proxy_listen_port = 0;
    if (strcmp(value, "off") == 0 || !*value)
        return 0;
    char *host = NULL;
    uint16_t port = 0;
    if (config_parse_listen(value, &host, &port, err) < 0)
        return err_prefix(err, "--proxy-listen (ADDR:PORT or off)");
    cfg->proxy_listen = xstrdup(value);
    cfg->proxy_listen_host = host;
    cfg->proxy_listen_port = port;
    return 0;
}

/* --allowed-host adds up: each flag (or file line) adds its names to those
 * given before; security.c checks them. */
static int apply_allowed_host(daemon_config *cfg, const char *value, gb_err *err)
{
    (void)err; /* the option table's signature; checked at start-up */
    char *joined =
        cfg->allowed_hosts ? xasprintf("%s,%s", cfg->allowed_hosts, value) : xstrdup(value);
    free(cfg->allowed_hosts);
    cfg->allowed_hosts = joined;
    return 0;
}

/* --simulate-cpus and --reserved-cpus are checked here, so a typo stops
 * start-up with the flag named rather than at the first create. */
static int config_check_cpus(const daemon_config *cfg, gb_err *err)
{
    if (cfg->simulate_cpus) {
        cpus_topology t = {0};
        if (cpus_topology_simulate(cfg->simulate_cpus, &t, err) < 0)
            return err_prefix(err, "--simulate-cpus");
        cpus_topology_free(&t);
    }
    if (cfg->reserved_cpus) {
        int *ids = NULL;
        size_t n = 0;
        if (cpus_list_parse(cfg->reserved_cpus, &ids, &n, err) < 0)
            return err_prefix(err, "--reserved-cpus");
        free(ids);
    }
    return 0;
}

static int apply_terminal_idle(daemon_config *cfg, const char *value, gb_err *err)
{
    int64_t s = 0;
    if (strcmp(value, "0") != 0 && (time_duration_parse(value, &s) < 0 || s < 1 || s > 86400 * 30))
        return err_set(err, ERR_INVALID_PARAMS,
                       "--terminal-idle '%s': give a duration such as 30m or 2h (at most 30d), or "
                       "0 for never",
                       value);
    cfg->app.terminal_idle_s = (unsigned)s;
    return 0;
}

static int apply_port_range(daemon_config *cfg, const char *value, gb_err *err)
{
    return ports_range_parse(value, &cfg->app.port_start, &cfg->app.port_end, err);
}

static int apply_move_disk_reserve(daemon_config *cfg, const char *value, gb_err *err)
{
    uint64_t bytes = 0;
    if (strcmp(value, "0") != 0 && size_parse(value, &bytes, err) < 0)
        return err_prefix(err, "--move-disk-reserve '%s'", value);
    cfg->app.move_disk_reserve = bytes;
    return 0;
}

static int apply_gpu_source(daemon_config *cfg, const char *value, gb_err *err)
{
    int kind = gpu_source_parse(value);
    if (kind < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a GPU source; use auto, nvml, nvidia-smi or simulated", value);
    cfg->app.gpu_source = (enum gpu_source_kind)kind;
    cfg->origin_gpu_source = cfg->origin_now;
    return 0;
}

static int apply_simulate_gpus(daemon_config *cfg, const char *value, gb_err *err)
{
    (void)err; /* the option table's signature; nothing here can fail */
    char *copy = xstrdup(value);
    free(cfg->simulate_gpus);
    cfg->simulate_gpus = copy;
    cfg->origin_simulate = cfg->origin_now;
    return 0;
}

/* "1.5": a factor from 1.0 (no oversubscription) to GPUS_OVERSUBSCRIPTION_MAX. */
static int apply_oversubscription(daemon_config *cfg, const char *value, gb_err *err)
{
    char *end = NULL;
    errno = 0;
    double f = strtod(value, &end);
    if (!isdigit((unsigned char)value[0]) || *end || errno || !isfinite(f) || f < 1.0 ||
        f > GPUS_OVERSUBSCRIPTION_MAX)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a factor from 1.0 (no oversubscription) to %.1f", value,
                       GPUS_OVERSUBSCRIPTION_MAX);
    cfg->app.gpu_memory_oversubscription = f;
    return 0;
}

/* "0.5": seconds between readings of the GPUs, 0 (none) or 0.1 to 3600. */
static int apply_usage_interval(daemon_config *cfg, const char *value, gb_err *err)
{
    char *end = NULL;
    errno = 0;
    double s = strtod(value, &end);
    if (!isdigit((unsigned char)value[0]) || *end || errno || !isfinite(s) ||
        (s != 0 && (s < 0.1 || s > 3600)))
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a number of seconds from 0.1 to 3600 (0: no sampling)", value);
    cfg->app.usage_interval_s = s;
    return 0;
}

/* "400d", "12h", "90s": how long closed accounting intervals are kept. */
static int apply_accounting_retention(daemon_config *cfg, const char *value, gb_err *err)
{
    int64_t s = 0;
    if (time_duration_parse(value, &s) < 0 || s < 1)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a duration of at least 1s, such as 400d, 12h or 90s", value);
    cfg->app.accounting_retention_s = s;
    return 0;
}

static int set_string(char **dst, const char *value, gb_err *err);

/* "7d": the queue's fair-share half-life (docs/queue.md), 1m to 366d. */
static int apply_fairshare_half_life(daemon_config *cfg, const char *value, gb_err *err)
{
    int64_t s = 0;
    if (time_duration_parse(value, &s) < 0 || s < 60 || s > 366 * 86400)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a duration from 1m to 366d such as \"7d\" or \"36h\"", value);
    cfg->app.fairshare_half_life_s = (double)s;
    return 0;
}

static int apply_xid_critical(daemon_config *cfg, const char *value, gb_err *err)
{
    uint8_t bits[MONITOR_XID_LIMIT / 8];
    if (monitor_parse_xids(value, bits, err) < 0)
        return -1;
    return set_string(&cfg->xid_critical, value, err);
}

/* A GPU list ("GPU-a,3"): its syntax is checked now; whether each entry
 * names a GPU of this host, once the inventory is read (app.c). */
static int apply_gpu_list(char **field, const char *what, const char *value, gb_err *err)
{
    char **list = NULL;
    size_t n = 0;
    if (gpus_settings_parse_list(value, what, &list, &n, err) < 0)
        return -1;
    gpus_settings_list_free(list, n);
    char *copy = xstrdup(value);
    free(*field);
    *field = copy;
    return 0;
}

static int apply_gpu_exclude_sharing(daemon_config *cfg, const char *value, gb_err *err)
{
    return apply_gpu_list(&cfg->gpu_exclude_sharing, "--gpu-exclude-sharing", value, err);
}

static int apply_gpu_exclude(daemon_config *cfg, const char *value, gb_err *err)
{
    return apply_gpu_list(&cfg->gpu_exclude, "--gpu-exclude", value, err);
}

static int apply_log_level(daemon_config *cfg, const char *value, gb_err *err)
{
    int level = log_level_parse(value);
    if (level < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not a log level; use debug, info, warn or error", value);
    cfg->log_level = (enum log_level)level;
    return 0;
}

/* One line per kind, so the table below reads as a list of settings. */
#define FIELD(f) offsetof(daemon_config, f)
#define OPT_STR(n, a, d, h, f)                                                                     \
    {                                                                                              \
        .name = n, .kind = OPT_STRING, .arg = a, .def = d, .help = h, .offset = FIELD(f)           \
    }
#define OPT_NUM(n, a, d, h, f, lo, hi)                                                             \
    {                                                                                              \
        .name = n, .kind = OPT_UINT, .arg = a, .def = d, .help = h, .offset = FIELD(f), .min = lo, \
        .max = hi                                                                                  \
    }
#define OPT_BOOL(n, d, h, f)                                                                       \
    {                                                                                              \
        .name = n, .kind = OPT_SWITCH, .def = d, .help = h, .offset = FIELD(f)                     \
    }
#define OPT_ONE_OF(n, c, d, h, f)                                                                  \
    {                                                                                              \
        .name = n, .kind = OPT_CHOICE, .arg = c, .def = d, .help = h, .offset = FIELD(f),          \
        .choices = c                                                                               \
    }
#define OPT_FN(n, a, d, h, fn)                                                                     \
    {                                                                                              \
        .name = n, .kind = OPT_FUNC, .arg = a, .def = d, .help = h, .apply = fn                    \
    }
#define OPT_CLI(n, a, d, h, f)                                                                     \
    {                                                                                              \
        .name = n, .kind = OPT_CLI_ONLY, .arg = a, .def = d, .help = h, .offset = FIELD(f)         \
    }

static const config_option config_options[] = {
    OPT_FN("listen", "ADDR:PORT", CONFIG_LISTEN_DEFAULT,
           "address and port to serve the API on; port 0 picks a free port", apply_listen),
    OPT_STR("data-dir", "DIR", CONFIG_DATA_DIR_DEFAULT, "state directory (created if missing)",
            data_dir),
    OPT_STR("store", "URL", "sqlite://<data-dir>/state.db",
            "state store: sqlite:///path/state.db or etcd://host:port[,host:port...][/prefix]",
            store_url),
    OPT_STR("node", "NAME", "none (a single server)",
            "join the fleet on the etcd --store as node NAME: its records move under "
            "<prefix>/nodes/NAME/, and every node answers for all (docs/fleet.md)",
            node),
    OPT_STR("advertise", "URL", "http://<listen address>",
            "with --node: the URL the other nodes reach this one's API at", advertise),
    OPT_STR("node-labels", "KEY=VALUE[,...]", "none",
            "with --node: labels a create's nodeSelector can ask for", node_labels),
    OPT_STR("fleet-secret-file", "PATH", "one made by the first node, kept in etcd",
            "with --node: the fleet's secret (at least 32 characters; mode 600), which signs "
            "every request between nodes; give every node the same one (docs/fleet.md)",
            fleet_secret_file),
    OPT_STR("owner-of-unowned", "NAME", "the token file's first admin, or anonymous",
            "who owns the replica sets and volumes made before there were users "
            "(docs/users.md)",
            owner_of_unowned),
    OPT_NUM("store-wait", "SECONDS", "60",
            "how long start-up waits for an etcd store to answer before giving up (0: no wait)",
            app.store_wait_s, 0, 86400),
    OPT_STR("public-host", "HOST",
            "the --listen host, or this machine's name when that is 0.0.0.0 or ::",
            "the host name or address users reach this machine's published ports at: the host "
            "of a replica set's ssh command (docs/replicasets.md)",
            public_host),
    OPT_FN("proxy-listen", "ADDR:PORT|off", "off",
           "serve the replica sets' web services (JupyterLab, TensorBoard) on this second "
           "address, a web origin apart from the API and console, to their owners and admins "
           "(docs/services.md); port 0 picks a free port",
           apply_proxy_listen),
    OPT_STR("proxy-domain", "DOMAIN", "none (path URLs: /s/SET/SERVICE/)",
            "with --proxy-listen: also answer host names SERVICE--SET.DOMAIN (a wildcard DNS "
            "name pointing here), one web origin per service; services[].url uses them",
            proxy_domain),
    OPT_STR("proxy-url", "URL", "http://<public-host>:<proxy port>",
            "with --proxy-listen: the URL users reach the proxy at (https://... when TLS ends in "
            "front of it: its cookies are then Secure); in a fleet give every node the same one "
            "so that URLs do not name a node",
            proxy_url),
    OPT_NUM("proxy-max-per-ip", "N", "256",
            "with --proxy-listen: connections one client address may hold open to the proxy "
            "(0: no cap); one more is answered 429 and closed",
            proxy_max_per_ip, 0, 1000000),
    OPT_STR("docker-host", "URL", "$DOCKER_HOST or " CONFIG_DOCKER_HOST_DEFAULT,
            "Docker Engine API: unix:///path or tcp://host:port", docker_host),
    OPT_NUM("docker-wait", "SECONDS", "5",
            "how long start-up waits for Docker to answer before giving up", app.docker_wait_s, 0,
            3600),
    OPT_FN("port-range", "A-B", CONFIG_PORT_RANGE_DEFAULT, "host ports handed out to containers",
           apply_port_range),
    OPT_FN("gpu-source", "auto|nvml|nvidia-smi|simulated", "auto",
           "where the GPU inventory comes from; auto tries NVML, then nvidia-smi",
           apply_gpu_source),
    OPT_FN("simulate-gpus", "SPEC", "none",
           "simulated GPUs, e.g. 8xA100-80GB or 2xT4-16GB,1xH100-80GB (implies --gpu-source "
           "simulated)",
           apply_simulate_gpus),
    OPT_STR("simulate-cpus", "NODESxCORESxTHREADS", "none (the host's, from sysfs)",
            "simulated CPU topology for the core allocator, e.g. 2x16x2; containers get their "
            "cores mapped onto the host's real CPUs (docs/cpus.md)",
            simulate_cpus),
    OPT_STR("reserved-cpus", "CPULIST", "none",
            "logical CPUs kept for the host, never given to a replica set's cpuCount, e.g. 0-1",
            reserved_cpus),
    OPT_STR("nvml-library", "PATH", "libnvidia-ml.so.1", "NVML library to dlopen", nvml_library),
    OPT_STR("nvidia-smi", "PATH", "nvidia-smi (on PATH)", "nvidia-smi program to run", nvidia_smi),
    OPT_ONE_OF("gpu-attach", "nvidia|cdi|runtime", "nvidia",
               "how containers get their GPUs: Docker device requests, CDI names, or the nvidia "
               "runtime",
               gpu_attach),
    OPT_ONE_OF("carry-method", "auto|overlay|portable", "auto",
               "how a new version gets the old one's system disk: overlay moves the overlay2 upper "
               "directory (constant time), portable copies through Docker's changes and archive "
               "APIs; auto takes overlay where it can",
               carry_method),
    OPT_ONE_OF("move-compress", "auto|zstd|none", "auto",
               "a fleet's moves: compress the data this node sends to another with zstd (zstd), "
               "not at all (none), or when a sample of it compresses well (auto) "
               "(docs/fleet.md)",
               move_compress),
    OPT_FN("move-disk-reserve", "SIZE", "1GB",
           "a fleet's moves: space kept free on Docker's disk and the volumes' disk when a set "
           "moves here; a move that would eat into it is refused before anything is copied "
           "(code 1185, docs/fleet.md); 0 for none",
           apply_move_disk_reserve),
    OPT_STR("bind-prefixes", "DIR[,DIR...]", "none",
            "host directories under which replica sets may bind-mount host paths; none allows "
            "only gpubox volumes",
            bind_prefixes),
    OPT_NUM("timeslice-replicas", "N", "4",
            "time-slice replicas each GPU offers to gpuShared requests (each reserves memory / N)",
            app.timeslice_replicas, 1, GPUS_TIMESLICE_REPLICAS_MAX),
    OPT_BOOL("timeslice-equal-compute", "off",
             "give each time-slice replica an equal compute limit, 100/N percent of its card's "
             "time (N: --timeslice-replicas, or --gpu-max-tenants when fewer), enforced by the "
             "CUDA limiter; a set's own gpuCores comes first",
             app.timeslice_equal_compute),
    OPT_NUM("gpu-max-tenants", "N", "0 (no limit)",
            "most memory shares or time-slice replicas one GPU takes", app.gpu_max_tenants, 0,
            4096),
    OPT_FN("gpu-memory-oversubscription", "FACTOR", "1.0 (none)",
           "memory shares may promise a GPU's memory x FACTOR (1.0-4.0); more than 1.0 only "
           "makes sense with a library that enforces limits (--hami-core)",
           apply_oversubscription),
    OPT_FN("gpu-exclude-sharing", "GPU[,GPU...]", "none",
           "GPUs (UUIDs or indexes) that are only handed out whole, never shared",
           apply_gpu_exclude_sharing),
    OPT_FN("gpu-exclude", "GPU[,GPU...]", "none", "GPUs (UUIDs or indexes) never handed out at all",
           apply_gpu_exclude),
    OPT_FN("usage-interval", "SECONDS", "1",
           "how often the GPUs' live usage is read (decimals allowed; 0: never, and idleStop is "
           "not enforced) (docs/usage.md)",
           apply_usage_interval),
    OPT_FN("accounting-retention", "DURATION", "400d",
           "closed accounting intervals older than this are deleted; their usage stays in the "
           "hourly rollup that usage queries, /metrics and fair share read (units d, h, m, s; "
           "docs/users.md)",
           apply_accounting_retention),
    OPT_FN("xid-critical", "XID[,XID...]", MONITOR_XID_DEFAULT,
           "XID errors that mark a card unhealthy until an admin clears it", apply_xid_critical),
    OPT_ONE_OF("share-overrun", "report|kill", "report",
               "what the usage monitor does when a container's processes use more than its "
               "memory share on a card (NVML's per-process memory): report it (the set's usage, "
               "an event, a metric), or report it and kill its largest process there "
               "(docs/gpus.md)",
               share_overrun),
    OPT_NUM("idle-threshold", "PERCENT", "5",
            "utilization under which a card counts as idle, for idleStop", app.idle_threshold, 0,
            100),
    OPT_NUM("kept-logs-mib", "MIB", "32",
            "the most a replica set's kept logs (its old versions' lines, under "
            "<data-dir>/logs/) take on disk, a quarter of it per version; the oldest go first",
            app.kept_logs_mib, 1, 1048576),
    OPT_FN("terminal-idle", "DURATION", "30m",
           "close a terminal (console, gpubox exec -it) after this long without input or output "
           "(e.g. 30m, 2h; 0: never) (docs/access.md)",
           apply_terminal_idle),
    OPT_NUM("terminal-max-per-user", "N", "8",
            "terminals one user may have open at once; past it opening one answers 429 (1160)",
            app.terminal_max_per_user, 1, 1024),
    OPT_STR("hami-core", "PATH", "none (share limits are scheduled but not enforced)",
            "HAMi-core library (libvgpu.so) to mount read-only and LD_PRELOAD into containers "
            "with GPU shares, so their memory limits are enforced",
            hami_core),
    OPT_STR("cuda-limiter", "PATH|off",
            "libgpubox-cuda.so beside gpuboxd (cuda/ in a build tree, ../lib/gpubox/ installed)",
            "gpubox's CUDA limiter to mount read-only and preload (/etc/ld.so.preload) into "
            "containers with GPU shares, so their memory shares hold (docs/gpus.md); off: none. "
            "--hami-core, when given, is used instead",
            cuda_limiter),
    OPT_ONE_OF("volume-backend", "loop|xfsquota|plain", "loop",
               "how sized volumes are made (docs/volumes.md)", volume_backend),
    OPT_ONE_OF("volume-fs", "ext4|xfs", "ext4",
               "filesystem of new loop volumes (each keeps its own): ext4 grows while in use only "
               "when gpuboxd has CAP_SYS_RESOURCE; xfs grows in use without it, is at least 300MB, "
               "and shrinks by copying while not in use; needs xfsprogs",
               volume_fs),
    OPT_FN("log-level", "debug|info|warn|error", "info", "least severe log lines written to stderr",
           apply_log_level),
    OPT_BOOL("compat-http-200", "off",
             "answer every API response with HTTP 200, as gpu-docker-api does (the envelope code "
             "still tells the error)",
             compat_http_200),
    OPT_NUM("max-connections", "N", "1024", "simultaneous HTTP connections", max_connections, 1,
            1000000),
    OPT_NUM("max-connections-per-ip", "N", "256",
            "simultaneous HTTP connections from one client address (0: no limit)",
            max_connections_per_ip, 0, 1000000),
    OPT_NUM("connection-timeout", "SECONDS", "60",
            "idle HTTP connections are closed after this (0: never)", connection_timeout_s, 0,
            86400),
    OPT_NUM("shutdown-timeout", "SECONDS", "10",
            "on SIGTERM, how long requests in flight may run before connections are closed",
            shutdown_timeout_s, 0, 3600),
    OPT_STR("token-file", "PATH", "none",
            "bearer tokens, one `name:role:token` line each (role admin or viewer); the file "
            "must not be readable by other users. Without it the API has no authentication and "
            "may only listen on loopback",
            token_file),
    OPT_STR("registry-auth-file", "PATH", "none",
            "registry credentials for image pulls, one `registry username password` line each "
            "(registry as in 127.0.0.1:5000 or docker.io); the file must not be readable by other "
            "users",
            registry_auth_file),
    OPT_FN("fairshare-half-life", "DURATION", "7d",
           "the queue's fair share: a user's past use of cards counts half after this long "
           "(docs/queue.md)",
           apply_fairshare_half_life),
    OPT_STR("queue-webhook", "URL", "none",
            "POST a JSON note to this URL when a queued replica set starts (docs/queue.md)",
            queue_webhook),
    OPT_BOOL("insecure-no-auth", "off",
             "allow listening beyond loopback without --token-file: anyone who reaches the port "
             "can run containers on this host",
             insecure_no_auth),
    OPT_STR("tls-cert", "PATH", "none",
            "PEM certificate (chain) to serve HTTPS with; needs --tls-key", tls_cert),
    OPT_STR("tls-key", "PATH", "none",
            "PEM private key of --tls-cert; must not be readable by other users", tls_key),
    OPT_STR("cors-origins", "ORIGIN[,ORIGIN...]", "none (CORS off)",
            "web origins (scheme://host[:port]) whose pages may call the API from a browser",
            cors_origins),
    OPT_FN("allowed-host", "NAME[,NAME...]", "none",
           "more host names the API answers to (the Host a client sends), besides IP addresses, "
           "localhost, this machine's name and the --public-host, --listen and --advertise hosts; "
           "other names are refused (421) against DNS rebinding. May be given more than once; * "
           "answers any name",
           apply_allowed_host),
    OPT_CLI("config", "FILE", "none",
            "read settings from FILE (`key = value` lines; keys are these flag names); flags "
            "override it",
            config_file),
    OPT_CLI("help", NULL, NULL, "show this help and exit", show_help),
    OPT_CLI("version", NULL, NULL, "show the version and exit", show_version),
    OPT_CLI("list-fault-points", NULL, NULL,
            "list the steps GPUBOX_FAULT can stop at (one a line: the value, a tab, the "
            "operation) and exit",
            show_fault_points),
};

static const config_option *config_find(const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(config_options); i++)
        if (strlen(config_options[i].name) == len &&
            strncmp(config_options[i].name, name, len) == 0)
            return &config_options[i];
    return NULL;
}

static int parse_bool(const char *value, bool *out)
{
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        if (strcasecmp(value, yes[i]) == 0)
            return *out = true, 0;
        if (strcasecmp(value, no[i]) == 0)
            return *out = false, 0;
    }
    return -1;
}

static bool choice_ok(const char *choices, const char *value)
{
    size_t len = strlen(value);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, value, n) == 0)
            return true;
        p += n + (bar ? 1 : 0);
    }
    return false;
}

static int set_string(char **field, const char *value, gb_err *err)
{
    (void)err; /* kept so it reads like the other setters; it cannot fail */
    char *copy = xstrdup(value);
    free(*field);
    *field = copy;
    return 0;
}

/* Apply one value; the message says what is wrong with it, the caller adds
 * where it came from. */
static int config_apply(daemon_config *cfg, const config_option *o, const char *value, gb_err *err)
{
    void *field = (char *)cfg + o->offset;
    if (!value || (!value[0] && o->kind != OPT_SWITCH)) {
        err_set(err, ERR_INVALID_PARAMS, "needs a value (%s)", o->arg ? o->arg : "");
        return -1;
    }
    switch (o->kind) {
    case OPT_STRING:
        return set_string(field, value, err);
    case OPT_CHOICE:
        if (!choice_ok(o->choices, value))
            return err_set(err, ERR_INVALID_PARAMS, "'%s' is not one of %s", value, o->choices);
        return set_string(field, value, err);
    case OPT_SWITCH:
        if (parse_bool(value[0] ? value : "true", field) < 0)
            return err_set(err, ERR_INVALID_PARAMS, "'%s' is not a boolean; use true or false",
                           value);
        return 0;
    case OPT_UINT: {
        char *end = NULL;
        errno = 0;
        unsigned long n = strtoul(value, &end, 10);
        if (!isdigit((unsigned char)value[0]) || *end || errno || n < o->min || n > o->max)
            return err_set(err, ERR_INVALID_PARAMS, "'%s' is not a whole number from %u to %u",
                           value, o->min, o->max);
        *(unsigned *)field = (unsigned)n;
        return 0;
    }
    case OPT_FUNC:
        return o->apply(cfg, value, err);
    case OPT_CLI_ONLY:
        break;
    }
    return err_set(err, ERR_INTERNAL, "unhandled option kind");
}

int config_set(daemon_config *cfg, const char *key, const char *value, gb_err *err)
{
    const config_option *o = config_find(key, strlen(key));
    if (!o || o->kind == OPT_CLI_ONLY)
        return err_set(err, ERR_INVALID_PARAMS, "unknown setting '%s'", key);
    if (config_apply(cfg, o, value, err) < 0)
        return err_prefix(err, "%s", key);
    return 0;
}

int config_parse_listen(const char *s, char **host, uint16_t *port, gb_err *err)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    const char *h = s, *h_end = colon;
    if (s && s[0] == '[') { /* [v6]:port */
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return err_set(err, ERR_INVALID_PARAMS,
                           "'%s' is not ADDR:PORT; write IPv6 addresses as [::1]:2378", s);
        h = s + 1, h_end = close, colon = close + 1;
    }
    if (!colon || h_end == h)
        return err_set(err, ERR_INVALID_PARAMS,
                       "'%s' is not ADDR:PORT (e.g. 127.0.0.1:2378, 0.0.0.0:2378)", s ? s : "");
    char *end = NULL;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || errno || p > 65535)
        return err_set(err, ERR_INVALID_PARAMS, "'%s': port must be a number from 0 to 65535", s);
    *host = xstrndup(h, (size_t)(h_end - h));
    *port = (uint16_t)p;
    return 0;
}

int config_init(daemon_config *cfg, gb_err *err)
{
    *cfg = (daemon_config){
        .log_level = LOG_INFO,
        .max_connections = 1024,
        .max_connections_per_ip = 256,
        .proxy_max_per_ip = 256,
        .connection_timeout_s = 60,
        .shutdown_timeout_s = 10,
        .app = {.gpu_source = GPU_SOURCE_AUTO,
                .docker_wait_s = 5,
                .store_wait_s = 60,
                .timeslice_replicas = GPUS_TIMESLICE_REPLICAS_DEFAULT,
                .gpu_memory_oversubscription = 1.0,
                .usage_interval_s = 1,
                .idle_threshold = MONITOR_IDLE_THRESHOLD_DEFAULT,
                .kept_logs_mib = RS_LOGS_KEEP_SET_MIB_DEFAULT,
                .terminal_idle_s = TERMINAL_IDLE_S_DEFAULT,
                .terminal_max_per_user = TERMINAL_MAX_PER_USER_DEFAULT},
    };
    const char *docker_host = getenv("DOCKER_HOST");
    if (apply_listen(cfg, CONFIG_LISTEN_DEFAULT, err) < 0 ||
        set_string(&cfg->data_dir, CONFIG_DATA_DIR_DEFAULT, err) < 0 ||
        set_string(&cfg->docker_host,
                   docker_host && docker_host[0] ? docker_host : CONFIG_DOCKER_HOST_DEFAULT,
                   err) < 0 ||
        set_string(&cfg->gpu_attach, "nvidia", err) < 0 ||
        set_string(&cfg->carry_method, "auto", err) < 0 ||
        set_string(&cfg->move_compress, "auto", err) < 0 ||
        set_string(&cfg->volume_backend, "loop", err) < 0 ||
        set_string(&cfg->volume_fs, "ext4", err) < 0 ||
        set_string(&cfg->share_overrun, "report", err) < 0 ||
        apply_port_range(cfg, CONFIG_PORT_RANGE_DEFAULT, err) < 0 ||
        apply_move_disk_reserve(cfg, "1GB", err) < 0) {
        config_free(cfg);
        return -1;
    }
    cfg->origin_now = CONFIG_FROM_FLAG; /* config_set and flags, unless a file is being read */
    return 0;
}

void config_free(daemon_config *cfg)
{
    char **owned[] = {&cfg->listen,         &cfg->listen_host,
                      &cfg->data_dir,       &cfg->store_url,
                      &cfg->docker_host,    &cfg->simulate_gpus,
                      &cfg->nvml_library,   &cfg->nvidia_smi,
                      &cfg->gpu_attach,     &cfg->volume_backend,
                      &cfg->volume_fs,      &cfg->config_file,
                      &cfg->bind_prefixes,  &cfg->gpu_exclude_sharing,
                      &cfg->gpu_exclude,    &cfg->hami_core,
                      &cfg->token_file,     &cfg->tls_cert,
                      &cfg->tls_key,        &cfg->cors_origins,
                      &cfg->carry_method,   &cfg->node,
                      &cfg->advertise,      &cfg->node_labels,
                      &cfg->node_store_url, &cfg->owner_of_unowned,
                      &cfg->xid_critical,   &cfg->registry_auth_file,
                      &cfg->queue_webhook,  &cfg->public_host,
                      &cfg->simulate_cpus,  &cfg->reserved_cpus,
                      &cfg->allowed_hosts,  &cfg->share_overrun,
                      &cfg->proxy_listen,   &cfg->proxy_listen_host,
                      &cfg->proxy_domain,   &cfg->proxy_url,
                      &cfg->proxy_address,  &cfg->move_compress};
    for (size_t i = 0; i < ARRAY_SIZE(owned); i++) {
        free(*owned[i]);
        *owned[i] = NULL;
    }
    free(cfg->fleet_secret_file);
    cfg->fleet_secret_file = NULL;
    free(cfg->cuda_limiter);
    cfg->cuda_limiter = NULL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

int config_parse_text(daemon_config *cfg, const char *text, const char *origin_name, gb_err *err)
{
    _cleanup_free_ char *copy = xstrdup(text);
    cfg->origin_now = CONFIG_FROM_FILE;
    int lineno = 0;
    for (char *rest = copy, *line; (line = strsep(&rest, "\n"));) {
        lineno++;
        line = trim(line);
        if (!line[0] || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return err_set(err, ERR_INVALID_PARAMS, "%s:%d: expected 'key = value', got '%s'",
                           origin_name, lineno, line);
        *eq = '\0';
        char *key = trim(line), *value = trim(eq + 1);
        for (char *p = key; *p; p++)
            if (*p == '_')
                *p = '-';
        size_t vlen = strlen(value);
        if (vlen >= 2 && (value[0] == '"' || value[0] == '\'') && value[vlen - 1] == value[0]) {
            value[vlen - 1] = '\0';
            value++;
        }
        const config_option *o = config_find(key, strlen(key));
        if (!o)
            return err_set(err, ERR_INVALID_PARAMS,
                           "%s:%d: unknown key '%s'; keys are the flag names without '--' "
                           "(gpuboxd --help lists them)",
                           origin_name, lineno, key);
        if (o->kind == OPT_CLI_ONLY)
            return err_set(err, ERR_INVALID_PARAMS, "%s:%d: '%s' can only be given as a flag",
                           origin_name, lineno, key);
        if (config_apply(cfg, o, value, err) < 0)
            return err_prefix(err, "%s:%d: %s", origin_name, lineno, key);
    }
    cfg->origin_now = CONFIG_FROM_FLAG;
    return 0;
}

int config_parse_file(daemon_config *cfg, const char *path, gb_err *err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "r");
    if (!f)
        return err_set(err, ERR_INVALID_PARAMS, "cannot read config file %s: %s", path,
                       strerror(errno));
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return err_set(err, ERR_INTERNAL, "out of memory reading %s", path);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, mem);
    bool failed = ferror(f);
    fclose(mem);
    if (failed || !text)
        return err_set(err, ERR_INVALID_PARAMS, "cannot read config file %s", path);
    return config_parse_text(cfg, text, path, err);
}

/* Split argv[*i] into option and value, consuming the next argument as the
 * value when the option takes one and no "=value" was given. */
static int config_next_flag(int argc, char **argv, int *i, const config_option **opt,
                            const char **value, gb_err *err)
{
    const char *arg = argv[*i];
    if (strcmp(arg, "-h") == 0)
        arg = "--help";
    if (strncmp(arg, "--", 2) != 0 || !arg[2])
        return err_set(err, ERR_INVALID_PARAMS,
                       "unexpected argument '%s'; gpuboxd takes only flags", arg);
    const char *name = arg + 2, *eq = strchr(name, '=');
    *opt = config_find(name, eq ? (size_t)(eq - name) : strlen(name));
    if (!*opt)
        return err_set(err, ERR_INVALID_PARAMS, "unknown flag '%.*s'",
                       (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
    if (eq) {
        *value = eq + 1;
    } else if (!(*opt)->arg) {
        *value = "";
    } else if (*i + 1 < argc) {
        *value = argv[++*i];
    } else {
        return err_set(err, ERR_INVALID_PARAMS, "--%s needs a value (%s)", (*opt)->name,
                       (*opt)->arg);
    }
    return 0;
}

int config_load(daemon_config *cfg, int argc, char **argv, gb_err *err)
{
    if (config_init(cfg, err) < 0)
        return -1;
    /* Pass 1: check every flag's syntax and find --config, --help,
     * --version and --list-fault-points, so the file can be read before the flags that override it.
     */
    for (int i = 1; i < argc; i++) {
        const config_option *o = NULL;
        const char *value = NULL;
        if (config_next_flag(argc, argv, &i, &o, &value, err) < 0 || !o || !value)
            return -1;
        if (strcmp(o->name, "help") == 0)
            cfg->show_help = true;
        else if (strcmp(o->name, "version") == 0)
            cfg->show_version = true;
        else if (strcmp(o->name, "list-fault-points") == 0)
            cfg->show_fault_points = true;
        else if (strcmp(o->name, "config") == 0 && set_string(&cfg->config_file, value, err) < 0)
            return -1;
    }
    if (cfg->show_help || cfg->show_version || cfg->show_fault_points)
        return 0;
    if (cfg->config_file && config_parse_file(cfg, cfg->config_file, err) < 0)
        return -1;
    /* Pass 2: apply the flags over the file's values. */
    for (int i = 1; i < argc; i++) {
        const config_option *o = NULL;
        const char *value = NULL;
        if (config_next_flag(argc, argv, &i, &o, &value, err) < 0 || !o || !value)
            return -1; /* cannot happen: pass 1 checked the same flags */
        if (o->kind != OPT_CLI_ONLY && config_apply(cfg, o, value, err) < 0)
            return err_prefix(err, "--%s", o->name);
    }
    return config_finalize(cfg, err);
}

bool config_host_is_loopback(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (!host || !host[0] || getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return false;
    bool loopback = true;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)ai->ai_addr;
            loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        } else if (ai->ai_family == AF_INET6) {
            const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
            loopback &=
                IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
        } else {
            loopback = false;
        }
    }
    freeaddrinfo(res);
    return loopback;
}

/* Safe by default: without tokens the API is as powerful as root on this
 * host, so it may only be reached from this host unless the operator says
 * in so many words that something else guards the port. */
static int config_check_exposure(const daemon_config *cfg, gb_err *err)
{
    if (cfg->token_file && cfg->insecure_no_auth)
        return err_set(err, ERR_INVALID_PARAMS,
                       "--insecure-no-auth contradicts --token-file; drop one of them");
    if (!cfg->tls_cert != !cfg->tls_key)
        return err_set(err, ERR_INVALID_PARAMS,
                       "HTTPS needs both --tls-cert and --tls-key; %s is missing",
                       cfg->tls_cert ? "--tls-key" : "--tls-cert");
    if (!cfg->token_file && !cfg->insecure_no_auth && !config_host_is_loopback(cfg->listen_host))
        return err_set(err, ERR_INVALID_PARAMS,
                       "--listen %s is reachable from other machines, but no --token-file is "
                       "given, so anyone who reaches it could run containers on this host; give "
                       "--token-file (docs/security.md), listen on 127.0.0.1, or pass "
                       "--insecure-no-auth if a firewall or an authenticating proxy guards the "
                       "port",
                       cfg->listen);
    if (cfg->proxy_listen && !cfg->token_file && !cfg->insecure_no_auth &&
        !config_host_is_loopback(cfg->proxy_listen_host))
        return err_set(err, ERR_INVALID_PARAMS,
                       "--proxy-listen %s is reachable from other machines, but no --token-file "
                       "is given, so anyone who reaches it could use every instance's services; "
                       "give --token-file, listen on 127.0.0.1, or pass --insecure-no-auth",
                       cfg->proxy_listen);
    if (!cfg->proxy_listen && (cfg->proxy_domain || cfg->proxy_url))
        return err_set(err, ERR_INVALID_PARAMS, "--%s needs --proxy-listen ADDR:PORT",
                       cfg->proxy_domain ? "proxy-domain" : "proxy-url");
    return 0;
}

/* --hami-core must name a readable regular file; it is kept as an absolute
 * path, since Docker mounts it from the host. Whether it really is
 * HAMi-core cannot be told without a GPU; the operator's word stands. */
static int config_check_hami_core(daemon_config *cfg, gb_err *err)
{
    char resolved[PATH_MAX];
    struct stat st;
    if (!realpath(cfg->hami_core, resolved) || stat(resolved, &st) < 0)
        return err_set(err, ERR_INVALID_PARAMS, "--hami-core %s: %s", cfg->hami_core,
                       strerror(errno));
    if (!S_ISREG(st.st_mode) || access(resolved, R_OK) < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "--hami-core %s is not a readable file; point it at HAMi-core's "
                       "libvgpu.so",
                       cfg->hami_core);
    return set_string(&cfg->hami_core, resolved, err);
}

/* --cuda-limiter: "off", a readable regular file (kept as an absolute path,
 * since Docker mounts it from the host), or, when not given, the library
 * built or installed with this gpuboxd, if there is one (none: shares are
 * not enforced, and the API says so). */
static int config_finalize_cuda_limiter(daemon_config *cfg, gb_err *err)
{
    char resolved[PATH_MAX];
    struct stat st;
    if (cfg->cuda_limiter && strcmp(cfg->cuda_limiter, "off") == 0) {
        free(cfg->cuda_limiter);
        cfg->cuda_limiter = NULL;
        return 0;
    }
    if (cfg->cuda_limiter) {
        if (!realpath(cfg->cuda_limiter, resolved) || stat(resolved, &st) < 0)
            return err_set(err, ERR_INVALID_PARAMS, "--cuda-limiter %s: %s", cfg->cuda_limiter,
                           strerror(errno));
        if (!S_ISREG(st.st_mode) || access(resolved, R_OK) < 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "--cuda-limiter %s is not a readable file; point it at "
                           "libgpubox-cuda.so, or say off",
                           cfg->cuda_limiter);
        return set_string(&cfg->cuda_limiter, resolved, err);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    static const char *const beside[] = {"/cuda/libgpubox-cuda.so",
                                         "/../lib/gpubox/libgpubox-cuda.so"};
    for (size_t i = 0; i < ARRAY_SIZE(beside); i++) {
        char candidate[PATH_MAX + 64];
        snprintf(candidate, sizeof(candidate), "%s%s", exe, beside[i]);
        if (realpath(candidate, resolved) && stat(resolved, &st) == 0 && S_ISREG(st.st_mode))
            return set_string(&cfg->cuda_limiter, resolved, err);
    }
    return 0;
}

/* --public-host: a host name or address as ssh takes it after "root@"; by
 * default the --listen host, unless that is a wildcard, which names no
 * host: then this machine's name. */
static int config_finalize_public_host(daemon_config *cfg, gb_err *err)
{
    if (!cfg->public_host) {
        char name[256] = "localhost";
        bool wildcard = !cfg->listen_host[0] || strcmp(cfg->listen_host, "0.0.0.0") == 0 ||
                        strcmp(cfg->listen_host, "::") == 0;
        if (wildcard && gethostname(name, sizeof(name)) == 0)
            name[sizeof(name) - 1] = '\0';
        if (set_string(&cfg->public_host, wildcard ? name : cfg->listen_host, err) < 0)
            return -1;
    }
    size_t len = strlen(cfg->public_host);
    if (len == 0 || len > 253 ||
        strspn(cfg->public_host,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != len ||
        cfg->public_host[0] == '-')
        return err_set(err, ERR_INVALID_PARAMS,
                       "--public-host '%.64s' is not a host name or address (letters, digits, "
                       "'.', '-', ':'; at most 253)",
                       cfg->public_host);
    cfg->app.public_host = cfg->public_host;
    return 0;
}

/* --proxy-domain: a DNS name; --proxy-url: http(s)://HOST[:PORT] with no
 * path (the '/' at its end dropped). */
static int config_finalize_proxy(daemon_config *cfg, gb_err *err)
{
    if (cfg->proxy_domain) {
        size_t len = strlen(cfg->proxy_domain);
        if (len == 0 || len > 200 ||
            strspn(cfg->proxy_domain,
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != len ||
            cfg->proxy_domain[0] == '.' || cfg->proxy_domain[0] == '-')
            return err_set(err, ERR_INVALID_PARAMS,
                           "--proxy-domain '%.64s' is not a DNS name such as apps.example.org",
                           cfg->proxy_domain);
        for (char *c = cfg->proxy_domain; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    }
    if (cfg->proxy_url) {
        size_t len = strlen(cfg->proxy_url);
        while (len > 0 && cfg->proxy_url[len - 1] == '/')
            cfg->proxy_url[--len] = '\0';
        const char *host = strncmp(cfg->proxy_url, "http://", 7) == 0    ? cfg->proxy_url + 7
                           : strncmp(cfg->proxy_url, "https://", 8) == 0 ? cfg->proxy_url + 8
                                                                         : NULL;
        if (!host || !*host || len >= 200 || strpbrk(host, "/ \t\r\n?#@"))
            return err_set(err, ERR_INVALID_PARAMS,
                           "--proxy-url '%.64s' must be http://HOST[:PORT] or https://HOST[:PORT]",
                           cfg->proxy_url);
    }
    return 0;
}

/* Settings that depend on others, and the defaults derived from them. */
/* --node needs an etcd store and a URL the other nodes can reach: given,
 * or this node's listen address when it is one. */
static int config_finalize_fleet(daemon_config *cfg, gb_err *err)
{
    if (!cfg->node) {
        if (cfg->advertise || cfg->node_labels || cfg->fleet_secret_file)
            return err_set(err, ERR_INVALID_PARAMS, "--%s needs --node NAME",
                           cfg->advertise     ? "advertise"
                           : cfg->node_labels ? "node-labels"
                                              : "fleet-secret-file");
        return 0;
    }
    if (fleet_node_name_check(cfg->node, err) < 0)
        return err_prefix(err, "--node");
    json_t *labels = NULL;
    if (fleet_labels_parse(cfg->node_labels, &labels, err) < 0)
        return err_prefix(err, "--node-labels");
    json_decref(labels);
    _cleanup_free_ char *child = xasprintf("nodes/%s", cfg->node);
    free(cfg->node_store_url);
    cfg->node_store_url = store_url_child(cfg->store_url, child);
    if (!cfg->node_store_url)
        return err_set(err, ERR_INVALID_PARAMS,
                       "--node needs an etcd store shared by the fleet (--store "
                       "etcd://host:port[,host:port...]/prefix), not %s",
                       cfg->store_url);
    if (!cfg->advertise) {
        bool wildcard = strcmp(cfg->listen_host, "0.0.0.0") == 0 ||
                        strcmp(cfg->listen_host, "::") == 0 || cfg->listen_port == 0;
        if (wildcard)
            return err_set(err, ERR_INVALID_PARAMS,
                           "--node with --listen %s needs --advertise URL (how the other nodes "
                           "reach this one, e.g. http://10.0.0.5:2378)",
                           cfg->listen);
        bool v6 = strchr(cfg->listen_host, ':') != NULL;
        cfg->advertise =
            xasprintf("%s://%s%s%s:%u", cfg->tls_cert ? "https" : "http", v6 ? "[" : "",
                      cfg->listen_host, v6 ? "]" : "", cfg->listen_port);
    }
    size_t len = strlen(cfg->advertise);
    if ((strncmp(cfg->advertise, "http://", 7) != 0 &&
         strncmp(cfg->advertise, "https://", 8) != 0) ||
        len >= 200 || strpbrk(cfg->advertise, " \t\r\n?#"))
        return err_set(err, ERR_INVALID_PARAMS,
                       "--advertise '%s' must be http://HOST:PORT or https://HOST:PORT",
                       cfg->advertise);
    while (len > 0 && cfg->advertise[len - 1] == '/')
        cfg->advertise[--len] = '\0';
    return 0;
}

int config_finalize(daemon_config *cfg, gb_err *err)
{
    if (config_check_exposure(cfg, err) < 0)
        return -1;
    if (cfg->data_dir[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
            return err_set(err, ERR_INTERNAL, "cannot make --data-dir '%s' absolute",
                           cfg->data_dir);
        char *abs = xasprintf("%s/%s", cwd, cfg->data_dir);
        free(cfg->data_dir);
        cfg->data_dir = abs;
    }
    if (!cfg->store_url)
        cfg->store_url = xasprintf("sqlite://%s/state.db", cfg->data_dir);

    /* --simulate-gpus implies --gpu-source simulated; an explicit other
     * source given at the same level (both flags, or both in the file) is a
     * contradiction, while a flag overrides what the file said. */
    if (cfg->simulate_gpus) {
        if (cfg->origin_gpu_source == cfg->origin_simulate &&
            cfg->app.gpu_source != GPU_SOURCE_SIMULATED)
            return err_set(err, ERR_INVALID_PARAMS,
                           "--simulate-gpus implies --gpu-source simulated, but another "
                           "--gpu-source was given; drop one of them");
        if (cfg->origin_gpu_source <= cfg->origin_simulate)
            cfg->app.gpu_source = GPU_SOURCE_SIMULATED;
    }
    if (cfg->app.gpu_source == GPU_SOURCE_SIMULATED) {
        if (!cfg->simulate_gpus)
            return err_set(err, ERR_INVALID_PARAMS,
                           "--gpu-source simulated needs --simulate-gpus SPEC (e.g. 8xA100-80GB)");
        gpu_inventory probe = {0};
        if (gpu_sim_load(cfg->simulate_gpus, &probe, err) < 0)
            return err_prefix(err, "--simulate-gpus");
        gpu_inventory_free(&probe);
    }

    if (cfg->hami_core && config_check_hami_core(cfg, err) < 0)
        return -1;
    if (config_finalize_cuda_limiter(cfg, err) < 0)
        return -1;
    if (config_check_cpus(cfg, err) < 0)
        return -1;

    if (config_finalize_fleet(cfg, err) < 0 || config_finalize_public_host(cfg, err) < 0 ||
        config_finalize_proxy(cfg, err) < 0)
        return -1;

    cfg->app.data_dir = cfg->data_dir;
    cfg->app.store_url = cfg->node_store_url ? cfg->node_store_url : cfg->store_url;
    cfg->app.fleet_url = cfg->node ? cfg->store_url : NULL;
    cfg->app.node = cfg->node;
    cfg->app.advertise = cfg->advertise;
    cfg->app.node_labels = cfg->node_labels;
    cfg->app.fleet_secret_file = cfg->fleet_secret_file;
    cfg->app.owner_of_unowned = cfg->owner_of_unowned;
    cfg->app.docker_host = cfg->docker_host;
    cfg->app.simulate_gpus = cfg->simulate_gpus;
    cfg->app.simulate_cpus = cfg->simulate_cpus;
    cfg->app.reserved_cpus = cfg->reserved_cpus;
    cfg->app.nvml_library = cfg->nvml_library;
    cfg->app.nvidia_smi = cfg->nvidia_smi;
    cfg->app.gpu_attach = cfg->gpu_attach;
    cfg->app.carry_method = cfg->carry_method;
    cfg->app.move_compress = cfg->move_compress;
    cfg->app.volume_backend = cfg->volume_backend;
    cfg->app.volume_fs = cfg->volume_fs;
    cfg->app.bind_prefixes = cfg->bind_prefixes;
    cfg->app.gpu_exclude_sharing = cfg->gpu_exclude_sharing;
    cfg->app.gpu_exclude = cfg->gpu_exclude;
    cfg->app.hami_core = cfg->hami_core;
    cfg->app.cuda_limiter = cfg->cuda_limiter;
    cfg->app.xid_critical = cfg->xid_critical;
    cfg->app.share_overrun_kill = strcmp(cfg->share_overrun, "kill") == 0;
    cfg->app.registry_auth_file = cfg->registry_auth_file;
    cfg->app.queue_webhook = cfg->queue_webhook;
    /* the proxy's URL is known once it listens (daemon/main.c) */
    cfg->app.proxy_domain = cfg->proxy_domain;
    return 0;
}

void config_usage(FILE *out)
{
    fprintf(out, "Usage: gpuboxd [FLAGS]\n\n"
                 "gpuboxd serves gpubox's HTTP API: containers with whole or shared GPUs,\n"
                 "sized volumes and host ports on this machine's Docker.\n\n"
                 "Flags (each except config, help and version can also be a `name = value`\n"
                 "line in the --config file; flags override the file):\n");
    for (size_t i = 0; i < ARRAY_SIZE(config_options); i++) {
        const config_option *o = &config_options[i];
        fprintf(out, "  --%s%s%s\n        %s\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "",
                o->help);
        if (o->def)
            fprintf(out, "        (default: %s)\n", o->def);
    }
    fprintf(out, "\nSIGTERM or SIGINT stops gpuboxd gracefully. See docs/daemon.md.\n");
}
