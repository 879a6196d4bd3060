/*
 * main.c - gpuboxd: read the settings, open the app (store, Docker, GPUs,
 * pools), serve the API until SIGTERM or SIGINT, then stop gracefully.
 *
 * Exit status: 0 after a clean stop (or --help / --version), 2 when a
 * setting is wrong (bad flag, value or config file; an address that cannot
 * be bound), 1 when something gpuboxd depends on failed (Docker does not
 * answer, the store cannot be opened).
 *
 * Signals: SIGTERM and SIGINT are blocked in every thread (the mask is set
 * before any thread starts, and threads inherit it) and taken by sigwait()
 * in the main thread, so no handler runs in the middle of a request.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/xalloc.h"
#include "api/api.h"
#include "api/fleet.h"
#include "daemon/config.h"
#include "daemon/console.h"
#include "daemon/security.h"
#include "http/server.h"
#include "proxy/proxy.h"
#include "service/app.h"
#include "service/engine.h"
#include "util/cleanup.h"
#include "util/log.h"

static int exit_code_for(const gb_err *err)
{
    return err->code == ERR_INVALID_PARAMS ? 2 : 1;
}

/* The service proxy (docs/services.md), when --proxy-listen asks for it;
 * the URL services[].url names is set in the app once the port is known. */
static int start_proxy(daemon_config *cfg, const daemon_security *sec, app *a, proxy **out,
                       gb_err *err)
{
    *out = NULL;
    if (!cfg->proxy_listen)
        return 0;
    bool https = cfg->proxy_url && strncmp(cfg->proxy_url, "https://", 8) == 0;
    proxy_config pc = {.host = cfg->proxy_listen_host,
                       .port = cfg->proxy_listen_port,
                       .auth = sec->auth,
                       .app = a,
                       .domain = cfg->proxy_domain,
                       .secure_cookies = https,
                       .max_per_ip = cfg->proxy_max_per_ip};
    if (proxy_start(&pc, out, err) < 0)
        return -1;
    if (!cfg->proxy_url) {
        bool v6 = strchr(cfg->public_host, ':') != NULL;
        cfg->proxy_url = xasprintf("http://%s%s%s:%u", v6 ? "[" : "", cfg->public_host,
                                   v6 ? "]" : "", proxy_port(*out));
    }
    a->cfg.proxy_url = cfg->proxy_url;
    if (cfg->node) {
        /* the other nodes reach it at its own host, or the --advertise
         * URL's host when it listens on every address */
        const char *h = cfg->proxy_listen_host;
        bool any = !*h || strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0;
        const char *adv = strstr(cfg->advertise, "://");
        adv = adv ? adv + 3 : cfg->advertise;
        size_t alen = adv[0] == '[' ? strcspn(adv, "]") + 1 : strcspn(adv, ":/");
        bool v6 = !any && strchr(h, ':') != NULL;
        cfg->proxy_address =
            any ? xasprintf("%.*s:%u", (int)alen, adv, proxy_port(*out))
                : xasprintf("%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "", proxy_port(*out));
        a->cfg.proxy_address = cfg->proxy_address;
    }
    log_info("service proxy listening on %s:%u, its URL %s%s%s", cfg->proxy_listen_host,
             proxy_port(*out), cfg->proxy_url, cfg->proxy_domain ? ", host names *." : "",
             cfg->proxy_domain ? cfg->proxy_domain : "");
    return 0;
}

static int serve(daemon_config *cfg, const daemon_security *sec, const sigset_t *stop_signals)
{
    gb_err err = GB_ERR_INIT;
    log_info("gpuboxd %s starting (pid %d)", GPUBOX_VERSION, (int)getpid());
    daemon_security_log(cfg, sec);
    app *a = NULL;
    cfg->app.stop_signals = stop_signals;
    /* The token file's users, for the users the services know. */
    size_t nusers = sec->auth ? http_auth_count(sec->auth) : 0;
    _cleanup_free_ app_file_user *users = xcalloc(nusers ? nusers : 1, sizeof(*users));
    for (size_t i = 0; i < nusers; i++) {
        enum http_role role;
        http_auth_entry(sec->auth, i, &users[i].name, &role);
        users[i].role = api_user_role(role);
    }
    cfg->app.auth_on = sec->auth != NULL;
    cfg->app.file_users = users;
    cfg->app.nfile_users = nusers;
    if (app_open(&cfg->app, &a, &err) < 0) {
        if (app_stop_requested(&cfg->app)) {
            /* Asked to stop while waiting for the store or Docker: a clean stop. */
            int sig = 0;
            sigwait(stop_signals, &sig);
            log_info("received %s during start-up (%s); gpuboxd stopped", strsignal(sig), err.msg);
            return 0;
        }
        log_error("start-up failed: %s", err.msg);
        return exit_code_for(&err);
    }
    if (sec->auth)
        http_auth_set_directory(sec->auth, api_users_directory, a);
    proxy *services_proxy = NULL;
    if (start_proxy(cfg, sec, a, &services_proxy, &err) < 0) {
        log_error("start-up failed: %s", err.msg);
        app_close(a);
        return exit_code_for(&err);
    }
    http_router *router = api_router_new(&err);
    http_server *server = NULL;
    if (router) {
        http_server_config hc = {
            .host = cfg->listen_host,
            .port = cfg->listen_port,
            .connection_limit = cfg->max_connections,
            .connection_timeout_s = cfg->connection_timeout_s,
            .shutdown_timeout_s = cfg->shutdown_timeout_s,
            .compat_http_200 = cfg->compat_http_200,
            .per_ip_limit = cfg->max_connections_per_ip,
            .auth = sec->auth,
            .cors = sec->cors,
            .guard = sec->guard,
            .tls_cert_pem = sec->tls_cert_pem,
            .tls_key_pem = sec->tls_key_pem,
            .intercept = api_fleet_intercept,
            .statics = &gpubox_console,
            .ticket = api_ticket_check,
            .node_acting = api_node_acting,
        };
        server = http_server_start(&hc, router, a, &err);
    }
    if (!server) {
        log_error("start-up failed: %s", err.msg);
        proxy_stop(services_proxy);
        router_free(router);
        app_close(a);
        return exit_code_for(&err);
    }

    bool v6 = strchr(cfg->listen_host, ':') != NULL;
    char url[300];
    snprintf(url, sizeof(url), "%s://%s%s%s:%u", sec->tls_cert_pem ? "https" : "http",
             v6 ? "[" : "", cfg->listen_host, v6 ? "]" : "", http_server_port(server));
    log_info("listening on %s%s", url,
             cfg->compat_http_200 ? " (--compat-http-200: every response is HTTP 200)" : "");
    printf("gpuboxd ready on %s\n", url);
    fflush(stdout);

    int sig = 0;
    sigwait(stop_signals, &sig);
    log_info("received %s: stopping; requests in flight get up to %us", strsignal(sig),
             cfg->shutdown_timeout_s);
    http_server_stop(server);
    proxy_stop(services_proxy);
    router_free(router);
    app_close(a);
    log_info("gpuboxd stopped");
    return 0;
}

int main(int argc, char **argv)
{
    xalloc_init("gpuboxd");
    daemon_config cfg;
    gb_err err = GB_ERR_INIT;
    if (config_load(&cfg, argc, argv, &err) < 0) {
        fprintf(stderr, "gpuboxd: %s\nTry 'gpuboxd --help' for the list of flags.\n", err.msg);
        config_free(&cfg);
        return 2;
    }
    int rc = 0;
    if (cfg.show_help) {
        config_usage(stdout);
    } else if (cfg.show_version) {
        printf("gpuboxd %s (API %s)\n", GPUBOX_VERSION, APP_API_VERSION);
    } else if (cfg.show_fault_points) {
        op_print_fault_points(op_kinds, stdout);
    } else {
        log_set_level(cfg.log_level);
        /* Security files are read before anything starts, so a mistake in
         * them is a settings error (exit 2) named after its flag. */
        daemon_security sec;
        if (daemon_security_load(&cfg, &sec, &err) < 0) {
            fprintf(stderr, "gpuboxd: %s\n", err.msg);
            config_free(&cfg);
            return 2;
        }
        sigset_t stop_signals;
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGTERM);
        sigaddset(&stop_signals, SIGINT);
        pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
        signal(SIGPIPE, SIG_IGN); /* a client that hangs up must not kill the daemon */
        rc = serve(&cfg, &sec, &stop_signals);
        daemon_security_free(&sec);
    }
    config_free(&cfg);
    return rc;
}
