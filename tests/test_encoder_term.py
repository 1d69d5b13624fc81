"""The multimodal encoder in vLLM V1's profile run (``memprof/core/terms/encoder.py``) and its
settings (``--limit-mm-per-prompt``, ``--mm-processor-kwargs``), against hand calculations from
vLLM 0.11.0: ``qwen2_vl.py`` ``Qwen2VLProcessingInfo`` (the largest image and video),
``encoder_cache_manager.py`` ``compute_mm_encoder_budget``, ``v1/worker/utils.py``
``MultiModalBudget.get_max_items`` and ``gpu_model_runner.py`` ``profile_run``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memprof.core.models import load_model
from memprof.core.models.multimodal import (
    encoder_budget,
    largest_item,
    mm_limits,
    processor_limits,
)
from tests.cli_helpers import invoke, one_error

VL = "qwen2.5-vl-7b-instruct"


def _components(*argv: str) -> dict[str, int]:
    code, out, err = invoke(["estimate", "--gpu", "H100", "-f", "json", *argv])
    assert code == 0, err
    rank: dict[str, Any] = json.loads(out)["ranks"][0]
    return {c["name"]: c["bytes"] for c in rank["components"]}


def test_the_largest_image_and_video() -> None:
    v = load_model(VL).vision
    assert v is not None
    # max_pixels 12845056 = 3584² → a 3584 × 3584 image: (3584/14)² patches / 2² = 16384 tokens
    assert largest_item(v, v.processor, "image", 32768).encoder_tokens == 16384
    # a video of the most frames whose tokens fit max_model_len: 4 frames → 2 × 16384
    video = largest_item(v, v.processor, "video", 32768)
    assert (video.frames, video.encoder_tokens) == (4, 32768)
    # at most 14 frames (_MAX_FRAMES_PER_VIDEO): 7 × 16384
    assert largest_item(v, v.processor, "video", 128000).encoder_tokens == 7 * 16384


def test_the_budget_takes_the_modality_with_most_tokens() -> None:
    v = load_model(VL).vision
    assert v is not None
    both = encoder_budget(v, limits=mm_limits(None, v.modalities), max_model_len=32768,
                          max_num_batched_tokens=8192, max_num_seqs=256)
    assert both is not None
    assert (both.item.modality, both.budget, both.items) == ("video", 32768, 1)
    limits = mm_limits('{"video": {"count": 0}}', v.modalities)
    # budget max(65536, 16384) = 65536 → 4 images of 16384 tokens; 0.11.0 - 0.12.0 pad each
    # item's output to the budget before caching it (output.new_zeros((encoder_budget, …))),
    # 0.13.0 on cache the outputs as they are
    for version, rows in (("0.11.0", 4 * 65536), ("0.13.0", 4 * 16384), ("0.33.0", 4 * 16384)):
        images = encoder_budget(v, limits=limits, max_model_len=32768,
                                max_num_batched_tokens=65536, max_num_seqs=256,
                                version=version)
        assert images is not None
        assert (images.item.modality, images.budget, images.items, images.cached_rows) == (
            "image", 65536, 4, rows), version
    assert encoder_budget(v, limits=mm_limits("image=0,video=0", v.modalities),
                          max_model_len=32768, max_num_batched_tokens=8192,
                          max_num_seqs=256) is None


def test_max_pixels_shrinks_the_largest_image() -> None:
    v = load_model(VL).vision
    assert v is not None
    p = processor_limits(v.processor, '{"max_pixels": 1003520}')
    # to 0.12.0, a 9999999² image resized: sqrt(1003520) = 1001.8 → 35 × 28 = 980 a side
    assert largest_item(v, p, "image", 32768, "0.12.0").encoder_tokens == 35 * 35
    # from 0.13.0, 1003520 // 28² = 1280 merged patches factorised (32 × 40)
    assert largest_item(v, p, "image", 32768, "0.13.0").encoder_tokens == 1280


def test_qwen3_vl_video_by_release() -> None:
    v = load_model("qwen3-vl-4b-instruct").vision
    assert v is not None
    p = v.processor
    # 0.11.0: the most frames (≤ 24576) of the 4096² image within 25165824 clip pixels:
    # 24576 frames of 32 × 32 → 12288 tokens, budgeted × 12.5
    old = largest_item(v, p, "video", 32768, "0.11.0")
    assert (old.frames, old.encoder_tokens, old.budget_tokens) == (24576, 12288, 153600)
    mid = largest_item(v, p, "video", 32768, "0.13.0")
    assert (mid.encoder_tokens, mid.budget_tokens) == (12288, 12288)
    # 0.15.0 on: two frames of the largest image within 25165824 // 2 pixels: 12288 merged
    # patches (96 × 128 factor pair) → 12288 tokens
    new = largest_item(v, p, "video", 32768, "0.15.0")
    assert (new.frames, new.encoder_tokens, new.budget_tokens) == (2, 12288, 12288)
    assert largest_item(v, p, "image", 32768, "0.15.0").encoder_tokens == 16384


def test_releases_before_the_model_or_the_modelled_profile() -> None:
    code, _out, err = invoke(["estimate", "--model", "qwen3-vl-4b-instruct", "--gpu", "H100",
                              "--engine-version", "0.10.2"])
    assert code == 2
    one_error(err, "has no qwen3-vl-4b-instruct architecture")
    comps = _components("--model", VL, "--engine-version", "0.10.2", "--max-model-len", "32768")
    assert comps["encoder profile (not modelled at this release)"] == 0
    assert "encoder cache (profile run)" not in comps


def test_the_encoder_terms_by_hand() -> None:
    # one sequence: the text run's peak is the MLP, and the vision forward sets the profile's
    comps = _components("--model", VL, "--max-model-len", "32768",
                        "--max-num-batched-tokens", "8192", "--max-num-seqs", "1",
                        "--limit-mm-per-prompt", '{"video": 0}', "--engine-version", "0.19.0")
    # one 16384-token image; budget max(8192, 16384) = 16384; output 16384 × 3584 × 2 B
    assert comps["encoder cache (profile run)"] == 16384 * 3584 * 2
    patches, h, i = 16384 * 4, 1280, 3420
    # pixels in the model dtype: vLLM's processor casts the HF processor's fp32 output
    pixels = patches * 3 * 2 * 14 * 14 * 2
    # the V1 runner's profile_run keeps the dummy batch (its GPU pixels) through the text run
    assert comps["encoder inputs held (profile run)"] == pixels
    attention = patches * (h + 10 * h) * 2
    mlp = patches * (2 * h + 3 * i) * 2
    forward = pixels + max(attention, mlp)
    text_peak = comps["activation peak (profile run)"]
    assert comps["vision encoder forward (profile run)"] == max(
        0, forward - text_peak - comps["encoder cache (profile run)"] - pixels)
    assert comps["vision encoder forward (profile run)"] > 0
    assert "deepstack buffers" not in comps


def test_model_runner_v2_holds_no_encoder_inputs_through_the_text_run() -> None:
    """0.33.0's V2 runner batches the dummy items inside execute_mm_encoder: the forward is
    the same, nothing is held beside the cache."""
    argv = ("--model", VL, "--max-model-len", "32768", "--max-num-batched-tokens", "8192",
            "--max-num-seqs", "1", "--limit-mm-per-prompt", '{"video": 0}')
    v1 = _components(*argv, "--engine-version", "0.19.0")
    v2 = _components(*argv, "--engine-version", "0.33.0")
    assert "encoder inputs held (profile run)" not in v2
    held = v1["encoder inputs held (profile run)"]
    assert (v2["vision encoder forward (profile run)"]
            == v1["vision encoder forward (profile run)"] + held)


def test_qkv_all_gather_of_the_vision_attention_ends_at_0_11_1() -> None:
    """0.11.0's split_qkv all-gathers qkv at TP > 1 (3H a patch); vllm-project/vllm#28271
    (first in 0.11.1) keeps each rank's heads."""
    argv = ("--model", VL, "-tp", "2", "--max-model-len", "32768",
            "--max-num-batched-tokens", "8192", "--max-num-seqs", "1",
            "--limit-mm-per-prompt", '{"video": 0}')
    old = _components(*argv, "--engine-version", "0.11.0")
    new = _components(*argv, "--engine-version", "0.11.1")
    patches, h, i, tp = 16384 * 4, 1280, 3420, 2
    pixels = patches * 3 * 2 * 14 * 14 * 2
    rest = (old["activation peak (profile run)"] + old["encoder cache (profile run)"]
            + old["encoder inputs held (profile run)"])
    mlp = patches * (2 * h + 3 * i // tp) * 2
    gathered = patches * (h + 10 * h // tp) * 2 + patches * 3 * h * 2
    assert old["vision encoder forward (profile run)"] == pixels + max(gathered, mlp) - rest
    local = patches * (h + 10 * h // tp) * 2
    assert new["vision encoder forward (profile run)"] == max(0, pixels + max(local, mlp) - rest)


def test_the_padding_era_holds_the_unpadded_outputs_through_the_text_run() -> None:
    """0.11.0 - 0.12.0 pad each output to the budget; the loop variable keeps the last unpadded
    output (a view of the tower's output) beside the padded cache and the pixels."""
    from memprof.core.models import load_model
    from memprof.core.models.multimodal import encoder_budget, mm_limits

    argv = ("--model", "qwen3-vl-4b-instruct", "--max-model-len", "65536",
            "--max-num-batched-tokens", "2048")
    comps = _components(*argv, "--engine-version", "0.11.0")
    tower = load_model("qwen3-vl-4b-instruct").vision
    assert tower is not None
    eb = encoder_budget(tower, limits=mm_limits(None, tower.modalities), max_model_len=65536,
                        max_num_batched_tokens=2048, max_num_seqs=256, version="0.11.0")
    assert eb is not None and eb.pad_to_budget and eb.item.encoder_tokens < eb.budget
    pixels = eb.encoder_tokens * 4 * tower.patch_inputs * 2
    outputs = eb.encoder_tokens * tower.embed_width * 2
    assert comps["encoder cache (profile run)"] == eb.items * eb.budget * tower.embed_width * 2
    assert comps["encoder inputs held (profile run)"] == pixels + outputs
    # 0.13.0 caches the outputs themselves: the pixels alone are held
    later = _components(*argv, "--engine-version", "0.13.0")
    eb13 = encoder_budget(tower, limits=mm_limits(None, tower.modalities), max_model_len=65536,
                          max_num_batched_tokens=2048, max_num_seqs=256, version="0.13.0")
    assert eb13 is not None
    assert later["encoder inputs held (profile run)"] == (
        eb13.encoder_tokens * 4 * tower.patch_inputs * 2)


def test_deepstack_buffers_are_allocated_with_the_model() -> None:
    comps = _components("--model", "qwen3-vl-4b-instruct", "--max-num-batched-tokens", "8192",
                        "--max-model-len", "32768")
    assert comps["deepstack buffers"] == 3 * 8192 * 2560 * 2


def test_no_modality_no_tower_and_no_encoder_profile() -> None:
    comps = _components("--model", VL, "--limit-mm-per-prompt", '{"image": 0, "video": 0}')
    assert not any("encoder" in n or "vision" in n for n in comps)


def test_text_models_gain_no_encoder_term() -> None:
    comps = _components("--model", "qwen2.5-7b-instruct")
    assert not any("encoder" in n or "vision" in n or "deepstack" in n for n in comps)


@pytest.mark.parametrize(("argv", "text"), [
    (["--limit-mm-per-prompt", "abc"], "neither JSON nor"),
    (["--limit-mm-per-prompt", "[1]"], "must be a JSON object"),
    (["--limit-mm-per-prompt", '{"audio": 1}'], "'audio', a modality this model does not take"),
    (["--limit-mm-per-prompt", '{"image": -1}'], "is not an item count"),
    (["--limit-mm-per-prompt", "image=two"], "is not an item count"),
    (["--limit-mm-per-prompt", '{"image": {"count": 1, "width": 512}}'], "'width'"),
    (["--mm-processor-kwargs", '{"fps": 2}'], "'fps' is not modelled"),
    (["--mm-processor-kwargs", '{"max_pixels": 0}'], "must be a positive pixel count"),
    (["--mm-processor-kwargs", '{"min_pixels": 9000000, "max_pixels": 3136}'], "is above"),
    # SGLang's vision path is modelled at the releases read (engines/sglang_vlm.py), not at a
    # source snapshot
    (["--engine", "sglang", "--engine-version", "main@d315eb7"],
     "has not read SGLang main@d315eb7's vision path"),
])
def test_bad_multimodal_input_is_one_error(argv: list[str], text: str) -> None:
    code, out, err = invoke(["estimate", "--model", VL, "--gpu", "H100", *argv])
    assert (code, out) == (2, "")
    one_error(err, text)


def test_a_text_model_refuses_the_multimodal_flags() -> None:
    code, _out, err = invoke(["estimate", "--model", "qwen3-32b", "--gpu", "H100",
                              "--limit-mm-per-prompt", '{"image": 1}'])
    assert code == 2
    one_error(err, "has no vision tower")


def test_model_runner_v2_profiles_the_encoder_on_the_first_stage_only() -> None:
    def stages(version: str) -> list[set[str]]:
        code, out, err = invoke(["estimate", "--model", VL, "--gpu", "H100", "-f", "json",
                                 "-pp", "2", "--max-model-len", "32768",
                                 "--engine-version", version])
        assert code == 0, err
        return [{c["name"] for c in r["components"]} for r in json.loads(out)["ranks"]]

    v1 = stages("0.28.0")
    assert all("encoder cache (profile run)" in names for names in v1)
    v2 = stages("0.29.0")
    assert "encoder cache (profile run)" in v2[0]
    assert "encoder cache (profile run)" not in v2[1]


def test_data_mode_runs_the_whole_tower_on_a_share_of_the_items() -> None:
    argv = ("--model", VL, "-tp", "2", "--max-model-len", "32768", "--max-num-seqs", "1",
            "--limit-mm-per-prompt", '{"video": 0}', "--engine-version", "0.19.0")
    weights = _components(*argv)
    data = _components(*argv, "--mm-encoder-tp-mode", "data")
    # one 16384-token image either way: the cache is the same (outputs gathered on every rank),
    # and every rank's dummy batch holds the item's pixels
    assert data["encoder cache (profile run)"] == weights["encoder cache (profile run)"]
    patches, h, i = 16384 * 4, 1280, 3420
    pixels = patches * 3 * 2 * 14 * 14 * 2
    assert data["encoder inputs held (profile run)"] == pixels
    assert weights["encoder inputs held (profile run)"] == pixels
    # the whole tower on the rank (tp = 1 in the widths), no qkv all-gather at 0.19.0
    forward = pixels + max(patches * (h + 10 * h) * 2, patches * (2 * h + 3 * i) * 2)
    assert data["vision encoder forward (profile run)"] == max(
        0, forward - data["activation peak (profile run)"] - data["encoder cache (profile run)"]
        - pixels)
    assert data["vision encoder forward (profile run)"] > weights[
        "vision encoder forward (profile run)"] > 0


@pytest.mark.parametrize(("argv", "text"), [
    (["--mm-encoder-tp-mode", "data", "--engine-version", "0.10.1"], "not in vLLM 0.10.1"),
    (["--mm-encoder-tp-mode", "pipeline"], "pipeline"),
])
def test_bad_encoder_tp_mode_is_one_error(argv: list[str], text: str) -> None:
    code, out, err = invoke(["estimate", "--model", VL, "--gpu", "H100", *argv])
    assert (code, out) == (2, "")
    one_error(err, text)


def test_qwen3_vl_keeps_its_position_embeddings_through_the_blocks() -> None:
    """Qwen3_VisionTransformer.forward references the interpolated pos_embeds [P, H] through
    every block (0.11.0 a local, 0.19.0 encoder_metadata): one P·H·s beside the block's peak."""
    from memprof.core.models import load_model

    tower = load_model("qwen3-vl-4b-instruct").vision
    assert tower is not None and tower.kept_pos_embeds
    comps = _components("--model", "qwen3-vl-4b-instruct", "--max-model-len", "32768",
                        "--max-num-batched-tokens", "8192", "--max-num-seqs", "1",
                        "--limit-mm-per-prompt", '{"video": 0}', "--engine-version", "0.19.0")
    tokens = comps["encoder cache (profile run)"] // (tower.embed_width * 2)
    p, h, i = tokens * 4, tower.hidden, tower.intermediate
    pixels = p * tower.patch_inputs * 2
    pos = p * h * 2
    attn, mlp = p * (h + 10 * h) * 2, p * (2 * h + 2 * i) * 2
    deep = tower.deepstack_levels * tokens * tower.out_hidden * 2
    forward = pixels + pos + max(attn, mlp) + deep
    assert comps["vision encoder forward (profile run)"] == max(
        0, forward - comps["activation peak (profile run)"] - comps["encoder cache (profile run)"]
        - comps["encoder inputs held (profile run)"])
    assert comps["vision encoder forward (profile run)"] > 0
    qwen2_5 = load_model(VL).vision  # Qwen2.5-VL's tower has no learnt position table
    assert qwen2_5 is not None and not qwen2_5.kept_pos_embeds
