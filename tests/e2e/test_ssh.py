"""SSH access to replica sets end to end (issue 18): sshKeys on create and
patch become /root/.ssh/authorized_keys (0700/0600, root's) in every
version's container, port 22/tcp gets a host port that a patch keeps, and
gpubox starts the image's SSH server after each start it performs. A real
ssh client logs in, as a user would, with the command the answer gives.

The module builds its own image around Debian's dropbear (dropbear-bin):
busybox-static as the shell and tools, the dropbear binary with the
libraries ldd lists for it, root's /etc/passwd entry, imported through the
sandbox dockerd's API. The plain test image (busybox only) stands for an
image without an SSH server.

One daemon (ports 62600-62619) serves the module; every test leaves no set
and no container behind.
"""
import io
import os
import re
import shutil
import subprocess
import tarfile
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import (BUILD_DIR, DOCKER_SOCKET, SANITIZER_MARKERS, UnixHTTPConnection,
                      docker_request)
from rsutil import (RUN_TAG, create, create_ok, execute_ok, info, info_ok, lifecycle,
                    module_daemon, patch, patch_ok)

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))

PREFIX = f"e2ssh{RUN_TAG}"
PORT_START, PORT_END = 62600, 62619
SSH_IMAGE = f"gpubox-test-ssh:{RUN_TAG}"
DEADLINE_S = 60

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def gpubox(d, *args):
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "GPUBOX_HOST": d.url})
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def cli_ok(d, *args):
    p = gpubox(d, *args)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def need(program):
    path = shutil.which(program) or next(
        (p for p in (f"/usr/sbin/{program}", f"/usr/bin/{program}") if os.path.exists(p)), None)
    assert path, (f"{program} is missing: the SSH tests need Debian's dropbear-bin and "
                  f"openssh-client (scripts/install-deps.sh test installs them)")
    return path


def image_tar():
    """The rootfs of the dropbear image as a tar, built in memory."""
    dropbear = need("dropbear")
    busybox = need("busybox")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add_dir(name, mode=0o755):
            t = tarfile.TarInfo(name)
            t.type, t.mode = tarfile.DIRTYPE, mode
            tar.addfile(t)

        def add_text(name, text, mode=0o644):
            data = text.encode()
            t = tarfile.TarInfo(name)
            t.size, t.mode = len(data), mode
            tar.addfile(t, io.BytesIO(data))

        def add_file(name, src):
            with open(src, "rb") as f:
                data = f.read()
            t = tarfile.TarInfo(name)
            t.size, t.mode = len(data), 0o755
            tar.addfile(t, io.BytesIO(data))

        for dname in ("bin", "etc", "etc/dropbear", "root", "usr", "usr/sbin", "lib", "lib64",
                      "lib/x86_64-linux-gnu", "proc", "sys", "dev", "run", "var"):
            add_dir(dname, 0o700 if dname == "root" else 0o755)
        add_dir("tmp", 0o1777)
        add_file("bin/busybox", busybox)
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                                 check=True).stdout.split()
        for applet in applets:
            if applet != "busybox":
                t = tarfile.TarInfo(f"bin/{applet}")
                t.type, t.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(t)
        add_file("usr/sbin/dropbear", dropbear)
        # The libraries the binary links, and the dynamic loader, at the
        # paths ldd names.
        ldd = subprocess.run(["ldd", dropbear], capture_output=True, text=True, check=True).stdout
        libs = set(re.findall(r"=> (/\S+)", ldd)) | set(re.findall(r"^\s*(/\S+) \(", ldd, re.M))
        for lib in sorted(libs):
            add_file(lib.lstrip("/"), os.path.realpath(lib))
        add_text("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")
        add_text("etc/group", "root:x:0:\n")
        add_text("etc/shells", "/bin/sh\n")
    return buf.getvalue()


@pytest.fixture(scope="module")
def ssh_image():
    """gpubox-test-ssh imported into the dockerd the daemon uses; removed
    after the module."""
    repo, tag = SSH_IMAGE.split(":")
    changes = ['CMD ["/bin/sh"]', "ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
    query = urllib.parse.urlencode([("fromSrc", "-"), ("repo", repo), ("tag", tag)] +
                                   [("changes", c) for c in changes])
    conn = UnixHTTPConnection(DOCKER_SOCKET)
    conn.timeout = 120
    try:
        conn.request("POST", f"/images/create?{query}", body=image_tar(),
                     headers={"Content-Type": "application/x-tar"})
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200 and b"error" not in body, (r.status, body[:500])
    finally:
        conn.close()
    yield SSH_IMAGE
    docker_request("DELETE", f"/images/{SSH_IMAGE}?force=true")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two key pairs: {name: (private key path, public key line)}."""
    need("ssh")
    need("ssh-keygen")
    tmp = tmp_path_factory.mktemp("keys")
    out = {}
    for name in ("one", "two"):
        path = tmp / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@test",
                        "-f", str(path)], check=True)
        out[name] = (str(path), (tmp / f"{name}.pub").read_text().strip())
    return out


def ssh(key, port, command="echo hello; cat /proc/1/cmdline"):
    return subprocess.run(
        ["ssh", "-i", key, "-p", str(port), "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR", "root@127.0.0.1", command],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def ssh_ok(key, port):
    """Log in and run a command, retrying until the server answers (it may
    be a moment from the start gpubox asked for to its first accept)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        p = ssh(key, port)
        if p.returncode == 0:
            assert p.stdout.startswith("hello\n"), p.stdout
            assert "sleep" in p.stdout, p.stdout  # the set's own command is PID 1's child
            return p
        assert time.monotonic() < deadline, (p.returncode, p.stdout, p.stderr)
        time.sleep(0.5)


def ssh_refused(key, port):
    p = ssh(key, port)
    assert p.returncode == 255 and "Permission denied" in p.stderr, (p.returncode, p.stderr)


def ssh_port(answer):
    s = answer["ssh"]
    assert s["command"] == f"ssh -p {s['port']} root@127.0.0.1", s
    return s["port"]


def modes(d, name):
    out = execute_ok(d, name, ["stat", "-c", "%n %a %u %g", "/root/.ssh",
                               "/root/.ssh/authorized_keys"])["stdout"]
    return out.split("\n")[:2]


def test_create_with_keys_logs_in_with_the_command_given(d, ssh_image, keys):
    name = PREFIX + "_a"
    a = create_ok(d, name, imageName=ssh_image, sshKeys=[keys["one"][1]])
    port = ssh_port(a)
    assert PORT_START <= port <= PORT_END
    assert a["ssh"]["server"] == "dropbear" and a["ssh"]["running"] is True, a["ssh"]
    assert {"hostPort": port, "containerPort": 22, "protocol": "tcp"} in a["ports"]
    ssh_ok(keys["one"][0], port)
    ssh_refused(keys["two"][0], port)
    assert modes(d, name) == ["/root/.ssh 700 0 0", "/root/.ssh/authorized_keys 600 0 0"]
    i = info_ok(d, name)
    assert i["spec"]["sshKeys"] == [keys["one"][1]]
    assert "22/tcp" in i["spec"]["containerPorts"]
    assert i["ssh"]["port"] == port and i["ssh"]["running"] is True, i["ssh"]
    out = cli_ok(d, "inspect", name).stdout
    assert f"SSH:        ssh -p {port} root@127.0.0.1" in out, out


def test_a_patch_keeps_the_port_and_the_keys_and_can_swap_them(d, ssh_image, keys):
    name = PREFIX + "_b"
    port = ssh_port(create_ok(d, name, imageName=ssh_image, sshKeys=[keys["one"][1]],
                              containerPorts=["22"]))
    ssh_ok(keys["one"][0], port)
    p = patch_ok(d, name, {"envPatch": {"set": ["A=1"]}})
    assert p["version"] == 2 and ssh_port(p) == port and p["ssh"]["running"] is True, p
    ssh_ok(keys["one"][0], port)
    assert modes(d, name) == ["/root/.ssh 700 0 0", "/root/.ssh/authorized_keys 600 0 0"]
    p = patch_ok(d, name, {"sshKeys": [keys["two"][1]]})
    assert p["version"] == 3 and ssh_port(p) == port, p
    ssh_ok(keys["two"][0], port)
    ssh_refused(keys["one"][0], port)
    # No keys: the carried file is emptied, the port stays until removed.
    p = patch_ok(d, name, {"sshKeys": []})
    assert p["version"] == 4 and "ssh" not in p, p
    keys_file = execute_ok(d, name, ["cat", "/root/.ssh/authorized_keys"])["stdout"]
    assert "ssh-ed25519" not in keys_file, keys_file
    assert info_ok(d, name)["ssh"] is None


def test_stop_restart_and_pause_continue_start_the_server_again(d, ssh_image, keys):
    name = PREFIX + "_c"
    port = ssh_port(create_ok(d, name, imageName=ssh_image, sshKeys=[keys["one"][1]]))
    ssh_ok(keys["one"][0], port)
    assert lifecycle(d, name, "stop").status == 200
    i = info_ok(d, name)
    assert i["ssh"]["running"] is False and "stopped" in i["ssh"]["message"], i["ssh"]
    r = lifecycle(d, name, "restart")
    assert r.status == 200, r.json
    port = ssh_port(r.data)
    assert r.data["ssh"]["running"] is True, r.data
    ssh_ok(keys["one"][0], port)
    assert lifecycle(d, name, "pause").status == 200
    r = lifecycle(d, name, "continue")
    assert r.status == 200 and r.data["ssh"]["running"] is True, r.json
    ssh_ok(keys["one"][0], port)


def test_an_image_without_a_server_is_said_plainly(d, keys):
    name = PREFIX + "_d"
    a = create_ok(d, name, sshKeys=[keys["one"][1]])
    s = a["ssh"]
    assert s["server"] is None and s["running"] is False and s["port"], s
    assert "no SSH server" in s["message"], s
    assert keys["one"][1] in execute_ok(d, name, ["cat", "/root/.ssh/authorized_keys"])["stdout"]
    assert info_ok(d, name)["ssh"]["server"] is None


def test_a_set_without_keys_has_no_ssh(d):
    name = PREFIX + "_e"
    a = create_ok(d, name)
    assert "ssh" not in a and a["ports"] == []
    assert info_ok(d, name)["ssh"] is None


@pytest.mark.parametrize("bad, words", [
    ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "starts with 'ssh-dss'"),
    ("ssh-ed25519 not*base64", "not base64"),
    ("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIJmI0wOTBqfIrdPnG3HHWiF8A6jD5s3x0xPEJjjLi0dK",
     "not a ssh-rsa key"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmI0wOTBqfIrdPnG3HHWiF8A6jD5s3x0xPEJjjLi0dK a\nb",
     "control character"),
    ('command="sh" ssh-ed25519 AAAA', "starts with 'command="),
    ("", "starts with ''"),
])
def test_bad_keys_are_refused_and_nothing_is_made(d, bad, words):
    name = PREFIX + "_f"
    r = create(d, name, sshKeys=[bad])
    assert r.status == 400 and r.code == 1000 and words in r.msg, r.json
    assert "sshKeys[0]" in r.msg, r.msg
    assert info(d, name).status == 404


def test_key_lists_out_of_bounds_are_refused(d, keys):
    name = PREFIX + "_g"
    for body, words in (({"sshKeys": "ssh-ed25519 AAAA"}, "sshKeys"),
                        ({"sshKeys": [keys["one"][1]] * 2}, "repeats"),
                        ({"sshKeys": [keys["one"][1] + " x" * 5000]}, "at most"),
                        ({"sshKeys": [f"{keys['one'][1]}{i}" for i in range(33)]}, "at most 32")):
        r = create(d, name, **body)
        assert r.status == 400 and r.code == 1000 and words in r.msg, (body, r.json)
        assert info(d, name).status == 404
    create_ok(d, name)
    before = info_ok(d, name)
    r = patch(d, name, {"sshKeys": ["ssh-ed25519 AAAA"]})
    assert r.status == 400 and r.code == 1000 and "sshKeys[0]" in r.msg, r.json
    assert info_ok(d, name) == before


def test_cli_run_and_scale_take_key_files(d, ssh_image, keys, tmp_path):
    name = PREFIX + "_h"
    out = cli_ok(d, "run", name, "--image", ssh_image, "--ssh-key", keys["one"][0] + ".pub",
                 "--", "sleep", "3600").stdout
    port = info_ok(d, name)["ssh"]["port"]
    assert f"ssh -p {port} root@127.0.0.1" in out, out
    ssh_ok(keys["one"][0], port)
    both = tmp_path / "both.pub"
    both.write_text(keys["one"][1] + "\n# a comment\n\n" + keys["two"][1] + "\n")
    cli_ok(d, "scale", name, "--ssh-key", str(both))
    assert info_ok(d, name)["spec"]["sshKeys"] == [keys["one"][1], keys["two"][1]]
    ssh_ok(keys["two"][0], port)
    p = gpubox(d, "run", name + "x", "--image", ssh_image, "--ssh-key", str(tmp_path / "absent.pub"))
    assert p.returncode == 2 and "absent.pub" in p.stderr, (p.returncode, p.stderr)
