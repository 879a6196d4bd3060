/*
 * size.h - human sizes such as "20GB", "1.5tb", "512 MB" to bytes and back.
 *
 * Units are powers of 1024 (as gpu-docker-api and Docker's size options
 * treat them): B, KB, MB, GB, TB, any case, optional space, decimals allowed
 * ("0.5GB"). A bare number is bytes. Anything else is ERR_VOLUME_SIZE_UNIT
 * (code 1029) or ERR_INVALID_PARAMS naming what is wrong; sizes above
 * SIZE_MAX_BYTES are refused as absurd.
 */
#ifndef GPUBOX_UTIL_SIZE_H
#define GPUBOX_UTIL_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define SIZE_MAX_BYTES (1024ULL * 1024 * 1024 * 1024 * 1024) /* 1 PB */

int size_parse(const char *text, uint64_t *bytes, gb_err *err);
/* Largest unit that keeps the value exact-ish: 21474836480 -> "20GB",
 * 1610612736 -> "1.5GB". */
void size_format(uint64_t bytes, char *buf, size_t len);

#endif
