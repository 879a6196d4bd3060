#!/usr/bin/python3
"""patch.py - a whole patch through gpuboxd against gpu-docker-api's way of
carrying the system disk (`cp -a` of the merged directory) and against what
Docker alone needs for the same change; bench/patch.sh runs it (see there
for what the figures mean).

For each case (a size written into the system disk, as one big file or as
many small ones) a replica set is made and the data written; then, side by
side in one run:
  cp -a     the old container's merged directory copied into a fresh
            directory, once from a warm page cache and once cold (after
            sync and drop_caches);
  patch     ROUNDS patches (PATCH /api/v1/replicaSet/{name}, gpuCount
            switching between 1 and 2, each a new version carrying all the
            data), timed from request to answer on a kept-alive connection;
            median; then ROUNDS more, each after dropping the page cache;
  carry     the carry step alone, as the answer reports it (carry.seconds);
  steps     each journal step's time, from GET /api/v1/operations/{id};
  floor     Docker's create + start + stop + remove of a container with
            the very config gpuboxd gave the set's container (Config and
            HostConfig from its inspect), straight through the Engine API
            on a kept-alive connection: what any implementation of a patch
            pays Docker, gpubox or gpu-docker-api. One round after each
            warm patch, so both see the same load; median.
The data is checked in the last version of each case.

Usage: patch.py GPUBOXD_URL IMAGE WORKDIR   (stdlib only; env as patch.sh)
"""
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

STEPS = ["begin", "container-created", "old-stopped", "carry-begin", "carried", "new-started",
         "old-removed", "committed"]
STEP_SHORT = ["begin", "create", "stop", "c-begin", "carried", "start", "remove", "commit"]
SMALL_DIR = "/opt/env"  # where the small files go, as a conda or pip environment would


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=600)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.socket_path)
        self.sock = s


def call(conn, method, path, body=None):
    # A server closes a connection idle for a while (gpuboxd after a few
    # seconds, during a long copy): start a fresh one rather than find out
    # by a failed request, which could not be told apart from a lost one.
    if time.monotonic() - getattr(conn, "last_used", 0.0) > 2.0:
        conn.close()
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    conn.last_used = time.monotonic()
    return r.status, (json.loads(raw) if raw else None)


def human(mb):
    if mb == 0:
        return "0 B"
    return f"{mb // 1024} GB" if mb % 1024 == 0 else f"{mb} MB"


def drop_caches():
    """True when the page cache was dropped (root, a writable /proc/sys)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


class Bench:
    def __init__(self, url, image, work):
        u = urllib.parse.urlparse(url)
        self.api = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
        self.docker = UnixHTTPConnection(os.environ.get("DOCKER_SOCK", "/var/run/docker.sock"))
        self.image = image
        self.work = work
        self.tag = os.environ.get("BENCH_TAG", f"gbbenchpatch{os.getpid()}")
        self.rounds = int(os.environ.get("ROUNDS", "5"))
        self.small_kb = int(os.environ.get("SMALL_FILE_KB", "50"))
        self.cold_ok = drop_caches()
        self.seq = 0

    # --- gpuboxd ---------------------------------------------------------------------------

    def gb(self, method, path, body=None):
        status, answer = call(self.api, method, path, body)
        if status != 200 or not answer or answer.get("code") != 200:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {answer}")
        return answer["data"]

    def container(self, name):
        return self.gb("GET", f"/api/v1/replicaSet/{name}")["info"]["containerName"]

    def inspect(self, container):
        status, info = call(self.docker, "GET", f"/containers/{container}/json")
        if status != 200:
            raise RuntimeError(f"inspect {container}: HTTP {status}: {info}")
        return info

    def execute(self, name, cmd):
        data = self.gb("POST", f"/api/v1/replicaSet/{name}/execute",
                       {"cmd": cmd, "timeoutSeconds": 3600})
        if data["exitCode"] != 0:
            raise RuntimeError(f"{cmd} in {name}: exit {data['exitCode']}: {data['stderr']}")
        return data["stdout"]

    def make_set(self, name, cmd):
        self.gb("POST", "/api/v1/replicaSet", {"imageName": self.image, "replicaSetName": name,
                                               "gpuCount": 1, "cmd": cmd})

    def delete_set(self, name):
        call(self.api, "DELETE", f"/api/v1/replicaSet/{name}?purge=true")

    # --- the data ----------------------------------------------------------------------------

    def write_big(self, name, mb):
        self.execute(name, ["sh", "-c", f"dd if=/dev/urandom of=/payload bs=1048576 count={mb} "
                                        "2>/dev/null && sync"])

    def small_count(self, mb):
        return mb * 1024 // self.small_kb

    def write_small(self, name, mb):
        """mb of files of small_kb each, 100 to a directory, 10 directories to
        a package, written through the running container's merged directory
        (the same as the container writing them: they land in its layer)."""
        merged = self.inspect(self.container(name))["GraphDriver"]["Data"]["MergedDir"]
        root = merged + SMALL_DIR
        for i in range(self.small_count(mb)):
            d = f"{root}/pkg{i // 1000:03d}/mod{i // 100 % 10}"
            if i % 100 == 0:
                os.makedirs(d, exist_ok=True)
            with open(f"{d}/f{i % 100:02d}.py", "wb") as f:
                f.write(os.urandom(self.small_kb * 1024))
        os.sync()

    def check(self, name, mb, shape):
        if shape == "big":
            got = int(self.execute(name, ["stat", "-c", "%s", "/payload"]).strip() or -1)
            want = mb * 1048576
        else:
            got = int(self.execute(name, ["sh", "-c", f"find {SMALL_DIR} -type f | wc -l"])
                      .strip() or -1)
            want = self.small_count(mb)
        if got != want:
            raise RuntimeError(f"{name}: expected {want}, the last version has {got}")

    # --- the three sides ---------------------------------------------------------------------

    def copy(self, name, cold):
        """cp -a of the merged directory; None when the cache cannot be dropped."""
        merged = self.inspect(self.container(name))["GraphDriver"]["Data"]["MergedDir"]
        dest = f"{self.work}/copy"
        if cold and not drop_caches():
            return None
        start = time.monotonic()
        subprocess.run(["cp", "-a", merged, dest], check=True)
        took = time.monotonic() - start
        subprocess.run(["rm", "-rf", dest], check=True)
        os.sync()
        return took

    def patches(self, name, cold, floor_rounds=0):
        """ROUNDS patches: {patch: median s, carry: median s, steps: {step:
        median ms}}, and with floor_rounds, Docker's floor measured between
        them (one round after each of the first floor_rounds patches), so
        both see the same load: floor (median s), floor_calls {call: ms}."""
        times, carries, steps = [], [], {s: [] for s in STEPS}
        floors, calls = [], {"create": [], "start": [], "stop": [], "rm": []}
        for i in range(self.rounds):
            self.seq += 1
            if cold and not drop_caches():
                return None
            start = time.monotonic()
            data = self.gb("PATCH", f"/api/v1/replicaSet/{name}",
                           {"gpuPatch": {"gpuCount": self.seq % 2 + 1}})
            times.append(time.monotonic() - start)
            carry = data.get("carry") or {}
            carries.append(carry.get("seconds", float("nan")))
            self.method = carry.get("method", "?")
            op = self.gb("GET", f"/api/v1/operations/{data['operationId']}")
            for s in op["steps"]:
                if s["name"] in steps and s.get("ms") is not None:
                    steps[s["name"]].append(s["ms"])
            if i < floor_rounds:
                # The config of the version now running (its GPU env file
                # is its own); taken outside the timing.
                total, took = self.floor_round(self.floor_body(name), i)
                floors.append(total)
                for k in calls:
                    calls[k].append(took[k])
        out = {"patch": statistics.median(times), "carry": statistics.median(carries),
               "steps": {k: statistics.median(v) if v else float("nan")
                         for k, v in steps.items()}}
        if floors:
            out["floor"] = statistics.median(floors)
            out["floor_calls"] = {k: statistics.median(v) for k, v in calls.items()}
        return out

    def floor_body(self, name):
        """The create body of the set's container as gpuboxd made it."""
        info = self.inspect(self.container(name))
        body = dict(info["Config"])
        for k in ("Hostname", "Domainname"):
            body.pop(k, None)
        body["Labels"] = {"gbbench.floor": self.tag}
        body["HostConfig"] = {k: v for k, v in info["HostConfig"].items()
                              if v not in (None, "", [], {})}
        return body

    def floor_round(self, body, i):
        """Docker alone: create + start + stop + rm of body. (total s, {call: ms})."""
        cname = f"{self.tag}-floor{i}"
        t0 = time.monotonic()
        status, created = call(self.docker, "POST", f"/containers/create?name={cname}", body)
        if status != 201:
            raise RuntimeError(f"floor create: HTTP {status}: {created}")
        cid = created["Id"]
        t1 = time.monotonic()
        status, answer = call(self.docker, "POST", f"/containers/{cid}/start")
        t2 = time.monotonic()
        if status not in (204, 304):
            call(self.docker, "DELETE", f"/containers/{cid}?force=1")
            raise RuntimeError(f"floor start: HTTP {status}: {answer}")
        call(self.docker, "POST", f"/containers/{cid}/stop?t=10")
        t3 = time.monotonic()
        call(self.docker, "DELETE", f"/containers/{cid}?force=1")
        t4 = time.monotonic()
        return t4 - t0, dict(zip(("create", "start", "stop", "rm"),
                                 ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
                                  (t4 - t3) * 1e3)))

    # --- one case ------------------------------------------------------------------------------

    def case(self, mb, shape, cmd=("sleep", "infinity"), floor_rounds=None,
             caches=("warm", "cold")):
        """Rows {cache: {...}} of one size and shape."""
        name = f"{self.tag}x{mb}{shape}"
        self.make_set(name, list(cmd))
        rows = {}
        try:
            if shape == "big":
                self.write_big(name, mb)
            elif mb:
                self.write_small(name, mb)
            os.sync()
            for cache in caches:
                cp = self.copy(name, cache == "cold")
                row = self.patches(name, cache == "cold",
                                   0 if cache == "cold" else floor_rounds or self.rounds)
                if cp is None or row is None:
                    continue
                row["cp"] = cp
                rows[cache] = row
            # The floor was measured beside the warm patches; cold rows
            # compare with the same.
            if "cold" in rows:
                rows["cold"]["floor"] = rows["warm"]["floor"]
                rows["cold"]["floor_calls"] = rows["warm"]["floor_calls"]
            self.check(name, mb, shape)
        finally:
            self.delete_set(name)
        return rows


def ratio(a, b):
    return a / b if b > 0 else float("inf")


def main():
    url, image, work = sys.argv[1:4]
    b = Bench(url, image, work)
    sizes = [int(s) for s in os.environ["SIZES_MB"].split()]
    shapes = os.environ.get("SHAPES", "big small").split()
    print(f"ROUNDS={b.rounds}, sizes {', '.join(human(s) for s in sizes)}; small files of "
          f"{b.small_kb} KB under {SMALL_DIR}; cold cache: "
          f"{'sync + drop_caches' if b.cold_ok else 'NOT AVAILABLE (not root?): warm only'}")

    cases = []  # (label, mb, shape, cache, row)
    for mb in sizes:
        for shape in (["big"] if mb == 0 else shapes):
            t0 = time.monotonic()
            rows = b.case(mb, shape)
            what = ("empty" if mb == 0 else "1 file" if shape == "big"
                    else f"{b.small_count(mb)} files")
            for cache, row in rows.items():
                cases.append((f"{human(mb)}, {what}, {cache}", mb, shape, cache, row))
            print(f"  {human(mb)} {what}: done in {time.monotonic() - t0:.0f} s "
                  f"(carried by {getattr(b, 'method', '?')})", flush=True)
    shell = None
    if os.environ.get("SHELL_CASE", "1") == "1":
        # A set whose command is an interactive shell (the image's CMD
        # /bin/sh, with the TTY gpubox gives every container): its shell
        # ignores SIGTERM, so Docker's stop waits the whole 10 s grace.
        rows = b.case(0, "big", cmd=("/bin/sh",), floor_rounds=1, caches=("warm",))
        shell = rows.get("warm")
        print("  0 B, CMD /bin/sh: done", flush=True)

    print()
    print("Whole patch through the API vs cp -a of the merged directory and Docker's floor")
    print("(seconds; floor = Docker create+start+stop+rm of the same config, no gpubox;")
    print(" gda est = floor + cp -a, an estimate of gpu-docker-api's whole patch)")
    hdr = (f"{'case':<28} {'patch':>7} {'carry':>7} {'cp -a':>8} {'cp/patch':>9} "
           f"{'floor':>7} {'gda est':>8} {'gda/patch':>9} {'cp/carry':>9}  20x (cp/patch)")
    print(hdr)
    print("-" * len(hdr))
    for label, mb, shape, cache, r in cases:
        cp_p = ratio(r["cp"], r["patch"])
        gda = r["floor"] + r["cp"]
        print(f"{label:<28} {r['patch']:7.3f} {r['carry']:7.4f} {r['cp']:8.3f} {cp_p:8.2f}x "
              f"{r['floor']:7.3f} {gda:8.3f} {ratio(gda, r['patch']):8.2f}x "
              f"{ratio(r['cp'], r['carry']):8.0f}x  {'met' if cp_p >= 20 else 'missed'}")
    if shell:
        r = shell
        print(f"{'0 B, CMD /bin/sh, warm':<28} {r['patch']:7.3f} {r['carry']:7.4f} "
              f"{'-':>8} {'-':>9} {r['floor']:7.3f} {'-':>8} {'-':>9} {'-':>9}  "
              f"(the floor waits out Docker's 10 s grace)")

    print()
    print("Growth (target: the patch at 1 GB within 2x of the patch at 0 B)")
    zero = {c[3]: c[4] for c in cases if c[1] == 0}
    for label, mb, shape, cache, r in cases:
        if mb == 0 or cache not in zero:
            continue
        g = ratio(r["patch"], zero[cache]["patch"])
        verdict = ("met" if g <= 2 else "missed") if mb == 1024 else "(1 GB is the target)"
        print(f"  {label:<28} {g:5.2f}x of 0 B ({cache})  {verdict}")

    print()
    print("Where a patch's time goes (median ms per journal step, from the operation record)")
    hdr = f"{'case':<28} " + " ".join(f"{s:>7}" for s in STEP_SHORT) + f" {'sum':>7} {'answer':>7}"
    print(hdr)
    print("-" * len(hdr))
    for label, mb, shape, cache, r in cases + ([("0 B, CMD /bin/sh, warm", 0, "", "", shell)]
                                               if shell else []):
        st = r["steps"]
        total = sum(v for v in st.values() if v == v)
        print(f"{label:<28} " + " ".join(f"{st[s]:7.1f}" for s in STEPS) +
              f" {total:7.1f} {r['patch'] * 1000:7.1f}")
    print()
    print("Docker's floor per call (median ms; the same four calls a patch makes)")
    for label, mb, shape, cache, r in cases + ([("0 B, CMD /bin/sh", 0, "", "", shell)]
                                               if shell else []):
        if cache == "cold":
            continue
        fc = r["floor_calls"]
        own = (f"patch - floor {1000 * (r['patch'] - r['floor']):+6.1f}" if shape
               else "(Docker's stop waits out its 10 s grace)")
        print(f"  {label:<26} create {fc['create']:5.1f}  start {fc['start']:6.1f}  "
              f"stop {fc['stop']:7.1f}  rm {fc['rm']:5.1f}  total {r['floor'] * 1000:7.1f}  "
              f"patch {r['patch'] * 1000:6.1f}  {own}")

if __name__ == "__main__":
    main()
