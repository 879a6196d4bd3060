"""Shared fixtures for gpubox's end-to-end tests.

Each test drives a real gpuboxd (the sanitizer build, path from $GPUBOXD,
default build/test/gpuboxd) over HTTP against the real dockerd and a real
SQLite file in a temporary data dir. The daemon listens on 127.0.0.1:0 and
the fixture reads the port it picked from its ready line on stdout; stderr
(the log) goes to a file the tests can read. Stopping sends SIGTERM and
requires a clean exit 0 with no sanitizer report in the log.

GPUs come from --simulate-gpus or from the NVIDIA fakes: the fake NVML
library (build/test/fakes/libnvidia-ml.so.1) and the fake nvidia-smi
(tests/fakes/nvidia-smi), both answering from the description file named
by $GPUBOX_FAKE_GPUS.

The store backend is SQLite (a file in the data dir) unless the session
asks for etcd, with `--store-backend etcd` or GPUBOX_E2E_STORE=etcd: then
one real etcd serves the whole session (etcdutil.py), and every daemon
started without an explicit --store gets
--store etcd://127.0.0.1:PORT/e2e/<id of its data dir>, so daemons keep
apart and a daemon started again on the same data dir finds its state.
"""
import hashlib
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from etcdutil import EtcdServer

SOURCE_DIR = Path(os.environ.get("GPUBOX_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("GPUBOX_BUILD_DIR", SOURCE_DIR / "build" / "test"))
GPUBOXD = Path(os.environ.get("GPUBOXD", BUILD_DIR / "gpuboxd"))
FAKE_NVML = BUILD_DIR / "fakes" / "libnvidia-ml.so.1"
FAKE_SMI = SOURCE_DIR / "tests" / "fakes" / "nvidia-smi"

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error:")
READY_TIMEOUT = 30
STOP_TIMEOUT = 30


# tests/e2e/fleet (several gpuboxd on test sandboxes joined by a bridge,
# one etcd cluster) needs the network scripts/test-fleet.sh builds around
# it and runs there, as a group of its own: `pytest tests/e2e` leaves it
# out. It lives under tests/e2e so that it shares this conftest (Daemon,
# its ready line and sanitizer checks) and the helper modules as they are;
# `pytest tests/e2e/fleet` names it and collects it.
collect_ignore = ["fleet"]

STORE_BACKENDS = ("sqlite", "etcd")
# The session's backend; pytest_configure applies --store-backend.
STORE_BACKEND = os.environ.get("GPUBOX_E2E_STORE", "sqlite") or "sqlite"
_shared_etcd = None


def pytest_addoption(parser):
    parser.addoption("--store-backend", choices=STORE_BACKENDS, default=None,
                     help="store backend of the daemons the tests start (default: "
                          "$GPUBOX_E2E_STORE, else sqlite); etcd starts one etcd for the session")


def pytest_configure(config):
    global STORE_BACKEND
    STORE_BACKEND = config.getoption("--store-backend") or STORE_BACKEND
    if STORE_BACKEND not in STORE_BACKENDS:
        raise pytest.UsageError(f"GPUBOX_E2E_STORE={STORE_BACKEND!r}: use sqlite or etcd")


def pytest_report_header(config):
    return f"gpubox store backend: {STORE_BACKEND}"


def pytest_unconfigure(config):
    global _shared_etcd
    if _shared_etcd is not None:
        _shared_etcd.stop()
        shutil.rmtree(_shared_etcd.dir, ignore_errors=True)
        _shared_etcd = None


def shared_etcd():
    """The session's etcd, started on first use."""
    global _shared_etcd
    if _shared_etcd is None:
        _shared_etcd = EtcdServer(tempfile.mkdtemp(prefix="gpubox-e2e-etcd-")).start()
    return _shared_etcd


def store_args(data_dir):
    """The --store flags a daemon on data_dir gets from the session's backend:
    none for SQLite (its file in the data dir), an etcd URL whose key prefix
    is named after the data dir for etcd."""
    if STORE_BACKEND != "etcd":
        return []
    dir_id = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]
    return ["--store", shared_etcd().url(f"/e2e/{dir_id}")]


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        self.json = json.loads(body) if body else None

    @property
    def code(self):
        return self.json["code"]

    @property
    def data(self):
        return self.json["data"]

    @property
    def msg(self):
        return self.json["msg"]


def request(conn, method, path, body=None, headers=None):
    """One request on an http.client connection; keeps the connection open.
    A server may answer before it has read the whole body (a 413) and close
    its side: as curl does, the answer is still read after the send fails."""
    try:
        conn.request(method, path, body=body, headers=headers or {})
    except (BrokenPipeError, ConnectionResetError):
        if body is None:
            raise
    r = conn.getresponse()
    return Response(r.status, r.headers, r.read())


class Daemon:
    """A running gpuboxd and its log. With a token set, every request sends
    it as a bearer token; with an ssl_context (the daemon serves HTTPS),
    connections use it. A subclass may wait longer for the ready line
    (ready_timeout) or run gpuboxd through a wrapper (self.args)."""

    ready_timeout = READY_TIMEOUT

    def __init__(self, args, data_dir, log_path, env=None):
        chosen = ("--store", "--config")
        if not any(a in chosen or a.startswith(tuple(c + "=" for c in chosen)) for a in args):
            args = [*args, *store_args(data_dir)]
        self.args = [str(GPUBOXD), *args]
        self.data_dir = data_dir
        self.log_path = log_path
        self.env = env
        self.url = None
        self.scheme = None
        self.host = None
        self.port = None
        self.proc = None
        self.token = None
        self.ssl_context = None

    def start(self):
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.log_file,
                                     env=self.env)
        line = read_line(self.proc, self.ready_timeout)
        if not line.startswith(("gpuboxd ready on http://", "gpuboxd ready on https://")):
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"gpuboxd did not get ready (stdout {line!r}); log:\n{self.log()}")
        self.url = line.split("ready on ", 1)[1]
        self.scheme, rest = self.url.split("://", 1)
        self.host, port = rest.rsplit(":", 1)
        self.port = int(port)
        return self

    def log(self):
        return Path(self.log_path).read_text(errors="replace")

    def wait_log(self, text, timeout=5.0):
        """The log once it holds text: the access line of a request is
        written after its response reaches the client, so it may lag."""
        deadline = time.monotonic() + timeout
        while text not in self.log() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.log()

    def connection(self, timeout=30):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        headers = dict(headers or {})
        if self.token and "Authorization" not in headers:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self.connection()
        try:
            return request(conn, method, path, body, headers)
        finally:
            conn.close()

    def get(self, path):
        return self.request("GET", path)

    def stop(self, sig=signal.SIGTERM):
        """Signal the daemon and require a clean, sanitizer-quiet exit 0."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"gpuboxd did not stop within {STOP_TIMEOUT}s; log:\n{self.log()}")
        finally:
            self.proc.stdout.close()
            self.log_file.close()
        log = self.log()
        for marker in SANITIZER_MARKERS:
            assert marker not in log, f"sanitizer report in gpuboxd's log:\n{log}"
        assert rc == 0, f"gpuboxd exited {rc}; log:\n{log}"
        return rc


def read_line(proc, timeout):
    """The first line the process writes on stdout, or '' at EOF/timeout."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def run_gpuboxd(args, timeout=60, env=None):
    """Run gpuboxd to completion (for flags that exit): (rc, stdout, stderr)."""
    p = subprocess.run([str(GPUBOXD), *args], capture_output=True, text=True, timeout=timeout,
                       env=env)
    return p.returncode, p.stdout, p.stderr


def fake_gpu_env(desc_path):
    env = dict(os.environ)
    env["GPUBOX_FAKE_GPUS"] = str(desc_path)
    return env


@pytest.fixture
def start_daemon(tmp_path):
    """Start gpuboxd with extra flags; every daemon started is stopped (and
    checked) at the end of the test unless the test stopped it already."""
    started = []

    def start(*args, env=None, listen="127.0.0.1:0", data_dir=None):
        n = len(started)
        data = data_dir or tmp_path / f"data{n}"
        flags = ["--data-dir", str(data)]
        if listen:
            flags += ["--listen", listen]
        d = Daemon([*flags, *args], data, tmp_path / f"gpuboxd{n}.log", env=env)
        started.append(d)
        return d.start()

    yield start
    for d in started:
        d.stop()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """One daemon with simulated GPUs shared by a module's read-only tests."""
    tmp = tmp_path_factory.mktemp("simulated")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB,1xT4-16GB", "--port-range", "41000-41009"],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    d.stop()


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket, to ask dockerd directly."""

    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.socket_path)
        self.sock = s


# The dockerd the tests ask directly: the unix socket $DOCKER_HOST names
# (scripts/test.sh gives each group of tests it runs side by side its own
# dockerd, and gpuboxd follows $DOCKER_HOST too), else the default one.
_docker_host = os.environ.get("DOCKER_HOST", "")
DOCKER_SOCKET = (_docker_host[len("unix://"):] if _docker_host.startswith("unix://")
                 else "/var/run/docker.sock")


def docker_request(method, path, body=None, socket_path=None):
    """One Engine API call on socket_path (default DOCKER_SOCKET); body is
    JSON-encoded."""
    conn = UnixHTTPConnection(socket_path or DOCKER_SOCKET)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        try:
            return Response(r.status, r.headers, raw)
        except ValueError:  # a non-JSON answer (e.g. an image's history stream)
            resp = Response(r.status, r.headers, b"")
            resp.body = raw
            return resp
    finally:
        conn.close()


def docker_get(path):
    return docker_request("GET", path).json
