"""Checkpoints bundled so that refused calibration rows of ``tests/data/published.json`` run
(issues 24 and 26): each one's weight bytes counted by hand from its bundled config, held to
its safetensors index ``metadata.total_size`` where a public source quotes it, and to the row's
own load figure; then the row itself runs and predicts the logged start or failure.

Sources: each config's ``_source`` and the rows that name the checkpoint (their ``source``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, load_figure
from memprof.core.models import load_model
from memprof.core.models.load import hf_ids

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}


_config = bundled_config


def _rank_bytes(model: str, arch: str = "sm90", version: str = "0.7.1", tp: int = 1) -> int:
    return rank_weight_bytes(model, arch, version, tp)


def _qwen2_params(cfg: dict[str, Any]) -> int:
    """Parameters of a dense Qwen2 checkpoint by hand: q/k/v with biases, o without, the gated
    MLP, two norms per layer, the final norm, the embedding and (untied) the lm_head."""
    h, layers, heads, kv, inter, v = (int(cfg[k]) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size"))
    hd = h // heads
    per_layer = (h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd) + heads * hd * h
                 + 3 * inter * h + 2 * h)
    heads_out = 1 if cfg["tie_word_embeddings"] else 2
    return layers * per_layer + heads_out * v * h + h


# --- Qwen/Qwen2.5-32B-Instruct (published row 1203) ----------------------------------------------

# model.safetensors.index.json metadata.total_size of Qwen/Qwen2.5-32B-Instruct (771 tensors),
# as public files quote it (code-index file ids 71282492555: a model record naming the
# checkpoint with size_bytes 65527752704; 62544576184: 771 tensors, 32,763,876,352 parameters)
QWEN25_32B_TOTAL_SIZE = 65_527_752_704


def test_qwen25_32b_instruct_resolves_by_its_hf_id() -> None:
    assert hf_ids()["qwen/qwen2.5-32b-instruct"][1] == "qwen2.5-32b-instruct"
    spec = load_model("Qwen/Qwen2.5-32B-Instruct")
    assert spec.max_position_embeddings == 32768


def test_qwen25_32b_instruct_tp2_halves_all_but_the_replicas() -> None:
    # the hand count and the index total at TP1: tests/test_popular_checkpoint_weights.py
    params = _qwen2_params(_config("qwen2.5-32b-instruct"))
    assert 2 * params == QWEN25_32B_TOTAL_SIZE
    # TP2 halves every sharded tensor (vocab 152064 divides evenly); only the RMSNorms are
    # replicated, so a rank holds half the checkpoint plus half the norms
    cfg = _config("qwen2.5-32b-instruct")
    h, layers = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    norms = 2 * (layers * 2 * h + h)
    assert _rank_bytes("Qwen/Qwen2.5-32B-Instruct", "sm89", tp=2) == \
        (QWEN25_32B_TOTAL_SIZE - norms) // 2 + norms


def test_qwen25_32b_instruct_load_figure_is_row_1203_s() -> None:
    # vLLM issue #15815 (V0 0.7.1, TP2 on L40S, 44.42 GiB a rank): "Loading model weights took
    # 30.7098 GB" on both ranks (GiB: V0's model_runner divides by 2**30)
    e = estimate("Qwen/Qwen2.5-32B-Instruct", Deployment(engine_version="0.7.1", tp=2,
                                                         max_model_len=10000),
                 gpu_name="L40S")
    got = max(load_figure(e, r) for r in e.ranks) / GiB
    assert abs(got - 30.7098) / 30.7098 < 0.005


# --- meta-llama/Llama-3.2-1B-Instruct (published row 1204) ---------------------------------------

def _llama_params(cfg: dict[str, Any]) -> int:
    """Parameters of a dense Llama checkpoint by hand: q/k/v/o at the config's head_dim, the
    gated MLP, two norms per layer, the final norm and the embedding (once when tied)."""
    h, layers, heads, kv, hd, inter, v = (int(cfg[k]) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "intermediate_size", "vocab_size"))
    per_layer = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * inter * h + 2 * h
    return layers * per_layer + (1 if cfg["tie_word_embeddings"] else 2) * v * h + h


def test_llama32_1b_instruct_resolves_with_its_stated_head_dim() -> None:
    assert hf_ids()["meta-llama/llama-3.2-1b-instruct"][1] == "llama-3.2-1b-instruct"
    cfg = _config("llama-3.2-1b-instruct")
    # the config states head_dim (64, hidden / heads here); embeddings and head are tied
    assert cfg["head_dim"] == cfg["hidden_size"] // cfg["num_attention_heads"] == 64
    # its hand count against the checkpoint: tests/test_popular_checkpoint_weights.py
    assert _rank_bytes("meta-llama/Llama-3.2-1B-Instruct") == 2 * _llama_params(cfg)
    assert load_model("meta-llama/Llama-3.2-1B-Instruct").max_position_embeddings == 131072


def test_llama32_1b_instruct_row_1204_pool_and_load() -> None:
    # SGLang docs build of 2025-02-10 (0.4.2.post3, one 80 GB card, mem_fraction_static 0.88):
    # "Load weight begin. avail mem=78.81 GB" / "Load weight end. ... avail mem=76.37 GB" and
    # "max_total_num_tokens=2192531"
    from test_published_distribution import row_estimate

    e, _ = row_estimate(_ROWS[1204])
    assert abs(load_figure(e, e.ranks[0]) / GiB - (78.81 - 76.37)) / (78.81 - 76.37) < 0.01
    assert abs(e.kv_cache_tokens - 2_192_531) / 2_192_531 < 0.005


# --- Qwen/Qwen2.5-32B, and Qwen/QwQ-32B of its shapes (published row 1201) ----------------------

def test_qwen25_32b_base_weights_are_the_index_total_and_the_instruct_s() -> None:
    # the base checkpoint's index: 771 tensors, 32,763,876,352 parameters, 65,527,752,704 B
    # (code-index file id 62544576184, a training job's checks on Qwen2.5-32B)
    assert hf_ids()["qwen/qwen2.5-32b"][1] == "qwen2.5-32b"
    base, inst = _config("qwen2.5-32b"), _config("qwen2.5-32b-instruct")
    assert _qwen2_params(base) == _qwen2_params(inst) == 32_763_876_352
    for tp in (1, 2, 4):
        assert _rank_bytes("Qwen/Qwen2.5-32B", tp=tp) == \
            _rank_bytes("Qwen/Qwen2.5-32B-Instruct", tp=tp)
    assert _rank_bytes("Qwen/Qwen2.5-32B") == QWEN25_32B_TOTAL_SIZE
    # what differs is what the Instruct checkpoint changed, not a shape
    differ = {k for k in base if not k.startswith("_") and base[k] != inst[k]}
    assert differ == {"eos_token_id", "max_position_embeddings", "max_window_layers",
                      "rms_norm_eps"}
    assert load_model("Qwen/Qwen2.5-32B").max_position_embeddings == 131072


def test_qwq_32b_row_runs_its_own_config_with_the_logged_context() -> None:
    # row 1201's log (SGLang 0.4.3.post4, TP4 on L4): context_len=131072, the
    # max_position_embeddings of QwQ-32B's bundled config.json, which has the base's shapes
    row = _ROWS[1201]
    assert row["memprof_run"]["memprof_model"] == "qwq-32b"
    assert hf_ids()["qwen/qwq-32b"][1] == "qwq-32b"
    assert row["observed"]["context_len"] == load_model("qwq-32b").max_position_embeddings
    assert _qwen2_params(_config("qwq-32b")) == _qwen2_params(_config("qwen2.5-32b"))
    from test_published_distribution import row_estimate

    e, _ = row_estimate(row)
    # "Load weight end. ... mem usage=15.54 GB": a quarter of the checkpoint (15.26 GiB) plus
    # the RoPE cache and the load's allocator segments (memprof/core/terms/load_segments.py:
    # at TP4 the shards are not whole 2 MiB multiples); memprof lands within 0.1%
    got = load_figure(e, e.ranks[0]) / GiB
    assert QWEN25_32B_TOTAL_SIZE / 4 / GiB < got
    assert abs(got - 15.54) / 15.54 < 0.001


# --- meta-llama/Llama-2-7b-hf (published row 2476) ----------------------------------------------

# model.safetensors.index.json metadata.total_size of meta-llama/Llama-2-7b-hf, as public notes on
# the checkpoint quote it (code-index file ids 5792390170, 5842727729)
LLAMA2_7B_TOTAL_SIZE = 13_476_839_424


def test_llama2_7b_resolves_by_its_hf_id_with_its_32_kv_heads() -> None:
    assert hf_ids()["meta-llama/llama-2-7b-hf"][1] == "llama-2-7b-hf"
    cfg = _config("llama-2-7b-hf")
    spec = load_model("meta-llama/Llama-2-7b-hf")
    assert spec.max_position_embeddings == cfg["max_position_embeddings"] == 4096
    attn = spec.layers[0].attention
    assert (attn.num_kv_heads, attn.head_dim) == (32, 128)  # no GQA: the KV heads are the heads


def test_llama2_7b_weights_are_the_hand_count_and_the_index_total() -> None:
    cfg = _config("llama-2-7b-hf")
    assert "head_dim" not in cfg  # hidden / heads
    params = _llama_params({**cfg, "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"]})
    assert params == 6_738_415_616
    # the index also lists the 32 layers' rotary_emb.inv_freq buffers (64 fp32 each), which vLLM
    # skips on load: the fp16 tensors are the rest
    assert 2 * params + 32 * 64 * 4 == LLAMA2_7B_TOTAL_SIZE
    assert _rank_bytes("meta-llama/Llama-2-7b-hf", "sm80", "0.10.2") == 2 * params


# --- the rows these configs un-refuse -------------------------------------------------------------

@pytest.mark.parametrize(("row_id", "failed"), [
    (1203, False),  # Qwen2.5-32B-Instruct, vLLM 0.7.1 V0, TP2 on L40S: started
    (1204, False),  # Llama-3.2-1B-Instruct, SGLang 0.4.2.post3 docs build, one 80 GB card
    # QwQ-32B as qwen2.5-32b, SGLang 0.4.3.post4, TP4 on L4: a start, as logged, since the
    # decode graphs are SGLang's own 13 sizes up to --cuda-graph-max-bs 80 (memprof.core.engines.
    # sglang_graphs; under 1 GiB against the logged 0.93), not vLLM's 86 (2.51 GiB)
    (1201, False),
    (2476, False),  # Llama-2-7b-hf, vLLM 0.10.2 V1, one card of 79.25 GiB: started
])
def test_the_unrefused_rows_run_and_predict_the_logged_start(row_id: int, failed: bool) -> None:
    from test_published_distribution import outcome

    row = _ROWS[row_id]
    assert bool(row["observed"].get("startup_failed") or row["observed"].get("oom")) is failed
    o = outcome(row)
    assert o.refused is None, o.refused
    assert o.verdict == (failed, failed)
