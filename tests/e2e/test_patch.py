"""Patching replica sets end to end (issue 4, points 1 and 5): PATCH
/replicaSet/{name} with gpuPatch (up, down, to 0, from 0), volumePatch,
envPatch, ports and limits makes version N+1 in a new container <name>-(N+1)
that keeps everything written to the old container's own filesystem, and
the GPUs and ports gpubox records always match what Docker gives the
containers. A patch that changes nothing makes no version. The older
/containers/{name}/gpu and /volume routes do the same.

One daemon (8 simulated A100s, ports 64000-64049, binds allowed under one
temporary directory) serves the module; every test leaves no set and no
container behind.
"""
import os
import time

import pytest

from conftest import docker_request
from schema import request_schema, response_schema, validate
from rsutil import (IMAGE as IMAGE_NAME, RUN_TAG, call, container, containers_of,
                    containers_with_prefix, create_ok, device_uuids, env_of, execute_ok, held_gpus,
                    history, host_ports, info_ok, lifecycle, module_daemon, operation, patch,
                    patch_ok, rs_path, system_disk, used_ports, wipe, write_system_disk)

PREFIX = f"e2pt{RUN_TAG}"
PORT_START, PORT_END = 64000, 64049


@pytest.fixture(scope="module")
def bind_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("binds")
    for sub, text in (("a", "from a\n"), ("b", "from b\n")):
        (root / sub).mkdir()
        (root / sub / "which.txt").write_text(text)
    return root


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END, allow_binds=True)


def assert_store_matches_docker(d, name):
    """The one container of the set is the record's, and the GPUs and ports
    the record holds are exactly what Docker gives it and what the pools
    count as held."""
    i = info_ok(d, name)
    cs = containers_of(name)
    assert [c["Names"][0].lstrip("/") for c in cs] == [i["containerName"]], cs
    c = container(i["containerName"])
    assert device_uuids(c) == set(i["gpus"])
    assert host_ports(c) == {p["hostPort"] for p in i["ports"]}
    assert held_gpus(d) == set(i["gpus"])
    assert sorted(used_ports(d)) == sorted(p["hostPort"] for p in i["ports"])
    assert "operation" not in i
    return i, c


def visible_gpus(d, name):
    """The cards the container's main process sees; "void" and "none" (or
    nothing) mean none."""
    value = env_of(d, name).get("NVIDIA_VISIBLE_DEVICES", "")
    return set(value.split(",")) if value not in ("", "void", "none") else set()


# --- GPUs ----------------------------------------------------------------------------------


def test_gpus_up_keeps_the_cards_the_port_and_the_system_disk(d):
    name = f"{PREFIX}_up"
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    disk = write_system_disk(d, name)

    data = patch_ok(d, name, {"gpuPatch": {"gpuCount": 4}})
    assert data["changed"] is True
    assert data["containerName"] == f"{name}-2" and data["version"] == 2
    assert data["state"] == "running"
    assert set(created["gpus"]) < set(data["gpus"]) and len(data["gpus"]) == 4
    assert data["ports"] == created["ports"]  # the user's ssh port stays
    assert container(f"{name}-1") is None
    i, c = assert_store_matches_docker(d, name)
    assert c["State"]["Running"] is True
    assert c["Config"]["Labels"]["gpubox.version"] == "2"
    assert i["spec"]["gpuCount"] == 4
    assert visible_gpus(d, name) == set(data["gpus"])
    assert system_disk(d, name) == disk

    op = operation(d, data["operationId"])
    assert op.status == 200, op.json
    assert op.data["kind"] == "patch" and op.data["state"] == "done"
    assert op.data["target"] == name
    assert [s["name"] for s in op.data["steps"]] == [
        "begin", "container-created", "old-stopped", "carry-begin", "carried", "new-started",
        "old-removed", "committed"]
    assert all(s["done"] and s["time"] for s in op.data["steps"])
    assert op.data["data"]["carry"]["method"] in ("overlay", "portable")

    hist = history(d, name).data["history"]
    assert [h["version"] for h in hist] == [2, 1]
    assert [h["spec"]["gpuCount"] for h in hist] == [4, 2]
    assert [h["reason"] for h in hist] == ["patch", "create"]


def test_gpus_down_to_zero_and_back_from_zero(d):
    name = f"{PREFIX}_down"
    created = create_ok(d, name, gpus=3)
    disk = write_system_disk(d, name)

    down = patch_ok(d, name, {"gpuPatch": {"gpuCount": 1}})
    assert down["gpus"] == created["gpus"][:1]  # shrinking keeps the first card
    assert_store_matches_docker(d, name)
    assert visible_gpus(d, name) == set(down["gpus"])

    zero = patch_ok(d, name, {"gpuPatch": {"gpuCount": 0}})
    assert zero["gpus"] == [] and zero["version"] == 3
    _, c = assert_store_matches_docker(d, name)
    assert not c["HostConfig"].get("DeviceRequests")
    assert visible_gpus(d, name) == set()
    assert held_gpus(d) == set()

    back = patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
    assert len(back["gpus"]) == 2 and back["version"] == 4
    assert_store_matches_docker(d, name)
    assert visible_gpus(d, name) == set(back["gpus"])
    assert system_disk(d, name) == disk
    assert [h["version"] for h in history(d, name).data["history"]] == [4, 3, 2, 1]


def test_gpus_the_host_lacks_change_nothing(d):
    name, other = f"{PREFIX}_short", f"{PREFIX}_hog"
    create_ok(d, other, gpus=5)
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    before = info_ok(d, name)
    r = patch(d, name, {"gpuPatch": {"gpuCount": 4}})
    assert r.status == 409 and r.code == 1013, r.json
    assert "GPU not enough" in r.msg
    after = info_ok(d, name)
    assert after == before
    assert container(f"{name}-1")["Id"] == created["containerId"]
    assert container(f"{name}-2") is None
    assert len(held_gpus(d)) == 7


def test_patch_of_a_paused_set_stays_paused(d):
    name = f"{PREFIX}_paused"
    create_ok(d, name, gpus=1)
    disk = write_system_disk(d, name)
    assert lifecycle(d, name, "pause").status == 200
    data = patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
    assert data["state"] == "paused" and data["containerName"] == f"{name}-2"
    c = container(f"{name}-2")
    assert c["State"]["Running"] is False
    assert device_uuids(c) == set(data["gpus"])
    assert held_gpus(d) == set(data["gpus"])  # paused keeps what it holds
    assert lifecycle(d, name, "continue").status == 200
    assert system_disk(d, name) == disk
    assert visible_gpus(d, name) == set(data["gpus"])


# --- volumes, env, ports, limits -----------------------------------------------------------


def test_volume_patch_swaps_a_bind(d, bind_root):
    name = f"{PREFIX}_vol"
    a, b = str(bind_root / "a"), str(bind_root / "b")
    create_ok(d, name, binds=[{"src": a, "dest": "/data"}])
    disk = write_system_disk(d, name)
    assert execute_ok(d, name, ["cat", "/data/which.txt"])["stdout"] == "from a\n"

    data = patch_ok(d, name, {"volumePatch": {"oldBind": {"src": a, "dest": "/data"},
                                              "newBind": {"src": b, "dest": "/data"}}})
    assert data["version"] == 2
    assert execute_ok(d, name, ["cat", "/data/which.txt"])["stdout"] == "from b\n"
    assert system_disk(d, name) == disk
    c = container(f"{name}-2")
    # Docker mounts b as gpuboxd pinned it: a staging path under the data
    # dir holding b's very directory (docs/security.md, "Host binds").
    [source] = [m["Source"] for m in c["Mounts"] if m["Destination"] == "/data"]
    assert source.startswith(str(d.data_dir.resolve()) + "/binds/"), source
    assert os.stat(source).st_ino == os.stat(b).st_ino

    # gpu-docker-api's string form; only oldBind removes, only newBind adds.
    patch_ok(d, name, {"volumePatch": {"oldBind": f"{b}:/data"}})
    assert info_ok(d, name)["spec"]["binds"] == []
    patch_ok(d, name, {"volumePatch": {"newBind": f"{a}:/more:ro"}})
    out = execute_ok(d, name, ["sh", "-c", "cat /more/which.txt; touch /more/x"])
    assert out["stdout"] == "from a\n" and out["exitCode"] != 0  # read-only
    assert system_disk(d, name) == disk

    r = patch(d, name, {"volumePatch": {"oldBind": "/nowhere:/data", "newBind": f"{b}:/data"}})
    assert r.status == 400 and r.code == 1000 and "/nowhere:/data" in r.msg, r.json
    r = patch(d, name, {"volumePatch": {"newBind": "/etc:/hostetc"}})
    assert r.status == 403, r.json
    assert info_ok(d, name)["version"] == 4


def test_env_patch(d):
    name = f"{PREFIX}_env"
    create_ok(d, name, env=["KEEP=1", "DROP=2", "CHANGE=old"])
    patch_ok(d, name, {"envPatch": {"set": ["CHANGE=new", "ADD=3"], "unset": ["DROP"]}})
    env = env_of(d, name)
    assert env["KEEP"] == "1" and env["CHANGE"] == "new" and env["ADD"] == "3"
    assert "DROP" not in env
    patch_ok(d, name, {"envPatch": ["ONLY=yes"]})
    env = env_of(d, name)
    assert env["ONLY"] == "yes" and "KEEP" not in env
    assert info_ok(d, name)["spec"]["env"] == ["ONLY=yes"]


def test_ports_patch_keeps_the_ports_asked_again(d):
    name = f"{PREFIX}_ports"
    created = create_ok(d, name, containerPorts=["22"])
    ssh = created["ports"][0]["hostPort"]

    data = patch_ok(d, name, {"containerPorts": ["22", "8888"]})
    by_cport = {p["containerPort"]: p["hostPort"] for p in data["ports"]}
    assert by_cport[22] == ssh and by_cport[8888] != ssh
    assert PORT_START <= by_cport[8888] <= PORT_END
    assert_store_matches_docker(d, name)

    # Dropping 22 gives its host port back once the new version runs.
    data = patch_ok(d, name, {"containerPorts": ["8888"]})
    assert [p["hostPort"] for p in data["ports"]] == [by_cport[8888]]
    assert ssh not in used_ports(d)
    assert_store_matches_docker(d, name)

    # An explicit host port.
    data = patch_ok(d, name, {"ports": [{"hostPort": PORT_END, "containerPort": 80}]})
    assert data["ports"] == [{"hostPort": PORT_END, "containerPort": 80, "protocol": "tcp"}]
    assert_store_matches_docker(d, name)


def test_limits_patch(d):
    name = f"{PREFIX}_limits"
    create_ok(d, name)
    disk = write_system_disk(d, name)
    patch_ok(d, name, {"cpus": 1.5, "memory": "256MB", "shmSize": "32MB"})
    hc = container(f"{name}-2")["HostConfig"]
    assert hc["NanoCpus"] == 1_500_000_000
    assert hc["Memory"] == 256 * 1024 * 1024
    assert hc["ShmSize"] == 32 * 1024 * 1024
    patch_ok(d, name, {"cpus": None, "memory": 0})
    hc = container(f"{name}-3")["HostConfig"]
    assert hc["NanoCpus"] == 0 and hc["Memory"] == 0
    assert system_disk(d, name) == disk


# --- nothing to change, bad input ----------------------------------------------------------


@pytest.mark.parametrize("body", [None, {}, {"gpuPatch": {"gpuCount": 1}},
                                  {"envPatch": {"unset": ["NOT_THERE"]}},
                                  {"containerPorts": ["22/tcp"]}])
def test_a_patch_that_changes_nothing_makes_no_version(d, body):
    name = f"{PREFIX}_noop"
    created = create_ok(d, name, gpus=1, containerPorts=["22"])
    r = call(d, "PATCH", f"/api/v1/replicaSet/{name}", body)
    assert r.status == 200 and r.code == 200, r.json
    assert "nothing changed" in r.msg
    assert r.data["changed"] is False and r.data["version"] == 1
    assert r.data["containerName"] == f"{name}-1" and "operationId" not in r.data
    assert container(f"{name}-1")["Id"] == created["containerId"]
    assert len(history(d, name).data["history"]) == 1


@pytest.mark.parametrize("body,status,code", [
    ({"gpuPatch": {"gpuCount": -1}}, 400, 1012),
    ({"gpuPatch": {"gpuCount": "2"}}, 400, 1000),
    ({"gpuPatch": 2}, 400, 1000),
    ({"imageName": "gpubox-e2e-absent:v0"}, 422, 1110),
    ({"imageName": 5}, 400, 1000),
    ({"envPatch": {"set": ["NOEQUALS"]}}, 400, 1000),
    ({"containerPorts": ["99999"]}, 400, 1000),
    ({"memory": "1KB"}, 400, 1000),
])
def test_bad_patches_change_nothing(d, body, status, code):
    name = f"{PREFIX}_bad"
    created = create_ok(d, name, gpus=1)
    r = patch(d, name, body)
    assert r.status == status and r.code == code, r.json
    assert info_ok(d, name)["version"] == 1
    assert container(f"{name}-1")["Id"] == created["containerId"]
    assert held_gpus(d) == set(created["gpus"])


def test_patch_of_missing_stopped_and_deleted_sets(d):
    r = patch(d, f"{PREFIX}_nope", {"gpuPatch": {"gpuCount": 1}})
    assert r.status == 404 and r.code == 1100
    name = f"{PREFIX}_stopped"
    create_ok(d, name, gpus=1)
    assert lifecycle(d, name, "stop").status == 200
    # A stopped set's patch waits for its next start (issue 27;
    # test_stopped_changes.py): nothing is taken now.
    r = patch(d, name, {"gpuPatch": {"gpuCount": 2}})
    assert r.status == 200 and r.data["pending"] is True, r.json
    assert held_gpus(d) == set()


def test_operations_route(d):
    r = operation(d, "20200101T000000000-00000000")
    assert r.status == 404 and r.code == 1100
    r = d.get("/api/v1/operations/not%20an%20id")
    assert r.status == 400 and r.code == 1000
    name = f"{PREFIX}_ops"
    created = create_ok(d, name)
    op = operation(d, created["operationId"]).data
    assert op["kind"] == "create" and op["state"] == "done"
    assert [s["name"] for s in op["steps"]] == ["record", "container-created", "started"]
    # Each step says how long it took.
    assert all(isinstance(s["ms"], (int, float)) and s["ms"] >= 0 for s in op["steps"]), op
    p = patch_ok(d, name, {"envPatch": {"set": ["TIMED=1"]}})
    op = operation(d, p["operationId"]).data
    ms = {s["name"]: s["ms"] for s in op["steps"]}
    assert all(v is not None and v >= 0 for v in ms.values()), op
    assert ms["new-started"] > 0 and ms["old-stopped"] > 0


# --- stopping the old container ------------------------------------------------------------


def test_a_shell_that_ignores_sigterm_is_not_waited_for(d):
    """The image's CMD /bin/sh with the TTY gpubox gives every container is
    an interactive shell, which ignores SIGTERM: Docker's stop would wait
    its whole 10 s grace for nothing. The patch stops it at once, and the
    system disk still goes with it."""
    name = f"{PREFIX}_shell"
    create_ok(d, name, cmd=["/bin/sh"])
    execute_ok(d, name, ["sh", "-c", "echo kept > /root/kept"])
    start = time.monotonic()
    p = patch_ok(d, name, {"envPatch": {"set": ["AGAIN=1"]}})
    took = time.monotonic() - start
    steps = {s["name"]: s["ms"] for s in operation(d, p["operationId"]).data["steps"]}
    assert took < 8 and steps["old-stopped"] < 8000, (took, steps)
    assert execute_ok(d, name, ["cat", "/root/kept"])["stdout"] == "kept\n"
    assert_store_matches_docker(d, name)


def test_a_command_that_handles_sigterm_gets_it_and_its_grace(d):
    """A command that traps SIGTERM is signalled and given time: what it
    writes on its way out is in the next version's system disk."""
    name = f"{PREFIX}_trap"
    create_ok(d, name, cmd=["sh", "-c", "trap 'echo bye > /root/bye; exit 0' TERM; "
                                        "while :; do sleep 1; done"])
    patch_ok(d, name, {"envPatch": {"set": ["AGAIN=1"]}})
    assert execute_ok(d, name, ["cat", "/root/bye"])["stdout"] == "bye\n"


# --- the older routes ----------------------------------------------------------------------


def test_older_gpu_and_volume_routes(d, bind_root):
    name = f"{PREFIX}_old"
    a, b = str(bind_root / "a"), str(bind_root / "b")
    create_ok(d, name, gpus=1, binds=[{"src": a, "dest": "/data"}])
    disk = write_system_disk(d, name)

    r = call(d, "PATCH", f"/api/v1/containers/{name}-1/gpu", {"gpuCount": 2})
    assert r.status == 200, r.json
    assert r.data["containerName"] == f"{name}-2" and len(r.data["gpus"]) == 2
    # foo-1 is gone now: only the current version names the set.
    r = call(d, "PATCH", f"/api/v1/containers/{name}-1/gpu", {"gpuCount": 3})
    assert r.status == 404, r.json

    r = call(d, "PATCH", f"/api/v1/containers/{name}-2/volume",
             {"type": "bind", "oldBind": {"src": a, "dest": "/data"},
              "newBind": {"src": b, "dest": "/data"}})
    assert r.status == 200, r.json
    assert r.data["containerName"] == f"{name}-3"
    assert execute_ok(d, name, ["cat", "/data/which.txt"])["stdout"] == "from b\n"
    r = call(d, "PATCH", f"/api/v1/containers/{name}/volume",
             {"type": "volume", "oldBind": f"{b}:/data", "newBind": f"{a}:/data"})
    assert r.status == 400 and "type" in r.msg, r.json
    r = call(d, "PATCH", f"/api/v1/containers/{name}/gpu", {"gpuCount": 2})
    assert r.status == 200 and r.data["changed"] is False
    r = call(d, "PATCH", f"/api/v1/containers/{name}/gpu", {})
    assert r.status == 400 and r.code == 1000
    assert system_disk(d, name) == disk
    assert_store_matches_docker(d, name)
    assert [c["Id"] for c in containers_with_prefix(name)] == \
        [c["Id"] for c in containers_of(name)]


def test_stale_container_port_bindings_do_not_leak(d):
    """After a chain of patches only the last container exists, and no host
    port or card is held that the last version does not hold."""
    name = f"{PREFIX}_chain"
    create_ok(d, name, gpus=1, containerPorts=["22", "80"])
    for body in ({"gpuPatch": {"gpuCount": 3}}, {"containerPorts": ["22"]},
                 {"gpuPatch": {"gpuCount": 0}}, {"containerPorts": ["22", "443"]}):
        patch_ok(d, name, body)
    i, _ = assert_store_matches_docker(d, name)
    assert i["version"] == 5 and len(containers_of(name)) == 1
    r = docker_request("GET", f"/containers/{name}-4/json")
    assert r.status == 404


@pytest.mark.parametrize("method", ["portable", "overlay"])
def test_carry_method_flag(start_daemon, tmp_path, method):
    """--carry-method forces either way of carrying; both keep the disk."""
    d = start_daemon("--simulate-gpus", "2xA100-80GB", "--port-range", "64190-64199",
                     "--carry-method", method)
    name = f"{PREFIX}_{method}"
    try:
        create_ok(d, name, gpus=1)
        disk = write_system_disk(d, name)
        data = patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
        assert data["carry"]["method"] == method
        assert system_disk(d, name) == disk
    finally:
        wipe(d, name)


def card_memory(d, uuid):
    dev = next(x for x in d.get("/api/v1/resources/gpus").data["devices"] if x["uuid"] == uuid)
    return dev["allocatedMemoryMiB"], dev["mode"]


def assert_share_in_container(d, name, uuid, mib, mode="memory"):
    """The container sees its one card and its limit, in the environment of
    its main process and in the read-only file."""
    env = env_of(d, name)
    assert env["NVIDIA_VISIBLE_DEVICES"] == uuid
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{mib}m"
    assert env["GPUBOX_GPU_MEMORY_MIB"] == str(mib)
    assert env["GPUBOX_GPU_SHARE"] == mode
    assert execute_ok(d, name, ["cat", "/etc/gpubox/gpu.env"])["stdout"].splitlines() == [
        f"CUDA_DEVICE_MEMORY_LIMIT_0={mib}m", f"GPUBOX_GPU_MEMORY_MIB={mib}",
        f"GPUBOX_GPU_SHARE={mode}"]


def test_share_patches(start_daemon):
    """Through versions, with the system disk carried each time: a memory
    share grows on its card (counted once, not twice), shrinks, grows past
    its card onto a bigger one, stays as it was when nothing can take it,
    becomes whole cards, becomes a share again from whole cards, and
    becomes a time-slice replica; an env patch keeps the share as it is.
    After every step the pool, the answer and the container agree.
    Without the CUDA limiter, as here, a share's size lives in the
    container's environment, so each change is a new version; with it, a
    size change on the same card is made in place (test_gpu_limiter.py)."""
    d = start_daemon("--simulate-gpus", "2xT4-16GB,1xA100-40GB", "--port-range", "64150-64159",
                     "--cuda-limiter", "off")
    name = f"{PREFIX}_share"
    try:
        r = call(d, "POST", "/api/v1/replicaSet",
                 {"imageName": IMAGE_NAME, "replicaSetName": name, "cmd": ["sleep", "3600"],
                  "gpuMemory": "8GB"})
        assert r.status == 200, r.json
        t4, t4b, a100 = (dev["uuid"] for dev in sorted(
            d.get("/api/v1/resources/gpus").data["devices"], key=lambda x: x["index"]))
        assert r.data["gpus"] == [t4]  # binpack: a T4 leaves the least
        disk = write_system_disk(d, name)
        assert card_memory(d, t4) == (8192, "memory")

        # up: the old 8 GB is not counted on top of the new 12 GB, so it stays on its T4
        data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "12GB"}})
        assert data["gpus"] == [t4] and data["version"] == 2
        assert data["gpuShares"] == [{"uuid": t4, "memoryMiB": 12288, "mode": "memory"}]
        assert card_memory(d, t4) == (12288, "memory")
        assert_share_in_container(d, name, t4, 12288)
        assert system_disk(d, name) == disk

        # down: both T4s would leave 12 GB; the lower index, its own card, wins
        data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "4GB"}})
        assert data["gpus"] == [t4] and data["version"] == 3
        assert card_memory(d, t4) == (4096, "memory")
        assert_share_in_container(d, name, t4, 4096)
        assert system_disk(d, name) == disk

        # up past the T4: the share moves to the A100, and the T4 is free again
        data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "20GB"}})
        assert data["gpus"] == [a100] and data["version"] == 4
        assert card_memory(d, a100) == (20480, "memory")
        assert card_memory(d, t4) == (0, "free")
        assert_share_in_container(d, name, a100, 20480)
        assert system_disk(d, name) == disk

        # more than any card has: refused, and the set keeps its share and container
        before = info_ok(d, name)
        r = patch(d, name, {"gpuPatch": {"gpuMemory": "48GB"}})
        assert r.status == 409 and r.code == 1013, r.json
        assert "none can fit it" in r.msg and "GPU-" not in r.msg, r.msg
        assert info_ok(d, name) == before
        assert card_memory(d, a100) == (20480, "memory")
        assert len(containers_of(name)) == 1
        assert system_disk(d, name) == disk

        same = patch_ok(d, name, {"envPatch": {"set": ["X=1"]}})
        assert same["gpus"] == [a100] and same["gpuShares"] == data["gpuShares"]
        assert card_memory(d, a100) == (20480, "memory")

        # share -> whole: the share is given back in the same exchange, so all
        # three cards are free to choose from and the two lowest are taken
        whole = patch_ok(d, name, {"gpuPatch": {"gpuMemory": 0, "gpuCount": 2}})
        assert whole["gpus"] == [t4, t4b] and whole["gpuShares"] == []
        assert [card_memory(d, u) for u in (t4, t4b, a100)] == [
            (16384, "whole"), (16384, "whole"), (0, "free")]
        assert held_gpus(d) == {t4, t4b}
        assert visible_gpus(d, name) == {t4, t4b}
        env = env_of(d, name)
        assert env["GPUBOX_GPU_SHARE"] == "whole"
        assert not any(k.startswith("CUDA_DEVICE_MEMORY_LIMIT") for k in env), env
        assert info_ok(d, name)["gpuLimits"]["mode"] == "whole"
        assert system_disk(d, name) == disk

        # whole -> share: both whole cards go back, the share lands on the first T4
        back = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "6GB", "gpuCount": 1}})
        assert back["gpus"] == [t4]
        assert back["gpuShares"] == [{"uuid": t4, "memoryMiB": 6144, "mode": "memory"}]
        assert held_gpus(d) == {t4}
        assert card_memory(d, t4b) == (0, "free")
        assert_share_in_container(d, name, t4, 6144)
        assert system_disk(d, name) == disk

        ts = patch_ok(d, name, {"gpuPatch": {"gpuShared": True, "gpuCount": 1}})
        assert ts["gpuShares"][0]["mode"] == "timeslice"
        assert held_gpus(d) == set(ts["gpus"])
        assert env_of(d, name)["GPUBOX_GPU_SHARE"] == "timeslice"
        assert system_disk(d, name) == disk
        assert len(containers_of(name)) == 1
        assert [h["version"] for h in history(d, name).data["history"]] == list(
            range(ts["version"], 0, -1))
    finally:
        wipe(d, name)


def test_answers_conform_to_the_openapi_document(d):
    """The answers of patch, rollback, restart and the operations route, and
    the request bodies the tests send, are what docs/openapi.yaml says."""
    doc = d.get("/openapi.json").json
    name = f"{PREFIX}_schema"
    created = create_ok(d, name, gpus=1, containerPorts=["22"])

    def check(pattern, method, r, body=None):
        errors = validate(r.json, response_schema(doc, pattern, method, r.status), doc)
        assert not errors, f"{method} {pattern} -> {r.json}:\n" + "\n".join(errors)
        if body is not None:
            errors = validate(body, request_schema(doc, pattern, method), doc)
            assert not errors, f"{method} {pattern} body {body}:\n" + "\n".join(errors)

    item = "/api/v1/replicaSet/{name}"
    for body in ({"gpuPatch": {"gpuCount": 2}, "envPatch": {"set": ["A=1"]}},
                 {"volumePatch": {"newBind": {"src": "/nonexistent", "dest": "/x"}}}, {}):
        check(item, "patch", patch(d, name, body), body)
    check(item + "/rollback", "patch", call(d, "PATCH", rs_path(name, "/rollback"),
                                             {"version": 1}), {"version": 1})
    check(item + "/rollback", "patch", call(d, "PATCH", rs_path(name, "/rollback"),
                                             {"version": 2}))
    assert lifecycle(d, name, "stop").status == 200
    check(item + "/restart", "patch", lifecycle(d, name, "restart"))
    check("/api/v1/operations/{id}", "get", operation(d, created["operationId"]))
    check("/api/v1/operations/{id}", "get", operation(d, "20200101T000000000-00000000"))
    check("/api/v1/containers/{name}/gpu", "patch",
          call(d, "PATCH", f"/api/v1/containers/{name}/gpu", {"gpuCount": 0}),
          {"gpuCount": 0})
