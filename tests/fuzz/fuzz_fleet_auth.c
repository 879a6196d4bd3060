/*
 * fuzz_fleet_auth.c - the X-Gpubox-Fleet-Auth header a node reads from any
 * client (fleet/fleet_auth.h).
 *
 * Input: the header's value. Properties: no crash or leak; a value that
 * parses names a valid node and gives back a time; the check accepts a
 * value exactly when it is the proof this module itself makes for that
 * node, time and request - nothing else passes.
 */
#include "fuzz_util.h"

#include "fleet/fleet_auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char key[] = "fuzz-fleet-secret-fuzz-fleet-secret";
    char *text = fuzz_cstring(data, size);
    fleet_request req = {.method = "POST",
                         .path_query = "/api/v1/replicaSet",
                         .authorization = "Bearer x",
                         .body = "{}",
                         .body_len = 2};
    char node[FLEET_NODE_MAX];
    int64_t ts = 0;
    unsigned char sig[32];
    gb_err err = GB_ERR_INIT;
    if (fleet_auth_parse(text, node, &ts, sig, &err) == 0) {
        gb_err e = GB_ERR_INIT;
        FUZZ_CHECK(fleet_node_name_check(node, &e) == 0, "a parsed node name is not valid");
        FUZZ_CHECK(ts >= 0, "a parsed time is negative");
        char mine[FLEET_AUTH_VALUE_MAX];
        fleet_auth_sign(key, sizeof(key) - 1, node, ts, &req, mine);
        int ok = fleet_auth_check(key, sizeof(key) - 1, text, node, ts, &req, NULL, &e);
        FUZZ_CHECK((ok == 0) == (strcmp(mine, text) == 0), "a proof passed that is not ours");
        FUZZ_CHECK(fleet_auth_check(key, sizeof(key) - 1, mine, node, ts, &req, NULL, &e) == 0,
                   "our own proof did not pass");
    } else {
        FUZZ_CHECK(err.code == ERR_FORBIDDEN, "a refusal without ERR_FORBIDDEN");
        gb_err e = GB_ERR_INIT;
        FUZZ_CHECK(fleet_auth_check(key, sizeof(key) - 1, text, "a", ts, &req, NULL, &e) < 0,
                   "an unreadable proof passed");
    }
    free(text);
    return 0;
}
