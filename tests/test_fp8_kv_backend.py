"""The attention backend vLLM runs for an fp8 KV cache where FlashAttention 2 would run
(``memprof.core.attention_backends.FP8_KV_GQA_BACKEND``): FlashAttention reads fp8 only as FA3 on
compute capability 9.0, so vLLM 0.11.0 runs Triton attention and 0.11.1 on FlashInfer on
Ampere / Ada / consumer Blackwell (platforms/cuda.py ``get_attn_backend_cls`` and
``_get_backend_priorities``, v1/attention/backends/flash_attn.py ``supports_kv_cache_dtype``);
from 0.22.0 FA3 reads fp8 / fp8_e4m3 only, so fp8_e5m2 runs FlashInfer on 9.0 too
(``FA3_FP8_KV_DTYPES``).
The estimate, the KV plan and the logged graph figure read the same selection; FlashInfer's
394 MiB float workspace (envs.py ``VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE``) is charged outside
the budget, as its first metadata build comes after the KV cache is sized."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import MiB
from memprof.core.attention_backends import BY_NAME, chosen, fp8_kv_fallback, fp8_kv_refusal
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.gpus import find_gpu
from memprof.core.kv_dtypes import GQA, MLA
from memprof.core.models import load_model
from memprof.core.scratch.backends import resolve_backend
from memprof.core.terms.attn_capture import full_graph_backend

WORKSPACE = "FlashInfer workspace (workspace)"


def _est(gpu: str = "A100-80GB", kv: str = "fp8", version: str = "0.24.0",
         **kw: object) -> Estimate:
    return estimate("llama-3.1-8b", Deployment(engine_version=version, max_model_len=4096,
                                               kv_cache_dtype=kv, **kw),  # type: ignore[arg-type]
                    gpu_name=gpu)


def _backend(gpu: str, kv: str, version: str | None) -> str:
    spec = load_model("llama-3.1-8b")
    return resolve_backend(spec, find_gpu(gpu),
                           Deployment(engine_version=version, kv_cache_dtype=kv))


@pytest.mark.parametrize(("gpu", "kv", "version", "backend"), [
    ("A100-80GB", "fp8", "0.24.0", "flashinfer"),  # row 1208's log: FLASHINFER
    ("A100-80GB", "fp8_e4m3", "0.13.0", "flashinfer"),
    ("A100-80GB", "fp8_e5m2", "0.11.1", "flashinfer"),  # the priority list's first release
    ("A100-80GB", "fp8", "0.11.0", "triton_attn"),  # "(has_sink or use_fp8_kv_cache)" → Triton
    ("A100-80GB", "fp8", "0.10.2", "flash_attn"),  # before 0.11.0: no rule (not read)
    ("A100-80GB", "auto", "0.24.0", "flash_attn"),
    ("A100-80GB", "bfloat16", None, "flash_attn"),
    ("A10", "fp8", None, "flashinfer"),  # sm86, the newest release modelled
    ("L40S", "fp8", "0.28.0", "flashinfer"),  # sm89
    ("RTX-5090", "fp8", "0.20.0", "flashinfer"),  # sm120: FlashInfer runs 7.5-12.1 there
    ("H100", "fp8", "0.24.0", "flash_attn"),  # FA3 on 9.0 reads fp8
    ("H100", "fp8_e4m3", None, "flash_attn"),
    ("H100", "fp8_e5m2", "0.21.0", "flash_attn"),  # every quantised dtype to FA3
    ("H100", "fp8_e5m2", "0.22.0", "flashinfer"),  # from 0.22.0 FA3 reads fp8 / fp8_e4m3 only
    ("H200", "fp8_e5m2", None, "flashinfer"),
    ("B200", "fp8", "0.24.0", "flashinfer"),  # the 10.x default, whatever the KV dtype
    ("MI300X", "fp8", "0.24.0", "triton_attn"),  # ROCm: its own default
])
def test_the_backend_vllm_runs(gpu: str, kv: str, version: str | None, backend: str) -> None:
    assert _backend(gpu, kv, version) == backend


def test_below_sm80_and_unknown_keep_the_default() -> None:
    # neither is read: the fallback names nothing, so the row default stands
    for arch in ("sm75", "unknown", "sm100"):
        assert fp8_kv_fallback(GQA, arch, False, "fp8", "0.24.0") is None
    assert fp8_kv_fallback(MLA, "sm80", False, "fp8", "0.24.0") is None


def test_one_selection_for_the_estimate_and_the_graph_figure() -> None:
    for gpu in ("A100-80GB", "L40S", "H100"):
        for kv in ("fp8", "auto"):
            for version in ("0.11.0", "0.24.0", "0.28.0"):
                e = _est(gpu=gpu, kv=kv, version=version)
                ctx = rank_context(e, e.ranks[0])
                assert full_graph_backend(ctx) == _backend(gpu, kv, version)
                assert chosen(GQA, ctx.gpu.arch, False, kv, None, version) is BY_NAME[
                    _backend(gpu, kv, version)]


def test_flashinfer_workspace_is_charged_outside_the_budget() -> None:
    # hand count: one 394 MiB uint8 buffer (VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE), made by the
    # FlashInfer warm-up after the KV cache is sized: "runtime", not profiled
    e = _est()
    ws = [c for c in e.ranks[0].components if c.name == WORKSPACE]
    assert len(ws) == 1
    assert ws[0].bytes == 394 * MiB
    assert not ws[0].profiled and not ws[0].in_budget
    assert not any(c.name == WORKSPACE for c in _est(kv="auto").ranks[0].components)
    assert not any(c.name == WORKSPACE for c in _est(version="0.11.0").ranks[0].components)


def test_the_default_is_what_asking_for_flashinfer_gives() -> None:
    default = _est()
    asked = _est(attention_backend="flashinfer")
    assert [(c.name, c.bytes, c.where) for c in default.ranks[0].components] == \
        [(c.name, c.bytes, c.where) for c in asked.ranks[0].components]
    assert default.ranks[0].plan.block_size == asked.ranks[0].plan.block_size == 16


def test_asking_for_flash_attention_with_fp8_off_sm90_is_refused() -> None:
    with pytest.raises(BadInput, match="fp8 KV cache only on sm90"):
        _est(attention_backend="flash_attn")
    # FA3 on the H100 reads it; auto KV on the A100 is FlashAttention 2's
    assert _est(gpu="H100", attention_backend="flash_attn").verdict
    assert _est(kv="auto", attention_backend="flash_attn").verdict
    row = BY_NAME["flash_attn"]
    assert fp8_kv_refusal(row, "A100", "sm80", False, "fp8", "0.10.2") is None  # not read
    assert "fp8_e5m2" in str(fp8_kv_refusal(row, "H100", "sm90", False, "fp8_e5m2", "0.24.0"))
    assert fp8_kv_refusal(row, "H100", "sm90", False, "fp8_e5m2", "0.20.0") is None
    assert fp8_kv_refusal(BY_NAME["flashinfer"], "A100", "sm80", False, "fp8", None) is None
