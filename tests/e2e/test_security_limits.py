"""Security end to end (issue 8), what callers can do to the daemon and the
host: slow and greedy clients, over-deep JSON, a catalogue of hostile
requests that must each get the right answer and change nothing, and the
safety defaults of every container gpubox makes, checked through Docker's
own inspect.
"""
import json
import socket
import threading
import time

import pytest

from rsutil import container, rs_path
from secutil import (ADMIN, IMAGE, MIB, PREFIX, as_, assert_nothing_changed,  # noqa: F401
                     bind_root, create_body, d, post_huge, secured, tokens)

# --- slow and greedy clients ---------------------------------------------------------------


def open_from(source, port, count):
    """count TCP connections to port from source (a loopback address)."""
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def closed_by_server(s, wait):
    """Did the server close s (EOF or reset) within wait seconds?"""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def timed_get(d, path):
    t0 = time.monotonic()
    r = d.get(path)
    return r, time.monotonic() - t0


def test_slowloris_does_not_starve_normal_requests(start_daemon):
    """200 clients from 8 addresses dribble their request headers one byte
    at a time and never finish; requests from another address still get
    their answers at once."""
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    sources = [f"127.0.0.{i}" for i in range(2, 10)]
    slow = []
    stop = threading.Event()
    try:
        for src in sources:
            slow += open_from(src, d.port, 25)
        header = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096

        def dribble():
            for i in range(len(header)):
                for s in slow:
                    try:
                        s.send(header[i:i + 1])
                    except OSError:
                        pass
                if stop.wait(0.2):
                    return

        t = threading.Thread(target=dribble)
        t.start()
        time.sleep(1.0)  # every slow client is connected and mid-header
        times = []
        for i in range(20):
            r, took = timed_get(d, "/healthz" if i % 2 else "/api/v1/resources/gpus")
            assert r.status == 200, r.json
            times.append(took)
        times.sort()
        # a loaded test machine may stall one request; none waits for the
        # slow clients, which would take the whole dribble (minutes)
        assert times[len(times) // 2] < 1.0, f"median {times[len(times) // 2]:.2f}s"
        assert times[-1] < 3.0, f"a normal request took {times[-1]:.2f}s under slowloris"
        open_slow = sum(not closed_by_server(s, 0.01) for s in slow)
        assert open_slow == len(slow), "slow clients under the limits were dropped"
    finally:
        stop.set()
        for s in slow:
            s.close()
    time.sleep(0.5)
    assert d.get("/healthz").status == 200


def test_one_address_cannot_take_every_connection(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--max-connections-per-ip", "8")
    greedy = open_from("127.0.0.20", d.port, 30)
    try:
        time.sleep(0.5)
        closed = sum(closed_by_server(s, 0.5) for s in greedy)
        assert closed == 22, f"{30 - closed} connections from one address stayed open"
        r, took = timed_get(d, "/api/v1/resources/gpus")
        assert r.status == 200 and took < 2.0
    finally:
        for s in greedy:
            s.close()
    time.sleep(0.5)
    # once they are gone the address is served again
    s = open_from("127.0.0.20", d.port, 1)[0]
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert s.recv(64).startswith(b"HTTP/1.1 200")
    s.close()


def test_idle_half_sent_request_is_closed_after_the_timeout(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--connection-timeout", "2")
    s = open_from("127.0.0.1", d.port, 1)[0]
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.monotonic()
    assert closed_by_server(s, 8), "the idle connection was never closed"
    assert 1.0 < time.monotonic() - t0 < 6.0
    s.close()


# --- oversized bodies ----------------------------------------------------------------------


def test_an_oversized_body_is_drained_so_the_client_reads_its_413(d):
    """A client that sends its whole (too large) body without waiting is
    not cut off mid-send: the body is read and dropped, then answered."""
    body = b"x" * (4 * MIB)
    with socket.create_connection((d.host, d.port), timeout=30) as s:
        s.sendall(f"POST /api/v1/replicaSet HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                  f"{ADMIN}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"code":1103' in answer and b"4194304 bytes" in answer


def test_a_client_that_expects_100_continue_gets_413_instead(d):
    with socket.create_connection((d.host, d.port), timeout=30) as s:
        s.sendall(b"POST /api/v1/replicaSet HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"100 Continue" not in answer


def test_announcing_more_than_16_mib_is_answered_at_once(d):
    with socket.create_connection((d.host, d.port), timeout=30) as s:
        s.sendall(b"POST /api/v1/replicaSet HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Length: 1000000000\r\n\r\n")
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"1000000000 bytes" in answer


# --- input limits and hostile requests ----------------------------------------------------


def nested(levels, inner="1"):
    return "[" * levels + inner + "]" * levels


def test_over_deep_json_is_refused_before_any_handler(d):
    name = f"{PREFIX}_deep"
    base = json.dumps(create_body(name))[:-1]
    # 1 (the body) + 32 arrays: one too many
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=f'{base}, "labels": {nested(32)}}}'.encode())
    assert r.status == 400 and r.code == 1000, r.json
    assert "more than 32 levels" in r.msg
    # 1 + 31 is within the limit and reaches the handler, which says what is wrong
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=f'{base}, "labels": {nested(31)}}}'.encode())
    assert r.status == 400 and r.code == 1000, r.json
    # a megabyte of brackets, and brackets inside strings do not count
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=b"[" * (MIB - 1))
    assert r.status == 400 and r.code == 1000 and "32 levels" in r.msg
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", create_body(name, env=["X=" + "[" * 1000]))
    assert r.status == 200, r.json
    assert as_(d, ADMIN, "DELETE", rs_path(name) + "?purge=true").status == 200
    assert_nothing_changed(d)


def hostile_cases(bind_root):
    """(what, body or raw bytes, HTTP status, envelope code)."""
    n = f"{PREFIX}_h"
    c = create_body
    return [
        # binds (DESIGN.md section 4)
        ("bind /", c(n, binds=[{"src": "/", "dest": "/h"}]), 400, 1000),
        ("bind ../../etc", c(n, binds=[{"src": f"{bind_root}/../../etc", "dest": "/h"}]), 400,
         1000),
        ("bind symlink out", c(n, binds=[{"src": f"{bind_root}/escape", "dest": "/h"}]), 403,
         1109),
        ("bind docker.sock", c(n, binds=[{"src": "/var/run/docker.sock", "dest": "/s"}]), 403,
         1109),
        ("bind /proc", c(n, binds=[{"src": "/proc", "dest": "/h"}]), 403, 1109),
        ("bind /sys", c(n, binds=[{"src": "/sys/kernel", "dest": "/h"}]), 403, 1109),
        ("bind /dev", c(n, binds=[{"src": "/dev", "dest": "/h"}]), 403, 1109),
        ("bind /etc/shadow", c(n, binds=[{"src": "/etc/shadow", "dest": "/h"}]), 403, 1109),
        ("bind missing dir", c(n, binds=[{"src": f"{bind_root}/not/there", "dest": "/h"}]), 400,
         1000),
        ("bind unknown volume", c(n, binds=[{"src": "novolume", "dest": "/h"}]), 400, 1000),
        ("bind relative dest", c(n, binds=[{"src": f"{bind_root}/data", "dest": "h"}]), 400,
         1000),
        # numbers
        ("gpuCount -1", c(n, gpuCount=-1), 400, 1012),
        ("gpuCount huge", c(n, gpuCount=10 ** 12), 400, 1000),
        ("gpuCount 2^64", c(n, gpuCount=2 ** 64), 400, 1000),
        ("gpuCount float", c(n, gpuCount=1.5), 400, 1000),
        ("gpuCount string", c(n, gpuCount="2"), 400, 1000),
        ("gpuCount more than exist", c(n, gpuCount=5), 409, 1013),
        ("containerPort 70000", c(n, containerPorts=["70000"]), 400, 1000),
        ("containerPort -1", c(n, containerPorts=["-1"]), 400, 1000),
        ("hostPort 65536", c(n, ports=[{"hostPort": 65536, "containerPort": 22}]), 400, 1000),
        ("hostPort negative", c(n, ports=[{"hostPort": -5, "containerPort": 22}]), 400, 1000),
        ("memory negative", c(n, memory="-1GB"), 400, 1000),
        ("memory absurd", c(n, memory="1000000PB"), 400, 1029),
        ("memory absurd bytes", c(n, memory="99999999999999999999TB"), 400, 1000),
        ("cpus negative", c(n, cpus=-1), 400, 1000),
        ("cpus absurd", c(n, cpus=1e308), 400, 1000),
        # names
        ("name with -", c("a-b"), 400, 1003),
        ("name with /", c("a/b"), 400, 1106),
        ("name unicode", c("名字"), 400, 1106),
        ("name 1000 chars", c("x" * 1000), 400, 1106),
        ("name empty", c(""), 400, 1002),
        ("name ..", c(".."), 400, 1106),
        ("name NUL", c("a\u0000b"), 400, 1000),  # jansson refuses \u0000
        # strings, lists and fields
        ("env 1000 entries", c(n, env=[f"K{i}=v" for i in range(1000)]), 400, 1000),
        ("env without =", c(n, env=["NOEQUALS"]), 400, 1000),
        ("env 5000 chars", c(n, env=["K=" + "v" * 5000]), 400, 1000),
        ("env NVIDIA_VISIBLE_DEVICES", c(n, env=["NVIDIA_VISIBLE_DEVICES=all"]), 400, 1000),
        ("env share limit", c(n, env=["CUDA_DEVICE_MEMORY_LIMIT_0=80g"]), 400, 1000),
        ("cmd 300 args", c(n, cmd=["sleep"] * 300), 400, 1000),
        ("cmd 5000 chars", c(n, cmd=["sleep", "1" * 5000]), 400, 1000),
        ("label gpubox.", c(n, labels={"gpubox.replicaset": "other"}), 400, 1000),
        ("privileged field", c(n, privileged=True), 400, 1000),
        ("HostConfig field", c(n, HostConfig={"NetworkMode": "host"}), 400, 1000),
        ("networkMode field", c(n, networkMode="host"), 400, 1000),
        ("image empty", c(n, imageName=""), 400, 1001),
        ("image with blank", c(n, imageName="no such image"), 400, 1000),
        ("image absent", c(n, imageName="gpubox-no-such-image:latest"), 422, 1110),
        ("restartPolicy", c(n, restartPolicy="sometimes"), 400, 1000),
        # bodies
        ("truncated JSON", b'{"imageName": "x", "replicaSetName": ', 400, 1000),
        ("duplicate keys", ('{"imageName": "%s", "replicaSetName": "%s", "gpuCount": 0, '
                            '"gpuCount": 4}' % (IMAGE, n)).encode(), 400, 1000),
        ("array body", b"[]", 400, 1000),
        ("string body", b'"create please"', 400, 1000),
        ("empty body", b"", 400, 1000),
        ("invalid UTF-8", b'{"imageName": "\xff\xfe", "replicaSetName": "x"}', 400, 1000),
        ("10 MB body", b'{"imageName": "' + b"x" * (10 * MIB) + b'"}', 413, 1103),
        ("deep nesting", nested(100000).encode(), 400, 1000),
    ]


def test_hostile_requests_get_the_right_answer_and_change_nothing(d, bind_root):
    before = sorted(p.name for p in bind_root.iterdir())
    wrong = []
    for what, body, status, code in hostile_cases(bind_root):
        raw = body if isinstance(body, bytes) else None
        if raw is not None and len(raw) > MIB:
            r = post_huge(d, ADMIN, "/api/v1/replicaSet", raw)
        else:
            r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", body=None if raw else body, raw=raw)
        got = (r.status, r.json["code"] if r.json else None)
        if got != (status, code):
            wrong.append(f"{what}: got {got} ({r.json and r.msg!r}), want {(status, code)}")
        elif not r.msg or r.msg == "success":
            wrong.append(f"{what}: no message")
        assert d.get("/healthz").status == 200, f"the daemon stopped answering after {what}"
    assert not wrong, "\n".join(wrong)
    assert_nothing_changed(d)
    assert sorted(p.name for p in bind_root.iterdir()) == before
    assert not (bind_root / "not").exists(), "Docker was left to create a host directory"


@pytest.mark.parametrize("method,tail,status,code", [
    ("GET", "a-b", 400, 1003),
    ("GET", "%2e%2e", 400, 1106),
    ("GET", "x" * 1000, 400, 1106),
    ("GET", "%E5%90%8D", 400, 1106),
    ("DELETE", "a%2Fb", 404, 1101),  # decoded before routing: /a/b is no route
    ("GET", f"{PREFIX}_none", 404, 1100),
    ("PATCH", f"{PREFIX}_none/stop", 404, 1100),
])
def test_hostile_names_in_paths(d, method, tail, status, code):
    r = as_(d, ADMIN, method, f"/api/v1/replicaSet/{tail}")
    assert (r.status, r.code) == (status, code), r.json
    assert_nothing_changed(d)


def test_hostile_execute_and_commit_bodies(d):
    name = f"{PREFIX}_ex"
    assert as_(d, ADMIN, "POST", "/api/v1/replicaSet", create_body(name)).status == 200
    cases = [
        ("execute", {"cmd": ["id"], "timeoutSeconds": -5}, 400, 1000),
        ("execute", {"cmd": ["id"], "timeoutSeconds": 10 ** 9}, 400, 1000),
        ("execute", {"cmd": []}, 400, 1000),
        ("execute", {"cmd": ["id"], "workDir": "relative"}, 400, 1000),
        ("execute", {"cmd": ["id"] * 1000}, 400, 1000),
        ("execute", {"cmd": "id", "extra": 1}, 400, 1000),
        ("commit", {"newImageName": "UPPER/Case:tag"}, 400, 1000),
        ("commit", {"newImageName": "x" * 300}, 400, 1000),
        ("commit", {"newImageName": IMAGE}, 409, 1008),
        ("commit", {"newImageName": IMAGE, "overwrite": True}, 403, 1109),
        ("commit", {}, 400, 1000),
    ]
    wrong = []
    for action, body, status, code in cases:
        r = as_(d, ADMIN, "POST", rs_path(name, "/" + action), body)
        if (r.status, r.code) != (status, code):
            wrong.append(f"{action} {body!r:.60}: got {(r.status, r.code)} {r.msg!r}")
    assert not wrong, "\n".join(wrong)
    info = as_(d, ADMIN, "GET", rs_path(name)).data["info"]
    assert info["version"] == 1 and info["status"] == "running"


# --- container defaults --------------------------------------------------------------------


def assert_safe_host_config(hc):
    assert hc["Privileged"] is False
    assert any(o.startswith("no-new-privileges") for o in hc["SecurityOpt"]), hc["SecurityOpt"]
    assert hc["PidsLimit"] and hc["PidsLimit"] > 0
    # the owner's own bridge network (test_security_network.py), never the host's
    assert hc["NetworkMode"].startswith("gpubox-u-"), hc["NetworkMode"]
    assert hc["PidMode"] == ""
    assert hc["IpcMode"] == "private"
    assert hc["UTSMode"] == ""
    assert hc["UsernsMode"] == ""
    assert not hc.get("CapAdd")
    assert not hc.get("Devices")
    assert hc["Init"] is True


def test_containers_are_never_privileged_and_keep_host_namespaces_out(d, bind_root):
    """Whatever a client asks (both route families, GPUs, binds, ports),
    the container is not privileged, cannot gain privileges, has a pids
    limit and shares no namespace with the host."""
    name = f"{PREFIX}_safe"
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet",
            create_body(name, gpuCount=2, containerPorts=["22"], env=["A=1"],
                        binds=[{"src": str(bind_root / "data"), "dest": "/data"}]))
    assert r.status == 200, r.json
    inspect = container(f"{name}-1")
    assert_safe_host_config(inspect["HostConfig"])
    assert inspect["State"]["Running"]
    # seen from inside: not the host's PID namespace (PID 1 is docker-init),
    # and no_new_privs is set on the process
    r = as_(d, ADMIN, "POST", rs_path(name, "/execute"),
            {"cmd": ["sh", "-c", "grep NoNewPrivs /proc/self/status; cat /proc/1/comm"]})
    assert r.status == 200, r.json
    out = r.data["stdout"]
    assert "NoNewPrivs:\t1" in out
    assert "init" in out.splitlines()[-1]

    legacy = f"{PREFIX}_safeold"
    r = as_(d, ADMIN, "POST", "/api/v1/containers",
            {"imageName": IMAGE, "containerName": legacy, "gpuCount": 1,
             "cmd": ["sleep", "3600"], "Ports": [{"hostPort": 0, "containerPort": "80"}]})
    assert r.status == 200, r.json
    assert_safe_host_config(container(f"{legacy}-1")["HostConfig"])
