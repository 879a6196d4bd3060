"""Replica sets under concurrent requests (issue 3, point 8): many creates
racing for 8 simulated GPUs, racing creates of one name, and racing
lifecycle calls on one name. Afterwards the store (GET /replicaSet), the
pools (/resources/gpus, /resources/ports) and Docker (containers by label)
must tell the same story.
"""
import random
import re
import threading

import pytest

from rsutil import RUN_TAG

from rsutil import (call, container, containers_with_prefix, create, create_ok, delete,
                    gpu_devices, held_gpus, info, lifecycle, list_sets, module_daemon,
                    used_ports)

PREFIX = "e2cc" + RUN_TAG
PORT_START, PORT_END = 61050, 61099


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


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


def docker_view():
    """{replica set: (container name, running, GPU UUIDs asked of Docker)}."""
    view = {}
    for c in containers_with_prefix(PREFIX):
        full = container(c["Id"])
        reqs = full["HostConfig"].get("DeviceRequests") or []
        uuids = [u for r in reqs for u in (r.get("DeviceIDs") or [])]
        view[c["Labels"]["gpubox.replicaset"]] = (full["Name"].lstrip("/"),
                                                   full["State"]["Running"], sorted(uuids))
    return view


def assert_views_agree(d):
    """The store, the pools and Docker agree on who holds what."""
    sets = {s["name"]: s for s in list_sets(d)}
    held = {s: set(v["gpus"]) for s, v in sets.items()}
    all_held = [u for g in held.values() for u in g]
    assert len(all_held) == len(set(all_held)), f"a GPU is held twice: {held}"
    assert held_gpus(d) == set(all_held)
    for dev in gpu_devices(d):
        holders = [s for s, g in held.items() if dev["uuid"] in g]
        assert sorted(dev["tenants"]) == holders, dev
    ports = sorted(p["hostPort"] for s in sets.values() for p in s["ports"])
    assert len(ports) == len(set(ports)), f"a port is held twice: {ports}"
    assert used_ports(d) == ports
    docker = docker_view()
    assert set(docker) == set(sets), "Docker's containers and the store's sets differ"
    for name, s in sets.items():
        cname, running, uuids = docker[name]
        assert cname == s["containerName"]
        assert running == (s["state"] == "running"), (name, s["state"], running)
        if s["state"] in ("running", "paused"):
            assert uuids == sorted(s["gpus"]), (name, uuids, s["gpus"])


def test_fifty_creates_for_eight_gpus(d):
    names = [f"{PREFIX}_n{i:02d}" for i in range(50)]
    results = race([lambda n=n: create(d, n, gpus=1, containerPorts=["22"]) for n in names])
    ok = [(n, r) for n, r in zip(names, results) if r.status == 200]
    refused = [(n, r) for n, r in zip(names, results) if r.status != 200]
    assert len(ok) == 8, [(n, r.status, r.json) for n, r in zip(names, results)]
    for n, r in refused:
        assert r.status == 409 and r.code == 1013, (n, r.json)
        assert re.search(r"\b0\b[^0-9]*free|free[^0-9]*\b0\b|none free", r.msg), r.msg
    uuids = [r.data["gpus"][0] for _, r in ok]
    assert len(set(uuids)) == 8, f"a GPU was given twice: {uuids}"
    ports = [r.data["ports"][0]["hostPort"] for _, r in ok]
    assert len(set(ports)) == 8

    assert sorted(s["name"] for s in list_sets(d)) == sorted(n for n, _ in ok)
    assert held_gpus(d) == set(uuids)
    for n, _ in refused:
        assert info(d, n).status == 404
        assert container(f"{n}-1") is None
    assert_views_agree(d)


def test_racing_creates_of_one_name(d):
    name = f"{PREFIX}_same"
    results = race([lambda: create(d, name, gpus=1) for _ in range(12)])
    ok = [r for r in results if r.status == 200]
    assert len(ok) == 1, [(r.status, r.json) for r in results]
    for r in results:
        if r.status != 200:
            assert r.status == 409 and r.code == 1008, r.json
    assert len(held_gpus(d)) == 1
    assert [c["Names"][0] for c in containers_with_prefix(PREFIX)] == [f"/{name}-1"]
    assert_views_agree(d)


def test_racing_creates_and_deletes_of_many_names(d):
    """Different names in parallel: creates and deletes interleave, and the
    GPUs end up with exactly the sets that remain."""
    names = [f"{PREFIX}_m{i}" for i in range(6)]
    race([lambda n=n: create_ok(d, n, gpus=1) for n in names])
    keep = names[:3]
    calls = [lambda n=n: delete(d, n) for n in names[3:]]
    calls += [lambda i=i: create(d, f"{PREFIX}_x{i}", gpus=1) for i in range(4)]
    results = race(calls)
    for r in results[:3]:
        assert r.status == 200, r.json
    created = sum(1 for r in results[3:] if r.status == 200)
    for r in results[3:]:
        assert r.status == 200 or r.code == 1013, r.json
    assert len(list_sets(d)) == len(keep) + created
    assert created >= 2  # 2 GPUs were free before the deletes
    assert_views_agree(d)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_racing_lifecycle_calls_on_one_name(d, seed):
    name = f"{PREFIX}_life"
    create_ok(d, name, gpus=2, containerPorts=["22"])
    rng = random.Random(seed)
    actions = [rng.choice(["stop", "pause", "continue", "pause", "continue"]) for _ in range(16)]
    actions[rng.randrange(len(actions))] = "delete"

    def act(a):
        return delete(d, name) if a == "delete" else lifecycle(d, name, a)

    results = race([lambda a=a: act(a) for a in actions])
    for a, r in zip(actions, results):
        assert r.status in (200, 404, 409), (a, r.status, r.json)
        if r.status == 409:
            assert r.code == 1107, (a, r.json)

    r = info(d, name)
    deleted = r.status == 404 or r.data["info"]["state"] == "deleted"
    if deleted:
        assert container(f"{name}-1") is None
        assert held_gpus(d) == set() and used_ports(d) == []
        return
    state = r.data["info"]["state"]
    c = container(f"{name}-1")
    assert c is not None
    assert c["State"]["Running"] == (state == "running")
    if state == "stopped":
        assert held_gpus(d) == set() and used_ports(d) == []
    else:
        assert len(held_gpus(d)) == 2 and len(used_ports(d)) == 1
    assert_views_agree(d)
    assert delete(d, name).status == 200
    assert held_gpus(d) == set() and used_ports(d) == []


def test_lifecycle_race_never_frees_gpus_held_by_another_set(d):
    """Many concurrent stops of one set while another set takes the freed
    GPUs: only the first stop releases anything."""
    first = f"{PREFIX}_a"
    create_ok(d, first, gpus=4)
    results = race([lambda: lifecycle(d, first, "stop") for _ in range(8)])
    assert sorted(r.status for r in results) == [200] + [409] * 7
    other = create_ok(d, f"{PREFIX}_b", gpus=8)
    race([lambda: lifecycle(d, first, "stop") for _ in range(4)] +
         [lambda: call(d, "DELETE", f"/api/v1/replicaSet/{first}") for _ in range(2)])
    assert held_gpus(d) == set(other["gpus"])
    assert_views_agree(d)
