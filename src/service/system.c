/*
 * system.c - health and version: what an operator or a load balancer asks
 * to know whether gpuboxd and the parts it depends on are up.
 */
#include "service/service.h"

#include "util/cleanup.h"

/* {"ok": bool, "error": msg?} plus extra fields. */
static json_t *health_part(int rc, const gb_err *e)
{
    json_t *part = json_pack("{s:b}", "ok", rc == 0);
    if (part && rc != 0)
        json_object_set_new(part, "error", json_string(e->msg));
    return part;
}

int system_health(app *a, bool details, json_t **out, gb_err *err)
{
    gb_err store_err = GB_ERR_INIT, docker_err = GB_ERR_INIT;
    int64_t rev = 0;
    int store_rc = store_revision(a->store, &rev, &store_err);
    bool answered = store_rc == 0;
    /* A lost claim (etcd) refuses every write until it is taken again:
     * the store answers, but this daemon may not change it. */
    static const char *const claim_names[] = {
        [STORE_CLAIM_NONE] = "none", [STORE_CLAIM_HELD] = "held", [STORE_CLAIM_LOST] = "lost"};
    enum store_claim_state claim = store_claim_state(a->store);
    if (store_rc == 0 && claim == STORE_CLAIM_LOST)
        store_rc = err_set(&store_err, ERR_STORE_UNAVAILABLE,
                           "this gpuboxd lost its claim on the store; writes are refused until it "
                           "claims it again");
    int docker_rc = docker_ping(a->docker, &docker_err);

    _cleanup_json_ json_t *store = health_part(store_rc, &store_err);
    _cleanup_json_ json_t *docker = health_part(docker_rc, &docker_err);
    if (!store || !docker)
        return err_set(err, ERR_INTERNAL, "out of memory");
    json_object_set_new(store, "backend", json_string(store_backend_name(a->store)));
    if (answered)
        json_object_set_new(store, "revision", json_integer(rev));
    json_object_set_new(docker, "host", json_string(a->cfg.docker_host));
    json_object_set_new(store, "claim", json_string(claim_names[claim]));

    bool ok = store_rc == 0 && docker_rc == 0;
    *out = json_pack("{s:s, s:O, s:O, s:{s:i, s:s, s:b}}", "status", ok ? "ok" : "degraded",
                     "store", store, "docker", docker, "gpus", "count", (int)a->gpus.n, "source",
                     a->gpus.source, "simulated", a->gpus.simulated);
    if (*out && !details) { /* the status word alone: no backend, socket, revision or cards */
        json_decref(*out);
        *out = json_pack("{s:s}", "status", ok ? "ok" : "degraded");
    }
    if (!*out)
        return err_set(err, ERR_INTERNAL, "out of memory");
    if (store_rc != 0)
        return err_set(err, ERR_STORE_UNAVAILABLE, "store unavailable%s%s", details ? ": " : "",
                       details ? store_err.msg : "");
    if (docker_rc != 0)
        return err_set(err, ERR_DOCKER_UNAVAILABLE, "Docker unavailable%s%s", details ? ": " : "",
                       details ? docker_err.msg : "");
    return 0;
}

int system_version(app *a, bool details, json_t **out, gb_err *err)
{
    if (!details) {
        *out = json_pack("{s:s, s:s}", "version", GPUBOX_VERSION, "apiVersion", APP_API_VERSION);
        return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
    }
    /* Docker is asked now rather than remembered from start-up: it may have
     * been upgraded since. If it does not answer, say so and still report
     * gpubox's own versions. */
    _cleanup_json_ json_t *dv = NULL;
    gb_err docker_err = GB_ERR_INIT;
    json_t *docker;
    if (docker_version(a->docker, &dv, &docker_err) == 0)
        docker = json_pack("{s:s?, s:s?, s:s, s:s}", "version",
                           json_string_value(json_object_get(dv, "Version")), "apiVersion",
                           json_string_value(json_object_get(dv, "ApiVersion")), "storageDriver",
                           a->docker_storage_driver, "host", a->cfg.docker_host);
    else
        docker = json_pack("{s:s, s:s, s:s}", "error", docker_err.msg, "versionAtStartup",
                           a->docker_version, "host", a->cfg.docker_host);
    *out = json_pack("{s:s, s:s, s:o?}", "version", GPUBOX_VERSION, "apiVersion", APP_API_VERSION,
                     "docker", docker);
    if (!*out)
        return err_set(err, ERR_INTERNAL, "out of memory");
    return 0;
}
