/*
 * names.h - the naming rules of DESIGN.md section 4, in one place.
 *
 * Replica-set and volume names: [a-zA-Z0-9_.], 1-63 characters, no '-'
 * (it separates the version in container names such as "foo-3"), and not
 * "." or ".." (they would read as paths). The errors use the envelope codes
 * gpu-docker-api clients know: an empty name 1002 / 1024, a '-' 1003 / 1031,
 * a volume name starting with '/' 1032; anything else breaking the rules is
 * ERR_INVALID_NAME.
 */
#ifndef GPUBOX_UTIL_NAMES_H
#define GPUBOX_UTIL_NAMES_H

#include "util/err.h"

#define NAME_MAX_LEN 63

int name_check_replicaset(const char *name, gb_err *err);
int name_check_volume(const char *name, gb_err *err);

/* Split a container name "foo-12" into base "foo" and version 12. Returns 0
 * if it has that form (base valid, version >= 1), -1 otherwise. base must
 * hold NAME_MAX_LEN + 1 bytes. */
int name_split_versioned(const char *container_name, char *base, int *version);

#endif
