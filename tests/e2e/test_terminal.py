"""The terminal (issue 30, items 1 and 2; docs/access.md): a WebSocket to a
process in the instance with a TTY, and `gpubox exec -it` / `-i` on top of
it, against a real gpuboxd and dockerd.

The WebSocket client is tests/e2e/wsutil.py; the CLI is driven through a
pseudo-terminal (python's pty module) for -it and through pipes for -i.
"""
import hashlib
import os
import pty
import re
import secrets
import select
import subprocess
import threading
import time

import pytest

from conftest import Daemon, docker_request
from rsutil import IMAGE, RUN_TAG, rs_path, wait_until, wipe
from secutil import VIEWER, as_, write_tokens
import wsutil

PREFIX = "e2term" + RUN_TAG
PORTS = "65300-65309"
ADMIN = "adm-" + secrets.token_hex(20)
CLI = os.environ.get("GPUBOX_CLI", "build/test/gpubox")


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("terminal")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\nwatch:viewer:{VIEWER}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens),
                "--terminal-max-per-user", "3", "--connection-timeout", "3"],
               tmp / "data", tmp / "gpuboxd.log").start()
    d.users = {}
    for name in ("alice", "bob"):
        d.users[name] = ok(as_(d, ADMIN, "POST", "/api/v1/users",
                               {"name": name + RUN_TAG, "role": "user"}))["token"]
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


def make_set(d, token, suffix=None):
    name = f"{PREFIX}{suffix or secrets.token_hex(2)}"
    ok(as_(d, token, "POST", "/api/v1/replicaSet",
           {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
            "cmd": ["sleep", "3600"]}))
    return name


@pytest.fixture(scope="module")
def alice_set(daemon):
    return make_set(daemon, daemon.users["alice"], "a")


def term(d, name, token, **query):
    return wsutil.connect(d, rs_path(name, "/terminal"), token=token, query=query)


def read_until(ws, pattern, timeout=20):
    """Output until pattern (a regex on the decoded text) appears."""
    ws.sock.settimeout(timeout)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kind, data = ws.recv()
        assert kind != "close", (seen, ws.close_code, ws.close_reason)
        if kind == "binary":
            seen += data
            m = re.search(pattern, seen.decode(errors="replace"))
            if m:
                return m
    raise AssertionError(f"{pattern!r} not seen in {seen!r}")


def processes(d, name):
    """The container's process list (ps), through the execute API."""
    r = ok(as_(d, ADMIN, "POST", rs_path(name, "/execute"), {"cmd": ["ps", "-o", "pid,args"]}))
    return r["stdout"]


# --- the WebSocket ---------------------------------------------------------------------


def test_a_shell_runs_and_survives_a_resize(daemon, alice_set):
    d = daemon
    ws = term(d, alice_set, d.users["alice"], cols=80, rows=24)
    ws.send_binary(b"stty size\n")
    read_until(ws, r"24 80")
    ws.resize(120, 40)
    ws.send_binary(b"stty size; echo done-$((6*7))\n")
    read_until(ws, r"40 120\s+done-42")
    ws.send_binary(b"exit 3\n")
    out, code = ws.read_until_exit()
    assert code == 3, out
    assert ws.close_code == 1000
    ws.shutdown()


def test_a_quiet_terminal_outlives_the_http_idle_timeout(daemon, alice_set):
    """--connection-timeout (3 s here) is for HTTP connections; a terminal
    is idle only after --terminal-idle."""
    d = daemon
    ws = term(d, alice_set, d.users["alice"])
    time.sleep(5)
    ws.send_binary(b"echo still-$((40+2))\n")
    read_until(ws, "still-42")
    ws.close()


def test_ten_megabytes_in_and_out_pass_intact(daemon, alice_set):
    """Input piped to cat without a TTY and read back: every byte, in order,
    while both directions flow at once (neither side may block the other)."""
    d = daemon
    data = os.urandom(10 * 1024 * 1024)
    ws = term(d, alice_set, d.users["alice"], cmd="cat", tty="false")

    def send():
        ws.send_binary(data)
        ws.eof()

    sender = threading.Thread(target=send)
    sender.start()
    ws.sock.settimeout(60)
    out = bytearray()
    code = None
    while True:
        kind, msg = ws.recv()
        if kind == "binary":
            assert msg[0] == 1, msg[:8]  # stdout
            out += msg[1:]
        elif kind == "text":
            code = __import__("json").loads(msg)["exit"]
        else:
            break
    sender.join()
    assert code == 0
    assert len(out) == len(data)
    assert hashlib.sha256(out).hexdigest() == hashlib.sha256(data).hexdigest()


def test_ten_megabytes_of_tty_output_pass_intact(daemon, alice_set):
    d = daemon
    ws = term(d, alice_set, d.users["alice"],
              cmd=["sh", "-c", "stty raw -echo; head -c 10485760 /dev/urandom >/tmp/out; "
                   "sha256sum </tmp/out >/tmp/sum; cat /tmp/out"])
    out, code = ws.read_until_exit(timeout=120)
    assert code == 0
    want = ok(as_(d, ADMIN, "POST", rs_path(alice_set, "/execute"),
                  {"cmd": ["cat", "/tmp/sum"]}))["stdout"].split()[0]
    assert len(out) == 10 * 1024 * 1024
    assert hashlib.sha256(out).hexdigest() == want


def test_closing_the_client_leaves_no_process(daemon, alice_set):
    d = daemon
    ws = term(d, alice_set, d.users["alice"], cmd=["sh", "-c", "sleep 4321 & sleep 4322"])
    wait_until(lambda: "sleep 4322" in processes(d, alice_set))
    ws.shutdown()  # gone without a close frame
    wait_until(lambda: "sleep 432" not in processes(d, alice_set), timeout=15)


def test_a_stopped_container_ends_the_terminal(daemon):
    d = daemon
    name = make_set(d, d.users["alice"])
    ws = term(d, name, d.users["alice"])
    ws.send_binary(b"echo ready\n")
    read_until(ws, "ready")
    ok(as_(d, d.users["alice"], "PATCH", rs_path(name, "/stop")))
    out, code = ws.read_until_exit(timeout=60)
    assert code is not None and code != 0
    assert ws.close_code == 1000


def test_another_users_terminal_is_404_and_a_viewers_403(daemon, alice_set):
    d = daemon
    with pytest.raises(wsutil.Refused) as e:
        term(d, alice_set, d.users["bob"])
    assert e.value.status == 404 and e.value.json["code"] == 1100
    with pytest.raises(wsutil.Refused) as e:
        term(d, alice_set, VIEWER)
    assert e.value.status == 403 and e.value.json["code"] == 1109
    with pytest.raises(wsutil.Refused) as e:
        term(d, alice_set, None)
    assert e.value.status == 401
    r = as_(d, d.users["bob"], "POST", rs_path(alice_set, "/terminal/ticket"))
    assert r.status == 404, r.json
    r = as_(d, VIEWER, "POST", rs_path(alice_set, "/terminal/ticket"))
    assert r.status == 403, r.json


def test_a_ticket_opens_the_terminal_once(daemon, alice_set):
    d = daemon
    t = ok(as_(d, d.users["alice"], "POST", rs_path(alice_set, "/terminal/ticket")))
    assert re.fullmatch(r"[0-9a-f]{64}", t["ticket"]) and t["expiresInSeconds"] == 30
    ws = term(d, alice_set, None, ticket=t["ticket"], cmd=["id", "-u"])
    out, code = ws.read_until_exit()
    assert code == 0 and out.strip() == b"0"
    with pytest.raises(wsutil.Refused) as e:
        term(d, alice_set, None, ticket=t["ticket"])
    assert e.value.status == 401 and "ticket" in e.value.json["msg"]
    # a ticket for one set opens no other
    other = make_set(d, d.users["alice"])
    t = ok(as_(d, d.users["alice"], "POST", rs_path(alice_set, "/terminal/ticket")))
    with pytest.raises(wsutil.Refused) as e:
        term(d, other, None, ticket=t["ticket"])
    assert e.value.status == 401


def test_bad_requests_are_refused_clearly(daemon, alice_set):
    d = daemon
    r = as_(d, d.users["alice"], "GET", rs_path(alice_set, "/terminal"))
    assert r.status == 400 and "WebSocket" in r.msg, r.json
    for query, word in (({"cols": "0", "rows": "10"}, "cols"), ({"cols": "80"}, "rows"),
                        ({"tty": "maybe"}, "tty")):
        with pytest.raises(wsutil.Refused) as e:
            term(d, alice_set, d.users["alice"], **query)
        assert e.value.status == 400 and word in e.value.json["msg"], e.value.json
    # as `docker exec -it`: a program that cannot start says why and exits 126 or 127
    ws = term(d, alice_set, d.users["alice"], cmd="/no/such/program")
    out, code = ws.read_until_exit()
    assert code in (126, 127) and b"no such file" in out.lower(), (code, out)


def test_a_user_may_hold_only_so_many_terminals(daemon, alice_set):
    d = daemon
    held = [term(d, alice_set, d.users["alice"]) for _ in range(3)]
    with pytest.raises(wsutil.Refused) as e:
        term(d, alice_set, d.users["alice"])
    assert e.value.status == 429 and e.value.json["code"] == 1160, e.value.json
    assert "--terminal-max-per-user" in e.value.json["msg"]
    held.pop().close()
    time.sleep(0.5)
    wait_until(lambda: _opens(d, alice_set), timeout=10)
    for ws in held:
        ws.shutdown()


def _opens(d, name):
    try:
        ws = term(d, name, d.users["alice"])
    except wsutil.Refused:
        return False
    ws.shutdown()
    return True


def test_an_idle_terminal_closes_and_a_stopping_gpuboxd_closes_all(tmp_path):
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                "--simulate-gpus", "1xA100-80GB", "--port-range", "65310-65314",
                "--terminal-idle", "2s"], tmp_path / "data", tmp_path / "gpuboxd.log").start()
    try:
        name = f"e2tidle{RUN_TAG}"  # its own prefix: this daemon's wipe spares the module's
        ok(d.request("POST", "/api/v1/replicaSet",
                     b'{"imageName": "%s", "replicaSetName": "%s", "cmd": ["sleep", "3600"]}'
                     % (IMAGE.encode(), name.encode())))
        ws = wsutil.connect(d, rs_path(name, "/terminal"))
        start = time.monotonic()
        ws.sock.settimeout(20)
        while True:
            kind, _ = ws.recv()
            if kind == "close":
                break
        assert ws.close_code == 1001 and "idle" in ws.close_reason
        assert 1.5 < time.monotonic() - start < 10

        # gpuboxd stopping closes its terminals (1001) and kills their processes
        ws = wsutil.connect(d, rs_path(name, "/terminal"), query={"cmd": ["sleep", "4444"]})
        wait_until(lambda: "sleep 4444" in ok(d.request(
            "POST", rs_path(name, "/execute"), b'{"cmd": ["ps", "-o", "args"]}'))["stdout"])
        t0 = time.monotonic()
        d.stop()
        assert time.monotonic() - t0 < 10
        ws.sock.settimeout(10)
        kind, _ = ws.recv()
        assert kind == "close" and ws.close_code == 1001, (kind, ws.close_code)
        top = docker_request("GET", f"/containers/{name}-1/top?ps_args=-o%20args").json
        assert not any("sleep 4444" in " ".join(p) for p in top.get("Processes") or []), top
        wipe_after = Daemon(d.args[1:], tmp_path / "data", tmp_path / "gpuboxd2.log").start()
        wipe(wipe_after, f"e2tidle{RUN_TAG}")
        wipe_after.stop()
    finally:
        d.stop()


# --- gpubox exec -it / -i ----------------------------------------------------------------


def cli_env(d, token):
    env = dict(os.environ)
    env["GPUBOX_HOST"] = f"http://{d.host}:{d.port}"
    env["GPUBOX_TOKEN"] = token
    return env


def test_exec_i_passes_piped_input_and_the_exit_code(daemon, alice_set):
    d = daemon
    env = cli_env(d, d.users["alice"])
    r = subprocess.run([CLI, "exec", "-i", alice_set, "--", "cat"], input=b"data\x00\xffmore\n",
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"data\x00\xffmore\n"
    r = subprocess.run([CLI, "exec", "-i", alice_set, "--", "sh", "-c",
                        "read x; echo got-$x; echo oops >&2; exit 7"],
                       input=b"hello\n", capture_output=True, env=env, timeout=60)
    assert r.returncode == 7, r.stderr
    assert r.stdout == b"got-hello\n" and r.stderr == b"oops\n"
    # the one-shot exec still works as before
    r = subprocess.run([CLI, "exec", alice_set, "--", "echo", "one-shot"], capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and b"one-shot" in r.stdout, r.stderr


def test_exec_it_in_a_pseudo_terminal(daemon, alice_set):
    """The CLI in a pty of its own: raw mode (a single keystroke goes
    through without Enter), the window's size and its changes (SIGWINCH),
    the exit code, and the terminal's mode restored at the end."""
    import fcntl
    import struct
    import termios
    d = daemon
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(cli_env(d, d.users["alice"]))
        os.execv(CLI, [CLI, "exec", "-it", alice_set, "--", "sh"])
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 99, 0, 0))
        out = b""

        def expect(pattern, timeout=20):
            nonlocal out
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    try:
                        out += os.read(fd, 65536)
                    except OSError:
                        break
                m = re.search(pattern, out.decode(errors="replace"))
                if m:
                    return m
            raise AssertionError(f"{pattern!r} not in {out!r}")

        os.write(fd, b"stty size\r")
        expect(r"33 99")
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 44, 111, 0, 0))
        os.kill(pid, __import__("signal").SIGWINCH)
        time.sleep(0.5)
        os.write(fd, b"stty size\r")
        expect(r"44 111")
        # raw mode: ^C goes to the remote shell (it survives), not to the CLI
        os.write(fd, b"sleep 30\r")
        time.sleep(0.5)
        os.write(fd, b"\x03")
        os.write(fd, b"echo alive-$((2+3))\r")
        expect(r"alive-5")
        os.write(fd, b"exit 5\r")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                if select.select([fd], [], [], 0.2)[0]:
                    out += os.read(fd, 65536)
            except OSError:
                pass
        else:
            raise AssertionError(f"gpubox exec -it did not end: {out!r}")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 5, (status, out)
        after = termios.tcgetattr(fd)  # the pty's mode, as the CLI left it
        assert after[3] & termios.ICANON and after[3] & termios.ECHO, "raw mode left on"
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def test_a_terminal_over_https(start_daemon, tmp_path):
    """The terminal through gpuboxd's TLS: libmicrohttpd carries a switched
    connection over a socket pair of its own; what is sent comes back intact."""
    import ssl
    key, cert = tmp_path / "server.key", tmp_path / "server.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    key.chmod(0o600)
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--port-range", "65315-65319",
                     "--tls-cert", str(cert), "--tls-key", str(key))
    d.ssl_context = ssl.create_default_context(cafile=str(cert))
    name = f"e2ttls{RUN_TAG}"
    ok(d.request("POST", "/api/v1/replicaSet",
                 b'{"imageName": "%s", "replicaSetName": "%s", "cmd": ["sleep", "3600"]}'
                 % (IMAGE.encode(), name.encode())))
    # sent whole before reading (an SSL socket is not for two threads at
    # once): small enough for the buffers on the way to hold the echo
    data = os.urandom(512 * 1024)
    ws = wsutil.connect(d, rs_path(name, "/terminal"), query={"cmd": "cat", "tty": "false"})
    ws.send_binary(data)
    ws.eof()
    out = bytearray()
    ws.sock.settimeout(60)
    while True:
        kind, msg = ws.recv()
        if kind == "binary":
            out += msg[1:]
        elif kind == "close":
            break
    assert bytes(out) == data
    wipe(d, f"e2ttls{RUN_TAG}")
