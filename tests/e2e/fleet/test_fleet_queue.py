"""The queue in a fleet (issue 29; docs/queue.md, "In a fleet"): a create
with "queue": true that no node can take waits in the queue of the node
that received it (202), the name claimed for that node, and starts there
when a card frees; without queue the fleet answers 1013 as before.

Each node has one simulated card.
"""
import pytest

from rsutil import IMAGE, call, delete, info, wait_until

PREFIX = "/fleetqueue"


def states(d):
    r = d.get("/api/v1/nodes")
    assert r.status == 200, (r.status, r.json)
    return {n["name"]: n["state"] for n in r.data["nodes"]}


@pytest.fixture
def nodes(start_node, fleet, etcd_cluster):
    ds = {n.label: start_node(n, store=etcd_cluster.url(PREFIX), fleet_flags=True,
                              gpus="1xA100-80GB")
          for n in fleet.nodes}
    wait_until(lambda: all(states(d) == {"a": "ready", "b": "ready", "c": "ready"}
                           for d in ds.values()), timeout=30)
    return ds


def body(name, **more):
    b = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 1, "cmd": ["sleep", "3600"]}
    b.update(more)
    return b


def test_queue_waits_on_the_receiving_node_and_starts_there(nodes, fleet):
    a = nodes["a"]
    for label in ("a", "b", "c"):
        r = call(a, "POST", "/api/v1/replicaSet", body(f"hold{label}", node=label))
        assert r.status == 200, r.json
    r = call(a, "POST", "/api/v1/replicaSet", body("nowait"))
    assert (r.status, r.code) == (409, 1013), r.json
    r = call(a, "POST", "/api/v1/replicaSet", body("waiter", queue=True))
    assert (r.status, r.code) == (202, 200), r.json
    assert r.data["state"] == "queued", r.data
    # any node answers for it: the name is claimed for a
    got = info(nodes["c"], "waiter")
    assert got.status == 200 and got.data["info"]["state"] == "queued", got.json
    assert call(nodes["b"], "POST", "/api/v1/replicaSet", body("waiter")).code == 1008
    assert delete(a, "holda", purge=True).status == 200
    wait_until(lambda: info(a, "waiter").data["info"]["state"] == "running", timeout=20)
    assert [n.label for n in fleet.nodes if n.containers("waiter")] == ["a"]
