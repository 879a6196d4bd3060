"""The fleet harness itself, with today's gpuboxd (no fleet flags yet): three
nodes, each a netns with its own dockerd, joined to the hub by a bridge;
three etcd members on the hub; one gpuboxd per node, each on its own key
prefix of the one cluster (--store etcd://<three members>/harness/<node>).

It shows what later fleet tests rely on: the cluster is healthy and keeps
serving with a member killed (-9); every node's gpuboxd answers from the
hub and from the other nodes; a replica set created on a node runs on that
node's dockerd and no other; a node cut off from etcd (fleet_partition)
refuses changes with 503 while the others work, and works again once
healed; a gpuboxd killed -9 comes back on its data dir.

The daemons live for the whole module and the tests build on each other,
in order (as the story above). Nothing asserts a duration: the machine may
be loaded, so waits have generous deadlines and only outcomes are checked.
"""
import urllib.request

import pytest

from etcdutil import b64, unb64
from rsutil import RUN_TAG, create, create_ok, device_uuids, info_ok, list_sets, wait_until

PREFIX = "fh" + RUN_TAG
# Short store timeouts for the partition (dropped packets): a refused
# change costs seconds, not the default 5 s per endpoint.
STORE_OPTIONS = {"timeout_ms": 2000, "connect_timeout_ms": 1000}


@pytest.fixture(scope="module")
def daemons(fleet, etcd_cluster, start_node_module):
    """One gpuboxd per node, each on its own prefix of the shared cluster."""
    return [start_node_module(node, store=etcd_cluster.url(f"/harness/{node.label}",
                                                           **STORE_OPTIONS))
            for node in fleet.nodes]


def gpu_count(d):
    return len(d.get("/api/v1/resources/gpus").data["gpus"])


def store_ok(d):
    r = d.get("/healthz")
    return r.status == 200 and r.data["store"]["ok"] is True


def assert_runs_only_on(fleet, node, name):
    """name's one container runs on node's dockerd, and no other node has it."""
    for other in fleet.nodes:
        found = other.containers(name)
        if other is node:
            assert len(found) == 1, (other, found)
            assert found[0]["State"] == "running", found[0]
        else:
            assert found == [], (f"{name} is on {other} too", found)


def test_etcd_cluster_is_healthy(etcd_cluster):
    assert len(etcd_cluster.running) == 3
    etcd_cluster.wait_healthy()
    assert all(m.health() for m in etcd_cluster.members)
    assert etcd_cluster.endpoints == ",".join(f"{etcd_cluster.host}:{p}"
                                              for p in etcd_cluster.client_ports)
    # one cluster: a write through one member reads back through each
    key = f"/harness-check/{RUN_TAG}"
    etcd_cluster.members[0].post("/v3/kv/put", {"key": b64(key), "value": b64("ok")})
    for m in etcd_cluster.members:
        r = m.post("/v3/kv/range", {"key": b64(key)})
        assert unb64(r["kvs"][0]["value"]) == "ok", (m, r)


def test_every_node_answers_from_the_hub(fleet, daemons):
    for node, d in zip(fleet.nodes, daemons):
        assert d.url == node.url(), d.url
        r = d.get("/healthz")
        assert r.status == 200, (node, r.json)
        assert r.data["store"]["ok"] and r.data["docker"]["ok"], (node, r.json)
    # each node its own simulated GPUs (4xA100-80GB, 2xT4-16GB, 8xA10-24GB)
    assert [gpu_count(d) for d in daemons] == [4, 2, 8]


def test_nodes_reach_each_other(fleet, daemons):
    """From inside each node's netns, every other node's gpuboxd answers."""
    probe = ("import sys, urllib.request\n"
             "for url in sys.argv[1:]:\n"
             "    with urllib.request.urlopen(url + '/healthz', timeout=10) as r:\n"
             "        print(url, r.status)\n")
    for node in fleet.nodes:
        others = [o.url() for o in fleet.nodes if o is not node]
        p = node.run(["/usr/bin/python3", "-c", probe, *others])
        assert p.returncode == 0, (node, p.stdout, p.stderr)
        assert p.stdout.split() == [w for url in others for w in (url, "200")], p.stdout


def test_each_node_creates_on_its_own_dockerd(fleet, daemons):
    for node, d in zip(fleet.nodes, daemons):
        name = f"{PREFIX}_{node.label}"
        data = create_ok(d, name, gpus=1)
        assert len(data["gpus"]) == 1
        assert_runs_only_on(fleet, node, name)
        c = node.containers(name)[0]
        assert c["Id"] == data["containerId"]
        inspect = node.docker("GET", f"/containers/{c['Id']}/json").json
        assert device_uuids(inspect) == set(data["gpus"])
    # each daemon lists only its own prefix's set
    for node, d in zip(fleet.nodes, daemons):
        assert [s["name"] for s in list_sets(d)] == [f"{PREFIX}_{node.label}"]


def test_published_port_answers_on_the_node_address(fleet, daemons):
    """A container's published port is reached from the hub at its node's
    address (through that node's dockerd's NAT), and not at another's."""
    node, d = fleet.nodes[0], daemons[0]
    script = f"echo hello-{node.label} > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"
    data = create_ok(d, f"{PREFIX}_http", cmd=["sh", "-c", script], containerPorts=["8080"])
    port = data["ports"][0]["hostPort"]

    def fetch(addr):
        try:
            with urllib.request.urlopen(f"http://{addr}:{port}/index.html", timeout=3) as r:
                return r.read().decode()
        except OSError:
            return None

    assert wait_until(lambda: fetch(node.addr), timeout=30, interval=0.3) == f"hello-{node.label}\n"
    assert fetch(fleet.nodes[1].addr) is None
    assert d.request("DELETE", f"/api/v1/replicaSet/{PREFIX}_http?purge=true").status == 200


def test_daemons_work_with_an_etcd_member_killed(fleet, etcd_cluster, daemons):
    """kill -9 the member every daemon talks to (the first endpoint), made the
    leader first: the other two elect a leader and the daemons fail over."""
    first = etcd_cluster.members[0]
    etcd_cluster.move_leader(first)
    etcd_cluster.kill(first)
    try:
        etcd_cluster.wait_healthy()
        assert etcd_cluster.leader() is not first
        for node, d in zip(fleet.nodes, daemons):
            name = f"{PREFIX}_{node.label}_m"
            create_ok(d, name, gpus=1)
            assert_runs_only_on(fleet, node, name)
            assert sorted(s["name"] for s in list_sets(d)) == [f"{PREFIX}_{node.label}", name]
            assert info_ok(d, f"{PREFIX}_{node.label}")
    finally:
        etcd_cluster.restart(first)
    assert len(etcd_cluster.running) == 3
    for d in daemons:
        assert wait_until(lambda: store_ok(d), timeout=60), d.get("/healthz").json


def test_partitioned_node_refuses_changes(fleet, etcd_cluster, daemons):
    """Node b cut off from every etcd member: its changes fail with 503 (code
    1111, the store), it still answers HTTP; nodes a and c work on. Healed,
    it works again by itself."""
    b = fleet.nodes[1]
    db = daemons[1]
    with fleet.partitioned_from(b, etcd_cluster.client_ports):
        r = create(db, f"{PREFIX}_cut")
        assert r.status == 503 and r.code == 1111, (r.status, r.json)
        assert b.containers(f"{PREFIX}_cut") == []
        # HTTP still answers: the GPUs from memory, /healthz says the store is down
        assert db.get("/api/v1/resources/gpus").status == 200
        assert wait_until(lambda: db.get("/healthz").status == 503, timeout=60)
        for node, d in zip(fleet.nodes, daemons):
            if node is b:
                continue
            name = f"{PREFIX}_{node.label}_p"
            create_ok(d, name, gpus=1)
            assert_runs_only_on(fleet, node, name)
        # still cut off after the others' work
        r = create(db, f"{PREFIX}_cut")
        assert r.status == 503 and r.code == 1111, (r.status, r.json)
    # healed: it claims its prefix again (the lease may have run out) and works
    assert wait_until(lambda: store_ok(db), timeout=90, interval=0.5), db.get("/healthz").json
    assert wait_until(lambda: create(db, f"{PREFIX}_cut").status == 200,
                      timeout=90, interval=1), db.log()[-3000:]
    assert_runs_only_on(fleet, b, f"{PREFIX}_cut")
    assert f"{PREFIX}_cut" in [s["name"] for s in list_sets(db)]


def test_gpuboxd_killed_and_restarted(fleet, daemons):
    """kill -9 node c's gpuboxd, start it on the same data dir: it takes its
    claim on the store over (its predecessor's pid no longer runs on this
    host), has its sets, and their containers ran on meanwhile."""
    c, dc = fleet.nodes[2], daemons[2]
    before = sorted(s["name"] for s in list_sets(dc))
    container = c.containers(f"{PREFIX}_c")[0]["Id"]
    dc.kill9_restart()
    assert dc.url == c.url()
    assert sorted(s["name"] for s in list_sets(dc)) == before
    assert c.containers(f"{PREFIX}_c")[0]["Id"] == container
    assert_runs_only_on(fleet, c, f"{PREFIX}_c")
    create_ok(dc, f"{PREFIX}_c_again", gpus=1)
    assert_runs_only_on(fleet, c, f"{PREFIX}_c_again")
