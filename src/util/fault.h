/*
 * fault.h - fault injection for crash tests (DESIGN.md section 5): when the
 * environment variable GPUBOX_FAULT names a step, the daemon exits at that
 * step at once (status FAULT_EXIT_CODE), with no clean-up, as a kill -9
 * there would leave it. Tests then start gpuboxd again and check that it
 * recovers.
 *
 * One switch for every module. Steps are named by their owner:
 *   - journalled operations (service/journal.h): "<kind>:<step>" and
 *     "<kind>:before:<step>", such as "patch:carried";
 *   - volume steps (docs/volumes.md): "<area>.<operation>.<point>", such
 *     as "volume.resize.marked".
 *   - "queue.dispatch.decided", "queue.dispatch.moved": a fleet's queue
 *     dispatcher right before, and right after, it moved a queued request
 *     to the node that starts it (docs/queue.md, "In a fleet").
 *   - "quota.create.reserved": a create right after its owner's quota was
 *     reserved, before it takes anything from the pools (docs/users.md).
 * Unset, a step costs one getenv.
 */
#ifndef GPUBOX_UTIL_FAULT_H
#define GPUBOX_UTIL_FAULT_H

#define FAULT_ENV "GPUBOX_FAULT"
#define FAULT_EXIT_CODE 99

/* Exit if GPUBOX_FAULT is exactly step. */
void fault_point(const char *step);
/* Exit if GPUBOX_FAULT is exactly "<kind>:<step>". */
void fault_point_at(const char *kind, const char *step);

#endif
