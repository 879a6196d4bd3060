"""Quota refusals hold nothing (issue 26, item 4; docs/users.md): a burst
of creates by one user past their quota, with another user's create at
the same moment, on a server with two cards. Every refusal of the
over-quota user is 1115 naming the quota (none 1013: no refused create
held a card, even for a moment), and the other user gets the free card.

The burst is repeated over several rounds, each released by one barrier,
so that a refused create holding a card for a moment shows up reliably.
"""
import http.client
import json
import os
import secrets
import sqlite3
import threading

import pytest

from conftest import Daemon
from rsutil import IMAGE, RUN_TAG, rs_path, wipe
from secutil import as_, write_tokens

PREFIX = "e2qb" + RUN_TAG
PORTS = "64550-64599"
ADMIN = "adm-" + secrets.token_hex(20)
ROUNDS = 4
BURST = 8


def ok(r):
    assert r.status == 200 and r.code == 200, r.json
    return r.json["data"]


def create_body(name, gpus=1):
    return {"imageName": IMAGE, "replicaSetName": name, "gpuCount": gpus,
            "cmd": ["sleep", "3600"]}


def race(calls):
    """Run every callable at once (released by one barrier); their results
    in order."""
    results = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i, fn):
        barrier.wait()
        try:
            results[i] = fn()
        except Exception as e:  # noqa: BLE001 - reported by the caller's assert
            results[i] = e

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a request did not come back within 120s"
    for r in results:
        assert not isinstance(r, Exception), r
    return results


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quotaburst")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


def make_user(d, name, quota=None):
    body = {"name": name, "role": "user"}
    if quota is not None:
        body["quota"] = quota
    return ok(as_(d, ADMIN, "POST", "/api/v1/users", body))["token"]


def purge_all(d):
    for s in ok(as_(d, ADMIN, "GET", "/api/v1/replicaSet?all=true"))["replicaSets"]:
        ok(as_(d, ADMIN, "DELETE", rs_path(s["name"]) + "?purge=true"))


def test_over_quota_burst_is_refused_1115_and_another_users_create_gets_the_free_card(daemon):
    d = daemon
    tag = secrets.token_hex(3)
    bob, alice = f"bob{tag}", f"alice{tag}"
    tb = make_user(d, bob, quota={"cards": 1})
    ta = make_user(d, alice)
    want_msg = f"quota exceeded: user {bob} may hold 1 whole cards; holds 1, this asks 1 more"
    for rnd in range(ROUNDS):
        names = [f"{PREFIX}b{rnd}x{i}" for i in range(BURST)]
        calls = [lambda n=n: as_(d, tb, "POST", "/api/v1/replicaSet", create_body(n))
                 for n in names]
        calls.insert(BURST // 2, lambda: as_(d, ta, "POST", "/api/v1/replicaSet",
                                             create_body(f"{PREFIX}a{rnd}")))
        rs = race(calls)
        ra = rs.pop(BURST // 2)
        assert ra.status == 200 and ra.code == 200, (rnd, ra.json)
        made = [r for r in rs if r.code == 200]
        assert len(made) == 1, (rnd, [r.json for r in rs])
        refused = [(r.status, r.code, r.json.get("msg")) for r in rs if r.code != 200]
        assert refused == [(403, 1115, want_msg)] * (BURST - 1), (rnd, refused)
        # what bob holds is what the quota allows, counted once
        me = ok(as_(d, tb, "GET", "/api/v1/whoami"))
        assert (me["usage"]["cards"], me["usage"]["instances"]) == (1, 1), me
        held = [u for u, v in ok(as_(d, ADMIN, "GET", "/api/v1/resources/gpus"))["gpus"].items()
                if v]
        assert len(held) == 2
        purge_all(d)
        me = ok(as_(d, tb, "GET", "/api/v1/whoami"))
        assert (me["usage"]["cards"], me["usage"]["instances"]) == (0, 0), me
    # card-seconds come only from what was made: one set of bob's per round
    users = ok(as_(d, ADMIN, "GET", f"/api/v1/usage?user={bob}"))["users"]
    sets = {s["name"] for u in users for s in u["sets"]}
    assert sets == {f"{PREFIX}b{rnd}x{i}" for rnd in range(ROUNDS) for i in range(BURST)} & sets
    assert len(sets) == ROUNDS, users


def test_a_reservation_a_crash_left_is_gone_at_the_next_start(tmp_path):
    """gpuboxd dies right after a create reserved its owner's quota
    (GPUBOX_FAULT=quota.create.reserved), before it took a card: the store
    keeps the reservation, and the next start's ledger sync removes it, so
    the quota is whole again."""
    tokens = write_tokens(tmp_path / "tokens", f"root:admin:{ADMIN}\n")
    args = ["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"), "--simulate-gpus",
            "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)]
    env = dict(os.environ)
    env["GPUBOX_FAULT"] = "quota.create.reserved"
    d = Daemon(args, tmp_path / "data", tmp_path / "gpuboxd0.log", env=env).start()
    bob = "bob" + secrets.token_hex(3)
    tb = make_user(d, bob, quota={"cards": 1})
    try:
        as_(d, tb, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}c1"))
    except (OSError, http.client.HTTPException):
        pass
    assert d.proc.wait(30) == 99
    d.proc.stdout.close()
    d.log_file.close()
    db_path = tmp_path / "data" / "state.db"
    if db_path.exists():  # the sqlite store (not --store-backend etcd): the reservation is there
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            ledgers = [json.loads(v) for k, v in db.execute("SELECT key, value FROM kv")
                       if "ledger" in k and bob in k]
        finally:
            db.close()
        assert [lj["sets"][f"{PREFIX}c1"].get("reserved") for lj in ledgers] == [True], ledgers
    env.pop("GPUBOX_FAULT")
    d = Daemon(args, tmp_path / "data", tmp_path / "gpuboxd1.log", env=env).start()
    d.token = ADMIN
    try:
        me = ok(as_(d, tb, "GET", "/api/v1/whoami"))
        assert (me["usage"]["cards"], me["usage"]["instances"]) == (0, 0), me
        assert ok(as_(d, tb, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}c2")))
        r = as_(d, tb, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}c3"))
        assert (r.status, r.code) == (403, 1115), r.json
    finally:
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()
