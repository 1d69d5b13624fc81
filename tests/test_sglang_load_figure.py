"""SGLang's load figure ("Load weight end. … mem usage", and the load its KV pool is sized after):
the drop in free memory across ``load_model`` — the segments the load's allocations hold and, at
TP1, the process's first kernel's non-torch memory — per release, against hand counts."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import SGLANG_LOAD_FIGURE, load_drop
from memprof.core.estimate import estimate, load_figure
from memprof.core.gpus import find_gpu
from memprof.core.terms.non_torch import first_kernel_in_load
from memprof.core.versions import value_at

# Llama-3.1-8B (configs/models/llama-3.1-8b.json): hidden 4096, intermediate 14336, vocab
# 128256, 32 layers, 32 query heads and 8 KV heads of 128, untied lm_head, bf16
H, INTER, V, LAYERS, KV = 4096, 14336, 128256, 32, 8 * 128
LAYER = (H * H + 2 * KV * H + H * H) + 3 * H * INTER + 2 * H  # q, k, v, o; gate, up, down; 2 norms
WEIGHTS = (2 * V * H + LAYERS * LAYER + H) * 2  # embed + lm_head, layers, final norm; 2 B each
# SGLang's get_rope cache, built on the device during the load and kept in fp32 on CUDA
# (RotaryEmbedding.__init__, sglang 0.4.3-0.5.9): 131,072 positions × 128 × 4 B, on every rank
ROPE = 131_072 * 128 * 4
# at TP2 every matrix is halved, the norms (2 a layer and the final one) are replicated
NORMS = LAYERS * 2 * H + H
WEIGHTS_TP2 = ((2 * V * H + LAYERS * LAYER + H - NORMS) // 2 + NORMS) * 2
# the allocator's segments beyond the load's tensors, which the free-memory drop holds whole
# (memprof/core/terms/load_segments.py). TP1: every large shard is a whole multiple of 2 MiB
# (qkv 48 MiB, o 32, gate_up 224, down 112, embed 1002) and the RoPE temporaries (freqs, cos, sin:
# 131,072 × 64 × 4 B = 32 MiB each) are taken whole by the next three o_proj; what stays is the
# small pool's one 2 MiB segment with the 65 norm vectors of 8 KiB in it
SEGMENTS_TP1 = 2 * 2**20 - 65 * H * 2
# TP2: embed and lm_head 64,128 × 4096 × 2 B = 501 MiB in 502 MiB segments, and two of the freed
# 32 MiB RoPE blocks split by the next layers' qkv (24 MiB) leave 8 MiB each inside segments
# that hold a tensor
SEGMENTS_TP2 = SEGMENTS_TP1 + 2 * 2**20 + 2 * 8 * 2**20
FIRST_KERNEL = 96_468_992  # reports/gpu/nccl/README.md, the 2-rank matrix's context step
CONTEXT = 552_402_944  # memprof.core.terms.non_torch.CUDA_CONTEXT_BYTES (H100 measured)
H100 = 85_017_493_504  # configs/gpus.json
RELEASES = ("0.4.3", "0.4.4", "0.4.8", "0.5.3", "0.5.9")


def _sglang(version: str, tp: int = 1, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, tp=tp, **kw)  # type: ignore[arg-type]


def test_hand_count_of_the_weights() -> None:
    assert WEIGHTS == 16_060_522_496
    e = estimate("llama-3.1-8b", _sglang("0.4.4"), gpu_name="H100")
    assert e.ranks[0].weights_bytes == WEIGHTS + ROPE + SEGMENTS_TP1


# the releases where nothing runs a kernel before the load at TP1 (0.4.7 - 0.4.9 and from 0.5.8
# something does: SGLANG_FIRST_KERNEL_BEFORE_LOAD, tests/test_sglang_first_kernel_before_load.py)
@pytest.mark.parametrize("version", ("0.4.3", "0.4.4", "0.5.3"))
def test_tp1_load_holds_the_first_kernel(version: str) -> None:
    """No NCCL communicator at TP1: the load runs the process's first kernel."""
    e = estimate("llama-3.1-8b", _sglang(version), gpu_name="H100")
    assert load_figure(e, e.ranks[0]) == WEIGHTS + ROPE + SEGMENTS_TP1 + FIRST_KERNEL


@pytest.mark.parametrize("version", RELEASES)
def test_tp2_load_is_the_weights(version: str) -> None:
    """PyNccl's warm-up (torch.zeros) ran the first kernel before the load at TP2."""
    e = estimate("llama-3.1-8b", _sglang(version, tp=2), gpu_name="H100")
    assert WEIGHTS_TP2 == 8_030_527_488
    assert SEGMENTS_TP2 == 20_439_040
    assert all(load_figure(e, r) == WEIGHTS_TP2 + ROPE + SEGMENTS_TP2 for r in e.ranks)


def test_pool_subtracts_the_free_memory_drop() -> None:
    """0.4.4, TP1, H100: KV = 0.88 × (total − context) − (weights + RoPE cache + the load's
    segments + first kernel);
    one token is 8 KV heads × 128 × 32 layers × (K, V) × 2 B = 131,072 B."""
    e = estimate("llama-3.1-8b", _sglang("0.4.4"), gpu_name="H100")
    assert e.mem_fraction_static == 0.88
    kv = int(0.88 * (H100 - CONTEXT)) - (WEIGHTS + ROPE + SEGMENTS_TP1 + FIRST_KERNEL)
    assert e.ranks[0].available_kv_bytes == kv
    assert e.kv_cache_tokens == kv // 131_072 == 443_295


def test_the_vllm_load_is_its_allocations() -> None:
    """vLLM's "Model loading took" is torch memory: no first kernel in it, even at TP1."""
    e = estimate("llama-3.1-8b", Deployment(tp=1), gpu_name="H100")
    r = e.ranks[0]
    assert first_kernel_in_load(e.deployment, e.gpu) == FIRST_KERNEL
    assert load_figure(e, r) == sum(c.bytes for c in r.components
                                    if c.where == "budget" and c.category in ("weights",
                                                                              "scratch"))


def test_first_kernel_in_load_by_layout() -> None:
    assert first_kernel_in_load(_sglang("0.4.4"), find_gpu("H100")) == FIRST_KERNEL
    assert first_kernel_in_load(_sglang("0.4.4", tp=2), find_gpu("H100")) == 0
    assert load_drop(1000, 24) == 1024


def test_the_line_per_release() -> None:
    assert "no mem usage" in str(value_at(SGLANG_LOAD_FIGURE, "0.4.3", None, engine="sglang"))
    for v in ("0.4.4", "0.4.8", "0.5.9"):
        assert "free before" in str(value_at(SGLANG_LOAD_FIGURE, v, None, engine="sglang"))


def test_the_budget_line_says_what_the_load_holds() -> None:
    from memprof.report.estimate_rows import budget_lines

    e = estimate("llama-3.1-8b", _sglang("0.4.4"), gpu_name="H100")
    line = budget_lines(e, e.ranks[0])[0]
    assert "the first kernel's non-torch 92.00 MiB" in line
    e2 = estimate("llama-3.1-8b", _sglang("0.4.4", tp=2), gpu_name="H100")
    assert "first kernel" not in budget_lines(e2, e2.ranks[0])[0]
