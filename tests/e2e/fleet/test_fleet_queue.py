"""The queue in a fleet (issue 29; docs/queue.md, "In a fleet"): queued
requests are the fleet's, whichever node received them. One dispatcher,
elected through an etcd lease (the role on its claim's lease), decides for
the whole fleet: a request queued through one node starts on any node where
a card frees, moved there in one transaction with its name and started by
the ordinary create on that node. GET /api/v1/queue from any node lists the
fleet's queue, why per node. kill -9 of the dispatching node (GPUBOX_FAULT
at a named step of a dispatch, which exits as kill -9 would) hands the role
over within the lease's TTL: the request runs once, nothing is lost.

Each node has one simulated card (the quota test: the harness's default cards).
"""
import itertools
import json
import os
import secrets
import time

import pytest

from rsutil import IMAGE, call, delete, info, wait_until
from schema import response_schema, validate
from secutil import as_

from .fleetutil import start_pair

_prefixes = itertools.count()


def states(d):
    r = d.get("/api/v1/nodes")
    assert r.status == 200, (r.status, r.json)
    return {n["name"]: n["state"] for n in r.data["nodes"]}


def start_fleet(start_node, fleet, etcd_cluster, first_env=None):
    """Nodes a, b, c on a prefix of their own; a started first (so that it
    takes the dispatcher's role), with first_env's variables."""
    prefix = f"/fleetqueue{os.getpid()}-{next(_prefixes)}"
    store = etcd_cluster.url(prefix)
    ds = {}
    for n in fleet.nodes:
        env = {**os.environ, **first_env} if first_env and n.label == "a" else None
        ds[n.label] = start_node(n, store=store, fleet_flags=True, gpus="1xA100-80GB", env=env)
        if n.label == "a":
            assert wait_until(lambda: leader(etcd_cluster, prefix) == "a", timeout=20)
    assert wait_until(lambda: all(states(d) == {"a": "ready", "b": "ready", "c": "ready"}
                           for d in ds.values()), timeout=30)
    return ds, prefix


def leader(etcd_cluster, prefix):
    v = etcd_cluster.range(f"{prefix}/fleet/leaders/queue-dispatcher")
    return json.loads(next(iter(v.values())))["node"] if v else None


@pytest.fixture
def nodes(start_node, fleet, etcd_cluster):
    return start_fleet(start_node, fleet, etcd_cluster)[0]


def body(name, **more):
    b = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 1, "cmd": ["sleep", "3600"]}
    b.update(more)
    return b


def hold_all(ds, tag=""):
    for label in ("a", "b", "c"):
        r = call(ds["a"], "POST", "/api/v1/replicaSet", body(f"hold{label}{tag}", node=label))
        assert r.status == 200, r.json


def state(d, name):
    r = info(d, name)
    return r.data["info"]["state"] if r.status == 200 else None


def where(fleet, name):
    return [n.label for n in fleet.nodes if n.containers(name)]


def test_queue_waits_on_the_receiving_node_and_starts_there(nodes, fleet):
    a = nodes["a"]
    hold_all(nodes)
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
    assert wait_until(lambda: state(a, "waiter") == "running", timeout=20)
    assert where(fleet, "waiter") == ["a"]


def test_queued_through_a_starts_on_b_and_every_node_lists_it(nodes, fleet):
    a = nodes["a"]
    hold_all(nodes)
    r = call(a, "POST", "/api/v1/replicaSet", body("wanderer", queue=True))
    assert (r.status, r.code) == (202, 200), r.json
    for label in ("a", "b", "c"):
        got = nodes[label].get("/api/v1/queue")
        assert got.status == 200, got.json
        q = got.data["queue"]
        assert [e["name"] for e in q] == ["wanderer"], (label, q)
        assert q[0]["position"] == 1 and q[0]["owner"], q
        # why, per node: each of them is full
        assert all(n in q[0]["why"] for n in ("a", "b", "c")), q[0]["why"]
    # cordoned: the why says so
    assert call(nodes["a"], "PATCH", "/api/v1/nodes/c/cordon").status == 200
    assert wait_until(lambda: "cordoned" in nodes["b"].get("/api/v1/queue").data["queue"][0]["why"],
               timeout=10)
    assert delete(nodes["b"], "holdb", purge=True).status == 200
    assert wait_until(lambda: state(a, "wanderer") == "running", timeout=20)
    assert where(fleet, "wanderer") == ["b"]
    for label in ("a", "b", "c"):
        assert nodes[label].get("/api/v1/queue").data["queue"] == []
    assert call(nodes["a"], "PATCH", "/api/v1/nodes/c/uncordon").status == 200


def test_a_pinned_request_waits_for_its_node(nodes, fleet):
    """node and nodeSelector are kept while it waits: a card freed on
    another node does not start it."""
    a = nodes["a"]
    hold_all(nodes)
    r = call(a, "POST", "/api/v1/replicaSet", body("pinned", queue=True, node="c"))
    assert (r.status, r.code) == (202, 200), r.json
    r = call(a, "POST", "/api/v1/replicaSet", body("picky", queue=True,
                                                   nodeSelector={"nosuch": "label"}))
    assert (r.status, r.code) == (202, 200), r.json
    q = nodes["b"].get("/api/v1/queue").data["queue"]
    assert {e["name"] for e in q} == {"pinned", "picky"}, q
    assert delete(a, "holdb", purge=True).status == 200
    assert delete(a, "holda", purge=True).status == 200
    time.sleep(5)
    assert state(a, "pinned") == "queued" and state(a, "picky") == "queued"
    assert delete(a, "holdc", purge=True).status == 200
    assert wait_until(lambda: state(a, "pinned") == "running", timeout=20)
    assert where(fleet, "pinned") == ["c"]
    assert state(a, "picky") == "queued"
    assert delete(a, "picky").data["cancelled"] is True


@pytest.mark.parametrize("step", ["queue.dispatch.decided", "queue.dispatch.moved"])
def test_kill_of_the_dispatcher_hands_the_role_over(start_node, fleet, etcd_cluster, step):
    """a dispatches and dies (as kill -9) at step of a dispatch: before the
    request moved (the next dispatcher places it) or after (its target
    starts it). Either way it runs once, the role goes to b or c within the
    lease, and the new dispatcher serves the queue."""
    ds, prefix = start_fleet(start_node, fleet, etcd_cluster, {"GPUBOX_FAULT": step})
    # a killed node's containers stay in its dockerd: names of this run's own
    t = step.rsplit(".", 1)[-1]
    b = ds["b"]
    hold_all(ds, t)
    r = call(b, "POST", "/api/v1/replicaSet", body(f"survivor{t}", queue=True))
    assert (r.status, r.code) == (202, 200), r.json
    assert delete(b, f"holdc{t}", purge=True).status == 200
    # a decides to start it on c, and dies at step
    assert wait_until(lambda: ds["a"].proc.poll() is not None, timeout=20)
    assert ds["a"].proc.returncode == 99
    ds["a"].proc.stdout.close()
    ds["a"].log_file.close()
    ds["a"].killed = True
    assert wait_until(lambda: leader(etcd_cluster, prefix) in ("b", "c"), timeout=30)
    assert wait_until(lambda: state(b, f"survivor{t}") == "running", timeout=30)
    assert where(fleet, f"survivor{t}") == ["c"]
    r = info(ds["c"], f"survivor{t}")
    assert r.data["info"]["version"] == 1, r.json
    # the new dispatcher serves the queue
    r = call(ds["c"], "POST", "/api/v1/replicaSet", body(f"next{t}", queue=True))
    assert (r.status, r.code) == (202, 200), r.json
    assert delete(ds["c"], f"holdb{t}", purge=True).status == 200
    assert wait_until(lambda: state(b, f"next{t}") == "running", timeout=20)
    assert where(fleet, f"next{t}") == ["b"]
    assert where(fleet, f"survivor{t}") == ["c"]
    assert b.get("/api/v1/queue").data["queue"] == []


def test_a_request_outlives_the_node_that_received_it(start_node, fleet, etcd_cluster):
    """b received the request and is killed: its queued record is in etcd,
    still listed, and the dispatcher (a) starts it on c when a card frees
    there."""
    ds, prefix = start_fleet(start_node, fleet, etcd_cluster)
    a, b = ds["a"], ds["b"]
    hold_all(ds, "o")
    r = call(b, "POST", "/api/v1/replicaSet", body("orphan", queue=True))
    assert (r.status, r.code) == (202, 200), r.json
    b.kill9()
    assert wait_until(lambda: states(a).get("b") == "unreachable", timeout=30)
    assert [e["name"] for e in a.get("/api/v1/queue").data["queue"]] == ["orphan"]
    assert "unreachable" in a.get("/api/v1/queue").data["queue"][0]["why"]
    assert delete(a, "holdco", purge=True).status == 200
    assert wait_until(lambda: state(a, "orphan") == "running", timeout=30)
    assert where(fleet, "orphan") == ["c"]
    assert a.get("/api/v1/queue").data["queue"] == []


def test_the_owners_quota_is_checked_where_it_starts(start_node, fleet, etcd_cluster):
    """A user with a quota of one card queues a second while the first runs:
    the dispatcher sends it to a node with a free card, which refuses it for
    the quota; the list says `quota: ...`, and it starts once the first is
    deleted."""
    admin = "fq-admin-" + secrets.token_hex(16)
    prefix = f"/fleetqueue{os.getpid()}-quota"
    a, b = start_pair(start_node, etcd_cluster, prefix, admin)
    name = "fq" + secrets.token_hex(3)
    r = as_(a, admin, "POST", "/api/v1/users", {"name": name, "role": "user",
                                                 "quota": {"cards": 1}})
    assert r.status == 200, r.json
    token = r.data["token"]
    assert wait_until(lambda: as_(b, token, "GET", "/api/v1/whoami").status == 200, timeout=5)
    r = as_(a, token, "POST", "/api/v1/replicaSet", body("quotafirst"))
    assert r.status == 200, r.json
    r = as_(b, token, "POST", "/api/v1/replicaSet", body("quotasecond", queue=True))
    assert (r.status, r.code) == (202, 200), r.json

    def why():
        q = as_(a, admin, "GET", "/api/v1/queue").data["queue"]
        return q[0]["why"] if q else ""

    assert wait_until(lambda: why().startswith("quota:"), timeout=20), why()
    assert as_(a, token, "DELETE", "/api/v1/replicaSet/quotafirst?purge=true").status == 200
    assert wait_until(lambda: (as_(b, token, "GET", "/api/v1/replicaSet/quotasecond").data or {})
                      .get("info", {}).get("state") == "running", timeout=30)
    assert as_(a, admin, "GET", "/api/v1/queue").data["queue"] == []
    assert as_(a, token, "DELETE", "/api/v1/replicaSet/quotasecond?purge=true").status == 200


def move_q(d, name, **more):
    return call(d, "POST", f"/api/v1/replicaSet/{name}/move", {"queue": True, **more})


def conforms(d, pattern, method, r):
    doc = d.get("/openapi.json").json
    errors = validate(r.json, response_schema(doc, pattern, method, r.status), doc)
    assert not errors, f"{method} {pattern} answered {r.status} {r.json}:\n" + "\n".join(errors)


def node_of(d, name):
    sets = {s["name"]: s for s in d.get("/api/v1/replicaSet").data["replicaSets"]}
    return sets[name]["node"] if name in sets else None


def test_a_move_with_queue_waits_for_a_node_then_moves(nodes, fleet):
    """POST .../move with queue when no node can take the set: 202, the set
    runs on where it is (listed in the queue as a move, with why), and the
    dispatcher has it moved as soon as a card frees on another node. A
    stopped set waits stopped, holding nothing, and lands stopped."""
    a = nodes["a"]
    r = call(a, "POST", "/api/v1/replicaSet", body("mover", node="a"))
    assert r.status == 200, r.json
    for label in ("b", "c"):
        r = call(a, "POST", "/api/v1/replicaSet", body(f"hold{label}", node=label))
        assert r.status == 200, r.json
    r = call(a, "POST", "/api/v1/replicaSet/mover/move", {})
    assert (r.status, r.code) == (409, 1013), r.json
    r = move_q(nodes["c"], "mover")
    assert (r.status, r.code) == (202, 200), r.json
    assert r.data["state"] == "queued" and r.data["move"] is True and r.data["why"], r.data
    conforms(a, "/api/v1/replicaSet/{name}/move", "POST", r)
    conforms(a, "/api/v1/queue", "GET", a.get("/api/v1/queue"))
    conforms(a, "/api/v1/replicaSet/{name}", "GET", info(a, "mover"))
    q = nodes["b"].get("/api/v1/queue").data["queue"]
    assert [(e["name"], e.get("move"), e.get("state"), e.get("node")) for e in q] == \
        [("mover", True, "running", "a")], q
    assert all(n in q[0]["why"] for n in ("b", "c")), q[0]["why"]
    assert state(a, "mover") == "running" and where(fleet, "mover") == ["a"]
    assert info(a, "mover").data["info"]["queue"]["move"] is True
    # a second wait for the same set is refused
    assert move_q(a, "mover").code == 1008
    assert delete(a, "holdb", purge=True).status == 200
    assert wait_until(lambda: where(fleet, "mover") == ["b"] and state(a, "mover") == "running",
                      timeout=30)
    assert wait_until(lambda: a.get("/api/v1/queue").data["queue"] == [], timeout=10)
    assert wait_until(lambda: "queue" not in info(a, "mover").data["info"], timeout=10)
    # stopped, and pinned to c: it waits stopped, holding nothing
    r = call(a, "POST", "/api/v1/replicaSet", body("holda", node="a"))
    assert r.status == 200, r.json
    assert call(a, "PATCH", "/api/v1/replicaSet/mover/stop").status == 200
    r = move_q(a, "mover", node="c")
    assert (r.status, r.code) == (202, 200), r.json
    got = info(a, "mover").data["info"]
    assert got["state"] == "stopped" and got["gpus"] == [], got
    time.sleep(3)
    assert node_of(a, "mover") == "b"
    assert delete(a, "holdc", purge=True).status == 200
    assert wait_until(lambda: node_of(a, "mover") == "c", timeout=30)
    assert state(a, "mover") == "stopped"
    assert wait_until(lambda: a.get("/api/v1/queue").data["queue"] == [], timeout=10)


def test_a_waiting_move_is_cancelled_or_times_out(nodes, fleet):
    """DELETE /api/v1/queue/{name} ends a move's wait, and so does its
    queueTimeout: the set stays as and where it is, and a card freed later
    does not move it."""
    a = nodes["a"]
    for label in ("a", "b", "c"):
        name = "stayer" if label == "a" else f"hold{label}"
        r = call(a, "POST", "/api/v1/replicaSet", body(name, node=label))
        assert r.status == 200, r.json
    r = move_q(a, "stayer", queueTimeout="2s")
    assert (r.status, r.code) == (202, 200), r.json
    assert wait_until(lambda: info(a, "stayer").data["info"].get("queue", {})
                      .get("dropped", {}).get("reason") == "queueTimeout", timeout=15)
    assert a.get("/api/v1/queue").data["queue"] == []
    r = move_q(nodes["b"], "stayer")
    assert (r.status, r.code) == (202, 200), r.json
    r = call(nodes["c"], "DELETE", "/api/v1/queue/stayer")
    assert r.status == 200 and r.data["cancelled"] is True and r.data["move"] is True, r.json
    conforms(a, "/api/v1/queue/{name}", "DELETE", r)
    assert a.get("/api/v1/queue").data["queue"] == []
    assert call(a, "DELETE", "/api/v1/queue/stayer").code == 1100
    assert delete(a, "holdb", purge=True).status == 200
    time.sleep(5)
    assert where(fleet, "stayer") == ["a"] and state(a, "stayer") == "running"


def test_a_timeout_is_applied_while_its_node_is_down(start_node, fleet, etcd_cluster):
    """b received a request with a queueTimeout and is killed: the
    dispatcher (a) drops it when its time is up (its record in etcd says
    why), without waiting for b to come back."""
    ds, prefix = start_fleet(start_node, fleet, etcd_cluster)
    a, b = ds["a"], ds["b"]
    hold_all(ds, "t")
    r = call(b, "POST", "/api/v1/replicaSet", body("expiring", queue=True, queueTimeout="4s"))
    assert (r.status, r.code) == (202, 200), r.json
    b.kill9()
    assert wait_until(lambda: states(a).get("b") == "unreachable", timeout=30)

    def listed():
        return [e["name"] for e in a.get("/api/v1/queue").data["queue"]]

    assert wait_until(lambda: listed() == [], timeout=15), listed()
    events = a.get("/api/v1/events").data["events"]
    assert any(e["kind"] == "queue.timeout" and e["replicaSet"] == "expiring"
               for e in events), events
    # a card freed now does not start it
    assert delete(a, "holdat", purge=True).status == 200
    time.sleep(3)
    assert where(fleet, "expiring") == []


def test_a_waiting_move_outlives_the_dispatcher(start_node, fleet, etcd_cluster):
    """The waiting move is in the set's record in etcd: kill -9 of the
    dispatching node (a) loses nothing; the node that takes the role over
    has the set moved when a card frees."""
    ds, prefix = start_fleet(start_node, fleet, etcd_cluster)
    a, b = ds["a"], ds["b"]
    for name, label in (("wmover", "b"), ("holdaw", "a"), ("holdcw", "c")):
        r = call(b, "POST", "/api/v1/replicaSet", body(name, node=label))
        assert r.status == 200, r.json
    r = move_q(b, "wmover")
    assert (r.status, r.code) == (202, 200), r.json
    a.kill9()
    assert wait_until(lambda: leader(etcd_cluster, prefix) in ("b", "c"), timeout=30)
    assert [e["name"] for e in b.get("/api/v1/queue").data["queue"]] == ["wmover"]
    assert delete(b, "holdcw", purge=True).status == 200
    assert wait_until(lambda: where(fleet, "wmover") == ["c"] and state(b, "wmover") == "running",
                      timeout=30)
    assert wait_until(lambda: b.get("/api/v1/queue").data["queue"] == [], timeout=10)


def test_a_waiting_move_in_a_fleet_with_tokens(start_node, fleet, etcd_cluster):
    """With --token-file the move the dispatcher starts carries no user's
    token: the nodes still make it (a user's own set, moved as the fleet
    decided)."""
    admin = "fq-admin-" + secrets.token_hex(16)
    prefix = f"/fleetqueue{os.getpid()}-tokens"
    a, b = start_pair(start_node, etcd_cluster, prefix, admin)
    name = "fm" + secrets.token_hex(3)
    r = as_(a, admin, "POST", "/api/v1/users", {"name": name, "role": "user"})
    assert r.status == 200, r.json
    token = r.data["token"]
    assert wait_until(lambda: as_(b, token, "GET", "/api/v1/whoami").status == 200, timeout=5)
    r = as_(a, token, "POST", "/api/v1/replicaSet", body("tmover", node="a"))
    assert r.status == 200, r.json
    r = as_(a, admin, "POST", "/api/v1/replicaSet", body("tholdb", node="b",
                                                         gpuCount=2))
    assert r.status == 200, r.json
    r = as_(a, token, "POST", "/api/v1/replicaSet/tmover/move", {"queue": True})
    assert (r.status, r.code) == (202, 200), r.json
    assert as_(a, admin, "DELETE", "/api/v1/replicaSet/tholdb?purge=true").status == 200
    assert wait_until(lambda: [n.label for n in fleet.nodes if n.containers("tmover")] == ["b"],
                      timeout=30), as_(a, admin, "GET", "/api/v1/replicaSet/tmover").json
    assert wait_until(lambda: "queue" not in as_(b, token, "GET", "/api/v1/replicaSet/tmover")
                      .data["info"], timeout=10)
    assert as_(b, token, "GET", "/api/v1/replicaSet/tmover").data["info"]["state"] == "running"
    assert as_(a, token, "DELETE", "/api/v1/replicaSet/tmover?purge=true").status == 200
