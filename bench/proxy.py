"""bench/proxy.sh's measurements: the service proxy, two bare relays (the
floor) and a direct connection to the container's own address,
interleaved in one run.

  proxy.py PROXY_BASE DIRECT_BASE TOKEN ROUNDS MB FLOOR_THREAD_BASE FLOOR_POLL_BASE

PROXY_BASE is http://127.0.0.1:PORT/s/SET/echo, DIRECT_BASE
http://CONTAINER_IP:9000/s/SET/echo (services_echo answers any path), the
FLOOR bases http://127.0.0.1:PORT/s/SET/echo of two bench/proxy_floor.c
relays forwarding to the container's address (one with a thread per
direction, one polling: the better of the two, for each measure by
itself, is the floor: what any process between client and container
costs on this machine).
Each round does, against each of the four paths in turn (the order
changing from round to round, each path first and after each other
path as often as the others):
  - latency, new connection per request: 200 GET requests one after
    another, a new connection each on every path (what a client that
    never reuses connections pays: through the proxy or a relay a TCP
    handshake to it and one from it to the container), timed from
    connect to the last byte;
  - latency, keep-alive: 500 GET requests over one persistent connection
    on each path (what a browser sees: it keeps its connections, and the
    proxy keeps its own to the container), timed per request;
  - throughput down: one GET of MB MiB (/big?mb=MB, streamed, ended by
    the close), in MiB/s;
  - throughput up: one POST of an MB MiB body (Content-Length), counted
    by services_echo, in MiB/s to its answer.
Throughput is measured after the latency rounds, in 2 x ROUNDS groups,
each the four paths' transfers back to back (the order changing likewise): the
ratios printed (proxy/direct, floor/direct, proxy/floor) are the medians
of the groups' ratios, so that the load of a shared machine, which moves
between transfers, moves all paths of a group alike.
Prints the medians of each path and the ratios, with the targets (reported,
never enforced): throughput >= 0.8x, latency <= 1.2x (the keep-alive
figure is the one the target is about: docs/services.md, "Performance");
the last line ("result ...") is the same, machine-readable.
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


SIDES = ("direct", "floor-thread", "floor-poll", "proxy")
FLOORS = ("floor-thread", "floor-poll")
# the order of the paths from round to round (group to group): a balanced
# Latin square (Williams), so that each path comes first as often as the
# others and follows each other path once in four, not always the same one
ORDERS = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))


def order_of(r):
    return [SIDES[i] for i in ORDERS[r % len(ORDERS)]]


def rng(values, fmt):
    v = sorted(values)
    return f"{statistics.median(v):{fmt}} ({v[0]:{fmt}}-{v[-1]:{fmt}})"


def main():
    proxy, direct, token = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds, mb = int(sys.argv[4]), int(sys.argv[5])
    floor_thread, floor_poll = sys.argv[6], sys.argv[7]
    sides = {"direct": (direct, None), "floor-thread": (floor_thread, None),
             "floor-poll": (floor_poll, None), "proxy": (proxy, token)}
    kinds = ("new", "kept")
    lat = {(k, s): [] for k in kinds for s in SIDES}
    p99 = {(k, s): [] for k in kinds for s in SIDES}
    for r in range(rounds):
        order = order_of(r)
        for side in order:
            base, tok = sides[side]
            for kind, measure in (("new", latency_new_ms), ("kept", latency_kept_ms)):
                med, tail = measure(base, tok)
                lat[kind, side].append(med)
                p99[kind, side].append(tail)
    # throughput in back-to-back groups of the four paths (the order
    # changing from group to group), so that a change of the machine's
    # load between transfers moves all of a group alike: the ratios within
    # each group, then their medians
    thr = {(k, s): [] for k in ("down", "up") for s in SIDES}
    for r in range(2 * rounds):
        order = order_of(r)
        for kind, measure in (("down", throughput_mib_s), ("up", upload_mib_s)):
            for side in order:
                base, tok = sides[side]
                thr[kind, side].append(measure(base, tok, mb))
    m = {k: statistics.median(v) for k, v in lat.items()}
    q = {k: statistics.median(v) for k, v in p99.items()}
    t = {k: statistics.median(v) for k, v in thr.items()}
    print(f"service proxy, bare relays (the floor) and direct to the container, {rounds} rounds "
          f"interleaved (throughput: {2 * rounds} groups of the four, {mb} MiB each way)")
    print(f"  {'':13} {'new conn. ms':>13} {'p99':>7} {'keep-alive ms':>14} {'p99':>7} "
          f"{'MiB/s down':>11} {'MiB/s up':>9}")
    for side in SIDES:
        print(f"  {side:13} {m['new', side]:13.3f} {q['new', side]:7.3f} "
              f"{m['kept', side]:14.3f} {q['kept', side]:7.3f} {t['down', side]:11.0f} "
              f"{t['up', side]:9.0f}")
    print(f"  the proxy's own round trip (a 404 it answers alone): {floor_ms(proxy):.3f} ms "
          f"new connection, {floor_ms(proxy, kept=True):.3f} ms keep-alive")
    # the floor: the better of the two relays, for each measure by itself
    floor = {}
    for kind in ("new", "kept"):
        floor[kind] = min(FLOORS, key=lambda s: m[kind, s])
    for kind in ("down", "up"):
        floor[kind] = max(FLOORS, key=lambda s: t[kind, s])
    result = {}
    for kind, words in (("kept", "keep-alive"), ("new", "new connection")):
        f = floor[kind]
        pd, fd, pf = (m[kind, "proxy"] / m[kind, "direct"], m[kind, f] / m[kind, "direct"],
                      m[kind, "proxy"] / m[kind, f])
        print(f"  latency {words + ',':16} ratios of medians: proxy/direct {pd:.2f} "
              f"(target <= 1.2), floor/direct {fd:.2f}, proxy/floor {pf:.2f} (floor: {f})")
        result.update({f"{kind}_direct": f"{m[kind, 'direct']:.3f}",
                       f"{kind}_floor": f"{m[kind, f]:.3f}",
                       f"{kind}_proxy": f"{m[kind, 'proxy']:.3f}",
                       f"{kind}_pd": f"{pd:.2f}", f"{kind}_fd": f"{fd:.2f}",
                       f"{kind}_pf": f"{pf:.2f}", f"{kind}_floor_is": f})
    for kind, words in (("down", "an answer down"), ("up", "a body up")):
        f = floor[kind]
        d, fl, p = thr[kind, "direct"], thr[kind, f], thr[kind, "proxy"]
        pd = [p[i] / d[i] for i in range(len(d))]
        fd = [fl[i] / d[i] for i in range(len(d))]
        pf = [p[i] / fl[i] for i in range(len(d))]
        print(f"  throughput, {words + ':':15} medians of the {len(d)} groups' ratios (range): "
              f"proxy/direct {rng(pd, '.2f')} (target >= 0.8), floor/direct {rng(fd, '.2f')}, "
              f"proxy/floor {rng(pf, '.2f')} (floor: {f})")
        result.update({f"{kind}_direct": f"{t[kind, 'direct']:.0f}",
                       f"{kind}_floor": f"{t[kind, f]:.0f}",
                       f"{kind}_proxy": f"{t[kind, 'proxy']:.0f}",
                       f"{kind}_pd": f"{statistics.median(pd):.2f}",
                       f"{kind}_fd": f"{statistics.median(fd):.2f}",
                       f"{kind}_pf": f"{statistics.median(pf):.2f}",
                       f"{kind}_floor_is": f})
    print("result " + " ".join(f"{k}={v}" for k, v in result.items()))


main()
