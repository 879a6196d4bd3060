"""gpuboxd on etcd while etcd goes away (issue 6, point 4): etcd killed and
started again, etcd frozen with SIGSTOP and thawed, and writes that a
delaying network holds back until gpuboxd has given up on them.

During an outage every call that needs the store answers 503 with code
1111 and a message naming etcd, fast (the store URL sets short timeouts);
nothing is half-done: no container appears for a failed create, GPUs and
ports stay free, a running set stays as it was. GET /resources/gpus and
/resources/ports answer from memory; /healthz says the store is down.
When etcd answers again gpuboxd works again by itself, and the names the
failed creates asked for are free.

A write etcd did not confirm may still land: the daemon keeps what it
concerns held, and settles it with etcd once etcd answers - a create that
landed late is undone, one that never landed is given back.

The daemon's claim on its key prefix (a lease of 10 s, kept alive every
2 s) is lost when etcd is away for longer than that: gpuboxd says so in its
log, refuses every change, and claims the prefix again once etcd is back.
The same happens when another daemon's claim has replaced its own: changes
answer 503 naming that daemon until it is gone.

Each test has its own etcd (or its own proxy in front of one), so the
outages touch no other test. This module runs whatever the session's
--store-backend is.
"""
import json
import time

import pytest

from conftest import Daemon, docker_request
from etcdutil import EtcdServer, HoldingProxy, b64
from rsutil import (RUN_TAG, call, container, containers_with_prefix, create, create_ok,
                    delete, gpu_map, held_gpus, history, info, lifecycle, list_sets,
                    remove_containers, remove_volumes_by_hand, used_ports, wait_until)

PREFIX = "e2eo" + RUN_TAG
PORT_RANGE = "61700-61749"
# Short timeouts so that a frozen etcd costs a test 1.5 s per call, not 5.
TIMEOUTS = {"timeout_ms": 1500, "connect_timeout_ms": 500}


@pytest.fixture
def etcd(tmp_path):
    e = EtcdServer(tmp_path / "etcd").start()
    yield e
    e.stop()


@pytest.fixture
def daemons(tmp_path):
    started = []

    def start(store_url):
        d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                    "--simulate-gpus", "4xA100-80GB", "--port-range", PORT_RANGE,
                    "--store", store_url], tmp_path / "data",
                   tmp_path / f"gpuboxd{len(started)}.log")
        started.append(d)
        return d.start()

    yield start
    try:
        for d in started:
            d.stop()
    finally:
        remove_containers(PREFIX)
        remove_volumes_by_hand(tmp_path / "data", PREFIX)


def assert_store_down(r, endpoint):
    assert r.status == 503 and r.code == 1111, (r.status, r.json)
    assert f"etcd at {endpoint}" in r.msg, r.msg


def assert_failed_create_left_nothing(d, name, gpus_before, ports_before):
    assert container(f"{name}-1") is None
    assert held_gpus(d) == gpus_before
    assert used_ports(d) == ports_before


def healthz_ok(d):
    return d.get("/healthz").status == 200


def test_etcd_killed_and_started_again(etcd, daemons):
    d = daemons(etcd.url("/outage", **TIMEOUTS))
    before = create_ok(d, f"{PREFIX}_before", gpus=1, containerPorts=["22"])
    gpus_before, ports_before = held_gpus(d), used_ports(d)

    etcd.kill()
    t0 = time.monotonic()
    r = create(d, f"{PREFIX}_during", gpus=2, containerPorts=["22"])
    assert time.monotonic() - t0 < 3, "a create with etcd down must fail fast"
    assert_store_down(r, etcd.endpoint)
    assert "nothing was changed" in r.msg and "unreachable" in r.msg, r.msg
    assert_failed_create_left_nothing(d, f"{PREFIX}_during", gpus_before, ports_before)

    # Reads of the store fail the same way; the resources answer from memory.
    for path in ("/api/v1/replicaSet", f"/api/v1/replicaSet/{PREFIX}_before",
                 f"/api/v1/replicaSet/{PREFIX}_before/history"):
        assert_store_down(d.get(path), etcd.endpoint)
    assert d.get("/api/v1/resources/gpus").status == 200
    assert d.get("/api/v1/resources/ports").status == 200
    h = d.get("/healthz")
    assert h.status == 503 and h.code == 1111, h.json
    assert h.data["store"]["ok"] is False and h.data["docker"]["ok"] is True, h.json
    assert etcd.endpoint in h.data["store"]["error"]

    # So does a volume's create: no storage, no Docker volume.
    r = call(d, "POST", "/api/v1/volumes", {"name": f"{PREFIX}_vol", "size": "32MB"})
    assert_store_down(r, etcd.endpoint)
    assert docker_request("GET", f"/volumes/gpubox_{PREFIX}_vol").status == 404
    assert not (d.data_dir / "volumes" / f"{PREFIX}_vol.img").exists()

    # Changes to the running set fail before touching Docker.
    for action in ("stop", "pause"):
        assert_store_down(lifecycle(d, f"{PREFIX}_before", action), etcd.endpoint)
    assert_store_down(delete(d, f"{PREFIX}_before"), etcd.endpoint)
    assert container(before["containerName"])["State"]["Running"] is True
    assert held_gpus(d) == gpus_before

    etcd.restart()
    assert wait_until(lambda: healthz_ok(d), timeout=10), d.get("/healthz").json
    during = create_ok(d, f"{PREFIX}_during", gpus=2, containerPorts=["22"])
    assert during["version"] == 1
    assert not set(during["gpus"]) & gpus_before
    assert {s["name"] for s in list_sets(d)} == {f"{PREFIX}_before", f"{PREFIX}_during"}
    assert lifecycle(d, f"{PREFIX}_before", "stop").status == 200
    assert delete(d, f"{PREFIX}_during").status == 200
    assert held_gpus(d) == set()
    r = call(d, "POST", "/api/v1/volumes", {"name": f"{PREFIX}_vol", "size": "32MB"})
    assert r.status == 200, r.json
    assert call(d, "DELETE", f"/api/v1/volumes/{PREFIX}_vol").status == 200


def test_etcd_frozen_and_thawed(etcd, daemons):
    d = daemons(etcd.url("/frozen", **TIMEOUTS))
    create_ok(d, f"{PREFIX}_warm", gpus=1)
    gpus_before, ports_before = held_gpus(d), used_ports(d)

    etcd.freeze()
    try:
        t0 = time.monotonic()
        r = create(d, f"{PREFIX}_frozen", gpus=1, containerPorts=["22"])
        took = time.monotonic() - t0
        assert_store_down(r, etcd.endpoint)
        assert 1.0 < took < 5, f"gave up after {took:.1f}s; the URL says 1.5s"
        assert_failed_create_left_nothing(d, f"{PREFIX}_frozen", gpus_before, ports_before)
        assert d.get("/healthz").status == 503
        assert gpu_map(d)  # memory answers at once
    finally:
        etcd.thaw()
    assert wait_until(lambda: healthz_ok(d), timeout=10)
    assert create_ok(d, f"{PREFIX}_frozen", gpus=1)["version"] == 1
    assert len(held_gpus(d)) == 2
    # Nothing the frozen etcd held back turns up later.
    time.sleep(1)
    assert [s["name"] for s in list_sets(d, all_=True)].count(f"{PREFIX}_frozen") == 1
    assert history(d, f"{PREFIX}_frozen").data["history"][0]["version"] == 1


def tenants(d):
    """{uuid: [owner, ...]} of the GPUs held now."""
    devices = d.get("/api/v1/resources/gpus").data["devices"]
    return {dev["uuid"]: dev["tenants"] for dev in devices if dev["tenants"]}


@pytest.fixture
def proxied(etcd, daemons):
    proxy = HoldingProxy(etcd.client_port)
    d = daemons(f"etcd://{proxy.endpoint}/doubt?timeout_ms=1500")
    yield d, proxy
    proxy.release(deliver=False)
    proxy.close()


@pytest.mark.parametrize("lands", [True, False], ids=["lands late", "never lands"])
def test_create_whose_record_is_in_doubt(proxied, etcd, lands):
    d, proxy = proxied
    name = f"{PREFIX}_doubt"
    proxy.holding = True
    r = create(d, name, gpus=2, containerPorts=["22"])
    assert r.status == 503 and r.code == 1111, r.json
    assert "did not confirm" in r.msg and "undoes the record by itself" in r.msg, r.msg
    assert container(f"{name}-1") is None
    # Until gpuboxd knows, the two GPUs stay held: the store may list them.
    assert sorted(tenants(d).values()) == [[name], [name]]
    # The name waits for the outcome too.
    again = create(d, name, gpus=1)
    assert again.status == 503 and "not settled yet" in again.msg, again.json

    assert proxy.release(deliver=lands) >= 1
    assert wait_until(lambda: not held_gpus(d), timeout=10), tenants(d)
    assert ("undid the create of version 1" if lands else "never reached the store") in d.log()
    assert info(d, name).status == 404
    assert name not in [s["name"] for s in list_sets(d, all_=True)]
    keys = etcd.range("/doubt/")
    assert not [k for k in keys if k.startswith(f"/doubt/gpubox/history/{name}/")], keys
    assert used_ports(d) == []
    created = create_ok(d, name, gpus=2, containerPorts=["22"])
    assert created["version"] == 1
    assert [h["version"] for h in history(d, name).data["history"]] == [1]
    assert len(containers_with_prefix(PREFIX)) == 1


@pytest.mark.parametrize("lands", [True, False], ids=["lands late", "never lands"])
def test_stop_whose_record_is_in_doubt(proxied, lands):
    d, proxy = proxied
    name = f"{PREFIX}_stopdoubt"
    create_ok(d, name, gpus=1, containerPorts=["22"])
    held, ports = held_gpus(d), used_ports(d)
    proxy.holding = True
    r = lifecycle(d, name, "stop")
    assert r.status == 503 and r.code == 1111, r.json
    assert "did not confirm" in r.msg, r.msg
    assert held_gpus(d) == held and used_ports(d) == ports  # not given back while in doubt

    proxy.release(deliver=lands)
    if lands:
        assert wait_until(lambda: not held_gpus(d), timeout=10), tenants(d)
        assert used_ports(d) == []
        assert info(d, name).data["info"]["state"] == "stopped"
    else:
        # The record never changed: the set still holds its GPU, and the
        # stop can simply be asked again.
        assert wait_until(lambda: "never reached the store" in d.log(), timeout=10)
        assert held_gpus(d) == held
        assert info(d, name).data["info"]["state"] == "running"
        assert lifecycle(d, name, "stop").status == 200
        assert held_gpus(d) == set() and used_ports(d) == []


# ---- the daemon's claim on its prefix ---------------------------------------------

def test_outage_longer_than_the_claim_ttl(etcd, daemons):
    d = daemons(etcd.url("/lost", **TIMEOUTS))
    create_ok(d, f"{PREFIX}_kept", gpus=1, containerPorts=["22"])
    gpus_before, ports_before = held_gpus(d), used_ports(d)

    etcd.kill()
    t0 = time.monotonic()
    assert wait_until(lambda: "lost the claim" in d.log(), timeout=20), d.log()
    assert time.monotonic() - t0 > 6, "lost before the lease could have expired"
    log = d.log()
    assert "no keepalive was answered for 10 s, the lease's TTL" in log, log
    assert "Writes are refused" in log
    r = create(d, f"{PREFIX}_lost", gpus=1, containerPorts=["22"])
    assert_store_down(r, etcd.endpoint)
    assert_failed_create_left_nothing(d, f"{PREFIX}_lost", gpus_before, ports_before)

    # etcd back (it renews the leases it had when it starts): the claim is
    # this daemon's again, and changes work.
    etcd.restart()
    assert wait_until(lambda: "writes are accepted again" in d.log(), timeout=15), d.log()
    assert create_ok(d, f"{PREFIX}_lost", gpus=1)["version"] == 1
    assert lifecycle(d, f"{PREFIX}_kept", "stop").status == 200
    assert not held_gpus(d) & gpus_before
    assert delete(d, f"{PREFIX}_lost").status == 200
    assert held_gpus(d) == set() and used_ports(d) == []


def foreign_owner(etcd, prefix):
    """Put another gpuboxd's claim into prefix's owner key, as a daemon on
    another host with the same prefix would once this one's lease expired.
    The put also takes the key off this daemon's lease."""
    other = {"program": "gpuboxd", "host": "gpu-elsewhere", "pid": 4242,
             "started": "2026-01-01T00:00:00Z", "bootId": "b", "pidNamespace": "pid:[1]",
             "procStart": 7}
    etcd.post("/v3/kv/put", {"key": b64(f"{prefix}/daemon/owner"),
                             "value": b64(json.dumps(other))})


def test_changes_refused_while_another_daemon_holds_the_prefix(etcd, daemons):
    d = daemons(etcd.url("/taken", **TIMEOUTS))
    mine = create_ok(d, f"{PREFIX}_mine", gpus=1)
    gpus_before = held_gpus(d)

    foreign_owner(etcd, "/taken")
    r = create(d, f"{PREFIX}_refused", gpus=1)
    assert r.status == 503 and r.code == 1111, r.json
    assert "lost its claim on the store" in r.msg, r.msg
    assert "gpuboxd pid 4242 on host gpu-elsewhere" in r.msg, r.msg
    assert container(f"{PREFIX}_refused-1") is None
    assert "lost the claim on etcd" in d.log()
    # Every change is refused now, without a word to Docker; reads work.
    assert lifecycle(d, f"{PREFIX}_mine", "stop").status == 503
    assert container(mine["containerName"])["State"]["Running"] is True
    assert info(d, f"{PREFIX}_mine").status == 200
    h = d.get("/healthz")
    assert h.status == 503 and h.json["data"]["status"] == "degraded", h.json
    assert h.json["data"]["store"]["claim"] == "lost" and "revision" in h.json["data"]["store"]
    assert "lost its claim" in h.json["data"]["store"]["error"]
    assert f"{PREFIX}_refused" not in [s["name"] for s in list_sets(d, all_=True)]
    time.sleep(2)
    assert lifecycle(d, f"{PREFIX}_mine", "pause").status == 503

    # The other daemon stops (its key goes): this one claims the prefix
    # again, settles the refused create (it never reached the store), and
    # changes work again.
    etcd.post("/v3/kv/deleterange", {"key": b64("/taken/daemon/owner")})
    assert wait_until(lambda: "writes are accepted again" in d.log(), timeout=10), d.log()
    assert wait_until(lambda: held_gpus(d) == gpus_before, timeout=10)
    h = d.get("/healthz")
    assert h.status == 200 and h.json["data"]["store"]["claim"] == "held", h.json
    assert create_ok(d, f"{PREFIX}_refused", gpus=1)["version"] == 1
    assert lifecycle(d, f"{PREFIX}_mine", "stop").status == 200
    owner = etcd.range("/taken/daemon/owner")
    assert f'"pid":{d.proc.pid}' in owner["/taken/daemon/owner"], owner
