"""The queue (issue 29; docs/queue.md): a create with "queue": true that
cannot be placed now answers 202 and waits as a set in state queued that
holds nothing, and starts by itself when a card frees; the order is
priority, then fair share, then submit time; a user cannot ask above
their maxPriority; DELETE cancels; queueTimeout drops; the owner's quota
is checked at the start; a kill -9 during a dispatch starts the request
once and loses nothing; backfill never touches the head's reservation
unless it ends before the head is due.

Each test has a server with two simulated cards (one with one card where
the order is checked), a token file with an admin, and users made
through the API.
"""
import http.server
import json
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, SANITIZER_MARKERS, Daemon
from rsutil import IMAGE, RUN_TAG, rs_path, wipe
from schema import request_schema, response_schema, validate
from secutil import as_, write_tokens

PREFIX = "e2qu" + RUN_TAG
PORTS = "64600-64649"
ADMIN = "adm-" + secrets.token_hex(20)


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


def body(name, gpus=1, **more):
    b = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": gpus,
         "cmd": ["sleep", "3600"]}
    b.update(more)
    return b


def start(tmp, cards=2, env=None, log="gpuboxd.log"):
    tokens = tmp / "tokens"
    if not tokens.exists():
        write_tokens(tokens, f"root:admin:{ADMIN}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                f"{cards}xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)],
               tmp / "data", tmp / log, env=env).start()
    d.token = ADMIN
    return d


@pytest.fixture
def two(tmp_path):
    d = start(tmp_path)
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture
def one(tmp_path):
    d = start(tmp_path, cards=1)
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


def make_user(d, name, quota=None):
    b = {"name": name, "role": "user"}
    if quota is not None:
        b["quota"] = quota
    return ok(as_(d, ADMIN, "POST", "/api/v1/users", b))["token"]


def post(d, token, b):
    return as_(d, token, "POST", "/api/v1/replicaSet", b)


def queued(d, token, b):
    r = post(d, token, b)
    assert r.status == 202 and r.code == 200, (r.status, r.json)
    data = r.json["data"]
    assert data["state"] == "queued" and data["name"] == b["replicaSetName"], data
    return data


def state(d, name):
    r = as_(d, ADMIN, "GET", rs_path(name))
    if r.status == 404:
        return None
    return ok(r)["info"]


def wait_state(d, name, want, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = state(d, name)
        if s and s["state"] == want:
            return s
        time.sleep(0.1)
    raise AssertionError(f"{name} did not become {want}: {state(d, name)}")


def scrape(d):
    conn = d.connection()
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
        r = conn.getresponse()
        text = r.read().decode()
        assert r.status == 200, text
        return text
    finally:
        conn.close()


def queue(d, token=ADMIN):
    return ok(as_(d, token, "GET", "/api/v1/queue"))


def test_queued_when_full_holds_nothing_then_starts_when_a_card_frees(two):
    d = two
    a, b = f"{PREFIX}a", f"{PREFIX}b"
    ok(post(d, ADMIN, body(a, 2)))
    # without queue: as before
    r = post(d, ADMIN, body(b))
    assert (r.status, r.code) == (409, 1013), r.json
    q = queued(d, ADMIN, body(b, queue=True))
    assert q["position"] == 1 and "GPU" in q["why"], q
    info = state(d, b)
    assert info["state"] == "queued" and info["status"] == "queued", info
    assert info["gpus"] == [] and info["ports"] == [] and info["queue"]["position"] == 1, info
    listed = {s["name"]: s for s in ok(as_(d, ADMIN, "GET", "/api/v1/replicaSet"))["replicaSets"]}
    assert listed[b]["state"] == "queued", listed[b]
    got = queue(d)
    assert got["length"] == 1 and got["queue"][0]["name"] == b, got
    assert got["queue"][0]["asks"]["gpuCount"] == 1 and got["queue"][0]["head"], got
    ok(as_(d, ADMIN, "PATCH", rs_path(a, "/stop")))
    s = wait_state(d, b, "running", timeout=10)
    assert len(s["gpus"]) == 1 and s["version"] == 1, s
    assert queue(d)["length"] == 0
    events = ok(as_(d, ADMIN, "GET", "/api/v1/events"))["events"]
    assert any(e["kind"] == "queue.start" and e["replicaSet"] == b for e in events), events
    metrics = scrape(d)
    assert "gpubox_queue_length 0" in metrics
    assert "gpubox_queue_wait_seconds_count 1" in metrics, metrics


def test_fits_now_is_an_ordinary_create(two):
    r = post(two, ADMIN, body(f"{PREFIX}n", queue=True))
    assert (r.status, r.code) == (200, 200), r.json
    assert r.json["data"]["version"] == 1


def test_priority_beats_fair_share_beats_submit_order(one):
    d = one
    tag = secrets.token_hex(3)
    heavy, light = f"hv{tag}", f"lt{tag}"
    th = make_user(d, heavy)
    tl = make_user(d, light)
    # heavy has used a card for a while: its fair-share usage is larger
    ok(post(d, th, body(f"{PREFIX}use")))
    time.sleep(2)
    ok(as_(d, th, "DELETE", rs_path(f"{PREFIX}use") + "?purge=true"))
    hold = f"{PREFIX}hold"
    ok(post(d, ADMIN, body(hold)))
    queued(d, th, body(f"{PREFIX}h1", queue=True))   # first, heavy user
    queued(d, tl, body(f"{PREFIX}l1", queue=True))   # second, light user
    queued(d, ADMIN, body(f"{PREFIX}p1", queue=True, priority=80))  # third, high priority
    got = queue(d)
    order = [e["name"] for e in got["queue"]]
    assert order == [f"{PREFIX}p1", f"{PREFIX}l1", f"{PREFIX}h1"], got
    usage = {e["owner"]: e["fairShareUsage"] for e in got["queue"]}
    assert usage[heavy] > usage[light] == 0, usage
    # a user sees their own entry and the others' positions, not their names
    mine = queue(d, tl)["queue"]
    assert [e.get("name") for e in mine] == [None, f"{PREFIX}l1", None], mine
    assert [e["position"] for e in mine] == [1, 2, 3]
    ok(as_(d, ADMIN, "DELETE", rs_path(hold)))
    wait_state(d, f"{PREFIX}p1", "running")
    assert state(d, f"{PREFIX}l1")["state"] == "queued"
    ok(as_(d, ADMIN, "DELETE", rs_path(f"{PREFIX}p1")))
    wait_state(d, f"{PREFIX}l1", "running")
    assert state(d, f"{PREFIX}h1")["state"] == "queued"


def test_max_priority_is_enforced(two):
    d = two
    name = f"mp{secrets.token_hex(3)}"
    tok = make_user(d, name)
    ok(post(d, ADMIN, body(f"{PREFIX}full", 2)))
    r = post(d, tok, body(f"{PREFIX}x", queue=True, priority=60))
    assert (r.status, r.code) == (403, 1170), r.json
    assert "maxPriority 50" in r.json["msg"], r.json
    assert state(d, f"{PREFIX}x") is None
    queued(d, tok, body(f"{PREFIX}y", queue=True, priority=50))
    ok(as_(d, ADMIN, "PATCH", f"/api/v1/users/{name}", {"quota": {"maxPriority": 70}}))
    queued(d, tok, body(f"{PREFIX}x", queue=True, priority=60))
    # admins ask any
    queued(d, ADMIN, body(f"{PREFIX}z", queue=True, priority=100))
    r = post(d, tok, body(f"{PREFIX}w", queue=True, priority=101))
    assert (r.status, r.code) == (400, 1000), r.json


def test_cancel_and_timeout(two):
    d = two
    ok(post(d, ADMIN, body(f"{PREFIX}full", 2)))
    c = f"{PREFIX}c"
    queued(d, ADMIN, body(c, queue=True))
    r = ok(as_(d, ADMIN, "DELETE", rs_path(c)))
    assert r["cancelled"] is True, r
    assert state(d, c) is None and queue(d)["length"] == 0
    t = f"{PREFIX}t"
    queued(d, ADMIN, body(t, queue=True, queueTimeout="2s"))
    s = wait_state(d, t, "deleted", timeout=10)
    assert s["queue"]["dropped"]["reason"] == "queueTimeout", s
    events = ok(as_(d, ADMIN, "GET", "/api/v1/events"))["events"]
    assert any(e["kind"] == "queue.timeout" and e["replicaSet"] == t for e in events), events
    # the name is free again
    queued(d, ADMIN, body(t, queue=True))


def test_quota_is_checked_at_start(two):
    d = two
    name = f"qt{secrets.token_hex(3)}"
    tok = make_user(d, name, quota={"cards": 1})
    mine = f"{PREFIX}mine"
    ok(post(d, tok, body(mine)))
    ok(post(d, ADMIN, body(f"{PREFIX}adm")))
    q = f"{PREFIX}q"
    queued(d, tok, body(q, queue=True))
    ok(as_(d, ADMIN, "DELETE", rs_path(f"{PREFIX}adm")))
    # a card is free now, but the quota does not allow a second one
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        s = state(d, q)
        if "quota" in s["queue"].get("why", ""):
            break
        time.sleep(0.2)
    assert s["state"] == "queued" and "quota" in s["queue"]["why"], s
    ok(as_(d, tok, "DELETE", rs_path(mine)))
    s = wait_state(d, q, "running")
    assert s["owner"] == name


@pytest.mark.parametrize("fault", ["create:record", "create:container-created"])
def test_kill_during_dispatch_starts_once_and_loses_nothing(tmp_path, fault):
    d = start(tmp_path)
    hold, w1, w2 = f"{PREFIX}hold", f"{PREFIX}w1", f"{PREFIX}w2"
    ok(post(d, ADMIN, body(hold, 2)))
    queued(d, ADMIN, body(w1, queue=True, priority=60))
    queued(d, ADMIN, body(w2, queue=True))
    d.proc.kill()  # kill -9 with requests queued
    d.proc.wait()
    d.proc.stdout.close()
    d.log_file.close()
    env = dict(os.environ)
    env["GPUBOX_FAULT"] = fault
    d = start(tmp_path, env=env, log="gpuboxd1.log")
    assert state(d, w1)["state"] == "queued" and state(d, w2)["state"] == "queued"
    # freeing the cards makes the dispatcher start w1: it dies at the fault
    try:
        as_(d, ADMIN, "PATCH", rs_path(hold, "/stop"))
    except OSError:
        pass  # it may die before the answer is written
    assert d.proc.wait(30) == 99, d.log()
    d.proc.stdout.close()
    d.log_file.close()
    d = start(tmp_path, log="gpuboxd2.log")
    try:
        s1 = wait_state(d, w1, "running")
        s2 = wait_state(d, w2, "running")
        assert (s1["version"], s2["version"]) == (1, 1), (s1, s2)
        assert queue(d)["length"] == 0
        history = ok(as_(d, ADMIN, "GET", rs_path(w1, "/history")))["history"]
        assert [h["version"] for h in history] == [1], history
    finally:
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()


def test_backfill_never_delays_the_head(two):
    d = two
    ok(post(d, ADMIN, body(f"{PREFIX}run", 1, maxDuration="1h")))
    head, long_, short = f"{PREFIX}head", f"{PREFIX}long", f"{PREFIX}short"
    queued(d, ADMIN, body(head, 2, queue=True, priority=60))
    # submitted before short, same priority: without a maxDuration it could
    # delay the head, so it waits on the reserved card
    queued(d, ADMIN, body(long_, 1, queue=True))
    s = state(d, long_)
    assert s["state"] == "queued" and "reserved for " + head in s["queue"]["why"], s
    got = queue(d)
    assert got["queue"][0]["name"] == head and got["queue"][0]["head"], got
    assert got["queue"][0]["reservation"]["cards"] == 1, got
    assert "dueInSeconds" in got["queue"][0]["reservation"], got
    r = post(d, ADMIN, body(short, 1, queue=True, maxDuration="10m"))
    # short ends before the head is due (the running set's maxDuration):
    # it backfills onto the reserved card at once, or on the next pass
    assert r.status in (200, 202), r.json
    wait_state(d, short, "running", timeout=10)
    assert state(d, long_)["state"] == "queued"
    assert state(d, head)["state"] == "queued"
    assert [e["name"] for e in queue(d)["queue"]] == [head, long_]


def test_a_stopped_sets_restart_waits_in_the_queue(two):
    d = two
    s, other = f"{PREFIX}s", f"{PREFIX}o"
    ok(post(d, ADMIN, body(s, 2)))
    ok(as_(d, ADMIN, "POST", rs_path(s, "/execute"), {"cmd": ["sh", "-c", "echo kept > /kept"]}))
    ok(as_(d, ADMIN, "PATCH", rs_path(s, "/stop")))
    ok(post(d, ADMIN, body(other, 1)))
    r = as_(d, ADMIN, "PATCH", rs_path(s, "/restart"))
    assert (r.status, r.code) == (409, 1013), r.json
    r = as_(d, ADMIN, "PATCH", rs_path(s, "/restart"), {"queue": True})
    assert (r.status, r.code) == (202, 200), r.json
    assert r.json["data"]["state"] == "queued", r.json
    info = state(d, s)
    assert info["state"] == "queued" and info["gpus"] == [] and info["queue"]["restart"], info
    ok(as_(d, ADMIN, "DELETE", rs_path(other)))
    info = wait_state(d, s, "running")
    assert len(info["gpus"]) == 2, info
    out = ok(as_(d, ADMIN, "POST", rs_path(s, "/execute"), {"cmd": ["cat", "/kept"]}))
    assert out["stdout"].strip() == "kept", out


def test_the_older_containers_route_queues_too(two):
    d = two
    ok(post(d, ADMIN, body(f"{PREFIX}full", 2)))
    name = f"{PREFIX}old"
    r = as_(d, ADMIN, "POST", "/api/v1/containers",
            {"imageName": IMAGE, "containerName": name, "gpuCount": 1, "cmd": ["sleep", "3600"],
             "queue": True})
    assert (r.status, r.code) == (202, 200), r.json
    assert r.json["data"]["state"] == "queued"
    ok(as_(d, ADMIN, "DELETE", rs_path(f"{PREFIX}full")))
    wait_state(d, name, "running")


def test_webhook_is_told_when_a_queued_set_starts(tmp_path):
    got = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            got.append((self.path, self.headers.get("Content-Type"), json.loads(self.rfile.read(n))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tokens = write_tokens(tmp_path / "tokens", f"root:admin:{ADMIN}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                "--simulate-gpus", "1xA100-80GB", "--port-range", PORTS, "--token-file",
                str(tokens), "--queue-webhook", f"http://127.0.0.1:{srv.server_port}/hook"],
               tmp_path / "data", tmp_path / "gpuboxd.log").start()
    d.token = ADMIN
    try:
        hold, w = f"{PREFIX}hold", f"{PREFIX}hooked"
        ok(post(d, ADMIN, body(hold)))
        queued(d, ADMIN, body(w, queue=True))
        ok(as_(d, ADMIN, "DELETE", rs_path(hold)))
        wait_state(d, w, "running")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) == 1, got
        path, ctype, note = got[0]
        assert path == "/hook" and ctype == "application/json", got
        assert note["event"] == "queue.start" and note["name"] == w and note["owner"] == "root", note
        assert note["containerName"] == f"{w}-1" and note["version"] == 1, note
    finally:
        srv.shutdown()
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()


def test_queue_answers_conform_to_the_openapi_document(two):
    d = two
    doc = d.get("/openapi.json").json

    def check(pattern, method, r):
        errors = validate(r.json, response_schema(doc, pattern, method, r.status), doc)
        assert not errors, f"{method} {pattern} answered {r.status} {r.json}:\n" + "\n".join(errors)

    full, w = f"{PREFIX}full", f"{PREFIX}oa"
    b = body(w, queue=True, queueTimeout="1h", priority=40)
    assert validate(b, request_schema(doc, "/api/v1/replicaSet", "post"), doc) == []
    ok(post(d, ADMIN, body(full, 2)))
    r = post(d, ADMIN, b)
    assert r.status == 202
    check("/api/v1/replicaSet", "POST", r)
    check("/api/v1/replicaSet/{name}", "GET", as_(d, ADMIN, "GET", rs_path(w)))
    check("/api/v1/replicaSet", "GET", as_(d, ADMIN, "GET", "/api/v1/replicaSet"))
    check("/api/v1/queue", "GET", as_(d, ADMIN, "GET", "/api/v1/queue"))
    r = post(d, ADMIN, body(f"{PREFIX}hi", queue=True, priority=101))
    check("/api/v1/replicaSet", "POST", r)
    check("/api/v1/replicaSet/{name}", "DELETE", as_(d, ADMIN, "DELETE", rs_path(w)))


# ---- the CLI ----

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))


def gpubox(d, *args, wait=True):
    e = dict(os.environ, GPUBOX_HOST=d.url, GPUBOX_TOKEN=ADMIN)
    p = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    if not wait:
        return p
    out, err = p.communicate(timeout=60)
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    return p.returncode, out, err


def test_cli_run_queue_waits_showing_position_then_runs(two):
    d = two
    full, w, det = f"{PREFIX}full", f"{PREFIX}w", f"{PREFIX}det"
    ok(post(d, ADMIN, body(full, 2)))
    rc, out, err = gpubox(d, "run", det, "--image", IMAGE, "--gpus", "1", "--queue", "--detach",
                          "--", "sleep", "3600")
    assert rc == 0 and f"{det}: queued, position 1" in out, (rc, out, err)
    p = gpubox(d, "run", w, "--image", IMAGE, "--gpus", "1", "--queue", "--priority", "70",
               "--", "sleep", "3600", wait=False)
    # it waits, showing its place; the queue lists both in order
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (state(d, w) or {}).get("state") != "queued":
        time.sleep(0.1)
    assert p.poll() is None
    rc, out, err = gpubox(d, "queue")
    assert rc == 0, (out, err)
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["POS", "NAME", "OWNER", "PRIORITY"], out
    assert lines[1].split()[:2] == ["1*", w] and lines[2].split()[:2] == ["2", det], out
    ok(as_(d, ADMIN, "DELETE", rs_path(full)))
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert f"{w}: queued, position 1" in err, err
    assert f"{w}: running as {w}-1" in out, out
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err


def test_a_restarts_priority_is_checked_against_max_priority(two):
    """A priority on a restart is the caller's to ask up to their quota's
    maxPriority, as on a create: with queue, with move and queue (which may
    start at once, no wait at all), and alone."""
    d = two
    name = f"rp{secrets.token_hex(3)}"
    tok = make_user(d, name)
    s = f"{PREFIX}rp"
    ok(post(d, tok, body(s, 1)))
    ok(as_(d, tok, "PATCH", rs_path(s, "/stop")))
    for extra in ({"queue": True}, {"move": True, "queue": True}, {}):
        r = as_(d, tok, "PATCH", rs_path(s, "/restart"), {"priority": 60, **extra})
        assert (r.status, r.code) == (403, 1170), (extra, r.json)
        assert "maxPriority 50" in r.json["msg"], r.json
        assert state(d, s)["state"] == "stopped", extra
    ok(as_(d, tok, "PATCH", rs_path(s, "/restart"), {"priority": 50, "move": True, "queue": True}))
    assert state(d, s)["state"] == "running"
    # admins ask any
    ok(as_(d, ADMIN, "PATCH", rs_path(s, "/stop")))
    ok(as_(d, ADMIN, "PATCH", rs_path(s, "/restart"), {"priority": 90, "queue": True}))


def test_delete_of_the_queue_entry_cancels_a_queued_create(two):
    """DELETE /api/v1/queue/{name}: a queued create is cancelled as DELETE
    of the set cancels it; a set that does not wait is 404 (1100)."""
    d = two
    full, w = f"{PREFIX}full", f"{PREFIX}qc"
    ok(post(d, ADMIN, body(full, 2)))
    queued(d, ADMIN, body(w, queue=True))
    r = ok(as_(d, ADMIN, "DELETE", f"/api/v1/queue/{w}"))
    assert r["cancelled"] is True, r
    assert state(d, w) is None and queue(d)["length"] == 0
    r = as_(d, ADMIN, "DELETE", f"/api/v1/queue/{full}")
    assert (r.status, r.code) == (404, 1100), r.json
    assert state(d, full)["state"] == "running"
    # the nodes' tell route is not a client's, with a token or without
    for token in (ADMIN, None):
        r = as_(d, token, "POST", "/api/v1/internal/queue/tell", {"what": "freed"})
        assert (r.status, r.code) == (403, 1109), r.json
