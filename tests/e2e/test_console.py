"""The web console (issue 16, docs/web.md): gpuboxd serves it at "/" from
the files embedded at build time, with a strict Content-Security-Policy,
gzip and long-cache hashed names; and Debian's chromium, driven by
playwright-core (web/e2e), uses it against this real gpuboxd and dockerd
as an admin, a user and a viewer would.
"""
import gzip
import os
import re
import secrets

import pytest

from conftest import FAKE_NVML, Daemon, fake_gpu_env
from rsutil import RUN_TAG, wipe
from secutil import write_tokens
from webutil import run_scenarios

PREFIX = "e2web" + RUN_TAG
PORTS = "64600-64649"
ADMIN = "adm-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
BUDGET_GZIP = 150 * 1024

# Four cards, as NVML (the fake libnvidia-ml.so.1) reports them.
CARDS = """\
driver_version 535.104.05
0 GPU-0e000000-0000-4000-8000-000000000000 16384 ok Tesla T4
1 GPU-0e000000-0000-4000-8000-000000000001 16384 ok Tesla T4
2 GPU-0e000000-0000-4000-8000-000000000002 16384 ok Tesla T4
3 GPU-0e000000-0000-4000-8000-000000000003 16384 ok Tesla T4
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    tokens = write_tokens(tmp / "tokens", f"alice:admin:{ADMIN}\nvera:viewer:{VIEWER}\n")
    desc = tmp / "gpus.txt"
    desc.write_text(CARDS)
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--port-range", PORTS,
                "--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML),
                "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log", env=fake_gpu_env(desc)).start()
    d.token = ADMIN
    yield d
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


def raw(d, method, path, headers=None):
    """(status, headers, body bytes) without any token."""
    conn = d.connection()
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def assets(d):
    """The script and stylesheet index.html loads, and the chunks its
    script loads later (the terminal's xterm.js)."""
    _, _, body = raw(d, "GET", "/")
    found = re.findall(r'(?:src|href)="(/assets/[^"]+)"', body.decode())
    for f in [f for f in found if f.endswith(".js")]:
        _, _, js = raw(d, "GET", f)
        for chunk in re.findall(r'assets/[\w.-]+\.(?:js|css)', js.decode()):
            if "/" + chunk not in found:
                found.append("/" + chunk)
    return found


def test_the_console_is_served_at_the_root_without_a_token(daemon):
    status, h, body = raw(daemon, "GET", "/")
    assert status == 200
    assert h["content-type"] == "text/html; charset=utf-8"
    assert b'<div id="app">' in body
    csp = h["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "style-src 'self'" in csp and "connect-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "unsafe" not in csp
    assert h["x-content-type-options"] == "nosniff"
    assert h["cache-control"] == "no-cache"  # a new build's index reaches everyone at once
    # no inline script or style: the CSP would refuse them
    assert not re.search(rb"<script(?![^>]*\bsrc=)[^>]*>", body)
    assert b"<style" not in body and b"style=" not in body
    # nothing from another origin: no CDN, no external fonts
    assert not re.search(rb'(?:src|href)="(?:https?:)?//', body)
    # the API still asks for a token, and the same path with POST is the API's
    status, _, _ = raw(daemon, "GET", "/api/v1/replicaSet")
    assert status == 401
    status, _, _ = raw(daemon, "POST", "/")
    assert status == 401


def test_hashed_files_are_cached_for_good_and_sent_gzipped(daemon):
    files = assets(daemon)
    assert any(f.endswith(".js") for f in files) and any(f.endswith(".css") for f in files)
    total_gzip = 0
    for f in files:
        status, plain_h, plain = raw(daemon, "GET", f)
        assert status == 200 and "content-encoding" not in plain_h
        status, h, packed = raw(daemon, "GET", f, {"Accept-Encoding": "gzip, br"})
        assert status == 200
        assert h["content-encoding"] == "gzip" and h["vary"] == "Accept-Encoding"
        assert gzip.decompress(packed) == plain
        assert h["cache-control"] == "public, max-age=31536000, immutable"
        assert h["content-security-policy"] == plain_h["content-security-policy"]
        total_gzip += len(packed)
        # revalidation by ETag answers 304 without a body
        status, _, body = raw(daemon, "GET", f, {"If-None-Match": h["etag"]})
        assert status == 304 and body == b""
        status, h, body = raw(daemon, "HEAD", f)
        assert status == 200 and body == b"" and int(h["content-length"]) == len(plain)
    # the budget: all JavaScript and CSS at most 150 KB gzipped
    assert total_gzip <= BUDGET_GZIP, f"{total_gzip} bytes gzipped"
    # a name that is not a file of the build is the API's 404 (after the token check)
    status, _, _ = raw(daemon, "GET", "/assets/nothing.js")
    assert status == 401
    r = daemon.get("/assets/nothing.js")
    assert r.status == 404 and r.code == 1101


def browser(daemon, *scenarios, shots=None, prefix=PREFIX):
    run_scenarios(daemon, *scenarios, admin=ADMIN, viewer=VIEWER, prefix=prefix, shots=shots)


def test_login_and_logout_on_a_revoked_token(daemon):
    browser(daemon, "login", "revoked")


def test_an_admin_runs_an_instance_through_its_life(daemon):
    browser(daemon, "instance_life")


def test_a_viewer_finds_no_way_to_change_anything(daemon):
    browser(daemon, "viewer")


def test_the_page_follows_changes_made_elsewhere(daemon):
    browser(daemon, "follows")


def test_errors_are_the_apis_and_nothing_is_lost(daemon):
    browser(daemon, "errors")


def test_volumes(daemon):
    browser(daemon, "volumes")


def test_the_logs_panel_shows_what_the_container_printed(daemon):
    browser(daemon, "logs")


def test_the_terminal_runs_a_typed_command_and_follows_the_window(daemon):
    """Issue 30, item 3: the instance page's terminal (xterm.js) opens a
    shell through a ticket and the WebSocket, shows the answer of a command
    typed into it, and its size follows the window; without a CSP
    violation or a script error."""
    browser(daemon, "terminal")


def test_the_console_fits_and_speaks_a_users_words(daemon):
    """Issue 27: no /api/v1/nodes request on a single server; the create
    form's Create and error in sight at 1400x900 and 1000x900, in the
    user's words; the roll-back table fits at 1000 px."""
    browser(daemon, "fits")


def test_no_serious_accessibility_violation_on_any_page(daemon):
    browser(daemon, "accessibility")


def test_every_page_of_a_busy_lab_renders_and_is_photographed(daemon, tmp_path):
    """A lab with instances, shares and volumes: each page shows it without
    a problem, photographed into $GPUBOX_SCREENSHOTS (`make screenshots`:
    docs/img) or a scratch directory."""
    shots = os.environ.get("GPUBOX_SCREENSHOTS")
    # the pictures for docs/ show names a lab would use; a test run's are
    # this run's own
    browser(daemon, "screenshots", shots=shots or str(tmp_path), prefix="lab" if shots else PREFIX)
    shots = shots or str(tmp_path)
    for page in ("login", "overview", "instances", "instance", "create", "volumes", "usage"):
        png = os.path.join(shots, f"console-{page}.png")
        assert os.path.getsize(png) > 10000, png
