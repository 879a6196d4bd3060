#!/usr/bin/python3
"""web_sets.py URL IMAGE N - make the replica sets benchweb0..N-1 (no GPU,
busybox sleeping) through gpuboxd's API, 8 at a time, and purge every other
benchweb set; N 0 purges them all. For bench/web.sh. (stdlib only)"""
import concurrent.futures
import http.client
import json
import sys
import urllib.parse

url, image, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
host = urllib.parse.urlsplit(url)


def call(method, path, body=None):
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=300)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


want = {f"benchweb{i}" for i in range(n)}
have = {s["name"] for s in call("GET", "/api/v1/replicaSet?all=true")["data"]["replicaSets"]
        if s["name"].startswith("benchweb")}


def make(name):
    r = call("POST", "/api/v1/replicaSet",
             {"replicaSetName": name, "imageName": image, "cmd": ["sleep", "3600"]})
    if r["code"] != 200:
        raise SystemExit(f"create {name}: {r['msg']}")


def purge(name):
    call("DELETE", f"/api/v1/replicaSet/{name}?purge=true")


with concurrent.futures.ThreadPoolExecutor(8) as pool:
    list(pool.map(purge, sorted(have - want)))
    list(pool.map(make, sorted(want - have)))
