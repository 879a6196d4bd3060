"""gpubox, the command-line client, end to end: the built program (path
from $GPUBOX_CLI, default build/test/gpubox) driven as an operator drives
it, against a real gpuboxd (8 simulated A100s, ports 63000-63049) and the
real dockerd.

Covered: every subcommand whose route the daemon has, its table for
people and its --json (the server's data), the exit codes (0 success,
2 usage, 3 not found, 4 conflict, 5 shortage, 1 server or other error),
errors showing the server's msg, exec passing the command's exit code and
keeping stdout and stderr apart, help and the man page, and the bash
completion. A subcommand whose route this daemon lacks (its OpenAPI
document does not list it) must say "not supported by this server" and
exit 1; once the route exists the same test checks that it works. A long
operation shows its steps on stderr while it runs: plain lines into a
pipe, one line rewritten in place on a terminal, never anything on stdout.

The fleet subcommands and options against this single gpuboxd (not in a
fleet): `gpubox nodes` and `gpubox node cordon|uncordon` fail with the
server's message, a malformed --node-selector is refused before any
request, and the tables carry no NODE column. Their output in a real fleet
is checked by the fleet's own tests.
"""
import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

from conftest import BUILD_DIR, SANITIZER_MARKERS
from rsutil import (IMAGE, RUN_TAG, container, image, info_ok, list_sets, module_daemon,
                    remove_image, still, used_ports, wipe)

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = "e2cli" + RUN_TAG
PORT_START, PORT_END = 63000, 63049


daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def gpubox(d, *args, env=None, timeout=120):
    """Run the CLI against d (GPUBOX_HOST); the result has .returncode,
    .stdout and .stderr. The sanitizer build must stay quiet."""
    e = dict(os.environ)
    e.pop("GPUBOX_TOKEN", None)
    if d is not None:
        e["GPUBOX_HOST"] = d.url
    e.update(env or {})
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=e, timeout=timeout)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(d, *args, **kw):
    p = gpubox(d, *args, **kw)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def as_json(d, *args):
    return json.loads(ok(d, "--json", *args).stdout)


def table(text):
    """An aligned table as a list of {HEADER: cell} rows."""
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


def supports(d, method, path):
    return method in d.get("/openapi.json").json["paths"].get(path, {})


def run_set(d, name, *extra):
    return ok(d, "run", name, "--image", IMAGE, *extra, "--", "sleep", "3600")


# ---- usage, help, completion ----

def test_usage_errors_exit_2(d):
    p = gpubox(d)
    assert p.returncode == 2 and "Usage: gpubox" in p.stderr
    for args, words in ((["frobnicate"], "unknown command 'frobnicate'"),
                        (["run", "x"], "--image is required"),
                        (["run", "x", "--image", IMAGE, "--gpus", "two"], "whole number"),
                        (["run", "x", "--image", IMAGE, "-v", "nocolon"], "SRC:DEST"),
                        (["stop"], "missing"),
                        (["exec", "x", "ls"], "after \"--\""),
                        (["ps", "--bogus"], "unknown option --bogus"),
                        (["rollback", "x", "latest"], "whole number"),
                        (["volume"], "needs a subcommand"),
                        (["node"], "needs a subcommand"),
                        (["node", "cordon"], "missing"),
                        (["run", "x", "--image", IMAGE, "--node-selector", "zone"],
                         "--node-selector 'zone': give K=V"),
                        (["run", "x", "--image", IMAGE, "--placement", "fullest"],
                         "binpack or spread"),
                        (["completion", "zsh"], "only bash")):
        p = gpubox(d, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert words in p.stderr, (args, p.stderr)
        assert p.stdout == "", args


def test_help_comes_from_the_table(d):
    p = ok(d, "help")
    for cmd in ("gpus", "ports", "ps", "run NAME", "inspect", "history", "scale", "stop", "start",
                "pause", "restart", "rollback NAME VERSION", "exec", "commit NAME IMAGE", "rm",
                "volume create NAME SIZE", "volume ls", "volume inspect", "volume resize",
                "volume rm", "nodes", "node cordon NAME", "node uncordon NAME", "version",
                "completion"):
        assert f"  {cmd}" in p.stdout, cmd
    assert "5  shortage" in p.stdout
    assert ok(d, "--help").stdout == p.stdout
    run = ok(d, "run", "--help").stdout
    assert run.startswith("Usage: gpubox run NAME [options] [-- CMD...]")
    for opt in ("--image IMAGE", "--gpus N", "--gpu-memory SIZE", "--shared",
                "-v, --volume SRC:DEST[:ro]", "-p, --publish", "-e, --env K=V", "--cpus N",
                "--memory SIZE", "--shm-size SIZE", "--restart POLICY", "--node NAME",
                "--node-selector K=V[,K=V...]", "--placement POLICY", "--json", "--host URL"):
        assert opt in run, opt
    assert ok(d, "help", "run").stdout == run
    assert "Usage: gpubox volume resize NAME SIZE" in ok(d, "volume", "resize", "--help").stdout
    assert "--node NAME" in ok(d, "volume", "create", "--help").stdout
    assert ok(d, "node", "cordon", "--help").stdout.startswith("Usage: gpubox node cordon NAME\n")
    assert "-q, --quiet" in ok(d, "nodes", "--help").stdout
    man = ok(d, "help", "--man").stdout
    assert man.startswith(".TH GPUBOX 1")
    assert ".SS gpubox volume resize NAME SIZE" in man
    assert "\\-\\-gpu\\-memory" in man
    for section in (".SS gpubox nodes [options]", ".SS gpubox node cordon NAME",
                    ".SS gpubox node uncordon NAME", ".B \\-\\-node\\-selector K=V[,K=V...]",
                    ".B \\-\\-placement POLICY"):
        assert section in man, section


def complete(d, script, *words):
    """What the completion function offers for the words (the last one is
    the word being completed)."""
    line = " ".join(["gpubox", *words])
    prog = (f"source {script}\n"
            f"COMP_WORDS=(gpubox {' '.join(repr(w) if w else repr('') for w in words)})\n"
            f"COMP_CWORD={len(words)}\nCOMP_LINE={line!r}\n_gpubox\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    env = dict(os.environ, GPUBOX_HOST=d.url, PATH=f"{CLI.parent}:{os.environ['PATH']}")
    p = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.split())


def test_bash_completion(d, tmp_path):
    script = tmp_path / "gpubox-completion.bash"
    script.write_text(ok(d, "completion", "bash").stdout)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert complete(d, script, "vo") == {"volume"}
    assert complete(d, script, "ve") == {"version"}
    assert complete(d, script, "volume", "") == {"create", "ls", "inspect", "resize", "rm"}
    assert complete(d, script, "no") == {"node", "nodes"}
    assert complete(d, script, "node", "") == {"cordon", "uncordon", "drain"}
    assert complete(d, script, "node", "cordon", "") == set()  # not in a fleet: no names
    assert complete(d, script, "run", "x", "--node") >= {"--node", "--node-selector"}
    assert complete(d, script, "run", "x", "--node-selector", "") == set()  # a value
    assert complete(d, script, "volume", "create", "v", "1GB", "--n") == {"--node"}
    assert "--image" in complete(d, script, "run", "x", "--im")
    assert complete(d, script, "ps", "--") >= {"--all", "--quiet", "--json", "--host"}
    name = PREFIX + "_comp"
    run_set(d, name)
    assert name in complete(d, script, "stop", "")
    assert complete(d, script, "stop", name, "") == set()  # one NAME only
    assert complete(d, script, "run", "x", "--image", "") == set()  # a value, not a name
    checked_in = Path(__file__).resolve().parents[2] / "scripts" / "gpubox-completion.bash"
    assert checked_in.read_text() == script.read_text(), \
        "scripts/gpubox-completion.bash is stale: regenerate it with `gpubox completion bash`"


def test_unreachable_server_exits_1(d):
    p = gpubox(None, "ps", env={"GPUBOX_HOST": "http://127.0.0.1:9"})
    assert p.returncode == 1
    assert "cannot reach gpuboxd at http://127.0.0.1:9" in p.stderr
    p = gpubox(None, "--host", "127.0.0.1:9/", "gpus")
    assert "cannot reach gpuboxd at http://127.0.0.1:9:" in p.stderr


# ---- resources ----

def test_gpus_and_ports(d):
    data = as_json(d, "gpus")
    assert still(data) == still(d.get("/api/v1/resources/gpus").data)
    out = ok(d, "gpus").stdout
    assert out.endswith("\n(simulated GPUs: gpuboxd runs with --simulate-gpus)\n")
    rows = table(out.split("\n(simulated GPUs")[0])
    assert [r["INDEX"] for r in rows] == [str(i) for i in range(8)]
    assert [r["UUID"] for r in rows] == [g["uuid"] for g in data["devices"]]
    assert all(r["MEMORY"] == "80GB" and r["MODE"] == "free" and r["TENANTS"] == "-"
               for r in rows)
    assert as_json(d, "ports") == d.get("/api/v1/resources/ports").data
    out = ok(d, "ports").stdout
    assert f"RANGE        {PORT_START}-{PORT_END}" in out
    assert "USED         0" in out


def test_version(d):
    out = ok(d, "version").stdout
    server = d.get("/version").data
    assert f"server   gpuboxd {server['version']} (API v1) at {d.url}" in out
    assert f"docker   {server['docker']['version']}" in out
    both = as_json(d, "version")
    assert both["server"] == {**server, "docker": both["server"]["docker"]}
    assert both["client"] == server["version"]


# ---- replica sets ----

def test_run_ps_inspect_history(d):
    name = PREFIX + "_run"
    p = ok(d, "run", name, "--image", IMAGE, "--gpus", "2", "-p", "22", "-p",
           f"{PORT_START + 40}:80/udp", "-e", "A=1", "-e", "HOME", "--label", "team=ml",
           "--memory", "64MB", "--cpus", "0.5", "--restart", "no", "--", "sleep", "3600",
           env={"HOME": "/from/client"})
    rs = info_ok(d, name)
    assert p.stdout.startswith(f"{name}: running as {name}-1\n")
    for uuid in rs["gpus"]:
        assert uuid in p.stdout
    assert f"{PORT_START + 40}->80/udp" in p.stdout
    spec = rs["spec"]
    assert spec["cmd"] == ["sleep", "3600"]
    assert spec["env"] == ["A=1", "HOME=/from/client"]
    assert spec["labels"] == {"team": "ml"}
    assert spec["memory"] == 64 * 1024 * 1024 and spec["cpus"] == 0.5
    assert spec["containerPorts"] == ["22/tcp"]
    assert spec["ports"] == [{"hostPort": PORT_START + 40, "containerPort": 80, "protocol": "udp"}]
    assert container(f"{name}-1")["State"]["Running"]

    rows = [r for r in table(ok(d, "ps").stdout) if r["NAME"] == name]
    assert len(rows) == 1
    assert rows[0]["VERSION"] == "1" and rows[0]["STATE"] == "running"
    assert rows[0]["IMAGE"] == IMAGE and rows[0]["GPUS"] == "2"
    assert name in ok(d, "ps", "-q").stdout.split()
    assert still(as_json(d, "ps")) == still(d.get("/api/v1/replicaSet").data)

    out = ok(d, "inspect", name).stdout
    assert f"Name:       {name}\n" in out and "State:      running\n" in out
    assert f"Image:      {IMAGE}\n" in out and "Cmd:        sleep 3600\n" in out
    assert still(as_json(d, "inspect", name)) == still(d.get(f"/api/v1/replicaSet/{name}").data)
    hist = table(ok(d, "history", name).stdout)
    assert hist == [{"VERSION": "1", "CREATED": rs["createTime"], "CONTAINER": f"{name}-1",
                     "IMAGE": IMAGE, "GPUS": "2"}]
    assert as_json(d, "history", name) == d.get(f"/api/v1/replicaSet/{name}/history").data


def test_run_with_gpu_shares(d):
    mem, shared, pinned = PREFIX + "_mem", PREFIX + "_ts", PREFIX + "_pin"
    ok(d, "run", mem, "--image", IMAGE, "--gpus", "2", "--gpu-memory", "8GB", "--gpu-policy",
       "spread", "--gpu-model", "a100", "--", "sleep", "3600")
    rs = as_json(d, "inspect", mem)["info"]
    assert rs["spec"]["gpuMemory"] == 8192 and rs["spec"]["gpuPolicy"] == "spread"
    assert rs["spec"]["gpuModel"] == "a100"
    assert [s["memoryMiB"] for s in rs["gpuShares"]] == [8192, 8192]
    assert "GPU limits: memory, " in ok(d, "inspect", mem).stdout
    rows = {r["UUID"]: r for r in table(ok(d, "gpus").stdout.split("\n(simulated GPUs")[0])}
    for uuid in rs["gpus"]:
        assert rows[uuid]["MODE"] == "memory" and rows[uuid]["ALLOCATED"] == "8GB"
        assert rows[uuid]["TENANTS"] == mem
    ok(d, "run", shared, "--image", IMAGE, "--shared", "--", "sleep", "3600")
    assert as_json(d, "inspect", shared)["info"]["gpuShares"][0]["mode"] == "timeslice"
    free = [u for u, v in d.get("/api/v1/resources/gpus").data["gpus"].items() if v == 0]
    ok(d, "run", pinned, "--image", IMAGE, "--gpu-uuid", free[-1], "--", "sleep", "3600")
    assert info_ok(d, pinned)["gpus"] == [free[-1]]
    p = gpubox(d, "run", PREFIX + "_both", "--image", IMAGE, "--gpu-memory", "8GB", "--shared")
    assert p.returncode == 2, p.stderr
    p = gpubox(d, "run", PREFIX + "_huge", "--image", IMAGE, "--gpu-memory", "81920MB", "--gpus",
               "8")
    assert p.returncode == 5 and "GPU not enough" in p.stderr


def test_exit_codes_and_server_messages(d):
    name = PREFIX + "_codes"
    p = gpubox(d, "inspect", PREFIX + "_nosuch")
    assert p.returncode == 3
    assert p.stderr == f"gpubox: no replica set named '{PREFIX}_nosuch'\n"
    run_set(d, name, "--gpus", "1")
    p = gpubox(d, "run", name, "--image", IMAGE)
    assert p.returncode == 4 and "already exists" in p.stderr
    p = gpubox(d, "run", PREFIX + "_big", "--image", IMAGE, "--gpus", "8")
    assert p.returncode == 5
    assert p.stderr.startswith("gpubox: GPU not enough: asked 8; the server has 8 cards, 7 free")
    p = gpubox(d, "run", PREFIX + "_port", "--image", IMAGE, "-p", f"{PORT_START + 41}:22", "-p",
               f"{PORT_START + 41}:23")
    assert p.returncode in (2, 5), p.stderr  # the same host port twice: refused by the server
    p = gpubox(d, "run", "bad-name", "--image", IMAGE)
    assert p.returncode == 2 and "'-'" in p.stderr
    p = gpubox(d, "run", PREFIX + "_img", "--image", "e2cli-no-such-image:v9")
    assert p.returncode == 3 and "e2cli-no-such-image:v9" in p.stderr
    ok(d, "stop", name)
    p = gpubox(d, "pause", name)
    assert p.returncode == 4 and "stopped" in p.stderr
    p = gpubox(d, "exec", name, "--", "true")
    assert p.returncode == 4
    assert gpubox(d, "--json", "inspect", PREFIX + "_nosuch").stdout == ""


def test_exec_passes_exit_code_and_streams(d):
    name = PREFIX + "_exec"
    run_set(d, name)
    p = gpubox(d, "exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (p.returncode, p.stdout, p.stderr) == (7, "out\n", "err\n")
    p = ok(d, "exec", name, "--workdir", "/tmp", "--", "pwd")
    assert p.stdout == "/tmp\n" and p.stderr == ""
    p = gpubox(d, "exec", name, "--timeout", "1", "--", "sleep", "30")
    assert p.returncode == 124 and "timeout" in p.stderr
    p = gpubox(d, "--json", "exec", name, "--", "sh", "-c", "printf 'a b'; exit 2")
    assert p.returncode == 2
    assert json.loads(p.stdout)["stdout"] == "a b"
    p = gpubox(d, "exec", name, "--", "/no/such/program")
    assert p.returncode == 2 and p.stderr.startswith("gpubox: ")


def test_pause_start_stop_start_and_restart(d):
    name = PREFIX + "_life"
    run_set(d, name, "--gpus", "1", "-p", "22")
    assert ok(d, "pause", name).stdout == f"{name}: paused ({name}-1 stopped; GPUs and ports kept)\n"
    assert info_ok(d, name)["state"] == "paused" and info_ok(d, name)["gpus"]
    assert ok(d, "start", name).stdout == f"{name}: running again ({name}-1)\n"
    assert info_ok(d, name)["state"] == "running"
    p = gpubox(d, "start", name)
    assert p.returncode == 4 and "it is running" in p.stderr
    stopped = as_json(d, "stop", name)
    assert stopped["state"] == "stopped" and len(stopped["released"]["gpus"]) == 1
    assert used_ports(d) == []
    if supports(d, "patch", "/api/v1/replicaSet/{name}/restart"):
        ok(d, "start", name)
        rs = info_ok(d, name)
        # The card it gave back is still free: the same container runs again,
        # no new version (docs/replicasets.md, "New versions").
        assert rs["state"] == "running" and rs["version"] == 1 and len(rs["gpus"]) == 1
        ok(d, "restart", name)
        assert info_ok(d, name)["version"] == 1  # a running set restarts in place
    else:
        for args in (("start", name), ("restart", name)):
            p = gpubox(d, *args)
            assert p.returncode == 1, args
            assert "not supported by this server" in p.stderr
            assert "/restart" in p.stderr
        assert info_ok(d, name)["state"] == "stopped"


def test_scale_and_rollback(d):
    name = PREFIX + "_scale"
    run_set(d, name, "--gpus", "1")
    p = gpubox(d, "scale", name)
    assert p.returncode == 2 and "--gpus" in p.stderr
    if supports(d, "patch", "/api/v1/replicaSet/{name}"):
        ok(d, "scale", name, "--gpus", "3")
        rs = info_ok(d, name)
        assert rs["version"] == 2 and len(rs["gpus"]) == 3 and rs["state"] == "running"
        p = gpubox(d, "scale", name, "--gpus", "9")
        assert p.returncode == 5 and "GPU not enough" in p.stderr
        assert len(info_ok(d, name)["gpus"]) == 3
    else:
        p = gpubox(d, "scale", name, "--gpus", "3")
        assert p.returncode == 1 and "not supported by this server" in p.stderr
        assert len(info_ok(d, name)["gpus"]) == 1
    if supports(d, "patch", "/api/v1/replicaSet/{name}/rollback"):
        if info_ok(d, name)["version"] > 1:
            ok(d, "rollback", name, "1")
            rs = info_ok(d, name)
            assert len(rs["gpus"]) == 1 and rs["version"] == 3
        p = gpubox(d, "rollback", name, str(info_ok(d, name)["version"]))
        assert p.returncode == 4, p.stderr
        p = gpubox(d, "rollback", name, "99")
        assert p.returncode in (2, 3), p.stderr
    else:
        p = gpubox(d, "rollback", name, "1")
        assert p.returncode == 1 and "not supported by this server" in p.stderr


def test_commit_and_rm(d):
    name = PREFIX + "_commit"
    tag = f"e2cli-commit-{RUN_TAG}:v1"
    run_set(d, name)
    ok(d, "exec", name, "--", "sh", "-c", "echo kept > /root-file")
    made = []  # the first commit's image is left untagged by --overwrite
    try:
        p = ok(d, "commit", name, tag)
        assert p.stdout.startswith(f"{name}: committed to {tag} (sha256:")
        made.append(image(tag)["Id"])
        assert image(tag)["Config"]["Labels"]["gpubox.created"] == "true"
        p = gpubox(d, "commit", name, tag)
        assert p.returncode == 4 and "exists" in p.stderr
        assert as_json(d, "commit", name, tag, "--overwrite")["imageName"] == tag
    finally:
        for ref in [tag, *made]:
            remove_image(ref)
    p = ok(d, "rm", name)
    assert p.stdout == f"{name}: deleted (history kept: gpubox history)\n"
    assert container(f"{name}-1") is None
    assert [r for r in table(ok(d, "ps", "--all").stdout) if r["NAME"] == name][0]["STATE"] == \
        "deleted"
    assert table(ok(d, "history", name).stdout)[0]["VERSION"] == "1"
    assert gpubox(d, "rm", name).returncode == 3
    assert as_json(d, "rm", name, "--purge")["purged"] is True
    assert gpubox(d, "history", name).returncode == 3


# ---- volumes ----

def test_volumes(d):
    vol = PREFIX + "vol"
    if not supports(d, "post", "/api/v1/volumes"):
        for args in (("volume", "ls"), ("volume", "create", vol, "1GB"),
                     ("volume", "inspect", vol), ("volume", "resize", vol, "2GB"),
                     ("volume", "rm", vol)):
            p = gpubox(d, *args)
            assert p.returncode == 1 and "not supported by this server" in p.stderr, args
        return
    try:
        p = ok(d, "volume", "create", vol, "64MB")
        assert p.stdout.startswith(f"volume {vol}: created, 64MB")
        assert gpubox(d, "volume", "create", vol, "64MB").returncode == 4
        assert gpubox(d, "volume", "create", PREFIX + "v2", "64XB").returncode == 2
        rows = [r for r in table(ok(d, "volume", "ls").stdout) if r["NAME"] == vol]
        assert rows and rows[0]["SIZE"] == "64MB" and rows[0]["BACKEND"] == "loop (ext4)"
        assert vol in ok(d, "volume", "ls", "-q").stdout.split()
        shown = ok(d, "volume", "inspect", vol).stdout
        assert "Size:       64MB" in shown and "Backend:    loop (ext4)\n" in shown
        assert as_json(d, "volume", "inspect", vol)["info"]["name"] == vol
        p = ok(d, "volume", "resize", vol, "128MB")
        assert p.stdout.startswith(f"volume {vol}: resized from 64MB to 128MB")
        assert gpubox(d, "volume", "resize", vol, "128MB").returncode == 4
        name = PREFIX + "_withvol"
        run_set(d, name, "-v", f"{vol}:/data")
        ok(d, "exec", name, "--", "sh", "-c", "echo hi > /data/f")
        p = gpubox(d, "volume", "rm", vol)
        assert p.returncode == 4 and name in p.stderr
        ok(d, "rm", name, "--purge")
        assert ok(d, "volume", "rm", vol).stdout == f"volume {vol}: deleted with its data\n"
        assert gpubox(d, "volume", "inspect", vol).returncode == 3
    finally:
        d.request("DELETE", f"/api/v1/volumes/{vol}")


# ---- progress of long operations ----

def gpubox_on_tty(d, *args, env=None, timeout=120):
    """Run the CLI with stderr on a pseudo-terminal and stdout a pipe:
    (returncode, stdout, the bytes the terminal received)."""
    e = dict(os.environ, GPUBOX_HOST=d.url)
    e.pop("GPUBOX_TOKEN", None)
    e.update(env or {})
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=slave, env=e)
    finally:
        os.close(slave)
    tty = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the CLI, the terminal's only writer, is gone
                break
            if not chunk:
                break
            tty += chunk
        out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
    for marker in SANITIZER_MARKERS:
        assert marker.encode() not in tty, tty
    return p.returncode, out.decode(), tty


def test_progress_of_a_long_scale(start_daemon):
    """A scale that carries a big system disk the slow way (archives: the
    portable path) runs for seconds; meanwhile the CLI shows the steps of
    the operation the set names, and the output on stdout stays as it is
    without progress."""
    d = start_daemon("--simulate-gpus", "4xA100-80GB", "--port-range", "63050-63059",
                     "--carry-method", "portable")
    name = PREFIX + "_progress"
    try:
        run_set(d, name, "--gpus", "1")
        ok(d, "exec", name, "--", "dd", "if=/dev/urandom", "of=/ballast", "bs=1M", "count=300")

        # stderr a pipe: plain lines, one per step reached, then the answer.
        p = ok(d, "scale", name, "--gpus", "2")
        assert p.stdout == f"{name}: scaled; now runs as {name}-2\n"
        plain = re.findall(rf"^scale {name}: (\S+) \((\d+)/(\d+)\)$", p.stderr, re.M)
        assert plain, p.stderr
        assert "\r" not in p.stderr and "\033" not in p.stderr

        # A terminal: one line rewritten in place, with the time taken.
        rc, out, tty = gpubox_on_tty(d, "--json", "scale", name, "--gpus", "1")
        assert rc == 0, tty
        answer = json.loads(out)  # stdout holds the answer and nothing else
        assert answer["containerName"] == f"{name}-3" and len(answer["gpus"]) == 1
        op = d.get(f"/api/v1/operations/{answer['operationId']}").data
        steps = [s["name"] for s in op["steps"]]
        drawn = re.findall(rb"\r\x1b\[K" + f"scale {name}: ".encode() +
                           rb"(\S+) \((\d+)/(\d+)\) (\d+\.\d)s", tty)
        assert drawn, tty
        for step, done, total, _ in drawn:
            assert int(total) == len(steps), drawn
            if step == b"done":  # a poll that came after the last step: the final state
                assert int(done) == len(steps), drawn
                continue
            assert step.decode() in steps, drawn
            assert steps.index(step.decode()) + 1 == int(done), drawn
        # Cleared at the end: the last thing drawn is followed by an erase.
        last = tty.rindex(f"scale {name}: ".encode())
        assert b"\r\x1b[K" in tty[last:], tty

        # Every plain line named a real step of such an operation, in order
        # (or, polled after the last step, the final state "done").
        for step, done, total in plain:
            assert int(total) == len(steps), plain
            if step == "done":  # a poll that came after the last step: the final state
                assert int(done) == len(steps), plain
                continue
            assert step in steps, plain
            assert steps.index(step) + 1 == int(done), plain
        assert [int(n) for _, n, _ in plain] == sorted({int(n) for _, n, _ in plain})

        # GPUBOX_PROGRESS=0: no progress; the same answer.
        p = ok(d, "scale", name, "--gpus", "2", env={"GPUBOX_PROGRESS": "0"})
        assert p.stdout == f"{name}: scaled; now runs as {name}-4\n"
        assert f"scale {name}:" not in p.stderr, p.stderr
    finally:
        wipe(d, PREFIX)


# ---- fleet subcommands and options on a single gpuboxd ----

NOT_IN_A_FLEET = "this gpuboxd is not in a fleet (started without --node)"


def test_nodes_outside_a_fleet(d):
    """A gpuboxd started without --node is no fleet: `gpubox nodes` prints
    the server's message and fails; so do cordon and uncordon. A gpuboxd
    without the nodes routes at all (older) is "not supported"."""
    listing = (("nodes",), ("--json", "nodes"), ("nodes", "-q"))
    cordoning = (("node", "cordon", "a"), ("node", "uncordon", "a"))
    if supports(d, "get", "/api/v1/nodes"):
        for args in listing:
            p = gpubox(d, *args)
            assert p.returncode != 0 and p.stdout == "", (args, p.returncode, p.stdout)
            assert p.stderr.startswith(f"gpubox: {NOT_IN_A_FLEET}"), (args, p.stderr)
        for args in cordoning:
            p = gpubox(d, *args)
            assert p.returncode != 0 and p.stdout == "", (args, p.returncode, p.stdout)
            assert p.stderr.startswith("gpubox: "), (args, p.stderr)
    else:
        for args in listing + cordoning:
            p = gpubox(d, *args)
            assert p.returncode == 1 and p.stdout == "", (args, p.returncode, p.stdout)
            assert "not supported by this server" in p.stderr and "/api/v1/nodes" in p.stderr, \
                (args, p.stderr)


def test_bad_node_selector_is_refused_before_any_request(d):
    """A malformed --node-selector (or --placement) is a usage error, 2,
    found before anything is sent: no set is created, and a server that
    cannot be reached is never tried (that would exit 1)."""
    name = PREFIX + "_sel"
    for bad in (("--node-selector", "bad"), ("--node-selector", "zone="),
                ("--node-selector", "=x"), ("--node-selector", "zone=x,,gpu=a100"),
                ("--node-selector", "zone=x", "--node-selector", "zone=y"),
                ("--placement", "fullest")):
        args = ("run", name, "--image", IMAGE, *bad, "--", "sleep", "3600")
        p = gpubox(d, *args)
        assert p.returncode == 2 and p.stdout == "", (bad, p.returncode, p.stderr)
        assert p.stderr.startswith(f"gpubox run: {bad[-2]}"), (bad, p.stderr)
        assert "Run 'gpubox run --help' for usage." in p.stderr
        p = gpubox(None, *args, env={"GPUBOX_HOST": "http://127.0.0.1:9"})
        assert p.returncode == 2 and "cannot reach" not in p.stderr, (bad, p.stderr)
    assert name not in [s["name"] for s in list_sets(d, all_=True)]
    assert container(f"{name}-1") is None


def format_table(headers, rows):
    """An aligned table as gpubox prints it: two spaces between columns,
    the last one unpadded."""
    lines = [headers, *rows]
    widths = [max(len(line[c]) for line in lines) for c in range(len(headers))]
    return "".join("  ".join(cell.ljust(widths[c]) if c + 1 < len(headers) else cell
                             for c, cell in enumerate(line)) + "\n" for line in lines)


def test_no_node_column_on_a_single_server(d):
    """Outside a fleet no list item carries node, and ps, gpus and volume ls
    print exactly the tables they printed before fleets existed."""
    name = PREFIX + "_single"
    run_set(d, name, "--gpus", "1", "-p", "22")
    sets = as_json(d, "ps")["replicaSets"]
    assert sets and all("node" not in s for s in sets)

    # Issue 27: IMAGE, one STATE column (the state and Docker's status
    # agree here) and BUSY (the server samples the simulated cards). BUSY
    # moves with the readings: the table is compared with the answer read
    # just before it, once the two read the same usage.
    def busy(s):
        u = s.get("usage")
        if not u:
            return ""
        idle = " idle" if u.get("idleSince") else ""
        return f"{u['utilization']}%{idle}" if u["utilization"] >= 0 else (idle.strip() or "-")

    def expected(sets):
        rows = []
        for s in sets:
            ports = ", ".join(f"{p['hostPort']}->{p['containerPort']}/{p.get('protocol', 'tcp')}"
                              for p in s.get("ports") or [])
            rows.append([s["name"], str(s["version"]), s["image"], s["state"],
                         str(len(s["gpus"])), busy(s), ports or "-", s["createTime"]])
        headers = ["NAME", "VERSION", "IMAGE", "STATE", "GPUS", "BUSY", "PORTS", "CREATED"]
        if not any(r[5] for r in rows):
            headers.pop(5)
            rows = [r[:5] + r[6:] for r in rows]
        return format_table(headers, rows)

    for _ in range(5):
        want = expected(as_json(d, "ps")["replicaSets"])
        got = ok(d, "ps").stdout
        if got == want and expected(as_json(d, "ps")["replicaSets"]) == want:
            break
    assert got == want

    devices = as_json(d, "gpus")["devices"]
    assert all("node" not in g for g in devices)
    out = ok(d, "gpus").stdout
    assert out.split("\n")[0].split() == ["INDEX", "UUID", "MODEL", "MEMORY", "ALLOCATED", "USED",
                                          "MODE", "HEALTHY", "TENANTS"]
    assert out.startswith("INDEX  UUID")
    assert [r["INDEX"] for r in table(out.split("\n(simulated GPUs")[0])] == \
        [str(g["index"]) for g in devices]

    if not supports(d, "post", "/api/v1/volumes"):
        return
    vol = PREFIX + "single"
    try:
        ok(d, "volume", "create", vol, "64MB")
        vols = as_json(d, "volume", "ls")["volumes"]
        assert vols and all("node" not in v for v in vols)
        out = ok(d, "volume", "ls").stdout
        assert out.split("\n")[0].split() == ["NAME", "SIZE", "BACKEND", "STATE", "VERSION",
                                              "CREATED"]
        assert [r for r in table(out) if r["NAME"] == vol][0]["SIZE"] == "64MB"
    finally:
        d.request("DELETE", f"/api/v1/volumes/{vol}")
