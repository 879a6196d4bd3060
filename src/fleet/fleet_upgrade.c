/*
 * fleet_upgrade.c - a request to another node whose answer switches
 * protocols (a terminal's WebSocket, forwarded to the node that holds the
 * set): the request is signed as fleet_http.c signs it, with the caller's
 * Authorization and the upgrade's own headers, on a connection of its own
 * that the caller keeps once the node answers 101.
 *
 * curl cannot hand such a connection over with its bytes intact, so the
 * request is written and the answer's head read here, a byte at a time
 * (nothing past the head is read into a buffer and lost). Nodes speak
 * plain HTTP to each other (advertise is http://host:port).
 */
#include "util/xalloc.h"
#include "fleet/fleet_internal.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fleet/fleet_auth.h"
#include "util/cleanup.h"

#define FLEET_UPGRADE_TIMEOUT_MS 30000

static int fleet_connect(const char *advertise, gb_err *err)
{
    if (strncmp(advertise, "http://", 7) != 0)
        return err_set(err, ERR_NODE_UNAVAILABLE,
                       "node at %s: a forwarded terminal needs an http:// address", advertise);
    const char *hp = advertise + 7;
    size_t hl = strcspn(hp, "/");
    _cleanup_free_ char *hostport = xstrndup(hp, hl);
    char *colon = strrchr(hostport, ':');
    if (!colon)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node at %s: no port", advertise);
    *colon = '\0';
    char *host = hostport;
    if (host[0] == '[') { /* [::1] */
        host++;
        host[strcspn(host, "]")] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node at %s: cannot resolve it", advertise);
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node at %s does not answer", advertise);
    return fd;
}

static int fleet_send_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n, len -= (size_t)n;
    }
    return 0;
}

/* The answer's head into head, up to and with its blank line. */
static int fleet_read_head(int fd, char *head, size_t size)
{
    size_t n = 0;
    int waited = 0;
    while (n + 1 < size) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, 1000);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0 && (waited += 1000) < FLEET_UPGRADE_TIMEOUT_MS)
            continue;
        if (rc <= 0 || read(fd, head + n, 1) != 1)
            return -1;
        head[++n] = '\0';
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            return 0;
    }
    return -1;
}

int fleet_upgrade(fleet *f, const char *advertise, const fleet_request *req,
                  const char *extra_headers, int *fd_out, long *status, char *head,
                  size_t head_size, gb_err *err)
{
    *fd_out = -1;
    _cleanup_close_ int fd = fleet_connect(advertise, err);
    if (fd < 0)
        return -1;
    char proof[FLEET_AUTH_VALUE_MAX];
    fleet_auth_sign(f->secret, f->secret_len, f->node, (int64_t)time(NULL), req, proof);
    _cleanup_free_ char *auth =
        req->authorization ? xasprintf("Authorization: %s\r\n", req->authorization) : xstrdup("");
    const char *hp = advertise + 7;
    _cleanup_free_ char *text = xasprintf("%s %s HTTP/1.1\r\nHost: %.*s\r\n" FLEET_FORWARDED_HEADER
                                          ": %s\r\n" FLEET_AUTH_HEADER ": %s\r\n%s%s\r\n",
                                          req->method, req->path_query, (int)strcspn(hp, "/"), hp,
                                          f->node, proof, auth, extra_headers ? extra_headers : "");
    if (fleet_send_all(fd, text, strlen(text)) < 0 ||
        (req->body_len && fleet_send_all(fd, req->body, req->body_len) < 0) ||
        fleet_read_head(fd, head, head_size) < 0)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node at %s did not answer the forwarded %s %s",
                       advertise, req->method, req->path_query);
    if (sscanf(head, "HTTP/%*s %ld", status) != 1)
        return err_set(err, ERR_NODE_UNAVAILABLE, "node at %s answered something else than HTTP",
                       advertise);
    *fd_out = fd;
    fd = -1;
    return 0;
}
