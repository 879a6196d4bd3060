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
#include "util/secret_file.h"

#define REGISTRY_AUTH_FILE_MAX (1024 * 1024)

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
    im->creds[im->ncreds++] = (images_cred){
        .registry = xstrdup(registry), .username = xstrdup(username), .password = xstrdup(rest)};
    return 0;
}

int images_registry_load(images *im, const char *auth_file, gb_err *err)
{
    _cleanup_(secret_text_free) char *text = NULL;
    if (secret_file_read(auth_file, auth_file, "the passwords", true, REGISTRY_AUTH_FILE_MAX, &text,
                         err) < 0)
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

const images_cred *images_registry_cred(const images *im, const char *registry)
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
