/*
 * limits.h - the memory share of each card, as gpuboxd writes it for a
 * container (docs/gpus.md, "The CUDA limiter").
 *
 * The file is plain text, one card a line; blank lines and '#' comments
 * are ignored:
 *
 *     # UUID MEMORY_MIB [KEY=VALUE...]
 *     GPU-aaaaaaaa-0000-4000-8000-000000000000 8192
 *
 * UUID is the card's (or MIG instance's) NVML UUID, "GPU-" or "MIG-" and 32
 * hex digits in the 8-4-4-4-12 form; the library matches it against
 * cuDeviceGetUuid, so the limit follows the card whatever CUDA ordinal
 * CUDA_VISIBLE_DEVICES gives it. MEMORY_MIB is the share, 1 or more.
 * KEY=VALUE fields may follow: `cores=P`, the compute share, P percent
 * (1-100) of the card's SM time (docs/gpus.md, "Compute shares"; 100 or
 * absent: kernel launches are not limited). Other keys are ignored (room
 * for later limits). A card the file does not name is not limited.
 *
 * gpuboxd replaces the file whole (write a temporary file, rename it over
 * the old one); gpucuda_limits_refresh notices the new file by its inode,
 * size and mtime, so a share changes without restarting the processes.
 */
#ifndef GPUBOX_CUDA_LIMITS_H
#define GPUBOX_CUDA_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define GPUCUDA_MAX_DEVICES 16

typedef struct {
    unsigned char uuid[16];
    uint64_t memory_bytes;
    unsigned cores; /* percent of SM time, 1-99; 0: not limited (absent or 100) */
} gpucuda_limit;

typedef struct {
    int n;
    gpucuda_limit dev[GPUCUDA_MAX_DEVICES];
} gpucuda_limits;

/* The limits file as last read, kept open, and what identifies that
 * version. Zero-initialized with a path, it has read nothing yet. */
typedef struct {
    const char *path;
    int fd; /* the version read, open; 0: none */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    unsigned generation; /* bumped whenever `limits` changes */
    gpucuda_limits limits;
} gpucuda_limits_file;

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or "MIG-...") to its 16
 * bytes, as cuDeviceGetUuid gives them. 0, or -1 when malformed. */
int gpucuda_uuid_parse(const char *s, size_t len, unsigned char out[16]);

/* Parses the file's text. 0, or -1 with a message naming the line in err. */
int gpucuda_limits_parse(const char *text, gpucuda_limits *out, char *err, size_t errlen);

/* The card's limit, or NULL when the file does not name it. */
const gpucuda_limit *gpucuda_limits_find(const gpucuda_limits *l, const unsigned char uuid[16]);

/* Reads f->path again when it changed since the last call: the file read
 * last is kept open, and one fstat tells whether it was replaced (a rename
 * over it leaves it without links), removed, or rewritten in place
 * (another size or mtime; timestamps are coarse, so gpuboxd replaces the
 * file rather than rewriting it). Without an open file, the path is
 * opened again. A missing file means no limits; a malformed one, or one
 * that cannot be read, keeps the limits last read (and says so on stderr,
 * once per version). True when the limits changed. */
bool gpucuda_limits_refresh(gpucuda_limits_file *f);

/* The whole file from fd (read from offset 0) as a string, at most
 * 64 KiB (a few lines a card; pids.h's file is as small), or NULL: free
 * it. */
char *gpucuda_read_small_file(int fd);

#endif
