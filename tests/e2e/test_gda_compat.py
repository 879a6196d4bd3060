"""Wire compatibility with gpu-docker-api's clients.

Replays the calls of gpu-docker-api's own API description
(api/gpu-docker-api-en.openapi.json in mayooot/gpu-docker-api), with its
sample bodies, in its order (volumes first here, since its replica set
binds one, and the delete last), and checks that every answer carries
every field gpu-docker-api's answer to the same call carries, with the
same JSON type. gpubox's own fields may stand beside them.

The fields are written out below from that description and from its
routers (internal/routers): its GET /replicaSet/{name} answers "Info" from
the router and "info" in the description, so gpubox sends both.
"""
import pytest

from rsutil import (IMAGE, LONG_RUNNING, RUN_TAG, call, module_daemon, remove_image, rs_path,
                    wipe)

PREFIX = "e2gc" + RUN_TAG
PORT_START, PORT_END = 64300, 64349

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)

# JSON types as Python sees them.
OBJ, ARR, STR, INT, BOOL = dict, list, str, int, bool

# gpu-docker-api's record of a replica set's version (models.EtcdContainerInfo).
RS_VERSION = {"version": INT, "createTime": STR, "config": OBJ, "hostConfig": OBJ,
              "networkingConfig": OBJ, "platform": OBJ, "containerName": STR}
# What its clients read inside config and hostConfig (Docker's own names).
RS_CONFIG = {"Image": STR, "Env": ARR, "Tty": BOOL}
RS_HOST_CONFIG = {"Binds": ARR, "PortBindings": OBJ, "DeviceRequests": ARR}
RS_PLATFORM = {"architecture": STR, "os": STR}
# Its record of a volume's version (models.EtcdVolumeInfo).
VOL_VERSION = {"version": INT, "createTime": STR, "opt": OBJ}
VOL_OPT = {"Driver": STR, "DriverOpts": OBJ, "Name": STR}


def has_fields(obj, fields, where):
    assert isinstance(obj, dict), f"{where}: not an object: {obj!r}"
    for k, t in fields.items():
        assert k in obj, f"{where}: no field {k!r} in {sorted(obj)}"
        assert isinstance(obj[k], t) and not (t is INT and isinstance(obj[k], bool)), \
            f"{where}.{k}: {type(obj[k]).__name__}, gpu-docker-api sends {t.__name__}"


def ok(r, what):
    assert r.status == 200 and r.code == 200, (what, r.status, r.json)
    assert set(r.json) >= {"code", "msg", "data"}, r.json
    return r.data


def check_rs_version(v, where, version, container):
    has_fields(v, RS_VERSION, where)
    has_fields(v["config"], RS_CONFIG, where + ".config")
    has_fields(v["hostConfig"], RS_HOST_CONFIG, where + ".hostConfig")
    has_fields(v["platform"], RS_PLATFORM, where + ".platform")
    assert "EndpointsConfig" in v["networkingConfig"], v["networkingConfig"]
    assert v["version"] == version and v["containerName"] == container, v
    assert v["config"]["Image"] == IMAGE


def check_vol_version(v, where, version, size):
    has_fields(v, VOL_VERSION, where)
    has_fields(v["opt"], VOL_OPT, where + ".opt")
    assert v["version"] == version and v["opt"]["DriverOpts"]["size"] == size, v


@pytest.fixture
def volume(d):
    """A volume name; the volume goes after the test, once no set binds it."""
    name = f"{PREFIX}vol"
    yield name
    wipe(d, PREFIX)
    call(d, "DELETE", f"/api/v1/volumes/{name}")


def test_replay_gpu_docker_api_calls(d, volume):
    name = f"{PREFIX}_foo"

    # Volumes: create, patch the size, info, history.
    data = ok(call(d, "POST", "/api/v1/volumes", {"name": volume, "size": "200MB"}), "volume")
    assert data["name"] == volume and "size" in data
    data = ok(call(d, "PATCH", f"/api/v1/volumes/{volume}/size", {"size": "300MB"}), "resize")
    assert data["name"] == volume and "size" in data
    data = ok(call(d, "GET", f"/api/v1/volumes/{volume}"), "volume info")
    check_vol_version(data["Info"], "Info", 2, "300MB")
    data = ok(call(d, "GET", f"/api/v1/volumes/{volume}/history"), "volume history")
    hist = data["history"]
    assert [h["version"] for h in hist] == [2, 1]
    for h, size in zip(hist, ["300MB", "200MB"]):
        has_fields(h, {"version": INT, "createTime": STR, "status": OBJ}, "history[]")
        check_vol_version(h["status"], "history[].status", h["version"], size)

    # Run, as its sample: a volume bound, env, two container ports.
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 3,
            "binds": [{"src": volume, "dest": "/root/veil-0"}], "env": ["USER=foo"],
            "containerPorts": ["22", "443"], "cmd": LONG_RUNNING}
    data = ok(call(d, "POST", "/api/v1/replicaSet", body), "run")
    has_fields(data, {"name": STR}, "run")
    assert data["name"] == f"{name}-1"

    # Commit.
    img = f"{PREFIX.lower()}-image:v1"
    try:
        data = ok(call(d, "POST", rs_path(name, "/commit"), {"newImageName": img}), "commit")
        has_fields(data, {"imageName": STR}, "commit")
    finally:
        remove_image(img)

    # Patch (GPUs), then roll back to version 1.
    data = ok(call(d, "PATCH", rs_path(name), {"gpuPatch": {"gpuCount": 1}}), "patch")
    has_fields(data, {"containerName": STR}, "patch")
    assert data["containerName"] == f"{name}-2"
    data = ok(call(d, "PATCH", rs_path(name, "/rollback"), {"version": 1}), "rollback")
    has_fields(data, {"containerName": STR}, "rollback")
    assert data["containerName"] == f"{name}-3"

    # Info: gpu-docker-api's record of the version, under "info" and "Info".
    data = ok(call(d, "GET", rs_path(name)), "info")
    for key in ("info", "Info"):
        check_rs_version(data[key], key, 3, f"{name}-3")
    host = data["info"]["hostConfig"]
    assert host["Binds"] == [f"{volume}:/root/veil-0"]
    assert set(host["PortBindings"]) == {"22/tcp", "443/tcp"}
    assert len(host["DeviceRequests"][0]["DeviceIDs"]) == 3  # version 1's three cards
    assert "USER=foo" in data["info"]["config"]["Env"]

    # Stop, restart, pause, continue, execute.
    for action, fields in (("stop", None), ("restart", {"containerName": STR}),
                           ("pause", None), ("continue", None)):
        data = ok(call(d, "PATCH", rs_path(name, "/" + action)), action)
        if fields:
            has_fields(data, fields, action)
    data = ok(call(d, "POST", rs_path(name, "/execute"), {"cmd": ["echo", "hi"]}), "execute")
    has_fields(data, {"stdout": STR}, "execute")
    assert data["stdout"] == "hi\n"

    # History: each entry carries its version's record as "status".
    data = ok(call(d, "GET", rs_path(name, "/history")), "history")
    hist = data["history"]
    versions = [h["version"] for h in hist]
    assert versions == sorted(versions, reverse=True) and {1, 2, 3} <= set(versions), versions
    for h in hist:
        has_fields(h, {"version": INT, "createTime": STR, "status": OBJ}, "history[]")
        check_rs_version(h["status"], "history[].status", h["version"], f"{name}-{h['version']}")
    cards = {h["version"]: len(h["status"]["hostConfig"]["DeviceRequests"][0]["DeviceIDs"])
             for h in hist}
    assert cards[1] == 3 and cards[2] == 1, cards

    # Resources.
    data = ok(call(d, "GET", "/api/v1/resources/gpus"), "gpus")
    assert isinstance(data["gpus"], dict) and set(data["gpus"].values()) <= {0, 1}
    data = ok(call(d, "GET", "/api/v1/resources/ports"), "ports")
    ports = data["ports"]
    has_fields(ports, {"StartPort": INT, "EndPort": INT, "AvailableCount": INT,
                       "UsedPortSet": OBJ}, "ports")
    assert (ports["StartPort"], ports["EndPort"]) == (PORT_START, PORT_END)
    held = {str(p["HostPort"]) for b in host["PortBindings"].values() for p in b}
    assert held <= set(ports["UsedPortSet"]), (held, ports["UsedPortSet"])
    assert all(v == {} for v in ports["UsedPortSet"].values())
    assert ports["AvailableCount"] == PORT_END - PORT_START + 1 - len(ports["UsedPortSet"])

    # Delete.
    r = call(d, "DELETE", rs_path(name))
    assert r.status == 200 and r.code == 200, r.json
