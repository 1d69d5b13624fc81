"""The model runner's persistent buffers that vLLM V1 0.8.0 – 0.9.0.x charges through its
absolute torch peak, and 0.27.0 on through ``total_consumed`` from the init snapshot
(memprof/core/terms/runner_buffers.py ``RUNNER_BUFFERS_CHARGED``), against hand counts of
``GPUModelRunner.__init__`` / ``InputBatch`` / ``BlockTable`` (and Model Runner V2's
``InputBuffers`` / ``RequestState``) at those releases."""

from __future__ import annotations

from typing import Any

import pytest
from test_published_distribution import ROWS, _row_estimate

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.terms import registry
from memprof.core.terms.runner_buffers import (
    NAME,
    RUNNER_BUFFERS_CHARGED,
    block_table_width,
    runner_buffer_terms,
    v1_runner_parts,
)
from memprof.core.versions import rule_in_force

H = 4096  # Llama-3.1-8B hidden size


def _buffers(version: str, model: str = "llama-3.1-8b", **kw: object) -> int | None:
    kw.setdefault("max_model_len", 131072 if model == "llama-3.1-8b" else 32768)
    dep = Deployment(engine_version=version, max_num_seqs=1024, max_num_batched_tokens=2048,
                     **kw)  # type: ignore[arg-type]
    (rank,) = estimate(model, dep, gpu_name="H100").ranks
    got = [c for c in rank.components if c.name == NAME]
    assert all(c.where == "budget" and c.profiled for c in got)
    return got[0].bytes if got else None


def test_08_by_hand() -> None:
    """N = 2048 tokens, R = 1024 rows, B = 131072 / 16 = 8192 blocks a request: input_ids 8 KiB,
    positions 16 KiB, inputs_embeds [2048, 4096] bf16 16 MiB, block_table int32 [1024, 8192]
    32 MiB, seven [1024] sampling vectors of 4 B: 48.05 MiB (row 951's deployment shape)."""
    want = 2048 * 4 + 2048 * 8 + 2048 * H * 2 + 1024 * 8192 * 4 + 7 * 1024 * 4
    assert want == 50_384_896
    for version in ("0.8.0", "0.8.2", "0.8.5.post1"):
        assert _buffers(version) == want, version


def test_090_adds_the_runners_metadata_buffers() -> None:
    """0.9.0: query_start_loc int32 [R + 1] (4,100 B, rounded to 4,608), seq_lens int32 [R],
    the runner's and the block table's slot_mapping int64 [N]."""
    base = 50_384_896
    assert _buffers("0.9.0") == base + 4608 + 1024 * 4 + 2 * 2048 * 8


def test_gone_from_091_to_026_and_under_v0() -> None:
    """0.9.1 – 0.26.x charge the torch peak's increase and the non-torch increase: the buffers
    drop out; V0's runner (0.7.3, or 0.8.2 with --vllm-use-v1 0) is not this code."""
    for version in ("0.9.1", "0.10.1.1", "0.11.0", "0.17.1", "0.20.0", "0.24.0", "0.26.0"):
        assert _buffers(version) is None, version
        assert _buffers(version, "qwen3-30b-a3b") is None, version
    assert _buffers("0.7.3") is None
    assert _buffers("0.8.2", vllm_use_v1=0) is None
    assert rule_in_force(RUNNER_BUFFERS_CHARGED, "0.9.1", "vllm") is None


def test_the_buffers_take_kv_memory_at_0_8() -> None:
    """Inside the budget, so the KV memory drops by the buffers (the block count rounds)."""
    dep = Deployment(engine_version="0.8.2", max_num_seqs=1024, max_num_batched_tokens=2048,
                     max_model_len=131072)
    (rank,) = estimate("llama-3.1-8b", dep, gpu_name="A100-40GB").ranks
    comps = {c.name: c.bytes for c in rank.components}
    assert comps[NAME] == 50_384_896
    assert sum(c.bytes for c in rank.components if c.category == "activation"
               and c.where == "budget") >= comps[NAME] + comps["activation peak (profile run)"]


# N = 2048, R = 1024 (``_buffers``); a 512 B block is the least any tensor takes.
N, R = 2048, 1024


def test_027_v1_by_hand() -> None:
    """0.27.1's V1 runner (Qwen3-30B-A3B: MoE, so V1 at 0.25.0 – 0.28.x; H = 2048, bf16), no
    --block-size, max_model_len 32,768: the constructor's table is sized at block size 16,
    W = 2048 (a multiple of 8).
    input_ids 8 KiB, positions 16 KiB, query_start_loc [1025] int32 4,608 B, req_indices 16 KiB,
    prev_positions 8 KiB, inputs_embeds [2048, 2048] bf16 8 MiB, is_token_ids 2 KiB,
    discard_request_mask 1 KiB, query_pos [2048] int64 16 KiB (max(R + 1, N) = 2048), seven
    int32 [R] 4 KiB each, seven [R] sampling vectors 4 KiB each (min_p among them), the min-tokens
    scalar 512 B, block_table [1024, 2048] int32 8 MiB, its slot_mapping 16 KiB."""
    want = (8192 + 16384 + 4608 + 16384 + 8192 + N * 2048 * 2 + 2048 + 1024 + 16384
            + 7 * 4096 + 7 * 4096 + 512 + R * 2048 * 4 + 16384)
    assert want == 16_924_672
    for version in ("0.27.0", "0.27.1", "0.28.0"):
        assert _buffers(version, "qwen3-30b-a3b") == want, version
    # --block-size 32: W = cdiv(32768, 32) = 1024, already a multiple of 128 / 32 = 4
    assert _buffers("0.27.1", "qwen3-30b-a3b", block_size=32) == want - R * 1024 * 4


def test_031_v1_adds_is_padding() -> None:
    """0.31.0's V1 runner adds ``is_padding`` bool [N] (2 KiB); memprof runs every model on V2
    from 0.29.0, so the list is checked as read, not through an estimate."""
    rule = {r.since: r for r in RUNNER_BUFFERS_CHARGED}
    args = (N, R, 2048 * 2, 8192)
    early = dict(v1_runner_parts(rule["0.27.0"], *args))
    late = dict(v1_runner_parts(rule["0.31.0"], *args))
    assert set(late) - set(early) == {"is_padding bool [N]"}
    assert late["is_padding bool [N]"] == N


def test_027_v2_by_hand() -> None:
    """Model Runner V2 (Llama-3.1-8B: V2 from 0.25.0): input_ids 8 KiB, positions 16 KiB,
    is_padding 2 KiB, query_start_loc 4,608 B, last_sampled_tokens [R, 1] int64 8 KiB,
    next_prefill_tokens [1, R] int32 4 KiB, seq_lens / dcp_local_seq_lens / total_len /
    num_computed_tokens int32 [R] 4 KiB each; no inputs_embeds, no block table (built with the
    KV cache), draft_tokens [R, 0] allocates nothing. The same list at 0.27.0 – 0.33.0."""
    want = 8192 + 16384 + 2048 + 4608 + 8192 + 4096 + 4 * 4096
    assert want == 59_904
    for version in ("0.27.0", "0.27.1", "0.28.0", "0.30.0", "0.31.0", "0.33.0"):
        assert _buffers(version) == want, version
    assert _buffers("0.26.0") is None


def test_block_table_width_rounds_to_128_tokens() -> None:
    """``get_block_table_width``: cdiv(L, b) rounded up to a multiple of 128 / gcd(128, b)."""
    assert block_table_width(1000, 16) == 64  # 63 blocks -> 8-block multiple
    assert block_table_width(262144, 544) == 484  # 482 -> multiple of 4
    assert block_table_width(4096, 256) == 16  # 128 / 128 = 1: no rounding


def _row(row_id: int) -> dict[str, Any]:
    return next(r for r in ROWS if r["id"] == row_id)


@pytest.mark.parametrize("row_id", [906, 1705])
def test_published_row_moves_by_exactly_the_buffers(row_id: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows 906 (0.27.1, Qwen3-235B-A22B FP8, V1) and 1705 (0.28.0, Qwen3.5-27B, V1): the KV
    budget a rank is left is what it is without the term, less the buffers to the byte."""
    row = _row(row_id)
    with_term, _ = _row_estimate(row)
    monkeypatch.setattr(registry, "BUDGET_TERMS",
                        [t for t in registry.BUDGET_TERMS if t is not runner_buffer_terms])
    without, _ = _row_estimate(row)
    for a, b in zip(with_term.ranks, without.ranks, strict=True):
        (c,) = [c for c in a.components if c.name == NAME]
        assert c.bytes > 32 * 2**20  # inputs_embeds [8192, H] alone is 64 MiB or more
        assert b.available_kv_bytes - a.available_kv_bytes == c.bytes
