"""gpuboxd and its etcd store as an operator meets them (issue 6, points 4-6):
start-up while etcd is down (waits, says so, gives up after --store-wait,
stops cleanly on SIGTERM meanwhile), one daemon per key prefix (a second
one on the same prefix gives up, one on another prefix runs beside it),
history after etcd compacted its old revisions, and moving a daemon's
state (replica sets, volumes) from SQLite to etcd and back with
gpubox-store-migrate, which refuses a store a running daemon holds.

Each test starts its own etcd; the module runs whatever the session's
--store-backend is.
"""
import signal
import subprocess
import threading
import time

import pytest

from conftest import BUILD_DIR, Daemon, run_gpuboxd
from etcdutil import EtcdServer
from rsutil import (RUN_TAG, call, container, create_ok, delete, execute_ok, gpu_map,
                    held_gpus, history, info_ok, lifecycle, list_sets, patch_ok, ports_state,
                    remove_containers, remove_volumes_by_hand, rollback, still, used_ports)

PREFIX = "e2es" + RUN_TAG
PORT_RANGE = "61750-61799"
MIGRATE = BUILD_DIR / "gpubox-store-migrate"


@pytest.fixture
def etcd(tmp_path):
    e = EtcdServer(tmp_path / "etcd").start()
    yield e
    e.stop()


@pytest.fixture
def daemons(tmp_path):
    """start(store_url or None, *extra): a daemon on tmp_path/data. At the
    end, the last one still running deletes every set and volume."""
    started = []

    def start(store_url, *extra):
        store = ["--store", store_url] if store_url else ["--store",
                                                          f"sqlite://{tmp_path}/data/state.db"]
        d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                    "--simulate-gpus", "4xA100-80GB", "--port-range", PORT_RANGE, *store, *extra],
                   tmp_path / "data", tmp_path / f"gpuboxd{len(started)}.log")
        started.append(d)
        return d.start()

    yield start
    try:
        running = [d for d in started if d.proc.poll() is None]
        if running:
            d = running[-1]
            for rs in list_sets(d, all_=True):
                delete(d, rs["name"], purge=True)
            for v in call(d, "GET", "/api/v1/volumes").data["volumes"]:
                call(d, "DELETE", f"/api/v1/volumes/{v['name']}")
        for d in started:
            d.stop()
    finally:
        remove_containers(PREFIX)
        remove_volumes_by_hand(tmp_path / "data", PREFIX)


# ---- start-up with etcd down -------------------------------------------------

def test_start_up_waits_for_etcd(etcd, daemons):
    etcd.stop()
    started = {}

    def start():
        try:
            started["daemon"] = daemons(etcd.url("/startup"))
        except AssertionError as e:
            started["error"] = e

    # The daemon waits in a thread; etcd must be started from this one.
    t0 = time.monotonic()
    waiting = threading.Thread(target=start)
    waiting.start()
    time.sleep(3)
    assert waiting.is_alive(), started
    etcd.restart()
    waiting.join(30)
    assert "daemon" in started, started
    d = started["daemon"]
    assert time.monotonic() - t0 > 3
    log = d.log()
    assert f"store: etcd at {etcd.endpoint} is unreachable" in log, log
    assert "retrying in 1 s" in log, log
    assert "answering now" in log, log
    assert d.get("/healthz").status == 200
    assert create_ok(d, f"{PREFIX}_late", gpus=1)["version"] == 1


def test_start_up_gives_up_after_store_wait(etcd, tmp_path):
    etcd.stop()
    t0 = time.monotonic()
    rc, out, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                                "--simulate-gpus", "1xT4-16GB", "--store", etcd.url("/gone"),
                                "--store-wait", "2"])
    took = time.monotonic() - t0
    assert rc == 1, (rc, err)
    assert 1.5 < took < 10, took
    assert "ready" not in out
    assert f"etcd at {etcd.endpoint} is unreachable" in err
    assert "did not answer within 2s (--store-wait)" in err, err


def test_sigterm_while_waiting_for_etcd_stops_cleanly(etcd, tmp_path):
    etcd.stop()
    p = subprocess.Popen([str(BUILD_DIR / "gpuboxd"), "--listen", "127.0.0.1:0", "--data-dir",
                          str(tmp_path / "d"), "--simulate-gpus", "1xT4-16GB", "--store",
                          etcd.url("/gone")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    assert time.monotonic() - t0 < 2
    assert "retrying in 1 s" in err and "during start-up" in err, err
    assert "ready" not in out


def test_sqlite_store_is_not_waited_for(tmp_path):
    (tmp_path / "file").write_text("")
    t0 = time.monotonic()
    rc, _, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                              "--simulate-gpus", "1xT4-16GB",
                              "--store", f"sqlite://{tmp_path}/file/sub/state.db"])
    assert rc == 1, err
    assert time.monotonic() - t0 < 5
    assert "retrying" not in err


# ---- one daemon per key prefix -------------------------------------------------

def test_second_daemon_on_a_prefix_gives_up_another_prefix_works(etcd, daemons, tmp_path):
    first = daemons(etcd.url("/shared"))
    pid = first.proc.pid
    owner = etcd.range("/shared/daemon/")
    assert list(owner) == ["/shared/daemon/owner"], owner
    assert f'"pid":{pid}' in owner["/shared/daemon/owner"]

    # Another server (its own data dir) configured with the same prefix by
    # mistake: it waits --store-wait for the claim to expire, then gives up.
    t0 = time.monotonic()
    rc, out, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "other"),
                                "--simulate-gpus", "4xA100-80GB", "--store", etcd.url("/shared"),
                                "--store-wait", "3"])
    took = time.monotonic() - t0
    assert rc == 1, err
    assert "ready" not in out
    assert f"the store etcd at {etcd.endpoint} (key /shared/daemon/owner) is in use by gpuboxd " \
           f"pid {pid}" in err, err
    assert "its lease expires in" in err and "a key prefix of its own" in err, err
    assert "was not free within 3s (--store-wait)" in err, err
    assert 2.5 < took < 10, took

    # With a prefix of its own it runs beside the first; both serve.
    other = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "other"),
                    "--simulate-gpus", "4xA100-80GB", "--port-range", "61740-61749",
                    "--store", etcd.url("/apart")], tmp_path / "other", tmp_path / "other.log")
    other.start()
    try:
        assert create_ok(first, f"{PREFIX}_first", gpus=4)["version"] == 1
        assert create_ok(other, f"{PREFIX}_apart", gpus=4)["version"] == 1
        assert delete(other, f"{PREFIX}_apart", purge=True).status == 200
    finally:
        assert other.stop() == 0
    assert delete(first, f"{PREFIX}_first", purge=True).status == 200
    assert first.stop() == 0
    assert etcd.range("/shared/daemon/") == {}, "stopping did not release the claim"


# ---- history after compaction ------------------------------------------------

def test_history_survives_compaction(etcd, daemons):
    d = daemons(etcd.url("/compact"))
    name = f"{PREFIX}_hist"
    for v in (1, 2, 3):
        created = create_ok(d, name, gpus=1, env=[f"VERSION={v}"], containerPorts=["22"])
        assert created["version"] == v
        if v < 3:
            assert delete(d, name).status == 200
    before = history(d, name).data
    old_rev = etcd.revision() - 4

    compacted_at = etcd.compact()
    with pytest.raises(OSError):  # the old revisions are gone from etcd
        etcd.range_at("/compact/", old_rev)
    after = history(d, name).data
    assert after == before
    assert [h["version"] for h in after["history"]] == [3, 2, 1]
    assert [h["spec"]["env"] for h in after["history"]] == [[f"VERSION={v}"] for v in (3, 2, 1)]

    # A new version and a rollback to a version written before the
    # compaction: the spec comes from its explicit history key, and the
    # system disk is carried through both.
    assert execute_ok(d, name, ["sh", "-c", "echo mine > /root/kept"])["exitCode"] == 0
    patched = patch_ok(d, name, {"gpuPatch": {"gpuCount": 2}})
    assert patched["version"] == 4 and len(patched["gpus"]) == 2
    r = rollback(d, name, 1)
    assert r.status == 200, r.json
    assert r.data["version"] == 5 and r.data["containerName"] == f"{name}-5"
    assert len(r.data["gpus"]) == 1
    assert info_ok(d, name)["spec"]["env"] == ["VERSION=1"]
    assert execute_ok(d, name, ["cat", "/root/kept"])["stdout"] == "mine\n"
    after = history(d, name).data
    assert [h["version"] for h in after["history"]] == [5, 4, 3, 2, 1]
    assert after["history"][0]["reason"] == "rollback to 1"
    assert after["history"][0]["spec"] == after["history"][4]["spec"]

    # Everything keeps working on the compacted store, across a restart too.
    assert lifecycle(d, name, "stop").status == 200
    create_ok(d, f"{PREFIX}_new", gpus=2)
    assert etcd.revision() > compacted_at
    d.stop()
    d2 = daemons(etcd.url("/compact"))
    assert history(d2, name).data == after
    assert info_ok(d2, name)["state"] == "stopped"
    assert len(held_gpus(d2)) == 2
    assert delete(d2, f"{PREFIX}_new").status == 200


# ---- moving between backends -------------------------------------------------

def populate(d):
    """Sets in every state, holding GPUs and ports, and a volume with a file
    on it bound into the running set."""
    r = call(d, "POST", "/api/v1/volumes", {"name": f"{PREFIX}_data", "size": "64MB"})
    assert r.status == 200, r.json
    create_ok(d, f"{PREFIX}_run", gpus=2, containerPorts=["22"],
              ports=[{"hostPort": 61799, "containerPort": 80}],
              binds=[{"src": f"{PREFIX}_data", "dest": "/data"}])
    execute_ok(d, f"{PREFIX}_run", ["sh", "-c", "echo kept > /data/file"])
    create_ok(d, f"{PREFIX}_paused", gpus=1, containerPorts=["8888"])
    assert lifecycle(d, f"{PREFIX}_paused", "pause").status == 200
    create_ok(d, f"{PREFIX}_stopped", gpus=1)
    assert lifecycle(d, f"{PREFIX}_stopped", "stop").status == 200
    create_ok(d, f"{PREFIX}_gone", gpus=1)
    assert delete(d, f"{PREFIX}_gone").status == 200


def view(d):
    sets = list_sets(d, all_=True)
    volumes = call(d, "GET", "/api/v1/volumes").data["volumes"]
    return {"sets": still(sets),
            "infos": {s["name"]: still(info_ok(d, s["name"])) for s in sets
                      if s["state"] != "deleted"},
            "history": {s["name"]: history(d, s["name"]).data for s in sets},
            "volumes": volumes,
            "volume history": {v["name"]: call(d, "GET", f"/api/v1/volumes/{v['name']}/history")
                               .data for v in volumes},
            "gpus": gpu_map(d), "ports": ports_state(d)}


def data_file(d):
    return execute_ok(d, f"{PREFIX}_run", ["cat", "/data/file"])["stdout"]


def migrate(*args):
    p = subprocess.run([str(MIGRATE), *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def test_migrate_sqlite_to_etcd_and_back(etcd, daemons, tmp_path):
    d = daemons(None)
    populate(d)
    before = view(d)
    assert len(before["sets"]) == 4 and sum(before["gpus"].values()) == 3
    # Not while the daemon runs: its writes would be lost in the target.
    to_etcd = etcd.url("/migrated")
    rc, out = migrate("--from", f"sqlite://{tmp_path}/data/state.db", "--to", to_etcd)
    assert rc == 1, out
    assert f"claiming the source sqlite://{tmp_path}/data/state.db" in out, out
    assert f"in use by gpuboxd pid {d.proc.pid}" in out, out
    assert etcd.range("/migrated/") == {}
    d.stop()

    rc, out = migrate("--from", f"sqlite://{tmp_path}/data/state.db", "--to", to_etcd)
    assert rc == 0, out
    assert etcd.range("/migrated/daemon/") == {}, "the tool's claim outlived it"
    d2 = daemons(to_etcd)
    assert view(d2) == before
    assert len(before["volumes"]) == 1
    assert data_file(d2) == "kept\n"
    assert "store: etcd at" in d2.log()
    # The GPUs and ports held before are held still: a new set gets others.
    more = create_ok(d2, f"{PREFIX}_more", gpus=1, containerPorts=["22"])
    assert more["gpus"][0] not in {u for u, v in before["gpus"].items() if v}
    assert more["ports"][0]["hostPort"] not in before["ports"]["usedPorts"]
    assert delete(d2, f"{PREFIX}_more", purge=True).status == 200
    assert lifecycle(d2, f"{PREFIX}_paused", "continue").status == 200
    assert container(f"{PREFIX}_paused-1")["State"]["Running"] is True
    assert lifecycle(d2, f"{PREFIX}_paused", "pause").status == 200
    moved = view(d2)
    back = f"sqlite://{tmp_path}/back/state.db"
    (tmp_path / "back").mkdir()
    rc, out = migrate("--from", to_etcd, "--to", back)
    assert rc == 1 and f"in use by gpuboxd pid {d2.proc.pid}" in out, out
    d2.stop()

    rc, out = migrate("--from", to_etcd, "--to", back)  # the refused run wrote nothing
    assert rc == 0, out
    d3 = daemons(back)
    assert view(d3) == moved
    assert used_ports(d3) == before["ports"]["usedPorts"]
    assert data_file(d3) == "kept\n"
