/*
 * carry_internal.h - what the files of carry/ share: the overlay move on
 * host directories (carry_overlay.c), the portable plan (carry_plan.c), the
 * tar stream rewriter (carry_tar.c) and the portable run (carry_portable.c).
 * Tests include it to check each piece on its own.
 */
#ifndef GPUBOX_CARRY_CARRY_INTERNAL_H
#define GPUBOX_CARRY_CARRY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "carry/carry.h"

/* ---- Overlay (carry_overlay.c) ---- */

/* The xattr that records, on a source directory being merged, its times
 * before the first entry was moved out of it (moving entries changes them). */
#define CARRY_MARK_XATTR "trusted.gpubox.carry"

/* Files Docker gives each container itself, relative to the root: where the
 * new upper directory has its own, it keeps it. */
extern const char *const carry_docker_own_files[];
extern const size_t carry_docker_own_files_count;

typedef struct carry_overlay_opts {
    /* Stop (returning 1) before the rename after this many: the test hook
     * that leaves a move half done, as a crash would. < 0: no limit. */
    long stop_after_moves;
} carry_overlay_opts;

/* Move the entries of old_upper into new_upper (both directories of one
 * filesystem), merging directories both have. Returns 0 when done, 1 when
 * opts->stop_after_moves stopped it, -1 on error. Adds to stats->entries.
 * opts may be NULL. */
int carry_overlay_move(const char *old_upper, const char *new_upper, const carry_overlay_opts *opts,
                       carry_stats *stats, gb_err *err);

/* Whether path appears in /proc/self/mountinfo as a mount's upperdir or
 * lowerdir (an overlay uses it now). */
bool carry_path_in_mount(const char *path);

/* ---- A sorted set of absolute container paths (carry_plan.c) ---- */

typedef struct carry_paths {
    char **v;
    size_t n, cap;
} carry_paths;

/* Adds a copy of path ("/a/b", no trailing slash; "/" ignored). */
void carry_paths_add(carry_paths *s, const char *path);
void carry_paths_free(carry_paths *s);
/* Path order in which a directory's subtree directly follows it: "/a",
 * "/a/b", "/a-b" ('/' sorts first). */
int carry_path_cmp(const char *a, const char *b);
/* p is root or inside it. */
bool carry_path_within(const char *p, const char *root);
/* Some member of s is p or inside p / p is inside some member. */
bool carry_paths_any_within(const carry_paths *s, const char *p);
bool carry_paths_covers(const carry_paths *s, const char *p);

/* ---- The portable plan (carry_plan.c) ---- */

enum carry_op_kind {
    CARRY_OP_SHALLOW, /* the path's own entry only: a file, a link, a directory's metadata */
    CARRY_OP_DEEP,    /* the path and everything under it (added in `from`) */
    CARRY_OP_REPLACE, /* remove the path in `to`, then carry it whole: applies deletions */
};

typedef struct carry_op {
    enum carry_op_kind kind;
    char *path;  /* absolute, in the container */
    bool volume; /* a mount carried whole (a move, carry_export): never skipped */
} carry_op;

typedef struct carry_plan {
    carry_op *ops; /* in carry_path_cmp order */
    size_t nops, cap;
    carry_paths probe;     /* deleted top-level paths: REPLACE them if `from` has them
                              (an emptied directory), else they cannot be carried */
    carry_paths unapplied; /* deletions that cannot be carried, with the reason logged */
} carry_plan;

typedef struct carry_plan_input {
    json_t *changes;          /* Docker's [{Path, Kind}] for `from` */
    const carry_paths *skip;  /* never carried: mounts of either container, /proc, /sys,
                                 /dev, Docker's per-container files */
    const carry_paths *guard; /* `to`'s mount points: nothing that contains one may be
                                 removed in `to` (the removal would reach into the mount) */
} carry_plan_input;

int carry_plan_build(const carry_plan_input *in, carry_plan *plan, gb_err *err);
void carry_plan_add(carry_plan *plan, enum carry_op_kind kind, const char *path);
/* Sort the ops and drop those another op already carries. */
void carry_plan_finish(carry_plan *plan);
void carry_plan_free(carry_plan *plan);

/* ---- Tar streams (carry_tar.c) ---- */

#define CARRY_TAR_BLOCK 512

typedef struct carry_tar_entry {
    char *name;                            /* full name as in the archive ("d/", "d/f"), malloc'd */
    char *linkname;                        /* malloc'd, "" when none */
    char type;                             /* '0' (regular, also '\0' and '7'), '1' .. '6' */
    uint64_t size;                         /* bytes of data that follow the header */
    unsigned char header[CARRY_TAR_BLOCK]; /* the entry's own header block */
    char *pax;                             /* its PAX records but path, linkpath and size */
    size_t pax_len;
} carry_tar_entry;

typedef struct carry_tar_reader carry_tar_reader;

carry_tar_reader *carry_tar_reader_new(int fd);
void carry_tar_reader_free(carry_tar_reader *r);
/* 1 and *e filled (free with carry_tar_entry_clear), 0 at the archive's end
 * (end blocks or end of input), -1 on a malformed or short archive. */
int carry_tar_next(carry_tar_reader *r, carry_tar_entry *e, gb_err *err);
/* The entry's data: written to out_fd (< 0: skipped), padding dropped.
 * -1 when the archive fails, -2 when writing to out_fd fails. */
int carry_tar_data(carry_tar_reader *r, const carry_tar_entry *e, int out_fd, gb_err *err);
void carry_tar_entry_clear(carry_tar_entry *e);

/* Write e's header to fd under name (and linkname, NULL = e's own), adding
 * a PAX header for what does not fit ustar. Data is written separately
 * (carry_tar_data) and padded by carry_tar_pad. */
int carry_tar_write_header(int fd, const carry_tar_entry *e, const char *name, const char *linkname,
                           gb_err *err);
int carry_tar_pad(int fd, uint64_t size, gb_err *err);
/* An empty regular file `name`: in Docker's extraction it first removes
 * whatever is at name, which is how REPLACE deletes. */
int carry_tar_write_placeholder(int fd, const char *name, gb_err *err);
/* The two zero blocks that end an archive. */
int carry_tar_write_end(int fd, gb_err *err);
int carry_write_all(int fd, const void *buf, size_t n);

/* ---- The portable run (carry_portable.c) ---- */

typedef struct carry_portable_input {
    const char *from, *to;   /* container ids */
    const char *to_name;     /* as the caller named it, for messages */
    const carry_paths *skip; /* see carry_plan_input */
    const carry_paths *guard;
} carry_portable_input;

int carry_portable(docker_client *c, const carry_portable_input *in, carry_stats *stats,
                   gb_err *err);
/* The same plan, plus each of volumes carried whole, written into out_fd
 * (not closed) instead of put into a container (carry_export). */
int carry_portable_export(docker_client *c, const carry_portable_input *in,
                          const char *const *volumes, size_t nvolumes, int out_fd,
                          carry_stats *stats, gb_err *err);

#endif
