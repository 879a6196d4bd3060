/*
 * glibc_compat.h - lets libgpubox-cuda.so load with the C library of the
 * image it is preloaded into, not only the build host's.
 *
 * glibc 2.34 moved libdl and libpthread into libc and gave their functions
 * a new version (dlopen@GLIBC_2.34, ...), and 2.33 made stat and fstat real
 * functions. A library linked on a newer host asks for those versions, and
 * an image with an older glibc (Ubuntu 20.04, CUDA images based on it)
 * could not load it: the loader would print an error in every process and
 * the share would not hold there. So, in the preloaded library only
 * (GPUCUDA_PIN_GLIBC, set by CMakeLists.txt):
 *   - the moved functions are bound to their first versions, which every
 *     glibc still has (in libc since 2.34, in libdl/libpthread before:
 *     the library names both as needed, empty stubs on a new glibc);
 *   - fstat is the system call itself (the kernel's struct stat is glibc's
 *     on x86_64 and aarch64); callers use gpucuda_fstat, and nothing calls
 *     stat.
 * With this the library needs glibc 2.17 or later (secure_getenv,
 * clock_gettime in libc). Include it first.
 */
#ifndef GPUBOX_CUDA_GLIBC_COMPAT_H
#define GPUBOX_CUDA_GLIBC_COMPAT_H

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(GPUCUDA_PIN_GLIBC) && defined(__GLIBC__)
#if defined(__x86_64__)
#define GPUCUDA_GLIBC_BASE "GLIBC_2.2.5"
#define GPUCUDA_GLIBC_ROBUST "GLIBC_2.12"
#elif defined(__aarch64__)
#define GPUCUDA_GLIBC_BASE "GLIBC_2.17"
#define GPUCUDA_GLIBC_ROBUST "GLIBC_2.17"
#endif
#endif

#ifdef GPUCUDA_GLIBC_BASE
__asm__(".symver dlopen,dlopen@" GPUCUDA_GLIBC_BASE);
__asm__(".symver dlclose,dlclose@" GPUCUDA_GLIBC_BASE);
__asm__(".symver dlvsym,dlvsym@" GPUCUDA_GLIBC_BASE);
__asm__(".symver pthread_once,pthread_once@" GPUCUDA_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@" GPUCUDA_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@" GPUCUDA_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@" GPUCUDA_GLIBC_BASE);
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@" GPUCUDA_GLIBC_ROBUST);
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@" GPUCUDA_GLIBC_ROBUST);

static inline int gpucuda_fstat(int fd, struct stat *st)
{
    return (int)syscall(SYS_fstat, fd, st);
}
#else
static inline int gpucuda_fstat(int fd, struct stat *st)
{
    return fstat(fd, st);
}
#endif

#endif
