"""gpuboxd as a program: flags, the config file, start-up messages,
failures at start-up, and graceful shutdown on SIGTERM / SIGINT."""
import os
import signal
import socket
import threading
import time

import pytest

import conftest
from conftest import run_gpuboxd, store_args
from rsutil import RUN_TAG, create_ok, delete, held_gpus, info_ok, remove_containers


def test_help_lists_every_flag_with_its_default():
    rc, out, _ = run_gpuboxd(["--help"])
    assert rc == 0
    for flag, default in [("--listen ADDR:PORT", "127.0.0.1:2378"),
                          ("--data-dir DIR", "/var/lib/gpubox"),
                          ("--store URL", "sqlite://<data-dir>/state.db"),
                          ("--docker-host URL", "$DOCKER_HOST or unix:///var/run/docker.sock"),
                          ("--port-range A-B", "40000-65535"),
                          ("--gpu-source auto|nvml|nvidia-smi|simulated", "auto"),
                          ("--simulate-gpus SPEC", "none"),
                          ("--nvml-library PATH", "libnvidia-ml.so.1"),
                          ("--nvidia-smi PATH", "nvidia-smi (on PATH)"),
                          ("--gpu-attach nvidia|cdi|runtime", "nvidia"),
                          ("--volume-backend loop|xfsquota|plain", "loop"),
                          ("--log-level debug|info|warn|error", "info"),
                          ("--compat-http-200", "off"),
                          ("--config FILE", "none")]:
        lines = out.splitlines()
        at = next((i for i, l in enumerate(lines) if l.strip() == flag), None)
        assert at is not None, f"--help lacks {flag}:\n{out}"
        block = " ".join(lines[at + 1:at + 3])  # help text, then the default
        assert f"(default: {default})" in block, (flag, block)
    assert "--help" in out and "--version" in out


@pytest.mark.parametrize("args, expect", [
    (["--bogus"], "unknown flag '--bogus'"),
    (["--port-range", "9-1"], "--port-range"),
    (["--listen", "nonsense"], "--listen"),
    (["--gpu-source", "cuda"], "'cuda' is not a GPU source"),
    (["--simulate-gpus", "many"], "--simulate-gpus"),
    (["--log-level", "loud"], "'loud' is not a log level"),
    (["--listen"], "--listen needs a value"),
    (["serve"], "unexpected argument 'serve'"),
])
def test_bad_flags_exit_2_with_a_message(args, expect):
    rc, out, err = run_gpuboxd(args)
    assert rc == 2
    assert expect in err
    assert "gpuboxd --help" in err
    assert "ready" not in out


def test_ready_line_shows_the_port_picked(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    assert d.host == "127.0.0.1" and d.port > 0
    with socket.create_connection((d.host, d.port), timeout=5):
        pass
    assert f"listening on http://127.0.0.1:{d.port}" in d.log()


def test_start_up_log_names_store_docker_and_gpus(start_daemon, tmp_path):
    data = tmp_path / "deep" / "new" / "dir"
    d = start_daemon("--simulate-gpus", "1xT4-16GB", data_dir=data)
    log = d.log()
    if conftest.STORE_BACKEND == "etcd":
        assert data.is_dir(), "the data dir was not created"
        assert "store: etcd at " in log
    else:
        assert (data / "state.db").exists(), "the data dir and the store were not created"
        assert f"store: sqlite at {data}/state.db" in log
    assert "docker: Docker " in log and "storage driver " in log
    assert "gpu 0: GPU-" in log
    assert "gpuboxd 0" in log and "starting" in log


def test_sigterm_stops_gracefully(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    h = d.get("/healthz")
    assert h.status == 200 and h.json["data"]["store"]["claim"] == "held", h.json
    assert d.stop(signal.SIGTERM) == 0
    log = d.log()
    assert "stopping" in log and "gpuboxd stopped" in log and "store: closed" in log


def test_sigint_stops_gracefully(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    assert d.stop(signal.SIGINT) == 0
    assert "gpuboxd stopped" in d.log()


def test_request_in_flight_finishes_after_sigterm(start_daemon):
    """A request whose body is still arriving when SIGTERM comes is answered;
    new connections are refused meanwhile; then the daemon exits 0."""
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    s = socket.create_connection((d.host, d.port), timeout=10)
    body = b'{"a":1}'
    s.sendall(b"POST /api/v1/resources/gpus HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body[:3])
    time.sleep(0.3)  # the server has the headers: the request is in flight
    d.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while "stopping" not in d.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    with pytest.raises(OSError):
        socket.create_connection((d.host, d.port), timeout=2).close()
    assert d.proc.poll() is None, "gpuboxd exited before its request in flight finished"
    s.sendall(body[3:])
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    s.close()
    assert answer.startswith(b"HTTP/1.1 405"), answer
    assert d.stop() == 0  # already stopping: waits for the exit and checks it


def test_config_file_sets_everything_and_flags_override_it(start_daemon, tmp_path):
    conf = tmp_path / "gpuboxd.conf"
    conf.write_text("# test settings\n"
                    "listen = 127.0.0.1:0\n"
                    "port-range = 41000-41009\n"
                    "compat-http-200 = true\n"
                    "simulate-gpus = 1xT4-16GB\n"
                    "log_level = warn\n")
    d = start_daemon("--config", str(conf), listen=None)
    ports = d.get("/api/v1/resources/ports").data["ports"]
    assert (ports["startPort"], ports["endPort"]) == (41000, 41009)
    r = d.get("/api/v1/nope")
    assert r.status == 200 and r.code == 1101  # compat from the file
    d.stop()
    assert "GET /api/v1/nope" not in d.log()  # warn from the file hides access lines
    assert "SIMULATED GPUs" in d.log()

    d2 = start_daemon("--config", str(conf), "--port-range", "42000-42004",
                      "--compat-http-200=false", "--log-level", "info", listen=None)
    ports = d2.get("/api/v1/resources/ports").data["ports"]
    assert (ports["startPort"], ports["endPort"]) == (42000, 42004)
    assert d2.get("/api/v1/nope").status == 404
    assert "GET /api/v1/nope 404" in d2.wait_log("GET /api/v1/nope 404")


def test_config_file_unknown_key_exits_2_naming_the_line(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("listen = 127.0.0.1:0\nport_rnage = 1-2\n")
    rc, _, err = run_gpuboxd(["--config", str(conf)])
    assert rc == 2
    assert f"{conf}:2: unknown key 'port-rnage'" in err


def test_unreachable_docker_exits_with_a_clear_message(tmp_path):
    started = time.monotonic()
    rc, out, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                                "--simulate-gpus", "1xT4-16GB", "--docker-host",
                                f"unix://{tmp_path}/no-docker.sock", "--docker-wait", "1"])
    assert rc == 1
    assert "ready" not in out
    assert f"Docker at unix://{tmp_path}/no-docker.sock did not answer within 1s" in err
    assert "--docker-host" in err
    assert time.monotonic() - started < 20


def test_listen_address_in_use_exits_2(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc, out, err = run_gpuboxd(["--listen", f"127.0.0.1:{port}", "--data-dir",
                                    str(tmp_path / "d"), "--simulate-gpus", "1xT4-16GB"])
    assert rc == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err


class DockerLink:
    """A unix-socket relay to the real dockerd that can be cut, so a test
    can see what gpuboxd says when Docker stops answering. Nothing is faked:
    every byte comes from the real daemon until the link is cut."""

    def __init__(self, path, upstream=conftest.DOCKER_SOCKET):
        self.path = str(path)
        self.upstream = upstream
        self.sockets = []
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(self.upstream)
            with self.lock:
                self.sockets += [client, up]
            threading.Thread(target=self._pipe, args=(client, up), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, client), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.listener.close()
        os.unlink(self.path)
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


def test_docker_going_away_shows_in_healthz_and_version(start_daemon, tmp_path):
    link = DockerLink(tmp_path / "docker.sock")
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--docker-host",
                     f"unix://{tmp_path}/docker.sock")
    assert d.get("/healthz").status == 200
    started_version = d.get("/version").data["docker"]["version"]
    link.cut()

    r = d.get("/healthz")
    assert r.status == 503
    assert r.code == 1112
    assert r.data["status"] == "degraded"
    assert r.data["docker"]["ok"] is False and r.data["docker"]["error"]
    assert r.data["store"]["ok"] is True

    r = d.get("/version")
    assert r.status == 200 and r.code == 200
    assert r.data["docker"]["versionAtStartup"] == started_version
    assert r.data["docker"]["error"]
    # what needs no Docker keeps working
    assert d.get("/api/v1/resources/gpus").status == 200


# ---- one daemon per store ----------------------------------------------------

@pytest.fixture
def owner_sets():
    """The prefix of the replica sets these tests create; their containers
    are removed at the end."""
    prefix = "e2eown" + RUN_TAG
    yield prefix
    remove_containers(prefix)


def test_second_daemon_on_the_same_store_exits_while_the_first_serves(start_daemon, tmp_path,
                                                                      owner_sets):
    data = tmp_path / "shared"
    first = start_daemon("--simulate-gpus", "2xT4-16GB", data_dir=data)
    pid = first.proc.pid
    assert f"store: claimed for this gpuboxd (pid {pid}): " in first.log()

    # The same data dir, so the same SQLite file or etcd key prefix. On etcd
    # the holder could be gone with its lease still running: the second
    # waits --store-wait for it, then gives up.
    t0 = time.monotonic()
    rc, out, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(data),
                                "--simulate-gpus", "2xT4-16GB", "--store-wait", "2",
                                *store_args(data)])
    took = time.monotonic() - t0
    assert rc == 1, err
    assert "ready" not in out
    assert f"in use by gpuboxd pid {pid} on host {socket.gethostname()}" in err, err
    assert "would hand out the same GPUs and ports" in err, err
    if conftest.STORE_BACKEND == "etcd":
        assert "its lease expires in" in err and "trying again every second" in err, err
        assert "was not free within 2s (--store-wait)" in err, err
        assert 1.5 < took < 10, took
    else:
        assert f"lock file {data}/state.db.lock" in err, err
        assert took < 5, "a SQLite holder is alive: nothing to wait for"
    # It never reached Docker or the pools.
    assert "docker:" not in err and "reconcil" not in err

    # The first serves on, changes included.
    name = f"{owner_sets}_first"
    assert create_ok(first, name, gpus=1)["version"] == 1
    assert delete(first, name).status == 200
    assert first.stop() == 0
    assert "store: claim released" in first.log()

    # Stopped, it no longer holds the store: a new daemon starts at once.
    again = start_daemon("--simulate-gpus", "2xT4-16GB", data_dir=data)
    assert again.get("/healthz").status == 200


def test_second_daemon_with_its_own_store_on_the_same_data_dir_exits(start_daemon, tmp_path):
    """Another store (another SQLite file here; another etcd prefix alike)
    but the same data dir: its volume images and mounts would be shared."""
    data = tmp_path / "shareddir"
    first = start_daemon("--simulate-gpus", "2xT4-16GB", data_dir=data)
    rc, out, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(data),
                                "--simulate-gpus", "2xT4-16GB",
                                "--store", f"sqlite://{tmp_path / 'other.db'}"])
    assert rc == 1, err
    assert "ready" not in out
    assert f"data dir {data} is in use by another gpuboxd (pid {first.proc.pid})" in err, err
    assert "give each its own --data-dir" in err and "docker:" not in err, err
    assert first.get("/healthz").status == 200
    assert first.stop() == 0


def test_daemon_killed_then_started_again_takes_over_at_once(start_daemon, tmp_path,
                                                             owner_sets):
    data = tmp_path / "killed"
    first = start_daemon("--simulate-gpus", "2xT4-16GB", data_dir=data)
    name = f"{owner_sets}_kept"
    create_ok(first, name, gpus=1)
    held = held_gpus(first)
    first.proc.kill()  # kill -9, not reaped yet: a zombie holds nothing

    t0 = time.monotonic()
    second = start_daemon("--simulate-gpus", "2xT4-16GB", data_dir=data)
    took = time.monotonic() - t0
    # On etcd the dead daemon's lease would run 10 s more: this host can
    # see its pid is gone, and takes the store over without waiting.
    assert took < 8, took
    log = second.log()
    assert f"store: claimed for this gpuboxd (pid {second.proc.pid})" in log
    if conftest.STORE_BACKEND == "etcd":
        assert (f"took the store over from gpuboxd pid {first.proc.pid} on host "
                f"{socket.gethostname()}") in log, log
    first.proc.wait()
    assert info_ok(second, name)["version"] == 1
    assert held_gpus(second) == held
