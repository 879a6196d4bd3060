"""Lists that say more (issue 27 item 4): each item of GET /api/v1/replicaSet
carries its image, its cards' model, its live usage (the busiest card's
utilization, the memory its processes use, since when it is idle) and the
ssh command; `gpubox ps` shows IMAGE and one STATE column. The list answers
from the store and a cache of Docker's container states kept by Docker's
event stream: it stays right when a container is stopped, started or
removed outside gpuboxd (docker stop by hand) and after gpuboxd restarts.

One daemon (8 simulated A100s, ports 64960-64979) serves the module.
"""
import json
import os
import re
import socket
import subprocess
import threading
import time

from conftest import BUILD_DIR, DOCKER_SOCKET, docker_request
from rsutil import (IMAGE, RUN_TAG, create_ok, lifecycle, list_sets, module_daemon,
                    still, wait_until)

PREFIX = "e2lf" + RUN_TAG
PORT_START, PORT_END = 64960, 64979
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmI0wOTBqfIrdPnG3HHWiF8A6jD5s3x0xPEJjjLi0dK t@x"
CLI = os.environ.get("GPUBOX_CLI", str(BUILD_DIR / "gpubox"))
CACHE_SETTLE_S = 2.5  # past gpuboxd's own recent changes: the list reads the cache

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def item(d, name, all_=False):
    found = [s for s in list_sets(d, all_) if s["name"] == name]
    assert len(found) == 1, found
    return found[0]


def ps(d, *args):
    e = dict(os.environ, GPUBOX_HOST=d.url)
    e.pop("GPUBOX_TOKEN", None)
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=e, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "Sanitizer" not in p.stderr, p.stderr
    return p.stdout


def table(text):
    lines = text.rstrip("\n").split("\n")
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    names = header.split()
    rows = []
    for line in lines[1:]:
        cells = [line[s:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                 for k, s in enumerate(starts)]
        rows.append(dict(zip(names, cells)))
    return names, rows


def test_list_items_carry_image_model_usage_and_ssh(d):
    name = f"{PREFIX}_full"
    create_ok(d, name, gpus=2, sshKeys=[SSH_KEY])
    plain = f"{PREFIX}_plain"
    create_ok(d, plain, gpus=0)
    s = item(d, name)
    assert s["image"] == IMAGE
    assert s["cardModel"] == "NVIDIA A100-80GB (simulated)"
    ssh_port = [p["hostPort"] for p in s["ports"] if p["containerPort"] == 22]
    assert s["sshCommand"] == f"ssh -p {ssh_port[0]} root@127.0.0.1" or \
        s["sshCommand"] == f"ssh -p {ssh_port[0]} root@localhost", s
    # The monitor samples the simulated cards (always idle) every second.
    wait_until(lambda: item(d, name)["usage"] is not None, timeout=15)
    u = item(d, name)["usage"]
    assert u["utilization"] in (0, -1) and u["memoryUsedMiB"] == 0, u
    assert len(u["cards"]) == 2 and u["sampledAt"]
    assert "idleSince" in u
    # The list's usage is the detail's.
    detail = d.get(f"/api/v1/replicaSet/{name}").data["info"]["usage"]
    assert set(detail) == set(u)

    p = item(d, plain)
    assert p["image"] == IMAGE and p["cardModel"] is None and p["sshCommand"] is None
    # Everything an older client read is still there.
    for key in ("name", "version", "state", "status", "containerName", "gpus", "gpuShares",
                "ports", "createTime", "updateTime", "owner"):
        assert key in s


def test_ps_shows_image_and_one_state(d):
    name = f"{PREFIX}_ps"
    create_ok(d, name, gpus=1)
    names, rows = table(ps(d, "ps"))
    assert "IMAGE" in names and "STATE" in names and "STATUS" not in names
    row = [r for r in rows if r["NAME"] == name][0]
    assert row["IMAGE"] == IMAGE and row["STATE"] == "running"
    # --json is the server's answer, new fields included (the live usage,
    # a reading of the moment, compared apart: test_usage.py).
    data = json.loads(ps(d, "--json", "ps"))
    assert still(data) == still(d.get("/api/v1/replicaSet").data)
    assert [s for s in data["replicaSets"] if s["name"] == name][0]["image"] == IMAGE

    # Stopped behind gpuboxd's back: the state says what Docker says.
    r = docker_request("POST", f"/containers/{name}-1/stop?t=0")
    assert r.status in (204, 304)
    wait_until(lambda: item(d, name)["status"] == "exited", timeout=10)
    row = [r for r in table(ps(d, "ps"))[1] if r["NAME"] == name][0]
    assert row["STATE"] == "running (container exited)", row


def test_cache_follows_docker_outside_gpuboxd(d, daemon):
    name = f"{PREFIX}_cache"
    create_ok(d, name, gpus=0)
    assert item(d, name)["status"] == "running"
    time.sleep(CACHE_SETTLE_S)
    # docker stop by hand: the list sees it without a restart of gpuboxd.
    assert docker_request("POST", f"/containers/{name}-1/stop?t=0").status in (204, 304)
    wait_until(lambda: item(d, name)["status"] == "exited", timeout=10)
    # docker start by hand.
    assert docker_request("POST", f"/containers/{name}-1/start").status in (204, 304)
    wait_until(lambda: item(d, name)["status"] == "running", timeout=10)
    # gpuboxd's own stop shows at once, not only once the event arrives.
    assert lifecycle(d, name, "stop").status == 200
    assert item(d, name)["status"] == "exited"
    assert lifecycle(d, name, "restart").status == 200
    assert item(d, name)["status"] == "running"

    # Removed by hand: missing.
    assert docker_request("DELETE", f"/containers/{name}-1?force=1").status == 204
    wait_until(lambda: item(d, name)["status"] == "missing", timeout=10)


def test_cache_right_after_gpuboxd_restart(d, daemon):
    name = f"{PREFIX}_restart"
    create_ok(d, name, gpus=0)
    daemon.stop()
    try:
        # While gpuboxd is down the container stops.
        assert docker_request("POST", f"/containers/{name}-1/stop?t=0").status in (204, 304)
    finally:
        daemon.start()
    # The first answer after the restart is right (a list, not an old cache).
    s = item(d, name)
    assert s["status"] in ("exited", "running"), s
    wait_until(lambda: item(d, name)["status"] in ("exited", "running"), timeout=10)
    assert docker_request("POST", f"/containers/{name}-1/stop?t=0").status in (204, 304)
    wait_until(lambda: item(d, name)["status"] == "exited", timeout=10)
    time.sleep(0.2)
    assert docker_request("POST", f"/containers/{name}-1/start").status in (204, 304)
    wait_until(lambda: item(d, name)["status"] == "running", timeout=10)


class SocketProxy:
    """A unix socket that forwards every connection to dockerd's; cut()
    closes every connection open now, as a restarted dockerd would."""

    def __init__(self, path):
        self.path = str(path)
        self.conns = []
        self.requests = []  # the request lines gpuboxd sent
        self.lock = threading.Lock()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(64)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(DOCKER_SOCKET)
            with self.lock:
                self.conns += [client, upstream]
            for a, b, seen in ((client, upstream, self.requests), (upstream, client, None)):
                threading.Thread(target=self.pump, args=(a, b, seen), daemon=True).start()

    @staticmethod
    def pump(src, dst, seen):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if seen is not None:
                    seen += re.findall(rb"(?:GET|POST|DELETE|PUT|HEAD) (\S+) HTTP/1", data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self):
        self.server.close()
        self.cut()


def test_cache_right_after_the_event_stream_breaks(start_daemon, tmp_path):
    """Docker's event stream cut (dockerd restarted, the socket closed): the
    list asks Docker itself until gpuboxd has listed again and follows a new
    stream, so a container stopped meanwhile shows stopped."""
    proxy = SocketProxy(tmp_path / "docker.sock")
    try:
        dd = start_daemon("--simulate-gpus", "2xA100-80GB", "--port-range", "64980-64989",
                          "--docker-host", f"unix://{proxy.path}")
        name = f"{PREFIX}_cut"
        create_ok(dd, name, gpus=0)
        time.sleep(CACHE_SETTLE_S)
        try:
            # The list answers from the cache: no container list per request.
            before = len(proxy.requests)
            for _ in range(5):
                assert item(dd, name)["status"] == "running"
            asked = [r for r in proxy.requests[before:] if b"/containers/json" in r]
            assert asked == [], asked
            for _ in range(3):
                proxy.cut()
                # Stopped by hand straight on dockerd while the stream is down.
                assert docker_request("POST", f"/containers/{name}-1/stop?t=0").status in (204, 304)
                wait_until(lambda: item(dd, name)["status"] == "exited", timeout=10)
                assert "event stream" in dd.wait_log("event stream", timeout=10)
                time.sleep(CACHE_SETTLE_S)
                # The new stream follows again.
                assert docker_request("POST", f"/containers/{name}-1/start").status in (204, 304)
                wait_until(lambda: item(dd, name)["status"] == "running", timeout=10)
        finally:
            dd.request("DELETE", f"/api/v1/replicaSet/{name}?purge=true")
    finally:
        proxy.close()
