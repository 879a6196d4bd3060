/*
 * fleet_secret.c - the fleet's secret, the key of the proof every request
 * between nodes carries (fleet_auth.h).
 *
 * Given in a file (--fleet-secret-file: its text, without the trailing
 * white space, at least FLEET_SECRET_MIN characters; mode 600 like the
 * token file), or kept in etcd at <prefix>/fleet/secret: the first node
 * that finds none makes 32 random bytes (getrandom), as 64 hex digits,
 * and puts them there only if the key is still absent, so nodes joining
 * at once agree on one. Anyone who can read etcd can read it - and could
 * already change every record of the fleet. It is never logged.
 */
#include "util/xalloc.h"
#include "fleet/fleet_auth.h"
#include "fleet/fleet_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/secret_file.h"
#include "util/token.h"

#define FLEET_SECRET_RANDOM_BYTES 32

static void secret_keep(fleet *f, const char *text, size_t len)
{
    f->secret = xmalloc(len);
    memcpy(f->secret, text, len);
    f->secret_len = len;
}

static int secret_from_file(fleet *f, const char *path, gb_err *err)
{
    _cleanup_free_ char *what = xasprintf("fleet secret file %s", path);
    _cleanup_(secret_text_free) char *text = NULL;
    if (secret_file_read(path, what, "the fleet's secret", true, FLEET_SECRET_MAX + 2, &text, err) <
        0)
        return err_prefix(err, "--fleet-secret-file");
    size_t len = strlen(text);
    while (len && strchr(" \t\r\n", text[len - 1]))
        len--;
    if (len < FLEET_SECRET_MIN)
        return err_set(err, ERR_INVALID_PARAMS,
                       "--fleet-secret-file: %s holds %zu characters; the fleet's secret needs at "
                       "least %d (e.g. `openssl rand -hex 32 > %s`)",
                       what, len, FLEET_SECRET_MIN, path);
    secret_keep(f, text, len);
    return 0;
}

/* 1 read (kept in f), 0 absent, -1 error. */
static int secret_read(fleet *f, gb_err *err)
{
    store_kv kv = {0};
    int found = store_get(f->store, FLEET_KEY_SECRET, &kv, err);
    if (found <= 0)
        return found < 0 ? err_prefix(err, "reading the fleet's secret") : 0;
    _cleanup_json_ json_t *v = json_loads(kv.value, 0, NULL);
    token_wipe(kv.value, strlen(kv.value));
    store_kv_free(&kv);
    const char *text = json_string_value(json_object_get(v, "secret"));
    size_t len = text ? strlen(text) : 0;
    if (len < FLEET_SECRET_MIN)
        return err_set(err, ERR_INTERNAL,
                       "the fleet's secret in etcd (key fleet/%s under the --store prefix) is "
                       "not {\"secret\": at least %d characters}; delete the key and restart "
                       "every node, or give them all --fleet-secret-file",
                       FLEET_KEY_SECRET, FLEET_SECRET_MIN);
    secret_keep(f, text, len);
    token_wipe((char *)text, len);
    return 1;
}

/* Make one and put it if the key is still absent: 1 put, 0 another node's
 * came first, -1 error. */
static int secret_make(fleet *f, gb_err *err)
{
    unsigned char raw[FLEET_SECRET_RANDOM_BYTES];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(err, ERR_INTERNAL, "making the fleet's secret: getrandom: %s",
                           strerror(errno));
        got += (size_t)n;
    }
    char hex[2 * FLEET_SECRET_RANDOM_BYTES + 1];
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    token_wipe(raw, sizeof(raw));
    /* written by hand, so every copy of the secret can be wiped */
    char value[sizeof(hex) + 64];
    snprintf(value, sizeof(value), "{\"secret\":\"%s\",\"created\":%lld}", hex,
             (long long)time(NULL));
    store_cmp cmp = {.kind = STORE_CMP_ABSENT, .key = FLEET_KEY_SECRET};
    store_op op = {.kind = STORE_OP_PUT, .key = FLEET_KEY_SECRET, .value = value};
    bool ok = false;
    int rc = store_txn(f->store, &cmp, 1, &op, 1, &ok, NULL, err);
    token_wipe(value, sizeof(value));
    if (rc < 0) {
        token_wipe(hex, sizeof(hex));
        return err_prefix(err, "writing the fleet's secret");
    }
    if (ok)
        secret_keep(f, hex, strlen(hex));
    token_wipe(hex, sizeof(hex));
    return ok ? 1 : 0;
}

int fleet_secret_load(fleet *f, const char *secret_file, gb_err *err)
{
    if (secret_file)
        return secret_from_file(f, secret_file, err);
    for (int tries = 0; tries < 3; tries++) {
        int found = secret_read(f, err);
        if (found != 0)
            return found < 0 ? -1 : 0;
        int made = secret_make(f, err);
        if (made < 0)
            return -1;
        if (made) {
            log_info("fleet: made the fleet's secret (kept in etcd, key fleet/%s under the "
                     "--store prefix)",
                     FLEET_KEY_SECRET);
            return 0;
        }
    }
    return err_set(err, ERR_STORE_UNAVAILABLE,
                   "the fleet's secret in etcd came and went three times while this node read "
                   "it; start the node again");
}

void fleet_secret_free(fleet *f)
{
    if (f->secret)
        token_wipe(f->secret, f->secret_len);
    free(f->secret);
    f->secret = NULL;
    f->secret_len = 0;
}

int fleet_request_verify(fleet *f, const char *proof, const char *forwarded_by,
                         const fleet_request *req, gb_err *err)
{
    return fleet_auth_check(f->secret, f->secret_len, proof, forwarded_by, (int64_t)time(NULL), req,
                            NULL, err);
}
