"""A real Prometheus (Debian's package) scrapes gpuboxd and answers PromQL on
its usage and health metrics, and every query of the Grafana dashboard in
contrib/grafana/ runs against it.

gpuboxd reads two cards from the fake NVML, sampling every 0.2 s; the
description file gives card 0 a usage reading and a compute process whose PID
is this test's own (a process in no container, so its memory is "foreign").
Prometheus scrapes every second. The test then adds an XID line to the file
and watches card 1 turn unhealthy and the XID counter count it, through
PromQL. Last, each panel target of contrib/grafana/gpubox-usage.json runs as
an instant query, its variables replaced as Grafana would with "All"
selected: none may be a PromQL error, and the panels whose metrics this
scenario has must show something.

No container is needed: the daemon only talks to the DOCKER_HOST the
environment gives, as in every e2e test.
"""
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import FAKE_NVML, SOURCE_DIR, fake_gpu_env

DASHBOARD = SOURCE_DIR / "contrib" / "grafana" / "gpubox-usage.json"
MIB = 1024 * 1024
UUID0 = "GPU-5e1f0c2a-0000-4000-8000-000000000000"
UUID1 = "GPU-5e1f0c2a-0000-4000-8000-000000000001"
MODEL0, MODEL1 = "NVIDIA A100-SXM4-80GB", "Tesla T4"
USED0, UTIL0 = 12000, 37       # usage line of card 0: MiB used, percent busy
USED1, UTIL1 = 1024, 5         # and of card 1
FOREIGN0 = 3000                # the test's own process on card 0, MiB
XID = 79                       # "GPU has fallen off the bus": critical by default

READY_TIMEOUT = 90     # Prometheus up and answering (1-3 s when idle)
VALUE_TIMEOUT = 60     # a state gpuboxd is in shows in PromQL (sampling 0.2 s + scrape 1 s)

# Every metric name the dashboard may use: the existing ones and those of the
# usage contract (issue 17; docs/api.md, GET /metrics).
KNOWN_METRICS = {
    "gpubox_gpus", "gpubox_gpus_allocated", "gpubox_gpus_free",
    "gpubox_gpu_memory_mib", "gpubox_gpu_memory_reserved_mib", "gpubox_gpu_tenants",
    "gpubox_gpu_memory_used_bytes", "gpubox_gpu_utilization_ratio",
    "gpubox_gpu_foreign_memory_bytes", "gpubox_gpu_healthy", "gpubox_gpu_xid_events_total",
    "gpubox_instance_gpu_memory_used_bytes", "gpubox_instance_gpu_utilization_ratio",
    "gpubox_instance_gpu_share_bytes", "gpubox_instance_idle_seconds",
    "gpubox_instance_autostops_total", "gpubox_usage_samples_total",
    "gpubox_usage_sample_seconds",
}
# Panels whose queries must answer something here (the card panels: this
# scenario has cards, readings, a foreign process and an XID, but no instance).
MUST_SHOW = {"Cards healthy", "Cards unhealthy", "GPUs free / allocated", "Card health",
             "Memory used per card", "Utilization per card", "Foreign memory per card",
             "XID events"}
# Grafana's variables as they stand with "All" selected and a 5 minute range.
VARIABLES = {"node": ".*", "owner": ".*", "__range": "5m", "__rate_interval": "1m",
             "__interval": "15s", "__range_s": "300", "__interval_ms": "15000"}


def description(xids=()):
    lines = ["# two cards, a usage reading each, one process in no container",
             "driver_version 535.104.05",
             f"0 {UUID0} 81920 ok {MODEL0}",
             f"1 {UUID1} 16384 ok {MODEL1}",
             f"usage 0 {USED0} {UTIL0}",
             f"usage 1 {USED1} {UTIL1}",
             f"process 0 {os.getpid()} {FOREIGN0}"]
    lines += [f"xid {index} {xid}" for index, xid in xids]
    return "\n".join(lines) + "\n"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=30):
    """(status, body) of a GET; error statuses are answers too."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Prometheus:
    """Debian's prometheus on 127.0.0.1:<free port>, scraping one target
    every second, its TSDB and log in dir."""

    def __init__(self, binary, dir):
        self.binary = binary
        self.dir = dir
        self.proc = None
        self.url = None
        self.log_path = dir / "prometheus.log"

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except FileNotFoundError:
            return ""

    def start(self, target):
        config = self.dir / "prometheus.yml"
        config.write_text("global:\n"
                          "  scrape_interval: 1s\n"
                          "  scrape_timeout: 1s\n"
                          "  evaluation_interval: 1s\n"
                          "scrape_configs:\n"
                          "  - job_name: gpubox\n"
                          "    metrics_path: /metrics\n"
                          f"    static_configs: [{{targets: [\"{target}\"]}}]\n")
        for attempt in range(3):  # the free port may be taken before Prometheus binds it
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={config}",
                 f"--storage.tsdb.path={self.dir / f'tsdb{attempt}'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            log.close()
            deadline = time.monotonic() + READY_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if http_get(self.url + "/-/ready", timeout=5)[0] == 200:
                        return self
                except OSError:
                    pass
                time.sleep(0.2)
            if self.proc.poll() is None:
                self.stop()
                raise AssertionError(f"prometheus not ready within {READY_TIMEOUT}s; "
                                     f"log:\n{self.log()}")
            if "address already in use" not in self.log():
                break
        raise AssertionError(f"prometheus exited {self.proc.returncode}; log:\n{self.log()}")

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def api(self, path, **params):
        """The JSON of an /api/v1 call; PromQL errors (400, 422) are answers too."""
        status, body = http_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "error", "error": f"HTTP {status}: {body[:500]}"}

    def query(self, expr):
        """The instant vector expr evaluates to now: {frozenset(labels): value}."""
        r = self.api("query", query=expr)
        assert r["status"] == "success", f"{expr}: {r}"
        assert r["data"]["resultType"] == "vector", f"{expr}: {r}"
        return {frozenset(s["metric"].items()): float(s["value"][1])
                for s in r["data"]["result"]}

    def by_index(self, expr):
        """{index label: value} of a per-card query."""
        return {dict(k).get("index"): v for k, v in self.query(expr).items()}


def wait_for(check, what, prom, timeout=VALUE_TIMEOUT):
    """Poll check() (assertions that fail until the state shows); a query
    that times out on a loaded machine is tried again too."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, OSError) as e:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what}: not within {timeout}s: {e}\n"
                                     f"prometheus log:\n{prom.log()}") from None
        time.sleep(0.25)


@pytest.fixture
def prometheus(tmp_path):
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.access(binary, os.X_OK):
        pytest.fail("prometheus is missing: install Debian's prometheus package "
                    "(scripts/install-deps.sh test)")
    d = tmp_path / "prometheus"
    d.mkdir()
    p = Prometheus(binary, d)
    yield p
    p.stop()


def dashboard_panels(panels):
    """Every panel, those inside rows too."""
    for p in panels:
        yield p
        yield from dashboard_panels(p.get("panels", []))


VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")


def expand(expr):
    """expr with Grafana's variables replaced; unknown ones stay, marked."""
    def sub(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return VARIABLES.get(name, f"<unknown variable {name}>")
    return VAR.sub(sub, expr)


def approx(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def test_prometheus_scrapes_usage_and_runs_the_dashboard(start_daemon, prometheus, tmp_path):
    desc = tmp_path / "gpus.txt"
    desc.write_text(description())
    d = start_daemon("--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML),
                     "--usage-interval", "0.2", env=fake_gpu_env(desc))
    prom = prometheus.start(f"{d.host}:{d.port}")

    def target_up():
        up = prom.query('up{job="gpubox"}')
        assert list(up.values()) == [1], up
    wait_for(target_up, "the gpubox target up", prom)

    # What the description says, through PromQL. The first readings may come
    # a scrape after the target is up.
    def cards_read():
        used = prom.by_index("gpubox_gpu_memory_used_bytes")
        assert used == {"0": USED0 * MIB, "1": USED1 * MIB}, used
        util = prom.by_index("gpubox_gpu_utilization_ratio")
        assert util.keys() == {"0", "1"}, util
        assert approx(util["0"], UTIL0 / 100) and approx(util["1"], UTIL1 / 100), util
        foreign = prom.by_index("gpubox_gpu_foreign_memory_bytes")
        assert foreign.get("0") == FOREIGN0 * MIB, foreign
        assert foreign.get("1", 0) == 0, foreign
        assert prom.by_index("gpubox_gpu_healthy") == {"0": 1, "1": 1}
    wait_for(cards_read, "the usage readings of the description", prom)

    labels = {dict(k)["index"]: dict(k) for k in prom.query("gpubox_gpu_memory_used_bytes")}
    assert (labels["0"]["uuid"], labels["0"]["model"]) == (UUID0, MODEL0), labels
    assert (labels["1"]["uuid"], labels["1"]["model"]) == (UUID1, MODEL1), labels
    assert "node" not in labels["0"], labels  # a single server: no node label
    # PromQL across metrics: memory used over the card's memory; all foreign memory.
    ratio = prom.by_index("gpubox_gpu_memory_used_bytes / on (uuid, index, model) "
                          "(gpubox_gpu_memory_mib * 1048576)")
    assert approx(ratio["0"], USED0 / 81920) and approx(ratio["1"], USED1 / 16384), ratio
    assert list(prom.query("sum(gpubox_gpu_foreign_memory_bytes)").values()) == [FOREIGN0 * MIB]
    assert list(prom.query("gpubox_gpus").values()) == [2]
    assert list(prom.query("gpubox_gpus_free").values()) == [2]

    def sampling():
        n = prom.query("increase(gpubox_usage_samples_total[1m])")
        assert n and list(n.values())[0] > 0, n
    wait_for(sampling, "gpubox_usage_samples_total rising", prom)

    # An XID on card 1: the fake delivers it once; 79 is critical, so the
    # card turns unhealthy and the counter counts it.
    desc.write_text(description(xids=[(1, XID)]))

    def xid_seen():
        assert prom.by_index("gpubox_gpu_healthy") == {"0": 1, "1": 0}
        xids = prom.query(f'gpubox_gpu_xid_events_total{{xid="{XID}"}}')
        assert [(dict(k)["index"], dict(k)["uuid"], v) for k, v in xids.items()] == \
            [("1", UUID1, 1)], xids
    wait_for(xid_seen, f"card 1 unhealthy after XID {XID}", prom)

    check_dashboard(prom)


def check_dashboard(prom):
    dash = json.loads(DASHBOARD.read_text())
    problems = []

    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("node", "owner"):
        v = variables[name]
        assert v["type"] == "query" and v["includeAll"] and v["allValue"] == ".*", v
        query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert m and m.group(2) == name, query
        # What Grafana asks to fill the variable's list.
        r = prom.api(f"label/{name}/values", **{"match[]": expand(m.group(1))})
        if r.get("status") != "success":
            problems.append(f"variable {name}: {query}: {r}")
        elif name == "node" and r["data"] != []:
            problems.append(f"variable node: a single server has no node label, got {r['data']}")

    ids, exprs = set(), 0
    panels = [p for p in dashboard_panels(dash["panels"]) if p.get("type") != "row"]
    for panel in panels:
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append(f"{title}: panel id {panel.get('id')} used twice")
        ids.add(panel.get("id"))
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"{title}: datasource is not $datasource: {panel.get('datasource')}")
        answers = []
        for t in panel.get("targets", []):
            expr = t.get("expr", "")
            exprs += 1
            unknown = set(re.findall(r"\bgpubox_\w+", expr)) - KNOWN_METRICS
            if unknown:
                problems.append(f"{title}: metrics in no contract: {sorted(unknown)}")
            q = expand(expr)
            if "<unknown variable" in q:
                problems.append(f"{title}: {q}")
                continue
            r = prom.api("query", query=q)
            if r.get("status") != "success":
                problems.append(f"{title}: {q}: {r.get('errorType')}: {r.get('error')}")
                continue
            answers.append((q, r["data"]["result"]))
        if title in MUST_SHOW:
            if not answers or not any(result for _, result in answers):
                problems.append(f"{title}: no data; queries {[q for q, _ in answers]}")
    assert exprs > 0
    missing = MUST_SHOW - {p.get("title") for p in panels}
    if missing:
        problems.append(f"panels missing from the dashboard: {sorted(missing)}")

    # What some panels say in this scenario.
    def single(title):
        p = next(p for p in panels if p.get("title") == title)
        return prom.query(expand(p["targets"][0]["expr"]))
    for title, want in (("Cards healthy", [1]), ("Cards unhealthy", [1])):
        got = sorted(single(title).values())
        if got != want:
            problems.append(f"{title}: {got}, want {want}")
    xids = [(dict(k).get("index"), dict(k).get("xid"), v) for k, v in single("XID events").items()]
    if xids != [("1", str(XID), 1)]:
        problems.append(f"XID events: {xids}, want card 1 XID {XID} once")

    assert not problems, "the dashboard's queries:\n  " + "\n  ".join(problems)
