/*
 * test_config.c - gpuboxd's settings: defaults, flags, the config file,
 * their precedence, and the errors (which must name the flag or the file
 * and line).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/config.h"

#define ARGV(...) ((char *[]){"gpuboxd", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"gpuboxd", __VA_ARGS__}) / sizeof(char *)))
#define LOAD(cfg, err, ...) config_load(cfg, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), err)

static char config_path[64];

static void write_config(const char *text)
{
    strcpy(config_path, "/tmp/gpubox-test-config-XXXXXX");
    int fd = mkstemp(config_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int remove_config(void **state)
{
    (void)state;
    if (config_path[0])
        unlink(config_path);
    config_path[0] = '\0';
    return 0;
}

static void test_defaults(void **state)
{
    (void)state;
    unsetenv("DOCKER_HOST");
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    char *argv[] = {"gpuboxd", NULL};
    assert_int_equal(config_load(&cfg, 1, argv, &err), 0);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.listen_port, 2378);
    assert_string_equal(cfg.app.data_dir, "/var/lib/gpubox");
    assert_string_equal(cfg.app.store_url, "sqlite:///var/lib/gpubox/state.db");
    assert_string_equal(cfg.app.docker_host, "unix:///var/run/docker.sock");
    assert_int_equal(cfg.app.port_start, 40000);
    assert_int_equal(cfg.app.port_end, 65535);
    assert_int_equal(cfg.app.gpu_source, GPU_SOURCE_AUTO);
    assert_null(cfg.app.simulate_gpus);
    assert_null(cfg.app.nvml_library);
    assert_string_equal(cfg.app.gpu_attach, "nvidia");
    assert_string_equal(cfg.app.volume_backend, "loop");
    assert_int_equal(cfg.app.docker_wait_s, 5);
    assert_int_equal(cfg.app.store_wait_s, 60);
    assert_int_equal(cfg.log_level, LOG_INFO);
    assert_false(cfg.compat_http_200);
    assert_false(cfg.show_help);
    config_free(&cfg);
}

static void test_docker_host_from_environment(void **state)
{
    (void)state;
    setenv("DOCKER_HOST", "tcp://10.0.0.1:2375", 1);
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    char *argv[] = {"gpuboxd", NULL};
    assert_int_equal(config_load(&cfg, 1, argv, &err), 0);
    assert_string_equal(cfg.app.docker_host, "tcp://10.0.0.1:2375");
    config_free(&cfg);
    /* the flag beats the environment */
    assert_int_equal(LOAD(&cfg, &err, "--docker-host", "unix:///run/d.sock"), 0);
    assert_string_equal(cfg.app.docker_host, "unix:///run/d.sock");
    config_free(&cfg);
    unsetenv("DOCKER_HOST");
}

static void test_flags(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--listen=0.0.0.0:9000", "--data-dir", "/srv/gb",
                          "--port-range", "41000-41999", "--log-level", "debug",
                          "--compat-http-200", "--gpu-attach", "cdi", "--volume-backend=plain",
                          "--nvml-library", "/opt/libnvidia-ml.so.1", "--max-connections", "50",
                          "--shutdown-timeout=3", "--token-file", "/etc/gpubox/tokens",
                          "--max-connections-per-ip", "8", "--cors-origins", "https://a.example",
                          "--store", "etcd://10.0.0.5:2379/gb", "--store-wait", "0",
                          "--allowed-host", "a.example", "--allowed-host=b.example,c.example"),
                     0);
    assert_string_equal(cfg.token_file, "/etc/gpubox/tokens");
    /* --allowed-host adds up */
    assert_string_equal(cfg.allowed_hosts, "a.example,b.example,c.example");
    assert_int_equal(cfg.max_connections_per_ip, 8);
    assert_string_equal(cfg.cors_origins, "https://a.example");
    assert_string_equal(cfg.listen_host, "0.0.0.0");
    assert_int_equal(cfg.listen_port, 9000);
    assert_string_equal(cfg.app.store_url, "etcd://10.0.0.5:2379/gb");
    assert_int_equal(cfg.app.store_wait_s, 0);
    assert_int_equal(cfg.app.port_start, 41000);
    assert_int_equal(cfg.app.port_end, 41999);
    assert_int_equal(cfg.log_level, LOG_DEBUG);
    assert_true(cfg.compat_http_200);
    assert_string_equal(cfg.app.gpu_attach, "cdi");
    assert_string_equal(cfg.app.volume_backend, "plain");
    assert_string_equal(cfg.app.nvml_library, "/opt/libnvidia-ml.so.1");
    assert_int_equal(cfg.max_connections, 50);
    assert_int_equal(cfg.shutdown_timeout_s, 3);
    config_free(&cfg);
}

static void test_listen_forms(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--listen", "[::1]:0"), 0);
    assert_string_equal(cfg.listen_host, "::1");
    assert_int_equal(cfg.listen_port, 0);
    config_free(&cfg);

    static const char *bad[] = {
        "2378",          ":2378",     "localhost", "127.0.0.1:", "127.0.0.1:70000",
        "127.0.0.1:12x", "[::1]2378", "[::1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(LOAD(&cfg, &err, "--listen", (char *)bad[i]), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, "--listen"));
        assert_non_null(strstr(err.msg, bad[i]));
        config_free(&cfg);
    }
}

/* --public-host: the --listen host by default, this machine's name for a
 * wildcard listen, the value given, and a value that is no host refused. */
static void test_public_host(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--listen", "127.0.0.2:0"), 0);
    assert_string_equal(cfg.app.public_host, "127.0.0.2");
    config_free(&cfg);
    char name[256] = "";
    assert_int_equal(gethostname(name, sizeof(name)), 0);
    assert_int_equal(LOAD(&cfg, &err, "--listen", "0.0.0.0:0", "--insecure-no-auth"), 0);
    assert_string_equal(cfg.app.public_host, name);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--public-host", "gpu01.example.com"), 0);
    assert_string_equal(cfg.app.public_host, "gpu01.example.com");
    config_free(&cfg);
    static const char *bad[] = {"a b", "root@x", "-oProxyCommand=x", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(LOAD(&cfg, &err, "--public-host", (char *)bad[i]), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, "--public-host"));
        config_free(&cfg);
    }
}

/* The service proxy: off by default and with "off"; an address parsed;
 * beyond loopback only with tokens; --proxy-domain and --proxy-url only
 * with it, each checked (docs/services.md). */
static void test_proxy_flags(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--listen", "127.0.0.1:0"), 0);
    assert_null(cfg.proxy_listen);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--proxy-listen", "127.0.0.1:2380", "--proxy-listen", "off"),
                     0);
    assert_null(cfg.proxy_listen);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--proxy-listen", "127.0.0.1:2380", "--proxy-domain",
                          "Apps.Example.org", "--proxy-url", "https://svc.example.org/"),
                     0);
    assert_string_equal(cfg.proxy_listen_host, "127.0.0.1");
    assert_int_equal(cfg.proxy_listen_port, 2380);
    assert_string_equal(cfg.app.proxy_domain, "apps.example.org");
    assert_string_equal(cfg.proxy_url, "https://svc.example.org");
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--proxy-listen", "0.0.0.0:2380"), -1);
    assert_non_null(strstr(err.msg, "--token-file"));
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--proxy-listen", "0.0.0.0:2380", "--insecure-no-auth"), 0);
    config_free(&cfg);
    static const char *const bad[][4] = {
        {"--proxy-listen", "nonsense", NULL, NULL},
        {"--proxy-domain", "apps.example.org", NULL, NULL},
        {"--proxy-url", "http://x:1", NULL, NULL},
        {"--proxy-listen", "127.0.0.1:1", "--proxy-domain", "a b"},
        {"--proxy-listen", "127.0.0.1:1", "--proxy-url", "ftp://x"},
        {"--proxy-listen", "127.0.0.1:1", "--proxy-url", "http://x/path"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int argc = bad[i][2] ? 5 : 3;
        char *argv[] = {"gpuboxd",         (char *)bad[i][0], (char *)bad[i][1],
                        (char *)bad[i][2], (char *)bad[i][3], NULL};
        err = (gb_err)GB_ERR_INIT;
        assert_int_equal(config_load(&cfg, argc, argv, &err), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, "proxy"));
        config_free(&cfg);
    }
}

/* Without tokens the API may only be reached from this host, unless the
 * operator says in so many words that something else guards the port. */
static void test_no_tokens_means_loopback_only(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    static const char *exposed[] = {"0.0.0.0:2378", "[::]:2378", "192.0.2.1:2378", "10.1.2.3:0"};
    for (size_t i = 0; i < sizeof(exposed) / sizeof(exposed[0]); i++) {
        assert_int_equal(LOAD(&cfg, &err, "--listen", (char *)exposed[i]), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(err.msg, exposed[i]));
        assert_non_null(strstr(err.msg, "--token-file"));
        assert_non_null(strstr(err.msg, "--insecure-no-auth"));
        config_free(&cfg);
        assert_int_equal(LOAD(&cfg, &err, "--listen", (char *)exposed[i], "--insecure-no-auth"), 0);
        assert_true(cfg.insecure_no_auth);
        config_free(&cfg);
        assert_int_equal(LOAD(&cfg, &err, "--listen", (char *)exposed[i], "--token-file", "/t"), 0);
        config_free(&cfg);
    }
    static const char *local[] = {"127.0.0.1:0", "127.0.0.2:2378", "[::1]:0", "localhost:2378"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        assert_int_equal(LOAD(&cfg, &err, "--listen", (char *)local[i]), 0);
        config_free(&cfg);
    }
    assert_true(config_host_is_loopback("127.0.0.1"));
    assert_true(config_host_is_loopback("::1"));
    assert_true(config_host_is_loopback("::ffff:127.0.0.1"));
    assert_false(config_host_is_loopback("0.0.0.0"));
    assert_false(config_host_is_loopback("::"));
    assert_false(config_host_is_loopback(""));
    assert_false(config_host_is_loopback("no-such-host.invalid"));

    /* contradictions and halves */
    assert_int_equal(LOAD(&cfg, &err, "--token-file", "/t", "--insecure-no-auth"), -1);
    assert_non_null(strstr(err.msg, "contradicts"));
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--tls-cert", "/c.pem"), -1);
    assert_non_null(strstr(err.msg, "--tls-key is missing"));
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--tls-key", "/k.pem"), -1);
    assert_non_null(strstr(err.msg, "--tls-cert is missing"));
    config_free(&cfg);
}

static void test_relative_data_dir_becomes_absolute(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    char cwd[4096], want[4200];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(want, sizeof(want), "%s/rel/data", cwd);
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "rel/data"), 0);
    assert_string_equal(cfg.app.data_dir, want);
    assert_non_null(strstr(cfg.app.store_url, want));
    config_free(&cfg);
}

static void test_simulated_gpus(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--simulate-gpus", "2xT4-16GB"), 0);
    assert_int_equal(cfg.app.gpu_source, GPU_SOURCE_SIMULATED);
    assert_string_equal(cfg.app.simulate_gpus, "2xT4-16GB");
    config_free(&cfg);

    assert_int_equal(LOAD(&cfg, &err, "--simulate-gpus", "2xT4-16GB", "--gpu-source", "nvml"), -1);
    assert_non_null(strstr(err.msg, "--simulate-gpus implies --gpu-source simulated"));
    config_free(&cfg);

    assert_int_equal(LOAD(&cfg, &err, "--gpu-source", "simulated"), -1);
    assert_non_null(strstr(err.msg, "needs --simulate-gpus"));
    config_free(&cfg);

    assert_int_equal(LOAD(&cfg, &err, "--simulate-gpus", "lots of GPUs"), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(err.msg, "--simulate-gpus"));
    config_free(&cfg);
}

/* --node: the node's records under <prefix>/nodes/<node>, the fleet at
 * the --store prefix, the advertise URL from a specific --listen. */
static void test_fleet_node(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--store", "etcd://e1:2379,e2:2379/gpubox/?user=u", "--node",
                          "gpu-01", "--node-labels", "zone=a,gpu=a100"),
                     0);
    assert_string_equal(cfg.app.store_url, "etcd://e1:2379,e2:2379/gpubox/nodes/gpu-01?user=u");
    assert_string_equal(cfg.app.fleet_url, "etcd://e1:2379,e2:2379/gpubox/?user=u");
    assert_string_equal(cfg.app.node, "gpu-01");
    assert_string_equal(cfg.app.advertise, "http://127.0.0.1:2378");
    assert_string_equal(cfg.app.node_labels, "zone=a,gpu=a100");
    config_free(&cfg);

    assert_int_equal(LOAD(&cfg, &err, "--store", "etcd://e1:2379", "--node", "b", "--advertise",
                          "http://10.0.0.6:2378/"),
                     0);
    assert_string_equal(cfg.app.store_url, "etcd://e1:2379/nodes/b");
    assert_string_equal(cfg.app.advertise, "http://10.0.0.6:2378");
    config_free(&cfg);

    static const struct {
        const char *args[6];
        const char *says;
    } bad[] = {
        {{"--node", "a"}, "needs an etcd store"},
        {{"--advertise", "http://x:1"}, "--advertise needs --node"},
        {{"--store", "etcd://e:1", "--node", "-a"}, "--node"},
        {{"--store", "etcd://e:1", "--node", "a", "--node-labels", "zone"}, "KEY=VALUE"},
        {{"--store", "etcd://e:1", "--node", "a", "--advertise", "ftp://x"}, "http://HOST:PORT"},
        {{"--store", "etcd://e:1", "--node", "a", "--listen", "127.0.0.1:0"}, "needs --advertise"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[8] = {"gpuboxd"};
        int argc = 1;
        for (int j = 0; j < 6 && bad[i].args[j]; j++)
            argv[argc++] = (char *)bad[i].args[j];
        err_clear(&err);
        assert_int_equal(config_load(&cfg, argc, argv, &err), -1);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, bad[i].says);
        config_free(&cfg);
    }
}

static void test_bad_flags_name_the_flag(void **state)
{
    (void)state;
    static const struct {
        const char *flag, *value, *expect;
    } cases[] = {
        {"--port-range", "5-3", "--port-range"},
        {"--port-range", "40000", "--port-range"},
        {"--gpu-source", "cuda", "'cuda' is not a GPU source"},
        {"--log-level", "loud", "'loud' is not a log level"},
        {"--gpu-attach", "magic", "'magic' is not one of nvidia|cdi|runtime"},
        {"--volume-backend", "zfs", "'zfs' is not one of loop|xfsquota|plain"},
        {"--max-connections", "0", "--max-connections: '0' is not a whole number from 1"},
        {"--connection-timeout", "-1", "--connection-timeout"},
        {"--store-wait", "86401", "--store-wait"},
        {"--store-wait", "soon", "--store-wait"},
        {"--compat-http-200=maybe", NULL, "'maybe' is not a boolean"},
        {"--data-dir=", NULL, "--data-dir: needs a value"},
        {"--timeslice-replicas", "0",
         "--timeslice-replicas: '0' is not a whole number from 1 "
         "to 64"},
        {"--timeslice-replicas", "65", "--timeslice-replicas"},
        {"--gpu-max-tenants", "-2", "--gpu-max-tenants"},
        {"--gpu-memory-oversubscription", "0.5", "not a factor from 1.0"},
        {"--gpu-memory-oversubscription", "4.5", "not a factor from 1.0"},
        {"--gpu-memory-oversubscription", "1.5x", "--gpu-memory-oversubscription"},
        {"--gpu-memory-oversubscription", "nan", "--gpu-memory-oversubscription"},
        {"--gpu-exclude", "GPU-a,,GPU-b", "--gpu-exclude"},
        {"--gpu-exclude-sharing", "0,0", "--gpu-exclude-sharing"},
        {"--gpu-exclude-sharing", "GPU a", "--gpu-exclude-sharing"},
        {"--hami-core", "/nonexistent/libvgpu.so", "--hami-core /nonexistent/libvgpu.so"},
        {"--hami-core", "/tmp", "not a readable file"},
        {"--cuda-limiter", "/nonexistent/libgpubox-cuda.so",
         "--cuda-limiter /nonexistent/libgpubox-cuda.so"},
        {"--cuda-limiter", "/tmp", "not a readable file"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        daemon_config cfg;
        gb_err err = GB_ERR_INIT;
        char *argv[] = {"gpuboxd", (char *)cases[i].flag, (char *)cases[i].value, NULL};
        assert_int_equal(config_load(&cfg, cases[i].value ? 3 : 2, argv, &err), -1);
        assert_int_equal(err.code, ERR_INVALID_PARAMS);
        if (!strstr(err.msg, cases[i].expect))
            fail_msg("%s %s: message '%s' lacks '%s'", cases[i].flag,
                     cases[i].value ? cases[i].value : "", err.msg, cases[i].expect);
        config_free(&cfg);
    }
}

static void test_flag_syntax_errors(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--lisen", "x"), -1);
    assert_string_equal(err.msg, "unknown flag '--lisen'");
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--bogus=1"), -1);
    assert_string_equal(err.msg, "unknown flag '--bogus'");
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--listen"), -1);
    assert_string_equal(err.msg, "--listen needs a value (ADDR:PORT)");
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "serve"), -1);
    assert_non_null(strstr(err.msg, "unexpected argument 'serve'"));
    config_free(&cfg);
}

static void test_help_and_version(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--help"), 0);
    assert_true(cfg.show_help);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "-h"), 0);
    assert_true(cfg.show_help);
    config_free(&cfg);
    /* --help wins over values that would be wrong */
    assert_int_equal(LOAD(&cfg, &err, "--port-range", "9-1", "--version"), 0);
    assert_true(cfg.show_version);
    config_free(&cfg);
}

static void test_usage_lists_every_flag_with_default(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    config_usage(f);
    fclose(f);
    static const char *expect[] = {"--listen ADDR:PORT",
                                   "(default: 127.0.0.1:2378)",
                                   "--data-dir DIR",
                                   "(default: /var/lib/gpubox)",
                                   "--store URL",
                                   "--docker-host URL",
                                   "--port-range A-B",
                                   "(default: 40000-65535)",
                                   "--token-file PATH",
                                   "--insecure-no-auth",
                                   "--tls-cert PATH",
                                   "--tls-key PATH",
                                   "--cors-origins ORIGIN[,ORIGIN...]",
                                   "--allowed-host NAME[,NAME...]",
                                   "--max-connections-per-ip N",
                                   "--gpu-source auto|nvml|nvidia-smi|simulated",
                                   "--simulate-gpus SPEC",
                                   "--nvml-library PATH",
                                   "--nvidia-smi PATH",
                                   "--gpu-attach nvidia|cdi|runtime",
                                   "--volume-backend loop|xfsquota|plain",
                                   "--log-level debug|info|warn|error",
                                   "--compat-http-200",
                                   "--timeslice-replicas N",
                                   "(default: 4)",
                                   "--gpu-max-tenants N",
                                   "(default: 0 (no limit))",
                                   "--gpu-memory-oversubscription FACTOR",
                                   "(default: 1.0 (none))",
                                   "--gpu-exclude-sharing GPU[,GPU...]",
                                   "--gpu-exclude GPU[,GPU...]",
                                   "--hami-core PATH",
                                   "(default: none (share limits are scheduled but not enforced))",
                                   "--cuda-limiter PATH|off",
                                   "--config FILE",
                                   "--help",
                                   "--version"};
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
        if (!strstr(text, expect[i]))
            fail_msg("--help lacks '%s'", expect[i]);
    free(text);
}

static void test_gpu_sharing_settings(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "/tmp/x"), 0);
    assert_int_equal(cfg.app.timeslice_replicas, 4);
    assert_int_equal(cfg.app.gpu_max_tenants, 0);
    assert_true(cfg.app.gpu_memory_oversubscription == 1.0);
    assert_null(cfg.app.gpu_exclude);
    assert_null(cfg.app.hami_core);
    config_free(&cfg);

    char lib[] = "/tmp/gpubox-test-libvgpu-XXXXXX";
    int fd = mkstemp(lib);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "/tmp/x", "--timeslice-replicas", "2",
                          "--gpu-max-tenants", "8", "--gpu-memory-oversubscription", "1.5",
                          "--gpu-exclude", "GPU-a, 3", "--gpu-exclude-sharing", "0", "--hami-core",
                          lib),
                     0);
    assert_int_equal(cfg.app.timeslice_replicas, 2);
    assert_int_equal(cfg.app.gpu_max_tenants, 8);
    assert_true(cfg.app.gpu_memory_oversubscription == 1.5);
    assert_string_equal(cfg.app.gpu_exclude, "GPU-a, 3");
    assert_string_equal(cfg.app.gpu_exclude_sharing, "0");
    assert_string_equal(cfg.app.hami_core, lib);
    config_free(&cfg);

    /* The CUDA limiter: the one built beside this program by default (the
     * test runs from the build directory), a file given, or off. */
    const char *build = getenv("GPUBOX_BUILD_DIR");
    char built[PATH_MAX], expect[PATH_MAX];
    assert_non_null(build);
    snprintf(built, sizeof(built), "%s/cuda/libgpubox-cuda.so", build);
    assert_non_null(realpath(built, expect));
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "/tmp/x"), 0);
    assert_string_equal(cfg.app.cuda_limiter, expect);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "/tmp/x", "--cuda-limiter", lib), 0);
    assert_string_equal(cfg.app.cuda_limiter, lib);
    config_free(&cfg);
    assert_int_equal(LOAD(&cfg, &err, "--data-dir", "/tmp/x", "--cuda-limiter", "off"), 0);
    assert_null(cfg.app.cuda_limiter);
    config_free(&cfg);
    unlink(lib);
}

static void test_config_file(void **state)
{
    (void)state;
    write_config("# gpuboxd settings\n"
                 "listen = 0.0.0.0:9100\n"
                 "\n"
                 "  data_dir = \"/srv/gpubox\"   \n"
                 "port-range=42000-42010\n"
                 "compat-http-200 = yes\n"
                 "log-level = warn\n"
                 "insecure-no-auth = true\n");
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), 0);
    assert_string_equal(cfg.listen_host, "0.0.0.0");
    assert_int_equal(cfg.listen_port, 9100);
    assert_string_equal(cfg.app.data_dir, "/srv/gpubox");
    assert_string_equal(cfg.app.store_url, "sqlite:///srv/gpubox/state.db");
    assert_int_equal(cfg.app.port_start, 42000);
    assert_int_equal(cfg.app.port_end, 42010);
    assert_true(cfg.compat_http_200);
    assert_int_equal(cfg.log_level, LOG_WARN);
    config_free(&cfg);
}

static void test_flags_override_file(void **state)
{
    (void)state;
    write_config("listen = 0.0.0.0:9100\nlog-level = warn\ngpu-source = nvml\n"
                 "token-file = /etc/gpubox/tokens\n");
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    /* flags before or after --config still win */
    assert_int_equal(LOAD(&cfg, &err, "--log-level", "error", "--config", config_path, "--listen",
                          "127.0.0.1:0", "--simulate-gpus", "1xH100-80GB"),
                     0);
    assert_int_equal(cfg.listen_port, 0);
    assert_string_equal(cfg.listen_host, "127.0.0.1");
    assert_int_equal(cfg.log_level, LOG_ERROR);
    /* the file's gpu-source yields to the flag's --simulate-gpus */
    assert_int_equal(cfg.app.gpu_source, GPU_SOURCE_SIMULATED);
    config_free(&cfg);
}

static void test_config_file_errors_name_the_line(void **state)
{
    (void)state;
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    char want[128];

    write_config("listen = 127.0.0.1:1\n# fine\nlisten_adress = x\n");
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), -1);
    snprintf(want, sizeof(want), "%s:3: unknown key 'listen-adress'", config_path);
    assert_non_null(strstr(err.msg, want));
    config_free(&cfg);
    remove_config(NULL);

    write_config("\n\nport-range = 9-1\n");
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), -1);
    snprintf(want, sizeof(want), "%s:3: port-range", config_path);
    assert_non_null(strstr(err.msg, want));
    config_free(&cfg);
    remove_config(NULL);

    write_config("listen 127.0.0.1:1\n");
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), -1);
    snprintf(want, sizeof(want), "%s:1: expected 'key = value'", config_path);
    assert_non_null(strstr(err.msg, want));
    config_free(&cfg);
    remove_config(NULL);

    write_config("config = /etc/other.conf\n");
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), -1);
    assert_non_null(strstr(err.msg, "'config' can only be given as a flag"));
    config_free(&cfg);
    remove_config(NULL);

    write_config("gpu-source = nvml\nsimulate-gpus = 2xT4-16GB\n");
    assert_int_equal(LOAD(&cfg, &err, "--config", config_path), -1);
    assert_non_null(strstr(err.msg, "implies --gpu-source simulated"));
    config_free(&cfg);

    assert_int_equal(LOAD(&cfg, &err, "--config", "/nonexistent/gpuboxd.conf"), -1);
    assert_non_null(strstr(err.msg, "cannot read config file /nonexistent/gpuboxd.conf"));
    config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_docker_host_from_environment),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_listen_forms),
        cmocka_unit_test(test_public_host),
        cmocka_unit_test(test_proxy_flags),
        cmocka_unit_test(test_no_tokens_means_loopback_only),
        cmocka_unit_test(test_relative_data_dir_becomes_absolute),
        cmocka_unit_test(test_simulated_gpus),
        cmocka_unit_test(test_fleet_node),
        cmocka_unit_test(test_bad_flags_name_the_flag),
        cmocka_unit_test(test_flag_syntax_errors),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_usage_lists_every_flag_with_default),
        cmocka_unit_test(test_gpu_sharing_settings),
        cmocka_unit_test_teardown(test_config_file, remove_config),
        cmocka_unit_test_teardown(test_flags_override_file, remove_config),
        cmocka_unit_test_teardown(test_config_file_errors_name_the_line, remove_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
