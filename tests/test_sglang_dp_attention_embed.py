"""SGLang's ``embed_tokens`` under DP attention (the families' ``dp_attention_embed`` rows, read by
memprof/core/weights/rank.py): DeepSeek's models/deepseek_v2.py holds the whole table on every rank
(``VocabParallelEmbedding(..., enable_tp=not enable_dp_attention)``) through 0.5.7 except 0.4.9
(``use_attn_tp_group=True``), split over the attention-TP group (tp / dp ways) from 0.5.8; Qwen's
models/qwen2_moe.py whole from 0.4.7, attention-TP from 0.5.9; split over all TP ranks everywhere
else. Hand counts from the configs: DeepSeek-V3 vocab_size 129280 (a multiple of 64: no padding),
hidden_size 7168; Qwen3-235B-A22B 151936 x 4096; bf16."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.models.families import family_row
from memprof.core.version_diff import all_rules
from memprof.core.versions import rule_in_force
from memprof.core.weights import rank_weights

TABLE = 129280 * 7168 * 2  # 1,853,358,080 B: the whole embed_tokens of DeepSeek-V3


def _embed(model: str, dep: Deployment, rank: int = 0) -> tuple[int, int]:
    """(bytes of embed_tokens on ``rank``, bytes of lm_head there)."""
    spec = load_model(model)
    ts = rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90")
    by = {t.group: t.bytes for t in ts if t.group in ("embed_tokens", "lm_head")}
    return by["embed_tokens"], by["lm_head"]


@pytest.mark.parametrize("version", ["0.4.3", "0.4.8.post1", "0.5.3", "0.5.4", "0.5.7"])
def test_replicated_under_dp_attention_up_to_057(version: str) -> None:
    dep = Deployment(engine="sglang", engine_version=version, tp=8, dp=8,
                     enable_dp_attention=True)
    embed, head = _embed("deepseek-v3", dep)
    assert embed == TABLE == 1_853_358_080
    assert head == TABLE // 8  # lm_head stays split over the 8 TP ranks (enable_dp_lm_head off)


def test_replicated_whatever_the_attention_group_before_058() -> None:
    # tp 8, dp 2: attention TP 4, but enable_tp=False keeps the whole table
    dep = Deployment(engine="sglang", engine_version="0.5.7", tp=8, dp=2,
                     enable_dp_attention=True)
    assert _embed("deepseek-v3", dep, rank=5)[0] == TABLE


@pytest.mark.parametrize("rank", [0, 3, 4, 7])
def test_attention_tp_split_from_058(rank: int) -> None:
    dep = Deployment(engine="sglang", engine_version="0.5.9", tp=8, dp=2,
                     enable_dp_attention=True)
    assert dep.attn_tp == 4
    # 129280 / 4 = 32320 rows each, none of them padding (no rank past the vocabulary)
    assert _embed("deepseek-v3", dep, rank=rank)[0] == 32320 * 7168 * 2 == 463_339_520
    # where dp = tp the attention group is one rank: the whole table again
    full = Deployment(engine="sglang", engine_version="0.5.9", tp=8, dp=8,
                      enable_dp_attention=True)
    assert _embed("deepseek-v3", full)[0] == TABLE


@pytest.mark.parametrize("dep", [
    Deployment(engine="sglang", engine_version="0.5.4", tp=8),  # no DP attention
    Deployment(engine="vllm", tp=8, dp=2, enable_expert_parallel=True),  # whole-engine DP
])
def test_split_over_tp_without_sglang_dp_attention(dep: Deployment) -> None:
    assert _embed("deepseek-v3", dep)[0] == TABLE // 8 == 231_669_760


def test_the_nsa_family_shares_the_model_file() -> None:
    # DeepSeek-V3.2 (DeepseekV32ForCausalLM) is built by the same models/deepseek_v2.py
    dep = Deployment(engine="sglang", engine_version="0.5.4", tp=8, dp=8,
                     enable_dp_attention=True)
    assert _embed("deepseek-v3.2", dep)[0] == TABLE


def test_rows_are_listed_and_hold_for_sglang_only() -> None:
    rows = family_row("deepseek_v3").dp_attention_embed
    assert rows and all(r in all_rules() for r in rows)
    assert rule_in_force(rows, "0.5.7", "sglang").value == "replicated"
    assert rule_in_force(rows, "0.4.9", "sglang").value == "attention_tp"
    assert rule_in_force(rows, "0.5.8", "sglang").value == "attention_tp"
    assert rule_in_force(rows, "0.10.1", "vllm") is None


def test_0_4_9_split_over_the_attention_group() -> None:
    # 0.4.9 models/deepseek_v2.py: VocabParallelEmbedding(..., use_attn_tp_group=True)
    dep = Deployment(engine="sglang", engine_version="0.4.9", tp=8, dp=2,
                     enable_dp_attention=True)
    assert _embed("deepseek-v3", dep)[0] == 32320 * 7168 * 2


QWEN_TABLE = 151936 * 4096 * 2  # Qwen3-235B-A22B's embed_tokens: 1,244,659,712 B


@pytest.mark.parametrize(("version", "ways"), [("0.4.6", 8), ("0.4.7", 1), ("0.5.8", 1),
                                               ("0.5.9", 4)])
def test_qwen_moe_file(version: str, ways: int) -> None:
    # qwen2_moe.py (Qwen3MoeModel extends Qwen2MoeModel): split over TP through 0.4.6, whole
    # from 0.4.7, over the attention group (8 / 2 = 4) from 0.5.9
    dep = Deployment(engine="sglang", engine_version=version, tp=8, dp=2,
                     enable_dp_attention=True)
    assert _embed("qwen3-235b-a22b", dep)[0] == QWEN_TABLE // ways
