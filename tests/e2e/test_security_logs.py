"""Logs: memory and disk (issue 25, items 4 and 5), end to end against a
real gpuboxd and the real dockerd.

Item 4: a container that prints half a million empty lines made one
non-follow GET .../logs grow gpuboxd by hundreds of MB (a jansson object
per line, the cap counting text bytes only) and six at once by gigabytes.
The tests read gpuboxd's peak resident memory (VmHWM in /proc/<pid>/status,
reset before each measure through clear_refs where the kernel lets us)
around one such request, with versions=all too, and around six at once.

Item 5: a version's kept log (<data-dir>/logs/<name>/<version>.ndjson)
holds the container's last 10000 lines whatever their size after JSON
escaping (control characters take 6 bytes each). The test prints lines of
control characters, patches the set into several versions and checks the
kept files against the caps (8 MiB a version, 32 MiB a set: the defaults of
--kept-logs-mib 32), that versions=all still shows the newest kept lines,
and that GET /replicaSet/{name} counts them in keptLogsBytes; and that
--kept-logs-mib sets both caps.
"""
import json
import threading
import time
import urllib.parse
from pathlib import Path

from conftest import run_gpuboxd
from rsutil import RUN_TAG, call, create_ok, info_ok, module_daemon, patch_ok, rs_path, wipe

PREFIX = "e2slogs" + RUN_TAG
PORT_START, PORT_END = 64850, 64869
MIB = 1024 * 1024
# What one log request may add to gpuboxd's peak memory (the target).
REQUEST_BOUND = 32 * MIB

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


def wait_last(d, name, last, timeout=120):
    """Wait until the set's last line is `last` (its command has printed)."""
    deadline = time.monotonic() + timeout
    while True:
        data = logs_ok(d, name, tail=1)
        if data["lines"] and data["lines"][-1]["text"] == last:
            return
        assert time.monotonic() < deadline, data["lines"]
        time.sleep(0.5)


def status_bytes(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def peak_growth(daemon, action):
    """How far gpuboxd's resident memory rose above where it was while
    action ran: its peak (VmHWM) after, less its resident size before. The
    peak is reset first (clear_refs 5); where that is refused, the old peak
    counts as the start, which can only make the growth look smaller."""
    pid = daemon.proc.pid
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = status_bytes(pid, "VmRSS")
    except OSError:
        before = status_bytes(pid, "VmHWM")
    action()
    return status_bytes(daemon.proc.pid, "VmHWM") - before


def get_whole(d, name, query):
    """One non-follow logs request, read whole and parsed."""
    r = logs(d, name, **query)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def test_a_log_of_empty_lines_takes_little_memory(d, daemon):
    name = PREFIX + "_e"
    create_ok(d, name, cmd=sh("yes '' | head -n 500000; echo printed; sleep 3600"))
    wait_last(d, name, "printed")
    get_whole(d, name, {"tail": 1})  # warm the daemon's Docker connections up

    got = {}
    grew = peak_growth(daemon, lambda: got.setdefault("data", get_whole(d, name, {})))
    assert grew < REQUEST_BOUND, f"one logs request grew gpuboxd by {grew / MIB:.0f} MiB"
    data = got["data"]
    # the newest lines that fit 16 MiB of JSON: not all 500001, and it says so
    assert data["truncated"] is True
    assert 100000 < len(data["lines"]) < 500001, len(data["lines"])
    assert data["lines"][-1]["text"] == "printed"
    assert all(line["text"] == "" for line in data["lines"][:-1])

    # a well-behaved tail stays exact
    assert [x["text"] for x in get_whole(d, name, {"tail": 3})["lines"]] == ["", "", "printed"]
    tail = get_whole(d, name, {"tail": 200000, "follow": "false"})
    assert len(tail["lines"]) == 200000 and tail["truncated"] is False

    # six at once
    errors = []

    def one():
        try:
            # a longer wait than the usual 30 s: six read 3 million lines
            # from Docker on a machine the tests share
            conn = d.connection(timeout=600)
            try:
                conn.request("GET", rs_path(name, "/logs"))
                r = conn.getresponse()
                assert r.status == 200
                assert json.loads(r.read())["data"]["truncated"] is True
            finally:
                conn.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def six():
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    grew = peak_growth(daemon, six)
    assert not errors, errors
    assert grew < REQUEST_BOUND * 2, f"six logs requests grew gpuboxd by {grew / MIB:.0f} MiB"


def test_versions_all_takes_little_memory(d, daemon):
    name = PREFIX + "_a"
    create_ok(d, name, cmd=sh('yes "" | head -n 500000; echo "printed $N"; sleep 3600'),
              env=["N=1"])
    wait_last(d, name, "printed 1")
    patch_ok(d, name, {"envPatch": {"set": ["N=2"]}})
    wait_last(d, name, "printed 2")
    get_whole(d, name, {"tail": 1})

    got = {}
    grew = peak_growth(daemon, lambda: got.setdefault(
        "data", get_whole(d, name, {"versions": "all", "follow": "false"})))
    assert grew < REQUEST_BOUND, f"one logs request grew gpuboxd by {grew / MIB:.0f} MiB"
    data = got["data"]
    assert [(v["version"], v["source"]) for v in data["versions"]] == [
        (1, "kept"), (2, "container")]
    assert data["truncated"] is True
    assert data["lines"][-1] == {"version": 2, "stream": "stdout", "text": "printed 2"}
    assert get_whole(d, name, {"versions": "all", "tail": 2})["lines"] == [
        {"version": 2, "stream": "stdout", "text": ""},
        {"version": 2, "stream": "stdout", "text": "printed 2"}]


# A line of 1000 control characters: 6000 bytes once JSON-escaped (\u0001).
LOUD = ('if [ "$BIG" = 1 ]; then L=$(head -c 1000 /dev/zero | tr "\\000" "\\001"); i=0; '
        'while [ $i -lt 12000 ]; do echo "$L"; i=$((i+1)); done; fi; echo "done $N"; '
        'sleep 3600')


def test_kept_logs_are_capped_per_version_and_per_set(d, daemon):
    name = PREFIX + "_k"
    create_ok(d, name, cmd=sh(LOUD), env=["BIG=1", "N=1"])
    wait_last(d, name, "done 1")
    for n in range(2, 7):
        patch_ok(d, name, {"envPatch": {"set": [f"N={n}"]}})
        wait_last(d, name, f"done {n}")
    patch_ok(d, name, {"envPatch": {"set": ["BIG=0", "N=7"]}})
    wait_last(d, name, "done 7")

    kept = Path(daemon.data_dir) / "logs" / name
    sizes = {int(p.name.split(".")[0]): p.stat().st_size for p in kept.glob("*.ndjson")}
    assert all(size <= 8 * MIB for size in sizes.values()), sizes
    assert sum(sizes.values()) <= 32 * MIB, sizes
    # the newest versions stay, the oldest went first
    assert 6 in sizes and 1 not in sizes, sizes
    assert sorted(sizes) == list(range(min(sizes), 7)), sizes
    # each kept file is the version's newest lines, whole JSON lines
    last = (kept / "6.ndjson").read_text().splitlines()
    assert json.loads(last[-1])["text"] == "done 6"
    assert json.loads(last[0])["text"] == "\x01" * 1000

    every = logs_ok(d, name, versions="all")
    sources = {v["version"]: v["source"] for v in every["versions"]}
    assert sources[7] == "container" and sources[6] == "kept" and sources[1] == "none", sources
    assert every["lines"][-1] == {"version": 7, "stream": "stdout", "text": "done 7"}
    sixes = [x["text"] for x in every["lines"] if x["version"] == 6]
    assert sixes and sixes[-1] == "done 6"

    info = info_ok(d, name)
    assert info["keptLogsBytes"] == sum(sizes.values()), (info["keptLogsBytes"], sizes)


def test_kept_logs_mib_sets_both_caps(start_daemon):
    """--kept-logs-mib 1: a version keeps at most 256 KiB, a set 1 MiB."""
    assert run_gpuboxd(["--kept-logs-mib", "0"])[0] == 2
    small = start_daemon("--simulate-gpus", "1xA100-80GB", "--port-range", "64870-64879",
                         "--kept-logs-mib", "1")
    name = PREFIX + "_m"
    loud = LOUD.replace("-lt 12000", "-lt 1000")
    try:
        create_ok(small, name, cmd=sh(loud), env=["BIG=1", "N=1"])
        wait_last(small, name, "done 1")
        for n in range(2, 7):
            patch_ok(small, name, {"envPatch": {"set": [f"N={n}"]}})
            wait_last(small, name, f"done {n}")
        kept = Path(small.data_dir) / "logs" / name
        sizes = {int(p.name.split(".")[0]): p.stat().st_size for p in kept.glob("*.ndjson")}
        assert all(200 * 1024 < size <= 256 * 1024 for size in sizes.values()), sizes
        assert sum(sizes.values()) <= MIB, sizes
        assert 5 in sizes and 1 not in sizes, sizes
        assert info_ok(small, name)["keptLogsBytes"] == sum(sizes.values())
    finally:
        wipe(small, PREFIX)
