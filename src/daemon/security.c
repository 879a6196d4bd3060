/*
 * security.c - loading the security flags' files (see security.h).
 */
#include "util/xalloc.h"
#include "daemon/security.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/server.h"
#include "util/cleanup.h"
#include "util/secret_file.h"
#include "util/log.h"

/* A PEM file into a NUL-terminated string. secret: refuse permission bits
 * for other users, as ssh does for private keys. */
static int security_read_pem(const char *flag, const char *path, bool secret, const char *marker,
                             char **out, gb_err *err)
{
    *out = NULL;
    char what[4200];
    snprintf(what, sizeof(what), "%s: %s", flag, path);
    char *text = NULL;
    if (secret_file_read(path, what, "the private key", secret, SECURITY_PEM_MAX, &text, err) < 0)
        return -1;
    if (!*text) {
        free(text);
        return err_set(err, ERR_INVALID_PARAMS, "%s is empty", what);
    }
    if (!strstr(text, "-----BEGIN ") || !strstr(text, marker)) {
        secret_text_free(&text);
        return err_set(err, ERR_INVALID_PARAMS, "%s: %s is not a PEM file holding a%s", flag, path,
                       secret ? " private key" : " certificate");
    }
    *out = text;
    return 0;
}

/* The host of URL "scheme://host[:port][/...]" into buf: "" when there is
 * none. */
static void security_url_host(const char *url, char *buf, size_t size)
{
    buf[0] = '\0';
    const char *p = url ? strstr(url, "://") : NULL;
    if (!p)
        return;
    p += 3;
    size_t n = strcspn(p, "/");
    snprintf(buf, size, "%.*s", (int)n, p);
}

/* The names this machine answers to without --allowed-host: its host name,
 * --public-host, and the --listen and --advertise hosts (a fleet's nodes
 * call each other by their --advertise URLs). */
static int security_load_guard(const daemon_config *cfg, daemon_security *out, gb_err *err)
{
    char hostname[256] = "", advertise[256] = "";
    if (gethostname(hostname, sizeof(hostname)) < 0)
        hostname[0] = '\0';
    hostname[sizeof(hostname) - 1] = '\0';
    security_url_host(cfg->advertise, advertise, sizeof(advertise));
    const char *own[] = {hostname, cfg->public_host, cfg->listen_host, advertise};
    if (http_guard_new(cfg->allowed_hosts, own, ARRAY_SIZE(own), &out->guard, err) < 0)
        return err_prefix(err, "--allowed-host");
    return 0;
}

int daemon_security_load(const daemon_config *cfg, daemon_security *out, gb_err *err)
{
    *out = (daemon_security){0};
    if (cfg->token_file && http_auth_load(cfg->token_file, &out->auth, err) < 0) {
        err_prefix(err, "--token-file");
        goto fail;
    }
    if (cfg->cors_origins && http_cors_parse(cfg->cors_origins, &out->cors, err) < 0) {
        err_prefix(err, "--cors-origins");
        goto fail;
    }
    if (security_load_guard(cfg, out, err) < 0)
        goto fail;
    if (cfg->tls_cert && !http_server_tls_supported()) {
        err_set(err, ERR_INVALID_PARAMS,
                "--tls-cert: this libmicrohttpd was built without TLS (GnuTLS) support; install "
                "one built with it (Debian's libmicrohttpd12 is) or terminate TLS in a proxy");
        goto fail;
    }
    if (cfg->tls_cert && (security_read_pem("--tls-cert", cfg->tls_cert, false, "CERTIFICATE-----",
                                            &out->tls_cert_pem, err) < 0 ||
                          security_read_pem("--tls-key", cfg->tls_key, true, "PRIVATE KEY-----",
                                            &out->tls_key_pem, err) < 0))
        goto fail;
    return 0;
fail:
    daemon_security_free(out);
    return -1;
}

void daemon_security_free(daemon_security *sec)
{
    http_auth_free(sec->auth);
    http_cors_free(sec->cors);
    http_guard_free(sec->guard);
    free(sec->tls_cert_pem);
    if (sec->tls_key_pem) {
        explicit_bzero(sec->tls_key_pem, strlen(sec->tls_key_pem));
        free(sec->tls_key_pem);
    }
    *sec = (daemon_security){0};
}

void daemon_security_log(const daemon_config *cfg, const daemon_security *sec)
{
    bool loopback = config_host_is_loopback(cfg->listen_host);
    if (sec->auth)
        log_info("auth: %zu token(s) from %s, and the users made through the API; GET routes "
                 "need a token, others a user's (their own sets and volumes) or an admin's; "
                 "/healthz and /version are open",
                 http_auth_count(sec->auth), cfg->token_file);
    else if (loopback)
        log_info("auth: off (no --token-file); listening on loopback only, so only users of "
                 "this host can reach the API");
    else
        log_warn("auth: OFF on %s (--insecure-no-auth): anyone who reaches this port can run "
                 "containers on this host; make sure a firewall or an authenticating proxy "
                 "guards it",
                 cfg->listen);
    if (sec->auth && !sec->tls_cert_pem && !loopback)
        log_warn("tls: off on %s: tokens cross the network in clear text; give --tls-cert and "
                 "--tls-key, or put a TLS proxy in front",
                 cfg->listen);
    if (sec->cors)
        log_info("cors: on for the origins in --cors-origins (%s)", cfg->cors_origins);
    log_info("browsers: requests from other web pages are refused unless --cors-origins lists "
             "them; Host names answered: IP addresses, localhost, this machine's own names%s%s",
             cfg->allowed_hosts ? " and --allowed-host " : "",
             cfg->allowed_hosts ? cfg->allowed_hosts : "");
}
