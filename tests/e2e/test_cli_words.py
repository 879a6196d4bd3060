"""The CLI's messages in a user's words (issue 27, items 5 and 7), end to
end against a gpuboxd with 8 simulated A100s and the real dockerd.

- Advice names the gpubox command that does it, never an API path: an
  unknown image says `gpubox pull IMAGE` (not docker pull), an unknown
  volume in -v says `gpubox volume create`, a volume in use says what to
  do without "DELETE /api/v1/...".
- A GPU shortage (1013) says in one short sentence how many cards the
  server has and how many are free; the free cards' ids are in --json
  (the envelope's data), never in the message.
- `gpubox gpus` shows the memory promised to shares (ALLOCATED) apart from
  what the cards use now (USED, from the monitor's samples, as `top`).
"""
import json
import os
import subprocess
from pathlib import Path

from conftest import BUILD_DIR, SANITIZER_MARKERS
from rsutil import IMAGE, RUN_TAG, module_daemon

CLI = Path(os.environ.get("GPUBOX_CLI", BUILD_DIR / "gpubox"))
PREFIX = "e2words" + RUN_TAG
PORT_START, PORT_END = 63500, 63519

daemon, d = module_daemon(PREFIX, PORT_START, PORT_END)


def gpubox(d, *args):
    e = dict(os.environ)
    e.pop("GPUBOX_TOKEN", None)
    e["GPUBOX_HOST"] = d.url
    p = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=e, timeout=120)
    for marker in SANITIZER_MARKERS:
        assert marker not in p.stderr, p.stderr
    return p


def ok(d, *args):
    p = gpubox(d, *args)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def no_api_words(text):
    for word in ("/api/v1", "POST ", "GET ", "PATCH ", "DELETE ", "docker pull"):
        assert word not in text, text


def table(text):
    lines = text.rstrip("\n").split("\n")
    header = lines[0]
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    names = header.split()
    return [dict(zip(names, [line[s:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                             for k, s in enumerate(starts)]))
            for line in lines[1:]]


def test_unknown_image_suggests_gpubox_pull(d):
    img = "e2words-no-such-image:v9"
    p = gpubox(d, "run", PREFIX + "_img", "--image", img, "--pull", "never")
    assert p.returncode != 0
    assert f"`gpubox pull {img}`" in p.stderr, p.stderr
    no_api_words(p.stderr)


def test_unknown_volume_suggests_volume_create(d):
    p = gpubox(d, "run", PREFIX + "_vol", "--image", IMAGE, "-v", "e2wordsnovol:/data")
    assert p.returncode == 2, p.stderr
    assert "`gpubox volume create e2wordsnovol SIZE`" in p.stderr, p.stderr
    no_api_words(p.stderr)


def test_volume_in_use_says_what_to_do(d):
    vol, name = PREFIX + "v", PREFIX + "_user"
    ok(d, "volume", "create", vol, "64MB")
    try:
        ok(d, "run", name, "--image", IMAGE, "-v", f"{vol}:/data", "--", "sleep", "3600")
        p = gpubox(d, "volume", "rm", vol)
        assert p.returncode == 4, p.stderr
        assert f"gpubox rm {name}" in p.stderr, p.stderr
        no_api_words(p.stderr)
    finally:
        gpubox(d, "rm", name)
        gpubox(d, "volume", "rm", vol)


def test_gpu_shortage_counts_cards_ids_only_in_json(d):
    p = gpubox(d, "run", PREFIX + "_big", "--image", IMAGE, "--gpus", "9")
    assert p.returncode == 5
    assert p.stderr == "gpubox: GPU not enough: asked 9; the server has 8 cards, 8 free\n"
    assert "GPU-" not in p.stderr
    p = gpubox(d, "--json", "run", PREFIX + "_big", "--image", IMAGE, "--gpus", "9")
    assert p.returncode == 5 and "GPU-" not in p.stderr
    data = json.loads(p.stdout)
    assert (data["asked"], data["cards"], data["free"]) == (9, 8, 8)
    gpus = d.get("/api/v1/resources/gpus").data["gpus"]
    assert sorted(data["freeGpus"]) == sorted(gpus)


def test_gpus_shows_allocated_and_used_apart(d):
    name = PREFIX + "_mem"
    ok(d, "run", name, "--image", IMAGE, "--gpu-memory", "8GB", "--", "sleep", "3600")
    uuid = d.get(f"/api/v1/replicaSet/{name}").data["info"]["gpus"][0]
    out = ok(d, "gpus").stdout
    assert out.split("\n")[0].split() == ["INDEX", "UUID", "MODEL", "MEMORY", "ALLOCATED", "USED",
                                          "MODE", "HEALTHY", "TENANTS"]
    rows = {r["UUID"]: r for r in table(out.split("\n(simulated GPUs")[0])}
    assert rows[uuid]["ALLOCATED"] == "8GB"
    # USED is the monitor's live sample, as `gpubox top` shows it.
    dev = next(x for x in d.get("/api/v1/resources/gpus").data["devices"] if x["uuid"] == uuid)
    usage = dev.get("usage")
    if usage and usage.get("memoryUsedMiB", -1) >= 0:
        assert rows[uuid]["USED"] != "8GB" or usage["memoryUsedMiB"] == 8192
        assert rows[uuid]["USED"] in ("0B", f"{usage['memoryUsedMiB'] // 1024}GB") or \
            rows[uuid]["USED"].endswith("MB")
    else:
        assert rows[uuid]["USED"] == "-"
