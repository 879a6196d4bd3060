"""A small WebSocket client (RFC 6455) for the terminal tests: enough to
open gpuboxd's terminal, send input and control messages, and read output,
the final {"exit": N} and the close. Written here so the tests need no
package beyond python3."""
import base64
import hashlib
import json
import os
import socket
import struct
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Refused(Exception):
    """The server answered the handshake with an HTTP error."""

    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body!r}")
        self.status = status
        self.body = body
        try:
            self.json = json.loads(body)
        except ValueError:
            self.json = None


class Closed(Exception):
    pass


class WebSocket:
    def __init__(self, sock, leftover=b""):
        self.sock = sock
        self.buf = bytearray(leftover)
        self.close_code = None
        self.close_reason = None

    # -- sending ---------------------------------------------------------
    def _frame(self, op, payload, fin=True):
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | op])
        if n <= 125:
            head += bytes([0x80 | n])
        elif n <= 0xFFFF:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload)) if n < 4096 else _xor(
            payload, mask)
        self.sock.sendall(head + mask + masked)

    def send_binary(self, data, chunk=32768):
        for i in range(0, len(data), chunk):
            self._frame(2, data[i:i + chunk])

    def send_text(self, text):
        self._frame(1, text.encode())

    def send_json(self, obj):
        self.send_text(json.dumps(obj))

    def resize(self, cols, rows):
        self.send_json({"resize": {"cols": cols, "rows": rows}})

    def eof(self):
        self.send_json({"eof": True})

    def close(self, code=1000):
        try:
            self._frame(8, struct.pack(">H", code))
        except OSError:
            pass

    # -- receiving -------------------------------------------------------
    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Closed("connection closed")
            self.buf += chunk

    def recv_frame(self):
        """(opcode, fin, payload) of the next frame."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n = b1 & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack(">H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack(">Q", self.buf[2:10])[0]
            off = 10
        assert not b1 & 0x80, "a server frame must not be masked"
        self._need(off + n)
        payload = bytes(self.buf[off:off + n])
        del self.buf[:off + n]
        return b0 & 0x0F, bool(b0 & 0x80), payload

    def recv(self):
        """The next message: ("binary"|"text"|"close", payload). Pings are
        answered on the way."""
        data, first = b"", None
        while True:
            op, fin, payload = self.recv_frame()
            if op == 9:
                self._frame(10, payload)
                continue
            if op == 10:
                continue
            if op == 8:
                self.close_code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                self.close_reason = payload[2:].decode(errors="replace")
                return "close", payload
            if op != 0:
                first = op
            data += payload
            if fin:
                return ("text" if first == 1 else "binary"), data

    def read_until_exit(self, timeout=60):
        """All output until the final {"exit": N} and the close: (bytes, N)."""
        self.sock.settimeout(timeout)
        out = bytearray()
        code = None
        while True:
            kind, data = self.recv()
            if kind == "binary":
                out += data
            elif kind == "text":
                msg = json.loads(data)
                if "exit" in msg:
                    code = msg["exit"]
            else:
                return bytes(out), code

    def shutdown(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _xor(payload, mask):
    n = len(payload)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(
        n, "little")


def connect(d, path, token=None, query=None, headers=None, timeout=30):
    """Open a WebSocket to gpuboxd d at path (with query, a list of pairs or
    a dict; over TLS with d.ssl_context when d serves HTTPS). Raises Refused
    when the server answers with an error."""
    if query:
        path += "?" + urllib.parse.urlencode(query, doseq=True)
    sock = socket.create_connection((d.host, d.port), timeout=timeout)
    if getattr(d, "scheme", "http") == "https":
        sock = d.ssl_context.wrap_socket(sock, server_hostname=d.host)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: {d.host}:{d.port}", "Upgrade: websocket",
             "Connection: Upgrade", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise Closed(f"closed during the handshake: {head!r}")
        head += chunk
    head, rest = head.split(b"\r\n\r\n", 1)
    status_line, *hdrs = head.decode().split("\r\n")
    status = int(status_line.split()[1])
    fields = {h.split(":", 1)[0].lower(): h.split(":", 1)[1].strip() for h in hdrs if ":" in h}
    if status != 101:
        length = int(fields.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        sock.close()
        raise Refused(status, rest.decode(errors="replace"))
    want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    assert fields.get("sec-websocket-accept") == want, fields
    return WebSocket(sock, rest)
