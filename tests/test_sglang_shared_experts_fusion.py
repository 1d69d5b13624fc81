"""SGLang 0.4.6's shared-experts fusion (``SGLANG_SHARED_EXPERTS_FUSION`` in
``memprof/core/weights/mlp.py``): DeepSeek-V3/R1's shared expert appended to the 256 routed
experts as tp_size copies, each sharded like a routed expert, the separate MLP not built —
against a hand count of the bytes it moves."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.load_segments import NAME as SEGMENTS


def _weights(model: str, version: str, gpu: str = "H200", engine: str = "sglang") -> int:
    """Rank 0's weights, less the allocator's segments beyond them
    (``memprof/core/terms/load_segments.py``: their rounding differs with the tensors held)."""
    e = estimate(model, Deployment(engine=engine, engine_version=version, tp=8), gpu_name=gpu)
    r = e.ranks[0]
    return r.weights_bytes - sum(c.bytes for c in r.components if c.name == SEGMENTS)


def test_tp_copies_at_0_4_6_on_hopper() -> None:
    """DeepSeek-R1 (fp8 block 128×128, hidden 7168, moe_intermediate 2048, 58 MoE layers) at TP8:
    each MoE layer gains 8 copies of a 256-row expert slice (w13 2·256×7168 + w2 7168×256 fp8,
    block scales w13 2·2×56 + w2 56×2 fp32) and loses the TP-sharded shared expert
    (gate_up 512×7168 + down 7168×256 fp8, scales (4×56) + (56×2) fp32)."""
    expert_slice = 2 * 256 * 7168 + 7168 * 256 + 4 * (2 * 2 * 56 + 56 * 2)
    shared_slice = 512 * 7168 + 7168 * 256 + 4 * (4 * 56 + 56 * 2)
    want = 58 * (8 * expert_slice - shared_slice)
    assert _weights("deepseek-r1", "0.4.6") - _weights("deepseek-r1", "0.4.5") == want
    # 0.4.7 fuses one copy (the shared expert's own bytes): as 0.4.5
    assert _weights("deepseek-r1", "0.4.7") == _weights("deepseek-r1", "0.4.5")


def test_no_fusion_below_capability_9_or_off_deepseek_v3() -> None:
    assert _weights("deepseek-r1", "0.4.6", gpu="A100-80GB") == _weights(
        "deepseek-r1", "0.4.5", gpu="A100-80GB")
    # ROCm reports gfx942 as capability (9, 4): fused there too
    assert _weights("deepseek-r1", "0.4.6", gpu="MI300X") > _weights(
        "deepseek-r1", "0.4.5", gpu="MI300X")
    # Kimi-K2 is DeepseekV3ForCausalLM with 384 routed experts: SGLang does not fuse it
    assert _weights("kimi-k2", "0.4.6") == _weights("kimi-k2", "0.4.5")

