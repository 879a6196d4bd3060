// gpu_alloc.cu - allocates device memory through the CUDA runtime, as CUDA
// programs do, for tests/gpu/check.sh (libgpubox-cuda preloaded on a real
// GPU).
//
// Usage: gpu_alloc STEP...
//   alloc MIB   one cudaMalloc                -> "alloc ok" | "alloc oom"
//   fill MIB    cudaMalloc MIB at a time until refused -> "fill TOTAL_MIB"
//   info        cudaMemGetInfo                -> "info free=MIB total=MIB"
//   wait        prints "waiting", then reads one line of stdin
// Memory is freed at exit. Exit status 0, or 1 when CUDA cannot start.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cudaFree(0) != cudaSuccess) {
        fprintf(stderr, "gpu_alloc: no CUDA device\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "alloc") == 0 && i + 1 < argc) {
            size_t mib = strtoull(argv[++i], NULL, 10);
            void *p = NULL;
            cudaError_t rc = cudaMalloc(&p, mib << 20);
            if (rc == cudaSuccess)
                printf("alloc ok\n");
            else if (rc == cudaErrorMemoryAllocation)
                printf("alloc oom\n");
            else
                printf("alloc error %d\n", (int)rc);
            cudaGetLastError();
        } else if (strcmp(argv[i], "fill") == 0 && i + 1 < argc) {
            size_t mib = strtoull(argv[++i], NULL, 10), total = 0;
            void *p = NULL;
            while (mib > 0 && cudaMalloc(&p, mib << 20) == cudaSuccess)
                total += mib;
            cudaGetLastError();
            printf("fill %zu\n", total);
        } else if (strcmp(argv[i], "info") == 0) {
            size_t free_b = 0, total_b = 0;
            cudaError_t rc = cudaMemGetInfo(&free_b, &total_b);
            printf("info free=%zu total=%zu%s\n", free_b >> 20, total_b >> 20,
                   rc == cudaSuccess ? "" : " error");
        } else if (strcmp(argv[i], "wait") == 0) {
            printf("waiting\n");
            char line[64];
            if (!fgets(line, sizeof(line), stdin))
                line[0] = '\0';
        } else {
            fprintf(stderr, "gpu_alloc: unknown step %s\n", argv[i]);
            return 1;
        }
    }
    return 0;
}
