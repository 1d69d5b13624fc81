"""deepseek-ai/DeepSeek-V4-Flash-0731 bundled from its verbatim HF ``config.json`` (issue 24: the
calibration rows 20 and 153 run this checkpoint): the bundled text is the checkpoint's file byte
for byte, it differs from DeepSeek-V4-Flash's only by the DSpark drafter, and memprof's rank
weights are the main model the two checkpoints' indexes give.

The figures (sources: ``configs/models/deepseek-v4-flash-0731.json`` ``_source``): the config at
HF revision 7872f01b is 1,888 bytes with SHA-256 6c8f3d2d…; its model.safetensors.index.json
has total_size 166,878,536,440 B over 72,317 tensors, 4,705 of them the three DSpark drafter
stages mtp.0-2. DeepSeek-V4-Flash's index (``configs/models/deepseek-v4-flash.json``
``_source``) has 159,609,485,896 B over 69,187 tensors with one MTP stage. vLLM builds the
drafter only under ``--speculative-config``, so without it neither checkpoint's MTP/DSpark
stages are loaded; the main model is what a rank holds."""

from __future__ import annotations

import hashlib
import json

from weight_helpers import bundled_config, rank_weight_bytes

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models import bundled_models
from memprof.core.models.load import hf_ids

NAME = "deepseek-v4-flash-0731"
CONFIG_BYTES = 1_888
CONFIG_SHA256 = "6c8f3d2d3b48707541b88f32f22ef3f0f8a6b57d8523281e2b8d3cdb0ae9a023"
TOTAL_0731 = 166_878_536_440  # main model + three DSpark stages
TOTAL_FLASH = 159_609_485_896  # main model + one MTP stage
DRAFTER_KEYS = {"dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                "dspark_markov_rank"}


def _checkpoint_text() -> str:
    """The bundled file without the two keys memprof adds (``_source``, ``_hf_ids``), which
    open it: what is left is the checkpoint's config.json as published."""
    text = bundled_models()[NAME].read_text(encoding="utf-8")
    head, sep, rest = text.partition('\n  ],\n')  # the end of the _hf_ids list
    assert sep and '"_hf_ids"' in head and '"_source"' in head
    return "{\n" + rest


def test_the_bundled_text_is_the_checkpoints_file() -> None:
    raw = _checkpoint_text().encode("utf-8")
    assert len(raw) == CONFIG_BYTES
    assert hashlib.sha256(raw).hexdigest() == CONFIG_SHA256
    c = bundled_config(NAME)
    assert c["_hf_ids"] == ["deepseek-ai/DeepSeek-V4-Flash-0731"]
    assert "7872f01b1d1fe23eabc4c98b48bffcef5a386062" in c["_source"]
    assert json.loads(raw) == {k: v for k, v in c.items() if not k.startswith("_")}


def test_it_is_v4_flash_plus_the_dspark_drafter() -> None:
    c, flash = bundled_config(NAME), bundled_config("deepseek-v4-flash")
    differ = {k for k in set(c) | set(flash)
              if not k.startswith("_") and c.get(k) != flash.get(k)}
    assert differ == DRAFTER_KEYS | {"compress_ratios"}
    layers = c["num_hidden_layers"]
    # one ratio a layer, then the drafter stages (three) where V4-Flash has its MTP block (one)
    assert c["compress_ratios"][:layers] == flash["compress_ratios"][:layers]
    assert c["compress_ratios"][layers:] == [0, 0, 0]
    assert flash["compress_ratios"][layers:] == [0]
    assert c["dspark_target_layer_ids"] == [layers - 3, layers - 2, layers - 1]


def test_rank_weights_are_the_main_model_of_both_indexes() -> None:
    assert hf_ids()["deepseek-ai/deepseek-v4-flash-0731"][1] == NAME
    main = rank_weight_bytes(NAME)
    assert main == rank_weight_bytes("deepseek-v4-flash")
    # main + 3 stages = TOTAL_0731 and main + 1 stage = TOTAL_FLASH: with equal stages the main
    # model is (3 TOTAL_FLASH - TOTAL_0731) / 2. The DSpark heads (Markov W1/W2, confidence)
    # are extra bytes of the 0731 stages only, so this hand figure is a lower bound.
    by_hand = (3 * TOTAL_FLASH - TOTAL_0731) // 2
    assert by_hand == 155_974_960_624
    assert 0 <= main - by_hand <= 0.005 * by_hand
    # and the drafter is what the index holds beyond it: three stages of about one MTP block
    stage = TOTAL_FLASH - main
    assert abs((TOTAL_0731 - main) - 3 * stage) <= 0.01 * 3 * stage


def test_estimates_are_v4_flash_ones() -> None:
    """No term reads the drafter's keys or the compress ratios past the last layer: the
    deployment of row 20 (TP2 H20 at 0.26.0, fp8 KV) estimates the same for both configs."""
    dep = Deployment(tp=2, engine_version="0.26.0", kv_cache_dtype="fp8",
                     max_model_len=121344, max_num_seqs=32, max_num_batched_tokens=8192)
    a = estimate(NAME, dep, gpu_name="H20")
    b = estimate("deepseek-v4-flash", dep, gpu_name="H20")
    assert a.kv_cache_tokens == b.kv_cache_tokens > 0
    assert a.weights_bytes_max == b.weights_bytes_max
