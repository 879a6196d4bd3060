"""An instance's web services through gpuboxd's authenticated proxy
(issue 30, items 4 and 5; docs/services.md).

The set runs busybox's httpd (port 8080) and services_echo (port 9000, a
small static HTTP and WebSocket server built here with gcc -static from
services_echo.c and bound into the container). gpuboxd listens for the
proxy on a second port (--proxy-listen); each test reaches the services
through it and checks who may: the owner and admins (a bearer token, or a
ticket exchanged for a cookie), a public service or a link for anyone,
everyone else 404 without learning whether the set exists.
"""
import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import struct
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import Daemon
from rsutil import IMAGE, RUN_TAG, rs_path, wipe
from schema import request_schema, response_schema, validate
from secutil import as_, write_tokens

PREFIX = "e2svc" + RUN_TAG
PORTS = "64920-64939"
ADMIN = "adm-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
HERE = Path(__file__).resolve().parent
SERVICES = [{"name": "web", "port": 8080}, {"name": "echo", "port": 9000}]


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


@pytest.fixture(scope="module")
def echo_dir(tmp_path_factory):
    """services_echo built static, in a directory the sets bind."""
    d = tmp_path_factory.mktemp("svcbin")
    subprocess.run(["gcc", "-static", "-O2", "-o", str(d / "services_echo"),
                    str(HERE / "services_echo.c")], check=True)
    return d


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, echo_dir):
    tmp = tmp_path_factory.mktemp("svcproxy")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\nwatch:viewer:{VIEWER}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens),
                "--bind-prefixes", str(echo_dir), "--proxy-listen", "127.0.0.1:0"],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture(scope="module")
def users(daemon):
    made = {}
    for who in ("alice", "bob"):
        name = who + secrets.token_hex(3)
        made[who] = ok(as_(daemon, ADMIN, "POST", "/api/v1/users",
                           {"name": name, "role": "user"}))["token"]
    return made


def start_cmd(name):
    www = f"/www/s/{name}/web"
    return ["sh", "-c", f"mkdir -p {www} && echo hello-from-httpd > {www}/index.html && "
            "httpd -p 8080 -h /www && exec /opt/svc/services_echo 9000 log"]


@pytest.fixture(scope="module")
def svcset(daemon, users, echo_dir):
    """alice's set with both services, running, and the proxy's address."""
    name = f"{PREFIX}a"
    data = ok(as_(daemon, users["alice"], "POST", "/api/v1/replicaSet",
                  {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
                   "cmd": start_cmd(name), "services": SERVICES,
                   "binds": [{"src": str(echo_dir), "dest": "/opt/svc"}]}))
    info = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    url = {s["name"]: s["url"] for s in info["services"]}
    parsed = urllib.parse.urlsplit(url["web"])
    host, port = parsed.hostname, parsed.port
    wait_up(host, port, f"/s/{name}/echo/", users["alice"])
    return {"name": name, "host": host, "port": port, "urls": url, "created": data}


def wait_up(host, port, path, token, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        r = get(host, port, path, token=token)
        if r.status == 200:
            return
        assert time.monotonic() < deadline, (r.status, r.body)
        time.sleep(0.2)


class Raw:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


def get(host, port, path, token=None, headers=None, method="GET", body=None):
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return Raw(r.status, r.headers, r.read())
    finally:
        conn.close()


def raw_exchange(host, port, data):
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


# --- the set's answers carry the services, bad input changes nothing -------------------


def test_services_are_in_the_answers_with_their_urls(daemon, users, svcset):
    name = svcset["name"]
    info = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    got = {s["name"]: s for s in info["services"]}
    assert set(got) == {"web", "echo"}
    assert got["web"]["port"] == 8080 and got["web"]["public"] is False
    assert got["web"]["url"].endswith(f"/s/{name}/web/"), got["web"]
    listed = [s for s in ok(as_(daemon, users["alice"], "GET", "/api/v1/replicaSet"))["replicaSets"]
              if s["name"] == name][0]
    assert [s["name"] for s in listed["services"]] == ["web", "echo"]
    # the proxy's origin is not the API's
    assert int(svcset["port"]) != daemon.port


@pytest.mark.parametrize("services,status,words", [
    ([{"name": "web", "port": 0}], 400, "1 to 65535"),
    ([{"name": "web", "port": 70000}], 400, "1 to 65535"),
    ([{"name": "a", "port": 1}, {"name": "a", "port": 2}], 400, "twice"),
    ([{"name": "my-lab", "port": 1}], 400, "lower-case"),
    ([{"name": "Lab", "port": 1}], 400, "lower-case"),
    ([{"name": f"s{i}", "port": 1000 + i} for i in range(17)], 400, "at most 16"),
    ([{"name": "web", "port": 80, "color": "red"}], 400, "unknown field"),
    ([{"name": "web", "port": "80"}], 400, "1 to 65535"),
    ({"name": "web"}, 400, "must be a list"),
    ([{"name": "web", "port": 80, "public": True}], 403, "only an admin"),
])
def test_bad_services_are_refused_and_change_nothing(daemon, users, svcset, services, status,
                                                     words):
    name = svcset["name"]
    before = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    r = as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": services})
    assert r.status == status, (r.status, r.json)
    assert words in r.msg, r.msg
    after = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    assert after["services"] == before["services"] and after["version"] == before["version"]
    # the same body on a create makes nothing
    r = as_(daemon, users["alice"], "POST", "/api/v1/replicaSet",
            {"imageName": IMAGE, "replicaSetName": f"{PREFIX}bad", "gpuCount": 0,
             "cmd": ["sleep", "3600"], "services": services})
    assert r.status == status, (r.status, r.json)
    assert as_(daemon, ADMIN, "GET", rs_path(f"{PREFIX}bad")).status == 404


def test_answers_and_bodies_conform_to_the_openapi_document(daemon, users, svcset):
    daemon.token = ADMIN
    doc = daemon.get("/openapi.json").json
    daemon.token = None
    name = svcset["name"]

    def check(pattern, method, r, body=None):
        errors = validate(r.json, response_schema(doc, pattern, method, r.status), doc)
        assert not errors, f"{method} {pattern} -> {r.json}:\n" + "\n".join(errors)
        if body is not None:
            errors = validate(body, request_schema(doc, pattern, method), doc)
            assert not errors, f"{method} {pattern} body {body}:\n" + "\n".join(errors)

    alice = users["alice"]
    check("/api/v1/replicaSet/{name}", "get", as_(daemon, alice, "GET", rs_path(name)))
    check("/api/v1/replicaSet", "get", as_(daemon, alice, "GET", "/api/v1/replicaSet"))
    body = {"services": [{"name": "web", "port": 8080, "link": True}, SERVICES[1]]}
    check("/api/v1/replicaSet/{name}", "patch", as_(daemon, alice, "PATCH", rs_path(name), body),
          body)
    check("/api/v1/replicaSet/{name}", "get", as_(daemon, alice, "GET", rs_path(name)))
    body = {"services": SERVICES}
    check("/api/v1/replicaSet/{name}", "patch", as_(daemon, alice, "PATCH", rs_path(name), body),
          body)
    check("/api/v1/replicaSet/{name}/services/{service}/ticket", "post",
          as_(daemon, alice, "POST", rs_path(name, "/services/web/ticket")))
    check("/api/v1/replicaSet/{name}/services/{service}/ticket", "post",
          as_(daemon, users["bob"], "POST", rs_path(name, "/services/web/ticket")))
    create = {"imageName": IMAGE, "replicaSetName": f"{PREFIX}c", "gpuCount": 0,
              "services": [{"name": "lab", "port": 8888}]}
    errors = validate(create, request_schema(doc, "/api/v1/replicaSet", "post"), doc)
    assert not errors, errors


# --- through the proxy: paths, query strings, who may ---------------------------------


def test_the_owner_reaches_httpd_and_the_path_and_query_pass_intact(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    r = get(h, p, f"/s/{name}/web/index.html?a=1&b=two", token=users["alice"])
    assert r.status == 200 and r.body == b"hello-from-httpd\n", (r.status, r.body)
    path = f"/s/{name}/echo/deep/er/path%20x?q=1&r=%2F&empty="
    r = get(h, p, path, token=users["alice"], headers={"Cookie": "theirs=1; other=2"})
    assert r.status == 200, r.body
    text = r.body.decode()
    assert text.startswith(f"GET {path} HTTP/1.1\r\n"), text
    # the gpubox token never reaches the instance; its own cookies do
    assert users["alice"] not in text and "Authorization" not in text, text
    assert "Cookie: theirs=1; other=2" in text, text
    # keep-alive: the proxy asks the container to keep its connection for the next request
    assert "Connection: keep-alive" in text and f"X-Forwarded-Prefix: /s/{name}/echo" in text, text
    # the prefix alone is redirected to the prefix with its '/'
    r = get(h, p, f"/s/{name}/web?x=1", token=users["alice"])
    assert r.status == 308 and r.headers["Location"] == f"/s/{name}/web/?x=1"


def test_admins_may_and_everyone_else_gets_the_same_404(daemon, users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    path = f"/s/{name}/web/index.html"
    assert get(h, p, path, token=ADMIN).status == 200
    refused = [get(h, p, path, token=users["bob"]), get(h, p, path),
               get(h, p, path, token=VIEWER), get(h, p, path, token="nope-" + "x" * 30),
               get(h, p, f"/s/{name}/nosuch/", token=users["alice"]),
               get(h, p, f"/s/{PREFIX}nosuchset/web/", token=users["bob"]),
               get(h, p, "/", token=users["alice"])]
    assert {r.status for r in refused} == {404}
    assert len({r.body for r in refused}) == 1
    # a ticket is the owner's or an admin's alone
    r = as_(daemon, users["bob"], "POST", rs_path(name, "/services/web/ticket"))
    assert r.status == 404 and r.code == 1100, r.json
    r = as_(daemon, users["alice"], "POST", rs_path(name, "/services/nosuch/ticket"))
    assert r.status == 404, r.json


def test_a_ticket_becomes_a_cookie_for_that_service_only(daemon, users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    t = ok(as_(daemon, users["alice"], "POST", rs_path(name, "/services/echo/ticket")))
    assert t["expiresIn"] == 30 and t["url"].startswith(svcset["urls"]["echo"])
    parts = urllib.parse.urlsplit(t["url"])
    first = get(h, p, f"{parts.path}?{parts.query}")
    assert first.status == 303, first.body
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie, cookie
    assert f"Path=/s/{name}/echo/" in cookie, cookie
    assert first.headers["Location"] == f"/s/{name}/echo/", first.headers["Location"]
    pair = cookie.split(";", 1)[0]
    r = get(h, p, f"/s/{name}/echo/after?z=9", headers={"Cookie": f"mine=1; {pair}"})
    assert r.status == 200, r.body
    text = r.body.decode()
    assert "gpubox_service" not in text and "Cookie: mine=1" in text, text
    # spent: a second use is refused; the cookie is good for this service only
    assert get(h, p, f"{parts.path}?{parts.query}").status == 404
    assert get(h, p, f"/s/{name}/web/index.html", headers={"Cookie": pair}).status == 404
    # a forged cookie is nothing
    forged = pair[:-4] + ("0000" if not pair.endswith("0000") else "1111")
    assert get(h, p, f"/s/{name}/echo/", headers={"Cookie": forged}).status == 404


def ws_frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def ws_read(s):
    b0, b1 = recv_exact(s, 2)
    n = b1 & 127
    if n == 126:
        n = struct.unpack(">H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(s, 8))[0]
    return b0 & 15, recv_exact(s, n)


def test_a_websocket_echo_passes_both_ways(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection((h, p), timeout=20) as s:
        s.sendall((f"GET /s/{name}/echo/ws?room=1 HTTP/1.1\r\nHost: {h}:{p}\r\n"
                   f"Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Authorization: Bearer {users['alice']}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += recv_exact(s, 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert f"Sec-WebSocket-Accept: {accept}".encode() in head, head
        s.sendall(ws_frame(1, b"hello kernel"))
        assert ws_read(s) == (1, b"hello kernel")
        big = os.urandom(300_000)
        s.sendall(ws_frame(2, big))
        assert ws_read(s) == (2, big)
        for i in range(20):
            s.sendall(ws_frame(1, f"msg {i}".encode()))
        for i in range(20):
            assert ws_read(s) == (1, f"msg {i}".encode())
        s.sendall(ws_frame(8, b"\x03\xe8"))
        assert ws_read(s)[0] == 8


def test_a_large_response_streams_intact_and_a_large_body_goes_up(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    conn = http.client.HTTPConnection(h, p, timeout=60)
    conn.request("GET", f"/s/{name}/echo/big?mb=64",
                 headers={"Authorization": f"Bearer {users['alice']}"})
    r = conn.getresponse()
    assert r.status == 200
    digest, total = hashlib.sha256(), 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
    conn.close()
    block = bytes(range(256)) * 256
    want = hashlib.sha256()
    for _ in range(64 * 16):
        want.update(block)
    assert total == 64 << 20 and digest.hexdigest() == want.hexdigest()
    body = os.urandom(8 << 20)
    r = get(h, p, f"/s/{name}/echo/upload", token=users["alice"], method="POST", body=body)
    assert r.status == 200 and r.body.endswith(b"body-bytes=%d\n" % len(body)), r.body[-200:]


def test_malformed_or_oversized_heads_are_refused(svcset):
    h, p = svcset["host"], svcset["port"]
    assert raw_exchange(h, p, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw_exchange(h, p, b"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    assert raw_exchange(h, p, b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n").startswith(
        b"HTTP/1.1 400")
    big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    assert raw_exchange(h, p, big).startswith(b"HTTP/1.1 431")
    name = svcset["name"]
    both = (f"POST /s/{name}/echo/ HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            f"Authorization: Bearer {ADMIN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\nabc").encode()
    assert raw_exchange(h, p, both).startswith(b"HTTP/1.1 400")


# --- keep-alive: many requests on one connection, each authorised alone ---------------


@pytest.fixture(scope="module")
def bobset(daemon, users, echo_dir):
    """bob's set running services_echo, beside alice's."""
    name = f"{PREFIX}b"
    ok(as_(daemon, users["bob"], "POST", "/api/v1/replicaSet",
           {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
            "cmd": ["/opt/svc/services_echo", "9000", "log"], "services": [SERVICES[1]],
            "binds": [{"src": str(echo_dir), "dest": "/opt/svc"}]}))
    info = ok(as_(daemon, users["bob"], "GET", rs_path(name)))["info"]
    parsed = urllib.parse.urlsplit(info["services"][0]["url"])
    wait_up(parsed.hostname, parsed.port, f"/s/{name}/echo/", users["bob"])
    return {"name": name}


def request_bytes(path, token=None, method="GET", headers=None, body=b""):
    h = {"Host": "x"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(headers or {})
    if body:
        h["Content-Length"] = str(len(body))
    head = "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body


def read_answer(f, method="GET"):
    """One answer from the file f of a connection, framed as HTTP/1.1 says;
    headers keyed in lower case."""
    line = f.readline()
    assert line.startswith(b"HTTP/1.1 "), line
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        assert h, "closed inside a head"
        if h in (b"\r\n", b"\n"):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            body += f.read(size)
            assert f.readline() == b"\r\n"
    elif "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    else:
        body = f.read()
    return Raw(status, headers, body)


def closed(s, f):
    """Does the proxy close the connection (nothing more comes)?"""
    s.settimeout(5)
    return f.read() == b""


def container_log(daemon, name):
    r = as_(daemon, ADMIN, "GET", rs_path(name, "/logs?tail=all"))
    assert r.status == 200, (r.status, r.json)
    return json.dumps(r.json)


def test_two_requests_on_one_connection_are_served_through_one_container_connection(
        users, svcset):
    """Keep-alive both ways: the second request is authorised again, its
    token stripped, and goes over the container connection the first used."""
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(request_bytes(f"/s/{name}/echo/first", users["alice"]))
        one = read_answer(f)
        s.sendall(request_bytes(f"/s/{name}/echo/second?x=2", users["alice"]))
        two = read_answer(f)
        assert one.status == two.status == 200, (one.body, two.body)
        assert "connection" not in one.headers, one.headers
        assert two.body.startswith(f"GET /s/{name}/echo/second?x=2 HTTP/1.1".encode()), two.body
        for r in (one, two):
            assert users["alice"].encode() not in r.body and b"Authorization" not in r.body
        assert one.headers["x-echo-conn"] == two.headers["x-echo-conn"]
        assert (one.headers["x-echo-request"], two.headers["x-echo-request"]) == ("1", "2")
        # a body on the same connection, then the client's close ends it
        s.sendall(request_bytes(f"/s/{name}/echo/up", users["alice"], "POST",
                                {"Connection": "close"}, b"x" * 70000))
        three = read_answer(f)
        assert three.status == 200 and three.body.endswith(b"body-bytes=70000\n"), three.body
        assert three.headers["connection"] == "close" and closed(s, f)


def test_a_large_body_and_a_request_sent_right_after_it_keep_their_boundary(users, svcset):
    """A body that streams up (passed on without being read, by splice)
    ends exactly at its Content-Length: the request written right behind
    it in the same stream is the connection's next request."""
    h, p, name, tok = svcset["host"], svcset["port"], svcset["name"], users["alice"]
    body = os.urandom(3 << 20)
    data = (request_bytes(f"/s/{name}/echo/up", tok, "POST", body=body)
            + request_bytes(f"/s/{name}/echo/after?n=1", tok))
    with socket.create_connection((h, p), timeout=30) as s, s.makefile("rb") as f:
        s.sendall(data)
        up, after = read_answer(f), read_answer(f)
        assert up.status == 200 and up.body.endswith(b"body-bytes=%d\n" % len(body)), up.body
        assert after.status == 200, after.body
        assert after.body.startswith(f"GET /s/{name}/echo/after?n=1 HTTP/1.1".encode())
        assert (up.headers["x-echo-request"], after.headers["x-echo-request"]) == ("1", "2")
        assert up.headers["x-echo-conn"] == after.headers["x-echo-conn"]


def test_chunked_empty_and_head_answers_keep_the_connection(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    tok = users["alice"]
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(request_bytes(f"/s/{name}/echo/chunked?n=300", tok))
        r = read_answer(f)
        assert r.status == 200 and r.headers["transfer-encoding"] == "chunked"
        assert r.body == b"".join(b"chunk %d\n" % i for i in range(300))
        s.sendall(request_bytes(f"/s/{name}/echo/nocontent", tok))
        assert read_answer(f).status == 204
        s.sendall(request_bytes(f"/s/{name}/echo/h", tok, "HEAD"))
        head = read_answer(f, "HEAD")
        assert head.status == 200 and int(head.headers["content-length"]) > 0
        s.sendall(request_bytes(f"/s/{name}/echo/last", tok))
        last = read_answer(f)
        assert last.status == 200 and last.body.startswith(b"GET /s/%s/echo/last" % name.encode())
        assert last.headers["x-echo-conn"] == r.headers["x-echo-conn"]
        assert last.headers["x-echo-request"] == "4"
        # an answer that ends with the container's close ends the client's connection too
        s.sendall(request_bytes(f"/s/{name}/echo/big?mb=1", tok))
        big = read_answer(f)
        assert big.status == 200 and len(big.body) == 1 << 20
        assert big.headers.get("connection") == "close"


def test_a_container_connection_closed_between_requests_is_made_again(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(request_bytes(f"/s/{name}/echo/quietclose", users["alice"]))
        first = read_answer(f)
        assert first.status == 200 and "connection" not in first.headers
        time.sleep(0.3)  # the container has closed its side by now
        s.sendall(request_bytes(f"/s/{name}/echo/after", users["alice"]))
        after = read_answer(f)
        assert after.status == 200 and after.headers["x-echo-request"] == "1"
        assert after.headers["x-echo-conn"] != first.headers["x-echo-conn"]


def test_a_port_nothing_listens_on_answers_502(daemon, users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name),
           {"services": SERVICES + [{"name": "none", "port": 7777}]}))
    try:
        with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
            s.sendall(request_bytes(f"/s/{name}/echo/first", users["alice"]))
            assert read_answer(f).status == 200
            s.sendall(request_bytes(f"/s/{name}/none/", users["alice"]))
            r = read_answer(f)
            assert r.status == 502 and b"does not answer on its port" in r.body, r.body
    finally:
        ok(as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": SERVICES}))


def test_http_1_0_and_an_upgrade_after_a_request_on_the_connection(users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(f"GET /s/{name}/echo/old HTTP/1.0\r\n"
                  f"Authorization: Bearer {users['alice']}\r\n\r\n".encode())
        line = f.readline()
        assert line.startswith(b"HTTP/1.1 200"), line
        rest = f.read()  # the connection ends after the answer
        assert b"Connection: close" in rest and b"GET /s/%s/echo/old" % name.encode() in rest
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(request_bytes(f"/s/{name}/echo/before", users["alice"]))
        assert read_answer(f).status == 200
        s.sendall(request_bytes(f"/s/{name}/echo/ws", users["alice"], headers={
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13"}))
        assert f.readline().startswith(b"HTTP/1.1 101")
        while f.readline() not in (b"\r\n", b""):
            pass
        s.sendall(ws_frame(1, b"after a request"))
        b0, b1 = f.read(2)
        assert (b0 & 15, f.read(b1 & 127)) == (1, b"after a request")


def test_a_pipelined_request_for_another_users_set_or_without_credentials_reaches_nothing(
        daemon, users, svcset, bobset):
    """Requests pipelined behind an authorised one (one write): each is
    authorised for its own path, so one for bob's set with alice's token,
    or one without credentials, gets 404 and reaches no container, while
    alice's next request on the same connection is served."""
    h, p, name, bob = svcset["host"], svcset["port"], svcset["name"], bobset["name"]
    mark = secrets.token_hex(4)
    data = (request_bytes(f"/s/{name}/echo/one-{mark}", users["alice"])
            + request_bytes(f"/s/{bob}/echo/bob-{mark}", users["alice"])
            + request_bytes(f"/s/{name}/echo/anon-{mark}")
            + request_bytes(f"/s/{bob}/echo/bobanon-{mark}")
            + request_bytes(f"/s/{name}/echo/four-{mark}", users["alice"],
                            headers={"Connection": "close"}))
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(data)
        got = [read_answer(f) for _ in range(5)]
        assert [r.status for r in got] == [200, 404, 404, 404, 200], [r.body for r in got]
        assert got[0].body.startswith(f"GET /s/{name}/echo/one-{mark}".encode())
        assert got[4].body.startswith(f"GET /s/{name}/echo/four-{mark}".encode())
        assert got[1].body == got[2].body == got[3].body
        assert closed(s, f)
    alice_log, bob_log = container_log(daemon, name), container_log(daemon, bob)
    assert f"one-{mark}" in alice_log and f"four-{mark}" in alice_log, alice_log[-2000:]
    for refused in (f"bob-{mark}", f"anon-{mark}", f"bobanon-{mark}"):
        assert refused not in alice_log and refused not in bob_log


def test_a_request_for_another_set_on_the_connection_is_authorised_for_it(
        daemon, users, svcset, bobset):
    """An admin (who may use both) switches sets on one connection: each
    request goes to its own set's container, over a connection of its own."""
    h, p, name, bob = svcset["host"], svcset["port"], svcset["name"], bobset["name"]
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        got = []
        for path, token in ((f"/s/{name}/echo/a1", ADMIN), (f"/s/{bob}/echo/b1", ADMIN),
                            (f"/s/{bob}/echo/b2", users["alice"]),
                            (f"/s/{bob}/echo/b3", users["bob"]), (f"/s/{name}/echo/a2", ADMIN)):
            s.sendall(request_bytes(path, token))
            got.append(read_answer(f))
        assert [r.status for r in got] == [200, 200, 404, 200, 200]
        for r, path in zip(got, ("a1", "b1", None, "b3", "a2")):
            if path:
                assert r.body.split(b" ")[1].endswith(path.encode()), (path, r.body[:80])
        a1, b1, _, b3, a2 = got
        assert a1.headers["x-echo-conn"] != b1.headers["x-echo-conn"]
        assert b3.headers["x-echo-conn"] == b1.headers["x-echo-conn"]  # the refusal between
        assert a2.headers["x-echo-request"] == "1"  # a new connection to alice's container


def test_the_cookie_authorises_a_later_request_and_is_stripped_from_it(daemon, users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    t = ok(as_(daemon, users["alice"], "POST", rs_path(name, "/services/echo/ticket")))
    parts = urllib.parse.urlsplit(t["url"])
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        s.sendall(request_bytes(f"/s/{name}/echo/first", users["alice"]))
        assert read_answer(f).status == 200
        # the ticket exchanged on the same connection, then the cookie alone
        s.sendall(request_bytes(f"{parts.path}?{parts.query}"))
        first = read_answer(f)
        assert first.status == 303, first.body
        pair = first.headers["set-cookie"].split(";", 1)[0]
        s.sendall(request_bytes(f"/s/{name}/echo/by-cookie", headers={"Cookie": f"a=1; {pair}"}))
        r = read_answer(f)
        assert r.status == 200, r.body
        assert b"gpubox_service" not in r.body and b"Cookie: a=1\r\n" in r.body, r.body
        # the cookie is for this service only, on this connection as on any
        s.sendall(request_bytes(f"/s/{name}/web/index.html", headers={"Cookie": pair}))
        assert read_answer(f).status == 404
        s.sendall(request_bytes(f"/s/{name}/echo/again", headers={"Cookie": pair}))
        assert read_answer(f).status == 200


def test_a_kept_connection_sees_each_change_at_its_next_request(daemon, users, echo_dir):
    """The proxy keeps what it read of a set's record, but every change
    applies to the very next request on a connection kept open all along:
    a service removed, made public then private again, an admin's token
    demoted or revoked, the set stopped, deleted, and made again by
    someone else under the same name."""
    name, alice, bob = f"{PREFIX}kc", users["alice"], users["bob"]

    def create(token, services):
        ok(as_(daemon, token, "POST", "/api/v1/replicaSet",
               {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
                "cmd": ["/opt/svc/services_echo", "9000"], "services": services,
                "binds": [{"src": str(echo_dir), "dest": "/opt/svc"}]}))
        info = ok(as_(daemon, token, "GET", rs_path(name)))["info"]
        parsed = urllib.parse.urlsplit(info["services"][0]["url"])
        wait_up(parsed.hostname, parsed.port, f"/s/{name}/echo/", token)
        return parsed.hostname, parsed.port

    def patch(token, services):
        ok(as_(daemon, token, "PATCH", rs_path(name), {"services": services}))

    echo = {"name": "echo", "port": 9000}
    h, p = create(alice, [echo, {"name": "web", "port": 8080}])
    carol, dave = ("carol" + secrets.token_hex(3), "dave" + secrets.token_hex(3))
    tokens = {who: ok(as_(daemon, ADMIN, "POST", "/api/v1/users",
                          {"name": who, "role": "admin"}))["token"] for who in (carol, dave)}
    path = f"/s/{name}/echo/"
    with socket.create_connection((h, p), timeout=20) as s, s.makefile("rb") as f:
        def status(token=None):
            s.sendall(request_bytes(path, token))
            return read_answer(f).status

        assert [status(alice), status(alice), status(tokens[carol]), status(tokens[dave]),
                status()] == [200, 200, 200, 200, 404]
        patch(alice, [{"name": "web", "port": 8080}])  # the service removed
        assert status(alice) == 404
        patch(ADMIN, [{**echo, "public": True}])  # back, public
        assert (status(), status(alice)) == (200, 200)
        patch(alice, [echo])  # private again
        assert (status(), status(alice), status(bob)) == (404, 200, 404)
        ok(as_(daemon, ADMIN, "PATCH", f"/api/v1/users/{dave}", {"role": "user"}))
        ok(as_(daemon, ADMIN, "DELETE", f"/api/v1/users/{carol}/token"))
        assert (status(tokens[dave]), status(tokens[carol]), status(alice)) == (404, 404, 200)
        ok(as_(daemon, alice, "PATCH", rs_path(name, "/stop")))
        assert (status(alice), status(bob)) == (503, 404)
        ok(as_(daemon, alice, "DELETE", rs_path(name) + "?purge=true"))
        assert status(alice) == 404
        # the same name, another owner: the old owner is a stranger to it
        create(bob, [echo])
        assert (status(alice), status(bob), status(alice)) == (404, 200, 404)
    ok(as_(daemon, bob, "DELETE", rs_path(name) + "?purge=true"))
    for who in (carol, dave):
        ok(as_(daemon, ADMIN, "DELETE", f"/api/v1/users/{who}"))


def test_services_change_in_place_and_public_or_link_open_them(daemon, users, svcset):
    h, p, name = svcset["host"], svcset["port"], svcset["name"]
    before = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    path = f"/s/{name}/web/index.html"
    # a link: whoever holds it may use the service
    r = ok(as_(daemon, users["alice"], "PATCH", rs_path(name),
               {"services": [{"name": "web", "port": 8080, "link": True}, SERVICES[1]]}))
    after = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    assert after["version"] == before["version"], "a change of services alone is in place"
    assert after["containerId"] == before["containerId"]
    web = [s for s in after["services"] if s["name"] == "web"][0]
    assert web["link"] is True and "gpubox-link=" in web["linkUrl"]
    seen = ok(as_(daemon, VIEWER, "GET", rs_path(name)))["info"]["services"]
    assert all("linkUrl" not in s for s in seen), seen  # a viewer reads, but gets no link
    link = urllib.parse.urlsplit(web["linkUrl"])
    first = get(h, p, f"{link.path}?{link.query}")
    assert first.status == 303, first.body
    pair = first.headers["Set-Cookie"].split(";", 1)[0]
    assert get(h, p, path, headers={"Cookie": pair}).status == 200
    assert get(h, p, path).status == 404
    # the link goes: its cookie stops working
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": SERVICES}))
    assert get(h, p, path, headers={"Cookie": pair}).status == 404
    assert get(h, p, f"{link.path}?{link.query}").status == 404
    # public: only an admin may; then anyone reaches it; the owner may keep it so
    pub = [{"name": "web", "port": 8080, "public": True}, SERVICES[1]]
    r = as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": pub})
    assert r.status == 403 and r.code == 1109, r.json
    ok(as_(daemon, ADMIN, "PATCH", rs_path(name), {"services": pub}))
    assert get(h, p, path).status == 200
    assert get(h, p, f"/s/{name}/echo/").status == 404
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": pub}))
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name), {"services": SERVICES}))
    assert get(h, p, path).status == 404
    final = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    assert final["version"] == before["version"]


def test_a_stopped_set_answers_503_to_its_owner_only(daemon, users, svcset, echo_dir):
    name = f"{PREFIX}st"
    ok(as_(daemon, users["alice"], "POST", "/api/v1/replicaSet",
           {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
            "cmd": ["sleep", "3600"], "services": [{"name": "web", "port": 8080}]}))
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name, "/stop")))
    h, p = svcset["host"], svcset["port"]
    assert get(h, p, f"/s/{name}/web/", token=users["alice"]).status == 503
    assert get(h, p, f"/s/{name}/web/", token=users["bob"]).status == 404
    # a stopped set's services may change too, in place
    ok(as_(daemon, users["alice"], "PATCH", rs_path(name),
           {"services": [{"name": "lab", "port": 8888}]}))
    info = ok(as_(daemon, users["alice"], "GET", rs_path(name)))["info"]
    assert [s["name"] for s in info["services"]] == ["lab"] and info["state"] == "stopped"
    ok(as_(daemon, users["alice"], "DELETE", rs_path(name) + "?purge=true"))


def test_without_the_proxy_urls_are_null_and_tickets_refused(start_daemon):
    d = start_daemon("--simulate-gpus", "1xA100-80GB", "--port-range", "64940-64949")
    name = f"{PREFIX}np"
    try:
        ok(d.request("POST", "/api/v1/replicaSet",
                     json.dumps({"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
                                 "cmd": ["sleep", "3600"],
                                 "services": [{"name": "web", "port": 80}]}).encode(),
                     {"Content-Type": "application/json"}))
        info = ok(d.get(rs_path(name)))["info"]
        assert info["services"][0]["url"] is None
        r = d.request("POST", rs_path(name, "/services/web/ticket"))
        assert r.status == 409 and r.code == 1165 and "--proxy-listen" in r.msg, r.json
    finally:
        wipe(d, PREFIX + "np")


def test_host_names_per_service_with_proxy_domain(start_daemon):
    """--proxy-domain: SERVICE--SET.DOMAIN reaches the service, whose base
    path is then "/"; the path URL keeps working beside it."""
    d = start_daemon("--simulate-gpus", "1xA100-80GB", "--port-range", "64950-64959",
                     "--proxy-listen", "127.0.0.1:0", "--proxy-domain", "Apps.Example.test")
    name = f"{PREFIX}dom"
    try:
        ok(d.request("POST", "/api/v1/replicaSet",
                     json.dumps({"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0,
                                 "cmd": ["sh", "-c", "mkdir -p /www && echo by-host > "
                                         "/www/index.html && exec httpd -f -p 8080 -h /www"],
                                 "services": [{"name": "web", "port": 8080}]}).encode(),
                     {"Content-Type": "application/json"}))
        url = ok(d.get(rs_path(name)))["info"]["services"][0]["url"]
        parts = urllib.parse.urlsplit(url)
        assert parts.hostname == f"web--{name}.apps.example.test" and parts.path == "/", url
        host = f"WEB--{name.upper()}.apps.example.test:{parts.port}"
        deadline = time.monotonic() + 20
        while True:
            r = get("127.0.0.1", parts.port, "/index.html?x=1", headers={"Host": host})
            if r.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert r.status == 200 and r.body == b"by-host\n", (r.status, r.body)
        # another domain is not a service's host name
        r = get("127.0.0.1", parts.port, "/index.html", headers={"Host": f"web--{name}.evil.test"})
        assert r.status == 404
    finally:
        wipe(d, PREFIX + "dom")


def test_connections_from_one_address_are_capped(start_daemon):
    """--proxy-max-per-ip N: an address's connection past N open ones is
    answered 429 and closed at once; when one of them ends, a new one is
    served again."""
    d = start_daemon("--simulate-gpus", "1xA100-80GB", "--proxy-listen", "127.0.0.1:0",
                     "--proxy-max-per-ip", "2")
    port = int(re.search(r"service proxy listening on 127\.0\.0\.1:(\d+)",
                         Path(d.log_path).read_text()).group(1))

    def open_one():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        f = s.makefile("rb")
        s.sendall(request_bytes("/nothing"))
        return s, f, read_answer(f)

    def close_one(s, f):
        f.close()
        s.close()

    held = [open_one() for _ in range(2)]
    assert [r.status for _, _, r in held] == [404, 404]  # kept open: the proxy's own 404
    s, f, over = open_one()
    assert over.status == 429 and over.headers["connection"] == "close", over.headers
    assert b"too many connections from your address" in over.body and b"2" in over.body
    assert closed(s, f)
    close_one(s, f)
    # the held connections still work; one ends, and a new one is served
    held[0][0].sendall(request_bytes("/still"))
    assert read_answer(held[0][1]).status == 404
    close_one(*held[1][:2])
    deadline = time.monotonic() + 5
    while True:
        s, f, r = open_one()
        close_one(s, f)
        if r.status == 404 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert r.status == 404, r.body
    close_one(*held[0][:2])
