"""The fault matrix (issue 4, point 6): gpuboxd dies at every step of
create, patch (whole cards, and a memory share exchanged in the pool),
rollback, restart (same cards and other cards), stop and delete, and a new
gpuboxd on the same data dir finishes or undoes what was in flight.

Each case starts gpuboxd with GPUBOX_FAULT=<kind>:<step> (it exits 99 right
after recording that step, or with <kind>:before:<step> right before),
prepares a set, runs the operation (the daemon dies under the request),
looks at the store the dead daemon left (the set's record holds what both
versions need and names the operation; the operation's steps are done up to
the fault), starts gpuboxd again without the fault and checks:
  - the operation ended as its rules say (undone before the carry began,
    finished from there on; create, stop and delete finish when they can);
  - exactly one container exists for the set (none once deleted), running
    or stopped as the set's state says;
  - the GPUs and ports in the store are exactly what Docker gives the
    containers and what the pools count as held: nothing leaked, nothing
    held twice;
  - the user's files are intact.
"""
import http.client
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import GPUBOXD
from rsutil import (IMAGE, LONG_RUNNING, RUN_TAG, call, container, containers_of, create,
                    create_ok, delete, device_uuids, gpu_devices, held_gpus, history, host_ports,
                    info, lifecycle, list_sets, patch, patch_ok, remove_containers, rollback,
                    system_disk, used_ports, write_system_disk)

PREFIX = f"e2ft{RUN_TAG}"
PORT_RANGE = "64100-64149"
ARGS = ("--simulate-gpus", "8xA100-80GB", "--port-range", PORT_RANGE)
NAME = f"{PREFIX}_set"
THIEF = f"{PREFIX}_thief"



def fault_points():
    """{operation: [its fault points, as GPUBOX_FAULT names them after
    "<kind>:"]}, from the daemon's own table (gpuboxd --list-fault-points),
    in step order."""
    out = subprocess.run([str(GPUBOXD), "--list-fault-points"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    points = {}
    for line in out.splitlines():
        value, op = line.split("\t")
        if ":" in value:  # the journalled operations' (volumes' are "volume.create.docker")
            points.setdefault(op, []).append(value.split(":", 1)[1])
    return points


POINTS = fault_points()
VERSION_STEPS = [s for s in POINTS["patch"] if not s.startswith("before:")]
# Up to here a new version is undone; from carry-begin on it goes forward.
NO_RETURN = VERSION_STEPS.index("carry-begin")
UNDONE = set(VERSION_STEPS[:NO_RETURN]) | {f"before:{s}" for s in VERSION_STEPS[1:NO_RETURN + 1]}


def cases():
    """Every fault point of create, patch, restart on the same cards, stop
    and delete; the recorded steps of a share patch, a rollback and a
    restart on other cards (the same steps as patch)."""
    recorded = [("patch-share", "patch"), ("rollback", "rollback"), ("restart-new", "restart-new")]
    out = [("create", s) for s in POINTS["create"]]
    out += [("patch", s) for s in POINTS["patch"]]
    for kind, op in recorded:
        out += [(kind, s) for s in POINTS[op] if not s.startswith("before:")]
    for kind in ("restart-same", "stop", "delete"):
        out += [(kind, s) for s in POINTS[kind]]
    return out


@pytest.fixture
def data_dir(tmp_path):
    yield tmp_path / "data"
    remove_containers(PREFIX)


def start(start_daemon, data_dir, fault=None):
    env = dict(os.environ)
    env.pop("GPUBOX_FAULT", None)
    if fault:
        env["GPUBOX_FAULT"] = fault
    return start_daemon(*ARGS, data_dir=data_dir, env=env)


def dies(d, fn):
    """Run fn (a call on d); gpuboxd must exit 99 under it."""
    try:
        r = fn()
    except (OSError, http.client.HTTPException):
        r = None
    rc = d.proc.wait(30)
    d.proc.stdout.close()
    d.log_file.close()
    assert rc == 99, f"gpuboxd did not die at the fault (exit {rc}, answer {r and r.json})"
    log = d.log()
    assert "fault injection" in log
    assert "Sanitizer" not in log and "runtime error:" not in log, log


def store_records(data_dir):
    """The store as the dead daemon left it: {key: value (parsed JSON)}."""
    db = sqlite3.connect(f"file:{data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM kv")}
    finally:
        db.close()


# --- what each operation is run on ---------------------------------------------------------


def prepare(d, kind):
    """Set the scene on the daemon that will die (its fault never fires for
    these other kinds). Returns the manifest of the set's system disk (None
    for create, which has none yet)."""
    if kind == "create":
        return None
    if kind == "rollback":
        create_ok(d, NAME, gpus=1, env=["MODE=one"], containerPorts=["22"])
        disk = write_system_disk(d, NAME)
        patch_ok(d, NAME, {"gpuPatch": {"gpuCount": 2}, "envPatch": {"set": ["MODE=two"]},
                           "containerPorts": ["22", "8888"]})
        return disk
    if kind == "patch-share":
        r = call(d, "POST", "/api/v1/replicaSet",
                 {"imageName": IMAGE, "replicaSetName": NAME, "cmd": LONG_RUNNING,
                  "gpuMemory": "8GB", "containerPorts": ["22"]})
        assert r.status == 200, r.json
        return write_system_disk(d, NAME)
    created = create_ok(d, NAME, gpus=2, containerPorts=["22"])
    disk = write_system_disk(d, NAME)
    if kind.startswith("restart"):
        assert lifecycle(d, NAME, "stop").status == 200
    if kind == "restart-new":
        taken = create_ok(d, THIEF, gpus=2)
        assert set(taken["gpus"]) == set(created["gpus"])
    return disk


def run(d, kind):
    if kind == "create":
        return create(d, NAME, gpus=2, containerPorts=["22"])
    if kind == "patch":
        return patch(d, NAME, {"gpuPatch": {"gpuCount": 3}, "containerPorts": ["22", "8888"]})
    if kind == "patch-share":
        # with another field, so the share changes through a new version
        # (a size alone, on a card with room, changes in place: no journal)
        return patch(d, NAME, {"gpuPatch": {"gpuMemory": "16GB"}, "envPatch": {"set": ["X=1"]}})
    if kind == "rollback":
        return rollback(d, NAME, 1)
    if kind.startswith("restart"):
        return lifecycle(d, NAME, "restart")
    if kind == "stop":
        return lifecycle(d, NAME, "stop")
    return delete(d, NAME)


def fault_name(kind, step):
    return f"{kind.split('-')[0]}:{step}"


# --- checks --------------------------------------------------------------------------------


def expected(kind, step):
    """(state, version) the set must have after recovery; state None: absent."""
    if kind == "create":
        return (None, None) if step == "record" else ("running", 1)
    if kind in ("patch", "patch-share"):
        return ("running", 1) if step in UNDONE else ("running", 2)
    if kind == "rollback":
        return ("running", 2) if step in UNDONE else ("running", 3)
    if kind == "restart-new":
        return ("stopped", 1) if step in UNDONE else ("running", 2)
    if kind == "restart-same":
        return ("running", 1)
    if kind == "stop":
        return ("stopped", 1)
    return ("deleted", 1)


def assert_dead_store_is_consistent(data_dir, kind, step):
    """What the dead daemon left: the record names the operation (unless it
    ended), the operation's steps are done exactly up to the fault, and no
    card is listed by two records."""
    kv = store_records(data_dir)
    records = {k.rsplit("/", 1)[1]: v for k, v in kv.items()
               if k.startswith("/gpubox/replicasets/")}
    ops = [v for k, v in kv.items() if k.startswith("/gpubox/operations/")]
    held = [u for r in records.values() for u in r.get("gpus", [])]
    assert len(held) == len(set(held)), f"a card held twice: {records}"
    op_kind = kind.split("-")[0]
    mine = [o for o in ops if o["kind"] == op_kind and o["target"] == NAME]
    assert len(mine) == 1, ops
    op = mine[0]
    rec = records.get(NAME)
    step_name = step.split(":")[-1]
    done = [s["name"] for s in op["steps"] if s["done"]]
    names = [s["name"] for s in op["steps"]]
    upto = names.index(step_name) + (0 if step.startswith("before:") else 1)
    assert done == names[:upto], (step, op["steps"])
    if op["state"] == "running":
        assert rec is not None and rec.get("operation") == op["id"], rec
    else:  # the fault came after the last transaction
        assert op["state"] == "done" and rec.get("operation") is None, (op, rec)
    if op_kind in ("patch", "rollback") or kind == "restart-new":
        if op["state"] == "running":
            frm, to = op["data"]["from"], op["data"]["to"]
            # Shares are exchanged in the pool at once: the record holds
            # the new share only (one tenancy per card and set).
            assert op["data"]["gpuSwap"] is (kind == "patch-share")
            if kind == "patch-share":
                assert rec["gpuShares"] == to["gpuShares"], (rec, to)
            # Both versions' cards and ports are held until the change ends.
            assert set(rec["gpus"]) == set(frm["gpus"]) | set(to["gpus"]), (rec, op["data"])
            assert {p["hostPort"] for p in rec["ports"]} == \
                {p["hostPort"] for p in frm["ports"]} | {p["hostPort"] for p in to["ports"]}
    return op["state"]


def assert_recovered(d, kind, step, disk):
    state, version = expected(kind, step)
    r = info(d, NAME)
    if state is None:
        assert r.status == 404, r.json
        assert containers_of(NAME) == []
    else:
        assert r.status == 200, r.json
        i = r.data["info"]
        assert (i["state"], i["version"]) == (state, version), (kind, step, i)
        assert "operation" not in i, i
        cs = containers_of(NAME)
        if state == "deleted":
            assert cs == []
        else:
            assert [c["Names"][0].lstrip("/") for c in cs] == [i["containerName"]], cs
            c = container(i["containerName"])
            assert c["State"]["Running"] is (state == "running")
    # Store, pools and Docker agree for every set: nothing leaked, nothing twice.
    sets = [s for s in list_sets(d)]
    gpus = [u for s in sets for u in s["gpus"]]
    ports = [p["hostPort"] for s in sets for p in s["ports"]]
    assert len(gpus) == len(set(gpus)) and len(ports) == len(set(ports))
    assert held_gpus(d) == set(gpus)
    assert sorted(used_ports(d)) == sorted(ports)
    # Memory shares are counted once, as the records say.
    shares = {}
    for s in sets:
        for sh in s.get("gpuShares", []):
            if sh["mode"] == "memory":
                shares[sh["uuid"]] = shares.get(sh["uuid"], 0) + sh["memoryMiB"]
    for dev in gpu_devices(d):
        if dev["mode"] == "memory":
            assert dev["allocatedMemoryMiB"] == shares.get(dev["uuid"]), (dev, shares)
    for s in sets:
        if s["state"] in ("running", "paused"):
            c = container(s["containerName"])
            assert device_uuids(c) == set(s["gpus"]), s
            assert host_ports(c) == {p["hostPort"] for p in s["ports"]}, s
    # The user's files (a stopped set runs again to show them).
    if disk is not None and state in ("running", "stopped"):
        if state == "stopped":
            r = lifecycle(d, NAME, "restart")
            assert r.status == 200, r.json
        assert system_disk(d, NAME) == disk


@pytest.mark.parametrize("kind,step", cases(), ids=[f"{k}:{s}" for k, s in cases()])
def test_fault(start_daemon, data_dir, kind, step):
    d = start(start_daemon, data_dir, fault_name(kind, step))
    disk = prepare(d, kind)
    dies(d, lambda: run(d, kind))
    unfinished = assert_dead_store_is_consistent(data_dir, kind, step) == "running"

    d2 = start(start_daemon, data_dir)
    assert ("recover: operation" in d2.log()) is unfinished
    assert_recovered(d2, kind, step, disk)
    if expected(kind, step)[0] is not None:
        assert [h["version"] for h in history(d2, NAME).data["history"]][-1] == 1
