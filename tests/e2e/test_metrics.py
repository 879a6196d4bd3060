"""GET /metrics end to end: the Prometheus text passes `promtool check
metrics` (Debian's prometheus package), and its numbers follow what the
daemon did: GPUs held and free, per-card memory and tenants, replica sets
by state, ports, operations by kind and result, HTTP requests by route
pattern (never the raw path) and status, the store's health.
"""
import re
import shutil
import subprocess

import pytest

from rsutil import (RUN_TAG, create, create_ok, delete, lifecycle, rs_path,
                    start_module_daemon, wipe)

PREFIX = "e2mt" + RUN_TAG
PORTS = (63200, 63249)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    daemon = start_module_daemon(tmp_path_factory.mktemp("mt"), f"{PORTS[0]}-{PORTS[1]}")
    yield daemon
    try:
        wipe(daemon, PREFIX)
    finally:
        daemon.stop()


def scrape(d):
    conn = d.connection()
    try:
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 200, body
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return body
    finally:
        conn.close()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """{(name, frozenset of (label, value)): float}"""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, metric, **labels):
    return s.get((metric, frozenset(labels.items())))


def promtool_check(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: install Debian's prometheus package (scripts/install-deps.sh test)"
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, f"promtool check metrics failed:\n{p.stdout}{p.stderr}"


def test_fresh_daemon_metrics(d):
    text = scrape(d)
    promtool_check(text)
    s = samples(text)
    assert value(s, "gpubox_gpus") == 8
    assert value(s, "gpubox_gpus_free") == 8
    assert value(s, "gpubox_gpus_allocated") == 0
    assert value(s, "gpubox_store_up", backend="sqlite") == 1
    assert value(s, "gpubox_ports_capacity") == PORTS[1] - PORTS[0] + 1
    for state in ("creating", "running", "paused", "stopped", "deleted"):
        assert value(s, "gpubox_replicasets", state=state) is not None, state
    cards = [k for k in s if k[0] == "gpubox_gpu_memory_reserved_mib"]
    assert len(cards) == 8
    assert {dict(k[1])["index"] for k in cards} == {str(i) for i in range(8)}
    assert all("A100" in dict(k[1])["model"] for k in cards)


def test_metrics_follow_operations(d):
    name = PREFIX + "_a"
    data = create_ok(d, name, gpus=2, containerPorts=["22"])
    held = set(data["gpus"])
    r = create(d, PREFIX + "_big", gpus=64)
    assert r.code == 1013
    assert lifecycle(d, name, "pause").code == 200
    assert lifecycle(d, name, "pause").code == 1107  # paused already
    for i in range(5):  # distinct raw paths, one route pattern
        d.get(rs_path(f"{PREFIX}_nosuch{i}"))
    d.get("/api/v1/no/such/route")

    text = scrape(d)
    promtool_check(text)
    s = samples(text)
    assert value(s, "gpubox_gpus_allocated") == 2
    assert value(s, "gpubox_gpus_free") == 6
    for (metric, labels), v in s.items():
        if metric == "gpubox_gpu_tenants":
            assert v == (1 if dict(labels)["uuid"] in held else 0), labels
        if metric == "gpubox_gpu_memory_reserved_mib" and dict(labels)["uuid"] in held:
            assert v == 81920, labels
    assert value(s, "gpubox_replicasets", state="paused") == 1
    assert value(s, "gpubox_replicasets", state="running") == 0
    assert value(s, "gpubox_ports_used") == 1
    assert value(s, "gpubox_ports_free") == PORTS[1] - PORTS[0]
    assert value(s, "gpubox_operations_total", kind="create", result="ok") >= 1
    assert value(s, "gpubox_operations_total", kind="create", result="gpu_not_enough") >= 1
    assert value(s, "gpubox_operations_total", kind="pause", result="ok") >= 1
    assert value(s, "gpubox_operations_total", kind="pause", result="state_conflict") >= 1
    assert value(s, "gpubox_operation_duration_seconds_count", kind="create") >= 2
    assert value(s, "gpubox_operation_duration_seconds_bucket", kind="create", le="+Inf") == \
        value(s, "gpubox_operation_duration_seconds_count", kind="create")
    assert value(s, "gpubox_http_requests_total", route="/api/v1/replicaSet", method="POST",
                 status="200") >= 1
    assert value(s, "gpubox_http_requests_total", route="/api/v1/replicaSet", method="POST",
                 status="409") >= 1
    assert value(s, "gpubox_http_requests_total", route="/api/v1/replicaSet/{name}",
                 method="GET", status="404") >= 5
    assert value(s, "gpubox_http_requests_total", route="unmatched", method="GET",
                 status="404") >= 1
    routes = {dict(k[1])["route"] for k in s if k[0] == "gpubox_http_requests_total"}
    assert not any("nosuch" in r or "/no/such" in r for r in routes), routes
    assert value(s, "gpubox_http_request_duration_seconds_count", route="/api/v1/replicaSet",
                 method="POST") >= 2

    assert lifecycle(d, name, "stop").code == 200
    assert delete(d, name).code == 200
    s = samples(scrape(d))
    assert value(s, "gpubox_gpus_allocated") == 0
    assert value(s, "gpubox_ports_used") == 0
    assert value(s, "gpubox_replicasets", state="deleted") == 1
    assert value(s, "gpubox_operations_total", kind="stop", result="ok") >= 1
    assert value(s, "gpubox_operations_total", kind="delete", result="ok") >= 1
    assert delete(d, name, purge=True).code == 200


def test_volume_metrics(d):
    vol = PREFIX + "vol"
    s = samples(scrape(d))
    assert value(s, "gpubox_volumes") == 0
    r = d.request("POST", "/api/v1/volumes", body=f'{{"name":"{vol}","size":"32MB"}}'.encode(),
                  headers={"Content-Type": "application/json"})
    assert r.status == 200, r.json
    backend = r.data["backend"]
    try:
        text = scrape(d)
        promtool_check(text)
        s = samples(text)
        assert value(s, "gpubox_volumes") == 1
        assert value(s, "gpubox_volume_size_bytes", name=vol, backend=backend) == 32 * 1024 * 1024
        used = value(s, "gpubox_volume_used_bytes", name=vol, backend=backend)
        assert used is not None and 0 <= used < 32 * 1024 * 1024
        assert value(s, "gpubox_operations_total", kind="volume_create", result="ok") == 1
    finally:
        assert d.request("DELETE", f"/api/v1/volumes/{vol}").status == 200
    s = samples(scrape(d))
    assert value(s, "gpubox_volumes") == 0
    assert value(s, "gpubox_volume_size_bytes", name=vol, backend=backend) is None
    assert value(s, "gpubox_operations_total", kind="volume_delete", result="ok") == 1


def test_scrapes_are_counted(d):
    before = value(samples(scrape(d)), "gpubox_http_requests_total", route="/metrics",
                   method="GET", status="200") or 0
    after = value(samples(scrape(d)), "gpubox_http_requests_total", route="/metrics",
                  method="GET", status="200")
    assert after == before + 1
