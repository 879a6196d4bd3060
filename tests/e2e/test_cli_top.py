"""gpubox top, events, gpu healthy and the automatic-stop options, end to
end: the built CLI ($GPUBOX_CLI, default build/test/gpubox) against a real
gpuboxd with two simulated T4s sampling usage every 0.2 s (ports
64500-64519), and the real dockerd.

Covered: `top --once` shows both cards, utilization 0, health ok, without
escape codes; a pipe gets one frame without --once too; `--iterations N`
prints N frames apart by a blank line (on a terminal: each after the
escape codes that clear it); `--json` prints the reading's data; an
instance holding a share gets its row; a gpuboxd started with
--usage-interval 0 shows "-" and says usage sampling is off; `events`
prints its table; `gpu healthy` of an unknown card exits 3; `run` and
`scale` send --idle-stop and --max-duration, and `inspect` shows them.
"""
import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, SANITIZER_MARKERS, Daemon
from rsutil import IMAGE, RUN_TAG, wipe

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = "e2top" + RUN_TAG
PORT_RANGE = "64500-64519"
CLEAR = "\033[H\033[2J"
CARD_HEADERS = ("NODE", "INDEX", "MODEL", "MEM USED/TOTAL", "UTIL %", "FOREIGN", "TENANTS",
                "HEALTH")
INSTANCE_HEADERS = ("NAME", "NODE", "CARD", "MEM USED/SHARE", "UTIL %", "FLAG")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp(PREFIX)
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xT4-16GB", "--usage-interval", "0.2", "--port-range", PORT_RANGE],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture
def d(daemon):
    yield daemon
    wipe(daemon, PREFIX)


def gpubox(d, *args, timeout=60):
    """Run the CLI against d; the sanitizer build must stay quiet."""
    env = dict(os.environ)
    env.pop("GPUBOX_TOKEN", None)
    env["GPUBOX_HOST"] = d.url
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(d, *args, **kw):
    p = gpubox(d, *args, **kw)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def sampled(d, timeout=15):
    """The devices once every one has a usage reading."""
    deadline = time.monotonic() + timeout
    while True:
        devices = d.get("/api/v1/resources/gpus").data["devices"]
        if devices and all(dev.get("usage") for dev in devices):
            return devices
        assert time.monotonic() < deadline, f"no usage reading after {timeout}s: {devices}"
        time.sleep(0.1)


def table(lines, headers):
    """An aligned table whose header cells may hold spaces ("UTIL %"):
    rows as {HEADER: cell}, the columns cut where the headers start."""
    head = lines[0]
    found = sorted((m.start(1), h) for h in headers
                   for m in [re.search(r"(?:^|  )(" + re.escape(h) + r")(?:  |$)", head)] if m)
    rows = []
    for line in lines[1:]:
        rows.append({h: line[s:(found[k + 1][0] if k + 1 < len(found) else None)].strip()
                     for k, (s, h) in enumerate(found)})
    return rows


def frame_parts(frame):
    """(header line, card rows, instance rows or None) of one frame."""
    blocks = frame.strip("\n").split("\n\n")
    assert len(blocks) == 3, frame
    header = blocks[0]
    cards = table(blocks[1].split("\n"), CARD_HEADERS)
    lines = blocks[2].split("\n")
    instances = None if lines[0].startswith("(no instances") else table(lines, INSTANCE_HEADERS)
    return header, cards, instances


def test_top_once_shows_both_cards(d):
    devices = sampled(d)
    out = ok(d, "top", "--once").stdout
    assert CLEAR not in out and "\033" not in out
    header, cards, instances = frame_parts(out)
    assert header.startswith("gpubox top  ") and "2 cards, 0 unhealthy" in header, header
    assert "sampling is off" not in header
    assert [c["INDEX"] for c in cards] == ["0", "1"], cards
    for card in cards:
        assert "NODE" not in card
        assert card["UTIL %"] == "0", card
        assert card["HEALTH"] == "ok", card
        assert card["MEM USED/TOTAL"].endswith("/16GB"), card
        assert card["TENANTS"] == "0", card
        assert "T4" in card["MODEL"], card
    assert instances is None
    assert len(devices) == 2
    # Into a pipe, `top` alone is one frame too.
    out = ok(d, "top").stdout
    assert out.count("gpubox top  ") == 1 and "\033" not in out


def test_iterations_prints_frames(d):
    sampled(d)
    p = ok(d, "top", "--iterations", "2", "--interval", "0.2")
    out = p.stdout
    assert "\033" not in out
    assert out.count("gpubox top  ") == 2, out
    first, second = out.split("\n\ngpubox top  ")
    frame_parts(first)
    frame_parts("gpubox top  " + second)


def test_top_on_a_terminal_clears_each_frame(d):
    sampled(d)
    env = dict(os.environ, GPUBOX_HOST=d.url)
    env.pop("GPUBOX_TOKEN", None)
    main, sub = pty.openpty()
    proc = subprocess.Popen([str(CLI), "top", "--iterations", "2", "--interval", "0.2"],
                            stdout=sub, stderr=subprocess.PIPE, env=env)
    os.close(sub)
    buf = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    os.close(main)
    assert proc.wait(10) == 0, proc.stderr.read()
    proc.stderr.close()
    text = buf.decode(errors="replace")
    assert text.count(CLEAR) == 2, repr(text)
    assert text.startswith(CLEAR)
    # --once on a terminal: one frame, no escape codes.
    main, sub = pty.openpty()
    proc = subprocess.Popen([str(CLI), "top", "--once"], stdout=sub, env=env)
    os.close(sub)
    assert proc.wait(30) == 0
    buf = b""
    while select.select([main], [], [], 0.5)[0]:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    os.close(main)
    assert b"\033" not in buf and buf.count(b"gpubox top  ") == 1, buf


def test_top_json_is_the_reading(d):
    sampled(d)
    data = json.loads(ok(d, "--json", "top", "--iterations", "3").stdout)
    assert [dev["uuid"] for dev in data["devices"]] == \
        [dev["uuid"] for dev in d.get("/api/v1/resources/gpus").data["devices"]]
    assert all(dev["usage"] is not None for dev in data["devices"])


def test_instance_row(d):
    sampled(d)
    name = PREFIX + "_share"
    ok(d, "run", name, "--image", IMAGE, "--gpu-memory", "4GB", "--", "sleep", "3600")
    deadline = time.monotonic() + 15
    while True:
        _, cards, instances = frame_parts(ok(d, "top", "--once").stdout)
        if instances and sum(int(c["TENANTS"]) for c in cards) == 1:
            break
        assert time.monotonic() < deadline, instances
        time.sleep(0.2)
    assert [i["NAME"] for i in instances] == [name], instances
    row = instances[0]
    assert row["CARD"] in ("0", "1") and row["MEM USED/SHARE"].endswith("/4GB"), row
    assert "FLAG" not in row  # nothing is over its share


def test_sampling_off(start_daemon):
    off = start_daemon("--simulate-gpus", "2xT4-16GB", "--usage-interval", "0",
                       "--port-range", "64520-64524")
    out = ok(off, "top", "--once").stdout
    header, cards, _ = frame_parts(out)
    assert "(usage sampling is off)" in header, header
    assert len(cards) == 2
    for card in cards:
        assert card["UTIL %"] == "-" and card["FOREIGN"] == "-", card
        assert card["MEM USED/TOTAL"] == "-/16GB" and card["HEALTH"] == "ok", card


def test_events(d):
    out = ok(d, "events").stdout
    assert out.split("\n")[0].split() == ["TIME", "KIND", "SET/GPU", "REASON", "DETAIL"], out
    ok(d, "events", "--limit", "5")
    assert "events" in ok(d, "--json", "events").stdout
    p = gpubox(d, "events", "--limit", "0")
    assert p.returncode == 2 and "--limit" in p.stderr and p.stdout == ""


def test_gpu_healthy(d):
    p = gpubox(d, "gpu", "healthy", "GPU-nosuch-" + RUN_TAG)
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("gpubox: ") and p.stdout == ""
    uuid = d.get("/api/v1/resources/gpus").data["devices"][0]["uuid"]
    assert ok(d, "gpu", "healthy", uuid).stdout == f"gpu {uuid}: ok\n"


def test_usage_errors(d):
    for args, words in ((["top", "--once", "--iterations", "2"], "not both"),
                        (["top", "--interval", "0"], "--interval"),
                        (["top", "--iterations", "0"], "--iterations"),
                        (["gpu"], "needs a subcommand"),
                        (["gpu", "healthy"], "missing")):
        p = gpubox(d, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert words in p.stderr, (args, p.stderr)
        assert p.stdout == "", args


def test_idle_stop_and_max_duration(d):
    name = PREFIX + "_auto"
    ok(d, "run", name, "--image", IMAGE, "--gpus", "1", "--idle-stop", "30m",
       "--max-duration", "8h", "--", "sleep", "3600")
    info = json.loads(ok(d, "--json", "inspect", name).stdout)["info"]
    assert info["idleStop"] == "30m" and info["maxDuration"] == "8h", info
    out = ok(d, "inspect", name).stdout
    assert "Auto stop:  idle 30m; max 8h, at " in out, out
    assert "Running:    since " in out, out
    ok(d, "scale", name, "--max-duration", "2h")
    info = json.loads(ok(d, "--json", "inspect", name).stdout)["info"]
    assert info["maxDuration"] == "2h" and info["idleStop"] == "30m", info
    # The daemon checks the durations: below its 10 s minimum is a bad request.
    p = gpubox(d, "scale", name, "--idle-stop", "5s")
    assert p.returncode == 2 and p.stderr.startswith("gpubox: "), (p.returncode, p.stderr)
    p = gpubox(d, "run", name + "x", "--image", IMAGE, "--idle-stop", "soon", "--", "true")
    assert p.returncode == 2, (p.returncode, p.stderr)
