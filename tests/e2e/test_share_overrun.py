"""The second line of defence behind the CUDA limiter (issue 28, docs/gpus.md
"Over a share"): gpuboxd's monitor reads each process's memory from NVML
(the fake NVML's `process INDEX PID MIB` lines, with the real host PIDs of
processes in the containers) and reports a replica set whose processes use
more than its memory share on a card - in its usage, as an event and as
metrics - and with --share-overrun kill kills its largest process there.
"""
import os
import time

import pytest

from conftest import FAKE_NVML, docker_get, fake_gpu_env
from rsutil import RUN_TAG, call, create_ok, delete, execute_ok, remove_containers, wait_until
from rsutil import info_live as info_ok

PREFIX = f"ovr{RUN_TAG}_"
PORTS = "64720-64729"

CARDS = """driver_version 535.104.05
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 16384 ok Tesla T4
1 GPU-bbbbbbbb-1111-1111-1111-111111111111 16384 ok Tesla T4
"""
CARD0 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"


def rewrite(path, text):
    """Replace the description so the fake sees a new file (size or mtime)."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def scrape(d):
    conn = d.connection()
    try:
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 200, body
        return body
    finally:
        conn.close()


def host_pids(container):
    """The host PIDs of the container's processes, by their command line."""
    top = docker_get(f"/containers/{container}/top?ps_args=-o%20pid,args")
    return {p[1]: int(p[0]) for p in top["Processes"]}


def overrun_events(d, name):
    events = call(d, "GET", "/api/v1/events").data["events"]
    return [e for e in events if e["kind"] == "share.overrun" and e.get("replicaSet") == name]


@pytest.fixture
def fake(tmp_path):
    desc = tmp_path / "gpus.txt"
    desc.write_text(CARDS)
    return desc


def daemon(start_daemon, fake, *extra):
    return start_daemon("--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML),
                        "--usage-interval", "0.2", "--port-range", PORTS, *extra,
                        env=fake_gpu_env(fake))


def cleanup(d):
    for rs in call(d, "GET", "/api/v1/replicaSet?all=true").data["replicaSets"]:
        delete(d, rs["name"], purge=True)
    remove_containers(PREFIX)


def test_over_share_is_reported(start_daemon, fake):
    d = daemon(start_daemon, fake)
    try:
        name = PREFIX + "rep"
        create_ok(d, name, gpus=1, gpuMemory="2GB")
        pid = docker_get(f"/containers/{name}-1/json")["State"]["Pid"]
        rewrite(fake, CARDS + f"process 0 {pid} 3000\n")
        usage = wait_until(lambda: (lambda u: u and u["cards"] and u["cards"][0]["overShare"]
                                    and u)(info_ok(d, name)["usage"]), timeout=15)
        assert usage and usage["cards"][0]["memoryUsedMiB"] == 3000, info_ok(d, name)
        events = wait_until(lambda: overrun_events(d, name), timeout=10)
        assert events and events[0]["reason"] == "report" and events[0]["gpu"] == CARD0, events
        assert "3000 MiB of its 2048 MiB share" in events[0]["detail"], events
        text = scrape(d)
        line = [x for x in text.splitlines()
                if x.startswith("gpubox_instance_gpu_share_overrun{") and name in x]
        assert line and CARD0 in line[0] and line[0].endswith(" 1"), line
        assert 'gpubox_share_overruns_total{action="report"} 1' in text, text
        # reported once while it stays over; nothing is killed under report
        time.sleep(1)
        assert len(overrun_events(d, name)) == 1
        assert os.path.exists(f"/proc/{pid}")
        assert info_ok(d, name)["state"] == "running"
        # back under: the gauge goes to 0
        rewrite(fake, CARDS + f"process 0 {pid} 1000\n")
        assert wait_until(lambda: not info_ok(d, name)["usage"]["cards"][0]["overShare"],
                          timeout=15)
        line = [x for x in scrape(d).splitlines()
                if x.startswith("gpubox_instance_gpu_share_overrun{") and name in x]
        assert line and line[0].endswith(" 0"), line
    finally:
        cleanup(d)


def test_share_overrun_kill_kills_the_largest_process(start_daemon, fake):
    d = daemon(start_daemon, fake, "--share-overrun", "kill")
    try:
        name = PREFIX + "kill"
        create_ok(d, name, gpus=1, gpuMemory="2GB")
        init = docker_get(f"/containers/{name}-1/json")["State"]["Pid"]
        assert execute_ok(d, name, ["sh", "-c", "sleep 601 > /dev/null 2>&1 &"])["exitCode"] == 0
        big = wait_until(lambda: host_pids(f"{name}-1").get("sleep 601"), timeout=10)
        assert big, host_pids(f"{name}-1")
        # the init process uses 500 MiB, the other 2000: 2500 > 2048
        rewrite(fake, CARDS + f"process 0 {init} 500\nprocess 0 {big} 2000\n")
        assert wait_until(lambda: not os.path.exists(f"/proc/{big}"), timeout=15), \
            "the largest process was not killed"
        events = wait_until(lambda: [e for e in overrun_events(d, name) if e["reason"] == "kill"],
                            timeout=10)
        assert events and f"killed process {big} (2000 MiB)" in events[0]["detail"], \
            overrun_events(d, name)
        assert [e["reason"] for e in overrun_events(d, name)] == ["kill", "report"]
        # only the largest: the container and its init go on
        time.sleep(1)
        assert os.path.exists(f"/proc/{init}")
        assert info_ok(d, name)["state"] == "running"
        assert 'gpubox_share_overruns_total{action="kill"} 1' in scrape(d)
        # a whole card is never judged
        whole = PREFIX + "whole"
        create_ok(d, whole, gpus=1)
        wpid = docker_get(f"/containers/{whole}-1/json")["State"]["Pid"]
        rewrite(fake, CARDS + f"process 0 {init} 500\nprocess 1 {wpid} 16000\n")
        time.sleep(1.5)
        assert os.path.exists(f"/proc/{wpid}") and not overrun_events(d, whole)
    finally:
        cleanup(d)


def test_share_overrun_flag_is_checked(start_daemon, fake):
    with pytest.raises(AssertionError):
        daemon(start_daemon, fake, "--share-overrun", "shoot")
