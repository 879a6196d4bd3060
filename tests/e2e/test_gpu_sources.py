"""The GPU inventory through each source: simulated, the fake NVML library
and the fake nvidia-smi. Every source gives the same device shape, and only
the simulated one is marked "simulated"."""
import pytest

from conftest import FAKE_NVML, FAKE_SMI, fake_gpu_env

DESCRIPTION = """\
# two cards, as a fake host describes them
driver_version 535.104.05
0 GPU-0a1b2c3d-0000-4000-8000-000000000000 81920 ok NVIDIA A100-SXM4-80GB
1 GPU-0a1b2c3d-0000-4000-8000-000000000001 16384 ok Tesla T4
"""
WANT = [
    {"uuid": "GPU-0a1b2c3d-0000-4000-8000-000000000000", "index": 0,
     "model": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920},
    {"uuid": "GPU-0a1b2c3d-0000-4000-8000-000000000001", "index": 1, "model": "Tesla T4",
     "memoryMiB": 16384},
]
DEVICE_KEYS = {"uuid", "index", "model", "memoryMiB", "allocatedMemoryMiB", "tenants", "mode",
               "healthy", "capacityMiB", "freeMemoryMiB", "allocations", "replicas",
               "maxTenants", "excluded", "shareable", "enforced", "usage"}


@pytest.fixture
def fake_gpus(tmp_path):
    desc = tmp_path / "gpus.txt"
    desc.write_text(DESCRIPTION)
    return fake_gpu_env(desc)


def check_shape(data, source, simulated):
    assert data["source"] == source
    assert data["simulated"] is simulated
    for d in data["devices"]:
        assert set(d) == DEVICE_KEYS
        assert isinstance(d["uuid"], str) and isinstance(d["model"], str)
        assert isinstance(d["index"], int) and isinstance(d["memoryMiB"], int)
        assert d["allocatedMemoryMiB"] == 0 and d["tenants"] == [] and d["mode"] == "free"
        assert d["healthy"] is True
    assert data["gpus"] == {d["uuid"]: 0 for d in data["devices"]}


def seen(data):
    return [{k: d[k] for k in ("uuid", "index", "model", "memoryMiB")} for d in data["devices"]]


def test_fake_nvml(start_daemon, fake_gpus):
    d = start_daemon("--gpu-source", "nvml", "--nvml-library", str(FAKE_NVML), env=fake_gpus)
    data = d.get("/api/v1/resources/gpus").data
    check_shape(data, "nvml", False)
    assert seen(data) == WANT
    log = d.log()
    assert "gpus: 2 device(s) from nvml (driver 535.104.05)" in log
    assert f"gpu 0: {WANT[0]['uuid']} NVIDIA A100-SXM4-80GB, 81920 MiB" in log
    assert f"gpu 1: {WANT[1]['uuid']} Tesla T4, 16384 MiB" in log
    assert "SIMULATED" not in log


def test_fake_nvidia_smi(start_daemon, fake_gpus):
    d = start_daemon("--gpu-source", "nvidia-smi", "--nvidia-smi", str(FAKE_SMI), env=fake_gpus)
    data = d.get("/api/v1/resources/gpus").data
    check_shape(data, "nvidia-smi", False)
    assert seen(data) == WANT
    assert "gpus: 2 device(s) from nvidia-smi" in d.log()


def test_auto_prefers_nvml(start_daemon, fake_gpus):
    d = start_daemon("--nvml-library", str(FAKE_NVML), "--nvidia-smi", str(FAKE_SMI),
                     env=fake_gpus)
    data = d.get("/api/v1/resources/gpus").data
    check_shape(data, "nvml", False)
    assert seen(data) == WANT


def test_auto_falls_back_to_nvidia_smi(start_daemon, fake_gpus, tmp_path):
    d = start_daemon("--nvml-library", str(tmp_path / "no-such-libnvidia-ml.so.1"),
                     "--nvidia-smi", str(FAKE_SMI), env=fake_gpus)
    data = d.get("/api/v1/resources/gpus").data
    check_shape(data, "nvidia-smi", False)
    assert seen(data) == WANT


def test_simulated_is_marked_and_announced(start_daemon):
    d = start_daemon("--simulate-gpus", "2xA100-80GB")
    data = d.get("/api/v1/resources/gpus").data
    check_shape(data, "simulated", True)
    assert len(data["devices"]) == 2
    assert all(dev["memoryMiB"] == 81920 for dev in data["devices"])
    log = d.log()
    banner = [l for l in log.splitlines() if "SIMULATED GPUs" in l]
    assert banner and " WARN " in banner[0]


def test_no_gpu_found_is_source_none_with_a_warning(start_daemon, tmp_path):
    d = start_daemon("--nvml-library", str(tmp_path / "none.so"),
                     "--nvidia-smi", str(tmp_path / "no-nvidia-smi"))
    r = d.get("/api/v1/resources/gpus")
    assert r.status == 200
    assert r.data == {"gpus": {}, "devices": [], "simulated": False, "source": "none",
                      "sharing": {"enforced": True, "enforcedBy": "gpubox"}}
    assert d.get("/api/v1/gpus").data == {"gpuStatus": {}}
    assert "no GPU found" in d.log()


def test_explicit_source_that_fails_stops_start_up(tmp_path):
    from conftest import run_gpuboxd
    rc, _, err = run_gpuboxd(["--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                              "--gpu-source", "nvml", "--nvml-library",
                              str(tmp_path / "missing.so")])
    assert rc != 0
    assert "start-up failed" in err and "GPU" in err
