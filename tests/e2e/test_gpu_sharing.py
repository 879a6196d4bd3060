"""GPU sharing through the replica-set API (issue 7): memory shares placed by
binpack and spread on cards of different sizes, time-slice replicas, pinning
and the model filter, unhealthy cards, concurrent requests, and a kill -9 of
gpuboxd. Every placement is checked where a user would look: the
/resources/gpus answer, the replica set's info, and the container itself
(the environment of its main process, since exec'd commands do not get the
device env, and the read-only file /etc/gpubox/gpu.env).

The simulated host has cards of three sizes:
  index 0, 1  T4    16384 MiB
  index 2     A100  40960 MiB
  index 3     H100  81920 MiB
so each test knows which card a request must land on. No card here runs
CUDA: what the tests show is what gpubox schedules and hands the container;
test_gpu_limiter.py shows the CUDA limiter holding a share against the fake
driver (docs/gpus.md, "What is enforced").
"""
import json
import random
import signal
import threading
from pathlib import Path

import pytest

from rsutil import RUN_TAG

from conftest import FAKE_NVML, Daemon, fake_gpu_env, run_gpuboxd
from rsutil import (IMAGE, LONG_RUNNING, call, container, create, create_ok, delete, env_of,
                    execute, execute_ok, gpu_devices, gpu_map, info_ok, list_sets,
                    remove_containers, still, wipe)

PREFIX = "e2gs" + RUN_TAG
MIXED = "2xT4-16GB,1xA100-40GB,1xH100-80GB"
T4, A100, H100 = 16384, 40960, 81920
# Each daemon of this module has its own port window (rsutil explains why
# they lie above the ephemeral range); 62000-62099 is this module's.
WINDOWS = {"main": "62000-62009", "timeslice": "62010-62019", "hami": "62020-62029",
           "nvml": "62030-62039", "race": "62040-62049", "storm": "62050-62059",
           "restart": "62060-62069", "settings": "62070-62079"}
SLOW = 180  # seconds a create may take while many containers start at once


def start(tmp, window, *extra, env=None, data=None):
    data = data or tmp / "data"
    return Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(data),
                   "--port-range", WINDOWS[window], *extra], data, tmp / f"gpuboxd-{window}.log",
                  env=env).start()


def stop_clean(d):
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = start(tmp_path_factory.mktemp("gs"), "main", "--simulate-gpus", MIXED)
    yield d
    stop_clean(d)


@pytest.fixture
def d(daemon):
    yield daemon
    wipe(daemon, PREFIX)


def share(d, name, memory=None, shared=None, **spec):
    """Create PREFIX_name asking for a share; gpuCount only when given (rsutil's
    create always sends one)."""
    body = {"imageName": IMAGE, "replicaSetName": f"{PREFIX}_{name}", "cmd": LONG_RUNNING,
            **spec}
    if memory is not None:
        body["gpuMemory"] = memory
    if shared is not None:
        body["gpuShared"] = shared
    return call(d, "POST", "/api/v1/replicaSet", body)


def share_ok(d, name, memory=None, shared=None, **spec):
    r = share(d, name, memory, shared, **spec)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def devices(d):
    return {dev["index"]: dev for dev in gpu_devices(d)}


def uuid_of(d, index):
    return devices(d)[index]["uuid"]


def card_of(d, created):
    """The index of the one card a create answer names."""
    assert len(created["gpus"]) == 1, created
    return next(i for i, dev in devices(d).items() if dev["uuid"] == created["gpus"][0])


def env_file(d, name):
    out = execute_ok(d, name, ["cat", "/etc/gpubox/gpu.env"])
    assert out["exitCode"] == 0, out
    return out["stdout"].splitlines()


def share_lines(mib, mode="memory"):
    return [f"CUDA_DEVICE_MEMORY_LIMIT_0={mib}m", f"GPUBOX_GPU_MEMORY_MIB={mib}",
            f"GPUBOX_GPU_SHARE={mode}"]


def assert_container_has(d, name, uuids, lines):
    """The container sees exactly these cards and these limit lines, both in
    its main process's environment and in the read-only file."""
    env = env_of(d, name)
    assert env["NVIDIA_VISIBLE_DEVICES"].split(",") == uuids
    for line in lines:
        k, v = line.split("=", 1)
        assert env.get(k) == v, (k, env)
    assert env_file(d, name) == lines


# What an allocation holds; the live usage fields beside it are test_usage.py's.
HELD = ("name", "memoryMiB", "replica")


def allocation(dev, name):
    a = next((a for a in dev["allocations"] if a["name"] == name), None)
    return a and {k: v for k, v in a.items() if k in HELD}


def test_binpack_takes_the_fitting_card_with_the_least_left(d):
    # 12 GB fits every card; the T4s leave the least (4 GB), the lower index wins.
    a = share_ok(d, "a", "12GB")
    assert card_of(d, a) == 0
    assert a["gpuShares"] == [{"uuid": uuid_of(d, 0), "memoryMiB": 12288, "mode": "memory"}]
    # 4 GB fits card 0 exactly (0 left): better than an empty T4.
    b = share_ok(d, "b", 4096)
    assert card_of(d, b) == 0
    # 20 GB fits neither T4; the A100 leaves 20 GB, the H100 60 GB.
    c = share_ok(d, "c", "20GB")
    assert card_of(d, c) == 2

    devs = devices(d)
    assert devs[0]["mode"] == "memory"
    assert devs[0]["allocatedMemoryMiB"] == T4 and devs[0]["freeMemoryMiB"] == 0
    assert sorted(devs[0]["tenants"]) == [f"{PREFIX}_a", f"{PREFIX}_b"]
    assert allocation(devs[0], f"{PREFIX}_a") == {"name": f"{PREFIX}_a", "memoryMiB": 12288}
    assert allocation(devs[0], f"{PREFIX}_b") == {"name": f"{PREFIX}_b", "memoryMiB": 4096}
    assert devs[2]["allocatedMemoryMiB"] == 20480 and devs[2]["freeMemoryMiB"] == A100 - 20480
    assert devs[1]["mode"] == "free" and devs[3]["mode"] == "free"
    assert gpu_map(d) == {devs[i]["uuid"]: int(i in (0, 2)) for i in devs}
    # enforced by gpubox's CUDA limiter (built beside this gpuboxd; issue 28),
    # and the answers say so
    assert devs[0]["enforced"] is True and devs[1]["enforced"] is True
    assert d.get("/api/v1/resources/gpus").data["sharing"] == {"enforced": True,
                                                              "enforcedBy": "gpubox"}

    assert_container_has(d, f"{PREFIX}_a", [uuid_of(d, 0)], share_lines(12288))
    assert_container_has(d, f"{PREFIX}_b", [uuid_of(d, 0)], share_lines(4096))
    assert_container_has(d, f"{PREFIX}_c", [uuid_of(d, 2)], share_lines(20480))


def test_spread_takes_the_card_with_the_most_left(d):
    s1 = share_ok(d, "s1", "8GB", gpuPolicy="spread")
    assert card_of(d, s1) == 3  # H100: 72 GB left
    s2 = share_ok(d, "s2", "30GB", gpuPolicy="spread")
    assert card_of(d, s2) == 3  # H100 42 GB left still beats the A100's 10 GB
    s3 = share_ok(d, "s3", "30GB", gpuPolicy="spread")
    assert card_of(d, s3) == 3  # H100 has 42 GB, the A100 40 GB: 12 GB left beats 10 GB
    s4 = share_ok(d, "s4", "10GB", gpuPolicy="spread")
    assert card_of(d, s4) == 2  # A100 40 GB free now beats the H100's 12 GB
    # two cards at once: the two with the most left, in index order
    s5 = share_ok(d, "s5", "2GB", gpuCount=2, gpuPolicy="spread")
    assert s5["gpus"] == [uuid_of(d, 0), uuid_of(d, 2)]
    lines = ["CUDA_DEVICE_MEMORY_LIMIT_0=2048m", "CUDA_DEVICE_MEMORY_LIMIT_1=2048m",
             "GPUBOX_GPU_MEMORY_MIB=2048", "GPUBOX_GPU_SHARE=memory"]
    assert_container_has(d, f"{PREFIX}_s5", s5["gpus"], lines)
    devs = devices(d)
    assert devs[3]["allocatedMemoryMiB"] == (8 + 30 + 30) * 1024
    assert devs[2]["allocatedMemoryMiB"] == (10 + 2) * 1024
    assert info_ok(d, f"{PREFIX}_s5")["spec"]["gpuPolicy"] == "spread"


def test_a_share_never_spans_cards(d):
    before = gpu_map(d)
    # 100 GB is less than the host's 152 GB, but no single card has it.
    r = share(d, "huge", "100GB")
    assert r.status == 409 and r.code == 1013, r.json
    assert "none can fit it" in r.msg and "largest free share 81920 MiB" in r.msg, r.msg
    # Two cards of 50 GB: only the H100 takes one.
    r = share(d, "two", "50GB", gpuCount=2)
    assert r.status == 409 and r.code == 1013, r.json
    # the count in the message, the card's id only in the data
    assert "; the server has 4 cards, 1 can fit it" in r.msg and "GPU-" not in r.msg, r.msg
    assert r.json["data"]["freeGpus"] == [uuid_of(d, 3)], r.json
    assert gpu_map(d) == before and list_sets(d) == []
    # what fits one card is given on one card
    share_ok(d, "fits", "80GB")
    assert devices(d)[3]["allocatedMemoryMiB"] == 81920


def test_whole_cards_and_shares_never_mix(d):
    share_ok(d, "sh", "6GB")  # binpack: T4 index 0
    whole = create_ok(d, f"{PREFIX}_whole", gpus=3)
    assert whole["gpus"] == [uuid_of(d, 1), uuid_of(d, 2), uuid_of(d, 3)]
    assert whole["gpuShares"] == []
    # every card is busy: a whole card is refused although card 0 has 10 GB free
    r = create(d, f"{PREFIX}_more", gpus=1)
    assert r.status == 409 and r.code == 1013, r.json
    assert "(1 holds memory shares or time-slice replicas)" in r.msg, r.msg
    # and a share never lands on a card held whole
    r = share(d, "onwhole", "1GB", gpuUUIDs=[uuid_of(d, 3)])
    assert r.status == 409 and r.code == 1013, r.json
    assert "held whole by " + f"{PREFIX}_whole" in r.msg, r.msg
    r = share(d, "big", "12GB")
    assert r.status == 409 and r.code == 1013, r.json
    devs = devices(d)
    assert [devs[i]["mode"] for i in range(4)] == ["memory", "whole", "whole", "whole"]
    assert devs[3]["tenants"] == [f"{PREFIX}_whole"]
    assert [allocation(devs[3], a["name"]) for a in devs[3]["allocations"]] == [
        {"name": f"{PREFIX}_whole", "memoryMiB": H100}]
    env = env_of(d, f"{PREFIX}_whole")
    assert env["GPUBOX_GPU_SHARE"] == "whole"
    assert not any(k.startswith("CUDA_DEVICE_MEMORY_LIMIT") for k in env)
    assert env_file(d, f"{PREFIX}_whole") == ["GPUBOX_GPU_SHARE=whole"]
    limits = info_ok(d, f"{PREFIX}_whole")["gpuLimits"]
    assert limits == {"mode": "whole", "enforced": True, "enforcedBy": "exclusive cards"}
    # once the share leaves, card 0 is free for anything
    assert delete(d, f"{PREFIX}_sh", purge=True).status == 200
    assert devices(d)[0]["mode"] == "free"
    assert create_ok(d, f"{PREFIX}_more", gpus=1)["gpus"] == [uuid_of(d, 0)]


def test_pinning_and_model_filter(d):
    pinned = share_ok(d, "pin", "10GB", gpuUUIDs=[uuid_of(d, 3)])
    assert pinned["gpus"] == [uuid_of(d, 3)]
    model = share_ok(d, "model", "10GB", gpuModel="a100")
    assert model["gpus"] == [uuid_of(d, 2)]
    whole = create_ok(d, f"{PREFIX}_wt4", gpus=1, gpuModel="T4")
    assert whole["gpus"] == [uuid_of(d, 0)]
    # two pinned cards at once, given in any order, come in index order
    both = share_ok(d, "both", "1GB", gpuUUIDs=[uuid_of(d, 3), uuid_of(d, 1)])
    assert both["gpus"] == [uuid_of(d, 1), uuid_of(d, 3)]
    assert info_ok(d, f"{PREFIX}_both")["spec"]["gpuCount"] == 2

    r = share(d, "t4big", "20GB", gpuModel="T4")
    assert r.status == 409 and r.code == 1013, r.json
    assert "'T4'" in r.msg, r.msg
    # the H100 holds 10 + 1 GB: 70656 MiB are left, 70 GB is 1 GB too much
    r = share(d, "pinfull", "70GB", gpuUUIDs=[uuid_of(d, 3)])
    assert r.status == 409 and r.code == 1013, r.json
    assert f"{uuid_of(d, 3)} has 70656 MiB free, 71680 MiB asked" in r.msg, r.msg
    r = share(d, "pinwrong", "1GB", gpuUUIDs=[uuid_of(d, 2)], gpuModel="H100")
    assert r.status == 409 and r.code == 1013, r.json

    bad = [
        (dict(gpuMemory="1GB", gpuUUIDs=["GPU-00000000-0000-4000-8000-000000000000"]), 1000,
         "no GPU GPU-00000000"),
        (dict(gpuMemory="1GB", gpuUUIDs=[uuid_of(d, 0)], gpuCount=2), 1000, "gpuCount is 2"),
        (dict(gpuMemory="1GB", gpuShared=True), 1000, "cannot be combined"),
        (dict(gpuMemory="1GB", gpuCount=0), 1000, "gpuCount is 0"),
        (dict(gpuMemory="1GB", gpuPolicy="tightest"), 1000, "binpack"),
        (dict(gpuMemory="1000"), 1000, "no unit"),
        (dict(gpuMemory=True), 1000, "gpuMemory"),
        (dict(gpuMemory="1GB", gpuCount=-1), 1012, "gpuCount"),
    ]
    for spec, code, text in bad:
        r = create(d, f"{PREFIX}_bad", **spec)
        assert r.code == code and text in r.msg, (spec, r.json)
        assert r.status == 400, (spec, r.status)
    assert {s["name"] for s in list_sets(d)} == {f"{PREFIX}_{n}" for n in
                                                 ("pin", "model", "wt4", "both")}


def test_the_limits_file_is_read_only_and_goes_with_the_container(d, daemon):
    created = share_ok(d, "file", "3GB")
    name = f"{PREFIX}_file"
    host_file = Path(daemon.data_dir) / "gpu-env" / f"{created['containerName']}.env"
    assert host_file.read_text().splitlines() == share_lines(3072)
    out = execute(d, name, ["sh", "-c", "echo GPUBOX_GPU_MEMORY_MIB=999999 >> /etc/gpubox/gpu.env"])
    assert out.status == 200 and out.data["exitCode"] != 0, out.json
    assert env_file(d, name) == share_lines(3072)
    # a login shell starts from a clean environment; sourcing the file gets the limits back
    out = execute_ok(d, name, ["env", "-i", "sh", "-c",
                               "set -a; . /etc/gpubox/gpu.env; echo $GPUBOX_GPU_MEMORY_MIB"])
    assert out["stdout"].strip() == "3072"
    mounts = {m["Destination"]: m for m in container(created["containerName"])["Mounts"]}
    assert mounts["/etc/gpubox/gpu.env"]["RW"] is False
    assert "/usr/local/gpubox/libvgpu.so" not in mounts
    i = info_ok(d, name)
    assert i["gpuShares"] == created["gpuShares"]
    assert i["gpuLimits"] == {"mode": "memory", "enforced": True, "enforcedBy": "gpubox"}
    # gpubox's paths are its own: a bind there is refused before anything is taken
    before = gpu_map(d)
    r = share(d, "clash", "1GB", binds=[{"src": "data", "dest": "/etc/gpubox/gpu.env"}])
    assert r.status == 400 and r.code == 1000, r.json
    assert "where gpubox mounts its own files" in r.msg, r.msg
    assert gpu_map(d) == before
    assert delete(d, name).status == 200
    assert not host_file.exists()


def test_timeslice_replicas(tmp_path):
    d = start(tmp_path, "timeslice", "--simulate-gpus", "1xA100-40GB", "--timeslice-replicas",
              "2")
    try:
        first = share_ok(d, "ts1", shared=True)
        second = share_ok(d, "ts2", shared=True)
        assert first["gpuShares"] == [{"uuid": first["gpus"][0], "memoryMiB": 20480,
                                       "mode": "timeslice", "replica": 0}]
        assert second["gpuShares"][0]["replica"] == 1
        r = share(d, "ts3", shared=True)
        assert r.status == 409 and r.code == 1013, r.json
        # neither a memory share nor a whole card on a time-sliced card
        assert share(d, "mem", "1GB").code == 1013
        assert create(d, f"{PREFIX}_whole", gpus=1).code == 1013
        dev = gpu_devices(d)[0]
        assert dev["mode"] == "timeslice"
        assert dev["replicas"] == {"total": 2, "used": 2}
        assert dev["allocatedMemoryMiB"] == A100
        assert sorted(a["replica"] for a in dev["allocations"]) == [0, 1]
        for name in ("ts1", "ts2"):
            assert_container_has(d, f"{PREFIX}_{name}", first["gpus"],
                                 share_lines(20480, "timeslice"))
        # a released replica slot is taken again
        assert delete(d, f"{PREFIX}_ts1", purge=True).status == 200
        third = share_ok(d, "ts3", shared=True)
        assert third["gpuShares"][0]["replica"] == 0
    finally:
        stop_clean(d)


def test_hami_core_is_mounted_and_preloaded_for_shares(tmp_path):
    lib = tmp_path / "libvgpu.so"
    lib.write_bytes(b"not really HAMi-core\n")
    d = start(tmp_path, "hami", "--simulate-gpus", "2xT4-16GB", "--hami-core", str(lib))
    try:
        created = share_ok(d, "hs", "5GB")
        lines = share_lines(5120) + ["LD_PRELOAD=/usr/local/gpubox/libvgpu.so"]
        assert_container_has(d, f"{PREFIX}_hs", created["gpus"], lines)
        out = execute_ok(d, f"{PREFIX}_hs", ["cat", "/usr/local/gpubox/libvgpu.so"])
        assert out["stdout"] == "not really HAMi-core\n"
        mounts = {m["Destination"]: m for m in container(created["containerName"])["Mounts"]}
        assert mounts["/usr/local/gpubox/libvgpu.so"]["RW"] is False
        assert info_ok(d, f"{PREFIX}_hs")["gpuLimits"] == {"mode": "memory", "enforced": True,
                                                           "enforcedBy": "HAMi-core"}
        data = d.get("/api/v1/resources/gpus").data
        assert data["sharing"] == {"enforced": True, "enforcedBy": "HAMi-core"}
        assert all(dev["enforced"] for dev in data["devices"])
        # whole cards need no library: none is mounted or preloaded
        whole = create_ok(d, f"{PREFIX}_hw", gpus=1)
        assert "LD_PRELOAD" not in env_of(d, f"{PREFIX}_hw")
        mounts = {m["Destination"] for m in container(whole["containerName"])["Mounts"]}
        assert mounts == {"/etc/gpubox/gpu.env"}
    finally:
        stop_clean(d)


FAKE_HOST = """\
driver_version 535.104.05
0 GPU-0b000000-0000-4000-8000-000000000000 81920 lost NVIDIA A100-SXM4-80GB
1 GPU-0b000000-0000-4000-8000-000000000001 16384 ok Tesla T4
2 GPU-0b000000-0000-4000-8000-000000000002 81920 ok NVIDIA A100-SXM4-80GB
"""


def test_unhealthy_cards_are_never_chosen(tmp_path):
    desc = tmp_path / "gpus.txt"
    desc.write_text(FAKE_HOST)
    lost, t4, a100 = (f"GPU-0b000000-0000-4000-8000-00000000000{i}" for i in range(3))
    d = start(tmp_path, "nvml", "--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML),
              env=fake_gpu_env(desc))
    try:
        devs = devices(d)
        assert devs[0]["healthy"] is False and devs[0]["shareable"] is False
        # spread would pick the emptiest card, binpack the tightest: never the lost one
        assert share_ok(d, "sp", "8GB", gpuPolicy="spread")["gpus"] == [a100]
        assert share_ok(d, "bp", "8GB")["gpus"] == [t4]
        r = share(d, "two", "20GB", gpuCount=2)
        assert r.status == 409 and r.code == 1013, r.json
        r = share(d, "pin", "1GB", gpuUUIDs=[lost])
        assert r.code == 1013 and f"{lost} is unhealthy" in r.msg, r.json
        r = create(d, f"{PREFIX}_whole", gpus=1)
        assert r.code == 1013, r.json  # both healthy cards hold shares; the lost one is never used
        assert devices(d)[0]["tenants"] == []
        assert env_of(d, f"{PREFIX}_sp")["NVIDIA_VISIBLE_DEVICES"] == a100
    finally:
        stop_clean(d)


def race(fns):
    """Run every callable at once; their results in order."""
    results = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def run(i, fn):
        barrier.wait()
        try:
            results[i] = fn()
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SLOW + 60)
    assert not any(t.is_alive() for t in threads), "a request did not come back"
    for r in results:
        assert not isinstance(r, Exception), r
    return results


def slow_create(d, name, **spec):
    body = {"imageName": IMAGE, "replicaSetName": name, "cmd": LONG_RUNNING, **spec}
    conn = d.connection(timeout=SLOW)
    try:
        from conftest import request
        return request(conn, "POST", "/api/v1/replicaSet", json.dumps(body).encode(),
                       {"Content-Type": "application/json"})
    finally:
        conn.close()


def assert_store_api_and_containers_agree(d):
    """Every set's share is on the card the pool shows, with the memory its
    container's environment says; no card holds more than it has."""
    sets = {s["name"]: s for s in list_sets(d)}
    devs = {dev["uuid"]: dev for dev in gpu_devices(d)}
    for dev in devs.values():
        held = sum(a["memoryMiB"] for a in dev["allocations"])
        assert held == dev["allocatedMemoryMiB"] <= dev["memoryMiB"], dev
        assert dev["freeMemoryMiB"] == dev["memoryMiB"] - held, dev
        assert sorted(dev["tenants"]) == sorted(
            n for n, s in sets.items() if dev["uuid"] in s["gpus"]), dev
    for name, s in sets.items():
        (grant,) = s["gpuShares"]
        assert allocation(devs[grant["uuid"]], name)["memoryMiB"] == grant["memoryMiB"]
        env = env_of(d, name)
        assert env["NVIDIA_VISIBLE_DEVICES"] == grant["uuid"]
        assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{grant['memoryMiB']}m"
    return sets, devs


def test_concurrent_shares_never_over_pack(tmp_path):
    """30 requests of 10 GB race for two 80 GB cards: exactly 8 fit on each."""
    d = start(tmp_path, "race", "--simulate-gpus", "2xH100-80GB")
    try:
        names = [f"{PREFIX}_r{i:02d}" for i in range(30)]
        results = race([lambda n=n: slow_create(d, n, gpuMemory="10GB") for n in names])
        ok = [r for r in results if r.status == 200]
        refused = [r for r in results if r.status != 200]
        assert len(ok) == 16, [r.json for r in refused if r.code != 1013]
        assert all(r.code == 1013 for r in refused), [r.json for r in refused]
        sets, devs = assert_store_api_and_containers_agree(d)
        assert len(sets) == 16
        assert [dev["allocatedMemoryMiB"] for dev in devs.values()] == [81920, 81920]
        assert [len(dev["tenants"]) for dev in devs.values()] == [8, 8]
    finally:
        stop_clean(d)


def test_a_hundred_mixed_requests_on_mixed_cards(tmp_path):
    """100 requests of random sizes at once on a T4, an A100 and an H100. No
    card is over-packed, and no request was refused while a card could
    still take it: after the storm every refused size is larger than what
    any card has left (cards only fill up during the storm)."""
    d = start(tmp_path, "storm", "--simulate-gpus", "1xT4-16GB,1xA100-40GB,1xH100-80GB")
    try:
        rnd = random.Random(7)
        sizes = [rnd.choice([3072, 6144, 10240, 14336]) for _ in range(100)]
        policies = [rnd.choice(["binpack", "spread"]) for _ in range(100)]
        results = race([lambda i=i: slow_create(d, f"{PREFIX}_m{i:03d}", gpuMemory=sizes[i],
                                                gpuPolicy=policies[i])
                        for i in range(100)])
        refused = [sizes[i] for i, r in enumerate(results) if r.status != 200]
        assert all(r.code == 1013 for r in results if r.status != 200), \
            [r.json for r in results if r.status != 200 and r.code != 1013]
        sets, devs = assert_store_api_and_containers_agree(d)
        assert len(sets) == 100 - len(refused) and refused
        room = max(dev["freeMemoryMiB"] for dev in devs.values())
        assert room < min(refused), (room, sorted(set(refused)))
    finally:
        stop_clean(d)


def test_kill_9_keeps_every_grant(tmp_path):
    args = ("--simulate-gpus", MIXED, "--timeslice-replicas", "2")
    data = tmp_path / "data"
    d = start(tmp_path, "restart", *args, data=data)
    try:
        share_ok(d, "k1", "12GB")  # T4 0
        share_ok(d, "k2", "4GB")  # T4 0, full
        share_ok(d, "k3", "30GB", gpuPolicy="spread")  # H100
        share_ok(d, "k4", shared=True)  # T4 1, replica 0 of 2
        share_ok(d, "k5", shared=True)  # T4 1, replica 1
        create_ok(d, f"{PREFIX}_k6", gpus=1)  # A100, whole
        before = still(d.get("/api/v1/resources/gpus").data)
        infos = {n: info_ok(d, f"{PREFIX}_{n}") for n in ("k1", "k4", "k6")}
        stale = data / "gpu-env" / f"{PREFIX}_gone-1.env"
        stale.write_text("GPUBOX_GPU_SHARE=memory\n")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
        d.proc.stdout.close()
        d.log_file.close()

        d = start(tmp_path, "restart", *args, data=data)
        assert still(d.get("/api/v1/resources/gpus").data) == before
        for n, i in infos.items():
            again = info_ok(d, f"{PREFIX}_{n}")
            assert (again["gpus"], again["gpuShares"]) == (i["gpus"], i["gpuShares"])
        assert not stale.exists()
        assert (data / "gpu-env" / f"{PREFIX}_k1-1.env").exists()
        assert_container_has(d, f"{PREFIX}_k4", infos["k4"]["gpus"],
                             share_lines(8192, "timeslice"))
        # the pool still knows what is taken: the H100's 50 GB and nothing more
        assert share(d, "k7", "51GB").code == 1013
        assert card_of(d, share_ok(d, "k7", "50GB")) == 3
        assert share(d, "k8", shared=True).code == 1013
    finally:
        try:
            stop_clean(d)
        finally:
            remove_containers(PREFIX)


def test_host_settings_steer_placement(tmp_path):
    """--gpu-exclude keeps the H100 out of everything, --gpu-exclude-sharing
    keeps the T4s whole, 1.5x oversubscription lets the A100 promise 60 GB,
    and at most 2 tenants go on a card."""
    d = start(tmp_path, "settings", "--simulate-gpus", MIXED, "--gpu-exclude", "3",
              "--gpu-exclude-sharing", "0,1", "--gpu-max-tenants", "2",
              "--gpu-memory-oversubscription", "1.5")
    try:
        devs = devices(d)
        assert [devs[i]["excluded"] for i in range(4)] == [False, False, False, True]
        assert [devs[i]["shareable"] for i in range(4)] == [False, False, True, False]
        assert devs[2]["capacityMiB"] == A100 * 3 // 2 and devs[2]["maxTenants"] == 2
        assert devs[2]["replicas"]["total"] == 2  # 4 replicas, capped by the tenant limit
        big = share_ok(d, "big", "50GB")  # more than the A100 has, less than it may promise
        assert big["gpus"] == [uuid_of(d, 2)]
        share_ok(d, "small", "1GB")
        r = share(d, "third", "1GB")
        assert r.code == 1013 and "at the limit of 2 tenants" in r.msg, r.json
        r = share(d, "onh100", "1GB", gpuUUIDs=[uuid_of(d, 3)])
        assert r.code == 1013 and "excluded from scheduling" in r.msg, r.json
        r = share(d, "ont4", "1GB", gpuUUIDs=[uuid_of(d, 0)])
        assert r.code == 1013 and "excluded from sharing" in r.msg, r.json
        assert create_ok(d, f"{PREFIX}_whole", gpus=2)["gpus"] == [uuid_of(d, 0), uuid_of(d, 1)]
        assert create(d, f"{PREFIX}_more", gpus=1).code == 1013
        log = d.log()
        assert "4 time-slice replica(s) per card, tenant limit 2, memory x1.50" in log
        assert "scheduled but NOT enforced" in log
    finally:
        stop_clean(d)


@pytest.mark.parametrize("args, expect", [
    (["--timeslice-replicas", "0"], "--timeslice-replicas: '0' is not a whole number from 1"),
    (["--gpu-max-tenants", "lots"], "--gpu-max-tenants"),
    (["--gpu-memory-oversubscription", "8"], "not a factor from 1.0 (no oversubscription) to 4.0"),
    (["--gpu-exclude", "GPU-a,,GPU-b"], "--gpu-exclude"),
    (["--gpu-exclude-sharing", "2;3"], "--gpu-exclude-sharing"),
    (["--hami-core", "/nonexistent/libvgpu.so"], "--hami-core /nonexistent/libvgpu.so"),
    (["--simulate-gpus", "2xT4-16GB", "--gpu-exclude", "GPU-nope"],
     "'GPU-nope' is neither the UUID nor the index of a GPU on this host"),
    (["--simulate-gpus", "2xT4-16GB", "--gpu-exclude-sharing", "5"],
     "'5' is neither the UUID nor the index"),
])
def test_bad_sharing_settings_exit_2(tmp_path, args, expect):
    rc, _, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                              "--port-range", WINDOWS["settings"], *args])
    assert rc == 2, (rc, err)
    assert expect in err, err


def test_help_lists_the_sharing_settings():
    rc, out, _ = run_gpuboxd(["--help"])
    assert rc == 0
    lines = out.splitlines()
    for flag, default in [("--timeslice-replicas N", "4"),
                          ("--gpu-max-tenants N", "0 (no limit)"),
                          ("--gpu-memory-oversubscription FACTOR", "1.0 (none)"),
                          ("--gpu-exclude-sharing GPU[,GPU...]", "none"),
                          ("--gpu-exclude GPU[,GPU...]", "none"),
                          ("--hami-core PATH",
                           "none (share limits are scheduled but not enforced)")]:
        at = next((i for i, l in enumerate(lines) if l.strip() == flag), None)
        assert at is not None, f"--help lacks {flag}:\n{out}"
        assert f"(default: {default})" in " ".join(lines[at + 1:at + 3]), flag
