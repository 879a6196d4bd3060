// gpu_spin.cu - kernel throughput for tests/gpu/check.sh: launches a
// kernel that keeps every SM busy for about a millisecond (each block spins
// on clock64), as fast as the launch queue takes them, and counts the
// kernels finished in the measured window.
//
// Usage: gpu_spin WARMUP_S MEASURE_S [CYCLES]
//   runs WARMUP_S seconds unmeasured (the rate limiter settles), then
//   MEASURE_S seconds -> "kernels_per_s N" (kernels finished per second)
// CYCLES: the spin of each block (default 1000000, about 0.5-1 ms).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void spin(long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles)
        ;
}

static double seconds_now()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gpu_spin WARMUP_S MEASURE_S [CYCLES]\n");
        return 1;
    }
    double warmup = atof(argv[1]), measure = atof(argv[2]);
    long long cycles = argc > 3 ? atoll(argv[3]) : 1000000LL;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms < 1) {
        fprintf(stderr, "gpu_spin: no CUDA device\n");
        return 1;
    }
    cudaEvent_t done;
    cudaEventCreate(&done);
    double start = seconds_now(), from = start + warmup, until = from + measure;
    long long counted = 0;
    bool measuring = false;
    for (;;) {
        double now = seconds_now();
        if (!measuring && now >= from) {
            cudaDeviceSynchronize(); // the window starts with an empty queue
            measuring = true;
            from = seconds_now();
            until = from + measure;
        }
        if (measuring && now >= until)
            break;
        spin<<<sms * 2, 64>>>(cycles);
        if (cudaGetLastError() != cudaSuccess) {
            fprintf(stderr, "gpu_spin: launch failed\n");
            return 1;
        }
        if (measuring)
            counted++;
    }
    cudaDeviceSynchronize();
    double took = seconds_now() - from; // includes draining the queue
    printf("kernels_per_s %.1f\n", (double)counted / took);
    return 0;
}
