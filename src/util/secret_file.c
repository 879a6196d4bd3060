/*
 * secret_file.c - reading a file that holds secrets (secret_file.h).
 */
#include "util/xalloc.h"
#include "util/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

void secret_text_free(char **text)
{
    if (*text) {
        explicit_bzero(*text, strlen(*text));
        free(*text);
        *text = NULL;
    }
}

int secret_file_read(const char *path, const char *what, const char *guards, bool private_,
                     size_t max, char **out, gb_err *err)
{
    *out = NULL;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return err_set(err, ERR_INVALID_PARAMS, "cannot read %s: %s", what, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(err, ERR_INVALID_PARAMS, "%s is not a regular file", what);
    if (private_ && (st.st_mode & (S_IRWXO | S_IWGRP)))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s has mode %04o: other users may read or change %s; run chmod 600 %s",
                       what, (unsigned)(st.st_mode & 07777), guards, path);
    if ((size_t)st.st_size > max)
        return err_set(err, ERR_INVALID_PARAMS, "%s is larger than %zu bytes", what, max);
    _cleanup_(secret_text_free) char *text = xcalloc(1, (size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INVALID_PARAMS, "cannot read %s: %s", what, strerror(errno));
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (memchr(text, '\0', got))
        return err_set(err, ERR_INVALID_PARAMS, "%s contains a NUL byte; it must be text", what);
    *out = steal_ptr(&text);
    return 0;
}
