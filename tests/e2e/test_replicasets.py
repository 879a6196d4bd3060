"""Replica sets end to end (issue 3): create, inspect, list, history, stop,
pause/continue, execute, commit and delete through gpuboxd's API, checked
against what Docker itself shows: the container <name>-N with its labels,
its state, the GPUs it sees (NVIDIA_VISIBLE_DEVICES, put there by the fake
nvidia hook), its published ports and its binds.

One daemon (8 simulated A100s, ports 61000-61049, binds allowed under one
temporary directory) serves the module; after each test every replica set is
deleted with purge and every container under the module's prefix removed.
"""
import json
import re
import socket
import time
import urllib.request

import pytest

from rsutil import RUN_TAG

from conftest import docker_request
from rsutil import (IMAGE, LABEL_SET, LABEL_VERSION, LONG_RUNNING, assert_refused_unchanged,
                    call, container, containers_with_prefix, create, create_ok, delete, env_of,
                    execute, execute_ok, gpu_devices, gpu_map, held_gpus, history, image, info,
                    info_ok, lifecycle, list_sets, module_daemon, ports_state, remove_image,
                    rs_path, used_ports, wait_until)

PREFIX = "e2rs" + RUN_TAG
PORT_START, PORT_END = 61000, 61049
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def bind_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("binds")
    (root / "data").mkdir()
    (root / "data" / "hello.txt").write_text("hello from the host\n")
    return root


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END, allow_binds=True)


def assert_nothing_held(d):
    assert held_gpus(d) == set()
    assert used_ports(d) == []
    assert containers_with_prefix(PREFIX) == []


# --- create --------------------------------------------------------------------------------


def test_create_runs_container_with_labels_gpus_and_ports(d):
    name = f"{PREFIX}_create"
    data = create_ok(d, name, gpus=2, env=["GREETING=hi there"], containerPorts=["22"])
    assert data["containerName"] == f"{name}-1"
    assert data["name"] == f"{name}-1"
    assert data["replicaSetName"] == name
    assert data["version"] == 1
    assert len(data["gpus"]) == 2 and len(set(data["gpus"])) == 2
    assert len(data["ports"]) == 1
    port = data["ports"][0]
    assert port["containerPort"] == 22 and port["protocol"] == "tcp"
    assert PORT_START <= port["hostPort"] <= PORT_END

    c = container(f"{name}-1")
    assert c is not None, "Docker has no container <name>-1"
    assert c["Id"] == data["containerId"]
    assert c["Config"]["Labels"][LABEL_SET] == name
    assert c["Config"]["Labels"][LABEL_VERSION] == "1"
    assert c["State"]["Running"] is True
    assert c["Config"]["Image"] == IMAGE
    assert c["Config"]["Tty"] is True
    bindings = c["HostConfig"]["PortBindings"]["22/tcp"]
    assert [int(b["HostPort"]) for b in bindings] == [port["hostPort"]]

    env = env_of(d, name)
    assert set(env["NVIDIA_VISIBLE_DEVICES"].split(",")) == set(data["gpus"])
    assert env["GREETING"] == "hi there"

    assert held_gpus(d) == set(data["gpus"])
    for dev in gpu_devices(d):
        held = dev["uuid"] in data["gpus"]
        assert (name in dev["tenants"]) == held, dev
    assert used_ports(d) == [port["hostPort"]]


def test_create_without_gpus_sees_none(d):
    name = f"{PREFIX}_nogpu"
    data = create_ok(d, name, gpus=0)
    assert data["gpus"] == []
    env = env_of(d, name)
    assert env.get("NVIDIA_VISIBLE_DEVICES", "") in ("", "void", "none")
    assert held_gpus(d) == set()
    c = container(f"{name}-1")
    assert not c["HostConfig"].get("DeviceRequests")


def test_published_port_reaches_the_container(d):
    name = f"{PREFIX}_http"
    script = "echo hello-gpubox > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"
    data = create_ok(d, name, cmd=["sh", "-c", script], containerPorts=["8080"])
    host_port = data["ports"][0]["hostPort"]
    body = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/index.html", timeout=2) as r:
                body = r.read().decode()
                break
        except OSError:
            time.sleep(0.2)
    assert body == "hello-gpubox\n", f"nothing served on 127.0.0.1:{host_port}"


def test_explicit_host_port(d):
    name = f"{PREFIX}_explicit"
    data = create_ok(d, name, ports=[{"hostPort": PORT_END - 1, "containerPort": 80},
                                     {"hostPort": PORT_END, "containerPort": 53,
                                      "protocol": "udp"}])
    got = {(p["hostPort"], p["containerPort"], p["protocol"]) for p in data["ports"]}
    assert got == {(PORT_END - 1, 80, "tcp"), (PORT_END, 53, "udp")}
    c = container(f"{name}-1")
    assert c["HostConfig"]["PortBindings"]["80/tcp"][0]["HostPort"] == str(PORT_END - 1)
    assert c["HostConfig"]["PortBindings"]["53/udp"][0]["HostPort"] == str(PORT_END)
    assert set(used_ports(d)) == {PORT_END - 1, PORT_END}


def test_limits_reach_docker(d):
    name = f"{PREFIX}_limits"
    create_ok(d, name, cpus=0.5, memory="64MB", shmSize="16MB")
    hc = container(f"{name}-1")["HostConfig"]
    assert hc["NanoCpus"] == 500_000_000
    assert hc["Memory"] == 64 * MIB
    assert hc["ShmSize"] == 16 * MIB


def test_bind_under_allowed_prefix_works(d, bind_root):
    name = f"{PREFIX}_bind"
    create_ok(d, name, binds=[{"src": str(bind_root / "data"), "dest": "/data"}])
    out = execute_ok(d, name, ["cat", "/data/hello.txt"])
    assert out["stdout"] == "hello from the host\n"
    execute_ok(d, name, ["sh", "-c", "echo from the container > /data/back.txt"])
    assert (bind_root / "data" / "back.txt").read_text() == "from the container\n"


@pytest.mark.parametrize("src", ["/etc", "/var/run/docker.sock", "/proc"])
def test_bind_outside_prefixes_is_refused(d, src):
    r = create(d, f"{PREFIX}_badbind", gpus=1, binds=[{"src": src, "dest": "/mnt/x"}])
    assert r.status == 403 and r.code == 1109, r.json
    assert src in r.msg
    assert_nothing_held(d)
    assert info(d, f"{PREFIX}_badbind").status == 404


def test_bind_through_a_symlink_out_of_the_prefix_is_refused(d, bind_root):
    link = bind_root / "escape"
    if not link.exists():
        link.symlink_to("/etc")
    r = create(d, f"{PREFIX}_symlink", binds=[{"src": str(link), "dest": "/mnt/etc"}])
    assert r.status == 403 and r.code == 1109, r.json
    assert_nothing_held(d)


def test_bind_of_root_or_dotdot_is_refused(d, bind_root):
    for src in ("/", f"{bind_root}/../../etc"):
        r = create(d, f"{PREFIX}_root", binds=[{"src": src, "dest": "/mnt/x"}])
        assert r.status == 400 and r.code == 1000, (src, r.json)
    assert_nothing_held(d)


def test_existing_name_is_1008_in_every_state(d):
    name = f"{PREFIX}_dup"
    create_ok(d, name, gpus=1)
    for action in (None, "pause", "stop"):
        if action:
            assert lifecycle(d, name, action).status == 200
        r = create(d, name, gpus=1)
        assert r.status == 409 and r.code == 1008, (action, r.json)
        assert name in r.msg
    assert held_gpus(d) == set(), "the refused creates or the stop left GPUs held"
    assert len(containers_with_prefix(PREFIX)) == 1


def test_gpu_shortage_is_1013_with_free_count(d):
    create_ok(d, f"{PREFIX}_big", gpus=3)
    before = (gpu_map(d), ports_state(d))
    r = create(d, f"{PREFIX}_toobig", gpus=6, containerPorts=["22"])
    assert r.status == 409 and r.code == 1013, r.json
    assert re.search(r"\b5\b[^0-9]*free|free[^0-9]*\b5\b", r.msg), r.msg
    assert re.search(r"\b6\b", r.msg), r.msg
    assert (gpu_map(d), ports_state(d)) == before
    assert info(d, f"{PREFIX}_toobig").status == 404
    assert container(f"{PREFIX}_toobig-1") is None


def test_port_shortage_is_1014(d):
    n = PORT_END - PORT_START + 2  # one more than the range holds
    r = create(d, f"{PREFIX}_ports", gpus=1, containerPorts=[str(1000 + i) for i in range(n)])
    assert r.status == 409 and r.code == 1014, r.json
    assert_nothing_held(d)


def test_taken_explicit_port_is_1014(d):
    create_ok(d, f"{PREFIX}_holder", ports=[{"hostPort": PORT_START + 5, "containerPort": 22}])
    r = create(d, f"{PREFIX}_taker", gpus=2, ports=[{"hostPort": PORT_START + 5,
                                                      "containerPort": 22}])
    assert r.status == 409 and r.code == 1014, r.json
    assert str(PORT_START + 5) in r.msg
    assert held_gpus(d) == set()
    assert used_ports(d) == [PORT_START + 5]


def test_missing_image_is_422_naming_it(d):
    missing = "gpubox-e2e-no-such-image:v0"
    r = create(d, f"{PREFIX}_noimage", gpus=1, imageName=missing, containerPorts=["22"])
    assert r.status == 422 and r.code == 1110, r.json
    assert missing in r.msg
    assert_nothing_held(d)


def test_host_port_taken_outside_gpubox_is_1014(d):
    """A host port some other program listens on is refused before Docker is
    asked, naming the port."""
    busy = PORT_START + 20
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("0.0.0.0", busy))
        squatter.listen()
        r = create(d, f"{PREFIX}_squat", gpus=2, containerPorts=["80"],
                   ports=[{"hostPort": busy, "containerPort": 22}])
    assert r.status == 409 and r.code == 1014, r.json
    assert str(busy) in r.msg
    assert_nothing_held(d)


def assert_create_gave_everything_back(d, name):
    assert_nothing_held(d)
    assert info(d, name).status == 404
    assert [s for s in list_sets(d, all_=True) if s["name"] == name] == []
    assert history(d, name).status == 404
    data = create_ok(d, name, gpus=2, containerPorts=["22"])
    assert data["containerName"] == f"{name}-1"


def test_failed_docker_start_gives_everything_back(d, bind_root):
    """Docker creates the container but cannot start it (a directory bound
    onto a file of the image): GPUs and ports are free again, no container is
    left, and the name can be used at once, from version 1."""
    name = f"{PREFIX}_badstart"
    r = create(d, name, gpus=2, containerPorts=["22", "80"],
               binds=[{"src": str(bind_root / "data"), "dest": "/bin/busybox"}])
    assert r.status == 500 and r.code == 1004, r.json
    assert f"{name}-1" in r.msg
    assert container(f"{name}-1") is None
    assert_create_gave_everything_back(d, name)


def test_failed_docker_create_gives_everything_back(d):
    """Docker refuses to create the container (more CPUs than the host
    has): the same, nothing is left."""
    name = f"{PREFIX}_badcreate"
    r = create(d, name, gpus=2, containerPorts=["22"], cpus=1000)
    assert r.status == 500 and r.code == 1004, r.json
    assert "CPU" in r.msg
    assert_create_gave_everything_back(d, name)


def test_missing_program_leaves_an_exited_container(d):
    """The container's init starts, then cannot run the command: the set
    exists and Docker's status says the container exited."""
    name = f"{PREFIX}_badcmd"
    create_ok(d, name, gpus=1, cmd=["/no/such/program"])
    assert wait_until(lambda: info_ok(d, name)["status"] == "exited")
    assert info_ok(d, name)["state"] == "running"


def test_bind_of_a_missing_host_dir_is_refused(d, bind_root):
    r = create(d, f"{PREFIX}_nodir", gpus=1, binds=[{"src": str(bind_root / "nope"),
                                                     "dest": "/mnt/x"}])
    assert r.status == 400 and r.code == 1000, r.json
    assert "does not exist" in r.msg
    assert not (bind_root / "nope").exists(), "the host directory was created"
    assert_nothing_held(d)


# --- inspect, list, history ----------------------------------------------------------------


def test_info_list_and_history(d):
    name = f"{PREFIX}_info"
    created = create_ok(d, name, gpus=1, env=["A=1"], containerPorts=["22"])
    i = info_ok(d, name)
    assert i["name"] == name
    assert i["version"] == 1
    assert i["state"] == "running"
    assert i["status"] == "running"
    assert i["containerName"] == f"{name}-1"
    assert i["containerId"] == created["containerId"]
    assert i["gpus"] == created["gpus"]
    assert i["ports"] == created["ports"]
    assert i["spec"]["imageName"] == IMAGE
    assert i["spec"]["gpuCount"] == 1
    assert i["spec"]["env"] == ["A=1"]
    assert i["spec"]["cmd"] == LONG_RUNNING
    assert i["spec"]["containerPorts"] == ["22/tcp"]
    assert isinstance(i["createTime"], str) and i["createTime"]

    listed = [s for s in list_sets(d) if s["name"] == name]
    assert len(listed) == 1
    assert listed[0]["state"] == "running" and listed[0]["status"] == "running"
    assert listed[0]["gpus"] == created["gpus"]
    assert listed[0]["containerName"] == f"{name}-1"

    h = history(d, name)
    assert h.status == 200
    assert len(h.data["history"]) == 1
    entry = h.data["history"][0]
    assert entry["version"] == 1
    assert entry["containerName"] == f"{name}-1"
    assert entry["spec"] == i["spec"]


def test_unknown_set_is_404(d):
    for method, tail, body in (("GET", "", None), ("GET", "/history", None),
                               ("PATCH", "/stop", None), ("PATCH", "/pause", None),
                               ("PATCH", "/continue", None), ("DELETE", "", None),
                               ("POST", "/execute", {"cmd": ["true"]}),
                               ("POST", "/commit", {"newImageName": "gpubox-e2e-x:1"})):
        r = call(d, method, rs_path(f"{PREFIX}_ghost", tail), body)
        assert r.status == 404 and r.code == 1100, (method, tail, r.json)
        assert f"{PREFIX}_ghost" in r.msg


def test_bad_names_in_the_path(d):
    for name, code in (("foo-1", 1003), ("a b", 1106), ("x" * 64, 1106), ("..", 1106)):
        r = call(d, "GET", rs_path(name))
        assert r.status == 400 and r.code == code, (name, r.json)


# --- lifecycle -----------------------------------------------------------------------------


def test_pause_keeps_and_stop_releases(d):
    name = f"{PREFIX}_life"
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    gpus, port = set(created["gpus"]), created["ports"][0]["hostPort"]
    cid = created["containerId"]

    r = lifecycle(d, name, "pause")
    assert r.status == 200, r.json
    assert r.data["state"] == "paused"
    assert container(f"{name}-1")["State"]["Running"] is False
    assert held_gpus(d) == gpus and used_ports(d) == [port]
    i = info_ok(d, name)
    assert i["state"] == "paused" and i["status"] == "exited"

    r = lifecycle(d, name, "continue")
    assert r.status == 200, r.json
    assert r.data["state"] == "running"
    c = container(f"{name}-1")
    assert c["State"]["Running"] is True and c["Id"] == cid
    assert set(env_of(d, name)["NVIDIA_VISIBLE_DEVICES"].split(",")) == gpus

    execute_ok(d, name, ["sh", "-c", "echo kept > /root/marker"])
    r = lifecycle(d, name, "stop")
    assert r.status == 200, r.json
    assert r.data["state"] == "stopped"
    assert set(r.data["released"]["gpus"]) == gpus
    assert [p["hostPort"] for p in r.data["released"]["ports"]] == [port]
    c = container(f"{name}-1")
    assert c is not None, "stop removed the container; its filesystem must be kept"
    assert c["State"]["Running"] is False
    assert held_gpus(d) == set() and used_ports(d) == []
    i = info_ok(d, name)
    assert i["state"] == "stopped" and i["gpus"] == [] and i["ports"] == []
    # The container's own filesystem is still there.
    r = docker_request("GET", f"/containers/{cid}/archive?path=/root/marker")
    assert r.status == 200


def test_state_machine_refusals(d):
    name = f"{PREFIX}_sm"
    create_ok(d, name, gpus=1)
    r = lifecycle(d, name, "continue")
    assert r.status == 409 and r.code == 1107, r.json
    assert "running" in r.msg
    assert lifecycle(d, name, "pause").status == 200
    r = lifecycle(d, name, "pause")
    assert r.status == 409 and r.code == 1107, r.json
    assert "paused" in r.msg
    assert lifecycle(d, name, "stop").status == 200
    for action in ("stop", "pause", "continue"):
        r = lifecycle(d, name, action)
        assert r.status == 409 and r.code == 1107, (action, r.json)
        assert "stopped" in r.msg, r.msg
    r = execute(d, name, ["true"])
    assert r.status == 409, r.json
    assert info_ok(d, name)["state"] == "stopped"


def test_gpus_are_never_released_twice(d):
    """A stopped set's GPUs go to another set; refusing to stop or pause it
    again, and deleting it, must not free the other set's GPUs."""
    first = f"{PREFIX}_first"
    create_ok(d, first, gpus=8)
    assert lifecycle(d, first, "stop").status == 200
    second = create_ok(d, f"{PREFIX}_second", gpus=8)
    assert held_gpus(d) == set(second["gpus"]) and len(second["gpus"]) == 8
    assert lifecycle(d, first, "stop").status == 409
    assert lifecycle(d, first, "pause").status == 409
    r = delete(d, first)
    assert r.status == 200, r.json
    assert r.data["released"]["gpus"] == []
    assert held_gpus(d) == set(second["gpus"])
    for dev in gpu_devices(d):
        assert dev["tenants"] == [f"{PREFIX}_second"], dev
    r = create(d, f"{PREFIX}_third", gpus=1)
    assert r.status == 409 and r.code == 1013, r.json


def test_paused_set_keeps_its_gpus_from_others(d):
    create_ok(d, f"{PREFIX}_p", gpus=6)
    assert lifecycle(d, f"{PREFIX}_p", "pause").status == 200
    r = create(d, f"{PREFIX}_q", gpus=3)
    assert r.status == 409 and r.code == 1013, r.json
    assert re.search(r"\b2\b[^0-9]*free|free[^0-9]*\b2\b", r.msg), r.msg


# --- execute -------------------------------------------------------------------------------


@pytest.fixture
def running(d):
    name = f"{PREFIX}_exec"
    create_ok(d, name)
    return name


def test_execute_separates_stdout_stderr_and_exit_code(d, running):
    out = execute_ok(d, running, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert out["stdout"] == "out\n"
    assert out["stderr"] == "err\n"
    assert out["exitCode"] == 3
    assert out["stdoutTruncated"] is False and out["stderrTruncated"] is False
    assert out["timedOut"] is False


def test_execute_string_runs_in_a_shell_with_workdir(d, running):
    out = execute_ok(d, running, "echo $((40 + 2)) in $(pwd)", workDir="/tmp")
    assert out["stdout"] == "42 in /tmp\n" and out["exitCode"] == 0


def test_execute_missing_program(d, running):
    r = execute(d, running, ["/no/such/program"])
    assert r.status == 400 and r.code == 1000, r.json
    assert "/no/such/program" in r.msg


def test_execute_timeout(d, running):
    t0 = time.monotonic()
    out = execute_ok(d, running, ["sleep", "29"], timeoutSeconds=1)
    assert time.monotonic() - t0 < 10
    assert out["timedOut"] is True
    assert out["exitCode"] != 0
    # The command does not live on in the container.
    ps = wait_until(lambda: "sleep 29" not in execute_ok(d, running, ["ps"])["stdout"], 5)
    assert ps, execute_ok(d, running, ["ps"])["stdout"]


def test_execute_output_is_capped(d, running):
    out = execute_ok(d, running, ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; "
                                              "echo small >&2"])
    assert out["stdoutTruncated"] is True
    assert len(out["stdout"]) == MIB
    assert set(out["stdout"]) == {"a"}
    assert out["stderr"] == "small\n" and out["stderrTruncated"] is False
    assert out["exitCode"] == 0


@pytest.mark.parametrize("body, code", [
    ({"cmd": []}, 1000),
    ({"cmd": [""]}, 1000),
    ({"cmd": ""}, 1000),
    ({}, 1000),
    ({"cmd": 5}, 1000),
    ({"cmd": ["ls", 5]}, 1000),
    ({"cmd": ["ls"], "workDir": "tmp"}, 1000),
    ({"cmd": ["ls"], "workDir": 7}, 1000),
    ({"cmd": ["ls"], "timeoutSeconds": 0}, 1000),
    ({"cmd": ["ls"], "timeoutSeconds": 3601}, 1000),
    ({"cmd": ["ls"], "timeoutSeconds": "5"}, 1000),
    ({"cmd": ["ls"], "timeoutSeconds": 1.5}, 1000),
    ({"cmd": ["ls"], "tty": True}, 1000),
])
def test_execute_bad_input(d, running, body, code):
    r = call(d, "POST", rs_path(running, "/execute"), body)
    assert r.status == 400 and r.code == code, r.json


# --- commit --------------------------------------------------------------------------------


class Made(list):
    """Image names a test made (the list), the image ids a tag moved away
    from, and the sets it ran from them: all removed at teardown, sets
    first, so no image is left dangling under a container."""

    def __init__(self):
        super().__init__()
        self.ids = []
        self.sets = []


@pytest.fixture
def images(d):
    made = Made()
    yield made
    for name in made.sets:
        delete(d, name, purge=True)
    for name in [*made, *made.ids]:
        remove_image(name)


def test_commit_creates_an_image_that_keeps_the_files(d, images):
    name = f"{PREFIX}_commit"
    create_ok(d, name)
    execute_ok(d, name, ["sh", "-c", "echo committed > /root/inside.txt"])
    target = "gpubox-e2e-rs-commit:v1"
    images.append(target)
    r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": target})
    assert r.status == 200, r.json
    assert r.data["imageName"] == target
    img = image(target)
    assert img is not None and img["Id"] == r.data["imageId"]

    clone = f"{PREFIX}_clone"
    images.sets.append(clone)
    create_ok(d, clone, imageName=target)
    assert execute_ok(d, clone, ["cat", "/root/inside.txt"])["stdout"] == "committed\n"


def test_commit_of_a_stopped_set_keeps_what_was_written(d, images):
    name = f"{PREFIX}_commitstop"
    create_ok(d, name, gpus=1)
    execute_ok(d, name, ["sh", "-c", "echo before-stop > /root/kept.txt"])
    assert lifecycle(d, name, "stop").status == 200
    target = "gpubox-e2e-rs-commit:stopped"
    images.append(target)
    r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": target})
    assert r.status == 200, r.json
    clone = f"{PREFIX}_clone2"
    images.sets.append(clone)
    create_ok(d, clone, imageName=target, cmd=LONG_RUNNING)
    assert execute_ok(d, clone, ["cat", "/root/kept.txt"])["stdout"] == "before-stop\n"


def test_commit_refuses_an_existing_tag_unless_overwrite(d, images):
    name = f"{PREFIX}_commit2"
    create_ok(d, name)
    target = "gpubox-e2e-rs-commit:v2"
    images.append(target)
    first = call(d, "POST", rs_path(name, "/commit"), {"newImageName": target})
    assert first.status == 200, first.json
    images.ids.append(first.data["imageId"])

    execute_ok(d, name, ["sh", "-c", "echo changed > /root/changed.txt"])
    r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": target})
    assert r.status == 409 and r.code == 1008, r.json
    assert "overwrite" in r.msg
    assert image(target)["Id"] == first.data["imageId"]

    r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": target, "overwrite": True})
    assert r.status == 200, r.json
    assert r.data["imageId"] != first.data["imageId"]
    assert image(target)["Id"] == r.data["imageId"]


def test_commit_never_overwrites_a_foreign_tag(d, images):
    name = f"{PREFIX}_commit3"
    create_ok(d, name)
    foreign = "gpubox-e2e-rs-foreign:v1"
    images.append(foreign)
    r = docker_request("POST", f"/images/{IMAGE}/tag?repo=gpubox-e2e-rs-foreign&tag=v1")
    assert r.status == 201, r.json
    original = image(foreign)["Id"]
    r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": foreign, "overwrite": True})
    assert r.status == 403 and r.code == 1109, r.json
    assert "not created by gpubox" in r.msg
    assert image(foreign)["Id"] == original
    assert image(IMAGE)["Id"] == original


@pytest.mark.parametrize("body, code", [
    ({"newImageName": "Bad Name"}, 1000),
    ({"newImageName": "UPPER:v1"}, 1000),
    ({"newImageName": "x@sha256:00"}, 1000),
    ({"newImageName": ""}, 1000),
    ({}, 1000),
    ({"newImageName": 5}, 1000),
    ({"newImageName": "ok:v1", "overwrite": "yes"}, 1000),
    ({"newImageName": "ok:v1", "message": "x"}, 1000),
])
def test_commit_bad_input(d, body, code):
    name = f"{PREFIX}_commit4"
    if info(d, name).status == 404:
        create_ok(d, name)
    r = call(d, "POST", rs_path(name, "/commit"), body)
    assert r.status == 400 and r.code == code, r.json
    assert image("ok:v1") is None


# --- delete --------------------------------------------------------------------------------


def test_delete_frees_gpus_and_ports_and_keeps_history(d):
    name = f"{PREFIX}_del"
    create_ok(d, name, gpus=3, containerPorts=["22", "8888"])
    r = delete(d, name)
    assert r.status == 200, r.json
    assert r.data["purged"] is False
    assert len(r.data["released"]["gpus"]) == 3 and len(r.data["released"]["ports"]) == 2
    assert_nothing_held(d)
    assert container(f"{name}-1") is None
    assert [s for s in list_sets(d) if s["name"] == name] == []
    deleted = [s for s in list_sets(d, all_=True) if s["name"] == name]
    assert len(deleted) == 1 and deleted[0]["state"] == "deleted"
    h = history(d, name)
    assert h.status == 200 and [e["version"] for e in h.data["history"]] == [1]

    again = create_ok(d, name, gpus=1)
    assert again["containerName"] == f"{name}-2" and again["version"] == 2
    assert container(f"{name}-2")["Config"]["Labels"][LABEL_VERSION] == "2"
    h = history(d, name)
    assert [e["version"] for e in h.data["history"]] == [2, 1]


def test_purge_forgets_the_history_and_restarts_at_1(d):
    name = f"{PREFIX}_purge"
    create_ok(d, name, gpus=1)
    assert delete(d, name).status == 200
    create_ok(d, name, gpus=1)  # version 2
    r = delete(d, name, purge=True)
    assert r.status == 200 and r.data["purged"] is True, r.json
    assert history(d, name).status == 404
    assert info(d, name).status == 404
    assert [s for s in list_sets(d, all_=True) if s["name"] == name] == []
    assert_nothing_held(d)
    data = create_ok(d, name, gpus=1)
    assert data["containerName"] == f"{name}-1" and data["version"] == 1


def test_delete_of_paused_and_stopped_sets(d):
    for action in ("pause", "stop"):
        name = f"{PREFIX}_del_{action}"
        create_ok(d, name, gpus=2, containerPorts=["22"])
        assert lifecycle(d, name, action).status == 200
        r = delete(d, name)
        assert r.status == 200, r.json
        assert container(f"{name}-1") is None
        assert_nothing_held(d)


def test_delete_bad_query(d):
    name = f"{PREFIX}_delq"
    create_ok(d, name)
    r = call(d, "DELETE", rs_path(name, "?purge=maybe"))
    assert r.status == 400 and r.code == 1000, r.json
    assert info_ok(d, name)["state"] == "running"


# --- bad input over HTTP changes nothing ---------------------------------------------------


GOOD = {"imageName": IMAGE, "replicaSetName": f"{PREFIX}_bad", "gpuCount": 1,
        "containerPorts": ["22"]}


@pytest.mark.parametrize("raw, status, code", [
    (b'{"imageName": "x", ', 400, 1000),
    (b"", 400, 1000),
    (b"[1, 2]", 400, 1000),
    (b"nonsense", 400, 1000),
    (json.dumps({**GOOD, "gpuCount": "1"}).encode(), 400, 1000),
    (json.dumps({**GOOD, "gpuCount": 1.0}).encode(), 400, 1000),
    (json.dumps({**GOOD, "env": "A=1"}).encode(), 400, 1000),
    (json.dumps({**GOOD, "binds": {"src": "/x"}}).encode(), 400, 1000),
    (json.dumps({**GOOD, "replicaSetName": 7}).encode(), 400, 1000),
    (json.dumps({**GOOD, "gpucount": 1}).encode(), 400, 1000),
    (json.dumps({**GOOD, "gpuCount": -1}).encode(), 400, 1012),
    (json.dumps({**GOOD, "gpuCount": 10 ** 6}).encode(), 400, 1000),
    (json.dumps({**GOOD, "imageName": ""}).encode(), 400, 1001),
    (json.dumps({k: v for k, v in GOOD.items() if k != "replicaSetName"}).encode(), 400, 1002),
    (json.dumps({**GOOD, "replicaSetName": "a-b"}).encode(), 400, 1003),
    (json.dumps({**GOOD, "replicaSetName": "a/b"}).encode(), 400, 1106),
    (json.dumps({**GOOD, "containerPorts": ["70000"]}).encode(), 400, 1000),
    (json.dumps({**GOOD, "env": ["NOEQUALS"]}).encode(), 400, 1000),
    (json.dumps({**GOOD, "cpus": -1}).encode(), 400, 1000),
    (json.dumps({**GOOD, "memory": "lots"}).encode(), 400, 1000),
    (json.dumps({**GOOD, "memory": "5XB"}).encode(), 400, 1029),
    (b"{" + b'"pad": "' + b"x" * (MIB + 10) + b'"}', 413, 1103),
])
def test_bad_create_changes_nothing(d, raw, status, code):
    create_ok(d, f"{PREFIX}_bystander", gpus=1, containerPorts=["22"])
    r = assert_refused_unchanged(d, PREFIX, "POST", "/api/v1/replicaSet", raw, status, code)
    assert r.data is None


@pytest.mark.parametrize("method, tail, raw, code", [
    ("PATCH", "/stop", b"{oops", 1000),
    ("PATCH", "/pause", b'{"force": true}', 1000),
    ("PATCH", "/continue", b"[]", 1000),
    ("DELETE", "", b'{"purge": "yes"', 1000),
    ("DELETE", "", b'{"purge": true}', 1000),
    ("POST", "/execute", b'{"cmd": ["ls"', 1000),
    ("POST", "/commit", b'{"newImageName": ["a"]}', 1000),
])
def test_bad_bodies_on_set_routes_change_nothing(d, method, tail, raw, code):
    name = f"{PREFIX}_target"
    create_ok(d, name, gpus=1, containerPorts=["22"])
    assert_refused_unchanged(d, PREFIX, method, rs_path(name, tail), raw, 400, code)
    assert container(f"{name}-1")["State"]["Running"] is True


def test_body_over_1mib_on_execute_is_413(d):
    name = f"{PREFIX}_big"
    create_ok(d, name)
    raw = json.dumps({"cmd": ["echo", "x" * (MIB + 1)]}).encode()
    r = call(d, "POST", rs_path(name, "/execute"), raw=raw)
    assert r.status == 413 and r.code == 1103


def test_list_bad_flag(d):
    r = call(d, "GET", "/api/v1/replicaSet?all=yes")
    assert r.status == 400 and r.code == 1000, r.json


def test_routes_are_in_openapi(d):
    paths = d.get("/openapi.json").json["paths"]
    assert {"post", "get"} <= set(paths["/api/v1/replicaSet"])
    assert {"get", "delete"} <= set(paths["/api/v1/replicaSet/{name}"])
    for tail, method in (("history", "get"), ("stop", "patch"), ("pause", "patch"),
                         ("continue", "patch"), ("execute", "post"), ("commit", "post")):
        assert method in paths[f"/api/v1/replicaSet/{{name}}/{tail}"], tail


def test_stop_and_pause_of_a_shell_are_not_waited_for(d):
    """An interactive /bin/sh (the test image's CMD, with the TTY gpubox
    gives) ignores SIGTERM: stop and pause end it at once instead of
    waiting Docker's whole grace for nothing."""
    name = f"{PREFIX}_shellstop"
    create_ok(d, name, cmd=["/bin/sh"])

    def shell_ignores_term():
        """The shell (docker-init's one child) has started and set SIGTERM
        aside (SigIgn bit 15), as it does a moment after its container
        starts; before that moment it is a process like any other."""
        c = container(info_ok(d, name)["containerName"])
        init = c["State"]["Pid"] if c and c["State"]["Running"] else 0
        try:
            with open(f"/proc/{init}/task/{init}/children") as f:
                pid = int(f.read().split()[0])
            with open(f"/proc/{pid}/status") as f:
                ign = next(ln for ln in f if ln.startswith("SigIgn:")).split()[1]
        except (OSError, StopIteration, IndexError, ValueError):
            return False
        return bool(int(ign, 16) & (1 << 14))

    for action, state in (("pause", "paused"), ("continue", "running"), ("stop", "stopped")):
        if state != "running":
            assert wait_until(shell_ignores_term), "the shell never ignored SIGTERM"
        start = time.monotonic()
        assert lifecycle(d, name, action).status == 200
        assert time.monotonic() - start < 6, action
        assert info_ok(d, name)["state"] == state
