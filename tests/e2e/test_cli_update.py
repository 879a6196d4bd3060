"""gpubox's CLI for what a new user tried and could not do (issue 27,
items 3, 6 and 10), end to end against a real gpuboxd and dockerd:

- `gpubox update NAME` changes an instance's environment, volumes and
  ports (and limits) in one new version; "nothing changed" when it
  already has them; a volume that cannot be deleted names the command
  that frees it, and that command works;
- a name with '-' is refused saying why, with the same name with '_';
- `gpubox usage --from DATE --to DATE` takes plain dates;
- `gpubox images rm REF` removes an image name, and refuses one an
  instance runs;
- a rollback to another image's version says that the files written
  under the other image are not brought back.
"""
import json
import urllib.parse

from conftest import docker_request
from rsutil import IMAGE, RUN_TAG, image, info_ok, module_daemon, remove_image
from test_cli import gpubox, ok, run_set, table

PREFIX = "e2upd" + RUN_TAG
PORT_START, PORT_END = 63100, 63149

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def tag_image(ref):
    """IMAGE under another name ref (repo:tag): the same image, a name of its own."""
    repo, tag = ref.rsplit(":", 1)
    q = urllib.parse.urlencode({"repo": repo, "tag": tag})
    r = docker_request("POST", f"/images/{urllib.parse.quote(IMAGE, safe='')}/tag?{q}")
    assert r.status == 201, r.body


def spec_of(d, name):
    return info_ok(d, name)["spec"]


def printenv(d, name, var):
    p = gpubox(d, "exec", name, "--", "sh", "-c", f'echo "${{{var}-}}"')
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p.stdout.strip()


# ---- gpubox update (item 3) ----

def test_update_changes_env_volumes_and_ports_in_one_version(d):
    name, v1, v2 = PREFIX + "_upd", PREFIX + "v1", PREFIX + "v2"
    try:
        ok(d, "volume", "create", v1, "64MB")
        ok(d, "volume", "create", v2, "64MB")
        run_set(d, name, "-e", "A=1", "-e", "B=2", "-v", f"{v1}:/data", "-p", "8888")
        ok(d, "exec", name, "--", "sh", "-c", "echo one > /data/f")

        p = ok(d, "update", name, "-e", "A=9", "--env-rm", "B", "-e", "C=3",
               "-v", f"{v2}:/data", "-v", f"{v1}:/old:ro", "-p", "9999", "--publish-rm", "8888")
        assert p.stdout == f"{name}: updated; now runs as {name}-2\n", p.stdout
        rs = info_ok(d, name)
        assert rs["version"] == 2 and rs["state"] == "running"
        env = rs["spec"]["env"]
        assert "A=9" in env and "C=3" in env and not any(e.startswith("B=") for e in env)
        binds = {b["dest"]: (b["src"], b.get("readOnly", False)) for b in rs["spec"]["binds"]}
        assert binds == {"/data": (v2, False), "/old": (v1, True)}, binds
        published = {p["containerPort"] for p in rs["ports"]}
        assert 9999 in published and 8888 not in published, rs["ports"]
        assert printenv(d, name, "A") == "9" and printenv(d, name, "B") == "", \
            ok(d, "exec", name, "--", "env").stdout
        shown = ok(d, "exec", name, "--", "sh", "-c",
                   "cat /old/f; test -e /data/f && echo there || echo absent").stdout
        assert shown == "one\nabsent\n", shown  # v1 now at /old, v2 (empty) at /data

        # the same again: no new version
        p = ok(d, "update", name, "-e", "A=9", "-p", "9999")
        assert p.stdout == f"{name}: nothing changed (it already has what was asked)\n"
        assert info_ok(d, name)["version"] == 2

        # what is not there is named, nothing is sent
        p = gpubox(d, "update", name, "--volume-rm", "/nowhere")
        assert p.returncode == 3 and "nothing bound at /nowhere" in p.stderr, p.stderr
        p = gpubox(d, "update", name, "--publish-rm", "7777")
        assert p.returncode == 3 and "7777/tcp" in p.stderr, p.stderr
        p = gpubox(d, "update", name)
        assert p.returncode == 2 and "--env-rm" in p.stderr, p.stderr
        assert info_ok(d, name)["version"] == 2

        # --json: the server's answer
        out = json.loads(ok(d, "--json", "update", name, "--volume-rm", "/old").stdout)
        assert out["version"] == 3 and out["changed"] is True
        assert [b["dest"] for b in spec_of(d, name)["binds"]] == ["/data"]

        # limits, as docker update sets them; 0 removes one
        ok(d, "update", name, "-m", "256MB", "--cpus", "1.5")
        s = spec_of(d, name)
        assert s["memory"] > 0 and s["cpus"] == 1.5, s
        ok(d, "update", name, "-m", "0", "--cpus", "0")
        s = spec_of(d, name)
        assert s["memory"] == 0 and s["cpus"] == 0, s
    finally:
        gpubox(d, "rm", name, "--purge")
        for v in (v1, v2):
            d.request("DELETE", f"/api/v1/volumes/{v}")


def test_volume_in_use_names_the_command_that_frees_it(d):
    name, vol = PREFIX + "_busy", PREFIX + "busy"
    try:
        ok(d, "volume", "create", vol, "64MB")
        run_set(d, name, "-v", f"{vol}:/work")
        p = gpubox(d, "volume", "rm", vol)
        assert p.returncode == 4, p.stderr
        advised = f"gpubox update {name} --volume-rm /work"
        assert advised in p.stderr and f"gpubox rm {name}" in p.stderr, p.stderr
        assert "/api/v1" not in p.stderr, p.stderr
        ok(d, *advised.split()[1:])
        assert ok(d, "volume", "rm", vol).stdout == f"volume {vol}: deleted with its data\n"
        assert info_ok(d, name)["state"] == "running"
    finally:
        gpubox(d, "rm", name, "--purge")
        d.request("DELETE", f"/api/v1/volumes/{vol}")


# ---- names with '-' (item 6) ----

def test_a_dash_in_a_name_is_refused_with_the_name_to_use(d):
    p = gpubox(d, "run", "my-job-" + RUN_TAG, "--image", IMAGE, "--", "sleep", "1")
    assert p.returncode != 0
    assert "cannot contain '-'" in p.stderr and f"use 'my_job_{RUN_TAG}' instead" in p.stderr, \
        p.stderr
    assert "version" in p.stderr  # why, in a user's words
    p = gpubox(d, "volume", "create", "my-data-" + RUN_TAG, "64MB")
    assert p.returncode != 0
    assert "cannot contain '-'" in p.stderr and f"use 'my_data_{RUN_TAG}' instead" in p.stderr, \
        p.stderr


# ---- small gaps (item 10) ----

def test_images_rm_completes_beside_images(d, tmp_path):
    """images is a command alone and a group (images rm): both complete."""
    from test_cli import complete
    script = tmp_path / "gpubox-completion.bash"
    script.write_text(ok(d, "completion", "bash").stdout)
    assert complete(d, script, "images", "") == {"rm"}
    assert complete(d, script, "images", "--") >= {"--name", "--quiet", "--json"}
    assert complete(d, script, "update", "x", "--vol") == {"--volume", "--volume-rm"}
    assert ok(d, "images", "--help").stdout.startswith("Usage: gpubox images [options]")
    assert ok(d, "images", "rm", "--help").stdout.startswith("Usage: gpubox images rm REF...")


def test_usage_takes_plain_dates(d):
    out = json.loads(ok(d, "--json", "usage", "--from", "2026-01-01", "--to", "2026-01-31").stdout)
    assert out["from"] == "2026-01-01T00:00:00Z" and out["to"] == "2026-02-01T00:00:00Z", out
    p = ok(d, "usage", "--from", "2026-01-01")
    assert "(from 2026-01-01T00:00:00Z to " in p.stdout, p.stdout
    p = gpubox(d, "usage", "--from", "2026-13-45")
    assert p.returncode != 0 and "a date (2026-11-24)" in p.stderr, p.stderr


def test_images_rm(d):
    spare = f"e2upd-spare{RUN_TAG}:v1"
    busy = f"e2upd-busy{RUN_TAG}:v1"
    name = PREFIX + "_img"
    try:
        tag_image(spare)
        tag_image(busy)
        p = ok(d, "images", "rm", spare)
        assert p.stdout.startswith(f"{spare}: removed (image sha256:"), p.stdout
        assert image(spare) is None and image(IMAGE) is not None
        p = gpubox(d, "images", "rm", spare)
        assert p.returncode != 0 and spare in p.stderr, p.stderr

        ok(d, "run", name, "--image", busy, "--", "sleep", "3600")
        p = gpubox(d, "images", "rm", busy)
        assert p.returncode == 4 and name in p.stderr, p.stderr
        assert image(busy) is not None
        ok(d, "rm", name, "--purge")
        assert json.loads(ok(d, "--json", "images", "rm", busy).stdout)["deleted"] is False
        assert image(busy) is None
        assert gpubox(d, "images", "rm").returncode == 2
        assert busy not in [r["IMAGE"] for r in table(ok(d, "images").stdout)]
    finally:
        gpubox(d, "rm", name, "--purge")
        remove_image(spare)
        remove_image(busy)


def test_rollback_to_another_image_says_files_are_not_brought_back(d):
    other = f"e2upd-other{RUN_TAG}:v1"
    name = PREFIX + "_rb"
    try:
        tag_image(other)
        run_set(d, name)
        ok(d, "scale", name, "--image", other)
        ok(d, "exec", name, "--", "sh", "-c", "echo x > /written-under-other")
        p = ok(d, "rollback", name, "1")
        assert "not brought back" in p.stdout and IMAGE in p.stdout, p.stdout
        assert "roll back to return" not in p.stdout, p.stdout
        out = json.loads(ok(d, "--json", "rollback", name, "2").stdout)
        assert out["systemDiskCarried"] is False
        assert "files written outside binds and volumes" in out["carry"]["note"], out["carry"]
    finally:
        gpubox(d, "rm", name, "--purge")
        remove_image(other)
