"""Live usage, card health and run limits (docs/usage.md) against the real
dockerd, with the fake NVML answering from a description file the tests
rewrite while gpuboxd runs: a process appears in an instance's container
(its real host PID, mapped through /proc/<pid>/cgroup), a process outside
any container takes memory (foreign), utilization drops to zero, an XID
arrives, a card disappears. Idle stops and time limits run on simulated
cards (always idle), and survive a restart of gpuboxd. And accounting
that stays small: usage answers after the rollup has folded and pruned the
intervals (--accounting-retention).
"""
import os
import secrets
import sqlite3
import time

import pytest

import conftest
from conftest import FAKE_NVML, Daemon, docker_get, fake_gpu_env, run_gpuboxd
from rsutil import (IMAGE, call, create, create_ok, delete, execute_ok, lifecycle, patch,
                    remove_containers, rs_path, wait_until, wipe, RUN_TAG)
from secutil import as_, write_tokens
from rsutil import info_live as info_ok  # these tests read the live usage

PREFIX = f"usage{RUN_TAG}_"
PORTS = "64700-64719"

CARDS = """driver_version 535.104.05
0 GPU-aaaaaaaa-0000-0000-0000-000000000000 16384 ok Tesla T4
1 GPU-bbbbbbbb-1111-1111-1111-111111111111 16384 ok Tesla T4
"""
CARD0, CARD1 = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-1111-1111-1111-111111111111"


def rewrite(path, text):
    """Replace the description so the fakes see a new file (size or mtime)."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def devices(d):
    r = call(d, "GET", "/api/v1/resources/gpus")
    assert r.status == 200, r.json
    return {dev["uuid"]: dev for dev in r.data["devices"]}


def scrape(d):
    conn = d.connection()
    try:
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 200, body
        return body
    finally:
        conn.close()


def container_pid(name):
    return docker_get(f"/containers/{name}/json")["State"]["Pid"]


@pytest.fixture
def fake(tmp_path):
    desc = tmp_path / "gpus.txt"
    desc.write_text(CARDS)
    return desc


@pytest.fixture
def nvml_daemon(start_daemon, fake):
    d = start_daemon("--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML), "--usage-interval",
                     "0.2", "--port-range", PORTS, env=fake_gpu_env(fake))
    yield d
    for rs in call(d, "GET", "/api/v1/replicaSet?all=true").data["replicaSets"]:
        delete(d, rs["name"], purge=True)
    remove_containers(PREFIX)


def test_processes_map_to_instances_and_foreign_memory(nvml_daemon, fake):
    d = nvml_daemon
    name = PREFIX + "proc"
    create_ok(d, name, gpus=1)
    pid = container_pid(name + "-1")  # it holds card 0, the lowest free index
    rewrite(fake, CARDS + f"usage 0 5000 37\nprocess 0 {pid} 3000 30\n"
                          f"process 1 {os.getpid()} 1000\n")

    def seen():
        usage = info_ok(d, name)["usage"]
        return usage and usage["cards"] and usage["cards"][0]["memoryUsedMiB"] == 3000 and usage
    usage = wait_until(seen, timeout=15)
    assert usage, info_ok(d, name)
    card = usage["cards"][0]
    assert card["uuid"] == CARD0 and card["utilization"] == 30 and card["shareMiB"] == 16384
    assert card["overShare"] is False and card["healthy"] is True
    devs = wait_until(lambda: (lambda v: v[CARD1]["usage"]["foreignMemoryMiB"] == 1000 and v)(
        devices(d)), timeout=10)
    assert devs, devices(d)
    assert devs[CARD0]["usage"]["memoryUsedMiB"] == 5000
    assert devs[CARD0]["usage"]["utilization"] == 37
    assert devs[CARD0]["usage"]["foreignMemoryMiB"] == 0
    assert devs[CARD0]["allocations"][0]["memoryUsedMiB"] == 3000
    assert devs[CARD1]["usage"]["processes"] == 1
    # The allocator places shares beside the foreign memory: card 1 has
    # 16384 - 1000 MiB left, so a share of 16000 MiB does not fit, 15000 does.
    r = create(d, PREFIX + "big", gpus=1, gpuMemory=16000)
    assert r.status != 200 and "15384" in r.msg, r.json
    assert devices(d)[CARD1]["freeMemoryMiB"] == 15384
    create_ok(d, PREFIX + "fits", gpus=1, gpuMemory=15000)
    # Prometheus sees the same.
    text = scrape(d)
    assert 'gpubox_gpu_foreign_memory_bytes{uuid="%s",index="1",model="Tesla T4"} %d' % (
        CARD1, 1000 * 1024 * 1024) in text
    assert 'gpubox_instance_gpu_memory_used_bytes{set="%s"' % name in text


def test_utilization_drop_and_over_share(nvml_daemon, fake):
    d = nvml_daemon
    name = PREFIX + "share"
    create_ok(d, name, gpus=1, gpuMemory="2GB")
    pid = container_pid(name + "-1")
    rewrite(fake, CARDS + f"process 0 {pid} 3000 80\n")
    usage = wait_until(lambda: (lambda u: u and u["cards"][0]["utilization"] == 80 and u)(
        info_ok(d, name)["usage"]), timeout=15)
    assert usage and usage["cards"][0]["overShare"] is True, info_ok(d, name)
    rewrite(fake, CARDS + f"process 0 {pid} 1000 0\n")
    usage = wait_until(lambda: (lambda u: u and u["cards"][0]["utilization"] == 0 and u)(
        info_ok(d, name)["usage"]), timeout=15)
    assert usage and usage["cards"][0]["overShare"] is False and usage["idleSince"], usage


def test_critical_xid_marks_card_unhealthy_until_admin_clears(nvml_daemon, fake):
    d = nvml_daemon
    rewrite(fake, CARDS + "xid 1 13\n")  # not critical: noted only
    wait_until(lambda: "XID 13" in d.log(), timeout=10)
    assert devices(d)[CARD1]["healthy"] is True
    rewrite(fake, CARDS + "xid 1 13\nxid 1 79\n")
    dev = wait_until(lambda: (lambda v: not v["healthy"] and v)(devices(d)[CARD1]), timeout=10)
    assert dev and dev["unhealthy"]["reason"] == "xid" and dev["unhealthy"]["xid"] == 79, dev
    # No new placement on it: card 0 is taken, card 1 is unhealthy.
    create_ok(d, PREFIX + "x0", gpus=1)
    r = create(d, PREFIX + "x1", gpus=1)
    assert r.status != 200, r.json
    events = call(d, "GET", "/api/v1/events").data["events"]
    assert events[0]["kind"] == "gpu.unhealthy" and events[0]["gpu"] == CARD1
    text = scrape(d)
    assert 'gpubox_gpu_healthy{uuid="%s",index="1",model="Tesla T4"} 0' % CARD1 in text
    assert 'xid="79"} 1' in text
    # An admin clears it (no token file: everyone is admin); the mark was kept
    # across nothing else, and placements come back.
    r = call(d, "PATCH", f"/api/v1/resources/gpus/{CARD1}/healthy")
    assert r.status == 200 and r.data["healthy"] is True, r.json
    create_ok(d, PREFIX + "x1", gpus=1)
    assert call(d, "PATCH", "/api/v1/resources/gpus/GPU-nope/healthy").status == 404


def test_unhealthy_mark_survives_restart(start_daemon, fake, tmp_path):
    args = ("--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML), "--usage-interval", "0.2",
            "--port-range", PORTS)
    data = tmp_path / "keep"
    d = start_daemon(*args, env=fake_gpu_env(fake), data_dir=data)
    rewrite(fake, CARDS.replace(f"1 {CARD1} 16384 ok Tesla T4\n", ""))  # card 1 is gone
    dev = wait_until(lambda: (lambda v: not v["healthy"] and v)(devices(d)[CARD1]), timeout=10)
    assert dev and dev["unhealthy"]["reason"] == "lost", dev
    d.stop()
    rewrite(fake, CARDS)  # back on the bus: still not trusted until cleared
    d = start_daemon(*args, env=fake_gpu_env(fake), data_dir=data)
    assert devices(d)[CARD1]["healthy"] is False


# --- run limits, on simulated cards (always idle) ---------------------------------------------


SIM = ("--simulate-gpus", "2xT4-16GB", "--usage-interval", "0.2", "--port-range", PORTS)


@pytest.fixture
def sim(start_daemon, tmp_path):
    started = []

    def start():
        d = start_daemon(*SIM, data_dir=tmp_path / "sim")
        started.append(d)
        return d
    yield start
    d = started[-1]
    for rs in call(d, "GET", "/api/v1/replicaSet?all=true").data["replicaSets"]:
        delete(d, rs["name"], purge=True)
    remove_containers(PREFIX)


def wait_stopped(d, name, timeout):
    return wait_until(lambda: (lambda i: i["state"] == "stopped" and i)(info_ok(d, name)),
                      timeout=timeout, interval=0.25)


def iso(s):
    return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def test_limits_are_checked(sim):
    d = sim()
    for value, code in (("5s", 400), ("soon", 400), ("1h1h", 400), (30, 400), ("400d", 400)):
        r = create(d, PREFIX + "bad", idleStop=value)
        assert r.status == 400, (value, r.json)
    assert call(d, "GET", rs_path(PREFIX + "bad")).status == 404
    name = PREFIX + "lim"
    create_ok(d, name, gpus=1, maxDuration="2h")
    i = info_ok(d, name)
    assert i["maxDuration"] == "2h" and i["idleStop"] == "" and "maxDuration" not in i["spec"]
    assert iso(i["stopAt"]) - iso(i["runningSince"]) == 7200
    # The limits alone change the record in place: no new version.
    r = patch(d, name, {"idleStop": "1h30m", "maxDuration": ""})
    assert r.status == 200 and r.data["changed"] is True, r.json
    i = info_ok(d, name)
    assert i["version"] == 1 and i["idleStop"] == "1h30m" and "stopAt" not in i
    assert lifecycle(d, name, "stop").status == 200
    assert info_ok(d, name)["stopped"]["reason"] == "request"
    r = patch(d, name, {"idleStop": "45m"})  # a stopped set takes them too
    assert r.status == 200 and info_ok(d, name)["idleStop"] == "45m", r.json


def test_idle_stop_and_exec_keeps_it_busy(sim):
    d = sim()
    name, busy = PREFIX + "idle", PREFIX + "busy"
    create_ok(d, name, gpus=1, idleStop="10s")
    create_ok(d, busy, gpus=1, idleStop="10s")
    start = time.monotonic()
    while time.monotonic() - start < 14:  # an exec every 3 s keeps `busy` running
        execute_ok(d, busy, ["true"])
        time.sleep(3)
    i = wait_stopped(d, name, timeout=20)
    assert i and i["stopped"]["reason"] == "idle", info_ok(d, name)
    assert info_ok(d, busy)["state"] == "running"
    assert i["gpus"] == [] and i["ports"] == []
    ev = [e for e in call(d, "GET", "/api/v1/events").data["events"] if e["kind"] == "autostop"]
    assert ev and ev[0]["replicaSet"] == name and ev[0]["reason"] == "idle"
    assert "stop %s reason=idle -> ok" % name in d.log()
    # It starts again, and its clock starts over.
    assert lifecycle(d, name, "restart").status == 200
    assert info_ok(d, name)["state"] == "running"


def test_max_duration_survives_a_restart(sim):
    d = sim()
    name = PREFIX + "max"
    create_ok(d, name, gpus=1, maxDuration="20s")
    since = iso(info_ok(d, name)["runningSince"])
    time.sleep(6)
    d.stop()
    time.sleep(4)
    d = sim()
    i = wait_stopped(d, name, timeout=40)
    assert i and i["stopped"]["reason"] == "maxDuration", info_ok(d, name)
    # Stopped 20 s after its run began, not 20 s after gpuboxd came back.
    assert 19 <= iso(i["stopped"]["at"]) - since <= 27, (since, i["stopped"])


def test_idle_clock_survives_a_restart(sim):
    d = sim()
    name = PREFIX + "idlerestart"
    create_ok(d, name, gpus=1, idleStop="20s")
    since = iso(info_ok(d, name)["runningSince"])
    time.sleep(10)
    d.stop()
    d = sim()
    i = wait_stopped(d, name, timeout=40)
    assert i and i["stopped"]["reason"] == "idle", info_ok(d, name)
    # A clock started over at the restart would stop it 30 s or more after.
    assert iso(i["stopped"]["at"]) - since <= 28, (since, i["stopped"])


def test_sampling_off(start_daemon):
    d = start_daemon("--simulate-gpus", "1xT4-16GB", "--usage-interval", "0")
    dev = list(devices(d).values())[0]
    assert dev["usage"] is None
    assert "usage monitor: no sampling" in d.log()


# --- accounting that stays small: the rollup (docs/users.md, "Accounting") -----------------

ACCT_ADMIN = "adm-" + secrets.token_hex(20)
ACCT_PORTS = "64720-64739"


def acct_keys(d, user, kind="acct"):
    """The keys of user's closed intervals (kind acct), rollup state
    (acctsum) or days (acctday) in the daemon's store."""
    needle = f"/accounts/{kind}/{user}"
    if conftest.STORE_BACKEND == "etcd":
        prefix = "/" + conftest.store_args(d.data_dir)[1].split("/", 3)[3]
        return [k for k in conftest.shared_etcd().range(prefix) if needle in k]
    db = sqlite3.connect(f"file:{d.data_dir}/state.db?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT key FROM kv WHERE instr(key, ?) > 0", (needle,))]
    finally:
        db.close()


def acct_daemon(tmp_path, tokens):
    return Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                   "--simulate-gpus", "4xA100-80GB", "--port-range", ACCT_PORTS, "--token-file",
                   str(tokens), "--accounting-retention", "2s"],
                  tmp_path / "data", tmp_path / "gpuboxd.log").start()


def acct_ok(r):
    assert r.status == 200 and r.code == 200, r.json
    return r.json["data"]


def used(d, user, query=""):
    """user's (cardSeconds, shareMiBSeconds, {set: cardSeconds}) in the window."""
    data = acct_ok(as_(d, ACCT_ADMIN, "GET", f"/api/v1/usage?user={user}{query}"))
    u = [x for x in data["users"] if x["user"] == user]
    if not u:
        return 0, 0, {}
    return u[0]["cardSeconds"], u[0]["shareMiBSeconds"], {s["name"]: s["cardSeconds"]
                                                          for s in u[0]["sets"]}


def test_usage_keeps_its_meaning_after_the_rollup_prunes_the_intervals(tmp_path):
    """With --accounting-retention 2s the intervals are folded into the
    rollup and deleted seconds after they close: totals, whole-hour
    windows, windows before and after, /metrics and a restart answer as the
    intervals did."""
    tokens = write_tokens(tmp_path / "tokens", f"alice:admin:{ACCT_ADMIN}\n")
    d = acct_daemon(tmp_path, tokens)
    try:
        user = "rol" + secrets.token_hex(2)
        tok = acct_ok(as_(d, ACCT_ADMIN, "POST", "/api/v1/users",
                          {"name": user, "role": "user"}))["token"]
        name = f"{PREFIX}acct{secrets.token_hex(2)}"
        body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 2,
                "cmd": ["sleep", "3600"]}
        w0 = time.time()
        t0 = time.monotonic()
        acct_ok(as_(d, tok, "POST", "/api/v1/replicaSet", body))
        t1 = time.monotonic()
        time.sleep(3)
        t2 = time.monotonic()
        acct_ok(as_(d, tok, "PATCH", rs_path(name), {"gpuPatch": {"gpuCount": 1}}))
        t3 = time.monotonic()
        time.sleep(2)
        t4 = time.monotonic()
        acct_ok(as_(d, tok, "PATCH", rs_path(name, "/stop")))
        t5 = time.monotonic()
        w1 = time.time()
        low, high = 2 * (t2 - t1) + (t4 - t3), 2 * (t3 - t0) + (t5 - t2)

        # Folded and past the retention: the intervals are gone...
        assert wait_until(lambda: not acct_keys(d, user), timeout=20), acct_keys(d, user)
        assert acct_keys(d, user, "acctsum") and acct_keys(d, user, "acctday")
        # ...and still count.
        cs, mib, sets = used(d, user)
        assert low - 1 <= cs <= high + 1, (low, cs, high)
        assert mib == 0 and sets == {name: pytest.approx(cs, abs=0.01)}, sets
        # Whole hours are exact; before the set and in the future, nothing.
        h0, h1 = int(w0 // 3600 * 3600), int(w1 // 3600 * 3600) + 3600
        assert used(d, user, f"&from={h0}&to={h1}")[0] == pytest.approx(cs, abs=0.01)
        assert used(d, user, f"&from={h0 - 7200}&to={h0}") == (0, 0, {})
        assert used(d, user, f"&from={h1 + 60}&to={h1 + 3600}")[:2] == (0, 0)
        # The owner reads the same about themself; /metrics counts it.
        mine = acct_ok(as_(d, tok, "GET", "/api/v1/usage"))["users"]
        assert mine[0]["cardSeconds"] == pytest.approx(cs, abs=0.01)
        conn = d.connection()
        try:
            conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {ACCT_ADMIN}"})
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        line = [x for x in text.splitlines()
                if x.startswith("gpubox_user_card_seconds_total{") and f'user="{user}"' in x]
        assert len(line) == 1 and float(line[0].split()[-1]) == pytest.approx(cs, abs=0.01), line

        # The rollup is in the store: a restart keeps it.
        d.stop()
        d = acct_daemon(tmp_path, tokens)
        assert used(d, user)[0] == pytest.approx(cs, abs=0.01)
        # An open share goes on counting to now while folds run around it.
        share = f"{PREFIX}acsh{secrets.token_hex(2)}"
        body = {"imageName": IMAGE, "replicaSetName": share, "gpuCount": 1, "gpuMemory": "1GB",
                "cmd": ["sleep", "3600"]}
        s0 = time.monotonic()
        acct_ok(as_(d, tok, "POST", "/api/v1/replicaSet", body))
        s1 = time.monotonic()
        time.sleep(3.5)
        s2 = time.monotonic()
        _, mib, _ = used(d, user)
        s3 = time.monotonic()
        assert 1024 * (s2 - s1) - 1024 <= mib <= 1024 * (s3 - s0) + 1024, (mib, s2 - s1)
        assert used(d, user)[0] == pytest.approx(cs, abs=0.01)
    finally:
        d.token = ACCT_ADMIN
        wipe(d, PREFIX)
        d.stop()


def test_accounting_retention_is_checked(tmp_path):
    rc, _, err = run_gpuboxd(["--accounting-retention", "soon", "--data-dir",
                              str(tmp_path / "data")])
    assert rc != 0 and "accounting-retention" in err and "at least 1s" in err, err
