"""Qwen2.5-3B-Instruct, bundled from its verbatim HF config (vendored in sophgo/LLM-TPU) as the
stand-in for the Qwen2.5-3B-Instruct-AWQ checkpoint of rows 1711/1712 of
tests/data/published.json (vLLM 0.29.0 under WSL2 on an RTX 4050 Laptop GPU): the bf16
checkpoint's bytes by hand, memprof's rank weights held to them within 0.5 %, and the AWQ run
held to the load figure the log prints."""

from __future__ import annotations

from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate

# model.safetensors.index.json metadata.total_size of Qwen/Qwen2.5-3B-Instruct: the hand count
# below (36 layers of q/k/v with biases, o, the gated MLP, two norms; the tied embedding once)
QWEN25_3B_BYTES = 6_171_877_376


def test_the_hand_count() -> None:
    cfg = bundled_config("qwen2.5-3b-instruct")
    h, layers, heads, kv, inter, vocab = (int(cfg[k]) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size"))
    hd = h // heads
    per_layer = (h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd) + heads * hd * h
                 + 3 * inter * h + 2 * h)
    assert cfg["tie_word_embeddings"] is True
    assert 2 * (layers * per_layer + vocab * h + h) == QWEN25_3B_BYTES


def test_rank_weights_match_the_checkpoint() -> None:
    got = rank_weight_bytes("Qwen/Qwen2.5-3B-Instruct", "sm89", "0.29.0")
    assert abs(got - QWEN25_3B_BYTES) <= 0.005 * QWEN25_3B_BYTES, got
    assert got >= QWEN25_3B_BYTES


def test_the_awq_rows_run_on_the_laptop_card_at_its_wsl_total() -> None:
    # the calibration refuses both rows (the sweep settings they ran are not stated); their card,
    # KV layout and load figure do not depend on those settings
    import copy

    import pytest

    from tests.test_published_distribution import Refused

    rows = {}
    for r in PUBLISHED:
        if r["id"] in (1711, 1712):
            with pytest.raises(Refused, match="sweep configuration"):
                row_estimate(r)
            rows[r["id"]] = copy.deepcopy(r)
            del rows[r["id"]]["memprof_run"]["unstated"]
    for row in rows.values():
        est, _ = row_estimate(row)
        assert est.gpu.name == "RTX-4050-Laptop" and est.gpu.total_bytes == 6141 * 2**20
        assert est.verdict == "fits" and est.quant is not None
        assert est.kv_cache_bytes_per_token == 36 * 2 * 128 * 2 * 2  # 36 KiB (the notes)
    # the AWQ load: 'Model loading took 1.95 GiB' (row 1711) within 0.5 %
    est, _ = row_estimate(rows[1711])
    assert abs(est.weights_bytes_max / GiB / 1.95 - 1) < 0.005


def test_the_issue_row_runs_the_same_checkpoint_and_starts() -> None:
    # row 163 (vLLM issue #15204, 0.8.1, `vllm serve Qwen/Qwen2.5-3B-Instruct-AWQ` on an RTX
    # 3090, every setting the release's default): the checkpoint rows 1711/1712 run, mapped the
    # same way (memprof_run: the bundled bf16 config with awq_marlin, vLLM's runtime conversion
    # of an AWQ checkpoint on sm80+); the issue reports a start ("it works good")
    row = next(r for r in PUBLISHED if r["id"] == 163)
    est, _ = row_estimate(row)
    assert est.gpu.name == "RTX-3090"
    assert est.quant is not None
    assert (est.quant.method, est.quant.bits, est.quant.group_size) == ("awq", 4, 128)
    assert est.kv_cache_bytes_per_token == 36 * 2 * 128 * 2 * 2  # the checkpoint's 36 KiB
    assert est.verdict == "fits"
    assert row["observed"]["startup_failed"] is False
