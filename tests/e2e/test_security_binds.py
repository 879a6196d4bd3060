"""Host binds swapped for a symlink (issue 25, item 1).

With --bind-prefixes P, set A binds P/ok at /data and makes /data/x; set B
binds P/ok/x at /host. Inside A, the user then replaces x with a symlink to
"/". Docker follows symlinks in a bind's source at every start, so when B's
container starts again (pause and continue, a start Docker does by itself,
gpuboxd's start-up) B's /host must still be the directory it was created
with, never the host's root. gpuboxd pins each host bind's directory at
creation (a bind mount of the opened directory under its data dir) and
gives Docker only that path (docs/security.md, "Host binds").

Each test starts its own gpuboxd (ports 61550-61599, binds allowed under
the test's P); sets are named with the prefix e2sbd plus the run's tag.
"""
import signal
import subprocess

import pytest

from conftest import docker_request
from rsutil import (RUN_TAG, container, create, create_ok, delete, execute, execute_ok, lifecycle,
                    patch, remove_containers, unmount_staged_binds, wait_until)

PREFIX = "e2sbd" + RUN_TAG
ARGS = ("--simulate-gpus", "2xA100-80GB", "--port-range", "61550-61599")


@pytest.fixture
def host(tmp_path):
    """P (the allowed prefix) with P/ok in it, and a marker file on the host
    outside P that no container may ever see."""
    prefix = tmp_path / "P"
    (prefix / "ok").mkdir(parents=True)
    outside = tmp_path / "outside-marker"
    outside.write_text("host secret\n")
    yield prefix, outside
    remove_containers(PREFIX)
    unmount_staged_binds(tmp_path / "data")


@pytest.fixture
def gpuboxd(start_daemon, host, tmp_path):
    def start():
        return start_daemon(*ARGS, "--bind-prefixes", str(host[0]), data_dir=tmp_path / "data")
    return start


def sh(d, name, script):
    return execute_ok(d, name, ["sh", "-c", script])


def staging_mounts(data_dir):
    """Mount points under the data dir (/proc/self/mountinfo's fifth field)."""
    root = str(data_dir.resolve()) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p.startswith(root)]


def attack(d, prefix):
    """A binds P/ok at /data and makes /data/x with a file in it; B binds
    P/ok/x at /host; then A turns x into a symlink to "/"."""
    a, b = f"{PREFIX}_a", f"{PREFIX}_b"
    create_ok(d, a, binds=[{"src": str(prefix / "ok"), "dest": "/data"}])
    sh(d, a, "mkdir /data/x && echo kept > /data/x/kept")
    create_ok(d, b, binds=[{"src": str(prefix / "ok" / "x"), "dest": "/host"}])
    assert sh(d, b, "cat /host/kept")["stdout"] == "kept\n"
    sh(d, a, "mv /data/x /data/x.old && ln -s / /data/x")
    assert (prefix / "ok" / "x").is_symlink()
    return a, b


def assert_not_host_root(d, b, outside):
    """B's /host is still the directory it was created with."""
    out = execute(d, b, ["sh", "-c", f"ls -A /host; cat /host{outside} 2>&1; "
                                     "cat /host/etc/hostname 2>&1; true"])
    assert out.status == 200, out.json
    text = out.data["stdout"]
    assert "host secret" not in text, f"/host is the host's root:\n{text}"
    assert sh(d, b, "ls -A /host")["stdout"].split() == ["kept"], text
    assert sh(d, b, "cat /host/kept")["stdout"] == "kept\n"


def pause_continue(d, name):
    assert lifecycle(d, name, "pause").status == 200
    r = lifecycle(d, name, "continue")
    assert r.status == 200, r.json


def test_swap_then_pause_and_continue_keeps_the_bind(gpuboxd, host, tmp_path):
    prefix, outside = host
    d = gpuboxd()
    a, b = attack(d, prefix)
    pause_continue(d, b)
    assert_not_host_root(d, b, outside)
    # A new version of B resolves the path again: now a symlink, refused.
    r = patch(d, b, {"envPatch": ["X=1"]})
    assert r.status == 403 and r.code == 1109, r.json
    assert "symlink" in r.msg
    assert_not_host_root(d, b, outside)
    for name in (a, b):
        assert delete(d, name, purge=True).status == 200
    assert staging_mounts(tmp_path / "data") == []


def test_swap_then_docker_restart_keeps_the_bind(gpuboxd, host):
    prefix, outside = host
    d = gpuboxd()
    _, b = attack(d, prefix)
    r = docker_request("POST", f"/containers/{b}-1/restart?t=1")
    assert r.status == 204, r.body
    wait_until(lambda: execute(d, b, ["true"]).status == 200)
    assert_not_host_root(d, b, outside)


def test_swap_with_an_empty_dir_removed(gpuboxd, host):
    """The issue's exact steps: x empty, removed, a symlink in its place."""
    prefix, outside = host
    d = gpuboxd()
    a, b = f"{PREFIX}_a", f"{PREFIX}_b"
    create_ok(d, a, binds=[{"src": str(prefix / "ok"), "dest": "/data"}])
    sh(d, a, "mkdir /data/x")
    create_ok(d, b, binds=[{"src": str(prefix / "ok" / "x"), "dest": "/host"}])
    sh(d, a, "rmdir /data/x && ln -s / /data/x")
    assert lifecycle(d, b, "pause").status == 200
    # The directory B was given is gone: B is pinned again from its path,
    # which is a symlink now, so B does not start, and says why.
    r = lifecycle(d, b, "continue")
    assert r.status != 200 and "symlink" in r.msg, r.json
    assert not container(f"{b}-1")["State"]["Running"]
    # Nor does Docker start it on anything else by itself.
    r = docker_request("POST", f"/containers/{b}-1/start")
    assert r.status >= 400, r.body
    # A directory made again at the path, by the owner of the host tree,
    # is what B gets at its next start.
    (prefix / "ok" / "x").unlink()
    (prefix / "ok" / "x").mkdir()
    (prefix / "ok" / "x" / "new").write_text("new\n")
    assert lifecycle(d, b, "continue").status == 200
    assert sh(d, b, "ls -A /host")["stdout"].split() == ["new"]


def test_swap_then_gpuboxd_restart_keeps_the_bind(gpuboxd, host, tmp_path):
    prefix, outside = host
    d = gpuboxd()
    a, b = attack(d, prefix)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(30)
    d.proc.stdout.close()
    d.log_file.close()
    d = gpuboxd()
    pause_continue(d, b)
    assert_not_host_root(d, b, outside)
    for name in (a, b):
        assert delete(d, name, purge=True).status == 200
    assert staging_mounts(tmp_path / "data") == []


def test_bind_through_a_symlink_is_refused(gpuboxd, host):
    prefix, _ = host
    (prefix / "link").symlink_to(prefix / "ok")
    d = gpuboxd()
    r = create(d, f"{PREFIX}_sym", binds=[{"src": str(prefix / "link"), "dest": "/mnt"}])
    assert r.status == 403 and r.code == 1109, r.json
    assert "symlink" in r.msg and str(prefix / "link") in r.msg
    (prefix / "ok" / "sub").mkdir()
    (prefix / "ok" / "sub2").symlink_to("sub")
    r = create(d, f"{PREFIX}_sym", binds=[{"src": str(prefix / "ok" / "sub2"), "dest": "/mnt"}])
    assert r.status == 403 and r.code == 1109 and "symlink" in r.msg, r.json
    # The real path works.
    create_ok(d, f"{PREFIX}_sym", binds=[{"src": str(prefix / "ok" / "sub"), "dest": "/mnt"}])
    assert delete(d, f"{PREFIX}_sym", purge=True).status == 200


def test_staging_lost_at_a_reboot_is_pinned_again_at_start_up(gpuboxd, host, tmp_path):
    """A host reboot takes the staging mounts; Docker's restart policy
    starts the container on the bare mount point. gpuboxd's start-up pins
    the bind again (by the same rules) and restarts the container; it also
    removes the staging of a container Docker no longer has."""
    prefix, _ = host
    (prefix / "ok" / "file").write_text("on the host\n")
    data = tmp_path / "data"
    d = gpuboxd()
    c = f"{PREFIX}_c"
    create_ok(d, c, binds=[{"src": str(prefix / "ok"), "dest": "/data"}])
    d.stop()
    staged = data / "binds" / f"{c}-1" / "0"
    subprocess.run(["umount", "-l", str(staged)], check=True)
    ghost = data / "binds" / f"{PREFIX}_ghost-1" / "0"
    ghost.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(prefix / "ok"), str(ghost)], check=True)
    r = docker_request("POST", f"/containers/{c}-1/restart?t=1")
    assert r.status == 204, r.body
    d = gpuboxd()
    assert sh(d, c, "cat /data/file")["stdout"] == "on the host\n"
    assert staging_mounts(data) == [str(staged.resolve())]
    assert not ghost.parent.exists()
    assert (prefix / "ok" / "file").exists()
    assert delete(d, c, purge=True).status == 200
    assert staging_mounts(data) == []


def test_a_container_from_before_the_staging_is_named_at_start_up(gpuboxd, host, tmp_path):
    """A container made by an older gpuboxd gives Docker the user's path:
    start-up says so (and how to pin it), and leaves it running as it is."""
    prefix, _ = host
    d = gpuboxd()
    c = f"{PREFIX}_old"
    create_ok(d, c, binds=[{"src": str(prefix / "ok"), "dest": "/data"}])
    d.stop()
    old = container(f"{c}-1")
    config, hc = old["Config"], old["HostConfig"]
    hc["Mounts"] = [dict(m, Source=str(prefix / "ok")) if m["Target"] == "/data" else m
                    for m in hc["Mounts"]]
    assert docker_request("DELETE", f"/containers/{c}-1?force=1").status == 204
    r = docker_request("POST", f"/containers/create?name={c}-1", dict(config, HostConfig=hc))
    assert r.status == 201, r.body
    assert docker_request("POST", f"/containers/{c}-1/start").status == 204
    started = container(f"{c}-1")["State"]["StartedAt"]
    d = gpuboxd()
    assert "made by an older gpuboxd" in d.wait_log("made by an older gpuboxd")
    assert container(f"{c}-1")["State"]["StartedAt"] == started
    assert delete(d, c, purge=True).status == 200
    assert staging_mounts(tmp_path / "data") == []
