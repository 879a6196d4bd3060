"""An instance's web services in a fleet (issue 30, item 6;
docs/services.md, "In a fleet"): the proxy of any node takes a request for
any set and hands it to the proxy of the node that runs it, which decides
who may use it; the URL names no node.
"""
import http.client
import secrets
import time

import pytest

from rsutil import IMAGE, rs_path
from secutil import as_

from .fleetutil import start_pair

ADMIN = "fleet-admin-" + secrets.token_hex(16)
PROXY_URL = "http://services.fleet.test:2380"


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.json["data"]


def get(addr, path, token=None, headers=None):
    h = {"Host": "services.fleet.test:2380", **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection(addr, 2380, timeout=30)
    try:
        conn.request("GET", path, headers=h)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def two(start_node_module, fleet, etcd_cluster):
    flags = ("--proxy-listen", "0.0.0.0:2380", "--proxy-url", PROXY_URL)

    def start(which, **kw):
        return start_node_module(which, *flags, **kw)

    return start_pair(start, etcd_cluster, "/services", ADMIN)


def test_any_nodes_proxy_reaches_a_set_on_another_node(two, fleet):
    a, b = two
    user = "u" + secrets.token_hex(3)
    token = ok(as_(a, ADMIN, "POST", "/api/v1/users", {"name": user, "role": "user"}))["token"]
    other = ok(as_(a, ADMIN, "POST", "/api/v1/users",
                   {"name": user + "x", "role": "user"}))["token"]
    deadline = time.monotonic() + 10  # users reach every node within a second or two
    while as_(b, token, "GET", "/api/v1/whoami").status != 200 or \
            as_(b, other, "GET", "/api/v1/whoami").status != 200:
        assert time.monotonic() < deadline, "the users did not reach node b"
        time.sleep(0.1)
    name = "fsvc" + secrets.token_hex(2)
    www = f"/www/s/{name}/web"
    ok(as_(b, token, "POST", "/api/v1/replicaSet",
           {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0, "node": "a",
            "cmd": ["sh", "-c", f"mkdir -p {www} && echo on-node-a > {www}/index.html && "
                    "exec httpd -f -p 8080 -h /www"],
            "services": [{"name": "web", "port": 8080}]}))
    try:
        # the URL names no node: the same through either node's API
        urls = {ok(as_(d, token, "GET", rs_path(name)))["info"]["services"][0]["url"] for d in two}
        assert urls == {f"{PROXY_URL}/s/{name}/web/"}, urls
        node_a, node_b = fleet.node("a").addr, fleet.node("b").addr
        path = f"/s/{name}/web/index.html?x=1"
        deadline = time.monotonic() + 20
        while get(node_a, path, token)[0] != 200:
            assert time.monotonic() < deadline, get(node_a, path, token)
            time.sleep(0.3)
        # node b's proxy hands the request to node a's
        status, _, body = get(node_b, path, token)
        assert status == 200 and body == b"on-node-a\n", (status, body)
        assert get(node_b, path, ADMIN)[0] == 200
        assert get(node_b, path, other)[0] == 404
        assert get(node_b, path)[0] == 404
        assert get(node_b, f"/s/nosuch{name}/web/", token)[0] == 404
        # a ticket asked of node b (issued by a, which runs the set) opens it through node b
        t = ok(as_(b, token, "POST", rs_path(name, "/services/web/ticket")))
        assert t["url"].startswith(f"{PROXY_URL}/s/{name}/web/?gpubox-ticket=")
        status, h, _ = get(node_b, t["url"][len(PROXY_URL):])
        assert status == 303, status
        cookie = h["Set-Cookie"].split(";", 1)[0]
        status, _, body = get(node_b, path, headers={"Cookie": cookie})
        assert status == 200 and body == b"on-node-a\n"
        # a request that claims to come from a node's proxy is not forwarded again
        assert get(node_b, path, token, {"X-Gpubox-Proxied-By": "a"})[0] == 404
    finally:
        as_(a, ADMIN, "DELETE", rs_path(name) + "?purge=true")
