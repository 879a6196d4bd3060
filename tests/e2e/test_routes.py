"""The routes implemented so far, answered by a daemon with simulated GPUs:
/healthz, /version, /openapi.json, /api/v1/resources/gpus,
/api/v1/resources/ports and the older /api/v1/gpus."""
import re

from conftest import docker_get, run_gpuboxd

DEVICE_KEYS = {"uuid", "index", "model", "memoryMiB", "allocatedMemoryMiB", "tenants", "mode", "usage",
               "healthy", "capacityMiB", "freeMemoryMiB", "allocations", "replicas",
               "maxTenants", "excluded", "shareable", "enforced"}


def test_healthz_reports_store_and_docker(simulated):
    r = simulated.get("/healthz")
    assert r.status == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.code == 200 and r.msg == "success"
    assert r.data["status"] == "ok"
    assert r.data["store"]["ok"] is True
    assert r.data["store"]["backend"] == "sqlite"
    assert r.data["docker"]["ok"] is True
    assert r.data["gpus"] == {"count": 3, "source": "simulated", "simulated": True}


def test_version_reports_gpubox_and_docker(simulated):
    r = simulated.get("/version")
    assert r.status == 200 and r.code == 200
    rc, out, _ = run_gpuboxd(["--version"])
    assert rc == 0
    assert out.strip() == f"gpuboxd {r.data['version']} (API {r.data['apiVersion']})"
    assert r.data["apiVersion"] == "v1"
    docker = docker_get("/version")
    assert r.data["docker"]["version"] == docker["Version"]
    assert r.data["docker"]["apiVersion"] == docker["ApiVersion"]
    assert r.data["docker"]["storageDriver"] == docker_get("/info")["Driver"]


def test_resources_gpus_lists_simulated_devices(simulated):
    r = simulated.get("/api/v1/resources/gpus")
    assert r.status == 200 and r.code == 200
    data = r.data
    assert data["simulated"] is True
    assert data["source"] == "simulated"
    devices = data["devices"]
    assert [d["index"] for d in devices] == [0, 1, 2]
    assert [d["memoryMiB"] for d in devices] == [81920, 81920, 16384]
    assert "A100" in devices[0]["model"] and "T4" in devices[2]["model"]
    for d in devices:
        assert set(d) == DEVICE_KEYS
        assert re.fullmatch(r"GPU-[0-9a-f-]+", d["uuid"])
        assert d["allocatedMemoryMiB"] == 0
        assert d["tenants"] == []
        assert d["mode"] == "free"
        assert d["healthy"] is True
    assert len({d["uuid"] for d in devices}) == 3
    assert data["gpus"] == {d["uuid"]: 0 for d in devices}


def test_resources_gpus_is_stable_across_requests(simulated):
    """The cached answer and a freshly built one are the same bytes."""
    bodies = {simulated.get("/api/v1/resources/gpus").body for _ in range(5)}
    assert len(bodies) == 1


def test_older_gpus_route_maps_the_same_devices(simulated):
    r = simulated.get("/api/v1/gpus")
    assert r.status == 200 and r.code == 200
    devices = simulated.get("/api/v1/resources/gpus").data["devices"]
    assert r.data == {"gpuStatus": {d["uuid"]: 0 for d in devices}}


def test_resources_ports_shows_the_range(simulated):
    r = simulated.get("/api/v1/resources/ports")
    assert r.status == 200 and r.code == 200
    assert r.data == {"ports": {"startPort": 41000, "endPort": 41009, "availableCount": 10,
                                "usedPorts": [], "StartPort": 41000, "EndPort": 41009,
                                "AvailableCount": 10, "UsedPortSet": {}}}


def test_openapi_lists_every_route(simulated):
    r = simulated.get("/openapi.json")
    assert r.status == 200
    doc = r.json
    assert doc["openapi"].startswith("3.")
    for path in ("/healthz", "/version", "/api/v1/resources/gpus", "/api/v1/resources/ports",
                 "/api/v1/gpus"):
        assert "get" in doc["paths"][path], path
        assert doc["paths"][path]["get"]["summary"]


def test_keep_alive_serves_many_requests_on_one_connection(simulated):
    conn = simulated.connection()
    try:
        from conftest import request
        first = request(conn, "GET", "/api/v1/resources/gpus")
        sock = conn.sock
        for _ in range(20):
            r = request(conn, "GET", "/api/v1/resources/ports")
            assert r.status == 200
            assert conn.sock is sock, "the server closed a keep-alive connection"
        assert first.status == 200
    finally:
        conn.close()
