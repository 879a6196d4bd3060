"""Every create field through a node that does not take the set (issue 26,
item 3: a create request is parsed once).

A create sent to node a and pinned to node b (`node`, or a `nodeSelector`
only b's labels match) must run on b with each field it carried. Before one
parser read every create body, the fleet's placement checked the body
against its own list of fields, which lacked the run limits: a create with
`idleStop` or `maxDuration` was made on a, whatever it was pinned to.
"""
import pytest

from rsutil import IMAGE, LONG_RUNNING, call, create, delete, info, wait_until

PREFIX = "/fleetfields"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJmI0wOTBqfIrdPnG3HHWiF8A6jD5s3x0xPEJjjLi0dK t@x"
CPU_ARGS = ("--simulate-cpus", "2x8x2", "--reserved-cpus", "0,16")


def states(d):
    r = d.get("/api/v1/nodes")
    assert r.status == 200, (r.status, r.json)
    return {n["name"]: n["state"] for n in r.data["nodes"]}


def where(fleet, name):
    """The labels of the nodes whose dockerd holds a container of set name."""
    return sorted(n.label for n in fleet.nodes if n.containers(name))


@pytest.fixture(scope="module")
def nodes(start_node_module, fleet, etcd_cluster):
    ds = {n.label: start_node_module(n, "--node-labels", f"zone=z{n.label}", *CPU_ARGS,
                                     store=etcd_cluster.url(PREFIX), fleet_flags=True)
          for n in fleet.nodes}
    wait_until(lambda: all(states(d) == {"a": "ready", "b": "ready", "c": "ready"}
                           for d in ds.values()), timeout=30)
    return ds


@pytest.fixture
def clean(nodes, fleet):
    made = []
    yield made
    for name in made:
        delete(nodes["a"], name, purge=True)
    for name in made:
        assert where(fleet, name) == [], name


def spec_of(d, name):
    r = info(d, name)
    assert r.status == 200, (r.status, r.json)
    return r.data["info"]


@pytest.mark.parametrize("field,value", [("maxDuration", "2h"), ("idleStop", "30m")])
def test_a_create_with_run_limits_runs_on_the_pinned_node(nodes, fleet, clean, field, value):
    name = f"lim{field.lower()}"
    clean.append(name)
    r = create(nodes["a"], name, 1, node="b", **{field: value})
    assert r.status == 200, r.json
    assert where(fleet, name) == ["b"]
    assert spec_of(nodes["c"], name)[field] == value


# (name, extra body fields, check on GET's info)
CASES = [
    ("gpucount", {"gpuCount": 2}, lambda i: len(i["gpus"]) == 2),
    ("gpumemory", {"gpuMemory": "4GB"},
     lambda i: i["spec"]["gpuMemory"] == 4096 and len(i["gpuShares"]) == 1),
    ("env", {"env": ["FIELD_TEST=yes"]}, lambda i: "FIELD_TEST=yes" in i["spec"]["env"]),
    ("cmd", {"cmd": ["sleep", "3599"]}, lambda i: i["spec"]["cmd"] == ["sleep", "3599"]),
    ("containerports", {"containerPorts": ["8080"]},
     lambda i: "8080/tcp" in i["spec"]["containerPorts"]),
    ("ports", {"ports": [{"containerPort": 81}]},
     lambda i: any(p["containerPort"] == 81 for p in i["ports"])),
    ("cpucount", {"cpuCount": 1}, lambda i: i["spec"]["cpuCount"] == 1),
    ("memory", {"memory": "256MB"}, lambda i: i["spec"]["memory"] == 256 * 1024 * 1024),
    ("shmsize", {"shmSize": "64MB"}, lambda i: i["spec"]["shmSize"] == 64 * 1024 * 1024),
    ("labels", {"labels": {"team": "fields"}}, lambda i: i["spec"]["labels"] == {"team": "fields"}),
    ("restart", {"restartPolicy": "unless-stopped"},
     lambda i: i["spec"]["restartPolicy"] == "unless-stopped"),
    ("sshkeys", {"sshKeys": [SSH_KEY]}, lambda i: i["spec"]["sshKeys"] == [SSH_KEY]),
    ("pull", {"pull": "never"}, lambda i: i["state"] == "running"),
    ("maxduration", {"maxDuration": "3h"}, lambda i: i["maxDuration"] == "3h"),
    ("idlestop", {"idleStop": "45m"}, lambda i: i["idleStop"] == "45m"),
    ("gpumodel", {"gpuModel": "T4"}, lambda i: i["spec"]["gpuModel"] == "T4"),
]


@pytest.mark.parametrize("suffix,fields,check", CASES, ids=[c[0] for c in CASES])
def test_each_create_field_arrives_through_another_node(nodes, fleet, clean, suffix, fields,
                                                        check):
    name = f"fld{suffix}"
    clean.append(name)
    body = {"gpuCount": 1, **fields}
    gpus = body.pop("gpuCount")
    r = create(nodes["a"], name, gpus, node="b", **body)
    assert r.status == 200, r.json
    assert where(fleet, name) == ["b"]
    got = spec_of(nodes["c"], name)
    assert check(got), got


def test_node_selector_pins_like_node(nodes, fleet, clean):
    clean.append("fldselector")
    r = create(nodes["a"], "fldselector", 1, nodeSelector={"zone": "zb"}, maxDuration="1h")
    assert r.status == 200, r.json
    assert where(fleet, "fldselector") == ["b"]
    assert spec_of(nodes["c"], "fldselector")["maxDuration"] == "1h"


def test_a_bind_of_a_volume_on_the_pinned_node(nodes, fleet, clean):
    r = call(nodes["a"], "POST", "/api/v1/volumes", {"name": "fldvol", "size": "20MB", "node": "b"})
    assert r.status == 200, r.json
    try:
        clean.append("fldbind")
        r = create(nodes["a"], "fldbind", 1, node="b", idleStop="1h",
                   binds=[{"src": "fldvol", "dest": "/data"}])
        assert r.status == 200, r.json
        assert where(fleet, "fldbind") == ["b"]
        got = spec_of(nodes["c"], "fldbind")
        assert [b["src"] for b in got["spec"]["binds"]] == ["fldvol"], got
        assert got["idleStop"] == "1h"
        delete(nodes["a"], "fldbind", purge=True)
    finally:
        call(nodes["a"], "DELETE", "/api/v1/volumes/fldvol")


def test_pull_never_is_honoured_on_the_pinned_node(nodes, fleet, clean):
    clean.append("fldnopull")
    r = create(nodes["a"], "fldnopull", 1, node="b", pull="never",
               imageName="gpubox-no-such-image:1")
    assert r.status != 200, r.json
    assert "pulling it failed" not in r.msg, r.msg
    assert where(fleet, "fldnopull") == []


def test_the_older_create_through_another_node(nodes, fleet, clean):
    # gpu-docker-api's body: containerName, Ports with ports as strings;
    # one card goes to b by binpack (the fewest cards left), not to a.
    clean.append("fldold")
    body = {"imageName": IMAGE, "containerName": "fldold", "gpuCount": 1,
            "env": ["OLD=1"], "cmd": LONG_RUNNING,
            "Ports": [{"containerPort": "8888"}]}
    r = call(nodes["a"], "POST", "/api/v1/containers", body)
    assert r.status == 200, r.json
    assert where(fleet, "fldold") == ["b"]
    got = spec_of(nodes["c"], "fldold")
    assert "OLD=1" in got["spec"]["env"], got
    assert any(p["containerPort"] == 8888 for p in got["ports"]), got
