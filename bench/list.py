#!/usr/bin/python3
"""list.py - bench/list.sh's work (stdlib only).

list.py make URL IMAGE N: the replica sets benchls0..N-1 (no GPU, busybox
sleeping) through gpuboxd's API, 8 at a time; every other benchls set
purged (N 0 purges them all).
list.py time URL ROUNDS LABEL: the median of ROUNDS GET /api/v1/replicaSet
against the median of ROUNDS GET /containers/json?all=1 straight to
dockerd ($DOCKER_HOST or /var/run/docker.sock), alternated in one run."""
import concurrent.futures
import http.client
import json
import os
import socket
import statistics
import sys
import time
import urllib.parse


def call(url, method, path, body=None):
    host = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=300)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=300)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def docker_list_ms():
    host = os.environ.get("DOCKER_HOST", "")
    path = host[len("unix://"):] if host.startswith("unix://") else "/var/run/docker.sock"
    conn = UnixConnection(path)
    try:
        t = time.perf_counter()
        conn.request("GET", "/containers/json?all=1")
        body = conn.getresponse().read()
        ms = (time.perf_counter() - t) * 1000
        return ms, len(json.loads(body))
    finally:
        conn.close()


def gpubox_list_ms(url):
    t = time.perf_counter()
    data = call(url, "GET", "/api/v1/replicaSet")
    ms = (time.perf_counter() - t) * 1000
    return ms, len(data["data"]["replicaSets"])


def make(url, image, n):
    want = {f"benchls{i}" for i in range(n)}
    have = {s["name"] for s in call(url, "GET", "/api/v1/replicaSet?all=true")["data"]["replicaSets"]
            if s["name"].startswith("benchls")}

    def create(name):
        r = call(url, "POST", "/api/v1/replicaSet",
                 {"replicaSetName": name, "imageName": image, "cmd": ["sleep", "3600"]})
        if r["code"] != 200:
            raise SystemExit(f"create {name}: {r['msg']}")

    def purge(name):
        call(url, "DELETE", f"/api/v1/replicaSet/{name}?purge=true")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(purge, sorted(have - want)))
        list(pool.map(create, sorted(want - have)))


def timed(url, rounds, label):
    time.sleep(3)  # past the container cache's first list and gpuboxd's own recent changes
    gpubox_list_ms(url)  # warm: connections, page cache
    docker_list_ms()
    ours, docker = [], []
    for _ in range(rounds):
        ms, n = gpubox_list_ms(url)
        ours.append(ms)
        ms, containers = docker_list_ms()
        docker.append(ms)
    o, d = statistics.median(ours), statistics.median(docker)
    print(f"{label}: GET /api/v1/replicaSet ({n} sets) median {o:.1f} ms; "
          f"dockerd GET /containers/json?all=1 ({containers} containers) median {d:.1f} ms; "
          f"list/dockerd {o / d:.2f}x")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        timed(sys.argv[2], int(sys.argv[3]), sys.argv[4])
