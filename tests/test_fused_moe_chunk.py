"""The fused MoE's token chunk by release (memprof/core/terms/activation.py FUSED_MOE_CHUNK): vLLM
0.12.0 – 0.17.x size the modular kernel's workspaces for min(M, VLLM_FUSED_MOE_CHUNK_SIZE =
16,384) rows; 0.18.0 removed the chunking (PR #34086: no such variable in 0.18.0 envs.py, and
fused_moe/modular_kernel.py allocates its buffers with M_chunk = M_full), so a profile batch above
16,384 tokens sizes them for the whole batch.

Hand count for Qwen3-30B-A3B (hidden 2048, top-8, moe_intermediate 768, bf16) at TP 1:
workspace13 [M, 8, max(768, 2048)] + workspace2 [M, 8, max(1536, 2048)], 2 B each = M · 65,536 B."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms.activation import fused_moe_chunk, fused_moe_rows
from memprof.core.versions import version_key

WORKSPACE = "fused-MoE workspace (WorkspaceManager)"


def _workspace(version: str, tokens: int) -> tuple[int, str]:
    e = estimate("qwen3-30b-a3b-instruct-2507",
                 Deployment(engine_version=version, max_num_batched_tokens=tokens,
                            max_model_len=32768), gpu_name="H200")
    c = next(c for c in e.ranks[0].components if c.name == WORKSPACE)
    return c.bytes, c.formula


@pytest.mark.parametrize(("version", "tokens", "rows"), [
    ("0.17.1", 32768, 16384),  # capped at the chunk
    ("0.17.1", 8192, 8192),  # below it: the batch
    ("0.18.0", 32768, 32768),  # not chunked: the whole batch
    ("0.20.0", 65536, 65536),
])
def test_workspace_rows_by_release(version: str, tokens: int, rows: int) -> None:
    bytes_, formula = _workspace(version, tokens)
    assert bytes_ == rows * 8 * 2048 * 2 * 2
    assert ("not chunked" in formula) == (version_key(version) >= (0, 18, 0))


def test_the_rule_rows() -> None:
    assert fused_moe_chunk("0.11.0") == 32768
    assert fused_moe_chunk("0.17.1") == 16384
    assert fused_moe_chunk("0.18.0") is None
    assert fused_moe_rows(50_000, "0.17.0") == 16384
    assert fused_moe_rows(50_000, "0.18.0") == 50_000
