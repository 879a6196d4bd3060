/*
 * patch.c - patch and rollback: the operations that give a replica set
 * a new version with another spec, keeping its system disk (a stopped
 * set's restart on other cards is the same change: restart.c).
 *
 * Each checks what it can before anything is taken (the state, the new
 * spec, the binds, that the old container exists to carry from), lets
 * replicaset_alloc_next take only the difference from the pools, and hands the rest
 * to replicaset_version_change (replicaset/version.c), which runs it through the
 * journal.
 *
 * A stopped set holds nothing to change: its patch or rollback is checked
 * the same way (the spec, the binds, the image pulled, the old container
 * there) and then only recorded as the spec of its next version
 * (pendingSpec, record.h), taking nothing; its next start makes that
 * version (restart.c). A later change while it stays stopped changes the
 * pending spec further; one that leads back to the spec it has drops it.
 */
#include "service/replicaset/replicaset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/images/images.h"
#include "service/keys.h"
#include "service/records.h"
#include "service/ops_timer.h"
#include "service/namelock.h"
#include "service/replicaset/internal.h"
#include "service/replicaset/move.h"
#include "service/replicaset/services.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/log.h"

/* The common tail of patch and rollback: binds checked, the difference
 * taken, the change run. */
static int replicaset_change_to_spec(app *a, const op_kind *kind, const replicaset_record *r,
                                     const replicaset_spec *spec, const char *reason, json_t **out,
                                     gb_err *err)
{
    int code = kind == &replicaset_op_rollback ? ERR_ROLLBACK_FAILED : ERR_PATCH_FAILED;
    _cleanup_(replicaset_record_free) replicaset_record to = {0};
    bool swapped = false;
    if (replicaset_version_check_container(a, r, code, err) < 0 || binds_check(a, spec, err) < 0)
        return -1;
    /* Another image must be here before anything is taken, pulled when it
     * is missing as a create pulls it (a version of another image does not
     * carry the system disk: version.c). */
    if (strcmp(spec->image, r->spec.image) != 0 &&
        images_ensure(a, spec->image, IMAGE_PULL_MISSING, NULL, err) < 0)
        return -1;
    replicaset_version_next(r, spec, &to);
    if (replicaset_alloc_next(a, r, &to, &swapped, err) < 0)
        return -1;
    return replicaset_version_change(a, kind, r, &to, swapped, reason, out, err);
}

int replicaset_record_next_spec(const replicaset_record *r, replicaset_spec *out, gb_err *err)
{
    if (!r->pending_spec) {
        replicaset_spec_copy(&r->spec, out);
        return 0;
    }
    if (replicaset_spec_from_json(r->pending_spec, NULL, out, err) < 0) {
        err->code = ERR_INTERNAL;
        return err_prefix(err, "the pending spec of %s", r->name);
    }
    return 0;
}

/* What a change of a stopped set answers: the set as it is (stopped, at
 * its version) and the spec its next start applies, if any. */
static json_t *replicaset_pending_answer(const replicaset_record *r, bool changed)
{
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:b, s:b, s:O*}", "name", r->container_name,
        "replicaSetName", r->name, "containerName", r->container_name, "containerId",
        r->container_id, "version", r->version, "state", replicaset_state_name(r->state), "gpus",
        replicaset_record_gpus_json(r), "ports", replicaset_record_ports_json(r), "changed",
        changed, "pending", r->pending_spec != NULL, "pendingSpec", r->pending_spec);
    if (out)
        replicaset_record_limits_json(r, out);
    return out;
}

/* A stopped set's change: spec (NULL: the spec is not changed, only the
 * run limits in r may be) becomes its pendingSpec, or none when it is the
 * spec the set has. Checked as a change of a running set is, taking
 * nothing. */
static int replicaset_change_stopped(app *a, replicaset_record *r, const replicaset_spec *spec,
                                     bool limits_changed, const char *reason, json_t **out,
                                     gb_err *err)
{
    bool spec_changed = false;
    if (spec) {
        int code = strcmp(reason, "patch") == 0 ? ERR_PATCH_FAILED : ERR_ROLLBACK_FAILED;
        if (replicaset_version_check_container(a, r, code, err) < 0 ||
            binds_check(a, spec, err) < 0)
            return -1;
        if (strcmp(spec->image, r->spec.image) != 0 &&
            images_ensure(a, spec->image, IMAGE_PULL_MISSING, NULL, err) < 0)
            return -1;
        _cleanup_json_ json_t *cur = replicaset_spec_to_json(&r->spec);
        _cleanup_json_ json_t *next = replicaset_spec_to_json(spec);
        if (!cur || !next)
            return err_set(err, ERR_INTERNAL, "out of memory");
        json_t *pending = json_equal(cur, next) ? NULL : next;
        spec_changed = (pending == NULL) != (r->pending_spec == NULL) ||
                       (pending && !json_equal(pending, r->pending_spec));
        json_decref(r->pending_spec);
        r->pending_spec = json_incref(pending);
    }
    if ((spec_changed || limits_changed) && replicaset_record_save(a, r, NULL, 0, err) < 0)
        return err_prefix(err, "changing stopped replica set %s", r->name);
    if (spec_changed)
        log_info("replica set %s: stopped; %s %s", r->name, reason,
                 r->pending_spec ? "recorded for its next start" : "leaves nothing to change");
    *out = replicaset_pending_answer(r, spec_changed || limits_changed);
    return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
}

static int replicaset_patch_apply(app *a, const char *name, const replicaset_patch_request *patch,
                                  json_t **out, gb_err *err);

int replicaset_patch(app *a, const char *name, const replicaset_patch_request *patch, json_t **out,
                     gb_err *err)
{
    if (a->fleet && move_group_check_free(a, name, err) < 0) /* its group moves it */
        return -1;
    if (replicaset_patch_apply(a, name, patch, out, err) < 0)
        return -1;
    /* A patch of the services answers them as they are now. */
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    gb_err ignored = GB_ERR_INIT;
    if (patch->services && json_is_object(*out) &&
        replicaset_record_load(a->store, name, &r, &ignored) > 0)
        json_object_set_new(*out, "services",
                            replicaset_services_answer(&a->cfg, name, r.owner, r.services));
    return 0;
}

static int replicaset_patch_apply(app *a, const char *name, const replicaset_patch_request *patch,
                                  json_t **out, gb_err *err)
{
    OPS_TIMED(a, "patch", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    _cleanup_(replicaset_spec_free) replicaset_spec spec = {0};
    _cleanup_(replicaset_spec_free) replicaset_spec base = {0};
    bool changed = false;
    if (replicaset_load_settled(a, name, &r, err) < 0)
        return -1;
    /* The run limits alone change the record in place, in any state but
     * deleted; with other fields the set must be able to take a patch. */
    int64_t idle = r.idle_stop_s, max = r.max_duration_s;
    bool limits_only = replicaset_patch_request_limits_only(patch);
    enum replicaset_op check =
        limits_only && r.state != RS_STATE_DELETED ? RS_OP_COMMIT : RS_OP_PATCH;
    /* A stopped set's patch changes the spec its next start applies. */
    if (replicaset_lifecycle_check(check, &r, err) < 0 ||
        replicaset_record_next_spec(&r, &base, err) < 0 ||
        replicaset_spec_patch(&base, patch, &spec, &changed, err) < 0)
        return -1;
    if (patch->idle_stop_given)
        r.idle_stop_s = patch->idle_stop_s;
    if (patch->max_duration_given)
        r.max_duration_s = patch->max_duration_s;
    bool limits_changed = r.idle_stop_s != idle || r.max_duration_s != max;
    /* The services too belong to the set (services.h): checked against
     * what it has (links kept, public kept), changed in place. */
    if (patch->services) {
        _cleanup_json_ json_t *services = NULL;
        if (replicaset_services_parse(patch->services, r.services, &services, err) < 0)
            return -1;
        json_t *before = r.services;
        bool same = before ? json_equal(before, services) : json_array_size(services) == 0;
        if (!same) {
            r.services = steal_ptr(&services);
            json_decref(before);
            limits_changed = true;
            log_info("replica set %s: services changed", name);
        }
    }
    if (r.state == RS_STATE_STOPPED)
        return replicaset_change_stopped(a, &r, changed ? &spec : NULL, limits_changed, "patch",
                                         out, err);
    if (!changed) {
        if (limits_changed && replicaset_record_save(a, &r, NULL, 0, err) < 0)
            return -1;
        if (limits_changed)
            log_info("replica set %s: run limits now idleStop %llds, maxDuration %llds", name,
                     (long long)r.idle_stop_s, (long long)r.max_duration_s);
        *out = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o, s:o, s:b}", "name", r.container_name,
                         "replicaSetName", name, "containerName", r.container_name, "containerId",
                         r.container_id, "version", r.version, "state",
                         replicaset_state_name(r.state), "gpus", replicaset_record_gpus_json(&r),
                         "ports", replicaset_record_ports_json(&r), "changed", limits_changed);
        if (*out)
            replicaset_record_limits_json(&r, *out);
        return *out ? 0 : err_set(err, ERR_INTERNAL, "out of memory");
    }
    /* Another size of the share on the same cards: no new version (resize.c). */
    int resized = replicaset_share_resize(a, &r, &spec, out, err);
    if (resized)
        return resized < 0 ? -1 : 0;
    if (replicaset_change_to_spec(a, &replicaset_op_patch, &r, &spec, "patch", out, err) < 0)
        return -1;
    if (*out)
        json_object_set_new(*out, "inPlace", json_false());
    return 0;
}

/* Version k's spec from the history: 1 found, 0 absent, -1 error. */
static int replicaset_history_spec(app *a, const char *name, long long k, replicaset_spec *out,
                                   gb_err *err)
{
    char key[STORE_KEY_MAX];
    keys_replicaset_history(key, sizeof(key), name, (long)k);
    char what[NAME_MAX_LEN + 48];
    snprintf(what, sizeof(what), "history entry %lld of %s", k, name);
    _cleanup_json_ json_t *entry = NULL;
    int found = records_get_json(a->store, key, what, &entry, NULL, err);
    if (found <= 0)
        return found;
    if (replicaset_spec_from_json(json_object_get(entry, "spec"), NULL, out, err) < 0) {
        err->code = ERR_INTERNAL;
        return err_prefix(err, "history entry %lld of %s", k, name);
    }
    return 1;
}

int replicaset_rollback(app *a, const char *name, long long version, json_t **out, gb_err *err)
{
    OPS_TIMED(a, "rollback", out, err);
    if (name_check_replicaset(name, err) < 0)
        return -1;
    if (version < 0)
        return err_set(err, ERR_VERSION_NEGATIVE, "version is %lld; versions start at 1", version);
    if (version == 0)
        return err_set(err, ERR_INVALID_PARAMS, "version is 0; versions start at 1");
    if (a->fleet && move_group_check_free(a, name, err) < 0) /* its group moves it */
        return -1;
    _cleanup_(namelock_releasep) namelock *lock = namelock_acquire(a->locks, "rs", name);
    _cleanup_(replicaset_record_free) replicaset_record r = {0};
    _cleanup_(replicaset_spec_free) replicaset_spec spec = {0};
    if (replicaset_load_settled(a, name, &r, err) < 0 ||
        replicaset_lifecycle_check(RS_OP_ROLLBACK, &r, err) < 0)
        return -1;
    /* A stopped set rolled back to the version it has: the change made
     * while it was stopped goes. */
    if (version == r.version && r.state == RS_STATE_STOPPED && r.pending_spec)
        return replicaset_change_stopped(a, &r, &r.spec, false, "rollback", out, err);
    if (version == r.version)
        return err_set(err, ERR_NO_NEED_ROLLBACK,
                       "replica set '%s' already runs version %lld (%s); no need to roll back",
                       name, version, r.container_name);
    int found = version > r.version ? 0 : replicaset_history_spec(a, name, version, &spec, err);
    if (found < 0)
        return -1;
    if (!found)
        return err_set(err, ERR_NOT_FOUND,
                       "replica set '%s' has no version %lld (its versions are 1 to %d; see "
                       "its history)",
                       name, version, r.version);
    char reason[48];
    snprintf(reason, sizeof(reason), "rollback to %lld", version);
    if (r.state == RS_STATE_STOPPED)
        return replicaset_change_stopped(a, &r, &spec, false, "rollback", out, err);
    return replicaset_change_to_spec(a, &replicaset_op_rollback, &r, &spec, reason, out, err);
}
