/*
 * spec_gpu.c - the GPU fields of a replica-set spec: how many cards, how
 * each is held (whole, a memory share, a time-slice replica) and which
 * cards may be chosen. One set of rules serves create and patch.
 *
 * A request is read in three steps, so a refused one changes nothing:
 *   1. what the JSON says, each field with a "given" flag (replicaset_gpu_input);
 *   2. combined with the spec's current values (patch) or the defaults
 *      (create) into the fields the spec would have;
 *   3. those checked as a whole, and only then written into the spec.
 *
 * Rules (docs/api.md, docs/gpus.md):
 *   - gpuMemory: "8GB" (units as util/size.h, a whole number of MiB) or an
 *     integer of MiB; a memory share of that much on each of gpuCount cards.
 *   - gpuShared: true - one time-slice replica on each card. It reserves the
 *     card's memory / replicas, so it cannot be combined with gpuMemory.
 *   - gpuCount: 1 when absent and a share is asked; 0 with a share and no
 *     pins is refused (a share of nothing is a mistake, not a request).
 *   - gpuUUIDs: exactly these cards; gpuCount must be absent, 0 or their
 *     number, and becomes their number.
 *   - gpuPolicy: binpack | spread, only steering shares; gpuModel: filter.
 *   - gpuCores: 1-100, the compute limit of each card's share (percent of
 *     its SMs' time, enforced by the CUDA limiter); only with a share
 *     (gpuMemory or gpuShared): a whole card is the set's alone. null: none.
 *     A patch that makes the set whole (or cardless) without naming
 *     gpuCores drops it, as gpuShared drops gpuMemory.
 * Whether a share fits any card is sched/'s question (code 1013), asked at
 * allocation: a spec is valid on any host.
 */
#include "util/xalloc.h"
#include "service/replicaset/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/size.h"

/* What a request body says about GPUs, before defaults. */
typedef struct replicaset_gpu_input {
    bool has_count, has_memory, has_shared, has_policy, has_uuids, has_model, has_cores;
    long long count;
    int cores; /* 0: null, none */
    uint64_t memory_mib;
    bool shared;
    enum gpus_policy policy;
    char **uuids; /* owned until moved into the spec */
    size_t nuuids;
    char *model; /* owned; NULL for "" */
} replicaset_gpu_input;

static void replicaset_gpu_strings_free(char **items, size_t n)
{
    for (size_t i = 0; items && i < n; i++)
        free(items[i]);
    free(items);
}

static void replicaset_gpu_input_free(replicaset_gpu_input *in)
{
    replicaset_gpu_strings_free(in->uuids, in->nuuids);
    free(in->model);
}

static int replicaset_gpu_read_count(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    int found = json_field_int(obj, NULL, "gpuCount", &in->count, false, err);
    if (found < 0)
        return -1;
    in->has_count = found > 0;
    if (in->count < 0)
        return err_set(err, ERR_GPU_COUNT_NEGATIVE, "gpuCount is %lld; it must be 0 or more",
                       in->count);
    if (in->count > RS_MAX_GPUS)
        return err_set(err, ERR_INVALID_PARAMS, "gpuCount is %lld; at most %d", in->count,
                       RS_MAX_GPUS);
    return 0;
}

/* "8GB", "1.5GB", "512MB" or an integer of MiB. A string without a unit is
 * refused: util/size.h would read it as bytes, the integer form as MiB. */
static int replicaset_gpu_read_memory(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    json_t *v = json_object_get(obj, "gpuMemory");
    if (!v || json_is_null(v))
        return 0;
    in->has_memory = true;
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || (uint64_t)n > RS_MAX_GPU_MEMORY_MIB)
            return err_set(err, ERR_INVALID_PARAMS,
                           "gpuMemory is %lld MiB; give 1 to %llu MiB (or a size such as "
                           "\"8GB\")",
                           (long long)n, (unsigned long long)RS_MAX_GPU_MEMORY_MIB);
        in->memory_mib = (uint64_t)n;
        return 0;
    }
    if (!json_is_string(v))
        return err_set(err, ERR_WRONG_TYPE,
                       "gpuMemory must be a size such as \"8GB\" or an integer of MiB, not %s",
                       json_type_name(v));
    const char *text = json_string_value(v);
    if (text[strspn(text, " 0123456789.")] == '\0')
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuMemory '%.32s' has no unit; write \"8GB\" or \"8192MB\", or the "
                       "integer 8192 for MiB",
                       text);
    uint64_t bytes = 0;
    if (size_parse(text, &bytes, err) < 0)
        return err_prefix(err, "gpuMemory");
    if (bytes % (1024 * 1024))
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuMemory '%.32s' is not a whole number of MiB; GPU memory is shared in "
                       "MiB (e.g. \"1536MB\")",
                       text);
    if (bytes / (1024 * 1024) > RS_MAX_GPU_MEMORY_MIB)
        return err_set(err, ERR_INVALID_PARAMS, "gpuMemory '%.32s' is more than any GPU has", text);
    in->memory_mib = bytes / (1024 * 1024);
    return 0;
}

/* gpuCores: an integer 1-100, or null (none). */
static int replicaset_gpu_read_cores(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    json_t *v = json_object_get(obj, "gpuCores");
    if (!v)
        return 0;
    in->has_cores = true;
    if (json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return err_set(err, ERR_WRONG_TYPE,
                       "gpuCores must be a whole number of percent from 1 to 100 (such as 50), "
                       "not %s",
                       json_type_name(v));
    json_int_t n = json_integer_value(v);
    if (n < 1 || n > 100)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuCores is %lld; give the percent of each card's compute time the set "
                       "may use, 1 to 100 (null: no limit)",
                       (long long)n);
    in->cores = (int)n;
    return 0;
}

static int replicaset_gpu_read_policy(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    const char *policy = NULL;
    int found = json_field_string(obj, NULL, "gpuPolicy", &policy, false, err);
    if (found <= 0)
        return found;
    int p = gpus_policy_parse(policy);
    if (p < 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuPolicy '%.32s' is unknown; use \"binpack\" (the fitting card with the "
                       "least memory left, the default) or \"spread\" (the most)",
                       policy);
    in->has_policy = true;
    in->policy = (enum gpus_policy)p;
    return 0;
}

/* A GPU or MIG UUID: "GPU-…", "MIG-…" or the older "MIG-GPU-…/1/0". */
static bool replicaset_gpu_uuid_ok(const char *u)
{
    size_t n = strlen(u);
    return n > 0 && n < GPU_UUID_MAX &&
           strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:") == n;
}

static int replicaset_gpu_read_uuids(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    _cleanup_free_ const char **items = NULL;
    size_t n = 0;
    int found = json_field_string_array(obj, NULL, "gpuUUIDs", &items, &n, false, err);
    if (found <= 0)
        return found;
    in->has_uuids = true;
    if (n > RS_MAX_GPUS)
        return err_set(err, ERR_INVALID_PARAMS, "gpuUUIDs has %zu entries; at most %d", n,
                       RS_MAX_GPUS);
    for (size_t i = 0; i < n; i++) {
        if (!replicaset_gpu_uuid_ok(items[i]))
            return err_set(err, ERR_INVALID_PARAMS,
                           "gpuUUIDs[%zu] '%.64s' is not a GPU UUID (such as GPU-1a2b3c4d-...); "
                           "the list of GPUs shows this host's",
                           i, items[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(items[i], items[j]) == 0)
                return err_set(err, ERR_INVALID_PARAMS, "gpuUUIDs names %.64s twice", items[i]);
    }
    if (n == 0)
        return 0;
    in->uuids = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++, in->nuuids = i)
        in->uuids[i] = xstrdup(items[i]);
    return 0;
}

static int replicaset_gpu_read_model(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    const char *model = NULL;
    int found = json_field_string(obj, NULL, "gpuModel", &model, false, err);
    if (found <= 0)
        return found;
    in->has_model = true;
    size_t len = strlen(model);
    if (len > RS_MAX_GPU_MODEL)
        return err_set(err, ERR_INVALID_PARAMS, "gpuModel is %zu characters long; at most %d", len,
                       RS_MAX_GPU_MODEL);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)model[i] < 0x20)
            return err_set(err, ERR_INVALID_PARAMS, "gpuModel contains a control character");
    if (len)
        in->model = xstrdup(model);
    return 0;
}

static int replicaset_gpu_read(const json_t *obj, replicaset_gpu_input *in, gb_err *err)
{
    int found = json_field_bool(obj, NULL, "gpuShared", &in->shared, false, err);
    if (found < 0)
        return -1;
    in->has_shared = found > 0;
    return replicaset_gpu_read_count(obj, in, err) < 0 ||
                   replicaset_gpu_read_memory(obj, in, err) < 0 ||
                   replicaset_gpu_read_cores(obj, in, err) < 0 ||
                   replicaset_gpu_read_policy(obj, in, err) < 0 ||
                   replicaset_gpu_read_uuids(obj, in, err) < 0 ||
                   replicaset_gpu_read_model(obj, in, err) < 0
               ? -1
               : 0;
}

/* The fields the spec would have; the lists are borrowed. */
typedef struct replicaset_gpu_result {
    long long count;
    uint64_t memory_mib;
    bool shared;
    int cores;
    bool cores_given; /* in this request: refused rather than dropped */
    enum gpus_policy policy;
    size_t nuuids;
} replicaset_gpu_result;

/* Step 2: the request over the current values (patch) or the defaults. */
static replicaset_gpu_result replicaset_gpu_combine(const replicaset_gpu_input *in, bool as_patch,
                                                    const replicaset_spec *spec)
{
    replicaset_gpu_result r = {.policy = GPUS_POLICY_BINPACK};
    if (as_patch)
        r = (replicaset_gpu_result){.count = spec->gpu_count,
                                    .memory_mib = spec->gpu_memory_mib,
                                    .shared = spec->gpu_shared,
                                    .cores = spec->gpu_cores,
                                    .policy = spec->gpu_policy,
                                    .nuuids = spec->ngpu_uuids};
    if (in->has_memory) {
        r.memory_mib = in->memory_mib;
        if (as_patch && in->memory_mib && !in->has_shared)
            r.shared = false;
    }
    if (in->has_shared) {
        r.shared = in->shared;
        if (as_patch && in->shared && !in->has_memory)
            r.memory_mib = 0;
    }
    if (in->has_cores) {
        r.cores = in->cores;
        r.cores_given = in->cores > 0;
    }
    if (in->has_policy)
        r.policy = in->policy;
    if (in->has_uuids)
        r.nuuids = in->nuuids;
    bool share = r.memory_mib || r.shared;
    if (in->has_count)
        r.count = in->count;
    else if (in->has_uuids && in->nuuids)
        r.count = 0; /* as many as pinned, below */
    else if (!as_patch)
        r.count = share ? 1 : 0;
    else if (share && r.count == 0 && !r.nuuids)
        r.count = 1;
    return r;
}

/* Step 3: the combination must make sense on its own. */
static int replicaset_gpu_check(replicaset_gpu_result *r, gb_err *err)
{
    if (r->memory_mib && r->shared)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuMemory and gpuShared cannot be combined: gpuShared gives a time-slice "
                       "replica whose memory is the card's memory / replicas; ask for one or the "
                       "other");
    if (r->nuuids) {
        if (r->count && (size_t)r->count != r->nuuids)
            return err_set(err, ERR_INVALID_PARAMS,
                           "gpuUUIDs names %zu GPU(s) but gpuCount is %lld; leave gpuCount out "
                           "or make it %zu",
                           r->nuuids, r->count, r->nuuids);
        r->count = (long long)r->nuuids;
    }
    if ((r->memory_mib || r->shared) && r->count == 0)
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuCount is 0, but %s asks for a share on each card; leave gpuCount out "
                       "for one card, or give the number of cards",
                       r->shared ? "gpuShared" : "gpuMemory");
    if (r->cores && !(r->memory_mib || r->shared)) {
        if (!r->cores_given) { /* a patch made the set whole or cardless */
            r->cores = 0;
            return 0;
        }
        if (r->count == 0)
            return err_set(err, ERR_INVALID_PARAMS,
                           "gpuCores is %d, but the set asks for no GPU; gpuCores limits the "
                           "compute of a share: give gpuMemory or gpuShared with it",
                           r->cores);
        return err_set(err, ERR_INVALID_PARAMS,
                       "gpuCores is %d, but the set asks for whole cards, which are its alone; "
                       "gpuCores limits the compute of a share: give gpuMemory (or gpuShared) "
                       "with it, or leave gpuCores out",
                       r->cores);
    }
    return 0;
}

int replicaset_spec_gpu_from_json(const json_t *obj, bool as_patch, replicaset_spec *spec,
                                  gb_err *err)
{
    _cleanup_(replicaset_gpu_input_free) replicaset_gpu_input in = {.policy = GPUS_POLICY_BINPACK};
    if (replicaset_gpu_read(obj, &in, err) < 0)
        return -1;
    replicaset_gpu_result r = replicaset_gpu_combine(&in, as_patch, spec);
    if (replicaset_gpu_check(&r, err) < 0)
        return -1;
    spec->gpu_count = (int)r.count;
    spec->gpu_memory_mib = r.memory_mib;
    spec->gpu_shared = r.shared;
    spec->gpu_cores = r.cores;
    spec->gpu_policy = r.policy;
    if (in.has_uuids || !as_patch) {
        replicaset_gpu_strings_free(spec->gpu_uuids, spec->ngpu_uuids);
        spec->gpu_uuids = steal_ptr(&in.uuids);
        spec->ngpu_uuids = in.nuuids;
        in.nuuids = 0;
    }
    if (in.has_model || !as_patch) {
        free(spec->gpu_model);
        spec->gpu_model = steal_ptr(&in.model);
    }
    return 0;
}

int replicaset_spec_gpu_to_json(const replicaset_spec *spec, json_t *obj)
{
    json_t *uuids = json_array();
    for (size_t i = 0; uuids && i < spec->ngpu_uuids; i++)
        if (json_array_append_new(uuids, json_string(spec->gpu_uuids[i])) < 0) {
            json_decref(uuids);
            return -1;
        }
    if (!uuids || json_object_set_new(obj, "gpuUUIDs", uuids) < 0 ||
        json_object_set_new(obj, "gpuMemory", json_integer((json_int_t)spec->gpu_memory_mib)) < 0 ||
        json_object_set_new(obj, "gpuShared", json_boolean(spec->gpu_shared)) < 0 ||
        json_object_set_new(obj, "gpuPolicy", json_string(gpus_policy_name(spec->gpu_policy))) <
            0 ||
        json_object_set_new(obj, "gpuModel", json_string(spec->gpu_model ? spec->gpu_model : "")) <
            0)
        return -1;
    /* Only when set: the form of every spec made before gpuCores stays. */
    if (spec->gpu_cores && json_object_set_new(obj, "gpuCores", json_integer(spec->gpu_cores)) < 0)
        return -1;
    return 0;
}

void replicaset_spec_gpu_free(replicaset_spec *spec)
{
    replicaset_gpu_strings_free(spec->gpu_uuids, spec->ngpu_uuids);
    free(spec->gpu_model);
    spec->gpu_uuids = NULL;
    spec->ngpu_uuids = 0;
    spec->gpu_model = NULL;
}

void replicaset_spec_gpu_request(const replicaset_spec *spec, gpus_request *out)
{
    *out = (gpus_request){
        .count = (size_t)spec->gpu_count,
        .memory_mib = spec->gpu_memory_mib,
        .timeslice = spec->gpu_shared,
        .policy = spec->gpu_policy,
        .pin_uuids = (const char *const *)spec->gpu_uuids,
        .npin = spec->ngpu_uuids,
        .model = spec->gpu_model,
    };
}

bool replicaset_spec_gpu_is_share(const replicaset_spec *spec)
{
    return spec->gpu_memory_mib > 0 || spec->gpu_shared;
}

bool replicaset_spec_gpu_asks(const replicaset_spec *spec)
{
    return spec->gpu_count > 0 || spec->ngpu_uuids > 0;
}

json_t *replicaset_spec_gpu_set_aside(replicaset_spec *spec)
{
    json_t *aside = json_pack("{s:i}", "gpuCount", spec->gpu_count);
    if (!aside || replicaset_spec_gpu_to_json(spec, aside) < 0) {
        json_decref(aside);
        return NULL;
    }
    /* An empty object read as a create's is every default: no cards. */
    _cleanup_json_ json_t *none = json_object();
    gb_err ignored = GB_ERR_INIT;
    if (!none || replicaset_spec_gpu_from_json(none, false, spec, &ignored) < 0) {
        json_decref(aside);
        return NULL;
    }
    return aside;
}

int replicaset_spec_gpu_put_back(replicaset_spec *spec, const json_t *aside, gb_err *err)
{
    return replicaset_spec_gpu_from_json(aside, false, spec, err);
}
