/*
 * console.h - the web console's files, embedded into gpuboxd at build time
 * (web/, built by Vite and written as C by web/scripts/embed.mjs into the
 * build's generated/console.c; docs/web.md). gpuboxd serves them at "/".
 */
#ifndef GPUBOX_DAEMON_CONSOLE_H
#define GPUBOX_DAEMON_CONSOLE_H

#include <stddef.h>

#include "http/static.h"

extern const http_static_set gpubox_console;

#endif
