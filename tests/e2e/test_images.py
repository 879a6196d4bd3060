"""Images from a registry (issue 18): POST /api/v1/images/pull with progress
in its operation record, GET /api/v1/images, `pull: missing|always|never` on
create, registry credentials per request or from --registry-auth-file, and
the CLI's pull, images and run --pull.

The module runs two real registries of its own (Debian's docker-registry):
one open, one behind htpasswd. The test image is pushed into both through
the sandbox's dockerd (127.0.0.0/8 registries are plain HTTP to Docker), and
the local tags are removed before each pull, so every pull really crosses
the registry. No password may show in gpuboxd's log, its store, or any
answer but the one that carries it in.
"""
import base64
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import UnixHTTPConnection, DOCKER_SOCKET, docker_request, run_gpuboxd
from rsutil import (IMAGE, RUN_TAG, call, create, create_ok, info_ok, module_daemon, operation,
                    wipe)

PREFIX = f"e2im{RUN_TAG}"
PORT_START, PORT_END = 64300, 64319
REGISTRY_BIN = "/usr/bin/docker-registry"
USER, PASSWORD = "puller", f"Pw-{RUN_TAG}-never-in-logs"
CLI = os.environ.get("GPUBOX_CLI", "gpubox")

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


# ---- registries ----------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def registry_auth_header(user=None, password=None, server=""):
    cfg = {"username": user or "", "password": password or "", "serveraddress": server}
    return base64.urlsafe_b64encode(json.dumps(cfg).encode()).decode()


def docker_call(method, path, body=None, headers=None, raw=None):
    """One Engine API call with extra headers; the body (a stream for push)
    read whole."""
    conn = UnixHTTPConnection(DOCKER_SOCKET)
    conn.timeout = 120
    try:
        hdrs = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        conn.close()


def tag_local(image, repo, tag):
    q = urllib.parse.urlencode({"repo": repo, "tag": tag})
    status, text = docker_call("POST", f"/images/{image}/tag?{q}")
    assert status == 201, text


def untag(ref):
    status, text = docker_call("DELETE", f"/images/{ref}")
    assert status in (200, 404), text


def image_id(ref):
    r = docker_request("GET", f"/images/{ref}/json")
    return r.json["Id"] if r.status == 200 else None


def push(ref, user=None, password=None, server=""):
    repo, tag = ref.rsplit(":", 1)
    status, text = docker_call(
        "POST", f"/images/{repo}/push?tag={tag}",
        headers={"X-Registry-Auth": registry_auth_header(user, password, server)})
    assert status == 200 and '"error"' not in text, text


def other_image(repo, tag, payload=b""):
    """A local image that is not the test image: a marker file and payload,
    imported (one layer no other image shares)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("marker.txt", f"{repo}:{tag}\n".encode()), ("payload.bin", payload)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    q = urllib.parse.urlencode({"fromSrc": "-", "repo": repo, "tag": tag})
    status, text = docker_call("POST", f"/images/create?{q}", raw=buf.getvalue(),
                               headers={"Content-Type": "application/x-tar"})
    assert status == 200 and '"error"' not in text, text
    return image_id(f"{repo}:{tag}")


class Registry:
    def __init__(self, root, with_auth):
        self.root = root
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        auth = ""
        if with_auth:
            line = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], check=True,
                                  capture_output=True, text=True).stdout.strip()
            (root / "htpasswd").write_text(line + "\n")
            auth = (f"auth:\n  htpasswd:\n    realm: gpubox-test\n"
                    f"    path: {root / 'htpasswd'}\n")
        (root / "config.yml").write_text(
            "version: 0.1\nlog:\n  level: warn\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
            f"http:\n  addr: {self.host}\n  secret: gpubox-test-{RUN_TAG}\n" + auth)
        self.log = open(root / "registry.log", "wb")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", str(root / "config.yml")],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("docker-registry did not start: "
                                         + (root / "registry.log").read_text())
                time.sleep(0.05)

    def ref(self, tag="v1", repo="gpubox-test"):
        return f"{self.host}/{repo}:{tag}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


PAYLOAD_IDS = {}  # registry host -> the payload image's id


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    if not os.access(REGISTRY_BIN, os.X_OK) or not shutil.which("htpasswd"):
        pytest.fail("the image tests need docker-registry and htpasswd (apache2-utils): "
                    "run scripts/install-deps.sh test")
    root = tmp_path_factory.mktemp("registries")
    open_reg = Registry(root / "open", False)
    auth_reg = Registry(root / "auth", True)
    pushed = []
    try:
        for reg, creds in ((open_reg, (None, None)), (auth_reg, (USER, PASSWORD))):
            for tag in ("v1", "moving"):
                ref = reg.ref(tag)
                tag_local(IMAGE, ref.rsplit(":", 1)[0], tag)
                push(ref, *creds, server=reg.host)
                untag(ref)
                pushed.append(ref)
            # An image whose layer nothing local shares, so its pull moves bytes.
            ref = reg.ref("v1", "payload")
            PAYLOAD_IDS[reg.host] = other_image(ref.rsplit(":", 1)[0], "v1", os.urandom(3 << 20))
            push(ref, *creds, server=reg.host)
            untag(ref)
            pushed.append(ref)
        yield open_reg, auth_reg
    finally:
        for ref in pushed:
            untag(ref)
        open_reg.stop()
        auth_reg.stop()


# Every pull's operation id, for the last test's look for the password.
OP_IDS = []


def pull(d, image, **fields):
    r = call(d, "POST", "/api/v1/images/pull", {"image": image, **fields})
    if r.status == 200:
        OP_IDS.append(r.data["operationId"])
    return r


def wait_op(d, op_id, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        r = operation(d, op_id)
        assert r.status == 200, r.body
        if r.data["state"] != "running" or time.monotonic() > deadline:
            return r.data
        time.sleep(0.05)


# ---- pulls ---------------------------------------------------------------------------

def test_pull_from_open_registry_records_progress(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref("v1", "payload")
    untag(ref)
    assert image_id(ref) is None
    r = pull(d, ref)
    assert r.status == 200 and r.code == 200, r.body
    op = r.data["operation"]
    assert r.data["operationId"] == op["id"]
    assert op["kind"] == "pull" and op["target"] == ref and op["state"] == "done"
    assert op["imageId"] == image_id(ref) == PAYLOAD_IDS[open_reg.host]
    assert op["steps"], op
    assert all(s["done"] for s in op["steps"]), op
    assert op["progress"]["layers"] == len(op["steps"]) == op["progress"]["layersDone"]
    assert op["progress"]["total"] >= 1 << 20, op["progress"]  # the payload, compressed
    assert op["progress"]["current"] == op["progress"]["total"]
    # The record stays readable under GET /operations/{id}.
    again = operation(d, op["id"])
    assert again.status == 200 and again.data["state"] == "done"
    assert again.data["target"] == ref
    # And the image is in the node's list.
    listed = call(d, "GET", "/api/v1/images?name=" + urllib.parse.quote(ref, safe=""))
    assert listed.status == 200, listed.body
    assert [i["repoTags"] for i in listed.data["images"]] == [[ref]]
    item = listed.data["images"][0]
    assert item["id"] == op["imageId"] and item["size"] >= 3 << 20
    assert item["created"].endswith("Z") and item["gpuboxCreated"] is False
    untag(ref)


def test_pull_answered_at_once_is_followed_to_its_end(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref("v1", "payload")
    untag(ref)
    r = pull(d, ref, wait=False)
    assert r.status == 200, r.body
    assert r.data["operation"]["state"] in ("running", "done")
    final = wait_op(d, r.data["operationId"])
    assert final["state"] == "done", final
    assert image_id(ref) == final["imageId"] == PAYLOAD_IDS[open_reg.host]
    assert final["steps"] and all(s["done"] for s in final["steps"])
    untag(ref)


def test_two_pulls_of_one_image_at_once_both_succeed(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref("v1", "payload")
    untag(ref)
    answers = [None, None]

    def run(i):
        answers[i] = pull(d, ref)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(a is not None and a.status == 200 for a in answers), answers
    assert {a.data["operation"]["imageId"] for a in answers} == {PAYLOAD_IDS[open_reg.host]}
    untag(ref)


def test_pull_missing_tag_fails_clearly(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref("nosuchtag")
    r = pull(d, ref)
    assert (r.status, r.code) == (502, 1131), r.body
    assert ref in r.msg
    assert image_id(ref) is None


def test_auth_registry_without_or_with_wrong_credentials_is_refused(d, registries):
    _, auth_reg = registries
    ref = auth_reg.ref()
    untag(ref)
    r = pull(d, ref)
    assert (r.status, r.code) == (403, 1130), r.body
    assert "registryAuth" in r.msg
    r = pull(d, ref, registryAuth={"username": USER, "password": PASSWORD + "-wrong"})
    assert (r.status, r.code) == (403, 1130), r.body
    assert image_id(ref) is None


def test_auth_registry_with_request_credentials(d, registries):
    _, auth_reg = registries
    ref = auth_reg.ref()
    untag(ref)
    r = pull(d, ref, registryAuth={"username": USER, "password": PASSWORD})
    assert r.status == 200, r.body
    assert r.data["operation"]["state"] == "done"
    assert image_id(ref) == r.data["operation"]["imageId"]
    assert PASSWORD not in json.dumps(operation(d, r.data["operationId"]).json)
    untag(ref)


@pytest.mark.parametrize("body, field", [
    ({}, "image"),
    ({"image": 5}, "image"),
    ({"image": ""}, "image"),
    ({"image": "Upper/Case:v1"}, "lowercase"),
    # a digest is Docker's grammar (issue 25, item 9); a malformed one is not
    ({"image": "x@sha256:" + "a" * 63}, "digest"),
    ({"image": "../containers/x"}, "not valid"),
    ({"image": "busybox", "colour": "red"}, "colour"),
    ({"image": "busybox", "wait": "yes"}, "wait"),
    ({"image": "busybox", "registryAuth": "user:pw"}, "registryAuth"),
    ({"image": "busybox", "registryAuth": {"username": "u"}}, "password"),
    ({"image": "busybox", "registryAuth": {"username": "u", "password": 1}}, "password"),
    ({"image": "busybox", "registryAuth": {"username": "u", "password": "p", "x": 1}}, "'x'"),
])
def test_pull_bad_input_is_refused(d, body, field):
    r = call(d, "POST", "/api/v1/images/pull", body)
    assert r.status == 400 and r.code in (1000, 1001), r.body
    assert field in r.msg, r.msg


def test_pull_malformed_json_and_bad_list_filter(d):
    r = call(d, "POST", "/api/v1/images/pull", raw=b'{"image": ')
    assert (r.status, r.code) == (400, 1000), r.body
    r = call(d, "GET", "/api/v1/images?name=")
    assert (r.status, r.code) == (400, 1000), r.body
    r = operation(d, "20990101T000000000-deadbeef")
    assert (r.status, r.code) == (404, 1100), r.body


def test_images_list_shows_the_test_image(d):
    r = call(d, "GET", "/api/v1/images")
    assert r.status == 200, r.body
    ids = {i["id"] for i in r.data["images"]}
    assert image_id(IMAGE) in ids
    repo = IMAGE.rsplit(":", 1)[0]
    only = call(d, "GET", "/api/v1/images?name=" + urllib.parse.quote(repo, safe=""))
    assert only.status == 200 and only.data["images"]
    assert all(any(t.rsplit(":", 1)[0] == repo for t in i["repoTags"])
               for i in only.data["images"])


# ---- create with a pull policy -------------------------------------------------------

def test_create_pulls_a_missing_image_by_default(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref()
    untag(ref)
    name = f"{PREFIX}_dflt"
    info = create_ok(d, name, imageName=ref, cmd=["sleep", "3600"])
    assert image_id(ref) == image_id(IMAGE)
    got = info_ok(d, name)
    assert got["spec"]["imageName"] == ref
    assert "pull" not in got["spec"] and "registryAuth" not in got["spec"]
    del info


def test_create_never_pull_keeps_the_old_answer(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref()
    untag(ref)
    name = f"{PREFIX}_never"
    r = create(d, name, imageName=ref, pull="never", cmd=["sleep", "3600"])
    assert (r.status, r.code) == (422, 1110), r.body
    assert image_id(ref) is None
    assert call(d, "GET", f"/api/v1/replicaSet/{name}").status == 404


def test_create_of_an_image_no_registry_has_answers_422_as_before(d, registries):
    open_reg, _ = registries
    for extra in ({}, {"pull": "missing"}):
        r = create(d, f"{PREFIX}_gone", imageName=open_reg.ref("v1", "nosuchrepo"),
                   cmd=["sleep", "3600"], **extra)
        assert (r.status, r.code) == (422, 1110), r.body
        assert "pulling it failed" in r.msg


def test_create_always_pull_takes_the_registry_image(d, registries):
    open_reg, _ = registries
    ref = open_reg.ref("moving")
    repo, tag = ref.rsplit(":", 1)
    local = other_image(repo, tag)
    try:
        assert local != image_id(IMAGE)
        # missing: the local image is there, so it is used as it is.
        create_ok(d, f"{PREFIX}_keep", imageName=ref, pull="missing", cmd=["sleep", "3600"])
        assert image_id(ref) == local
        # always: the registry's image replaces the tag.
        create_ok(d, f"{PREFIX}_always", imageName=ref, pull="always", cmd=["sleep", "3600"])
        assert image_id(ref) == image_id(IMAGE)
    finally:
        wipe(d, PREFIX)
        untag(ref)
        docker_call("DELETE", f"/images/{local}?force=1")


def test_create_with_registry_credentials(d, registries):
    _, auth_reg = registries
    ref = auth_reg.ref()
    untag(ref)
    r = create(d, f"{PREFIX}_noauth", imageName=ref, cmd=["sleep", "3600"])
    assert (r.status, r.code) == (422, 1110), r.body
    r = create(d, f"{PREFIX}_noauth", imageName=ref, pull="always", cmd=["sleep", "3600"])
    assert (r.status, r.code) == (403, 1130), r.body
    create_ok(d, f"{PREFIX}_auth", imageName=ref, cmd=["sleep", "3600"],
              registryAuth={"username": USER, "password": PASSWORD})
    assert image_id(ref) == image_id(IMAGE)
    hist = call(d, "GET", f"/api/v1/replicaSet/{PREFIX}_auth/history")
    assert PASSWORD not in hist.body.decode()
    untag(ref)


@pytest.mark.parametrize("fields, word", [
    ({"pull": "sometimes"}, "pull"),
    ({"pull": 1}, "pull"),
    ({"registryAuth": []}, "registryAuth"),
])
def test_create_bad_pull_fields_are_refused(d, fields, word):
    r = create(d, f"{PREFIX}_bad", imageName=IMAGE, **fields)
    assert (r.status, r.code) == (400, 1000), r.body
    assert word in r.msg
    assert call(d, "GET", f"/api/v1/replicaSet/{PREFIX}_bad").status == 404


# ---- the CLI -------------------------------------------------------------------------

def cli(d, *args, stdin=None):
    env = dict(os.environ, GPUBOX_HOST=d.url, GPUBOX_PROGRESS="1")
    return subprocess.run([CLI, *args], capture_output=True, text=True, input=stdin,
                          env=env, timeout=120)


def test_cli_pull_images_and_run_pull(d, registries):
    open_reg, auth_reg = registries
    ref = open_reg.ref()
    untag(ref)
    p = cli(d, "pull", ref)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [ref, image_id(IMAGE)]
    assert "pull " + ref in p.stderr  # progress lines
    p = cli(d, "images", "--name", ref)
    assert p.returncode == 0 and ref in p.stdout, p.stdout + p.stderr
    p = cli(d, "images", "-q")
    assert ref in p.stdout.split()

    aref = auth_reg.ref()
    untag(aref)
    p = cli(d, "pull", aref)
    assert p.returncode != 0 and "registry refused" in p.stderr, p.stderr
    p = cli(d, "pull", "--username", USER, "--password-stdin", aref, stdin=PASSWORD + "\n")
    assert p.returncode == 0, p.stderr
    assert PASSWORD not in p.stdout + p.stderr
    untag(aref)

    untag(ref)
    p = cli(d, "run", f"{PREFIX}_clinever", "--image", ref, "--pull", "never", "--", "sleep",
            "3600")
    assert p.returncode != 0 and "not on this server" in p.stderr, p.stderr
    assert f"`gpubox pull {ref}`" in p.stderr and "docker pull" not in p.stderr, p.stderr
    p = cli(d, "run", f"{PREFIX}_cli", "--image", ref, "--pull", "missing", "--", "sleep", "3600")
    assert p.returncode == 0, p.stderr
    assert info_ok(d, f"{PREFIX}_cli")["spec"]["imageName"] == ref
    p = cli(d, "run", f"{PREFIX}_clibad", "--image", ref, "--pull", "sometimes")
    assert p.returncode == 2, p.stderr


# ---- configured credentials, roles ---------------------------------------------------

def test_configured_credentials_and_roles(start_daemon, registries, tmp_path):
    _, auth_reg = registries
    creds = tmp_path / "registries"
    creds.write_text(f"# test registry\n{auth_reg.host} {USER} {PASSWORD}\n")
    creds.chmod(0o644)
    rc, _, err = run_gpuboxd(["--data-dir", str(tmp_path / "refused"), "--simulate-gpus",
                              "1xA100-80GB", "--registry-auth-file", str(creds)])
    assert rc != 0 and "--registry-auth-file" in err and "chmod 600" in err, err
    assert PASSWORD not in err
    creds.chmod(0o600)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"root:admin:admin-{RUN_TAG}-token\nwatch:viewer:viewer-{RUN_TAG}-token\n")
    tokens.chmod(0o600)
    dd = start_daemon("--simulate-gpus", "1xA100-80GB", "--port-range", "64320-64329",
                      "--registry-auth-file", str(creds), "--token-file", str(tokens))
    ref = auth_reg.ref()
    untag(ref)
    try:
        dd.token = f"viewer-{RUN_TAG}-token"
        assert call(dd, "GET", "/api/v1/images").status == 200
        r = pull(dd, ref)
        assert (r.status, r.code) == (403, 1109), r.body
        dd.token = f"admin-{RUN_TAG}-token"
        r = pull(dd, ref)
        assert r.status == 200, r.body
        assert r.data["operation"]["by"] == "root"
        assert image_id(ref) == image_id(IMAGE)
        log = dd.log()
        assert PASSWORD not in log
    finally:
        untag(ref)


# ---- last: no password anywhere ------------------------------------------------------

def test_no_password_in_log_store_or_records(daemon, registries):
    log = daemon.log()
    assert "pulled" in log  # the pulls above are logged ...
    assert PASSWORD not in log  # ... without their credentials
    for path in Path(daemon.data_dir).rglob("*"):
        if path.is_file() and path.stat().st_size < 64 * 1024 * 1024:
            assert PASSWORD.encode() not in path.read_bytes(), path
    for op_id in sorted(set(OP_IDS)):
        r = operation(daemon, op_id)
        assert PASSWORD not in r.body.decode(), op_id
