"""``memprof devices`` and ``--gpu auto`` against faked NVML (pynvml) and AMD SMI (amdsmi),
their failure modes included: a missing library, no driver, a GPU that refuses a query."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memprof.cli import run

MiB = 1 << 20
LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def fake_nvml(gpus: list[dict[str, Any]], init_error: type[Exception] | None = None) -> Any:
    """A pynvml double: each GPU a dict of name, total/reserved/used MiB, cc, processes, and
    ``refuse`` (queries that raise NotSupported)."""

    def check(i: int, what: str) -> dict[str, Any]:
        g = gpus[i]
        if what in g.get("refuse", ()):
            raise NVMLError_NotSupported(what)
        return g

    def init() -> None:
        if init_error is not None:
            raise init_error("fake")

    def memory(h: int, version: object = None) -> Any:
        g = check(h, "memory" if version is None else "memory_v2")
        total = g["total_mib"] * MiB
        used = g.get("used_mib", 0) * MiB
        if version is None:
            return SimpleNamespace(total=total, free=total - used, used=used)
        reserved = g["reserved_mib"] * MiB
        return SimpleNamespace(total=total, reserved=reserved, used=used,
                               free=total - reserved - used)

    return SimpleNamespace(
        nvmlInit=init, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: len(gpus),
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: check(h, "name")["name"].encode(),
        nvmlDeviceGetMemoryInfo=memory, nvmlMemory_v2=0x02000028,
        nvmlDeviceGetCudaComputeCapability=lambda h: check(h, "cc")["cc"],
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=pid, usedGpuMemory=used)
            for pid, used in check(h, "processes").get("processes", [])],
        nvmlSystemGetProcessName=lambda pid: f"/usr/bin/python{pid}".encode(),
    )


def fake_amdsmi(gpus: list[dict[str, Any]], init_error: bool = False) -> Any:
    class AmdSmiLibraryException(Exception):
        pass

    def init() -> None:
        if init_error:
            raise AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    return SimpleNamespace(
        amdsmi_init=init, amdsmi_shut_down=lambda: None,
        amdsmi_get_processor_handles=lambda: list(range(len(gpus))),
        amdsmi_get_gpu_asic_info=lambda h: {"market_name": gpus[h]["name"],
                                            "target_graphics_version": gpus[h]["arch"]},
        AmdSmiMemoryType=SimpleNamespace(VRAM=0),
        amdsmi_get_gpu_memory_total=lambda h, kind: gpus[h]["total"],
        amdsmi_get_gpu_memory_usage=lambda h, kind: gpus[h]["used"],
        amdsmi_get_gpu_driver_info=lambda h: {"driver_version": "6.10.5"},
        amdsmi_get_gpu_process_list=lambda h: [{"name": "python3", "pid": 42,
                                                 "mem": 1 << 30}],
    )


H100 = {"name": "NVIDIA H100 80GB HBM3", "total_mib": 81559, "reserved_mib": 480,
        "used_mib": 1024, "cc": (9, 0), "processes": [(1234, 1 << 30), (99, (1 << 64) - 1)]}
MI300X = {"name": "AMD Instinct MI300X", "arch": "gfx942", "total": 206_141_652_992,
          "used": 1 << 30}


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(nvml: Any | None, amd: Any | None) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", nvml)  # None: "not installed"
        monkeypatch.setitem(sys.modules, "amdsmi", amd)
    return install


def test_nvidia_listing_and_auto(host: Any) -> None:
    host(fake_nvml([H100, H100]), None)
    code, out, err = invoke(["devices", "-f", "json"])
    assert code == 0, err
    d = json.loads(out)
    assert len(d) == 2 and d[0]["total_bytes"] == 85_017_493_504  # = the catalog's H100
    assert d[0]["arch"] == "sm90" and d[0]["driver"] == "580.159.04"
    assert d[0]["processes"] == [{"pid": 1234, "name": "python1234", "used_bytes": 1 << 30},
                                 {"pid": 99, "name": "python99", "used_bytes": None}]
    code, out, _ = invoke(["devices"])
    assert code == 0 and "NVIDIA H100 80GB HBM3" in out and "79.18 GiB" in out
    code, auto, _ = invoke(["estimate", "--gpu", "auto", "-m", "qwen3-0.6b", "-f", "json"])
    _, named, _ = invoke(["estimate", "--gpu", "H100", "-m", "qwen3-0.6b", "-f", "json"])
    assert code == 0 and json.loads(auto)["summary"] == json.loads(named)["summary"]
    assert json.loads(auto)["gpu"]["name"] == "H100-80GB"
    # the log names no release (explain takes the newest, 0.5.23, whose prefill CUDA graphs
    # memprof predicts to leave too little outside the logged 0.93): the snapshot this test was
    # written against, where the start is predicted (tests/test_explain.py)
    code, out, err = invoke(["explain", str(LOGS / "sglang-qwen3-235b-fp8-tp4-h100.log"),
                             "--gpu", "auto", "-m", "qwen3-235b-a22b", "-q", "fp8",
                             "--engine-version", "main@d315eb7", "-f", "json"])
    assert code == 0, err
    assert not any("choose another" in n for n in json.loads(out)["log"]["notes"])
    assert json.loads(out)["deployment"]["gpu_total_bytes"] == 85_017_493_504


def test_amd_listing_and_auto(host: Any) -> None:
    host(None, fake_amdsmi([MI300X]))
    code, out, err = invoke(["devices", "-f", "json"])
    assert code == 0, err
    d = json.loads(out)[0]
    assert (d["vendor"], d["total_bytes"], d["arch"]) == ("amd", 206_141_652_992, "gfx942")
    assert d["free_bytes"] == 206_141_652_992 - (1 << 30)
    code, out, err = invoke(["plan", "-m", "qwen3-32b", "--gpu", "auto", "--requests", "8",
                             "--context", "8K", "-f", "json"])
    assert code == 0, err
    assert json.loads(out)["gpu"] == "MI300X"


@pytest.mark.parametrize(("nvml", "amd", "message"), [
    (None, None, "pynvml (nvidia-ml-py) is not installed; amdsmi is not installed"),
    ("lib", None, "libnvidia-ml.so not found"),
    ("driver", None, "the NVIDIA driver is not loaded"),
    (None, "init", "AMD SMI: initialisation failed"),
    ("empty", None, "no GPU found"),
])
def test_no_gpu_is_exit_3(host: Any, nvml: str | None, amd: str | None, message: str) -> None:
    nv = {None: None, "lib": fake_nvml([H100], NVMLError_LibraryNotFound),
          "driver": fake_nvml([H100], NVMLError_DriverNotLoaded), "empty": fake_nvml([])}[nvml]
    host(nv, None if amd is None else fake_amdsmi([MI300X], init_error=True))
    for argv in (["devices"], ["estimate", "--gpu", "auto"],
                 ["plan", "-m", "qwen3-32b", "--gpu", "auto", "--requests", "1", "--context",
                  "1K"], ["sweep", "--gpu", "auto", "--set", "tp=1,2"]):
        code, out, err = invoke(argv)
        assert code == 3, (argv, err)
        assert err.startswith("error: ") and message in err and "\nhint: " in err
        assert "Traceback" not in err and out == ""


def test_a_gpu_that_refuses_queries(host: Any) -> None:
    stubborn = {**H100, "refuse": ("memory", "memory_v2", "processes", "cc")}
    host(fake_nvml([stubborn]), None)
    code, out, err = invoke(["devices"])
    assert code == 0, err
    assert "n/a" in out and "note: GPU 0: memory (v2): NVMLError_NotSupported" in out
    code, _, err = invoke(["estimate", "--gpu", "auto"])
    assert code == 3 and "does not report its memory" in err


def test_old_driver_without_memory_v2(host: Any) -> None:
    host(fake_nvml([{**H100, "refuse": ("memory_v2",)}]), None)
    code, out, _ = invoke(["devices", "-f", "json"])
    d = json.loads(out)[0]
    assert code == 0 and d["total_bytes"] == 81559 * MiB
    assert any("v1 only" in p for p in d["problems"])


def test_mixed_gpus_need_a_name(host: Any) -> None:
    host(fake_nvml([H100, {**H100, "name": "NVIDIA H200", "total_mib": 143771,
                          "reserved_mib": 616}]), None)
    code, _, err = invoke(["estimate", "--gpu", "auto"])
    assert code == 3 and "different GPUs" in err


def test_auto_keeps_the_catalog_rows_facts(host: Any) -> None:
    # the host's total, but the catalog row's interconnect and SM count: a TP4 estimate on the
    # detected H100 uses the custom all-reduce exactly as one on --gpu H100 does
    host(fake_nvml([H100]), None)
    from memprof.probes.devices import local_gpu

    gpu = local_gpu()
    assert gpu.name == "H100-80GB" and gpu.fully_connected and gpu.sm_count == 132
    argv = ["-m", "qwen3-32b", "-tp", "4", "-f", "json"]
    _, auto, _ = invoke(["estimate", "--gpu", "auto", *argv])
    _, named, _ = invoke(["estimate", "--gpu", "H100", *argv])
    names = [[c["name"] for c in json.loads(x)["ranks"][0]["components"]] for x in (auto, named)]
    assert names[0] == names[1] and any("custom all-reduce" in n for n in names[0])
