/*
 * test_nodes_place.c - placing a create in a fleet without HTTP or etcd
 * (service/nodes/place.h): the ranked candidates are tried in turn through
 * a fake name index and fake create callbacks. A refusal for lack of room
 * (a stale capacity record) moves on to the next candidate and gives its
 * claim up; a node that does not answer likewise; the last candidate's
 * refusal is the client's answer; no candidate at all is the caller's
 * error code naming every refusal; a name another node claimed first goes
 * to that node (or answers "unreachable" when it is gone); a create here
 * that fails for another reason ends the placement (a create here gives
 * its name up itself, as nodes_release_unheld does). Also: the route of a
 * request on a single server is "here", and the header names agree with
 * fleet/fleet.h's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fleet/fleet.h"
#include "service/nodes/nodes.h"
#include "service/nodes/place.h"

/* ---- the fake name index: one name, the node holding it ---- */

typedef struct fake_index {
    char holder[NODES_NAME_MAX]; /* "" when nobody */
    const char *alive[4];        /* the nodes that answer reach */
    char log[256];               /* "claim b; release b; ..." */
} fake_index;

static void note(char *log, size_t size, const char *what, const char *node)
{
    size_t used = strlen(log);
    snprintf(log + used, size - used, "%s%s %s", used ? "; " : "", what, node);
}

static int fake_claim(void *ctx, const char *node, char *holder, size_t size, gb_err *err)
{
    (void)err;
    fake_index *x = ctx;
    note(x->log, sizeof(x->log), "claim", node);
    if (x->holder[0] && strcmp(x->holder, node) != 0) {
        snprintf(holder, size, "%s", x->holder);
        return 0;
    }
    snprintf(x->holder, sizeof(x->holder), "%s", node);
    return 1;
}

static void fake_release(void *ctx, const char *node)
{
    fake_index *x = ctx;
    note(x->log, sizeof(x->log), "release", node);
    if (strcmp(x->holder, node) == 0)
        x->holder[0] = '\0';
}

static int fake_reach(void *ctx, const char *node, char *advertise, size_t size, gb_err *err)
{
    (void)err;
    fake_index *x = ctx;
    for (size_t i = 0; i < 4 && x->alive[i]; i++)
        if (strcmp(x->alive[i], node) == 0) {
            snprintf(advertise, size, "http://%s:2378", node);
            return 1;
        }
    return 0;
}

/* ---- the fake creates: each node's answer, by name ---- */

typedef struct fake_node {
    const char *name;
    bool silent; /* no answer (down, cut off) */
    int code;    /* its answer's code: ERR_OK made it */
} fake_node;

typedef struct fake_calls {
    fake_node nodes[4];
    int here_code; /* the create here: ERR_OK made it */
    char log[256]; /* "here; forward b; pass b; ..." */
    char held[NODES_NAME_MAX];
    char passed[NODES_NAME_MAX];
    int npassed;
    fake_index *index; /* a failed create here gives its name up there */
} fake_calls;

static int fake_here(void *ctx, gb_err *err)
{
    fake_calls *c = ctx;
    note(c->log, sizeof(c->log), "here", "a");
    if (c->here_code == ERR_OK)
        return 0;
    if (c->index)
        fake_release(c->index, "a");
    return err_set(err, c->here_code, "GPU not enough here");
}

static int fake_forward(void *ctx, const char *node, const char *advertise, gb_err *answer,
                        gb_err *err)
{
    fake_calls *c = ctx;
    assert_non_null(advertise);
    note(c->log, sizeof(c->log), "forward", node);
    for (size_t i = 0; i < 4 && c->nodes[i].name; i++) {
        const fake_node *n = &c->nodes[i];
        if (strcmp(n->name, node) != 0)
            continue;
        if (n->silent)
            return err_set(err, ERR_NODE_UNAVAILABLE, "no answer from %s", node);
        answer->code = n->code;
        snprintf(answer->msg, sizeof(answer->msg), "%s says %d", node, n->code);
        snprintf(c->held, sizeof(c->held), "%s", node);
        return 0;
    }
    fail_msg("forward to an unknown node %s", node);
    return -1;
}

static void fake_pass(void *ctx)
{
    fake_calls *c = ctx;
    note(c->log, sizeof(c->log), "pass", c->held);
    snprintf(c->passed, sizeof(c->passed), "%s", c->held);
    c->npassed++;
}

#define CALLS(c)                                                                                   \
    {                                                                                              \
        .ctx = &(c), .here = fake_here, .forward = fake_forward, .pass = fake_pass                 \
    }
#define INDEX(x)                                                                                   \
    {                                                                                              \
        .ctx = &(x), .claim = fake_claim, .release = fake_release, .reach = fake_reach             \
    }

static const nodes_candidate bc[] = {{"b", "http://b:2378"}, {"c", "http://c:2378"}};
static const nodes_candidate abc[] = {
    {"a", "http://a:2378"}, {"b", "http://b:2378"}, {"c", "http://c:2378"}};

/* ---- the tests ---- */

/* b's capacity record was stale: it refuses (1013); its claim is given up
 * and c, the next candidate, makes the set. */
static void test_stale_capacity_tries_next(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.nodes = {{"b", false, ERR_GPU_NOT_ENOUGH}, {"c", false, ERR_OK}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(x.log, "claim b; release b; claim c");
    assert_string_equal(c.log, "forward b; forward c; pass c");
    assert_string_equal(x.holder, "c");
    assert_int_equal(c.npassed, 1);
}

/* A port refusal (1014) counts as lack of room too. */
static void test_port_refusal_tries_next(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.nodes = {{"b", false, ERR_PORT_NOT_ENOUGH}, {"c", false, ERR_OK}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(c.passed, "c");
    assert_string_equal(x.holder, "c");
}

/* The last candidate's refusal is the client's answer, unchanged. */
static void test_last_refusal_is_passed(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.nodes = {{"b", false, ERR_GPU_NOT_ENOUGH}, {"c", false, ERR_GPU_NOT_ENOUGH}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(c.log, "forward b; forward c; pass c");
}

/* Any other answer (an invalid body, "exists") is passed at once: it would
 * be the same on every node. */
static void test_other_answer_is_passed(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.nodes = {{"b", false, ERR_INVALID_PARAMS}, {"c", false, ERR_OK}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(c.log, "forward b; pass b");
    assert_string_equal(x.log, "claim b");
}

/* Every create failed (no answer): each claim is given up, and the error
 * names every node and why. */
static void test_claims_released_after_failed_creates(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.nodes = {{"b", true, 0}, {"c", true, 0}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), -1);
    assert_int_equal(err.code, ERR_GPU_NOT_ENOUGH);
    assert_string_equal(x.log, "claim b; release b; claim c; release c");
    assert_string_equal(x.holder, "");
    assert_non_null(strstr(err.msg, "node b: no answer from b"));
    assert_non_null(strstr(err.msg, "node c: no answer from c"));
    assert_int_equal(c.npassed, 0);
}

/* No candidate at all: the caller's code (1013 for a set, the volume
 * code for a volume), nothing claimed. */
static void test_no_candidate(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {0};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(NULL, 0, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), -1);
    assert_int_equal(err.code, ERR_GPU_NOT_ENOUGH);
    assert_non_null(strstr(err.msg, "no node of the fleet took it"));
    err_clear(&err);
    assert_int_equal(
        nodes_try_candidates(NULL, 0, "a", &ix, &calls, ERR_VOLUME_CREATE_FAILED, &err), -1);
    assert_int_equal(err.code, ERR_VOLUME_CREATE_FAILED);
    assert_string_equal(x.log, "");
    assert_string_equal(c.log, "");
}

/* This node first: a refusal here moves on (the create here gives its
 * name up itself), another error ends the placement. */
static void test_here_first(void **state)
{
    (void)state;
    fake_index x = {0};
    fake_calls c = {.here_code = ERR_GPU_NOT_ENOUGH,
                    .nodes = {{"b", false, ERR_OK}, {"c", false, ERR_OK}},
                    .index = &x};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(abc, 3, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(c.log, "here a; forward b; pass b");
    assert_string_equal(x.log, "claim a; release a; claim b");
    assert_string_equal(x.holder, "b");

    fake_index y = {0};
    fake_calls d = {.here_code = ERR_INVALID_PARAMS, .index = &y};
    nodes_index iy = INDEX(y);
    nodes_create_calls dcalls = CALLS(d);
    err_clear(&err);
    assert_int_equal(nodes_try_candidates(abc, 3, "a", &iy, &dcalls, ERR_GPU_NOT_ENOUGH, &err), -1);
    assert_int_equal(err.code, ERR_INVALID_PARAMS);
    assert_string_equal(d.log, "here a");
    assert_string_equal(y.log, "claim a; release a");
}

/* Another create claimed the name first: its node answers. */
static void test_claim_lost_goes_to_holder(void **state)
{
    (void)state;
    fake_index x = {.holder = "c", .alive = {"b", "c"}};
    fake_calls c = {.nodes = {{"b", false, ERR_OK}, {"c", false, ERR_EXISTS}}};
    nodes_index ix = INDEX(x);
    nodes_create_calls calls = CALLS(c);
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &ix, &calls, ERR_GPU_NOT_ENOUGH, &err), 0);
    assert_string_equal(x.log, "claim b");
    assert_string_equal(c.log, "forward c; pass c");

    /* ... unless it is gone: then nothing it holds is given away */
    fake_index y = {.holder = "c", .alive = {"b"}};
    fake_calls d = {.nodes = {{"b", false, ERR_OK}}};
    nodes_index iy = INDEX(y);
    nodes_create_calls dcalls = CALLS(d);
    assert_int_equal(nodes_try_candidates(bc, 2, "a", &iy, &dcalls, ERR_GPU_NOT_ENOUGH, &err), -1);
    assert_int_equal(err.code, ERR_NODE_UNAVAILABLE);
    assert_string_equal(d.log, "");
    assert_string_equal(y.holder, "c");
}

/* A single server: every request is answered here, nothing asked of a
 * fleet. */
static void test_single_server_routes_here(void **state)
{
    (void)state;
    app a = {0};
    nodes_route to;
    gb_err err = GB_ERR_INIT;
    assert_int_equal(nodes_route_name(&a, NODES_REPLICASET, "foo", true, &to, &err), 0);
    assert_int_equal(to.where, NODES_HERE);
    assert_int_equal(nodes_route_name(&a, NODES_VOLUME, "foo", false, &to, &err), 0);
    assert_int_equal(to.where, NODES_HERE);
    assert_null(nodes_self(&a));
}

static void test_headers_agree_with_fleet(void **state)
{
    (void)state;
    assert_string_equal(NODES_FORWARDED_HEADER, FLEET_FORWARDED_HEADER);
    assert_string_equal(NODES_AUTH_HEADER, FLEET_AUTH_HEADER);
    assert_int_equal(NODES_NAME_MAX, FLEET_NODE_MAX);
    assert_int_equal(NODES_URL_MAX, FLEET_URL_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_capacity_tries_next),
        cmocka_unit_test(test_port_refusal_tries_next),
        cmocka_unit_test(test_last_refusal_is_passed),
        cmocka_unit_test(test_other_answer_is_passed),
        cmocka_unit_test(test_claims_released_after_failed_creates),
        cmocka_unit_test(test_no_candidate),
        cmocka_unit_test(test_here_first),
        cmocka_unit_test(test_claim_lost_goes_to_holder),
        cmocka_unit_test(test_single_server_routes_here),
        cmocka_unit_test(test_headers_agree_with_fleet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
