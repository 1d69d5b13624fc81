"""Popular checkpoints bundled from their own HF ``config.json`` quotations (sources: each
config's ``_source``): Qwen/Qwen3-Coder-30B-A3B-Instruct, Qwen/Qwen3-235B-A22B-Instruct-2507,
meta-llama/Llama-3.3-70B-Instruct, Qwen/QwQ-32B and Qwen/Qwen2.5-72B-Instruct, so that a log or
command naming one runs on the checkpoint instead of being refused ('not a bundled model') or
run on a stand-in with ``hf_overrides``.

For each, three numbers are held equal: the parameters counted by hand from the bundled config
(bf16: two bytes each), the checkpoint's count as published, and memprof's rank-0 weight tensors
at TP1. The published counts: Qwen3-Coder-30B-A3B-Instruct's safetensors index ``total_size``
61,064,245,248 B (the index vendored beside the config in ztxz16/fastllm); Qwen3-235B-A22B-
Instruct-2507's 235,093,634,560 parameters (a public model census listing the checkpoint; the
Hub's safetensors total); Llama-3.3-70B-Instruct's 70,553,706,496 parameters (a public script
pinning the checkpoint at revision 6f6073b4 and a catalog test of the Hub's figure); QwQ-32B's
32,763,876,352 parameters in 771 tensors and Qwen2.5-72B-Instruct's 72,706,203,648 in 963 (the
tensor statistics of the same public model reports that quote their config.json). The rows
that run them (2456, 701, 1201) give the same figures as on their former stand-ins.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.cli import run
from memprof.core.models import load_model
from memprof.core.models.load import hf_ids
from tests.test_popular_checkpoint_weights import _llama_params, _qwen3_moe_params
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate


def _qwen2_params(c: dict[str, Any]) -> tuple[int, int]:
    """(parameters, tensors) of Qwen2ForCausalLM by hand: q/k/v with biases, o_proj without, a
    SwiGLU MLP, two RMSNorms a layer, the final norm, the embedding and an untied lm_head."""
    assert not c["tie_word_embeddings"]
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = h // heads
    layer = (h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd) + heads * hd * h
             + 3 * c["intermediate_size"] * h + 2 * h)
    params = c["num_hidden_layers"] * layer + 2 * c["vocab_size"] * h + h
    return params, c["num_hidden_layers"] * 12 + 3


# (bundled name, HF id, hand count, published bf16 bytes of the checkpoint)
CHECKPOINTS = [
    ("qwen3-coder-30b-a3b-instruct", "Qwen/Qwen3-Coder-30B-A3B-Instruct", _qwen3_moe_params,
     61_064_245_248),
    ("qwen3-235b-a22b-instruct-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507", _qwen3_moe_params,
     2 * 235_093_634_560),
    ("llama-3.3-70b-instruct", "meta-llama/Llama-3.3-70B-Instruct", _llama_params,
     2 * 70_553_706_496),
    ("qwq-32b", "Qwen/QwQ-32B", lambda c: _qwen2_params(c)[0], 2 * 32_763_876_352),
    ("qwen2.5-72b-instruct", "Qwen/Qwen2.5-72B-Instruct", lambda c: _qwen2_params(c)[0],
     2 * 72_706_203_648),
]


@pytest.mark.parametrize(("name", "hf_id", "count", "total"), CHECKPOINTS,
                         ids=[c[0] for c in CHECKPOINTS])
def test_hand_count_and_rank_weights_are_the_checkpoint(name: str, hf_id: str, count: Any,
                                                         total: int) -> None:
    cfg = bundled_config(name)
    assert cfg["_hf_ids"] == [hf_id]
    assert cfg["torch_dtype"] == "bfloat16" and "quantization_config" not in cfg
    assert 2 * count(cfg) == total
    assert hf_ids()[hf_id.lower()][1] == name
    assert rank_weight_bytes(hf_id) == total


def test_the_qwen2_reports_count_the_tensors_the_configs_give() -> None:
    # the reports' 'weight tensor count': 771 (QwQ-32B, 64 layers), 963 (Qwen2.5-72B, 80)
    assert _qwen2_params(bundled_config("qwq-32b"))[1] == 771
    assert _qwen2_params(bundled_config("qwen2.5-72b-instruct"))[1] == 963


# the fields that size a tensor or the RoPE cache
SHAPES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "vocab_size", "tie_word_embeddings", "torch_dtype")
MOE_SHAPES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "head_dim", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
              "vocab_size", "tie_word_embeddings", "torch_dtype")


@pytest.mark.parametrize(("name", "stand_in", "shapes", "context"), [
    ("qwen3-coder-30b-a3b-instruct", "qwen3-30b-a3b", MOE_SHAPES, (262144, 40960)),
    ("qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b", MOE_SHAPES, (262144, 40960)),
    ("llama-3.3-70b-instruct", "llama-3.1-70b", SHAPES, (131072, 131072)),
    ("qwq-32b", "qwen2.5-32b", SHAPES, (131072, 131072)),
])
def test_each_has_its_former_stand_ins_tensors_and_its_own_context(
        name: str, stand_in: str, shapes: tuple[str, ...], context: tuple[int, int]) -> None:
    own, other = bundled_config(name), bundled_config(stand_in)
    assert all(own[k] == other[k] for k in shapes)
    assert (own["max_position_embeddings"], other["max_position_embeddings"]) == context
    assert load_model(name).max_position_embeddings == context[0]


def _row(rid: int) -> dict[str, Any]:
    return next(r for r in PUBLISHED if r["id"] == rid)


def test_row_2456_runs_the_coder_bundle_without_an_override() -> None:
    row = _row(2456)
    assert row["memprof_run"]["memprof_model"] == "qwen3-coder-30b-a3b-instruct"
    assert "hf_overrides" not in row["memprof_run"]
    est, _ = row_estimate(row)
    assert est.max_model_len == 131072
    # 'Model loading took 56.93 GiB': the index total plus the RoPE cache at 262,144 positions
    assert abs(est.weights_bytes_max / GiB / 56.93 - 1) < 0.005
    assert est.weights_bytes_max > 61_064_245_248


def test_row_701_runs_the_llama33_bundle() -> None:
    row = _row(701)
    assert row["memprof_run"]["memprof_model"] == "llama-3.3-70b-instruct"
    est, _ = row_estimate(row)
    # '#tokens: 2795207' (TP8, H200)
    assert abs(est.kv_cache_tokens / 2_795_207 - 1) < 0.005


def test_explain_resolves_the_llama33_command_line_to_the_bundle(tmp_path: Path) -> None:
    # row 701's quote starts with 'sglang.launch_server --model meta-llama/Llama-3.3-70B-Instruct'
    log = tmp_path / "row.log"
    log.write_text(_row(701)["quote"], encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(log), "--gpu", "H200", "-f", "json"])
    assert code in (0, 1), err.getvalue()
    assert json.loads(out.getvalue())["deployment"]["model"] == "llama-3.3-70b-instruct"
