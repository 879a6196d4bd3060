"""Every field of gpu-docker-api's record of a replica set's version.

gpu-docker-api's API description (api/gpu-docker-api-en.openapi.json in
mayooot/gpu-docker-api, paths "/api/v1/replicaSet/{name}" GET, data.info,
and "/api/v1/replicaSet/{name}/history" GET, data.history[].status)
describes the record as the Docker Engine API's create body of the
container: config.*, hostConfig.*, networkingConfig, platform. A client
written against that description reads any of those fields, so each must be
present with the JSON type the description gives, in GET /replicaSet/{name}
(from the live container) and in every history entry (from the version's
spec, the container of an old version being gone).

FIELDS below is that description's schema, walked: every property, with
"[]" for an array's items (checked on each item). Where the description's
sample had null (its type "null"), null passes, and so does the type Docker
gives the field when it is set (ENGINE_TYPE), since a client of that
description cannot rely on more. The sample's ports "22/tcp" and "443/tcp"
are the container ports the replica set below publishes, as in its sample.
"""
from conftest import docker_request
from rsutil import IMAGE, LONG_RUNNING, RUN_TAG, call, module_daemon, rs_path

PREFIX = "e2gf" + RUN_TAG
PORT_START, PORT_END = 64870, 64889

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)

OBJ, ARR, STR, INT, BOOL, NULL = dict, list, str, int, bool, type(None)

# Walked from the description's schema of data.info (the same as
# data.history[].status): path relative to the record, type.
FIELDS = [
    ("version", INT), ("createTime", STR), ("config", OBJ), ("config.Hostname", STR),
    ("config.Domainname", STR), ("config.User", STR), ("config.AttachStdin", BOOL),
    ("config.AttachStdout", BOOL), ("config.AttachStderr", BOOL), ("config.ExposedPorts", OBJ),
    ("config.ExposedPorts.22/tcp", OBJ), ("config.ExposedPorts.443/tcp", OBJ),
    ("config.Tty", BOOL), ("config.OpenStdin", BOOL), ("config.StdinOnce", BOOL),
    ("config.Env", ARR), ("config.Env[]", STR), ("config.Cmd", NULL), ("config.Image", STR),
    ("config.Volumes", NULL), ("config.WorkingDir", STR), ("config.Entrypoint", NULL),
    ("config.OnBuild", NULL), ("config.Labels", NULL), ("hostConfig", OBJ),
    ("hostConfig.Binds", ARR), ("hostConfig.Binds[]", STR), ("hostConfig.ContainerIDFile", STR),
    ("hostConfig.LogConfig", OBJ), ("hostConfig.LogConfig.Type", STR),
    ("hostConfig.LogConfig.Config", NULL), ("hostConfig.NetworkMode", STR),
    ("hostConfig.PortBindings", OBJ), ("hostConfig.PortBindings.22/tcp", ARR),
    ("hostConfig.PortBindings.22/tcp[]", OBJ), ("hostConfig.PortBindings.22/tcp[].HostIp", STR),
    ("hostConfig.PortBindings.22/tcp[].HostPort", STR), ("hostConfig.PortBindings.443/tcp", ARR),
    ("hostConfig.PortBindings.443/tcp[]", OBJ), ("hostConfig.PortBindings.443/tcp[].HostIp", STR),
    ("hostConfig.PortBindings.443/tcp[].HostPort", STR), ("hostConfig.RestartPolicy", OBJ),
    ("hostConfig.RestartPolicy.Name", STR), ("hostConfig.RestartPolicy.MaximumRetryCount", INT),
    ("hostConfig.AutoRemove", BOOL), ("hostConfig.VolumeDriver", STR),
    ("hostConfig.VolumesFrom", NULL), ("hostConfig.ConsoleSize", ARR),
    ("hostConfig.ConsoleSize[]", INT), ("hostConfig.CapAdd", NULL), ("hostConfig.CapDrop", NULL),
    ("hostConfig.CgroupnsMode", STR), ("hostConfig.Dns", NULL), ("hostConfig.DnsOptions", NULL),
    ("hostConfig.DnsSearch", NULL), ("hostConfig.ExtraHosts", NULL),
    ("hostConfig.GroupAdd", NULL), ("hostConfig.IpcMode", STR), ("hostConfig.Cgroup", STR),
    ("hostConfig.Links", NULL), ("hostConfig.OomScoreAdj", INT), ("hostConfig.PidMode", STR),
    ("hostConfig.Privileged", BOOL), ("hostConfig.PublishAllPorts", BOOL),
    ("hostConfig.ReadonlyRootfs", BOOL), ("hostConfig.SecurityOpt", NULL),
    ("hostConfig.UTSMode", STR), ("hostConfig.UsernsMode", STR), ("hostConfig.ShmSize", INT),
    ("hostConfig.Isolation", STR), ("hostConfig.CpuShares", INT), ("hostConfig.Memory", INT),
    ("hostConfig.NanoCpus", INT), ("hostConfig.CgroupParent", STR),
    ("hostConfig.BlkioWeight", INT), ("hostConfig.BlkioWeightDevice", NULL),
    ("hostConfig.BlkioDeviceReadBps", NULL), ("hostConfig.BlkioDeviceWriteBps", NULL),
    ("hostConfig.BlkioDeviceReadIOps", NULL), ("hostConfig.BlkioDeviceWriteIOps", NULL),
    ("hostConfig.CpuPeriod", INT), ("hostConfig.CpuQuota", INT),
    ("hostConfig.CpuRealtimePeriod", INT), ("hostConfig.CpuRealtimeRuntime", INT),
    ("hostConfig.CpusetCpus", STR), ("hostConfig.CpusetMems", STR), ("hostConfig.Devices", NULL),
    ("hostConfig.DeviceCgroupRules", NULL), ("hostConfig.DeviceRequests", ARR),
    ("hostConfig.DeviceRequests[]", OBJ), ("hostConfig.DeviceRequests[].Driver", STR),
    ("hostConfig.DeviceRequests[].Count", INT), ("hostConfig.DeviceRequests[].DeviceIDs", ARR),
    ("hostConfig.DeviceRequests[].DeviceIDs[]", STR),
    ("hostConfig.DeviceRequests[].Capabilities", ARR),
    ("hostConfig.DeviceRequests[].Capabilities[]", ARR),
    ("hostConfig.DeviceRequests[].Capabilities[][]", STR),
    ("hostConfig.DeviceRequests[].Options", NULL), ("hostConfig.MemoryReservation", INT),
    ("hostConfig.MemorySwap", INT), ("hostConfig.MemorySwappiness", NULL),
    ("hostConfig.OomKillDisable", NULL), ("hostConfig.PidsLimit", NULL),
    ("hostConfig.Ulimits", NULL), ("hostConfig.CpuCount", INT), ("hostConfig.CpuPercent", INT),
    ("hostConfig.IOMaximumIOps", INT), ("hostConfig.IOMaximumBandwidth", INT),
    ("hostConfig.MaskedPaths", NULL), ("hostConfig.ReadonlyPaths", NULL),
    ("networkingConfig", OBJ), ("networkingConfig.EndpointsConfig", NULL), ("platform", OBJ),
    ("platform.architecture", STR), ("platform.os", STR), ("containerName", STR),
]

# The Engine API's type of each field the description shows as null.
ENGINE_TYPE = {
    "config.Cmd": ARR, "config.Volumes": OBJ, "config.Entrypoint": ARR, "config.OnBuild": ARR,
    "config.Labels": OBJ, "hostConfig.LogConfig.Config": OBJ, "hostConfig.VolumesFrom": ARR,
    "hostConfig.CapAdd": ARR, "hostConfig.CapDrop": ARR, "hostConfig.Dns": ARR,
    "hostConfig.DnsOptions": ARR, "hostConfig.DnsSearch": ARR, "hostConfig.ExtraHosts": ARR,
    "hostConfig.GroupAdd": ARR, "hostConfig.Links": ARR, "hostConfig.SecurityOpt": ARR,
    "hostConfig.BlkioWeightDevice": ARR, "hostConfig.BlkioDeviceReadBps": ARR,
    "hostConfig.BlkioDeviceWriteBps": ARR, "hostConfig.BlkioDeviceReadIOps": ARR,
    "hostConfig.BlkioDeviceWriteIOps": ARR, "hostConfig.Devices": ARR,
    "hostConfig.DeviceCgroupRules": ARR, "hostConfig.DeviceRequests[].Options": OBJ,
    "hostConfig.MemorySwappiness": INT, "hostConfig.OomKillDisable": BOOL,
    "hostConfig.PidsLimit": INT, "hostConfig.Ulimits": ARR, "hostConfig.MaskedPaths": ARR,
    "hostConfig.ReadonlyPaths": ARR, "networkingConfig.EndpointsConfig": OBJ,
}


def type_ok(value, path, t):
    if t is NULL:
        return value is None or type_ok(value, path, ENGINE_TYPE[path])
    return isinstance(value, t) and not (t is INT and isinstance(value, bool))


def values_at(record, path):
    """Every value at path ("a.b[].c"; "[]" walks each item), or None when
    a step is missing. Keys hold "/", never "."."""
    values = [record]
    for step in path.replace("[]", ".[]").split("."):
        nxt = []
        for v in values:
            if step == "[]":
                nxt.extend(v if isinstance(v, list) else [])
            elif isinstance(v, dict):
                if step not in v:
                    return None
                nxt.append(v[step])
        values = nxt
    return values


def missing_fields(record, ports=True):
    """The described fields record lacks or holds with another type (a
    field under one already named is not named again). ports=False: the
    sample's port keys are not asked for (a set that holds no host ports,
    stopped or deleted, publishes none)."""
    problems = []
    for path, t in FIELDS:
        if not ports and "/tcp" in path:
            continue
        if any(path.startswith(p + ".") or path.startswith(p + "[]") for p, _ in problems):
            continue
        found = values_at(record, path)
        if found is None:
            problems.append((path, "missing"))
            continue
        for v in found:
            if not type_ok(v, path, t):
                problems.append((path, f"{type(v).__name__} {v!r:.60}"))
                break
    return problems


def ok(r, what):
    assert r.status == 200 and r.code == 200, (what, r.status, r.json)
    return r.data


def inspect(container):
    r = docker_request("GET", f"/containers/{container}/json")
    assert r.status == 200, r.json
    return r.json


def test_info_and_history_carry_every_described_field(d):
    name = f"{PREFIX}_foo"
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 3, "env": ["USER=foo"],
            "containerPorts": ["22", "443"], "cmd": LONG_RUNNING}
    ok(call(d, "POST", "/api/v1/replicaSet", body), "run")
    ok(call(d, "PATCH", rs_path(name), {"gpuPatch": {"gpuCount": 1}}), "patch")

    data = ok(call(d, "GET", rs_path(name)), "info")
    for key in ("info", "Info"):
        problems = missing_fields(data[key])
        assert not problems, f"{key}: {len(problems)} described fields missing or mistyped: " \
                             f"{problems}"

    # What gpubox does not set comes from the container as Docker reports it.
    live = inspect(f"{name}-2")
    info = data["info"]
    assert info["config"]["Hostname"] == live["Config"]["Hostname"] != ""
    for k in ("CgroupnsMode", "ConsoleSize", "Isolation", "OomScoreAdj"):
        assert info["hostConfig"][k] == live["HostConfig"][k], k
    # What gpubox sets stays the version's own.
    assert "USER=foo" in info["config"]["Env"] and info["config"]["Image"] == IMAGE
    assert set(info["config"]["ExposedPorts"]) == {"22/tcp", "443/tcp"}
    assert len(info["hostConfig"]["DeviceRequests"][0]["DeviceIDs"]) == 1

    hist = ok(call(d, "GET", rs_path(name, "/history")), "history")["history"]
    assert [h["version"] for h in hist] == [2, 1]
    for h in hist:
        problems = missing_fields(h["status"])
        assert not problems, f"history v{h['version']}: {len(problems)} described fields " \
                             f"missing or mistyped: {problems}"
    old = hist[1]["status"]
    assert len(old["hostConfig"]["DeviceRequests"][0]["DeviceIDs"]) == 3
    assert old["containerName"] == f"{name}-1"

    # Stopped (its host ports given back) and deleted with its history
    # kept (no container left), every field still appears.
    ok(call(d, "PATCH", rs_path(name, "/stop")), "stop")
    data = ok(call(d, "GET", rs_path(name)), "info when stopped")
    assert not missing_fields(data["info"], ports=False), missing_fields(data["info"], False)
    ok(call(d, "DELETE", rs_path(name)), "delete")
    data = ok(call(d, "GET", rs_path(name)), "info when deleted")
    assert not missing_fields(data["info"], ports=False), missing_fields(data["info"], False)
    hist = ok(call(d, "GET", rs_path(name, "/history")), "history when deleted")["history"]
    for h in hist:
        problems = missing_fields(h["status"], ports=False)
        assert not problems, (h["version"], problems)
