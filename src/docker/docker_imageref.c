/*
 * docker_imageref.c - check an image reference "repo[:tag]" by Docker's
 * rules before it reaches Docker, and split it into repository and tag.
 *
 * Docker's grammar (distribution's reference package):
 *
 *   reference      := name [":" tag] ["@" digest]
 *   digest         := "sha256:" [0-9a-f]{64}
 *   name           := [domain "/"] path-component ("/" path-component)*
 *   domain         := domain-component ("." domain-component)* [":" port]
 *   domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
 *   port           := [0-9]+
 *   path-component := [a-z0-9]+ (separator [a-z0-9]+)*
 *   separator      := "." | "_" | "__" | "-"+
 *   tag            := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
 *
 * with the name at most 255 characters as Docker counts it: normalized,
 * so "app" is "docker.io/library/app" (18 more) and "team/app" is
 * "docker.io/team/app" (10 more). As the docker CLI does, the first
 * component is a registry host only when there is a '/' after it and it
 * holds a '.' or ':', is "localhost", or has an upper-case letter; so
 * "team/app" is a path on Docker Hub and "registry:5000/app" a host (but
 * one that looks like a host and is not one, "a_b.c/d", is read as a path,
 * as Docker's grammar reads it). The tag separator is the last ':' after
 * the last '/', which keeps a port apart from a tag. A bare 64-digit hex
 * name is refused: Docker reads it as an image id.
 *
 * The code is a hand-written scanner over (pointer, length) slices of the
 * input: no allocation, no regex, and so cheap to fuzz.
 */
#include "docker/docker.h"

#include <stdio.h>
#include <string.h>

#define DOCKER_NAME_MAX 255
#define DOCKER_TAG_LEN_MAX 128

static bool ref_lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static bool ref_alnum(char ch)
{
    return ref_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* [a-z0-9]+ (separator [a-z0-9]+)* over s[0..n). */
static bool ref_path_component(const char *s, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t run = i;
        while (i < n && ref_lower_alnum(s[i]))
            i++;
        if (i == run)
            return false; /* empty, or a separator where a letter must be */
        if (i == n)
            return true;
        if (s[i] == '.')
            i++;
        else if (s[i] == '_')
            i += i + 1 < n && s[i + 1] == '_' ? 2 : 1;
        else if (s[i] == '-')
            while (i < n && s[i] == '-')
                i++;
        else
            return false;
    }
}

/* domain-component ("." domain-component)* [":" port] over s[0..n). */
static bool ref_domain(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t host_len = colon ? (size_t)(colon - s) : n;
    if (colon) {
        size_t port_len = n - host_len - 1;
        if (port_len == 0 || strspn(colon + 1, "0123456789") < port_len)
            return false;
    }
    size_t start = 0;
    for (;;) {
        size_t end = start;
        while (end < host_len && s[end] != '.')
            end++;
        if (end == start || !ref_alnum(s[start]) || !ref_alnum(s[end - 1]))
            return false;
        for (size_t i = start; i < end; i++)
            if (!ref_alnum(s[i]) && s[i] != '-')
                return false;
        if (end == host_len)
            return true;
        start = end + 1;
    }
}

/* Whether the first component (s[0..n), followed by a '/') names a registry. */
static bool ref_is_domain(const char *s, size_t n)
{
    if (memchr(s, '.', n) || memchr(s, ':', n) || (n == 9 && memcmp(s, "localhost", 9) == 0))
        return true;
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 'A' && s[i] <= 'Z')
            return true;
    return false;
}

static bool ref_tag(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > DOCKER_TAG_LEN_MAX || !(ref_alnum(s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!ref_alnum(s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

/* The length of name s[0..n) as Docker counts it, normalized: the registry
 * (s[0..start-1), or docker.io when start is 0; index.docker.io is
 * docker.io too), '/', "library/" for a one-component Docker Hub name, and
 * the path. */
static size_t ref_normalized_len(const char *s, size_t n, size_t start)
{
    size_t domain_len = start ? start - 1 : strlen("docker.io");
    bool hub = start == 0 || (domain_len == 9 && memcmp(s, "docker.io", 9) == 0) ||
               (domain_len == 15 && memcmp(s, "index.docker.io", 15) == 0);
    if (hub)
        domain_len = strlen("docker.io");
    bool one_component = memchr(s + start, '/', n - start) == NULL;
    return domain_len + 1 + (hub && one_component ? strlen("library/") : 0) + (n - start);
}

/* Check the name s[0..n); on failure write the reason to why. */
static bool ref_name(const char *s, size_t n, char *why, size_t why_size)
{
    if (n == 0) {
        snprintf(why, why_size, "the repository name is empty");
        return false;
    }
    const char *slash = memchr(s, '/', n);
    size_t first_len = slash ? (size_t)(slash - s) : n;
    bool domain_like = slash && ref_is_domain(s, first_len);
    /* As given too: index.docker.io/x is shorter normalized, but gpubox
     * keeps names as given. */
    if (n > DOCKER_NAME_MAX ||
        ref_normalized_len(s, n, domain_like ? first_len + 1 : 0) > DOCKER_NAME_MAX) {
        snprintf(why, why_size,
                 "the repository name is longer than %d characters (Docker counts a Docker Hub "
                 "name with its docker.io/ or docker.io/library/ prefix)",
                 DOCKER_NAME_MAX);
        return false;
    }
    /* A first component that looks like a host but is not one is read as
     * a path component, as Docker's grammar reads it ("a_b.c/d" is a path). */
    size_t start = domain_like && ref_domain(s, first_len) ? first_len + 1 : 0;
    if (start == 0 && n == 64 && strspn(s, "0123456789abcdef") >= 64) {
        snprintf(why, why_size, "a 64-character hexadecimal name is taken for an image id");
        return false;
    }
    for (;;) {
        const char *next = memchr(s + start, '/', n - start);
        size_t end = next ? (size_t)(next - s) : n;
        if (!ref_path_component(s + start, end - start)) {
            bool upper = false;
            for (size_t i = start; i < end; i++)
                upper = upper || (s[i] >= 'A' && s[i] <= 'Z');
            if (domain_like && start == 0)
                snprintf(why, why_size, "registry '%.*s' is not a host name with an optional :port",
                         (int)first_len, s);
            else if (upper)
                snprintf(why, why_size, "the repository name must be lowercase");
            else
                snprintf(why, why_size,
                         "'%.*s' is not a valid path component: use a-z and 0-9, with single "
                         "separators '.', '_', '__' or dashes between them, and '/' between "
                         "components",
                         (int)(end - start), s + start);
            return false;
        }
        if (!next)
            return true;
        start = end + 1;
    }
}

/* "sha256:" and 64 lower-case hex digits over s[0..n). */
static bool ref_digest(const char *s, size_t n)
{
    return s && n == 7 + 64 && memcmp(s, "sha256:", 7) == 0 &&
           strspn(s + 7, "0123456789abcdef") >= 64;
}

bool docker_image_id_like(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return ref_digest(s, n) || (n == 64 && strspn(s, "0123456789abcdef") == 64);
}

int docker_image_ref_parse(const char *ref, docker_image_ref *out, gb_err *err)
{
    *out = (docker_image_ref){0};
    if (!ref || !*ref)
        return err_set(err, ERR_IMAGE_EMPTY, "image name is empty");
    size_t len = strlen(ref);
    const char *at = strchr(ref, '@');
    size_t body_len = at ? (size_t)(at - ref) : len;
    if (at && !ref_digest(at + 1, len - body_len - 1))
        return err_set(err, ERR_INVALID_PARAMS,
                       "image name '%.300s' is not valid: a digest is @sha256: and 64 "
                       "lower-case hexadecimal digits",
                       ref);
    /* The tag separator: the last ':' after the last '/' (a port's ':'
     * comes before a '/'). */
    const char *last_slash = NULL;
    for (const char *p = ref; p < ref + body_len; p++)
        if (*p == '/')
            last_slash = p;
    const char *colon = NULL;
    for (const char *p = last_slash ? last_slash : ref; p < ref + body_len; p++)
        if (*p == ':')
            colon = p;
    size_t name_len = colon ? (size_t)(colon - ref) : body_len;
    char why[256];
    if (!ref_name(ref, name_len, why, sizeof(why)))
        return err_set(err, ERR_INVALID_PARAMS, "image name '%.300s' is not valid: %s", ref, why);
    size_t tag_len = colon ? body_len - name_len - 1 : 0;
    char tag[DOCKER_TAG_MAX + 1];
    if (colon) {
        if (tag_len > DOCKER_TAG_LEN_MAX)
            tag_len = DOCKER_TAG_LEN_MAX + 1; /* too long: refused below */
        memcpy(tag, colon + 1, tag_len);
        tag[tag_len] = '\0';
        if (!ref_tag(tag) || colon + 1 + strlen(tag) != ref + body_len)
            return err_set(err, ERR_INVALID_PARAMS,
                           "image name '%.300s' is not valid: the tag must be 1-%d characters "
                           "of A-Z, a-z, 0-9, '_', '.' and '-', not starting with '.' or '-'",
                           ref, DOCKER_TAG_LEN_MAX);
        memcpy(out->tag, tag, tag_len + 1);
    }
    memcpy(out->repo, ref, name_len);
    out->repo[name_len] = '\0';
    if (at)
        memcpy(out->digest, at + 1, len - body_len); /* with its NUL */
    return 0;
}

int docker_image_ref_check(const char *ref, char *repo, size_t repo_size, char *tag,
                           size_t tag_size, gb_err *err)
{
    if (repo_size)
        repo[0] = '\0';
    if (tag_size)
        tag[0] = '\0';
    if (ref && strchr(ref, '@'))
        return err_set(err, ERR_INVALID_PARAMS,
                       "image name '%.300s' names a digest; give a repository and a tag "
                       "(repo:tag) instead",
                       ref);
    docker_image_ref r;
    if (docker_image_ref_parse(ref, &r, err) < 0)
        return -1;
    const char *tag_text = r.tag[0] ? r.tag : "latest";
    if (strlen(r.repo) >= repo_size || strlen(tag_text) >= tag_size)
        return err_set(err, ERR_INTERNAL,
                       "image name '%.300s': the caller's buffers are too small to hold it", ref);
    strcpy(repo, r.repo);
    strcpy(tag, tag_text);
    return 0;
}

/* The repository's length once Docker's familiar form drops what it
 * implies: "docker.io/" (or index.docker.io/) and then "library/" before
 * a one-component name: how many leading characters go. */
static size_t ref_familiar_skip(const char *repo)
{
    size_t skip = 0;
    if (strncmp(repo, "docker.io/", 10) == 0)
        skip = 10;
    else if (strncmp(repo, "index.docker.io/", 16) == 0)
        skip = 16;
    if (strncmp(repo + skip, "library/", 8) == 0 && !strchr(repo + skip + 8, '/'))
        skip += 8;
    return skip;
}

void docker_image_ref_familiar(const docker_image_ref *r, char *buf, size_t size)
{
    const char *name = r->repo + ref_familiar_skip(r->repo);
    if (r->digest[0])
        snprintf(buf, size, "%s@%s", name, r->digest);
    else
        snprintf(buf, size, "%s:%s", name, r->tag[0] ? r->tag : "latest");
}

void docker_image_ref_registry(const char *ref, char *buf, size_t size)
{
    const char *slash = ref ? strchr(ref, '/') : NULL;
    size_t n = slash ? (size_t)(slash - ref) : 0;
    bool host = slash && ref_is_domain(ref, n) && ref_domain(ref, n);
    if (host && !((n == 15 && memcmp(ref, "index.docker.io", 15) == 0) ||
                  (n == 20 && memcmp(ref, "registry-1.docker.io", 20) == 0)))
        snprintf(buf, size, "%.*s", (int)n, ref);
    else
        snprintf(buf, size, "docker.io");
}
