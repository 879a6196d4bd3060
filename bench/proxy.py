"""bench/proxy.sh's measurements: the service proxy against a direct
connection to the container's own address, interleaved in one run.

  proxy.py PROXY_BASE DIRECT_BASE TOKEN ROUNDS MB

PROXY_BASE is http://127.0.0.1:PORT/s/SET/echo, DIRECT_BASE
http://CONTAINER_IP:9000/s/SET/echo (services_echo answers any path).
Each round does, against each side in turn:
  - latency: 200 GET requests one after another, a new connection each
    (the proxy serves one request per connection; the direct side the same,
    for a fair comparison), timed from connect to the last byte;
  - throughput: one GET of MB MiB (/big?mb=MB), streamed, in MiB/s.
Prints the medians of each side and the ratios, with the targets (reported,
never enforced): throughput >= 0.8x, latency <= 1.2x.
"""
import socket
import statistics
import sys
import time
import urllib.parse


def request(base, path, token, sink=None):
    u = urllib.parse.urlsplit(base)
    s = socket.create_connection((u.hostname, u.port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall(f"GET {u.path}{path} HTTP/1.1\r\nHost: {u.netloc}\r\n{auth}\r\n".encode())
    total = 0
    first = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        if len(first) < 16:
            first += chunk[:16]
        total += len(chunk)
    s.close()
    if not first.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"proxy.py: {base}{path} answered {first!r}")
    return total


def latency_ms(base, token, n=200):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        request(base, "/ping", token)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), sorted(times)[int(len(times) * 0.99) - 1]


def throughput_mib_s(base, token, mb):
    t0 = time.perf_counter()
    got = request(base, f"/big?mb={mb}", token)
    dt = time.perf_counter() - t0
    if got < mb << 20:
        raise SystemExit(f"proxy.py: {base} gave {got} bytes, not {mb} MiB")
    return mb / dt


def floor_ms(base, n=200):
    """The proxy's own path: a request it answers itself (404), no container."""
    u = urllib.parse.urlsplit(base)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = socket.create_connection((u.hostname, u.port), timeout=60)
        s.sendall(f"GET /nothing HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
        while s.recv(65536):
            pass
        s.close()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main():
    proxy, direct, token, rounds, mb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    lat = {"proxy": [], "direct": []}
    p99 = {"proxy": [], "direct": []}
    thr = {"proxy": [], "direct": []}
    sides = {"proxy": (proxy, token), "direct": (direct, None)}
    for r in range(rounds):
        order = ["proxy", "direct"] if r % 2 == 0 else ["direct", "proxy"]
        for side in order:
            base, tok = sides[side]
            med, tail = latency_ms(base, tok)
            lat[side].append(med)
            p99[side].append(tail)
            thr[side].append(throughput_mib_s(base, tok, mb))
    m = {k: statistics.median(v) for k, v in lat.items()}
    t = {k: statistics.median(v) for k, v in thr.items()}
    q = {k: statistics.median(v) for k, v in p99.items()}
    print(f"service proxy vs direct to the container, {rounds} rounds interleaved")
    print(f"  {'':8} {'latency ms (median)':>20} {'p99 ms':>8} {'MiB/s':>10}")
    for side in ("direct", "proxy"):
        print(f"  {side:8} {m[side]:20.3f} {q[side]:8.3f} {t[side]:10.0f}")
    print(f"  the proxy's own round trip (a 404 it answers alone): {floor_ms(proxy):.3f} ms")
    print(f"  latency ratio proxy/direct:    {m['proxy'] / m['direct']:.2f} (target <= 1.2)")
    print(f"  throughput ratio proxy/direct: {t['proxy'] / t['direct']:.2f} (target >= 0.8)")


main()
