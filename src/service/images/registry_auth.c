/*
 * registry_auth.c - the registry credentials gpuboxd is configured with
 * (--registry-auth-file): one registry a line,
 *
 *   # registry            username  password (the rest of the line)
 *   registry.example.com  ci        s3cret words
 *   127.0.0.1:5000        alice     pw
 *   docker.io             bob       token
 *
 * The registry is written as docker_image_ref_registry names it (host and
 * :port; docker.io for Docker Hub). The file must not be readable or
 * writable by other users, as --token-file. Its text is wiped once read;
 * errors name the line, never what it holds past the registry.
 */
#include "util/xalloc.h"
#include "service/images/images_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

#define REGISTRY_AUTH_FILE_MAX (1024 * 1024)

static void wipe_text(char **text)
{
    if (*text) {
        explicit_bzero(*text, strlen(*text));
        free(*text);
    }
}

static int registry_read(const char *path, char **out, gb_err *err)
{
    *out = NULL;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return err_set(err, ERR_INVALID_PARAMS, "cannot read %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(err, ERR_INVALID_PARAMS, "%s is not a regular file", path);
    if (st.st_mode & (S_IRWXO | S_IWGRP))
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s has mode %04o: other users may read or change the passwords; run "
                       "chmod 600 %s",
                       path, (unsigned)(st.st_mode & 07777), path);
    if (st.st_size > REGISTRY_AUTH_FILE_MAX)
        return err_set(err, ERR_INVALID_PARAMS, "%s is larger than %d bytes", path,
                       REGISTRY_AUTH_FILE_MAX);
    char *text = xcalloc(1, (size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    *out = text;
    if (memchr(text, '\0', got))
        return err_set(err, ERR_INVALID_PARAMS, "%s contains a NUL byte; it must be text", path);
    return 0;
}

/* The next whitespace-separated word of *s (NUL-terminated in place). */
static char *next_word(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return NULL;
    char *w = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (*p)
        *p++ = '\0';
    *s = p;
    return w;
}

static int registry_line(images *im, char *line, const char *path, int lineno, gb_err *err)
{
    char *rest = line;
    char *registry = next_word(&rest), *username = next_word(&rest);
    while (*rest == ' ' || *rest == '\t')
        rest++;
    size_t n = strlen(rest);
    while (n && isspace((unsigned char)rest[n - 1]))
        rest[--n] = '\0';
    if (!registry || registry[0] == '#')
        return 0;
    if (!username || !*rest)
        return err_set(err, ERR_INVALID_PARAMS,
                       "%s line %d: expected \"registry username password\" (registry %.100s)",
                       path, lineno, registry);
    if (images_registry_cred(im, registry))
        return err_set(err, ERR_INVALID_PARAMS, "%s line %d: registry %.100s is named twice", path,
                       lineno, registry);
    im->creds = xrealloc(im->creds, (im->ncreds + 1) * sizeof(*im->creds));
    im->creds[im->ncreds++] = (image_registry_cred){
        .registry = xstrdup(registry), .username = xstrdup(username), .password = xstrdup(rest)};
    return 0;
}

int images_registry_load(images *im, const char *auth_file, gb_err *err)
{
    _cleanup_(wipe_text) char *text = NULL;
    if (registry_read(auth_file, &text, err) < 0)
        return -1;
    int lineno = 0;
    for (char *line = text, *end; line && *line; line = end) {
        end = strchr(line, '\n');
        if (end)
            *end++ = '\0';
        lineno++;
        line[strcspn(line, "\r")] = '\0';
        if (registry_line(im, line, auth_file, lineno, err) < 0)
            return -1;
    }
    return 0;
}

const image_registry_cred *images_registry_cred(const images *im, const char *registry)
{
    for (size_t i = 0; i < im->ncreds; i++)
        if (strcmp(im->creds[i].registry, registry) == 0)
            return &im->creds[i];
    return NULL;
}

void images_registry_free(images *im)
{
    for (size_t i = 0; i < im->ncreds; i++) {
        explicit_bzero(im->creds[i].password, strlen(im->creds[i].password));
        free(im->creds[i].registry);
        free(im->creds[i].username);
        free(im->creds[i].password);
    }
    free(im->creds);
    im->creds = NULL;
    im->ncreds = 0;
}
