#!/usr/bin/python3
"""queue.py - from a card's release to the queued instance's container
running, against a direct create made at that moment (issue 29: target
<= 1.2x).

gpuboxd has one simulated card. Each round, for each side in alternating
order: a set `hold` takes the card; on the queue side a second set waits
in the queue ("queue": true: 202); then `hold` is deleted (the release)
and the clock starts when the DELETE answers:
  queue   polls GET /api/v1/replicaSet/<name> every 2 ms until its state
          is running (the dispatcher starts it by itself);
  direct  POST /api/v1/replicaSet of the same set at once, until the
          answer (its container runs when create answers).
Both sides then delete what they made (not timed). Prints the median and
p90 of each side and the ratio of the medians.

Usage: queue.py GPUBOXD_URL IMAGE [ROUNDS]   (stdlib only)
"""
import http.client
import json
import statistics
import sys
import time
import urllib.parse

PREFIX = "benchqueue"


def call(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data,
                 headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"null")


def body(name, image, queue=False):
    b = {"imageName": image, "replicaSetName": name, "gpuCount": 1, "cmd": ["sleep", "3600"]}
    if queue:
        b["queue"] = True
    return b


def one(conn, image, side, rnd):
    hold, name = f"{PREFIX}h{rnd}{side[0]}", f"{PREFIX}{side[0]}{rnd}"
    st, env = call(conn, "POST", "/api/v1/replicaSet", body(hold, image))
    assert st == 200, env
    if side == "queue":
        st, env = call(conn, "POST", "/api/v1/replicaSet", body(name, image, queue=True))
        assert st == 202, env
    st, env = call(conn, "DELETE", f"/api/v1/replicaSet/{hold}?purge=true")
    assert st == 200, env
    t0 = time.perf_counter()
    if side == "direct":
        st, env = call(conn, "POST", "/api/v1/replicaSet", body(name, image))
        assert st == 200, env
    else:
        while True:
            st, env = call(conn, "GET", f"/api/v1/replicaSet/{name}")
            if env["data"]["info"]["state"] == "running":
                break
            time.sleep(0.002)
    took = time.perf_counter() - t0
    call(conn, "DELETE", f"/api/v1/replicaSet/{name}?purge=true")
    return took


def main():
    url, image = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    times = {"queue": [], "direct": []}
    for rnd in range(rounds):
        sides = ("queue", "direct") if rnd % 2 == 0 else ("direct", "queue")
        for side in sides:
            times[side].append(one(conn, image, side, rnd))
    for side, ts in times.items():
        ts.sort()
        print(f"{side:7s} median {statistics.median(ts) * 1000:8.1f} ms   "
              f"p90 {ts[int(len(ts) * 0.9) - 1] * 1000:8.1f} ms   ({len(ts)} rounds)")
    ratio = statistics.median(times["queue"]) / statistics.median(times["direct"])
    print(f"release to running, queued / direct create: {ratio:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
