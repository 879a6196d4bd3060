/*
 * budget.h - one memory budget per container, shared by its processes.
 *
 * The budget is a file gpuboxd gives the container read-write
 * (<dir>/budget/budget, docs/gpus.md), mapped shared by every process that
 * allocates on a limited card. It survives any one process:
 *
 *     header   magic, layout version, a robust process-shared mutex
 *     devices  up to GPUCUDA_MAX_DEVICES cards by UUID, each with the bytes
 *              the container holds on it (the sum of the slots' bytes)
 *     slots    one per allocating process: pid, the process's start time
 *              (so a reused pid is not taken for the old process) and its
 *              bytes per card
 *
 * A process takes a slot at its first charge. Its memory returns to the
 * budget when it frees it, when it exits (the library's destructor), or,
 * when it died without either (kill -9), when another process finds its
 * slot dead: at every charge that would not fit, and whenever the mutex
 * comes back EOWNERDEAD (its holder died holding it; the totals are then
 * recounted from the slots, the one part a holder only ever changes in
 * its own slot, before the mutex is marked consistent).
 *
 * Without a budget file (gpucuda_budget_open with NULL) the region is the
 * process's own: each process is then limited on its own.
 */
#ifndef GPUBOX_CUDA_BUDGET_H
#define GPUBOX_CUDA_BUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "limits.h"

#define GPUCUDA_BUDGET_SLOTS 256
#define GPUCUDA_BUDGET_MAGIC 0x6770626f78627564ULL /* "gpboxbud" */
#define GPUCUDA_BUDGET_VERSION 1

typedef struct {
    int32_t pid; /* 0: free */
    uint32_t pad;
    uint64_t starttime; /* /proc/<pid>/stat field 22; 0 when unknown */
    uint64_t used[GPUCUDA_MAX_DEVICES];
} gpucuda_budget_slot;

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t size;
    pthread_mutex_t lock;
    uint32_t ndev;
    uint32_t pad;
    unsigned char uuid[GPUCUDA_MAX_DEVICES][16];
    uint64_t used[GPUCUDA_MAX_DEVICES];
    gpucuda_budget_slot slot[GPUCUDA_BUDGET_SLOTS];
} gpucuda_budget_shm;

/* One process's view of the budget. */
typedef struct {
    gpucuda_budget_shm *shm;
    bool shared; /* a file's region, not the process's own */
    int slot;    /* -1 until the first charge */
    pid_t pid;   /* the process that owns `slot` (a forked child takes its own) */
} gpucuda_budget;

/* Maps the budget file at path (created with mode 0666 when missing), or a
 * region of the process's own when path is NULL or the file cannot be used
 * (said on stderr). 0, or -1 when not even that could be mapped. */
int gpucuda_budget_open(gpucuda_budget *b, const char *path);

/* Gives the process's slot back: its bytes return to the budget. The
 * region stays mapped (the library's destructor calls this while other
 * threads may still allocate). */
void gpucuda_budget_leave(gpucuda_budget *b);

/* gpucuda_budget_leave, then unmaps the region. */
void gpucuda_budget_close(gpucuda_budget *b);

/* The budget's index of the card, added when new; -1 when the budget
 * already names GPUCUDA_MAX_DEVICES other cards. */
int gpucuda_budget_device(gpucuda_budget *b, const unsigned char uuid[16]);

/* Adds bytes on card dev to the process's slot when the container's total
 * stays within limit. 0, or -1 when it would not (or no slot is free). */
int gpucuda_budget_charge(gpucuda_budget *b, int dev, uint64_t bytes, uint64_t limit);

/* Returns bytes on card dev from the process's slot to the budget. */
void gpucuda_budget_refund(gpucuda_budget *b, int dev, uint64_t bytes);

/* What this process's slot holds on card dev (0 before its first charge). */
uint64_t gpucuda_budget_own(gpucuda_budget *b, int dev);

/* What the container holds on card dev. */
uint64_t gpucuda_budget_used(gpucuda_budget *b, int dev);

/* Frees the slots of dead processes; how many. */
int gpucuda_budget_reap(gpucuda_budget *b);

/* The budget's lock (EOWNERDEAD handled as above); for the library and
 * its tests. 0, or an errno value. */
int gpucuda_budget_lock(gpucuda_budget *b);
void gpucuda_budget_unlock(gpucuda_budget *b);

#endif
