/*
 * test_cuda_preload.c - libgpubox-cuda.so preloaded into a CUDA program:
 * <build>/fakes/cuda_probe against the fake driver
 * (<build>/fakes/libcuda.so.1, cards from a GPUBOX_FAKE_GPUS file), with a
 * limits file and a budget directory under GPUBOX_CUDA_DIR. Each program
 * runs with only the environment given here (as `env -i` would).
 *
 * Card 0 (16 GiB) has a 4 GiB share, card 1 (16 GiB) none. The probe
 * reaches the driver through cuGetProcAddress_v2 (libcudart 12),
 * cuGetProcAddress (11.x) and dlsym, and allocates every kind.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define UUID_A "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define UUID_B "GPU-bbbbbbbb-1111-4000-8000-000000000001"

static char probe[1024], library[1024], fakes[1024];
static char tmpdir[64], gpus_file[128], limits_dir[128], limits_file[160], budget_dir[128];

static void write_file(const char *path, const char *text)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static int setup(void **state)
{
    (void)state;
    const char *build = getenv("GPUBOX_BUILD_DIR");
    if (!build) {
        fprintf(stderr, "GPUBOX_BUILD_DIR must be set (ctest sets it)\n");
        return -1;
    }
    snprintf(probe, sizeof(probe), "%s/fakes/cuda_probe", build);
    snprintf(library, sizeof(library), "%s/cuda/libgpubox-cuda.so", build);
    snprintf(fakes, sizeof(fakes), "%s/fakes", build);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpubox-cuda-preload-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(gpus_file, sizeof(gpus_file), "%s/gpus", tmpdir);
    snprintf(limits_dir, sizeof(limits_dir), "%s/limits", tmpdir);
    snprintf(limits_file, sizeof(limits_file), "%s/limits/limits", tmpdir);
    snprintf(budget_dir, sizeof(budget_dir), "%s/budget", tmpdir);
    mkdir(limits_dir, 0755);
    mkdir(budget_dir, 0777);
    write_file(gpus_file, "0 " UUID_A " 16384 ok Fake A\n1 " UUID_B " 16384 ok Fake B\n");
    write_file(limits_file, "# test\n" UUID_A " 4096\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A running probe: its pid, a pipe to its stdin and one from its stdout. */
typedef struct {
    pid_t pid;
    int in, out;
} probe_proc;

static probe_proc probe_start(bool preload, const char *const *args)
{
    char env_preload[1100], env_lib[1100], env_gpus[200], env_dir[200];
    snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", library);
    snprintf(env_lib, sizeof(env_lib), "LD_LIBRARY_PATH=%s", fakes);
    snprintf(env_gpus, sizeof(env_gpus), "GPUBOX_FAKE_GPUS=%s", gpus_file);
    snprintf(env_dir, sizeof(env_dir), "GPUBOX_CUDA_DIR=%s", tmpdir);
    char *envp[] = {env_lib, env_gpus, env_dir, preload ? env_preload : NULL, NULL};
    char *argv[64] = {probe};
    int n = 1;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execve(probe, argv, envp);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return (probe_proc){.pid = pid, .in = in[1], .out = out[0]};
}

/* Reads the probe's output up to and including a line starting with
 * `until` (or to the end when NULL) into buf. */
static void probe_read(probe_proc *p, char *buf, size_t len, const char *until)
{
    size_t used = 0;
    buf[0] = '\0';
    for (;;) {
        if (until) {
            const char *line = buf;
            while (line && *line) {
                if (strncmp(line, until, strlen(until)) == 0 && strchr(line, '\n'))
                    return;
                line = strchr(line, '\n');
                line = line ? line + 1 : NULL;
            }
        }
        ssize_t n = read(p->out, buf + used, len - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        used += (size_t)n;
        buf[used] = '\0';
    }
}

static int probe_finish(probe_proc *p)
{
    close(p->in);
    close(p->out);
    int status;
    assert_int_equal(waitpid(p->pid, &status, 0), p->pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs the probe to its end; its output in buf. */
static void run_probe(bool preload, const char *const *args, char *buf, size_t len)
{
    probe_proc p = probe_start(preload, args);
    probe_read(&p, buf, len, NULL);
    assert_int_equal(probe_finish(&p), 0);
}

#define RUN(preload, out, ...)                                                                     \
    do {                                                                                           \
        const char *const args_[] = {__VA_ARGS__, NULL};                                           \
        run_probe((preload), args_, (out), sizeof(out));                                           \
    } while (0)

static void test_without_library(void **state)
{
    (void)state;
    char out[512];
    RUN(false, out, "fill", "mem", "512", "info", "total");
    assert_string_equal(out, "fill 16384\ninfo free=0 total=16384\ntotal 16384\n");
}

static void test_every_kind_every_way(void **state)
{
    (void)state;
    const char *vias[] = {"procaddr", "procaddr_v1", "dlsym"};
    const char *kinds[] = {"mem",       "pitch",  "managed", "async",   "async_ptsz", "pool",
                           "pool_ptsz", "create", "array",   "array3d", "mipmap"};
    for (size_t v = 0; v < 3; v++) {
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            char out[512];
            RUN(true, out, "--via", vias[v], "fill", kinds[k], "512", "free", "fill", kinds[k],
                "1024", "info", "total");
            if (strcmp(out,
                       "fill 4096\nfree ok\nfill 4096\ninfo free=0 total=4096\ntotal 4096\n") != 0)
                fail_msg("--via %s, kind %s: got\n%s", vias[v], kinds[k], out);
        }
    }
}

static void test_info_reports_share(void **state)
{
    (void)state;
    char out[512];
    RUN(true, out, "alloc", "mem", "1000", "info", "alloc", "mem", "3097", "alloc", "mem", "3096",
        "info");
    assert_string_equal(out, "alloc ok\ninfo free=3096 total=4096\nalloc oom\nalloc ok\n"
                             "info free=0 total=4096\n");
}

/* Where NVML lists the process with its context memory (the fake NVML's
 * "context" line: 300 MiB besides what it allocates), the budget counts
 * it: a 4096 MiB share leaves 3796 MiB to allocate, and cuMemGetInfo and
 * NVML's memory info say so. */
static void test_context_memory_counts(void **state)
{
    (void)state;
    write_file(gpus_file, "0 " UUID_A " 16384 ok Fake A\n1 " UUID_B " 16384 ok Fake B\n"
                          "context 0 300\ncontext 1 300\n");
    char out[512];
    RUN(true, out, "alloc", "mem", "3797", "alloc", "mem", "3796", "info");
    assert_string_equal(out, "alloc oom\nalloc ok\ninfo free=0 total=4096\n");
    RUN(true, out, "fill", "mem", "512", "info", "nvml");
    assert_string_equal(out, "fill 3584\ninfo free=212 total=4096\n"
                             "nvml total=4096 used=3884 free=212\n"
                             "nvml_v2 total=4096 used=3884 free=212\n");
    /* a card without a share is not counted */
    RUN(true, out, "--device", "1", "fill", "mem", "4096");
    assert_string_equal(out, "fill 16384\n");
}

/* In a container NVML lists processes under their host PIDs (the fake
 * NVML's hostpids line: here a made-up host PID, 4000000 + the probe's);
 * the library finds itself through the pids file gpuboxd writes beside
 * the limits (src/cuda/pids.h). With the file but without the probe's
 * line nothing is counted (the whole share can be allocated); once
 * gpuboxd lists it, its context counts at its next look (at most a
 * second later), and the memory returns when the probe is gone. */
#define HOST_PID 4100000 /* under the kernel's PID_MAX_LIMIT; not the probe's */
static void test_context_memory_counts_through_host_pids(void **state)
{
    (void)state;
    char hostpids[160], pids[160], text[256];
    snprintf(hostpids, sizeof(hostpids), "%s/hostpids", tmpdir);
    snprintf(pids, sizeof(pids), "%s/limits/pids", tmpdir);
    snprintf(text, sizeof(text), "0 " UUID_A " 16384 ok Fake A\ncontext 0 300\nhostpids %s\n",
             hostpids);
    write_file(gpus_file, text);
    write_file(pids, "# HOSTPID PID\n");
    const char *const args[] = {"wait", "alloc", "mem",   "4096", "free", "wait", "alloc",
                                "mem",  "3797",  "alloc", "mem",  "3796", "wait", NULL};
    probe_proc p = probe_start(true, args);
    char out[512];
    probe_read(&p, out, sizeof(out), "waiting");
    /* NVML lists the probe under its host PID; gpuboxd has not listed it:
     * the PIDs do not match, no context is counted */
    snprintf(text, sizeof(text), "%d %d\n", (int)p.pid, HOST_PID);
    write_file(hostpids, text);
    assert_int_equal(write(p.in, "\n", 1), 1);
    probe_read(&p, out, sizeof(out), "waiting");
    assert_string_equal(out, "alloc ok\nfree ok\nwaiting\n");
    /* gpuboxd lists it: the context counts at the library's next look */
    snprintf(text, sizeof(text), "# HOSTPID PID\n12 34\n%d %d\n", HOST_PID, (int)p.pid);
    write_file(pids, text);
    usleep(1100 * 1000);
    assert_int_equal(write(p.in, "\n", 1), 1);
    probe_read(&p, out, sizeof(out), "waiting");
    assert_string_equal(out, "alloc oom\nalloc ok\nwaiting\n");
    /* meanwhile a second process finds the card full (its own context is
     * not listed in the pids file, so not counted) */
    RUN(true, out, "fill", "mem", "1");
    assert_string_equal(out, "fill 0\n");
    /* gone: its allocations and its context return to the budget */
    kill(p.pid, SIGKILL);
    probe_finish(&p);
    RUN(true, out, "fill", "mem", "512");
    assert_string_equal(out, "fill 4096\n");
}

static void test_card_without_limit(void **state)
{
    (void)state;
    char out[512];
    RUN(true, out, "--device", "1", "fill", "mem", "512", "info", "total");
    assert_string_equal(out, "fill 16384\ninfo free=0 total=16384\ntotal 16384\n");
    /* No limits file at all: nothing is limited. */
    unlink(limits_file);
    RUN(true, out, "fill", "mem", "512");
    assert_string_equal(out, "fill 16384\n");
}

static void test_processes_share_budget_and_kill(void **state)
{
    (void)state;
    const char *const hold[] = {"alloc", "mem", "3072", "wait", NULL};
    probe_proc a = probe_start(true, hold);
    char out[512];
    probe_read(&a, out, sizeof(out), "waiting");
    assert_string_equal(out, "alloc ok\nwaiting\n");

    RUN(true, out, "fill", "mem", "512", "info");
    assert_string_equal(out, "fill 1024\ninfo free=0 total=4096\n");
    RUN(true, out, "info");
    assert_string_equal(out, "info free=1024 total=4096\n");

    /* kill -9 of the holder: its 3 GiB come back. */
    kill(a.pid, SIGKILL);
    assert_int_equal(probe_finish(&a), 128 + SIGKILL);
    RUN(true, out, "fill", "mem", "512");
    assert_string_equal(out, "fill 4096\n");
}

static void test_share_changed_while_running(void **state)
{
    (void)state;
    const char *const args[] = {"alloc", "mem", "2048", "wait", "fill", "mem", "512", "info", NULL};
    probe_proc a = probe_start(true, args);
    char out[512];
    probe_read(&a, out, sizeof(out), "waiting");
    /* gpuboxd replaces the file: the next allocation sees 3 GiB. */
    write_file(limits_file, UUID_A " 3072\n");
    assert_int_equal(write(a.in, "\n", 1), 1);
    probe_read(&a, out, sizeof(out), "info");
    assert_string_equal(out, "fill 1024\ninfo free=0 total=3072\n");
    assert_int_equal(probe_finish(&a), 0);
}

static void test_without_budget_dir_each_process_alone(void **state)
{
    (void)state;
    rmdir(budget_dir);
    const char *const hold[] = {"alloc", "mem", "3072", "wait", NULL};
    probe_proc a = probe_start(true, hold);
    char out[512];
    probe_read(&a, out, sizeof(out), "waiting");
    RUN(true, out, "fill", "mem", "512");
    assert_string_equal(out, "fill 4096\n");
    kill(a.pid, SIGKILL);
    probe_finish(&a);
}

/* NVML's memory info (what nvidia-smi shows in the container): the share
 * as the card's total, the container's use as used, by both entry points;
 * a card without a share as NVML has it. */
static void test_nvml_reports_share(void **state)
{
    (void)state;
    char out[512];
    RUN(true, out, "alloc", "mem", "1000", "nvml");
    assert_string_equal(out, "alloc ok\nnvml total=4096 used=1000 free=3096\n"
                             "nvml_v2 total=4096 used=1000 free=3096\n");
    const char *const hold[] = {"alloc", "mem", "3000", "wait", NULL};
    probe_proc a = probe_start(true, hold);
    probe_read(&a, out, sizeof(out), "waiting");
    RUN(true, out, "nvml"); /* another process sees the container's use */
    assert_string_equal(out, "nvml total=4096 used=3000 free=1096\n"
                             "nvml_v2 total=4096 used=3000 free=1096\n");
    kill(a.pid, SIGKILL);
    probe_finish(&a);
    RUN(true, out, "--device", "1", "nvml");
    assert_string_equal(out, "nvml total=16384 used=163 free=16220\n"
                             "nvml_v2 total=16384 used=163 free=16220\n");
    RUN(false, out, "alloc", "mem", "1000", "nvml");
    assert_string_equal(out, "alloc ok\nnvml total=16384 used=163 free=16220\n"
                             "nvml_v2 total=16384 used=163 free=16220\n");
}

static unsigned long long launches(const char *via, const char *kind)
{
    char out[128];
    RUN(true, out, "--via", via, "launch", kind, "400");
    unsigned long long n = 0;
    if (sscanf(out, "launch %llu", &n) != 1)
        fail_msg("--via %s, launch %s: got %s", via, kind, out);
    return n;
}

/* Launches under `limits` against a run without a share, by the same kind
 * of launch. The two runs are timed one after the other, so a machine
 * busy with other work can slow either: compare up to three times and
 * answer whether any comparison came out as expected (slowed: fewer than
 * half; not slowed: more than a third). A limiter that does not work fails
 * all three, a busy machine only some. */
static bool compare_launches(const char *via, const char *kind, const char *limits, bool slowed,
                             unsigned long long *n, unsigned long long *free_run)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        write_file(limits_file, UUID_A " 4096\n");
        *free_run = launches("procaddr", kind);
        write_file(limits_file, limits);
        *n = launches(via, kind);
        if (slowed ? *n * 2 <= *free_run : *n * 3 > *free_run)
            return true;
    }
    return false;
}

/* A compute share of 10% on a card NVML reports fully busy: launches are
 * slowed by every kind and every way to the driver (after the first
 * sample, each period halves the rate); without a share, at 100%, or on
 * an idle card they are not. */
static void test_compute_share_slows_launches(void **state)
{
    (void)state;
    write_file(gpus_file, "0 " UUID_A " 16384 ok Fake A\n1 " UUID_B " 16384 ok Fake B\n"
                          "usage 0 8000 100\n");
    const char *vias[] = {"procaddr", "procaddr_v1", "dlsym"};
    const char *kinds[] = {"kernel", "kernel_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz"};
    unsigned long long n, free_run;
    for (size_t k = 0; k < 6; k++) {
        for (size_t v = 0; v < 3; v++) {
            if (!compare_launches(vias[v], kinds[k], UUID_A " 4096 cores=10\n", true, &n,
                                  &free_run))
                fail_msg("--via %s, launch %s: %llu launches at 10%%, %llu without a share",
                         vias[v], kinds[k], n, free_run);
        }
    }
    /* 100%: the whole card's time, no limit. An idle card: no delay. */
    if (!compare_launches("procaddr", "kernel", UUID_A " 4096 cores=100\n", false, &n, &free_run))
        fail_msg("%llu launches at 100%%, %llu without a share", n, free_run);
    write_file(gpus_file, "0 " UUID_A " 16384 ok Fake A\n1 " UUID_B " 16384 ok Fake B\n"
                          "usage 0 8000 0\n");
    if (!compare_launches("procaddr", "kernel", UUID_A " 4096 cores=30\n", false, &n, &free_run))
        fail_msg("%llu launches at 30%% on an idle card, %llu without a share", n, free_run);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_without_library, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_kind_every_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_info_reports_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_card_without_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_context_memory_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_context_memory_counts_through_host_pids, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_processes_share_budget_and_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_share_changed_while_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_budget_dir_each_process_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_nvml_reports_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compute_share_slows_launches, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
