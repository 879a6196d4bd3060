"""The fleet (docs/fleet.md): three gpuboxd, each on a node of its own (a
network namespace with its own dockerd) with cards of its own model, on one
three-member etcd cluster under one prefix, each started with --node and
--advertise.

Node a has 4 A100-80GB, node b 2 T4-16GB, node c 8 A10-24GB, so the model
of a set's card says which node took it, and the container must be on that
node's dockerd and no other.
"""
import concurrent.futures
import json
import time

import pytest

from rsutil import IMAGE, LONG_RUNNING, call, create, delete, info, lifecycle, rs_path, wait_until

PREFIX = "/fleet"


@pytest.fixture(scope="module")
def nodes(start_node_module, fleet, etcd_cluster):
    """{label: daemon} of the module's fleet, all ready before the first test."""
    ds = {n.label: start_node_module(n, store=etcd_cluster.url(PREFIX), fleet_flags=True)
          for n in fleet.nodes}
    wait_until(lambda: all(states(d) == {"a": "ready", "b": "ready", "c": "ready"}
                           for d in ds.values()), timeout=30)
    return ds


def states(d):
    r = d.get("/api/v1/nodes")
    assert r.status == 200, (r.status, r.json)
    return {n["name"]: n["state"] for n in r.data["nodes"]}


def model_of(d, name):
    """The model of set name's first card, from the merged GPU list."""
    uuid = info_ok_any(d, name)["gpus"][0]
    devs = d.get("/api/v1/resources/gpus").data["devices"]
    return next(x for x in devs if x["uuid"] == uuid)


def info_ok_any(d, name):
    r = info(d, name)
    assert r.status == 200, (r.status, r.json)
    return r.data["info"]


def where(fleet, name):
    """The labels of the nodes whose dockerd holds a container of set name."""
    return sorted(n.label for n in fleet.nodes if n.containers(name))


@pytest.fixture
def clean(nodes, fleet):
    """Names a test made are purged from the fleet after it."""
    made = []
    yield made
    for name in made:
        delete(nodes["a"], name, purge=True)
    for name in made:
        assert where(fleet, name) == [], name


def test_every_node_lists_the_three_nodes(nodes):
    for d in nodes.values():
        r = d.get("/api/v1/nodes")
        by = {n["name"]: n for n in r.data["nodes"]}
        assert sorted(by) == ["a", "b", "c"]
        assert by["a"]["gpus"]["total"] == 4 and "A100" in by["a"]["gpus"]["models"][0]
        assert by["b"]["gpus"]["total"] == 2 and "T4" in by["b"]["gpus"]["models"][0]
        assert by["c"]["gpus"]["total"] == 8
        assert all(n["lastHeartbeat"] and n["advertise"].startswith("http://") for n in by.values())


def test_a_share_that_fits_a_node_total_but_no_card_goes_elsewhere(nodes, fleet, clean):
    # b has 2 x 16 GB = 32 GB, but no card takes 20 GB; c's 24 GB cards do,
    # a's 80 GB too. binpack: the least left after placing - c (8 x 24)
    # has less than a (4 x 80).
    clean.append("shr1")
    r = create(nodes["b"], "shr1", 1, gpuMemory="20GB")
    assert r.status == 200, r.json
    assert where(fleet, "shr1") == ["c"]
    # pinned to b: no card of b takes it, whatever its total
    clean.append("shr2")
    r = create(nodes["a"], "shr2", 1, gpuMemory="20GB", node="b")
    assert (r.status, r.code) == (409, 1013), r.json
    assert "largest free spots" in r.msg and "b:" in r.msg, r.msg
    assert where(fleet, "shr2") == []


def test_binpack_fills_the_fullest_node_spread_the_emptiest(nodes, fleet, clean):
    clean += ["bp1", "sp1"]
    # one whole card: binpack leaves the least behind on b (one T4 left)
    assert create(nodes["a"], "bp1", 1).status == 200
    assert where(fleet, "bp1") == ["b"]
    # spread leaves the most: a (3 x 80 GB left) over c (7 x 24 GB)
    assert create(nodes["b"], "sp1", 1, placement="spread").status == 200
    assert where(fleet, "sp1") == ["a"]


def test_node_selector_and_model(nodes, fleet, clean):
    clean += ["sel1", "mod1"]
    r = create(nodes["a"], "sel1", 1, nodeSelector={"nosuch": "label"})
    assert (r.status, r.code) == (409, 1013), r.json
    assert "labels" in r.msg, r.msg
    assert create(nodes["a"], "mod1", 1, gpuModel="A10-").status == 200
    assert where(fleet, "mod1") == ["c"]


def test_every_change_route_is_forwarded_to_the_owner(nodes, fleet, clean):
    clean.append("fwd1")
    r = create(nodes["b"], "fwd1", 1, node="a", ports=[{"containerPort": 80}])
    assert r.status == 200, r.json
    assert where(fleet, "fwd1") == ["a"]
    c = nodes["c"]  # never the owner
    assert info_ok_any(c, "fwd1")["status"] == "running"
    assert call(c, "GET", rs_path("fwd1", "/history")).status == 200
    r = call(c, "POST", rs_path("fwd1", "/execute"), {"cmd": ["echo", "hello"]})
    assert r.status == 200 and "hello" in json.dumps(r.data), r.json
    r = call(c, "PATCH", rs_path("fwd1"), {"gpuPatch": {"gpuCount": 2}})
    assert r.status == 200, r.json
    assert info_ok_any(c, "fwd1")["version"] == 2
    assert [x["Names"][0] for x in fleet.node("a").containers("fwd1")]
    for action, state in (("pause", "paused"), ("continue", "running"), ("stop", "stopped"),
                          ("restart", "running")):
        r = lifecycle(c, "fwd1", action)
        assert r.status == 200, (action, r.json)
        assert info_ok_any(nodes["b"], "fwd1")["state"] == state
    r = call(c, "PATCH", rs_path("fwd1", "/rollback"), {"version": 1})
    assert r.status == 200, r.json
    op = r.data.get("operationId")
    if op:
        assert call(c, "GET", f"/api/v1/operations/{op}").status == 200
    # gpu-docker-api's older routes, through another node too
    r = call(c, "PATCH", "/api/v1/containers/fwd1/gpu", {"gpuCount": 1})
    assert r.status == 200, r.json
    r = call(c, "POST", "/api/v1/containers/fwd1/execute", {"cmd": ["true"]})
    assert r.status == 200, r.json
    assert where(fleet, "fwd1") == ["a"]
    r = call(c, "DELETE", rs_path("fwd1") + "?purge=true")
    assert r.status == 200, r.json
    assert where(fleet, "fwd1") == []
    assert info(nodes["a"], "fwd1").status == 404
    # the name is free again in the whole fleet: a create may go anywhere
    assert create(nodes["c"], "fwd1", 0, node="c").status == 200
    assert where(fleet, "fwd1") == ["c"]


def test_lists_answer_for_the_whole_fleet(nodes, clean):
    clean += ["lsa", "lsb", "lsc"]
    for label in "abc":
        assert create(nodes["a"], f"ls{label}", 1, node=label).status == 200
    for d in nodes.values():
        sets = {s["name"]: s for s in d.get("/api/v1/replicaSet").data["replicaSets"]}
        assert {sets[f"ls{x}"]["node"] for x in "abc"} == {"a", "b", "c"}
        assert all(sets[f"ls{x}"]["status"] == "running" for x in "abc")
        gpus = d.get("/api/v1/resources/gpus").data
        assert len(gpus["devices"]) == 14 and len(gpus["gpus"]) == 14
        assert {x["node"] for x in gpus["devices"]} == {"a", "b", "c"}
        assert len(d.get("/api/v1/gpus").data["gpuStatus"]) == 14
        ports = d.get("/api/v1/resources/ports").data
        assert sorted(p["node"] for p in ports["nodes"]) == ["a", "b", "c"]


def test_names_are_unique_in_the_fleet(nodes, fleet, clean):
    clean.append("race1")
    ds = list(nodes.values())

    def one(i):
        return create(ds[i % 3], "race1", 0).status

    with concurrent.futures.ThreadPoolExecutor(max_workers=25) as pool:
        answers = list(pool.map(one, range(50)))
    assert answers.count(200) == 1, answers
    assert len(where(fleet, "race1")) == 1
    assert sum(len(n.containers("race1")) for n in fleet.nodes) == 1
    listed = [s for s in ds[0].get("/api/v1/replicaSet").data["replicaSets"]
              if s["name"] == "race1"]
    assert len(listed) == 1


def test_volumes_live_on_one_node_and_sets_follow_them(nodes, fleet, clean):
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": "fv1", "size": "20MB", "node": "c"})
    assert r.status == 200, r.json
    vols = {v["name"]: v for v in nodes["b"].get("/api/v1/volumes").data["volumes"]}
    assert vols["fv1"]["node"] == "c"
    clean.append("volset")
    r = create(nodes["b"], "volset", 1, binds=[{"src": "fv1", "dest": "/data"}])
    assert r.status == 200, r.json
    assert where(fleet, "volset") == ["c"]
    # a set on another node cannot bind it
    r = create(nodes["b"], "volset2", 1, node="a", binds=[{"src": "fv1", "dest": "/data"}])
    assert r.status == 409 and "volumes live elsewhere" in r.msg, r.json
    delete(nodes["a"], "volset", purge=True)
    assert call(nodes["a"], "DELETE", "/api/v1/volumes/fv1").status == 200


def test_cordon_keeps_new_sets_away(nodes, fleet, clean):
    r = call(nodes["c"], "PATCH", "/api/v1/nodes/b/cordon")
    assert r.status == 200 and r.data["node"]["state"] == "cordoned", r.json
    try:
        clean.append("cord1")
        r = create(nodes["a"], "cord1", 1, node="b")
        assert (r.status, r.code) == (409, 1013) and "cordoned: b" in r.msg, r.json
        clean.append("cord2")
        assert create(nodes["a"], "cord2", 1).status == 200
        assert where(fleet, "cord2") != ["b"]
    finally:
        r = call(nodes["a"], "PATCH", "/api/v1/nodes/b/uncordon")
        assert r.status == 200 and r.data["node"]["state"] == "ready", r.json
    assert call(nodes["a"], "PATCH", "/api/v1/nodes/nosuch/cordon").status == 404


def test_metrics_carry_the_node(nodes):
    for label, d in nodes.items():
        conn = d.connection()
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        assert f'gpubox_gpus{{node="{label}"}}' in text
        assert f'gpubox_fleet_nodes{{node="{label}",state="ready"}} 3' in text


def test_a_killed_node_is_unreachable_and_keeps_what_it_holds(nodes, fleet, clean):
    clean.append("k1")
    assert create(nodes["a"], "k1", 1, node="b").status == 200
    held = info_ok_any(nodes["b"], "k1")["gpus"]
    nodes["b"].kill9()
    try:
        start = time.monotonic()
        wait_until(lambda: states(nodes["a"])["b"] == "unreachable", timeout=20)
        assert time.monotonic() - start < 16
        sets = {s["name"]: s for s in nodes["c"].get("/api/v1/replicaSet").data["replicaSets"]}
        assert sets["k1"]["status"] == "unknown" and sets["k1"]["node"] == "b"
        r = lifecycle(nodes["a"], "k1", "stop")
        assert (r.status, r.code) == (503, 1114), r.json
        r = create(nodes["a"], "k2", 1, node="b")
        assert r.status == 409 and "unreachable: b" in r.msg, r.json
        # the name stays b's: a create of it elsewhere is refused, not placed
        r = create(nodes["c"], "k1", 1)
        assert r.status == 503, r.json
    finally:
        nodes["b"].restart()
    wait_until(lambda: states(nodes["a"])["b"] == "ready", timeout=30)
    i = info_ok_any(nodes["a"], "k1")
    assert i["status"] == "running" and i["gpus"] == held


def test_losing_one_etcd_member_changes_nothing(nodes, fleet, etcd_cluster, clean):
    # the leader: the other two elect a new one meanwhile, and reads wait
    # for it instead of failing
    victim = etcd_cluster.leader()
    etcd_cluster.kill(victim)
    try:
        for d in nodes.values():
            r = d.get("/api/v1/replicaSet")
            assert r.status == 200, r.json
        clean.append("em1")
        r = create(nodes["c"], "em1", 1)
        assert r.status == 200, r.json
        assert all(states(d) == {"a": "ready", "b": "ready", "c": "ready"}
                   for d in nodes.values())
        assert lifecycle(nodes["a"], "em1", "stop").status == 200
        assert lifecycle(nodes["b"], "em1", "restart").status == 200
    finally:
        etcd_cluster.restart(victim)
        etcd_cluster.wait_healthy()


def test_a_node_cut_off_from_etcd_refuses_changes(nodes, fleet, etcd_cluster, clean):
    clean.append("part1")
    assert create(nodes["a"], "part1", 0, node="c").status == 200
    with fleet.partitioned_from("c", etcd_cluster.client_ports):
        wait_until(lambda: states(nodes["a"])["c"] == "unreachable", timeout=25)
        r = lifecycle(nodes["c"], "part1", "stop")
        assert r.status == 503, r.json
        r = lifecycle(nodes["a"], "part1", "stop")
        assert (r.status, r.code) == (503, 1114), r.json
        assert [c["State"] for c in fleet.node("c").containers("part1")] == ["running"]
    wait_until(lambda: states(nodes["a"])["c"] == "ready", timeout=30)
    assert lifecycle(nodes["a"], "part1", "stop").status == 200




def cli(d, *args):
    """The gpubox CLI against node d (run from the hub, as a user would)."""
    import os
    import subprocess
    e = dict(os.environ, GPUBOX_HOST=d.url)
    e.pop("GPUBOX_TOKEN", None)
    p = subprocess.run([os.environ.get("GPUBOX_CLI", "gpubox"), *args], capture_output=True,
                       text=True, env=e, timeout=120)
    assert "Sanitizer" not in p.stderr, p.stderr
    return p


def test_the_cli_shows_and_places_on_nodes(nodes, fleet, clean):
    p = cli(nodes["b"], "nodes")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "STATE"]
    assert [ln.split()[:2] for ln in lines[1:]] == [["a", "ready"], ["b", "ready"], ["c", "ready"]]
    clean.append("clin")
    p = cli(nodes["a"], "run", "clin", "-i", IMAGE, "-g", "1", "--node-selector", "x=y",
            "--", *LONG_RUNNING)
    assert p.returncode != 0 and "labels" in p.stderr, (p.stdout, p.stderr)
    p = cli(nodes["a"], "node", "cordon", "c")
    assert p.returncode == 0 and "cordoned" in p.stdout, (p.stdout, p.stderr)
    assert cli(nodes["a"], "node", "uncordon", "c").returncode == 0
    p = cli(nodes["a"], "run", "clin", "-i", IMAGE, "-g", "1", "--node", "c", "--",
            *LONG_RUNNING)
    assert p.returncode == 0, p.stderr
    assert where(fleet, "clin") == ["c"]
    ps = cli(nodes["b"], "ps").stdout.splitlines()
    assert ps[0].split()[:2] == ["NAME", "NODE"], ps
    assert any(ln.split()[:2] == ["clin", "c"] for ln in ps), ps
    gpus = cli(nodes["b"], "gpus").stdout.splitlines()
    assert gpus[0].split()[0] == "NODE", gpus
    assert {ln.split()[0] for ln in gpus[1:] if ln.split()} >= {"a", "b", "c"}, gpus
    assert sum(1 for ln in gpus[1:] if ln.split() and ln.split()[0] in "abc") == 14, gpus
