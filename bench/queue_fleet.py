#!/usr/bin/python3
"""queue_fleet.py - in a fleet of two nodes with one card each, from a card's
release on one node to a queued instance running there, the request having
been received and queued by the other node, which dispatches; against a
direct create on the releasing node at that moment (issue 29: target
<= 1.2x). bench/fleet.sh makes the fleet (BENCH=queue CARDS=1) and runs
this in the hub's netns.

D is the node that holds the dispatcher's role (read from etcd:
<prefix>/fleet/leaders/queue-dispatcher), O the other. Each round, for each
side in alternating order: `holdD` takes D's card and `holdO` O's (pinned);
on the queue side a set is queued through D ("queue": true: 202; its
record on D); then `holdO` is deleted through O (the release) and the clock
starts when the DELETE answers:
  queue   polls GET /api/v1/replicaSet/<name> through O every 2 ms until
          its state is running: O tells D that room came back, D moves the
          record to O and tells O, O starts it (docs/queue.md, "In a
          fleet");
  direct  POST /api/v1/replicaSet of the same set, pinned to O, through O,
          until the answer (its container runs when create answers).
Both sides then delete what they made (not timed). Prints the median and
p90 of each side and the ratio of the medians.

Usage: queue_fleet.py URL_A URL_B IMAGE ETCD_URL PREFIX   (env ROUNDS=10;
stdlib only)
"""
import base64
import json
import os
import statistics
import sys
import time
import urllib.request

from fleet import Conn, percentile, wait_fleet

PREFIX = "benchqf"


def leader(etcd, prefix):
    key = f"/{prefix.strip('/')}/fleet/leaders/queue-dispatcher"
    req = urllib.request.Request(
        f"{etcd}/v3/kv/range",
        data=json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        kvs = json.loads(r.read()).get("kvs") or []
    return json.loads(base64.b64decode(kvs[0]["value"]))["node"] if kvs else None


def body(name, image, **more):
    b = {"imageName": image, "replicaSetName": name, "gpuCount": 1, "cmd": ["sleep", "3600"]}
    b.update(more)
    return b


def must(conn, method, path, b=None, want=200):
    status, resp = conn.call(method, path, b)
    if status != want:
        raise SystemExit(f"bench: {method} {path} on {conn.url}: {status} {resp}")
    return resp


def one(conns, d, o, image, side, rnd):
    cd, co = conns[d], conns[o]
    hd, ho, name = f"{PREFIX}hd{rnd}{side[0]}", f"{PREFIX}ho{rnd}{side[0]}", \
        f"{PREFIX}{side[0]}{rnd}"
    must(cd, "POST", "/api/v1/replicaSet", body(hd, image, node=d))
    must(co, "POST", "/api/v1/replicaSet", body(ho, image, node=o))
    if side == "queue":
        must(cd, "POST", "/api/v1/replicaSet", body(name, image, queue=True), want=202)
        time.sleep(0.3)  # the request's own pass is over: only the release wakes it
    must(co, "DELETE", f"/api/v1/replicaSet/{ho}?purge=true")
    t0 = time.perf_counter()
    if side == "direct":
        must(co, "POST", "/api/v1/replicaSet", body(name, image, node=o))
    else:
        while True:
            # 404 for a moment while the name passes from D to O: asked of
            # O, which forwards to the owner it read a moment before
            status, resp = co.call("GET", f"/api/v1/replicaSet/{name}")
            if status not in (200, 404):
                raise SystemExit(f"bench: GET {name}: {status} {resp}")
            if status == 200 and resp["data"]["info"]["state"] == "running":
                break
            time.sleep(0.002)
    took = time.perf_counter() - t0
    for n in (name, hd):
        must(cd, "DELETE", f"/api/v1/replicaSet/{n}?purge=true")
    return took


def main():
    url_a, url_b, image, etcd, prefix = sys.argv[1:6]
    rounds = int(os.environ.get("ROUNDS", "10"))
    conns = {"a": Conn(url_a), "b": Conn(url_b)}
    wait_fleet(list(conns.values()), ["a", "b"])
    deadline = time.monotonic() + 30
    while (d := leader(etcd, prefix)) not in conns:
        if time.monotonic() > deadline:
            raise SystemExit("bench: no node took the dispatcher's role")
        time.sleep(0.2)
    o = "b" if d == "a" else "a"
    print(f"queue: node {d} dispatches; requests queued through {d}, the card freed on {o}")
    times = {"queue": [], "direct": []}
    for rnd in range(rounds):
        sides = ("queue", "direct") if rnd % 2 == 0 else ("direct", "queue")
        for side in sides:
            times[side].append(one(conns, d, o, image, side, rnd))
    for side, ts in times.items():
        print(f"{side:7s} median {statistics.median(ts) * 1000:8.1f} ms   "
              f"p90 {percentile(ts, 0.9) * 1000:8.1f} ms   ({len(ts)} rounds)")
    ratio = statistics.median(times["queue"]) / statistics.median(times["direct"])
    print(f"release on {o} to running there, queued through {d} / direct create on {o}: "
          f"{ratio:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
