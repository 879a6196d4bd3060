"""Replica sets across a daemon restart (issue 3, point 9): after SIGTERM,
and after kill -9, a new gpuboxd on the same data dir shows every replica
set with the same state, GPUs and ports, keeps handing out only what is
free, and reports a container removed by hand in Docker as "missing".
"""
import signal
import threading
import time

import pytest

from rsutil import RUN_TAG

from conftest import docker_request
from rsutil import (container, containers_with_prefix, create, create_ok, delete, gpu_map,
                    held_gpus, history, info, info_ok, lifecycle, list_sets, ports_state,
                    remove_containers, used_ports, wipe)

PREFIX = "e2rt" + RUN_TAG
PORT_RANGE = "61150-61199"
ARGS = ("--simulate-gpus", "8xA100-80GB", "--port-range", PORT_RANGE)


@pytest.fixture
def data_dir(tmp_path):
    yield tmp_path / "data"
    remove_containers(PREFIX)


def kill_9(d):
    """SIGKILL: no clean-up runs in the daemon."""
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(30)
    d.proc.stdout.close()
    d.log_file.close()


def populate(d):
    """Sets in every state: running (2 GPUs, allocated + explicit ports),
    paused, stopped, and deleted with history kept."""
    create_ok(d, f"{PREFIX}_run", gpus=2, containerPorts=["22"],
              ports=[{"hostPort": 61199, "containerPort": 80}])
    create_ok(d, f"{PREFIX}_paused", gpus=1, containerPorts=["22"])
    assert lifecycle(d, f"{PREFIX}_paused", "pause").status == 200
    create_ok(d, f"{PREFIX}_stopped", gpus=3)
    assert lifecycle(d, f"{PREFIX}_stopped", "stop").status == 200
    create_ok(d, f"{PREFIX}_gone", gpus=1)
    assert delete(d, f"{PREFIX}_gone").status == 200


def view(d):
    """What a user sees of the sets and the resources."""
    sets = {}
    for s in list_sets(d, all_=True):
        sets[s["name"]] = {k: s[k] for k in ("version", "state", "status", "containerName",
                                             "gpus", "ports", "createTime")}
    # Without the live usage: it is a reading of the moment (test_usage.py).
    infos = {n: {k: v for k, v in info_ok(d, n).items() if k != "usage"}
             for n, s in sets.items() if s["state"] != "deleted"}
    return {"sets": sets, "infos": infos, "gpus": gpu_map(d), "ports": ports_state(d),
            "history": {n: history(d, n).data for n in sets}}


def assert_same_after(before, after):
    assert after["sets"] == before["sets"]
    assert after["infos"] == before["infos"]
    assert after["gpus"] == before["gpus"]
    assert after["ports"] == before["ports"]
    assert after["history"] == before["history"]


def assert_still_allocates_only_what_is_free(d):
    """3 GPUs are held (2 running + 1 paused): 5 are free, not 6 and not 8."""
    r = create(d, f"{PREFIX}_more", gpus=6)
    assert r.status == 409 and r.code == 1013, r.json
    gpus_before, ports_before = held_gpus(d), used_ports(d)
    more = create_ok(d, f"{PREFIX}_more", gpus=5, containerPorts=["22"])
    assert not set(more["gpus"]) & gpus_before
    assert more["ports"][0]["hostPort"] not in ports_before
    assert len(held_gpus(d)) == 8


@pytest.mark.parametrize("how", ["sigterm", "kill -9"])
def test_sets_survive_a_restart(start_daemon, data_dir, how):
    d = start_daemon(*ARGS, data_dir=data_dir)
    populate(d)
    before = view(d)
    assert len(before["sets"]) == 4
    assert sum(before["gpus"].values()) == 3
    if how == "sigterm":
        d.stop(signal.SIGTERM)
    else:
        kill_9(d)
    # The containers keep running while no daemon watches them.
    assert container(f"{PREFIX}_run-1")["State"]["Running"] is True

    d2 = start_daemon(*ARGS, data_dir=data_dir)
    assert_same_after(before, view(d2))
    assert_still_allocates_only_what_is_free(d2)
    assert lifecycle(d2, f"{PREFIX}_paused", "continue").status == 200
    assert container(f"{PREFIX}_paused-1")["State"]["Running"] is True
    wipe(d2, PREFIX)


def test_running_set_stopped_while_the_daemon_was_down_runs_again(start_daemon, data_dir):
    d = start_daemon(*ARGS, data_dir=data_dir)
    created = create_ok(d, f"{PREFIX}_reboot", gpus=1, containerPorts=["22"])
    d.stop(signal.SIGTERM)
    r = docker_request("POST", f"/containers/{created['containerId']}/stop?t=1")
    assert r.status == 204, r.json
    d2 = start_daemon(*ARGS, data_dir=data_dir)
    c = container(f"{PREFIX}_reboot-1")
    assert c["State"]["Running"] is True
    assert c["Id"] == created["containerId"]
    i = info_ok(d2, f"{PREFIX}_reboot")
    assert i["state"] == "running" and i["status"] == "running"
    assert i["gpus"] == created["gpus"] and i["ports"] == created["ports"]


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_kill_9_during_creates_leaves_no_leak(start_daemon, data_dir, delay):
    """kill -9 while creates are in flight, at a few moments: after a new
    start each set either exists, runs and holds its GPUs, or has left
    nothing behind (no record, no container, no GPU, no port)."""
    d = start_daemon(*ARGS, data_dir=data_dir)
    names = [f"{PREFIX}_k{i}" for i in range(4)]
    threads = [threading.Thread(target=lambda n=n: _create_quietly(d, n)) for n in names]
    for t in threads:
        t.start()
    time.sleep(delay)
    kill_9(d)
    for t in threads:
        t.join(60)

    d2 = start_daemon(*ARGS, data_dir=data_dir)
    held = {}
    for n in names:
        r = info(d2, n)
        c = container(f"{n}-1")
        if r.status == 404:
            assert c is None, f"{n}: a container without a replica set"
            continue
        i = r.data["info"]
        assert i["state"] == "running", i
        assert c is not None and c["State"]["Running"] is True, n
        assert len(i["gpus"]) == 2 and len(i["ports"]) == 1
        held[n] = i
    assert held_gpus(d2) == {u for i in held.values() for u in i["gpus"]}
    assert sorted(used_ports(d2)) == sorted(i["ports"][0]["hostPort"] for i in held.values())
    assert {c["Labels"]["gpubox.replicaset"] for c in containers_with_prefix(PREFIX)} == set(held)
    wipe(d2, PREFIX)
    assert held_gpus(d2) == set()


def _create_quietly(d, name):
    try:
        create(d, name, gpus=2, containerPorts=["22"])
    except OSError:
        pass  # the daemon died under the request


def test_container_removed_by_hand_is_reported_missing(start_daemon, data_dir):
    d = start_daemon(*ARGS, data_dir=data_dir)
    created = create_ok(d, f"{PREFIX}_lost", gpus=2, containerPorts=["22"])
    r = docker_request("DELETE", f"/containers/{created['containerId']}?force=1")
    assert r.status == 204, r.json

    i = info_ok(d, f"{PREFIX}_lost")
    assert i["status"] == "missing"
    assert [s["status"] for s in list_sets(d) if s["name"] == f"{PREFIX}_lost"] == ["missing"]
    # Not silently forgotten: it still holds what it held.
    assert held_gpus(d) == set(created["gpus"])

    d.stop(signal.SIGTERM)
    d2 = start_daemon(*ARGS, data_dir=data_dir)
    i = info_ok(d2, f"{PREFIX}_lost")
    assert i["status"] == "missing"
    assert i["gpus"] == created["gpus"] and i["ports"] == created["ports"]
    assert f"{PREFIX}_lost" in d2.log()

    # Deleting it frees everything although Docker has no container.
    r = delete(d2, f"{PREFIX}_lost")
    assert r.status == 200, r.json
    assert held_gpus(d2) == set() and used_ports(d2) == []
    assert containers_with_prefix(PREFIX) == []
