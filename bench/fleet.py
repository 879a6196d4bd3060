#!/usr/bin/python3
"""fleet.py - a request sent to the node that owns a replica set against
the same request sent to another node of the fleet, which forwards it;
bench/fleet.sh makes the fleet and runs this in the hub's netns (see there
for the set-up and what each case means).

Every set is pinned to node a. Before the rounds: both nodes ready (GET
/api/v1/nodes through each), one create through a and one through b (not
timed; the one through b must land on a), and STANDING sets on a for the
reads. Then ROUNDS rounds, each:
  create  one POST /api/v1/replicaSet to a and one to b (gpuCount 1, cmd
          sleep), in alternating order, each until the answer; each set
          deleted with purge through a afterwards (not timed);
  get     GETS pairs of GET /api/v1/replicaSet/{standing set} through a and
          through b, alternating;
  list    GETS pairs of GET /api/v1/replicaSet through a (the merged list:
          a and b asked) and through a with X-Gpubox-Forwarded-By and the
          fleet's proof, X-Gpubox-Fleet-Auth, signed with the secret in
          FLEET_SECRET_FILE as node b would (a's own list, answered by a
          alone), alternating.
One kept-alive connection per node and kind, as a CLI session or a proxy
would hold. Prints median and p90 of each side, the ratio of the medians
(the create's against its target, <= 1.1x), their difference, and the
median of the differences within each pair (forwarded less direct, measured
side by side: the steadier figure when the load drifts).

Usage: fleet.py URL_A URL_B IMAGE   (env FLEET_SECRET_FILE, ROUNDS=20 GETS=10
STANDING=4; stdlib only)
"""
import hashlib
import hmac
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse

PREFIX = "benchfleet"
TARGET = 1.10
FORWARDED_HEADER = "X-Gpubox-Forwarded-By"  # src/fleet/fleet.h
AUTH_HEADER = "X-Gpubox-Fleet-Auth"


def local_headers(secret, path, method="GET", node="b"):
    """The headers of a request node sent to a as part of a list: a answers
    it alone. The proof is src/fleet/fleet_auth.h's (an HMAC-SHA256 with the
    fleet's secret over these lines), made fresh for each request (it holds
    for FLEET_AUTH_SKEW_S); no Authorization (the bench runs without)."""
    ts = int(time.time())
    lines = ["gpubox-fleet-v1", node, str(ts), method, path, hashlib.sha256(b"").hexdigest(), ""]
    msg = "".join(line + "\n" for line in lines).encode()
    sig = hmac.new(secret, msg, hashlib.sha256).hexdigest()
    return {FORWARDED_HEADER: node, AUTH_HEADER: f"v1 node={node} ts={ts} sig={sig}"}


class Conn:
    """A kept-alive connection to one node; a fresh one after 2 s idle
    (gpuboxd closes idle connections: a request must not find out by
    failing, which could not be told from a lost one)."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.url = url
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        self.last_used = 0.0

    def call(self, method, path, body=None, headers=None):
        if time.monotonic() - self.last_used > 2.0:
            self.conn.close()
        data = json.dumps(body).encode() if body is not None else None
        h = dict(headers or {})
        if data is not None:
            h["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=h)
        r = self.conn.getresponse()
        raw = r.read()
        self.last_used = time.monotonic()
        return r.status, (json.loads(raw) if raw else None)

    def timed(self, method, path, body=None, headers=None, want=200):
        t0 = time.perf_counter()
        status, resp = self.call(method, path, body, headers)
        took = time.perf_counter() - t0
        if status != want:
            raise SystemExit(f"bench: {method} {path} on {self.url}: {status} {resp}")
        return took, resp


def percentile(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def wait_fleet(conns, names, timeout=60):
    """Until every node, asked through every node, says both are ready."""
    deadline = time.monotonic() + timeout
    while True:
        states = {}
        for c in conns:
            try:
                status, resp = c.call("GET", "/api/v1/nodes")
            except OSError:
                status, resp = 0, None
            got = {n["name"]: n["state"] for n in (resp or {}).get("data", {}).get("nodes", [])} \
                if status == 200 else {}
            states[c.url] = got
        if all(all(got.get(n) == "ready" for n in names) for got in states.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: the fleet is not ready after {timeout}s: {states}")
        time.sleep(0.2)


class Bench:
    def __init__(self, url_a, url_b, image):
        self.image = image
        # create and delete on connections of their own, the reads on others
        self.a, self.b = Conn(url_a), Conn(url_b)
        self.a_read, self.b_read = Conn(url_a), Conn(url_b)
        self.made = []

    def body(self, name):
        return {"replicaSetName": name, "imageName": self.image, "gpuCount": 1,
                "cmd": ["sleep", "86400"], "node": "a"}

    def create(self, conn, name):
        self.made.append(name)
        took, resp = conn.timed("POST", "/api/v1/replicaSet", self.body(name))
        if resp.get("code") != 200:
            raise SystemExit(f"bench: create {name} through {conn.url}: {resp}")
        return took

    def delete(self, name):
        status, resp = self.a.call("DELETE", f"/api/v1/replicaSet/{name}?purge=true")
        if status != 200:
            raise SystemExit(f"bench: delete {name}: {status} {resp}")
        self.made.remove(name)

    def node_of(self, name):
        _, resp = self.a_read.timed("GET", "/api/v1/replicaSet")
        for rs in resp["data"]["replicaSets"]:
            if rs["name"] == name:
                return rs.get("node")
        return None

    def cleanup(self):
        for name in list(self.made):
            try:
                self.delete(name)
            except (OSError, SystemExit, http.client.HTTPException) as e:
                print(f"bench: cannot delete {name}: {e}", file=sys.stderr)


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    url_a, url_b, image = sys.argv[1:]
    rounds = int(os.environ.get("ROUNDS", "20"))
    gets = int(os.environ.get("GETS", "10"))
    standing = int(os.environ.get("STANDING", "4"))
    b = Bench(url_a, url_b, image)
    wait_fleet([b.a, b.b], ["a", "b"])
    t = {k: [] for k in ("create_a", "create_b", "get_a", "get_b", "list_merged", "list_local")}
    # the fleet's secret (bench/fleet.sh gives both nodes --fleet-secret-file)
    with open(os.environ["FLEET_SECRET_FILE"], "rb") as f:
        secret = f.read().rstrip(b" \t\r\n")

    def local():
        return local_headers(secret, "/api/v1/replicaSet")
    try:
        # Warm-up, not timed: both paths once; the one through b lands on a.
        b.create(b.a, f"{PREFIX}_warm_a")
        b.create(b.b, f"{PREFIX}_warm_b")
        where = b.node_of(f"{PREFIX}_warm_b")
        if where != "a":
            raise SystemExit(f"bench: a create through b pinned to a went to {where!r}")
        b.delete(f"{PREFIX}_warm_a")
        b.delete(f"{PREFIX}_warm_b")
        for k in range(standing):
            b.create(b.a, f"{PREFIX}_s{k}")
        target = f"{PREFIX}_s0"
        # both lists must hold the same sets, else list compares unlike answers
        _, merged = b.a_read.timed("GET", "/api/v1/replicaSet")
        _, own = b.a_read.timed("GET", "/api/v1/replicaSet", headers=local())
        if len(merged["data"]["replicaSets"]) != len(own["data"]["replicaSets"]) or \
                len(own["data"]["replicaSets"]) != standing:
            raise SystemExit(f"bench: merged list {merged} and a's own {own} differ")

        for i in range(rounds):
            flip = i % 2 == 1
            sides = [("create_a", b.a), ("create_b", b.b)]
            for key, conn in (reversed(sides) if flip else sides):
                name = f"{PREFIX}_{key[-1]}{i}"
                t[key].append(b.create(conn, name))
                b.delete(name)
            for j in range(gets):
                pair = [("get_a", b.a_read), ("get_b", b.b_read)]
                for key, conn in (reversed(pair) if (i + j) % 2 else pair):
                    t[key].append(conn.timed("GET", f"/api/v1/replicaSet/{target}")[0])
                pair = [("list_merged", None), ("list_local", local)]
                for key, headers in (reversed(pair) if (i + j) % 2 else pair):
                    h = headers() if headers else None
                    t[key].append(b.a_read.timed("GET", "/api/v1/replicaSet", headers=h)[0])
    finally:
        b.cleanup()

    def ms(x):
        return f"{x * 1000:8.2f} ms"

    def row(label, key):
        v = t[key]
        print(f"  {label:<34} median {ms(statistics.median(v))}   p90 {ms(percentile(v, 0.9))}")

    def ratio(label, fwd, direct, target=None):
        f, d = statistics.median(t[fwd]), statistics.median(t[direct])
        # each forwarded sample less the direct one of its pair (same round,
        # same load): steadier than the difference of the medians when the
        # machine's load drifts during the run
        paired = statistics.median(x - y for x, y in zip(t[fwd], t[direct]))
        verdict = ""
        if target is not None:
            verdict = f"  (target <= {target:.1f}x): {'met' if f / d <= target else 'missed'}"
        print(f"  ratio {label}: {f / d:.3f}x, {(f - d) * 1000:+.2f} ms{verdict}")
        print(f"  added per request (median of the pairs' differences): {paired * 1000:+.2f} ms")

    print(f"create to running, gpuCount 1, pinned to node a: {rounds} rounds, interleaved")
    row("POST /replicaSet to a (owner)", "create_a")
    row("POST /replicaSet to b (forwards)", "create_b")
    ratio("forwarded / direct", "create_b", "create_a", TARGET)
    print(f"GET /replicaSet/{{name}} of a set on a: {rounds} x {gets} pairs, interleaved")
    row("through a (owner)", "get_a")
    row("through b (forwards)", "get_b")
    ratio("forwarded / direct", "get_b", "get_a")
    print(f"GET /replicaSet, {standing} sets (all on a): {rounds} x {gets} pairs, interleaved")
    row("a alone (as a single server)", "list_local")
    row("merged (a asks a and b)", "list_merged")
    ratio("merged / single", "list_merged", "list_local")


if __name__ == "__main__":
    main()
