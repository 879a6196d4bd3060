"""Shared by the security end-to-end tests (test_security_auth.py,
test_security_limits.py): the tokens, the daemon with tokens each module
starts (4 simulated A100s, ports 61400-61449, binds allowed under one
temporary directory), calls with a chosen token, and the check that a
refused request changed nothing. Replica sets are named with the prefix
e2sec plus the run's tag and removed after each test.
"""
import http.client
import json
import secrets
import socket

import pytest

from conftest import Daemon, Response, run_gpuboxd
from rsutil import (IMAGE, RUN_TAG, containers_with_prefix, held_gpus, list_sets,
                    unmount_staged_binds, used_ports, wipe)

PREFIX = "e2sec" + RUN_TAG  # this run's sets only: runs may share a dockerd
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
        unmount_staged_binds(tmp / "data")


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
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
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



def startup(tmp_path, *flags):
    """Run gpuboxd with flags that should stop it at start-up: (rc, output)."""
    rc, out, err = run_gpuboxd(["--data-dir", str(tmp_path / "data"), "--simulate-gpus",
                                "1xT4-16GB", *flags])
    return rc, out + err
