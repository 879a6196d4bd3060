"""gpu-docker-api's older route family (issue 3, point 7): POST /containers,
PATCH /containers/{name}/stop, DELETE /containers/{name}, POST
/containers/{name}/commit and /execute, mapped onto the same replica sets
as /replicaSet. {name} may be the set ("foo") or its container ("foo-1").
"""
import json
import urllib.parse

import pytest

from rsutil import RUN_TAG

from rsutil import (IMAGE, LONG_RUNNING, assert_refused_unchanged, call, container, create_ok,
                    env_of, execute, execute_ok, held_gpus, history, image, info_ok, module_daemon,
                    remove_image, used_ports, wipe)

PREFIX = "e2lg" + RUN_TAG
PORT_START, PORT_END = 61100, 61149


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def path(name, tail=""):
    return f"/api/v1/containers/{urllib.parse.quote(name, safe='')}{tail}"


def legacy_create(d, name, **fields):
    body = {"imageName": IMAGE, "containerName": name, "gpuCount": 1, "binds": [],
            "env": ["CONTAINER_VERSION=1"], "cmd": LONG_RUNNING}
    body.update(fields)
    return call(d, "POST", "/api/v1/containers", body)


def test_create_with_ports_like_the_sample_document(d):
    name = f"{PREFIX}_sample"
    r = legacy_create(d, name, Ports=[{"hostPort": PORT_START + 3, "containerPort": 22},
                                      {"hostPort": str(PORT_START + 4), "containerPort": "80"}])
    assert r.status == 200 and r.code == 200, r.json
    assert r.data["containerName"] == f"{name}-1"
    got = {(p["hostPort"], p["containerPort"]) for p in r.data["ports"]}
    assert got == {(PORT_START + 3, 22), (PORT_START + 4, 80)}

    c = container(f"{name}-1")
    assert c["Config"]["Labels"]["gpubox.replicaset"] == name
    assert c["HostConfig"]["PortBindings"]["22/tcp"][0]["HostPort"] == str(PORT_START + 3)
    assert c["HostConfig"]["PortBindings"]["80/tcp"][0]["HostPort"] == str(PORT_START + 4)
    env = env_of(d, name)
    assert env["CONTAINER_VERSION"] == "1"
    assert env["NVIDIA_VISIBLE_DEVICES"] == r.data["gpus"][0]

    # The same set through the new routes and the older GPU map.
    i = info_ok(d, name)
    assert i["state"] == "running" and i["gpus"] == r.data["gpus"]
    assert d.get("/api/v1/gpus").data["gpuStatus"][r.data["gpus"][0]] == 1


def test_create_with_container_ports_allocates(d):
    name = f"{PREFIX}_alloc"
    r = legacy_create(d, name, containerPorts=["22"], Ports=[{"containerPort": 8888}])
    assert r.status == 200, r.json
    ports = {p["containerPort"]: p["hostPort"] for p in r.data["ports"]}
    assert set(ports) == {22, 8888}
    assert all(PORT_START <= h <= PORT_END for h in ports.values())
    assert sorted(used_ports(d)) == sorted(ports.values())


def test_create_name_taken_by_a_replicaset_is_1008(d):
    name = f"{PREFIX}_taken"
    create_ok(d, name, gpus=1)
    r = legacy_create(d, name)
    assert r.status == 409 and r.code == 1008, r.json


@pytest.mark.parametrize("name", ["plain", "versioned"])
def test_stop_execute_commit_delete_by_either_name(d, name):
    rs = f"{PREFIX}_{name}"
    ref = rs if name == "plain" else f"{rs}-1"
    created = legacy_create(d, rs, Ports=[{"containerPort": 22}])
    assert created.status == 200, created.json

    r = call(d, "POST", path(ref, "/execute"), {"cmd": ["sh", "-c", "echo hi > /root/f; pwd"],
                                               "workDir": "/root"})
    assert r.status == 200, r.json
    assert r.data["stdout"] == "/root\n" and r.data["exitCode"] == 0

    target = f"gpubox-e2e-lg-{name}:v1"
    try:
        r = call(d, "POST", path(ref, "/commit"), {"newImageName": target})
        assert r.status == 200, r.json
        assert image(target) is not None
    finally:
        remove_image(target)

    r = call(d, "PATCH", path(ref, "/stop"))
    assert r.status == 200, r.json
    assert info_ok(d, rs)["state"] == "stopped"
    assert container(f"{rs}-1")["State"]["Running"] is False
    assert held_gpus(d) == set() and used_ports(d) == []
    r = call(d, "PATCH", path(ref, "/stop"))
    assert r.status == 409 and r.code == 1107, r.json

    r = call(d, "DELETE", path(ref))
    assert r.status == 200, r.json
    assert container(f"{rs}-1") is None
    assert history(d, rs).status == 200, "a delete without delEtcdInfoAndVersionRecord keeps it"


def test_a_version_that_is_not_the_current_container_is_404(d):
    """foo-7 names a container that does not exist while foo runs as foo-1:
    acting on foo-1 instead (deleting it!) is not what the caller asked."""
    name = f"{PREFIX}_stale"
    assert legacy_create(d, name, gpuCount=2).status == 200
    for method, tail, body in (("DELETE", "", None), ("PATCH", "/stop", None),
                               ("POST", "/execute", {"cmd": ["true"]})):
        r = call(d, method, path(f"{name}-7", tail), body)
        assert r.status == 404 and r.code == 1100, (method, tail, r.json)
        assert f"{name}-7" in r.msg
    assert info_ok(d, name)["state"] == "running"
    assert container(f"{name}-1")["State"]["Running"] is True
    assert len(held_gpus(d)) == 2


def test_delete_with_del_etcd_info_purges(d):
    name = f"{PREFIX}_purge"
    assert legacy_create(d, name, gpuCount=2).status == 200
    r = call(d, "DELETE", path(f"{name}-1"), {"force": True, "delEtcdInfoAndVersionRecord": True})
    assert r.status == 200, r.json
    assert r.data["purged"] is True
    assert history(d, name).status == 404
    assert held_gpus(d) == set()
    r = legacy_create(d, name)
    assert r.status == 200 and r.data["containerName"] == f"{name}-1", r.json


def test_stop_with_restore_flags(d):
    name = f"{PREFIX}_restore"
    assert legacy_create(d, name).status == 200
    r = call(d, "PATCH", path(name, "/stop"), {"restoreGpus": False})
    assert r.status == 400 and r.code == 1000, r.json
    assert "pause" in r.msg
    assert info_ok(d, name)["state"] == "running"
    r = call(d, "PATCH", path(name, "/stop"), {"restoreGpus": True, "restorePorts": True})
    assert r.status == 200, r.json


def test_unknown_and_bad_names(d):
    for ref, status, code in ((f"{PREFIX}_ghost", 404, 1100), (f"{PREFIX}_ghost-1", 404, 1100),
                              ("a-b-c", 400, 1003), ("foo-0", 400, 1003), ("a b", 400, 1106)):
        for method, tail, body in (("PATCH", "/stop", None), ("DELETE", "", None),
                                   ("POST", "/execute", {"cmd": ["true"]}),
                                   ("POST", "/commit", {"newImageName": "gpubox-e2e-x:1"})):
            r = call(d, method, path(ref, tail), body)
            assert r.status == status and r.code == code, (ref, method, tail, r.json)


GOOD = {"imageName": IMAGE, "containerName": f"{PREFIX}_bad", "gpuCount": 1,
        "Ports": [{"hostPort": PORT_START + 9, "containerPort": 22}]}


@pytest.mark.parametrize("raw, code", [
    (b'{"containerName": ', 1000),
    (b'{"pad": "' + b"x" * (1024 * 1024) + b'"}', 1103),
    (json.dumps({**GOOD, "Ports": {"hostPort": 1}}).encode(), 1000),
    (json.dumps({**GOOD, "Ports": [22]}).encode(), 1000),
    (json.dumps({**GOOD, "Ports": [{"hostPort": "abc", "containerPort": 22}]}).encode(), 1000),
    (json.dumps({**GOOD, "Ports": [{"hostPort": True, "containerPort": 22}]}).encode(), 1000),
    (json.dumps({**GOOD, "Ports": [{"hostPort": 1, "containerPort": 22, "x": 1}]}).encode(),
     1000),
    (json.dumps({**GOOD, "Ports": [{"hostPort": "99999", "containerPort": 22}]}).encode(), 1000),
    (json.dumps({**GOOD, "replicaSetName": "x"}).encode(), 1000),
    (json.dumps({**GOOD, "ports": []}).encode(), 1000),
    (json.dumps({**GOOD, "containerName": "a-b"}).encode(), 1003),
    (json.dumps({k: v for k, v in GOOD.items() if k != "containerName"}).encode(), 1002),
    (json.dumps({**GOOD, "gpuCount": "1"}).encode(), 1000),
])
def test_bad_create_changes_nothing(d, raw, code):
    assert legacy_create(d, f"{PREFIX}_bystander", gpuCount=1).status == 200
    assert_refused_unchanged(d, PREFIX, "POST", "/api/v1/containers", raw,
                             413 if code == 1103 else 400, code)


@pytest.mark.parametrize("method, tail, raw, code", [
    ("DELETE", "", b'{"force": 1}', 1000),
    ("DELETE", "", b'{"force": true, "purge": true}', 1000),
    ("DELETE", "", b"{", 1000),
    ("PATCH", "/stop", b'{"restoreGpus": "yes"}', 1000),
    ("POST", "/execute", b'{"cmd": "ls", "workDir": ["/"]}', 1000),
    ("POST", "/commit", b'{"newImageName": "No Good"}', 1000),
])
def test_bad_bodies_change_nothing(d, method, tail, raw, code):
    name = f"{PREFIX}_target"
    assert legacy_create(d, name).status == 200
    assert_refused_unchanged(d, PREFIX, method, path(f"{name}-1", tail), raw, 400, code)


def test_volume_names_of_the_older_form_resolve_to_the_volume(d):
    """gpu-docker-api made "foo-N" at each resize; its clients bind that
    name. gpubox resizes foo in place, so foo-N (any N) is foo."""
    name, vol, other = f"{PREFIX}_vols", f"{PREFIX}vol", f"{PREFIX}vol2"
    try:
        for v in (vol, other):
            r = call(d, "POST", "/api/v1/volumes", {"name": v, "size": "32MB"})
            assert r.status == 200, r.json
        r = legacy_create(d, name, binds=[{"src": f"{vol}-1", "dest": "/data"},
                                          {"src": f"{other}-4", "dest": "/other",
                                           "readOnly": True}])
        assert r.status == 200, r.json
        binds = info_ok(d, name)["spec"]["binds"]
        assert [(b["src"], b["dest"]) for b in binds] == [(vol, "/data"), (other, "/other")]
        assert execute_ok(d, name, ["sh", "-c", "echo kept > /data/f"])["exitCode"] == 0
        assert execute(d, name, ["sh", "-c", "echo x > /other/f"]).data["exitCode"] != 0

        r = call(d, "PATCH", path(f"{name}-1", "/volume"),
                 {"type": "volume", "oldBind": f"{vol}-2:/data", "newBind": f"{other}-1:/data"})
        assert r.status == 200, r.json
        assert [b["src"] for b in info_ok(d, name)["spec"]["binds"]] == [other, other]
        # Not the form: a name with letters after the dash is just unknown.
        r = legacy_create(d, f"{name}x", binds=[{"src": f"{vol}-1a", "dest": "/data"}])
        assert r.status == 400, r.json
    finally:
        wipe(d, PREFIX)
        for v in (vol, other):
            call(d, "DELETE", f"/api/v1/volumes/{v}")
