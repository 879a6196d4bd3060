/*
 * proxy_fleet.c - the service proxy in a fleet (docs/services.md, "In a
 * fleet"): a request for a set another node runs goes to that node's
 * proxy, which decides who may use it and passes it to the container.
 *
 * A service's URL names the set and the service, never a node, so any
 * node's proxy takes any request: it asks the fleet which node owns the
 * set (nodes_proxy_of: the name index, then that node's capacity record,
 * where it publishes its proxy's address) and hands the connection over
 * as it is - the head as it came with one header added, then the bytes
 * both ways. Authentication stays with the owner: its tickets (issued by
 * its API, where the fleet forwards the ticket request), its cookies
 * (signed with its key), its store. The header X-Gpubox-Proxied-By keeps
 * a request from going round: a node that receives one forwards nothing
 * further and answers it alone (a client that sends it only loses the
 * forward). An owner that is unreachable answers 404 as an unknown set
 * does, so that nothing says which names exist.
 */
#include "util/xalloc.h"
#include "proxy/proxy_internal.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/nodes/nodes.h"
#include "util/log.h"

static int connect_addr(const char *addr)
{
    char host[300];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof(host))
        return -1;
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
        h++, hl -= 2;
    snprintf(host, sizeof(host), "%.*s", (int)hl, h);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval t = {.tv_sec = PROXY_CONNECT_TIMEOUT_S};
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof(t));
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Bytes both ways until the node closes (or nothing moves for
 * PROXY_IDLE_S). */
static void pipe_both(int client, int node)
{
    char *buf = xmalloc(64 * 1024);
    bool client_open = true;
    for (;;) {
        struct pollfd fds[2] = {{.fd = client_open ? client : -1, .events = POLLIN},
                                {.fd = node, .events = POLLIN}};
        int ready = poll(fds, 2, PROXY_IDLE_S * 1000);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        if (fds[1].revents) {
            ssize_t n = recv(node, buf, 64 * 1024, 0);
            if (n <= 0 || !proxy_send_all(client, buf, (size_t)n))
                break;
        }
        if (client_open && fds[0].revents) {
            ssize_t n = recv(client, buf, 64 * 1024, 0);
            if (n <= 0) {
                client_open = false;
                shutdown(node, SHUT_WR);
            } else if (!proxy_send_all(node, buf, (size_t)n)) {
                break;
            }
        }
    }
    free(buf);
}

int proxy_fleet_forward(const proxy_config *cfg, int fd, const proxy_head *h, const char *set,
                        const char *rest, size_t rest_len)
{
    const char *self = nodes_self(cfg->app);
    if (!self || proxy_head_get(h, PROXY_PROXIED_BY))
        return 0;
    char addr[300];
    gb_err err = GB_ERR_INIT;
    int where = nodes_proxy_of(cfg->app, set, addr, sizeof(addr), &err);
    if (where == 0)
        return 0;
    if (where < 0) {
        log_info("service proxy: %s: %s", set, err.msg);
        return -1;
    }
    int node = connect_addr(addr);
    if (node < 0) {
        log_info("service proxy: %s: the proxy of its node at %s does not answer", set, addr);
        return -1;
    }
    char *head = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&head, &len);
    fprintf(f, "%s %s %s\r\n", h->method, h->target, h->version);
    for (size_t i = 0; i < h->nheaders; i++)
        fprintf(f, "%s: %s\r\n", h->headers[i].name, h->headers[i].value);
    fprintf(f, PROXY_PROXIED_BY ": %s\r\n\r\n", self);
    fclose(f);
    if (proxy_send_all(node, head, len) && (!rest_len || proxy_send_all(node, rest, rest_len)))
        pipe_both(fd, node);
    free(head);
    close(node);
    return 1;
}
