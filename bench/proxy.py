"""bench/proxy.sh's measurements: the service proxy against a direct
connection to the container's own address, interleaved in one run.

  proxy.py PROXY_BASE DIRECT_BASE TOKEN ROUNDS MB

PROXY_BASE is http://127.0.0.1:PORT/s/SET/echo, DIRECT_BASE
http://CONTAINER_IP:9000/s/SET/echo (services_echo answers any path).
Each round does, against each side in turn:
  - latency, new connection per request: 200 GET requests one after
    another, a new connection each on both sides (what a client that
    never reuses connections pays: a TCP handshake to the proxy and one
    from the proxy to the container), timed from connect to the last byte;
  - latency, keep-alive: 500 GET requests over one persistent connection
    to the proxy against 500 over one persistent connection straight to
    the container (what a browser sees: it keeps its connections, and
    the proxy keeps its own to the container), timed per request;
  - throughput down: one GET of MB MiB (/big?mb=MB, streamed, ended by
    the close), in MiB/s;
  - throughput up: one POST of an MB MiB body (Content-Length), counted
    by services_echo, in MiB/s to its answer.
Throughput is measured after the latency rounds, in 2 x ROUNDS pairs,
each a direct and a proxied transfer back to back (in turn which first):
the ratio printed is the median of the pairs' ratios, so that the load of
a shared machine, which moves between transfers, moves both sides of a
pair alike.
Prints the medians of each side and the ratios, with the targets (reported,
never enforced): throughput >= 0.8x, latency <= 1.2x (the keep-alive
figure is the one the target is about: docs/services.md, "Performance").
"""
import socket
import statistics
import sys
import time
import urllib.parse


def connect(base):
    u = urllib.parse.urlsplit(base)
    s = socket.create_connection((u.hostname, u.port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, u


def request(base, path, token, sink=None):
    """One request on a new connection, read to the close."""
    s, u = connect(base)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(f"GET {u.path}{path} HTTP/1.1\r\nHost: {u.netloc}\r\n"
              f"Connection: close\r\n{auth}\r\n".encode())
    total = 0
    first = b""
    buf = bytearray(1 << 20)  # read into one buffer: the client's own cost kept small
    while True:
        n = s.recv_into(buf)
        if not n:
            break
        if len(first) < 16:
            first += bytes(buf[:16 - len(first)])
        total += n
    s.close()
    if not first.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"proxy.py: {base}{path} answered {first!r}")
    return total


class Kept:
    """One persistent connection; get() sends a request and reads its
    answer (framed by Content-Length) without closing."""

    def __init__(self, base, token):
        self.s, self.u = connect(base)
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.req = f"GET {self.u.path}/ping HTTP/1.1\r\nHost: {self.u.netloc}\r\n{auth}\r\n".encode()
        self.buf = b""

    def get(self):
        self.s.sendall(self.req)
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit("proxy.py: a kept connection closed")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"proxy.py: answered {head[:40]!r}")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
            elif k.strip().lower() == b"connection" and b"close" in v.lower():
                raise SystemExit("proxy.py: the answer closes the connection")
        while len(rest) < length:
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit("proxy.py: closed inside an answer")
            rest += chunk
        self.buf = rest[length:]

    def close(self):
        self.s.close()


def summary(times):
    return statistics.median(times), sorted(times)[int(len(times) * 0.99) - 1]


def latency_new_ms(base, token, n=200):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        request(base, "/ping", token)
        times.append((time.perf_counter() - t0) * 1000)
    return summary(times)


def latency_kept_ms(base, token, n=500):
    k = Kept(base, token)
    k.get()  # the connection (and the proxy's own to the container) made
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        k.get()
        times.append((time.perf_counter() - t0) * 1000)
    k.close()
    return summary(times)


def throughput_mib_s(base, token, mb):
    t0 = time.perf_counter()
    got = request(base, f"/big?mb={mb}", token)
    dt = time.perf_counter() - t0
    if got < mb << 20:
        raise SystemExit(f"proxy.py: {base} gave {got} bytes, not {mb} MiB")
    return mb / dt


def upload_mib_s(base, token, mb):
    """One POST of MB MiB (framed by Content-Length) to /up, which
    services_echo reads and counts, in MiB/s up to its answer."""
    s, u = connect(base)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    n = mb << 20
    block = bytes(1 << 20)
    t0 = time.perf_counter()
    s.sendall(f"POST {u.path}/up HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {n}\r\n"
              f"Connection: close\r\n{auth}\r\n".encode())
    for _ in range(mb):
        s.sendall(block)
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    dt = time.perf_counter() - t0
    s.close()
    if f"body-bytes={n}".encode() not in got:
        raise SystemExit(f"proxy.py: {base} took the upload as {got[-200:]!r}")
    return mb / dt


def floor_ms(base, n=200, kept=False):
    """The proxy's own path: a request it answers itself (404), no container;
    a new connection each, or all on one kept connection."""
    u = urllib.parse.urlsplit(base)
    times = []
    req = f"GET /nothing HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode()
    s = None
    for _ in range(n):
        t0 = time.perf_counter()
        if not kept or s is None:
            s, _ = connect(base)
        s.sendall(req)
        got = b""
        while not got.endswith(b"404 page not found\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit(f"proxy.py: the 404 came as {got!r}")
            got += chunk
        if not kept:
            s.close()
        times.append((time.perf_counter() - t0) * 1000)
    if kept:
        s.close()
    return statistics.median(times)


def main():
    proxy, direct, token, rounds, mb = (sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
                                        int(sys.argv[5]))
    kinds = ("new", "kept")
    lat = {(k, s): [] for k in kinds for s in ("proxy", "direct")}
    p99 = {(k, s): [] for k in kinds for s in ("proxy", "direct")}
    thr = {"proxy": [], "direct": []}
    up = {"proxy": [], "direct": []}
    sides = {"proxy": (proxy, token), "direct": (direct, None)}
    for r in range(rounds):
        order = ["proxy", "direct"] if r % 2 == 0 else ["direct", "proxy"]
        for side in order:
            base, tok = sides[side]
            for kind, measure in (("new", latency_new_ms), ("kept", latency_kept_ms)):
                med, tail = measure(base, tok)
                lat[kind, side].append(med)
                p99[kind, side].append(tail)
    # throughput in back-to-back pairs (direct then proxy, or the other
    # way round), so that a change of the machine's load between the two
    # moves both: the ratio of each pair, then their median
    ratios = {"down": [], "up": []}
    for r in range(2 * rounds):
        order = ["proxy", "direct"] if r % 2 == 0 else ["direct", "proxy"]
        for kind, measure, into in (("down", throughput_mib_s, thr), ("up", upload_mib_s, up)):
            got = {}
            for side in order:
                base, tok = sides[side]
                got[side] = measure(base, tok, mb)
                into[side].append(got[side])
            ratios[kind].append(got["proxy"] / got["direct"])
    m = {k: statistics.median(v) for k, v in lat.items()}
    q = {k: statistics.median(v) for k, v in p99.items()}
    t = {k: statistics.median(v) for k, v in thr.items()}
    t_up = {k: statistics.median(v) for k, v in up.items()}
    print(f"service proxy vs direct to the container, {rounds} rounds interleaved "
          f"(throughput: {2 * rounds} pairs of {mb} MiB each way)")
    print(f"  {'':8} {'new conn. ms':>13} {'p99':>7} {'keep-alive ms':>14} {'p99':>7} "
          f"{'MiB/s down':>11} {'MiB/s up':>9}")
    for side in ("direct", "proxy"):
        print(f"  {side:8} {m['new', side]:13.3f} {q['new', side]:7.3f} "
              f"{m['kept', side]:14.3f} {q['kept', side]:7.3f} {t[side]:11.0f} {t_up[side]:9.0f}")
    print(f"  the proxy's own round trip (a 404 it answers alone): {floor_ms(proxy):.3f} ms "
          f"new connection, {floor_ms(proxy, kept=True):.3f} ms keep-alive")
    for kind, words in (("kept", "keep-alive both sides"), ("new", "new connection per request")):
        print(f"  latency ratio proxy/direct, {words + ':':29} "
              f"{m[kind, 'proxy'] / m[kind, 'direct']:.2f} (target <= 1.2)")
    for kind, words in (("down", "an answer down"), ("up", "a body up")):
        rs = sorted(ratios[kind])
        print(f"  throughput ratio proxy/direct, {words + ':':15} {statistics.median(rs):.2f} "
              f"(target >= 0.8; median of {len(rs)} pairs, {rs[0]:.2f}-{rs[-1]:.2f})")


main()
