"""Security end to end (issue 8): bearer tokens and roles, the audit log and
tokens kept out of it, loopback-only without tokens, HTTPS with a
certificate the tests make, CORS, slow and greedy clients, over-deep JSON,
the safety defaults of every container gpubox makes, and a catalogue of
hostile requests that must each get the right answer and change nothing.

One daemon with tokens (4 simulated A100s, ports 61400-61449, binds allowed
under one temporary directory) serves most tests; the others start their
own. Replica sets are named with the prefix e2sec and removed after each
test.
"""
import http.client
import json
import os
import secrets
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import warnings

import pytest

from conftest import Daemon, Response, run_gpuboxd
from rsutil import (IMAGE, call, container, containers_with_prefix, held_gpus, list_sets,
                    rs_path, used_ports, wipe)

PREFIX = "e2sec"
PORT_RANGE = "61400-61449"
ADMIN = "adm-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
UNKNOWN = "nobody-" + secrets.token_hex(20)
CHALLENGE = 'Bearer realm="gpubox"'
MIB = 1024 * 1024


def write_tokens(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens",
                        f"# gpubox tokens\nalice:admin:{ADMIN}\nbob:viewer:{VIEWER}\n")


@pytest.fixture(scope="module")
def bind_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("secbinds")
    (root / "data").mkdir()
    (root / "escape").symlink_to("/etc")
    return root


@pytest.fixture(scope="module")
def secured(tmp_path_factory, tokens, bind_root):
    tmp = tmp_path_factory.mktemp("secured")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "4xA100-80GB", "--port-range", PORT_RANGE, "--bind-prefixes", str(bind_root),
                "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture
def d(secured):
    """The module's daemon with no token of its own; afterwards no replica
    set and no container is left, whatever the test did."""
    secured.token = None
    yield secured
    secured.token = ADMIN
    try:
        wipe(secured, PREFIX)
    finally:
        secured.token = None


def as_(d, token, method, path, body=None, raw=None, headers=None):
    """One call with the given bearer token (None: no Authorization)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json"} if data is not None else {}
    h.update(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    return d.request(method, path, body=data, headers=h)


def post_huge(d, token, path, raw):
    """POST a body the server refuses before reading it all: it answers and
    closes while the client is still sending, so send what it takes and then
    read the answer."""
    with socket.create_connection((d.host, d.port), timeout=30) as s:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {token}\r\nContent-Length: {len(raw)}\r\n\r\n")
        try:
            s.sendall(head.encode() + raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = http.client.HTTPResponse(s)
        r.begin()
        return Response(r.status, r.headers, r.read())


def create_body(name, **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
            "cmd": ["sleep", "3600"]}
    body.update(spec)
    return body


def assert_nothing_changed(d):
    """No replica set (not even a deleted one), no container, no GPU or port
    held."""
    d.token = ADMIN
    try:
        assert list_sets(d, all_=True) == []
        assert held_gpus(d) == set()
        assert used_ports(d) == []
    finally:
        d.token = None
    assert containers_with_prefix(PREFIX) == []


# --- tokens and roles ---------------------------------------------------------------------


def test_open_routes_answer_without_a_token(d):
    for path in ("/healthz", "/version"):
        r = d.get(path)
        assert r.status == 200 and r.code == 200, (path, r.json)


ROUTES = [("GET", "/api/v1/resources/gpus"), ("GET", "/api/v1/replicaSet"),
          ("GET", "/openapi.json"), ("POST", "/api/v1/replicaSet"),
          ("DELETE", "/api/v1/replicaSet/foo"), ("PATCH", "/api/v1/replicaSet/foo/stop"),
          ("POST", "/api/v1/containers"), ("GET", "/api/v1/no/such/route"),
          ("PATCH", "/api/v1/gpus")]


@pytest.mark.parametrize("method,path", ROUTES)
def test_no_token_is_401_with_a_challenge(d, method, path):
    """Without a token nothing but the open routes answers, not even a 404
    that would tell which routes exist."""
    r = as_(d, None, method, path)
    assert r.status == 401 and r.code == 1108, r.json
    assert r.headers["WWW-Authenticate"] == CHALLENGE
    assert "Authorization: Bearer" in r.msg
    r = as_(d, None, method, path, headers={"Authorization": f"Basic {ADMIN}"})
    assert r.status == 401 and r.code == 1108


@pytest.mark.parametrize("method,path", ROUTES[:4])
def test_unknown_token_is_401_invalid_token(d, method, path):
    r = as_(d, UNKNOWN, method, path)
    assert r.status == 401 and r.code == 1108, r.json
    assert r.headers["WWW-Authenticate"] == CHALLENGE + ', error="invalid_token"'
    # a token that is a prefix or an extension of a real one is not it
    for near in (ADMIN[:-1], ADMIN + "x", ADMIN.upper()):
        assert as_(d, near, method, path).status == 401


def test_viewer_reads_but_every_write_is_403(d):
    assert as_(d, VIEWER, "GET", "/api/v1/replicaSet").status == 200
    assert as_(d, VIEWER, "GET", "/api/v1/resources/gpus").status == 200
    assert as_(d, VIEWER, "GET", "/openapi.json").status == 200
    head = as_(d, VIEWER, "HEAD", "/api/v1/resources/ports")
    assert head.status == 200 and head.body == b""
    writes = [("POST", "/api/v1/replicaSet", create_body(f"{PREFIX}_v")),
              ("POST", "/api/v1/containers", {"imageName": IMAGE,
                                              "containerName": f"{PREFIX}_v"}),
              ("PATCH", rs_path(f"{PREFIX}_v", "/stop"), None),
              ("PATCH", rs_path(f"{PREFIX}_v", "/pause"), None),
              ("POST", rs_path(f"{PREFIX}_v", "/execute"), {"cmd": ["id"]}),
              ("POST", rs_path(f"{PREFIX}_v", "/commit"), {"newImageName": "x:y"}),
              ("DELETE", rs_path(f"{PREFIX}_v"), None)]
    for method, path, body in writes:
        r = as_(d, VIEWER, method, path, body)
        assert r.status == 403 and r.code == 1109, (method, path, r.json)
        assert r.msg.startswith("token 'bob' has role viewer;")
        assert r.msg.endswith("needs role admin")
        assert "WWW-Authenticate" not in r.headers
    assert_nothing_changed(d)


def test_admin_creates_viewer_reads_but_cannot_delete(d):
    name = f"{PREFIX}_roles"
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", create_body(name, gpuCount=1))
    assert r.status == 200, r.json
    r = as_(d, VIEWER, "GET", rs_path(name))
    assert r.status == 200 and r.data["info"]["containerName"] == f"{name}-1"
    assert as_(d, VIEWER, "DELETE", rs_path(name)).status == 403
    assert container(f"{name}-1")["State"]["Running"]
    assert as_(d, ADMIN, "DELETE", rs_path(name)).status == 200
    assert container(f"{name}-1") is None


def test_audit_lines_name_the_caller_and_no_token_is_ever_logged(d):
    name = f"{PREFIX}_audit"
    assert as_(d, ADMIN, "POST", "/api/v1/replicaSet", create_body(name)).status == 200
    assert as_(d, VIEWER, "DELETE", rs_path(name)).status == 403
    assert as_(d, UNKNOWN, "PATCH", rs_path(name, "/stop")).status == 401
    assert as_(d, None, "DELETE", rs_path(name)).status == 401
    assert as_(d, VIEWER, "GET", rs_path(name)).status == 200
    assert as_(d, ADMIN, "DELETE", rs_path(name)).status == 200
    log = d.wait_log(f"user=alice role=admin DELETE {rs_path(name)} -> 200")
    for secret in (ADMIN, VIEWER, UNKNOWN, ADMIN[:12], VIEWER[:12], UNKNOWN[:12]):
        assert secret not in log, "a token (or part of one) reached the log"
    audit = [line.split("audit: ", 1)[1] for line in log.splitlines() if "audit: " in line]
    path = rs_path(name)
    assert "user=alice role=admin POST /api/v1/replicaSet -> 200 code=200" in audit
    assert f"user=bob role=viewer DELETE {path} -> 403 code=1109" in audit
    assert f"user=- role=none PATCH {path}/stop -> 401 code=1108" in audit
    assert f"user=- role=none DELETE {path} -> 401 code=1108" in audit
    assert f"user=alice role=admin DELETE {path} -> 200 code=200" in audit
    assert not any(f"GET {path}" in a for a in audit), "reads are not audited"


# --- start-up refusals ---------------------------------------------------------------------


def startup(tmp_path, *flags):
    rc, out, err = run_gpuboxd(["--data-dir", str(tmp_path / "data"), "--simulate-gpus",
                                "1xT4-16GB", *flags])
    return rc, out + err


@pytest.mark.parametrize("text,mode,expect", [
    (f"alice:admin:{ADMIN}\n", 0o644, "has mode 0644: other users may read or change it; "
                                      "run chmod 600"),
    (f"alice:admin:{ADMIN}\n", 0o606, "has mode 0606"),
    (f"alice:admin:{ADMIN}\n{ADMIN}\n", 0o600, "tokens:2: expected name:role:token"),
    (f"alice:root:{ADMIN}\n", 0o600, "tokens:1: the role (second field) of 'alice' must be "
                                     "admin or viewer"),
    (f"alice:{ADMIN}:admin\n", 0o600, "tokens:1: the role (second field)"),
    ("alice:admin:short\n", 0o600, "tokens:1: the token of 'alice' is 5 characters"),
    (f"alice:admin:{ADMIN}\nbob:viewer:{ADMIN}\n", 0o600, "is also another entry's token"),
    ("# nothing yet\n", 0o600, "holds no token"),
])
def test_bad_token_files_stop_start_up(tmp_path, text, mode, expect):
    path = write_tokens(tmp_path / "tokens", text, mode)
    rc, out = startup(tmp_path, "--listen", "127.0.0.1:0", "--token-file", str(path))
    assert rc == 2, out
    assert expect in out
    assert ADMIN not in out, "a token reached the error message"
    assert "ready" not in out


def test_missing_token_file_stops_start_up(tmp_path):
    rc, out = startup(tmp_path, "--token-file", str(tmp_path / "nope"))
    assert rc == 2 and "cannot read token file" in out and "No such file" in out


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_without_tokens_only_loopback_is_allowed(tmp_path, listen):
    rc, out = startup(tmp_path, "--listen", listen)
    assert rc == 2, out
    assert f"--listen {listen} is reachable from other machines, but no --token-file" in out
    assert "--insecure-no-auth" in out


def test_insecure_no_auth_opens_any_address_with_a_warning(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--insecure-no-auth", listen="0.0.0.0:0")
    d.host = "127.0.0.1"
    assert d.get("/api/v1/resources/gpus").status == 200
    assert "auth: OFF on 0.0.0.0:0 (--insecure-no-auth)" in d.log()


def test_tokens_on_an_open_address_warn_about_clear_text(start_daemon, tokens):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--token-file", str(tokens),
                     listen="0.0.0.0:0")
    d.host = "127.0.0.1"
    assert d.get("/api/v1/resources/gpus").status == 401
    d.token = VIEWER
    assert d.get("/api/v1/resources/gpus").status == 200
    assert "tls: off on 0.0.0.0:0: tokens cross the network in clear text" in d.log()


def test_loopback_without_tokens_needs_no_token(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB")
    r = d.request("DELETE", "/api/v1/replicaSet/nothere")
    assert r.status == 404, r.json
    line = "audit: user=anonymous role=admin DELETE /api/v1/replicaSet/nothere -> 404"
    assert line in d.wait_log(line)


# --- TLS -----------------------------------------------------------------------------------


def make_cert(dirpath, name="server", cn="127.0.0.1"):
    key, cert = dirpath / f"{name}.key", dirpath / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={cn}",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls"))


def https_get(d, path, context, token=None):
    req = urllib.request.Request(f"https://127.0.0.1:{d.port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, context=context, timeout=10) as r:
        return r.status, json.loads(r.read())


def test_https_with_a_self_signed_certificate(start_daemon, tls_files, tokens):
    cert, key = tls_files
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--tls-cert", str(cert), "--tls-key",
                     str(key), "--token-file", str(tokens))
    assert d.scheme == "https" and d.url.startswith("https://127.0.0.1:")
    trusting = ssl.create_default_context(cafile=str(cert))
    status, body = https_get(d, "/api/v1/resources/gpus", trusting, VIEWER)
    assert status == 200 and body["code"] == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        https_get(d, "/api/v1/resources/gpus", trusting)
    assert e.value.code == 401
    # a client that does not trust the certificate refuses the server
    with pytest.raises(urllib.error.URLError) as e:
        https_get(d, "/version", ssl.create_default_context())
    assert isinstance(e.value.reason, ssl.SSLCertVerificationError)
    # plain HTTP on the HTTPS port gets no answer
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        conn.request("GET", "/version")
        conn.getresponse()
    conn.close()
    # TLS 1.1 is not offered
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(cafile=str(cert))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        https_get(d, "/version", old)
    # the conftest client works over TLS too
    d.ssl_context = trusting
    d.token = ADMIN
    assert d.get("/api/v1/resources/ports").status == 200
    assert f"listening on https://127.0.0.1:{d.port}" in d.log()


def test_tls_setting_mistakes_stop_start_up(tmp_path, tls_files):
    cert, key = tls_files
    rc, out = startup(tmp_path, "--tls-cert", str(cert))
    assert rc == 2 and "HTTPS needs both --tls-cert and --tls-key; --tls-key is missing" in out
    loose = tmp_path / "loose.key"
    loose.write_bytes(key.read_bytes())
    loose.chmod(0o644)
    rc, out = startup(tmp_path, "--tls-cert", str(cert), "--tls-key", str(loose))
    assert rc == 2 and "other users may read or change the private key" in out
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("this is not a certificate\n")
    rc, out = startup(tmp_path, "--tls-cert", str(garbage), "--tls-key", str(key))
    assert rc == 2 and "is not a PEM file holding a certificate" in out
    not_a_key = tmp_path / "cert-as-key.pem"
    not_a_key.write_bytes(cert.read_bytes())
    not_a_key.chmod(0o600)
    rc, out = startup(tmp_path, "--tls-cert", str(cert), "--tls-key", str(not_a_key))
    assert rc == 2 and "is not a PEM file holding a private key" in out


def test_a_key_that_does_not_match_the_certificate_stops_start_up(tmp_path, tls_files):
    cert, _ = tls_files
    _, other_key = make_cert(tmp_path, "other")
    rc, out = startup(tmp_path, "--listen", "127.0.0.1:0", "--tls-cert", str(cert),
                      "--tls-key", str(other_key))
    assert rc == 2, out
    assert "cannot serve HTTPS on 127.0.0.1:0" in out


# --- CORS ----------------------------------------------------------------------------------


def cors_headers(r):
    return {k: v for k, v in r.headers.items() if k.lower().startswith("access-control-")}


def preflight(d, origin, method="POST"):
    return d.request("OPTIONS", "/api/v1/replicaSet",
                     headers={"Origin": origin, "Access-Control-Request-Method": method,
                              "Access-Control-Request-Headers": "authorization,content-type"})


def test_cors_is_off_by_default(d):
    for origin in ("https://evil.example", "null", "http://localhost:3000"):
        r = d.request("GET", "/version", headers={"Origin": origin})
        assert r.status == 200 and cors_headers(r) == {}
        r = as_(d, ADMIN, "GET", "/api/v1/replicaSet", headers={"Origin": origin})
        assert r.status == 200 and cors_headers(r) == {}
        r = preflight(d, origin)
        assert r.status == 403 and r.code == 1109, r.json
        assert "cross-origin requests" in r.msg and "--cors-origins" in r.msg
        assert cors_headers(r) == {}


def test_cors_answers_only_listed_origins(start_daemon, tokens):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--token-file", str(tokens),
                     "--cors-origins", "https://console.example,http://localhost:3000")
    r = d.request("GET", "/version", headers={"Origin": "https://console.example"})
    h = cors_headers(r)
    assert h["Access-Control-Allow-Origin"] == "https://console.example"
    assert "Access-Control-Allow-Credentials" not in h
    assert "Origin" in r.headers["Vary"]
    # the configured origin comes back, never the client's spelling of it
    r = d.request("GET", "/version", headers={"Origin": "HTTPS://CONSOLE.EXAMPLE"})
    assert r.headers["Access-Control-Allow-Origin"] == "https://console.example"
    for origin in ("https://evil.example", "https://console.example.evil.example",
                   "http://console.example", "null", "*"):
        r = d.request("GET", "/version", headers={"Origin": origin})
        assert r.status == 200 and cors_headers(r) == {}, origin
        r = preflight(d, origin)
        assert r.status == 403 and cors_headers(r) == {}, origin
    # a preflight carries no token (browsers send none) and is answered
    r = preflight(d, "http://localhost:3000", "DELETE")
    assert r.status == 204, r.json
    h = cors_headers(r)
    assert h["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert "DELETE" in h["Access-Control-Allow-Methods"]
    assert "Authorization" in h["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Credentials" not in h
    # the real request still needs its token
    r = d.request("GET", "/api/v1/resources/gpus", headers={"Origin": "http://localhost:3000"})
    assert r.status == 401
    assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"


def test_bad_cors_origins_stop_start_up(tmp_path):
    for bad in ("*", "https://console.example/", "console.example"):
        rc, out = startup(tmp_path, "--cors-origins", bad)
        assert rc == 2 and "--cors-origins" in out and "scheme://host[:port]" in out, out


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
        header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096

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
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert s.recv(64).startswith(b"HTTP/1.1 200")
    s.close()


def test_idle_half_sent_request_is_closed_after_the_timeout(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--connection-timeout", "2")
    s = open_from("127.0.0.1", d.port, 1)[0]
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    assert closed_by_server(s, 8), "the idle connection was never closed"
    assert 1.0 < time.monotonic() - t0 < 6.0
    s.close()


# --- input limits and hostile requests ----------------------------------------------------


def nested(levels, inner="1"):
    return "[" * levels + inner + "]" * levels


def test_over_deep_json_is_refused_before_any_handler(d):
    name = f"{PREFIX}_deep"
    base = json.dumps(create_body(name))[:-1]
    # 1 (the body) + 32 arrays: one too many
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=f'{base}, "labels": {nested(32)}}}'.encode())
    assert r.status == 400 and r.code == 1104, r.json
    assert "more than 32 levels" in r.msg
    # 1 + 31 is within the limit and reaches the handler, which says what is wrong
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=f'{base}, "labels": {nested(31)}}}'.encode())
    assert r.status == 400 and r.code == 1105, r.json
    # a megabyte of brackets, and brackets inside strings do not count
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", raw=b"[" * (MIB - 1))
    assert r.status == 400 and r.code == 1104 and "32 levels" in r.msg
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
        ("gpuCount 2^64", c(n, gpuCount=2 ** 64), 400, 1104),
        ("gpuCount float", c(n, gpuCount=1.5), 400, 1105),
        ("gpuCount string", c(n, gpuCount="2"), 400, 1105),
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
        ("name NUL", c("a\u0000b"), 400, 1104),  # jansson refuses \u0000
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
        ("truncated JSON", b'{"imageName": "x", "replicaSetName": ', 400, 1104),
        ("duplicate keys", ('{"imageName": "%s", "replicaSetName": "%s", "gpuCount": 0, '
                            '"gpuCount": 4}' % (IMAGE, n)).encode(), 400, 1104),
        ("array body", b"[]", 400, 1105),
        ("string body", b'"create please"', 400, 1104),
        ("empty body", b"", 400, 1104),
        ("invalid UTF-8", b'{"imageName": "\xff\xfe", "replicaSetName": "x"}', 400, 1104),
        ("10 MB body", b'{"imageName": "' + b"x" * (10 * MIB) + b'"}', 413, 1103),
        ("deep nesting", nested(100000).encode(), 400, 1104),
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
    assert hc["NetworkMode"] in ("default", "bridge"), hc["NetworkMode"]
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
