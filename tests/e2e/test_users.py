"""Users, ownership, quotas and accounting on one server (issue 15,
docs/users.md): API users and their tokens, a user seeing only their own on
every route, quotas under concurrency, card-seconds against the wall
clock, and records from before users getting their owner.
"""
import concurrent.futures
import json
import secrets
import time

import pytest

from conftest import Daemon
from rsutil import IMAGE, RUN_TAG, rs_path, wipe
from secutil import as_, write_tokens

PREFIX = "e2usr" + RUN_TAG
PORTS = "64500-64549"
ADMIN = "adm-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
FILEUSER = "fu-" + secrets.token_hex(20)


def metrics_text(d, token):
    """GET /metrics as text, with its status."""
    conn = d.connection()
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def ok(r):
    assert r.status == 200 and r.code == 200, r.json
    return r.json["data"]


def start(tmp, *extra, tokens=None):
    args = ["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
            "4xA100-80GB", "--port-range", PORTS, *extra]
    if tokens:
        args += ["--token-file", str(tokens)]
    return Daemon(args, tmp / "data", tmp / "gpuboxd.log").start()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return write_tokens(tmp_path_factory.mktemp("usertokens") / "tokens",
                        f"alice:admin:{ADMIN}\nbob:viewer:{VIEWER}\nfrank:user:{FILEUSER}\n")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, tokens):
    d = start(tmp_path_factory.mktemp("users"), tokens=tokens)
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
        for v in ok(as_(d, ADMIN, "GET", "/api/v1/volumes"))["volumes"]:
            as_(d, ADMIN, "DELETE", f"/api/v1/volumes/{v['name']}")
    finally:
        d.stop()


def make_user(d, name, role="user", quota=None):
    body = {"name": name, "role": role}
    if quota is not None:
        body["quota"] = quota
    data = ok(as_(d, ADMIN, "POST", "/api/v1/users", body))
    assert data["token"].startswith("gpbx_") and len(data["token"]) == 53
    return data["token"]


def drop_user(d, name):
    as_(d, ADMIN, "DELETE", f"/api/v1/users/{name}")


def create_body(name, gpus=0, **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": gpus,
            "cmd": ["sleep", "3600"]}
    body.update(spec)
    return body


@pytest.fixture
def pair(daemon):
    """Two fresh users, carol and dave (their tokens), removed afterwards
    with everything they made."""
    tag = secrets.token_hex(3)
    carol, dave = f"carol{tag}", f"dave{tag}"
    tc, td = make_user(daemon, carol), make_user(daemon, dave)
    yield daemon, (carol, tc), (dave, td)
    wipe_as(daemon, ADMIN)
    drop_user(daemon, carol)
    drop_user(daemon, dave)


def wipe_as(d, token):
    for s in ok(as_(d, token, "GET", "/api/v1/replicaSet?all=true"))["replicaSets"]:
        if s["name"].startswith(PREFIX):
            as_(d, token, "DELETE", rs_path(s["name"]) + "?purge=true")
    for v in ok(as_(d, token, "GET", "/api/v1/volumes"))["volumes"]:
        if v["name"].startswith(PREFIX):
            as_(d, token, "DELETE", f"/api/v1/volumes/{v['name']}")


# --- users and tokens -------------------------------------------------------------------


def test_admin_makes_a_user_whose_token_works_once_shown(daemon):
    name = "erin" + secrets.token_hex(3)
    token = make_user(daemon, name, quota={"cards": 1})
    me = ok(as_(daemon, token, "GET", "/api/v1/whoami"))
    assert (me["name"], me["role"], me["source"]) == (name, "user", "api")
    assert me["quota"]["cards"] == 1 and me["quota"]["instances"] is None
    assert me["usage"] == {"cards": 0, "shareMiB": 0, "instances": 0, "volumeBytes": 0,
                           "cores": 0}
    # the token is never shown again, nor kept in clear
    got = ok(as_(daemon, ADMIN, "GET", f"/api/v1/users/{name}"))
    assert "token" not in got and "tokenHash" not in got and got["hasToken"]
    listed = ok(as_(daemon, ADMIN, "GET", "/api/v1/users"))["users"]
    assert token not in json.dumps(listed)
    assert {u["name"] for u in listed} >= {"alice", "bob", "frank", name}
    # the SQLite store's files, its write-ahead log included (the etcd group
    # keeps the store in etcd, and the data dir has none of them)
    for db in daemon.data_dir.glob("state.db*"):
        assert token.encode() not in db.read_bytes(), db
    # the same name again, and bad bodies, change nothing
    r = as_(daemon, ADMIN, "POST", "/api/v1/users", {"name": name, "role": "user"})
    assert r.status == 409 and r.code == 1116
    r = as_(daemon, ADMIN, "POST", "/api/v1/users", {"name": "alice", "role": "user"})
    assert r.status == 409 and r.code == 1116
    for body, code in [({"name": "x y", "role": "user"}, 1106), ({"name": "z", "role": "root"}, 1000),
                       ({"name": "z", "role": "user", "quota": {"cards": -1}}, 1000),
                       ({"name": "z", "role": "user", "quota": {"gpus": 1}}, 1000),
                       ({"name": "z", "role": "user", "quota": {"cards": "2"}}, 1000),
                       ({"name": "z", "role": "user", "extra": 1}, 1000)]:
        r = as_(daemon, ADMIN, "POST", "/api/v1/users", body)
        assert r.status == 400 and r.code == code, (body, r.json)
    assert as_(daemon, ADMIN, "GET", "/api/v1/users/z").code == 1117
    drop_user(daemon, name)
    assert as_(daemon, token, "GET", "/api/v1/whoami").status == 401


def test_only_admins_manage_users_and_users_cannot_read_metrics(daemon):
    for token in (VIEWER, FILEUSER):
        for method, path, body in [("GET", "/api/v1/users", None),
                                   ("POST", "/api/v1/users", {"name": "q", "role": "admin"}),
                                   ("PUT", "/api/v1/quotas/defaults", {"cards": 9}),
                                   ("PATCH", "/api/v1/users/frank", {"quota": {"cards": 99}})]:
            r = as_(daemon, token, method, path, body)
            assert r.status == 403 and r.code == 1109, (token[:3], path, r.json)
    status, text = metrics_text(daemon, FILEUSER)
    assert status == 403 and json.loads(text)["code"] == 1109
    assert metrics_text(daemon, VIEWER)[0] == 200
    assert as_(daemon, ADMIN, "GET", "/api/v1/users/q").code == 1117


def test_rotation_and_revocation_take_effect_at_once(daemon):
    name = "gina" + secrets.token_hex(3)
    old = make_user(daemon, name)
    assert as_(daemon, old, "GET", "/api/v1/whoami").status == 200
    new = ok(as_(daemon, ADMIN, "POST", f"/api/v1/users/{name}/token"))["token"]
    assert new != old
    r = as_(daemon, old, "GET", "/api/v1/whoami")
    assert r.status == 401 and r.code == 1108
    assert ok(as_(daemon, new, "GET", "/api/v1/whoami"))["name"] == name
    ok(as_(daemon, ADMIN, "DELETE", f"/api/v1/users/{name}/token"))
    assert as_(daemon, new, "GET", "/api/v1/replicaSet").status == 401
    assert ok(as_(daemon, ADMIN, "GET", f"/api/v1/users/{name}"))["hasToken"] is False
    # the token file's users are the file's
    r = as_(daemon, ADMIN, "POST", "/api/v1/users/frank/token")
    assert r.status == 409 and "token file" in r.json["msg"]
    r = as_(daemon, ADMIN, "DELETE", "/api/v1/users/frank")
    assert r.status == 409
    drop_user(daemon, name)


# --- ownership: a user sees only their own, on every route ---------------------------------


def same_as_missing(r, missing, name, ghost):
    """r (about someone else's `name`) answers exactly as `missing` (about a
    name nobody holds, `ghost`): status, code and the message's shape."""
    assert (r.status, r.code) == (missing.status, missing.code), (r.json, missing.json)
    assert r.json["msg"].replace(name, "<n>") == missing.json["msg"].replace(ghost, "<n>")


def test_a_user_sees_and_changes_only_their_own(pair):
    d, (carol, tc), (dave, td) = pair
    cset, ghost = f"{PREFIX}c{secrets.token_hex(2)}", f"{PREFIX}g{secrets.token_hex(2)}"
    vol, gvol = f"{PREFIX}v{secrets.token_hex(2)}", f"{PREFIX}w{secrets.token_hex(2)}"
    ok(as_(d, tc, "POST", "/api/v1/volumes", {"name": vol, "size": "20MB"}))
    made = ok(as_(d, tc, "POST", "/api/v1/replicaSet",
                  create_body(cset, binds=[{"src": vol, "dest": "/data"}])))
    op_id = made["operationId"]
    assert ok(as_(d, tc, "GET", rs_path(cset)))["info"]["owner"] == carol

    # lists
    assert cset not in [s["name"] for s in ok(as_(d, td, "GET", "/api/v1/replicaSet?all=true"))["replicaSets"]]
    assert vol not in [v["name"] for v in ok(as_(d, td, "GET", "/api/v1/volumes"))["volumes"]]
    mine = ok(as_(d, tc, "GET", "/api/v1/replicaSet"))["replicaSets"]
    assert [s["owner"] for s in mine if s["name"] == cset] == [carol]
    every = ok(as_(d, ADMIN, "GET", "/api/v1/replicaSet"))["replicaSets"]
    assert [s["owner"] for s in every if s["name"] == cset] == [carol]
    assert [s["owner"] for s in ok(as_(d, VIEWER, "GET", "/api/v1/replicaSet"))["replicaSets"]
            if s["name"] == cset] == [carol]

    routes = [("GET", "", None), ("GET", "/history", None), ("PATCH", "/stop", None),
              ("PATCH", "/pause", None), ("PATCH", "/continue", None),
              ("PATCH", "/restart", None), ("PATCH", "", {"gpuPatch": {"gpuCount": 1}}),
              ("PATCH", "/rollback", {"version": 1}),
              ("POST", "/execute", {"cmd": ["id"]}),
              ("POST", "/commit", {"newImageName": f"{PREFIX}img:x"}), ("DELETE", "", None)]
    for method, tail, body in routes:
        r = as_(d, td, method, rs_path(cset, tail), body)
        missing = as_(d, td, method, rs_path(ghost, tail), body)
        same_as_missing(r, missing, cset, ghost)
    legacy = [("PATCH", "/stop", None), ("PATCH", "/restart", None),
              ("PATCH", "/gpu", {"gpuCount": 1}), ("POST", "/execute", {"cmd": ["id"]}),
              ("POST", "/commit", {"newImageName": f"{PREFIX}img:y"}), ("DELETE", "", None)]
    for method, tail, body in legacy:
        r = as_(d, td, method, f"/api/v1/containers/{cset}{tail}", body)
        missing = as_(d, td, method, f"/api/v1/containers/{ghost}{tail}", body)
        same_as_missing(r, missing, cset, ghost)
    r = as_(d, td, "GET", f"/api/v1/operations/{op_id}")
    assert r.status == 404 and r.code == 1100
    for method, tail, body in [("GET", "", None), ("GET", "/history", None),
                               ("PATCH", "/size", {"size": "30MB"}), ("DELETE", "", None)]:
        r = as_(d, td, method, f"/api/v1/volumes/{vol}{tail}", body)
        missing = as_(d, td, method, f"/api/v1/volumes/{gvol}{tail}", body)
        same_as_missing(r, missing, vol, gvol)
    # binding carol's volume is binding one that does not exist
    dset = f"{PREFIX}d{secrets.token_hex(2)}"
    r = as_(d, td, "POST", "/api/v1/replicaSet", create_body(dset, binds=[{"src": vol, "dest": "/x"}]))
    missing = as_(d, td, "POST", "/api/v1/replicaSet",
                  create_body(dset, binds=[{"src": gvol, "dest": "/x"}]))
    same_as_missing(r, missing, vol, gvol)
    # taking carol's names says only that they are taken
    r = as_(d, td, "POST", "/api/v1/replicaSet", create_body(cset))
    assert r.status == 409 and r.code == 1008 and carol not in r.json["msg"]
    assert "running" not in r.json["msg"]
    r = as_(d, td, "POST", "/api/v1/volumes", {"name": vol, "size": "20MB"})
    assert r.status == 409 and r.code == 1026 and "20" not in r.json["msg"].replace(vol, "")
    # nothing of carol's changed; she still does what she likes
    assert ok(as_(d, tc, "GET", rs_path(cset)))["info"]["status"] == "running"
    ok(as_(d, tc, "PATCH", rs_path(cset, "/stop")))
    ok(as_(d, ADMIN, "PATCH", rs_path(cset, "/restart")))  # admins may
    assert ok(as_(d, tc, "GET", f"/api/v1/operations/{op_id}"))["id"] == op_id
    # /resources/gpus does not name other users' sets to a user
    ok(as_(d, tc, "PATCH", rs_path(cset), {"gpuPatch": {"gpuCount": 1}}))
    text = json.dumps(ok(as_(d, td, "GET", "/api/v1/resources/gpus")))
    assert cset not in text and "(other)" in text
    assert cset in json.dumps(ok(as_(d, tc, "GET", "/api/v1/resources/gpus")))


def test_a_user_overwrites_only_images_they_committed(pair):
    d, (carol, tc), (dave, td) = pair
    cset, dset = f"{PREFIX}i{secrets.token_hex(2)}", f"{PREFIX}j{secrets.token_hex(2)}"
    ok(as_(d, tc, "POST", "/api/v1/replicaSet", create_body(cset)))
    ok(as_(d, td, "POST", "/api/v1/replicaSet", create_body(dset)))
    # a user's commits go under u/<user>/ (docs/security.md, "Images")
    tag = f"u/{carol}/{PREFIX}img:{secrets.token_hex(2)}"
    try:
        ok(as_(d, tc, "POST", rs_path(cset, "/commit"), {"newImageName": tag}))
        ok(as_(d, tc, "POST", rs_path(cset, "/commit"), {"newImageName": tag, "overwrite": True}))
        r = as_(d, td, "POST", rs_path(dset, "/commit"), {"newImageName": tag, "overwrite": True})
        assert r.status == 403 and r.code == 1109, r.json
        # the base image everyone starts from is an admin's
        r = as_(d, td, "POST", rs_path(dset, "/commit"), {"newImageName": IMAGE, "overwrite": True})
        assert r.status == 403 and r.code == 1109, r.json
    finally:
        as_(d, ADMIN, "DELETE", rs_path(cset) + "?purge=true")
        as_(d, ADMIN, "DELETE", rs_path(dset) + "?purge=true")
        from rsutil import remove_image
        remove_image(tag)


# --- quotas ------------------------------------------------------------------------------


def test_twenty_concurrent_creates_with_a_quota_of_two_cards_make_two(pair):
    d, (carol, tc), _ = pair
    ok(as_(d, ADMIN, "PATCH", f"/api/v1/users/{carol}", {"quota": {"cards": 2}}))
    names = [f"{PREFIX}q{i:02d}" for i in range(20)]
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        rs = list(pool.map(lambda n: as_(d, tc, "POST", "/api/v1/replicaSet", create_body(n, 1)),
                           names))
    made = [r for r in rs if r.code == 200]
    assert len(made) == 2, [r.json for r in rs]
    # refused for the quota, all of them: a create the quota refuses holds
    # no card, even for a moment (issue 26, item 4)
    assert all((r.status, r.code) == (403, 1115) for r in rs if r.code != 200)
    r = as_(d, tc, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}q99", 1))
    assert r.status == 403 and r.code == 1115
    assert r.json["msg"] == (f"quota exceeded: user {carol} may hold 2 whole cards; holds 2, "
                             "this asks 1 more")
    me = ok(as_(d, tc, "GET", "/api/v1/whoami"))
    assert me["usage"]["cards"] == 2 and me["usage"]["instances"] == 2
    held = [u for u, v in ok(as_(d, ADMIN, "GET", "/api/v1/resources/gpus"))["gpus"].items() if v]
    assert len(held) == 2
    # a patch past the quota is refused and changes nothing; stopping gives room back
    mine = [s["name"] for s in ok(as_(d, tc, "GET", "/api/v1/replicaSet"))["replicaSets"]]
    r = as_(d, tc, "PATCH", rs_path(mine[0]), {"gpuPatch": {"gpuCount": 2}})
    assert r.status == 403 and r.code == 1115, r.json
    assert len(ok(as_(d, tc, "GET", rs_path(mine[0])))["info"]["gpus"]) == 1
    ok(as_(d, tc, "PATCH", rs_path(mine[0], "/stop")))
    ok(as_(d, tc, "PATCH", rs_path(mine[1]), {"gpuPatch": {"gpuCount": 2}}))
    r = as_(d, tc, "PATCH", rs_path(mine[0], "/restart"))
    assert r.status == 403 and r.code == 1115, r.json


def test_instance_share_and_volume_quotas(pair):
    d, (carol, tc), _ = pair
    ok(as_(d, ADMIN, "PATCH", f"/api/v1/users/{carol}",
           {"quota": {"instances": 2, "shareMiB": 20480, "volumeBytes": "50MB"}}))
    a, b, c = (f"{PREFIX}s{i}{secrets.token_hex(2)}" for i in range(3))
    ok(as_(d, tc, "POST", "/api/v1/replicaSet", create_body(a, 1, gpuMemory="16GB")))
    r = as_(d, tc, "POST", "/api/v1/replicaSet", create_body(b, 1, gpuMemory="8GB"))
    assert r.code == 1115 and "MiB of GPU shares" in r.json["msg"], r.json
    # a share grown in place is held to the quota too, and nothing changes
    r = as_(d, tc, "PATCH", rs_path(a), {"gpuPatch": {"gpuMemory": "24GB"}})
    assert r.status == 403 and r.code == 1115, r.json
    held = ok(as_(d, tc, "GET", rs_path(a)))["info"]
    assert held["spec"]["gpuMemory"] == 16384 and held["version"] == 1, held
    dev = [x for x in ok(as_(d, ADMIN, "GET", "/api/v1/resources/gpus"))["devices"]
           if x["uuid"] == held["gpus"][0]][0]
    assert dev["allocatedMemoryMiB"] == 16384, dev
    assert ok(as_(d, tc, "PATCH", rs_path(a), {"gpuPatch": {"gpuMemory": "20GB"}}))["inPlace"]
    r = as_(d, tc, "PATCH", rs_path(a), {"gpuPatch": {"gpuMemory": "16GB"}})
    assert r.status == 200 and r.json["data"]["inPlace"], r.json
    ok(as_(d, tc, "POST", "/api/v1/replicaSet", create_body(b)))
    r = as_(d, tc, "POST", "/api/v1/replicaSet", create_body(c))
    assert r.code == 1115 and "2 instances" in r.json["msg"], r.json
    ok(as_(d, tc, "PATCH", rs_path(b, "/stop")))  # a stopped set is still an instance
    assert as_(d, tc, "POST", "/api/v1/replicaSet", create_body(c)).code == 1115
    v1, v2 = f"{PREFIX}x{secrets.token_hex(2)}", f"{PREFIX}y{secrets.token_hex(2)}"
    ok(as_(d, tc, "POST", "/api/v1/volumes", {"name": v1, "size": "30MB"}))
    r = as_(d, tc, "POST", "/api/v1/volumes", {"name": v2, "size": "30MB"})
    assert r.status == 403 and r.code == 1115 and "bytes of volumes" in r.json["msg"], r.json
    assert as_(d, ADMIN, "GET", f"/api/v1/volumes/{v2}").code == 1100
    r = as_(d, tc, "PATCH", f"/api/v1/volumes/{v1}/size", {"size": "60MB"})
    assert r.status == 403 and r.code == 1115, r.json
    ok(as_(d, tc, "PATCH", f"/api/v1/volumes/{v1}/size", {"size": "40MB"}))
    # admins are counted, not limited
    ok(as_(d, ADMIN, "POST", "/api/v1/replicaSet", create_body(c, 2)))


def test_defaults_apply_to_new_users(daemon):
    ok(as_(daemon, ADMIN, "PUT", "/api/v1/quotas/defaults", {"cards": 1, "instances": 3}))
    try:
        name = "hal" + secrets.token_hex(3)
        token = make_user(daemon, name)
        q = ok(as_(daemon, token, "GET", "/api/v1/whoami"))["quota"]
        assert q == {"cards": 1, "shareMiB": None, "instances": 3, "volumeBytes": None,
                     "cores": None, "maxPriority": 50}
        drop_user(daemon, name)
        assert ok(as_(daemon, ADMIN, "GET", "/api/v1/quotas/defaults"))["cards"] == 1
    finally:
        ok(as_(daemon, ADMIN, "PUT", "/api/v1/quotas/defaults", {}))


# --- accounting ------------------------------------------------------------------------


def card_seconds(d, token, user, name):
    u = ok(as_(d, token, "GET", f"/api/v1/usage?user={user}"))["users"]
    sets = [s for x in u for s in x["sets"] if s["name"] == name]
    return sum(s["cardSeconds"] for s in sets), sum(s["shareMiBSeconds"] for s in sets)


def test_card_seconds_follow_the_wall_clock_across_a_restart(tmp_path, tokens):
    d = start(tmp_path, tokens=tokens)
    try:
        user = "ivy" + secrets.token_hex(2)
        tok = make_user(d, user)
        name = f"{PREFIX}a{secrets.token_hex(2)}"
        t0 = time.monotonic()
        ok(as_(d, tok, "POST", "/api/v1/replicaSet", create_body(name, 2)))
        t1 = time.monotonic()
        time.sleep(3)
        t2 = time.monotonic()
        ok(as_(d, tok, "PATCH", rs_path(name), {"gpuPatch": {"gpuCount": 1}}))
        t3 = time.monotonic()
        time.sleep(2)
        t4 = time.monotonic()
        ok(as_(d, tok, "PATCH", rs_path(name, "/stop")))
        t5 = time.monotonic()
        # 2 cards from create to patch, then 1 card to the stop
        low = 2 * (t2 - t1) + 1 * (t4 - t3)
        high = 2 * (t3 - t0) + 1 * (t5 - t2)
        cs, _ = card_seconds(d, tok, user, name)
        assert low - 1 <= cs <= high + 1, (low, cs, high)
        # a stopped set adds nothing while time passes, and a restart of
        # gpuboxd keeps what was counted
        time.sleep(1)
        assert card_seconds(d, tok, user, name)[0] == pytest.approx(cs, abs=0.01)
        d.stop()
        d = start(tmp_path, tokens=tokens)
        assert card_seconds(d, ADMIN, user, name)[0] == pytest.approx(cs, abs=0.01)
        # a running set counts until now, also across a restart of gpuboxd
        share = f"{PREFIX}b{secrets.token_hex(2)}"
        s0 = time.monotonic()
        ok(as_(d, tok, "POST", "/api/v1/replicaSet", create_body(share, 1, gpuMemory="1GB")))
        s1 = time.monotonic()
        d.stop()
        time.sleep(1)
        d = start(tmp_path, tokens=tokens)
        time.sleep(1)
        s2 = time.monotonic()
        _, mib = card_seconds(d, ADMIN, user, share)
        s3 = time.monotonic()
        assert 1024 * (s2 - s1 - 1) <= mib <= 1024 * (s3 - s0 + 1), (mib, s2 - s1, s3 - s0)
        # a user reads only their own; the window cuts the intervals
        other = make_user(d, "jo" + secrets.token_hex(2))
        r = as_(d, other, "GET", f"/api/v1/usage?user={user}")
        assert r.status == 404 and r.code == 1117
        assert ok(as_(d, other, "GET", "/api/v1/usage"))["users"][0]["cardSeconds"] == 0
        now = int(time.time())
        u = ok(as_(d, ADMIN, "GET", f"/api/v1/usage?user={user}&from={now + 100}&to={now + 200}"))
        assert u["users"] == [] or u["users"][0]["cardSeconds"] == 0
        r = as_(d, ADMIN, "GET", "/api/v1/usage?from=yesterday")
        assert r.status == 400 and r.code == 1000
        status, metrics = metrics_text(d, ADMIN)
        assert status == 200
        line = [x for x in metrics.splitlines()
                if x.startswith("gpubox_user_card_seconds_total{") and f'user="{user}"' in x]
        assert len(line) == 1 and float(line[0].split()[-1]) >= cs - 0.01, line
    finally:
        d.token = ADMIN
        wipe(d, PREFIX)
        d.stop()


# --- records from before users ------------------------------------------------------------


def test_records_from_before_users_get_their_owner(tmp_path, tokens):
    d = start(tmp_path)
    name, vol = f"{PREFIX}m{secrets.token_hex(2)}", f"{PREFIX}n{secrets.token_hex(2)}"
    try:
        ok(as_(d, None, "POST", "/api/v1/volumes", {"name": vol, "size": "20MB"}))
        ok(as_(d, None, "POST", "/api/v1/replicaSet", create_body(name, 1)))
        assert ok(as_(d, None, "GET", rs_path(name)))["info"]["owner"] == "anonymous"
        me = ok(as_(d, None, "GET", "/api/v1/whoami"))
        assert (me["name"], me["role"], me["source"]) == ("anonymous", "admin", "none")
        assert as_(d, None, "GET", "/api/v1/users").status == 409
        d.stop()
        d = start(tmp_path, "--owner-of-unowned", "frank", tokens=tokens)
        assert ok(as_(d, FILEUSER, "GET", rs_path(name)))["info"]["owner"] == "frank"
        assert ok(as_(d, FILEUSER, "GET", f"/api/v1/volumes/{vol}"))["info"]["owner"] == "frank"
        me = ok(as_(d, FILEUSER, "GET", "/api/v1/whoami"))
        assert me["usage"]["cards"] == 1 and me["usage"]["instances"] == 1
        size = ok(as_(d, FILEUSER, "GET", f"/api/v1/volumes/{vol}"))["info"]["size"]
        assert me["usage"]["volumeBytes"] == size > 0
        # the other users see none of it
        other = make_user(d, "kim" + secrets.token_hex(2))
        assert as_(d, other, "GET", rs_path(name)).status == 404
    finally:
        d.token = ADMIN
        wipe(d, PREFIX)
        as_(d, ADMIN, "DELETE", f"/api/v1/volumes/{vol}")
        d.stop()
