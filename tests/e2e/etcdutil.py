"""A real etcd for the end-to-end tests (Debian's etcd-server, /usr/bin/etcd
or $GPUBOX_ETCD): one member on two free loopback ports, its data dir and
log in a directory of the test's own.

EtcdServer starts it and waits until it serves; freeze/thaw (SIGSTOP,
SIGCONT), kill and restart (same data dir and ports) let outage tests take
it away and bring it back. It dies with the test process whatever way that
ends (PR_SET_PDEATHSIG), so none is ever left running. That signal follows
the thread that started etcd, not the process: start and restart it from
the test's main thread.

The gateway calls the tests make themselves (reading keys, compaction) go
through urllib, as any client of etcd's JSON gateway would.
"""
import base64
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ETCD = os.environ.get("GPUBOX_ETCD", "etcd")
READY_TIMEOUT = 20
PR_SET_PDEATHSIG = 1


def free_port():
    """A loopback TCP port nothing listens on at the moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def unb64(s):
    return base64.b64decode(s).decode()


def successor(key):
    """etcd's range_end for every key starting with key."""
    b = bytearray(key.encode())
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return b"\0"
    b[-1] += 1
    return bytes(b)


class EtcdServer:
    """One etcd member; its directory is dir (data/ and etcd.log)."""

    def __init__(self, dir):
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = None
        self.client_port = self.peer_port = None

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.client_port}"

    def url(self, prefix="", **options):
        """The --store URL for gpuboxd: etcd://127.0.0.1:PORT/prefix?opts."""
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"etcd://{self.endpoint}{prefix}{'?' + query if query else ''}"

    def start(self):
        for _ in range(3):  # a port found free can be taken before etcd binds it
            self.client_port, self.peer_port = free_port(), free_port()
            if self.client_port != self.peer_port and self._spawn_and_wait():
                return self
        raise AssertionError(f"etcd did not start; log:\n{self.log()}")

    def _spawn_and_wait(self):
        import threading
        assert threading.current_thread() is threading.main_thread(), \
            "etcd would die with this thread (PR_SET_PDEATHSIG): start it from the main thread"
        client = f"http://{self.endpoint}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [ETCD, "--name", "default", "--data-dir", str(self.dir / "data"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"default={peer}"]
        with open(self.dir / "etcd.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                return False
            try:
                self.post("/v3/kv/range", {"key": b64("\0")}, timeout=1)
                return True
            except OSError:
                time.sleep(0.05)
        self.kill()
        return False

    def restart(self):
        """Start again on the same data dir and ports."""
        assert self.proc is None, "etcd is still running"
        if not self._spawn_and_wait():
            raise AssertionError(f"etcd did not start again; log:\n{self.log()}")
        return self

    def freeze(self):
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)

    def kill(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a frozen etcd cannot act on SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log(self):
        p = self.dir / "etcd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    # ---- the gateway ----------------------------------------------------

    def post(self, path, body, timeout=5):
        req = urllib.request.Request(f"http://{self.endpoint}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def range(self, prefix):
        """{key: value} of every key starting with prefix (strings)."""
        r = self.post("/v3/kv/range", {"key": b64(prefix), "range_end": b64(successor(prefix))})
        return {unb64(kv["key"]): unb64(kv.get("value", "")) for kv in r.get("kvs", [])}

    def revision(self):
        return int(self.post("/v3/kv/range", {"key": b64("\0")})["header"]["revision"])

    def compact(self):
        """Compact at the current revision: every older revision is gone."""
        rev = self.revision()
        self.post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def range_at(self, prefix, revision):
        """A range at a past revision: raises HTTPError once compacted."""
        return self.post("/v3/kv/range", {"key": b64(prefix), "range_end": b64(successor(prefix)),
                                          "revision": str(revision)})


class HoldingProxy:
    """A TCP proxy in front of etcd's gateway that can hold back writes, as a
    network that delays packets would: while `holding`, each POST
    /v3/kv/txn is read in full from gpuboxd but not passed on, so gpuboxd
    times out not knowing whether it was applied. release(deliver=True)
    then sends every held request to etcd (the write lands late), and
    release(deliver=False) drops them (it never lands).

    Each request goes to etcd on a connection of its own, with
    "Connection: close", and the answer is relayed as it comes; gpuboxd's
    curl then opens a new connection for its next request."""

    def __init__(self, upstream_port):
        import threading
        self.upstream_port = upstream_port
        self.holding = False
        self.held = []
        self.lock = threading.Lock()
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def close(self):
        self.closed = True
        self.server.close()

    def _accept(self):
        import threading
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _read_request(sock):
        """One HTTP request with a Content-Length body, or None at EOF."""
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            body += chunk
        lines = [l for l in head.split(b"\r\n")
                 if not l.lower().startswith((b"connection:", b"keep-alive:"))]
        return b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body

    def _forward(self, request):
        """Send one request to etcd; its whole answer (etcd closes after it)."""
        with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10) as up:
            up.sendall(request)
            answer = b""
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    return answer
                answer += chunk

    def _serve(self, client):
        with client:
            try:
                request = self._read_request(client)
                if request is None:
                    return
                with self.lock:
                    if self.holding and request.startswith(b"POST /v3/kv/txn "):
                        self.held.append(request)
                        request = None
                if request is None:
                    client.recv(1)  # until gpuboxd gives up and closes
                    return
                client.sendall(self._forward(request))
            except OSError:
                return

    def release(self, deliver):
        """Deliver or drop what is held, then hold nothing more. Writes that
        arrive meanwhile (gpuboxd retrying) are held until the late ones are
        in, then dropped: delivered first, a retry could overtake them."""
        with self.lock:
            held, self.held = self.held, []
        for request in held if deliver else []:
            self._forward(request)
        with self.lock:
            self.holding = False
            self.held = []
        return len(held)
