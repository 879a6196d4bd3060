/*
 * test_docker_spec.c - docker_run_spec_to_json: the exact JSON for each GPU
 * attach mode and for a minimal spec, every refusal of a bad spec, and real
 * containers made from specs on the real dockerd (whose fake
 * nvidia-container-runtime-hook makes the "nvidia" device driver exist; it
 * has no "nvidia" runtime and no CDI, so those modes must fail clearly).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "docker_test_util.h"

static int group_setup(void **state)
{
    (void)state;
    return dtu_setup("spec");
}

/* Compare the whole document: any field added, missing or different fails,
 * and both are printed so the difference can be read. */
static void assert_json_is(json_t *got, const char *want_text)
{
    json_error_t jerr;
    _cleanup_json_ json_t *want = json_loads(want_text, 0, &jerr);
    if (!want)
        fail_msg("bad expected JSON: %s", jerr.text);
    if (!json_equal(got, want)) {
        _cleanup_free_ char *g = json_dumps(got, JSON_SORT_KEYS | JSON_INDENT(1));
        _cleanup_free_ char *w = json_dumps(want, JSON_SORT_KEYS | JSON_INDENT(1));
        fail_msg("JSON differs\ngot:  %s\nwant: %s", g, w);
    }
}

static const char *const two_gpus[] = {"GPU-aaaa", "GPU-bbbb"};
static const char *const sleep_cmd[] = {"sh", "-c", "sleep 600"};
static const char *const env_ab[] = {"A=1", "B=two words"};
static const docker_bind binds_rw_ro[] = {
    {.src = "/data/x", .dest = "/root/x"},
    {.src = "vol1", .dest = "/root/data", .read_only = true},
};
static const docker_port three_ports[] = {
    {.container_port = 8888, .host_port = 40001},
    {.container_port = 53, .host_port = 40003, .protocol = "udp"},
    {.container_port = 8888, .host_port = 40004, .protocol = "tcp"},
};

/* A spec that sets every field. */
static docker_run_spec full_spec(enum docker_gpu_attach mode, json_t *labels)
{
    return (docker_run_spec){
        .image = "registry:5000/team/img:1",
        .cmd = sleep_cmd,
        .ncmd = 3,
        .env = env_ab,
        .nenv = 2,
        .labels = labels,
        .binds = binds_rw_ro,
        .nbinds = 2,
        .ports = three_ports,
        .nports = 3,
        .gpu_attach = mode,
        .gpu_uuids = two_gpus,
        .ngpus = 2,
        .cpus = 2.5,
        .memory_bytes = 8589934592,
        .shm_bytes = 1073741824,
        .restart_policy = "unless-stopped",
        .pids_limit = 1000,
        .tty = true,
        .hostname = "box1",
    };
}

/* Everything but the GPU fields, which each mode test adds. */
#define FULL_COMMON_TOP                                                                            \
    "\"Image\": \"registry:5000/team/img:1\", \"Tty\": true, \"OpenStdin\": true,"                 \
    "\"AttachStdin\": false, \"AttachStdout\": false, \"AttachStderr\": false,"                    \
    "\"Hostname\": \"box1\", \"Cmd\": [\"sh\", \"-c\", \"sleep 600\"],"                            \
    "\"Labels\": {\"gpubox.replicaset\": \"foo\", \"gpubox.version\": \"3\"},"                     \
    "\"ExposedPorts\": {\"8888/tcp\": {}, \"53/udp\": {}},"
#define FULL_COMMON_HOST                                                                           \
    "\"Privileged\": false, \"SecurityOpt\": [\"no-new-privileges\"], \"Init\": true,"             \
    "\"IpcMode\": \"private\","                                                                    \
    "\"Mounts\": [{\"Type\": \"bind\", \"Source\": \"/data/x\", \"Target\": \"/root/x\","          \
    "              \"ReadOnly\": false},"                                                          \
    "             {\"Type\": \"volume\", \"Source\": \"vol1\", \"Target\": \"/root/data\","        \
    "              \"ReadOnly\": true}],"                                                          \
    "\"PortBindings\": {\"8888/tcp\": [{\"HostIp\": \"\", \"HostPort\": \"40001\"},"               \
    "                                 {\"HostIp\": \"\", \"HostPort\": \"40004\"}],"               \
    "                  \"53/udp\": [{\"HostIp\": \"\", \"HostPort\": \"40003\"}]},"                \
    "\"NanoCpus\": 2500000000, \"Memory\": 8589934592, \"ShmSize\": 1073741824,"                   \
    "\"PidsLimit\": 1000,"                                                                         \
    "\"RestartPolicy\": {\"Name\": \"unless-stopped\", \"MaximumRetryCount\": 0}"

static json_t *spec_json(const docker_run_spec *spec)
{
    gb_err e = GB_ERR_INIT;
    json_t *cfg = NULL;
    if (docker_run_spec_to_json(spec, &cfg, &e) != 0)
        fail_msg("%s", e.msg);
    assert_non_null(cfg);
    return cfg;
}

static json_t *replicaset_labels(void)
{
    json_t *labels = json_pack("{s:s, s:s}", "gpubox.replicaset", "foo", "gpubox.version", "3");
    assert_non_null(labels);
    return labels;
}

/* full_spec in mode with the replica set's labels, keeping ngpus of its
 * two GPUs, prints exactly want. */
static void assert_full_spec_json(enum docker_gpu_attach mode, size_t ngpus, const char *want)
{
    _cleanup_json_ json_t *labels = replicaset_labels();
    docker_run_spec spec = full_spec(mode, labels);
    spec.ngpus = ngpus;
    _cleanup_json_ json_t *cfg = spec_json(&spec);
    assert_json_is(cfg, want);
}

static void test_json_nvidia(void **state)
{
    (void)state;
    assert_full_spec_json(DOCKER_GPU_NVIDIA, 2,
                          "{" FULL_COMMON_TOP "\"Env\": [\"A=1\", \"B=two words\"],"
                          "\"HostConfig\": {" FULL_COMMON_HOST ","
                          "  \"DeviceRequests\": [{\"Driver\": \"nvidia\","
                          "    \"DeviceIDs\": [\"GPU-aaaa\", \"GPU-bbbb\"],"
                          "    \"Capabilities\": [[\"gpu\"]]}]}}");
}

static void test_json_cdi(void **state)
{
    (void)state;
    assert_full_spec_json(DOCKER_GPU_CDI, 2,
                          "{" FULL_COMMON_TOP "\"Env\": [\"A=1\", \"B=two words\"],"
                          "\"HostConfig\": {" FULL_COMMON_HOST ","
                          "  \"DeviceRequests\": [{\"Driver\": \"cdi\","
                          "    \"DeviceIDs\": [\"nvidia.com/gpu=GPU-aaaa\","
                          "                    \"nvidia.com/gpu=GPU-bbbb\"]}]}}");
}

static void test_json_runtime(void **state)
{
    (void)state;
    assert_full_spec_json(DOCKER_GPU_RUNTIME, 2,
                          "{" FULL_COMMON_TOP "\"Env\": [\"A=1\", \"B=two words\","
                          "          \"NVIDIA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb\"],"
                          "\"HostConfig\": {" FULL_COMMON_HOST ", \"Runtime\": \"nvidia\"}}");
}

/* No GPU: in every mode, nothing GPU-related but NVIDIA_VISIBLE_DEVICES=void. */
static void test_json_no_gpu(void **state)
{
    (void)state;
    const enum docker_gpu_attach modes[] = {DOCKER_GPU_NVIDIA, DOCKER_GPU_CDI, DOCKER_GPU_RUNTIME};
    for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
        assert_full_spec_json(
            modes[i], 0,
            "{" FULL_COMMON_TOP
            "\"Env\": [\"A=1\", \"B=two words\", \"NVIDIA_VISIBLE_DEVICES=void\"],"
            "\"HostConfig\": {" FULL_COMMON_HOST "}}");
    }
}

/* Only the image given: the safety defaults and nothing else. */
static void test_json_minimal(void **state)
{
    (void)state;
    docker_run_spec spec = {.image = "busybox"};
    _cleanup_json_ json_t *cfg = spec_json(&spec);
    assert_json_is(cfg, "{\"Image\": \"busybox\", \"Tty\": false, \"OpenStdin\": false,"
                        "\"AttachStdin\": false, \"AttachStdout\": false, \"AttachStderr\": false,"
                        "\"Env\": [\"NVIDIA_VISIBLE_DEVICES=void\"], \"Labels\": {},"
                        "\"HostConfig\": {\"Privileged\": false,"
                        "  \"SecurityOpt\": [\"no-new-privileges\"], \"Init\": true,"
                        "  \"IpcMode\": \"private\", \"PidsLimit\": 16384,"
                        "  \"RestartPolicy\": {\"Name\": \"no\", \"MaximumRetryCount\": 0}}}");

    /* A negative pids limit lifts it; a runtime GPU list of one has no comma. */
    static const char *const one_gpu[] = {"GPU-only"};
    spec = (docker_run_spec){.image = "busybox",
                             .pids_limit = -5,
                             .gpu_attach = DOCKER_GPU_RUNTIME,
                             .gpu_uuids = one_gpu,
                             .ngpus = 1,
                             .restart_policy = "on-failure"};
    _cleanup_json_ json_t *unlimited = spec_json(&spec);
    json_t *host = json_object_get(unlimited, "HostConfig");
    assert_int_equal(json_integer_value(json_object_get(host, "PidsLimit")), -1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(unlimited, "Env"), 0)),
                        "NVIDIA_VISIBLE_DEVICES=GPU-only");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(host, "RestartPolicy"), "Name")),
        "on-failure");
}

/* A network: NetworkMode names it, and the container answers to its alias
 * there; without one, Docker's default (no NetworkMode, no
 * NetworkingConfig). The view (gpu-docker-api's record) shows the same. */
static void test_json_network(void **state)
{
    (void)state;
    docker_run_spec spec = {
        .image = "busybox", .network = "gpubox-u-alice", .network_alias = "web"};
    _cleanup_json_ json_t *cfg = spec_json(&spec);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(cfg, "HostConfig"), "NetworkMode")),
        "gpubox-u-alice");
    assert_json_is(json_object_get(cfg, "NetworkingConfig"),
                   "{\"EndpointsConfig\": {\"gpubox-u-alice\": {\"Aliases\": [\"web\"]}}}");

    spec.network_alias = NULL;
    _cleanup_json_ json_t *no_alias = spec_json(&spec);
    assert_json_is(json_object_get(no_alias, "NetworkingConfig"),
                   "{\"EndpointsConfig\": {\"gpubox-u-alice\": {}}}");

    gb_err e = GB_ERR_INIT;
    spec.network_alias = "web";
    _cleanup_json_ json_t *view = NULL;
    assert_int_equal(docker_run_spec_view(&spec, NULL, 0, &view, &e), 0);
    assert_json_is(json_object_get(view, "networkingConfig"),
                   "{\"EndpointsConfig\": {\"gpubox-u-alice\": {\"Aliases\": [\"web\"]}}}");
    assert_null(json_object_get(json_object_get(view, "config"), "NetworkingConfig"));

    docker_run_spec plain = {.image = "busybox"};
    _cleanup_json_ json_t *plain_view = NULL;
    assert_int_equal(docker_run_spec_view(&plain, NULL, 0, &plain_view, &e), 0);
    assert_json_is(json_object_get(plain_view, "networkingConfig"), "{\"EndpointsConfig\": null}");
}

/* A container's inspect, in the view's shape: copies of Config and
 * HostConfig, {} for what the inspect lacks. */
static void test_container_config_view(void **state)
{
    (void)state;
    _cleanup_json_ json_t *inspect =
        json_loads("{\"Id\": \"abc\", \"Config\": {\"Hostname\": \"abc\", \"OnBuild\": null},"
                   " \"HostConfig\": {\"LogConfig\": {\"Type\": \"json-file\"}}}",
                   0, NULL);
    assert_non_null(inspect);
    _cleanup_json_ json_t *view = docker_container_config_view(inspect);
    assert_json_is(view, "{\"config\": {\"Hostname\": \"abc\", \"OnBuild\": null},"
                         " \"hostConfig\": {\"LogConfig\": {\"Type\": \"json-file\"}}}");
    /* A copy: changing the view leaves the inspect alone. */
    json_object_set_new(json_object_get(view, "config"), "User", json_string("x"));
    assert_null(json_object_get(json_object_get(inspect, "Config"), "User"));

    _cleanup_json_ json_t *bare = json_object();
    _cleanup_json_ json_t *empty = docker_container_config_view(bare);
    assert_json_is(empty, "{\"config\": {}, \"hostConfig\": {}}");
}

struct bad_case {
    const char *what; /* a word the message must hold */
    int code;
    docker_run_spec spec;
};

/* A tmpfs mount (the CUDA limiter's budget): capped, mode 1777, no source. */
static void test_json_tmpfs(void **state)
{
    (void)state;
    const docker_bind mounts[] = {{.src = "/data/x", .dest = "/x", .read_only = true},
                                  {.dest = "/run/gpubox/budget", .tmpfs_bytes = 1048576}};
    json_t *cfg = spec_json(&(docker_run_spec){.image = "i", .binds = mounts, .nbinds = 2});
    json_t *want = json_loads("[{\"Type\": \"bind\", \"Source\": \"/data/x\", \"Target\": \"/x\", "
                              "\"ReadOnly\": true}, {\"Type\": \"tmpfs\", \"Target\": "
                              "\"/run/gpubox/budget\", \"TmpfsOptions\": {\"SizeBytes\": 1048576, "
                              "\"Mode\": 1023}}]",
                              0, NULL);
    assert_non_null(want);
    assert_true(json_equal(json_object_get(json_object_get(cfg, "HostConfig"), "Mounts"), want));
    json_decref(want);
    json_decref(cfg);
}

static void test_json_refusals(void **state)
{
    (void)state;
    static const char *const null_entry[] = {"sh", NULL};
    static const char *const no_name[] = {"=x"};
    static const char *const empty_env[] = {""};
    static const char *const gpu_env[] = {"A=1", "NVIDIA_VISIBLE_DEVICES=all"};
    static const char *const comma_gpu[] = {"GPU-a,GPU-b"};
    static const char *const empty_gpu[] = {""};
    static const char *const null_gpu[] = {NULL};
    static const docker_bind relative_dest[] = {{.src = "/data", .dest = "data"}};
    static const docker_bind relative_src[] = {{.src = "./data", .dest = "/data"}};
    static const docker_bind short_vol[] = {{.src = "v", .dest = "/data"}};
    static const docker_bind null_src[] = {{.src = NULL, .dest = "/data"}};
    static const docker_port zero_container[] = {{.container_port = 0, .host_port = 40000}};
    static const docker_port zero_host[] = {{.container_port = 22, .host_port = 0}};
    static const docker_port sctp[] = {
        {.container_port = 22, .host_port = 40000, .protocol = "sctp"}};
    const struct bad_case cases[] = {
        {"image name is empty", ERR_IMAGE_EMPTY, {.image = ""}},
        {"image name is empty", ERR_IMAGE_EMPTY, {.image = NULL}},
        {"cmd", ERR_INVALID_PARAMS, {.image = "i", .ncmd = 2}},
        {"cmd entry 1", ERR_INVALID_PARAMS, {.image = "i", .cmd = null_entry, .ncmd = 2}},
        {"'=x' has no name", ERR_INVALID_PARAMS, {.image = "i", .env = no_name, .nenv = 1}},
        {"has no name", ERR_INVALID_PARAMS, {.image = "i", .env = empty_env, .nenv = 1}},
        {"NVIDIA_VISIBLE_DEVICES", ERR_INVALID_PARAMS, {.image = "i", .env = gpu_env, .nenv = 2}},
        {"absolute destination",
         ERR_INVALID_PARAMS,
         {.image = "i", .binds = relative_dest, .nbinds = 1}},
        {"'./data'", ERR_INVALID_PARAMS, {.image = "i", .binds = relative_src, .nbinds = 1}},
        {"'v'", ERR_INVALID_PARAMS, {.image = "i", .binds = short_vol, .nbinds = 1}},
        {"needs a source", ERR_INVALID_PARAMS, {.image = "i", .binds = null_src, .nbinds = 1}},
        {"binds", ERR_INVALID_PARAMS, {.image = "i", .nbinds = 1}},
        {"1-65535", ERR_INVALID_PARAMS, {.image = "i", .ports = zero_container, .nports = 1}},
        {"1-65535", ERR_INVALID_PARAMS, {.image = "i", .ports = zero_host, .nports = 1}},
        {"'sctp'", ERR_INVALID_PARAMS, {.image = "i", .ports = sctp, .nports = 1}},
        {"ports", ERR_INVALID_PARAMS, {.image = "i", .nports = 1}},
        {"UUID array", ERR_INVALID_PARAMS, {.image = "i", .ngpus = 2}},
        {"'GPU-a,GPU-b'", ERR_INVALID_PARAMS, {.image = "i", .gpu_uuids = comma_gpu, .ngpus = 1}},
        {"UUID ''", ERR_INVALID_PARAMS, {.image = "i", .gpu_uuids = empty_gpu, .ngpus = 1}},
        {"(null)", ERR_INVALID_PARAMS, {.image = "i", .gpu_uuids = null_gpu, .ngpus = 1}},
        {"attach mode 7",
         ERR_INVALID_PARAMS,
         {.image = "i", .gpu_uuids = two_gpus, .ngpus = 2, .gpu_attach = 7}},
        {"cpus -1", ERR_INVALID_PARAMS, {.image = "i", .cpus = -1}},
        {"cpus", ERR_INVALID_PARAMS, {.image = "i", .cpus = NAN}},
        {"negative", ERR_INVALID_PARAMS, {.image = "i", .memory_bytes = -1}},
        {"negative", ERR_INVALID_PARAMS, {.image = "i", .shm_bytes = -1}},
        {"'sometimes'", ERR_INVALID_PARAMS, {.image = "i", .restart_policy = "sometimes"}},
        {"network 'a b'", ERR_INVALID_PARAMS, {.image = "i", .network = "a b"}},
        {"network '-x'", ERR_INVALID_PARAMS, {.image = "i", .network = "-x"}},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        gb_err e = GB_ERR_INIT;
        json_t *cfg = (json_t *)&e; /* must come back NULL */
        if (docker_run_spec_to_json(&cases[i].spec, &cfg, &e) != -1)
            fail_msg("case %zu (%s) was accepted", i, cases[i].what);
        assert_null(cfg);
        if (e.code != cases[i].code || !strstr(e.msg, cases[i].what))
            fail_msg("case %zu: want %d with '%s', got %d '%s'", i, cases[i].code, cases[i].what,
                     e.code, e.msg);
    }

    _cleanup_json_ json_t *not_object = json_string("x");
    _cleanup_json_ json_t *not_strings = json_pack("{s:i}", "k", 1);
    json_t *label_sets[] = {not_object, not_strings};
    for (size_t i = 0; i < ARRAY_SIZE(label_sets); i++) {
        gb_err e = GB_ERR_INIT;
        json_t *cfg = NULL;
        docker_run_spec spec = {.image = "i", .labels = label_sets[i]};
        assert_int_equal(docker_run_spec_to_json(&spec, &cfg, &e), -1);
        assert_int_equal(e.code, ERR_INVALID_PARAMS);
        assert_non_null(strstr(e.msg, "label"));
    }
}

/* A port nothing listens on now (Docker publishes on every address). */
static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    close(fd);
    return ntohs(addr.sin_port);
}

/* GET /hello over the published port; the body, or NULL when it fails. */
static char *http_get_hello(uint16_t port)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
            const char req[] = "GET /hello HTTP/1.0\r\n\r\n";
            char buf[1024];
            size_t got = 0;
            ssize_t n;
            if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1)
                while (got < sizeof(buf) - 1 &&
                       (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
                    got += (size_t)n;
            close(fd);
            buf[got] = '\0';
            const char *body = strstr(buf, "\r\n\r\n");
            if (body)
                return strdup(body + 4);
        } else {
            close(fd);
        }
        usleep(100 * 1000); /* httpd is still starting */
    }
    return NULL;
}

/* One container from a full spec, in NVIDIA mode: the container sees what
 * the spec says, and Docker kept the safety defaults. */
static void test_run_nvidia(void **state)
{
    (void)state;
    _cleanup_free_ char *ro_dir = dtu_temp_dir("ro");
    _cleanup_free_ char *rw_dir = dtu_temp_dir("rw");
    char path[256];
    snprintf(path, sizeof(path), "%s/hello", ro_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello from the host\n", f);
    fclose(f);

    static const char *const cmd[] = {"httpd", "-f", "-p", "8080", "-h", "/mnt/ro"};
    static const char *const env[] = {"GBTEST_SPEC=yes"};
    static const char *const gpus[] = {"GPU-spec-1", "GPU-spec-2"};
    docker_bind binds[] = {{.src = ro_dir, .dest = "/mnt/ro", .read_only = true},
                           {.src = rw_dir, .dest = "/mnt/rw"}};
    docker_port ports[] = {{.container_port = 8080, .host_port = free_port()}};
    _cleanup_json_ json_t *labels = dtu_labels();
    docker_run_spec spec = {.image = dtu_image,
                            .cmd = cmd,
                            .ncmd = ARRAY_SIZE(cmd),
                            .env = env,
                            .nenv = 1,
                            .labels = labels,
                            .binds = binds,
                            .nbinds = 2,
                            .ports = ports,
                            .nports = 1,
                            .gpu_attach = DOCKER_GPU_NVIDIA,
                            .gpu_uuids = gpus,
                            .ngpus = 2,
                            .cpus = 0.5,
                            .memory_bytes = 64 << 20,
                            .shm_bytes = 16 << 20,
                            .pids_limit = 100,
                            .hostname = "gbspecbox"};
    _cleanup_free_ char *id = dtu_create("nvidia", spec_json(&spec));
    gb_err e = GB_ERR_INIT;
    if (docker_container_start(dtu_client, id, &e) != 0)
        fail_msg("%s", e.msg);

    /* Docker's nvidia driver puts the GPU list into the environment of the
     * container's process (PID 1), not into Config.Env that execs get. */
    _cleanup_free_ char *seen = dtu_exec_sh(
        id, "tr '\\0' '\\n' </proc/1/environ | grep ^NVIDIA_VISIBLE_DEVICES=;"
            "echo $GBTEST_SPEC $(hostname) $(cat /proc/1/comm);"
            "grep NoNewPrivs /proc/self/status | tr -d '\\t'; cat /mnt/ro/hello;"
            "echo x > /mnt/rw/written; touch /mnt/ro/nope 2>/dev/null || echo ro-refused;"
            "df -k /dev/shm | tail -1 | awk '{print $2}'");
    assert_string_equal(seen, "NVIDIA_VISIBLE_DEVICES=GPU-spec-1,GPU-spec-2\n"
                              "yes gbspecbox docker-init\n"
                              "NoNewPrivs:1\nhello from the host\nro-refused\n16384\n");
    snprintf(path, sizeof(path), "%s/written", rw_dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    _cleanup_free_ char *body = http_get_hello(ports[0].host_port);
    assert_non_null(body);
    assert_string_equal(body, "hello from the host\n");

    _cleanup_json_ json_t *info = NULL;
    assert_int_equal(docker_container_inspect(dtu_client, id, &info, &e), 0);
    json_t *host = json_object_get(info, "HostConfig");
    assert_false(json_is_true(json_object_get(host, "Privileged")));
    assert_true(json_is_true(json_object_get(host, "Init")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(host, "SecurityOpt"), 0)),
                        "no-new-privileges");
    assert_int_equal(json_integer_value(json_object_get(host, "PidsLimit")), 100);
    assert_int_equal(json_integer_value(json_object_get(host, "NanoCpus")), 500000000);
    assert_int_equal(json_integer_value(json_object_get(host, "Memory")), 64 << 20);
    assert_string_equal(json_string_value(json_object_get(host, "NetworkMode")), "default");
    assert_string_equal(json_string_value(json_object_get(host, "PidMode")), "");

    assert_int_equal(docker_container_remove(dtu_client, id, true, &e), 0);
}

/* No GPU, a TTY and the image's shell CMD: the container stays up, and its
 * NVIDIA_VISIBLE_DEVICES says void. */
static void test_run_no_gpu_tty(void **state)
{
    (void)state;
    _cleanup_json_ json_t *labels = dtu_labels();
    docker_run_spec spec = {.image = dtu_image, .labels = labels, .tty = true};
    _cleanup_free_ char *id = dtu_create("tty", spec_json(&spec));
    gb_err e = GB_ERR_INIT;
    assert_int_equal(docker_container_start(dtu_client, id, &e), 0);
    usleep(500 * 1000);
    _cleanup_json_ json_t *info = NULL;
    assert_int_equal(docker_container_inspect(dtu_client, id, &info, &e), 0);
    assert_true(json_is_true(json_object_get(json_object_get(info, "State"), "Running")));
    _cleanup_free_ char *seen = dtu_exec_sh(id, "echo $NVIDIA_VISIBLE_DEVICES");
    assert_string_equal(seen, "void\n");
    _cleanup_free_ char *init = dtu_exec_sh(id, "tr '\\0' '\\n' </proc/1/environ | grep ^NVIDIA");
    assert_string_equal(init, "NVIDIA_VISIBLE_DEVICES=void\n");
}

/* This dockerd has no "nvidia" runtime and no CDI: the modes that need them
 * fail with Docker's own clear words, and a missing host path is refused
 * rather than created. */
static void test_run_unsupported(void **state)
{
    (void)state;
    static const char *const gpus[] = {"GPU-spec-1"};
    char name[160];
    gb_err e = GB_ERR_INIT;
    char *id = NULL;
    _cleanup_json_ json_t *labels = dtu_labels();

    docker_run_spec spec = {.image = dtu_image,
                            .labels = labels,
                            .gpu_attach = DOCKER_GPU_RUNTIME,
                            .gpu_uuids = gpus,
                            .ngpus = 1};
    _cleanup_json_ json_t *runtime = spec_json(&spec);
    dtu_name(name, sizeof(name), "runtime");
    assert_int_equal(docker_container_create(dtu_client, name, runtime, &id, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "Unknown runtime specified nvidia"));

    spec.gpu_attach = DOCKER_GPU_CDI;
    _cleanup_free_ char *cdi = dtu_create("cdi", spec_json(&spec));
    assert_int_equal(docker_container_start(dtu_client, cdi, &e), -1);
    assert_non_null(strstr(e.msg, "could not select device driver \"cdi\""));

    char missing[128];
    snprintf(missing, sizeof(missing), "/tmp/gbtest-dk-spec-%s-missing", dtu_pid);
    rmdir(missing);
    docker_bind bind = {.src = missing, .dest = "/data"};
    spec = (docker_run_spec){.image = dtu_image, .labels = labels, .binds = &bind, .nbinds = 1};
    _cleanup_json_ json_t *missing_cfg = spec_json(&spec);
    dtu_name(name, sizeof(name), "missing");
    assert_int_equal(docker_container_create(dtu_client, name, missing_cfg, &id, &e), -1);
    assert_int_equal(e.code, ERR_INVALID_PARAMS);
    assert_non_null(strstr(e.msg, "does not exist"));
    struct stat st;
    assert_int_equal(stat(missing, &st), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_nvidia),
        cmocka_unit_test(test_json_cdi),
        cmocka_unit_test(test_json_runtime),
        cmocka_unit_test(test_json_no_gpu),
        cmocka_unit_test(test_json_minimal),
        cmocka_unit_test(test_json_refusals),
        cmocka_unit_test(test_json_tmpfs),
        cmocka_unit_test(test_json_network),
        cmocka_unit_test(test_container_config_view),
        cmocka_unit_test_teardown(test_run_nvidia, dtu_cleanup),
        cmocka_unit_test_teardown(test_run_no_gpu_tty, dtu_cleanup),
        cmocka_unit_test_teardown(test_run_unsupported, dtu_cleanup),
    };
    return cmocka_run_group_tests(tests, group_setup, dtu_teardown);
}
