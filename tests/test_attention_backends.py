"""Attention-backend rows (memprof/core/attention_backends.py): the block size vLLM runs with is
the backend's, not the GPU's (vllm/platforms/cuda.py check_and_update_config, v0.11.0: block_size
None → 16, then FlashMLA forced to 64, CUTLASS MLA to 128, FlashInfer MLA to 64), and dense
FlashMLA is Hopper-only (v1/attention/ops/flashmla.py is_flashmla_dense_supported)."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.core.attention_backends import ROWS, default_for
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.kv_dtypes import DSV4, GQA, MLA, SPARSE_MLA


@pytest.mark.parametrize(("gpu", "backend", "block"), [
    ("B200", None, 128),  # CUTLASS MLA, the SM100 default: 16 → 128
    ("B200", "flashinfer_mla", 64),  # FlashInfer MLA: 16 → 64 (memprof kept 128 before)
    ("H200", None, 64),  # FlashMLA, the SM90 default
])
def test_mla_default_block_size_is_the_backends(gpu: str, backend: str | None,
                                                block: int) -> None:
    e = estimate("deepseek-r1", Deployment(tp=8, attention_backend=backend), gpu_name=gpu)
    assert e.ranks[0].plan.block_size == block


def test_dense_flashmla_is_refused_on_blackwell() -> None:
    # memprof estimated it with 128-token blocks before; vLLM refuses the backend there
    with pytest.raises(BadInput, match="Hopper"):
        estimate("deepseek-r1", Deployment(tp=8, attention_backend="flashmla"), gpu_name="B200")
    # DeepSeek-V4's sparse MLA runs on FlashMLA on Blackwell (its default there)
    e = estimate("deepseek-v4-flash", Deployment(tp=8, attention_backend="flashmla"),
                 gpu_name="B200")
    assert e.verdict in ("fits", "runtime_oom", "startup_oom")


def test_a_given_block_size_is_forced_by_the_backend_row() -> None:
    e = estimate("deepseek-r1", Deployment(tp=8, attention_backend="flashinfer_mla",
                                           block_size=16), gpu_name="B200")
    assert e.ranks[0].plan.block_size == 64
    assert any("vLLM forces 64 for flashinfer_mla" in n for n in e.notes)
    kept = estimate("deepseek-r1", Deployment(tp=8, attention_backend="flashinfer_mla",
                                              block_size=32), gpu_name="B200")
    assert kept.ranks[0].plan.block_size == 32  # FlashInfer MLA keeps 32


def test_gqa_kernels_refuse_a_block_size_no_kernel_block_divides() -> None:
    with pytest.raises(BadInput, match="no common block size"):
        estimate("qwen3-32b", Deployment(block_size=8), gpu_name="H200")


def test_every_kind_has_a_default_on_every_platform() -> None:
    for kind in (GQA, MLA, SPARSE_MLA, DSV4):
        for arch, rocm in (("sm90", False), ("sm100", False), ("sm80", False),
                           ("unknown", False), ("gfx942", True)):
            row = default_for(kind, arch, rocm)
            assert kind in row.kinds
            assert row.vendor in (None, "amd" if rocm else "nvidia")


def test_rows_cite_their_source_and_name_their_kinds() -> None:
    assert len({r.name for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert r.source and r.kinds <= {GQA, MLA, SPARSE_MLA, DSV4}
        assert (r.forces is None) or (r.keeps_multiple_of is not None)
