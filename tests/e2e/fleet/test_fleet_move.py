"""Moving a replica set to another node (docs/fleet.md, "Moving a replica
set"): POST /api/v1/replicaSet/{name}/move, with its system disk (files,
deletions of image files, symlinks, modes) and the data of the volumes it
binds; refused before anything is copied when the target has no room; and
crash-safe: a kill -9 of either side at a step leaves the set on exactly one
node, whole, with nothing left over on the other.

Node a has 4 A100-80GB, node b 2 T4-16GB, node c 8 A10-24GB (fleetutil).
"""
import time

import pytest

from rsutil import (call, create, delete, execute_ok, gpu_devices, gpu_map, history, info,
                    lifecycle, rs_path, wait_until)

PREFIX = "/fleetmove"

# What a set writes on its system disk and its volume, and what must read
# back the same on the other node.
WRITE = ("echo hello > /root/f && mkdir -p /opt/d && echo x > /opt/d/g && ln -s f /root/link"
         " && touch /root/suid && chmod 4755 /root/suid && rm /bin/vi"
         " && echo vol > /data/v && mkdir /data/sub && echo deep > /data/sub/w"
         " && dd if=/dev/urandom of=/data/big bs=1k count=300 2>/dev/null"
         " && md5sum /data/big | cut -c1-32 > /root/big.md5")
READ = ("cat /root/f /opt/d/g; readlink /root/link; stat -c %a /root/suid;"
        " test -e /bin/vi && echo vi || echo novi; cat /data/v /data/sub/w;"
        " md5sum /data/big | cut -c1-32; cat /root/big.md5")


@pytest.fixture(scope="module")
def nodes(start_node_module, fleet, etcd_cluster):
    ds = {n.label: start_node_module(n, store=etcd_cluster.url(PREFIX), fleet_flags=True)
          for n in fleet.nodes}
    wait_until(lambda: all(len(d.get("/api/v1/nodes").data["nodes"]) == 3 for d in ds.values()),
               timeout=30)
    return ds


def where(fleet, name):
    """The labels of the nodes whose dockerd holds a container of set name."""
    return sorted(n.label for n in fleet.nodes if n.containers(name))


def volumes_on(fleet, name):
    """The labels of the nodes whose dockerd has gpubox volume name."""
    out = []
    for n in fleet.nodes:
        r = n.docker("GET", "/volumes")
        if any(v["Name"] == f"gpubox_{name}" for v in (r.json.get("Volumes") or [])):
            out.append(n.label)
    return out


def left_for(fleet, name, to, vol=None):
    """Wait until set name (and volume vol) is on node `to` alone: the node
    it left removes its old copy just after its answer (docs/fleet.md,
    "After the answer")."""
    wait_until(lambda: where(fleet, name) == [to]
               and (vol is None or volumes_on(fleet, vol) == [to]), timeout=30)


def node_of(d, name):
    sets = {s["name"]: s for s in d.get("/api/v1/replicaSet").data["replicaSets"]}
    return sets[name]["node"] if name in sets else None


def move(d, name, **body):
    return call(d, "POST", rs_path(name, "/move"), body)


@pytest.fixture
def made(nodes, fleet):
    """Names (sets, then volumes after a ':') a test made: purged after it."""
    names = []
    yield names
    for name in names:
        if name.startswith("vol:"):
            call(nodes["a"], "DELETE", "/api/v1/volumes/" + name[4:])
        else:
            delete(nodes["a"], name, purge=True)


def make_set_with_volume(nodes, made, name, vol, node="a"):
    made += [name, "vol:" + vol]
    r = call(nodes["b"], "POST", "/api/v1/volumes", {"name": vol, "size": "30MB", "node": node})
    assert r.status == 200, r.json
    r = create(nodes["c"], name, 1, node=node, binds=[{"src": vol, "dest": "/data"}],
               env=["MOVED_ENV=1"])
    assert r.status == 200, r.json
    execute_ok(nodes["a"], name, ["sh", "-c", WRITE])


def read_back(d, name):
    out = execute_ok(d, name, ["sh", "-c", READ])["stdout"].split()
    assert out[:7] == ["hello", "x", "f", "4755", "novi", "vol", "deep"], out
    assert out[7] == out[8], out  # the volume's 300 KB of random data came whole


def test_clients_cannot_call_the_nodes_routes(nodes):
    for method, path in [("POST", "/api/v1/internal/moves"),
                         ("GET", "/api/v1/internal/moves/x/data"),
                         ("POST", "/api/v1/internal/moves/x/commit")]:
        r = call(nodes["a"], method, path, {} if method == "POST" else None)
        assert (r.status, r.code) == (403, 1109), (path, r.json)


def test_a_stopped_set_moves_with_its_system_disk_and_volume(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mv1", "mvv1")
    before = info(nodes["a"], "mv1").data["info"]
    assert lifecycle(nodes["b"], "mv1", "stop").status == 200
    r = move(nodes["c"], "mv1", node="b")  # asked of a third node: forwarded to a
    assert r.status == 200, r.json
    assert r.data["from"] == "a" and r.data["to"] == "b" and r.data["state"] == "stopped"
    assert r.data["bytes"] > 300 * 1024 and r.data["operationId"]
    left_for(fleet, "mv1", "b", "mvv1")
    assert node_of(nodes["a"], "mv1") == "b"
    vols = {v["name"]: v for v in nodes["c"].get("/api/v1/volumes").data["volumes"]}
    assert vols["mvv1"]["node"] == "b"
    i = info(nodes["a"], "mv1").data["info"]
    assert i["state"] == "stopped" and i["version"] == before["version"] + 1
    assert i["spec"]["env"] == before["spec"]["env"]
    h = history(nodes["a"], "mv1").data["history"]
    assert [e["version"] for e in h] == [2, 1] and h[0]["reason"] == "move from a"
    # it starts there, with everything it had
    r = lifecycle(nodes["a"], "mv1", "restart")
    assert r.status == 200, r.json
    assert "T4" in str(nodes["b"].get("/api/v1/resources/gpus").data)
    read_back(nodes["a"], "mv1")


def test_a_running_set_runs_on_the_node_placement_picks(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mv2", "mvv2")
    r = move(nodes["a"], "mv2")
    assert r.status == 200, r.json
    to = r.data["to"]
    assert to in ("b", "c") and r.data["state"] == "running"
    left_for(fleet, "mv2", to, "mvv2")
    assert r.data["ports"] == [] and len(r.data["gpus"]) == 1
    i = info(nodes["b"], "mv2").data["info"]
    assert i["status"] == "running"
    read_back(nodes["b"], "mv2")


def test_a_paused_set_stays_paused(nodes, fleet, made):
    made.append("mv3")
    r = create(nodes["a"], "mv3", 1, node="a", ports=[{"containerPort": 80}])
    assert r.status == 200, r.json
    execute_ok(nodes["a"], "mv3", ["sh", "-c", "echo p > /root/p"])
    assert lifecycle(nodes["a"], "mv3", "pause").status == 200
    r = move(nodes["a"], "mv3", node="c")
    assert r.status == 200, r.json
    assert r.data["state"] == "paused" and len(r.data["ports"]) == 1
    left_for(fleet, "mv3", "c")
    assert lifecycle(nodes["a"], "mv3", "continue").status == 200
    out = execute_ok(nodes["a"], "mv3", ["cat", "/root/p"])["stdout"]
    assert out.strip() == "p"


def test_no_room_is_refused_before_anything_is_copied(nodes, fleet, made):
    made.append("mv4")
    r = create(nodes["a"], "mv4", 3, node="a")
    assert r.status == 200, r.json
    r = move(nodes["a"], "mv4", node="b")  # b has 2 cards
    assert (r.status, r.code) == (409, 1013), r.json
    assert where(fleet, "mv4") == ["a"]
    assert info(nodes["a"], "mv4").data["info"]["status"] == "running"
    r = move(nodes["a"], "mv4", node="a")
    assert r.status == 400, r.json


def test_a_volume_bound_by_another_set_is_refused(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mv5", "mvv5")
    made.insert(0, "mv5b")
    r = create(nodes["a"], "mv5b", 0, node="a", binds=[{"src": "mvv5", "dest": "/data"}])
    assert r.status == 200, r.json
    r = move(nodes["a"], "mv5", node="c")
    assert (r.status, r.code) == (409, 1107), r.json
    assert "mv5b" in r.msg
    assert where(fleet, "mv5") == ["a"] and volumes_on(fleet, "mvv5") == ["a"]



def test_sets_sharing_a_volume_move_together_when_asked(nodes, fleet, made):
    # mvs1 and mvs1b share mvsv1; mvs1b and mvs1c (stopped) share mvsv1x
    make_set_with_volume(nodes, made, "mvs1", "mvsv1")
    made[:0] = ["mvs1c", "mvs1b"]
    made.append("vol:mvsv1x")
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": "mvsv1x", "size": "20MB",
                                                     "node": "a"})
    assert r.status == 200, r.json
    r = create(nodes["a"], "mvs1b", 0, node="a", binds=[{"src": "mvsv1", "dest": "/data"},
                                                        {"src": "mvsv1x", "dest": "/x"}])
    assert r.status == 200, r.json
    execute_ok(nodes["a"], "mvs1b", ["sh", "-c", "echo sharer > /root/b && echo chain > /x/c"])
    r = create(nodes["a"], "mvs1c", 0, node="a", binds=[{"src": "mvsv1x", "dest": "/y"}])
    assert r.status == 200, r.json
    assert lifecycle(nodes["a"], "mvs1c", "stop").status == 200
    r = move(nodes["a"], "mvs1", node="c")
    assert (r.status, r.code) == (409, 1107), r.json
    assert "mvs1b" in r.msg and "withSharers" in r.msg, r.msg
    assert where(fleet, "mvs1") == ["a"] and volumes_on(fleet, "mvsv1") == ["a"]
    r = move(nodes["b"], "mvs1", node="c", withSharers=True)
    assert r.status == 200, r.json
    assert r.data["to"] == "c" and r.data["state"] == "running", r.data
    assert [s["name"] for s in r.data["sharers"]] == ["mvs1b", "mvs1c"], r.data
    assert [(s["to"], s["state"]) for s in r.data["sharers"]] == [("c", "running"),
                                                                  ("c", "stopped")]
    for name in ("mvs1", "mvs1b", "mvs1c"):
        assert where(fleet, name) == ["c"], name
        assert node_of(nodes["a"], name) == "c", name
    assert volumes_on(fleet, "mvsv1") == ["c"] and volumes_on(fleet, "mvsv1x") == ["c"]
    read_back(nodes["b"], "mvs1")
    out = execute_ok(nodes["b"], "mvs1b",
                     ["sh", "-c", "cat /root/b /data/v /x/c; md5sum /data/big | cut -c1-32"])
    out = out["stdout"].split()
    assert out[:3] == ["sharer", "vol", "chain"], out
    assert out[3] == execute_ok(nodes["b"], "mvs1", ["cat", "/root/big.md5"])["stdout"].strip()
    assert lifecycle(nodes["a"], "mvs1c", "restart").status == 200
    assert execute_ok(nodes["b"], "mvs1c", ["cat", "/y/c"])["stdout"].strip() == "chain"


def test_sets_sharing_a_volume_are_refused_when_the_target_cannot_hold_them_all(nodes, fleet,
                                                                               made):
    make_set_with_volume(nodes, made, "mvs2", "mvsv2")
    made.insert(0, "mvs2b")
    r = create(nodes["a"], "mvs2b", 2, node="a", binds=[{"src": "mvsv2", "dest": "/data"}])
    assert r.status == 200, r.json
    r = move(nodes["a"], "mvs2", node="b", withSharers=True)  # b has 2 cards, they need 3
    assert (r.status, r.code) == (409, 1013), r.json
    assert "mvs2b" in r.msg, r.msg
    assert where(fleet, "mvs2") == ["a"] and where(fleet, "mvs2b") == ["a"]
    assert volumes_on(fleet, "mvsv2") == ["a"]
    for name in ("mvs2", "mvs2b"):
        assert info(nodes["a"], name).data["info"]["status"] == "running"
    read_back(nodes["c"], "mvs2")
    # A group is moved at once or refused: it cannot wait in the queue.
    r = move(nodes["a"], "mvs2", node="b", withSharers=True, queue=True)
    assert (r.status, r.code) == (400, 1000), r.json
    assert "withSharers" in r.msg and "queue" in r.msg, r.msg
    assert where(fleet, "mvs2") == ["a"] and where(fleet, "mvs2b") == ["a"]



def test_sets_sharing_a_volume_move_on_after_an_answer_at_once(nodes, fleet, made):
    made += ["mvs3", "mvs3b", "vol:mvsv3"]
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": "mvsv3", "size": "20MB", "node": "a"})
    assert r.status == 200, r.json
    for name in ("mvs3", "mvs3b"):
        r = create(nodes["a"], name, 0, node="a", binds=[{"src": "mvsv3", "dest": "/data"}])
        assert r.status == 200, r.json
    execute_ok(nodes["a"], "mvs3b", ["sh", "-c", "echo w > /data/w"])
    r = move(nodes["a"], "mvs3", node="b", withSharers=True, wait=False)
    assert r.status == 200 and r.data["state"] == "moving", r.json
    wait_until(lambda: where(fleet, "mvs3") == ["b"] and where(fleet, "mvs3b") == ["b"]
               and volumes_on(fleet, "mvsv3") == ["b"]
               and info(nodes["c"], "mvs3b").data["info"]["status"] == "running", timeout=60)
    assert execute_ok(nodes["c"], "mvs3", ["cat", "/data/w"])["stdout"].strip() == "w"


def crash_move(nodes, fleet, side, fault, name, to):
    """Run a move with GPUBOX_FAULT=fault on node `side`, which exits there;
    restart it without the fault."""
    d = nodes[side]
    d.stop()
    d.env["GPUBOX_FAULT"] = fault
    d.restart()
    try:
        move(nodes["a"] if side != "a" else nodes["c"], name, node=to)
    finally:
        deadline = time.monotonic() + 60
        while d.proc.poll() is None:
            assert time.monotonic() < deadline, f"{d} did not stop at {fault}"
            time.sleep(0.2)
        d.proc.stdout.close()
        d.log_file.close()
        del d.env["GPUBOX_FAULT"]
        d.restart()


@pytest.mark.parametrize("fault,lands", [("move:copied", "a"), ("move:switched", "b"),
                                         ("move:committed", "b")])
def test_the_source_killed_at_a_step(nodes, fleet, made, fault, lands):
    name = "mvk" + fault.split(":")[1][:3]
    make_set_with_volume(nodes, made, name, name + "v")
    assert lifecycle(nodes["a"], name, "stop").status == 200
    crash_move(nodes, fleet, "a", fault, name, "b")
    wait_until(lambda: where(fleet, name) == [lands] and volumes_on(fleet, name + "v") == [lands],
               timeout=60)
    wait_until(lambda: node_of(nodes["c"], name) == lands, timeout=30)
    assert lifecycle(nodes["c"], name, "restart").status == 200
    read_back(nodes["c"], name)


@pytest.mark.parametrize("fault,lands", [("move-in:prepared", "a"), ("move-in:copied", "a"),
                                         ("move-in:committed", "b")])
def test_the_target_killed_at_a_step(nodes, fleet, made, fault, lands):
    name = "mvt" + fault.split(":")[1][:3]
    make_set_with_volume(nodes, made, name, name + "v")
    crash_move(nodes, fleet, "b", fault, name, "b")
    wait_until(lambda: where(fleet, name) == [lands] and volumes_on(fleet, name + "v") == [lands],
               timeout=60)
    wait_until(lambda: node_of(nodes["c"], name) == lands, timeout=30)
    wait_until(lambda: info(nodes["c"], name).data["info"]["status"] == "running", timeout=30)
    read_back(nodes["c"], name)


def cli(d, *args):
    """The gpubox CLI against node d (from the hub, as a user would)."""
    import os
    import subprocess
    e = dict(os.environ, GPUBOX_HOST=d.url)
    e.pop("GPUBOX_TOKEN", None)
    p = subprocess.run([os.environ.get("GPUBOX_CLI", "gpubox"), *args], capture_output=True,
                       text=True, env=e, timeout=180)
    assert "Sanitizer" not in p.stderr, p.stderr
    return p


def test_the_cli_moves_a_set(nodes, fleet, made):
    made.append("mvc1")
    r = create(nodes["a"], "mvc1", 0, node="a", ports=[{"containerPort": 22}])
    assert r.status == 200, r.json
    p = cli(nodes["b"], "move", "mvc1", "--node", "c")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout.startswith("mvc1: moved from a to c (version 2, running)"), p.stdout
    assert "ports 22->" in p.stdout, p.stdout
    left_for(fleet, "mvc1", "c")
    p = cli(nodes["b"], "move", "mvc1", "--node", "c")
    assert p.returncode != 0 and "already" in p.stderr, (p.stdout, p.stderr)


def test_the_cli_moves_sets_that_share_a_volume_with_sharers(nodes, fleet, made):
    made += ["mvc2", "mvc2b", "vol:mvcv2"]
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": "mvcv2", "size": "20MB", "node": "a"})
    assert r.status == 200, r.json
    for name in ("mvc2", "mvc2b"):
        r = create(nodes["a"], name, 0, node="a", binds=[{"src": "mvcv2", "dest": "/data"}])
        assert r.status == 200, r.json
    p = cli(nodes["b"], "move", "mvc2", "--node", "c")
    assert p.returncode != 0 and "--with-sharers" in p.stderr, (p.stdout, p.stderr)
    p = cli(nodes["b"], "move", "mvc2", "--node", "c", "--with-sharers")
    assert p.returncode == 0, (p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("mvc2: moved from a to c (version 2, running)"), p.stdout
    assert lines[1].startswith("mvc2b: moved from a to c (version 2, running)"), p.stdout
    assert where(fleet, "mvc2") == ["c"] and where(fleet, "mvc2b") == ["c"]
    assert volumes_on(fleet, "mvcv2") == ["c"]


def test_an_answer_at_once_then_progress_in_the_operation(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mva1", "mvav1")
    r = move(nodes["b"], "mva1", node="c", wait=False)
    assert r.status == 200, r.json
    assert r.data["state"] == "moving" and r.data["operationId"]
    op_path = "/api/v1/operations/" + r.data["operationId"]
    wait_until(lambda: call(nodes["b"], "GET", op_path).data["state"] == "done", timeout=60)
    op = call(nodes["b"], "GET", op_path).data
    assert op["kind"] == "move" and op["progress"]["bytes"] > 300 * 1024, op
    assert op["progress"]["bytesPerSecond"] > 0
    assert where(fleet, "mva1") == ["c"]
    read_back(nodes["a"], "mva1")


def test_a_restart_that_does_not_fit_moves_when_asked(nodes, fleet, made):
    made += ["mvr1", "mvr2"]
    assert create(nodes["a"], "mvr1", 2, node="b").status == 200
    assert lifecycle(nodes["a"], "mvr1", "stop").status == 200
    # the cards it gave back are taken meanwhile
    assert create(nodes["a"], "mvr2", 2, node="b").status == 200
    r = call(nodes["a"], "PATCH", rs_path("mvr1", "/restart"), {})
    assert (r.status, r.code) == (409, 1013), r.json
    r = call(nodes["c"], "PATCH", rs_path("mvr1", "/restart"), {"move": True})
    assert r.status == 200, r.json
    assert r.data["movedFrom"] == "b" and r.data["node"] in ("a", "c"), r.data
    left_for(fleet, "mvr1", r.data["node"])
    assert info(nodes["a"], "mvr1").data["info"]["status"] == "running"


def test_drain_moves_every_set_off_a_node(nodes, fleet, made):
    names = [f"mvd{i}" for i in range(5)]
    made += names
    for n in names:
        assert create(nodes["a"], n, 0, node="c").status == 200
    execute_ok(nodes["a"], "mvd0", ["sh", "-c", "echo kept > /root/k"])
    assert lifecycle(nodes["a"], "mvd1", "stop").status == 200
    assert lifecycle(nodes["a"], "mvd2", "pause").status == 200
    try:
        p = cli(nodes["a"], "node", "drain", "c")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "node c: 5 set(s) moved, 0 could not move" in p.stdout, p.stdout
        for n in names:
            wait_until(lambda: where(fleet, n) != ["c"] and len(where(fleet, n)) == 1, timeout=30)
        states = {n: info(nodes["b"], n).data["info"]["state"] for n in names}
        assert states == {"mvd0": "running", "mvd1": "stopped", "mvd2": "paused",
                          "mvd3": "running", "mvd4": "running"}
        out = execute_ok(nodes["b"], "mvd0", ["cat", "/root/k"])["stdout"]
        assert out.strip() == "kept"
        h = history(nodes["b"], "mvd0").data["history"]
        assert h[0]["reason"] == "move from c"
        nodes_ = {n["name"]: n for n in nodes["a"].get("/api/v1/nodes").data["nodes"]}
        assert nodes_["c"]["state"] == "cordoned"
    finally:
        assert call(nodes["a"], "PATCH", "/api/v1/nodes/c/uncordon").status == 200


def test_an_admin_abandons_the_half_of_a_move_whose_source_is_lost(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mvl1", "mvlv1")
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move:prepared"
    a.restart()
    try:
        move(nodes["c"], "mvl1", node="b")
        deadline = time.monotonic() + 60
        while a.proc.poll() is None:
            assert time.monotonic() < deadline, "a did not stop at move:prepared"
            time.sleep(0.2)
        a.proc.stdout.close()
        a.log_file.close()
        # a is gone; b keeps its half, waiting
        assert where(fleet, "mvl1") == ["a", "b"]
        time.sleep(4)
        assert where(fleet, "mvl1") == ["a", "b"]
        ops = [k for k in fleet.node("b").containers("mvl1")]
        assert len(ops) == 1
        wait_until(lambda: node_of(nodes["c"], "mvl1") == "a", timeout=30)
        op_id = None
        log = "".join(p.read_text(errors="replace") for p in nodes["b"].log_paths)
        for line in log.splitlines():
            if "mvl1 prepared here" in line:
                op_id = line.split("move ")[1].split(":")[0]
        assert op_id, log[-2000:]
        r = call(nodes["c"], "POST", f"/api/v1/operations/{op_id}/abandon")
        assert r.status == 200 and r.data["state"] == "undone", r.json
        assert where(fleet, "mvl1") == ["a"] and volumes_on(fleet, "mvlv1") == ["a"]
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        a.restart()
    wait_until(lambda: info(nodes["c"], "mvl1").data["info"]["status"] == "running", timeout=60)
    assert where(fleet, "mvl1") == ["a"]
    read_back(nodes["c"], "mvl1")


def test_a_stream_that_breaks_off_is_pulled_again(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mvx1", "mvxv1")
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_MOVE_CUT_AFTER"] = "200000"  # test hook: the first stream breaks off there
    a.restart()
    try:
        r = move(nodes["c"], "mvx1", node="b")
        assert r.status == 200, r.json
        log = "".join(p.read_text(errors="replace") for p in nodes["b"].log_paths)
        assert "broke off after" in log and "pulling it again (try 2 of 3)" in log, log[-3000:]
        left_for(fleet, "mvx1", "b", "mvxv1")
        read_back(nodes["c"], "mvx1")
    finally:
        a.stop()
        del a.env["GPUBOX_MOVE_CUT_AFTER"]
        a.restart()


@pytest.mark.parametrize("fault", ["move:begin", "move:pre-copied", "move:old-stopped"])
def test_a_running_set_runs_again_where_it_was_when_the_source_dies_early(nodes, fleet, made,
                                                                          fault):
    name = "mvr" + fault.split(":")[1][:3]
    make_set_with_volume(nodes, made, name, name + "v")
    crash_move(nodes, fleet, "a", fault, name, "b")
    wait_until(lambda: where(fleet, name) == ["a"] and volumes_on(fleet, name + "v") == ["a"],
               timeout=60)
    wait_until(lambda: info(nodes["c"], name).data["info"]["status"] == "running", timeout=60)
    read_back(nodes["c"], name)


def test_both_nodes_killed_after_the_hand_over(nodes, fleet, made):
    """The source dies right after the names moved, the target is killed
    then too, before it heard the commit; both start again: the set is on
    the target, once, running, its data whole."""
    make_set_with_volume(nodes, made, "mvbo", "mvbov")
    a, b = nodes["a"], nodes["b"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move:switched"
    a.restart()
    try:
        move(nodes["c"], "mvbo", node="b")
        deadline = time.monotonic() + 60
        while a.proc.poll() is None:
            assert time.monotonic() < deadline, "a did not stop at move:switched"
            time.sleep(0.2)
        a.proc.stdout.close()
        a.log_file.close()
        b.kill9()
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        if b.proc.poll() is not None:
            b.restart()
        a.restart()
    wait_until(lambda: where(fleet, "mvbo") == ["b"] and volumes_on(fleet, "mvbov") == ["b"],
               timeout=90)
    wait_until(lambda: info(nodes["c"], "mvbo").data["info"]["status"] == "running", timeout=60)
    assert node_of(nodes["c"], "mvbo") == "b"
    read_back(nodes["c"], "mvbo")


def op_of(d, name, text):
    """The id of the last move whose log line on d names set `name` and says text."""
    op_id = None
    log = "".join(p.read_text(errors="replace") for p in d.log_paths)
    for line in log.splitlines():
        if f": {name} " in line and text in line and "move " in line:
            op_id = line.split("move ")[1].split(":")[0]
    assert op_id, log[-2000:]
    return op_id


def make_random_set(nodes, made, name, vol, gpus):
    """A set on node a with GPUS cards binding a new 30MB volume VOL, which
    holds ten files of random data (auto does not compress them), 100 KB
    each, their md5s in /root/r.md5: a cut at a byte falls inside one."""
    made += [name, "vol:" + vol]
    r = call(nodes["b"], "POST", "/api/v1/volumes", {"name": vol, "size": "30MB", "node": "a"})
    assert r.status == 200, r.json
    r = create(nodes["c"], name, gpus, node="a", binds=[{"src": vol, "dest": "/data"}])
    assert r.status == 200, r.json
    execute_ok(nodes["a"], name, ["sh", "-c", "for i in 0 1 2 3 4 5 6 7 8 9; do dd if=/dev/urandom"
                                    " of=/data/r$i bs=1k count=100 2>/dev/null; done;"
                                    " md5sum /data/r* > /root/r.md5"])


@pytest.mark.parametrize("way", ["tree", "portable"])
def test_a_cut_stream_resumes_where_it_stopped(nodes, fleet, made, way):
    """A stopped set's stream cut part way is pulled again from the last
    whole entry the target extracted, not from its start: the source sends
    little more than the data once, and the answer says where it resumed.
    Both ways: the tree way's stream of the volume, the portable way's
    stream of everything through Docker's archive API."""
    name, vol = "mvx2" + way[0], "mvxv2" + way[0]
    make_random_set(nodes, made, name, vol, 1)
    assert lifecycle(nodes["a"], name, "stop").status == 200
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_MOVE_CUT_AFTER"] = "700000"  # the first stream breaks off there
    if way == "portable":
        a.env["GPUBOX_MOVE_WAY"] = "portable"  # test hook: not the tree way
    a.restart()
    try:
        r = move(nodes["c"], name, node="b")
        assert r.status == 200, r.json
        assert r.data["copy"]["way"] == way, r.data
        # Resumed well into the stream (what was in flight when it broke
        # off is lost, so not right at the cut) ...
        resumed = r.data["copy"]["resumed"]
        assert len(resumed) == 1 and resumed[0]["from"] >= 300000, r.data
        # ... so the source sent the data once plus what came after that
        # point before the cut; pulled again from the start it would have
        # sent it once plus all 700000 bytes.
        op = call(a, "GET", "/api/v1/operations/" + op_of(a, name, "to node b")).data
        data = 1024000
        assert data < op["progress"]["bytes"] < data + 450000, op
        log = "".join(p.read_text(errors="replace") for p in nodes["b"].log_paths)
        assert "broke off after" in log and "pulling it again (try 2 of 3) from byte" in log
    finally:
        a.stop()
        del a.env["GPUBOX_MOVE_CUT_AFTER"]
        a.env.pop("GPUBOX_MOVE_WAY", None)
        a.restart()
    left_for(fleet, name, "b", vol)
    assert lifecycle(nodes["c"], name, "restart").status == 200
    out = execute_ok(nodes["c"], name, ["sh", "-c", "md5sum /data/r* | cmp - /root/r.md5 && echo same"])
    assert out["stdout"].strip() == "same", out


def test_a_cut_pre_copy_resumes_where_it_stopped(nodes, fleet, made):
    """A running set's pre-copy cut part way is pulled again from the last
    whole entry, not from its start; what the target kept is checked again
    by the final stream (the snapshot dated back to the first try)."""
    name, vol = "mvpc1", "mvpcv1"
    make_random_set(nodes, made, name, vol, 0)
    # The files older than the second before the pre-copy began, which the
    # final stream checks again (a margin for the kernel's coarse clock).
    time.sleep(1.5)
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_MOVE_CUT_AFTER"] = "700000"  # the volume's pre-copy breaks off there
    a.restart()
    try:
        r = move(nodes["c"], name, node="b")
        assert r.status == 200, r.json
        pre = r.data["copy"]["preCopied"]
        assert r.data["copy"]["way"] == "tree" and len(pre["resumed"]) == 1, r.data
        assert pre["resumed"][0]["from"] >= 300000, r.data
        op = call(a, "GET", "/api/v1/operations/" + op_of(a, name, "to node b")).data
        assert 1024000 < op["progress"]["bytes"] < 1024000 + 450000, op
        log = "".join(p.read_text(errors="replace") for p in nodes["b"].log_paths)
        assert "pulling it again (try 2 of 3) from byte" in log
    finally:
        a.stop()
        del a.env["GPUBOX_MOVE_CUT_AFTER"]
        a.restart()
    wait_until(lambda: where(fleet, name) == ["b"] and volumes_on(fleet, vol) == ["b"],
               timeout=30)
    wait_until(lambda: info(nodes["c"], name).data["info"]["status"] == "running", timeout=30)
    out = execute_ok(nodes["c"], name, ["sh", "-c", "md5sum /data/r* | cmp - /root/r.md5 && echo same"])
    assert out["stdout"].strip() == "same", out


# A loop that keeps changing the system disk and the volume while the set
# runs: each turn makes file n, says n (renamed into place: never seen
# half written), and deletes file n-1.
CHURN = ("i=0; while true; do i=$((i+1)); echo $i > /root/n$i; echo $i > /data/n$i;"
         " echo $i > /root/count.new; mv /root/count.new /root/count;"
         " rm -f /root/n$((i-1)) /data/n$((i-1)); done")
# After the move (the loop is gone): every file but the newest two deleted,
# the newest named in /root/count there.
CHECK = ("c=$(cat /root/count); ls /root | grep '^n' | sort -n -k1.2 | tr '\\n' ' ';"
         " echo; ls /data | grep '^n' | tr '\\n' ' '; echo; echo $c")


def test_a_running_set_is_copied_first_then_only_what_changed(nodes, fleet, made):
    """Copied while it runs and then, stopped, only the difference: new
    files, changed ones and deletions made after the copy began land on the
    target exactly as they were when the set stopped."""
    make_set_with_volume(nodes, made, "mvp1", "mvpv1")
    d = nodes["a"]
    info_ = info(d, "mvp1").data["info"]
    container = info_["containerName"]
    node_a = fleet.node("a")
    r = node_a.docker("POST", f"/containers/{container}/exec",
                      {"Cmd": ["sh", "-c", CHURN], "AttachStdout": False})
    assert r.status == 201, r.json
    r = node_a.docker("POST", f"/exec/{r.json['Id']}/start", {"Detach": True})
    assert r.status == 200, r.json
    time.sleep(1)
    r = move(nodes["c"], "mvp1", node="b")
    assert r.status == 200, r.json
    copy = r.data["copy"]
    assert copy["way"] == "tree" and copy["preCopied"]["bytes"] > 300 * 1024, copy
    assert copy["bytes"] < copy["preCopied"]["bytes"] / 4, copy
    wait_until(lambda: info(nodes["c"], "mvp1").data["info"]["status"] == "running", timeout=30)
    out = execute_ok(nodes["c"], "mvp1", ["sh", "-c", CHECK])["stdout"].split("\n")
    count = int(out[2])
    root = [int(x[1:]) for x in out[0].split()]
    vol = [int(x[1:]) for x in out[1].split()]
    assert count > 50, out  # the loop ran on well past the copy's start
    assert root and all(count - 1 <= n <= count + 1 for n in root), out
    assert vol and all(count - 1 <= n <= count + 1 for n in vol), out
    read_back(nodes["c"], "mvp1")


def test_a_target_whose_disk_cannot_hold_it_refuses_before_copying(nodes, fleet, made):
    make_set_with_volume(nodes, made, "mvn1", "mvnv1")
    b = nodes["b"]
    b.stop()
    b.args += ["--move-disk-reserve", "900TB"]
    b.restart()
    try:
        r = move(nodes["c"], "mvn1", node="b")
        assert (r.status, r.code) == (507, 1185), r.json
        assert "node b cannot hold the set" in r.msg and "bytes" in r.msg, r.msg
        assert "--move-disk-reserve" in r.msg, r.msg
        assert r.json["data"]["neededBytes"] > 300 * 1024, r.json
        assert where(fleet, "mvn1") == ["a"] and volumes_on(fleet, "mvnv1") == ["a"]
        assert info(nodes["c"], "mvn1").data["info"]["status"] == "running"
    finally:
        b.stop()
        b.args = b.args[:-2]
        b.restart()
    read_back(nodes["c"], "mvn1")


# ---- a group of sets sharing volumes, moved on after a crash or a failure ----------------


def make_group(nodes, made, p):
    """Three sets chained through two volumes, on node a: p binds pv (the
    system disk and volume data of WRITE, running); pb binds pv and px
    (running); pc binds px (stopped)."""
    make_set_with_volume(nodes, made, p, p + "v")
    made[:0] = [p + "c", p + "b"]
    made.append("vol:" + p + "x")
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": p + "x", "size": "20MB", "node": "a"})
    assert r.status == 200, r.json
    r = create(nodes["a"], p + "b", 0, node="a", binds=[{"src": p + "v", "dest": "/data"},
                                                        {"src": p + "x", "dest": "/x"}])
    assert r.status == 200, r.json
    execute_ok(nodes["a"], p + "b", ["sh", "-c", "echo sharer > /root/b && echo chain > /x/c"])
    r = create(nodes["a"], p + "c", 0, node="a", binds=[{"src": p + "x", "dest": "/y"}])
    assert r.status == 200, r.json
    assert lifecycle(nodes["a"], p + "c", "stop").status == 200


def group_on(nodes, fleet, p, to):
    """Every set of make_group's group on node `to` alone, with both volumes."""
    return (all(where(fleet, n) == [to] for n in (p, p + "b", p + "c"))
            and volumes_on(fleet, p + "v") == [to] and volumes_on(fleet, p + "x") == [to]
            and all(node_of(nodes["c"], n) == to for n in (p, p + "b", p + "c")))


def check_group(nodes, fleet, p, to, op_id=None):
    """The group on `to`, each set once, as it was: the running ones running,
    the stopped one stopped, the shared volumes' data whole (md5)."""
    wait_until(lambda: group_on(nodes, fleet, p, to), timeout=150)
    wait_until(lambda: all(info(nodes["c"], n).data["info"]["status"] == "running"
                           for n in (p, p + "b")), timeout=60)
    assert info(nodes["c"], p + "c").data["info"]["state"] == "stopped"
    for n in (p, p + "b", p + "c"):
        assert len(fleet.node(to).containers(n)) == 1, n
        assert all(not fleet.node(o).containers(n) for o in ("a", "b", "c") if o != to), n
    vols = {v["name"]: v for v in nodes["c"].get("/api/v1/volumes").data["volumes"]}
    assert vols[p + "v"]["node"] == to and vols[p + "x"]["node"] == to, vols
    read_back(nodes["c"], p)
    out = execute_ok(nodes["c"], p + "b",
                     ["sh", "-c", "cat /root/b /data/v /x/c; md5sum /data/big | cut -c1-32"])
    out = out["stdout"].split()
    assert out[:3] == ["sharer", "vol", "chain"], out
    assert out[3] == execute_ok(nodes["c"], p, ["cat", "/root/big.md5"])["stdout"].strip()
    assert lifecycle(nodes["c"], p + "c", "restart").status == 200
    assert execute_ok(nodes["c"], p + "c", ["cat", "/y/c"])["stdout"].strip() == "chain"
    if op_id:
        op = call(nodes["a"], "GET", "/api/v1/operations/" + op_id).data
        assert op["kind"] == "move-group" and op["state"] == "done", op


def wait_exit(d, what):
    deadline = time.monotonic() + 60
    while d.proc.poll() is None:
        assert time.monotonic() < deadline, f"{d} did not stop at {what}"
        time.sleep(0.2)
    d.proc.stdout.close()
    d.log_file.close()


def group_op(d, p):
    """The id of the group operation d's log names for the move of p."""
    log = "".join(x.read_text(errors="replace") for x in d.log_paths)
    ids = [line.split("move group ")[1].split(":")[0] for line in log.splitlines()
           if "move group " in line and f": {p} to node" in line]
    assert ids, log[-2000:]
    return ids[-1]


def test_a_group_moves_on_when_the_source_dies_between_two_sets(nodes, fleet, made):
    """kill -9 of the source right after the first set of three moved: at
    its start it moves the other two on, with the shared volume as moved."""
    make_group(nodes, made, "mvg1")
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move-group:first-moved"
    a.restart()
    try:
        r = move(nodes["c"], "mvg1", node="b", withSharers=True)  # forwarded to a, which dies
        assert r.status != 200, r.json
        wait_exit(a, "move-group:first-moved")
        # the first set is on b, the others still on a, stopped
        assert where(fleet, "mvg1") == ["b"] and where(fleet, "mvg1b") == ["a"]
        assert where(fleet, "mvg1c") == ["a"] and volumes_on(fleet, "mvg1x") == ["a"]
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        a.restart()
    check_group(nodes, fleet, "mvg1", "b", group_op(a, "mvg1"))
    log = "".join(x.read_text(errors="replace") for x in a.log_paths[-1:])
    assert "mvg1b: started" not in log, log[-3000:]  # never started on a again


def test_a_group_moves_on_when_the_target_dies_between_two_sets(nodes, fleet, made):
    """The target dies as it takes the first set of three (kill -9 right
    after its commit): the source's answer says what moved and that the rest
    follows; once the target is back, the source moves the others there."""
    make_group(nodes, made, "mvg2")
    b = nodes["b"]
    b.stop()
    b.env["GPUBOX_FAULT"] = "move-in:committed"
    b.restart()
    try:
        r = move(nodes["c"], "mvg2", node="b", withSharers=True)
        assert r.status != 200, r.json
        assert "mvg2 moved to node b; mvg2b, mvg2c did not yet" in r.msg, r.msg
        assert "moves them there by itself" in r.msg, r.msg
        d = r.json["data"]
        assert d["moved"] == ["mvg2"] and d["notMoved"] == ["mvg2b", "mvg2c"], d
        op_id = d["groupOperationId"]
        wait_exit(b, "move-in:committed")
        assert where(fleet, "mvg2b") == ["a"] and where(fleet, "mvg2c") == ["a"]
    finally:
        b.env.pop("GPUBOX_FAULT", None)
        b.restart()
    check_group(nodes, fleet, "mvg2", "b", op_id)


def test_a_group_that_moved_in_part_is_moved_on_by_itself(nodes, fleet, made):
    """The target refuses the group's second set (a test hook): the CLI says
    what moved, what did not and that it follows by itself; the sets left
    wait on the source, stopped; once the target takes them, they move."""
    make_group(nodes, made, "mvg3")
    b = nodes["b"]
    b.stop()
    b.env["GPUBOX_MOVE_REFUSE"] = "mvg3b"  # test hook: b refuses that set
    b.restart()
    try:
        p = cli(nodes["c"], "move", "mvg3", "--node", "b", "--with-sharers")
        assert p.returncode != 0, (p.stdout, p.stderr)
        assert "mvg3 moved to node b; mvg3b, mvg3c did not yet" in p.stderr, p.stderr
        assert "node a moves them there by itself" in p.stderr, p.stderr
        assert "GPUBOX_MOVE_REFUSE" in p.stderr, p.stderr  # why
        op_id = p.stderr.split("(operation ")[1].split(";")[0]
        assert where(fleet, "mvg3") == ["b"] and volumes_on(fleet, "mvg3v") == ["a", "b"]
        op = call(nodes["a"], "GET", "/api/v1/operations/" + op_id).data
        assert op["kind"] == "move-group" and op["state"] == "running", op
        assert "GPUBOX_MOVE_REFUSE" in op["data"]["lastError"], op
        # a move of one of them alone says that it follows its group by itself
        p = cli(nodes["c"], "move", "mvg3b", "--node", "b")
        assert p.returncode != 0, (p.stdout, p.stderr)
        assert "waits to follow the sets it shares a volume with to node b" in p.stderr, p.stderr
        assert op_id in p.stderr and "by itself" in p.stderr, p.stderr
        # nor may it start or change here: it would write this node's old
        # copy of the volume, which its group leaves behind
        for action in ("restart", "continue"):
            r = lifecycle(nodes["c"], "mvg3b", action)
            assert (r.status, r.code) == (409, 1107), (action, r.json)
            assert "waits to follow" in r.json["msg"], r.json
        r = call(nodes["c"], "PATCH", rs_path("mvg3c"), {"envPatch": {"set": ["X=1"]}})
        assert (r.status, r.code) == (409, 1107), r.json
        time.sleep(7)  # tried again, refused again: they wait on a, stopped
        for n in ("mvg3b", "mvg3c"):
            assert where(fleet, n) == ["a"], n
            assert info(nodes["c"], n).data["info"]["status"] != "running", n
    finally:
        b.stop()
        b.env.pop("GPUBOX_MOVE_REFUSE", None)
        b.restart()
    check_group(nodes, fleet, "mvg3", "b", op_id)


def test_a_group_whose_waiting_sets_are_deleted_leaves_no_copy_behind(nodes, fleet, made):
    """The target refuses the group's second set; both sets left waiting on
    the source are deleted there. The group ends without them, and the
    source's copy of the volume the first set took along (kept for the
    second, its last binder here) goes too; the volume only the deleted
    sets bound, never moved, stays the source's."""
    make_group(nodes, made, "mvg6")
    b = nodes["b"]
    b.stop()
    b.env["GPUBOX_MOVE_REFUSE"] = "mvg6b"  # test hook: b refuses that set
    b.restart()
    try:
        r = move(nodes["c"], "mvg6", node="b", withSharers=True)
        assert r.status != 200, r.json
        op_id = r.json["data"]["groupOperationId"]
        assert volumes_on(fleet, "mvg6v") == ["a", "b"]
        for n in ("mvg6b", "mvg6c"):
            assert delete(nodes["c"], n).status == 200, n
    finally:
        b.stop()
        b.env.pop("GPUBOX_MOVE_REFUSE", None)
        b.restart()
    wait_until(lambda: call(nodes["c"], "GET", "/api/v1/operations/" + op_id).data["state"]
               == "done", timeout=90)
    assert where(fleet, "mvg6") == ["b"]
    assert volumes_on(fleet, "mvg6v") == ["b"] and volumes_on(fleet, "mvg6x") == ["a"]
    read_back(nodes["c"], "mvg6")


def test_a_group_moves_on_when_both_nodes_die_between_two_sets(nodes, fleet, made):
    """The source dies right after the first set of three moved and the
    target is killed then too; both start again: the group ends on the
    target, each set once, its data whole."""
    make_group(nodes, made, "mvg4")
    a, b = nodes["a"], nodes["b"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move-group:first-moved"
    a.restart()
    try:
        move(nodes["c"], "mvg4", node="b", withSharers=True)
        wait_exit(a, "move-group:first-moved")
        b.kill9()
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        if b.proc.poll() is not None:
            b.restart()
        a.restart()
    check_group(nodes, fleet, "mvg4", "b", group_op(a, "mvg4"))


def test_a_group_stays_when_the_source_dies_before_its_first_set_moved(nodes, fleet, made):
    """kill -9 of the source in the first set's move, before its point of
    no return: the group is undone, every set stays on the source once, the
    ones that ran run again (the one stopped for the group too)."""
    make_group(nodes, made, "mvg5")
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move:copied"
    a.restart()
    try:
        move(nodes["c"], "mvg5", node="b", withSharers=True)
        wait_exit(a, "move:copied")
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        a.restart()
    op_id = group_op(a, "mvg5")
    wait_until(lambda: call(nodes["c"], "GET", "/api/v1/operations/" + op_id).data["state"]
               == "undone", timeout=60)
    wait_until(lambda: group_on(nodes, fleet, "mvg5", "a"), timeout=60)
    wait_until(lambda: all(info(nodes["c"], n).data["info"]["status"] == "running"
                           for n in ("mvg5", "mvg5b")), timeout=60)
    assert info(nodes["c"], "mvg5c").data["info"]["state"] == "stopped"
    read_back(nodes["c"], "mvg5")
    out = execute_ok(nodes["c"], "mvg5b", ["sh", "-c", "cat /root/b /data/v /x/c"])["stdout"]
    assert out.split() == ["sharer", "vol", "chain"], out
# ---- after the answer: the source removes its copy in the background ----------

def cards_held_on(d, label):
    """How many cards of node `label` the merged GPU list shows held."""
    held = gpu_map(d)
    return sum(1 for x in gpu_devices(d) if x["node"] == label and held.get(x["uuid"]))


def listed(d, name):
    """The nodes the merged list shows set name on (once each time listed)."""
    return [s["node"] for s in d.get("/api/v1/replicaSet").data["replicaSets"]
            if s["name"] == name]


def with_env(d, **env):
    """Restart node d with env added (None: removed)."""
    d.stop()
    for k, v in env.items():
        if v is None:
            d.env.pop(k, None)
        else:
            d.env[k] = v
    d.restart()


def test_the_source_answers_before_it_removes_its_copy(nodes, fleet, made):
    """The answer comes once the target committed: the source's old
    container and volume go afterwards (held here by a test hook), and
    meanwhile the set is listed once, on the target, and the source's card
    shows free (its container stopped before the copy)."""
    make_set_with_volume(nodes, made, "mva1", "mvav1")
    a = nodes["a"]
    with_env(a, GPUBOX_MOVE_CLEANUP_DELAY_MS="8000")  # test hook
    try:
        held = cards_held_on(nodes["c"], "a")
        r = move(nodes["c"], "mva1", node="b")
        assert r.status == 200 and r.data["to"] == "b", r.json
        # answered with the old copy still there: container and volume on a
        assert where(fleet, "mva1") == ["a", "b"], where(fleet, "mva1")
        assert volumes_on(fleet, "mvav1") == ["a", "b"]
        assert listed(nodes["c"], "mva1") == ["b"]
        assert [v["node"] for v in nodes["c"].get("/api/v1/volumes").data["volumes"]
                if v["name"] == "mvav1"] == ["b"]
        assert cards_held_on(nodes["c"], "a") == held - 1
        wait_until(lambda: where(fleet, "mva1") == ["b"] and volumes_on(fleet, "mvav1") == ["b"],
                   timeout=30)
        op_id = r.data["operationId"]
        wait_until(lambda: call(a, "GET", "/api/v1/operations/" + op_id)
                   .data["state"] == "done", timeout=30)
        # its log says why the old copy goes now, not as a crash's leftover
        log = "".join(p.read_text(errors="replace") for p in a.log_paths)
        assert f"operation {op_id} (move of mva1): answered; removing the old copy here" in log
        assert f"operation {op_id} (move of mva1) did not finish" not in log
    finally:
        with_env(a, GPUBOX_MOVE_CLEANUP_DELAY_MS=None)
    assert cards_held_on(nodes["c"], "a") == held - 1
    wait_until(lambda: info(nodes["c"], "mva1").data["info"]["status"] == "running", timeout=30)
    read_back(nodes["c"], "mva1")


def test_a_set_moved_back_while_the_source_still_removes_it(nodes, fleet, made):
    """Moved a to b, then at once back to a while a has not yet removed its
    old copy: a finishes that first, then takes the set; it runs on a once,
    holding one card, and the late cleanup takes nothing of the new one."""
    make_set_with_volume(nodes, made, "mvb1", "mvbv1")
    a = nodes["a"]
    held = cards_held_on(nodes["c"], "a")
    with_env(a, GPUBOX_MOVE_CLEANUP_DELAY_MS="6000")  # test hook
    try:
        r = move(nodes["c"], "mvb1", node="b")
        assert r.status == 200, r.json
        assert where(fleet, "mvb1") == ["a", "b"]  # the old copy still on a
        r = move(nodes["c"], "mvb1", node="a")
        assert r.status == 200 and r.data["to"] == "a", r.json
        # b removes its copy after its answer in turn
        wait_until(lambda: where(fleet, "mvb1") == ["a"] and volumes_on(fleet, "mvbv1") == ["a"],
                   timeout=30)
        assert listed(nodes["c"], "mvb1") == ["a"]
        assert cards_held_on(nodes["c"], "a") == held
        time.sleep(7)  # past the hook's delay: nothing left for the late cleanup
        assert where(fleet, "mvb1") == ["a"] and volumes_on(fleet, "mvbv1") == ["a"]
        assert cards_held_on(nodes["c"], "a") == held
        assert info(nodes["c"], "mvb1").data["info"]["status"] == "running"
    finally:
        with_env(a, GPUBOX_MOVE_CLEANUP_DELAY_MS=None)
    # after a restart the pools, rebuilt from the records, agree
    assert cards_held_on(nodes["c"], "a") == held
    read_back(nodes["c"], "mvb1")


def test_the_source_killed_after_its_answer_while_removing_its_copy(nodes, fleet, made):
    """kill at the source between its answer and the end of its cleanup
    (old container removed, volume not yet): started again it removes the
    rest; nothing of the set stays on it."""
    make_set_with_volume(nodes, made, "mvk1", "mvkv1")
    a = nodes["a"]
    a.stop()
    a.env["GPUBOX_FAULT"] = "move:old-container-removed"
    a.restart()
    try:
        r = move(nodes["c"], "mvk1", node="b")
        assert r.status == 200 and r.data["to"] == "b", r.json
        deadline = time.monotonic() + 60
        while a.proc.poll() is None:
            assert time.monotonic() < deadline, "a did not stop in its cleanup"
            time.sleep(0.2)
        a.proc.stdout.close()
        a.log_file.close()
    finally:
        a.env.pop("GPUBOX_FAULT", None)
        if a.proc.poll() is not None:
            a.restart()
    wait_until(lambda: where(fleet, "mvk1") == ["b"] and volumes_on(fleet, "mvkv1") == ["b"],
               timeout=60)
    assert listed(nodes["c"], "mvk1") == ["b"]
    wait_until(lambda: call(a, "GET", "/api/v1/operations/" + r.data["operationId"])
               .data["state"] == "done", timeout=30)
    wait_until(lambda: info(nodes["c"], "mvk1").data["info"]["status"] == "running", timeout=30)
    read_back(nodes["c"], "mvk1")
