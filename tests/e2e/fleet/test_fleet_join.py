"""A single server joins a fleet (docs/fleet.md, "A single server joins"):
its records move under its node in etcd, crash-safe, and its sets keep
running with the cards they held. A module of its own: no other gpuboxd may
run on node a's dockerd meanwhile.
"""
import subprocess

from conftest import GPUBOXD
from rsutil import create, delete, info


def info_ok_any(d, name):
    r = info(d, name)
    assert r.status == 200, (r.status, r.json)
    return r.data["info"]


def test_a_single_server_joins_without_losing_its_sets(start_node, fleet, etcd_cluster):
    store = etcd_cluster.url("/join")
    single = start_node("a", store=store, port=2390)
    for name in ("j1", "j2"):
        assert create(single, name, 1).status == 200
    held = {n: info_ok_any(single, n)["gpus"] for n in ("j1", "j2")}
    single.stop()
    # the join dies after its first batch of moved keys (as kill -9 there)
    args = [a for a in single.args[1:]] + fleet.node("a").fleet_flags(2390)
    node = fleet.node("a")
    died = subprocess.run(node.command([GPUBOXD, *args]), capture_output=True, text=True,
                          timeout=120, env={**node.env(), "GPUBOX_FAULT": "fleet.join.batch-moved"})
    assert died.returncode == 99, died.stderr[-2000:]
    keys = etcd_cluster.range("/join/")
    assert any(k.startswith("/join/nodes/a//") for k in keys), keys
    assert any(k.startswith("/join//gpubox/") for k in keys), keys
    joined = start_node("a", store=store, port=2390, data_dir=single.data_dir,
                        fleet_flags=True)
    for n in ("j1", "j2"):
        i = info_ok_any(joined, n)
        assert i["status"] == "running" and i["gpus"] == held[n]
    keys = etcd_cluster.range("/join/")
    assert any(k.startswith("/join/nodes/a//gpubox/replicasets/j1") for k in keys), keys
    assert not any(k.startswith("/join//gpubox/") for k in keys), keys
    r = joined.get("/api/v1/nodes")
    assert [n["name"] for n in r.data["nodes"]] == ["a"]
    for n in ("j1", "j2"):
        assert delete(joined, n, purge=True).status == 200
