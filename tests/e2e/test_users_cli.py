"""gpubox's users, quota and accounting commands end to end (docs/users.md,
docs/cli.md): the built CLI (path from $GPUBOX_CLI, default
build/test/gpubox) against a real gpuboxd started with --token-file, whose
file holds one admin (alice) and one viewer (vera), with 4 simulated A100s
and ports 64400-64449, and the real dockerd.

Covered: whoami as the file's admin; user create printing a token (alone
on stdout, the "shown only this once" line on stderr) that works for
whoami; users listing everyone with used/quota cells; user set changing a
quota that whoami, as that user, then shows, and a quota refusal (1115)
printed as the server says it; token rotation (the old token 401, the new
one works) and revocation; user rm (refused while the user owns a set);
usage printing a row for a set that held a card for a few seconds, and its
owner's total; and the OWNER column, shown to an admin (and a viewer) when
two users own sets or volumes, never to a user in their own list, nor when
every item has one owner.

These tests are written against docs/users.md before the daemon serves
its routes: until it does they fail (a "not supported by this server"
from the CLI), and none of them is skipped.
"""
import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, SANITIZER_MARKERS, Daemon
from rsutil import IMAGE, RUN_TAG, list_sets, wipe

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = "e2uc" + RUN_TAG  # this run's sets and volumes only: runs may share a dockerd
PORT_RANGE = "64400-64449"
ADMIN = "adm-" + secrets.token_hex(20)
VIEWER = "view-" + secrets.token_hex(20)
TOKEN_RE = re.compile(r"gpbx_[0-9a-f]{48}")
QUOTA_EXCEEDED = 1115


# ---- the daemon ----

@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("userscli")
    tokens = tmp / "tokens"
    tokens.write_text(f"# gpubox tokens\nalice:admin:{ADMIN}\nvera:viewer:{VIEWER}\n")
    tokens.chmod(0o600)
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(tmp / "data"), "--simulate-gpus",
                "4xA100-80GB", "--port-range", PORT_RANGE, "--token-file", str(tokens)],
               tmp / "data", tmp / "gpuboxd.log").start()
    d.token = ADMIN  # the fixtures' own calls are the admin's
    yield d
    try:
        clean(d)
    finally:
        d.stop()


@pytest.fixture
def d(daemon):
    """The module's daemon; afterwards no set, no volume of this run and no
    user made through the API is left, whatever the test did."""
    yield daemon
    clean(daemon)


def clean(d):
    d.token = ADMIN
    try:
        wipe(d, PREFIX)
    finally:
        api(d, "PUT", "/api/v1/quotas/defaults", body={"cards": None, "shareMiB": None,
                                                        "instances": None, "volumeBytes": None})
        r = d.get("/api/v1/volumes")
        for v in (r.data or {}).get("volumes", []) if r.status == 200 else []:
            if v["name"].startswith(PREFIX):
                d.request("DELETE", f"/api/v1/volumes/{v['name']}")
        r = d.get("/api/v1/users")
        for u in (r.data or {}).get("users", []) if r.status == 200 else []:
            if u.get("source") == "api":
                d.request("DELETE", f"/api/v1/users/{u['name']}")


# ---- the CLI ----

def gpubox(d, *args, token=None, timeout=120):
    """Run the CLI against d with token as GPUBOX_TOKEN (None: no token);
    the result has .returncode, .stdout and .stderr. The sanitizer build
    must stay quiet."""
    e = dict(os.environ, GPUBOX_HOST=d.url)
    e.pop("GPUBOX_TOKEN", None)
    if token:
        e["GPUBOX_TOKEN"] = token
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=e, timeout=timeout)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(d, *args, token=ADMIN, **kw):
    p = gpubox(d, *args, token=token, **kw)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def as_json(d, *args, token=ADMIN):
    return json.loads(ok(d, "--json", *args, token=token).stdout)


def api(d, method, path, token=ADMIN, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    return d.request(method, path, body=data, headers=headers)


def table(text):
    """An aligned table as a list of {HEADER: cell} rows (as in test_cli.py)."""
    lines = text.rstrip("\n").split("\n")
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    names = header.split()
    rows = []
    for line in lines[1:]:
        cells = [line[s:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                 for k, s in enumerate(starts)]
        rows.append(dict(zip(names, cells)))
    return rows


def whoami(d, token):
    """What `gpubox whoami` prints, as ({Name, Role, Source}, {resource:
    (used, quota)})."""
    out = ok(d, "whoami", token=token).stdout
    head, rest = out.split("\n\n", 1)
    fields = dict(line.split(":", 1) for line in head.splitlines())
    fields = {k: v.strip() for k, v in fields.items()}
    lines = [line for line in rest.splitlines() if not line.startswith("(")]
    rows = table("\n".join(lines))
    assert [r["RESOURCE"] for r in rows] == ["cards", "share", "instances", "volumes"], out
    return fields, {r["RESOURCE"]: (r["USED"], r["QUOTA"]) for r in rows}


def create_user(d, name, *options, role="user"):
    """gpubox user create as the admin: the token it printed."""
    p = ok(d, "user", "create", name, "--role", role, *options)
    token = p.stdout.strip()
    assert p.stdout == token + "\n", p.stdout
    assert TOKEN_RE.fullmatch(token), token
    return token


def run_set(d, name, token, *extra):
    return ok(d, "run", name, "--image", IMAGE, *extra, "--", "sleep", "3600", token=token)


def hours(seconds, per=1.0):
    """The CLI's hours cell (cli_hours) for seconds of per units."""
    h = seconds / per / 3600.0
    return "<0.01" if 0 < h < 0.005 else f"{h:.2f}"


# ---- whoami and users ----

def test_whoami_as_the_file_admin(d):
    fields, quota = whoami(d, ADMIN)
    assert fields == {"Name": "alice", "Role": "admin", "Source": "file"}
    assert set(quota) == {"cards", "share", "instances", "volumes"}
    out = ok(d, "whoami").stdout
    assert out.endswith("(quotas do not limit the admin role; its use is counted all the same)\n")
    data = as_json(d, "whoami")
    assert data["name"] == "alice" and data["role"] == "admin" and data["source"] == "file"
    assert data == api(d, "GET", "/api/v1/whoami").data
    assert whoami(d, VIEWER)[0] == {"Name": "vera", "Role": "viewer", "Source": "file"}
    # no token, or a wrong one: the server's 401 message, exit 1
    for token in (None, "nobody-" + secrets.token_hex(20)):
        p = gpubox(d, "whoami", token=token)
        assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout)
        assert p.stderr.startswith("gpubox: ") and "token" in p.stderr, p.stderr


def test_user_create_prints_a_token_that_works(d):
    p = ok(d, "user", "create", "carol", "--role", "user")
    token = p.stdout.strip()
    assert p.stdout == token + "\n" and TOKEN_RE.fullmatch(token), p.stdout
    assert "carol" in p.stderr and "shown only this once" in p.stderr, p.stderr
    fields, quota = whoami(d, token)
    assert fields == {"Name": "carol", "Role": "user", "Source": "api"}
    assert all(used == "0" for used, _ in quota.values()), quota

    # the name is taken: by carol, and by the token file's alice
    for name in ("carol", "alice"):
        p = gpubox(d, "user", "create", name, "--role", "user", token=ADMIN)
        assert p.returncode == 4 and p.stdout == "", (name, p.returncode, p.stderr)
        assert p.stderr.startswith("gpubox: "), p.stderr
    # a bad role is refused before anything is sent: no user is made
    p = gpubox(d, "user", "create", "dan", "--role", "root", token=ADMIN)
    assert p.returncode == 2 and "--role must be admin, user or viewer" in p.stderr
    assert "dan" not in ok(d, "users", "-q").stdout.split()
    # only an admin creates users: a user and a viewer are refused (403)
    for who in (token, VIEWER):
        p = gpubox(d, "user", "create", "dan", "--role", "user", token=who)
        assert p.returncode == 1 and p.stdout == "" and p.stderr.startswith("gpubox: "), p.stderr
    # --json: the server's data, the token in it, still said once on stderr
    p = ok(d, "--json", "user", "create", "dora", "--role", "viewer")
    data = json.loads(p.stdout)
    assert TOKEN_RE.fullmatch(data.get("token") or data["user"]["token"]), data
    assert "shown only this once" in p.stderr
    assert whoami(d, data.get("token") or data["user"]["token"])[0]["Role"] == "viewer"


def test_users_lists_everyone(d):
    create_user(d, "carol", "--cards", "2", "--share", "16GB")
    create_user(d, "dave", role="viewer")
    out = ok(d, "users").stdout
    assert out.split("\n")[0].split() == ["NAME", "ROLE", "SOURCE", "CARDS", "SHARE", "INSTANCES",
                                          "VOLUMES", "CREATED"]
    rows = {r["NAME"]: r for r in table(out)}
    assert set(rows) == {"alice", "vera", "carol", "dave"}
    assert rows["alice"]["ROLE"] == "admin" and rows["alice"]["SOURCE"] == "file"
    assert rows["vera"]["ROLE"] == "viewer" and rows["vera"]["SOURCE"] == "file"
    assert rows["dave"]["ROLE"] == "viewer" and rows["dave"]["SOURCE"] == "api"
    # the defaults are unlimited until set; carol's options are put over them
    assert rows["carol"]["CARDS"] == "0/2" and rows["carol"]["SHARE"] == "0/16GB"
    assert rows["carol"]["INSTANCES"] == "0/-" and rows["carol"]["VOLUMES"] == "0/-"
    users = api(d, "GET", "/api/v1/users").data["users"]
    assert {u["name"]: u["createTime"] for u in users} == \
        {n: r["CREATED"] for n, r in rows.items()}
    assert set(ok(d, "users", "-q").stdout.split()) == set(rows)
    assert as_json(d, "users") == api(d, "GET", "/api/v1/users").data
    # a user may not list the users
    carol = ok(d, "user", "token", "carol").stdout.strip()
    p = gpubox(d, "users", token=carol)
    assert p.returncode == 1 and p.stdout == "" and p.stderr.startswith("gpubox: ")


# ---- quotas ----

def test_user_set_quota_then_whoami_shows_it(d):
    erin = create_user(d, "erin")
    p = ok(d, "user", "set", "erin", "--cards", "1", "--share-mib", "8192", "--instances", "2",
           "--volume-bytes", "10GB")
    assert p.stdout == "user erin: role user; quota cards 1, share 8GB, instances 2, volumes 10GB\n"
    assert whoami(d, erin)[1] == {"cards": ("0", "1"), "share": ("0", "8GB"),
                                  "instances": ("0", "2"), "volumes": ("0", "10GB")}
    quota = api(d, "GET", "/api/v1/users/erin").data
    quota = quota.get("user", quota)["quota"]
    assert quota["cards"] == 1 and quota["shareMiB"] == 8192 and quota["instances"] == 2
    assert quota["volumeBytes"] == 10 * 1024 ** 3

    # what erin holds shows beside her quota
    run_set(d, PREFIX + "_erin1", erin, "--gpus", "1")
    assert whoami(d, erin)[1]["cards"] == ("1", "1")
    assert whoami(d, erin)[1]["instances"] == ("1", "2")
    row = [r for r in table(ok(d, "users").stdout) if r["NAME"] == "erin"][0]
    assert row["CARDS"] == "1/1" and row["INSTANCES"] == "1/2"

    # one more card is past her quota: refused with the server's message, nothing made
    p = gpubox(d, "run", PREFIX + "_erin2", "--image", IMAGE, "--gpus", "1", "--", "sleep",
               "3600", token=erin)
    assert p.returncode == 1 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("gpubox: quota exceeded: user erin may hold 1 whole card"), p.stderr
    r = api(d, "POST", "/api/v1/replicaSet", token=erin,
            body={"imageName": IMAGE, "replicaSetName": PREFIX + "_erin2", "gpuCount": 1,
                  "cmd": ["sleep", "3600"]})
    assert r.status == 403 and r.code == QUOTA_EXCEEDED, r.json
    assert PREFIX + "_erin2" not in [s["name"] for s in list_sets(d, all_=True)]

    # none: unlimited again, and the card is hers to take
    p = ok(d, "user", "set", "erin", "--cards", "none")
    assert "quota cards -, share 8GB, instances 2, volumes 10GB\n" in p.stdout
    assert whoami(d, erin)[1]["cards"] == ("1", "-")
    run_set(d, PREFIX + "_erin2", erin, "--gpus", "1")
    # a role change keeps the quota
    assert ok(d, "user", "set", "erin", "--role", "viewer").stdout.startswith(
        "user erin: role viewer; quota cards -, share 8GB")
    # bad values: refused before anything is sent
    for args, words in ((("--cards", "-1"), "--cards must be a whole number"),
                        (("--share", "100KB"), "not a whole number of MiB"),
                        (("--volume-bytes", "12XB"), "size unit 'XB'"),
                        ((), "nothing to change")):
        p = gpubox(d, "user", "set", "erin", *args, token=ADMIN)
        assert p.returncode == 2 and words in p.stderr, (args, p.stderr)


def test_quota_defaults(d):
    out = ok(d, "quota", "defaults").stdout
    assert out == "RESOURCE   QUOTA\ncards      -\nshare      -\ninstances  -\nvolumes    -\n"
    out = ok(d, "quota", "defaults", "--cards", "2", "--share", "16GB").stdout
    assert out == "RESOURCE   QUOTA\ncards      2\nshare      16GB\ninstances  -\nvolumes    -\n"
    # a field given alone changes that field only
    ok(d, "quota", "defaults", "--instances", "3")
    data = as_json(d, "quota", "defaults")
    data = data.get("quota", data)
    assert data["cards"] == 2 and data["shareMiB"] == 16384 and data["instances"] == 3
    # new users get them, with their own options over them; older users keep theirs
    gus = create_user(d, "gus", "--cards", "1")
    assert whoami(d, gus)[1] == {"cards": ("0", "1"), "share": ("0", "16GB"),
                                 "instances": ("0", "3"), "volumes": ("0", "-")}
    ok(d, "quota", "defaults", "--cards", "none", "--share", "none", "--instances", "none")
    assert whoami(d, gus)[1]["share"] == ("0", "16GB")
    p = gpubox(d, "quota", "defaults", "--cards", "1", token=gus)
    assert p.returncode == 1 and p.stderr.startswith("gpubox: ")


def test_max_priority_is_set_from_the_cli(d):
    """--max-priority sets the quota's maxPriority (docs/queue.md): the
    highest queue priority the user may ask; none: any (100)."""
    def max_priority():
        data = api(d, "GET", "/api/v1/users/mona").data
        return data.get("user", data)["quota"].get("maxPriority")
    create_user(d, "mona", "--max-priority", "60")
    assert max_priority() == 60
    ok(d, "user", "set", "mona", "--max-priority", "70")
    assert max_priority() == 70
    ok(d, "user", "set", "mona", "--max-priority", "none")
    assert max_priority() is None
    for bad in ("101", "-1", "high"):
        p = gpubox(d, "user", "set", "mona", "--max-priority", bad, token=ADMIN)
        assert p.returncode == 2 and "--max-priority must be a whole number from 0 to 100" in \
            p.stderr, (bad, p.stderr)


# ---- tokens ----

def test_token_rotate_then_revoke(d):
    old = create_user(d, "frank")
    assert whoami(d, old)[0]["Name"] == "frank"
    p = ok(d, "user", "token", "frank")
    new = p.stdout.strip()
    assert p.stdout == new + "\n" and TOKEN_RE.fullmatch(new) and new != old
    assert "shown only this once" in p.stderr and "old one no longer works" in p.stderr
    p = gpubox(d, "whoami", token=old)
    assert p.returncode == 1 and p.stdout == "" and "token" in p.stderr, p.stderr
    r = api(d, "GET", "/api/v1/whoami", token=old)
    assert r.status == 401, r.json
    assert whoami(d, new)[0]["Name"] == "frank"

    p = ok(d, "user", "revoke", "frank")
    assert p.stdout == "user frank: token revoked; `gpubox user token frank` gives a new one\n"
    p = gpubox(d, "whoami", token=new)
    assert p.returncode == 1 and p.stdout == ""
    assert api(d, "GET", "/api/v1/whoami", token=new).status == 401
    assert "frank" in ok(d, "users", "-q").stdout.split()  # the user stays
    again = ok(d, "user", "token", "frank").stdout.strip()  # and may be let in again
    assert whoami(d, again)[0]["Name"] == "frank"
    for args in (("user", "token", "nosuch"), ("user", "revoke", "nosuch")):
        p = gpubox(d, *args, token=ADMIN)
        assert p.returncode != 0 and p.stdout == "", (args, p.returncode, p.stdout)
        assert p.stderr.startswith("gpubox: "), (args, p.stderr)


def test_user_rm(d):
    gina = create_user(d, "gina")
    assert ok(d, "user", "rm", "gina").stdout == "user gina: deleted\n"
    assert "gina" not in ok(d, "users", "-q").stdout.split()
    assert gpubox(d, "whoami", token=gina).returncode == 1
    p = gpubox(d, "user", "rm", "gina", token=ADMIN)  # no such user now
    assert p.returncode != 0 and p.stderr.startswith("gpubox: "), p.stderr

    # refused while the user owns a set; fine once it is gone
    hank = create_user(d, "hank")
    name = PREFIX + "_hank"
    run_set(d, name, hank)
    p = gpubox(d, "user", "rm", "hank", token=ADMIN)
    assert p.returncode == 4 and p.stdout == "" and p.stderr.startswith("gpubox: "), p.stderr
    assert "hank" in ok(d, "users", "-q").stdout.split()
    ok(d, "rm", name, "--purge", token=hank)
    assert ok(d, "user", "rm", "hank").stdout == "user hank: deleted\n"


# ---- accounting ----

def test_usage_prints_a_row_for_a_set_that_ran(d):
    ivan = create_user(d, "ivan")
    name = PREFIX + "_ivan"
    run_set(d, name, ivan, "--gpus", "1")
    time.sleep(3)
    ok(d, "stop", name, token=ivan)  # the interval is closed and written

    data = as_json(d, "usage", "--user", "ivan")
    users = [u for u in data["users"] if u["user"] == "ivan"]
    assert len(users) == 1, data
    sets = [s for s in users[0]["sets"] if s["name"] == name]
    assert len(sets) == 1, data
    seconds = sets[0]["cardSeconds"]
    assert 2 <= seconds <= 120, sets  # one card for about 3 s
    assert users[0]["cardSeconds"] == pytest.approx(seconds)

    out = ok(d, "usage", "--user", "ivan").stdout
    assert out.endswith(")\n") and "\n(from " in out
    rows = table(out[:out.rindex("\n(from ")] + "\n")
    assert out.split("\n")[0].split() == ["USER", "SET", "CARD-HOURS", "SHARE-GIB-HOURS"]
    assert {"USER": "ivan", "SET": name, "CARD-HOURS": hours(seconds),
            "SHARE-GIB-HOURS": "0.00"} in rows, rows
    assert {"USER": "ivan", "SET": "(total)", "CARD-HOURS": hours(users[0]["cardSeconds"]),
            "SHARE-GIB-HOURS": "0.00"} in rows, rows

    # ivan sees himself, the same; --set narrows to one set
    assert ok(d, "usage", token=ivan).stdout.split("\n(from ")[0] == \
        out.split("\n(from ")[0]
    mine = as_json(d, "usage", token=ivan)
    assert {u["user"] for u in mine["users"]} <= {"ivan"}
    assert all(s["name"] == name for u in as_json(d, "usage", "--set", name)["users"]
               for s in u["sets"])
    # a window before the set existed holds nothing of it
    early = as_json(d, "usage", "--user", "ivan", "--to", "1000000000")
    assert all(s["cardSeconds"] == 0 for u in early["users"] for s in u["sets"]), early
    # the admin sees everyone: ivan among them
    assert "ivan" in {r["USER"] for r in table(ok(d, "usage").stdout.split("\n(from ")[0] + "\n")}


# ---- ownership ----

def test_owner_column_for_an_admin_when_two_users_own_sets(d):
    # one owner only (the admin's own sets): ps prints the table it always did
    run_set(d, PREFIX + "_mine", ADMIN)
    assert "OWNER" not in ok(d, "ps").stdout.split("\n")[0].split()

    jack, kate = create_user(d, "jack"), create_user(d, "kate")
    run_set(d, PREFIX + "_jack", jack)
    run_set(d, PREFIX + "_kate", kate)
    sets = as_json(d, "ps")["replicaSets"]
    assert {s["name"]: s["owner"] for s in sets if s["name"].startswith(PREFIX)} == \
        {PREFIX + "_mine": "alice", PREFIX + "_jack": "jack", PREFIX + "_kate": "kate"}
    for token in (ADMIN, VIEWER):  # admins and viewers see everyone's, with owners
        out = ok(d, "ps", token=token).stdout
        assert out.split("\n")[0].split()[:2] == ["NAME", "OWNER"], out
        owners = {r["NAME"]: r["OWNER"] for r in table(out)}
        assert owners[PREFIX + "_jack"] == "jack" and owners[PREFIX + "_kate"] == "kate"
        assert owners[PREFIX + "_mine"] == "alice"
    # a user sees only their own: one owner, no column
    out = ok(d, "ps", token=jack).stdout
    assert "OWNER" not in out.split("\n")[0].split()
    assert [r["NAME"] for r in table(out)] == [PREFIX + "_jack"]
    assert ok(d, "ps", "-q", token=kate).stdout == PREFIX + "_kate\n"

    # volumes: the same rule
    vj, vk = PREFIX + "volj", PREFIX + "volk"
    ok(d, "volume", "create", vj, "64MB", token=jack)
    assert "OWNER" not in ok(d, "volume", "ls", token=jack).stdout.split("\n")[0].split()
    ok(d, "volume", "create", vk, "64MB", token=kate)
    out = ok(d, "volume", "ls").stdout
    assert out.split("\n")[0].split()[:2] == ["NAME", "OWNER"], out
    owners = {r["NAME"]: r["OWNER"] for r in table(out)}
    assert owners[vj] == "jack" and owners[vk] == "kate"
    out = ok(d, "volume", "ls", token=kate).stdout
    assert "OWNER" not in out.split("\n")[0].split()
    assert [r["NAME"] for r in table(out)] == [vk]
