/*
 * fault.h - fault injection for crash tests (DESIGN.md section 5): when the
 * environment variable GPUBOX_FAULT names a step, the daemon exits at that
 * step at once, with no clean-up, as a kill -9 there would leave it. Tests
 * then start gpuboxd again and check that it recovers.
 *
 * Steps are named "<area>.<operation>.<point>" ("volume.resize.marked") and
 * listed in the docs of the module that has them. Unset, a step costs one
 * getenv.
 */
#ifndef GPUBOX_UTIL_FAULT_H
#define GPUBOX_UTIL_FAULT_H

#define FAULT_EXIT_CODE 86

void fault_point(const char *step);

#endif
