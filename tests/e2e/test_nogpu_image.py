"""A start without cards, and another image with the same data (issue 18,
points 4 and 5), end to end against the real dockerd.

PATCH /replicaSet/{name}/restart {"gpuCount": 0} (`gpubox start --no-gpu`)
runs the next version without cards, keeping binds, env, ports and the
system disk; the set's GPU request is kept aside (`gpusAside`) and the
following normal start takes cards again. A patch of `imageName` makes a
new version from the other image with the same binds, env, ports and
cards, without the old system disk; a rollback returns to the old image.

One daemon (8 simulated A100s, ports 62200-62249, binds allowed under one
temporary directory) serves the module.
"""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR
from rsutil import (IMAGE, RUN_TAG, call, container, containers_of, create_ok, device_uuids,
                    env_of, execute_ok, held_gpus, history, host_ports, info_ok, lifecycle,
                    module_daemon, patch, patch_ok, remove_image, rollback, rs_path, snapshot,
                    used_ports)

PREFIX = f"e2ng{RUN_TAG}"
PORT_START, PORT_END = 62200, 62249
CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
OTHER = f"gpubox-e2e-other{RUN_TAG.lower()}:v1"


@pytest.fixture(scope="module")
def bind_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("binds")
    (root / "data").mkdir()
    (root / "data" / "kept.txt").write_text("the user's data\n")
    return root


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END, allow_binds=True)


@pytest.fixture(scope="module")
def other_image(daemon):
    """Another image: the test image with a file of its own, committed from
    a set through gpubox (so it has layers the test image lacks)."""
    name = f"{PREFIX}_mk"
    create_ok(daemon, name, 0)
    assert execute_ok(daemon, name, ["sh", "-c", "echo other > /other-image.txt"])["exitCode"] == 0
    r = call(daemon, "POST", rs_path(name, "/commit"), {"newImageName": OTHER})
    assert r.status == 200, r.json
    call(daemon, "DELETE", rs_path(name, "?purge=true"))
    yield OTHER
    remove_image(OTHER)


def restart(d, name, body=None):
    return call(d, "PATCH", rs_path(name, "/restart"), body)


def cat(d, name, path):
    out = execute_ok(d, name, ["sh", "-c", f"cat {path} 2>/dev/null || echo absent"])
    return out["stdout"].strip()


def assert_docker_holds(d, name):
    """The one container of the set gets exactly the cards and ports the
    record says it holds."""
    i = info_ok(d, name)
    assert [c["Names"][0].lstrip("/") for c in containers_of(name)] == [i["containerName"]]
    c = container(i["containerName"])
    assert device_uuids(c) == set(i["gpus"])
    assert host_ports(c) == {p["hostPort"] for p in i["ports"]}
    return i


def make_set(d, bind_root, name, gpus=2):
    created = create_ok(d, name, gpus, containerPorts=["22"], env=["KEEP=1"],
                        binds=[{"src": str(bind_root / "data"), "dest": "/data"}])
    execute_ok(d, name, ["sh", "-c", "echo mine > /root/installed.txt"])
    return created


# --- no-card start ------------------------------------------------------------------------


def test_running_set_restarts_without_cards_and_takes_them_again(d, bind_root):
    name = f"{PREFIX}_run"
    created = make_set(d, bind_root, name)
    r = restart(d, name, {"gpuCount": 0})
    assert r.status == 200, r.json
    assert r.data["version"] == 2 and r.data["gpus"] == []
    assert r.data["gpusAside"]["gpuCount"] == 2
    assert r.data["ports"] == created["ports"]  # the ssh port stays
    i = assert_docker_holds(d, name)
    assert i["state"] == "running" and i["gpus"] == [] and i["gpusAside"]["gpuCount"] == 2
    assert held_gpus(d) == set()  # the cards are free for others
    # everything else stays: the system disk, the bind, the environment
    assert cat(d, name, "/root/installed.txt") == "mine"
    assert cat(d, name, "/data/kept.txt") == "the user's data"
    env = env_of(d, name)
    assert env["KEEP"] == "1" and env.get("NVIDIA_VISIBLE_DEVICES", "void") in ("void", "none", "")
    assert [h["reason"] for h in history(d, name).data["history"]][:1] == ["restart without cards"]

    # a plain restart takes cards again, as a new version
    r = restart(d, name)
    assert r.status == 200, r.json
    assert r.data["version"] == 3 and len(r.data["gpus"]) == 2
    i = assert_docker_holds(d, name)
    assert "gpusAside" not in i and i["spec"]["gpuCount"] == 2
    assert held_gpus(d) == set(i["gpus"])
    assert cat(d, name, "/root/installed.txt") == "mine"


def test_stopped_set_starts_without_cards_then_with_them(d, bind_root):
    name = f"{PREFIX}_stp"
    created = make_set(d, bind_root, name, gpus=1)
    assert lifecycle(d, name, "stop").status == 200
    assert held_gpus(d) == set() and used_ports(d) == []
    r = restart(d, name, {"gpuCount": 0})
    assert r.status == 200, r.json
    assert r.data["gpus"] == [] and r.data["sameContainer"] is False
    assert r.data["ports"] == created["ports"]
    i = assert_docker_holds(d, name)
    assert i["state"] == "running" and held_gpus(d) == set()
    assert cat(d, name, "/root/installed.txt") == "mine"
    # stop again, start normally: cards again (the same one, it is free)
    assert lifecycle(d, name, "stop").status == 200
    r = restart(d, name)
    assert r.status == 200, r.json
    assert r.data["gpus"] == created["gpus"]
    i = assert_docker_holds(d, name)
    assert "gpusAside" not in i and cat(d, name, "/root/installed.txt") == "mine"


def test_no_card_start_through_the_cli(d, bind_root):
    name = f"{PREFIX}_cli"
    make_set(d, bind_root, name, gpus=1)
    assert lifecycle(d, name, "stop").status == 200
    env = {**os.environ, "GPUBOX_HOST": d.url}
    env.pop("GPUBOX_TOKEN", None)
    p = subprocess.run([str(CLI), "start", "--no-gpu", name], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "runs without its 1 card(s)" in p.stdout
    assert info_ok(d, name)["gpus"] == []
    p = subprocess.run([str(CLI), "restart", name], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert len(info_ok(d, name)["gpus"]) == 1


@pytest.mark.parametrize("raw,status,code", [
    (b'{"gpuCount": 2}', 400, 1000),
    (b'{"gpuCount": -1}', 400, 1000),
    (b'{"gpuCount": "0"}', 400, None),
    (b'{"gpus": 0}', 400, 1000),
    (b'{"gpuCount": ', 400, None),
])
def test_bad_restart_bodies_change_nothing(d, bind_root, raw, status, code):
    name = f"{PREFIX}_bad"
    make_set(d, bind_root, name, gpus=1)
    before = snapshot(d, PREFIX)
    r = call(d, "PATCH", rs_path(name, "/restart"), raw=raw)
    assert r.status == status, r.json
    if code is not None:
        assert r.code == code, r.json
    assert snapshot(d, PREFIX) == before


# --- another image, same data ---------------------------------------------------------------


def test_patch_image_keeps_data_not_system_disk_and_rollback_returns(d, bind_root,
                                                                     other_image):
    name = f"{PREFIX}_img"
    created = make_set(d, bind_root, name)
    r = patch(d, name, {"imageName": other_image})
    assert r.status == 200, r.json
    out = r.data
    assert out["version"] == 2 and out["imageName"] == other_image
    assert out["systemDiskCarried"] is False and out["carry"]["method"] == "none"
    assert "not carried" in out["carry"]["note"]
    assert out["gpus"] == created["gpus"] and out["ports"] == created["ports"]
    i = assert_docker_holds(d, name)
    assert i["spec"]["imageName"] == other_image
    assert container(i["containerName"])["Config"]["Image"] == other_image
    assert cat(d, name, "/other-image.txt") == "other"  # the new image's files
    assert cat(d, name, "/root/installed.txt") == "absent"  # the old disk is not carried
    assert cat(d, name, "/data/kept.txt") == "the user's data"  # the bind is
    assert env_of(d, name)["KEEP"] == "1"

    r = rollback(d, name, 1)
    assert r.status == 200, r.json
    assert r.data["version"] == 3 and r.data["imageName"] == IMAGE
    assert r.data["systemDiskCarried"] is False
    i = assert_docker_holds(d, name)
    assert i["spec"]["imageName"] == IMAGE and i["gpus"] == created["gpus"]
    assert cat(d, name, "/other-image.txt") == "absent"
    assert cat(d, name, "/data/kept.txt") == "the user's data"


def test_patch_to_a_missing_image_changes_nothing(d, bind_root):
    name = f"{PREFIX}_miss"
    make_set(d, bind_root, name, gpus=1)
    before = snapshot(d, PREFIX)
    r = patch(d, name, {"imageName": "gpubox-e2e-no-such-image:v0"})
    assert r.status == 422 and r.code == 1110, r.json
    assert "gpubox-e2e-no-such-image" in r.msg
    assert snapshot(d, PREFIX) == before
    for bad in (5, "", None, "UPPER/Case:tag"):
        r = patch(d, name, {"imageName": bad})
        assert r.status in (400, 422) and r.code != 200, (bad, r.json)
        assert snapshot(d, PREFIX) == before


def test_same_image_patch_still_carries_the_disk(d, bind_root):
    name = f"{PREFIX}_same"
    make_set(d, bind_root, name, gpus=1)
    out = patch_ok(d, name, {"imageName": IMAGE, "envPatch": {"set": ["NEW=2"]}})
    assert out["systemDiskCarried"] is True
    assert cat(d, name, "/root/installed.txt") == "mine"
