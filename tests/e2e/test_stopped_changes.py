"""Changing a stopped instance (issue 27, items 1 and 2).

A patch (cards, memory share, environment, binds, ports) or a rollback of a
stopped replica set takes nothing and touches no container: it is recorded
as the spec of the set's next version (info.pending, info.pendingSpec) and
applied when the set starts, which then takes the cards that spec asks for.
A start that finds too few cards free answers the usual shortage and leaves
the set stopped with the change kept. The version number moves only when
the new version runs (docs/replicasets.md, "Changes while stopped").

And the advice the CLI gives after `gpubox start --no-gpu` works: a plain
`gpubox start` of a set running without its cards takes them back.

One daemon (8 simulated A100s, ports 63400-63449) serves the module.
"""
import json
import os
import subprocess
from pathlib import Path

from conftest import BUILD_DIR, SANITIZER_MARKERS
from schema import response_schema, validate
from rsutil import (IMAGE, RUN_TAG, call, container, create_ok, env_of, held_gpus, history,
                    info_ok, lifecycle, module_daemon, patch, patch_ok, rollback, rs_path,
                    system_disk, used_ports, write_system_disk)

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = f"e2sc{RUN_TAG}"
PORT_START, PORT_END = 63400, 63449

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def stopped_ok(d, name):
    r = lifecycle(d, name, "stop")
    assert r.status == 200 and r.data["state"] == "stopped", r.json
    return r.data


def reasons(d, name):
    return [h["reason"] for h in history(d, name).data["history"]]


# ---- the API ----

def test_scale_of_a_stopped_set_waits_for_its_start(d):
    name = f"{PREFIX}_scale"
    create_ok(d, name, gpus=1, containerPorts=["22"])
    disk = write_system_disk(d, name)
    stopped_ok(d, name)
    r = patch(d, name, {"gpuPatch": {"gpuCount": 2}, "envPatch": {"set": ["LATER=1"]},
                        "containerPorts": ["22", "8888"]})
    assert r.status == 200 and r.code == 200, r.json
    assert "applies at its next start" in r.msg and "as version 2" in r.msg, r.msg
    p = r.data
    assert p["state"] == "stopped" and p["version"] == 1 and p["changed"] is True, p
    assert p["pending"] is True and p["pendingSpec"]["gpuCount"] == 2, p
    assert p["gpus"] == [] and p["ports"] == []
    # Nothing taken, nothing made.
    assert held_gpus(d) == set() and used_ports(d) == []
    assert container(f"{name}-2") is None
    i = info_ok(d, name)
    assert i["state"] == "stopped" and i["version"] == 1 and i["pending"] is True
    assert i["spec"]["gpuCount"] == 1 and i["pendingSpec"]["gpuCount"] == 2
    assert "LATER=1" in i["pendingSpec"]["env"] and "LATER=1" not in i["spec"]["env"]
    assert reasons(d, name) == ["create"]
    # The start applies it: version 2 with two cards, the disk carried.
    r = lifecycle(d, name, "restart")
    assert r.status == 200, r.json
    assert r.data["version"] == 2 and len(r.data["gpus"]) == 2, r.data
    assert r.data["pendingApplied"] is True and r.data["sameContainer"] is False
    assert sorted(p["containerPort"] for p in r.data["ports"]) == [22, 8888]
    i = info_ok(d, name)
    assert i["state"] == "running" and i["pending"] is False and "pendingSpec" not in i
    assert i["spec"]["gpuCount"] == 2 and env_of(d, name)["LATER"] == "1"
    assert held_gpus(d) == set(i["gpus"])
    assert system_disk(d, name) == disk
    assert container(f"{name}-1") is None
    assert reasons(d, name) == ["changed while stopped", "create"]


def test_start_without_enough_cards_keeps_the_change(d):
    name, hog = f"{PREFIX}_wait", f"{PREFIX}_hog"
    create_ok(d, name, gpus=1)
    stopped_ok(d, name)
    assert patch_ok(d, name, {"gpuPatch": {"gpuCount": 3}})["pending"] is True
    taken = create_ok(d, hog, gpus=6)
    r = lifecycle(d, name, "restart")
    assert r.status == 409 and r.code == 1013, r.json
    i = info_ok(d, name)
    assert i["state"] == "stopped" and i["version"] == 1 and i["gpus"] == []
    assert i["pending"] is True and i["pendingSpec"]["gpuCount"] == 3
    assert held_gpus(d) == set(taken["gpus"])
    assert container(f"{name}-2") is None
    assert call(d, "DELETE", rs_path(hog)).status == 200
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and r.data["version"] == 2 and len(r.data["gpus"]) == 3, r.json
    assert info_ok(d, name)["pending"] is False


def test_changes_while_stopped_add_up_and_can_be_taken_back(d):
    name = f"{PREFIX}_addup"
    create_ok(d, name, env=["KEEP=1"])
    stopped_ok(d, name)
    patch_ok(d, name, {"envPatch": {"set": ["A=1"]}})
    p = patch_ok(d, name, {"envPatch": {"set": ["B=2"]}})
    assert p["pending"] is True and {"A=1", "B=2", "KEEP=1"} <= set(p["pendingSpec"]["env"]), p
    # Back to the spec it has: nothing is pending any more.
    p = patch_ok(d, name, {"envPatch": {"unset": ["A", "B"]}})
    assert p["pending"] is False and "pendingSpec" not in p, p
    assert info_ok(d, name)["pending"] is False
    # A rollback to the version it has drops a pending change too.
    patch_ok(d, name, {"envPatch": {"set": ["C=3"]}})
    r = rollback(d, name, 1)
    assert r.status == 200 and r.data["pending"] is False, r.json
    # The run limits alone still change in place.
    p = patch_ok(d, name, {"idleStop": "30m"})
    assert p["pending"] is False and p["idleStop"] == "30m", p
    # A bad patch is refused as for a running set, and leaves nothing pending.
    r = patch(d, name, {"envPatch": {"set": ["NOEQUALS"]}})
    assert r.status == 400 and r.code == 1000, r.json
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and r.data["version"] == 1 and r.data["sameContainer"] is True, r.json


def test_rollback_of_a_stopped_set_waits_for_its_start(d):
    name = f"{PREFIX}_rb"
    create_ok(d, name)
    patch_ok(d, name, {"envPatch": {"set": ["A=1"]}})
    stopped_ok(d, name)
    r = rollback(d, name, 1)
    assert r.status == 200, r.json
    assert r.data["state"] == "stopped" and r.data["version"] == 2 and r.data["pending"], r.data
    assert "A=1" not in r.data["pendingSpec"]["env"]
    r = rollback(d, name, 7)
    assert r.status == 404 and r.code == 1100, r.json
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and r.data["version"] == 3, r.json
    assert "A" not in env_of(d, name)
    assert reasons(d, name) == ["changed while stopped", "patch", "create"]


def test_delete_drops_a_pending_change(d):
    name = f"{PREFIX}_del"
    create_ok(d, name, gpus=1)
    stopped_ok(d, name)
    patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
    assert call(d, "DELETE", rs_path(name)).status == 200
    r = call(d, "GET", rs_path(name))
    assert r.status == 200 and r.data["info"]["state"] == "deleted", r.json
    assert r.data["info"]["pending"] is False
    assert patch(d, name, {"gpuPatch": {"gpuCount": 1}}).status == 404


def test_a_volume_a_pending_change_binds_is_in_use(d):
    """A stopped set's volumePatch waits for its start; the volume it will
    bind cannot be deleted meanwhile, and is mounted once it starts."""
    name, vol = f"{PREFIX}_vol", f"{PREFIX}vol"
    try:
        r = call(d, "POST", "/api/v1/volumes", {"name": vol, "size": "32MB"})
        assert r.status == 200, r.json
        create_ok(d, name)
        stopped_ok(d, name)
        p = patch_ok(d, name, {"volumePatch": {"newBind": f"{vol}:/data"}})
        assert p["pending"] is True and p["pendingSpec"]["binds"][0]["src"] == vol, p
        r = call(d, "DELETE", f"/api/v1/volumes/{vol}")
        assert r.status == 409 and r.code == 1107 and name in r.msg, r.json
        r = lifecycle(d, name, "restart")
        assert r.status == 200 and r.data["version"] == 2, r.json
        assert [b["src"] for b in info_ok(d, name)["spec"]["binds"]] == [vol]
    finally:
        call(d, "DELETE", rs_path(name))
        call(d, "DELETE", f"/api/v1/volumes/{vol}")


def test_restart_with_cards_after_a_start_without(d):
    """The API's plain restart of a set running without its cards takes
    them back (what `gpubox start` now sends)."""
    name = f"{PREFIX}_aside"
    create_ok(d, name, gpus=1)
    stopped_ok(d, name)
    r = call(d, "PATCH", rs_path(name, "/restart"), {"gpuCount": 0})
    assert r.status == 200 and r.data["gpus"] == [] and r.data["gpusAside"]["gpuCount"] == 1
    r = lifecycle(d, name, "restart")
    assert r.status == 200 and len(r.data["gpus"]) == 1 and not r.data.get("gpusAside"), r.json


def test_answers_conform_to_the_openapi_document(d):
    doc = d.get("/openapi.json").json
    name = f"{PREFIX}_schema"

    def check(pattern, method, r):
        assert r.status == 200, r.json
        errors = validate(r.json, response_schema(doc, pattern, method, r.status), doc)
        assert not errors, f"{method} {pattern} -> {r.json}:\n" + "\n".join(errors)

    item = "/api/v1/replicaSet/{name}"
    create_ok(d, name, gpus=1)
    patch_ok(d, name, {"envPatch": {"set": ["A=1"]}})
    stopped_ok(d, name)
    check(item, "patch", patch(d, name, {"gpuPatch": {"gpuCount": 2}}))
    check(item, "get", call(d, "GET", rs_path(name)))
    check(item + "/rollback", "patch", rollback(d, name, 1))
    check(item + "/rollback", "patch", rollback(d, name, 2))
    check(item, "patch", patch(d, name, {"envPatch": {"set": ["B=1"]}}))
    check(item + "/restart", "patch", lifecycle(d, name, "restart"))


# ---- the CLI ----

def gpubox(d, *args):
    e = dict(os.environ)
    e.pop("GPUBOX_TOKEN", None)
    e["GPUBOX_HOST"] = d.url
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=e, timeout=120)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(d, *args):
    p = gpubox(d, *args)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def test_cli_scale_of_a_stopped_set_applies_at_its_start(d):
    name = f"{PREFIX}_cli"
    ok(d, "run", name, "--image", IMAGE, "--gpus", "1", "--", "sleep", "3600")
    ok(d, "stop", name)
    p = ok(d, "scale", name, "--gpus", "2")
    assert p.stdout == (f"{name}: stopped; the change applies at its next start "
                        f"(gpubox start {name})\n"), p.stdout
    assert held_gpus(d) == set()
    p = ok(d, "inspect", name)
    assert "Pending:    at the next start: gpuCount 1 -> 2\n" in p.stdout, p.stdout
    j = json.loads(ok(d, "--json", "inspect", name).stdout)
    assert j["info"]["pending"] is True
    p = ok(d, "start", name)
    assert p.stdout.startswith(f"{name}: started as {name}-2"), p.stdout
    assert "the change made while it was stopped" in p.stdout, p.stdout
    i = info_ok(d, name)
    assert i["state"] == "running" and len(i["gpus"]) == 2 and i["pending"] is False
    assert "Pending:" not in ok(d, "inspect", name).stdout


def test_cli_start_takes_back_the_cards_after_no_gpu(d):
    name = f"{PREFIX}_nogpu"
    ok(d, "run", name, "--image", IMAGE, "--gpus", "1", "--", "sleep", "3600")
    ok(d, "stop", name)
    p = ok(d, "start", "--no-gpu", name)
    assert f"gpubox start {name}" in p.stdout, p.stdout
    assert info_ok(d, name)["gpus"] == []
    # The advice works: a plain start takes the card back.
    p = ok(d, "start", name)
    assert p.stdout.startswith(f"{name}: started as {name}-3"), p.stdout
    i = info_ok(d, name)
    assert len(i["gpus"]) == 1 and not i.get("gpusAside"), i
    # Running with its cards, start is refused as before.
    p = gpubox(d, "start", name)
    assert p.returncode == 4 and "it is running" in p.stderr, p.stderr
