"""The profile run's cuBLAS step by architecture (``memprof.core.terms.non_torch``
``cublas_small_pool`` / ``profile_run_increase``): the H100 golden of recorders/gpu_cublas_pool.py
shows the step is cuBLAS's default workspace pool, made with the handle and sized by
``CUBLAS_WORKSPACE_CONFIG``; cards of cuBLAS's 4 MiB row get the pre-Hopper default's measured
cost, sm90 / Blackwell / ROCm / an unknown architecture keep the H100 figures byte for byte."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_arch, find_gpu
from memprof.core.terms import non_torch
from memprof.core.terms.non_torch import (
    CUBLAS_AFTER_FIRST_KERNEL_BYTES,
    CUBLAS_NON_TORCH_BYTES,
    CUBLAS_SMALL_POOL_SAVING_BYTES,
    CUBLAS_STEP_SMALL_POOL_BYTES,
    TRITON_NON_TORCH_BYTES,
    cublas_small_pool,
)

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "reports/gpu/context/cublas-pool-h100.json"
MiB = 2**20


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())  # type: ignore[no-any-return]


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpu_cublas_pool", ROOT / "recorders/gpu_cublas_pool.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _first_step(run: dict[str, Any]) -> dict[str, Any]:
    return run["after"][0]["delta"]  # type: ignore[no-any-return]


def _runs(steps: str) -> dict[str | None, dict[str, Any]]:
    return {r["env"].get("CUBLAS_WORKSPACE_CONFIG"): r for r in _golden()["runs"]
            if r["steps"] == steps and not r["env"].get("CUBLASLT_WORKSPACE_SIZE")
            and r["env"].get("TORCH_CUBLASLT_UNIFIED_WORKSPACE") is None}


def test_the_recorder_parses_its_variants_and_refuses_a_bad_one() -> None:
    rec = _recorder()
    for steps, _env in rec.VARIANTS:
        rec.parse_steps(steps)
    with pytest.raises(ValueError, match="unknown step"):
        rec.parse_steps("mm,bogus")
    with pytest.raises(SystemExit) as exc:
        rec.main(["--child", "bogus"])
    assert exc.value.code == 2


def test_the_golden_holds_every_variant_and_its_versions() -> None:
    g, rec = _golden(), _recorder()
    assert [r["steps"] for r in g["runs"]] == [s for s, _ in rec.VARIANTS]
    assert all("rc" not in r for r in g["runs"])  # every child exited 0
    assert (g["torch"], g["cublas"], g["driver"], g["gpu"], g["capability"]) == (
        "2.11.0+cu130", 130100, "580.159.04", "NVIDIA H100 80GB HBM3", [9, 0])


def test_the_step_is_the_handle_not_a_gemm_and_the_same_on_every_path() -> None:
    runs = _golden()["runs"]
    for r in runs:
        first = _first_step(r)
        later = [s for s in r["after"][1:] if s["step"] != "zeros"]
        assert all(s["delta"]["non_torch_bytes"] == 0 for s in later), r["steps"]
        if not r["env"].get("CUBLAS_WORKSPACE_CONFIG"):
            # cublasCreate alone, a cuBLASLt GEMM with bias, an fp8 GEMM: the same pool
            assert first["non_torch_bytes"] == CUBLAS_AFTER_FIRST_KERNEL_BYTES, r["steps"]
        # never in the cudaMallocAsync default pool
        assert all(s["mem"]["async_pool_reserved_bytes"] == 0 for s in r["after"])
    handle = next(r for r in runs if r["steps"].startswith("handle"))
    assert _first_step(handle)["non_torch_bytes"] == 69_206_016


def test_the_pool_follows_cublas_workspace_config_in_2_mib_pages() -> None:
    """non-torch = ⌈config + the handle's state, 2 MiB⌉ for every setting, and unset equals
    64 MiB (two buffers of cuBLAS's recommended 32 MiB for sm90) byte for byte."""
    runs = _runs("mm,zeros")
    sizes = {":16:8": 128 * 1024, ":1024:2": 2 * MiB, ":4096:2": 8 * MiB,
             ":4096:2:16:8": 8 * MiB + 128 * 1024, ":4096:8": 32 * MiB, ":4096:16": 64 * MiB,
             ":32768:2": 64 * MiB}
    for config, size in sizes.items():
        got = _first_step(runs[config])["non_torch_bytes"]
        assert got % (2 * MiB) == 0 and size < got <= size + 2 * MiB, config
    unset = _first_step(runs[None])["non_torch_bytes"]
    assert unset == _first_step(runs[":4096:16"])["non_torch_bytes"] == \
        _first_step(runs[":32768:2"])["non_torch_bytes"]
    assert _first_step(runs[":4096:2:16:8"])["non_torch_bytes"] == CUBLAS_STEP_SMALL_POOL_BYTES


def test_more_streams_add_torch_workspaces_but_no_second_pool() -> None:
    for r in (r for r in _golden()["runs"] if "mm_s2" in r["steps"]):
        by = {s["step"]: s["delta"] for s in r["after"]}
        assert by["mm_s2"]["non_torch_bytes"] == by["mm_s3"]["non_torch_bytes"] == 0
        assert by["mm_s2"]["allocated_bytes"] == 32 * MiB + 2 * MiB  # workspace + output


@pytest.mark.parametrize(("arch", "small"), [
    ("sm70", True), ("sm75", True), ("sm80", True), ("sm86", True), ("sm89", True),
    ("sm90", False), ("sm100", False), ("sm103", False), ("sm120", False), ("sm121", False),
    ("gfx942", False), ("gfx90a", False)])
def test_the_pool_row_by_architecture(arch: str, small: bool) -> None:
    assert cublas_small_pool(find_arch(arch)) is small


def _increase(gpu: str, tp: int = 1) -> int:
    # 0.18.0: no kernel before V1's snapshot at TP1 (0.10.0-0.17.x's set_device ran the first
    # kernel there, non_torch.FIRST_KERNEL_AT_SET_DEVICE), so TP1 holds both steps
    e = estimate("qwen3-32b", Deployment(engine_version="0.18.0", tp=tp), gpu_name=gpu)
    comps = [c for r in e.ranks[:1] for c in r.components
             if c.name == "non-torch increase (profile run)"]
    assert len(comps) == 1
    return comps[0].bytes


@pytest.mark.parametrize("gpu", ["H100", "H200", "B200", "RTX-5090", "MI300X"])
def test_large_pool_cards_keep_the_h100_cublas_step(gpu: str) -> None:
    # the first kernel's step is the card's (memprof.core.terms.first_kernel): the H100's on
    # 132 SMs × 2048 threads and on ROCm
    kernel = non_torch.card_first_kernel(find_gpu(gpu), after_gemm=True)[0]
    assert _increase(gpu) == CUBLAS_NON_TORCH_BYTES + kernel
    if gpu in ("H100", "H200", "MI300X"):
        assert kernel == TRITON_NON_TORCH_BYTES and _increase(gpu) == 165_675_008
    # TP2: the cuBLAS step alone where the communicator's row holds the first kernel
    assert _increase(gpu, tp=2) in (CUBLAS_AFTER_FIRST_KERNEL_BYTES, _increase(gpu))


def test_tp2_on_nvlink_cards_pays_the_pool_alone() -> None:
    """After the NCCL warm-up (which ran the first fill kernel) the step is the pool alone."""
    assert _increase("H100", tp=2) == CUBLAS_AFTER_FIRST_KERNEL_BYTES == 69_206_016
    assert _increase("A100-80GB", tp=2) == CUBLAS_STEP_SMALL_POOL_BYTES == 10_485_760


@pytest.mark.parametrize("gpu", ["A100-80GB", "L4", "L40S", "T4", "V100-32GB", "RTX-3090"])
def test_small_pool_cards_pay_56_mib_less_for_cublas(gpu: str) -> None:
    assert CUBLAS_SMALL_POOL_SAVING_BYTES == 69_206_016 - 10_485_760 == 56 * MiB
    kernel = non_torch.card_first_kernel(find_gpu(gpu), after_gemm=True)[0]
    assert _increase(gpu) == CUBLAS_NON_TORCH_BYTES + kernel - 56 * MiB
    assert _increase(gpu, tp=2) in (10_485_760, _increase(gpu))
    assert find_gpu(gpu).arch != "sm90"
    assert non_torch.CUBLAS_POOL_SOURCE.startswith("cuBLAS default workspace pool")
