"""The CUDA context's remainder on sm86 as vLLM 0.6.4.post1 printed it on an RTX 3090
(``memprof.core.terms.published_context``), by hand, and what it does to the rows that charge it.

vLLM 0.6.4.x charges the whole context to the budget (``NCCL_PLACEMENT``): its
``non_torch_memory`` is (total − free) − torch's allocated bytes after the profile run and
``empty_cache``. Published rows 101/102 (vllm-project/vllm#10517) print 0.35 GiB; memprof's
terms for it are the context, the sm86 profile-run modules and the allocator holes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import GiB, MiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.terms.non_torch import CONTEXT_REST_BYTES, card_first_kernel, cuda_context
from memprof.core.terms.published_context import PUBLISHED_CONTEXT_REST, published_context_rest

PUBLISHED = Path(__file__).parent / "data" / "published.json"
HOLES = 18_341_888  # the load's allocator holes after empty_cache (memprof's replay, row 101)
BAND = round(0.005 * GiB) + round(0.01 * GiB)  # the print's rounding + unmodelled module pages


def _row(row_id: int) -> dict[str, object]:
    rows = json.loads(PUBLISHED.read_text())
    rows = rows if isinstance(rows, list) else rows["rows"]
    (row,) = [r for r in rows if r["id"] == row_id]
    return dict(row)


def _rtx3090_v064(max_model_len: int) -> Deployment:
    return Deployment(engine_version="0.6.4.post1", max_model_len=max_model_len)


def _component(e: object, name: str) -> int:
    (c,) = [c for c in e.ranks[0].components if c.name == name]  # type: ignore[attr-defined]
    return int(c.bytes)


def test_the_sm86_remainder_by_hand() -> None:
    # non_torch_memory=0.35GiB less the profile-run modules (the 3090's cuBLAS pool step and
    # first kernel after it), the holes and the 3090's stack reservation (82 SMs × 1536 × 1 KiB)
    printed = round(0.35 * GiB)
    assert printed == 375_809_638
    modules = 12_582_912 + card_first_kernel(find_gpu("RTX-3090"), after_gemm=True)[0]
    assert modules == 56_623_104
    stack = 82 * 1536 * 1024
    assert stack == 128_974_848
    want = printed - modules - HOLES - stack
    assert want == 171_869_798  # 163.9 MiB, against the H100's 262.8 MiB
    reading = published_context_rest("sm86")
    assert reading is not None and reading.rest_bytes == want
    assert want < CONTEXT_REST_BYTES - 95 * MiB
    assert "vllm-project/vllm#10517" in reading.source


def test_the_holes_taken_off_are_memprofs_own_for_the_logged_deployment() -> None:
    e = estimate("llama-3.1-8b", _rtx3090_v064(20000), gpu_name="RTX-3090")
    assert _component(e, "allocator holes after empty_cache (charged as non-torch)") == HOLES


@pytest.mark.parametrize(("name", "sms"), [("RTX-3090", 82), ("A10G", 80)])
def test_every_sm86_card_takes_the_remainder_plus_its_own_stack(name: str, sms: int) -> None:
    got, how = cuda_context(find_gpu(name))
    assert got == 171_869_798 + sms * 1536 * 1024
    assert f"{sms} SMs × 1536 threads × 1 KiB" in how and "#10517" in how


@pytest.mark.parametrize("name", ["L4", "A100-80GB", "H100-PCIe"])
def test_other_architectures_keep_the_h100_remainder(name: str) -> None:
    gpu = find_gpu(name)
    assert gpu.arch not in PUBLISHED_CONTEXT_REST
    got, _ = cuda_context(gpu)
    assert gpu.sm_count is not None
    assert got - CONTEXT_REST_BYTES == gpu.sm_count * (2048 if gpu.arch != "sm89" else 1536) * 1024


def test_row_101_reprints_its_non_torch_and_its_initial_usage() -> None:
    """The reading is taken from ``non_torch_memory``; the same line's ``initial_memory_usage``
    (before the profile run: context + the load + its holes + the modules the load loaded, i.e.
    the profile-run modules less cuBLAS's 10 MiB pool that the profile's first GEMM makes) is a
    second figure it must agree with, within the band."""
    e = estimate("llama-3.1-8b", _rtx3090_v064(20000), gpu_name="RTX-3090",
                 gpu_memory_bytes=round(23.58 * GiB))
    context = _component(e, "CUDA context")
    modules = _component(e, "non-torch increase (profile run)")
    assert context == 171_869_798 + 128_974_848
    non_torch = context + modules + HOLES
    assert f"{non_torch / GiB:.2f}" == "0.35"
    initial = context + e.weights_bytes_max + HOLES + modules - 10 * MiB
    assert e.weights_bytes_max == 16_094_076_928  # 'Loading model weights took 14.9888 GB'
    assert abs(initial - 15.34 * GiB) <= BAND
    # with the H100's remainder the same line would print 0.45 and 15.43: outside the band
    h100 = CONTEXT_REST_BYTES + 128_974_848
    assert abs(h100 + e.weights_bytes_max + HOLES + modules - 10 * MiB - 15.34 * GiB) > BAND


@pytest.mark.parametrize(("row_id", "max_model_len", "key"), [
    (101, 20000, "num_gpu_blocks"), (102, 29000, "kv_tokens")])
def test_rows_101_102_kv_within_one_percent(row_id: int, max_model_len: int, key: str) -> None:
    obs = _row(row_id)["observed"]
    assert isinstance(obs, dict)
    e = estimate("llama-3.1-8b", _rtx3090_v064(max_model_len), gpu_name="RTX-3090",
                 gpu_memory_bytes=round(23.58 * GiB))
    got = e.ranks[0].kv.num_gpu_blocks * (16 if key == "kv_tokens" else 1)
    assert abs(got - obs[key]) / obs[key] < 0.01
