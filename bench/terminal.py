#!/usr/bin/env python3
"""terminal.py URL SET CONTAINER ROUNDS - keystroke-to-echo round trip
through gpuboxd's terminal (a WebSocket to a Docker exec with a TTY)
against the same exec reached directly through the Docker API's hijacked
stream, in one run: one byte out, the TTY's echo of it back, ROUNDS times
each, over one connection each. Prints the median and 95th percentile of
both and the ratio of the medians (target: gpuboxd at most 1.2x)."""
import json
import os
import socket
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import wsutil  # noqa: E402


class Target:
    def __init__(self, url):
        rest = url.split("://", 1)[1]
        self.host, port = rest.rsplit(":", 1)
        self.port = int(port)


def docker_socket():
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert host.startswith("unix://"), host
    s = socket.socket(socket.AF_UNIX)
    s.connect(host[len("unix://"):])
    return s


def docker_call(method, path, body=None):
    s = docker_socket()
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(f"{method} /v1.41{path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, payload = out.partition(b"\r\n\r\n")
    return json.loads(payload) if payload.strip().startswith(b"{") else None


def direct(container):
    """A TTY exec of cat, hijacked: (send, recv) on the raw stream."""
    eid = docker_call("POST", f"/containers/{container}/exec",
                      {"AttachStdin": True, "AttachStdout": True, "AttachStderr": True,
                       "Tty": True, "Cmd": ["cat"]})["Id"]
    s = docker_socket()
    body = b'{"Detach":false,"Tty":true}'
    s.sendall(f"POST /v1.41/exec/{eid}/start HTTP/1.1\r\nHost: docker\r\n"
              f"Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    return s.sendall, lambda: s.recv(65536), s


def through_gpuboxd(target, name):
    ws = wsutil.connect(target, f"/api/v1/replicaSet/{name}/terminal",
                        query={"cmd": "cat"})
    return ws.send_binary, lambda: ws.recv()[1], ws.sock


def one(send, recv, i):
    """Microseconds from sending one key to seeing its echo."""
    key = bytes([ord("a") + i % 26])
    t0 = time.perf_counter()
    send(key)
    got = b""
    while key not in got:
        got += recv()
    return (time.perf_counter() - t0) * 1e6


def measure(paths, rounds):
    """Each round one keystroke on each path, in turn, so a busy moment of
    the machine falls on both alike; the first few warm up."""
    times = [[] for _ in paths]
    for i in range(rounds + 5):
        for k, (send, recv) in enumerate(paths):
            t = one(send, recv, i)
            if i >= 5:
                times[k].append(t)
    return times


def summary(times):
    times = sorted(times)
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def main():
    url, name, container, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    target = Target(url)
    dsend, drecv, dsock = direct(container)
    gsend, grecv, gsock = through_gpuboxd(target, name)
    dsock.settimeout(10)
    gsock.settimeout(10)
    d, g = measure([(dsend, drecv), (gsend, grecv)], rounds)
    dsock.close()
    gsock.close()
    dm, dp = summary(d)
    gm, gp = summary(g)
    print(f"keystroke to echo, {rounds} rounds, the two paths in turn (microseconds):")
    print(f"  direct Docker API (hijacked exec): median {dm:8.0f}  p95 {dp:8.0f}")
    print(f"  gpuboxd terminal (WebSocket):     median {gm:8.0f}  p95 {gp:8.0f}")
    print(f"  ratio of medians: {gm / dm:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
