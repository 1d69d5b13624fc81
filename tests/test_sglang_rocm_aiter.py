"""SGLang on ROCm from 0.4.7: with the aiter attention backend (its default on HIP for MHA/GQA
models, and for MLA models at 16 or 128 KV heads per TP rank) and a context longer than 8,192
tokens the server multiplies mem_fraction_static by 0.85 (``SGLANG_ROCM_AITER_MFS``,
``memprof/core/engines/sglang.py``), against SGLang's own formula and the profiled token count
of sgl-project/sglang issue #7691."""

from __future__ import annotations

import pytest

from memprof.core.attention import kind_of
from memprof.core.deployment import Deployment
from memprof.core.engines.base import AttentionFacts
from memprof.core.engines.sglang import ENGINE, SGLANG_ROCM_AITER_MFS, sglang_defaults
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model
from memprof.core.versions import value_at


def mfs(model: str, gpu_name: str, version: str, **kw: object) -> tuple[float, float]:
    """(mem_fraction_static the budget reads, the heuristic's before any factor)."""
    gpu = find_gpu(gpu_name)
    dep = Deployment(engine="sglang", engine_version=version, **kw)  # type: ignore[arg-type]
    a = load_model(model).layers[0].attention
    facts = AttentionFacts(a.num_heads, kind_of(a).hip_aiter_heads)
    return ENGINE.mem_fraction(dep, gpu, facts), sglang_defaults(gpu, dep)[2]


def test_rows() -> None:
    assert value_at(SGLANG_ROCM_AITER_MFS, "0.4.6", None, engine="sglang") == 1.0
    for v in ("0.4.7", "0.4.8.post1", "0.5.9", "main@d315eb7"):
        assert value_at(SGLANG_ROCM_AITER_MFS, v, None, engine="sglang") == 0.85


@pytest.mark.parametrize(("model", "version", "kw", "factor"), [
    # GQA on ROCm, context above 8,192: aiter, × 0.85 from 0.4.7
    ("qwen3-32b", "0.4.8", {"max_model_len": 40960}, 0.85),
    ("qwen3-32b", "0.5.9", {"max_model_len": 40960, "tp": 2}, 0.85),
    ("qwen3-32b", "0.4.6", {"max_model_len": 40960}, 1.0),  # before the rule
    ("qwen3-32b", "0.4.8", {"max_model_len": 8192}, 1.0),  # not longer than 8,192
    # MLA: 128 heads / tp 8 = 16 → aiter; / tp 4 = 32 → triton
    ("deepseek-r1", "0.4.8.post1", {"max_model_len": 163840, "tp": 8}, 0.85),
    ("deepseek-r1", "0.4.8.post1", {"max_model_len": 163840, "tp": 4}, 1.0),
])
def test_factor_on_rocm(model: str, version: str, kw: dict[str, object], factor: float) -> None:
    got, heuristic = mfs(model, "MI300X", version, **kw)
    assert got == pytest.approx(heuristic * factor)


def test_given_fraction_is_reduced_too_and_cuda_is_not() -> None:
    got, _ = mfs("qwen3-32b", "MI300X", "0.4.8", max_model_len=40960, mem_fraction_static=0.9)
    assert got == pytest.approx(0.9 * 0.85)
    got, heuristic = mfs("qwen3-32b", "H200", "0.4.8", max_model_len=40960)
    assert got == heuristic


def test_issue_7691_profiled_tokens() -> None:
    # 0.4.8 ModelRunner.profile_max_num_token: rest = free after load − free before load ×
    # (1 − mem_fraction_static); tokens = rest / cell, cell = (512 + 64) × 61 layers × 2 B
    # (MLA, bf16) = 70,272 B. The log: free after load 21.73 GiB, load 166.59 GiB (free before
    # = 188.32 GiB), "the profiled value -561981". The heuristic at 0.4.8 on MI300X with DP
    # attention is round((total − 36 GiB) / total, 3) = 0.812; × 0.85 (aiter, context 163,840).
    got, heuristic = mfs("deepseek-r1", "MI300X", "0.4.8.post1", max_model_len=163840, tp=8,
                         dp=8, enable_dp_attention=True, enable_expert_parallel=True)
    assert heuristic == 0.812 and got == pytest.approx(0.812 * 0.85)
    rest = 21.73 - 188.32 * (1 - got)
    tokens = rest * 2**30 / 70272
    assert tokens == pytest.approx(-561981, rel=0.01)
    # without the factor SGLang's formula would have profiled -208,9xx: the log rules it out
    assert (21.73 - 188.32 * (1 - heuristic)) * 2**30 / 70272 > -300000
