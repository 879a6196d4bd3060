"""Exclusive CPU cores (issue 18): cpuCount gives a replica set logical CPUs
of its own, on its cards' NUMA node and as whole physical cores first; GET
/api/v1/resources/cpus shows who holds which; cores are taken together with
the cards (all or nothing), follow a patch, a stop and a restart, and
survive a daemon restart.

The daemon runs with a simulated topology (--simulate-cpus 2x8x2: 2 NUMA
nodes x 8 cores x 2 threads = 32 logical CPUs, Linux numbering: cpu c and
c+16 are siblings, node 0 holds 0-7 and 16-23) with CPUs 0 and 16 (core 0)
reserved for the host, and 8 simulated cards spread over the nodes (cards
0-3 on node 0, 4-7 on node 1). This machine has fewer real CPUs, so the
container's cpuset is the chosen CPUs mapped onto the real online ones
(id modulo their number), as docs/cpus.md says; GET says enforced: false.
"""
import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import docker_request
from secutil import as_, write_tokens
from rsutil import (IMAGE, RUN_TAG, call, container, create, create_ok, gpu_devices, gpu_map, info_ok,
                    lifecycle, patch, remove_containers, rs_path, start_module_daemon, wipe)

PREFIX = "e2cpu" + RUN_TAG
PORT_RANGE = "62300-62349"
CPU_ARGS = ("--simulate-cpus", "2x8x2", "--reserved-cpus", "0,16")
NCPUS, NODES, CORES = 32, 2, 8


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    started = start_module_daemon(tmp_path_factory.mktemp(PREFIX), PORT_RANGE, *CPU_ARGS)
    yield started
    try:
        wipe(started, PREFIX)
    finally:
        started.stop()


@pytest.fixture
def d(daemon):
    yield daemon
    wipe(daemon, PREFIX)


def node_of(cpu):
    return (cpu % (NCPUS // 2)) // CORES


def sibling(cpu):
    return (cpu + NCPUS // 2) % NCPUS


def cpus(d):
    r = d.get("/api/v1/resources/cpus")
    assert r.status == 200, (r.status, r.json)
    return r.data


def held_by(d, name):
    return sorted(c["id"] for c in cpus(d)["cpus"] if c.get("owner") == name)


def card_nodes(d, uuids):
    index = {g["uuid"]: g["index"] for g in gpu_devices(d)}
    return {index[u] * NODES // 8 for u in uuids}


def real_online():
    ids = []
    for part in open("/sys/devices/system/cpu/online").read().strip().split(","):
        a, _, b = part.partition("-")
        ids += range(int(a), int(b or a) + 1)
    return ids


def docker_cpuset(ids):
    """The cpuset gpuboxd gives Docker for simulated ids (docs/cpus.md)."""
    online = real_online()
    return sorted({online[i % len(online)] for i in ids})


def parse_cpulist(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return sorted(out)


def container_cpuset(name):
    c = container(name)
    assert c is not None
    return parse_cpulist(c["HostConfig"]["CpusetCpus"])


def test_cores_on_the_cards_node_as_whole_cores(d):
    name = f"{PREFIX}_near"
    by_index = {g["index"]: g["uuid"] for g in gpu_devices(d)}
    # a card on node 1: not the first node, and not the emptiest either
    create_ok(d, f"{PREFIX}_zero", cpuCount=2, gpuUUIDs=[by_index[1]])
    out = create_ok(d, name, gpus=1, cpuCount=6, gpuUUIDs=[by_index[5]])
    assert card_nodes(d, out["gpus"]) == {1}
    got = out["cpuset"]
    assert len(got) == 6
    assert {node_of(c) for c in got} == {1}
    assert all(sibling(c) in got for c in got), got  # three whole cores
    assert held_by(d, name) == sorted(got)
    assert info_ok(d, name)["cpuset"] == sorted(got)
    assert container_cpuset(out["containerName"]) == docker_cpuset(got)
    st = cpus(d)
    assert st["simulated"] is True and st["enforced"] is False
    assert (st["total"], st["cores"], st["threadsPerCore"]) == (32, 16, 2)
    assert st["reserved"] == 2 and st["held"] == 8 and st["free"] == 22
    assert {node_of(c) for c in held_by(d, f"{PREFIX}_zero")} == {0}
    assert [c["state"] for c in st["cpus"] if c["id"] in (0, 16)] == ["reserved", "reserved"]


def test_a_set_without_cpu_count_holds_no_cores_and_has_no_cpuset(d):
    out = create_ok(d, f"{PREFIX}_plain", gpus=1)
    assert out["cpuset"] == []
    assert cpus(d)["held"] == 0
    assert container(out["containerName"])["HostConfig"]["CpusetCpus"] == ""


def test_two_sets_never_share_a_core_and_the_host_keeps_its_own(d):
    seen = set()
    for i in range(5):
        got = create_ok(d, f"{PREFIX}_s{i}", gpus=1, cpuCount=6)["cpuset"]
        assert not seen & set(got)
        seen |= set(got)
    assert len(seen) == 30 and not seen & {0, 16}
    assert cpus(d)["free"] == 0


def test_not_enough_cores_takes_no_card(d):
    create_ok(d, f"{PREFIX}_big", cpuCount=28)
    cards_before, cpus_before = gpu_map(d), cpus(d)
    r = create(d, f"{PREFIX}_more", gpus=2, cpuCount=4)
    assert r.status == 409 and r.code == 1118, (r.status, r.json)
    assert "not enough CPU cores: asked 4, 2 free" in r.json["msg"]
    assert gpu_map(d) == cards_before
    assert cpus(d) == cpus_before
    assert call(d, "GET", rs_path(f"{PREFIX}_more")).status == 404


def test_not_enough_cards_takes_no_core(d):
    create_ok(d, f"{PREFIX}_cards", gpus=7)
    before = cpus(d)
    r = create(d, f"{PREFIX}_short", gpus=2, cpuCount=4)
    assert r.status == 409 and r.code == 1013, (r.status, r.json)
    assert cpus(d) == before


@pytest.mark.parametrize("value", [-1, "4", 1.5, True, 31, 5000])
def test_bad_cpu_count_is_refused(d, value):
    before = cpus(d)
    r = create(d, f"{PREFIX}_bad", gpus=1, cpuCount=value)
    assert r.status == 400 and r.code == 1000, (r.status, r.json)
    assert "cpuCount" in r.json["msg"]
    assert cpus(d) == before
    assert all(v == 0 for v in gpu_map(d).values())


def test_patch_changes_the_cores_with_a_new_version(d):
    name = f"{PREFIX}_grow"
    first = create_ok(d, name, gpus=1, cpuCount=2)["cpuset"]
    r = patch(d, name, {"cpuCount": 6})
    assert r.status == 200, (r.status, r.json)
    now = info_ok(d, name)
    assert now["version"] == 2
    assert len(now["cpuset"]) == 6 and set(first) <= set(now["cpuset"])
    assert held_by(d, name) == now["cpuset"]
    assert container_cpuset(now["containerName"]) == docker_cpuset(now["cpuset"])
    r = patch(d, name, {"cpuCount": 2})
    assert r.status == 200, (r.status, r.json)
    now = info_ok(d, name)
    assert now["version"] == 3 and len(now["cpuset"]) == 2
    assert sibling(now["cpuset"][0]) == now["cpuset"][1]  # one whole core kept
    assert held_by(d, name) == now["cpuset"]
    r = patch(d, name, {"cpuCount": 0})
    assert r.status == 200, (r.status, r.json)
    assert info_ok(d, name)["cpuset"] == [] and held_by(d, name) == []
    r = patch(d, name, {"cpuCount": -2})
    assert r.status == 400 and r.code == 1000
    assert info_ok(d, name)["version"] == 4


def test_patch_beyond_free_cores_changes_nothing(d):
    create_ok(d, f"{PREFIX}_hog", cpuCount=26)
    name = f"{PREFIX}_want"
    create_ok(d, name, gpus=1, cpuCount=2)
    before, cards = cpus(d), gpu_map(d)
    r = patch(d, name, {"cpuCount": 8})
    assert r.status == 409 and r.code == 1118, (r.status, r.json)
    assert cpus(d) == before and gpu_map(d) == cards
    assert info_ok(d, name)["version"] == 1


def test_stop_gives_the_cores_back_and_restart_takes_them_again(d):
    name = f"{PREFIX}_sr"
    got = create_ok(d, name, gpus=1, cpuCount=4)["cpuset"]
    assert lifecycle(d, name, "stop").status == 200
    assert held_by(d, name) == [] and cpus(d)["held"] == 0
    r = lifecycle(d, name, "restart")
    assert r.status == 200, (r.status, r.json)
    assert held_by(d, name) == sorted(got)
    assert info_ok(d, name)["cpuset"] == sorted(got)
    # taken meanwhile: a restart gets other cores, as a new version
    assert lifecycle(d, name, "stop").status == 200
    create_ok(d, f"{PREFIX}_thief", cpuCount=30)
    r = lifecycle(d, name, "restart")
    assert r.status == 409 and r.code == 1118, (r.status, r.json)
    assert held_by(d, name) == []
    call(d, "DELETE", rs_path(f"{PREFIX}_thief") + "?purge=true")
    r = lifecycle(d, name, "restart")
    assert r.status == 200, (r.status, r.json)
    assert len(held_by(d, name)) == 4


def test_daemon_restart_keeps_the_cores(start_daemon, tmp_path):
    data = tmp_path / "keep"
    args = ("--simulate-gpus", "8xA100-80GB", "--port-range", "62340-62349", *CPU_ARGS)
    try:
        d = start_daemon(*args, data_dir=data)
        a = create_ok(d, f"{PREFIX}_ka", gpus=1, cpuCount=4)["cpuset"]
        create_ok(d, f"{PREFIX}_kb", cpuCount=2)
        assert lifecycle(d, f"{PREFIX}_kb", "stop").status == 200
        before = cpus(d)
        d.stop(signal.SIGTERM)
        d2 = start_daemon(*args, data_dir=data)
        assert cpus(d2) == before
        assert held_by(d2, f"{PREFIX}_ka") == sorted(a)
        more = create_ok(d2, f"{PREFIX}_kc", cpuCount=4)["cpuset"]
        assert not set(more) & set(a)
        r = lifecycle(d2, f"{PREFIX}_kb", "restart")
        assert r.status == 200, (r.status, r.json)
        assert len(held_by(d2, f"{PREFIX}_kb")) == 2
    finally:
        remove_containers(PREFIX)


def test_bad_topology_flags_stop_start_up(start_daemon):
    for args in (("--simulate-cpus", "2x8"), ("--reserved-cpus", "0-x")):
        with pytest.raises(Exception):
            start_daemon("--simulate-gpus", "1xT4-16GB", *args)


def test_a_quota_counts_cores(start_daemon, tmp_path):
    admin = "adm-" + secrets.token_hex(20)
    tokens = write_tokens(tmp_path / "tokens", f"alice:admin:{admin}\n")
    d = start_daemon("--simulate-gpus", "8xA100-80GB", "--port-range", "62330-62339",
                     "--token-file", str(tokens), *CPU_ARGS)
    d.token = admin  # for the helpers' plain calls
    try:
        r = as_(d, admin, "POST", "/api/v1/users",
                {"name": "carol", "role": "user", "quota": {"cores": 6}})
        assert r.status == 200, r.json
        token = r.json["data"]["token"]
        me = as_(d, token, "GET", "/api/v1/whoami").json["data"]
        assert me["quota"]["cores"] == 6 and me["usage"]["cores"] == 0

        def make(name, count):
            return as_(d, token, "POST", "/api/v1/replicaSet",
                       {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 1,
                        "cmd": ["sleep", "3600"], "cpuCount": count})

        assert make(f"{PREFIX}_q1", 4).status == 200
        before = cpus(d)
        r = make(f"{PREFIX}_q2", 4)
        assert r.status == 403 and r.code == 1115, r.json
        assert r.json["msg"] == ("quota exceeded: user carol may hold 6 CPU cores (logical "
                                 "CPUs); holds 4, this asks 4 more")
        assert cpus(d) == before
        r = as_(d, token, "PATCH", rs_path(f"{PREFIX}_q1"), {"cpuCount": 8})
        assert r.status == 403 and r.code == 1115, r.json
        assert len(held_by(d, f"{PREFIX}_q1")) == 4
        assert make(f"{PREFIX}_q3", 2).status == 200
        assert as_(d, token, "GET", "/api/v1/whoami").json["data"]["usage"]["cores"] == 6
        # the viewer of another user's set sees "(other)"; carol sees her own
        r = as_(d, admin, "POST", "/api/v1/replicaSet",
                {"imageName": IMAGE, "replicaSetName": f"{PREFIX}_adm", "gpuCount": 0,
                 "cmd": ["sleep", "3600"], "cpuCount": 2})
        assert r.status == 200, r.json
        seen = {c.get("owner") for c in as_(d, token, "GET", "/api/v1/resources/cpus")
                .json["data"]["cpus"]}
        assert seen == {None, f"{PREFIX}_q1", f"{PREFIX}_q3", "(other)"}
    finally:
        d.token = admin
        wipe(d, PREFIX)


def cli(d, *args):
    """The CLI against d; it must stay quiet under the sanitizers."""
    env = dict(os.environ, GPUBOX_HOST=d.url)
    env.pop("GPUBOX_TOKEN", None)
    build = Path(os.environ.get("GPUBOX_BUILD_DIR", Path(__file__).parents[2] / "build" / "test"))
    exe = os.environ.get("GPUBOX_CLI", str(build / "gpubox"))
    p = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120)
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p


def test_cli_run_scale_and_cpus(d):
    name = f"{PREFIX}_cli"
    p = cli(d, "run", name, "--image", IMAGE, "--gpus", "1", "--cpu-count", "4", "--",
            "sleep", "3600")
    assert p.returncode == 0, (p.stdout, p.stderr)
    got = held_by(d, name)
    assert len(got) == 4
    assert "  cpus:  " in p.stdout
    p = cli(d, "cpus")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NUMA", "CPUS", "TOTAL", "FREE"]
    assert lines[1].split() == ["0", "0-7,16-23", "16", "14" if node_of(got[0]) == 1 else "10"]
    assert "32 logical CPUs, 16 cores x 2 threads: 26 free, 4 held, 2 reserved" in p.stdout
    assert [ln.split()[0] for ln in lines if ln.startswith(name)] == [name]
    assert "(the host: reserved)  0,16" in p.stdout
    assert "--simulate-cpus" in p.stdout
    p = cli(d, "scale", name, "--cpu-count", "6")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert len(held_by(d, name)) == 6 and set(got) <= set(held_by(d, name))
    assert "CPUs:       " in cli(d, "inspect", name).stdout
    p = cli(d, "scale", name, "--cpu-count", "40")
    assert p.returncode == 2 and "cpuCount is 40" in p.stderr, (p.returncode, p.stderr)
    p = cli(d, "run", f"{PREFIX}_cli2", "--image", IMAGE, "--cpu-count", "30")
    assert p.returncode == 5 and "not enough CPU cores" in p.stderr, (p.returncode, p.stderr)
    p = cli(d, "run", f"{PREFIX}_cli3", "--image", IMAGE, "--cpu-count", "-1")
    assert p.returncode == 2, (p.returncode, p.stderr)
