"""What the HTTP layer answers when a request is wrong: unknown routes,
wrong methods, bodies over 1 MiB; the request id; --compat-http-200.

Malformed JSON, wrong field types and unknown fields on routes that take a
body are tested with those routes (test_replicasets.py,
test_legacy_routes.py); the helpers behind them by
tests/unit/test_request_json.c and tests/unit/test_api_input.c.
"""
import re
import socket

from conftest import request

MIB = 1024 * 1024


def test_unknown_route_is_404_with_a_helpful_message(simulated):
    r = simulated.get("/api/v1/foo")
    assert r.status == 404
    assert r.code == 1101
    assert "GET /api/v1/foo" in r.msg
    assert "/openapi.json" in r.msg
    assert r.data is None


def test_404_suggests_the_api_prefix(simulated):
    r = simulated.get("/resources/gpus")
    assert r.status == 404 and r.code == 1101
    assert "did you mean /api/v1/resources/gpus" in r.msg


def test_wrong_method_is_405_with_allow(simulated):
    for method, path in (("POST", "/api/v1/resources/gpus"), ("DELETE", "/healthz"),
                         ("PATCH", "/api/v1/gpus")):
        r = simulated.request(method, path)
        assert r.status == 405, (method, path)
        assert r.code == 1102
        assert r.headers["Allow"] == "GET"
        assert method in r.msg and path in r.msg


def test_body_over_1mib_is_413_from_content_length(simulated):
    r = simulated.request("POST", "/api/v1/resources/gpus", body=b"x" * (MIB + 1),
                          headers={"Content-Type": "application/json"})
    assert r.status == 413
    assert r.code == 1103
    assert "1 MiB" in r.msg


def test_body_of_exactly_1mib_is_accepted(simulated):
    """The limit is 1 MiB, not less: a body of exactly that size gets past it
    (and then meets the route's 405)."""
    r = simulated.request("POST", "/api/v1/resources/gpus", body=b"x" * MIB)
    assert r.status == 405


def test_chunked_body_over_1mib_is_413(simulated):
    """Without Content-Length the server counts while receiving."""
    conn = simulated.connection()
    try:
        chunks = (b"x" * 65536 for _ in range(20))  # 1.25 MiB
        conn.request("POST", "/api/v1/resources/gpus", body=chunks, encode_chunked=True,
                     headers={"Transfer-Encoding": "chunked"})
        r = conn.getresponse()
        body = r.read()
        assert r.status == 413
        assert b'"code":1103' in body
    finally:
        conn.close()


def test_every_response_carries_a_request_id_found_in_the_log(simulated):
    ids = []
    for path in ("/healthz", "/api/v1/foo", "/api/v1/resources/gpus"):
        r = simulated.get(path)
        rid = r.headers["X-Request-Id"]
        assert rid and re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", rid)
        ids.append((rid, path, r.status))
    assert len({i for i, _, _ in ids}) == 3
    last_rid, last_path, last_status = ids[-1]
    log = simulated.wait_log(f"[req {last_rid}] GET {last_path} {last_status}")
    for rid, path, status in ids:
        lines = [l for l in log.splitlines() if f"[req {rid}]" in l]
        assert any(f"GET {path} {status}" in l for l in lines), (rid, path, log[-2000:])


def test_compat_http_200_keeps_the_code_in_the_envelope(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--compat-http-200")
    r = d.get("/api/v1/foo")
    assert r.status == 200
    assert r.code == 1101
    r = d.request("DELETE", "/api/v1/resources/gpus")
    assert r.status == 200
    assert r.code == 1102
    assert r.headers["Allow"] == "GET"
    r = d.get("/api/v1/resources/gpus")
    assert r.status == 200 and r.code == 200


def test_garbage_request_does_not_hurt_the_daemon(simulated):
    with socket.create_connection((simulated.host, simulated.port), timeout=10) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        s.recv(4096)
    conn = simulated.connection()
    try:
        assert request(conn, "GET", "/healthz").status == 200
    finally:
        conn.close()
