/*
 * track.h - what each live allocation of this process was charged, so its
 * free or release gives back the same bytes on the same card.
 *
 * Keys are what the driver handed out: a device pointer, a cuMemCreate
 * handle, a CUarray or CUmipmappedArray; `kind` keeps the namespaces
 * apart. Only charged allocations are tracked: freeing anything else (a
 * card without a limit, memory from before the library knew a limit)
 * gives nothing back. One process-local table behind a mutex; a forked
 * child starts with an empty one (CUDA objects do not cross fork).
 */
#ifndef GPUBOX_CUDA_TRACK_H
#define GPUBOX_CUDA_TRACK_H

#include <stdbool.h>
#include <stdint.h>

enum gpucuda_track_kind {
    GPUCUDA_TRACK_PTR = 1, /* cuMemAlloc*, cuMemAllocAsync, cuMemAllocFromPoolAsync */
    GPUCUDA_TRACK_HANDLE,  /* cuMemCreate */
    GPUCUDA_TRACK_ARRAY,   /* cuArrayCreate, cuArray3DCreate */
    GPUCUDA_TRACK_MIPMAP,  /* cuMipmappedArrayCreate */
};

/* false when the table could not grow (the allocation stays charged). */
bool gpucuda_track_add(uint64_t key, int kind, int dev, uint64_t bytes);

/* Removes the entry; false when there is none. */
bool gpucuda_track_remove(uint64_t key, int kind, int *dev, uint64_t *bytes);

/* Empties the table without freeing it (the child side of fork). */
void gpucuda_track_reset_after_fork(void);

#endif
