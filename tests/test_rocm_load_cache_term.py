"""The cached blocks vLLM 0.17.1's ROCm weights figure counts after a block-fp8 MoE load
(``memprof/core/terms/rocm_load_cache.py``): the last FusedMoE layer's loaded w13 + w2 with the
AITER fused MoE (``VLLM_ROCM_USE_AITER=1``), the w13 bool mask of the e4m3fnuz conversion without
it on gfx942, nothing on CUDA, off gfx942 without AITER, or outside the releases read (0.17.1,
0.18.0).

Hand count for MiniMax-M2(.7) at TP2 (256 experts, hidden 3072, moe_intermediate 1536, so 768 a
rank): w13 [256, 2 × 768, 3072] and w2 [256, 3072, 768], fp8 (1 B an element).
"""

from __future__ import annotations

import pytest

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.rocm_load_cache import NAME
from memprof.probes.serve_command import parse_tokens

W13 = 256 * 2 * 768 * 3072  # 1,207,959,552 B = 1.125 GiB
W2 = 256 * 3072 * 768  # 603,979,776 B = 0.5625 GiB
BASE = dict(tp=2, engine_version="0.17.1", max_model_len=196608)


def _cached(gpu: str = "MI300X", **kw: object) -> int:
    e = estimate("minimax-m2.7", Deployment(**{**BASE, **kw}),  # type: ignore[arg-type]
                 gpu_name=gpu)
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def test_aiter_caches_the_last_layers_loaded_experts() -> None:
    assert W13 + W2 == 1_811_939_328
    assert _cached(vllm_rocm_use_aiter=1) == W13 + W2


def test_triton_on_gfx942_caches_the_w13_mask() -> None:
    assert _cached() == W13
    assert _cached(vllm_rocm_use_aiter=0) == W13


def test_no_cached_blocks_where_the_rule_does_not_hold() -> None:
    assert _cached(gpu="H100-80GB", vllm_rocm_use_aiter=1) == 0  # CUDA: max_memory_allocated
    assert _cached(gpu="MI355X") == 0  # gfx950: e4m3fn, no mask; no AITER, no shuffle
    assert _cached(gpu="MI355X", vllm_rocm_use_aiter=1) == W13 + W2
    assert _cached(engine_version="0.18.0", vllm_rocm_use_aiter=1) == W13 + W2  # same code
    for unread in ("0.15.1", "0.18.1"):
        assert _cached(engine_version=unread, vllm_rocm_use_aiter=1) == 0, unread


def test_it_comes_off_the_kv_budget() -> None:
    def blocks(**kw: object) -> int:
        e = estimate("minimax-m2.7", Deployment(**{**BASE, **kw}),  # type: ignore[arg-type]
                     gpu_name="MI300X")
        return min(r.kv.num_gpu_blocks for r in e.ranks)
    per_block = 16 * 126_976  # 62 layers × 4 KV heads × 128 × 2 × bf16 a token a rank
    on, off = blocks(vllm_rocm_use_aiter=1), blocks(vllm_rocm_use_aiter=0)
    assert off - on == pytest.approx(W2 / per_block, abs=1)


def test_the_env_var_is_read_from_a_pasted_command() -> None:
    cmd = parse_tokens(["VLLM_ROCM_USE_AITER=1", "vllm", "serve", "MiniMaxAI/MiniMax-M2"])
    assert cmd.settings["vllm_rocm_use_aiter"] == 1


def test_a_bad_value_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rc = run(["estimate", "--model", "minimax-m2.7", "--gpu", "MI300X", "-tp", "2",
              "--vllm-rocm-use-aiter", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and "error:" in err and "hint:" in err
