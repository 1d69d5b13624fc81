"""Qwen/Qwen2.5-7B (base), deepseek-ai/DeepSeek-R1-Distill-Qwen-7B and -1.5B, bundled from their
own HF ``config.json`` quotations (sources: each config's ``_source``) so that the rows of
tests/data/published.json that ran them (311/312: Qwen2.5-7B; 313 and 167: the 7B distill; 1953:
the 1.5B distill) run on the checkpoint's config instead of a stand-in with ``hf_overrides``.

Three numbers are held equal for each: the parameters counted by hand from the bundled config
(bf16: two bytes each), the checkpoint's count as published, and memprof's rank-0 weight tensors
at TP1. The published counts: Qwen2.5-7B's safetensors index ``total_size`` 15,231,233,024 B (a
public manifest of the base checkpoint's 339-entry index, 'BASE_INDEXED_WEIGHT_BYTES', and a public
note quoting Qwen2.5-7B-Instruct's index, the same tensors); the 7B distill's 7,615,616,512
parameters (Ollama's ``general.parameter_count`` of its qwen2 GGUF with context_length 131072 and
rope freq_base 10000, quoted in a public test fixture); the 1.5B distill's 1,777,088,000 parameters
in 339 tensors (a public evidence check of the checkpoint and a pruning script's
``original_param_num`` for deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B). The rows' own load lines
hold memprof's weights (the tensors plus the RoPE cache vLLM builds) within 0.5%.
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
from memprof.core.models.load import hf_ids
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate

QWEN25_7B_BYTES = 15_231_233_024
R1_DISTILL_7B_PARAMS = 7_615_616_512
R1_DISTILL_1_5B_PARAMS = 1_777_088_000
# (bundled name, HF id, bf16 bytes of the checkpoint)
CHECKPOINTS = [
    ("qwen2.5-7b", "Qwen/Qwen2.5-7B", QWEN25_7B_BYTES),
    ("deepseek-r1-distill-qwen-7b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
     2 * R1_DISTILL_7B_PARAMS),
    ("deepseek-r1-distill-qwen-1.5b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
     2 * R1_DISTILL_1_5B_PARAMS),
]
# the fields that size a tensor of Qwen2ForCausalLM
SHAPES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "vocab_size", "tie_word_embeddings", "torch_dtype")


def _qwen2_params(c: dict[str, Any]) -> tuple[int, int]:
    """(parameters, tensors) of Qwen2ForCausalLM by hand: q/k/v with biases, o_proj without, a
    SwiGLU MLP, two RMSNorms a layer, the final norm, the embedding and an lm_head of its own
    when the embeddings are untied; head_dim is hidden / heads."""
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = h // heads
    layer = (h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd) + heads * hd * h
             + 3 * c["intermediate_size"] * h + 2 * h)
    heads_out = 1 if c["tie_word_embeddings"] else 2
    params = c["num_hidden_layers"] * layer + heads_out * c["vocab_size"] * h + h
    return params, c["num_hidden_layers"] * 12 + 1 + heads_out


def test_the_bundled_configs_are_the_checkpoints() -> None:
    q7, d7, d15 = (bundled_config(n) for n, _i, _b in CHECKPOINTS)
    assert "8434c8d19c396b2f95d92a67845a7c0a0e0dd512" in q7["_source"]
    assert "67580773169" in d15["_source"] and "44995554883" in d7["_source"]
    for cfg in (q7, d7, d15):
        assert cfg["architectures"] == ["Qwen2ForCausalLM"]
        assert cfg["max_position_embeddings"] == 131072
        assert cfg["tie_word_embeddings"] is False and cfg["use_sliding_window"] is False
    assert q7["rope_theta"] == 1000000.0 and d7["rope_theta"] == d15["rope_theta"] == 10000
    # the distill is Qwen2.5-7B's tensors; the base is the Instruct model's tensors
    assert all(d7[k] == q7[k] for k in SHAPES)
    inst = bundled_config("qwen2.5-7b-instruct")
    assert all(inst[k] == q7[k] for k in SHAPES)
    assert inst["max_position_embeddings"] == 32768  # why rows 311-313 needed an override
    assert (d15["hidden_size"], d15["num_attention_heads"], d15["num_key_value_heads"],
            d15["intermediate_size"], d15["vocab_size"]) == (1536, 12, 2, 8960, 151936)


@pytest.mark.parametrize(("name", "hf_id", "total"), CHECKPOINTS, ids=[c[0] for c in CHECKPOINTS])
def test_hand_count_and_rank_weights_are_the_checkpoint(name: str, hf_id: str,
                                                         total: int) -> None:
    params, tensors = _qwen2_params(bundled_config(name))
    assert 2 * params == total
    assert tensors == 339  # 28 layers in each
    assert hf_ids()[hf_id.lower()][1] == name
    assert rank_weight_bytes(hf_id) == total


def _row(rid: int) -> dict[str, Any]:
    return next(r for r in PUBLISHED if r["id"] == rid)


@pytest.mark.parametrize(("rid", "model", "logged_gib"), [
    (311, "qwen2.5-7b", 14.2717),                     # 'Model loading took 14.2717 GiB'
    (312, "qwen2.5-7b", 7.1441),                      # per rank at TP2
    (313, "deepseek-r1-distill-qwen-7b", 7.1441),     # per rank at TP2
    (1953, "deepseek-r1-distill-qwen-1.5b", 3.3465),  # 'Model loading took 3.3465 GB' (GiB)
])
def test_the_rows_run_their_checkpoint_within_half_a_percent_of_the_load_line(
        rid: int, model: str, logged_gib: float) -> None:
    row = _row(rid)
    assert row["memprof_run"]["memprof_model"] == model
    assert "hf_overrides" not in row["memprof_run"]
    est, _ = row_estimate(row)
    assert abs(est.weights_bytes_max / GiB / logged_gib - 1) < 0.005


def test_the_sglang_row_runs_the_checkpoint_context() -> None:
    # row 167 logs context_len=131072: the checkpoint's own positions, no max_model_len override
    row = _row(167)
    assert "max_model_len" not in row["memprof_run"]
    est, _ = row_estimate(row)
    assert est.max_model_len == 131072
    assert row["memprof_run"]["memprof_model"] == "deepseek-r1-distill-qwen-7b"


def _explain(quote: str, tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    log = tmp_path / "row.log"
    log.write_text(quote, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["explain", str(log), *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("rid", "gpu", "model"), [
    (313, "RTX-3090", "deepseek-r1-distill-qwen-7b"),
    (1953, "A10", "deepseek-r1-distill-qwen-1.5b"),
])
def test_explain_resolves_the_logged_hf_id_to_the_bundle(rid: int, gpu: str, model: str,
                                                         tmp_path: Path) -> None:
    # the quote names the HF id (313: its ModelScope download; 1953: vllm serve's model_tag);
    # the card is not in either log
    code, out, err = _explain(_row(rid)["quote"], tmp_path, "--gpu", gpu, "-f", "json")
    assert code in (0, 1), err
    assert json.loads(out)["deployment"]["model"] == model


def test_explain_of_a_local_qwen25_7b_folder_suggests_the_base_bundle(tmp_path: Path) -> None:
    # rows 311/312 name a local folder ('/home/08_vllm/qwen/Qwen2___5-7B', ModelScope's spelling
    # of Qwen2.5-7B: '___' stands for '.'), no HF id: explain reads it as the bundled base
    # checkpoint and asks next for what the log lacks, the card, not for --model
    code, _out, err = _explain(_row(311)["quote"], tmp_path)
    assert code == 2
    assert "--model" not in err and "GPU's total memory" in err
    code, out, err = _explain(_row(311)["quote"], tmp_path, "--gpu", "RTX-3090")
    assert code == 0, err
    assert "qwen2.5-7b" in out.lower()
