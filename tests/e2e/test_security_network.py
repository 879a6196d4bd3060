"""Networks between users (issue 25 item 6, docs/security.md "Networks
between users"): each user's sets sit on a Docker bridge network of that
user's own, which gpuboxd makes, labels, removes and makes again.

The attack: bob's container connects to a port alice's container listens
on without publishing it, by its address. On Docker's default bridge,
which every container shared, it answered. Now it must not, while
alice's own sets reach each other (by address and by set name) and
published host ports still answer.
"""
import json
import secrets
import time
import urllib.parse
import urllib.request

import pytest

from conftest import Daemon, docker_request
from rsutil import IMAGE, RUN_TAG, rs_path, wait_until, wipe
from secutil import as_, write_tokens

PREFIX = "e2net" + RUN_TAG
PORTS = "64900-64949"
ADMIN = "adm-" + secrets.token_hex(20)
ALICE = "ali-" + secrets.token_hex(20)
BOB = "bob-" + secrets.token_hex(20)
LABEL_NETWORK = "gpubox.network"
SECRET = "alice-secret-" + secrets.token_hex(4)
HTTPD = ["sh", "-c", f"echo {SECRET} > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("net")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\nalice{RUN_TAG}:user:{ALICE}\n"
                          f"bob{RUN_TAG}:user:{BOB}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    d.token = ADMIN
    yield d
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture
def d(daemon):
    daemon.token = ADMIN
    yield daemon
    daemon.token = ADMIN
    wipe(daemon, PREFIX)


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


def make(d, token, name, cmd=("sleep", "3600"), **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0, "cmd": list(cmd)}
    body.update(spec)
    return ok(as_(d, token, "POST", "/api/v1/replicaSet", body))


def run_in(d, token, name, script):
    """`sh -c script` in the set's container: (exit code, stdout)."""
    out = ok(as_(d, token, "POST", rs_path(name, "/execute"),
                 {"cmd": ["sh", "-c", script], "timeoutSeconds": 30}))
    return out["exitCode"], out["stdout"]


def inspect(container):
    r = docker_request("GET", f"/containers/{container}/json")
    assert r.status == 200, (r.status, r.json)
    return r.json


def addresses(container):
    """{network name: IPv4 address} of a running container."""
    nets = inspect(container)["NetworkSettings"]["Networks"]
    return {k: v["IPAddress"] for k, v in nets.items() if v.get("IPAddress")}


def networks_labelled(value=None):
    label = LABEL_NETWORK + (f"={value}" if value is not None else "")
    filters = urllib.parse.quote(json.dumps({"label": [label]}))
    r = docker_request("GET", f"/networks?filters={filters}")
    assert r.status == 200, r.json
    return r.json


def fetch(d, token, name, host):
    """The page set name's container gets from host:8080 (None: no answer).
    nc, not wget: the test image's static busybox wget cannot resolve names."""
    rc, out = run_in(d, token, name, "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | "
                     f"nc -w 3 {host} 8080")
    return SECRET if rc == 0 and SECRET in out else None


def wait_served(d, token, name, host):
    """alice's httpd answers her other set (it may take a moment to start)."""
    got = []
    assert wait_until(lambda: got.append(fetch(d, token, name, host)) or got[-1] == SECRET,
                      timeout=20, interval=0.3), got[-3:]


def test_another_users_set_cannot_connect_to_an_unpublished_port(d):
    a, a2, b = f"{PREFIX}a", f"{PREFIX}a2", f"{PREFIX}b"
    made = make(d, ALICE, a, HTTPD, containerPorts=["8080"])
    host_port = made["ports"][0]["hostPort"]
    make(d, ALICE, a2)
    make(d, BOB, b)
    ips = addresses(f"{a}-1")
    assert len(ips) == 1, ips
    (net, ip), = ips.items()

    # alice's sets reach each other by address
    wait_served(d, ALICE, a2, ip)

    # bob's set reaches nothing of alice's: not her address, not her name
    rc, out = run_in(d, BOB, b, f"nc -w 3 {ip} 8080 </dev/null && echo connected")
    assert "connected" not in out, f"bob's container connected to alice's {ip}:8080"
    assert fetch(d, BOB, b, ip) is None
    assert fetch(d, BOB, b, a) is None

    # and alice's by set name and by container name too
    assert fetch(d, ALICE, a2, a) == SECRET
    assert fetch(d, ALICE, a2, f"{a}-1") == SECRET
    # nor the network: bob's container is on another one, not the default bridge
    bob_nets = addresses(f"{b}-1")
    assert net not in bob_nets and "bridge" not in bob_nets and net != "bridge", (ips, bob_nets)

    # the published port still answers from the host
    body = None
    deadline = time.monotonic() + 15
    while body is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/index.html",
                                        timeout=2) as r:
                body = r.read().decode().strip()
        except OSError:
            time.sleep(0.2)
    assert body == SECRET, f"nothing served on 127.0.0.1:{host_port}"


def test_networks_are_labelled_per_user_and_go_with_the_last_set(d):
    alice, bob = f"alice{RUN_TAG}", f"bob{RUN_TAG}"
    a, a2, b = f"{PREFIX}la", f"{PREFIX}la2", f"{PREFIX}lb"
    make(d, ALICE, a)
    make(d, ALICE, a2)
    make(d, BOB, b)
    mine, theirs = networks_labelled(alice), networks_labelled(bob)
    assert len(mine) == 1 and len(theirs) == 1, (mine, theirs)
    assert mine[0]["Driver"] == "bridge" and mine[0]["Labels"].get("gpubox.owner") == alice
    assert mine[0]["Name"] != theirs[0]["Name"]
    for name in (a, a2):
        c = inspect(f"{name}-1")
        assert c["HostConfig"]["NetworkMode"] == mine[0]["Name"]
        assert list(c["NetworkSettings"]["Networks"]) == [mine[0]["Name"]]
    assert inspect(f"{b}-1")["HostConfig"]["NetworkMode"] == theirs[0]["Name"]

    # a new version keeps the set on its owner's network
    ok(as_(d, ALICE, "PATCH", rs_path(a), {"envPatch": {"set": ["X=1"]}}))
    assert list(addresses(f"{a}-2")) == [mine[0]["Name"]]

    # the network stays while the user has a set, and goes with the last one
    ok(as_(d, ALICE, "DELETE", rs_path(a)))
    assert len(networks_labelled(alice)) == 1
    ok(as_(d, ALICE, "DELETE", rs_path(a2)))
    assert networks_labelled(alice) == []
    assert len(networks_labelled(bob)) == 1


def test_a_removed_network_is_made_again(d):
    a, a2 = f"{PREFIX}ma", f"{PREFIX}ma2"
    make(d, ALICE, a, HTTPD)
    net = list(addresses(f"{a}-1"))[0]
    # paused, the container is stopped: nothing holds the network, and
    # someone removes it by hand
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/pause")))
    r = docker_request("DELETE", f"/networks/{urllib.parse.quote(net)}")
    assert r.status == 204, (r.status, r.json)
    # continuing makes it again and puts the container back on it
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/continue")))
    assert len(networks_labelled(f"alice{RUN_TAG}")) == 1
    assert list(addresses(f"{a}-1")) == [net]
    # and a new set joins it
    make(d, ALICE, a2)
    wait_served(d, ALICE, a2, a)


def test_start_up_makes_missing_networks_and_removes_unused_ones(d, daemon):
    a = f"{PREFIX}sa"
    make(d, ALICE, a, HTTPD)
    net = list(addresses(f"{a}-1"))[0]
    ghost = docker_request("POST", "/networks/create", {
        "Name": f"gpubox-u-ghost{RUN_TAG}", "Driver": "bridge", "CheckDuplicate": True,
        "Labels": {LABEL_NETWORK: f"ghost{RUN_TAG}", "gpubox.owner": f"ghost{RUN_TAG}"}})
    assert ghost.status == 201, ghost.json
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/pause")))
    daemon.stop()
    try:
        r = docker_request("DELETE", f"/networks/{urllib.parse.quote(net)}")
        assert r.status == 204, (r.status, r.json)
    finally:
        daemon.start()
    assert len(networks_labelled(f"alice{RUN_TAG}")) == 1
    assert networks_labelled(f"ghost{RUN_TAG}") == []
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/continue")))
    assert list(addresses(f"{a}-1")) == [net]


def test_a_container_on_the_default_bridge_moves_at_its_next_start(d):
    """A container from a gpuboxd before networks sits on Docker's default
    bridge: it is moved onto its owner's network before it starts again."""
    a, a2 = f"{PREFIX}ba", f"{PREFIX}ba2"
    make(d, ALICE, a, HTTPD)
    make(d, ALICE, a2)
    net = list(addresses(f"{a}-1"))[0]
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/pause")))
    r = docker_request("POST", f"/networks/{urllib.parse.quote(net)}/disconnect",
                       {"Container": f"{a}-1", "Force": True})
    assert r.status == 200, (r.status, r.json)
    r = docker_request("POST", "/networks/bridge/connect", {"Container": f"{a}-1"})
    assert r.status == 200, (r.status, r.json)
    ok(as_(d, ALICE, "PATCH", rs_path(a, "/continue")))
    assert list(addresses(f"{a}-1")) == [net]
    wait_served(d, ALICE, a2, a)
