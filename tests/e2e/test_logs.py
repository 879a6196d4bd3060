"""Logs end to end: GET /api/v1/replicaSet/{name}/logs and `gpubox logs`
against a real gpuboxd (8 simulated A100s, ports 64800-64849) and the real
dockerd, with sets whose commands print known lines.

Covered: the lines of the current version (stdout and stderr: gpubox's
containers have a TTY, so both come as stdout), tail, since (a duration,
RFC 3339, unix seconds), timestamps; follow, which sees a line printed
after it began and ends, with its end object, when the container stops, and
whose client may hang up without harm to the daemon; versions=all after a
patch, showing version 1's lines (kept when its container was removed)
labeled by version; a set deleted keeps its lines readable, and a purge
forgets them; bad parameters (400, code 1000) and an unknown set (404, code
1100); `gpubox logs` and `gpubox logs -f`.
"""
import datetime
import json
import os
import re
import subprocess
import time
import urllib.parse

from conftest import BUILD_DIR, SANITIZER_MARKERS
from pathlib import Path
from rsutil import (RUN_TAG, call, create_ok, delete, execute_ok, lifecycle, module_daemon,
                    rs_path)

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = "e2logs" + RUN_TAG
PORT_START, PORT_END = 64800, 64849
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def sh(script):
    return ["sh", "-c", script]


def logs(d, name, **query):
    q = urllib.parse.urlencode(query)
    return call(d, "GET", rs_path(name, "/logs" + ("?" + q if q else "")))


def logs_ok(d, name, **query):
    r = logs(d, name, **query)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def texts(data):
    return [line["text"] for line in data["lines"]]


def wait_lines(d, name, last, timeout=20, **query):
    """The logs once their last line is `last` (the command has printed)."""
    deadline = time.monotonic() + timeout
    while True:
        data = logs_ok(d, name, **query)
        if data["lines"] and data["lines"][-1]["text"] == last:
            return data
        assert time.monotonic() < deadline, data
        time.sleep(0.2)


def follow(d, name, **query):
    """A follow request; returns the open connection and its response."""
    q = urllib.parse.urlencode({"follow": "true", **query})
    conn = d.connection(timeout=30)
    conn.request("GET", rs_path(name, "/logs?" + q))
    r = conn.getresponse()
    return conn, r


def read_obj(r):
    line = r.readline()
    assert line, "the stream ended early"
    return json.loads(line)


def test_lines_tail_since_timestamps(d):
    name = PREFIX + "_a"
    create_ok(d, name, cmd=sh("echo one; echo two >&2; echo three; sleep 3600"))
    data = wait_lines(d, name, "three")
    assert texts(data) == ["one", "two", "three"]
    assert {line["version"] for line in data["lines"]} == {1}
    # the container has a TTY: stderr is merged into stdout
    assert {line["stream"] for line in data["lines"]} == {"stdout"}
    assert "time" not in data["lines"][0]
    assert data["versions"] == [{"version": 1, "containerName": name + "-1", "current": True,
                                 "source": "container", "status": "running"}]
    assert data["truncated"] is False

    assert texts(logs_ok(d, name, tail=1)) == ["three"]
    assert texts(logs_ok(d, name, tail=0)) == []
    assert texts(logs_ok(d, name, tail="all")) == ["one", "two", "three"]

    stamped = logs_ok(d, name, timestamps="true")
    assert all(STAMP.match(line["time"]) for line in stamped["lines"]), stamped

    assert texts(logs_ok(d, name, since="1h")) == ["one", "two", "three"]
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    assert texts(logs_ok(d, name, since=later.strftime("%Y-%m-%dT%H:%M:%SZ"))) == []
    assert texts(logs_ok(d, name, since=str(int(time.time()) + 3600))) == []
    assert texts(logs_ok(d, name, since=str(int(time.time()) - 3600))) == ["one", "two", "three"]
    assert texts(logs_ok(d, name, since="2000-01-01T00:00:00.5+02:00")) == ["one", "two", "three"]


def test_follow_sees_new_lines_and_ends_when_the_container_stops(d):
    name = PREFIX + "_f"
    create_ok(d, name, cmd=sh("echo before; while [ ! -e /tmp/go ]; do sleep 0.2; done; "
                              "echo after; sleep 3600"))
    wait_lines(d, name, "before")
    conn, r = follow(d, name, timestamps="true")
    try:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("application/x-ndjson")
        head = read_obj(r)
        assert head["name"] == name and head["versions"][0]["source"] == "container"
        first = read_obj(r)
        assert first["text"] == "before" and first["version"] == 1 and STAMP.match(first["time"])
        execute_ok(d, name, ["touch", "/tmp/go"])
        assert read_obj(r)["text"] == "after"
        # the daemon answers others meanwhile
        assert logs_ok(d, name, tail=1)["lines"][0]["text"] == "after"
        assert lifecycle(d, name, "stop").status == 200
        end = read_obj(r)
        assert end == {"end": True, "reason": "the container is not running"}
        assert r.readline() == b""
    finally:
        conn.close()


def test_a_follower_that_hangs_up_is_let_go(d, daemon):
    name = PREFIX + "_h"
    create_ok(d, name, cmd=sh("echo hello; sleep 3600"))
    wait_lines(d, name, "hello")
    for _ in range(3):
        conn, r = follow(d, name)
        assert read_obj(r)["name"] == name
        assert read_obj(r)["text"] == "hello"
        conn.close()
    log = daemon.wait_log("aborted")
    assert re.search(r"GET /api/v1/replicaSet/%s/logs aborted" % name, log), log
    # nothing is stuck: the daemon still answers, and a stop is prompt
    t = time.monotonic()
    assert lifecycle(d, name, "stop").status == 200
    assert time.monotonic() - t < 30


def test_versions_after_a_patch(d):
    name = PREFIX + "_v"
    create_ok(d, name, cmd=sh('echo "hello $X"; sleep 3600'), env=["X=1"])
    wait_lines(d, name, "hello 1")
    r = call(d, "PATCH", rs_path(name), {"envPatch": ["X=2"]})
    assert r.status == 200 and r.data["version"] == 2, r.json
    data = wait_lines(d, name, "hello 2")
    assert [(line["version"], line["text"]) for line in data["lines"]] == [(2, "hello 2")]

    every = logs_ok(d, name, versions="all")
    assert [(line["version"], line["text"]) for line in every["lines"]] == [
        (1, "hello 1"), (2, "hello 2")]
    assert [(v["version"], v["source"]) for v in every["versions"]] == [
        (1, "kept"), (2, "container")]
    assert logs_ok(d, name, versions=2)["lines"] == every["lines"]
    assert texts(logs_ok(d, name, versions="all", tail=1)) == ["hello 2"]
    # a kept version's lines carry their times and filter by them
    stamped = logs_ok(d, name, versions="all", timestamps="true")
    assert all(STAMP.match(line["time"]) for line in stamped["lines"])
    assert texts(logs_ok(d, name, versions="all", since=str(int(time.time()) + 3600))) == []

    # following all versions: version 1's lines first, then the live one
    conn, r = follow(d, name, versions="all")
    try:
        read_obj(r)
        assert [read_obj(r)["text"], read_obj(r)["text"]] == ["hello 1", "hello 2"]
    finally:
        conn.close()

    # a deleted set's lines stay readable; a purge forgets them
    assert delete(d, name).status == 200
    gone = logs_ok(d, name, versions="all")
    assert texts(gone) == ["hello 1", "hello 2"]
    assert {v["source"] for v in gone["versions"]} == {"kept"}
    assert delete(d, name, purge=True).status == 200
    assert logs(d, name).status == 404


def test_bad_parameters_and_unknown_sets(d):
    name = PREFIX + "_b"
    create_ok(d, name, cmd=sh("echo x; sleep 3600"))
    for query in ({"tail": "-1"}, {"tail": "x"}, {"tail": ""}, {"since": "bogus"},
                  {"since": "10 minutes"}, {"since": "2026-13-01T00:00:00Z"},
                  {"timestamps": "yes"}, {"follow": "maybe"}, {"versions": "0"},
                  {"versions": "many"}, {"tail": "99999999"}):
        r = logs(d, name, **query)
        assert r.status == 400 and r.code == 1000, (query, r.json)
        key = next(iter(query))
        assert key in r.msg, (query, r.msg)
    r = logs(d, PREFIX + "_nope")
    assert r.status == 404 and r.code == 1100, r.json
    r = logs(d, PREFIX + "_nope", follow="true")
    assert r.status == 404 and r.code == 1100, r.json
    r = call(d, "GET", "/api/v1/replicaSet/bad-name/logs")
    assert r.status == 400, r.json


def gpubox(d, *args, **kw):
    e = dict(os.environ)
    e.pop("GPUBOX_TOKEN", None)
    e["GPUBOX_HOST"] = d.url
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, env=e, timeout=60,
                          **kw)


def test_cli_logs(d):
    name = PREFIX + "_c"
    create_ok(d, name, cmd=sh("echo one; echo two >&2; echo three; sleep 3600"))
    wait_lines(d, name, "three")
    p = gpubox(d, "logs", name)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "one\ntwo\nthree\n"
    p = gpubox(d, "logs", name, "--tail", "1", "-t")
    assert p.returncode == 0, p.stderr
    stamp, text = p.stdout.rstrip("\n").split(" ", 1)
    assert STAMP.match(stamp) and text == "three"
    p = gpubox(d, "logs", name, "--all-versions", "--since", "1h")
    assert p.stdout == "[v1] one\n[v1] two\n[v1] three\n", p.stdout
    p = gpubox(d, "--json", "logs", name, "--tail", "1")
    assert p.returncode == 0 and json.loads(p.stdout)["lines"][0]["text"] == "three"
    p = gpubox(d, "logs", name, "--tail", "lots")
    assert p.returncode == 2 and "--tail" in p.stderr
    p = gpubox(d, "logs", PREFIX + "_nope")
    assert p.returncode == 3 and "no replica set" in p.stderr
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr


def test_cli_logs_follow(d):
    name = PREFIX + "_g"
    create_ok(d, name, cmd=sh("echo first; while [ ! -e /tmp/go ]; do sleep 0.2; done; "
                              "echo second; sleep 3600"))
    wait_lines(d, name, "first")
    e = dict(os.environ)
    e.pop("GPUBOX_TOKEN", None)
    e["GPUBOX_HOST"] = d.url
    p = subprocess.Popen([str(CLI), "logs", "-f", name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    try:
        assert p.stdout.readline() == "first\n"
        execute_ok(d, name, ["touch", "/tmp/go"])
        assert p.stdout.readline() == "second\n"
        assert lifecycle(d, name, "stop").status == 200
        assert p.wait(timeout=30) == 0
        assert p.stdout.read() == ""
        err = p.stderr.read()
        for marker in SANITIZER_MARKERS:
            assert marker not in err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
