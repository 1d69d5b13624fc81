"""``memprof.core.terms.non_torch.FIRST_KERNEL_AT_SET_DEVICE``: vLLM V1 0.10.0-0.17.x set the
worker's device with ``CudaPlatform.set_device``, whose ``torch.zeros(1, device=device)`` runs the
process's first fill kernel before the memory snapshot, so what that kernel's module load reserves
(the device-side assert/printf reservation) lies in the baseline and the profile run's non-torch
increase holds the cuBLAS step alone, at TP1 too. Each figure below is a hand count from the
measured steps the constants cite."""

from __future__ import annotations

from typing import Any

import pytest

from memprof.base.units import GiB
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms import non_torch
from memprof.core.terms.nccl import nccl_row
from memprof.core.terms.nccl_image import image_delta

FIRST_KERNEL = 96_468_992  # the first torch.zeros before any GEMM (H100)
CUBLAS_AFTER = 69_206_016  # the cuBLAS handle's step after that kernel (H100)
BOTH_STEPS = 71_303_168 + 94_371_840  # cuBLAS then the first kernel, as the profile run saw them
POOL = 73_400_320  # torch's stream pool, the model runner's comm_stream (0.11.0-0.19.x)
CONTEXT = 552_402_944  # the CUDA context measured on an H100
NAME = "first kernel's modules (set_device)"


def _est(model: str = "llama-3.1-8b", gpu: str = "H100", **kw: Any) -> Estimate:
    return estimate(model, Deployment(**kw), gpu_name=gpu)


def _non_torch(e: Estimate, where: str) -> int:
    return sum(c.bytes for c in e.ranks[0].components
               if c.category == "non_torch" and c.where == where)


def _named(e: Estimate, name: str) -> list[Component]:
    return [c for c in e.ranks[0].components if c.name == name]


def test_the_steps_add_up_either_way_round() -> None:
    assert BOTH_STEPS == FIRST_KERNEL + CUBLAS_AFTER == 165_675_008
    assert non_torch.FIRST_KERNEL_BEFORE_GEMM_BYTES == FIRST_KERNEL
    assert non_torch.CUBLAS_AFTER_FIRST_KERNEL_BYTES == CUBLAS_AFTER


@pytest.mark.parametrize(("version", "held"), [
    ("0.9.2", False),   # V1 worker: torch.cuda.set_device, no kernel
    ("0.10.0", True), ("0.10.2", True), ("0.11.0", True), ("0.12.0", True), ("0.13.0", True),
    ("0.17.1", True),
    ("0.18.0", False),  # torch.accelerator.set_device_index
    ("0.19.0", False), ("0.20.0", False),
    ("0.10.2+v0", False),  # V0's worker calls torch.cuda.set_device itself
])
def test_releases_whose_worker_runs_the_kernel_before_its_snapshot(version: str,
                                                                    held: bool) -> None:
    e = _est(engine_version=version)
    got = _named(e, NAME)
    increase = _named(e, "non-torch increase (profile run)")[0].bytes
    if held:
        assert [(c.bytes, c.where, c.category) for c in got] == [
            (FIRST_KERNEL, "baseline", "non_torch")]
        assert increase == CUBLAS_AFTER
    else:
        assert got == []
        assert increase == BOTH_STEPS


def test_0_12_0_tp1_h100_by_hand() -> None:
    """vLLM 0.12.0, TP1, H100 (rows 511-519): the profile run's non-torch increase is the cuBLAS
    step + comm_stream's pool = 142,606,336 B = 0.133 GiB (the logs: 0.13 / 0.14 GiB, where
    both steps made it 0.22), and the memory in use at the snapshot the context + the first
    kernel = 648,871,936 B = 0.604 GiB (rows 511 and 512: 79.18 - 78.57 = 0.61 GiB)."""
    e = _est(engine_version="0.12.0", max_model_len=16000)
    assert _non_torch(e, "budget") == CUBLAS_AFTER + POOL == 142_606_336
    assert round(_non_torch(e, "budget") / GiB, 2) == 0.13
    assert _non_torch(e, "baseline") == CONTEXT + FIRST_KERNEL == 648_871_936
    assert round(_non_torch(e, "baseline") / GiB, 2) == 0.60


def test_the_kernel_moves_from_the_budget_to_the_baseline_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with_rule = _est(engine_version="0.12.0")
    monkeypatch.setattr(non_torch, "FIRST_KERNEL_AT_SET_DEVICE", ())
    without = _est(engine_version="0.12.0")
    a, b = with_rule.ranks[0], without.ranks[0]
    assert a.available_kv_bytes - b.available_kv_bytes == FIRST_KERNEL
    assert _non_torch(with_rule, "baseline") - _non_torch(without, "baseline") == FIRST_KERNEL
    assert a.category_bytes("non_torch") == b.category_bytes("non_torch")


def test_a_communicator_row_measured_with_the_kernel_is_charged_without_it() -> None:
    # TP2 over NVLink with cuMem on: the row holds the first kernel (nccl.FIRST_KERNEL_IN_ROW);
    # at 0.12.0 set_device ran it, so the communicator is the row less the kernel, the kernel is
    # its own baseline component, and the baseline's sum is what it was
    row = nccl_row(True, True, 2, 0)
    assert row.first_kernel
    e = _est(engine_version="0.12.0", tp=2)
    (comm,) = _named(e, "NCCL TP communicator (2 ranks)")
    # (init's NCCL device code at 0.12.0's NCCL 2.27.5 image: memprof.core.terms.nccl_image)
    image = image_delta(find_gpu("H100"), "2.27.5")[0]
    assert comm.bytes == row.init + row.first_all_reduce - POOL - FIRST_KERNEL + image
    assert comm.where == "baseline"
    assert len(_named(e, NAME)) == 1
    # 0.10.2 charges the communicator to the budget: the kernel leaves the budget there
    e = _est(engine_version="0.10.2", tp=2)
    (comm,) = _named(e, "NCCL TP communicator (2 ranks)")
    assert (comm.bytes, comm.where) == (
        row.init + row.first_all_reduce - POOL - FIRST_KERNEL + image, "budget")


def test_rocm_sets_the_device_without_a_kernel() -> None:
    # platforms/rocm.py RocmPlatform.set_device: torch.cuda.set_device alone (0.12.0, 0.17.1)
    e = _est(gpu="MI300X", engine_version="0.12.0")
    assert _named(e, NAME) == []


def test_sm86_keeps_the_cublas_pool_rule_alone() -> None:
    # with the first kernel before the snapshot only cuBLAS's 4 MiB-class pool step is left in
    # the profile run (non_torch.CUBLAS_STEP_SMALL_POOL_BYTES), as after an NCCL warm-up; from
    # 0.18.0 the profile run holds both steps, the first kernel's the card's
    e = _est(gpu="RTX-3090", engine_version="0.17.1")
    (inc,) = _named(e, "non-torch increase (profile run)")
    assert inc.bytes == non_torch.CUBLAS_STEP_SMALL_POOL_BYTES == 10_485_760
    e = _est(gpu="RTX-3090", engine_version="0.18.0")
    (inc,) = _named(e, "non-torch increase (profile run)")
    kernel = non_torch.card_first_kernel(e.gpu, after_gemm=True)[0]
    assert kernel == 44_040_192  # 82 SMs × 1536 threads (first_kernel.first_kernel_bytes)
    assert inc.bytes == 12_582_912 + kernel


def test_0_17_1_tp1_rtx3090_by_hand() -> None:
    """vLLM 0.17.1, TP1, RTX 3090 (rows 302-309, 1102, 1103): the profile run's non-torch
    increase is cuBLAS's 4 MiB-class pool step + comm_stream's pool = 83,886,080 B (80 MiB), and
    both terms memprof derives for sm86, the context (its published remainder + 82 SMs × 1536
    threads × 1 KiB of stack) and the first kernel (82 × 1536 resident threads), lie in the
    baseline, so neither moves the KV figure of these rows."""
    e = _est(gpu="RTX-3090", engine_version="0.17.1", max_model_len=8192)
    assert _non_torch(e, "budget") == 10_485_760 + POOL == 83_886_080
    context = 171_869_798 + 82 * 1536 * 1024  # published_context.py's sm86 remainder + stack
    assert _named(e, "CUDA context")[0].bytes == context == 300_844_646
    assert [(c.bytes, c.where) for c in _named(e, NAME)] == [(46_137_344, "baseline")]
    assert _non_torch(e, "baseline") == context + 46_137_344


def test_from_0_18_0_pynccls_warm_up_runs_the_kernel_before_the_snapshot() -> None:
    """vLLM 0.18.0+ sets the device without a kernel, then builds its communicators before the
    snapshot; PyNcclCommunicator's warm-up (torch.zeros(1) and an all_reduce) is the first
    kernel (nccl.FIRST_KERNEL_AT_WARM_UP). Four RTX 3090s over SHM: the communicator rows were
    measured after a kernel, so the card's step is its own baseline component and the profile
    run keeps cuBLAS's 4 MiB-class step alone; at TP1 no communicator, no warm-up."""
    gpu = find_gpu("RTX-3090")
    step = non_torch.card_first_kernel(gpu)[0]
    e = _est(gpu="RTX-3090", engine_version="0.18.1", tp=4)
    (warm,) = _named(e, "first kernel's modules (NCCL warm-up)")
    assert (warm.bytes, warm.where) == (step, "baseline")
    assert _named(e, NAME) == []
    increase = _named(e, "non-torch increase (profile run)")[0].bytes
    assert increase == CUBLAS_AFTER - non_torch.CUBLAS_SMALL_POOL_SAVING_BYTES
    # 0.17.1: set_device ran it; the warm-up's component is not charged twice
    old = _est(gpu="RTX-3090", engine_version="0.17.1", tp=4)
    assert _named(old, "first kernel's modules (NCCL warm-up)") == []
    assert len(_named(old, NAME)) == 1
    one = _est(gpu="RTX-3090", engine_version="0.18.1")
    assert _named(one, "first kernel's modules (NCCL warm-up)") == []
    assert _named(one, "non-torch increase (profile run)")[0].bytes > increase
