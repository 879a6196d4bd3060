"""Restart and rollback end to end (issue 4, points 3 and 4).

Restart of a stopped set takes back the very cards and ports it gave back
when they are still free, and starts the same container (no new version);
when another set took them meanwhile it gets other cards as a new version
carrying the system disk. Rollback makes a new version whose spec is
version k's, carrying the current system disk; history lists every
version newest first.

One daemon (8 simulated A100s, ports 64050-64099) serves the module.
"""
import json
import sqlite3

import pytest

import conftest
from etcdutil import b64

from rsutil import (RUN_TAG, call, container, containers_of, create, create_ok, device_uuids,
                    env_of, held_gpus, history, host_ports, info_ok, lifecycle, module_daemon,
                    operation, patch_ok, rollback, system_disk, used_ports, wipe,
                    write_system_disk)

PREFIX = f"e2rr{RUN_TAG}"
PORT_START, PORT_END = 64050, 64099


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def assert_matches_docker(d, name):
    i = info_ok(d, name)
    assert [c["Names"][0].lstrip("/") for c in containers_of(name)] == [i["containerName"]]
    c = container(i["containerName"])
    assert device_uuids(c) == set(i["gpus"])
    assert host_ports(c) == {p["hostPort"] for p in i["ports"]}
    return i, c


# --- restart -------------------------------------------------------------------------------


def test_restart_takes_the_same_cards_and_container_when_free(d):
    name = f"{PREFIX}_same"
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    disk = write_system_disk(d, name)
    stopped = lifecycle(d, name, "stop")
    assert stopped.status == 200 and stopped.data["gpus"] == []
    assert held_gpus(d) == set() and used_ports(d) == []

    r = lifecycle(d, name, "restart")
    assert r.status == 200, r.json
    assert r.data["sameContainer"] is True
    assert r.data["version"] == 1 and r.data["containerName"] == f"{name}-1"
    assert r.data["gpus"] == created["gpus"] and r.data["ports"] == created["ports"]
    c = container(f"{name}-1")
    assert c["Id"] == created["containerId"] and c["State"]["Running"] is True
    i, _ = assert_matches_docker(d, name)
    assert i["state"] == "running"
    assert held_gpus(d) == set(created["gpus"])
    assert system_disk(d, name) == disk
    assert len(history(d, name).data["history"]) == 1
    op = operation(d, r.data["operationId"]).data
    assert op["kind"] == "restart" and op["state"] == "done"
    assert [s["name"] for s in op["steps"]] == ["begin", "started", "committed"]


def test_restart_on_other_cards_when_they_were_taken(d):
    name, thief = f"{PREFIX}_moved", f"{PREFIX}_thief"
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    disk = write_system_disk(d, name)
    assert lifecycle(d, name, "stop").status == 200
    # Another set takes the lowest free cards: the very ones just given back.
    taken = create_ok(d, thief, gpus=2)
    assert set(taken["gpus"]) == set(created["gpus"])

    r = lifecycle(d, name, "restart")
    assert r.status == 200, r.json
    assert r.data["sameContainer"] is False
    assert r.data["version"] == 2 and r.data["containerName"] == f"{name}-2"
    assert len(r.data["gpus"]) == 2 and not set(r.data["gpus"]) & set(taken["gpus"])
    assert r.data["ports"] == created["ports"]  # the port was still free: kept
    assert container(f"{name}-1") is None
    i, c = assert_matches_docker(d, name)
    assert c["State"]["Running"] is True
    assert system_disk(d, name) == disk
    nv = env_of(d, name)["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert set(nv) == set(r.data["gpus"])
    assert held_gpus(d) == set(taken["gpus"]) | set(r.data["gpus"])
    assert [h["reason"] for h in history(d, name).data["history"]] == ["restart", "create"]


def test_restart_without_enough_cards_leaves_it_stopped(d):
    name, hog = f"{PREFIX}_wait", f"{PREFIX}_hog"
    create_ok(d, name, gpus=2)
    assert lifecycle(d, name, "stop").status == 200
    create_ok(d, hog, gpus=7)
    r = lifecycle(d, name, "restart")
    assert r.status == 409 and r.code == 1013, r.json
    i = info_ok(d, name)
    assert i["state"] == "stopped" and i["gpus"] == [] and i["version"] == 1
    assert len(held_gpus(d)) == 7
    assert container(f"{name}-2") is None
    # Once cards are free again it restarts (on the card the hog left).
    assert call(d, "DELETE", f"/api/v1/replicaSet/{hog}").status == 200
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and r.data["sameContainer"] is True, r.json


def test_restart_of_paused_and_running_sets(d):
    name = f"{PREFIX}_states"
    created = create_ok(d, name, gpus=1)
    assert lifecycle(d, name, "pause").status == 200
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and r.data["state"] == "running", r.json
    assert container(f"{name}-1")["State"]["Running"] is True
    started = container(f"{name}-1")["State"]["StartedAt"]
    r = lifecycle(d, name, "restart")  # running: restarted in place
    assert r.status == 200 and r.data["version"] == 1, r.json
    c = container(f"{name}-1")
    assert c["State"]["Running"] is True and c["State"]["StartedAt"] != started
    assert c["Id"] == created["containerId"]
    assert held_gpus(d) == set(created["gpus"])


def test_older_restart_route(d):
    name = f"{PREFIX}_old"
    create_ok(d, name, gpus=1)
    assert call(d, "PATCH", f"/api/v1/containers/{name}-1/stop").status == 200
    r = call(d, "PATCH", f"/api/v1/containers/{name}-1/restart")
    assert r.status == 200 and r.data["containerName"] == f"{name}-1", r.json
    r = call(d, "PATCH", f"/api/v1/containers/{name}-9/restart")
    assert r.status == 404


# --- rollback ------------------------------------------------------------------------------


def test_rollback_makes_a_new_version_with_the_old_spec(d):
    name = f"{PREFIX}_rb"
    v1 = create_ok(d, name, gpus=1, env=["MODE=one"], containerPorts=["22"])
    disk = write_system_disk(d, name)
    patch_ok(d, name, {"gpuPatch": {"gpuCount": 3}, "envPatch": {"set": ["MODE=two"]}})
    assert env_of(d, name)["MODE"] == "two"

    r = rollback(d, name, 1)
    assert r.status == 200, r.json
    assert r.data["version"] == 3 and r.data["containerName"] == f"{name}-3"
    assert len(r.data["gpus"]) == 1 and r.data["gpus"][0] in v1["gpus"]
    assert r.data["ports"] == v1["ports"]
    i, _ = assert_matches_docker(d, name)
    assert env_of(d, name)["MODE"] == "one"
    assert system_disk(d, name) == disk
    assert held_gpus(d) == set(r.data["gpus"])

    hist = history(d, name).data["history"]
    assert [h["version"] for h in hist] == [3, 2, 1]
    assert [h["reason"] for h in hist] == ["rollback to 1", "patch", "create"]
    assert hist[0]["spec"] == hist[2]["spec"] == i["spec"]
    assert hist[1]["spec"]["gpuCount"] == 3
    assert all(h["createTime"] for h in hist)
    assert operation(d, r.data["operationId"]).data["kind"] == "rollback"


@pytest.mark.parametrize("body,status,code,words", [
    ({"version": 2}, 409, 1022, "already runs version 2"),
    ({"version": 7}, 404, 1100, "no version 7"),
    ({"version": -1}, 400, 1020, "-1"),
    ({"version": 0}, 400, 1000, "start at 1"),
    ({}, 400, 1000, "version"),
    ({"version": "1"}, 400, 1000, "version"),
    ({"version": 1, "spec": {}}, 400, 1000, "spec"),
])
def test_rollback_errors_change_nothing(d, body, status, code, words):
    name = f"{PREFIX}_rberr"
    create_ok(d, name, gpus=1)
    patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
    before = info_ok(d, name)
    r = call(d, "PATCH", f"/api/v1/replicaSet/{name}/rollback", body)
    assert r.status == status and r.code == code, r.json
    assert words in r.msg
    assert info_ok(d, name) == before
    assert len(containers_of(name)) == 1


def test_rollback_of_an_unknown_or_stopped_set(d):
    r = rollback(d, f"{PREFIX}_nope", 1)
    assert r.status == 404 and r.code == 1100
    name = f"{PREFIX}_rbstop"
    create_ok(d, name)
    patch_ok(d, name, {"envPatch": ["A=1"]})
    assert lifecycle(d, name, "stop").status == 200
    # A stopped set's rollback waits for its next start (issue 27;
    # test_stopped_changes.py): no version, nothing taken.
    r = rollback(d, name, 1)
    assert r.status == 200 and r.data["pending"] is True and r.data["version"] == 2, r.json


def test_history_survives_delete_and_continues(d):
    name = f"{PREFIX}_hist"
    create_ok(d, name)
    patch_ok(d, name, {"envPatch": ["A=1"]})
    assert call(d, "DELETE", f"/api/v1/replicaSet/{name}").status == 200
    assert [h["version"] for h in history(d, name).data["history"]] == [2, 1]
    r = create(d, name)
    assert r.status == 200 and r.data["version"] == 3, r.json
    r = rollback(d, name, 2)
    assert r.status == 200 and r.data["version"] == 4, r.json
    assert env_of(d, name)["A"] == "1"
    assert [h["version"] for h in history(d, name).data["history"]] == [4, 3, 2, 1]


def store_value(data_dir, key, value=None):
    """Read (or, with value, write) one key of the store of the daemon on
    data_dir, while no daemon runs on it: SQLite's file, or the session's
    etcd under the daemon's key prefix (conftest.store_args)."""
    if conftest.STORE_BACKEND == "etcd":
        etcd = conftest.shared_etcd()
        url = conftest.store_args(data_dir)[1]
        prefix = "/" + url.split("://", 1)[1].split("/", 1)[1].split("?")[0]
        [full] = [k for k in etcd.range(prefix) if k.endswith(key)]
        if value is None:
            return etcd.range(full)[full]
        etcd.post("/v3/kv/put", {"key": b64(full), "value": b64(value)})
        return value
    db = sqlite3.connect(str(data_dir / "state.db"))
    try:
        if value is None:
            return db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()[0]
        db.execute("UPDATE kv SET value = ? WHERE key = ?", (value, key))
        db.commit()
        return value
    finally:
        db.close()


def test_restart_of_a_set_stopped_before_last_gpus_were_kept(start_daemon, tmp_path):
    """A stopped record without lastGpus/lastPorts (written by a gpuboxd
    from before them) restarts as a new version: the old container's
    device requests name cards nobody vouches for any more."""
    args = ("--simulate-gpus", "2xA100-80GB", "--port-range", "64160-64169")
    data = tmp_path / "data"
    d = start_daemon(*args, data_dir=data)
    name = f"{PREFIX}_oldrec"
    try:
        create_ok(d, name, gpus=1, containerPorts=["22"])
        disk = write_system_disk(d, name)
        assert lifecycle(d, name, "stop").status == 200
        d.stop()
        record = json.loads(store_value(data, f"/gpubox/replicasets/{name}"))
        assert record["lastGpus"] and record["lastPorts"]
        del record["lastGpus"], record["lastPorts"]
        store_value(data, f"/gpubox/replicasets/{name}", json.dumps(record))

        d = start_daemon(*args, data_dir=data)
        r = lifecycle(d, name, "restart")
        assert r.status == 200 and r.data["sameContainer"] is False, r.json
        assert r.data["version"] == 2 and len(r.data["gpus"]) == 1
        assert system_disk(d, name) == disk
        assert_matches_docker(d, name)
    finally:
        wipe(d, name)
