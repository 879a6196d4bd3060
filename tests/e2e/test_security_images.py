"""Images are owned (issue 25, items 2 and 9; docs/security.md, "Images").

Attacks against a real gpuboxd and dockerd, each failing on the code before
the fix:

- bob commits his container under a public-looking name that is not on the
  host, and alice's create from that name runs bob's file;
- alice commits an image with a secret in the instance's environment, and
  bob lists it, runs it with pull: never, or names it by its short id;
- an image pulled with alice's registry credentials is usable by bob;
- the older /containers/{name}/commit route does the same;
- an image name "../containers/<name>" walks the Engine API and tells
  whether a container exists.

And what must keep working: a user's own commits under u/<user>/, images an
admin pulled (with credentials or not) usable by everyone.
"""
import json
import os
import secrets
import shutil
import urllib.parse

import pytest

from conftest import docker_request
from rsutil import IMAGE, RUN_TAG, containers_with_prefix, remove_image, rs_path
from secutil import as_, write_tokens
from test_images import REGISTRY_BIN, PASSWORD, USER, Registry, push, tag_local, untag
from conftest import Daemon

PREFIX = "e2simg" + RUN_TAG
PORTS = "61560-61579"
ADMIN = "adm-" + secrets.token_hex(20)
ALICE = "alice-" + secrets.token_hex(20)
BOB = "bob-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
AUTH = {"username": USER, "password": PASSWORD}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secimages")
    tokens = write_tokens(tmp / "tokens", f"root:admin:{ADMIN}\nalice:user:{ALICE}\n"
                          f"bob:user:{BOB}\nvera:viewer:{VIEWER}\n")
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "2xA100-80GB", "--port-range", PORTS, "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    yield d
    try:
        wipe(d)
    finally:
        d.stop()


def wipe(d):
    for s in as_(d, ADMIN, "GET", "/api/v1/replicaSet?all=true").data["replicaSets"]:
        if s["name"].startswith(PREFIX):
            as_(d, ADMIN, "DELETE", rs_path(s["name"]) + "?purge=true")
    for c in containers_with_prefix(PREFIX):
        docker_request("DELETE", f"/containers/{c['Id']}?force=1&v=1")


@pytest.fixture
def d(daemon):
    made = []
    daemon.images_made = made
    yield daemon
    wipe(daemon)
    for ref in made:
        remove_image(ref)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """One registry behind htpasswd holding a private image."""
    if not os.access(REGISTRY_BIN, os.X_OK) or not shutil.which("htpasswd"):
        pytest.fail("these tests need docker-registry and htpasswd (apache2-utils): "
                    "run scripts/install-deps.sh test")
    reg = Registry(tmp_path_factory.mktemp("secreg") / "auth", True)
    ref = reg.ref("v1", "private")
    try:
        tag_local(IMAGE, ref.rsplit(":", 1)[0], "v1")
        push(ref, USER, PASSWORD, server=reg.host)
        untag(ref)
        yield reg
    finally:
        untag(ref)
        reg.stop()


def ok(r):
    assert r.status == 200 and r.code == 200, (r.status, r.body)
    return r.data


def body(name, image=IMAGE, **extra):
    b = {"imageName": image, "replicaSetName": name, "gpuCount": 0, "cmd": ["sleep", "3600"]}
    b.update(extra)
    return b


def make_set(d, token, image=IMAGE, **extra):
    name = f"{PREFIX}{secrets.token_hex(3)}"
    ok(as_(d, token, "POST", "/api/v1/replicaSet", body(name, image, **extra)))
    return name


def run_in(d, token, name, cmd):
    return ok(as_(d, token, "POST", rs_path(name, "/execute"), {"cmd": ["sh", "-c", cmd]}))


def tags_seen(d, token):
    return {t for i in ok(as_(d, token, "GET", "/api/v1/images"))["images"] for t in i["repoTags"]}


def inspect(ref):
    r = docker_request("GET", f"/images/{urllib.parse.quote(ref, safe='')}/json")
    return r.json if r.status == 200 else None


def assert_not_found(r):
    """What a missing image answers a create: 422, code 1110."""
    assert r.status == 422 and r.code == 1110, (r.status, r.body)


# ---- item 2: commits -------------------------------------------------------------------

def test_a_users_commit_cannot_take_a_public_name(d):
    bset = make_set(d, BOB)
    run_in(d, BOB, bset, "echo bob-was-here > /planted")
    public = f"nvidia/cuda:gpubox-{RUN_TAG}-{secrets.token_hex(2)}"
    d.images_made.append(public)
    assert inspect(public) is None
    r = as_(d, BOB, "POST", rs_path(bset, "/commit"), {"newImageName": public})
    assert r.status == 403 and r.code == 1109, (r.status, r.body)
    assert "u/bob/" in r.json["msg"], r.json
    assert inspect(public) is None
    # whatever happened, alice's create from that name does not run bob's file
    name = f"{PREFIX}{secrets.token_hex(3)}"
    r = as_(d, ALICE, "POST", "/api/v1/replicaSet", body(name, public, pull="never"))
    if r.status == 200:
        out = run_in(d, ALICE, name, "cat /planted || true")
        assert "bob-was-here" not in out["stdout"]
    assert_not_found(r)


def test_a_users_commit_is_theirs_alone_and_keeps_no_instance_env(d):
    aset = make_set(d, ALICE, env=[f"SECRET=s3cr3t-{RUN_TAG}", "MODE=train"])
    run_in(d, ALICE, aset, "echo weights > /model.bin")
    ref = f"u/alice/model:{RUN_TAG}{secrets.token_hex(2)}"
    d.images_made.append(ref)
    data = ok(as_(d, ALICE, "POST", rs_path(aset, "/commit"), {"newImageName": ref}))
    assert data["imageName"] == ref

    # alice uses it; bob neither lists it nor starts from it, by name or by id
    assert ref in tags_seen(d, ALICE)
    assert ref not in tags_seen(d, BOB)
    make_set(d, ALICE, ref, pull="never")
    name = f"{PREFIX}{secrets.token_hex(3)}"
    missing = as_(d, BOB, "POST", "/api/v1/replicaSet",
                  body(name, f"u/alice/model:nothere{RUN_TAG}", pull="never"))
    assert_not_found(missing)
    for image in (ref, data["imageId"].split(":")[1][:12], data["imageId"],
                  data["imageId"].split(":")[1]):
        r = as_(d, BOB, "POST", "/api/v1/replicaSet", body(name, image, pull="never"))
        if r.status == 200:
            out = run_in(d, BOB, name, "env; cat /model.bin || true")
            assert "s3cr3t" not in out["stdout"] and "weights" not in out["stdout"]
        assert_not_found(r)
        assert r.json["msg"].replace(image, "X") == missing.json["msg"].replace(
            f"u/alice/model:nothere{RUN_TAG}", "X"), (r.json, missing.json)
    # nor does a patch of his own set's imageName reach it
    bset = make_set(d, BOB)
    r = as_(d, BOB, "PATCH", rs_path(bset), {"imageName": ref})
    assert r.status == 422 and r.code == 1110, (r.status, r.body)
    # the instance's environment stayed out of the image; the image's own is kept
    assert data["keptEnv"] is False, data
    env = inspect(ref)["Config"]["Env"] or []
    assert not [e for e in env if "s3cr3t" in e or e.startswith("SECRET=")], env
    assert not [e for e in env if e.startswith("MODE=")], env
    base_env = inspect(IMAGE)["Config"]["Env"] or []
    assert all(e in env for e in base_env), (env, base_env)
    # and a set made from it starts without them
    own = make_set(d, ALICE, ref, pull="never")
    out = run_in(d, ALICE, own, "env")["stdout"]
    assert "SECRET" not in out and "MODE=" not in out, out
    # admins and viewers see it, with its owner
    for token in (ADMIN, VIEWER):
        items = ok(as_(d, token, "GET", "/api/v1/images"))["images"]
        mine = [i for i in items if ref in i["repoTags"]]
        assert mine and mine[0]["owners"] == ["alice"], mine


def test_keep_env_is_asked_for(d):
    aset = make_set(d, ALICE, env=["MODE=train"])
    ref = f"u/alice/keep:{RUN_TAG}{secrets.token_hex(2)}"
    d.images_made.append(ref)
    data = ok(as_(d, ALICE, "POST", rs_path(aset, "/commit"),
                  {"newImageName": ref, "keepEnv": True}))
    assert data["keptEnv"] is True
    assert "MODE=train" in inspect(ref)["Config"]["Env"]


def test_the_older_commit_route_follows_the_same_rules(d):
    bset = make_set(d, BOB, env=[f"SECRET=legacy-{RUN_TAG}"])
    public = f"{PREFIX}legacy:v1"
    d.images_made.append(public)
    r = as_(d, BOB, "POST", f"/api/v1/containers/{bset}/commit", {"newImageName": public})
    assert r.status == 403 and r.code == 1109, (r.status, r.body)
    assert inspect(public) is None
    own = f"u/bob/legacy:{RUN_TAG}"
    d.images_made.append(own)
    ok(as_(d, BOB, "POST", f"/api/v1/containers/{bset}/commit", {"newImageName": own}))
    assert not [e for e in inspect(own)["Config"]["Env"] or [] if "legacy-" in e]
    name = f"{PREFIX}{secrets.token_hex(3)}"
    assert_not_found(as_(d, ALICE, "POST", "/api/v1/containers",
                         {"imageName": own, "containerName": name, "gpuCount": 0,
                          "cmd": ["sleep", "60"]}))


def test_an_admins_commit_is_everyones(d):
    aset = make_set(d, ADMIN)
    public = f"{PREFIX}shared:v1"
    d.images_made.append(public)
    data = ok(as_(d, ADMIN, "POST", rs_path(aset, "/commit"), {"newImageName": public}))
    assert data["imageName"] == public
    assert public in tags_seen(d, BOB)
    make_set(d, BOB, public, pull="never")


# ---- item 2: pulls ---------------------------------------------------------------------

def test_an_image_pulled_with_a_users_credentials_is_theirs(d, registry):
    ref = registry.ref("v1", "private")
    untag(ref)
    ok(as_(d, ALICE, "POST", "/api/v1/images/pull", {"image": ref, "registryAuth": AUTH}))
    assert inspect(ref) is not None
    assert ref in tags_seen(d, ALICE)
    assert ref not in tags_seen(d, BOB)
    make_set(d, ALICE, ref, pull="never")
    name = f"{PREFIX}{secrets.token_hex(3)}"
    assert_not_found(as_(d, BOB, "POST", "/api/v1/replicaSet", body(name, ref, pull="never")))
    # without credentials, the registry refuses bob's own pull
    r = as_(d, BOB, "POST", "/api/v1/replicaSet", body(name, ref))
    assert r.status == 422 and r.code == 1110, (r.status, r.body)
    # and a failed pull with wrong ones gives him nothing either
    r = as_(d, BOB, "POST", "/api/v1/images/pull",
            {"image": ref, "registryAuth": {"username": USER, "password": "wrong"}})
    assert r.status == 403 and r.code == 1130, (r.status, r.body)
    assert_not_found(as_(d, BOB, "POST", "/api/v1/replicaSet", body(name, ref, pull="never")))
    assert ref not in tags_seen(d, BOB)
    # with them, he has shown he may have it
    make_set(d, BOB, ref, registryAuth=AUTH)
    assert ref in tags_seen(d, BOB)
    untag(ref)


def test_an_image_an_admin_pulled_is_everyones(d, registry):
    ref = registry.ref("v1", "private")
    untag(ref)
    ok(as_(d, ALICE, "POST", "/api/v1/images/pull", {"image": ref, "registryAuth": AUTH}))
    ok(as_(d, ADMIN, "POST", "/api/v1/images/pull", {"image": ref, "registryAuth": AUTH}))
    assert ref in tags_seen(d, BOB)
    make_set(d, BOB, ref, pull="never")
    untag(ref)


def test_images_under_u_are_never_pulled(d):
    for image in ("u/alice/model:v1", "docker.io/u/alice/model:v1",
                  "index.docker.io/u/alice/model:v1"):
        for token in (ADMIN, ALICE, BOB):
            r = as_(d, token, "POST", "/api/v1/images/pull", {"image": image})
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
            name = f"{PREFIX}{secrets.token_hex(3)}"
            r = as_(d, token, "POST", "/api/v1/replicaSet", body(name, image, pull="always"))
            assert r.status == 422 and r.code == 1110, (image, r.status, r.body)


# ---- item 9: image names that walk the Engine API --------------------------------------

def test_image_names_do_not_walk_the_engine_api(d):
    existing = make_set(d, ADMIN)
    container = f"{existing}-1"
    answers = []
    for target in (container, f"{PREFIX}nosuchcontainer"):
        for image in (f"../containers/{target}", f"..%2fcontainers/{target}",
                      f"ubuntu/../../containers/{target}"):
            name = f"{PREFIX}{secrets.token_hex(3)}"
            r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", body(name, image, pull="never"))
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
            answers.append(r.json["msg"].replace(target, "X"))
            r = as_(d, ADMIN, "PATCH", rs_path(existing), {"imageName": image})
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
            answers.append(r.json["msg"].replace(target, "X"))
            r = as_(d, ADMIN, "POST", "/api/v1/containers",
                    {"imageName": image, "containerName": name, "gpuCount": 0})
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
            r = as_(d, ADMIN, "POST", rs_path(existing, "/commit"), {"newImageName": image})
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
            r = as_(d, ADMIN, "POST", "/api/v1/images/pull", {"image": image})
            assert r.status == 400 and r.code == 1000, (image, r.status, r.body)
    half = len(answers) // 2
    assert answers[:half] == answers[half:]


def test_an_admin_may_name_an_image_by_its_id(d):
    image_id = inspect(IMAGE)["Id"]
    make_set(d, ADMIN, image_id, pull="never")
    make_set(d, ADMIN, image_id.split(":")[1], pull="never")


def test_a_digest_reference_is_taken(d):
    digest = (inspect(IMAGE).get("RepoDigests") or [None])[0]
    name = f"{PREFIX}{secrets.token_hex(3)}"
    bad = "gpubox-test@sha256:" + "0" * 64
    r = as_(d, ADMIN, "POST", "/api/v1/replicaSet", body(name, bad, pull="never"))
    assert_not_found(r)
    if digest:
        make_set(d, ADMIN, digest, pull="never")


# ---- items 2 and 10: a user's images when the user is removed --------------------------

def make_user(d, name):
    return ok(as_(d, ADMIN, "POST", "/api/v1/users", {"name": name, "role": "user"}))["token"]


def names_of(ref):
    """ref and the digests of its repository that name the same image here."""
    image = inspect(ref) or {}
    repo = ref.rsplit(":", 1)[0]
    return [ref] + [n for n in image.get("RepoDigests") or [] if n.startswith(repo + "@")]


def test_a_user_whose_commit_is_here_cannot_be_removed(d):
    """bob commits under u/bob/ and is removed: the next bob would start
    from the first one's image (his files). The removal is refused naming
    the image and how to remove it; once it is gone, the removal goes
    through and the next bob sees nothing of it."""
    bob = "bob" + secrets.token_hex(3)
    tb = make_user(d, bob)
    s = make_set(d, tb)
    run_in(d, tb, s, "echo first-bob > /mine")
    ref = f"u/{bob}/work:v1"
    d.images_made.append(ref)
    ok(as_(d, tb, "POST", rs_path(s, "/commit"), {"newImageName": ref}))
    ok(as_(d, tb, "DELETE", rs_path(s) + "?purge=true"))

    r = as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}")
    assert r.status == 409 and r.code == 1107, (r.status, r.body)
    assert ref in r.msg and "gpubox images rm" in r.msg, r.msg
    assert ref in tags_seen(d, tb)  # still the first bob's

    # the advice works: the image removed through gpubox
    ok(as_(d, ADMIN, "DELETE", "/api/v1/images?name=" + urllib.parse.quote(ref, safe="")))
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}"))
    nb = make_user(d, bob)
    assert ref not in tags_seen(d, nb)
    name = f"{PREFIX}{secrets.token_hex(3)}"
    assert_not_found(as_(d, nb, "POST", "/api/v1/replicaSet", body(name, ref, pull="never")))
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{bob}"))


def test_a_users_private_pull_is_not_the_next_users(d, registry):
    """pb pulls with his own credentials and is removed: the refusal names
    the image; once it is gone, his record of the pull goes with him. When
    alice pulls it with hers later, the next pb neither sees it nor reads
    the first one's pull operation."""
    ref = registry.ref("v1", "private")
    untag(ref)
    pb = "pb" + secrets.token_hex(3)
    tp = make_user(d, pb)
    pulled = ok(as_(d, tp, "POST", "/api/v1/images/pull", {"image": ref, "registryAuth": AUTH}))
    op = pulled["operationId"]
    assert ok(as_(d, tp, "GET", f"/api/v1/operations/{op}"))["target"] == ref
    r = as_(d, BOB, "GET", f"/api/v1/operations/{op}")  # not bob's pull
    assert r.status == 404 and r.code == 1100, (r.status, r.body)

    r = as_(d, ADMIN, "DELETE", f"/api/v1/users/{pb}")
    assert r.status == 409 and r.code == 1107, (r.status, r.body)
    assert ref in r.msg and "gpubox images rm" in r.msg, r.msg
    for n in names_of(ref):
        untag(n)
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{pb}"))

    ok(as_(d, ALICE, "POST", "/api/v1/images/pull", {"image": ref, "registryAuth": AUTH}))
    nb = make_user(d, pb)
    assert ref not in tags_seen(d, nb)
    assert ref in tags_seen(d, ALICE)
    name = f"{PREFIX}{secrets.token_hex(3)}"
    assert_not_found(as_(d, nb, "POST", "/api/v1/replicaSet", body(name, ref, pull="never")))
    r = as_(d, nb, "GET", f"/api/v1/operations/{op}")
    assert r.status == 404 and r.code == 1100, (r.status, r.body)
    assert ok(as_(d, ADMIN, "GET", f"/api/v1/operations/{op}"))["target"] == ref
    ok(as_(d, ADMIN, "DELETE", f"/api/v1/users/{pb}"))
    for n in names_of(ref):
        untag(n)


def test_a_pull_everyone_may_use_is_readable_by_every_user(d):
    """A pull without credentials of one's own is everyone's: any user
    reads its record (this one fails: the sandbox reaches no registry)."""
    r = ok(as_(d, ALICE, "POST", "/api/v1/images/pull",
               {"image": f"{PREFIX}nowhere:v1", "wait": False}))
    for token in (ALICE, BOB):
        assert ok(as_(d, token, "GET", f"/api/v1/operations/{r['operationId']}"))["kind"] == "pull"


# ---- removing an image name (issue 27, item 10) ----------------------------------------

def test_a_user_removes_only_their_own_image_names(d):
    aset = make_set(d, ALICE)
    ref = f"u/alice/rm:{RUN_TAG}{secrets.token_hex(2)}"
    d.images_made.append(ref)
    ok(as_(d, ALICE, "POST", rs_path(aset, "/commit"), {"newImageName": ref}))
    public = f"e2simg-public{RUN_TAG}:v1"
    tag_local(IMAGE, public.split(":")[0], "v1")
    d.images_made.append(public)
    q = lambda name: "/api/v1/images?name=" + urllib.parse.quote(name, safe="")  # noqa: E731

    # bob: alice's image is not there for him; an image that is everyone's is not his to remove
    r = as_(d, BOB, "DELETE", q(ref))
    assert_not_found(r)
    r = as_(d, BOB, "DELETE", q(public))
    assert r.status == 403 and r.code == 1109 and "only an admin" in r.json["msg"], r.body
    # a viewer cannot remove anything; an id is refused for everyone
    assert as_(d, VIEWER, "DELETE", q(public)).status == 403
    r = as_(d, ADMIN, "DELETE", q(inspect(public)["Id"]))
    assert r.status == 400 and r.code == 1000, r.body
    assert inspect(ref) and inspect(public)

    # alice removes her own; the admin removes the public name
    data = ok(as_(d, ALICE, "DELETE", q(ref)))
    assert data["imageName"] == ref and data["deleted"] is True, data
    assert inspect(ref) is None
    data = ok(as_(d, ADMIN, "DELETE", q(public)))
    assert data["deleted"] is False and inspect(public) is None and inspect(IMAGE), data
