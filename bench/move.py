#!/usr/bin/python3
"""move.py - a replica set moved between two nodes against `tar | nc` of
the same data between the same namespaces; bench/move.sh makes the fleet
and runs this in the hub's netns (see there for what each side means).

Usage: move.py URL_A URL_B IMAGE   (env SIZE_MB, NODE_A_NETNS, NODE_B_NETNS,
DOCKER_A, DOCKER_B, ADDR_B, WORK, PERF_OUT: a `perf record -a -g` file of the
stopped move; stdlib only)
"""
import http.client
import json
import threading
import os
import socket
import subprocess
import sys
import time
import urllib.parse

TARGET = 0.8
PORT = 23999


def call(url, method, path, body=None, timeout=7200):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    env = json.loads(r.read() or b"{}")
    conn.close()
    if r.status != 200:
        sys.exit(f"move.py: {method} {path}: {r.status} {env.get('msg')}")
    return env.get("data")


def docker_a(path):
    """GET path of node a's dockerd (a unix socket: reachable from any netns)."""
    sock = os.environ["DOCKER_A"][len("unix://"):]
    out = subprocess.run(["curl", "-fsS", "--unix-socket", sock, f"http://d{path}"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def running_on(sock, prefix):
    """Whether a container named prefix-* runs on the dockerd at sock."""
    conn = UnixConnection(sock[len("unix://"):])
    q = urllib.parse.quote(json.dumps({"name": [prefix]}))
    conn.request("GET", f"/containers/json?filters={q}")
    body = json.loads(conn.getresponse().read() or b"[]")
    conn.close()
    return any(c.get("State") == "running" for c in body)


class Downtime(threading.Thread):
    """Polls both dockerds every 10 ms: the seconds from the moment no
    container of the set runs on `from` until one runs on `to`."""

    def __init__(self, sock_from, sock_to, prefix):
        super().__init__(daemon=True)
        self.sock_from, self.sock_to, self.prefix = sock_from, sock_to, prefix
        self.stopped_at = self.started_at = None
        self.done = threading.Event()

    def run(self):
        # The answer may come before this sees the set run on `to` (the
        # source answers once the target started it): go on polling a while.
        give_up = None
        while give_up is None or time.monotonic() < give_up:
            if give_up is None and self.done.is_set():
                give_up = time.monotonic() + 30
            now = time.monotonic()
            if self.stopped_at is None:
                if not running_on(self.sock_from, self.prefix):
                    self.stopped_at = now
            elif running_on(self.sock_to, self.prefix):
                self.started_at = now
                return
            time.sleep(0.01)

    def seconds(self):
        if self.stopped_at is None or self.started_at is None:
            return None
        return self.started_at - self.stopped_at


def in_ns(netns, args, **kw):
    return subprocess.run(["nsenter", f"--net=/var/run/netns/{netns}", *args], **kw)


def baseline(src_dirs, dest):
    """tar of src_dirs in node a's netns to a socket read in node b's netns
    into tar -x under dest: seconds."""
    os.makedirs(dest, exist_ok=True)
    receiver = ("import socket,sys\n"
                "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                f"s.bind(('0.0.0.0', {PORT})); s.listen(1); c,_=s.accept()\n"
                "out=sys.stdout.buffer; buf=bytearray(1<<20); v=memoryview(buf)\n"
                "while True:\n"
                "    n=c.recv_into(buf)\n"
                "    if not n: break\n"
                "    out.write(v[:n])\n"
                "out.flush()\n")
    rx = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{os.environ['NODE_B_NETNS']}",
                           "bash", "-c", f"python3 -c \"$0\" | tar -C {dest} -xf -", receiver])
    time.sleep(2)  # the receiver listening (a loaded machine is slow to start python)
    start = time.monotonic()
    parts = " ".join(f"-C {d} ." for d in src_dirs)
    dest_tcp = f"/dev/tcp/{os.environ['ADDR_B']}/{PORT}"
    in_ns(os.environ["NODE_A_NETNS"],
          ["bash", "-c", f"for i in $(seq 1 100); do exec 3>{dest_tcp} && break; sleep 0.1;"
                         f" done 2>/dev/null; tar -cf - {parts} >&3"],
          check=True)
    rx.wait()
    return time.monotonic() - start


def main():
    url_a, url_b, image = sys.argv[1:4]
    try:
        run(url_a, url_b, image)
    finally:  # the volume unmounted before the nodes go (move.sh's clean-up)
        for url in (url_a, url_b):
            for path in ("/api/v1/replicaSet/benchmove?purge=true", "/api/v1/volumes/benchvol"):
                try:
                    u = urllib.parse.urlparse(url)
                    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                    c.request("DELETE", path)
                    c.getresponse().read()
                    c.close()
                except OSError:
                    pass


def run(url_a, url_b, image):
    size_mb = int(os.environ.get("SIZE_MB", "1024"))
    work = os.environ["WORK"]
    data_mb = 2 * size_mb
    call(url_a, "POST", "/api/v1/volumes",
         {"name": "benchvol", "size": f"{size_mb * 12 // 10 + 64}MB", "node": "a"})
    call(url_a, "POST", "/api/v1/replicaSet",
         {"replicaSetName": "benchmove", "imageName": image, "gpuCount": 0, "node": "a",
          "cmd": ["sleep", "infinity"], "binds": [{"src": "benchvol", "dest": "/data"}]})
    fill = (f"dd if=/dev/urandom of=/root/blob bs=1M count={size_mb} 2>/dev/null && "
            f"dd if=/dev/urandom of=/data/blob bs=1M count={size_mb} 2>/dev/null && sync")
    t = time.monotonic()
    call(url_a, "POST", "/api/v1/replicaSet/benchmove/execute",
         {"cmd": ["sh", "-c", fill], "timeoutSeconds": 3600})
    print(f"move: {size_mb} MB on the system disk and {size_mb} MB in the volume, written in "
          f"{time.monotonic() - t:.1f} s")
    call(url_a, "PATCH", "/api/v1/replicaSet/benchmove/stop")
    info = call(url_a, "GET", "/api/v1/replicaSet/benchmove")["info"]
    upper = docker_a(f"/containers/{info['containerName']}/json")["GraphDriver"]["Data"]["UpperDir"]
    # The Docker volume binds the volume's own directory (mounted by gpuboxd).
    vol = docker_a("/volumes/gpubox_benchvol")["Options"]["device"]
    # Page cache warm for both sides alike: read once before either.
    # And no write-back left over from before either side: each starts
    # with the disk idle (the baseline's 2 x SIZE_MB written just before
    # the move would otherwise still be going out to disk under it).
    subprocess.run(["bash", "-c", f"cat {upper}/root/blob {vol}/blob > /dev/null; sync"], check=True)
    base_s = baseline([upper, vol], f"{work}/baseline")
    subprocess.run(["bash", "-c", f"rm -rf {work}/baseline; sync"], check=True)
    perf = None
    if os.environ.get("PERF_OUT"):  # a profile of the whole machine during the move
        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "499", "-o",
                                 os.environ["PERF_OUT"]], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(1)
    t = time.monotonic()
    moved = call(url_a, "POST", "/api/v1/replicaSet/benchmove/move", {"node": "b"})
    move_s = time.monotonic() - t
    if perf:
        perf.send_signal(2)
        perf.wait()
    base_rate, move_rate = data_mb / base_s, data_mb / move_s
    print(f"move: baseline tar | nc   {base_s:7.2f} s  {base_rate:8.1f} MB/s")
    print(f"move: move (stopped)      {move_s:7.2f} s  {move_rate:8.1f} MB/s  "
          f"({moved['bytes'] / 1e6:.1f} MB on the wire; the whole move: room taken, volume "
          f"made, data, records; the source removes its old copy after its answer)")
    copy = moved.get("copy") or {}
    if copy.get("seconds"):
        print(f"move: of which the copy   {copy['seconds']:7.2f} s  {data_mb / copy['seconds']:8.1f} MB/s"
              f"  ({data_mb / copy['seconds'] / base_rate:.2f}x of tar | nc)")
        print(f"move: outside the copy    {move_s - copy['seconds']:7.2f} s  (the target's prepare:"
              f" room, volume, network, container; the hand-over and commit)")
    ratio = move_rate / base_rate
    print(f"move: ratio {ratio:.2f}x of tar | nc (target >= {TARGET}x): "
          f"{'met' if ratio >= TARGET else 'NOT met'}")
    # A running set moved back: how long it does not run (its downtime),
    # against the time of the copy made while it ran.
    call(url_b, "PATCH", "/api/v1/replicaSet/benchmove/restart", {})
    watch = Downtime(os.environ["DOCKER_B"], os.environ["DOCKER_A"], "benchmove")
    watch.start()
    t = time.monotonic()
    back = call(url_b, "POST", "/api/v1/replicaSet/benchmove/move", {"node": "a"})
    move_s = time.monotonic() - t
    watch.done.set()
    watch.join()
    copy = back.get("copy") or {}
    pre = copy.get("preCopied") or {}
    down = watch.seconds()
    print(f"move: running set moved back in {move_s:.2f} s ({copy.get('way', '?')} way), "
          f"{back['bytes'] / 1e6:.1f} MB on the wire")
    if pre:
        print(f"move:   copied while it ran     {pre['seconds']:7.2f} s  {pre['bytes'] / 1e6:9.1f} MB")
    print(f"move:   after the stop (diff)   {copy.get('seconds', 0):7.2f} s  "
          f"{copy.get('bytes', 0) / 1e6:9.1f} MB")
    print(f"move:   downtime (not running)  " + (f"{down:7.2f} s" if down is not None else "unmeasured")
          + f"   (the stop, the difference, Docker's start; the whole copy at "
          f"{base_rate:.0f} MB/s of tar | nc would take {data_mb / base_rate:.2f} s)")

if __name__ == "__main__":
    main()
