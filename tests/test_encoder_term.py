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
    images = encoder_budget(v, limits=mm_limits('{"video": {"count": 0}}', v.modalities),
                            max_model_len=32768, max_num_batched_tokens=65536, max_num_seqs=256)
    assert images is not None
    # budget max(65536, 16384) = 65536 → 4 images of 16384 tokens; profile_run pads each
    # item's output to the budget before caching it (output.new_zeros((encoder_budget, …)))
    assert (images.item.modality, images.budget, images.items, images.cached_rows) == (
        "image", 65536, 4, 4 * 65536)
    assert encoder_budget(v, limits=mm_limits("image=0,video=0", v.modalities),
                          max_model_len=32768, max_num_batched_tokens=8192,
                          max_num_seqs=256) is None


def test_max_pixels_shrinks_the_largest_image() -> None:
    v = load_model(VL).vision
    assert v is not None
    p = processor_limits(v.processor, '{"max_pixels": 1003520}')
    # smart_resize: sqrt(1003520) = 1001.8 → 35 × 28 = 980 a side → 70² patches / 4
    assert largest_item(v, p, "image", 32768).encoder_tokens == 35 * 35


def test_the_encoder_terms_by_hand() -> None:
    comps = _components("--model", VL, "--max-model-len", "32768",
                        "--max-num-batched-tokens", "8192",
                        "--limit-mm-per-prompt", '{"video": 0}')
    # one 16384-token image; budget max(8192, 16384) = 16384; output 16384 × 3584 × 2 B
    assert comps["encoder cache (profile run)"] == 16384 * 3584 * 2
    patches, h, i = 16384 * 4, 1280, 3420
    pixels = patches * 3 * 2 * 14 * 14 * (4 + 2)
    attention = patches * (h + 10 * h) * 2
    mlp = patches * (2 * h + 3 * i) * 2
    forward = pixels + max(attention, mlp)
    text_peak = comps["activation peak (profile run)"]
    assert comps["vision encoder forward (profile run)"] == max(
        0, forward - text_peak - comps["encoder cache (profile run)"])
    assert "deepstack buffers" not in comps


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
    (["--engine", "sglang"], "does not model SGLang's vision encoder"),
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
