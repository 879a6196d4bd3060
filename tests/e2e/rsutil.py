"""Helpers for the replica-set end-to-end tests: calls on gpuboxd's API, a
look at Docker itself through the Engine API, and the clean-up that removes
every container a test module created (by its gpubox.replicaset label and the
module's name prefix), even when a test failed half-way.

Each test module names its replica sets with its own prefix and gives its
daemon its own --port-range window, so modules never see each other's
containers or ports; module_daemon makes a module's two fixtures from
those two. The windows lie above Linux's ephemeral port range
(32768-60999 by default): a host port that is also the local port of some
outgoing connection cannot be published, and gpubox rightly refuses it.
"""
import json
import os
import re
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import Daemon, docker_request

IMAGE = os.environ.get("GPUBOX_TEST_IMAGE", "gpubox-test:latest")
LONG_RUNNING = ["sleep", "3600"]
LABEL_SET = "gpubox.replicaset"
LABEL_VERSION = "gpubox.version"
# Set names carry a tag of this test run, so two runs sharing one dockerd
# (developers' worktrees) never clean up each other's containers.
RUN_TAG = "%04x" % (os.getpid() & 0xffff)


def start_module_daemon(tmp, port_range, *extra):
    """A daemon with 8 simulated A100s and its own port window."""
    return Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"),
                   "--simulate-gpus", "8xA100-80GB", "--port-range", port_range, *extra],
                  tmp / "data", tmp / "gpuboxd.log").start()


def module_daemon(prefix, port_start, port_end, *, allow_binds=False):
    """A test module's two fixtures, `daemon, d = module_daemon(...)`.

    daemon: one daemon for the whole module (start_module_daemon with the
    window port_start-port_end; with allow_binds, binds allowed under the
    module's own bind_root fixture), wiped and stopped after its last test.
    d: that daemon for one test, left with no replica set and no container
    under prefix after each test whatever the test did."""

    @pytest.fixture(scope="module")
    def daemon(request, tmp_path_factory):
        extra = (("--bind-prefixes", str(request.getfixturevalue("bind_root")))
                 if allow_binds else ())
        started = start_module_daemon(tmp_path_factory.mktemp(prefix),
                                      f"{port_start}-{port_end}", *extra)
        yield started
        try:
            wipe(started, prefix)
        finally:
            started.stop()
            unmount_staged_binds(started.data_dir)

    @pytest.fixture
    def d(daemon):
        yield daemon
        wipe(daemon, prefix)

    return daemon, d


def call(d, method, path, body=None, raw=None):
    """One API call; body is JSON-encoded, raw is sent as it is."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"Content-Type": "application/json"} if data is not None else {}
    return d.request(method, path, body=data, headers=headers)


def rs_path(name, tail=""):
    return f"/api/v1/replicaSet/{urllib.parse.quote(name, safe='')}{tail}"


def create(d, name, gpus=0, **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": gpus}
    body.setdefault("cmd", LONG_RUNNING)
    body.update(spec)
    return call(d, "POST", "/api/v1/replicaSet", body)


def create_ok(d, name, gpus=0, **spec):
    r = create(d, name, gpus, **spec)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def info(d, name):
    return call(d, "GET", rs_path(name))


def info_live(d, name):
    """The set's info as the API answers it, live usage included."""
    r = info(d, name)
    assert r.status == 200, (r.status, r.json)
    return r.data["info"]


def info_ok(d, name):
    """The set's info without the live usage (still): what tests compare
    before and after a change is the set, not a reading of the moment."""
    return still(info_live(d, name))


def history(d, name):
    return call(d, "GET", rs_path(name, "/history"))


def lifecycle(d, name, action):
    return call(d, "PATCH", rs_path(name, "/" + action))


def execute(d, name, cmd, **fields):
    return call(d, "POST", rs_path(name, "/execute"), {"cmd": cmd, **fields})


def execute_ok(d, name, cmd, **fields):
    r = execute(d, name, cmd, **fields)
    assert r.status == 200, (r.status, r.json)
    return r.data


def delete(d, name, purge=False):
    return call(d, "DELETE", rs_path(name, "?purge=true" if purge else ""))


def list_sets(d, all_=False):
    r = call(d, "GET", "/api/v1/replicaSet" + ("?all=true" if all_ else ""))
    assert r.status == 200, (r.status, r.json)
    return r.data["replicaSets"]


def gpu_map(d):
    """{uuid: 0|1} from /resources/gpus."""
    return d.get("/api/v1/resources/gpus").data["gpus"]


def gpu_devices(d):
    return d.get("/api/v1/resources/gpus").data["devices"]


def held_gpus(d):
    return {u for u, v in gpu_map(d).items() if v}


def used_ports(d):
    return d.get("/api/v1/resources/ports").data["ports"]["usedPorts"]


def ports_state(d):
    return d.get("/api/v1/resources/ports").data["ports"]


def container(name):
    """Docker's inspect of a container, or None when Docker has none."""
    r = docker_request("GET", f"/containers/{name}/json")
    if r.status == 404:
        return None
    assert r.status == 200, (r.status, r.json)
    return r.json


def containers_with_prefix(prefix):
    """Every container (running or not) whose gpubox.replicaset label starts
    with prefix."""
    filters = urllib.parse.quote(json.dumps({"label": [LABEL_SET]}))
    r = docker_request("GET", f"/containers/json?all=1&filters={filters}")
    assert r.status == 200, r.json
    return [c for c in r.json if c["Labels"].get(LABEL_SET, "").startswith(prefix)]


def remove_containers(prefix):
    for c in containers_with_prefix(prefix):
        docker_request("DELETE", f"/containers/{c['Id']}?force=1&v=1")


def remove_image(name):
    docker_request("DELETE", f"/images/{urllib.parse.quote(name, safe='')}?force=1")


def image(name):
    r = docker_request("GET", f"/images/{urllib.parse.quote(name, safe='')}/json")
    return r.json if r.status == 200 else None


def env_of(d, name):
    """The environment of the container's main process, read through the
    execute API. Docker's nvidia device driver puts NVIDIA_VISIBLE_DEVICES
    into the environment of the container's process (as the real
    nvidia-container-runtime does), not into the config that exec'd
    commands inherit, so a plain `env` through execute would not show it."""
    out = execute_ok(d, name, ["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"])
    assert out["exitCode"] == 0, out
    return dict(line.split("=", 1) for line in out["stdout"].splitlines() if "=" in line)


def wipe(d, prefix):
    """Delete (with purge) every replica set the API knows, then remove any
    container left in Docker under prefix: a failed test must not leave GPUs,
    ports or containers to the next one."""
    try:
        for rs in list_sets(d, all_=True):
            delete(d, rs["name"], purge=True)
    finally:
        remove_containers(prefix)


def unmount_staged_binds(data_dir):
    """Unmount what gpuboxd staged under data_dir/binds (docs/security.md,
    "Host binds") and a test left behind (a daemon killed, a test failed
    before its sets were deleted): pytest's clean-up of old temporary
    directories would otherwise delete through those mounts into the bound
    host directories."""
    root = os.path.realpath(os.path.join(str(data_dir), "binds")) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for p in sorted((p for p in points if p.startswith(root)), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], check=False)


def snapshot(d, prefix):
    """What a refused request must leave as it was: every set the API knows,
    the GPU and port pools, and the containers under prefix. A set's live
    usage (the monitor's last sample) is left out: it moves on its own."""
    return (still(list_sets(d, all_=True)), gpu_map(d), ports_state(d),
            sorted(c["Id"] for c in containers_with_prefix(prefix)))


def assert_refused_unchanged(d, prefix, method, path, raw, status, code):
    """Send raw as the body of METHOD path: it must be refused with status
    and code, and change nothing snapshot sees. Returns the answer."""
    before = snapshot(d, prefix)
    r = call(d, method, path, raw=raw)
    assert r.status == status and r.code == code, r.json
    assert snapshot(d, prefix) == before
    return r


def wait_until(check, timeout=10.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# --- new versions: patch, rollback, restart, operations ------------------------------------


def patch(d, name, body):
    return call(d, "PATCH", rs_path(name), body)


def patch_ok(d, name, body):
    r = patch(d, name, body)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def rollback(d, name, version):
    return call(d, "PATCH", rs_path(name, "/rollback"), {"version": version})


def operation(d, op_id):
    return d.get(f"/api/v1/operations/{urllib.parse.quote(op_id, safe='')}")


def containers_of(name):
    """Every container (running or not) whose gpubox.replicaset label is name."""
    filters = urllib.parse.quote(json.dumps({"label": [f"{LABEL_SET}={name}"]}))
    r = docker_request("GET", f"/containers/json?all=1&filters={filters}")
    assert r.status == 200, r.json
    return r.json


def device_uuids(c):
    """The GPU UUIDs Docker was asked to give container c (inspect)."""
    reqs = c["HostConfig"].get("DeviceRequests") or []
    return {u for req in reqs for u in (req.get("DeviceIDs") or [])}


def host_ports(c):
    """The host ports container c publishes (inspect), as ints."""
    bindings = c["HostConfig"].get("PortBindings") or {}
    return {int(b["HostPort"]) for bs in bindings.values() for b in (bs or [])}


# The system disk: what a user does to a container's own filesystem. Each
# kind of change the carry must keep: files and directories created, an
# image file replaced, image files deleted (they must stay deleted),
# dotfiles at the root and in /root, a symlink, a hard link, modes and
# owners, a file of some size.
SYSTEM_DISK_WRITE = " && ".join([
    "mkdir -p /opt/app/sub /opt/empty",
    "echo data > /opt/app/sub/file.txt",
    "echo dot > /.rootdot",
    "echo hidden > /root/.bashrc",
    "ln -s /opt/app/sub/file.txt /opt/link",
    "ln /opt/app/sub/file.txt /opt/hard",
    "chmod 751 /opt/app",
    "chown 1000:1001 /opt/app/sub/file.txt",
    "chmod 4640 /opt/app/sub/file.txt",
    "chmod 1777 /tmp",
    "rm /bin/arping",
    "rm /bin/ascii && echo replaced > /bin/ascii",
    "echo conf > /etc/app.conf",
    "dd if=/dev/urandom of=/root/blob bs=1024 count=512 2>/dev/null",
])

# What a user would notice of the system disk: contents, mode, owner, type,
# symlink targets, hard links between files, deletions, and the image's own
# files beside the user's in the directories the user touched (/bin, /etc).
# Not a directory's link count or size: on overlayfs they depend on whether
# the directory is merged with a lower layer and on the kernel, and a carry
# may legitimately change that (a portable carry copies up /tmp, say).
SYSTEM_DISK_MANIFEST = " ; ".join([
    "cd /",
    "for p in opt opt/app opt/app/sub opt/empty root tmp bin etc; do stat -c '%n %a %u:%g %F' $p; done",
    "for p in opt/app/sub/file.txt opt/hard .rootdot root/.bashrc root/blob bin/ascii etc/app.conf "
    "etc/passwd etc/group; do stat -c '%n %a %u:%g %h %F %s' $p; done",
    "md5sum opt/app/sub/file.txt root/blob bin/ascii .rootdot root/.bashrc etc/app.conf etc/passwd",
    "readlink opt/link",
    "[ opt/hard -ef opt/app/sub/file.txt ] && echo hardlinked",
    "ls bin/arping 2>&1 || true",
    "echo bin-entries $(ls bin | wc -l)",
    "ls -A bin | md5sum",
    "ls -A etc",
])


def write_system_disk(d, name):
    out = execute_ok(d, name, ["sh", "-c", SYSTEM_DISK_WRITE])
    assert out["exitCode"] == 0, out
    return system_disk(d, name)


def system_disk(d, name):
    out = execute_ok(d, name, ["sh", "-c", SYSTEM_DISK_MANIFEST])
    assert out["exitCode"] == 0, out
    text = out["stdout"]
    # The manifest must describe the changes, not an error.
    assert "hardlinked" in text and "/opt/app/sub/file.txt" in text, text
    assert "No such file" in text, text  # /bin/arping stays deleted
    # The image's own files stay beside the user's in the directories the
    # user changed: a carry that kept only the changed entries loses these.
    assert "etc/passwd 644" in text and "app.conf" in text, text
    assert int(re.search(r"^bin-entries (\d+)$", text, re.M).group(1)) > 100, text
    return text


def remove_volumes_by_hand(data_dir, prefix):
    """What a failed test may leave of its volumes: Docker volumes, mounts
    and loop devices under data_dir/volumes."""
    filters = urllib.parse.quote(json.dumps({"label": ["gpubox.volume"]}))
    for v in docker_request("GET", f"/volumes?filters={filters}").json["Volumes"] or []:
        if v["Name"].startswith("gpubox_" + prefix):
            docker_request("DELETE", f"/volumes/{v['Name']}")
    volumes = os.path.realpath(data_dir / "volumes")
    for line in reversed(Path("/proc/self/mountinfo").read_text().splitlines()):
        point = line.split()[4]
        if point.startswith(volumes + "/"):
            subprocess.run(["umount", point], check=False)
    for sysdir in Path("/sys/block").glob("loop*"):
        try:
            backing = (sysdir / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.startswith(volumes + "/"):
            subprocess.run(["losetup", "-d", f"/dev/{sysdir.name}"], check=False)


# --- live usage ---------------------------------------------------------------------------------

LIVE_KEYS = ("usage", "memoryUsedMiB", "utilization")


def still(x):
    """x without the live usage fields (docs/usage.md): a reading of the
    moment, which answers compared across time leave out (test_usage.py
    checks them)."""
    if isinstance(x, dict):
        return {k: still(v) for k, v in x.items() if k not in LIVE_KEYS}
    if isinstance(x, list):
        return [still(v) for v in x]
    return x
