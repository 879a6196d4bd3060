"""Attacks on what one user of a name leaves to the next, on operation
records, and on what answers without a token (issue 25, items 10-12;
docs/security.md "Deleting users", "Operations", "Without a token").

Each test performs the attack against a real gpuboxd and dockerd.
"""
import json
import secrets
import time

import pytest

from conftest import Daemon
from rsutil import IMAGE, RUN_TAG, rs_path, wipe
from secutil import VIEWER, as_, write_tokens

PREFIX = "e2secu" + RUN_TAG
PORTS = "64900-64919"
ADMIN = "adm-" + secrets.token_hex(20)
SECRET = "SECRET=" + secrets.token_hex(8)


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secusers")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\nwatch:viewer:{VIEWER}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
        for v in ok(as_(d, ADMIN, "GET", "/api/v1/volumes"))["volumes"]:
            as_(d, ADMIN, "DELETE", f"/api/v1/volumes/{v['name']}")
    finally:
        d.stop()


def make_user(d, name):
    return ok(as_(d, ADMIN, "POST", "/api/v1/users", {"name": name, "role": "user"}))["token"]


def create(d, token, name, gpus=0, **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": gpus,
            "cmd": ["sh", "-c", "echo kept-line-$SECRET; sleep 3600"]}
    body.update(spec)
    return ok(as_(d, token, "POST", "/api/v1/replicaSet", body))


# --- item 10: a new user of a name inherits nothing -------------------------------------


def test_a_user_with_a_deleted_set_not_purged_cannot_be_removed(daemon):
    """bob deletes his set without purging it and is removed: the next bob
    would read its history, its spec (with the env) and its kept logs. The
    removal is refused, naming the set and how to purge it; once purged,
    the removal goes through and the next bob reads nothing of the first's."""
    d = daemon
    bob = "bob" + secrets.token_hex(3)
    s, vol = f"{PREFIX}s{secrets.token_hex(2)}", f"{PREFIX}v{secrets.token_hex(2)}"
    tb = make_user(d, bob)
    create(d, tb, s, gpus=1, env=[SECRET])
    time.sleep(1.5)  # a card held a while: accounting to leave behind
    ok(as_(d, tb, "DELETE", rs_path(s)))  # deleted, not purged
    ok(as_(d, tb, "POST", "/api/v1/volumes", {"name": vol, "size": "20MB"}))

    r = as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}")
    assert r.status == 409 and r.code == 1107, r.json
    assert s in r.msg and vol in r.msg and "purge" in r.msg, r.msg
    ok(as_(d, tb, "DELETE", f"/api/v1/volumes/{vol}"))
    r = as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}")
    assert r.status == 409 and r.code == 1107, r.json
    assert s in r.msg and vol not in r.msg and "gpubox rm --purge" in r.msg, r.msg
    # the history is still there (the refusal kept it for the first bob)
    assert SECRET in json.dumps(ok(as_(d, tb, "GET", rs_path(s, "/history"))))

    ok(as_(d, ADMIN, "DELETE", rs_path(s) + "?purge=true"))
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}"))

    nb = make_user(d, bob)  # the next bob
    for tail in ("", "/history", "/logs"):
        r = as_(d, nb, "GET", rs_path(s, tail))
        assert r.status == 404 and r.code == 1100, (tail, r.json)
        assert SECRET not in json.dumps(r.json)
    # the first bob's accounting stays the operator's, not the next bob's
    mine = ok(as_(d, nb, "GET", "/api/v1/usage"))["users"]
    assert [u["cardSeconds"] for u in mine] == [0] and mine[0]["sets"] == [], mine
    kept = ok(as_(d, ADMIN, "GET", f"/api/v1/usage?user={bob}"))["users"]
    assert kept[0]["cardSeconds"] > 1, kept
    # the name starts afresh for the next bob
    created = create(d, nb, s)
    assert created["version"] == 1, created
    hist = ok(as_(d, nb, "GET", rs_path(s, "/history")))
    assert SECRET not in json.dumps(hist)
    ok(as_(d, nb, "DELETE", rs_path(s) + "?purge=true"))
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}"))


def test_a_user_with_a_stopped_set_cannot_be_removed(daemon):
    d = daemon
    carl = "carl" + secrets.token_hex(3)
    s = f"{PREFIX}t{secrets.token_hex(2)}"
    tc = make_user(d, carl)
    create(d, tc, s)
    ok(as_(d, tc, "PATCH", rs_path(s, "/stop")))
    r = as_(d, ADMIN, "DELETE", f"/api/v1/users/{carl}")
    assert r.status == 409 and r.code == 1107 and s in r.msg, r.json
    ok(as_(d, tc, "DELETE", rs_path(s) + "?purge=true"))
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{carl}"))


# --- item 11: an operation is its owner's -----------------------------------------------


def test_an_operation_stays_its_owners_when_its_name_passes_to_another(daemon):
    """alice's create and patch of s, then s purged; bob creates s. The
    operations name s as their target: bob must not read alice's (they hold
    her spec, env included), and alice still reads her own."""
    d = daemon
    alice, bob = "alice" + secrets.token_hex(3), "bob" + secrets.token_hex(3)
    ta, tb = make_user(d, alice), make_user(d, bob)
    s = f"{PREFIX}o{secrets.token_hex(2)}"
    made = create(d, ta, s, env=[SECRET])
    patched = ok(as_(d, ta, "PATCH", rs_path(s), {"envPatch": {"set": ["MORE=1"]}}))
    ops = [made["operationId"], patched["operationId"]]
    for op in ops:
        assert ok(as_(d, ta, "GET", f"/api/v1/operations/{op}"))["target"] == s
    ok(as_(d, ta, "DELETE", rs_path(s) + "?purge=true"))
    create(d, tb, s)  # the name is free: bob's now
    for op in ops:
        r = as_(d, tb, "GET", f"/api/v1/operations/{op}")
        assert r.status == 404 and r.code == 1100, r.json
        assert SECRET not in json.dumps(r.json)
        got = ok(as_(d, ta, "GET", f"/api/v1/operations/{op}"))  # still alice's
        assert got["id"] == op and got["owner"] == alice
        assert ok(as_(d, ADMIN, "GET", f"/api/v1/operations/{op}"))["id"] == op
        assert ok(as_(d, VIEWER, "GET", f"/api/v1/operations/{op}"))["id"] == op
    # bob's own operation on his set is his
    mine = ok(as_(d, tb, "PATCH", rs_path(s, "/stop")))
    if "operationId" in mine:
        assert ok(as_(d, tb, "GET", f"/api/v1/operations/{mine['operationId']}"))["owner"] == bob
        assert as_(d, ta, "GET", f"/api/v1/operations/{mine['operationId']}").status == 404
    ok(as_(d, tb, "DELETE", rs_path(s) + "?purge=true"))
    for name in (alice, bob):
        ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{name}"))


# --- item 12: without a token, a status word ----------------------------------------------


def test_without_a_token_healthz_and_version_say_no_details(daemon):
    d = daemon
    full = ok(as_(d, ADMIN, "GET", "/healthz"))
    version = ok(as_(d, ADMIN, "GET", "/version"))
    socket_path = full["docker"]["host"]
    assert version["docker"]["storageDriver"] and version["docker"]["version"]
    for token in (None, "nobody-" + secrets.token_hex(20)):  # none, or one nobody knows
        r = as_(d, token, "GET", "/healthz")
        assert r.status == 200 and r.data == {"status": "ok"}, r.json
        r = as_(d, token, "GET", "/version")
        assert r.status == 200 and set(r.data) == {"version", "apiVersion"}, r.json
        assert r.data["version"] == version["version"]
        for path in ("/healthz", "/version"):
            body = json.dumps(as_(d, token, "GET", path).json)
            for detail in (socket_path, version["docker"]["version"],
                           version["docker"]["storageDriver"]):
                assert detail not in body, (path, detail)
    # any token sees the details
    for token in (ADMIN, VIEWER):
        assert as_(d, token, "GET", "/healthz").data["docker"]["host"] == socket_path
        assert as_(d, token, "GET", "/version").data["docker"]["storageDriver"]


def test_without_a_token_a_degraded_healthz_names_no_socket(start_daemon, tmp_path):
    from test_daemon import DockerLink
    link = DockerLink(tmp_path / "docker.sock")
    tokens = write_tokens(tmp_path / "tokens", f"root:admin:{ADMIN}\n")
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--docker-host",
                     f"unix://{tmp_path}/docker.sock", "--token-file", str(tokens))
    assert as_(d, None, "GET", "/healthz").data == {"status": "ok"}
    link.cut()
    r = as_(d, None, "GET", "/healthz")
    assert r.status == 503 and r.code == 1112, r.json
    assert r.data == {"status": "degraded"} and str(tmp_path) not in json.dumps(r.json), r.json
    r = as_(d, ADMIN, "GET", "/healthz")  # a token sees which part and why
    assert r.status == 503 and r.data["docker"]["ok"] is False
    assert r.data["docker"]["host"] == f"unix://{tmp_path}/docker.sock"
