"""gpubox's CUDA limiter in real containers (issue 28, docs/gpus.md "The CUDA
limiter"). A memory share's container gets libgpubox-cuda.so and a read-only
/etc/ld.so.preload naming it, its limits read-only in /run/gpubox/limits and
a small tmpfs for its budget in /run/gpubox/budget. The CUDA program is
tests/fakes/cuda_probe against the fake driver (libcuda.so.1), copied with
the host's libc into a small image of their own (the test image has no
libc); the fake driver's cards are written into the container. Started with
`env -i` (no LD_PRELOAD, no limit variables), the program still stops at
the share, cuMemGetInfo reports it, and two processes draw on one budget,
the memory of one killed with SIGKILL coming back. NVML (the fake
libnvidia-ml.so.1, also in the image) reports the share and the container's
use, as nvidia-smi in the container would show them, and a compute share
(cores= in the limits file) slows kernel launches on a busy card. A whole card gets no
limiter, and with --cuda-limiter off nothing is mounted and the answers say
the share is not enforced.
"""
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from conftest import FAKE_NVML, Daemon, docker_get, fake_gpu_env
from schema import response_schema, validate
from rsutil import (LONG_RUNNING, RUN_TAG, assert_refused_unchanged, call, container, create_ok,
                    delete, execute_ok, history, info_ok, list_sets, patch_ok, remove_image, wait_until,
                    wipe)

PREFIX = "e2gl" + RUN_TAG
WINDOW = "65110-65119"  # this module's ports (rsutil explains the windows)
IMAGE = f"gpubox-cuda-probe:{RUN_TAG}"
BUILD = Path(os.environ.get("GPUBOX_BUILD_DIR", "build/test"))
PROBE = ["env", "-i", "GPUBOX_FAKE_GPUS=/tmp/gpus", "/usr/bin/cuda_probe"]


def add_file(tar, src, dest, mode=0o755):
    data = Path(src).read_bytes()
    info = tarfile.TarInfo(dest.lstrip("/"))
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, dest, mode=0o755):
    info = tarfile.TarInfo(dest.lstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def add_link(tar, dest, target):
    info = tarfile.TarInfo(dest.lstrip("/"))
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def libraries_of(program):
    """The host files the loader maps for program (ldd), by their path."""
    out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        words = line.split()
        path = next((w for w in words if w.startswith("/")), None)
        if path:
            paths.append(path)
    return paths


@pytest.fixture(scope="module")
def probe_image():
    """busybox, the host's libc and loader, cuda_probe, the fake driver and NVML."""
    probe, driver = BUILD / "fakes" / "cuda_probe", BUILD / "fakes" / "libcuda.so.1"
    nvml = BUILD / "fakes" / "libnvidia-ml.so.1"
    assert probe.exists() and driver.exists() and nvml.exists(), "build the test tree first"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "etc", "tmp", "proc", "sys", "dev", "run", "usr", "usr/bin", "lib",
                  "lib64", "lib/x86_64-linux-gnu", "usr/lib", "usr/lib/x86_64-linux-gnu"):
            add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
        busybox = shutil.which("busybox") or "/bin/busybox"
        add_file(tar, busybox, "/bin/busybox")
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                                 check=True).stdout.split()
        for applet in applets:
            if applet != "busybox":
                add_link(tar, f"/bin/{applet}", "busybox")
        libs = libraries_of(probe) + libraries_of(BUILD / "cuda" / "libgpubox-cuda.so")
        for lib in dict.fromkeys(libs):  # each once, in order
            add_file(tar, os.path.realpath(lib), lib)
        add_file(tar, probe, "/usr/bin/cuda_probe")
        add_file(tar, driver, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0o644)
        add_file(tar, nvml, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", 0o644)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    subprocess.run(["docker", "import", "-c", 'CMD ["/bin/sh"]', "-", IMAGE],
                   input=buf.getvalue(), check=True, capture_output=True)
    yield IMAGE
    remove_image(IMAGE)


def start(tmp, *extra):
    data = tmp / "data"
    return Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(data), "--port-range", WINDOW,
                   "--simulate-gpus", "2xT4-16GB", *extra], data, tmp / "gpuboxd.log").start()


@pytest.fixture
def daemon(tmp_path):
    d = start(tmp_path)
    yield d
    try:
        wipe(d, PREFIX)
    finally:
        d.stop()


def share_ok(d, image, name, memory, **fields):
    body = {"imageName": image, "replicaSetName": f"{PREFIX}_{name}", "cmd": LONG_RUNNING,
            "gpuMemory": memory, **fields}
    r = call(d, "POST", "/api/v1/replicaSet", body)
    assert r.status == 200 and r.code == 200, (r.status, r.json)
    return r.data


def fake_cards(d, name, uuid):
    """The fake driver's card, the share's card: 16 GiB."""
    out = execute_ok(d, name, ["sh", "-c", f"echo '0 {uuid} 16384 ok Tesla T4' > /tmp/gpus"])
    assert out["exitCode"] == 0, out


def probe(d, name, *steps):
    out = execute_ok(d, name, PROBE + list(steps))
    assert out["exitCode"] == 0, out
    return out["stdout"]


def test_a_share_holds_in_every_process(daemon, probe_image):
    d = daemon
    created = share_ok(d, probe_image, "mem", "4GB")
    name = f"{PREFIX}_mem"
    fake_cards(d, name, created["gpus"][0])

    mounts = {m["Destination"]: m for m in container(created["containerName"])["Mounts"]}
    assert mounts["/etc/ld.so.preload"]["RW"] is False
    assert mounts["/usr/local/gpubox/libgpubox-cuda.so"]["RW"] is False
    assert mounts["/run/gpubox/limits"]["RW"] is False
    # the budget lives in a small tmpfs of the container's, not on the host's disk
    out = execute_ok(d, name, ["grep", " /run/gpubox/budget ", "/proc/mounts"])
    assert out["stdout"].startswith("tmpfs ") and " rw," in out["stdout"], out
    out = execute_ok(d, name, ["sh", "-c", "dd if=/dev/zero of=/run/gpubox/budget/x bs=1M "
                                           "count=4; s=$?; rm -f /run/gpubox/budget/x; exit $s"])
    assert out["exitCode"] != 0, out
    out = execute_ok(d, name, ["cat", "/etc/ld.so.preload", "/run/gpubox/limits/limits"])
    assert out["stdout"].splitlines()[0] == "/usr/local/gpubox/libgpubox-cuda.so"
    assert f"{created['gpus'][0]} 4096" in out["stdout"].splitlines()
    # the container's user cannot undo it
    for cmd in ("echo > /etc/ld.so.preload", "rm /run/gpubox/limits/limits",
                "echo x > /run/gpubox/limits/limits"):
        assert execute_ok(d, name, ["sh", "-c", cmd])["exitCode"] != 0, cmd

    assert info_ok(d, name)["gpuLimits"] == {"mode": "memory", "enforced": True,
                                             "enforcedBy": "gpubox"}
    data = d.get("/api/v1/resources/gpus").data
    assert data["sharing"] == {"enforced": True, "enforcedBy": "gpubox"}

    # env -i: no LD_PRELOAD, no CUDA_DEVICE_MEMORY_LIMIT_0; the share holds
    assert probe(d, name, "fill", "mem", "512", "info", "total") == \
        "fill 4096\ninfo free=0 total=4096\ntotal 4096\n"
    assert probe(d, name, "--via", "dlsym", "fill", "create", "1024") == "fill 4096\n"
    assert probe(d, name, "--via", "procaddr_v1", "alloc", "async", "5000") == "alloc oom\n"

    # two processes, one budget; SIGKILL of the holder gives its memory back
    holder = ("(sleep 600 | env -i GPUBOX_FAKE_GPUS=/tmp/gpus /usr/bin/cuda_probe "
              "alloc mem 3072 wait > /tmp/holder.out 2>&1) > /dev/null 2>&1 &")
    assert execute_ok(d, name, ["sh", "-c", holder])["exitCode"] == 0
    for _ in range(100):
        if "waiting" in execute_ok(d, name, ["cat", "/tmp/holder.out"])["stdout"]:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the holder did not allocate")
    assert probe(d, name, "info", "fill", "mem", "512") == "info free=1024 total=4096\nfill 1024\n"
    assert execute_ok(d, name, ["sh", "-c", "kill -9 $(pidof cuda_probe)"])["exitCode"] == 0
    time.sleep(0.2)
    assert probe(d, name, "fill", "mem", "512") == "fill 4096\n"

    # the host's limits directory goes with the container
    host = Path(d.data_dir) / "gpu-limits" / created["containerName"]
    assert (host / "limits").is_file()
    assert delete(d, name).status == 200
    assert not host.exists()


def start_holder(d, name, mib):
    """A probe that allocates mib and waits in the container, until killed."""
    holder = ("(sleep 600 | env -i GPUBOX_FAKE_GPUS=/tmp/gpus /usr/bin/cuda_probe "
              f"alloc mem {mib} wait > /tmp/holder.out 2>&1) > /dev/null 2>&1 &")
    assert execute_ok(d, name, ["sh", "-c", holder])["exitCode"] == 0
    for _ in range(100):
        if "waiting" in execute_ok(d, name, ["cat", "/tmp/holder.out"])["stdout"]:
            return
        time.sleep(0.1)
    pytest.fail("the holder did not allocate")


def cli(d, *args):
    env = dict(os.environ, GPUBOX_HOST=d.url)
    env.pop("GPUBOX_TOKEN", None)
    exe = os.environ.get("GPUBOX_CLI", str(BUILD / "gpubox"))
    p = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120)
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p


def test_a_share_changes_in_place(daemon, probe_image):
    """PATCH gpuMemory on the same card: no new version, no restart; the
    container's processes see the new share at their next allocation."""
    d = daemon
    created = share_ok(d, probe_image, "live", "4GB")
    name, uuid = f"{PREFIX}_live", created["gpus"][0]
    fake_cards(d, name, uuid)
    start_holder(d, name, 3072)
    assert probe(d, name, "info") == "info free=1024 total=4096\n"

    # grow: the same container, the same version, the holder still running
    r = call(d, "PATCH", f"/api/v1/replicaSet/{name}", {"gpuPatch": {"gpuMemory": "8GB"}})
    assert r.status == 200 and r.code == 200, r.json
    doc = d.get("/openapi.json").json
    errors = validate(r.json, response_schema(doc, "/api/v1/replicaSet/{name}", "patch", 200), doc)
    assert not errors, errors
    data = r.data
    assert data["inPlace"] is True and data["changed"] is True, data
    assert data["version"] == created["version"]
    assert data["containerId"] == created["containerId"]
    assert data["gpus"] == [uuid]
    assert data["gpuShares"][0]["memoryMiB"] == 8192
    host = Path(d.data_dir) / "gpu-limits" / created["containerName"] / "limits"
    assert f"{uuid} 8192" in host.read_text().splitlines()
    assert probe(d, name, "alloc", "mem", "1024", "info") == \
        "alloc ok\ninfo free=4096 total=8192\n"
    assert "waiting" in execute_ok(d, name, ["cat", "/tmp/holder.out"])["stdout"]
    got = info_ok(d, name)
    assert got["version"] == created["version"] and got["containerId"] == created["containerId"]
    assert got["spec"]["gpuMemory"] == 8192, got["spec"]
    dev = next(x for x in d.get("/api/v1/resources/gpus").data["devices"] if x["uuid"] == uuid)
    assert dev["allocatedMemoryMiB"] == 8192, dev
    hist = history(d, name).data["history"]
    assert [h["version"] for h in hist] == [created["version"]]
    assert hist[0]["spec"]["gpuMemory"] == 8192, hist

    # shrink below what the holder has: applied; what is held stays, and
    # nothing more is allocated until the container is back under it
    data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "2GB"}})
    assert data["inPlace"] is True and data["version"] == created["version"], data
    assert probe(d, name, "alloc", "mem", "1", "info") == "alloc oom\ninfo free=0 total=2048\n"
    assert execute_ok(d, name, ["sh", "-c", "kill -9 $(pidof cuda_probe)"])["exitCode"] == 0
    time.sleep(0.2)
    assert probe(d, name, "fill", "mem", "512") == "fill 2048\n"

    # the CLI says so
    p = cli(d, "scale", name, "--gpu-memory", "3GB")
    assert p.returncode == 0, p.stderr
    assert "in place" in p.stdout and "not restarted" in p.stdout, p.stdout
    assert probe(d, name, "fill", "mem", "512") == "fill 3072\n"
    assert info_ok(d, name)["containerId"] == created["containerId"]

    # a gpuboxd restarted later writes the limits file from the record
    host.write_text(f"{uuid} 1024\n")
    d.stop()
    d.start()
    assert f"{uuid} 3072" in host.read_text().splitlines()


def test_a_share_without_room_moves(daemon, probe_image):
    """No room on its card: the share moves, as a new version."""
    d = daemon
    first = share_ok(d, probe_image, "a", "4GB")
    other = share_ok(d, probe_image, "b", "10GB")
    assert other["gpus"] == first["gpus"]  # binpack: both on one card
    data = patch_ok(d, f"{PREFIX}_a", {"gpuPatch": {"gpuMemory": "8GB"}})
    assert data["inPlace"] is False, data
    assert data["version"] == first["version"] + 1
    assert data["gpus"] != first["gpus"]
def launches(d, name, kind="kernel"):
    out = probe(d, name, "launch", kind, "500")
    assert out.startswith("launch "), out
    return int(out.split()[1])


def test_nvml_and_compute_share_in_the_container(daemon, probe_image):
    d = daemon
    created = share_ok(d, probe_image, "nvml", "4GB")
    name, uuid = f"{PREFIX}_nvml", created["gpus"][0]
    fake_cards(d, name, uuid)
    # NVML's memory info (nvidia-smi's source): the share and the container's use
    assert probe(d, name, "alloc", "mem", "1000", "nvml") == (
        "alloc ok\nnvml total=4096 used=1000 free=3096\nnvml_v2 total=4096 used=1000 free=3096\n")

    # a compute share of 10% (cores=, as gpuboxd would write it: the file
    # replaced on the host) on a card NVML reports fully busy
    out = execute_ok(d, name, ["sh", "-c", "echo 'usage 0 8000 100' >> /tmp/gpus"])
    assert out["exitCode"] == 0, out
    free_run = launches(d, name)
    host = Path(d.data_dir) / "gpu-limits" / created["containerName"] / "limits"
    lines = host.read_text().splitlines()
    lines = [f"{line} cores=10" if line.startswith(uuid) else line for line in lines]
    (host.parent / "limits.new").write_text("\n".join(lines) + "\n")
    os.rename(host.parent / "limits.new", host)
    for kind in ("kernel", "ex_ptsz", "coop"):
        slowed = launches(d, name, kind)
        assert slowed * 2 < free_run, (kind, slowed, free_run)


NS_CARD = "GPU-cccccccc-2222-4000-8000-000000000002"
NS_CARDS = f"driver_version 535.104.05\n0 {NS_CARD} 16384 ok Tesla T4\n"


def rewrite(path, text):
    """Replace the daemon's fake description so its NVML sees a new file."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def ns_pid(host_pid):
    """A host process's PID in its own PID namespace (NSpid's last)."""
    for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError(f"no NSpid for {host_pid}")


def test_context_memory_counts_in_the_container(tmp_path, probe_image):
    """NVML lists each process with its context memory (the fake NVML's
    context line: 300 MiB besides its allocations), and in the container's
    own PID namespace under its host PID (the fake NVML's hostpids line, fed the PIDs this test
    reads on the host, as the real driver does). gpuboxd's monitor sees the
    same process in its NVML reading and writes HOSTPID PID into the
    container's /run/gpubox/limits/pids; the library finds itself there and
    counts its context: a process whose context takes 300 MiB allocates
    only the 4096 MiB share less it, cuMemGetInfo and NVML say so, and all
    of it returns to the budget when the process dies."""
    desc = tmp_path / "gpus.txt"
    desc.write_text(NS_CARDS)
    data = tmp_path / "data"
    d = Daemon(["--listen", "127.0.0.1:0", "--data-dir", str(data), "--port-range", WINDOW,
                "--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML),
                "--usage-interval", "0.2"], data, tmp_path / "gpuboxd.log",
               env=fake_gpu_env(desc)).start()
    try:
        created = share_ok(d, probe_image, "ctxns", "4GB")
        name, uuid = f"{PREFIX}_ctxns", created["gpus"][0]
        pids_file = data / "gpu-limits" / created["containerName"] / "pids"
        holder = (f"printf '0 {uuid} 16384 ok Tesla T4\\ncontext 0 300\\n"
                  "hostpids /tmp/hostpids\\n' > /tmp/gpus; touch /tmp/go; "
                  "(tail -f /tmp/go | env -i GPUBOX_FAKE_GPUS=/tmp/gpus /usr/bin/cuda_probe "
                  "wait alloc mem 3797 alloc mem 3796 free fill mem 512 info nvml wait "
                  "> /tmp/p.out 2>&1) "
                  "> /dev/null 2>&1 &")
        assert execute_ok(d, name, ["sh", "-c", holder])["exitCode"] == 0
        assert wait_until(lambda: "waiting" in execute_ok(d, name, ["cat", "/tmp/p.out"])[
            "stdout"]), "the probe did not start"
        top = docker_get(f"/containers/{created['containerName']}/top?ps_args=-o%20pid,args")
        host = next(int(p[0]) for p in top["Processes"] if p[1].startswith("/usr/bin/cuda_probe"))
        own = ns_pid(host)
        assert own != host
        # NVML, in the container and on the host, lists the process under its host PID
        out = execute_ok(d, name, ["sh", "-c", f"echo '{own} {host}' > /tmp/hostpids"])
        assert out["exitCode"] == 0, out
        rewrite(desc, NS_CARDS + f"process 0 {host} 300\n")
        listed = wait_until(lambda: pids_file.exists() and f"{host} {own}" in
                            pids_file.read_text().splitlines(), timeout=10)
        # the probe allocates: its context (300 MiB) counts in the share
        assert execute_ok(d, name, ["sh", "-c", "echo go >> /tmp/go"])["exitCode"] == 0
        assert wait_until(lambda: execute_ok(d, name, ["cat", "/tmp/p.out"])["stdout"].count(
            "waiting") == 2, timeout=15), "the probe did not allocate"
        out = execute_ok(d, name, ["cat", "/tmp/p.out"])["stdout"]
        assert out == ("waiting\nalloc oom\nalloc ok\nfree ok\nfill 3584\n"
                       "info free=212 total=4096\nnvml total=4096 used=3884 free=212\n"
                       "nvml_v2 total=4096 used=3884 free=212\nwaiting\n"), out
        assert listed, pids_file.read_text()
        # another process of the container sees the same budget
        assert probe(d, name, "info") == "info free=212 total=4096\n"
        # the process dies: its memory and its context return to the budget
        assert execute_ok(d, name, ["kill", "-9", str(own)])["exitCode"] == 0
        rewrite(desc, NS_CARDS)
        assert probe(d, name, "fill", "mem", "512") == "fill 4096\n"
        assert wait_until(lambda: pids_file.read_text().splitlines()[1:] == [])
    finally:
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()


def test_whole_cards_get_no_limiter(daemon, probe_image):
    d = daemon
    whole = create_ok(d, f"{PREFIX}_whole", gpus=1, imageName=probe_image)
    mounts = {m["Destination"] for m in container(whole["containerName"])["Mounts"]}
    assert mounts == {"/etc/gpubox/gpu.env"}
    name = f"{PREFIX}_whole"
    fake_cards(d, name, whole["gpus"][0])
    assert probe(d, name, "fill", "mem", "4096", "info") == "fill 16384\ninfo free=0 total=16384\n"
    assert info_ok(d, name)["gpuLimits"] == {"mode": "whole", "enforced": True,
                                             "enforcedBy": "exclusive cards"}


def test_cuda_limiter_off(tmp_path, probe_image):
    d = start(tmp_path, "--cuda-limiter", "off")
    try:
        created = share_ok(d, probe_image, "off", "4GB")
        name = f"{PREFIX}_off"
        mounts = {m["Destination"] for m in container(created["containerName"])["Mounts"]}
        assert mounts == {"/etc/gpubox/gpu.env"}
        fake_cards(d, name, created["gpus"][0])
        assert probe(d, name, "fill", "mem", "4096") == "fill 16384\n"
        assert info_ok(d, name)["gpuLimits"] == {"mode": "memory", "enforced": False,
                                                 "enforcedBy": None}
        assert d.get("/api/v1/resources/gpus").data["sharing"] == {"enforced": False,
                                                                   "enforcedBy": None}
        # gpuCores is kept, but nothing holds it: gpuLimits says no cores
        share_ok(d, probe_image, "offc", "1GB", gpuCores=30)
        got = info_ok(d, f"{PREFIX}_offc")
        assert got["spec"]["gpuCores"] == 30, got["spec"]
        assert got["gpuLimits"] == {"mode": "memory", "enforced": False, "enforcedBy": None}
    finally:
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()


def test_binds_on_the_limiter_paths_are_refused(daemon, probe_image):
    for dest in ("/etc/ld.so.preload", "/run/gpubox/limits"):
        body = {"imageName": probe_image, "replicaSetName": f"{PREFIX}_clash", "cmd": LONG_RUNNING,
                "gpuMemory": "1GB", "binds": [{"src": "data", "dest": dest}]}
        r = call(daemon, "POST", "/api/v1/replicaSet", body)
        assert r.status == 400 and r.code == 1000, r.json
        assert "where gpubox mounts its own files" in r.msg, r.msg


# --- gpuCores: the compute share from the API ----------------------------------------------


def limits_file(d, created):
    return Path(d.data_dir) / "gpu-limits" / created["containerName"] / "limits"


def card_line(d, created, uuid):
    return next(line for line in limits_file(d, created).read_text().splitlines()
                if line.startswith(uuid))


def busy_card(d, name):
    """The fake NVML reports the card 100% busy: a compute share slows launches."""
    out = execute_ok(d, name, ["sh", "-c", "echo 'usage 0 8000 100' >> /tmp/gpus"])
    assert out["exitCode"] == 0, out


def test_gpu_cores_on_create_and_in_place(daemon, probe_image):
    """gpuCores on create writes cores= into the card's limits line; a PATCH
    of gpuCores (alone, or with gpuMemory on a card with room) rewrites it in
    place: same version, same container, and the launch rate follows."""
    d = daemon
    created = share_ok(d, probe_image, "cores", "4GB", gpuCores=10)
    name, uuid = f"{PREFIX}_cores", created["gpus"][0]
    assert created["gpuCores"] == 10, created
    assert card_line(d, created, uuid) == f"{uuid} 4096 cores=10"
    out = execute_ok(d, name, ["cat", "/run/gpubox/limits/limits"])["stdout"]
    assert f"{uuid} 4096 cores=10" in out.splitlines(), out
    got = info_ok(d, name)
    assert got["spec"]["gpuCores"] == 10 and got["gpuCores"] == 10, got
    assert got["gpuLimits"] == {"mode": "memory", "enforced": True, "enforcedBy": "gpubox",
                                "cores": 10}
    item = next(x for x in list_sets(d) if x["name"] == name)
    assert item["gpuCores"] == 10, item
    assert history(d, name).data["history"][0]["spec"]["gpuCores"] == 10
    fake_cards(d, name, uuid)
    busy_card(d, name)
    slowed = launches(d, name)

    # the limit lifted in place: the same version and container, launches free
    r = call(d, "PATCH", f"/api/v1/replicaSet/{name}", {"gpuPatch": {"gpuCores": 100}})
    assert r.status == 200 and r.code == 200, r.json
    doc = d.get("/openapi.json").json
    errors = validate(r.json, response_schema(doc, "/api/v1/replicaSet/{name}", "patch", 200), doc)
    assert not errors, errors
    data = r.data
    assert data["inPlace"] is True and data["changed"] is True, data
    assert data["version"] == created["version"], data
    assert data["containerId"] == created["containerId"], data
    assert data["gpuCores"] == 100 and data["gpuShares"][0]["memoryMiB"] == 4096, data
    assert card_line(d, created, uuid) == f"{uuid} 4096 cores=100"
    free_run = launches(d, name)
    assert slowed * 2 < free_run, (slowed, free_run)

    # memory and compute together, on the card it holds (room): in place too
    data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": "6GB", "gpuCores": 10}})
    assert data["inPlace"] is True and data["version"] == created["version"], data
    assert card_line(d, created, uuid) == f"{uuid} 6144 cores=10"
    assert launches(d, name) * 2 < free_run
    assert probe(d, name, "info") == "info free=6144 total=6144\n"
    hist = history(d, name).data["history"]
    assert [h["version"] for h in hist] == [created["version"]]
    assert hist[0]["spec"]["gpuCores"] == 10 and hist[0]["spec"]["gpuMemory"] == 6144, hist

    # the CLI: update --gpu-cores none lifts it, in place
    p = cli(d, "update", name, "--gpu-cores", "none")
    assert p.returncode == 0, p.stderr
    assert "in place" in p.stdout and "not restarted" in p.stdout, p.stdout
    assert card_line(d, created, uuid) == f"{uuid} 6144"
    got = info_ok(d, name)
    assert "gpuCores" not in got["spec"] and got["gpuCores"] is None, got
    assert "cores" not in got["gpuLimits"], got["gpuLimits"]
    p = cli(d, "scale", name, "--gpu-cores", "25")
    assert p.returncode == 0, p.stderr
    assert "at most 25% of its compute" in p.stdout, p.stdout
    assert info_ok(d, name)["containerId"] == created["containerId"]

    # a gpuboxd restarted later writes the limits file, cores= with it
    limits_file(d, created).write_text(f"{uuid} 1024\n")
    d.stop()
    d.start()
    assert card_line(d, created, uuid) == f"{uuid} 6144 cores=25"


def test_gpu_cores_cli_run(daemon, probe_image):
    d = daemon
    name = f"{PREFIX}_clicores"
    p = cli(d, "run", name, "-i", probe_image, "--gpu-memory", "2GB", "--gpu-cores", "30", "--",
            *LONG_RUNNING)
    assert p.returncode == 0, p.stderr
    got = info_ok(d, name)
    assert got["spec"]["gpuCores"] == 30, got["spec"]
    assert got["gpuLimits"]["cores"] == 30
    p = cli(d, "run", f"{name}x", "-i", probe_image, "--gpu-memory", "2GB", "--gpu-cores", "0",
            "--", *LONG_RUNNING)
    assert p.returncode != 0 and "--gpu-cores" in p.stderr, (p.stdout, p.stderr)


BAD_CORES = [
    ({"gpuMemory": "1GB", "gpuCores": 0}, "gpuCores is 0"),
    ({"gpuMemory": "1GB", "gpuCores": 101}, "gpuCores is 101"),
    ({"gpuMemory": "1GB", "gpuCores": -5}, "gpuCores is -5"),
    ({"gpuMemory": "1GB", "gpuCores": "50"}, "gpuCores must be a whole number"),
    ({"gpuMemory": "1GB", "gpuCores": 12.5}, "gpuCores must be a whole number"),
    ({"gpuCores": 50}, "asks for no GPU"),
    ({"gpuCount": 1, "gpuCores": 50}, "whole cards"),
]


@pytest.mark.parametrize("fields,words", BAD_CORES)
def test_gpu_cores_refused_on_create(daemon, probe_image, fields, words):
    body = {"imageName": probe_image, "replicaSetName": f"{PREFIX}_bad", "cmd": LONG_RUNNING,
            **fields}
    r = assert_refused_unchanged(daemon, PREFIX, "POST", "/api/v1/replicaSet",
                                 json.dumps(body).encode(), 400, 1000)
    assert words in r.msg, r.msg
    assert call(daemon, "GET", f"/api/v1/replicaSet/{PREFIX}_bad").status == 404


def test_gpu_cores_refused_on_patch(daemon, probe_image):
    d = daemon
    created = share_ok(d, probe_image, "pbad", "2GB", gpuCores=40)
    whole = create_ok(d, f"{PREFIX}_pwhole", gpus=1, imageName=probe_image)
    name, uuid = f"{PREFIX}_pbad", created["gpus"][0]
    path = f"/api/v1/replicaSet/{name}"
    for value, words in ((0, "gpuCores is 0"), (101, "gpuCores is 101"), (-1, "gpuCores is -1"),
                         ('"50"', "gpuCores must be a whole number")):
        raw = f'{{"gpuPatch": {{"gpuCores": {value}}}}}'.encode()
        r = assert_refused_unchanged(d, PREFIX, "PATCH", path, raw, 400, 1000)
        assert words in r.msg, r.msg
        assert card_line(d, created, uuid) == f"{uuid} 2048 cores=40"
    # whole cards take no compute share
    raw = b'{"gpuPatch": {"gpuCores": 50}}'
    r = assert_refused_unchanged(d, PREFIX, "PATCH", f"/api/v1/replicaSet/{PREFIX}_pwhole", raw,
                                 400, 1000)
    assert "whole cards" in r.msg, r.msg
    assert info_ok(d, f"{PREFIX}_pwhole")["version"] == whole["version"]
    # a share made whole drops its compute share with it (a new version)
    data = patch_ok(d, name, {"gpuPatch": {"gpuMemory": 0}})
    assert data["inPlace"] is False, data
    assert "gpuCores" not in info_ok(d, name)["spec"]


def test_timeslice_equal_compute(tmp_path, probe_image):
    """--timeslice-equal-compute: each time-slice replica's limits line
    carries cores=100/replicas; a set's own gpuCores comes first and can be
    changed in place."""
    d = start(tmp_path, "--timeslice-equal-compute", "--timeslice-replicas", "4")
    try:
        body = {"imageName": probe_image, "replicaSetName": f"{PREFIX}_ts", "cmd": LONG_RUNNING,
                "gpuShared": True}
        r = call(d, "POST", "/api/v1/replicaSet", body)
        assert r.status == 200, r.json
        created, name = r.data, f"{PREFIX}_ts"
        uuid = created["gpus"][0]
        assert card_line(d, created, uuid) == f"{uuid} 4096 cores=25"
        got = info_ok(d, name)
        assert got["gpuLimits"] == {"mode": "timeslice", "enforced": True,
                                    "enforcedBy": "gpubox", "cores": 25}, got["gpuLimits"]
        fake_cards(d, name, uuid)
        busy_card(d, name)
        slowed = launches(d, name)
        data = patch_ok(d, name, {"gpuPatch": {"gpuCores": 100}})
        assert data["inPlace"] is True and data["version"] == created["version"], data
        assert card_line(d, created, uuid) == f"{uuid} 4096 cores=100"
        assert slowed * 2 < launches(d, name)
    finally:
        try:
            wipe(d, PREFIX)
        finally:
            d.stop()


def test_timeslice_without_equal_compute(daemon, probe_image):
    body = {"imageName": probe_image, "replicaSetName": f"{PREFIX}_ts0", "cmd": LONG_RUNNING,
            "gpuShared": True}
    r = call(daemon, "POST", "/api/v1/replicaSet", body)
    assert r.status == 200, r.json
    uuid = r.data["gpus"][0]
    assert card_line(daemon, r.data, uuid) == f"{uuid} 4096"
    assert "cores" not in info_ok(daemon, f"{PREFIX}_ts0")["gpuLimits"]
