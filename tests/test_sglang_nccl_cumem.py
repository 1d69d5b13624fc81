"""SGLang's communicators with NCCL's cuMem off (memprof.core.terms.non_torch NCCL_CUMEM, its
SGLang row) and the first kernel PyNccl's warm-up runs before the load
(memprof.core.terms.nccl_warmup)."""

from __future__ import annotations

import pytest

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.terms.non_torch import (
    CUBLAS_AFTER_FIRST_KERNEL_BYTES,
    FIRST_KERNEL_BEFORE_GEMM_BYTES,
    nccl_cumem,
)

WARM_UP = "first kernel's modules (NCCL warm-up)"


def _est(engine: str = "sglang", gpu: str = "H100", **kw: object) -> Estimate:
    dep = Deployment(**{"engine": engine, "tp": 2, **kw})  # type: ignore[arg-type]
    return estimate("llama-3.1-8b", dep, gpu_name=gpu)


def _comps(e: Estimate) -> dict[str, tuple[int, str]]:
    return {c.name: (c.bytes, c.where) for c in e.ranks[0].components}


@pytest.mark.parametrize("release", SGLANG_RELEASES)
def test_every_sglang_release_runs_nccl_with_cumem_off(release: str) -> None:
    assert not nccl_cumem(Deployment(engine="sglang", engine_version=release))


def test_vllm_keeps_its_own_rows() -> None:
    assert nccl_cumem(Deployment(engine_version="0.10.2"))
    assert not nccl_cumem(Deployment(engine_version="0.10.1.1"))


def test_the_p2p_cumem_off_row_and_the_warm_up_kernel_before_the_baseline() -> None:
    got = _comps(_est())
    # nccl-matrix-2x-h100.json p2p-cumem-off (init holds torch's stream pool: SGLang's rows keep
    # it) + first all_reduce; the row was measured after a first kernel, which lands apart; init
    # loads the newest release's NCCL 2.30.7 (torch 2.14.1), whose sm_90 image is a page above
    # the measured 2.28.9 one (memprof.core.terms.nccl_image)
    assert got["NCCL TP communicator (2 ranks)"] == (757_071_872 + 195_035_136 + 2 * MiB,
                                                     "baseline")
    assert got[WARM_UP] == (FIRST_KERNEL_BEFORE_GEMM_BYTES, "baseline")
    # the profile run's own non-torch step is cuBLAS's alone: the kernel is not charged twice
    assert got["non-torch increase (profile run)"][0] == CUBLAS_AFTER_FIRST_KERNEL_BYTES


def test_over_shm_too() -> None:
    got = _comps(_est(no_gpu_peer_access=True))
    assert got["NCCL TP communicator (2 ranks)"][0] == 195_035_136 + 195_035_136 + 2 * MiB
    assert got[WARM_UP] == (FIRST_KERNEL_BEFORE_GEMM_BYTES, "baseline")


def test_no_communicator_no_warm_up() -> None:
    # TP1: SGLang makes no PyNccl communicator; the load runs the first kernel (load_drop)
    assert WARM_UP not in _comps(_est(tp=1))


@pytest.mark.parametrize("version", ["0.10.1.1", "0.10.2", "0.33.0"])
def test_vllm_charges_the_kernel_in_its_profile_run_instead(version: str) -> None:
    assert WARM_UP not in _comps(_est(engine="vllm", engine_version=version))

