/*
 * security.h - what the daemon's security flags name, read at start-up:
 * the token table (--token-file), the TLS certificate and key (--tls-cert,
 * --tls-key), the CORS origins (--cors-origins) and the Host names answered
 * (--allowed-host and this machine's own names).
 *
 * Reading them before anything else starts means a mistake (a world-
 * readable token file, a key that is not PEM, a wildcard origin) stops the
 * daemon with a message naming the flag, instead of surfacing as refused
 * requests later. The private key's text is wiped when freed.
 */
#ifndef GPUBOX_DAEMON_SECURITY_H
#define GPUBOX_DAEMON_SECURITY_H

#include "daemon/config.h"
#include "http/auth.h"
#include "http/cors.h"
#include "http/origin.h"
#include "util/err.h"

#define SECURITY_PEM_MAX (1024 * 1024)

typedef struct daemon_security {
    http_auth *auth;                  /* NULL: no --token-file */
    http_cors *cors;                  /* NULL: CORS off */
    http_guard *guard;                /* the Host names answered; never NULL once loaded */
    char *tls_cert_pem, *tls_key_pem; /* NULL: plain HTTP */
} daemon_security;

/* Read everything cfg's security flags name; ERR_INVALID_PARAMS prefixed
 * with the flag on any problem. */
int daemon_security_load(const daemon_config *cfg, daemon_security *out, gb_err *err);
void daemon_security_free(daemon_security *sec);

/* Log what the configuration means for whoever can reach the port: one line
 * for the auth mode, warnings where it is weak (tokens in clear text across
 * the network, --insecure-no-auth). */
void daemon_security_log(const daemon_config *cfg, const daemon_security *sec);

#endif
