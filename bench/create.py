#!/usr/bin/python3
"""create.py - replica-set create latency through gpuboxd versus the same
container created and started by direct Docker Engine API calls.

A first replica set made through gpuboxd is inspected, and its Config and
HostConfig (image, TTY, env, cmd, labels, DeviceRequests, port bindings)
become the body of every direct create, so both sides ask Docker for the
same container. Then N rounds, each timing one create through gpuboxd
(POST /api/v1/replicaSet, gpuCount 1, until the answer) and one direct
create + start (POST /containers/create, POST /containers/{id}/start), in
alternating order so neither side always goes first. Removals are not
timed. Both clients keep their connection alive, as gpuboxd does with
Docker. Prints median and p90 of each side and the ratio of the medians.

Usage: create.py GPUBOXD_URL IMAGE [ROUNDS]   (stdlib only)
"""
import http.client
import json
import socket
import statistics
import sys
import time
import urllib.parse

PREFIX = "benchcreate"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.socket_path)
        self.sock = s


def call(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    return r.status, (json.loads(raw) if raw else None)


def percentile(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def direct_body(inspect, name):
    """The create body for Docker, from what gpuboxd asked for."""
    cfg = dict(inspect["Config"])
    for k in ("Hostname", "Domainname"):
        cfg.pop(k, None)
    labels = dict(cfg.get("Labels") or {})
    labels["gpubox.replicaset"] = name
    cfg["Labels"] = labels
    # The whole HostConfig as Docker recorded it (DeviceRequests, Init,
    # SecurityOpt, IpcMode, port bindings, ...); Docker takes back what it
    # shows, without the empty values.
    cfg["HostConfig"] = {k: v for k, v in inspect["HostConfig"].items()
                         if v not in (None, "", [], {})}
    return cfg


class Bench:
    def __init__(self, url, image):
        u = urllib.parse.urlparse(url)
        self.api = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        self.docker = UnixHTTPConnection("/var/run/docker.sock")
        self.image = image

    def gpubox_create(self, name):
        body = {"imageName": self.image, "replicaSetName": name, "gpuCount": 1}
        t0 = time.perf_counter()
        status, resp = call(self.api, "POST", "/api/v1/replicaSet", body)
        took = time.perf_counter() - t0
        if status != 200:
            raise SystemExit(f"bench: gpuboxd create failed: {status} {resp}")
        return took, resp["data"]

    def gpubox_delete(self, name):
        status, resp = call(self.api, "DELETE", f"/api/v1/replicaSet/{name}?purge=true")
        if status != 200:
            raise SystemExit(f"bench: gpuboxd delete failed: {status} {resp}")

    def direct_create(self, name, body):
        t0 = time.perf_counter()
        status, resp = call(self.docker, "POST", f"/containers/create?name={name}-1", body)
        if status != 201:
            raise SystemExit(f"bench: docker create failed: {status} {resp}")
        cid = resp["Id"]
        status, resp = call(self.docker, "POST", f"/containers/{cid}/start")
        took = time.perf_counter() - t0
        if status != 204:
            raise SystemExit(f"bench: docker start failed: {status} {resp}")
        return took, cid

    def docker_remove(self, cid):
        call(self.docker, "DELETE", f"/containers/{cid}?force=1&v=1")

    def cleanup(self):
        filters = urllib.parse.quote(json.dumps({"label": ["gpubox.replicaset"]}))
        _, found = call(self.docker, "GET", f"/containers/json?all=1&filters={filters}")
        for c in found or []:
            if c["Labels"].get("gpubox.replicaset", "").startswith(PREFIX):
                self.docker_remove(c["Id"])


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    url, image = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    b = Bench(url, image)
    try:
        # Warm-up (not timed): the template for the direct creates. It stays
        # until the end: the template binds its files (the GPU limits file
        # gpuboxd writes per set), which go with the set.
        _, data = b.gpubox_create(f"{PREFIX}_warm")
        _, inspect = call(b.docker, "GET", f"/containers/{data['containerId']}/json")

        gpubox, direct = [], []
        for i in range(rounds):
            order = ("gpubox", "direct") if i % 2 == 0 else ("direct", "gpubox")
            for side in order:
                if side == "gpubox":
                    name = f"{PREFIX}_g{i}"
                    took, _ = b.gpubox_create(name)
                    gpubox.append(took)
                    b.gpubox_delete(name)
                else:
                    name = f"{PREFIX}_d{i}"
                    took, cid = b.direct_create(name, direct_body(inspect, name))
                    direct.append(took)
                    b.docker_remove(cid)
        b.gpubox_delete(f"{PREFIX}_warm")
    finally:
        b.cleanup()

    def ms(x):
        return f"{x * 1000:8.1f} ms"

    gm, dm = statistics.median(gpubox), statistics.median(direct)
    print(f"create + start of one container, gpuCount 1, {rounds} rounds, interleaved")
    print(f"  gpuboxd POST /replicaSet   median {ms(gm)}   p90 {ms(percentile(gpubox, 0.9))}")
    print(f"  Docker create + start      median {ms(dm)}   p90 {ms(percentile(direct, 0.9))}")
    print(f"  ratio (gpuboxd / direct, medians): {gm / dm:.3f}  "
          f"(gpubox adds {(gm / dm - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
