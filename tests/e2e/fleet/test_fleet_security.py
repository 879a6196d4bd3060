"""Requests between nodes (docs/security.md, "Between nodes"): a node
answers a request alone, without placement, only when it carries proof
that a node of the fleet sent it (an HMAC with the fleet's secret over the
method, path, body, time, sending node and the caller's Authorization). A
client that sends the forwarding header itself is refused; so is a proof
that is wrong, stale, or taken from another request. And the node that
creates checks its own cordon, whoever sent the create.
"""
import hashlib
import hmac
import json
import secrets
import time

from rsutil import IMAGE, LONG_RUNNING
from secutil import as_

ADMIN = "fleet-admin-" + secrets.token_hex(16)
FORWARDED = "X-Gpubox-Forwarded-By"
AUTH = "X-Gpubox-Fleet-Auth"
CREATE = "/api/v1/replicaSet"


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def body(name, **spec):
    b = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 0, "cmd": LONG_RUNNING}
    b.update(spec)
    return json.dumps(b).encode()


def start_two(start, etcd, prefix, *extra):
    store = etcd.url(prefix)
    a = start("a", *extra, store=store, fleet_flags=True, token=ADMIN)
    b = start("b", *extra, store=store, fleet_flags=True, token=ADMIN)
    deadline = time.monotonic() + 30
    while len(a.get("/api/v1/nodes").data["nodes"]) < 2:
        assert time.monotonic() < deadline, "node b did not join within 30 s"
        time.sleep(0.1)
    return a, b


def make_user(d, name):
    return ok(as_(d, ADMIN, "POST", "/api/v1/users", {"name": name, "role": "user"}))["token"]


def cordon(d, node, on=True):
    r = as_(d, ADMIN, "PATCH", f"/api/v1/nodes/{node}/{'cordon' if on else 'uncordon'}")
    assert r.status == 200, r.json


def sign(secret, node, method, path, raw, authorization, ts=None):
    """The header a node sends (src/fleet/fleet_auth.c says the layout)."""
    ts = int(time.time()) if ts is None else ts
    text = "\n".join(["gpubox-fleet-v1", node, str(ts), method, path,
                      hashlib.sha256(raw).hexdigest(), authorization, ""])
    sig = hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()
    return f"v1 node={node} ts={ts} sig={sig}"


def post(d, token, raw, headers):
    h = {"Content-Type": "application/json", "Authorization": f"Bearer {token}", **headers}
    return d.request("POST", CREATE, body=raw, headers=h)


def refused(r):
    assert (r.status, r.code) == (403, 1109), (r.status, r.json)
    assert FORWARDED in r.msg or AUTH in r.msg, r.json


def test_a_client_cannot_pose_as_a_node_to_reach_a_cordoned_one(start_node, fleet,
                                                               etcd_cluster):
    a, b = start_two(start_node, etcd_cluster, "/fsec1")
    bob = make_user(a, "bob")
    cordon(a, "b")
    deadline = time.monotonic() + 3
    while as_(b, bob, "GET", "/api/v1/whoami").status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # bob's create through b goes to a: placement skips the cordoned node
    ok(post(b, bob, body("fsecok"), {}))
    assert [c["Labels"]["gpubox.replicaset"] for c in fleet.node("a").containers("fsecok")] == \
        ["fsecok"]
    # pinned to b through a: placement refuses it
    r = post(a, bob, body("fsecpin", node="b"), {})
    assert (r.status, r.code) == (409, 1013) and "cordoned: b" in r.msg, r.json
    # the forwarding header alone, straight to b: refused, nothing made
    for headers in ({FORWARDED: "a"}, {FORWARDED: "b"},
                    {FORWARDED: "a", AUTH: "v1 node=a ts=1 sig=" + "0" * 64}):
        refused(post(b, bob, body("fsecpose"), headers))
    assert fleet.node("b").containers("fsecpose") == []
    assert as_(a, bob, "GET", "/api/v1/replicaSet/fsecpose").status == 404
    # the fleet's secret is in etcd, the same for both nodes
    keys = etcd_cluster.range("/fsec1/fleet/secret")
    assert len(keys) == 1 and len(next(iter(keys.values()))) >= 64, keys
    cordon(a, "b", False)


def test_a_proof_holds_for_one_request_only(start_node, fleet, etcd_cluster, tmp_path):
    secret = secrets.token_hex(32).encode()
    path = tmp_path / "fleet-secret"
    path.write_bytes(secret + b"\n")
    path.chmod(0o600)
    a, b = start_two(start_node, etcd_cluster, "/fsec2", "--fleet-secret-file", str(path))
    bob = make_user(a, "bob")
    alice = make_user(a, "alice")
    deadline = time.monotonic() + 3
    while as_(b, alice, "GET", "/api/v1/whoami").status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    raw = body("fsecsig")
    auth = f"Bearer {bob}"

    def headers(sig):
        return {FORWARDED: "a", AUTH: sig}

    # a wrong secret, a stale time, another body, another caller, another node
    wrong = sign(b"not-the-fleet-secret-" * 3, "a", "POST", CREATE, raw, auth)
    refused(post(b, bob, raw, headers(wrong)))
    stale = sign(secret, "a", "POST", CREATE, raw, auth, ts=int(time.time()) - 300)
    refused(post(b, bob, raw, headers(stale)))
    other = sign(secret, "a", "POST", CREATE, body("fsecsig", gpuCount=1), auth)
    refused(post(b, bob, raw, headers(other)))
    good = sign(secret, "a", "POST", CREATE, raw, auth)
    refused(post(b, alice, raw, headers(good)))
    refused(post(b, bob, raw, {FORWARDED: "c", AUTH: good}))
    refused(post(b, bob, raw, {AUTH: good.replace("node=a", "node=c")}))
    assert fleet.node("b").containers("fsecsig") == []
    # the same proof with its own request is a node's: answered on b alone
    ok(post(b, bob, raw, headers(good)))
    assert [c["Labels"]["gpubox.replicaset"] for c in fleet.node("b").containers("fsecsig")] == \
        ["fsecsig"]
    # a node that is cordoned refuses a create even from a node
    cordon(a, "b")
    raw = body("fsecstale")
    r = post(b, bob, raw, headers(sign(secret, "a", "POST", CREATE, raw, auth)))
    assert (r.status, r.code) == (409, 1013) and "cordoned: b" in r.msg, r.json
    assert fleet.node("b").containers("fsecstale") == []
    vol = json.dumps({"name": "fsecvol", "size": "10MB"}).encode()
    r = b.request("POST", "/api/v1/volumes", body=vol,
                  headers={"Content-Type": "application/json", "Authorization": auth,
                           **headers(sign(secret, "a", "POST", "/api/v1/volumes", vol, auth))})
    assert (r.status, r.code) == (500, 1023) and "cordoned" in r.msg, (r.status, r.json)
    cordon(a, "b", False)
    # the names stay free: made through placement once b is uncordoned
    ok(post(a, bob, body("fsecstale", node="b"), {}))
    assert as_(a, bob, "DELETE", "/api/v1/replicaSet/fsecstale?purge=true").status == 200
    # forwarding between the nodes works with the file's secret
    r = as_(a, bob, "GET", "/api/v1/replicaSet/fsecsig")
    assert r.status == 200, r.json
    assert as_(a, bob, "DELETE", "/api/v1/replicaSet/fsecsig?purge=true").status == 200
    assert fleet.node("b").containers("fsecsig") == []


def test_a_single_server_refuses_the_forwarding_header(start_node):
    d = start_node("a", token=ADMIN)
    r = post(d, ADMIN, body("fsecone"), {FORWARDED: "a"})
    refused(r)
    assert d.get("/api/v1/replicaSet/fsecone").status == 404
