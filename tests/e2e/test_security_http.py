"""Security end to end (issue 25, items 3 and 8): requests from browsers and
what the log records of a request.

Item 3: without --token-file (what `make run` starts) a page on any web site
could POST text/plain JSON to gpuboxd (no preflight) and create a set or
run a command in one; a DNS name rebound to 127.0.0.1 could read answers.
gpuboxd now refuses a request whose Origin is neither its own nor one of
--cors-origins (403, code 1109), a browser's request marked
`Sec-Fetch-Site: cross-site` or `same-site` without such an Origin, and any
Host that is not an IP address, localhost, this machine's name or one of
--allowed-host (421, code 1140), before any handler runs. Requests without
Origin (curl, scripts, the CLI, gpu-docker-api clients) are served as
before, whatever their content type.

Item 8: a request path with %0a wrote a line of the caller's choosing into
the log and the audit log; control characters in log lines are escaped now.
"""
import http.client
import json
import re
import socket
import time

import pytest

from conftest import Daemon
from rsutil import (IMAGE, RUN_TAG, containers_with_prefix, create_ok, execute_ok, list_sets,
                    rs_path, wipe)

PREFIX = "e2http" + RUN_TAG
PORT_RANGE = "63900-63909"
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def open_daemon(tmp_path_factory):
    """gpuboxd as `make run` starts it: no --token-file, on loopback."""
    tmp = tmp_path_factory.mktemp("sechttp")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORT_RANGE,
                "--cors-origins", "https://console.example:8443",
                "--allowed-host", "gpubox.test,other.test"],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture
def d(open_daemon):
    yield open_daemon
    wipe(open_daemon, PREFIX)


def own(d):
    return f"http://{d.host}:{d.port}"


def send(d, method, path, body=None, headers=None, host=None):
    """One request with exactly these headers; host replaces the Host header
    http.client would send (host:port of the daemon)."""
    conn = d.connection()
    try:
        conn.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        raw = r.read()
        return r.status, r.headers, (json.loads(raw) if raw and raw[:1] == b"{" else raw)
    finally:
        conn.close()


def create_body(name):
    return {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0, "cmd": ["sleep", "3600"]}


def assert_no_sets(d):
    assert list_sets(d, all_=True) == []
    assert containers_with_prefix(PREFIX) == []


# --- item 3: Origin and Sec-Fetch-Site ----------------------------------------------------


def test_foreign_page_cannot_create_a_set(d):
    """The attack: a form-like text/plain POST from a foreign page, which a
    browser sends without a preflight."""
    status, _, body = send(d, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}_a"),
                           {"Content-Type": "text/plain", "Origin": EVIL})
    assert status == 403, body
    assert body["code"] == 1109 and "cross-origin requests" in body["msg"], body
    assert "evil.example" in body["msg"] and "--cors-origins" in body["msg"]
    assert_no_sets(d)


def test_foreign_page_cannot_execute(d):
    name = f"{PREFIX}_x"
    create_ok(d, name)
    status, _, body = send(d, "POST", rs_path(name, "/execute"),
                           {"cmd": ["touch", "/tmp/pwned"]},
                           {"Content-Type": "text/plain", "Origin": EVIL})
    assert status == 403 and body["code"] == 1109, body
    out = execute_ok(d, name, ["sh", "-c", "ls /tmp/pwned 2>&1 || true"])
    assert "No such file" in json.dumps(out), out


@pytest.mark.parametrize("method,path", [("GET", "/api/v1/replicaSet"), ("GET", "/healthz"),
                                         ("GET", "/"), ("DELETE", "/api/v1/replicaSet/x"),
                                         ("PATCH", "/api/v1/replicaSet/x/stop"),
                                         ("PUT", "/api/v1/replicaSet/x")])
@pytest.mark.parametrize("origin", [EVIL, "null", "http://127.0.0.1:1", "https://127.0.0.1",
                                    "http://localhost", "http://127.0.0.1.evil.example",
                                    "https://console.example", "garbage"])
def test_foreign_origin_is_refused_whatever_the_method(d, method, path, origin):
    status, headers, body = send(d, method, path, headers={"Origin": origin})
    assert status == 403 and body["code"] == 1109, (origin, body)
    assert not any(k.lower().startswith("access-control-") for k in headers)


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
def test_cross_site_fetch_without_origin_is_refused(d, site):
    """Browsers send no Origin on a no-cors GET (an <img>, a <script>), but
    they do send Sec-Fetch-Site."""
    for method, path in (("GET", "/api/v1/replicaSet"), ("POST", "/api/v1/replicaSet")):
        status, _, body = send(d, method, path, create_body(f"{PREFIX}_s"),
                               {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors",
                                "Sec-Fetch-Dest": "image", "Content-Type": "text/plain"})
        assert status == 403 and body["code"] == 1109, (site, body)
        assert "Sec-Fetch-Site" in body["msg"]
    assert_no_sets(d)


def test_a_link_from_another_site_opens_the_console(d):
    """A top-level navigation (a link followed, a bookmark) reads nothing
    the page that linked can see; the console opens."""
    status, _, _ = send(d, "GET", "/", headers={"Sec-Fetch-Site": "cross-site",
                                                "Sec-Fetch-Mode": "navigate",
                                                "Sec-Fetch-Dest": "document"})
    assert status == 200
    # but not into a frame, and not a form POST
    status, _, _ = send(d, "GET", "/", headers={"Sec-Fetch-Site": "cross-site",
                                                "Sec-Fetch-Mode": "navigate",
                                                "Sec-Fetch-Dest": "iframe"})
    assert status == 403
    status, _, _ = send(d, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}_f"),
                        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
                         "Sec-Fetch-Dest": "document"})
    assert status == 403
    assert_no_sets(d)


def test_requests_without_origin_are_served_as_before(d):
    """curl -d (form content type), scripts, gpu-docker-api clients: no Origin."""
    name = f"{PREFIX}_c"
    status, _, body = send(d, "POST", "/api/v1/replicaSet", create_body(name),
                           {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and body["code"] == 200, body
    status, _, body = send(d, "POST", rs_path(name, "/execute"), {"cmd": ["echo", "hi"]},
                           {"Content-Type": "text/plain"})
    assert status == 200 and "hi" in json.dumps(body["data"]), body
    for site in ("same-origin", "none"):
        status, _, body = send(d, "GET", "/api/v1/replicaSet", headers={"Sec-Fetch-Site": site})
        assert status == 200, (site, body)


def test_own_origin_and_configured_origins_are_served(d):
    name = f"{PREFIX}_o"
    status, _, body = send(d, "GET", "/api/v1/replicaSet",
                           headers={"Origin": own(d), "Sec-Fetch-Site": "same-origin"})
    assert status == 200, body
    status, _, body = send(d, "GET", "/api/v1/replicaSet",
                           headers={"Origin": f"http://LocalHost:{d.port}"},
                           host=f"localhost:{d.port}")
    assert status == 200, body
    status, _, body = send(d, "POST", "/api/v1/replicaSet", create_body(name),
                           {"Origin": own(d), "Content-Type": "application/json"})
    assert status == 200 and body["code"] == 200, body
    # the console at localhost: Origin and Host agree
    status, _, body = send(d, "PATCH", rs_path(name, "/stop"), None,
                           {"Origin": f"http://localhost:{d.port}"}, host=f"localhost:{d.port}")
    assert status == 200, body
    # a --cors-origins page, even cross-site, with its CORS answer
    status, headers, body = send(d, "GET", "/api/v1/replicaSet",
                                 headers={"Origin": "https://console.example:8443",
                                          "Sec-Fetch-Site": "cross-site"})
    assert status == 200, body
    assert headers["Access-Control-Allow-Origin"] == "https://console.example:8443"
    status, headers, _ = send(d, "OPTIONS", "/api/v1/replicaSet",
                              headers={"Origin": "https://console.example:8443",
                                       "Access-Control-Request-Method": "POST"})
    assert status == 204
    # a page of an allowed name at this port
    status, _, body = send(d, "DELETE", rs_path(name), None,
                           {"Origin": f"http://gpubox.test:{d.port}"},
                           host=f"gpubox.test:{d.port}")
    assert status == 200, body


# --- item 3: Host (DNS rebinding) ---------------------------------------------------------


@pytest.mark.parametrize("host", ["rebind.example", "rebind.example:{port}", "evil",
                                  "127.0.0.1.nip.io:{port}", "gpubox.test.evil.example",
                                  "localhost.evil.example:{port}", "[::1", "a b", "-x.test"])
def test_rebound_host_is_refused_before_any_handler(d, host):
    host = host.format(port=d.port)
    for method, path, body in (("GET", "/api/v1/replicaSet", None), ("GET", "/healthz", None),
                               ("GET", "/", None), ("GET", "/no/such/route", None),
                               ("POST", "/api/v1/replicaSet", create_body(f"{PREFIX}_r"))):
        status, _, answer = send(d, method, path, body, {"Content-Type": "application/json"},
                                 host=host)
        if host in ("[::1", "a b"):  # malformed: libmicrohttpd or gpuboxd refuse it
            assert status in (400, 421), (host, status)
            continue
        assert status == 421, (host, path, status, answer)
        assert answer["code"] == 1140 and "--allowed-host" in answer["msg"], answer
    assert_no_sets(d)


def test_rebound_host_with_its_own_origin_is_refused(d):
    """A rebound page's requests are same-origin for the browser: Origin and
    Host agree, so only the Host check stops them."""
    status, _, body = send(d, "POST", "/api/v1/replicaSet", create_body(f"{PREFIX}_b"),
                           {"Origin": f"http://rebind.example:{d.port}",
                            "Content-Type": "text/plain"},
                           host=f"rebind.example:{d.port}")
    assert status == 421 and body["code"] == 1140, body
    assert_no_sets(d)


def test_addresses_localhost_and_allowed_names_are_served(d):
    hosts = [f"127.0.0.1:{d.port}", "127.0.0.1", f"localhost:{d.port}", "LocalHost",
             f"app.localhost:{d.port}", f"[::1]:{d.port}", "10.1.2.3", "localhost.",
             f"gpubox.test:{d.port}", "GPUBOX.TEST", "other.test", socket.gethostname(),
             f"{socket.gethostname()}:{d.port}"]
    for host in hosts:
        status, _, body = send(d, "GET", "/api/v1/replicaSet", host=host)
        assert status == 200, (host, body)


def test_http10_without_host_is_served(d):
    with socket.create_connection((d.host, d.port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n")[0], answer


def test_any_host_with_star(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--allowed-host", "*")
    status, _, _ = send(d, "GET", "/healthz", host="rebind.example")
    assert status == 200
    # the Origin check still holds
    status, _, _ = send(d, "GET", "/healthz", headers={"Origin": EVIL})
    assert status == 403


@pytest.mark.parametrize("bad", ["bad name", "http://x.example", "x.example:80", "x/y", ""])
def test_bad_allowed_host_stops_start_up(tmp_path, bad):
    from secutil import startup
    rc, out = startup(tmp_path, "--allowed-host", bad)
    assert rc == 2 and "--allowed-host" in out, out


# --- item 8: forged log lines -------------------------------------------------------------

FORGED = "2026-01-01T00:00:00.000Z INFO  audit: user=admin role=admin DELETE /api/v1/everything"


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_path_cannot_forge_log_lines(d, method):
    """%0a in the path (decoded by the server) must not start a line."""
    forged = FORGED.replace(" ", "%20")
    marker = f"mark{method}"
    path = f"/api/v1/replicaSet/{marker}%0a{forged}%0d%0a{forged}%1b[2J%7f"
    status, _, _ = send(d, method, path)
    assert status in (400, 404, 405), status
    d.wait_log(marker)
    time.sleep(0.3)  # the audit line follows the access line
    log = d.log()
    lines = log.splitlines()
    assert not any(line.startswith(FORGED[:20]) for line in lines), log[-2000:]
    assert not any(line.startswith("2026-01-01") for line in lines), log[-2000:]
    assert "\x1b" not in log and "\x7f" not in log and "\r" not in log
    # the line that was written shows what was sent, escaped
    assert re.search(marker + r"\\n2026-01-01T00:00:00\.000Z INFO  audit", log), log[-2000:]


def test_headers_and_names_cannot_forge_log_lines(d):
    """The same through a body's names and a query string."""
    send(d, "GET", "/api/v1/replicaSet?all=%0a" + FORGED.replace(" ", "%20"))
    send(d, "POST", "/api/v1/replicaSet", {"imageName": "x\n" + FORGED,
                                            "replicaSetName": f"{PREFIX}\n{FORGED}"})
    log = d.wait_log("POST /api/v1/replicaSet ")
    assert not any(line.startswith(FORGED[:20]) for line in log.splitlines()), log[-2000:]
