/*
 * carry.h - carry a container's system disk into its successor.
 *
 * The system disk is a container's own writable layer: the packages a user
 * installed, the files written outside volumes, the files deleted from the
 * image. When gpubox replaces container foo-N by foo-(N+1) (new GPUs,
 * volumes, env, a rollback), that layer moves into the new container, which
 * was made from the same image and created but never started. The result is
 * exact: files, directories (empty ones too, with their metadata), symlinks,
 * hard links, modes (setuid, setgid, sticky), owners, xattrs, times, fifos
 * and device nodes, and deletions of image files.
 *
 * Two ways (docs/carry.md):
 *   - overlay: on the overlay2 storage driver, the entries of the old
 *     container's upper directory are renamed into the new one's. Nothing is
 *     copied, so the time does not depend on the size; whiteouts and opaque
 *     directories move as they are. Crash-safe and idempotent: a run that
 *     stopped anywhere is finished by running it again.
 *   - portable: any storage driver; Docker's changes API names what changed
 *     and the archive API streams it from the old container into the new one
 *     (one tar stream, bounded memory), deleted image files included. Slower,
 *     and it cannot keep everything (see docs/carry.md, "Limits").
 * CARRY_AUTO takes the overlay way whenever it can be used.
 *
 * Only docker/ talks to Docker; this layer works on what it answers and, for
 * the overlay way, on host paths under Docker's data root (gpuboxd runs as
 * root on the Docker host).
 */
#ifndef GPUBOX_CARRY_CARRY_H
#define GPUBOX_CARRY_CARRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "docker/docker.h"
#include "util/err.h"

enum carry_method { CARRY_AUTO, CARRY_OVERLAY, CARRY_PORTABLE };

/* "auto" | "overlay" | "portable" -> enum carry_method; -1 when unknown. */
int carry_method_parse(const char *s);
/* The name carry_method_parse reads ("auto", "overlay", "portable"). */
const char *carry_method_name(enum carry_method m);

typedef struct carry_stats {
    enum carry_method used; /* CARRY_OVERLAY or CARRY_PORTABLE */
    uint64_t entries;       /* overlay: entries renamed (each may be a whole tree);
                               portable: tar entries written into the new container */
    uint64_t bytes;         /* bytes of file data copied (overlay: 0, nothing is copied) */
    double seconds;         /* wall time of the whole call */
    uint64_t unapplied;     /* portable: changes that could not be carried (logged,
                               see docs/carry.md); overlay: always 0 */
    char note[256];         /* why this method was used, e.g. why auto fell back */
} carry_stats;

/* Move the system disk of the stopped container `from` into `to`, which is
 * made from the same image and created but not started (a container that
 * ran and stopped is accepted too: what it wrote itself is kept where the
 * user's layer does not replace it). `from` keeps what the overlay way did
 * not need to move and is not otherwise changed; remove it afterwards.
 * Calling it again after it returned, or after a crash part way, finishes
 * the same work (the overlay way) or redoes it (the portable way).
 *
 * method: CARRY_AUTO picks overlay when both containers use overlay2 and
 * their upper directories are reachable on one filesystem and not mounted,
 * else portable, and says why in stats->note and the log. CARRY_OVERLAY
 * fails (ERR_INVALID_PARAMS, saying why) where auto would fall back.
 * stats may be NULL.
 *
 * Errors: ERR_NOT_FOUND when a container is absent; ERR_STATE_CONFLICT when
 * either runs (or is paused or restarting), or an upper directory is
 * mounted; ERR_INVALID_PARAMS for the same container twice, different
 * images, or a method that cannot be used; ERR_DOCKER_UNAVAILABLE;
 * ERR_INTERNAL for a filesystem or stream failure, naming the path. */
int carry_system_disk(docker_client *c, const char *from, const char *to, enum carry_method method,
                      carry_stats *stats, gb_err *err);

/* A move to another node (service/move/): write into out_fd the portable
 * way's stream of the stopped container `from` - its system disk's changes
 * against its image, deletions as placeholders, as carry_system_disk would
 * carry them - followed by the whole content of each mount point in
 * volumes (the gpubox volumes it binds), as one tar archive that an
 * archive PUT at "/" of a container made from the same image with the
 * same mounts extracts. The caller closes out_fd; a failure part way ends
 * the stream with a corrupt block, so the extraction fails too. stats may
 * be NULL. Errors as carry_system_disk's. */
/* A pipe that carries a stream of file data: 1 MiB instead of 64 KiB, so
 * its two ends switch less often (best effort: the limit of
 * /proc/sys/fs/pipe-max-size may refuse it). */
void carry_pipe_widen(int fd);

int carry_export(docker_client *c, const char *from, const char *const *volumes, size_t nvolumes,
                 int out_fd, carry_stats *stats, gb_err *err);

/* ---- A move's stream cut and resumed (carry_tar.c) ---- */

/* Whether the 512-byte block is a tar header (its checksum holds) or an
 * end block: where a resumed stream may begin. */
bool carry_tar_block_starts_entry(const unsigned char *block);

/* Copy the tar stream read from in_fd to out_fd (an extraction), noting
 * where each whole entry ends. *complete: the stream reached its end
 * blocks. Otherwise (cut off) the entry under way is completed with zeros
 * and the archive ended there, so the extraction takes every whole entry
 * and ends cleanly; *whole is then the offset to resume from: the start of
 * the first entry not received whole (its PAX or long-name headers
 * included). -1 when out_fd stopped taking data. */
int carry_tar_relay(int in_fd, int out_fd, uint64_t *whole, bool *complete, gb_err *err);
/* The same pushed: each piece as it comes (-1 with errno once out_fd
 * stopped taking data), then the end (which frees r). */
typedef struct carry_relay carry_relay;
carry_relay *carry_relay_new(int out_fd);
int carry_relay_feed(carry_relay *r, const void *data, size_t n);
int carry_relay_end(carry_relay *r, uint64_t *whole, bool *complete, gb_err *err);
/* Before the end, when the stream was cut inside an entry's data: the
 * length and sum (carry_tar_head_hash) of that entry's headers, which
 * begin at *whole - so a stream read while its tree changed is resumed
 * only where the same entry begins again (carry_tree_export). */
bool carry_relay_head(const carry_relay *r, uint64_t *len, uint64_t *hash);
/* FNV-1a of data, going on from hash (0: a new sum). */
uint64_t carry_tar_head_hash(uint64_t hash, const void *data, size_t n);

/* ---- The tree way of a move (carry_tree.c) ---- */

/* Where a container's system disk lies on this host for the tree way: its
 * overlay2 upper directory, reachable here. -1 with why in err
 * (ERR_INVALID_PARAMS) when the tree way cannot be used. */
int carry_tree_upper(docker_client *c, const char *container, char *path, size_t size, gb_err *err);

/* Whether this host has the GNU tar the tree way runs. */
bool carry_tree_tar_ok(void);

/* The tree at dir as a tar stream into out_fd, by GNU tar in listed-
 * incremental mode: snapshot_in (NULL: none, everything goes) says what an
 * earlier stream sent, and snapshot_out (NULL: not kept) gets this
 * stream's, so a later stream with it carries only what changed since -
 * new and changed files, mode, owner and xattr changes - and the
 * directories' listings, from which the extraction deletes what is gone.
 * Overlay's whiteouts and opaque directories (device nodes, trusted.*
 * xattrs) travel as they are. skip: bytes of the stream not written (a
 * resumed pull); refused (ERR_CONFLICT) when no entry begins there, or
 * (head_len not 0) when the head_len bytes there do not sum to head_hash
 * (carry_relay_head: the entry the receiving side expects).
 * live: the tree may change as it is read (a running set): files that
 * change are sent as read, and a later stream carries them again.
 * work: a file of the caller's for tar's snapshot as it runs (removed, or
 * renamed to snapshot_out). */
int carry_tree_export(const char *dir, const char *snapshot_in, const char *snapshot_out,
                      const char *work, uint64_t skip, uint64_t head_len, uint64_t head_hash,
                      bool live, int out_fd, gb_err *err);

/* Date snapshot (carry_tree_export's snapshot_out) back to since when it
 * is later: a stream made with it then carries everything that changed
 * since `since` (a resumed pre-copy, whose first bytes were read by an
 * earlier try). Refused (ERR_CONFLICT) when the file is not a snapshot of
 * GNU tar's format 2. */
int carry_tree_snapshot_backdate(const char *snapshot, const struct timespec *since, gb_err *err);

/* Extract the tar stream read from in_fd into dir (carry_tree_export's,
 * through carry_tar_relay): files, owners, modes, xattrs, device nodes,
 * and deletions of what the stream's listings no longer name. in_fd is
 * closed (tar holds it), so a writer sees a broken pipe if tar stops. */
int carry_tree_import(const char *dir, int in_fd, gb_err *err);

#endif
