/*
 * move.h - what the two sides of a move between nodes share (move.c, the
 * node the set leaves; move_in.c, the node it goes to; move_settle.c,
 * both after a crash). Not for use outside src/service/replicaset/.
 *
 * The conversation, every request signed as from a node of the fleet
 * (docs/fleet.md, "Moving a replica set"), under one id: the source's
 * journal operation's, which the target's own operation takes too:
 *
 *   source -> target  POST MOVE_PATH                 prepare: room taken,
 *                                                    volumes and container made
 *   source -> target  POST MOVE_PATH/{id}/pull       the target pulls the data
 *                     {"phase": "pre"}               (tree way, a running set: while
 *                                                    it runs), then "final" (stopped):
 *   target -> source  GET  MOVE_PATH/{id}/data       the carry stream (tar), or
 *                     ?part=K&phase=P                one part of the tree way;
 *                     &offset=N                      resumed from byte N
 *                     &head=LEN.SUM                  where the same entry begins
 *   source            the fleet's name index handed over (point of no return)
 *   source -> target  POST MOVE_PATH/{id}/commit     records written, started
 *   source -> target  POST MOVE_PATH/{id}/abort      before the point: undone
 *
 * The name index decides after a crash: the node that owns the name owns
 * the set (move_settle.c).
 */
#ifndef GPUBOX_SERVICE_REPLICASET_MOVE_H
#define GPUBOX_SERVICE_REPLICASET_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "service/app.h"
#include "service/journal.h"
#include "util/err.h"

#define MOVE_PATH "/api/v1/internal/moves"
/* A host directory a move's tree way reads or writes. */
#define MOVE_DIR_MAX 1024

/* One request to another node and its envelope's data: 0 with *data
 * (may be NULL) when it answered 2xx, -1 with err set to its answer's
 * code and message (ERR_NODE_UNAVAILABLE when it did not answer). */
int move_call(app *a, const char *advertise, const char *method, const char *path,
              const char *authorization, const json_t *body, long timeout_ms, json_t **data,
              gb_err *err);

/* A move from this node, waited for (on_prepared NULL) or with
 * on_prepared(ctx, answer so far) called once the target took the room
 * (move.c). */
struct replicaset_move_request;
int move_out_run(app *a, const char *name, const struct replicaset_move_request *rq,
                 void (*on_prepared)(void *, const json_t *), void *ctx, json_t **out, gb_err *err);

/* The source's undo and finish, from wherever its operation got to (also
 * after a crash): the operation op on record r. */
/* A move with_sharers (move_group.c): the set and every set that binds one
 * of its volumes, transitively, one after another to one node (each a
 * move_out_run with rq->group set). */
int move_group_run(app *a, const char *name, const struct replicaset_move_request *rq,
                   void (*on_prepared)(void *, const json_t *), void *ctx, json_t **out,
                   gb_err *err);
/* move_group_settle.c: a group's operation op (move-group) moved on from
 * wherever it got to: each set not yet on the target, in order, moved with
 * its part (one is rq for each, with the group's node). 0 all moved (op
 * done and saved), 1 a set's own operation must settle first, -1 a move
 * failed (err; *failed its index; before that index every set moved).
 * answers gets each answer of a set moved now. */
int move_group_forward(app *a, journal_op *op, const struct replicaset_move_request *one,
                       void (*on_prepared)(void *, const json_t *), void *ctx, json_t *answers,
                       size_t *failed, gb_err *err);
/* No set of op moved: the sets stopped for it run again, op undone. */
int move_group_undo(app *a, journal_op *op, const char *why, gb_err *err);
/* Group id is run by this process now (a request or the move thread);
 * false when it already is, or its next try is not due (after a failure:
 * release with retry, which puts the next try off, longer each time). */
bool move_group_claim(const char *id);
void move_group_release(const char *id, bool retry);
/* The move thread's pass over unfinished group found. */
void move_group_settle(app *a, const journal_op *found);
/* Every set an unfinished group holds here: held[name] = {id, node}. */
void move_group_held(app *a, json_t *held);
/* 0 when no unfinished group holds set name here; else -1, ERR_STATE_CONFLICT
 * saying that it follows its group by itself (a move of it alone). */
int move_group_check_free(app *a, const char *name, gb_err *err);
/* What set r needs on a target's disk (system disk and the volumes not in
 * group's sharedVolumes), its volumes checked as for the move. */
int move_need_bytes(app *a, const struct replicaset_record *r, const json_t *group, uint64_t *bytes,
                    gb_err *err);
int move_out_resume(app *a, journal_op *op, const struct replicaset_record *r, gb_err *err);

/* After the answer (move_leave.c): the source's cards, ports and cores of
 * record r (its container stopped) back to the pools, the record written
 * without them; the settle thread woken to remove the old copy
 * (move_out_cleanup_due says when it may: a test hook can hold it); the
 * record r of a set that left, not listed here (move_out_left); and, with
 * name's lock held, the old copy of a set that comes back removed first
 * (move_out_finish_left: 0 when there was none). */
void move_out_release_early(app *a, journal_op *op, struct replicaset_record *r);
void move_out_cleanup_soon(const char *op_id);
bool move_out_cleanup_due(const journal_op *op);
/* Whether this process answered move op_id and left its old copy to the
 * settle thread (a log's wording only). */
bool move_out_answered(const char *op_id);
bool move_out_left(app *a, const struct replicaset_record *r);
int move_out_finish_left(app *a, const char *name, gb_err *err);
/* The settle thread looks at once (move_settle.c). */
void move_settle_wake(void);

/* The target's commit and undo of move-in operation op (loaded, running),
 * with the set's name lock held. */
int move_in_commit_op(app *a, journal_op *op, json_t **out, gb_err *err);
int move_in_undo_op(app *a, journal_op *op, const char *why, gb_err *err);

/* Live progress of this node's moves (bytes of the stream so far), by id,
 * for GET /operations/{id}: 1 found. */
int move_progress_get(const char *id, uint64_t *bytes, double *seconds);
void move_progress_set(const char *id, uint64_t bytes, double seconds, int done);

/* move_zstd.c: in_fd to out_fd as mode says ("auto" | "zstd" | "none";
 * NULL: auto), *compressed whether it went compressed, *out_bytes what
 * was written; and the target's side, which decompresses a zstd stream and
 * copies any other. */
int move_zstd_encode(int in_fd, int out_fd, const char *mode, bool *compressed, uint64_t *out_bytes,
                     gb_err *err);
int move_zstd_decode(int in_fd, int out_fd, gb_err *err);
/* Where encoded or decoded bytes go: < 0 to stop (errno set). */
typedef int (*move_sink_fn)(void *ctx, const void *data, size_t n);
/* The same after dropping the first skip bytes of in_fd (a resumed pull):
 * refused (ERR_CONFLICT) when no tar entry begins there. */
int move_zstd_encode_at(int in_fd, int out_fd, const char *mode, uint64_t skip, bool *compressed,
                        uint64_t *out_bytes, gb_err *err);
/* The same into sink instead of a descriptor. */
int move_zstd_encode_to(int in_fd, move_sink_fn sink, void *sctx, const char *mode, uint64_t skip,
                        bool *compressed, uint64_t *out_bytes, gb_err *err);
/* The decoder pushed: each piece of the stream as it arrives, the
 * decoded bytes to sink; end once the stream ended (refused when it ends
 * inside a zstd frame). */
typedef struct move_zstd_decoder move_zstd_decoder;
move_zstd_decoder *move_zstd_decoder_new(move_sink_fn sink, void *ctx);
int move_zstd_decoder_push(move_zstd_decoder *d, const void *data, size_t n, gb_err *err);
int move_zstd_decoder_end(move_zstd_decoder *d, gb_err *err);
void move_zstd_decoder_free(move_zstd_decoder *d);

#endif
